//! The wide kernels: VAES + VPCLMULQDQ on 256-bit registers, 16 blocks a step, for CPUs with
//! those but without AVX-512.

use core::arch::x86_64::*;

use bytemuck::cast;
use inout::InOutBuf;

use super::common::{
    SHORT_MAX, aes1, crypt_tail, ctr_add, ghash_tail, j0_reg, load32, reduce, rev128, short,
    store32, tag_matches, tag_reg,
};
use super::{Keys, NQ, Pre};

/// 256-bit registers per step (8 registers = 16 blocks = 256 bytes).
const W: usize = 8;
/// Bytes per step.
const STEP: usize = 32 * W;
/// Blocks per step: the powers `Q_16..Q_1`.
pub(super) const NB: usize = 2 * W;

/// The byte-reflection mask in both lanes.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn rev256() -> __m256i {
    _mm256_broadcastsi128_si256(rev128())
}

/// Two consecutive entries of a table as one register.
#[inline(always)]
fn load2(t: &[u128], i: usize) -> __m256i {
    bytemuck::pod_read_unaligned(bytemuck::cast_slice(&t[i..i + 2]))
}

/// XOR of a register's two lanes.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn fold(v: __m256i) -> __m128i {
    _mm_xor_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v))
}

/// The GHASH products of register `j` of a wide step (`d` as in memory; `y` joins block 0),
/// accumulated. Register `j` holds blocks `2j` and `2j + 1` of the step's 16, multiplied by
/// `Q_(16 − 2j)` and `Q_(15 − 2j)`: two consecutive entries of the key's table of powers, read
/// with their Karatsuba halves straight from the key.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn wide_products(keys: &Keys, j: usize, d: __m256i, y: __m128i, acc: &mut [__m256i; 3]) {
    let mut x = _mm256_shuffle_epi8(d, rev256());
    if j == 0 {
        x = _mm256_xor_si256(x, _mm256_set_m128i(_mm_setzero_si128(), y));
    }
    let xk = _mm256_xor_si256(x, _mm256_shuffle_epi32::<0x4E>(x));
    let i = NQ - NB + 2 * j;
    let p = load2(keys.p(), i);
    let k = load2(keys.pk(), i);
    acc[0] = _mm256_xor_si256(acc[0], _mm256_clmulepi64_epi128::<0x00>(x, p));
    acc[1] = _mm256_xor_si256(acc[1], _mm256_clmulepi64_epi128::<0x00>(xk, k));
    acc[2] = _mm256_xor_si256(acc[2], _mm256_clmulepi64_epi128::<0x11>(x, p));
}

/// The new GHASH state from a wide step's accumulated products.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn wide_reduce(acc: &[__m256i; 3]) -> __m128i {
    let (lo, hi) = (fold(acc[0]), fold(acc[2]));
    let mid = _mm_xor_si128(fold(acc[1]), _mm_xor_si128(lo, hi));
    reduce(lo, mid, hi)
}

/// Round key `r` in both lanes.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn round_key(keys: &Keys, r: usize) -> __m256i {
    _mm256_broadcastsi128_si256(cast(keys.rk[r]))
}

/// Keeps the products of one register between two AES rounds (see `super::zmm`'s fence: without
/// it the compiler moves a step's GHASH work after its AES rounds). Emits no instruction.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn fence(a: &mut __m256i, b: &mut __m256i, c: &mut __m256i, d: &mut __m256i) {
    #[allow(unsafe_code)]
    // SAFETY: the template is empty: nothing runs, no memory, stack or flag is touched, and
    // each operand keeps its value.
    unsafe {
        core::arch::asm!(
            "/* {0} {1} {2} {3} */",
            inout(ymm_reg) * a,
            inout(ymm_reg) * b,
            inout(ymm_reg) * c,
            inout(ymm_reg) * d,
            options(pure, nomem, nostack, preserves_flags),
        )
    }
}

/// The next wide step's 16 counter blocks from the byte-reflected counters `base` (lanes hold
/// counters `c`, `c+1`); advances `base` by 16. Each block is reflected from its own 32-bit sum,
/// so carries out of the last byte cost nothing extra and no instruction depends on the counter's
/// value (it is secret for nonces that are not 12 bytes long).
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn wide_counters(base: &mut __m256i) -> [__m256i; W] {
    let mut c = [_mm256_setzero_si256(); W];
    for (j, x) in c.iter_mut().enumerate() {
        let n = 2 * j as i32;
        *x = _mm256_shuffle_epi8(
            _mm256_add_epi32(*base, _mm256_set_epi32(0, 0, 0, n, 0, 0, 0, n)),
            rev256(),
        );
    }
    let n = NB as i32;
    *base = _mm256_add_epi32(*base, _mm256_set_epi32(0, 0, 0, n, 0, 0, 0, n));
    c
}

/// One stitched wide step over the 256 bytes of `cur`: AES (`NR` rounds) of the next 16 counter
/// blocks from `base`, XORed into `cur`'s input and written to its output; and, when `HASH`, the
/// GHASH of the 16 blocks `h` into `y` (`h` is `cur`'s input when `None`), one
/// register's products after each of the first eight rounds, so that the AES and carry-less
/// units work at the same time. Written like the 512-bit step (see `super::zmm`): rounds
/// written out, round keys and powers read from the key where used, hashed blocks loaded where
/// used, a fence per round. `SEAL` only tells the seal and open instances apart (one caller
/// each). Returns the new `y`.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn wide_step<const SEAL: bool, const NR: usize, const HASH: bool>(
    keys: &Keys,
    base: &mut __m256i,
    y: __m128i,
    h: Option<&[u8]>,
    mut cur: InOutBuf<'_, '_, u8>,
) -> __m128i {
    let keys: &Keys = core::hint::black_box(keys);
    let k0 = round_key(keys, 0);
    let mut s = wide_counters(base).map(|c| _mm256_xor_si256(c, k0));
    let mut acc = [_mm256_setzero_si256(); 3];
    macro_rules! round {
        ($($r:literal)*) => {$(
            if $r < NR {
                let kr = round_key(keys, $r);
                for x in s.iter_mut() {
                    *x = _mm256_aesenc_epi128(*x, kr);
                }
                if HASH && $r - 1 < W {
                    let src = h.unwrap_or(cur.get_in());
                    wide_products(keys, $r - 1, load32(&src[32 * ($r - 1)..]), y, &mut acc);
                    let [a0, a1, a2] = &mut acc;
                    fence(a0, a1, a2, &mut s[0]);
                }
            }
        )*};
    }
    round!(1 2 3 4 5 6 7 8 9 10 11 12 13);
    let y = if HASH { wide_reduce(&acc) } else { y };
    // the last round key XOR the data: the last round gives the output directly
    let kl = round_key(keys, NR);
    for (j, x) in s.iter().enumerate() {
        let d = load32(&cur.get_in()[32 * j..]);
        store32(
            &mut cur.get_out()[32 * j..],
            _mm256_aesenclast_epi128(*x, _mm256_xor_si256(kl, d)),
        );
    }
    y
}

/// Absorb one wide step of 16 blocks `d` (as in memory) into `y`.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn wide_ghash_step(keys: &Keys, y: __m128i, d: &[u8]) -> __m128i {
    let mut acc = [_mm256_setzero_si256(); 3];
    for j in 0..W {
        wide_products(keys, j, load32(&d[32 * j..]), y, &mut acc);
    }
    wide_reduce(&acc)
}

/// GHASH update on the wide kernels.
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn ghash_entry(keys: &Keys, y: &mut u128, data: &[u8]) {
    ghash_wide(keys, y, data);
}

/// GHASH update: whole steps, then the rest by [`ghash_tail`] (AAD, length blocks).
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn ghash_wide(keys: &Keys, y: &mut u128, data: &[u8]) {
    let mut yv: __m128i = cast(*y);
    let mut steps = data.chunks_exact(STEP);
    for s in steps.by_ref() {
        yv = wide_ghash_step(keys, yv, s);
    }
    *y = cast(ghash_tail(keys, yv, steps.remainder()));
}

narrower_message_entry!("avx2,aes,pclmulqdq,vaes,vpclmulqdq", ghash_wide, crypt_wide);

#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn crypt_entry<const SEAL: bool>(
    keys: &Keys,
    ctr: u128,
    y: &mut u128,
    buf: InOutBuf<'_, '_, u8>,
) {
    match keys.nr {
        10 => crypt_wide::<SEAL, 10>(keys, ctr, y, buf),
        12 => crypt_wide::<SEAL, 12>(keys, ctr, y, buf),
        _ => crypt_wide::<SEAL, 14>(keys, ctr, y, buf),
    }
}

/// The stitched wide loop from `buf`'s input to its output. Seal: each step encrypts 16 blocks
/// while hashing the previous step's ciphertext (read back from the output); open: each step
/// hashes and decrypts the same 16 blocks. Then the remaining blocks by [`crypt_tail`], the last
/// one possibly partial.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn crypt_wide<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    ctr: u128,
    y: &mut u128,
    buf: InOutBuf<'_, '_, u8>,
) {
    let mut yv: __m128i = cast(*y);
    let bulk_len = buf.len() / STEP * STEP;
    let (mut bulk, tail) = buf.split_at(bulk_len);
    let mut base = _mm256_add_epi32(
        _mm256_broadcastsi128_si256(cast(ctr)),
        _mm256_set_epi32(0, 0, 0, 1, 0, 0, 0, 0),
    );
    // Seal hashes each step's ciphertext during the next step: the first step only encrypts,
    // and the last step's ciphertext is hashed after the loop.
    let n = bulk.len() / STEP;
    for i in 0..n {
        let (mut done, rest) = bulk.reborrow().split_at(i * STEP);
        let cur = rest.split_at(STEP).0;
        if SEAL && i == 0 {
            wide_step::<SEAL, NR, false>(keys, &mut base, yv, None, cur);
        } else if SEAL {
            let prev = &done.get_out()[(i - 1) * STEP..];
            yv = wide_step::<SEAL, NR, true>(keys, &mut base, yv, Some(prev), cur);
        } else {
            yv = wide_step::<SEAL, NR, true>(keys, &mut base, yv, None, cur);
        }
    }
    if SEAL && n > 0 {
        yv = wide_ghash_step(keys, yv, &bulk.get_out()[(n - 1) * STEP..]);
    }
    let c = ctr_add(ctr, bulk_len / 16);
    *y = cast(crypt_tail::<SEAL, NR>(keys, c, yv, tail));
}
