// sweep.cu -- launch-configuration experiments for the AES-bound kernels (timing only, no Rust).
//
// One binary per configuration: cuda/tests/run_sweep.sh compiles this file several times with
// different -D overrides of the launch macros (GCMX_AES_CTR_THREADS / _MIN_BLOCKS,
// GCMX_FUSED_THREADS / _MIN_BLOCKS / _CHUNKS_PER_WARP, see gcmx_abi.h and aes_ctr.cu) and runs each
// on the GPU. Each binary prints, per kernel: registers, local (spill) bytes, resident blocks per SM
// (occupancy API), and the median GB/s over REPS timed launches (CUDA events) on SIZE bytes in device
// memory, for AES-128 and AES-256: gcmx_aes_ctr (keystream XOR in place) and gcmx_gcm_encrypt /
// gcmx_gcm_decrypt (fused, in place). It does not check results: correctness of a configuration
// is what cuda/tests/gcmx_device_check.cu and gcmx-cuda-test establish once it is adopted. AES is
// constant-time, so the data (zeros) and the power table (zeros) do not change the timing.
//
// Usage: sweep [GiB (default 4)] [reps (default 7)]
// AES functions host+device, so the host can expand keys with the same code (as aes_host_check.cu does).
#define GCMX_AES_HD __host__ __device__
#include "../gcmx_all.cu"

#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "cu_check.h"

/// Bytes per GB (decimal, as the benchmark tables use).
static const double GB = 1e9;

template <typename F> static double median_ms(int reps, F launch)
{
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i) launch();  // warm-up (clocks ramp up from idle)
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
        CU(cudaEventRecord(e0));
        launch();
        CU(cudaEventRecord(e1));
        CU(cudaGetLastError());
        CU(cudaEventSynchronize(e1));
        float ms = 0.f;
        CU(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms);
    }
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

template <typename K> static void describe(const char* name, K kernel, int threads)
{
    cudaFuncAttributes a;
    CU(cudaFuncGetAttributes(&a, kernel));
    int per_sm = 0;
    CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
    printf("%-18s threads %3d  regs %3d  local %4zu B  blocks/SM %2d  warps/SM %2d\n", name, threads, a.numRegs,
           a.localSizeBytes, per_sm, per_sm * threads / 32);
}

int main(int argc, char** argv)
{
    const uint64_t gib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 4;
    const int reps = argc > 2 ? atoi(argv[2]) : 7;
    const uint64_t n = gib << 30;
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    printf("config: CTR threads %d min_blocks %d | FUSED threads %u min_blocks %u chunks/warp %u | %s, %d SMs\n",
           GCMX_AES_CTR_THREADS, GCMX_AES_CTR_MIN_BLOCKS, GCMX_FUSED_THREADS, GCMX_FUSED_MIN_BLOCKS,
           GCMX_FUSED_CHUNKS_PER_WARP, prop.name, prop.multiProcessorCount);
    describe("gcmx_aes_ctr", gcmx_aes_ctr, GCMX_AES_CTR_THREADS);
    describe("gcmx_gcm_encrypt", gcmx_gcm_encrypt, GCMX_FUSED_THREADS);

    uint8_t *din = nullptr, *dout = nullptr, *dpow = nullptr, *dpart = nullptr;
    CU(cudaMalloc(&din, n));
    CU(cudaMalloc(&dout, n));
    CU(cudaMemset(din, 0, n));
    CU(cudaMalloc(&dpow, GCMX_FUSED_POW_COUNT * sizeof(GcmxU128)));
    CU(cudaMemset(dpow, 0, GCMX_FUSED_POW_COUNT * sizeof(GcmxU128)));
    const uint64_t nblocks = (n + 15) / 16;
    const unsigned fused_grid = (unsigned)((nblocks + GCMX_FUSED_SPAN - 1) / GCMX_FUSED_SPAN);
    CU(cudaMalloc(&dpart, (size_t)fused_grid * sizeof(GcmxU128)));

    int ctr_per_sm = 0;
    CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctr_per_sm, gcmx_aes_ctr, GCMX_AES_CTR_THREADS, 0));
    const uint64_t chunks = (nblocks + GCMX_AES_CTR_CHUNK_BLOCKS - 1) / GCMX_AES_CTR_CHUNK_BLOCKS;
    const uint64_t want = (chunks + GCMX_AES_CTR_WARPS_PER_BLOCK - 1) / GCMX_AES_CTR_WARPS_PER_BLOCK;
    const unsigned ctr_grid = (unsigned)std::min<uint64_t>(want, (uint64_t)prop.multiProcessorCount * ctr_per_sm);

    const uint8_t key_bytes[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                   17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
    for (uint32_t klen : {16u, 32u}) {
        GcmxAesKey key;
        gcmx_aes_expand_key(key_bytes, klen, &key);
        // Kernels read the key and the counter block from device memory (gcmx_abi.h).
        GcmxAesKey* dkey = nullptr;
        GcmxGcmCtr* dctr = nullptr;
        const GcmxGcmCtr ctr = {{0x03020100u, 0x07060504u, 0x0b0a0908u}, 2u};
        CU(cudaMalloc(&dkey, sizeof key));
        CU(cudaMemcpy(dkey, &key, sizeof key, cudaMemcpyHostToDevice));
        CU(cudaMalloc(&dctr, sizeof ctr));
        CU(cudaMemcpy(dctr, &ctr, sizeof ctr, cudaMemcpyHostToDevice));
        const double t_ctr = median_ms(reps, [&] {
            gcmx_aes_ctr<<<ctr_grid, GCMX_AES_CTR_THREADS>>>((uint64_t)(uintptr_t)dkey, key.nr, 0x03020100u, 0x07060504u,
                                                             0x0b0a0908u, 1u, din, n);
        });
        GcmxGcmParams p;
        memset(&p, 0, sizeof p);
        p.in = (uint64_t)(uintptr_t)din;
        p.out = (uint64_t)(uintptr_t)din;  // in place, like the device-resident API
        p.nbytes = n;
        p.powers = (uint64_t)(uintptr_t)dpow;
        p.partials = (uint64_t)(uintptr_t)dpart;
        p.key = (uint64_t)(uintptr_t)dkey;
        p.ctr = (uint64_t)(uintptr_t)dctr;
        p.nr = key.nr;
        const double t_enc = median_ms(reps, [&] { gcmx_gcm_encrypt<<<fused_grid, GCMX_FUSED_THREADS>>>(p); });
        const double t_dec = median_ms(reps, [&] { gcmx_gcm_decrypt<<<fused_grid, GCMX_FUSED_THREADS>>>(p); });
        printf("AES-%u: ctr %7.1f GB/s (grid %u) | fused encrypt %7.1f GB/s | fused decrypt %7.1f GB/s (grid %u)\n",
               8 * klen, n / (t_ctr * 1e-3) / GB, ctr_grid, n / (t_enc * 1e-3) / GB, n / (t_dec * 1e-3) / GB,
               fused_grid);
        CU(cudaFree(dkey));
        CU(cudaFree(dctr));
    }
    CU(cudaFree(din));
    CU(cudaFree(dout));
    CU(cudaFree(dpow));
    CU(cudaFree(dpart));
    return 0;
}
