// bandwidth.cu -- memory ceilings for the benchmark: the best a GHASH kernel (read only) and a fused GCM
// kernel (read + write) could reach on this device, measured with the same access pattern.
//
// gcmx_bw_read: the GHASH kernel's layout without the multiplies. Thread block j reads the 16-byte blocks
//   [j*SPAN, (j+1)*SPAN) (SPAN = GCMX_GHASH_SPAN); warp w the run [j*SPAN + w*WARP_SPAN, +WARP_SPAN), lane
//   l the blocks l + 32k (8 independent loads in flight per step), XOR-folding them; the block's fold is
//   written to out[j] (a uint4) so no load can be optimised away. Blocks at or past nbytes/16 are skipped.
//   Launch: grid = ceil(nblocks / GCMX_GHASH_SPAN), block = GCMX_GHASH_THREADS.
// gcmx_bw_copy: out = in. Thread block j copies blocks [j*COPY_SPAN, (j+1)*COPY_SPAN), thread t the
//   blocks j*COPY_SPAN + t + 256k (k < 16): 16 loads issued, then 16 stores (each warp access 512
//   contiguous bytes). Launch: grid = ceil(nblocks / GCMX_BW_COPY_SPAN), block = GCMX_BW_THREADS.
// Both require nbytes % 16 == 0 and 16-byte aligned buffers (the benchmark's own allocations).
#include "ghash.cuh"

#define GCMX_BW_LOADS_PER_STEP 8u

extern "C" __global__ void __launch_bounds__(GCMX_GHASH_THREADS) gcmx_bw_read(GcmxBwParams p)
{
    const uint8_t* in = reinterpret_cast<const uint8_t*>(p.in);
    const uint64_t nblocks = p.nbytes / GCMX_BLOCK_BYTES;
    const uint32_t w = threadIdx.x / GCMX_WARP_SIZE, l = threadIdx.x % GCMX_WARP_SIZE;
    const uint64_t v0 = (uint64_t)blockIdx.x * GCMX_GHASH_SPAN + (uint64_t)w * GCMX_GHASH_WARP_SPAN + l;
    uint4 acc = gcmx_u4(0u, 0u, 0u, 0u);
    const bool full = (uint64_t)(blockIdx.x + 1u) * GCMX_GHASH_SPAN <= nblocks;
    for (uint32_t j = 0; j < GCMX_GHASH_BLOCKS_PER_LANE; j += GCMX_BW_LOADS_PER_STEP) {
        uint4 raw[GCMX_BW_LOADS_PER_STEP];
#pragma unroll
        for (uint32_t k = 0; k < GCMX_BW_LOADS_PER_STEP; k++) {
            const uint64_t v = v0 + (uint64_t)GCMX_WARP_SIZE * (j + k);
            raw[k] = (full || v < nblocks) ? gcmx_load16(in + v * GCMX_BLOCK_BYTES) : gcmx_u4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (uint32_t k = 0; k < GCMX_BW_LOADS_PER_STEP; k++) acc = gcmx_xor4(acc, raw[k]);
    }
    GcmxU128 a = gcmx_u128(((uint64_t)acc.w << 32) | acc.z, ((uint64_t)acc.y << 32) | acc.x);
    a = gcmx_block_xor<GCMX_GHASH_WARPS>(a);
    if (threadIdx.x == 0u) {
        reinterpret_cast<uint4*>(p.out)[blockIdx.x] =
            gcmx_u4((uint32_t)a.lo, (uint32_t)(a.lo >> 32), (uint32_t)a.hi, (uint32_t)(a.hi >> 32));
    }
}

extern "C" __global__ void __launch_bounds__(GCMX_BW_THREADS) gcmx_bw_copy(GcmxBwParams p)
{
    const uint8_t* in = reinterpret_cast<const uint8_t*>(p.in);
    uint8_t* out = reinterpret_cast<uint8_t*>(p.out);
    const uint64_t nblocks = p.nbytes / GCMX_BLOCK_BYTES;
    const uint64_t base = (uint64_t)blockIdx.x * GCMX_BW_COPY_SPAN + threadIdx.x;
    uint4 raw[GCMX_BW_COPY_BLOCKS_PER_LANE];
#pragma unroll
    for (uint32_t k = 0; k < GCMX_BW_COPY_BLOCKS_PER_LANE; k++) {
        const uint64_t v = base + (uint64_t)GCMX_BW_THREADS * k;
        if (v < nblocks) raw[k] = gcmx_load16(in + v * GCMX_BLOCK_BYTES);
    }
#pragma unroll
    for (uint32_t k = 0; k < GCMX_BW_COPY_BLOCKS_PER_LANE; k++) {
        const uint64_t v = base + (uint64_t)GCMX_BW_THREADS * k;
        if (v < nblocks) gcmx_store16(out + v * GCMX_BLOCK_BYTES, raw[k]);
    }
}
