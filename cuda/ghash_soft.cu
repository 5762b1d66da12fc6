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

/// Resident thread blocks per SM asked of ptxas: 2 (at most 128 registers), the best of the caps tried:
/// 3 blocks spill far more, 1 block leaves half the warps idle (register and spill reports:
/// benches/gpu-notes.md; the few spilled words stay in L1, off the multiply chains). This kernel is the
/// benchmark's baseline, not a library path. Loads per step: 4 (one aggregated reduction): the kernel is
/// bound by the integer multiplies, not memory.
#define GCMX_GHASH_SOFT_MIN_BLOCKS 2
#define GCMX_GHASH_SOFT_LOADS_PER_STEP 4u

extern "C" __global__ void __launch_bounds__(GCMX_GHASH_THREADS, GCMX_GHASH_SOFT_MIN_BLOCKS) gcmx_ghash_soft(GcmxGhashParams p)
{
    gcmx_ghash_kernel_body<false, GCMX_GHASH_SOFT_LOADS_PER_STEP>(p);
}
