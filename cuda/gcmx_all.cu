// gcmx_all.cu -- the single translation unit that build.rs compiles into the one gcmx fatbin (recipe at
// the top of gcmx_abi.h). It includes every kernel file, and defines two small kernels of its own:
//
// gcmx_fill_powers (GcmxFillPowersParams): table[i] = Q_e(i) for a warp-strided power table (gcmx_abi.h),
//   e(i) = gcmx_strided_pow_exponent(threads, warp_span, i), each thread by square-and-multiply from H'
//   (Q_a . Q_b = Q_(a+b)): at most 2*64 dots per entry. Launch: grid = ceil(count / GCMX_FILL_THREADS),
//   block = GCMX_FILL_THREADS.
// gcmx_abi_info (uint64_t out): <<<1,1>>>, writes GCMX_ABI_INFO_WORDS u32 (see gcmx_abi.h) so the driver
//   can check its mirrored constants and learn whether clmad is compiled in.
#include "ghash.cuh"

#include "ghash_clmad.cu"
#include "ghash_soft.cu"
#include "bandwidth.cu"
#include "gcm_fused.cu"
#include "gcm_dbatch.cu"
#include "aes_key.cu"
#include "aes_ctr.cu"

extern "C" __global__ void __launch_bounds__(GCMX_FILL_THREADS) gcmx_fill_powers(GcmxFillPowersParams p)
{
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.count) return;
    reinterpret_cast<GcmxU128*>(p.table)[i] =
        gcmx_strided_power<GCMX_DEFAULT_CLMAD>(p.h_prime, p.threads, p.warp_span, i);
}

extern "C" __global__ void gcmx_abi_info(uint64_t out)
{
    uint32_t* w = reinterpret_cast<uint32_t*>(out);
    w[0] = GCMX_ABI_VERSION;
    w[1] = GCMX_DEFAULT_CLMAD ? 1u : 0u;
    w[2] = GCMX_GHASH_THREADS;
    w[3] = GCMX_GHASH_SPAN;
    w[4] = GCMX_FUSED_THREADS;
    w[5] = GCMX_FUSED_SPAN;
    w[6] = GCMX_DB_UNIT_BLOCKS;
    w[7] = (uint32_t)sizeof(GcmxGcmParams);
}
