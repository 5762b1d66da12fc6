//! The instructions the kernels are made of, in one place: loads and stores, AES rounds,
//! PMULL, EOR3, and the byte-shuffle constants.
//!
//! Every function of the kernels that uses these carries `#[target_feature(enable = "aes")]`
//! (Rust's `aes`: FEAT_AES with FEAT_PMULL, and NEON) and is reached only from the entry points
//! of [`Keys`](super::Keys), which exist only after [`Level::detect`](super::Level::detect)
//! found those features. EOR3 needs FEAT_SHA3 besides: [`xor3`]'s `E = true` form runs only in
//! the entry points of [`Level::Eor3`](super::Level::Eor3), reached only where `detect` found
//! it. The functions are small and `#[inline]`: they inline into those entry points and compile
//! to the single instructions named.

use core::arch::aarch64::*;

use bytemuck::cast;

/// A 128-bit NEON register as 16 bytes.
pub(super) type V = uint8x16_t;

/// Sixteen bytes from `b` (at least 16 long), as they lie in memory.
#[inline(always)]
pub(super) fn load(b: &[u8]) -> V {
    bytemuck::pod_read_unaligned(&b[..16])
}

/// `v` into the first 16 bytes of `b`, as it lies in the register.
#[inline(always)]
pub(super) fn store(b: &mut [u8], v: V) {
    b[..16].copy_from_slice(bytemuck::bytes_of(&v));
}

/// A `u128` as a register: its low 64 bits in lane 0 (the POLYVAL-domain layout, "natural").
#[inline(always)]
pub(super) fn from_u128(x: u128) -> V {
    cast(x)
}

/// A register as a `u128` (the inverse of [`from_u128`]).
#[inline(always)]
pub(super) fn to_u128(v: V) -> u128 {
    cast(v)
}

/// All zero.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn zero() -> V {
    vdupq_n_u8(0)
}

/// `a ^ b`.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn xor(a: V, b: V) -> V {
    veorq_u8(a, b)
}

/// `a ^ b ^ c`: one EOR3 when `E` (FEAT_SHA3), else two EORs.
///
/// EOR3 is written as inline assembly: the generic code around it is compiled for `aes` alone
/// and inlined into both variants, and LLVM inlines no intrinsic that needs a feature its
/// caller lacks (`veor3q_u8` would stay a call).
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn xor3<const E: bool>(a: V, b: V, c: V) -> V {
    if E {
        let r: V;
        #[allow(unsafe_code)]
        // SAFETY: EOR3 reads the three named registers and writes the fourth, nothing else.
        // `E` is true only in the kernels of `Level::Eor3`, which `Level::detect` reports only
        // where the core has FEAT_SHA3 (see the module documentation).
        unsafe {
            core::arch::asm!(
                ".arch_extension sha3",
                "eor3 {r:v}.16b, {a:v}.16b, {b:v}.16b, {c:v}.16b",
                r = lateout(vreg) r,
                a = in(vreg) a,
                b = in(vreg) b,
                c = in(vreg) c,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        r
    } else {
        veorq_u8(veorq_u8(a, b), c)
    }
}

/// The 64-bit halves of `v` swapped.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn swap(v: V) -> V {
    vextq_u8::<8>(v, v)
}

/// AESE: AddRoundKey (`s ^ k`), SubBytes and ShiftRows.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn aese(s: V, k: V) -> V {
    vaeseq_u8(s, k)
}

/// AESMC: MixColumns.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn aesmc(s: V) -> V {
    vaesmcq_u8(s)
}

/// One full AES round (AddRoundKey with `k`, SubBytes, ShiftRows, MixColumns), as AESE then
/// AESMC on the same register, the pair cores fuse.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn round(s: V, k: V) -> V {
    aesmc(aese(s, k))
}

/// PMULL: the 128-bit carry-less product of the low 64-bit lanes of `a` and `b`.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn pmull(a: V, b: V) -> V {
    let a0 = vgetq_lane_u64::<0>(vreinterpretq_u64_u8(a));
    let b0 = vgetq_lane_u64::<0>(vreinterpretq_u64_u8(b));
    vreinterpretq_u8_p128(vmull_p64(a0, b0))
}

/// PMULL2: the 128-bit carry-less product of the high 64-bit lanes of `a` and `b`.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn pmull2(a: V, b: V) -> V {
    vreinterpretq_u8_p128(vmull_high_p64(
        vreinterpretq_p64_u8(a),
        vreinterpretq_p64_u8(b),
    ))
}

/// TBL index: the first 8 bytes of two blocks, each reversed: `(x_a.hi, x_b.hi)` of their
/// POLYVAL-domain values (a block read big-endian: its first 8 bytes are the high half).
pub(super) const IDX_HI: [u8; 16] = [7, 6, 5, 4, 3, 2, 1, 0, 23, 22, 21, 20, 19, 18, 17, 16];
/// TBL index: the last 8 bytes of two blocks, each reversed: `(x_a.lo, x_b.lo)`.
pub(super) const IDX_LO: [u8; 16] = [15, 14, 13, 12, 11, 10, 9, 8, 31, 30, 29, 28, 27, 26, 25, 24];
/// TBL index: the 16 bytes reversed, between a block in memory order and its POLYVAL-domain
/// value (the map is its own inverse).
pub(super) const IDX_REV: [u8; 16] = [15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0];

/// A register pair's bytes picked by `idx` (0..16 from the first, 16..32 from the second):
/// one TBL.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn tbl2(ab: uint8x16x2_t, idx: V) -> V {
    vqtbl2q_u8(ab, idx)
}

/// `v`'s bytes picked by `idx`: one TBL.
#[inline]
#[target_feature(enable = "aes")]
pub(super) fn tbl1(v: V, idx: V) -> V {
    vqtbl1q_u8(v, idx)
}
