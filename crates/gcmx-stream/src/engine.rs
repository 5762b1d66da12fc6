//! Every use of the `gcmx` library by this crate, in one place: the engine for a file key,
//! batch sealing and opening, one-segment sealing and opening.

use crate::error::{Error, ErrorKind, Result};

pub(crate) use gcmx::{Backend, OpenJob, SealJob};

/// An AES-GCM engine for one file key.
pub(crate) struct Engine {
    gcm: gcmx::Gcm,
    /// The same key on one core, where the engine is the CPU's: segments that this crate
    /// sends to rayon's pool itself, each copied and sealed in one task ([`Engine::seal_copying`]).
    serial: Option<gcmx::Gcm>,
}

/// A segment to seal from a copy: `src` is copied into `buf`, which is then sealed in place.
pub(crate) struct CopySeal<'a> {
    pub(crate) nonce: &'a [u8],
    /// The plaintext, or `None` when `buf` already holds it.
    pub(crate) src: Option<&'a [u8]>,
    pub(crate) buf: &'a mut [u8],
    pub(crate) tag: &'a mut [u8],
}

/// Why opening failed.
pub(crate) enum OpenError {
    /// A tag did not match.
    Authentication,
    /// Anything else (a device failure, a bad length).
    Other(Error),
}

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
        let gcm = gcmx::Gcm::with_backend(key, backend).map_err(lib_error)?;
        // `Auto` may send large messages to the GPU ("auto-offload"): only engines that stay
        // on the CPU get a serial twin.
        let cpu = matches!(gcm.engine_name(), "cpu" | "cpu-parallel" | "auto-cpu");
        let serial = if cpu {
            Some(gcmx::Gcm::with_backend(key, Backend::Cpu).map_err(lib_error)?)
        } else {
            None
        };
        Ok(Engine { gcm, serial })
    }

    /// Whether [`Engine::seal_copying`] runs here.
    pub(crate) fn can_seal_copying(&self) -> bool {
        self.serial.is_some()
    }

    /// Seals every job on rayon's pool, each copied from its source in the task that seals
    /// it: the plaintext is read from memory once and sealed from the cache, and the copy
    /// runs on every core instead of the caller's alone. Only where
    /// [`Engine::can_seal_copying`]; on failure the buffers may hold plaintext (the caller
    /// wipes them).
    pub(crate) fn seal_copying(&self, jobs: &mut [CopySeal<'_>]) -> Result<()> {
        use rayon::prelude::*;
        let Some(serial) = &self.serial else {
            return Err(Error::new(
                ErrorKind::Crypto,
                "copying seal asked of an engine without a CPU path",
            ));
        };
        jobs.par_iter_mut().with_max_len(1).try_for_each(|j| {
            if let Some(src) = j.src {
                j.buf.copy_from_slice(src);
            }
            serial
                .encrypt_detached(j.nonce, &[], j.buf, j.tag)
                .map_err(lib_error)
        })
    }

    /// Whether the engine is the GPU's (whose every call costs a transfer and a wait).
    pub(crate) fn on_gpu(&self) -> bool {
        is_gpu(self.gcm.backend())
    }

    /// The library's name of the engine that runs (for `GCMX_TRACE`).
    pub(crate) fn engine_name(&self) -> &'static str {
        self.gcm.engine_name()
    }

    /// Seals every job (in parallel or as one GPU batch).
    pub(crate) fn seal_batch(&self, jobs: &mut [SealJob<'_>]) -> Result<()> {
        self.gcm.encrypt_batch(jobs).map_err(lib_error)
    }

    /// Opens every job, all or nothing. On a wrong tag every buffer holds its ciphertext again
    /// (so single jobs can be opened again to find the one that failed); on any other failure
    /// the buffers are zeroed.
    pub(crate) fn open_batch(
        &self,
        jobs: &mut [OpenJob<'_>],
    ) -> std::result::Result<(), OpenError> {
        self.gcm.decrypt_batch(jobs).map_err(|e| match e {
            gcmx::GcmError::Authentication => OpenError::Authentication,
            other => OpenError::Other(lib_error(other)),
        })
    }

    /// Opens one message in place; `Ok(false)` when the tag does not match (the buffer then
    /// holds its ciphertext again).
    pub(crate) fn open(&self, nonce: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<bool> {
        match self.gcm.decrypt_detached(nonce, &[], buf, tag) {
            Ok(()) => Ok(true),
            Err(gcmx::GcmError::Authentication) => Ok(false),
            Err(other) => Err(lib_error(other)),
        }
    }

    /// Seals one message in place.
    #[cfg(test)]
    pub(crate) fn seal(&self, nonce: &[u8], buf: &mut [u8], tag: &mut [u8]) -> Result<()> {
        self.gcm
            .encrypt_detached(nonce, &[], buf, tag)
            .map_err(lib_error)
    }
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
