//! What gcmx's backends build on, in one module: the engine trait and the CPU engines, the
//! framing entry points and their checks, key material, the counter, and the GF(2^128) pieces a
//! backend that hashes runs of blocks on its own joins them with.
//!
//! Its users are the `gcmx` crate (which composes the CPU engines and, with its `cuda` feature,
//! the GPU engine behind `gcmx::Gcm`) and `gcmx-cuda` (an engine whose host side checks inputs,
//! derives J0 and counters, and joins the GPU's partial hashes into tags). Applications use the
//! `gcmx` crate instead.
//!
//! Nothing here opens without checking the tag: an engine runs only on a [`Message`], which only
//! the framing ([`seal`], [`open`], [`seal_batch`], [`open_batch`]) makes; it checks the inputs
//! first and compares the tag before anything is returned. Key material is made only from the
//! raw key and never gives it back; what a backend gets from [`KeyMaterial`] (J0, the powers of
//! H, tags joined from partial hashes) are functions of that key its holder could compute anyway.
//!
//! A backend seals a message through its [`KeyedEngine`]:
//!
//! ```
//! use gcmx_core::backend::{KeyedEngine, ParallelEngine, seal};
//! let keyed = KeyedEngine::new(&[7u8; 32], |_| Ok(Box::new(ParallelEngine::new())))?;
//! let mut buf = vec![0u8; 1000];
//! let mut tag = [0u8; 16];
//! seal(&keyed, &[1u8; 12], b"header", &mut buf, &mut tag)?;
//! assert_eq!(keyed.name(), "cpu-parallel");
//! # Ok::<(), gcmx_core::Error>(())
//! ```

// The engine trait and what an engine is handed.

/// Whether an engine seals or opens: an argument of [`GcmEngine::crypt`], and the direction a
/// GPU launch runs in.
pub use crate::direction::Direction;
/// The trait an engine implements: gcmx-cuda's `CudaEngine` and the engines `gcmx` composes
/// (its GPU offload for `Backend::Auto`) implement it.
pub use crate::engine::GcmEngine;
/// What an engine is handed: J0, the associated data and the buffer of one message.
pub use crate::engine::Message;

// The CPU engines.

/// The chunk size [`ParallelEngine`] splits a message into: gcmx's benchmarks time the same
/// split.
pub use crate::cipher::parallel_chunk;
/// Whether this CPU runs the stitched kernels (x86-64 or aarch64): gcmx-cuda weighs the CPU
/// against the GPU with it when it chooses where `Backend::Auto` runs a message.
pub use crate::cipher::stitched_supported;
/// The message size from which [`AutoCpuEngine`] runs on all cores: gcmx's tests and
/// benchmarks measure around it.
pub use crate::engine::AUTO_PARALLEL_MIN;
/// The CPU engine of `gcmx::Backend::Auto`, and the CPU side of its GPU offload.
pub use crate::engine::AutoCpuEngine;
/// The all-cores CPU engine: `gcmx::Backend::CpuParallel`.
pub use crate::engine::ParallelEngine;
/// The one-thread CPU engine: `gcmx::Backend::Cpu`.
pub use crate::engine::SerialEngine;

// Keys.

/// An AES key expanded with its GHASH key: every backend keys from it (J0, the powers of H, the
/// tag from partial hashes).
pub use crate::key::KeyMaterial;
/// How [`KeyedEngine::new`] makes the engine for its key.
pub use crate::keyed::BuildEngine;
/// An engine bound to its key material: what the framing entry points take.
pub use crate::keyed::KeyedEngine;

// The framing.

/// One message of a batch to open (also at the crate root, for applications).
pub use crate::frame::OpenJob;
/// One message of a batch to seal (also at the crate root, for applications).
pub use crate::frame::SealJob;
/// The tag lengths the framing accepts, for a backend that validates tags of a batch in device
/// memory.
pub use crate::frame::TAG_LENGTHS;
/// The input checks of the framing, for a backend's own entry points (gcmx-cuda's
/// device-resident calls, keyrings and batches) to refuse what the framing refuses.
pub use crate::frame::check;
/// The length limits alone, for a backend's entry points that take no nonce or tag.
pub use crate::frame::check_lengths;
/// Open one message through a [`KeyedEngine`]: `gcmx::Gcm::decrypt_detached`.
pub use crate::frame::open;
/// Open a batch through a [`KeyedEngine`], all or nothing: `gcmx::Gcm::decrypt_batch`.
pub use crate::frame::open_batch;
/// Seal one message through a [`KeyedEngine`]: `gcmx::Gcm::encrypt_detached`.
pub use crate::frame::seal;
/// Seal a batch through a [`KeyedEngine`]: `gcmx::Gcm::encrypt_batch`.
pub use crate::frame::seal_batch;
/// gcmx's forgery policy: what a refused open leaves in a buffer opened in place.
pub use crate::refusal::Refused;
/// The constant-time tag comparison, for a backend that checks tags on its own entry points.
pub use crate::tag::tag_matches;

// The counter and the field.

/// The GHASH value of a run of blocks: gcmx-cuda's kernels hash runs on their own.
pub use crate::combine::Partial;
/// The powers-of-H join of partial hashes: how gcmx-cuda joins the runs its kernels hash.
pub use crate::combine::tree_reduce;
/// GCM's counter arithmetic (inc32): a backend that builds counter blocks itself (gcmx-cuda's
/// launch parameters) starts from J0 here.
pub use crate::counter::Counter;
/// GHASH's key in the POLYVAL domain and its powers: gcmx-cuda uploads power tables made from
/// it.
pub use crate::field::HashKey;
/// The Montgomery form of one: gcmx-cuda's kernels are built against this constant.
pub use crate::field::MONT_ONE;
/// The POLYVAL-domain product: gcmx-cuda's host side checks its power tables with it.
pub use crate::field::dot;

// Errors.

/// A failed device operation, inside [`Error::Device`] (also at the crate root).
pub use crate::error::DeviceError;
/// The error of every backend call (`gcmx::GcmError`; also at the crate root).
pub use crate::error::Error;
