//! The `hazmat` module (`--features hazmat`): ranges of a message decrypted with
//! `apply_keystream` equal the plaintext, and `tag` equals the tag `aes-gcm` (an independent
//! implementation) computes, for 12-byte and 60-byte nonces and every key size; the limits are
//! errors that leave the buffer untouched.
//!
//! Seeded RNG; replay with `GCMX_TEST_SEED=<seed> cargo test --release --features hazmat --test hazmat`.
#![cfg(feature = "hazmat")]

use gcmx::aead::array::ArraySize;
use gcmx::aead::consts::{U12, U60};
use gcmx::aead::{AeadInOut, KeyInit};
use gcmx::aes::{Aes128, Aes192, Aes256};
use gcmx::{AesGcm, GcmError, Nonce, P_MAX, hazmat};
mod common;

use common::{bytes, seed};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// For one key size and nonce size: messages sealed by `aes-gcm`, their tags recomputed by
/// `hazmat::tag` and random ranges decrypted by `hazmat::apply_keystream`.
fn ranges_and_tags<Aes, N>(rng: &mut StdRng, key_len: usize)
where
    Aes: gcmx::aes::cipher::BlockCipherEncrypt
        + gcmx::aes::cipher::BlockSizeUser<BlockSize = gcmx::aead::consts::U16>
        + gcmx::aead::KeyInit,
    N: ArraySize,
    AesGcm<Aes, N>: KeyInit,
    aes_gcm::AesGcm<Aes, N>: aes_gcm::aead::KeyInit,
{
    for len in [0usize, 1, 15, 16, 17, 4095, 65_537, 300_000] {
        let key = bytes(rng, key_len);
        let nonce = Nonce::<N>::try_from(bytes(rng, N::USIZE).as_slice()).unwrap();
        let aad_len = rng.random_range(0..100);
        let aad = bytes(rng, aad_len);
        let pt = bytes(rng, len);
        let reference =
            <aes_gcm::AesGcm<Aes, N> as aes_gcm::aead::KeyInit>::new_from_slice(&key).unwrap();
        let mut ct = pt.clone();
        let sent = reference
            .encrypt_inout_detached(&nonce, &aad, ct.as_mut_slice().into())
            .unwrap();

        let ours = AesGcm::<Aes, N>::new_from_slice(&key).unwrap();
        let tag = hazmat::tag(&ours, &nonce, &aad, &ct).unwrap();
        assert_eq!(tag.as_slice(), sent.as_slice(), "tag, len {len}");
        if !ct.is_empty() {
            let mut bad = ct.clone();
            bad[rng.random_range(0..len)] ^= 1 << rng.random_range(0..8);
            assert_ne!(hazmat::tag(&ours, &nonce, &aad, &bad).unwrap(), tag);
        }

        // The whole message, then ranges starting at their block.
        let mut all = ct.clone();
        hazmat::apply_keystream(&ours, &nonce, 0, &mut all).unwrap();
        assert_eq!(all, pt, "whole message, len {len}");
        for _ in 0..50 {
            if len == 0 {
                break;
            }
            let off = rng.random_range(0..len);
            let n = rng.random_range(0..=(len - off).min(40_000));
            let first = off / 16;
            let mut part = ct[first * 16..off + n].to_vec();
            hazmat::apply_keystream(&ours, &nonce, first as u64, &mut part).unwrap();
            assert_eq!(
                &part[off - first * 16..],
                &pt[off..off + n],
                "range {off}+{n} of {len}"
            );
        }

        // Sealing is the same operation: the keystream turns the plaintext into the ciphertext.
        let mut again = pt.clone();
        hazmat::apply_keystream(&ours, &nonce, 0, &mut again).unwrap();
        assert_eq!(again, ct);
        // And the result opens with the tag through the typed API.
        let mut opened = ct.clone();
        ours.decrypt_inout_detached(&nonce, &aad, opened.as_mut_slice().into(), &tag)
            .unwrap();
        assert_eq!(opened, pt);
    }
}

#[test]
fn ranges_and_tags_agree_with_aes_gcm() {
    let rng = &mut StdRng::seed_from_u64(seed());
    ranges_and_tags::<Aes128, U12>(rng, 16);
    ranges_and_tags::<Aes192, U12>(rng, 24);
    ranges_and_tags::<Aes256, U12>(rng, 32);
    ranges_and_tags::<Aes128, U60>(rng, 16);
    ranges_and_tags::<Aes256, U60>(rng, 32);
}

/// The message limit (P_MAX bytes): a range ending on it is allowed, one byte more is refused
/// with the buffer untouched, as are block indices whose byte offset overflows.
#[test]
fn limits_are_errors_that_touch_nothing() {
    let c = gcmx::Aes256Gcm::new(&[9u8; 32].into());
    let nonce = [3u8; 12].into();
    let last = (P_MAX - 16) / 16;
    let mut ok = [0u8; 16];
    hazmat::apply_keystream(&c, &nonce, last, &mut ok).unwrap();
    assert_ne!(ok, [0u8; 16], "a keystream block was applied");
    for (first, len) in [
        (last, 17usize),
        (last + 1, 1),
        (u64::MAX / 16 + 1, 1),
        (u64::MAX, 0),
    ] {
        let mut buf = vec![0u8; len];
        assert_eq!(
            hazmat::apply_keystream(&c, &nonce, first, &mut buf),
            Err(GcmError::PlaintextTooLong),
            "block {first}, {len} bytes"
        );
        assert!(buf.iter().all(|&b| b == 0));
    }
    // A range inside the limit: the same bytes as sealing from the start would give there.
    let mut head = vec![0u8; 64];
    c.encrypt_inout_detached(&nonce, b"", head.as_mut_slice().into())
        .unwrap();
    let mut tail = vec![0u8; 32];
    hazmat::apply_keystream(&c, &nonce, 2, &mut tail).unwrap();
    assert_eq!(tail, head[32..]);
}
