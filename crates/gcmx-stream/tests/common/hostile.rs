//! Scenarios of the hostile-caller tests, run on a backend: inner readers and writers that
//! misbehave and callers that carry on regardless (a panicking inner `Write`, `Read` or
//! `BufRead` whose panic the caller catches, transient errors, short reads and writes).
//! Whatever they do: no nonce is used for two segments, no byte is handed out that is not the
//! plaintext at its offset, no panic escapes the adapters after the inner one's, and nothing
//! hangs.

use std::cell::RefCell;
use std::io::{self, BufRead, Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;

use gcmx_stream::{Backend, Options};

use super::{Audit, data, encrypt, header_len, keyset, plain_lens};

/// Silences the panic messages of the inner readers' and writers' deliberate panics.
pub(crate) fn quiet() {
    panic::set_hook(Box::new(|info| {
        let text = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .unwrap_or_default();
        if !text.starts_with("deliberate") {
            eprintln!("{info}");
        }
    }));
}

/// An inner writer that shows every byte offered to it to an [`Audit`], takes at most `max`
/// bytes a call, and panics at its `panic_at`-th call (after the audit saw the bytes).
pub(crate) struct Sink {
    audit: Rc<RefCell<Audit>>,
    calls: usize,
    panic_at: usize,
    max: usize,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.calls += 1;
        let mut a = self.audit.borrow_mut();
        let at = a.accepted;
        a.offer(at, buf);
        if self.calls == self.panic_at {
            drop(a);
            panic!("deliberate: the inner writer panics");
        }
        let n = buf.len().min(self.max);
        a.accepted += n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether `f` returned an error without panicking.
pub(crate) fn refuses<T>(what: &str, f: impl FnOnce() -> io::Result<T>) {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(_)) => panic!("{what}: accepted after the inner writer panicked"),
        Ok(Err(_)) => {}
        Err(_) => panic!("{what}: panicked after the inner writer's panic"),
    }
}

/// A writer whose inner writer panicked in the middle of a write (the relay of large writes,
/// whole segments sealed into the window, small writes copied in; the panic caught by the
/// caller) refuses every later call, `try_finish` and `finish` included, and never seals an index twice: the
/// caller's later bytes, different from the first ones, never reach the inner writer.
pub(crate) fn a_writer_whose_inner_writer_panicked_refuses_every_later_call(backend: Backend) {
    quiet();
    let ks = keyset(16, 256);
    let (p0, p) = plain_lens(&ks);
    let first = data(p0 + 100 * p + 31, 1);
    let second = data(first.len(), 2);
    let mut panics = 0;
    for piece in [usize::MAX, 3000, 1000, 100] {
        for (max, window) in [(usize::MAX, 4 * 256), (100, 4 * 256), (usize::MAX, 0)] {
            for panic_at in [1, 2, 3, 5, 8, 20] {
                let opts = Options::default()
                    .with_backend(backend)
                    .with_window_bytes(window);
                let audit = Rc::new(RefCell::new(Audit::default()));
                let sink = Sink {
                    audit: audit.clone(),
                    calls: 0,
                    panic_at,
                    max,
                };
                let how = format!("writes of {piece}, inner takes {max}, panic at {panic_at}");
                let made = panic::catch_unwind(AssertUnwindSafe(|| {
                    ks.clone()
                        .with_options(opts)
                        .encrypting_writer(sink, b"aad")
                }));
                let mut w = match made {
                    Ok(w) => w.unwrap(),
                    // The header's write panicked: there is no writer.
                    Err(_) => {
                        panics += 1;
                        continue;
                    }
                };
                let mut panicked = false;
                for c in first.chunks(piece.min(first.len())) {
                    match panic::catch_unwind(AssertUnwindSafe(|| w.write_all(c))) {
                        Ok(r) => r.unwrap(),
                        Err(_) => {
                            panicked = true;
                            break;
                        }
                    }
                }
                if !panicked {
                    match panic::catch_unwind(AssertUnwindSafe(|| w.flush())) {
                        Ok(r) => r.unwrap(),
                        Err(_) => panicked = true,
                    }
                }
                if !panicked {
                    // The panic comes later, at the end (the last segment sealed or not); the
                    // stream is checked all the same.
                    match panic::catch_unwind(AssertUnwindSafe(|| w.try_finish())) {
                        Ok(r) => assert!(r.is_ok(), "{how}"),
                        Err(_) => panicked = true,
                    }
                    // The inner writer is called at least twice (the header, then segments).
                    assert!(panic_at > 2 || panicked, "{how}: no panic");
                }
                if panicked {
                    panics += 1;
                    refuses(&how, || w.write(&second[..10]));
                    refuses(&how, || w.write_all(&second));
                    refuses(&how, || w.flush());
                    refuses(&how, || w.try_finish());
                    refuses(&how, || w.finish());
                } else {
                    w.finish().unwrap();
                }
                let a = audit.borrow();
                if let Err(e) = a.check(&ks, b"aad", &first) {
                    panic!("{how}: {e}");
                }
            }
        }
    }
    // Every case whose inner writer panics at its first or second call, and more.
    assert!(panics >= 24, "only {panics} panics took place");
}

/// A source of `data` through `Read` (or `BufRead`, in pieces of `max` bytes) that panics at
/// its `panic_at`-th call: in `read`, in `fill_buf`, or in `consume` after consuming.
pub(crate) struct Panicking<'a> {
    data: &'a [u8],
    pos: usize,
    calls: usize,
    panic_at: usize,
    max: usize,
    in_consume: bool,
}

impl Panicking<'_> {
    fn tick(&mut self) {
        self.calls += 1;
        if self.calls == self.panic_at {
            panic!("deliberate: the source panics");
        }
    }
}

impl Read for Panicking<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.tick();
        let n = buf.len().min(self.max).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl BufRead for Panicking<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if !self.in_consume {
            self.tick();
        }
        let end = self.pos.saturating_add(self.max).min(self.data.len());
        Ok(&self.data[self.pos..end])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.data.len());
        if self.in_consume {
            self.tick();
        }
    }
}

/// How a test reads a reader.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Reads {
    /// `read` into a buffer larger than the stream (whole segments straight into it).
    Large,
    /// `read` of 7 bytes (through the window).
    Small,
    /// `fill_buf` and `consume`.
    Buf,
}

/// One call of `how` on `r`: the plaintext bytes it gave, or its error.
pub(crate) fn read_once<R: BufRead>(r: &mut R, how: Reads, buf: &mut [u8]) -> io::Result<Vec<u8>> {
    match how {
        Reads::Large => r.read(buf).map(|n| buf[..n].to_vec()),
        Reads::Small => r.read(&mut buf[..7]).map(|n| buf[..n].to_vec()),
        Reads::Buf => {
            let p = r.fill_buf()?.to_vec();
            r.consume(p.len());
            Ok(p)
        }
    }
}

/// A reader whose source panicked in `read`, `fill_buf` or in `consume` after consuming
/// (caught by the caller) refuses every later read with an error, never a panic, and what it
/// gave before is the plaintext's start.
pub(crate) fn a_reader_whose_source_panicked_refuses_every_later_read(backend: Backend) {
    quiet();
    let ks = keyset(16, 256);
    let (p0, p) = plain_lens(&ks);
    let pt = data(p0 + 60 * p + 9, 3);
    let ct = encrypt(&ks, b"", &pt);
    let mut panics = 0;
    for buffered in [false, true] {
        for in_consume in [false, true] {
            if in_consume && !buffered {
                continue;
            }
            for max in [usize::MAX, 700, 5] {
                for how in [Reads::Large, Reads::Small, Reads::Buf] {
                    for panic_at in [2, 3, 4, 6, 9, 15, 40] {
                        let src = Panicking {
                            data: &ct,
                            pos: 0,
                            calls: 0,
                            panic_at,
                            max,
                            in_consume,
                        };
                        let what = format!(
                            "buffered {buffered}, in consume {in_consume}, pieces of {max}, \
                             {how:?} reads, panic at {panic_at}"
                        );
                        let opts = Options::default()
                            .with_backend(backend)
                            .with_window_bytes(6 * 256);
                        let made = panic::catch_unwind(AssertUnwindSafe(|| {
                            if buffered {
                                ks.clone()
                                    .with_options(opts)
                                    .decrypting_buf_reader(src, b"")
                            } else {
                                ks.clone().with_options(opts).decrypting_reader(src, b"")
                            }
                        }));
                        let mut r = match made {
                            Ok(r) => r.unwrap(),
                            // The header's read panicked: there is no reader.
                            Err(_) => {
                                panics += 1;
                                continue;
                            }
                        };
                        let mut out = Vec::new();
                        let mut buf = vec![0u8; pt.len() + 100];
                        let mut panicked = false;
                        for _ in 0..100_000 {
                            match panic::catch_unwind(AssertUnwindSafe(|| {
                                read_once(&mut r, how, &mut buf)
                            })) {
                                Ok(Ok(got)) if got.is_empty() => break,
                                Ok(Ok(got)) => out.extend_from_slice(&got),
                                Ok(Err(e)) => panic!("{what}: {e}"),
                                Err(_) => {
                                    panicked = true;
                                    break;
                                }
                            }
                        }
                        assert!(pt.starts_with(&out), "{what}: not the plaintext");
                        if !panicked {
                            // The source is called at least twice (the header, then segments).
                            assert!(panic_at > 2, "{what}: no panic");
                            assert!(out == pt, "{what}");
                            continue;
                        }
                        panics += 1;
                        for how in [Reads::Large, Reads::Small, Reads::Buf] {
                            match panic::catch_unwind(AssertUnwindSafe(|| {
                                read_once(&mut r, how, &mut buf)
                            })) {
                                Ok(Err(_)) => {}
                                Ok(Ok(got)) => {
                                    panic!(
                                        "{what}: {how:?} after the panic gave {} bytes",
                                        got.len()
                                    )
                                }
                                Err(_) => panic!("{what}: {how:?} after the panic panicked"),
                            }
                        }
                    }
                }
            }
        }
    }
    // Every case whose source panics at its second call, and more.
    assert!(panics >= 27, "only {panics} panics took place");
}

/// A source that, once past the header (the constructor's reads), fails one call in `every` on
/// average, at random, with `kind` (taking nothing), and otherwise hands out at most `max`
/// bytes: through `Read`, or `BufRead` whose `fill_buf` fails. (At random, not every
/// `every`-th call: a read may ask a buffered source for its buffer more than once, and a
/// source that refused every third ask could refuse the same ask of every read.)
pub(crate) struct Transient<'a> {
    data: &'a [u8],
    header: usize,
    pos: usize,
    /// The random generator's state.
    state: usize,
    every: usize,
    max: usize,
    kind: io::ErrorKind,
}

impl Transient<'_> {
    fn tick(&mut self) -> io::Result<()> {
        if self.pos < self.header {
            return Ok(());
        }
        // xorshift64
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        if self.state.is_multiple_of(self.every) {
            return Err(self.kind.into());
        }
        Ok(())
    }
}

impl Read for Transient<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.tick()?;
        let n = buf.len().min(self.max).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl BufRead for Transient<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.tick()?;
        let end = self.pos.saturating_add(self.max).min(self.data.len());
        Ok(&self.data[self.pos..end])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.data.len());
    }
}

/// A transient error of the source (`WouldBlock`, `TimedOut`, `Interrupted`) in any read, large
/// or small, leaves the stream as it was: the caller retries and gets the whole plaintext, in
/// a bounded number of calls.
pub(crate) fn transient_source_errors_are_retried_on_every_path(backend: Backend) {
    let ks = keyset(16, 256);
    let (p0, p) = plain_lens(&ks);
    let pt = data(p0 + 80 * p + 9, 4);
    let ct = encrypt(&ks, b"", &pt);
    for buffered in [false, true] {
        for kind in [
            io::ErrorKind::WouldBlock,
            io::ErrorKind::TimedOut,
            io::ErrorKind::Interrupted,
        ] {
            for (every, max) in [
                (2, usize::MAX),
                (3, usize::MAX),
                (4, 1000),
                (7, 256 * 9 + 1),
            ] {
                for how in [Reads::Large, Reads::Small, Reads::Buf] {
                    let what =
                        format!("buffered {buffered}, {kind:?} every {every}, {max}, {how:?}");
                    let src = Transient {
                        data: &ct,
                        header: header_len(&ks),
                        pos: 0,
                        state: 0x9e37_79b9 + every,
                        every,
                        max,
                        kind,
                    };
                    let opts = Options::default()
                        .with_backend(backend)
                        .with_window_bytes(6 * 256);
                    let mut r = if buffered {
                        ks.clone()
                            .with_options(opts)
                            .decrypting_buf_reader(src, b"")
                    } else {
                        ks.clone().with_options(opts).decrypting_reader(src, b"")
                    }
                    .unwrap();
                    let mut out = Vec::new();
                    let mut buf = vec![0u8; pt.len() + 100];
                    let mut calls = 0;
                    loop {
                        calls += 1;
                        assert!(calls < 100_000, "{what}: no progress");
                        match read_once(&mut r, how, &mut buf) {
                            Ok(got) if got.is_empty() => break,
                            Ok(got) => out.extend_from_slice(&got),
                            Err(e) if e.kind() == kind => {}
                            Err(e) => panic!("{what}: {e}"),
                        }
                    }
                    assert!(out == pt, "{what}: {} of {} bytes", out.len(), pt.len());
                }
            }
        }
    }
}
