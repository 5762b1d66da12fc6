/*
 * gcmx_abi.h -- the binary interface between the gcmx CUDA kernels (the .cu files under cuda/) and the Rust driver
 * (crates/gcmx-cuda). Plain C, no CUDA types: every struct here is meant to be mirrored one-to-one by a
 * `#[repr(C)]` Rust struct (fixed-width integers, explicit padding; the layout record at the end of this
 * file is checked at compile time on both sides).
 * Device addresses are passed as `uint64_t` (a CUdeviceptr), never as C pointers, so Rust mirrors them as `u64`.
 *
 * ===================================================================================================
 * BUILD (how the shipped crates/gcmx-cuda/kernels/gcmx.fatbin is made: ONE fatbin from ONE translation unit;
 * scripts/build-kernels.sh runs it through crates/gcmx-cuda/build.rs with GCMX_CUDA_REBUILD=1)
 * ===================================================================================================
 *   cuda/gcmx_all.cu #includes every kernel file (ghash_clmad.cu, ghash_soft.cu, gcm_fused.cu,
 *   gcm_dbatch.cu, aes_key.cu, aes_ctr.cu, bandwidth.cu). Compile only that file:
 *
 *     nvcc -fatbin -O3 -std=c++17 -DGCMX_HAVE_CLMAD=1 \
 *          -gencode arch=compute_80,code=sm_80  -gencode arch=compute_86,code=sm_86 \
 *          -gencode arch=compute_89,code=sm_89  -gencode arch=compute_90,code=sm_90 \
 *          -gencode arch=compute_100,code=sm_100 -gencode arch=compute_120,code=sm_120 \
 *          -gencode arch=compute_120,code=compute_120 \
 *          -I cuda -o gcmx.fatbin cuda/gcmx_all.cu
 *
 *   -DGCMX_HAVE_CLMAD=1 needs nvcc release >= 13.3 (clmad.{lo,hi}.u64 is PTX that older nvcc rejects; newer
 *   ones emit native CLMAD.LO/CLMAD.HI SASS for every target above, which cuobjdump --dump-sass shows), and
 *   the shipped fatbin has it. Without the macro (host checks, experiments) the code is built with the software carry-less
 *   multiply: the kernel `gcmx_ghash_clmad` is then ABSENT from the module, the fused and batch kernels use
 *   the software multiply, and `gcmx_abi_info` reports have_clmad = 0. Add `-lineinfo` for profiling and
 *   `-Xptxas -v` to see registers and spills. Rebuild when any .cu, .cuh or .h file under cuda/ changes.
 *   Host-side tests (cuda/tests/ghash_host_check.cu) compile with nvcc -x cu or with plain g++ -x c++.
 *
 * ===================================================================================================
 * CONVENTIONS (see also the top comments of ghash.cuh and each kernel file)
 * ===================================================================================================
 * - Data buffers are bytes, processed as 16-byte blocks loaded as uint4. Every data, AAD and output
 *   address passed to a kernel MUST be 16-byte aligned (cuMemAlloc allocations are 256-byte aligned; a Rust
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

#include <stddef.h>
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
#define GCMX_ABI_VERSION 4u

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
/* Per-key powers of H (aes_key.cu): gcmx_key_powers                                                */
/*   launch: grid = ceil(nkeys / GCMX_KEY_POWERS_THREADS), block = GCMX_KEY_POWERS_THREADS.         */
/*   per key: H = AES_K(0^128), H' = mulX(H), key_powers[k] (layout GcmxKeyPowers).                 */
/* ---------------------------------------------------------------------------------------------- */
#define GCMX_KEY_POWERS_THREADS 64u
#define GCMX_KEY_POW_LINEAR 128u                   /* Q_1..Q_128 */
#define GCMX_KEY_POW_POW2 32u                      /* Q_(2^i), i = 0..31 */

/** Per-key power table. q[k-1] = Q_k (k = 1..128), pow2[i] = Q_(2^i). */
typedef struct GcmxKeyPowers {
    GcmxU128 q[GCMX_KEY_POW_LINEAR];
    GcmxU128 pow2[GCMX_KEY_POW_POW2];
} GcmxKeyPowers; /* 2560 bytes */

typedef struct GcmxKeyPowersParams {
    uint64_t keys;       /* const GcmxAesKey[nkeys] */
    uint64_t key_powers; /* GcmxKeyPowers[nkeys] out */
    uint32_t nkeys;
    uint32_t _pad0;      /* zero */
} GcmxKeyPowersParams;

/* ---------------------------------------------------------------------------------------------- */
/* Device-resident batches (gcm_dbatch.cu): many messages, ONE cooperative launch                   */
/* ---------------------------------------------------------------------------------------------- */
/*
 * The caller's buffers (device memory, or page-locked host memory the device can address):
 *   msgs[nmsgs]   GcmxDevMsg descriptors: where each message's data, AAD and nonce are, and its key;
 *   data          every message's bytes, transformed in place (data_off a multiple of 16);
 *   aad           every message's AAD (aad_off a multiple of 16);
 *   nonces        every message's nonce (any offset);
 *   tags          16 bytes per message, tags + 16 i: written when sealing and in EXPECT mode, read in OPEN mode;
 *   verdicts      one byte per message: GCMX_VERDICT_*.
 * The kernel trusts none of the descriptors: each is read ONCE into registers, checked against the
 * buffer sizes of the launch (overflow-safe, alignment, GCM limits, key < nkeys, nonce_len >= 1) and only
 * the checked copy (GcmxDbMsg in the scratch) is used afterwards. A message that fails the check is left
 * untouched, gets verdict GCMX_VERDICT_INVALID and (SEAL, EXPECT) a zero tag.
 *
 * Work split. A message of n = ceil(len/16) blocks is front-padded to K = ceil(n/1024) units of 1024
 * blocks (gcmx_db_units). Units 1..K-1 are "full": one warp, lane i takes virtual blocks 1024u + i + 32j
 * (j = 0..31) with one gcmx_aes_ctr_x32 call of stride 32. Unit 0 holds the m = n - 1024(K-1) real blocks
 * at its end and takes g0 = pow2ceil(ceil(m/32)) lanes (1, 2, ..., 32): lane i takes virtual blocks
 * 1024 - 32 g0 + i + g0 j (stride g0). E_K(J0) is the keystream of the virtual block just before real
 * block 0 (counter ctr0): when m < 32 g0 that block lies in unit 0's range and the lane computing it
 * stores it ("free slot"); otherwise, and for empty messages, one more lane computes it alone (a "J0
 * unit": one call with stride 1 from ctr0, no data). Every lane of every kind does exactly one AES call,
 * so all work items cost the same.
 * Columns: 0 = full units (K-1 per message), 1..6 = unit 0 of class g0 = 1, 2, 4, 8, 16, 32, 7 = J0 units.
 * Rounds: a warp-wide work item. Round regions in column order: column 0 has one round per full unit,
 * column c in 1..6 packs 32/g0 units per round, column 7 packs 32 J0 units per round. Message order is
 * kept inside every column (prefix sums), so the work of a round is found by a binary search over the
 * messages' first full unit (column 0) or read from a per-column list of message indices (1..7).
 * Hash: a lane's Horner state over its blocks (stride g, powers Q_g..Q_4g) times Q_(g-i), XOR-ed over the
 * unit's g lanes (warp shuffles), is the unit's value Z_u; Z_u h^(1024 (K-1-u)) is XOR-ed (atomically)
 * into the message's accumulator, which ends as the ciphertext's POLYVAL value S_C. Per message:
 * Z_A = AAD value, S = ((Z_A h^n) ^ S_C ^ [bitlen(A) || bitlen(C)]) h, tag = S ^ E_K(J0).
 *
 * Phases, separated by grid-wide barriers (cooperative launch: every thread block resident):
 *   P1  per message (thread block b takes the contiguous range [b ceil(n/G), ...)): check, J0 (from
 *       the nonce: 12 bytes directly, else GHASH with the key's powers; GCMX_DB_J0_GIVEN: the nonce field
 *       holds J0 itself, 16 bytes), the checked copy, zero accumulator; column counts per thread block.
 *   P2  prefix sums: over the thread blocks' column counts, then inside each thread block's range;
 *       writes each message's first full unit and its place in the column lists.
 *   P3  rounds, each warp taking the next from a counter in the scratch: CTR + GHASH of every unit,
 *       E_K(J0).
 *   P4  per message: AAD hash, tag; SEAL/EXPECT write it, OPEN compares the first tag_len bytes with
 *       tags[i] in constant time; verdicts; J0 (but a refused message's), E_K(J0) and the accumulator are
 *       zeroed in the scratch.
 *   P5  OPEN only, when a tag was wrong: the rounds again, each lane of a refused message applying its
 *       keystream again, so the message holds the ciphertext it was given (gcmx's forgery policy);
 *   P6  after barrier 5: the J0s P4 kept are zeroed. With no wrong tag, barrier 5 is only counted.
 * Barriers: GCMX_DB_BARRIERS_SEAL per launch of a seal kernel (P1..P4), GCMX_DB_BARRIERS_OPEN per launch
 * of an open kernel (barrier 5 too, counted even when P5 has nothing to do), on the scratch's counter
 * (thread 0 of each block: fence, atomic add, spin with acquire loads until the count reaches
 * bar_base + k * gridDim.x; the host tracks the count, which is never reset).
 *
 * Launch: gcmx_dbatch_seal1 / gcmx_dbatch_open1 (nkeys == 1: round keys from a shared-memory mask table)
 * or gcmx_dbatch_sealn / gcmx_dbatch_openn (any nkeys: round keys from the key in device memory), with
 * cuLaunchCooperativeKernel, block = GCMX_DB_THREADS, grid <= the device's resident limit for the kernel.
 * Any grid size is correct. Params GcmxDbParams by value (addresses, sizes, counts, modes: no secret).
 */
#define GCMX_DB_THREADS 128u
#define GCMX_DB_WARPS (GCMX_DB_THREADS / GCMX_WARP_SIZE)
#define GCMX_DB_COLS 8u
#define GCMX_DB_COL_FULL 0u
#define GCMX_DB_COL_J0 7u
#define GCMX_DB_BARRIERS_SEAL 4u
#define GCMX_DB_BARRIERS_OPEN 5u
#define GCMX_DB_UNIT_BLOCKS GCMX_WARP_CHUNK       /* 1024 blocks = 16 KiB per unit */
#define GCMX_DB_UNIT_LOG2 10u

#define GCMX_DB_SEAL 0u    /* encrypt, write tags */
#define GCMX_DB_OPEN 1u    /* decrypt, compare with tags, verdicts, restore refused messages */
#define GCMX_DB_EXPECT 2u  /* decrypt, write the expected tags (the caller compares) */
#define GCMX_DB_J0_GIVEN 1u /* flag: each nonce field holds J0 (nonce_len 16) */

#define GCMX_VERDICT_OK 0u
#define GCMX_VERDICT_REFUSED 1u
#define GCMX_VERDICT_INVALID 2u

/** Longest plaintext GCM allows: 2^36 - 32 bytes. */
#define GCMX_P_MAX ((1ull << 36) - 32u)
/** Longest AAD GCM allows, in bytes (2^64 - 1 bits rounded down). */
#define GCMX_A_MAX ((1ull << 61) - 1u)

/** One message of a device-resident batch (48 bytes, 8-byte aligned), as the caller writes it. */
typedef struct GcmxDevMsg {
    uint64_t data_off;  /* byte offset in data, a multiple of 16 */
    uint64_t data_len;  /* bytes, <= GCMX_P_MAX */
    uint64_t aad_off;   /* byte offset in aad, a multiple of 16 */
    uint64_t aad_len;   /* bytes */
    uint64_t nonce_off; /* byte offset in nonces (any) */
    uint32_t nonce_len; /* bytes, >= 1 */
    uint32_t key;       /* key index, < nkeys */
} GcmxDevMsg;

/** The checked copy of a descriptor, in the scratch (64 bytes). */
typedef struct GcmxDbMsg {
    uint64_t data_off;
    uint64_t data_len;
    uint64_t aad_off;
    uint64_t aad_len;
    uint32_t j0[4];      /* J0 as four little-endian words (secret for nonces that are not 12 bytes) */
    uint32_t key;
    uint32_t info;       /* GCMX_DB_INFO_* */
    uint64_t full_first; /* index of the message's first full unit in column 0 */
} GcmxDbMsg;

#define GCMX_DB_INFO_VALID 1u
#define GCMX_DB_INFO_J0UNIT 2u   /* E_K(J0) needs a J0 unit */
#define GCMX_DB_INFO_REFUSED 4u  /* OPEN: the tag was wrong */
#define GCMX_DB_INFO_COL_SHIFT 4u /* bits 4..7: column of unit 0 (1..6), 0 when K = 0 */

typedef struct GcmxDbParams {
    uint64_t msgs;       /* const GcmxDevMsg[nmsgs] */
    uint64_t data;       /* uint8_t[data_len], 16-byte aligned */
    uint64_t data_len;
    uint64_t aad;        /* const uint8_t[aad_len], 16-byte aligned */
    uint64_t aad_len;
    uint64_t nonces;     /* const uint8_t[nonces_len] */
    uint64_t nonces_len;
    uint64_t tags;       /* uint8_t[16 nmsgs], 16-byte aligned */
    uint64_t verdicts;   /* uint8_t[nmsgs] */
    uint64_t keys;       /* const GcmxAesKey[nkeys] */
    uint64_t key_powers; /* const GcmxKeyPowers[nkeys] */
    uint64_t scratch;    /* gcmx_db_scratch_bytes(nmsgs, grid) bytes, 256-byte aligned */
    uint32_t nmsgs;      /* < 2^31 */
    uint32_t nkeys;
    uint32_t nr;         /* rounds of key 0 (the one-key kernels; its length, not secret) */
    uint32_t mode;       /* GCMX_DB_SEAL / OPEN / EXPECT */
    uint32_t tag_len;    /* OPEN: bytes of each tag compared (1..16) */
    uint32_t flags;      /* GCMX_DB_J0_GIVEN */
    uint32_t bar_base;   /* the barrier counter's value when this launch starts */
    uint32_t _pad0;      /* zero */
} GcmxDbParams;

/** Units K, lanes of unit 0 (g0) and whether unit 0 has the free slot for E_K(J0), for len bytes. */
GCMX_ABI_FN uint32_t gcmx_db_units(uint64_t len, uint32_t* g0, uint32_t* free_slot)
{
    uint64_t n = (len + 15u) / 16u;
    uint64_t k = (n + GCMX_DB_UNIT_BLOCKS - 1u) / GCMX_DB_UNIT_BLOCKS;
    uint32_t g = 1u;
    *g0 = 0u;
    *free_slot = 0u;
    if (k == 0u) return 0u;
    {
        uint64_t m = n - GCMX_DB_UNIT_BLOCKS * (k - 1u);                                  /* 1..1024 */
        uint64_t need = (m + GCMX_AES_BLOCKS_PER_CALL - 1u) / GCMX_AES_BLOCKS_PER_CALL; /* 1..32 */
        while ((uint64_t)g < need) g <<= 1;
        *g0 = g;
        *free_slot = m < (uint64_t)GCMX_AES_BLOCKS_PER_CALL * g ? 1u : 0u;
    }
    return (uint32_t)k;
}

/* Scratch layout (bytes from `scratch`; the regions from GCMX_DB_SCR_BLK on start 256-byte aligned):
 *   0                      barrier counter (u32), refused flag (u32)
 *   GCMX_DB_SCR_ROUND      P3's next round (u64, set to 0 in P1)
 *   GCMX_DB_SCR_BLK        column counts per thread block: uint64_t[grid][GCMX_DB_COLS]
 *   gcmx_db_scr_msgs()     GcmxDbMsg[n]
 *   + 64 n                 accumulators GcmxU128[n]
 *   + 16 n                 E_K(J0) blocks uint8_t[16 n]
 *   + 16 n                 column lists uint32_t[2 n] */
#define GCMX_DB_SCR_ROUND 8u
#define GCMX_DB_SCR_BLK 256u
#define GCMX_DB_ALIGN(x) (((x) + 255u) / 256u * 256u)
GCMX_ABI_FN uint64_t gcmx_db_scr_msgs(uint32_t grid)
{
    return GCMX_DB_ALIGN((uint64_t)GCMX_DB_SCR_BLK + 8u * GCMX_DB_COLS * (uint64_t)grid);
}
GCMX_ABI_FN uint64_t gcmx_db_scr_acc(uint32_t n, uint32_t grid) { return gcmx_db_scr_msgs(grid) + GCMX_DB_ALIGN(64u * (uint64_t)n); }
GCMX_ABI_FN uint64_t gcmx_db_scr_ekj0(uint32_t n, uint32_t grid) { return gcmx_db_scr_acc(n, grid) + GCMX_DB_ALIGN(16u * (uint64_t)n); }
GCMX_ABI_FN uint64_t gcmx_db_scr_slots(uint32_t n, uint32_t grid) { return gcmx_db_scr_ekj0(n, grid) + GCMX_DB_ALIGN(16u * (uint64_t)n); }
GCMX_ABI_FN uint64_t gcmx_db_scratch_bytes(uint32_t n, uint32_t grid) { return gcmx_db_scr_slots(n, grid) + GCMX_DB_ALIGN(8u * (uint64_t)n); }

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
/*   [3] GCMX_GHASH_SPAN, [4] GCMX_FUSED_THREADS, [5] GCMX_FUSED_SPAN, [6] GCMX_DB_UNIT_BLOCKS,      */
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
 *   gcmx_key_powers(GcmxKeyPowersParams)
 *   gcmx_dbatch_seal1, gcmx_dbatch_open1, gcmx_dbatch_sealn, gcmx_dbatch_openn (GcmxDbParams), cooperative
 *   gcmx_fill_powers(GcmxFillPowersParams)
 *   gcmx_bw_read(GcmxBwParams), gcmx_bw_copy(GcmxBwParams)
 *   gcmx_abi_info(uint64_t out)
 */

/* ---- Layout record ---------------------------------------------------------------------------------
 * Every size, alignment, field offset and constant that the Rust side mirrors, each a compile-time check
 * here (nvcc, and the C compiler of any host code that includes this header) and in gcmx-cuda, whose
 * build script reads the GCMX_LAYOUT_* lines below as text (it compiles and runs nothing) and asserts
 * the same numbers on the `#[repr(C)]` mirrors at compile time. A struct and its lines change together;
 * one line per item, numbers in decimal or 0x hex. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define GCMX_STATIC_ASSERT(c, m) static_assert(c, m)
#define GCMX_ALIGNOF(t) alignof(t)
#else
#define GCMX_STATIC_ASSERT(c, m) _Static_assert(c, m)
#define GCMX_ALIGNOF(t) _Alignof(t)
#endif
#define GCMX_LAYOUT_SIZE(t, size, align) \
    GCMX_STATIC_ASSERT(sizeof(t) == (size) && GCMX_ALIGNOF(t) == (align), #t " size or alignment")
#define GCMX_LAYOUT_FIELD(t, f, off) GCMX_STATIC_ASSERT(offsetof(t, f) == (off), #t "." #f " offset")
#define GCMX_LAYOUT_CONST(name, value) GCMX_STATIC_ASSERT((name) == (value##ull), #name)

GCMX_LAYOUT_SIZE(GcmxU128, 16, 8);
GCMX_LAYOUT_SIZE(GcmxAesKey, 244, 4);
GCMX_LAYOUT_SIZE(GcmxGhashParams, 32, 8);
GCMX_LAYOUT_SIZE(GcmxGcmCtr, 16, 4);
GCMX_LAYOUT_SIZE(GcmxGcmParams, 64, 8);
GCMX_LAYOUT_SIZE(GcmxRawKey, 36, 4);
GCMX_LAYOUT_SIZE(GcmxExpandParams, 24, 8);
GCMX_LAYOUT_SIZE(GcmxKeyPowers, 2560, 8);
GCMX_LAYOUT_SIZE(GcmxKeyPowersParams, 24, 8);
GCMX_LAYOUT_SIZE(GcmxDevMsg, 48, 8);
GCMX_LAYOUT_SIZE(GcmxDbMsg, 64, 8);
GCMX_LAYOUT_SIZE(GcmxDbParams, 128, 8);
GCMX_LAYOUT_SIZE(GcmxBwParams, 24, 8);
GCMX_STATIC_ASSERT(sizeof(GcmxFillPowersParams) == 40, "GcmxFillPowersParams size"); /* device-internal */
GCMX_LAYOUT_FIELD(GcmxU128, lo, 0);
GCMX_LAYOUT_FIELD(GcmxU128, hi, 8);
GCMX_LAYOUT_FIELD(GcmxAesKey, rk, 0);
GCMX_LAYOUT_FIELD(GcmxAesKey, nr, 240);
GCMX_LAYOUT_FIELD(GcmxGhashParams, data, 0);
GCMX_LAYOUT_FIELD(GcmxGhashParams, nbytes, 8);
GCMX_LAYOUT_FIELD(GcmxGhashParams, powers, 16);
GCMX_LAYOUT_FIELD(GcmxGhashParams, partials, 24);
GCMX_LAYOUT_FIELD(GcmxGcmCtr, j0_prefix, 0);
GCMX_LAYOUT_FIELD(GcmxGcmCtr, ctr_first, 12);
GCMX_LAYOUT_FIELD(GcmxGcmParams, in, 0);
GCMX_LAYOUT_FIELD(GcmxGcmParams, out, 8);
GCMX_LAYOUT_FIELD(GcmxGcmParams, nbytes, 16);
GCMX_LAYOUT_FIELD(GcmxGcmParams, powers, 24);
GCMX_LAYOUT_FIELD(GcmxGcmParams, partials, 32);
GCMX_LAYOUT_FIELD(GcmxGcmParams, key, 40);
GCMX_LAYOUT_FIELD(GcmxGcmParams, ctr, 48);
GCMX_LAYOUT_FIELD(GcmxGcmParams, nr, 56);
GCMX_LAYOUT_FIELD(GcmxGcmParams, _pad0, 60);
GCMX_LAYOUT_FIELD(GcmxRawKey, key, 0);
GCMX_LAYOUT_FIELD(GcmxRawKey, len, 32);
GCMX_LAYOUT_FIELD(GcmxExpandParams, raw, 0);
GCMX_LAYOUT_FIELD(GcmxExpandParams, out, 8);
GCMX_LAYOUT_FIELD(GcmxExpandParams, nkeys, 16);
GCMX_LAYOUT_FIELD(GcmxExpandParams, _pad0, 20);
GCMX_LAYOUT_FIELD(GcmxKeyPowers, q, 0);
GCMX_LAYOUT_FIELD(GcmxKeyPowers, pow2, 2048);
GCMX_LAYOUT_FIELD(GcmxKeyPowersParams, keys, 0);
GCMX_LAYOUT_FIELD(GcmxKeyPowersParams, key_powers, 8);
GCMX_LAYOUT_FIELD(GcmxKeyPowersParams, nkeys, 16);
GCMX_LAYOUT_FIELD(GcmxKeyPowersParams, _pad0, 20);
GCMX_LAYOUT_FIELD(GcmxDevMsg, data_off, 0);
GCMX_LAYOUT_FIELD(GcmxDevMsg, data_len, 8);
GCMX_LAYOUT_FIELD(GcmxDevMsg, aad_off, 16);
GCMX_LAYOUT_FIELD(GcmxDevMsg, aad_len, 24);
GCMX_LAYOUT_FIELD(GcmxDevMsg, nonce_off, 32);
GCMX_LAYOUT_FIELD(GcmxDevMsg, nonce_len, 40);
GCMX_LAYOUT_FIELD(GcmxDevMsg, key, 44);
GCMX_LAYOUT_FIELD(GcmxDbParams, msgs, 0);
GCMX_LAYOUT_FIELD(GcmxDbParams, data, 8);
GCMX_LAYOUT_FIELD(GcmxDbParams, data_len, 16);
GCMX_LAYOUT_FIELD(GcmxDbParams, aad, 24);
GCMX_LAYOUT_FIELD(GcmxDbParams, aad_len, 32);
GCMX_LAYOUT_FIELD(GcmxDbParams, nonces, 40);
GCMX_LAYOUT_FIELD(GcmxDbParams, nonces_len, 48);
GCMX_LAYOUT_FIELD(GcmxDbParams, tags, 56);
GCMX_LAYOUT_FIELD(GcmxDbParams, verdicts, 64);
GCMX_LAYOUT_FIELD(GcmxDbParams, keys, 72);
GCMX_LAYOUT_FIELD(GcmxDbParams, key_powers, 80);
GCMX_LAYOUT_FIELD(GcmxDbParams, scratch, 88);
GCMX_LAYOUT_FIELD(GcmxDbParams, nmsgs, 96);
GCMX_LAYOUT_FIELD(GcmxDbParams, nkeys, 100);
GCMX_LAYOUT_FIELD(GcmxDbParams, nr, 104);
GCMX_LAYOUT_FIELD(GcmxDbParams, mode, 108);
GCMX_LAYOUT_FIELD(GcmxDbParams, tag_len, 112);
GCMX_LAYOUT_FIELD(GcmxDbParams, flags, 116);
GCMX_LAYOUT_FIELD(GcmxDbParams, bar_base, 120);
GCMX_LAYOUT_FIELD(GcmxDbParams, _pad0, 124);
GCMX_LAYOUT_FIELD(GcmxBwParams, in, 0);
GCMX_LAYOUT_FIELD(GcmxBwParams, out, 8);
GCMX_LAYOUT_FIELD(GcmxBwParams, nbytes, 16);
GCMX_LAYOUT_CONST(GCMX_ABI_VERSION, 4);
GCMX_LAYOUT_CONST(GCMX_WARP_SIZE, 32);
GCMX_LAYOUT_CONST(GCMX_POW_THREAD_BASE, 4);
GCMX_LAYOUT_CONST(GCMX_BLOCKS_PER_REDUCTION, 4);
GCMX_LAYOUT_CONST(GCMX_GHASH_THREADS, 256);
GCMX_LAYOUT_CONST(GCMX_GHASH_WARP_SPAN, 4096);
GCMX_LAYOUT_CONST(GCMX_GHASH_SPAN, 32768);
GCMX_LAYOUT_CONST(GCMX_GHASH_POW_COUNT, 260);
GCMX_LAYOUT_CONST(GCMX_WARP_CHUNK, 1024);
GCMX_LAYOUT_CONST(GCMX_FUSED_THREADS, 128);
GCMX_LAYOUT_CONST(GCMX_FUSED_WARP_SPAN, 4096);
GCMX_LAYOUT_CONST(GCMX_FUSED_SPAN, 16384);
GCMX_LAYOUT_CONST(GCMX_FUSED_POW_COUNT, 132);
GCMX_LAYOUT_CONST(GCMX_KEY_POWERS_THREADS, 64);
GCMX_LAYOUT_CONST(GCMX_DB_THREADS, 128);
GCMX_LAYOUT_CONST(GCMX_DB_COLS, 8);
GCMX_LAYOUT_CONST(GCMX_DB_BARRIERS_SEAL, 4);
GCMX_LAYOUT_CONST(GCMX_DB_BARRIERS_OPEN, 5);
GCMX_LAYOUT_CONST(GCMX_DB_UNIT_BLOCKS, 1024);
GCMX_LAYOUT_CONST(GCMX_DB_SEAL, 0);
GCMX_LAYOUT_CONST(GCMX_DB_OPEN, 1);
GCMX_LAYOUT_CONST(GCMX_DB_EXPECT, 2);
GCMX_LAYOUT_CONST(GCMX_DB_J0_GIVEN, 1);
GCMX_LAYOUT_CONST(GCMX_VERDICT_OK, 0);
GCMX_LAYOUT_CONST(GCMX_VERDICT_REFUSED, 1);
GCMX_LAYOUT_CONST(GCMX_VERDICT_INVALID, 2);
GCMX_LAYOUT_CONST(GCMX_DB_SCR_BLK, 256);
GCMX_LAYOUT_CONST(GCMX_EXPAND_THREADS, 64);
GCMX_LAYOUT_CONST(GCMX_KEY_POW_LINEAR, 128);
GCMX_LAYOUT_CONST(GCMX_KEY_POW_POW2, 32);
GCMX_LAYOUT_CONST(GCMX_BW_THREADS, 256);
GCMX_LAYOUT_CONST(GCMX_BW_COPY_SPAN, 4096);
GCMX_LAYOUT_CONST(GCMX_ABI_INFO_WORDS, 8);
GCMX_LAYOUT_CONST(GCMX_Q0_HI, 0xC200000000000000);
GCMX_LAYOUT_CONST(GCMX_Q0_LO, 1);

#ifdef __cplusplus
}
#endif

#endif /* GCMX_ABI_H */
