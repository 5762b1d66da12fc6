//! The backend trait and the two CPU engines.

use rayon::prelude::*;
use zeroize::Zeroize;

use crate::Error;
use crate::cipher::Io;
use crate::direction::Direction;
use crate::key::{KeyMaterial, with_cipher};
use crate::wipe::wipe16;

/// One message as gcmx-core's framing hands it to an engine: the key material J0 was derived
/// with, J0, the associated data, and the buffer to transform in place.
///
/// Only the framing ([`seal`](crate::backend::seal), [`open`](crate::backend::open) and their
/// batch forms) creates a `Message`: it checks the inputs first, and after an engine has opened
/// a message it compares the tag and, on a mismatch, turns the buffer back into the ciphertext
/// before it returns. So no code outside gcmx-core can run an
/// engine on its own, and no engine can release unauthenticated plaintext. J0 (secret for
/// nonces that are not 12 bytes) is wiped when the message is dropped.
///
/// Code outside gcmx-core cannot make one, so it cannot run an engine's open on its own:
///
/// ```compile_fail
/// let mut buf = [0u8; 16];
/// let msg = gcmx_core::backend::Message::new([0u8; 16], b"", &mut buf);
/// ```
pub struct Message<'a> {
    /// The key material of the [`KeyedEngine`](crate::backend::KeyedEngine) the framing runs:
    /// the CPU engines run on it, so their keystream and J0 come from one key by construction.
    key: &'a KeyMaterial,
    j0: [u8; 16],
    /// The 12-byte nonce J0 was built from (`nonce ‖ 0^31 ‖ 1`), if it was: J0 is then public,
    /// and the stitched kernels build it from the nonce themselves.
    nonce96: Option<&'a [u8; 12]>,
    aad: &'a [u8],
    buf: &'a mut [u8],
}

impl<'a> Message<'a> {
    /// A message under `key` whose J0 is `j0` (tests: J0 of any value).
    #[cfg(test)]
    pub(crate) fn new(
        key: &'a KeyMaterial,
        j0: [u8; 16],
        aad: &'a [u8],
        buf: &'a mut [u8],
    ) -> Self {
        Message {
            key,
            j0,
            nonce96: None,
            aad,
            buf,
        }
    }

    /// A message under `nonce`, its J0 derived with `key`.
    pub(crate) fn with_nonce(
        key: &'a KeyMaterial,
        nonce: &'a [u8],
        aad: &'a [u8],
        buf: &'a mut [u8],
    ) -> Self {
        Message {
            key,
            j0: key.j0(nonce),
            nonce96: nonce.try_into().ok(),
            aad,
            buf,
        }
    }

    /// The key material J0 was derived with.
    pub(crate) fn key(&self) -> &'a KeyMaterial {
        self.key
    }

    /// The 12-byte nonce J0 was built from, if it was.
    pub(crate) fn nonce96(&self) -> Option<&'a [u8; 12]> {
        self.nonce96
    }

    /// The pre-counter block J0 (the first keystream block uses `inc32(J0)`).
    pub fn j0(&self) -> &[u8; 16] {
        &self.j0
    }

    /// The associated data.
    pub fn aad(&self) -> &'a [u8] {
        self.aad
    }

    /// The message bytes, transformed in place.
    pub fn buf(&mut self) -> &mut [u8] {
        self.buf
    }

    /// The message length in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// J0, the associated data and the buffer at once.
    pub fn parts(&mut self) -> (&[u8; 16], &'a [u8], &mut [u8]) {
        (&self.j0, self.aad, self.buf)
    }

    /// Wipe the buffer (after an engine failure, when its contents cannot be trusted).
    pub(crate) fn wipe(&mut self) {
        self.buf.zeroize();
    }
}

impl Drop for Message<'_> {
    fn drop(&mut self) {
        // J0 of a 12-byte nonce is that nonce and a constant: public.
        if self.nonce96.is_none() {
            wipe16(&mut self.j0);
        }
    }
}

impl core::fmt::Debug for Message<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Message")
            .field("aad_len", &self.aad.len())
            .field("len", &self.buf.len())
            .finish_non_exhaustive()
    }
}

/// A GCM backend bound to one key: the key material each [`Message`] carries (the CPU
/// engines), or key material of its own made from the same raw key (gcmx-cuda's, on the device).
///
/// An engine does the bulk work only: CTR and GHASH. The framing (limits, J0, tag truncation,
/// the constant-time comparison, and what a failed authentication leaves in the buffer) lives
/// in the framing ([`seal`](crate::backend::seal) and the others), once for all engines, and only the
/// framing can call an engine (see [`Message`]). The framing runs an engine through the
/// [`KeyedEngine`](crate::backend::KeyedEngine) that binds it to its key.
///
/// `crypt` with [`Direction::Seal`] CTR-encrypts the buffer (counter blocks `inc32(J0)`,
/// `inc32²(J0)`, …) and returns the full tag `GHASH_H(aad, ciphertext) XOR AES_K(J0)`; with
/// [`Direction::Open`] it returns the same full tag computed over the ciphertext it was given
/// and decrypts the buffer. Sealing a buffer a second time undoes the first: the framing relies
/// on that to restore the ciphertext after a failed authentication.
pub trait GcmEngine: Send + Sync {
    /// A short name for diagnostics.
    fn name(&self) -> &'static str;

    /// Seal or open one message in place; returns the full 16-byte tag (computed when sealing,
    /// expected when opening).
    fn crypt(&self, dir: Direction, msg: &mut Message<'_>) -> Result<[u8; 16], Error>;

    /// Messages shorter than this many bytes the engine runs as [`SerialEngine`] on its key
    /// would: on the calling thread, never failing. [`KeyedEngine`](crate::backend::KeyedEngine)
    /// asks once, when it is made, and the framing then runs those messages on the key material
    /// itself, without an engine call per message (the engine was made from the same raw key).
    /// Default: none.
    fn serial_below(&self) -> usize {
        0
    }

    /// Seal or open many messages; `tags[i]` receives message `i`'s full tag. Default: rayon
    /// over [`GcmEngine::crypt`]; a batch of at most one message runs on the calling thread and
    /// starts no thread pool (the framing refuses a single open by sealing its message again through
    /// here, and a serial call must not depend on threads starting).
    fn crypt_batch(
        &self,
        dir: Direction,
        msgs: &mut [Message<'_>],
        tags: &mut [[u8; 16]],
    ) -> Result<(), Error> {
        if msgs.len() <= 1 {
            for (m, t) in msgs.iter_mut().zip(tags.iter_mut()) {
                *t = self.crypt(dir, m)?;
            }
            return Ok(());
        }
        msgs.par_iter_mut()
            .zip(tags.par_iter_mut())
            .try_for_each(|(m, t)| {
                *t = self.crypt(dir, m)?;
                Ok(())
            })
    }
}

/// One thread: the fused CTR+GHASH loop of the CPU (gcmx-x86's stitched kernels where the CPU
/// has them, else the `aes` and `ghash` crates), on the key material of each [`Message`].
///
/// It holds nothing: the framing hands it the key with the message, so making one costs
/// nothing and it cannot be keyed apart from its [`KeyedEngine`](crate::backend::KeyedEngine).
#[derive(Debug, Clone, Copy)]
pub struct SerialEngine;

impl GcmEngine for SerialEngine {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn serial_below(&self) -> usize {
        usize::MAX
    }
    fn crypt(&self, dir: Direction, msg: &mut Message<'_>) -> Result<[u8; 16], Error> {
        let nonce96 = msg.nonce96();
        let key = msg.key();
        let (j0, aad, buf) = msg.parts();
        Ok(with_cipher!(key.cipher(), c => c.crypt_j0(dir, j0, nonce96, aad, buf.into())))
    }
}

/// All cores: chunks on rayon, each CTR-encrypted from its own counter offset and hashed alone,
/// the chunk hashes joined by the powers-of-H tree ([`tree_reduce`](crate::backend::tree_reduce)).
/// Like [`SerialEngine`], it runs on the key material of each [`Message`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ParallelEngine {
    chunk: Option<usize>,
}

impl ParallelEngine {
    /// An engine with the chunk size chosen per message.
    pub fn new() -> Self {
        ParallelEngine { chunk: None }
    }

    /// An engine with a fixed chunk size (rounded down to whole blocks, at least one block):
    /// tests use small chunks to exercise the tree on short messages.
    pub fn with_chunk(chunk: usize) -> Self {
        ParallelEngine {
            chunk: Some((chunk / 16).max(1) * 16),
        }
    }
}

impl GcmEngine for ParallelEngine {
    fn name(&self) -> &'static str {
        "cpu-parallel"
    }
    fn crypt(&self, dir: Direction, msg: &mut Message<'_>) -> Result<[u8; 16], Error> {
        let chunk = self
            .chunk
            .unwrap_or_else(|| crate::cipher::parallel_chunk(msg.len()));
        let key = msg.key();
        let (j0, aad, buf) = msg.parts();
        Ok(with_cipher!(key.cipher(), c => c.crypt_parallel(dir, j0, aad, Io::InPlace(buf), chunk)))
    }
}

/// Serial below [`AUTO_PARALLEL_MIN`] bytes (or on one thread), parallel above.
#[derive(Debug, Clone, Copy)]
pub struct AutoCpuEngine;

/// Message size from which `Auto` runs on all cores (see README for the measurement).
pub const AUTO_PARALLEL_MIN: usize = 256 * 1024;

/// Whether a message of `len` bytes is worth splitting over rayon's threads.
pub(crate) fn parallel_pays(len: usize) -> bool {
    len >= AUTO_PARALLEL_MIN && rayon::current_num_threads() > 1
}

impl GcmEngine for AutoCpuEngine {
    fn name(&self) -> &'static str {
        "auto-cpu"
    }
    fn serial_below(&self) -> usize {
        AUTO_PARALLEL_MIN
    }
    fn crypt(&self, dir: Direction, msg: &mut Message<'_>) -> Result<[u8; 16], Error> {
        if parallel_pays(msg.len()) {
            ParallelEngine::new().crypt(dir, msg)
        } else {
            SerialEngine.crypt(dir, msg)
        }
    }
    fn crypt_batch(
        &self,
        dir: Direction,
        msgs: &mut [Message<'_>],
        tags: &mut [[u8; 16]],
    ) -> Result<(), Error> {
        // Messages of a batch already run in parallel: each one serially.
        SerialEngine.crypt_batch(dir, msgs, tags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn run(
        e: &dyn GcmEngine,
        key: &KeyMaterial,
        dir: Direction,
        j0: [u8; 16],
        aad: &[u8],
        buf: &mut [u8],
    ) -> [u8; 16] {
        e.crypt(dir, &mut Message::new(key, j0, aad, buf)).unwrap()
    }

    /// The parallel engine, split into chunks of one, two, three or 64 blocks, gives the serial
    /// engine's ciphertext and tag at every length, for short and long AAD, and opens back.
    #[test]
    fn parallel_matches_serial_everywhere() {
        for key_len in [16, 24, 32] {
            let key = KeyMaterial::new(&bytes(key_len, 1)).unwrap();
            let serial = SerialEngine;
            for nonce_len in [12usize, 1, 13, 64] {
                let j0 = key.j0(&bytes(nonce_len, 2));
                for chunk in [16usize, 32, 48, 1024] {
                    let par = ParallelEngine::with_chunk(chunk);
                    for len in (0..=130).chain([1000, 4097]) {
                        for aad_len in [0usize, 5, 200] {
                            let aad = bytes(aad_len, 3);
                            let pt = bytes(len, 4);
                            let (mut a, mut b) = (pt.clone(), pt.clone());
                            let ta = run(&serial, &key, Direction::Seal, j0, &aad, &mut a);
                            let tb = run(&par, &key, Direction::Seal, j0, &aad, &mut b);
                            assert_eq!((&a, ta), (&b, tb), "len {len} chunk {chunk} aad {aad_len}");
                            let tc = run(&par, &key, Direction::Open, j0, &aad, &mut b);
                            assert_eq!(tc, ta);
                            assert_eq!(b, pt);
                        }
                    }
                }
            }
        }
    }

    /// inc32: the counter wraps in its low 32 bits and leaves the other 96 alone.
    #[test]
    fn counter_wraps_mod_2_32() {
        let key = KeyMaterial::new(&[9u8; 16]).unwrap();
        let mut j0 = [0xAB; 16];
        j0[12..].copy_from_slice(&0xFFFF_FFFEu32.to_be_bytes());
        let mut buf = vec![0u8; 64];
        run(&SerialEngine, &key, Direction::Seal, j0, b"", &mut buf);
        for (i, ctr) in [0xFFFF_FFFFu32, 0, 1, 2].into_iter().enumerate() {
            let mut blk = j0;
            blk[12..].copy_from_slice(&ctr.to_be_bytes());
            key.encrypt_block(&mut blk);
            assert_eq!(&buf[16 * i..16 * i + 16], &blk, "block {i}");
        }
    }

    /// Sealing twice gives the input back: the framing restores ciphertext this way.
    #[test]
    fn seal_is_an_involution_on_the_buffer() {
        let key = KeyMaterial::new(&[4u8; 32]).unwrap();
        for e in [
            &SerialEngine as &dyn GcmEngine,
            &ParallelEngine::with_chunk(64),
        ] {
            let pt = bytes(1000, 9);
            let mut b = pt.clone();
            let j0 = key.j0(&[1u8; 12]);
            run(e, &key, Direction::Seal, j0, b"a", &mut b);
            assert_ne!(b, pt);
            run(e, &key, Direction::Seal, j0, b"a", &mut b);
            assert_eq!(b, pt);
        }
    }
}
