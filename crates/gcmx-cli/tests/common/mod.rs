//! Helpers shared by the CLI integration tests.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The `gcmx` binary under test.
pub fn gcmx() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gcmx"));
    c.env_remove("GCMX_WINDOW");
    c
}

/// Runs `gcmx` with `args`, feeding `stdin`.
pub fn run_gcmx(args: &[&str], stdin: Option<&[u8]>) -> Output {
    run(gcmx().args(args), stdin)
}

/// Runs a command to completion, feeding `stdin` (or nothing).
pub fn run(cmd: &mut Command, stdin: Option<&[u8]>) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    if let Some(data) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let data = data.to_vec();
        // Write from a thread so a child that fills its stdout cannot deadlock us.
        let t = std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        });
        let out = child.wait_with_output().expect("wait");
        t.join().unwrap();
        out
    } else {
        child.wait_with_output().expect("wait")
    }
}

/// Asserts success and returns stdout.
pub fn ok(out: Output, what: &str) -> Vec<u8> {
    assert!(
        out.status.success(),
        "{what} failed ({:?}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Deterministic test data of `n` bytes, different per `seed`.
pub fn data(n: usize, seed: u64) -> Vec<u8> {
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

/// Makes a keyset with `gcmx keygen`.
pub fn keygen(dir: &Path, name: &str, aes128: bool, segment: u32) -> PathBuf {
    let p = dir.join(name);
    let seg = segment.to_string();
    let mut args = vec![
        "keygen",
        "--segment-size",
        &seg,
        "--out",
        p.to_str().unwrap(),
    ];
    if aes128 {
        args.push("--aes128");
    }
    ok(run_gcmx(&args, None), "gcmx keygen");
    p
}

/// Files in `dir` whose name marks a temporary output.
pub fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(gcmx_cli::output::PARTIAL_MARK))
        .collect()
}

/// Asserts a refusal with exit status `code`: one line on stderr naming the reason, no panic.
pub fn refused_with(o: &Output, code: i32, want: &str, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{what}: exit status, stderr {err}"
    );
    assert!(!err.contains("panicked"), "{what}: panicked: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{what}: not one line: {err}"
    );
    assert!(err.starts_with("gcmx: error: "), "{what}: {err}");
    assert!(
        err.to_lowercase().contains(&want.to_lowercase()),
        "{what}: stderr {err:?} does not mention {want:?}"
    );
}

/// A failure (exit status 1) with a one-line reason.
pub fn refused(o: &Output, want: &str, what: &str) {
    refused_with(o, 1, want, what)
}

/// A usage error (exit status 2) with a one-line reason.
pub fn refused_usage(o: &Output, want: &str, what: &str) {
    refused_with(o, 2, want, what)
}
