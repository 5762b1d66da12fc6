//! The `gcmx` engine as `gcmx demo` measures it in memory (the streams themselves go through
//! `gcmx-stream`), and the backend names of the command line.

use crate::error::{Error, ErrorKind, Result};

pub use gcmx::{Backend, OpenJob, SealJob};

/// An AES-GCM engine for one file key.
pub(crate) struct Engine(gcmx::Gcm);

/// The library's error, as this crate's.
fn lib_error(e: gcmx::GcmError) -> Error {
    match e {
        gcmx::GcmError::BackendUnavailable(why) => {
            Error::new(ErrorKind::Crypto, format!("backend unavailable: {why}"))
        }
        other => Error::new(ErrorKind::Crypto, format!("AES-GCM failed: {other}")),
    }
}

impl Engine {
    /// An engine for `key` on `backend`. `Backend::Auto` is the library's own rule (the CPU,
    /// serial or on all cores by message size, and the GPU where the library finds it pays).
    pub(crate) fn new(key: &[u8], backend: Backend) -> Result<Engine> {
        gcmx::Gcm::with_backend(key, backend)
            .map(Engine)
            .map_err(lib_error)
    }

    /// Seals every job (in parallel or as one GPU batch).
    pub(crate) fn seal_batch(&self, jobs: &mut [SealJob<'_>]) -> Result<()> {
        self.0.encrypt_batch(jobs).map_err(lib_error)
    }

    /// Opens every job, all or nothing.
    pub(crate) fn open_batch(&self, jobs: &mut [OpenJob<'_>]) -> Result<()> {
        self.0.decrypt_batch(jobs).map_err(lib_error)
    }

    /// Opens one message in place; `Ok(false)` when the tag does not match (the buffer then
    /// holds its ciphertext again).
    pub(crate) fn open(&self, nonce: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<bool> {
        match self.0.decrypt_detached(nonce, &[], buf, tag) {
            Ok(()) => Ok(true),
            Err(gcmx::GcmError::Authentication) => Ok(false),
            Err(other) => Err(lib_error(other)),
        }
    }

    /// Seals one message in place.
    pub(crate) fn seal(&self, nonce: &[u8], buf: &mut [u8], tag: &mut [u8]) -> Result<()> {
        self.0
            .encrypt_detached(nonce, &[], buf, tag)
            .map_err(lib_error)
    }
}

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
