//! Tink's AES-GCM-HKDF streaming ciphertext format.
//!
//! ```text
//! file    = header segment_0 segment_1 ... segment_n        (segment_n is the last)
//! header  = header_len (1 byte = 1 + derived_key_size + 7) || salt (derived_key_size) || nonce_prefix (7)
//! key     = HKDF-SHA256(ikm = keyset key, salt = salt, info = associated data, L = derived_key_size)
//! segment = AES-GCM(key, nonce_i, aad = "", plaintext_i) || tag (16)
//! nonce_i = nonce_prefix || i as u32 big-endian || (0x01 if last else 0x00)
//! ```
//!
//! With ciphertext segment size `S`, the first segment holds `S - header_len - 16` plaintext
//! bytes and the others `S - 16`; the last may be shorter, down to empty (a full last segment
//! is allowed). An empty plaintext is the header and one empty last segment (a bare tag).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::error::{Error, ErrorKind, Result};

/// Length of the random nonce prefix in the header.
pub(crate) const NONCE_PREFIX_LEN: usize = 7;
/// AES-GCM tag length.
pub(crate) const TAG_LEN: usize = 16;
/// AES-GCM nonce length of each segment.
pub(crate) const NONCE_LEN: usize = 12;

/// Segment sizes of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    segment_size: usize,
    derived_key_size: usize,
}

impl Layout {
    /// The layout of streams with ciphertext segments of `segment_size` bytes and derived keys
    /// of `derived_key_size` bytes (a validated key's: see [`crate::StreamingKey::new`]).
    pub(crate) fn new(segment_size: usize, derived_key_size: usize) -> Layout {
        Layout {
            segment_size,
            derived_key_size,
        }
    }

    /// Derived key size (also the salt length).
    pub(crate) fn derived_key_size(&self) -> usize {
        self.derived_key_size
    }

    /// Header length: `1 + derived_key_size + 7`, also the header's first byte.
    pub(crate) fn header_len(&self) -> usize {
        1 + self.derived_key_size + NONCE_PREFIX_LEN
    }

    /// Ciphertext segment size (tag included).
    pub(crate) fn segment_size(&self) -> usize {
        self.segment_size
    }

    /// Ciphertext bytes of segment `index` when full (the first is shorter by the header).
    pub(crate) fn ciphertext_len(&self, index: u64) -> usize {
        if index == 0 {
            self.segment_size - self.header_len()
        } else {
            self.segment_size
        }
    }

    /// Plaintext bytes of segment `index` when full.
    pub(crate) fn plaintext_len(&self, index: u64) -> usize {
        self.ciphertext_len(index) - TAG_LEN
    }

    /// Number of segments of a plaintext of `len` bytes (at least one).
    pub(crate) fn segment_count(&self, len: u64) -> u64 {
        let first = self.plaintext_len(0) as u64;
        if len <= first {
            1
        } else {
            1 + (len - first).div_ceil(self.plaintext_len(1) as u64)
        }
    }

    /// Size of the ciphertext file for a plaintext of `len` bytes, if it has at most 2^32
    /// segments (Tink's limit).
    pub(crate) fn ciphertext_size(&self, len: u64) -> Option<u64> {
        let n = self.segment_count(len);
        if n > 1 << 32 {
            return None;
        }
        len.checked_add(self.header_len() as u64)?
            .checked_add(n.checked_mul(TAG_LEN as u64)?)
    }
}

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
        crate::random::fill(&mut salt)?;
        let mut nonce_prefix = [0u8; NONCE_PREFIX_LEN];
        crate::random::fill(&mut nonce_prefix)?;
        Ok(Header { salt, nonce_prefix })
    }

    /// The header's bytes: length byte, salt, nonce prefix.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + self.salt.len() + NONCE_PREFIX_LEN);
        out.push((1 + self.salt.len() + NONCE_PREFIX_LEN) as u8);
        out.extend_from_slice(&self.salt);
        out.extend_from_slice(&self.nonce_prefix);
        out
    }

    /// Parses the `header_len - 1` bytes that follow a header length byte that matched
    /// `layout`.
    pub(crate) fn from_body(layout: &Layout, body: &[u8]) -> Result<Header> {
        let dks = layout.derived_key_size();
        if body.len() != dks + NONCE_PREFIX_LEN {
            return Err(Error::format("ciphertext is too short: truncated header"));
        }
        let mut nonce_prefix = [0u8; NONCE_PREFIX_LEN];
        nonce_prefix.copy_from_slice(&body[dks..]);
        Ok(Header {
            salt: body[..dks].to_vec(),
            nonce_prefix,
        })
    }
}

/// The nonce of segment `index`: prefix, big-endian index, last-segment flag.
pub(crate) fn segment_nonce(
    prefix: &[u8; NONCE_PREFIX_LEN],
    index: u32,
    last: bool,
) -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    n[..NONCE_PREFIX_LEN].copy_from_slice(prefix);
    n[NONCE_PREFIX_LEN..NONCE_PREFIX_LEN + 4].copy_from_slice(&index.to_be_bytes());
    n[NONCE_LEN - 1] = u8::from(last);
    n
}

type HmacSha256 = Hmac<Sha256>;

/// SHA-256's output size, HKDF's block.
const HASH_LEN: usize = 32;

/// HKDF-SHA256(ikm, salt, info) of `len` bytes (RFC 5869), written out over HMAC so that
/// every key-derived value is wiped: the HMAC states (the `zeroize` features of `hmac` and
/// `sha2`), the pseudorandom key and each output block (`CtOutput` wipes itself), the chaining
/// block and the result (`Zeroizing`). Out of line, so that its frames lie below its caller's,
/// which wipes them ([`crate::StreamingKey`]'s `stream_key`).
#[inline(never)]
pub(crate) fn hkdf_sha256(
    ikm: &[u8],
    salt: &[u8],
    info: &[u8],
    len: usize,
) -> Result<Zeroizing<Vec<u8>>> {
    if len > 255 * HASH_LEN {
        return Err(Error::new(
            ErrorKind::Crypto,
            "HKDF output length is too large",
        ));
    }
    let mac = |key: &[u8]| {
        <HmacSha256 as KeyInit>::new_from_slice(key)
            .map_err(|_| Error::new(ErrorKind::Crypto, "HMAC key refused"))
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
    use crate::StreamingKey;

    #[test]
    fn hkdf_matches_rfc5869_case_1() {
        let ikm = [0x0b; 22];
        let salt: Vec<u8> = (0x00..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let okm = hkdf_sha256(&ikm, &salt, &info, 42).unwrap();
        assert_eq!(
            hex::encode(okm.as_slice()),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
        );
    }

    #[test]
    fn hkdf_matches_rfc5869_case_2_long_inputs() {
        let ikm: Vec<u8> = (0x00..=0x4f).collect();
        let salt: Vec<u8> = (0x60..=0xaf).collect();
        let info: Vec<u8> = (0xb0..=0xff).collect();
        let okm = hkdf_sha256(&ikm, &salt, &info, 82).unwrap();
        assert_eq!(
            hex::encode(okm.as_slice()),
            "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c\
             59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71\
             cc30c58179ec3e87c14c01d5c1f3434f1d87"
        );
        assert!(hkdf_sha256(&ikm, &salt, &info, 255 * 32).is_ok());
        assert!(hkdf_sha256(&ikm, &salt, &info, 255 * 32 + 1).is_err());
    }

    #[test]
    fn hkdf_matches_rfc5869_case_3_empty_salt_and_info() {
        let okm = hkdf_sha256(&[0x0b; 22], &[], &[], 42).unwrap();
        assert_eq!(
            hex::encode(okm.as_slice()),
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
        );
    }

    #[test]
    fn nonce_layout() {
        let n = segment_nonce(&[1, 2, 3, 4, 5, 6, 7], 0x0a0b0c0d, true);
        assert_eq!(n, [1, 2, 3, 4, 5, 6, 7, 0x0a, 0x0b, 0x0c, 0x0d, 1]);
        let n = segment_nonce(&[0; 7], 1, false);
        assert_eq!(n, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
    }

    #[test]
    fn layout_sizes() {
        let k = StreamingKey::new(1, &[0; 32], 32, 4096).unwrap();
        let l = k.layout();
        assert_eq!(l.header_len(), 40);
        assert_eq!(l.plaintext_len(0), 4096 - 40 - 16);
        assert_eq!(l.plaintext_len(1), 4080);
        assert_eq!(l.segment_count(0), 1);
        assert_eq!(l.segment_count(4040), 1);
        assert_eq!(l.segment_count(4041), 2);
        assert_eq!(l.segment_count(4040 + 4080), 2);
        assert_eq!(l.segment_count(4040 + 4080 + 1), 3);
        assert_eq!(l.ciphertext_size(0), Some(40 + 16));
        assert_eq!(l.ciphertext_size(4040), Some(4096));
        assert_eq!(l.ciphertext_size(4040 + 4080), Some(8192));
        // Tink 1.16.1: 100 bytes with segment size 57, dks 32 gave 204 bytes
        let k = StreamingKey::new(1, &[0; 32], 32, 57).unwrap();
        assert_eq!(k.layout().ciphertext_size(100), Some(204));
        // 2^32 segments is the most
        let k = StreamingKey::new(1, &[0; 16], 16, 41).unwrap();
        let l = k.layout();
        assert_eq!(l.header_len(), 24);
        let max = 1 + ((1u64 << 32) - 1) * 25;
        assert!(l.ciphertext_size(max).is_some());
        assert!(l.ciphertext_size(max + 1).is_none());
    }

    #[test]
    fn header_round_trip() {
        let k = StreamingKey::new(1, &[0; 16], 16, 4096).unwrap();
        let l = k.layout();
        let h = Header::random(&l).unwrap();
        let b = h.to_bytes();
        assert_eq!(b.len(), 24);
        assert_eq!(b[0], 24);
        assert_eq!(Header::from_body(&l, &b[1..]).unwrap(), h);
        assert!(Header::from_body(&l, &b[1..23]).is_err());
    }
}
