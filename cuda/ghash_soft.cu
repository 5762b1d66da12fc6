// ghash_soft.cu -- GHASH of a device buffer with a software carry-less multiply (no clmad): the
// baseline the benchmark compares gcmx_ghash_clmad against, and the GHASH used everywhere when the
// build has only an nvcc older than 13.3.
//
// Math: as ghash_clmad.cu (POLYVAL, Montgomery dot, 4 blocks per reduction), but each 64x64 carry-less
// product is Karatsuba over 32-bit halves, each 32x32 one `bmul32` = 16 integer multiplies of operands
// masked to every 4th bit (ghash.cuh explains why no carry corrupts the result); the 128x128 product is
// Karatsuba over 64-bit halves (3 clmul64 = 9 bmul32 = 144 IMAD.WIDE per block product). The reduction
// uses shifts: C = 0xC2 << 56 has only bits 63, 62, 57 set. Constant-time: integer multiplies, no
// table, no data-dependent branch.
//
// Memory layout and launch: identical to gcmx_ghash_clmad (gcmx_abi.h GHASH constants and power table),
// so the two kernels are interchangeable.
#include "ghash.cuh"

/// Resident thread blocks per SM asked of ptxas: 1 (up to 255 registers). The four independent Karatsuba
/// products of an aggregated step give ptxas much ILP and many live values: with sm_90 and nvcc 13.5 it
/// uses 255 registers and spills 32 bytes; a cap of 128 (2 blocks) spills 608 bytes. Loads per step: 4
/// (one aggregated reduction); 8 would raise the pressure further for no gain in a compute-bound kernel.
#define GCMX_GHASH_SOFT_MIN_BLOCKS 1
#define GCMX_GHASH_SOFT_LOADS_PER_STEP 4u

extern "C" __global__ void __launch_bounds__(GCMX_GHASH_THREADS, GCMX_GHASH_SOFT_MIN_BLOCKS) gcmx_ghash_soft(GcmxGhashParams p)
{
    gcmx_ghash_kernel_body<false, GCMX_GHASH_SOFT_LOADS_PER_STEP>(p);
}
