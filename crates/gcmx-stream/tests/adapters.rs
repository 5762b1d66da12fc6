//! The std::io adapters: round trips through every path (writer, reader and seekable reader
//! read each other's output; the CLI's tests check its pipeline against them), refusals of
//! damaged streams, random access, and what a read costs.

use std::io::{self, BufRead, BufReader, Cursor, Read, Seek, SeekFrom, Write};

mod common;

use gcmx_stream::{Backend, ErrorKind, KeySize, Keyset, Options, StreamingKey};

fn keyset(dks: usize, seg: u32) -> Keyset {
    Keyset::from(StreamingKey::new(1, &vec![7u8; dks], dks, seg).unwrap())
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

/// Plaintext bytes of the first segment and of the others.
fn seg_plain(ks: &Keyset) -> (usize, usize) {
    let k = ks.primary();
    let seg = k.segment_size() as usize;
    (seg - (1 + k.derived_key_size() + 7) - 16, seg - 16)
}

fn encrypt_in_pieces(ks: &Keyset, aad: &[u8], pt: &[u8], piece: usize, opts: &Options) -> Vec<u8> {
    let mut w = ks
        .clone()
        .with_options(*opts)
        .encrypting_writer(Vec::new(), aad)
        .unwrap();
    for c in pt.chunks(piece.max(1)) {
        w.write_all(c).unwrap();
    }
    w.finish().unwrap()
}

fn read_all(ks: &Keyset, aad: &[u8], ct: &[u8], opts: &Options) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    ks.clone()
        .with_options(*opts)
        .decrypting_reader(ct, aad)
        .map_err(io::Error::from)?
        .read_to_end(&mut out)?;
    Ok(out)
}

/// The reader over `ct` as a buffered source whose buffer holds `cap` bytes, read through
/// `fill_buf` and `consume`.
fn read_all_buffered(
    ks: &Keyset,
    aad: &[u8],
    ct: &[u8],
    cap: usize,
    opts: &Options,
) -> io::Result<Vec<u8>> {
    let mut r = ks
        .clone()
        .with_options(*opts)
        .decrypting_buf_reader(BufReader::with_capacity(cap, ct), aad)
        .map_err(io::Error::from)?;
    let mut out = Vec::new();
    loop {
        let p = r.fill_buf()?;
        if p.is_empty() {
            return Ok(out);
        }
        out.extend_from_slice(p);
        let n = p.len();
        r.consume(n);
    }
}

fn read_all_seekable(ks: &Keyset, aad: &[u8], ct: &[u8], opts: &Options) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    ks.clone()
        .with_options(*opts)
        .seekable_reader(Cursor::new(ct), aad)
        .map_err(io::Error::from)?
        .read_to_end(&mut out)?;
    Ok(out)
}

#[test]
fn every_path_reads_every_other_paths_output() {
    for (dks, seg) in [(16usize, 41u32), (16, 64), (32, 100), (32, 4096)] {
        let ks = keyset(dks, seg);
        let (p0, p) = seg_plain(&ks);
        for n in [
            0,
            1,
            p0 - 1,
            p0,
            p0 + 1,
            p0 + p,
            p0 + 2 * p,
            p0 + 2 * p + 1,
            9 * p + 5,
        ] {
            let pt = data(n, n as u64);
            for window in [1usize, 3 * seg as usize, 0] {
                let opts = Options::default()
                    .with_window_bytes(window)
                    .with_backend(Backend::Auto);
                for piece in [1usize, 7, p, n.max(1)] {
                    let ct = encrypt_in_pieces(&ks, b"aad", &pt, piece, &opts);
                    assert_eq!(
                        ct.len() as u64,
                        ks.primary().ciphertext_size(n as u64).unwrap(),
                        "seg {seg} n {n}"
                    );
                    assert_eq!(read_all(&ks, b"aad", &ct, &opts).unwrap(), pt);
                    let cap = [ct.len() + 1, 2 * seg as usize + 3, 100][piece % 3];
                    assert_eq!(read_all_buffered(&ks, b"aad", &ct, cap, &opts).unwrap(), pt);
                    if piece == 1 {
                        assert_eq!(read_all_seekable(&ks, b"aad", &ct, &opts).unwrap(), pt);
                    }
                }
            }
        }
    }
}

#[test]
fn backends_agree() {
    let ks = keyset(32, 4096);
    let pt = data(100_000, 3);
    for b in [Backend::Cpu, Backend::CpuParallel, Backend::Auto] {
        let opts = Options::default()
            .with_backend(b)
            .with_window_bytes(5 * 4096);
        let ct = encrypt_in_pieces(&ks, b"", &pt, 1000, &opts);
        for r in [Backend::Cpu, Backend::CpuParallel, Backend::Auto] {
            let ro = Options::default().with_backend(r);
            assert_eq!(read_all(&ks, b"", &ct, &ro).unwrap(), pt);
        }
    }
}

fn refused(r: io::Result<Vec<u8>>) -> io::Error {
    match r {
        Ok(v) => panic!("accepted a damaged stream ({} bytes)", v.len()),
        Err(e) => e,
    }
}

/// Reads with both readers and checks that each fails with InvalidData, after handing out
/// at most a prefix of the plaintext.
fn assert_refused(ks: &Keyset, aad: &[u8], ct: &[u8], pt: &[u8], what: &str) -> Vec<ErrorKind> {
    let opts = Options::default().with_window_bytes(3 * ks.primary().segment_size() as usize);
    let mut kinds = Vec::new();
    // The decrypting reader, read in small pieces, to see what comes out before the error.
    match ks.clone().with_options(opts).decrypting_reader(ct, aad) {
        Err(e) => {
            assert_eq!(
                io::Error::from(e.clone()).kind(),
                io::ErrorKind::InvalidData,
                "{what}"
            );
            kinds.push(e.kind());
        }
        Ok(mut r) => {
            let mut got = Vec::new();
            // Small reads go through the window, reads of whole segments straight to `buf`.
            let mut buf = vec![
                0u8;
                if what.len().is_multiple_of(2) {
                    50
                } else {
                    1000
                }
            ];
            let err = loop {
                match r.read(&mut buf) {
                    Ok(0) => panic!("{what}: the reader accepted it"),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => break e,
                }
            };
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{what}: {err}");
            assert!(
                pt.starts_with(&got),
                "{what}: output is not a prefix of the plaintext"
            );
            let inner = gcmx_stream::Error::from_io(&err).expect("carries the reason");
            kinds.push(inner.kind());
            // The failure is final.
            assert!(r.read(&mut buf).is_err(), "{what}: read after a failure");
        }
    }
    let err = refused(read_all_seekable(ks, aad, ct, &opts));
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{what}: {err}");
    // The reader over a buffered source holding the whole stream, through `fill_buf`.
    let err = refused(read_all_buffered(ks, aad, ct, ct.len() + 1, &opts));
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{what}: {err}");
    kinds
}

#[test]
fn damaged_streams_are_refused() {
    let ks = keyset(16, 64);
    let (p0, p) = seg_plain(&ks);
    let pt = data(p0 + 4 * p + 10, 9);
    let ct = encrypt_in_pieces(&ks, b"a", &pt, 33, &Options::default());
    let hl = 24;
    assert_refused(&ks, b"b", &ct, &pt, "wrong aad");
    let other = Keyset::from(StreamingKey::new(1, &[9u8; 16], 16, 64).unwrap());
    assert_refused(&other, b"a", &ct, &pt, "wrong key");
    // truncation at each segment boundary and inside segments
    for cut in [0, 1, hl, hl + 10, 64, 64 + 64, 64 + 64 + 20, ct.len() - 1] {
        assert_refused(&ks, b"a", &ct[..cut], &pt, &format!("cut at {cut}"));
    }
    // extension
    for extra in [1usize, 15, 16, 64, 200] {
        let mut longer = ct.clone();
        longer.extend(std::iter::repeat_n(0u8, extra));
        assert_refused(&ks, b"a", &longer, &pt, &format!("{extra} extra bytes"));
    }
    // reordering: swap segments 1 and 2
    let mut sw = ct.clone();
    let (a, b) = sw[64..192].split_at_mut(64);
    a.swap_with_slice(b);
    assert_refused(&ks, b"a", &sw, &pt, "segments swapped");
    // every single-bit change
    for i in 0..ct.len() {
        let mut t = ct.clone();
        t[i] ^= 0x80;
        assert_refused(&ks, b"a", &t, &pt, &format!("bit flipped at {i}"));
    }
}

#[test]
fn a_writer_dropped_without_finish_leaves_a_stream_that_does_not_decrypt() {
    let ks = keyset(32, 100);
    let pt = data(1000, 1);
    let mut out = Vec::new();
    {
        let mut w = ks.encrypting_writer(&mut out, b"").unwrap();
        w.write_all(&pt).unwrap();
        w.flush().unwrap();
    }
    assert!(!out.is_empty(), "full windows were written");
    let kinds = assert_refused(&ks, b"", &out, &pt, "unfinished");
    assert!(
        kinds
            .iter()
            .all(|k| matches!(k, ErrorKind::Authentication | ErrorKind::Format)),
        "{kinds:?}"
    );
}

#[test]
fn several_keys_the_reader_finds_the_one_that_wrote() {
    let a = StreamingKey::new(11, &[1u8; 16], 16, 64).unwrap();
    let b = StreamingKey::new(12, &[2u8; 16], 16, 200).unwrap();
    let c = StreamingKey::new(13, &[3u8; 32], 32, 100).unwrap();
    let pt = data(700, 5);
    let ct_a = encrypt_in_pieces(&Keyset::from(a.clone()), b"x", &pt, 50, &Options::default());
    let ks = Keyset::new(1, vec![a, b, c]).unwrap();
    let opts = Options::default();
    assert_eq!(read_all(&ks, b"x", &ct_a, &opts).unwrap(), pt);
    assert_eq!(read_all_seekable(&ks, b"x", &ct_a, &opts).unwrap(), pt);
    assert!(read_all(&ks, b"y", &ct_a, &opts).is_err());
}

#[test]
fn seekable_reads_equal_the_plaintext_at_random_ranges() {
    let ks = keyset(16, 256);
    let pt = data(50_000, 4);
    let ct = encrypt_in_pieces(&ks, b"", &pt, 4096, &Options::default());
    let mut r = ks
        .clone()
        .with_options(Options::default().with_window_bytes(1024))
        .seekable_reader(Cursor::new(&ct), b"")
        .unwrap();
    assert_eq!(r.plaintext_len(), pt.len() as u64);
    let mut s: u64 = 12345;
    let mut next = |m: u64| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % m
    };
    for _ in 0..1000 {
        let start = next(pt.len() as u64 + 100);
        let len = next(3000) as usize;
        let from_end = next(2) == 0;
        if from_end {
            let back = pt.len() as i64 - start as i64;
            assert_eq!(r.seek(SeekFrom::End(-back)).unwrap(), start);
        } else {
            assert_eq!(r.seek(SeekFrom::Start(start)).unwrap(), start);
        }
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            let n = r.read(&mut buf[got..]).unwrap();
            if n == 0 {
                break;
            }
            got += n;
        }
        let s0 = (start as usize).min(pt.len());
        let want = &pt[s0..(s0 + len).min(pt.len())];
        assert_eq!(&buf[..got], want, "at {start} len {len}");
        assert_eq!(r.stream_position().unwrap(), start + got as u64);
    }
    assert!(r.seek(SeekFrom::Current(-(1 << 40))).is_err());
    assert_eq!(
        r.seek(SeekFrom::Current(5)).unwrap(),
        r.stream_position().unwrap()
    );
}

#[test]
fn seekable_rejects_a_stream_whose_last_segment_is_cut() {
    let ks = keyset(16, 64);
    let pt = data(1000, 2);
    let ct = encrypt_in_pieces(&ks, b"", &pt, 1000, &Options::default());
    // Cut at a segment boundary: the plaintext before the cut still opens (those segments
    // are not the last), but the new last segment fails and the end is never reached.
    let cut = &ct[..64 * 5];
    let mut r = ks.seekable_reader(Cursor::new(cut), b"").unwrap();
    let mut buf = [0u8; 10];
    r.read_exact(&mut buf).unwrap();
    assert_eq!(buf, pt[..10]);
    r.seek(SeekFrom::End(0)).unwrap();
    assert_eq!(
        r.read(&mut buf).unwrap_err().kind(),
        io::ErrorKind::InvalidData
    );
    r.seek(SeekFrom::End(-1)).unwrap();
    assert!(r.read(&mut buf).is_err());
}

/// Counts what passes through a reader.
struct Counting<R> {
    inner: R,
    bytes: u64,
    reads_at: Vec<u64>,
}

impl<R: Read + Seek> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let at = self.inner.stream_position()?;
        self.reads_at.push(at);
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.inner.seek(to)
    }
}

#[test]
fn a_small_read_at_a_random_offset_fetches_at_most_two_segments() {
    // 1 GiB of plaintext in 1 MiB segments (64 MiB in debug builds, where AES is slow), held in
    // memory rather than in a temporary file, which a nearly full disk would refuse: what is
    // counted is the bytes asked of the source, not where they live.
    let size: u64 = if cfg!(debug_assertions) {
        64 << 20
    } else {
        1 << 30
    };
    let seg = 1u32 << 20;
    let ks = Keyset::generate(KeySize::Aes256, seg).unwrap();
    // Room for the header and every segment's tag, so the buffer never doubles.
    let room = size as usize + (size / u64::from(seg) + 1) as usize * 16 + 4096;
    let mut w = ks
        .encrypting_writer(io::Cursor::new(Vec::with_capacity(room)), b"big")
        .unwrap();
    let chunk = data(1 << 20, 8);
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        w.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    let mut ciphertext = w.finish().unwrap();
    ciphertext.set_position(0);
    let counting = Counting {
        inner: ciphertext,
        bytes: 0,
        reads_at: Vec::new(),
    };
    let mut r = ks.seekable_reader(counting, b"big").unwrap();
    assert_eq!(r.plaintext_len(), size);
    let header_cost = r.get_ref().bytes;
    let mut s: u64 = 99;
    let mut buf = vec![0u8; 4096];
    for _ in 0..200 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let at = s % (size - 4096);
        // The plaintext is `chunk` repeated from offset 0 (1 MiB pieces).
        r.seek(SeekFrom::Start(at)).unwrap();
        let before = r.get_ref().bytes;
        r.read_exact(&mut buf).unwrap();
        let cost = r.get_ref().bytes - before;
        for (k, b) in buf.iter().enumerate() {
            let off = (at as usize + k) % chunk.len();
            assert_eq!(*b, chunk[off], "byte {} of the read at {at}", k);
        }
        assert!(
            cost <= 2 * u64::from(seg),
            "a 4 KiB read at {at} fetched {cost} bytes of ciphertext"
        );
    }
    assert!(header_cost < u64::from(seg));
}

/// Hands out the ciphertext in pieces of 1 to 300 bytes, now and then after an `Interrupted`;
/// holds an `Rc`, so it is not `Send` (a decrypting reader reads on the caller's thread).
struct Trickle {
    data: std::rc::Rc<Vec<u8>>,
    pos: usize,
    s: u64,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.s ^= self.s << 13;
        self.s ^= self.s >> 7;
        self.s ^= self.s << 17;
        if self.s.is_multiple_of(11) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = buf
            .len()
            .min(1 + (self.s % 300) as usize)
            .min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[test]
fn large_reads_of_many_small_segments_from_a_trickling_reader_that_is_not_send() {
    for (dks, seg) in [
        (16usize, 41u32),
        (16, 64),
        (32, 200),
        (16, 1024),
        (32, 4096),
    ] {
        let ks = keyset(dks, seg);
        let (p0, p) = seg_plain(&ks);
        for m in [0usize, 1, 2, 5, 13, 50] {
            let full = if m == 0 { 0 } else { p0 + (m - 1) * p };
            for n in [full, full + 1] {
                let pt = data(n, (m + n) as u64);
                let ct = encrypt_in_pieces(&ks, b"t", &pt, n.max(1), &Options::default());
                for window in [2 * seg as usize, 0] {
                    let opts = Options::default().with_window_bytes(window);
                    for piece in [pt.len() + 1, 3 * p + 1] {
                        let src = Trickle {
                            data: std::rc::Rc::new(ct.clone()),
                            pos: 0,
                            s: n as u64 + 1,
                        };
                        let mut r = ks
                            .clone()
                            .with_options(opts)
                            .decrypting_reader(src, b"t")
                            .unwrap();
                        let mut out = Vec::new();
                        let mut buf = vec![0u8; piece];
                        loop {
                            match r.read(&mut buf) {
                                Ok(0) => break,
                                Ok(k) => out.extend_from_slice(&buf[..k]),
                                Err(e) => panic!("seg {seg}, {m} segments, {n} bytes: {e}"),
                            }
                        }
                        assert!(
                            out == pt,
                            "seg {seg}, {m} segments, {n} bytes, reads {piece}"
                        );
                    }
                }
            }
        }
    }
}

/// An inner writer that refuses every `every`-th write with an error (not `Interrupted`),
/// taking nothing, and takes at most `max` bytes of the others.
struct Refusing {
    out: Vec<u8>,
    calls: usize,
    every: usize,
    max: usize,
    /// Refuses only while this is set.
    on: std::rc::Rc<std::cell::Cell<bool>>,
    /// Writes refused.
    refused: std::rc::Rc<std::cell::Cell<usize>>,
}

impl Write for Refusing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.on.get() && self.calls.is_multiple_of(self.every) {
            self.refused.set(self.refused.get() + 1);
            return Err(io::Error::other("refused"));
        }
        let n = buf.len().min(self.max);
        self.out.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Large writes of whole segments (sealed from the caller's bytes straight into the window)
/// into an inner writer that fails now and then: a write that fails takes nothing or reports
/// the bytes it took, the caller writes the rest again (and tries `try_finish` again until it
/// succeeds), and the stream decrypts to exactly the bytes written.
#[test]
fn large_writes_into_a_failing_writer_lose_and_repeat_nothing() {
    let ks = keyset(16, 4096);
    let (first, rest) = seg_plain(&ks);
    let pt = data(first + 300 * rest + 77, 41);
    let mut finish_refused = 0;
    for (every, max, window) in [
        (2, usize::MAX, 0),
        (3, 10_000, 16 << 10),
        (5, 3000, 64 << 10),
    ] {
        let opts = Options::default()
            .with_backend(Backend::CpuParallel)
            .with_window_bytes(window);
        let on = std::rc::Rc::new(std::cell::Cell::new(true));
        let refused = std::rc::Rc::new(std::cell::Cell::new(0));
        let inner = Refusing {
            out: Vec::new(),
            calls: 0,
            every,
            max,
            on: on.clone(),
            refused: refused.clone(),
        };
        let mut w = ks
            .clone()
            .with_options(opts)
            .encrypting_writer(inner, b"aad")
            .unwrap();
        let mut done: usize = 0;
        for piece in [first + 40 * rest, 100 * rest + 5, usize::MAX] {
            let end = done.saturating_add(piece).min(pt.len());
            while done < end {
                match w.write(&pt[done..end]) {
                    Ok(n) => done += n,
                    // a refusal before any byte was taken
                    Err(e) => assert_eq!(e.to_string(), "refused"),
                }
            }
        }
        // `try_finish` is called again after each refusal, the last segment sealed once.
        while let Err(e) = w.try_finish() {
            assert_eq!(e.to_string(), "refused");
            finish_refused += 1;
        }
        assert!(w.write(b"more").is_err(), "a write after the stream's end");
        on.set(false);
        let inner = w.finish().unwrap();
        let back = read_all(&ks, b"aad", &inner.out, &Options::default()).unwrap();
        assert!(back == pt, "every {every}, max {max}, window {window}");
    }
    assert!(finish_refused > 0, "no try_finish was refused");
}

/// One write of many windows of whole segments (sealed through the writer's ring of segment
/// buffers), alone or after a partial segment, ending at, before and after a segment boundary:
/// every reader gets the plaintext back, and the stream has the length Tink's layout gives.
#[test]
fn one_write_of_many_windows_round_trips_at_every_boundary() {
    let ks = keyset(16, 64);
    let (first, rest) = seg_plain(&ks);
    let opts = Options::default()
        .with_backend(Backend::CpuParallel)
        .with_window_bytes(256);
    // 70,000 segments: more than one pass of the ring takes (once, it is slow unoptimized).
    for (k, deltas, heads) in [
        (
            40usize,
            &[-1isize, 0, 1][..],
            &[0usize, 1, first, first + 5][..],
        ),
        (41, &[-1, 0, 1], &[0, 1, first, first + 5]),
        (100, &[-1, 0, 1], &[0, 1, first, first + 5]),
        (70_000, &[1], &[first + 5]),
    ] {
        for &delta in deltas {
            let n = (first + k * rest).checked_add_signed(delta).unwrap();
            let pt = data(n, k as u64);
            for &head in heads {
                let mut w = ks
                    .clone()
                    .with_options(opts)
                    .encrypting_writer(Vec::new(), b"ring")
                    .unwrap();
                w.write_all(&pt[..head]).unwrap();
                w.write_all(&pt[head..]).unwrap();
                let ct = w.finish().unwrap();
                let segments = if n <= first {
                    1
                } else {
                    1 + (n - first).div_ceil(rest)
                };
                assert_eq!(ct.len(), 24 + n + 16 * segments, "n {n}, head {head}");
                assert!(
                    read_all(&ks, b"ring", &ct, &opts).unwrap() == pt,
                    "n {n}, head {head}"
                );
                assert!(read_all_seekable(&ks, b"ring", &ct, &opts).unwrap() == pt);
            }
        }
    }
}

/// A read into a buffer large enough that the reader writes its plaintext past the caches
/// (64 MiB or more, from a buffered source holding whole segments, on 16 threads or more) gives
/// the plaintext, and a changed byte anywhere makes it fail with `InvalidData`, leaving in the
/// buffer nothing but authenticated plaintext and zeros; so does `fill_buf`. Run on a pool of 16
/// threads (reads past the caches, window segments' opens split over the threads) and of 2
/// (neither).
#[test]
fn a_read_too_large_to_stay_cached_is_the_plaintext_or_fails() {
    let ks = keyset(16, 1 << 20);
    let pt = data((66 << 20) + 12_345, 21);
    let ct = encrypt_in_pieces(&ks, b"big", &pt, 8 << 20, &Options::default());
    for threads in [16, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut out = vec![0u8; pt.len()];
            let mut r = ks.decrypting_buf_reader(&ct[..], b"big").unwrap();
            r.read_exact(&mut out).unwrap();
            assert!(out == pt, "{threads} threads: the plaintext");
            assert_eq!(r.read(&mut [0u8; 1]).unwrap(), 0);
            // Through the window (`fill_buf`): each window's segments opened, split or not.
            let opts = Options::default();
            let got = read_all_buffered(&ks, b"big", &ct, 16 << 20, &opts).unwrap();
            assert!(got == pt, "{threads} threads: fill_buf");
            let mut bad = ct.clone();
            bad[ct.len() / 3] ^= 1;
            let e = read_all_buffered(&ks, b"big", &bad, 16 << 20, &opts).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            for at in [100, ct.len() / 2, ct.len() - 40] {
                let mut bad = ct.clone();
                bad[at] ^= 4;
                out.fill(0);
                let mut r = ks.decrypting_buf_reader(&bad[..], b"big").unwrap();
                let e = r.read_exact(&mut out).unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::InvalidData, "byte {at}");
                // Each byte the failed read left is the plaintext's at that place, or zero.
                let zero_or_plain = out.iter().zip(&pt).all(|(&o, &p)| o == p || o == 0);
                assert!(
                    zero_or_plain,
                    "{threads} threads, byte {at}: plaintext left"
                );
            }
        });
    }
}

/// A large read from a buffered source after the reader kept the first segment aside (to find,
/// among keys of one header length, the one that wrote the stream): the first group comes from
/// what was kept, the others straight from the source's buffer, a group in one copy. The
/// plaintext, or `InvalidData` with nothing but authenticated plaintext and zeros left.
#[test]
fn a_large_read_after_the_key_search_takes_whole_groups_from_the_buffer() {
    let a = StreamingKey::new(21, &[4u8; 16], 16, 4096).unwrap();
    let b = StreamingKey::new(22, &[5u8; 16], 16, 4096).unwrap();
    let pt = data(3_000_000 + 77, 8);
    let opts = Options::default();
    let ct = encrypt_in_pieces(&Keyset::from(b.clone()), b"k", &pt, 1 << 20, &opts);
    let ks = Keyset::new(0, vec![a, b]).unwrap();
    let mut out = vec![0u8; pt.len()];
    let mut r = ks.decrypting_buf_reader(&ct[..], b"k").unwrap();
    r.read_exact(&mut out).unwrap();
    assert!(out == pt, "the plaintext");
    assert_eq!(r.read(&mut [0u8; 1]).unwrap(), 0);
    for at in [5000, ct.len() / 2, ct.len() - 10] {
        let mut bad = ct.clone();
        bad[at] ^= 0x20;
        out.fill(0);
        let mut r = ks.decrypting_buf_reader(&bad[..], b"k").unwrap();
        let e = r.read_exact(&mut out).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "byte {at}");
        let zero_or_plain = out.iter().zip(&pt).all(|(&o, &p)| o == p || o == 0);
        assert!(zero_or_plain, "byte {at}: plaintext left");
    }
}

/// A full segment followed by an empty last segment is valid in the format (Tink and gcmx write
/// a full last segment instead): every reader accepts it, and without the empty last segment
/// (segment 0 not marked last) refuses it.
#[test]
fn a_full_segment_then_an_empty_last_segment_is_accepted() {
    let ks = keyset(16, 64);
    let (p0, _) = seg_plain(&ks);
    // header || segment 0 (full, not last) || segment 1 (empty, last), built by hand.
    let (salt, prefix) = ([3u8; 16], [5u8; 7]);
    let key = common::hkdf_sha256(&[7u8; 16], &salt, b"x", 16);
    let gcm = gcmx::Gcm::new(&key).unwrap();
    let nonce = |i: u32, last: bool| {
        let mut n = [0u8; 12];
        n[..7].copy_from_slice(&prefix);
        n[7..11].copy_from_slice(&i.to_be_bytes());
        n[11] = u8::from(last);
        n
    };
    let pt = data(p0, 9);
    let mut ct = vec![24u8];
    ct.extend_from_slice(&salt);
    ct.extend_from_slice(&prefix);
    let (mut seg, mut tag) = (pt.clone(), [0u8; 16]);
    gcm.encrypt_detached(&nonce(0, false), b"", &mut seg, &mut tag)
        .unwrap();
    ct.extend_from_slice(&seg);
    ct.extend_from_slice(&tag);
    gcm.encrypt_detached(&nonce(1, true), b"", &mut [], &mut tag)
        .unwrap();
    ct.extend_from_slice(&tag);
    let opts = Options::default();
    assert_eq!(read_all(&ks, b"x", &ct, &opts).unwrap(), pt);
    assert_eq!(
        read_all_buffered(&ks, b"x", &ct, ct.len() + 1, &opts).unwrap(),
        pt
    );
    assert_eq!(read_all_seekable(&ks, b"x", &ct, &opts).unwrap(), pt);
    let cut = &ct[..ct.len() - 16];
    let e = read_all(&ks, b"x", cut, &opts).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert!(read_all_seekable(&ks, b"x", cut, &opts).is_err());
}
