//! gcmx-cli: the `gcmx` command, file encryption in Google Tink's streaming AEAD format
//! (AES-GCM-HKDF), a shell over the `gcmx-stream` library.
//!
//! The binary is `gcmx`; this library holds its parts (the format, keysets and streaming are
//! `gcmx-stream`'s):
//! - [`bulk`]: a whole input to an output through the adapters, the input read ahead,
//! - [`keyfile`]: keyset files read with a size bound and written whole or not at all,
//! - [`files`]: files and standard streams, the overwrite guards, progress bar, summary line,
//! - [`output`]: the output file, put in place only when complete,
//! - [`signals`]: terminating signals end a run cleanly,
//! - [`demo`]: the `gcmx demo` self-check and throughput run.
#![warn(missing_docs)]

mod api;
pub mod bulk;
pub mod demo;
pub mod error;
pub mod files;
pub mod keyfile;
pub mod output;
mod random;
pub mod signals;

pub use api::{Backend, parse_backend};
pub use error::{Error, ErrorKind, Result};
pub use files::{Direction, RunOptions, Sink, Source};

/// Parses a byte count: digits with an optional binary suffix `K`, `KiB`, `M`, `MiB`, `G`,
/// `GiB` (case-insensitive), e.g. `4096`, `64K`, `1MiB`.
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits_end);
    let n: u64 = num
        .parse()
        .map_err(|_| Error::usage(format!("bad size {s:?}: expected a number of bytes")))?;
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => return Err(Error::usage(format!("bad size {s:?}: unknown suffix"))),
    };
    n.checked_mul(mult)
        .ok_or_else(|| Error::usage(format!("bad size {s:?}: too large")))
}

/// Parses `--aad-hex`: an even number of hex digits (spaces and colons are not allowed).
pub fn parse_hex(s: &str) -> Result<Vec<u8>> {
    hex::decode(s.trim()).map_err(|e| Error::usage(format!("bad --aad-hex value: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert!(parse_size("").is_err());
        assert!(parse_size("1X").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn backends() {
        assert_eq!(parse_backend("cpu").unwrap(), Backend::Cpu);
        assert_eq!(parse_backend("cpu-parallel").unwrap(), Backend::CpuParallel);
        assert_eq!(parse_backend("auto").unwrap(), Backend::Auto);
        assert!(parse_backend("gpu").is_err());
        #[cfg(not(feature = "cuda"))]
        assert!(
            parse_backend("cuda")
                .unwrap_err()
                .message()
                .contains("--features cuda")
        );
        for b in api::backends_built() {
            assert_eq!(parse_backend(b.name()).unwrap(), b);
        }
    }

    #[test]
    fn hex_aad() {
        assert_eq!(parse_hex("00ff10").unwrap(), vec![0, 255, 16]);
        assert!(parse_hex("0").is_err());
        assert!(parse_hex("zz").is_err());
    }
}
