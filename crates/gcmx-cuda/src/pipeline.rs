//! The host pipeline: one message in host memory, cut into chunks ([`crate::plan`]) that are pipelined
//! over up to [`LANES`] lanes (the upload, kernel and download of different chunks overlap on the copy
//! engines and the SMs), each chunk through one fused launch. Messages larger than GPU memory work: only
//! one chunk per lane is on the device at a time.
//!
//! Buffers of [`REGISTER_MIN`] bytes or more are DMA'd in place: page-locked for the call
//! (`cuMemHostRegister`), or already page-locked by a live [`crate::PinnedRegion`]. Smaller ones, or
//! ones the driver refuses to page-lock, are staged through the lanes' page-locked buffers.
//!
//! Per chunk, the lane's device metadata holds the chunk's counter block (J0 words and first counter)
//! and receives its partial hashes; the host gathers the partials of all chunks and joins them with the
//! AAD and length block into the tag (`KeyMaterial::tag_from_partials`). After every call the device
//! metadata (J0, partial hashes) and the host copies of it are wiped, and after an open so are the
//! device slots and host staging that held plaintext. After a failure nothing of the call is kept: the
//! lanes and buffers are released, each wiped as it is freed.
//!
//! Layer: above the runtime and the device keys.

use std::sync::{Arc, Mutex, MutexGuard};

use gcmx_core::backend::Partial;
use gcmx_core::backend::{Direction, Error};
use zeroize::{Zeroize, Zeroizing};

use crate::abi;
use crate::keys::Keyed;
use crate::plan::{self, Chunk};
use crate::runtime::{At, DeviceMem, DirectIo, Gpu, Lane, Launch, direct_io};

/// Bytes per chunk (a multiple of the fused kernel's 256 KiB run).
pub(crate) const HOST_CHUNK: usize = 64 << 20;
/// Lanes (chunks in flight).
pub(crate) const LANES: usize = 4;
/// Host buffers at least this large are DMA'd in place instead of staged.
pub(crate) const REGISTER_MIN: usize = 4 << 20;
/// Most partial hashes of one chunk.
const MAX_GRID: usize = HOST_CHUNK / 16 / abi::FUSED_SPAN as usize;
/// Bytes of one chunk's metadata: its counter block, then its partial hashes.
const META_STRIDE: usize = abi::GCM_CTR_BYTES + 16 * MAX_GRID;
/// Lane staging buffers: chunk data (staged path) and chunk metadata.
const STAGE_DATA: usize = 0;
const STAGE_META: usize = 1;

/// Lanes and device buffers of the pipeline, one set per device, kept between calls.
#[derive(Default)]
pub(crate) struct PipelineState {
    lanes: Vec<Lane>,
    /// Chunk data, one buffer per lane.
    slots: Vec<Arc<DeviceMem>>,
    /// Chunk metadata ([counter block | partials] per chunk), one buffer per lane.
    metas: Vec<Arc<DeviceMem>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves only reusable buffers behind (their lanes wait before any
    // host access): recover them.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PipelineState {
    /// At least `nlanes` lanes with slots of `slot_bytes` and metadata of `meta_bytes` each.
    fn prepare(
        &mut self,
        gpu: &Arc<Gpu>,
        nlanes: usize,
        slot_bytes: usize,
        meta_bytes: usize,
    ) -> Result<(), Error> {
        while self.lanes.len() < nlanes {
            self.lanes.push(Lane::new(gpu)?);
        }
        for (lane, slot) in self.lanes.iter_mut().zip(self.slots.iter_mut()) {
            if slot.len() < slot_bytes {
                lane.wait()?;
                // Free the small buffer before allocating the big one.
                *slot = DeviceMem::new(gpu, 0)?;
                *slot = DeviceMem::new(gpu, slot_bytes)?;
            }
        }
        while self.slots.len() < nlanes {
            self.slots.push(DeviceMem::new(gpu, slot_bytes)?);
        }
        for (lane, meta) in self.lanes.iter_mut().zip(self.metas.iter_mut()) {
            if meta.len() < meta_bytes {
                lane.wait()?;
                *meta = DeviceMem::new(gpu, meta_bytes)?;
            }
        }
        while self.metas.len() < nlanes {
            self.metas.push(DeviceMem::new(gpu, meta_bytes)?);
        }
        for lane in &mut self.lanes[..nlanes] {
            lane.reserve_host(STAGE_META, meta_bytes)?;
        }
        Ok(())
    }
}

/// Seal or open `buf` (host memory) in place; the full tag. On an error the caller's buffer may hold
/// partly processed data (the framing wipes it); the pipeline's own buffers are wiped either way.
pub(crate) fn crypt(
    gpu: &Arc<Gpu>,
    k: Keyed<'_>,
    dir: Direction,
    j0: &[u8; 16],
    aad: &[u8],
    buf: &mut [u8],
) -> Result<[u8; 16], Error> {
    gcmx_core::backend::check_lengths(aad.len(), buf.len())?;
    if buf.is_empty() {
        return Ok(k.host.tag_from_partials(j0, aad, &[], 0));
    }
    let chunks = plan::chunks(buf.len(), HOST_CHUNK, abi::FUSED_SPAN);
    let nlanes = LANES.min(chunks.len());
    let slot_bytes = chunks.iter().map(|c| c.len).max().unwrap_or(0).div_ceil(16) * 16;
    let meta_bytes = META_STRIDE * chunks.len().div_ceil(nlanes);
    let state = gpu.state::<PipelineState>();
    let mut st = lock(&state);
    let mut staged = false;
    let result = (|| {
        st.prepare(gpu, nlanes, slot_bytes, meta_bytes)?;
        // Every chunk's counter block, written to its lane's staging before anything is queued.
        for (i, c) in chunks.iter().enumerate() {
            let (s, at) = place(i, nlanes);
            st.lanes[s].host(STAGE_META)?[at..at + abi::GCM_CTR_BYTES]
                .copy_from_slice(&abi::gcm_ctr_bytes(j0, c.first_block));
        }
        let PipelineState {
            lanes,
            slots,
            metas,
        } = &mut *st;
        let lanes = &mut lanes[..nlanes];
        let in_place = if buf.len() >= REGISTER_MIN {
            direct_io(gpu, lanes, buf, |io| {
                for (i, c) in chunks.iter().enumerate() {
                    enqueue_direct(io, k, dir, i, c, nlanes, &slots[..], &metas[..])?;
                }
                Ok(())
            })
        } else {
            None
        };
        match in_place {
            Some(r) => r?,
            None => {
                staged = true;
                stage(
                    lanes,
                    k,
                    dir,
                    &chunks,
                    buf,
                    slot_bytes,
                    &slots[..],
                    &metas[..],
                )?;
            }
        }
        gather(lanes, &chunks, nlanes)
    })();
    // Wipe what held secrets (J0, partial hashes) and, after an open, plaintext. After a failure (of
    // the call or of the wipe) the lanes and buffers are not kept: each is wiped as it is freed, which
    // does not depend on the failed lane or on this call's state.
    let open = dir == Direction::Open;
    let wiped = match &result {
        Ok(_) => wipe(
            &mut st,
            nlanes,
            slot_bytes,
            meta_bytes,
            open,
            staged && open,
        ),
        Err(_) => Ok(()),
    };
    if result.is_err() || wiped.is_err() {
        *st = PipelineState::default();
    }
    let mut parts = result?;
    wiped?;
    let tag = k.host.tag_from_partials(j0, aad, &parts, buf.len());
    for p in parts.iter_mut() {
        p.value.zeroize();
    }
    Ok(tag)
}

/// Lane and metadata offset of chunk `i`.
fn place(i: usize, nlanes: usize) -> (usize, usize) {
    (i % nlanes, META_STRIDE * (i / nlanes))
}

/// The fused launch of chunk `c` on its lane's slot and metadata.
fn fused<'a>(
    k: Keyed<'a>,
    dir: Direction,
    c: &Chunk,
    slot: &'a Arc<DeviceMem>,
    meta: &'a Arc<DeviceMem>,
    at: usize,
) -> Launch<'a> {
    Launch::Fused {
        dir,
        data: At::start(slot),
        len: c.len,
        key: k.key,
        nr: k.nr,
        powers: k.powers,
        ctr: At { mem: meta, off: at },
        partials: At {
            mem: meta,
            off: at + abi::GCM_CTR_BYTES,
        },
    }
}

/// Queue chunk `i` in place: counter block up, data up, kernel, data down, partials down.
#[allow(clippy::too_many_arguments)]
fn enqueue_direct(
    io: &mut DirectIo<'_>,
    k: Keyed<'_>,
    dir: Direction,
    i: usize,
    c: &Chunk,
    nlanes: usize,
    slots: &[Arc<DeviceMem>],
    metas: &[Arc<DeviceMem>],
) -> Result<(), Error> {
    let (s, at) = place(i, nlanes);
    let (slot, meta) = (&slots[s], &metas[s]);
    io.lane(s)?.upload(
        STAGE_META,
        at,
        At { mem: meta, off: at },
        abi::GCM_CTR_BYTES,
    )?;
    io.upload(s, c.offset, At::start(slot), c.len)?;
    io.lane(s)?.launch(fused(k, dir, c, slot, meta, at))?;
    io.download(s, At::start(slot), c.offset, c.len)?;
    let p = at + abi::GCM_CTR_BYTES;
    io.lane(s)?.download(
        At { mem: meta, off: p },
        STAGE_META,
        p,
        16 * c.grid as usize,
    )
}

/// The staged path: each lane copies its next chunk into its page-locked buffer while earlier chunks
/// are on the GPU, and copies results out once its lane has finished them.
#[allow(clippy::too_many_arguments)]
fn stage(
    lanes: &mut [Lane],
    k: Keyed<'_>,
    dir: Direction,
    chunks: &[Chunk],
    buf: &mut [u8],
    slot_bytes: usize,
    slots: &[Arc<DeviceMem>],
    metas: &[Arc<DeviceMem>],
) -> Result<(), Error> {
    let nlanes = lanes.len();
    for lane in lanes.iter_mut() {
        lane.reserve_host(STAGE_DATA, slot_bytes)?;
    }
    let mut pending: Vec<Option<Chunk>> = vec![None; nlanes];
    for (i, c) in chunks.iter().enumerate() {
        let (s, at) = place(i, nlanes);
        let lane = &mut lanes[s];
        let stage = lane.host(STAGE_DATA)?;
        if let Some(prev) = pending[s].take() {
            buf[prev.offset..prev.offset + prev.len].copy_from_slice(&stage[..prev.len]);
        }
        stage[..c.len].copy_from_slice(&buf[c.offset..c.offset + c.len]);
        let (slot, meta) = (&slots[s], &metas[s]);
        lane.upload(
            STAGE_META,
            at,
            At { mem: meta, off: at },
            abi::GCM_CTR_BYTES,
        )?;
        lane.upload(STAGE_DATA, 0, At::start(slot), c.len)?;
        lane.launch(fused(k, dir, c, slot, meta, at))?;
        lane.download(At::start(slot), STAGE_DATA, 0, c.len)?;
        let p = at + abi::GCM_CTR_BYTES;
        lane.download(
            At { mem: meta, off: p },
            STAGE_META,
            p,
            16 * c.grid as usize,
        )?;
        pending[s] = Some(*c);
    }
    for (lane, slot) in lanes.iter_mut().zip(pending.iter_mut()) {
        if let Some(prev) = slot.take() {
            let stage = lane.host(STAGE_DATA)?;
            buf[prev.offset..prev.offset + prev.len].copy_from_slice(&stage[..prev.len]);
        }
    }
    Ok(())
}

/// The partial hashes of every chunk, in message order, from the lanes' metadata staging.
fn gather(lanes: &mut [Lane], chunks: &[Chunk], nlanes: usize) -> Result<Vec<Partial>, Error> {
    let mut values = Zeroizing::new(vec![0u128; plan::total_partials(chunks)]);
    for (i, c) in chunks.iter().enumerate() {
        let (s, at) = place(i, nlanes);
        let meta = lanes[s].host(STAGE_META)?;
        let from = &meta[at + abi::GCM_CTR_BYTES..at + abi::GCM_CTR_BYTES + 16 * c.grid as usize];
        plan::read_partials(
            from,
            &mut values[c.first_partial..c.first_partial + c.grid as usize],
        );
    }
    Ok(plan::partials_of(chunks, &values, abi::FUSED_SPAN))
}

/// Wipe the metadata (device and host), and the slots and data staging when they hold plaintext; wait
/// for the lanes. Runs after every successful call.
fn wipe(
    st: &mut PipelineState,
    nlanes: usize,
    slot_bytes: usize,
    meta_bytes: usize,
    slots_too: bool,
    staging_too: bool,
) -> Result<(), Error> {
    let mut r = Ok(());
    let mut keep = |x: Result<(), Error>| {
        if let Err(e) = x {
            r = Err(e);
        }
    };
    let PipelineState {
        lanes,
        slots,
        metas,
    } = st;
    for ((lane, slot), meta) in lanes
        .iter_mut()
        .zip(slots.iter())
        .zip(metas.iter())
        .take(nlanes)
    {
        keep(lane.memset(At::start(meta), meta_bytes.min(meta.len())));
        if slots_too {
            keep(lane.memset(At::start(slot), slot_bytes.min(slot.len())));
        }
        keep(lane.wait());
        keep(lane.host(STAGE_META).map(|h| {
            let n = meta_bytes.min(h.len());
            h[..n].zeroize()
        }));
        if staging_too {
            keep(lane.host(STAGE_DATA).map(|h| {
                let n = slot_bytes.min(h.len());
                h[..n].zeroize()
            }));
        }
    }
    r
}
