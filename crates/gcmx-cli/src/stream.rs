//! Streaming encryption and decryption in bounded memory.
//!
//! Three threads overlap the work: a reader fills windows of whole segments, the calling
//! thread seals or opens each window with one [`Gcm::encrypt_batch`] /
//! [`Gcm::decrypt_batch`] call (segments in parallel on CPU threads or as one GPU batch),
//! and a writer drains it. A fixed pool of windows circulates between them, so memory is
//! `POOL` windows whatever the input size. The reader knows which segment is the last one by
//! looking one byte ahead, so the last-segment flag is always exact: a decryption never
//! tries both flags.

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;
use std::time::Instant;

use zeroize::Zeroize;

use crate::api::{Backend, Gcm, GcmError, OpenJob, SealJob};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{Header, Layout, NONCE_LEN, TAG_LEN, file_key, segment_nonce};
use crate::keyset::{Keyset, StreamingKey};

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

/// Tuning of the pipeline.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Which `gcmx` backend seals and opens the segments.
    pub backend: Backend,
    /// Target ciphertext bytes per window (one batch call); 0 picks a default for the backend.
    pub window_bytes: usize,
    /// The input size when known (a regular file), to avoid allocating windows larger than
    /// the whole input.
    pub size_hint: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            backend: Backend::Auto,
            window_bytes: 0,
            size_hint: None,
        }
    }
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

/// An error from the `gcmx` library, as this crate's error.
pub(crate) fn gcm_error(e: GcmError) -> Error {
    match e {
        GcmError::BackendUnavailable(why) => {
            Error::new(ErrorKind::Crypto, format!("backend unavailable: {why}"))
        }
        other => Error::new(ErrorKind::Crypto, format!("AES-GCM failed: {other}")),
    }
}

fn default_window_bytes(backend: Backend) -> usize {
    match backend {
        // GPUs want large batches.
        #[cfg(feature = "cuda")]
        Backend::Cuda => 256 << 20,
        _ => 32 << 20,
    }
}

/// With `--backend auto`, inputs of known size below this stay on the CPU.
#[cfg(feature = "cuda")]
const AUTO_GPU_MIN_BYTES: u64 = 256 << 20;

/// The engine for one file key. With the `cuda` feature, `Auto` means the GPU when one is
/// present and the input is large or of unknown size, so that whole windows go to it as one
/// batch, and the CPU otherwise.
pub(crate) fn make_gcm(key: &[u8], backend: Backend, size_hint: Option<u64>) -> Result<Gcm> {
    let t = Instant::now();
    let gcm = make_gcm_inner(key, backend, size_hint);
    if trace_enabled() {
        eprintln!(
            "gcmx trace: engine setup {:.1} ms ({:?})",
            t.elapsed().as_secs_f64() * 1e3,
            gcm.as_ref().map(|g| g.backend())
        );
    }
    gcm
}

fn make_gcm_inner(key: &[u8], backend: Backend, size_hint: Option<u64>) -> Result<Gcm> {
    #[cfg(not(feature = "cuda"))]
    let _ = size_hint;
    // Starting the GPU takes a few hundred milliseconds: not worth it for small files.
    #[cfg(feature = "cuda")]
    if backend == Backend::Auto
        && size_hint.is_none_or(|n| n >= AUTO_GPU_MIN_BYTES)
        && let Ok(gpu) = Gcm::with_backend(key, Backend::Cuda)
    {
        return Ok(gpu);
    }
    Gcm::with_backend(key, backend).map_err(gcm_error)
}

/// How many segments one window holds.
fn window_segments(layout: &Layout, opts: &Options) -> usize {
    let seg = layout.segment_size();
    let target = if opts.window_bytes == 0 {
        default_window_bytes(opts.backend)
    } else {
        opts.window_bytes
    };
    let mut n = (target / seg).max(1);
    let threads = thread::available_parallelism().map_or(1, |p| p.get());
    if n < threads && threads.saturating_mul(seg) <= 256 << 20 {
        n = threads;
    }
    if let Some(size) = opts.size_hint {
        let need = layout.segment_count(size).saturating_add(1);
        n = n.min(usize::try_from(need).unwrap_or(usize::MAX));
    }
    n.max(1)
}

struct Seg {
    /// Offset of the segment's ciphertext in the window buffer.
    off: usize,
    /// Ciphertext length, tag included.
    len: usize,
    last: bool,
}

struct Window {
    buf: Vec<u8>,
    /// How much of `buf` was ever filled (wiped on drop).
    high_water: usize,
    segs: Vec<Seg>,
    first_index: u64,
    bytes_in: u64,
}

impl Window {
    fn end(&self) -> usize {
        self.segs.last().map_or(0, |s| s.off + s.len)
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // Windows hold plaintext: wipe what was used before giving the memory back.
        let used = self.high_water.min(self.buf.len());
        self.buf[..used].zeroize();
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reads up to `want` bytes into `buf[off..]`, growing `buf` (by doubling) only as data
/// arrives: windows start small when the input is small, whatever the segment size.
fn read_growing(
    r: &mut impl Read,
    buf: &mut Vec<u8>,
    off: usize,
    want: usize,
) -> io::Result<usize> {
    let end = off + want;
    let mut n = 0;
    while n < want {
        if buf.len() <= off + n {
            let grown = buf
                .len()
                .saturating_mul(2)
                .max(off + n + (64 << 10))
                .min(end);
            buf.resize(grown, 0);
        }
        let stop = buf.len().min(end);
        match r.read(&mut buf[off + n..stop]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
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

type Input = Box<dyn Read + Send>;

/// The reader thread: fills windows from the free pool and sends them on.
fn reader_loop(
    mut input: BufReader<Input>,
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
                let n = read_growing(&mut input, &mut w.buf, off, want)
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
    let mut out = BufWriter::with_capacity(1 << 20, output);
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
                for s in &w.segs {
                    let pt = s.len - TAG_LEN;
                    out.write_all(&w.buf[s.off..s.off + pt])?;
                    written += pt as u64;
                }
            }
        }
        add_since(&trace.write_ns, t);
        // The reader may be gone (it finished); then the window is simply dropped.
        let _ = free.send(w);
    }
    out.flush()?;
    let inner = out.into_inner().map_err(|e| e.into_error())?;
    Ok((inner, written))
}

fn nonces(prefix: &[u8; 7], w: &Window) -> Vec<[u8; NONCE_LEN]> {
    w.segs
        .iter()
        .enumerate()
        // The reader refuses indexes past u32::MAX, so the conversion is exact.
        .map(|(i, s)| segment_nonce(prefix, (w.first_index + i as u64) as u32, s.last))
        .collect()
}

fn seal_window(gcm: &Gcm, prefix: &[u8; 7], w: &mut Window) -> Result<()> {
    let nonces = nonces(prefix, w);
    let end = w.end();
    let mut rest = &mut w.buf[..end];
    let mut jobs = Vec::with_capacity(w.segs.len());
    for (s, nonce) in w.segs.iter().zip(&nonces) {
        let (chunk, tail) = rest.split_at_mut(s.len);
        rest = tail;
        let (buf, tag) = chunk.split_at_mut(s.len - TAG_LEN);
        jobs.push(SealJob {
            nonce: nonce.as_slice(),
            aad: &[],
            buf,
            tag,
        });
    }
    gcm.encrypt_batch(&mut jobs).map_err(gcm_error)
}

fn open_window(gcm: &Gcm, prefix: &[u8; 7], w: &mut Window) -> Result<()> {
    let nonces = nonces(prefix, w);
    let end = w.end();
    let first = w.first_index;
    let count = w.segs.len() as u64;
    let mut rest = &mut w.buf[..end];
    let mut jobs = Vec::with_capacity(w.segs.len());
    for (s, nonce) in w.segs.iter().zip(&nonces) {
        let (chunk, tail) = rest.split_at_mut(s.len);
        rest = tail;
        let (buf, tag) = chunk.split_at_mut(s.len - TAG_LEN);
        jobs.push(OpenJob {
            nonce: nonce.as_slice(),
            aad: &[],
            buf,
            tag,
        });
    }
    gcm.decrypt_batch(&mut jobs).map_err(|e| match e {
        GcmError::Authentication => auth_error(first, count),
        other => gcm_error(other),
    })
}

fn auth_error(first: u64, count: u64) -> Error {
    let which = if count == 1 {
        format!("segment {first}")
    } else {
        format!("segments {first}..{}", first + count - 1)
    };
    let why = if first == 0 {
        "wrong key or associated data, or the file is corrupted, truncated or reordered"
    } else {
        "the file is corrupted, truncated or reordered"
    };
    Error::new(
        ErrorKind::Authentication,
        format!("decryption failed: {which} did not authenticate ({why})"),
    )
}

/// Runs the three-thread pipeline. `crypt` runs on the calling thread for every window.
#[allow(clippy::too_many_arguments)]
fn run_pipeline<W: Write + Send + 'static>(
    input: BufReader<Input>,
    output: W,
    prefix: Vec<u8>,
    layout: Layout,
    mode: Mode,
    opts: &Options,
    progress: &dyn Fn(u64),
    mut crypt: impl FnMut(&mut Window) -> Result<()>,
) -> Result<(W, Stats)> {
    let per_window = window_segments(&layout, opts);
    let cap = per_window
        .checked_mul(layout.segment_size())
        .ok_or_else(|| Error::usage("window too large"))?;

    // Start each window at the size the input needs when it is known (plus a tag per
    // segment), at most 64 MiB when it is not; windows grow as data arrives.
    let initial = match opts.size_hint {
        Some(n) => usize::try_from(n)
            .unwrap_or(usize::MAX)
            .saturating_add(per_window.saturating_mul(TAG_LEN))
            .min(cap),
        None => cap.min(64 << 20),
    };
    let (free_tx, free_rx) = sync_channel::<Window>(POOL);
    for _ in 0..POOL {
        let w = Window {
            buf: vec![0u8; initial],
            high_water: 0,
            segs: Vec::with_capacity(per_window),
            first_index: 0,
            bytes_in: 0,
        };
        // The channel has room for the whole pool.
        let _ = free_tx.send(w);
    }
    let trace = Arc::new(Trace::default());
    let (reader_trace, writer_trace) = (trace.clone(), trace.clone());
    let started = Instant::now();
    let (read_tx, read_rx) = sync_channel::<Result<Window>>(1);
    let (write_tx, write_rx) = sync_channel::<Window>(1);

    // The reader is detached: if we stop early it may be blocked reading a pipe, and it ends
    // by itself when it next finds its channels closed.
    thread::Builder::new()
        .name("gcmx-reader".into())
        .spawn(move || {
            reader_loop(
                input,
                layout,
                mode,
                per_window,
                free_rx,
                read_tx,
                reader_trace,
            )
        })
        .map_err(|e| Error::io("cannot start the reader thread", e))?;
    let writer = thread::Builder::new()
        .name("gcmx-writer".into())
        .spawn(move || writer_loop(output, prefix, mode, write_rx, free_tx, writer_trace))
        .map_err(|e| Error::io("cannot start the writer thread", e))?;

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
    drop(read_rx);
    drop(write_tx);
    let written = writer
        .join()
        .map_err(|_| Error::new(ErrorKind::Io, "the writer thread panicked"))?;
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
    let (output, bytes_out) = written.map_err(|e| Error::io("cannot write output", e))?;
    if !saw_last {
        return Err(Error::new(ErrorKind::Io, "input ended unexpectedly"));
    }
    stats.bytes_out = bytes_out;
    Ok((output, stats))
}

/// Encrypts `input` to `output` with the keyset's primary key; returns the output back.
pub fn encrypt<W: Write + Send + 'static>(
    keyset: &Keyset,
    aad: &[u8],
    input: Input,
    output: W,
    opts: &Options,
    progress: &dyn Fn(u64),
) -> Result<(W, Stats)> {
    let key = keyset.primary();
    let layout = Layout::of(key);
    let header = Header::random(&layout)?;
    let file_key = file_key(key, &header, aad)?;
    let gcm = make_gcm(&file_key, opts.backend, opts.size_hint)?;
    let opts = &Options {
        backend: gcm.backend(),
        ..*opts
    };
    let prefix = header.nonce_prefix;
    let input = BufReader::with_capacity(64 << 10, input);
    run_pipeline(
        input,
        output,
        header.to_bytes(),
        layout,
        Mode::Seal,
        opts,
        progress,
        |w| seal_window(&gcm, &prefix, w),
    )
}

/// Decrypts `input` to `output`, trying the keyset's enabled keys (primary first) on the
/// first segment as Tink does; returns the output back. Only authenticated plaintext is
/// ever written, but a failure in a later segment comes after earlier segments were written:
/// callers writing to a file must discard it on error.
pub fn decrypt<W: Write + Send + 'static>(
    keyset: &Keyset,
    aad: &[u8],
    input: Input,
    output: W,
    opts: &Options,
    progress: &dyn Fn(u64),
) -> Result<(W, Stats)> {
    let mut input = BufReader::with_capacity(64 << 10, input);
    let read_err = |e| Error::io("cannot read input", e);

    let mut len_byte = [0u8; 1];
    if read_full(&mut input, &mut len_byte).map_err(read_err)? == 0 {
        return Err(Error::format("ciphertext is empty: no header"));
    }
    let hl = usize::from(len_byte[0]);
    let candidates: Vec<&StreamingKey> = keyset
        .decryption_keys()
        .into_iter()
        .filter(|k| Layout::of(k).header_len() == hl)
        .collect();
    if candidates.is_empty() {
        let mut expected: Vec<String> = keyset
            .decryption_keys()
            .iter()
            .map(|k| Layout::of(k).header_len().to_string())
            .collect();
        expected.dedup();
        return Err(Error::format(format!(
            "bad header length byte {hl} (this keyset expects {}): not a ciphertext of this keyset",
            expected.join(" or ")
        )));
    }
    let mut body = vec![0u8; hl - 1];
    if read_full(&mut input, &mut body).map_err(read_err)? < body.len() {
        return Err(Error::format("ciphertext is truncated: incomplete header"));
    }
    let header = Header::from_body(&Layout::of(candidates[0]), &body)?;
    progress(hl as u64);

    let (key, input): (&StreamingKey, Input) = if candidates.len() == 1 {
        (candidates[0], Box::new(input))
    } else {
        // Several keys could have written this file: find the one that opens segment 0.
        let longest = candidates
            .iter()
            .map(|k| Layout::of(k).ciphertext_len(0))
            .max()
            .unwrap_or(0);
        let mut head = Vec::new();
        let n = read_growing(&mut input, &mut head, 0, longest + 1).map_err(read_err)?;
        head.truncate(n);
        let mut chosen = None;
        for k in &candidates {
            let layout = Layout::of(k);
            let want = layout.ciphertext_len(0);
            let last = n <= want;
            let seg = &head[..n.min(want)];
            if seg.len() < TAG_LEN {
                continue;
            }
            let fk = file_key(k, &header, aad)?;
            let gcm = Gcm::with_backend(&fk, Backend::Cpu).map_err(gcm_error)?;
            let (ct, tag) = seg.split_at(seg.len() - TAG_LEN);
            let mut buf = ct.to_vec();
            let nonce = segment_nonce(&header.nonce_prefix, 0, last);
            let ok = gcm.decrypt_detached(&nonce, &[], &mut buf, tag).is_ok();
            buf.zeroize();
            if ok {
                chosen = Some(*k);
                break;
            }
        }
        let Some(key) = chosen else {
            if n < TAG_LEN {
                return Err(Error::format(
                    "ciphertext is truncated: first segment is shorter than a tag",
                ));
            }
            return Err(auth_error(0, 1));
        };
        (key, Box::new(io::Cursor::new(head).chain(input)))
    };

    let layout = Layout::of(key);
    let file_key = file_key(key, &header, aad)?;
    let gcm = make_gcm(&file_key, opts.backend, opts.size_hint)?;
    let opts = &Options {
        backend: gcm.backend(),
        ..*opts
    };
    let prefix = header.nonce_prefix;
    let input = BufReader::with_capacity(64 << 10, input);
    let (out, mut stats) = run_pipeline(
        input,
        output,
        Vec::new(),
        layout,
        Mode::Open,
        opts,
        progress,
        |w| open_window(&gcm, &prefix, w),
    )?;
    stats.bytes_in += hl as u64;
    Ok((out, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyset(dks: usize, seg: u32) -> Keyset {
        Keyset::single(StreamingKey::new(1, &vec![7u8; dks], dks, seg).unwrap())
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 131 + i / 251) as u8).collect()
    }

    fn enc(ks: &Keyset, aad: &[u8], pt: &[u8], opts: &Options) -> Vec<u8> {
        let (out, stats) = encrypt(
            ks,
            aad,
            Box::new(io::Cursor::new(pt.to_vec())),
            Vec::new(),
            opts,
            &|_| {},
        )
        .unwrap();
        assert_eq!(stats.bytes_in, pt.len() as u64);
        assert_eq!(stats.bytes_out, out.len() as u64);
        out
    }

    fn dec(ks: &Keyset, aad: &[u8], ct: &[u8]) -> Result<Vec<u8>> {
        decrypt(
            ks,
            aad,
            Box::new(io::Cursor::new(ct.to_vec())),
            Vec::new(),
            &Options::default(),
            &|_| {},
        )
        .map(|(v, _)| v)
    }

    #[test]
    fn round_trip_sizes_and_windows() {
        for (dks, seg) in [(16usize, 41u32), (16, 64), (32, 100), (32, 4096)] {
            let ks = keyset(dks, seg);
            let l = Layout::of(ks.primary());
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
                    let opts = Options {
                        backend: Backend::CpuParallel,
                        window_bytes,
                        size_hint: None,
                    };
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
        let l = Layout::of(ks.primary());
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
        for size_hint in [None, Some(300_000)] {
            let opts = Options {
                size_hint,
                ..Options::default()
            };
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
