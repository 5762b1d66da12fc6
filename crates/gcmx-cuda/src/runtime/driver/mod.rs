//! The runtime over the CUDA driver, through the driver API that `sys` loads on first use. Every
//! `unsafe` block of the crate is in this module or `sys`, one unsafe operation per block, each with the
//! reason it is sound. See the parent module for the rules the types here enforce. One file a concept:
//!
//! * `context`: a started device (its primary context, the loaded kernels, the per-device pools);
//! * `memory`: device memory wiped before it is freed, page-locked staging, parameter slots, scratch;
//! * `stream`: lanes (gcmx's streams and what their queued work uses), fences, callers' streams, events;
//! * `launch`: kernel launches checked against their buffers, and the cooperative device-batch launch;
//! * `host`: page-locking of caller memory for a call or a scope, and the copies that use it in place.
//!
//! This file holds what they share: the embedded kernels, the error conversion and the pool sizes.

use std::any::Any;
use std::borrow::Cow;
use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};

use gcmx_core::{DeviceError, Error};
use zeroize::Zeroize;

use super::sys::{self as cu, CUresult};
use super::{
    At, DB_ALIGN, DbArgs, DeviceInfo, GhashVariant, Launch, RawDeviceSpan, Region, Stream, internal,
};
use crate::abi;

/// The kernels this build embeds (chosen by build.rs: the fatbin shipped in `kernels/`, or one it built
/// from `cuda/` when asked to).
#[cfg(feature = "cuda")]
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

/// Without the `cuda` feature no kernels are embedded (and no driver is loaded to take them).
#[cfg(not(feature = "cuda"))]
mod kernels {
    pub(super) static FATBIN: &[u8] = &[];
    pub(super) const NVCC_VERSION: &str = "none";
    pub(super) const HAVE_CLMAD: bool = false;
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

mod context;
mod host;
mod launch;
mod memory;
mod stream;

pub(crate) use context::*;
pub(crate) use host::*;
pub(crate) use launch::*;
pub(crate) use memory::*;
pub(crate) use stream::*;

/// The device the unit tests of this module run on: the stub libcuda's emulated device where the stub
/// is the loaded libcuda (CI), else the first real device (a GPU machine). Tests that need it say so
/// and return where neither exists.
#[cfg(test)]
pub(super) fn test_gpu() -> Option<Arc<Gpu>> {
    static EMULATE: std::sync::Once = std::sync::Once::new();
    EMULATE.call_once(|| {
        gcmx_cuda_testkit::fault::emulate();
    });
    match Gpu::get(0) {
        Ok(g) => Some(g),
        Err(e) => {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "runtime unit tests: no device ({e}): NOT run"
            );
            None
        }
    }
}

/// Whether the stub saw no memory freed unwiped and no asynchronous copy of memory that was not
/// page-locked (on a real driver: nothing to read).
#[cfg(test)]
pub(super) fn nothing_freed_unwiped() -> bool {
    gcmx_cuda_testkit::fault::emulator_stats()
        .is_none_or(|s| s.unwiped_frees == 0 && s.unwiped_host_frees == 0 && s.unpinned_copies == 0)
}
