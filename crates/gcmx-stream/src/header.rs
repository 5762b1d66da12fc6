//! Reading a stream's header and finding the key that wrote it.

use std::io::Read;

use zeroize::Zeroizing;

use crate::engine::{Backend, Engine};
use crate::error::{Error, Result};
use crate::format::{Header, TAG_LEN, segment_nonce};
use crate::keyset::{Keyset, StreamingKey};
use crate::window::{auth_error, read_full, read_growing};
use crate::wipe::wipe_this_stack;

/// Reads and checks the header, and picks the key: the one key whose header length matches,
/// or, when several do, the one that opens the first segment (as Tink does). Returns the key,
/// the header, its length, and the bytes read past the header for that trial.
pub(crate) fn read_header<'k>(
    input: &mut impl Read,
    keyset: &'k Keyset,
    aad: &[u8],
) -> Result<(&'k StreamingKey, Header, usize, Option<Vec<u8>>)> {
    let read_err = |e| Error::io("cannot read input", e);
    let mut len_byte = [0u8; 1];
    if read_full(input, &mut len_byte).map_err(read_err)? == 0 {
        return Err(Error::format("ciphertext is empty: no header"));
    }
    let hl = usize::from(len_byte[0]);
    let candidates: Vec<&StreamingKey> = keyset
        .decryption_keys()
        .into_iter()
        .filter(|k| k.layout().header_len() == hl)
        .collect();
    if candidates.is_empty() {
        let mut expected: Vec<String> = keyset
            .decryption_keys()
            .iter()
            .map(|k| k.layout().header_len().to_string())
            .collect();
        expected.dedup();
        return Err(Error::format(format!(
            "bad header length byte {hl} (this keyset expects {}): not a ciphertext of this keyset",
            expected.join(" or ")
        )));
    }
    let mut body = vec![0u8; hl - 1];
    if read_full(input, &mut body).map_err(read_err)? < body.len() {
        return Err(Error::format("ciphertext is truncated: incomplete header"));
    }
    let header = Header::from_body(&candidates[0].layout(), &body)?;
    if candidates.len() == 1 {
        return Ok((candidates[0], header, hl, None));
    }
    // Several keys could have written this file: find the one that opens segment 0.
    let longest = candidates
        .iter()
        .map(|k| k.layout().ciphertext_len(0))
        .max()
        .unwrap_or(0);
    let mut head = Vec::new();
    let n = read_growing(input, &mut head, 0, longest + 1).map_err(read_err)?;
    head.truncate(n);
    for k in &candidates {
        let opened = opens_first_segment(k, &header, aad, &head);
        // The trial's key schedules were built, and its kernels spilled round keys, in the
        // frames below this one: wiped before anything else (a later trial's first use of
        // rayon's pool, say) copies those bytes into the heap.
        wipe_this_stack();
        if opened? {
            return Ok((k, header, hl, Some(head)));
        }
    }
    if n < TAG_LEN {
        return Err(Error::format(
            "ciphertext is truncated: first segment is shorter than a tag",
        ));
    }
    Err(auth_error(0, 1))
}

/// Whether `key` opens the first segment, whose bytes (and possibly one more, which tells
/// whether it is the last) begin `head`.
#[inline(never)]
fn opens_first_segment(
    key: &StreamingKey,
    header: &Header,
    aad: &[u8],
    head: &[u8],
) -> Result<bool> {
    let want = key.layout().ciphertext_len(0);
    let last = head.len() <= want;
    let seg = &head[..head.len().min(want)];
    if seg.len() < TAG_LEN {
        return Ok(false);
    }
    let fk = key.stream_key(header, aad)?;
    let gcm = Engine::new(&fk, Backend::Cpu)?;
    let (ct, tag) = seg.split_at(seg.len() - TAG_LEN);
    let mut buf = Zeroizing::new(ct.to_vec());
    let nonce = segment_nonce(&header.nonce_prefix, 0, last);
    gcm.open(&nonce, &mut buf, tag)
}
