// gcm_dbatch.cu -- device-resident batches: many AES-GCM messages whose descriptors, data, AADs, nonces,
// tags and verdicts are in device memory (or page-locked host memory the device addresses), sealed or
// opened in ONE cooperative launch. The caller's descriptors are checked on the device; tags are compared
// on the device; a refused message is given back as its ciphertext on the device (gcmx's forgery policy).
//
// Math (details in gcmx_abi.h, "Device-resident batches", and dbatch.cuh): message of n blocks, front-
// padded to K units of 1024 blocks; unit u's lanes run CTR (counter of real block r = ctr0 + 1 + r mod 2^32)
// and a stride-g Horner GHASH; the unit value Z_u times h^(1024 (K-1-u)) is XOR-ed into the message's
// accumulator S_C; tag = (((Z_A h^n) ^ S_C ^ [bitlen(A) || bitlen(C)]) h) ^ E_K(J0), where E_K(J0) is the
// keystream of counter ctr0, taken from the lane whose range holds it or computed by a J0 lane.
//
// Memory layout: the caller's buffers as in GcmxDbParams; the scratch (gcmx_db_scratch_bytes): barrier
// counter, refused flag and P3's round counter, per-block column counts, the checked descriptors
// (GcmxDbMsg), the accumulators, the E_K(J0) blocks and the column lists. Shared memory per thread block:
// the one-key kernels' AddRoundKey mask table of key 0 (15 KiB, as in gcm_fused.cu), 8 KiB of scan space,
// the round layout, and per thread (P3): its lane's five powers of H (10 KiB), its work item (2.5 KiB), its
// pending unit value.
//
// Work: phases P1..P6 separated by grid barriers (all thread blocks are resident: cooperative launch).
// P1 and P2 take contiguous message ranges per thread block (so that the per-block counts and the scans
// line up), P4 strides over messages by global thread. Each round is one gcmx_aes_ctr_x32 call per lane,
// so rounds cost the same whatever the message sizes; P3 hands them out one at a time from a counter (a
// warp that finishes its rounds sooner takes more, so the phase ends evenly: striding them over the warps
// left a sixth of the warps' time waiting at the barrier after P3, benches/gpu-notes.md); P5 strides over
// the rounds by global warp. Unit lanes load and store as in the fused kernel (a full unit's warp touches
// 512 contiguous bytes per load), with the stores after every 16 (seal) or 8 (open) blocks instead of
// 32 / 16 (GCMX_DB_*_GROUP).
//
// Registers: the AES call needs nearly all 255 registers, and whatever else a lane keeps live across it
// would be spilled to local memory, which nothing clears (keystream words were, before). So a P3 lane
// keeps its powers of H (Q_g..Q_4g and its term's weight Q_(g-i)) in shared memory and reads them on every
// use, and puts its work item in shared memory before the call and reads it back after it (volatile
// accesses, so that ptxas keeps no copy in registers); the thread index and the round counter's address
// are derived afresh there too. ptxas's per-target spill report is in benches/gpu-notes.md.
//
// Secrets: keys and powers of H are read from device memory by index; J0 lives in the scratch from P1 to
// P4 (to P6 for a refused message, whose keystream P5 applies again), E_K(J0) and the accumulators from P3
// to P4; P4 zeroes all three but a refused message's J0, which P6 zeroes (the scratch is also zeroed when
// freed). The one-key kernels clear their shared mask table before they exit; every thread clears its
// powers of H and pending value in shared memory at the end of P3. Nothing secret is in the launch
// parameters.
//
// Launch: cuLaunchCooperativeKernel, block = GCMX_DB_THREADS, grid <= resident blocks per SM x SMs.
#include "dbatch.cuh"
#include "aes_bs.cuh"

/// Round keys from a shared-memory mask table (the one-key kernels): key 0's round-0/1 words through the
/// read-only cache, rounds 2..nr from the table.
struct GcmxDbAesTbl {
    const GcmxAesKey* key;
    const uint32_t* tbl;
    uint32_t nr;
    uint32_t p0, p1, p2;
    __device__ __forceinline__ void operator()(uint32_t ctr_first, uint32_t ctr_stride,
                                               uint4 (&ks)[GCMX_AES_BLOCKS_PER_CALL]) const
    {
        uint32_t rk01[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) rk01[i] = __ldg(&key->rk[i]);
        gcmx_aes_ctr_x32_tbl(rk01, tbl, nr, p0, p1, p2, ctr_first, ctr_stride, ks);
    }
};

/// Grid barrier k of a launch: every thread block's thread 0 publishes its block's writes (fence), counts
/// itself in, and waits until all gridDim.x blocks have: the count reaches bar_base + k gridDim.x (u32
/// arithmetic, compared as a signed difference, so the never-reset counter may wrap).
__device__ __forceinline__ void gcmx_db_grid_sync(uint32_t* bar, uint32_t target)
{
    __syncthreads();
    if (threadIdx.x == 0u) {
        __threadfence();
        atomicAdd(bar, 1u);
        for (;;) {
            uint32_t v;
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory");
            if ((int32_t)(v - target) >= 0) break;
            __nanosleep(64);
        }
        __threadfence();
    }
    __syncthreads();
}

/// *p = v in shared memory, as a volatile store: ordered before the volatile loads of GcmxSmemPowersT
/// that read it back, and not dropped as dead when it clears the slot at the end of the phase.
__device__ __forceinline__ void gcmx_db_smem_store(GcmxU128* p, GcmxU128 v)
{
    asm volatile("st.volatile.shared.v2.u64 [%0], {%1, %2};" ::"r"((uint32_t)__cvta_generic_to_shared(p)),
                 "l"(v.lo), "l"(v.hi)
                 : "memory");
}

/// Volatile shared-memory accesses for what a P3 lane keeps across its AES call (see the body): ptxas may
/// neither drop the store nor forward the value around the load, so the value takes no register meanwhile.
__device__ __forceinline__ void gcmx_db_smem_store_u32(uint32_t* p, uint32_t v)
{
    asm volatile("st.volatile.shared.u32 [%0], %1;" ::"r"((uint32_t)__cvta_generic_to_shared(p)), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t gcmx_db_smem_load_u32(const uint32_t* p)
{
    uint32_t v;
    asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v) : "r"((uint32_t)__cvta_generic_to_shared(p)) : "memory");
    return v;
}
/// A 64-bit shared-memory store and load that ptxas neither drops, caches in a register nor hoists (the
/// round count of P3, a thread's next round in P5).
__device__ __forceinline__ void gcmx_db_smem_store_u64(uint64_t* p, uint64_t v)
{
    asm volatile("st.volatile.shared.u64 [%0], %1;" ::"r"((uint32_t)__cvta_generic_to_shared(p)), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t gcmx_db_smem_load_u64(const uint64_t* p)
{
    uint64_t v;
    asm volatile("ld.volatile.shared.u64 %0, [%1];" : "=l"(v) : "r"((uint32_t)__cvta_generic_to_shared(p)) : "memory");
    return v;
}
/// threadIdx.x read afresh (volatile), so that ptxas does not keep addresses derived from it live across
/// the AES call.
__device__ __forceinline__ uint32_t gcmx_db_tid()
{
    uint32_t t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
}

/// A lane's work item in shared memory (one slot per thread), written before and read after the lane call.
struct GcmxDbWorkSlots {
    uint32_t kind[GCMX_DB_THREADS], msg[GCMX_DB_THREADS], unit[GCMX_DB_THREADS], i[GCMX_DB_THREADS],
        g[GCMX_DB_THREADS];
    __device__ __forceinline__ void put(uint32_t t, const GcmxDbWork& w)
    {
        gcmx_db_smem_store_u32(&kind[t], w.kind);
        gcmx_db_smem_store_u32(&msg[t], w.msg);
        gcmx_db_smem_store_u32(&unit[t], w.unit);
        gcmx_db_smem_store_u32(&i[t], w.i);
        gcmx_db_smem_store_u32(&g[t], w.g);
    }
    __device__ __forceinline__ GcmxDbWork get(uint32_t t) const
    {
        GcmxDbWork w;
        w.kind = gcmx_db_smem_load_u32(&kind[t]);
        w.msg = gcmx_db_smem_load_u32(&msg[t]);
        w.unit = gcmx_db_smem_load_u32(&unit[t]);
        w.i = gcmx_db_smem_load_u32(&i[t]);
        w.g = gcmx_db_smem_load_u32(&g[t]);
        return w;
    }
};

/// P3's round counter in the scratch (derived from the launch parameters at each use, which keeps it out
/// of the registers that the AES call needs).
__device__ __forceinline__ unsigned long long* gcmx_db_round_ctr(const GcmxDbParams& p)
{
    return reinterpret_cast<unsigned long long*>(p.scratch + GCMX_DB_SCR_ROUND);
}

/// P3: the calling warp's next round (every lane calls, converged): lane 0 takes it from the launch's
/// counter, so that warps that finish their rounds sooner take more of them and the phase ends evenly
/// (rounds strided over the warps left warps waiting at the barrier after P3; benches/gpu-notes.md).
__device__ __forceinline__ uint64_t gcmx_db_next_round(unsigned long long* ctr)
{
    unsigned long long r = 0u;
    if (threadIdx.x % GCMX_WARP_SIZE == 0u) r = atomicAdd(ctr, 1ull);
    return __shfl_sync(GCMX_FULL_WARP_MASK, r, 0);
}

/// acc ^= v, atomically (other warps add other units of the same message).
__device__ __forceinline__ void gcmx_db_acc_xor(GcmxU128* acc, GcmxU128 v)
{
    atomicXor(reinterpret_cast<unsigned long long*>(&acc->lo), (unsigned long long)v.lo);
    atomicXor(reinterpret_cast<unsigned long long*>(&acc->hi), (unsigned long long)v.hi);
}

/// Inclusive scan over the block's threads of GCMX_DB_COLS columns (Hillis-Steele in shared memory):
/// `ex` receives thread t's exclusive prefix, `total` the block's sums. All threads call.
__device__ __forceinline__ void gcmx_db_block_scan(uint64_t (&scan)[GCMX_DB_COLS][GCMX_DB_THREADS],
                                                   const uint64_t (&inc)[GCMX_DB_COLS], uint64_t (&ex)[GCMX_DB_COLS],
                                                   uint64_t (&total)[GCMX_DB_COLS])
{
    const uint32_t t = threadIdx.x;
#pragma unroll
    for (uint32_t c = 0; c < GCMX_DB_COLS; c++) scan[c][t] = inc[c];
    __syncthreads();
    for (uint32_t off = 1u; off < GCMX_DB_THREADS; off <<= 1) {
        uint64_t v[GCMX_DB_COLS];
#pragma unroll
        for (uint32_t c = 0; c < GCMX_DB_COLS; c++) v[c] = t >= off ? scan[c][t - off] : 0u;
        __syncthreads();
#pragma unroll
        for (uint32_t c = 0; c < GCMX_DB_COLS; c++) scan[c][t] += v[c];
        __syncthreads();
    }
#pragma unroll
    for (uint32_t c = 0; c < GCMX_DB_COLS; c++) {
        ex[c] = scan[c][t] - inc[c];
        total[c] = scan[c][GCMX_DB_THREADS - 1u];
    }
    __syncthreads(); // the next scan may overwrite
}

template <bool ONE_KEY, bool DECRYPT> __device__ __forceinline__ void gcmx_dbatch_body(const GcmxDbParams& p)
{
    __shared__ __align__(16) uint32_t masks[ONE_KEY ? GCMX_AES_MASK_WORDS : 4u];
    __shared__ uint64_t scan[GCMX_DB_COLS][GCMX_DB_THREADS];
    __shared__ GcmxDbLayout layout;
    // P3: each lane's pending weighted unit value and its message (shared memory rather than registers:
    // the kernel uses every register, and a spilled value would sit in local memory, which nothing clears;
    // this is cleared at exit).
    __shared__ __align__(16) GcmxU128 pend_v[GCMX_DB_THREADS];
    __shared__ uint32_t pend_k[GCMX_DB_THREADS];
    // P3: each lane's Horner powers Q_g..Q_4g, column t (read on every use, so that they take no registers
    // across the AES call and the lane's loads; cleared at the end of P3).
    __shared__ __align__(16) GcmxU128 lane_pw[GCMX_DB_LANE_POWERS][GCMX_DB_THREADS];
    __shared__ GcmxDbWorkSlots lane_w;
    // P5 (open kernels): each thread's next round (shared memory, for the same reason as the work item).
    __shared__ uint64_t p5_round[DECRYPT ? GCMX_DB_THREADS : 1u];
    constexpr bool CL = GCMX_DEFAULT_CLMAD;
    const uint32_t t = threadIdx.x, b = blockIdx.x, grid = gridDim.x, n = p.nmsgs;
    uint8_t* scr = reinterpret_cast<uint8_t*>(p.scratch);
    uint32_t* bar = reinterpret_cast<uint32_t*>(scr);
    uint32_t* refused = bar + 1;
    uint64_t* blk = reinterpret_cast<uint64_t*>(scr + GCMX_DB_SCR_BLK);
    GcmxDbMsg* msgs = reinterpret_cast<GcmxDbMsg*>(scr + gcmx_db_scr_msgs(grid));
    GcmxU128* acc = reinterpret_cast<GcmxU128*>(scr + gcmx_db_scr_acc(n, grid));
    uint8_t* ekj0 = scr + gcmx_db_scr_ekj0(n, grid);
    uint32_t* slots = reinterpret_cast<uint32_t*>(scr + gcmx_db_scr_slots(n, grid));
    const GcmxKeyPowers* kps = reinterpret_cast<const GcmxKeyPowers*>(p.key_powers);
    const GcmxAesKey* keys = reinterpret_cast<const GcmxAesKey*>(p.keys);
    uint8_t* data = reinterpret_cast<uint8_t*>(p.data);
    uint8_t* tags = reinterpret_cast<uint8_t*>(p.tags);
    uint8_t* verdicts = reinterpret_cast<uint8_t*>(p.verdicts);
    if constexpr (ONE_KEY) gcmx_aes_fill_masks(keys[0], masks, t, blockDim.x); // read in P3, after two barriers

    // P1: this block's contiguous range of messages.
    const uint64_t per = ((uint64_t)n + grid - 1u) / grid;
    const uint32_t lo = (uint32_t)(per * b < n ? per * b : n), hi = (uint32_t)(per * (b + 1u) < n ? per * (b + 1u) : n);
    if (b == 0u && t == 0u) {
        *refused = 0u;
        *gcmx_db_round_ctr(p) = 0u; // read in P3, after two grid barriers
    }
    uint64_t mine[GCMX_DB_COLS];
#pragma unroll
    for (uint32_t c = 0; c < GCMX_DB_COLS; c++) mine[c] = 0u;
    for (uint32_t k = lo + t; k < hi; k += GCMX_DB_THREADS) {
        GcmxDbMsg m;
        gcmx_db_prepare<CL>(p, k, m);
        msgs[k] = m;
        acc[k] = gcmx_u128(0u, 0u);
        uint64_t inc[GCMX_DB_COLS];
        gcmx_db_incs(m, inc);
#pragma unroll
        for (uint32_t c = 0; c < GCMX_DB_COLS; c++) mine[c] += inc[c];
    }
    {
        uint64_t ex[GCMX_DB_COLS], total[GCMX_DB_COLS];
        gcmx_db_block_scan(scan, mine, ex, total);
        // The sums are still in the scan's last row (read there: an index t into `total` would put the
        // array in local memory).
        if (t < GCMX_DB_COLS) blk[(uint64_t)b * GCMX_DB_COLS + t] = scan[t][GCMX_DB_THREADS - 1u];
    }
    gcmx_db_grid_sync(bar, p.bar_base + 1u * grid);

    // P2: prefix over the blocks, then inside this block's range.
    uint64_t run[GCMX_DB_COLS];
    {
        uint64_t before[GCMX_DB_COLS], all[GCMX_DB_COLS], ex[GCMX_DB_COLS], total[GCMX_DB_COLS];
#pragma unroll
        for (uint32_t c = 0; c < GCMX_DB_COLS; c++) before[c] = all[c] = 0u;
        for (uint32_t j = t; j < grid; j += GCMX_DB_THREADS) {
#pragma unroll
            for (uint32_t c = 0; c < GCMX_DB_COLS; c++) {
                const uint64_t v = blk[(uint64_t)j * GCMX_DB_COLS + c];
                all[c] += v;
                if (j < b) before[c] += v;
            }
        }
        gcmx_db_block_scan(scan, before, ex, total);
#pragma unroll
        for (uint32_t c = 0; c < GCMX_DB_COLS; c++) run[c] = total[c];
        gcmx_db_block_scan(scan, all, ex, total);
        if (t == 0u) layout = gcmx_db_layout(total);
        __syncthreads();
    }
    for (uint32_t k0 = lo; k0 < hi; k0 += GCMX_DB_THREADS) {
        const uint32_t k = k0 + t;
        uint64_t inc[GCMX_DB_COLS], ex[GCMX_DB_COLS], total[GCMX_DB_COLS];
        GcmxDbMsg m;
        if (k < hi) {
            m = msgs[k];
            gcmx_db_incs(m, inc);
        } else {
#pragma unroll
            for (uint32_t c = 0; c < GCMX_DB_COLS; c++) inc[c] = 0u;
        }
        gcmx_db_block_scan(scan, inc, ex, total);
        if (k < hi) {
            uint64_t off[GCMX_DB_COLS];
#pragma unroll
            for (uint32_t c = 0; c < GCMX_DB_COLS; c++) off[c] = run[c] + ex[c];
            gcmx_db_place(m, k, off, layout, slots);
            msgs[k].full_first = m.full_first;
        }
#pragma unroll
        for (uint32_t c = 0; c < GCMX_DB_COLS; c++) run[c] += total[c];
    }
    gcmx_db_grid_sync(bar, p.bar_base + 2u * grid);

    // P3: rounds, by global warp. Each group leader keeps the weighted unit values of one message and
    // adds them to its accumulator when the message changes (one atomic pair per message and warp).
    const uint32_t lane = t % GCMX_WARP_SIZE;
    pend_k[t] = 0xffffffffu;
    pend_v[t] = gcmx_u128(0u, 0u);
    for (uint64_t r = gcmx_db_next_round(gcmx_db_round_ctr(p));
         r < gcmx_db_smem_load_u64(&layout.start[GCMX_DB_COLS]);) {
        GcmxU128 v = gcmx_u128(0u, 0u);
        {
            const GcmxDbWork w = gcmx_db_work(layout, r, lane, msgs, n, slots);
            lane_w.put(t, w);
            if (w.kind != GCMX_DB_IDLE) {
                const GcmxDbMsg m = msgs[w.msg];
                const GcmxKeyPowers& kp = kps[m.key];
#pragma unroll
                for (uint32_t k = 0; k < GCMX_DB_LANE_POWERS; k++)
                    gcmx_db_smem_store(&lane_pw[k][t], gcmx_db_lane_power(kp, w, k));
                const GcmxSmemPowersT<GCMX_DB_THREADS> pw = {&lane_pw[0][t]};
                if constexpr (ONE_KEY) {
                    const GcmxDbAesTbl aes = {keys, masks, p.nr, m.j0[0], m.j0[1], m.j0[2]};
                    v = gcmx_db_lane<CL, DECRYPT>(aes, pw, data, m, w, ekj0 + (uint64_t)GCMX_BLOCK_BYTES * w.msg);
                } else {
                    const GcmxAesCtrKey aes = {keys + m.key, m.j0[0], m.j0[1], m.j0[2]};
                    v = gcmx_db_lane<CL, DECRYPT>(aes, pw, data, m, w, ekj0 + (uint64_t)GCMX_BLOCK_BYTES * w.msg);
                }
            }
        }
        const uint32_t tt = gcmx_db_tid();
        const GcmxDbWork w = lane_w.get(tt);
        // XOR over each aligned group of g lanes (idle and J0 lanes have g = 1 and stay alone).
#pragma unroll
        for (uint32_t off = GCMX_WARP_SIZE / 2u; off != 0u; off >>= 1) {
            const uint64_t vlo = __shfl_xor_sync(GCMX_FULL_WARP_MASK, v.lo, off);
            const uint64_t vhi = __shfl_xor_sync(GCMX_FULL_WARP_MASK, v.hi, off);
            if (off < w.g) {
                v.lo ^= vlo;
                v.hi ^= vhi;
            }
        }
        if (w.kind == GCMX_DB_UNIT && w.i == 0u) {
            const GcmxDbMsg& m = msgs[w.msg];
            v = gcmx_db_weight<CL>(v, m, kps[m.key], w.unit);
            const uint32_t cur = pend_k[tt];
            if (w.msg != cur) {
                if (cur != 0xffffffffu) gcmx_db_acc_xor(&acc[cur], pend_v[tt]);
                pend_k[tt] = w.msg;
                pend_v[tt] = v;
            } else {
                pend_v[tt] = gcmx_xor128(pend_v[tt], v);
            }
        }
        r = gcmx_db_next_round(gcmx_db_round_ctr(p));
    }
    {
        const uint32_t tt = gcmx_db_tid();
        if (pend_k[tt] != 0xffffffffu) gcmx_db_acc_xor(&acc[pend_k[tt]], pend_v[tt]);
        pend_v[tt] = gcmx_u128(0u, 0u);
#pragma unroll
        for (uint32_t k = 0; k < GCMX_DB_LANE_POWERS; k++) gcmx_db_smem_store(&lane_pw[k][tt], gcmx_u128(0u, 0u));
    }
    gcmx_db_grid_sync(bar, p.bar_base + 3u * grid);

    // P4: tags and verdicts, by global thread; the message's secrets in the scratch are zeroed.
    for (uint64_t k = (uint64_t)b * GCMX_DB_THREADS + t; k < n; k += (uint64_t)grid * GCMX_DB_THREADS) {
        GcmxDbMsg& m = msgs[k];
        uint8_t* slot = tags + GCMX_BLOCK_BYTES * k;
        uint32_t verdict = GCMX_VERDICT_INVALID;
        if ((m.info & GCMX_DB_INFO_VALID) != 0u) {
            uint8_t* e = ekj0 + GCMX_BLOCK_BYTES * k;
            verdict = gcmx_db_finish<CL>(p, m, kps[m.key], acc[k], gcmx_load16(e), slot);
            gcmx_store16(e, gcmx_u4(0u, 0u, 0u, 0u));
            acc[k] = gcmx_u128(0u, 0u);
            // A refused message keeps its J0 for P5, which applies its keystream again; P6 zeroes it. (A
            // seal kernel refuses nothing.)
            if (DECRYPT && verdict == GCMX_VERDICT_REFUSED) {
                m.info |= GCMX_DB_INFO_REFUSED;
                atomicOr(refused, 1u);
            } else {
                m.j0[0] = m.j0[1] = m.j0[2] = m.j0[3] = 0u;
            }
        } else if (p.mode != GCMX_DB_OPEN) {
            gcmx_store16(slot, gcmx_u4(0u, 0u, 0u, 0u));
        }
        verdicts[k] = (uint8_t)verdict;
    }
    gcmx_db_grid_sync(bar, p.bar_base + 4u * grid);

    // P5: every block of a refused message gets its keystream again, which gives the caller back the
    // ciphertext it passed in (the same lanes as P3); then, after barrier 5, P6 zeroes the J0s P4 kept.
    // When no tag was wrong, each block only counts itself in at barrier 5, so every launch of an open
    // kernel adds GCMX_DB_BARRIERS_OPEN x grid to the counter. A seal kernel never runs in OPEN mode and
    // refuses nothing: it has neither phase nor barrier 5 and ends after barrier 4 (GCMX_DB_BARRIERS_SEAL;
    // its branch below is never taken).
    if constexpr (DECRYPT) {
        const bool restore = p.mode == GCMX_DB_OPEN && *reinterpret_cast<volatile uint32_t*>(refused) != 0u;
        if (restore) {
            // As in P3, only the keystream stays in registers across the AES call: the round and the work
            // item wait in shared memory, and everything else is derived afresh after the call.
            gcmx_db_smem_store_u64(&p5_round[t], (uint64_t)b * GCMX_DB_WARPS + t / GCMX_WARP_SIZE);
            for (;;) {
                const uint32_t tt = gcmx_db_tid();
                const uint64_t r = gcmx_db_smem_load_u64(&p5_round[tt]);
                if (r >= gcmx_db_smem_load_u64(&layout.start[GCMX_DB_COLS])) break;
                gcmx_db_smem_store_u64(&p5_round[tt], r + (uint64_t)gridDim.x * GCMX_DB_WARPS);
                {
                    const GcmxDbWork w = gcmx_db_work(layout, r, tt % GCMX_WARP_SIZE, msgs, n, slots);
                    if (w.kind != GCMX_DB_UNIT || (msgs[w.msg].info & GCMX_DB_INFO_REFUSED) == 0u) continue;
                    lane_w.put(tt, w);
                }
                uint4 ks[GCMX_AES_BLOCKS_PER_CALL];
                {
                    const GcmxDbWork w = lane_w.get(tt);
                    const GcmxDbMsg m = msgs[w.msg];
                    const uint32_t ctr = gcmx_db_restore_ctr(m, w);
                    if constexpr (ONE_KEY) {
                        const GcmxDbAesTbl aes = {keys, masks, p.nr, m.j0[0], m.j0[1], m.j0[2]};
                        aes(ctr, w.g, ks);
                    } else {
                        const GcmxAesCtrKey aes = {keys + m.key, m.j0[0], m.j0[1], m.j0[2]};
                        aes(ctr, w.g, ks);
                    }
                }
                const GcmxDbWork w = lane_w.get(gcmx_db_tid());
                gcmx_db_restore_apply(data, msgs[w.msg], w, ks);
            }
            gcmx_db_grid_sync(bar, p.bar_base + 5u * grid);
            // P6: the kept J0s.
            for (uint64_t k = (uint64_t)b * GCMX_DB_THREADS + t; k < n; k += (uint64_t)grid * GCMX_DB_THREADS) {
                GcmxDbMsg& m = msgs[k];
                m.j0[0] = m.j0[1] = m.j0[2] = m.j0[3] = 0u;
            }
        } else {
            __syncthreads();
            if (t == 0u) {
                __threadfence();
                atomicAdd(bar, 1u);
            }
        }
    } else if (p.mode == GCMX_DB_OPEN && *reinterpret_cast<volatile uint32_t*>(refused) != 0u) {
        // Never taken: a seal kernel runs only in SEAL mode. It is compiled all the same because ptxas
        // allocates the seal kernels' P3 better with it (on sm_90: no spill instead of 8 bytes, and about
        // 2 % more device-batch seal throughput on an H200; benches/gpu-notes.md): it is the refusal phase
        // the seal kernels carried before P5 gave refused messages their ciphertext back.
        for (uint64_t r = (uint64_t)b * GCMX_DB_WARPS + t / GCMX_WARP_SIZE; r < layout.start[GCMX_DB_COLS];
             r += (uint64_t)grid * GCMX_DB_WARPS) {
            const GcmxDbWork w = gcmx_db_work(layout, r, t % GCMX_WARP_SIZE, msgs, n, slots);
            if (w.kind == GCMX_DB_UNIT && (msgs[w.msg].info & GCMX_DB_INFO_REFUSED) != 0u)
                gcmx_db_wipe_lane(data, msgs[w.msg], w);
        }
    }
    if constexpr (ONE_KEY) gcmx_smem_wipe(masks, GCMX_AES_MASK_WORDS); // its last readers (P3, P5) ended at a barrier
}

/// Seal, nkeys == 1 (round keys from the shared mask table).
extern "C" __global__ void __launch_bounds__(GCMX_DB_THREADS, 1) gcmx_dbatch_seal1(GcmxDbParams p)
{
    gcmx_dbatch_body<true, false>(p);
}

/// Open or expect, nkeys == 1.
extern "C" __global__ void __launch_bounds__(GCMX_DB_THREADS, 1) gcmx_dbatch_open1(GcmxDbParams p)
{
    gcmx_dbatch_body<true, true>(p);
}

/// Seal, any number of keys (round keys from each message's key).
extern "C" __global__ void __launch_bounds__(GCMX_DB_THREADS, 1) gcmx_dbatch_sealn(GcmxDbParams p)
{
    gcmx_dbatch_body<false, false>(p);
}

/// Open or expect, any number of keys.
extern "C" __global__ void __launch_bounds__(GCMX_DB_THREADS, 1) gcmx_dbatch_openn(GcmxDbParams p)
{
    gcmx_dbatch_body<false, true>(p);
}
