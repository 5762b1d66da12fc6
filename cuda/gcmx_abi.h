/*
 * gcmx_abi.h -- the binary interface between the gcmx CUDA kernels (the .cu files under cuda/) and the Rust driver
 * (crates/gcmx-cuda). Plain C, no CUDA types: every struct here is meant to be mirrored one-to-one by a
 * `#[repr(C)]` Rust struct (fixed-width integers, explicit padding, sizes checked by static asserts below).
 * Device addresses are passed as `uint64_t` (a CUdeviceptr), never as C pointers, so Rust mirrors them as `u64`.
 *
 * ===================================================================================================
 * BUILD (how crates/gcmx-cuda/build.rs compiles the kernels: ONE fatbin from ONE translation unit)
 * ===================================================================================================
 *   cuda/gcmx_all.cu #includes every kernel file (ghash_clmad.cu, ghash_soft.cu, gcm_fused.cu,
 *   gcm_batch.cu, aes_key.cu, aes_ctr.cu, bandwidth.cu). Compile only that file:
 *
 *     nvcc -fatbin -O3 -std=c++17 -DGCMX_HAVE_CLMAD=1 \
 *          -gencode arch=compute_80,code=sm_80  -gencode arch=compute_86,code=sm_86 \
 *          -gencode arch=compute_89,code=sm_89  -gencode arch=compute_90,code=sm_90 \
 *          -gencode arch=compute_100,code=sm_100 -gencode arch=compute_120,code=sm_120 \
 *          -gencode arch=compute_120,code=compute_120 \
 *          -I cuda -o $OUT_DIR/gcmx.fatbin cuda/gcmx_all.cu
 *
 *   -DGCMX_HAVE_CLMAD=1 only when `nvcc --version` reports release >= 13.3 (clmad.{lo,hi}.u64 is PTX that
 *   older nvcc rejects; newer ones emit native CLMAD.LO/CLMAD.HI SASS for every target above, which
 *   cuobjdump --dump-sass shows). Without the macro the whole fatbin is built with the software carry-less
 *   multiply: the kernel `gcmx_ghash_clmad` is then ABSENT from the module, the fused and batch kernels use
 *   the software multiply, and `gcmx_abi_info` reports have_clmad = 0. Add `-lineinfo` for profiling and
 *   `-Xptxas -v` to see registers and spills. Rebuild when any .cu, .cuh or .h file under cuda/ changes.
 *   Host-side tests (cuda/tests/ghash_host_check.cu) compile with nvcc -x cu or with plain g++ -x c++.
 *
 * ===================================================================================================
 * CONVENTIONS (see also the top comments of ghash.cuh and each kernel file)
 * ===================================================================================================
 * - Data buffers are bytes, processed as 16-byte blocks loaded as uint4. Every data, AAD and output
 *   address passed to a kernel MUST be 16-byte aligned (cust allocations are 256-byte aligned; a Rust
 *   caller passing a sub-slice must check). nbytes need not be a multiple of 16: the last partial block
 *   is zero-padded for GHASH, and only its real bytes are read and written.
 * - Field elements: GcmxU128 { lo, hi } = the 16-byte GHASH block read as a big-endian 128-bit integer
 *   (hi = bytes 0..7 big-endian, lo = bytes 8..15 big-endian). Rust: value = (hi as u128) << 64 | lo,
 *   i.e. u128::from_be_bytes(block) -- the domain of gcmx_core::field.
 * - Montgomery powers: Q_k = gcmx_core::field::HashKey::power(k) (Q_1 = H' = mulX(H), Q_(k+1) = dot(Q_k, H'),
 *   dot(a, Q_k) = a * h^k). Q_0 = GCMX_Q0 (x^128 mod P, the unit of dot: dot(a, Q_0) = a).
 * - Partials: a GHASH or fused kernel writes one GcmxU128 per CUDA thread block j = the POLYVAL value
 *   Z_j = sum X_i h^(n-i+1) of its run of exactly SPAN blocks. The message of nblocks = ceil(nbytes/16)
 *   blocks is padded with pad = grid*SPAN - nblocks zero blocks at the FRONT (kernels compute pad from
 *   gridDim.x themselves; the padding is never read from memory). Host: S = fold(S = dot(S, Q_SPAN) ^ Z_j)
 *   over j = 0..grid-1 (or gcmx_core::combine::tree_reduce with Partial{Z_j, SPAN}); leading zero blocks
 *   do not change the value, so S = GHASH value of the real blocks.
 * - Grid: grid = ceil(nblocks / SPAN) (>= 1). A larger grid is also correct (more front padding).
 * - Secrets never travel in launch parameters: the driver keeps copies of every parameter block that
 *   nobody can wipe. Expanded keys, power tables and J0 (secret for nonces that are not 12 bytes) are in
 *   device memory that the host wipes after use; parameters carry only their device addresses, lengths
 *   and counts. Kernels that copy secrets into shared memory clear it before they exit.
 * - CTR: keystream for real block r (0-based in this launch) = AES_K(J0[0..12] || be32(ctr_first + r)),
 *   additions mod 2^32. For a whole message ctr_first = ctr0 + 1 with ctr0 = be32(J0[12..16]); for a
 *   chunk starting at block b of a message, ctr_first = ctr0 + 1 + b (chunks other than the last must be
 *   whole blocks).
 */
#ifndef GCMX_ABI_H
#define GCMX_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Helper functions below are plain C for the host; under nvcc they are also device functions. */
#if defined(__CUDACC__)
#define GCMX_ABI_FN static inline __host__ __device__
#else
#define GCMX_ABI_FN static inline
#endif

/* Bumped whenever a struct, constant or kernel signature below changes. */
#define GCMX_ABI_VERSION 2u

/* ---------------------------------------------------------------------------------------------- */
/* Basic types                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

/** POLYVAL-domain field element (see conventions). 16 bytes, lo first. */
typedef struct GcmxU128 {
    uint64_t lo; /* bytes 8..15 of the block, big-endian */
    uint64_t hi; /* bytes 0..7 of the block, big-endian */
} GcmxU128;

/** Q_0 = x^128 mod P = 0xC2000000000000000000000000000001: dot(a, Q_0) = a. */
#define GCMX_Q0_HI 0xC200000000000000ull
#define GCMX_Q0_LO 0x0000000000000001ull

#ifndef GCMX_AES_KEY_DEFINED
#define GCMX_AES_KEY_DEFINED 1
/** FIPS-197 expanded AES key: rk[i] = w[i] (w[0] = key bytes 0..3 as a big-endian word); nr = 10/12/14.
 *  4*(nr+1) words are used, the rest is zero. 244 bytes, alignment 4. Lives in device memory only: built
 *  there by gcmx_aes_expand_keys (aes_key.cu) from the raw key. (aes_bs.cuh uses this definition: it must
 *  include gcmx_abi.h rather than define its own.) */
typedef struct GcmxAesKey {
    uint32_t rk[60];
    uint32_t nr;
} GcmxAesKey;
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Warp-strided GHASH layout shared by the GHASH and the fused GCM kernels                          */
/* ---------------------------------------------------------------------------------------------- */
/*
 * A thread block of T threads (W = T/32 warps) hashes SPAN = W * WARP_SPAN consecutive (virtual) blocks.
 * Warp w takes the run [w*WARP_SPAN, (w+1)*WARP_SPAN); lane l of it takes blocks l, l+32, l+64, ... of
 * that run (each warp-wide 16-byte load reads 512 contiguous bytes). Each lane runs Horner with stride 32,
 * four blocks per Montgomery reduction:  acc = acc*h^128 + X0*h^96 + X1*h^64 + X2*h^32 + X3.
 * At the end thread t = 32w + l multiplies its acc by h^e(t), e(t) = (W-1-w)*WARP_SPAN + 32 - l, and the
 * thread block XOR-reduces all T products: that is the block's partial Z_j.
 *
 * Power table for this layout (device memory, GcmxU128 entries, read-only by the kernel):
 *   table[0] = Q_32, table[1] = Q_64, table[2] = Q_96, table[3] = Q_128        (GCMX_POW_STRIDE_*)
 *   table[GCMX_POW_THREAD_BASE + t] = Q_e(t) for t = 0..T-1
 * gcmx_strided_pow_exponent() below gives the exponent of every entry; the kernel `gcmx_fill_powers`
 * can fill a table on the device from H' alone (so the host need not compute Q_e for large e).
 */
#define GCMX_WARP_SIZE 32u
#define GCMX_POW_STRIDE_32 0u
#define GCMX_POW_STRIDE_64 1u
#define GCMX_POW_STRIDE_96 2u
#define GCMX_POW_STRIDE_128 3u
#define GCMX_POW_THREAD_BASE 4u
/** Blocks hashed per Montgomery reduction (aggregated reduction). */
#define GCMX_BLOCKS_PER_REDUCTION 4u

/* -- GHASH-only kernels (ghash_clmad.cu: gcmx_ghash_clmad; ghash_soft.cu: gcmx_ghash_soft) -- */
#define GCMX_GHASH_THREADS 256u                   /* threads per thread block */
#define GCMX_GHASH_WARPS (GCMX_GHASH_THREADS / GCMX_WARP_SIZE)
#define GCMX_GHASH_BLOCKS_PER_LANE 128u           /* 16-byte blocks per thread */
#define GCMX_GHASH_WARP_SPAN (GCMX_GHASH_BLOCKS_PER_LANE * GCMX_WARP_SIZE) /* 4096 blocks */
#define GCMX_GHASH_SPAN (GCMX_GHASH_WARPS * GCMX_GHASH_WARP_SPAN)          /* 32768 blocks = 512 KiB */
#define GCMX_GHASH_POW_COUNT (GCMX_POW_THREAD_BASE + GCMX_GHASH_THREADS)   /* 260 entries */

/* -- fused GCM kernels (gcm_fused.cu: gcmx_gcm_encrypt, gcmx_gcm_decrypt) --
 * Each lane processes chunks of 32 blocks per gcmx_aes_ctr_x32 call; a warp chunk is 1024 blocks. */
#define GCMX_AES_BLOCKS_PER_CALL 32u              /* blocks per lane per gcmx_aes_ctr_x32 call */
#define GCMX_WARP_CHUNK (GCMX_AES_BLOCKS_PER_CALL * GCMX_WARP_SIZE)        /* 1024 blocks */
/* THREADS / CHUNKS_PER_WARP / MIN_BLOCKS may be overridden with -D only by experiments (cuda/tests/sweep);
 * the Rust driver mirrors the defaults (abi.rs) and checks them at load time (gcmx_abi_info). */
#ifndef GCMX_FUSED_THREADS
#define GCMX_FUSED_THREADS 128u
#endif
/** Minimum resident thread blocks per SM requested from ptxas (__launch_bounds__), i.e. a register cap. */
#ifndef GCMX_FUSED_MIN_BLOCKS
#define GCMX_FUSED_MIN_BLOCKS 1u
#endif
#define GCMX_FUSED_WARPS (GCMX_FUSED_THREADS / GCMX_WARP_SIZE)
/** 1: each lane asks L2 for its unit's input lines before the AES work (prefetch.global.L2). */
#ifndef GCMX_FUSED_PREFETCH
#define GCMX_FUSED_PREFETCH 1
#endif
/** Blocks per load/store group of the fused decrypt fast path (a divisor of 32, multiple of 4). */
#ifndef GCMX_FUSED_DECRYPT_GROUP
#define GCMX_FUSED_DECRYPT_GROUP 16u
#endif
#ifndef GCMX_FUSED_CHUNKS_PER_WARP
#define GCMX_FUSED_CHUNKS_PER_WARP 4u
#endif
#define GCMX_FUSED_WARP_SPAN (GCMX_FUSED_CHUNKS_PER_WARP * GCMX_WARP_CHUNK) /* 4096 blocks */
#define GCMX_FUSED_SPAN (GCMX_FUSED_WARPS * GCMX_FUSED_WARP_SPAN)          /* 16384 blocks = 256 KiB */
#define GCMX_FUSED_POW_COUNT (GCMX_POW_THREAD_BASE + GCMX_FUSED_THREADS)   /* 132 entries */

/** Exponent k of entry i of a warp-strided power table for `threads` threads per block and runs of
 *  `warp_span` blocks per warp (table[i] = Q_k). Valid for i < GCMX_POW_THREAD_BASE + threads. */
GCMX_ABI_FN uint64_t gcmx_strided_pow_exponent(uint32_t threads, uint64_t warp_span, uint32_t i)
{
    if (i < GCMX_POW_THREAD_BASE) {
        return (uint64_t)GCMX_WARP_SIZE * (i + 1u); /* 32, 64, 96, 128 */
    }
    {
        uint32_t t = i - GCMX_POW_THREAD_BASE;
        uint32_t w = t / GCMX_WARP_SIZE, l = t % GCMX_WARP_SIZE;
        uint32_t nwarps = threads / GCMX_WARP_SIZE;
        return (uint64_t)(nwarps - 1u - w) * warp_span + (GCMX_WARP_SIZE - l);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* Kernel: gcmx_ghash_clmad / gcmx_ghash_soft                                                       */
/*   launch: grid = max(1, ceil(nblocks / GCMX_GHASH_SPAN)), block = GCMX_GHASH_THREADS, smem = 0   */
/*   (static shared only), params passed by value.                                                   */
/*   Writes partials[0..grid): the POLYVAL value of each SPAN-block run (front zero padding).       */
/* ---------------------------------------------------------------------------------------------- */
typedef struct GcmxGhashParams {
    uint64_t data;     /* const uint8_t*, 16-byte aligned */
    uint64_t nbytes;   /* message bytes (the last partial block is zero-padded) */
    uint64_t powers;   /* const GcmxU128[GCMX_GHASH_POW_COUNT], warp-strided table for the GHASH layout */
    uint64_t partials; /* GcmxU128[grid] out */
} GcmxGhashParams;

/* ---------------------------------------------------------------------------------------------- */
/* Kernels: gcmx_gcm_encrypt / gcmx_gcm_decrypt (fused AES-CTR + GHASH, one pass)                  */
/*   launch: grid = max(1, ceil(nblocks / GCMX_FUSED_SPAN)), block = GCMX_FUSED_THREADS, smem = 0.  */
/*   out[r] = in[r] XOR AES_K(J0[0..12] || be32(ctr_first + r)) for the real blocks r (only the real */
/*   bytes of a last partial block are written; out may equal in). partials[j] = POLYVAL value of the */
/*   ciphertext (encrypt: out, decrypt: in) of thread block j's SPAN-block run, front zero padding.  */
/*   The host adds the AAD, the length block and E_K(J0).                                            */
/*   The key and the counter block are read from device memory (see the conventions on secrets).    */
/* ---------------------------------------------------------------------------------------------- */
/** J0 and the first counter of one launch (16 bytes, in device memory, 16-byte aligned). */
typedef struct GcmxGcmCtr {
    uint32_t j0_prefix[3]; /* J0 bytes 0..11 as the three little-endian words of a uint4 load of J0 */
    uint32_t ctr_first;    /* counter value of real block 0 of this launch (ctr0 + 1 + block offset) */
} GcmxGcmCtr;

typedef struct GcmxGcmParams {
    uint64_t in;        /* const uint8_t*, 16-byte aligned */
    uint64_t out;       /* uint8_t*, 16-byte aligned; may equal in */
    uint64_t nbytes;    /* bytes of this launch */
    uint64_t powers;    /* const GcmxU128[GCMX_FUSED_POW_COUNT], warp-strided table for the fused layout */
    uint64_t partials;  /* GcmxU128[grid] out */
    uint64_t key;       /* const GcmxAesKey*, 4-byte aligned */
    uint64_t ctr;       /* const GcmxGcmCtr*, 16-byte aligned */
    uint32_t nr;        /* the key's rounds, = key->nr (10/12/14: the key length, not secret); from here the
                           compiler sees the round loop as uniform across the block */
    uint32_t _pad0;     /* zero */
} GcmxGcmParams;

/* ---------------------------------------------------------------------------------------------- */
/* Key expansion on the device (aes_key.cu): gcmx_aes_expand_keys                                   */
/*   launch: grid = ceil(nkeys / GCMX_EXPAND_THREADS), block = GCMX_EXPAND_THREADS.                 */
/*   out[k] = FIPS-197 expansion of raw[k] (table-free: SubWord is the bitsliced S-box circuit of    */
/*   aes_bs.cuh). A length other than 16, 24 or 32 gives nr = 0 and an all-zero schedule (the host  */
/*   validates lengths first).                                                                       */
/* ---------------------------------------------------------------------------------------------- */
#define GCMX_EXPAND_THREADS 64u
/** A raw AES key as the host uploads it: `len` (16, 24 or 32) bytes at the front of `key`. */
typedef struct GcmxRawKey {
    uint8_t key[32];
    uint32_t len;
} GcmxRawKey; /* 36 bytes */

typedef struct GcmxExpandParams {
    uint64_t raw;    /* const GcmxRawKey[nkeys] */
    uint64_t out;    /* GcmxAesKey[nkeys] out */
    uint32_t nkeys;
    uint32_t _pad0;  /* zero */
} GcmxExpandParams;

/* ---------------------------------------------------------------------------------------------- */
/* Batch (gcm_batch.cu): many independent messages, three launches                                  */
/* ---------------------------------------------------------------------------------------------- */
/*
 * Work split. A message of n = ceil(len/16) blocks is cut into K = ceil(n/1024) "units" of a warp chunk
 * (GCMX_WARP_CHUNK = 1024 blocks), counted from the END: virtually the message is front-padded with
 * P = 1024K - n zero blocks; unit u covers virtual blocks [1024u, 1024u+1024). Units 1..K-1 are full and
 * use a whole warp (g = 32 lanes). Unit 0 holds m = n - 1024(K-1) real blocks (1..1024) and uses only
 * g0 = the smallest power of two >= ceil(m/32) lanes (1, 2, 4, ..., 32) over its last 32*g0 virtual
 * blocks. In a unit of g lanes, group lane i takes the blocks vb + i + g*j, j = 0..31 (one
 * gcmx_aes_ctr_x32 call with stride g), with vb = 1024u for full units and 1024 - 32*g0 for unit 0.
 * Several small units share a warp (different messages and keys in one warp are fine).
 * Lane space: message k owns the global lanes [lane_first, lane_first + 32(K-1) + g0): its full units
 * first (unit u >= 1 at lane_first + 32(u-1)), then unit 0 (at lane_first + 32(K-1)). lane_first must be
 * a multiple of 32 if K > 1, else a multiple of g0, and the messages' lane ranges must be increasing and
 * disjoint (holes are allowed and idle); lane_first must be non-decreasing over msgs[] INCLUDING the
 * zero-length messages (give them the current cursor, as gcmx_batch_plan() does). gcmx_batch_plan()
 * computes one valid plan. Thread t of the units kernel is global lane t; it finds its message by binary
 * search (the largest k with lane_first <= t). Preconditions the host validates (kernels do not check):
 * key_index < nkeys, every range inside its buffer, 16-byte aligned data_off / aad_off, unit_first
 * ranges disjoint inside unit_partials, nr of every key in {10, 12, 14}.
 * Each unit writes its POLYVAL value to unit_partials[unit_first + u]; the tags kernel folds them with
 * Q_1024 (S_C = fold(S*h^1024 + Z_u)), hashes the AAD (one thread, Horner), computes
 * S = ((Z_A * h^n) ^ S_C ^ L) * h with L = [aad bits, ct bits], and tag = S (as bytes) XOR E_K(J0).
 * Messages with len = 0 own no lanes and no units (K = 0).
 *
 * Launches, in order, on one stream:
 *   1. gcmx_batch_key_powers  grid = ceil(nkeys / GCMX_BATCH_KEY_THREADS),  block = GCMX_BATCH_KEY_THREADS
 *      per key: H = AES_K(0^128), H' = mulX(H), key_powers[key] (layout GcmxKeyPowers).
 *   2. gcmx_batch_units       grid = ceil(total_lanes / GCMX_BATCH_UNIT_THREADS), block = GCMX_BATCH_UNIT_THREADS
 *      CTR + GHASH of every unit: writes out and unit_partials.
 *   3. gcmx_batch_tags        grid = ceil(nmsgs / GCMX_BATCH_TAG_THREADS), block = GCMX_BATCH_TAG_THREADS
 *      per message: AAD hash, combination, length block, E_K(J0); writes tags[tag_slot] (16 bytes).
 * (Launch 1 may be skipped when key_powers is still valid for the same keys.) All kernels take the same
 * GcmxBatchParams by value. Decryption: the host compares tags (constant time) and wipes on mismatch.
 */
#define GCMX_BATCH_UNIT_THREADS 128u
#define GCMX_BATCH_KEY_THREADS 64u
#define GCMX_BATCH_TAG_THREADS 128u
#define GCMX_BATCH_UNIT_BLOCKS GCMX_WARP_CHUNK     /* 1024 blocks = 16 KiB per full unit */
#define GCMX_KEY_POW_LINEAR 128u                   /* Q_1..Q_128 */
#define GCMX_KEY_POW_POW2 32u                      /* Q_(2^i), i = 0..31 */

/** Per-key power table, written by gcmx_batch_key_powers. q[k-1] = Q_k (k = 1..128), pow2[i] = Q_(2^i). */
typedef struct GcmxKeyPowers {
    GcmxU128 q[GCMX_KEY_POW_LINEAR];
    GcmxU128 pow2[GCMX_KEY_POW_POW2];
} GcmxKeyPowers; /* 2560 bytes */

/** One message of a batch (64 bytes). Input and output share the offset. */
typedef struct GcmxBatchMsg {
    uint64_t data_off;   /* byte offset of the message in `in` and in `out` (multiple of 16) */
    uint64_t data_len;   /* message bytes (<= 2^36 - 32, the GCM limit) */
    uint64_t aad_off;    /* byte offset of the AAD in `aad` (multiple of 16) */
    uint64_t aad_len;    /* AAD bytes */
    uint32_t j0[4];      /* J0 as the four little-endian words of a uint4 load of its 16 bytes */
    uint32_t key_index;  /* index into keys[] and key_powers[] */
    uint32_t tag_slot;   /* the tag goes to tags + 16*tag_slot */
    uint32_t lane_first; /* first global lane (see work split); plan with gcmx_batch_plan */
    uint32_t unit_first; /* first index into unit_partials */
} GcmxBatchMsg;

typedef struct GcmxBatchParams {
    uint64_t in;            /* const uint8_t*: all messages' input */
    uint64_t out;           /* uint8_t*: output (may equal in) */
    uint64_t aad;           /* const uint8_t*: all AADs */
    uint64_t msgs;          /* const GcmxBatchMsg[nmsgs], sorted by lane_first */
    uint64_t keys;          /* const GcmxAesKey[nkeys] */
    uint64_t key_powers;    /* GcmxKeyPowers[nkeys] (written by launch 1, read by 2 and 3) */
    uint64_t unit_partials; /* GcmxU128[total units] scratch */
    uint64_t tags;          /* uint8_t[16 * slots] out */
    uint32_t nmsgs;
    uint32_t nkeys;
    uint32_t total_lanes;   /* lanes of the units kernel (>= last lane_first + lanes of last message) */
    uint32_t decrypt;       /* 0: encrypt (hash out), 1: decrypt (hash in) */
} GcmxBatchParams;

/** Units (K) and lanes of the first unit (g0) of a message of `len` bytes; returns the lanes it owns. */
GCMX_ABI_FN uint32_t gcmx_batch_msg_units(uint64_t len, uint32_t* nunits, uint32_t* g0)
{
    uint64_t n = (len + 15u) / 16u;
    uint64_t k = (n + GCMX_BATCH_UNIT_BLOCKS - 1u) / GCMX_BATCH_UNIT_BLOCKS;
    uint32_t g = 1u;
    if (k == 0u) {
        *nunits = 0u;
        *g0 = 0u;
        return 0u;
    }
    {
        uint64_t m = n - GCMX_BATCH_UNIT_BLOCKS * (k - 1u);                 /* 1..1024 */
        uint64_t need = (m + GCMX_AES_BLOCKS_PER_CALL - 1u) / GCMX_AES_BLOCKS_PER_CALL; /* 1..32 lanes */
        while ((uint64_t)g < need) g <<= 1;
    }
    *nunits = (uint32_t)k;
    *g0 = g;
    return (uint32_t)(GCMX_WARP_SIZE * (k - 1u)) + g;
}

/** One valid plan: fills lane_first and unit_first of msgs[0..n) (in this order) and returns the total
 *  lanes; *total_units receives the number of unit partials. The Rust driver may mirror this exactly. */
GCMX_ABI_FN uint32_t gcmx_batch_plan(GcmxBatchMsg* msgs, uint32_t n, uint32_t* total_units)
{
    uint32_t lane = 0u, unit = 0u, i;
    for (i = 0u; i < n; i++) {
        uint32_t k, g0, lanes = gcmx_batch_msg_units(msgs[i].data_len, &k, &g0);
        uint32_t align = (k > 1u) ? GCMX_WARP_SIZE : (k == 1u ? g0 : 1u);
        lane = (lane + align - 1u) / align * align;
        msgs[i].lane_first = lane;
        msgs[i].unit_first = unit;
        lane += lanes;
        unit += k;
    }
    *total_units = unit;
    return lane;
}

/* ---------------------------------------------------------------------------------------------- */
/* Power-table fill on the device: gcmx_fill_powers                                                  */
/*   launch: grid = ceil(count / GCMX_FILL_THREADS), block = GCMX_FILL_THREADS.                      */
/*   table[i] = Q_(gcmx_strided_pow_exponent(threads, warp_span, i)) for i < count, from H' alone.   */
/*   Use threads/warp_span = GCMX_GHASH_THREADS/GCMX_GHASH_WARP_SPAN (count GCMX_GHASH_POW_COUNT) or  */
/*   GCMX_FUSED_THREADS/GCMX_FUSED_WARP_SPAN (count GCMX_FUSED_POW_COUNT).                            */
/* ---------------------------------------------------------------------------------------------- */
#define GCMX_FILL_THREADS 128u
typedef struct GcmxFillPowersParams {
    GcmxU128 h_prime;   /* H' = mulX(H) = Q_1 */
    uint64_t table;     /* GcmxU128[count] out */
    uint64_t warp_span; /* blocks per warp of the target layout */
    uint32_t threads;   /* threads per block of the target layout */
    uint32_t count;     /* entries to write */
} GcmxFillPowersParams;

/* ---------------------------------------------------------------------------------------------- */
/* Bandwidth ceilings (bandwidth.cu)                                                                */
/*   gcmx_bw_read: XOR-folds every 16-byte block (same shape as the GHASH kernel: grid =            */
/*     ceil(nblocks / GCMX_GHASH_SPAN), block = GCMX_GHASH_THREADS, lane-strided loads), writes one  */
/*     uint4 per thread block to `out` (so the loads cannot be optimised away). nbytes % 16 == 0.    */
/*   gcmx_bw_copy: out = in, grid = ceil(nblocks / GCMX_BW_COPY_SPAN), block = GCMX_BW_THREADS.     */
/* ---------------------------------------------------------------------------------------------- */
#define GCMX_BW_THREADS 256u
#define GCMX_BW_COPY_BLOCKS_PER_LANE 16u
#define GCMX_BW_COPY_SPAN (GCMX_BW_THREADS * GCMX_BW_COPY_BLOCKS_PER_LANE) /* 4096 blocks */
typedef struct GcmxBwParams {
    uint64_t in;     /* const uint8_t*, 16-byte aligned */
    uint64_t out;    /* read: uint4[grid]; copy: uint8_t[nbytes] */
    uint64_t nbytes; /* multiple of 16 */
} GcmxBwParams;

/* ---------------------------------------------------------------------------------------------- */
/* gcmx_abi_info(uint64_t out): launch <<<1,1>>>; writes GCMX_ABI_INFO_WORDS uint32_t to out:       */
/*   [0] GCMX_ABI_VERSION, [1] have_clmad (1 when the fatbin was built with clmad), [2] GCMX_GHASH_THREADS, */
/*   [3] GCMX_GHASH_SPAN, [4] GCMX_FUSED_THREADS, [5] GCMX_FUSED_SPAN, [6] GCMX_BATCH_UNIT_BLOCKS,   */
/*   [7] sizeof(GcmxGcmParams). The driver compares these with its mirrored constants at load time.  */
/* ---------------------------------------------------------------------------------------------- */
#define GCMX_ABI_INFO_WORDS 8u

/* Kernel names (extern "C", look them up with Module::get_function):
 *   gcmx_ghash_clmad(GcmxGhashParams)     only when built with GCMX_HAVE_CLMAD
 *   gcmx_ghash_soft(GcmxGhashParams)      always
 *   gcmx_gcm_encrypt(GcmxGcmParams), gcmx_gcm_decrypt(GcmxGcmParams)
 *   gcmx_aes_expand_keys(GcmxExpandParams)
 *   gcmx_aes_ctr(uint64_t key, uint32_t nr, uint32_t j0w0, uint32_t j0w1, uint32_t j0w2, uint32_t ctr0,
 *                uint64_t data, uint64_t nbytes)   keystream only, for the benchmark (aes_ctr.cu);
 *                key = const GcmxAesKey*, nr = its rounds
 *   gcmx_batch_key_powers(GcmxBatchParams), gcmx_batch_units(GcmxBatchParams), gcmx_batch_tags(GcmxBatchParams)
 *   gcmx_fill_powers(GcmxFillPowersParams)
 *   gcmx_bw_read(GcmxBwParams), gcmx_bw_copy(GcmxBwParams)
 *   gcmx_abi_info(uint64_t out)
 */

/* Layout checks (Rust mirrors: #[repr(C)] with the same field order; sizes must match). */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define GCMX_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define GCMX_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
GCMX_STATIC_ASSERT(sizeof(GcmxU128) == 16, "GcmxU128 size");
GCMX_STATIC_ASSERT(sizeof(GcmxAesKey) == 244, "GcmxAesKey size");
GCMX_STATIC_ASSERT(sizeof(GcmxGhashParams) == 32, "GcmxGhashParams size");
GCMX_STATIC_ASSERT(sizeof(GcmxGcmCtr) == 16, "GcmxGcmCtr size");
GCMX_STATIC_ASSERT(sizeof(GcmxGcmParams) == 64, "GcmxGcmParams size");
GCMX_STATIC_ASSERT(sizeof(GcmxRawKey) == 36, "GcmxRawKey size");
GCMX_STATIC_ASSERT(sizeof(GcmxExpandParams) == 24, "GcmxExpandParams size");
GCMX_STATIC_ASSERT(sizeof(GcmxKeyPowers) == 2560, "GcmxKeyPowers size");
GCMX_STATIC_ASSERT(sizeof(GcmxBatchMsg) == 64, "GcmxBatchMsg size");
GCMX_STATIC_ASSERT(sizeof(GcmxBatchParams) == 80, "GcmxBatchParams size");
GCMX_STATIC_ASSERT(sizeof(GcmxFillPowersParams) == 40, "GcmxFillPowersParams size");
GCMX_STATIC_ASSERT(sizeof(GcmxBwParams) == 24, "GcmxBwParams size");

#ifdef __cplusplus
}
#endif

#endif /* GCMX_ABI_H */
