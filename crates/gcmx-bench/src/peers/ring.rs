//! ring through `LessSafeKey`, in place with the tag apart (`seal_in_place_separate_tag`,
//! `open_in_place_separate_tag`); ring has no call with a separate output.

use ring::aead::{AES_128_GCM, AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

use crate::peer::{Io, Peer, Place};

/// ring under one key.
#[derive(Debug)]
pub(crate) struct Ring(LessSafeKey);

impl Ring {
    /// The key from its bytes.
    pub(crate) fn new(key: &[u8]) -> Self {
        let alg = if key.len() == 16 {
            &AES_128_GCM
        } else {
            &AES_256_GCM
        };
        Ring(LessSafeKey::new(
            UnboundKey::new(alg, key).expect("key length"),
        ))
    }
}

impl Peer for Ring {
    fn places(&self) -> &'static [Place] {
        &[Place::InPlace]
    }

    #[inline]
    fn seal(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>) -> [u8; 16] {
        let Io::InPlace(b) = io else {
            unreachable!("ring seals in place only")
        };
        let (n, a) = (Nonce::assume_unique_for_key(*nonce), Aad::from(aad));
        let t = self.0.seal_in_place_separate_tag(n, a, b).expect("seal");
        t.as_ref().try_into().expect("16-byte tag")
    }

    #[inline]
    fn open(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>, tag: &[u8; 16]) -> bool {
        let Io::InPlace(b) = io else {
            unreachable!("ring opens in place only")
        };
        let (n, a) = (Nonce::assume_unique_for_key(*nonce), Aad::from(aad));
        let t = ring::aead::Tag::from(*tag);
        self.0.open_in_place_separate_tag(n, a, t, b, 0..).is_ok()
    }
}
