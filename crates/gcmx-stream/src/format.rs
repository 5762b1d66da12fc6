//! Tink's AES-GCM-HKDF streaming format: the header, and each stream's key.
//!
//! ```text
//! file    = header segment_0 segment_1 ... segment_n        (segment_n is the last)
//! header  = header_len (1 byte = 1 + derived_key_size + 7) || salt (derived_key_size) || nonce_prefix (7)
//! key     = HKDF-SHA256(ikm = keyset key, salt = salt, info = associated data, L = derived_key_size)
//! segment = AES-GCM(key, nonce_i, aad = "", plaintext_i) || tag (16)
//! ```
//!
//! The segments' geometry is [`Layout`]'s, their nonces [`nonce`](crate::nonce::nonce)'s. An
//! empty plaintext is the header and one empty last segment (a bare tag).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::error::{Error, Result};
use crate::layout::{Layout, NONCE_PREFIX_LEN};

/// A ciphertext header: the salt and the nonce prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    /// HKDF salt, `derived_key_size` bytes.
    pub(crate) salt: Vec<u8>,
    /// Nonce prefix of every segment.
    pub(crate) nonce_prefix: [u8; NONCE_PREFIX_LEN],
}

impl Header {
    /// A fresh header with a random salt and nonce prefix.
    pub(crate) fn random(layout: &Layout) -> Result<Header> {
        let mut salt = vec![0u8; layout.derived_key_size()];
        random(&mut salt)?;
        let mut nonce_prefix = [0u8; NONCE_PREFIX_LEN];
        random(&mut nonce_prefix)?;
        Ok(Header { salt, nonce_prefix })
    }

    /// The header's bytes: length byte, salt, nonce prefix.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let len = [(1 + self.salt.len() + NONCE_PREFIX_LEN) as u8];
        [&len[..], &self.salt, &self.nonce_prefix].concat()
    }

    /// Parses the `header_len - 1` bytes that follow a header length byte that matched
    /// `layout`.
    pub(crate) fn from_body(layout: &Layout, body: &[u8]) -> Result<Header> {
        let short = || Error::format("ciphertext is too short: truncated header");
        let (salt, prefix) = body
            .split_at_checked(layout.derived_key_size())
            .ok_or_else(short)?;
        let nonce_prefix = prefix.try_into().map_err(|_| short())?;
        Ok(Header {
            salt: salt.to_vec(),
            nonce_prefix,
        })
    }
}

/// Fills `buf` with random bytes from the operating system's generator.
pub(crate) fn random(buf: &mut [u8]) -> Result<()> {
    getrandom::fill(buf).map_err(|e| Error::crypto(format!("no random numbers from the OS: {e}")))
}

type HmacSha256 = Hmac<Sha256>;

/// SHA-256's output size, HKDF's block.
const HASH_LEN: usize = 32;

/// HKDF-SHA256(ikm, salt, info) of `len` bytes (RFC 5869), over HMAC so that every derived
/// value is wiped: the HMAC states (`zeroize` features), the pseudorandom key and output
/// blocks (`CtOutput`), the chaining block and the result (`Zeroizing`). Out of line, so that
/// its frames lie below its caller's, which wipes them (`StreamingKey::stream_key`).
#[inline(never)]
pub(crate) fn hkdf_sha256(
    ikm: &[u8],
    salt: &[u8],
    info: &[u8],
    len: usize,
) -> Result<Zeroizing<Vec<u8>>> {
    if len > 255 * HASH_LEN {
        return Err(Error::crypto("HKDF output length is too large"));
    }
    let mac = |key: &[u8]| {
        <HmacSha256 as KeyInit>::new_from_slice(key).map_err(|_| Error::crypto("HMAC key refused"))
    };
    // Extract: PRK = HMAC(salt, IKM). An empty salt is the same HMAC key as HashLen zeros.
    let mut extract = mac(salt)?;
    extract.update(ikm);
    let prk = extract.finalize();
    // Expand: T(i) = HMAC(PRK, T(i-1) || info || i), OKM = T(1) || T(2) || ...
    let mut okm = Zeroizing::new(vec![0u8; len]);
    let mut prev = Zeroizing::new([0u8; HASH_LEN]);
    for (i, block) in okm.chunks_mut(HASH_LEN).enumerate() {
        let mut expand = mac(prk.as_bytes())?;
        if i > 0 {
            expand.update(prev.as_slice());
        }
        expand.update(info);
        // `len` is at most 255 blocks, so the counter fits a byte.
        expand.update(&[(i + 1) as u8]);
        let t = expand.finalize();
        prev.copy_from_slice(t.as_bytes());
        block.copy_from_slice(&prev[..block.len()]);
    }
    Ok(okm)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5869's cases 1 to 3 (the third with empty salt and info), and HKDF's longest output.
    #[test]
    fn hkdf_matches_rfc5869() {
        let r = |a: u8, b: u8| (a..=b).collect::<Vec<u8>>();
        let (ikm, salt, info) = (r(0x00, 0x4f), r(0x60, 0xaf), r(0xb0, 0xff));
        let short = (vec![0x0b; 22], r(0x00, 0x0c), r(0xf0, 0xf9));
        let inputs = [
            short.clone(),
            (ikm.clone(), salt.clone(), info.clone()),
            (short.0, vec![], vec![]),
        ];
        let okm = [
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
            "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c\
             59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71\
             cc30c58179ec3e87c14c01d5c1f3434f1d87",
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8",
        ];
        for ((k, s, i), want) in inputs.iter().zip(okm) {
            let got = hkdf_sha256(k, s, i, want.len() / 2).unwrap();
            assert_eq!(hex::encode(got.as_slice()), want);
        }
        assert!(hkdf_sha256(&ikm, &salt, &info, 255 * 32).is_ok());
        assert!(hkdf_sha256(&ikm, &salt, &info, 255 * 32 + 1).is_err());
    }

    #[test]
    fn header_round_trip() {
        let l = Layout::new(4096, 16);
        let h = Header::random(&l).unwrap();
        let b = h.to_bytes();
        assert_eq!(b.len(), 24);
        assert_eq!(b[0], 24);
        assert_eq!(Header::from_body(&l, &b[1..]).unwrap(), h);
        assert!(Header::from_body(&l, &b[1..23]).is_err());
    }
}
