//! The 18 test cases of the original GCM specification (McGrew & Viega), from
//! `vectors/gcm-spec.txt`, through every backend and through the typed API
//! (`Aes{128,192,256}Gcm` for 96-bit IVs, `AesGcm<_, U8>` / `AesGcm<_, U60>` for the others).

mod common;

use common::{backends, gcm, hx, unhex};
use gcmx::aead::consts::{U8, U12, U60};
use gcmx::aead::{self, AeadInOut, KeyInit};
use gcmx::{AesGcm, GcmError};

// The block-cipher types `gcmx::AesGcm` is generic over.
use aes_gcm::aes::{Aes128, Aes192, Aes256};

const SPEC: &str = include_str!("../vectors/gcm-spec.txt");

struct Case {
    n: usize,
    key: Vec<u8>,
    iv: Vec<u8>,
    aad: Vec<u8>,
    pt: Vec<u8>,
    ct: Vec<u8>,
    tag: Vec<u8>,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for block in SPEC.split("\n\n") {
        let mut n = None;
        let mut f = std::collections::BTreeMap::new();
        for line in block.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(num) = line
                .strip_prefix("[case ")
                .and_then(|l| l.strip_suffix(']'))
            {
                n = Some(num.parse::<usize>().expect("case number"));
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("bad line {line:?}"));
            assert!(
                f.insert(k.trim().to_string(), unhex(v)).is_none(),
                "dup {k}"
            );
        }
        let Some(n) = n else {
            assert!(f.is_empty(), "fields without a [case N] header");
            continue;
        };
        let mut get = |k: &str| f.remove(k).unwrap_or_else(|| panic!("case {n}: no {k}"));
        out.push(Case {
            n,
            key: get("key"),
            iv: get("iv"),
            aad: get("aad"),
            pt: get("pt"),
            ct: get("ct"),
            tag: get("tag"),
        });
    }
    out
}

#[test]
fn spec_file_has_18_cases() {
    let c = cases();
    assert_eq!(
        c.iter().map(|c| c.n).collect::<Vec<_>>(),
        (1..=18).collect::<Vec<_>>()
    );
    for c in &c {
        let want_key = [16, 24, 32][(c.n - 1) / 6];
        assert_eq!(c.key.len(), want_key, "case {}", c.n);
        let want_iv = match c.n % 6 {
            5 => 8,
            0 => 60,
            _ => 12,
        };
        assert_eq!(c.iv.len(), want_iv, "case {}", c.n);
        assert_eq!(c.tag.len(), 16);
        assert_eq!(c.pt.len(), c.ct.len());
    }
}

#[test]
fn spec_cases_all_backends() {
    let cases = cases();
    assert_eq!(cases.len(), 18);
    for backend in backends() {
        for c in &cases {
            let g = gcm(&c.key, backend);
            let ctx = format!("[{backend:?}] case {}", c.n);

            let mut buf = c.pt.clone();
            let mut tag = [0u8; 16];
            g.encrypt_detached(&c.iv, &c.aad, &mut buf, &mut tag)
                .unwrap_or_else(|e| panic!("{ctx}: encrypt: {e}"));
            assert_eq!(hx(&buf), hx(&c.ct), "{ctx}: ciphertext");
            assert_eq!(hx(&tag), hx(&c.tag), "{ctx}: tag");

            // Truncated tags are prefixes of the full tag.
            for &t in common::TAG_LENGTHS {
                let mut buf = c.pt.clone();
                let mut tag = vec![0u8; t];
                g.encrypt_detached(&c.iv, &c.aad, &mut buf, &mut tag)
                    .unwrap_or_else(|e| panic!("{ctx}: encrypt, {t}-byte tag: {e}"));
                assert_eq!(hx(&tag), hx(&c.tag[..t]), "{ctx}: {t}-byte tag");
                let mut buf = c.ct.clone();
                g.decrypt_detached(&c.iv, &c.aad, &mut buf, &c.tag[..t])
                    .unwrap_or_else(|e| panic!("{ctx}: decrypt, {t}-byte tag: {e}"));
                assert_eq!(hx(&buf), hx(&c.pt), "{ctx}: {t}-byte tag plaintext");
            }

            let mut buf = c.ct.clone();
            g.decrypt_detached(&c.iv, &c.aad, &mut buf, &c.tag)
                .unwrap_or_else(|e| panic!("{ctx}: decrypt: {e}"));
            assert_eq!(hx(&buf), hx(&c.pt), "{ctx}: plaintext");

            // Every single-bit change of the tag is refused, and the buffer given back unchanged.
            for bit in 0..128 {
                let mut bad = c.tag.clone();
                bad[bit / 8] ^= 0x80 >> (bit % 8);
                let mut buf = c.ct.clone();
                let r = g.decrypt_detached(&c.iv, &c.aad, &mut buf, &bad);
                assert_eq!(
                    r,
                    Err(GcmError::Authentication),
                    "{ctx}: tag bit {bit} flipped"
                );
                assert_eq!(buf, c.ct, "{ctx}: tag bit {bit}: buffer changed");
            }
        }
        println!("[{backend:?}] 18 GCM-spec cases OK");
    }
}

fn typed<C: KeyInit + AeadInOut>(c: &Case) {
    let cipher = C::new_from_slice(&c.key).expect("key size");
    let nonce = aead::Nonce::<C>::try_from(c.iv.as_slice()).expect("nonce size");
    let mut buf = c.pt.clone();
    let tag = cipher
        .encrypt_inout_detached(&nonce, &c.aad, buf.as_mut_slice().into())
        .unwrap_or_else(|e| panic!("case {}: typed encrypt: {e:?}", c.n));
    assert_eq!(hx(&buf), hx(&c.ct), "case {}: typed ciphertext", c.n);
    assert_eq!(hx(&tag), hx(&c.tag), "case {}: typed tag", c.n);
    cipher
        .decrypt_inout_detached(&nonce, &c.aad, buf.as_mut_slice().into(), &tag)
        .unwrap_or_else(|e| panic!("case {}: typed decrypt: {e:?}", c.n));
    assert_eq!(hx(&buf), hx(&c.pt), "case {}: typed plaintext", c.n);
    let mut bad = tag.clone();
    bad[0] ^= 1;
    let mut buf = c.ct.clone();
    assert!(
        cipher
            .decrypt_inout_detached(&nonce, &c.aad, buf.as_mut_slice().into(), &bad)
            .is_err(),
        "case {}: typed decrypt accepted a bad tag",
        c.n
    );
    assert!(buf == c.ct, "case {}: typed reject changed the buffer", c.n);
}

#[test]
fn spec_cases_typed_api() {
    let cases = cases();
    for c in &cases {
        match (c.key.len(), c.iv.len()) {
            (16, 12) => typed::<gcmx::Aes128Gcm>(c),
            (24, 12) => typed::<gcmx::Aes192Gcm>(c),
            (32, 12) => typed::<gcmx::Aes256Gcm>(c),
            (16, 8) => typed::<AesGcm<Aes128, U8>>(c),
            (24, 8) => typed::<AesGcm<Aes192, U8>>(c),
            (32, 8) => typed::<AesGcm<Aes256, U8>>(c),
            (16, 60) => typed::<AesGcm<Aes128, U60>>(c),
            (24, 60) => typed::<AesGcm<Aes192, U60>>(c),
            (32, 60) => typed::<AesGcm<Aes256, U60>>(c),
            other => panic!("case {}: unexpected (key, iv) lengths {other:?}", c.n),
        }
    }
    // The generic form with a 96-bit nonce is the same type as the aliases.
    typed::<AesGcm<Aes128, U12>>(&cases[3]);
    println!("typed API: {} GCM-spec cases OK", cases.len());
}
