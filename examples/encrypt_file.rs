//! Encrypt a file in Google Tink's streaming AEAD format (AES-GCM-HKDF) with `gcmx-stream`:
//! the job of `gcmx encrypt` / `gcmx decrypt` with `std::io` adapters, in a few lines.
//!
//! ```text
//! cargo run --release --example encrypt_file                          # self-check, no files
//! cargo run --release --example encrypt_file -- keygen KEYSET
//! cargo run --release --example encrypt_file -- encrypt KEYSET IN OUT [AAD]
//! cargo run --release --example encrypt_file -- decrypt KEYSET IN OUT [AAD]
//! ```
//!
//! KEYSET is a Tink cleartext JSON keyset of `AesGcmHkdfStreamingKey` keys (what `gcmx
//! keygen` and Tink's `JsonKeysetWriter` write), so `gcmx decrypt` and Tink open the output.
//! Segments are sealed and opened a window at a time, in parallel, inside the adapters.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};

use gcmx_stream::{KeySize, Keyset};

/// Encrypts `input` into `output`: everything written goes through the adapter, and
/// `finish` writes the last segment.
fn encrypt(
    keyset: &Keyset,
    aad: &[u8],
    mut input: impl Read,
    output: impl Write,
) -> io::Result<()> {
    let mut w = keyset.encrypting_writer(output, aad)?;
    io::copy(&mut input, &mut w)?;
    w.finish()?.flush()
}

/// Decrypts `input` into `output`. Any damage is an error; what was written before it had
/// authenticated, but the output is incomplete: write to a temporary file and discard it on
/// error (as `gcmx decrypt` does).
fn decrypt(
    keyset: &Keyset,
    aad: &[u8],
    input: impl Read,
    mut output: impl Write,
) -> io::Result<()> {
    let mut r = keyset.decrypting_reader(input, aad)?;
    io::copy(&mut r, &mut output)?;
    output.flush()
}

fn self_check() -> io::Result<()> {
    let keyset = Keyset::generate(KeySize::Aes256, 1 << 20)?;
    let first = (1 << 20) - 40 - 16;
    for len in [0, 1, first, first + 1, 3 << 20, (3 << 20) + 5] {
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut ct = Vec::new();
        encrypt(&keyset, b"example", &data[..], &mut ct)?;
        let mut back = Vec::new();
        decrypt(&keyset, b"example", &ct[..], &mut back)?;
        assert!(back == data, "round trip of {len} bytes");
        let wrong_aad = decrypt(&keyset, b"other", &ct[..], io::sink());
        assert_eq!(wrong_aad.unwrap_err().kind(), io::ErrorKind::InvalidData);
        if len > first {
            // Everything after segment 0 dropped: refused, though segment 0 is intact.
            let cut = &ct[..1 << 20];
            assert!(
                decrypt(&keyset, b"example", cut, io::sink()).is_err(),
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
    match args.first().map(String::as_str) {
        None => self_check(),
        Some("keygen") if args.len() == 2 => {
            let keyset = Keyset::generate(KeySize::Aes256, 1 << 20)?;
            File::create_new(&args[1])?.write_all(keyset.to_json().as_bytes())
        }
        Some(op @ ("encrypt" | "decrypt")) if (4..=5).contains(&args.len()) => {
            let keyset = Keyset::from_json(&std::fs::read_to_string(&args[1])?)?;
            let aad = args.get(4).map_or(&b""[..], |a| a.as_bytes());
            let input = BufReader::new(File::open(&args[2])?);
            let output = BufWriter::new(File::create_new(&args[3])?);
            let result = if op == "encrypt" {
                encrypt(&keyset, aad, input, output)
            } else {
                decrypt(&keyset, aad, input, output)
            };
            if result.is_err() {
                let _ = std::fs::remove_file(&args[3]);
            }
            result
        }
        _ => {
            eprintln!(
                "usage: encrypt_file [keygen KEYSET | encrypt|decrypt KEYSET INPUT OUTPUT [AAD]]"
            );
            std::process::exit(2);
        }
    }
}
