//! # gcmx
//!
//! AES-GCM for Rust services, with serial and multi-core CPU backends and (feature `cuda`) an
//! NVIDIA GPU backend whose GHASH runs on the `clmad` carry-less multiply-accumulate instruction.
//!
//! Two ways in:
//! - the typed API, a drop-in for the `aes-gcm` 0.11 crate: [`Aes128Gcm`], [`Aes192Gcm`],
//!   [`Aes256Gcm`] and the generic [`AesGcm`], implementing the RustCrypto [`aead`] 0.6 traits;
//! - the runtime-sized [`Gcm`], for key, nonce and tag sizes that are data, with a choice of
//!   [`Backend`].
//!
//! ```
//! use gcmx::{Backend, Gcm};
//! let gcm = Gcm::with_backend(&[0x42; 32], Backend::Auto)?;
//! let nonce = [7u8; 12]; // never reuse a nonce under one key
//! let mut buf = *b"attack at dawn";
//! let mut tag = [0u8; 16];
//! gcm.encrypt_detached(&nonce, b"header", &mut buf, &mut tag)?;
//! gcm.decrypt_detached(&nonce, b"header", &mut buf, &tag)?;
//! assert_eq!(&buf, b"attack at dawn");
//! # Ok::<(), gcmx::Error>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::sync::Arc;

use gcmx_core::engine::{AutoCpuEngine, ParallelEngine, SerialEngine};
pub use gcmx_core::{
    Aes128Gcm, Aes192Gcm, Aes256Gcm, AesGcm, Error, GcmEngine, Key, KeyMaterial, Nonce, OpenJob,
    SealJob, Tag, TagSize, aead, aes,
};

/// The CUDA backend: device information, device-resident and batch APIs.
#[cfg(feature = "cuda")]
pub use gcmx_cuda as cuda;

/// Where the bulk work of a [`Gcm`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// The CPU, serially below a measured size and on all cores above it; with the `cuda`
    /// feature, messages above the GPU's offload threshold go to the GPU when one is present.
    #[default]
    Auto,
    /// One CPU thread.
    Cpu,
    /// All CPU cores (rayon).
    CpuParallel,
    /// The GPU (feature `cuda`): an error at construction when there is no driver or device.
    #[cfg(feature = "cuda")]
    Cuda,
}

/// AES-GCM with sizes chosen at run time: a 16-, 24- or 32-byte key, any nonce of at least one
/// byte (12 is the fast path), tags of 4, 8, 12, 13, 14, 15 or 16 bytes.
///
/// Key material is zeroized on drop. Decryption compares tags in constant time and never leaves
/// unauthenticated plaintext in the buffer.
pub struct Gcm {
    key: Arc<KeyMaterial>,
    engine: Box<dyn GcmEngine>,
    backend: Backend,
}

impl Gcm {
    /// A `Gcm` on [`Backend::Auto`].
    ///
    /// ```
    /// assert!(gcmx::Gcm::new(&[0u8; 16]).is_ok());
    /// assert_eq!(gcmx::Gcm::new(&[0u8; 17]).err(), Some(gcmx::Error::KeyLength(17)));
    /// ```
    pub fn new(key: &[u8]) -> Result<Gcm, Error> {
        Gcm::with_backend(key, Backend::Auto)
    }

    /// A `Gcm` on the given backend.
    ///
    /// ```
    /// use gcmx::{Backend, Gcm};
    /// let gcm = Gcm::with_backend(&[1u8; 24], Backend::CpuParallel).unwrap();
    /// assert_eq!(gcm.backend(), Backend::CpuParallel);
    /// ```
    pub fn with_backend(key: &[u8], backend: Backend) -> Result<Gcm, Error> {
        let key = Arc::new(KeyMaterial::new(key)?);
        let engine: Box<dyn GcmEngine> = match backend {
            Backend::Cpu => Box::new(SerialEngine::new(key.clone())),
            Backend::CpuParallel => Box::new(ParallelEngine::new(key.clone())),
            Backend::Auto => auto_engine(&key),
            #[cfg(feature = "cuda")]
            Backend::Cuda => Box::new(gcmx_cuda::CudaEngine::new(&key)?),
        };
        Ok(Gcm {
            key,
            engine,
            backend,
        })
    }

    /// The backend this `Gcm` was built with.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The engine's name (`"cpu"`, `"cpu-parallel"`, `"auto-cpu"`, …), for diagnostics.
    pub fn engine_name(&self) -> &'static str {
        self.engine.name()
    }

    /// Encrypt `buf` in place and write the tag; `tag.len()` chooses the tag length.
    ///
    /// Errors: [`Error::NonceLength`], [`Error::TagLength`], [`Error::PlaintextTooLong`],
    /// [`Error::AadTooLong`], or a backend failure (then `buf` is zeroed).
    pub fn encrypt_detached(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), Error> {
        gcmx_core::frame::seal(&self.key, self.engine.as_ref(), nonce, aad, buf, tag)
    }

    /// Decrypt `buf` in place after checking `tag` (its length is the tag length).
    ///
    /// On a wrong tag this returns [`Error::Authentication`] and `buf` is zeroed: it never holds
    /// unauthenticated plaintext.
    ///
    /// ```
    /// let gcm = gcmx::Gcm::new(&[3u8; 16]).unwrap();
    /// let mut buf = *b"secret";
    /// let mut tag = [0u8; 12];
    /// gcm.encrypt_detached(b"nonce", b"", &mut buf, &mut tag).unwrap();
    /// tag[0] ^= 1;
    /// assert_eq!(gcm.decrypt_detached(b"nonce", b"", &mut buf, &tag), Err(gcmx::Error::Authentication));
    /// assert_eq!(buf, [0u8; 6]);
    /// ```
    pub fn decrypt_detached(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), Error> {
        gcmx_core::frame::open(&self.key, self.engine.as_ref(), nonce, aad, buf, tag)
    }

    /// Encrypt many independent messages under this key in one call (in parallel on the CPU, as
    /// one batch on the GPU). All inputs are checked before any work starts.
    ///
    /// ```
    /// use gcmx::{Gcm, SealJob};
    /// let gcm = Gcm::new(&[5u8; 32]).unwrap();
    /// let (mut a, mut b) = (*b"first", *b"second");
    /// let (mut ta, mut tb) = ([0u8; 16], [0u8; 16]);
    /// let mut jobs = [
    ///     SealJob { nonce: &[1; 12], aad: b"", buf: &mut a, tag: &mut ta },
    ///     SealJob { nonce: &[2; 12], aad: b"", buf: &mut b, tag: &mut tb },
    /// ];
    /// gcm.encrypt_batch(&mut jobs).unwrap();
    /// ```
    pub fn encrypt_batch(&self, jobs: &mut [SealJob<'_>]) -> Result<(), Error> {
        gcmx_core::frame::seal_batch(&self.key, self.engine.as_ref(), jobs)
    }

    /// Decrypt many messages: all or nothing. If any tag is wrong, every buffer is zeroed and
    /// the call returns [`Error::Authentication`].
    pub fn decrypt_batch(&self, jobs: &mut [OpenJob<'_>]) -> Result<(), Error> {
        gcmx_core::frame::open_batch(&self.key, self.engine.as_ref(), jobs)
    }
}

#[cfg(not(feature = "cuda"))]
fn auto_engine(key: &Arc<KeyMaterial>) -> Box<dyn GcmEngine> {
    Box::new(AutoCpuEngine::new(key.clone()))
}

#[cfg(feature = "cuda")]
fn auto_engine(key: &Arc<KeyMaterial>) -> Box<dyn GcmEngine> {
    let cpu = AutoCpuEngine::new(key.clone());
    match gcmx_cuda::offload_threshold() {
        // A device is present, but this host's cores beat the GPU on host data: stay on the CPU.
        Some(usize::MAX) => Box::new(cpu),
        Some(threshold) => match gcmx_cuda::CudaEngine::new(key) {
            Ok(gpu) => Box::new(Offload {
                cpu,
                gpu,
                threshold,
            }),
            Err(_) => Box::new(cpu),
        },
        None => Box::new(cpu),
    }
}

/// `Auto` with a GPU: messages of `threshold` bytes or more go to the GPU.
#[cfg(feature = "cuda")]
struct Offload {
    cpu: AutoCpuEngine,
    gpu: gcmx_cuda::CudaEngine,
    threshold: usize,
}

#[cfg(feature = "cuda")]
impl GcmEngine for Offload {
    fn name(&self) -> &'static str {
        "auto-offload"
    }
    fn seal(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        if buf.len() >= self.threshold {
            self.gpu.seal(j0, aad, buf)
        } else {
            self.cpu.seal(j0, aad, buf)
        }
    }
    fn open(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        if buf.len() >= self.threshold {
            self.gpu.open(j0, aad, buf)
        } else {
            self.cpu.open(j0, aad, buf)
        }
    }
}

impl core::fmt::Debug for Gcm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Gcm")
            .field("key", &self.key)
            .field("backend", &self.backend)
            .finish()
    }
}
