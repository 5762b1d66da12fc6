//! The part of `gcmx`'s API that gcmx-cuda's tests and benchmark drive, `Gcm` on a backend, made
//! here from gcmx-core's framing (the one every backend runs: `gcmx::Gcm` is the same
//! `KeyedEngine` behind the same calls), so that gcmx-cuda needs no dependency on the crate above
//! it. Included with `#[path]` as a module named `gcmx`, so the tests read as a user's code.

#![allow(dead_code, unused_imports)]

pub(crate) use gcmx_core::{Error as GcmError, OpenJob, SealJob};
pub(crate) use gcmx_cuda as cuda;

use gcmx_core::backend::{self as framing, KeyedEngine, ParallelEngine, SerialEngine};

/// Where the work runs: one CPU core, all of them, or the GPU (device 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// One core.
    Cpu,
    /// Every core (rayon).
    CpuParallel,
    /// The GPU: `gcmx_cuda::CudaEngine` on device 0.
    Cuda,
}

/// AES-GCM with sizes chosen at run time, as `gcmx::Gcm`.
pub(crate) struct Gcm {
    engine: KeyedEngine,
    backend: Backend,
}

impl Gcm {
    /// A `Gcm` for `key` on `backend`.
    pub(crate) fn with_backend(key: &[u8], backend: Backend) -> Result<Gcm, GcmError> {
        let engine = match backend {
            Backend::Cpu => KeyedEngine::new(key, |_| Ok(Box::new(SerialEngine)))?,
            Backend::CpuParallel => KeyedEngine::new(key, |_| Ok(Box::new(ParallelEngine::new())))?,
            Backend::Cuda => {
                KeyedEngine::new(key, |raw| Ok(Box::new(gcmx_cuda::CudaEngine::new(raw, 0)?)))?
            }
        };
        Ok(Gcm { engine, backend })
    }

    /// The backend this `Gcm` was built with.
    pub(crate) fn backend(&self) -> Backend {
        self.backend
    }

    /// Encrypt `buf` in place; `tag.len()` is the tag length.
    pub(crate) fn encrypt_detached(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), GcmError> {
        framing::seal(&self.engine, nonce, aad, buf, tag)
    }

    /// Decrypt `buf` in place after checking `tag`.
    pub(crate) fn decrypt_detached(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), GcmError> {
        framing::open(&self.engine, nonce, aad, buf, tag)
    }

    /// Encrypt many messages in one call.
    pub(crate) fn encrypt_batch(&self, jobs: &mut [SealJob<'_>]) -> Result<(), GcmError> {
        framing::seal_batch(&self.engine, jobs)
    }

    /// Decrypt many messages, all or nothing.
    pub(crate) fn decrypt_batch(&self, jobs: &mut [OpenJob<'_>]) -> Result<(), GcmError> {
        framing::open_batch(&self.engine, jobs)
    }
}
