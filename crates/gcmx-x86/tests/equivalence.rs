//! The stitched kernels against the generic path (the `aes`, `ctr` and `ghash` crates): byte for
//! byte, every length 0..=600 and some big ones, all three key sizes, counter wrap-around.

use aes::cipher::{BlockCipherEncrypt, KeyInit, KeyIvInit, StreamCipher};
use gcmx_x86::{InOutBuf, StitchedKey};
use ghash::GHash;
use ghash::universal_hash::UniversalHash;

mod common;
use common::Rng;

/// The key for every kernel width this CPU runs, each forced through its constructor (512-bit,
/// 256-bit, 128-bit); empty, with a note, on a CPU without AES-NI.
fn kernels(key: &[u8]) -> Vec<StitchedKey> {
    let k = StitchedKey::new(key);
    let w = StitchedKey::new_256(key);
    let n = StitchedKey::new_narrow(key);
    for x in [&k, &w, &n] {
        assert_eq!(x.is_some(), StitchedKey::cpu_supported());
    }
    let (Some(k), Some(w), Some(n)) = (k, w, n) else {
        eprintln!("CPU lacks AES-NI/PCLMULQDQ: stitched kernels not tested here");
        return Vec::new();
    };
    let zmm = StitchedKey::cpu_supports_512();
    let wide = StitchedKey::cpu_supports_wide();
    let want = match (zmm, wide) {
        (true, _) => "vaes-vpclmulqdq-512",
        (false, true) => "vaes-vpclmulqdq-256",
        _ => "aesni-pclmulqdq-128",
    };
    assert_eq!(k.kernel_name(), want);
    assert_eq!(
        w.kernel_name(),
        if wide {
            "vaes-vpclmulqdq-256"
        } else {
            "aesni-pclmulqdq-128"
        }
    );
    assert_eq!(n.kernel_name(), "aesni-pclmulqdq-128");
    if !zmm {
        eprintln!("CPU lacks AVX-512: the 512-bit kernels not tested here");
    }
    if !wide {
        eprintln!("CPU lacks VAES/VPCLMULQDQ: only the narrow kernels tested here");
    }
    let mut v = vec![k];
    if zmm {
        v.push(w);
    }
    if wide {
        v.push(n);
    }
    v
}

fn aes_encrypt(key: &[u8], block: &mut [u8; 16]) {
    let mut b = (*block).into();
    match key.len() {
        16 => aes::Aes128::new_from_slice(key)
            .unwrap()
            .encrypt_block(&mut b),
        24 => aes::Aes192::new_from_slice(key)
            .unwrap()
            .encrypt_block(&mut b),
        _ => aes::Aes256::new_from_slice(key)
            .unwrap()
            .encrypt_block(&mut b),
    }
    *block = b.into();
}

/// Generic CTR (inc32 on the last word) through the `ctr` crate.
fn generic_ctr(key: &[u8], ctr: &[u8; 16], buf: &mut [u8]) {
    match key.len() {
        16 => ctr::Ctr32BE::<aes::Aes128>::new_from_slices(key, ctr)
            .unwrap()
            .apply_keystream(buf),
        24 => ctr::Ctr32BE::<aes::Aes192>::new_from_slices(key, ctr)
            .unwrap()
            .apply_keystream(buf),
        _ => ctr::Ctr32BE::<aes::Aes256>::new_from_slices(key, ctr)
            .unwrap()
            .apply_keystream(buf),
    }
}

/// GHASH of the pieces, each zero-padded, through the `ghash` crate.
fn generic_ghash(key: &[u8], pieces: &[&[u8]]) -> u128 {
    let mut h = [0u8; 16];
    aes_encrypt(key, &mut h);
    let mut g = GHash::new(&h.into());
    for p in pieces {
        g.update_padded(p);
    }
    u128::from_be_bytes(g.finalize().into())
}

/// The 12-byte-nonce entry points (J0 = nonce ‖ 0^31 ‖ 1), in place and out of place, against
/// the generic path.
fn check_nonce96(
    k: &StitchedKey,
    key: &[u8],
    aad: &[u8],
    pt: &[u8],
    lenblk: &[u8],
    nonce: [u8; 12],
) {
    let (len, name) = (pt.len(), k.kernel_name());
    let mut j0 = [0u8; 16];
    j0[..12].copy_from_slice(&nonce);
    j0[15] = 1;
    let mut first = j0;
    first[15] = 2;
    let mut want = pt.to_vec();
    generic_ctr(key, &first, &mut want);
    let mut mask = j0;
    aes_encrypt(key, &mut mask);
    let want_tag =
        (generic_ghash(key, &[aad, &want, lenblk]) ^ u128::from_be_bytes(mask)).to_be_bytes();
    let mut m = pt.to_vec();
    let tag = k.seal_message96(&nonce, aad, &mut m[..]);
    assert_eq!(
        (&m, tag),
        (&want, want_tag),
        "{name}: seal_message96, len {len}"
    );
    assert_eq!(
        k.open_message96(&nonce, aad, &mut m[..]),
        want_tag,
        "{name}: open_message96, len {len}"
    );
    assert_eq!(m, pt, "{name}: open_message96 plaintext, len {len}");
    check_checked(
        name,
        &|b, t| k.open_message96_checked(&nonce, aad, b, t),
        &want,
        pt,
        want_tag,
    );
    let mut out = vec![0xA5u8; len];
    let tag = k.seal_message96(&nonce, aad, InOutBuf::new(pt, &mut out).unwrap());
    assert_eq!(
        (&out, tag),
        (&want, want_tag),
        "{name}: seal_message96 out of place, len {len}"
    );
    let mut back = vec![0x5Au8; len];
    let expected = k.open_message96(&nonce, aad, InOutBuf::new(&want, &mut back).unwrap());
    assert_eq!(
        (back.as_slice(), expected),
        (pt, want_tag),
        "{name}: open_message96 out of place, len {len}"
    );
}

/// An open that compares the tag itself (`open_message_checked` or `open_message96_checked`),
/// in place and out of place, against the ciphertext `ct` of `pt` and its full tag: every
/// prefix length a tag may have matches, a change in any compared byte does not, a change past
/// them is not looked at, and an empty or 17-byte tag never matches and leaves the buffer as it
/// was. Decrypted either way when the tag's length is valid.
fn check_checked(
    name: &str,
    open: &dyn Fn(InOutBuf<'_, '_, u8>, &[u8]) -> bool,
    ct: &[u8],
    pt: &[u8],
    full: [u8; 16],
) {
    let len = ct.len();
    for n in [1usize, 4, 8, 12, 13, 15, 16] {
        let mut flips = vec![None, Some(0), Some(n - 1), Some(n / 2)];
        if n < 16 {
            // past the compared bytes: ignored
            flips.push(Some(15));
        }
        for flip in flips {
            let mut t = full;
            if let Some(i) = flip {
                t[i] ^= 0x20;
            }
            let want = flip.is_none_or(|i| i >= n);
            let mut m = ct.to_vec();
            assert_eq!(
                open((&mut m[..]).into(), &t[..n]),
                want,
                "{name}: checked open, len {len}, tag {n}, flip {flip:?}"
            );
            assert_eq!(m, pt, "{name}: checked open plaintext, len {len}");
            let mut out = vec![0x5Au8; len];
            assert_eq!(
                open(InOutBuf::new(ct, &mut out).unwrap(), &t[..n]),
                want,
                "{name}: checked open out of place, len {len}, tag {n}, flip {flip:?}"
            );
            assert_eq!(
                out, pt,
                "{name}: checked open out of place plaintext, len {len}"
            );
        }
    }
    let mut long = [0u8; 17];
    long[..16].copy_from_slice(&full);
    for bad in [&[][..], &long[..]] {
        let mut m = ct.to_vec();
        assert!(
            !open((&mut m[..]).into(), bad),
            "{name}: tag of {} bytes",
            bad.len()
        );
        assert_eq!(
            m,
            ct,
            "{name}: buffer touched for a tag of {} bytes",
            bad.len()
        );
    }
}

/// Seal and open of one message, all against the generic path.
fn check_one(rng: &mut Rng, len: usize, ctr: [u8; 16]) {
    let key = rng.key();
    let aad = rng.upto(101);
    let pt = rng.bytes(len);
    let lenblk = ((aad.len() as u128 * 8) << 64 | (len as u128 * 8)).to_be_bytes();
    for k in kernels(&key) {
        check_kernel(&k, &key, &aad, &pt, &lenblk, ctr);
    }
}

fn check_kernel(k: &StitchedKey, key: &[u8], aad: &[u8], pt: &[u8], lenblk: &[u8], ctr: [u8; 16]) {
    let len = pt.len();
    let name = k.kernel_name();

    let mut ct = pt.to_vec();
    let mut y = 0u128;
    k.ghash(&mut y, aad);
    k.seal(&ctr, &mut y, &mut ct[..]);
    k.ghash(&mut y, lenblk);

    let mut want = pt.to_vec();
    generic_ctr(key, &ctr, &mut want);
    assert_eq!(ct, want, "{name}: ciphertext, len {len}, key {}", key.len());
    let want_y = generic_ghash(key, &[aad, &want, lenblk]);
    assert_eq!(y, want_y, "{name}: GHASH, len {len}, key {}", key.len());

    let mut back = ct.clone();
    let mut y2 = 0u128;
    k.ghash(&mut y2, aad);
    k.open(&ctr, &mut y2, &mut back[..]);
    k.ghash(&mut y2, lenblk);
    assert_eq!(back, pt, "{name}: open, len {len}");
    assert_eq!(y2, want_y, "{name}: open GHASH, len {len}");

    // The one-call message API from J0 = ctr - 1 (so its first block is `ctr`), against the
    // generic tag GHASH ^ AES_K(J0).
    let mut j0 = ctr;
    let low = u32::from_be_bytes([ctr[12], ctr[13], ctr[14], ctr[15]]);
    j0[12..].copy_from_slice(&low.wrapping_sub(1).to_be_bytes());
    let mut mask = j0;
    aes_encrypt(key, &mut mask);
    let want_tag = (want_y ^ u128::from_be_bytes(mask)).to_be_bytes();
    let mut m = pt.to_vec();
    let tag = k.seal_message(&j0, aad, &mut m[..]);
    assert_eq!(m, want, "{name}: seal_message ciphertext, len {len}");
    assert_eq!(tag, want_tag, "{name}: seal_message tag, len {len}");
    let expected = k.open_message(&j0, aad, &mut m[..]);
    assert_eq!(m, pt, "{name}: open_message plaintext, len {len}");
    assert_eq!(expected, want_tag, "{name}: open_message tag, len {len}");
    check_checked(
        name,
        &|b, t| k.open_message_checked(&j0, aad, b, t),
        &want,
        pt,
        want_tag,
    );

    check_nonce96(k, key, aad, pt, lenblk, ctr[..12].try_into().unwrap());

    // The same from one buffer into another: the output as in place, the input only read.
    let mut out = vec![0xA5u8; len];
    let tag = k.seal_message(&j0, aad, InOutBuf::new(pt, &mut out).unwrap());
    assert_eq!(out, want, "{name}: seal_message out of place, len {len}");
    assert_eq!(
        tag, want_tag,
        "{name}: seal_message out of place tag, len {len}"
    );
    let mut back = vec![0x5Au8; len];
    let expected = k.open_message(&j0, aad, InOutBuf::new(&want, &mut back).unwrap());
    assert_eq!(back, pt, "{name}: open_message out of place, len {len}");
    assert_eq!(
        expected, want_tag,
        "{name}: open_message out of place tag, len {len}"
    );
    let (mut y3, mut y4) = (0u128, 0u128);
    let mut out = vec![0u8; len];
    k.ghash(&mut y3, aad);
    k.seal(&ctr, &mut y3, InOutBuf::new(pt, &mut out).unwrap());
    k.ghash(&mut y3, lenblk);
    assert_eq!(
        (out.as_slice(), y3),
        (want.as_slice(), want_y),
        "{name}: seal out of place, len {len}"
    );
    k.ghash(&mut y4, aad);
    k.open(&ctr, &mut y4, InOutBuf::new(&want, &mut out).unwrap());
    k.ghash(&mut y4, lenblk);
    assert_eq!(
        (out.as_slice(), y4),
        (pt, want_y),
        "{name}: open out of place, len {len}"
    );
}

fn random_ctr(rng: &mut Rng) -> [u8; 16] {
    let mut c = [0u8; 16];
    c.copy_from_slice(&rng.bytes(16));
    c
}

#[test]
fn every_length_to_600() {
    let mut rng = Rng(1);
    for len in 0..=600 {
        let ctr = random_ctr(&mut rng);
        check_one(&mut rng, len, ctr);
    }
}

/// Every AAD length up to 17 bytes and message length up to 65 (a message of at most four
/// blocks with at most one block of AAD has a path of its own on the 256- and 128-bit kernels,
/// one of at most one block on the 512-bit ones), every key size.
#[test]
fn every_short_aad_and_length() {
    let mut rng = Rng(10);
    for aad_len in 0..=17 {
        for len in 0..=65 {
            let key = rng.key();
            let aad = rng.bytes(aad_len);
            let pt = rng.bytes(len);
            let ctr = random_ctr(&mut rng);
            let lenblk = ((aad_len as u128 * 8) << 64 | (len as u128 * 8)).to_be_bytes();
            for k in kernels(&key) {
                check_kernel(&k, &key, &aad, &pt, &lenblk, ctr);
            }
        }
    }
}

#[test]
fn big_lengths() {
    let mut rng = Rng(2);
    for len in [
        1023,
        1024,
        1025,
        1536 + 15,
        4096,
        4096 + 255,
        16 * 1024,
        65_536 + 17,
        (1 << 20) + 5,
        3 * (1 << 20) + 250,
    ] {
        let ctr = random_ctr(&mut rng);
        check_one(&mut rng, len, ctr);
    }
}

/// Counters starting at 0xFFFFFFF0 cross 2^32 inside a step and in the tail: the generic path
/// and an explicit block-by-block keystream agree, and byte 11 never changes.
#[test]
fn counter_wraps_mod_2_32() {
    let mut rng = Rng(3);
    // start 0: the message API's J0 (one before the first block) is 0xFFFFFFFF
    for start in [0xFFFF_FFF0u32, 0xFFFF_FFFF, 0xFFFF_FF00, 0] {
        for len in [16usize, 17, 100, 256, 257, 600, 4096 + 33] {
            let mut ctr = random_ctr(&mut rng);
            ctr[12..].copy_from_slice(&start.to_be_bytes());
            check_one(&mut rng, len, ctr);

            let key = rng.key();
            for k in kernels(&key) {
                let mut buf = vec![0u8; len];
                let mut y = 0;
                k.seal(&ctr, &mut y, &mut buf[..]);
                for (i, b) in buf.chunks(16).enumerate() {
                    let mut blk = ctr;
                    blk[12..].copy_from_slice(&start.wrapping_add(i as u32).to_be_bytes());
                    aes_encrypt(&key, &mut blk);
                    let name = k.kernel_name();
                    assert_eq!(b, &blk[..b.len()], "{name}: start {start:#x} block {i}");
                }
            }
        }
    }
}

#[test]
fn ghash_alone_matches() {
    let mut rng = Rng(4);
    for len in (0..=600).chain([4096, 4096 + 1, 70_000]) {
        let key = rng.key();
        let a = rng.upto(300);
        let b = rng.bytes(len);
        for k in kernels(&key) {
            let mut y = 0;
            k.ghash(&mut y, &a);
            k.ghash(&mut y, &b);
            let name = k.kernel_name();
            assert_eq!(y, generic_ghash(&key, &[&a, &b]), "{name}: len {len}");
        }
    }
}

#[test]
fn encrypt_block_matches_aes() {
    let mut rng = Rng(5);
    for _ in 0..200 {
        let key = rng.key();
        let b0 = random_ctr(&mut rng);
        for k in kernels(&key) {
            assert_eq!(k.key_len(), key.len());
            let mut b = b0;
            let mut want = b0;
            k.encrypt_block(&mut b);
            aes_encrypt(&key, &mut want);
            assert_eq!(b, want);
        }
    }
}

/// FIPS 197 appendix C: the three example vectors.
#[test]
fn fips197_vectors() {
    let pt: [u8; 16] = core::array::from_fn(|i| (i as u8) * 0x11);
    let cases: [(usize, u128); 3] = [
        (16, 0x69c4e0d86a7b0430d8cdb78070b4c55a),
        (24, 0xdda97ca4864cdfe06eaf70a0ec0d7191),
        (32, 0x8ea2b7ca516745bfeafc49904b496089),
    ];
    for (n, want) in cases {
        let key: Vec<u8> = (0..n as u8).collect();
        for k in kernels(&key) {
            let mut b = pt;
            k.encrypt_block(&mut b);
            assert_eq!(u128::from_be_bytes(b), want, "AES-{}", n * 8);
        }
    }
}

#[test]
fn bad_key_lengths_are_refused() {
    for n in [0usize, 1, 15, 17, 20, 23, 25, 31, 33, 64] {
        assert!(StitchedKey::new(&vec![0u8; n]).is_none(), "length {n}");
        assert!(
            StitchedKey::new_narrow(&vec![0u8; n]).is_none(),
            "length {n}"
        );
    }
}

/// Seal split at any 16-byte boundary, continuing the state and the counter, equals one call.
#[test]
fn split_calls_continue() {
    let mut rng = Rng(6);
    let key = rng.bytes(32);
    let pt = rng.bytes(1000);
    let ctr = random_ctr(&mut rng);
    for k in kernels(&key) {
        split_calls_continue_with(&k, &pt, ctr);
    }
}

fn split_calls_continue_with(k: &StitchedKey, pt: &[u8], ctr: [u8; 16]) {
    let mut whole = pt.to_vec();
    let mut yw = 0;
    k.seal(&ctr, &mut yw, &mut whole[..]);
    for cut in (0..=1000).step_by(16) {
        let mut parts = pt.to_vec();
        let mut y = 0;
        let (a, b) = parts.split_at_mut(cut);
        k.seal(&ctr, &mut y, a);
        let mut c2 = ctr;
        let low = u32::from_be_bytes([ctr[12], ctr[13], ctr[14], ctr[15]]);
        c2[12..].copy_from_slice(&low.wrapping_add((cut / 16) as u32).to_be_bytes());
        k.seal(&c2, &mut y, b);
        assert_eq!(parts, whole, "cut {cut}");
        assert_eq!(y, yw, "cut {cut}");
    }
}

/// Every value of the counter's last byte (carries into byte 14 at every position within a
/// step), and the last 32-bit counters before the wrap, through several wide and narrow steps.
#[test]
fn every_low_counter_byte() {
    let mut rng = Rng(7);
    for low in 0..=255u8 {
        let mut ctr = random_ctr(&mut rng);
        ctr[15] = low;
        check_one(&mut rng, 16 * 40 + 3, ctr);
        ctr[12..15].copy_from_slice(&[0xFF; 3]);
        check_one(&mut rng, 16 * 40 + 3, ctr);
    }
}

/// Long associated data (whole 512-byte GHASH steps and a tail) through the message API.
#[test]
fn message_with_long_aad() {
    let mut rng = Rng(8);
    for (aad_len, len) in [(511, 33), (512, 0), (1100, 700), (4096 + 17, 16), (0, 5000)] {
        let key = rng.key();
        let aad = rng.bytes(aad_len);
        let pt = rng.bytes(len);
        let ctr = random_ctr(&mut rng);
        let lenblk = ((aad_len as u128 * 8) << 64 | (len as u128 * 8)).to_be_bytes();
        for k in kernels(&key) {
            check_kernel(&k, &key, &aad, &pt, &lenblk, ctr);
        }
    }
}

/// The uncached open (non-temporal stores, from the 512-bit registers or through a piece on the
/// stack) writes what the ordinary open writes and leaves the same GHASH state, at lengths
/// around its steps' and pieces' edges,
/// with the output at every offset from 64-byte alignment (the widest store's), counters
/// crossing 2^32 included;
/// its whole-message form returns the same expected tag. Lengths that differ touch nothing.
#[test]
fn uncached_open_equals_open() {
    let mut rng = Rng(9);
    let piece = 8 * 1024;
    for len in [
        0,
        1,
        15,
        16,
        17,
        511,
        512,
        513,
        3 * 512 + 17,
        piece - 1,
        piece,
        piece + 1,
        3 * piece + 40,
        100_000,
    ] {
        let key = rng.key();
        let ct = rng.bytes(len);
        let aad = rng.upto(40);
        let mut ctr = random_ctr(&mut rng);
        if len % 2 == 1 {
            ctr[12..].copy_from_slice(&0xFFFF_FFF0u32.to_be_bytes());
        }
        for k in kernels(&key) {
            let name = k.kernel_name();
            let mut want = vec![0u8; len];
            let mut y_want = 7u128;
            k.open(&ctr, &mut y_want, InOutBuf::new(&ct, &mut want).unwrap());
            for off in 0..64 {
                let mut out = vec![0xA5u8; len + 64];
                let mut y = 7u128;
                assert!(k.open_uncached(&ctr, &mut y, &ct, &mut out[off..off + len]));
                assert_eq!(
                    &out[off..off + len],
                    &want[..],
                    "{name}: len {len} offset {off}"
                );
                assert!(
                    out[..off].iter().all(|&b| b == 0xA5),
                    "{name}: before the output"
                );
                assert!(out[off + len..].iter().all(|&b| b == 0xA5), "{name}: after");
                assert_eq!(y, y_want, "{name}: len {len} offset {off}");
            }
            let mut plain = vec![0u8; len];
            let tag = k.open_message(&ctr, &aad, InOutBuf::new(&ct, &mut plain).unwrap());
            let mut out = vec![0u8; len + 3];
            assert_eq!(
                k.open_message_uncached(&ctr, &aad, &ct, &mut out[3..]),
                Some(tag),
                "{name}: len {len}"
            );
            assert_eq!(&out[3..], &plain[..], "{name}: len {len}");
            let mut longer = vec![1u8; len + 1];
            assert_eq!(k.open_message_uncached(&ctr, &aad, &ct, &mut longer), None);
            assert!(!k.open_uncached(&ctr, &mut 0, &ct, &mut longer));
            assert!(
                longer.iter().all(|&b| b == 1),
                "{name}: a refused call wrote"
            );
        }
    }
}

/// A clone (whose table of powers is placed anew in its own allocation) seals and opens as the
/// key it was cloned from, on every width, and goes on doing so once that key is dropped.
#[test]
fn clones_equal_their_original() {
    let mut rng = Rng(0xC10E);
    for _ in 0..6 {
        let key = rng.key();
        for k in kernels(&key) {
            let c = k.clone();
            assert_eq!(c.kernel_name(), k.kernel_name());
            let j0: [u8; 16] = rng.bytes(16).try_into().unwrap();
            let aad = rng.upto(40);
            let msgs: Vec<Vec<u8>> = [0, 16, 64, 300, 513, 2000]
                .iter()
                .map(|&n| rng.bytes(n))
                .collect();
            let sealed: Vec<_> = msgs
                .iter()
                .map(|pt| {
                    let mut b = pt.clone();
                    let t = k.seal_message(&j0, &aad, &mut b[..]);
                    (b, t)
                })
                .collect();
            drop(k);
            for (pt, (ct, tag)) in msgs.iter().zip(&sealed) {
                let mut b = pt.clone();
                assert_eq!(
                    c.seal_message(&j0, &aad, &mut b[..]),
                    *tag,
                    "{}",
                    c.kernel_name()
                );
                assert_eq!(&b, ct);
                assert_eq!(c.open_message(&j0, &aad, &mut b[..]), *tag);
                assert_eq!(&b, pt);
            }
        }
    }
}
