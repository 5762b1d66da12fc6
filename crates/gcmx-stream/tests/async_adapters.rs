//! The tokio adapters: they read and write the same streams as the std::io ones, through
//! inner readers and writers that return `Pending` and short counts, and refuse damage.
#![cfg(feature = "tokio")]

use std::io::{Read, Write};

use gcmx_stream::{Keyset, Options, StreamingKey};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn keyset(dks: usize, seg: u32) -> Keyset {
    Keyset::from(StreamingKey::new(1, &vec![5u8; dks], dks, seg).unwrap())
}

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 + i / 257) as u8).collect()
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn async_and_sync_adapters_read_each_other() {
    run(async {
        for (dks, seg) in [(16usize, 41u32), (32, 100), (16, 4096)] {
            let ks = keyset(dks, seg);
            for n in [0usize, 1, 24, 25, 200, 5000, 20_001] {
                let pt = data(n);
                for window in [1usize, 3 * seg as usize, 0] {
                    let opts = Options::default().with_window_bytes(window);
                    // async writer -> sync reader, in small writes and in one (which seals
                    // whole segments straight from the caller's buffer)
                    for piece in [77usize, n.max(1)] {
                        let mut w = ks
                            .clone()
                            .with_options(opts)
                            .encrypting_async_writer(Vec::new(), b"a")
                            .unwrap();
                        for c in pt.chunks(piece) {
                            w.write_all(c).await.unwrap();
                        }
                        w.shutdown().await.unwrap();
                        let ct = w.into_inner();
                        assert_eq!(
                            ct.len() as u64,
                            ks.primary().ciphertext_size(n as u64).unwrap()
                        );
                        let mut back = Vec::new();
                        ks.decrypting_reader(&ct[..], b"a")
                            .unwrap()
                            .read_to_end(&mut back)
                            .unwrap();
                        assert_eq!(back, pt);
                    }
                    // sync writer -> async reader
                    let mut w = ks
                        .clone()
                        .with_options(opts)
                        .encrypting_writer(Vec::new(), b"a")
                        .unwrap();
                    w.write_all(&pt).unwrap();
                    let ct = w.finish().unwrap();
                    let mut r = ks
                        .clone()
                        .with_options(opts)
                        .decrypting_async_reader(&ct[..], b"a")
                        .unwrap();
                    let mut back = Vec::new();
                    r.read_to_end(&mut back).await.unwrap();
                    assert_eq!(back, pt);
                }
            }
        }
    });
}

#[test]
fn through_a_narrow_pipe_with_pending_reads_and_writes() {
    run(async {
        let ks = keyset(32, 256);
        let pt = data(50_000);
        let (tx, rx) = tokio::io::duplex(61);
        let writer = async {
            let mut w = ks.encrypting_async_writer(tx, b"pipe").unwrap();
            for c in pt.chunks(1000) {
                w.write_all(c).await.unwrap();
            }
            w.shutdown().await.unwrap();
        };
        let reader = async {
            let mut r = ks.decrypting_async_reader(rx, b"pipe").unwrap();
            let mut back = Vec::new();
            let mut buf = [0u8; 333];
            loop {
                let n = r.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                back.extend_from_slice(&buf[..n]);
            }
            back
        };
        let ((), back) = tokio::join!(writer, reader);
        assert!(back == pt);
    });
}

#[test]
fn damage_is_refused_with_invalid_data() {
    run(async {
        let a = StreamingKey::new(11, &[1u8; 16], 16, 64).unwrap();
        let b = StreamingKey::new(12, &[2u8; 16], 16, 100).unwrap();
        let pt = data(1000);
        let mut w = Keyset::from(a.clone())
            .encrypting_writer(Vec::new(), b"x")
            .unwrap();
        w.write_all(&pt).unwrap();
        let ct = w.finish().unwrap();
        // several keys of one header length: the one that wrote the stream is found
        let ks = Keyset::new(1, vec![a, b]).unwrap();
        let mut back = Vec::new();
        ks.decrypting_async_reader(&ct[..], b"x")
            .unwrap()
            .read_to_end(&mut back)
            .await
            .unwrap();
        assert_eq!(back, pt);
        let cases: Vec<(Vec<u8>, &[u8])> = vec![
            (ct.clone(), b"y"),
            (ct[..ct.len() - 1].to_vec(), b"x"),
            (ct[..64 * 4].to_vec(), b"x"),
            ([&ct[..], &[0u8; 20]].concat(), b"x"),
            (Vec::new(), b"x"),
            (ct[..10].to_vec(), b"x"),
        ];
        for (i, (bad, aad)) in cases.into_iter().enumerate() {
            let mut r = ks.decrypting_async_reader(&bad[..], aad).unwrap();
            let mut got = Vec::new();
            let err = r.read_to_end(&mut got).await.unwrap_err();
            assert_eq!(
                err.kind(),
                std::io::ErrorKind::InvalidData,
                "case {i}: {err}"
            );
            assert!(
                pt.starts_with(&got),
                "case {i}: not a prefix of the plaintext"
            );
        }
    });
}

#[test]
fn a_writer_dropped_without_shutdown_leaves_a_stream_that_does_not_decrypt() {
    run(async {
        let ks = keyset(16, 64);
        let mut out = Vec::new();
        {
            let mut w = ks.encrypting_async_writer(&mut out, b"").unwrap();
            w.write_all(&data(1000)).await.unwrap();
            w.flush().await.unwrap();
        }
        let mut r = ks.decrypting_async_reader(&out[..], b"").unwrap();
        assert!(r.read_to_end(&mut Vec::new()).await.is_err());
    });
}

/// An inner `AsyncWrite` or `AsyncRead` that panics at its `panic_at`-th poll.
struct Panicking<T> {
    inner: T,
    polls: usize,
    panic_at: usize,
}

impl<T> Panicking<T> {
    fn tick(&mut self) {
        self.polls += 1;
        if self.polls == self.panic_at {
            panic!("deliberate: the inner reader or writer panics");
        }
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Panicking<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.tick();
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Panicking<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.tick();
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

fn poisoned(e: &std::io::Error) -> bool {
    gcmx_stream::Error::from_io(e).is_some_and(|e| e.kind() == gcmx_stream::ErrorKind::Poisoned)
}

/// An async writer or reader whose inner one panicked in a poll (the panic caught by the
/// caller) refuses every later poll as poisoned; what the writer wrote before is a prefix of a
/// stream that holds only the first bytes written (checked by the reader's refusal or prefix).
#[test]
fn async_adapters_whose_inner_one_panicked_are_poisoned() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    // The deliberate panics say nothing; any other says what it says.
    std::panic::set_hook(Box::new(|info| {
        let text = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .unwrap_or_default();
        if !text.starts_with("deliberate") {
            eprintln!("{info}");
        }
    }));
    let ks = keyset(16, 100);
    let pt = data(5000);
    let opts = Options::default().with_window_bytes(300);
    for panic_at in [1usize, 2, 3, 7, 20] {
        let inner = Panicking {
            inner: Vec::new(),
            polls: 0,
            panic_at,
        };
        let mut w = ks
            .clone()
            .with_options(opts)
            .encrypting_async_writer(inner, b"a")
            .unwrap();
        let first = catch_unwind(AssertUnwindSafe(|| run(w.write_all(&pt))));
        if first.is_ok() {
            let shut = catch_unwind(AssertUnwindSafe(|| run(w.shutdown())));
            assert!(
                shut.is_err() || panic_at > 100,
                "panic at {panic_at}: no panic"
            );
        }
        for _ in 0..2 {
            let e = run(w.write_all(&data(300))).unwrap_err();
            assert!(poisoned(&e), "panic at {panic_at}: {e}");
            let e = run(w.flush()).unwrap_err();
            assert!(poisoned(&e), "panic at {panic_at}: {e}");
            let e = run(w.shutdown()).unwrap_err();
            assert!(poisoned(&e), "panic at {panic_at}: {e}");
        }
        let written = w.into_inner().inner;
        let mut back = Vec::new();
        let r = ks
            .decrypting_reader(&written[..], b"a")
            .map_err(std::io::Error::from)
            .and_then(|mut r| r.read_to_end(&mut back));
        assert!(r.is_err(), "an unfinished stream was accepted");
        assert!(pt.starts_with(&back));

        let mut w = ks
            .clone()
            .with_options(opts)
            .encrypting_writer(Vec::new(), b"a")
            .unwrap();
        w.write_all(&pt).unwrap();
        let ct = w.finish().unwrap();
        let inner = Panicking {
            inner: &ct[..],
            polls: 0,
            panic_at,
        };
        let mut r = ks
            .clone()
            .with_options(opts)
            .decrypting_async_reader(inner, b"a")
            .unwrap();
        let mut out = vec![0u8; 64];
        let mut got = Vec::new();
        loop {
            match catch_unwind(AssertUnwindSafe(|| run(r.read(&mut out)))) {
                Ok(Ok(0)) => panic!("panic at {panic_at}: the reader ended"),
                Ok(Ok(n)) => got.extend_from_slice(&out[..n]),
                Ok(Err(e)) => panic!("panic at {panic_at}: {e}"),
                Err(_) => break,
            }
        }
        assert!(pt.starts_with(&got));
        let e = run(r.read(&mut out)).unwrap_err();
        assert!(poisoned(&e), "panic at {panic_at}: {e}");
    }
}
