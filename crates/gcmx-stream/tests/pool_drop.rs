//! Dropping an adapter while rayon's pool is busy with other work: the drop neither waits for
//! that work nor deadlocks when the pool's tasks wait on the dropping thread. (A test binary of
//! its own: it holds the whole global pool.)

use std::io::{Read, Write};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use gcmx_stream::{Backend, Keyset, Options, StreamingKey};

const THREADS: usize = 3;

/// Blocks `n` threads of the global pool until the returned sender is dropped or sent to; the
/// receiver tells when all `n` have started.
fn block_pool(n: usize) -> (std::sync::mpsc::Sender<()>, Receiver<()>) {
    let (release_tx, release_rx) = channel::<()>();
    let release_rx = std::sync::Arc::new(std::sync::Mutex::new(release_rx));
    let (started_tx, started_rx) = channel();
    for _ in 0..n {
        let (release_rx, started_tx) = (release_rx.clone(), started_tx.clone());
        rayon::spawn(move || {
            started_tx.send(()).unwrap();
            // Each task waits until it is released (one message each) or the sender is gone.
            let _ = release_rx.lock().unwrap().recv();
        });
    }
    (release_tx, started_rx)
}

/// Runs `f` on a thread of its own: whether it returned within `limit`.
fn returns_within(limit: Duration, f: impl FnOnce() + Send + 'static) -> bool {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(limit).is_ok()
}

/// With one pool thread blocked, and then with every pool thread blocked until the drop has
/// returned (tasks that wait on the dropping thread), writers and readers that used the pool,
/// with windows large enough to be wiped on several threads, are dropped at once.
#[test]
fn a_drop_neither_waits_for_the_pool_nor_deadlocks() {
    rayon::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build_global()
        .unwrap();
    let ks = Keyset::from(StreamingKey::new(1, &[9u8; 16], 16, 1 << 16).unwrap());
    let opts = Options::default()
        .with_backend(Backend::CpuParallel)
        .with_window_bytes(16 << 20);
    let pt: Vec<u8> = (0..40u32 << 20).map(|i| (i % 251) as u8).collect();
    for blocked in [1, THREADS] {
        // Streams used while the pool is free: their segments ran on every pool thread.
        let mut w = ks
            .clone()
            .with_options(opts)
            .encrypting_writer(Vec::new(), b"")
            .unwrap();
        w.write_all(&pt).unwrap();
        let ct = w.finish().unwrap();
        let mut w = ks
            .clone()
            .with_options(opts)
            .encrypting_writer(Vec::new(), b"")
            .unwrap();
        w.write_all(&pt[..(20 << 20) + 7]).unwrap();
        let mut r = ks
            .clone()
            .with_options(opts)
            .decrypting_buf_reader(std::io::Cursor::new(ct.clone()), b"")
            .unwrap();
        let mut back = vec![0u8; 30 << 20];
        r.read_exact(&mut back).unwrap();
        assert!(back == pt[..30 << 20]);
        let mut s = ks
            .clone()
            .with_options(opts)
            .seekable_reader(std::io::Cursor::new(ct), b"")
            .unwrap();
        s.read_exact(&mut back[..1000]).unwrap();

        let (release, started) = block_pool(blocked);
        for _ in 0..blocked {
            started.recv().unwrap();
        }
        let dropped = returns_within(Duration::from_secs(60), move || {
            drop(w);
            drop(r);
            drop(s);
        });
        // The blocked tasks go on once the drops returned (or the test gave up on them).
        for _ in 0..blocked {
            let _ = release.send(());
        }
        assert!(
            dropped,
            "{blocked} of {THREADS} pool threads blocked: the drops did not return"
        );
    }
    // The pool took the queued wipes once free: it runs tasks again.
    let (tx, rx) = channel();
    rayon::spawn(move || tx.send(()).unwrap());
    rx.recv_timeout(Duration::from_secs(60)).unwrap();
}
