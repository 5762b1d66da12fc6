//! gcmx-cuda: the CUDA backend of [gcmx](https://crates.io/crates/gcmx).
//!
//! GHASH runs on the GPU with the PTX `clmad` carry-less multiply-accumulate (native on sm_80 and
//! newer), AES-CTR with a constant-time bitsliced AES, both fused in one pass over the data
//! (`cuda/gcm_fused.cu`); the kernels' partial hashes are joined on the host by gcmx-core. Keys are
//! uploaded raw and expanded on the GPU; key schedules, powers of H and J0 reach the kernels through
//! device memory that is wiped after use, never through launch parameters. The kernels ship in the
//! package as one fatbin (SASS for sm_80..sm_120 plus PTX, built by nvcc 13.5 from the `cuda/` sources
//! beside it, which build.rs checks it against), and the CUDA driver API is loaded from `libcuda.so.1`
//! on first use: building needs no CUDA toolkit, and a binary starts where no driver is installed.
//!
//! * [`CudaKeyring`]: keys resident on the device and every call on them: host batches, and
//!   device-resident messages ([`DeviceJob`]) and batches ([`DeviceBatch`]) on a [`Stream`], each
//!   returning a [`Pending`]. [`CudaEngine`] is a keyring of one key, and the engine behind
//!   `gcmx::Backend::Cuda` (host buffers of any size, pipelined; batches).
//! * [`DeviceMemory`]: what the device-resident calls use, gcmx's [`DeviceBuf`] or another CUDA
//!   library's [`RawDeviceSpan`]; [`Stream::from_raw`] takes another library's stream.
//! * [`PinnedRegion`]: page-lock a host buffer for a scope, so that calls inside it transfer in place;
//!   [`PinnedBuffer`]: a buffer page-locked for its whole life.
//! * [`device_count`], [`device_info`]: the devices and the kernels loaded on them;
//!   [`offload_threshold`]: when `gcmx::Backend::Auto` should use the GPU for host data.
//!
//! Without the crate's `cuda` feature (which gcmx's `cuda` feature turns on), or without a driver or
//! device, every entry point returns `Error::BackendUnavailable` with the reason; a later call tries
//! again. At run time the GPU needs an NVIDIA driver for CUDA 13.0 or newer (release 580 or later)
//! and compute capability 8.0 (Ampere) or newer.
//!
//! Modules, lowest layer first (none imports from a layer above it): `abi`, `plan`, `policy` (plain
//! data and arithmetic); `runtime` (all driver calls, the only `unsafe`); `keys` (key material on the
//! device); `resident` (`DeviceBuf`), `memory` (`DeviceMemory`), `pinned`, `pipeline` (the host
//! pipeline); `pending` and `dbatch` (device-resident work and its completion); `batch` (host batches);
//! `keyring`, `engine` (the public engines); `raw` (feature `bench`: timed kernel runs).

#![cfg_attr(docsrs, feature(doc_cfg))]

// Without the driver nothing is launched, so the kernels' parameter structs have no user.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod abi;
mod batch;
mod dbatch;
mod engine;
mod keyring;
mod keys;
mod memory;
mod pending;
mod pinned;
mod pipeline;
mod plan;
mod policy;
#[cfg(feature = "bench")]
#[cfg_attr(docsrs, doc(cfg(feature = "bench")))]
pub mod raw;
mod resident;
mod runtime;

pub use dbatch::{DeviceBatch, DeviceJob, DeviceMessage, Verdict};
pub use engine::CudaEngine;
pub use gcmx_core::Error;
pub use keyring::{CudaKeyring, KeyedOpenJob, KeyedSealJob};
pub use memory::DeviceMemory;
pub use pending::Pending;
pub use pinned::{PinnedBuffer, PinnedRegion};
pub use resident::DeviceBuf;
pub use runtime::{DeviceInfo, GhashVariant, RawDeviceSpan, Stream};

/// Device `ordinal` (0 is the default device) and the kernels loaded on it. Starts the driver on first
/// use; `Ok` means the device is usable.
///
/// `Error::InvalidInput` for an ordinal past the last device; `Error::BackendUnavailable` when there
/// is no driver or device, or the kernels do not load on it (a failed start is not remembered: a
/// later call tries again).
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// for d in 0..gcmx::cuda::device_count()? {
///     println!("{}", gcmx::cuda::device_info(d)?);
/// }
/// let usable = gcmx::cuda::device_info(0).is_ok();
/// # let _ = usable;
/// # Ok::<(), gcmx::cuda::Error>(())
/// ```
pub fn device_info(ordinal: u32) -> Result<DeviceInfo, Error> {
    runtime::Gpu::get(ordinal).map(|g| g.info().clone())
}

/// Free what gcmx keeps on every started device for reuse between calls: idle streams with their
/// page-locked staging, the device buffers of the pipeline's and batches' per-device state,
/// parameter slots and device-batch scratches (each wiped before it is freed). Work in flight keeps
/// what it uses until it ends; later calls allocate again. For a process that is done with the GPU
/// for a while and wants its memory back, or that counts the device's live allocations. Without a
/// started device (or without the `cuda` feature) it does nothing.
pub fn release_cached() {
    runtime::release_cached();
}

/// How many CUDA devices the driver reports (`Error::BackendUnavailable` without a driver).
pub fn device_count() -> Result<u32, Error> {
    runtime::Gpu::count()
}

/// The message size from which `gcmx::Backend::Auto` should send host-resident messages to the GPU, or
/// `None` when there is no usable device.
///
/// For data in host memory the GPU path is bounded by page-locking and PCIe, and a many-core CPU can be
/// faster: when all hardware threads are estimated to beat the GPU host path, this is
/// `Some(usize::MAX)` (a device is present but host data should stay on the CPU, and callers need not
/// build a GPU engine for `Auto`); else `Some` of a size below which launch and transfer latency
/// dominate. `GCMX_CUDA_OFFLOAD_MIN=<bytes>` overrides. Data already in GPU memory always belongs on
/// the GPU (the device-resident API). The rates behind the rule are in benches/gpu-notes.md.
pub fn offload_threshold() -> Option<usize> {
    runtime::Gpu::get(0).ok()?;
    if let Some(v) = policy::env_override() {
        return Some(v);
    }
    let cores = batch::hardware_threads();
    Some(policy::threshold_for(
        cores,
        gcmx_core::backend::stitched_supported(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine without a driver (CI, linked against the stub libcuda, or built without the
    /// `cuda` feature) this must say so plainly, every entry point must refuse with
    /// BackendUnavailable, and asking again must try again (not panic, not cache a half state).
    #[test]
    fn reports_device_or_its_absence() {
        // The runtime's unit tests in this binary switch the stub libcuda (where it is the loaded
        // libcuda) into emulating a device: switch it first, so that the answer does not depend on
        // their order.
        gcmx_cuda_testkit::fault::emulate();
        match device_info(0) {
            Err(Error::BackendUnavailable(why)) => {
                // Straight to stderr (not through the harness's captured print!) so CI logs show it.
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "GPU tests: no CUDA device found ({why})");

                assert_eq!(offload_threshold(), None);
                assert!(matches!(
                    CudaEngine::new(&[7u8; 16], 0),
                    Err(Error::BackendUnavailable(_))
                ));
                assert_eq!(
                    CudaEngine::new(&[7u8; 15], 0).err(),
                    Some(Error::KeyLength(15))
                );
                assert!(matches!(
                    CudaKeyring::new(&[&[1u8; 16]], 0),
                    Err(Error::BackendUnavailable(_))
                ));
                assert!(matches!(
                    DeviceBuf::new(16, 0),
                    Err(Error::BackendUnavailable(_))
                ));
                let mut v = vec![1u8; 64];
                let r = PinnedRegion::scope(&mut v, |_| ());
                assert!(matches!(r, Err(Error::BackendUnavailable(_))));
                assert!(matches!(Stream::new(0), Err(Error::BackendUnavailable(_))));
            }
            Err(e) => panic!("device_info(0) failed with a non-availability error: {e}"),
            Ok(i) => {
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "GPU tests: device found: {i}");
                assert!(i.compute_capability.0 >= 8, "fatbin targets sm_80+");
                assert!(offload_threshold().is_some());
            }
        }
    }
}
