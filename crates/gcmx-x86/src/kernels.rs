//! The x86-64 kernels, in two widths:
//! - **wide** (AES-NI, PCLMULQDQ, AVX2, VAES, VPCLMULQDQ): 256-bit registers, 16 blocks a step;
//! - **narrow** (AES-NI, PCLMULQDQ, SSSE3): 128-bit registers, 8 blocks a step, for CPUs
//!   without VAES.
//!
//! Every function that uses SIMD intrinsics carries one of two `#[target_feature]` sets; the
//! narrow set is a subset of the wide one (AVX2 implies SSSE3), so the shared helpers (key
//! expansion, single blocks, the reduction, tails) are compiled for the narrow set and inlined
//! into both. They are reached only through [`Keys`], which records the width [`Level::detect`]
//! found the CPU able to run.
//!
//! Register layouts:
//! - a 256-bit register holds two consecutive 16-byte blocks, the earlier one in the low lane;
//! - counters are kept byte-reflected (the whole 16-byte block reversed), so the 32-bit GCM
//!   counter is each lane's low dword and `paddd` is exactly inc32 (wraps mod 2^32, no carry
//!   into the other 96 bits); one `pshufb` turns them back into counter blocks;
//! - GHASH values are POLYVAL-domain `u128`s (a GCM block read big-endian): a block becomes one
//!   by the same `pshufb` byte reflection. One step's blocks are multiplied by the powers
//!   `Q_n..Q_1` (Karatsuba, three carry-less products a block) and reduced once.

use core::arch::x86_64::*;

use bytemuck::cast;
use zeroize::Zeroize;

/// Wide kernels: 256-bit registers per step (8 registers = 16 blocks = 256 bytes).
const W: usize = 8;
/// Wide kernels: bytes per step.
const STEP: usize = 32 * W;
/// Narrow kernels: 128-bit registers (= blocks) per step.
const NW: usize = 8;
/// Narrow kernels: bytes per step.
const NSTEP: usize = 16 * NW;
/// Powers of H the key keeps: the wide step's block count.
const NB: usize = 2 * W;

/// POLYVAL's reduction constant: `x^127 + x^126 + x^121` shifted into the top of a 64-bit word.
const POLY_C: i64 = 0xC200_0000_0000_0000_u64 as i64;

/// Which kernels a key runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// AES-NI, PCLMULQDQ and SSSE3: 128-bit kernels.
    Narrow,
    /// Also AVX2, VAES and VPCLMULQDQ: 256-bit kernels.
    Wide,
}

impl Level {
    /// The widest kernels this CPU can run, if any.
    pub(crate) fn detect() -> Option<Level> {
        let narrow = std::is_x86_feature_detected!("aes")
            && std::is_x86_feature_detected!("pclmulqdq")
            && std::is_x86_feature_detected!("ssse3");
        let wide = narrow
            && std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("vaes")
            && std::is_x86_feature_detected!("vpclmulqdq");
        match (narrow, wide) {
            (_, true) => Some(Level::Wide),
            (true, false) => Some(Level::Narrow),
            _ => None,
        }
    }
}

/// Expanded key material. Built only by [`Keys::new`], for a level the CPU has.
#[derive(Clone)]
pub(crate) struct Keys {
    /// Round keys `0..=nr`, each the 16 round-key bytes read little-endian (so a cast to
    /// `__m128i` gives the bytes in memory order).
    rk: [u128; 15],
    /// Rounds: 10, 12 or 14.
    nr: usize,
    /// `q[i]` = `Q_(i+1)`, the Montgomery form of `h^(i+1)` (`Q_1 = H' = mulX(H)`).
    q: [u128; NB],
    /// The kernels to run; the CPU has this level's features (checked in [`Keys::new`]).
    level: Level,
}

impl Drop for Keys {
    fn drop(&mut self) {
        self.rk.zeroize();
        self.q.zeroize();
    }
}

impl Keys {
    /// Expand `key` for the widest kernels the CPU runs, or for at most `max`.
    pub(crate) fn new(key: &[u8], max: Level) -> Option<Box<Keys>> {
        if !matches!(key.len(), 16 | 24 | 32) {
            return None;
        }
        let level = match (Level::detect()?, max) {
            (Level::Wide, Level::Wide) => Level::Wide,
            _ => Level::Narrow,
        };
        // Built in place on the heap: moving the key moves a pointer and leaves no copies of
        // the round keys or powers behind.
        let mut keys = Box::new(Keys {
            rk: [0; 15],
            nr: 0,
            q: [0; NB],
            level,
        });
        #[allow(unsafe_code)]
        // SAFETY: `Level::detect()` just found AES-NI, PCLMULQDQ and SSSE3, `setup`'s features.
        unsafe {
            setup(key, &mut keys)
        };
        Some(keys)
    }

    pub(crate) fn key_len(&self) -> usize {
        (self.nr - 6) * 4
    }

    pub(crate) fn level(&self) -> Level {
        self.level
    }

    pub(crate) fn ghash(&self, y: &mut u128, data: &[u8]) {
        if data.len() < NSTEP {
            #[allow(unsafe_code)]
            // SAFETY: every `Keys` was built after `Level::detect()` found the narrow features.
            unsafe {
                ghash_short(self, y, data)
            };
            return;
        }
        match self.level {
            #[allow(unsafe_code)]
            // SAFETY: `self.level` is Wide only if `Level::detect()` found the wide features.
            Level::Wide => unsafe { ghash_wide(self, y, data) },
            #[allow(unsafe_code)]
            // SAFETY: every `Keys` was built after `Level::detect()` found the narrow features.
            Level::Narrow => unsafe { ghash_narrow(self, y, data) },
        }
    }

    pub(crate) fn seal(&self, ctr: u128, y: &mut u128, buf: &mut [u8]) {
        self.crypt::<true>(ctr, y, buf)
    }

    pub(crate) fn open(&self, ctr: u128, y: &mut u128, buf: &mut [u8]) {
        self.crypt::<false>(ctr, y, buf)
    }

    fn crypt<const SEAL: bool>(&self, ctr: u128, y: &mut u128, buf: &mut [u8]) {
        match self.level {
            #[allow(unsafe_code)]
            // SAFETY: `self.level` is Wide only if `Level::detect()` found the wide features.
            Level::Wide => unsafe { crypt_wide_entry::<SEAL>(self, ctr, y, buf) },
            #[allow(unsafe_code)]
            // SAFETY: every `Keys` was built after `Level::detect()` found the narrow features.
            Level::Narrow => unsafe { crypt_narrow_entry::<SEAL>(self, ctr, y, buf) },
        }
    }

    pub(crate) fn encrypt_block(&self, b: &mut [u8; 16]) {
        #[allow(unsafe_code)]
        // SAFETY: every `Keys` was built after `Level::detect()` found the narrow features.
        unsafe {
            block_entry(self, b)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shared helpers (narrow features; inlined into the wide kernels too).

#[inline(always)]
fn load16(b: &[u8]) -> __m128i {
    bytemuck::pod_read_unaligned(&b[..16])
}

#[inline(always)]
fn store16(b: &mut [u8], v: __m128i) {
    b[..16].copy_from_slice(bytemuck::bytes_of(&v));
}

#[inline(always)]
fn load32(b: &[u8]) -> __m256i {
    bytemuck::pod_read_unaligned(&b[..32])
}

#[inline(always)]
fn store32(b: &mut [u8], v: __m256i) {
    b[..32].copy_from_slice(bytemuck::bytes_of(&v));
}

/// The byte-reflection mask: byte `i` takes byte `15 − i`.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn rev128() -> __m128i {
    _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
}

/// `mulX(v)` modulo POLYVAL's polynomial, constant time.
fn mulx(v: u128) -> u128 {
    let top = v >> 127;
    (v << 1) ^ (top.wrapping_neg() & 0xC200_0000_0000_0000_0000_0000_0000_0001)
}

/// `SubWord` of one AES key-schedule word (bytes in memory order, read little-endian).
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn sub_word(w: u32) -> u32 {
    // aeskeygenassist's dword 0 is SubWord of the input's dword 1.
    let v = _mm_set_epi32(0, 0, w as i32, 0);
    _mm_cvtsi128_si32(_mm_aeskeygenassist_si128::<0>(v)) as u32
}

/// FIPS 197 key expansion for any of the three key sizes (`key.len()` is 16, 24 or 32),
/// `SubWord` by AES-NI.
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn expand(key: &[u8], rk: &mut [u128; 15]) -> usize {
    let nk = key.len() / 4;
    let nr = nk + 6;
    let mut w = [0u32; 60];
    for (wi, c) in w.iter_mut().zip(key.chunks_exact(4)) {
        *wi = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
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
    for (k, ws) in rk.iter_mut().zip(w.chunks_exact(4)).take(nr + 1) {
        *k = ws
            .iter()
            .enumerate()
            .fold(0u128, |acc, (j, &x)| acc | (u128::from(x) << (32 * j)));
    }
    w.zeroize();
    nr
}

#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn setup(key: &[u8], keys: &mut Keys) {
    keys.nr = expand(key, &mut keys.rk);
    let mut h = [0u8; 16];
    block_entry(keys, &mut h);
    let mut hp = mulx(u128::from_be_bytes(h));
    h.zeroize();
    let mut acc = hp;
    for q in keys.q.iter_mut() {
        *q = acc;
        acc = cast(dot(cast(acc), cast(hp)));
    }
    hp.zeroize();
    acc.zeroize();
}

/// Montgomery reduction of the 256-bit carry-less product `hi·x^128 + mid·x^64 + lo`:
/// returns that times `x^-128` modulo `x^128 + x^127 + x^126 + x^121 + 1`.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
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
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
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
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn absorb1(y: __m128i, block: __m128i, q1: __m128i) -> __m128i {
    let x = _mm_shuffle_epi8(block, rev128());
    dot(_mm_xor_si128(y, x), q1)
}

/// A register's halves XORed together, in both halves (Karatsuba's middle operand).
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn kara128(x: __m128i) -> __m128i {
    _mm_xor_si128(x, _mm_shuffle_epi32::<0x4E>(x))
}

/// AES of one block with `NR` rounds.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn aes1<const NR: usize>(keys: &Keys, b: __m128i) -> __m128i {
    let mut s = _mm_xor_si128(b, cast(keys.rk[0]));
    for r in &keys.rk[1..NR] {
        s = _mm_aesenc_si128(s, cast(*r));
    }
    _mm_aesenclast_si128(s, cast(keys.rk[NR]))
}

/// `ctr` advanced by `blocks` with inc32.
fn ctr_add(ctr: u128, blocks: usize) -> u128 {
    // Truncation is the point: the GCM counter is the low 32 bits and wraps.
    let low = (ctr as u32).wrapping_add(blocks as u32);
    (ctr & !0xFFFF_FFFF) | u128::from(low)
}

#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn block_entry(keys: &Keys, b: &mut [u8; 16]) {
    let x: __m128i = cast(*b);
    let out = match keys.nr {
        10 => aes1::<10>(keys, x),
        12 => aes1::<12>(keys, x),
        _ => aes1::<14>(keys, x),
    };
    *b = cast(out);
}

/// GHASH of the blocks after the bulk steps, one at a time, the last one zero-padded.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn ghash_tail(keys: &Keys, mut yv: __m128i, data: &[u8]) -> __m128i {
    let q1: __m128i = cast(keys.q[0]);
    for b in data.chunks(16) {
        let mut t = [0u8; 16];
        t[..b.len()].copy_from_slice(b);
        yv = absorb1(yv, load16(&t), q1);
    }
    yv
}

/// GHASH of fewer than one narrow step's blocks (AAD, the length block): no step set-up.
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn ghash_short(keys: &Keys, y: &mut u128, data: &[u8]) {
    *y = cast(ghash_tail(keys, cast(*y), data));
}

/// CTR and GHASH of the blocks after the bulk steps (fewer than one step), one at a time, from
/// counter `c`; the last block may be partial, its ciphertext hashed zero-padded.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn crypt_tail<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    mut c: u128,
    mut yv: __m128i,
    tail: &mut [u8],
) -> __m128i {
    let q1: __m128i = cast(keys.q[0]);
    for b in tail.chunks_mut(16) {
        let n = b.len();
        let mut t = [0u8; 16];
        t[..n].copy_from_slice(b);
        if !SEAL {
            yv = absorb1(yv, load16(&t), q1);
        }
        let ks = aes1::<NR>(keys, cast(c.to_be_bytes()));
        let mut out: [u8; 16] = cast(_mm_xor_si128(load16(&t), ks));
        b.copy_from_slice(&out[..n]);
        if SEAL {
            let mut z = [0u8; 16];
            z[..n].copy_from_slice(&out[..n]);
            yv = absorb1(yv, load16(&z), q1);
        }
        // the plaintext and, beyond `n`, the keystream
        t.zeroize();
        out.zeroize();
        c = ctr_add(c, 1);
    }
    yv
}

// ---------------------------------------------------------------------------------------------
// Wide kernels: VAES + VPCLMULQDQ on 256-bit registers.

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
        let lo: __m128i = cast(keys.q[NB - 1 - 2 * j]);
        let hi: __m128i = cast(keys.q[NB - 2 - 2 * j]);
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

#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn ghash_wide(keys: &Keys, y: &mut u128, data: &[u8]) {
    let sp = wide_powers(keys);
    let mut yv: __m128i = cast(*y);
    let mut steps = data.chunks_exact(STEP);
    for s in steps.by_ref() {
        yv = wide_ghash_step(&sp, yv, &load_step(s));
    }
    *y = cast(ghash_tail(keys, yv, steps.remainder()));
}

#[target_feature(enable = "avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn crypt_wide_entry<const SEAL: bool>(keys: &Keys, ctr: u128, y: &mut u128, buf: &mut [u8]) {
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

// ---------------------------------------------------------------------------------------------
// Narrow kernels: AES-NI + PCLMULQDQ on 128-bit registers.

/// The powers for one narrow step: block `j` of 8 is multiplied by `Q_(8−j)`; beside them the
/// Karatsuba operands.
struct NarrowPowers {
    p: [__m128i; NW],
    k: [__m128i; NW],
}

impl Drop for NarrowPowers {
    fn drop(&mut self) {
        self.p.zeroize();
        self.k.zeroize();
    }
}

#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn narrow_powers(keys: &Keys) -> NarrowPowers {
    let mut sp = NarrowPowers {
        p: [_mm_setzero_si128(); NW],
        k: [_mm_setzero_si128(); NW],
    };
    for j in 0..NW {
        let p: __m128i = cast(keys.q[NW - 1 - j]);
        sp.p[j] = p;
        sp.k[j] = kara128(p);
    }
    sp
}

/// The GHASH products of block `j` of a narrow step (`y` joins block 0), accumulated.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn narrow_products(sp: &NarrowPowers, j: usize, d: __m128i, y: __m128i, acc: &mut [__m128i; 3]) {
    let mut x = _mm_shuffle_epi8(d, rev128());
    if j == 0 {
        x = _mm_xor_si128(x, y);
    }
    acc[0] = _mm_xor_si128(acc[0], _mm_clmulepi64_si128::<0x00>(x, sp.p[j]));
    acc[1] = _mm_xor_si128(acc[1], _mm_clmulepi64_si128::<0x00>(kara128(x), sp.k[j]));
    acc[2] = _mm_xor_si128(acc[2], _mm_clmulepi64_si128::<0x11>(x, sp.p[j]));
}

/// The new GHASH state from a narrow step's accumulated products.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn narrow_reduce(acc: &[__m128i; 3]) -> __m128i {
    let mid = _mm_xor_si128(acc[1], _mm_xor_si128(acc[0], acc[2]));
    reduce(acc[0], mid, acc[2])
}

/// One stitched narrow step: AES of 8 counter blocks and, when `HASH`, GHASH of the 8 blocks
/// `d`, one block's products after each AES round.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn narrow_step<const NR: usize, const HASH: bool>(
    keys: &Keys,
    ctrs: [__m128i; NW],
    sp: &NarrowPowers,
    y: __m128i,
    d: &[__m128i; NW],
) -> ([__m128i; NW], __m128i) {
    let mut s = ctrs;
    let k0: __m128i = cast(keys.rk[0]);
    for x in s.iter_mut() {
        *x = _mm_xor_si128(*x, k0);
    }
    let mut acc = [_mm_setzero_si128(); 3];
    for (j, kr) in keys.rk[1..NR].iter().enumerate() {
        let kr: __m128i = cast(*kr);
        for x in s.iter_mut() {
            *x = _mm_aesenc_si128(*x, kr);
        }
        if HASH && j < NW {
            narrow_products(sp, j, d[j], y, &mut acc);
        }
    }
    let y = if HASH { narrow_reduce(&acc) } else { y };
    let kl: __m128i = cast(keys.rk[NR]);
    for x in s.iter_mut() {
        *x = _mm_aesenclast_si128(*x, kl);
    }
    (s, y)
}

/// Absorb one narrow step of 8 blocks `d` (as in memory) into `y`.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn narrow_ghash_step(sp: &NarrowPowers, y: __m128i, d: &[__m128i; NW]) -> __m128i {
    let mut acc = [_mm_setzero_si128(); 3];
    for (j, dj) in d.iter().enumerate() {
        narrow_products(sp, j, *dj, y, &mut acc);
    }
    narrow_reduce(&acc)
}

#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn ghash_narrow(keys: &Keys, y: &mut u128, data: &[u8]) {
    let sp = narrow_powers(keys);
    let mut yv: __m128i = cast(*y);
    let mut steps = data.chunks_exact(NSTEP);
    for s in steps.by_ref() {
        let mut d = [_mm_setzero_si128(); NW];
        for (j, x) in d.iter_mut().enumerate() {
            *x = load16(&s[16 * j..]);
        }
        yv = narrow_ghash_step(&sp, yv, &d);
    }
    *y = cast(ghash_tail(keys, yv, steps.remainder()));
}

#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn crypt_narrow_entry<const SEAL: bool>(keys: &Keys, ctr: u128, y: &mut u128, buf: &mut [u8]) {
    match keys.nr {
        10 => crypt_narrow::<SEAL, 10>(keys, ctr, y, buf),
        12 => crypt_narrow::<SEAL, 12>(keys, ctr, y, buf),
        _ => crypt_narrow::<SEAL, 14>(keys, ctr, y, buf),
    }
}

/// The stitched narrow loop, shaped like [`crypt_wide`] with 8-block steps.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn crypt_narrow<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    ctr: u128,
    y: &mut u128,
    buf: &mut [u8],
) {
    let sp = narrow_powers(keys);
    let rev = rev128();
    let mut yv: __m128i = cast(*y);
    let bulk_len = buf.len() / NSTEP * NSTEP;
    let (bulk, tail) = buf.split_at_mut(bulk_len);

    let mut base: __m128i = cast(ctr);
    let mut pending: Option<[__m128i; NW]> = None;
    for s in bulk.chunks_exact_mut(NSTEP) {
        let mut d = [_mm_setzero_si128(); NW];
        for (j, x) in d.iter_mut().enumerate() {
            *x = load16(&s[16 * j..]);
        }
        let mut ctrs = [_mm_setzero_si128(); NW];
        for (j, c) in ctrs.iter_mut().enumerate() {
            *c = _mm_shuffle_epi8(_mm_add_epi32(base, _mm_set_epi32(0, 0, 0, j as i32)), rev);
        }
        base = _mm_add_epi32(base, _mm_set_epi32(0, 0, 0, NW as i32));
        let ks = if SEAL {
            match &pending {
                Some(prev) => {
                    let (ks, y2) = narrow_step::<NR, true>(keys, ctrs, &sp, yv, prev);
                    yv = y2;
                    ks
                }
                None => narrow_step::<NR, false>(keys, ctrs, &sp, yv, &d).0,
            }
        } else {
            let (ks, y2) = narrow_step::<NR, true>(keys, ctrs, &sp, yv, &d);
            yv = y2;
            ks
        };
        for (j, x) in d.iter_mut().enumerate() {
            *x = _mm_xor_si128(*x, ks[j]);
            store16(&mut s[16 * j..], *x);
        }
        if SEAL {
            pending = Some(d);
        }
    }
    if let Some(prev) = &pending {
        yv = narrow_ghash_step(&sp, yv, prev);
    }
    let c = ctr_add(ctr, bulk_len / 16);
    *y = cast(crypt_tail::<SEAL, NR>(keys, c, yv, tail));
}
