//! A window: whole segments back to back in one buffer, sealed or opened with one batch call
//! (segments in parallel on CPU threads, or as one GPU batch). Every adapter and the bulk
//! pipeline work in windows, so memory is bounded by the window whatever the stream length.

use std::io::{self, Read};
use std::mem;

use zeroize::Zeroizing;

use crate::engine::{Engine, OpenError, OpenFrom, OpenJob, SealFrom, SealJob};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{NONCE_LEN, TAG_LEN, segment_nonce};
use crate::winbuf::WinBuf;

/// One segment of a window.
pub(crate) struct Seg {
    /// Offset of the segment's ciphertext in the window buffer.
    pub(crate) off: usize,
    /// Ciphertext length, tag included.
    pub(crate) len: usize,
    /// Sealed or opened as the stream's last segment.
    pub(crate) last: bool,
}

/// Segments back to back, each followed by its tag.
pub(crate) struct Window {
    pub(crate) buf: WinBuf,
    /// How much of `buf` was ever filled (wiped on drop).
    pub(crate) high_water: usize,
    pub(crate) segs: Vec<Seg>,
    /// Index of the first segment in the stream.
    pub(crate) first_index: u64,
    pub(crate) bytes_in: u64,
    /// Whether the buffer may hold plaintext: then it is wiped on drop. Cleared when every
    /// segment has been sealed (the writer's windows then hold ciphertext only), set again when
    /// plaintext is copied in.
    pub(crate) plain: bool,
    /// Allocated whole by [`reserve_window`]: kept for the next stream once it holds no
    /// plaintext.
    reusable: bool,
    /// Whether the buffer is page-locked.
    pub(crate) pin: Pinning,
}

/// Whether a window's buffer is page-locked ([`WinBuf::zeroed`]): the GPU engine's windows,
/// whose segments its batches then move in place instead of copying them through staging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pinning {
    /// Ordinary memory: the CPU's windows, and the GPU's where it refused to page-lock one.
    No,
    /// A stream's first window: page-locked if a kept one is at hand ([`spare`]), else ordinary
    /// memory, whose pages are mapped only as they are written, so that a short stream does not
    /// page-lock a whole window (0.14-0.20 s for 256 MiB on a 16-core host, benches/results.md:
    /// more than the GPU takes to open it).
    IfKept,
    /// Page-locked: the stream has outgrown its first window ([`pin_from_now`]).
    Yes,
}

impl Window {
    /// An empty window: its buffer grows with the data.
    pub(crate) fn new() -> Window {
        Window {
            buf: WinBuf::default(),
            high_water: 0,
            segs: Vec::new(),
            first_index: 0,
            bytes_in: 0,
            plain: true,
            reusable: false,
            pin: Pinning::No,
        }
    }

    /// An empty window whose buffer is page-locked as `pin` says.
    pub(crate) fn with_pinning(pin: Pinning) -> Window {
        let mut w = Window::new();
        w.pin = pin;
        w
    }

    /// The end of the last segment in the buffer.
    pub(crate) fn end(&self) -> usize {
        self.segs.last().map_or(0, |s| s.off + s.len)
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // A window that may hold plaintext is wiped where it was used before its memory is
        // given back or kept.
        if self.plain {
            let used = self.high_water.min(self.buf.len());
            wipe(&mut self.buf[..used]);
        }
        if self.reusable {
            spare::give(std::mem::take(&mut self.buf));
        }
    }
}

/// Overwrites `buf` with zeros, on several threads of its own when it is large. A bulk fill,
/// kept from being dropped as a dead store by `black_box` (zeroize's byte-wise volatile writes
/// run at a fraction of memory speed, and a window is megabytes).
///
/// Not on rayon's pool: windows are wiped when they are dropped, and a drop must not wait for
/// the pool's other work, nor deadlock when every thread of the pool waits on the dropping
/// thread. Threads that cannot be started leave their share to the others and to this one.
pub(crate) fn wipe(buf: &mut [u8]) {
    const PIECE: usize = 4 << 20;
    fn zero(c: &mut [u8]) {
        c.fill(0);
        std::hint::black_box(c);
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(buf.len() / PIECE)
        .min(8);
    if threads < 2 {
        zero(buf);
        return;
    }
    let pieces = std::sync::Mutex::new(buf.chunks_mut(PIECE));
    let work = || {
        loop {
            let next = pieces
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .next();
            match next {
                Some(c) => zero(c),
                None => return,
            }
        }
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            if std::thread::Builder::new().spawn_scoped(s, work).is_err() {
                break;
            }
        }
        work();
    });
}

/// Bytes a task of a copy on rayon's pool copies at most ([`copy`], [`copy_runs`]).
const COPY_PIECE: usize = 128 << 10;

/// Copies `src` into `dst` (of the same length), on rayon's pool when it is large: one thread
/// copies at a fraction of the memory's bandwidth, and the adapters' copies between the
/// caller's buffers and their windows are what a copying adapter waits for.
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    if src.len() >= 4 * COPY_PIECE && rayon::current_num_threads() > 1 {
        dst.par_chunks_mut(COPY_PIECE)
            .zip(src.par_chunks(COPY_PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
    } else {
        dst.copy_from_slice(src);
    }
}

/// A piece of a copy: `len` bytes from offset `from` of the source to offset `to` of the
/// destination.
pub(crate) struct Run {
    pub(crate) to: usize,
    pub(crate) from: usize,
    pub(crate) len: usize,
}

/// Copies the `runs` (in increasing, disjoint order on both sides) from `src` into `dst`, all
/// in one call on rayon's pool: a copy of many segments, which one [`copy`] each would hand to
/// the pool one at a time. Runs out of either's bounds are cut to them. A small copy stays on
/// this thread and allocates nothing.
pub(crate) fn copy_runs(dst: &mut [u8], src: &[u8], runs: &[Run]) {
    use rayon::prelude::*;
    let total: usize = runs.iter().map(|r| r.len).sum();
    if total < 4 * COPY_PIECE || rayon::current_num_threads() < 2 {
        run_pairs(dst, src, runs).for_each(|(d, s)| d.copy_from_slice(s));
        return;
    }
    // Pieces of at most `COPY_PIECE` bytes, so that a few large runs spread as far as many small
    // ones.
    let pieces: Vec<(&mut [u8], &[u8])> = run_pairs(dst, src, runs)
        .flat_map(|(d, s)| d.chunks_mut(COPY_PIECE).zip(s.chunks(COPY_PIECE)))
        .collect();
    pieces
        .into_par_iter()
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// The destination and source slices of `runs`, cut to both buffers; ends at the first run
/// that is out of order or out of bounds.
fn run_pairs<'d, 's>(
    dst: &'d mut [u8],
    src: &'s [u8],
    runs: &[Run],
) -> impl Iterator<Item = (&'d mut [u8], &'s [u8])> {
    let (mut rest, mut at, mut runs) = (dst, 0, runs.iter());
    std::iter::from_fn(move || {
        let r = runs.next()?;
        let tail = mem::take(&mut rest);
        let tail = tail.get_mut(r.to.checked_sub(at)?..)?;
        let n = r.len.min(tail.len());
        let s = src.get(r.from..r.from + n)?;
        let (d, tail) = tail.split_at_mut(n);
        rest = tail;
        at = r.to + n;
        Some((d, s))
    })
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
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

/// Grows `buf` to `len` bytes, failing cleanly when the memory cannot be had. The old
/// buffer is wiped (it may hold plaintext), not left to the allocator.
pub(crate) fn grow(buf: &mut Vec<u8>, len: usize) -> io::Result<()> {
    if buf.len() >= len {
        return Ok(());
    }
    let mut new = Vec::new();
    new.try_reserve_exact(len).map_err(|_| no_memory(len))?;
    new.extend_from_slice(buf);
    new.resize(len, 0);
    wipe(buf);
    *buf = new;
    Ok(())
}

/// The error of a window's allocation of `len` bytes that the system refused.
pub(crate) fn no_memory(len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        format!("cannot allocate {} MiB for a window", len.div_ceil(1 << 20)),
    )
}

/// Windows of up to this many bytes (the GPU's default window, and the byte of look-ahead
/// that a reader's window holds past its segments) are allocated whole at their first use.
const WHOLE_WINDOW_MAX: usize = (256 << 20) + 1;

/// Window buffers kept between streams ([`spare`]) take at most this many bytes together: a
/// writer's two windows on the GPU (one filled while the other is sealed and written out) and
/// a reader's, of 256 MiB by default; on the CPU, whose windows are megabytes, [`spare::KEEP`]
/// bounds them first.
const SPARE_BYTES: usize = 3 * whole_len(WHOLE_WINDOW_MAX);

/// Whole windows are allocated in multiples of this.
const WINDOW_GRAIN: usize = 64 << 10;

/// The length allocated for a whole window of `len` bytes: rounded up, with room for one byte
/// more, so that a writer's windows (whole segments) and a reader's (the same and a byte of
/// look-ahead) are of one length, and [`spare`] hands the one's buffers to the other.
const fn whole_len(len: usize) -> usize {
    (len + 1).next_multiple_of(WINDOW_GRAIN)
}

/// Makes the window's buffer at least `needed` bytes long, for a window of at most `cap`
/// bytes. The first allocation takes the whole window (up to 256 MiB): a window of that size
/// that an earlier stream left (see [`spare`]), or zeroed pages from the system, which are
/// mapped only as they are first written (a short stream touches little memory). A long
/// stream never copies its window to a larger one. Beyond 256 MiB it grows by doubling, the
/// old buffer wiped. Where the system refuses the whole window (a memory limit), the first
/// allocation is what is needed, and the window grows from there as data comes; an error
/// when even that cannot be had.
pub(crate) fn reserve_window(w: &mut Window, needed: usize, cap: usize) -> io::Result<()> {
    if w.buf.len() >= needed {
        return Ok(());
    }
    if w.buf.is_empty() {
        let len = whole_len(needed.max(cap.min(WHOLE_WINDOW_MAX)));
        let pinned = match w.pin {
            Pinning::No => None,
            Pinning::IfKept => spare::take(len, true),
            Pinning::Yes => spare::take(len, true).or_else(|| WinBuf::zeroed(len, true).ok()),
        };
        let whole = match pinned.or_else(|| spare::take(len, false)) {
            Some(b) => Ok(b),
            None => WinBuf::zeroed(len, false),
        };
        w.buf = match whole {
            Ok(b) => b,
            Err(_) => {
                w.buf = WinBuf::zeroed(needed, false)?;
                w.pin = Pinning::No;
                return Ok(());
            }
        };
        // Where the GPU cannot page-lock it, the window is an ordinary one from now on.
        if w.pin == Pinning::Yes && !w.buf.is_pinned() {
            w.pin = Pinning::No;
        }
        w.reusable = true;
        return Ok(());
    }
    w.reusable = false;
    let want = w.buf.len().saturating_mul(2).min(cap).max(needed);
    w.buf.grow(want)
}

/// Between windows of a stream that has outgrown its first: a window that is to be page-locked
/// ([`Pinning::IfKept`]) but was given ordinary memory moves to a page-locked buffer, kept or
/// new, for the rest of the stream; its old buffer is wiped where it may hold plaintext and kept
/// for later streams. The window's bytes are not carried over: call it before the next window
/// is written.
pub(crate) fn pin_from_now(w: &mut Window) {
    if w.pin != Pinning::IfKept {
        return;
    }
    w.pin = Pinning::Yes;
    if w.buf.is_empty() || w.buf.is_pinned() || !w.reusable {
        return;
    }
    let len = w.buf.len();
    let Some(new) = spare::take(len, true).or_else(|| WinBuf::zeroed(len, true).ok()) else {
        w.pin = Pinning::No;
        return;
    };
    if !new.is_pinned() {
        w.pin = Pinning::No;
        return;
    }
    let mut old = mem::replace(&mut w.buf, new);
    if w.plain {
        let used = w.high_water.min(old.len());
        wipe(&mut old[..used]);
    }
    w.high_water = 0;
    spare::give(old);
}

/// Window buffers kept between streams, holding no plaintext (wiped, or holding ciphertext
/// only), page-locked ones (the GPU's) as they are. A fresh buffer costs a page fault and the
/// zeroing of every page at its first write (benches/adapters.rs: about a fifth of the writer's
/// time for streams of 256 MiB on two cores, and a third to a half of the GPU writer's, whose
/// default window is 256 MiB), and a page-locked one its page-locking too; a stream that
/// follows another reuses its buffers. At most [`spare::KEEP`] buffers, of
/// [`SPARE_BYTES`] together, are kept: no more memory than one writer on the GPU holds while
/// it runs.
pub(crate) mod spare {
    use std::sync::Mutex;

    use crate::winbuf::WinBuf;

    /// Buffers kept at most.
    pub(crate) const KEEP: usize = 4;

    static SPARE: Mutex<Vec<WinBuf>> = Mutex::new(Vec::new());

    /// A kept buffer of exactly `len` bytes, page-locked or not as `pinned` says (its contents
    /// are no plaintext).
    pub(crate) fn take(len: usize, pinned: bool) -> Option<WinBuf> {
        let mut kept = SPARE.lock().ok()?;
        let i = kept
            .iter()
            .position(|b| b.len() == len && b.is_pinned() == pinned)?;
        Some(kept.swap_remove(i))
    }

    /// Keeps `buf` (holding no plaintext) for a later stream, if there is room.
    pub(crate) fn give(buf: WinBuf) {
        if buf.is_empty() {
            return;
        }
        if let Ok(mut kept) = SPARE.lock() {
            let held: usize = kept.iter().map(|b| b.len()).sum();
            if kept.len() < KEEP && held.saturating_add(buf.len()) <= super::SPARE_BYTES {
                kept.push(buf);
            }
        }
    }
}

/// Reads up to `want` bytes into `buf[off..]`, growing `buf` (by doubling) only as data
/// arrives: windows start small when the input is small, whatever the segment size.
pub(crate) fn read_growing(
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
            grow(buf, grown)?;
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

fn nonces(prefix: &[u8; 7], w: &Window) -> Vec<[u8; NONCE_LEN]> {
    w.segs
        .iter()
        .enumerate()
        // The reader refuses indexes past u32::MAX, so the conversion is exact.
        .map(|(i, s)| segment_nonce(prefix, (w.first_index + i as u64) as u32, s.last))
        .collect()
}

/// Cuts the window's buffer into its segments: each one's data and tag, in order (with
/// [`nonces`]'s nonce of the same index).
fn segment_parts(w: &mut Window) -> Vec<(&mut [u8], &mut [u8])> {
    let end = w.end();
    let mut rest = &mut w.buf[..end];
    let mut parts = Vec::with_capacity(w.segs.len());
    for s in &w.segs {
        let (chunk, tail) = rest.split_at_mut(s.len);
        rest = tail;
        parts.push(chunk.split_at_mut(s.len - TAG_LEN));
    }
    parts
}

/// Seals every segment of `w` in place.
pub(crate) fn seal_window(gcm: &Engine, prefix: &[u8; 7], w: &mut Window) -> Result<()> {
    let nonces = nonces(prefix, w);
    let mut jobs: Vec<SealJob<'_>> = segment_parts(w)
        .into_iter()
        .zip(&nonces)
        .map(|((buf, tag), nonce)| SealJob {
            nonce: nonce.as_slice(),
            aad: &[],
            buf,
            tag,
        })
        .collect();
    gcm.seal_batch(&mut jobs)?;
    drop(jobs);
    sealed(w);
    Ok(())
}

/// After every segment of `w` was sealed: it holds no plaintext unless bytes past its last
/// segment were ever filled (a look-ahead, a larger earlier window), which stay wiped on drop.
fn sealed(w: &mut Window) {
    w.plain = w.high_water.min(w.buf.len()) > w.end();
}

/// Seals every segment of `w` on rayon's pool, segments `copied..` from `src` (their
/// plaintexts back to back) straight into the window, each in the task that seals it (the
/// plaintext is read once and never copied); segments before `copied` already hold their
/// plaintext and are sealed in place. Only where [`Engine::has_serial`]. On failure the
/// used part of the buffer is wiped.
pub(crate) fn seal_window_from(
    gcm: &Engine,
    prefix: &[u8; 7],
    w: &mut Window,
    copied: usize,
    src: &[u8],
) -> Result<()> {
    w.plain = true;
    let nonces = nonces(prefix, w);
    let mut rest = src;
    let mut jobs: Vec<SealFrom<'_>> = Vec::with_capacity(w.segs.len());
    for (j, ((buf, tag), nonce)) in segment_parts(w).into_iter().zip(&nonces).enumerate() {
        let src = if j >= copied {
            let (head, tail) = rest.split_at_checked(buf.len()).ok_or_else(|| {
                Error::new(
                    ErrorKind::Crypto,
                    "a window's source is shorter than its segments",
                )
            })?;
            rest = tail;
            Some(head)
        } else {
            None
        };
        jobs.push(SealFrom {
            nonce: nonce.as_slice(),
            src,
            buf,
            tag,
        });
    }
    let r = if rest.is_empty() {
        gcm.seal_from(&mut jobs)
    } else {
        Err(Error::new(
            ErrorKind::Crypto,
            "a window's source is longer than its segments",
        ))
    };
    drop(jobs);
    match r {
        Ok(()) => sealed(w),
        Err(_) => {
            let end = w.end();
            wipe(&mut w.buf[..end]);
        }
    }
    r
}

/// The index of the first segment of `w` that does not authenticate. A failed batch gives every
/// buffer back as its ciphertext, so the segments are opened again one by one, each from a copy
/// (the window's own bytes keep no plaintext); `None` if every segment opens (cannot happen
/// after a failed batch of the same bytes, but is not trusted).
fn failing_segment(gcm: &Engine, prefix: &[u8; 7], w: &Window) -> Option<u64> {
    let nonces = nonces(prefix, w);
    let parts = w.segs.iter().zip(&nonces).map(|(s, nonce)| {
        let (ct, tag) = w.buf[s.off..s.off + s.len].split_at(s.len - TAG_LEN);
        (ct, tag, nonce.as_slice())
    });
    first_failing(gcm, parts).map(|j| w.first_index + j as u64)
}

/// The position of the first `(ciphertext, tag, nonce)` that does not authenticate, each opened
/// from a copy (wiped after) so that the callers' bytes stay ciphertext; `None` if all open or
/// the engine fails.
pub(crate) fn first_failing<'a>(
    gcm: &Engine,
    parts: impl Iterator<Item = (&'a [u8], &'a [u8], &'a [u8])>,
) -> Option<usize> {
    let mut scratch = Zeroizing::new(Vec::new());
    for (j, (ct, tag, nonce)) in parts.enumerate() {
        scratch.clear();
        scratch.extend_from_slice(ct);
        if !gcm.open(nonce, &mut scratch, tag).ok()? {
            return Some(j);
        }
    }
    None
}

/// Opens every segment of `w` in place, all or nothing: on failure no buffer holds
/// plaintext, and the error names the first segment that did not authenticate.
pub(crate) fn open_window(gcm: &Engine, prefix: &[u8; 7], w: &mut Window) -> Result<()> {
    let nonces = nonces(prefix, w);
    let mut jobs: Vec<OpenJob<'_>> = segment_parts(w)
        .into_iter()
        .zip(&nonces)
        .map(|((buf, tag), nonce)| OpenJob {
            nonce: nonce.as_slice(),
            aad: &[],
            buf,
            tag: &*tag,
        })
        .collect();
    match gcm.open_batch(&mut jobs) {
        Ok(()) => Ok(()),
        Err(OpenError::Other(e)) => Err(e),
        Err(OpenError::Authentication) => {
            let first = w.first_index;
            let count = w.segs.len() as u64;
            Err(match failing_segment(gcm, prefix, w) {
                Some(i) => auth_error(i, 1),
                None => auth_error(first, count),
            })
        }
    }
}

/// Opens every segment of `w`, none of them the stream's last, from `src` (the source's
/// buffer: the window's ciphertext but for its first `pre` bytes, already in the window), with
/// [`open_from_source`]. On failure the window holds no plaintext.
pub(crate) fn open_window_from(
    gcm: &Engine,
    prefix: &[u8; 7],
    w: &mut Window,
    pre: usize,
    src: &[u8],
) -> Result<()> {
    let (first, end) = (w.first_index, w.end());
    w.high_water = w.high_water.max(end);
    let bodies = segment_parts(w).into_iter().map(|(body, _)| body).collect();
    let r = open_from_source(gcm, prefix, first, bodies, pre, src, false);
    if r.is_err() {
        wipe(&mut w.buf[..end]);
    }
    r
}

/// Opens segments `first..`, none of them the stream's last, on rayon's pool: their ciphertext
/// lies at the start of `src` (each body followed by its tag), and each body is opened from it
/// into its buffer in `bodies` (the first `pre` bytes of the first one are there already) by the
/// task that opens it, past the caches with `uncached` ([`Engine::open_from`]). Only where
/// [`Engine::has_serial`]. The error names the first segment that did not authenticate; after
/// a failure the bodies may hold plaintext (the caller wipes them).
pub(crate) fn open_from_source(
    gcm: &Engine,
    prefix: &[u8; 7],
    first: u64,
    bodies: Vec<&mut [u8]>,
    pre: usize,
    src: &[u8],
    uncached: bool,
) -> Result<()> {
    let short = || {
        Error::new(
            ErrorKind::Crypto,
            "a source is shorter than the segments opened from it",
        )
    };
    // The reader refuses indexes past u32::MAX, so the conversions are exact.
    let nonces: Vec<_> = (first..first + bodies.len() as u64)
        .map(|i| segment_nonce(prefix, i as u32, false))
        .collect();
    let mut jobs: Vec<OpenFrom<'_>> = Vec::with_capacity(bodies.len());
    let mut at = 0;
    for (j, (buf, nonce)) in bodies.into_iter().zip(&nonces).enumerate() {
        let skip = if j == 0 { pre } else { 0 };
        let body_end = (at + buf.len()).checked_sub(skip).ok_or_else(short)?;
        jobs.push(OpenFrom {
            nonce: nonce.as_slice(),
            src: src.get(at..body_end).ok_or_else(short)?,
            buf,
            tag: src.get(body_end..body_end + TAG_LEN).ok_or_else(short)?,
        });
        at = body_end + TAG_LEN;
    }
    match gcm.open_from(&mut jobs, uncached)? {
        None => Ok(()),
        Some(j) => Err(auth_error(first + j as u64, 1)),
    }
}

pub(crate) fn auth_error(first: u64, count: u64) -> Error {
    let which = if count == 1 {
        format!("segment {first}")
    } else {
        format!("one of segments {first}..{}", first + count - 1)
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

#[cfg(test)]
mod tests {
    use super::{Run, copy_runs};

    /// Runs land where they are planned, the gaps between them untouched, one run or many,
    /// small or split over the pool; runs past either buffer are cut, not a panic.
    #[test]
    fn copy_runs_copies_each_run_and_nothing_else() {
        let src: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        for (seg, gap) in [(7usize, 3usize), (4096, 16), (1 << 20, 16)] {
            let mut runs = Vec::new();
            let (mut to, mut from) = (5, 0);
            while from + seg <= src.len().min(3 * seg) {
                runs.push(Run { to, from, len: seg });
                (to, from) = (to + seg + gap, from + seg);
            }
            let mut dst = vec![0xEEu8; to + 9];
            copy_runs(&mut dst, &src, &runs);
            let mut want = vec![0xEEu8; to + 9];
            for r in &runs {
                want[r.to..r.to + r.len].copy_from_slice(&src[r.from..r.from + r.len]);
            }
            assert!(dst == want, "segments of {seg}");
        }
        let mut small = [0u8; 10];
        let runs = [
            Run {
                to: 2,
                from: 0,
                len: 4,
            },
            Run {
                to: 8,
                from: 4,
                len: 9,
            },
            Run {
                to: 20,
                from: 0,
                len: 1,
            },
        ];
        copy_runs(&mut small, &src[..6], &runs);
        assert_eq!(small, [0, 0, 0, 1, 2, 3, 0, 0, 4, 5]);
    }
}
