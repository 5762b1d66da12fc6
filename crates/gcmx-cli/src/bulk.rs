//! Whole inputs to outputs through gcmx-stream's adapters: what `gcmx encrypt` and `gcmx
//! decrypt` run.
//!
//! ```
//! use gcmx_cli::bulk::{self, Input};
//! use gcmx_stream::{KeySize, Keyset, Options};
//! let keyset = Keyset::generate(KeySize::Aes256, 64 << 10)?;
//! let plain = vec![7u8; 300_000];
//! let input = Input::reader(std::io::Cursor::new(plain.clone()));
//! let (ct, _) = bulk::encrypt(&keyset, b"aad", input, Vec::new(), &Options::default(), &|_| {})?;
//! let input = Input::reader(std::io::Cursor::new(ct));
//! let (back, stats) = bulk::decrypt(&keyset, b"aad", input, Vec::new(), &Options::default(), &|_| {})?;
//! assert_eq!(back, plain);
//! assert_eq!(stats.segments, 5);
//! # Ok::<(), gcmx_cli::Error>(())
//! ```
//!
//! A reader thread reads the input ahead, in pieces of up to [`PIECE`] bytes, while the calling
//! thread runs the adapter: encrypting, an [`EncryptingWriter`](gcmx_stream::EncryptingWriter)
//! into the output, which seals the segments on every core and writes them out as they complete;
//! decrypting, the buffered reader over the pieces, which opens each segment from the piece
//! that holds it on every core, and the plaintext written out.
//!
//! [`encrypt`] and [`decrypt`] return only after the reader thread has ended, also after an
//! early error: it stops at its next read (reads of standard input, pipes and FIFOs wait in
//! slices of at most 100 ms, so they stop promptly even when no data comes; a [`Read`] given as
//! [`Input::Stream`] is stopped between its `read` calls). They also return only once the
//! stacks of the threads that ran the crypto are wiped: the tool exits right after.

use std::fs::File;
use std::io::{self, BufRead, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;
use std::time::{Duration, Instant};

use gcmx_stream::{Keyset, Options};
use zeroize::Zeroizing;

use crate::error::{Error, ErrorKind, Result};

/// Most bytes the reader thread reads at once (its buffers start small and grow to this as
/// reads fill them, so a short input touches little memory).
pub const PIECE: usize = 8 << 20;

/// Buffers in circulation between the reader thread and the calling thread.
const BUFFERS: usize = 3;

/// What a run processed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes read from the input.
    pub bytes_in: u64,
    /// Bytes written to the output.
    pub bytes_out: u64,
    /// Segments sealed or opened.
    pub segments: u64,
}

/// What the pipeline reads.
pub enum Input {
    /// Any byte stream, read sequentially. The run stops it between `read` calls, so a
    /// `read` that blocks delays the end of the run until it returns; give pipes and FIFOs as
    /// [`Input::Pipe`] instead.
    Stream(Box<dyn Read + Send>),
    /// A file: a regular file is read whole, from its start whatever its cursor; anything
    /// else (a FIFO, a character device) is read as an [`Input::Pipe`].
    File(File),
    /// A file descriptor read sequentially from its cursor (standard input, a pipe, a FIFO, a
    /// terminal, a socket): reads wait for data in slices of at most 100 ms, so that the run
    /// can stop promptly when it ends early.
    Pipe(File),
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Stream(_) => f.write_str("Input::Stream(..)"),
            Input::File(file) => f.debug_tuple("Input::File").field(file).finish(),
            Input::Pipe(file) => f.debug_tuple("Input::Pipe").field(file).finish(),
        }
    }
}

impl Input {
    /// Any reader, read as a stream.
    pub fn reader(r: impl Read + Send + 'static) -> Input {
        Input::Stream(Box::new(r))
    }

    /// A reader that stops with `stop`.
    fn into_stream(self, stop: &Stop) -> Box<dyn Read + Send> {
        let pipe = |file: File| -> Box<dyn Read + Send> {
            Box::new(PollReader {
                file,
                stop: stop.clone(),
            })
        };
        match self {
            Input::Stream(inner) => Box::new(Stoppable {
                inner,
                stop: stop.clone(),
            }),
            Input::Pipe(f) => pipe(f),
            Input::File(f) => match f.metadata() {
                Ok(m) if m.is_file() => Box::new(Stoppable {
                    inner: PosReader { file: f, pos: 0 },
                    stop: stop.clone(),
                }),
                _ => pipe(f),
            },
        }
    }
}

impl From<Box<dyn Read + Send>> for Input {
    fn from(r: Box<dyn Read + Send>) -> Input {
        Input::Stream(r)
    }
}

impl From<File> for Input {
    fn from(f: File) -> Input {
        Input::File(f)
    }
}

/// A set-once flag that tells the reader thread to stop.
#[derive(Clone, Default)]
struct Stop(Arc<AtomicBool>);

impl Stop {
    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn check(&self) -> io::Result<()> {
        if self.0.load(Ordering::Relaxed) {
            Err(io::Error::other("the run has stopped"))
        } else {
            Ok(())
        }
    }
}

/// A reader that fails once the run has stopped.
struct Stoppable<R> {
    inner: R,
    stop: Stop,
}

impl<R: Read> Read for Stoppable<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stop.check()?;
        self.inner.read(buf)
    }
}

/// Reads a descriptor after waiting for data in slices of 100 ms, checking the stop flag
/// between them.
struct PollReader {
    file: File,
    stop: Stop,
}

impl Read for PollReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        loop {
            self.stop.check()?;
            let mut fds = [PollFd::new(self.file.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(100u8)) {
                Ok(0) => continue,
                // Data, end of input or an error: `read` tells which.
                Ok(_) => return self.file.read(buf),
                Err(nix::errno::Errno::EINTR) => continue,
                // A descriptor that cannot be polled: read it directly.
                Err(_) => return self.file.read(buf),
            }
        }
    }
}

/// Sequential reads of a file by position, from `pos` on (its cursor is not used).
struct PosReader {
    file: File,
    pos: u64,
}

impl Read for PosReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// A piece of the input: its buffer (wiped when dropped: it may hold plaintext) and how many of
/// its bytes were read.
type Piece = (Zeroizing<Vec<u8>>, usize);

/// The input, read ahead by a thread of its own: the pieces it read (the last of length 0: the
/// end of the input; or its error), and the channel that gives it buffers back.
struct Feed {
    pieces: Option<Receiver<io::Result<Piece>>>,
    free: Option<SyncSender<Zeroizing<Vec<u8>>>>,
    stop: Stop,
    thread: Option<thread::JoinHandle<()>>,
    /// Bytes read so far, and the first of them (a ciphertext's header length).
    bytes_in: u64,
    first: Option<u8>,
    /// Time spent waiting for the reader thread (`GCMX_TRACE`).
    waited: Duration,
}

impl Feed {
    /// Starts the reader thread on `input`.
    fn start(input: Input) -> Result<Feed> {
        let stop = Stop::default();
        let mut src = input.into_stream(&stop);
        let (piece_tx, pieces) = sync_channel::<io::Result<Piece>>(BUFFERS);
        let (free, free_rx) = sync_channel::<Zeroizing<Vec<u8>>>(BUFFERS);
        for _ in 0..BUFFERS {
            // The channel has room for every buffer.
            let _ = free.send(Zeroizing::new(Vec::new()));
        }
        let thread = thread::Builder::new()
            .name("gcmx-reader".into())
            .spawn(move || {
                // Buffers grow from 64 KiB as reads fill them: a short input touches little memory.
                let mut size = 64 << 10;
                while let Ok(mut buf) = free_rx.recv() {
                    if buf.len() < size {
                        // The old buffer is wiped as it is dropped.
                        buf = Zeroizing::new(vec![0u8; size]);
                    }
                    let r = loop {
                        match src.read(&mut buf) {
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            r => break r,
                        }
                    };
                    let end = match &r {
                        Ok(n) if *n == buf.len() => {
                            size = (size * 2).min(PIECE);
                            false
                        }
                        Ok(n) => *n == 0,
                        Err(_) => true,
                    };
                    if piece_tx.send(r.map(|n| (buf, n))).is_err() || end {
                        return;
                    }
                }
            })
            .map_err(|e| Error::io("cannot start the reader thread", e))?;
        Ok(Feed {
            pieces: Some(pieces),
            free: Some(free),
            stop,
            thread: Some(thread),
            bytes_in: 0,
            first: None,
            waited: Duration::ZERO,
        })
    }

    /// The next piece (`n == 0` at the end of the input), or the reader's error.
    fn next(&mut self) -> io::Result<Piece> {
        let t = Instant::now();
        let r = match self.pieces.as_ref().map(Receiver::recv) {
            Some(Ok(r)) => r,
            _ => Err(io::Error::other("the reader thread ended without a result")),
        };
        self.waited += t.elapsed();
        if let Ok((buf, n)) = &r {
            if *n > 0 {
                self.first.get_or_insert(buf[0]);
            }
            self.bytes_in += *n as u64;
        }
        r
    }

    /// Gives a buffer back to the reader thread.
    fn recycle(&self, buf: Zeroizing<Vec<u8>>) {
        // The reader may be gone (it reached the end); then the buffer is dropped, and wiped.
        if let Some(free) = &self.free {
            let _ = free.try_send(buf);
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        // Stop the reader (it may be waiting for input, for a buffer or for room to send) and
        // wait for it: nothing of this run outlives it.
        self.stop.set();
        self.free = None;
        self.pieces = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The pieces of a [`Feed`] as a buffered source: the decrypting reader opens the segments
/// from the piece that holds them.
struct Pieces<'a> {
    feed: &'a mut Feed,
    cur: Option<Piece>,
    pos: usize,
    /// The reader's error: given again at every later call (a failed read is not retried).
    failed: Option<(io::ErrorKind, String)>,
    progress: &'a dyn Fn(u64),
}

impl BufRead for Pieces<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if let Some((kind, msg)) = &self.failed {
            return Err(io::Error::new(*kind, msg.clone()));
        }
        if let Some((buf, n)) = self.cur.take_if(|(_, n)| self.pos == *n && *n > 0) {
            debug_assert!(n > 0);
            self.feed.recycle(buf);
        }
        if self.cur.is_none() {
            match self.feed.next() {
                Ok(p) => {
                    (self.progress)(p.1 as u64);
                    self.cur = Some(p);
                    self.pos = 0;
                }
                Err(e) => {
                    self.failed = Some((e.kind(), e.to_string()));
                    return Err(e);
                }
            }
        }
        Ok(self.cur.as_ref().map_or(&[][..], |(b, n)| &b[self.pos..*n]))
    }

    fn consume(&mut self, amt: usize) {
        if let Some((_, n)) = &self.cur {
            self.pos = (self.pos + amt).min(*n);
        }
    }
}

impl Read for Pieces<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let src = self.fill_buf()?;
        let n = src.len().min(out.len());
        out[..n].copy_from_slice(&src[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// A failed read or write of the run as the tool's error: the library's own error when it
/// carries one, else a failure of the input (`reading`) or of the output.
fn run_error(e: io::Error, reading: bool) -> Error {
    if let Some(inner) = gcmx_stream::Error::from_io(&e) {
        return Error::from(inner.clone());
    }
    if reading {
        return Error::io("cannot read input", e);
    }
    Error::io(write_context(&e), e)
}

/// What a failed write of the output was, with the two causes people meet named plainly.
fn write_context(e: &io::Error) -> &'static str {
    if e.raw_os_error() == Some(nix::libc::EFBIG) {
        "cannot write output: the file size limit was reached (ulimit -f)"
    } else if e.kind() == io::ErrorKind::BrokenPipe {
        "cannot write output: the reading end was closed"
    } else {
        "cannot write output"
    }
}

/// Waits until every thread of rayon's pool has wiped its stack: the adapters queue those wipes
/// when they are dropped (a drop never waits on the pool), and a broadcast runs on each thread
/// after what was queued there before it. The tool exits right after a run, before a queued
/// wipe might run otherwise.
fn wait_for_wipes() {
    rayon::broadcast(|_| ());
}

fn trace(what: &str, stats: &Stats, started: Instant, waited: Duration) {
    if std::env::var_os("GCMX_TRACE").is_some_and(|v| !v.is_empty() && v != "0") {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        eprintln!(
            "gcmx trace: {what} {} MB in {:.1} ms, {} segments; waiting for input {:.1} ms",
            stats.bytes_in / 1_000_000,
            ms(started.elapsed()),
            stats.segments,
            ms(waited),
        );
    }
}

/// Encrypts `input` to `output` with the keyset's primary key; returns the output back.
pub fn encrypt<W: Write>(
    keyset: &Keyset,
    aad: &[u8],
    input: impl Into<Input>,
    output: W,
    opts: &Options,
    progress: &dyn Fn(u64),
) -> Result<(W, Stats)> {
    let started = Instant::now();
    let mut feed = Feed::start(input.into())?;
    let result = (|| {
        let mut w = keyset
            .clone()
            .with_options(*opts)
            .encrypting_writer(output, aad)
            .map_err(|e| {
                // The header's write failed: a failure of the output.
                let io = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<io::Error>());
                match io {
                    Some(io) => Error::stream(write_context(io), e),
                    None => Error::from(e),
                }
            })?;
        let mut stats = Stats::default();
        loop {
            let (buf, n) = feed.next().map_err(|e| run_error(e, true))?;
            if n == 0 {
                break;
            }
            w.write_all(&buf[..n]).map_err(|e| run_error(e, false))?;
            feed.recycle(buf);
            stats.bytes_in += n as u64;
            progress(n as u64);
        }
        let output = w.finish().map_err(|e| run_error(e, false))?;
        let key = keyset.primary();
        stats.bytes_out = key
            .ciphertext_size(stats.bytes_in)
            .ok_or_else(|| Error::new(ErrorKind::Io, "input too large"))?;
        // Each segment carries one tag.
        let header = 1 + key.derived_key_size() as u64 + 7;
        stats.segments = (stats.bytes_out - stats.bytes_in - header) / 16;
        Ok((output, stats))
    })();
    wait_for_wipes();
    if let Ok((_, stats)) = &result {
        trace("encrypted", stats, started, feed.waited);
    }
    result
}

/// Decrypts `input` to `output`, trying the keyset's enabled keys (primary first) on the
/// first segment as Tink does; returns the output back. Only authenticated plaintext is
/// ever written, but a failure in a later segment comes after earlier segments were written:
/// callers writing to a file must discard it on error.
pub fn decrypt<W: Write>(
    keyset: &Keyset,
    aad: &[u8],
    input: impl Into<Input>,
    mut output: W,
    opts: &Options,
    progress: &dyn Fn(u64),
) -> Result<(W, Stats)> {
    let started = Instant::now();
    let mut feed = Feed::start(input.into())?;
    let result = (|| {
        let source = Pieces {
            feed: &mut feed,
            cur: None,
            pos: 0,
            failed: None,
            progress,
        };
        let keyset = keyset.clone().with_options(*opts);
        let mut r = keyset.decrypting_buf_reader(source, aad)?;
        // Holds plaintext: wiped when dropped.
        let mut plain = Zeroizing::new(vec![0u8; 64 << 10]);
        let mut bytes_out = 0u64;
        loop {
            let n = r.read(&mut plain).map_err(|e| run_error(e, true))?;
            if n == 0 {
                break;
            }
            output
                .write_all(&plain[..n])
                .map_err(|e| run_error(e, false))?;
            bytes_out += n as u64;
            if n == plain.len() && plain.len() < PIECE {
                // The old buffer is wiped as it is dropped.
                plain = Zeroizing::new(vec![0u8; plain.len() * 2]);
            }
        }
        output.flush().map_err(|e| run_error(e, false))?;
        Ok((output, bytes_out))
    })();
    wait_for_wipes();
    let result = result.map(|(output, bytes_out)| {
        let header = u64::from(feed.first.unwrap_or(0));
        let stats = Stats {
            bytes_in: feed.bytes_in,
            bytes_out,
            // Each segment carries one tag.
            segments: (feed.bytes_in - header - bytes_out) / 16,
        };
        (output, stats)
    });
    if let Ok((_, stats)) = &result {
        trace("decrypted", stats, started, feed.waited);
    }
    result
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Seek, SeekFrom};

    use gcmx_stream::{Backend, ErrorKind as StreamKind, StreamingKey};

    use super::*;

    fn keyset(dks: usize, seg: u32) -> Keyset {
        Keyset::from(StreamingKey::new(1, &vec![7u8; dks], dks, seg).unwrap())
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 131 + i / 251) as u8).collect()
    }

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        // A regular file is read from its start whatever its cursor.
        f.seek(SeekFrom::Start(bytes.len() as u64 / 2)).unwrap();
        f
    }

    /// The kind of a failed run: the library's for a stream that was refused.
    fn kind(e: &Error) -> StreamKind {
        match e.kind() {
            ErrorKind::Stream(k) => k,
            other => panic!("not a stream error: {other:?} {e}"),
        }
    }

    fn dec_one(ks: &Keyset, aad: &[u8], input: Input, window_bytes: usize) -> Result<Vec<u8>> {
        let opts = Options::default().with_window_bytes(window_bytes);
        decrypt(ks, aad, input, Vec::new(), &opts, &|_| {}).map(|(v, _)| v)
    }

    /// Encrypts through a stream and a file input: ciphertexts of the same length, which the
    /// adapters read back.
    fn enc(ks: &Keyset, aad: &[u8], pt: &[u8], opts: &Options) -> Vec<u8> {
        let input = Input::reader(Cursor::new(pt.to_vec()));
        let (out, stats) = encrypt(ks, aad, input, Vec::new(), opts, &|_| {}).unwrap();
        assert_eq!(stats.bytes_in, pt.len() as u64);
        assert_eq!(stats.bytes_out, out.len() as u64);
        let (via_file, fstats) =
            encrypt(ks, aad, file_with(pt), Vec::new(), opts, &|_| {}).unwrap();
        assert_eq!(fstats, stats);
        assert_eq!(via_file.len(), out.len());
        let mut back = Vec::new();
        ks.decrypting_reader(&via_file[..], aad)
            .unwrap()
            .read_to_end(&mut back)
            .unwrap();
        assert!(back == pt);
        out
    }

    /// Decrypts through a stream and a file input (default and small windows): all agree, on
    /// the plaintext or on the kind of refusal, with the adapters.
    fn dec(ks: &Keyset, aad: &[u8], ct: &[u8]) -> Result<Vec<u8>> {
        let stream = dec_one(ks, aad, Input::reader(Cursor::new(ct.to_vec())), 0);
        let seg = ks.primary().segment_size() as usize;
        for window in [0, (3 * seg).min(gcmx_stream::MAX_WINDOW_BYTES)] {
            let file = dec_one(ks, aad, Input::File(file_with(ct)), window);
            match (&stream, &file) {
                (Ok(a), Ok(b)) => assert!(a == b, "paths disagree on {} bytes", a.len()),
                (Err(a), Err(b)) => assert_eq!(a.kind(), b.kind(), "{a} / {b}"),
                _ => panic!(
                    "stream and file paths disagree: {:?} / {:?}",
                    stream.as_ref().map(Vec::len),
                    file.as_ref().map(Vec::len)
                ),
            }
        }
        let mut adapter = Vec::new();
        let read = ks
            .decrypting_reader(ct, aad)
            .map_err(io::Error::from)
            .and_then(|mut r| r.read_to_end(&mut adapter));
        assert_eq!(
            read.is_ok(),
            stream.is_ok(),
            "the adapter and the pipeline disagree"
        );
        stream
    }

    #[test]
    fn round_trip_sizes_and_windows() {
        for (dks, seg) in [(16usize, 41u32), (16, 64), (32, 100), (32, 4096)] {
            let ks = keyset(dks, seg);
            let key = ks.primary();
            let p0 = seg as usize - (1 + dks + 7) - 16;
            let p = seg as usize - 16;
            for n in [
                0,
                1,
                p0 - 1,
                p0,
                p0 + 1,
                p0 + p,
                p0 + 2 * p,
                p0 + 2 * p + 3,
                10 * p + 7,
            ] {
                for window_bytes in [1usize, 3 * seg as usize, 1 << 20] {
                    let opts = Options::default()
                        .with_backend(Backend::CpuParallel)
                        .with_window_bytes(window_bytes);
                    let pt = data(n);
                    let ct = enc(&ks, b"aad", &pt, &opts);
                    assert_eq!(
                        ct.len() as u64,
                        key.ciphertext_size(n as u64).unwrap(),
                        "dks {dks} seg {seg} n {n}"
                    );
                    assert_eq!(usize::from(ct[0]), 1 + dks + 7);
                    assert_eq!(dec(&ks, b"aad", &ct).unwrap(), pt);
                    let (_, stats) = decrypt(
                        &ks,
                        b"aad",
                        Input::reader(Cursor::new(ct.clone())),
                        Vec::new(),
                        &opts,
                        &|_| {},
                    )
                    .unwrap();
                    let segments = if n <= p0 { 1 } else { 1 + (n - p0).div_ceil(p) };
                    assert_eq!(stats.segments, segments as u64, "n {n}");
                    assert_eq!(stats.bytes_in, ct.len() as u64);
                }
            }
        }
    }

    #[test]
    fn refusals() {
        let ks = keyset(16, 64);
        let (hl, first) = (24, 64 - 24);
        let pt = data(200);
        let ct = enc(&ks, b"a", &pt, &Options::default());
        let k = |r: Result<Vec<u8>>| kind(&r.unwrap_err());
        assert_eq!(k(dec(&ks, b"b", &ct)), StreamKind::Authentication);
        let other = Keyset::from(StreamingKey::new(1, &[9u8; 16], 16, 64).unwrap());
        assert_eq!(k(dec(&other, b"a", &ct)), StreamKind::Authentication);
        assert_eq!(k(dec(&ks, b"a", &[])), StreamKind::Format);
        assert_eq!(k(dec(&ks, b"a", &ct[..hl])), StreamKind::Format);
        assert_eq!(k(dec(&ks, b"a", &ct[..5])), StreamKind::Format);
        assert_eq!(k(dec(&ks, b"a", &ct[..hl + 15])), StreamKind::Format);
        // Truncated at a segment boundary: the new last segment was sealed as not-last.
        assert_eq!(
            k(dec(&ks, b"a", &ct[..hl + first + 64])),
            StreamKind::Authentication
        );
        // Truncated inside a segment.
        assert_eq!(
            k(dec(&ks, b"a", &ct[..ct.len() - 1])),
            StreamKind::Authentication
        );
        // Trailing data: shorter than a tag (two faults: the last segment, now full, does not
        // open, and what follows it is shorter than a tag; a read meets either first), then
        // longer.
        let mut longer = ct.clone();
        longer.extend_from_slice(&[0; 20]);
        let e = k(dec(&ks, b"a", &longer));
        assert!(
            matches!(e, StreamKind::Format | StreamKind::Authentication),
            "{e:?}"
        );
        longer.extend_from_slice(&[0; 20]);
        assert_eq!(k(dec(&ks, b"a", &longer)), StreamKind::Authentication);
        let mut bad = ct.clone();
        bad[0] = 40;
        assert_eq!(k(dec(&ks, b"a", &bad)), StreamKind::Format);
        for i in 0..ct.len() {
            let mut t = ct.clone();
            t[i] ^= 0x01;
            assert!(dec(&ks, b"a", &t).is_err(), "flip at {i} undetected");
        }
        // Two full middle segments swapped.
        let s1 = hl + first;
        let mut sw = ct.clone();
        let (a, b) = sw[s1..s1 + 128].split_at_mut(64);
        a.swap_with_slice(b);
        assert_eq!(k(dec(&ks, b"a", &sw)), StreamKind::Authentication);
    }

    #[test]
    fn largest_segments_need_memory_only_for_the_data() {
        // 2^31 - 1 byte segments: windows start small and grow with the data.
        let ks = keyset(32, gcmx_stream::MAX_SEGMENT_SIZE);
        for window_bytes in [0, 1 << 30] {
            let opts = Options::default().with_window_bytes(window_bytes);
            let pt = data(300_000);
            let ct = enc(&ks, b"", &pt, &opts);
            assert_eq!(ct.len(), 300_000 + 40 + 16);
            assert_eq!(dec(&ks, b"", &ct).unwrap(), pt);
        }
    }

    /// Endless bytes; the `Arc` counts the holders of the input, so the test can see whether
    /// the reader thread (which owns it) has ended.
    struct Endless(#[allow(dead_code)] Arc<()>);

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            buf.fill(0x5a);
            Ok(buf.len())
        }
    }

    #[derive(Debug)]
    struct Failing;

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::other("no room"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn no_thread_outlives_a_run_that_failed_early() {
        let ks = keyset(16, 64);
        let header = {
            let mut w = ks.encrypting_writer(Vec::new(), b"").unwrap();
            w.write_all(&[0u8; 10]).unwrap();
            w.finish().unwrap()[..24].to_vec()
        };
        let opts = Options::default().with_window_bytes(4 * 64);
        // Decrypt: a good header, then endless garbage (the first window fails).
        let alive = Arc::new(());
        let input = Cursor::new(header).chain(Endless(alive.clone()));
        let r = decrypt(&ks, b"", Input::reader(input), Vec::new(), &opts, &|_| {});
        assert_eq!(kind(&r.unwrap_err()), StreamKind::Authentication);
        assert_eq!(Arc::strong_count(&alive), 1, "the reader still runs");
        // Encrypt: endless input, an output that fails.
        let r = encrypt(
            &ks,
            b"",
            Input::reader(Endless(alive.clone())),
            Failing,
            &opts,
            &|_| {},
        );
        let e = r.unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Io | ErrorKind::Stream(StreamKind::Io)),
            "{e}"
        );
        assert_eq!(Arc::strong_count(&alive), 1, "the reader still runs");
    }

    #[test]
    fn a_stalled_pipe_does_not_keep_a_failed_run_waiting() {
        // A bad first segment from a pipe whose writer stays open without writing more: the
        // error comes back, and the reader thread ends, without waiting for the writer.
        let ks = keyset(16, 64);
        let header = {
            let mut w = ks.encrypting_writer(Vec::new(), b"").unwrap();
            w.write_all(&[0u8; 10]).unwrap();
            w.finish().unwrap()[..24].to_vec()
        };
        let (rd, wr) = nix::unistd::pipe().unwrap();
        let mut wr = File::from(wr);
        wr.write_all(&header).unwrap();
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        wr.write_all(&vec![0u8; 64 * (cores + 1) + 72]).unwrap();
        let opts = Options::default().with_window_bytes(64);
        let (tx, rx) = std::sync::mpsc::channel();
        let ks2 = ks.clone();
        thread::spawn(move || {
            let input = Input::Pipe(File::from(rd));
            let r = decrypt(&ks2, b"", input, Vec::new(), &opts, &|_| {});
            let _ = tx.send(r.map(|_| ()));
        });
        let r = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("decrypt() still waits for the pipe");
        assert_eq!(kind(&r.unwrap_err()), StreamKind::Authentication);
        drop(wr);
    }

    #[test]
    fn multi_key_keysets_decrypt_with_any_enabled_key() {
        let old = StreamingKey::new(11, &[1u8; 16], 16, 64).unwrap();
        let new = StreamingKey::new(12, &[2u8; 32], 32, 100).unwrap();
        let other = StreamingKey::new(13, &[3u8; 16], 16, 200).unwrap();
        let opts = Options::default();
        let ct_old = enc(&Keyset::from(old.clone()), b"x", &data(500), &opts);
        let ct_other = enc(&Keyset::from(other.clone()), b"x", &data(5), &opts);
        let ks = Keyset::new(1, vec![old, new, other]).unwrap();
        assert_eq!(dec(&ks, b"x", &ct_old).unwrap(), data(500));
        assert_eq!(dec(&ks, b"x", &ct_other).unwrap(), data(5));
        assert_eq!(
            kind(&dec(&ks, b"y", &ct_other).unwrap_err()),
            StreamKind::Authentication
        );
    }

    /// What the pipeline writes, every adapter reads, and what every adapter writes (in pieces
    /// of any size), the pipeline reads.
    #[test]
    fn the_pipeline_and_the_adapters_read_each_others_output() {
        for (dks, seg) in [(16usize, 41u32), (32, 100), (32, 4096)] {
            let ks = keyset(dks, seg);
            for n in [0usize, 1, 500, 9 * seg as usize + 5] {
                let pt = data(n);
                let ct = enc(&ks, b"aad", &pt, &Options::default());
                let mut back = Vec::new();
                ks.seekable_reader(Cursor::new(&ct), b"aad")
                    .unwrap()
                    .read_to_end(&mut back)
                    .unwrap();
                assert!(back == pt);
                back.clear();
                ks.decrypting_buf_reader(&ct[..], b"aad")
                    .unwrap()
                    .read_to_end(&mut back)
                    .unwrap();
                assert!(back == pt);
                for piece in [1usize, 7, seg as usize, n.max(1)] {
                    let mut w = ks.encrypting_writer(Vec::new(), b"aad").unwrap();
                    for c in pt.chunks(piece) {
                        w.write_all(c).unwrap();
                    }
                    let ct = w.finish().unwrap();
                    assert_eq!(dec(&ks, b"aad", &ct).unwrap(), pt);
                }
            }
        }
    }
}
