// aes_ctr.cu - constant-time AES-CTR keystream XOR (AES only, no GHASH), for benchmarking
// the bitsliced AES of cuda/aes_bs.cuh against memory bandwidth and the T-table peer.
//
// MATH
//   Keystream block i (0-based over the buffer) = AES_K(J0[0..12] || be32(ctr0 + 1 + i)),
//   additions mod 2^32 (GCM inc32, so this is exactly GCM's CTR part).  data[16i .. 16i+15]
//   ^= keystream block i, in place.  nbytes may be any length: the last partial block
//   XORs only its real bytes; nothing past data + nbytes is read or written.
//
// MEMORY LAYOUT / WORK SPLIT
//   A warp handles a chunk of GCMX_AES_CTR_CHUNK_BLOCKS = 1024 consecutive 16-byte blocks
//   (16 KiB).  Lane l computes, with gcmx_aes_ctr_x32, the 32 blocks b + l + 32j (j = 0..31)
//   of chunk base b: ctr_first = ctr0 + 1 + b + l, ctr_stride = 32.  For each j the warp
//   loads, XORs and stores 32 consecutive uint4 = one contiguous, coalesced 512-byte access.
//   Warps walk the chunks with a grid-stride loop, so any grid size is correct.
//
// KERNEL
//   extern "C" __global__ void gcmx_aes_ctr(uint64_t key, uint32_t nr, uint32_t j0w0, uint32_t j0w1,
//                                           uint32_t j0w2, uint32_t ctr0,
//                                           uint8_t* data, uint64_t nbytes)
//     key      : device address of the expanded key (GcmxAesKey, FIPS-197 words, nr = 10/12/14),
//                never the key by value: the driver keeps copies of launch parameters
//     nr       : the key's round count (its length, not secret) = key->nr
//     j0w0..2  : J0 bytes 0..3, 4..7, 8..11 as little-endian words (a uint4 load of J0)
//     ctr0     : be32(J0[12..16]); the first block uses ctr0 + 1
//     data     : device pointer, 16-byte aligned (allocations are 256-byte aligned)
//     nbytes   : buffer length in bytes, any value (0 does nothing)
//   Launch: blockDim.x = GCMX_AES_CTR_THREADS (128; any multiple of 32 up to 128 is also
//   correct); gridDim.x = any >= 1; recommended
//   min(ceil(chunks / GCMX_AES_CTR_WARPS_PER_BLOCK), SM count * GCMX_AES_CTR_BLOCKS_PER_SM)
//   with chunks = ceil(ceil(nbytes / 16) / 1024).  Static shared memory only, no dynamic smem.
//   The kernel never traps; the host validates the key (nr) and pointers.
//   The key is copied into shared memory and round keys come from a 15 KiB shared-memory mask
//   table filled at kernel start (gcmx_aes_fill_masks); both are cleared before the kernel
//   exits. The register cap (two blocks of 128 threads per SM) and the spills it costs are in
//   benches/gpu-notes.md; a few key-derived words may be spilled to local memory here, so this
//   kernel is for the benchmark only (the library runs the fused kernels, which do not spill).
#include "aes_bs.cuh"

/// Threads per CUDA block (launch with exactly this blockDim.x).
#ifndef GCMX_AES_CTR_THREADS
#define GCMX_AES_CTR_THREADS 128
#endif
/// Minimum resident CUDA blocks per SM asked of ptxas (a register cap); experiments override it.
#ifndef GCMX_AES_CTR_MIN_BLOCKS
#define GCMX_AES_CTR_MIN_BLOCKS 1
#endif
/// Warps per CUDA block.
#define GCMX_AES_CTR_WARPS_PER_BLOCK (GCMX_AES_CTR_THREADS / 32)
/// 16-byte blocks per warp chunk: 32 lanes x 32 bitsliced blocks.
#define GCMX_AES_CTR_CHUNK_BLOCKS 1024
/// Suggested resident CUDA blocks per SM for the grid size (register-limited occupancy).
#define GCMX_AES_CTR_BLOCKS_PER_SM 2

/// One warp chunk: XOR keystream into blocks [chunk*1024, chunk*1024 + 1024) of data.
/// `lane` is the lane index 0..31 (a parameter so the host check can emulate a warp).
GCMX_AES_HD __forceinline__ void gcmx_aes_ctr_chunk(const GcmxAesKey& key, const uint32_t* masks, uint32_t nr, uint32_t j0w0, uint32_t j0w1,
                                                uint32_t j0w2, uint32_t ctr0, uint8_t* data,
                                                uint64_t nbytes, uint64_t chunk, uint32_t lane) {
    const uint64_t base = chunk * GCMX_AES_CTR_CHUNK_BLOCKS;
    uint4 ks[32];
    uint32_t rk01[8];
    gcmx_aes_round01(key, rk01);
    gcmx_aes_ctr_x32_tbl(rk01, masks, nr, j0w0, j0w1, j0w2, ctr0 + 1u + (uint32_t)base + lane, 32u, ks);
    const uint64_t nfull = nbytes >> 4;
    const uint32_t tail = (uint32_t)(nbytes & 15u);
    uint4* d4 = reinterpret_cast<uint4*>(data);
    if (base + GCMX_AES_CTR_CHUNK_BLOCKS <= nfull) {  // whole chunk inside the buffer: no checks
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const uint64_t blk = base + lane + 32u * (uint32_t)j;
            uint4 v = d4[blk];
            v.x ^= ks[j].x;
            v.y ^= ks[j].y;
            v.z ^= ks[j].z;
            v.w ^= ks[j].w;
            d4[blk] = v;
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        const uint64_t blk = base + lane + 32u * (uint32_t)j;
        if (blk < nfull) {
            uint4 v = d4[blk];
            v.x ^= ks[j].x;
            v.y ^= ks[j].y;
            v.z ^= ks[j].z;
            v.w ^= ks[j].w;
            d4[blk] = v;
        } else if (blk == nfull && tail != 0u) {
            uint8_t* p = data + (blk << 4);
            for (uint32_t m = 0; m < tail; ++m) {
                const uint32_t q = m >> 2;  // select the word without a local-memory array
                const uint32_t w = q == 0u ? ks[j].x : q == 1u ? ks[j].y : q == 2u ? ks[j].z : ks[j].w;
                p[m] ^= (uint8_t)(w >> (8u * (m & 3u)));
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(GCMX_AES_CTR_THREADS, GCMX_AES_CTR_MIN_BLOCKS)
    gcmx_aes_ctr(uint64_t key, uint32_t nr, uint32_t j0w0, uint32_t j0w1, uint32_t j0w2, uint32_t ctr0,
                 uint8_t* data, uint64_t nbytes) {
    const uint32_t lane = threadIdx.x & 31u;
    const uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    const uint64_t nchunks = (((nbytes + 15u) >> 4) + GCMX_AES_CTR_CHUNK_BLOCKS - 1) / GCMX_AES_CTR_CHUNK_BLOCKS;
    const GcmxAesKey* gkey = reinterpret_cast<const GcmxAesKey*>(key);
    __shared__ __align__(16) GcmxAesKey skey;
    __shared__ __align__(16) uint32_t masks[GCMX_AES_MASK_WORDS];  // round keys as multiply-add masks (aes_bs.cuh)
    for (uint32_t i = threadIdx.x; i < sizeof(GcmxAesKey) / 4u; i += blockDim.x)
        reinterpret_cast<uint32_t*>(&skey)[i] = reinterpret_cast<const uint32_t*>(gkey)[i];
    gcmx_aes_fill_masks(*gkey, masks, threadIdx.x, blockDim.x);
    __syncthreads();
    for (uint64_t c = warp; c < nchunks; c += nwarps)
        gcmx_aes_ctr_chunk(skey, masks, nr, j0w0, j0w1, j0w2, ctr0, data, nbytes, c, lane);
    __syncthreads();  // every warp is done with the key and the masks
    volatile uint32_t* vk = reinterpret_cast<volatile uint32_t*>(&skey);
    volatile uint32_t* vm = masks;
    for (uint32_t i = threadIdx.x; i < sizeof(GcmxAesKey) / 4u; i += blockDim.x) vk[i] = 0u;
    for (uint32_t i = threadIdx.x; i < GCMX_AES_MASK_WORDS; i += blockDim.x) vm[i] = 0u;
}
