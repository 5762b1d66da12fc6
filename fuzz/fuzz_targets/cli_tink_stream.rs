//! Decrypts arbitrary bytes as a Tink streaming ciphertext under a fixed keyset (three keys:
//! two with 16-byte derived keys and small segments, one with 32-byte derived keys), through
//! `gcmx_cli::bulk::decrypt`, the pipeline of `gcmx decrypt`.
//!
//! Input: one byte that picks the window size (1 to 8 segments of the largest key), then the
//! ciphertext. Checks: no panic, no hang; a success accounts for every byte (header, tags and
//! plaintext add up to the input) and a failure is one line.
#![no_main]

use std::io::Cursor;
use std::sync::LazyLock;

use gcmx_cli::bulk::{self, Input};
use gcmx_stream::{Backend, Keyset, Options};
use libfuzzer_sys::fuzz_target;

static KEYSET: LazyLock<Keyset> = LazyLock::new(|| {
    Keyset::from_json(include_str!("../keyset.json")).expect("the fuzzing keyset parses")
});

/// The associated data the seeds were encrypted with (`make-seeds.sh`).
const AAD: &[u8] = b"gcmx-fuzz";

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, ct)) = data.split_first() else {
        return;
    };
    let opts = Options::default()
        .with_backend(Backend::Cpu)
        .with_window_bytes((usize::from(cfg % 8) + 1) * 100);
    let input = Input::reader(Cursor::new(ct.to_vec()));
    match bulk::decrypt(&KEYSET, AAD, input, Vec::new(), &opts, &|_| {}) {
        Ok((plain, stats)) => {
            assert_eq!(stats.bytes_in, ct.len() as u64);
            assert_eq!(stats.bytes_out, plain.len() as u64);
            let overhead = usize::from(ct[0]) + 16 * stats.segments as usize;
            assert_eq!(plain.len() + overhead, ct.len());
        }
        Err(e) => assert!(!e.message().contains('\n')),
    }
});
