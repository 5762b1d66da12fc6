//! The 512-bit kernels: VAES + VPCLMULQDQ on AVX-512 registers of four blocks, 8 registers
//! (32 blocks, 512 bytes) a step.
//!
//! Each step runs the AES rounds of 32 counter blocks and, after each of the first eight rounds,
//! the three Karatsuba carry-less products of one register of the blocks being hashed, so the AES
//! and carry-less units work at the same time; one reduction per step. Sealing hashes the
//! previous step's ciphertext (still in registers) while encrypting the next; opening hashes and
//! decrypts the same step. What is left after the whole steps (fewer than 32 blocks, the last
//! one possibly partial) runs register by register with masked loads and stores and is hashed
//! with the powers `Q_n..Q_1` for its own block count `n`, again with one reduction: a 64-byte
//! message is one register of AES and one reduction.
//!
//! The key's [`Tables`] hold what the loops read, already in register layout: round keys in all
//! four lanes (`vaesenc` takes them straight from memory) and the powers `Q_32..Q_1` in block
//! order with their Karatsuba halves, so a call sets up nothing.

use core::arch::x86_64::*;

use bytemuck::cast;
use zeroize::Zeroize;

use super::Keys;
use super::common::{aes1, reduce, rev128};

/// 512-bit registers per step.
const R: usize = 8;
/// Blocks per step, and powers of H the tables hold.
pub(super) const NB: usize = 4 * R;
/// Bytes per step.
const STEP: usize = 64 * R;

/// The 512-bit kernels' view of a key, in register layout.
#[derive(Clone)]
#[repr(C, align(64))]
pub(super) struct Tables {
    /// Round key `r` in all four lanes.
    rk: [[u128; 4]; 15],
    /// `p[i]` = `Q_(NB − i)`: block `i` of a whole step is multiplied by `p[i]`, and block `i`
    /// of a run of `n < NB` blocks by `p[NB − n + i]`. The four entries after the powers are
    /// zero: the lanes past the end of a run.
    p: [u128; NB + 4],
    /// `k[i]`: the two 64-bit halves of `p[i]` XORed, in both halves (Karatsuba's middle
    /// operand).
    k: [u128; NB + 4],
}

impl Tables {
    pub(super) fn zeroed() -> Tables {
        Tables {
            rk: [[0; 4]; 15],
            p: [0; NB + 4],
            k: [0; NB + 4],
        }
    }
}

impl Zeroize for Tables {
    fn zeroize(&mut self) {
        self.rk.zeroize();
        self.p.zeroize();
        self.k.zeroize();
    }
}

/// Lay out the tables from the expanded key and powers (`keys.rk`, `keys.q`).
pub(super) fn setup(keys: &mut Keys) {
    for (d, s) in keys.z.rk.iter_mut().zip(keys.rk.iter()) {
        *d = [*s; 4];
    }
    for i in 0..NB {
        let q = keys.q[NB - 1 - i];
        let m = (q >> 64) ^ (q & u128::from(u64::MAX));
        keys.z.p[i] = q;
        keys.z.k[i] = m | m << 64;
    }
}

/// Four consecutive entries of a table as one register.
#[inline(always)]
fn load4(t: &[u128], i: usize) -> __m512i {
    bytemuck::pod_read_unaligned(bytemuck::cast_slice(&t[i..i + 4]))
}

#[inline(always)]
fn load64(b: &[u8]) -> __m512i {
    bytemuck::pod_read_unaligned(&b[..64])
}

#[inline(always)]
fn store64(b: &mut [u8], v: __m512i) {
    b[..64].copy_from_slice(bytemuck::bytes_of(&v));
}

/// The mask of a register's first `n` bytes (`n <= 64`).
#[inline(always)]
fn byte_mask(n: usize) -> __mmask64 {
    u64::MAX.checked_shr(64 - n as u32).unwrap_or(0)
}

/// `b` (at most 64 bytes) in a register's low bytes, the rest zero.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn load_partial(b: &[u8]) -> __m512i {
    let n = b.len().min(64);
    #[allow(unsafe_code)]
    // SAFETY: the mask selects bytes `0..n` of `b`, all in bounds; a masked load does not
    // access (or fault on) the bytes the mask leaves out.
    unsafe {
        _mm512_maskz_loadu_epi8(byte_mask(n), b.as_ptr().cast())
    }
}

/// Store the low `b.len()` (at most 64) bytes of `v` into `b`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn store_partial(b: &mut [u8], v: __m512i) {
    let n = b.len().min(64);
    #[allow(unsafe_code)]
    // SAFETY: the mask selects bytes `0..n` of `b`, all in bounds and borrowed mutably; a
    // masked store writes nothing else.
    unsafe {
        _mm512_mask_storeu_epi8(b.as_mut_ptr().cast(), byte_mask(n), v)
    }
}

/// The byte-reflection mask in all four lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn rev512() -> __m512i {
    _mm512_broadcast_i32x4(rev128())
}

/// `n` added to each lane's 32-bit counter.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn inc(v: __m512i, n: usize) -> __m512i {
    // Truncation is the point: the counter is 32 bits and wraps (inc32).
    _mm512_add_epi32(v, _mm512_broadcast_i32x4(_mm_set_epi32(0, 0, 0, n as i32)))
}

/// The byte-reflected counter blocks `ctr`, `ctr + 1`, `ctr + 2`, `ctr + 3` in the four lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn first_counters(ctr: u128) -> __m512i {
    let b = _mm512_broadcast_i32x4(cast(ctr));
    _mm512_add_epi32(
        b,
        _mm512_set_epi32(0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0),
    )
}

/// The next step's counter blocks from the byte-reflected counters `base`; advances `base`.
/// Every block is reflected from its own 32-bit sum: no instruction depends on the counter's
/// value (secret for nonces that are not 12 bytes long).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn counters(base: &mut __m512i) -> [__m512i; R] {
    let rev = rev512();
    let c = core::array::from_fn(|j| _mm512_shuffle_epi8(inc(*base, 4 * j), rev));
    *base = inc(*base, NB);
    c
}

/// Round key `r` in all four lanes.
#[inline(always)]
fn round_key(keys: &Keys, r: usize) -> __m512i {
    bytemuck::pod_read_unaligned(bytemuck::bytes_of(&keys.z.rk[r]))
}

/// The GHASH products of register `j` of a run whose block 0 takes power `p[off]`: `d` as in
/// memory; `y` joins block 0.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn products(keys: &Keys, off: usize, j: usize, d: __m512i, y: __m128i, acc: &mut [__m512i; 3]) {
    let mut x = _mm512_shuffle_epi8(d, rev512());
    if j == 0 {
        x = _mm512_xor_si512(x, _mm512_zextsi128_si512(y));
    }
    let xk = _mm512_xor_si512(x, _mm512_shuffle_epi32::<0x4E>(x));
    let p = load4(&keys.z.p, off + 4 * j);
    let k = load4(&keys.z.k, off + 4 * j);
    acc[0] = _mm512_xor_si512(acc[0], _mm512_clmulepi64_epi128::<0x00>(x, p));
    acc[1] = _mm512_xor_si512(acc[1], _mm512_clmulepi64_epi128::<0x00>(xk, k));
    acc[2] = _mm512_xor_si512(acc[2], _mm512_clmulepi64_epi128::<0x11>(x, p));
}

/// XOR of a register's four lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn fold(v: __m512i) -> __m128i {
    let s = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
    _mm_xor_si128(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s))
}

/// The new GHASH state from accumulated products: one reduction.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn reduce_acc(acc: &[__m512i; 3]) -> __m128i {
    let (lo, hi) = (fold(acc[0]), fold(acc[2]));
    let mid = _mm_xor_si128(fold(acc[1]), _mm_xor_si128(lo, hi));
    reduce(lo, mid, hi)
}

/// One stitched step: AES (`NR` rounds) of the 32 counter blocks `ctrs` and, when `HASH`, the
/// GHASH of the 32 blocks `h` into `y`, one register's products after each of the first eight
/// rounds. The last round takes the data `d` XORed into its round key, so it returns `d` XOR
/// the keystream directly, and the new `y`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn step<const NR: usize, const HASH: bool>(
    keys: &Keys,
    ctrs: [__m512i; R],
    y: __m128i,
    h: &[__m512i; R],
    d: &[__m512i; R],
) -> ([__m512i; R], __m128i) {
    let k0 = round_key(keys, 0);
    let mut s = ctrs.map(|c| _mm512_xor_si512(c, k0));
    let mut acc = [_mm512_setzero_si512(); 3];
    for r in 1..NR {
        let kr = round_key(keys, r);
        for x in s.iter_mut() {
            *x = _mm512_aesenc_epi128(*x, kr);
        }
        if HASH && r - 1 < R {
            products(keys, 0, r - 1, h[r - 1], y, &mut acc);
        }
    }
    let y = if HASH { reduce_acc(&acc) } else { y };
    let kl = round_key(keys, NR);
    for (x, dj) in s.iter_mut().zip(d) {
        *x = _mm512_aesenclast_epi128(*x, _mm512_xor_si512(kl, *dj));
    }
    (s, y)
}

/// GHASH of one whole step of 32 blocks `d` (as in memory) into `y`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn hash_step(keys: &Keys, y: __m128i, d: &[__m512i; R]) -> __m128i {
    let mut acc = [_mm512_setzero_si512(); 3];
    for (j, dj) in d.iter().enumerate() {
        products(keys, 0, j, *dj, y, &mut acc);
    }
    reduce_acc(&acc)
}

/// GHASH of fewer than one step's bytes (zero-padded to whole blocks) into `y`: masked
/// register loads, the powers for that many blocks, one reduction.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn hash_short(keys: &Keys, y: __m128i, data: &[u8]) -> __m128i {
    if data.is_empty() {
        return y;
    }
    let off = NB - data.len().div_ceil(16);
    let mut acc = [_mm512_setzero_si512(); 3];
    for (j, c) in data.chunks(64).enumerate() {
        products(keys, off, j, load_partial(c), y, &mut acc);
    }
    reduce_acc(&acc)
}

/// GHASH of `data`, zero-padded to whole blocks, into `y`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn hash(keys: &Keys, mut y: __m128i, data: &[u8]) -> __m128i {
    let mut steps = data.chunks_exact(STEP);
    for s in steps.by_ref() {
        let d: [__m512i; R] = core::array::from_fn(|j| load64(&s[64 * j..]));
        y = hash_step(keys, y, &d);
    }
    hash_short(keys, y, steps.remainder())
}

/// GHASH update on the 512-bit kernels.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn ghash_entry(keys: &Keys, y: &mut u128, data: &[u8]) {
    *y = cast(hash(keys, cast(*y), data));
}

/// CTR and GHASH of fewer than one step's bytes from the byte-reflected counters `base` (lanes
/// `c..c+3`): one register at a time, the last one masked to the message's end; the ciphertext
/// hashed with the powers for its block count, one reduction.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn crypt_short<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    base: __m512i,
    y: __m128i,
    tail: &mut [u8],
) -> __m128i {
    if tail.is_empty() {
        return y;
    }
    let off = NB - tail.len().div_ceil(16);
    let rev = rev512();
    let mut acc = [_mm512_setzero_si512(); 3];
    for (j, c) in tail.chunks_mut(64).enumerate() {
        let mut s = _mm512_xor_si512(
            _mm512_shuffle_epi8(inc(base, 4 * j), rev),
            round_key(keys, 0),
        );
        for r in 1..NR {
            s = _mm512_aesenc_epi128(s, round_key(keys, r));
        }
        let d = load_partial(c);
        let out = _mm512_aesenclast_epi128(s, _mm512_xor_si512(round_key(keys, NR), d));
        // the ciphertext, zero past the message's end
        let ct = if SEAL {
            _mm512_maskz_mov_epi8(byte_mask(c.len()), out)
        } else {
            d
        };
        products(keys, off, j, ct, y, &mut acc);
        store_partial(c, out);
    }
    reduce_acc(&acc)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn crypt_entry<const SEAL: bool>(keys: &Keys, ctr: u128, y: &mut u128, buf: &mut [u8]) {
    match keys.nr {
        10 => *y = cast(crypt::<SEAL, 10>(keys, ctr, cast(*y), buf)),
        12 => *y = cast(crypt::<SEAL, 12>(keys, ctr, cast(*y), buf)),
        _ => *y = cast(crypt::<SEAL, 14>(keys, ctr, cast(*y), buf)),
    }
}

/// The stitched loop over `buf` from counter block `ctr`: whole steps, then the rest.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn crypt<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    ctr: u128,
    mut y: __m128i,
    buf: &mut [u8],
) -> __m128i {
    let bulk_len = buf.len() / STEP * STEP;
    let (bulk, tail) = buf.split_at_mut(bulk_len);
    let mut base = first_counters(ctr);
    let mut steps = bulk.chunks_exact_mut(STEP);
    // Seal hashes each step's ciphertext during the next step: the first step only encrypts,
    // and the last step's ciphertext is hashed after the loop.
    let mut pending = [_mm512_setzero_si512(); R];
    let mut have_pending = false;
    if SEAL && let Some(s) = steps.next() {
        let d: [__m512i; R] = core::array::from_fn(|j| load64(&s[64 * j..]));
        pending = step::<NR, false>(keys, counters(&mut base), y, &d, &d).0;
        for (j, x) in pending.iter().enumerate() {
            store64(&mut s[64 * j..], *x);
        }
        have_pending = true;
    }
    for s in steps {
        let d: [__m512i; R] = core::array::from_fn(|j| load64(&s[64 * j..]));
        let h = if SEAL { &pending } else { &d };
        let (out, y2) = step::<NR, true>(keys, counters(&mut base), y, h, &d);
        y = y2;
        for (j, x) in out.iter().enumerate() {
            store64(&mut s[64 * j..], *x);
        }
        if SEAL {
            pending = out;
        }
    }
    if have_pending {
        y = hash_step(keys, y, &pending);
    }
    crypt_short::<SEAL, NR>(keys, base, y, tail)
}

/// A whole message on the 512-bit kernels (see [`super::message`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn message_entry<const SEAL: bool>(
    keys: &Keys,
    j0: &[u8; 16],
    aad: &[u8],
    buf: &mut [u8],
) -> [u8; 16] {
    match keys.nr {
        10 => message::<SEAL, 10>(keys, j0, aad, buf),
        12 => message::<SEAL, 12>(keys, j0, aad, buf),
        _ => message::<SEAL, 14>(keys, j0, aad, buf),
    }
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn message<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    j0: &[u8; 16],
    aad: &[u8],
    buf: &mut [u8],
) -> [u8; 16] {
    super::message(
        j0,
        aad,
        buf,
        |b| *b = cast(aes1::<NR>(keys, cast(*b))),
        |y, d| *y = cast(hash(keys, cast(*y), d)),
        |c, y, b| *y = cast(crypt::<SEAL, NR>(keys, c, cast(*y), b)),
    )
}
