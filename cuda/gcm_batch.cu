// gcm_batch.cu -- many independent AES-GCM messages (each its own key, J0, AAD and length) in three
// launches; the whole tag of every message is computed on the device.
//
// Work split (gcmx_abi.h, "Batch"): a message of n blocks is front-padded to K = ceil(n/1024) units of
// 1024 blocks. Units 1..K-1 are full: one warp each, lane i takes blocks 1024u + i + 32j (j = 0..31) with
// one gcmx_aes_ctr_x32 call (stride 32). Unit 0 holds the m = n - 1024(K-1) real blocks at the end of its
// range and uses only g0 = pow2ceil(ceil(m/32)) lanes: lane i takes virtual blocks 1024 - 32 g0 + i + g0 j
// (stride g0), so a 1 KiB message occupies 2 lanes and 16 such messages share a warp. Counter of real
// block r = v - P (P = 1024K - n): ctr0 + 1 + r. Per-lane Horner with stride g (Q_g..Q_4g from the key's
// table), lane term dot(acc, Q_(g-i)); the terms of a unit's g lanes (aligned within a warp) are XOR-ed
// by shuffles with offsets < g: that is the unit's POLYVAL value Z_u (front zeros do not change it).
// Tags: S_C = fold(S_C h^1024 ^ Z_u), Z_A = AAD value (Horner, 4 blocks per reduction),
// S = ((Z_A h^n) ^ S_C ^ [bitlen(A) || bitlen(C)]) h, tag = S ^ E_K(J0).
//
// Launch 1  gcmx_batch_key_powers: thread = key; H = AES_K(0) (one gcmx_aes_ctr_x32 call, block 0),
//           H' = mulX(H), q[k-1] = Q_k (k <= 128, 127 dots), pow2[i] = Q_(2^i) (31 squarings).
// Launch 2  gcmx_batch_units: thread = global lane (message by binary search over lane_first).
// Launch 3  gcmx_batch_tags: thread = message; E_K(J0) via one gcmx_aes_ctr_x32 call (block 0).
// Shapes: see gcmx_abi.h (GCMX_BATCH_*_THREADS). Params: GcmxBatchParams (same for all three).
// Memory: in/out at data_off (16-byte aligned), AAD at aad_off, keys[] and key_powers[] by key_index,
// unit_partials[unit_first + u], tags + 16*tag_slot. Only real bytes are written to out.
#include "ghash.cuh"
#include "aes_bs.cuh"

extern "C" __global__ void __launch_bounds__(GCMX_BATCH_KEY_THREADS) gcmx_batch_key_powers(GcmxBatchParams p)
{
    const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.nkeys) return;
    gcmx_batch_key_powers_thread<GCMX_DEFAULT_CLMAD>(GcmxDevAesFactory(), p, k);
}

template <bool DECRYPT> __device__ __forceinline__ void gcmx_batch_units_body(const GcmxBatchParams& p)
{
    const uint32_t lane = blockIdx.x * blockDim.x + threadIdx.x;
    const GcmxBatchMsg* msgs = reinterpret_cast<const GcmxBatchMsg*>(p.msgs);
    GcmxBatchLane a;
    if (lane < p.total_lanes) {
        a = gcmx_batch_lane_of(msgs, p.nmsgs, lane);
    } else {
        a.active = 0u;
        a.msg = a.unit = a.i = 0u;
        a.g = 1u;
    }
    GcmxU128 v = gcmx_u128(0u, 0u);
    if (a.active) v = gcmx_batch_unit_lane<GCMX_DEFAULT_CLMAD, DECRYPT>(GcmxDevAesFactory(), p, a);
    // XOR over the aligned group of g lanes (idle lanes have g = 1 and stay out of every group).
#pragma unroll
    for (uint32_t off = GCMX_WARP_SIZE / 2u; off != 0u; off >>= 1) {
        const uint64_t lo = __shfl_xor_sync(GCMX_FULL_WARP_MASK, v.lo, off);
        const uint64_t hi = __shfl_xor_sync(GCMX_FULL_WARP_MASK, v.hi, off);
        if (off < a.g) {
            v.lo ^= lo;
            v.hi ^= hi;
        }
    }
    if (a.active && a.i == 0u) {
        reinterpret_cast<GcmxU128*>(p.unit_partials)[msgs[a.msg].unit_first + a.unit] = v;
    }
}

extern "C" __global__ void __launch_bounds__(GCMX_BATCH_UNIT_THREADS) gcmx_batch_units(GcmxBatchParams p)
{
    if (p.decrypt) gcmx_batch_units_body<true>(p);
    else gcmx_batch_units_body<false>(p);
}

extern "C" __global__ void __launch_bounds__(GCMX_BATCH_TAG_THREADS) gcmx_batch_tags(GcmxBatchParams p)
{
    const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.nmsgs) return;
    gcmx_batch_tag_thread<GCMX_DEFAULT_CLMAD>(GcmxDevAesFactory(), p, k);
}
