// ghash.cuh -- GHASH through POLYVAL on the GPU (and on the host, for the checks), shared by every kernel.
//
// ------------------------------------------------------------------------------------------------------
// Field and representation
// ------------------------------------------------------------------------------------------------------
// GF(2^128) with P = x^128 + x^127 + x^126 + x^121 + 1 (POLYVAL, RFC 8452). A 16-byte GHASH block X is
// the element whose 128-bit integer is X read BIG-endian (GcmxU128: hi = bytes 0..7, lo = bytes 8..15).
// A uint4 load gives the little-endian words x, y, z, w of bytes 0..3, 4..7, 8..11, 12..15, so
//   hi = bswap(x) << 32 | bswap(y),  lo = bswap(z) << 32 | bswap(w).
// The GHASH key becomes H' = mulX(H) (shift left one bit, XOR 0xC2..01 when the top bit falls out), and
// GHASH(X_1..X_n) = POLYVAL: S = 0; S = dot(S ^ X_i, H').
//
// dot(a, b) = a * b * x^-128 mod P:
//   1. D = a (x) b, the 256-bit carry-less product, D = (d3:d2:d1:d0) in 64-bit words, from the four
//      64x64 products (schoolbook; with clmad each partial product XORs into its word through the
//      accumulator input: 8 clmad per product);
//   2. Montgomery reduction with C = 0xC2 << 56 (x^-64 folding twice):
//        t = D0 (x) C: a0 = d1 ^ lo(t), a1 = d0 ^ hi(t);   u = a0 (x) C: b0 = a1 ^ lo(u), b1 = a0 ^ hi(u);
//        result = (d3 ^ b1 : d2 ^ b0).                      (4 clmad; in software: shifts, since C has
//      only bits 63, 62, 57 set: v (x) C = v<<63 ^ v<<62 ^ v<<57 over 128 bits.)
//   Reduction is linear, so the sum of several unreduced products is reduced once ("aggregated").
//
// Powers: Q_1 = H', Q_(k+1) = dot(Q_k, H'), dot(a, Q_k) = a * h^k, dot(Q_a, Q_b) = Q_(a+b),
// Q_0 = x^128 mod P = 0xC2000000000000000000000000000001 (unit of dot).
// The value of a run X_1..X_n is Z = sum X_i h^(n-i+1); runs combine as (A, B) -> dot(A, Q_len(B)) ^ B;
// leading zero blocks do not change a run's value.
//
// ------------------------------------------------------------------------------------------------------
// Lane layout (see gcmx_abi.h): a lane takes blocks v0, v0 + s, v0 + 2s, ... (s = 32 in the GHASH and
// fused kernels, s = g in batch units) and runs Horner four blocks at a time:
//   acc <- reduce(acc (x) Q_4s ^ X0 (x) Q_3s ^ X1 (x) Q_2s ^ X2 (x) Q_s) ^ X3
// so after J blocks acc = sum_j X_j h^(s(J-1-j)); multiplying by h^e for the lane's distance to the end
// of the run and XOR-ing all lanes gives the run's value.
//
// Virtual block index: a kernel's run is front-padded; virtual block v is real block r = v - pad when
// v >= pad, else an implicit zero block (never read). Real block nfull (when tail != 0) is the partial
// last block, read byte-wise and zero-padded. All branches are on public lengths and indices only.
// The multiply is constant-time in both variants: clmad, or integer multiplies on masked operands.
#ifndef GCMX_GHASH_CUH
#define GCMX_GHASH_CUH

#include "common.cuh"

/// C = 0xC2 << 56: the Montgomery reduction constant (x^-64 folding for P).
#define GCMX_POLYVAL_C 0xC200000000000000ull
/// Bit positions set in C (used by the software reduction): 63, 62, 57.
#define GCMX_C_BIT_A 63u
#define GCMX_C_BIT_B 62u
#define GCMX_C_BIT_C 57u

// Templates that call a caller-supplied AES callable: the host checks instantiate them with host-only
// callables, which nvcc would otherwise flag in a __host__ __device__ function.
#if defined(__CUDACC__)
#define GCMX_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define GCMX_EXEC_CHECK_DISABLE
#endif

#if defined(GCMX_HAVE_CLMAD) && GCMX_HAVE_CLMAD
#define GCMX_DEFAULT_CLMAD true
#else
#define GCMX_DEFAULT_CLMAD false
#endif

/// Unreduced 256-bit carry-less product accumulator (d0 least significant).
struct GcmxWide {
    uint64_t d0, d1, d2, d3;
};

GCMX_HD GcmxU128 gcmx_u128(uint64_t hi, uint64_t lo)
{
    GcmxU128 r;
    r.lo = lo;
    r.hi = hi;
    return r;
}

GCMX_HD GcmxU128 gcmx_xor128(GcmxU128 a, GcmxU128 b)
{
    return gcmx_u128(a.hi ^ b.hi, a.lo ^ b.lo);
}

/// 16 memory bytes (as a uint4 load) -> field element (big-endian integer).
GCMX_HD GcmxU128 gcmx_block_to_u128(uint4 v)
{
    uint64_t hi = ((uint64_t)gcmx_bswap32(v.x) << 32) | gcmx_bswap32(v.y);
    uint64_t lo = ((uint64_t)gcmx_bswap32(v.z) << 32) | gcmx_bswap32(v.w);
    return gcmx_u128(hi, lo);
}

/// Field element -> 16 memory bytes (as a uint4 to store).
GCMX_HD uint4 gcmx_u128_to_block(GcmxU128 a)
{
    return gcmx_u4(gcmx_bswap32((uint32_t)(a.hi >> 32)), gcmx_bswap32((uint32_t)a.hi),
                   gcmx_bswap32((uint32_t)(a.lo >> 32)), gcmx_bswap32((uint32_t)a.lo));
}

/// H' = mulX(H): shift left by one over 128 bits; XOR x^128 mod P = 0xC2..01 when the top bit fell out.
/// Constant-time (mask, no branch).
GCMX_HD GcmxU128 gcmx_mulx(GcmxU128 v)
{
    uint64_t mask = (uint64_t)0 - (v.hi >> 63);
    uint64_t hi = (v.hi << 1) | (v.lo >> 63);
    uint64_t lo = v.lo << 1;
    return gcmx_u128(hi ^ (mask & GCMX_Q0_HI), lo ^ (mask & GCMX_Q0_LO));
}

// ---------------------------------------------------------------------------------------------------
// Software carry-less multiply (constant-time; integer multiplies on operands with 3-bit holes).
// bmul32: x, y are split into four parts x_k = x & M_k (M_k has every 4th bit set, starting at bit k).
// A product x_a * y_b has its set-bit contributions only at positions = a + b (mod 4); a column receives
// at most 8 of them (8 bits per part), 8 < 16, so no carry reaches the next position of the same
// residue: masking the XOR of the four products of residue r with the 64-bit mask of residue r gives
// exactly the carry-less product bits of that residue.
// ---------------------------------------------------------------------------------------------------
#define GCMX_M32_0 0x11111111u
#define GCMX_M32_1 0x22222222u
#define GCMX_M32_2 0x44444444u
#define GCMX_M32_3 0x88888888u
#define GCMX_M64_0 0x1111111111111111ull
#define GCMX_M64_1 0x2222222222222222ull
#define GCMX_M64_2 0x4444444444444444ull
#define GCMX_M64_3 0x8888888888888888ull

GCMX_HD uint64_t gcmx_bmul32(uint32_t x, uint32_t y)
{
    uint64_t x0 = x & GCMX_M32_0, x1 = x & GCMX_M32_1, x2 = x & GCMX_M32_2, x3 = x & GCMX_M32_3;
    uint64_t y0 = y & GCMX_M32_0, y1 = y & GCMX_M32_1, y2 = y & GCMX_M32_2, y3 = y & GCMX_M32_3;
    uint64_t z0 = (x0 * y0) ^ (x1 * y3) ^ (x2 * y2) ^ (x3 * y1);
    uint64_t z1 = (x0 * y1) ^ (x1 * y0) ^ (x2 * y3) ^ (x3 * y2);
    uint64_t z2 = (x0 * y2) ^ (x1 * y1) ^ (x2 * y0) ^ (x3 * y3);
    uint64_t z3 = (x0 * y3) ^ (x1 * y2) ^ (x2 * y1) ^ (x3 * y0);
    return (z0 & GCMX_M64_0) | (z1 & GCMX_M64_1) | (z2 & GCMX_M64_2) | (z3 & GCMX_M64_3);
}

/// 64x64 -> 128 carry-less product by Karatsuba over 32-bit halves (3 bmul32).
GCMX_HD void gcmx_clmul64_soft(uint64_t a, uint64_t b, uint64_t& lo, uint64_t& hi)
{
    uint32_t a0 = (uint32_t)a, a1 = (uint32_t)(a >> 32);
    uint32_t b0 = (uint32_t)b, b1 = (uint32_t)(b >> 32);
    uint64_t p0 = gcmx_bmul32(a0, b0);
    uint64_t p2 = gcmx_bmul32(a1, b1);
    uint64_t p1 = gcmx_bmul32(a0 ^ a1, b0 ^ b1) ^ p0 ^ p2;
    lo = p0 ^ (p1 << 32);
    hi = p2 ^ (p1 >> 32);
}

#if GCMX_ON_DEVICE && defined(GCMX_HAVE_CLMAD) && GCMX_HAVE_CLMAD
/// clmad.lo.u64 d, a, b, c: d = low 64 bits of a (x) b, XOR c.
__device__ __forceinline__ uint64_t gcmx_clmad_lo(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t d;
    asm("clmad.lo.u64 %0, %1, %2, %3;" : "=l"(d) : "l"(a), "l"(b), "l"(c));
    return d;
}
/// clmad.hi.u64 d, a, b, c: d = high 64 bits of a (x) b, XOR c.
__device__ __forceinline__ uint64_t gcmx_clmad_hi(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t d;
    asm("clmad.hi.u64 %0, %1, %2, %3;" : "=l"(d) : "l"(a), "l"(b), "l"(c));
    return d;
}
#define GCMX_CLMAD_AVAILABLE 1
#else
#define GCMX_CLMAD_AVAILABLE 0
#endif

/// W ^= a (x) b (256-bit unreduced). CL selects clmad (on the device, when built with it) or software.
template <bool CL> GCMX_HD void gcmx_mul_acc(GcmxWide& w, GcmxU128 a, GcmxU128 b)
{
#if GCMX_CLMAD_AVAILABLE
    if (CL) {
        w.d0 = gcmx_clmad_lo(a.lo, b.lo, w.d0);
        w.d1 = gcmx_clmad_hi(a.lo, b.lo, w.d1);
        w.d1 = gcmx_clmad_lo(a.lo, b.hi, w.d1);
        w.d1 = gcmx_clmad_lo(a.hi, b.lo, w.d1);
        w.d2 = gcmx_clmad_hi(a.lo, b.hi, w.d2);
        w.d2 = gcmx_clmad_hi(a.hi, b.lo, w.d2);
        w.d2 = gcmx_clmad_lo(a.hi, b.hi, w.d2);
        w.d3 = gcmx_clmad_hi(a.hi, b.hi, w.d3);
        return;
    }
#endif
    // Karatsuba over 64-bit halves: 3 clmul64.
    uint64_t l0, l1, h0, h1, m0, m1;
    gcmx_clmul64_soft(a.lo, b.lo, l0, l1);
    gcmx_clmul64_soft(a.hi, b.hi, h0, h1);
    gcmx_clmul64_soft(a.lo ^ a.hi, b.lo ^ b.hi, m0, m1);
    m0 ^= l0 ^ h0;
    m1 ^= l1 ^ h1;
    w.d0 ^= l0;
    w.d1 ^= l1 ^ m0;
    w.d2 ^= h0 ^ m1;
    w.d3 ^= h1;
}

/// Montgomery reduction: D * x^-128 mod P (see the top comment).
template <bool CL> GCMX_HD GcmxU128 gcmx_reduce(GcmxWide w)
{
#if GCMX_CLMAD_AVAILABLE
    if (CL) {
        uint64_t a0 = gcmx_clmad_lo(w.d0, GCMX_POLYVAL_C, w.d1);
        uint64_t a1 = gcmx_clmad_hi(w.d0, GCMX_POLYVAL_C, w.d0);
        uint64_t b0 = gcmx_clmad_lo(a0, GCMX_POLYVAL_C, a1);
        uint64_t b1 = gcmx_clmad_hi(a0, GCMX_POLYVAL_C, a0);
        return gcmx_u128(w.d3 ^ b1, w.d2 ^ b0);
    }
#endif
    // v (x) C with C = 2^63 + 2^62 + 2^57: lo = v<<63 ^ v<<62 ^ v<<57, hi = v>>1 ^ v>>2 ^ v>>7.
    uint64_t d0 = w.d0;
    uint64_t tlo = (d0 << GCMX_C_BIT_A) ^ (d0 << GCMX_C_BIT_B) ^ (d0 << GCMX_C_BIT_C);
    uint64_t thi = (d0 >> (64u - GCMX_C_BIT_A)) ^ (d0 >> (64u - GCMX_C_BIT_B)) ^ (d0 >> (64u - GCMX_C_BIT_C));
    uint64_t a0 = w.d1 ^ tlo, a1 = d0 ^ thi;
    uint64_t ulo = (a0 << GCMX_C_BIT_A) ^ (a0 << GCMX_C_BIT_B) ^ (a0 << GCMX_C_BIT_C);
    uint64_t uhi = (a0 >> (64u - GCMX_C_BIT_A)) ^ (a0 >> (64u - GCMX_C_BIT_B)) ^ (a0 >> (64u - GCMX_C_BIT_C));
    uint64_t b0 = a1 ^ ulo, b1 = a0 ^ uhi;
    return gcmx_u128(w.d3 ^ b1, w.d2 ^ b0);
}

GCMX_HD GcmxWide gcmx_wide_zero()
{
    GcmxWide w;
    w.d0 = w.d1 = w.d2 = w.d3 = 0;
    return w;
}

/// dot(a, b) = a * b * x^-128 mod P.
template <bool CL> GCMX_HD GcmxU128 gcmx_dot(GcmxU128 a, GcmxU128 b)
{
    GcmxWide w = gcmx_wide_zero();
    gcmx_mul_acc<CL>(w, a, b);
    return gcmx_reduce<CL>(w);
}

/// Horner step over four blocks with one reduction: pw = {Q_s, Q_2s, Q_3s, Q_4s}.
/// acc' = acc*h^4s + x0*h^3s + x1*h^2s + x2*h^s + x3.
/// PW: anything with operator[](k) -> GcmxU128 (an array, or GcmxSmemPowers on the device).
template <bool CL, class PW>
GCMX_HD GcmxU128 gcmx_horner4(GcmxU128 acc, GcmxU128 x0, GcmxU128 x1, GcmxU128 x2, GcmxU128 x3, const PW& pw)
{
    GcmxWide w = gcmx_wide_zero();
    gcmx_mul_acc<CL>(w, acc, pw[3]);
    gcmx_mul_acc<CL>(w, x0, pw[2]);
    gcmx_mul_acc<CL>(w, x1, pw[1]);
    gcmx_mul_acc<CL>(w, x2, pw[0]);
    return gcmx_xor128(gcmx_reduce<CL>(w), x3);
}

/// Q_k from H' by square-and-multiply (k >= 1; k public). dot(Q_a, Q_b) = Q_(a+b).
template <bool CL> GCMX_HD GcmxU128 gcmx_power(GcmxU128 h_prime, uint64_t k)
{
    GcmxU128 result = gcmx_u128(GCMX_Q0_HI, GCMX_Q0_LO); // Q_0
    GcmxU128 base = h_prime;                             // Q_(2^i)
    while (k != 0) {
        if (k & 1u) result = gcmx_dot<CL>(result, base);
        k >>= 1;
        if (k != 0) base = gcmx_dot<CL>(base, base);
    }
    return result;
}

// ---------------------------------------------------------------------------------------------------
// Messages as virtual block sequences (front padding + zero-padded partial last block).
// ---------------------------------------------------------------------------------------------------
struct GcmxMsgView {
    uint64_t nfull; // number of full 16-byte blocks
    uint64_t pad;   // virtual zero blocks in front of real block 0
    uint32_t tail;  // bytes of the partial last block (0: none)
};

GCMX_HD GcmxMsgView gcmx_msg_view(uint64_t nbytes, uint64_t pad)
{
    GcmxMsgView m;
    m.nfull = nbytes / GCMX_BLOCK_BYTES;
    m.tail = (uint32_t)(nbytes % GCMX_BLOCK_BYTES);
    m.pad = pad;
    return m;
}

/// Total real blocks (the partial one included).
GCMX_HD uint64_t gcmx_msg_blocks(const GcmxMsgView& m)
{
    return m.nfull + (m.tail != 0u ? 1u : 0u);
}

/// True when the virtual blocks [v, v + len) are all full real blocks (warp-uniform fast-path test).
GCMX_HD bool gcmx_all_full(const GcmxMsgView& m, uint64_t v, uint64_t len)
{
    return v >= m.pad && v - m.pad + len <= m.nfull;
}

/// Load virtual block v of a message whose real block 0 is at `base`: zero for front padding, zero-padded
/// for the partial last block. v must be < pad + gcmx_msg_blocks().
GCMX_HD uint4 gcmx_load_virtual(const uint8_t* base, const GcmxMsgView& m, uint64_t v)
{
    if (v < m.pad) return gcmx_u4(0u, 0u, 0u, 0u);
    uint64_t r = v - m.pad;
    if (r < m.nfull) return gcmx_load16(base + r * GCMX_BLOCK_BYTES);
    return gcmx_load_partial(base + r * GCMX_BLOCK_BYTES, m.tail);
}

// ---------------------------------------------------------------------------------------------------
// GHASH lane: blocks v0 + 32 j, j = 0 .. nblk-1 (nblk a multiple of LOADS, LOADS a multiple of 4).
// Each step issues LOADS independent 16-byte loads before any multiply, so that many loads per thread
// are in flight; then hashes them in groups of four.
// ---------------------------------------------------------------------------------------------------
#define GCMX_GHASH_LOADS_PER_STEP 8u
/// L2 cache line (prefetch granularity) in bytes.
#define GCMX_L2_LINE_BYTES 128u

template <bool CL, bool CHECKED, uint32_t LOADS, class PW>
GCMX_HD GcmxU128 gcmx_ghash_lane(const uint8_t* base, const GcmxMsgView& m, uint64_t v0, uint32_t nblk, const PW& pw,
                                 GcmxU128 acc)
{
    static_assert(LOADS % GCMX_BLOCKS_PER_REDUCTION == 0, "whole reductions per step");
    for (uint32_t j = 0; j < nblk; j += LOADS) {
        uint4 raw[LOADS];
#if defined(__CUDACC__)
#pragma unroll
#endif
        for (uint32_t k = 0; k < LOADS; k++) {
            uint64_t v = v0 + (uint64_t)GCMX_WARP_SIZE * (j + k);
            if (CHECKED) {
                raw[k] = gcmx_load_virtual(base, m, v);
            } else {
                raw[k] = gcmx_load16(base + (v - m.pad) * GCMX_BLOCK_BYTES);
            }
        }
#if defined(__CUDACC__)
#pragma unroll
#endif
        for (uint32_t k = 0; k < LOADS; k += GCMX_BLOCKS_PER_REDUCTION) {
            acc = gcmx_horner4<CL>(acc, gcmx_block_to_u128(raw[k]), gcmx_block_to_u128(raw[k + 1]),
                                   gcmx_block_to_u128(raw[k + 2]), gcmx_block_to_u128(raw[k + 3]), pw);
        }
    }
    return acc;
}

// ---------------------------------------------------------------------------------------------------
// GCM lane chunk: one lane, one gcmx_aes_ctr_x32 call, blocks vb + i + g j (j = 0..31) of a message.
//   ks = aes(ctr_first + (vb + i - pad), g)      (counter of real block r is ctr_first + r, mod 2^32)
//   out block = in block ^ ks[j] for real blocks (only the real bytes of the partial last block),
//   hashed block = ciphertext (encrypt: the output, its padding bytes zeroed; decrypt: the input),
//   zero for front padding.  acc is the lane's Horner state with stride g (pw = {Q_g..Q_4g}).
// The caller skips chunks that are entirely front padding (acc is still zero there).
// `aes` is a callable aes(uint32_t ctr_first, uint32_t ctr_stride, uint4 (&ks)[32]) (on the device it
// wraps gcmx_aes_ctr_x32 with the key and J0 prefix).
// ---------------------------------------------------------------------------------------------------
GCMX_EXEC_CHECK_DISABLE
template <bool CL, bool DECRYPT, class Aes, class PW,
          uint32_t GROUP = DECRYPT ? GCMX_FUSED_DECRYPT_GROUP : GCMX_AES_BLOCKS_PER_CALL>
GCMX_HD GcmxU128 gcmx_gcm_lane_chunk(const Aes& aes, const uint8_t* in, uint8_t* out, const GcmxMsgView& m,
                                     uint64_t vb, uint32_t i, uint32_t g, uint32_t ctr_first, const PW& pw,
                                     GcmxU128 acc)
{
    uint4 ks[GCMX_AES_BLOCKS_PER_CALL];
    const uint64_t span = (uint64_t)g * GCMX_AES_BLOCKS_PER_CALL;
    const bool full = gcmx_all_full(m, vb, span);
#if GCMX_ON_DEVICE && GCMX_FUSED_PREFETCH
    // The unit's input is 32g contiguous blocks = 4g lines of 128 bytes: lane i asks L2 for lines
    // i + g k (k < 4) before the AES work, so the loads after it find the data in L2 (no registers used).
    if (full) {
        const uint8_t* region = in + (vb - m.pad) * GCMX_BLOCK_BYTES;
#pragma unroll
        for (uint32_t k = 0; k < GCMX_AES_BLOCKS_PER_CALL * GCMX_BLOCK_BYTES / GCMX_L2_LINE_BYTES; k++) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(region + (uint64_t)(i + g * k) * GCMX_L2_LINE_BYTES));
        }
    }
#endif
    // Real index of this lane's first block, mod 2^32 (negative inside the padding: those keystream
    // blocks are computed but never used).
    uint32_t r0 = (uint32_t)(vb + i) - (uint32_t)m.pad;
    aes(ctr_first + r0, g, ks);
    if (full) {
        // Fast path: every block of the unit is a full real block.
        const uint64_t rb = vb + i - m.pad;
        // Loads, XOR and hashing first, all stores after: `in` and `out` may be the same buffer, so a
        // store between two loads would keep the compiler from issuing the second load before the
        // first store (it cannot prove that the addresses differ) and every load would wait out the
        // memory latency alone. With no store in between, the 32 loads go out back to back; ks[]
        // holds the output until the stores.
        // Decryption hashes the input, so it holds more values at once; it works in groups of
        // GCMX_FUSED_DECRYPT_GROUP blocks (stores after each group) so that nothing spills.
        static_assert(GCMX_AES_BLOCKS_PER_CALL % GROUP == 0u && GROUP % GCMX_BLOCKS_PER_REDUCTION == 0u,
                      "whole groups of whole reductions");
#if defined(__CUDACC__)
#pragma unroll
#endif
        for (uint32_t b = 0; b < GCMX_AES_BLOCKS_PER_CALL; b += GROUP) {
#if defined(__CUDACC__)
#pragma unroll
#endif
            for (uint32_t j = b; j < b + GROUP; j += GCMX_BLOCKS_PER_REDUCTION) {
                GcmxU128 h[GCMX_BLOCKS_PER_REDUCTION];
#if defined(__CUDACC__)
#pragma unroll
#endif
                for (uint32_t k = 0; k < GCMX_BLOCKS_PER_REDUCTION; k++) {
                    const uint4 x = gcmx_load16(in + (rb + (uint64_t)g * (j + k)) * GCMX_BLOCK_BYTES);
                    ks[j + k] = gcmx_xor4(x, ks[j + k]);
                    h[k] = gcmx_block_to_u128(DECRYPT ? x : ks[j + k]);
                }
                acc = gcmx_horner4<CL>(acc, h[0], h[1], h[2], h[3], pw);
            }
#if defined(__CUDACC__)
#pragma unroll
#endif
            for (uint32_t j = b; j < b + GROUP; j++)
                gcmx_store16(out + (rb + (uint64_t)g * j) * GCMX_BLOCK_BYTES, ks[j]);
        }
        return acc;
    }
    // Checked path: front padding and/or the end of the message fall inside this unit. Fully unrolled
    // like the fast path, so that ks[] stays in registers (a dynamic index would move it to local memory).
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (uint32_t j = 0; j < GCMX_AES_BLOCKS_PER_CALL; j += GCMX_BLOCKS_PER_REDUCTION) {
        GcmxU128 h[GCMX_BLOCKS_PER_REDUCTION];
#if defined(__CUDACC__)
#pragma unroll
#endif
        for (uint32_t k = 0; k < GCMX_BLOCKS_PER_REDUCTION; k++) {
            uint64_t v = vb + i + (uint64_t)g * (j + k);
            uint4 hb = gcmx_u4(0u, 0u, 0u, 0u);
            if (v >= m.pad) {
                uint64_t r = v - m.pad;
                uint64_t off = r * GCMX_BLOCK_BYTES;
                if (r < m.nfull) {
                    uint4 x = gcmx_load16(in + off);
                    uint4 y = gcmx_xor4(x, ks[j + k]);
                    gcmx_store16(out + off, y);
                    hb = DECRYPT ? x : y;
                } else if (r == m.nfull && m.tail != 0u) {
                    uint4 x = gcmx_load_partial(in + off, m.tail);
                    uint4 y = gcmx_keep_bytes(gcmx_xor4(x, ks[j + k]), m.tail);
                    gcmx_store_partial(out + off, y, m.tail);
                    hb = DECRYPT ? x : y;
                }
            }
            h[k] = gcmx_block_to_u128(hb);
        }
        acc = gcmx_horner4<CL>(acc, h[0], h[1], h[2], h[3], pw);
    }
    return acc;
}

// ---------------------------------------------------------------------------------------------------
// Per-thread work of the GHASH kernel (shared by the kernel and the host emulation in the checks).
// Thread t = 32w + l of thread block `blk` (of `grid`), layout of gcmx_abi.h (GHASH constants):
// returns the thread's term dot(acc, Q_e(t)); the XOR of all terms of a block is its partial.
// ---------------------------------------------------------------------------------------------------
/// `pw` holds the stride powers {Q_32, Q_64, Q_96, Q_128} (table entries 0..3), read on every step: the
/// kernel passes a shared-memory view (fewer registers), the host checks an array.
template <bool CL, uint32_t LOADS, class PW>
GCMX_HD GcmxU128 gcmx_ghash_thread(const uint8_t* data, uint64_t nbytes, const GcmxU128* powers, const PW& pw,
                                   uint32_t blk, uint32_t grid, uint32_t t)
{
    const uint32_t w = t / GCMX_WARP_SIZE, l = t % GCMX_WARP_SIZE;
    const uint64_t nblocks = (nbytes + GCMX_BLOCK_BYTES - 1u) / GCMX_BLOCK_BYTES;
    const uint64_t total = (uint64_t)grid * GCMX_GHASH_SPAN;
    // A grid too small for the message is a host error; never read out of bounds: hash a prefix.
    const GcmxMsgView m = gcmx_msg_view(nbytes, total > nblocks ? total - nblocks : 0u);
    const uint64_t wbase = (uint64_t)blk * GCMX_GHASH_SPAN + (uint64_t)w * GCMX_GHASH_WARP_SPAN;
    GcmxU128 acc = gcmx_u128(0u, 0u);
    if (wbase + GCMX_GHASH_WARP_SPAN <= m.pad) {
        return acc; // the warp's whole run is front padding (warp-uniform)
    }
    if (gcmx_all_full(m, wbase, GCMX_GHASH_WARP_SPAN)) {
        acc = gcmx_ghash_lane<CL, false, LOADS>(data, m, wbase + l, GCMX_GHASH_BLOCKS_PER_LANE, pw, acc);
    } else {
        acc = gcmx_ghash_lane<CL, true, LOADS>(data, m, wbase + l, GCMX_GHASH_BLOCKS_PER_LANE, pw, acc);
    }
    return gcmx_dot<CL>(acc, powers[GCMX_POW_THREAD_BASE + t]);
}

// ---------------------------------------------------------------------------------------------------
// Per-thread work of the fused GCM kernel: thread t of block `blk` (of `grid`), fused constants of
// gcmx_abi.h. Warp w takes the run [blk*SPAN + w*WARP_SPAN, +WARP_SPAN) = GCMX_FUSED_CHUNKS_PER_WARP
// chunks of 1024 blocks; lane l takes blocks l + 32j of each chunk (stride 32 across chunks too, so one
// Horner state runs through all chunks). Index mapping: virtual v -> real r = v - pad, counter
// ctr_first + r. Returns the thread's term dot(acc, Q_e(t)).
// ---------------------------------------------------------------------------------------------------
GCMX_EXEC_CHECK_DISABLE
template <bool CL, bool DECRYPT, class Aes, class PW>
GCMX_HD GcmxU128 gcmx_gcm_thread(const Aes& aes, const uint8_t* in, uint8_t* out, uint64_t nbytes,
                                 uint32_t ctr_first, const GcmxU128* powers, const PW& pw, uint32_t blk,
                                 uint32_t grid, uint32_t t)
{
    const uint32_t w = t / GCMX_WARP_SIZE, l = t % GCMX_WARP_SIZE;
    const uint64_t nblocks = (nbytes + GCMX_BLOCK_BYTES - 1u) / GCMX_BLOCK_BYTES;
    const uint64_t total = (uint64_t)grid * GCMX_FUSED_SPAN;
    const GcmxMsgView m = gcmx_msg_view(nbytes, total > nblocks ? total - nblocks : 0u);
    const uint64_t wbase = (uint64_t)blk * GCMX_FUSED_SPAN + (uint64_t)w * GCMX_FUSED_WARP_SPAN;
    GcmxU128 acc = gcmx_u128(0u, 0u);
    if (wbase + GCMX_FUSED_WARP_SPAN <= m.pad) {
        return acc;
    }
    for (uint32_t c = 0; c < GCMX_FUSED_CHUNKS_PER_WARP; c++) {
        const uint64_t vb = wbase + (uint64_t)c * GCMX_WARP_CHUNK;
        if (vb + GCMX_WARP_CHUNK <= m.pad) continue; // all padding: acc is still zero
        acc = gcmx_gcm_lane_chunk<CL, DECRYPT>(aes, in, out, m, vb, l, GCMX_WARP_SIZE, ctr_first, pw, acc);
    }
    return gcmx_dot<CL>(acc, powers[GCMX_POW_THREAD_BASE + t]);
}

// ---------------------------------------------------------------------------------------------------
// Per-key powers and whole byte strings (the device-resident batch kernel, gcm_dbatch.cu, and the key
// powers kernel, aes_key.cu; shared with the host emulation). `Aes` is a callable like the one
// gcmx_gcm_lane_chunk takes, for the key in question.
// ---------------------------------------------------------------------------------------------------

/// Key-powers kernel, one key: H = AES_K(0^128), H' = mulX(H), q[k-1] = Q_k, pow2[i] = Q_(2^i).
GCMX_EXEC_CHECK_DISABLE
template <bool CL, class Aes> GCMX_HD void gcmx_key_powers_thread(const Aes& aes, GcmxKeyPowers& kp)
{
    uint4 ks[GCMX_AES_BLOCKS_PER_CALL];
    aes(0u, 1u, ks); // ks[0] = AES_K(0^128) = H (the caller's prefix is zero)
    const GcmxU128 hp = gcmx_mulx(gcmx_block_to_u128(ks[0]));
    GcmxU128 q = hp;
    kp.q[0] = q;
    for (uint32_t k = 1; k < GCMX_KEY_POW_LINEAR; k++) {
        q = gcmx_dot<CL>(q, hp);
        kp.q[k] = q;
    }
    q = hp;
    kp.pow2[0] = q;
    for (uint32_t i = 1; i < GCMX_KEY_POW_POW2; i++) {
        q = gcmx_dot<CL>(q, q);
        kp.pow2[i] = q;
    }
    // ks[] held H: clear it (registers or, in a host build, the stack).
    for (uint32_t j = 0; j < GCMX_AES_BLOCKS_PER_CALL; j++) ks[j] = gcmx_u4(0u, 0u, 0u, 0u);
}

/// a h^e for a public e < 2^32, by the bits of e (pow2[i] = Q_(2^i)).
template <bool CL> GCMX_HD GcmxU128 gcmx_times_hpow(GcmxU128 a, const GcmxKeyPowers& kp, uint64_t e)
{
    for (uint32_t i = 0; i < GCMX_KEY_POW_POW2 && (e >> i) != 0u; i++) {
        if ((e >> i) & 1u) a = gcmx_dot<CL>(a, kp.pow2[i]);
    }
    return a;
}

/// The POLYVAL value sum X_i h^(nb-i+1) of the `len` bytes at p (zero-padded to nb whole blocks): Horner
/// with stride 1, four blocks per reduction, front-padded to a multiple of four, then one multiply by h.
/// ALIGNED: p is 16-byte aligned and read with 16-byte loads; else byte by byte (nonces at any offset).
template <bool CL, bool ALIGNED>
GCMX_HD GcmxU128 gcmx_hash_bytes(const uint8_t* p, uint64_t len, const GcmxKeyPowers& kp)
{
    const uint64_t nb = (len + GCMX_BLOCK_BYTES - 1u) / GCMX_BLOCK_BYTES;
    if (nb == 0u) return gcmx_u128(0u, 0u);
    const uint64_t pad = (GCMX_BLOCKS_PER_REDUCTION - nb % GCMX_BLOCKS_PER_REDUCTION) % GCMX_BLOCKS_PER_REDUCTION;
    const GcmxMsgView m = gcmx_msg_view(len, pad);
    const GcmxU128 pw1[GCMX_BLOCKS_PER_REDUCTION] = {kp.q[0], kp.q[1], kp.q[2], kp.q[3]};
    GcmxU128 s = gcmx_u128(0u, 0u);
    for (uint64_t v = 0; v < nb + pad; v += GCMX_BLOCKS_PER_REDUCTION) {
        GcmxU128 x[GCMX_BLOCKS_PER_REDUCTION];
#if defined(__CUDACC__)
#pragma unroll
#endif
        for (uint32_t k = 0; k < GCMX_BLOCKS_PER_REDUCTION; k++) {
            uint4 b;
            if (ALIGNED) {
                b = gcmx_load_virtual(p, m, v + k);
            } else {
                const uint64_t vk = v + k;
                b = gcmx_u4(0u, 0u, 0u, 0u);
                if (vk >= m.pad) {
                    const uint64_t r = vk - m.pad;
                    const uint64_t left = len - r * GCMX_BLOCK_BYTES;
                    b = gcmx_load_partial(p + r * GCMX_BLOCK_BYTES, left < GCMX_BLOCK_BYTES ? (uint32_t)left : GCMX_BLOCK_BYTES);
                }
            }
            x[k] = gcmx_block_to_u128(b);
        }
        s = gcmx_horner4<CL>(s, x[0], x[1], x[2], x[3], pw1);
    }
    return gcmx_dot<CL>(s, kp.q[0]); // Horner leaves the last block unmultiplied
}

/// Warp-strided power table entry i (see gcmx_abi.h) from H'.
template <bool CL>
GCMX_HD GcmxU128 gcmx_strided_power(GcmxU128 h_prime, uint32_t threads, uint64_t warp_span, uint32_t i)
{
    return gcmx_power<CL>(h_prime, gcmx_strided_pow_exponent(threads, warp_span, i));
}

#if defined(__CUDACC__)
/// XOR of v over the 32 lanes of a warp (all lanes must call).
__device__ __forceinline__ GcmxU128 gcmx_warp_xor(GcmxU128 v)
{
#pragma unroll
    for (uint32_t off = GCMX_WARP_SIZE / 2u; off != 0u; off >>= 1) {
        v.lo ^= __shfl_xor_sync(GCMX_FULL_WARP_MASK, v.lo, off);
        v.hi ^= __shfl_xor_sync(GCMX_FULL_WARP_MASK, v.hi, off);
    }
    return v;
}

/// Zero `nwords` 32-bit words of shared memory at p, the words split over the block's threads (call from
/// every thread). Volatile stores: shared memory dies with the block, so plain stores to it at the end of
/// a kernel are dead stores a compiler may drop, and the next block on the SM could read what is left.
/// The thread index and block size are read afresh (volatile asm), so that ptxas cannot keep address
/// arithmetic shared with the kernel's start alive across the whole kernel for this epilogue.
__device__ __forceinline__ void gcmx_smem_wipe(void* p, uint32_t nwords)
{
    uint32_t tid, nthreads;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
    asm volatile("mov.u32 %0, %%ntid.x;" : "=r"(nthreads));
    volatile uint32_t* w = reinterpret_cast<volatile uint32_t*>(p);
    for (uint32_t i = tid; i < nwords; i += nthreads) w[i] = 0u;
}

/// XOR of v over all threads of a block of NWARPS warps; the result is valid in thread 0. Contains a
/// __syncthreads that every thread passes after its own work, so shared memory that only that work
/// read can be wiped after this returns. Thread 0 wipes the per-warp values after reading them.
template <uint32_t NWARPS> __device__ __forceinline__ GcmxU128 gcmx_block_xor(GcmxU128 v)
{
    __shared__ GcmxU128 per_warp[NWARPS];
    v = gcmx_warp_xor(v);
    const uint32_t w = threadIdx.x / GCMX_WARP_SIZE, l = threadIdx.x % GCMX_WARP_SIZE;
    if (l == 0u) per_warp[w] = v;
    __syncthreads();
    GcmxU128 r = gcmx_u128(0u, 0u);
    if (threadIdx.x == 0u) {
#pragma unroll
        for (uint32_t k = 0; k < NWARPS; k++) r = gcmx_xor128(r, per_warp[k]);
        volatile uint32_t* pw = reinterpret_cast<volatile uint32_t*>(per_warp);
#pragma unroll
        for (uint32_t k = 0; k < NWARPS * 4u; k++) pw[k] = 0u;
    }
    return r;
}

/// Stride powers in shared memory, read through a volatile pointer on every use, so that ptxas does not
/// keep all four (16 registers) live across the GHASH loop or across the AES call of the fused kernel: a
/// broadcast LDS per use is cheaper than the registers. Power k is at p + k STRIDE (STRIDE 1: one table
/// for the block, loaded by gcmx_load_stride_powers; the device-batch kernel keeps one column per thread).
template <uint32_t STRIDE> struct GcmxSmemPowersT {
    const GcmxU128* p;
    __device__ __forceinline__ GcmxU128 operator[](uint32_t k) const
    {
        // One 16-byte shared load per use: ld.volatile keeps ptxas from hoisting it out of the loop.
        uint64_t lo, hi;
        asm volatile("ld.volatile.shared.v2.u64 {%0, %1}, [%2];"
                     : "=l"(lo), "=l"(hi)
                     : "r"((uint32_t)__cvta_generic_to_shared(p + k * STRIDE)));
        return gcmx_u128(hi, lo);
    }
};
using GcmxSmemPowers = GcmxSmemPowersT<1u>;

/// Copy table entries 0..3 (the stride powers) to shared memory; all threads of the block must call.
__device__ __forceinline__ GcmxSmemPowers gcmx_load_stride_powers(GcmxU128 (&smem)[GCMX_BLOCKS_PER_REDUCTION],
                                                                  const GcmxU128* powers)
{
    if (threadIdx.x < GCMX_BLOCKS_PER_REDUCTION) smem[threadIdx.x] = powers[GCMX_POW_STRIDE_32 + threadIdx.x];
    __syncthreads(); // also orders these stores before the asm loads of GcmxSmemPowers
    const GcmxSmemPowers pw = {smem};
    return pw;
}

/// The GHASH kernel body (gcmx_ghash_clmad: CL = true, gcmx_ghash_soft: CL = false).
template <bool CL, uint32_t LOADS> __device__ __forceinline__ void gcmx_ghash_kernel_body(const GcmxGhashParams& p)
{
    __shared__ GcmxU128 stride_pow[GCMX_BLOCKS_PER_REDUCTION];
    const GcmxU128* powers = reinterpret_cast<const GcmxU128*>(p.powers);
    const GcmxSmemPowers pw = gcmx_load_stride_powers(stride_pow, powers);
    const GcmxU128 term = gcmx_ghash_thread<CL, LOADS>(reinterpret_cast<const uint8_t*>(p.data), p.nbytes, powers, pw,
                                                       blockIdx.x, gridDim.x, threadIdx.x);
    const GcmxU128 z = gcmx_block_xor<GCMX_GHASH_WARPS>(term);
    gcmx_smem_wipe(stride_pow, sizeof stride_pow / 4u); // powers of H
    if (threadIdx.x == 0u) reinterpret_cast<GcmxU128*>(p.partials)[blockIdx.x] = z;
}
#endif

#endif // GCMX_GHASH_CUH
