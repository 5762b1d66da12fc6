//! Caller memory: page-locking for one call ([`direct_io`], [`direct_io_spans`]), for a scope
//! ([`pin_scope`]) or for the life of an owned buffer ([`HostPin`]), and the copies that read and
//! write it in place.

use super::*;

/// Live [`pin_scope`] registrations as (start address, length).
pub(super) static PINNED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

pub(super) fn pinned_covers(start: usize, len: usize) -> bool {
    super::super::region_covers(&lock(&PINNED), start, len)
}

/// Whether the `len` bytes at `start` lie inside a live [`pin_scope`] or [`HostPin`]: transferred in
/// place, they cost no registration.
pub(crate) fn is_pinned(start: *const u8, len: usize) -> bool {
    pinned_covers(start as usize, len)
}

/// A host range page-locked for one [`direct_io`] call (or covered by a live [`pin_scope`]).
pub(super) struct Registration {
    pub(super) gpu: Arc<Gpu>,
    pub(super) ptr: *mut c_void,
    /// False when a live scope registered the range (then it is not ours to unregister).
    pub(super) owned: bool,
}

impl Registration {
    /// Page-lock the `len` bytes at `ptr` for this call; `None` if the driver refuses (the caller stages
    /// instead). The range must be caller memory borrowed exclusively for the call.
    ///
    /// A range inside a live [`pin_scope`] is used as is. A range the driver reports as already
    /// registered by someone else may be only partly page-locked, so it is refused.
    pub(super) fn for_call(gpu: &Arc<Gpu>, ptr: *mut u8, len: usize) -> Option<Registration> {
        if len == 0 {
            return None;
        }
        let ptr = ptr.cast::<c_void>();
        if pinned_covers(ptr as usize, len) {
            return Some(Registration {
                gpu: gpu.clone(),
                ptr,
                owned: false,
            });
        }
        gpu.enter().ok()?;
        // SAFETY: page-locks a live host range that the caller borrows exclusively for as long as this
        // registration lives; `Drop` unregisters it after every transfer on it has ended (direct_io).
        let r = unsafe { cu::cuMemHostRegister_v2(ptr, len, 0) };
        (r == cu::CUresult::CUDA_SUCCESS).then(|| Registration {
            gpu: gpu.clone(),
            ptr,
            owned: true,
        })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.owned && self.gpu.enter().is_ok() {
            // SAFETY: unregisters the range `for_call` registered; no transfer on it is pending.
            let r = unsafe { cu::cuMemHostUnregister(self.ptr) };
            let _ = r;
        }
    }
}

/// Transfers between the caller's buffers and device memory, on the lanes of a [`direct_io`] or
/// [`direct_io_spans`] call.
pub(crate) struct DirectIo<'a> {
    pub(super) lanes: &'a mut [Lane],
    /// The page-locked ranges (start, length): one per span.
    pub(super) ranges: Vec<(*mut u8, usize)>,
}

impl core::fmt::Debug for DirectIo<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "DirectIo({} ranges, {} lanes)",
            self.ranges.len(),
            self.lanes.len()
        )
    }
}

impl DirectIo<'_> {
    /// Lane `i` of the call, for launches, memsets and its own staging.
    pub(crate) fn lane(&mut self, i: usize) -> Result<&mut Lane, Error> {
        let n = self.lanes.len();
        self.lanes
            .get_mut(i)
            .ok_or_else(|| internal(format!("lane {i} of {n}")))
    }

    pub(super) fn host_range(&self, span: usize, off: usize, n: usize) -> Result<*mut u8, Error> {
        let Some(&(p, len)) = self.ranges.get(span) else {
            return Err(internal(format!("span {span} of {}", self.ranges.len())));
        };
        if off.checked_add(n).is_none_or(|e| e > len) {
            return Err(internal(format!(
                "caller range {off}+{n} outside {len} bytes"
            )));
        }
        Ok(p.wrapping_add(off))
    }

    /// Enqueue on lane `i`: `n` caller bytes from `host_off` to `dst`.
    pub(crate) fn upload(
        &mut self,
        i: usize,
        host_off: usize,
        dst: At<'_>,
        n: usize,
    ) -> Result<(), Error> {
        self.upload_span(i, 0, host_off, dst, n)
    }

    /// Enqueue on lane `i`: `n` bytes from `src` to the caller's buffer at `host_off`.
    pub(crate) fn download(
        &mut self,
        i: usize,
        src: At<'_>,
        host_off: usize,
        n: usize,
    ) -> Result<(), Error> {
        self.download_span(i, 0, src, host_off, n)
    }

    /// Enqueue on lane `i`: `n` bytes from byte `off` of span `span` to `dst`.
    pub(crate) fn upload_span(
        &mut self,
        i: usize,
        span: usize,
        off: usize,
        dst: At<'_>,
        n: usize,
    ) -> Result<(), Error> {
        let src = self.host_range(span, off, n)?;
        let lane = self.lane(i)?;
        // SAFETY: the source is inside caller memory that the direct_io call borrows exclusively and
        // keeps page-locked until every lane of the call has waited for its work (also when the closure
        // fails or panics).
        unsafe { lane.htod(src.cast_const(), dst, n) }
    }

    /// Enqueue on lane `i`: `n` bytes from `src` to byte `off` of span `span`.
    pub(crate) fn download_span(
        &mut self,
        i: usize,
        span: usize,
        src: At<'_>,
        off: usize,
        n: usize,
    ) -> Result<(), Error> {
        let dst = self.host_range(span, off, n)?;
        let lane = self.lane(i)?;
        // SAFETY: as in `upload_span`, in the other direction: nothing reads or writes the caller's
        // memory until the direct_io call has waited for every lane.
        unsafe { lane.dtoh(src, dst, n) }
    }
}

/// Run `f` with transfers in place between `host` (page-locked for the call, or inside a live
/// [`pin_scope`]) and device memory on `lanes`; wait for every lane before returning, whatever `f`
/// returned, and also when it panics. `None` (and `f` not run) when `host` cannot be page-locked: the
/// caller stages through its lanes' own buffers instead.
pub(crate) fn direct_io<R>(
    gpu: &Arc<Gpu>,
    lanes: &mut [Lane],
    host: &mut [u8],
    f: impl FnOnce(&mut DirectIo<'_>) -> Result<R, Error>,
) -> Option<Result<R, Error>> {
    let reg = Registration::for_call(gpu, host.as_mut_ptr(), host.len())?;
    run_direct(lanes, vec![(host.as_mut_ptr(), host.len())], vec![reg], f)
}

/// [`direct_io`] over many caller ranges ([`super::super::Span`]s, from [`super::super::extend_spans`]): each span
/// is page-locked as one range (or used as it is inside a live [`pin_scope`]) and the closure addresses
/// span `k` by its index in `spans`. `None` (and `f` not run) when a span cannot be page-locked.
///
/// # Safety
/// Every span's `len` bytes from `start` are live memory that the caller borrows exclusively for the
/// whole call, and that nothing reads or writes (the closure included) but this call's transfers until
/// it returns.
pub(crate) unsafe fn direct_io_spans<R>(
    gpu: &Arc<Gpu>,
    lanes: &mut [Lane],
    spans: &[super::super::Span],
    f: impl FnOnce(&mut DirectIo<'_>) -> Result<R, Error>,
) -> Option<Result<R, Error>> {
    let mut ranges = Vec::with_capacity(spans.len());
    let mut regs = Vec::with_capacity(spans.len());
    for sp in spans {
        regs.push(Registration::for_call(gpu, sp.start, sp.len)?);
        ranges.push((sp.start, sp.len));
    }
    run_direct(lanes, ranges, regs, f)
}

pub(super) fn run_direct<R>(
    lanes: &mut [Lane],
    ranges: Vec<(*mut u8, usize)>,
    regs: Vec<Registration>,
    f: impl FnOnce(&mut DirectIo<'_>) -> Result<R, Error>,
) -> Option<Result<R, Error>> {
    let mut io = DirectIo { lanes, ranges };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut io)));
    let mut waited = Ok(());
    for lane in io.lanes.iter_mut() {
        if let Err(e) = lane.wait() {
            waited = Err(e);
        }
    }
    // Every lane has waited (an error of a wait is an error of work that has drained).
    drop(regs);
    match r {
        Ok(r) => Some(r.and_then(|v| waited.map(|()| v))),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Removes a [`pin_scope`] registration when the scope ends (also by a panic).
pub(super) struct ScopeGuard<'g> {
    pub(super) gpu: &'g Arc<Gpu>,
    pub(super) ptr: *mut c_void,
    pub(super) len: usize,
}

impl Drop for ScopeGuard<'_> {
    fn drop(&mut self) {
        {
            let mut list = lock(&PINNED);
            if let Some(i) = list
                .iter()
                .position(|&e| e == (self.ptr as usize, self.len))
            {
                list.swap_remove(i);
            }
        }
        if self.gpu.enter().is_ok() {
            // SAFETY: unregisters the range `pin_scope` registered. Every transfer on it ran inside a
            // call that borrowed the memory from the scope's closure, and all of them returned (having
            // waited) before the closure did.
            let r = unsafe { cu::cuMemHostUnregister(self.ptr) };
            let _ = r;
        }
    }
}

/// Page-lock `buf` for the duration of `f` (for every device: portable), so that calls inside `f`
/// transfer it in place without registering it each time. The registration ends when `f` returns or
/// panics, before the borrow of `buf` does.
pub(crate) fn pin_scope<R>(
    gpu: &Arc<Gpu>,
    buf: &mut [u8],
    f: impl FnOnce(&mut [u8]) -> R,
) -> Result<R, Error> {
    if buf.is_empty() {
        return Ok(f(buf));
    }
    gpu.enter()?;
    let ptr = buf.as_mut_ptr().cast::<c_void>();
    // SAFETY: page-locks the live range that `buf` borrows for this whole call; the guard below
    // unregisters it before the call returns (or unwinds).
    let r = unsafe { cu::cuMemHostRegister_v2(ptr, buf.len(), cu::CU_MEMHOSTREGISTER_PORTABLE) };
    check(r, "cuMemHostRegister")?;
    lock(&PINNED).push((ptr as usize, buf.len()));
    let guard = ScopeGuard {
        gpu,
        ptr,
        len: buf.len(),
    };
    let out = f(buf);
    drop(guard);
    Ok(out)
}

/// A host buffer that owns its bytes and stays page-locked (registered for every device, and listed
/// with the [`pin_scope`] registrations) from [`HostPin::zeroed`] until it is dropped: calls whose
/// buffers lie inside it DMA them in place without registering anything.
///
/// Sound without care from the callers: the bytes are reached only through `&`/`&mut` borrows of the
/// pin, so every transfer on them runs inside a call that borrows them and waits before returning, and
/// the registration ends (in `Drop`) before the memory is freed. A leaked pin leaks its memory with its
/// registration: no later allocation can be mistaken for page-locked memory. So does a dropped pin whose
/// registration cannot be ended (its context cannot be made current, or the driver refuses).
pub(crate) struct HostPin {
    gpu: Arc<Gpu>,
    /// Never resized: its allocation is the registered range.
    buf: Vec<u8>,
}

impl HostPin {
    /// `len` zero bytes, page-locked. `Error::InvalidInput` when the memory cannot be had, the
    /// driver's `Error::Device` when it refuses to page-lock it.
    pub(crate) fn zeroed(gpu: &Arc<Gpu>, len: usize) -> Result<HostPin, Error> {
        let mut buf = Vec::new();
        buf.try_reserve_exact(len).map_err(|_| {
            Error::InvalidInput(format!("cannot allocate {len} bytes of host memory"))
        })?;
        buf.resize(len, 0);
        if len > 0 {
            gpu.enter()?;
            let ptr = buf.as_mut_ptr().cast::<c_void>();
            // SAFETY: page-locks the allocation that `buf` owns; it is never resized, and `Drop`
            // unregisters it before `buf` frees it.
            let r = unsafe { cu::cuMemHostRegister_v2(ptr, len, cu::CU_MEMHOSTREGISTER_PORTABLE) };
            check(r, "cuMemHostRegister")?;
            lock(&PINNED).push((ptr as usize, len));
        }
        Ok(HostPin {
            gpu: gpu.clone(),
            buf,
        })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for HostPin {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let (ptr, len) = (self.buf.as_mut_ptr().cast::<c_void>(), self.buf.len());
        let unregistered = self.gpu.enter().is_ok() && {
            // SAFETY: unregisters the range `zeroed` registered; no transfer on it is pending (each
            // ran in a call that borrowed the pin and waited before returning).
            let r = unsafe { cu::cuMemHostUnregister(ptr) };
            r == cu::CUresult::CUDA_SUCCESS
        };
        if !unregistered {
            // The driver may still have the range registered (the context could not be made
            // current, or it refused): freed, the memory could come back as a new buffer that the
            // driver takes for page-locked memory. Leaked with its registration instead, and left
            // listed, as it stays page-locked.
            std::mem::forget(std::mem::take(&mut self.buf));
            return;
        }
        let mut list = lock(&PINNED);
        if let Some(i) = list.iter().position(|&e| e == (ptr as usize, len)) {
            list.swap_remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_pins_its_buffer_until_it_ends() {
        let Some(g) = test_gpu() else { return };
        let mut buf = vec![3u8; 1 << 16];
        let (p, n) = (buf.as_ptr() as usize, buf.len());
        let inside = pin_scope(&g, &mut buf, |b| {
            b[0] = 4;
            pinned_covers(p, n)
        })
        .unwrap();
        assert!(inside, "pinned inside the scope");
        assert!(!pinned_covers(p, n), "not after it");
        assert_eq!(buf[0], 4);
    }

    #[test]
    fn direct_io_moves_caller_memory_in_place() {
        let Some(g) = test_gpu() else { return };
        let m = DeviceMem::zeroed(&g, 1 << 16).unwrap();
        let mut host: Vec<u8> = (0..1u32 << 16).map(|i| i as u8).collect();
        let want = host.clone();
        let mut lanes = [Lane::new(&g).unwrap()];
        direct_io(&g, &mut lanes, &mut host, |dio| {
            dio.upload(0, 0, At::start(&m), 1 << 16)?;
            dio.lane(0)?.memset(At::start(&m), 256)?;
            dio.download(0, At::start(&m), 0, 1 << 16)
        })
        .expect("page-locked")
        .unwrap();
        assert!(host[..256].iter().all(|&b| b == 0));
        assert_eq!(host[256..], want[256..]);
        assert!(!pinned_covers(host.as_ptr() as usize, host.len()));
    }

    #[test]
    fn a_host_pin_is_covered_until_dropped() {
        let Some(g) = test_gpu() else { return };
        let mut pin = HostPin::zeroed(&g, 1 << 16).unwrap();
        assert!(pin.bytes().iter().all(|&b| b == 0));
        pin.bytes_mut()[7] = 9;
        let (p, n) = (pin.bytes().as_ptr() as usize, pin.bytes().len());
        assert!(pinned_covers(p, n));
        assert!(pinned_covers(p + 100, 200));
        drop(pin);
        assert!(!pinned_covers(p, n));
        // An empty pin registers nothing.
        let empty = HostPin::zeroed(&g, 0).unwrap();
        assert!(empty.bytes().is_empty());
    }
}
