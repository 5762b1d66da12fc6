//! Before any timing: every implementation, in every place it offers, must produce gcmx's
//! ciphertext and tag, open them back to the plaintext, and refuse a wrong tag. A peer wired up
//! wrongly (or a profile that computes something else on this CPU) stops the run here.

use crate::measure::pattern;
use crate::peer::{Io, Place};
use crate::peers::Entry;

/// Checks every entry against `entries[0]` (gcmx's typed API) on the benchmark's `sizes` and on
/// lengths around block and register boundaries, with and without associated data. Returns how
/// many messages were checked, or what disagreed.
pub(crate) fn against_gcmx(entries: &[Entry], sizes: &[usize]) -> Result<usize, String> {
    let mut lens: Vec<usize> = sizes.to_vec();
    lens.extend([
        1, 15, 16, 17, 31, 33, 63, 65, 127, 129, 255, 257, 511, 513, 1023, 1025,
    ]);
    lens.extend([2047, 2049, 4095, 4097, 8191, 8193, 65_537]);
    lens.sort_unstable();
    lens.dedup();
    let reference = &entries[0];
    let mut checked = 0;
    for &len in &lens {
        // Associated data: none (the timed case), less than a block, and several blocks.
        for aad_len in [0usize, 13, 100] {
            let aad = pattern(aad_len + 7)[7..].to_vec();
            let mut nonce = [0u8; 12];
            nonce[..8].copy_from_slice(&(len as u64 * 3 + aad_len as u64).to_le_bytes());
            let pt = pattern(len);
            let mut ct = pt.clone();
            let tag = reference.peer.seal(&nonce, &aad, Io::InPlace(&mut ct));
            for e in entries {
                for &place in e.peer.places() {
                    let at = || format!("{} ({place:?}), {len} B, {aad_len} B of AAD", e.name);
                    // Sealing.
                    let mut out = pt.clone();
                    let got = match place {
                        Place::InPlace => e.peer.seal(&nonce, &aad, Io::InPlace(&mut out)),
                        Place::Separate => {
                            out.fill(0);
                            e.peer.seal(&nonce, &aad, Io::Separate(&pt, &mut out))
                        }
                    };
                    if out != ct || got != tag {
                        return Err(format!("{}: seal differs from gcmx's", at()));
                    }
                    // Opening, and refusing a wrong tag.
                    for bad in [false, true] {
                        let mut t = tag;
                        t[15] ^= u8::from(bad);
                        let mut out = ct.clone();
                        let ok = match place {
                            Place::InPlace => e.peer.open(&nonce, &aad, Io::InPlace(&mut out), &t),
                            Place::Separate => {
                                out.fill(0);
                                e.peer.open(&nonce, &aad, Io::Separate(&ct, &mut out), &t)
                            }
                        };
                        if bad && ok {
                            return Err(format!("{}: a wrong tag was accepted", at()));
                        }
                        if !bad && (!ok || out != pt) {
                            return Err(format!("{}: open failed or differs", at()));
                        }
                    }
                    checked += 1;
                }
            }
        }
    }
    Ok(checked)
}
