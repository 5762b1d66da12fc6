//! Streams: gcmx's own (lanes, with the staging and buffers their queued work uses), fences of
//! queued work, callers' streams, and (feature `bench`) timing events.

use super::*;

/// A non-blocking stream of the current context, destroyed on drop (the driver lets queued work finish).
pub(super) struct RawStream(pub(super) cu::CUstream);

// SAFETY: a stream handle may be used from any thread; the driver serialises work queued through it.
unsafe impl Send for RawStream {}

impl RawStream {
    pub(super) fn new() -> Result<RawStream, Error> {
        let mut raw: cu::CUstream = ptr::null_mut();
        // SAFETY: creates a stream in the current context; writes the handle.
        let r = unsafe { cu::cuStreamCreate(&mut raw, cu::CU_STREAM_NON_BLOCKING) };
        check(r, "cuStreamCreate")?;
        Ok(RawStream(raw))
    }

    /// Wait for everything queued so far (`what` names the work in an error).
    pub(super) fn synchronize(&self, what: &'static str) -> Result<(), Error> {
        // SAFETY: waits on our valid stream.
        let r = unsafe { cu::cuStreamSynchronize(self.0) };
        check(r, what)
    }
}

impl Drop for RawStream {
    fn drop(&mut self) {
        // SAFETY: destroys the stream created in `new`, once.
        let _ = unsafe { cu::cuStreamDestroy_v2(self.0) };
    }
}

/// A stream of one device, the page-locked staging buffers its copies use, and the device buffers its
/// pending work uses (held until it waits). See the module documentation for why this makes every
/// method safe.
pub(crate) struct Lane {
    pub(super) gpu: Arc<Gpu>,
    pub(super) stream: RawStream,
    pub(super) busy: bool,
    /// Wait by sleeping on a blocking-sync event instead of spinning in cuStreamSynchronize.
    pub(super) sleepy: bool,
    pub(super) keep: Vec<Arc<DeviceMem>>,
    pub(super) host: Vec<PinnedMem>,
}

impl core::fmt::Debug for Lane {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Lane({:?}, busy: {})", self.gpu, self.busy)
    }
}

impl Lane {
    /// A new lane (a non-blocking stream) on `gpu`.
    pub(crate) fn new(gpu: &Arc<Gpu>) -> Result<Lane, Error> {
        gpu.enter()?;
        let stream = RawStream::new()?;
        Ok(Lane {
            gpu: gpu.clone(),
            stream,
            busy: false,
            sleepy: false,
            keep: Vec::new(),
            host: Vec::new(),
        })
    }

    /// Make [`Lane::wait`] sleep until the work is done instead of spinning a CPU core on it: for lanes
    /// whose host thread has nothing to do meanwhile (batches), where a spinning wait would count as a
    /// busy core.
    pub(crate) fn set_sleepy(&mut self, sleepy: bool) {
        self.sleepy = sleepy;
    }

    /// The lane's device.
    #[cfg(feature = "bench")]
    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Wait for everything queued on this lane; then release the buffers it held.
    pub(crate) fn wait(&mut self) -> Result<(), Error> {
        let mut r = Ok(());
        if self.busy {
            r = self.gpu.enter().and_then(|()| {
                if self.sleepy {
                    // Fence::wait waits on the event (cuEventSynchronize).
                    let f = Fence::new(&self.gpu)?;
                    f.record(self.stream.0)?;
                    f.wait()
                } else {
                    self.stream.synchronize("cuStreamSynchronize")
                }
            });
            self.busy = false;
        }
        // A failed wait reports an error of the work, which has drained (the driver's model): what it
        // used can be released.
        self.keep.clear();
        r
    }

    /// Make staging buffer `i` hold at least `len` bytes (waits first; a replaced buffer is wiped).
    pub(crate) fn reserve_host(&mut self, i: usize, len: usize) -> Result<(), Error> {
        self.wait()?;
        while self.host.len() <= i {
            self.host.push(PinnedMem::empty());
        }
        if self.host[i].len() < len {
            self.gpu.enter()?;
            self.host[i] = PinnedMem::empty();
            self.host[i] = PinnedMem::new(len)?;
        }
        Ok(())
    }

    /// Staging buffer `i` for the host to read and write, once the lane's work is done.
    pub(crate) fn host(&mut self, i: usize) -> Result<&mut [u8], Error> {
        self.wait()?;
        match self.host.get_mut(i) {
            Some(h) => Ok(h.bytes()),
            None => Err(internal(format!(
                "lane staging buffer {i} was never reserved"
            ))),
        }
    }

    pub(super) fn same_device(&self, at: &At<'_>) -> Result<(), Error> {
        if Arc::ptr_eq(at.mem.gpu(), &self.gpu) {
            Ok(())
        } else {
            Err(internal("a buffer of another device".into()))
        }
    }

    /// Enqueue `n` bytes from staging buffer `i` at `host_off` to `dst`.
    pub(crate) fn upload(
        &mut self,
        i: usize,
        host_off: usize,
        dst: At<'_>,
        n: usize,
    ) -> Result<(), Error> {
        let src = self
            .host
            .get(i)
            .and_then(|h| h.slice().get(host_off..host_off.wrapping_add(n)));
        let Some(src) = src.map(<[u8]>::as_ptr) else {
            return Err(internal(format!("upload of {n} bytes from staging {i}")));
        };
        // SAFETY: the source is this lane's own page-locked buffer (the range checked by the slice
        // above), which the host reaches only through `host()`/`reserve_host()`, both of which wait for
        // this stream first; a dropped lane waits, a leaked one never frees it.
        unsafe { self.htod(src, dst, n) }
    }

    /// Enqueue `n` bytes from `src` to staging buffer `i` at `host_off`.
    pub(crate) fn download(
        &mut self,
        src: At<'_>,
        i: usize,
        host_off: usize,
        n: usize,
    ) -> Result<(), Error> {
        let dst = self
            .host
            .get_mut(i)
            .and_then(|h| h.bytes().get_mut(host_off..host_off.wrapping_add(n)));
        let Some(dst) = dst.map(<[u8]>::as_mut_ptr) else {
            return Err(internal(format!("download of {n} bytes to staging {i}")));
        };
        // SAFETY: as in `upload`: the destination is this lane's own page-locked buffer, which the host
        // cannot reach until this stream has been waited for.
        unsafe { self.dtoh(src, dst, n) }
    }

    /// Enqueue a copy of `n` host bytes at `src` to `dst` (checked, and held until the lane waits).
    ///
    /// # Safety
    /// `src` must be valid for reads of `n` bytes and page-locked, and nothing may write those bytes or
    /// free them until this lane has waited.
    pub(super) unsafe fn htod(
        &mut self,
        src: *const u8,
        dst: At<'_>,
        n: usize,
    ) -> Result<(), Error> {
        self.same_device(&dst)?;
        let d = dst.mem.range(dst.off, n, "upload")?;
        if n == 0 {
            return Ok(());
        }
        self.gpu.enter()?;
        dst.mem.order(self.stream.0, true)?;
        self.keep.push(dst.mem.clone());
        self.busy = true;
        // SAFETY: the host side by this function's contract; the device range was checked above and its
        // buffer is held in `keep` until the lane waits.
        let r = unsafe { cu::cuMemcpyHtoDAsync_v2(d, src.cast(), n, self.stream.0) };
        check(r, "cuMemcpyHtoDAsync")
    }

    /// Enqueue a copy of `n` bytes from `src` to host memory at `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `n` bytes and page-locked, and nothing may read, write or free
    /// those bytes until this lane has waited.
    pub(super) unsafe fn dtoh(&mut self, src: At<'_>, dst: *mut u8, n: usize) -> Result<(), Error> {
        self.same_device(&src)?;
        let s = src.mem.range(src.off, n, "download")?;
        if n == 0 {
            return Ok(());
        }
        self.gpu.enter()?;
        src.mem.order(self.stream.0, false)?;
        self.keep.push(src.mem.clone());
        self.busy = true;
        // SAFETY: the host side by this function's contract; the device range was checked above and its
        // buffer is held in `keep` until the lane waits.
        let r = unsafe { cu::cuMemcpyDtoHAsync_v2(dst.cast(), s, n, self.stream.0) };
        check(r, "cuMemcpyDtoHAsync")
    }

    /// Enqueue setting `n` bytes at `dst` to zero.
    pub(crate) fn memset(&mut self, dst: At<'_>, n: usize) -> Result<(), Error> {
        self.same_device(&dst)?;
        let d = dst.mem.range(dst.off, n, "memset")?;
        self.gpu.enter()?;
        dst.mem.order(self.stream.0, true)?;
        self.keep.push(dst.mem.clone());
        self.memset_raw(d, n)
    }

    /// Enqueue a memset of `n` bytes at `addr`, memory of this lane's device that stays allocated until
    /// the lane waits (the caller holds it in `keep`, or is its owner's `Drop`, which waits).
    pub(super) fn memset_raw(&mut self, addr: u64, n: usize) -> Result<(), Error> {
        if n == 0 {
            return Ok(());
        }
        self.gpu.enter()?;
        self.busy = true;
        // SAFETY: sets device memory only (no host memory is touched); the range is inside a live
        // allocation of this device for as long as the work is pending (see the method's contract).
        let r = unsafe { cu::cuMemsetD8Async(addr, 0, n, self.stream.0) };
        check(r, "cuMemsetD8Async")
    }
}

impl Lane {
    /// Record `event` on this lane.
    #[cfg(feature = "bench")]
    pub(crate) fn record(&mut self, event: &Event) -> Result<(), Error> {
        self.gpu.enter()?;
        self.busy = true;
        // SAFETY: both handles are valid: the event is alive for the call, the stream is ours.
        let r = unsafe { cu::cuEventRecord(event.0, self.stream.0) };
        check(r, "cuEventRecord")
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        let _ = self.wait();
        let _ = self.gpu.enter();
        self.host.clear();
    }
}

/// A CUDA event for timing (benchmark only).
#[cfg(feature = "bench")]
#[derive(Debug)]
pub(crate) struct Event(pub(super) cu::CUevent);

// SAFETY: an event handle may be used from any thread; it is destroyed once, in Drop.
#[cfg(feature = "bench")]
unsafe impl Send for Event {}

#[cfg(feature = "bench")]
impl Event {
    /// A timing event on `gpu`.
    pub(crate) fn new(gpu: &Gpu) -> Result<Event, Error> {
        gpu.enter()?;
        let mut raw: cu::CUevent = ptr::null_mut();
        // SAFETY: creates an event in the current context; writes the handle.
        let r = unsafe { cu::cuEventCreate(&mut raw, cu::CU_EVENT_DEFAULT) };
        check(r, "cuEventCreate")?;
        Ok(Event(raw))
    }

    /// Wait for the event, then the milliseconds from `start` to it.
    pub(crate) fn elapsed_ms(&self, start: &Event) -> Result<f32, Error> {
        // SAFETY: waits on our valid event.
        let r = unsafe { cu::cuEventSynchronize(self.0) };
        check(r, "cuEventSynchronize")?;
        let mut ms = 0f32;
        // SAFETY: both events are valid and recorded; writes one float.
        let r = unsafe { cu::cuEventElapsedTime(&mut ms, start.0, self.0) };
        check(r, "cuEventElapsedTime")?;
        Ok(ms)
    }
}

#[cfg(feature = "bench")]
impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: destroys the event created in `new`, once.
        let _ = unsafe { cu::cuEventDestroy_v2(self.0) };
    }
}

/// A CUDA event recorded after queued work: the work is complete when the fence is. Waits on it sleep
/// (blocking-sync event) rather than spin.
pub(crate) struct Fence {
    pub(super) gpu: Arc<Gpu>,
    pub(super) raw: cu::CUevent,
    /// The caller's stream it was recorded on (`UserStream::id`), 0 for gcmx's own streams.
    pub(super) stream: u64,
}

// SAFETY: a CUevent handle may be used from any thread (the driver API is thread-safe); the Fence owns
// it and destroys it once, in Drop.
unsafe impl Send for Fence {}
// SAFETY: as above; every method takes &self and only passes the handle to the driver.
unsafe impl Sync for Fence {}

impl core::fmt::Debug for Fence {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Fence({:?})", self.gpu)
    }
}

impl Fence {
    /// A new, unrecorded fence (an unrecorded event counts as complete).
    pub(crate) fn new(gpu: &Arc<Gpu>) -> Result<Arc<Fence>, Error> {
        gpu.enter()?;
        let mut raw: cu::CUevent = ptr::null_mut();
        let flags = cu::CU_EVENT_DISABLE_TIMING | cu::CU_EVENT_BLOCKING_SYNC;
        // SAFETY: creates an event in the current (this device's primary) context; writes the handle.
        let r = unsafe { cu::cuEventCreate(&mut raw, flags) };
        check(r, "cuEventCreate")?;
        Ok(Arc::new(Fence {
            gpu: gpu.clone(),
            raw,
            stream: 0,
        }))
    }

    /// Record the fence after the work queued so far on `stream` (a stream of the same device).
    pub(super) fn record(&self, stream: cu::CUstream) -> Result<(), Error> {
        self.gpu.enter()?;
        // SAFETY: both handles are valid: the event is ours, the stream is alive for the call.
        let r = unsafe { cu::cuEventRecord(self.raw, stream) };
        check(r, "cuEventRecord")
    }

    /// Make work queued later on `stream` wait until the fenced work is complete.
    pub(super) fn make_wait(&self, stream: cu::CUstream) -> Result<(), Error> {
        // SAFETY: both handles are valid; the driver takes a reference to the event's current record.
        let r = unsafe { cu::cuStreamWaitEvent(stream, self.raw, 0) };
        check(r, "cuStreamWaitEvent")
    }

    /// Whether the fenced work is complete (an error of that work is returned here).
    pub(crate) fn done(&self) -> Result<bool, Error> {
        self.gpu.enter()?;
        // SAFETY: queries our event.
        let r = unsafe { cu::cuEventQuery(self.raw) };
        // A query reports the errors of the work before it, as a synchronisation does.
        match r {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            e => check(e, "cuEventQuery").map(|()| false),
        }
    }

    /// Wait (sleeping) until the fenced work is complete.
    pub(crate) fn wait(&self) -> Result<(), Error> {
        self.gpu.enter()?;
        // SAFETY: waits on our event.
        let r = unsafe { cu::cuEventSynchronize(self.raw) };
        check(r, "cuEventSynchronize")
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        if self.gpu.enter().is_ok() {
            // SAFETY: destroys our event once; the driver defers the release if work still references it.
            let r = unsafe { cu::cuEventDestroy_v2(self.raw) };
            let _ = r;
        }
    }
}

/// A caller's stream: created by gcmx ([`Stream::new`], destroyed with it) or borrowed from
/// another library ([`Stream::from_raw`]).
pub(crate) struct UserStream {
    pub(super) gpu: Arc<Gpu>,
    pub(super) raw: cu::CUstream,
    pub(super) owned: bool,
    /// Unique for the process (handles can be reused once a stream is destroyed).
    pub(super) id: u64,
}

/// The next `UserStream::id`.
pub(super) static STREAM_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub(super) fn stream_id() -> u64 {
    STREAM_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

// SAFETY: a CUstream handle may be used from any thread; an owned one is destroyed once, in Drop.
unsafe impl Send for UserStream {}
// SAFETY: as above; work is queued through the handle by the driver, which serialises it.
unsafe impl Sync for UserStream {}

impl Drop for UserStream {
    fn drop(&mut self) {
        if self.owned && self.gpu.enter().is_ok() {
            // SAFETY: destroys the stream this value created, once. Work still queued on it completes
            // first (the driver defers the release), and everything that work uses is kept alive by
            // fences (DeviceMem::order / settle), not by the stream.
            let r = unsafe { cu::cuStreamDestroy_v2(self.raw) };
            let _ = r;
        }
    }
}

impl Stream {
    /// A new stream on device `ordinal` (0 is the default device), non-blocking with respect to the
    /// legacy default stream.
    ///
    /// `Error::BackendUnavailable` without a usable device, `Error::InvalidInput` for an ordinal past
    /// the last device.
    pub fn new(ordinal: u32) -> Result<Stream, Error> {
        Stream::on(Gpu::get(ordinal)?)
    }

    /// A new stream of `gpu` (a keyring's own stream).
    pub(crate) fn on(gpu: Arc<Gpu>) -> Result<Stream, Error> {
        gpu.enter()?;
        let mut raw: cu::CUstream = ptr::null_mut();
        // SAFETY: creates a stream in the current context (this device's primary one); writes the handle.
        let r = unsafe { cu::cuStreamCreate(&mut raw, cu::CU_STREAM_NON_BLOCKING) };
        check(r, "cuStreamCreate")?;
        Ok(Stream {
            inner: UserStream {
                gpu,
                raw,
                owned: true,
                id: stream_id(),
            },
        })
    }

    /// A stream of another library (a `cudaStream_t` / `CUstream`, e.g. cudarc's `CudaStream::cu_stream`
    /// or `torch.cuda.current_stream().cuda_stream`), borrowed: gcmx queues work on it and never
    /// destroys it. A null handle is the default stream of the device's primary context.
    ///
    /// # Safety
    ///
    /// `raw` is a stream of the primary context of device `ordinal` (what the CUDA runtime and the
    /// libraries above it use), or null, and stays valid (not destroyed) for as long as the returned
    /// `Stream` lives and until the work gcmx queued on it has completed.
    pub unsafe fn from_raw(ordinal: u32, raw: *mut c_void) -> Result<Stream, Error> {
        let gpu = Gpu::get(ordinal)?;
        Ok(Stream {
            inner: UserStream {
                gpu,
                raw: raw.cast(),
                owned: false,
                id: stream_id(),
            },
        })
    }

    /// The raw handle, for other CUDA libraries (valid while this `Stream` lives).
    pub fn as_raw(&self) -> *mut c_void {
        self.inner.raw.cast()
    }

    /// Wait until all work queued on the stream has completed.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.inner.gpu.enter()?;
        // SAFETY: waits on a valid stream (ours, or borrowed under from_raw's contract).
        let r = unsafe { cu::cuStreamSynchronize(self.inner.raw) };
        check(r, "cuStreamSynchronize")
    }

    /// The device ordinal.
    pub(crate) fn device(&self) -> u32 {
        self.inner.gpu.info().ordinal
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.inner.gpu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_copies_in_order_through_its_staging() {
        let Some(g) = test_gpu() else { return };
        let m = DeviceMem::zeroed(&g, 4096).unwrap();
        let mut lane = Lane::new(&g).unwrap();
        lane.reserve_host(0, 4096).unwrap();
        lane.reserve_host(1, 4096).unwrap();
        lane.host(0).unwrap()[..1000].fill(0x5A);
        lane.upload(0, 0, At { mem: &m, off: 96 }, 1000).unwrap();
        lane.memset(At { mem: &m, off: 96 }, 10).unwrap();
        lane.download(At::start(&m), 1, 0, 4096).unwrap();
        let h = lane.host(1).unwrap();
        assert!(h[..106].iter().all(|&b| b == 0));
        assert!(h[106..1096].iter().all(|&b| b == 0x5A));
        assert!(h[1096..].iter().all(|&b| b == 0));
        assert!(
            lane.upload(0, 0, At { mem: &m, off: 4000 }, 1000).is_err(),
            "past the buffer"
        );
        assert!(
            lane.upload(7, 0, At::start(&m), 1).is_err(),
            "no such staging"
        );
        lane.wait().unwrap();
    }

    #[test]
    fn fences_report_completion() {
        let Some(g) = test_gpu() else { return };
        let f = Fence::new(&g).unwrap();
        assert!(f.done().unwrap(), "an unrecorded fence is complete");
        let lane = Lane::new(&g).unwrap();
        f.record(lane.stream.0).unwrap();
        f.wait().unwrap();
        assert!(f.done().unwrap());
    }

    #[test]
    fn callers_streams_are_made_and_synchronised() {
        let Some(g) = test_gpu() else { return };
        let s = Stream::new(g.info().ordinal).unwrap();
        assert_eq!(s.device(), g.info().ordinal);
        assert!(!s.as_raw().is_null());
        s.synchronize().unwrap();
        let n = Gpu::count().unwrap();
        assert!(matches!(Stream::new(n), Err(Error::InvalidInput(_))));
    }
}
