//! The std::io adapters beside their peer, `gcmx::Gcm` sealing and opening the same bytes as
//! independent segment-sized messages in one batch call, measured in one run.
//!
//! ```text
//! cargo bench -p gcmx-stream --bench adapters
//! cargo bench -p gcmx-stream --bench adapters -- --mib 1024 --segment 1MiB --rounds 11
//! cargo bench -p gcmx-stream --features cuda --bench adapters -- --backend cuda
//! ```
//!
//! Rows (plaintext bytes per second, median of `--rounds` rounds; in each round every row is
//! measured once, one after the other, so that the rows share the machine's state; each adapter
//! ends inside its timing: a writer's `finish`, a reader's drop, which wipes its window; the
//! streams of a round after the first reuse the windows that the ones before left):
//! - `Gcm::encrypt_batch`: the peer; the buffer cut into the stream's segment sizes, sealed in
//!   place with one call.
//! - `encrypting_writer <- io::copy`: the same plaintext, in memory, copied with `io::copy`
//!   through the adapter into `io::sink()` (for a slice, `io::copy` makes one `write`: whole
//!   segments are sealed from it by the tasks that seal them, on every core, with no copy,
//!   each into a slot of a ring of segment buffers that is written out in order).
//! - `encrypting_writer, 1 MiB writes`: the same in 1 MiB `write_all`s (each straddles a
//!   segment boundary, so the caller's thread copies them into the window, which is then sealed
//!   in parallel).
//! - `Gcm::decrypt_batch`: the peer of the readers, opening the segments in place.
//! - `decrypting_reader -> read_exact`: the stream, in memory, read with `read_exact` into a
//!   buffer of the plaintext's size (large reads: whole segments are read into the caller's
//!   buffer and opened there, a group at a time on rayon's threads while the caller's thread
//!   reads the next group).
//! - `decrypting_reader, 1 MiB reads`: the same in 1 MiB reads (served from the window).
//! - `decrypting_reader -> io::copy into io::sink()`: the same through `io::copy`, which reads
//!   into an 8 KiB buffer on its stack (served from the window).
//! - `memcpy, one thread`: the ciphertext copied once by one thread. A `Read` source hands its
//!   bytes over by copying them into the reader's buffer on the caller's thread (the peer opens
//!   them where they lie), so a reader cannot beat that copy. The `bound` row is the copy
//!   followed by the batch, measured in the same round: what a reader that copies, then opens
//!   reaches at best. Large reads overlap the copy with the opens of the groups before, so
//!   they can pass it, up to the slower of the two. Through `io::copy`, the plaintext is also
//!   copied out on the caller's thread, 8 KiB at a time: `the plaintext in 8 KiB copies` is
//!   that copy alone, and `bound of io::copy` both copies one after the other on one thread
//!   (with the opens on the other cores), what a `Read` adapter read by `io::copy` reaches at
//!   best.
//! - `memcpy of the ciphertext, all threads`: the ciphertext copied into another buffer by
//!   every thread, a segment per task. A reader that writes the plaintext into a buffer other
//!   than its ciphertext's moves more memory than the peer, which reads and writes back the same
//!   lines: each destination line is also fetched before it is written. Where the peer runs at
//!   the memory's speed, this copy bounds an open into another buffer with ordinary stores; on 16
//!   threads or more the reader writes reads of 64 MiB or more past the caches (non-temporal
//!   stores, no fetch), which moves the peer's traffic but from two buffers.
//! - `decrypting_buf_reader`: the same stream, a slice handed over as a `BufRead` source
//!   (its buffer holds the whole stream, so no byte of it is copied on the caller's thread:
//!   each segment is opened from it by the task that opens it, in one pass): `read_exact` of the whole
//!   plaintext (straight into the caller's buffer), through `fill_buf` and `consume` with each
//!   piece written into `io::sink()` (no copy on the caller's thread: what the issue's "into
//!   `io::sink()`" costs at best), and through `io::copy` (8 KiB copies out of the window).
//! - `seekable_reader`, 4 KiB at random offsets: reads per second, and ciphertext bytes
//!   fetched per read (at most two segments).
//!
//! `--backend` is `cpu-parallel` by default (the peer's and the adapters'); `cuda` needs the
//! `cuda` feature and a GPU.

use std::hint::black_box;
use std::io::{self, BufRead, Cursor, Read, Seek, SeekFrom, Write};
use std::time::Instant;

use gcmx::{Gcm, OpenJob, SealJob};
use gcmx_stream::{Backend, KeySize, Keyset, Options};

mod common;

struct Args {
    mib: usize,
    segment: usize,
    rounds: usize,
    backend: Backend,
    window: usize,
}

fn parse_size(s: &str) -> usize {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("mib").or(t.strip_suffix('m')) {
        (n, 1 << 20)
    } else if let Some(n) = t.strip_suffix("kib").or(t.strip_suffix('k')) {
        (n, 1 << 10)
    } else {
        (t.as_str(), 1)
    };
    num.parse::<usize>().expect("a size such as 1MiB") * mult
}

fn args() -> Args {
    let mut a = Args {
        mib: 256,
        segment: 1 << 20,
        rounds: 7,
        backend: Backend::CpuParallel,
        window: 0,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let val = v.get(i + 1).cloned().unwrap_or_default();
        match v[i].as_str() {
            "--mib" => a.mib = val.parse().expect("--mib N"),
            "--segment" => a.segment = parse_size(&val),
            "--rounds" => a.rounds = val.parse().expect("--rounds N"),
            "--window" => a.window = parse_size(&val),
            "--backend" => a.backend = val.parse().expect("--backend auto|cpu|cpu-parallel|cuda"),
            // `cargo bench` passes `--bench`; other flags are not ours.
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn gib_s(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64 / secs
}

/// The stream's plaintext segment lengths for `len` bytes.
fn segment_lengths(len: usize, segment: usize, header: usize) -> Vec<usize> {
    let first = segment - header - 16;
    let rest = segment - 16;
    let mut v = vec![first.min(len)];
    let mut left = len - v[0];
    while left > 0 {
        let n = rest.min(left);
        v.push(n);
        left -= n;
    }
    v
}

/// `work` cut into the segments' plaintexts.
fn split<'a>(work: &'a mut [u8], lens: &[usize]) -> Vec<&'a mut [u8]> {
    let mut out = Vec::with_capacity(lens.len());
    let mut rest = work;
    for &n in lens {
        let (h, t) = rest.split_at_mut(n);
        out.push(h);
        rest = t;
    }
    out
}

fn nonce(i: usize) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[7..11].copy_from_slice(&(i as u32).to_be_bytes());
    n
}

fn main() {
    let a = args();
    let bytes = a.mib << 20;
    let opts = Options::default()
        .with_backend(a.backend)
        .with_window_bytes(a.window);
    let keyset = Keyset::generate(KeySize::Aes256, a.segment as u32)
        .expect("keyset")
        .with_options(opts);
    let gcm = Gcm::with_backend(&[0x42; 32], a.backend).expect("backend");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "gcmx-stream adapters: {} MiB, AES-256, segments of {} KiB, window {}, backend {}, {threads} threads, median of {} rounds",
        a.mib,
        a.segment >> 10,
        if a.window == 0 {
            "default".to_string()
        } else {
            format!("{} KiB", a.window >> 10)
        },
        a.backend,
        a.rounds
    );

    let plain = common::plaintext(bytes);
    let lens = segment_lengths(bytes, a.segment, 1 + 32 + 7);
    let mut work = plain.clone();
    let mut tags = vec![[0u8; 16]; lens.len()];
    let nonces: Vec<[u8; 12]> = (0..lens.len()).map(nonce).collect();

    // The stream the readers read.
    let mut w = keyset
        .encrypting_writer(Vec::with_capacity(bytes + (bytes >> 10)), b"bench")
        .expect("writer");
    w.write_all(&plain).expect("write");
    let ct = w.finish().expect("finish");
    let mut check = Vec::with_capacity(bytes);
    keyset
        .decrypting_reader(&ct[..], b"bench")
        .expect("reader")
        .read_to_end(&mut check)
        .expect("read");
    assert!(check == plain, "the stream round trips");
    // And through the buffered reader's large reads (segments opened from the source's buffer,
    // or on the GPU copied from it a group at a time).
    check.resize(bytes, 0);
    keyset
        .decrypting_buf_reader(&ct[..], b"bench")
        .expect("reader")
        .read_exact(&mut check)
        .expect("read");
    assert!(
        check == plain,
        "the stream round trips through large buffered reads"
    );
    drop(check);

    let (mut seal, mut writer, mut open, mut reader) = (vec![], vec![], vec![], vec![]);
    let (mut writer_copy, mut reader_all, mut memcpy, mut bound) = (vec![], vec![], vec![], vec![]);
    let (mut reader_copy, mut pieces, mut both, mut par_memcpy) = (vec![], vec![], vec![], vec![]);
    let (mut buf_all, mut buf_fill, mut buf_copy) = (vec![], vec![], vec![]);
    let mut all = vec![0u8; bytes];
    let mut copy_dst = vec![0u8; ct.len()];
    let mut piece = vec![0u8; 1 << 20];
    for _ in 0..a.rounds {
        // Peer: seal the segments in place, one batch.
        work.copy_from_slice(&plain);
        let t = Instant::now();
        {
            let mut jobs: Vec<SealJob<'_>> = split(&mut work, &lens)
                .into_iter()
                .zip(tags.iter_mut())
                .zip(&nonces)
                .map(|((buf, tag), nonce)| SealJob {
                    nonce,
                    aad: &[],
                    buf,
                    tag,
                })
                .collect();
            gcm.encrypt_batch(&mut jobs).expect("seal");
        }
        seal.push(gib_s(bytes, t.elapsed().as_secs_f64()));

        // encrypting_writer into io::sink(), the in-memory source through io::copy.
        let t = Instant::now();
        let mut w = keyset
            .encrypting_writer(io::sink(), b"bench")
            .expect("writer");
        io::copy(&mut &plain[..], &mut w).expect("copy");
        black_box(w.finish().expect("finish"));
        writer_copy.push(gib_s(bytes, t.elapsed().as_secs_f64()));

        // encrypting_writer into io::sink(), 1 MiB writes.
        let t = Instant::now();
        let mut w = keyset
            .encrypting_writer(io::sink(), b"bench")
            .expect("writer");
        for c in plain.chunks(1 << 20) {
            w.write_all(c).expect("write");
        }
        black_box(w.finish().expect("finish"));
        writer.push(gib_s(bytes, t.elapsed().as_secs_f64()));

        // Peer: open the sealed segments in place, one batch.
        let t = Instant::now();
        {
            let mut jobs: Vec<OpenJob<'_>> = split(&mut work, &lens)
                .into_iter()
                .zip(tags.iter())
                .zip(&nonces)
                .map(|((buf, tag), nonce)| OpenJob {
                    nonce,
                    aad: &[],
                    buf,
                    tag,
                })
                .collect();
            gcm.decrypt_batch(&mut jobs).expect("open");
        }
        let open_secs = t.elapsed().as_secs_f64();
        open.push(gib_s(bytes, open_secs));

        // One thread copying the ciphertext: what a `Read` source costs at least.
        let t = Instant::now();
        copy_dst.copy_from_slice(black_box(&ct[..]));
        black_box(&copy_dst);
        let copy_secs = t.elapsed().as_secs_f64();
        memcpy.push(gib_s(ct.len(), copy_secs));
        bound.push(gib_s(bytes, copy_secs + open_secs));

        // Every thread copying the ciphertext into another buffer, a segment per task: the
        // memory traffic of an open from one buffer into another (each byte read, its
        // destination line fetched and written back), against the peer's read and write back
        // of the same lines.
        let t = Instant::now();
        {
            use rayon::prelude::*;
            copy_dst
                .par_chunks_mut(a.segment)
                .zip(black_box(&ct[..]).par_chunks(a.segment))
                .for_each(|(d, s)| d.copy_from_slice(s));
        }
        black_box(&copy_dst);
        par_memcpy.push(gib_s(ct.len(), t.elapsed().as_secs_f64()));

        // decrypting_reader over the in-memory stream, read_exact of the whole plaintext.
        let t = Instant::now();
        let mut r = keyset.decrypting_reader(&ct[..], b"bench").expect("reader");
        r.read_exact(&mut all).expect("read");
        assert_eq!(r.read(&mut piece[..1]).expect("end"), 0);
        black_box(&all);
        drop(r);
        reader_all.push(gib_s(bytes, t.elapsed().as_secs_f64()));

        // decrypting_reader over the in-memory stream into io::sink() through io::copy (which
        // reads into an 8 KiB buffer on its stack).
        let t = Instant::now();
        let mut r = keyset.decrypting_reader(&ct[..], b"bench").expect("reader");
        let n = io::copy(&mut r, &mut io::sink()).expect("copy");
        assert_eq!(n, bytes as u64);
        drop(r);
        reader_copy.push(gib_s(bytes, t.elapsed().as_secs_f64()));

        // decrypting_buf_reader over the in-memory stream (a slice: its buffer holds the
        // whole stream), read_exact of the whole plaintext.
        let t = Instant::now();
        let mut r = keyset
            .decrypting_buf_reader(&ct[..], b"bench")
            .expect("reader");
        r.read_exact(&mut all).expect("read");
        assert_eq!(r.read(&mut piece[..1]).expect("end"), 0);
        black_box(&all);
        drop(r);
        buf_all.push(gib_s(bytes, t.elapsed().as_secs_f64()));

        // The same into io::sink() through BufRead: each piece of plaintext written from the
        // reader's window, no copy on this thread.
        let t = Instant::now();
        let mut r = keyset
            .decrypting_buf_reader(&ct[..], b"bench")
            .expect("reader");
        let (mut sink, mut total) = (io::sink(), 0);
        loop {
            let p = r.fill_buf().expect("fill_buf");
            if p.is_empty() {
                break;
            }
            sink.write_all(p).expect("write");
            let n = p.len();
            total += n;
            r.consume(n);
        }
        assert_eq!(total, bytes);
        drop(r);
        buf_fill.push(gib_s(bytes, t.elapsed().as_secs_f64()));

        // The same through io::copy into io::sink() (8 KiB reads, each a copy out of the
        // window on this thread).
        let t = Instant::now();
        let mut r = keyset
            .decrypting_buf_reader(&ct[..], b"bench")
            .expect("reader");
        let n = io::copy(&mut r, &mut io::sink()).expect("copy");
        assert_eq!(n, bytes as u64);
        drop(r);
        buf_copy.push(gib_s(bytes, t.elapsed().as_secs_f64()));

        // One thread handing the plaintext out the way io::copy takes it: 8 KiB at a time.
        let t = Instant::now();
        let mut small = [0u8; 8 << 10];
        for c in plain.chunks(small.len()) {
            small[..c.len()].copy_from_slice(black_box(c));
            black_box(&small);
        }
        let pieces_secs = t.elapsed().as_secs_f64();
        pieces.push(gib_s(bytes, pieces_secs));
        both.push(gib_s(bytes, copy_secs + pieces_secs));

        // decrypting_reader over the in-memory stream, 1 MiB reads.
        let t = Instant::now();
        let mut r = keyset.decrypting_reader(&ct[..], b"bench").expect("reader");
        let mut total = 0;
        loop {
            let n = r.read(&mut piece).expect("read");
            if n == 0 {
                break;
            }
            total += n;
        }
        black_box(&piece);
        assert_eq!(total, bytes);
        drop(r);
        reader.push(gib_s(bytes, t.elapsed().as_secs_f64()));
    }
    assert!(work == plain, "the peer round trips");
    assert!(all == plain, "the reader round trips");

    let row = |name: &str, v: f64, peer: Option<f64>| match peer {
        Some(p) => println!(
            "  {name:<44}{v:>8.2} GiB/s  {:>5.1} % of the peer",
            100.0 * v / p
        ),
        None => println!("  {name:<44}{v:>8.2} GiB/s  (peer)"),
    };
    let (seal, writer, open, reader) = (median(seal), median(writer), median(open), median(reader));
    row("Gcm::encrypt_batch, segments in place", seal, None);
    row(
        "encrypting_writer <- io::copy from memory",
        median(writer_copy),
        Some(seal),
    );
    row("encrypting_writer, 1 MiB writes", writer, Some(seal));
    row("Gcm::decrypt_batch, segments in place", open, None);
    row(
        "decrypting_reader -> read_exact",
        median(reader_all),
        Some(open),
    );
    row("decrypting_reader, 1 MiB reads", reader, Some(open));
    row(
        "decrypting_reader -> io::copy into io::sink()",
        median(reader_copy),
        Some(open),
    );
    row(
        "bound: memcpy + Gcm::decrypt_batch",
        median(bound),
        Some(open),
    );
    println!(
        "  memcpy of the ciphertext, one thread          {:>8.2} GiB/s",
        median(memcpy)
    );
    println!(
        "  the plaintext in 8 KiB copies, one thread     {:>8.2} GiB/s",
        median(pieces)
    );
    row(
        "bound of io::copy: both copies on one thread",
        median(both),
        Some(open),
    );
    row(
        "memcpy of the ciphertext, all threads",
        median(par_memcpy),
        Some(open),
    );
    row(
        "decrypting_buf_reader -> read_exact",
        median(buf_all),
        Some(open),
    );
    row(
        "decrypting_buf_reader -> fill_buf -> io::sink()",
        median(buf_fill),
        Some(open),
    );
    row(
        "decrypting_buf_reader -> io::copy -> sink",
        median(buf_copy),
        Some(open),
    );

    // Random 4 KiB reads through the seekable reader, counting the ciphertext fetched.
    struct Counting<'a> {
        inner: Cursor<&'a [u8]>,
        fetched: u64,
    }
    impl Read for Counting<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.fetched += n as u64;
            Ok(n)
        }
    }
    impl Seek for Counting<'_> {
        fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
            self.inner.seek(to)
        }
    }
    let counting = Counting {
        inner: Cursor::new(&ct[..]),
        fetched: 0,
    };
    let mut r = keyset
        .seekable_reader(counting, b"bench")
        .expect("seekable");
    let start = r.get_ref().fetched;
    let reads = 2000;
    let mut buf = [0u8; 4096];
    let mut most = 0u64;
    // The offsets: xorshift64 from a fixed seed.
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    let t = Instant::now();
    for _ in 0..reads {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let at = s % (bytes as u64 - 4096);
        r.seek(SeekFrom::Start(at)).expect("seek");
        let before = r.get_ref().fetched;
        r.read_exact(&mut buf).expect("read");
        most = most.max(r.get_ref().fetched - before);
        assert!(buf[..] == plain[at as usize..at as usize + 4096]);
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "  seekable_reader, 4 KiB at random offsets: {:.0} reads/s, {:.2} segments fetched per read on average, {:.2} at most",
        reads as f64 / secs,
        (r.get_ref().fetched - start) as f64 / reads as f64 / a.segment as f64,
        most as f64 / a.segment as f64
    );
}
