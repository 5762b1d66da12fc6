//! GCM framing, once for every backend: SP 800-38D's limits, J0, tag truncation, the
//! constant-time tag comparison, and what a failed authentication leaves in the buffer.
//!
//! After a failed authentication the buffer is turned back into the ciphertext it held (sealing
//! it again re-applies the same keystream), so the caller gets back exactly what it passed in
//! and can, for example, try another key. If the engine fails while doing that, the buffer is
//! zeroed instead. Either way it never holds unauthenticated plaintext when the call returns.

use subtle::ConstantTimeEq;
use zeroize::Zeroize;

use crate::Error;
use crate::direction::Direction;
use crate::engine::{GcmEngine, Message};
use crate::key::KeyMaterial;

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
/// use gcmx_core::{Error, frame::check};
/// assert_eq!(check(&[], b"", 0, 16), Err(Error::NonceLength(0)));
/// assert_eq!(check(&[0; 12], b"", 0, 5), Err(Error::TagLength(5)));
/// assert_eq!(check(&[0; 12], b"", 0, 17), Err(Error::TagLength(17)));
/// assert!(check(&[0; 12], b"", 100, 16).is_ok());
/// ```
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
pub fn check_lengths(aad_len: usize, msg_len: usize) -> Result<(), Error> {
    if msg_len as u64 > P_MAX {
        return Err(Error::PlaintextTooLong);
    }
    if aad_len as u64 > A_MAX {
        return Err(Error::AadTooLong);
    }
    Ok(())
}

/// Whether `tag` is the first `tag.len()` bytes of `expected`, compared in constant time. A tag
/// longer than 16 bytes or empty never matches.
///
/// ```
/// let full = [7u8; 16];
/// assert!(gcmx_core::frame::tag_matches(&full, &[7u8; 12]));
/// assert!(!gcmx_core::frame::tag_matches(&full, &[7u8; 17]));
/// assert!(!gcmx_core::frame::tag_matches(&full, &[]));
/// ```
pub fn tag_matches(expected: &[u8; 16], tag: &[u8]) -> bool {
    match expected.get(..tag.len()) {
        Some(e) if !tag.is_empty() => e.ct_eq(tag).into(),
        _ => false,
    }
}

/// Seal one message with `engine` under `key`: `buf` becomes the ciphertext, `tag` the tag of
/// length `tag.len()`. If the engine fails, `buf` is zeroed (it may hold part-encrypted data).
pub fn seal(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &mut [u8],
) -> Result<(), Error> {
    check(nonce, aad, buf.len(), tag.len())?;
    let mut msg = Message::new(key.j0(nonce), aad, buf);
    match engine.crypt(Direction::Seal, &mut msg) {
        Ok(mut full) => {
            tag.copy_from_slice(&full[..tag.len()]);
            full.zeroize();
            Ok(())
        }
        Err(e) => {
            msg.wipe();
            Err(e)
        }
    }
}

/// Open one message: on success `buf` holds the plaintext. On a wrong tag it holds the
/// ciphertext again and the call returns [`Error::Authentication`]; if the engine fails, `buf`
/// is zeroed.
pub fn open(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &[u8],
) -> Result<(), Error> {
    check(nonce, aad, buf.len(), tag.len())?;
    let mut msg = Message::new(key.j0(nonce), aad, buf);
    let mut expected = match engine.crypt(Direction::Open, &mut msg) {
        Ok(t) => t,
        Err(e) => {
            msg.wipe();
            return Err(e);
        }
    };
    let ok = tag_matches(&expected, tag);
    expected.zeroize();
    if ok {
        return Ok(());
    }
    restore(engine, core::slice::from_mut(&mut msg));
    Err(Error::Authentication)
}

/// Turn opened buffers back into their ciphertext by sealing them again; zero them all if the
/// engine fails doing so.
fn restore(engine: &dyn GcmEngine, msgs: &mut [Message<'_>]) {
    let mut tags = vec![[0u8; 16]; msgs.len()];
    if engine
        .crypt_batch(Direction::Seal, msgs, &mut tags)
        .is_err()
    {
        msgs.iter_mut().for_each(Message::wipe);
    }
    tags.zeroize();
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

/// Seal a batch. Inputs are all checked before any work; if the engine fails, every buffer is
/// zeroed and no tag is written.
pub fn seal_batch(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    jobs: &mut [SealJob<'_>],
) -> Result<(), Error> {
    for j in jobs.iter() {
        check(j.nonce, j.aad, j.buf.len(), j.tag.len())?;
    }
    let mut fulls = vec![[0u8; 16]; jobs.len()];
    let mut msgs: Vec<Message<'_>> = jobs
        .iter_mut()
        .map(|j| Message::new(key.j0(j.nonce), j.aad, &mut *j.buf))
        .collect();
    if let Err(e) = engine.crypt_batch(Direction::Seal, &mut msgs, &mut fulls) {
        msgs.iter_mut().for_each(Message::wipe);
        fulls.zeroize();
        return Err(e);
    }
    drop(msgs);
    for (j, full) in jobs.iter_mut().zip(&fulls) {
        let n = j.tag.len();
        j.tag.copy_from_slice(&full[..n]);
    }
    fulls.zeroize();
    Ok(())
}

/// Open a batch: all or nothing. If any tag is wrong, every buffer holds its ciphertext again
/// and the call returns [`Error::Authentication`]; if the engine fails, every buffer is zeroed.
/// So no unauthenticated plaintext is released.
pub fn open_batch(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    jobs: &mut [OpenJob<'_>],
) -> Result<(), Error> {
    for j in jobs.iter() {
        check(j.nonce, j.aad, j.buf.len(), j.tag.len())?;
    }
    let tags: Vec<&[u8]> = jobs.iter().map(|j| j.tag).collect();
    let mut expected = vec![[0u8; 16]; jobs.len()];
    let mut msgs: Vec<Message<'_>> = jobs
        .iter_mut()
        .map(|j| Message::new(key.j0(j.nonce), j.aad, &mut *j.buf))
        .collect();
    if let Err(e) = engine.crypt_batch(Direction::Open, &mut msgs, &mut expected) {
        msgs.iter_mut().for_each(Message::wipe);
        expected.zeroize();
        return Err(e);
    }
    let mut all = subtle::Choice::from(1u8);
    for (e, t) in expected.iter().zip(&tags) {
        all &= subtle::Choice::from(u8::from(tag_matches(e, t)));
    }
    expected.zeroize();
    if bool::from(all) {
        Ok(())
    } else {
        restore(engine, &mut msgs);
        Err(Error::Authentication)
    }
}
