//! The `gcmx` command line: refusals leave nothing behind, the overwrite guard, keygen, demo.

mod common;

use std::fs;
use std::path::Path;
use std::process::Output;

use common::*;

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: std::path::PathBuf,
    keyset: String,
    plain: Vec<u8>,
    ct: Vec<u8>,
}

const SEG: usize = 4096;
const HDR: usize = 1 + 32 + 7;

fn fixture(len: usize) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let keyset = keygen(&dir, "k.json", false, SEG as u32)
        .display()
        .to_string();
    let plain = data(len, 3);
    let p = dir.join("plain");
    fs::write(&p, &plain).unwrap();
    let c = dir.join("ct");
    ok(
        run_gcmx(
            &[
                "encrypt",
                "--keyset",
                &keyset,
                "--aad",
                "A",
                p.to_str().unwrap(),
                c.to_str().unwrap(),
            ],
            None,
        ),
        "encrypt",
    );
    let ct = fs::read(&c).unwrap();
    Fixture {
        _tmp: tmp,
        dir,
        keyset,
        plain,
        ct,
    }
}

impl Fixture {
    /// Decrypts `bytes` into a fresh output file; returns the result and whether the output exists.
    fn decrypt(&self, name: &str, bytes: &[u8], extra: &[&str]) -> (Output, bool) {
        let input = self.dir.join(format!("{name}.in"));
        fs::write(&input, bytes).unwrap();
        let out = self.dir.join(format!("{name}.out"));
        let mut args = vec!["decrypt", "--keyset", &self.keyset];
        args.extend_from_slice(extra);
        if !extra.iter().any(|a| a.starts_with("--aad")) {
            args.extend_from_slice(&["--aad", "A"]);
        }
        let (i, o) = (
            input.to_str().unwrap().to_string(),
            out.to_str().unwrap().to_string(),
        );
        args.push(&i);
        args.push(&o);
        let r = run_gcmx(&args, None);
        (r, out.exists())
    }
}

#[test]
fn round_trip_and_files_are_private() {
    let f = fixture(50_000);
    let (o, exists) = f.decrypt("good", &f.ct, &["--fsync"]);
    ok(o, "decrypt");
    assert!(exists);
    assert!(fs::read(f.dir.join("good.out")).unwrap() == f.plain);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(f.dir.join("good.out"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o077,
            0,
            "decrypted output readable by others: {mode:o}"
        );
    }
    assert!(leftovers(&f.dir).is_empty());
}

#[test]
fn every_refusal_leaves_no_output() {
    let f = fixture(5 * SEG + 100);
    let ct = &f.ct;
    let s1 = SEG - HDR; // start of segment 1
    let cases: Vec<(&str, Vec<u8>, Vec<&str>, &str)> = vec![
        ("empty", vec![], vec![], "empty"),
        ("one byte", vec![HDR as u8], vec![], "truncated"),
        ("header only", ct[..HDR].to_vec(), vec![], "truncated"),
        (
            "short first segment",
            ct[..HDR + 10].to_vec(),
            vec![],
            "truncated",
        ),
        (
            "bad header length byte",
            [&[41u8][..], &ct[1..]].concat(),
            vec![],
            "header length",
        ),
        (
            "zero header length byte",
            [&[0u8][..], &ct[1..]].concat(),
            vec![],
            "header length",
        ),
        (
            "cut at segment boundary",
            ct[..s1 + 2 * SEG].to_vec(),
            vec![],
            "did not authenticate",
        ),
        (
            "cut after first segment",
            ct[..s1].to_vec(),
            vec![],
            "did not authenticate",
        ),
        (
            "cut inside last segment",
            ct[..ct.len() - 1].to_vec(),
            vec![],
            "did not authenticate",
        ),
        (
            "last segment dropped, tag kept",
            ct[..ct.len() - 20].to_vec(),
            vec![],
            "did not authenticate",
        ),
        (
            "trailing garbage",
            [ct.as_slice(), &[0u8; 30]].concat(),
            vec![],
            "did not authenticate",
        ),
        (
            "trailing full segment",
            [ct.as_slice(), &ct[s1..s1 + SEG]].concat(),
            vec![],
            "did not authenticate",
        ),
        (
            "wrong aad",
            ct.clone(),
            vec!["--aad", "B"],
            "wrong key or associated data",
        ),
        (
            "wrong aad hex",
            ct.clone(),
            vec!["--aad-hex", "42"],
            "wrong key or associated data",
        ), // "B" != "A"
        (
            "missing aad",
            ct.clone(),
            vec!["--aad-hex", ""],
            "wrong key or associated data",
        ),
    ];
    for (name, bytes, extra, want) in &cases {
        let (o, exists) = f.decrypt(name, bytes, extra);
        refused(&o, want, name);
        assert!(!exists, "{name}: output left behind");
    }
    // tampering anywhere: salt, nonce prefix, a segment body, a tag
    for (name, at) in [
        ("salt", 5),
        ("nonce prefix", HDR - 2),
        ("first segment", HDR + 7),
        ("first tag", s1 - 1),
        ("middle segment", s1 + SEG + 9),
        ("last tag", ct.len() - 1),
    ] {
        let mut t = ct.clone();
        t[at] ^= 0x80;
        let (o, exists) = f.decrypt(name, &t, &[]);
        refused(&o, "did not authenticate", name);
        assert!(!exists, "{name}: output left behind");
    }
    // reordering: swap segments 1 and 2
    let mut t = ct.clone();
    let (a, b) = t[s1..s1 + 2 * SEG].split_at_mut(SEG);
    a.swap_with_slice(b);
    let (o, exists) = f.decrypt("reordered", &t, &[]);
    refused(&o, "did not authenticate", "reordered");
    assert!(!exists);
    // wrong key
    let other = keygen(&f.dir, "other.json", false, SEG as u32);
    let out = f.dir.join("wrongkey.out");
    let o = run_gcmx(
        &[
            "decrypt",
            "--keyset",
            other.to_str().unwrap(),
            "--aad",
            "A",
            f.dir.join("ct").to_str().unwrap(),
            out.to_str().unwrap(),
        ],
        None,
    );
    refused(&o, "wrong key", "wrong key");
    assert!(!out.exists());
    // a key of another size: the header length byte does not match
    let other = keygen(&f.dir, "other128.json", true, SEG as u32);
    let o = run_gcmx(
        &[
            "decrypt",
            "--keyset",
            other.to_str().unwrap(),
            f.dir.join("ct").to_str().unwrap(),
            out.to_str().unwrap(),
        ],
        None,
    );
    refused(
        &o,
        "header length byte 40",
        "AES-128 keyset on an AES-256 file",
    );
    assert!(!out.exists());
    assert!(
        leftovers(&f.dir).is_empty(),
        "temporary files left: {:?}",
        leftovers(&f.dir)
    );
}

#[test]
fn io_and_usage_errors() {
    let f = fixture(1000);
    let ks = f.keyset.as_str();
    let d = |n: &str| f.dir.join(n).display().to_string();
    let cases: Vec<(Vec<String>, &str, &str)> = vec![
        (
            vec![
                "encrypt".into(),
                "--keyset".into(),
                ks.into(),
                d("nope"),
                d("x1"),
            ],
            "cannot open",
            "missing input",
        ),
        (
            vec![
                "encrypt".into(),
                "--keyset".into(),
                ks.into(),
                f.dir.display().to_string(),
                d("x2"),
            ],
            "directory",
            "input is a directory",
        ),
        (
            vec![
                "encrypt".into(),
                "--keyset".into(),
                ks.into(),
                d("plain"),
                d("no/such/dir/x3"),
            ],
            "cannot create the output",
            "missing output folder",
        ),
        (
            vec![
                "encrypt".into(),
                "--keyset".into(),
                d("nokeyset"),
                d("plain"),
                d("x4"),
            ],
            "cannot read keyset",
            "missing keyset",
        ),
        (
            vec![
                "encrypt".into(),
                "--keyset".into(),
                ks.into(),
                "--backend".into(),
                "gpu".into(),
                d("plain"),
                d("x5"),
            ],
            "unknown backend",
            "bad backend",
        ),
        (
            vec![
                "encrypt".into(),
                "--keyset".into(),
                ks.into(),
                "--aad-hex".into(),
                "zz".into(),
                d("plain"),
                d("x6"),
            ],
            "aad-hex",
            "bad hex",
        ),
    ];
    for (args, want, what) in &cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let usage = ["input is a directory", "bad backend", "bad hex"].contains(what);
        refused_with(&run_gcmx(&a, None), if usage { 2 } else { 1 }, want, what);
    }
    #[cfg(not(feature = "cuda"))]
    refused_usage(
        &run_gcmx(
            &[
                "encrypt",
                "--keyset",
                ks,
                "--backend",
                "cuda",
                &d("plain"),
                &d("x7"),
            ],
            None,
        ),
        "--features cuda",
        "cuda without the feature",
    );
    for n in 1..=7 {
        assert!(!f.dir.join(format!("x{n}")).exists());
    }
    // both --aad and --aad-hex: a usage error from the argument parser
    let o = run_gcmx(
        &[
            "encrypt",
            "--keyset",
            ks,
            "--aad",
            "a",
            "--aad-hex",
            "00",
            &d("plain"),
            &d("x8"),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(!f.dir.join("x8").exists());
    // a full device: the write error is reported
    if Path::new("/dev/full").exists() {
        let o = gcmx()
            .args(["encrypt", "--keyset", ks, &d("plain"), "-"])
            .stdout(fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        refused(&o, "no space left", "stdout to /dev/full");
    }
    assert!(leftovers(&f.dir).is_empty());
}

#[test]
fn bad_keysets_are_clear_errors() {
    let f = fixture(10);
    let good = fs::read_to_string(&f.keyset).unwrap();
    let v: serde_json::Value = serde_json::from_str(&good).unwrap();
    let value = v["key"][0]["keyData"]["value"]
        .as_str()
        .unwrap()
        .to_string();
    let cases: Vec<(&str, String, &str)> = vec![
        ("not json", "hello".into(), "not a valid Tink JSON keyset"),
        ("binary", "\u{0}\u{1}".into(), "not a valid"),
        (
            "other key type",
            good.replace("AesGcmHkdfStreamingKey", "AesCtrHmacStreamingKey"),
            "not supported",
        ),
        // params field 3 (hash) = SHA512 (4): the base64 of the params bytes 0x18 0x03 -> 0x18 0x04
        (
            "SHA512",
            good.replace(&value, &reencode(&value, |b| swap_hash(b, 4))),
            "SHA512",
        ),
        (
            "bad segment size",
            good.replace(&value, &reencode(&value, |b| set_segment(b, 20))),
            "segment size",
        ),
        (
            "no primary",
            good.replace("primaryKeyId", "primary"),
            "primaryKeyId",
        ),
        (
            "disabled",
            good.replace("ENABLED", "DISABLED"),
            "not enabled",
        ),
    ];
    for (name, text, want) in &cases {
        let k = f.dir.join(format!("{}.json", name.replace(' ', "_")));
        fs::write(&k, text).unwrap();
        let out = f.dir.join("out");
        let o = run_gcmx(
            &[
                "encrypt",
                "--keyset",
                k.to_str().unwrap(),
                f.dir.join("plain").to_str().unwrap(),
                out.to_str().unwrap(),
            ],
            None,
        );
        refused(&o, want, name);
        assert!(!out.exists());
    }
}

fn reencode(b64: &str, f: impl Fn(&mut Vec<u8>)) -> String {
    use base64::Engine as _;
    let e = base64::engine::general_purpose::STANDARD;
    let mut bytes = e.decode(b64).unwrap();
    f(&mut bytes);
    e.encode(bytes)
}

/// The serialized key starts with the params message: 0x12 LEN 0x08 <varint seg> 0x10 <dks> 0x18 <hash>.
fn swap_hash(b: &mut [u8], hash: u8) {
    let plen = b[1] as usize;
    assert_eq!(b[2 + plen - 2], 0x18);
    b[2 + plen - 1] = hash;
}

fn set_segment(b: &mut Vec<u8>, seg: u8) {
    // replace the params message with one having segment size `seg`
    let plen = b[1] as usize;
    let rest = b[2 + plen..].to_vec();
    let dks = b[2 + plen - 3];
    let mut v = vec![0x12, 6, 0x08, seg, 0x10, dks, 0x18, 3];
    v.extend(rest);
    *b = v;
}

#[test]
fn overwrite_guard() {
    let f = fixture(3000);
    let target = f.dir.join("existing");
    fs::write(&target, b"precious").unwrap();
    let args = |force: bool| {
        let mut a = vec!["encrypt", "--keyset", f.keyset.as_str()];
        if force {
            a.push("--force");
        }
        a
    };
    let p = f.dir.join("plain");
    let mut a = args(false);
    a.extend([p.to_str().unwrap(), target.to_str().unwrap()]);
    refused_usage(&run_gcmx(&a, None), "--force", "existing output");
    assert_eq!(fs::read(&target).unwrap(), b"precious");
    // decrypt too
    let mut a = vec!["decrypt", "--keyset", f.keyset.as_str(), "--aad", "A"];
    let c = f.dir.join("ct");
    a.extend([c.to_str().unwrap(), target.to_str().unwrap()]);
    refused_usage(&run_gcmx(&a, None), "--force", "existing output (decrypt)");
    assert_eq!(fs::read(&target).unwrap(), b"precious");
    // a failing run with --force keeps the old file
    let bad = f.dir.join("bad");
    fs::write(&bad, &f.ct[..100]).unwrap();
    let mut a = vec![
        "decrypt",
        "--force",
        "--keyset",
        f.keyset.as_str(),
        "--aad",
        "A",
    ];
    a.extend([bad.to_str().unwrap(), target.to_str().unwrap()]);
    refused(
        &run_gcmx(&a, None),
        "did not authenticate",
        "bad input with --force",
    );
    assert_eq!(fs::read(&target).unwrap(), b"precious");
    // --force replaces
    let mut a = args(true);
    a.extend([p.to_str().unwrap(), target.to_str().unwrap()]);
    ok(run_gcmx(&a, None), "encrypt --force");
    assert_eq!(fs::read(&target).unwrap().len(), f.ct.len());
    // encrypting in place with --force: the input is read whole before the rename
    let inplace = f.dir.join("inplace");
    fs::write(&inplace, &f.plain).unwrap();
    let ip = inplace.to_str().unwrap();
    ok(
        run_gcmx(&["encrypt", "--force", "--keyset", &f.keyset, ip, ip], None),
        "in place",
    );
    let sealed = fs::read(&inplace).unwrap();
    // decryption never writes over its input, --force or not, by any name
    let link = f.dir.join("inplace-link");
    fs::hard_link(&inplace, &link).unwrap();
    let lk = link.to_str().unwrap();
    for (input, output) in [(ip, ip), (ip, lk), (lk, ip)] {
        refused_usage(
            &run_gcmx(
                &["decrypt", "--force", "--keyset", &f.keyset, input, output],
                None,
            ),
            "it is the input file",
            "decrypt in place",
        );
        assert!(fs::read(&inplace).unwrap() == sealed, "input changed");
    }
    // nor over a file that is its standard input
    let o = gcmx()
        .args(["decrypt", "--force", "--keyset", &f.keyset, "-", ip])
        .stdin(fs::File::open(&inplace).unwrap())
        .output()
        .unwrap();
    refused_usage(&o, "it is the input file", "decrypt in place from stdin");
    assert!(fs::read(&inplace).unwrap() == sealed, "input changed");
    let back = f.dir.join("back");
    ok(
        run_gcmx(
            &["decrypt", "--keyset", &f.keyset, ip, back.to_str().unwrap()],
            None,
        ),
        "decrypt beside",
    );
    assert!(fs::read(&back).unwrap() == f.plain);
    assert!(leftovers(&f.dir).is_empty());
}

#[test]
fn the_keyset_is_never_an_output() {
    let f = fixture(3000);
    let keyset_bytes = fs::read(&f.keyset).unwrap();
    let p = f.dir.join("plain");
    let c = f.dir.join("ct");
    let hard = f.dir.join("k-hard.json");
    fs::hard_link(&f.keyset, &hard).unwrap();
    let soft = f.dir.join("k-soft.json");
    std::os::unix::fs::symlink(&f.keyset, &soft).unwrap();
    for target in [f.dir.join("k.json"), hard.clone(), soft.clone()] {
        for (op, input, aad) in [("encrypt", &p, ""), ("decrypt", &c, "A")] {
            for force in [true, false] {
                let mut a = vec![op, "--keyset", f.keyset.as_str(), "--aad", aad];
                if force {
                    a.push("--force");
                }
                a.extend([input.to_str().unwrap(), target.to_str().unwrap()]);
                let o = run_gcmx(&a, None);
                refused_usage(&o, "it is the keyset file", &format!("{op} to {target:?}"));
                assert_eq!(fs::read(&f.keyset).unwrap(), keyset_bytes, "keyset changed");
            }
        }
    }
    // through the other names of the keyset too
    let hs = hard.to_str().unwrap();
    let mut a = vec!["encrypt", "--force", "--keyset", hs];
    a.extend([p.to_str().unwrap(), f.keyset.as_str()]);
    refused_usage(
        &run_gcmx(&a, None),
        "it is the keyset file",
        "via a hard link",
    );
    assert_eq!(fs::read(&f.keyset).unwrap(), keyset_bytes);
    assert!(leftovers(&f.dir).is_empty());
}

#[test]
fn decrypt_to_stdout_fails_on_truncation() {
    let f = fixture(6 * SEG);
    let cut = &f.ct[..SEG - HDR + 2 * SEG];
    let o = run_gcmx(
        &["decrypt", "--keyset", &f.keyset, "--aad", "A", "-", "-"],
        Some(cut),
    );
    refused(&o, "did not authenticate", "truncated to stdout");
    // whatever was written is an authenticated prefix of the plaintext, never more
    assert!(f.plain.starts_with(&o.stdout));
}

#[test]
fn keygen_is_private_and_never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let k = keygen(tmp.path(), "k.json", false, 1 << 20);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&k).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let before = fs::read(&k).unwrap();
    let o = run_gcmx(&["keygen", "--out", k.to_str().unwrap()], None);
    refused_usage(&o, "already exists", "keygen over an existing keyset");
    assert_eq!(fs::read(&k).unwrap(), before);
    let v: serde_json::Value = serde_json::from_slice(&before).unwrap();
    assert_eq!(v["primaryKeyId"], v["key"][0]["keyId"]);
    assert_eq!(v["key"][0]["outputPrefixType"], "RAW");
    for (args, want) in [
        (vec!["--segment-size", "10"], "out of range"),
        (vec!["--segment-size", "5G"], "too large"),
        (vec!["--segment-size", "abc"], "bad size"),
    ] {
        let out = tmp.path().join("x.json");
        let mut a = vec!["keygen", "--out", out.to_str().unwrap()];
        a.extend(args);
        refused_usage(&run_gcmx(&a, None), want, "bad segment size");
        assert!(!out.exists());
    }
    // AES-128 and a 64 MiB segment
    let big = keygen(tmp.path(), "big.json", true, 64 << 20);
    let v: serde_json::Value = serde_json::from_slice(&fs::read(big).unwrap()).unwrap();
    assert!(v["key"][0]["keyData"]["value"].as_str().unwrap().len() > 20);
}

#[test]
fn demo_runs_and_labels_every_figure() {
    let o = run_gcmx(&["demo", "--mib", "8"], None);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "demo failed: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("all checks passed"), "{out}");
    assert!(out.contains("ok with auto, cpu, cpu-parallel"), "{out}");
    assert!(out.contains("AES-GCM in memory"), "{out}");
    assert!(out.contains("File to file"), "{out}");
    // Every figure has its peer in the same table and a label for what bounds it.
    for peer in ["plain memory copy", "plain copy "] {
        assert!(out.contains(peer), "no {peer:?} in {out}");
    }
    let figures: Vec<&str> = out.lines().filter(|l| l.contains("GiB/s")).collect();
    assert_eq!(figures.len(), 1 + 2 * 3 + 3, "{out}");
    for l in figures {
        assert!(
            ["memory", "CPU", "disk", "GPU"]
                .iter()
                .any(|b| l.contains(b)),
            "no bound on {l:?}"
        );
    }
    for backend in ["cpu", "cpu-parallel", "auto"] {
        assert!(
            out.contains(&format!("  {backend}, one 8 MiB message")),
            "{out}"
        );
        assert!(
            out.contains(&format!("  {backend}, batch of 8 x 1024 KiB")),
            "{out}"
        );
    }
    assert!(out.contains("gcmx encrypt (auto)") && out.contains("gcmx decrypt (auto)"));
}
