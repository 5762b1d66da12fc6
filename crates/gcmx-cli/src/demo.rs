//! `gcmx demo`: the whole job on a sample file, with every backend this build has, and what
//! each part of it costs.
//!
//! Makes a sample file and a fresh keyset in a temporary folder, then:
//! 1. checks: a file round trip with each backend, and that a tampered, a truncated, a
//!    wrong-key and a wrong-associated-data ciphertext are refused without output;
//! 2. the library's AES-GCM throughput in memory, per backend, beside a plain memory copy of
//!    the same bytes (the ceiling of any pass over memory);
//! 3. file-to-file throughput of `gcmx encrypt` / `gcmx decrypt`, beside a plain copy of the
//!    same file (read and write, no crypto) measured in the same run.
//!
//! Every figure is the median of a few runs and carries a label for what bounds it: the CPU,
//! memory, or the disk (the file system's writes). File-to-file runs are bounded by the disk
//! on most machines, so they are not the speed of the crypto: the in-memory table is.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

use gcmx::{Gcm, GcmError, OpenJob, SealJob};
use gcmx_stream::{DEFAULT_SEGMENT_SIZE, KeySize, Keyset};

use crate::api::{Backend, backends_built, is_gpu};
use crate::error::{Error, ErrorKind, Result};
use crate::files::{self, Direction, RunOptions, Sink, Source};

/// Repetitions of each in-memory measurement (the median is shown).
const MEMORY_REPS: usize = 5;
/// Repetitions of each file-to-file measurement (the median is shown).
const FILE_REPS: usize = 3;

fn xorshift_fill(buf: &mut [u8], state: &mut u64) {
    for word in buf.chunks_mut(8) {
        // xorshift64*: cheap, varied bytes
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        let v = state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        word.copy_from_slice(&v[..word.len()]);
    }
}

fn write_sample(path: &Path, bytes: u64) -> Result<()> {
    let mut f = File::create(path).map_err(|e| Error::io("cannot create the sample", e))?;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        xorshift_fill(&mut chunk, &mut state);
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])
            .map_err(|e| Error::io("cannot write the sample", e))?;
        left -= n as u64;
    }
    Ok(())
}

fn read_some(f: &mut File, buf: &mut [u8]) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("cannot read", e)),
        }
    }
    Ok(n)
}

fn same_content(a: &Path, b: &Path) -> Result<bool> {
    let open =
        |p: &Path| File::open(p).map_err(|e| Error::io(format!("cannot open {}", p.display()), e));
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let na = read_some(&mut fa, &mut ba)?;
        let nb = read_some(&mut fb, &mut bb)?;
        if na != nb || ba[..na] != bb[..nb] {
            return Ok(false);
        }
        if na == 0 {
            return Ok(true);
        }
    }
}

/// The plain copy the file-to-file figures are compared with: read and write in 1 MiB
/// pieces, no crypto, to a new file in the same folder (what `cp` does, without the
/// in-kernel shortcuts that a copy between files could take).
fn plain_copy(from: &Path, to: &Path) -> Result<()> {
    let mut src = File::open(from).map_err(|e| Error::io("cannot open the sample", e))?;
    let mut dst = File::create(to).map_err(|e| Error::io("cannot create the copy", e))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = read_some(&mut src, &mut buf)?;
        if n == 0 {
            return Ok(());
        }
        dst.write_all(&buf[..n])
            .map_err(|e| Error::io("cannot write the copy", e))?;
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Bytes per second of `f` over `bytes`, median of `reps` runs.
fn rate(bytes: u64, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        v.push(bytes as f64 / t.elapsed().as_secs_f64().max(1e-9));
    }
    Ok(median(v))
}

fn gib(rate: f64) -> String {
    format!("{:6.2} GiB/s", rate / (1u64 << 30) as f64)
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What bounds an in-memory rate: memory when it is near the plain memory copy, else the
/// engine (CPU threads, or the GPU with its link to host memory). A batch runs its messages
/// in parallel on every CPU thread whatever the backend; one message runs on one thread with
/// `cpu`, on all with `cpu-parallel`, and on what the library picks for its size with `auto`.
fn memory_bound(backend: Backend, batch: bool, rate: f64, memcpy: f64) -> String {
    if rate >= 0.7 * memcpy {
        "memory (near the copy)".to_string()
    } else if is_gpu(backend) {
        "GPU and its host link".to_string()
    } else if batch || backend == Backend::CpuParallel {
        format!("CPU ({} threads)", threads())
    } else if backend == Backend::Cpu {
        "CPU (1 thread)".to_string()
    } else {
        format!("CPU (1 to {} threads, by size)", threads())
    }
}

/// What bounds a file-to-file rate: the disk when the plain copy is no faster, the CPU when
/// the crypto alone (in memory) is not much faster than the file run, else both.
fn file_bound(rate: f64, copy: f64, in_memory: f64) -> &'static str {
    if rate >= 0.8 * copy {
        "disk (the plain copy is no faster)"
    } else if rate >= 0.8 * in_memory {
        "CPU (the crypto alone is no faster)"
    } else {
        "CPU and disk (crypto and I/O share the cores)"
    }
}

/// A failure of the library in the demo's in-memory round trips.
fn failed(e: GcmError) -> Error {
    Error::with_source(
        ErrorKind::Check,
        Some("the in-memory round trip failed".into()),
        e,
    )
}

/// Seals and opens `data` as one message; returns the encrypt and decrypt rates (median of
/// [`MEMORY_REPS`]).
fn in_memory_one(engine: &Gcm, data: &mut [u8]) -> Result<(f64, f64)> {
    let nonce = [7u8; 12];
    let mut tag = [0u8; 16];
    let bytes = data.len() as f64;
    let (mut enc, mut dec) = (Vec::new(), Vec::new());
    for _ in 0..MEMORY_REPS {
        let t = Instant::now();
        engine
            .encrypt_detached(&nonce, &[], data, &mut tag)
            .map_err(failed)?;
        enc.push(bytes / t.elapsed().as_secs_f64().max(1e-9));
        let t = Instant::now();
        engine
            .decrypt_detached(&nonce, &[], data, &tag)
            .map_err(failed)?;
        dec.push(bytes / t.elapsed().as_secs_f64().max(1e-9));
    }
    Ok((median(enc), median(dec)))
}

/// Seals and opens `data` cut into segment-sized messages with one batch call each way;
/// returns the encrypt and decrypt rates (median of [`MEMORY_REPS`]).
fn in_memory_batch(engine: &Gcm, data: &mut [u8], seg: usize) -> Result<(f64, f64)> {
    let n = data.len().div_ceil(seg);
    let mut tags = vec![[0u8; 16]; n];
    let nonces: Vec<[u8; 12]> = (0..n as u32)
        .map(|i| {
            let mut nonce = [0u8; 12];
            nonce[..4].copy_from_slice(&i.to_be_bytes());
            nonce
        })
        .collect();
    let bytes = data.len() as u64;
    let seal = |data: &mut [u8], tags: &mut [[u8; 16]]| {
        let mut jobs: Vec<SealJob<'_>> = data
            .chunks_mut(seg)
            .zip(tags.iter_mut())
            .zip(&nonces)
            .map(|((buf, tag), nonce)| SealJob {
                nonce,
                aad: &[],
                buf,
                tag,
            })
            .collect();
        engine.encrypt_batch(&mut jobs).map_err(failed)
    };
    let open = |data: &mut [u8], tags: &[[u8; 16]]| {
        let mut jobs: Vec<OpenJob<'_>> = data
            .chunks_mut(seg)
            .zip(tags)
            .zip(&nonces)
            .map(|((buf, tag), nonce)| OpenJob {
                nonce,
                aad: &[],
                buf,
                tag,
            })
            .collect();
        engine.decrypt_batch(&mut jobs).map_err(failed)
    };
    // Each encryption is followed by a decryption, so the buffer is plaintext again before
    // the next encryption; the two are timed separately.
    let (mut enc, mut dec) = (Vec::new(), Vec::new());
    for _ in 0..MEMORY_REPS {
        let t = Instant::now();
        seal(data, &mut tags)?;
        enc.push(bytes as f64 / t.elapsed().as_secs_f64().max(1e-9));
        let t = Instant::now();
        open(data, &tags)?;
        dec.push(bytes as f64 / t.elapsed().as_secs_f64().max(1e-9));
    }
    Ok((median(enc), median(dec)))
}

/// Expects decrypting `ct` to be refused without leaving `out` behind; returns the reason.
fn expect_refusal(keyset: &Keyset, aad: &[u8], ct: &Path, out: &Path) -> Result<String> {
    let opts = RunOptions {
        quiet: true,
        ..RunOptions::default()
    };
    let r = files::run(
        Direction::Decrypt,
        keyset,
        aad,
        &Source::File(ct.to_path_buf()),
        &Sink::File(out.to_path_buf()),
        &opts,
    );
    match r {
        Ok(_) => Err(Error::new(
            ErrorKind::Check,
            format!("{} was accepted but must be refused", ct.display()),
        )),
        Err(e) if out.exists() => Err(Error::new(
            ErrorKind::Check,
            format!("refused ({e}) but left {} behind", out.display()),
        )),
        Err(e) => Ok(e.to_string()),
    }
}

fn file_run(
    dir: Direction,
    keyset: &Keyset,
    aad: &[u8],
    from: &Path,
    to: &Path,
    backend: Backend,
) -> Result<()> {
    let opts = RunOptions {
        backend,
        force: true,
        quiet: true,
        window_bytes: 0,
        fsync: false,
        keyset_file: None,
    };
    files::run(
        dir,
        keyset,
        aad,
        &Source::File(from.to_path_buf()),
        &Sink::File(to.to_path_buf()),
        &opts,
    )
    .map(|_| ())
}

/// Runs the demo on a sample of `mib` MiB, printing to `out`. Fails if any check fails.
pub fn run(out: &mut dyn Write, mib: u64) -> Result<()> {
    let p = |out: &mut dyn Write, s: String| {
        writeln!(out, "{s}").map_err(|e| Error::io("cannot write to standard output", e))
    };
    if mib == 0 {
        return Err(Error::usage("--mib must be at least 1"));
    }
    let bytes = mib
        .checked_mul(1 << 20)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| Error::usage("--mib is too large"))?;
    let tmp = tempfile::Builder::new()
        .prefix("gcmx-demo-")
        .tempdir()
        .map_err(|e| Error::io("cannot create a temporary folder", e))?;
    let dir = tmp.path();
    let _cleanup = crate::signals::register(dir);
    let sample = dir.join("sample.bin");
    write_sample(&sample, bytes as u64)?;
    let keyset = Keyset::generate(KeySize::Aes256, DEFAULT_SEGMENT_SIZE)?;
    let keyset_path = dir.join("keyset.json");
    crate::keyfile::write_new(&keyset, &keyset_path)?;
    let (keyset, _) = crate::keyfile::read(&keyset_path)?;
    let seg = DEFAULT_SEGMENT_SIZE as usize;
    p(
        out,
        format!(
            "gcmx demo: {mib} MiB sample, AES-256, {} KiB segments, {} CPU threads, in {}",
            seg >> 10,
            threads(),
            dir.display()
        ),
    )?;

    // 1. Checks.
    let aad = b"gcmx demo";
    let mut backends: Vec<Backend> = vec![Backend::Auto];
    backends.extend(backends_built());
    let mut usable = Vec::new();
    let ct = dir.join("sample.tink");
    let pt = dir.join("sample.out");
    for &backend in &backends {
        let name = backend.name();
        if let Err(e) = Gcm::with_backend(&[0u8; 32], backend) {
            p(out, format!("{name}: not available: {e}"))?;
            continue;
        }
        file_run(Direction::Encrypt, &keyset, aad, &sample, &ct, backend)?;
        file_run(Direction::Decrypt, &keyset, aad, &ct, &pt, backend)?;
        if !same_content(&sample, &pt)? {
            return Err(Error::new(
                ErrorKind::Check,
                format!("{name}: the decrypted file differs from the sample"),
            ));
        }
        usable.push(backend);
    }
    let names: Vec<&str> = usable.iter().map(|b| b.name()).collect();
    p(
        out,
        format!(
            "round trip file -> file -> file: ok with {}",
            names.join(", ")
        ),
    )?;
    let mut data = fs::read(&ct).map_err(|e| Error::io("cannot read the ciphertext", e))?;
    let refused_out = dir.join("refused.out");
    let mid = data.len() / 2;
    data[mid] ^= 0x20;
    let tampered = dir.join("tampered.tink");
    fs::write(&tampered, &data).map_err(|e| Error::io("cannot write", e))?;
    let why = expect_refusal(&keyset, aad, &tampered, &refused_out)?;
    p(out, format!("tampered ciphertext refused: {why}"))?;
    data[mid] ^= 0x20;
    let cut = data.len().saturating_sub(seg).max(1);
    let truncated = dir.join("truncated.tink");
    fs::write(&truncated, &data[..cut]).map_err(|e| Error::io("cannot write", e))?;
    let why = expect_refusal(&keyset, aad, &truncated, &refused_out)?;
    p(out, format!("truncated ciphertext refused: {why}"))?;
    let other = Keyset::generate(KeySize::Aes256, DEFAULT_SEGMENT_SIZE)?;
    let why = expect_refusal(&other, aad, &ct, &refused_out)?;
    p(out, format!("wrong key refused: {why}"))?;
    let why = expect_refusal(&keyset, b"other aad", &ct, &refused_out)?;
    p(out, format!("wrong associated data refused: {why}"))?;
    for f in [&tampered, &truncated, &pt] {
        fs::remove_file(f).map_err(|e| Error::io("cannot clean up", e))?;
    }
    drop(data);

    // 2. The library in memory, beside a plain memory copy.
    p(
        out,
        format!("AES-GCM in memory (the library alone, median of {MEMORY_REPS}):"),
    )?;
    p(
        out,
        format!(
            "  {:<36}{:>14}{:>14}  bound by",
            "backend, call", "encrypt", "decrypt"
        ),
    )?;
    let mut buf = vec![0u8; bytes];
    xorshift_fill(&mut buf, &mut 0x1234_5678_9abc_def1);
    let mut copy_to = vec![0u8; bytes];
    let memcpy = rate(bytes as u64, MEMORY_REPS, || {
        copy_to.copy_from_slice(&buf);
        std::hint::black_box(&copy_to);
        Ok(())
    })?;
    drop(copy_to);
    p(
        out,
        format!(
            "  {:<36}{:>14}{:>14}  memory (the ceiling of one pass)",
            "plain memory copy",
            gib(memcpy),
            ""
        ),
    )?;
    let key = [0x42u8; 32];
    let mut auto_batch = f64::INFINITY;
    for batch in [false, true] {
        for &backend in &usable {
            let engine = Gcm::with_backend(&key, backend).map_err(failed)?;
            let (enc, dec, call) = if batch {
                let (e, d) = in_memory_batch(&engine, &mut buf, seg)?;
                let call = format!("batch of {} x {} KiB", bytes.div_ceil(seg), seg >> 10);
                (e, d, call)
            } else {
                let (e, d) = in_memory_one(&engine, &mut buf)?;
                (e, d, format!("one {mib} MiB message"))
            };
            if batch && backend == Backend::Auto {
                auto_batch = enc.min(dec);
            }
            p(
                out,
                format!(
                    "  {:<36}{:>14}{:>14}  {}",
                    format!("{}, {call}", backend.name()),
                    gib(enc),
                    gib(dec),
                    memory_bound(backend, batch, enc.min(dec), memcpy)
                ),
            )?;
        }
    }
    drop(buf);

    // 3. File to file, beside a plain copy of the same file.
    p(
        out,
        format!(
            "File to file ({mib} MiB sample in the page cache, a new output each run, median of {FILE_REPS}):"
        ),
    )?;
    p(
        out,
        format!("  {:<36}{:>14}{:>9}  bound by", "run", "rate", "vs copy"),
    )?;
    let copy_path = dir.join("copy.bin");
    let copy = rate(bytes as u64, FILE_REPS, || {
        let _ = fs::remove_file(&copy_path);
        plain_copy(&sample, &copy_path)
    })?;
    let _ = fs::remove_file(&copy_path);
    p(
        out,
        format!(
            "  {:<36}{:>14}{:>8.0}%  disk (read + write, no crypto)",
            "plain copy",
            gib(copy),
            100.0
        ),
    )?;
    // gcmx runs the library's batch calls: compare with the auto batch rate.
    let auto_mem = auto_batch;
    let enc = rate(bytes as u64, FILE_REPS, || {
        file_run(
            Direction::Encrypt,
            &keyset,
            aad,
            &sample,
            &ct,
            Backend::Auto,
        )
    })?;
    let dec = rate(bytes as u64, FILE_REPS, || {
        file_run(Direction::Decrypt, &keyset, aad, &ct, &pt, Backend::Auto)
    })?;
    for (what, r) in [("gcmx encrypt (auto)", enc), ("gcmx decrypt (auto)", dec)] {
        p(
            out,
            format!(
                "  {:<36}{:>14}{:>8.0}%  {}",
                what,
                gib(r),
                100.0 * r / copy,
                file_bound(r, copy, auto_mem)
            ),
        )?;
    }
    p(out, "all checks passed".to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert!(memory_bound(Backend::Cpu, false, 9.0, 10.0).starts_with("memory"));
        assert_eq!(
            memory_bound(Backend::Cpu, false, 5.0, 10.0),
            "CPU (1 thread)"
        );
        assert!(memory_bound(Backend::Cpu, true, 5.0, 10.0).ends_with("threads)"));
        assert!(file_bound(0.9, 1.0, 10.0).starts_with("disk"));
        assert!(file_bound(0.5, 1.0, 0.55).starts_with("CPU (the crypto"));
        assert!(file_bound(0.5, 1.0, 10.0).starts_with("CPU and disk"));
    }
}
