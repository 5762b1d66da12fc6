//! [`DecryptingReader`]: Tink ciphertext in, authenticated plaintext out through [`Read`] and
//! [`BufRead`], running its [`ReadCore`]'s plans with a [`Read`] or a [`BufRead`] source.

use std::fmt;
use std::io::{self, BufRead, Read};

use crate::codec::SegmentCodec;
use crate::copy::copy;
use crate::error::{Result, retry};
use crate::header::read_full;
use crate::keyset::Keyset;
use crate::layout::{Span, TAG_LEN};
use crate::poison::{Poison, guarded};
use crate::read_core::{End, Plan, ReadCore};
use crate::wipe::wipe;

impl Keyset {
    /// A reader of the plaintext of the Tink stream `r`, encrypted under one of this keyset's
    /// keys with associated data `aad`. The header is read here (with several keys of its
    /// length, the first segment too, to find the key that opens it, as Tink does).
    ///
    /// Reads return only authenticated plaintext. A wrong key or AAD, tampering, truncation
    /// (also at a segment boundary), reordering or trailing bytes make a read fail for good with
    /// [`io::ErrorKind::InvalidData`] ([`Error::from_io`](crate::Error::from_io) gives the
    /// [`Error`](crate::Error)).
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
        self.reader(r, aad, None)
    }

    /// [`Keyset::decrypting_reader`] over a buffered source (a slice, a
    /// [`Cursor`](std::io::Cursor), a [`BufReader`](std::io::BufReader)), taking the ciphertext
    /// from the source's own buffer: whole segments there are opened from it on every core in
    /// one pass, and with the reader's [`BufRead`] methods no byte is copied on the calling
    /// thread. Fails and authenticates exactly as [`Keyset::decrypting_reader`].
    ///
    /// ```
    /// use std::io::{self, BufRead, Write};
    /// let keyset = gcmx_stream::Keyset::generate(gcmx_stream::KeySize::Aes256, 4096)?;
    /// let mut w = keyset.encrypting_writer(Vec::new(), b"blob")?;
    /// w.write_all(&[7u8; 100_000])?;
    /// let ciphertext = w.finish()?;
    ///
    /// // The plaintext a segment at a time, straight from the reader's window.
    /// let mut r = keyset.decrypting_buf_reader(&ciphertext[..], b"blob")?;
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
    pub fn decrypting_buf_reader<R: BufRead>(
        &self,
        r: R,
        aad: &[u8],
    ) -> Result<DecryptingReader<R>> {
        let source = Buffered {
            fill: <Input<R> as BufRead>::fill_buf,
            consume: <Input<R> as BufRead>::consume,
        };
        self.reader(r, aad, Some(source))
    }

    fn reader<R: Read>(
        &self,
        mut r: R,
        aad: &[u8],
        buffered: Option<Buffered<Input<R>>>,
    ) -> Result<DecryptingReader<R>> {
        let (codec, head) = SegmentCodec::for_reading(self, &mut r, aad)?;
        let per_window = self.options().window_segments(codec.layout(), None)?;
        Ok(DecryptingReader {
            src: Source {
                inner: io::Cursor::new(head).chain(r),
                buffered,
            },
            core: ReadCore::new(codec, per_window, End::LookAhead),
            poison: Poison::default(),
        })
    }
}

/// A buffered source's [`BufRead`] methods, taken where the bound is known, so that one reader
/// type serves both kinds of source.
struct Buffered<R> {
    fill: fn(&mut R) -> io::Result<&[u8]>,
    consume: fn(&mut R, usize),
}

/// A reader's ciphertext: the bytes read with the header (to find the key), then the inner
/// reader's.
type Input<R> = io::Chain<io::Cursor<Vec<u8>>, R>;

struct Source<R> {
    inner: Input<R>,
    /// Set for a buffered source: its buffer is read in place.
    buffered: Option<Buffered<Input<R>>>,
}

impl<R: Read> Source<R> {
    /// A buffered source's buffer, when the next ciphertext comes from it (a failed fill
    /// consumed nothing: the caller may retry).
    fn buf(&mut self) -> io::Result<Option<&[u8]>> {
        match &self.buffered {
            Some(b) => (b.fill)(&mut self.inner).map(Some),
            None => Ok(None),
        }
    }

    fn consume(&mut self, n: usize) {
        if let Some(b) = &self.buffered {
            (b.consume)(&mut self.inner, n);
        }
    }
}

impl<R: Read> Read for Source<R> {
    /// Reads ciphertext into `buf` (from a buffered source's buffer, copied on rayon's pool
    /// when large); `Interrupted` is retried.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = retry(|| match self.buf()? {
            Some(src) => {
                let n = src.len().min(buf.len());
                copy(&mut buf[..n], &src[..n]);
                Ok(n)
            }
            None => self.inner.read(buf),
        })?;
        self.consume(n);
        Ok(n)
    }
}

/// Decrypts a Tink AES-GCM-HKDF stream from an inner reader, a window of segments at a time
/// (opened in parallel), returning only authenticated plaintext. Made by
/// [`Keyset::decrypting_reader`] and [`Keyset::decrypting_buf_reader`].
///
/// The plaintext ends (a read of 0, an empty [`BufRead::fill_buf`]) only once the segment
/// sealed as the last has authenticated and the inner reader has ended. [`BufRead::fill_buf`]
/// hands out the current segment's plaintext from the window, which is wiped on drop.
///
/// An error of the inner reader ends nothing: what was read is kept (its plaintext returned
/// first), and the next call reads on, so a transient error (`WouldBlock`, `TimedOut`,
/// `Interrupted`) can be retried. A failed authentication or a malformed stream is final. A
/// reader whose call panicked (a panic the caller caught) is poisoned: every later call fails
/// with [`ErrorKind::Poisoned`](crate::ErrorKind::Poisoned).
pub struct DecryptingReader<R> {
    src: Source<R>,
    core: ReadCore,
    poison: Poison,
}

impl<R: Read> DecryptingReader<R> {
    /// The core's plan for a read into `len` bytes (with the source's buffer where it counts).
    fn plan(&mut self, len: usize) -> io::Result<Plan> {
        if !self.core.wants_source() {
            return Ok(self.core.plan(len, None));
        }
        let held = self.src.buf()?.map(<[u8]>::len);
        Ok(self.core.plan(len, held))
    }

    /// Runs `plan` as far as filling the window: read into it, or opened from the source's
    /// buffer.
    fn fill(&mut self, plan: Plan, want: usize) -> io::Result<()> {
        if let Plan::Window(span) = plan
            && let Some(src) = self.src.buf()?
        {
            let used = self.core.open_window_from(span, src)?;
            self.src.consume(used);
            return Ok(());
        }
        if let Some(buf) = self.core.fill_buf(want)? {
            // A failed read leaves the window as it was: the caller may retry.
            let n = self.src.read(buf)?;
            self.core.filled(n)?;
        }
        Ok(())
    }

    /// Opens the whole segments of `span` straight into `out`, from a buffered source's buffer
    /// or read first. `None` when the read goes on through the window.
    fn direct(&mut self, span: Span, out: &mut [u8]) -> io::Result<Option<usize>> {
        if let Some(src) = self.src.buf()? {
            let (n, used) = self.core.open_direct_from(span, src, out)?;
            self.src.consume(used);
            return Ok(Some(n));
        }
        self.read_direct(span, out)
    }

    /// Reads the bodies of `span` into `out` and the tags aside, then opens in place those that
    /// a byte follows (none is the stream's last), saving the copy through the window. The rest
    /// read goes to the window, where the next reads go on: the input ended (it may hold the
    /// last segment), or the source failed (its error is returned when no plaintext is; a
    /// transient one can be retried). A failed authentication fails the stream and wipes what
    /// this call wrote to `out`.
    fn read_direct(&mut self, span: Span, out: &mut [u8]) -> io::Result<Option<usize>> {
        let out = &mut out[..span.plaintext_len()];
        let mut tags = vec![[0u8; TAG_LEN]; span.count()];
        // Body and tag bytes read, per segment reached (the first body starts with the head).
        let mut read: Vec<(usize, usize)> = Vec::with_capacity(span.count());
        let (mut err, mut n, mut at) = (None, self.core.head().len(), 0);
        out[..n].copy_from_slice(self.core.head());
        for (s, tag) in span.segments().zip(tags.iter_mut()) {
            let body = &mut out[at..at + s.body()];
            at += s.body();
            let (got, e) = read_full(&mut self.src, &mut body[n..]);
            n += got;
            let (t, e) = match e {
                None if n == body.len() => read_full(&mut self.src, tag),
                e => (0, e),
            };
            read.push((n, t));
            (err, n) = (e, 0);
            if err.is_some() || t < TAG_LEN {
                break;
            }
        }
        let complete = read.iter().take_while(|&&(_, t)| t == TAG_LEN).count();
        let mut look = None;
        if complete == span.count() {
            let mut b = [0u8; 1];
            match read_full(&mut self.src, &mut b) {
                (1, _) => look = Some(b[0]),
                (_, e) => err = e,
            }
        }
        let followed = look.is_some() || read.get(complete).is_some_and(|&(n, t)| n + t > 0);
        let opened = complete.saturating_sub(usize::from(!followed));
        let done = span.take(opened);
        let n = done.plaintext_len();
        if opened > 0 {
            let mut rest = &mut out[..n];
            let bodies = done
                .segments()
                .map(|s| rest.split_off_mut(..s.body()).unwrap_or_default());
            let codec = self.core.codec();
            if let Err(e) = codec.open_apart(&done, bodies.collect(), &tags[..opened]) {
                wipe(out);
                return Err(self.core.fail(e));
            }
        }
        if opened == span.count() {
            self.core.passed(span, look);
            return Ok(Some(n));
        }
        // The rest goes to the window: the caller's buffer keeps no more than the call returns.
        let mut kept: Vec<&[u8]> = Vec::new();
        let mut at = n;
        for (s, (&(b, t), tag)) in span.segments().zip(read.iter().zip(&tags)).skip(opened) {
            kept.push(&out[at..at + b]);
            kept.push(&tag[..t]);
            at += s.body();
        }
        let r = self
            .core
            .keep(span.first() + opened as u64, &kept)
            .and_then(|()| match err {
                // The source failed: nothing is lost, and the next call reads on from here.
                Some(e) => Err(e),
                // The input ended: the window is opened as the end. A failure is the stream's (kept
                // in the core): with plaintext to return, the next read reports it.
                None => self.core.filled(0),
            });
        wipe(&mut out[n..]);
        if n > 0 { Ok(Some(n)) } else { r.map(|()| None) }
    }

    fn read_unpoisoned(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            self.core.check()?;
            if out.is_empty() {
                return Ok(0);
            }
            match self.plan(out.len())? {
                Plan::Serve => return Ok(self.core.read_plaintext(out)),
                Plan::End => return Ok(0),
                Plan::Direct(span) => {
                    if let Some(n) = self.direct(span, out)? {
                        return Ok(n);
                    }
                }
                Plan::Piped(spans) => {
                    let Some(src) = self.src.buf()? else {
                        continue;
                    };
                    let (n, r) = self.core.read_piped(&spans, src, out);
                    match r {
                        Ok(used) => self.src.consume(used),
                        Err(e) if n == 0 => return Err(e),
                        Err(_) => {}
                    }
                    return Ok(n);
                }
                plan => self.fill(plan, out.len())?,
            }
        }
    }

    /// Reads and opens until plaintext is ready or the stream has ended.
    fn fill_unpoisoned(&mut self) -> io::Result<()> {
        loop {
            self.core.check()?;
            match self.plan(0)? {
                Plan::Serve | Plan::End => return Ok(()),
                plan => self.fill(plan, 0)?,
            }
        }
    }
}

impl<R: Read> Read for DecryptingReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        guarded!(self.poison, self.read_unpoisoned(out))
    }
}

impl<R: Read> BufRead for DecryptingReader<R> {
    /// The rest of the current segment's plaintext in the window (empty at the end), once its
    /// whole window has authenticated.
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        guarded!(self.poison, self.fill_unpoisoned())?;
        Ok(self.core.plaintext())
    }

    fn consume(&mut self, amt: usize) {
        if !self.poison.is_poisoned() {
            self.core.consume(amt);
        }
    }
}

impl<R: fmt::Debug> fmt::Debug for DecryptingReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecryptingReader")
            .field("inner", self.src.inner.get_ref().1)
            .field("segments_read", &self.core.segments_read())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{self, Read, Write};

    use crate::{DecryptingReader, Keyset, Options, StreamingKey};

    /// A buffered reader of `ct` with the window marked page-locked.
    fn gpu_reader<'a>(ks: &Keyset, opts: Options, ct: &'a [u8]) -> DecryptingReader<&'a [u8]> {
        let ks = ks.clone().with_options(opts);
        let mut r = ks.decrypting_buf_reader(ct, b"").unwrap();
        r.core.pretend_gpu();
        r
    }

    /// Large reads through two windows in turn (the GPU's path, [`crate::piped`], driven here
    /// by the CPU's engine with the windows marked page-locked): the plaintext whole, in reads
    /// of several windows each, from the start or after a read that leaves a byte of the next
    /// window carried; a damaged window fails the stream with only authenticated plaintext
    /// returned before it.
    #[test]
    fn reads_through_two_windows_in_turn_give_the_plaintext_or_fail() {
        let ks = Keyset::from(StreamingKey::new(1, &[5u8; 16], 16, 256).unwrap());
        // Plaintext bytes of the first segment (after a header of 24 bytes) and of the others.
        let (p0, p) = (256 - 24 - 16, 256 - 16);
        let opts = Options::default().with_window_bytes(4 * 256);
        for (n, seed) in [(p0 + 40 * p + 7, 1), (p0 + 39 * p, 2), (p0 + 8 * p, 3)] {
            let pt: Vec<u8> = (0..n).map(|i| (i as u64 * 31 + seed) as u8).collect();
            let mut w = ks.encrypting_writer(Vec::new(), b"").unwrap();
            w.write_all(&pt).unwrap();
            let ct = w.finish().unwrap();
            for first in [0usize, 5, p0, p0 + 3 * p] {
                let mut r = gpu_reader(&ks, opts, &ct);
                let mut out = vec![0u8; n];
                r.read_exact(&mut out[..first]).unwrap();
                let (mut at, mut most) = (first, 0);
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
                    assert!(most > 4 * p, "{n}, {first}: largest read {most}");
                }
            }
            if n < p0 + 24 * p {
                continue;
            }
            // A flipped byte in segment 21 (window 5): windows 0..5 are returned, then the
            // failure names the segment, and nothing but their plaintext or zeros is in `out`.
            let mut bad = ct.clone();
            bad[21 * 256 + 9] ^= 1;
            let mut r = gpu_reader(&ks, opts, &bad);
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
}
