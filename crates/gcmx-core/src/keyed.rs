//! [`KeyedEngine`]: an engine and the key material it was built for, as one object. The framing
//! takes nothing else, so J0 and the engine's keystream always come from the same key.

use crate::Error;
use crate::engine::GcmEngine;
use crate::key::KeyMaterial;

/// How [`KeyedEngine::new`] makes its engine, from the raw key bytes its key material is made
/// from. The CPU engines ignore them (they run on each message's key material); an engine with
/// key material of its own (gcmx-cuda's, on the device) keys it from these bytes.
///
/// A plain function, not a closure: it holds no state, so the engine it returns can only be
/// keyed from what [`KeyedEngine::new`] hands it.
pub type BuildEngine = fn(&[u8]) -> Result<Box<dyn GcmEngine>, Error>;

/// A [`GcmEngine`] bound to its key: what the framing entry points
/// ([`seal`](crate::backend::seal), [`open`](crate::backend::open) and their batch forms) run.
///
/// The framing derives J0 from the key material and hands the message to the engine; both come
/// from this one object, made from one raw key, so a caller cannot pair key material with an
/// engine keyed otherwise.
///
/// ```
/// use gcmx_core::backend::{KeyedEngine, SerialEngine, open, seal};
/// let keyed = KeyedEngine::new(&[3u8; 16], |_| Ok(Box::new(SerialEngine)))?;
/// let mut buf = *b"attack at dawn";
/// let mut tag = [0u8; 16];
/// seal(&keyed, &[1u8; 12], b"", &mut buf, &mut tag)?;
/// open(&keyed, &[1u8; 12], b"", &mut buf, &tag)?;
/// assert_eq!(&buf, b"attack at dawn");
/// # Ok::<(), gcmx_core::Error>(())
/// ```
///
/// An engine keyed from another key does not go in: `build` cannot capture it.
///
/// ```compile_fail,E0308
/// use gcmx_core::backend::{KeyedEngine, ParallelEngine};
/// let other = [9u8; 16];
/// let keyed = KeyedEngine::new(&[3u8; 16], move |_| {
///     let _ = other;
///     Ok(Box::new(ParallelEngine::new()))
/// })?;
/// # Ok::<(), gcmx_core::Error>(())
/// ```
pub struct KeyedEngine {
    /// Held here, not shared: the CPU engines hold nothing and find it in each message, so a
    /// `Gcm` on the CPU is the key material and no allocation besides it.
    key: KeyMaterial,
    engine: Box<dyn GcmEngine>,
    /// [`GcmEngine::serial_below`] of `engine`, asked once: the framing runs shorter messages on
    /// `key` itself.
    serial_below: usize,
}

impl KeyedEngine {
    /// Key material for `raw` (16, 24 or 32 bytes; else [`Error::KeyLength`]) and the engine
    /// `build` makes for the same key (its error is returned as it is).
    #[inline]
    pub fn new(raw: &[u8], build: BuildEngine) -> Result<KeyedEngine, Error> {
        KeyedEngine::with_material(KeyMaterial::new(raw)?, raw, build)
    }

    /// Like [`KeyedEngine::new`] with the key material on the generic path (the `aes` and
    /// `ghash` crates) whatever the CPU: tests compare the paths with it.
    pub fn new_generic(raw: &[u8], build: BuildEngine) -> Result<KeyedEngine, Error> {
        KeyedEngine::with_material(KeyMaterial::new_generic(raw)?, raw, build)
    }

    #[inline]
    fn with_material(
        key: KeyMaterial,
        raw: &[u8],
        build: BuildEngine,
    ) -> Result<KeyedEngine, Error> {
        let engine = build(raw)?;
        let serial_below = engine.serial_below();
        Ok(KeyedEngine {
            key,
            engine,
            serial_below,
        })
    }

    /// The key material, the one the framing derives J0 from (for diagnostics: its key length,
    /// whether the CPU engines run the stitched kernels).
    pub fn key(&self) -> &KeyMaterial {
        &self.key
    }

    /// The engine.
    pub(crate) fn engine(&self) -> &dyn GcmEngine {
        self.engine.as_ref()
    }

    /// Whether the framing runs a message of `len` bytes on the key material itself, on the
    /// calling thread (see [`GcmEngine::serial_below`]).
    #[inline]
    pub(crate) fn runs_serially(&self, len: usize) -> bool {
        len < self.serial_below
    }

    /// The engine's name (see [`GcmEngine::name`]).
    pub fn name(&self) -> &'static str {
        self.engine.name()
    }
}

impl core::fmt::Debug for KeyedEngine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyedEngine")
            .field("key", &self.key)
            .field("engine", &self.engine.name())
            .finish()
    }
}
