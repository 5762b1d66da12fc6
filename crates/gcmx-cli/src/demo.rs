//! `gcmx demo`: the whole job on a sample file, with every backend this build has.
//!
//! Makes a sample file and a fresh keyset in a temporary folder, encrypts and decrypts the
//! sample with each backend, checks the round trip, checks that a tampered and a truncated
//! ciphertext are refused without output, and prints each backend's throughput.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

use crate::api::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::files::{self, Direction, RunOptions, Sink, Source};
use crate::keyset::{DEFAULT_SEGMENT_SIZE, Keyset, StreamingKey};
use crate::{backend_name, backends_built};

fn write_sample(path: &Path, bytes: u64) -> Result<()> {
    let mut f = File::create(path).map_err(|e| Error::io("cannot create the sample", e))?;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        for word in chunk.chunks_exact_mut(8) {
            // xorshift64*: cheap, varied bytes
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            word.copy_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
        }
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])
            .map_err(|e| Error::io("cannot write the sample", e))?;
        left -= n as u64;
    }
    f.sync_all()
        .map_err(|e| Error::io("cannot write the sample", e))
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

fn rate(bytes: u64, secs: f64) -> String {
    format!(
        "{:8.1} MiB/s",
        bytes as f64 / (1u64 << 20) as f64 / secs.max(1e-9)
    )
}

/// Expects decrypting `ct` to be refused without leaving `out` behind; returns the reason.
fn expect_refusal(keyset: &Keyset, ct: &Path, out: &Path) -> Result<String> {
    let opts = RunOptions {
        quiet: true,
        ..RunOptions::default()
    };
    let r = files::run(
        Direction::Decrypt,
        keyset,
        b"gcmx demo",
        &Source::File(ct.to_path_buf()),
        &Sink::File(out.to_path_buf()),
        &opts,
    );
    match r {
        Ok(_) => Err(Error::new(
            ErrorKind::Authentication,
            format!("{} was accepted but must be refused", ct.display()),
        )),
        Err(e) if out.exists() => Err(Error::new(
            ErrorKind::Io,
            format!("refused ({e}) but left {} behind", out.display()),
        )),
        Err(e) => Ok(e.to_string()),
    }
}

/// Runs the demo on a sample of `mib` MiB, printing to `out`. Fails if any check fails.
pub fn run(out: &mut dyn Write, mib: u64) -> Result<()> {
    let p = |out: &mut dyn Write, s: String| {
        writeln!(out, "{s}").map_err(|e| Error::io("cannot write to standard output", e))
    };
    let tmp = tempfile::Builder::new()
        .prefix("gcmx-demo-")
        .tempdir()
        .map_err(|e| Error::io("cannot create a temporary folder", e))?;
    let dir = tmp.path();
    let sample = dir.join("sample.bin");
    let bytes = mib << 20;
    write_sample(&sample, bytes)?;
    let key = StreamingKey::generate(false, DEFAULT_SEGMENT_SIZE)?;
    let keyset = Keyset::single(key);
    let keyset_path = dir.join("keyset.json");
    keyset.write_new(&keyset_path)?;
    let keyset = Keyset::read(&keyset_path)?;
    p(
        out,
        format!(
            "gcmx demo: {mib} MiB sample, AES-256 key, {} KiB segments, in {}",
            DEFAULT_SEGMENT_SIZE >> 10,
            dir.display()
        ),
    )?;
    p(
        out,
        format!("{:<14}{:>16}{:>16}  check", "backend", "encrypt", "decrypt"),
    )?;

    let aad = b"gcmx demo";
    let mut last_ct = None;
    for backend in backends_built() {
        let name = backend_name(backend);
        if let Err(e) = Engine::new(&[0u8; 32], backend) {
            p(out, format!("{name:<14}not available: {e}"))?;
            continue;
        }
        let opts = RunOptions {
            backend,
            force: true,
            quiet: true,
            window_bytes: 0,
            fsync: false,
        };
        let ct = dir.join(format!("sample.{name}.tink"));
        let pt = dir.join(format!("sample.{name}.out"));
        let t = Instant::now();
        files::run(
            Direction::Encrypt,
            &keyset,
            aad,
            &Source::File(sample.clone()),
            &Sink::File(ct.clone()),
            &opts,
        )?;
        let enc = t.elapsed().as_secs_f64();
        let t = Instant::now();
        files::run(
            Direction::Decrypt,
            &keyset,
            aad,
            &Source::File(ct.clone()),
            &Sink::File(pt.clone()),
            &opts,
        )?;
        let dec = t.elapsed().as_secs_f64();
        let ok = same_content(&sample, &pt)?;
        p(
            out,
            format!(
                "{name:<14}{:>16}{:>16}  {}",
                rate(bytes, enc),
                rate(bytes, dec),
                if ok { "ok" } else { "MISMATCH" }
            ),
        )?;
        if !ok {
            return Err(Error::new(
                ErrorKind::Crypto,
                format!("{name}: decrypted file differs from the sample"),
            ));
        }
        fs::remove_file(&pt).map_err(|e| Error::io("cannot clean up", e))?;
        if let Some(old) = last_ct.replace(ct) {
            fs::remove_file(old).map_err(|e| Error::io("cannot clean up", e))?;
        }
    }

    let Some(ct) = last_ct else {
        return Err(Error::new(ErrorKind::Crypto, "no backend available"));
    };
    let mut data = fs::read(&ct).map_err(|e| Error::io("cannot read the ciphertext", e))?;
    let refused_out = dir.join("refused.out");

    let mid = data.len() / 2;
    data[mid] ^= 0x20;
    let tampered = dir.join("tampered.tink");
    fs::write(&tampered, &data).map_err(|e| Error::io("cannot write", e))?;
    let why = expect_refusal(&keyset, &tampered, &refused_out)?;
    p(out, format!("tampered ciphertext refused: {why}"))?;
    data[mid] ^= 0x20;

    let cut = data
        .len()
        .saturating_sub(DEFAULT_SEGMENT_SIZE as usize)
        .max(1);
    let truncated = dir.join("truncated.tink");
    fs::write(&truncated, &data[..cut]).map_err(|e| Error::io("cannot write", e))?;
    let why = expect_refusal(&keyset, &truncated, &refused_out)?;
    p(out, format!("truncated ciphertext refused: {why}"))?;

    let mut other = Keyset::single(StreamingKey::generate(false, DEFAULT_SEGMENT_SIZE)?);
    let why = expect_refusal(&other, &ct, &refused_out)?;
    p(out, format!("wrong key refused: {why}"))?;
    other = keyset;
    let r = files::run(
        Direction::Decrypt,
        &other,
        b"other aad",
        &Source::File(ct.clone()),
        &Sink::File(refused_out.clone()),
        &RunOptions {
            quiet: true,
            ..RunOptions::default()
        },
    );
    match r {
        Err(e) if !refused_out.exists() => p(out, format!("wrong associated data refused: {e}"))?,
        _ => {
            return Err(Error::new(
                ErrorKind::Authentication,
                "wrong associated data was not refused cleanly",
            ));
        }
    }
    p(out, "all checks passed".to_string())?;
    Ok(())
}
