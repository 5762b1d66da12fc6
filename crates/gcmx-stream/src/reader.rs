//! [`DecryptingReader`]: Tink ciphertext in, authenticated plaintext out through [`Read`].

use std::fmt;
use std::io::{self, BufRead, Read};
use std::mem;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::engine::{Engine, OpenError, OpenJob};
use crate::error::{Error, Result};
use crate::format::{Layout, TAG_LEN, segment_nonce};
use crate::header::read_header;
use crate::keyset::Keyset;
use crate::options::{Options, Use};
use crate::piped::{self, Planned};
use crate::poison::Poison;
use crate::window::{
    Pinning, Run, Seg, Window, auth_error, copy, copy_runs, first_failing, open_from_source,
    open_window, open_window_from, pin_from_now, reserve_window, wipe,
};
use crate::wipe::wipe_stacks;

/// Plaintext bytes of a group: segments that a read straight into the caller's buffer hands to
/// rayon's pool as one task, opened there while the caller's thread reads the next groups.
/// Large enough that a task's cost is its segments, small enough that the last group, opened
/// after the copy, is a short tail and that a group is still in cache when it is opened.
const GROUP_BYTES: usize = 1 << 20;

/// Reads into a caller's buffer of at least this many bytes, opened from a buffered source,
/// write their plaintext past the caches (non-temporal stores): beyond the last-level cache of
/// most CPUs, a buffer whose first lines are evicted before the read returns, so fetching each
/// line before writing it (a third of an open's memory traffic, where memory is the limit)
/// buys nothing.
const UNCACHED_READ: usize = 64 << 20;

/// Most segments that one read straight into the caller's buffer takes on the CPU (a tag and a
/// few words of bookkeeping each).
const DIRECT_MAX_SEGMENTS: usize = 1 << 16;

impl Keyset {
    /// A reader of the plaintext of the Tink stream `r`, encrypted under one of this keyset's
    /// keys with associated data `aad`. The header is read here (with several keys of the same
    /// header length, the first segment too, to find the key that opens it, as Tink does).
    ///
    /// Reads return only plaintext whose segment has authenticated. A wrong key or AAD,
    /// tampering, truncation (also at a segment boundary), reordering or bytes after the last
    /// segment make a read fail with [`io::ErrorKind::InvalidData`] and the reason
    /// ([`Error::from_io`] gives the [`Error`]); the failure is final.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// let keyset = gcmx_stream::Keyset::generate(gcmx_stream::KeySize::Aes256, 4096)?;
    /// let mut w = keyset.encrypting_writer(Vec::new(), b"file 1")?;
    /// w.write_all(&[42u8; 10_000])?;
    /// let ciphertext = w.finish()?;
    ///
    /// let mut plain = Vec::new();
    /// keyset.decrypting_reader(&ciphertext[..], b"file 1")?.read_to_end(&mut plain)?;
    /// assert_eq!(plain, [42u8; 10_000]);
    ///
    /// let mut r = keyset.decrypting_reader(&ciphertext[..], b"file 2")?;
    /// let err = r.read_to_end(&mut Vec::new()).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decrypting_reader<R: Read>(&self, r: R, aad: &[u8]) -> Result<DecryptingReader<R>> {
        self.decrypting_reader_with(r, aad, &Options::default())
    }

    /// [`Keyset::decrypting_reader`] with a backend and window size.
    pub fn decrypting_reader_with<R: Read>(
        &self,
        r: R,
        aad: &[u8],
        opts: &Options,
    ) -> Result<DecryptingReader<R>> {
        self.reader(r, aad, opts, None)
    }

    /// [`Keyset::decrypting_reader`] over a buffered source, such as a slice, a
    /// [`Cursor`](std::io::Cursor) or a [`BufReader`](std::io::BufReader): the same reader, which
    /// takes the ciphertext from the source's own buffer instead of copying it out on the
    /// calling thread first. Where that buffer holds whole segments (an in-memory stream holds
    /// them all), each segment is opened from it by the task that opens it, on every core, in one
    /// pass; with the reader's [`BufRead`] methods on the other side, no byte is copied on the
    /// calling thread. Fails and authenticates exactly as [`Keyset::decrypting_reader`].
    ///
    /// ```
    /// use std::io::{self, BufRead, Write};
    /// let keyset = gcmx_stream::Keyset::generate(gcmx_stream::KeySize::Aes256, 4096)?;
    /// let mut w = keyset.encrypting_writer(Vec::new(), b"blob")?;
    /// w.write_all(&[7u8; 100_000])?;
    /// let ciphertext = w.finish()?;
    ///
    /// // The plaintext a segment at a time, straight from the reader's window.
    /// let mut r = keyset.decrypting_reader_buffered(&ciphertext[..], b"blob")?;
    /// let mut sum = 0u64;
    /// loop {
    ///     let plain = r.fill_buf()?;
    ///     if plain.is_empty() {
    ///         break;
    ///     }
    ///     sum += plain.iter().map(|&b| u64::from(b)).sum::<u64>();
    ///     let n = plain.len();
    ///     r.consume(n);
    /// }
    /// assert_eq!(sum, 700_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decrypting_reader_buffered<R: BufRead>(
        &self,
        r: R,
        aad: &[u8],
    ) -> Result<DecryptingReader<R>> {
        self.decrypting_reader_buffered_with(r, aad, &Options::default())
    }

    /// [`Keyset::decrypting_reader_buffered`] with a backend and window size.
    pub fn decrypting_reader_buffered_with<R: BufRead>(
        &self,
        r: R,
        aad: &[u8],
        opts: &Options,
    ) -> Result<DecryptingReader<R>> {
        let source = Buffered {
            fill: <R as BufRead>::fill_buf,
            consume: <R as BufRead>::consume,
        };
        self.reader(r, aad, opts, Some(source))
    }

    fn reader<R: Read>(
        &self,
        mut r: R,
        aad: &[u8],
        opts: &Options,
        buffered: Option<Buffered<R>>,
    ) -> Result<DecryptingReader<R>> {
        let (key, header, _, head) = read_header(&mut r, self, aad)?;
        let layout = key.layout();
        let per_window = opts.window_segments(&layout, None, Use::Adapter)?;
        let gcm = Engine::new(&key.stream_key(&header, aad)?, opts.backend())?;
        Ok(DecryptingReader {
            inner: r,
            buffered,
            head: head.unwrap_or_default(),
            head_pos: 0,
            opener: Opener::new(gcm, header.nonce_prefix, layout, per_window),
            poison: Poison::default(),
        })
    }
}

/// A buffered source's two [`BufRead`] methods, taken where the bound is known, so that one
/// reader type serves both kinds of source.
struct Buffered<R> {
    fill: fn(&mut R) -> io::Result<&[u8]>,
    consume: fn(&mut R, usize),
}

impl<R> Clone for Buffered<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for Buffered<R> {}

/// Decrypts a Tink AES-GCM-HKDF stream read from an inner reader, a window of segments at a
/// time (opened in parallel), and returns only authenticated plaintext. Made by
/// [`Keyset::decrypting_reader`] and [`Keyset::decrypting_reader_buffered`].
///
/// The end of the plaintext (a read returning 0, or an empty [`BufRead::fill_buf`]) comes
/// only after the last segment, sealed as the last, has authenticated and the inner reader has
/// ended. [`BufRead::fill_buf`] hands out the rest of the current segment's plaintext from the
/// window itself. The window, which holds plaintext, is wiped on drop.
///
/// An error of the inner reader is returned as it is and ends nothing: what was read before it
/// is kept (its authenticated plaintext returned first), and the next call reads on from there,
/// so a transient error (`WouldBlock`, `TimedOut`, `Interrupted`) can be retried. A failed
/// authentication or a malformed stream is final. A reader whose call panicked (in the inner
/// reader, say, whose panic the caller caught) is poisoned: every later call fails with
/// [`ErrorKind::Poisoned`](crate::ErrorKind::Poisoned).
pub struct DecryptingReader<R> {
    inner: R,
    /// Set for a buffered source: its buffer is read in place.
    buffered: Option<Buffered<R>>,
    /// Bytes read past the header to find the key, to be read before `inner`.
    head: Vec<u8>,
    head_pos: usize,
    opener: Opener,
    poison: Poison,
}

/// Where an [`Opener`] is.
enum State {
    /// Reading ciphertext into the window.
    Filling,
    /// Handing out the opened window's plaintext: segment `seg`, from byte `pos`.
    Serving { seg: usize, pos: usize, end: bool },
    /// The last segment was handed out.
    Done,
    /// A failure: the stream cannot be read further.
    Failed(Error),
}

/// The sans-I/O core shared with the async reader: ciphertext into a window, authenticated
/// plaintext out.
pub(crate) struct Opener {
    gcm: Engine,
    prefix: [u8; 7],
    layout: Layout,
    per_window: usize,
    /// Segments in a group of a direct read (see [`Opener::group_segments`]).
    per_group: usize,
    window: Window,
    /// Ciphertext bytes in the window.
    got: usize,
    /// Ciphertext bytes of a full window plus one byte of look-ahead (which tells whether
    /// the window's last segment is the stream's last).
    target: usize,
    /// The look-ahead byte of the previous window: the first byte of this one.
    carry: Option<u8>,
    next_index: u64,
    state: State,
}

impl Opener {
    pub(crate) fn new(gcm: Engine, prefix: [u8; 7], layout: Layout, per_window: usize) -> Self {
        // The GPU's windows are page-locked: its batches move them in place.
        let window = Window::with_pinning(if gcm.on_gpu() {
            Pinning::IfKept
        } else {
            Pinning::No
        });
        let mut o = Opener {
            gcm,
            prefix,
            layout,
            per_window,
            per_group: 1,
            window,
            got: 0,
            target: 0,
            carry: None,
            next_index: 0,
            state: State::Filling,
        };
        o.target = o.full_window() + 1;
        o.per_group = o.group_segments();
        o
    }

    fn full_window(&self) -> usize {
        self.window_ciphertext(self.next_index)
    }

    /// Ciphertext bytes of a full window whose first segment is `first`.
    fn window_ciphertext(&self, first: u64) -> usize {
        (first..first + self.per_window as u64)
            .map(|i| self.layout.ciphertext_len(i))
            .sum()
    }

    /// Segments opened so far.
    pub(crate) fn segments_opened(&self) -> u64 {
        self.next_index
    }

    pub(crate) fn fail(&mut self, e: Error) -> io::Error {
        self.state = State::Failed(e.clone());
        e.into()
    }

    /// The authenticated plaintext ready to be read (empty when a read is needed, or at the
    /// end, or after a failure).
    pub(crate) fn plaintext(&self) -> &[u8] {
        match self.state {
            State::Serving { seg, pos, .. } => {
                let s = &self.window.segs[seg];
                &self.window.buf[s.off + pos..s.off + s.len - TAG_LEN]
            }
            _ => &[],
        }
    }

    /// Copies ready plaintext into `out`: the rest of the current segment and, when `out` has
    /// room, of the window's segments after it, in one copy (on rayon's pool when large); the
    /// bytes copied, handed out.
    pub(crate) fn read_plaintext(&mut self, out: &mut [u8]) -> usize {
        let p = self.plaintext();
        if p.len() >= out.len() {
            let n = out.len();
            copy(out, &p[..n]);
            self.consume(n);
            return n;
        }
        let State::Serving { seg, pos, .. } = self.state else {
            return 0;
        };
        let mut runs = Vec::new();
        let (mut to, mut pos) = (0, pos);
        for s in &self.window.segs[seg..] {
            let body = s.len - TAG_LEN;
            let n = (body - pos).min(out.len() - to);
            runs.push(Run {
                to,
                from: s.off + pos,
                len: n,
            });
            to += n;
            pos = 0;
            if to == out.len() {
                break;
            }
        }
        copy_runs(out, &self.window.buf, &runs);
        // Segment by segment, in order: each consume moves on to the next segment once one is
        // handed out, and past the window's end as a read of the rest would.
        for r in &runs {
            self.consume(r.len);
        }
        to
    }

    /// `n` bytes of [`Opener::plaintext`] were handed out.
    pub(crate) fn consume(&mut self, n: usize) {
        if let State::Serving { seg, pos, end } = self.state {
            let s = &self.window.segs[seg];
            let pos = (pos + n).min(s.len - TAG_LEN);
            self.state = State::Serving { seg, pos, end };
            self.skip_empty();
        }
    }

    /// Moves past segments that are fully handed out.
    fn skip_empty(&mut self) {
        while let State::Serving { seg, pos, end } = self.state {
            let s = &self.window.segs[seg];
            if pos < s.len - TAG_LEN {
                return;
            }
            if seg + 1 < self.window.segs.len() {
                self.state = State::Serving {
                    seg: seg + 1,
                    pos: 0,
                    end,
                };
            } else if end {
                self.state = State::Done;
            } else {
                self.start_window();
            }
        }
    }

    fn start_window(&mut self) {
        pin_from_now(&mut self.window);
        self.target = self.full_window() + 1;
        self.got = 0;
        if let Some(b) = self.carry.take() {
            // The window is at least as large as the carried byte.
            self.window.buf[0] = b;
            self.got = 1;
        }
        self.state = State::Filling;
    }

    /// How many whole segments, from the next one, a read of `len` bytes can take straight
    /// into the caller's buffer: only between windows (nothing buffered but at most the first
    /// byte of the next segment). On the CPU more than a window: the segments are opened group
    /// by group as they arrive, and the window bounds only the reader's own memory; on the GPU
    /// a window at most.
    fn direct_segments(&self, len: usize) -> usize {
        if !matches!(self.state, State::Filling) || self.got > 1 || self.through_window() {
            return 0;
        }
        let most = if self.gcm.on_gpu() {
            self.per_window
        } else {
            DIRECT_MAX_SEGMENTS.max(self.per_window)
        };
        let (mut k, mut total) = (0, 0);
        while k < most {
            let index = self.next_index + k as u64;
            let p = self.layout.plaintext_len(index);
            if index > u64::from(u32::MAX) || total + p > len {
                break;
            }
            total += p;
            k += 1;
        }
        // On the GPU a call costs a transfer and a wait whatever its size: there a read goes
        // straight to the caller's buffer only when it takes a whole window.
        if self.gcm.on_gpu() && k < self.per_window {
            return 0;
        }
        k
    }

    /// Whether reads go through the window even when they could take whole segments straight
    /// into the caller's buffer: with page-locked windows (the GPU's, whose segments it moves
    /// in place), where segments in the caller's buffer would be copied through staging and
    /// back (two copies on the CPU's cores, against one out of the window).
    fn through_window(&self) -> bool {
        self.window.pin != Pinning::No
    }

    /// Whether a large read can go through two windows in turn ([`crate::piped`]): on the GPU
    /// with page-locked windows, at the start of a window.
    fn can_pipe(&self) -> bool {
        matches!(self.state, State::Filling)
            && self.got <= 1
            && self.carry.is_none()
            && self.through_window()
    }

    /// The windows, from the next one, whose ciphertext a source's buffer of `src` bytes holds
    /// with a byte more (so that none holds the stream's last segment), but for the first `pre`
    /// bytes, in the window already, and whose plaintext fits in `out` bytes; with the
    /// ciphertext bytes they take from the source.
    fn plan_windows(&self, src: usize, out: usize, pre: usize) -> (Vec<Planned>, usize) {
        let (mut plan, mut used, mut filled) = (Vec::new(), 0, 0);
        let mut first = self.next_index;
        loop {
            let count = self.per_window as u64;
            if first + count > u64::from(u32::MAX) + 1 {
                break;
            }
            let ct = self.window_ciphertext(first);
            let pt: usize = (first..first + count)
                .map(|i| self.layout.plaintext_len(i))
                .sum();
            let need = ct - if plan.is_empty() { pre } else { 0 };
            if used + need >= src || filled + pt > out {
                break;
            }
            plan.push(Planned {
                first,
                count: self.per_window,
            });
            (used, filled, first) = (used + need, filled + pt, first + count);
        }
        (plan, used)
    }

    /// Segments in a group of a direct read: about [`GROUP_BYTES`], at most a window (a group
    /// that the input ends in or right after goes to the window). On the GPU a whole window,
    /// one batch.
    fn group_segments(&self) -> usize {
        if self.gcm.on_gpu() {
            return self.per_window;
        }
        GROUP_BYTES
            .div_ceil(self.layout.segment_size())
            .clamp(1, self.per_window)
    }

    /// Starts the next window with `first`, its first byte.
    fn restart_with(&mut self, first: u8) -> io::Result<()> {
        pin_from_now(&mut self.window);
        self.target = self.full_window() + 1;
        let cap = self.per_window * self.layout.segment_size() + 1;
        reserve_window(&mut self.window, 1, cap)?;
        self.window.buf[0] = first;
        self.window.high_water = self.window.high_water.max(1);
        self.got = 1;
        self.state = State::Filling;
        Ok(())
    }

    /// Whether the stream ended (every segment handed out).
    pub(crate) fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// The failure that ended the stream, if any.
    pub(crate) fn check(&self) -> io::Result<()> {
        match &self.state {
            State::Failed(e) => Err(e.clone().into()),
            _ => Ok(()),
        }
    }

    /// Where to read the next ciphertext bytes; `None` unless filling.
    pub(crate) fn want(&mut self) -> io::Result<Option<&mut [u8]>> {
        if !matches!(self.state, State::Filling) {
            return Ok(None);
        }
        if self.window.buf.len() <= self.got {
            let cap = self.per_window * self.layout.segment_size() + 1;
            reserve_window(&mut self.window, self.got + 1, cap).map_err(|e| {
                let e = Error::io("cannot read input", e);
                self.fail(e)
            })?;
        }
        let end = self.window.buf.len().min(self.target);
        Ok(Some(&mut self.window.buf[self.got..end]))
    }

    /// `n` bytes were read into [`Opener::want`]'s buffer; 0 is the end of the input.
    pub(crate) fn filled(&mut self, n: usize) -> io::Result<()> {
        self.got += n;
        self.window.high_water = self.window.high_water.max(self.got);
        if n == 0 || self.got == self.target {
            let r = self.open(n == 0);
            if let Err(e) = r {
                return Err(self.fail(e));
            }
            self.skip_empty();
        }
        Ok(())
    }

    /// Cuts the window into segments and opens them.
    fn open(&mut self, eof: bool) -> Result<()> {
        let body = if eof { self.got } else { self.got - 1 };
        if !eof {
            self.carry = Some(self.window.buf[body]);
        }
        let next = self.cut(body, eof)?;
        open_window(&self.gcm, &self.prefix, &mut self.window)?;
        self.opened(next, eof);
        Ok(())
    }

    /// Whether a window can be opened from a source's buffer ([`Opener::open_from`]): at the
    /// start of a window (at most its first byte in it), on the CPU.
    fn can_open_from(&self) -> bool {
        matches!(self.state, State::Filling) && self.got <= 1 && self.gcm.has_serial()
    }

    /// Opens a full window whose ciphertext (but for the byte already in the window, if any)
    /// is at the start of `src`, a source's buffer, each segment opened from it into the window by
    /// its own task: `Some(bytes of src used)`, or `None` (nothing done) unless
    /// [`Opener::can_open_from`] and `src` holds the window and a byte more (so that none of
    /// its segments is the stream's last).
    pub(crate) fn open_from(&mut self, src: &[u8]) -> Result<Option<usize>> {
        let pre = self.got;
        let full = self.full_window();
        if !self.can_open_from() || src.len() <= full - pre {
            return Ok(None);
        }
        let cap = self.per_window * self.layout.segment_size() + 1;
        reserve_window(&mut self.window, full, cap)
            .map_err(|e| Error::io("cannot read input", e))?;
        let next = self.cut(full, false)?;
        open_window_from(&self.gcm, &self.prefix, &mut self.window, pre, src)?;
        self.opened(next, false);
        self.skip_empty();
        Ok(Some(full - pre))
    }

    /// The window's segments opened: `next` is the index of the one after them.
    fn opened(&mut self, next: u64, eof: bool) {
        self.next_index = next;
        self.state = State::Serving {
            seg: 0,
            pos: 0,
            end: eof,
        };
    }

    /// Cuts the window's first `body` bytes into segments (the last one the stream's last if
    /// `eof`): the index of the segment after them.
    fn cut(&mut self, body: usize, eof: bool) -> Result<u64> {
        let w = &mut self.window;
        w.segs.clear();
        w.first_index = self.next_index;
        // No bytes at the end of the input: the segment before them (if any) was opened as not
        // the last, so the stream was cut short.
        if body == 0 {
            return Err(Error::format(if self.next_index == 0 {
                "ciphertext is truncated: it has a header but no segment"
            } else {
                "ciphertext is truncated: it ends after a segment that is not the last"
            }));
        }
        let mut off = 0;
        let mut index = self.next_index;
        while off < body {
            if index > u64::from(u32::MAX) {
                return Err(Error::format("ciphertext has more than 2^32 segments"));
            }
            let len = self.layout.ciphertext_len(index).min(body - off);
            if len < TAG_LEN {
                return Err(Error::format(
                    "ciphertext is truncated: last segment is shorter than a tag",
                ));
            }
            w.segs.push(Seg {
                off,
                len,
                last: false,
            });
            off += len;
            index += 1;
        }
        if eof && let Some(s) = w.segs.last_mut() {
            s.last = true;
        }
        Ok(index)
    }
}

impl<R: Read> DecryptingReader<R> {
    /// Reads ciphertext: the bytes read past the header first, then the inner reader (from a
    /// buffered source's buffer, copied on rayon's pool when large).
    fn read_ciphertext(
        inner: &mut R,
        buffered: Option<Buffered<R>>,
        head: &[u8],
        head_pos: &mut usize,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        if *head_pos < head.len() {
            let n = (head.len() - *head_pos).min(buf.len());
            buf[..n].copy_from_slice(&head[*head_pos..*head_pos + n]);
            *head_pos += n;
            return Ok(n);
        }
        if let Some(b) = buffered {
            loop {
                match (b.fill)(inner) {
                    Ok(src) => {
                        let n = src.len().min(buf.len());
                        copy(&mut buf[..n], &src[..n]);
                        (b.consume)(inner, n);
                        return Ok(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        loop {
            match inner.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    /// The inner reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// Reads ciphertext until `buf` is full, the input ends or a read fails: the bytes read,
    /// and the error that stopped it.
    fn read_full(
        inner: &mut R,
        buffered: Option<Buffered<R>>,
        head: &[u8],
        head_pos: &mut usize,
        buf: &mut [u8],
    ) -> (usize, Option<io::Error>) {
        let mut n = 0;
        while n < buf.len() {
            match Self::read_ciphertext(inner, buffered, head, head_pos, &mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) => return (n, Some(e)),
            }
        }
        (n, None)
    }

    /// Opens the first of `k` whole segments that a buffered source's buffer holds (with a
    /// byte after them, so that none is the stream's last) straight in `out`: each segment
    /// opened from the source's buffer by its own task, on every core. `Some(bytes)`
    /// of plaintext, or `None` (nothing done) when the source is not buffered or its buffer
    /// does not hold a segment and a byte, or the engine is not the CPU's. On failure the
    /// stream fails and what this call wrote to `out` is wiped.
    fn read_direct_from(&mut self, out: &mut [u8], k: usize) -> io::Result<Option<usize>> {
        let DecryptingReader {
            inner,
            buffered,
            head,
            head_pos,
            opener,
            ..
        } = self;
        let Some(b) = *buffered else {
            return Ok(None);
        };
        if *head_pos < head.len() || !opener.can_open_from() {
            return Ok(None);
        }
        // A failed read (`Interrupted` included, as from `fill_buf` itself) consumed nothing:
        // the caller may retry.
        let src = (b.fill)(inner)?;
        // The first byte of the first segment may be in the window already (the look-ahead
        // of the window before).
        let pre = opener.got;
        let (first, layout) = (opener.next_index, opener.layout);
        let (mut m, mut used, mut total) = (0, 0, 0);
        while m < k {
            let c = layout.ciphertext_len(first + m as u64) - if m == 0 { pre } else { 0 };
            if used + c >= src.len() {
                break;
            }
            used += c;
            total += layout.plaintext_len(first + m as u64);
            m += 1;
        }
        if m == 0 {
            return Ok(None);
        }
        // A read this large outlives the caches: its first lines are evicted before it returns.
        let uncached = out.len() >= UNCACHED_READ;
        let mut bodies = Vec::with_capacity(m);
        let mut rest = &mut out[..total];
        for i in first..first + m as u64 {
            let (body, tail) = mem::take(&mut rest).split_at_mut(layout.plaintext_len(i));
            rest = tail;
            bodies.push(body);
        }
        if pre == 1 {
            bodies[0][0] = opener.window.buf[0];
        }
        let gcm = &opener.gcm;
        if let Err(e) = open_from_source(gcm, &opener.prefix, first, bodies, pre, src, uncached) {
            wipe(&mut out[..total]);
            return Err(opener.fail(e));
        }
        (b.consume)(inner, used);
        opener.next_index = first + m as u64;
        opener.got = 0;
        opener.target = opener.full_window() + 1;
        Ok(Some(total))
    }

    /// On the GPU, a read of two windows or more from a buffered source whose buffer holds
    /// them and a byte more, through two page-locked windows in turn ([`piped::read_piped`]):
    /// `Some(bytes)` of plaintext, or `None` (nothing done) when that does not apply. When a
    /// window fails, the plaintext of those before it is returned and the stream fails (the
    /// next read reports it).
    fn read_piped(&mut self, out: &mut [u8]) -> io::Result<Option<usize>> {
        let DecryptingReader {
            inner,
            buffered,
            head,
            head_pos,
            opener,
            ..
        } = self;
        let Some(b) = *buffered else {
            return Ok(None);
        };
        if *head_pos < head.len() || !opener.can_pipe() {
            return Ok(None);
        }
        // A failed read (`Interrupted` included) consumed nothing: the caller may retry.
        let src = (b.fill)(inner)?;
        let pre = opener.got;
        let (plan, used) = opener.plan_windows(src.len(), out.len(), pre);
        if plan.len() < 2 {
            return Ok(None);
        }
        let cap = opener.per_window * opener.layout.segment_size() + 1;
        // The stream outgrows a window: its windows are page-locked from here on (the byte
        // of the window that is there already kept).
        let carried = (pre == 1).then(|| opener.window.buf[0]);
        pin_from_now(&mut opener.window);
        if let Some(c) = carried {
            if let Err(e) = reserve_window(&mut opener.window, 1, cap) {
                return Err(opener.fail(Error::io("cannot read input", e)));
            }
            opener.window.buf[0] = c;
        }
        let (n, r) = piped::read_piped(
            &opener.gcm,
            &opener.prefix,
            &opener.layout,
            &mut opener.window,
            pre,
            src,
            out,
            &plan,
            cap,
        );
        if let Err(e) = r {
            let e = opener.fail(e);
            return if n > 0 { Ok(Some(n)) } else { Err(e) };
        }
        (b.consume)(inner, used);
        let end = plan
            .last()
            .map_or(opener.next_index, |p| p.first + p.count as u64);
        opener.next_index = end;
        opener.got = 0;
        opener.target = opener.full_window() + 1;
        Ok(Some(n))
    }

    /// One step towards plaintext in the window: from a buffered source's buffer holding a
    /// window and a byte more, the window opened on every core ([`Opener::open_from`]);
    /// otherwise one read of ciphertext into the window.
    fn fill_step(&mut self) -> io::Result<()> {
        if let Some(b) = self.buffered
            && self.head_pos >= self.head.len()
            && self.opener.can_open_from()
        {
            // A failed read consumed nothing: the caller may retry.
            let src = (b.fill)(&mut self.inner)?;
            match self.opener.open_from(src) {
                Ok(Some(used)) => {
                    (b.consume)(&mut self.inner, used);
                    return Ok(());
                }
                Ok(None) => {}
                Err(e) => return Err(self.opener.fail(e)),
            }
        }
        if let Some(buf) = self.opener.want()? {
            // A failed read leaves the window as it was: the caller may retry.
            let n = Self::read_ciphertext(
                &mut self.inner,
                self.buffered,
                &self.head,
                &mut self.head_pos,
                buf,
            )?;
            self.opener.filled(n)?;
        }
        Ok(())
    }

    /// Reads and opens `k` whole segments straight in `out`, their tags aside, saving the
    /// copy through the window: `Some(bytes)` of plaintext. The segments are read in groups;
    /// once a byte of the next group has arrived (so that a group holds no last segment), a
    /// group is opened on rayon's pool while this thread reads on, and the last one here after
    /// the look-ahead byte: the copy and the opens overlap. When the input ends in a group or
    /// right after it (it may hold the last segment), that group goes to the window in stream
    /// order: the plaintext of the groups before it is returned, or `None` tells the caller to
    /// go on through the window. An error of the source pauses the read in the same way: the
    /// plaintext of the groups opened before it is returned (or, if none, the error), and what
    /// was read of the others waits in the window for the next call, so that a transient error
    /// (`WouldBlock`, `TimedOut`) can be retried. When a group fails to authenticate, the
    /// stream fails and what this call wrote to `out` is wiped: it never keeps plaintext of a
    /// failed call.
    fn read_direct(&mut self, out: &mut [u8], k: usize) -> io::Result<Option<usize>> {
        let DecryptingReader {
            inner,
            buffered,
            head,
            head_pos,
            opener,
            ..
        } = self;
        let buffered = *buffered;
        let first = opener.next_index;
        let end = first + k as u64;
        let layout = opener.layout;
        let per_group = opener.per_group;
        let carry = (opener.got == 1).then(|| opener.window.buf[0]);
        let total: usize = (first..end).map(|i| layout.plaintext_len(i)).sum();
        let (gcm, prefix) = (&opener.gcm, opener.prefix);
        let failure: FirstFailure = Mutex::new(None);
        let stop = AtomicBool::new(false);
        // The end of what this call may have written in `out`.
        let mut reached = 0;
        let head = &head[..];
        let src = |inner: &mut R, head_pos: &mut usize, buf: &mut [u8]| {
            Self::read_full(inner, buffered, head, head_pos, buf)
        };
        // The inner reader stays on this thread (it need not be Send): the scope's closure runs
        // here, and only the groups' buffers and tags go to the pool.
        let outcome = rayon::in_place_scope(|s| -> Direct<'_> {
            let (failure, stop) = (&failure, &stop);
            let mut rest = &mut out[..total];
            let mut pending: Option<Group<'_>> = None;
            let (mut index, mut at) = (first, 0);
            while index < end {
                let count = per_group.min((end - index) as usize);
                let len: usize = (index..index + count as u64)
                    .map(|i| layout.plaintext_len(i))
                    .sum();
                let (buf, tail) = mem::take(&mut rest).split_at_mut(len);
                rest = tail;
                reached = at + len;
                let mut g = Group {
                    first: index,
                    at,
                    buf,
                    tags: vec![[0u8; TAG_LEN]; count],
                    read: Vec::with_capacity(count),
                };
                // From a buffered source whose buffer holds the whole group: one copy of it on
                // every core (a copy per segment on this thread costs more than a GPU's open).
                if let Some(b) = buffered
                    && *head_pos >= head.len()
                    && !stop.load(Ordering::Relaxed)
                {
                    let skip = match carry {
                        Some(c) if index == first => {
                            g.buf[0] = c;
                            1
                        }
                        _ => 0,
                    };
                    match group_from_buffer(inner, b, &mut g, layout, skip) {
                        Ok(true) => {
                            // The group's bytes came: the previous group holds no last segment.
                            if let Some(prev) = pending.take() {
                                s.spawn(move |_| {
                                    open_group(gcm, &prefix, layout, prev, failure, stop);
                                });
                            }
                            pending = Some(g);
                            index += count as u64;
                            at += len;
                            continue;
                        }
                        Ok(false) => {}
                        // Nothing of this group was consumed: the stream pauses before it (or
                        // before the group still pending, which may hold the last segment).
                        Err(e) => {
                            if skip == 1 {
                                g.read.push((1, 0));
                            }
                            return Direct::Paused(pending.unwrap_or(g), e);
                        }
                    }
                }
                let mut off = 0;
                for j in 0..count {
                    if stop.load(Ordering::Relaxed) {
                        return Direct::Stopped;
                    }
                    let p = layout.plaintext_len(index + j as u64);
                    let body = &mut g.buf[off..off + p];
                    let mut n = 0;
                    if index == first
                        && j == 0
                        && let Some(b) = carry
                    {
                        body[0] = b;
                        n = 1;
                    }
                    if j == 0
                        && let Some(prev) = pending.take()
                    {
                        // A byte of this group tells that the previous one holds no last
                        // segment: it is opened while this one is read.
                        match src(inner, head_pos, &mut body[..1]) {
                            (0, None) => return Direct::Ended(prev),
                            (0, Some(e)) => return Direct::Paused(prev, e),
                            _ => {}
                        }
                        n = 1;
                        s.spawn(move |_| open_group(gcm, &prefix, layout, prev, failure, stop));
                    }
                    let (got, mut err) = src(inner, head_pos, &mut body[n..]);
                    n += got;
                    let mut t = 0;
                    if n == p && err.is_none() {
                        (t, err) = src(inner, head_pos, &mut g.tags[j]);
                    }
                    g.read.push((n, t));
                    off += p;
                    if let Some(e) = err {
                        return Direct::Paused(g, e);
                    }
                    if n < p || t < TAG_LEN {
                        return Direct::Ended(g);
                    }
                }
                pending = Some(g);
                index += count as u64;
                at += len;
            }
            let mut look = [0u8; 1];
            match (src(inner, head_pos, &mut look), pending) {
                (_, None) => Direct::Stopped, // k > 0: there is a last group
                ((0, None), Some(last)) => Direct::Ended(last),
                ((0, Some(e)), Some(last)) => Direct::Paused(last, e),
                (_, Some(last)) => {
                    // The caller's thread would only wait: it opens the last group itself.
                    open_group(gcm, &prefix, layout, last, failure, stop);
                    Direct::Complete(look[0])
                }
            }
        });
        // Every group's task has ended here.
        if let Some((_, e)) = failure.into_inner().unwrap_or_else(PoisonError::into_inner) {
            wipe(&mut out[..reached]);
            return Err(opener.fail(e));
        }
        let (g, paused) = match outcome {
            Direct::Complete(look) => {
                opener.next_index = end;
                // The plaintext is authenticated: it is returned even if the window cannot be
                // had for the look-ahead byte (the next read then reports the failure).
                if let Err(e) = opener.restart_with(look) {
                    opener.fail(Error::io("cannot read input", e));
                }
                return Ok(Some(total));
            }
            Direct::Ended(g) => (g, None),
            Direct::Paused(g, e) => (g, Some(e)),
            Direct::Stopped => {
                wipe(&mut out[..reached]);
                return Err(opener.fail(auth_error(first, k as u64)));
            }
        };
        // The groups before `g` were opened (none of them holds the last segment); what was read
        // of `g` goes back in stream order in the window, where it is opened with the end of the
        // stream in view, or (paused) read on by the next call.
        let opened = g.at;
        opener.next_index = g.first;
        opener.target = opener.full_window() + 1;
        let read: usize = g.read.iter().map(|(n, t)| n + t).sum();
        let cap = opener.per_window * layout.segment_size() + 1;
        if let Err(e) = reserve_window(&mut opener.window, read.max(1), cap) {
            wipe(g.buf);
            let e = opener.fail(Error::io("cannot read input", e));
            return if opened > 0 { Ok(Some(opened)) } else { Err(e) };
        }
        let (mut at, mut src) = (0, 0);
        let buf = &mut opener.window.buf;
        for (j, &(n, t)) in g.read.iter().enumerate() {
            buf[at..at + n].copy_from_slice(&g.buf[src..src + n]);
            buf[at + n..at + n + t].copy_from_slice(&g.tags[j][..t]);
            at += n + t;
            src += layout.plaintext_len(g.first + j as u64);
        }
        opener.window.high_water = opener.window.high_water.max(at);
        opener.got = at;
        // The group's ciphertext now lives in the window: the caller's buffer keeps no more than
        // what the call returns.
        wipe(g.buf);
        if let Some(e) = paused {
            // The source failed: nothing is lost, and the next call reads on from here (the
            // source's error again, if it lasts).
            return if opened > 0 { Ok(Some(opened)) } else { Err(e) };
        }
        // A failure here is the stream's (kept in the opener): with plaintext to return, the
        // next read reports it.
        let r = opener.filled(0);
        if opened > 0 {
            return Ok(Some(opened));
        }
        r?;
        Ok(None)
    }
}

/// Segments of a direct read, in the caller's buffer, opened together.
struct Group<'a> {
    /// The stream index of the first segment.
    first: u64,
    /// Where `buf` starts in the caller's buffer.
    at: usize,
    /// The segments' bodies back to back: ciphertext, then plaintext once opened.
    buf: &'a mut [u8],
    tags: Vec<[u8; TAG_LEN]>,
    /// Body and tag bytes read, per segment reached.
    read: Vec<(usize, usize)>,
}

/// Fills `g` (its bodies, after the first `skip` bytes that are there already, and its tags)
/// from the buffer of the buffered source `inner` when that buffer holds the group's whole
/// ciphertext: the bodies copied on rayon's pool in one call, and the bytes consumed.
/// `Ok(false)`, nothing consumed, when the buffer holds less (or the fill was interrupted).
fn group_from_buffer<R>(
    inner: &mut R,
    b: Buffered<R>,
    g: &mut Group<'_>,
    layout: Layout,
    skip: usize,
) -> io::Result<bool> {
    let lens: Vec<usize> = (0..g.tags.len() as u64)
        .map(|j| layout.plaintext_len(g.first + j))
        .collect();
    let need = lens.iter().map(|p| p + TAG_LEN).sum::<usize>() - skip;
    let src = match (b.fill)(inner) {
        Ok(src) if src.len() >= need => src,
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut runs = Vec::with_capacity(lens.len());
    let (mut to, mut at) = (skip, 0);
    for (j, &p) in lens.iter().enumerate() {
        let n = if j == 0 { p - skip } else { p };
        runs.push(Run {
            to,
            from: at,
            len: n,
        });
        g.tags[j].copy_from_slice(&src[at + n..at + n + TAG_LEN]);
        (to, at) = (to + n, at + n + TAG_LEN);
    }
    copy_runs(g.buf, src, &runs);
    (b.consume)(inner, need);
    g.read.extend(lens.iter().map(|&p| (p, TAG_LEN)));
    Ok(true)
}

/// How the reading of a direct read ended.
enum Direct<'a> {
    /// Every group and the look-ahead byte were read: every group was opened.
    Complete(u8),
    /// The input ended in this group or right after it: it was not opened, every group
    /// before it was.
    Ended(Group<'a>),
    /// A read of the source failed in this group or right after it: as `Ended`, but the input
    /// goes on.
    Paused(Group<'a>, io::Error),
    /// A group failed: reading stopped.
    Stopped,
}

/// The first failure among a direct read's groups: the index of the segment that it names (or
/// of its group's first), and the error.
type FirstFailure = Mutex<Option<(u64, Error)>>;

/// Opens the segments of `g` in place, none of them the stream's last. On failure the error is
/// kept if no earlier segment's is, naming the first segment that did not authenticate (as the
/// window's does), and the reading is stopped.
fn open_group(
    gcm: &Engine,
    prefix: &[u8; 7],
    layout: Layout,
    g: Group<'_>,
    failure: &FirstFailure,
    stop: &AtomicBool,
) {
    let count = g.tags.len();
    let nonces: Vec<_> = (0..count as u64)
        // Direct reads stop at index u32::MAX: the conversion is exact.
        .map(|j| segment_nonce(prefix, (g.first + j) as u32, false))
        .collect();
    let mut bodies = Vec::with_capacity(count);
    let mut rest = g.buf;
    for j in 0..count as u64 {
        let (body, tail) = rest.split_at_mut(layout.plaintext_len(g.first + j));
        rest = tail;
        bodies.push(body);
    }
    let mut jobs: Vec<OpenJob<'_>> = bodies
        .iter_mut()
        .zip(&g.tags)
        .zip(&nonces)
        .map(|((buf, tag), nonce)| OpenJob {
            nonce,
            aad: &[],
            buf,
            tag,
        })
        .collect();
    let r = gcm.open_batch(&mut jobs);
    drop(jobs);
    let (at, e) = match r {
        Ok(()) => return,
        Err(OpenError::Other(e)) => (g.first, e),
        Err(OpenError::Authentication) => {
            // Every buffer holds its ciphertext again.
            let parts = bodies
                .iter()
                .zip(&g.tags)
                .zip(&nonces)
                .map(|((b, t), n)| (&**b, t.as_slice(), n.as_slice()));
            match first_failing(gcm, parts) {
                Some(j) => (g.first + j as u64, auth_error(g.first + j as u64, 1)),
                None => (g.first, auth_error(g.first, count as u64)),
            }
        }
    };
    stop.store(true, Ordering::Relaxed);
    let mut kept = failure.lock().unwrap_or_else(PoisonError::into_inner);
    if kept.as_ref().is_none_or(|(i, _)| at < *i) {
        *kept = Some((at, e));
    }
}

impl<R: Read> Read for DecryptingReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.poison.enter()?;
        let r = self.read_unpoisoned(out);
        self.poison.leave();
        r
    }
}

impl<R: Read> DecryptingReader<R> {
    fn read_unpoisoned(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.opener.check()?;
        // A read of whole segments between windows opens them in the caller's buffer.
        let k = self.opener.direct_segments(out.len());
        if k > 0 {
            if let Some(n) = self.read_direct_from(out, k)? {
                return Ok(n);
            }
            if let Some(n) = self.read_direct(out, k)? {
                return Ok(n);
            }
        }
        if let Some(n) = self.read_piped(out)? {
            return Ok(n);
        }
        loop {
            self.opener.check()?;
            if !self.opener.plaintext().is_empty() || out.is_empty() {
                return Ok(self.opener.read_plaintext(out));
            }
            if self.opener.is_done() {
                return Ok(0);
            }
            self.fill_step()?;
        }
    }
}

impl<R: Read> BufRead for DecryptingReader<R> {
    /// The rest of the current segment's authenticated plaintext, in the window (empty at the
    /// end of the stream); a segment's plaintext is handed out once it and the segments of its
    /// window have authenticated.
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.poison.enter()?;
        let r = self.fill_unpoisoned();
        self.poison.leave();
        r?;
        Ok(self.opener.plaintext())
    }

    fn consume(&mut self, amt: usize) {
        if !self.poison.is_poisoned() {
            self.opener.consume(amt);
        }
    }
}

impl<R: Read> DecryptingReader<R> {
    /// Reads and opens until plaintext is ready or the stream has ended.
    fn fill_unpoisoned(&mut self) -> io::Result<()> {
        loop {
            self.opener.check()?;
            if !self.opener.plaintext().is_empty() || self.opener.is_done() {
                return Ok(());
            }
            self.fill_step()?;
        }
    }
}

impl<R> Drop for DecryptingReader<R> {
    fn drop(&mut self) {
        // The window wipes itself and the engine its key; the kernels' stack leftovers are
        // wiped here.
        wipe_stacks();
    }
}

impl<R: fmt::Debug> fmt::Debug for DecryptingReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecryptingReader")
            .field("inner", &self.inner)
            .field("segments_opened", &self.opener.segments_opened())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{self, BufRead, Read, Write};

    use crate::window::Pinning;
    use crate::{Keyset, Options, StreamingKey};

    fn keyset(dks: usize, seg: u32) -> Keyset {
        Keyset::single(StreamingKey::new(1, &vec![5u8; dks], dks, seg).unwrap())
    }

    fn data(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect()
    }

    /// Plaintext bytes of the first segment and of the others; the header's length.
    fn geometry(ks: &Keyset) -> (usize, usize, usize) {
        let k = ks.primary();
        let header = 1 + k.derived_key_size() + 7;
        let seg = k.segment_size() as usize;
        (seg - header - 16, seg - 16, header)
    }

    fn encrypt(ks: &Keyset, aad: &[u8], pt: &[u8]) -> Vec<u8> {
        let mut w = ks.encrypting_writer(Vec::new(), aad).unwrap();
        w.write_all(pt).unwrap();
        w.finish().unwrap()
    }

    /// What a reader gave: the bytes up to its end or its first error, and that error.
    struct Outcome {
        out: Vec<u8>,
        err: Option<io::Error>,
    }

    /// Where a test reader takes its ciphertext from.
    #[derive(Clone, Copy, Debug)]
    enum Source {
        /// Through `Read` ([`Keyset::decrypting_reader_with`]).
        Read,
        /// A slice through `BufRead`: the whole ciphertext in the source's buffer.
        Slice,
        /// A `BufReader` of this capacity: the buffer holds a part.
        Chunks(usize),
    }

    /// Reads `ct` in reads of `piece` bytes (0: through `fill_buf` and `consume`), with groups
    /// of `group` segments in direct reads (`None`: the reader's own). Before each read the
    /// buffer is filled with 0xAA; after a failed read it holds only 0xAA and zeros (what the
    /// read wrote was wiped), and the failure is final.
    fn read_in(
        ks: &Keyset,
        aad: &[u8],
        ct: &[u8],
        piece: usize,
        window: usize,
        group: Option<usize>,
        source: Source,
    ) -> Outcome {
        let opts = Options::new().with_window_bytes(window);
        match source {
            Source::Read => drive(ks.decrypting_reader_with(ct, aad, &opts), piece, group),
            Source::Slice => drive(
                ks.decrypting_reader_buffered_with(ct, aad, &opts),
                piece,
                group,
            ),
            Source::Chunks(n) => drive(
                ks.decrypting_reader_buffered_with(io::BufReader::with_capacity(n, ct), aad, &opts),
                piece,
                group,
            ),
        }
    }

    fn drive<R: Read>(
        r: crate::Result<super::DecryptingReader<R>>,
        piece: usize,
        group: Option<usize>,
    ) -> Outcome {
        let mut r = match r {
            Ok(r) => r,
            Err(e) => {
                return Outcome {
                    out: Vec::new(),
                    err: Some(e.into()),
                };
            }
        };
        if let Some(g) = group {
            r.opener.per_group = g.clamp(1, r.opener.per_window);
        }
        let mut out = Vec::new();
        if piece == 0 {
            loop {
                match r.fill_buf() {
                    Ok([]) => return Outcome { out, err: None },
                    Ok(p) => {
                        out.extend_from_slice(p);
                        let n = p.len();
                        r.consume(n);
                    }
                    Err(e) => {
                        assert!(r.fill_buf().is_err(), "a fill_buf after a failure");
                        return Outcome { out, err: Some(e) };
                    }
                }
            }
        }
        let mut buf = vec![0u8; piece];
        loop {
            buf.fill(0xAA);
            match r.read(&mut buf) {
                Ok(0) => return Outcome { out, err: None },
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => {
                    assert!(
                        buf.iter().all(|&b| b == 0 || b == 0xAA),
                        "a failed read left other bytes than its own wipe: {e}"
                    );
                    assert!(r.read(&mut buf).is_err(), "a read after a failure");
                    return Outcome { out, err: Some(e) };
                }
            }
        }
    }

    /// The reads of `ct` in large pieces (straight into the buffer, in groups of 1, 2 and 5
    /// segments and the reader's own) and in 7-byte pieces (through the window, but for a
    /// first segment of fewer bytes), from a `Read` source and from buffered ones (the whole
    /// stream, or two and a half segments, in the source's buffer; also through `fill_buf`)
    /// agree: the same plaintext, or the same error after a prefix of the plaintext.
    fn agree(ks: &Keyset, aad: &[u8], ct: &[u8], pt: &[u8], what: &str) -> Option<io::Error> {
        agree_on(ks, aad, ct, pt, what, true)
    }

    /// [`agree`], or with `exact` false, failures of InvalidData both but not necessarily the
    /// same: with two faults (an extension that leaves a short segment after a segment that
    /// does not authenticate), the window finds the short one first when both are in it, a
    /// group the one that comes first.
    fn agree_on(
        ks: &Keyset,
        aad: &[u8],
        ct: &[u8],
        pt: &[u8],
        what: &str,
        exact: bool,
    ) -> Option<io::Error> {
        let (_, p, _) = geometry(ks);
        let seg = ks.primary().segment_size() as usize;
        let window = 6 * seg;
        let small = read_in(ks, aad, ct, 7, window, None, Source::Read);
        assert!(pt.starts_with(&small.out), "{what}: not a prefix");
        let chunks = Source::Chunks(5 * seg / 2);
        let mut ways: Vec<_> = [ct.len() + 64, 4 * p + 3]
            .into_iter()
            .flat_map(|piece| {
                [Some(1), Some(2), Some(5), None].map(|group| (piece, group, Source::Read))
            })
            .collect();
        ways.extend([
            (7, None, Source::Slice),
            (0, None, Source::Slice),
            (0, None, chunks),
            (ct.len() + 64, None, Source::Slice),
            (4 * p + 3, None, Source::Slice),
            (ct.len() + 64, Some(2), chunks),
        ]);
        for (piece, group, source) in ways {
            {
                let large = read_in(ks, aad, ct, piece, window, group, source);
                let how = format!("{what}, reads of {piece}, groups of {group:?}, {source:?}");
                match (&small.err, &large.err) {
                    (None, None) => assert!(large.out == pt, "{how}: other plaintext"),
                    (Some(s), Some(l)) => {
                        assert!(pt.starts_with(&large.out), "{how}: not a prefix");
                        assert_eq!(s.kind(), l.kind(), "{how}");
                        if exact {
                            assert_eq!(s.to_string(), l.to_string(), "{how}");
                        }
                    }
                    (s, l) => panic!("{how}: window path {s:?}, direct path {l:?}"),
                }
            }
        }
        small.err
    }

    /// Segment sizes from the smallest (a 1-byte first segment) to 4 KiB.
    fn keysets() -> Vec<Keyset> {
        vec![
            keyset(16, 41),
            keyset(16, 64),
            keyset(32, 100),
            keyset(16, 256),
            keyset(32, 4096),
        ]
    }

    #[test]
    fn large_reads_of_up_to_fifty_segments_give_the_plaintext() {
        for ks in keysets() {
            let (p0, p, _) = geometry(&ks);
            for m in 0..=50usize {
                let full = if m == 0 { 0 } else { p0 + (m - 1) * p };
                for n in [full, full + 1] {
                    let pt = data(n, (m * 3 + n) as u64);
                    let ct = encrypt(&ks, b"aad", &pt);
                    assert!(
                        agree(&ks, b"aad", &ct, &pt, &format!("{m} segments, {n} bytes")).is_none()
                    );
                }
            }
        }
    }

    #[test]
    fn truncated_flipped_extended_and_wrong_aad_streams_fail_alike() {
        for ks in keysets() {
            let (p0, p, header) = geometry(&ks);
            let seg = ks.primary().segment_size() as usize;
            let counts: &[usize] = if seg < 1024 {
                &[1, 2, 3, 9, 17, 50]
            } else {
                &[1, 2, 3, 9, 17]
            };
            for &m in counts {
                let pt = data(p0 + (m - 1) * p + p / 2, m as u64);
                let ct = encrypt(&ks, b"aad", &pt);
                let what = format!("{seg}-byte segments, {m}");
                // The plaintext offset that each ciphertext offset is part of.
                let plain_at = |c: usize| {
                    if c < seg { 0 } else { p0 + (c - seg) / seg * p }
                };
                let wrong = agree(&ks, b"aad!", &ct, &pt, &format!("{what}: wrong aad"));
                assert!(wrong.unwrap().to_string().contains("segment 0 "));
                // Cut at every segment boundary, one byte either side, and inside segments.
                for s in 0..=m {
                    let b = (s * seg).min(ct.len());
                    for cut in [b, b + 1, b + 15, b + 16, b + seg / 2, b.saturating_sub(1)] {
                        if cut < header || cut >= ct.len() {
                            continue;
                        }
                        let e = agree(
                            &ks,
                            b"aad",
                            &ct[..cut],
                            &pt,
                            &format!("{what}: cut at {cut}"),
                        );
                        assert!(e.is_some(), "{what}: cut at {cut} accepted");
                    }
                }
                // A flipped byte in each segment's body and tag: each group has one.
                for s in 0..m {
                    let end = ((s + 1) * seg).min(ct.len());
                    for at in [(s * seg).max(header), end - 17, end - 1] {
                        let mut bad = ct.clone();
                        bad[at] ^= 0x20;
                        let how = format!("{what}: flip at {at}");
                        let e = agree(&ks, b"aad", &bad, &pt, &how).expect(&how);
                        assert!(
                            e.to_string().contains(&format!("segment {s} ")),
                            "{how}: {e}"
                        );
                        for source in [Source::Read, Source::Slice] {
                            let large =
                                read_in(&ks, b"aad", &bad, bad.len(), 6 * seg, Some(2), source);
                            assert!(
                                large.out.len() <= plain_at(at),
                                "{how}: plaintext past the flip"
                            );
                        }
                    }
                }
                for extra in [1usize, 16, seg + 3] {
                    let mut longer = ct.clone();
                    longer.extend(std::iter::repeat_n(0u8, extra));
                    let how = format!("{what}: {extra} extra");
                    let e = agree_on(&ks, b"aad", &longer, &pt, &how, false);
                    assert!(e.is_some());
                }
            }
        }
    }

    #[test]
    fn a_failed_group_is_wiped_with_the_groups_before_it() {
        let ks = keyset(16, 256);
        let (p0, p, _) = geometry(&ks);
        let pt = data(p0 + 40 * p, 1);
        let mut ct = encrypt(&ks, b"", &pt);
        // Segment 30: the groups of segments 0..30 open before it fails.
        ct[30 * 256 + 5] ^= 1;
        for group in [1, 4, 6] {
            let opts = Options::new().with_window_bytes(6 * 256);
            let mut r = ks.decrypting_reader_with(&ct[..], b"", &opts).unwrap();
            r.opener.per_group = group.min(r.opener.per_window);
            let mut buf = vec![0xAAu8; pt.len() + 100];
            let e = r.read(&mut buf).unwrap_err();
            assert!(e.to_string().contains("segment 30 "), "{e}");
            // Nothing of the groups opened before the failure is left.
            assert!(buf[..p0 + 30 * p].iter().all(|&b| b == 0));
            assert_eq!(r.opener.segments_opened(), 0);
        }
    }

    /// Large reads through two windows in turn (the GPU's path, [`crate::piped`], driven here
    /// by the CPU's engine with the windows marked page-locked): the plaintext whole, in reads
    /// of several windows each, from the start or after a read that leaves a byte of the next
    /// window carried; a damaged window fails the stream with only authenticated plaintext
    /// returned before it.
    #[test]
    fn reads_through_two_windows_in_turn_give_the_plaintext_or_fail() {
        let ks = keyset(16, 256);
        let (p0, p, _) = geometry(&ks);
        let opts = Options::new().with_window_bytes(4 * 256);
        for (n, seed) in [(p0 + 40 * p + 7, 1), (p0 + 39 * p, 2), (p0 + 8 * p, 3)] {
            let pt = data(n, seed);
            let ct = encrypt(&ks, b"", &pt);
            for first in [0usize, 5, p0, p0 + 3 * p] {
                let mut r = ks
                    .decrypting_reader_buffered_with(&ct[..], b"", &opts)
                    .unwrap();
                r.opener.window.pin = Pinning::Yes;
                let mut out = vec![0u8; n];
                r.read_exact(&mut out[..first]).unwrap();
                let mut at = first;
                let mut most = 0;
                while at < n {
                    let k = r.read(&mut out[at..]).unwrap();
                    assert!(k > 0);
                    most = most.max(k);
                    at += k;
                }
                assert_eq!(r.read(&mut [0u8; 1]).unwrap(), 0);
                assert!(out == pt, "{n} bytes, first read {first}");
                // Reads of more than a window (4 segments) took place where two whole windows
                // and a byte follow the first: the piped path ran.
                if n > p0 + 12 * p {
                    assert!(
                        most > 4 * p,
                        "{n} bytes, first read {first}: largest read {most}"
                    );
                }
            }
            if n < p0 + 24 * p {
                continue;
            }
            // A flipped byte in segment 21 (window 5): windows 0..5 are returned, then the
            // failure names the segment, and nothing but their plaintext or zeros is in `out`.
            let mut bad = ct.clone();
            bad[21 * 256 + 9] ^= 1;
            let mut r = ks
                .decrypting_reader_buffered_with(&bad[..], b"", &opts)
                .unwrap();
            r.opener.window.pin = Pinning::Yes;
            let mut out = vec![0u8; n];
            let k = r.read(&mut out).unwrap();
            assert_eq!(k, p0 + 19 * p, "the windows before the damaged one");
            assert!(out[..k] == pt[..k]);
            assert!(out[k..].iter().all(|&b| b == 0));
            let e = r.read(&mut out[k..]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            assert!(e.to_string().contains("segment 21 "), "{e}");
        }
    }

    /// Fails with `ConnectionReset` once `left` bytes were read, `fails` times in a row, then
    /// reads on.
    struct FailsAfter<'a> {
        data: &'a [u8],
        left: usize,
        fails: usize,
    }

    impl Read for FailsAfter<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.left == 0 && self.fails > 0 {
                self.fails -= 1;
                return Err(io::ErrorKind::ConnectionReset.into());
            }
            let n = buf.len().min(self.data.len());
            let n = if self.left > 0 { n.min(self.left) } else { n };
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            self.left -= n.min(self.left);
            Ok(n)
        }
    }

    /// A source that fails in the middle of a direct read: the read returns the plaintext of
    /// the groups opened before the failure, or the source's error (its buffer holding only
    /// its own bytes and zeros then), and the reads after it (the source's error again while
    /// it lasts) give the rest of the plaintext once the source reads on: nothing is lost.
    #[test]
    fn a_failed_source_pauses_a_direct_read_and_loses_nothing() {
        let ks = keyset(16, 64);
        let (p0, p, header) = geometry(&ks);
        let pt = data(p0 + 30 * p, 2);
        let ct = encrypt(&ks, b"", &pt);
        for cut in [header + 1, 64, 64 * 7 + 3, 64 * 20, ct.len() - 1] {
            for group in [1, 3] {
                let src = FailsAfter {
                    data: &ct,
                    left: cut,
                    fails: 2,
                };
                let opts = Options::new().with_window_bytes(6 * 64);
                let mut r = ks.decrypting_reader_with(src, b"", &opts).unwrap();
                r.opener.per_group = group.min(r.opener.per_window);
                let mut out = Vec::new();
                let mut errors = 0;
                loop {
                    let mut buf = vec![0xAAu8; pt.len() + 100];
                    match r.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => out.extend_from_slice(&buf[..n]),
                        Err(e) => {
                            assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
                            assert!(buf.iter().all(|&b| b == 0 || b == 0xAA));
                            errors += 1;
                        }
                    }
                }
                // A failure after groups were opened is not seen by the caller: the read returns
                // their plaintext, and the next read goes on.
                assert!((1..=2).contains(&errors), "cut at {cut}, groups of {group}");
                assert!(out == pt, "cut at {cut}, groups of {group}");
            }
        }
    }

    /// A buffered source that hands out its bytes in pieces of cycling sizes, failing every
    /// third `fill_buf` with `Interrupted`.
    struct Stutter<'a> {
        data: &'a [u8],
        pos: usize,
        calls: usize,
        sizes: &'a [usize],
    }

    impl Read for Stutter<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = {
                let src = self.fill_buf()?;
                let n = src.len().min(buf.len());
                buf[..n].copy_from_slice(&src[..n]);
                n
            };
            self.consume(n);
            Ok(n)
        }
    }

    impl BufRead for Stutter<'_> {
        fn fill_buf(&mut self) -> io::Result<&[u8]> {
            self.calls += 1;
            if self.calls.is_multiple_of(3) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = self.sizes[self.calls % self.sizes.len()];
            let end = (self.pos + n).min(self.data.len());
            Ok(&self.data[self.pos..end])
        }

        fn consume(&mut self, amt: usize) {
            self.pos += amt;
        }
    }

    #[test]
    fn interrupted_and_uneven_fills_of_a_buffered_source_lose_nothing() {
        let ks = keyset(16, 256);
        let (p0, p, _) = geometry(&ks);
        let pt = data(p0 + 40 * p + 9, 5);
        let ct = encrypt(&ks, b"s", &pt);
        let sizes: &[usize] = &[1, 700, 5000, 3, 256 * 7 + 1, 100_000];
        let stutter = |calls| Stutter {
            data: &ct,
            pos: 0,
            calls,
            sizes,
        };
        for window in [256, 6 * 256, 1 << 20] {
            let opts = Options::new().with_window_bytes(window);
            // read_to_end retries `Interrupted`, with reads of growing sizes.
            let mut r = ks
                .decrypting_reader_buffered_with(stutter(0), b"s", &opts)
                .unwrap();
            let mut out = Vec::new();
            r.read_to_end(&mut out).unwrap();
            assert!(out == pt, "window {window}: read_to_end");
            // fill_buf / consume, retried by hand.
            let mut r = ks
                .decrypting_reader_buffered_with(stutter(1), b"s", &opts)
                .unwrap();
            let mut out = Vec::new();
            loop {
                match r.fill_buf() {
                    Ok([]) => break,
                    Ok(piece) => {
                        out.extend_from_slice(piece);
                        let n = piece.len();
                        r.consume(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => panic!("window {window}: {e}"),
                }
            }
            assert!(out == pt, "window {window}: fill_buf");
        }
    }

    #[test]
    fn direct_reads_start_with_the_bytes_read_to_find_the_key() {
        // Keys of the same header length: the first segment is read with the header, to find
        // the key that opens it, and a direct read takes it from there.
        let a = StreamingKey::new(1, &[1u8; 16], 16, 64).unwrap();
        let b = StreamingKey::new(2, &[2u8; 16], 16, 96).unwrap();
        let writer = Keyset::single(b.clone());
        let ks = Keyset::new(1, vec![a, b]).unwrap();
        let (p0, p, _) = geometry(&writer);
        for m in [1usize, 2, 7, 30] {
            let pt = data(p0 + (m - 1) * p + 5, m as u64);
            let ct = encrypt(&writer, b"k", &pt);
            assert!(agree(&ks, b"k", &ct, &pt, &format!("{m} segments")).is_none());
            if m > 2 {
                let mut bad = ct.clone();
                bad[96 * (m - 1) + 3] ^= 4;
                let e = agree(&ks, b"k", &bad, &pt, &format!("{m} segments, flipped"));
                let e = e.expect("refused");
                assert!(
                    e.to_string().contains(&format!("segment {} ", m - 1)),
                    "{e}"
                );
            }
        }
    }
}
