//! gcmx-core: the implementation crate of [gcmx](https://crates.io/crates/gcmx): the GF(2^128)
//! math, GCM framing, the typed `aead` API, the backend trait and the CPU backends.
//!
//! Its public surface has two parts:
//!
//! - at the root, what applications see through `gcmx`: the typed API ([`Aes128Gcm`],
//!   [`Aes192Gcm`], [`Aes256Gcm`], the generic [`AesGcm`], [`Nonce`], [`Tag`], [`TagSize`]), the
//!   error of the runtime-sized API ([`Error`], [`DeviceError`]), the batch jobs ([`SealJob`],
//!   [`OpenJob`]), the length limits ([`A_MAX`], [`P_MAX`]), and the [`aead`] and [`aes`] crates;
//! - [`backend`], what gcmx's backends build on: the engine trait, the CPU engines, the framing
//!   entry points, key material, the counter and the GF(2^128) pieces.
//! - `hazmat` (feature `hazmat`): operations that do not authenticate, for callers that check
//!   the tag apart (GCM's keystream from any block of a message, a ciphertext's tag).
//!
//! Applications use the `gcmx` crate, which re-exports the first and third parts. The second carries no
//! hazard to a holder of the raw key: key material never gives the key back, its other values
//! are functions of the key that holder could compute anyway, and engines can only be driven by
//! the framing, which never releases unauthenticated plaintext.
//!
//! ## Features
//!
//! - `alloc` (default): `aead`'s allocating API.
//! - `hazmat`: the `hazmat` module, operations that do not authenticate (GCM's keystream from
//!   any block of a message, a ciphertext's tag without decrypting), and the short tags of
//!   SP 800-38D appendix C (4 and 8 bytes) in the typed API and the framing, whose usage limits
//!   the caller must keep. No backend needs it: gcmx-cuda and `gcmx` build on [`backend`] alone.
#![forbid(unsafe_code)]

mod aead_impl;
pub mod backend;
mod chunks;
mod cipher;
mod combine;
mod counter;
mod ctr;
mod direction;
mod engine;
mod error;
mod field;
mod frame;
#[cfg(feature = "hazmat")]
pub mod hazmat;
mod key;
mod keyed;
mod refusal;
mod tag;
mod wipe;

pub use aead;
pub use aead_impl::{Aes128Gcm, Aes192Gcm, Aes256Gcm, AesGcm, Nonce, Tag, TagSize};
pub use aes;
pub use error::{DeviceError, Error};
pub use frame::{A_MAX, OpenJob, P_MAX, SealJob};
