//! The `gcmx-stream` adapters over arbitrary plaintexts, write splits, windows, inner readers
//! and writers that misbehave, changes of the ciphertext and reads at arbitrary offsets.
//!
//! The plaintext is described by its length and a seed, not carried in the input, so that
//! small inputs make streams of many segments and windows (segments of 41 to 552 bytes, windows
//! of a few segments, plaintexts up to 64 KiB).
//!
//! Checks: what `encrypting_writer` writes, whatever the splits and however its inner writer
//! takes the bytes (short writes, `WouldBlock` and `Interrupted` now and then, retried), reads
//! back through `decrypting_reader` and `decrypting_buf_reader` over sources that misbehave
//! the same way (reads of arbitrary sizes and `fill_buf`), and `seekable_reader`; after
//! arbitrary changes (bytes flipped, a cut, bytes appended) no reader hands out a byte that is
//! not the plaintext's at that offset, and the stream readers end cleanly exactly when nothing
//! changed. No panic and no hang on any input.
#![no_main]

use std::cell::Cell;
use std::io::{self, BufRead, Cursor, Read, Seek, SeekFrom, Write};
use std::rc::Rc;

use arbitrary::Arbitrary;
use gcmx_stream::{Backend, Keyset, Options, StreamingKey};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Case {
    aes256: bool,
    segment: u16,
    /// Window in segments (0: the default).
    window: u8,
    len: u16,
    seed: u64,
    splits: Vec<u16>,
    /// How the inner writer and the sources misbehave.
    io: Misbehaviour,
    flips: Vec<(u16, u8)>,
    cut: Option<u16>,
    extra: Vec<u8>,
    /// Sizes of the stream readers' reads (0: `fill_buf`).
    read_sizes: Vec<u16>,
    reads: Vec<(u16, u16)>,
}

/// At most `max` bytes a call (0: no limit); one call in `fail_every` (0 and 1: none), at random,
/// fails with `WouldBlock` or `Interrupted`, taking nothing. (At random: a read may ask a
/// buffered source for its buffer more than once, and a source that refused every second ask
/// could refuse the same ask of every read.)
#[derive(Arbitrary, Debug, Clone, Copy)]
struct Misbehaviour {
    max: u16,
    fail_every: u8,
}

/// The schedule of a [`Misbehaviour`].
struct Fate {
    m: Misbehaviour,
    /// A xorshift generator's state.
    rng: u64,
}

impl Fate {
    fn new(m: Misbehaviour) -> Fate {
        Fate { m, rng: 0x9e37_79b9_7f4a_7c15 }
    }

    fn next(&mut self) -> io::Result<usize> {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let every = u64::from(self.m.fail_every);
        if every > 1 && self.rng.is_multiple_of(every) {
            let kind = if self.rng & 1 << 40 == 0 {
                io::ErrorKind::Interrupted
            } else {
                io::ErrorKind::WouldBlock
            };
            return Err(kind.into());
        }
        Ok(if self.m.max == 0 { usize::MAX } else { usize::from(self.m.max) })
    }
}

/// The inner writer: misbehaves while `on` is set (the header, written by the constructor, and
/// `finish`, which consumes the writer, meet a writer that behaves).
struct Sink {
    out: Vec<u8>,
    fate: Fate,
    on: Rc<Cell<bool>>,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let max = if self.on.get() { self.fate.next()? } else { usize::MAX };
        let n = buf.len().min(max);
        self.out.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A source of `data` that misbehaves past its first `header` bytes (the constructors read the
/// header at once: a failure there is the constructor's, with no reader to retry).
struct Source<'a> {
    data: &'a [u8],
    header: usize,
    pos: usize,
    fate: Fate,
}

impl Source<'_> {
    fn most(&mut self) -> io::Result<usize> {
        if self.pos < self.header {
            return Ok(self.header - self.pos);
        }
        self.fate.next()
    }
}

impl Read for Source<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.most()?).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl BufRead for Source<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let end = self.pos.saturating_add(self.most()?).min(self.data.len());
        Ok(&self.data[self.pos..end])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.data.len());
    }
}

fn transient(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)
}

/// A plaintext of `len` bytes from `seed`.
fn plaintext(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

/// Reads `r` to its end or first lasting error, in reads of `sizes` (cycled; 0: `fill_buf`),
/// retrying transient errors: what it gave, and whether it ended cleanly.
fn drain<R: BufRead>(r: &mut R, sizes: &[u16]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut k = 0;
    // Every call moves a byte or fails; failures come at most every other call.
    for _ in 0..1 << 22 {
        let size = sizes.get(k % sizes.len().max(1)).copied().unwrap_or(u16::MAX);
        k += 1;
        let got = if size == 0 {
            r.fill_buf().map(|p| {
                out.extend_from_slice(p);
                p.len()
            })
        } else {
            r.read(&mut buf[..usize::from(size)]).inspect(|&n| {
                out.extend_from_slice(&buf[..n]);
            })
        };
        match got {
            Ok(0) => return (out, true),
            Ok(n) if size == 0 => r.consume(n),
            Ok(_) => {}
            Err(e) if transient(&e) => {}
            Err(_) => return (out, false),
        }
    }
    panic!("a reader made no progress");
}

fuzz_target!(|c: Case| {
    let dks = if c.aes256 { 32 } else { 16 };
    // The smallest segment: the header, a tag and one plaintext byte.
    let min = (1 + dks + 7 + 16 + 1) as u32;
    let seg = min + u32::from(c.segment) % 512;
    let opts = Options::default()
        .with_window_bytes(usize::from(c.window % 16) * seg as usize)
        .with_backend(Backend::Cpu);
    let ks = Keyset::from(StreamingKey::new(1, &[9u8; 32][..dks], dks, seg).unwrap())
        .with_options(opts);
    let plain = plaintext(usize::from(c.len), c.seed);

    let on = Rc::new(Cell::new(false));
    let sink = Sink {
        out: Vec::new(),
        fate: Fate::new(c.io),
        on: on.clone(),
    };
    let mut w = ks.encrypting_writer(sink, b"fuzz").unwrap();
    on.set(true);
    let mut rest = &plain[..];
    let mut k = 0;
    let mut tries = 0;
    while !rest.is_empty() {
        let n = c.splits.get(k).map_or(rest.len(), |&s| usize::from(s)).clamp(1, rest.len());
        k += 1;
        let mut piece = &rest[..n];
        while !piece.is_empty() {
            tries += 1;
            assert!(tries < 1 << 22, "the writer made no progress");
            match w.write(piece) {
                Ok(n) => piece = &piece[n..],
                Err(e) if transient(&e) => {}
                Err(e) => panic!("write: {e}"),
            }
        }
        rest = &rest[n..];
    }
    on.set(false);
    let good = w.finish().unwrap().out;
    assert_eq!(good.len() as u64, ks.primary().ciphertext_size(plain.len() as u64).unwrap());

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

    // The stream reader over a `Read` source: a prefix of the plaintext, and a clean end only
    // when unchanged.
    let src = Source { data: &ct, header: 1 + dks + 7, pos: 0, fate: Fate::new(c.io) };
    let (out, clean) = match ks.decrypting_reader(src, b"fuzz") {
        Ok(mut r) => drain(&mut r, &c.read_sizes),
        Err(_) => (Vec::new(), false),
    };
    assert!(plain.starts_with(&out), "bytes that are not the plaintext");
    assert_eq!(clean, !changed);
    if clean {
        assert!(out == plain);
    }

    // The same reader over a buffered source: segments opened from the source's buffer, the
    // same bytes and the same end.
    let src = Source { data: &ct, header: 1 + dks + 7, pos: 0, fate: Fate::new(c.io) };
    let (filled, filled_clean) = match ks.decrypting_buf_reader(src, b"fuzz") {
        Ok(mut r) => drain(&mut r, &c.read_sizes),
        Err(_) => (Vec::new(), false),
    };
    assert!(plain.starts_with(&filled), "bytes that are not the plaintext");
    assert_eq!(filled_clean, clean);
    if filled_clean {
        assert!(filled == plain);
    }

    // The seekable reader: every byte handed out is the plaintext's at its offset.
    if let Ok(mut r) = ks.seekable_reader(Cursor::new(&ct), b"fuzz") {
        for &(at, n) in &c.reads {
            let (at, n) = (u64::from(at), usize::from(n));
            r.seek(SeekFrom::Start(at)).unwrap();
            let mut buf = vec![0u8; n];
            if let Ok(got) = r.read(&mut buf) {
                let s = (at as usize).min(plain.len());
                let want = &plain[s..(s + n).min(plain.len())];
                assert!(got <= want.len(), "bytes past the plaintext's end");
                assert!(buf[..got] == want[..got], "bytes that are not the plaintext");
            }
        }
    }
});
