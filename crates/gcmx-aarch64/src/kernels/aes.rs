//! AES: the key schedule, one block, and the counter blocks of a step.

use core::arch::aarch64::*;

use zeroize::Zeroize;

use super::ops::{V, aese, from_u128, round, xor, xor3};

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

/// FIPS 197 key expansion for a key of 16, 24 or 32 bytes, into `rk` (each round key's 16 bytes
/// read little-endian, so that it converts to a register holding them in memory order); returns
/// the number of rounds. Branches depend on the key length only.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn expand(key: &[u8], rk: &mut RoundKeys) -> usize {
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
        let q = [w[4 * r], w[4 * r + 1], w[4 * r + 2], w[4 * r + 3]];
        *k = q
            .iter()
            .rev()
            .fold(0u128, |a, x| (a << 32) | u128::from(*x));
    }
    w.zeroize();
    nr
}

/// The round keys (entries past `nr` are zero), each the 16 bytes of one read little-endian, so
/// that it converts to a register holding them in memory order.
pub(super) type RoundKeys = [u128; 15];

/// AES of one block with `NR` rounds.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn block<const NR: usize>(rk: &RoundKeys, b: V) -> V {
    let mut s = b;
    for k in &rk[..NR - 1] {
        s = round(s, from_u128(*k));
    }
    xor(aese(s, from_u128(rk[NR - 1])), from_u128(rk[NR]))
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

    /// The template of the counter blocks (see [`Counter::high`]).
    pub(super) fn template(&self) -> V {
        self.high
    }

    /// The counter of the next block.
    pub(super) fn next(&self) -> u32 {
        self.next
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

/// One AES round on every lane.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn rounds<const L: usize>(s: &mut [V; L], k: V) {
    for x in s.iter_mut() {
        *x = round(*x, k);
    }
}

/// The first `L` counter blocks from `ctr`'s next one.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn counters<const L: usize>(ctr: &Counter) -> [V; L] {
    core::array::from_fn(|i| ctr.block(i as u32))
}

/// The last round on every lane and the keystream XORed into `d`: AESE with round key
/// `NR − 1`, then the last round key and the data in one three-way XOR.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn last<const E: bool, const NR: usize, const L: usize>(
    rk: &RoundKeys,
    s: &[V; L],
    d: &[V; L],
) -> [V; L] {
    let (k, last) = (from_u128(rk[NR - 1]), from_u128(rk[NR]));
    core::array::from_fn(|i| xor3::<E>(aese(s[i], k), last, d[i]))
}

/// The keystream of `L` consecutive counter blocks from `ctr`'s next one, XORed into `d`
/// (block `i` of `d` with counter block `i`), with `NR` rounds.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn ctr_xor<const E: bool, const NR: usize, const L: usize>(
    rk: &RoundKeys,
    ctr: &Counter,
    d: &[V; L],
) -> [V; L] {
    let mut s = counters::<L>(ctr);
    for k in &rk[..NR - 1] {
        rounds(&mut s, from_u128(*k));
    }
    last::<E, NR, L>(rk, &s, d)
}
