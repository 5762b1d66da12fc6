//! The stitched loop: eight blocks of AES-CTR and the GHASH of eight blocks in each step, the
//! GHASH products of one pair of blocks issued after each of the first AES rounds and the
//! reduction after the fifth; the tail and whole short messages in one step of at most eight
//! AES lanes and one reduction.
//!
//! A seal hashes the previous step's ciphertext while it encrypts the current one (its own is
//! not known yet); an open hashes the ciphertext it is decrypting. Branches depend on lengths
//! only.

use inout::InOutBuf;
use zeroize::Zeroize;

use super::aes::{Counter, RoundKeys, block, ctr_xor};
use super::ghash::{Acc, GROUP, Regs, absorb, ghash, pair, reduce};
use super::ops::{V, from_u128, load, store, to_u128, xor, zero};

/// Bytes of one step.
const STEP: usize = 16 * GROUP;

/// The keystream of `n` (at most eight) counter blocks XORed into `d[..n]`, on four AES lanes
/// where that is enough, else eight. Lanes past `n` are computed and not used.
#[inline]
#[target_feature(enable = "aes")]
fn ctr_xor_upto<const E: bool, const NR: usize>(
    rk: &RoundKeys,
    ctr: &Counter,
    d: &[V; GROUP],
    n: usize,
) -> [V; GROUP] {
    if n <= 4 {
        let four = ctr_xor::<E, NR, 4>(rk, ctr, &[d[0], d[1], d[2], d[3]], |_| {});
        core::array::from_fn(|i| if i < 4 { four[i] } else { zero() })
    } else {
        ctr_xor::<E, NR, GROUP>(rk, ctr, d, |_| {})
    }
}

/// Seal (`SEAL`) or open `buf` (in place or from its input into its output) with the counter
/// blocks from `ctr` on, absorbing the ciphertext into the GHASH state `y` (natural); returns
/// the new state and leaves `ctr` past the message.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn crypt<const E: bool, const SEAL: bool, const NR: usize>(
    rk: &RoundKeys,
    r: &Regs,
    ctr: &mut Counter,
    y: V,
    buf: InOutBuf<'_, '_, u8>,
) -> V {
    let bulk_len = buf.len() / STEP * STEP;
    let (mut bulk, rest) = buf.split_at(bulk_len);
    let mut yv = y;
    // A seal's previous step of ciphertext, hashed during the next step.
    let mut pending: Option<[V; GROUP]> = None;
    while !bulk.is_empty() {
        let (mut s, more) = bulk.split_at(STEP);
        bulk = more;
        let d: [V; GROUP] = core::array::from_fn(|i| load(&s.get_in()[16 * i..]));
        let hashed = if SEAL { pending } else { Some(d) };
        let out = match hashed {
            Some(g) => {
                let g0 = xor(g[0], r.reflect(yv));
                let mut acc = Acc::new();
                let mut next = yv;
                let out = ctr_xor::<E, NR, GROUP>(rk, ctr, &d, |round| {
                    if round < GROUP / 2 {
                        let a = if round == 0 { g0 } else { g[2 * round] };
                        pair::<E>(r, round, a, g[2 * round + 1], &mut acc, round == 0);
                    } else if round == GROUP / 2 {
                        next = reduce::<E>(r, &acc);
                    }
                });
                yv = next;
                out
            }
            None => ctr_xor::<E, NR, GROUP>(rk, ctr, &d, |_| {}),
        };
        ctr.advance(GROUP as u32);
        let o = s.get_out();
        for (i, v) in out.iter().enumerate() {
            store(&mut o[16 * i..], *v);
        }
        if SEAL {
            pending = Some(out);
        }
    }
    if let Some(p) = pending {
        yv = absorb::<E>(r, yv, &p);
    }
    tail::<E, SEAL, NR>(rk, r, ctr, yv, rest)
}

/// The last bytes after the whole steps (fewer than one step): one step of at most eight AES
/// lanes and one reduction, through a zero-padded copy on the stack.
#[inline]
#[target_feature(enable = "aes")]
fn tail<const E: bool, const SEAL: bool, const NR: usize>(
    rk: &RoundKeys,
    r: &Regs,
    ctr: &mut Counter,
    y: V,
    mut buf: InOutBuf<'_, '_, u8>,
) -> V {
    let len = buf.len();
    if len == 0 {
        return y;
    }
    let n = len.div_ceil(16);
    let mut pad = [0u8; STEP];
    pad[..len].copy_from_slice(buf.get_in());
    let d: [V; GROUP] = core::array::from_fn(|i| load(&pad[16 * i..]));
    let mut yv = y;
    if !SEAL {
        yv = absorb::<E>(r, yv, &d[..n]);
    }
    let out = ctr_xor_upto::<E, NR>(rk, ctr, &d, n);
    ctr.advance(n as u32);
    for (i, v) in out.iter().enumerate().take(n) {
        store(&mut pad[16 * i..], *v);
    }
    buf.get_out().copy_from_slice(&pad[..len]);
    if SEAL {
        // The ciphertext zero-padded: the keystream past the message is not hashed.
        pad[len..].fill(0);
        let c: [V; GROUP] = core::array::from_fn(|i| load(&pad[16 * i..]));
        yv = absorb::<E>(r, yv, &c[..n]);
    }
    pad.zeroize();
    yv
}

/// GCM's length block `[len(A)]_64 ‖ [len(C)]_64` (bits), as it lies in memory.
#[inline]
#[target_feature(enable = "aes")]
fn length_block(aad_len: usize, ct_len: usize) -> V {
    let b = ((((aad_len as u128) * 8) << 64) | ((ct_len as u128) * 8)).to_be_bytes();
    bytemuck::cast(b)
}

/// The tag `S ^ E_K(J0)` from the GHASH state (natural) and the mask (as it lies in memory).
#[inline]
#[target_feature(enable = "aes")]
fn tag(s: V, mask: V) -> [u8; 16] {
    let m: [u8; 16] = bytemuck::cast(mask);
    (to_u128(s) ^ u128::from_be_bytes(m)).to_be_bytes()
}

/// One whole GCM message (SP 800-38D 7.1-7.2): seal (`SEAL`) or open `buf` under the
/// pre-counter block `j0` with associated data `aad`; returns the full tag (for an open, the
/// expected one).
///
/// A short message (its associated data, ciphertext and length block at most eight GHASH
/// blocks) takes one step: `E_K(J0)` and the keystream in one pass of at most eight AES lanes,
/// then every GHASH block with one reduction. Longer ones: the associated data, the stitched
/// loop, the length block.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn message<const E: bool, const SEAL: bool, const NR: usize>(
    rk: &RoundKeys,
    r: &Regs,
    j0: &[u8; 16],
    aad: &[u8],
    mut buf: InOutBuf<'_, '_, u8>,
) -> [u8; 16] {
    let len = buf.len();
    let (na, nc) = (aad.len().div_ceil(16), len.div_ceil(16));
    let mut ctr = Counter::new(j0);
    let t = if na + nc < GROUP {
        // Lane 0 is J0 (the mask), lanes 1..=nc the message's counter blocks.
        let mut pad = [0u8; STEP];
        pad[16..16 + len].copy_from_slice(buf.get_in());
        let d: [V; GROUP] = core::array::from_fn(|i| load(&pad[16 * i..]));
        let out = ctr_xor_upto::<E, NR>(rk, &ctr, &d, nc + 1);
        for (i, v) in out.iter().enumerate().take(nc + 1).skip(1) {
            store(&mut pad[16 * i..], *v);
        }
        buf.get_out().copy_from_slice(&pad[16..16 + len]);
        // The GHASH blocks: the associated data zero-padded, the ciphertext zero-padded (for
        // a seal the output just written, for an open the input), the length block.
        let mut blocks = [zero(); GROUP];
        let mut a = [0u8; STEP];
        a[..aad.len()].copy_from_slice(aad);
        for (i, b) in blocks.iter_mut().enumerate().take(na) {
            *b = load(&a[16 * i..]);
        }
        let c: [V; GROUP] = if SEAL {
            pad[16 + len..].fill(0);
            core::array::from_fn(|i| load(&pad[16 * i..]))
        } else {
            d
        };
        blocks[na..na + nc].copy_from_slice(&c[1..=nc]);
        blocks[na + nc] = length_block(aad.len(), len);
        let s = absorb::<E>(r, zero(), &blocks[..na + nc + 1]);
        pad.zeroize();
        tag(s, out[0])
    } else {
        let mask = block::<NR>(rk, ctr.block(0));
        ctr.advance(1);
        let y = from_u128(ghash::<E>(r, 0, aad));
        let y = crypt::<E, SEAL, NR>(rk, r, &mut ctr, y, buf);
        let s = absorb::<E>(r, y, &[length_block(aad.len(), len)]);
        tag(s, mask)
    };
    ctr.wipe();
    t
}
