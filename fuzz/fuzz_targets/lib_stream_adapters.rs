//! The `gcmx-stream` adapters over arbitrary plaintexts, write splits, windows, changes of
//! the ciphertext and reads at arbitrary offsets.
//!
//! Checks: what `encrypting_writer` writes, whatever the splits, reads back through
//! `decrypting_reader`, `decrypting_reader_buffered` (through `fill_buf`) and
//! `seekable_reader`; after arbitrary changes (bytes flipped, a cut, bytes appended) no reader
//! hands out a byte that is not the plaintext's at that offset, and the stream readers end
//! cleanly exactly when nothing changed. No panic on any input.
#![no_main]

use std::io::{BufRead, Cursor, Read, Seek, SeekFrom, Write};

use arbitrary::Arbitrary;
use gcmx_stream::{Backend, Keyset, Options, StreamingKey};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Case {
    aes256: bool,
    segment: u16,
    window: u16,
    plain: Vec<u8>,
    splits: Vec<u16>,
    flips: Vec<(u16, u8)>,
    cut: Option<u16>,
    extra: Vec<u8>,
    reads: Vec<(u16, u16)>,
}

fuzz_target!(|c: Case| {
    let dks = if c.aes256 { 32 } else { 16 };
    let min = gcmx_stream::min_segment_size(dks);
    let seg = min + u32::from(c.segment) % 512;
    let ks = Keyset::single(StreamingKey::new(1, &[9u8; 32][..dks], dks, seg).unwrap());
    let opts = Options::new()
        .with_window_bytes(usize::from(c.window))
        .with_backend(Backend::Cpu);

    let mut w = ks.encrypting_writer_with(Vec::new(), b"fuzz", &opts).unwrap();
    let mut rest = &c.plain[..];
    let mut k = 0;
    while !rest.is_empty() {
        let n = c.splits.get(k).map_or(rest.len(), |&s| usize::from(s)).clamp(1, rest.len());
        w.write_all(&rest[..n]).unwrap();
        rest = &rest[n..];
        k += 1;
    }
    let good = w.finish().unwrap();

    let mut ct = good.clone();
    if !ct.is_empty() {
        for &(at, x) in &c.flips {
            let i = usize::from(at) % ct.len();
            ct[i] ^= x;
        }
    }
    if let Some(cut) = c.cut {
        ct.truncate(usize::from(cut) % (ct.len() + 1));
    }
    ct.extend_from_slice(&c.extra);
    let changed = ct != good;

    // The stream reader: a prefix of the plaintext, and a clean end only when unchanged.
    let mut out = Vec::new();
    let clean = match ks.decrypting_reader_with(&ct[..], b"fuzz", &opts) {
        Ok(mut r) => r.read_to_end(&mut out).is_ok(),
        Err(_) => false,
    };
    assert!(c.plain.starts_with(&out), "bytes that are not the plaintext");
    assert_eq!(clean, !changed);
    if clean {
        assert!(out == c.plain);
    }

    // The same reader over the stream as a buffered source, through `fill_buf`: segments
    // opened from the source's buffer, the same bytes and the same end.
    let mut filled = Vec::new();
    let filled_clean = match ks.decrypting_reader_buffered_with(&ct[..], b"fuzz", &opts) {
        Ok(mut r) => loop {
            match r.fill_buf() {
                Ok([]) => break true,
                Ok(p) => {
                    filled.extend_from_slice(p);
                    let n = p.len();
                    r.consume(n);
                }
                Err(_) => break false,
            }
        },
        Err(_) => false,
    };
    assert!(c.plain.starts_with(&filled), "bytes that are not the plaintext");
    assert_eq!(filled_clean, clean);

    // The seekable reader: every byte handed out is the plaintext's at its offset.
    if let Ok(mut r) = ks.seekable_reader_with(Cursor::new(&ct), b"fuzz", &opts) {
        for &(at, n) in &c.reads {
            let (at, n) = (u64::from(at), usize::from(n));
            r.seek(SeekFrom::Start(at)).unwrap();
            let mut buf = vec![0u8; n];
            if let Ok(got) = r.read(&mut buf) {
                let s = (at as usize).min(c.plain.len());
                let want = &c.plain[s..(s + n).min(c.plain.len())];
                assert!(got <= want.len(), "bytes past the plaintext's end");
                assert!(buf[..got] == want[..got], "bytes that are not the plaintext");
            }
        }
    }
});
