//! The test emulator's controls (feature `fault-injection`; never in a normal build), published with
//! the fault hooks as `gcmx_cuda::fault`.
//!
//! On a machine without a GPU the stub libcuda (`stub/libcuda_stub.c`) can emulate a device in host
//! memory: [`emulate`] switches it on, and [`emulator_stats`] reads its live allocations and the misuse
//! it detected, for leak and wipe checks. On a real driver both report that there is no stub.
//! [`release_cached`] drops what gcmx caches between calls, so that live counts can be compared.
//! This module sits above the driver (it calls into it); the hooks in `fault` sit below it.

use std::ffi::{CStr, c_int, c_void};

/// Drop what gcmx caches per device between calls (lanes with their streams and page-locked
/// staging, the pipeline's and batches' device buffers), so that live counts can be compared
/// with none of it allocated.
pub fn release_cached() {
    super::driver::release_cached();
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

/// The address of `name` in the loaded driver library (loading it first), if it exports it.
fn symbol(name: &CStr) -> Option<*mut c_void> {
    super::sys::symbol(name).filter(|p| !p.is_null())
}

/// Switch the stub libcuda (when it is the libcuda loaded) into emulating one device with
/// [`EMULATED_MEMORY`] bytes of memory; `false` on a real driver, which is left as it is. Call it
/// before the first use of the device (a start that already failed is retried by the next call).
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
        have_clmad: u32::from(cfg!(gcmx_have_clmad)),
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

/// The emulating stub's counters, or `None` when the loaded libcuda is not the stub.
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
    // SAFETY: the stub writes the struct, which lives through the call, and checks its size.
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
