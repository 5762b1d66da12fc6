//! Faults the `gcmx` command must survive: signals, a file-size limit, SIGKILL, outputs that
//! are not regular files, unbounded settings and inputs, closed pipes. Each test reproduces
//! one fault and checks the outcome: one line on standard error, the documented exit status,
//! and nothing on disk that disagrees with it (no partial file, no plaintext).
#![cfg(target_os = "linux")]

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use nix::libc;

struct Dir {
    _tmp: tempfile::TempDir,
    path: PathBuf,
    keyset: String,
}

fn setup() -> Dir {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().to_path_buf();
    let keyset = keygen(&path, "k.json", false, 4096).display().to_string();
    Dir {
        _tmp: tmp,
        path,
        keyset,
    }
}

impl Dir {
    fn p(&self, name: &str) -> String {
        self.path.join(name).display().to_string()
    }

    /// Writes `plain` to `plain` and encrypts it to `ct`.
    fn encrypt_sample(&self, plain: &[u8]) {
        fs::write(self.path.join("plain"), plain).unwrap();
        ok(
            run_gcmx(
                &[
                    "encrypt",
                    "--keyset",
                    &self.keyset,
                    &self.p("plain"),
                    &self.p("ct"),
                ],
                None,
            ),
            "encrypt",
        );
    }

    /// The names in the folder, sorted.
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

/// Waits until `cond` holds (polling), failing the test after 20 s.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether process `pid` has a handler installed for `sig` (Linux `SigCgt` mask).
fn catches(pid: u32, sig: i32) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << (sig - 1)) != 0)
}

/// How process `pid` writes its output in `dir`, if it has it open yet.
#[derive(Debug, PartialEq)]
enum Writing {
    /// An unnamed file (`O_TMPFILE`).
    Unnamed,
    /// The named fallback, on a file system without unnamed files.
    Named,
}

fn output_of(pid: u32, dir: &Path) -> Option<Writing> {
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let dir = dir.to_string_lossy().into_owned();
    fds.flatten().find_map(|fd| {
        let t = fs::read_link(fd.path()).ok()?;
        let t = t.to_string_lossy();
        if !t.starts_with(&dir) {
            None
        } else if t.ends_with("(deleted)") {
            Some(Writing::Unnamed)
        } else if t.contains(gcmx_cli::output::PARTIAL_MARK) {
            Some(Writing::Named)
        } else {
            None
        }
    })
}

fn writes_output_in(pid: u32, dir: &Path) -> bool {
    output_of(pid, dir).is_some()
}

fn signal(pid: u32, sig: i32) {
    match nix::sys::signal::Signal::try_from(sig) {
        Ok(s) => nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), s).expect("kill"),
        // Real-time signals have no `Signal` value: use kill(1).
        Err(_) => assert!(
            Command::new("kill")
                .args([format!("-{sig}"), pid.to_string()])
                .status()
                .unwrap()
                .success()
        ),
    }
}

/// Starts `gcmx ARGS` reading a pipe that we keep open, with `data` already written to it.
fn start_on_pipe(args: &[&str], data: &[u8]) -> (Child, std::process::ChildStdin) {
    let mut child = gcmx()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(data).unwrap();
    (child, stdin)
}

/// Asserts that no file in `dir` holds `needle` (a piece of the plaintext).
fn no_file_holds(dir: &Path, needle: &[u8], what: &str) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            let bytes = fs::read(e.path()).unwrap();
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "{what}: {} holds plaintext",
                e.path().display()
            );
        }
    }
}

/// The signals whose default action ends a process and that gcmx catches.
fn terminating_signals() -> Vec<i32> {
    vec![
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGXCPU,
        libc::SIGSTKFLT,
        libc::SIGRTMIN(),
        libc::SIGRTMIN() + 5,
        libc::SIGRTMAX(),
    ]
}

#[test]
fn every_terminating_signal_ends_with_one_line_and_leaves_nothing() {
    let d = setup();
    let plain = data(300_000, 5);
    d.encrypt_sample(&plain);
    let ct = fs::read(d.path.join("ct")).unwrap();
    let before = d.names();
    for sig in terminating_signals() {
        for (op, input) in [("encrypt", &plain), ("decrypt", &ct)] {
            let out = d.p("out");
            // Part of the input, the pipe kept open: the run is in progress, waiting.
            let (child, stdin) = start_on_pipe(
                &[op, "--quiet", "--keyset", &d.keyset, "-", &out],
                &input[..200_000],
            );
            let pid = child.id();
            wait_until("signal handlers installed", || catches(pid, sig));
            wait_until("output opened", || writes_output_in(pid, &d.path));
            signal(pid, sig);
            let o = child.wait_with_output().unwrap();
            drop(stdin);
            let what = format!("{op} stopped by signal {sig}");
            refused_with(&o, 128 + sig, "stopped by SIG", &what);
            assert!(!stderr(&o).contains("stopped by signal"), "{what}: unnamed");
            assert_eq!(d.names(), before, "{what}: files changed");
        }
    }
}

#[test]
fn a_signal_racing_the_end_of_a_run_never_disagrees_with_the_disk() {
    let d = setup();
    let plain = data(2_000_000, 6);
    fs::write(d.path.join("plain"), &plain).unwrap();
    let (mut done, mut stopped) = (0, 0);
    for i in 0..40u64 {
        let out = d.path.join(format!("out{i}"));
        let mut child = gcmx()
            .args(["encrypt", "--quiet", "--keyset", &d.keyset, &d.p("plain")])
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Polled closely: the run itself takes a few milliseconds.
        while !catches(pid, libc::SIGTERM) && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_micros(50));
        }
        // Spread the signal over the run and its end.
        std::thread::sleep(Duration::from_micros((i % 10) * 400));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let status = child.wait().unwrap();
        match status.code() {
            Some(0) => {
                done += 1;
                // Complete and correct.
                let back = d.path.join(format!("back{i}"));
                ok(
                    gcmx()
                        .args(["decrypt", "--quiet", "--keyset", &d.keyset])
                        .arg(&out)
                        .arg(&back)
                        .output()
                        .unwrap(),
                    "decrypt",
                );
                assert!(fs::read(&back).unwrap() == plain, "run {i}: wrong output");
                fs::remove_file(back).unwrap();
                fs::remove_file(&out).unwrap();
            }
            Some(143) => {
                stopped += 1;
                assert!(!out.exists(), "run {i}: status 143 but the output is there");
            }
            other => panic!("run {i}: status {other:?}"),
        }
        assert!(leftovers(&d.path).is_empty(), "run {i}");
    }
    assert_eq!(done + stopped, 40);
    println!("{done} runs finished, {stopped} stopped by the signal");
}

#[test]
fn a_file_size_limit_ends_with_one_line_and_leaves_no_plaintext() {
    let d = setup();
    let plain = data(3_000_000, 7);
    d.encrypt_sample(&plain);
    let before = d.names();
    for (op, input) in [("encrypt", "plain"), ("decrypt", "ct")] {
        // 1000 blocks of 512 bytes: the limit is crossed in the middle of the output.
        let script = format!("ulimit -f 1000; exec \"$0\" {op} --keyset \"$1\" \"$2\" \"$3\"",);
        let o = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(env!("CARGO_BIN_EXE_gcmx"))
            .args([&d.keyset, &d.p(input), &d.p("out")])
            .env_remove("GCMX_WINDOW")
            .output()
            .unwrap();
        refused(&o, "file size limit", &format!("{op} under ulimit -f"));
        assert_eq!(d.names(), before, "{op}: files changed");
    }
    // Nothing but the plaintext itself holds plaintext.
    fs::remove_file(d.path.join("plain")).unwrap();
    no_file_holds(&d.path, &plain[1_000_000..1_000_064], "after ulimit -f");
}

#[test]
fn sigkill_leaves_no_partial_output() {
    let d = setup();
    let plain = data(1_000_000, 8);
    d.encrypt_sample(&plain);
    fs::remove_file(d.path.join("plain")).unwrap();
    let ct = fs::read(d.path.join("ct")).unwrap();
    // A decryption that has written plaintext and waits for more input, killed.
    let out = d.p("out");
    let (mut child, stdin) = start_on_pipe(
        &["decrypt", "--quiet", "--keyset", &d.keyset, "-", &out],
        &ct[..700_000],
    );
    let pid = child.id();
    wait_until("output opened", || writes_output_in(pid, &d.path));
    let how = output_of(pid, &d.path);
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    if how == Some(Writing::Named) {
        // No unnamed files here: the killed run's file is recognisable, and the next run on
        // the same target removes it.
        assert_eq!(leftovers(&d.path).len(), 1, "{:?}", d.names());
        fs::write(d.path.join("plain"), b"x").unwrap();
        ok(
            run_gcmx(
                &["encrypt", "-q", "--keyset", &d.keyset, &d.p("plain"), &out],
                None,
            ),
            "the next run",
        );
        fs::remove_file(&out).unwrap();
        fs::remove_file(d.path.join("plain")).unwrap();
    }
    assert_eq!(d.names(), vec!["ct", "k.json"], "SIGKILL left files");
    no_file_holds(&d.path, &plain[..64], "after SIGKILL");
}

#[test]
fn the_next_run_removes_what_a_killed_run_left() {
    let d = setup();
    fs::write(d.path.join("plain"), data(1000, 9)).unwrap();
    // A temporary output named as gcmx names them where it cannot write unnamed files,
    // left by a process that is gone.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let stale = d.path.join(format!(
        ".out{}{pid}-0a1b2c",
        gcmx_cli::output::PARTIAL_MARK
    ));
    fs::write(&stale, b"left by SIGKILL").unwrap();
    ok(
        run_gcmx(
            &[
                "encrypt",
                "--quiet",
                "--keyset",
                &d.keyset,
                &d.p("plain"),
                &d.p("out"),
            ],
            None,
        ),
        "encrypt",
    );
    assert!(!stale.exists());
    assert_eq!(d.names(), vec!["k.json", "out", "plain"]);
}

#[test]
fn force_never_replaces_links_fifos_or_devices() {
    let d = setup();
    fs::write(d.path.join("plain"), data(1000, 10)).unwrap();
    fs::write(d.path.join("real"), b"precious").unwrap();
    std::os::unix::fs::symlink(d.path.join("real"), d.path.join("link")).unwrap();
    std::os::unix::fs::symlink(d.path.join("nowhere"), d.path.join("dangling")).unwrap();
    nix::unistd::mkfifo(
        &d.path.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let mut targets = vec![
        ("link", "symbolic link"),
        ("dangling", "symbolic link"),
        ("fifo", "FIFO"),
    ];
    // A device node of our own (a copy of /dev/null), where we may make one.
    let dev = d.path.join("dev");
    if nix::sys::stat::mknod(
        &dev,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
        nix::sys::stat::makedev(1, 3),
    )
    .is_ok()
    {
        targets.push(("dev", "device"));
    }
    let kinds = |d: &Dir| -> Vec<(String, fs::FileType)> {
        d.names()
            .into_iter()
            .map(|n| {
                let t = fs::symlink_metadata(d.path.join(&n)).unwrap().file_type();
                (n, t)
            })
            .collect()
    };
    let before = kinds(&d);
    for (name, kind) in &targets {
        for force in [true, false] {
            let mut args = vec!["encrypt", "--keyset", &d.keyset];
            if force {
                args.push("--force");
            }
            let (p, t) = (d.p("plain"), d.p(name));
            args.extend([p.as_str(), t.as_str()]);
            let o = run_gcmx(&args, None);
            let what = format!("{name} (force: {force})");
            refused_usage(&o, kind, &what);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!err.contains("--force"), "{what}: steers to --force: {err}");
        }
    }
    assert_eq!(kinds(&d), before);
    assert_eq!(fs::read(d.path.join("real")).unwrap(), b"precious");
    // An existing regular file: the message offers --force, and --force replaces it.
    let o = run_gcmx(
        &[
            "encrypt",
            "--keyset",
            &d.keyset,
            &d.p("plain"),
            &d.p("real"),
        ],
        None,
    );
    refused_usage(&o, "--force", "existing regular file");
    ok(
        run_gcmx(
            &[
                "encrypt",
                "--force",
                "--keyset",
                &d.keyset,
                &d.p("plain"),
                &d.p("real"),
            ],
            None,
        ),
        "--force over a regular file",
    );
    assert_ne!(fs::read(d.path.join("real")).unwrap(), b"precious");
}

#[test]
fn window_and_keyset_sizes_are_bounded() {
    let d = setup();
    for (value, want) in [
        ("1000000G", "too large"),
        ("2G", "too large"),
        ("lots", "GCMX_WINDOW"),
    ] {
        let o = run(
            gcmx().env("GCMX_WINDOW", value).args([
                "encrypt",
                "--keyset",
                &d.keyset,
                "-",
                &d.p("out"),
            ]),
            Some(&data(1000, 1)),
        );
        refused_usage(&o, want, &format!("GCMX_WINDOW={value}"));
    }
    let t = Instant::now();
    let o = run_gcmx(
        &[
            "encrypt",
            "--keyset",
            "/dev/zero",
            &d.p("k.json"),
            &d.p("out"),
        ],
        None,
    );
    refused(&o, "larger than", "--keyset /dev/zero");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(d.names(), vec!["k.json"]);
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn keygen_to_stdout_and_its_summary() {
    let d = setup();
    let o = gcmx()
        .current_dir(&d.path)
        .args(["keygen", "--aes128", "--segment-size", "64K", "--out", "-"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["primaryKeyId"], v["key"][0]["keyId"]);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("AES-128") && err.contains("64 KiB"), "{err}");
    assert!(err.contains("keep it secret"), "{err}");
    assert_eq!(d.names(), vec!["k.json"], "no file named -");
    // The keyset from standard output works.
    fs::write(d.path.join("k2.json"), &o.stdout).unwrap();
    fs::write(d.path.join("plain"), b"hello").unwrap();
    ok(
        run_gcmx(
            &[
                "encrypt",
                "-q",
                "--keyset",
                &d.p("k2.json"),
                &d.p("plain"),
                &d.p("ct"),
            ],
            None,
        ),
        "encrypt with the keyset from standard output",
    );
    // To a file: the summary names it.
    let o = run_gcmx(&["keygen", "--out", &d.p("k3.json")], None);
    assert!(o.status.success());
    assert!(stderr(&o).contains("k3.json"), "{}", stderr(&o));
}

#[test]
fn help_shows_examples_and_exit_codes() {
    for args in [
        vec!["--help"],
        vec!["encrypt", "--help"],
        vec!["decrypt", "--help"],
    ] {
        let o = run_gcmx(&args, None);
        assert!(o.status.success());
        let out = String::from_utf8_lossy(&o.stdout);
        for want in [
            "Examples:",
            "Exit status:",
            "128+N",
            "  2 ",
            "is refused",
            "gcmx decrypt --keyset",
        ] {
            assert!(out.contains(want), "{args:?}: no {want:?} in\n{out}");
        }
    }
    let o = run_gcmx(&["keygen", "--help"], None);
    assert!(String::from_utf8_lossy(&o.stdout).contains("secret"));
    // A usage error found by the argument parser is also status 2.
    assert_eq!(
        run_gcmx(&["encrypt", "--bogus"], None).status.code(),
        Some(2)
    );
}

#[test]
fn a_failed_decryption_names_the_segment_and_a_run_ends_with_a_summary() {
    let d = setup();
    // 50 segments of 4 KiB, all in one batch.
    let plain = data(50 * 4080, 11);
    fs::write(d.path.join("plain"), &plain).unwrap();
    let o = run_gcmx(
        &["encrypt", "--keyset", &d.keyset, &d.p("plain"), &d.p("ct")],
        None,
    );
    assert!(o.status.success());
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gcmx: encrypted 204000 bytes") && err.contains("51 segments"),
        "{err}"
    );
    let quiet = run_gcmx(
        &[
            "encrypt",
            "-q",
            "--keyset",
            &d.keyset,
            &d.p("plain"),
            &d.p("ct2"),
        ],
        None,
    );
    assert!(quiet.status.success() && quiet.stderr.is_empty());
    let mut ct = fs::read(d.path.join("ct")).unwrap();
    // Segment 37 starts at 37 * 4096 (segment 0 is shorter by the header).
    ct[37 * 4096 + 100] ^= 1;
    fs::write(d.path.join("bad"), &ct).unwrap();
    let from_file = run_gcmx(
        &["decrypt", "--keyset", &d.keyset, &d.p("bad"), &d.p("out")],
        None,
    );
    refused(&from_file, "segment 37 did not authenticate", "from a file");
    let from_pipe = run_gcmx(
        &["decrypt", "--keyset", &d.keyset, "-", &d.p("out")],
        Some(&ct),
    );
    refused(&from_pipe, "segment 37 did not authenticate", "from a pipe");
    assert!(!d.path.join("out").exists());
    let o = run_gcmx(
        &["decrypt", "--keyset", &d.keyset, &d.p("ct"), &d.p("out")],
        None,
    );
    assert!(o.status.success());
    assert!(
        stderr(&o).starts_with("gcmx: decrypted 204000 bytes"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_closed_output_pipe_is_a_one_line_error() {
    let d = setup();
    fs::write(d.path.join("plain"), data(3_000_000, 12)).unwrap();
    let mut child = gcmx()
        .args(["encrypt", "--keyset", &d.keyset, &d.p("plain"), "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    refused(&o, "reading end was closed", "closed standard output");
}

#[test]
fn a_stalled_input_does_not_delay_an_error() {
    // A bad ciphertext on a pipe that stays open: the error comes at once, not when the
    // writer of the pipe finally closes it.
    let d = setup();
    d.encrypt_sample(&data(100_000, 13));
    let mut ct = fs::read(d.path.join("ct")).unwrap();
    ct[100] ^= 1;
    let mut child = gcmx()
        .env("GCMX_WINDOW", "4K")
        .args(["decrypt", "--keyset", &d.keyset, "-", &d.p("out")])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&ct[..50_000]).unwrap();
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "still running");
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    drop(stdin);
    refused(&o, "segment 0 did not authenticate", "stalled pipe");
}
