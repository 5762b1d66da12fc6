//! The reader's paths against each other: reads straight into the caller's buffer (from a
//! `Read` source, or opened from a buffered source's buffer), through the window, and through
//! `fill_buf`, over whole, truncated, damaged and extended streams, and over sources that fail
//! or hand out their bytes unevenly.

use std::io::{self, BufRead, Read, Write};

use gcmx_stream::{DecryptingReader, Keyset, Options, StreamingKey};

fn keyset(dks: usize, seg: u32) -> Keyset {
    Keyset::from(StreamingKey::new(1, &vec![5u8; dks], dks, seg).unwrap())
}

fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

/// Plaintext bytes of the first segment and of the others; the header's length.
fn geometry(ks: &Keyset) -> (usize, usize, usize) {
    let k = ks.primary();
    let header = 1 + k.derived_key_size() + 7;
    let seg = k.segment_size() as usize;
    (seg - header - 16, seg - 16, header)
}

fn encrypt(ks: &Keyset, aad: &[u8], pt: &[u8]) -> Vec<u8> {
    let mut w = ks.encrypting_writer(Vec::new(), aad).unwrap();
    w.write_all(pt).unwrap();
    w.finish().unwrap()
}

/// What a reader gave: the bytes up to its end or its first error, and that error.
struct Outcome {
    out: Vec<u8>,
    err: Option<io::Error>,
}

/// Where a test reader takes its ciphertext from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// Through `Read` ([`Keyset::decrypting_reader_with`]).
    Read,
    /// A slice through `BufRead`: the whole ciphertext in the source's buffer.
    Slice,
    /// A `BufReader` of this capacity: the buffer holds a part.
    Chunks(usize),
}

/// Reads `ct` in reads of `piece` bytes (0: through `fill_buf` and `consume`). Before each
/// read the buffer is filled with 0xAA; after a failed read it holds only 0xAA and zeros (what
/// the read wrote was wiped), and the failure is final.
fn read_in(
    ks: &Keyset,
    aad: &[u8],
    ct: &[u8],
    piece: usize,
    window: usize,
    source: Source,
) -> Outcome {
    let opts = Options::default().with_window_bytes(window);
    match source {
        Source::Read => drive(
            ks.clone().with_options(opts).decrypting_reader(ct, aad),
            piece,
        ),
        Source::Slice => drive(
            ks.clone().with_options(opts).decrypting_buf_reader(ct, aad),
            piece,
        ),
        Source::Chunks(n) => drive(
            ks.clone()
                .with_options(opts)
                .decrypting_buf_reader(io::BufReader::with_capacity(n, ct), aad),
            piece,
        ),
    }
}

fn drive<R: Read>(r: gcmx_stream::Result<DecryptingReader<R>>, piece: usize) -> Outcome {
    let mut r = match r {
        Ok(r) => r,
        Err(e) => {
            return Outcome {
                out: Vec::new(),
                err: Some(e.into()),
            };
        }
    };
    let mut out = Vec::new();
    if piece == 0 {
        loop {
            match r.fill_buf() {
                Ok([]) => return Outcome { out, err: None },
                Ok(p) => {
                    out.extend_from_slice(p);
                    let n = p.len();
                    r.consume(n);
                }
                Err(e) => {
                    assert!(r.fill_buf().is_err(), "a fill_buf after a failure");
                    return Outcome { out, err: Some(e) };
                }
            }
        }
    }
    let mut buf = vec![0u8; piece];
    loop {
        buf.fill(0xAA);
        match r.read(&mut buf) {
            Ok(0) => return Outcome { out, err: None },
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => {
                assert!(
                    buf.iter().all(|&b| b == 0 || b == 0xAA),
                    "a failed read left other bytes than its own wipe: {e}"
                );
                assert!(r.read(&mut buf).is_err(), "a read after a failure");
                return Outcome { out, err: Some(e) };
            }
        }
    }
}

/// The reads of `ct` in large pieces (straight into the buffer) and in 7-byte pieces (through the window, but for a
/// first segment of fewer bytes), from a `Read` source and from buffered ones (the whole
/// stream, or two and a half segments, in the source's buffer; also through `fill_buf`)
/// agree: the same plaintext, or the same error after a prefix of the plaintext.
fn agree(ks: &Keyset, aad: &[u8], ct: &[u8], pt: &[u8], what: &str) -> Option<io::Error> {
    agree_on(ks, aad, ct, pt, what, true)
}

/// [`agree`], or with `exact` false, failures of InvalidData both but not necessarily the
/// same: with two faults (an extension that leaves a short segment after a segment that
/// does not authenticate), the window finds the short one first when both are in it, a
/// direct read the one that comes first.
fn agree_on(
    ks: &Keyset,
    aad: &[u8],
    ct: &[u8],
    pt: &[u8],
    what: &str,
    exact: bool,
) -> Option<io::Error> {
    let (_, p, _) = geometry(ks);
    let seg = ks.primary().segment_size() as usize;
    let window = 6 * seg;
    let small = read_in(ks, aad, ct, 7, window, Source::Read);
    assert!(pt.starts_with(&small.out), "{what}: not a prefix");
    let chunks = Source::Chunks(5 * seg / 2);
    let ways = [
        (ct.len() + 64, Source::Read),
        (4 * p + 3, Source::Read),
        (7, Source::Slice),
        (0, Source::Slice),
        (0, chunks),
        (ct.len() + 64, Source::Slice),
        (4 * p + 3, Source::Slice),
        (ct.len() + 64, chunks),
    ];
    for (piece, source) in ways {
        {
            let large = read_in(ks, aad, ct, piece, window, source);
            let how = format!("{what}, reads of {piece}, {source:?}");
            match (&small.err, &large.err) {
                (None, None) => assert!(large.out == pt, "{how}: other plaintext"),
                (Some(s), Some(l)) => {
                    assert!(pt.starts_with(&large.out), "{how}: not a prefix");
                    assert_eq!(s.kind(), l.kind(), "{how}");
                    if exact {
                        assert_eq!(s.to_string(), l.to_string(), "{how}");
                    }
                }
                (s, l) => panic!("{how}: window path {s:?}, direct path {l:?}"),
            }
        }
    }
    small.err
}

/// Segment sizes from the smallest (a 1-byte first segment) to 4 KiB.
fn keysets() -> Vec<Keyset> {
    vec![
        keyset(16, 41),
        keyset(16, 64),
        keyset(32, 100),
        keyset(16, 256),
        keyset(32, 4096),
    ]
}

#[test]
fn large_reads_of_up_to_fifty_segments_give_the_plaintext() {
    for ks in keysets() {
        let (p0, p, _) = geometry(&ks);
        for m in 0..=50usize {
            let full = if m == 0 { 0 } else { p0 + (m - 1) * p };
            for n in [full, full + 1] {
                let pt = data(n, (m * 3 + n) as u64);
                let ct = encrypt(&ks, b"aad", &pt);
                assert!(
                    agree(&ks, b"aad", &ct, &pt, &format!("{m} segments, {n} bytes")).is_none()
                );
            }
        }
    }
}

#[test]
fn truncated_flipped_extended_and_wrong_aad_streams_fail_alike() {
    for ks in keysets() {
        let (p0, p, header) = geometry(&ks);
        let seg = ks.primary().segment_size() as usize;
        let counts: &[usize] = if seg < 1024 {
            &[1, 2, 3, 9, 17, 50]
        } else {
            &[1, 2, 3, 9, 17]
        };
        for &m in counts {
            let pt = data(p0 + (m - 1) * p + p / 2, m as u64);
            let ct = encrypt(&ks, b"aad", &pt);
            let what = format!("{seg}-byte segments, {m}");
            // The plaintext offset that each ciphertext offset is part of.
            let plain_at = |c: usize| {
                if c < seg { 0 } else { p0 + (c - seg) / seg * p }
            };
            let wrong = agree(&ks, b"aad!", &ct, &pt, &format!("{what}: wrong aad"));
            assert!(wrong.unwrap().to_string().contains("segment 0 "));
            // Cut at every segment boundary, one byte either side, and inside segments.
            for s in 0..=m {
                let b = (s * seg).min(ct.len());
                for cut in [b, b + 1, b + 15, b + 16, b + seg / 2, b.saturating_sub(1)] {
                    if cut < header || cut >= ct.len() {
                        continue;
                    }
                    let e = agree(
                        &ks,
                        b"aad",
                        &ct[..cut],
                        &pt,
                        &format!("{what}: cut at {cut}"),
                    );
                    assert!(e.is_some(), "{what}: cut at {cut} accepted");
                }
            }
            // A flipped byte in each segment's body and tag.
            for s in 0..m {
                let end = ((s + 1) * seg).min(ct.len());
                for at in [(s * seg).max(header), end - 17, end - 1] {
                    let mut bad = ct.clone();
                    bad[at] ^= 0x20;
                    let how = format!("{what}: flip at {at}");
                    let e = agree(&ks, b"aad", &bad, &pt, &how).expect(&how);
                    assert!(
                        e.to_string().contains(&format!("segment {s} ")),
                        "{how}: {e}"
                    );
                    for source in [Source::Read, Source::Slice] {
                        let large = read_in(&ks, b"aad", &bad, bad.len(), 6 * seg, source);
                        assert!(
                            large.out.len() <= plain_at(at),
                            "{how}: plaintext past the flip"
                        );
                    }
                }
            }
            for extra in [1usize, 16, seg + 3] {
                let mut longer = ct.clone();
                longer.extend(std::iter::repeat_n(0u8, extra));
                let how = format!("{what}: {extra} extra");
                let e = agree_on(&ks, b"aad", &longer, &pt, &how, false);
                assert!(e.is_some());
            }
        }
    }
}

#[test]
fn a_failed_direct_read_is_wiped_whole() {
    let ks = keyset(16, 256);
    let (p0, p, _) = geometry(&ks);
    let pt = data(p0 + 40 * p, 1);
    let mut ct = encrypt(&ks, b"", &pt);
    // Segment 30: the segments before it authenticate, then it fails.
    ct[30 * 256 + 5] ^= 1;
    for window in [256, 4 * 256, 6 * 256] {
        let opts = Options::default().with_window_bytes(window);
        for source in [Source::Read, Source::Slice] {
            let mut buf = vec![0xAAu8; pt.len() + 100];
            let e = match source {
                Source::Slice => ks
                    .clone()
                    .with_options(opts)
                    .decrypting_buf_reader(&ct[..], b"")
                    .unwrap()
                    .read(&mut buf),
                _ => ks
                    .clone()
                    .with_options(opts)
                    .decrypting_reader(&ct[..], b"")
                    .unwrap()
                    .read(&mut buf),
            }
            .unwrap_err();
            assert!(e.to_string().contains("segment 30 "), "{e}");
            // Nothing of the segments opened before the failure is left.
            assert!(buf[..p0 + 30 * p].iter().all(|&b| b == 0), "{source:?}");
        }
    }
}

/// Fails with `ConnectionReset` once `left` bytes were read, `fails` times in a row, then
/// reads on.
struct FailsAfter<'a> {
    data: &'a [u8],
    left: usize,
    fails: usize,
}

impl Read for FailsAfter<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 && self.fails > 0 {
            self.fails -= 1;
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        let n = buf.len().min(self.data.len());
        let n = if self.left > 0 { n.min(self.left) } else { n };
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.left -= n.min(self.left);
        Ok(n)
    }
}

/// A source that fails in the middle of a direct read: the read returns the plaintext of
/// the segments opened before the failure, or the source's error (its buffer holding only
/// its own bytes and zeros then), and the reads after it (the source's error again while
/// it lasts) give the rest of the plaintext once the source reads on: nothing is lost.
#[test]
fn a_failed_source_pauses_a_direct_read_and_loses_nothing() {
    let ks = keyset(16, 64);
    let (p0, p, header) = geometry(&ks);
    let pt = data(p0 + 30 * p, 2);
    let ct = encrypt(&ks, b"", &pt);
    for cut in [header + 1, 64, 64 * 7 + 3, 64 * 20, ct.len() - 1] {
        for window in [64, 6 * 64] {
            let src = FailsAfter {
                data: &ct,
                left: cut,
                fails: 2,
            };
            let opts = Options::default().with_window_bytes(window);
            let mut r = ks
                .clone()
                .with_options(opts)
                .decrypting_reader(src, b"")
                .unwrap();
            let mut out = Vec::new();
            let mut errors = 0;
            loop {
                let mut buf = vec![0xAAu8; pt.len() + 100];
                match r.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(e) => {
                        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
                        assert!(buf.iter().all(|&b| b == 0 || b == 0xAA));
                        errors += 1;
                    }
                }
            }
            // A failure after segments were opened is not seen by the caller: the read returns
            // their plaintext, and the next read goes on.
            assert!((1..=2).contains(&errors), "cut at {cut}, window {window}");
            assert!(out == pt, "cut at {cut}, window {window}");
        }
    }
}

/// A buffered source that hands out its bytes in pieces of cycling sizes, failing every
/// third `fill_buf` with `Interrupted`.
struct Stutter<'a> {
    data: &'a [u8],
    pos: usize,
    calls: usize,
    sizes: &'a [usize],
}

impl Read for Stutter<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = {
            let src = self.fill_buf()?;
            let n = src.len().min(buf.len());
            buf[..n].copy_from_slice(&src[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Stutter<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.calls += 1;
        if self.calls.is_multiple_of(3) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = self.sizes[self.calls % self.sizes.len()];
        let end = (self.pos + n).min(self.data.len());
        Ok(&self.data[self.pos..end])
    }

    fn consume(&mut self, amt: usize) {
        self.pos += amt;
    }
}

#[test]
fn interrupted_and_uneven_fills_of_a_buffered_source_lose_nothing() {
    let ks = keyset(16, 256);
    let (p0, p, _) = geometry(&ks);
    let pt = data(p0 + 40 * p + 9, 5);
    let ct = encrypt(&ks, b"s", &pt);
    let sizes: &[usize] = &[1, 700, 5000, 3, 256 * 7 + 1, 100_000];
    let stutter = |calls| Stutter {
        data: &ct,
        pos: 0,
        calls,
        sizes,
    };
    for window in [256, 6 * 256, 1 << 20] {
        let opts = Options::default().with_window_bytes(window);
        // read_to_end retries `Interrupted`, with reads of growing sizes.
        let mut r = ks
            .clone()
            .with_options(opts)
            .decrypting_buf_reader(stutter(0), b"s")
            .unwrap();
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert!(out == pt, "window {window}: read_to_end");
        // fill_buf / consume, retried by hand.
        let mut r = ks
            .clone()
            .with_options(opts)
            .decrypting_buf_reader(stutter(1), b"s")
            .unwrap();
        let mut out = Vec::new();
        loop {
            match r.fill_buf() {
                Ok([]) => break,
                Ok(piece) => {
                    out.extend_from_slice(piece);
                    let n = piece.len();
                    r.consume(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => panic!("window {window}: {e}"),
            }
        }
        assert!(out == pt, "window {window}: fill_buf");
    }
}

#[test]
fn direct_reads_start_with_the_bytes_read_to_find_the_key() {
    // Keys of the same header length: the first segment is read with the header, to find
    // the key that opens it, and a direct read takes it from there.
    let a = StreamingKey::new(1, &[1u8; 16], 16, 64).unwrap();
    let b = StreamingKey::new(2, &[2u8; 16], 16, 96).unwrap();
    let writer = Keyset::from(b.clone());
    let ks = Keyset::new(1, vec![a, b]).unwrap();
    let (p0, p, _) = geometry(&writer);
    for m in [1usize, 2, 7, 30] {
        let pt = data(p0 + (m - 1) * p + 5, m as u64);
        let ct = encrypt(&writer, b"k", &pt);
        assert!(agree(&ks, b"k", &ct, &pt, &format!("{m} segments")).is_none());
        if m > 2 {
            let mut bad = ct.clone();
            bad[96 * (m - 1) + 3] ^= 4;
            let e = agree(&ks, b"k", &bad, &pt, &format!("{m} segments, flipped"));
            let e = e.expect("refused");
            assert!(
                e.to_string().contains(&format!("segment {} ", m - 1)),
                "{e}"
            );
        }
    }
}
