//! Helpers of the hostile-caller tests: keysets of known key material, data, and an [`Audit`]
//! of what a writer offered its inner writer, checked against Tink's format from first
//! principles (its own HKDF and one AES-GCM open per segment at the nonce of its position).

#![allow(dead_code)]

pub(crate) mod hostile;

use std::io::Write;

use gcmx::Gcm;
use gcmx_stream::{Keyset, StreamingKey};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Every test key's material: `IKM` repeated.
pub(crate) const IKM: u8 = 7;

/// A keyset of one key: `dks`-byte derived keys, `seg`-byte ciphertext segments.
pub(crate) fn keyset(dks: usize, seg: u32) -> Keyset {
    Keyset::from(StreamingKey::new(1, &vec![IKM; dks], dks, seg).unwrap())
}

pub(crate) fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

/// The header's length for the keyset's primary key.
pub(crate) fn header_len(ks: &Keyset) -> usize {
    1 + ks.primary().derived_key_size() + 7
}

/// Plaintext bytes of the first segment and of the others.
pub(crate) fn plain_lens(ks: &Keyset) -> (usize, usize) {
    let seg = ks.primary().segment_size() as usize;
    (seg - header_len(ks) - 16, seg - 16)
}

pub(crate) fn encrypt(ks: &Keyset, aad: &[u8], pt: &[u8]) -> Vec<u8> {
    let mut w = ks.encrypting_writer(Vec::new(), aad).unwrap();
    w.write_all(pt).unwrap();
    w.finish().unwrap()
}

/// What an inner writer was offered: every byte at the stream offset it was offered at.
#[derive(Default)]
pub(crate) struct Audit {
    /// The bytes offered, by offset (the union of every offer).
    pub(crate) seen: Vec<u8>,
    /// Bytes the inner writer took (the offset of the next offer).
    pub(crate) accepted: usize,
    /// Offers that disagreed with an earlier offer at the same offset.
    pub(crate) conflicts: Vec<usize>,
}

impl Audit {
    /// Records `bytes` offered at offset `at`.
    pub(crate) fn offer(&mut self, at: usize, bytes: &[u8]) {
        let overlap = self.seen.len().saturating_sub(at).min(bytes.len());
        if self.seen[at..at + overlap] != bytes[..overlap] {
            self.conflicts.push(at);
        }
        if at + bytes.len() > self.seen.len() {
            let from = self.seen.len() - at;
            self.seen.extend_from_slice(&bytes[from..]);
        }
    }

    /// Checks what was offered: no two offers disagree at an offset; the header is the
    /// keyset's; every complete segment opens under the nonce of its position (not the last;
    /// or the last, when nothing follows it) and holds `plaintext` at its offset. A trailing
    /// piece that does not open as the last segment is an unfinished segment (a writer stopped
    /// by an error or a panic) and is not checked.
    pub(crate) fn check(&self, ks: &Keyset, aad: &[u8], plaintext: &[u8]) -> Result<(), String> {
        if !self.conflicts.is_empty() {
            return Err(format!(
                "bytes offered twice at offsets {:?} disagree",
                &self.conflicts[..self.conflicts.len().min(5)]
            ));
        }
        let key = ks.primary();
        let (dks, seg) = (key.derived_key_size(), key.segment_size() as usize);
        let hl = header_len(ks);
        if self.seen.len() < hl {
            return Ok(());
        }
        if usize::from(self.seen[0]) != hl {
            return Err("not the header's length byte".into());
        }
        let salt = &self.seen[1..1 + dks];
        let prefix = &self.seen[1 + dks..hl];
        let file_key = hkdf_sha256(&vec![IKM; dks], salt, aad, dks);
        let gcm = Gcm::new(&file_key).map_err(|e| e.to_string())?;
        let (mut at, mut plain_at, mut index) = (hl, 0usize, 0u32);
        while at < self.seen.len() {
            let full = if index == 0 { seg - hl } else { seg };
            let end = (at + full).min(self.seen.len());
            let piece = &self.seen[at..end];
            let opened = |last: bool| {
                if piece.len() < 16 {
                    return None;
                }
                let mut nonce = [0u8; 12];
                nonce[..7].copy_from_slice(prefix);
                nonce[7..11].copy_from_slice(&index.to_be_bytes());
                nonce[11] = u8::from(last);
                let (ct, tag) = piece.split_at(piece.len() - 16);
                let mut buf = ct.to_vec();
                gcm.decrypt_detached(&nonce, b"", &mut buf, tag)
                    .ok()
                    .map(|()| buf)
            };
            let complete = end - at == full;
            let body = match (complete.then(|| opened(false)).flatten(), opened(true)) {
                (Some(b), _) => b,
                (None, Some(b)) if end == self.seen.len() => b,
                (None, Some(_)) => {
                    return Err(format!("segment {index} is the last, but bytes follow it"));
                }
                (None, None) if !complete => return Ok(()),
                (None, None) => {
                    return Err(format!(
                        "segment {index} (offset {at}) does not open under its position's nonce"
                    ));
                }
            };
            if plaintext.get(plain_at..plain_at + body.len()) != Some(&body[..]) {
                return Err(format!(
                    "segment {index} holds other plaintext than was written at offset {plain_at}"
                ));
            }
            at = end;
            plain_at += body.len();
            index += 1;
        }
        Ok(())
    }
}

type HmacSha256 = Hmac<Sha256>;

/// HKDF-SHA256 (RFC 5869), written out here so that the audit does not trust the crate's own.
pub(crate) fn hkdf_sha256(ikm: &[u8], salt: &[u8], info: &[u8], len: usize) -> Vec<u8> {
    let mut extract = <HmacSha256 as KeyInit>::new_from_slice(salt).unwrap();
    extract.update(ikm);
    let prk = extract.finalize().into_bytes();
    let (mut okm, mut t) = (Vec::new(), Vec::new());
    let mut i = 1u8;
    while okm.len() < len {
        let mut expand = <HmacSha256 as KeyInit>::new_from_slice(&prk).unwrap();
        expand.update(&t);
        expand.update(info);
        expand.update(&[i]);
        t = expand.finalize().into_bytes().to_vec();
        okm.extend_from_slice(&t);
        i += 1;
    }
    okm.truncate(len);
    okm
}
