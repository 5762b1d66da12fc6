#![doc = "gcmx core: the GF(2^128) math, GCM framing, the backend trait and the CPU backends of"]
#![doc = "[gcmx](https://crates.io/crates/gcmx). Most users want the `gcmx` crate, which re-exports"]
#![doc = "everything here and adds the runtime-sized `Gcm` and the CUDA backend."]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aead_impl;
pub mod cipher;
pub mod combine;
mod ctr;
pub mod engine;
mod error;
pub mod field;
pub mod frame;
pub mod key;

pub use aead;
pub use aead_impl::{Aes128Gcm, Aes192Gcm, Aes256Gcm, AesGcm, Key, Nonce, Tag, TagSize};
pub use aes;
pub use engine::{EngineJob, GcmEngine};
pub use error::Error;
pub use frame::{OpenJob, SealJob};
pub use key::KeyMaterial;
