//! Properties of the adapters over arbitrary inputs: any split of the writes, any sequence
//! of seeks and reads gives the plaintext back; any change of the ciphertext never makes a
//! reader hand out a byte that is not the plaintext's at that offset.

use std::io::{BufRead, BufReader, Cursor, Read, Seek, SeekFrom, Write};

use gcmx_stream::{Backend, DecryptingReader, Keyset, Options, StreamingKey};
use proptest::prelude::*;

fn keyset(dks: usize, seg: u32) -> Keyset {
    Keyset::from(StreamingKey::new(1, &vec![3u8; dks], dks, seg).unwrap())
}

fn encrypt(ks: &Keyset, pt: &[u8], splits: &[usize], window: usize) -> Vec<u8> {
    let opts = Options::default()
        .with_window_bytes(window)
        .with_backend(Backend::Cpu);
    let mut w = ks
        .clone()
        .with_options(opts)
        .encrypting_writer(Vec::new(), b"p")
        .unwrap();
    let mut rest = pt;
    let mut k = 0;
    while !rest.is_empty() {
        let n = splits
            .get(k)
            .copied()
            .unwrap_or(rest.len())
            .clamp(1, rest.len());
        w.write_all(&rest[..n]).unwrap();
        rest = &rest[n..];
        k += 1;
    }
    w.finish().unwrap()
}

/// Reads through the decrypting reader in pieces of `piece` bytes (0: through `fill_buf` and
/// `consume`) until the end or an error, from a `Read` source (`cap` 0) or from a buffered
/// source whose buffer holds `cap` bytes; returns what came out and whether it ended cleanly.
fn read_stream(ks: &Keyset, ct: &[u8], piece: usize, window: usize, cap: usize) -> (Vec<u8>, bool) {
    let opts = Options::default()
        .with_window_bytes(window)
        .with_backend(Backend::Cpu);
    if cap == 0 {
        drain(
            ks.clone().with_options(opts).decrypting_reader(ct, b"p"),
            piece,
        )
    } else {
        let src = BufReader::with_capacity(cap, ct);
        drain(
            ks.clone()
                .with_options(opts)
                .decrypting_buf_reader(src, b"p"),
            piece,
        )
    }
}

fn drain<R: Read>(r: gcmx_stream::Result<DecryptingReader<R>>, piece: usize) -> (Vec<u8>, bool) {
    let Ok(mut r) = r else {
        return (Vec::new(), false);
    };
    let mut out = Vec::new();
    let mut buf = vec![0u8; piece];
    loop {
        let got = if piece == 0 {
            r.fill_buf().map(|p| {
                out.extend_from_slice(p);
                p.len()
            })
        } else {
            r.read(&mut buf)
                .inspect(|&n| out.extend_from_slice(&buf[..n]))
        };
        match got {
            Ok(0) => return (out, true),
            Ok(n) if piece == 0 => r.consume(n),
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
                return (out, false);
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Start(u64),
    End(i64),
    Current(i64),
    Read(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..4000).prop_map(Op::Start),
        (-4000i64..100).prop_map(Op::End),
        (-2000i64..2000).prop_map(Op::Current),
        (0usize..1500).prop_map(Op::Read),
    ]
}

fn geometry() -> impl Strategy<Value = (usize, u32)> {
    prop_oneof![Just(16usize), Just(32usize)]
        .prop_flat_map(|dks| (Just(dks), (dks as u32 + 25)..300u32))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn any_writes_any_seeks_and_reads_give_the_plaintext(
        (dks, seg) in geometry(),
        pt in prop::collection::vec(any::<u8>(), 0..3000),
        splits in prop::collection::vec(1usize..700, 0..20),
        window in 0usize..2000,
        piece in 1usize..2500,
        cap in 1usize..4000,
        ops in prop::collection::vec(op(), 0..40),
    ) {
        let ks = keyset(dks, seg);
        let ct = encrypt(&ks, &pt, &splits, window);
        prop_assert_eq!(ct.len() as u64, ks.primary().ciphertext_size(pt.len() as u64).unwrap());
        for (piece, cap) in [(piece, 0), (piece, cap), (0, cap)] {
            let (back, clean) = read_stream(&ks, &ct, piece, window, cap);
            prop_assert!(clean);
            prop_assert_eq!(&back, &pt);
        }

        let opts = Options::default().with_window_bytes(window).with_backend(Backend::Cpu);
        let mut r = ks.clone().with_options(opts).seekable_reader(Cursor::new(&ct), b"p").unwrap();
        let mut pos: u64 = 0;
        for op in ops {
            match op {
                Op::Start(n) => { pos = r.seek(SeekFrom::Start(n)).unwrap(); prop_assert_eq!(pos, n); }
                Op::End(d) => match r.seek(SeekFrom::End(d)) {
                    Ok(p) => { prop_assert_eq!(p as i64, pt.len() as i64 + d); pos = p; }
                    Err(_) => prop_assert!(pt.len() as i64 + d < 0),
                },
                Op::Current(d) => match r.seek(SeekFrom::Current(d)) {
                    Ok(p) => { prop_assert_eq!(p as i64, pos as i64 + d); pos = p; }
                    Err(_) => prop_assert!((pos as i64) + d < 0),
                },
                Op::Read(n) => {
                    let mut buf = vec![0u8; n];
                    let got = r.read(&mut buf).unwrap();
                    let s = (pos as usize).min(pt.len());
                    let want = &pt[s..(s + n).min(pt.len())];
                    prop_assert!(got <= want.len());
                    prop_assert!(n == 0 || want.is_empty() || got > 0, "a short read of nothing");
                    prop_assert_eq!(&buf[..got], &want[..got]);
                    pos += got as u64;
                }
            }
        }
    }

    #[test]
    fn changed_ciphertexts_never_yield_a_byte_that_is_not_the_plaintexts(
        (dks, seg) in geometry(),
        pt in prop::collection::vec(any::<u8>(), 0..2000),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
        extra in prop::collection::vec(any::<u8>(), 0..80),
        window in 0usize..1500,
        piece in 1usize..1500,
        cap in 1usize..3000,
        reads in prop::collection::vec((0u64..2500, 1usize..600), 0..12),
    ) {
        let ks = keyset(dks, seg);
        let good = encrypt(&ks, &pt, &[], window);
        let mut ct = good.clone();
        for (i, x) in &flips {
            let at = i.index(ct.len());
            ct[at] ^= x;
        }
        if let Some(c) = cut {
            ct.truncate(c.index(ct.len() + 1));
        }
        ct.extend_from_slice(&extra);
        let changed = ct != good;

        for (piece, cap) in [(piece, 0), (piece, cap), (0, cap)] {
            let (out, clean) = read_stream(&ks, &ct, piece, window, cap);
            prop_assert!(pt.starts_with(&out), "the stream reader handed out other bytes");
            prop_assert_eq!(clean, !changed, "a clean end must mean an unchanged stream");
        }

        let opts = Options::default().with_window_bytes(window).with_backend(Backend::Cpu);
        if let Ok(mut r) = ks.clone().with_options(opts).seekable_reader(Cursor::new(&ct), b"p") {
            for (at, n) in reads {
                r.seek(SeekFrom::Start(at)).unwrap();
                let mut buf = vec![0u8; n];
                if let Ok(got) = r.read(&mut buf) {
                    let s = (at as usize).min(pt.len());
                    let want = &pt[s..(s + n).min(pt.len())];
                    prop_assert!(got <= want.len(), "bytes past the plaintext's end");
                    prop_assert_eq!(&buf[..got], &want[..got]);
                }
            }
            if changed {
                // A changed stream never reads to its end.
                r.seek(SeekFrom::Start(0)).unwrap();
                let mut all = Vec::new();
                prop_assert!(r.read_to_end(&mut all).is_err());
            }
        }
    }

    #[test]
    fn large_reads_and_small_reads_agree_on_any_change(
        (dks, seg) in geometry(),
        pt in prop::collection::vec(any::<u8>(), 0..6000),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..3),
        cut in prop::option::of(any::<prop::sample::Index>()),
        extra in prop::collection::vec(any::<u8>(), 0..40),
        window in 0usize..1200,
    ) {
        // Reads of the whole stream go straight into the buffer, a group of segments at a
        // time; 5-byte reads go through the window. Both end cleanly on the unchanged stream
        // only, and hand out nothing but a prefix of the plaintext.
        let ks = keyset(dks, seg);
        let good = encrypt(&ks, &pt, &[], window);
        let mut ct = good.clone();
        for (i, x) in &flips {
            let at = i.index(ct.len());
            ct[at] ^= x;
        }
        if let Some(c) = cut {
            ct.truncate(c.index(ct.len() + 1));
        }
        ct.extend_from_slice(&extra);
        let changed = ct != good;
        // The same from a buffered source holding the whole stream (segments opened from its
        // buffer) and through `fill_buf`.
        let whole = ct.len() + 1;
        for cap in [0, whole] {
            let (large, large_clean) = read_stream(&ks, &ct, ct.len() + 1, window, cap);
            let (small, small_clean) = read_stream(&ks, &ct, 5, window, cap);
            prop_assert!(pt.starts_with(&large));
            prop_assert!(pt.starts_with(&small));
            prop_assert_eq!(large_clean, !changed);
            prop_assert_eq!(small_clean, !changed);
            if !changed {
                prop_assert_eq!(&large, &pt);
            }
        }
        let (filled, filled_clean) = read_stream(&ks, &ct, 0, window, whole);
        prop_assert!(pt.starts_with(&filled));
        prop_assert_eq!(filled_clean, !changed);
    }
}
