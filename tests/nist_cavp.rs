//! NIST CAVP AES-GCM known-answer tests (gcmEncryptExtIV*.rsp and gcmDecrypt*.rsp, CAVS 14.0).
//!
//! The files are fetched by `scripts/fetch-vectors.sh` into `.vectors/gcm/` (or the directory
//! named by `GCMX_VECTORS_DIR`). Where they were never fetched, a plain `cargo test` prints that
//! these tests did not run and passes them; with `GCMX_REQUIRE_VECTORS=1` (set by
//! `scripts/test.sh`, so in CI) missing files FAIL. Files that are present but wrong always fail.
//!
//! Every one of the 47,250 vectors runs through every backend of `common::backends()` with the
//! runtime `gcmx::Gcm` API (IVs of 1, 12 and 128 bytes; tags of 4..=16 bytes); the 96-bit-IV,
//! 128-bit-tag vectors also run through the typed `Aes{128,192,256}Gcm` `AeadInOut` API.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use common::{TAG_LENGTHS, backends, gcm, hx};
use gcmx::aead::{self, AeadInOut, KeyInit};
use gcmx::{Aes128Gcm, Aes192Gcm, Aes256Gcm, Backend, GcmError};

/// 6 files x 7,875 vectors (3 IV lengths x 5 PT lengths x 5 AAD lengths x 7 tag lengths x 15).
const EXPECTED_TOTAL: usize = 47_250;

const FILES: [&str; 6] = [
    "gcmEncryptExtIV128.rsp",
    "gcmEncryptExtIV192.rsp",
    "gcmEncryptExtIV256.rsp",
    "gcmDecrypt128.rsp",
    "gcmDecrypt192.rsp",
    "gcmDecrypt256.rsp",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Encrypt,
    Decrypt,
}

/// One CAVP vector. For a decrypt vector marked FAIL, `pt` is `None`.
#[derive(Debug)]
struct Vector {
    file: &'static str,
    line: usize,
    count: usize,
    kind: Kind,
    key: Vec<u8>,
    iv: Vec<u8>,
    aad: Vec<u8>,
    pt: Option<Vec<u8>>,
    ct: Vec<u8>,
    tag: Vec<u8>,
}

impl Vector {
    fn id(&self) -> String {
        format!(
            "{}:{} (Count = {}, key {} B, IV {} B, PT {} B, AAD {} B, tag {} B)",
            self.file,
            self.line,
            self.count,
            self.key.len(),
            self.iv.len(),
            self.ct.len(),
            self.aad.len(),
            self.tag.len()
        )
    }
}

fn vectors_dir() -> PathBuf {
    match std::env::var_os("GCMX_VECTORS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".vectors/gcm"),
    }
}

/// Section parameters (`[Keylen = 128]` ...), in bits.
#[derive(Default, Clone, Copy)]
struct Params {
    keylen: Option<usize>,
    ivlen: Option<usize>,
    ptlen: Option<usize>,
    aadlen: Option<usize>,
    taglen: Option<usize>,
}

#[derive(Default)]
struct Partial {
    line: usize,
    count: Option<usize>,
    fields: BTreeMap<String, Vec<u8>>,
    fail: bool,
}

fn parse_file(file: &'static str, text: &str, out: &mut Vec<Vector>) {
    let kind = if file.starts_with("gcmEncrypt") {
        Kind::Encrypt
    } else {
        Kind::Decrypt
    };
    let mut params = Params::default();
    let mut cur = Partial::default();

    let flush = |cur: &mut Partial, params: &Params, out: &mut Vec<Vector>| {
        let c = std::mem::take(cur);
        let Some(count) = c.count else {
            assert!(
                c.fields.is_empty() && !c.fail,
                "{file}:{}: fields outside a Count record",
                c.line
            );
            return;
        };
        let get = |name: &str| -> Vec<u8> {
            c.fields
                .get(name)
                .cloned()
                .unwrap_or_else(|| panic!("{file}:{}: Count = {count} has no {name}", c.line))
        };
        let key = get("Key");
        let iv = get("IV");
        let aad = get("AAD");
        let ct = get("CT");
        let tag = get("Tag");
        let pt = match kind {
            Kind::Encrypt => {
                assert!(!c.fail, "{file}:{}: FAIL in an encrypt file", c.line);
                Some(get("PT"))
            }
            Kind::Decrypt => {
                assert!(
                    c.fail != c.fields.contains_key("PT"),
                    "{file}:{}: a decrypt vector needs exactly one of PT or FAIL",
                    c.line
                );
                c.fields.get("PT").cloned()
            }
        };
        let bits = |what: &str, p: Option<usize>| -> usize {
            p.unwrap_or_else(|| panic!("{file}:{}: no [{what} = ..] before Count", c.line))
        };
        assert_eq!(
            key.len() * 8,
            bits("Keylen", params.keylen),
            "{file}:{}",
            c.line
        );
        assert_eq!(
            iv.len() * 8,
            bits("IVlen", params.ivlen),
            "{file}:{}",
            c.line
        );
        assert_eq!(
            ct.len() * 8,
            bits("PTlen", params.ptlen),
            "{file}:{}",
            c.line
        );
        assert_eq!(
            aad.len() * 8,
            bits("AADlen", params.aadlen),
            "{file}:{}",
            c.line
        );
        assert_eq!(
            tag.len() * 8,
            bits("Taglen", params.taglen),
            "{file}:{}",
            c.line
        );
        if let Some(p) = &pt {
            assert_eq!(
                p.len(),
                ct.len(),
                "{file}:{}: PT and CT lengths differ",
                c.line
            );
        }
        out.push(Vector {
            file,
            line: c.line,
            count,
            kind,
            key,
            iv,
            aad,
            pt,
            ct,
            tag,
        });
    };

    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(inner) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            flush(&mut cur, &params, out);
            let (name, value) = inner
                .split_once('=')
                .unwrap_or_else(|| panic!("{file}:{lineno}: bad header {line:?}"));
            let value: usize = value
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{file}:{lineno}: bad header value {line:?}"));
            match name.trim() {
                "Keylen" => params.keylen = Some(value),
                "IVlen" => params.ivlen = Some(value),
                "PTlen" => params.ptlen = Some(value),
                "AADlen" => params.aadlen = Some(value),
                "Taglen" => params.taglen = Some(value),
                other => panic!("{file}:{lineno}: unknown header {other:?}"),
            }
            continue;
        }
        if line == "FAIL" {
            assert!(
                cur.count.is_some(),
                "{file}:{lineno}: FAIL outside a record"
            );
            cur.fail = true;
            continue;
        }
        let (name, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{file}:{lineno}: unparsable line {line:?}"));
        let (name, value) = (name.trim(), value.trim());
        if name == "Count" {
            flush(&mut cur, &params, out);
            cur.line = lineno;
            cur.count = Some(
                value
                    .parse()
                    .unwrap_or_else(|_| panic!("{file}:{lineno}: bad Count {value:?}")),
            );
            continue;
        }
        assert!(
            matches!(name, "Key" | "IV" | "PT" | "AAD" | "CT" | "Tag"),
            "{file}:{lineno}: unknown field {name:?}"
        );
        let bytes = hex::decode(value)
            .unwrap_or_else(|e| panic!("{file}:{lineno}: bad hex in {name}: {e}"));
        let dup = cur.fields.insert(name.to_string(), bytes);
        assert!(dup.is_none(), "{file}:{lineno}: duplicate {name}");
    }
    flush(&mut cur, &params, out);
}

/// The vectors, or `None` (after saying so) when they were never fetched and are not required.
fn load() -> Option<&'static [Vector]> {
    let dir = vectors_dir();
    let required = std::env::var_os("GCMX_REQUIRE_VECTORS").is_some_and(|v| v != "0");
    if !required && !dir.exists() {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "NIST CAVP tests NOT RUN: {} does not exist (run scripts/fetch-vectors.sh; \
             GCMX_REQUIRE_VECTORS=1 makes this a failure)",
            dir.display()
        );
        return None;
    }
    static VECTORS: OnceLock<Vec<Vector>> = OnceLock::new();
    Some(VECTORS.get_or_init(|| {
        let mut out = Vec::with_capacity(EXPECTED_TOTAL);
        for file in FILES {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!(
                    "NIST CAVP vector file {} is missing or unreadable ({e}).\n\
                     Run scripts/fetch-vectors.sh first (or point GCMX_VECTORS_DIR at a \
                     directory holding {FILES:?}).",
                    path.display()
                )
            });
            let before = out.len();
            parse_file(file, &text, &mut out);
            assert!(out.len() > before, "{}: no vectors parsed", path.display());
        }
        out
    }))
}

#[test]
fn vector_count_is_exact() {
    let Some(v) = load() else { return };
    let enc = v.iter().filter(|x| x.kind == Kind::Encrypt).count();
    let dec_pass = v
        .iter()
        .filter(|x| x.kind == Kind::Decrypt && x.pt.is_some())
        .count();
    let dec_fail = v
        .iter()
        .filter(|x| x.kind == Kind::Decrypt && x.pt.is_none())
        .count();
    println!(
        "NIST CAVP: {} vectors ({enc} encrypt, {dec_pass} decrypt PASS, {dec_fail} decrypt FAIL)",
        v.len()
    );
    assert_eq!(v.len(), EXPECTED_TOTAL);
    assert_eq!(enc, 3 * 7_875);
    for file in FILES {
        assert_eq!(v.iter().filter(|x| x.file == file).count(), 7_875, "{file}");
    }
    // The lengths the runtime API must cover.
    for ivlen in [1, 12, 128] {
        assert!(v.iter().any(|x| x.iv.len() == ivlen), "no {ivlen}-byte IV");
    }
    for taglen in [4, 8, 12, 13, 14, 15, 16] {
        assert!(
            v.iter().any(|x| x.tag.len() == taglen),
            "no {taglen}-byte tag"
        );
    }
}

#[derive(Default, Debug)]
struct Counts {
    encrypt_ok: usize,
    decrypt_pass_ok: usize,
    decrypt_fail_rejected: usize,
    /// 4- and 8-byte tags in a build without `hazmat`: refused with `TagLength`, nothing touched.
    short_tag_refused: usize,
    failures: usize,
}

/// Runs one vector on `backend`; returns a description of the first mismatch, if any.
fn check_vector(v: &Vector, backend: Backend, counts: &mut Counts) -> Result<(), String> {
    let g = gcm(&v.key, backend);
    if !TAG_LENGTHS.contains(&v.tag.len()) {
        let want = Err(GcmError::TagLength(v.tag.len()));
        let mut buf = v.ct.clone();
        let r = g.decrypt_detached(&v.iv, &v.aad, &mut buf, &v.tag);
        if r != want || buf != v.ct {
            return Err(format!("short tag without hazmat: decrypt gave {r:?}"));
        }
        if let Some(pt) = &v.pt {
            let mut buf = pt.clone();
            let r = g.encrypt_detached(&v.iv, &v.aad, &mut buf, &mut vec![0u8; v.tag.len()]);
            if r != want || &buf != pt {
                return Err(format!("short tag without hazmat: encrypt gave {r:?}"));
            }
        }
        counts.short_tag_refused += 1;
        return Ok(());
    }
    match &v.pt {
        Some(pt) => {
            // Encrypt: ciphertext and tag must match.
            let mut buf = pt.clone();
            let mut tag = vec![0u8; v.tag.len()];
            g.encrypt_detached(&v.iv, &v.aad, &mut buf, &mut tag)
                .map_err(|e| format!("encrypt returned Err({e:?})"))?;
            if buf != v.ct {
                return Err(format!("ciphertext {} != expected {}", hx(&buf), hx(&v.ct)));
            }
            if tag != v.tag {
                return Err(format!("tag {} != expected {}", hx(&tag), hx(&v.tag)));
            }
            // Decrypt: the plaintext comes back.
            let mut buf = v.ct.clone();
            g.decrypt_detached(&v.iv, &v.aad, &mut buf, &v.tag)
                .map_err(|e| format!("decrypt of a valid vector returned Err({e:?})"))?;
            if &buf != pt {
                return Err(format!("decrypted {} != expected {}", hx(&buf), hx(pt)));
            }
            match v.kind {
                Kind::Encrypt => counts.encrypt_ok += 1,
                Kind::Decrypt => counts.decrypt_pass_ok += 1,
            }
        }
        None => {
            // A FAIL vector: Authentication error and the ciphertext given back unchanged.
            let mut buf = v.ct.clone();
            match g.decrypt_detached(&v.iv, &v.aad, &mut buf, &v.tag) {
                Err(GcmError::Authentication) => {}
                Err(e) => return Err(format!("FAIL vector gave Err({e:?}), want Authentication")),
                Ok(()) => return Err(format!("FAIL vector accepted, output {}", hx(&buf))),
            }
            if buf != v.ct {
                return Err(format!("rejected, but the buffer changed: {}", hx(&buf)));
            }
            counts.decrypt_fail_rejected += 1;
        }
    }
    Ok(())
}

#[test]
fn runtime_api_all_backends() {
    let Some(v) = load() else { return };
    assert_eq!(v.len(), EXPECTED_TOTAL);
    let mut report = Vec::new();
    let mut total_failures = 0;
    for backend in backends() {
        let mut counts = Counts::default();
        let mut shown = 0;
        for vector in v {
            if let Err(why) = check_vector(vector, backend, &mut counts) {
                counts.failures += 1;
                if shown < 10 {
                    shown += 1;
                    eprintln!("[{backend:?}] {}: {why}", vector.id());
                }
            }
        }
        println!(
            "[{backend:?}] encrypt OK {}, decrypt PASS OK {}, decrypt FAIL rejected {}, short tags refused (no hazmat) {}, failures {}",
            counts.encrypt_ok,
            counts.decrypt_pass_ok,
            counts.decrypt_fail_rejected,
            counts.short_tag_refused,
            counts.failures
        );
        let checked = counts.encrypt_ok
            + counts.decrypt_pass_ok
            + counts.decrypt_fail_rejected
            + counts.short_tag_refused;
        if cfg!(feature = "hazmat") {
            assert_eq!(counts.short_tag_refused, 0);
        }
        assert_eq!(checked + counts.failures, EXPECTED_TOTAL);
        total_failures += counts.failures;
        report.push((backend, counts));
    }
    assert_eq!(total_failures, 0, "per backend: {report:?}");
}

/// Typed API: encrypt and decrypt through `AeadInOut`; a FAIL vector must be rejected and the
/// buffer must hold the untouched ciphertext.
fn check_typed<C: KeyInit + AeadInOut>(v: &Vector) -> Result<(), String> {
    let cipher = C::new_from_slice(&v.key).map_err(|e| format!("new_from_slice: {e:?}"))?;
    let nonce =
        aead::Nonce::<C>::try_from(v.iv.as_slice()).map_err(|_| "nonce size".to_string())?;
    let tag = aead::Tag::<C>::try_from(v.tag.as_slice()).map_err(|_| "tag size".to_string())?;
    if let Some(pt) = &v.pt {
        let mut buf = pt.clone();
        let got = cipher
            .encrypt_inout_detached(&nonce, &v.aad, buf.as_mut_slice().into())
            .map_err(|e| format!("typed encrypt: {e:?}"))?;
        if buf != v.ct || got.as_slice() != v.tag.as_slice() {
            return Err(format!(
                "typed encrypt gave ct {} tag {}",
                hx(&buf),
                hx(&got)
            ));
        }
    }
    let mut buf = v.ct.clone();
    let res = cipher.decrypt_inout_detached(&nonce, &v.aad, buf.as_mut_slice().into(), &tag);
    match (&v.pt, res) {
        (Some(pt), Ok(())) if &buf == pt => Ok(()),
        (Some(_), Ok(())) => Err(format!("typed decrypt gave {}", hx(&buf))),
        (Some(_), Err(e)) => Err(format!("typed decrypt rejected a valid vector: {e:?}")),
        (None, Ok(())) => Err("typed decrypt accepted a FAIL vector".into()),
        (None, Err(_)) if buf == v.ct => Ok(()),
        (None, Err(_)) => Err(format!("typed decrypt rejected but left {}", hx(&buf))),
    }
}

#[test]
fn typed_api_96_bit_iv_128_bit_tag() {
    let Some(v) = load() else { return };
    let mut ran = [0usize; 3];
    let mut failures = 0;
    for vector in v.iter().filter(|x| x.iv.len() == 12 && x.tag.len() == 16) {
        let (slot, res) = match vector.key.len() {
            16 => (0, check_typed::<Aes128Gcm>(vector)),
            24 => (1, check_typed::<Aes192Gcm>(vector)),
            32 => (2, check_typed::<Aes256Gcm>(vector)),
            n => panic!("{}: key length {n}", vector.id()),
        };
        ran[slot] += 1;
        if let Err(why) = res {
            failures += 1;
            if failures <= 10 {
                eprintln!("[typed] {}: {why}", vector.id());
            }
        }
    }
    println!(
        "typed API: {} AES-128, {} AES-192, {} AES-256 vectors, {failures} failures",
        ran[0], ran[1], ran[2]
    );
    // 6 files x 375 vectors with a 96-bit IV and a 128-bit tag.
    assert_eq!(ran, [750, 750, 750]);
    assert_eq!(failures, 0);
}
