// aes_bs.cuh - constant-time, table-free bitsliced AES (128/192/256) for CUDA.
//
// MATH AND LAYOUT
// ----------------
// 32-way bitslicing inside one thread: a thread encrypts 32 counter blocks at once.
// The state is 128 32-bit "bit planes" st[p], p = 8*i + b, where i = 0..15 is the AES
// state byte (FIPS-197 order: byte i = row i%4, column i/4) and b = 0..7 the bit of that
// byte (b = 0 is the least significant bit, the coefficient of x^0 in GF(2^8)).
// Bit j (0..31) of st[p] belongs to block j.  With this numbering the 32 planes of
// state word w (bytes 4w..4w+3) are st[32w .. 32w+31] and plane 32w+q is bit q of the
// little-endian 32-bit word w of every block, so one 32x32 bit-matrix transpose per word
// converts between planes and uint4 blocks.
//
//  * SubBytes: a straight-line circuit of 70 three-input gates (LOP3) computing the S-box
//    without its constant 0x63, derived from GF(2^8) inversion in a tower of normal bases
//    GF(((2^2)^2)^2): linear layers optimised for LOP3, a SAT-optimal 7-gate GF(16)
//    inversion, and an exact (CP-SAT) cover of the gate graph by LOP3 cuts
//    (cuda/tests/aes_sbox_gen.py derives it; cuda/tests/aes_host_check.cu checks all 256
//    inputs).  No table, no memory index, no branch depends on data or key.  The gates are
//    inline-PTX lop3 so that the compiler keeps the circuit's sharing.
//  * ShiftRows: register renaming (compile-time indices only).
//  * MixColumns: out_r = xtime(a_r ^ a_{r+1}) ^ a_{r+1} ^ (a_{r+2} ^ a_{r+3}), 76 LOP3 per
//    column (32 XOR2 + 20 XOR3 + 12 XOR3/XOR2 pairs).
//  * AddRoundKey: XOR with all-ones / all-zero masks made from the round-key bits, both on
//    the FMA pipe (integer multiplies, next to the LOP3s of the ALU pipe): mask = high word of
//    (key << (31-q)) * 1, p ^ mask = p * (2 mask + 1) + mask.  No branch, no table.  The
//    S-box constant 0x63 rides in the round keys (MixColumns maps a 0x63 column to itself).
//    Kernels whose thread block shares one key (gcm_fused.cu, aes_ctr.cu) precompute the pairs
//    (mask, 2 mask + 1) of rounds 2..nr once per block in shared memory (gcmx_aes_fill_masks,
//    15 KiB) and read them with warp-uniform addresses (broadcast, public index): one IMAD per
//    plane and round instead of four (the measured gain is in benches/gpu-notes.md).  The table
//    is key material: those kernels clear it before they exit.
//  * Counter input: block j = prefix(12 bytes) || be32(ctr_first + j*ctr_stride).  Bytes
//    0..11 are the same in all 32 blocks, so round 1 computes their 12 S-boxes once (one
//    byte-parallel SWAR circuit pass) and, after ShiftRows, each column has one varying byte:
//    MixColumns = scalar MixColumns of the constants XOR {1,2,3} x the varying byte planes.
//    The 32 counter planes are a closed form for stride 32 (rotations and carries, no
//    transpose) or a 32x32 transpose of the counters for other strides.
//  * Output: four 32x32 transposes, one per state word, give ks[j] in memory byte order.
//
// Cost: cuda/tests/run_host_checks.sh counts the ALU-pipe (LOP3/PRMT/...) and FMA-pipe (IMAD)
// instructions per 16-byte block in the SASS of one call and prints the bound they set; the
// counts, that bound and the profile of the kernels that call this are in benches/gpu-notes.md.
// The last round runs inside the round loop so that the 16 S-box circuits exist once in the code
// (two copies cost instruction-cache misses).
//
// Key: struct GcmxAesKey { uint32_t rk[60]; uint32_t nr; } holds the FIPS-197 expanded key
// words w[i] (w[0] = key bytes 0..3 read big-endian) and nr = 10/12/14.
// gcmx_aes_expand_key() builds it in constant time (SubWord uses the same S-box circuit).
//
// Build for host checks with GCMX_AES_HD defined as `__host__ __device__` (see
// cuda/tests/aes_host_check.cu); by default the functions are device functions.
#ifndef GCMX_AES_BS_CUH
#define GCMX_AES_BS_CUH

#include <stdint.h>

#include "gcmx_abi.h"  // struct GcmxAesKey { uint32_t rk[60]; uint32_t nr; }

// Function qualifier: device functions by default; the host checks define it as
// `__host__ __device__` before including this file.
#ifndef GCMX_AES_HD
#define GCMX_AES_HD __device__
#endif

/// AES state bytes per block and bit planes per bitsliced state.
#define GCMX_AES_BLOCK_BYTES 16
#define GCMX_AES_PLANES 128
/// Blocks per thread in the bitsliced representation (bits of a uint32_t).
#define GCMX_AES_BS_WIDTH 32
/// Maximum number of round-key words (AES-256: 4 * (14 + 1)).
#define GCMX_AES_MAX_RK_WORDS 60
/// Words of a round-key mask table (gcmx_aes_fill_masks): (m, s) for 128 planes x 15 rounds.
#define GCMX_AES_MASK_WORDS (2 * GCMX_AES_PLANES * 15)

namespace gcmx_aes_detail {

// ---------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------

/// Byte permute (PTX prmt / __byte_perm semantics): result byte k = byte s_k of {hi:lo}.
GCMX_AES_HD __forceinline__ uint32_t prmt(uint32_t lo, uint32_t hi, uint32_t sel) {
#ifdef __CUDA_ARCH__
    return __byte_perm(lo, hi, sel);
#else
    uint64_t v = ((uint64_t)hi << 32) | lo;
    uint32_t r = 0;
    for (int k = 0; k < 4; ++k) {
        uint32_t s = (sel >> (4 * k)) & 7u;
        r |= (uint32_t)((v >> (8 * s)) & 0xFFu) << (8 * k);
    }
    return r;
#endif
}

/// One 3-input logic operation: bit i of LUT gives f(a,b,c) for a = bit 2 of i, b = bit 1,
/// c = bit 0 (PTX lop3 convention, LUT = f(0xF0, 0xCC, 0xAA)).  Written as inline PTX so
/// that the compiler keeps the circuit's sharing (it would otherwise re-associate XOR
/// chains and lose common subexpressions).
template <uint32_t LUT>
GCMX_AES_HD __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(LUT));
    return d;
#else
    uint32_t r = 0;
    for (int i = 0; i < 8; ++i)
        if ((LUT >> i) & 1u)
            r |= ((i & 4) ? a : ~a) & ((i & 2) ? b : ~b) & ((i & 1) ? c : ~c);
    return r;
#endif
}

/// LUTs: XOR of two / three inputs; bit-select f(a, b, m) = m ? a : b; (a & b) | c.
#define GCMX_LUT_XOR2 0x3Cu
#define GCMX_LUT_XOR3 0x96u
#define GCMX_LUT_SEL 0xE4u
#define GCMX_LUT_ANDOR 0xEAu

/// x >> s (0 < s < 32) as the high word of x * 2^(32-s): a multiply (FMA pipe), not a shift.
GCMX_AES_HD __forceinline__ uint32_t shr_mul(uint32_t x, int s) {
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("mul.hi.u32 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(1u << (32 - s)));
    return d;
#else
    return x >> s;
#endif
}

GCMX_AES_HD __forceinline__ uint32_t x2(uint32_t a, uint32_t b) { return lop3<GCMX_LUT_XOR2>(a, b, a); }
GCMX_AES_HD __forceinline__ uint32_t x3(uint32_t a, uint32_t b, uint32_t c) {
    return lop3<GCMX_LUT_XOR3>(a, b, c);
}

/// Identity that the optimiser cannot see through (keeps a value computed once instead of
/// letting the compiler distribute it into every use, e.g. a key-word XOR into 32 shifts).
GCMX_AES_HD __forceinline__ uint32_t opaque(uint32_t x) {
#ifdef __CUDA_ARCH__
    asm("" : "+r"(x));
#endif
    return x;
}

/// Rotate right by a runtime amount 0..31 (funnel shift).
GCMX_AES_HD __forceinline__ uint32_t rotr(uint32_t x, uint32_t n) {
#ifdef __CUDA_ARCH__
    return __funnelshift_r(x, x, n);
#else
    return n ? (x >> n) | (x << (32u - n)) : x;
#endif
}

/// Byte swap (big-endian key word -> little-endian memory word).
GCMX_AES_HD __forceinline__ uint32_t bswap32(uint32_t x) { return prmt(x, 0u, 0x0123u); }

/// All-ones if bit q of x is set, else zero (branch-free; q is a compile-time constant).
GCMX_AES_HD __forceinline__ uint32_t bitmask(uint32_t x, int q) {
    return (uint32_t)((int32_t)(x << (31 - q)) >> 31);
}

// Round-key masks and their XOR are done with integer multiplies, which run on the FMA
// pipe of the SM, next to the LOP3s of the S-boxes and MixColumns on the ALU pipe:
//   kmask(x, q, one) = high word of (int)(x << (31-q)) * one = all-ones iff bit q of x is
//                      set (one = 1; IMAD.SHL + IMAD.HI, no ALU op, no branch);
//   kxor(p, m, one)  = p * (2m + 1) + m = p ^ m for m in {0, ~0} (two IMADs).
// `one` is 1 for every valid key; it is read from the key (nr != 0) so that the compiler
// cannot turn the multiply back into an ALU shift.
GCMX_AES_HD __forceinline__ uint32_t kmask(uint32_t x, int q, uint32_t one) {
    const int32_t y = (int32_t)(x << (31 - q));
#ifdef __CUDA_ARCH__
    return (uint32_t)__mulhi(y, (int32_t)one);
#else
    return (uint32_t)(((int64_t)y * (int64_t)(int32_t)one) >> 32);
#endif
}

GCMX_AES_HD __forceinline__ uint32_t kxor(uint32_t p, uint32_t m, uint32_t one) {
    // s = 2m + 1 as m * (2*one) + one: a multiply by a value the compiler cannot see as a
    // constant, so it stays an IMAD (FMA pipe) instead of becoming an ALU shift-add.
    const uint32_t s = m * (one + one) + one;
    return p * s + m;
}

// ---------------------------------------------------------------------------------
// S-box circuit (generated by cuda/tests/aes_sbox_gen.py, verified on all 256 inputs).
// Inputs u0..u7 = bits 0..7 (LSB first) of the byte, outputs s0..s7 likewise.
// Every statement is one 3-input logic operation (LOP3).
// The circuit computes S(x) ^ 0x63 (the S-box without its affine constant): the constant is
// added through the round keys instead (MixColumns maps a column of 0x63 bytes to itself,
// so round key r >= 1 is used as rk ^ 0x63636363), which saves four NOTs per S-box.
// ---------------------------------------------------------------------------------
/// The affine constant of the S-box in every byte of a word.
#define GCMX_AES_SBOX_CONST4 0x63636363u

GCMX_AES_HD __forceinline__ void sbox(uint32_t& x0, uint32_t& x1, uint32_t& x2, uint32_t& x3,
                                  uint32_t& x4, uint32_t& x5, uint32_t& x6, uint32_t& x7) {
    const uint32_t u0 = x0, u1 = x1, u2 = x2, u3 = x3, u4 = x4, u5 = x5, u6 = x6, u7 = x7;
    uint32_t s0, s1, s2, s3, s4, s5, s6, s7;
    // GCMX_SBOX_BEGIN (outputs without the constant 0x63)
    // 70 LOP3 (cover optimal: True); tower N=2 V=2 basis images [255, 9, 89, 226, 232, 50, 202, 52]; seed 1; xor3 0; checked on all 256 inputs
    const uint32_t g8 = lop3<0x3C>(u3, u4, u3);
    const uint32_t g11 = lop3<0x96>(u2, u3, u4);
    const uint32_t g12 = lop3<0x96>(u5, u6, u7);
    const uint32_t g13 = lop3<0x96>(u3, u4, g12);
    const uint32_t g15 = lop3<0x96>(u0, u6, g13);
    const uint32_t g16 = lop3<0x96>(u2, g8, g15);
    const uint32_t g18 = lop3<0x96>(u2, g12, g15);
    const uint32_t g20 = lop3<0x96>(u0, u1, u2);
    const uint32_t g21 = lop3<0x96>(u1, u2, u7);
    const uint32_t g23 = lop3<0x96>(u4, g13, g21);
    const uint32_t g24 = lop3<0x96>(u6, g13, g21);
    const uint32_t g26 = lop3<0x96>(u6, g13, g23);
    const uint32_t g29 = lop3<0x96>(u0, u7, g26);
    const uint32_t g30 = lop3<0x28>(g12, g15, g29);
    const uint32_t g31 = lop3<0x28>(u0, u7, g18);
    const uint32_t g37 = lop3<0x28>(g8, g12, g21);
    const uint32_t g38 = lop3<0x48>(u6, g8, g13);
    const uint32_t g39 = lop3<0x6A>(g11, g23, g37);
    const uint32_t g40 = lop3<0x6A>(u2, g26, g37);
    const uint32_t g41 = lop3<0xF6>(g15, g20, g23);
    const uint32_t g43 = lop3<0x96>(g38, g39, g41);
    const uint32_t g45 = lop3<0x96>(g30, g38, g40);
    const uint32_t g46 = lop3<0x96>(u5, u7, g45);
    const uint32_t g47 = lop3<0x6A>(g12, g24, g39);
    const uint32_t g48 = lop3<0x6A>(g16, g20, g47);
    const uint32_t g49 = lop3<0x96>(g11, g23, g48);
    const uint32_t g50 = lop3<0x96>(g13, g21, g31);
    const uint32_t g51 = lop3<0x6A>(g12, g24, g50);
    const uint32_t g52 = lop3<0x3C>(g40, g51, g40);
    const uint32_t g53 = lop3<0x2D>(g46, g49, g52);
    const uint32_t g54 = lop3<0x9A>(g43, g46, g49);
    const uint32_t g55 = lop3<0x6C>(g43, g49, g53);
    const uint32_t g56 = lop3<0x69>(g43, g52, g54);
    const uint32_t g57 = lop3<0xD4>(g46, g52, g56);
    const uint32_t g58 = lop3<0x92>(g52, g53, g56);
    const uint32_t g59 = lop3<0xD4>(g43, g49, g56);
    const uint32_t g61 = lop3<0x3C>(g55, g59, g55);
    const uint32_t g62 = lop3<0x96>(g57, g58, g61);
    const uint32_t g65 = lop3<0x3C>(g55, g58, g55);
    const uint32_t g68 = lop3<0x28>(u0, u7, g59);
    const uint32_t g69 = lop3<0x60>(g26, g55, g59);
    const uint32_t g70 = lop3<0x28>(g20, g23, g58);
    const uint32_t g72 = lop3<0x60>(g23, g57, g58);
    const uint32_t g74 = lop3<0x60>(g21, g57, g59);
    const uint32_t g75 = lop3<0x28>(u6, g13, g62);
    const uint32_t g76 = lop3<0x28>(g12, g15, g55);
    const uint32_t g78 = lop3<0x60>(u2, g55, g59);
    const uint32_t g81 = lop3<0x60>(g11, g57, g58);
    const uint32_t g82 = lop3<0x60>(g12, g55, g58);
    const uint32_t g83 = lop3<0x60>(g13, g57, g59);
    const uint32_t g85 = lop3<0x6A>(g20, g57, g68);
    const uint32_t g86 = lop3<0x6A>(g16, g57, g81);
    const uint32_t g87 = lop3<0x6A>(g29, g55, g82);
    const uint32_t g89 = lop3<0x96>(g70, g85, g86);
    const uint32_t g92 = lop3<0x96>(g83, g87, g89);
    const uint32_t g95 = lop3<0x96>(g69, g72, g85);
    const uint32_t g96 = lop3<0x96>(g69, g74, g75);
    const uint32_t g97 = lop3<0x6A>(g18, g59, g96);
    const uint32_t g98 = lop3<0x6A>(g8, g62, g87);
    const uint32_t g99 = lop3<0x6A>(g15, g58, g81);
    const uint32_t g100 = lop3<0x96>(g76, g78, g99);
    const uint32_t g101 = lop3<0x6A>(g24, g65, g68);
    const uint32_t g103 = lop3<0x96>(g75, g92, g101);
    const uint32_t g105 = lop3<0x96>(g96, g100, g103);
    const uint32_t g107 = lop3<0x96>(g76, g97, g98);
    const uint32_t g108 = lop3<0x3C>(g95, g103, g95);
    const uint32_t g109 = lop3<0x6A>(g29, g55, g108);
    const uint32_t g111 = lop3<0x96>(g78, g89, g97);
    const uint32_t g113 = lop3<0x96>(g98, g99, g105);
    const uint32_t g115 = lop3<0x96>(g86, g108, g113);
    s0 = g115;
    s1 = g109;
    s2 = g111;
    s3 = g107;
    s4 = g92;
    s5 = g100;
    s6 = g105;
    s7 = g95;
    // GCMX_SBOX_END
    x0 = s0; x1 = s1; x2 = s2; x3 = s3; x4 = s4; x5 = s5; x6 = s6; x7 = s7;
}

/// SubBytes on all 16 bytes of the bitsliced state.
GCMX_AES_HD __forceinline__ void sub_bytes(uint32_t (&st)[GCMX_AES_PLANES]) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        sbox(st[8 * i + 0], st[8 * i + 1], st[8 * i + 2], st[8 * i + 3], st[8 * i + 4],
             st[8 * i + 5], st[8 * i + 6], st[8 * i + 7]);
    }
}

/// Plane index of bit b of the byte at (row r, column c) of the AES state.
#define GCMX_AES_P(r, c, b) (8 * (4 * (c) + (r)) + (b))

/// ShiftRows + MixColumns + AddRoundKey on the bitsliced state. `key(p, v)` returns plane value v
/// with plane p's round-key bit added (p = 32c + 8r + b: bit 8r + b of the round key's word c).
template <typename Key>
GCMX_AES_HD __forceinline__ void shift_mix_key(uint32_t (&st)[GCMX_AES_PLANES], const Key& key) {
    uint32_t o[GCMX_AES_PLANES];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        // column c after ShiftRows: row r comes from column (c + r) mod 4
        uint32_t a[4][8], d[4][8];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int b = 0; b < 8; ++b) a[r][b] = st[GCMX_AES_P(r, (c + r) & 3, b)];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int b = 0; b < 8; ++b) d[r][b] = x2(a[r][b], a[(r + 1) & 3][b]);
        // out_r = xtime(d_r) ^ a_{r+1} ^ d_{r+2}, d_r = a_r ^ a_{r+1}   (+ round key);
        // xtime(d)[b] = d[b-1] (d[7] for b = 0), plus d[7] for b = 1, 3, 4.
        // 32 XOR2 + 20 XOR3 + 12 (XOR3 + XOR2) = 76 LOP3 per column.
#pragma unroll
        for (int r = 0; r < 4; ++r) {
#pragma unroll
            for (int b = 0; b < 8; ++b) {
                uint32_t v = x3((b == 0) ? d[r][7] : d[r][b - 1], a[(r + 1) & 3][b], d[(r + 2) & 3][b]);
                if (b == 1 || b == 3 || b == 4) v = x2(v, d[r][7]);
                o[GCMX_AES_P(r, c, b)] = key(GCMX_AES_P(r, c, b), v);
            }
        }
    }
#pragma unroll
    for (int p = 0; p < GCMX_AES_PLANES; ++p) st[p] = o[p];
}

/// ShiftRows + AddRoundKey (last round, no MixColumns); `key` as for shift_mix_key.
template <typename Key>
GCMX_AES_HD __forceinline__ void shift_key(uint32_t (&st)[GCMX_AES_PLANES], const Key& key) {
    uint32_t o[GCMX_AES_PLANES];
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int b = 0; b < 8; ++b)
                o[GCMX_AES_P(r, c, b)] = key(GCMX_AES_P(r, c, b), st[GCMX_AES_P(r, (c + r) & 3, b)]);
#pragma unroll
    for (int p = 0; p < GCMX_AES_PLANES; ++p) st[p] = o[p];
}

/// Round key from the key words in registers: kw[w] = round-key word w byte-swapped (bit q of
/// kw[w] is plane 32w + q); kmask + kxor on the FMA pipe.
struct GcmxRegKey {
    const uint32_t (&kw)[4];
    uint32_t one;
    GCMX_AES_HD __forceinline__ uint32_t operator()(int p, uint32_t v) const {
        return kxor(v, kmask(kw[p / 32], p % 32, one), one);
    }
};

/// Round key from a shared-memory mask table (see rounds_t): one multiply-add.
struct GcmxTblKey {
    const uint32_t* t;
    GCMX_AES_HD __forceinline__ uint32_t operator()(int p, uint32_t v) const { return v * t[2 * p + 1] + t[2 * p]; }
};

GCMX_AES_HD __forceinline__ void shift_mix_add(uint32_t (&st)[GCMX_AES_PLANES], const uint32_t (&kw)[4],
                                               uint32_t one) {
    shift_mix_key(st, GcmxRegKey{kw, one});
}

GCMX_AES_HD __forceinline__ void shift_add(uint32_t (&st)[GCMX_AES_PLANES], const uint32_t (&kw)[4],
                                           uint32_t one) {
    shift_key(st, GcmxRegKey{kw, one});
}

/// In-place 32x32 bit-matrix transpose of a[OFF .. OFF+31]:
/// afterwards bit j of a[OFF+i] = old bit i of a[OFF+j].
/// Stages of 16 and 8 are byte permutes; stages 4, 2, 1 are shift + 3-input select.
template <int OFF>
GCMX_AES_HD __forceinline__ void transpose32(uint32_t (&a)[GCMX_AES_PLANES]) {
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        const uint32_t x = a[OFF + r], y = a[OFF + r + 16];
        a[OFF + r] = prmt(x, y, 0x5410u);
        a[OFF + r + 16] = prmt(x, y, 0x7632u);
    }
#pragma unroll
    for (int r = 0; r < 32; ++r) {
        if (r & 8) continue;
        const uint32_t x = a[OFF + r], y = a[OFF + r + 8];
        a[OFF + r] = prmt(x, y, 0x6240u);
        a[OFF + r + 8] = prmt(x, y, 0x7351u);
    }
#pragma unroll
    for (int j = 4; j >= 1; j >>= 1) {
        const uint32_t m = (j == 4) ? 0x0F0F0F0Fu : (j == 2) ? 0x33333333u : 0x55555555u;
#pragma unroll
        for (int r = 0; r < 32; ++r) {
            if (r & j) continue;
            const uint32_t x = a[OFF + r], y = a[OFF + r + j];
            // one select each; the shifts are multiplies (FMA pipe) where the compiler keeps them
            a[OFF + r] = lop3<GCMX_LUT_SEL>(x, y << j, m);
            a[OFF + r + j] = lop3<GCMX_LUT_SEL>(shr_mul(x, j), y, m);
        }
    }
}

/// Bitsliced AES rounds on st (round key 0 already added).
GCMX_AES_HD __forceinline__ void rounds(uint32_t (&st)[GCMX_AES_PLANES], const GcmxAesKey& k,
                                        uint32_t nr, uint32_t first, uint32_t one) {
    // The last round shares the loop's SubBytes code (one copy of the 16 S-box circuits instead of two:
    // ~18 KB less hot code, fewer instruction-cache misses); the branch is on the public round index.
#pragma unroll 1
    for (uint32_t r = first; r <= nr; ++r) {
        sub_bytes(st);
        uint32_t kw[4];
#pragma unroll
        for (int w = 0; w < 4; ++w) kw[w] = opaque(bswap32(k.rk[4 * r + w]) ^ GCMX_AES_SBOX_CONST4);
        if (r < nr) shift_mix_add(st, kw, one);
        else shift_add(st, kw, one);
    }
}

// ---------------------------------------------------------------------------------
// Round keys from a shared-memory table (kernels whose thread block shares one key).
// tbl[2 (128 r + p)] = m, tbl[2 (128 r + p) + 1] = 2m + 1 for round r and plane p, with m the
// all-ones / all-zero mask of plane p's key bit (the 0x63 constant folded in as above), so that
// p * (2m + 1) + m = p ^ m is ONE multiply-add per plane and round instead of the four of
// kmask + kxor. Built by gcmx_aes_fill_masks; the table is public data to every thread of the
// block, read with warp-uniform addresses (shared-memory broadcast), never indexed by data.
// ---------------------------------------------------------------------------------

/// Rounds 2..nr with round keys from the table (GcmxTblKey).
GCMX_AES_HD __forceinline__ void rounds_t(uint32_t (&st)[GCMX_AES_PLANES], const uint32_t* tbl, uint32_t nr) {
#pragma unroll 1
    for (uint32_t r = 2; r <= nr; ++r) {
        sub_bytes(st);
        const uint32_t* t = tbl + 2u * GCMX_AES_PLANES * r;
        if (r < nr) shift_mix_key(st, GcmxTblKey{t});
        else shift_key(st, GcmxTblKey{t});
    }
}

/// x shifted left by s bits (right by -s when s < 0); s is a compile-time constant.
GCMX_AES_HD __forceinline__ uint32_t shl_signed(uint32_t x, int s) { return s >= 0 ? x << s : x >> -s; }


/// MixColumns of one column held in a word (row r in byte r), byte-parallel (SWAR).
GCMX_AES_HD __forceinline__ uint32_t mix_word(uint32_t x) {
    const uint32_t r1 = prmt(x, x, 0x0321u), r2 = prmt(x, x, 0x1032u), r3 = prmt(x, x, 0x2103u);
    const uint32_t d = x ^ r1;  // byte r: a_r ^ a_{r+1}
    const uint32_t xt = ((d & 0x7F7F7F7Fu) << 1) ^ (((d >> 7) & 0x01010101u) * 0x1Bu);
    return xt ^ r1 ^ r2 ^ r3;   // 2a_r ^ 3a_{r+1} ^ a_{r+2} ^ a_{r+3}
}

/// Round 1 for counter blocks.  After round key 0, state bytes 0..11 are the same constants
/// cw (prefix ^ rk0, little-endian words) in all 32 blocks; only bytes 12..15 (st[96..127])
/// vary.  The 12 constant S-boxes are evaluated once, packed in one SWAR pass (bit 8m+w of
/// plane b = bit b of byte m of cw[w]); after ShiftRows every column holds exactly one varying
/// byte, at row r0 = 3 - c, so MixColumns = (scalar MixColumns of the constant bytes) XOR
/// (coefficient 1, 2 or 3 times the varying byte's planes), and the constant part goes into
/// the round-key masks.  kw = round key 1 words byte-swapped, XOR 0x63636363.
GCMX_AES_HD __forceinline__ void round1(uint32_t (&st)[GCMX_AES_PLANES], const uint32_t (&cw)[3],
                                        const uint32_t (&kw)[4], uint32_t one) {
    // S' (S-box without 0x63) of the 12 constant bytes.
    uint32_t u[8];
#pragma unroll
    for (int b = 0; b < 8; ++b) {
        const uint32_t t = lop3<GCMX_LUT_SEL>(shl_signed(cw[0], -b), shl_signed(cw[1], 1 - b), 0x01010101u);
        u[b] = lop3<GCMX_LUT_SEL>(t, shl_signed(cw[2], 2 - b), 0x03030303u);
    }
    sbox(u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7]);
    uint32_t sc[3];
#pragma unroll
    for (int w = 0; w < 3; ++w) {
        uint32_t acc = 0u;
#pragma unroll
        for (int b = 0; b < 8; ++b)
            acc = lop3<GCMX_LUT_ANDOR>(shl_signed(u[b], b - w), 0x01010101u << b, acc);
        sc[w] = acc;  // byte m = S'(byte m of cw[w])
    }
    // S' of the four varying bytes (bitsliced).
#pragma unroll
    for (int m = 0; m < 4; ++m)
        sbox(st[96 + 8 * m + 0], st[96 + 8 * m + 1], st[96 + 8 * m + 2], st[96 + 8 * m + 3],
             st[96 + 8 * m + 4], st[96 + 8 * m + 5], st[96 + 8 * m + 6], st[96 + 8 * m + 7]);
    uint32_t o[GCMX_AES_PLANES];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const int r0 = (3 - c) & 3;  // row of the varying byte (old byte 12 + r0)
        // constant column after ShiftRows: row r = byte r of sc[(c + r) & 3], r != r0;
        // equivalently sc[w] gives its byte (w - c) & 3.  Byte r0 is zero.
        const uint32_t m0 = 0xFFu << (8 * ((0 - c) & 3)), m1 = 0xFFu << (8 * ((1 - c) & 3)),
                       m2 = 0xFFu << (8 * ((2 - c) & 3));
        const uint32_t t = lop3<GCMX_LUT_SEL>(sc[0], sc[1], m0);
        const uint32_t col = lop3<GCMX_LUT_ANDOR>(t, m0 | m1, sc[2] & m2);
        const uint32_t ck = opaque(mix_word(col) ^ kw[c]);
        uint32_t v[8], v2[8], v3[8];
#pragma unroll
        for (int b = 0; b < 8; ++b) v[b] = st[96 + 8 * r0 + b];
#pragma unroll
        for (int b = 0; b < 8; ++b) {
            const uint32_t lo = (b == 0) ? v[7] : v[b - 1];
            const bool fb = (b == 1 || b == 3 || b == 4);
            v2[b] = fb ? x2(lo, v[7]) : lo;                    // xtime(v)
            v3[b] = fb ? x3(lo, v[7], v[b]) : x2(lo, v[b]);   // xtime(v) ^ v
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int coef = (r == r0) ? 2 : (((r + 1) & 3) == r0) ? 3 : 1;
#pragma unroll
            for (int b = 0; b < 8; ++b) {
                const uint32_t x = coef == 1 ? v[b] : coef == 2 ? v2[b] : v3[b];
                o[GCMX_AES_P(r, c, b)] = kxor(x, kmask(ck, 8 * r + b, one), one);
            }
        }
    }
#pragma unroll
    for (int p = 0; p < GCMX_AES_PLANES; ++p) st[p] = o[p];
}

/// SubWord via the same circuit, four bytes in parallel (SWAR: bit b of byte m of the
/// word sits at bit 8m of plane b).  Constant time.
GCMX_AES_HD __forceinline__ uint32_t sub_word(uint32_t w) {
    uint32_t x0 = w, x1 = w >> 1, x2 = w >> 2, x3 = w >> 3, x4 = w >> 4, x5 = w >> 5,
             x6 = w >> 6, x7 = w >> 7;
    sbox(x0, x1, x2, x3, x4, x5, x6, x7);
    const uint32_t lsb = 0x01010101u;
    return ((x0 & lsb) | ((x1 & lsb) << 1) | ((x2 & lsb) << 2) | ((x3 & lsb) << 3) |
            ((x4 & lsb) << 4) | ((x5 & lsb) << 5) | ((x6 & lsb) << 6) | ((x7 & lsb) << 7)) ^
           GCMX_AES_SBOX_CONST4;
}

}  // namespace gcmx_aes_detail

/// FIPS-197 key expansion in constant time (no key-indexed memory access; the S-box is the
/// bitsliced circuit).  key_len must be 16, 24 or 32; any other length gives nr = 0 and an
/// all-zero schedule (the host validates lengths; kernels never trap).
GCMX_AES_HD inline void gcmx_aes_expand_key(const uint8_t* key, uint32_t key_len, GcmxAesKey* out) {
    using namespace gcmx_aes_detail;
    for (int i = 0; i < GCMX_AES_MAX_RK_WORDS; ++i) out->rk[i] = 0u;
    out->nr = 0u;
    if (key_len != 16u && key_len != 24u && key_len != 32u) return;  // public length only
    const uint32_t nk = key_len / 4u;
    const uint32_t nr = nk + 6u;
    const uint32_t total = 4u * (nr + 1u);
    for (uint32_t i = 0; i < nk; ++i) {
        out->rk[i] = ((uint32_t)key[4 * i] << 24) | ((uint32_t)key[4 * i + 1] << 16) |
                     ((uint32_t)key[4 * i + 2] << 8) | (uint32_t)key[4 * i + 3];
    }
    uint32_t rcon = 1u;
    for (uint32_t i = nk; i < total; ++i) {
        uint32_t t = out->rk[i - 1];
        if (i % nk == 0u) {  // branch on the public index only
            t = sub_word((t << 8) | (t >> 24)) ^ (rcon << 24);
            rcon = (rcon << 1) ^ (0x11Bu & (0u - (rcon >> 7)));
        } else if (nk > 6u && i % nk == 4u) {
            t = sub_word(t);
        }
        out->rk[i] = out->rk[i - nk] ^ t;
    }
    out->nr = nr;
}

/// 32 AES-CTR keystream blocks per thread:
///   ks[j] = AES_K(prefix || be32(ctr_first + j * ctr_stride)),  j = 0..31,
/// prefix0..2 = the first three little-endian words of a uint4 load of J0, ks[j] in memory
/// byte order (ks[j] ^ a uint4 load of data = CTR output).  Counter arithmetic is mod 2^32.
/// Table-free and branch-free on data and key (the only branch is on nr, the key length).
/// nr = k.nr, passed apart so that a kernel can give it from its launch parameters: a round count
/// the compiler sees as uniform keeps the round loop and the mask-table addresses on the uniform
/// datapath, where one read from shared memory would not (the key length is not secret).
template <bool TBL>
GCMX_AES_HD __forceinline__ void gcmx_aes_ctr_x32_impl(const GcmxAesKey* k, const uint32_t (&rk01)[8],
                                                   const uint32_t* tbl, uint32_t nr, uint32_t prefix0, uint32_t prefix1, uint32_t prefix2,
                                                   uint32_t ctr_first, uint32_t ctr_stride,
                                                   uint4 (&ks)[32]) {
    using namespace gcmx_aes_detail;
    uint32_t st[GCMX_AES_PLANES];
    // Counter planes, with round key 0 XORed in.  In "counter bit" numbering (bit q of the
    // 32-bit counter value) the key bits of state bytes 12..15 are simply the bits of
    // rk01[3] (big-endian word), and state plane 96 + 8m + b is counter bit 24 - 8m + b.
    const uint32_t one = opaque(nr != 0u ? 1u : 0u);  // see kmask()
    const uint32_t k3 = rk01[3];
    uint32_t cpl[32];
    if (ctr_stride == 32u) {
        // Closed form for stride 32 (the coalesced layout): ctr_j = c + 32j, so bits 0..4
        // are those of c; bits 5..9 are (beta + j) mod 32 with beta = bits 5..9 of c, i.e. the
        // plane of j-bit k rotated right by beta; bits 10..31 are those of c, or of c + 1024
        // for the j >= 32 - beta that carried.  About 30 ALU ops instead of a transpose.
        const uint32_t x0 = ctr_first ^ k3, x1 = (ctr_first + 1024u) ^ k3;
        const uint32_t beta = (ctr_first >> 5) & 31u;
        const uint32_t carried = ~(0xFFFFFFFFu >> beta);  // bit j set iff beta + j >= 32
        const uint32_t jbits[5] = {0xAAAAAAAAu, 0xCCCCCCCCu, 0xF0F0F0F0u, 0xFF00FF00u, 0xFFFF0000u};
#pragma unroll
        for (int q = 0; q < 5; ++q) cpl[q] = kmask(x0, q, one);
#pragma unroll
        for (int q = 5; q < 10; ++q) cpl[q] = kxor(rotr(jbits[q - 5], beta), kmask(k3, q, one), one);
#pragma unroll
        for (int q = 10; q < 32; ++q)
            cpl[q] = lop3<GCMX_LUT_SEL>(kmask(x1, q, one), kmask(x0, q, one), carried);
    } else {
        // Any stride: transpose the 32 counters; plane q = bit q of the counter.
#pragma unroll
        for (int j = 0; j < 32; ++j) st[96 + j] = ctr_first + (uint32_t)j * ctr_stride;
        transpose32<96>(st);
#pragma unroll
        for (int q = 0; q < 32; ++q) cpl[q] = kxor(st[96 + q], kmask(k3, q, one), one);
    }
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int b = 0; b < 8; ++b) st[96 + 8 * m + b] = cpl[24 - 8 * m + b];
    // Prefix bytes: constant over the 32 blocks (prefix XOR round key 0); round 1 handles
    // them once per thread instead of as 96 constant planes.
    const uint32_t cw[3] = {prefix0 ^ bswap32(rk01[0]), prefix1 ^ bswap32(rk01[1]),
                            prefix2 ^ bswap32(rk01[2])};
    uint32_t kw1[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) kw1[w] = opaque(bswap32(rk01[4 + w]) ^ GCMX_AES_SBOX_CONST4);
    round1(st, cw, kw1, one);
    if constexpr (TBL) rounds_t(st, tbl, nr);
    else rounds(st, *k, nr, 2u, one);
    transpose32<0>(st);
    transpose32<32>(st);
    transpose32<64>(st);
    transpose32<96>(st);
#pragma unroll
    for (int j = 0; j < 32; ++j) ks[j] = make_uint4(st[j], st[32 + j], st[64 + j], st[96 + j]);
}

/// Words 0..7 of an expanded key (round keys 0 and 1), the only ones the table-keyed variant reads.
GCMX_AES_HD __forceinline__ void gcmx_aes_round01(const GcmxAesKey& k, uint32_t (&rk01)[8]) {
#pragma unroll
    for (int i = 0; i < 8; ++i) rk01[i] = k.rk[i];
}

/// 32 AES-CTR keystream blocks per thread (see gcmx_aes_ctr_x32_impl for the layout):
///   ks[j] = AES_K(prefix || be32(ctr_first + j * ctr_stride)),  j = 0..31.
GCMX_AES_HD __forceinline__ void gcmx_aes_ctr_x32(const GcmxAesKey& k, uint32_t prefix0, uint32_t prefix1,
                                              uint32_t prefix2, uint32_t ctr_first, uint32_t ctr_stride,
                                              uint4 (&ks)[32]) {
    uint32_t rk01[8];
    gcmx_aes_round01(k, rk01);
    gcmx_aes_ctr_x32_impl<false>(&k, rk01, nullptr, k.nr, prefix0, prefix1, prefix2, ctr_first, ctr_stride, ks);
}

/// The same, with rounds 2..nr keyed from a mask table built by gcmx_aes_fill_masks for the key whose
/// round keys 0 and 1 are rk01 (words 0..7, see gcmx_aes_round01) and whose round count is nr: one
/// multiply-add per plane and round for AddRoundKey. Kernels pass rk01, the prefix and nr as values
/// read right before the call (see gcm_fused.cu) rather than a key reference.
GCMX_AES_HD __forceinline__ void gcmx_aes_ctr_x32_tbl(const uint32_t (&rk01)[8], const uint32_t* tbl, uint32_t nr,
                                                  uint32_t prefix0, uint32_t prefix1, uint32_t prefix2,
                                                  uint32_t ctr_first, uint32_t ctr_stride, uint4 (&ks)[32]) {
    gcmx_aes_ctr_x32_impl<true>(nullptr, rk01, tbl, nr, prefix0, prefix1, prefix2, ctr_first, ctr_stride, ks);
}

/// gcmx_aes_ctr_x32 as a callable of (ctr_first, ctr_stride, ks) for one key and J0 prefix (the form
/// the GCM lane functions of ghash.cuh take).
struct GcmxAesCtrKey {
    const GcmxAesKey* k;
    uint32_t p0, p1, p2;
    GCMX_AES_HD __forceinline__ void operator()(uint32_t ctr_first, uint32_t ctr_stride, uint4 (&ks)[32]) const {
        gcmx_aes_ctr_x32(*k, p0, p1, p2, ctr_first, ctr_stride, ks);
    }
};

/// Fill tbl[GCMX_AES_MASK_WORDS] for key k; entry i = 128 r + p is written by the thread with
/// tid == i mod nthreads (call from every thread of a block with tid = threadIdx.x,
/// nthreads = blockDim.x, then synchronize). Branch-free and table-free on the key: the
/// addresses depend only on i.
GCMX_AES_HD inline void gcmx_aes_fill_masks(const GcmxAesKey& k, uint32_t* tbl, uint32_t tid, uint32_t nthreads) {
    using namespace gcmx_aes_detail;
    for (uint32_t i = tid; i < 15u * GCMX_AES_PLANES; i += nthreads) {
        const uint32_t r = i / GCMX_AES_PLANES, p = i % GCMX_AES_PLANES;
        const uint32_t kw = bswap32(k.rk[4u * r + p / 32u]) ^ GCMX_AES_SBOX_CONST4;
        const uint32_t m = 0u - ((kw >> (p % 32u)) & 1u);
        tbl[2u * i] = m;
        tbl[2u * i + 1u] = 2u * m + 1u;
    }
}

#endif  // GCMX_AES_BS_CUH
