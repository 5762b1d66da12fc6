//! Hazardous operations, behind the `hazmat` feature: pieces of GCM that do not authenticate,
//! for protocols that need them and check the tag some other way.
//!
//! What the feature allows:
//!
//! - the short tags of SP 800-38D appendix C (4 and 8 bytes) in the typed API (`U4`, `U8`) and
//!   the framing: a key that opens with them must stay within that appendix's limits on the
//!   number of decryptions and the message length, which gcmx cannot count for you;
//! - [`apply_keystream`]: GCM's keystream from any block of a message, without its tag, to read
//!   or rewrite part of a large message without processing the rest. Its output is
//!   **unauthenticated**: nothing may act on it until the whole message's tag has been checked;
//! - [`tag`]: the full tag of a ciphertext, without decrypting it, for a caller that checks the
//!   tag apart from decrypting (see the example). Compare it in constant time.
//!
//! Both take the typed cipher, so they run on the same AES and GHASH code as its `aead` calls,
//! and the same J0 and counter arithmetic (`inc32`), which exist once in gcmx-core.
//!
//! Reading bytes `[off, off + len)` of a large message: check the tag once over the whole
//! ciphertext, then decrypt only the blocks the range covers.
//!
//! ```
//! # mod gcmx { pub use gcmx_core::{aead, hazmat, Aes256Gcm}; } // the names `gcmx` re-exports
//! use gcmx::{Aes256Gcm, aead::{AeadInOut, KeyInit}, hazmat};
//! use subtle::ConstantTimeEq;
//!
//! let cipher = Aes256Gcm::new(&[7u8; 32].into());
//! let nonce = [1u8; 12].into();
//! let plaintext: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
//! let mut ct = plaintext.clone();
//! let sent_tag = cipher.encrypt_inout_detached(&nonce, b"hdr", ct.as_mut_slice().into()).unwrap();
//!
//! // The tag first, over the whole ciphertext, compared in constant time.
//! let tag = hazmat::tag(&cipher, &nonce, b"hdr", &ct)?;
//! assert!(bool::from(tag.ct_eq(&sent_tag)));
//!
//! // Then any range, from the 16-byte block it starts in.
//! let (off, len) = (54_321usize, 1_000usize);
//! let first = off / 16;
//! let mut part = ct[first * 16..off + len].to_vec();
//! hazmat::apply_keystream(&cipher, &nonce, first as u64, &mut part)?;
//! assert_eq!(&part[off - first * 16..], &plaintext[off..off + len]);
//! # Ok::<(), gcmx_core::Error>(())
//! ```

use aes::cipher::{BlockCipherEncrypt, BlockSizeUser, consts::U16};
use zeroize::Zeroize;

use crate::Error;
use crate::aead_impl::{AesGcm, Nonce, Tag};
use crate::frame::{P_MAX, check_lengths};

/// XOR GCM's keystream for `nonce` into `buf`, whose first byte is the first byte of keystream
/// block `first_block` of the message (block 0 covers the message's bytes 0..16, and is the
/// one encrypted with counter `ctr0 + 1`). Sealing and opening are the same operation, so this
/// both encrypts and decrypts; it neither computes nor checks a tag.
///
/// # Errors
///
/// [`Error::NonceLength`] for an empty nonce; [`Error::PlaintextTooLong`] when `buf` would end
/// past GCM's limit on a message ([`P_MAX`] bytes). `buf` is then untouched.
///
/// # Hazards
///
/// The output is unauthenticated plaintext (or ciphertext no tag covers): use it only once the
/// message's tag has been checked. A nonce used twice with one key gives away the XOR of two
/// plaintexts, here as in sealing.
pub fn apply_keystream<Aes, N, T>(
    cipher: &AesGcm<Aes, N, T>,
    nonce: &Nonce<N>,
    first_block: u64,
    buf: &mut [u8],
) -> Result<(), Error>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt,
    N: aead::array::ArraySize,
{
    let end = first_block
        .checked_mul(16)
        .and_then(|start| start.checked_add(buf.len() as u64));
    if end.is_none_or(|end| end > P_MAX) {
        return Err(Error::PlaintextTooLong);
    }
    if nonce.is_empty() {
        return Err(Error::NonceLength(0));
    }
    let c = cipher.cipher();
    // J0 of a nonce that is not 12 bytes is GHASH_H of the nonce: with it, H could be solved
    // for, so it is wiped.
    let mut j0 = c.j0(nonce);
    c.apply_keystream(&j0, first_block, buf);
    j0.zeroize();
    Ok(())
}

/// The full 16-byte GCM tag of ciphertext `ct` sealed under `nonce` with associated data `aad`,
/// computed without decrypting anything: what a seal of the plaintext returned (its first
/// bytes, for a shorter tag).
///
/// # Errors
///
/// [`Error::NonceLength`] for an empty nonce; [`Error::PlaintextTooLong`] or
/// [`Error::AadTooLong`] past GCM's limits.
///
/// # Hazards
///
/// Compare it with the tag received in constant time (`subtle::ConstantTimeEq`, as the
/// example above): a comparison that stops at the first differing byte lets an attacker forge
/// tags byte by byte.
pub fn tag<Aes, N, T>(
    cipher: &AesGcm<Aes, N, T>,
    nonce: &Nonce<N>,
    aad: &[u8],
    ct: &[u8],
) -> Result<Tag<U16>, Error>
where
    Aes: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt,
    N: aead::array::ArraySize,
{
    check_lengths(aad.len(), ct.len())?;
    if nonce.is_empty() {
        return Err(Error::NonceLength(0));
    }
    let c = cipher.cipher();
    let mut j0 = c.j0(nonce);
    let tag = c.tag_of(&j0, aad, ct);
    j0.zeroize();
    Ok(tag.into())
}
