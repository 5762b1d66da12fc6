//! The runtime over the CUDA driver (feature `cuda`), through the driver API that `sys` loads on first
//! use. Every `unsafe` block of the crate is in this file or `sys`, one unsafe operation per block, each
//! with the reason it is sound. See the parent module for the rules the types here enforce.

use std::any::Any;
use std::borrow::Cow;
use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};

use gcmx_core::{DeviceError, Error};
use zeroize::Zeroize;

use super::fault::{self, Op};
use super::sys::{self as cu, CUresult};
use super::{
    At, DB_ALIGN, DbArgs, DeviceInfo, GhashVariant, Launch, RawDeviceSpan, Region, Stream, internal,
};
use crate::abi;

/// The kernels this build embeds (chosen by build.rs: the fatbin shipped in `kernels/`, or one it built
/// from `cuda/` when asked to).
mod kernels {
    /// `include_bytes!` at the alignment the fatbin's headers assume.
    #[repr(C, align(16))]
    struct Aligned<T: ?Sized>(T);
    static IMAGE: &Aligned<[u8]> = &Aligned(*include_bytes!(env!("GCMX_FATBIN")));
    /// The fatbin (SASS sm_80..sm_120 + PTX compute_120).
    pub(super) static FATBIN: &[u8] = &IMAGE.0;
    /// Release of the nvcc that built it.
    pub(super) const NVCC_VERSION: &str = env!("GCMX_NVCC_VERSION");
    /// Whether it was built with the `clmad` GHASH (its build record says so; the kernels confirm).
    pub(super) const HAVE_CLMAD: bool = cfg!(gcmx_have_clmad);
}

/// Idle lanes kept per device for synchronous helper work (copies, wipes, one-off launches).
const POOL_MAX: usize = 16;
/// Parameter slots kept per device: as many as asynchronous calls may have in flight before one is
/// freed (freeing a slot whose work is queued waits for it).
const SLOT_POOL_MAX: usize = 4096;
/// Device-batch scratches per device: up to this many launches run at once on different scratches;
/// beyond it, a launch reuses a busy one and is ordered after its work.
const SCRATCH_POOL_MAX: usize = 64;
/// Page-locked bytes a synchronous copy moves per step.
const COPY_STEP: usize = 8 << 20;

/// A CUDA driver result that is not success, as the source of a [`DeviceError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DriverError(CUresult);

impl core::fmt::Display for DriverError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?} ({})", self.0, self.0.0)
    }
}

impl std::error::Error for DriverError {}

/// `Ok` for `CUDA_SUCCESS`, else `Error::Device` doing `what`, caused by the driver's code.
fn check(r: CUresult, what: impl Into<Cow<'static, str>>) -> Result<(), Error> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Device(DeviceError::with_source(
            what,
            DriverError(r),
        )))
    }
}

/// `e` followed by its sources, for a message that cannot hold a source (`Error::BackendUnavailable`):
/// the driver's error is the useful part of a failed start.
fn with_sources(e: &Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// Lock a mutex whose data stays consistent across a panic (lists and pools).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// ------------------------------------------------------------------------------------------------------
// Devices
// ------------------------------------------------------------------------------------------------------

/// A started device: its primary context, the gcmx kernels loaded there, and what was learned at load
/// time. Started devices stay for the life of the process; a failed start is not remembered, so a later
/// [`Gpu::get`] tries again.
pub(crate) struct Gpu {
    info: DeviceInfo,
    /// Per-device state of the layers above (their buffer pools), by type.
    states: Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
    /// Idle lanes for synchronous helper work.
    pool: Mutex<Vec<Lane>>,
    /// Idle page-locked parameter slots of asynchronous calls.
    slots: Mutex<Vec<ParamSlot>>,
    /// Idle device-batch scratch buffers.
    scratches: Mutex<Vec<Scratch>>,
    /// Thread blocks of each cooperative kernel resident at once on the whole device.
    resident: Mutex<Vec<(&'static str, u32)>>,
    // Field order is drop order: the module unloads before the context is released.
    module: Module,
    ctx: PrimaryContext,
}

impl core::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Gpu({})", self.info.ordinal)
    }
}

static GPUS: Mutex<Vec<Arc<Gpu>>> = Mutex::new(Vec::new());

impl Gpu {
    /// Device `ordinal`, started on first use. `Error::BackendUnavailable` when there is no driver or
    /// device or the kernels do not load; `Error::InvalidInput` for an ordinal past the last device.
    pub(crate) fn get(ordinal: u32) -> Result<Arc<Gpu>, Error> {
        let mut started = lock(&GPUS);
        if let Some(g) = started.iter().find(|g| g.info.ordinal == ordinal) {
            g.enter()?;
            return Ok(g.clone());
        }
        let g = Arc::new(Gpu::start(ordinal)?);
        started.push(g.clone());
        Ok(g)
    }

    fn start(ordinal: u32) -> Result<Gpu, Error> {
        let unavailable = |why: String| Error::BackendUnavailable(why);
        let n = Gpu::count()?;
        if n == 0 {
            return Err(unavailable("no CUDA device found".into()));
        }
        if ordinal >= n {
            return Err(Error::InvalidInput(format!(
                "CUDA device {ordinal} does not exist ({n} device(s))"
            )));
        }
        let mut dev: cu::CUdevice = 0;
        // SAFETY: the driver is initialised (`count`); writes one device handle.
        let r = unsafe { cu::cuDeviceGet(&mut dev, ordinal as i32) };
        check(r, format!("cuDeviceGet({ordinal})")).map_err(|e| unavailable(with_sources(&e)))?;
        fault::hit(Op::ContextCreate).map_err(|e| {
            unavailable(format!(
                "primary context of device {ordinal}: {}",
                with_sources(&e)
            ))
        })?;
        let ctx = PrimaryContext::retain(dev).map_err(|e| {
            unavailable(format!(
                "primary context of device {ordinal}: {}",
                with_sources(&e)
            ))
        })?;
        ctx.enter().map_err(|e| unavailable(with_sources(&e)))?;
        let attr = |a: i32, what: &str| {
            let mut v = 0;
            // SAFETY: reads one attribute of a valid device handle into one int.
            let r = unsafe { cu::cuDeviceGetAttribute(&mut v, a, dev) };
            check(r, "cuDeviceGetAttribute")
                .map_err(|e| unavailable(format!("device attribute {what}: {}", with_sources(&e))))
                .map(|()| u32::try_from(v).unwrap_or(0))
        };
        let major = attr(
            cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            "compute capability",
        )?;
        let minor = attr(
            cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            "compute capability",
        )?;
        let sms = attr(
            cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "multiprocessors",
        )?;
        let mut raw_name = [0u8; 256];
        // SAFETY: writes at most `len` bytes, NUL-terminated, into the buffer.
        let r = unsafe { cu::cuDeviceGetName(raw_name.as_mut_ptr().cast(), 256, dev) };
        check(r, "cuDeviceGetName").map_err(|e| unavailable(with_sources(&e)))?;
        let name = std::ffi::CStr::from_bytes_until_nul(&raw_name)
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut total_memory = 0usize;
        // SAFETY: writes one size_t.
        let r = unsafe { cu::cuDeviceTotalMem_v2(&mut total_memory, dev) };
        check(r, "cuDeviceTotalMem").map_err(|e| unavailable(with_sources(&e)))?;
        let mut version = 0;
        // SAFETY: writes one int.
        let r = unsafe { cu::cuDriverGetVersion(&mut version) };
        check(r, "cuDriverGetVersion").map_err(|e| unavailable(with_sources(&e)))?;
        fault::hit(Op::ModuleLoad)
            .map_err(|e| unavailable(format!("loading the kernels: {}", with_sources(&e))))?;
        let module = Module::load(kernels::FATBIN).map_err(|e| {
            unavailable(format!(
                "the gcmx kernels do not load on {name} (sm_{major}{minor}): {} (the fatbin holds sm_80..sm_120 and PTX 12.0)",
                with_sources(&e)
            ))
        })?;
        let words = abi_words(&module)
            .map_err(|e| unavailable(format!("ABI check: {}", with_sources(&e))))?;
        let expect = [
            abi::ABI_VERSION,
            words[1],
            abi::GHASH_THREADS,
            abi::GHASH_SPAN as u32,
            abi::FUSED_THREADS,
            abi::FUSED_SPAN as u32,
            abi::DB_UNIT_BLOCKS as u32,
            core::mem::size_of::<abi::GcmxGcmParams>() as u32,
        ];
        if words != expect {
            return Err(unavailable(format!(
                "kernel ABI mismatch: the kernels report {words:?}, this crate expects {expect:?}"
            )));
        }
        if kernels::HAVE_CLMAD != (words[1] == 1) {
            return Err(unavailable(format!(
                "the kernels report have_clmad = {} but their build record says {}",
                words[1],
                kernels::HAVE_CLMAD
            )));
        }
        Ok(Gpu {
            info: DeviceInfo {
                ordinal,
                name,
                compute_capability: (major, minor),
                arch: format!("sm_{major}{minor}"),
                multiprocessors: sms,
                total_memory,
                driver_version: (
                    u32::try_from(version / 1000).unwrap_or(0),
                    u32::try_from(version % 1000 / 10).unwrap_or(0),
                ),
                ghash_variant: if words[1] == 1 {
                    GhashVariant::Clmad
                } else {
                    GhashVariant::Soft
                },
                nvcc_version: kernels::NVCC_VERSION,
                abi_version: words[0],
            },
            states: Mutex::new(Vec::new()),
            pool: Mutex::new(Vec::new()),
            slots: Mutex::new(Vec::new()),
            scratches: Mutex::new(Vec::new()),
            resident: Mutex::new(Vec::new()),
            module,
            ctx,
        })
    }

    /// What was learned at load time.
    pub(crate) fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Devices the driver reports (`Error::BackendUnavailable` without a driver).
    pub(crate) fn count() -> Result<u32, Error> {
        cu::load().map_err(Error::BackendUnavailable)?;
        // SAFETY: initialises the loaded driver; no pointers.
        let r = unsafe { cu::cuInit(0) };
        check(r, "cuInit").map_err(|e| {
            Error::BackendUnavailable(format!("no CUDA driver or device: {}", with_sources(&e)))
        })?;
        let mut n = 0;
        // SAFETY: writes one int.
        let r = unsafe { cu::cuDeviceGetCount(&mut n) };
        check(r, "cuDeviceGetCount").map_err(|e| {
            Error::BackendUnavailable(format!("no CUDA device: {}", with_sources(&e)))
        })?;
        Ok(u32::try_from(n).unwrap_or(0))
    }

    /// A parameter slot of at least `len` bytes whose last use has completed (or a new one).
    pub(crate) fn take_slot(self: &Arc<Self>, len: usize) -> Result<ParamSlot, Error> {
        {
            let mut idle = lock(&self.slots);
            if let Some(i) = idle.iter().position(|s| s.len >= len && s.ready()) {
                return Ok(idle.swap_remove(i));
            }
        }
        ParamSlot::new(self, len.max(SLOT_MIN))
    }

    /// Return a slot to the pool (its fence, if any, says when it is free again).
    pub(crate) fn give_slot(&self, slot: ParamSlot) {
        let mut idle = lock(&self.slots);
        if idle.len() < SLOT_POOL_MAX {
            idle.push(slot);
        }
    }

    /// A device-batch scratch of at least `len` bytes (zeroed when new), for this caller alone until
    /// [`Gpu::give_scratch`]. Work queued on it later is ordered after earlier work by its fences.
    pub(crate) fn take_scratch(self: &Arc<Self>, len: usize) -> Result<Scratch, Error> {
        {
            let mut idle = lock(&self.scratches);
            let fits = |s: &Scratch| s.mem.len() >= len;
            // One whose queued work is done, so that launches on different streams run at once; else,
            // once there are enough, the smallest that fits (its work is ordered before ours).
            if let Some(i) = idle.iter().position(|s| fits(s) && s.mem.is_idle()) {
                return Ok(idle.swap_remove(i));
            }
            if idle.len() >= SCRATCH_POOL_MAX {
                let best = idle
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| fits(s))
                    .min_by_key(|(_, s)| s.mem.len())
                    .map(|(i, _)| i);
                if let Some(i) = best {
                    return Ok(idle.swap_remove(i));
                }
            }
        }
        Ok(Scratch {
            mem: DeviceMem::zeroed(self, len.max(SCRATCH_MIN))?,
            bar: 0,
        })
    }

    /// Return a scratch to the pool.
    pub(crate) fn give_scratch(&self, s: Scratch) {
        let mut idle = lock(&self.scratches);
        if idle.len() < 2 * SCRATCH_POOL_MAX {
            idle.push(s);
        }
    }

    /// Thread blocks of cooperative kernel `name` (blocks of `block` threads) that are resident at once.
    pub(crate) fn resident_blocks(&self, name: &'static str, block: u32) -> Result<u32, Error> {
        if let Some(&(_, n)) = lock(&self.resident).iter().find(|(k, _)| *k == name) {
            return Ok(n);
        }
        self.enter()?;
        let f = self.function(name)?;
        let mut per_sm: i32 = 0;
        fault::hit(Op::Launch)?;
        // SAFETY: queries the occupancy of a loaded kernel; writes one int.
        let r = unsafe {
            cu::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut per_sm, f, block as i32, 0)
        };
        check(r, "cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
        let n = u32::try_from(per_sm).unwrap_or(0) * self.info.multiprocessors;
        if n == 0 {
            return Err(internal(format!("{name}: no thread block fits on an SM")));
        }
        lock(&self.resident).push((name, n));
        Ok(n)
    }

    /// Make this device's context current on the calling thread.
    fn enter(&self) -> Result<(), Error> {
        self.ctx.enter()
    }

    /// The per-device value of type `T` (created on first use), shared by every caller on this device.
    pub(crate) fn state<T: Default + Send + 'static>(&self) -> Arc<Mutex<T>> {
        let mut states = lock(&self.states);
        for s in states.iter() {
            if let Ok(m) = s.clone().downcast::<Mutex<T>>() {
                return m;
            }
        }
        let m = Arc::new(Mutex::new(T::default()));
        states.push(m.clone());
        m
    }

    /// Run `f` on an idle lane of this device and wait for its work before returning.
    pub(crate) fn with_lane<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Lane) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let idle = lock(&self.pool).pop();
        let mut lane = match idle {
            Some(l) => l,
            None => Lane::new(self)?,
        };
        let r = f(&mut lane);
        let waited = lane.wait();
        // A lane whose work failed is not reused: dropping it waits and wipes its staging, which the
        // failed work may have left holding data.
        if r.is_ok() && waited.is_ok() {
            let mut pool = lock(&self.pool);
            if pool.len() < POOL_MAX {
                pool.push(lane);
            }
        }
        let r = r?;
        waited?;
        Ok(r)
    }

    /// Kernel `name` of the loaded module (the context must be current).
    fn function(&self, name: &str) -> Result<cu::CUfunction, Error> {
        self.module.function(name)
    }
}

/// Drop what the layers above cache on every started device (their states, the idle parameter slots
/// and scratches, the occupancy answers) and its idle lanes, so that tests can count live allocations
/// and driver calls with none of it held (feature `fault-injection`).
#[cfg(feature = "fault-injection")]
pub(super) fn release_cached() {
    let gpus: Vec<Arc<Gpu>> = lock(&GPUS).clone();
    for g in gpus {
        drop(std::mem::take(&mut *lock(&g.states)));
        drop(std::mem::take(&mut *lock(&g.slots)));
        drop(std::mem::take(&mut *lock(&g.scratches)));
        lock(&g.resident).clear();
        // Freeing the states' buffers borrows idle lanes to wipe them, which may put lanes back.
        loop {
            let idle = std::mem::take(&mut *lock(&g.pool));
            if idle.is_empty() {
                break;
            }
            drop(idle);
        }
    }
}

/// Launch `gcmx_abi_info` once and read its words (start-up, before the device is shared).
fn abi_words(module: &Module) -> Result<[u32; abi::ABI_INFO_WORDS], Error> {
    const LEN: usize = abi::ABI_INFO_WORDS * 4;
    fault::hit(Op::DeviceAlloc)?;
    let mut addr: cu::CUdeviceptr = 0;
    // SAFETY: allocates LEN bytes in the current context; writes the address.
    let r = unsafe { cu::cuMemAlloc_v2(&mut addr, LEN) };
    check(r, "cuMemAlloc")?;
    /// Frees the probe's buffer on every path (it holds no secret).
    struct Probe(cu::CUdeviceptr);
    impl Drop for Probe {
        fn drop(&mut self) {
            // SAFETY: frees the allocation above once; the stream that used it has been synchronised
            // or destroyed (declared after this guard, so dropped first, and stream destruction waits).
            let _ = unsafe { cu::cuMemFree_v2(self.0) };
        }
    }
    let probe = Probe(addr);
    fault::hit(Op::StreamCreate)?;
    let stream = RawStream::new()?;
    let f = module.function("gcmx_abi_info")?;
    let mut arg = probe.0;
    let mut args = [(&mut arg as *mut u64).cast::<c_void>()];
    fault::hit(Op::Launch)?;
    // SAFETY: gcmx_abi_info(uint64_t out) takes one device address and writes ABI_INFO_WORDS u32 there;
    // the buffer holds that many and outlives the synchronisation below; the driver copies the argument.
    let r = unsafe {
        cu::cuLaunchKernel(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            stream.0,
            args.as_mut_ptr(),
            ptr::null_mut(),
        )
    };
    check(r, "launch gcmx_abi_info")?;
    let synced = stream.synchronize("gcmx_abi_info");
    fault::hit(Op::Synchronize).and(synced)?;
    fault::hit(Op::CopyToHost)?;
    let mut words = [0u32; abi::ABI_INFO_WORDS];
    // SAFETY: copies LEN bytes from the probe buffer into `words` (LEN bytes), which stays borrowed
    // until the synchronisation right after.
    let r = unsafe { cu::cuMemcpyDtoHAsync_v2(words.as_mut_ptr().cast(), probe.0, LEN, stream.0) };
    check(r, "cuMemcpyDtoH")?;
    stream.synchronize("cuMemcpyDtoH")?;
    Ok(words)
}

/// A device's primary context, retained for as long as this value lives.
struct PrimaryContext {
    dev: cu::CUdevice,
    raw: cu::CUcontext,
}

// SAFETY: a context handle may be made current on any thread (the driver API is thread-safe); the
// value releases its retain once, in Drop.
unsafe impl Send for PrimaryContext {}
// SAFETY: as above; `enter` only passes the handle to the driver.
unsafe impl Sync for PrimaryContext {}

impl PrimaryContext {
    fn retain(dev: cu::CUdevice) -> Result<PrimaryContext, Error> {
        let mut raw: cu::CUcontext = ptr::null_mut();
        // SAFETY: retains the primary context of a valid device handle; writes the handle.
        let r = unsafe { cu::cuDevicePrimaryCtxRetain(&mut raw, dev) };
        check(r, "cuDevicePrimaryCtxRetain")?;
        Ok(PrimaryContext { dev, raw })
    }

    /// Make the context current on the calling thread.
    fn enter(&self) -> Result<(), Error> {
        // SAFETY: the handle is retained for as long as `self` lives.
        let r = unsafe { cu::cuCtxSetCurrent(self.raw) };
        check(r, "cuCtxSetCurrent")
    }
}

impl Drop for PrimaryContext {
    fn drop(&mut self) {
        // SAFETY: releases the one retain taken in `retain`.
        let _ = unsafe { cu::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

/// The gcmx kernels loaded into a context (unloaded on drop, while that context is still retained).
struct Module(cu::CUmodule);

// SAFETY: a module handle may be used from any thread; it is unloaded once, in Drop.
unsafe impl Send for Module {}
// SAFETY: as above; lookups only pass the handle to the driver.
unsafe impl Sync for Module {}

impl Module {
    /// Load a fatbin into the current context.
    fn load(image: &'static [u8]) -> Result<Module, Error> {
        let mut raw: cu::CUmodule = ptr::null_mut();
        // SAFETY: `image` is a complete fatbin (built by nvcc, checked against its build record by
        // build.rs), static, and only read by the call; writes the module handle.
        let r = unsafe { cu::cuModuleLoadData(&mut raw, image.as_ptr().cast()) };
        check(r, "cuModuleLoadData")?;
        Ok(Module(raw))
    }

    /// Kernel `name` (valid while the module is loaded, which is for the life of its `Gpu`).
    fn function(&self, name: &str) -> Result<cu::CUfunction, Error> {
        let c =
            std::ffi::CString::new(name).map_err(|_| internal(format!("kernel name {name:?}")))?;
        let mut f: cu::CUfunction = ptr::null_mut();
        // SAFETY: looks up a NUL-terminated name in a loaded module; writes one handle.
        let r = unsafe { cu::cuModuleGetFunction(&mut f, self.0, c.as_ptr()) };
        check(r, format!("kernel {name}"))?;
        Ok(f)
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: unloads the module loaded in `load`, once; `Gpu` drops it before its context.
        let _ = unsafe { cu::cuModuleUnload(self.0) };
    }
}

/// A non-blocking stream of the current context, destroyed on drop (the driver lets queued work finish).
struct RawStream(cu::CUstream);

// SAFETY: a stream handle may be used from any thread; the driver serialises work queued through it.
unsafe impl Send for RawStream {}

impl RawStream {
    fn new() -> Result<RawStream, Error> {
        let mut raw: cu::CUstream = ptr::null_mut();
        // SAFETY: creates a stream in the current context; writes the handle.
        let r = unsafe { cu::cuStreamCreate(&mut raw, cu::CU_STREAM_NON_BLOCKING) };
        check(r, "cuStreamCreate")?;
        Ok(RawStream(raw))
    }

    /// Wait for everything queued so far (`what` names the work in an error).
    fn synchronize(&self, what: &'static str) -> Result<(), Error> {
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

// ------------------------------------------------------------------------------------------------------
// Memory
// ------------------------------------------------------------------------------------------------------

/// Device memory of one device, 256-byte aligned, wiped (set to zero) before it is freed.
///
/// Shared as `Arc<DeviceMem>`: a lane that queues work on it holds a clone until it has waited, so the
/// last clone is dropped only when no work on it is pending, and the wipe then orders after all of it.
pub(crate) struct DeviceMem {
    gpu: Arc<Gpu>,
    /// Device address (0 when `len == 0`).
    addr: u64,
    len: usize,
    /// Work queued on callers' streams that uses this memory (see [`DeviceMem::order`]).
    uses: Mutex<Uses>,
}

/// The fences of the queued work that last wrote a buffer and that read it since.
#[derive(Default)]
struct Uses {
    write: Option<Arc<Fence>>,
    reads: Vec<Arc<Fence>>,
}

/// Reads kept before completed ones are looked for.
const READS_PRUNE: usize = 16;

impl Uses {
    /// Forget fences whose work has completed.
    fn prune(&mut self) {
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
            fault::hit(Op::DeviceAlloc)?;
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
    fn order(&self, stream: cu::CUstream, write: bool) -> Result<(), Error> {
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
    fn note(&self, f: &Arc<Fence>, write: bool) {
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
    fn is_idle(&self) -> bool {
        let mut u = lock(&self.uses);
        u.prune();
        u.write.is_none() && u.reads.is_empty()
    }

    /// Wait on the host for all queued work that uses this memory.
    fn settle(&self) -> Result<(), Error> {
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

    fn range(&self, off: usize, n: usize, what: &str) -> Result<u64, Error> {
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
fn memset_now(addr: u64, len: usize) -> Result<(), Error> {
    fault::hit(Op::Memset)?;
    // SAFETY: sets device memory only, inside an allocation of this context that no pending work uses
    // (see the caller); the call returns when the memset is done.
    let r = unsafe { cu::cuMemsetD8_v2(addr, 0, len) };
    check(r, "cuMemsetD8")
}

/// Page-locked host memory owned by a lane: zeroed when allocated and before it is freed.
struct PinnedMem {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the memory is owned by this value alone (a plain allocation, reached only through &self /
// &mut self) and freed once, in Drop.
unsafe impl Send for PinnedMem {}
// SAFETY: shared access only reads (`slice`).
unsafe impl Sync for PinnedMem {}

impl PinnedMem {
    fn empty() -> PinnedMem {
        PinnedMem {
            ptr: ptr::null_mut(),
            len: 0,
        }
    }

    fn new(len: usize) -> Result<PinnedMem, Error> {
        if len == 0 {
            return Ok(PinnedMem::empty());
        }
        fault::hit(Op::HostAlloc)?;
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: allocates `len` bytes of page-locked host memory in the current context; writes the
        // pointer.
        let r = unsafe { cu::cuMemAllocHost_v2(&mut p, len) };
        check(r, format!("cuMemAllocHost({len} bytes)"))?;
        let mut m = PinnedMem { ptr: p.cast(), len };
        m.bytes().fill(0);
        Ok(m)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr` is a live allocation of `len` bytes owned by `self`, initialised in `new`, and
        // no `&mut` to it exists while `&self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn bytes(&mut self) -> &mut [u8] {
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

// ------------------------------------------------------------------------------------------------------
// Lanes
// ------------------------------------------------------------------------------------------------------

/// A stream of one device, the page-locked staging buffers its copies use, and the device buffers its
/// pending work uses (held until it waits). See the module documentation for why this makes every
/// method safe.
pub(crate) struct Lane {
    gpu: Arc<Gpu>,
    stream: RawStream,
    busy: bool,
    /// Wait by sleeping on a blocking-sync event instead of spinning in cuStreamSynchronize.
    sleepy: bool,
    keep: Vec<Arc<DeviceMem>>,
    host: Vec<PinnedMem>,
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
        fault::hit(Op::StreamCreate)?;
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
                    // Fence::wait reports the Synchronize hook.
                    let f = Fence::new(&self.gpu)?;
                    f.record(self.stream.0)?;
                    f.wait()
                } else {
                    let synced = self.stream.synchronize("cuStreamSynchronize");
                    fault::hit(Op::Synchronize).and(synced)
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

    fn same_device(&self, at: &At<'_>) -> Result<(), Error> {
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
    unsafe fn htod(&mut self, src: *const u8, dst: At<'_>, n: usize) -> Result<(), Error> {
        self.same_device(&dst)?;
        let d = dst.mem.range(dst.off, n, "upload")?;
        if n == 0 {
            return Ok(());
        }
        self.gpu.enter()?;
        dst.mem.order(self.stream.0, true)?;
        self.keep.push(dst.mem.clone());
        self.busy = true;
        fault::hit(Op::CopyToDevice)?;
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
    unsafe fn dtoh(&mut self, src: At<'_>, dst: *mut u8, n: usize) -> Result<(), Error> {
        self.same_device(&src)?;
        let s = src.mem.range(src.off, n, "download")?;
        if n == 0 {
            return Ok(());
        }
        self.gpu.enter()?;
        src.mem.order(self.stream.0, false)?;
        self.keep.push(src.mem.clone());
        self.busy = true;
        fault::hit(Op::CopyToHost)?;
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
    fn memset_raw(&mut self, addr: u64, n: usize) -> Result<(), Error> {
        if n == 0 {
            return Ok(());
        }
        self.gpu.enter()?;
        fault::hit(Op::Memset)?;
        self.busy = true;
        // SAFETY: sets device memory only (no host memory is touched); the range is inside a live
        // allocation of this device for as long as the work is pending (see the method's contract).
        let r = unsafe { cu::cuMemsetD8Async(addr, 0, n, self.stream.0) };
        check(r, "cuMemsetD8Async")
    }

    /// Enqueue a kernel launch. Every buffer range is checked first ([`Launch::check`]) and every
    /// buffer is held until the lane waits.
    pub(crate) fn launch(&mut self, l: Launch<'_>) -> Result<(), Error> {
        let (name, grid, block) = l.check()?;
        let a = |at: At<'_>| at.mem.addr + at.off as u64;
        match l {
            Launch::Fused {
                data,
                len,
                key,
                nr,
                powers,
                ctr,
                partials,
                ..
            } => {
                let p = abi::GcmxGcmParams {
                    input: a(data),
                    output: a(data),
                    nbytes: len as u64,
                    powers: a(powers),
                    partials: a(partials),
                    key: a(key),
                    ctr: a(ctr),
                    nr,
                    _pad0: 0,
                };
                self.hold(&[data, key, powers, ctr, partials])?;
                self.launch_struct(name, grid, block, &p)
            }
            Launch::ExpandKeys { raw, out, nkeys } => {
                let p = abi::GcmxExpandParams {
                    raw: a(raw),
                    out: a(out),
                    nkeys,
                    _pad0: 0,
                };
                self.hold(&[raw, out])?;
                self.launch_struct(name, grid, block, &p)
            }
            Launch::KeyPowers {
                keys,
                key_powers,
                nkeys,
            } => {
                let p = abi::GcmxKeyPowersParams {
                    keys: a(keys),
                    key_powers: a(key_powers),
                    nkeys,
                    _pad0: 0,
                };
                self.hold(&[keys, key_powers])?;
                self.launch_struct(name, grid, block, &p)
            }
            #[cfg(feature = "bench")]
            Launch::Ghash {
                data,
                len,
                powers,
                partials,
                ..
            } => {
                let p = abi::GcmxGhashParams {
                    data: a(data),
                    nbytes: len as u64,
                    powers: a(powers),
                    partials: a(partials),
                };
                self.hold(&[data, powers, partials])?;
                self.launch_struct(name, grid, block, &p)
            }
            #[cfg(feature = "bench")]
            Launch::BwRead { input, len, out } | Launch::BwCopy { input, len, out } => {
                let p = abi::GcmxBwParams {
                    input: a(input),
                    output: a(out),
                    nbytes: len as u64,
                };
                self.hold(&[input, out])?;
                self.launch_struct(name, grid, block, &p)
            }
            #[cfg(feature = "bench")]
            Launch::AesCtr {
                key,
                nr,
                j0,
                data,
                len,
                ..
            } => {
                let w = abi::le_words(&j0);
                let ctr0 = gcmx_core::Counter::of_j0(&j0).initial();
                let (k, d, n) = (a(key), a(data), len as u64);
                let args: [*const c_void; 8] = [
                    (&k as *const u64).cast(),
                    (&nr as *const u32).cast(),
                    (&w[0] as *const u32).cast(),
                    (&w[1] as *const u32).cast(),
                    (&w[2] as *const u32).cast(),
                    (&ctr0 as *const u32).cast(),
                    (&d as *const u64).cast(),
                    (&n as *const u64).cast(),
                ];
                self.hold(&[key, data])?;
                // SAFETY: the argument list matches gcmx_aes_ctr(uint64_t key, uint32_t nr, u32, u32, u32,
                // u32, uint8_t* data, uint64_t nbytes) (cuda/aes_ctr.cu); the key and data ranges were checked
                // and are held until the lane waits; the driver copies the argument values at launch.
                unsafe { self.launch_args(name, grid, block, &args) }
            }
        }
    }

    /// Hold the buffers of a launch until the lane waits (all on this lane's device).
    fn hold(&mut self, ats: &[At<'_>]) -> Result<(), Error> {
        for at in ats {
            self.same_device(at)?;
        }
        self.gpu.enter()?;
        for at in ats {
            at.mem.order(self.stream.0, true)?;
        }
        self.keep.extend(ats.iter().map(|at| at.mem.clone()));
        Ok(())
    }

    /// Queue a device-batch launch (cooperative) whose regions are all device buffers of this lane's
    /// device; they are held until the lane waits.
    pub(crate) fn launch_dbatch(&mut self, args: DbArgs<'_>) -> Result<(), Error> {
        let (p, name, grid, uses) = db_prepare(&self.gpu, &args)?;
        let ats: Vec<At<'_>> = uses.iter().map(|(m, _)| At::start(m)).collect();
        self.hold(&ats)?;
        self.busy = true;
        // SAFETY: `p` is the GcmxDbParams of `args`, built by `db_prepare` from ranges it checked; every
        // device buffer it names is held in `keep` until the lane waits (the slots and raw spans that
        // lanes never use are refused by db_prepare's caller contract: see `Region`).
        unsafe { launch_coop(&self.gpu, self.stream.0, name, grid, &p)? };
        args.scratch.advance(grid);
        Ok(())
    }

    /// Launch kernel `name` with one by-value parameter struct.
    fn launch_struct<P>(&mut self, name: &str, grid: u32, block: u32, p: &P) -> Result<(), Error> {
        let args = [(p as *const P).cast::<c_void>()];
        // SAFETY: only called from `launch`, with the `#[repr(C)]` mirror (layout checked against
        // gcmx_abi.h by the unit tests) or device address that kernel `name` takes, built from ranges
        // `Launch::check` validated, in buffers `hold` keeps alive until the lane waits.
        unsafe { self.launch_args(name, grid, block, &args) }
    }

    /// # Safety
    /// `args` must point to values of exactly kernel `name`'s parameter types, in order, and every
    /// device address among them must stay valid for the kernel's accesses until this lane waits.
    unsafe fn launch_args(
        &mut self,
        name: &str,
        grid: u32,
        block: u32,
        args: &[*const c_void],
    ) -> Result<(), Error> {
        self.gpu.enter()?;
        let f = self.gpu.function(name)?;
        let args: Vec<*mut c_void> = args.iter().map(|p| p.cast_mut()).collect();
        fault::hit(Op::Launch)?;
        self.busy = true;
        // SAFETY: forwarded from this function's contract; cuLaunchKernel copies the argument values at
        // launch time, so they need only live through this call.
        let r = unsafe {
            cu::cuLaunchKernel(
                f,
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                self.stream.0,
                args.as_ptr().cast_mut(),
                ptr::null_mut(),
            )
        };
        check(r, format!("launch {name}<<<{grid}, {block}>>>"))
    }

    /// Record `event` on this lane.
    #[cfg(feature = "bench")]
    pub(crate) fn record(&mut self, event: &Event) -> Result<(), Error> {
        self.gpu.enter()?;
        fault::hit(Op::Event)?;
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
pub(crate) struct Event(cu::CUevent);

// SAFETY: an event handle may be used from any thread; it is destroyed once, in Drop.
#[cfg(feature = "bench")]
unsafe impl Send for Event {}

#[cfg(feature = "bench")]
impl Event {
    /// A timing event on `gpu`.
    pub(crate) fn new(gpu: &Gpu) -> Result<Event, Error> {
        gpu.enter()?;
        fault::hit(Op::Event)?;
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
        fault::hit(Op::Synchronize).and(check(r, "cuEventSynchronize"))?;
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

// ------------------------------------------------------------------------------------------------------
// Fences, callers' streams, parameter slots, device-batch launches
// ------------------------------------------------------------------------------------------------------

/// Smallest parameter slot allocated (bytes).
const SLOT_MIN: usize = 4096;
/// Smallest device-batch scratch allocated (bytes).
const SCRATCH_MIN: usize = 1 << 20;

/// A CUDA event recorded after queued work: the work is complete when the fence is. Waits on it sleep
/// (blocking-sync event) rather than spin.
pub(crate) struct Fence {
    gpu: Arc<Gpu>,
    raw: cu::CUevent,
    /// The caller's stream it was recorded on (`UserStream::id`), 0 for gcmx's own streams.
    stream: u64,
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
        fault::hit(Op::Event)?;
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
    fn record(&self, stream: cu::CUstream) -> Result<(), Error> {
        self.gpu.enter()?;
        fault::hit(Op::Event)?;
        // SAFETY: both handles are valid: the event is ours, the stream is alive for the call.
        let r = unsafe { cu::cuEventRecord(self.raw, stream) };
        check(r, "cuEventRecord")
    }

    /// Make work queued later on `stream` wait until the fenced work is complete.
    fn make_wait(&self, stream: cu::CUstream) -> Result<(), Error> {
        fault::hit(Op::Event)?;
        // SAFETY: both handles are valid; the driver takes a reference to the event's current record.
        let r = unsafe { cu::cuStreamWaitEvent(stream, self.raw, 0) };
        check(r, "cuStreamWaitEvent")
    }

    /// Whether the fenced work is complete (an error of that work is returned here).
    pub(crate) fn done(&self) -> Result<bool, Error> {
        self.gpu.enter()?;
        // SAFETY: queries our event.
        let r = unsafe { cu::cuEventQuery(self.raw) };
        let done = match r {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            e => check(e, "cuEventQuery").map(|()| false),
        };
        // A query reports the errors of the work before it, as a synchronisation does.
        fault::hit(Op::Synchronize).and(done)
    }

    /// Wait (sleeping) until the fenced work is complete.
    pub(crate) fn wait(&self) -> Result<(), Error> {
        self.gpu.enter()?;
        // SAFETY: waits on our event.
        let r = unsafe { cu::cuEventSynchronize(self.raw) };
        fault::hit(Op::Synchronize).and(check(r, "cuEventSynchronize"))
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

/// A caller's stream: created by gcmx ([`Stream::on_device`], destroyed with it) or borrowed from
/// another library ([`Stream::from_raw`]).
pub(crate) struct UserStream {
    gpu: Arc<Gpu>,
    raw: cu::CUstream,
    owned: bool,
    /// Unique for the process (handles can be reused once a stream is destroyed).
    id: u64,
}

/// The next `UserStream::id`.
static STREAM_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn stream_id() -> u64 {
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
    /// A new stream on device `ordinal` (non-blocking with respect to the legacy default stream).
    ///
    /// `Error::BackendUnavailable` without a usable device, `Error::InvalidInput` for an ordinal past
    /// the last device.
    pub fn on_device(ordinal: u32) -> Result<Stream, Error> {
        let gpu = Gpu::get(ordinal)?;
        gpu.enter()?;
        let mut raw: cu::CUstream = ptr::null_mut();
        fault::hit(Op::StreamCreate)?;
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
        fault::hit(Op::Synchronize).and(check(r, "cuStreamSynchronize"))
    }

    /// The device ordinal.
    pub fn device(&self) -> u32 {
        self.inner.gpu.info().ordinal
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.inner.gpu
    }
}

/// Page-locked host memory mapped for the device, for the parameters of one asynchronous call (its
/// descriptor, nonce and AAD, which the kernel reads in place, and the verdict it writes back). Reused
/// only once the fence of the work that used it is complete.
pub(crate) struct ParamSlot {
    gpu: Arc<Gpu>,
    host: *mut u8,
    len: usize,
    dev: u64,
    /// The fence of the last work that used the slot.
    fence: Mutex<Option<Arc<Fence>>>,
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
    fn new(gpu: &Arc<Gpu>, len: usize) -> Result<ParamSlot, Error> {
        gpu.enter()?;
        let mut host: *mut c_void = ptr::null_mut();
        let flags = cu::CU_MEMHOSTALLOC_PORTABLE | cu::CU_MEMHOSTALLOC_DEVICEMAP;
        fault::hit(Op::HostAlloc)?;
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

    fn ready(&self) -> bool {
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
    mem: Arc<DeviceMem>,
    bar: u32,
}

impl Scratch {
    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        self.mem.len()
    }

    fn advance(&mut self, grid: u32) {
        self.bar = self.bar.wrapping_add(abi::DB_BARRIERS.wrapping_mul(grid));
    }
}

/// The address of a region of a device batch, checked: inside its buffer, on `gpu`, aligned to `align`.
fn region_addr(gpu: &Arc<Gpu>, r: &Region<'_>, align: u64, what: &str) -> Result<u64, Error> {
    let addr = match *r {
        Region::Mem { at, len } => {
            if !Arc::ptr_eq(at.mem.gpu(), gpu) {
                return Err(Error::InvalidInput(format!(
                    "the {what} buffer belongs to another device"
                )));
            }
            at.mem.range(at.off, len, what)?
        }
        Region::Slot { slot, off, len } => {
            if off.checked_add(len).is_none_or(|e| e > slot.len) || !Arc::ptr_eq(&slot.gpu, gpu) {
                return Err(internal(format!(
                    "{what}: {len} bytes at {off} of a parameter slot"
                )));
            }
            slot.dev + off as u64
        }
        Region::Raw(RawDeviceSpan { addr, .. }) => addr,
    };
    if r.len() > 0 && !addr.is_multiple_of(align) {
        return Err(Error::InvalidInput(format!(
            "the {what} must start on a {align}-byte boundary"
        )));
    }
    Ok(addr)
}

/// What a device-batch launch needs: its parameter block, kernel, grid, and the device buffers it uses
/// (with whether it writes them).
type DbPrepared = (
    abi::GcmxDbParams,
    &'static str,
    u32,
    Vec<(Arc<DeviceMem>, bool)>,
);

fn db_prepare(gpu: &Arc<Gpu>, a: &DbArgs<'_>) -> Result<DbPrepared, Error> {
    a.check()?;
    let name = a.kernel();
    let grid = a.grid.clamp(1, gpu.resident_blocks(name, abi::DB_THREADS)?);
    let scratch_len = abi::db_scratch_bytes(a.nmsgs, grid);
    if (a.scratch.len() as u64) < scratch_len {
        return Err(internal(format!(
            "device-batch scratch of {} bytes, {scratch_len} needed",
            a.scratch.len()
        )));
    }
    let regions = [a.msgs, a.data, a.aad, a.nonces, a.tags, a.verdicts];
    let names = ["message table", "data", "AAD", "nonce", "tag", "verdict"];
    let mut addr = [0u64; 6];
    for i in 0..6 {
        addr[i] = region_addr(gpu, &regions[i], DB_ALIGN[i], names[i])?;
    }
    for at in [a.keys, a.key_powers, At::start(&a.scratch.mem)] {
        if !Arc::ptr_eq(at.mem.gpu(), gpu) {
            return Err(Error::InvalidInput(
                "keys and buffers of different devices".into(),
            ));
        }
    }
    let p = abi::GcmxDbParams {
        msgs: addr[0],
        data: addr[1],
        data_len: a.data.len() as u64,
        aad: addr[2],
        aad_len: a.aad.len() as u64,
        nonces: addr[3],
        nonces_len: a.nonces.len() as u64,
        tags: addr[4],
        verdicts: addr[5],
        keys: a.keys.mem.addr + a.keys.off as u64,
        key_powers: a.key_powers.mem.addr + a.key_powers.off as u64,
        scratch: a.scratch.mem.addr,
        nmsgs: a.nmsgs,
        nkeys: a.nkeys,
        nr: a.nr,
        mode: a.mode,
        tag_len: a.tag_len,
        flags: a.flags,
        bar_base: a.scratch.bar,
        _pad0: 0,
    };
    // Device buffers it uses: (msgs, data, aad, nonces) read / written, tags and verdicts written (tags
    // are read when opening: counted as written, which orders more, never less), keys read, scratch written.
    let writes = [false, true, false, false, true, true];
    let mut uses: Vec<(Arc<DeviceMem>, bool)> = Vec::new();
    for (r, w) in regions.iter().zip(writes) {
        if let Region::Mem { at, .. } = r {
            uses.push((at.mem.clone(), w));
        }
    }
    uses.push((a.keys.mem.clone(), false));
    uses.push((a.key_powers.mem.clone(), false));
    uses.push((a.scratch.mem.clone(), true));
    Ok((p, name, grid, uses))
}

/// Launch cooperative kernel `name` with one parameter struct on `stream`.
///
/// # Safety
/// `p` must be kernel `name`'s parameter struct, and every address in it must stay valid for the
/// kernel's accesses until it has completed on `stream`.
unsafe fn launch_coop<P>(
    gpu: &Arc<Gpu>,
    stream: cu::CUstream,
    name: &'static str,
    grid: u32,
    p: &P,
) -> Result<(), Error> {
    gpu.enter()?;
    let f = gpu.function(name)?;
    let mut args = [(p as *const P).cast_mut().cast::<c_void>()];
    fault::hit(Op::Launch)?;
    // SAFETY: forwarded from this function's contract; the grid is at most the resident limit
    // (`Gpu::resident_blocks`), as cooperative launches require, and the driver copies the parameter
    // values at launch time.
    let r = unsafe {
        cu::cuLaunchCooperativeKernel(
            f,
            grid,
            1,
            1,
            abi::DB_THREADS,
            1,
            1,
            0,
            stream,
            args.as_mut_ptr(),
        )
    };
    check(r, "cuLaunchCooperativeKernel")
}

/// Queue a device-batch launch on a caller's stream, ordered after the queued work that uses the same
/// device buffers; returns the fence of the launch, which every buffer it uses (and `slot`) records.
/// Nothing waits: buffers stay valid because their owners' `Drop` and later uses wait for the fence.
pub(crate) fn queue_dbatch(
    stream: &Stream,
    args: DbArgs<'_>,
    slot: Option<&ParamSlot>,
) -> Result<Arc<Fence>, Error> {
    let gpu = stream.gpu().clone();
    let (p, name, grid, uses) = db_prepare(&gpu, &args)?;
    let s = stream.inner.raw;
    gpu.enter()?;
    for (m, w) in &uses {
        m.order(s, *w)?;
    }
    if let Some(sl) = slot
        && let Some(f) = lock(&sl.fence).as_ref()
    {
        // A slot is handed out only once its fence is complete; ordering again costs nothing.
        f.make_wait(s)?;
    }
    let mut fence = Fence::new(&gpu)?;
    if let Some(f) = Arc::get_mut(&mut fence) {
        f.stream = stream.inner.id;
    }
    // SAFETY: `p` comes from db_prepare (checked ranges). The device buffers are kept alive and unchanged
    // until the launch completes by the fence recorded below (DeviceMem::order / settle); the slot by its
    // fence (ParamSlot::drop and reuse wait); raw spans by RawDeviceSpan::new's contract.
    unsafe { launch_coop(&gpu, s, name, grid, &p)? };
    args.scratch.advance(grid);
    if let Err(e) = fence.record(s) {
        // Without a fence nothing could tell when the launch is over: wait for it here (an error of the
        // wait is an error of that work, which has drained).
        // SAFETY: waits on the caller's valid stream.
        let r = unsafe { cu::cuStreamSynchronize(s) };
        let _ = fault::hit(Op::Synchronize).and(check(r, "cuStreamSynchronize"));
        return Err(e);
    }
    for (m, w) in &uses {
        m.note(&fence, *w);
    }
    if let Some(sl) = slot {
        sl.set_fence(&fence);
    }
    Ok(fence)
}

// ------------------------------------------------------------------------------------------------------
// Caller memory
// ------------------------------------------------------------------------------------------------------

/// Live [`pin_scope`] registrations as (start address, length).
static PINNED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn pinned_covers(start: usize, len: usize) -> bool {
    super::region_covers(&lock(&PINNED), start, len)
}

/// A host range page-locked for one [`direct_io`] call (or covered by a live [`pin_scope`]).
struct Registration {
    gpu: Arc<Gpu>,
    ptr: *mut c_void,
    /// False when a live scope registered the range (then it is not ours to unregister).
    owned: bool,
}

impl Registration {
    /// Page-lock the `len` bytes at `ptr` for this call; `None` if the driver refuses (the caller stages
    /// instead). The range must be caller memory borrowed exclusively for the call.
    ///
    /// A range inside a live [`pin_scope`] is used as is. A range the driver reports as already
    /// registered by someone else may be only partly page-locked, so it is refused.
    fn for_call(gpu: &Arc<Gpu>, ptr: *mut u8, len: usize) -> Option<Registration> {
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
        fault::hit(Op::HostRegister).ok()?;
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
    lanes: &'a mut [Lane],
    /// The page-locked ranges (start, length): one per span.
    ranges: Vec<(*mut u8, usize)>,
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

    fn host_range(&self, span: usize, off: usize, n: usize) -> Result<*mut u8, Error> {
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

/// [`direct_io`] over many caller ranges ([`super::Span`]s, from [`super::extend_spans`]): each span
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
    spans: &[super::Span],
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

fn run_direct<R>(
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
struct ScopeGuard<'g> {
    gpu: &'g Arc<Gpu>,
    ptr: *mut c_void,
    len: usize,
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
    fault::hit(Op::HostRegister)?;
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
