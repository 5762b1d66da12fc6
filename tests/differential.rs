//! Differential tests against the `aes-gcm` 0.11 crate (the RustCrypto reference), plus the
//! error contract: bad key / nonce / tag lengths give the right `GcmError` variant, never a panic.
//!
//! Random inputs come from a seeded RNG; the seed is printed. Replay a run with
//! `GCMX_TEST_SEED=<seed> cargo test --release --test differential -- --nocapture`.

mod common;

use aes_gcm::aes::cipher::{BlockCipherEncrypt, BlockSizeUser};
use aes_gcm::aes::{Aes128, Aes192, Aes256};
use common::{TAG_LENGTHS, backends, gcm, hx, nonce_for_j0};
use gcmx::aead::consts::{U1, U8, U12, U16, U60, U128};
use gcmx::aead::{self, AeadInOut, KeyInit};
use gcmx::{Backend, Gcm, GcmError};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

/// Nonce lengths the reference can do (its nonce size is a type parameter).
const NONCE_LENGTHS: [usize; 6] = [1, 8, 12, 16, 60, 128];

fn seed(test: &str) -> u64 {
    let base = match std::env::var("GCMX_TEST_SEED") {
        Ok(s) => {
            let s = s.trim();
            match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse(),
            }
            .unwrap_or_else(|_| panic!("GCMX_TEST_SEED={s:?} is not a u64"))
        }
        Err(_) => rand::rng().random(),
    };
    println!("{test}: seed {base} (replay with GCMX_TEST_SEED={base})");
    base
}

/// Reference seal with a typed `aes-gcm` cipher: (ciphertext, full 16-byte tag).
fn ref_typed<C: KeyInit + AeadInOut>(
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    pt: &[u8],
) -> (Vec<u8>, Vec<u8>) {
    let c = C::new_from_slice(key).expect("reference key size");
    let n = aead::Nonce::<C>::try_from(nonce).expect("reference nonce size");
    let mut buf = pt.to_vec();
    let tag = c
        .encrypt_inout_detached(&n, aad, buf.as_mut_slice().into())
        .expect("reference encrypt");
    (buf, tag.to_vec())
}

fn ref_by_nonce<A>(key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> (Vec<u8>, Vec<u8>)
where
    A: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt + KeyInit,
{
    use aes_gcm::AesGcm;
    match nonce.len() {
        1 => ref_typed::<AesGcm<A, U1>>(key, nonce, aad, pt),
        8 => ref_typed::<AesGcm<A, U8>>(key, nonce, aad, pt),
        12 => ref_typed::<AesGcm<A, U12>>(key, nonce, aad, pt),
        16 => ref_typed::<AesGcm<A, U16>>(key, nonce, aad, pt),
        60 => ref_typed::<AesGcm<A, U60>>(key, nonce, aad, pt),
        128 => ref_typed::<AesGcm<A, U128>>(key, nonce, aad, pt),
        n => unreachable!("no reference type for a {n}-byte nonce"),
    }
}

/// The reference: `aes-gcm` 0.11 (typed `Aes128Gcm`/`Aes256Gcm` for 96-bit nonces).
fn reference(key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> (Vec<u8>, Vec<u8>) {
    match (key.len(), nonce.len()) {
        (16, 12) => ref_typed::<aes_gcm::Aes128Gcm>(key, nonce, aad, pt),
        (32, 12) => ref_typed::<aes_gcm::Aes256Gcm>(key, nonce, aad, pt),
        (16, _) => ref_by_nonce::<Aes128>(key, nonce, aad, pt),
        (24, _) => ref_by_nonce::<Aes192>(key, nonce, aad, pt),
        (32, _) => ref_by_nonce::<Aes256>(key, nonce, aad, pt),
        (n, _) => unreachable!("key length {n}"),
    }
}

struct Input {
    key: Vec<u8>,
    nonce: Vec<u8>,
    aad: Vec<u8>,
    pt: Vec<u8>,
    tag_len: usize,
}

fn random_bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

fn random_input(rng: &mut StdRng, len: usize) -> Input {
    let key_len = [16, 24, 32][rng.random_range(0..3)];
    // Mostly the 96-bit fast path, often the GHASH-derived J0 path.
    let nonce_len = if rng.random_bool(0.6) {
        12
    } else {
        NONCE_LENGTHS[rng.random_range(0..NONCE_LENGTHS.len())]
    };
    let aad_len = rng.random_range(0..=300);
    let tag_len = if rng.random_bool(0.5) {
        16
    } else {
        TAG_LENGTHS[rng.random_range(0..TAG_LENGTHS.len())]
    };
    Input {
        key: random_bytes(rng, key_len),
        nonce: random_bytes(rng, nonce_len),
        aad: random_bytes(rng, aad_len),
        pt: random_bytes(rng, len),
        tag_len,
    }
}

fn describe(inp: &Input, backend: Backend) -> String {
    format!(
        "[{backend:?}] key {} B, nonce {} B, aad {} B, msg {} B, tag {} B",
        inp.key.len(),
        inp.nonce.len(),
        inp.aad.len(),
        inp.pt.len(),
        inp.tag_len
    )
}

/// Flips one random bit of the ciphertext, the tag, the AAD or the nonce and checks that
/// decryption refuses with `Authentication` and gives the buffer back as it was (the ciphertext).
fn check_flip(rng: &mut StdRng, g: &Gcm, inp: &Input, ct: &[u8], tag: &[u8], ctx: &str) {
    let mut ct = ct.to_vec();
    let mut tag = tag.to_vec();
    let mut aad = inp.aad.clone();
    let mut nonce = inp.nonce.clone();
    let mut targets = vec!["tag", "nonce"];
    if !ct.is_empty() {
        targets.push("ciphertext");
    }
    if !aad.is_empty() {
        targets.push("aad");
    }
    let what = targets[rng.random_range(0..targets.len())];
    let field: &mut Vec<u8> = match what {
        "tag" => &mut tag,
        "nonce" => &mut nonce,
        "ciphertext" => &mut ct,
        _ => &mut aad,
    };
    let bit = rng.random_range(0..field.len() * 8);
    field[bit / 8] ^= 1 << (bit % 8);
    let given = ct.clone();
    let r = g.decrypt_detached(&nonce, &aad, &mut ct, &tag);
    assert_eq!(
        r,
        Err(GcmError::Authentication),
        "{ctx}: bit {bit} of the {what} flipped, decrypt gave {r:?}"
    );
    assert!(
        ct == given,
        "{ctx}: bit {bit} of the {what} flipped: buffer is not the ciphertext it was given"
    );
}

/// Runs `inp` on `g` against the reference (ct, full tag).
fn check_against(
    rng: &mut StdRng,
    g: &Gcm,
    inp: &Input,
    want_ct: &[u8],
    want_tag: &[u8],
    ctx: &str,
) {
    let mut buf = inp.pt.clone();
    let mut tag = vec![0u8; inp.tag_len];
    g.encrypt_detached(&inp.nonce, &inp.aad, &mut buf, &mut tag)
        .unwrap_or_else(|e| panic!("{ctx}: encrypt: {e}"));
    if buf != want_ct {
        let at = buf.iter().zip(want_ct).position(|(a, b)| a != b);
        panic!("{ctx}: ciphertext differs from aes-gcm (first differing byte {at:?})");
    }
    assert_eq!(
        hx(&tag),
        hx(&want_tag[..inp.tag_len]),
        "{ctx}: tag differs from aes-gcm"
    );
    g.decrypt_detached(&inp.nonce, &inp.aad, &mut buf, &tag)
        .unwrap_or_else(|e| panic!("{ctx}: decrypt of our own output: {e}"));
    assert!(buf == inp.pt, "{ctx}: decrypt did not round-trip");
    check_flip(rng, g, inp, want_ct, &tag, ctx);
}

#[test]
fn every_length_0_to_600() {
    let mut rng = StdRng::seed_from_u64(seed("every_length_0_to_600"));
    let backends = backends();
    for len in 0..=600 {
        let inp = random_input(&mut rng, len);
        let (ct, tag) = reference(&inp.key, &inp.nonce, &inp.aad, &inp.pt);
        for &backend in &backends {
            let g = gcm(&inp.key, backend);
            check_against(&mut rng, &g, &inp, &ct, &tag, &describe(&inp, backend));
        }
        // The typed API must agree too (96-bit nonces, full tags).
        if inp.nonce.len() == 12 {
            let (tct, ttag) = match inp.key.len() {
                16 => ref_typed::<gcmx::Aes128Gcm>(&inp.key, &inp.nonce, &inp.aad, &inp.pt),
                24 => ref_typed::<gcmx::Aes192Gcm>(&inp.key, &inp.nonce, &inp.aad, &inp.pt),
                _ => ref_typed::<gcmx::Aes256Gcm>(&inp.key, &inp.nonce, &inp.aad, &inp.pt),
            };
            assert!(
                tct == ct && ttag == tag,
                "typed gcmx differs from aes-gcm at length {len}"
            );
        }
    }
    println!(
        "lengths 0..=600 x {} backends agree with aes-gcm",
        backends.len()
    );
}

#[test]
fn large_messages() {
    let mut rng = StdRng::seed_from_u64(seed("large_messages"));
    const MIB: usize = 1 << 20;
    let mut sizes = vec![MIB - 1, MIB, MIB + 1, 16 * MIB + 5, 64 * MIB + 3];
    // A few random mid-size messages (the multi-block / multi-chunk paths).
    for _ in 0..8 {
        sizes.push(rng.random_range(601..=300_000));
    }
    let backends = backends();
    let start = std::time::Instant::now();
    for (i, &len) in sizes.iter().enumerate() {
        let mut inp = random_input(&mut rng, len);
        if i == 3 {
            inp.nonce = random_bytes(&mut rng, 60); // one big message on the GHASH-J0 path
        }
        let (ct, tag) = reference(&inp.key, &inp.nonce, &inp.aad, &inp.pt);
        for &backend in &backends {
            let g = gcm(&inp.key, backend);
            check_against(&mut rng, &g, &inp, &ct, &tag, &describe(&inp, backend));
        }
    }
    println!(
        "{} large messages (up to 64 MiB + 3) x {} backends agree with aes-gcm in {:.1?}",
        sizes.len(),
        backends.len(),
        start.elapsed()
    );
}

/// inc32 wraps within the low 32 bits of the counter block (SP 800-38D 6.2). A 96-bit nonce
/// starts the counter at 2, but any other nonce length gives an arbitrary J0, so we construct
/// 16-byte nonces whose J0 low word sits just below 2^32 and check the wrap on every backend
/// against aes-gcm, with messages long enough that the wrap lands inside later parallel chunks.
#[test]
fn counter_wrap_constructed_nonces() {
    let mut rng = StdRng::seed_from_u64(seed("counter_wrap_constructed_nonces"));
    let mut key = [0u8; 16];
    rng.fill_bytes(&mut key);
    let upper: u128 = (rng.random::<u128>() >> 32) << 32;
    let cases: [(u32, usize); 6] = [
        (u32::MAX, 64),      // first counter block is already 0
        (u32::MAX - 1, 100), // 1 block before the wrap
        (u32::MAX - 2, 16 * 3 + 1),
        (u32::MAX - 700, 16 * 1000 + 9), // wrap in the middle
        (u32::MAX - 40_000, 2 << 20),    // wrap ~640 KiB in: inside a later chunk
        (u32::MAX - 200_000, (4 << 20) + 3),
    ];
    for (low, len) in cases {
        let j0 = upper | u128::from(low);
        let nonce = nonce_for_j0(&key, j0);
        let aad = random_bytes(&mut rng, 13);
        let pt = random_bytes(&mut rng, len);
        let (ct, tag) = reference(&key, &nonce, &aad, &pt);
        // Independent check that the constructed nonce really gives this J0: the first
        // keystream block is AES_K(inc32(J0)).
        {
            use aes_gcm::aes::cipher::KeyInit as _;
            let aes = Aes128::new(&key.into());
            let ctr1 = upper | u128::from(low.wrapping_add(1));
            let mut ks = aes_gcm::aes::Block::from(ctr1.to_be_bytes());
            aes.encrypt_block(&mut ks);
            let first: Vec<u8> = pt.iter().zip(ks.iter()).map(|(p, k)| p ^ k).collect();
            assert_eq!(
                first,
                ct[..first.len()],
                "constructed nonce does not give J0"
            );
        }
        for backend in backends() {
            let g = gcm(&key, backend);
            let mut buf = pt.clone();
            let mut t = [0u8; 16];
            g.encrypt_detached(&nonce, &aad, &mut buf, &mut t).unwrap();
            if buf != ct {
                let at = buf.iter().zip(&ct).position(|(a, b)| a != b).unwrap();
                panic!(
                    "[{backend:?}] J0 low word {low:#x}, {len} B: ciphertext differs from \
                     aes-gcm at byte {at} (block {})",
                    at / 16
                );
            }
            assert_eq!(hx(&t), hx(&tag), "[{backend:?}] J0 low word {low:#x}: tag");
            g.decrypt_detached(&nonce, &aad, &mut buf, &t).unwrap();
            assert!(buf == pt, "[{backend:?}] J0 low word {low:#x}: round trip");
        }
    }
}

#[test]
fn bad_key_lengths() {
    for len in (0..=65).filter(|n| ![16, 24, 32].contains(n)) {
        let key = vec![0x42u8; len];
        assert_eq!(
            Gcm::new(&key).err(),
            Some(GcmError::KeyLength(len)),
            "Gcm::new, {len}-byte key"
        );
        for backend in backends() {
            assert_eq!(
                Gcm::with_backend(&key, backend).err(),
                Some(GcmError::KeyLength(len)),
                "[{backend:?}] {len}-byte key"
            );
        }
    }
    for len in [16, 24, 32] {
        assert!(Gcm::new(&vec![1u8; len]).is_ok(), "{len}-byte key refused");
    }
    // The boundary cases, spelled out.
    for len in [0, 15, 17, 33] {
        assert_eq!(
            Gcm::new(&vec![0u8; len]).err(),
            Some(GcmError::KeyLength(len))
        );
    }
}

#[test]
fn bad_nonce_and_tag_lengths() {
    for backend in backends() {
        let g = gcm(&[7u8; 16], backend);
        let msg = b"sixteen byte msg and then some".to_vec();

        // Empty nonce.
        let mut buf = msg.clone();
        let mut tag = [0u8; 16];
        assert_eq!(
            g.encrypt_detached(&[], b"aad", &mut buf, &mut tag),
            Err(GcmError::NonceLength(0)),
            "[{backend:?}] encrypt, empty nonce"
        );
        let mut buf = msg.clone();
        assert_eq!(
            g.decrypt_detached(&[], b"aad", &mut buf, &tag),
            Err(GcmError::NonceLength(0)),
            "[{backend:?}] decrypt, empty nonce"
        );

        // Tag lengths: exactly TAG_LENGTHS are accepted (4 and 8 only with `hazmat`).
        for t in 0..=40 {
            let mut buf = msg.clone();
            let mut tag = vec![0u8; t];
            let r = g.encrypt_detached(&[9u8; 12], b"aad", &mut buf, &mut tag);
            if TAG_LENGTHS.contains(&t) {
                assert_eq!(r, Ok(()), "[{backend:?}] encrypt, {t}-byte tag refused");
                let mut ct = buf.clone();
                assert_eq!(
                    g.decrypt_detached(&[9u8; 12], b"aad", &mut ct, &tag),
                    Ok(())
                );
                assert_eq!(ct, msg);
            } else {
                assert_eq!(
                    r,
                    Err(GcmError::TagLength(t)),
                    "[{backend:?}] encrypt, {t}-byte tag"
                );
                let mut buf = msg.clone();
                let r = g.decrypt_detached(&[9u8; 12], b"aad", &mut buf, &vec![0u8; t]);
                assert_eq!(
                    r,
                    Err(GcmError::TagLength(t)),
                    "[{backend:?}] decrypt, {t}-byte tag"
                );
            }
        }
        // The boundary cases, spelled out.
        for t in [0, 3, 5, 11, 17] {
            let mut buf = msg.clone();
            let r = g.encrypt_detached(&[1u8; 12], &[], &mut buf, &mut vec![0u8; t]);
            assert_eq!(r, Err(GcmError::TagLength(t)));
        }

        // Empty message and empty AAD are fine; so is a 1-byte nonce.
        let mut empty = [];
        let mut tag = [0u8; 16];
        g.encrypt_detached(&[0u8; 1], &[], &mut empty, &mut tag)
            .unwrap();
        g.decrypt_detached(&[0u8; 1], &[], &mut empty, &tag)
            .unwrap();
    }
}
