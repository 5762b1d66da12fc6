//! Key material for the runtime-sized API: one of AES-128/192/256 chosen by the key's length.

use aes::cipher::KeyInit;
use aes::{Aes128, Aes192, Aes256};

use crate::Error;
use crate::cipher::Cipher;
use crate::field::HashKey;

/// An AES key of 16, 24 or 32 bytes expanded, with its GHASH key: what the backends run on.
/// Zeroized on drop (the AES round keys by the `aes` crate and `gcmx-x86`, H by [`HashKey`]).
///
/// It is made only from the raw key and never gives the key bytes back. The values backends
/// need ([`KeyMaterial::j0`], [`KeyMaterial::tag_from_partials`], the powers of H through
/// [`KeyMaterial::hash_key`]) are functions of the key that its holder, who had the raw key,
/// could compute anyway: the first power of H is `H'`, and the tag of an empty message is the
/// AES block of its J0. No type of the `gcmx` crate hands out its `KeyMaterial`.
///
/// ```
/// let k = gcmx_core::backend::KeyMaterial::new(&[1u8; 32]).unwrap();
/// assert_eq!(k.key_len(), 32);
/// assert!(gcmx_core::backend::KeyMaterial::new(&[1u8; 20]).is_err());
/// ```
pub struct KeyMaterial {
    cipher: AnyCipher,
}

/// The keyed cipher, by key size.
#[derive(Clone, Debug)]
pub(crate) enum AnyCipher {
    /// AES-128.
    Aes128(Cipher<Aes128>),
    /// AES-192.
    Aes192(Cipher<Aes192>),
    /// AES-256.
    Aes256(Cipher<Aes256>),
}

/// Run the same generic code on whichever AES the key selected.
macro_rules! with_cipher {
    ($any:expr, $c:ident => $body:expr) => {
        match $any {
            $crate::key::AnyCipher::Aes128($c) => $body,
            $crate::key::AnyCipher::Aes192($c) => $body,
            $crate::key::AnyCipher::Aes256($c) => $body,
        }
    };
}
pub(crate) use with_cipher;

impl KeyMaterial {
    /// Key an AES of the size `key.len()` selects. On an x86-64 CPU with AES-NI and PCLMULQDQ
    /// the CPU backends run the stitched kernels of `gcmx-x86`, on an aarch64 core with AES and
    /// PMULL those of `gcmx-aarch64`, else the generic path.
    #[inline]
    pub fn new(key: &[u8]) -> Result<Self, Error> {
        Self::build(key, true)
    }

    /// Like [`KeyMaterial::new`] but always on the generic path (the `aes` and `ghash`
    /// crates), whatever the CPU: for comparisons and tests. Output is identical.
    pub(crate) fn new_generic(key: &[u8]) -> Result<Self, Error> {
        Self::build(key, false)
    }

    #[inline]
    fn build(key: &[u8], stitched: bool) -> Result<Self, Error> {
        /// On the stitched kernels where they run (the `aes` crate's cipher is then never
        /// made), else the generic path.
        fn make<C>(key: &[u8], stitched: bool) -> Result<Cipher<C>, Error>
        where
            C: aes::cipher::BlockCipherEncrypt
                + aes::cipher::BlockSizeUser<BlockSize = aes::cipher::consts::U16>
                + KeyInit,
        {
            if let Some(c) = stitched.then(|| Cipher::aes(key)).flatten() {
                return Ok(c);
            }
            let c = C::new_from_slice(key).map_err(|_| Error::KeyLength(key.len()))?;
            Ok(Cipher::new(c))
        }
        let cipher = match key.len() {
            16 => AnyCipher::Aes128(make(key, stitched)?),
            24 => AnyCipher::Aes192(make(key, stitched)?),
            32 => AnyCipher::Aes256(make(key, stitched)?),
            n => return Err(Error::KeyLength(n)),
        };
        Ok(KeyMaterial { cipher })
    }

    /// The AES key length in bytes: 16, 24 or 32.
    pub fn key_len(&self) -> usize {
        match self.cipher {
            AnyCipher::Aes128(_) => 16,
            AnyCipher::Aes192(_) => 24,
            AnyCipher::Aes256(_) => 32,
        }
    }

    /// Whether the CPU backends run the stitched x86-64 kernels for this key.
    pub fn is_stitched(&self) -> bool {
        with_cipher!(&self.cipher, c => c.is_stitched())
    }

    /// The keyed cipher.
    pub(crate) fn cipher(&self) -> &AnyCipher {
        &self.cipher
    }

    /// GHASH's key in the POLYVAL domain.
    pub fn hash_key(&self) -> HashKey {
        with_cipher!(&self.cipher, c => c.hash_key())
    }

    /// `AES_K(block)` in place, on the CPU.
    #[cfg(test)]
    pub(crate) fn encrypt_block(&self, block: &mut [u8; 16]) {
        with_cipher!(&self.cipher, c => c.encrypt_block(block))
    }

    /// SP 800-38D's J0 for `nonce` (which must not be empty; the framing checks).
    pub fn j0(&self, nonce: &[u8]) -> [u8; 16] {
        with_cipher!(&self.cipher, c => c.j0(nonce))
    }

    /// Seal or open one message under `nonce` on the calling thread, from `buf`'s input into its
    /// output, as [`SerialEngine`](crate::backend::SerialEngine) runs it; returns the full tag
    /// (for an open, the expected one).
    ///
    /// The fast path (a 12-byte nonce on the stitched kernels) is one call whatever the key's
    /// size: the kernels' key is the same type for all three, so the caller inlines one call
    /// into the kernels instead of three copies of the whole dispatch.
    #[inline(always)]
    pub(crate) fn crypt_nonce(
        &self,
        dir: crate::direction::Direction,
        nonce: &[u8],
        aad: &[u8],
        buf: aead::inout::InOutBuf<'_, '_, u8>,
    ) -> [u8; 16] {
        let stitched = with_cipher!(&self.cipher, c => c.stitched());
        if let (Some(k), Ok(n)) = (stitched, <&[u8; 12]>::try_from(nonce)) {
            return crate::cipher::stitched96(k, dir, n, aad, buf);
        }
        self.crypt_nonce_slow(dir, nonce, aad, buf)
    }

    /// [`KeyMaterial::crypt_nonce`] off its fast path (the fast path's test is not made again).
    #[inline(never)]
    fn crypt_nonce_slow(
        &self,
        dir: crate::direction::Direction,
        nonce: &[u8],
        aad: &[u8],
        buf: aead::inout::InOutBuf<'_, '_, u8>,
    ) -> [u8; 16] {
        with_cipher!(&self.cipher, c => c.crypt_nonce_j0(dir, nonce, aad, buf))
    }

    /// Open one message under `nonce` on the calling thread and compare its tag with `tag`, as
    /// `Cipher::open_nonce` does: whether it matches (on a mismatch the output holds
    /// unauthenticated plaintext, for the caller to restore or wipe). One call into the
    /// kernels whatever the key's size, as [`KeyMaterial::crypt_nonce`].
    #[inline(always)]
    pub(crate) fn open_nonce(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: aead::inout::InOutBuf<'_, '_, u8>,
        tag: &[u8],
    ) -> bool {
        let stitched = with_cipher!(&self.cipher, c => c.stitched());
        if let (Some(k), Ok(n)) = (stitched, <&[u8; 12]>::try_from(nonce)) {
            return k.open_message96_checked(n, aad, buf, tag);
        }
        self.open_nonce_slow(nonce, aad, buf, tag)
    }

    /// [`KeyMaterial::open_nonce`] off its fast path.
    #[inline(never)]
    fn open_nonce_slow(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: aead::inout::InOutBuf<'_, '_, u8>,
        tag: &[u8],
    ) -> bool {
        with_cipher!(&self.cipher, c => c.open_nonce_j0(nonce, aad, buf, tag))
    }

    /// Join associated data, ciphertext partial hashes and the length block into the full tag
    /// (the combination every parallel backend shares; see [`tree_reduce`](crate::backend::tree_reduce)).
    pub fn tag_from_partials(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        ct: &[crate::combine::Partial],
        ct_len: usize,
    ) -> [u8; 16] {
        with_cipher!(&self.cipher, c => c.tag_from_partials(j0, aad, ct, ct_len))
    }
}

impl core::fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "KeyMaterial {{ AES-{} }}", self.key_len() * 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direction::Direction;
    use crate::engine::{GcmEngine, Message, ParallelEngine, SerialEngine};

    /// `new` takes the stitched kernels where the CPU has them, `new_generic` never; the
    /// engines give the same bytes and tags on both.
    #[test]
    fn new_and_new_generic_agree() {
        for n in [16usize, 24, 32] {
            let raw: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37)).collect();
            let s = KeyMaterial::new(&raw).unwrap();
            let g = KeyMaterial::new_generic(&raw).unwrap();
            assert_eq!(s.is_stitched(), crate::backend::stitched_supported());
            assert!(!g.is_stitched());
            for nonce_len in [12usize, 7] {
                let nonce = vec![0xA5u8; nonce_len];
                let j0 = s.j0(&nonce);
                assert_eq!(j0, g.j0(&nonce));
                for len in [0usize, 15, 16, 255, 256, 257, 5000, 100_000] {
                    let pt: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
                    let (mut a, mut b, mut c) = (pt.clone(), pt.clone(), pt.clone());
                    let seal = |e: &dyn GcmEngine, k: &KeyMaterial, buf: &mut [u8]| {
                        e.crypt(Direction::Seal, &mut Message::new(k, j0, b"hdr", buf))
                            .unwrap()
                    };
                    let ta = seal(&SerialEngine, &s, &mut a);
                    let tb = seal(&SerialEngine, &g, &mut b);
                    let tc = seal(&ParallelEngine::with_chunk(4096), &s, &mut c);
                    assert_eq!((&a, ta), (&b, tb), "AES-{} len {len}", n * 8);
                    assert_eq!((&c, tc), (&b, tb), "parallel AES-{} len {len}", n * 8);
                }
            }
        }
    }
}
