//! The backend trait and the two CPU engines.

use std::sync::Arc;

use rayon::prelude::*;

use crate::Error;
use crate::key::{KeyMaterial, with_cipher};

/// One message for an engine: J0 already derived from the nonce.
#[derive(Debug)]
pub struct EngineJob<'a> {
    /// The pre-counter block.
    pub j0: [u8; 16],
    /// Associated data.
    pub aad: &'a [u8],
    /// The message, transformed in place.
    pub buf: &'a mut [u8],
    /// Set by the engine: the full 16-byte tag (computed, or expected when opening).
    pub full_tag: [u8; 16],
}

/// A GCM backend bound to one key.
///
/// An engine does the bulk work only: CTR and GHASH. The framing (limits, J0, tag truncation,
/// constant-time comparison, wiping on failure) lives in [`crate::frame`], once for all engines.
///
/// ```
/// use gcmx_core::{GcmEngine, KeyMaterial, engine::SerialEngine};
/// use std::sync::Arc;
/// let key = Arc::new(KeyMaterial::new(&[0u8; 16]).unwrap());
/// let e = SerialEngine::new(key.clone());
/// let j0 = key.j0(&[0u8; 12]);
/// let mut buf = [0u8; 16];
/// let tag = e.seal(&j0, b"", &mut buf).unwrap();
/// // GCM specification, test case 2
/// assert_eq!(buf, [0x03, 0x88, 0xda, 0xce, 0x60, 0xb6, 0xa3, 0x92, 0xf3, 0x28, 0xc2, 0xb9, 0x71, 0xb2, 0xfe, 0x78]);
/// assert_eq!(tag[..4], [0xab, 0x6e, 0x47, 0xd4]);
/// ```
pub trait GcmEngine: Send + Sync {
    /// A short name for diagnostics.
    fn name(&self) -> &'static str;

    /// CTR-encrypt `buf` in place (counter blocks J0+1, J0+2, … with inc32) and return the full
    /// tag `GHASH_H(aad, ciphertext) XOR AES_K(J0)`.
    fn seal(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error>;

    /// Decrypt `buf` in place and return the full tag computed over the ciphertext. The caller
    /// compares it and wipes `buf` on a mismatch.
    fn open(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error>;

    /// Seal many messages; sets each job's `full_tag`. Default: rayon over [`GcmEngine::seal`].
    fn seal_batch(&self, jobs: &mut [EngineJob<'_>]) -> Result<(), Error> {
        jobs.par_iter_mut().try_for_each(|j| {
            j.full_tag = self.seal(&j.j0, j.aad, j.buf)?;
            Ok(())
        })
    }

    /// Open many messages; sets each job's `full_tag` to the expected tag. Default: rayon over
    /// [`GcmEngine::open`].
    fn open_batch(&self, jobs: &mut [EngineJob<'_>]) -> Result<(), Error> {
        jobs.par_iter_mut().try_for_each(|j| {
            j.full_tag = self.open(&j.j0, j.aad, j.buf)?;
            Ok(())
        })
    }
}

/// One thread: CTR and GHASH fused per [`crate::cipher::SERIAL_CHUNK`] bytes so the data is hashed while in cache.
#[derive(Debug, Clone)]
pub struct SerialEngine {
    key: Arc<KeyMaterial>,
}

impl SerialEngine {
    /// An engine for `key`.
    pub fn new(key: Arc<KeyMaterial>) -> Self {
        SerialEngine { key }
    }
}

impl GcmEngine for SerialEngine {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn seal(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        Ok(with_cipher!(self.key.cipher(), c => c.seal_serial(j0, aad, buf)))
    }
    fn open(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        Ok(with_cipher!(self.key.cipher(), c => c.open_serial(j0, aad, buf)))
    }
}

/// All cores: chunks on rayon, each CTR-encrypted from its own counter offset and hashed alone,
/// the chunk hashes joined by the powers-of-H tree ([`crate::combine::tree_reduce`]).
#[derive(Debug, Clone)]
pub struct ParallelEngine {
    key: Arc<KeyMaterial>,
    chunk: Option<usize>,
}

impl ParallelEngine {
    /// An engine for `key` with the chunk size chosen per message.
    pub fn new(key: Arc<KeyMaterial>) -> Self {
        ParallelEngine { key, chunk: None }
    }

    /// An engine with a fixed chunk size (rounded down to whole blocks, at least one block):
    /// tests use small chunks to exercise the tree on short messages.
    pub fn with_chunk(key: Arc<KeyMaterial>, chunk: usize) -> Self {
        ParallelEngine {
            key,
            chunk: Some((chunk / 16).max(1) * 16),
        }
    }

    fn chunk(&self, len: usize) -> usize {
        self.chunk
            .unwrap_or_else(|| crate::cipher::Cipher::<aes::Aes128>::parallel_chunk(len))
    }
}

impl GcmEngine for ParallelEngine {
    fn name(&self) -> &'static str {
        "cpu-parallel"
    }
    fn seal(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        let chunk = self.chunk(buf.len());
        Ok(with_cipher!(self.key.cipher(), c => c.seal_parallel(j0, aad, buf, chunk)))
    }
    fn open(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        let chunk = self.chunk(buf.len());
        Ok(with_cipher!(self.key.cipher(), c => c.open_parallel(j0, aad, buf, chunk)))
    }
}

/// Serial below [`AUTO_PARALLEL_MIN`] bytes (or on one thread), parallel above.
#[derive(Debug, Clone)]
pub struct AutoCpuEngine {
    serial: SerialEngine,
    parallel: ParallelEngine,
}

/// Message size from which `Auto` runs on all cores (see README for the measurement).
pub const AUTO_PARALLEL_MIN: usize = 256 * 1024;

impl AutoCpuEngine {
    /// An engine for `key`.
    pub fn new(key: Arc<KeyMaterial>) -> Self {
        AutoCpuEngine {
            serial: SerialEngine::new(key.clone()),
            parallel: ParallelEngine::new(key),
        }
    }
    fn pick(&self, len: usize) -> &dyn GcmEngine {
        if len >= AUTO_PARALLEL_MIN && rayon::current_num_threads() > 1 {
            &self.parallel
        } else {
            &self.serial
        }
    }
}

impl GcmEngine for AutoCpuEngine {
    fn name(&self) -> &'static str {
        "auto-cpu"
    }
    fn seal(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        self.pick(buf.len()).seal(j0, aad, buf)
    }
    fn open(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> Result<[u8; 16], Error> {
        self.pick(buf.len()).open(j0, aad, buf)
    }
    fn seal_batch(&self, jobs: &mut [EngineJob<'_>]) -> Result<(), Error> {
        // Messages of a batch already run in parallel: each one serially.
        self.serial.seal_batch(jobs)
    }
    fn open_batch(&self, jobs: &mut [EngineJob<'_>]) -> Result<(), Error> {
        self.serial.open_batch(jobs)
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

    /// The parallel engine, split into chunks of one, two, three or 64 blocks, gives the serial
    /// engine's ciphertext and tag at every length, for short and long AAD, and opens back.
    #[test]
    fn parallel_matches_serial_everywhere() {
        for key_len in [16, 24, 32] {
            let key = Arc::new(KeyMaterial::new(&bytes(key_len, 1)).unwrap());
            let serial = SerialEngine::new(key.clone());
            for nonce_len in [12usize, 1, 13, 64] {
                let j0 = key.j0(&bytes(nonce_len, 2));
                for chunk in [16usize, 32, 48, 1024] {
                    let par = ParallelEngine::with_chunk(key.clone(), chunk);
                    for len in (0..=130).chain([1000, 4097]) {
                        for aad_len in [0usize, 5, 200] {
                            let aad = bytes(aad_len, 3);
                            let pt = bytes(len, 4);
                            let (mut a, mut b) = (pt.clone(), pt.clone());
                            let ta = serial.seal(&j0, &aad, &mut a).unwrap();
                            let tb = par.seal(&j0, &aad, &mut b).unwrap();
                            assert_eq!((&a, ta), (&b, tb), "len {len} chunk {chunk} aad {aad_len}");
                            let tc = par.open(&j0, &aad, &mut b).unwrap();
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
        let key = Arc::new(KeyMaterial::new(&[9u8; 16]).unwrap());
        let e = SerialEngine::new(key.clone());
        let mut j0 = [0xAB; 16];
        j0[12..].copy_from_slice(&0xFFFF_FFFEu32.to_be_bytes());
        let mut buf = vec![0u8; 64];
        e.seal(&j0, b"", &mut buf).unwrap();
        for (i, ctr) in [0xFFFF_FFFFu32, 0, 1, 2].into_iter().enumerate() {
            let mut blk = j0;
            blk[12..].copy_from_slice(&ctr.to_be_bytes());
            key.encrypt_block(&mut blk);
            assert_eq!(&buf[16 * i..16 * i + 16], &blk, "block {i}");
        }
    }
}
