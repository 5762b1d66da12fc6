// gcm_fused.cu -- fused AES-GCM encryption / decryption of one message (or one chunk of it) in device
// memory: the input is read once, the output written once, and the ciphertext is hashed from registers.
//
// Math. Keystream for real block r of this launch: K_r = AES_K(J0[0..12] || be32(ctr_first + r))
// (mod 2^32 counter; ctr_first = ctr0 + 1 + the launch's first block within the message). Output
// O_r = I_r ^ K_r (only the real bytes of a last partial block). Ciphertext C = O (encrypt) or I
// (decrypt), zero-padded to whole blocks, is hashed in POLYVAL form (ghash.cuh): one partial
// Z_j = sum C_i h^(SPAN-i+1) per thread block over its SPAN-block run; the host folds the partials
// with Q_SPAN and adds the AAD, the length block and E_K(J0).
//
// Index mapping (GHASH padding is at the FRONT, counters follow the REAL index). Let nblocks =
// ceil(nbytes/16), grid = ceil(nblocks / SPAN), pad = grid*SPAN - nblocks. Virtual block v (0 <= v <
// grid*SPAN) is real block r = v - pad when v >= pad, else an implicit zero block (never loaded, never
// stored, hashed as zero; its keystream, if computed, is discarded). Thread block j owns virtual blocks
// [j*SPAN, (j+1)*SPAN); warp w of it [j*SPAN + w*WARP_SPAN, +WARP_SPAN) = 4 chunks of 1024 blocks; in
// chunk c (virtual base vb), lane l handles v = vb + l + 32k for k = 0..31 with ONE call
//   gcmx_aes_ctr_x32(key, J0 words 0..2, ctr_first + (vb + l - pad) mod 2^32, 32, ks)
// so that ks[k] is the keystream of real block vb + l + 32k - pad: the k-th warp-wide load and store
// touch 512 contiguous bytes. Before the AES call each lane asks L2 for 4 of the chunk's 128 lines
// (prefetch.global.L2), so the loads after it hit L2. A chunk entirely in the padding is skipped (the
// lane's Horner state is still 0 there, since padding precedes every real block). Then, per group of 4
// blocks: load, XOR, one Horner step (stride 32, powers Q_32..Q_128 read from shared memory); the
// stores come after all loads of the chunk (encrypt) or of each half (decrypt, which holds more values):
// `in` may equal `out`, so a store between loads would serialize the loads on memory latency (the
// measurement is in benches/gpu-notes.md).
// With SPAN = 16384 blocks (256 KiB) and 128-thread blocks (gcmx_abi.h GCMX_FUSED_*): thread t = 32w + l
// ends with dot(acc, Q_e(t)), e(t) = (3-w)*4096 + 32 - l (power table entry 4 + t), and the block
// XOR-reduces the 128 terms into partials[j].
//
// AES: `gcmx_aes_ctr_x32` from aes_bs.cuh (bitsliced, table-free, constant-time). It is
// called once per lane per chunk by every lane of a warp at the same point (warp-uniform control flow),
// but it must not rely on warp-collective operations (the device-batch kernel calls it per lane).
// Secrets: the expanded key and the counter block (J0 words, first counter) are read from device memory
// (GcmxGcmParams.key, .ctr), never from the launch parameters; the AES call loads the words it needs
// there through the read-only data cache, and the AddRoundKey mask table is built from the key in
// shared memory (gcmx_aes_fill_masks). After the block's last use of them (the __syncthreads inside
// gcmx_block_xor follows every thread's AES and GHASH work) every thread clears its share of the mask
// table and the stride powers of H; gcmx_block_xor clears the per-warp partial sums. Register spills
// would put secrets (key words, Horner state) in local memory that nobody clears: ptxas reports none for
// these kernels on sm_90, sm_100 and sm_120, and 8 bytes on sm_80/86/89 (reports in benches/gpu-notes.md).
// Launch: grid = ceil(nblocks / GCMX_FUSED_SPAN), block = GCMX_FUSED_THREADS, params GcmxGcmParams.
#include "ghash.cuh"
#include "aes_bs.cuh"

/// The fused kernels' shared memory: the AddRoundKey mask table of the block's key (gcmx_aes_fill_masks,
/// first so that it is 16-byte aligned and read as LDS.128) and the stride powers of H. At file scope,
/// so that every address in it is a constant of the kernel.
struct GcmxFusedShared {
    uint32_t masks[GCMX_AES_MASK_WORDS];
    GcmxU128 stride_pow[GCMX_BLOCKS_PER_REDUCTION];
};
__shared__ __align__(16) GcmxFusedShared gcmx_fused_smem;

/// The fused kernels' callable. The key's round-0/1 words, J0's words and the first counter are read
/// from device memory (the key and counter buffers of the launch) where each AES call needs them,
/// through the read-only data cache (`__ldg`): nothing writes those buffers during the kernel, and
/// saying so lets the compiler schedule these loads across the stores to `out` (which, for all it
/// knows otherwise, could overwrite the key). `offset` counts from the launch's first counter (the
/// kernel passes ctr_first = 0 down to gcmx_gcm_thread).
struct GcmxDevAesCtrDev {
    const GcmxGcmParams* p;  // the launch parameters: addresses and the round count only
    __device__ __forceinline__ void operator()(uint32_t offset, uint32_t ctr_stride,
                                               uint4 (&ks)[GCMX_AES_BLOCKS_PER_CALL]) const
    {
        const GcmxAesKey* key = reinterpret_cast<const GcmxAesKey*>(p->key);
        const GcmxGcmCtr* ctr = reinterpret_cast<const GcmxGcmCtr*>(p->ctr);
        const uint32_t p0 = __ldg(&ctr->j0_prefix[0]);
        const uint32_t p1 = __ldg(&ctr->j0_prefix[1]);
        const uint32_t p2 = __ldg(&ctr->j0_prefix[2]);
        const uint32_t first = __ldg(&ctr->ctr_first) + offset;
        uint32_t rk01[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) rk01[i] = __ldg(&key->rk[i]);
        gcmx_aes_ctr_x32_tbl(rk01, gcmx_fused_smem.masks, p->nr, p0, p1, p2, first, ctr_stride, ks);
    }
};

/// Words of the expanded key (GcmxAesKey is 61 32-bit words).
#define GCMX_AES_KEY_WORDS (sizeof(GcmxAesKey) / 4u)

template <bool DECRYPT> __device__ __forceinline__ void gcmx_gcm_kernel_body(const GcmxGcmParams& p)
{
    GcmxFusedShared& s = gcmx_fused_smem;
    const GcmxU128* powers = reinterpret_cast<const GcmxU128*>(p.powers);
    gcmx_aes_fill_masks(*reinterpret_cast<const GcmxAesKey*>(p.key), s.masks, threadIdx.x, blockDim.x);
    const GcmxSmemPowers pw = gcmx_load_stride_powers(s.stride_pow, powers);  // __syncthreads
    const GcmxDevAesCtrDev aes = {&p};
    const GcmxU128 term = gcmx_gcm_thread<GCMX_DEFAULT_CLMAD, DECRYPT>(
        aes, reinterpret_cast<const uint8_t*>(p.in), reinterpret_cast<uint8_t*>(p.out), p.nbytes,
        0u /* the callable adds the first counter */, powers, pw, blockIdx.x, gridDim.x, threadIdx.x);
    const GcmxU128 z = gcmx_block_xor<GCMX_FUSED_WARPS>(term);  // every thread's work is done past this
    gcmx_smem_wipe(&s, sizeof s / 4u);
    if (threadIdx.x == 0u) reinterpret_cast<GcmxU128*>(p.partials)[blockIdx.x] = z;
}

/// Encrypt: out = in ^ keystream, partials over out.
extern "C" __global__ void __launch_bounds__(GCMX_FUSED_THREADS, GCMX_FUSED_MIN_BLOCKS) gcmx_gcm_encrypt(GcmxGcmParams p)
{
    gcmx_gcm_kernel_body<false>(p);
}

/// Decrypt: out = in ^ keystream, partials over in. The host must not release out before the tag check.
extern "C" __global__ void __launch_bounds__(GCMX_FUSED_THREADS, GCMX_FUSED_MIN_BLOCKS) gcmx_gcm_decrypt(GcmxGcmParams p)
{
    gcmx_gcm_kernel_body<true>(p);
}
