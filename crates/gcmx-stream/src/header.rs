//! Reading a stream's header and finding the key that wrote it.

use std::io::{self, Read};

use zeroize::Zeroizing;

use crate::engine::{Backend, Engine};
use crate::error::{Error, Result, no_memory, retry};
use crate::format::Header;
use crate::keyset::{Keyset, StreamingKey};
use crate::layout::TAG_LEN;
use crate::nonce::Nonce;
use crate::wipe::wipe_this_stack;

/// Reads and checks the header and picks the key whose header length matches or, when several
/// do, the one that opens the first segment (as Tink does): the key, the header, and the bytes
/// read past it for the trial (to be read first).
pub(crate) fn read_header<'k>(
    input: &mut impl Read,
    keyset: &'k Keyset,
    aad: &[u8],
) -> Result<(&'k StreamingKey, Header, Vec<u8>)> {
    let mut len_byte = [0u8; 1];
    if fill(input, &mut len_byte)? == 0 {
        return Err(Error::format("ciphertext is empty: no header"));
    }
    let hl = usize::from(len_byte[0]);
    let candidates = candidates(keyset, hl);
    let Some(first) = candidates.first() else {
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
    };
    let mut body = vec![0u8; hl - 1];
    if fill(input, &mut body)? < body.len() {
        return Err(Error::format("ciphertext is truncated: incomplete header"));
    }
    let header = Header::from_body(&first.layout(), &body)?;
    if candidates.len() == 1 {
        return Ok((first, header, Vec::new()));
    }
    // Several keys could have written this stream: find the one that opens segment 0 (read with
    // a byte more, which tells whether it is the last).
    let head = read_growing(input, trial_len(keyset, hl) - hl)?;
    for k in &candidates {
        let opened = opens_first_segment(k, &header, aad, &head);
        // The trial's key schedules and spilled round keys are in the frames below: wiped
        // before anything (rayon's pool at its first use, say) copies them into the heap.
        wipe_this_stack();
        if opened? {
            return Ok((k, header, head));
        }
    }
    if head.len() < TAG_LEN {
        return Err(Error::format(
            "ciphertext is truncated: first segment is shorter than a tag",
        ));
    }
    Err(Error::authentication(0, 1))
}

/// The keyset's keys whose header is `hl` bytes long, the primary first.
fn candidates(keyset: &Keyset, hl: usize) -> Vec<&StreamingKey> {
    keyset
        .decryption_keys()
        .into_iter()
        .filter(|k| k.layout().header_len() == hl)
        .collect()
}

/// The bytes [`read_header`] reads of a stream whose header length byte is `hl`: the header,
/// and with several keys of that header length the longest first segment and a byte.
pub(crate) fn trial_len(keyset: &Keyset, hl: usize) -> usize {
    let keys = candidates(keyset, hl);
    let longest = keys.iter().map(|k| k.layout().ciphertext_len(0)).max();
    match longest {
        Some(first) if keys.len() > 1 => hl + first + 1,
        _ => hl,
    }
}

/// Whether `key` opens the first segment, at the start of `head` (a byte more if not the last).
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
    let gcm = Engine::new(&key.stream_key(header, aad)?, Backend::Cpu)?;
    let (ct, tag) = seg.split_at(seg.len() - TAG_LEN);
    let mut buf = Zeroizing::new(ct.to_vec());
    gcm.open(
        &Nonce::new(&header.nonce_prefix, 0, last)?.bytes(),
        &mut buf,
        tag,
    )
}

/// Reads until `buf` is full, the input ends or a read fails (`Interrupted` is retried): the
/// bytes read, and the error.
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> (usize, Option<io::Error>) {
    let mut n = 0;
    while n < buf.len() {
        match retry(|| r.read(&mut buf[n..])) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return (n, Some(e)),
        }
    }
    (n, None)
}

/// [`read_full`] for the header: the bytes read, or the error.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
    match read_full(r, buf) {
        (_, Some(e)) => Err(Error::io("cannot read input", e)),
        (n, None) => Ok(n),
    }
}

/// Grows `buf` towards `want` bytes for the next read, by doubling from 64 KiB, fallibly: a
/// first segment of 2 GiB costs memory only for the bytes that come.
pub(crate) fn grow(buf: &mut Vec<u8>, want: usize) -> io::Result<()> {
    let n = buf.len();
    let grown = n.saturating_mul(2).max(n + (64 << 10)).min(want);
    buf.try_reserve_exact(grown - n)
        .map_err(|_| no_memory(grown))?;
    buf.resize(grown, 0);
    Ok(())
}

/// Reads up to `want` bytes, growing the buffer as data arrives ([`grow`]).
fn read_growing(r: &mut impl Read, want: usize) -> Result<Vec<u8>> {
    let (mut buf, mut n) = (Vec::new(), 0);
    while n < want {
        grow(&mut buf, want).map_err(|e| Error::io("cannot read input", e))?;
        n += fill(r, &mut buf[n..])?;
        if n < buf.len() {
            break;
        }
    }
    buf.truncate(n);
    Ok(buf)
}
