//! Whole streams and files from a reader to a writer, with reading, crypto and writing
//! overlapped: what the `gcmx` command runs. The [`Read`]/[`Write`] adapters are the
//! general API; this is for moving a whole input to an output as fast as the disk allows.
//!
//! ```
//! use gcmx_stream::{Keyset, KeySize, Options, bulk};
//! let keyset = Keyset::generate(KeySize::Aes256, 64 << 10)?;
//! let plain = vec![7u8; 300_000];
//! let input = bulk::Input::reader(std::io::Cursor::new(plain.clone()));
//! let (ct, _) = bulk::encrypt(&keyset, b"aad", input, Vec::new(), &Options::new(), &|_| {})?;
//! let input = bulk::Input::reader(std::io::Cursor::new(ct));
//! let (back, stats) = bulk::decrypt(&keyset, b"aad", input, Vec::new(), &Options::new(), &|_| {})?;
//! assert_eq!(back, plain);
//! assert_eq!(stats.segments, 5);
//! # Ok::<(), gcmx_stream::Error>(())
//! ```
//!
//! Three threads overlap the work: a reader fills windows of whole segments, the calling
//! thread seals or opens each window with one [`gcmx::Gcm::encrypt_batch`] /
//! [`gcmx::Gcm::decrypt_batch`] call (segments in parallel on CPU threads or as one GPU batch),
//! and a writer drains it. A fixed pool of windows circulates between them, so memory is
//! four windows whatever the input size. The reader knows which segment is the last one by
//! looking one byte ahead, so the last-segment flag is always exact: a decryption never
//! tries both flags.
//!
//! [`encrypt`] and [`decrypt`] return only after their threads have ended, also after an
//! early error: the reader stops at its next read (reads of standard input, pipes and FIFOs
//! wait in slices of at most 100 ms, so they stop promptly even when no data comes; a
//! [`Read`] given as [`Input::Stream`] is stopped between its `read` calls).

use std::fs::File;
use std::io::{self, BufRead, IoSlice, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;
use std::time::Instant;

use crate::engine::{Backend, Engine};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{Header, Layout, TAG_LEN};
use crate::header::read_header;
use crate::keyset::Keyset;
use crate::options::{Options, Use};
use crate::window::{Seg, Window, open_window, read_growing, seal_window};
use crate::wipe::{WipingBufReader, WipingBufWriter, wipe_stacks_and_wait};

/// Windows in circulation (reading, queued, crypto, writing).
const POOL: usize = 4;

/// Where the time goes, for `GCMX_TRACE=1` (one line on standard error per run).
#[derive(Default)]
struct Trace {
    read_ns: AtomicU64,
    write_ns: AtomicU64,
}

fn trace_enabled() -> bool {
    std::env::var_os("GCMX_TRACE").is_some_and(|v| !v.is_empty() && v != "0")
}

fn add_since(counter: &AtomicU64, t: Instant) {
    counter.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

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

/// The engine for one file key: the library's own choice for `Backend::Auto`.
pub(crate) fn make_engine(key: &[u8], backend: Backend) -> Result<Engine> {
    let t = Instant::now();
    let engine = Engine::new(key, backend);
    if trace_enabled() {
        eprintln!(
            "gcmx trace: engine setup {:.1} ms ({})",
            t.elapsed().as_secs_f64() * 1e3,
            engine.as_ref().map_or("failed", |e| e.engine_name())
        );
    }
    engine
}

fn at_eof(r: &mut impl BufRead) -> io::Result<bool> {
    loop {
        match r.fill_buf() {
            Ok(b) => return Ok(b.is_empty()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Seal,
    Open,
}

type Stream = Box<dyn Read + Send>;

/// What the pipeline reads.
pub enum Input {
    /// Any byte stream, read sequentially. The run stops it between `read` calls, so a
    /// `read` that blocks delays the end of the run until it returns; give pipes and FIFOs as
    /// [`Input::Pipe`] instead.
    Stream(Box<dyn Read + Send>),
    /// A file: a regular file is read whole, from its start whatever its cursor, with
    /// positioned reads from several threads; anything else (a FIFO, a character device) is
    /// read as an [`Input::Pipe`].
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

    /// Standard input, read as an [`Input::Pipe`] through its own descriptor.
    pub fn stdin() -> io::Result<Input> {
        use std::os::fd::AsFd;
        let fd = io::stdin().as_fd().try_clone_to_owned()?;
        Ok(Input::Pipe(File::from(fd)))
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

/// A set-once flag that tells the reader to stop.
#[derive(Clone, Default)]
struct Stop(Arc<AtomicBool>);

impl Stop {
    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    fn check(&self) -> io::Result<()> {
        if self.is_set() {
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

/// Where the reader thread reads from.
enum Feed {
    Stream(WipingBufReader<Stream>),
    /// A regular file of `len` bytes (when opened), read from `base` on.
    #[cfg(unix)]
    File {
        file: File,
        base: u64,
        len: u64,
    },
}

impl Input {
    /// A regular file as (file, length); anything else as a stream that stops with `stop`.
    fn split(self, stop: &Stop) -> std::result::Result<(File, u64), Stream> {
        let pipe = |file: File| -> Stream {
            Box::new(PollReader {
                file,
                stop: stop.clone(),
            })
        };
        match self {
            Input::Stream(s) => Err(Box::new(Stoppable {
                inner: s,
                stop: stop.clone(),
            })),
            Input::Pipe(f) => Err(pipe(f)),
            Input::File(f) => match f.metadata() {
                Ok(m) if m.is_file() && cfg!(unix) => Ok((f, m.len())),
                _ => Err(pipe(f)),
            },
        }
    }
}

/// Sequential reads of a file by position, from `pos` on (its cursor is not used).
struct PosReader<'a> {
    file: &'a File,
    pos: u64,
}

impl Read for PosReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            let n = self.file.read_at(buf, self.pos)?;
            self.pos += n as u64;
            Ok(n)
        }
        #[cfg(not(unix))]
        {
            let mut f = self.file;
            f.read(buf)
        }
    }
}

/// Threads that read one window of a regular file.
fn file_readers() -> usize {
    let threads = thread::available_parallelism().map_or(1, |p| p.get());
    (threads / 4).clamp(2, 4)
}

/// Reads at `pos` until `buf` is full or the file ends.
#[cfg(unix)]
fn pread_full(file: &File, buf: &mut [u8], mut pos: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], pos) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                pos += k as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(unix)]
fn changed() -> Error {
    Error::new(
        ErrorKind::Io,
        "cannot read input: the file changed size while being read",
    )
}

/// Fills `w` with the next segments of a regular file, reading pieces of it on several
/// threads; returns whether the last segment is in this window. The file's end is found by
/// a one-byte probe after the planned bytes, so the last-segment flag is exact here too.
#[cfg(unix)]
#[allow(clippy::too_many_arguments)]
fn fill_from_file(
    file: &File,
    len: u64,
    pos: &mut u64,
    index: &mut u64,
    layout: &Layout,
    mode: Mode,
    per_window: usize,
    w: &mut Window,
) -> Result<bool> {
    struct Plan {
        off: usize,
        want: usize,
        room: usize,
        fpos: u64,
    }
    let mut plan: Vec<Plan> = Vec::with_capacity(per_window);
    let (mut off, mut fpos) = (0usize, *pos);
    for j in 0..per_window as u64 {
        let idx = *index + j;
        if idx > u64::from(u32::MAX) {
            if j == 0 {
                return Err(Error::format(match mode {
                    Mode::Seal => "input too large: it needs more than 2^32 segments of this size",
                    Mode::Open => "ciphertext has more than 2^32 segments",
                }));
            }
            break;
        }
        if j > 0 && fpos >= len {
            break;
        }
        let want = match mode {
            Mode::Seal => layout.plaintext_len(idx),
            Mode::Open => layout.ciphertext_len(idx),
        };
        let room = usize::try_from(len.saturating_sub(fpos)).map_or(want, |r| r.min(want));
        plan.push(Plan {
            off,
            want,
            room,
            fpos,
        });
        off += room + if mode == Mode::Seal { TAG_LEN } else { 0 };
        fpos += room as u64;
        if room < want {
            break;
        }
    }
    w.buf
        .grow(off)
        .map_err(|e| Error::io("cannot read input", e))?;
    w.high_water = w.high_water.max(off);

    // Cut the planned bytes into pieces of at most 4 MiB and read them on several threads.
    const PIECE: usize = 4 << 20;
    let mut pieces: Vec<(&mut [u8], u64)> = Vec::new();
    let mut rest: &mut [u8] = &mut w.buf[..off];
    let mut cursor = 0usize;
    for p in &plan {
        let (_, tail) = rest.split_at_mut(p.off - cursor);
        let (mut seg, tail) = tail.split_at_mut(p.room);
        rest = tail;
        cursor = p.off + p.room;
        let mut at = p.fpos;
        while !seg.is_empty() {
            let k = seg.len().min(PIECE);
            let (head, tail) = seg.split_at_mut(k);
            pieces.push((head, at));
            at += k as u64;
            seg = tail;
        }
    }
    let readers = file_readers().min(pieces.len()).max(1);
    let read_all = |group: &mut [(&mut [u8], u64)]| -> io::Result<bool> {
        let mut full = true;
        for (buf, at) in group.iter_mut() {
            full &= pread_full(file, buf, *at)? == buf.len();
        }
        Ok(full)
    };
    let full = if readers == 1 {
        read_all(&mut pieces)
    } else {
        let per = pieces.len().div_ceil(readers);
        thread::scope(|s| {
            let handles: Vec<_> = pieces
                .chunks_mut(per)
                .map(|g| s.spawn(move || read_all(g)))
                .collect();
            let mut all = Ok(true);
            for h in handles {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("a reader thread panicked")));
                all = match (all, r) {
                    (Ok(a), Ok(b)) => Ok(a && b),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                };
            }
            all
        })
    }
    .map_err(|e| Error::io("cannot read input", e))?;
    if !full {
        return Err(changed());
    }

    // Is the file's end right after the planned bytes?
    let Some(lastp) = plan.last() else {
        return Err(changed());
    };
    let end = lastp.fpos + lastp.room as u64;
    let mut probe = [0u8; 1];
    let at_end =
        pread_full(file, &mut probe, end).map_err(|e| Error::io("cannot read input", e))? == 0;
    let done = if lastp.room < lastp.want {
        if !at_end {
            return Err(changed());
        }
        true
    } else {
        at_end
    };
    let count = plan.len();
    for (j, p) in plan.iter().enumerate() {
        let last = done && j + 1 == count;
        let seg_len = match mode {
            Mode::Seal => p.room + TAG_LEN,
            Mode::Open => {
                if p.room < TAG_LEN {
                    return Err(Error::format(if *index == 0 && p.room == 0 {
                        "ciphertext is truncated: it has a header but no segment"
                    } else {
                        "ciphertext is truncated: last segment is shorter than a tag"
                    }));
                }
                p.room
            }
        };
        w.segs.push(Seg {
            off: p.off,
            len: seg_len,
            last,
        });
        w.bytes_in += p.room as u64;
    }
    *index += count as u64;
    *pos = end;
    Ok(done)
}

/// The reader thread for a regular file.
#[cfg(unix)]
#[allow(clippy::too_many_arguments)]
fn file_reader_loop(
    file: File,
    base: u64,
    len: u64,
    layout: Layout,
    mode: Mode,
    per_window: usize,
    free: Receiver<Window>,
    out: SyncSender<Result<Window>>,
    trace: Arc<Trace>,
    stop: Stop,
) {
    let (mut pos, mut index) = (base, 0u64);
    loop {
        let Ok(mut w) = free.recv() else { return };
        if stop.is_set() {
            return;
        }
        w.segs.clear();
        w.first_index = index;
        w.bytes_in = 0;
        let t = Instant::now();
        let res = fill_from_file(
            &file, len, &mut pos, &mut index, &layout, mode, per_window, &mut w,
        );
        add_since(&trace.read_ns, t);
        match res {
            Ok(done) => {
                if out.send(Ok(w)).is_err() || done {
                    return;
                }
            }
            Err(e) => {
                let _ = out.send(Err(e));
                return;
            }
        }
    }
}

/// The reader thread: fills windows from the free pool and sends them on.
#[allow(clippy::too_many_arguments)]
fn reader_loop(
    mut input: WipingBufReader<Stream>,
    layout: Layout,
    mode: Mode,
    per_window: usize,
    free: Receiver<Window>,
    out: SyncSender<Result<Window>>,
    trace: Arc<Trace>,
) {
    let mut index: u64 = 0;
    loop {
        let Ok(mut w) = free.recv() else { return };
        w.segs.clear();
        w.first_index = index;
        w.bytes_in = 0;
        let mut off = 0usize;
        let mut done = false;
        let res: Result<()> = (|| {
            while w.segs.len() < per_window {
                if index > u64::from(u32::MAX) {
                    return Err(Error::format(match mode {
                        Mode::Seal => {
                            "input too large: it needs more than 2^32 segments of this size"
                        }
                        Mode::Open => "ciphertext has more than 2^32 segments",
                    }));
                }
                let want = match mode {
                    Mode::Seal => layout.plaintext_len(index),
                    Mode::Open => layout.ciphertext_len(index),
                };
                w.high_water = w.high_water.max(off + want);
                let t = Instant::now();
                let n = read_growing(&mut input, w.buf.vec(), off, want)
                    .map_err(|e| Error::io("cannot read input", e))?;
                let last = n < want
                    || at_eof(&mut input).map_err(|e| Error::io("cannot read input", e))?;
                add_since(&trace.read_ns, t);
                w.bytes_in += n as u64;
                let len = match mode {
                    Mode::Seal => n + TAG_LEN,
                    Mode::Open => {
                        if n < TAG_LEN {
                            return Err(Error::format(if index == 0 && n == 0 {
                                "ciphertext is truncated: it has a header but no segment"
                            } else {
                                "ciphertext is truncated: last segment is shorter than a tag"
                            }));
                        }
                        n
                    }
                };
                // Room for the tag after a full plaintext.
                w.buf
                    .grow(off + len)
                    .map_err(|e| Error::io("cannot read input", e))?;
                w.high_water = w.high_water.max(off + len);
                w.segs.push(Seg { off, len, last });
                off += len;
                index += 1;
                if last {
                    done = true;
                    break;
                }
            }
            Ok(())
        })();
        match res {
            Ok(()) => {
                if out.send(Ok(w)).is_err() || done {
                    return;
                }
            }
            Err(e) => {
                let _ = out.send(Err(e));
                return;
            }
        }
    }
}

/// The writer thread: writes `prefix`, then each window's output, and recycles windows.
fn writer_loop<W: Write>(
    output: W,
    prefix: Vec<u8>,
    mode: Mode,
    windows: Receiver<Window>,
    free: SyncSender<Window>,
    trace: Arc<Trace>,
) -> io::Result<(W, u64)> {
    // Its buffer holds plaintext when decrypting: wiped when it is dropped, on every path.
    let mut out = WipingBufWriter::with_capacity(1 << 20, output);
    out.write_all(&prefix)?;
    let mut written = prefix.len() as u64;
    for w in windows {
        let t = Instant::now();
        match mode {
            Mode::Seal => {
                let end = w.end();
                out.write_all(&w.buf[..end])?;
                written += end as u64;
            }
            Mode::Open => {
                // The plaintexts, without their tags, in as few system calls as possible.
                let mut slices: Vec<IoSlice<'_>> = w
                    .segs
                    .iter()
                    .map(|s| IoSlice::new(&w.buf[s.off..s.off + s.len - TAG_LEN]))
                    .collect();
                let mut rest = &mut slices[..];
                IoSlice::advance_slices(&mut rest, 0);
                while !rest.is_empty() {
                    match out.write_vectored(rest) {
                        Ok(0) => {
                            return Err(io::Error::new(
                                io::ErrorKind::WriteZero,
                                "failed to write the whole output",
                            ));
                        }
                        Ok(n) => {
                            written += n as u64;
                            IoSlice::advance_slices(&mut rest, n);
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        add_since(&trace.write_ns, t);
        // The reader may be gone (it finished); then the window is simply dropped.
        let _ = free.send(w);
    }
    let inner = out.finish()?;
    Ok((inner, written))
}

/// Runs the three-thread pipeline. `crypt` runs on the calling thread for every window.
/// Returns once the reader and the writer have ended.
#[allow(clippy::too_many_arguments)]
fn run_pipeline<W: Write + Send + 'static>(
    input: Feed,
    stop: Stop,
    output: W,
    prefix: Vec<u8>,
    layout: Layout,
    mode: Mode,
    per_window: usize,
    progress: &dyn Fn(u64),
    mut crypt: impl FnMut(&mut Window) -> Result<()>,
) -> Result<(W, Stats)> {
    // Windows start empty and grow with the data (at most one window of segments each).
    let (free_tx, free_rx) = sync_channel::<Window>(POOL);
    for _ in 0..POOL {
        // The channel has room for the whole pool.
        let _ = free_tx.send(Window::new());
    }
    let trace = Arc::new(Trace::default());
    let (reader_trace, writer_trace) = (trace.clone(), trace.clone());
    let started = Instant::now();
    let (read_tx, read_rx) = sync_channel::<Result<Window>>(1);
    let (write_tx, write_rx) = sync_channel::<Window>(1);

    let reader_stop = stop.clone();
    let reader = thread::Builder::new()
        .name("gcmx-reader".into())
        .spawn(move || match input {
            Feed::Stream(r) => {
                reader_loop(r, layout, mode, per_window, free_rx, read_tx, reader_trace)
            }
            #[cfg(unix)]
            Feed::File { file, base, len } => file_reader_loop(
                file,
                base,
                len,
                layout,
                mode,
                per_window,
                free_rx,
                read_tx,
                reader_trace,
                reader_stop,
            ),
        })
        .map_err(|e| Error::io("cannot start the reader thread", e))?;
    let writer = match thread::Builder::new()
        .name("gcmx-writer".into())
        .spawn(move || writer_loop(output, prefix, mode, write_rx, free_tx, writer_trace))
    {
        Ok(w) => w,
        Err(e) => {
            stop.set();
            drop(read_rx);
            let _ = reader.join();
            return Err(Error::io("cannot start the writer thread", e));
        }
    };

    let mut stats = Stats::default();
    let mut saw_last = false;
    let mut failure: Option<Error> = None;
    let (mut crypt_ns, mut starved_ns, mut batches) = (0u128, 0u128, 0u64);
    let mut waited = Instant::now();
    for msg in read_rx.iter() {
        starved_ns += waited.elapsed().as_nanos();
        let mut w = match msg {
            Ok(w) => w,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        let t = Instant::now();
        let res = crypt(&mut w);
        crypt_ns += t.elapsed().as_nanos();
        batches += 1;
        if let Err(e) = res {
            failure = Some(e);
            break;
        }
        stats.bytes_in += w.bytes_in;
        stats.segments += w.segs.len() as u64;
        progress(w.bytes_in);
        saw_last = w.segs.last().is_some_and(|s| s.last);
        if write_tx.send(w).is_err() {
            // The writer stopped; its error is reported below.
            break;
        }
        if saw_last {
            break;
        }
        waited = Instant::now();
    }
    // Stop the reader (it may be waiting for input), close the channels, and wait for both
    // threads: nothing of this run outlives it.
    stop.set();
    drop(read_rx);
    drop(write_tx);
    let written = writer.join();
    let read = reader.join();
    let written = written.map_err(|_| Error::new(ErrorKind::Io, "the writer thread panicked"))?;
    read.map_err(|_| Error::new(ErrorKind::Io, "the reader thread panicked"))?;
    if trace_enabled() {
        let ms = |ns: u128| ns as f64 / 1e6;
        eprintln!(
            "gcmx trace: {} MB in {:.1} ms; reader busy {:.1} ms, crypto {:.1} ms in {batches} batches of up to {per_window} segments (waiting for input {:.1} ms), writer busy {:.1} ms",
            stats.bytes_in / 1_000_000,
            ms(started.elapsed().as_nanos()),
            ms(u128::from(trace.read_ns.load(Ordering::Relaxed))),
            ms(crypt_ns),
            ms(starved_ns),
            ms(u128::from(trace.write_ns.load(Ordering::Relaxed))),
        );
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let (output, bytes_out) = written.map_err(write_error)?;
    if !saw_last {
        return Err(Error::new(ErrorKind::Io, "input ended unexpectedly"));
    }
    stats.bytes_out = bytes_out;
    Ok((output, stats))
}

/// A failed write, with the two causes people meet named plainly.
fn write_error(e: io::Error) -> Error {
    #[cfg(unix)]
    if e.raw_os_error() == Some(nix::libc::EFBIG) {
        return Error::new(
            ErrorKind::Io,
            format!("cannot write output: the file size limit was reached (ulimit -f) ({e})"),
        );
    }
    if e.kind() == io::ErrorKind::BrokenPipe {
        return Error::new(
            ErrorKind::Io,
            format!("cannot write output: the reading end was closed ({e})"),
        );
    }
    Error::io("cannot write output", e)
}

/// Encrypts `input` to `output` with the keyset's primary key; returns the output back.
pub fn encrypt<W: Write + Send + 'static>(
    keyset: &Keyset,
    aad: &[u8],
    input: impl Into<Input>,
    output: W,
    opts: &Options,
    progress: &dyn Fn(u64),
) -> Result<(W, Stats)> {
    let stop = Stop::default();
    let (feed, size) = feed_from(input.into(), 0, &stop);
    let key = keyset.primary();
    let layout = key.layout();
    let per_window = opts.window_segments(&layout, size, Use::Bulk)?;
    let header = Header::random(&layout)?;
    let file_key = key.stream_key(&header, aad)?;
    let gcm = make_engine(&file_key, opts.backend())?;
    drop(file_key);
    let prefix = header.nonce_prefix;
    let result = run_pipeline(
        feed,
        stop,
        output,
        header.to_bytes(),
        layout,
        Mode::Seal,
        per_window,
        progress,
        |w| seal_window(&gcm, &prefix, w),
    );
    drop(gcm);
    wipe_stacks_and_wait();
    result
}

/// A regular file as a positioned feed from `base`, anything else as a buffered stream that
/// stops with `stop`; with the file's size when known.
fn feed_from(input: Input, base: u64, stop: &Stop) -> (Feed, Option<u64>) {
    match input.split(stop) {
        #[cfg(unix)]
        Ok((file, len)) => (Feed::File { file, base, len }, Some(len)),
        #[cfg(not(unix))]
        Ok((file, len)) => (
            Feed::Stream(WipingBufReader::with_capacity(64 << 10, Box::new(file))),
            Some(len),
        ),
        Err(s) => (
            Feed::Stream(WipingBufReader::with_capacity(64 << 10, s)),
            None,
        ),
    }
}

/// Decrypts `input` to `output`, trying the keyset's enabled keys (primary first) on the
/// first segment as Tink does; returns the output back. Only authenticated plaintext is
/// ever written, but a failure in a later segment comes after earlier segments were written:
/// callers writing to a file must discard it on error.
pub fn decrypt<W: Write + Send + 'static>(
    keyset: &Keyset,
    aad: &[u8],
    input: impl Into<Input>,
    output: W,
    opts: &Options,
    progress: &dyn Fn(u64),
) -> Result<(W, Stats)> {
    let stop = Stop::default();
    let (key, header, hl, feed, size) = match input.into().split(&stop) {
        Ok((file, len)) => {
            // The whole file, whatever its cursor: the header, then segments by position.
            let (key, header, hl, _) = read_header(
                &mut PosReader {
                    file: &file,
                    pos: 0,
                },
                keyset,
                aad,
            )?;
            let (feed, size) = feed_from(Input::File(file), hl as u64, &stop);
            (key, header, hl, feed, size.or(Some(len)))
        }
        Err(stream) => {
            let mut r = WipingBufReader::with_capacity(64 << 10, stream);
            let (key, header, hl, head) = read_header(&mut r, keyset, aad)?;
            let r = match head {
                None => r,
                Some(h) => {
                    let chained: Stream = Box::new(io::Cursor::new(h).chain(r));
                    WipingBufReader::with_capacity(64 << 10, chained)
                }
            };
            (key, header, hl, Feed::Stream(r), None)
        }
    };
    progress(hl as u64);
    let layout = key.layout();
    let per_window = opts.window_segments(&layout, size, Use::Bulk)?;
    let file_key = key.stream_key(&header, aad)?;
    let gcm = make_engine(&file_key, opts.backend())?;
    drop(file_key);
    let prefix = header.nonce_prefix;
    let result = run_pipeline(
        feed,
        stop,
        output,
        Vec::new(),
        layout,
        Mode::Open,
        per_window,
        progress,
        |w| open_window(&gcm, &prefix, w),
    );
    drop(gcm);
    wipe_stacks_and_wait();
    let (out, mut stats) = result?;
    stats.bytes_in += hl as u64;
    Ok((out, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::segment_nonce;
    use crate::keyset::StreamingKey;

    fn keyset(dks: usize, seg: u32) -> Keyset {
        Keyset::single(StreamingKey::new(1, &vec![7u8; dks], dks, seg).unwrap())
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 131 + i / 251) as u8).collect()
    }

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    fn dec_one(ks: &Keyset, aad: &[u8], input: Input, window_bytes: usize) -> Result<Vec<u8>> {
        let opts = Options::new().with_window_bytes(window_bytes);
        decrypt(ks, aad, input, Vec::new(), &opts, &|_| {}).map(|(v, _)| v)
    }

    /// Encrypts through the stream path and checks that the file path (positioned parallel
    /// reads) produces a ciphertext of the same length that decrypts to the same plaintext.
    fn enc(ks: &Keyset, aad: &[u8], pt: &[u8], opts: &Options) -> Vec<u8> {
        let (out, stats) = encrypt(
            ks,
            aad,
            Input::reader(io::Cursor::new(pt.to_vec())),
            Vec::new(),
            opts,
            &|_| {},
        )
        .unwrap();
        assert_eq!(stats.bytes_in, pt.len() as u64);
        assert_eq!(stats.bytes_out, out.len() as u64);
        let (via_file, fstats) =
            encrypt(ks, aad, file_with(pt), Vec::new(), opts, &|_| {}).unwrap();
        assert_eq!(fstats.bytes_in, pt.len() as u64);
        assert_eq!(via_file.len(), out.len());
        assert_eq!(dec(ks, aad, &via_file).unwrap(), pt);
        out
    }

    /// Decrypts through the stream path and the file path (default and small windows); all
    /// must agree, on the plaintext or on the kind of refusal.
    fn dec(ks: &Keyset, aad: &[u8], ct: &[u8]) -> Result<Vec<u8>> {
        let stream = dec_one(ks, aad, Input::reader(io::Cursor::new(ct.to_vec())), 0);
        let seg = ks.primary().segment_size() as usize;
        for window in [0, (3 * seg).min(crate::MAX_WINDOW_BYTES)] {
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
        stream
    }

    #[test]
    fn round_trip_sizes_and_windows() {
        for (dks, seg) in [(16usize, 41u32), (16, 64), (32, 100), (32, 4096)] {
            let ks = keyset(dks, seg);
            let l = ks.primary().layout();
            let p0 = l.plaintext_len(0);
            let p = l.plaintext_len(1);
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
                    let opts = Options::new()
                        .with_backend(Backend::CpuParallel)
                        .with_window_bytes(window_bytes);
                    let pt = data(n);
                    let ct = enc(&ks, b"aad", &pt, &opts);
                    assert_eq!(
                        ct.len() as u64,
                        l.ciphertext_size(n as u64).unwrap(),
                        "dks {dks} seg {seg} n {n}"
                    );
                    assert_eq!(ct[0] as usize, l.header_len());
                    assert_eq!(dec(&ks, b"aad", &ct).unwrap(), pt);
                }
            }
        }
    }

    #[test]
    fn refusals() {
        let ks = keyset(16, 64);
        let l = ks.primary().layout();
        let pt = data(200);
        let ct = enc(&ks, b"a", &pt, &Options::default());
        let kind = |r: Result<Vec<u8>>| r.unwrap_err().kind();
        assert_eq!(kind(dec(&ks, b"b", &ct)), ErrorKind::Authentication);
        assert_eq!(
            kind(dec(
                &Keyset::single(StreamingKey::new(1, &[9u8; 16], 16, 64).unwrap()),
                b"a",
                &ct
            )),
            ErrorKind::Authentication
        );
        assert_eq!(kind(dec(&ks, b"a", &[])), ErrorKind::Format);
        assert_eq!(
            kind(dec(&ks, b"a", &ct[..l.header_len()])),
            ErrorKind::Format
        );
        assert_eq!(kind(dec(&ks, b"a", &ct[..5])), ErrorKind::Format);
        assert_eq!(
            kind(dec(&ks, b"a", &ct[..l.header_len() + 15])),
            ErrorKind::Format
        );
        // truncated at a segment boundary: the new last segment was sealed as not-last
        let cut = l.header_len() + l.ciphertext_len(0) + 64;
        assert_eq!(kind(dec(&ks, b"a", &ct[..cut])), ErrorKind::Authentication);
        // truncated inside a segment
        assert_eq!(
            kind(dec(&ks, b"a", &ct[..ct.len() - 1])),
            ErrorKind::Authentication
        );
        // trailing data
        let mut longer = ct.clone();
        longer.extend_from_slice(&[0; 20]); // the spill-over is shorter than a tag
        assert_eq!(kind(dec(&ks, b"a", &longer)), ErrorKind::Format);
        longer.extend_from_slice(&[0; 20]);
        assert_eq!(kind(dec(&ks, b"a", &longer)), ErrorKind::Authentication);
        // bad header length byte
        let mut bad = ct.clone();
        bad[0] = 40;
        assert_eq!(kind(dec(&ks, b"a", &bad)), ErrorKind::Format);
        // every single-byte change is caught
        for i in 0..ct.len() {
            let mut t = ct.clone();
            t[i] ^= 0x01;
            assert!(dec(&ks, b"a", &t).is_err(), "flip at {i} undetected");
        }
        // swapping two full middle segments
        let s1 = l.header_len() + l.ciphertext_len(0);
        let mut sw = ct.clone();
        let (a, b) = sw[s1..s1 + 128].split_at_mut(64);
        a.swap_with_slice(b);
        assert_eq!(kind(dec(&ks, b"a", &sw)), ErrorKind::Authentication);
    }

    #[test]
    fn largest_segments_need_memory_only_for_the_data() {
        // 2^31 - 1 byte segments: windows start small and grow with the data, so a small
        // input (of known or unknown size) needs little memory.
        let ks = keyset(32, crate::keyset::MAX_SEGMENT_SIZE);
        for window_bytes in [0, 1 << 30] {
            let opts = Options::new().with_window_bytes(window_bytes);
            let pt = data(300_000);
            let ct = enc(&ks, b"", &pt, &opts);
            assert_eq!(ct.len(), 300_000 + 40 + 16);
            assert_eq!(dec(&ks, b"", &ct).unwrap(), pt);
        }
        let mut buf = Vec::new();
        let n = read_growing(&mut io::Cursor::new(vec![1u8; 1000]), &mut buf, 10, 1 << 30).unwrap();
        assert_eq!(n, 1000);
        assert!(buf.len() < 1 << 20, "grew to {}", buf.len());
        assert_eq!(&buf[10..1010], &[1u8; 1000][..]);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_that_changes_size_while_read_is_an_error() {
        let ks = keyset(16, 64);
        let layout = ks.primary().layout();
        let file = file_with(&data(1000));
        let fill = |len: u64| {
            let mut w = Window::new();
            let (mut pos, mut index) = (0u64, 0u64);
            let mut r = Ok(false);
            while r == Ok(false) {
                w.segs.clear();
                r = fill_from_file(
                    &file,
                    len,
                    &mut pos,
                    &mut index,
                    &layout,
                    Mode::Seal,
                    4,
                    &mut w,
                );
            }
            r.map(|_| pos)
        };
        assert_eq!(fill(1000), Ok(1000));
        // shrank since opened (fewer bytes than announced)
        assert_eq!(fill(1100).unwrap_err().kind(), ErrorKind::Io);
        // grew since opened, inside a segment
        assert_eq!(fill(990).unwrap_err().kind(), ErrorKind::Io);
    }

    #[test]
    fn a_full_segment_then_an_empty_last_segment_is_accepted() {
        // Valid in the format though Tink and gcmx write a full last segment instead: build
        // header || full segment 0 (not last) || empty segment 1 (last) by hand.
        let ks = keyset(16, 64);
        let key = ks.primary();
        let layout = key.layout();
        let header = Header::random(&layout).unwrap();
        let gcm = Engine::new(&key.stream_key(&header, b"x").unwrap(), Backend::Auto).unwrap();
        let pt = data(layout.plaintext_len(0));
        let mut ct = header.to_bytes();
        let mut seg = pt.clone();
        let mut tag = [0u8; 16];
        let n0 = segment_nonce(&header.nonce_prefix, 0, false);
        gcm.seal(&n0, &mut seg, &mut tag).unwrap();
        ct.extend_from_slice(&seg);
        ct.extend_from_slice(&tag);
        let n1 = segment_nonce(&header.nonce_prefix, 1, true);
        gcm.seal(&n1, &mut [], &mut tag).unwrap();
        ct.extend_from_slice(&tag);
        assert_eq!(dec(&ks, b"x", &ct).unwrap(), pt);
        // without the empty last segment, segment 0 is not marked last: refused
        let cut = &ct[..ct.len() - 16];
        assert_eq!(
            dec(&ks, b"x", cut).unwrap_err().kind(),
            ErrorKind::Authentication
        );
    }

    /// Endless bytes; `alive` counts the holders of the input, so the test can see whether
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
        let header = Header::random(&ks.primary().layout()).unwrap().to_bytes();
        let opts = Options::new().with_window_bytes(4 * 64);
        // Decrypt: a good header, then endless garbage (the first window fails).
        let alive = Arc::new(());
        let input = io::Cursor::new(header).chain(Endless(alive.clone()));
        let r = decrypt(&ks, b"", Input::reader(input), Vec::new(), &opts, &|_| {});
        assert_eq!(r.unwrap_err().kind(), ErrorKind::Authentication);
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
        assert_eq!(r.unwrap_err().kind(), ErrorKind::Io);
        assert_eq!(Arc::strong_count(&alive), 1, "the reader still runs");
    }

    #[cfg(unix)]
    #[test]
    fn a_stalled_pipe_does_not_keep_a_failed_run_waiting() {
        // A bad first segment from a pipe whose writer stays open without writing more: the
        // error comes back and the reader ends without waiting for the writer. The pipe gets a
        // whole first window and a segment more (a window holds a segment per core), so that
        // the window is opened whatever the core count.
        let ks = keyset(16, 64);
        let header = Header::random(&ks.primary().layout()).unwrap().to_bytes();
        let (rd, wr) = nix::unistd::pipe().unwrap();
        let mut wr = File::from(wr);
        wr.write_all(&header).unwrap();
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        wr.write_all(&vec![0u8; 64 * (cores + 1) + 72]).unwrap();
        let opts = Options::new().with_window_bytes(64);
        let (tx, rx) = std::sync::mpsc::channel();
        let ks2 = ks.clone();
        thread::spawn(move || {
            let r = decrypt(
                &ks2,
                b"",
                Input::Pipe(File::from(rd)),
                Vec::new(),
                &opts,
                &|_| {},
            );
            let _ = tx.send(r.map(|_| ()));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("decrypt() still waits for the pipe");
        assert_eq!(r.unwrap_err().kind(), ErrorKind::Authentication);
        drop(wr);
    }

    #[test]
    fn multi_key_keysets_decrypt_with_any_enabled_key() {
        let old = StreamingKey::new(11, &[1u8; 16], 16, 64).unwrap();
        let new = StreamingKey::new(12, &[2u8; 32], 32, 100).unwrap();
        let other = StreamingKey::new(13, &[3u8; 16], 16, 200).unwrap();
        let ct_old = enc(
            &Keyset::single(old.clone()),
            b"x",
            &data(500),
            &Options::default(),
        );
        let ct_other = enc(
            &Keyset::single(other.clone()),
            b"x",
            &data(5),
            &Options::default(),
        );
        let ks = Keyset::new(1, vec![old, new, other]).unwrap();
        assert_eq!(dec(&ks, b"x", &ct_old).unwrap(), data(500));
        assert_eq!(dec(&ks, b"x", &ct_other).unwrap(), data(5));
        assert_eq!(
            dec(&ks, b"y", &ct_other).unwrap_err().kind(),
            ErrorKind::Authentication
        );
    }
}
