//! A message around the main loop ([`super::bulk`]): whole steps of eight blocks go to the loop
//! (a seal's first one first, alone: the loop hashes each step's ciphertext during the next, and
//! the last one is hashed after it; an open hashes the ciphertext it is decrypting); the tail and
//! whole short messages take one step of at most eight AES lanes and one reduction. Branches
//! depend on lengths only.

use inout::InOutBuf;
use zeroize::Zeroize;

use super::aes::{Counter, RoundKeys, block, ctr_xor};
use super::bulk::{self, Bulk};
use super::ghash::{GROUP, Regs, absorb, ghash};
use super::ops::{V, from_u128, load, store, to_u128, zero};

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
        let four = ctr_xor::<E, NR, 4>(rk, ctr, &[d[0], d[1], d[2], d[3]]);
        core::array::from_fn(|i| if i < 4 { four[i] } else { zero() })
    } else {
        ctr_xor::<E, NR, GROUP>(rk, ctr, d)
    }
}

/// Seal (`SEAL`) or open `buf` (in place or from its input into its output) with the counter
/// blocks from `ctr` on, absorbing the ciphertext into the GHASH state `y` (natural); returns
/// the new state and leaves `ctr` past the message.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn crypt<const E: bool, const SEAL: bool, const NR: usize>(
    rk: &RoundKeys,
    r: &Regs<'_>,
    ctr: &mut Counter,
    y: V,
    buf: InOutBuf<'_, '_, u8>,
) -> V {
    let steps = buf.len() / STEP;
    let (mut bulk, rest) = buf.split_at(steps * STEP);
    let mut yv = y;
    if steps == 0 {
        return tail::<E, SEAL, NR>(rk, r, ctr, yv, rest);
    }
    let b = Bulk {
        rk,
        powers: r.powers(),
        template: ctr.template(),
        next: ctr.next(),
    };
    if SEAL {
        // The first step alone (nothing to hash yet); the loop hashes each step's ciphertext
        // during the next, and the last one is hashed here after it.
        let (mut first, mut more) = bulk.split_at(STEP);
        let d: [V; GROUP] = core::array::from_fn(|i| load(&first.get_in()[16 * i..]));
        let out = ctr_xor::<E, NR, GROUP>(rk, ctr, &d);
        ctr.advance(GROUP as u32);
        let o = first.get_out();
        for (i, v) in out.iter().enumerate() {
            store(&mut o[16 * i..], *v);
        }
        if steps > 1 {
            let prev = first.reborrow().into_raw().1.cast_const();
            let (src, dst) = more.reborrow().into_raw();
            let b = Bulk {
                next: ctr.next(),
                ..b
            };
            #[allow(unsafe_code)]
            // SAFETY: the entry points run only where `Level::detect` found AES and PMULL
            // (and SHA3 for `E`); `src` and `dst` are the input and output of the steps after
            // the first (`128 · (steps − 1)` bytes, one buffer or two that do not overlap, as
            // `InOutBuf` guarantees), `prev` the first step's 128 bytes of output.
            let next = unsafe { bulk::run::<E, true, NR>(&b, src, dst, prev, steps - 1, yv) };
            yv = next;
            ctr.advance(GROUP as u32 * (steps as u32 - 1));
        }
        let last: &[u8] = if steps > 1 {
            &more.get_out()[STEP * (steps - 2)..]
        } else {
            first.get_out()
        };
        let c: [V; GROUP] = core::array::from_fn(|i| load(&last[16 * i..]));
        yv = absorb::<E>(r, yv, &c);
    } else {
        let (src, dst) = bulk.reborrow().into_raw();
        #[allow(unsafe_code)]
        // SAFETY: as for the seal: the core's features, and `src`, `dst` the whole steps'
        // input and output (equal, or apart without overlap).
        let next = unsafe { bulk::run::<E, false, NR>(&b, src, dst, core::ptr::null(), steps, yv) };
        yv = next;
        ctr.advance(GROUP as u32 * steps as u32);
    }
    tail::<E, SEAL, NR>(rk, r, ctr, yv, rest)
}

/// The last bytes after the whole steps (fewer than one step): one step of at most eight AES
/// lanes and one reduction, through a zero-padded copy on the stack.
#[inline]
#[target_feature(enable = "aes")]
fn tail<const E: bool, const SEAL: bool, const NR: usize>(
    rk: &RoundKeys,
    r: &Regs<'_>,
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
    r: &Regs<'_>,
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
