//! Host batches: many independent messages in host memory (each with its own key index, J0, AAD and
//! length) through the device-batch kernels (`cuda/gcm_dbatch.cu`, one launch per sub-batch, J0 given,
//! full tags back to the host for gcmx-core's framing to compare).
//!
//! The message bytes reach the GPU in one of two ways:
//! * **in place** (the usual case for buffers carved from one allocation): when every message starts on a
//!   16-byte boundary and the messages lie back to back in a few runs ("spans"), each span is page-locked
//!   once for the call (or already is, inside a [`crate::PinnedRegion`]) and copied to and from the
//!   device by DMA, span by span; the CPU touches no message byte;
//! * **packed**: otherwise each message is copied into page-locked staging at a 16-byte aligned offset
//!   (by up to [`pack_threads`] threads), and back out afterwards.
//!
//! Either way the CPU writes one 48-byte descriptor, J0 and (once per distinct AAD slice) the AAD per
//! message, and copies 16 tag bytes back. Sub-batches of at most [`BATCH_BYTES`] and [`BATCH_MSGS`]
//! alternate between two lanes, so that the host prepares one while the other is on the GPU, and the host
//! sleeps (rather than spins) while it waits.
//!
//! Wiped after every sub-batch: the device copies of the descriptors, J0s and AADs (queued memsets; the
//! kernel zeroes J0 in its own scratch), of the tags and verdicts, and the host staging of J0s and tags;
//! after an open also the device copy of the data and the packed staging. After a failure nothing of the
//! batch is kept: the lanes and device buffers are released, each wiped as it is freed.
//!
//! Layer: above the device-batch launches.

use std::sync::{Arc, Mutex, MutexGuard};

use gcmx_core::{Direction, Error};
use zeroize::Zeroize;

use crate::abi;
use crate::dbatch::{self, Regions};
use crate::keys::KeySet;
use crate::runtime::{
    At, DeviceMem, DirectIo, Gpu, Lane, Region, Scratch, direct_io_spans, spans_of,
};

/// Most message bytes (after 16-byte padding of each) per sub-batch.
pub(crate) const BATCH_BYTES: usize = 64 << 20;
/// Most messages per sub-batch.
pub(crate) const BATCH_MSGS: usize = 1 << 17;
/// Below this many message bytes the call packs rather than page-locking the caller's memory.
const IN_PLACE_MIN: usize = 1 << 20;
/// Lane staging buffers: packed message data, and [descriptors | J0s | AADs | tags | verdicts].
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

/// The device buffers of one lane, kept between calls.
#[derive(Default)]
struct Bufs {
    data: Option<Arc<DeviceMem>>,
    meta: Option<Arc<DeviceMem>>,
    out: Option<Arc<DeviceMem>>,
    scratch: Option<Scratch>,
}

/// Two lanes and their buffers per device.
#[derive(Default)]
pub(crate) struct BatchState {
    lanes: Vec<Lane>,
    bufs: [Bufs; 2],
}

/// What the host knows of a message while its buffer is lent to the transfers.
struct Meta<'a> {
    key: u32,
    j0: [u8; 16],
    aad: &'a [u8],
    len: usize,
    /// In-place mode: the message's span and its offset there.
    span: usize,
    span_off: usize,
}

impl Drop for Meta<'_> {
    fn drop(&mut self) {
        self.j0.zeroize();
    }
}

/// A piece of a span that a sub-batch moves: span, offset in it, bytes, offset in the device buffer.
#[derive(Clone, Copy, Debug)]
struct Piece {
    span: usize,
    off: usize,
    len: usize,
    dev: usize,
}

/// A sub-batch queued on a lane.
struct Sub {
    start: usize,
    end: usize,
    /// Device (and packed-staging) offset of each message's data.
    data_offs: Vec<usize>,
    data_total: usize,
    /// Staging offsets of the J0s, the tags and the verdicts.
    j0_at: usize,
    tags_at: usize,
    ver_at: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn round16(n: usize) -> usize {
    n.div_ceil(16) * 16
}

fn round256(n: usize) -> usize {
    n.div_ceil(256) * 256
}

/// Zero `b` in bulk (memset speed), in a way the compiler cannot drop: the buffer is handed to
/// `black_box` afterwards, as if it were read.
fn wipe(b: &mut [u8]) {
    b.fill(0);
    std::hint::black_box(&b);
}

/// A device buffer of at least `n` bytes in `slot` (grown only: buffers are kept between calls).
fn ensure(
    gpu: &Arc<Gpu>,
    slot: &mut Option<Arc<DeviceMem>>,
    n: usize,
) -> Result<Arc<DeviceMem>, Error> {
    if slot.as_ref().is_none_or(|d| d.len() < n) {
        *slot = None;
        *slot = Some(DeviceMem::new(gpu, n.max(256))?);
    }
    slot.clone()
        .ok_or_else(|| crate::runtime::internal("batch buffer".into()))
}

/// The lanes of a call: the state's own (packed mode) or the in-place transfers' (which hold them).
enum Io<'x, 'y> {
    Packed(&'x mut [Lane]),
    InPlace(&'x mut DirectIo<'y>),
}

impl Io<'_, '_> {
    fn lane(&mut self, i: usize) -> Result<&mut Lane, Error> {
        match self {
            Io::Packed(l) => {
                let n = l.len();
                l.get_mut(i)
                    .ok_or_else(|| crate::runtime::internal(format!("lane {i} of {n}")))
            }
            Io::InPlace(io) => io.lane(i),
        }
    }
}

/// Seal or open every job with key `job.key` of `keys` (checked here: `Error::InvalidInput` past the
/// end); sets every job's full tag. On an error every buffer and tag is wiped.
pub(crate) fn run(
    gpu: &Arc<Gpu>,
    keys: KeySet<'_>,
    jobs: &mut [Job<'_>],
    dir: Direction,
) -> Result<(), Error> {
    for (i, j) in jobs.iter().enumerate() {
        gcmx_core::frame::check_lengths(j.aad.len(), j.buf.len())?;
        if j.key >= keys.count {
            return Err(Error::InvalidInput(format!(
                "batch job {i}: key index {} past the last key ({} keys)",
                j.key, keys.count
            )));
        }
    }
    if jobs.is_empty() {
        return Ok(());
    }
    let mut metas: Vec<Meta<'_>> = jobs
        .iter()
        .map(|j| Meta {
            key: j.key,
            j0: j.j0,
            aad: j.aad,
            len: j.buf.len(),
            span: 0,
            span_off: 0,
        })
        .collect();
    let mut tags = vec![[0u8; 16]; jobs.len()];
    let result = {
        let mut bufs: Vec<&mut [u8]> = jobs.iter_mut().map(|j| &mut *j.buf).collect();
        run_bufs(gpu, keys, &mut metas, &mut bufs, &mut tags, dir)
    };
    match result {
        Ok(()) => {
            for (j, t) in jobs.iter_mut().zip(&tags) {
                j.tag = *t;
            }
            tags.zeroize();
            Ok(())
        }
        Err(e) => {
            for j in jobs.iter_mut() {
                j.buf.zeroize();
                j.tag.zeroize();
            }
            tags.zeroize();
            Err(e)
        }
    }
}

fn run_bufs(
    gpu: &Arc<Gpu>,
    keys: KeySet<'_>,
    metas: &mut [Meta<'_>],
    bufs: &mut [&mut [u8]],
    tags: &mut [[u8; 16]],
    dir: Direction,
) -> Result<(), Error> {
    let cuts = cut(metas);
    let state = gpu.state::<BatchState>();
    let mut st = lock(&state);
    while st.lanes.len() < 2 {
        let mut l = Lane::new(gpu)?;
        l.set_sleepy(true);
        st.lanes.push(l);
    }
    let BatchState { lanes, bufs: dev } = &mut *st;
    let total: usize = metas.iter().map(|m| m.len).sum();
    let aligned = bufs
        .iter()
        .all(|b| b.is_empty() || (b.as_ptr() as usize).is_multiple_of(16));
    let spans = spans_of(bufs);
    let in_place_worth =
        total >= IN_PLACE_MIN && aligned && spans.len() <= (metas.len() / 8).max(1);
    let mut r = None;
    if in_place_worth {
        for (k, sp) in spans.iter().enumerate() {
            let mut off = 0;
            for m in &mut metas[sp.first..sp.first + sp.count] {
                m.span = k;
                m.span_off = off;
                off += m.len;
            }
        }
        r = direct_io_spans(gpu, lanes, bufs, |io, _| {
            let mut io = Io::InPlace(io);
            pipeline(gpu, &mut io, dev, keys, metas, None, tags, &cuts, dir)
        });
    }
    let packed = r.is_none();
    let r = match r {
        Some(r) => r,
        None => {
            let mut io = Io::Packed(lanes);
            pipeline(gpu, &mut io, dev, keys, metas, Some(bufs), tags, &cuts, dir)
        }
    };
    if r.is_err() {
        // Nothing of a failed batch is kept: the lanes (after waiting) and the device buffers are
        // released, each wiped as it is freed.
        *st = BatchState::default();
        return r;
    }
    // After an open: the data copies (the device buffer, the packed staging).
    let mut wiped = Ok(());
    if dir == Direction::Open {
        for (lane, b) in lanes.iter_mut().zip(dev.iter()) {
            let w = (|| {
                if let Some(m) = &b.data {
                    lane.memset(At::start(m), m.len())?;
                }
                lane.wait()?;
                // (A lane that ran no packed sub-batch has no data staging.)
                if packed && let Ok(h) = lane.host(STAGE_DATA) {
                    wipe(h);
                }
                Ok(())
            })();
            if let Err(e) = w {
                wiped = Err(e);
            }
        }
    }
    if wiped.is_err() {
        *st = BatchState::default();
    }
    wiped
}

/// Sub-batches: consecutive jobs up to [`BATCH_BYTES`] and [`BATCH_MSGS`] (at least one job each).
fn cut(metas: &[Meta<'_>]) -> Vec<(usize, usize)> {
    let mut cuts = Vec::new();
    let mut start = 0usize;
    while start < metas.len() {
        let (mut end, mut bytes) = (start, 0usize);
        while end < metas.len() && end - start < BATCH_MSGS {
            let b = round16(metas[end].len);
            if end > start && bytes + b > BATCH_BYTES {
                break;
            }
            bytes += b;
            end += 1;
        }
        cuts.push((start, end));
        start = end;
    }
    cuts
}

/// Queue every sub-batch, alternating lanes; finish each one before its lane is reused.
#[allow(clippy::too_many_arguments)]
fn pipeline(
    gpu: &Arc<Gpu>,
    io: &mut Io<'_, '_>,
    dev: &mut [Bufs; 2],
    keys: KeySet<'_>,
    metas: &[Meta<'_>],
    mut packed: Option<&mut [&mut [u8]]>,
    tags: &mut [[u8; 16]],
    cuts: &[(usize, usize)],
    dir: Direction,
) -> Result<(), Error> {
    let mut flight: [Option<Sub>; 2] = [None, None];
    for (k, &(start, end)) in cuts.iter().enumerate() {
        let s = k % 2;
        if let Some(f) = flight[s].take() {
            finish(io.lane(s)?, f, packed.as_deref_mut(), tags, dir)?;
        }
        flight[s] = Some(queue(
            gpu,
            io,
            s,
            &mut dev[s],
            keys,
            metas,
            packed.as_deref(),
            start,
            end,
            dir,
        )?);
    }
    for s in [cuts.len() % 2, (cuts.len() + 1) % 2] {
        if let Some(f) = flight[s].take() {
            finish(io.lane(s)?, f, packed.as_deref_mut(), tags, dir)?;
        }
    }
    Ok(())
}

/// Describe, stage and upload metas[start..end] on lane `s`, and queue its launch, downloads and wipes.
#[allow(clippy::too_many_arguments)]
fn queue(
    gpu: &Arc<Gpu>,
    io: &mut Io<'_, '_>,
    s: usize,
    dev: &mut Bufs,
    keys: KeySet<'_>,
    metas: &[Meta<'_>],
    packed: Option<&[&mut [u8]]>,
    start: usize,
    end: usize,
    dir: Direction,
) -> Result<Sub, Error> {
    let ms = &metas[start..end];
    let n = ms.len();
    // Data layout: packed at 16-byte aligned offsets, or the pieces of spans at 256-byte aligned ones.
    let mut data_offs = Vec::with_capacity(n);
    let mut pieces: Vec<Piece> = Vec::new();
    let mut data_total = 0usize;
    if packed.is_some() {
        for m in ms {
            data_offs.push(data_total);
            data_total += round16(m.len);
        }
    } else {
        for m in ms {
            match pieces.last_mut() {
                Some(p) if m.len == 0 => {
                    data_offs.push(p.dev);
                }
                Some(p) if p.span == m.span && p.off + p.len == m.span_off => {
                    data_offs.push(p.dev + p.len);
                    p.len += m.len;
                    data_total = p.dev + p.len;
                }
                _ if m.len == 0 => data_offs.push(0),
                _ => {
                    let d = round256(data_total);
                    pieces.push(Piece {
                        span: m.span,
                        off: m.span_off,
                        len: m.len,
                        dev: d,
                    });
                    data_offs.push(d);
                    data_total = d + m.len;
                }
            }
        }
    }
    // Staging: [descriptors 48 n | J0s 16 n | AADs | tags 16 n | verdicts n].
    let j0_at = abi::DEV_MSG_BYTES * n;
    let aad_at = j0_at + 16 * n;
    // The same AAD slice as the previous message (a common case: one header for all) is staged once:
    // `staged` lists the messages whose AAD is copied. Empty AADs take no room and no copy.
    let mut aad_offs = Vec::with_capacity(n);
    let mut staged = Vec::new();
    let mut aad_total = 0usize;
    let mut last: Option<(*const u8, usize, usize)> = None;
    for (i, m) in ms.iter().enumerate() {
        let key = (m.aad.as_ptr(), m.aad.len());
        match last {
            _ if m.aad.is_empty() => aad_offs.push(0),
            Some((p, l, off)) if (p, l) == key => aad_offs.push(off),
            _ => {
                aad_offs.push(aad_total);
                last = Some((key.0, key.1, aad_total));
                staged.push(i);
                aad_total += round16(m.aad.len());
            }
        }
    }
    let tags_at = aad_at + aad_total;
    let ver_at = tags_at + 16 * n;
    let meta_len = ver_at + n;
    let lane = io.lane(s)?;
    lane.reserve_host(STAGE_META, meta_len)?;
    if packed.is_some() {
        lane.reserve_host(STAGE_DATA, data_total.max(16))?;
    }
    {
        let st = lane.host(STAGE_META)?;
        let (descs, rest) = st.split_at_mut(j0_at);
        let (j0s, rest) = rest.split_at_mut(16 * n);
        let aads = &mut rest[..aad_total];
        for (i, m) in ms.iter().enumerate() {
            abi::GcmxDevMsg {
                data_off: data_offs[i] as u64,
                data_len: m.len as u64,
                aad_off: aad_offs[i] as u64,
                aad_len: m.aad.len() as u64,
                nonce_off: 16 * i as u64,
                nonce_len: 16,
                key: m.key,
            }
            .encode(&mut descs[abi::DEV_MSG_BYTES * i..abi::DEV_MSG_BYTES * (i + 1)]);
            j0s[16 * i..16 * i + 16].copy_from_slice(&m.j0);
        }
        for &i in &staged {
            let (m, off) = (&ms[i], aad_offs[i]);
            let a = &mut aads[off..off + round16(m.aad.len())];
            a[..m.aad.len()].copy_from_slice(m.aad);
            a[m.aad.len()..].fill(0);
        }
    }
    if let Some(bufs) = packed {
        let stage = lane.host(STAGE_DATA)?;
        let mut regions: Vec<&mut [u8]> = Vec::with_capacity(n);
        let mut rest: &mut [u8] = &mut stage[..data_total];
        for m in ms {
            let (a, b) = rest.split_at_mut(round16(m.len));
            regions.push(a);
            rest = b;
        }
        let src = &bufs[start..end];
        par_each(&mut regions, pack_threads(data_total), |i, r| {
            r[..src[i].len()].copy_from_slice(src[i]);
        });
    }
    let data = ensure(gpu, &mut dev.data, data_total)?;
    let meta = ensure(gpu, &mut dev.meta, tags_at)?;
    let out = ensure(gpu, &mut dev.out, 17 * n)?;
    let lane = io.lane(s)?;
    lane.upload(STAGE_META, 0, At::start(&meta), tags_at)?;
    if packed.is_some() {
        lane.upload(STAGE_DATA, 0, At::start(&data), data_total)?;
    } else if let Io::InPlace(dio) = io {
        for p in &pieces {
            dio.upload_span(
                s,
                p.span,
                p.off,
                At {
                    mem: &data,
                    off: p.dev,
                },
                p.len,
            )?;
        }
    }
    let at = |off: usize, len: usize| Region::Mem {
        at: At { mem: &meta, off },
        len,
    };
    let r = Regions {
        msgs: at(0, j0_at),
        count: n,
        data: Region::Mem {
            at: At::start(&data),
            len: data_total,
        },
        aad: at(aad_at, aad_total),
        nonces: at(j0_at, 16 * n),
        tags: Region::Mem {
            at: At::start(&out),
            len: 16 * n,
        },
        verdicts: Region::Mem {
            at: At {
                mem: &out,
                off: 16 * n,
            },
            len: n,
        },
    };
    let mode = match dir {
        Direction::Seal => abi::DB_SEAL,
        Direction::Open => abi::DB_EXPECT,
    };
    let lane = io.lane(s)?;
    dbatch::queue_on_lane(
        gpu,
        lane,
        keys,
        r,
        mode,
        16,
        abi::DB_J0_GIVEN,
        &mut dev.scratch,
    )?;
    lane.download(At::start(&out), STAGE_META, tags_at, 17 * n)?;
    if packed.is_some() {
        lane.download(At::start(&data), STAGE_DATA, 0, data_total)?;
    } else if let Io::InPlace(dio) = io {
        for p in &pieces {
            dio.download_span(
                s,
                p.span,
                At {
                    mem: &data,
                    off: p.dev,
                },
                p.off,
                p.len,
            )?;
        }
    }
    // Queued after the kernel: the uploaded J0s.
    io.lane(s)?.memset(
        At {
            mem: &meta,
            off: j0_at,
        },
        16 * n,
    )?;
    Ok(Sub {
        start,
        end,
        data_offs,
        data_total,
        j0_at,
        tags_at,
        ver_at,
    })
}

/// Wait for a sub-batch, then copy its tags (and, packed, its data) out and wipe the staging's J0s.
fn finish(
    lane: &mut Lane,
    f: Sub,
    packed: Option<&mut [&mut [u8]]>,
    tags: &mut [[u8; 16]],
    dir: Direction,
) -> Result<(), Error> {
    let n = f.end - f.start;
    {
        let meta = lane.host(STAGE_META)?;
        let bad = meta[f.ver_at..f.ver_at + n]
            .iter()
            .position(|&v| v != abi::VERDICT_OK);
        for (i, t) in tags[f.start..f.end].iter_mut().enumerate() {
            t.copy_from_slice(&meta[f.tags_at + 16 * i..f.tags_at + 16 * i + 16]);
        }
        wipe(&mut meta[f.j0_at..f.j0_at + 16 * n]);
        wipe(&mut meta[f.tags_at..f.tags_at + 16 * n]);
        if let Some(i) = bad {
            return Err(crate::runtime::internal(format!(
                "batch message {}: the kernel refused a descriptor gcmx built",
                f.start + i
            )));
        }
    }
    if let Some(bufs) = packed {
        let stage = lane.host(STAGE_DATA)?;
        let from: &[u8] = &stage[..f.data_total];
        let offs = &f.data_offs;
        par_each(
            &mut bufs[f.start..f.end],
            pack_threads(f.data_total),
            |i, b| {
                let off = offs[i];
                let len = b.len();
                b.copy_from_slice(&from[off..off + len]);
            },
        );
        if dir == Direction::Open {
            wipe(&mut stage[..f.data_total]);
        }
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

/// Threads worth using to pack `bytes` bytes: one per 4 MiB, at most the hardware threads (and 16).
fn pack_threads(bytes: usize) -> usize {
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
        assert_eq!(pack_threads(0), 1);
    }

    #[test]
    fn sub_batches_cover_the_jobs() {
        let aad = [0u8; 3];
        let metas: Vec<Meta<'_>> = [0usize, 5, BATCH_BYTES, 1, BATCH_BYTES - 16, 32, 7]
            .iter()
            .map(|&len| Meta {
                key: 0,
                j0: [0; 16],
                aad: &aad,
                len,
                span: 0,
                span_off: 0,
            })
            .collect();
        let cuts = cut(&metas);
        let mut at = 0;
        for &(s, e) in &cuts {
            assert_eq!(s, at);
            assert!(e > s);
            let bytes: usize = metas[s..e].iter().map(|m| round16(m.len)).sum();
            assert!(e - s == 1 || bytes <= BATCH_BYTES);
            at = e;
        }
        assert_eq!(at, metas.len());
    }
}
