//! [`EncryptingWriter`]: plaintext in through [`Write`], Tink ciphertext out; and its core, the
//! [`Sealer`], shared with the async writer.

use std::fmt;
use std::io::{self, Write};
use std::mem;
use std::ops::Range;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};

use crate::codec::SegmentCodec;
use crate::copy::{Run, copy_runs};
use crate::error::{Error, Result, retry};
use crate::keyset::Keyset;
use crate::layout::{Span, TAG_LEN};
use crate::poison::{Poison, guarded};
use crate::relay;
use crate::window::Window;
use crate::wipe::wipe_stacks;

impl Keyset {
    /// A writer that encrypts into `w` with the primary key, bound to the associated data
    /// `aad` (decrypting needs the same bytes). The header is written to `w` at once, segments
    /// a window at a time as the keyset's [`Options`](crate::Options) say;
    /// [`EncryptingWriter::finish`] writes the last one.
    ///
    /// ```
    /// use std::io::Write;
    /// let keyset = gcmx_stream::Keyset::generate(gcmx_stream::KeySize::Aes256, 4096)?;
    /// let mut w = keyset.encrypting_writer(Vec::new(), b"file 1")?;
    /// w.write_all(b"attack at dawn")?;
    /// let ciphertext = w.finish()?;
    /// assert_eq!(ciphertext.len(), 40 + 14 + 16); // header, plaintext, one tag
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn encrypting_writer<W: Write>(&self, mut w: W, aad: &[u8]) -> Result<EncryptingWriter<W>> {
        let (sealer, header) = Sealer::new(self, aad)?;
        w.write_all(&header)
            .map_err(|e| Error::io("cannot write the header", e))?;
        Ok(EncryptingWriter {
            inner: w,
            sealer,
            poison: Poison::default(),
        })
    }
}

/// Encrypts into Tink's AES-GCM-HKDF streaming format, a window of segments at a time (sealed
/// in parallel), into an inner writer. Made by [`Keyset::encrypting_writer`].
///
/// [`finish`](EncryptingWriter::finish) writes the last segment and gives the inner writer
/// back; without it, every reader refuses the stream as truncated. Its buffer, which holds
/// plaintext, is wiped on drop.
///
/// Writes are buffered: bytes reach the inner writer a window at a time (large writes, segment
/// by segment as they are sealed). [`flush`](Write::flush) writes every sealed window and
/// flushes the inner writer, but cannot seal a partial window (its last segment could not be
/// continued).
///
/// An error of the inner writer ends nothing: the sealed bytes it did not take are offered
/// again by the next call ([`try_finish`](EncryptingWriter::try_finish) included; `finish`
/// ends the writer whatever it returns). A writer whose call unwound (a panicking inner
/// writer whose panic the caller caught) is poisoned: every later call fails with
/// [`ErrorKind::Poisoned`](crate::ErrorKind::Poisoned), `try_finish` and `finish` included,
/// so that no segment is ever sealed twice under one nonce.
pub struct EncryptingWriter<W: Write> {
    inner: W,
    sealer: Sealer,
    poison: Poison,
}

/// The writers' sans-I/O core: plaintext into a window, sealed segments out. The stream's
/// position (the next segment's index) moves only here, as segments are sealed.
pub(crate) struct Sealer {
    codec: Arc<SegmentCodec>,
    per_window: usize,
    /// Seal full windows on rayon's pool while the next fills: the GPU's (a window's call is a
    /// transfer and a wait); on the CPU the copy and the seal share the cores, and the hand-over
    /// lost (benches/results.md 2026-12-06).
    background: bool,
    /// Plaintext of the segments being collected, each followed by room for its tag.
    window: Window,
    /// Plaintext bytes in the window.
    plain: usize,
    /// Stream index of the window's first segment.
    next: u64,
    /// A window being sealed in the background: its result comes back on this channel.
    in_flight: Option<Receiver<(Window, Result<usize>)>>,
    /// Sealed bytes still to write.
    out: Out,
    /// A drained window, filled again next.
    spare: Option<Window>,
    /// A failure that ends the stream (it cannot be continued consistently).
    failed: Option<Error>,
    /// The last segment is sealed ([`Sealer::finish`]): the stream takes no more bytes.
    finished: bool,
    /// The ring of segment buffers of large writes ([`relay`]).
    ring: Window,
    /// [`Sealer::absorb`]'s plan, kept so that small writes allocate nothing.
    runs: Vec<Run>,
}

/// Sealed bytes still to write: a window's, or those a relay's inner writer did not take.
enum Out {
    None,
    Window(Window, Range<usize>),
    Bytes(Range<usize>, Vec<u8>),
}

impl Drop for Sealer {
    /// The window wipes itself and the engine its key; the kernels' stack leftovers go here.
    fn drop(&mut self) {
        wipe_stacks();
    }
}

impl Sealer {
    /// A sealer for a new stream under the keyset's primary key, and the stream's header.
    pub(crate) fn new(keyset: &Keyset, aad: &[u8]) -> Result<(Sealer, Vec<u8>)> {
        let (codec, header) = SegmentCodec::for_writing(keyset, aad)?;
        let per_window = keyset.options().window_segments(codec.layout(), None)?;
        let gpu = codec.on_gpu();
        let sealer = Sealer {
            codec: Arc::new(codec),
            per_window,
            background: gpu,
            window: Window::new(gpu),
            plain: 0,
            next: 0,
            in_flight: None,
            out: Out::None,
            spare: None,
            failed: None,
            finished: false,
            ring: Window::new(false),
            runs: Vec::new(),
        };
        Ok((sealer, header))
    }

    /// For the async writer: seals in the call (a poll must not block on a channel), with
    /// `header` the first bytes pending.
    #[cfg(feature = "tokio")]
    pub(crate) fn in_the_call(mut self, header: Vec<u8>) -> Sealer {
        self.background = false;
        self.out = Out::Bytes(0..header.len(), header);
        self
    }

    pub(crate) fn segments_sealed(&self) -> u64 {
        self.next
    }

    pub(crate) fn check(&self) -> io::Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone().into()),
            None => Ok(()),
        }
    }

    /// [`Sealer::check`], and an error once the stream is finished: for calls that add bytes.
    pub(crate) fn check_writable(&self) -> io::Result<()> {
        self.check()?;
        if self.finished {
            return Err(io::Error::other("the stream is finished"));
        }
        Ok(())
    }

    /// Seals the window's rest as the stream's last segment, once: after that has succeeded,
    /// a later call seals nothing (a finish tried again only writes what is pending).
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        if !self.finished {
            self.seal(true)?;
            self.finished = true;
        }
        Ok(())
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn finished(&self) -> bool {
        self.finished
    }

    fn fail(&mut self, e: Error) -> io::Error {
        self.failed = Some(e.clone());
        e.into()
    }

    pub(crate) fn pending(&self) -> &[u8] {
        match &self.out {
            Out::None => &[],
            Out::Window(w, range) => w.get(range.clone()),
            Out::Bytes(range, b) => &b[range.clone()],
        }
    }

    /// `n` pending bytes were written.
    pub(crate) fn advance(&mut self, n: usize) {
        let drained = match &mut self.out {
            Out::None => false,
            Out::Window(_, range) | Out::Bytes(range, _) => {
                range.start = (range.start + n).min(range.end);
                range.start == range.end
            }
        };
        if drained && let Out::Window(w, _) = mem::replace(&mut self.out, Out::None) {
            // It holds ciphertext only, and is filled again next.
            self.spare = Some(w);
        }
    }

    pub(crate) fn sealing(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Waits for the window being sealed in the background; it becomes the pending output.
    pub(crate) fn collect(&mut self) -> io::Result<()> {
        let Some(rx) = self.in_flight.take() else {
            return Ok(());
        };
        let lost = || Error::crypto("the thread sealing a window ended without a result");
        let (w, r) = rx.recv().map_err(|_| self.fail(lost()))?;
        let end = r.map_err(|e| self.fail(e))?;
        self.out = Out::Window(w, 0..end);
        Ok(())
    }

    /// Full segments in the window.
    fn full(&self) -> usize {
        self.codec
            .layout()
            .segments_in(self.next, self.plain, self.per_window)
    }

    /// Copies as much of `data` as fits into the window; returns how much. A full window is
    /// sealed first (`data` follows, so none of its segments is the last). Only call with
    /// nothing pending.
    pub(crate) fn absorb(&mut self, data: &[u8]) -> io::Result<usize> {
        self.check()?;
        if data.is_empty() {
            return Ok(0);
        }
        if self.full() == self.per_window {
            // One window is sealed at a time, and written out before the next.
            if self.sealing() {
                self.collect()?;
                return Ok(0);
            }
            if !self.pending().is_empty() {
                return Ok(0);
            }
            self.seal(false)?;
        }
        // Where each piece of `data` goes (bodies, apart by the tags' room), planned first so
        // that the window grows once and the pieces are copied in one call.
        let layout = *self.codec.layout();
        let mut runs = mem::take(&mut self.runs);
        runs.clear();
        let full = self.full();
        let mut index = self.next + full as u64;
        let mut fill = self.plain - layout.plaintext_of(self.next, full);
        let (mut off, mut used) = (layout.ciphertext_of(self.next, full), 0);
        while used < data.len() && index < self.next + self.per_window as u64 {
            let room = layout.plaintext_len(index);
            let n = (room - fill).min(data.len() - used);
            runs.push(Run::new(off + fill, used, n));
            used += n;
            fill += n;
            if fill == room {
                (index, fill, off) = (index + 1, 0, off + room + TAG_LEN);
            }
        }
        let Some(end) = runs.last().map(|r| r.to + r.len) else {
            self.runs = runs;
            return Ok(0);
        };
        let cap = self.per_window * layout.segment_size();
        let r = self.window.reserve(end + TAG_LEN, cap);
        if r.is_ok() {
            copy_runs(self.window.get_mut(0..end), data, &runs);
            self.plain += used;
        }
        self.runs = runs;
        r.map(|()| used)
    }

    /// Seals the window's segments, the last as the stream's last when `last`: in the
    /// background when that is on and not `last` ([`Sealer::collect`] makes it pending), else
    /// here. Only call with nothing pending or in flight.
    pub(crate) fn seal(&mut self, last: bool) -> io::Result<()> {
        self.check()?;
        self.seal_window(last).map_err(|e| self.fail(e))
    }

    fn seal_window(&mut self, last: bool) -> Result<()> {
        let span = self.codec.layout().sealing(self.next, self.plain, last)?;
        let end = span.ciphertext_len();
        let cap = self.per_window * self.codec.layout().segment_size();
        self.window
            .reserve(end, cap)
            .map_err(|e| Error::io("cannot encrypt", e))?;
        // The stream outgrows its first window here (or ends, and the next is never filled).
        let mut fresh = self
            .spare
            .take()
            .unwrap_or_else(|| Window::new(self.codec.on_gpu()));
        fresh.pin_from_now();
        let mut w = mem::replace(&mut self.window, fresh);
        (self.next, self.plain) = (span.end(), 0);
        if self.background && !last {
            let (tx, rx) = sync_channel(1);
            let codec = self.codec.clone();
            rayon::spawn(move || {
                let r = seal(&codec, &span, &mut w);
                // A dropped writer no longer waits: the window is dropped (and wiped) here.
                let _ = tx.send((w, r));
            });
            self.in_flight = Some(rx);
        } else {
            seal(&self.codec, &span, &mut w)?;
            self.out = Out::Window(w, 0..end);
        }
        Ok(())
    }

    /// Seals the whole segments at the start of `data` that a byte of it follows and writes
    /// them to `out` through [`relay`] (no copy, no barrier per window): two segments or more,
    /// at a segment boundary, nothing pending or in flight, on the CPU, outside rayon's pool. A
    /// window of whole segments is sealed first (pending: the caller writes it and calls again).
    /// The bytes of `data` taken (0 when this does not apply); what `out` did not take is pending.
    pub(crate) fn relay<W: Write + ?Sized>(
        &mut self,
        data: &[u8],
        out: &mut W,
    ) -> io::Result<usize> {
        self.check()?;
        if self.sealing()
            || !self.pending().is_empty()
            || !self.codec.apart()
            || !relay::available()
        {
            return Ok(0);
        }
        let layout = *self.codec.layout();
        let full = self.full();
        if self.plain != layout.plaintext_of(self.next, full) {
            return Ok(0);
        }
        // Not the last byte: the segment it ends is not known to be the stream's last.
        let first = self.next + full as u64;
        let count = layout.segments_in(first, data.len() - 1, relay::MAX_SEGMENTS);
        if count < 2 {
            return Ok(0);
        }
        if full > 0 {
            self.seal(false)?;
            return Ok(0);
        }
        let span = layout.full(first, count, true).map_err(|e| self.fail(e))?;
        // Groups of about [`relay::GROUP_BYTES`], a task per thread at least.
        let threads = rayon::current_num_threads();
        let group = (relay::GROUP_BYTES / layout.segment_size()).clamp(1, count.div_ceil(threads));
        let slots = (RING_WINDOWS * self.per_window).div_ceil(group);
        let data = &data[..span.plaintext_len()];
        let done = relay::relay(&self.codec, &span, data, &mut self.ring, group, slots, out)
            .map_err(|e| self.fail(e))?;
        self.next += done.segments as u64;
        if !done.pending.is_empty() {
            self.out = Out::Bytes(0..done.pending.len(), done.pending);
        }
        Ok(done.taken)
    }
}

/// Seals the window `w` of `span`: the end of its ciphertext. On failure the window holds no
/// plaintext (it is wiped).
fn seal(codec: &SegmentCodec, span: &Span, w: &mut Window) -> Result<usize> {
    let end = span.ciphertext_len();
    let r = codec.seal(span, w.get_mut(0..end));
    match r {
        Ok(()) => w.sealed(end),
        Err(_) => w.wipe(),
    }
    r.map(|()| end)
}

/// Slots in the ring of [`Sealer::relay`], in windows: with a segment per core in a window, one
/// leaves no slot free while the oldest is being sealed; two keep every core busy
/// (benches/gpu-notes.md, 2026-12-03).
const RING_WINDOWS: usize = 2;

impl<W: Write> EncryptingWriter<W> {
    /// Writes every pending sealed byte.
    fn drain(&mut self) -> io::Result<()> {
        while !self.sealer.pending().is_empty() {
            let n = retry(|| self.inner.write(self.sealer.pending()))?;
            if n == 0 {
                let msg = "the inner writer accepts no more bytes";
                return Err(io::Error::new(io::ErrorKind::WriteZero, msg));
            }
            self.sealer.advance(n);
        }
        Ok(())
    }

    /// Seals the last segment, writes everything, flushes the inner writer and gives it back.
    /// Until this returns `Ok`, readers refuse the stream as truncated. On an error the writer
    /// is gone: [`try_finish`](EncryptingWriter::try_finish) keeps it, to call again.
    pub fn finish(mut self) -> io::Result<W> {
        self.try_finish()?;
        Ok(self.inner)
    }

    /// [`finish`](EncryptingWriter::finish) leaving the inner writer in place: after an error
    /// (of the inner writer, say) it can be called again, and seals the last segment once,
    /// offering again what the inner writer did not take. Once it has returned `Ok`, writes
    /// fail and `finish` gives the inner writer back.
    ///
    /// ```
    /// use std::io::Write;
    /// let keyset = gcmx_stream::Keyset::generate(gcmx_stream::KeySize::Aes256, 4096)?;
    /// let mut w = keyset.encrypting_writer(Vec::new(), b"file 1")?;
    /// w.write_all(b"attack at dawn")?;
    /// w.try_finish()?;
    /// assert!(w.write(b"!").is_err());
    /// let ciphertext = w.finish()?; // seals nothing more
    /// assert_eq!(ciphertext.len(), 40 + 14 + 16);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_finish(&mut self) -> io::Result<()> {
        guarded!(self.poison, self.finish_unpoisoned())
    }

    fn finish_unpoisoned(&mut self) -> io::Result<()> {
        self.drain_all()?;
        self.sealer.finish()?;
        self.drain()?;
        self.inner.flush()
    }

    fn write_unpoisoned(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sealer.check_writable()?;
        let mut done = 0;
        while done < buf.len() {
            if let Err(e) = self.drain() {
                // Bytes already taken stay taken; the error comes at the next call.
                return if done > 0 { Ok(done) } else { Err(e) };
            }
            let rest = &buf[done..];
            done += match self.sealer.relay(rest, &mut self.inner)? {
                0 if self.sealer.pending().is_empty() => self.sealer.absorb(rest)?,
                n => n,
            };
        }
        Ok(done)
    }

    /// Writes every sealed window, the one in flight too.
    fn drain_all(&mut self) -> io::Result<()> {
        self.sealer.check()?;
        self.drain()?;
        self.sealer.collect()?;
        self.drain()
    }
}

impl<W: Write> Write for EncryptingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        guarded!(self.poison, self.write_unpoisoned(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        guarded!(
            self.poison,
            self.drain_all().and_then(|()| self.inner.flush())
        )
    }
}

impl<W: Write + fmt::Debug> fmt::Debug for EncryptingWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncryptingWriter")
            .field("inner", &self.inner)
            .field("segments_sealed", &self.sealer.segments_sealed())
            .finish_non_exhaustive()
    }
}
