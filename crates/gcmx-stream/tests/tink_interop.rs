//! The adapters against Google Tink's streaming AEAD (the PyPI package `tink`, driven by
//! gcmx-cli's `tests/tink_helper.py`): streams written by Tink read through
//! `decrypting_reader`, `decrypting_buf_reader` and through `seekable_reader` at random
//! ranges, and streams written by
//! `encrypting_writer` read by Tink; key sizes 16 and 32, segments of 4 KiB to 8 MiB, AAD of
//! several lengths, plaintexts from empty to several segments plus one byte.
//!
//! The interpreter is `$GCMX_PYTHON` (default `python3`). Without `tink` these tests say NOT
//! RUN and pass; with `GCMX_REQUIRE_TINK=1` (as `scripts/test.sh` sets it) they fail instead.

use std::fs;
use std::io::{BufRead, Cursor, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use gcmx_stream::{Keyset, Options};

const HELPER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../gcmx-cli/tests/tink_helper.py"
);

fn python() -> Command {
    let py = std::env::var("GCMX_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let mut c = Command::new(py);
    c.arg(HELPER);
    c
}

/// Whether Tink can run; when it cannot and `GCMX_REQUIRE_TINK=1`, fails with the fix.
fn tink_available() -> bool {
    let py = std::env::var("GCMX_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let required = std::env::var_os("GCMX_REQUIRE_TINK").is_some_and(|v| v != "0");
    match python().arg("version").output() {
        Ok(o) if o.status.success() => true,
        _ if !required => {
            eprintln!(
                "Tink interop test NOT RUN: the Python package `tink` is not importable by {py} \
                 (`{py} -m pip install tink`, or GCMX_PYTHON; GCMX_REQUIRE_TINK=1 makes this a failure)"
            );
            false
        }
        o => panic!("the Python package `tink` is not importable by {py}: {o:?}"),
    }
}

fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// Runs Tink on `jobs` (op, keyset, aad, input, output) in one Python process; every job
/// must succeed.
fn tink_batch(dir: &Path, jobs: &[(&str, PathBuf, Vec<u8>, PathBuf, PathBuf)]) {
    let list = dir.join("jobs.txt");
    let text: String = jobs
        .iter()
        .map(|(op, k, aad, i, o)| {
            format!(
                "{op}\t{}\t{}\t{}\t{}\n",
                k.display(),
                hex::encode(aad),
                i.display(),
                o.display()
            )
        })
        .collect();
    fs::write(&list, text).unwrap();
    let out = python().arg("batch").arg(&list).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), jobs.len());
    for (line, job) in lines.iter().zip(jobs) {
        assert_eq!(*line, "ok", "Tink refused {:?}", job.3);
    }
}

struct Case {
    plain: Vec<u8>,
    aad: Vec<u8>,
}

/// Plaintext lengths around the segment boundaries, up to several segments plus one byte.
fn lengths(key_bytes: usize, segment: usize) -> Vec<usize> {
    let first = segment - (1 + key_bytes + 7) - 16;
    let rest = segment - 16;
    let mut v = vec![0, 1, first + 1, first + 2 * rest + 1];
    if segment <= 1 << 20 {
        v.extend([first - 1, first, first + rest, first + 3 * rest + 1]);
    }
    v
}

fn aad(i: usize) -> Vec<u8> {
    match i % 4 {
        0 => Vec::new(),
        1 => b"x".to_vec(),
        2 => "file name \u{fc}/\u{e9}".as_bytes().to_vec(),
        _ => data(1000, i as u64),
    }
}

/// Random reads of `ct`'s plaintext through a seekable reader, compared with `plain`.
fn random_ranges(keyset: &Keyset, aad: &[u8], ct: &[u8], plain: &[u8], reads: usize, seed: u64) {
    let mut r = keyset.seekable_reader(Cursor::new(ct), aad).unwrap();
    assert_eq!(r.plaintext_len(), plain.len() as u64);
    let mut s = seed | 1;
    let mut next = |m: u64| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % m.max(1)
    };
    for _ in 0..reads {
        let start = next(plain.len() as u64 + 10);
        let scale = next(17) + 1;
        let len = next(1 << scale) as usize;
        let end_relative = next(2) == 0;
        let at = if end_relative {
            r.seek(SeekFrom::End(start as i64 - plain.len() as i64))
                .unwrap()
        } else {
            r.seek(SeekFrom::Start(start)).unwrap()
        };
        assert_eq!(at, start);
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match r.read(&mut buf[got..]).unwrap() {
                0 => break,
                n => got += n,
            }
        }
        let s0 = (start as usize).min(plain.len());
        let want = &plain[s0..(s0 + len).min(plain.len())];
        assert!(
            &buf[..got] == want,
            "range {start}+{len} of {}",
            plain.len()
        );
    }
}

fn interop(key_bytes: usize, segment: usize) {
    if !tink_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let keyset_path = dir.join("tink-keyset.json");
    let st = python()
        .args(["keygen", &key_bytes.to_string(), &segment.to_string()])
        .arg(&keyset_path)
        .status()
        .unwrap();
    assert!(st.success(), "tink keygen");
    let keyset = Keyset::from_json(&fs::read_to_string(&keyset_path).unwrap()).unwrap();
    assert_eq!(keyset.primary().segment_size() as usize, segment);
    assert_eq!(keyset.primary().derived_key_size(), key_bytes);

    let cases: Vec<Case> = lengths(key_bytes, segment)
        .into_iter()
        .enumerate()
        .map(|(i, n)| Case {
            plain: data(n, (i * 31 + segment) as u64),
            aad: aad(i),
        })
        .collect();

    // Tink writes, the adapters read.
    let mut jobs = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let p = dir.join(format!("plain-{i}"));
        fs::write(&p, &c.plain).unwrap();
        jobs.push((
            "encrypt",
            keyset_path.clone(),
            c.aad.clone(),
            p,
            dir.join(format!("tink-{i}")),
        ));
    }
    tink_batch(dir, &jobs);
    // 1,000 random ranges per key and segment size, spread over the multi-segment streams;
    // fewer for 8 MiB segments in unoptimized builds, where each read opens up to 16 MiB.
    let total_reads = if segment > 1 << 20 && cfg!(debug_assertions) {
        60
    } else {
        1000
    };
    let multi: Vec<usize> = (0..cases.len())
        .filter(|&i| cases[i].plain.len() > segment)
        .collect();
    for (i, c) in cases.iter().enumerate() {
        let ct = fs::read(dir.join(format!("tink-{i}"))).unwrap();
        assert_eq!(
            ct.len() as u64,
            keyset
                .primary()
                .ciphertext_size(c.plain.len() as u64)
                .unwrap()
        );
        let mut back = Vec::new();
        keyset
            .decrypting_reader(&ct[..], &c.aad)
            .unwrap()
            .read_to_end(&mut back)
            .unwrap();
        assert!(
            back == c.plain,
            "Tink stream {i} ({} bytes) through decrypting_reader",
            c.plain.len()
        );
        // The same stream as a buffered source, the plaintext through `fill_buf`.
        let mut r = keyset.decrypting_buf_reader(&ct[..], &c.aad).unwrap();
        let mut filled = Vec::new();
        loop {
            let p = r.fill_buf().unwrap();
            if p.is_empty() {
                break;
            }
            filled.extend_from_slice(p);
            let n = p.len();
            r.consume(n);
        }
        assert!(
            filled == c.plain,
            "Tink stream {i} ({} bytes) through decrypting_buf_reader",
            c.plain.len()
        );
        let reads = if multi.contains(&i) {
            total_reads / multi.len()
        } else {
            20
        };
        random_ranges(&keyset, &c.aad, &ct, &c.plain, reads, i as u64 + 7);
        // The wrong AAD is refused.
        let mut wrong = c.aad.clone();
        wrong.push(0);
        let mut r = keyset.decrypting_reader(&ct[..], &wrong).unwrap();
        assert!(r.read_to_end(&mut Vec::new()).is_err());
    }

    // The adapters write (in uneven pieces, or every third case in one write, which seals whole
    // segments straight from the caller's buffer; with small windows too), Tink reads.
    let mut jobs = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let window = if i % 2 == 0 { 0 } else { 2 * segment };
        let opts = Options::default().with_window_bytes(window);
        let mut w = keyset
            .clone()
            .with_options(opts)
            .encrypting_writer(Vec::new(), &c.aad)
            .unwrap();
        let mut rest = &c.plain[..];
        let mut k = 1usize;
        while !rest.is_empty() {
            let n = if i % 3 == 2 {
                rest.len()
            } else {
                (k * 7919 % (segment + 3)).clamp(1, rest.len())
            };
            w.write_all(&rest[..n]).unwrap();
            rest = &rest[n..];
            k += 1;
        }
        let ct = w.finish().unwrap();
        let path = dir.join(format!("gcmx-{i}"));
        fs::write(&path, &ct).unwrap();
        jobs.push((
            "decrypt",
            keyset_path.clone(),
            c.aad.clone(),
            path,
            dir.join(format!("back-{i}")),
        ));
    }
    tink_batch(dir, &jobs);
    for (i, c) in cases.iter().enumerate() {
        let back = fs::read(dir.join(format!("back-{i}"))).unwrap();
        assert!(
            back == c.plain,
            "gcmx stream {i} ({} bytes) read by Tink",
            c.plain.len()
        );
    }
}

#[test]
fn aes128_4k_segments() {
    interop(16, 4 << 10);
}

#[test]
fn aes256_4k_segments() {
    interop(32, 4 << 10);
}

#[test]
fn aes128_64k_segments() {
    interop(16, 64 << 10);
}

#[test]
fn aes256_1m_segments() {
    interop(32, 1 << 20);
}

#[test]
fn aes128_8m_segments() {
    interop(16, 8 << 20);
}

#[test]
fn aes256_8m_segments() {
    interop(32, 8 << 20);
}
