//! The library against aes-gcm 0.11 on arbitrary inputs, through both APIs: sealing gives
//! aes-gcm's bytes; after an arbitrary change to the ciphertext, tag or associated data, opening
//! succeeds exactly when aes-gcm's does, with the same plaintext, and a refused buffer is given
//! back as the ciphertext it was (the typed API: untouched; the runtime API: the same). gcmx's
//! one-pass `decrypt_into_detached` gives the same verdict and plaintext, and zeros when it refuses.
#![no_main]

use aes_gcm::aead::array::typenum::Unsigned;
use aes_gcm::aead::consts::{U1, U12, U13, U16, U60};
use aes_gcm::aead::{AeadCore, AeadInOut, KeyInit};
use aes_gcm::aes::{Aes128, Aes192, Aes256};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    key: [u8; 32],
    key_size: u8,
    nonce: [u8; 60],
    nonce_size: u8,
    tag_size: u8,
    backend: u8,
    aad: Vec<u8>,
    msg: Vec<u8>,
    /// (position in ciphertext || tag || aad, xor mask); none = the authentic message.
    change: Option<(u32, u8)>,
}

/// gcmx's `decrypt_into_detached` of one instantiation: (cipher, nonce, aad, ciphertext, output,
/// tag) -> accepted.
type OpenInto<G, R> = fn(
    &G,
    &aes_gcm::aead::Nonce<R>,
    &[u8],
    &[u8],
    &mut [u8],
    &aes_gcm::aead::Tag<R>,
) -> bool;

/// One (reference, gcmx) pair of the same key, nonce and tag sizes.
fn run<R, G>(inp: &Input, key: &[u8], nonce: &[u8], into: OpenInto<G, R>)
where
    R: KeyInit + AeadInOut,
    G: KeyInit + AeadInOut<NonceSize = R::NonceSize, TagSize = R::TagSize>,
{
    let r = R::new_from_slice(key).unwrap();
    let g = G::new_from_slice(key).unwrap();
    let n = aes_gcm::aead::Nonce::<R>::try_from(nonce).unwrap();
    let tag_len = <R as AeadCore>::TagSize::USIZE;

    let mut ct = inp.msg.clone();
    let tag = r.encrypt_inout_detached(&n, &inp.aad, ct.as_mut_slice().into()).unwrap();
    let mut ct2 = inp.msg.clone();
    let tag2 = g.encrypt_inout_detached(&n, &inp.aad, ct2.as_mut_slice().into()).unwrap();
    assert_eq!(ct, ct2, "typed seal: ciphertext");
    assert_eq!(tag, tag2, "typed seal: tag");

    let backends = [gcmx::Backend::Cpu, gcmx::Backend::CpuParallel, gcmx::Backend::Auto];
    let gcm = gcmx::Gcm::with_backend(key, backends[usize::from(inp.backend) % 3]).unwrap();
    let mut ct3 = inp.msg.clone();
    let mut tag3 = vec![0u8; tag_len];
    gcm.encrypt_detached(nonce, &inp.aad, &mut ct3, &mut tag3).unwrap();
    assert_eq!(ct, ct3, "runtime seal: ciphertext");
    assert_eq!(tag.as_slice(), tag3.as_slice(), "runtime seal: tag");

    let (mut ct, mut tag, mut aad) = (ct, tag, inp.aad.clone());
    if let Some((pos, mask)) = inp.change {
        let total = ct.len() + tag.len() + aad.len();
        let p = pos as usize % total;
        if p < ct.len() {
            ct[p] ^= mask;
        } else if p < ct.len() + tag.len() {
            tag[p - ct.len()] ^= mask;
        } else {
            aad[p - ct.len() - tag.len()] ^= mask;
        }
    }

    let mut want = ct.clone();
    let want_ok = r.decrypt_inout_detached(&n, &aad, want.as_mut_slice().into(), &tag).is_ok();

    let mut got = ct.clone();
    let ok = g.decrypt_inout_detached(&n, &aad, got.as_mut_slice().into(), &tag).is_ok();
    assert_eq!(ok, want_ok, "typed open: verdict");
    assert_eq!(&got, if ok { &want } else { &ct }, "typed open: buffer");

    let mut out = vec![0xA5u8; ct.len()];
    let ok = into(&g, &n, &aad, &ct, &mut out, &tag);
    assert_eq!(ok, want_ok, "typed one-pass open: verdict");
    if ok {
        assert_eq!(out, want, "typed one-pass open: plaintext");
    } else {
        assert!(out.iter().all(|&b| b == 0), "typed one-pass open: output not zeroed");
    }

    let mut got = ct.clone();
    let res = gcm.decrypt_detached(nonce, &aad, &mut got, &tag);
    assert_eq!(res.is_ok(), want_ok, "runtime open: verdict {res:?}");
    if !want_ok {
        assert_eq!(res, Err(gcmx::GcmError::Authentication));
    }
    assert_eq!(&got, if want_ok { &want } else { &ct }, "runtime open: buffer");
}

macro_rules! by_tag {
    ($aes:ty, $n:ty, $inp:expr, $key:expr, $nonce:expr) => {
        match $inp.tag_size % 3 {
            0 => run::<aes_gcm::AesGcm<$aes, $n, U16>, gcmx::AesGcm<$aes, $n, U16>>(
                $inp,
                $key,
                $nonce,
                |g, n, a, c, p, t| g.decrypt_into_detached(n, a, c, p, t).is_ok(),
            ),
            1 => run::<aes_gcm::AesGcm<$aes, $n, U12>, gcmx::AesGcm<$aes, $n, U12>>(
                $inp,
                $key,
                $nonce,
                |g, n, a, c, p, t| g.decrypt_into_detached(n, a, c, p, t).is_ok(),
            ),
            _ => run::<aes_gcm::AesGcm<$aes, $n, U13>, gcmx::AesGcm<$aes, $n, U13>>(
                $inp,
                $key,
                $nonce,
                |g, n, a, c, p, t| g.decrypt_into_detached(n, a, c, p, t).is_ok(),
            ),
        }
    };
}

macro_rules! by_nonce {
    ($aes:ty, $inp:expr, $key:expr) => {
        match $inp.nonce_size % 4 {
            0 => by_tag!($aes, U12, $inp, $key, &$inp.nonce[..12]),
            1 => by_tag!($aes, U1, $inp, $key, &$inp.nonce[..1]),
            2 => by_tag!($aes, U16, $inp, $key, &$inp.nonce[..16]),
            _ => by_tag!($aes, U60, $inp, $key, &$inp.nonce[..60]),
        }
    };
}

fuzz_target!(|inp: Input| {
    match inp.key_size % 3 {
        0 => by_nonce!(Aes128, &inp, &inp.key[..16]),
        1 => by_nonce!(Aes192, &inp, &inp.key[..24]),
        _ => by_nonce!(Aes256, &inp, &inp.key[..32]),
    }
});
