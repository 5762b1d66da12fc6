//! [`EncryptingWriter`]: plaintext in through [`Write`], Tink ciphertext out.

use std::fmt;
use std::io::{self, Write};
use std::mem;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};

use crate::engine::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{Header, Layout, TAG_LEN};
use crate::keyset::Keyset;
use crate::options::{Options, Use};
use crate::poison::Poison;
use crate::relay::{self, relay};
use crate::window::{
    Pinning, Run, Seg, Window, copy_runs, pin_from_now, reserve_window, seal_window,
    seal_window_from,
};
use crate::wipe::wipe_stacks;

impl Keyset {
    /// A writer that encrypts what is written to it into `w` with the primary key, bound to
    /// `aad` (the associated data: decrypting needs the same bytes). Call
    /// [`EncryptingWriter::finish`] at the end: it writes the last segment.
    ///
    /// The header is written to `w` at once; segments are sealed a window at a time on
    /// [`Backend::Auto`](crate::Backend::Auto). See [`Keyset::encrypting_writer_with`] for
    /// the options.
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
    pub fn encrypting_writer<W: Write>(&self, w: W, aad: &[u8]) -> Result<EncryptingWriter<W>> {
        self.encrypting_writer_with(w, aad, &Options::default())
    }

    /// [`Keyset::encrypting_writer`] with a backend and window size.
    pub fn encrypting_writer_with<W: Write>(
        &self,
        mut w: W,
        aad: &[u8],
        opts: &Options,
    ) -> Result<EncryptingWriter<W>> {
        let (sealer, header) = Sealer::new(self, aad, opts, rayon::current_num_threads() >= 4)?;
        w.write_all(&header)
            .map_err(|e| Error::io("cannot write the header", e))?;
        Ok(EncryptingWriter {
            inner: Some(w),
            sealer,
            poison: Poison::default(),
        })
    }
}

/// Encrypts what is written to it into Tink's AES-GCM-HKDF streaming format, a window of
/// segments at a time (sealed in parallel), into an inner writer. Made by
/// [`Keyset::encrypting_writer`].
///
/// [`finish`](EncryptingWriter::finish) writes the last segment and gives the inner writer
/// back. A writer dropped without `finish` leaves a stream without its last segment, which
/// every reader refuses as truncated. Its buffer, which holds plaintext, is wiped on drop.
///
/// Writes are buffered: bytes written reach the inner writer a window at a time, each window
/// sealed on rayon's pool while the next one fills (a write of more than a window of whole
/// segments reaches it segment by segment, in order, as they are sealed); [`flush`](Write::flush)
/// writes every sealed window and flushes the inner writer, but cannot seal a partial window
/// (its last segment could not be continued).
///
/// An error of the inner writer is returned and ends nothing: the sealed bytes it did not take
/// are kept and offered again by the next call. A panic is another matter: a writer whose call
/// unwound (a panicking inner writer, say, whose panic the caller caught) is poisoned, and
/// every later call fails with [`ErrorKind::Poisoned`], `finish` included, so that no segment
/// is ever sealed twice under one nonce.
pub struct EncryptingWriter<W: Write> {
    inner: Option<W>,
    sealer: Sealer,
    poison: Poison,
}

/// The sans-I/O core shared with the async writer: plaintext into a window, sealed windows
/// out.
pub(crate) struct Sealer {
    gcm: Arc<Engine>,
    prefix: [u8; 7],
    layout: Layout,
    per_window: usize,
    /// Seal full windows on rayon's pool while the next one fills, or in the call that fills
    /// them (on small machines, and in the async writer, which must not block on a channel).
    background: bool,
    /// Plaintext of the segments being collected, each followed by room for its tag.
    window: Window,
    /// A window being sealed on the pool: its result comes back on this channel.
    in_flight: Option<Receiver<(Window, Result<()>)>>,
    /// The sealed window being written out, and a drained one ready to be filled again.
    sealed: Option<Window>,
    spare: Option<Window>,
    /// Full segments in the window.
    full: usize,
    /// Plaintext bytes in the segment being filled (after the full ones).
    fill: usize,
    /// Offset in the window of the segment being filled.
    fill_off: usize,
    /// Stream index of the window's first segment.
    next_index: u64,
    /// Bytes of `sealed` still to write.
    out: std::ops::Range<usize>,
    /// A failure that ends the stream (it cannot be continued consistently).
    failed: Option<Error>,
    /// The ring of segment buffers of large writes ([`Sealer::relay`]).
    ring: Window,
    /// [`Sealer::absorb`]'s plan of where a write's pieces go, kept so that small writes
    /// allocate nothing.
    runs: Vec<Run>,
}

impl Sealer {
    /// A sealer for a new stream under the keyset's primary key, and the stream's header.
    /// `background`: seal full windows on rayon's pool while the next one fills. That
    /// overlaps the caller's copying with the crypto, which pays only when a core is left for
    /// the copying: with fewer than four threads the two compete for the same cores and the
    /// hand-over costs more than it saves (measured with benches/adapters.rs on two cores).
    pub(crate) fn new(
        keyset: &Keyset,
        aad: &[u8],
        opts: &Options,
        background: bool,
    ) -> Result<(Sealer, Vec<u8>)> {
        let key = keyset.primary();
        let layout = key.layout();
        let per_window = opts.window_segments(&layout, None, Use::Adapter)?;
        let header = Header::random(&layout)?;
        let gcm = Engine::new(&key.stream_key(&header, aad)?, opts.backend())?;
        // The GPU's windows are page-locked: its batches move them in place.
        let pin = if gcm.on_gpu() {
            Pinning::IfKept
        } else {
            Pinning::No
        };
        let sealer = Sealer {
            gcm: Arc::new(gcm),
            prefix: header.nonce_prefix,
            layout,
            per_window,
            background,
            window: Window::with_pinning(pin),
            in_flight: None,
            sealed: None,
            spare: None,
            full: 0,
            fill: 0,
            fill_off: 0,
            next_index: 0,
            out: 0..0,
            failed: None,
            ring: Window::new(),
            runs: Vec::new(),
        };
        Ok((sealer, header.to_bytes()))
    }

    /// Segments sealed so far.
    pub(crate) fn segments_sealed(&self) -> u64 {
        self.next_index
    }

    pub(crate) fn check(&self) -> io::Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone().into()),
            None => Ok(()),
        }
    }

    /// The sealed bytes still to write.
    pub(crate) fn pending(&self) -> &[u8] {
        match &self.sealed {
            Some(w) => &w.buf[self.out.clone()],
            None => &[],
        }
    }

    /// `n` pending bytes were written.
    pub(crate) fn advance(&mut self, n: usize) {
        self.out.start = (self.out.start + n).min(self.out.end);
        if self.out.is_empty() {
            self.out = 0..0;
            // Drained: it holds ciphertext only, and is filled again next.
            self.spare = self.sealed.take();
        }
    }

    /// Whether a window is being sealed on the pool.
    pub(crate) fn sealing(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Waits for the window being sealed on the pool; it becomes the pending output.
    pub(crate) fn collect(&mut self) -> io::Result<()> {
        let Some(rx) = self.in_flight.take() else {
            return Ok(());
        };
        let r = match rx.recv() {
            Ok((w, r)) => r.map(|()| w),
            Err(_) => Err(Error::new(
                ErrorKind::Crypto,
                "the thread sealing a window ended without a result",
            )),
        };
        match r {
            Ok(w) => {
                self.out = 0..w.end();
                self.sealed = Some(w);
                Ok(())
            }
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e.into())
            }
        }
    }

    /// Copies as much of `data` as fits into the window; returns how much. Seals a full
    /// window first when `data` brings more (so the window's segments are not the last). Only
    /// call with nothing pending.
    pub(crate) fn absorb(&mut self, data: &[u8]) -> io::Result<usize> {
        self.check()?;
        if data.is_empty() {
            return Ok(0);
        }
        if self.full == self.per_window {
            // More data follows, so none of these segments is the last. One window is sealed
            // at a time, and written out before the next is sealed.
            if self.sealing() {
                self.collect()?;
                return Ok(0);
            }
            if !self.pending().is_empty() {
                return Ok(0);
            }
            self.seal(false)?;
        }
        // Where each piece of `data` goes (segment bodies, apart by the tags' room), planned
        // first, so that the window grows once and the pieces are copied in one call.
        let mut runs = mem::take(&mut self.runs);
        runs.clear();
        let (mut used, mut off, mut fill, mut full) = (0, self.fill_off, self.fill, self.full);
        while used < data.len() && full < self.per_window {
            let room = self.layout.plaintext_len(self.next_index + full as u64);
            let n = (room - fill).min(data.len() - used);
            runs.push(Run {
                to: off + fill,
                from: used,
                len: n,
            });
            used += n;
            fill += n;
            if fill == room {
                full += 1;
                fill = 0;
                off += room + TAG_LEN;
            }
        }
        let Some(end) = runs.last().map(|r| r.to + r.len) else {
            self.runs = runs;
            return Ok(0);
        };
        let cap = self.per_window * self.layout.segment_size();
        let r = reserve_window(&mut self.window, end + TAG_LEN, cap);
        if r.is_ok() {
            self.window.plain = true;
            copy_runs(&mut self.window.buf, data, &runs);
            self.window.high_water = self.window.high_water.max(end);
            (self.fill_off, self.fill, self.full) = (off, fill, full);
        }
        self.runs = runs;
        r.map(|()| used)
    }

    /// Seals the window's segments, the last of them as the stream's last when `last`: on
    /// the pool when sealing in the background and not `last` (then [`Sealer::collect`]
    /// makes the ciphertext pending), else here (then it is pending at once). Only call with
    /// nothing pending or in flight.
    pub(crate) fn seal(&mut self, last: bool) -> io::Result<()> {
        self.check()?;
        let r = self.seal_inner(last);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r.map_err(Into::into)
    }

    fn seal_inner(&mut self, last: bool) -> Result<()> {
        let (mut w, end) = self.cut(last)?;
        if self.background && !last {
            let (tx, rx) = sync_channel(1);
            let (gcm, prefix) = (self.gcm.clone(), self.prefix);
            rayon::spawn(move || {
                let r = seal_window(&gcm, &prefix, &mut w);
                // A dropped writer no longer waits: the window is dropped (and wiped) here.
                let _ = tx.send((w, r));
            });
            self.in_flight = Some(rx);
        } else {
            seal_window(&self.gcm, &self.prefix, &mut w)?;
            self.out = 0..end;
            self.sealed = Some(w);
        }
        Ok(())
    }

    /// Takes the window being filled, its segments cut (the last of them the stream's last
    /// when `last`), and puts a fresh one in its place; returns it with the end of its last
    /// segment.
    fn cut(&mut self, last: bool) -> Result<(Window, usize)> {
        // The stream outgrows its first window here (or ends, and the next one is never
        // filled).
        let pin = self.window.pin;
        let mut next = self
            .spare
            .take()
            .unwrap_or_else(|| Window::with_pinning(pin));
        pin_from_now(&mut next);
        let mut w = std::mem::replace(&mut self.window, next);
        w.segs.clear();
        w.first_index = self.next_index;
        let mut off = 0;
        for j in 0..self.full {
            let len = self.layout.plaintext_len(self.next_index + j as u64) + TAG_LEN;
            w.segs.push(Seg {
                off,
                len,
                last: false,
            });
            off += len;
        }
        // At the end, a partial segment, or an empty one when the stream is empty, is the
        // last; a full segment ending the stream is itself the last, as Tink writes it.
        if last && (self.fill > 0 || self.full == 0) {
            let len = self.fill + TAG_LEN;
            w.buf
                .grow(off + len)
                .map_err(|e| Error::io("cannot encrypt", e))?;
            w.segs.push(Seg {
                off,
                len,
                last: true,
            });
            off += len;
        } else if let Some(s) = w.segs.last_mut() {
            s.last = last;
        }
        let count = w.segs.len() as u64;
        if self.next_index + count - 1 > u64::from(u32::MAX) {
            return Err(Error::invalid(
                "input too large: it needs more than 2^32 segments of this size",
            ));
        }
        w.high_water = w.high_water.max(off);
        self.next_index += count;
        self.full = 0;
        self.fill = 0;
        self.fill_off = 0;
        Ok((w, off))
    }

    /// How many bytes [`Sealer::absorb`] should take at most before [`Sealer::absorb_sealing`]
    /// is tried again: the rest of a partly filled segment where the engine seals from the
    /// caller's bytes (so that the whole segments after it can go that way), else any amount.
    pub(crate) fn copy_limit(&self) -> usize {
        if self.fill > 0 && self.gcm.has_serial() {
            self.layout
                .plaintext_len(self.next_index + self.full as u64)
                - self.fill
        } else {
            usize::MAX
        }
    }

    /// Seals the window's full segments together with the whole segments at the start of
    /// `data` that follow them, each of those sealed from `data` straight into the window in the
    /// task that seals it (nothing is copied): only at a segment boundary, with nothing
    /// pending or in flight, on the CPU, and only segments that at least one more byte of
    /// `data` follows (so none of them is the stream's last). Returns the bytes of `data`
    /// taken: 0 when none of that applies (then [`Sealer::absorb`] copies).
    pub(crate) fn absorb_sealing(&mut self, data: &[u8]) -> io::Result<usize> {
        self.check()?;
        if self.fill != 0 || self.sealing() || !self.pending().is_empty() || !self.gcm.has_serial()
        {
            return Ok(0);
        }
        let (mut k, mut taken, mut end) = (0, 0, self.fill_off);
        while self.full + k < self.per_window {
            let index = self.next_index + (self.full + k) as u64;
            let p = self.layout.plaintext_len(index);
            if index > u64::from(u32::MAX) || taken + p >= data.len() {
                break;
            }
            taken += p;
            end += p + TAG_LEN;
            k += 1;
        }
        // One segment alone would run on one core: let the window fill instead.
        if k == 0 || (self.full + k < 2 && self.per_window > 1) {
            return Ok(0);
        }
        let cap = self.per_window * self.layout.segment_size();
        reserve_window(&mut self.window, end, cap)?;
        let copied = self.full;
        self.full += k;
        let r = self.cut(false).and_then(|(mut w, end)| {
            seal_window_from(&self.gcm, &self.prefix, &mut w, copied, &data[..taken])?;
            self.out = 0..end;
            self.sealed = Some(w);
            Ok(())
        });
        if let Err(e) = r {
            self.failed = Some(e.clone());
            return Err(e.into());
        }
        Ok(taken)
    }
}

impl Sealer {
    /// Seals the whole segments at the start of `data` that at least one more byte of `data`
    /// follows and writes them to `out`, through [`relay`] (no barrier per window): only at a
    /// segment boundary with an empty window, nothing pending or in flight, on the CPU, from a
    /// thread outside rayon's pool, and for more than a window's worth of segments. Returns the
    /// bytes of `data` taken: 0 when none of that applies. Sealed bytes that `out` did not
    /// take become pending.
    pub(crate) fn relay<W: Write + ?Sized>(
        &mut self,
        data: &[u8],
        out: &mut W,
    ) -> io::Result<usize> {
        self.check()?;
        if self.fill != 0
            || self.full != 0
            || self.sealing()
            || !self.pending().is_empty()
            || !self.gcm.has_serial()
            || !relay::available()
        {
            return Ok(0);
        }
        let (mut count, mut taken) = (0, 0);
        loop {
            let index = self.next_index + count as u64;
            let p = self.layout.plaintext_len(index);
            if index > u64::from(u32::MAX)
                || taken + p >= data.len()
                || count == relay::MAX_SEGMENTS
            {
                break;
            }
            taken += p;
            count += 1;
        }
        if count <= self.per_window {
            return Ok(0);
        }
        let group = (relay::GROUP_BYTES / self.layout.segment_size()).max(1);
        let r = relay(
            &self.gcm,
            &self.prefix,
            &self.layout,
            self.next_index,
            count,
            &data[..taken],
            &mut self.ring,
            group,
            (RING_WINDOWS * self.per_window).div_ceil(group),
            out,
        );
        match r {
            Ok(done) => {
                self.next_index += done.segments as u64;
                if !done.pending.is_empty() {
                    let mut w = Window::new();
                    w.buf = done.pending.into();
                    w.high_water = w.buf.len();
                    w.plain = false;
                    w.segs.push(Seg {
                        off: 0,
                        len: w.buf.len(),
                        last: false,
                    });
                    self.out = 0..w.buf.len();
                    self.sealed = Some(w);
                }
                Ok(done.taken)
            }
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e.into())
            }
        }
    }
}

/// Slots in the ring of [`Sealer::relay`], in windows: with one segment per core in a window,
/// a ring of one window leaves no slot free while the oldest segment is still being sealed;
/// two keep every core busy (measured with benches/adapters.rs: benches/gpu-notes.md).
const RING_WINDOWS: usize = 2;

impl<W: Write> EncryptingWriter<W> {
    fn inner(&mut self) -> io::Result<&mut W> {
        self.inner
            .as_mut()
            .ok_or_else(|| io::Error::other("the stream is finished"))
    }

    /// Writes every pending sealed byte.
    fn drain(&mut self) -> io::Result<()> {
        while !self.sealer.pending().is_empty() {
            let w = self
                .inner
                .as_mut()
                .ok_or_else(|| io::Error::other("finished"))?;
            match w.write(self.sealer.pending()) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "the inner writer accepts no more bytes",
                    ));
                }
                Ok(n) => self.sealer.advance(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Seals the last segment, writes everything, flushes the inner writer and gives it back.
    /// Until this returns `Ok`, the stream is not complete: readers refuse it as truncated.
    pub fn finish(mut self) -> io::Result<W> {
        // A call that unwinds drops the writer: no need to leave the mark.
        self.poison.enter()?;
        self.sealer.check()?;
        self.drain()?;
        self.sealer.collect()?;
        self.drain()?;
        self.sealer.seal(true)?;
        self.drain()?;
        self.inner()?.flush()?;
        self.inner
            .take()
            .ok_or_else(|| io::Error::other("the stream is finished"))
    }

    /// The inner writer.
    pub fn get_ref(&self) -> Option<&W> {
        self.inner.as_ref()
    }
}

impl<W: Write> Write for EncryptingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.poison.enter()?;
        let r = self.write_unpoisoned(buf);
        self.poison.leave();
        r
    }

    fn flush(&mut self) -> io::Result<()> {
        self.poison.enter()?;
        let r = self.flush_unpoisoned();
        self.poison.leave();
        r
    }
}

impl<W: Write> EncryptingWriter<W> {
    fn write_unpoisoned(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sealer.check()?;
        self.inner()?;
        let mut done = 0;
        while done < buf.len() {
            if let Err(e) = self.drain() {
                // Bytes already taken stay taken; the error comes at the next call.
                return if done > 0 { Ok(done) } else { Err(e) };
            }
            let rest = &buf[done..];
            let inner = self
                .inner
                .as_mut()
                .ok_or_else(|| io::Error::other("the stream is finished"))?;
            let relayed = self.sealer.relay(rest, inner)?;
            if relayed > 0 {
                done += relayed;
                continue;
            }
            done += match self.sealer.absorb_sealing(rest)? {
                0 => self
                    .sealer
                    .absorb(&rest[..rest.len().min(self.sealer.copy_limit())])?,
                n => n,
            };
        }
        Ok(done)
    }

    fn flush_unpoisoned(&mut self) -> io::Result<()> {
        self.sealer.check()?;
        self.drain()?;
        self.sealer.collect()?;
        self.drain()?;
        self.inner()?.flush()
    }
}

impl<W: Write> Drop for EncryptingWriter<W> {
    fn drop(&mut self) {
        // The window wipes itself and the engine its key; the kernels' stack leftovers are
        // wiped here.
        wipe_stacks();
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
