//! The backend names of the command line.

use crate::error::{Error, Result};

pub use gcmx::Backend;

/// Parses a `--backend` value with the library's own spellings: `auto`, `cpu`, `cpu-parallel`
/// or `cuda` (only in builds with the `cuda` feature).
pub fn parse_backend(s: &str) -> Result<Backend> {
    s.parse::<Backend>().map_err(|e| match e {
        gcmx::GcmError::BackendUnavailable(_) => Error::usage(
            "this gcmx was built without CUDA support; rebuild it with `--features cuda`",
        ),
        _ => Error::usage(format!(
            "unknown backend {s:?} (auto, cpu, cpu-parallel or cuda)"
        )),
    })
}

/// The explicit backends this build has, in the order `gcmx demo` measures them.
pub(crate) fn backends_built() -> Vec<Backend> {
    #[allow(unused_mut)]
    let mut v = vec![Backend::Cpu, Backend::CpuParallel];
    #[cfg(feature = "cuda")]
    v.push(Backend::Cuda);
    v
}

/// Whether `b` is the GPU (it wants larger batches).
pub(crate) fn is_gpu(b: Backend) -> bool {
    #[cfg(feature = "cuda")]
    if b == Backend::Cuda {
        return true;
    }
    let _ = b;
    false
}
