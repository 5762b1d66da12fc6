//! Batches: many independent messages (each with its own key, J0, AAD and length) in three launches of
//! the kernels of `cuda/gcm_batch.cu` (`gcmx_batch_key_powers` once per key set, then `gcmx_batch_units`
//! and `gcmx_batch_tags` per sub-batch), following the work split documented in `cuda/gcmx_abi.h`.
//!
//! Host side of one sub-batch: messages and AADs are packed at 16-byte-aligned offsets into a pinned
//! staging buffer (in parallel on scoped threads), uploaded, processed in place, downloaded and unpacked; the
//! tags come back in the same round trip. Sub-batches are bounded by [`BATCH_BYTES`] and [`BATCH_MSGS`].

use cust::memory::LockedBuffer;
use cust::sys as cu;
use gcmx_core::{EngineJob, Error, KeyMaterial};
use rayon::prelude::*;
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, Zeroizing};

use crate::abi::{self, GcmxAesKey, GcmxBatchMsg, GcmxBatchParams};
use crate::aeskey::expand_key;
use crate::engine::Dir;
use crate::runtime::{
    DevMem, Runtime, ck, copy_threads, dev_err, new_stream, par_each, runtime, wipe,
};

/// Most message bytes (after 16-byte padding of each) per sub-batch.
pub const BATCH_BYTES: usize = 128 << 20;
/// Most messages per sub-batch.
pub const BATCH_MSGS: usize = 1 << 20;

/// Expanded keys and their power tables, resident on the device, plus reusable sub-batch buffers.
pub struct BatchKeys {
    nkeys: u32,
    keys: DevMem,
    key_powers: DevMem,
}

/// Pinned staging and device memory of the batch path, kept for the life of the process (in the runtime):
/// two sets, so one sub-batch is packed and unpacked on the CPU while the other is on the GPU.
#[derive(Default)]
pub(crate) struct BatchBuffers {
    sets: [BatchSet; 2],
}

#[derive(Default)]
struct BatchSet {
    pinned: Option<LockedBuffer<u8>>,
    /// Pinned [AADs | message table | tags] of the sub-batch, so every copy is asynchronous on the set's
    /// stream (a synchronous pageable copy would queue behind the other set's large transfers).
    meta: Option<LockedBuffer<u8>>,
    data: Option<DevMem>,
    aad: Option<DevMem>,
    msgs: Option<DevMem>,
    units: Option<DevMem>,
    tags: Option<DevMem>,
    stream: Option<cust::stream::Stream>,
}

/// A sub-batch in flight: which jobs, their layout, where the tags land.
struct InFlight {
    start: usize,
    end: usize,
    msgs: Vec<GcmxBatchMsg>,
    data_total: usize,
    /// Offset of the tags in the set's pinned `meta` buffer.
    tags_at: usize,
}

/// Make `slot` hold at least `n` bytes of device memory (grow only; freeing a buffer synchronises the
/// device, so buffers are kept between calls).
fn ensure(slot: &mut Option<DevMem>, n: usize) -> Result<u64, Error> {
    if slot.as_ref().is_none_or(|d| d.len() < n) {
        *slot = None;
        *slot = Some(DevMem::new(n.max(64))?);
    }
    Ok(slot.as_ref().map_or(0, |d| d.ptr()))
}

fn key_bytes(k: &GcmxAesKey) -> Vec<u8> {
    let mut v = Vec::with_capacity(244);
    for w in k.rk {
        v.extend_from_slice(&w.to_le_bytes());
    }
    v.extend_from_slice(&k.nr.to_le_bytes());
    v
}

/// The 64 bytes of a `GcmxBatchMsg` as the kernels read it (little-endian fields in declaration order).
fn msg_bytes(m: &GcmxBatchMsg, out: &mut Vec<u8>) {
    for x in [m.data_off, m.data_len, m.aad_off, m.aad_len] {
        out.extend_from_slice(&x.to_le_bytes());
    }
    for x in m.j0 {
        out.extend_from_slice(&x.to_le_bytes());
    }
    for x in [m.key_index, m.tag_slot, m.lane_first, m.unit_first] {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// Trace timings of the batch path to stderr when GCMX_CUDA_TRACE is set.
fn trace(what: &str, t: &mut std::time::Instant) {
    if std::env::var_os("GCMX_CUDA_TRACE").is_some() {
        eprintln!(
            "gcmx-cuda batch: {what}: {:.3} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    *t = std::time::Instant::now();
}

impl BatchKeys {
    /// Upload `keys` and compute their power tables on the device (launch 1).
    pub fn new(rt: &Runtime, keys: &[&GcmxAesKey]) -> Result<BatchKeys, Error> {
        let nkeys = u32::try_from(keys.len()).map_err(|_| Error::Device("too many keys".into()))?;
        let mut bytes = Zeroizing::new(Vec::with_capacity(keys.len() * 244));
        for k in keys {
            let mut kb = key_bytes(k);
            bytes.extend_from_slice(&kb);
            kb.zeroize();
        }
        let dkeys = DevMem::new(bytes.len().max(16))?;
        dkeys.upload(0, &bytes)?;
        let key_powers =
            DevMem::new((keys.len() * core::mem::size_of::<abi::GcmxKeyPowers>()).max(16))?;
        if nkeys > 0 {
            let p = GcmxBatchParams {
                keys: dkeys.ptr(),
                key_powers: key_powers.ptr(),
                nkeys,
                ..Default::default()
            };
            let stream = new_stream()?;
            // SAFETY: GcmxBatchParams is gcm_batch.cu's parameter (layout checked against gcmx_abi.h); the key
            // kernel reads nkeys GcmxAesKey from `keys` and writes nkeys GcmxKeyPowers to `key_powers`, both
            // allocated for nkeys entries and alive past the synchronisation below.
            unsafe {
                rt.launch(
                    &stream,
                    "gcmx_batch_key_powers",
                    nkeys.div_ceil(abi::BATCH_KEY_THREADS),
                    abi::BATCH_KEY_THREADS,
                    &p,
                )?
            };
            stream
                .synchronize()
                .map_err(dev_err("gcmx_batch_key_powers"))?;
        }
        Ok(BatchKeys {
            nkeys,
            keys: dkeys,
            key_powers,
        })
    }
}

impl Drop for BatchKeys {
    fn drop(&mut self) {
        // Expanded keys and powers of H are secret: wipe the device copies before freeing them.
        if runtime().is_ok() {
            let _ = self.keys.zero();
            let _ = self.key_powers.zero();
        }
    }
}

fn round16(n: usize) -> usize {
    n.div_ceil(16) * 16
}

/// Process `jobs` (J0 already derived) with the key of `key_of(i)` for job `i`; sets every `full_tag`
/// (seal: the tag; open: the expected tag, which the caller compares). On error every buffer is wiped.
///
/// Sub-batches of at most [`BATCH_BYTES`] / [`BATCH_MSGS`] alternate between two buffer sets: while the GPU
/// (and both PCIe directions) work on sub-batch k, the CPU unpacks k-1's results and packs k+1.
pub(crate) fn run_jobs(
    rt: &Runtime,
    keys: &BatchKeys,
    jobs: &mut [EngineJob<'_>],
    key_of: impl Fn(usize) -> u32 + Sync,
    dir: Dir,
) -> Result<(), Error> {
    for (i, j) in jobs.iter().enumerate() {
        gcmx_core::frame::check_lengths(j.aad.len(), j.buf.len())?;
        let k = key_of(i);
        if k >= keys.nkeys {
            return Err(Error::Device(format!(
                "batch job {i}: key index {k} out of range"
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
    let mut bufs = rt.batch_buffers().lock().unwrap_or_else(|p| p.into_inner());
    let mut flight: [Option<InFlight>; 2] = [None, None];
    let mut run = || -> Result<(), Error> {
        for (k, &(start, end)) in cuts.iter().enumerate() {
            let s = k % 2;
            if let Some(f) = flight[s].take() {
                finish(&mut bufs.sets[s], f, jobs, dir)?;
            }
            flight[s] = Some(launch(
                rt,
                keys,
                &mut bufs.sets[s],
                jobs,
                start,
                end,
                &key_of,
                dir,
            )?);
        }
        for k in cuts.len()..cuts.len() + 2 {
            let s = k % 2;
            if let Some(f) = flight[s].take() {
                finish(&mut bufs.sets[s], f, jobs, dir)?;
            }
        }
        Ok(())
    };
    let result = run();
    if result.is_err() {
        for set in bufs.sets.iter() {
            if let Some(st) = set.stream.as_ref() {
                let _ = st.synchronize();
            }
        }
        for j in jobs.iter_mut() {
            j.buf.zeroize();
            j.full_tag = [0; 16];
        }
    }
    result
}

/// Describe, pack and upload jobs[start..end] into `set`, and queue its kernels and downloads.
#[allow(clippy::too_many_arguments)]
fn launch(
    rt: &Runtime,
    keys: &BatchKeys,
    set: &mut BatchSet,
    jobs: &[EngineJob<'_>],
    start: usize,
    end: usize,
    key_of: &(impl Fn(usize) -> u32 + Sync),
    dir: Dir,
) -> Result<InFlight, Error> {
    let mut tt = std::time::Instant::now();
    let jobs = &jobs[start..end];
    let n = jobs.len();
    // Offsets: a serial prefix sum; the rest in parallel.
    let mut data_offs = Vec::with_capacity(n);
    let mut aad_offs = Vec::with_capacity(n);
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
            key_index: key_of(start + i),
            tag_slot: i as u32,
            lane_first: 0,
            unit_first: 0,
        })
        .collect();
    let (total_lanes, total_units) = abi::batch_plan(&mut msgs)
        .ok_or_else(|| Error::Device("batch plan overflows 32-bit lanes".into()))?;
    trace("describe", &mut tt);

    let cap = data_total.max(16);
    if set.pinned.as_ref().is_none_or(|p| p.len() < cap) {
        set.pinned = None;
        set.pinned = Some(LockedBuffer::new(&0u8, cap).map_err(dev_err("cuMemAllocHost (batch)"))?);
    }
    let data = ensure(&mut set.data, cap)?;
    let pinned = set
        .pinned
        .as_mut()
        .ok_or_else(|| Error::Device("pinned".into()))?;
    // Pack messages (parallel, disjoint regions).
    {
        let mut regions: Vec<&mut [u8]> = Vec::with_capacity(n);
        let mut rest: &mut [u8] = &mut pinned[..data_total];
        for j in jobs {
            let (a, b) = rest.split_at_mut(round16(j.buf.len()));
            regions.push(a);
            rest = b;
        }
        par_each(&mut regions, copy_threads(data_total), |i, r| {
            r[..jobs[i].buf.len()].copy_from_slice(jobs[i].buf);
        });
    }
    trace("pack", &mut tt);
    // Pinned metadata: [AADs (aad_total) | message table (64 n) | tags (16 n)].
    let msgs_at = aad_total;
    let tags_at = msgs_at + 64 * n;
    let meta_len = (tags_at + 16 * n).max(16);
    if set.meta.as_ref().is_none_or(|p| p.len() < meta_len) {
        set.meta = None;
        set.meta = Some(
            LockedBuffer::new(&0u8, meta_len).map_err(dev_err("cuMemAllocHost (batch meta)"))?,
        );
    }
    let meta = set
        .meta
        .as_mut()
        .ok_or_else(|| Error::Device("meta".into()))?;
    {
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
        let mut outs: Vec<&mut [u8]> = rest[..64 * n].chunks_mut(64).collect();
        par_each(&mut outs, copy_threads(64 * n), |i, out| {
            let mut v = Vec::with_capacity(64);
            msg_bytes(&msgs[i], &mut v);
            out.copy_from_slice(&v);
        });
    }
    let mp = meta.as_mut_ptr();
    let daad = ensure(&mut set.aad, aad_total.max(16))?;
    let dmsgs = ensure(&mut set.msgs, 64 * n)?;
    let dunits = ensure(&mut set.units, 16 * total_units as usize)?;
    let dtags = ensure(&mut set.tags, 16 * n)?;
    if set.stream.is_none() {
        set.stream = Some(new_stream()?);
    }
    let stream = set
        .stream
        .as_ref()
        .ok_or_else(|| Error::Device("stream".into()))?;
    if aad_total > 0 {
        // SAFETY: FFI async copy of aad_total bytes from this set's pinned meta buffer (not touched by the host
        // until `finish` synchronises the stream) into `daad` (>= aad_total bytes).
        ck(
            unsafe { cu::cuMemcpyHtoDAsync_v2(daad, mp.cast(), aad_total, stream.as_inner()) },
            "cuMemcpyHtoDAsync (aad)",
        )?;
    }
    // SAFETY: as above, the 64 n bytes of the message table into `dmsgs` (>= 64 n bytes).
    ck(
        unsafe {
            cu::cuMemcpyHtoDAsync_v2(dmsgs, mp.add(msgs_at).cast(), 64 * n, stream.as_inner())
        },
        "cuMemcpyHtoDAsync (msgs)",
    )?;
    trace("describe AADs and message table", &mut tt);
    let p = GcmxBatchParams {
        input: data,
        output: data,
        aad: daad,
        msgs: dmsgs,
        keys: keys.keys.ptr(),
        key_powers: keys.key_powers.ptr(),
        unit_partials: dunits,
        tags: dtags,
        nmsgs: n as u32,
        nkeys: keys.nkeys,
        total_lanes,
        decrypt: u32::from(dir == Dir::Open),
    };
    let pp = pinned.as_mut_ptr();
    // SAFETY: FFI async copy of data_total bytes from the pinned staging buffer (owned by this set, not
    // touched by the host until `finish` synchronises the stream) to `data` (>= data_total bytes).
    ck(
        unsafe { cu::cuMemcpyHtoDAsync_v2(p.input, pp.cast(), data_total, stream.as_inner()) },
        "cuMemcpyHtoDAsync (batch)",
    )?;
    if total_lanes > 0 {
        // SAFETY: GcmxBatchParams is the batch kernels' parameter (layout checked); every address in it points
        // to an allocation of this set sized from the same plan (messages, AADs, msgs, units, tags) or to
        // the keys, all alive until `finish` synchronises the stream.
        unsafe {
            rt.launch(
                stream,
                "gcmx_batch_units",
                total_lanes.div_ceil(abi::BATCH_UNIT_THREADS),
                abi::BATCH_UNIT_THREADS,
                &p,
            )?
        };
    }
    // SAFETY: as above; the tags kernel reads the unit partials and writes 16 bytes per tag slot.
    unsafe {
        rt.launch(
            stream,
            "gcmx_batch_tags",
            (n as u32).div_ceil(abi::BATCH_TAG_THREADS),
            abi::BATCH_TAG_THREADS,
            &p,
        )?
    };
    // SAFETY: FFI async copy of the 16 n tag bytes into this set's pinned meta buffer (tags_at + 16 n <=
    // meta_len), read by the host only after `finish` synchronises the stream.
    ck(
        unsafe {
            cu::cuMemcpyDtoHAsync_v2(mp.add(tags_at).cast(), dtags, 16 * n, stream.as_inner())
        },
        "cuMemcpyDtoHAsync (tags)",
    )?;
    // SAFETY: FFI async copy of the results back into the pinned staging buffer; see the first copy.
    ck(
        unsafe { cu::cuMemcpyDtoHAsync_v2(pp.cast(), p.output, data_total, stream.as_inner()) },
        "cuMemcpyDtoHAsync (batch)",
    )?;
    if dir == Dir::Open {
        // The device copy now holds plaintext: wipe it (queued after the download).
        // SAFETY: FFI memset of data_total bytes of this set's device buffer, ordered on the stream.
        ck(
            unsafe { cu::cuMemsetD8Async(p.output, 0, data_total, stream.as_inner()) },
            "cuMemsetD8Async",
        )?;
    }
    trace("queue", &mut tt);
    Ok(InFlight {
        start,
        end,
        msgs,
        data_total,
        tags_at,
    })
}

/// Wait for a sub-batch, then copy results and tags out to its jobs.
fn finish(
    set: &mut BatchSet,
    f: InFlight,
    jobs: &mut [EngineJob<'_>],
    dir: Dir,
) -> Result<(), Error> {
    let mut tt = std::time::Instant::now();
    let stream = set
        .stream
        .as_ref()
        .ok_or_else(|| Error::Device("stream".into()))?;
    stream.synchronize().map_err(dev_err("batch"))?;
    trace("wait for GPU", &mut tt);
    let n = f.end - f.start;
    let meta = set
        .meta
        .as_ref()
        .ok_or_else(|| Error::Device("meta".into()))?;
    let tags: &[u8] = &meta[f.tags_at..f.tags_at + 16 * n];
    let pinned = set
        .pinned
        .as_mut()
        .ok_or_else(|| Error::Device("pinned".into()))?;
    let pinned_ro: &[u8] = &pinned[..f.data_total];
    let msgs = &f.msgs;
    par_each(
        &mut jobs[f.start..f.end],
        copy_threads(f.data_total),
        |i, j| {
            let off = msgs[i].data_off as usize;
            let len = j.buf.len();
            j.buf.copy_from_slice(&pinned_ro[off..off + len]);
            j.full_tag.copy_from_slice(&tags[16 * i..16 * i + 16]);
        },
    );
    if dir == Dir::Open {
        // The staging buffer holds plaintext after an open: wipe it (after a seal it holds ciphertext).
        wipe(&mut pinned[..f.data_total]);
    }
    trace("unpack", &mut tt);
    Ok(())
}

/// Many keys resident on the device for multi-key batches (servers, segmented files): each job names its key.
pub struct CudaKeyring {
    rt: &'static Runtime,
    keys: Vec<KeyMaterial>,
    dev: BatchKeys,
}

/// One message to seal under key `key` of a [`CudaKeyring`].
#[derive(Debug)]
pub struct KeyedSealJob<'a> {
    /// Index of the key in the keyring.
    pub key: usize,
    /// Nonce (at least one byte; 12 is the fast path).
    pub nonce: &'a [u8],
    /// Associated data.
    pub aad: &'a [u8],
    /// Plaintext in, ciphertext out.
    pub buf: &'a mut [u8],
    /// Receives the tag; its length (4, 8, 12..=16) chooses the tag length.
    pub tag: &'a mut [u8],
}

/// One message to open under key `key` of a [`CudaKeyring`].
#[derive(Debug)]
pub struct KeyedOpenJob<'a> {
    /// Index of the key in the keyring.
    pub key: usize,
    /// Nonce.
    pub nonce: &'a [u8],
    /// Associated data.
    pub aad: &'a [u8],
    /// Ciphertext in, plaintext out (zeroed if its tag is wrong).
    pub buf: &'a mut [u8],
    /// The tag to check.
    pub tag: &'a [u8],
}

impl CudaKeyring {
    /// Expand and upload `keys` (each 16, 24 or 32 bytes) and compute their powers of H on the device.
    pub fn new(keys: &[&[u8]]) -> Result<CudaKeyring, Error> {
        let rt = runtime()?;
        let km: Vec<KeyMaterial> = keys
            .par_iter()
            .map(|k| KeyMaterial::new(k))
            .collect::<Result<_, _>>()?;
        let expanded: Vec<Zeroizing<GcmxAesKey>> = keys
            .par_iter()
            .map(|k| {
                expand_key(k)
                    .map(Zeroizing::new)
                    .ok_or(Error::KeyLength(k.len()))
            })
            .collect::<Result<_, _>>()?;
        let refs: Vec<&GcmxAesKey> = expanded.iter().map(|b| &**b).collect();
        let dev = BatchKeys::new(rt, &refs)?;
        Ok(CudaKeyring { rt, keys: km, dev })
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the keyring is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn check_key(&self, i: usize) -> Result<&KeyMaterial, Error> {
        self.keys.get(i).ok_or_else(|| {
            Error::Device(format!(
                "key index {i} out of range ({} keys)",
                self.keys.len()
            ))
        })
    }

    /// Seal every job. Inputs are checked first; on a device error every buffer is zeroed.
    pub fn seal(&self, jobs: &mut [KeyedSealJob<'_>]) -> Result<(), Error> {
        for j in jobs.iter() {
            gcmx_core::frame::check(j.nonce, j.aad, j.buf.len(), j.tag.len())?;
            self.check_key(j.key)?;
        }
        self.rt.enter()?;
        let key_idx: Vec<u32> = jobs.iter().map(|j| j.key as u32).collect();
        let mut ej: Vec<EngineJob<'_>> = jobs
            .iter_mut()
            .map(|j| EngineJob {
                j0: self.keys[j.key].j0(j.nonce),
                aad: j.aad,
                buf: &mut *j.buf,
                full_tag: [0; 16],
            })
            .collect();
        run_jobs(self.rt, &self.dev, &mut ej, |i| key_idx[i], Dir::Seal)?;
        let tags: Vec<[u8; 16]> = ej.iter().map(|j| j.full_tag).collect();
        drop(ej);
        for (j, t) in jobs.iter_mut().zip(tags) {
            let n = j.tag.len();
            j.tag.copy_from_slice(&t[..n]);
        }
        Ok(())
    }

    /// Open every job; returns, per job, whether its tag was right. A job whose tag is wrong has its buffer
    /// zeroed (never holds unauthenticated plaintext). On a device error every buffer is zeroed and the
    /// call fails.
    pub fn open(&self, jobs: &mut [KeyedOpenJob<'_>]) -> Result<Vec<bool>, Error> {
        for j in jobs.iter() {
            gcmx_core::frame::check(j.nonce, j.aad, j.buf.len(), j.tag.len())?;
            self.check_key(j.key)?;
        }
        self.rt.enter()?;
        let key_idx: Vec<u32> = jobs.iter().map(|j| j.key as u32).collect();
        let given: Vec<&[u8]> = jobs.iter().map(|j| j.tag).collect();
        let mut ej: Vec<EngineJob<'_>> = jobs
            .iter_mut()
            .map(|j| EngineJob {
                j0: self.keys[j.key].j0(j.nonce),
                aad: j.aad,
                buf: &mut *j.buf,
                full_tag: [0; 16],
            })
            .collect();
        run_jobs(self.rt, &self.dev, &mut ej, |i| key_idx[i], Dir::Open)?;
        let mut ok = Vec::with_capacity(ej.len());
        for (j, t) in ej.iter_mut().zip(&given) {
            let good = bool::from(j.full_tag[..t.len()].ct_eq(t));
            if !good {
                j.buf.zeroize();
            }
            ok.push(good);
        }
        Ok(ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn message_bytes_follow_the_repr_c_layout() {
        let m = GcmxBatchMsg {
            data_off: 0x1111,
            data_len: 0x2222,
            aad_off: 0x3333,
            aad_len: 0x4444,
            j0: [5, 6, 7, 8],
            key_index: 9,
            tag_slot: 10,
            lane_first: 11,
            unit_first: 12,
        };
        let mut v = Vec::new();
        msg_bytes(&m, &mut v);
        assert_eq!(v.len(), core::mem::size_of::<GcmxBatchMsg>());
        let at = |o: usize, n: usize| -> u64 {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&v[o..o + n]);
            u64::from_le_bytes(b)
        };
        assert_eq!(at(offset_of!(GcmxBatchMsg, data_len), 8), 0x2222);
        assert_eq!(at(offset_of!(GcmxBatchMsg, aad_len), 8), 0x4444);
        assert_eq!(at(offset_of!(GcmxBatchMsg, j0) + 12, 4), 8);
        assert_eq!(at(offset_of!(GcmxBatchMsg, key_index), 4), 9);
        assert_eq!(at(offset_of!(GcmxBatchMsg, unit_first), 4), 12);
        let k = crate::aeskey::expand_key(&[3u8; 32]).unwrap();
        let kb = key_bytes(&k);
        assert_eq!(kb.len(), core::mem::size_of::<GcmxAesKey>());
        assert_eq!(&kb[240..244], &14u32.to_le_bytes());
    }
}
