//! Batches: many independent messages (each with its own key, J0, AAD and length) in two launches per
//! sub-batch (`gcmx_batch_units`, `gcmx_batch_tags` of `cuda/gcm_batch.cu`, after `gcmx_batch_key_powers`
//! once per key set), following the work split documented in `cuda/gcmx_abi.h`. The whole tag of every
//! message is computed on the device.
//!
//! Host side of one sub-batch: messages and AADs are packed at 16-byte-aligned offsets into a lane's
//! page-locked staging (in parallel on scoped threads), uploaded with the message table, processed in
//! place, and downloaded with the tags in the same round trip. Sub-batches are bounded by
//! [`BATCH_BYTES`] and [`BATCH_MSGS`] and alternate between two lanes, so that one is packed and
//! unpacked on the CPU while the other is on the GPU.
//!
//! Wiped after every sub-batch: the device copies of the AADs, the message table (it holds J0), the
//! unit partial hashes and the tags, and the host staging of them; after an open also the device and
//! host copies of the data. After a failure nothing of the batch is kept: the lanes and device buffers
//! are released, each wiped as it is freed.
//!
//! Layer: above the runtime and the device keys.

use std::sync::{Arc, Mutex, MutexGuard};

use gcmx_core::{Direction, Error};
use zeroize::Zeroize;

use crate::abi::{self, GcmxBatchMsg};
use crate::keys::{BatchPowers, DeviceKeys};
use crate::runtime::{At, BatchArgs, DeviceMem, Gpu, Lane, Launch};

/// Most message bytes (after 16-byte padding of each) per sub-batch.
pub(crate) const BATCH_BYTES: usize = 128 << 20;
/// Most messages per sub-batch.
pub(crate) const BATCH_MSGS: usize = 1 << 20;
/// Lane staging buffers: message data, and [AADs | message table | tags].
const STAGE_DATA: usize = 0;
const STAGE_META: usize = 1;

/// One message of a batch: key index, J0 (wiped on drop), AAD, the buffer transformed in place, and the
/// full tag (computed when sealing, expected when opening).
pub(crate) struct Job<'a> {
    pub(crate) key: u32,
    pub(crate) j0: [u8; 16],
    pub(crate) aad: &'a [u8],
    pub(crate) buf: &'a mut [u8],
    pub(crate) tag: [u8; 16],
}

impl Drop for Job<'_> {
    fn drop(&mut self) {
        self.j0.zeroize();
        self.tag.zeroize();
    }
}

/// The device buffers of one sub-batch lane.
#[derive(Default)]
struct Set {
    lane: Option<Lane>,
    data: Option<Arc<DeviceMem>>,
    aad: Option<Arc<DeviceMem>>,
    msgs: Option<Arc<DeviceMem>>,
    units: Option<Arc<DeviceMem>>,
    tags: Option<Arc<DeviceMem>>,
}

/// Two sets per device, kept between calls.
#[derive(Default)]
pub(crate) struct BatchState {
    sets: [Set; 2],
}

/// A sub-batch in flight: which jobs, their layout, where the tags land.
struct InFlight {
    start: usize,
    end: usize,
    data_offs: Vec<usize>,
    data_total: usize,
    meta_len: usize,
    tags_at: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn round16(n: usize) -> usize {
    n.div_ceil(16) * 16
}

/// A device buffer of at least `n` bytes in `slot` (grown only: buffers are kept between calls).
fn ensure(
    gpu: &Arc<Gpu>,
    slot: &mut Option<Arc<DeviceMem>>,
    n: usize,
) -> Result<Arc<DeviceMem>, Error> {
    if slot.as_ref().is_none_or(|d| d.len() < n) {
        *slot = None;
        *slot = Some(DeviceMem::new(gpu, n.max(64))?);
    }
    slot.clone()
        .ok_or_else(|| crate::runtime::internal("batch buffer".into()))
}

/// Seal or open every job with key `job.key` of `keys` (checked here: `Error::InvalidInput` past the
/// end); sets every job's full tag. On an error every buffer and tag is wiped.
pub(crate) fn run(
    gpu: &Arc<Gpu>,
    keys: &DeviceKeys,
    powers: &BatchPowers,
    jobs: &mut [Job<'_>],
    dir: Direction,
) -> Result<(), Error> {
    for (i, j) in jobs.iter().enumerate() {
        gcmx_core::frame::check_lengths(j.aad.len(), j.buf.len())?;
        if j.key >= keys.count() {
            return Err(Error::InvalidInput(format!(
                "batch job {i}: key index {} past the last key ({} keys)",
                j.key,
                keys.count()
            )));
        }
    }
    let mut cuts = Vec::new();
    let mut start = 0usize;
    while start < jobs.len() {
        let (mut end, mut bytes) = (start, 0usize);
        while end < jobs.len() && end - start < BATCH_MSGS {
            let b = round16(jobs[end].buf.len());
            if end > start && bytes + b > BATCH_BYTES {
                break;
            }
            bytes += b;
            end += 1;
        }
        cuts.push((start, end));
        start = end;
    }
    let state = gpu.state::<BatchState>();
    let mut st = lock(&state);
    let mut flight: [Option<InFlight>; 2] = [None, None];
    let result = (|| {
        for (k, &(start, end)) in cuts.iter().enumerate() {
            let s = k % 2;
            if let Some(f) = flight[s].take() {
                finish(&mut st.sets[s], f, jobs, dir)?;
            }
            flight[s] = Some(launch(
                gpu,
                keys,
                powers,
                &mut st.sets[s],
                jobs,
                start,
                end,
                dir,
            )?);
        }
        for k in cuts.len()..cuts.len() + 2 {
            let s = k % 2;
            if let Some(f) = flight[s].take() {
                finish(&mut st.sets[s], f, jobs, dir)?;
            }
        }
        Ok(())
    })();
    if result.is_err() {
        // Nothing of a failed batch is kept: the lanes (after waiting) and the device buffers are
        // released, each wiped as it is freed.
        *st = BatchState::default();
        for j in jobs.iter_mut() {
            j.buf.zeroize();
            j.tag.zeroize();
        }
    }
    result
}

/// Describe, pack and upload jobs[start..end] into `set`, and queue its kernels, downloads and wipes.
#[allow(clippy::too_many_arguments)]
fn launch(
    gpu: &Arc<Gpu>,
    keys: &DeviceKeys,
    powers: &BatchPowers,
    set: &mut Set,
    jobs: &[Job<'_>],
    start: usize,
    end: usize,
    dir: Direction,
) -> Result<InFlight, Error> {
    let jobs = &jobs[start..end];
    let n = jobs.len();
    let nmsgs = u32::try_from(n).map_err(|_| crate::runtime::internal("sub-batch size".into()))?;
    let (mut data_offs, mut aad_offs) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut data_total, mut aad_total) = (0usize, 0usize);
    for j in jobs {
        data_offs.push(data_total);
        aad_offs.push(aad_total);
        data_total += round16(j.buf.len());
        aad_total += round16(j.aad.len());
    }
    let mut msgs: Vec<GcmxBatchMsg> = (0..n)
        .map(|i| GcmxBatchMsg {
            data_off: data_offs[i] as u64,
            data_len: jobs[i].buf.len() as u64,
            aad_off: aad_offs[i] as u64,
            aad_len: jobs[i].aad.len() as u64,
            j0: abi::le_words(&jobs[i].j0),
            key_index: jobs[i].key,
            tag_slot: i as u32,
            lane_first: 0,
            unit_first: 0,
        })
        .collect();
    let plan = abi::batch_plan(&mut msgs);
    let Some((total_lanes, total_units)) = plan else {
        msgs.iter_mut().for_each(|m| m.j0.zeroize());
        return Err(crate::runtime::internal(
            "batch plan overflows 32-bit lanes".into(),
        ));
    };
    // Host staging: [AADs (aad_total) | message table (64 n) | tags (16 n)].
    let msgs_at = aad_total;
    let tags_at = msgs_at + abi::BATCH_MSG_BYTES * n;
    let meta_len = tags_at + 16 * n;
    if set.lane.is_none() {
        set.lane = Some(Lane::new(gpu)?);
    }
    let lane = set
        .lane
        .as_mut()
        .ok_or_else(|| crate::runtime::internal("batch lane".into()))?;
    lane.reserve_host(STAGE_DATA, data_total.max(16))?;
    lane.reserve_host(STAGE_META, meta_len.max(16))?;
    {
        let stage = lane.host(STAGE_DATA)?;
        let mut regions: Vec<&mut [u8]> = Vec::with_capacity(n);
        let mut rest: &mut [u8] = &mut stage[..data_total];
        for j in jobs {
            let (a, b) = rest.split_at_mut(round16(j.buf.len()));
            regions.push(a);
            rest = b;
        }
        par_each(&mut regions, copy_threads(data_total), |i, r| {
            r[..jobs[i].buf.len()].copy_from_slice(jobs[i].buf);
        });
    }
    {
        let meta = lane.host(STAGE_META)?;
        let (aad_area, rest) = meta.split_at_mut(msgs_at);
        let mut regions: Vec<&mut [u8]> = Vec::with_capacity(n);
        let mut left: &mut [u8] = aad_area;
        for j in jobs {
            let (a, b) = left.split_at_mut(round16(j.aad.len()));
            regions.push(a);
            left = b;
        }
        par_each(&mut regions, copy_threads(aad_total), |i, r| {
            let a = jobs[i].aad;
            r[..a.len()].copy_from_slice(a);
            r[a.len()..].fill(0);
        });
        let mut outs: Vec<&mut [u8]> = rest[..abi::BATCH_MSG_BYTES * n]
            .chunks_mut(abi::BATCH_MSG_BYTES)
            .collect();
        par_each(
            &mut outs,
            copy_threads(abi::BATCH_MSG_BYTES * n),
            |i, out| {
                let mut b = [0u8; abi::BATCH_MSG_BYTES];
                msgs[i].encode(&mut b);
                out.copy_from_slice(&b);
                b.zeroize();
            },
        );
    }
    msgs.iter_mut().for_each(|m| m.j0.zeroize());
    let data = ensure(gpu, &mut set.data, data_total)?;
    let aad = ensure(gpu, &mut set.aad, aad_total)?;
    let dmsgs = ensure(gpu, &mut set.msgs, abi::BATCH_MSG_BYTES * n)?;
    let units = ensure(gpu, &mut set.units, 16 * total_units as usize)?;
    let tags = ensure(gpu, &mut set.tags, 16 * n)?;
    let lane = set
        .lane
        .as_mut()
        .ok_or_else(|| crate::runtime::internal("batch lane".into()))?;
    lane.upload(STAGE_META, 0, At::start(&aad), aad_total)?;
    lane.upload(
        STAGE_META,
        msgs_at,
        At::start(&dmsgs),
        abi::BATCH_MSG_BYTES * n,
    )?;
    lane.upload(STAGE_DATA, 0, At::start(&data), data_total)?;
    let args = BatchArgs {
        data: At::start(&data),
        data_len: data_total,
        aad: At::start(&aad),
        aad_len: aad_total,
        msgs: At::start(&dmsgs),
        nmsgs,
        keys: keys.all(),
        key_powers: powers.at(),
        nkeys: keys.count(),
        units: At::start(&units),
        nunits: total_units,
        tags: At::start(&tags),
        total_lanes,
        dir,
    };
    if total_lanes > 0 {
        lane.launch(Launch::BatchUnits(args))?;
    }
    lane.launch(Launch::BatchTags(args))?;
    lane.download(At::start(&tags), STAGE_META, tags_at, 16 * n)?;
    lane.download(At::start(&data), STAGE_DATA, 0, data_total)?;
    // Queued after the downloads: the table (J0), partial hashes, tags and AADs, and plaintext after an
    // open.
    lane.memset(At::start(&aad), aad_total)?;
    lane.memset(At::start(&dmsgs), abi::BATCH_MSG_BYTES * n)?;
    lane.memset(At::start(&units), 16 * total_units as usize)?;
    lane.memset(At::start(&tags), 16 * n)?;
    if dir == Direction::Open {
        lane.memset(At::start(&data), data_total)?;
    }
    Ok(InFlight {
        start,
        end,
        data_offs,
        data_total,
        meta_len,
        tags_at,
    })
}

/// Wait for a sub-batch, then copy its tags and results out to its jobs and wipe the staging.
fn finish(set: &mut Set, f: InFlight, jobs: &mut [Job<'_>], dir: Direction) -> Result<(), Error> {
    let lane = set
        .lane
        .as_mut()
        .ok_or_else(|| crate::runtime::internal("batch lane".into()))?;
    let jobs = &mut jobs[f.start..f.end];
    {
        let meta = lane.host(STAGE_META)?;
        for (i, j) in jobs.iter_mut().enumerate() {
            j.tag
                .copy_from_slice(&meta[f.tags_at + 16 * i..f.tags_at + 16 * i + 16]);
        }
        meta[..f.meta_len].zeroize();
    }
    let stage = lane.host(STAGE_DATA)?;
    let from: &[u8] = &stage[..f.data_total];
    let offs = &f.data_offs;
    par_each(jobs, copy_threads(f.data_total), |i, j| {
        let off = offs[i];
        let len = j.buf.len();
        j.buf.copy_from_slice(&from[off..off + len]);
    });
    if dir == Direction::Open {
        stage[..f.data_total].zeroize();
    }
    Ok(())
}

/// Run `f(i, &mut items[i])` for every item on up to `threads` scoped OS threads (contiguous ranges).
///
/// Not rayon: the callers hold the device's batch lock, and a rayon worker that waits inside a parallel
/// loop may steal an unrelated task (say, another batch from the caller's own `par_iter`) that then
/// blocks on the same lock: a deadlock. Scoped threads only ever run this closure.
fn par_each<T: Send>(items: &mut [T], threads: usize, f: impl Fn(usize, &mut T) + Sync) {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        for (i, it) in items.iter_mut().enumerate() {
            f(i, it);
        }
        return;
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (c, chunk) in items.chunks_mut(per).enumerate() {
            let f = &f;
            s.spawn(move || {
                for (k, it) in chunk.iter_mut().enumerate() {
                    f(c * per + k, it);
                }
            });
        }
    });
}

/// Threads worth using to copy `bytes` bytes: one per 4 MiB, at most the hardware threads (and 16).
fn copy_threads(bytes: usize) -> usize {
    let hw = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(16);
    (bytes >> 22).clamp(1, hw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn par_each_visits_every_item_once_with_its_index() {
        for threads in [1usize, 2, 3, 7, 64] {
            for n in [0usize, 1, 5, 100, 1001] {
                let mut v: Vec<(usize, u32)> = vec![(usize::MAX, 0); n];
                par_each(&mut v, threads, |i, it| {
                    it.0 = i;
                    it.1 += 1;
                });
                assert!(
                    v.iter().enumerate().all(|(i, &(j, c))| i == j && c == 1),
                    "threads {threads} n {n}"
                );
            }
        }
        assert_eq!(copy_threads(0), 1);
    }
}
