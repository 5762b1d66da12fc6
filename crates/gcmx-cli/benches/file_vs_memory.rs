//! Encrypting a large file with the streaming pipeline vs the library's in-memory parallel
//! rate for the same segment size.
//!
//! ```text
//! cargo bench -p gcmx-cli --bench file_vs_memory
//! GCMX_BENCH_MIB=4096 GCMX_BENCH_SEGMENT=1MiB GCMX_BENCH_BACKEND=cpu-parallel \
//!   GCMX_BENCH_DIR=/tmp cargo bench -p gcmx-cli --bench file_vs_memory
//! ```
//!
//! Rows: the library alone (`Gcm::encrypt_batch` over an in-memory buffer cut into segments of
//! the key's size), the pipeline from a file in page cache to a sink that discards (read +
//! crypto, no write), `gcmx encrypt` / `gcmx decrypt` file to file (temporary file, rename),
//! `gcmx encrypt --fsync`, and a plain file copy (the machine's I/O ceiling). Rates are plaintext bytes per second, best of `GCMX_BENCH_REPS` runs (default 3).

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::time::Instant;

use gcmx::{Gcm, SealJob};
use gcmx_cli::bulk;
use gcmx_cli::files::{self, Direction, RunOptions, Sink, Source};
use gcmx_cli::{parse_backend, parse_size};
use gcmx_stream::{KeySize, Keyset, Options};

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn best(reps: usize, mut f: impl FnMut() -> f64) -> f64 {
    (0..reps).map(|_| f()).fold(f64::INFINITY, f64::min)
}

fn gib_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64 / secs
}

fn write_sample(path: &Path, bytes: u64) {
    let mut f = io::BufWriter::new(File::create(path).expect("create sample"));
    let mut chunk = vec![0u8; 1 << 20];
    let mut s: u64 = 0x243f_6a88_85a3_08d3;
    for w in chunk.chunks_exact_mut(8) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        w.copy_from_slice(&s.to_le_bytes());
    }
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        chunk[0] = chunk[0].wrapping_add(1);
        f.write_all(&chunk[..n]).expect("write sample");
        left -= n as u64;
    }
    f.flush().expect("flush sample");
}

fn main() {
    let mib: u64 = env_or("GCMX_BENCH_MIB", "1024")
        .parse()
        .expect("GCMX_BENCH_MIB");
    let segment =
        parse_size(&env_or("GCMX_BENCH_SEGMENT", "1MiB")).expect("GCMX_BENCH_SEGMENT") as u32;
    let backend =
        parse_backend(&env_or("GCMX_BENCH_BACKEND", "cpu-parallel")).expect("GCMX_BENCH_BACKEND");
    let reps: usize = env_or("GCMX_BENCH_REPS", "3")
        .parse()
        .expect("GCMX_BENCH_REPS");
    let dir = tempfile::Builder::new()
        .prefix("gcmx-bench-")
        .tempdir_in(env_or(
            "GCMX_BENCH_DIR",
            &std::env::temp_dir().display().to_string(),
        ))
        .expect("temp dir");
    let bytes = mib << 20;
    let keyset = Keyset::generate(KeySize::Aes256, segment).expect("keyset");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "gcmx-cli file vs memory: {mib} MiB, AES-256, segment {segment} B, backend {}, {threads} threads, best of {reps}",
        backend.name()
    );

    // 1. The library alone: one buffer of segments, one encrypt_batch call per pass.
    let mem_bytes = bytes.min(512 << 20) as usize;
    let pt_len = segment as usize - 16;
    let nseg = mem_bytes.div_ceil(pt_len);
    let mut buf = vec![0x5au8; nseg * segment as usize];
    let gcm = Gcm::with_backend(&[7u8; 32], backend).expect("backend");
    let nonces: Vec<[u8; 12]> = (0..nseg as u32)
        .map(|i| {
            let mut n = [0u8; 12];
            n[7..11].copy_from_slice(&i.to_be_bytes());
            n
        })
        .collect();
    let mem = best(reps, || {
        let mut jobs: Vec<SealJob<'_>> = buf
            .chunks_mut(segment as usize)
            .zip(&nonces)
            .map(|(c, n)| {
                let (b, t) = c.split_at_mut(pt_len);
                SealJob {
                    nonce: n.as_slice(),
                    aad: &[],
                    buf: b,
                    tag: t,
                }
            })
            .collect();
        let t = Instant::now();
        gcm.encrypt_batch(&mut jobs).expect("encrypt_batch");
        t.elapsed().as_secs_f64()
    });
    let mem_rate = gib_s((nseg * pt_len) as u64, mem);
    drop(buf);

    // 2. A sample file in page cache.
    let sample = dir.path().join("sample.bin");
    write_sample(&sample, bytes);
    let _ = io::copy(&mut File::open(&sample).expect("open"), &mut io::sink());

    // 3. Pipeline, file -> discard.
    let opts = Options::default().with_backend(backend);
    let to_sink = best(reps, || {
        let t = Instant::now();
        let input = File::open(&sample).expect("open");
        bulk::encrypt(&keyset, b"bench", input, io::sink(), &opts, &|_| {}).expect("encrypt");
        t.elapsed().as_secs_f64()
    });

    // 4. gcmx encrypt / decrypt, file -> file.
    let run = RunOptions {
        backend,
        force: true,
        quiet: true,
        window_bytes: 0,
        fsync: false,
        keyset_file: None,
    };
    let ct = dir.path().join("sample.tink");
    let out = dir.path().join("sample.out");
    let enc = best(reps, || {
        let _ = std::fs::remove_file(&ct); // a fresh output: no unlink of the last one timed
        let t = Instant::now();
        files::run(
            Direction::Encrypt,
            &keyset,
            b"bench",
            &Source::File(sample.clone()),
            &Sink::File(ct.clone()),
            &run,
        )
        .expect("encrypt");
        t.elapsed().as_secs_f64()
    });
    let dec = best(reps, || {
        let _ = std::fs::remove_file(&out);
        let t = Instant::now();
        files::run(
            Direction::Decrypt,
            &keyset,
            b"bench",
            &Source::File(ct.clone()),
            &Sink::File(out.clone()),
            &run,
        )
        .expect("decrypt");
        t.elapsed().as_secs_f64()
    });
    let run_sync = RunOptions { fsync: true, ..run };
    let enc_sync = best(reps, || {
        let _ = std::fs::remove_file(&ct); // a fresh output: no unlink of the last one timed
        let t = Instant::now();
        files::run(
            Direction::Encrypt,
            &keyset,
            b"bench",
            &Source::File(sample.clone()),
            &Sink::File(ct.clone()),
            &run_sync,
        )
        .expect("encrypt --fsync");
        t.elapsed().as_secs_f64()
    });
    // The machine's own ceiling: the same reads and writes through user space, no crypto
    // (io::copy would use copy_file_range, which never copies through user space).
    let copy = dir.path().join("copy.bin");
    let cp = best(reps, || {
        let _ = std::fs::remove_file(&copy);
        let t = Instant::now();
        let mut src = File::open(&sample).expect("open");
        let mut dst = File::create(&copy).expect("create copy");
        let mut buf = vec![0u8; 32 << 20];
        loop {
            let n = io::Read::read(&mut src, &mut buf).expect("read");
            if n == 0 {
                break;
            }
            dst.write_all(&buf[..n]).expect("write");
        }
        t.elapsed().as_secs_f64()
    });
    assert_eq!(
        std::fs::metadata(&out).expect("output").len(),
        bytes,
        "decrypted size"
    );

    let row = |name: &str, rate: f64| {
        println!(
            "{name:<44}{rate:>8.3} GiB/s {:>6.1} %",
            100.0 * rate / mem_rate
        );
    };
    println!("{:<44}{:>14} {:>8}", "", "rate", "vs mem");
    row("library encrypt_batch, in memory", mem_rate);
    row(
        "pipeline encrypt, file (page cache) -> sink",
        gib_s(bytes, to_sink),
    );
    row("gcmx encrypt, file -> file (rename)", gib_s(bytes, enc));
    row("gcmx decrypt, file -> file (rename)", gib_s(bytes, dec));
    row("gcmx encrypt --fsync, file -> file", gib_s(bytes, enc_sync));
    row(
        "(no crypto) read + write copy, 32 MiB buffer",
        gib_s(bytes, cp),
    );
}
