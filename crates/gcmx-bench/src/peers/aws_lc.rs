//! aws-lc-rs (AWS-LC's AES-GCM) through `LessSafeKey`: in place with the tag apart
//! (`seal_in_place_separate_tag`, `open_in_place_separate_tag`) and into another buffer
//! (`seal_out_of_place_scatter`, `open_separate_gather`).

use aws_lc_rs::aead::{AES_128_GCM, AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

use crate::peer::{Io, Peer, Place};

/// aws-lc-rs under one key.
#[derive(Debug)]
pub(crate) struct AwsLc(LessSafeKey);

impl AwsLc {
    /// The key from its bytes.
    pub(crate) fn new(key: &[u8]) -> Self {
        let alg = if key.len() == 16 {
            &AES_128_GCM
        } else {
            &AES_256_GCM
        };
        AwsLc(LessSafeKey::new(
            UnboundKey::new(alg, key).expect("key length"),
        ))
    }
}

impl Peer for AwsLc {
    fn places(&self) -> &'static [Place] {
        &[Place::InPlace, Place::Separate]
    }

    #[inline]
    fn seal(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>) -> [u8; 16] {
        let (n, a) = (Nonce::assume_unique_for_key(*nonce), Aad::from(aad));
        let mut tag = [0u8; 16];
        match io {
            Io::InPlace(b) => {
                let t = self.0.seal_in_place_separate_tag(n, a, b).expect("seal");
                tag.copy_from_slice(t.as_ref());
            }
            Io::Separate(i, o) => self
                .0
                .seal_out_of_place_scatter(n, a, i, o, &[], &mut tag)
                .expect("seal"),
        }
        tag
    }

    #[inline]
    fn open(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>, tag: &[u8; 16]) -> bool {
        let (n, a) = (Nonce::assume_unique_for_key(*nonce), Aad::from(aad));
        match io {
            Io::InPlace(b) => self.0.open_in_place_separate_tag(n, a, tag, b).is_ok(),
            Io::Separate(ct, pt) => self.0.open_separate_gather(n, a, ct, tag, pt).is_ok(),
        }
    }
}
