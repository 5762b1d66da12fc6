//! GCM framing, once for every backend: SP 800-38D's limits, J0, tag truncation, and what a
//! failed authentication leaves in the buffer (the tags compared by [`tag_matches`]).
//!
//! After a failed authentication the buffer is what gcmx's forgery policy ([`Refused`]) leaves:
//! the ciphertext it held (sealing it again re-applies the same keystream), or zeros if the
//! engine fails doing that. Either way it never holds unauthenticated plaintext when the call
//! returns.

use zeroize::Zeroize;

use crate::Error;
use crate::chunks::{BATCH_CHUNK, for_each_chunk};
use crate::direction::Direction;
use crate::engine::{GcmEngine, Message};
use crate::key::KeyMaterial;
use crate::keyed::KeyedEngine;
use crate::refusal::Refused;
use crate::tag::tag_matches;
use crate::wipe::wipe16;

/// Longest plaintext GCM allows: 2^36 − 32 bytes (2^39 − 256 bits).
pub const P_MAX: u64 = (1 << 36) - 32;
/// Longest associated data GCM allows: 2^61 − 1 bytes (2^64 − 1 bits, rounded down to bytes).
pub const A_MAX: u64 = (1 << 61) - 1;

/// Tag lengths accepted, in bytes: 12 to 16, and with the `hazmat` feature also the short tags
/// of SP 800-38D appendix C (4 and 8 bytes), which need its usage limits.
#[cfg(not(feature = "hazmat"))]
pub const TAG_LENGTHS: &[usize] = &[12, 13, 14, 15, 16];
/// Tag lengths accepted, in bytes: 12 to 16, and with the `hazmat` feature also the short tags
/// of SP 800-38D appendix C (4 and 8 bytes), which need its usage limits.
#[cfg(feature = "hazmat")]
pub const TAG_LENGTHS: &[usize] = &[4, 8, 12, 13, 14, 15, 16];

/// Check the lengths of one message's inputs.
///
/// ```
/// use gcmx_core::{Error, backend::check};
/// assert_eq!(check(&[], b"", 0, 16), Err(Error::NonceLength(0)));
/// assert_eq!(check(&[0; 12], b"", 0, 5), Err(Error::TagLength(5)));
/// assert_eq!(check(&[0; 12], b"", 0, 17), Err(Error::TagLength(17)));
/// assert!(check(&[0; 12], b"", 100, 16).is_ok());
/// ```
#[inline]
pub fn check(nonce: &[u8], aad: &[u8], msg_len: usize, tag_len: usize) -> Result<(), Error> {
    if nonce.is_empty() {
        return Err(Error::NonceLength(0));
    }
    if !TAG_LENGTHS.contains(&tag_len) {
        return Err(Error::TagLength(tag_len));
    }
    check_lengths(aad.len(), msg_len)
}

/// Check the message and associated-data limits alone.
#[inline]
pub fn check_lengths(aad_len: usize, msg_len: usize) -> Result<(), Error> {
    if msg_len as u64 > P_MAX {
        return Err(Error::PlaintextTooLong);
    }
    if aad_len as u64 > A_MAX {
        return Err(Error::AadTooLong);
    }
    Ok(())
}

/// [`check_lengths`] as a `bool`, for callers with no error to report (no `Result` of an error
/// that owns a string to drop).
#[inline]
pub(crate) fn within_limits(aad_len: usize, msg_len: usize) -> bool {
    msg_len as u64 <= P_MAX && aad_len as u64 <= A_MAX
}

/// Seal one message with `engine` under its key: `buf` becomes the ciphertext, `tag` the tag of
/// length `tag.len()`. If the engine fails, `buf` is zeroed (it may hold part-encrypted data).
#[inline]
pub fn seal(
    engine: &KeyedEngine,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &mut [u8],
) -> Result<(), Error> {
    if engine.runs_serially(buf.len()) {
        check(nonce, aad, buf.len(), tag.len())?;
        let full = engine
            .key()
            .crypt_nonce(Direction::Seal, nonce, aad, buf.into());
        put_tag(tag, full);
        return Ok(());
    }
    seal_with(engine.key(), engine.engine(), nonce, aad, buf, tag)
}

/// The first `tag.len()` bytes of the full tag `full` into `tag` (a valid tag length), the rest
/// of it wiped.
#[inline]
fn put_tag(tag: &mut [u8], mut full: [u8; 16]) {
    match <&mut [u8; 16]>::try_from(&mut *tag) {
        // the whole tag is the caller's: nothing of it left to wipe
        Ok(t) => *t = full,
        Err(_) => {
            tag.copy_from_slice(&full[..tag.len()]);
            wipe16(&mut full);
        }
    }
}

/// [`seal`] with the key material and the engine apart (out of line: [`seal`] is inlined).
#[inline(never)]
fn seal_with(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &mut [u8],
) -> Result<(), Error> {
    check(nonce, aad, buf.len(), tag.len())?;
    let mut msg = Message::with_nonce(key, nonce, aad, buf);
    match engine.crypt(Direction::Seal, &mut msg) {
        Ok(full) => {
            put_tag(tag, full);
            Ok(())
        }
        Err(e) => {
            msg.wipe();
            Err(e)
        }
    }
}

/// Open one message with `engine` under its key: on success `buf` holds the plaintext. On a
/// wrong tag it holds the ciphertext again and the call returns [`Error::Authentication`]; if the
/// engine fails, `buf` is zeroed.
#[inline]
pub fn open(
    engine: &KeyedEngine,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &[u8],
) -> Result<(), Error> {
    if engine.runs_serially(buf.len()) {
        check(nonce, aad, buf.len(), tag.len())?;
        let key = engine.key();
        if key.open_nonce(nonce, aad, (&mut *buf).into(), tag) {
            return Ok(());
        }
        // The forgery policy, as `Refused::messages` applies it through an engine: the keystream
        // once more (a seal cannot fail here).
        Refused::apply(
            buf,
            |b| {
                let mut again = key.crypt_nonce(Direction::Seal, nonce, aad, b.into());
                wipe16(&mut again);
                Ok(())
            },
            |b| b.zeroize(),
        );
        return Err(Error::Authentication);
    }
    open_with(engine.key(), engine.engine(), nonce, aad, buf, tag)
}

/// [`open`] with the key material and the engine apart (out of line: [`open`] is inlined).
#[inline(never)]
fn open_with(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &[u8],
) -> Result<(), Error> {
    check(nonce, aad, buf.len(), tag.len())?;
    let mut msg = Message::with_nonce(key, nonce, aad, buf);
    let mut expected = match engine.crypt(Direction::Open, &mut msg) {
        Ok(t) => t,
        Err(e) => {
            msg.wipe();
            return Err(e);
        }
    };
    if tag_matches(&expected, tag) {
        // the expected tag equals the received one: the caller's
        return Ok(());
    }
    // a forged message's expected tag would make the forgery pass
    wipe16(&mut expected);
    Refused::messages(engine, core::slice::from_mut(&mut msg));
    Err(Error::Authentication)
}

/// One message of a batch to seal.
#[derive(Debug)]
pub struct SealJob<'a> {
    /// Nonce (at least one byte; 12 is the fast path).
    pub nonce: &'a [u8],
    /// Associated data.
    pub aad: &'a [u8],
    /// Plaintext in, ciphertext out.
    pub buf: &'a mut [u8],
    /// Receives the tag; its length chooses the tag length.
    pub tag: &'a mut [u8],
}

/// One message of a batch to open.
#[derive(Debug)]
pub struct OpenJob<'a> {
    /// Nonce.
    pub nonce: &'a [u8],
    /// Associated data.
    pub aad: &'a [u8],
    /// Ciphertext in, plaintext out (the ciphertext again if the batch fails).
    pub buf: &'a mut [u8],
    /// The tag to check.
    pub tag: &'a [u8],
}

/// Seal a batch with `engine` under its key. Inputs are all checked before any work; if the
/// engine fails, every buffer is zeroed and no tag is written.
pub fn seal_batch(engine: &KeyedEngine, jobs: &mut [SealJob<'_>]) -> Result<(), Error> {
    seal_batch_with(engine.key(), engine.engine(), jobs)
}

/// [`seal_batch`] with the key material and the engine apart.
fn seal_batch_with(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    jobs: &mut [SealJob<'_>],
) -> Result<(), Error> {
    for j in jobs.iter() {
        check(j.nonce, j.aad, j.buf.len(), j.tag.len())?;
    }
    // The full tags of the whole batch: written to the callers' tags only once every chunk has
    // been sealed.
    let mut fulls = vec![[0u8; 16]; jobs.len()];
    let mut done = 0usize;
    let r = for_each_chunk(
        &mut *jobs,
        |msgs: &mut Vec<Message<'_>>, chunk: &mut [SealJob<'_>]| {
            msgs.clear();
            msgs.extend(
                chunk
                    .iter_mut()
                    .map(|j| Message::with_nonce(key, j.nonce, j.aad, &mut *j.buf)),
            );
        },
        |msgs| {
            let full = &mut fulls[done..done + msgs.len()];
            done += msgs.len();
            engine.crypt_batch(Direction::Seal, msgs, full)
        },
    );
    if let Err(e) = r {
        // The failed chunk may be part-sealed, the earlier ones are sealed, the later ones hold
        // plaintext: with no tags, every buffer is zeroed.
        jobs.iter_mut().for_each(|j| j.buf.zeroize());
        clear_tags(&mut fulls);
        return Err(e);
    }
    for (j, full) in jobs.iter_mut().zip(&fulls) {
        let n = j.tag.len();
        j.tag.copy_from_slice(&full[..n]);
    }
    clear_tags(&mut fulls);
    Ok(())
}

/// Clear the full tags of sealed messages. They are public (a tag travels with its ciphertext),
/// so a bulk fill is enough (`black_box` keeps it from being dropped as a dead store): zeroize's
/// byte-wise volatile stores cost a tenth of a batch of small messages.
fn clear_tags(tags: &mut [[u8; 16]]) {
    tags.as_flattened_mut().fill(0);
    core::hint::black_box(tags);
}

/// Open a batch with `engine` under its key: all or nothing. If any tag is wrong, every buffer
/// holds its ciphertext again and the call returns [`Error::Authentication`]; if the engine
/// fails, every buffer is zeroed. So no unauthenticated plaintext is released.
pub fn open_batch(engine: &KeyedEngine, jobs: &mut [OpenJob<'_>]) -> Result<(), Error> {
    open_batch_with(engine.key(), engine.engine(), jobs)
}

/// [`open_batch`] with the key material and the engine apart.
fn open_batch_with(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    jobs: &mut [OpenJob<'_>],
) -> Result<(), Error> {
    for j in jobs.iter() {
        check(j.nonce, j.aad, j.buf.len(), j.tag.len())?;
    }
    // The expected tags of one chunk (secret for a forged message: wiped with zeroize).
    let mut expected = vec![[0u8; 16]; jobs.len().min(BATCH_CHUNK)];
    let mut all = subtle::Choice::from(1u8);
    type Lists<'m> = (Vec<Message<'m>>, Vec<&'m [u8]>);
    let r = for_each_chunk(
        &mut *jobs,
        |(msgs, tags): &mut Lists<'_>, chunk: &mut [OpenJob<'_>]| {
            msgs.clear();
            tags.clear();
            // Room for the whole chunk first: a list that grew by reallocation would free blocks
            // still holding moved J0s (for nonces that are not 12 bytes, a J0 and its IV give H).
            msgs.reserve(chunk.len());
            tags.reserve(chunk.len());
            for j in chunk {
                msgs.push(Message::with_nonce(key, j.nonce, j.aad, &mut *j.buf));
                tags.push(j.tag);
            }
        },
        |(msgs, tags)| {
            let n = msgs.len();
            engine.crypt_batch(Direction::Open, msgs, &mut expected[..n])?;
            for (e, t) in expected.iter().zip(tags.iter()) {
                all &= subtle::Choice::from(u8::from(tag_matches(e, t)));
            }
            Ok(())
        },
    );
    expected.zeroize();
    if let Err(e) = r {
        // Every buffer, opened or not, is zeroed.
        jobs.iter_mut().for_each(|j| j.buf.zeroize());
        return Err(e);
    }
    if bool::from(all) {
        return Ok(());
    }
    // Some tag was wrong: every chunk is turned back into its ciphertext.
    let mut msgs: Vec<Message<'_>> = Vec::with_capacity(jobs.len().min(BATCH_CHUNK));
    for chunk in jobs.chunks_mut(BATCH_CHUNK) {
        msgs.clear();
        for j in chunk {
            msgs.push(Message::with_nonce(key, j.nonce, j.aad, &mut *j.buf));
        }
        Refused::messages(engine, &mut msgs);
    }
    Err(Error::Authentication)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::DeviceError;
    use crate::engine::SerialEngine;

    /// The serial engine, failing its `fail_at`-th batch call (counted from 0) and counting calls
    /// and the most messages given in one call.
    struct Flaky {
        inner: SerialEngine,
        fail_at: usize,
        calls: AtomicUsize,
        most: AtomicUsize,
    }

    impl GcmEngine for Flaky {
        fn name(&self) -> &'static str {
            "flaky"
        }
        fn crypt(&self, dir: Direction, msg: &mut Message<'_>) -> Result<[u8; 16], Error> {
            self.inner.crypt(dir, msg)
        }
        fn crypt_batch(
            &self,
            dir: Direction,
            msgs: &mut [Message<'_>],
            tags: &mut [[u8; 16]],
        ) -> Result<(), Error> {
            self.most.fetch_max(msgs.len(), Ordering::Relaxed);
            if self.calls.fetch_add(1, Ordering::Relaxed) == self.fail_at {
                // Half done, as a device failing mid-batch would leave it.
                let half = msgs.len() / 2;
                self.inner
                    .crypt_batch(dir, &mut msgs[..half], &mut tags[..half])?;
                return Err(Error::Device(DeviceError::new("injected")));
            }
            self.inner.crypt_batch(dir, msgs, tags)
        }
    }

    fn flaky(fail_at: usize) -> Flaky {
        Flaky {
            inner: SerialEngine,
            fail_at,
            calls: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        }
    }

    /// Messages of 0..=40 bytes, more than two chunks of them.
    fn batch() -> (Vec<[u8; 12]>, Vec<Vec<u8>>) {
        let n = 2 * BATCH_CHUNK + 77;
        let nonces = (0..n)
            .map(|i| {
                let mut v = [0u8; 12];
                v[..8].copy_from_slice(&(i as u64).to_le_bytes());
                v
            })
            .collect();
        let bufs = (0..n).map(|i| vec![i as u8; i % 41]).collect();
        (nonces, bufs)
    }

    /// `seal_batch` over every message with one AAD.
    fn seal_all(
        key: &KeyMaterial,
        eng: &dyn GcmEngine,
        nonces: &[[u8; 12]],
        aad: &[u8],
        bufs: &mut [Vec<u8>],
        tags: &mut [[u8; 16]],
    ) -> Result<(), Error> {
        let mut jobs: Vec<SealJob<'_>> = bufs
            .iter_mut()
            .zip(tags.iter_mut())
            .zip(nonces)
            .map(|((b, t), n)| SealJob {
                nonce: n,
                aad,
                buf: b,
                tag: t,
            })
            .collect();
        seal_batch_with(key, eng, &mut jobs)
    }

    /// `open_batch` over every message with one AAD.
    fn open_all(
        key: &KeyMaterial,
        eng: &dyn GcmEngine,
        nonces: &[[u8; 12]],
        aad: &[u8],
        bufs: &mut [Vec<u8>],
        tags: &[[u8; 16]],
    ) -> Result<(), Error> {
        let mut jobs: Vec<OpenJob<'_>> = bufs
            .iter_mut()
            .zip(tags)
            .zip(nonces)
            .map(|((b, t), n)| OpenJob {
                nonce: n,
                aad,
                buf: b,
                tag: t,
            })
            .collect();
        open_batch_with(key, eng, &mut jobs)
    }

    /// A serial engine's messages, which the framing runs on the key itself, give what the
    /// same engine gives when the framing calls it (`Flaky` never asks to be skipped): bytes,
    /// tags of every length, and the buffer a forged message leaves.
    #[test]
    fn messages_run_on_the_key_match_the_engine_calls() {
        for key_len in [16usize, 24, 32] {
            let raw: Vec<u8> = (0..key_len as u8).map(|i| i.wrapping_mul(11)).collect();
            let direct = KeyedEngine::new(&raw, |_| Ok(Box::new(SerialEngine))).unwrap();
            let called = KeyedEngine::new(&raw, |_| Ok(Box::new(flaky(usize::MAX)))).unwrap();
            assert!(direct.runs_serially(1 << 30) && !called.runs_serially(0));
            for nonce_len in [12usize, 1, 16] {
                let nonce = vec![0x3c; nonce_len];
                for len in [0usize, 1, 64, 513, 5000] {
                    let pt: Vec<u8> = (0..len).map(|i| i as u8).collect();
                    for tag_len in [12usize, 16] {
                        let (mut a, mut b) = (pt.clone(), pt.clone());
                        let (mut ta, mut tb) = (vec![0u8; tag_len], vec![0u8; tag_len]);
                        seal(&direct, &nonce, b"ad", &mut a, &mut ta).unwrap();
                        seal(&called, &nonce, b"ad", &mut b, &mut tb).unwrap();
                        assert_eq!((&a, &ta), (&b, &tb), "key {key_len} len {len}");
                        let ct = a.clone();
                        ta[0] ^= 1;
                        let r = open(&direct, &nonce, b"ad", &mut a, &ta);
                        assert_eq!((r, &a), (Err(Error::Authentication), &ct));
                        ta[0] ^= 1;
                        open(&direct, &nonce, b"ad", &mut a, &ta).unwrap();
                        assert_eq!(a, pt);
                    }
                }
            }
        }
    }

    #[test]
    fn batches_span_chunks_and_match_single_calls() {
        let key = KeyMaterial::new(&[0x42; 16]).unwrap();
        let one = SerialEngine;
        let (nonces, plain) = batch();
        let mut bufs = plain.clone();
        let mut tags = vec![[0u8; 16]; bufs.len()];
        let eng = flaky(usize::MAX);
        seal_all(&key, &eng, &nonces, b"hdr", &mut bufs, &mut tags).unwrap();
        assert_eq!(eng.calls.load(Ordering::Relaxed), 3);
        assert_eq!(eng.most.load(Ordering::Relaxed), BATCH_CHUNK);
        for i in [0, 1, BATCH_CHUNK - 1, BATCH_CHUNK, 2 * BATCH_CHUNK + 76] {
            let mut b = plain[i].clone();
            let mut t = [0u8; 16];
            seal_with(&key, &one, &nonces[i], b"hdr", &mut b, &mut t).unwrap();
            assert_eq!((&b, &t), (&bufs[i], &tags[i]), "message {i}");
        }

        // One wrong tag in the last chunk: every buffer holds its ciphertext again.
        let sealed = bufs.clone();
        let last = bufs.len() - 1;
        tags[last][0] ^= 1;
        let eng = flaky(usize::MAX);
        let r = open_all(&key, &eng, &nonces, b"hdr", &mut bufs, &tags);
        assert_eq!(r, Err(Error::Authentication));
        assert!(bufs == sealed);

        // All tags right: every buffer is opened.
        tags[last][0] ^= 1;
        open_all(&key, &eng, &nonces, b"hdr", &mut bufs, &tags).unwrap();
        assert!(bufs == plain);
    }

    #[test]
    fn an_engine_failure_in_any_chunk_zeroes_every_buffer() {
        let key = KeyMaterial::new(&[0x17; 32]).unwrap();
        let (nonces, plain) = batch();
        for fail_at in [0, 1, 2] {
            let mut bufs = plain.clone();
            let mut tags = vec![[0xa5u8; 16]; bufs.len()];
            let r = seal_all(&key, &flaky(fail_at), &nonces, b"", &mut bufs, &mut tags);
            assert!(
                matches!(r, Err(Error::Device(_))),
                "seal, failing call {fail_at}"
            );
            assert!(bufs.iter().all(|b| b.iter().all(|&x| x == 0)));
            assert!(tags.iter().all(|t| *t == [0xa5; 16]), "no tag written");

            // Open: seal properly first, then fail one chunk's call.
            let mut bufs = plain.clone();
            let mut tags = vec![[0u8; 16]; bufs.len()];
            let eng = flaky(usize::MAX);
            seal_all(&key, &eng, &nonces, b"", &mut bufs, &mut tags).unwrap();
            let r = open_all(&key, &flaky(fail_at), &nonces, b"", &mut bufs, &tags);
            assert!(
                matches!(r, Err(Error::Device(_))),
                "open, failing call {fail_at}"
            );
            assert!(bufs.iter().all(|b| b.iter().all(|&x| x == 0)));
        }
    }
}
