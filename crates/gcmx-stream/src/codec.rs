//! The segment codec: one stream's engine, nonce prefix and layout, built once from its header.
//! It seals and opens [`Span`]s, in a window or from a source's buffer into another, and names
//! the segment that failed to authenticate.

use std::io::Read;

use zeroize::Zeroizing;

use crate::engine::{Engine, OpenInto, OpenJob, SealJob};
use crate::error::{Error, Result};
use crate::format::Header;
use crate::keyset::Keyset;
use crate::layout::{Layout, Span, TAG_LEN};
use crate::nonce::{NONCE_LEN, Nonce};

/// One stream's AES-GCM: its key's engine, its nonces and its segments' geometry.
pub(crate) struct SegmentCodec {
    engine: Engine,
    prefix: [u8; 7],
    layout: Layout,
}

/// Where a span opened from a source goes: each body at its place in the ciphertext (a
/// window), or the bodies back to back (the caller's buffer).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenTo {
    Window,
    Bodies,
}

impl SegmentCodec {
    /// A codec for a new stream under the keyset's primary key, and the stream's header.
    pub(crate) fn for_writing(keyset: &Keyset, aad: &[u8]) -> Result<(SegmentCodec, Vec<u8>)> {
        let key = keyset.primary();
        let header = Header::random(&key.layout())?;
        let codec = SegmentCodec::new(keyset, key, &header, aad)?;
        Ok((codec, header.to_bytes()))
    }

    /// Reads a stream's header from `input` and finds its key ([`crate::header::read_header`]):
    /// the codec, and the bytes read past the header.
    pub(crate) fn for_reading(
        keyset: &Keyset,
        input: &mut impl Read,
        aad: &[u8],
    ) -> Result<(SegmentCodec, Vec<u8>)> {
        let (key, header, head) = crate::header::read_header(input, keyset, aad)?;
        let codec = SegmentCodec::new(keyset, key, &header, aad)?;
        Ok((codec, head))
    }

    /// The codec of the stream with `header` under `key`, on the keyset's backend.
    fn new(
        keyset: &Keyset,
        key: &crate::StreamingKey,
        header: &Header,
        aad: &[u8],
    ) -> Result<SegmentCodec> {
        let engine = Engine::new(&key.stream_key(header, aad)?, keyset.options().backend())?;
        Ok(SegmentCodec {
            engine,
            prefix: header.nonce_prefix,
            layout: key.layout(),
        })
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    pub(crate) fn apart(&self) -> bool {
        self.engine.apart()
    }

    pub(crate) fn on_gpu(&self) -> bool {
        self.engine.on_gpu()
    }

    fn nonces(&self, span: &Span) -> Result<Vec<[u8; NONCE_LEN]>> {
        span.segments()
            .map(|s| Ok(Nonce::new(&self.prefix, s.index, s.last)?.bytes()))
            .collect()
    }

    /// Seals the segments of `span` in place, as one batch: `buf` holds their plaintexts where
    /// their ciphertexts go.
    pub(crate) fn seal(&self, span: &Span, buf: &mut [u8]) -> Result<()> {
        let nonces = self.nonces(span)?;
        let mut jobs: Vec<SealJob<'_>> = cut(span, buf)?
            .into_iter()
            .zip(&nonces)
            .map(|((buf, tag), nonce)| SealJob {
                nonce,
                aad: &[],
                buf,
                tag,
            })
            .collect();
        self.engine.seal_batch(&mut jobs)
    }

    /// Seals segment `index` (not the stream's last) from `src` into `seg` (its body, then its
    /// tag) on the calling thread, in one pass. Only where [`SegmentCodec::apart`].
    pub(crate) fn seal_into(&self, index: u64, src: &[u8], seg: &mut [u8]) -> Result<()> {
        let nonce = Nonce::new(&self.prefix, index, false)?.bytes();
        self.engine.seal_into(&nonce, src, seg)
    }

    /// Opens the span's ciphertext in `buf` in place, all or nothing: on failure no byte of `buf`
    /// is plaintext, and the error names the first segment that did not authenticate.
    pub(crate) fn open(&self, span: &Span, buf: &mut [u8]) -> Result<()> {
        let parts = cut(span, buf)?;
        let (bodies, tags): (Vec<&mut [u8]>, Vec<&mut [u8]>) = parts.into_iter().unzip();
        self.open_apart(span, bodies, &tags)
    }

    /// [`SegmentCodec::open`] with the bodies and tags apart: each body in place in `bodies`.
    pub(crate) fn open_apart(
        &self,
        span: &Span,
        mut bodies: Vec<&mut [u8]>,
        tags: &[impl AsRef<[u8]>],
    ) -> Result<()> {
        let nonces = self.nonces(span)?;
        let mut jobs: Vec<OpenJob<'_>> = bodies
            .iter_mut()
            .zip(tags)
            .zip(&nonces)
            .map(|((buf, tag), nonce)| OpenJob {
                nonce,
                aad: &[],
                buf,
                tag: tag.as_ref(),
            })
            .collect();
        if self.engine.open_batch(&mut jobs)? {
            return Ok(());
        }
        drop(jobs);
        // Every buffer holds its ciphertext again: each is opened alone from a copy (the buffers
        // keep no plaintext), to name the one that failed; the copy's room is reserved once, as
        // a reallocation would free plaintext unwiped.
        let most = bodies.iter().map(|b| b.len()).max().unwrap_or(0);
        let mut scratch = Zeroizing::new(Vec::with_capacity(most));
        for (j, ((body, tag), nonce)) in bodies.iter().zip(tags).zip(&nonces).enumerate() {
            scratch.clear();
            scratch.extend_from_slice(body);
            if !self.engine.open(nonce, &mut scratch, tag.as_ref())? {
                return Err(Error::authentication(span.first() + j as u64, 1));
            }
        }
        Err(Error::authentication(span.first(), span.count() as u64))
    }

    /// Opens the segments of `span`, none the stream's last, from `src` (their ciphertext but
    /// the first `pre` bytes, at the start of `out` already) into `out` (laid out as `to` says),
    /// a task per segment, in one pass (past the caches with `uncached`). Only where
    /// [`SegmentCodec::apart`]. The error names the first segment that did not authenticate;
    /// on failure `out` is wiped.
    pub(crate) fn open_into(
        &self,
        span: &Span,
        src: &[u8],
        pre: usize,
        out: &mut [u8],
        to: OpenTo,
        uncached: bool,
    ) -> Result<()> {
        let short = || Error::crypto("a source is shorter than its segments");
        let nonces = self.nonces(span)?;
        let mut jobs = Vec::with_capacity(span.count());
        let (mut rest, mut from) = (&mut out[..], 0);
        for (s, nonce) in span.segments().zip(nonces) {
            let skip = if s.index == span.first() { pre } else { 0 };
            let body = rest.split_off_mut(..s.body()).ok_or_else(short)?;
            if to == OpenTo::Window {
                let _ = rest.split_off_mut(..TAG_LEN.min(rest.len()));
            }
            let body_end = (from + s.body()).checked_sub(skip).ok_or_else(short)?;
            jobs.push(OpenInto {
                nonce,
                src: src.get(from..body_end).ok_or_else(short)?,
                out: body,
                tag: src.get(body_end..body_end + TAG_LEN).ok_or_else(short)?,
            });
            from = body_end + TAG_LEN;
        }
        let r = match self.engine.open_into(&mut jobs, uncached) {
            Ok(None) => Ok(()),
            Ok(Some(j)) => Err(Error::authentication(span.first() + j as u64, 1)),
            Err(e) => Err(e),
        };
        drop(jobs);
        if r.is_err() {
            let used = match to {
                OpenTo::Window => span.ciphertext_len(),
                OpenTo::Bodies => span.plaintext_len(),
            };
            let used = used.min(out.len());
            crate::wipe::wipe(&mut out[..used]);
        }
        r
    }
}

/// Cuts `buf` (a span's ciphertext) into each segment's body and tag.
fn cut<'a>(span: &Span, mut buf: &'a mut [u8]) -> Result<Vec<(&'a mut [u8], &'a mut [u8])>> {
    let parts = span
        .segments()
        .map(|s| Some(buf.split_off_mut(..s.len)?.split_at_mut(s.body())));
    let parts = parts.collect::<Option<_>>();
    parts.ok_or_else(|| Error::crypto("a window is shorter than its segments"))
}
