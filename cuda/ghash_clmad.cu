// ghash_clmad.cu -- GHASH of a device buffer with the PTX clmad carry-less multiply-accumulate.
//
// Math: POLYVAL form of GHASH (ghash.cuh): blocks read big-endian, key H' = mulX(H), dot(a, b) =
// a*b*x^-128 mod P by 8 clmad.{lo,hi}.u64 for the 256-bit product (the accumulator operand folds the
// partial-product XORs) and 4 clmad for the Montgomery reduction with C = 0xC2 << 56. Aggregated
// reduction: 4 blocks per reduction, acc = acc*h^128 + X0*h^96 + X1*h^64 + X2*h^32 + X3, i.e.
// 4 * 8 + 4 = 36 clmad per 4 blocks.
//
// Memory layout (gcmx_abi.h, GHASH constants): thread block j hashes the SPAN = 32768 consecutive
// virtual blocks [j*SPAN, (j+1)*SPAN) of the front-zero-padded message (pad = grid*SPAN - nblocks);
// warp w the run [j*SPAN + w*4096, +4096); lane l the blocks l, l+32, ... of that run (128 per lane,
// 8 independent 16-byte loads in flight per step, each warp-wide load 512 contiguous bytes; the stride
// powers Q_32..Q_128 come from shared memory, table entries 0..3). Lane terms
// are multiplied by h^e(t) with e(t) = (7-w)*4096 + 32 - l (table entry 4 + t), XOR-reduced by warp
// shuffles and across the 8 warps in shared memory; thread 0 writes partials[j].
// Launch: grid = ceil(nblocks / GCMX_GHASH_SPAN), block = GCMX_GHASH_THREADS (256).
//
// Built only with -DGCMX_HAVE_CLMAD=1 (nvcc >= 13.3); otherwise this kernel is absent and
// gcmx_ghash_soft is the only GHASH kernel.
#include "ghash.cuh"

/// Resident thread blocks per SM asked of ptxas: 4, which caps registers at 65536 / (4 * 256) = 64 per
/// thread. With the stride powers read from shared memory (GcmxSmemPowers) the kernel fits that cap
/// without spilling, so 32 warps per SM each keep 8 loads of 16 bytes in flight; keeping the powers in
/// registers would need more and allow only 3 blocks per SM (register reports: benches/gpu-notes.md).
#define GCMX_GHASH_CLMAD_MIN_BLOCKS 4

#if defined(GCMX_HAVE_CLMAD) && GCMX_HAVE_CLMAD
extern "C" __global__ void __launch_bounds__(GCMX_GHASH_THREADS, GCMX_GHASH_CLMAD_MIN_BLOCKS) gcmx_ghash_clmad(GcmxGhashParams p)
{
    gcmx_ghash_kernel_body<true, GCMX_GHASH_LOADS_PER_STEP>(p);
}
#endif
