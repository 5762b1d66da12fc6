//! [`SeekableReader`]: random access to the plaintext of a Tink stream in a `Read + Seek`, on the
//! reader core with the stream's end known from its length.

use std::fmt;
use std::io::{self, Read, Seek, SeekFrom};

use crate::codec::SegmentCodec;
use crate::error::{Error, Result, retry};
use crate::keyset::Keyset;
use crate::poison::{Poison, guarded};
use crate::read_core::{End, Plan, ReadCore};

impl Keyset {
    /// Random access to the plaintext of the Tink stream in `r` (a file, a `Cursor`, anything
    /// `Read + Seek`), encrypted under one of this keyset's keys with associated data `aad`.
    ///
    /// The header and the stream's length are read here; a read then fetches and authenticates
    /// only the segments it covers (a window at most, opened in parallel). As in Tink, the
    /// ciphertext's length gives the plaintext's, and the segment holding the end is opened as
    /// the last, so a truncated or extended stream fails there. A read at or past the end
    /// returns 0 only once the last segment has authenticated.
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
    pub fn seekable_reader<R: Read + Seek>(
        &self,
        mut r: R,
        aad: &[u8],
    ) -> Result<SeekableReader<R>> {
        let seek_err = |e| Error::io("cannot seek in the input", e);
        r.seek(SeekFrom::Start(0)).map_err(seek_err)?;
        let (codec, _) = SegmentCodec::for_reading(self, &mut r, aad)?;
        let ct_size = r.seek(SeekFrom::End(0)).map_err(seek_err)?;
        let layout = *codec.layout();
        // As Tink's seekable channel: segment i > 0 starts at i * segment_size; the remainder is
        // the last segment, at least a tag.
        let body = ct_size.saturating_sub(layout.header_len() as u64);
        let body = usize::try_from(body)
            .map_err(|_| Error::format("ciphertext is too long for this platform"))?;
        let span = layout.cut(0, body, true)?;
        let plaintext_len = span.plaintext_len() as u64;
        let per_window = self
            .options()
            .window_segments(&layout, Some(plaintext_len))?;
        let end = End::Known {
            segments: span.end(),
            last_len: span.seg(span.count() - 1).len,
        };
        Ok(SeekableReader {
            inner: r,
            inner_at: None,
            core: ReadCore::new(codec, per_window, end),
            plaintext_len,
            pos: 0,
            poison: Poison::default(),
        })
    }
}

/// Random access to the plaintext of a Tink AES-GCM-HKDF stream: [`Read`] and [`Seek`] over
/// plaintext offsets. Made by [`Keyset::seekable_reader`].
///
/// Each read fetches and authenticates only the segments it covers (those of the last read
/// stay opened for the next), and returns only authenticated plaintext: a failing segment
/// fails that read with [`io::ErrorKind::InvalidData`] (other ranges may still read). The
/// window is wiped on drop. A reader whose read panicked is poisoned: every later read fails
/// with [`ErrorKind::Poisoned`](crate::ErrorKind::Poisoned).
pub struct SeekableReader<R> {
    inner: R,
    /// Where the inner reader is, when known.
    inner_at: Option<u64>,
    core: ReadCore,
    plaintext_len: u64,
    pos: u64,
    poison: Poison,
}

impl<R: Read + Seek> SeekableReader<R> {
    /// The plaintext's length, from the ciphertext's: authenticated once the last segment has
    /// been read (a read at the end does that).
    pub fn plaintext_len(&self) -> u64 {
        self.plaintext_len
    }

    /// The inner reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    fn read_at(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let at_end = self.pos >= self.plaintext_len;
        if (at_end && self.core.last_seen()) || (out.is_empty() && !at_end) {
            return Ok(0);
        }
        self.core.seek(self.pos);
        let len = usize::try_from(self.plaintext_len - self.pos.min(self.plaintext_len))
            .map_or(out.len(), |left| left.min(out.len()));
        loop {
            match self.core.plan(len, None) {
                Plan::Serve => {
                    let n = self.core.read_plaintext(&mut out[..len]);
                    self.pos += n as u64;
                    return Ok(n);
                }
                Plan::End => return Ok(0),
                _ => {}
            }
            let at = self.core.fetch_at();
            if self.inner_at != Some(at) {
                self.inner_at = None;
                self.inner.seek(SeekFrom::Start(at))?;
                self.inner_at = Some(at);
            }
            if let Some(buf) = self.core.fill_buf(len)? {
                let n = retry(|| self.inner.read(buf)).inspect_err(|_| self.inner_at = None)?;
                self.inner_at = Some(at + n as u64);
                self.core.filled(n)?;
            }
        }
    }
}

impl<R: Read + Seek> Read for SeekableReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        guarded!(self.poison, self.read_at(out))
    }
}

impl<R: Read + Seek> Seek for SeekableReader<R> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let (base, delta) = match to {
            SeekFrom::Start(n) => (n, 0),
            SeekFrom::End(d) => (self.plaintext_len, d),
            SeekFrom::Current(d) => (self.pos, d),
        };
        let msg = "invalid seek to a negative or overflowing position";
        let invalid = || io::Error::new(io::ErrorKind::InvalidInput, msg);
        self.pos = base.checked_add_signed(delta).ok_or_else(invalid)?;
        Ok(self.pos)
    }

    fn stream_position(&mut self) -> io::Result<u64> {
        Ok(self.pos)
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
