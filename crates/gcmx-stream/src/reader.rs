//! [`DecryptingReader`]: Tink ciphertext in, authenticated plaintext out through [`Read`].

use std::fmt;
use std::io::{self, Read};

use crate::engine::{Engine, OpenError, OpenJob};
use crate::error::{Error, Result};
use crate::format::{Layout, TAG_LEN, segment_nonce};
use crate::header::read_header;
use crate::keyset::Keyset;
use crate::options::{Options, Use};
use crate::window::{Seg, Window, auth_error, copy, open_window, reserve_window};
use crate::wipe::wipe_stacks;

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
        mut r: R,
        aad: &[u8],
        opts: &Options,
    ) -> Result<DecryptingReader<R>> {
        let (key, header, _, head) = read_header(&mut r, self, aad)?;
        let layout = key.layout();
        let per_window = opts.window_segments(&layout, None, Use::Adapter)?;
        let gcm = Engine::new(&key.stream_key(&header, aad)?, opts.backend())?;
        Ok(DecryptingReader {
            inner: r,
            head: head.unwrap_or_default(),
            head_pos: 0,
            opener: Opener::new(gcm, header.nonce_prefix, layout, per_window),
        })
    }
}

/// Decrypts a Tink AES-GCM-HKDF stream read from an inner reader, a window of segments at a
/// time (opened in parallel), and returns only authenticated plaintext. Made by
/// [`Keyset::decrypting_reader`].
///
/// The end of the plaintext (a read returning 0) comes only after the last segment, sealed
/// as the last, has authenticated and the inner reader has ended. The window, which holds
/// plaintext, is wiped on drop.
pub struct DecryptingReader<R> {
    inner: R,
    /// Bytes read past the header to find the key, to be read before `inner`.
    head: Vec<u8>,
    head_pos: usize,
    opener: Opener,
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
        let mut o = Opener {
            gcm,
            prefix,
            layout,
            per_window,
            window: Window::new(),
            got: 0,
            target: 0,
            carry: None,
            next_index: 0,
            state: State::Filling,
        };
        o.target = o.full_window() + 1;
        o
    }

    fn full_window(&self) -> usize {
        (0..self.per_window)
            .map(|j| self.layout.ciphertext_len(self.next_index + j as u64))
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
    /// byte of the next segment), a window's worth at most.
    fn direct_segments(&self, len: usize) -> usize {
        if !matches!(self.state, State::Filling) || self.got > 1 {
            return 0;
        }
        let (mut k, mut total) = (0, 0);
        while k < self.per_window {
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

    /// Starts the next window with `first`, its first byte.
    fn restart_with(&mut self, first: u8) -> io::Result<()> {
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
        let w = &mut self.window;
        w.segs.clear();
        w.first_index = self.next_index;
        if body == 0 && self.next_index == 0 {
            return Err(Error::format(
                "ciphertext is truncated: it has a header but no segment",
            ));
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
        open_window(&self.gcm, &self.prefix, w)?;
        self.next_index = index;
        self.state = State::Serving {
            seg: 0,
            pos: 0,
            end: eof,
        };
        Ok(())
    }
}

impl<R: Read> DecryptingReader<R> {
    /// Reads ciphertext: the bytes read past the header first, then the inner reader.
    fn read_ciphertext(
        inner: &mut R,
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

    /// Reads until `buf` is full or the input ends.
    fn read_full(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match Self::read_ciphertext(
                &mut self.inner,
                &self.head,
                &mut self.head_pos,
                &mut buf[n..],
            )? {
                0 => break,
                k => n += k,
            }
        }
        Ok(n)
    }

    /// Reads and opens `k` whole segments straight in `out`, their tags aside, saving the
    /// copy through the window: `Some(bytes)` when they opened. When the input ends among
    /// them (one of them may be the last), what was read goes to the window in stream order
    /// and `None` tells the caller to go on through it. On failure `out` holds ciphertext,
    /// never plaintext.
    fn read_direct(&mut self, out: &mut [u8], k: usize) -> io::Result<Option<usize>> {
        let first = self.opener.next_index;
        let layout = self.opener.layout;
        let mut tags = vec![[0u8; TAG_LEN]; k];
        // (plaintext bytes read, tag bytes read) per segment reached
        let mut read: Vec<(usize, usize)> = Vec::with_capacity(k);
        let mut off = 0;
        let mut complete = true;
        let fail = |o: &mut Opener, e: io::Error| o.fail(Error::io("cannot read input", e));
        for (j, tag) in tags.iter_mut().enumerate() {
            let p = layout.plaintext_len(first + j as u64);
            let body = &mut out[off..off + p];
            let mut n = 0;
            if j == 0 && self.opener.got == 1 {
                body[0] = self.opener.window.buf[0];
                n = 1;
            }
            n += match self.read_full(&mut body[n..]) {
                Ok(n) => n,
                Err(e) => return Err(fail(&mut self.opener, e)),
            };
            let t = if n == p {
                match self.read_full(tag) {
                    Ok(t) => t,
                    Err(e) => return Err(fail(&mut self.opener, e)),
                }
            } else {
                0
            };
            read.push((n, t));
            off += p;
            if n < p || t < TAG_LEN {
                complete = false;
                break;
            }
        }
        let mut look = [0u8; 1];
        if complete {
            match self.read_full(&mut look) {
                Ok(0) => complete = false,
                Ok(_) => {}
                Err(e) => return Err(fail(&mut self.opener, e)),
            }
        }
        if !complete {
            // The input ended: what was read, back in stream order in the window.
            let total: usize = read.iter().map(|(n, t)| n + t).sum();
            let cap = self.opener.per_window * layout.segment_size() + 1;
            reserve_window(&mut self.opener.window, total.max(1), cap)?;
            let (mut at, mut src) = (0, 0);
            let buf = &mut self.opener.window.buf;
            for (j, &(n, t)) in read.iter().enumerate() {
                buf[at..at + n].copy_from_slice(&out[src..src + n]);
                buf[at + n..at + n + t].copy_from_slice(&tags[j][..t]);
                at += n + t;
                src += layout.plaintext_len(first + j as u64);
            }
            self.opener.window.high_water = self.opener.window.high_water.max(at);
            self.opener.got = at;
            self.opener.filled(0)?;
            return Ok(None);
        }
        let nonces: Vec<_> = (0..k)
            .map(|j| segment_nonce(&self.opener.prefix, (first + j as u64) as u32, false))
            .collect();
        let mut jobs = Vec::with_capacity(k);
        let mut rest = &mut out[..off];
        for (j, tag) in tags.iter().enumerate() {
            let (buf, tail) = rest.split_at_mut(layout.plaintext_len(first + j as u64));
            rest = tail;
            jobs.push(OpenJob {
                nonce: &nonces[j],
                aad: &[],
                buf,
                tag,
            });
        }
        match self.opener.gcm.open_batch(&mut jobs) {
            Ok(()) => {}
            Err(OpenError::Authentication) => {
                return Err(self.opener.fail(auth_error(first, k as u64)));
            }
            Err(OpenError::Other(e)) => return Err(self.opener.fail(e)),
        }
        self.opener.next_index += k as u64;
        self.opener.restart_with(look[0])?;
        Ok(Some(off))
    }
}

impl<R: Read> Read for DecryptingReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.opener.check()?;
        // A read of whole segments between windows opens them in the caller's buffer.
        let k = self.opener.direct_segments(out.len());
        if k > 0
            && let Some(n) = self.read_direct(out, k)?
        {
            return Ok(n);
        }
        loop {
            self.opener.check()?;
            let p = self.opener.plaintext();
            if !p.is_empty() || out.is_empty() {
                let n = p.len().min(out.len());
                copy(&mut out[..n], &p[..n]);
                self.opener.consume(n);
                return Ok(n);
            }
            if self.opener.is_done() {
                return Ok(0);
            }
            if let Some(buf) = self.opener.want()? {
                // A failed read leaves the window as it was: the caller may retry.
                let n =
                    Self::read_ciphertext(&mut self.inner, &self.head, &mut self.head_pos, buf)?;
                self.opener.filled(n)?;
            }
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
