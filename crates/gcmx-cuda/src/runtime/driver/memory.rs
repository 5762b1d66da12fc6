//! Memory: device buffers wiped before they are freed, the fences of the queued work that uses them,
//! lanes' page-locked staging, parameter slots of asynchronous calls, and device-batch scratch.

use super::*;

/// Smallest parameter slot allocated (bytes).
pub(super) const SLOT_MIN: usize = 4096;
/// Smallest device-batch scratch allocated (bytes).
pub(super) const SCRATCH_MIN: usize = 1 << 20;

/// Device memory of one device, 256-byte aligned, wiped (set to zero) before it is freed.
///
/// Shared as `Arc<DeviceMem>`: a lane that queues work on it holds a clone until it has waited, so the
/// last clone is dropped only when no work on it is pending, and the wipe then orders after all of it.
pub(crate) struct DeviceMem {
    pub(super) gpu: Arc<Gpu>,
    /// Device address (0 when `len == 0`).
    pub(super) addr: u64,
    pub(super) len: usize,
    /// Work queued on callers' streams that uses this memory (see [`DeviceMem::order`]).
    pub(super) uses: Mutex<Uses>,
}

/// The fences of the queued work that last wrote a buffer and that read it since.
#[derive(Default)]
pub(super) struct Uses {
    pub(super) write: Option<Arc<Fence>>,
    pub(super) reads: Vec<Arc<Fence>>,
}

/// Reads kept before completed ones are looked for.
pub(super) const READS_PRUNE: usize = 16;

impl Uses {
    /// Forget fences whose work has completed.
    pub(super) fn prune(&mut self) {
        if self
            .write
            .as_ref()
            .is_some_and(|f| f.done().unwrap_or(false))
        {
            self.write = None;
        }
        self.reads.retain(|f| !f.done().unwrap_or(false));
    }
}

impl core::fmt::Debug for DeviceMem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "DeviceMem({} bytes on {:?})", self.len, self.gpu)
    }
}

impl DeviceMem {
    /// `len` bytes of device memory with undefined contents (`len == 0` allocates nothing).
    pub(crate) fn new(gpu: &Arc<Gpu>, len: usize) -> Result<Arc<DeviceMem>, Error> {
        let mut addr = 0;
        if len > 0 {
            gpu.enter()?;
            // SAFETY: an allocation of `len` bytes in the current context; writes the address. The memory
            // is never read as a Rust value, only by copies and kernels, and every host read of it comes
            // after a write (or the wipe in Drop).
            let r = unsafe { cu::cuMemAlloc_v2(&mut addr, len) };
            check(r, format!("cuMemAlloc({len} bytes)"))?;
        }
        Ok(Arc::new(DeviceMem {
            gpu: gpu.clone(),
            addr,
            len,
            uses: Mutex::new(Uses::default()),
        }))
    }

    /// Make `stream` wait for the queued work a new use must follow: the last write and, for a write,
    /// every read since. Work queued on a caller's stream finishes in any order relative to gcmx's own
    /// streams; this is what orders it (a forgotten `Pending` included).
    pub(super) fn order(&self, stream: cu::CUstream, write: bool) -> Result<(), Error> {
        let mut u = lock(&self.uses);
        if write || u.reads.len() > READS_PRUNE {
            u.prune();
        }
        if let Some(f) = &u.write {
            f.make_wait(stream)?;
        }
        if write {
            for f in &u.reads {
                f.make_wait(stream)?;
            }
        }
        Ok(())
    }

    /// Record that queued work ending at `f` reads (or writes) this memory.
    pub(super) fn note(&self, f: &Arc<Fence>, write: bool) {
        let mut u = lock(&self.uses);
        if write {
            u.write = Some(f.clone());
            u.reads.clear();
        } else if let Some(r) = u
            .reads
            .iter_mut()
            .find(|r| r.stream != 0 && r.stream == f.stream)
        {
            // Work on one stream completes in order: the later fence stands for the earlier one.
            *r = f.clone();
        } else {
            u.reads.push(f.clone());
        }
    }

    /// Whether no queued work of a caller's stream uses this memory.
    pub(super) fn is_idle(&self) -> bool {
        let mut u = lock(&self.uses);
        u.prune();
        u.write.is_none() && u.reads.is_empty()
    }

    /// Wait on the host for all queued work that uses this memory.
    pub(super) fn settle(&self) -> Result<(), Error> {
        let mut u = lock(&self.uses);
        if let Some(f) = &u.write {
            f.wait()?;
        }
        for f in &u.reads {
            f.wait()?;
        }
        *u = Uses::default();
        Ok(())
    }

    /// `len` bytes of device memory set to zero.
    pub(crate) fn zeroed(gpu: &Arc<Gpu>, len: usize) -> Result<Arc<DeviceMem>, Error> {
        let m = DeviceMem::new(gpu, len)?;
        m.zero()?;
        Ok(m)
    }

    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The device.
    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    pub(super) fn range(&self, off: usize, n: usize, what: &str) -> Result<u64, Error> {
        if off.checked_add(n).is_none_or(|e| e > self.len) {
            return Err(internal(format!(
                "{what}: {n} bytes at offset {off} of a {}-byte device buffer",
                self.len
            )));
        }
        Ok(self.addr + off as u64)
    }

    /// Copy `src` to byte `off`, through page-locked staging that is wiped afterwards (so the driver
    /// never keeps a bounce copy of the bytes), and wait for the copy.
    pub(crate) fn upload(self: &Arc<Self>, off: usize, src: &[u8]) -> Result<(), Error> {
        self.range(off, src.len(), "upload")?;
        if src.is_empty() {
            return Ok(());
        }
        self.gpu.with_lane(|lane| {
            let step = src.len().min(COPY_STEP);
            lane.reserve_host(0, step)?;
            let r = (|| -> Result<(), Error> {
                for (k, piece) in src.chunks(step).enumerate() {
                    lane.host(0)?[..piece.len()].copy_from_slice(piece);
                    lane.upload(
                        0,
                        0,
                        At {
                            mem: self,
                            off: off + k * step,
                        },
                        piece.len(),
                    )?;
                }
                Ok(())
            })();
            let wiped = lane.host(0).map(|h| h[..step].zeroize());
            r.and(wiped)
        })
    }

    /// Copy bytes from `off` into `dst`, through page-locked staging that is wiped afterwards.
    pub(crate) fn download(self: &Arc<Self>, off: usize, dst: &mut [u8]) -> Result<(), Error> {
        self.range(off, dst.len(), "download")?;
        if dst.is_empty() {
            return Ok(());
        }
        self.gpu.with_lane(|lane| {
            let step = dst.len().min(COPY_STEP);
            lane.reserve_host(0, step)?;
            let r = (|| -> Result<(), Error> {
                for (k, piece) in dst.chunks_mut(step).enumerate() {
                    lane.download(
                        At {
                            mem: self,
                            off: off + k * step,
                        },
                        0,
                        0,
                        piece.len(),
                    )?;
                    piece.copy_from_slice(&lane.host(0)?[..piece.len()]);
                }
                Ok(())
            })();
            let wiped = lane.host(0).map(|h| h[..step].zeroize());
            r.and(wiped)
        })
    }

    /// Set every byte to zero and wait.
    pub(crate) fn zero(self: &Arc<Self>) -> Result<(), Error> {
        if self.len == 0 {
            return Ok(());
        }
        self.gpu
            .with_lane(|lane| lane.memset(At::start(self), self.len))
    }
}

impl Drop for DeviceMem {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        // Queued work of callers' streams may still use the memory: wait for it (an error of the wait
        // is an error of that work, which has drained).
        let _ = self.settle();
        // Best effort: with a lost context neither the wipe nor the free can run, and the driver
        // releases the memory with the context.
        let (addr, len) = (self.addr, self.len);
        let wiped = self.gpu.with_lane(|lane| lane.memset_raw(addr, len));
        if wiped.is_err() && self.gpu.enter().is_ok() {
            // No lane (a stream could not be made) or its memset failed: wipe synchronously, on no
            // stream of ours, rather than free the bytes as they are.
            let _ = memset_now(addr, len);
        }
        if self.gpu.enter().is_ok() {
            // SAFETY: `addr` came from cuMemAlloc in `new` and is freed once, here; no work on it is
            // pending (module docs: every lane that used it held this Arc until it had waited) and the
            // wipe above has been waited for.
            let _ = unsafe { cu::cuMemFree_v2(addr) };
        }
    }
}

/// Set `len` bytes at `addr` to zero and wait (the legacy stream, which our streams synchronise with).
/// Only for memory that no pending work uses (a buffer being freed); the context must be current.
pub(super) fn memset_now(addr: u64, len: usize) -> Result<(), Error> {
    // SAFETY: sets device memory only, inside an allocation of this context that no pending work uses
    // (see the caller); the call returns when the memset is done.
    let r = unsafe { cu::cuMemsetD8_v2(addr, 0, len) };
    check(r, "cuMemsetD8")
}

/// Page-locked host memory owned by a lane: zeroed when allocated and before it is freed.
pub(super) struct PinnedMem {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

// SAFETY: the memory is owned by this value alone (a plain allocation, reached only through &self /
// &mut self) and freed once, in Drop.
unsafe impl Send for PinnedMem {}
// SAFETY: shared access only reads (`slice`).
unsafe impl Sync for PinnedMem {}

impl PinnedMem {
    pub(super) fn empty() -> PinnedMem {
        PinnedMem {
            ptr: ptr::null_mut(),
            len: 0,
        }
    }

    pub(super) fn new(len: usize) -> Result<PinnedMem, Error> {
        if len == 0 {
            return Ok(PinnedMem::empty());
        }
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: allocates `len` bytes of page-locked host memory in the current context; writes the
        // pointer.
        let r = unsafe { cu::cuMemAllocHost_v2(&mut p, len) };
        check(r, format!("cuMemAllocHost({len} bytes)"))?;
        let mut m = PinnedMem { ptr: p.cast(), len };
        m.bytes().fill(0);
        Ok(m)
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr` is a live allocation of `len` bytes owned by `self`, initialised in `new`, and
        // no `&mut` to it exists while `&self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub(super) fn bytes(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as in `slice`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedMem {
    fn drop(&mut self) {
        self.bytes().zeroize();
        if self.len > 0 {
            // SAFETY: frees the allocation made in `new`, once; the owning lane has waited for the
            // copies that used it (Lane::drop and reserve_host wait before dropping staging).
            let _ = unsafe { cu::cuMemFreeHost(self.ptr.cast()) };
        }
    }
}

/// Page-locked host memory mapped for the device, for the parameters of one asynchronous call (its
/// descriptor, nonce and AAD, which the kernel reads in place, and the verdict it writes back). Reused
/// only once the fence of the work that used it is complete.
pub(crate) struct ParamSlot {
    pub(super) gpu: Arc<Gpu>,
    pub(super) host: *mut u8,
    pub(super) len: usize,
    pub(super) dev: u64,
    /// The fence of the last work that used the slot.
    pub(super) fence: Mutex<Option<Arc<Fence>>>,
}

// SAFETY: the slot owns its page-locked allocation; host access goes through &mut self (after the fence),
// device access through work that the fence tracks.
unsafe impl Send for ParamSlot {}
// SAFETY: &self methods read only the handle fields, never the memory.
unsafe impl Sync for ParamSlot {}

impl core::fmt::Debug for ParamSlot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ParamSlot({} bytes)", self.len)
    }
}

impl ParamSlot {
    pub(super) fn new(gpu: &Arc<Gpu>, len: usize) -> Result<ParamSlot, Error> {
        gpu.enter()?;
        let mut host: *mut c_void = ptr::null_mut();
        let flags = cu::CU_MEMHOSTALLOC_PORTABLE | cu::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: allocates `len` bytes of page-locked, device-mapped host memory; writes the pointer.
        let r = unsafe { cu::cuMemHostAlloc(&mut host, len, flags) };
        check(r, "cuMemHostAlloc")?;
        let mut slot = ParamSlot {
            gpu: gpu.clone(),
            host: host.cast(),
            len,
            dev: 0,
            fence: Mutex::new(None),
        };
        let mut dev: cu::CUdeviceptr = 0;
        // SAFETY: asks the device address of the allocation just made (mapped, so it has one).
        let r = unsafe { cu::cuMemHostGetDevicePointer_v2(&mut dev, host, 0) };
        check(r, "cuMemHostGetDevicePointer")?;
        slot.dev = dev;
        slot.bytes()?.fill(0);
        Ok(slot)
    }

    pub(super) fn ready(&self) -> bool {
        lock(&self.fence)
            .as_ref()
            .is_none_or(|f| f.done().unwrap_or(false))
    }

    /// The bytes, once the work that last used them is complete.
    pub(crate) fn bytes(&mut self) -> Result<&mut [u8], Error> {
        let f = lock(&self.fence).take();
        if let Some(f) = f
            && let Err(e) = f.wait()
        {
            *lock(&self.fence) = Some(f);
            return Err(e);
        }
        // SAFETY: `host` is our allocation of `len` bytes; no queued work uses it (its fence is
        // complete) and `&mut self` excludes every other host access.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.host, self.len) })
    }

    /// The work ending at `f` uses the slot.
    pub(crate) fn set_fence(&self, f: &Arc<Fence>) {
        *lock(&self.fence) = Some(f.clone());
    }
}

impl Drop for ParamSlot {
    fn drop(&mut self) {
        // Never free memory that queued work may still read or write: wait for it (an error of the wait
        // is an error of that work, which has drained).
        if let Some(f) = lock(&self.fence).take() {
            let _ = f.wait();
        }
        if let Ok(b) = self.bytes() {
            b.fill(0);
            std::hint::black_box(&b);
        }
        if self.gpu.enter().is_ok() {
            // SAFETY: frees our allocation once; no work uses it (waited above).
            let r = unsafe { cu::cuMemFreeHost(self.host.cast()) };
            let _ = r;
        }
    }
}

/// A device-batch scratch and its never-reset barrier counter (the value the counter holds once every
/// launch queued on this scratch so far has run).
#[derive(Debug)]
pub(crate) struct Scratch {
    pub(super) mem: Arc<DeviceMem>,
    pub(super) bar: u32,
}

impl Scratch {
    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        self.mem.len()
    }

    /// Count in a launch of `grid` blocks with `barriers` grid barriers (`DbArgs::barriers`).
    pub(super) fn advance(&mut self, barriers: u32, grid: u32) {
        self.bar = self.bar.wrapping_add(barriers.wrapping_mul(grid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_memory_round_trips_and_is_wiped_before_it_is_freed() {
        let Some(g) = test_gpu() else { return };
        let m = DeviceMem::new(&g, 100_003).unwrap();
        let data: Vec<u8> = (0..70_000u32).map(|i| (i * 7 + 1) as u8).collect();
        m.upload(5, &data).unwrap();
        let mut back = vec![0u8; data.len()];
        m.download(5, &mut back).unwrap();
        assert_eq!(back, data);
        m.zero().unwrap();
        m.download(5, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0));
        assert!(m.upload(100_000, &[1; 4]).is_err(), "past the end");
        assert!(
            m.download(usize::MAX, &mut [0; 1]).is_err(),
            "offset overflow"
        );
        m.upload(0, &[0xAB; 64]).unwrap();
        drop(m);
        assert!(nothing_freed_unwiped());
    }

    #[test]
    fn parameter_slots_are_reused_once_free() {
        let Some(g) = test_gpu() else { return };
        let mut s = g.take_slot(100).unwrap();
        assert!(s.bytes().unwrap().len() >= 100);
        s.bytes().unwrap()[..4].copy_from_slice(&[1, 2, 3, 4]);
        g.give_slot(s);
        let mut t = g.take_slot(50).unwrap();
        assert!(t.bytes().unwrap().len() >= 50);
        g.give_slot(t);
    }

    #[test]
    fn scratch_is_zeroed_when_new() {
        let Some(g) = test_gpu() else { return };
        let s = g.take_scratch(3000).unwrap();
        assert!(s.len() >= 3000);
        let mut back = vec![1u8; 3000];
        s.mem.download(0, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0));
        g.give_scratch(s);
    }
}
