//! The 512-bit kernels: VAES + VPCLMULQDQ on AVX-512 registers of four blocks, 8 registers
//! (32 blocks, 512 bytes) a step.
//!
//! Each step runs the AES rounds of 32 counter blocks and, after each of rounds 1, 3, 5 and 7, the
//! Karatsuba carry-less products (three a block) of two registers of the blocks being hashed, so
//! the AES and carry-less units work at the same time; one reduction per step. The instructions
//! besides AES and the carry-less products are kept few, as 512-bit code on some CPUs runs its
//! vector ALU work on the same two ports as the AES and carry-less units: the products of two
//! registers join the accumulators in three-way XORs (`vpternlogq`), the halves' sums of two
//! registers (Karatsuba's middle operands) come from one unpack pair and one XOR, and the reduction
//! runs on whole registers before their lanes are folded. Four schoolbook products a block would
//! need no halves' sums, but where carry-less products are the scarcer resource the fourth one
//! costs more than that spares (measured, see `benches/results.md`). Sealing hashes the previous
//! step's ciphertext (read back from the output) while encrypting the next (with AES-128, the last
//! step runs as two groups of 16 blocks, the first group's ciphertext hashed beside the second's
//! rounds: [`last_seal_step`]); opening hashes and decrypts the same step. The counter blocks of a
//! 12-byte nonce's message are public, and a step's 32 differ in the low bits of the last byte
//! alone but for two: seven of its registers are one XOR each from a broadcast first block
//! ([`Counters`]). What is left after the whole steps (fewer than 32 blocks, the last one possibly
//! partial) runs register by register with masked loads and stores and is hashed as one [`Run`]:
//! with the powers `Q_n..Q_1` for its own block count `n` and one reduction.
//!
//! A whole short message (AAD, message and length block together at most 32 blocks, [`short`])
//! is one run, its whole registers four or two at a time with their rounds interleaved, every
//! block multiplied by its final power (schoolbook, four products a register) and one reduction;
//! `E_K(J0)` is computed beside the data, in the spare lane of its last register where it has
//! one. A message of at most one block with at most one block of AAD ([`one_block`]) is one
//! 256-bit AES pass (its counter block and J0) and one hash register. At these lengths the time
//! of a message is the count of its instructions, and the buffer, J0 and the tag cross the calls
//! in registers: a load that spans several just-written stores waits for them to reach the cache.
//!
//! The key's powers are kept in block order with their Karatsuba halves (`Keys::p`,
//! `Keys::pk`), so a register of powers is one load and a call sets up nothing.

use core::arch::x86_64::*;

use bytemuck::cast;
use inout::InOutBuf;

use super::common::{POLY_C, aes1, dot, hash_key, j0_reg, rev128};
use super::{Keys, Pre};

/// 512-bit registers per step.
const R: usize = 8;
/// Blocks per step, and powers of H the tables hold.
pub(super) const NB: usize = 4 * R;
/// Bytes per step.
const STEP: usize = 64 * R;

/// Key set-up for the 512-bit kernels: the powers computed in registers, four to a register in
/// table order, and written once (with their Karatsuba halves) to the key. `Q_2`, `Q_4`, `Q_8`
/// and `Q_16` are squares in every lane (two carry-less products each: a square has no middle
/// term), so no step waits on a lane being broadcast; `[Q_4..Q_1]` is `[Q_2, Q_1]` times `Q_2`
/// beside `[Q_2, Q_1]` itself, and each register of powers is an earlier one times `Q_4`, `Q_8`
/// or `Q_16`: five products deep. The whole set-up is in VEX/EVEX encoding, which does not mix
/// legacy SSE code with the kernels' 512-bit registers.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn setup(key: &[u8], keys: &mut Keys) {
    const { assert!(NB == 32) };
    let q1 = hash_key(key, keys);
    let b1 = _mm512_broadcast_i32x4(q1);
    let b2 = square4(b1);
    // lanes (0 first) [Q2, Q1, Q2, Q1]; its low two lanes times Q2: `r0` = [Q4, Q3, Q2, Q1]
    let x = _mm512_mask_blend_epi64(0xCC, b2, b1);
    let r0 = _mm512_mask_blend_epi64(0x0F, x, dot4(x, b2));
    let b4 = square4(b2);
    let r1 = dot4(r0, b4); // [Q8..Q5]
    let b8 = square4(b4);
    let (r2, r3) = (dot4(r0, b8), dot4(r1, b8)); // [Q12..Q9], [Q16..Q13]
    let b16 = square4(b8);
    let regs = [
        dot4(r3, b16), // [Q32..Q29]
        dot4(r2, b16),
        dot4(r1, b16),
        dot4(r0, b16), // [Q20..Q17]
        r3,
        r2,
        r1,
        r0,
    ];
    let (p, pk) = keys.tables_mut();
    for (j, r) in regs.into_iter().enumerate() {
        let k = _mm512_xor_si512(r, _mm512_shuffle_epi32::<0x4E>(r));
        p[4 * j..4 * j + 4].copy_from_slice(&cast::<__m512i, [u128; 4]>(r));
        pk[4 * j..4 * j + 4].copy_from_slice(&cast::<__m512i, [u128; 4]>(k));
    }
    // `Q_1` stored again, alone: the next read of it (`H'` for the caller's hash key, as a key is
    // built) takes its 16 bytes from this store, where from the 64-byte store of its register it
    // waited for the store to reach the cache (`Gcm`'s key set-up 14-21 cycles faster on Emerald
    // Rapids, benches/results.md).
    p[NB - 1] = cast(q1);
}

/// `dot(a, a)` in each lane: the middle products of a square cancel.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn square4(a: __m512i) -> __m512i {
    let lo = _mm512_clmulepi64_epi128::<0x00>(a, a);
    let hi = _mm512_clmulepi64_epi128::<0x11>(a, a);
    reduce4(lo, _mm512_setzero_si512(), hi)
}

/// `dot` in each lane: `a·b·x^-128` modulo POLYVAL's polynomial (as `common::dot`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn dot4(a: __m512i, b: __m512i) -> __m512i {
    let lo = _mm512_clmulepi64_epi128::<0x00>(a, b);
    let hi = _mm512_clmulepi64_epi128::<0x11>(a, b);
    let mid = _mm512_xor_si512(
        _mm512_clmulepi64_epi128::<0x01>(a, b),
        _mm512_clmulepi64_epi128::<0x10>(a, b),
    );
    reduce4(lo, mid, hi)
}

/// Montgomery reduction in each lane of the 256-bit products `hi·x^128 + mid·x^64 + lo` (as
/// `common::reduce`). The middle product is not split into halves: each of the reduction's two
/// folding steps lands on the next word pair (low into middle, middle into high), so each is
/// one carry-less product, one swap of halves and one three-way XOR.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn reduce4(lo: __m512i, mid: __m512i, hi: __m512i) -> __m512i {
    let c = _mm512_broadcast_i32x4(_mm_set_epi64x(0, POLY_C));
    let t = _mm512_clmulepi64_epi128::<0x00>(lo, c);
    let mid = xor3(mid, _mm512_shuffle_epi32::<0x4E>(lo), t);
    let u = _mm512_clmulepi64_epi128::<0x00>(mid, c);
    xor3(hi, _mm512_shuffle_epi32::<0x4E>(mid), u)
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

/// `b` (at most 16 bytes) in a register's low bytes, the rest zero.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn load_partial16(b: &[u8]) -> __m128i {
    let n = b.len().min(16);
    #[allow(unsafe_code)]
    // SAFETY: the mask selects bytes `0..n` of `b`, all in bounds; a masked load does not
    // access (or fault on) the bytes the mask leaves out.
    unsafe {
        _mm_maskz_loadu_epi8(byte_mask(n) as __mmask16, b.as_ptr().cast())
    }
}

/// Whether `tag` is the first `tag.len()` bytes (1 to 16) of the tag `t`, as
/// `common::tag_matches` compares: one masked load and one masked compare.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn tag_matches(t: __m128i, tag: &[u8]) -> bool {
    let n = tag.len();
    let differ =
        _mm_mask_cmpneq_epi8_mask(byte_mask(n.min(16)) as __mmask16, t, load_partial16(tag));
    (differ == 0) & (1..=16).contains(&n)
}

/// `common::empty_checked_entry` with this width's comparison (one masked compare).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn empty_checked_entry(keys: &Keys, pre: Pre<'_>, tag: &[u8]) -> bool {
    tag_matches(super::common::aes_block(keys, j0_reg(pre)), tag)
}

/// Store the low `b.len()` (at most 16) bytes of `v` into `b`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn store_partial16(b: &mut [u8], v: __m128i) {
    let n = b.len().min(16);
    #[allow(unsafe_code)]
    // SAFETY: the mask selects bytes `0..n` of `b`, all in bounds and borrowed mutably; a
    // masked store writes nothing else.
    unsafe {
        _mm_mask_storeu_epi8(b.as_mut_ptr().cast(), byte_mask(n) as __mmask16, v)
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

/// The bulk loop's counter blocks, a step (32 blocks) at a time.
struct Counters {
    /// The byte-reflected counter blocks `c`, `c + 1`, `c + 2`, `c + 3` in the four lanes, `c`
    /// the next step's first.
    base: __m512i,
    /// Whether the counters are public and every step's first is 2 more than a multiple of 32
    /// (see [`Counters::next`]).
    two_mod_32: bool,
}

impl Counters {
    /// From counter block `ctr` (as a `u128`). `public`: whether the counters may steer the
    /// code, as a 12-byte nonce's may (each is 2 plus the block's index in the message); those
    /// of a J0 from GHASH are secret.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn new(ctr: u128, public: bool) -> Counters {
        Counters {
            base: first_counters(ctr),
            two_mod_32: public && ctr % NB as u128 == 2,
        }
    }

    /// The next step's counter blocks (as in memory, one register of four per entry), each
    /// XORed with the first round key `k0`.
    ///
    /// Where the counters are secret, every register is reflected from its own 32-bit sum: no
    /// instruction depends on their value. Where they are public and a step's first counter
    /// is 2 more than a multiple of 32 (a message's first block is counter 2, and a step is 32
    /// blocks), blocks 0..=29 of the step differ from block 0 only in the low 5 bits of their
    /// last byte (the counter is the block's last 4 bytes, big-endian), by the XOR of `2 + i`
    /// and 2: registers 0..=6 are block 0 with `k0` XORed in, broadcast, and XORed with a
    /// constant, one instruction each instead of an add, a byte shuffle and an XOR. Register 7
    /// (blocks 28..=31, the last two past those 5 bits) is summed as where they are secret.
    /// In Intel's 512-bit code XORs, adds and three-way XORs share the two ports that run the
    /// AES rounds and the carry-less products, so each one fewer is time off the step: AES-128
    /// messages of 4 KiB to 1 MiB 1-5 % faster on Emerald Rapids (benches/results.md).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn next(&mut self, k0: __m512i) -> [__m512i; R] {
        let rev = rev512();
        let summed =
            |j: usize| _mm512_xor_si512(_mm512_shuffle_epi8(inc(self.base, 4 * j), rev), k0);
        let c = if self.two_mod_32 {
            let first = _mm512_shuffle_epi8(self.base, rev);
            let b0 = _mm512_xor_si512(_mm512_shuffle_i64x2::<0>(first, first), k0);
            core::array::from_fn(|j| {
                if j == R - 1 {
                    return summed(j);
                }
                // lane `l`: `(2 + i) ^ 2` for block `i = 4 j + l`, in the block's last byte
                let d = |l: usize| (((2 + 4 * j + l) ^ 2) as i32) << 24;
                let lanes = [
                    [0, 0, 0, d(0)],
                    [0, 0, 0, d(1)],
                    [0, 0, 0, d(2)],
                    [0, 0, 0, d(3)],
                ];
                _mm512_xor_si512(b0, cast::<[[i32; 4]; 4], __m512i>(lanes))
            })
        } else {
            core::array::from_fn(summed)
        };
        self.base = inc(self.base, NB);
        c
    }
}

/// Round key `r` in all four lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn round_key(keys: &Keys, r: usize) -> __m512i {
    _mm512_broadcast_i32x4(cast(keys.rk[r]))
}

/// A register of blocks (as in memory) byte-reflected into POLYVAL order.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn reflect(d: __m512i) -> __m512i {
    _mm512_shuffle_epi8(d, rev512())
}

/// `a ^ b ^ c` in one instruction.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn xor3(a: __m512i, b: __m512i, c: __m512i) -> __m512i {
    _mm512_ternarylogic_epi64::<0x96>(a, b, c)
}

/// The three Karatsuba carry-less products of the reflected blocks `x`, lane `l` times the
/// power `p[idx + l]`: low halves, halves' sums (without the low and high products, which the
/// reduction adds), high halves.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn mul3(keys: &Keys, idx: usize, x: __m512i) -> [__m512i; 3] {
    let xk = _mm512_xor_si512(x, _mm512_shuffle_epi32::<0x4E>(x));
    let p = load4(keys.p(), idx);
    [
        _mm512_clmulepi64_epi128::<0x00>(x, p),
        _mm512_clmulepi64_epi128::<0x00>(xk, load4(keys.pk(), idx)),
        _mm512_clmulepi64_epi128::<0x11>(x, p),
    ]
}

/// The products of the reflected blocks `x` with the powers from `p[idx]`, accumulated into
/// `acc` (low, Karatsuba middle, high).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn products(keys: &Keys, idx: usize, x: __m512i, acc: &mut [__m512i; 3]) {
    let m = mul3(keys, idx, x);
    for (a, m) in acc.iter_mut().zip(m) {
        *a = _mm512_xor_si512(*a, m);
    }
}

/// The products of registers `j` and `j + 1` of a whole step (`d`, `e` as in memory; `y`
/// joins block 0), as `mul3` for each but with fewer instructions: both registers' halves'
/// sums from one unpack pair and one XOR, and each accumulator updated once by a three-way XOR.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn step_products(
    keys: &Keys,
    j: usize,
    d: __m512i,
    e: __m512i,
    y: __m128i,
    acc: &mut [__m512i; 3],
) {
    let mut x = reflect(d);
    if j == 0 {
        x = _mm512_xor_si512(x, _mm512_zextsi128_si512(y));
    }
    let xe = reflect(e);
    let (pa, pb) = (load4(keys.p(), 4 * j), load4(keys.p(), 4 * (j + 1)));
    // both registers' halves' sums in one: `x`'s in each lane's low half, `xe`'s in the high
    let u = _mm512_xor_si512(_mm512_unpacklo_epi64(x, xe), _mm512_unpackhi_epi64(x, xe));
    let ma = _mm512_clmulepi64_epi128::<0x00>(u, load4(keys.pk(), 4 * j));
    let mb = _mm512_clmulepi64_epi128::<0x01>(u, load4(keys.pk(), 4 * (j + 1)));
    acc[0] = xor3(
        acc[0],
        _mm512_clmulepi64_epi128::<0x00>(x, pa),
        _mm512_clmulepi64_epi128::<0x00>(xe, pb),
    );
    acc[1] = xor3(acc[1], ma, mb);
    acc[2] = xor3(
        acc[2],
        _mm512_clmulepi64_epi128::<0x11>(x, pa),
        _mm512_clmulepi64_epi128::<0x11>(xe, pb),
    );
}

/// XOR of a register's four lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn fold(v: __m512i) -> __m128i {
    let s = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
    _mm_xor_si128(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s))
}

/// The new GHASH state from accumulated products: Karatsuba's middle term completed, one
/// reduction lane by lane (it is linear, so the lanes' reductions add up to the reduction of
/// their sum), then the lanes folded.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn reduce_acc(acc: &[__m512i; 3]) -> __m128i {
    fold(reduce4(acc[0], xor3(acc[1], acc[0], acc[2]), acc[2]))
}

/// Defines a fence over the accumulators and a group of AES registers (see [`fence`]).
macro_rules! fence_fn {
    ($(#[$doc:meta])* $name:ident, $n:expr, [$($s:ident),+]) => {
        $(#[$doc])*
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
        fn $name(acc: &mut [__m512i; 3], s: &mut [__m512i; $n]) {
            let [a0, a1, a2] = acc;
            let [$($s),+] = s;
            #[allow(unsafe_code)]
            // SAFETY: the template is empty: nothing runs, no memory, stack or flag is touched,
            // and each operand keeps its value.
            unsafe {
                core::arch::asm!(
                    concat!("/* {a0} {a1} {a2}", $(" {", stringify!($s), "}",)+ " */"),
                    a0 = inout(zmm_reg) *a0,
                    a1 = inout(zmm_reg) *a1,
                    a2 = inout(zmm_reg) *a2,
                    $($s = inout(zmm_reg) *$s,)+
                    options(pure, nomem, nostack, preserves_flags),
                )
            }
        }
    };
}

fence_fn!(
    /// Keeps the products of two registers between two AES rounds. The compiler would otherwise
    /// move all of a step's GHASH work after its AES rounds, or run a few blocks' rounds alongside
    /// the products and the rest after them (each half alone is fine to it), and the two units
    /// would take turns instead of working at once. This claims to read and change the
    /// accumulators and every AES register, so the products before it and the round after it
    /// stay on their side; it emits no instruction.
    fence,
    R,
    [s0, s1, s2, s3, s4, s5, s6, s7]
);

fence_fn!(
    /// [`fence`] for a group of four AES registers.
    fence4,
    4,
    [s0, s1, s2, s3]
);

/// One stitched step over the 512 bytes of `cur`: AES (`NR` rounds) of the next 32 counter
/// blocks from `ctr`, XORed into `cur`'s input and written to its output; and, when `HASH`, the
/// GHASH of the 32 blocks `h` into `y` (`h` is `cur`'s input when `None`), two
/// registers' products after each of rounds 1, 3, 5 and 7. The rounds are written out one by
/// one (the loop over rounds is not unrolled otherwise), and the hashed blocks are loaded from
/// memory where they are used, which leaves registers for the AES state. Returns the new `y`.
/// `SEAL` only tells the seal and open instances apart, so that each has one caller and is
/// inlined into it.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn step<const SEAL: bool, const NR: usize, const HASH: bool>(
    keys: &Keys,
    ctr: &mut Counters,
    y: __m128i,
    h: Option<&[u8]>,
    mut cur: impl StepIo,
) -> __m128i {
    // The round keys stay in registers for the whole loop (the compiler keeps the powers of H
    // in a copy on the stack). Read from the key where they are used instead, every step issued
    // some thirty loads from the key's heap block behind the stores of the step before, and the
    // loop ran 8 to 13 % slower on Emerald Rapids (benches/results.md).
    let k0 = round_key(keys, 0);
    let mut s = ctr.next(k0);
    let mut acc = [_mm512_setzero_si512(); 3];
    // The powers are read from the key where they are used. Left to itself the compiler copies
    // them to the stack before the loop and reads them there: as fast for AES-256, 4 to 10 %
    // slower for AES-128 messages of 4 to 64 KiB on Emerald Rapids (benches/results.md), and
    // with the stack's place, which every caller's frame moves, rows of 4 KiB and more moved
    // by up to 8 % between builds whose loops were the same instructions.
    let pw = core::hint::black_box(keys);
    macro_rules! round {
        ($($r:literal)*) => {$(
            if $r < NR {
                let kr = round_key(keys, $r);
                for x in s.iter_mut() {
                    *x = _mm512_aesenc_epi128(*x, kr);
                }
                if HASH && $r % 2 == 1 && $r - 1 < R {
                    let src = h.unwrap_or(cur.input());
                    let j = $r - 1;
                    let (d, e) = (load64(&src[64 * j..]), load64(&src[64 * (j + 1)..]));
                    step_products(pw, j, d, e, y, &mut acc);
                    fence(&mut acc, &mut s);
                }
            }
        )*};
    }
    round!(1 2 3 4 5 6 7 8 9 10 11 12 13);
    let y = if HASH { reduce_acc(&acc) } else { y };
    // the last round key XOR the data: the last round gives the output directly
    let kl = round_key(keys, NR);
    for (j, x) in s.iter().enumerate() {
        let d = load64(&cur.input()[64 * j..]);
        cur.put(j, _mm512_aesenclast_epi128(*x, _mm512_xor_si512(kl, d)));
    }
    y
}

/// The last whole step of a seal, whose ciphertext no later step hashes: AES of its 32
/// counter blocks in two groups of four registers; the previous step's ciphertext `prev` (if
/// any) hashed beside the first group's rounds, the first group's ciphertext (from registers)
/// beside the second's, then the second group's. Returns the state after the step's ciphertext.
///
/// Run as one group, as [`step`] runs the others, all 32 blocks' ciphertext is ready only when
/// the last AES round ends, and hashing it (a step's carry-less products and a reduction) is
/// then all that is left: the carry-less unit works alone and the AES unit waits. Split, what
/// is left after the last round is the products of 16 blocks: AES-128 seals of 576 bytes 3-9 %
/// faster on Emerald Rapids, of 1 KiB 1-3 % (benches/results.md). Of the first group, the pair
/// of registers that takes the previous state (block 0) is multiplied after the other pair, when
/// the reduction that gives that state is done.
///
/// AES-128 only ([`steps`]): inlined beside the AES-192 and AES-256 loops, which keep more
/// round keys in registers, it left those loops more to keep on the stack, and AES-256 seals of
/// 4 KiB to 1 MiB ran 2-11 % slower (their 576-byte to 1.5 KiB seals 3-9 % faster); out of
/// line, the compiler built every `long` differently, its opens among them.
///
/// `prev` goes through [`hash_step`], ahead of the first group's rounds; the two are
/// independent and the processor runs them at once. With its products placed between the
/// rounds instead, as [`step`] places them (and `hash_step` one caller fewer), the compiler
/// stopped inlining [`hash`] into [`long`], and opens of 512 bytes to 4 KiB, whose code had not
/// changed, ran 2-26 % slower.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn last_seal_step<const NR: usize>(
    keys: &Keys,
    ctr: &mut Counters,
    y: __m128i,
    prev: Option<&[u8]>,
    mut cur: InOutBuf<'_, '_, u8>,
) -> __m128i {
    let k0 = round_key(keys, 0);
    let s = ctr.next(k0);
    let pw = core::hint::black_box(keys);
    let kl = round_key(keys, NR);
    let mut a = [s[0], s[1], s[2], s[3]];
    let mut b = [s[4], s[5], s[6], s[7]];
    // the previous step's ciphertext hashed beside the first group's rounds (independent work:
    // the processor runs the two units at once)
    let y = match prev {
        Some(p) => hash_step(pw, y, p),
        None => y,
    };
    macro_rules! rounds_a {
        ($($r:literal)*) => {$(
            if $r < NR {
                let kr = round_key(keys, $r);
                for x in a.iter_mut() {
                    *x = _mm512_aesenc_epi128(*x, kr);
                }
            }
        )*};
    }
    rounds_a!(1 2 3 4 5 6 7 8 9 10 11 12 13);
    let ca: [__m512i; 4] = core::array::from_fn(|j| {
        let d = load64(&cur.get_in()[64 * j..]);
        _mm512_aesenclast_epi128(a[j], _mm512_xor_si512(kl, d))
    });
    for (j, c) in ca.iter().enumerate() {
        cur.put(j, *c);
    }
    // the second group, and the first group's products after its rounds 3 and 7: registers 2
    // and 3 first, registers 0 and 1 (block 0 takes `y`) when the reduction above is done
    let mut acc = [_mm512_setzero_si512(); 3];
    macro_rules! rounds_b {
        ($($r:literal)*) => {$(
            if $r < NR {
                let kr = round_key(keys, $r);
                for x in b.iter_mut() {
                    *x = _mm512_aesenc_epi128(*x, kr);
                }
                if $r == 3 || $r == 7 {
                    let j = if $r == 3 { 2 } else { 0 };
                    step_products(pw, j, ca[j], ca[j + 1], y, &mut acc);
                    fence4(&mut acc, &mut b);
                }
            }
        )*};
    }
    rounds_b!(1 2 3 4 5 6 7 8 9 10 11 12 13);
    let cb: [__m512i; 4] = core::array::from_fn(|j| {
        let d = load64(&cur.get_in()[64 * (4 + j)..]);
        _mm512_aesenclast_epi128(b[j], _mm512_xor_si512(kl, d))
    });
    for (j, c) in cb.iter().enumerate() {
        cur.put(4 + j, *c);
    }
    step_products(pw, 4, cb[0], cb[1], y, &mut acc);
    step_products(pw, 6, cb[2], cb[3], y, &mut acc);
    reduce_acc(&acc)
}

/// What a [`step`] reads, and where its output registers go.
trait StepIo {
    /// The step's 512 input bytes.
    fn input(&self) -> &[u8];
    /// Output register `j` (bytes `64 j..64 j + 64` of the step's output).
    fn put(&mut self, j: usize, v: __m512i);
}

/// In place or into another buffer, ordinary stores.
impl StepIo for InOutBuf<'_, '_, u8> {
    #[inline(always)]
    fn input(&self) -> &[u8] {
        self.get_in()
    }

    #[inline(always)]
    fn put(&mut self, j: usize, v: __m512i) {
        store64(&mut self.get_out()[64 * j..], v)
    }
}

/// GHASH of one whole step of 32 blocks `d` (as in memory) into `y`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn hash_step(keys: &Keys, y: __m128i, d: &[u8]) -> __m128i {
    let mut acc = [_mm512_setzero_si512(); 3];
    for j in (0..R).step_by(2) {
        step_products(
            keys,
            j,
            load64(&d[64 * j..]),
            load64(&d[64 * (j + 1)..]),
            y,
            &mut acc,
        );
    }
    reduce_acc(&acc)
}

/// The GHASH of a run of at most 32 blocks, given register by register (each holding up to
/// four blocks, zero past the run's data), with the powers `Q_n..Q_1` for the run's block
/// count `n` fixed in advance; then one reduction.
struct Run {
    acc: [__m512i; 3],
    /// The power index of the next block.
    idx: usize,
    /// The state before the run, XORed into its first block (zero after that).
    y: __m128i,
}

impl Run {
    /// A run of `blocks` blocks (at most 32) continuing from state `y`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn new(y: __m128i, blocks: usize) -> Run {
        Run {
            acc: [_mm512_setzero_si512(); 3],
            idx: NB - blocks,
            y,
        }
    }

    /// The next `blocks` blocks (1 to 4) of the run, in `d` as in memory.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn add(&mut self, keys: &Keys, d: __m512i, blocks: usize) {
        let x = _mm512_xor_si512(reflect(d), _mm512_zextsi128_si512(self.y));
        self.y = _mm_setzero_si128();
        products(keys, self.idx, x, &mut self.acc);
        self.idx += blocks;
    }

    /// The next `blocks` blocks (1 to 4) of the run, already reflected, in `x`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn add_reflected(&mut self, keys: &Keys, x: __m512i, blocks: usize) {
        let x = _mm512_xor_si512(x, _mm512_zextsi128_si512(self.y));
        self.y = _mm_setzero_si128();
        products(keys, self.idx, x, &mut self.acc);
        self.idx += blocks;
    }

    /// Bytes (at most one step, zero-padded to whole blocks), in registers.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn add_bytes(&mut self, keys: &Keys, data: &[u8]) {
        for c in data.chunks(64) {
            self.add(keys, load_partial(c), c.len().div_ceil(16));
        }
    }

    /// The new GHASH state.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn finish(self) -> __m128i {
        reduce_acc(&self.acc)
    }
}

/// Blocks in `n` bytes.
fn blocks(n: usize) -> usize {
    n.div_ceil(16)
}

/// GHASH of `data`, zero-padded to whole blocks, into `y`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn hash(keys: &Keys, mut y: __m128i, data: &[u8]) -> __m128i {
    let mut steps = data.chunks_exact(STEP);
    for s in steps.by_ref() {
        y = hash_step(keys, y, s);
    }
    let rest = steps.remainder();
    if rest.is_empty() {
        return y;
    }
    let mut run = Run::new(y, blocks(rest.len()));
    run.add_bytes(keys, rest);
    run.finish()
}

/// GHASH update on the 512-bit kernels.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn ghash_entry(keys: &Keys, y: &mut u128, data: &[u8]) {
    *y = cast(hash(keys, cast(*y), data));
}

/// CTR and GHASH of fewer than one step's bytes from the byte-reflected counters `base` (lanes
/// `c..c+3`), from `tail`'s input to its output: one register at a time, the last one masked to
/// the message's end, the ciphertext added to `run`; then, if given, the length block. The run's
/// block count must include them.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn crypt_short<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    base: __m512i,
    mut run: Run,
    mut tail: InOutBuf<'_, '_, u8>,
    len_block: Option<__m128i>,
) -> __m128i {
    let rev = rev512();
    let mut j = 0;
    while !tail.is_empty() {
        let n = tail.len().min(64);
        let (mut c, rest) = tail.split_at(n);
        tail = rest;
        let mut s = _mm512_xor_si512(
            _mm512_shuffle_epi8(inc(base, 4 * j), rev),
            round_key(keys, 0),
        );
        for r in 1..NR {
            s = _mm512_aesenc_epi128(s, round_key(keys, r));
        }
        let d = load_partial(c.get_in());
        let out = _mm512_aesenclast_epi128(s, _mm512_xor_si512(round_key(keys, NR), d));
        // the ciphertext, zero past the message's end
        let ct = if SEAL {
            _mm512_maskz_mov_epi8(byte_mask(c.len()), out)
        } else {
            d
        };
        run.add(keys, ct, blocks(c.len()));
        store_partial(c.get_out(), out);
        j += 1;
    }
    if let Some(l) = len_block {
        run.add_reflected(keys, _mm512_zextsi128_si512(l), 1);
    }
    run.finish()
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) fn crypt_entry<const SEAL: bool>(
    keys: &Keys,
    ctr: u128,
    y: &mut u128,
    buf: InOutBuf<'_, '_, u8>,
) {
    match keys.nr {
        10 => *y = cast(crypt::<SEAL, 10>(keys, ctr, false, cast(*y), buf, None)),
        12 => *y = cast(crypt::<SEAL, 12>(keys, ctr, false, cast(*y), buf, None)),
        _ => *y = cast(crypt::<SEAL, 14>(keys, ctr, false, cast(*y), buf, None)),
    }
}

/// Steps ahead of the current one whose bytes the bulk loop asks the caches for.
const PREFETCH_AHEAD: usize = 2;

/// Ask the caches for the cache lines of step `i` of `bulk` (none past its end). On messages larger
/// than the caches the loop is bound by memory, and without these requests a step's loads wait on
/// DRAM whenever the hardware prefetchers lag (benches/results.md). The addresses depend on the
/// buffer and the step index only.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn prefetch_step(bulk: &[u8], i: usize) {
    if let Some(step) = bulk.get(i * STEP..(i + 1) * STEP) {
        for line in step.chunks(64) {
            _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast());
        }
    }
}

/// The whole steps of `bulk` from the counters `ctr`, GHASH into `y`. Seal hashes each step's
/// ciphertext during the next step (reading it back from the output): the first step only
/// encrypts, and with AES-128 the last one is [`last_seal_step`] (with the other key sizes the
/// caller hashes the last step's ciphertext). Open hashes each step's ciphertext before
/// decrypting it.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn steps<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    ctr: &mut Counters,
    mut y: __m128i,
    mut bulk: InOutBuf<'_, '_, u8>,
) -> __m128i {
    let n = bulk.len() / STEP;
    // an AES-128 seal's last step in two groups (see `last_seal_step` for why AES-128 only)
    let split = SEAL && NR == 10;
    let looped = if split { n.saturating_sub(1) } else { n };
    for i in 0..looped {
        prefetch_step(bulk.get_in(), i + PREFETCH_AHEAD);
        let (mut done, rest) = bulk.reborrow().split_at(i * STEP);
        let cur = rest.split_at(STEP).0;
        if SEAL && i == 0 {
            step::<SEAL, NR, false>(keys, ctr, y, None, cur);
        } else if SEAL {
            let prev = &done.get_out()[(i - 1) * STEP..];
            y = step::<SEAL, NR, true>(keys, ctr, y, Some(prev), cur);
        } else {
            y = step::<SEAL, NR, true>(keys, ctr, y, None, cur);
        }
    }
    if split && n > 0 {
        let (mut done, cur) = bulk.split_at((n - 1) * STEP);
        let prev = match n {
            1 => None,
            _ => Some(&done.get_out()[(n - 2) * STEP..]),
        };
        y = last_seal_step::<NR>(keys, ctr, y, prev, cur);
    }
    y
}

/// The stitched loop from `buf`'s input to its output from counter block `ctr` (`public`: see
/// [`Counters`]): whole steps, then the rest and, if given, the length block, hashed with one
/// reduction.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn crypt<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    ctr: u128,
    public: bool,
    mut y: __m128i,
    buf: InOutBuf<'_, '_, u8>,
    len_block: Option<__m128i>,
) -> __m128i {
    let bulk_len = buf.len() / STEP * STEP;
    let (mut bulk, tail) = buf.split_at(bulk_len);
    let mut ctr = Counters::new(ctr, public);
    let n = bulk.len() / STEP;
    y = steps::<SEAL, NR>(keys, &mut ctr, y, bulk.reborrow());
    let base = ctr.base;
    // what `steps` leaves of a seal but with AES-128: the last step's ciphertext
    if SEAL && NR != 10 && n > 0 {
        y = hash_step(keys, y, &bulk.get_out()[(n - 1) * STEP..]);
    }
    let t = blocks(tail.len());
    match len_block {
        // the rest and the length block in one run when they fit (a lone length block: below)
        Some(l) if t > 0 && t < NB => {
            crypt_short::<SEAL, NR>(keys, base, Run::new(y, t + 1), tail, Some(l))
        }
        _ => {
            if t > 0 {
                y = crypt_short::<SEAL, NR>(keys, base, Run::new(y, t), tail, None);
            }
            if let Some(l) = len_block {
                // one block: in 128-bit registers, with the shorter latency
                y = dot(_mm_xor_si128(y, l), cast(keys.q(1)));
            }
            y
        }
    }
}

/// The output of an open written past the caches (see `super::uncached`), straight from the
/// registers: each register's bytes go to the destination's cache lines, which a segment's body
/// rarely starts on, so every line is the end of one register and the start of the next, joined
/// with one byte permute (`vpermt2b`), and stored whole with a non-temporal store. The bytes
/// before the first line boundary and after the last take ordinary (masked) stores.
struct Lines<'a> {
    dst: &'a mut [u8],
    /// Bytes of `dst` before its first line boundary (`0..64`).
    head: usize,
    /// The permute: bytes `head..head + 64` of the previous register and the next, in a row.
    join: __m512i,
    /// The register put last.
    prev: __m512i,
    /// Registers put so far.
    n: usize,
}

impl<'a> Lines<'a> {
    /// Lines into `dst` (whole registers: 64 bytes each).
    #[inline]
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx2,aes,pclmulqdq,vaes,vpclmulqdq"
    )]
    fn new(dst: &'a mut [u8]) -> Lines<'a> {
        // From the address, public: which stores run depends on where the output is, never on
        // the data.
        let head = (64 - dst.as_ptr() as usize % 64) % 64;
        let join = _mm512_add_epi8(
            _mm512_set1_epi8(head as i8),
            bytemuck::cast(core::array::from_fn::<u8, 64, _>(|i| i as u8)),
        );
        Lines {
            dst,
            head,
            join,
            prev: _mm512_setzero_si512(),
            n: 0,
        }
    }

    /// The next register of the output.
    #[inline]
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx2,aes,pclmulqdq,vaes,vpclmulqdq"
    )]
    fn put(&mut self, v: __m512i) {
        if self.n == 0 {
            store_partial(&mut self.dst[..self.head], v);
        } else {
            let line = _mm512_permutex2var_epi8(self.prev, self.join, v);
            let at = self.head + 64 * (self.n - 1);
            let to = &mut self.dst[at..at + 64];
            #[allow(unsafe_code)]
            // SAFETY: `to` is 64 bytes of `dst`, borrowed mutably, and starts on a line
            // boundary (`head` bytes past `dst`'s start, then whole lines), as the instruction
            // requires; the caller has AVX-512F. The store is weakly ordered: the caller fences
            // before returning.
            unsafe {
                _mm512_stream_si512(to.as_mut_ptr().cast(), line)
            }
        }
        self.prev = v;
        self.n += 1;
    }

    /// Stores the bytes of the last register after the last whole line.
    #[inline]
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx2,aes,pclmulqdq,vaes,vpclmulqdq"
    )]
    fn finish(self) {
        if let Some(last) = self.n.checked_sub(1) {
            let to = &mut self.dst[64 * last..64 * last + 64];
            #[allow(unsafe_code)]
            // SAFETY: the mask selects bytes `head..64` of `to`, 64 bytes of `dst` borrowed
            // mutably; a masked store writes nothing else.
            unsafe {
                _mm512_mask_storeu_epi8(to.as_mut_ptr().cast(), !byte_mask(self.head), self.prev)
            }
        }
    }
}

/// A step's input, its output put into [`Lines`].
struct Uncached<'i, 'l, 'd> {
    input: &'i [u8],
    lines: &'l mut Lines<'d>,
}

impl StepIo for Uncached<'_, '_, '_> {
    #[inline(always)]
    fn input(&self) -> &[u8] {
        self.input
    }

    #[inline(always)]
    fn put(&mut self, _: usize, v: __m512i) {
        #[allow(unsafe_code)]
        // SAFETY: `Lines` exist only in `open_uncached`, which runs where the CPU has the
        // features `Lines::put` needs.
        unsafe {
            self.lines.put(v)
        }
    }
}

/// [`crypt`] opening `src` into `dst` (the common length), the whole steps' output written past
/// the caches from the registers ([`Lines`]), the rest with ordinary stores; no length block.
#[inline]
#[target_feature(
    enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx2,aes,pclmulqdq,vaes,vpclmulqdq"
)]
fn open_uncached<const NR: usize>(
    keys: &Keys,
    ctr: u128,
    mut y: __m128i,
    src: &[u8],
    dst: &mut [u8],
) -> __m128i {
    let n = src.len().min(dst.len());
    let bulk_len = n / STEP * STEP;
    let (bulk, tail) = src[..n].split_at(bulk_len);
    let (bulk_out, tail_out) = dst[..n].split_at_mut(bulk_len);
    let mut ctr = Counters::new(ctr, false);
    let mut lines = Lines::new(bulk_out);
    for (i, input) in bulk.chunks_exact(STEP).enumerate() {
        prefetch_step(bulk, i + PREFETCH_AHEAD);
        let io = Uncached {
            input,
            lines: &mut lines,
        };
        y = step::<false, NR, true>(keys, &mut ctr, y, None, io);
    }
    lines.finish();
    let t = blocks(tail.len());
    match InOutBuf::new(tail, tail_out) {
        Ok(io) if t > 0 => crypt_short::<false, NR>(keys, ctr.base, Run::new(y, t), io, None),
        _ => y,
    }
}

/// An open from `src` into `dst` on the 512-bit kernels, written past the caches (see
/// `super::uncached`): counter block `ctr`, GHASH state `y`.
#[target_feature(
    enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx2,aes,pclmulqdq,vaes,vpclmulqdq"
)]
pub(super) fn open_uncached_entry(
    keys: &Keys,
    ctr: u128,
    y: &mut u128,
    src: &[u8],
    dst: &mut [u8],
) {
    *y = cast(match keys.nr {
        10 => open_uncached::<10>(keys, ctr, cast(*y), src, dst),
        12 => open_uncached::<12>(keys, ctr, cast(*y), src, dst),
        _ => open_uncached::<14>(keys, ctr, cast(*y), src, dst),
    });
    // The non-temporal stores are weakly ordered: fenced before anything else reads `dst`.
    _mm_sfence();
}

/// A whole message on the 512-bit kernels (see [`super::Keys::message`]), its buffer given as the raw
/// parts of an [`InOutBuf`] (see [`super::Keys::message`] for why).
///
/// # Safety
///
/// The CPU has the 512-bit kernels' features, and `in_ptr`, `out_ptr` and `len` are the parts
/// of an `InOutBuf` of `u8` that the caller gave up for this call (`InOutBuf::into_raw`), so
/// that nothing else reaches its memory until the call returns. (They come first, each in a
/// register of its own.)
#[allow(unsafe_code)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) unsafe fn message_entry<const SEAL: bool>(
    in_ptr: *const u8,
    out_ptr: *mut u8,
    len: usize,
    keys: &Keys,
    aad: &[u8],
    pre: Pre<'_>,
    tag: &mut [u8; 16],
) {
    #[allow(unsafe_code)]
    // SAFETY: the parts of an `InOutBuf` given up by the caller (this function's contract):
    // valid for `len` bytes, in and out equal or apart, and not reached otherwise meanwhile.
    let buf = unsafe { InOutBuf::from_raw(in_ptr, out_ptr, len) };
    let t = by_rounds::<SEAL>(keys, pre, aad, buf);
    // one 16-byte store: a caller's 16-byte copy of the tag then reads it straight from the
    // store buffer (halves returned in general registers and stored apart could not be)
    *tag = cast(t);
}

/// [`message_entry`] opening, the expected tag compared with `tag` in registers (see
/// [`super::Keys::open_checked`]); whether it matches. `#[inline]` (a call all the same: its
/// caller lacks its target features) so that, like the generic `message_entry`, it is compiled
/// in the caller's crate, where [`long`] inlines the stitched loop: compiled here, beside
/// `crypt_entry`'s use of it, the loop stayed a call, its vectors passed through memory (an open
/// of 600 bytes 20-30 cycles slower).
///
/// # Safety
///
/// As [`message_entry`]'s.
#[allow(unsafe_code)]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
pub(super) unsafe fn open_checked_entry(
    in_ptr: *const u8,
    out_ptr: *mut u8,
    len: usize,
    keys: &Keys,
    aad: &[u8],
    pre: Pre<'_>,
    tag: &[u8],
) -> bool {
    #[allow(unsafe_code)]
    // SAFETY: as in `message_entry` (this function's contract is the same).
    let buf = unsafe { InOutBuf::from_raw(in_ptr, out_ptr, len) };
    let t = by_rounds::<false>(keys, pre, aad, buf);
    tag_matches(t, tag)
}

/// [`message`] for the key's number of rounds.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn by_rounds<const SEAL: bool>(
    keys: &Keys,
    pre: Pre<'_>,
    aad: &[u8],
    buf: InOutBuf<'_, '_, u8>,
) -> __m128i {
    match keys.nr {
        10 => message::<SEAL, 10>(keys, pre, aad, buf),
        12 => message::<SEAL, 12>(keys, pre, aad, buf),
        _ => message::<SEAL, 14>(keys, pre, aad, buf),
    }
}

/// A whole message with AAD or data (one with neither is `common::empty_entry`'s): at most one
/// block of each, [`one_block`]; AAD, data and length block within one run of 32 blocks,
/// [`short`]; else [`long`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn message<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    pre: Pre<'_>,
    aad: &[u8],
    buf: InOutBuf<'_, '_, u8>,
) -> __m128i {
    let j0v = j0_reg(pre);
    if aad.len() <= 16 && buf.len() <= 16 {
        return one_block::<SEAL, NR>(keys, j0v, aad, buf);
    }
    if blocks(aad.len()) + blocks(buf.len()) < NB {
        return short::<SEAL, NR>(keys, j0v, aad, buf);
    }
    cast(long::<SEAL, NR>(
        keys,
        j0v,
        matches!(pre, Pre::Nonce(_)),
        aad,
        buf,
    ))
}

/// [`message`] past [`short`]'s reach. Out of line: its stack frame (register spills of the
/// bulk loop, 64-byte aligned) would otherwise be set up for every short message too. The tag
/// comes back as a `u128`, in two general registers: a vector is returned through memory
/// between functions, and where the paths of [`message`] join, every short path's tag then went
/// through that stack slot too (a store and a reload on the end of a short message's chain).
/// `public`: whether J0 came from a 12-byte nonce, so that the counters are public (see
/// [`Counters`]).
#[inline(never)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn long<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    j0v: __m128i,
    public: bool,
    aad: &[u8],
    buf: InOutBuf<'_, '_, u8>,
) -> u128 {
    let mask: __m128i = aes1::<NR>(keys, j0v);
    let j0: [u8; 16] = cast(j0v);
    let ctr = super::first_counter(&j0);
    // the length block, reflected, built in a register (stored and read back as a block, its
    // bytes would wait for the store to reach the cache)
    let lb = _mm_set_epi64x((aad.len() as u64 * 8) as i64, (buf.len() as u64 * 8) as i64);
    let y = hash(keys, _mm_setzero_si128(), aad);
    let s = crypt::<SEAL, NR>(keys, ctr, public, y, buf, Some(lb));
    // `mask` holds E_K(J0)'s bytes in memory order
    cast(_mm_xor_si128(_mm_shuffle_epi8(s, rev128()), mask))
}

/// A message of at most one block, with at most one block of AAD: the counter block and J0
/// through AES in one 256-bit register, the AAD, the ciphertext and the length block hashed in
/// the lanes of one 512-bit register, with one reduction. The fewest instructions: at this
/// length the message's time is their count, not their latency.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn one_block<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    j0v: __m128i,
    aad: &[u8],
    mut data: InOutBuf<'_, '_, u8>,
) -> __m128i {
    let len = data.len();
    let rev = rev128();
    // J0 + 1 in the low lane, J0 in the high one
    let c1 = _mm_shuffle_epi8(
        _mm_add_epi32(_mm_shuffle_epi8(j0v, rev), _mm_set_epi32(0, 0, 0, 1)),
        rev,
    );
    let rk = |r: usize| _mm256_broadcastsi128_si256(cast(keys.rk[r]));
    let mut s = _mm256_xor_si256(_mm256_set_m128i(j0v, c1), rk(0));
    for r in 1..NR {
        s = _mm256_aesenc_epi128(s, rk(r));
    }
    let s = _mm256_aesenclast_epi128(s, rk(NR));
    let mask = _mm256_extracti128_si256::<1>(s);
    // the blocks to hash, in lanes `0..n`
    let mut x = _mm512_setzero_si512();
    let mut n = 0;
    let mut put = |x: &mut __m512i, b: __m128i| {
        *x = _mm512_mask_broadcast_i32x4(*x, 0xF << (4 * n), b);
        n += 1;
    };
    if !aad.is_empty() {
        put(&mut x, _mm_shuffle_epi8(load_partial16(aad), rev));
    }
    if len > 0 {
        let d = load_partial16(data.get_in());
        let out = _mm_xor_si128(_mm256_castsi256_si128(s), d);
        store_partial16(data.get_out(), out);
        // the ciphertext, zero past the message's end
        let ct = if SEAL {
            _mm_maskz_mov_epi8(byte_mask(len) as __mmask16, out)
        } else {
            d
        };
        put(&mut x, _mm_shuffle_epi8(ct, rev));
    }
    // the length block, reflected: [len(A)]_64 in the high half, [len(C)]_64 in the low
    put(
        &mut x,
        _mm_set_epi64x((aad.len() as u64 * 8) as i64, (len as u64 * 8) as i64),
    );
    let mut acc = Acc::new(n);
    acc.add(keys, x, n);
    _mm_xor_si128(_mm_shuffle_epi8(acc.finish(), rev), mask)
}

/// Registers `j..j + W` of a short message's data, all whole (`c` holds `64 W` bytes): their AES
/// rounds interleaved, the data through them, the ciphertext hashed into `acc`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn short_registers<const SEAL: bool, const NR: usize, const W: usize>(
    keys: &Keys,
    base: __m512i,
    j: usize,
    mut c: InOutBuf<'_, '_, u8>,
    acc: &mut Acc,
) {
    let rev = rev512();
    let k0 = round_key(keys, 0);
    let mut s: [__m512i; W] = core::array::from_fn(|i| {
        _mm512_xor_si512(_mm512_shuffle_epi8(inc(base, 4 * (j + i)), rev), k0)
    });
    for r in 1..NR {
        let kr = round_key(keys, r);
        for x in s.iter_mut() {
            *x = _mm512_aesenc_epi128(*x, kr);
        }
    }
    let kl = round_key(keys, NR);
    for (i, x) in s.iter().enumerate() {
        let d = load64(&c.get_in()[64 * i..]);
        let out = _mm512_aesenclast_epi128(*x, _mm512_xor_si512(kl, d));
        store64(&mut c.get_out()[64 * i..], out);
        acc.add(keys, reflect(if SEAL { out } else { d }), 4);
    }
}

/// Register `j` of a short message's data (`c`, at most 64 bytes) from the reflected counters
/// `base` (`J0 + 1..J0 + 4`): its AES, the data through it, the ciphertext hashed into `acc`. When
/// `tail` is given (the data's last register, with a lane to spare past its blocks), that lane
/// encrypts J0 into the mask `tail.1`, and the hash has the length block `tail.0` there.
#[inline]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn short_register<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    j0v: __m128i,
    base: __m512i,
    j: usize,
    mut c: InOutBuf<'_, '_, u8>,
    tail: Option<(__m128i, &mut __m128i)>,
    acc: &mut Acc,
) {
    let n = c.len();
    let spare = blocks(n) % 4;
    let mut ctr = _mm512_shuffle_epi8(inc(base, 4 * j), rev512());
    if tail.is_some() {
        // lane `spare` (past the data) encrypts J0
        let lane = 0b11 << (2 * spare);
        ctr = _mm512_mask_blend_epi64(lane, ctr, _mm512_broadcast_i32x4(j0v));
    }
    let mut s = _mm512_xor_si512(ctr, round_key(keys, 0));
    for r in 1..NR {
        s = _mm512_aesenc_epi128(s, round_key(keys, r));
    }
    let d = load_partial(c.get_in());
    let out = _mm512_aesenclast_epi128(s, _mm512_xor_si512(round_key(keys, NR), d));
    store_partial(c.get_out(), out);
    // the ciphertext, zero past the message's end
    let ct = if SEAL {
        _mm512_maskz_mov_epi8(byte_mask(n), out)
    } else {
        d
    };
    let mut x = reflect(ct);
    let mut k = blocks(n);
    if let Some((lb, mask)) = tail {
        // `d` is zero in lane `spare`: `out` holds E_K(J0) there
        let at = _mm512_set1_epi64(2 * spare as i64);
        let from = _mm512_add_epi64(at, _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
        *mask = _mm512_castsi512_si128(_mm512_permutexvar_epi64(from, out));
        x = _mm512_mask_broadcast_i32x4(x, 0xF << (4 * spare), lb);
        k += 1;
    }
    acc.add(keys, x, k);
}

/// The GHASH of a short message's blocks, register by register, schoolbook: four carry-less
/// products a register (no halves' sums to form), accumulated low, middle and high, reduced once.
struct Acc {
    lo: __m512i,
    mid: __m512i,
    hi: __m512i,
    /// The power index of the next block.
    idx: usize,
}

impl Acc {
    /// A run of `blocks` blocks (at most 32) from state zero.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn new(blocks: usize) -> Acc {
        Acc {
            lo: _mm512_setzero_si512(),
            mid: _mm512_setzero_si512(),
            hi: _mm512_setzero_si512(),
            idx: NB - blocks,
        }
    }

    /// The next `blocks` blocks (1 to 4) of the run, reflected, in `x`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn add(&mut self, keys: &Keys, x: __m512i, blocks: usize) {
        let p = load4(keys.p(), self.idx);
        self.lo = _mm512_xor_si512(self.lo, _mm512_clmulepi64_epi128::<0x00>(x, p));
        self.mid = xor3(
            self.mid,
            _mm512_clmulepi64_epi128::<0x01>(x, p),
            _mm512_clmulepi64_epi128::<0x10>(x, p),
        );
        self.hi = _mm512_xor_si512(self.hi, _mm512_clmulepi64_epi128::<0x11>(x, p));
        self.idx += blocks;
    }

    /// The last block of the run, reflected, in `x` (times `Q_1`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn add_last(&mut self, keys: &Keys, x: __m128i) {
        let p: __m128i = cast(keys.p()[NB - 1]);
        let z = _mm512_zextsi128_si512;
        self.lo = _mm512_xor_si512(self.lo, z(_mm_clmulepi64_si128::<0x00>(x, p)));
        self.mid = xor3(
            self.mid,
            z(_mm_clmulepi64_si128::<0x01>(x, p)),
            z(_mm_clmulepi64_si128::<0x10>(x, p)),
        );
        self.hi = _mm512_xor_si512(self.hi, z(_mm_clmulepi64_si128::<0x11>(x, p)));
    }

    /// The GHASH value: one reduction lane by lane, then the lanes folded.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
    fn finish(self) -> __m128i {
        fold(reduce4(self.lo, self.mid, self.hi))
    }
}

/// A whole message whose AAD and data fill fewer than 32 blocks: the AAD and the data register by
/// register (masked loads and stores at the ends), every block hashed with its final power, the
/// length block built in a register, one reduction. `E_K(J0)` is computed beside the data: where
/// the data's last register has a lane to spare (a block count that is not a multiple of four),
/// J0 takes that lane's counter and the length block its place in the hash, so the message needs
/// no AES and no products of its own for either; otherwise J0 runs in a register of its own,
/// first, its rounds beside the data's.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,aes,pclmulqdq,vaes,vpclmulqdq")]
fn short<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    j0v: __m128i,
    aad: &[u8],
    mut data: InOutBuf<'_, '_, u8>,
) -> __m128i {
    let len = data.len();
    // blocks in the data's last register, when it has a lane to spare
    let spare = blocks(len) % 4;
    let mut mask = _mm_setzero_si128();
    if spare == 0 {
        mask = aes1::<NR>(keys, j0v);
    }
    let mut acc = Acc::new(blocks(aad.len()) + blocks(len) + 1);
    // One register of AAD and one of data (TLS records' headers, short messages) go straight
    // through; the loops' bookkeeping is a fifth of a 16-byte message's instructions.
    if aad.len() <= 64 {
        if !aad.is_empty() {
            acc.add(keys, reflect(load_partial(aad)), blocks(aad.len()));
        }
    } else {
        for c in aad.chunks(64) {
            acc.add(keys, reflect(load_partial(c)), blocks(c.len()));
        }
    }
    // the length block, reflected: [len(A)]_64 in the high half, [len(C)]_64 in the low
    let lb = _mm_set_epi64x((aad.len() as u64 * 8) as i64, (len as u64 * 8) as i64);
    // the byte-reflected counters J0 + 1..J0 + 4
    let base = _mm512_add_epi32(
        _mm512_shuffle_epi8(_mm512_broadcast_i32x4(j0v), rev512()),
        _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 1),
    );
    if len <= 64 {
        if len > 0 {
            let tail = (spare != 0).then_some((lb, &mut mask));
            short_register::<SEAL, NR>(keys, j0v, base, 0, data, tail, &mut acc);
        }
    } else {
        let mut j = 0;
        // whole registers, four or two at a time, their rounds interleaved; the data's last
        // register (it may be partial, and may carry J0) on its own
        while data.len() > 4 * 64 {
            let (c, rest) = data.split_at(4 * 64);
            data = rest;
            short_registers::<SEAL, NR, 4>(keys, base, j, c, &mut acc);
            j += 4;
        }
        while data.len() > 2 * 64 {
            let (c, rest) = data.split_at(2 * 64);
            data = rest;
            short_registers::<SEAL, NR, 2>(keys, base, j, c, &mut acc);
            j += 2;
        }
        while !data.is_empty() {
            let n = data.len().min(64);
            let (c, rest) = data.split_at(n);
            data = rest;
            let tail = (data.is_empty() && spare != 0).then_some((lb, &mut mask));
            short_register::<SEAL, NR>(keys, j0v, base, j, c, tail, &mut acc);
            j += 1;
        }
    }
    if spare == 0 {
        acc.add_last(keys, lb);
    }
    let s = _mm_shuffle_epi8(acc.finish(), rev128());
    _mm_xor_si128(s, mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Public counters give the blocks secret ones give, from every low byte (the shortcut
    /// runs where the first is 2 more than a multiple of 32, as every step of a 12-byte nonce's
    /// message starts; a message reaches only 8 of the 256) and across the 32-bit wrap, step
    /// after step.
    #[test]
    fn public_counters_match_secret_ones() {
        if super::super::Level::detect() != Some(super::super::Level::Zmm) {
            return;
        }
        for hi in [0u128, 0x0123_4567_89ab_cdef_0011_2233 << 32] {
            for low in (0..=255u32).chain([0xFFFF_FF00, 0xFFFF_FFE0, 0xFFFF_FFFF]) {
                let ctr = hi | u128::from(low);
                // SAFETY: the CPU has the 512-bit kernels' features (checked above).
                #[allow(unsafe_code)]
                unsafe {
                    let (mut public, mut secret) =
                        (Counters::new(ctr, true), Counters::new(ctr, false));
                    for step in 0..10 {
                        let k0 = _mm512_set1_epi32(0x5a5a_1234);
                        let (p, s) = (public.next(k0), secret.next(k0));
                        let (p, s): ([[u8; 64]; R], [[u8; 64]; R]) = (cast(p), cast(s));
                        assert_eq!(p, s, "counter {ctr:#x}, step {step}");
                    }
                }
            }
        }
    }
}
