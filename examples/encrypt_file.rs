//! Encrypt a file in Google Tink's streaming AEAD format (AES-GCM-HKDF, 1 MiB segments) with
//! the `gcmx` library alone: the job of `gcmx encrypt`, in one readable loop.
//!
//! ```text
//! cargo run --release --example encrypt_file                      # self-check, no files
//! cargo run --release --example encrypt_file -- encrypt KEY_HEX IN OUT [AAD]
//! cargo run --release --example encrypt_file -- decrypt KEY_HEX IN OUT [AAD]
//! ```
//!
//! KEY_HEX is the 16- or 32-byte key of a Tink `AesGcmHkdfStreamingKey` with HKDF-SHA256,
//! derived keys of the same size and 1 MiB ciphertext segments (Tink's `AES256_GCM_HKDF_1MB`
//! for 32 bytes), so `gcmx decrypt` and Tink open the output with a keyset holding that key.
//!
//! The format: a header `header_len || salt || nonce_prefix(7)`, a per-file key
//! `HKDF-SHA256(key, salt, info = AAD)`, then segments sealed with AES-GCM under nonce
//! `nonce_prefix || segment number (u32 BE) || last-segment flag`. Each window of up to 32
//! segments is sealed with one `Gcm::encrypt_batch` call (segments in parallel). The `gcmx`
//! tool does the same with reading, crypto and writing overlapped on three threads.

use std::io::{self, BufRead, BufReader, Read, Write};

use gcmx::{Gcm, OpenJob, SealJob};
use hkdf::Hkdf;
use rand::RngCore;
use sha2::Sha256;

const SEGMENT: usize = 1 << 20;
const TAG: usize = 16;
const WINDOW: usize = 32;

fn header_len(key: &[u8]) -> usize {
    1 + key.len() + 7
}

fn file_gcm(key: &[u8], salt: &[u8], aad: &[u8]) -> io::Result<Gcm> {
    let mut derived = vec![0u8; key.len()];
    Hkdf::<Sha256>::new(Some(salt), key)
        .expand(aad, &mut derived)
        .map_err(|_| io::Error::other("HKDF output too long"))?;
    Gcm::new(&derived).map_err(io::Error::other)
}

fn nonce(prefix: &[u8], index: u64, last: bool) -> io::Result<[u8; 12]> {
    let index = u32::try_from(index).map_err(|_| io::Error::other("more than 2^32 segments"))?;
    let mut n = [0u8; 12];
    n[..7].copy_from_slice(prefix);
    n[7..11].copy_from_slice(&index.to_be_bytes());
    n[11] = u8::from(last);
    Ok(n)
}

/// Reads until `buf` is full or the input ends; then tells whether the input has ended.
fn read_segment(r: &mut impl BufRead, buf: &mut [u8]) -> io::Result<(usize, bool)> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => return Ok((n, true)),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((n, r.fill_buf()?.is_empty()))
}

/// Encrypts `input` into `output` under `key` (16 or 32 bytes) and `aad`.
fn encrypt(key: &[u8], aad: &[u8], input: impl Read, mut output: impl Write) -> io::Result<()> {
    let mut salt = vec![0u8; key.len()];
    let mut prefix = [0u8; 7];
    rand::rng().fill_bytes(&mut salt);
    rand::rng().fill_bytes(&mut prefix);
    let gcm = file_gcm(key, &salt, aad)?;
    output.write_all(&[header_len(key) as u8])?;
    output.write_all(&salt)?;
    output.write_all(&prefix)?;

    let mut input = BufReader::new(input);
    let mut window = vec![0u8; WINDOW * SEGMENT];
    let mut index = 0u64;
    let mut done = false;
    while !done {
        // Read up to WINDOW segments, each followed by room for its tag.
        let mut segs = Vec::new(); // (offset, plaintext length, last, nonce)
        let mut off = 0;
        while segs.len() < WINDOW && !done {
            let room = if index == 0 {
                SEGMENT - header_len(key)
            } else {
                SEGMENT
            } - TAG;
            let (n, end) = read_segment(&mut input, &mut window[off..off + room])?;
            segs.push((off, n, end, nonce(&prefix, index, end)?));
            off += n + TAG;
            index += 1;
            done = end;
        }
        // Seal them all with one batch call.
        let mut jobs = Vec::with_capacity(segs.len());
        let mut rest = &mut window[..off];
        for (_, n, _, nonce) in &segs {
            let (seg, tail) = rest.split_at_mut(n + TAG);
            rest = tail;
            let (buf, tag) = seg.split_at_mut(*n);
            jobs.push(SealJob {
                nonce,
                aad: &[],
                buf,
                tag,
            });
        }
        gcm.encrypt_batch(&mut jobs).map_err(io::Error::other)?;
        // The window now holds the ciphertext segments back to back.
        output.write_all(&window[..off])?;
    }
    output.flush()
}

/// Decrypts `input` into `output`; any damage is an error (the output then holds a prefix of
/// authenticated plaintext at most: write to a temporary file and discard it on error).
fn decrypt(key: &[u8], aad: &[u8], input: impl Read, mut output: impl Write) -> io::Result<()> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let mut input = BufReader::new(input);
    let mut header = vec![0u8; header_len(key)];
    let (n, _) = read_segment(&mut input, &mut header)?;
    if n < header.len() || usize::from(header[0]) != header.len() {
        return Err(bad("not a ciphertext for this key: bad or short header"));
    }
    let (salt, prefix) = header[1..].split_at(key.len());
    let gcm = file_gcm(key, salt, aad)?;

    let mut window = vec![0u8; WINDOW * SEGMENT];
    let mut index = 0u64;
    let mut done = false;
    while !done {
        let mut segs = Vec::new(); // (offset, ciphertext length, nonce)
        let mut off = 0;
        while segs.len() < WINDOW && !done {
            let size = if index == 0 {
                SEGMENT - header_len(key)
            } else {
                SEGMENT
            };
            let (n, end) = read_segment(&mut input, &mut window[off..off + size])?;
            if n < TAG {
                return Err(bad("truncated ciphertext"));
            }
            segs.push((off, n, nonce(prefix, index, end)?));
            off += n;
            index += 1;
            done = end;
        }
        let mut jobs = Vec::with_capacity(segs.len());
        let mut rest = &mut window[..off];
        for (_, n, nonce) in &segs {
            let (seg, tail) = rest.split_at_mut(*n);
            rest = tail;
            let (buf, tag) = seg.split_at_mut(n - TAG);
            jobs.push(OpenJob {
                nonce,
                aad: &[],
                buf,
                tag,
            });
        }
        gcm.decrypt_batch(&mut jobs)
            .map_err(|_| bad("authentication failed: wrong key or AAD, or a damaged, truncated or reordered file"))?;
        for (o, n, _) in &segs {
            output.write_all(&window[*o..*o + n - TAG])?;
        }
    }
    output.flush()
}

fn self_check() -> io::Result<()> {
    let key = [0x42u8; 32];
    let first = SEGMENT - header_len(&key) - TAG;
    for len in [
        0,
        1,
        first,
        first + 1,
        first + SEGMENT - TAG,
        3 * SEGMENT + 5,
    ] {
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut ct = Vec::new();
        encrypt(&key, b"example", &data[..], &mut ct)?;
        let mut back = Vec::new();
        decrypt(&key, b"example", &ct[..], &mut back)?;
        assert!(back == data, "round trip of {len} bytes");
        assert!(
            decrypt(&key, b"other", &ct[..], io::sink()).is_err(),
            "wrong AAD"
        );
        if len > first {
            let cut = &ct[..header_len(&key) + first + TAG]; // drop everything after segment 0
            assert!(
                decrypt(&key, b"example", cut, io::sink()).is_err(),
                "truncation"
            );
        }
        println!(
            "{len:>9} bytes -> {:>9} bytes of ciphertext: round trip ok, damage refused",
            ct.len()
        );
    }
    println!("self-check passed");
    Ok(())
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        return self_check();
    }
    if !(4..=5).contains(&args.len()) || !matches!(args[0].as_str(), "encrypt" | "decrypt") {
        eprintln!("usage: encrypt_file [encrypt|decrypt KEY_HEX INPUT OUTPUT [AAD]]");
        std::process::exit(2);
    }
    let key = hex::decode(&args[1]).map_err(io::Error::other)?;
    if key.len() != 16 && key.len() != 32 {
        return Err(io::Error::other(
            "the key must be 16 or 32 bytes (32 or 64 hex digits)",
        ));
    }
    let aad = args.get(4).map_or(&b""[..], |a| a.as_bytes());
    let input = std::fs::File::open(&args[2])?;
    let output = io::BufWriter::new(std::fs::File::create_new(&args[3])?);
    let result = if args[0] == "encrypt" {
        encrypt(&key, aad, input, output)
    } else {
        decrypt(&key, aad, input, output)
    };
    if result.is_err() {
        let _ = std::fs::remove_file(&args[3]);
    }
    result
}
