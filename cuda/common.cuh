// common.cuh -- portability layer shared by the gcmx kernels and the host-side checks.
//
// Math: none here; this file only provides
//   * GCMX_HD / GCMX_DEV / GCMX_INLINE qualifiers, so that the GHASH/GCM math in ghash.cuh compiles as
//     __host__ __device__ under nvcc and as plain C++ under g++ (cuda/tests/ghash_host_check.cu);
//   * `uint4` for plain C++ builds (same layout as CUDA's: four 32-bit words x, y, z, w at offsets 0, 4,
//     8, 12, i.e. the little-endian words of 16 memory bytes);
//   * 32-bit byte swap (PRMT on the device), 16-byte block loads and stores, and byte-wise loads/stores
//     for the last partial block of a message.
// Memory layout: a 16-byte block at address p (16-byte aligned) is read as one uint4 (p must be 16-byte
// aligned: every kernel in gcmx_abi.h requires it).
#ifndef GCMX_COMMON_CUH
#define GCMX_COMMON_CUH

#include <stdint.h>
#include <string.h>

#include "gcmx_abi.h"

#if defined(__CUDACC__)
#define GCMX_HD __host__ __device__ __forceinline__
#define GCMX_DEV __device__ __forceinline__
#else
#define GCMX_HD inline
#define GCMX_DEV inline
struct uint4 {
    uint32_t x, y, z, w;
};
#endif

#if defined(__CUDA_ARCH__)
#define GCMX_ON_DEVICE 1
#else
#define GCMX_ON_DEVICE 0
#endif

#if defined(__CUDACC__)
/// One 32-bit load from shared memory that the compiler may neither hoist nor keep in a register:
/// for per-block constants read where they are used, in kernels whose every register is taken.
__device__ __forceinline__ uint32_t gcmx_lds_volatile(const uint32_t* p)
{
    uint32_t v;
    asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v) : "r"((uint32_t)__cvta_generic_to_shared(p)));
    return v;
}
#endif

/// Bytes per GHASH/AES block.
#define GCMX_BLOCK_BYTES 16u
/// Shuffle mask naming all 32 lanes of a warp.
#define GCMX_FULL_WARP_MASK 0xffffffffu
/// A 32-bit word with all bits set (byte masks of a partial block).
#define GCMX_ALL_ONES32 0xffffffffu

/// Byte swap of a 32-bit word (PRMT selector 0x0123 reverses the four bytes).
#define GCMX_PRMT_BSWAP32 0x0123u
GCMX_HD uint32_t gcmx_bswap32(uint32_t x)
{
#if GCMX_ON_DEVICE
    return __byte_perm(x, 0u, GCMX_PRMT_BSWAP32);
#else
    return __builtin_bswap32(x);
#endif
}

GCMX_HD uint4 gcmx_u4(uint32_t x, uint32_t y, uint32_t z, uint32_t w)
{
    uint4 r;
    r.x = x;
    r.y = y;
    r.z = z;
    r.w = w;
    return r;
}

GCMX_HD uint4 gcmx_xor4(uint4 a, uint4 b)
{
    return gcmx_u4(a.x ^ b.x, a.y ^ b.y, a.z ^ b.z, a.w ^ b.w);
}

/// Load one full 16-byte block (p 16-byte aligned).
GCMX_HD uint4 gcmx_load16(const uint8_t* p)
{
#if GCMX_ON_DEVICE
    return *reinterpret_cast<const uint4*>(p);
#else
    uint4 r;
    memcpy(&r, p, sizeof r);
    return r;
#endif
}

/// Store one full 16-byte block (p 16-byte aligned).
GCMX_HD void gcmx_store16(uint8_t* p, uint4 v)
{
#if GCMX_ON_DEVICE
    *reinterpret_cast<uint4*>(p) = v;
#else
    memcpy(p, &v, sizeof v);
#endif
}

/// Byte k (0..15) of a block held as a uint4 in memory order.
GCMX_HD uint32_t gcmx_u4_word(uint4 v, uint32_t w)
{
    return w == 0u ? v.x : (w == 1u ? v.y : (w == 2u ? v.z : v.w));
}

/// Load the first n (<= 16) bytes of a block byte by byte (any alignment), the rest zero: the last partial
/// block of a message, or a nonce at any offset (public length: branching on n is fine).
GCMX_HD uint4 gcmx_load_partial(const uint8_t* p, uint32_t n)
{
    uint32_t w0 = 0u, w1 = 0u, w2 = 0u, w3 = 0u; // scalars, not an array: stays in registers
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (uint32_t k = 0; k < GCMX_BLOCK_BYTES; k++) {
        uint32_t b = k < n ? (uint32_t)p[k] << (8u * (k % 4u)) : 0u;
        if (k < 4u) w0 |= b;
        else if (k < 8u) w1 |= b;
        else if (k < 12u) w2 |= b;
        else w3 |= b;
    }
    return gcmx_u4(w0, w1, w2, w3);
}

/// Store the first n (< 16) bytes of a block.
GCMX_HD void gcmx_store_partial(uint8_t* p, uint4 v, uint32_t n)
{
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (uint32_t k = 0; k < GCMX_BLOCK_BYTES; k++) {
        if (k < n) p[k] = (uint8_t)(gcmx_u4_word(v, k / 4u) >> (8u * (k % 4u)));
    }
}

/// Mask of the bytes < n within the 32-bit word holding bytes lo..lo+3.
GCMX_HD uint32_t gcmx_keep_mask(uint32_t n, uint32_t lo)
{
    return n >= lo + 4u ? GCMX_ALL_ONES32 : (n <= lo ? 0u : (GCMX_ALL_ONES32 >> (8u * (lo + 4u - n))));
}

/// Zero the bytes n..15 of a block (n < 16), keep bytes 0..n-1.
GCMX_HD uint4 gcmx_keep_bytes(uint4 v, uint32_t n)
{
    return gcmx_u4(v.x & gcmx_keep_mask(n, 0u), v.y & gcmx_keep_mask(n, 4u), v.z & gcmx_keep_mask(n, 8u),
                   v.w & gcmx_keep_mask(n, 12u));
}

#endif // GCMX_COMMON_CUH
