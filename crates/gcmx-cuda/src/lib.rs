//! gcmx-cuda: the CUDA backend of [gcmx](https://crates.io/crates/gcmx).
//!
//! GHASH runs on the GPU with the PTX `clmad` carry-less multiply-accumulate (CUDA 13.3+, native on sm_80
//! and newer), AES-CTR with a constant-time bitsliced AES, both fused in one pass over the data
//! (`cuda/gcm_fused.cu`); the kernels' partial hashes are joined on the host by
//! `gcmx_core::combine::tree_reduce` (through `KeyMaterial::tag_from_partials`). The kernels are compiled
//! by build.rs into one fatbin (SASS for sm_80..sm_120 plus PTX) and driven through the `cust` crate.
//!
//! * [`CudaEngine`]: a `gcmx_core::GcmEngine` for one key: host buffers (pipelined over streams, chunked,
//!   any size), device buffers ([`CudaEngine::encrypt_device`], [`CudaEngine::decrypt_device`]) and
//!   single-key batches.
//! * [`CudaKeyring`]: multi-key batches (each message its own key, nonce, AAD and length).
//! * [`info`]: the device, its architecture and the GHASH variant loaded; [`offload_threshold`]: when
//!   `Backend::Auto` should use the GPU.
//!
//! Without a driver or device (or linked against the stub `libcuda.so.1` of `scripts/setup-cuda.sh`),
//! every entry point returns `Error::BackendUnavailable`.

#![warn(missing_docs)]

pub mod abi;
pub mod aeskey;
mod batch;
mod engine;
pub mod plan;
pub mod raw;
mod runtime;

pub use batch::{BATCH_BYTES, BATCH_MSGS, CudaKeyring, KeyedOpenJob, KeyedSealJob};
pub use cust;
pub use engine::{
    CudaEngine, HOST_CHUNK, PinnedRegion, REGISTER_MIN, STREAMS, fused_power_table,
    ghash_power_table,
};
pub use gcmx_core::Error;
pub use runtime::{DeviceInfo, GhashVariant};

/// The GHASH variant this crate was BUILT with (`clmad` with nvcc >= 13.3, else `soft`).
pub const BUILD_GHASH_VARIANT: &str = env!("GCMX_GHASH_VARIANT");
/// The nvcc release that compiled the kernels.
pub const NVCC_VERSION: &str = env!("GCMX_NVCC_VERSION");

/// The device the backend uses (device 0) and the kernels loaded on it. Initialises the driver on first
/// use. `Error::BackendUnavailable` when there is no driver or device, or the kernels do not load.
pub fn info() -> Result<DeviceInfo, Error> {
    runtime::runtime().map(|rt| rt.info().clone())
}

/// Whether a usable CUDA device is present (driver initialises, kernels load).
pub fn available() -> bool {
    runtime::runtime().is_ok()
}

/// Host-to-host throughput of the GPU path for data in ordinary (pageable) host memory, bytes per second:
/// 8 GiB AES-256-GCM on the H200 host measured 11-15 GB/s, dominated by page-locking the buffer
/// (cuMemHostRegister + Unregister of 8 GiB: 0.30 s + 0.12 s); PCIe itself allows ~49 GB/s, reached with a
/// pre-registered buffer ([`PinnedRegion`]). See benches/gpu-notes.md.
pub const GPU_HOST_PATH_BYTES_PER_S: f64 = 14e9;
/// gcmx's own multi-core CPU engine per hardware thread on the generic path (the `aes` and `ghash`
/// crates), bytes per second (24.1 GB/s on the H200 host's 16 threads for 8 GiB, benches/gpu-notes.md).
pub const CPU_CORE_BYTES_PER_S: f64 = 1.5e9;
/// The same with gcmx-x86's stitched kernels (47.4 GB/s on the H200 host's 16 threads for 8 GiB,
/// 2026-12-01, benches/gpu-notes.md).
pub const CPU_CORE_STITCHED_BYTES_PER_S: f64 = 2.9e9;
/// Smallest message worth offloading when the GPU is faster at all: below this, launch and transfer
/// latency dominate.
pub const MIN_OFFLOAD: usize = 8 << 20;

/// The message size from which `gcmx::Backend::Auto` should send host-resident messages to the GPU, or
/// `None` when there is no usable device.
///
/// For data in host memory the GPU path is bounded by page-locking and PCIe (about 14 GB/s for ordinary
/// buffers, 49 GB/s for pre-registered ones, on an H200 host); a many-core CPU can be faster. So: if all
/// hardware threads are estimated to beat the GPU path ([`CPU_CORE_BYTES_PER_S`], or
/// [`CPU_CORE_STITCHED_BYTES_PER_S`] where the stitched x86-64 kernels run, × threads ≥
/// [`GPU_HOST_PATH_BYTES_PER_S`]), `Some(usize::MAX)`: a device is present but host data should stay on
/// the CPU (callers should not even build a GPU engine for `Auto`); else `Some(MIN_OFFLOAD)`.
/// `GCMX_CUDA_OFFLOAD_MIN=<bytes>` overrides. Data already in GPU memory always belongs on the GPU
/// (the device-resident API), where fused AES-GCM runs at hundreds of GB/s.
pub fn offload_threshold() -> Option<usize> {
    if !available() {
        return None;
    }
    if let Some(v) = std::env::var("GCMX_CUDA_OFFLOAD_MIN")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
    {
        return Some(v);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Some(threshold_for(
        cores,
        gcmx_core::cipher::stitched_supported(),
    ))
}

/// [`offload_threshold`]'s rule for `cores` CPU cores, with (`stitched`) or without gcmx-x86's
/// stitched kernels on this CPU.
pub fn threshold_for(cores: usize, stitched: bool) -> usize {
    let per_core = if stitched {
        CPU_CORE_STITCHED_BYTES_PER_S
    } else {
        CPU_CORE_BYTES_PER_S
    };
    if cores as f64 * per_core >= GPU_HOST_PATH_BYTES_PER_S {
        usize::MAX
    } else {
        MIN_OFFLOAD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine without a driver (CI, linked against the stub libcuda) this must say so plainly and
    /// every entry point must refuse with BackendUnavailable; with a device, info must be consistent.
    #[test]
    fn reports_device_or_its_absence() {
        match info() {
            Err(Error::BackendUnavailable(why)) => {
                // Written straight to stderr (not through the test harness's captured print!) so CI logs
                // show it even when the test passes.
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "GPU tests: no CUDA device found ({why})");
                assert!(!available());
                assert_eq!(offload_threshold(), None);
                let km = gcmx_core::KeyMaterial::new(&[7u8; 16]).unwrap();
                assert!(matches!(
                    CudaEngine::new(&km),
                    Err(Error::BackendUnavailable(_))
                ));
                assert!(matches!(
                    CudaKeyring::new(&[&[1u8; 16]]),
                    Err(Error::BackendUnavailable(_))
                ));
            }
            Err(e) => panic!("info() failed with a non-availability error: {e}"),
            Ok(i) => {
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "GPU tests: device found: {i}");
                assert!(i.compute_capability.0 >= 8, "fatbin targets sm_80+");
                assert_eq!(i.ghash_variant.to_string(), BUILD_GHASH_VARIANT);
                assert!(offload_threshold().is_some());
            }
        }
    }

    #[test]
    fn threshold_rule() {
        assert_eq!(threshold_for(1, false), MIN_OFFLOAD);
        assert_eq!(threshold_for(4, false), MIN_OFFLOAD);
        assert_eq!(threshold_for(16, false), usize::MAX);
        assert_eq!(threshold_for(4, true), MIN_OFFLOAD);
        assert_eq!(threshold_for(5, true), usize::MAX);
        assert_eq!(threshold_for(16, true), usize::MAX);
    }
}
