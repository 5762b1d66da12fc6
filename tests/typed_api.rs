//! The typed API (`gcmx::AesGcm<Aes, NonceSize, TagSize>`) as a drop-in for `aes-gcm` 0.11:
//! for a spread of key, nonce and tag sizes, `AeadInOut` (in place and with separate in/out
//! buffers) and the alloc `Aead` API give byte-identical results to `aes_gcm::AesGcm`, around
//! the multi-core threshold too (with and without `with_multicore`); bad tags are refused and
//! leave the buffers exactly as given, as aes-gcm does.
//!
//! Seeded RNG; replay with `GCMX_TEST_SEED=<seed> cargo test --release --test typed_api`.

use aes_gcm::aes::{Aes128, Aes192, Aes256};
use gcmx::aead::array::typenum::Unsigned;
use gcmx::aead::consts::{U1, U8, U12, U13, U14, U15, U16, U60};
use gcmx::aead::inout::InOutBuf;
use gcmx::aead::{self, Aead, AeadCore, AeadInOut, KeyInit, Payload};
mod common;

use common::{bytes, seed};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Lengths around block edges and around the multi-core threshold (`AUTO_PARALLEL_MIN`).
fn lengths(rng: &mut StdRng) -> Vec<usize> {
    let mut v: Vec<usize> = vec![0, 1, 15, 16, 17, 31, 32, 33, 64, 255, 256, 257];
    v.extend((0..6).map(|_| rng.random_range(0..5000)));
    let t = gcmx_core::backend::AUTO_PARALLEL_MIN;
    v.extend([t - 1, t, t + 1, (1 << 20) + 7]);
    v
}

/// `G` (gcmx) against `R` (aes-gcm, full 16-byte tag) for one input.
fn compare<G, R>(label: &str, key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8])
where
    G: KeyInit + AeadInOut,
    R: KeyInit + AeadInOut,
{
    let g = G::new_from_slice(key).expect("gcmx key size");
    let r = R::new_from_slice(key).expect("aes-gcm key size");
    let gn = aead::Nonce::<G>::try_from(nonce).expect("nonce size");
    let rn = aead::Nonce::<R>::try_from(nonce).expect("nonce size");
    let ctx = format!("{label}: msg {} B, aad {} B", pt.len(), aad.len());

    // Reference.
    let mut want = pt.to_vec();
    let want_tag = r
        .encrypt_inout_detached(&rn, aad, want.as_mut_slice().into())
        .expect("aes-gcm encrypt");
    let tag_len = <G as AeadCore>::TagSize::USIZE;
    let want_tag = &want_tag[..tag_len];

    // In place.
    let mut buf = pt.to_vec();
    let tag = g
        .encrypt_inout_detached(&gn, aad, buf.as_mut_slice().into())
        .unwrap_or_else(|_| panic!("{ctx}: encrypt"));
    assert!(
        buf == want,
        "{ctx}: in-place ciphertext differs from aes-gcm"
    );
    assert_eq!(tag.as_slice(), want_tag, "{ctx}: tag differs from aes-gcm");

    // Separate in and out buffers.
    let mut out = vec![0xa5u8; pt.len()];
    let tag2 = g
        .encrypt_inout_detached(&gn, aad, InOutBuf::new(pt, &mut out).expect("same lengths"))
        .unwrap_or_else(|_| panic!("{ctx}: encrypt in->out"));
    assert!(out == want, "{ctx}: in->out ciphertext differs");
    assert_eq!(tag2, tag, "{ctx}: in->out tag differs");
    let mut back = vec![0x5au8; pt.len()];
    g.decrypt_inout_detached(&gn, aad, InOutBuf::new(&want, &mut back).unwrap(), &tag)
        .unwrap_or_else(|_| panic!("{ctx}: decrypt in->out"));
    assert!(back == pt, "{ctx}: in->out decrypt differs");

    // Round trip in place.
    g.decrypt_inout_detached(&gn, aad, buf.as_mut_slice().into(), &tag)
        .unwrap_or_else(|_| panic!("{ctx}: decrypt"));
    assert!(buf == pt, "{ctx}: round trip");

    // A bad tag: refused, and the buffer is the ciphertext it was given.
    let mut bad = tag.clone();
    bad[tag_len - 1] ^= 0x01;
    let mut buf = want.clone();
    assert!(
        g.decrypt_inout_detached(&gn, aad, buf.as_mut_slice().into(), &bad)
            .is_err(),
        "{ctx}: bad tag accepted"
    );
    assert!(
        buf == want,
        "{ctx}: bad tag refused, but the buffer changed"
    );
    if !want.is_empty() {
        let mut out = vec![0xa5u8; want.len()];
        let mut ct = want.clone();
        ct[0] ^= 0x80;
        assert!(
            g.decrypt_inout_detached(&gn, aad, InOutBuf::new(&ct, &mut out).unwrap(), &tag)
                .is_err(),
            "{ctx}: in->out: modified ciphertext accepted"
        );
        assert!(
            out.iter().all(|&b| b == 0xa5),
            "{ctx}: in->out refusal wrote to out"
        );
    }
}

/// The alloc `Aead` API (postfix tag) against aes-gcm's, for small inputs.
fn compare_alloc<G, R>(label: &str, key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8])
where
    G: KeyInit + AeadInOut,
    R: KeyInit + AeadInOut,
{
    let g = G::new_from_slice(key).unwrap();
    let r = R::new_from_slice(key).unwrap();
    let gn = aead::Nonce::<G>::try_from(nonce).unwrap();
    let rn = aead::Nonce::<R>::try_from(nonce).unwrap();
    let got = g.encrypt(&gn, Payload { msg: pt, aad }).expect("encrypt");
    let want = r
        .encrypt(&rn, Payload { msg: pt, aad })
        .expect("aes-gcm encrypt");
    assert_eq!(got, want, "{label}: Aead::encrypt differs from aes-gcm");
    let back = g.decrypt(&gn, Payload { msg: &got, aad }).expect("decrypt");
    assert_eq!(back, pt, "{label}: Aead::decrypt");
    let mut bad = got.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(
        g.decrypt(&gn, Payload { msg: &bad, aad }).is_err(),
        "{label}: forged"
    );
    // Shorter than a tag: an error, not a panic.
    let short = &got[..got.len().min(3)];
    assert!(
        g.decrypt(&gn, Payload { msg: short, aad }).is_err(),
        "{label}: short input"
    );
}

macro_rules! case {
    ($rng:expr, $aes:ty, $klen:expr, $n:ty, $nlen:expr, $t:ty, $rt:ty) => {{
        let label = format!(
            "AesGcm<{}, {}-byte nonce, {}-byte tag>",
            stringify!($aes),
            $nlen,
            <$t as Unsigned>::USIZE
        );
        let rng: &mut StdRng = $rng;
        let key = bytes(rng, $klen);
        let nonce = bytes(rng, $nlen);
        for len in lengths(rng) {
            let aad_len = rng.random_range(0..=300);
            let aad = bytes(rng, aad_len);
            let pt = bytes(rng, len);
            compare::<gcmx::AesGcm<$aes, $n, $t>, aes_gcm::AesGcm<$aes, $n, $rt>>(
                &label, &key, &nonce, &aad, &pt,
            );
            if len <= 300 {
                // Aead::encrypt appends the full-size tag of each type: only equal tag sizes.
                if <$t as Unsigned>::USIZE == <$rt as Unsigned>::USIZE {
                    compare_alloc::<gcmx::AesGcm<$aes, $n, $t>, aes_gcm::AesGcm<$aes, $n, $rt>>(
                        &label, &key, &nonce, &aad, &pt,
                    );
                }
            }
        }
    }};
}

#[test]
fn typed_matches_aes_gcm() {
    let mut rng = StdRng::seed_from_u64(seed());
    let rng = &mut rng;
    // The aliases.
    case!(rng, Aes128, 16, U12, 12, U16, U16);
    case!(rng, Aes192, 24, U12, 12, U16, U16);
    case!(rng, Aes256, 32, U12, 12, U16, U16);
    // Other nonce sizes (GHASH-derived J0).
    case!(rng, Aes128, 16, U1, 1, U16, U16);
    case!(rng, Aes192, 24, U8, 8, U16, U16);
    case!(rng, Aes256, 32, U16, 16, U16, U16);
    case!(rng, Aes128, 16, U60, 60, U16, U16);
    // Truncated tags: 12..15 bytes exist in aes-gcm; 4 and 8 (hazmat) are compared as prefixes.
    case!(rng, Aes128, 16, U12, 12, U12, U12);
    case!(rng, Aes256, 32, U12, 12, U13, U13);
    case!(rng, Aes192, 24, U8, 8, U14, U14);
    case!(rng, Aes128, 16, U60, 60, U15, U15);
    #[cfg(feature = "hazmat")]
    {
        use gcmx::aead::consts::U4;
        case!(rng, Aes256, 32, U12, 12, U8, U16);
        case!(rng, Aes128, 16, U12, 12, U4, U16);
    }
}

/// `with_multicore` (rayon for messages of 256 KiB and more) gives aes-gcm's bytes too, and a
/// forged tag leaves the buffer as given.
#[test]
fn multicore_matches_aes_gcm() {
    let mut rng = StdRng::seed_from_u64(seed());
    let key = bytes(&mut rng, 32);
    let g = gcmx::Aes256Gcm::new_from_slice(&key)
        .unwrap()
        .with_multicore();
    let r = aes_gcm::Aes256Gcm::new_from_slice(&key).unwrap();
    let nonce = aead::Nonce::<gcmx::Aes256Gcm>::from([7u8; 12]);
    for len in lengths(&mut rng) {
        let pt = bytes(&mut rng, len);
        let mut a = pt.clone();
        let mut b = pt.clone();
        let ta = g
            .encrypt_inout_detached(&nonce, b"x", a.as_mut_slice().into())
            .unwrap();
        let tb = r
            .encrypt_inout_detached(&nonce, b"x", b.as_mut_slice().into())
            .unwrap();
        assert!(a == b && ta == tb, "len {len}");
        let mut bad = ta;
        bad[0] ^= 1;
        assert!(
            g.decrypt_inout_detached(&nonce, b"x", a.as_mut_slice().into(), &bad)
                .is_err()
        );
        assert!(a == b, "len {len}: forged tag changed the buffer");
        g.decrypt_inout_detached(&nonce, b"x", a.as_mut_slice().into(), &ta)
            .unwrap();
        assert!(a == pt, "len {len}: round trip");
    }
}

#[test]
fn aliases_are_the_generic_types() {
    fn same<A: 'static, B: 'static>() -> bool {
        std::any::TypeId::of::<A>() == std::any::TypeId::of::<B>()
    }
    assert!(same::<gcmx::Aes128Gcm, gcmx::AesGcm<Aes128, U12>>());
    assert!(same::<gcmx::Aes192Gcm, gcmx::AesGcm<Aes192, U12>>());
    assert!(same::<gcmx::Aes256Gcm, gcmx::AesGcm<Aes256, U12, U16>>());
}
