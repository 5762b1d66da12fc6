//! The adapters for tokio, [`AsyncEncryptingWriter`] and [`AsyncDecryptingReader`], on the
//! std::io ones' cores. A window is sealed or opened in the `poll` call (8 MiB: about a
//! millisecond on a few cores); a smaller one ([`Options::with_window_bytes`]) keeps polls
//! shorter.

use std::fmt;
use std::io;
use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::codec::SegmentCodec;
use crate::error::{Error, Result};
use crate::header::{grow, trial_len};
use crate::keyset::Keyset;
use crate::poison::{Poison, guarded};
use crate::read_core::{End, ReadCore};
use crate::writer::Sealer;

impl Keyset {
    /// The async form of [`Keyset::encrypting_writer`]. Shutting it down
    /// (`AsyncWriteExt::shutdown`) writes the last segment and shuts `w` down; without that,
    /// the stream does not decrypt.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    /// let keyset = gcmx_stream::Keyset::generate(gcmx_stream::KeySize::Aes256, 4096)?;
    /// let mut w = keyset.encrypting_async_writer(Vec::new(), b"aad")?;
    /// w.write_all(&[7u8; 10_000]).await?;
    /// w.shutdown().await?;
    /// let ciphertext = w.into_inner();
    ///
    /// let mut r = keyset.decrypting_async_reader(&ciphertext[..], b"aad")?;
    /// let mut plain = Vec::new();
    /// r.read_to_end(&mut plain).await?;
    /// assert_eq!(plain, [7u8; 10_000]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn encrypting_async_writer<W: AsyncWrite + Unpin>(
        &self,
        w: W,
        aad: &[u8],
    ) -> Result<AsyncEncryptingWriter<W>> {
        let (sealer, header) = Sealer::new(self, aad)?;
        Ok(AsyncEncryptingWriter {
            inner: w,
            sealer: sealer.in_the_call(header),
            poison: Poison::default(),
        })
    }

    /// The async form of [`Keyset::decrypting_reader`], failing as it does; the header is read
    /// at the first poll.
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn decrypting_async_reader<R: AsyncRead + Unpin>(
        &self,
        r: R,
        aad: &[u8],
    ) -> Result<AsyncDecryptingReader<R>> {
        // Checked now rather than at the first poll.
        for k in self.decryption_keys() {
            self.options().window_segments(&k.layout(), None)?;
        }
        Ok(AsyncDecryptingReader {
            inner: r,
            state: ReadState::Header {
                keyset: self.clone(),
                aad: aad.to_vec(),
                bytes: Vec::new(),
            },
            poison: Poison::default(),
        })
    }
}

/// Encrypts into Tink's AES-GCM-HKDF streaming format, into an inner `AsyncWrite`. Made by
/// [`Keyset::encrypting_async_writer`]; `poll_shutdown` writes the last segment. Its window is
/// wiped on drop. A writer whose poll panicked is poisoned, as
/// [`EncryptingWriter`](crate::EncryptingWriter) is.
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub struct AsyncEncryptingWriter<W> {
    inner: W,
    sealer: Sealer,
    poison: Poison,
}

impl<W: AsyncWrite + Unpin> AsyncEncryptingWriter<W> {
    /// The inner writer (after `shutdown`, the complete stream has been written to it).
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// Writes every pending byte (the header first).
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.sealer.pending().is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, self.sealer.pending()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sealer.advance(n);
        }
        Poll::Ready(Ok(()))
    }

    fn write_unpoisoned(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.sealer.check_writable()?;
        let mut done = 0;
        while done < buf.len() {
            match self.poll_drain(cx) {
                Poll::Ready(Ok(())) => {}
                // Bytes already taken stay taken; a failure comes at the next call.
                Poll::Pending | Poll::Ready(Err(_)) if done > 0 => return Poll::Ready(Ok(done)),
                other => return other.map(|r| r.map(|()| 0)),
            }
            done += self.sealer.absorb(&buf[done..])?;
        }
        Poll::Ready(Ok(done))
    }

    fn flush_unpoisoned(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.sealer.check()?;
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn shutdown_unpoisoned(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.sealer.check()?;
        ready!(self.poll_drain(cx))?;
        self.sealer.finish()?;
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for AsyncEncryptingWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        guarded!(self.poison, self.write_unpoisoned(cx, buf))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        guarded!(self.poison, self.flush_unpoisoned(cx))
    }

    /// Seals the last segment, writes everything and shuts the inner writer down.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        guarded!(self.poison, self.shutdown_unpoisoned(cx))
    }
}

impl<W: fmt::Debug> fmt::Debug for AsyncEncryptingWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncEncryptingWriter")
            .field("inner", &self.inner)
            .field("segments_sealed", &self.sealer.segments_sealed())
            .field("finished", &self.sealer.finished())
            .finish_non_exhaustive()
    }
}

/// Where an [`AsyncDecryptingReader`] is.
enum ReadState {
    /// Collecting the header (with several possible keys, the first segment too).
    Header {
        keyset: Keyset,
        aad: Vec<u8>,
        bytes: Vec<u8>,
    },
    /// Reading segments: `head`'s bytes (read with the header) come before the inner reader's.
    Body {
        core: Box<ReadCore>,
        head: io::Cursor<Vec<u8>>,
    },
    /// The header was refused.
    Failed(Error),
}

/// Decrypts a Tink AES-GCM-HKDF stream from an inner `AsyncRead`, as
/// [`DecryptingReader`](crate::DecryptingReader) does (poisoned by a poll that panicked). Made
/// by [`Keyset::decrypting_async_reader`].
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub struct AsyncDecryptingReader<R> {
    inner: R,
    state: ReadState,
    poison: Poison,
}

impl<R: AsyncRead + Unpin> AsyncDecryptingReader<R> {
    /// Reads the header; moves to `Body` (or `Failed`).
    fn poll_header(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let ReadState::Header { keyset, aad, bytes } = &mut self.state else {
            return Poll::Ready(Ok(()));
        };
        loop {
            let need = bytes
                .first()
                .map_or(1, |&hl| trial_len(keyset, usize::from(hl)));
            if bytes.len() >= need {
                break;
            }
            // Grown with the data: with several keys, `need` is the longest first segment, up to
            // 2 GiB, whatever the stream's length.
            let start = bytes.len();
            grow(bytes, need)?;
            let mut rb = ReadBuf::new(&mut bytes[start..]);
            let r = Pin::new(&mut self.inner).poll_read(cx, &mut rb);
            let n = rb.filled().len();
            bytes.truncate(start + n);
            ready!(r)?;
            if n == 0 {
                break;
            }
        }
        let hl = bytes.first().map_or(0, |&b| u64::from(b));
        let mut head = io::Cursor::new(mem::take(bytes));
        let parsed = SegmentCodec::for_reading(keyset, &mut head, aad).and_then(|(codec, _)| {
            let per_window = keyset.options().window_segments(codec.layout(), None)?;
            Ok(Box::new(ReadCore::new(codec, per_window, End::LookAhead)))
        });
        // The bytes after the header (those of the trial among them) come first.
        head.set_position(hl);
        self.state = match parsed {
            Ok(core) => ReadState::Body { core, head },
            Err(e) => ReadState::Failed(e),
        };
        Poll::Ready(Ok(()))
    }

    fn read_unpoisoned(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_header(cx))?;
        let (core, head) = match &mut self.state {
            ReadState::Body { core, head } => (core, head),
            ReadState::Failed(e) => return Poll::Ready(Err(e.clone().into())),
            ReadState::Header { .. } => return Poll::Pending,
        };
        loop {
            core.check()?;
            let p = core.plaintext();
            if !p.is_empty() || out.remaining() == 0 || core.is_done() {
                let n = p.len().min(out.remaining());
                out.put_slice(&p[..n]);
                core.consume(n);
                return Poll::Ready(Ok(()));
            }
            if let Some(buf) = core.fill_buf(0)? {
                let n = match io::Read::read(head, buf)? {
                    0 => {
                        let mut rb = ReadBuf::new(buf);
                        ready!(Pin::new(&mut self.inner).poll_read(cx, &mut rb))?;
                        rb.filled().len()
                    }
                    n => n,
                };
                core.filled(n)?;
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for AsyncDecryptingReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        guarded!(self.poison, self.read_unpoisoned(cx, out))
    }
}

impl<R: fmt::Debug> fmt::Debug for AsyncDecryptingReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            ReadState::Header { .. } => "header",
            ReadState::Body { .. } => "segments",
            ReadState::Failed(_) => "failed",
        };
        f.debug_struct("AsyncDecryptingReader")
            .field("inner", &self.inner)
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
