//! [`SeekableReader`]: random access to the plaintext of a Tink stream in a `Read + Seek`.

use std::fmt;
use std::io::{self, Read, Seek, SeekFrom};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::format::{Layout, TAG_LEN};
use crate::header::read_header;
use crate::keyset::Keyset;
use crate::options::{Options, Use};
use crate::poison::Poison;
use crate::window::{Seg, Window, open_window, reserve_window};
use crate::wipe::wipe_stacks;

impl Keyset {
    /// Random access to the plaintext of the Tink stream in `r` (a file, a `Cursor`, anything
    /// `Read + Seek`), encrypted under one of this keyset's keys with associated data `aad`.
    ///
    /// The header is read and the stream's length taken here; a read then fetches and
    /// authenticates only the segments it covers (a window of them at most per read, opened
    /// in parallel). Tink's rules for the last segment apply: the plaintext length follows
    /// from the ciphertext length, and the segment that holds the end is opened as the last
    /// one, so a truncated or extended stream fails there. A read at or past the end returns
    /// 0 only once the last segment has authenticated.
    ///
    /// ```
    /// use std::io::{Read, Seek, SeekFrom, Write};
    /// let keyset = gcmx_stream::Keyset::generate(gcmx_stream::KeySize::Aes128, 4096)?;
    /// let plain: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    /// let mut w = keyset.encrypting_writer(Vec::new(), b"")?;
    /// w.write_all(&plain)?;
    /// let ciphertext = std::io::Cursor::new(w.finish()?);
    ///
    /// let mut r = keyset.seekable_reader(ciphertext, b"")?;
    /// assert_eq!(r.plaintext_len(), 100_000);
    /// r.seek(SeekFrom::Start(50_000))?;
    /// let mut buf = [0u8; 10];
    /// r.read_exact(&mut buf)?;
    /// assert_eq!(buf, plain[50_000..50_010]);
    /// r.seek(SeekFrom::End(-3))?;
    /// let mut tail = Vec::new();
    /// r.read_to_end(&mut tail)?;
    /// assert_eq!(tail, plain[99_997..]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn seekable_reader<R: Read + Seek>(&self, r: R, aad: &[u8]) -> Result<SeekableReader<R>> {
        self.seekable_reader_with(r, aad, &Options::default())
    }

    /// [`Keyset::seekable_reader`] with a backend and window size.
    pub fn seekable_reader_with<R: Read + Seek>(
        &self,
        mut r: R,
        aad: &[u8],
        opts: &Options,
    ) -> Result<SeekableReader<R>> {
        let seek_err = |e| Error::io("cannot seek in the input", e);
        r.seek(SeekFrom::Start(0)).map_err(seek_err)?;
        let (key, header, hl, _) = read_header(&mut r, self, aad)?;
        let ct_size = r.seek(SeekFrom::End(0)).map_err(seek_err)?;
        let layout = key.layout();
        let seg = layout.segment_size() as u64;
        // Tink's seekable channel: segment i > 0 starts at i * segment_size; the remainder
        // is the last segment, which must hold at least a tag.
        let body = ct_size.saturating_sub(hl as u64);
        let (segments, last_len) = if ct_size <= seg {
            (1, body)
        } else {
            let n = ct_size.div_ceil(seg);
            (n, ct_size - (n - 1) * seg)
        };
        if last_len < TAG_LEN as u64 {
            return Err(Error::format(if segments == 1 && body == 0 {
                "ciphertext is truncated: it has a header but no segment"
            } else {
                "ciphertext is truncated: last segment is shorter than a tag"
            }));
        }
        if segments - 1 > u64::from(u32::MAX) {
            return Err(Error::format("ciphertext has more than 2^32 segments"));
        }
        let plaintext_len = body - segments * TAG_LEN as u64;
        let per_window = opts.window_segments(&layout, Some(plaintext_len), Use::Adapter)?;
        let gcm = Engine::new(&key.stream_key(&header, aad)?, opts.backend())?;
        Ok(SeekableReader {
            inner: r,
            gcm,
            prefix: header.nonce_prefix,
            layout,
            per_window,
            segments,
            last_len: last_len as usize,
            plaintext_len,
            pos: 0,
            window: Window::new(),
            cached: 0..0,
            last_authenticated: false,
            poison: Poison::default(),
        })
    }
}

/// Random access to the plaintext of a Tink AES-GCM-HKDF stream: [`Read`] and [`Seek`] over
/// plaintext offsets ([`SeekFrom::End`] from the plaintext's end). Made by
/// [`Keyset::seekable_reader`].
///
/// Each read fetches and authenticates only the segments it covers (a 4 KiB read opens one
/// segment, two when it straddles a boundary); the segments of the last read stay opened
/// for the next. Reads return only authenticated plaintext: a failing segment makes that
/// read fail with [`io::ErrorKind::InvalidData`] (other ranges may still read). The window
/// is wiped on drop. A reader whose read panicked (in the inner reader, say) is poisoned: every
/// later read fails with [`ErrorKind::Poisoned`](crate::ErrorKind::Poisoned).
pub struct SeekableReader<R> {
    inner: R,
    gcm: Engine,
    prefix: [u8; 7],
    layout: Layout,
    per_window: usize,
    segments: u64,
    /// Ciphertext length of the last segment.
    last_len: usize,
    plaintext_len: u64,
    pos: u64,
    /// The opened segments `cached` (stream indexes), back to back.
    window: Window,
    cached: std::ops::Range<u64>,
    last_authenticated: bool,
    poison: Poison,
}

impl<R: Read + Seek> SeekableReader<R> {
    /// The plaintext's length, as the ciphertext's length gives it: authenticated once the
    /// last segment has been read (a read at the end does that).
    pub fn plaintext_len(&self) -> u64 {
        self.plaintext_len
    }

    /// The inner reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// Plaintext offset of segment `i`.
    fn plain_start(&self, i: u64) -> u64 {
        if i == 0 {
            0
        } else {
            self.layout.plaintext_len(0) as u64 + (i - 1) * self.layout.plaintext_len(1) as u64
        }
    }

    /// The segment holding plaintext offset `pos` (`pos` < the plaintext length, or the
    /// last segment).
    fn segment_of(&self, pos: u64) -> u64 {
        let p0 = self.layout.plaintext_len(0) as u64;
        let i = if pos < p0 {
            0
        } else {
            1 + (pos - p0) / self.layout.plaintext_len(1) as u64
        };
        i.min(self.segments - 1)
    }

    fn ciphertext_start(&self, i: u64) -> u64 {
        if i == 0 {
            self.layout.header_len() as u64
        } else {
            i * self.layout.segment_size() as u64
        }
    }

    fn ciphertext_len(&self, i: u64) -> usize {
        if i + 1 == self.segments {
            self.last_len
        } else {
            self.layout.ciphertext_len(i)
        }
    }

    /// Reads and opens segments `first..end` into the window.
    fn load(&mut self, first: u64, end: u64) -> Result<()> {
        self.cached = 0..0;
        self.window.segs.clear();
        self.window.first_index = first;
        let mut off = 0;
        for i in first..end {
            let len = self.ciphertext_len(i);
            let w = &mut self.window;
            w.segs.push(Seg {
                off,
                len,
                last: i + 1 == self.segments,
            });
            off += len;
        }
        let start = self.ciphertext_start(first);
        let w = &mut self.window;
        let cap = self.per_window * self.layout.segment_size();
        reserve_window(w, off, cap).map_err(|e| Error::io("cannot read input", e))?;
        w.high_water = w.high_water.max(off);
        let io_err = |e| Error::io("cannot read input", e);
        self.inner.seek(SeekFrom::Start(start)).map_err(io_err)?;
        self.inner.read_exact(&mut w.buf[..off]).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                Error::format("ciphertext is shorter than when it was opened")
            } else {
                io_err(e)
            }
        })?;
        open_window(&self.gcm, &self.prefix, w)?;
        self.cached = first..end;
        if end == self.segments {
            self.last_authenticated = true;
        }
        Ok(())
    }

    fn read_at(&mut self, out: &mut [u8]) -> Result<usize> {
        if self.pos >= self.plaintext_len {
            if !self.last_authenticated {
                let last = self.segments - 1;
                self.load(last, last + 1)?;
            }
            return Ok(0);
        }
        if out.is_empty() {
            return Ok(0);
        }
        let first = self.segment_of(self.pos);
        if !self.cached.contains(&first) {
            // The segments this read covers, a window at most.
            let end_pos = (self.pos + out.len() as u64).min(self.plaintext_len) - 1;
            let last = self.segment_of(end_pos);
            let end = (last + 1).min(first + self.per_window as u64);
            self.load(first, end)?;
        }
        let mut n = 0;
        let mut pos = self.pos;
        for (i, s) in (self.cached.start..)
            .zip(&self.window.segs)
            .skip_while(|(i, _)| *i < first)
        {
            let from = (pos - self.plain_start(i)) as usize;
            let plain = &self.window.buf[s.off..s.off + s.len - TAG_LEN];
            let k = (plain.len() - from).min(out.len() - n);
            out[n..n + k].copy_from_slice(&plain[from..from + k]);
            n += k;
            pos += k as u64;
            if n == out.len() || pos >= self.plaintext_len {
                break;
            }
        }
        self.pos = pos;
        Ok(n)
    }
}

impl<R: Read + Seek> Read for SeekableReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.poison.enter()?;
        let r = self.read_at(out);
        self.poison.leave();
        r.map_err(Into::into)
    }
}

impl<R: Read + Seek> Seek for SeekableReader<R> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let (base, delta) = match to {
            SeekFrom::Start(n) => {
                self.pos = n;
                return Ok(n);
            }
            SeekFrom::End(d) => (self.plaintext_len, d),
            SeekFrom::Current(d) => (self.pos, d),
        };
        match base.checked_add_signed(delta) {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "invalid seek to a negative or overflowing position",
            )),
        }
    }

    fn stream_position(&mut self) -> io::Result<u64> {
        Ok(self.pos)
    }
}

impl<R> Drop for SeekableReader<R> {
    fn drop(&mut self) {
        // The window wipes itself and the engine its key; the kernels' stack leftovers are
        // wiped here.
        wipe_stacks();
    }
}

impl<R: fmt::Debug> fmt::Debug for SeekableReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeekableReader")
            .field("inner", &self.inner)
            .field("plaintext_len", &self.plaintext_len)
            .field("position", &self.pos)
            .finish_non_exhaustive()
    }
}
