//! The reader core under every reader: one stream's position and window. It plans how each
//! read's segments come ([`ReadCore::plan`]): out of the window, read into it, opened from a
//! source's buffer into it or straight into the caller's buffer. The readers run the plan with
//! their source and report back; only the core moves the position.
//!
//! A stream's end is known by reading a byte past each window (read once, front to back) or
//! from the ciphertext's length (seekable: reads fetch only the segments they cover).

use std::io;

use crate::codec::{OpenTo, SegmentCodec};
use crate::copy::{Run, copy_runs};
use crate::error::Error;
use crate::layout::Span;
use crate::window::Window;
use crate::wipe::wipe_stacks;

/// Most segments one read takes straight into the caller's buffer (bounds the bookkeeping).
const DIRECT_MAX_SEGMENTS: usize = 1 << 16;

/// Reads from a buffered source into a caller's buffer this large write past the caches (where
/// the engine does): beyond most last-level caches, the first lines are evicted before return.
const UNCACHED_READ: usize = 64 << 20;

/// How the stream's end is known.
#[derive(Clone, Copy, Debug)]
pub(crate) enum End {
    /// By reading a byte past each window: whether its last segment is the stream's last.
    LookAhead,
    /// From the ciphertext's length: `segments` segments, the last `last_len` bytes long.
    Known { segments: u64, last_len: usize },
}

#[derive(Debug)]
enum State {
    /// Reading ciphertext into the window.
    Filling,
    /// Handing out the opened window's plaintext: segment `seg` of `span`, from byte `pos`.
    Serving { span: Span, seg: usize, pos: usize },
    /// Every segment was handed out (or, seeking, the last one authenticated).
    Done,
    /// The stream cannot be read further.
    Failed(Error),
}

/// What a read does next.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Plaintext is ready: [`ReadCore::plaintext`], [`ReadCore::read_plaintext`].
    Serve,
    /// The stream has ended.
    End,
    /// Ciphertext is to be read into [`ReadCore::fill_buf`], then [`ReadCore::filled`].
    Fill,
    /// The window's segments open from the source's buffer into the window
    /// ([`ReadCore::open_window_from`]).
    Window(Span),
    /// These whole segments, none the stream's last, go straight into the caller's buffer; the
    /// first [`ReadCore::head`] bytes of their ciphertext are in the window already.
    Direct(Span),
    /// These windows go through two page-locked windows in turn ([`crate::piped`]).
    Piped(Vec<Span>),
}

/// The read position of one stream and its window.
pub(crate) struct ReadCore {
    codec: SegmentCodec,
    per_window: usize,
    window: Window,
    /// The next segment to fetch (the window's first while filling).
    next: u64,
    /// Ciphertext bytes in the window, and how many the window takes.
    got: usize,
    target: usize,
    /// The segments the window is being filled with (their end known from the length).
    planned: Option<Span>,
    /// The byte of look-ahead past the last window: the next window's first.
    carry: Option<u8>,
    /// Plaintext bytes of the next window's first segment to pass over (a seek).
    skip: usize,
    end: End,
    /// Whether the stream's last segment has authenticated.
    last_seen: bool,
    state: State,
}

impl ReadCore {
    /// A core at the start of the stream that `codec` opens, `per_window` segments a window.
    pub(crate) fn new(codec: SegmentCodec, per_window: usize, end: End) -> ReadCore {
        let window = Window::new(codec.on_gpu());
        ReadCore {
            codec,
            per_window,
            window,
            next: 0,
            got: 0,
            target: 0,
            planned: None,
            carry: None,
            skip: 0,
            end,
            last_seen: false,
            state: State::Filling,
        }
    }

    pub(crate) fn codec(&self) -> &SegmentCodec {
        &self.codec
    }

    /// Segments fetched so far.
    pub(crate) fn segments_read(&self) -> u64 {
        self.next
    }

    /// The failure that ended the stream, if any.
    pub(crate) fn check(&self) -> io::Result<()> {
        match &self.state {
            State::Failed(e) => Err(e.clone().into()),
            _ => Ok(()),
        }
    }

    /// The stream fails for good with `e`; what the window holds is wiped.
    pub(crate) fn fail(&mut self, e: Error) -> io::Error {
        self.window.wipe();
        self.state = State::Failed(e.clone());
        e.into()
    }

    /// Grows the window to `len` bytes, of at most a window and a byte; failing is final.
    fn reserve(&mut self, len: usize) -> io::Result<()> {
        let cap = self.cap();
        self.window
            .reserve(len, cap)
            .map_err(|e| self.fail(Error::io("cannot read input", e)))
    }

    /// A window's capacity: its segments and a byte of look-ahead.
    fn cap(&self) -> usize {
        self.per_window * self.codec.layout().segment_size() + 1
    }

    /// A failure of the segments being fetched: final for a stream read once; a seekable one
    /// forgets the window and may read other ranges (this one fails again).
    fn failed(&mut self, e: Error) -> io::Error {
        if let End::LookAhead = self.end {
            return self.fail(e);
        }
        self.window.wipe();
        (self.got, self.planned, self.state) = (0, None, State::Filling);
        e.into()
    }

    /// Whether the window's ciphertext is at its start: nothing fetched but the carried byte.
    fn at_window_start(&self) -> bool {
        matches!(self.state, State::Filling) && self.got <= 1 && self.skip == 0
    }

    /// Whether the next plan depends on a buffered source's buffer: between windows of a
    /// stream read once, whose segments can be opened from it.
    pub(crate) fn wants_source(&self) -> bool {
        self.at_window_start()
            && matches!(self.end, End::LookAhead)
            && (self.window.for_gpu() || self.codec.apart())
    }

    /// The next segments' ciphertext already in the window (at most a byte, for any plan but
    /// [`Plan::Fill`]).
    pub(crate) fn head(&self) -> &[u8] {
        self.window.get(0..self.got.min(1))
    }

    /// How the next bytes of a read into `len` bytes come. `source`: the bytes ready in a
    /// buffered source's buffer (`None` for a `Read` source).
    pub(crate) fn plan(&self, len: usize, source: Option<usize>) -> Plan {
        match &self.state {
            State::Failed(_) => return Plan::Fill,
            State::Done => return Plan::End,
            State::Serving { .. } => return Plan::Serve,
            State::Filling => {}
        }
        if !self.wants_source() {
            return Plan::Fill;
        }
        let layout = *self.codec.layout();
        // Ciphertext at hand (the window's byte and the source's buffer), less a byte, so that
        // no segment counted is the stream's last.
        let at_hand = source.map(|src| (self.got + src).saturating_sub(1));
        if self.window.for_gpu() {
            // The GPU opens page-locked windows in place (the caller's buffer would go through
            // staging): a large read goes through two of them in turn.
            let spans = at_hand.map_or_else(Vec::new, |bytes| self.windows_within(bytes, len));
            if spans.len() >= 2 {
                return Plan::Piped(spans);
            }
            return Plan::Fill;
        }
        // The whole segments a read of `len` bytes takes (from a buffered source, at most
        // those its buffer holds).
        let most = DIRECT_MAX_SEGMENTS.max(self.per_window);
        let mut k = layout.segments_in(self.next, len, most);
        if let Some(bytes) = at_hand {
            let held = layout.segments_in_ciphertext(self.next, bytes, most);
            k = k.min(held);
            if k == 0 && held >= self.per_window {
                // A small read: the window is opened from the buffer.
                let span = layout.full(self.next, self.per_window, false);
                return span.map_or(Plan::Fill, Plan::Window);
            }
        }
        match layout.full(self.next, k, false) {
            Ok(span) if k > 0 => Plan::Direct(span),
            _ => Plan::Fill,
        }
    }

    /// The full windows from the next segment whose ciphertext fits in `bytes` and plaintext
    /// in `len`.
    fn windows_within(&self, bytes: usize, len: usize) -> Vec<Span> {
        let layout = self.codec.layout();
        let (mut spans, mut used, mut filled, mut first) = (Vec::new(), 0, 0, self.next);
        while let Ok(span) = layout.full(first, self.per_window, false) {
            used += span.ciphertext_len();
            filled += span.plaintext_len();
            if used > bytes || filled > len {
                break;
            }
            first = span.end();
            spans.push(span);
        }
        spans
    }

    /// Where to read the next ciphertext into, for a read of `want` bytes of plaintext (a
    /// seekable stream fetches only what a read covers); `None` unless filling.
    pub(crate) fn fill_buf(&mut self, want: usize) -> io::Result<Option<&mut [u8]>> {
        if !matches!(self.state, State::Filling) {
            return Ok(None);
        }
        if self.planned.is_none() {
            self.plan_window(want)?;
        }
        if self.window.len() <= self.got {
            self.reserve(self.got + 1)?;
        }
        let end = self.window.len().min(self.target);
        Ok(Some(self.window.input_mut(self.got..end)))
    }

    /// Plans the segments of the window about to be filled, and its length.
    fn plan_window(&mut self, want: usize) -> io::Result<()> {
        let layout = *self.codec.layout();
        let span = match self.end {
            // A full window and a byte: the input's end may cut it shorter.
            End::LookAhead => layout.full(self.next, self.per_window, false),
            // The segments that the read covers, a window at most.
            End::Known { segments, last_len } => {
                let upto = layout.plaintext_start(self.next) + (self.skip + want.max(1)) as u64;
                let end = (layout.segment_of(upto - 1) + 1)
                    .min(self.next + self.per_window as u64)
                    .clamp(self.next + 1, segments);
                let count = (end - self.next) as usize;
                if end < segments {
                    layout.full(self.next, count, false)
                } else {
                    let bytes = layout.ciphertext_of(self.next, count - 1) + last_len;
                    layout.cut(self.next, bytes, true)
                }
            }
        };
        let span = span.map_err(|e| self.fail(e))?;
        self.target = span.ciphertext_len() + usize::from(matches!(self.end, End::LookAhead));
        self.planned = Some(span);
        Ok(())
    }

    /// `n` bytes were read into [`ReadCore::fill_buf`]'s buffer; 0 is the end of the input.
    pub(crate) fn filled(&mut self, n: usize) -> io::Result<()> {
        self.got += n;
        if n > 0 && self.got < self.target {
            return Ok(());
        }
        let eof = n == 0;
        let span = match (self.end, self.planned) {
            (End::LookAhead, _) => {
                let body = if eof { self.got } else { self.got - 1 };
                self.carry = (!eof).then(|| self.window.get(body..body + 1)[0]);
                self.codec.layout().cut(self.next, body, eof)
            }
            (End::Known { .. }, Some(span)) if !eof => Ok(span),
            (End::Known { .. }, _) => Err(Error::format(
                "ciphertext is shorter than when it was opened",
            )),
        };
        let span = span.map_err(|e| self.failed(e))?;
        let len = span.ciphertext_len();
        let r = self.codec.open(&span, self.window.get_mut(0..len));
        r.map_err(|e| self.failed(e))?;
        self.opened(span, self.skip);
        Ok(())
    }

    /// Opens the window `span` (none of it the stream's last) from `src`, a source's buffer
    /// holding its ciphertext but for the [`ReadCore::head`] bytes, and a byte more, a task per
    /// segment. The bytes of `src` used.
    pub(crate) fn open_window_from(&mut self, span: Span, src: &[u8]) -> io::Result<usize> {
        let (pre, len) = (self.got, span.ciphertext_len());
        self.reserve(len)?;
        let out = self.window.get_mut(0..len);
        self.codec
            .open_into(&span, src, pre, out, OpenTo::Window, false)
            .map_err(|e| self.fail(e))?;
        self.carry = None;
        self.opened(span, 0);
        Ok(len - pre)
    }

    /// [`ReadCore::open_window_from`] straight into `out`: the plaintext bytes and the bytes of
    /// `src` used. On failure the stream fails and `out` holds no plaintext.
    pub(crate) fn open_direct_from(
        &mut self,
        span: Span,
        src: &[u8],
        out: &mut [u8],
    ) -> io::Result<(usize, usize)> {
        let (pre, total) = (self.got, span.plaintext_len());
        let out = &mut out[..total];
        out[..pre].copy_from_slice(self.head());
        let uncached = out.len() >= UNCACHED_READ;
        self.codec
            .open_into(&span, src, pre, out, OpenTo::Bodies, uncached)
            .map_err(|e| self.fail(e))?;
        self.passed(span, None);
        Ok((total, span.ciphertext_len() - pre))
    }

    /// Moves past `span`, whose plaintext went to the caller; `carry`: the next byte, if read.
    pub(crate) fn passed(&mut self, span: Span, carry: Option<u8>) {
        self.next = span.end();
        self.start_window(carry);
    }

    /// Keeps `bytes`, ciphertext from segment `first` on that a read took but could not open,
    /// in the window, where the next reads go on.
    pub(crate) fn keep(&mut self, first: u64, bytes: &[&[u8]]) -> io::Result<()> {
        let len: usize = bytes.iter().map(|b| b.len()).sum();
        self.reserve(len.max(1))?;
        let mut at = 0;
        for b in bytes {
            self.window.get_mut(at..at + b.len()).copy_from_slice(b);
            at += b.len();
        }
        (self.next, self.got, self.carry, self.planned) = (first, len, None, None);
        self.state = State::Filling;
        Ok(())
    }

    /// The window `span` was opened: its plaintext is handed out from `pos` bytes on.
    fn opened(&mut self, span: Span, pos: usize) {
        self.next = span.end();
        self.last_seen |= span.ends_stream();
        (self.got, self.skip, self.planned) = (0, 0, None);
        self.state = State::Serving { span, seg: 0, pos };
        self.skip_empty();
    }

    /// Starts filling the next window, with `carry` as its first byte: the stream has outgrown
    /// its first (a GPU stream's windows are page-locked from then on).
    fn start_window(&mut self, carry: Option<u8>) {
        self.window.pin_from_now();
        (self.got, self.carry, self.planned) = (0, None, None);
        self.state = State::Filling;
        // A failure to reserve fails the stream, which the next call reports.
        if let Some(b) = carry
            && self.reserve(1).is_ok()
        {
            self.window.get_mut(0..1)[0] = b;
            self.got = 1;
        }
    }

    /// Moves past segments that are fully handed out.
    fn skip_empty(&mut self) {
        while let State::Serving { span, seg, pos } = self.state {
            let s = span.seg(seg);
            if pos < s.body() {
                return;
            }
            if seg + 1 < span.count() {
                let (seg, pos) = (seg + 1, pos - s.body());
                self.state = State::Serving { span, seg, pos };
            } else if span.ends_stream() {
                self.state = State::Done;
            } else {
                let carry = self.carry.take();
                self.start_window(carry);
            }
        }
    }

    /// The authenticated plaintext ready to hand out (empty when a read is needed, at the end,
    /// or after a failure).
    pub(crate) fn plaintext(&self) -> &[u8] {
        match self.state {
            State::Serving { span, seg, pos } => {
                let s = span.seg(seg);
                self.window.get(s.at + pos..s.at + s.body())
            }
            _ => &[],
        }
    }

    /// `n` bytes of [`ReadCore::plaintext`] were handed out.
    pub(crate) fn consume(&mut self, n: usize) {
        if let State::Serving { span, seg, pos } = self.state {
            let pos = (pos + n).min(span.seg(seg).body());
            self.state = State::Serving { span, seg, pos };
            self.skip_empty();
        }
    }

    /// Copies ready plaintext into `out`, from the current segment on through the window, in
    /// one copy (on rayon's pool when large); the bytes copied, handed out.
    pub(crate) fn read_plaintext(&mut self, out: &mut [u8]) -> usize {
        let State::Serving { span, seg, pos } = self.state else {
            return 0;
        };
        let mut runs = Vec::new();
        let (mut to, mut pos) = (0, pos);
        for s in span.segments().skip(seg) {
            let n = (s.body() - pos).min(out.len() - to);
            runs.push(Run::new(to, s.at + pos, n));
            to += n;
            pos = 0;
            if to == out.len() {
                break;
            }
        }
        copy_runs(out, self.window.get(0..span.ciphertext_len()), &runs);
        // Segment by segment, so that each consume moves on as a read of the rest would.
        for r in &runs {
            self.consume(r.len);
        }
        to
    }

    /// Seeking (a stream whose end is known): the next plaintext byte to hand out is at `pos`.
    pub(crate) fn seek(&mut self, pos: u64) {
        let layout = *self.codec.layout();
        let segments = match self.end {
            End::Known { segments, .. } => segments,
            End::LookAhead => u64::MAX,
        };
        let seg = layout.segment_of(pos).min(segments - 1);
        let off = (pos - layout.plaintext_start(seg).min(pos)) as usize;
        match self.state {
            State::Serving { span, .. } if (span.first()..span.end()).contains(&seg) => {
                let (seg, pos) = ((seg - span.first()) as usize, off);
                self.state = State::Serving { span, seg, pos };
                self.skip_empty();
            }
            State::Failed(_) => {}
            _ => {
                (self.next, self.got, self.skip) = (seg, 0, off);
                (self.carry, self.planned) = (None, None);
                self.state = State::Filling;
            }
        }
    }

    /// Where in the stream the next ciphertext byte is to be read from.
    pub(crate) fn fetch_at(&self) -> u64 {
        self.codec.layout().ciphertext_start(self.next) + self.got as u64
    }

    /// Marks the window page-locked for the GPU: a test drives the GPU's read paths on the CPU.
    #[cfg(test)]
    pub(crate) fn pretend_gpu(&mut self) {
        self.window.pretend_gpu();
    }

    pub(crate) fn last_seen(&self) -> bool {
        self.last_seen
    }

    /// Whether the stream has ended (every segment handed out).
    #[cfg(feature = "tokio")]
    pub(crate) fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// [`crate::piped::read_piped`] of the windows `spans` (their ciphertext but the
    /// [`ReadCore::head`] bytes, and a byte more, in `src`), and the bytes of `src` used. A
    /// failing window fails the stream (the next read reports it).
    pub(crate) fn read_piped(
        &mut self,
        spans: &[Span],
        src: &[u8],
        out: &mut [u8],
    ) -> (usize, io::Result<usize>) {
        let pre = self.got;
        let carried = self.head().first().copied();
        // The stream outgrows a window: page-locked from here on (its carried byte kept).
        self.window.pin_from_now();
        if let Some(c) = carried {
            if let Err(e) = self.reserve(1) {
                return (0, Err(e));
            }
            self.window.get_mut(0..1)[0] = c;
        }
        let cap = self.cap();
        let (n, r) =
            crate::piped::read_piped(&self.codec, &mut self.window, pre, src, out, spans, cap);
        match (r, spans.last()) {
            (Ok(()), Some(&last)) => {
                let used = spans.iter().map(Span::ciphertext_len).sum::<usize>() - pre;
                self.passed(last, None);
                (n, Ok(used))
            }
            (Ok(()), None) => (n, Ok(0)),
            (Err(e), _) => (n, Err(self.fail(e))),
        }
    }
}

impl Drop for ReadCore {
    /// The window wipes itself and the engine its key; the kernels' stack leftovers go here.
    fn drop(&mut self) {
        wipe_stacks();
    }
}
