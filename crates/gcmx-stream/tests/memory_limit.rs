//! Allocations that a keyset can force, under a memory limit: a key of 2 GiB segments, and two
//! such keys of one header length (a reader then tries each on the first segment, which may be
//! up to 2 GiB long). Streams of a few bytes read and write within the limit, and a stream that
//! needs more than the limit allows fails with an error: the process never aborts.
//!
//! The work runs in a child process (this test binary again) whose address space is limited to
//! what it uses plus [`HEADROOM`], less than a window of 256 MiB.

#![cfg(target_os = "linux")]

use std::io::{self, Read, Write};
use std::process::Command;

use gcmx_stream::{Keyset, MAX_SEGMENT_SIZE, StreamingKey};

/// Set in the child's environment.
const CHILD: &str = "GCMX_STREAM_MEMORY_LIMIT_CHILD";

/// Address space the child may take beyond what it holds when the limit is set.
const HEADROOM: u64 = 192 << 20;

#[test]
fn allocations_a_keyset_can_force_are_errors_under_a_memory_limit() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "under_a_memory_limit",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        // One malloc arena: each arena reserves 64 MiB of address space.
        .env("MALLOC_ARENA_MAX", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("all within the limit"),
        "child: {}\n{stdout}\n{stderr}",
        out.status
    );
}

/// The child's work (does nothing unless run by the test above).
#[test]
fn under_a_memory_limit() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let big = |id, ikm| StreamingKey::new(id, &[ikm; 16], 16, MAX_SEGMENT_SIZE).unwrap();
    let one = Keyset::from(big(1, 1));
    let two = Keyset::new(0, vec![big(1, 1), big(2, 2)]).unwrap();
    // The pool's threads and their stacks exist before the limit.
    rayon::broadcast(|_| std::hint::black_box(vec![1u8; 4096]));
    limit_address_space();

    // A short stream: the writer's window is what the data needs, not 256 MiB.
    let mut w = one.encrypting_writer(Vec::new(), b"").unwrap();
    w.write_all(b"a short message under a memory limit")
        .unwrap();
    let ct = w.finish().unwrap();
    println!("writer: {} bytes", ct.len());

    let mut plain = Vec::new();
    two.decrypting_reader(&ct[..], b"")
        .unwrap()
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(plain, b"a short message under a memory limit");
    let mut seek = two.seekable_reader(io::Cursor::new(&ct), b"").unwrap();
    plain.clear();
    seek.read_to_end(&mut plain).unwrap();
    assert_eq!(plain, b"a short message under a memory limit");
    println!("readers: the plaintext");

    #[cfg(feature = "tokio")]
    {
        use tokio::io::AsyncReadExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let plain = rt.block_on(async {
            let mut r = two.decrypting_async_reader(&ct[..], b"").unwrap();
            let mut plain = Vec::new();
            r.read_to_end(&mut plain).await.map(|_| plain)
        });
        assert_eq!(plain.unwrap(), b"a short message under a memory limit");
        println!("async reader: the plaintext");
    }

    // A segment of 400 MiB must be held whole before it is sealed: more than the limit.
    let mut w = one.encrypting_writer(io::sink(), b"").unwrap();
    let chunk = vec![5u8; 1 << 20];
    let failed = (0..400).find_map(|_| w.write_all(&chunk).err());
    let e = failed.expect("400 MiB of one segment fit under the limit");
    assert_eq!(e.kind(), io::ErrorKind::OutOfMemory, "{e}");
    println!("writer past the limit: {e}");
    println!("all within the limit");
}

/// Limits the address space to what the process holds now plus [`HEADROOM`].
fn limit_address_space() {
    use nix::sys::resource::{Resource, setrlimit};
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let limit = kib * 1024 + HEADROOM;
    setrlimit(Resource::RLIMIT_AS, limit, limit).unwrap();
}
