//! The typed API: `AesGcm<Aes, NonceSize, TagSize>` implementing the RustCrypto `aead` 0.6
//! traits, named, bounded and behaving like the `aes-gcm` 0.11 crate's so that code written for
//! `aes-gcm` changes only its dependency line.

use core::marker::PhantomData;

use aead::array::{Array, ArraySize};
use aead::consts::{U12, U16};
use aead::inout::InOutBuf;
use aead::{AeadCore, AeadInOut, KeyInit, KeySizeUser, TagPosition};
use aes::cipher::{BlockCipherEncrypt, BlockSizeUser};
use aes::{Aes128, Aes192, Aes256};
use zeroize::Zeroize;

use crate::cipher::{Cipher, Io, parallel_chunk};
use crate::direction::Direction;
use crate::engine::parallel_pays;
use crate::frame::within_limits;
use crate::refusal::Refused;
use crate::tag::tag_matches;
use crate::wipe::wipe16;

/// AES-GCM nonce.
pub type Nonce<NonceSize> = Array<u8, NonceSize>;
/// AES-GCM tag.
pub type Tag<TagSize = U16> = Array<u8, TagSize>;

/// AES-128-GCM with a 96-bit nonce and a 128-bit tag.
pub type Aes128Gcm = AesGcm<Aes128, U12>;
/// AES-192-GCM with a 96-bit nonce and a 128-bit tag.
pub type Aes192Gcm = AesGcm<Aes192, U12>;
/// AES-256-GCM with a 96-bit nonce and a 128-bit tag.
pub type Aes256Gcm = AesGcm<Aes256, U12>;

/// Tag sizes: `U12` to `U16`; with the crate feature `hazmat` also `U4` and `U8` (SP 800-38D
/// appendix C: a key must then not be used for more decryptions than its tables allow). Sealed.
pub trait TagSize: private::SealedTagSize {}
impl<T: private::SealedTagSize> TagSize for T {}

mod private {
    use aead::array::ArraySize;
    use aead::consts;
    pub trait SealedTagSize: ArraySize + aead::array::typenum::Unsigned {}
    #[cfg(feature = "hazmat")]
    impl SealedTagSize for consts::U4 {}
    #[cfg(feature = "hazmat")]
    impl SealedTagSize for consts::U8 {}
    impl SealedTagSize for consts::U12 {}
    impl SealedTagSize for consts::U13 {}
    impl SealedTagSize for consts::U14 {}
    impl SealedTagSize for consts::U15 {}
    impl SealedTagSize for consts::U16 {}
}

/// The parallel loop, instantiated where `Aes: Sync` is known ([`AesGcm::with_multicore`]), so
/// the trait impls below need no `Sync` bound.
type ParallelFn<Aes> = fn(&Cipher<Aes>, Direction, &[u8; 16], &[u8], Io<'_, '_>, usize) -> [u8; 16];

/// AES-GCM, generic over the AES implementation, the nonce size and the tag size.
///
/// Every message runs on the calling thread, as in `aes-gcm`, unless
/// [`AesGcm::with_multicore`] opts in to rayon for large messages. Output is byte-identical
/// either way. Keyed through [`KeyInit`] on an x86-64 CPU with AES-NI and PCLMULQDQ, the work
/// runs in gcmx's stitched kernels; through `From<Aes>` (no raw key) on the given cipher.
///
/// A failed decryption returns `Err(aead::Error)` and leaves the buffer as it was given: the
/// ciphertext, never plaintext.
///
/// ```
/// # mod gcmx { pub use gcmx_core::{aead, Aes256Gcm, Nonce}; } // the names `gcmx` re-exports
/// use gcmx::{Aes256Gcm, Nonce, aead::{Aead, KeyInit}};
/// let cipher = Aes256Gcm::new(&[7u8; 32].into());
/// let nonce = Nonce::<gcmx::aead::consts::U12>::from([1u8; 12]); // unique per message!
/// let ct = cipher.encrypt(&nonce, b"hello".as_ref()).unwrap();
/// assert_eq!(cipher.decrypt(&nonce, ct.as_ref()).unwrap(), b"hello");
/// ```
#[derive(Clone)]
pub struct AesGcm<Aes, NonceSize, TagSize = U16> {
    cipher: Cipher<Aes>,
    parallel: Option<ParallelFn<Aes>>,
    /// [`AesGcm::with_uncached_output`].
    uncached: bool,
    nonce_size: PhantomData<NonceSize>,
    tag_size: PhantomData<TagSize>,
}

impl<Aes, N, T> AesGcm<Aes, N, T>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt + Sync,
{
    /// Run messages of at least 256 KiB on all threads of rayon's global pool (chunks joined by
    /// the powers-of-H tree); smaller ones stay on the calling thread. Off by default, so a
    /// service's own threads are not taken without asking.
    ///
    /// ```
    /// # mod gcmx { pub use gcmx_core::{aead, Aes128Gcm}; } // the names `gcmx` re-exports
    /// use gcmx::{Aes128Gcm, aead::{Aead, KeyInit}};
    /// let cipher = Aes128Gcm::new(&[1u8; 16].into()).with_multicore();
    /// let big = vec![0u8; 1 << 20];
    /// let ct = cipher.encrypt(&[0u8; 12].into(), big.as_slice()).unwrap();
    /// assert_eq!(ct.len(), big.len() + 16);
    /// ```
    #[must_use]
    pub fn with_multicore(mut self) -> Self {
        self.parallel = Some(Cipher::<Aes>::crypt_parallel);
        self
    }

    /// Have [`AesGcm::decrypt_into_detached`] write its plaintext to memory past the caches
    /// (non-temporal stores), where gcmx's x86-64 kernels run; elsewhere this changes nothing.
    /// The output is the same.
    ///
    /// An ordinary store to a line that is not cached fetches the line first, so an open into
    /// another buffer moves three bytes of memory traffic per byte where an open in place moves
    /// two. For outputs larger than the caches that are not read back at once (a large file
    /// opened into memory on all cores, where memory is the limit) this is the faster choice;
    /// for outputs the caller reads next it is the slower one, as they are then read from
    /// memory.
    ///
    /// ```
    /// # mod gcmx { pub use gcmx_core::{aead, Aes256Gcm, Nonce}; } // the names `gcmx` re-exports
    /// use gcmx::{Aes256Gcm, Nonce, aead::{AeadInOut, KeyInit}};
    /// let key = [7u8; 32];
    /// let cipher = Aes256Gcm::new(&key.into()).with_multicore().with_uncached_output();
    /// let nonce = Nonce::<gcmx::aead::consts::U12>::from([1u8; 12]);
    /// let mut ct = vec![3u8; 1 << 20];
    /// let tag = cipher.encrypt_inout_detached(&nonce, b"", ct.as_mut_slice().into()).unwrap();
    /// let mut pt = vec![0u8; ct.len()];
    /// cipher.decrypt_into_detached(&nonce, b"", &ct, &mut pt, &tag).unwrap();
    /// assert!(pt.iter().all(|&b| b == 3));
    /// ```
    #[must_use]
    pub fn with_uncached_output(mut self) -> Self {
        self.uncached = true;
        self
    }
}

impl<Aes, N, T> AesGcm<Aes, N, T>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt,
{
    fn from_cipher(cipher: Cipher<Aes>) -> Self {
        AesGcm {
            cipher,
            parallel: None,
            uncached: false,
            nonce_size: PhantomData,
            tag_size: PhantomData,
        }
    }

    /// The keyed cipher, for the `hazmat` operations.
    #[cfg(feature = "hazmat")]
    pub(crate) fn cipher(&self) -> &Cipher<Aes> {
        &self.cipher
    }

    /// One pass from `buf`'s input into its output in direction `dir` under `nonce`; the full
    /// tag. On one thread a separate output is written straight from the input; the parallel
    /// loop, which needs the two apart as slices, gets the input copied over first
    /// ([`AesGcm::decrypt_into_detached`] has them apart and needs no copy). Inlined, so that
    /// the buffer reaches the kernel without a copy of its own (see `gcmx_x86`'s `message`).
    #[inline(always)]
    fn run(&self, dir: Direction, nonce: &[u8], aad: &[u8], buf: InOutBuf<'_, '_, u8>) -> [u8; 16] {
        match self.parallel {
            Some(par) if parallel_pays(buf.len()) => {
                let chunk = parallel_chunk(buf.len());
                let mut j0 = self.cipher.j0(nonce);
                let full = par(
                    &self.cipher,
                    dir,
                    &j0,
                    aad,
                    Io::InPlace(buf.into_out_with_copied_in()),
                    chunk,
                );
                wipe16(&mut j0);
                full
            }
            _ => self.cipher.crypt_nonce(dir, nonce, aad, buf),
        }
    }

    /// Open `buf` under `nonce`, as [`AesGcm::run`] runs it, and compare the tag with `tag` in
    /// constant time: whether it matches (on a mismatch the output holds unauthenticated
    /// plaintext, for the caller to restore or wipe). On one thread the kernel compares it
    /// (see `Cipher::open_nonce`); the parallel path's expected tag is compared here and wiped.
    #[inline(always)]
    fn open_run(&self, nonce: &[u8], aad: &[u8], buf: InOutBuf<'_, '_, u8>, tag: &[u8]) -> bool {
        if self.parallel.is_some() && parallel_pays(buf.len()) {
            let mut expected = self.run(Direction::Open, nonce, aad, buf);
            let ok = tag_matches(&expected, tag);
            wipe16(&mut expected);
            return ok;
        }
        self.cipher.open_nonce(nonce, aad, buf, tag)
    }
}

impl<Aes, N, T> AesGcm<Aes, N, T>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt,
    N: ArraySize,
    T: TagSize,
{
    /// Decrypts `ciphertext` into the separate buffer `plaintext` (of the same length) and
    /// verifies `tag`, in one pass: the input is read once and only the output is written, with
    /// no copy of the input first and no second read of it. With [`AesGcm::with_multicore`], a
    /// large message is split over rayon's threads, each chunk still in one pass.
    ///
    /// On failure the call returns `Err(aead::Error)` and `plaintext` is zeroed: it never holds
    /// unauthenticated plaintext once the call returns. That is the difference from
    /// [`AeadInOut::decrypt_inout_detached`] with a separate output, which leaves the output
    /// untouched on failure and so must read the input twice (the tag first, then the
    /// decryption). Lengths that differ are an error, with `plaintext` zeroed too.
    ///
    /// ```
    /// # mod gcmx { pub use gcmx_core::{aead, Aes128Gcm, Nonce}; } // the names `gcmx` re-exports
    /// use gcmx::{Aes128Gcm, Nonce, aead::{AeadInOut, KeyInit}};
    /// let cipher = Aes128Gcm::new(&[7u8; 16].into());
    /// let nonce = Nonce::<gcmx::aead::consts::U12>::from([1u8; 12]);
    /// let mut ct = *b"read once";
    /// let tag = cipher.encrypt_inout_detached(&nonce, b"", (&mut ct[..]).into()).unwrap();
    /// let mut pt = [0u8; 9];
    /// cipher.decrypt_into_detached(&nonce, b"", &ct, &mut pt, &tag).unwrap();
    /// assert_eq!(&pt, b"read once");
    /// ct[0] ^= 1;
    /// assert!(cipher.decrypt_into_detached(&nonce, b"", &ct, &mut pt, &tag).is_err());
    /// assert_eq!(pt, [0u8; 9]);
    /// ```
    #[inline]
    pub fn decrypt_into_detached(
        &self,
        nonce: &Nonce<N>,
        associated_data: &[u8],
        ciphertext: &[u8],
        plaintext: &mut [u8],
        tag: &Tag<T>,
    ) -> aead::Result<()> {
        let len = ciphertext.len();
        let valid = within_limits(associated_data.len(), len)
            && !nonce.is_empty()
            && plaintext.len() == len;
        let parallel = self.parallel.is_some() && parallel_pays(len);
        if !valid || self.uncached || parallel {
            return self.decrypt_into_other(nonce, associated_data, ciphertext, plaintext, tag);
        }
        // One thread, one pass (equal lengths: `new` does not fail), the tag compared at once:
        // the same steps as an open in place.
        if let Ok(b) = InOutBuf::new(ciphertext, &mut *plaintext)
            && self.cipher.open_nonce(nonce, associated_data, b, tag)
        {
            return Ok(());
        }
        plaintext.zeroize();
        Err(aead::Error)
    }

    /// [`AesGcm::decrypt_into_detached`] off its one-thread path, out of line: arguments it
    /// refuses, the parallel loop and the uncached output.
    #[inline(never)]
    fn decrypt_into_other(
        &self,
        nonce: &[u8],
        aad: &[u8],
        ciphertext: &[u8],
        plaintext: &mut [u8],
        tag: &Tag<T>,
    ) -> aead::Result<()> {
        let len = ciphertext.len();
        let valid = within_limits(aad.len(), len) && !nonce.is_empty() && plaintext.len() == len;
        let dir = Direction::Open;
        let mut expected = match self.parallel {
            _ if !valid => None,
            // Chunks on rayon's threads, each from the ciphertext into the plaintext.
            Some(par) if parallel_pays(len) => {
                let io = match self.uncached {
                    true => Io::ApartUncached(ciphertext, &mut *plaintext),
                    false => Io::Apart(ciphertext, &mut *plaintext),
                };
                let mut j0 = self.cipher.j0(nonce);
                let full = par(&self.cipher, dir, &j0, aad, io, parallel_chunk(len));
                wipe16(&mut j0);
                Some(full)
            }
            _ if self.uncached => {
                let mut j0 = self.cipher.j0(nonce);
                let full = self
                    .cipher
                    .open_uncached(&j0, aad, ciphertext, &mut *plaintext);
                wipe16(&mut j0);
                full
            }
            // `decrypt_into_detached` runs every other message itself
            _ => None,
        };
        let ok = expected.is_some_and(|e| tag_matches(&e, tag));
        if let Some(e) = expected.as_mut() {
            wipe_unless_released::<T>(e, ok);
        }
        if !ok {
            plaintext.zeroize();
            return Err(aead::Error);
        }
        Ok(())
    }
}

impl<Aes, N, T> KeySizeUser for AesGcm<Aes, N, T>
where
    Aes: KeySizeUser,
{
    type KeySize = Aes::KeySize;
}

/// Keyed from the raw key, AES-128/192/256 run the stitched x86-64 kernels where the CPU has
/// them (the `aes` crate's types without making their cipher, any other `Aes` checked against
/// them first); `From<Aes>` (no raw key) runs the given cipher.
impl<Aes, N, T> KeyInit for AesGcm<Aes, N, T>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt + KeyInit,
{
    fn new(key: &aead::Key<Self>) -> Self {
        let cipher = Cipher::aes(key).unwrap_or_else(|| Cipher::with_key(Aes::new(key), key));
        Self::from_cipher(cipher)
    }
}

impl<Aes, N, T> From<Aes> for AesGcm<Aes, N, T>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt,
{
    fn from(cipher: Aes) -> Self {
        Self::from_cipher(Cipher::new(cipher))
    }
}

impl<Aes, N, T> AeadCore for AesGcm<Aes, N, T>
where
    N: ArraySize,
    T: TagSize,
{
    type NonceSize = N;
    type TagSize = T;
    const TAG_POSITION: TagPosition = TagPosition::Postfix;
}

impl<Aes, N, T> AeadInOut for AesGcm<Aes, N, T>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt,
    N: ArraySize,
    T: TagSize,
{
    #[inline]
    fn encrypt_inout_detached(
        &self,
        nonce: &Nonce<N>,
        associated_data: &[u8],
        buffer: InOutBuf<'_, '_, u8>,
    ) -> aead::Result<Tag<T>> {
        if !within_limits(associated_data.len(), buffer.len()) {
            return Err(aead::Error);
        }
        if nonce.is_empty() {
            return Err(aead::Error);
        }
        let mut full = self.run(Direction::Seal, nonce, associated_data, buffer);
        // Copied into a tag made first, not converted from the slice (`try_from`, a `Result`
        // the caller's copy of the tag then went through memory once more: a 16-byte seal took
        // about 9 cycles longer on a Zen 3).
        let mut tag = Tag::<T>::default();
        tag.copy_from_slice(&full[..T::USIZE]);
        wipe_unless_released::<T>(&mut full, true);
        Ok(tag)
    }

    /// Verifies the tag; on success `buffer`'s output holds the plaintext. On failure it is left
    /// as it was given (in place: the ciphertext; with a separate output: untouched).
    #[inline]
    fn decrypt_inout_detached(
        &self,
        nonce: &Nonce<N>,
        associated_data: &[u8],
        mut buffer: InOutBuf<'_, '_, u8>,
        tag: &Tag<T>,
    ) -> aead::Result<()> {
        if !within_limits(associated_data.len(), buffer.len()) {
            return Err(aead::Error);
        }
        if nonce.is_empty() {
            return Err(aead::Error);
        }
        let in_place = buffer.get_in().as_ptr() == buffer.get_out().as_ptr();
        let ok = if in_place {
            // One fused pass; on a mismatch gcmx's forgery policy (`Refused`): a second pass
            // of the keystream gives the ciphertext back before returning.
            let buf = buffer.get_out();
            let ok = self.open_run(nonce, associated_data, buf.into(), tag);
            if !ok {
                Refused::apply(
                    buf,
                    |b| {
                        let mut again = self.run(Direction::Seal, nonce, associated_data, b.into());
                        again.zeroize();
                        Ok(())
                    },
                    |b| b.zeroize(),
                );
            }
            ok
        } else {
            self.decrypt_apart(nonce, associated_data, buffer, tag)
        };
        if ok { Ok(()) } else { Err(aead::Error) }
    }
}

/// Messages up to this length open into another buffer through a wiped buffer on the stack.
const OPEN_APART_SCRATCH: usize = 512;

impl<Aes, N, T> AesGcm<Aes, N, T>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt,
    N: ArraySize,
    T: TagSize,
{
    /// [`AeadInOut::decrypt_inout_detached`] with the output another buffer, which must stay
    /// untouched unless the tag matches; whether it did. Out of line: an open in place carries
    /// none of it.
    ///
    /// A short message is opened in one pass into a buffer on the stack, copied out if its tag
    /// matches and wiped either way: the two passes that a longer one takes (the tag, then
    /// the decryption) cost a 16-byte message about three times as long.
    #[inline(never)]
    fn decrypt_apart(
        &self,
        nonce: &Nonce<N>,
        aad: &[u8],
        mut buffer: InOutBuf<'_, '_, u8>,
        tag: &Tag<T>,
    ) -> bool {
        let n = buffer.len();
        if n <= OPEN_APART_SCRATCH {
            let mut scratch = [0u8; OPEN_APART_SCRATCH];
            // equal lengths: `new` does not fail (were it to, nothing is written)
            let Ok(b) = InOutBuf::new(buffer.get_in(), &mut scratch[..n]) else {
                return false;
            };
            let ok = self.open_run(nonce, aad, b, tag);
            if ok {
                buffer.get_out().copy_from_slice(&scratch[..n]);
            }
            scratch[..n].zeroize();
            return ok;
        }
        // Check the input first, write only if it is authentic.
        let mut j0 = self.cipher.j0(nonce);
        let mut expected = self.cipher.tag_of(&j0, aad, buffer.get_in());
        wipe16(&mut j0);
        let ok = tag_matches(&expected, tag);
        wipe_unless_released::<T>(&mut expected, ok);
        if ok {
            let mut full = self.run(Direction::Open, nonce, aad, buffer);
            wipe_unless_released::<T>(&mut full, true);
        }
        ok
    }
}

/// Wipe a full tag unless all of it is the caller's already: a full 16-byte tag a seal returned
/// (`released`), or the expected tag of an open whose tag matched (`released`: it equals the
/// received one). A forged message's expected tag would make the forgery pass, and the bytes past
/// a short tag are never released: those are wiped.
#[inline]
fn wipe_unless_released<T: TagSize>(full: &mut [u8; 16], released: bool) {
    if !released || T::USIZE < 16 {
        wipe16(full);
    }
}

/// Keys, H and the round keys are wiped when an `AesGcm` is dropped (the `aes` cipher by the
/// `aes` crate's `zeroize` feature, the hash keys and the stitched kernels' keys by gcmx).
impl<Aes, N, T> zeroize::ZeroizeOnDrop for AesGcm<Aes, N, T> where Aes: zeroize::ZeroizeOnDrop {}

impl<Aes, N, T> core::fmt::Debug for AesGcm<Aes, N, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AesGcm").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aead::Aead;

    /// `KeyInit` (raw key known) takes the stitched kernels where the CPU has them, `From<Aes>`
    /// the generic path; both produce the same ciphertext and tag.
    #[test]
    fn key_init_is_stitched_and_agrees_with_from() {
        let key = [0x5cu8; 32];
        let a = Aes256Gcm::new(&key.into());
        let b = Aes256Gcm::from(Aes256::new(&key.into()));
        assert_eq!(a.cipher.is_stitched(), crate::backend::stitched_supported());
        assert!(!b.cipher.is_stitched());
        let nonce = Nonce::<U12>::from([3u8; 12]);
        for len in [0usize, 1, 16, 255, 256, 1000, 70_000] {
            let pt: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let ca = a.encrypt(&nonce, pt.as_slice()).unwrap();
            let cb = b.encrypt(&nonce, pt.as_slice()).unwrap();
            assert_eq!(ca, cb, "len {len}");
            assert_eq!(b.decrypt(&nonce, ca.as_slice()).unwrap(), pt);
        }
    }

    /// Out of place (input and output separate buffers) gives the bytes and tag of in place,
    /// and leaves the input as it was, on every path and at sizes around the kernels' steps.
    #[test]
    fn out_of_place_equals_in_place() {
        let key = [0x3au8; 32];
        let nonce = Nonce::<U12>::from([4u8; 12]);
        for cipher in [
            Aes256Gcm::new(&key.into()),
            Aes256Gcm::from(Aes256::new(&key.into())),
            Aes256Gcm::new(&key.into()).with_multicore(),
        ] {
            for len in [
                0usize, 1, 15, 16, 63, 64, 255, 511, 512, 513, 1000, 4097, 300_001,
            ] {
                let pt: Vec<u8> = (0..len).map(|i| (i * 31 + 5) as u8).collect();
                let mut ct = pt.clone();
                let tag = cipher
                    .encrypt_inout_detached(&nonce, b"ad", ct.as_mut_slice().into())
                    .unwrap();
                let mut out = vec![0xC3u8; len];
                let io = InOutBuf::new(pt.as_slice(), out.as_mut_slice()).unwrap();
                let tag2 = cipher.encrypt_inout_detached(&nonce, b"ad", io).unwrap();
                assert_eq!((&out, tag2), (&ct, tag), "seal, len {len}");
                assert_eq!(pt, (0..len).map(|i| (i * 31 + 5) as u8).collect::<Vec<_>>());
                let mut back = vec![0x3Cu8; len];
                let io = InOutBuf::new(ct.as_slice(), back.as_mut_slice()).unwrap();
                cipher
                    .decrypt_inout_detached(&nonce, b"ad", io, &tag)
                    .unwrap();
                assert_eq!(back, pt, "open, len {len}");
            }
        }
    }

    /// A failed decryption leaves the buffer exactly as given, in place and out of place, on
    /// both paths, serial and multi-core.
    #[test]
    fn failed_decrypt_leaves_buffers_untouched() {
        let key = [0x11u8; 16];
        let nonce = Nonce::<U12>::from([9u8; 12]);
        for cipher in [
            Aes128Gcm::new(&key.into()),
            Aes128Gcm::from(Aes128::new(&key.into())),
            Aes128Gcm::new(&key.into()).with_multicore(),
        ] {
            // 512 and 513: either side of the short path through a buffer on the stack
            for len in [0usize, 17, 512, 513, 4096, 300_000] {
                let pt: Vec<u8> = (0..len).map(|i| (i * 13) as u8).collect();
                let mut ct = pt.clone();
                let mut tag = cipher
                    .encrypt_inout_detached(&nonce, b"ad", ct.as_mut_slice().into())
                    .unwrap();
                tag[3] ^= 1;
                let mut buf = ct.clone();
                assert!(
                    cipher
                        .decrypt_inout_detached(&nonce, b"ad", buf.as_mut_slice().into(), &tag)
                        .is_err()
                );
                assert_eq!(buf, ct, "in place, len {len}");
                let mut out = vec![0xEEu8; len];
                let io = InOutBuf::new(ct.as_slice(), out.as_mut_slice()).unwrap();
                assert!(
                    cipher
                        .decrypt_inout_detached(&nonce, b"ad", io, &tag)
                        .is_err()
                );
                assert!(out.iter().all(|&b| b == 0xEE), "out of place, len {len}");
                tag[3] ^= 1;
                let io = InOutBuf::new(ct.as_slice(), out.as_mut_slice()).unwrap();
                cipher
                    .decrypt_inout_detached(&nonce, b"ad", io, &tag)
                    .unwrap();
                assert_eq!(out, pt);
            }
        }
    }

    /// The one-pass decryption into another buffer gives the plaintext on every path (output
    /// cached or not) and at sizes around the kernels' steps, leaves its input as it was, and
    /// on any failure (a changed tag, ciphertext or associated data, lengths that differ)
    /// zeroes its output.
    #[test]
    fn decrypt_into_opens_or_zeroes() {
        let key = [0x42u8; 24];
        let nonce = Nonce::<U12>::from([6u8; 12]);
        for cipher in [
            Aes192Gcm::new(&key.into()),
            Aes192Gcm::from(Aes192::new(&key.into())),
            Aes192Gcm::new(&key.into()).with_multicore(),
            Aes192Gcm::from(Aes192::new(&key.into())).with_multicore(),
            Aes192Gcm::new(&key.into()).with_uncached_output(),
            Aes192Gcm::new(&key.into())
                .with_multicore()
                .with_uncached_output(),
            Aes192Gcm::from(Aes192::new(&key.into())).with_uncached_output(),
        ] {
            for len in [0usize, 1, 15, 16, 255, 256, 513, 4097, 300_001] {
                let pt: Vec<u8> = (0..len).map(|i| (i * 29 + 3) as u8).collect();
                let mut ct = pt.clone();
                let tag = cipher
                    .encrypt_inout_detached(&nonce, b"ad", ct.as_mut_slice().into())
                    .unwrap();
                let kept = ct.clone();
                let mut out = vec![0xA5u8; len];
                cipher
                    .decrypt_into_detached(&nonce, b"ad", &ct, &mut out, &tag)
                    .unwrap();
                assert_eq!(out, pt, "len {len}");
                assert_eq!(ct, kept, "input, len {len}");
                let zeroed = |out: &[u8]| out.iter().all(|&b| b == 0);
                let mut bad = tag;
                bad[15] ^= 0x80;
                out.fill(0xA5);
                assert!(
                    cipher
                        .decrypt_into_detached(&nonce, b"ad", &ct, &mut out, &bad)
                        .is_err()
                );
                assert!(zeroed(&out), "tag, len {len}");
                out.fill(0xA5);
                assert!(
                    cipher
                        .decrypt_into_detached(&nonce, b"aD", &ct, &mut out, &tag)
                        .is_err()
                );
                assert!(zeroed(&out), "aad, len {len}");
                if len > 0 {
                    let mut flipped = ct.clone();
                    flipped[len / 2] ^= 1;
                    out.fill(0xA5);
                    assert!(
                        cipher
                            .decrypt_into_detached(&nonce, b"ad", &flipped, &mut out, &tag)
                            .is_err()
                    );
                    assert!(zeroed(&out), "ciphertext, len {len}");
                }
                let mut longer = vec![0xA5u8; len + 1];
                assert!(
                    cipher
                        .decrypt_into_detached(&nonce, b"ad", &ct, &mut longer, &tag)
                        .is_err()
                );
                assert!(zeroed(&longer), "lengths, len {len}");
            }
        }
    }
}
