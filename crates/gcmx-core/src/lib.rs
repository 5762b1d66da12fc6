//! gcmx-core: the implementation crate of [gcmx](https://crates.io/crates/gcmx): the GF(2^128)
//! math, GCM framing, the typed `aead` API, the backend trait and the CPU backends.
//!
//! Applications use the `gcmx` crate, which re-exports what they need. This crate's other public
//! items serve gcmx's backend crates (`gcmx-cuda`); they carry no hazard a holder of the raw key
//! could not compute anyway: no key bytes, AES blocks or H leave a keyed object, and engines can
//! only be driven by the framing here, which never releases unauthenticated plaintext.
#![forbid(unsafe_code)]

pub mod aead_impl;
mod chunks;
pub mod cipher;
pub mod combine;
mod counter;
mod ctr;
mod direction;
pub mod engine;
mod error;
pub mod field;
pub mod frame;
pub mod key;

pub use aead;
pub use aead_impl::{Aes128Gcm, Aes192Gcm, Aes256Gcm, AesGcm, Nonce, Tag, TagSize};
pub use aes;
pub use counter::Counter;
pub use direction::Direction;
pub use engine::{GcmEngine, Message};
pub use error::{DeviceError, Error};
pub use frame::{A_MAX, OpenJob, P_MAX, SealJob};
pub use key::KeyMaterial;
