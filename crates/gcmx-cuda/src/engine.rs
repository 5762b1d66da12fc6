//! [`CudaEngine`]: the GPU backend for one AES key.
//!
//! * Device-resident data: one launch of the fused kernel (`gcmx_gcm_encrypt` / `gcmx_gcm_decrypt`) over
//!   the whole buffer; the per-thread-block partial hashes come back to the host and are joined there by
//!   `gcmx_core` (`KeyMaterial::tag_from_partials`, which uses `combine::tree_reduce`) with the AAD hash
//!   and the length block, then masked with `E_K(J0)` computed on the CPU.
//! * Host-resident data: the message is cut into chunks ([`crate::plan`]) pipelined over several streams
//!   (upload, kernel, download of different chunks overlap on the copy engines and SMs). Large buffers are
//!   registered with the driver (`cuMemHostRegister`, page-locked in place) so the DMA engines read and
//!   write them directly, with no CPU copy; small ones, or when registration is refused, go through
//!   pinned staging buffers. Messages larger than GPU memory work: only `STREAMS` chunks are resident.
//! * On any device error the output is wiped (host buffers zeroed, device buffers memset) and
//!   `Error::Device` is returned; the tag is never computed from partial results.

use std::sync::{Arc, Mutex, MutexGuard};

use cust::memory::{DeviceSlice, LockedBuffer};
use cust::stream::Stream;
use cust::sys as cu;
use gcmx_core::{EngineJob, Error, GcmEngine, KeyMaterial};
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, Zeroizing};

use crate::abi::{self, GcmxAesKey, GcmxGcmParams};
use crate::aeskey::expand_key;
use crate::batch::{self, BatchKeys};
use crate::plan;
use crate::runtime::{
    DevMem, Runtime, ck, dev_err, memset_d8, new_stream, runtime, u128s_from_le_bytes,
    u128s_to_le_bytes,
};

/// Bytes per chunk of the host-resident pipeline (a multiple of the fused kernel's run, 256 KiB).
pub const HOST_CHUNK: usize = 64 << 20;
/// Streams (chunks in flight) of the host-resident pipeline.
pub const STREAMS: usize = 4;
/// Host buffers at least this large are registered (page-locked in place) instead of staged.
pub const REGISTER_MIN: usize = 4 << 20;

/// Which direction a fused launch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    Seal,
    Open,
}

impl Dir {
    fn kernel(self) -> &'static str {
        match self {
            Dir::Seal => "gcmx_gcm_encrypt",
            Dir::Open => "gcmx_gcm_decrypt",
        }
    }
}

/// The GPU AES-GCM engine for one key (see the module documentation).
pub struct CudaEngine {
    rt: &'static Runtime,
    key: Arc<KeyMaterial>,
    aes: Zeroizing<GcmxAesKey>,
    /// Fused-layout power table (`abi::FUSED_POW_COUNT` entries).
    fused_powers: DevMem,
    /// The key uploaded for the batch kernels (one key).
    batch_keys: Mutex<Option<BatchKeys>>,
}

/// Streams and buffers of the host-resident pipeline, allocated on first use and kept for the life of the
/// process (shared by every engine: creating an engine costs one small upload, not a pipeline).
#[derive(Default)]
pub(crate) struct Pipeline {
    streams: Vec<Stream>,
    slots: Vec<DevMem>,
    staging: Vec<LockedBuffer<u8>>,
    partials: Option<DevMem>,
}

impl core::fmt::Debug for CudaEngine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "CudaEngine {{ {:?}, device: {} }}",
            self.key,
            self.rt.info().name
        )
    }
}

/// The Montgomery powers of the fused layout: `table[i] = Q_e(i)` from `gcmx_core::field::HashKey::power`.
pub fn fused_power_table(key: &KeyMaterial) -> Vec<u128> {
    strided_power_table(
        key,
        abi::FUSED_THREADS,
        abi::FUSED_WARP_SPAN,
        abi::FUSED_POW_COUNT,
    )
}

/// The Montgomery powers of the GHASH-only layout.
pub fn ghash_power_table(key: &KeyMaterial) -> Vec<u128> {
    strided_power_table(
        key,
        abi::GHASH_THREADS,
        abi::GHASH_WARP_SPAN,
        abi::GHASH_POW_COUNT,
    )
}

fn strided_power_table(key: &KeyMaterial, threads: u32, warp_span: u64, count: u32) -> Vec<u128> {
    let hk = key.hash_key();
    (0..count)
        .map(|i| hk.power(abi::strided_pow_exponent(threads, warp_span, i)))
        .collect()
}

/// Upload a power table (secret: it is derived from H) into fresh device memory.
pub(crate) fn upload_table(values: &[u128]) -> Result<DevMem, Error> {
    let bytes = Zeroizing::new(u128s_to_le_bytes(values));
    let mem = DevMem::new(bytes.len())?;
    mem.upload(0, &bytes)?;
    Ok(mem)
}

impl CudaEngine {
    /// An engine for `key` on device 0. `Error::BackendUnavailable` when there is no driver or device.
    pub fn new(key: &KeyMaterial) -> Result<CudaEngine, Error> {
        let rt = runtime()?;
        let key = Arc::new(KeyMaterial::new(key.key_bytes())?);
        let aes = expand_key(key.key_bytes()).ok_or(Error::KeyLength(key.key_bytes().len()))?;
        let table = Zeroizing::new(fused_power_table(&key));
        let fused_powers = upload_table(&table)?;
        Ok(CudaEngine {
            rt,
            key,
            aes: Zeroizing::new(aes),
            fused_powers,
            batch_keys: Mutex::new(None),
        })
    }

    /// The key material (for J0 derivation and the tag combination).
    pub fn key(&self) -> &KeyMaterial {
        &self.key
    }

    /// The FIPS-197 expanded key in the kernels' layout (secret).
    pub(crate) fn aes_key(&self) -> &GcmxAesKey {
        &self.aes
    }

    fn params(
        &self,
        j0: &[u8; 16],
        input: u64,
        output: u64,
        nbytes: usize,
        partials: u64,
        first_block: u64,
    ) -> GcmxGcmParams {
        let w = abi::le_words(j0);
        GcmxGcmParams {
            input,
            output,
            nbytes: nbytes as u64,
            powers: self.fused_powers.ptr(),
            partials,
            j0_prefix: [w[0], w[1], w[2]],
            ctr_first: plan::ctr_first(j0, first_block),
            key: *self.aes,
            _pad0: 0,
        }
    }

    fn launch_fused(&self, stream: &Stream, dir: Dir, p: &GcmxGcmParams) -> Result<(), Error> {
        let grid = plan::grid_for(plan::blocks(p.nbytes as usize), abi::FUSED_SPAN);
        let grid = u32::try_from(grid).map_err(|_| Error::PlaintextTooLong)?;
        // SAFETY: GcmxGcmParams is the fused kernels' parameter (layout checked against gcmx_abi.h by the
        // unit tests); the caller passes device addresses valid for nbytes of input and output, the power
        // table (owned by self) and `grid` partials, all alive until the caller synchronises the stream.
        unsafe {
            self.rt
                .launch(stream, dir.kernel(), grid, abi::FUSED_THREADS, p)
        }
    }

    /// Enqueue one fused launch over `len` bytes at device address `ptr` (in place), partials to `partials`.
    pub(crate) fn launch_raw(
        &self,
        stream: &Stream,
        dir: Dir,
        j0: &[u8; 16],
        ptr: u64,
        len: usize,
        partials: u64,
    ) -> Result<(), Error> {
        let mut p = self.params(j0, ptr, ptr, len, partials, 0);
        let r = self.launch_fused(stream, dir, &p);
        p.key.zeroize();
        r
    }

    // ------------------------------------------------------------------------------------------------
    // Device-resident API
    // ------------------------------------------------------------------------------------------------

    /// CTR-encrypt (`Dir::Seal`) or decrypt a device buffer in place; return the full tag (computed over
    /// the ciphertext). On a device error the buffer is wiped (memset to zero) and `Error::Device` returned.
    fn run_device(
        &self,
        dir: Dir,
        j0: &[u8; 16],
        aad: &[u8],
        ptr: u64,
        len: usize,
    ) -> Result<[u8; 16], Error> {
        gcmx_core::frame::check_lengths(aad.len(), len)?;
        if len == 0 {
            return Ok(self.key.tag_from_partials(j0, aad, &[], 0));
        }
        if !ptr.is_multiple_of(16) {
            return Err(Error::Device(format!(
                "device buffer at {ptr:#x} is not 16-byte aligned"
            )));
        }
        self.rt.enter()?;
        let result = (|| {
            let chunk = plan::Chunk {
                offset: 0,
                len,
                first_block: 0,
                first_partial: 0,
                grid: u32::try_from(plan::grid_for(plan::blocks(len), abi::FUSED_SPAN))
                    .map_err(|_| Error::PlaintextTooLong)?,
            };
            let partials = DevMem::new(16 * chunk.grid as usize)?;
            let stream = new_stream()?;
            let mut p = self.params(j0, ptr, ptr, len, partials.ptr(), 0);
            let r = self.launch_fused(&stream, dir, &p);
            p.key.zeroize();
            r?;
            stream.synchronize().map_err(dev_err(dir.kernel()))?;
            let mut raw = vec![0u8; partials.len()];
            partials.download(0, &mut raw)?;
            let parts = plan::partials_of(&[chunk], &u128s_from_le_bytes(&raw), abi::FUSED_SPAN);
            Ok(self.key.tag_from_partials(j0, aad, &parts, len))
        })();
        if result.is_err() {
            let _ = memset_d8(ptr, len);
        }
        result
    }

    /// Encrypt `buf` (device memory, 16-byte aligned) in place under J0 `j0`; return the full 16-byte tag.
    pub fn seal_device_j0(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: &mut DeviceSlice<u8>,
    ) -> Result<[u8; 16], Error> {
        self.run_device(Dir::Seal, j0, aad, buf.as_device_ptr().as_raw(), buf.len())
    }

    /// Decrypt `buf` in place under J0 `j0`; return the expected full tag (the caller compares and wipes).
    pub fn open_device_j0(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: &mut DeviceSlice<u8>,
    ) -> Result<[u8; 16], Error> {
        self.run_device(Dir::Open, j0, aad, buf.as_device_ptr().as_raw(), buf.len())
    }

    /// Encrypt a device buffer in place; the tag (of length `tag.len()`, 4..=16 as GCM allows) goes to the
    /// host. On error the buffer is wiped.
    pub fn encrypt_device(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut DeviceSlice<u8>,
        tag: &mut [u8],
    ) -> Result<(), Error> {
        gcmx_core::frame::check(nonce, aad, buf.len(), tag.len())?;
        let j0 = self.key.j0(nonce);
        let full = self.seal_device_j0(&j0, aad, buf)?;
        tag.copy_from_slice(&full[..tag.len()]);
        Ok(())
    }

    /// Decrypt a device buffer in place and check `tag` in constant time. On a wrong tag the buffer is
    /// wiped on the device (memset) and `Error::Authentication` returned; on a device error it is wiped too.
    pub fn decrypt_device(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut DeviceSlice<u8>,
        tag: &[u8],
    ) -> Result<(), Error> {
        gcmx_core::frame::check(nonce, aad, buf.len(), tag.len())?;
        let j0 = self.key.j0(nonce);
        let expected = self.open_device_j0(&j0, aad, buf)?;
        if bool::from(expected[..tag.len()].ct_eq(tag)) {
            Ok(())
        } else {
            memset_d8(buf.as_device_ptr().as_raw(), buf.len())?;
            Err(Error::Authentication)
        }
    }

    // ------------------------------------------------------------------------------------------------
    // Host-resident pipeline
    // ------------------------------------------------------------------------------------------------

    fn lock_pipe(&self) -> MutexGuard<'_, Pipeline> {
        // A panic while holding the lock leaves only reusable buffers behind: recover them.
        self.rt.pipeline().lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run_host(
        &self,
        dir: Dir,
        j0: &[u8; 16],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; 16], Error> {
        gcmx_core::frame::check_lengths(aad.len(), buf.len())?;
        if buf.is_empty() {
            return Ok(self.key.tag_from_partials(j0, aad, &[], 0));
        }
        self.rt.enter()?;
        let mut pipe = self.lock_pipe();
        let result = self.run_host_inner(&mut pipe, dir, j0, aad, buf);
        if result.is_err() {
            for s in &pipe.streams {
                let _ = s.synchronize();
            }
            buf.zeroize();
        }
        result
    }

    fn run_host_inner(
        &self,
        pipe: &mut Pipeline,
        dir: Dir,
        j0: &[u8; 16],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; 16], Error> {
        let len = buf.len();
        let host_ptr = buf.as_mut_ptr();
        // Large buffers are DMA'd in place: the whole buffer is page-locked once (cuMemHostRegister) and
        // unlocked after the last transfer. (Locking chunk by chunk to overlap locking with transfers was
        // measured slower on the H200 host: 11.0 GB/s against 14.6 GB/s for 8 GiB, see
        // benches/gpu-notes.md; the driver does not overlap registration with DMA.) A buffer that is
        // already registered (PinnedRegion) costs nothing here. Refused: staged through pinned buffers.
        let whole = if len >= REGISTER_MIN {
            HostRegistration::try_new(host_ptr, len)
        } else {
            None
        };
        let direct = whole.is_some();
        let chunks = plan::chunks(len, HOST_CHUNK, abi::FUSED_SPAN);
        let nslots = STREAMS.min(chunks.len());
        let slot_bytes = chunks
            .iter()
            .map(|c| c.len)
            .max()
            .unwrap_or(16)
            .div_ceil(16)
            * 16;
        while pipe.streams.len() < nslots {
            pipe.streams.push(new_stream()?);
        }
        for s in pipe.slots.iter_mut() {
            if s.len() < slot_bytes {
                *s = DevMem::new(0)?; // free the small one before allocating a bigger one
            }
        }
        pipe.slots.retain(|s| !s.is_empty());
        while pipe.slots.len() < nslots {
            pipe.slots.push(DevMem::new(slot_bytes)?);
        }
        let np = plan::total_partials(&chunks);
        if pipe.partials.as_ref().is_none_or(|p| p.len() < 16 * np) {
            pipe.partials = None;
            pipe.partials = Some(DevMem::new(16 * np)?);
        }
        let partials = pipe.partials.as_ref().map_or(0, |p| p.ptr());

        if direct {
            // Per-stream order keeps a slot's next upload behind its previous download.
            let enqueue = || -> Result<(), Error> {
                for (i, c) in chunks.iter().enumerate() {
                    let s = i % nslots;
                    // SAFETY: c.offset + c.len <= len, inside the caller's exclusively borrowed buffer.
                    let hp = unsafe { host_ptr.add(c.offset) };
                    // SAFETY: that range of the caller's buffer is exclusively borrowed by this call and
                    // page-locked by `whole`; every stream is synchronised before `whole` is dropped and
                    // before this call returns. Slot s holds >= c.len bytes.
                    unsafe {
                        self.enqueue_chunk(
                            &pipe.streams[s],
                            dir,
                            j0,
                            hp,
                            pipe.slots[s].ptr(),
                            c,
                            partials,
                        )
                    }?;
                }
                Ok(())
            };
            let queued = enqueue();
            // Wait for everything queued (also after an error) before the last registrations end.
            let mut synced = Ok(());
            for s in &pipe.streams[..nslots] {
                if let Err(e) = s.synchronize() {
                    synced = Err(dev_err("host pipeline")(e));
                }
            }
            drop(whole);
            queued?;
            synced?;
        } else {
            // Staged through pinned buffers: the CPU copies a chunk in while earlier chunks are on the GPU.
            while pipe.staging.len() < nslots {
                pipe.staging
                    .push(LockedBuffer::new(&0u8, slot_bytes).map_err(dev_err("cuMemAllocHost"))?);
            }
            for st in pipe.staging.iter_mut() {
                if st.len() < slot_bytes {
                    *st = LockedBuffer::new(&0u8, slot_bytes).map_err(dev_err("cuMemAllocHost"))?;
                }
            }
            let mut pending: Vec<Option<plan::Chunk>> = vec![None; nslots];
            for (i, c) in chunks.iter().enumerate() {
                let s = i % nslots;
                let stream = &pipe.streams[s];
                stream.synchronize().map_err(dev_err("host pipeline"))?;
                let stage = &mut pipe.staging[s];
                if let Some(prev) = pending[s].take() {
                    buf[prev.offset..prev.offset + prev.len].copy_from_slice(&stage[..prev.len]);
                }
                stage[..c.len].copy_from_slice(&buf[c.offset..c.offset + c.len]);
                // SAFETY: pinned staging buffer s (>= c.len bytes) is owned by the pipeline and not touched
                // by the host until this stream is synchronised (above, before its next use, or below).
                // Slot s holds >= c.len bytes.
                unsafe {
                    self.enqueue_chunk(
                        stream,
                        dir,
                        j0,
                        stage.as_mut_ptr(),
                        pipe.slots[s].ptr(),
                        c,
                        partials,
                    )
                }?;
                pending[s] = Some(*c);
            }
            for (s, slot) in pending.iter_mut().enumerate() {
                pipe.streams[s]
                    .synchronize()
                    .map_err(dev_err("host pipeline"))?;
                if let Some(prev) = slot.take() {
                    buf[prev.offset..prev.offset + prev.len]
                        .copy_from_slice(&pipe.staging[s][..prev.len]);
                }
            }
        }
        if dir == Dir::Open {
            // Our device slots (and, on the staged path, pinned buffers) now hold plaintext: wipe them.
            for (slot, stream) in pipe.slots.iter().zip(&pipe.streams).take(nslots) {
                // SAFETY: FFI memset of the used part of our own device buffer, ordered on its stream,
                // synchronised below.
                ck(
                    unsafe {
                        cu::cuMemsetD8Async(
                            slot.ptr(),
                            0,
                            slot_bytes.min(slot.len()),
                            stream.as_inner(),
                        )
                    },
                    "cuMemsetD8Async",
                )?;
            }
            if !direct {
                for st in pipe.staging.iter_mut().take(nslots) {
                    let used = slot_bytes.min(st.len());
                    crate::runtime::wipe(&mut st[..used]);
                }
            }
            for stream in &pipe.streams[..nslots] {
                stream.synchronize().map_err(dev_err("wipe"))?;
            }
        }
        let mut raw = vec![0u8; 16 * np];
        pipe.partials
            .as_ref()
            .map_or(Ok(()), |p| p.download(0, &mut raw))?;
        let parts = plan::partials_of(&chunks, &u128s_from_le_bytes(&raw), abi::FUSED_SPAN);
        Ok(self.key.tag_from_partials(j0, aad, &parts, len))
    }

    /// Enqueue one chunk of the host pipeline on `stream`: upload `c.len` bytes from `host` into the
    /// device slot `dev`, run the fused kernel over them in place (partials at `partials`, indexed by
    /// the chunk's first partial), and download the result back to `host`.
    ///
    /// # Safety
    /// `host` must be valid for reads and writes of `c.len` bytes and page-locked, and nothing else may
    /// read, write or free that range until `stream` has been synchronised; `dev` must be a device
    /// allocation of at least `c.len` bytes.
    #[allow(clippy::too_many_arguments)]
    unsafe fn enqueue_chunk(
        &self,
        stream: &Stream,
        dir: Dir,
        j0: &[u8; 16],
        host: *mut u8,
        dev: u64,
        c: &plan::Chunk,
        partials: u64,
    ) -> Result<(), Error> {
        // SAFETY: FFI async copy of c.len bytes from `host` to `dev`, both valid and reserved for this
        // stream until it is synchronised (the caller's contract).
        ck(
            unsafe { cu::cuMemcpyHtoDAsync_v2(dev, host.cast(), c.len, stream.as_inner()) },
            "cuMemcpyHtoDAsync",
        )?;
        let mut p = self.params(
            j0,
            dev,
            dev,
            c.len,
            partials + 16 * c.first_partial as u64,
            c.first_block,
        );
        let r = self.launch_fused(stream, dir, &p);
        p.key.zeroize();
        r?;
        // SAFETY: as above, back into the same host range.
        ck(
            unsafe { cu::cuMemcpyDtoHAsync_v2(host.cast(), dev, c.len, stream.as_inner()) },
            "cuMemcpyDtoHAsync",
        )
    }

    fn batch_keys(&self) -> Result<MutexGuard<'_, Option<BatchKeys>>, Error> {
        let mut g = self.batch_keys.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(BatchKeys::new(self.rt, &[self.aes_key()])?);
        }
        Ok(g)
    }
}

/// A host range page-locked with `cuMemHostRegister` for the duration of one call.
struct HostRegistration {
    ptr: *mut u8,
    /// False when the range was already registered by the caller (then we do not unregister it).
    owned: bool,
}

impl HostRegistration {
    /// Register `len` bytes at `ptr`; `None` if the driver refuses (the caller stages instead).
    ///
    /// A range inside a live [`PinnedRegion`] is used as is. A range the driver reports as already
    /// registered by someone else may be only partly page-locked, so it is staged rather than DMA'd.
    fn try_new(ptr: *mut u8, len: usize) -> Option<HostRegistration> {
        if pinned_covers(ptr as usize, len) {
            return Some(HostRegistration { ptr, owned: false });
        }
        // SAFETY: FFI call registering a live host range the caller exclusively borrows for this call.
        let r = unsafe { cu::cuMemHostRegister_v2(ptr.cast(), len, 0) };
        match r {
            cu::CUresult::CUDA_SUCCESS => Some(HostRegistration { ptr, owned: true }),
            _ => None,
        }
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: FFI call unregistering the range this guard registered.
            let _ = unsafe { cu::cuMemHostUnregister(self.ptr.cast()) };
        }
    }
}

/// Page-lock a host buffer for repeated transfers (`cuMemHostRegister`); the host-resident path then skips
/// its own registration. Unregistered on drop. The guard does not borrow the buffer: keep the buffer alive
/// (and do not move it) while the guard lives.
pub struct PinnedRegion {
    ptr: *mut u8,
}

// SAFETY: the guard only holds an address that it passes back to the driver on drop; it never dereferences it.
unsafe impl Send for PinnedRegion {}
// SAFETY: as above; no method reads or writes through the pointer.
unsafe impl Sync for PinnedRegion {}

/// Live [`PinnedRegion`]s as (start address, length): the host path DMAs in place only within these or
/// within a range it registered itself.
static PINNED: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());

/// Whether [start, start + len) lies inside one live [`PinnedRegion`].
fn pinned_covers(start: usize, len: usize) -> bool {
    let list = PINNED.lock().unwrap_or_else(|p| p.into_inner());
    region_covers(&list, start, len)
}

/// Whether [start, start + len) lies inside one of `regions`.
pub(crate) fn region_covers(regions: &[(usize, usize)], start: usize, len: usize) -> bool {
    regions
        .iter()
        .any(|&(s, l)| start >= s && start.checked_add(len).is_some_and(|e| e <= s + l))
}

impl PinnedRegion {
    /// Register `buf` with the driver.
    pub fn new(buf: &mut [u8]) -> Result<PinnedRegion, Error> {
        runtime()?;
        // SAFETY: FFI call registering a live host range.
        ck(
            unsafe { cu::cuMemHostRegister_v2(buf.as_mut_ptr().cast(), buf.len(), 0) },
            "cuMemHostRegister",
        )?;
        PINNED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((buf.as_mut_ptr() as usize, buf.len()));
        Ok(PinnedRegion {
            ptr: buf.as_mut_ptr(),
        })
    }
}

impl Drop for PinnedRegion {
    fn drop(&mut self) {
        {
            let mut list = PINNED.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = list.iter().position(|&(s, _)| s == self.ptr as usize) {
                list.swap_remove(i);
            }
        }
        if runtime().is_ok() {
            // SAFETY: FFI call unregistering the range registered in `new`.
            let _ = unsafe { cu::cuMemHostUnregister(self.ptr.cast()) };
        }
    }
}

impl Drop for CudaEngine {
    fn drop(&mut self) {
        // The power table is derived from H: wipe it before the memory is freed.
        if self.rt.enter().is_ok() {
            let _ = self.fused_powers.zero();
        }
    }
}

impl GcmEngine for CudaEngine {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn seal(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        self.run_host(Dir::Seal, j0, aad, buf)
    }

    fn open(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        self.run_host(Dir::Open, j0, aad, buf)
    }

    fn seal_batch(&self, jobs: &mut [EngineJob<'_>]) -> Result<(), Error> {
        self.rt.enter()?;
        let keys = self.batch_keys()?;
        let keys = keys
            .as_ref()
            .ok_or_else(|| Error::Device("batch keys".into()))?;
        batch::run_jobs(self.rt, keys, jobs, |_| 0, Dir::Seal)
    }

    fn open_batch(&self, jobs: &mut [EngineJob<'_>]) -> Result<(), Error> {
        self.rt.enter()?;
        let keys = self.batch_keys()?;
        let keys = keys
            .as_ref()
            .ok_or_else(|| Error::Device("batch keys".into()))?;
        batch::run_jobs(self.rt, keys, jobs, |_| 0, Dir::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_tables_hold_the_documented_powers() {
        let km = KeyMaterial::new(&[0x42; 32]).unwrap();
        let hk = km.hash_key();
        let t = fused_power_table(&km);
        assert_eq!(t.len(), abi::FUSED_POW_COUNT as usize);
        // stride entries Q_32, Q_64, Q_96, Q_128 by repeated multiplication
        let mut q = hk.h_prime();
        let mut pw = vec![0u128; 129];
        pw[1] = q;
        for (k, slot) in pw.iter_mut().enumerate().skip(2) {
            q = gcmx_core::field::dot(q, hk.h_prime());
            *slot = q;
            let _ = k;
        }
        assert_eq!(&t[..4], &[pw[32], pw[64], pw[96], pw[128]]);
        // per-thread entries: thread t = 32w + l multiplies by h^((W-1-w)*WARP_SPAN + 32 - l)
        let w_count = (abi::FUSED_THREADS / 32) as u64;
        for t_idx in 0..abi::FUSED_THREADS {
            let (w, l) = ((t_idx / 32) as u64, (t_idx % 32) as u64);
            let e = (w_count - 1 - w) * abi::FUSED_WARP_SPAN + 32 - l;
            assert_eq!(
                t[(abi::POW_THREAD_BASE + t_idx) as usize],
                hk.power(e),
                "thread {t_idx}"
            );
        }
        // the last thread of the last warp multiplies by h^1 = H'
        assert_eq!(*t.last().unwrap(), hk.h_prime());
        let g = ghash_power_table(&km);
        assert_eq!(g.len(), abi::GHASH_POW_COUNT as usize);
        assert_eq!(
            g[abi::POW_THREAD_BASE as usize],
            hk.power(7 * abi::GHASH_WARP_SPAN + 32)
        );
    }

    #[test]
    fn pinned_region_coverage() {
        let r = [(1000usize, 100usize), (5000, 10)];
        assert!(region_covers(&r, 1000, 100));
        assert!(region_covers(&r, 1050, 50));
        assert!(!region_covers(&r, 1050, 51));
        assert!(!region_covers(&r, 999, 10));
        assert!(region_covers(&r, 5000, 10));
        assert!(!region_covers(&r, 1090, 4000));
        assert!(!region_covers(&r, usize::MAX, 2));
        assert!(!region_covers(&[], 0, 0));
    }

    #[test]
    fn le_bytes_round_trip() {
        let v = vec![0x0011_2233_4455_6677_8899_aabb_ccdd_eeffu128, 1, u128::MAX];
        let b = u128s_to_le_bytes(&v);
        assert_eq!(&b[..8], &0x8899_aabb_ccdd_eeffu64.to_le_bytes());
        assert_eq!(u128s_from_le_bytes(&b), v);
    }
}
