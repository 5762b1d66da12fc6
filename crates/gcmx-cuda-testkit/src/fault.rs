//! Fault injection and the emulated device, through the stub libcuda's controls.
//!
//! The stub counts every call of the driver entry points that gcmx-cuda uses, by kind ([`Op`]), and
//! makes the `nth` call of one kind fail, once or together with every counted call after it (a lost
//! context: [`Mode`]). A failed call returns the error the driver returns for such a failure
//! ([`Injected::code`]) without reaching the driver (emulated or real), except a wait
//! (`Op::Synchronize`), which waits first and then reports the failure, as the driver reports an
//! error of earlier asynchronous work once that work has drained. Calls that release resources (free,
//! unregister, destroy, context release) and queries are neither counted nor failed: gcmx ignores
//! their result, and after a real loss the driver reclaims everything with the context.
//!
//! On a machine without a GPU, [`emulate`] switches the stub into emulating a device in host memory,
//! and [`emulator_stats`] reads its live allocations and the misuse it detected, for leak and wipe
//! checks (the tests call gcmx-cuda's `release_cached` first, to drop what gcmx caches between calls).
//!
//! This crate does not depend on gcmx-cuda (so the crate graph has no loop through gcmx-cuda's
//! dev-dependencies): [`injected`] reads any error's chain of sources.

use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;

/// The kinds of driver call a fault can be injected into (the stub's `enum fault_op`, in its order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Retaining a device's primary context at start-up (`cuDevicePrimaryCtxRetain`).
    ContextCreate,
    /// Loading the kernels at start-up (`cuModuleLoadData`).
    ModuleLoad,
    /// Allocating device memory (`cuMemAlloc`).
    DeviceAlloc,
    /// Allocating page-locked host memory for staging or parameters (`cuMemAllocHost`, `cuMemHostAlloc`).
    HostAlloc,
    /// Page-locking caller memory (`cuMemHostRegister`).
    HostRegister,
    /// A copy from host to device memory (`cuMemcpyHtoDAsync`).
    CopyToDevice,
    /// A copy from device to host memory (`cuMemcpyDtoHAsync`, `cuMemcpyDtoH`).
    CopyToHost,
    /// Setting device memory (`cuMemsetD8Async`, `cuMemsetD8`): wipes.
    Memset,
    /// A kernel launch (`cuLaunchKernel`, `cuLaunchCooperativeKernel`, and the occupancy query
    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor` before a cooperative kernel's first launch).
    Launch,
    /// Waiting for a stream or an event, or asking whether an event is complete (`cuStreamSynchronize`,
    /// `cuEventSynchronize`, `cuEventQuery`): counted, and failed, after the wait.
    Synchronize,
    /// Creating a stream (`cuStreamCreate`).
    StreamCreate,
    /// Creating or recording an event, or making a stream wait for one (`cuEventCreate`, `cuEventRecord`,
    /// `cuStreamWaitEvent`): the fences of asynchronous calls and sleeping waits, and the benchmark's timers.
    Event,
}

impl Op {
    /// Every kind, in declaration order.
    pub const ALL: [Op; 12] = [
        Op::ContextCreate,
        Op::ModuleLoad,
        Op::DeviceAlloc,
        Op::HostAlloc,
        Op::HostRegister,
        Op::CopyToDevice,
        Op::CopyToHost,
        Op::Memset,
        Op::Launch,
        Op::Synchronize,
        Op::StreamCreate,
        Op::Event,
    ];

    /// The driver function this kind stands for (the first one where it stands for several).
    pub fn driver_call(self) -> &'static str {
        match self {
            Op::ContextCreate => "cuDevicePrimaryCtxRetain",
            Op::ModuleLoad => "cuModuleLoadData",
            Op::DeviceAlloc => "cuMemAlloc",
            Op::HostAlloc => "cuMemAllocHost",
            Op::HostRegister => "cuMemHostRegister",
            Op::CopyToDevice => "cuMemcpyHtoDAsync",
            Op::CopyToHost => "cuMemcpyDtoHAsync",
            Op::Memset => "cuMemsetD8Async",
            Op::Launch => "cuLaunchKernel",
            Op::Synchronize => "cuStreamSynchronize",
            Op::StreamCreate => "cuStreamCreate",
            Op::Event => "cuEventCreate/cuEventRecord",
        }
    }
}

impl core::fmt::Display for Op {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

/// How an armed fault fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The chosen call fails; the calls after it run normally.
    Once,
    /// The chosen call fails and so does every counted call after it, of every kind, until
    /// [`disarm`]: the device's context is lost.
    ContextLost,
}

/// A failure the stub injected: what made a driver call fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Injected {
    op: Op,
    call: u64,
    lost: bool,
    code: i32,
}

impl Injected {
    /// The kind of call that failed.
    pub fn op(&self) -> Op {
        self.op
    }

    /// Which call of its kind it was (1-based, counted since [`arm`]).
    pub fn call(&self) -> u64 {
        self.call
    }

    /// Whether it failed because the context was lost.
    pub fn context_lost(&self) -> bool {
        self.lost
    }

    /// The driver's error code it returned.
    pub fn code(&self) -> &'static str {
        match self.code {
            1 => "CUDA_ERROR_INVALID_VALUE",
            2 => "CUDA_ERROR_OUT_OF_MEMORY",
            209 => "CUDA_ERROR_NO_BINARY_FOR_GPU",
            700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
            701 => "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
            719 => "CUDA_ERROR_LAUNCH_FAILED",
            _ => "CUDA_ERROR_UNKNOWN",
        }
    }
}

impl core::fmt::Display for Injected {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "injected fault: {} (call {} of {}){}",
            self.code(),
            self.call,
            self.op,
            if self.lost { ", context lost" } else { "" }
        )
    }
}

impl std::error::Error for Injected {}

/// The library the loader finds as the driver, opened once (gcmx-cuda opens the same one by the same
/// name, so both see the same stub state).
fn driver() -> Option<&'static libloading::Library> {
    static LIB: OnceLock<Option<libloading::Library>> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: opens the libcuda.so.1 that gcmx-cuda loads (the stub, or a driver); its initialisers
        // have no preconditions on our side.
        unsafe { libloading::Library::new("libcuda.so.1") }.ok()
    })
    .as_ref()
}

/// The address of `name` in the loaded libcuda, if it exports it.
fn symbol(name: &CStr) -> Option<*mut c_void> {
    let lib = driver()?;
    // SAFETY: the value is only an address here; each caller casts it to the C type the stub declares.
    let s = unsafe { lib.get::<*mut c_void>(name.to_bytes_with_nul()) }.ok()?;
    Some(*s).filter(|p| !p.is_null())
}

/// Whether the loaded libcuda.so.1 is gcmx's stub (with its fault table): without it nothing here
/// can inject a fault or emulate a device.
pub fn stub_loaded() -> bool {
    symbol(c"gcmx_stub_fault_arm").is_some()
}

/// The stub's control `name`; panics with what to do when the loaded libcuda is not the stub.
fn control(name: &CStr) -> *mut c_void {
    symbol(name).unwrap_or_else(|| {
        panic!(
            "gcmx-cuda-testkit: the loaded libcuda.so.1 has no {name:?}: it is not gcmx's stub libcuda \
             (put .toolchain/cuda-stub first on LD_LIBRARY_PATH; on a GPU machine also set \
             GCMX_STUB_DRIVER to the real driver's libcuda.so.1)"
        )
    })
}

/// Make the `nth` call (1-based, counted from now) of kind `op` fail, once or with every counted
/// call after it ([`Mode::ContextLost`]). Replaces an earlier arming and resets the counts.
///
/// # Panics
///
/// When the loaded libcuda is not the stub ([`stub_loaded`]), or `nth` is 0.
pub fn arm(op: Op, nth: u64, mode: Mode) {
    let f = control(c"gcmx_stub_fault_arm");
    // SAFETY: the stub exports `int gcmx_stub_fault_arm(uint32_t op, uint64_t nth, uint32_t mode)`.
    let f: unsafe extern "C" fn(u32, u64, u32) -> c_int = unsafe { core::mem::transmute(f) };
    let mode = match mode {
        Mode::Once => 0,
        Mode::ContextLost => 1,
    };
    // SAFETY: plain values; the stub checks them.
    let rc = unsafe { f(op as u32, nth, mode) };
    assert_eq!(rc, 0, "gcmx_stub_fault_arm({op}, {nth}, {mode}) refused");
}

/// End the fault (also a lost context); the number of calls that failed by injection since [`arm`]
/// (0 where the loaded libcuda is not the stub).
pub fn disarm() -> u64 {
    let Some(f) = symbol(c"gcmx_stub_fault_disarm") else {
        return 0;
    };
    // SAFETY: the stub exports `int gcmx_stub_fault_disarm(uint64_t* injected)`.
    let f: unsafe extern "C" fn(*mut u64) -> c_int = unsafe { core::mem::transmute(f) };
    let mut n = 0u64;
    // SAFETY: the stub writes one u64, which lives through the call.
    let rc = unsafe { f(&mut n) };
    if rc == 0 { n } else { 0 }
}

/// Counted calls of kind `op` since the last [`arm`] or [`reset_counts`] (0 where the loaded libcuda
/// is not the stub).
pub fn calls(op: Op) -> u64 {
    let Some(f) = symbol(c"gcmx_stub_fault_calls") else {
        return 0;
    };
    // SAFETY: the stub exports `int gcmx_stub_fault_calls(uint32_t op, uint64_t* n)`.
    let f: unsafe extern "C" fn(u32, *mut u64) -> c_int = unsafe { core::mem::transmute(f) };
    let mut n = 0u64;
    // SAFETY: the stub checks `op` and writes one u64, which lives through the call.
    let rc = unsafe { f(op as u32, &mut n) };
    if rc == 0 { n } else { 0 }
}

/// Start counting calls from zero (the fault stays armed).
pub fn reset_counts() {
    let Some(f) = symbol(c"gcmx_stub_fault_reset_counts") else {
        return;
    };
    // SAFETY: the stub exports `int gcmx_stub_fault_reset_counts(void)`.
    let f: unsafe extern "C" fn() -> c_int = unsafe { core::mem::transmute(f) };
    // SAFETY: no arguments.
    let _ = unsafe { f() };
}

/// A call that ending a host registration takes, which the fault table never fails (it counts no
/// release): [`fail_release`] fails it (the stub's `enum release_call`, in its order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Release {
    /// Making the context current (`cuCtxSetCurrent`): fails with `CUDA_ERROR_INVALID_CONTEXT`.
    SetCurrent,
    /// Ending a host registration (`cuMemHostUnregister`): fails with `CUDA_ERROR_ILLEGAL_ADDRESS`,
    /// as after a lost context, and the range stays registered.
    Unregister,
}

/// Make the next `count` calls of `call` fail before they reach the driver (0: none); the number
/// of calls of `call` that failed since the previous `fail_release` of it. Independent of [`arm`]
/// and [`disarm`].
///
/// # Panics
///
/// When the loaded libcuda is not the stub ([`stub_loaded`]).
pub fn fail_release(call: Release, count: u64) -> u64 {
    let f = control(c"gcmx_stub_fault_release");
    // SAFETY: the stub exports `int gcmx_stub_fault_release(uint32_t which, uint64_t count,
    // uint64_t* failed)`.
    let f: unsafe extern "C" fn(u32, u64, *mut u64) -> c_int = unsafe { core::mem::transmute(f) };
    let mut failed = 0u64;
    // SAFETY: plain values, and one u64 that the stub writes, which lives through the call.
    let rc = unsafe { f(call as u32, count, &mut failed) };
    assert_eq!(rc, 0, "gcmx_stub_fault_release({call:?}, {count}) refused");
    failed
}

/// `struct gcmx_stub_fault` of the stub.
#[repr(C)]
struct StubFault {
    size: u64,
    op: u32,
    lost: u32,
    call: u64,
    code: i32,
    reserved: u32,
}

/// The latest failure the stub injected since the last [`arm`], if any.
pub fn last_injected() -> Option<Injected> {
    let f = symbol(c"gcmx_stub_fault_last")?;
    // SAFETY: the stub exports `int gcmx_stub_fault_last(struct gcmx_stub_fault*)`, which `StubFault`
    // mirrors.
    let f: unsafe extern "C" fn(*mut StubFault) -> c_int = unsafe { core::mem::transmute(f) };
    let mut raw = StubFault {
        size: core::mem::size_of::<StubFault>() as u64,
        op: 0,
        lost: 0,
        call: 0,
        code: 0,
        reserved: 0,
    };
    // SAFETY: the stub checks the size and writes the struct, which lives through the call.
    let rc = unsafe { f(&mut raw) };
    if rc != 0 {
        return None;
    }
    Some(Injected {
        op: *Op::ALL.get(raw.op as usize)?,
        call: raw.call,
        lost: raw.lost != 0,
        code: raw.code,
    })
}

/// The injected failure behind `e`: `Some` when one of `e`'s sources (gcmx-cuda's driver error,
/// reading `NAME (code)`) has the code of the latest failure the stub injected since [`arm`]. (Callers
/// check first that `e` is gcmx-cuda's `Error::Device`.)
pub fn injected(e: &(dyn std::error::Error + 'static)) -> Option<Injected> {
    let last = last_injected()?;
    let tail = format!("({})", last.code);
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        if s.to_string().ends_with(&tail) {
            return Some(last);
        }
        src = s.source();
    }
    None
}

/// The configuration `gcmx_stub_emulate` takes (`struct gcmx_stub_config` of the stub).
#[repr(C)]
struct StubConfig {
    size: u64,
    total_memory: u64,
    have_clmad: u32,
    reserved: u32,
}

/// The counters `gcmx_stub_stats` fills (`struct gcmx_stub_stats` of the stub).
#[repr(C)]
struct StubStats {
    size: u64,
    device_allocs: u64,
    device_bytes: u64,
    host_allocs: u64,
    host_bytes: u64,
    registrations: u64,
    streams: u64,
    events: u64,
    modules: u64,
    context_refs: u64,
    launches: u64,
    unwiped_frees: u64,
    unwiped_host_frees: u64,
    unpinned_copies: u64,
    invalid_calls: u64,
    nonzero_device: u64,
    nonzero_host: u64,
    last_invalid: [u8; 160],
}

/// Device memory of the emulated device.
pub const EMULATED_MEMORY: usize = 1 << 30;

/// Whether the kernels gcmx-cuda embeds use the `clmad` GHASH (their build record says so; the
/// emulated `gcmx_abi_info` must report what gcmx-cuda's start-up check expects).
fn kernels_have_clmad() -> bool {
    include_str!("../../gcmx-cuda/kernels/gcmx.fatbin.record")
        .lines()
        .filter(|l| l.starts_with("flags "))
        .any(|l| l.split(' ').any(|f| f == "-DGCMX_HAVE_CLMAD=1"))
}

/// Switch the stub libcuda (when it is the libcuda loaded, and not forwarding to a real driver) into
/// emulating one device with [`EMULATED_MEMORY`] bytes of memory; `false` otherwise, which leaves the
/// driver as it is. Call it before the first use of the device (a start that already failed is
/// retried by the next call).
pub fn emulate() -> bool {
    let Some(f) = symbol(c"gcmx_stub_emulate") else {
        return false;
    };
    // SAFETY: the stub exports `int gcmx_stub_emulate(const struct gcmx_stub_config*)`, which
    // `StubConfig` mirrors.
    let f: unsafe extern "C" fn(*const StubConfig) -> c_int = unsafe { core::mem::transmute(f) };
    let cfg = StubConfig {
        size: core::mem::size_of::<StubConfig>() as u64,
        total_memory: EMULATED_MEMORY as u64,
        have_clmad: u32::from(kernels_have_clmad()),
        reserved: 0,
    };
    // SAFETY: the stub reads the struct, which lives through the call.
    let rc = unsafe { f(&cfg) };
    rc == 0
}

/// What the emulating stub counts: live resources (for leak checks) and misuse it detected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EmulatorStats {
    /// Live device allocations.
    pub device_allocs: u64,
    /// Bytes of them.
    pub device_bytes: u64,
    /// Live page-locked host allocations.
    pub host_allocs: u64,
    /// Bytes of them.
    pub host_bytes: u64,
    /// Live host registrations.
    pub registrations: u64,
    /// Live streams.
    pub streams: u64,
    /// Live events.
    pub events: u64,
    /// Loaded modules.
    pub modules: u64,
    /// References to the primary context.
    pub context_refs: u64,
    /// Kernel launches so far.
    pub launches: u64,
    /// Device allocations freed while not all zero (a missed wipe), so far.
    pub unwiped_frees: u64,
    /// Page-locked host allocations freed while not all zero, so far.
    pub unwiped_host_frees: u64,
    /// Asynchronous copies from or to host memory that was not page-locked, so far.
    pub unpinned_copies: u64,
    /// Calls the real driver would refuse (unknown handle or pointer, a range outside every
    /// allocation, no current context), so far.
    pub invalid_calls: u64,
    /// Live device allocations holding anything but zeros (when the counters were read).
    pub nonzero_device: u64,
    /// Live page-locked host allocations holding anything but zeros.
    pub nonzero_host: u64,
    /// The latest invalid call or unpinned copy.
    pub last_invalid: String,
}

/// The emulating stub's counters, or `None` when the loaded libcuda is not the stub or the stub
/// forwards to a real driver.
pub fn emulator_stats() -> Option<EmulatorStats> {
    let f = symbol(c"gcmx_stub_stats")?;
    // SAFETY: the stub exports `int gcmx_stub_stats(struct gcmx_stub_stats*)`, which `StubStats`
    // mirrors.
    let f: unsafe extern "C" fn(*mut StubStats) -> c_int = unsafe { core::mem::transmute(f) };
    let mut raw = StubStats {
        size: core::mem::size_of::<StubStats>() as u64,
        device_allocs: 0,
        device_bytes: 0,
        host_allocs: 0,
        host_bytes: 0,
        registrations: 0,
        streams: 0,
        events: 0,
        modules: 0,
        context_refs: 0,
        launches: 0,
        unwiped_frees: 0,
        unwiped_host_frees: 0,
        unpinned_copies: 0,
        invalid_calls: 0,
        nonzero_device: 0,
        nonzero_host: 0,
        last_invalid: [0; 160],
    };
    // SAFETY: the stub checks the size and writes the struct, which lives through the call.
    let rc = unsafe { f(&mut raw) };
    if rc != 0 {
        return None;
    }
    let text = CStr::from_bytes_until_nul(&raw.last_invalid)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Some(EmulatorStats {
        device_allocs: raw.device_allocs,
        device_bytes: raw.device_bytes,
        host_allocs: raw.host_allocs,
        host_bytes: raw.host_bytes,
        registrations: raw.registrations,
        streams: raw.streams,
        events: raw.events,
        modules: raw.modules,
        context_refs: raw.context_refs,
        launches: raw.launches,
        unwiped_frees: raw.unwiped_frees,
        unwiped_host_frees: raw.unwiped_host_frees,
        unpinned_copies: raw.unpinned_copies,
        invalid_calls: raw.invalid_calls,
        nonzero_device: raw.nonzero_device,
        nonzero_host: raw.nonzero_host,
        last_invalid: text,
    })
}
