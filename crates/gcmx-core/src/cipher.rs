//! One AES key with its GHASH key: the fused CTR+GHASH loops of the CPU backends, generic over any
//! RustCrypto block cipher with 16-byte blocks.

use aes::cipher::{Block, BlockCipherEncrypt, BlockSizeUser, consts::U16};
use ghash::GHash;
use ghash::universal_hash::UniversalHash;
use rayon::prelude::*;

use crate::combine::{Partial, tree_reduce};
use crate::ctr::apply_keystream;
use crate::field::HashKey;

/// Bytes per step of the serial loop: CTR over a chunk, then GHASH over it while it is in L1/L2
/// (measured: 8 KiB to 128 KiB are equal within 0.5 %; below 2 KiB the per-chunk setup costs).
pub const SERIAL_CHUNK: usize = 32 * 1024;

/// Smallest chunk the parallel backend hands to one thread.
pub const MIN_PARALLEL_CHUNK: usize = 16 * 1024;

/// A block cipher keyed once, with `H = E_K(0)` in two forms: the `ghash` crate's fast hasher
/// and the POLYVAL-domain [`HashKey`] that joins partial hashes.
///
/// ```
/// use gcmx_core::cipher::Cipher;
/// use aes::cipher::KeyInit;
/// let c = Cipher::new(aes::Aes128::new(&[0u8; 16].into()));
/// let mut buf = *b"sixteen byte msg";
/// let j0 = c.j0(&[0u8; 12]);
/// let tag = c.seal_serial(&j0, b"", &mut buf);
/// let mut back = buf;
/// assert_eq!(c.open_serial(&j0, b"", &mut back), tag);
/// assert_eq!(&back, b"sixteen byte msg");
/// ```
#[derive(Clone)]
pub struct Cipher<C> {
    cipher: C,
    ghash: GHash,
    hk: HashKey,
}

impl<C> Cipher<C>
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    /// Derive `H = E_K(0^128)` and set up both hashers.
    pub fn new(cipher: C) -> Self {
        let mut h = Block::<C>::default();
        cipher.encrypt_block(&mut h);
        let mut hb: [u8; 16] = h.into();
        let ghash = GHash::new(&hb.into());
        let hk = HashKey::new(hb);
        zeroize::Zeroize::zeroize(&mut hb);
        Cipher { cipher, ghash, hk }
    }

    /// The POLYVAL-domain hash key.
    pub fn hash_key(&self) -> &HashKey {
        &self.hk
    }

    /// `E_K(block)` in place.
    pub fn encrypt_block(&self, block: &mut [u8; 16]) {
        let mut b = Block::<C>::from(*block);
        self.cipher.encrypt_block(&mut b);
        *block = b.into();
    }

    /// The pre-counter block J0 of SP 800-38D 7.1: `IV ‖ 0^31 ‖ 1` for 12-byte nonces, else
    /// `GHASH(IV ‖ 0^s ‖ [len(IV)]_64)`. The nonce is public; `nonce` must not be empty (the framing checks).
    pub fn j0(&self, nonce: &[u8]) -> [u8; 16] {
        if nonce.len() == 12 {
            let mut j0 = [0u8; 16];
            j0[..12].copy_from_slice(nonce);
            j0[15] = 1;
            return j0;
        }
        let mut g = self.ghash.clone();
        g.update_padded(nonce);
        let mut len = [0u8; 16];
        len[8..].copy_from_slice(&((nonce.len() as u64) * 8).to_be_bytes());
        g.update(&[len.into()]);
        g.finalize().into()
    }

    /// Serial seal: CTR-encrypt `buf` in place and return the full tag.
    #[inline]
    pub fn seal_serial(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> [u8; 16] {
        let mut g = self.ghash.clone();
        g.update_padded(aad);
        self.fused_run(&mut g, j0, 0, buf, true);
        self.finish(j0, g, aad.len(), buf.len())
    }

    /// Serial open: hash the ciphertext, decrypt `buf` in place, return the expected full tag.
    #[inline]
    pub fn open_serial(&self, j0: &[u8; 16], aad: &[u8], buf: &mut [u8]) -> [u8; 16] {
        let mut g = self.ghash.clone();
        g.update_padded(aad);
        self.fused_run(&mut g, j0, 0, buf, false);
        self.finish(j0, g, aad.len(), buf.len())
    }

    /// The fused loop every CPU path runs: per [`SERIAL_CHUNK`], CTR then GHASH of the ciphertext
    /// (`seal`), or GHASH of the ciphertext then CTR (open). `buf` starts at keystream block `first`.
    #[inline]
    fn fused_run(&self, g: &mut GHash, j0: &[u8; 16], first: u64, buf: &mut [u8], seal: bool) {
        let mut block = first;
        for chunk in buf.chunks_mut(SERIAL_CHUNK) {
            if seal {
                apply_keystream(&self.cipher, j0, block, chunk);
                g.update_padded(chunk);
            } else {
                g.update_padded(chunk);
                apply_keystream(&self.cipher, j0, block, chunk);
            }
            block += (SERIAL_CHUNK / 16) as u64;
        }
    }

    fn finish(&self, j0: &[u8; 16], mut g: GHash, aad_len: usize, ct_len: usize) -> [u8; 16] {
        g.update(&[length_block(aad_len, ct_len).into()]);
        let s: [u8; 16] = g.finalize().into();
        self.mask(j0, u128::from_be_bytes(s))
    }

    /// Tag = S XOR E_K(J0).
    fn mask(&self, j0: &[u8; 16], s: u128) -> [u8; 16] {
        let mut m = *j0;
        self.encrypt_block(&mut m);
        (s ^ u128::from_be_bytes(m)).to_be_bytes()
    }

    /// The GHASH value of one run of bytes (zero-padded to whole blocks) as a [`Partial`].
    pub fn hash_run(&self, data: &[u8]) -> Partial {
        let mut g = self.ghash.clone();
        g.update_padded(data);
        let v: [u8; 16] = g.finalize().into();
        Partial {
            value: u128::from_be_bytes(v),
            blocks: data.len().div_ceil(16) as u64,
        }
    }

    /// Join the hash of the associated data, the ciphertext runs (in order) and the length
    /// block through [`tree_reduce`], then mask: the full tag. Shared by every parallel backend.
    pub fn tag_from_partials(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        ct: &[Partial],
        ct_len: usize,
    ) -> [u8; 16] {
        let mut parts = Vec::with_capacity(ct.len() + 2);
        parts.push(self.hash_run(aad));
        parts.extend_from_slice(ct);
        let len = u128::from_be_bytes(length_block(aad.len(), ct_len));
        parts.push(Partial {
            value: self.hk.absorb(0, len),
            blocks: 1,
        });
        self.mask(j0, tree_reduce(&self.hk, &parts).value)
    }
}

impl<C> Cipher<C>
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16> + Sync,
{
    /// Chunk size the parallel backend uses for `len` bytes: about four chunks per thread, at
    /// least [`MIN_PARALLEL_CHUNK`], a whole number of blocks.
    pub fn parallel_chunk(len: usize) -> usize {
        let threads = rayon::current_num_threads().max(1);
        let c = len.div_ceil(threads * 4).max(MIN_PARALLEL_CHUNK);
        c.div_ceil(16) * 16
    }

    /// Parallel seal over chunks of `chunk` bytes (a positive multiple of 16): each chunk is
    /// CTR-encrypted from its own counter offset and hashed alone; the hashes join by the tree.
    pub fn seal_parallel(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: &mut [u8],
        chunk: usize,
    ) -> [u8; 16] {
        self.parallel(j0, aad, buf, chunk, true)
    }

    /// Parallel open (see [`Cipher::seal_parallel`]); returns the expected full tag.
    pub fn open_parallel(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: &mut [u8],
        chunk: usize,
    ) -> [u8; 16] {
        self.parallel(j0, aad, buf, chunk, false)
    }

    fn parallel(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: &mut [u8],
        chunk: usize,
        seal: bool,
    ) -> [u8; 16] {
        let chunk = chunk.max(16) / 16 * 16;
        let ct_len = buf.len();
        let parts: Vec<Partial> = buf
            .par_chunks_mut(chunk)
            .enumerate()
            .map(|(i, c)| {
                let mut g = self.ghash.clone();
                self.fused_run(&mut g, j0, (i * (chunk / 16)) as u64, c, seal);
                let v: [u8; 16] = g.finalize().into();
                Partial {
                    value: u128::from_be_bytes(v),
                    blocks: c.len().div_ceil(16) as u64,
                }
            })
            .collect();
        self.tag_from_partials(j0, aad, &parts, ct_len)
    }
}

/// GCM's last GHASH block: `[len(A)]_64 ‖ [len(C)]_64` in bits.
pub fn length_block(aad_len: usize, ct_len: usize) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&((aad_len as u64) * 8).to_be_bytes());
    b[8..].copy_from_slice(&((ct_len as u64) * 8).to_be_bytes());
    b
}

impl<C> core::fmt::Debug for Cipher<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Cipher { .. }")
    }
}
