//! gcmx as its users call it: the typed API (`Aes128Gcm` / `Aes256Gcm` through the `aead` traits,
//! and `decrypt_into_detached` for opening into another buffer) and the runtime `Gcm` on
//! `Backend::Cpu` (in place: it has no call with a separate output).

use gcmx::aead::consts::{U12, U16};
use gcmx::aead::inout::InOutBuf;
use gcmx::aead::{AeadInOut, KeyInit};

use crate::peer::{Io, Peer, Place};

/// The typed API's key types, with the one inherent call the benchmark needs.
pub(crate) trait Typed: AeadInOut<NonceSize = U12, TagSize = U16> + KeyInit {
    /// `decrypt_into_detached`: one pass from the ciphertext into another buffer.
    fn open_into(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        ct: &[u8],
        pt: &mut [u8],
        tag: &[u8; 16],
    ) -> bool;
}

macro_rules! typed {
    ($t:ty) => {
        impl Typed for $t {
            #[inline]
            fn open_into(
                &self,
                nonce: &[u8; 12],
                aad: &[u8],
                ct: &[u8],
                pt: &mut [u8],
                tag: &[u8; 16],
            ) -> bool {
                self.decrypt_into_detached(nonce.into(), aad, ct, pt, tag.into())
                    .is_ok()
            }
        }
    };
}
typed!(gcmx::Aes128Gcm);
typed!(gcmx::Aes256Gcm);

/// gcmx's typed API under one key.
#[derive(Debug)]
pub(crate) struct GcmxTyped<C>(pub(crate) C);

impl<C: Typed> GcmxTyped<C> {
    /// The key from its bytes (`KeyInit::new_from_slice`).
    pub(crate) fn new(key: &[u8]) -> Self {
        GcmxTyped(C::new_from_slice(key).expect("key length"))
    }
}

impl<C: Typed> Peer for GcmxTyped<C> {
    fn places(&self) -> &'static [Place] {
        &[Place::InPlace, Place::Separate]
    }

    #[inline]
    fn seal(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>) -> [u8; 16] {
        let buf = match io {
            Io::InPlace(b) => InOutBuf::from(b),
            Io::Separate(i, o) => InOutBuf::new(i, o).expect("equal lengths"),
        };
        let tag = self.0.encrypt_inout_detached(nonce.into(), aad, buf);
        tag.expect("message within GCM's limits").into()
    }

    #[inline]
    fn open(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>, tag: &[u8; 16]) -> bool {
        match io {
            Io::InPlace(b) => self
                .0
                .decrypt_inout_detached(nonce.into(), aad, b.into(), tag.into())
                .is_ok(),
            Io::Separate(ct, pt) => self.0.open_into(nonce, aad, ct, pt, tag),
        }
    }
}

/// gcmx's runtime-sized `Gcm` on the one-core backend.
#[derive(Debug)]
pub(crate) struct GcmxRuntime(pub(crate) gcmx::Gcm);

impl GcmxRuntime {
    /// `Gcm::with_backend(key, Backend::Cpu)`.
    pub(crate) fn new(key: &[u8]) -> Self {
        GcmxRuntime(gcmx::Gcm::with_backend(key, gcmx::Backend::Cpu).expect("key length"))
    }
}

impl Peer for GcmxRuntime {
    fn places(&self) -> &'static [Place] {
        &[Place::InPlace]
    }

    #[inline]
    fn seal(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>) -> [u8; 16] {
        let Io::InPlace(buf) = io else {
            unreachable!("Gcm seals in place only")
        };
        let mut tag = [0u8; 16];
        self.0
            .encrypt_detached(nonce, aad, buf, &mut tag)
            .expect("message within GCM's limits");
        tag
    }

    #[inline]
    fn open(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>, tag: &[u8; 16]) -> bool {
        let Io::InPlace(buf) = io else {
            unreachable!("Gcm opens in place only")
        };
        self.0.decrypt_detached(nonce, aad, buf, tag).is_ok()
    }
}
