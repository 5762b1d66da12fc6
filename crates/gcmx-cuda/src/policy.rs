//! When `gcmx::Backend::Auto` should send host-resident messages to the GPU: a rule on the host's
//! estimated CPU rate against the GPU host path's rate. Layer: a leaf (plain arithmetic). The rates
//! are measured figures; their runs (date, commit, device, host) are in benches/gpu-notes.md.

/// Host-to-host rate of the GPU path for data in ordinary (pageable) host memory, bytes per second:
/// page-locking the caller's buffer for each call dominates it (a pre-registered buffer reaches about
/// the PCIe rate, three times this).
pub(crate) const GPU_HOST_PATH_BYTES_PER_S: f64 = 14e9;
/// gcmx's multi-core CPU engine per hardware thread on the generic path (the `aes` and `ghash` crates).
pub(crate) const CPU_CORE_BYTES_PER_S: f64 = 1.5e9;
/// The same with gcmx-x86's stitched AES-CTR + GHASH kernels.
pub(crate) const CPU_CORE_STITCHED_BYTES_PER_S: f64 = 2.9e9;
/// Smallest message worth offloading when the GPU is faster at all: below this, launch and transfer
/// latency dominate.
pub(crate) const MIN_OFFLOAD: usize = 8 << 20;

/// The offload threshold for `cores` CPU hardware threads, with (`stitched`) or without gcmx-x86's
/// stitched kernels: `usize::MAX` (keep host data on the CPU) when all threads together are estimated
/// to beat the GPU host path, else [`MIN_OFFLOAD`].
pub(crate) fn threshold_for(cores: usize, stitched: bool) -> usize {
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

/// `GCMX_CUDA_OFFLOAD_MIN=<bytes>`, when set to a number.
pub(crate) fn env_override() -> Option<usize> {
    std::env::var("GCMX_CUDA_OFFLOAD_MIN")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_rule() {
        assert_eq!(threshold_for(1, false), MIN_OFFLOAD);
        assert_eq!(threshold_for(4, false), MIN_OFFLOAD);
        assert_eq!(threshold_for(16, false), usize::MAX);
        assert_eq!(threshold_for(4, true), MIN_OFFLOAD);
        assert_eq!(threshold_for(5, true), usize::MAX);
        assert_eq!(threshold_for(16, true), usize::MAX);
        assert_eq!(threshold_for(0, true), MIN_OFFLOAD);
        assert_eq!(threshold_for(usize::MAX, false), usize::MAX);
    }
}
