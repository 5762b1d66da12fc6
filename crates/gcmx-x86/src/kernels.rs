//! The x86-64 kernels. Every function that uses SIMD intrinsics carries the same
//! `#[target_feature]` set; they are reached only through [`Keys`], which exists only after
//! [`detected`] said the CPU has those features.
//!
//! Register layouts:
//! - a 256-bit register holds two consecutive 16-byte blocks, the earlier one in the low lane;
//! - counters are kept byte-reflected (the whole 16-byte block reversed), so the 32-bit GCM
//!   counter is each lane's low dword and `vpaddd` is exactly inc32 (wraps mod 2^32, no carry
//!   into the other 96 bits); one `vpshufb` turns them back into counter blocks;
//! - GHASH values are POLYVAL-domain `u128`s (a GCM block read big-endian): a block becomes one
//!   by the same `vpshufb` byte reflection.

use core::arch::x86_64::*;

use bytemuck::cast;
use zeroize::Zeroize;

/// 256-bit registers per step of the bulk loops: 8 registers = 16 blocks = 256 bytes.
const W: usize = 8;
/// Bytes per step.
const STEP: usize = 32 * W;
/// Blocks per step; also how many powers of H the key keeps.
const NB: usize = 2 * W;

/// POLYVAL's reduction constant: `x^127 + x^126 + x^121` shifted into the top of a 64-bit word.
const POLY_C: i64 = 0xC200_0000_0000_0000_u64 as i64;

/// Whether the CPU has every feature the kernels use.
pub(crate) fn detected() -> bool {
    std::is_x86_feature_detected!("aes")
        && std::is_x86_feature_detected!("pclmulqdq")
        && std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("vaes")
        && std::is_x86_feature_detected!("vpclmulqdq")
}

/// Expanded key material. Built only by [`Keys::new`], after [`detected`].
#[derive(Clone)]
pub(crate) struct Keys {
    /// Round keys `0..=nr`, each the 16 round-key bytes read little-endian (so a cast to
    /// `__m128i` gives the bytes in memory order).
    rk: [u128; 15],
    /// Rounds: 10, 12 or 14.
    nr: usize,
    /// `q[i]` = `Q_(i+1)`, the Montgomery form of `h^(i+1)` (`Q_1 = H' = mulX(H)`).
    q: [u128; NB],
}

impl Drop for Keys {
    fn drop(&mut self) {
        self.rk.zeroize();
        self.q.zeroize();
    }
}

impl Keys {
    pub(crate) fn new(key: &[u8]) -> Option<Keys> {
        if !matches!(key.len(), 16 | 24 | 32) || !detected() {
            return None;
        }
        #[allow(unsafe_code)]
        // SAFETY: `detected()` just confirmed every feature `setup` is compiled for.
        let keys = unsafe { setup(key) };
        Some(keys)
    }

    pub(crate) fn key_len(&self) -> usize {
        (self.nr - 6) * 4
    }

    pub(crate) fn ghash(&self, y: &mut u128, data: &[u8]) {
        #[allow(unsafe_code)]
        // SAFETY: a `Keys` exists only after `detected()` confirmed the features (`Keys::new`).
        unsafe {
            ghash_entry(self, y, data)
        }
    }

    pub(crate) fn seal(&self, ctr: u128, y: &mut u128, buf: &mut [u8]) {
        #[allow(unsafe_code)]
        // SAFETY: a `Keys` exists only after `detected()` confirmed the features (`Keys::new`).
        unsafe {
            crypt_entry::<true>(self, ctr, y, buf)
        }
    }

    pub(crate) fn open(&self, ctr: u128, y: &mut u128, buf: &mut [u8]) {
        #[allow(unsafe_code)]
        // SAFETY: a `Keys` exists only after `detected()` confirmed the features (`Keys::new`).
        unsafe {
            crypt_entry::<false>(self, ctr, y, buf)
        }
    }

    pub(crate) fn encrypt_block(&self, b: &mut [u8; 16]) {
        #[allow(unsafe_code)]
        // SAFETY: a `Keys` exists only after `detected()` confirmed the features (`Keys::new`).
        unsafe {
            block_entry(self, b)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Small helpers.

#[inline(always)]
fn load16(b: &[u8]) -> __m128i {
    bytemuck::pod_read_unaligned(&b[..16])
}

#[inline(always)]
fn load32(b: &[u8]) -> __m256i {
    bytemuck::pod_read_unaligned(&b[..32])
}

#[inline(always)]
fn store32(b: &mut [u8], v: __m256i) {
    b[..32].copy_from_slice(bytemuck::bytes_of(&v));
}

/// The byte-reflection mask (byte `i` takes byte `15 − i`) in both lanes.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn rev_mask() -> __m256i {
    _mm256_broadcastsi128_si256(_mm_set_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    ))
}

/// `mulX(v)` modulo POLYVAL's polynomial, constant time.
fn mulx(v: u128) -> u128 {
    let top = v >> 127;
    (v << 1) ^ (top.wrapping_neg() & 0xC200_0000_0000_0000_0000_0000_0000_0001)
}

/// `SubWord` of one AES key-schedule word (bytes in memory order, read little-endian).
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn sub_word(w: u32) -> u32 {
    // aeskeygenassist's dword 0 is SubWord of the input's dword 1.
    let v = _mm_set_epi32(0, 0, w as i32, 0);
    _mm_cvtsi128_si32(_mm_aeskeygenassist_si128::<0>(v)) as u32
}

/// FIPS 197 key expansion for any of the three key sizes, `SubWord` by AES-NI.
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn expand(key: &[u8]) -> ([u128; 15], usize) {
    let nk = key.len() / 4;
    let nr = nk + 6;
    let mut w = [0u32; 60];
    for (i, c) in key.chunks_exact(4).enumerate() {
        w[i] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    let mut rcon = 1u32;
    for i in nk..4 * (nr + 1) {
        let mut t = w[i - 1];
        if i % nk == 0 {
            // RotWord(SubWord(t)) with the bytes read little-endian is a rotation right by 8.
            t = sub_word(t).rotate_right(8) ^ rcon;
            // xtime on the public round constant
            rcon = if rcon & 0x80 != 0 {
                ((rcon << 1) ^ 0x11b) & 0xff
            } else {
                rcon << 1
            };
        } else if nk > 6 && i % nk == 4 {
            t = sub_word(t);
        }
        w[i] = w[i - nk] ^ t;
    }
    let mut rk = [0u128; 15];
    for (r, k) in rk.iter_mut().enumerate().take(nr + 1) {
        *k = (0..4).fold(0u128, |acc, j| acc | (u128::from(w[4 * r + j]) << (32 * j)));
    }
    w.zeroize();
    (rk, nr)
}

#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn setup(key: &[u8]) -> Keys {
    let (rk, nr) = expand(key);
    let mut keys = Keys { rk, nr, q: [0; NB] };
    let mut h = [0u8; 16];
    block_entry(&keys, &mut h);
    let mut hp = mulx(u128::from_be_bytes(h));
    h.zeroize();
    let mut acc = hp;
    for q in keys.q.iter_mut() {
        *q = acc;
        acc = cast(dot(cast(acc), cast(hp)));
    }
    hp.zeroize();
    acc.zeroize();
    keys
}

// ---------------------------------------------------------------------------------------------
// GF(2^128), POLYVAL domain.

/// Montgomery reduction of the 256-bit carry-less product `hi·x^128 + mid·x^64 + lo`:
/// returns that times `x^-128` modulo `x^128 + x^127 + x^126 + x^121 + 1`.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn reduce(lo: __m128i, mid: __m128i, hi: __m128i) -> __m128i {
    let d_lo = _mm_xor_si128(lo, _mm_slli_si128::<8>(mid));
    let d_hi = _mm_xor_si128(hi, _mm_srli_si128::<8>(mid));
    let c = _mm_set_epi64x(0, POLY_C);
    // (d1 ^ lo(t), d0 ^ hi(t)) with t = d0·C; then the same once more.
    let t = _mm_clmulepi64_si128::<0x00>(d_lo, c);
    let a = _mm_xor_si128(_mm_shuffle_epi32::<0x4E>(d_lo), t);
    let u = _mm_clmulepi64_si128::<0x00>(a, c);
    let b = _mm_xor_si128(_mm_shuffle_epi32::<0x4E>(a), u);
    _mm_xor_si128(d_hi, b)
}

/// `dot(a, b) = a·b·x^-128`.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn dot(a: __m128i, b: __m128i) -> __m128i {
    let lo = _mm_clmulepi64_si128::<0x00>(a, b);
    let hi = _mm_clmulepi64_si128::<0x11>(a, b);
    let mid = _mm_xor_si128(
        _mm_clmulepi64_si128::<0x01>(a, b),
        _mm_clmulepi64_si128::<0x10>(a, b),
    );
    reduce(lo, mid, hi)
}

/// GHASH one block (16 bytes as in memory) into the state `y`: `dot(y ^ X, H')`.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn absorb1(y: __m128i, block: __m128i, q1: __m128i) -> __m128i {
    let x = _mm_shuffle_epi8(block, _mm256_castsi256_si128(rev_mask()));
    dot(_mm_xor_si128(y, x), q1)
}

/// The powers for one step, laid out like the data: register `j` holds blocks `2j` and `2j+1`
/// of the step's 16, which are multiplied by `Q_(16−2j)` and `Q_(15−2j)`. Beside them, for
/// Karatsuba, each power's two 64-bit halves XORed together (in both halves).
#[derive(Clone, Copy)]
struct StepPowers {
    p: [__m256i; W],
    k: [__m256i; W],
}

#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn step_powers(keys: &Keys) -> StepPowers {
    let mut sp = StepPowers {
        p: [_mm256_setzero_si256(); W],
        k: [_mm256_setzero_si256(); W],
    };
    for j in 0..W {
        let lo: __m128i = cast(keys.q[NB - 1 - 2 * j]);
        let hi: __m128i = cast(keys.q[NB - 2 - 2 * j]);
        let p = _mm256_set_m128i(hi, lo);
        sp.p[j] = p;
        sp.k[j] = _mm256_xor_si256(p, _mm256_shuffle_epi32::<0x4E>(p));
    }
    sp
}

/// Absorb one step of 16 blocks `d` (as in memory) into `y`: aggregated (three carry-less
/// products per block, Karatsuba), one reduction.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn ghash_step(sp: &StepPowers, y: __m128i, d: &[__m256i; W]) -> __m128i {
    let rev = rev_mask();
    let mut lo = _mm256_setzero_si256();
    let mut mid = _mm256_setzero_si256();
    let mut hi = _mm256_setzero_si256();
    for (j, dj) in d.iter().enumerate() {
        let mut x = _mm256_shuffle_epi8(*dj, rev);
        if j == 0 {
            x = _mm256_xor_si256(x, _mm256_set_m128i(_mm_setzero_si128(), y));
        }
        let xk = _mm256_xor_si256(x, _mm256_shuffle_epi32::<0x4E>(x));
        lo = _mm256_xor_si256(lo, _mm256_clmulepi64_epi128::<0x00>(x, sp.p[j]));
        hi = _mm256_xor_si256(hi, _mm256_clmulepi64_epi128::<0x11>(x, sp.p[j]));
        mid = _mm256_xor_si256(mid, _mm256_clmulepi64_epi128::<0x00>(xk, sp.k[j]));
    }
    let (lo, hi) = (fold(lo), fold(hi));
    let mid = _mm_xor_si128(fold(mid), _mm_xor_si128(lo, hi));
    reduce(lo, mid, hi)
}

/// XOR of a register's two lanes.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn fold(v: __m256i) -> __m128i {
    _mm_xor_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v))
}

// ---------------------------------------------------------------------------------------------
// AES.

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

/// One stitched step: AES (`NR` rounds) of the 16 counter blocks `ctrs` and, when `HASH`, the
/// GHASH of the 16 blocks `d` into `y`, one register's three carry-less products after each AES
/// round, so that the AES and the carry-less multiplier units work at the same time. Returns the
/// keystream and the new `y`.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn stitched_step<const NR: usize, const HASH: bool>(
    k: &[__m256i; 15],
    ctrs: [__m256i; W],
    sp: &StepPowers,
    y: __m128i,
    d: &[__m256i; W],
) -> ([__m256i; W], __m128i) {
    let rev = rev_mask();
    let mut s = ctrs;
    for x in s.iter_mut() {
        *x = _mm256_xor_si256(*x, k[0]);
    }
    let mut lo = _mm256_setzero_si256();
    let mut mid = _mm256_setzero_si256();
    let mut hi = _mm256_setzero_si256();
    for (j, kr) in k[1..NR].iter().enumerate() {
        for x in s.iter_mut() {
            *x = _mm256_aesenc_epi128(*x, *kr);
        }
        // after round j + 1: register j's products
        if HASH && j < W {
            let mut x = _mm256_shuffle_epi8(d[j], rev);
            if j == 0 {
                x = _mm256_xor_si256(x, _mm256_set_m128i(_mm_setzero_si128(), y));
            }
            let xk = _mm256_xor_si256(x, _mm256_shuffle_epi32::<0x4E>(x));
            lo = _mm256_xor_si256(lo, _mm256_clmulepi64_epi128::<0x00>(x, sp.p[j]));
            hi = _mm256_xor_si256(hi, _mm256_clmulepi64_epi128::<0x11>(x, sp.p[j]));
            mid = _mm256_xor_si256(mid, _mm256_clmulepi64_epi128::<0x00>(xk, sp.k[j]));
        }
    }
    let y = if HASH {
        let (lo, hi) = (fold(lo), fold(hi));
        let mid = _mm_xor_si128(fold(mid), _mm_xor_si128(lo, hi));
        reduce(lo, mid, hi)
    } else {
        y
    };
    for x in s.iter_mut() {
        *x = _mm256_aesenclast_epi128(*x, k[NR]);
    }
    (s, y)
}

/// AES of one block with `NR` rounds.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn aes1<const NR: usize>(keys: &Keys, b: __m128i) -> __m128i {
    let mut s = _mm_xor_si128(b, cast(keys.rk[0]));
    for r in &keys.rk[1..NR] {
        s = _mm_aesenc_si128(s, cast(*r));
    }
    _mm_aesenclast_si128(s, cast(keys.rk[NR]))
}

/// The next step's 16 counter blocks from the byte-reflected counters `base` (lanes hold
/// counters `c`, `c+1`); advances `base` by 16.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn counters(base: &mut __m256i, rev: __m256i) -> [__m256i; W] {
    let mut c = [_mm256_setzero_si256(); W];
    for (j, x) in c.iter_mut().enumerate() {
        let n = 2 * j as i32;
        *x = _mm256_shuffle_epi8(
            _mm256_add_epi32(*base, _mm256_set_epi32(0, 0, 0, n, 0, 0, 0, n)),
            rev,
        );
    }
    let n = NB as i32;
    *base = _mm256_add_epi32(*base, _mm256_set_epi32(0, 0, 0, n, 0, 0, 0, n));
    c
}

/// `ctr` advanced by `blocks` with inc32.
fn ctr_add(ctr: u128, blocks: usize) -> u128 {
    // Truncation is the point: the GCM counter is the low 32 bits and wraps.
    let low = (ctr as u32).wrapping_add(blocks as u32);
    (ctr & !0xFFFF_FFFF) | u128::from(low)
}

// ---------------------------------------------------------------------------------------------
// Entry points (each compiled for the three round counts).

#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn block_entry(keys: &Keys, b: &mut [u8; 16]) {
    let x: __m128i = cast(*b);
    let out = match keys.nr {
        10 => aes1::<10>(keys, x),
        12 => aes1::<12>(keys, x),
        _ => aes1::<14>(keys, x),
    };
    *b = cast(out);
}

#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn ghash_entry(keys: &Keys, y: &mut u128, data: &[u8]) {
    let p = step_powers(keys);
    let q1: __m128i = cast(keys.q[0]);
    let mut yv: __m128i = cast(*y);
    let mut steps = data.chunks_exact(STEP);
    for s in steps.by_ref() {
        let mut d = [_mm256_setzero_si256(); W];
        for (j, x) in d.iter_mut().enumerate() {
            *x = load32(&s[32 * j..]);
        }
        yv = ghash_step(&p, yv, &d);
    }
    for b in steps.remainder().chunks(16) {
        let mut t = [0u8; 16];
        t[..b.len()].copy_from_slice(b);
        yv = absorb1(yv, load16(&t), q1);
    }
    *y = cast(yv);
}

#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn crypt_entry<const SEAL: bool>(keys: &Keys, ctr: u128, y: &mut u128, buf: &mut [u8]) {
    match keys.nr {
        10 => crypt::<SEAL, 10>(keys, ctr, y, buf),
        12 => crypt::<SEAL, 12>(keys, ctr, y, buf),
        _ => crypt::<SEAL, 14>(keys, ctr, y, buf),
    }
}

/// The stitched loop. Seal: each step encrypts 16 blocks while hashing the previous step's
/// ciphertext (still in registers); open: each step hashes and decrypts the same 16 blocks.
/// Then the remaining blocks one by one, the last one possibly partial.
#[inline]
#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn crypt<const SEAL: bool, const NR: usize>(keys: &Keys, ctr: u128, y: &mut u128, buf: &mut [u8]) {
    let rev = rev_mask();
    let k = round_keys256(keys);
    let p = step_powers(keys);
    let mut yv: __m128i = cast(*y);
    let bulk_len = buf.len() / STEP * STEP;
    let (bulk, tail) = buf.split_at_mut(bulk_len);

    let mut base = _mm256_add_epi32(
        _mm256_broadcastsi128_si256(cast(ctr)),
        _mm256_set_epi32(0, 0, 0, 1, 0, 0, 0, 0),
    );
    let mut pending: Option<[__m256i; W]> = None;
    for s in bulk.chunks_exact_mut(STEP) {
        let mut d = [_mm256_setzero_si256(); W];
        for (j, x) in d.iter_mut().enumerate() {
            *x = load32(&s[32 * j..]);
        }
        let ctrs = counters(&mut base, rev);
        let ks = if SEAL {
            match &pending {
                Some(prev) => {
                    let (ks, y2) = stitched_step::<NR, true>(&k, ctrs, &p, yv, prev);
                    yv = y2;
                    ks
                }
                None => stitched_step::<NR, false>(&k, ctrs, &p, yv, &d).0,
            }
        } else {
            let (ks, y2) = stitched_step::<NR, true>(&k, ctrs, &p, yv, &d);
            yv = y2;
            ks
        };
        for (j, x) in d.iter_mut().enumerate() {
            *x = _mm256_xor_si256(*x, ks[j]);
            store32(&mut s[32 * j..], *x);
        }
        if SEAL {
            pending = Some(d);
        }
    }
    if let Some(prev) = &pending {
        yv = ghash_step(&p, yv, prev);
    }

    let q1: __m128i = cast(keys.q[0]);
    let mut c = ctr_add(ctr, bulk_len / 16);
    for b in tail.chunks_mut(16) {
        let n = b.len();
        let mut t = [0u8; 16];
        t[..n].copy_from_slice(b);
        if !SEAL {
            yv = absorb1(yv, load16(&t), q1);
        }
        let ks = aes1::<NR>(keys, cast(c.to_be_bytes()));
        let out: [u8; 16] = cast(_mm_xor_si128(load16(&t), ks));
        b.copy_from_slice(&out[..n]);
        if SEAL {
            let mut z = [0u8; 16];
            z[..n].copy_from_slice(&out[..n]);
            yv = absorb1(yv, load16(&z), q1);
        }
        c = ctr_add(c, 1);
    }
    *y = cast(yv);
}
