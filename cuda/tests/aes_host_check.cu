// aes_host_check.cu - host-side verification of cuda/aes_bs.cuh.
//
// The device code is compiled as __host__ __device__ (GCMX_AES_HD) and run on the CPU:
//  1. the S-box circuit (through sub_word, four bytes at a time, and through the
//     32-way bitsliced SubBytes) against an S-box computed here from its definition
//     (inverse in GF(2^8) mod x^8+x^4+x^3+x+1, then the affine map), all 256 inputs;
//  2. key expansion against FIPS-197 Appendix A (last words of the 128/192/256 schedules);
//  3. gcmx_aes_ctr_x32 against FIPS-197 Appendix C (AES-128/192/256 single-block vectors);
//  4. gcmx_aes_ctr_x32 against a vector file made with Python `cryptography`
//     (AES-ECB of the counter blocks): random keys of all sizes, random prefixes and
//     counters, strides 1 and 32 and random, counters that wrap at 2^32;
//  5. the aes_ctr.cu kernel body (gcmx_aes_ctr_chunk), emulated warp by warp and lane by
//     lane on the host, on whole buffers from the same file (lengths 0 .. 40000 bytes,
//     partial last blocks, counters wrapping at 2^32); bytes past the end must not change.
// Usage: aes_host_check [vectors.txt]   (exit status 0 = all passed)
// File format, one case per line, hex without spaces:
//   <key> <prefix: 12 bytes> <ctr_first: 8 hex> <ctr_stride: 8 hex> <32 keystream blocks>
//   C <key> <J0: 16 bytes> <nbytes decimal> <expected output, or "-" when empty>
//     (input data[i] = (131 i + 7) mod 256)
#define GCMX_AES_HD __host__ __device__
#include "../aes_bs.cuh"
#include "../aes_ctr.cu"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static int g_fail = 0;
#define CHECK(cond, ...)                      \
    do {                                      \
        if (!(cond)) {                        \
            std::printf("FAIL: " __VA_ARGS__); \
            std::printf("\n");                \
            ++g_fail;                         \
        }                                     \
    } while (0)

static uint8_t gf_mul(uint8_t a, uint8_t b) {
    uint8_t r = 0;
    while (b) {
        if (b & 1) r ^= a;
        a = (uint8_t)((a << 1) ^ ((a & 0x80) ? 0x1B : 0));
        b >>= 1;
    }
    return r;
}

static uint8_t ref_sbox(uint8_t x) {
    uint8_t inv = 0;
    if (x) {  // x^254
        inv = 1;
        for (int i = 0; i < 254; ++i) inv = gf_mul(inv, x);
    }
    uint8_t r = 0x63;
    for (int i = 0; i < 8; ++i) {
        int bit = ((inv >> i) ^ (inv >> ((i + 4) & 7)) ^ (inv >> ((i + 5) & 7)) ^
                   (inv >> ((i + 6) & 7)) ^ (inv >> ((i + 7) & 7))) & 1;
        r ^= (uint8_t)(bit << i);
    }
    return r;
}

static std::vector<uint8_t> unhex(const std::string& s) {
    std::vector<uint8_t> v;
    for (size_t i = 0; i + 1 < s.size(); i += 2) v.push_back((uint8_t)std::stoul(s.substr(i, 2), nullptr, 16));
    return v;
}

static uint32_t le32(const uint8_t* p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void ks_bytes(const uint4& v, uint8_t out[16]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < 4; ++i)
        for (int m = 0; m < 4; ++m) out[4 * i + m] = (uint8_t)(w[i] >> (8 * m));
}

static void check_sbox() {
    uint8_t ref[256];
    for (int x = 0; x < 256; ++x) ref[x] = ref_sbox((uint8_t)x);
    CHECK(ref[0x00] == 0x63 && ref[0x53] == 0xED && ref[0xFF] == 0x16, "reference S-box self-check");
    int bad = 0;
    for (int x = 0; x < 256; x += 4) {
        uint32_t w = (uint32_t)x | ((uint32_t)(x + 1) << 8) | ((uint32_t)(x + 2) << 16) | ((uint32_t)(x + 3) << 24);
        uint32_t s = gcmx_aes_detail::sub_word(w);
        for (int m = 0; m < 4; ++m) bad += ((s >> (8 * m)) & 0xFF) != ref[x + m];
    }
    CHECK(bad == 0, "sub_word circuit: %d of 256 S-box outputs wrong", bad);
    // 32-way bitsliced SubBytes: 8 words of 32 lanes = 256 inputs across 16 bytes x 32 lanes.
    uint32_t st[GCMX_AES_PLANES];
    bad = 0;
    for (int i = 0; i < 16; ++i)
        for (int b = 0; b < 8; ++b) {
            uint32_t p = 0;
            for (int j = 0; j < 32; ++j) p |= (uint32_t)((((i * 32 + j) & 0xFF) >> b) & 1) << j;
            st[8 * i + b] = p;
        }
    gcmx_aes_detail::sub_bytes(st);
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 32; ++j) {
            int x = (i * 32 + j) & 0xFF, y = 0;
            for (int b = 0; b < 8; ++b) y |= (int)((st[8 * i + b] >> j) & 1) << b;
            bad += (y ^ 0x63) != ref[x];  // sub_bytes leaves out the affine constant (see aes_bs.cuh)
        }
    CHECK(bad == 0, "bitsliced SubBytes: %d of 512 outputs wrong", bad);
    std::printf("S-box circuit: all 256 inputs checked (sub_word and bitsliced SubBytes)\n");
}

static void check_expand() {
    // FIPS-197 Appendix A.1 / A.2 / A.3
    const uint8_t k128[16] = {0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c};
    const uint8_t k192[24] = {0x8e, 0x73, 0xb0, 0xf7, 0xda, 0x0e, 0x64, 0x52, 0xc8, 0x10, 0xf3, 0x2b,
                              0x80, 0x90, 0x79, 0xe5, 0x62, 0xf8, 0xea, 0xd2, 0x52, 0x2c, 0x6b, 0x7b};
    const uint8_t k256[32] = {0x60, 0x3d, 0xeb, 0x10, 0x15, 0xca, 0x71, 0xbe, 0x2b, 0x73, 0xae, 0xf0, 0x85, 0x7d, 0x77, 0x81,
                              0x1f, 0x35, 0x2c, 0x07, 0x3b, 0x61, 0x08, 0xd7, 0x2d, 0x98, 0x10, 0xa3, 0x09, 0x14, 0xdf, 0xf4};
    GcmxAesKey k;
    gcmx_aes_expand_key(k128, 16, &k);
    CHECK(k.nr == 10 && k.rk[4] == 0xa0fafe17u && k.rk[43] == 0xb6630ca6u, "AES-128 key expansion");
    gcmx_aes_expand_key(k192, 24, &k);
    CHECK(k.nr == 12 && k.rk[6] == 0xfe0c91f7u && k.rk[51] == 0x01002202u, "AES-192 key expansion");
    gcmx_aes_expand_key(k256, 32, &k);
    CHECK(k.nr == 14 && k.rk[8] == 0x9ba35411u && k.rk[59] == 0x706c631eu, "AES-256 key expansion");
    gcmx_aes_expand_key(k256, 20, &k);
    CHECK(k.nr == 0 && k.rk[0] == 0u, "bad key length gives nr = 0");
    std::printf("key expansion: FIPS-197 A.1-A.3 checked\n");
}

// Run gcmx_aes_ctr_x32 and return block j's bytes; gcmx_aes_ctr_x32_tbl (round keys from the
// mask table of gcmx_aes_fill_masks) must give the same 32 blocks.
static void run_ctr(const GcmxAesKey& k, const uint8_t prefix[12], uint32_t ctr_first, uint32_t stride,
                    uint8_t out[32][16]) {
    uint4 ks[32], kt[32];
    gcmx_aes_ctr_x32(k, le32(prefix), le32(prefix + 4), le32(prefix + 8), ctr_first, stride, ks);
    static uint32_t tbl[GCMX_AES_MASK_WORDS];
    gcmx_aes_fill_masks(k, tbl, 0u, 1u);
    uint32_t rk01[8];
    gcmx_aes_round01(k, rk01);
    gcmx_aes_ctr_x32_tbl(rk01, tbl, k.nr, le32(prefix), le32(prefix + 4), le32(prefix + 8), ctr_first, stride, kt);
    for (int j = 0; j < 32; ++j) {
        CHECK(ks[j].x == kt[j].x && ks[j].y == kt[j].y && ks[j].z == kt[j].z && ks[j].w == kt[j].w,
              "mask-table AES == AES (block %d)", j);
        ks_bytes(ks[j], out[j]);
    }
}

static void check_fips_c() {
    uint8_t key[32], pt[16];
    for (int i = 0; i < 32; ++i) key[i] = (uint8_t)i;
    for (int i = 0; i < 16; ++i) pt[i] = (uint8_t)(i * 0x11);
    const char* expect[3] = {"69c4e0d86a7b0430d8cdb78070b4c55a", "dda97ca4864cdfe06eaf70a0ec0d7191",
                             "8ea2b7ca516745bfeafc49904b496089"};
    for (int v = 0; v < 3; ++v) {
        GcmxAesKey k;
        gcmx_aes_expand_key(key, 16 + 8 * v, &k);
        uint8_t out[32][16];
        uint32_t ctr = ((uint32_t)pt[12] << 24) | ((uint32_t)pt[13] << 16) | ((uint32_t)pt[14] << 8) | pt[15];
        run_ctr(k, pt, ctr, 32, out);
        std::vector<uint8_t> e = unhex(expect[v]);
        CHECK(std::memcmp(out[0], e.data(), 16) == 0, "FIPS-197 C.%d (AES-%d)", v + 1, 128 + 64 * v);
    }
    std::printf("FIPS-197 C.1-C.3 checked\n");
}

static int check_file(const char* path) {
    FILE* f = std::fopen(path, "r");
    if (!f) {
        std::printf("FAIL: cannot open %s\n", path);
        return ++g_fail;
    }
    static char line[1 << 20];
    int cases = 0, bad = 0, by_len[3] = {0, 0, 0}, ctr_cases = 0, ctr_bad = 0;
    while (std::fgets(line, sizeof line, f)) {
        if (line[0] == 'C') {
            static char eh[1 << 20];
            char kh[80], jh[40];
            unsigned long long nbytes = 0;
            if (std::sscanf(line, "C %79s %39s %llu %1048575s", kh, jh, &nbytes, eh) != 4) continue;
            std::vector<uint8_t> key = unhex(kh), j0 = unhex(jh), exp = nbytes ? unhex(eh) : std::vector<uint8_t>();
            GcmxAesKey k;
            gcmx_aes_expand_key(key.data(), (uint32_t)key.size(), &k);
            static uint32_t masks[GCMX_AES_MASK_WORDS];
            gcmx_aes_fill_masks(k, masks, 0u, 1u);
            const uint32_t ctr0 = ((uint32_t)j0[12] << 24) | ((uint32_t)j0[13] << 16) | ((uint32_t)j0[14] << 8) | j0[15];
            // buffer with a guard area after the end, 16-byte aligned like a device allocation
            std::vector<uint4> store((nbytes + 64 + 15) / 16 + 1);
            uint8_t* buf = reinterpret_cast<uint8_t*>(store.data());
            for (size_t i = 0; i < nbytes + 64; ++i) buf[i] = (uint8_t)(131u * i + 7u);
            const uint64_t nchunks = (((nbytes + 15) >> 4) + GCMX_AES_CTR_CHUNK_BLOCKS - 1) / GCMX_AES_CTR_CHUNK_BLOCKS;
            for (uint64_t c = 0; c < nchunks; ++c)
                for (uint32_t lane = 0; lane < 32; ++lane)
                    gcmx_aes_ctr_chunk(k, masks, k.nr, le32(j0.data()), le32(j0.data() + 4), le32(j0.data() + 8), ctr0, buf, nbytes, c,
                                       lane);
            bool ok = exp.size() == nbytes && (nbytes == 0 || std::memcmp(buf, exp.data(), nbytes) == 0);
            for (size_t i = nbytes; i < nbytes + 64; ++i) ok = ok && buf[i] == (uint8_t)(131u * i + 7u);
            if (!ok) {
                ++ctr_bad;
                std::printf("FAIL: aes_ctr kernel emulation, %llu bytes, key %zu bytes\n", nbytes, key.size());
            }
            ++ctr_cases;
            continue;
        }
        char kh[80], ph[40], ch[16], sh[16];
        static char eh[2048];
        if (std::sscanf(line, "%79s %39s %15s %15s %2047s", kh, ph, ch, sh, eh) != 5) continue;
        std::vector<uint8_t> key = unhex(kh), pre = unhex(ph), exp = unhex(eh);
        uint32_t ctr = (uint32_t)std::strtoul(ch, nullptr, 16), stride = (uint32_t)std::strtoul(sh, nullptr, 16);
        GcmxAesKey k;
        gcmx_aes_expand_key(key.data(), (uint32_t)key.size(), &k);
        uint8_t out[32][16];
        run_ctr(k, pre.data(), ctr, stride, out);
        int ok = exp.size() == 512 && std::memcmp(out, exp.data(), 512) == 0;
        if (!ok) {
            ++bad;
            if (bad <= 5) std::printf("FAIL: vector %d (key %zu bytes, ctr %08x stride %u)\n", cases, key.size(), ctr, stride);
        }
        by_len[(key.size() - 16) / 8]++;
        ++cases;
    }
    std::fclose(f);
    CHECK(cases > 0, "no vectors read from %s", path);
    g_fail += bad + ctr_bad;
    std::printf("cryptography vectors: %d cases (AES-128 %d, AES-192 %d, AES-256 %d) x 32 blocks, %d bad\n", cases,
                by_len[0], by_len[1], by_len[2], bad);
    std::printf("aes_ctr kernel emulation: %d whole buffers (0..40000 bytes), %d bad\n", ctr_cases, ctr_bad);
    return bad;
}

int main(int argc, char** argv) {
    check_sbox();
    check_expand();
    check_fips_c();
    if (argc > 1) check_file(argv[1]);
    if (g_fail) {
        std::printf("aes_host_check: %d FAILED\n", g_fail);
        return 1;
    }
    std::printf("aes_host_check: all passed\n");
    return 0;
}
