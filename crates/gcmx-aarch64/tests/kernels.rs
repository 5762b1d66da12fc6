//! Every entry point of `StitchedKey` against the reference (the `aes`, `ctr` and `ghash`
//! crates), byte for byte and tag for tag: seal and open in place and from one buffer into
//! another, the whole-message forms, GHASH alone, one AES block; every length 0..=600 and some
//! long ones, the three key sizes, GHASH states other than zero, counters crossing 2^32, calls
//! split at block boundaries. Each variant this core runs is checked, the one without EOR3
//! forced through `new_without_eor3` where the core has SHA3.
//!
//! A plain program (`harness = false`), so that it runs under qemu-user, where threads do not
//! start. `GCMX_EXPECT_KERNEL` (`aes-pmull-eor3`, `aes-pmull` or `none`) makes it fail unless
//! `StitchedKey::new` chose that variant: `scripts/aarch64.sh` sets it for each emulated core, so
//! the kernels are never silently skipped. Elsewhere than aarch64 it reports that it did not run.

mod common;

use common::{Rng, Tally, aes_encrypt, length_block, reference_ctr, reference_ghash};
use gcmx_aarch64::{InOutBuf, StitchedKey};

/// The key for every variant this core runs, each forced through its constructor; checks
/// what `new` chose against `GCMX_EXPECT_KERNEL` where that is set.
fn variants(key: &[u8]) -> Vec<StitchedKey> {
    let k = StitchedKey::new(key);
    let b = StitchedKey::new_without_eor3(key);
    assert_eq!(k.is_some(), StitchedKey::cpu_supported());
    assert_eq!(b.is_some(), StitchedKey::cpu_supported());
    let name = k.as_ref().map_or("none", |k| k.kernel_name());
    if let Ok(want) = std::env::var("GCMX_EXPECT_KERNEL") {
        assert_eq!(name, want, "StitchedKey::new chose {name}, expected {want}");
    }
    let want = match (
        StitchedKey::cpu_supported(),
        StitchedKey::cpu_supports_eor3(),
    ) {
        (false, _) => "none",
        (true, true) => "aes-pmull-eor3",
        (true, false) => "aes-pmull",
    };
    assert_eq!(name, want);
    let mut v: Vec<StitchedKey> = k.into_iter().collect();
    if StitchedKey::cpu_supports_eor3() {
        let b = b.unwrap();
        assert_eq!(b.kernel_name(), "aes-pmull");
        v.push(b);
    }
    v
}

/// `ctr` advanced by `n` blocks (inc32).
fn ctr_add(ctr: &[u8; 16], n: usize) -> [u8; 16] {
    let mut c = *ctr;
    let low = u32::from_be_bytes([c[12], c[13], c[14], c[15]]).wrapping_add(n as u32);
    c[12..].copy_from_slice(&low.to_be_bytes());
    c
}

/// Every entry point on one message: `pt` sealed from `ctr` (the first block's counter) with
/// `aad`, the GHASH state entering at `y0`.
fn check_message(
    t: &mut Tally,
    k: &StitchedKey,
    key: &[u8],
    aad: &[u8],
    pt: &[u8],
    ctr: [u8; 16],
    y0: u128,
) {
    let len = pt.len();
    let name = k.kernel_name();
    let id = |what: &str| {
        format!(
            "{name} AES-{} len {len} aad {}: {what}",
            key.len() * 8,
            aad.len()
        )
    };
    let lenblk = length_block(aad.len(), len);
    let mut want = pt.to_vec();
    reference_ctr(key, &ctr, &mut want);
    let want_y = reference_ghash(key, y0, &[aad, &want, &lenblk]);

    // seal and open in place, through the parts
    let mut ct = pt.to_vec();
    let mut y = y0;
    k.ghash(&mut y, aad);
    k.seal(&ctr, &mut y, &mut ct[..]);
    k.ghash(&mut y, &lenblk);
    t.check(ct == want, || id("seal ciphertext"));
    t.check(y == want_y, || id("seal GHASH"));
    let mut back = ct.clone();
    let mut y = y0;
    k.ghash(&mut y, aad);
    k.open(&ctr, &mut y, &mut back[..]);
    k.ghash(&mut y, &lenblk);
    t.check(back == pt, || id("open plaintext"));
    t.check(y == want_y, || id("open GHASH"));

    // the same from one buffer into another: the input only read
    let mut out = vec![0xA5u8; len];
    let mut y = y0;
    k.ghash(&mut y, aad);
    k.seal(&ctr, &mut y, InOutBuf::new(pt, &mut out).unwrap());
    k.ghash(&mut y, &lenblk);
    t.check(out == want && y == want_y, || id("seal apart"));
    let mut out = vec![0x5Au8; len];
    let mut y = y0;
    k.ghash(&mut y, aad);
    k.open(&ctr, &mut y, InOutBuf::new(&want, &mut out).unwrap());
    k.ghash(&mut y, &lenblk);
    t.check(out == pt && y == want_y, || id("open apart"));
    for off in [0usize, 1, 7, 15] {
        let mut out = vec![0xA5u8; len + 16];
        let mut y = y0;
        k.ghash(&mut y, aad);
        let ok = k.open_uncached(&ctr, &mut y, &want, &mut out[off..off + len]);
        k.ghash(&mut y, &lenblk);
        t.check(ok && out[off..off + len] == pt[..] && y == want_y, || {
            id(&format!("open_uncached at offset {off}"))
        });
        t.check(
            out[..off]
                .iter()
                .chain(&out[off + len..])
                .all(|&b| b == 0xA5),
            || id("open_uncached wrote outside its output"),
        );
    }

    // whole messages from J0 = ctr − 1, against the tag GHASH ^ AES_K(J0)
    if y0 == 0 {
        let j0 = ctr_add(&ctr, usize::MAX);
        let mut mask = j0;
        aes_encrypt(key, &mut mask);
        let want_tag = (want_y ^ u128::from_be_bytes(mask)).to_be_bytes();
        let mut m = pt.to_vec();
        let tag = k.seal_message(&j0, aad, &mut m[..]);
        t.check(m == want && tag == want_tag, || id("seal_message in place"));
        let tag = k.open_message(&j0, aad, &mut m[..]);
        t.check(m == pt && tag == want_tag, || id("open_message in place"));
        let mut out = vec![0xA5u8; len];
        let tag = k.seal_message(&j0, aad, InOutBuf::new(pt, &mut out).unwrap());
        t.check(out == want && tag == want_tag, || id("seal_message apart"));
        let mut out = vec![0x5Au8; len];
        let tag = k.open_message(&j0, aad, InOutBuf::new(&want, &mut out).unwrap());
        t.check(out == pt && tag == want_tag, || id("open_message apart"));
        // a 12-byte nonce: the same as `seal_message` from `IV ‖ 0^31 ‖ 1`
        let nonce: [u8; 12] = j0[..12].try_into().unwrap();
        let mut j0n = [0u8; 16];
        j0n[..12].copy_from_slice(&nonce);
        j0n[15] = 1;
        let mut w = pt.to_vec();
        let wtag = k.seal_message(&j0n, aad, &mut w[..]);
        let mut m = pt.to_vec();
        let tag = k.seal_message96(&nonce, aad, &mut m[..]);
        t.check(m == w && tag == wtag, || id("seal_message96 in place"));
        let tag = k.open_message96(&nonce, aad, &mut m[..]);
        t.check(m == pt && tag == wtag, || id("open_message96 in place"));
        let mut out = vec![0xA5u8; len];
        let tag = k.seal_message96(&nonce, aad, InOutBuf::new(pt, &mut out).unwrap());
        t.check(out == w && tag == wtag, || id("seal_message96 apart"));
        let mut out = vec![0x5Au8; len];
        let tag = k.open_message96(&nonce, aad, InOutBuf::new(&w, &mut out).unwrap());
        t.check(out == pt && tag == wtag, || id("open_message96 apart"));
        // the checked opens: every tag length, a change in a compared byte, a change past them
        for n in [1usize, 12, 13, 16] {
            let mut bad = wtag;
            bad[n - 1] ^= 1;
            let mut past = wtag;
            past[15] ^= (n < 16) as u8;
            let mut m = w.clone();
            let ok = k.open_message96_checked(&nonce, aad, &mut m[..], &wtag[..n]);
            let mut m2 = w.clone();
            let no = k.open_message96_checked(&nonce, aad, &mut m2[..], &bad[..n]);
            let mut out = vec![0u8; len];
            let apart =
                k.open_message_checked(&j0n, aad, InOutBuf::new(&w, &mut out).unwrap(), &past[..n]);
            t.check(ok && !no && apart && m == pt && out == pt, || {
                id("checked opens")
            });
        }
        let mut m = w.clone();
        let refused = !k.open_message_checked(&j0n, aad, &mut m[..], &[]);
        t.check(refused && m == w, || {
            id("an empty tag never matches, buffer untouched")
        });
        let mut out = vec![0u8; len + 3];
        let tag = k.open_message_uncached(&j0, aad, &want, &mut out[3..]);
        t.check(tag == Some(want_tag) && out[3..] == pt[..], || {
            id("open_message_uncached")
        });
        let mut longer = vec![1u8; len + 1];
        let refused = k
            .open_message_uncached(&j0, aad, &want, &mut longer)
            .is_none()
            && !k.open_uncached(&ctr, &mut 0, &want, &mut longer);
        t.check(refused && longer.iter().all(|&b| b == 1), || {
            id("lengths that differ are refused untouched")
        });
    }
}

fn every_length(t: &mut Tally) {
    let mut rng = Rng(1);
    for len in (0..=600).chain([
        1023,
        1024,
        1025,
        1551,
        4096,
        4351,
        16384,
        65553,
        (1 << 20) + 5,
    ]) {
        let key = rng.key();
        let aad = rng.upto(if len % 7 == 0 { 300 } else { 40 });
        let pt = rng.bytes(len);
        let ctr = rng.block();
        let y0 = if len % 3 == 0 {
            u128::from_be_bytes(rng.block())
        } else {
            0
        };
        for k in variants(&key) {
            check_message(t, &k, &key, &aad, &pt, ctr, y0);
            check_message(t, &k, &key, &aad, &pt, ctr, 0);
        }
    }
}

/// Counters whose last word crosses 2^32 in a step, in the tail and in a short message; every
/// block checked against its own AES block; bytes 0..12 never change.
fn counter_wrap(t: &mut Tally) {
    let mut rng = Rng(3);
    for start in [0xFFFF_FFF0u32, 0xFFFF_FFF9, 0xFFFF_FFFF, 0xFFFF_FF00, 0] {
        for len in [16usize, 17, 100, 128, 129, 256, 257, 600, 4096 + 33] {
            let key = rng.key();
            let mut ctr = rng.block();
            ctr[12..].copy_from_slice(&start.to_be_bytes());
            let aad = rng.upto(20);
            let pt = rng.bytes(len);
            for k in variants(&key) {
                check_message(t, &k, &key, &aad, &pt, ctr, 0);
                let mut buf = vec![0u8; len];
                k.seal(&ctr, &mut 0, &mut buf[..]);
                for (i, b) in buf.chunks(16).enumerate() {
                    let mut blk = ctr;
                    blk[12..].copy_from_slice(&start.wrapping_add(i as u32).to_be_bytes());
                    aes_encrypt(&key, &mut blk);
                    t.check(b == &blk[..b.len()], || {
                        format!("{}: start {start:#x} block {i}", k.kernel_name())
                    });
                }
            }
        }
    }
}

/// Every value of the counter's last byte, so a carry out of it falls at every block of a step.
fn every_low_counter_byte(t: &mut Tally) {
    let mut rng = Rng(7);
    for low in 0..=255u8 {
        let key = rng.key();
        let mut ctr = rng.block();
        ctr[15] = low;
        let pt = rng.bytes(16 * 20 + 3);
        for k in variants(&key) {
            check_message(t, &k, &key, b"", &pt, ctr, 0);
        }
    }
}

fn ghash_alone(t: &mut Tally) {
    let mut rng = Rng(4);
    for len in (0..=300).chain([4096, 4097, 70_000]) {
        let key = rng.key();
        let a = rng.upto(300);
        let b = rng.bytes(len);
        let y0 = if len % 2 == 0 {
            u128::from_be_bytes(rng.block())
        } else {
            0
        };
        for k in variants(&key) {
            let mut y = y0;
            k.ghash(&mut y, &a);
            k.ghash(&mut y, &b);
            t.check(y == reference_ghash(&key, y0, &[&a, &b]), || {
                format!("{}: ghash len {len}", k.kernel_name())
            });
        }
    }
}

fn aes_blocks(t: &mut Tally) {
    let mut rng = Rng(5);
    for _ in 0..300 {
        let key = rng.key();
        let b0 = rng.block();
        for k in variants(&key) {
            let (mut b, mut want) = (b0, b0);
            k.encrypt_block(&mut b);
            aes_encrypt(&key, &mut want);
            t.check(b == want && k.key_len() == key.len(), || {
                format!("{}: AES-{} block", k.kernel_name(), key.len() * 8)
            });
        }
    }
    // `h_prime`: mulX (POLYVAL's, of H read big-endian) of the AES of the zero block
    for n in [16usize, 24, 32] {
        let key: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(29) ^ 0x3c).collect();
        let mut h = [0u8; 16];
        aes_encrypt(&key, &mut h);
        let v = u128::from_be_bytes(h);
        let want =
            (v << 1) ^ ((v >> 127).wrapping_neg() & 0xC200_0000_0000_0000_0000_0000_0000_0001);
        for k in variants(&key) {
            t.check(k.h_prime() == want, || {
                format!("{}: AES-{} h_prime", k.kernel_name(), n * 8)
            });
        }
    }
    // FIPS 197 appendix C
    let pt: [u8; 16] = core::array::from_fn(|i| (i as u8) * 0x11);
    for (n, want) in [
        (16usize, 0x69c4e0d86a7b0430d8cdb78070b4c55au128),
        (24, 0xdda97ca4864cdfe06eaf70a0ec0d7191),
        (32, 0x8ea2b7ca516745bfeafc49904b496089),
    ] {
        let key: Vec<u8> = (0..n as u8).collect();
        for k in variants(&key) {
            let mut b = pt;
            k.encrypt_block(&mut b);
            t.check(u128::from_be_bytes(b) == want, || {
                format!("{}: FIPS 197 AES-{}", k.kernel_name(), n * 8)
            });
        }
    }
    for n in [0usize, 1, 15, 17, 20, 23, 25, 31, 33, 64] {
        t.check(
            StitchedKey::new(&vec![0u8; n]).is_none()
                && StitchedKey::new_without_eor3(&vec![0u8; n]).is_none(),
            || format!("a {n}-byte key is refused"),
        );
    }
}

/// A seal split at any block boundary, the state and counter carried, equals one call.
fn split_calls(t: &mut Tally) {
    let mut rng = Rng(6);
    let key = rng.bytes(32);
    let pt = rng.bytes(1000);
    let ctr = rng.block();
    for k in variants(&key) {
        let mut whole = pt.clone();
        let mut yw = 0;
        k.seal(&ctr, &mut yw, &mut whole[..]);
        for cut in (0..=1000).step_by(16) {
            let mut parts = pt.clone();
            let mut y = 0;
            let (a, b) = parts.split_at_mut(cut);
            k.seal(&ctr, &mut y, a);
            k.seal(&ctr_add(&ctr, cut / 16), &mut y, b);
            t.check(parts == whole && y == yw, || {
                format!("{}: cut {cut}", k.kernel_name())
            });
        }
    }
}

/// Long associated data through the whole-message forms.
fn long_aad(t: &mut Tally) {
    let mut rng = Rng(8);
    for (aad_len, len) in [
        (111, 0),
        (112, 0),
        (127, 1),
        (128, 16),
        (511, 33),
        (1100, 700),
        (4113, 16),
        (0, 5000),
    ] {
        let key = rng.key();
        let aad = rng.bytes(aad_len);
        let pt = rng.bytes(len);
        let ctr = rng.block();
        for k in variants(&key) {
            check_message(t, &k, &key, &aad, &pt, ctr, 0);
        }
    }
}

#[cfg(target_arch = "aarch64")]
fn main() {
    let mut t = Tally::default();
    let key = [0u8; 16];
    let names: Vec<&str> = variants(&key).iter().map(|k| k.kernel_name()).collect();
    println!("kernels: variants checked on this core: {names:?}");
    every_length(&mut t);
    counter_wrap(&mut t);
    every_low_counter_byte(&mut t);
    ghash_alone(&mut t);
    aes_blocks(&mut t);
    split_calls(&mut t);
    long_aad(&mut t);
    t.finish("kernels");
}

#[cfg(not(target_arch = "aarch64"))]
fn main() {
    let _ = (
        every_length,
        counter_wrap,
        every_low_counter_byte,
        ghash_alone,
        aes_blocks,
        split_calls,
        long_aad,
    );
    assert!(!StitchedKey::cpu_supported());
    println!("kernels: aarch64 only (scripts/aarch64.sh runs it under emulation); not run here");
}
