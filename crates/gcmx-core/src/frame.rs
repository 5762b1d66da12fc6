//! GCM framing, once for every backend: SP 800-38D's limits, J0, tag truncation, the
//! constant-time tag comparison, and wiping the output when authentication fails.

use subtle::ConstantTimeEq;
use zeroize::Zeroize;

use crate::Error;
use crate::engine::{EngineJob, GcmEngine};
use crate::key::KeyMaterial;

/// Longest plaintext GCM allows: 2^36 − 32 bytes (2^39 − 256 bits).
pub const P_MAX: u64 = (1 << 36) - 32;
/// Longest associated data GCM allows: 2^61 − 1 bytes (2^64 − 1 bits, rounded down to bytes).
pub const A_MAX: u64 = (1 << 61) - 1;
/// Tag lengths SP 800-38D allows, in bytes.
pub const TAG_LENGTHS: [usize; 7] = [4, 8, 12, 13, 14, 15, 16];

/// Check the lengths of one message's inputs.
///
/// ```
/// use gcmx_core::{Error, frame::check};
/// assert_eq!(check(&[], b"", 0, 16), Err(Error::NonceLength(0)));
/// assert_eq!(check(&[0; 12], b"", 0, 5), Err(Error::TagLength(5)));
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

/// Compare the first `tag.len()` bytes of `expected` with `tag` in constant time; on a mismatch
/// wipe `buf` (which holds unauthenticated plaintext) and fail.
pub fn verify_or_wipe(expected: &[u8; 16], tag: &[u8], buf: &mut [u8]) -> Result<(), Error> {
    let ok: bool = expected[..tag.len()].ct_eq(tag).into();
    if ok {
        Ok(())
    } else {
        buf.zeroize();
        Err(Error::Authentication)
    }
}

/// Seal one message with `engine` under `key`: `buf` becomes the ciphertext, `tag` the tag of
/// length `tag.len()`. On an engine error `buf` is zeroed.
pub fn seal(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &mut [u8],
) -> Result<(), Error> {
    check(nonce, aad, buf.len(), tag.len())?;
    let j0 = key.j0(nonce);
    match engine.seal(&j0, aad, buf) {
        Ok(full) => {
            tag.copy_from_slice(&full[..tag.len()]);
            Ok(())
        }
        Err(e) => {
            buf.zeroize();
            Err(e)
        }
    }
}

/// Open one message: on success `buf` holds the plaintext; on any failure it is zeroed.
pub fn open(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &[u8],
) -> Result<(), Error> {
    check(nonce, aad, buf.len(), tag.len())?;
    let j0 = key.j0(nonce);
    match engine.open(&j0, aad, buf) {
        Ok(expected) => verify_or_wipe(&expected, tag, buf),
        Err(e) => {
            buf.zeroize();
            Err(e)
        }
    }
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
    /// Ciphertext in, plaintext out (zeroed if the batch fails).
    pub buf: &'a mut [u8],
    /// The tag to check.
    pub tag: &'a [u8],
}

/// Seal a batch. Inputs are all checked before any work; on an engine error every buffer is zeroed.
pub fn seal_batch(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    jobs: &mut [SealJob<'_>],
) -> Result<(), Error> {
    for j in jobs.iter() {
        check(j.nonce, j.aad, j.buf.len(), j.tag.len())?;
    }
    let mut ejobs: Vec<EngineJob<'_>> = jobs
        .iter_mut()
        .map(|j| EngineJob {
            j0: key.j0(j.nonce),
            aad: j.aad,
            buf: &mut *j.buf,
            full_tag: [0; 16],
        })
        .collect();
    if let Err(e) = engine.seal_batch(&mut ejobs) {
        for j in ejobs.iter_mut() {
            j.buf.zeroize();
        }
        return Err(e);
    }
    let tags: Vec<[u8; 16]> = ejobs.iter().map(|j| j.full_tag).collect();
    drop(ejobs);
    for (j, full) in jobs.iter_mut().zip(tags) {
        let n = j.tag.len();
        j.tag.copy_from_slice(&full[..n]);
    }
    Ok(())
}

/// Open a batch: all or nothing. If any tag is wrong (or the engine fails), every buffer is
/// zeroed and the call fails, so no unauthenticated plaintext is released.
pub fn open_batch(
    key: &KeyMaterial,
    engine: &dyn GcmEngine,
    jobs: &mut [OpenJob<'_>],
) -> Result<(), Error> {
    for j in jobs.iter() {
        check(j.nonce, j.aad, j.buf.len(), j.tag.len())?;
    }
    let tags: Vec<&[u8]> = jobs.iter().map(|j| j.tag).collect();
    let mut ejobs: Vec<EngineJob<'_>> = jobs
        .iter_mut()
        .map(|j| EngineJob {
            j0: key.j0(j.nonce),
            aad: j.aad,
            buf: &mut *j.buf,
            full_tag: [0; 16],
        })
        .collect();
    let result = engine.open_batch(&mut ejobs).and_then(|()| {
        let mut all = subtle::Choice::from(1u8);
        for (j, t) in ejobs.iter().zip(&tags) {
            all &= j.full_tag[..t.len()].ct_eq(t);
        }
        if bool::from(all) {
            Ok(())
        } else {
            Err(Error::Authentication)
        }
    });
    if result.is_err() {
        for j in ejobs.iter_mut() {
            j.buf.zeroize();
        }
    }
    result
}
