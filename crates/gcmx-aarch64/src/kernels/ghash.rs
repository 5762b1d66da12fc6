//! GHASH in the POLYVAL domain: the powers of `H`, the products of up to eight blocks against
//! them (Karatsuba, three PMULLs a block), and one Montgomery reduction per group.
//!
//! Layouts. A POLYVAL-domain value `x` (a GCM block read big-endian) sits in a register
//! "natural": its low 64 bits in lane 0. A block as it lies in memory ("raw") is the byte
//! reversal of that. Eight consecutive blocks are a group, block `i` of a group multiplied by
//! `Q_(8−i)`; blocks are taken two at a time, a pair `j` being blocks `2j` and `2j + 1`: one
//! TBL gathers both blocks' high halves byte-reversed, another their low halves, so that one
//! PMULL and one PMULL2 against a register holding the two matching halves of the powers give
//! both blocks' products. A group of fewer blocks is the last blocks of a group, the slots
//! before them zero (a zero block adds nothing), so the same powers serve every length.

use super::ops::{
    IDX_HI, IDX_LO, IDX_REV, V, from_u128, pmull, pmull2, swap, tbl1, tbl2, to_u128, xor, xor3,
    zero,
};

/// Two consecutive raw blocks in a register pair (TBL's two-register table).
pub(super) use core::arch::aarch64::uint8x16x2_t as Pair;

/// POLYVAL's reduction constant `x^127 + x^126 + x^121` (as `0xC2 << 56` in lane 0).
const POLY: u128 = 0xC200_0000_0000_0000;

/// Blocks in a group.
pub(super) const GROUP: usize = 8;

/// `mulX(v)` modulo POLYVAL's polynomial, constant time.
pub(super) fn mulx(v: u128) -> u128 {
    let top = v >> 127;
    (v << 1) ^ (top.wrapping_neg() & 0xC200_0000_0000_0000_0000_0000_0000_0001)
}

/// The powers of a key in pair layout, as the bulk loop reads them: entries `0..4` the high
/// halves, `4..8` the low halves, `8..12` the two halves XORed (Karatsuba's middle operand),
/// each entry two 64-bit lanes for the blocks `a = 2j`, `b = 2j + 1` of a group: `Q_(8−a)` in
/// lane 0, `Q_(8−b)` in lane 1.
#[derive(Clone, Copy, Default)]
pub(super) struct Powers(pub(super) [u128; 12]);

impl Powers {
    /// The pair layout of `q[k] = Q_(k+1)` for `k = 0..8`.
    pub(super) fn from_q(q: &[u128; GROUP]) -> Powers {
        let lanes = |j: usize, f: &dyn Fn(u128) -> u128| {
            let (a, b) = (q[GROUP - 1 - 2 * j], q[GROUP - 2 - 2 * j]);
            f(a) | (f(b) << 64)
        };
        let hi = |x: u128| x >> 64;
        let lo = |x: u128| x & u128::from(u64::MAX);
        Powers(core::array::from_fn(|i| match i / 4 {
            0 => lanes(i % 4, &hi),
            1 => lanes(i % 4, &lo),
            _ => lanes(i % 4, &|x| hi(x) ^ lo(x)),
        }))
    }

    /// `Q_1` back from the layout: `from_q`'s `q[0]` is lane 1 of pair `GROUP / 2 − 1`, its
    /// high half in that entry of the high halves, its low half in that of the low halves.
    pub(super) fn q1(&self) -> u128 {
        let j = GROUP / 2 - 1;
        ((self.0[j] >> 64) << 64) | (self.0[4 + j] >> 64)
    }
}

/// The powers and the constants of the hash.
#[derive(Clone, Copy)]
pub(super) struct Regs<'a> {
    p: &'a Powers,
    idx_hi: V,
    idx_lo: V,
    idx_rev: V,
    poly: V,
}

impl<'a> Regs<'a> {
    #[inline]
    #[target_feature(enable = "aes")]
    pub(super) fn new(p: &'a Powers) -> Regs<'a> {
        Regs {
            p,
            idx_hi: bytemuck::cast(IDX_HI),
            idx_lo: bytemuck::cast(IDX_LO),
            idx_rev: bytemuck::cast(IDX_REV),
            poly: from_u128(POLY),
        }
    }

    /// The powers.
    pub(super) fn powers(&self) -> &'a Powers {
        self.p
    }

    /// A block in memory order from a natural value, or back (the same byte reversal).
    #[inline]
    #[target_feature(enable = "aes")]
    pub(super) fn reflect(&self, v: V) -> V {
        tbl1(v, self.idx_rev)
    }
}

/// The unreduced sums of a group's products: `lo` the low halves' products, `hi` the high
/// halves', `mid` Karatsuba's middle products (not yet corrected by `lo ^ hi`).
#[derive(Clone, Copy)]
pub(super) struct Acc {
    lo: V,
    mid: V,
    hi: V,
}

impl Acc {
    #[inline]
    #[target_feature(enable = "aes")]
    pub(super) fn new() -> Acc {
        Acc {
            lo: zero(),
            mid: zero(),
            hi: zero(),
        }
    }
}

/// Accumulate the products of pair `j` (raw blocks `ab.0`, `ab.1`) into `acc`; `first` when
/// `acc` holds nothing yet.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn pair<const E: bool>(r: &Regs<'_>, j: usize, ab: Pair, acc: &mut Acc, first: bool) {
    let h = tbl2(ab, r.idx_hi);
    let l = tbl2(ab, r.idx_lo);
    let m = xor(h, l);
    let p = &r.p.0;
    let (ph, pl, pm) = (from_u128(p[j]), from_u128(p[4 + j]), from_u128(p[8 + j]));
    let (h0, h1) = (pmull(h, ph), pmull2(h, ph));
    let (l0, l1) = (pmull(l, pl), pmull2(l, pl));
    let (m0, m1) = (pmull(m, pm), pmull2(m, pm));
    if first {
        acc.hi = xor(h0, h1);
        acc.lo = xor(l0, l1);
        acc.mid = xor(m0, m1);
    } else {
        acc.hi = xor3::<E>(acc.hi, h0, h1);
        acc.lo = xor3::<E>(acc.lo, l0, l1);
        acc.mid = xor3::<E>(acc.mid, m0, m1);
    }
}

/// Montgomery reduction of a group's products: the new GHASH state (natural).
///
/// The 256-bit sum is `D = hi·x^128 + (mid ^ lo ^ hi)·x^64 + lo` and the result `D·x^-128`:
/// with `t = lo₀·C`, `M = swap(lo) ^ t ^ (mid ^ lo ^ hi)` holds the first folding step in its
/// lane 0 (`a0`) and, in lane 1, the second step's term together with the part of the middle
/// product that lands on the result's low half; with `u = M₀·C` the result is
/// `hi ^ swap(M) ^ u`. Two PMULLs, two EXTs and three three-way XORs.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn reduce<const E: bool>(r: &Regs<'_>, acc: &Acc) -> V {
    let t = pmull(acc.lo, r.poly);
    let m = xor3::<E>(swap(acc.lo), t, xor3::<E>(acc.mid, acc.lo, acc.hi));
    let u = pmull(m, r.poly);
    xor3::<E>(acc.hi, swap(m), u)
}

/// Absorb the raw blocks `blocks` (one to eight; the last already zero-padded) into the state
/// `y` (natural) with one reduction: `y' = (y ^ X_0)·h^n ^ X_1·h^(n−1) ^ … ^ X_(n−1)·h`.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn absorb<const E: bool>(r: &Regs<'_>, y: V, blocks: &[V]) -> V {
    let n = blocks.len();
    debug_assert!((1..=GROUP).contains(&n));
    let first = GROUP - n;
    let mut slot = [zero(); GROUP];
    slot[first..].copy_from_slice(blocks);
    slot[first] = xor(slot[first], r.reflect(y));
    let mut acc = Acc::new();
    for j in first / 2..GROUP / 2 {
        let ab = Pair(slot[2 * j], slot[2 * j + 1]);
        pair::<E>(r, j, ab, &mut acc, j == first / 2);
    }
    reduce::<E>(r, &acc)
}

/// `a·b·x^-128` (POLYVAL's dot product), for the powers at key set-up.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn dot<const E: bool>(r: &Regs<'_>, a: u128, b: u128) -> u128 {
    let (a, b) = (from_u128(a), from_u128(b));
    let acc = Acc {
        lo: pmull(a, b),
        hi: pmull2(a, b),
        mid: pmull(xor(a, swap(a)), xor(b, swap(b))),
    };
    to_u128(reduce::<E>(r, &acc))
}

/// GHASH of `data`, zero-padded to whole blocks, into the state `y`: a group of eight blocks
/// per reduction, the last group shorter.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn ghash<const E: bool>(r: &Regs<'_>, y: u128, data: &[u8]) -> u128 {
    use super::ops::load;
    let mut yv = from_u128(y);
    let mut groups = data.chunks_exact(16 * GROUP);
    for g in groups.by_ref() {
        let b: [V; GROUP] = core::array::from_fn(|i| load(&g[16 * i..]));
        yv = absorb::<E>(r, yv, &b);
    }
    let rest = groups.remainder();
    if !rest.is_empty() {
        let mut pad = [0u8; 16 * GROUP];
        pad[..rest.len()].copy_from_slice(rest);
        let n = rest.len().div_ceil(16);
        let b: [V; GROUP] = core::array::from_fn(|i| load(&pad[16 * i..]));
        yv = absorb::<E>(r, yv, &b[..n]);
        zeroize::Zeroize::zeroize(&mut pad);
    }
    to_u128(yv)
}
