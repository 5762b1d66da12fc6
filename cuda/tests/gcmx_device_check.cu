// gcmx_device_check.cu -- runs the gcmx kernels on a GPU (CUDA runtime API, no Rust) and checks them
// against the host references of ghash_host_check.cu, then times them against the read / copy ceilings.
//
// Correctness (exact comparisons, any mismatch is a FAIL line and a nonzero exit):
//   * gcmx_abi_info words; gcmx_fill_powers tables vs host square-and-multiply;
//   * gcmx_ghash_clmad and gcmx_ghash_soft partials, folded with Q_SPAN, vs SP 800-38D GHASH (bit-serial)
//     for sizes 1 B .. ~3 MiB (odd tails, one and several thread blocks);
//   * gcmx_gcm_encrypt / gcmx_gcm_decrypt (out of place and in place) vs the reference GCM for all key
//     sizes, 12-byte and other IVs, counter wrap, sizes 0 .. ~3 MiB: ciphertext bytes and full tags;
//   * the device-resident batch kernels on mixed messages (0 B .. 100 KB, several keys, AAD) in both directions;
//   * at the benchmark size (default 4 GiB): clmad partials == soft partials; encrypt then decrypt gives
//     the input back and both directions hash the same ciphertext.
// Speed (CUDA events, best of 5 after a warm-up, over the benchmark size in device memory):
//   read fold and copy ceilings, GHASH clmad and soft, fused AES-128/256-GCM encrypt and decrypt, batch
//   of 1 KiB and 16 KiB messages (device-resident).
// Memory layout: one input and one output buffer of the benchmark size plus a copy of the input.
//
// Build (on any x86-64 machine; the binary links the CUDA runtime statically and runs on any CUDA machine): cuda/tests/run_device_check.sh
// Run: gcmx_device_check [GiB, default 4] [quick]   ("quick": correctness only)
#define GCMX_HOST_CHECK_NO_MAIN
#include "ghash_host_check.cu"
#include "../gcmx_all.cu"

#include <algorithm>

#include "cu_check.h"

static uint8_t* dmalloc(size_t n)
{
    void* p = nullptr;
    CU(cudaMalloc(&p, n ? n : 16));
    return (uint8_t*)p;
}
static uint8_t* dupload(const void* h, size_t n)
{
    uint8_t* d = dmalloc(n);
    if (n) CU(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    return d;
}
static uint64_t A(const void* p) { return (uint64_t)(uintptr_t)p; }

__global__ void dc_fill(uint64_t* p, uint64_t n, uint64_t seed)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + i * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        p[i] = z ^ (z >> 31);
    }
}
__global__ void dc_diff(const uint4* a, const uint4* b, uint64_t n, unsigned long long* cnt)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        uint4 x = a[i], y = b[i];
        if (x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w) atomicAdd(cnt, 1ull);
    }
}
static const uint32_t DC_GRID = 132 * 16, DC_THREADS = 256;

static std::vector<GcmxU128> download_u128(const uint8_t* d, size_t n)
{
    std::vector<GcmxU128> v(n);
    CU(cudaMemcpy(v.data(), d, 16 * n, cudaMemcpyDeviceToHost));
    return v;
}

// ------------------------------------------------------------------------------------------------
static void dev_info_and_powers()
{
    uint8_t* d = dmalloc(4 * GCMX_ABI_INFO_WORDS);
    gcmx_abi_info<<<1, 1>>>(A(d));
    CU(cudaGetLastError());
    uint32_t w[GCMX_ABI_INFO_WORDS];
    CU(cudaMemcpy(w, d, sizeof w, cudaMemcpyDeviceToHost));
    CHECK(w[0] == GCMX_ABI_VERSION && w[2] == GCMX_GHASH_THREADS && w[3] == GCMX_GHASH_SPAN && w[4] == GCMX_FUSED_THREADS &&
              w[5] == GCMX_FUSED_SPAN && w[6] == GCMX_DB_UNIT_BLOCKS && w[7] == sizeof(GcmxGcmParams),
          "abi_info words");
    printf("abi_info: version %u, have_clmad %u\n", w[0], w[1]);
    CU(cudaFree(d));
    GcmxU128 hp = from_r(hprime_of(rnd128()));
    const uint32_t layouts[2][2] = {{GCMX_GHASH_THREADS, GCMX_GHASH_POW_COUNT}, {GCMX_FUSED_THREADS, GCMX_FUSED_POW_COUNT}};
    const uint64_t spans[2] = {GCMX_GHASH_WARP_SPAN, GCMX_FUSED_WARP_SPAN};
    for (int k = 0; k < 2; k++) {
        uint8_t* t = dmalloc(16 * layouts[k][1]);
        GcmxFillPowersParams p;
        memset(&p, 0, sizeof p);
        p.h_prime = hp;
        p.table = A(t);
        p.warp_span = spans[k];
        p.threads = layouts[k][0];
        p.count = layouts[k][1];
        gcmx_fill_powers<<<(p.count + GCMX_FILL_THREADS - 1) / GCMX_FILL_THREADS, GCMX_FILL_THREADS>>>(p);
        CU(cudaGetLastError());
        std::vector<GcmxU128> got = download_u128(t, p.count), want = strided_table(hp, p.threads, p.warp_span);
        int bad = 0;
        for (uint32_t i = 0; i < p.count; i++) bad += to_r(got[i]) != to_r(want[i]);
        CHECK(bad == 0, "fill_powers layout %d: %d of %u entries differ", k, bad, p.count);
        CU(cudaFree(t));
    }
}

static std::vector<GcmxU128> dev_ghash(bool clmad, const uint8_t* d, uint64_t n, const uint8_t* dpow, uint32_t grid,
                                       uint8_t* dpart)
{
    GcmxGhashParams p = {A(d), n, A(dpow), A(dpart)};
#if GCMX_DEFAULT_CLMAD
    if (clmad) gcmx_ghash_clmad<<<grid, GCMX_GHASH_THREADS>>>(p);
    else
#endif
        gcmx_ghash_soft<<<grid, GCMX_GHASH_THREADS>>>(p);
    (void)clmad;
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    return download_u128(dpart, grid);
}

static void dev_ghash_check()
{
    const uint64_t S = (uint64_t)GCMX_GHASH_SPAN * 16;
    const uint64_t sizes[] = {1, 15, 16, 17, 1000, 4096 * 16 + 5, S - 1, S, S + 1, 2 * S + 123, 6 * S - 7};
    u128r h = rnd128();
    GcmxU128 hp = from_r(hprime_of(h));
    std::vector<GcmxU128> pw = strided_table(hp, GCMX_GHASH_THREADS, GCMX_GHASH_WARP_SPAN);
    uint8_t* dpow = dupload(pw.data(), 16 * pw.size());
    for (uint64_t n : sizes) {
        std::vector<uint8_t> msg(n);
        rnd_bytes(msg.data(), n);
        uint8_t* d = dupload(msg.data(), n);
        uint32_t grid = grid_for(n, GCMX_GHASH_SPAN);
        uint8_t* dpart = dmalloc(16 * (size_t)grid);
        u128r want = ghash_ref(h, msg.data(), n);
        for (int v = 0; v < 1 + GCMX_DEFAULT_CLMAD; v++) {
            bool cl = v == 1;
            u128r got = to_r(combine_partials(dev_ghash(cl, d, n, dpow, grid, dpart), hp, GCMX_GHASH_SPAN));
            CHECK(got == want, "device ghash %s n=%llu", cl ? "clmad" : "soft", (unsigned long long)n);
        }
        CU(cudaFree(d));
        CU(cudaFree(dpart));
    }
    CU(cudaFree(dpow));
    printf("device ghash: %zu sizes, clmad%s and soft\n", sizeof sizes / sizeof sizes[0], GCMX_DEFAULT_CLMAD ? "" : " (absent)");
}

static std::vector<GcmxU128> dev_fused(bool decrypt, const GcmxAesKey& key, const uint8_t j0[16], uint32_t ctr_first,
                                       const uint8_t* din, uint8_t* dout, uint64_t n, const uint8_t* dpow, uint32_t grid,
                                       uint8_t* dpart)
{
    GcmxGcmParams p;
    memset(&p, 0, sizeof p);
    p.in = A(din);
    p.out = A(dout);
    p.nbytes = n;
    p.powers = A(dpow);
    p.partials = A(dpart);
    GcmxGcmCtr ctr;
    memcpy(ctr.j0_prefix, j0, 12);
    ctr.ctr_first = ctr_first;
    uint8_t* dkey = dupload(&key, sizeof key);
    uint8_t* dctr = dupload(&ctr, sizeof ctr);
    p.key = A(dkey);
    p.ctr = A(dctr);
    p.nr = key.nr;
    if (decrypt) gcmx_gcm_decrypt<<<grid, GCMX_FUSED_THREADS>>>(p);
    else gcmx_gcm_encrypt<<<grid, GCMX_FUSED_THREADS>>>(p);
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    CU(cudaFree(dkey));
    CU(cudaFree(dctr));
    return download_u128(dpart, grid);
}

static void dev_fused_case(const GcmRef& g, const std::vector<uint8_t>& aad, const std::vector<uint8_t>& pt, const char* what)
{
    uint64_t n = pt.size();
    std::vector<uint8_t> ct(n);
    uint8_t tag[16], got_tag[16];
    gcm_encrypt_ref(g, aad.data(), aad.size(), pt.data(), n, ct.data(), tag);
    GcmxU128 hp = from_r(hprime_of(g.h));
    std::vector<GcmxU128> pw = strided_table(hp, GCMX_FUSED_THREADS, GCMX_FUSED_WARP_SPAN);
    uint8_t* dpow = dupload(pw.data(), 16 * pw.size());
    uint32_t grid = grid_for(n, GCMX_FUSED_SPAN);
    uint8_t* dpart = dmalloc(16 * (size_t)grid);
    uint8_t* din = dupload(pt.data(), n);
    uint8_t* dout = dmalloc(n);
    uint32_t c1 = be32(g.j0 + 12) + 1;
    GcmxU128 z = combine_partials(dev_fused(false, g.key, g.j0, c1, din, dout, n, dpow, grid, dpart), hp, GCMX_FUSED_SPAN);
    host_tag(g, hp, aad.data(), aad.size(), z, n, got_tag);
    std::vector<uint8_t> out(n);
    if (n) CU(cudaMemcpy(out.data(), dout, n, cudaMemcpyDeviceToHost));
    CHECK(out == ct, "%s: device encrypt ct n=%llu", what, (unsigned long long)n);
    CHECK(memcmp(got_tag, tag, 16) == 0, "%s: device encrypt tag n=%llu", what, (unsigned long long)n);
    // decrypt in place
    GcmxU128 zd = combine_partials(dev_fused(true, g.key, g.j0, c1, dout, dout, n, dpow, grid, dpart), hp, GCMX_FUSED_SPAN);
    if (n) CU(cudaMemcpy(out.data(), dout, n, cudaMemcpyDeviceToHost));
    CHECK(out == pt, "%s: device decrypt in place n=%llu", what, (unsigned long long)n);
    CHECK(to_r(zd) == to_r(z), "%s: device decrypt hash n=%llu", what, (unsigned long long)n);
    CU(cudaFree(dpow));
    CU(cudaFree(dpart));
    CU(cudaFree(din));
    CU(cudaFree(dout));
}

static void dev_fused_check()
{
    const uint64_t S = (uint64_t)GCMX_FUSED_SPAN * 16;
    const uint64_t sizes[] = {0, 1, 15, 16, 17, 4095, 16384 + 7, S - 1, S, S + 16, 3 * S + 5, 12 * S - 9};
    int k = 0;
    for (uint64_t n : sizes) {
        int klen = 16 + 8 * (k % 3);
        uint8_t key[32], iv[40];
        rnd_bytes(key, 32);
        rnd_bytes(iv, 40);
        size_t ivlen = (k % 4 == 3) ? 1 + rnd64() % 40 : 12;
        GcmRef g = gcm_setup_ref(key, klen, iv, ivlen);
        std::vector<uint8_t> aad(rnd64() % 50), pt(n);
        rnd_bytes(aad.data(), aad.size());
        rnd_bytes(pt.data(), n);
        dev_fused_case(g, aad, pt, "fused");
        k++;
    }
    uint8_t key[32];
    rnd_bytes(key, 32);
    GcmRef g = gcm_setup_ref(key, 32, key, 12);
    memset(g.j0 + 12, 0xFF, 3);
    g.j0[15] = 0xF0;
    std::vector<uint8_t> aad, pt(16 * 5000 + 3);
    rnd_bytes(pt.data(), pt.size());
    dev_fused_case(g, aad, pt, "counter wrap");
    printf("device fused: %d sizes + counter wrap, encrypt + in-place decrypt\n", k);
}

// Device-resident batch on the device: the same setup as the emulation (db_setup), then one cooperative
// launch of the one-key or the several-key kernel.
static void dev_batch(const std::vector<BatchCase>& cases, bool decrypt, const char* what, bool verify, double* seconds)
{
    DbRun R;
    db_setup<RefAesFactory>(R, cases, decrypt, false);
    const uint32_t n = (uint32_t)cases.size(), nkeys = (uint32_t)R.keys.size();
    const bool one = nkeys == 1;
    const void* fn = decrypt ? (one ? (const void*)gcmx_dbatch_open1 : (const void*)gcmx_dbatch_openn)
                             : (one ? (const void*)gcmx_dbatch_seal1 : (const void*)gcmx_dbatch_sealn);
    int dev = 0, sms = 0, per_sm = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, GCMX_DB_THREADS, 0));
    const uint32_t grid = (uint32_t)(per_sm * sms);
    uint8_t *ddesc = dupload(R.desc.data(), sizeof(GcmxDevMsg) * n), *ddata = dupload(R.data.data(), R.data.size());
    uint8_t *daad = dupload(R.aad.data(), R.aad.size() + 16), *dnon = dupload(R.nonces.data(), R.nonces.size());
    uint8_t *dkeys = dupload(R.keys.data(), sizeof(GcmxAesKey) * nkeys), *dkp = dmalloc(sizeof(GcmxKeyPowers) * nkeys);
    uint8_t *dtags = dmalloc(16 * (size_t)n), *dver = dmalloc(n);
    const uint64_t scr_len = gcmx_db_scratch_bytes(n, grid);
    uint8_t* dscr = dmalloc(scr_len);
    CU(cudaMemset(dscr, 0, scr_len));
    GcmxKeyPowersParams kpp;
    memset(&kpp, 0, sizeof kpp);
    kpp.keys = A(dkeys);
    kpp.key_powers = A(dkp);
    kpp.nkeys = nkeys;
    gcmx_key_powers<<<(nkeys + GCMX_KEY_POWERS_THREADS - 1) / GCMX_KEY_POWERS_THREADS, GCMX_KEY_POWERS_THREADS>>>(kpp);
    CU(cudaGetLastError());
    GcmxDbParams p;
    memset(&p, 0, sizeof p);
    p.msgs = A(ddesc);
    p.data = A(ddata);
    p.data_len = R.data.size();
    p.aad = A(daad);
    p.aad_len = R.aad.size();
    p.nonces = A(dnon);
    p.nonces_len = R.nonces.size();
    p.tags = A(dtags);
    p.verdicts = A(dver);
    p.keys = A(dkeys);
    p.key_powers = A(dkp);
    p.scratch = A(dscr);
    p.nmsgs = n;
    p.nkeys = nkeys;
    p.nr = R.keys[0].nr;
    p.mode = decrypt ? GCMX_DB_EXPECT : GCMX_DB_SEAL;
    p.tag_len = 16;
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    float best = 1e30f;
    const int reps = seconds ? 6 : 1;
    for (int rep = 0; rep < reps; rep++) {
        // Every repeat transforms the data again: restore the input first (not timed).
        if (rep > 0) CU(cudaMemcpy(ddata, R.data.data(), R.data.size(), cudaMemcpyHostToDevice));
        void* args[] = {&p};
        CU(cudaEventRecord(e0));
        CU(cudaLaunchCooperativeKernel(fn, grid, GCMX_DB_THREADS, args, 0, 0));
        CU(cudaEventRecord(e1));
        CU(cudaEventSynchronize(e1));
        p.bar_base += (decrypt ? GCMX_DB_BARRIERS_OPEN : GCMX_DB_BARRIERS_SEAL) * grid;
        float ms;
        CU(cudaEventElapsedTime(&ms, e0, e1));
        if (rep > 0 || !seconds) best = std::min(best, ms);
    }
    if (seconds) *seconds = best / 1e3;
    std::vector<uint8_t> out(R.data.size()), tags(16 * (size_t)n), ver(n);
    if (!out.empty()) CU(cudaMemcpy(out.data(), ddata, out.size(), cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(tags.data(), dtags, tags.size(), cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(ver.data(), dver, n, cudaMemcpyDeviceToHost));
    int bad = 0, checked = 0;
    for (size_t k = 0; k < cases.size(); k++) {
        if (!verify && k >= 64 && k + 64 < cases.size()) continue; // speed runs: verify the first and last 64
        const std::vector<uint8_t>& expect = decrypt ? cases[k].pt : cases[k].ct;
        bool ok = ver[k] == GCMX_VERDICT_OK && (expect.empty() || memcmp(&out[R.data_at[k]], expect.data(), expect.size()) == 0) &&
                  memcmp(&tags[16 * k], cases[k].tag, 16) == 0;
        bad += !ok;
        checked++;
    }
    CHECK(bad == 0, "%s %s: %d of %d checked messages wrong", what, decrypt ? "decrypt" : "encrypt", bad, checked);
    for (uint8_t* d : {ddesc, ddata, daad, dnon, dkeys, dkp, dtags, dver, dscr}) CU(cudaFree(d));
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
}

static void dev_batch_check()
{
    std::vector<BatchCase> cases;
    std::vector<uint8_t> key;
    const size_t sizes[] = {0, 1, 15, 16, 17, 64, 500, 1024, 4000, 16383, 16384, 16385, 33000, 65536 + 7, 100000, 3, 1000};
    for (size_t k = 0; k < 300; k++) {
        if (k % 5 == 0) {
            key.resize(16 + 8 * (k / 5 % 3));
            rnd_bytes(key.data(), key.size());
        }
        size_t n = k < sizeof sizes / sizeof sizes[0] ? sizes[k] : rnd64() % 5000;
        cases.push_back(make_case(key, (k % 7 == 6) ? 1 + rnd64() % 30 : 12, k % 4 ? rnd64() % 80 : 0, n));
    }
    dev_batch(cases, false, "device batch", true, nullptr);
    dev_batch(cases, true, "device batch", true, nullptr);
    printf("device batch: %zu messages, both directions\n", cases.size());
}

// ------------------------------------------------------------------------------------------------
template <class F> static double best_seconds(F launch, int reps = 5)
{
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    launch(); // warm-up
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    float best = 1e30f;
    for (int r = 0; r < reps; r++) {
        CU(cudaEventRecord(e0));
        launch();
        CU(cudaEventRecord(e1));
        CU(cudaEventSynchronize(e1));
        float ms;
        CU(cudaEventElapsedTime(&ms, e0, e1));
        best = std::min(best, ms);
    }
    CU(cudaGetLastError());
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    return best / 1e3;
}

static unsigned long long dev_count_diff(const uint8_t* a, const uint8_t* b, uint64_t n)
{
    unsigned long long* d;
    CU(cudaMalloc(&d, sizeof *d));
    CU(cudaMemset(d, 0, sizeof *d));
    dc_diff<<<DC_GRID, DC_THREADS>>>((const uint4*)a, (const uint4*)b, n / 16, d);
    unsigned long long h;
    CU(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CU(cudaFree(d));
    return h;
}

static void bench(uint64_t gib)
{
    const uint64_t n = gib << 30, nb = n / 16;
    uint8_t *din = dmalloc(n), *dout = dmalloc(n), *dorig = dmalloc(n);
    dc_fill<<<DC_GRID, DC_THREADS>>>((uint64_t*)din, n / 8, 12345);
    CU(cudaMemcpy(dorig, din, n, cudaMemcpyDeviceToDevice));
    const double GB = 1e9;
    // ceilings
    GcmxBwParams bw = {A(din), A(dout), n};
    uint32_t gread = (uint32_t)((nb + GCMX_GHASH_SPAN - 1) / GCMX_GHASH_SPAN);
    uint32_t gcopy = (uint32_t)((nb + GCMX_BW_COPY_SPAN - 1) / GCMX_BW_COPY_SPAN);
    double t_read = best_seconds([&] { gcmx_bw_read<<<gread, GCMX_GHASH_THREADS>>>(bw); });
    double t_copy = best_seconds([&] { gcmx_bw_copy<<<gcopy, GCMX_BW_THREADS>>>(bw); });
    double read_bw = n / t_read / GB;
    printf("size %llu GiB\nceiling read (XOR fold)      %8.1f GB/s\nceiling copy (read+write)    %8.1f GB/s (%.1f GB/s of data)\n",
           (unsigned long long)gib, read_bw, 2 * n / t_copy / GB, n / t_copy / GB);
    // GHASH
    u128r h = rnd128();
    GcmxU128 hp = from_r(hprime_of(h));
    std::vector<GcmxU128> pw = strided_table(hp, GCMX_GHASH_THREADS, GCMX_GHASH_WARP_SPAN);
    uint8_t* dpow = dupload(pw.data(), 16 * pw.size());
    uint32_t grid = grid_for(n, GCMX_GHASH_SPAN);
    uint8_t *dpa = dmalloc(16 * (size_t)grid), *dpb = dmalloc(16 * (size_t)grid);
    GcmxGhashParams gp = {A(din), n, A(dpow), A(dpa)};
    GcmxGhashParams gs = {A(din), n, A(dpow), A(dpb)};
#if GCMX_DEFAULT_CLMAD
    double t_cl = best_seconds([&] { gcmx_ghash_clmad<<<grid, GCMX_GHASH_THREADS>>>(gp); });
    printf("ghash clmad                  %8.1f GB/s  (%.1f %% of read)\n", n / t_cl / GB, 100.0 * (n / t_cl / GB) / read_bw);
#endif
    double t_soft = best_seconds([&] { gcmx_ghash_soft<<<grid, GCMX_GHASH_THREADS>>>(gs); }, 2);
    printf("ghash soft                   %8.1f GB/s  (%.1f %% of read)\n", n / t_soft / GB, 100.0 * (n / t_soft / GB) / read_bw);
#if GCMX_DEFAULT_CLMAD
    {
        std::vector<GcmxU128> a = download_u128(dpa, grid), b = download_u128(dpb, grid);
        int bad = 0;
        for (uint32_t i = 0; i < grid; i++) bad += to_r(a[i]) != to_r(b[i]);
        CHECK(bad == 0, "bench size: clmad and soft partials differ in %d of %u", bad, grid);
    }
#endif
    (void)gp;
    // Fused
    for (int klen : {16, 32}) {
        uint8_t key[32], iv[12];
        rnd_bytes(key, 32);
        rnd_bytes(iv, 12);
        GcmRef g = gcm_setup_ref(key, klen, iv, 12);
        GcmxU128 hpk = from_r(hprime_of(g.h));
        std::vector<GcmxU128> fpw = strided_table(hpk, GCMX_FUSED_THREADS, GCMX_FUSED_WARP_SPAN);
        uint8_t* dfpow = dupload(fpw.data(), 16 * fpw.size());
        uint32_t fgrid = grid_for(n, GCMX_FUSED_SPAN);
        uint8_t *dfe = dmalloc(16 * (size_t)fgrid), *dfd = dmalloc(16 * (size_t)fgrid);
        GcmxGcmParams p;
        memset(&p, 0, sizeof p);
        p.in = A(din);
        p.out = A(dout);
        p.nbytes = n;
        p.powers = A(dfpow);
        p.partials = A(dfe);
        GcmxGcmCtr ctr;
        memcpy(ctr.j0_prefix, g.j0, 12);
        ctr.ctr_first = be32(g.j0 + 12) + 1;
        uint8_t* dkey = dupload(&g.key, sizeof g.key);
        uint8_t* dctr = dupload(&ctr, sizeof ctr);
        p.key = A(dkey);
        p.ctr = A(dctr);
        p.nr = g.key.nr;
        GcmxGcmParams q = p;
        q.in = A(dout);
        q.out = A(din);
        q.partials = A(dfd);
        double te = best_seconds([&] { gcmx_gcm_encrypt<<<fgrid, GCMX_FUSED_THREADS>>>(p); });
        // decrypt out -> in (restores the input) for timing and for the round-trip check
        double td = best_seconds([&] { gcmx_gcm_decrypt<<<fgrid, GCMX_FUSED_THREADS>>>(q); });
        printf("AES-%d-GCM encrypt (fused)   %8.1f GB/s\nAES-%d-GCM decrypt (fused)   %8.1f GB/s\n", 8 * klen, n / te / GB,
               8 * klen, n / td / GB);
        CHECK(dev_count_diff(din, dorig, n) == 0, "AES-%d: encrypt+decrypt round trip at bench size", 8 * klen);
        std::vector<GcmxU128> a = download_u128(dfe, fgrid), b = download_u128(dfd, fgrid);
        int bad = 0;
        for (uint32_t i = 0; i < fgrid; i++) bad += to_r(a[i]) != to_r(b[i]);
        CHECK(bad == 0, "AES-%d: encrypt and decrypt partials differ in %d of %u", 8 * klen, bad, fgrid);
        CU(cudaFree(dfpow));
        CU(cudaFree(dfe));
        CU(cudaFree(dfd));
        CU(cudaFree(dkey));
        CU(cudaFree(dctr));
    }
    CU(cudaFree(dpow));
    CU(cudaFree(dpa));
    CU(cudaFree(dpb));
    CU(cudaFree(din));
    CU(cudaFree(dout));
    CU(cudaFree(dorig));
    // Batch, device-resident, one AES-128 key, 12-byte nonces, 16-byte AAD.
    for (size_t msize : {(size_t)1024, (size_t)16384}) {
        size_t count = std::min<size_t>(100000, ((size_t)256 << 20) / msize);
        std::vector<uint8_t> key(16);
        rnd_bytes(key.data(), 16);
        std::vector<BatchCase> cases;
        cases.reserve(count);
        for (size_t k = 0; k < count; k++) {
            BatchCase c;
            c.key = key;
            c.iv.resize(12);
            rnd_bytes(c.iv.data(), 12);
            c.aad.resize(16);
            rnd_bytes(c.aad.data(), 16);
            c.pt.resize(msize);
            rnd_bytes(c.pt.data(), msize);
            c.ct.resize(msize);
            if (k < 64 || k + 64 >= count) {
                GcmRef g = gcm_setup_ref(key.data(), 16, c.iv.data(), 12);
                gcm_encrypt_ref(g, c.aad.data(), 16, c.pt.data(), msize, c.ct.data(), c.tag);
            }
            cases.push_back(std::move(c));
        }
        double t = 0;
        // Only the first and last 64 messages have reference ciphertexts; the rest are verified by nothing.
        dev_batch(cases, false, "batch bench", false, &t);
        printf("batch %5zu B x %zu (AES-128, device-resident): %.2f M msgs/s, %.1f GB/s\n", msize, count, count / t / 1e6,
               count * msize / t / GB);
    }
}

int main(int argc, char** argv)
{
    init_sbox();
    int dev = 0;
    cudaDeviceProp prop;
    CU(cudaGetDevice(&dev));
    CU(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    uint64_t gib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 4;
    bool quick = argc > 2 && strcmp(argv[2], "quick") == 0;
    dev_info_and_powers();
    dev_ghash_check();
    dev_fused_check();
    dev_batch_check();
    if (!quick && gib) bench(gib);
    printf("%d checks, %d failures\n", g_checks, g_failures);
    return g_failures == 0 ? 0 : 1;
}
