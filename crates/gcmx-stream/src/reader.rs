//! [`DecryptingReader`]: Tink ciphertext in, authenticated plaintext out through [`Read`].

use std::fmt;
use std::io::{self, Read};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::format::{Layout, TAG_LEN};
use crate::header::read_header;
use crate::keyset::Keyset;
use crate::options::{Options, Use};
use crate::window::{Seg, Window, open_window, reserve_window};
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
        let gcm = Engine::new(&key.stream_key(&header, aad)?, opts.get_backend())?;
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
}

impl<R: Read> Read for DecryptingReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            self.opener.check()?;
            let p = self.opener.plaintext();
            if !p.is_empty() || out.is_empty() {
                let n = p.len().min(out.len());
                out[..n].copy_from_slice(&p[..n]);
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
