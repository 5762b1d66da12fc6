//! Interoperability with Google Tink's streaming AEAD (AES-GCM-HKDF), both ways, through the
//! PyPI package `tink` driven by `tests/tink_helper.py`.
//!
//! The Python interpreter is `$GCMX_PYTHON` (default `python3`); it must have `tink`
//! installed (`python3 -m pip install tink`). Without it these tests say NOT RUN and pass, so
//! a plain `cargo test` works on a fresh machine; with `GCMX_REQUIRE_TINK=1` (set by
//! `scripts/test.sh`, so in CI) they fail instead.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const HELPER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tink_helper.py");

fn python() -> Command {
    let py = std::env::var("GCMX_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let mut c = Command::new(py);
    c.arg(HELPER);
    c
}

/// Tink's version, or `None` (after saying so) when `tink` is not importable and not required;
/// when it is required (`GCMX_REQUIRE_TINK=1`), fails the test with the fix.
fn tink() -> Option<String> {
    let py = std::env::var("GCMX_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let out = python().arg("version").output();
    let required = std::env::var_os("GCMX_REQUIRE_TINK").is_some_and(|v| v != "0");
    match out {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        _ if !required => {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "Tink interop test NOT RUN: the Python package `tink` is not importable by {py} \
                 (`{py} -m pip install tink`, or GCMX_PYTHON; GCMX_REQUIRE_TINK=1 makes this a failure)"
            );
            None
        }
        Ok(o) => panic!(
            "the Python package `tink` is not importable by {py}: {}\ninstall it with `{py} -m pip install tink` \
             (or point GCMX_PYTHON at an interpreter that has it)",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!(
            "cannot run {py} ({e}); install Python 3 and `python3 -m pip install tink`, or set GCMX_PYTHON"
        ),
    }
}

struct Job {
    op: &'static str,
    keyset: PathBuf,
    aad: Vec<u8>,
    input: PathBuf,
    output: PathBuf,
}

/// Runs Tink on many jobs in one Python process; returns each job's result line.
fn tink_batch(dir: &Path, jobs: &[Job]) -> Vec<String> {
    let list = dir.join(format!("jobs-{}.txt", jobs.len()));
    let text: String = jobs
        .iter()
        .map(|j| {
            format!(
                "{}\t{}\t{}\t{}\t{}\n",
                j.op,
                j.keyset.display(),
                hex::encode(&j.aad),
                j.input.display(),
                j.output.display()
            )
        })
        .collect();
    fs::write(&list, text).unwrap();
    let out = ok(run(python().arg("batch").arg(&list), None), "tink batch");
    let lines: Vec<String> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), jobs.len(), "one result per job");
    lines
}

/// Segment geometry of a key: (header length, first segment plaintext, other segments plaintext).
fn geometry(key_bytes: usize, segment: usize) -> (usize, usize, usize) {
    let h = 1 + key_bytes + 7;
    (h, segment - h - 16, segment - 16)
}

fn expected_ct_len(key_bytes: usize, segment: usize, len: usize) -> usize {
    let (h, first, rest) = geometry(key_bytes, segment);
    let segs = if len <= first {
        1
    } else {
        1 + (len - first).div_ceil(rest)
    };
    h + len + 16 * segs
}

fn aad_for(i: usize) -> (Vec<u8>, Vec<String>) {
    match i % 3 {
        0 => (Vec::new(), vec![]),
        1 => {
            let t = "file name ü/é";
            (t.as_bytes().to_vec(), vec!["--aad".into(), t.into()])
        }
        _ => {
            let b = vec![0x00, 0xff, 0x80, 0x7f, 0x0a];
            (b.clone(), vec!["--aad-hex".into(), hex::encode(&b)])
        }
    }
}

struct Config {
    key_bytes: usize,
    segment: usize,
    /// Made by gcmx keygen (else by Tink).
    gcmx_keygen: bool,
    /// Batch size override for gcmx, to cross window boundaries.
    window: Option<&'static str>,
}

fn lengths(key_bytes: usize, segment: usize, many: usize) -> Vec<usize> {
    let (_, first, rest) = geometry(key_bytes, segment);
    vec![
        0,
        1,
        first - 1,
        first,                    // exactly the first segment, full
        first + 1,                // one byte into the second
        first + rest,             // two full segments
        first + 3 * rest,         // four full segments
        first + many * rest + 17, // many segments, short last
    ]
}

fn gcmx_args(
    op: &str,
    keyset: &Path,
    aad_args: &[String],
    input: &Path,
    output: &Path,
) -> Vec<String> {
    let mut a = vec![
        op.to_string(),
        "--quiet".into(),
        "--keyset".into(),
        keyset.display().to_string(),
    ];
    a.extend(aad_args.iter().cloned());
    a.push(input.display().to_string());
    a.push(output.display().to_string());
    a
}

fn check_config(cfg: &Config) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let keyset = if cfg.gcmx_keygen {
        keygen(dir, "keyset.json", cfg.key_bytes == 16, cfg.segment as u32)
    } else {
        let p = dir.join("keyset.json");
        ok(
            run(
                python()
                    .arg("keygen")
                    .arg(cfg.key_bytes.to_string())
                    .arg(cfg.segment.to_string())
                    .arg(&p),
                None,
            ),
            "tink keygen",
        );
        p
    };
    let many = if cfg.segment <= 4096 { 300 } else { 5 };
    let lens = lengths(cfg.key_bytes, cfg.segment, many);

    // gcmx encrypts, Tink decrypts.
    let mut jobs = Vec::new();
    let mut plain = Vec::new();
    for (i, &len) in lens.iter().enumerate() {
        let pt = data(len, i as u64 + 1);
        let p = dir.join(format!("p{i}"));
        fs::write(&p, &pt).unwrap();
        let (aad, aad_args) = aad_for(i);
        let c = dir.join(format!("g{i}.tink"));
        let mut cmd = gcmx();
        cmd.args(gcmx_args("encrypt", &keyset, &aad_args, &p, &c));
        if let Some(w) = cfg.window {
            cmd.env("GCMX_WINDOW", w);
        }
        ok(run(&mut cmd, None), "gcmx encrypt");
        let ct = fs::read(&c).unwrap();
        assert_eq!(
            ct.len(),
            expected_ct_len(cfg.key_bytes, cfg.segment, len),
            "ciphertext length for {len} bytes"
        );
        assert_eq!(
            usize::from(ct[0]),
            1 + cfg.key_bytes + 7,
            "header length byte"
        );
        jobs.push(Job {
            op: "decrypt",
            keyset: keyset.clone(),
            aad,
            input: c,
            output: dir.join(format!("g{i}.tink.out")),
        });
        plain.push((p, pt));
    }
    for (i, r) in tink_batch(dir, &jobs).iter().enumerate() {
        assert_eq!(
            r, "ok",
            "Tink decrypting gcmx's ciphertext of {} bytes",
            lens[i]
        );
        assert!(
            fs::read(&jobs[i].output).unwrap() == plain[i].1,
            "Tink's plaintext of gcmx's {} bytes differs",
            lens[i]
        );
    }

    // Tink encrypts, gcmx decrypts.
    let jobs: Vec<Job> = plain
        .iter()
        .enumerate()
        .map(|(i, (p, _))| Job {
            op: "encrypt",
            keyset: keyset.clone(),
            aad: aad_for(i).0,
            input: p.clone(),
            output: dir.join(format!("t{i}.tink")),
        })
        .collect();
    for r in tink_batch(dir, &jobs) {
        assert_eq!(r, "ok");
    }
    for (i, job) in jobs.iter().enumerate() {
        let ct_len = fs::metadata(&job.output).unwrap().len() as usize;
        assert_eq!(
            ct_len,
            expected_ct_len(cfg.key_bytes, cfg.segment, lens[i]),
            "Tink's ciphertext length"
        );
        let out = dir.join(format!("t{i}.out"));
        let mut cmd = gcmx();
        cmd.args(gcmx_args(
            "decrypt",
            &keyset,
            &aad_for(i).1,
            &job.output,
            &out,
        ));
        if let Some(w) = cfg.window {
            cmd.env("GCMX_WINDOW", w);
        }
        ok(run(&mut cmd, None), "gcmx decrypt of Tink's ciphertext");
        assert!(
            fs::read(&out).unwrap() == plain[i].1,
            "gcmx's plaintext of Tink's {} bytes differs",
            lens[i]
        );
        // and the wrong associated data is refused, with nothing left behind
        let bad = dir.join(format!("t{i}.bad"));
        let o = run_gcmx(
            &[
                "decrypt",
                "--quiet",
                "--keyset",
                keyset.to_str().unwrap(),
                "--aad",
                "wrong",
                job.output.to_str().unwrap(),
                bad.to_str().unwrap(),
            ],
            None,
        );
        assert!(!o.status.success());
        assert!(!bad.exists());
    }
    assert!(leftovers(dir).is_empty());
}

#[test]
fn tink_is_installed() {
    let Some(v) = tink() else { return };
    eprintln!("tink {v}");
    assert!(!v.is_empty());
}

#[test]
fn aes128_4k_segments_gcmx_keyset() {
    let Some(_) = tink() else { return };
    check_config(&Config {
        key_bytes: 16,
        segment: 4096,
        gcmx_keygen: true,
        window: Some("16K"),
    });
}

#[test]
fn aes256_4k_segments_tink_keyset() {
    let Some(_) = tink() else { return };
    check_config(&Config {
        key_bytes: 32,
        segment: 4096,
        gcmx_keygen: false,
        window: None,
    });
}

#[test]
fn aes128_1m_segments_tink_keyset() {
    let Some(_) = tink() else { return };
    check_config(&Config {
        key_bytes: 16,
        segment: 1 << 20,
        gcmx_keygen: false,
        window: Some("2M"),
    });
}

#[test]
fn aes256_1m_segments_gcmx_keyset() {
    let Some(_) = tink() else { return };
    check_config(&Config {
        key_bytes: 32,
        segment: 1 << 20,
        gcmx_keygen: true,
        window: None,
    });
}

#[test]
fn aes256_smallest_segments_tink_keyset() {
    // 57 bytes: the smallest Tink accepts for 32-byte keys (one plaintext byte in segment 0).
    let Some(_) = tink() else { return };
    check_config(&Config {
        key_bytes: 32,
        segment: 57,
        gcmx_keygen: false,
        window: Some("1K"),
    });
}

#[test]
fn standard_input_and_output_both_ways() {
    let Some(_) = tink() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let keyset = keygen(dir, "k.json", false, 4096);
    let ks = keyset.to_str().unwrap();
    for (i, len) in [0usize, 1, 4096 - 56, 100_000].into_iter().enumerate() {
        let pt = data(len, 50 + i as u64);
        // gcmx: stdin -> stdout; Tink reads the file
        let ct = ok(
            run_gcmx(
                &["encrypt", "--keyset", ks, "--aad", "stdio", "-", "-"],
                Some(&pt),
            ),
            "gcmx encrypt - -",
        );
        assert_eq!(ct.len(), expected_ct_len(32, 4096, len));
        let c = dir.join(format!("c{i}"));
        fs::write(&c, &ct).unwrap();
        let back = ok(
            run(
                python().args([
                    "decrypt",
                    ks,
                    &hex::encode("stdio"),
                    c.to_str().unwrap(),
                    "-",
                ]),
                None,
            ),
            "tink decrypt to stdout",
        );
        assert!(back == pt, "length {len}");
        // Tink: stdin -> stdout; gcmx decrypts stdin -> stdout
        let tct = ok(
            run(
                python().args(["encrypt", ks, &hex::encode("stdio"), "-", "-"]),
                Some(&pt),
            ),
            "tink encrypt - -",
        );
        let back = ok(
            run_gcmx(
                &["decrypt", "--keyset", ks, "--aad", "stdio", "-", "-"],
                Some(&tct),
            ),
            "gcmx decrypt - -",
        );
        assert!(back == pt, "length {len}");
        // mixed: file in, stdout out and stdin in, file out
        let p = dir.join(format!("p{i}"));
        fs::write(&p, &pt).unwrap();
        let ct2 = ok(
            run_gcmx(&["encrypt", "--keyset", ks, p.to_str().unwrap(), "-"], None),
            "gcmx encrypt file -",
        );
        let o = dir.join(format!("o{i}"));
        ok(
            run_gcmx(
                &["decrypt", "--keyset", ks, "-", o.to_str().unwrap()],
                Some(&ct2),
            ),
            "gcmx decrypt - file",
        );
        assert!(fs::read(&o).unwrap() == pt);
    }
}

#[test]
fn tink_refuses_what_gcmx_refuses() {
    // The same damaged files are refused by both implementations.
    let Some(_) = tink() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let keyset = keygen(dir, "k.json", true, 4096);
    let ks = keyset.to_str().unwrap();
    let pt = data(20_000, 9);
    let p = dir.join("p");
    fs::write(&p, &pt).unwrap();
    let c = dir.join("c");
    ok(
        run_gcmx(
            &[
                "encrypt",
                "--keyset",
                ks,
                p.to_str().unwrap(),
                c.to_str().unwrap(),
            ],
            None,
        ),
        "encrypt",
    );
    let ct = fs::read(&c).unwrap();
    let (h, first, _) = geometry(16, 4096);
    let s1 = h + first + 16;
    let mut variants: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("header only", ct[..h].to_vec()),
        ("cut at a segment boundary", ct[..s1 + 4096].to_vec()),
        ("cut inside a segment", ct[..ct.len() - 3].to_vec()),
        ("trailing byte", [ct.as_slice(), &[0]].concat()),
    ];
    let mut swapped = ct.clone();
    let (a, b) = swapped[s1..s1 + 8192].split_at_mut(4096);
    a.swap_with_slice(b);
    variants.push(("segments swapped", swapped));
    let mut flipped = ct.clone();
    flipped[h + 100] ^= 1;
    variants.push(("flipped bit", flipped));
    let mut bad_len = ct.clone();
    bad_len[0] = 40;
    variants.push(("bad header length", bad_len));
    let mut jobs = Vec::new();
    for (i, (name, bytes)) in variants.iter().enumerate() {
        let f = dir.join(format!("v{i}"));
        fs::write(&f, bytes).unwrap();
        let out = dir.join(format!("v{i}.out"));
        let o = run_gcmx(
            &[
                "decrypt",
                "--keyset",
                ks,
                f.to_str().unwrap(),
                out.to_str().unwrap(),
            ],
            None,
        );
        assert!(!o.status.success(), "gcmx accepted: {name}");
        assert!(!out.exists(), "gcmx left output for: {name}");
        jobs.push(Job {
            op: "decrypt",
            keyset: keyset.clone(),
            aad: vec![],
            input: f,
            output: dir.join(format!("v{i}.tink")),
        });
    }
    for (i, r) in tink_batch(dir, &jobs).iter().enumerate() {
        assert!(r.starts_with("refused"), "Tink accepted: {}", variants[i].0);
    }
}
