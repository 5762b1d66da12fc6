//! The adapters under inner readers and writers that misbehave and callers that carry on
//! regardless (the scenarios in `common/hostile.rs`, here on the CPU; `tests/gpu.rs` runs them on
//! the GPU), and a property test of random misbehaviour.
//!
//! The nonces are checked from what an attacker who owns the inner writer sees: every byte
//! offered to it, at the stream offset the writer offered it at. Each complete segment there
//! must open under the nonce of its position (so no index is sealed twice at two places) and
//! hold the plaintext written at that offset, and the bytes offered twice at one offset must
//! agree (so no index is sealed twice at one place).

mod common;

use common::hostile;
use gcmx_stream::Backend;

/// At least two threads in rayon's global pool, so that large writes take the writer's relay
/// (segments sealed on the pool and written out by the caller's thread as they complete).
fn pool() {
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build_global();
}

#[test]
fn a_writer_whose_inner_writer_panicked_refuses_every_later_call_and_reuses_no_nonce() {
    pool();
    for backend in [Backend::CpuParallel, Backend::Cpu] {
        hostile::a_writer_whose_inner_writer_panicked_refuses_every_later_call(backend);
    }
}

#[test]
fn a_reader_whose_source_panicked_refuses_every_later_read() {
    pool();
    for backend in [Backend::CpuParallel, Backend::Cpu] {
        hostile::a_reader_whose_source_panicked_refuses_every_later_read(backend);
    }
}

#[test]
fn transient_source_errors_are_retried_on_every_path() {
    pool();
    for backend in [Backend::CpuParallel, Backend::Cpu] {
        hostile::transient_source_errors_are_retried_on_every_path(backend);
    }
}

mod random {
    //! The property test: inner writers and readers that misbehave at random.

    use std::cell::RefCell;
    use std::io::{self, BufRead, Read, Write};
    use std::panic::{self, AssertUnwindSafe};
    use std::rc::Rc;

    use gcmx_stream::{Backend, Error, ErrorKind, Keyset, Options, StreamingKey};
    use proptest::prelude::*;

    use super::common::{Audit, IKM, data, hostile::quiet};

    /// How an inner writer or reader misbehaves: it takes or gives at most `max` bytes a call,
    /// fails one call in `fail_every` at random (0: never) with `kind`, and panics at its
    /// `panic_at`-th call (0: never).
    #[derive(Clone, Copy, Debug)]
    struct Misbehaviour {
        max: usize,
        fail_every: u64,
        kind: io::ErrorKind,
        panic_at: usize,
    }

    fn misbehaviour() -> impl Strategy<Value = Misbehaviour> {
        (
            prop_oneof![Just(usize::MAX), 1..5000usize],
            prop_oneof![Just(0u64), 2..8u64],
            prop_oneof![
                Just(io::ErrorKind::WouldBlock),
                Just(io::ErrorKind::TimedOut),
                Just(io::ErrorKind::Interrupted)
            ],
            prop_oneof![Just(0usize), 1..60usize],
        )
            .prop_map(|(max, fail_every, kind, panic_at)| Misbehaviour {
                max,
                fail_every,
                kind,
                panic_at,
            })
    }

    /// The schedule of a [`Misbehaviour`]: a call's fate.
    struct Fate {
        m: Misbehaviour,
        calls: usize,
        rng: u64,
        /// Misbehaves only while set (a writer's `finish` is given a well-behaved inner writer,
        /// since it consumes the writer).
        on: bool,
    }

    impl Fate {
        fn new(m: Misbehaviour, seed: u64) -> Fate {
            Fate {
                m,
                calls: 0,
                rng: seed | 1,
                on: true,
            }
        }

        /// Panics, fails, or the most bytes this call may move.
        fn next(&mut self) -> io::Result<usize> {
            self.calls += 1;
            if !self.on {
                return Ok(usize::MAX);
            }
            if self.calls == self.m.panic_at {
                panic!("deliberate: the inner reader or writer panics");
            }
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            if self.m.fail_every != 0 && self.rng.is_multiple_of(self.m.fail_every) {
                return Err(self.m.kind.into());
            }
            Ok(self.m.max)
        }
    }

    struct Sink {
        audit: Rc<RefCell<Audit>>,
        fate: Rc<RefCell<Fate>>,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let mut a = self.audit.borrow_mut();
            let at = a.accepted;
            // What a sink sees, whether it takes it or not.
            a.offer(at, buf);
            drop(a);
            let max = self.fate.borrow_mut().next()?;
            let n = buf.len().min(max);
            self.audit.borrow_mut().accepted += n;
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            self.fate.borrow_mut().next().map(|_| ())
        }
    }

    struct Source<'a> {
        data: &'a [u8],
        pos: usize,
        fate: Fate,
    }

    impl Read for Source<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let max = self.fate.next()?;
            let n = buf.len().min(max).min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    impl BufRead for Source<'_> {
        fn fill_buf(&mut self) -> io::Result<&[u8]> {
            let max = self.fate.next()?;
            let end = self.pos.saturating_add(max).min(self.data.len());
            Ok(&self.data[self.pos..end])
        }

        fn consume(&mut self, amt: usize) {
            self.pos = (self.pos + amt).min(self.data.len());
        }
    }

    fn keyset(seg: u32) -> Keyset {
        Keyset::from(StreamingKey::new(1, &[IKM; 16], 16, seg).unwrap())
    }

    fn backend(cpu: bool) -> Backend {
        if cpu {
            Backend::Cpu
        } else {
            Backend::CpuParallel
        }
    }

    /// Whether `e` is an error a caller retries: the inner writer's or reader's transient ones.
    fn transient(e: &io::Error) -> bool {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
        )
    }

    fn poisoned(e: &io::Error) -> bool {
        Error::from_io(e).is_some_and(|e| e.kind() == ErrorKind::Poisoned)
    }

    /// Calls `f`, catching a panic: `None` if it panicked.
    fn call<T>(f: impl FnOnce() -> T) -> Option<T> {
        panic::catch_unwind(AssertUnwindSafe(f)).ok()
    }

    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(96)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases()))]

        /// A writer into an inner writer that takes short writes, fails at random with
        /// transient errors (retried by the caller) and may panic (caught by the caller, who
        /// then tries to go on with other bytes): every segment the inner writer was ever
        /// offered opens under its position's nonce with the plaintext written at that offset,
        /// no offset was offered two different bytes, every call after a panic fails as
        /// poisoned without panicking, and without a panic the stream is whole.
        #[test]
        fn a_misbehaving_inner_writer_never_sees_a_nonce_twice(
            seg in 41u32..700,
            segments_per_window in 0usize..9,
            len in 0usize..30_000,
            seed in any::<u64>(),
            pieces in proptest::collection::vec(1usize..9000, 1..12),
            m in misbehaviour(),
            cpu in any::<bool>(),
        ) {
            quiet();
            let ks = keyset(seg);
            let pt = data(len, seed);
            let other = data(len + 100, !seed);
            let opts = Options::default()
                .with_backend(backend(cpu))
                .with_window_bytes(segments_per_window * seg as usize);
            let audit = Rc::new(RefCell::new(Audit::default()));
            let fate = Rc::new(RefCell::new(Fate::new(m, seed)));
            let sink = Sink { audit: audit.clone(), fate: fate.clone() };
            let mut w = match call(|| ks.clone().with_options(opts).encrypting_writer(sink, b"p")) {
                Some(Ok(w)) => w,
                // The header's write failed or panicked: no writer.
                Some(Err(e)) => {
                    let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<io::Error>());
                    prop_assert_eq!(source.map(io::Error::kind), Some(m.kind));
                    return Ok(());
                }
                None => return Ok(()),
            };
            let (mut done, mut k, mut calls) = (0, 0, 0usize);
            let mut panicked = false;
            while done < pt.len() && !panicked {
                let end = (done + pieces[k % pieces.len()]).min(pt.len());
                k += 1;
                while done < end {
                    calls += 1;
                    prop_assert!(calls < 1_000_000, "no progress");
                    match call(|| w.write(&pt[done..end])) {
                        Some(Ok(n)) => done += n,
                        Some(Err(e)) if transient(&e) => {}
                        Some(Err(e)) => prop_assert!(false, "write: {}", e),
                        None => {
                            panicked = true;
                            break;
                        }
                    }
                }
            }
            while !panicked {
                calls += 1;
                prop_assert!(calls < 1_000_000, "no progress");
                match call(|| w.flush()) {
                    Some(Ok(())) => break,
                    Some(Err(e)) if transient(&e) => {}
                    Some(Err(e)) => prop_assert!(false, "flush: {}", e),
                    None => panicked = true,
                }
            }
            if panicked {
                for _ in 0..2 {
                    let r = call(|| w.write(&other));
                    prop_assert!(matches!(&r, Some(Err(e)) if poisoned(e)), "write after a panic");
                    let r = call(|| w.flush());
                    prop_assert!(matches!(&r, Some(Err(e)) if poisoned(e)), "flush after a panic");
                }
                let r = call(|| w.finish());
                prop_assert!(matches!(&r, Some(Err(e)) if poisoned(e)), "finish after a panic");
            } else {
                fate.borrow_mut().on = false;
                let r = call(|| w.finish());
                prop_assert!(matches!(r, Some(Ok(_))), "finish");
                let a = audit.borrow();
                let whole = ks.primary().ciphertext_size(len as u64).unwrap() as usize;
                prop_assert_eq!(a.accepted, whole);
                prop_assert_eq!(a.seen.len(), whole);
            }
            if let Err(e) = audit.borrow().check(&ks, b"p", &pt) {
                prop_assert!(false, "{}", e);
            }
        }

        /// A reader over a source that gives short reads, fails at random with transient errors
        /// (retried) and may panic (caught), through `read` of random sizes and `fill_buf`, of
        /// a stream that may be damaged: every byte handed out is the plaintext's at its offset,
        /// every call after a panic fails as poisoned without panicking, and an undamaged
        /// stream without a panic reads whole.
        #[test]
        fn a_misbehaving_source_never_yields_a_byte_that_is_not_the_plaintext(
            seg in 41u32..700,
            segments_per_window in 0usize..9,
            len in 0usize..30_000,
            seed in any::<u64>(),
            reads in proptest::collection::vec(0usize..40_000, 1..12),
            damage in proptest::option::of((any::<usize>(), 1u8..=255)),
            m in misbehaviour(),
            buffered in any::<bool>(),
            cpu in any::<bool>(),
        ) {
            quiet();
            let ks = keyset(seg);
            let pt = data(len, seed);
            let mut ct = {
                let mut w = ks.encrypting_writer(Vec::new(), b"p").unwrap();
                w.write_all(&pt).unwrap();
                w.finish().unwrap()
            };
            let hl = 1 + 16 + 7;
            if let Some((at, x)) = damage {
                let i = hl + at % (ct.len() - hl);
                ct[i] ^= x;
            }
            let opts = Options::default()
                .with_backend(backend(cpu))
                .with_window_bytes(segments_per_window * seg as usize);
            let src = Source { data: &ct, pos: 0, fate: Fate::new(m, seed) };
            // The constructor reads the header: a failure or a panic there leaves no reader.
            let made = call(|| {
                if buffered {
                    ks.clone().with_options(opts).decrypting_buf_reader(src, b"p").map(Reader::Buffered)
                } else {
                    ks.clone().with_options(opts).decrypting_reader(src, b"p").map(Reader::Plain)
                }
            });
            let mut r = match made {
                Some(Ok(r)) => r,
                Some(Err(_)) | None => return Ok(()),
            };
            let mut out = Vec::new();
            let mut buf = vec![0u8; 40_000];
            let (mut k, mut calls) = (0, 0usize);
            let mut panicked = false;
            let clean = loop {
                calls += 1;
                prop_assert!(calls < 1_000_000, "no progress");
                let size = reads[k % reads.len()];
                k += 1;
                match call(|| r.read_some(size, &mut buf)) {
                    Some(Ok(0)) => break true,
                    Some(Ok(n)) => out.extend_from_slice(&buf[..n]),
                    Some(Err(e)) if transient(&e) => {}
                    Some(Err(e)) => {
                        prop_assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{}", e);
                        break false;
                    }
                    None => {
                        panicked = true;
                        break false;
                    }
                }
            };
            prop_assert!(pt.starts_with(&out), "bytes that are not the plaintext");
            if panicked {
                for size in [0, 7, 40_000] {
                    let got = call(|| r.read_some(size, &mut buf));
                    prop_assert!(matches!(&got, Some(Err(e)) if poisoned(e)), "read after a panic");
                }
            } else if damage.is_none() {
                prop_assert!(clean && out == pt, "an intact stream did not read whole");
            } else {
                prop_assert!(!clean, "a damaged stream was accepted");
            }
        }
    }

    /// The reader under test, over either kind of source.
    enum Reader<'a> {
        Plain(gcmx_stream::DecryptingReader<Source<'a>>),
        Buffered(gcmx_stream::DecryptingReader<Source<'a>>),
    }

    impl Reader<'_> {
        /// One `read` of `size` bytes into `buf`, or (`size` 0) one `fill_buf` and `consume`.
        fn read_some(&mut self, size: usize, buf: &mut [u8]) -> io::Result<usize> {
            let r = match self {
                Reader::Plain(r) | Reader::Buffered(r) => r,
            };
            if size == 0 {
                let p = r.fill_buf()?;
                let n = p.len().min(buf.len());
                buf[..n].copy_from_slice(&p[..n]);
                r.consume(n);
                return Ok(n);
            }
            r.read(&mut buf[..size])
        }
    }
}
