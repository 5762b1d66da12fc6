// dbatch.cuh -- the per-message and per-lane work of the device-resident batch kernels (gcm_dbatch.cu),
// shared with the host emulation in cuda/tests/ghash_host_check.cu, which runs these very functions
// thread by thread. The memory layout, the work split, the phases and the math are written out in
// gcmx_abi.h ("Device-resident batches"); this file follows it:
//   P1  gcmx_db_prepare: one read of the caller's descriptor, the checks, J0, the unit column;
//   P2  gcmx_db_incs / gcmx_db_layout / gcmx_db_place: column counts, round regions, column lists;
//   P3  gcmx_db_work / gcmx_db_lane / gcmx_db_weight: which unit a lane of a round takes, its CTR + GHASH,
//       and the unit value's weight h^(1024 (K-1-u)) in the message's accumulator;
//   P4  gcmx_db_finish: AAD hash, length block, tag, constant-time comparison;
//   P5  gcmx_db_restore_ctr / gcmx_db_restore_apply: the blocks of a refused message given back as their ciphertext (the
//       lane's keystream applied again; gcmx's forgery policy, gcmx_core::backend::Refusal).
// Constant time: branches and memory indices depend on lengths, offsets, key indices and the public
// verdicts only; J0, H, keys, data and tags are never used to choose an address or a branch.
#ifndef GCMX_DBATCH_CUH
#define GCMX_DBATCH_CUH

#include "ghash.cuh"

// Loops over the columns are unrolled on the device: an array indexed by a loop counter would live in
// local memory otherwise.
#if defined(__CUDACC__)
#define GCMX_DB_UNROLL _Pragma("unroll")
#else
#define GCMX_DB_UNROLL
#endif

/// Whether [off, off + len) lies inside a buffer of `size` bytes (overflow-safe).
GCMX_HD bool gcmx_db_in(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

/// Whether descriptor d may run under launch p: GCM limits, key index, nonce, and every range inside its
/// buffer with the alignment the loads need. Zero-length data and AAD need no range.
GCMX_HD bool gcmx_db_valid(const GcmxDbParams& p, const GcmxDevMsg& d)
{
    if (d.data_len > GCMX_P_MAX || d.aad_len > GCMX_A_MAX) return false;
    if (d.key >= p.nkeys || d.nonce_len == 0u) return false;
    if ((p.flags & GCMX_DB_J0_GIVEN) != 0u && d.nonce_len != GCMX_BLOCK_BYTES) return false;
    if (!gcmx_db_in(d.nonce_off, d.nonce_len, p.nonces_len)) return false;
    if (d.data_len != 0u && (d.data_off % GCMX_BLOCK_BYTES != 0u || !gcmx_db_in(d.data_off, d.data_len, p.data_len)))
        return false;
    if (d.aad_len != 0u && (d.aad_off % GCMX_BLOCK_BYTES != 0u || !gcmx_db_in(d.aad_off, d.aad_len, p.aad_len)))
        return false;
    return true;
}

/// J0 (as four little-endian words) from `len` nonce bytes at p (any alignment): 12 bytes -> nonce ||
/// 0^31 || 1; other lengths -> GHASH(nonce || 0-pad || 0^64 || [8 len]_64) with the key's powers;
/// GCMX_DB_J0_GIVEN -> the 16 bytes are J0.
template <bool CL>
GCMX_HD void gcmx_db_j0(const uint8_t* p, uint32_t len, uint32_t flags, const GcmxKeyPowers& kp, uint32_t (&j0)[4])
{
    uint4 b;
    if ((flags & GCMX_DB_J0_GIVEN) != 0u) {
        b = gcmx_load_partial(p, GCMX_BLOCK_BYTES);
    } else if (len == 12u) {
        b = gcmx_load_partial(p, 12u);
        b.w = 0x01000000u; // bytes 00 00 00 01 as a little-endian word
    } else {
        GcmxU128 s = gcmx_hash_bytes<CL, false>(p, len, kp);
        s = gcmx_dot<CL>(gcmx_xor128(s, gcmx_u128(0u, (uint64_t)len * 8u)), kp.q[0]);
        b = gcmx_u128_to_block(s);
    }
    j0[0] = b.x;
    j0[1] = b.y;
    j0[2] = b.z;
    j0[3] = b.w;
}

/// log2 of a power of two g <= 32.
GCMX_HD uint32_t gcmx_db_log2(uint32_t g)
{
    uint32_t c = 0u;
    while ((1u << c) < g) c++;
    return c;
}

/// P1, message k: read the caller's descriptor once (volatile: a concurrent writer cannot make the
/// kernel use a value other than the one checked), check it, and fill the checked copy `out`.
/// `kps` are the launch's key powers (for J0 of nonces that are not 12 bytes).
template <bool CL>
GCMX_HD void gcmx_db_prepare(const GcmxDbParams& p, uint32_t k, GcmxDbMsg& out)
{
    const volatile GcmxDevMsg* src = reinterpret_cast<const volatile GcmxDevMsg*>(p.msgs) + k;
    GcmxDevMsg d;
    d.data_off = src->data_off;
    d.data_len = src->data_len;
    d.aad_off = src->aad_off;
    d.aad_len = src->aad_len;
    d.nonce_off = src->nonce_off;
    d.nonce_len = src->nonce_len;
    d.key = src->key;
    GcmxDbMsg m;
    m.data_off = m.data_len = m.aad_off = m.aad_len = 0u;
    m.j0[0] = m.j0[1] = m.j0[2] = m.j0[3] = 0u;
    m.key = 0u;
    m.info = 0u;
    m.full_first = 0u;
    if (gcmx_db_valid(p, d)) {
        const GcmxKeyPowers* kps = reinterpret_cast<const GcmxKeyPowers*>(p.key_powers);
        m.data_len = d.data_len;
        m.data_off = d.data_len != 0u ? d.data_off : 0u;
        m.aad_len = d.aad_len;
        m.aad_off = d.aad_len != 0u ? d.aad_off : 0u;
        m.key = d.key;
        gcmx_db_j0<CL>(reinterpret_cast<const uint8_t*>(p.nonces) + d.nonce_off, d.nonce_len, p.flags, kps[d.key], m.j0);
        uint32_t g0, free_slot;
        const uint32_t units = gcmx_db_units(d.data_len, &g0, &free_slot);
        const uint32_t col = units != 0u ? 1u + gcmx_db_log2(g0) : 0u;
        m.info = GCMX_DB_INFO_VALID | (col << GCMX_DB_INFO_COL_SHIFT) |
                 (units != 0u && free_slot != 0u ? 0u : GCMX_DB_INFO_J0UNIT);
    }
    out = m;
}

/// P2: what message m adds to each column (full units, its unit-0 class, a J0 unit).
GCMX_HD void gcmx_db_incs(const GcmxDbMsg& m, uint64_t (&inc)[GCMX_DB_COLS])
{
    const bool valid = (m.info & GCMX_DB_INFO_VALID) != 0u;
    uint32_t g0, free_slot;
    const uint32_t units = valid ? gcmx_db_units(m.data_len, &g0, &free_slot) : 0u;
    const uint32_t col = (m.info >> GCMX_DB_INFO_COL_SHIFT) & 15u;
    inc[GCMX_DB_COL_FULL] = units != 0u ? units - 1u : 0u;
    GCMX_DB_UNROLL
    for (uint32_t c = 1; c < GCMX_DB_COL_J0; c++) inc[c] = units != 0u && c == col ? 1u : 0u;
    inc[GCMX_DB_COL_J0] = valid && (m.info & GCMX_DB_INFO_J0UNIT) != 0u ? 1u : 0u;
}

/// Where the rounds of each column start, and each column's list in the slots (from the totals).
struct GcmxDbLayout {
    uint64_t start[GCMX_DB_COLS + 1]; // first round of each column; start[GCMX_DB_COLS] = all rounds
    uint64_t count[GCMX_DB_COLS];     // work items of each column
    uint64_t base[GCMX_DB_COLS];      // first slot of each column's list (columns 1..7)
};

/// Work items of column c per round: 1 full unit, 32/g0 unit-0s, 32 J0 units.
GCMX_HD uint32_t gcmx_db_per_round(uint32_t c)
{
    return c == GCMX_DB_COL_FULL ? 1u : (c == GCMX_DB_COL_J0 ? GCMX_WARP_SIZE : (GCMX_WARP_SIZE >> (c - 1u)));
}

GCMX_HD GcmxDbLayout gcmx_db_layout(const uint64_t (&total)[GCMX_DB_COLS])
{
    GcmxDbLayout L;
    uint64_t r = 0u, b = 0u;
    GCMX_DB_UNROLL
    for (uint32_t c = 0; c < GCMX_DB_COLS; c++) {
        const uint64_t per = gcmx_db_per_round(c);
        L.start[c] = r;
        L.count[c] = total[c];
        L.base[c] = c == GCMX_DB_COL_FULL ? 0u : b;
        if (c != GCMX_DB_COL_FULL) b += total[c];
        r += (total[c] + per - 1u) / per;
    }
    L.start[GCMX_DB_COLS] = r;
    return L;
}

/// P2, message k with its exclusive prefix `off` in every column: its first full unit, and its entries in
/// the column lists.
GCMX_HD void gcmx_db_place(GcmxDbMsg& m, uint32_t k, const uint64_t (&off)[GCMX_DB_COLS], const GcmxDbLayout& L,
                           uint32_t* slots)
{
    uint64_t inc[GCMX_DB_COLS];
    gcmx_db_incs(m, inc);
    m.full_first = off[GCMX_DB_COL_FULL];
    GCMX_DB_UNROLL
    for (uint32_t c = 1; c < GCMX_DB_COLS; c++) {
        if (inc[c] != 0u) slots[L.base[c] + off[c]] = k;
    }
}

/// What a lane does in a round.
struct GcmxDbWork {
    uint32_t kind; // GCMX_DB_IDLE, GCMX_DB_UNIT, GCMX_DB_J0
    uint32_t msg;  // message index
    uint32_t unit; // unit u (0 = the front unit)
    uint32_t i;    // lane within the unit's group
    uint32_t g;    // lanes of the group (1 for idle and J0 lanes)
};
#define GCMX_DB_IDLE 0u
#define GCMX_DB_UNIT 1u
#define GCMX_DB_J0 2u

/// P3: the work of `lane` in round r. Column 0: binary search for the last message whose first full unit
/// is <= the round's (zero-unit messages share their start with the next one, so the last such message is
/// the one that owns the unit). Other columns: the column list.
GCMX_HD GcmxDbWork gcmx_db_work(const GcmxDbLayout& L, uint64_t r, uint32_t lane, const GcmxDbMsg* msgs, uint32_t n,
                                const uint32_t* slots)
{
    GcmxDbWork w;
    w.kind = GCMX_DB_IDLE;
    w.msg = w.unit = w.i = 0u;
    w.g = 1u;
    if (r >= L.start[GCMX_DB_COLS]) return w;
    if (r < L.start[1]) {
        uint32_t lo = 0u, hi = n; // invariant: msgs[k].full_first <= r for k < lo
        while (lo < hi) {
            const uint32_t mid = lo + (hi - lo) / 2u;
            if (msgs[mid].full_first <= r) lo = mid + 1u;
            else hi = mid;
        }
        const uint32_t k = lo - 1u; // msgs[0].full_first = 0 <= r, so lo >= 1
        w.kind = GCMX_DB_UNIT;
        w.msg = k;
        w.unit = 1u + (uint32_t)(r - msgs[k].full_first);
        w.i = lane;
        w.g = GCMX_WARP_SIZE;
        return w;
    }
    uint32_t c = 1u;
    while (r >= L.start[c + 1u]) c++;
    const uint64_t q = r - L.start[c];
    if (c == GCMX_DB_COL_J0) {
        const uint64_t s = q * GCMX_WARP_SIZE + lane;
        if (s < L.count[c]) {
            w.kind = GCMX_DB_J0;
            w.msg = slots[L.base[c] + s];
        }
        return w;
    }
    const uint32_t g = 1u << (c - 1u);
    const uint64_t s = q * (GCMX_WARP_SIZE / g) + lane / g;
    if (s < L.count[c]) {
        w.kind = GCMX_DB_UNIT;
        w.msg = slots[L.base[c] + s];
        w.i = lane % g;
        w.g = g;
    }
    return w;
}

/// An AES-CTR callable that also stores keystream block `jsel` of its call (when jsel < 32) at `out`:
/// how the lane whose range holds the counter of J0 keeps E_K(J0). The select runs over all 32 blocks
/// with a public index (no dynamic register index, no branch on data).
template <class Aes> struct GcmxAesTap {
    const Aes* aes;
    uint32_t jsel;
    uint8_t* out;
    GCMX_EXEC_CHECK_DISABLE
    GCMX_HD void operator()(uint32_t ctr_first, uint32_t ctr_stride, uint4 (&ks)[GCMX_AES_BLOCKS_PER_CALL]) const
    {
        (*aes)(ctr_first, ctr_stride, ks);
        if (jsel < GCMX_AES_BLOCKS_PER_CALL) {
            uint4 v = gcmx_u4(0u, 0u, 0u, 0u);
#if defined(__CUDACC__)
#pragma unroll
#endif
            for (uint32_t j = 0; j < GCMX_AES_BLOCKS_PER_CALL; j++) v = j == jsel ? ks[j] : v;
            gcmx_store16(out, v);
        }
    }
};

/// Geometry of a unit lane: the message view (front padding), the unit's first virtual block, and
/// (unit 0 with the free slot, the lane that holds it) the index of E_K(J0) in the lane's call.
struct GcmxDbGeom {
    GcmxMsgView m;
    uint64_t vb;
    uint32_t jsel; // 32: none
};

GCMX_HD GcmxDbGeom gcmx_db_geom(const GcmxDbMsg& msg, const GcmxDbWork& w)
{
    GcmxDbGeom G;
    G.jsel = GCMX_AES_BLOCKS_PER_CALL;
    if (w.kind == GCMX_DB_J0) {
        // No data: every block is past the end; virtual block 0 is counter ctr0 = ctr_first - 1.
        G.m = gcmx_msg_view(0u, 1u);
        G.vb = 0u;
        G.jsel = 0u;
        return G;
    }
    uint32_t g0, free_slot;
    const uint32_t units = gcmx_db_units(msg.data_len, &g0, &free_slot);
    const uint64_t n = (msg.data_len + GCMX_BLOCK_BYTES - 1u) / GCMX_BLOCK_BYTES;
    const uint64_t m0 = n - (uint64_t)GCMX_DB_UNIT_BLOCKS * (units - 1u); // real blocks of unit 0
    G.m = gcmx_msg_view(msg.data_len, (uint64_t)GCMX_DB_UNIT_BLOCKS * units - n);
    const uint64_t span = (uint64_t)GCMX_AES_BLOCKS_PER_CALL * w.g;
    G.vb = w.unit == 0u ? (uint64_t)GCMX_DB_UNIT_BLOCKS - span : (uint64_t)GCMX_DB_UNIT_BLOCKS * w.unit;
    if (w.unit == 0u && free_slot != 0u) {
        const uint64_t off = span - 1u - m0; // virtual block pad - 1, from the start of the lanes' range
        if (off % w.g == w.i) G.jsel = (uint32_t)(off / w.g);
    }
    return G;
}

/// The powers of H a lane uses: k < 4, the Horner powers Q_((k+1) g) = kp.q[(k+1) g - 1]; k = 4, the
/// weight Q_(g-i) of the lane's term.
#define GCMX_DB_LANE_POWERS (GCMX_BLOCKS_PER_REDUCTION + 1u)
GCMX_HD GcmxU128 gcmx_db_lane_power(const GcmxKeyPowers& kp, const GcmxDbWork& w, uint32_t k)
{
    return kp.q[k < GCMX_BLOCKS_PER_REDUCTION ? (k + 1u) * w.g - 1u : w.g - w.i - 1u];
}

/// Blocks a lane loads (and, for OPEN, hashes) before it stores them, in its fast path: smaller groups than
/// the fused kernel's (32 / 16) because a P3 lane holds more state across its AES call; with these, ptxas
/// spills no keystream word (per-target figures in benches/gpu-notes.md).
#define GCMX_DB_SEAL_GROUP 16u
#define GCMX_DB_OPEN_GROUP 8u

/// P3, one lane of a unit (or a J0 lane): CTR over its blocks in place, its Horner state; returns the
/// lane's term dot(acc, Q_(g-i)) (the XOR over the unit's g lanes is the unit value Z_u). E_K(J0) goes to
/// `ekj0` (16 bytes) from the lane that computes it. `pw[k]` = gcmx_db_lane_power(kp, w, k).
GCMX_EXEC_CHECK_DISABLE
template <bool CL, bool DECRYPT, class Aes, class PW>
GCMX_HD GcmxU128 gcmx_db_lane(const Aes& aes, const PW& pw, uint8_t* data, const GcmxDbMsg& msg,
                              const GcmxDbWork& w, uint8_t* ekj0)
{
    const uint32_t g = w.g;
    const GcmxDbGeom G = gcmx_db_geom(msg, w);
    const uint32_t ctr_first = gcmx_bswap32(msg.j0[3]) + 1u;
    uint8_t* base = w.kind == GCMX_DB_UNIT ? data + msg.data_off : data;
    const GcmxAesTap<Aes> tap = {&aes, G.jsel, ekj0};
    constexpr uint32_t GROUP = DECRYPT ? GCMX_DB_OPEN_GROUP : GCMX_DB_SEAL_GROUP;
    const GcmxU128 acc = gcmx_gcm_lane_chunk<CL, DECRYPT, GcmxAesTap<Aes>, PW, GROUP>(
        tap, base, base, G.m, G.vb, w.i, g, ctr_first, pw, gcmx_u128(0u, 0u));
    return gcmx_dot<CL>(acc, pw[GCMX_BLOCKS_PER_REDUCTION]);
}

/// P3: unit u's value Z times its weight h^(1024 (K-1-u)) in the message's ciphertext value.
template <bool CL> GCMX_HD GcmxU128 gcmx_db_weight(GcmxU128 z, const GcmxDbMsg& msg, const GcmxKeyPowers& kp, uint32_t unit)
{
    uint32_t g0, free_slot;
    const uint32_t units = gcmx_db_units(msg.data_len, &g0, &free_slot);
    return gcmx_times_hpow<CL>(z, kp, (uint64_t)(units - 1u - unit) << GCMX_DB_UNIT_LOG2);
}

/// P4, one valid message: the tag from the accumulated ciphertext value `acc` and E_K(J0) `ekj0`. SEAL and
/// EXPECT store it at `tag_slot`; OPEN compares its first tag_len bytes with the 16 bytes there in
/// constant time (one OR over the masked difference). Returns the verdict.
template <bool CL>
GCMX_HD uint32_t gcmx_db_finish(const GcmxDbParams& p, const GcmxDbMsg& msg, const GcmxKeyPowers& kp, GcmxU128 acc,
                                uint4 ekj0, uint8_t* tag_slot)
{
    const uint8_t* aad = reinterpret_cast<const uint8_t*>(p.aad) + msg.aad_off;
    GcmxU128 s = gcmx_hash_bytes<CL, true>(aad, msg.aad_len, kp);
    const uint64_t n = (msg.data_len + GCMX_BLOCK_BYTES - 1u) / GCMX_BLOCK_BYTES;
    s = gcmx_xor128(gcmx_times_hpow<CL>(s, kp, n), acc);
    s = gcmx_dot<CL>(gcmx_xor128(s, gcmx_u128(msg.aad_len * 8u, msg.data_len * 8u)), kp.q[0]);
    const uint4 tag = gcmx_xor4(gcmx_u128_to_block(s), ekj0);
    if (p.mode == GCMX_DB_OPEN) {
        const uint32_t tl = p.tag_len == 0u || p.tag_len > GCMX_BLOCK_BYTES ? GCMX_BLOCK_BYTES : p.tag_len;
        uint4 d = gcmx_xor4(tag, gcmx_load16(tag_slot));
        if (tl < GCMX_BLOCK_BYTES) d = gcmx_keep_bytes(d, tl);
        return (d.x | d.y | d.z | d.w) == 0u ? GCMX_VERDICT_OK : GCMX_VERDICT_REFUSED;
    }
    gcmx_store16(tag_slot, tag);
    return GCMX_VERDICT_OK;
}

/// P5, one lane of a unit of a refused message, in two steps around its AES call (so that the kernel
/// keeps nothing but the keystream live across the call): the first counter of the lane's call, the same
/// as in gcmx_gcm_lane_chunk (stride w.g) ...
GCMX_HD uint32_t gcmx_db_restore_ctr(const GcmxDbMsg& msg, const GcmxDbWork& w)
{
    const GcmxDbGeom G = gcmx_db_geom(msg, w);
    return gcmx_bswap32(msg.j0[3]) + 1u + ((uint32_t)(G.vb + w.i) - (uint32_t)G.m.pad);
}

/// The seal kernels' unreachable refusal branch (gcm_dbatch.cu says why it is compiled): zero the real
/// blocks of one lane of a unit.
GCMX_HD void gcmx_db_wipe_lane(uint8_t* data, const GcmxDbMsg& msg, const GcmxDbWork& w)
{
    if (w.kind != GCMX_DB_UNIT) return;
    const GcmxDbGeom G = gcmx_db_geom(msg, w);
    uint8_t* base = data + msg.data_off;
    const uint4 zero = gcmx_u4(0u, 0u, 0u, 0u);
    GCMX_DB_UNROLL
    for (uint32_t j = 0; j < GCMX_AES_BLOCKS_PER_CALL; j++) {
        const uint64_t v = G.vb + w.i + (uint64_t)w.g * j;
        if (v < G.m.pad) continue;
        const uint64_t r = v - G.m.pad;
        if (r < G.m.nfull) gcmx_store16(base + r * GCMX_BLOCK_BYTES, zero);
        else if (r == G.m.nfull && G.m.tail != 0u) gcmx_store_partial(base + r * GCMX_BLOCK_BYTES, zero, G.m.tail);
    }
}

/// ... and the keystream `ks` of that call applied again to the real blocks the lane decrypted in P3, which
/// turns them back into the ciphertext the caller passed in (gcmx's forgery policy).
GCMX_HD void gcmx_db_restore_apply(uint8_t* data, const GcmxDbMsg& msg, const GcmxDbWork& w,
                                   const uint4 (&ks)[GCMX_AES_BLOCKS_PER_CALL])
{
    if (w.kind != GCMX_DB_UNIT) return;
    const GcmxDbGeom G = gcmx_db_geom(msg, w);
    uint8_t* base = data + msg.data_off;
    GCMX_DB_UNROLL
    for (uint32_t j = 0; j < GCMX_AES_BLOCKS_PER_CALL; j++) {
        const uint64_t v = G.vb + w.i + (uint64_t)w.g * j;
        if (v < G.m.pad) continue;
        const uint64_t r = v - G.m.pad;
        uint8_t* q = base + r * GCMX_BLOCK_BYTES;
        if (r < G.m.nfull) {
            gcmx_store16(q, gcmx_xor4(gcmx_load16(q), ks[j]));
        } else if (r == G.m.nfull && G.m.tail != 0u) {
            gcmx_store_partial(q, gcmx_xor4(gcmx_load_partial(q, G.m.tail), ks[j]), G.m.tail);
        }
    }
}

#endif // GCMX_DBATCH_CUH
