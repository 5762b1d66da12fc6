// ghash_host_check.cu -- host-side check of the GHASH / GCM kernel math (no GPU needed).
//
// What it does: compiles the device code of ghash.cuh as host code (software carry-less multiply; the
// clmad path exists only on the device and is checked there by the Rust GPU tests) and compares it with
// references written here independently:
//   * carry-less multiply: bit-by-bit 64x64 product;
//   * GHASH: SP 800-38D algorithm 1 (bit-serial multiply in the reflected GCM representation), which
//     shares nothing with the POLYVAL/Montgomery code under test;
//   * AES: a plain byte-oriented FIPS-197 implementation (host only; the stand-in for aes_bs.cuh's
//     gcmx_aes_ctr_x32 with the same interface), and GCM (J0 for any IV length, CTR, tag);
//   * full messages: the GHASH kernel, the fused kernel (encrypt, decrypt, in place, split launches,
//     counter wrap) and the device-resident batch kernel (seal, expect, open with forged tags, invalid
//     descriptors, J0 given) are emulated thread by thread through the very functions the kernels call
//     (gcmx_ghash_thread, gcmx_gcm_thread, gcmx_db_*), including the warp-shuffle group reduction of the
//     batch kernel, and compared with the references;
//   * optionally (argument: a vector file written by run_host_check.sh with Python `cryptography`),
//     AES-GCM ciphertexts and tags of random messages through the reference, the fused emulation and the
//     device-batch emulation.
// Memory layout: messages live in std::vector buffers of exactly their length (build with
// -fsanitize=address to catch any read or write past a message).
//
// Build: nvcc -x cu -std=c++17 -I cuda cuda/tests/ghash_host_check.cu   or
//        g++ -x c++ -std=c++17 -O2 -I cuda cuda/tests/ghash_host_check.cu
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "dbatch.cuh"

// Under nvcc, the bitsliced AES of cuda/aes_bs.cuh compiles for the host too: the fused and
// batch emulations then also run with the real gcmx_aes_ctr_x32 (integration check).
#if defined(__CUDACC__) && __has_include("../aes_bs.cuh")
#define GCMX_AES_HD __host__ __device__
#include "../aes_bs.cuh"
#define HAVE_REAL_AES 1
#else
#define HAVE_REAL_AES 0
#endif

typedef unsigned __int128 u128r;

static int g_failures = 0;
static int g_checks = 0;
#define CHECK(cond, ...)                                                                                      \
    do {                                                                                                      \
        g_checks++;                                                                                           \
        if (!(cond)) {                                                                                        \
            g_failures++;                                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                              \
            fprintf(stderr, __VA_ARGS__);                                                                     \
            fprintf(stderr, "\n");                                                                            \
        }                                                                                                     \
    } while (0)

// ------------------------------------------------------------------------------------------------
// Deterministic random numbers (xorshift64*).
// ------------------------------------------------------------------------------------------------
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd64()
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dull;
}
static void rnd_bytes(uint8_t* p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rnd64();
}
static u128r rnd128() { return ((u128r)rnd64() << 64) | rnd64(); }

static u128r to_r(GcmxU128 a) { return ((u128r)a.hi << 64) | a.lo; }
static GcmxU128 from_r(u128r v) { return gcmx_u128((uint64_t)(v >> 64), (uint64_t)v); }
static u128r be_load(const uint8_t* p)
{
    u128r v = 0;
    for (int i = 0; i < 16; i++) v = (v << 8) | p[i];
    return v;
}
static void be_store(uint8_t* p, u128r v)
{
    for (int i = 15; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

// ------------------------------------------------------------------------------------------------
// References.
// ------------------------------------------------------------------------------------------------
static u128r clmul64_ref(uint64_t a, uint64_t b)
{
    u128r r = 0;
    for (int i = 0; i < 64; i++)
        if ((b >> i) & 1) r ^= (u128r)a << i;
    return r;
}

// SP 800-38D algorithm 1: blocks as big-endian integers, bit 0 of the spec = MSB here.
static u128r gcm_mult_ref(u128r x, u128r y)
{
    const u128r R = (u128r)0xE1 << 120;
    u128r z = 0, v = y;
    for (int i = 0; i < 128; i++) {
        if ((x >> (127 - i)) & 1) z ^= v;
        v = (v & 1) ? ((v >> 1) ^ R) : (v >> 1);
    }
    return z;
}

// GHASH_H over a byte string zero-padded to whole blocks, continuing from state y.
static u128r ghash_ref(u128r h, const uint8_t* p, size_t n, u128r y = 0)
{
    for (size_t off = 0; off < n; off += 16) {
        uint8_t blk[16] = {0};
        memcpy(blk, p + off, n - off < 16 ? n - off : 16);
        y = gcm_mult_ref(y ^ be_load(blk), h);
    }
    return y;
}

// Plain FIPS-197 AES.
static uint8_t g_sbox[256];
static uint8_t gf_mul(uint8_t a, uint8_t b)
{
    uint8_t r = 0;
    while (b) {
        if (b & 1) r ^= a;
        a = (uint8_t)((a << 1) ^ ((a & 0x80) ? 0x1b : 0));
        b >>= 1;
    }
    return r;
}
static void init_sbox()
{
    for (int x = 0; x < 256; x++) {
        uint8_t inv = 0;
        for (int y = 1; y < 256 && x; y++)
            if (gf_mul((uint8_t)x, (uint8_t)y) == 1) inv = (uint8_t)y;
        uint8_t s = inv, r = inv;
        for (int k = 0; k < 4; k++) {
            r = (uint8_t)((r << 1) | (r >> 7));
            s ^= r;
        }
        g_sbox[x] = s ^ 0x63;
    }
}
static GcmxAesKey aes_expand_ref(const uint8_t* key, int klen)
{
    GcmxAesKey k;
    memset(&k, 0, sizeof k);
    int nk = klen / 4;
    k.nr = (uint32_t)(nk + 6);
    int total = 4 * ((int)k.nr + 1);
    uint32_t rcon = 1;
    for (int i = 0; i < nk; i++)
        k.rk[i] = ((uint32_t)key[4 * i] << 24) | ((uint32_t)key[4 * i + 1] << 16) | ((uint32_t)key[4 * i + 2] << 8) |
                  key[4 * i + 3];
    for (int i = nk; i < total; i++) {
        uint32_t t = k.rk[i - 1];
        if (i % nk == 0) {
            t = (t << 8) | (t >> 24);
            t = ((uint32_t)g_sbox[t >> 24] << 24) | ((uint32_t)g_sbox[(t >> 16) & 0xff] << 16) |
                ((uint32_t)g_sbox[(t >> 8) & 0xff] << 8) | g_sbox[t & 0xff];
            t ^= rcon << 24;
            rcon = gf_mul((uint8_t)rcon, 2);
        } else if (nk > 6 && i % nk == 4) {
            t = ((uint32_t)g_sbox[t >> 24] << 24) | ((uint32_t)g_sbox[(t >> 16) & 0xff] << 16) |
                ((uint32_t)g_sbox[(t >> 8) & 0xff] << 8) | g_sbox[t & 0xff];
        }
        k.rk[i] = k.rk[i - nk] ^ t;
    }
    return k;
}
static void aes_encrypt_ref(const GcmxAesKey& k, const uint8_t in[16], uint8_t out[16])
{
    uint8_t s[16];
    memcpy(s, in, 16);
    for (uint32_t round = 0; round <= k.nr; round++) {
        if (round > 0) {
            uint8_t t[16];
            for (int c = 0; c < 4; c++)
                for (int r = 0; r < 4; r++) t[4 * c + r] = g_sbox[s[4 * ((c + r) % 4) + r]];
            if (round < k.nr) {
                for (int c = 0; c < 4; c++) {
                    uint8_t a0 = t[4 * c], a1 = t[4 * c + 1], a2 = t[4 * c + 2], a3 = t[4 * c + 3];
                    t[4 * c] = gf_mul(a0, 2) ^ gf_mul(a1, 3) ^ a2 ^ a3;
                    t[4 * c + 1] = a0 ^ gf_mul(a1, 2) ^ gf_mul(a2, 3) ^ a3;
                    t[4 * c + 2] = a0 ^ a1 ^ gf_mul(a2, 2) ^ gf_mul(a3, 3);
                    t[4 * c + 3] = gf_mul(a0, 3) ^ a1 ^ a2 ^ gf_mul(a3, 2);
                }
            }
            memcpy(s, t, 16);
        }
        for (int c = 0; c < 4; c++)
            for (int r = 0; r < 4; r++) s[4 * c + r] ^= (uint8_t)(k.rk[4 * round + c] >> (24 - 8 * r));
    }
    memcpy(out, s, 16);
}

// Stand-in for aes_bs.cuh's gcmx_aes_ctr_x32 (same contract, see gcm_fused.cu).
struct RefAesCtr {
    const GcmxAesKey* k;
    uint32_t p0, p1, p2;
    void operator()(uint32_t ctr_first, uint32_t ctr_stride, uint4 (&ks)[GCMX_AES_BLOCKS_PER_CALL]) const
    {
        for (uint32_t j = 0; j < GCMX_AES_BLOCKS_PER_CALL; j++) {
            uint8_t blk[16], o[16];
            memcpy(blk, &p0, 4);
            memcpy(blk + 4, &p1, 4);
            memcpy(blk + 8, &p2, 4);
            uint32_t c = ctr_first + j * ctr_stride;
            blk[12] = (uint8_t)(c >> 24);
            blk[13] = (uint8_t)(c >> 16);
            blk[14] = (uint8_t)(c >> 8);
            blk[15] = (uint8_t)c;
            aes_encrypt_ref(*k, blk, o);
            memcpy(&ks[j], o, 16);
        }
    }
};
struct RefAesFactory {
    RefAesCtr at(const GcmxAesKey& k, uint32_t p0, uint32_t p1, uint32_t p2) const
    {
        RefAesCtr a = {&k, p0, p1, p2};
        return a;
    }
};

#if HAVE_REAL_AES
struct RealAesFactory {
    GcmxAesCtrKey at(const GcmxAesKey& k, uint32_t p0, uint32_t p1, uint32_t p2) const
    {
        GcmxAesCtrKey a = {&k, p0, p1, p2};
        return a;
    }
};
#endif

// GCM reference (any IV length, any tag use: 16 bytes).
struct GcmRef {
    GcmxAesKey key;
    u128r h;
    uint8_t j0[16];
};
static GcmRef gcm_setup_ref(const uint8_t* key, int klen, const uint8_t* iv, size_t ivlen)
{
    GcmRef g;
    g.key = aes_expand_ref(key, klen);
    uint8_t zero[16] = {0}, hb[16];
    aes_encrypt_ref(g.key, zero, hb);
    g.h = be_load(hb);
    if (ivlen == 12) {
        memcpy(g.j0, iv, 12);
        g.j0[12] = g.j0[13] = g.j0[14] = 0;
        g.j0[15] = 1;
    } else {
        u128r y = ghash_ref(g.h, iv, ivlen);
        y = gcm_mult_ref(y ^ (u128r)((uint64_t)ivlen * 8), g.h);
        be_store(g.j0, y);
    }
    return g;
}
static void gcm_encrypt_ref(const GcmRef& g, const uint8_t* aad, size_t alen, const uint8_t* pt, size_t n, uint8_t* ct,
                            uint8_t tag[16])
{
    uint32_t ctr = ((uint32_t)g.j0[12] << 24) | ((uint32_t)g.j0[13] << 16) | ((uint32_t)g.j0[14] << 8) | g.j0[15];
    uint8_t cb[16], ks[16];
    memcpy(cb, g.j0, 16);
    for (size_t off = 0; off < n; off += 16) {
        ctr++;
        cb[12] = (uint8_t)(ctr >> 24);
        cb[13] = (uint8_t)(ctr >> 16);
        cb[14] = (uint8_t)(ctr >> 8);
        cb[15] = (uint8_t)ctr;
        aes_encrypt_ref(g.key, cb, ks);
        for (size_t i = 0; i < 16 && off + i < n; i++) ct[off + i] = pt[off + i] ^ ks[i];
    }
    u128r y = ghash_ref(g.h, aad, alen);
    y = ghash_ref(g.h, ct, n, y);
    y = gcm_mult_ref(y ^ (((u128r)((uint64_t)alen * 8) << 64) | (u128r)((uint64_t)n * 8)), g.h);
    uint8_t ej0[16];
    aes_encrypt_ref(g.key, g.j0, ej0);
    be_store(tag, y);
    for (int i = 0; i < 16; i++) tag[i] ^= ej0[i];
}

// ------------------------------------------------------------------------------------------------
// Field checks.
// ------------------------------------------------------------------------------------------------
static u128r hprime_of(u128r h) { return to_r(gcmx_mulx(from_r(h))); }

static void check_field()
{
    for (int it = 0; it < 2000; it++) {
        uint64_t a = rnd64(), b = rnd64();
        if (it < 64) a = (it & 1) ? ~0ull : (1ull << it), b = (it & 2) ? ~0ull : rnd64();
        uint64_t lo, hi;
        gcmx_clmul64_soft(a, b, lo, hi);
        u128r ref = clmul64_ref(a, b);
        CHECK(((u128r)hi << 64 | lo) == ref, "clmul64_soft %016llx*%016llx", (unsigned long long)a,
              (unsigned long long)b);
    }
    // Montgomery reduction of the Karatsuba product vs the reference product reduced by the same formula
    // written on 128-bit integers (shares no code with gcmx_mul_acc / gcmx_reduce).
    for (int it = 0; it < 500; it++) {
        u128r a = rnd128(), b = rnd128();
        u128r p0 = clmul64_ref((uint64_t)a, (uint64_t)b), p3 = clmul64_ref((uint64_t)(a >> 64), (uint64_t)(b >> 64));
        u128r pm = clmul64_ref((uint64_t)a, (uint64_t)(b >> 64)) ^ clmul64_ref((uint64_t)(a >> 64), (uint64_t)b);
        uint64_t d0 = (uint64_t)p0, d1 = (uint64_t)(p0 >> 64) ^ (uint64_t)pm, d2 = (uint64_t)p3 ^ (uint64_t)(pm >> 64),
                 d3 = (uint64_t)(p3 >> 64);
        u128r t = clmul64_ref(d0, GCMX_POLYVAL_C);
        uint64_t a0 = d1 ^ (uint64_t)t, a1 = d0 ^ (uint64_t)(t >> 64);
        u128r u = clmul64_ref(a0, GCMX_POLYVAL_C);
        uint64_t b0 = a1 ^ (uint64_t)u, b1 = a0 ^ (uint64_t)(u >> 64);
        u128r ref = ((u128r)(d3 ^ b1) << 64) | (d2 ^ b0);
        CHECK(to_r(gcmx_dot<false>(from_r(a), from_r(b))) == ref, "dot");
    }
    // POLYVAL with H' equals SP 800-38D GHASH with H (the mapping of the shared notes).
    for (int n = 1; n <= 40; n += 3) {
        u128r h = rnd128();
        GcmxU128 hp = from_r(hprime_of(h));
        std::vector<uint8_t> msg(16 * (size_t)n);
        rnd_bytes(msg.data(), msg.size());
        GcmxU128 s = gcmx_u128(0, 0);
        for (int i = 0; i < n; i++) s = gcmx_dot<false>(gcmx_xor128(s, gcmx_block_to_u128(gcmx_load16(&msg[16 * i]))), hp);
        CHECK(to_r(s) == ghash_ref(h, msg.data(), msg.size()), "polyval == ghash, n=%d", n);
    }
    // Known answer: GCM spec test case 2 (K = 0, P = 0^128): GHASH = f38cbb1ad69223dcc3457ae5b6b0f885.
    {
        u128r h = ((u128r)0x66e94bd4ef8a2c3bull << 64) | 0x884cfa59ca342b2eull;
        u128r c = ((u128r)0x0388dace60b6a392ull << 64) | 0xf328c2b971b2fe78ull;
        GcmxU128 hp = from_r(hprime_of(h));
        GcmxU128 s = gcmx_dot<false>(from_r(c), hp);
        s = gcmx_dot<false>(gcmx_xor128(s, from_r(0x80)), hp);
        u128r expect = ((u128r)0xf38cbb1ad69223dcull << 64) | 0xc3457ae5b6b0f885ull;
        CHECK(to_r(s) == expect, "GCM test case 2 GHASH");
        CHECK(ghash_ref(h, (const uint8_t*)"", 0, gcm_mult_ref(gcm_mult_ref(c, h) ^ 0x80, h) ^ 0) != 0, "ref sanity");
        CHECK(gcm_mult_ref(gcm_mult_ref(c, h) ^ 0x80, h) == expect, "reference GHASH test case 2");
    }
    // Powers: Q_0 is the unit, Q_k by square-and-multiply equals the dot chain, Q_a . Q_b = Q_(a+b).
    {
        u128r h = rnd128();
        GcmxU128 hp = from_r(hprime_of(h));
        GcmxU128 x = from_r(rnd128());
        CHECK(to_r(gcmx_dot<false>(x, gcmx_u128(GCMX_Q0_HI, GCMX_Q0_LO))) == to_r(x), "Q_0 unit");
        GcmxU128 q = hp;
        for (uint64_t k = 1; k <= 300; k++) {
            CHECK(to_r(gcmx_power<false>(hp, k)) == to_r(q), "power %llu", (unsigned long long)k);
            q = gcmx_dot<false>(q, hp);
        }
        CHECK(to_r(gcmx_dot<false>(gcmx_power<false>(hp, 1000), gcmx_power<false>(hp, 77777))) ==
                  to_r(gcmx_power<false>(hp, 78777)),
              "Q_a.Q_b");
        // dot(x, Q_k) = x h^k: hashing x followed by k-1 zero blocks.
        std::vector<uint8_t> msg(16 * 37, 0);
        be_store(msg.data(), to_r(x));
        CHECK(to_r(gcmx_dot<false>(x, gcmx_power<false>(hp, 37))) == ghash_ref(h, msg.data(), msg.size()),
              "dot(x, Q_k) = x h^k");
    }
    // Byte-order helpers.
    {
        uint8_t b[16];
        rnd_bytes(b, 16);
        CHECK(to_r(gcmx_block_to_u128(gcmx_load16(b))) == be_load(b), "block_to_u128");
        uint8_t c[16];
        gcmx_store16(c, gcmx_u128_to_block(gcmx_block_to_u128(gcmx_load16(b))));
        CHECK(memcmp(b, c, 16) == 0, "u128_to_block");
        for (uint32_t n = 0; n < 16; n++) {
            uint8_t z[16] = {0};
            memcpy(z, b, n);
            uint4 v = gcmx_keep_bytes(gcmx_load16(b), n);
            CHECK(memcmp(&v, z, 16) == 0, "keep_bytes %u", n);
            uint4 w = gcmx_load_partial(b, n);
            CHECK(memcmp(&w, z, 16) == 0, "load_partial %u", n);
            uint8_t s[16];
            memset(s, 0xAB, 16);
            gcmx_store_partial(s, gcmx_load16(b), n);
            CHECK(memcmp(s, b, n) == 0 && (n == 16 || s[n] == 0xAB), "store_partial %u", n);
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Kernel emulations.
// ------------------------------------------------------------------------------------------------
static std::vector<GcmxU128> strided_table(GcmxU128 hp, uint32_t threads, uint64_t warp_span)
{
    std::vector<GcmxU128> t(GCMX_POW_THREAD_BASE + threads);
    for (uint32_t i = 0; i < t.size(); i++) t[i] = gcmx_strided_power<false>(hp, threads, warp_span, i);
    return t;
}

static uint32_t grid_for(uint64_t nbytes, uint64_t span)
{
    uint64_t nb = (nbytes + 15) / 16;
    uint64_t g = (nb + span - 1) / span;
    return (uint32_t)(g == 0 ? 1 : g);
}

// Host combination of equal-length partials: S = fold(dot(S, Q_span) ^ Z_j).
static GcmxU128 combine_partials(const std::vector<GcmxU128>& z, GcmxU128 hp, uint64_t span)
{
    GcmxU128 q = gcmx_power<false>(hp, span), s = gcmx_u128(0, 0);
    for (size_t j = 0; j < z.size(); j++) s = gcmx_xor128(gcmx_dot<false>(s, q), z[j]);
    return s;
}

template <uint32_t LOADS>
static std::vector<GcmxU128> emulate_ghash(const uint8_t* data, uint64_t nbytes, const std::vector<GcmxU128>& pw,
                                           uint32_t grid)
{
    std::vector<GcmxU128> partials(grid);
    for (uint32_t b = 0; b < grid; b++) {
        GcmxU128 z = gcmx_u128(0, 0);
        const GcmxU128 stride[GCMX_BLOCKS_PER_REDUCTION] = {pw[GCMX_POW_STRIDE_32], pw[GCMX_POW_STRIDE_64],
                                                            pw[GCMX_POW_STRIDE_96], pw[GCMX_POW_STRIDE_128]};
        for (uint32_t t = 0; t < GCMX_GHASH_THREADS; t++)
            z = gcmx_xor128(z, gcmx_ghash_thread<false, LOADS>(data, nbytes, pw.data(), stride, b, grid, t));
        partials[b] = z;
    }
    return partials;
}

static void check_ghash_kernel()
{
    const uint64_t S = (uint64_t)GCMX_GHASH_SPAN * 16;
    const uint64_t sizes[] = {1, 15, 16, 17, 100, 511, 512, 513, 4096 * 16 - 1, 4096 * 16, 4096 * 16 + 5,
                              S - 16, S - 1, S, S + 1, S + 16, 2 * S + 7 * 16 + 3, 3 * S - 5};
    u128r h = rnd128();
    GcmxU128 hp = from_r(hprime_of(h));
    std::vector<GcmxU128> pw = strided_table(hp, GCMX_GHASH_THREADS, GCMX_GHASH_WARP_SPAN);
    // The table's exponents (gcmx_strided_pow_exponent) against the formula written out.
    for (uint32_t t = 0; t < GCMX_GHASH_THREADS; t++) {
        uint64_t e = (uint64_t)(GCMX_GHASH_WARPS - 1 - t / 32) * GCMX_GHASH_WARP_SPAN + 32 - t % 32;
        CHECK(gcmx_strided_pow_exponent(GCMX_GHASH_THREADS, GCMX_GHASH_WARP_SPAN, GCMX_POW_THREAD_BASE + t) == e,
              "exponent t=%u", t);
    }
    for (uint64_t n : sizes) {
        std::vector<uint8_t> msg(n);
        rnd_bytes(msg.data(), n);
        uint32_t grid = grid_for(n, GCMX_GHASH_SPAN);
        // Both step widths the kernels use (clmad: 8 loads per step, soft: 4).
        std::vector<GcmxU128> z = emulate_ghash<GCMX_GHASH_LOADS_PER_STEP>(msg.data(), n, pw, grid);
        std::vector<GcmxU128> z4 = emulate_ghash<GCMX_BLOCKS_PER_REDUCTION>(msg.data(), n, pw, grid);
        CHECK(to_r(combine_partials(z4, hp, GCMX_GHASH_SPAN)) == to_r(combine_partials(z, hp, GCMX_GHASH_SPAN)),
              "4-load steps n=%llu", (unsigned long long)n);
        u128r got = to_r(combine_partials(z, hp, GCMX_GHASH_SPAN));
        CHECK(got == ghash_ref(h, msg.data(), n), "ghash kernel n=%llu", (unsigned long long)n);
        // A larger grid than needed (more front padding) gives the same value.
        if (n < 4 * S) {
            std::vector<GcmxU128> z2 = emulate_ghash<GCMX_GHASH_LOADS_PER_STEP>(msg.data(), n, pw, grid + 1);
            CHECK(to_r(combine_partials(z2, hp, GCMX_GHASH_SPAN)) == got, "ghash larger grid n=%llu",
                  (unsigned long long)n);
        }
    }
    printf("ghash kernel emulation: %zu sizes up to %llu bytes\n", sizeof sizes / sizeof sizes[0],
           (unsigned long long)(3 * S - 5));
}

// Fused kernel: returns the ciphertext partials; out written.
template <class Factory = RefAesFactory>
static std::vector<GcmxU128> emulate_fused(bool decrypt, const GcmxAesKey& key, const uint8_t j0[16],
                                           uint32_t ctr_first, const uint8_t* in, uint8_t* out, uint64_t nbytes,
                                           const std::vector<GcmxU128>& pw, uint32_t grid)
{
    uint32_t w[4];
    memcpy(w, j0, 16);
    const auto aes = Factory().at(key, w[0], w[1], w[2]);
    std::vector<GcmxU128> partials(grid);
    const GcmxU128 stride[GCMX_BLOCKS_PER_REDUCTION] = {pw[GCMX_POW_STRIDE_32], pw[GCMX_POW_STRIDE_64],
                                                        pw[GCMX_POW_STRIDE_96], pw[GCMX_POW_STRIDE_128]};
    for (uint32_t b = 0; b < grid; b++) {
        GcmxU128 z = gcmx_u128(0, 0);
        for (uint32_t t = 0; t < GCMX_FUSED_THREADS; t++) {
            GcmxU128 term = decrypt ? gcmx_gcm_thread<false, true>(aes, in, out, nbytes, ctr_first, pw.data(), stride, b, grid, t)
                                    : gcmx_gcm_thread<false, false>(aes, in, out, nbytes, ctr_first, pw.data(), stride, b, grid, t);
            z = gcmx_xor128(z, term);
        }
        partials[b] = z;
    }
    return partials;
}

static uint32_t be32(const uint8_t* p) { return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]; }

// Host part of the single-message path: tag = (combine(combine(Z_aad, Z_ct), len) as bytes) ^ E_K(J0).
static void host_tag(const GcmRef& g, GcmxU128 hp, const uint8_t* aad, size_t alen, GcmxU128 zct, uint64_t n,
                     uint8_t tag[16])
{
    GcmxU128 za = gcmx_u128(0, 0);
    for (size_t off = 0; off < alen; off += 16) {
        uint8_t blk[16] = {0};
        memcpy(blk, aad + off, alen - off < 16 ? alen - off : 16);
        za = gcmx_dot<false>(gcmx_xor128(za, gcmx_block_to_u128(gcmx_load16(blk))), hp);
    }
    uint64_t nb = (n + 15) / 16;
    GcmxU128 s = nb ? gcmx_xor128(gcmx_dot<false>(za, gcmx_power<false>(hp, nb)), zct) : za;
    s = gcmx_dot<false>(gcmx_xor128(s, gcmx_u128((uint64_t)alen * 8, n * 8)), hp);
    uint8_t ej0[16];
    aes_encrypt_ref(g.key, g.j0, ej0);
    be_store(tag, to_r(s));
    for (int i = 0; i < 16; i++) tag[i] ^= ej0[i];
}

// One full message through the fused emulation; checks ct and tag against ct_ref/tag_ref, then decrypts.
template <class Factory = RefAesFactory>
static void fused_roundtrip(const GcmRef& g, const uint8_t* aad, size_t alen, const uint8_t* pt, uint64_t n,
                            const uint8_t* ct_ref, const uint8_t* tag_ref, const char* what)
{
    GcmxU128 hp = from_r(hprime_of(g.h));
    std::vector<GcmxU128> pw = strided_table(hp, GCMX_FUSED_THREADS, GCMX_FUSED_WARP_SPAN);
    uint32_t ctr_first = be32(g.j0 + 12) + 1;
    uint32_t grid = grid_for(n, GCMX_FUSED_SPAN);
    std::vector<uint8_t> in(pt, pt + n), out(n, 0x5A);
    std::vector<GcmxU128> z = emulate_fused<Factory>(false, g.key, g.j0, ctr_first, in.data(), out.data(), n, pw, grid);
    GcmxU128 zct = combine_partials(z, hp, GCMX_FUSED_SPAN);
    uint8_t tag[16];
    host_tag(g, hp, aad, alen, zct, n, tag);
    CHECK(n == 0 || memcmp(out.data(), ct_ref, n) == 0, "%s: fused ct n=%llu", what, (unsigned long long)n);
    CHECK(memcmp(tag, tag_ref, 16) == 0, "%s: fused tag n=%llu alen=%zu", what, (unsigned long long)n, alen);
    // Decrypt out-of-place and in place: plaintext back, same ciphertext value.
    std::vector<uint8_t> back(n, 0xA5);
    std::vector<GcmxU128> zd = emulate_fused<Factory>(true, g.key, g.j0, ctr_first, out.data(), back.data(), n, pw, grid);
    CHECK(n == 0 || memcmp(back.data(), pt, n) == 0, "%s: fused decrypt n=%llu", what, (unsigned long long)n);
    CHECK(to_r(combine_partials(zd, hp, GCMX_FUSED_SPAN)) == to_r(zct), "%s: decrypt hash", what);
    std::vector<uint8_t> inplace(out);
    emulate_fused<Factory>(true, g.key, g.j0, ctr_first, inplace.data(), inplace.data(), n, pw, grid);
    CHECK(n == 0 || memcmp(inplace.data(), pt, n) == 0, "%s: in-place decrypt", what);
}

static void check_fused_kernel()
{
    const uint64_t S = (uint64_t)GCMX_FUSED_SPAN * 16;
    const uint64_t sizes[] = {0, 1, 15, 16, 17, 255, 4096, 16384 - 3, 16384, 16384 + 16, S - 1, S, S + 15,
                              2 * S + 100};
    int nsizes = 0;
    for (uint64_t n : sizes) {
        int klen = 16 + 8 * (int)(n % 3);
        uint8_t key[32], iv[60];
        rnd_bytes(key, sizeof key);
        size_t ivlen = (n % 5 == 4) ? 1 + (size_t)(rnd64() % 59) : 12;
        rnd_bytes(iv, sizeof iv);
        GcmRef g = gcm_setup_ref(key, klen, iv, ivlen);
        size_t alen = (size_t)(rnd64() % 70);
        std::vector<uint8_t> aad(alen), pt(n), ct(n);
        rnd_bytes(aad.data(), alen);
        rnd_bytes(pt.data(), n);
        uint8_t tag[16];
        gcm_encrypt_ref(g, aad.data(), alen, pt.data(), n, ct.data(), tag);
        fused_roundtrip(g, aad.data(), alen, pt.data(), n, ct.data(), tag, "fused");
        nsizes++;
    }
    // Counter wrap: J0 with ctr0 near 2^32 (as a non-96-bit IV may give), message crossing the wrap.
    {
        uint8_t key[16];
        rnd_bytes(key, 16);
        GcmRef g = gcm_setup_ref(key, 16, key, 12);
        rnd_bytes(g.j0, 12);
        g.j0[12] = g.j0[13] = g.j0[14] = 0xFF;
        g.j0[15] = 0xF0;
        uint64_t n = 16 * 40 + 9;
        std::vector<uint8_t> pt(n), ct(n);
        rnd_bytes(pt.data(), n);
        uint8_t tag[16];
        gcm_encrypt_ref(g, nullptr, 0, pt.data(), n, ct.data(), tag);
        fused_roundtrip(g, nullptr, 0, pt.data(), n, ct.data(), tag, "ctr wrap");
    }
    // A message in two launches (block boundary b): ctr_first = ctr0 + 1 + b for the second, partial
    // values combined with Q_len(second).
    {
        uint8_t key[32];
        rnd_bytes(key, 32);
        GcmRef g = gcm_setup_ref(key, 32, key + 3, 12);
        uint64_t n = S + 16 * 700 + 5, b = 16 * 1111;
        std::vector<uint8_t> pt(n), ct(n), out(n);
        rnd_bytes(pt.data(), n);
        uint8_t tag[16], tag2[16];
        gcm_encrypt_ref(g, nullptr, 0, pt.data(), n, ct.data(), tag);
        GcmxU128 hp = from_r(hprime_of(g.h));
        std::vector<GcmxU128> pw = strided_table(hp, GCMX_FUSED_THREADS, GCMX_FUSED_WARP_SPAN);
        uint32_t c1 = be32(g.j0 + 12) + 1;
        std::vector<GcmxU128> z1 = emulate_fused(false, g.key, g.j0, c1, pt.data(), out.data(), b, pw, grid_for(b, GCMX_FUSED_SPAN));
        std::vector<GcmxU128> z2 = emulate_fused(false, g.key, g.j0, c1 + (uint32_t)(b / 16), pt.data() + b, out.data() + b,
                                                 n - b, pw, grid_for(n - b, GCMX_FUSED_SPAN));
        GcmxU128 a = combine_partials(z1, hp, GCMX_FUSED_SPAN), c = combine_partials(z2, hp, GCMX_FUSED_SPAN);
        GcmxU128 zct = gcmx_xor128(gcmx_dot<false>(a, gcmx_power<false>(hp, (n - b + 15) / 16)), c);
        host_tag(g, hp, nullptr, 0, zct, n, tag2);
        CHECK(memcmp(out.data(), ct.data(), n) == 0, "split launches ct");
        CHECK(memcmp(tag, tag2, 16) == 0, "split launches tag");
    }
    printf("fused kernel emulation: %d sizes + counter wrap + split launches\n", nsizes);
}

// ------------------------------------------------------------------------------------------------
// Batch emulation.
// ------------------------------------------------------------------------------------------------
struct BatchCase {
    std::vector<uint8_t> key;
    std::vector<uint8_t> iv, aad, pt, ct;
    uint8_t tag[16];
};

static BatchCase make_case(const std::vector<uint8_t>& key, size_t ivlen, size_t alen, size_t n)
{
    BatchCase c;
    c.key = key;
    c.iv.resize(ivlen);
    rnd_bytes(c.iv.data(), ivlen);
    c.aad.resize(alen);
    rnd_bytes(c.aad.data(), alen);
    c.pt.resize(n);
    rnd_bytes(c.pt.data(), n);
    c.ct.resize(n);
    GcmRef g = gcm_setup_ref(key.data(), (int)key.size(), c.iv.data(), ivlen);
    gcm_encrypt_ref(g, c.aad.data(), alen, c.pt.data(), n, c.ct.data(), c.tag);
    return c;
}

// The device-resident batch kernel (gcm_dbatch.cu), phase by phase through the functions of dbatch.cuh.
// Messages are laid out the way a caller would: data at 16-byte aligned offsets (in place), AADs at
// 16-byte aligned offsets, nonces packed at odd offsets, every message's key index into a keyring
// (consecutive cases with equal keys share an entry). P2's scans run sequentially here; the device runs
// them per thread block, over the same gcmx_db_incs / gcmx_db_layout / gcmx_db_place.
struct DbRun {
    std::vector<GcmxAesKey> keys;
    std::vector<GcmxKeyPowers> kp;
    std::vector<GcmxDevMsg> desc;
    std::vector<uint8_t> data, aad, nonces, tags, verdicts;
    std::vector<size_t> data_at; // where each case's message is in `data`
    uint32_t rounds = 0;
};

template <class Factory>
static void db_setup(DbRun& R, const std::vector<BatchCase>& cases, bool decrypt, bool j0_given)
{
    Factory f;
    for (size_t k = 0; k < cases.size(); k++) {
        const BatchCase& c = cases[k];
        if (R.keys.empty() || c.key != cases[k - 1].key) R.keys.push_back(aes_expand_ref(c.key.data(), (int)c.key.size()));
        GcmxDevMsg d;
        memset(&d, 0, sizeof d);
        const std::vector<uint8_t>& src = decrypt ? c.ct : c.pt;
        d.data_off = R.data.size();
        d.data_len = src.size();
        R.data_at.push_back(R.data.size());
        R.data.insert(R.data.end(), src.begin(), src.end());
        R.data.resize((R.data.size() + 15) / 16 * 16 + 16 * (k % 3), 0xEE); // gaps that must stay untouched
        d.aad_off = R.aad.size();
        d.aad_len = c.aad.size();
        R.aad.insert(R.aad.end(), c.aad.begin(), c.aad.end());
        R.aad.resize((R.aad.size() + 15) / 16 * 16, 0xEE);
        R.nonces.push_back(0xEE); // odd offsets
        d.nonce_off = R.nonces.size();
        if (j0_given) {
            GcmRef g = gcm_setup_ref(c.key.data(), (int)c.key.size(), c.iv.data(), c.iv.size());
            R.nonces.insert(R.nonces.end(), g.j0, g.j0 + 16);
            d.nonce_len = 16;
        } else {
            R.nonces.insert(R.nonces.end(), c.iv.begin(), c.iv.end());
            d.nonce_len = (uint32_t)c.iv.size();
        }
        d.key = (uint32_t)R.keys.size() - 1;
        R.desc.push_back(d);
    }
    R.kp.resize(R.keys.size());
    for (size_t k = 0; k < R.keys.size(); k++) {
        const auto aes = f.at(R.keys[k], 0u, 0u, 0u);
        gcmx_key_powers_thread<false>(aes, R.kp[k]);
    }
    R.tags.assign(16 * cases.size(), 0x5A);
    R.verdicts.assign(cases.size(), 0xFF);
}

// Runs P1..P6 over R; mode GCMX_DB_SEAL / OPEN / EXPECT. Buffers are exactly their used size (ASan).
template <class Factory>
static void db_run(DbRun& R, uint32_t mode, uint32_t tag_len, uint32_t flags)
{
    Factory f;
    const uint32_t n = (uint32_t)R.desc.size();
    GcmxDbParams p;
    memset(&p, 0, sizeof p);
    std::vector<GcmxDevMsg> desc(R.desc); // exact size
    p.msgs = (uint64_t)(uintptr_t)desc.data();
    p.data = (uint64_t)(uintptr_t)R.data.data();
    p.data_len = R.data.size();
    p.aad = (uint64_t)(uintptr_t)R.aad.data();
    p.aad_len = R.aad.size();
    p.nonces = (uint64_t)(uintptr_t)R.nonces.data();
    p.nonces_len = R.nonces.size();
    p.tags = (uint64_t)(uintptr_t)R.tags.data();
    p.verdicts = (uint64_t)(uintptr_t)R.verdicts.data();
    p.keys = (uint64_t)(uintptr_t)R.keys.data();
    p.key_powers = (uint64_t)(uintptr_t)R.kp.data();
    p.nmsgs = n;
    p.nkeys = (uint32_t)R.keys.size();
    p.mode = mode;
    p.tag_len = tag_len;
    p.flags = flags;
    std::vector<GcmxDbMsg> msgs(n);
    std::vector<GcmxU128> acc(n);
    std::vector<uint8_t> ekj0(16 * n, 0x33);
    std::vector<uint32_t> slots(2 * (size_t)n + 1, 0xdeadbeefu);
    // P1
    uint64_t total[GCMX_DB_COLS] = {0};
    for (uint32_t k = 0; k < n; k++) {
        gcmx_db_prepare<false>(p, k, msgs[k]);
        acc[k] = gcmx_u128(0, 0);
        uint64_t inc[GCMX_DB_COLS];
        gcmx_db_incs(msgs[k], inc);
        for (uint32_t c = 0; c < GCMX_DB_COLS; c++) total[c] += inc[c];
    }
    // P2
    const GcmxDbLayout L = gcmx_db_layout(total);
    uint64_t run[GCMX_DB_COLS] = {0};
    for (uint32_t k = 0; k < n; k++) {
        uint64_t inc[GCMX_DB_COLS];
        gcmx_db_incs(msgs[k], inc);
        gcmx_db_place(msgs[k], k, run, L, slots.data());
        for (uint32_t c = 0; c < GCMX_DB_COLS; c++) run[c] += inc[c];
    }
    R.rounds = (uint32_t)L.start[GCMX_DB_COLS];
    // P3, warp by warp, with the device's group reduction and weighting.
    std::vector<uint32_t> units_seen(n, 0);
    for (uint64_t r = 0; r < L.start[GCMX_DB_COLS]; r++) {
        GcmxDbWork w[32];
        GcmxU128 v[32];
        for (uint32_t l = 0; l < 32; l++) {
            w[l] = gcmx_db_work(L, r, l, msgs.data(), n, slots.data());
            v[l] = gcmx_u128(0, 0);
            if (w[l].kind == GCMX_DB_IDLE) continue;
            const GcmxDbMsg m = msgs[w[l].msg];
            const auto aes = f.at(R.keys[m.key], m.j0[0], m.j0[1], m.j0[2]);
            uint8_t* e = &ekj0[16 * (size_t)w[l].msg];
            GcmxU128 pw[GCMX_DB_LANE_POWERS];
            for (uint32_t k = 0; k < GCMX_DB_LANE_POWERS; k++) pw[k] = gcmx_db_lane_power(R.kp[m.key], w[l], k);
            v[l] = (mode == GCMX_DB_SEAL) ? gcmx_db_lane<false, false>(aes, pw, R.data.data(), m, w[l], e)
                                          : gcmx_db_lane<false, true>(aes, pw, R.data.data(), m, w[l], e);
        }
        for (uint32_t off = 16; off != 0; off >>= 1) {
            GcmxU128 nv[32];
            for (uint32_t l = 0; l < 32; l++) nv[l] = off < w[l].g ? gcmx_xor128(v[l], v[l ^ off]) : v[l];
            memcpy(v, nv, sizeof v);
        }
        for (uint32_t l = 0; l < 32; l++) {
            if (w[l].kind != GCMX_DB_UNIT || w[l].i != 0) continue;
            const GcmxDbMsg& m = msgs[w[l].msg];
            acc[w[l].msg] = gcmx_xor128(acc[w[l].msg], gcmx_db_weight<false>(v[l], m, R.kp[m.key], w[l].unit));
            units_seen[w[l].msg]++;
        }
    }
    // Every unit of every valid message exactly once.
    for (uint32_t k = 0; k < n; k++) {
        uint32_t g0, fr;
        const uint32_t units = (msgs[k].info & GCMX_DB_INFO_VALID) ? gcmx_db_units(msgs[k].data_len, &g0, &fr) : 0u;
        CHECK(units_seen[k] == units, "message %u: %u units processed, %u expected", k, units_seen[k], units);
    }
    // P4
    bool any_refused = false;
    for (uint32_t k = 0; k < n; k++) {
        GcmxDbMsg& m = msgs[k];
        uint8_t* slot = &R.tags[16 * (size_t)k];
        uint32_t verdict = GCMX_VERDICT_INVALID;
        if (m.info & GCMX_DB_INFO_VALID) {
            verdict = gcmx_db_finish<false>(p, m, R.kp[m.key], acc[k], gcmx_load16(&ekj0[16 * (size_t)k]), slot);
            if (verdict == GCMX_VERDICT_REFUSED) {
                m.info |= GCMX_DB_INFO_REFUSED;
                any_refused = true;
            } else {
                m.j0[0] = m.j0[1] = m.j0[2] = m.j0[3] = 0u;
            }
        } else if (mode != GCMX_DB_OPEN) {
            memset(slot, 0, 16);
        }
        R.verdicts[k] = (uint8_t)verdict;
    }
    // P5: a refused message's lanes apply their keystream again (J0 kept by P4 for them only).
    for (uint32_t k = 0; k < n; k++) {
        const bool kept = msgs[k].j0[0] | msgs[k].j0[1] | msgs[k].j0[2] | msgs[k].j0[3];
        CHECK(!kept || (msgs[k].info & GCMX_DB_INFO_REFUSED) != 0u, "message %u: J0 kept by P4 although not refused", k);
    }
    if (mode == GCMX_DB_OPEN && any_refused) {
        for (uint64_t r = 0; r < L.start[GCMX_DB_COLS]; r++)
            for (uint32_t l = 0; l < 32; l++) {
                const GcmxDbWork w = gcmx_db_work(L, r, l, msgs.data(), n, slots.data());
                if (w.kind != GCMX_DB_UNIT || !(msgs[w.msg].info & GCMX_DB_INFO_REFUSED)) continue;
                const GcmxDbMsg m = msgs[w.msg];
                uint4 ks[GCMX_AES_BLOCKS_PER_CALL];
                f.at(R.keys[m.key], m.j0[0], m.j0[1], m.j0[2])(gcmx_db_restore_ctr(m, w), w.g, ks);
                gcmx_db_restore_apply(R.data.data(), m, w, ks);
            }
    }
    // P6
    for (uint32_t k = 0; k < n; k++) msgs[k].j0[0] = msgs[k].j0[1] = msgs[k].j0[2] = msgs[k].j0[3] = 0u;
}

// Seal, expect and open (with forged tags) every case through the emulation; compare with the reference.
template <class Factory = RefAesFactory>
static void check_db_cases(const std::vector<BatchCase>& cases, const char* what)
{
    const size_t n = cases.size();
    for (int j0g = 0; j0g < 2; j0g++) {
        const uint32_t flags = j0g ? GCMX_DB_J0_GIVEN : 0u;
        // Seal.
        DbRun S;
        db_setup<Factory>(S, cases, false, j0g);
        const std::vector<uint8_t> data_before = S.data;
        db_run<Factory>(S, GCMX_DB_SEAL, 16, flags);
        int bad = 0;
        for (size_t k = 0; k < n; k++) {
            const BatchCase& c = cases[k];
            bool ok = S.verdicts[k] == GCMX_VERDICT_OK && memcmp(&S.tags[16 * k], c.tag, 16) == 0 &&
                      (c.ct.empty() || memcmp(&S.data[S.data_at[k]], c.ct.data(), c.ct.size()) == 0);
            if (!ok && bad++ < 5) fprintf(stderr, "  %s: seal msg %zu (len %zu, aad %zu, iv %zu) wrong\n", what, k, c.pt.size(), c.aad.size(), c.iv.size());
        }
        // Bytes between messages untouched.
        size_t gap_bad = 0;
        for (size_t k = 0; k < n; k++) {
            size_t end = S.data_at[k] + cases[k].pt.size(), next = k + 1 < n ? S.data_at[k + 1] : S.data.size();
            for (size_t i = end; i < next; i++) gap_bad += S.data[i] != data_before[i];
        }
        CHECK(bad == 0 && gap_bad == 0, "%s%s: seal %d wrong of %zu, %zu gap bytes written", what, j0g ? " (J0 given)" : "", bad, n, gap_bad);
        // Expect (open, expected tags out).
        DbRun E;
        db_setup<Factory>(E, cases, true, j0g);
        db_run<Factory>(E, GCMX_DB_EXPECT, 16, flags);
        bad = 0;
        for (size_t k = 0; k < n; k++) {
            const BatchCase& c = cases[k];
            bool ok = E.verdicts[k] == GCMX_VERDICT_OK && memcmp(&E.tags[16 * k], c.tag, 16) == 0 &&
                      (c.pt.empty() || memcmp(&E.data[E.data_at[k]], c.pt.data(), c.pt.size()) == 0);
            bad += !ok;
        }
        CHECK(bad == 0, "%s%s: expect %d wrong of %zu", what, j0g ? " (J0 given)" : "", bad, n);
        // Open with every third tag forged (a 12-byte comparison: a flip in byte 13 must pass).
        DbRun O;
        db_setup<Factory>(O, cases, true, j0g);
        for (size_t k = 0; k < n; k++) {
            memcpy(&O.tags[16 * k], cases[k].tag, 16);
            if (k % 3 == 1) O.tags[16 * k + (k % 12)] ^= 0x20;
            if (k % 3 == 2) O.tags[16 * k + 13] ^= 0x01; // outside the compared 12 bytes
        }
        db_run<Factory>(O, GCMX_DB_OPEN, 12, flags);
        bad = 0;
        for (size_t k = 0; k < n; k++) {
            const BatchCase& c = cases[k];
            const bool forged = k % 3 == 1;
            bool ok;
            if (forged) {
                // The forgery policy: the ciphertext it was given, byte for byte.
                ok = O.verdicts[k] == GCMX_VERDICT_REFUSED &&
                     (c.ct.empty() || memcmp(&O.data[O.data_at[k]], c.ct.data(), c.ct.size()) == 0);
            } else {
                ok = O.verdicts[k] == GCMX_VERDICT_OK && (c.pt.empty() || memcmp(&O.data[O.data_at[k]], c.pt.data(), c.pt.size()) == 0);
            }
            if (!ok && bad++ < 5) fprintf(stderr, "  %s: open msg %zu (len %zu, forged %d) wrong, verdict %u\n", what, k, c.pt.size(), forged, O.verdicts[k]);
        }
        CHECK(bad == 0, "%s%s: open with forged tags %d wrong of %zu", what, j0g ? " (J0 given)" : "", bad, n);
    }
    DbRun S;
    db_setup<Factory>(S, cases, false, false);
    db_run<Factory>(S, GCMX_DB_SEAL, 16, 0);
    printf("device-batch emulation (%s): %zu messages, %u rounds; seal, expect, open with forged tags; nonces and J0 given\n",
           what, n, S.rounds);
}

// Descriptors the kernel must refuse (verdict INVALID, nothing written) among valid ones.
static void check_db_invalid()
{
    std::vector<BatchCase> cases;
    std::vector<uint8_t> key(16);
    rnd_bytes(key.data(), 16);
    for (int k = 0; k < 12; k++) cases.push_back(make_case(key, 12, 20, 100 + 16 * (size_t)k));
    DbRun R;
    db_setup<RefAesFactory>(R, cases, false, false);
    const std::vector<uint8_t> before = R.data;
    R.desc[1].data_off += 8;                        // misaligned data
    R.desc[2].data_len = R.data.size();             // past the end of data
    R.desc[3].data_off = ~0ull - 15;                // offset + length overflows
    R.desc[4].key = 7;                              // no such key
    R.desc[5].nonce_len = 0;                        // empty nonce
    R.desc[6].nonce_off = R.nonces.size() - 3;      // nonce past the end
    R.desc[7].aad_off += 4;                         // misaligned AAD
    R.desc[8].aad_len = ~0ull;                      // AAD past the end and above the GCM limit
    R.desc[9].data_len = (1ull << 36);              // above the GCM limit
    db_run<RefAesFactory>(R, GCMX_DB_SEAL, 16, 0);
    int bad = 0;
    for (size_t k = 0; k < cases.size(); k++) {
        const bool invalid = k >= 1 && k <= 9;
        if (invalid) {
            uint8_t zero[16] = {0};
            bool untouched = memcmp(&R.data[R.data_at[k]], &before[R.data_at[k]], cases[k].pt.size()) == 0;
            bad += !(R.verdicts[k] == GCMX_VERDICT_INVALID && memcmp(&R.tags[16 * k], zero, 16) == 0 && untouched);
        } else {
            bad += !(R.verdicts[k] == GCMX_VERDICT_OK && memcmp(&R.tags[16 * k], cases[k].tag, 16) == 0 &&
                     memcmp(&R.data[R.data_at[k]], cases[k].ct.data(), cases[k].ct.size()) == 0);
        }
    }
    CHECK(bad == 0, "invalid descriptors: %d messages wrong", bad);
    // J0 given needs 16-byte nonce fields.
    DbRun J;
    db_setup<RefAesFactory>(J, cases, false, false); // 12-byte nonces
    db_run<RefAesFactory>(J, GCMX_DB_SEAL, 16, GCMX_DB_J0_GIVEN);
    int ok = 0;
    for (size_t k = 0; k < cases.size(); k++) ok += J.verdicts[k] == GCMX_VERDICT_INVALID;
    CHECK(ok == (int)cases.size(), "J0 given with 12-byte fields: %d of %zu refused", ok, cases.size());
    printf("device-batch emulation: invalid descriptors refused and untouched\n");
}

static void check_batch()
{
    const size_t sizes[] = {0,    1,    15,   16,   17,   64,   500,  512,  513,       1024,  4000,  16383,
                            16384, 16385, 16400, 20000, 32768, 33000, 65536 + 7, 100000, 16 * 1024 * 3, 1000, 3};
    std::vector<BatchCase> cases;
    std::vector<uint8_t> key;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        if (k % 3 == 0) {
            key.resize(16 + 8 * (k / 3 % 3));
            rnd_bytes(key.data(), key.size());
        }
        size_t ivlen = (k % 4 == 3) ? 1 + rnd64() % 40 : 12;
        size_t alen = (k % 5 == 0) ? 0 : rnd64() % 100;
        cases.push_back(make_case(key, ivlen, alen, sizes[k]));
    }
    check_db_cases(cases, "mixed sizes");
    // Many small messages packing several units into one warp.
    std::vector<BatchCase> small;
    for (int k = 0; k < 70; k++) {
        if (k % 7 == 0) {
            key.resize(16 + 8 * (k % 3));
            rnd_bytes(key.data(), key.size());
        }
        small.push_back(make_case(key, 12, rnd64() % 33, rnd64() % 1200));
    }
    check_db_cases(small, "small messages");
    check_db_invalid();
}

// ------------------------------------------------------------------------------------------------
// Python `cryptography` vectors (written by run_host_check.sh): "klen key iv aad pt ct tag" in hex, '-'
// for an empty field.
// ------------------------------------------------------------------------------------------------
static std::vector<uint8_t> unhex(const std::string& s)
{
    std::vector<uint8_t> v;
    if (s == "-") return v;
    for (size_t i = 0; i + 1 < s.size(); i += 2) v.push_back((uint8_t)strtoul(s.substr(i, 2).c_str(), nullptr, 16));
    return v;
}

static void check_vector_file(const char* path)
{
    FILE* f = fopen(path, "r");
    CHECK(f != nullptr, "open %s", path);
    if (!f) return;
    std::vector<BatchCase> cases;
    static char line[1 << 22];
    int nvec = 0;
    while (fgets(line, sizeof line, f)) {
        char *fields[6], *save = nullptr;
        int nf = 0;
        for (char* tok = strtok_r(line, " \n", &save); tok && nf < 6; tok = strtok_r(nullptr, " \n", &save)) fields[nf++] = tok;
        if (nf != 6) continue;
        BatchCase c;
        c.key = unhex(fields[0]);
        c.iv = unhex(fields[1]);
        c.aad = unhex(fields[2]);
        c.pt = unhex(fields[3]);
        c.ct = unhex(fields[4]);
        std::vector<uint8_t> tag = unhex(fields[5]);
        CHECK(tag.size() == 16 && c.ct.size() == c.pt.size(), "vector format");
        memcpy(c.tag, tag.data(), 16);
        // Reference GCM.
        GcmRef g = gcm_setup_ref(c.key.data(), (int)c.key.size(), c.iv.data(), c.iv.size());
        std::vector<uint8_t> ct(c.pt.size());
        uint8_t t[16];
        gcm_encrypt_ref(g, c.aad.data(), c.aad.size(), c.pt.data(), c.pt.size(), ct.data(), t);
        CHECK(ct == c.ct && memcmp(t, c.tag, 16) == 0, "reference vs cryptography, vector %d", nvec);
        // Fused emulation.
        fused_roundtrip(g, c.aad.data(), c.aad.size(), c.pt.data(), c.pt.size(), c.ct.data(), c.tag, "cryptography");
#if HAVE_REAL_AES
        fused_roundtrip<RealAesFactory>(g, c.aad.data(), c.aad.size(), c.pt.data(), c.pt.size(), c.ct.data(), c.tag,
                                        "cryptography, bitsliced AES");
#endif
        cases.push_back(c);
        nvec++;
    }
    fclose(f);
    check_db_cases(cases, "cryptography vectors");
#if HAVE_REAL_AES
    check_db_cases<RealAesFactory>(cases, "cryptography vectors, bitsliced AES");
    printf("cryptography vectors: %d checked through reference, fused and batch emulation (reference AES and "
           "the bitsliced gcmx_aes_ctr_x32 of aes_bs.cuh)\n", nvec);
#else
    printf("cryptography vectors: %d checked through reference, fused and batch emulation (reference AES; "
           "aes_bs.cuh is used only in the nvcc build)\n", nvec);
#endif
}

#ifndef GCMX_HOST_CHECK_NO_MAIN // cuda/tests/gcmx_device_check.cu reuses everything above
int main(int argc, char** argv)
{
    init_sbox();
    // FIPS-197 appendix C.1 (AES-128) known answer for the reference AES.
    {
        uint8_t key[16], pt[16], ct[16];
        for (int i = 0; i < 16; i++) key[i] = (uint8_t)i, pt[i] = (uint8_t)(i * 0x11);
        GcmxAesKey k = aes_expand_ref(key, 16);
        aes_encrypt_ref(k, pt, ct);
        const uint8_t expect[16] = {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30,
                                    0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a};
        CHECK(memcmp(ct, expect, 16) == 0, "FIPS-197 C.1");
    }
    check_field();
    check_ghash_kernel();
    check_fused_kernel();
    check_batch();
    if (argc > 1) check_vector_file(argv[1]);
    else printf("no vector file given: Python cryptography comparison skipped\n");
    printf("%d checks, %d failures\n", g_checks, g_failures);
    return g_failures == 0 ? 0 : 1;
}
#endif // GCMX_HOST_CHECK_NO_MAIN
