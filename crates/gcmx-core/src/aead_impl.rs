//! The typed API: `AesGcm<Aes, NonceSize, TagSize>` implementing the RustCrypto `aead` 0.6
//! traits, named and shaped like the `aes-gcm` 0.11 crate's so that only the import changes.

use core::marker::PhantomData;

use aead::array::{Array, ArraySize};
use aead::consts::{U12, U16};
use aead::inout::InOutBuf;
use aead::{AeadCore, AeadInOut, KeyInit, KeySizeUser, TagPosition};
use aes::cipher::{BlockCipherEncrypt, BlockSizeUser};
use aes::{Aes128, Aes192, Aes256};

use crate::cipher::Cipher;
use crate::engine::AUTO_PARALLEL_MIN;
use crate::frame::{check_lengths, verify_or_wipe};

/// AES-GCM nonce.
pub type Nonce<NonceSize> = Array<u8, NonceSize>;
/// AES-GCM tag.
pub type Tag<TagSize = U16> = Array<u8, TagSize>;
/// AES-GCM key.
pub type Key<B> = aead::Key<B>;

/// AES-128-GCM with a 96-bit nonce and a 128-bit tag.
pub type Aes128Gcm = AesGcm<Aes128, U12>;
/// AES-192-GCM with a 96-bit nonce and a 128-bit tag.
pub type Aes192Gcm = AesGcm<Aes192, U12>;
/// AES-256-GCM with a 96-bit nonce and a 128-bit tag.
pub type Aes256Gcm = AesGcm<Aes256, U12>;

/// Tag sizes SP 800-38D allows: 4, 8, 12, 13, 14, 15 or 16 bytes. Sealed.
pub trait TagSize: private::SealedTagSize {}
impl<T: private::SealedTagSize> TagSize for T {}

mod private {
    use aead::array::ArraySize;
    use aead::consts;
    pub trait SealedTagSize: ArraySize + aead::array::typenum::Unsigned {}
    impl SealedTagSize for consts::U4 {}
    impl SealedTagSize for consts::U8 {}
    impl SealedTagSize for consts::U12 {}
    impl SealedTagSize for consts::U13 {}
    impl SealedTagSize for consts::U14 {}
    impl SealedTagSize for consts::U15 {}
    impl SealedTagSize for consts::U16 {}
}

/// AES-GCM, generic over the AES implementation, the nonce size and the tag size.
///
/// Messages of [`AUTO_PARALLEL_MIN`] bytes or more run on all cores (rayon); output is
/// byte-identical either way.
///
/// ```
/// use gcmx_core::{Aes256Gcm, Nonce, aead::{Aead, AeadCore, KeyInit}};
/// let cipher = Aes256Gcm::new(&[7u8; 32].into());
/// let nonce = Nonce::<aead::consts::U12>::from([1u8; 12]); // unique per message!
/// let ct = cipher.encrypt(&nonce, b"hello".as_ref()).unwrap();
/// assert_eq!(cipher.decrypt(&nonce, ct.as_ref()).unwrap(), b"hello");
/// ```
#[derive(Clone)]
pub struct AesGcm<Aes, NonceSize, TagSize = U16> {
    cipher: Cipher<Aes>,
    nonce_size: PhantomData<NonceSize>,
    tag_size: PhantomData<TagSize>,
}

impl<Aes, N, T> KeySizeUser for AesGcm<Aes, N, T>
where
    Aes: KeySizeUser,
{
    type KeySize = Aes::KeySize;
}

/// Keyed from the raw key, AES-128/192/256 run the stitched x86-64 kernels where the CPU has
/// them ([`Cipher::with_key`]); `From<Aes>` (no raw key) runs the generic path.
impl<Aes, N, T> KeyInit for AesGcm<Aes, N, T>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt + KeyInit + 'static,
{
    fn new(key: &aead::Key<Self>) -> Self {
        AesGcm {
            cipher: Cipher::with_key(Aes::new(key), key),
            nonce_size: PhantomData,
            tag_size: PhantomData,
        }
    }
}

impl<Aes, N, T> From<Aes> for AesGcm<Aes, N, T>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt,
{
    fn from(cipher: Aes) -> Self {
        AesGcm {
            cipher: Cipher::new(cipher),
            nonce_size: PhantomData,
            tag_size: PhantomData,
        }
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
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt + Sync,
    N: ArraySize,
    T: TagSize,
{
    fn encrypt_inout_detached(
        &self,
        nonce: &Nonce<N>,
        associated_data: &[u8],
        buffer: InOutBuf<'_, '_, u8>,
    ) -> aead::Result<Tag<T>> {
        check_lengths(associated_data.len(), buffer.len())?;
        if nonce.is_empty() {
            return Err(aead::Error);
        }
        let j0 = self.cipher.j0(nonce);
        let buf = buffer.into_out_with_copied_in();
        let full = if buf.len() >= AUTO_PARALLEL_MIN && rayon::current_num_threads() > 1 {
            let chunk = Cipher::<Aes>::parallel_chunk(buf.len());
            self.cipher.seal_parallel(&j0, associated_data, buf, chunk)
        } else {
            self.cipher.seal_serial(&j0, associated_data, buf)
        };
        Tag::<T>::try_from(&full[..T::USIZE]).map_err(|_| aead::Error)
    }

    fn decrypt_inout_detached(
        &self,
        nonce: &Nonce<N>,
        associated_data: &[u8],
        buffer: InOutBuf<'_, '_, u8>,
        tag: &Tag<T>,
    ) -> aead::Result<()> {
        check_lengths(associated_data.len(), buffer.len())?;
        if nonce.is_empty() {
            return Err(aead::Error);
        }
        let j0 = self.cipher.j0(nonce);
        let buf = buffer.into_out_with_copied_in();
        let expected = if buf.len() >= AUTO_PARALLEL_MIN && rayon::current_num_threads() > 1 {
            let chunk = Cipher::<Aes>::parallel_chunk(buf.len());
            self.cipher.open_parallel(&j0, associated_data, buf, chunk)
        } else {
            self.cipher.open_serial(&j0, associated_data, buf)
        };
        Ok(verify_or_wipe(&expected, tag, buf)?)
    }
}

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
        assert_eq!(
            a.cipher.is_stitched(),
            gcmx_x86::StitchedKey::cpu_supported()
        );
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
}
