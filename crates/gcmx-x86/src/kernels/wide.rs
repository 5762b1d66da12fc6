//! The wide kernels: VAES + VPCLMULQDQ on 256-bit registers, 16 blocks a step, for CPUs with
//! those but without AVX-512.

use core::arch::x86_64::*;

use bytemuck::cast;
use zeroize::Zeroize;

use super::Keys;
use super::common::{crypt_tail, ctr_add, ghash_tail, load32, reduce, rev128, store32};

/// 256-bit registers per step (8 registers = 16 blocks = 256 bytes).
const W: usize = 8;
/// Bytes per step.
const STEP: usize = 32 * W;
/// Blocks per step: the powers `Q_16..Q_1`.
const NB: usize = 2 * W;

/// The byte-reflection mask in both lanes.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn rev256() -> __m256i {
    _mm256_broadcastsi128_si256(rev128())
}

/// The powers for one wide step, laid out like the data: register `j` holds blocks `2j` and
/// `2j+1` of the step's 16, which are multiplied by `Q_(16−2j)` and `Q_(15−2j)`; beside them,
/// for Karatsuba, each power's two 64-bit halves XORed together.
struct WidePowers {
    p: [__m256i; W],
    k: [__m256i; W],
}

impl Drop for WidePowers {
    fn drop(&mut self) {
        self.p.zeroize();
        self.k.zeroize();
    }
}

#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn wide_powers(keys: &Keys) -> WidePowers {
    let mut sp = WidePowers {
        p: [_mm256_setzero_si256(); W],
        k: [_mm256_setzero_si256(); W],
    };
    for j in 0..W {
        let lo: __m128i = cast(keys.q(NB - 2 * j));
        let hi: __m128i = cast(keys.q(NB - 1 - 2 * j));
        let p = _mm256_set_m128i(hi, lo);
        sp.p[j] = p;
        sp.k[j] = _mm256_xor_si256(p, _mm256_shuffle_epi32::<0x4E>(p));
    }
    sp
}

/// XOR of a register's two lanes.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn fold(v: __m256i) -> __m128i {
    _mm_xor_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v))
}

/// The GHASH products of register `j` of a wide step (`y` joins block 0), accumulated.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn wide_products(sp: &WidePowers, j: usize, d: __m256i, y: __m128i, acc: &mut [__m256i; 3]) {
    let mut x = _mm256_shuffle_epi8(d, rev256());
    if j == 0 {
        x = _mm256_xor_si256(x, _mm256_set_m128i(_mm_setzero_si128(), y));
    }
    let xk = _mm256_xor_si256(x, _mm256_shuffle_epi32::<0x4E>(x));
    acc[0] = _mm256_xor_si256(acc[0], _mm256_clmulepi64_epi128::<0x00>(x, sp.p[j]));
    acc[1] = _mm256_xor_si256(acc[1], _mm256_clmulepi64_epi128::<0x00>(xk, sp.k[j]));
    acc[2] = _mm256_xor_si256(acc[2], _mm256_clmulepi64_epi128::<0x11>(x, sp.p[j]));
}

/// The new GHASH state from a wide step's accumulated products.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn wide_reduce(acc: &[__m256i; 3]) -> __m128i {
    let (lo, hi) = (fold(acc[0]), fold(acc[2]));
    let mid = _mm_xor_si128(fold(acc[1]), _mm_xor_si128(lo, hi));
    reduce(lo, mid, hi)
}

/// One wide step's 256 bytes as 8 registers.
#[inline(always)]
fn load_step(s: &[u8]) -> [__m256i; W] {
    core::array::from_fn(|j| load32(&s[32 * j..]))
}

/// Store 8 registers as one wide step's 256 bytes.
#[inline(always)]
fn store_step(s: &mut [u8], v: &[__m256i; W]) {
    for (j, x) in v.iter().enumerate() {
        store32(&mut s[32 * j..], *x);
    }
}

/// Round keys broadcast to both lanes.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn round_keys256(keys: &Keys) -> [__m256i; 15] {
    let mut k = [_mm256_setzero_si256(); 15];
    for (d, s) in k.iter_mut().zip(keys.rk.iter()) {
        *d = _mm256_broadcastsi128_si256(cast(*s));
    }
    k
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

/// One stitched wide step: AES (`NR` rounds) of the 16 counter blocks `ctrs` and, when `HASH`,
/// the GHASH of the 16 blocks `d` into `y`, one register's three carry-less products after each
/// AES round, so that the AES and the carry-less multiplier units work at the same time.
/// Returns the keystream and the new `y`.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn wide_step<const NR: usize, const HASH: bool>(
    k: &[__m256i; 15],
    ctrs: [__m256i; W],
    sp: &WidePowers,
    y: __m128i,
    h: &[__m256i; W],
    d: &[__m256i; W],
) -> ([__m256i; W], __m128i) {
    let mut s = ctrs;
    for x in s.iter_mut() {
        *x = _mm256_xor_si256(*x, k[0]);
    }
    let mut acc = [_mm256_setzero_si256(); 3];
    for (j, kr) in k[1..NR].iter().enumerate() {
        for x in s.iter_mut() {
            *x = _mm256_aesenc_epi128(*x, *kr);
        }
        // after round j + 1: register j's products
        if HASH && j < W {
            wide_products(sp, j, h[j], y, &mut acc);
        }
    }
    let y = if HASH { wide_reduce(&acc) } else { y };
    // the last round key XOR the data: the last round gives the output directly
    for (x, dj) in s.iter_mut().zip(d) {
        *x = _mm256_aesenclast_epi128(*x, _mm256_xor_si256(k[NR], *dj));
    }
    (s, y)
}

/// Absorb one wide step of 16 blocks `d` (as in memory) into `y`.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn wide_ghash_step(sp: &WidePowers, y: __m128i, d: &[__m256i; W]) -> __m128i {
    let mut acc = [_mm256_setzero_si256(); 3];
    for (j, dj) in d.iter().enumerate() {
        wide_products(sp, j, *dj, y, &mut acc);
    }
    wide_reduce(&acc)
}

/// GHASH update on the wide kernels (one block at a time below one step: AAD, length blocks).
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn ghash_entry(keys: &Keys, y: &mut u128, data: &[u8]) {
    if data.len() < STEP {
        *y = cast(ghash_tail(keys, cast(*y), data));
        return;
    }
    let sp = wide_powers(keys);
    let mut yv: __m128i = cast(*y);
    let mut steps = data.chunks_exact(STEP);
    for s in steps.by_ref() {
        yv = wide_ghash_step(&sp, yv, &load_step(s));
    }
    *y = cast(ghash_tail(keys, yv, steps.remainder()));
}

#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn crypt_entry<const SEAL: bool>(keys: &Keys, ctr: u128, y: &mut u128, buf: &mut [u8]) {
    match keys.nr {
        10 => crypt_wide::<SEAL, 10>(keys, ctr, y, buf),
        12 => crypt_wide::<SEAL, 12>(keys, ctr, y, buf),
        _ => crypt_wide::<SEAL, 14>(keys, ctr, y, buf),
    }
}

/// The stitched wide loop. Seal: each step encrypts 16 blocks while hashing the previous
/// step's ciphertext (still in registers); open: each step hashes and decrypts the same 16
/// blocks. Then the remaining blocks one by one, the last one possibly partial.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn crypt_wide<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    ctr: u128,
    y: &mut u128,
    buf: &mut [u8],
) {
    let mut k = round_keys256(keys);
    let sp = wide_powers(keys);
    let mut yv: __m128i = cast(*y);
    let bulk_len = buf.len() / STEP * STEP;
    let (bulk, tail) = buf.split_at_mut(bulk_len);

    let mut base = _mm256_add_epi32(
        _mm256_broadcastsi128_si256(cast(ctr)),
        _mm256_set_epi32(0, 0, 0, 1, 0, 0, 0, 0),
    );
    let mut steps = bulk.chunks_exact_mut(STEP);
    // Seal hashes each step's ciphertext during the next step: the first step only encrypts,
    // and the last step's ciphertext is hashed after the loop.
    let mut pending = [_mm256_setzero_si256(); W];
    let mut have_pending = false;
    if SEAL && let Some(s) = steps.next() {
        let d = load_step(s);
        let ctrs = wide_counters(&mut base);
        pending = wide_step::<NR, false>(&k, ctrs, &sp, yv, &d, &d).0;
        store_step(s, &pending);
        have_pending = true;
    }
    for s in steps {
        let d = load_step(s);
        let ctrs = wide_counters(&mut base);
        let h = if SEAL { &pending } else { &d };
        let (out, y2) = wide_step::<NR, true>(&k, ctrs, &sp, yv, h, &d);
        yv = y2;
        store_step(s, &out);
        if SEAL {
            pending = out;
        }
    }
    if have_pending {
        yv = wide_ghash_step(&sp, yv, &pending);
    }
    let c = ctr_add(ctr, bulk_len / 16);
    *y = cast(crypt_tail::<SEAL, NR>(keys, c, yv, tail));
    k.zeroize();
}
