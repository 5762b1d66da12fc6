//! Helpers of every kernel width, compiled for the narrow features (a subset of every wider
//! set) so that they inline into each: loads and stores, key expansion and set-up, one-block
//! AES, the GHASH reduction, the tails (the blocks after the bulk steps) and the short messages
//! of the 256- and 128-bit kernels.

use core::arch::x86_64::*;

use bytemuck::cast;
use inout::InOutBuf;
use zeroize::Zeroize;

use super::{Keys, NQ, Pre};

/// POLYVAL's reduction constant: `x^127 + x^126 + x^121` shifted into the top of a 64-bit word.
pub(super) const POLY_C: i64 = 0xC200_0000_0000_0000_u64 as i64;

#[inline(always)]
pub(super) fn load16(b: &[u8]) -> __m128i {
    bytemuck::pod_read_unaligned(&b[..16])
}

#[inline(always)]
pub(super) fn store16(b: &mut [u8], v: __m128i) {
    b[..16].copy_from_slice(bytemuck::bytes_of(&v));
}

#[inline(always)]
pub(super) fn load32(b: &[u8]) -> __m256i {
    bytemuck::pod_read_unaligned(&b[..32])
}

#[inline(always)]
pub(super) fn store32(b: &mut [u8], v: __m256i) {
    b[..32].copy_from_slice(bytemuck::bytes_of(&v));
}

/// The byte-reflection mask: byte `i` takes byte `15 − i`.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn rev128() -> __m128i {
    _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
}

/// `mulX(v)` modulo POLYVAL's polynomial, constant time, on the 128-bit integer in `v`: shifted
/// left by one (each half, and the low half's top bit into the high half), and the polynomial's
/// constant XORed in where bit 127 was set (an all-ones mask from that bit, no branch).
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn mulx(v: __m128i) -> __m128i {
    let shifted = _mm_or_si128(
        _mm_slli_epi64::<1>(v),
        _mm_slli_si128::<8>(_mm_srli_epi64::<63>(v)),
    );
    let top = _mm_srai_epi32::<31>(_mm_shuffle_epi32::<0xFF>(v));
    _mm_xor_si128(shifted, _mm_and_si128(top, _mm_set_epi64x(POLY_C, 1)))
}

/// `SubWord` of one AES key-schedule word (bytes in memory order, read little-endian).
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn sub_word(w: u32) -> u32 {
    // aeskeygenassist's dword 0 is SubWord of the input's dword 1.
    let v = _mm_set_epi32(0, 0, w as i32, 0);
    _mm_cvtsi128_si32(_mm_aeskeygenassist_si128::<0>(v)) as u32
}

/// FIPS 197 key expansion for any of the three key sizes (`key.len()` is 16, 24 or 32),
/// written straight into `rk`; returns the number of rounds.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn expand(key: &[u8], rk: &mut [u128; 15]) -> usize {
    match key.len() {
        16 => expand128(key, rk),
        24 => expand_nk::<6>(key, rk),
        _ => expand256(key, rk),
    }
}

/// The round constants (public).
const RCON: [u32; 10] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36];

/// `v ^ (v << 32) ^ (v << 64) ^ (v << 96)`: each word XORed with all words before it, the
/// chain of `w[i] = w[i - 1] ^ ...` within one 128-bit round key.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn prefix_xor(v: __m128i) -> __m128i {
    let v = _mm_xor_si128(v, _mm_slli_si128::<4>(v));
    _mm_xor_si128(v, _mm_slli_si128::<8>(v))
}

/// `RotWord(word 3)` in every word: a `pshufb` mask.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn rot_word3() -> __m128i {
    _mm_set_epi8(
        12, 15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13,
    )
}

/// `SubWord(RotWord(word 3)) ^ rc` in every word: `aesenclast` on four equal columns (whose
/// ShiftRows moves nothing) with the round constant as its round key. Three or four cycles
/// where `aeskeygenassist` takes seven or more, on the key expansion's dependency chain.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn sub_rot3(k: __m128i, rc: u32) -> __m128i {
    _mm_aesenclast_si128(_mm_shuffle_epi8(k, rot_word3()), _mm_set1_epi32(rc as i32))
}

/// AES-128 key expansion, four words a round in one register.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn expand128(key: &[u8], rk: &mut [u128; 15]) -> usize {
    let mut k = load16(key);
    rk[0] = cast(k);
    for (r, rc) in RCON.iter().enumerate() {
        k = _mm_xor_si128(prefix_xor(k), sub_rot3(k, *rc));
        rk[r + 1] = cast(k);
    }
    10
}

/// AES-256 key expansion, two registers of four words.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn expand256(key: &[u8], rk: &mut [u128; 15]) -> usize {
    let mut a = load16(key);
    let mut b = load16(&key[16..]);
    rk[0] = cast(a);
    rk[1] = cast(b);
    for (r, rc) in RCON[..7].iter().enumerate() {
        a = _mm_xor_si128(prefix_xor(a), sub_rot3(b, *rc));
        rk[2 * r + 2] = cast(a);
        if r == 6 {
            break;
        }
        // SubWord(word 3), no rotation and no round constant, in every word
        let u = _mm_aesenclast_si128(_mm_shuffle_epi32::<0xFF>(a), _mm_setzero_si128());
        b = _mm_xor_si128(prefix_xor(b), u);
        rk[2 * r + 3] = cast(b);
    }
    14
}

/// Key expansion for `NK` 32-bit key words, `SubWord` by AES-NI. The schedule's words are
/// `rk`'s 32-bit words in order (little-endian).
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn expand_nk<const NK: usize>(key: &[u8], rk: &mut [u128; 15]) -> usize {
    let nr = NK + 6;
    let w: &mut [u32] = bytemuck::cast_slice_mut(&mut rk[..]);
    for (wi, c) in w.iter_mut().zip(key.chunks_exact(4)) {
        *wi = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    for i in NK..4 * (nr + 1) {
        let mut t = w[i - 1];
        if i % NK == 0 {
            // RotWord(SubWord(t)) with the bytes read little-endian is a rotation right by 8.
            t = sub_word(t).rotate_right(8) ^ RCON[i / NK - 1];
        } else if NK > 6 && i % NK == 4 {
            t = sub_word(t);
        }
        w[i] = w[i - NK] ^ t;
    }
    nr
}

/// Key set-up for the narrow and 256-bit kernels; the products of the power tree one at a time.
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn setup(key: &[u8], keys: &mut Keys) {
    let mut q1: u128 = cast(hash_key(key, keys));
    power_tree(keys, q1, |a, b| {
        core::array::from_fn(|l| cast(dot(cast(a[l]), cast(b))))
    });
    q1.zeroize();
}

/// Expand the key into `keys.rk` and return `Q_1 = H' = mulX(H)`, `H = E_K(0^128)` read
/// big-endian, in a register (as a `u128` cast). `H` never leaves the registers: written out
/// and read back as an integer, it sat on set-up's chain of latencies twice (a store, then
/// 8-byte loads of it, and the result moved back into a vector register).
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn hash_key(key: &[u8], keys: &mut Keys) -> __m128i {
    keys.nr = expand(key, &mut keys.rk);
    let h = aes_block(keys, _mm_setzero_si128());
    mulx(_mm_shuffle_epi8(h, rev128()))
}

/// The powers `Q_1..Q_m` from `Q_1`, `m` the key's level's [`super::Level::powers`] (a power of two,
/// at least 4), by doubling: `Q_2..Q_4` one product at a time, then `Q_(n+i) = Q_i · Q_n` for
/// `i = 1..n`, four products at a time by `mul4` (`mul4(a, b)[l] = a[l] · b`): log2(m) products
/// deep, the products of each level independent of each other. Then their Karatsuba halves.
/// The entries of higher powers stay zero: no kernel of the level reads them.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn power_tree(keys: &mut Keys, q1: u128, mul4: impl Fn(&[u128], u128) -> [u128; 4]) {
    let m = keys.level().powers();
    let (p, pk) = keys.tables_mut();
    let q1v: __m128i = cast(q1);
    let q2 = dot(q1v, q1v);
    // `Q_k` is `p[NQ - k]`
    p[NQ - 1] = q1;
    p[NQ - 2] = cast(q2);
    p[NQ - 3] = cast(dot(q2, q1v));
    p[NQ - 4] = cast(dot(q2, q2));
    // In the table (descending powers) the products of `p[j..j + 4]` by `Q_n` are
    // `p[j - n..j - n + 4]`.
    let mut n = 4;
    while n < m {
        let qn = p[NQ - n];
        for j in (NQ - n..NQ).step_by(4) {
            let r = mul4(&p[j..j + 4], qn);
            p[j - n..j - n + 4].copy_from_slice(&r);
        }
        n *= 2;
    }
    for (k, p) in pk[NQ - m..NQ].iter_mut().zip(&p[NQ - m..NQ]) {
        *k = cast(kara128(cast(*p)));
    }
}

/// Montgomery reduction of the 256-bit carry-less product `hi·x^128 + mid·x^64 + lo`:
/// returns that times `x^-128` modulo `x^128 + x^127 + x^126 + x^121 + 1`.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn reduce(lo: __m128i, mid: __m128i, hi: __m128i) -> __m128i {
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
pub(super) fn dot(a: __m128i, b: __m128i) -> __m128i {
    let lo = _mm_clmulepi64_si128::<0x00>(a, b);
    let hi = _mm_clmulepi64_si128::<0x11>(a, b);
    let mid = _mm_xor_si128(
        _mm_clmulepi64_si128::<0x01>(a, b),
        _mm_clmulepi64_si128::<0x10>(a, b),
    );
    reduce(lo, mid, hi)
}

/// A register's halves XORed together, in both halves (Karatsuba's middle operand).
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn kara128(x: __m128i) -> __m128i {
    _mm_xor_si128(x, _mm_shuffle_epi32::<0x4E>(x))
}

/// AES of one block with `NR` rounds.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn aes1<const NR: usize>(keys: &Keys, b: __m128i) -> __m128i {
    let mut s = _mm_xor_si128(b, cast(keys.rk[0]));
    for r in &keys.rk[1..NR] {
        s = _mm_aesenc_si128(s, cast(*r));
    }
    _mm_aesenclast_si128(s, cast(keys.rk[NR]))
}

/// J0 in a register, its bytes in memory order. From a 12-byte nonce it is built there (an
/// 8-byte and a 4-byte load and the constant word), never stored and read back as a whole: a
/// 16-byte load of bytes just written by narrower stores waits for them to reach the cache.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn j0_reg(pre: Pre<'_>) -> __m128i {
    match pre {
        Pre::J0(b) => cast(*b),
        Pre::Nonce(n) => {
            let lo = u64::from_le_bytes([n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]]);
            let hi = u32::from_le_bytes([n[8], n[9], n[10], n[11]]);
            _mm_set_epi64x((u64::from(hi) | 1 << 56) as i64, lo as i64)
        }
    }
}

/// The tag `S ^ E_K(J0)` in a register from the GHASH state `s` and the mask `E_K(J0)` (bytes
/// in memory order): `S` written big-endian is its byte reflection, one `pshufb`.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn tag_reg(s: u128, mask: __m128i) -> __m128i {
    _mm_xor_si128(_mm_shuffle_epi8(cast(s), rev128()), mask)
}

/// Whether `tag` is the first `tag.len()` bytes (1 to 16) of the tag `t` (bytes in memory
/// order), compared in registers: no branch and no address depends on either, only on the
/// received tag's public length. An empty tag, or one longer than 16 bytes, never matches.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn tag_matches(t: __m128i, tag: &[u8]) -> bool {
    let n = tag.len();
    let r = load_partial16(&tag[..n.min(16)]);
    // byte `i` kept where `i < n`
    let idx = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let keep = _mm_cmpgt_epi8(_mm_set1_epi8(n.min(16) as i8), idx);
    let d = _mm_and_si128(_mm_xor_si128(t, r), keep);
    let same = _mm_movemask_epi8(_mm_cmpeq_epi8(d, _mm_setzero_si128())) == 0xFFFF;
    same & (1..=16).contains(&n)
}

/// A slice of at most 16 bytes as a block, zero-padded (a whole block loaded as it is).
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn load_partial16(b: &[u8]) -> __m128i {
    match b.first_chunk::<16>() {
        Some(b) => load16(b),
        None => {
            let mut t = [0u8; 16];
            t[..b.len()].copy_from_slice(b);
            let v = load16(&t);
            t[..].zeroize();
            v
        }
    }
}

/// `$part` (an `InOutBuf` of at most as many blocks as the keystream array `$ks` holds, the
/// last may be partial) XORed with `$ks` into its output; the blocks to hash, its ciphertext as
/// in memory (the last zero-padded), written to the array `$x` (seal: the output, open: the
/// input). A macro, not a function: inside a `#[target_feature]` function a helper is inlined
/// only where the compiler chooses, and out of line its arrays go through memory (the tails of
/// the 256-bit kernels measurably slower so: benches/results.md).
macro_rules! xor_part {
    ($seal:expr, $ks:expr, $part:expr, $x:expr) => {{
        let part: &mut InOutBuf<'_, '_, u8> = $part;
        let (ks, x) = (&$ks, &mut $x);
        let len = part.len();
        let (g, full) = (len.div_ceil(16), len / 16);
        for i in 0..full {
            let d = load16(&part.get_in()[16 * i..]);
            let o = _mm_xor_si128(d, ks[i]);
            store16(&mut part.get_out()[16 * i..], o);
            x[i] = if $seal { o } else { d };
        }
        if full < g {
            let n = len - 16 * full;
            let mut t = [0u8; 16];
            t[..n].copy_from_slice(&part.get_in()[16 * full..]);
            let mut out: [u8; 16] = cast(_mm_xor_si128(load16(&t), ks[full]));
            part.get_out()[16 * full..].copy_from_slice(&out[..n]);
            if $seal {
                // the ciphertext zero-padded (past `n`, `out` holds keystream)
                out[n..].fill(0);
                x[full] = load16(&out);
            } else {
                x[full] = load16(&t);
            }
            // the plaintext and the keystream
            t[..].zeroize();
            out[..].zeroize();
        }
    }};
}

/// A short message, at most `C − 1` blocks with at most one block of AAD, on the 256- and
/// 128-bit kernels (as `super::zmm`'s one-block path does on 512-bit registers): its counter
/// blocks through AES beside J0 (`C` chains), then the AAD, the ciphertext and the length block
/// hashed as one sum of products by `Q_n..Q_1` with one reduction, where the general path would
/// encrypt J0 and hash each of them in turn. Returns the tag.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn short<const SEAL: bool, const NR: usize, const C: usize>(
    keys: &Keys,
    j0v: __m128i,
    aad: &[u8],
    data: InOutBuf<'_, '_, u8>,
) -> __m128i {
    let len = data.len();
    let rev = rev128();
    // J0, then J0 + 1, J0 + 2, ...
    let j = _mm_shuffle_epi8(j0v, rev);
    let mut b = [j0v; C];
    for (i, bi) in b.iter_mut().enumerate().skip(1) {
        *bi = _mm_shuffle_epi8(_mm_add_epi32(j, _mm_set_epi32(0, 0, 0, i as i32)), rev);
    }
    let ks = aes_group::<NR, C>(keys, b);
    let mask = ks[0];
    if aad.is_empty() && len == 0 {
        // the length block is zero, and so is its hash: the tag is E_K(J0)
        return mask;
    }
    // the message's keystream, and its ciphertext as in memory
    let mut kd = [_mm_setzero_si128(); C];
    kd[..C - 1].copy_from_slice(&ks[1..]);
    let mut xd = [_mm_setzero_si128(); C];
    let mut data = data;
    xor_part!(SEAL, kd, &mut data, xd);
    // the blocks to hash, as in memory: the AAD, the ciphertext, the length block
    let mut x = [_mm_setzero_si128(); SHORT_MAX + 2];
    let mut n = 0;
    if !aad.is_empty() {
        x[0] = load_partial16(aad);
        n = 1;
    }
    for xi in xd.iter().take(len.div_ceil(16)) {
        x[n] = *xi;
        n += 1;
    }
    x[n] = load16(&super::length_block(aad.len(), len));
    let y = absorb_group(keys, _mm_setzero_si128(), &x, n + 1);
    _mm_xor_si128(_mm_shuffle_epi8(y, rev), mask)
}

/// Most blocks of a message that [`short`] takes.
pub(super) const SHORT_MAX: usize = 4;

/// AES of `G` blocks (as in memory) side by side: `G` independent chains take about the
/// latency of one.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn aes_group<const NR: usize, const G: usize>(keys: &Keys, mut b: [__m128i; G]) -> [__m128i; G] {
    let k0: __m128i = cast(keys.rk[0]);
    for x in b.iter_mut() {
        *x = _mm_xor_si128(*x, k0);
    }
    for kr in &keys.rk[1..NR] {
        let kr: __m128i = cast(*kr);
        for x in b.iter_mut() {
            *x = _mm_aesenc_si128(*x, kr);
        }
    }
    let kl: __m128i = cast(keys.rk[NR]);
    for x in b.iter_mut() {
        *x = _mm_aesenclast_si128(*x, kl);
    }
    b
}

/// `ctr` advanced by `blocks` with inc32.
pub(super) fn ctr_add(ctr: u128, blocks: usize) -> u128 {
    // Truncation is the point: the GCM counter is the low 32 bits and wraps.
    let low = (ctr as u32).wrapping_add(blocks as u32);
    (ctr & !0xFFFF_FFFF) | u128::from(low)
}

#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn block_entry(keys: &Keys, b: &mut [u8; 16]) {
    *b = cast(aes_block(keys, cast(*b)));
}

/// The tag of a message with no AAD and no data, `E_K(J0)` (the length block is zero, and so is
/// its hash), written to `tag`: every kernel width's, in a function of its own whose frame is
/// a few registers (a whole-message entry saves six and sets up the stack its longer paths
/// need, for nothing here).
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn empty_entry(keys: &Keys, pre: Pre<'_>, tag: &mut [u8; 16]) {
    *tag = cast(aes_block(keys, j0_reg(pre)));
}

/// [`empty_entry`] for an open: whether `tag` matches `E_K(J0)`, compared in registers as
/// [`tag_matches`] compares.
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn empty_checked_entry(keys: &Keys, pre: Pre<'_>, tag: &[u8]) -> bool {
    tag_matches(aes_block(keys, j0_reg(pre)), tag)
}

/// AES of one block in a register with the key's rounds.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn aes_block(keys: &Keys, x: __m128i) -> __m128i {
    match keys.nr {
        10 => aes1::<10>(keys, x),
        12 => aes1::<12>(keys, x),
        _ => aes1::<14>(keys, x),
    }
}

/// Blocks in one group of a tail (the blocks after the bulk steps, or a short AAD): the group's
/// counter blocks are encrypted side by side (eight independent AES chains take about the
/// latency of one) and its blocks hashed as one sum of products by `Q_g..Q_1` with a single
/// reduction, where one block at a time would wait for each block's AES and reduction in turn.
pub(super) const TG: usize = 8;

/// GHASH of the first `g` (at most `N`, at most [`NQ`]) blocks of `x` (as in memory) into `y`:
/// `(y ^ x_0)·H^g ^ x_1·H^(g−1) ^ … ^ x_(g−1)·H`, with one reduction.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn absorb_group<const N: usize>(keys: &Keys, y: __m128i, x: &[__m128i; N], g: usize) -> __m128i {
    let (p, pk) = (keys.p(), keys.pk());
    let rev = rev128();
    let mut acc = [_mm_setzero_si128(); 3];
    for (i, xi) in x.iter().enumerate().take(g) {
        let mut v = _mm_shuffle_epi8(*xi, rev);
        if i == 0 {
            v = _mm_xor_si128(v, y);
        }
        // `Q_(g−i)` and its Karatsuba operand (see `Keys::p`)
        let q: __m128i = cast(p[NQ - g + i]);
        let k: __m128i = cast(pk[NQ - g + i]);
        acc[0] = _mm_xor_si128(acc[0], _mm_clmulepi64_si128::<0x00>(v, q));
        acc[1] = _mm_xor_si128(acc[1], _mm_clmulepi64_si128::<0x00>(kara128(v), k));
        acc[2] = _mm_xor_si128(acc[2], _mm_clmulepi64_si128::<0x11>(v, q));
    }
    let mid = _mm_xor_si128(acc[1], _mm_xor_si128(acc[0], acc[2]));
    reduce(acc[0], mid, acc[2])
}

/// GHASH of the bytes after the bulk steps (or of a short AAD) into `yv`, [`TG`] blocks at a
/// time, the last block zero-padded.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn ghash_tail(keys: &Keys, mut yv: __m128i, data: &[u8]) -> __m128i {
    if data.len() <= 16 {
        // one block (a short AAD, the length block): multiplied by `Q_1` in registers
        let v = _mm_xor_si128(_mm_shuffle_epi8(load_partial16(data), rev128()), yv);
        return if data.is_empty() {
            yv
        } else {
            let (q, k): (__m128i, __m128i) = (cast(keys.p()[NQ - 1]), cast(keys.pk()[NQ - 1]));
            let lo = _mm_clmulepi64_si128::<0x00>(v, q);
            let hi = _mm_clmulepi64_si128::<0x11>(v, q);
            let mid = _mm_clmulepi64_si128::<0x00>(kara128(v), k);
            reduce(lo, _mm_xor_si128(mid, _mm_xor_si128(lo, hi)), hi)
        };
    }
    for group in data.chunks(16 * TG) {
        let (g, full) = (group.len().div_ceil(16), group.len() / 16);
        let mut x = [_mm_setzero_si128(); TG];
        for (i, xi) in x.iter_mut().enumerate().take(full) {
            *xi = load16(&group[16 * i..]);
        }
        if full < g {
            let mut t = [0u8; 16];
            t[..group.len() - 16 * full].copy_from_slice(&group[16 * full..]);
            x[full] = load16(&t);
        }
        yv = absorb_group(keys, yv, &x, g);
    }
    yv
}

/// CTR and GHASH of the bytes after the bulk steps, from counter `c`, read from `tail`'s input
/// and written to its output, in groups of at most [`TG`] blocks ([`crypt_group`]); the last
/// block may be partial, its ciphertext hashed zero-padded.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn crypt_tail<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    mut c: u128,
    mut yv: __m128i,
    mut tail: InOutBuf<'_, '_, u8>,
) -> __m128i {
    while !tail.is_empty() {
        let len = tail.len().min(16 * TG);
        let (part, rest) = tail.split_at(len);
        tail = rest;
        // as many AES chains as the group needs, rounded up: a chain more costs a group of
        // two or four blocks about as much as one block more of AES
        yv = match len.div_ceil(16) {
            1..=2 => crypt_group::<SEAL, NR, 2>(keys, c, yv, part),
            3..=4 => crypt_group::<SEAL, NR, 4>(keys, c, yv, part),
            _ => crypt_group::<SEAL, NR, TG>(keys, c, yv, part),
        };
        c = ctr_add(c, len.div_ceil(16));
    }
    yv
}

/// One group of a tail (at most `G` blocks, `G <= TG`): the keystream of `G` counter blocks
/// from `c` computed side by side (those past the part are never used), the part's ciphertext
/// hashed by [`absorb_group`].
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn crypt_group<const SEAL: bool, const NR: usize, const G: usize>(
    keys: &Keys,
    c: u128,
    yv: __m128i,
    part: InOutBuf<'_, '_, u8>,
) -> __m128i {
    let rev = rev128();
    let base: __m128i = cast(c);
    let mut ctrs = [_mm_setzero_si128(); G];
    for (i, k) in ctrs.iter_mut().enumerate() {
        *k = _mm_shuffle_epi8(_mm_add_epi32(base, _mm_set_epi32(0, 0, 0, i as i32)), rev);
    }
    let ks = aes_group::<NR, G>(keys, ctrs);
    let g = part.len().div_ceil(16);
    // The hashed blocks: the ciphertext, as in memory.
    let mut x = [_mm_setzero_si128(); G];
    let mut part = part;
    xor_part!(SEAL, ks, &mut part, x);
    absorb_group(keys, yv, &x, g)
}
