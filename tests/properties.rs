//! Property tests (proptest): for random key sizes, nonces of 1 to 64 bytes, associated data,
//! message lengths across the serial/parallel threshold and the 2^32 counter wrap, and every
//! accepted tag length, every backend and both APIs agree with a reference, and tampering with
//! the tag, ciphertext, associated data or nonce always fails and leaves the buffer as
//! documented (the ciphertext, as given). Batches are all or nothing.
//!
//! The reference is `aes-gcm` 0.11 for 12-byte nonces and SP 800-38D composed from the `aes`,
//! `ctr` and `ghash` crates for the others (checked against `aes-gcm` below). Failing cases are
//! shrunk and printed by proptest; `PROPTEST_CASES=<n>` runs more.

mod common;

use aes_gcm::aes::cipher::{BlockCipherEncrypt, KeyIvInit, StreamCipher};
use aes_gcm::aes::{Aes128, Aes192, Aes256};
use common::{TAG_LENGTHS, backends, gcm, nonce_for_j0};
use gcmx::aead::{AeadInOut, KeyInit};
use gcmx::{Gcm, GcmError, OpenJob, SealJob};
use ghash::GHash;
use ghash::universal_hash::UniversalHash;
use proptest::prelude::*;

const THRESHOLD: usize = 256 * 1024;

/// SP 800-38D for any nonce length, from the `aes`, `ctr` and `ghash` crates: (ciphertext, full tag).
fn reference(key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> (Vec<u8>, [u8; 16]) {
    match key.len() {
        16 => spec::<Aes128>(key, nonce, aad, pt),
        24 => spec::<Aes192>(key, nonce, aad, pt),
        _ => spec::<Aes256>(key, nonce, aad, pt),
    }
}

fn spec<A>(key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> (Vec<u8>, [u8; 16])
where
    A: BlockCipherEncrypt
        + aes_gcm::aes::cipher::KeyInit
        + aes_gcm::aes::cipher::BlockSizeUser<BlockSize = aes_gcm::aes::cipher::consts::U16>,
{
    let aes = A::new_from_slice(key).unwrap();
    let mut h = aes_gcm::aes::Block::default();
    aes.encrypt_block(&mut h);
    let ghash = GHash::new(&h);
    let j0: [u8; 16] = if nonce.len() == 12 {
        let mut b = [0u8; 16];
        b[..12].copy_from_slice(nonce);
        b[15] = 1;
        b
    } else {
        let mut g = ghash.clone();
        g.update_padded(nonce);
        let mut len = [0u8; 16];
        len[8..].copy_from_slice(&(nonce.len() as u64 * 8).to_be_bytes());
        g.update_padded(&len);
        g.finalize().into()
    };
    let c = u32::from_be_bytes(j0[12..].try_into().unwrap()).wrapping_add(1);
    let mut ctr = j0;
    ctr[12..].copy_from_slice(&c.to_be_bytes());
    let mut ct = pt.to_vec();
    ctr::Ctr32BE::<A>::new_from_slices(key, &ctr)
        .unwrap()
        .apply_keystream(&mut ct);
    let mut g = ghash;
    g.update_padded(aad);
    g.update_padded(&ct);
    let mut lens = [0u8; 16];
    lens[..8].copy_from_slice(&(aad.len() as u64 * 8).to_be_bytes());
    lens[8..].copy_from_slice(&(ct.len() as u64 * 8).to_be_bytes());
    g.update_padded(&lens);
    let s: [u8; 16] = g.finalize().into();
    let mut mask = aes_gcm::aes::Block::from(j0);
    aes.encrypt_block(&mut mask);
    let mut tag = [0u8; 16];
    for i in 0..16 {
        tag[i] = s[i] ^ mask[i];
    }
    (ct, tag)
}

/// One message's inputs.
#[derive(Clone, Debug)]
struct Msg {
    key: Vec<u8>,
    nonce: Vec<u8>,
    aad: Vec<u8>,
    pt: Vec<u8>,
    tag_len: usize,
}

/// Lengths: mostly short, some around block edges, the parallel threshold and chunk sizes.
fn length() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0usize..600,
        2 => 600usize..70_000,
        1 => (THRESHOLD - 40)..(THRESHOLD + 40),
        1 => (THRESHOLD + 40)..(3 * THRESHOLD),
    ]
}

fn msg() -> impl Strategy<Value = Msg> {
    let key = prop_oneof![Just(16usize), Just(24), Just(32)]
        .prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n));
    let nonce = prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 12),
        1 => proptest::collection::vec(any::<u8>(), 1..=64),
    ];
    (
        key,
        nonce,
        proptest::collection::vec(any::<u8>(), 0..300),
        length(),
        any::<u64>(),
        0..TAG_LENGTHS.len(),
    )
        .prop_map(|(key, nonce, aad, len, seed, t)| Msg {
            key,
            nonce,
            aad,
            pt: bytes(seed, len),
            tag_len: TAG_LENGTHS[t],
        })
}

/// Cheap deterministic bytes (long messages would make proptest's shrinking slow).
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn seal(g: &Gcm, m: &Msg) -> (Vec<u8>, Vec<u8>) {
    let mut buf = m.pt.clone();
    let mut tag = vec![0u8; m.tag_len];
    g.encrypt_detached(&m.nonce, &m.aad, &mut buf, &mut tag)
        .unwrap();
    (buf, tag)
}

/// The typed API for 12-byte nonces and full tags, with and without `with_multicore`.
fn typed_seal(m: &Msg, multicore: bool) -> Option<(Vec<u8>, Vec<u8>)> {
    fn run<C: KeyInit + AeadInOut>(c: C, m: &Msg) -> (Vec<u8>, Vec<u8>) {
        let mut buf = m.pt.clone();
        let nonce = gcmx::aead::Nonce::<C>::try_from(m.nonce.as_slice()).unwrap();
        let tag = c
            .encrypt_inout_detached(&nonce, &m.aad, buf.as_mut_slice().into())
            .unwrap();
        (buf, tag.to_vec())
    }
    if m.nonce.len() != 12 || m.tag_len != 16 {
        return None;
    }
    Some(match (m.key.len(), multicore) {
        (16, false) => run(gcmx::Aes128Gcm::new_from_slice(&m.key).unwrap(), m),
        (16, true) => run(
            gcmx::Aes128Gcm::new_from_slice(&m.key)
                .unwrap()
                .with_multicore(),
            m,
        ),
        (24, false) => run(gcmx::Aes192Gcm::new_from_slice(&m.key).unwrap(), m),
        (24, true) => run(
            gcmx::Aes192Gcm::new_from_slice(&m.key)
                .unwrap()
                .with_multicore(),
            m,
        ),
        (_, false) => run(gcmx::Aes256Gcm::new_from_slice(&m.key).unwrap(), m),
        (_, true) => run(
            gcmx::Aes256Gcm::new_from_slice(&m.key)
                .unwrap()
                .with_multicore(),
            m,
        ),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    /// Every backend and the typed API give the reference's ciphertext and tag, and open it back.
    #[test]
    fn every_backend_and_api_matches_the_reference(m in msg()) {
        let (want_ct, want_tag) = reference(&m.key, &m.nonce, &m.aad, &m.pt);
        for backend in backends() {
            let g = gcm(&m.key, backend);
            let (ct, tag) = seal(&g, &m);
            prop_assert!(ct == want_ct, "{backend:?}: ciphertext");
            prop_assert_eq!(&tag[..], &want_tag[..m.tag_len], "{:?}: tag", backend);
            let mut back = ct.clone();
            g.decrypt_detached(&m.nonce, &m.aad, &mut back, &tag).unwrap();
            prop_assert!(back == m.pt, "{backend:?}: round trip");
        }
        for multicore in [false, true] {
            if let Some((ct, tag)) = typed_seal(&m, multicore) {
                prop_assert!(ct == want_ct, "typed (multicore {multicore}): ciphertext");
                prop_assert_eq!(&tag[..], &want_tag[..], "typed: tag");
            }
        }
    }

    /// Flipping any bit of the tag, ciphertext, associated data or nonce makes decryption fail
    /// with `Authentication` and leaves the buffer as it was given, on every backend and in the
    /// typed API.
    #[test]
    fn tampering_always_fails_and_leaves_the_ciphertext(m in msg(), which in 0usize..4, bit in any::<usize>()) {
        let g0 = gcm(&m.key, gcmx::Backend::Cpu);
        let (ct, tag) = seal(&g0, &m);
        let (mut ct2, mut tag2, mut aad2, mut nonce2) = (ct.clone(), tag.clone(), m.aad.clone(), m.nonce.clone());
        let field: &mut Vec<u8> = match which {
            0 => &mut tag2,
            1 if !ct2.is_empty() => &mut ct2,
            2 if !aad2.is_empty() => &mut aad2,
            _ => &mut nonce2,
        };
        let bit = bit % (field.len() * 8);
        field[bit / 8] ^= 1 << (bit % 8);
        for backend in backends() {
            let g = gcm(&m.key, backend);
            let mut buf = ct2.clone();
            let r = g.decrypt_detached(&nonce2, &aad2, &mut buf, &tag2);
            prop_assert_eq!(r, Err(GcmError::Authentication), "{:?}", backend);
            prop_assert!(buf == ct2, "{backend:?}: the buffer changed");
        }
        if m.key.len() == 32 && nonce2.len() == 12 && m.tag_len == 16 {
            let c = gcmx::Aes256Gcm::new_from_slice(&m.key).unwrap();
            let mut buf = ct2.clone();
            let n = gcmx::Nonce::<gcmx::aead::consts::U12>::try_from(nonce2.as_slice()).unwrap();
            let t = gcmx::Tag::try_from(tag2.as_slice()).unwrap();
            prop_assert!(c.decrypt_inout_detached(&n, &aad2, buf.as_mut_slice().into(), &t).is_err());
            prop_assert!(buf == ct2, "typed: the buffer changed");
        }
    }

    /// The 32-bit counter wraps (inc32) the same way on every backend as in the reference: nonces
    /// constructed so that J0's low word sits just below 2^32.
    #[test]
    fn counter_wrap(key_len in prop_oneof![Just(16usize), Just(24), Just(32)], upper in any::<u128>(),
                    before in 0u32..5000, len in 0usize..(3 * THRESHOLD), seed in any::<u64>()) {
        let key = bytes(seed ^ 0x55, key_len);
        let j0 = ((upper >> 32) << 32) | u128::from(u32::MAX - before);
        let nonce = nonce_for_j0(&key, j0);
        let m = Msg { key, nonce: nonce.to_vec(), aad: bytes(seed, 7), pt: bytes(seed, len), tag_len: 16 };
        let (want_ct, want_tag) = reference(&m.key, &m.nonce, &m.aad, &m.pt);
        for backend in backends() {
            let (ct, tag) = seal(&gcm(&m.key, backend), &m);
            prop_assert!(ct == want_ct, "{backend:?}: ciphertext across the wrap");
            prop_assert_eq!(&tag[..], &want_tag[..], "{:?}: tag", backend);
        }
    }

    /// A batch seals like one call per message; forging any one message fails the whole open and
    /// gives every buffer back as its ciphertext.
    #[test]
    fn batches_are_all_or_nothing(key_len in prop_oneof![Just(16usize), Just(32)], seed in any::<u64>(),
                                  lens in proptest::collection::vec(0usize..3000, 1..24),
                                  victim in any::<usize>(), bit in any::<usize>()) {
        let key = bytes(seed, key_len);
        let msgs: Vec<Msg> = lens.iter().enumerate().map(|(i, &len)| Msg {
            key: key.clone(),
            nonce: bytes(seed ^ i as u64, 1 + (i * 7) % 30),
            aad: bytes(seed.rotate_left(i as u32), i % 40),
            pt: bytes(seed.wrapping_add(i as u64), len),
            tag_len: TAG_LENGTHS[i % TAG_LENGTHS.len()],
        }).collect();
        for backend in backends() {
            let g = gcm(&key, backend);
            let want: Vec<_> = msgs.iter().map(|m| seal(&g, m)).collect();
            let mut bufs: Vec<Vec<u8>> = msgs.iter().map(|m| m.pt.clone()).collect();
            let mut tags: Vec<Vec<u8>> = msgs.iter().map(|m| vec![0u8; m.tag_len]).collect();
            let mut jobs: Vec<SealJob<'_>> = bufs.iter_mut().zip(tags.iter_mut()).zip(&msgs)
                .map(|((buf, tag), m)| SealJob { nonce: &m.nonce, aad: &m.aad, buf, tag }).collect();
            g.encrypt_batch(&mut jobs).unwrap();
            drop(jobs);
            for (i, (ct, tag)) in want.iter().enumerate() {
                prop_assert!(bufs[i] == *ct && tags[i] == *tag, "{backend:?}: message {i}");
            }
            let v = victim % msgs.len();
            let t = tags[v].len() * 8;
            tags[v][(bit % t) / 8] ^= 1 << (bit % 8);
            let cts = bufs.clone();
            let mut jobs: Vec<OpenJob<'_>> = bufs.iter_mut().zip(&tags).zip(&msgs)
                .map(|((buf, tag), m)| OpenJob { nonce: &m.nonce, aad: &m.aad, buf, tag }).collect();
            prop_assert_eq!(g.decrypt_batch(&mut jobs), Err(GcmError::Authentication));
            drop(jobs);
            prop_assert!(bufs == cts, "{backend:?}: a buffer is not its ciphertext after a failed batch");
        }
    }
}

/// The composed reference agrees with aes-gcm where aes-gcm has the nonce size.
#[test]
fn reference_agrees_with_aes_gcm() {
    use gcmx::aead::consts::{U1, U12, U16, U60};
    fn ag<C: KeyInit + AeadInOut>(key: &[u8], nonce: &[u8], pt: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let c = C::new_from_slice(key).unwrap();
        let mut buf = pt.to_vec();
        let n = gcmx::aead::Nonce::<C>::try_from(nonce).unwrap();
        let t = c
            .encrypt_inout_detached(&n, b"ad", buf.as_mut_slice().into())
            .unwrap();
        (buf, t.to_vec())
    }
    for len in [0usize, 1, 16, 33, 1000] {
        let pt = bytes(len as u64, len);
        for (nlen, key) in [
            (1usize, vec![3u8; 16]),
            (12, vec![4u8; 24]),
            (16, vec![5u8; 32]),
            (60, vec![6u8; 16]),
        ] {
            let nonce = bytes(nlen as u64 + 9, nlen);
            let (ct, tag) = reference(&key, &nonce, b"ad", &pt);
            let want = match (key.len(), nlen) {
                (16, 1) => ag::<aes_gcm::AesGcm<Aes128, U1>>(&key, &nonce, &pt),
                (24, 12) => ag::<aes_gcm::AesGcm<Aes192, U12>>(&key, &nonce, &pt),
                (32, 16) => ag::<aes_gcm::AesGcm<Aes256, U16>>(&key, &nonce, &pt),
                _ => ag::<aes_gcm::AesGcm<Aes128, U60>>(&key, &nonce, &pt),
            };
            assert_eq!((ct, tag.to_vec()), want, "len {len}, nonce {nlen}");
        }
    }
}
