//! AES: the key schedule, one block, and the counter blocks of a step.

use core::arch::aarch64::*;

use zeroize::Zeroize;

use super::ops::{V, aese, round, xor};

/// The round constants (public).
const RCON: [u32; 10] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36];

/// `SubWord(w)` (bytes in memory order, read little-endian): AESE of `w` in all four columns
/// with a zero round key. ShiftRows only moves bytes between columns, which are equal, so lane
/// 0 is SubBytes of `w`. Constant time: no table.
#[inline]
#[target_feature(enable = "aes")]
fn sub_word(w: u32) -> u32 {
    let v = vreinterpretq_u8_u32(vdupq_n_u32(w));
    vgetq_lane_u32::<0>(vreinterpretq_u32_u8(aese(v, vdupq_n_u8(0))))
}

/// FIPS 197 key expansion for a key of 16, 24 or 32 bytes, into `rk` (round keys in memory
/// byte order); returns the number of rounds. Branches depend on the key length only.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn expand(key: &[u8], rk: &mut [[u8; 16]; 15]) -> usize {
    let nk = key.len() / 4;
    let nr = nk + 6;
    let mut w = [0u32; 60];
    for (wi, c) in w.iter_mut().zip(key.chunks_exact(4)) {
        *wi = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    for i in nk..4 * (nr + 1) {
        let mut t = w[i - 1];
        if i % nk == 0 {
            // RotWord(SubWord(t)) with the bytes read little-endian is a rotation right by 8.
            t = sub_word(t).rotate_right(8) ^ RCON[i / nk - 1];
        } else if nk > 6 && i % nk == 4 {
            t = sub_word(t);
        }
        w[i] = w[i - nk] ^ t;
    }
    for (r, k) in rk.iter_mut().enumerate().take(nr + 1) {
        for (j, c) in k.chunks_exact_mut(4).enumerate() {
            c.copy_from_slice(&w[4 * r + j].to_le_bytes());
        }
    }
    w.zeroize();
    nr
}

/// The round keys as registers (entries past `nr` are zero).
pub(super) type RoundKeys = [V; 15];

/// AES of one block with `NR` rounds.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn block<const NR: usize>(rk: &RoundKeys, b: V) -> V {
    let mut s = b;
    for k in &rk[..NR - 1] {
        s = round(s, *k);
    }
    xor(aese(s, rk[NR - 1]), rk[NR])
}

/// The counter blocks of a message, made one at a time from a 32-bit counter: the first 12
/// bytes of the counter block never change (inc32), so a block is those bytes and the counter
/// written big-endian. A block costs one vector instruction (EXT) besides the scalar add and
/// byte reversal and the move into a vector register.
#[derive(Clone, Copy)]
pub(super) struct Counter {
    /// `(0, c[0..4], c[4..8], c[8..12])` as 32-bit lanes: EXT by 4 bytes with a register whose
    /// lane 0 holds the big-endian counter gives the counter block.
    high: V,
    /// The counter of the next block, as a number.
    next: u32,
}

impl Counter {
    /// The counter blocks from `ctr` on.
    #[inline]
    #[target_feature(enable = "aes")]
    pub(super) fn new(ctr: &[u8; 16]) -> Counter {
        let mut h = [0u8; 16];
        h[4..].copy_from_slice(&ctr[..12]);
        let c = Counter {
            high: bytemuck::cast(h),
            next: u32::from_be_bytes([ctr[12], ctr[13], ctr[14], ctr[15]]),
        };
        h.zeroize();
        c
    }

    /// The counter block `i` blocks after the next one.
    #[inline]
    #[target_feature(enable = "aes")]
    pub(super) fn block(&self, i: u32) -> V {
        let be = self.next.wrapping_add(i).swap_bytes();
        let low = vreinterpretq_u8_u32(vsetq_lane_u32::<0>(be, vdupq_n_u32(0)));
        vextq_u8::<4>(self.high, low)
    }

    /// Move past `n` blocks (inc32: the counter wraps mod 2^32).
    #[inline]
    #[target_feature(enable = "aes")]
    pub(super) fn advance(&mut self, n: u32) {
        self.next = self.next.wrapping_add(n);
    }

    /// Wipe the counter (its first 12 bytes are secret when the nonce was not 12 bytes long).
    #[inline]
    #[target_feature(enable = "aes")]
    pub(super) fn wipe(&mut self) {
        self.high = vdupq_n_u8(0);
        self.next = 0;
    }
}

/// The keystream of `L` consecutive counter blocks from `ctr`'s next one, XORed into `d`
/// (block `i` of `d` with counter block `i`), with `NR` rounds; `between(r)` runs after round
/// `r` (`0..NR - 1`), so that a caller's GHASH work interleaves with the AES rounds.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn ctr_xor<const E: bool, const NR: usize, const L: usize>(
    rk: &RoundKeys,
    ctr: &Counter,
    d: &[V; L],
    mut between: impl FnMut(usize),
) -> [V; L] {
    let mut s: [V; L] = core::array::from_fn(|i| ctr.block(i as u32));
    for (r, k) in rk[..NR - 1].iter().enumerate() {
        for x in s.iter_mut() {
            *x = round(*x, *k);
        }
        between(r);
    }
    let last = rk[NR];
    core::array::from_fn(|i| super::ops::xor3::<E>(aese(s[i], rk[NR - 1]), last, d[i]))
}
