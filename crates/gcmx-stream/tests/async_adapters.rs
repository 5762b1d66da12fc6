//! The tokio adapters: they read and write the same streams as the std::io ones, through
//! inner readers and writers that return `Pending` and short counts, and refuse damage.
#![cfg(feature = "tokio")]

use std::io::{Read, Write};

use gcmx_stream::{Keyset, Options, StreamingKey};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn keyset(dks: usize, seg: u32) -> Keyset {
    Keyset::single(StreamingKey::new(1, &vec![5u8; dks], dks, seg).unwrap())
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
                    let opts = Options::new().with_window_bytes(window);
                    // async writer -> sync reader, in small writes and in one (which seals
                    // whole segments straight from the caller's buffer)
                    for piece in [77usize, n.max(1)] {
                        let mut w = ks
                            .encrypting_async_writer_with(Vec::new(), b"a", &opts)
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
                    let mut w = ks.encrypting_writer_with(Vec::new(), b"a", &opts).unwrap();
                    w.write_all(&pt).unwrap();
                    let ct = w.finish().unwrap();
                    let mut r = ks
                        .decrypting_async_reader_with(&ct[..], b"a", &opts)
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
        let mut w = Keyset::single(a.clone())
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
