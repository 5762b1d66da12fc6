//! # gcmx
//!
//! AES-GCM for Rust services, with serial and multi-core CPU backends and (feature `cuda`) an
//! NVIDIA GPU backend whose GHASH runs on the `clmad` carry-less multiply-accumulate instruction.
//!
//! Two ways in:
//! - the typed API, a drop-in for the `aes-gcm` 0.11 crate: [`Aes128Gcm`], [`Aes256Gcm`] (and
//!   [`Aes192Gcm`]) and the generic [`AesGcm`], implementing the RustCrypto [`aead`] 0.6 traits,
//!   with `aes-gcm`'s root items, feature names and behaviour;
//! - the runtime-sized [`Gcm`], for key, nonce and tag sizes that are data, with a choice of
//!   [`Backend`] and batches; its errors are [`GcmError`].
//!
//! ```
//! # #[cfg(feature = "getrandom")] {
//! use gcmx::{
//!     aead::{Aead, AeadCore, Generate, Key, KeyInit},
//!     Aes256Gcm, Nonce,
//! };
//!
//! let key = Key::<Aes256Gcm>::generate();
//! let cipher = Aes256Gcm::new(&key);
//! let nonce = Nonce::generate(); // MUST be unique per message
//! let ciphertext = cipher.encrypt(&nonce, b"plaintext message".as_ref()).unwrap();
//! let plaintext = cipher.decrypt(&nonce, ciphertext.as_ref()).unwrap();
//! assert_eq!(&plaintext, b"plaintext message");
//! # }
//! ```
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
//! # Ok::<(), gcmx::GcmError>(())
//! ```
//!
//! ## Safety of the API
//!
//! Nothing here exports key bytes, raw AES blocks, the GHASH key or unauthenticated plaintext.
//! A failed decryption returns an error and leaves the buffer holding the ciphertext it was
//! given. Short tags (4 and 8 bytes) need the `hazmat` feature, as in `aes-gcm`; that feature
//! also adds the `hazmat` module, whose operations do not authenticate (GCM's keystream from any
//! block of a message, a ciphertext's tag without decrypting it).
//!
//! A key type cannot be copied, so its round keys are wiped exactly once, when it is dropped:
//!
//! ```compile_fail
//! fn needs_copy<T: Copy>() {}
//! needs_copy::<gcmx::Aes256Gcm>();
//! ```
//!
//! Without `hazmat`, a 4-byte tag does not compile in the typed API:
//!
#![cfg_attr(not(feature = "hazmat"), doc = "```compile_fail")]
#![cfg_attr(feature = "hazmat", doc = "```")]
//! use gcmx::aead::consts::{U4, U12};
//! use gcmx::aead::KeyInit;
//! let c = gcmx::AesGcm::<gcmx::aes::Aes128, U12, U4>::new(&[0u8; 16].into());
//! let _ = gcmx::aead::AeadInOut::encrypt_inout_detached(&c, &[0u8; 12].into(), b"", (&mut [0u8; 0][..]).into());
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use aead::{self, AeadCore, AeadInOut, Error, Key, KeyInit, KeySizeUser};
#[cfg(feature = "aes")]
#[cfg_attr(docsrs, doc(cfg(feature = "aes")))]
pub use gcmx_core::aes;
/// Operations that do not authenticate: GCM's keystream from any block of a message and a
/// ciphertext's tag without decrypting it (reading part of a large message), and the short tags.
/// Misuse releases unauthenticated plaintext or allows forgeries; read each item's hazards.
#[cfg(feature = "hazmat")]
#[cfg_attr(docsrs, doc(cfg(feature = "hazmat")))]
pub use gcmx_core::hazmat;
pub use gcmx_core::{A_MAX, AesGcm, Nonce, P_MAX, Tag, TagSize};
#[cfg(feature = "aes")]
#[cfg_attr(docsrs, doc(cfg(feature = "aes")))]
pub use gcmx_core::{Aes128Gcm, Aes192Gcm, Aes256Gcm};
pub use gcmx_core::{DeviceError, Error as GcmError, OpenJob, SealJob};

mod backend;
pub use backend::Backend;

use gcmx_core::backend::{self as framing, KeyedEngine, ParallelEngine, SerialEngine};

/// The CUDA backend: device information, device-resident buffers, keyrings and batches.
///
/// The kernels ship prebuilt inside the crate and the driver (`libcuda.so.1`) is loaded when the GPU is
/// first asked for, so a binary built with `cuda` starts anywhere: where no driver or device can be
/// used, [`device_info(0)`](cuda::device_info) is an error, [`Backend::Cuda`] reports
/// [`GcmError::BackendUnavailable`] with the reason, and [`Backend::Auto`] stays on the CPU.
///
/// ```
/// use gcmx::{Backend, Gcm, GcmError};
/// match Gcm::with_backend(&[1u8; 32], Backend::Cuda) {
///     Ok(_) => assert!(gcmx::cuda::device_info(0).is_ok()),
///     Err(GcmError::BackendUnavailable(why)) => println!("CPU only: {why}"),
///     Err(e) => panic!("{e}"),
/// }
/// ```
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub mod cuda {
    pub use gcmx_cuda::*;
}

/// AES-GCM with sizes chosen at run time: a 16-, 24- or 32-byte key, any nonce of at least one
/// byte (12 is the fast path), tags of 12 to 16 bytes (also 4 and 8 with the `hazmat` feature).
///
/// Key material is wiped on drop. Decryption compares tags in constant time; on a wrong tag the
/// buffer is given back holding its ciphertext, never plaintext.
pub struct Gcm {
    engine: KeyedEngine,
    backend: Backend,
}

impl Gcm {
    /// A `Gcm` on [`Backend::Auto`].
    ///
    /// ```
    /// assert!(gcmx::Gcm::new(&[0u8; 16]).is_ok());
    /// assert_eq!(gcmx::Gcm::new(&[0u8; 17]).err(), Some(gcmx::GcmError::KeyLength(17)));
    /// ```
    #[inline]
    pub fn new(key: &[u8]) -> Result<Gcm, GcmError> {
        Gcm::with_backend(key, Backend::Auto)
    }

    /// A `Gcm` on the given backend. [`GcmError::KeyLength`] for a key that is not 16, 24 or 32
    /// bytes; [`GcmError::BackendUnavailable`] when the backend cannot run here.
    ///
    /// ```
    /// use gcmx::{Backend, Gcm};
    /// let gcm = Gcm::with_backend(&[1u8; 24], Backend::CpuParallel).unwrap();
    /// assert_eq!(gcm.backend(), Backend::CpuParallel);
    /// ```
    // Inline, so that the `Gcm` is built where the caller keeps it. Returned through memory (it
    // is several words), its fields were written with 8-byte stores and the caller's moves of it
    // read them 16 bytes at a time: loads that take nothing from those stores and wait until
    // every store of the key's set-up has reached the cache (benches/results.md).
    #[inline]
    pub fn with_backend(key: &[u8], backend: Backend) -> Result<Gcm, GcmError> {
        let engine = match backend {
            Backend::Cpu => KeyedEngine::new(key, |_| Ok(Box::new(SerialEngine)))?,
            Backend::CpuParallel => KeyedEngine::new(key, |_| Ok(Box::new(ParallelEngine::new())))?,
            Backend::Auto => KeyedEngine::new(key, backend::auto_engine)?,
            #[cfg(feature = "cuda")]
            Backend::Cuda => {
                KeyedEngine::new(key, |raw| Ok(Box::new(gcmx_cuda::CudaEngine::new(raw, 0)?)))?
            }
        };
        Ok(Gcm { engine, backend })
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
    /// Errors: [`GcmError::NonceLength`], [`GcmError::TagLength`],
    /// [`GcmError::PlaintextTooLong`], [`GcmError::AadTooLong`] (then nothing was touched), or a
    /// device failure ([`GcmError::Device`]; then `buf` is zeroed, as it may hold part-encrypted
    /// data).
    #[inline]
    pub fn encrypt_detached(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &mut [u8],
    ) -> Result<(), GcmError> {
        framing::seal(&self.engine, nonce, aad, buf, tag)
    }

    /// Decrypt `buf` in place after checking `tag` (its length is the tag length).
    ///
    /// On a wrong tag this returns [`GcmError::Authentication`] and `buf` holds the ciphertext
    /// it was given, so another key can be tried on it. On a device failure `buf` is zeroed.
    /// It never holds unauthenticated plaintext.
    ///
    /// ```
    /// let gcm = gcmx::Gcm::new(&[3u8; 16]).unwrap();
    /// let mut buf = *b"secret";
    /// let mut tag = [0u8; 12];
    /// gcm.encrypt_detached(b"nonce", b"", &mut buf, &mut tag).unwrap();
    /// let ct = buf;
    /// tag[0] ^= 1;
    /// assert_eq!(gcm.decrypt_detached(b"nonce", b"", &mut buf, &tag), Err(gcmx::GcmError::Authentication));
    /// assert_eq!(buf, ct);
    /// ```
    #[inline]
    pub fn decrypt_detached(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8],
    ) -> Result<(), GcmError> {
        framing::open(&self.engine, nonce, aad, buf, tag)
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
    pub fn encrypt_batch(&self, jobs: &mut [SealJob<'_>]) -> Result<(), GcmError> {
        framing::seal_batch(&self.engine, jobs)
    }

    /// Decrypt many messages: all or nothing. If any tag is wrong, every buffer holds its
    /// ciphertext again and the call returns [`GcmError::Authentication`].
    pub fn decrypt_batch(&self, jobs: &mut [OpenJob<'_>]) -> Result<(), GcmError> {
        framing::open_batch(&self.engine, jobs)
    }
}

impl core::fmt::Debug for Gcm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Gcm")
            .field("key", self.engine.key())
            .field("backend", &self.backend)
            .finish()
    }
}

/// README.md's Rust blocks run as doctests, so the front door stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
