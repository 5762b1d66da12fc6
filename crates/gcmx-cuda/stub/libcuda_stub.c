/*
 * libcuda_stub.c: a stand-in for the CUDA driver API (libcuda.so.1) on machines without an NVIDIA driver.
 *
 * Why: the `cust` 0.3.2 crate (through its -sys crate `cust_raw` 0.11) links `-lcuda`. The CUDA toolkit ships such a
 * stub under lib64/stubs, the PyPI packages do not. scripts/setup-cuda.sh compiles this file into
 * .toolchain/cuda-stub/libcuda.so.1 (soname libcuda.so.1, symlink libcuda.so) so gcmx-cuda builds and its binaries
 * START on a machine with no driver; on a GPU machine the real driver's libcuda.so.1 is found first at run time.
 * It is also where gcmx-cuda's tests inject driver failures: the library itself has no test hooks.
 *
 * Three modes, and a fault table in front of all of them.
 *
 * "No device" (the default): every entry point declared by cust_raw 0.11.3's bindings (it covers every cu* symbol
 * cust 0.3.2 and gcmx-cuda link) returns CUDA_ERROR_NO_DEVICE (100), cuInit included, so callers report "no CUDA
 * device". Entry points that are not emulated (the GCMX_NO_DEVICE list at the end) read and write none of their
 * arguments (on the SysV x86-64 / AArch64 ABIs a C function that ignores its arguments may be called with any
 * argument list). The two error-string functions always work, because cust formats its errors with them.
 *
 * Emulation (switched on by gcmx_stub_emulate(), which gcmx-cuda's tests call through dlsym, by way of the dev-only
 * crate gcmx-cuda-testkit, before the first use of the device; a real driver has no such symbol): one device
 * (ordinal 0, "sm_90", memory capped at the configured size) whose memory is host RAM, so the host side of gcmx-cuda
 * runs end to end without a GPU:
 *   - init, device queries, the primary context (retain/release, current per thread), module load (accepts a fatbin
 *     image, checked by its magic number) and kernel lookup by name;
 *   - device memory: aligned malloc, zeroed (so that whatever is not zero was written by a call); page-locked host
 *     memory (cuMemAllocHost) and host registrations are tracked; copies and memsets run at once (synchronous is one valid
 *     schedule of asynchronous work), so streams and events are always complete;
 *   - kernels do not run. A launch of a gcmx kernel checks every buffer range in its parameters against the live
 *     allocations and then writes its outputs with a stand-in transform (not AES-GCM):
 *       gcmx_abi_info            the ABI words of gcmx_abi.h (have_clmad as configured);
 *       gcmx_gcm_encrypt/decrypt out[i] = in[i] ^ emu_ks(J0 byte 0, ctr_first, i) (emu_ks below), and
 *                                one partial per thread block: a hash of the ciphertext blocks of its run;
 *       gcmx_dbatch_*            (cooperative) per message: the descriptor checks of the real kernel (verdict
 *                                INVALID), J0 from the nonce (12 bytes: nonce || 0^31 1; J0 given: the 16
 *                                bytes; other lengths: a hash), the same transform with J0's counter, a tag
 *                                mixed from J0, key index, lengths, the AAD and the ciphertext; SEAL and EXPECT
 *                                write it, OPEN compares tag_len bytes and gives a refused message its
 *                                ciphertext back (the transform again, as the real kernel does); verdicts;
 *                                the kernel's scratch and the buffers it reads may be page-locked host memory
 *                                mapped for the device (cuMemHostAlloc with DEVICEMAP), as on the real driver;
 *       gcmx_aes_expand_keys, gcmx_key_powers: a non-zero fill (so a missed wipe of them shows);
 *       other kernels (benchmark only): nothing.
 *     So a seal then an open through the same path gives the plaintext back, and a changed tag, ciphertext or AAD is
 *     refused; the ciphertext of a 12-byte nonce is predictable (the tests mirror emu_ks).
 *   - checks the real driver would not make, counted in gcmx_stub_stats(): device memory or page-locked memory freed
 *     while not all zero (a missed wipe), asynchronous copies from or to host memory that is neither page-locked nor
 *     registered, and invalid calls (unknown handle or pointer, range outside an allocation, no current context).
 *   - live counts of device allocations, page-locked allocations, registrations, streams, events, modules and
 *     context references, for leak checks, and how many live allocations hold anything but zeros (what a call
 *     left behind in buffers that gcmx keeps between calls).
 * Everything is serialised by one mutex.
 *
 * Pass-through (GCMX_STUB_DRIVER=/absolute/path/to/the/driver's/libcuda.so.1, read at the first driver call): every
 * entry point gcmx-cuda and cust's tests call (GCMX_ENTRY_POINTS below) is forwarded to that library, so the fault
 * table can fail calls of a real driver on a GPU machine (scripts/gpu-run.sh faults). Emulation cannot be switched
 * on then, and the other entry points answer CUDA_ERROR_NOT_SUPPORTED.
 *
 * Fault table (gcmx_stub_fault_*; "Fault injection" below): each call of an entry point gcmx-cuda uses is counted as
 * one kind (Op in gcmx-cuda-testkit); armed, the nth call of a kind fails once, or fails with every counted call
 * after it (a lost context), returning the driver's code for such a failure. A wait reports its failure after
 * waiting; releases and queries are not counted. Apart from the table, gcmx_stub_fault_release() fails the next
 * calls that make a context current or end a host registration, which a resource's release depends on.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gcmx_abi.h"

#define GCMX_STUB_EXPORT __attribute__((visibility("default")))

/* CUresult values used here (cuda.h). */
enum {
    CU_OK = 0,
    CU_INVALID_VALUE = 1,
    CU_OUT_OF_MEMORY = 2,
    CU_NOT_INITIALIZED = 3,
    CU_NO_DEVICE = 100,
    CU_INVALID_DEVICE = 101,
    CU_INVALID_IMAGE = 200,
    CU_INVALID_CONTEXT = 201,
    CU_INVALID_HANDLE = 400,
    CU_NOT_FOUND = 500,
    CU_ILLEGAL_ADDRESS = 700,
    CU_LAUNCH_OUT_OF_RESOURCES = 701,
    CU_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CU_HOST_MEMORY_NOT_REGISTERED = 713,
    CU_LAUNCH_FAILED = 719,
    CU_NO_BINARY_FOR_GPU = 209,
    CU_NOT_SUPPORTED = 801,
};

static const char gcmx_stub_message[] =
    "no CUDA driver: this is gcmx's stub libcuda.so.1 (.toolchain/cuda-stub); install an NVIDIA driver";

static const struct {
    int code;
    const char* name;
    const char* text;
} gcmx_stub_errors[] = {
    {CU_OK, "CUDA_SUCCESS", "no error"},
    {CU_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CU_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CU_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CU_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", gcmx_stub_message},
    {CU_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CU_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CU_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CU_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {CU_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CU_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CU_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CU_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {CU_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CU_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CU_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CU_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

static int emu_cuGetErrorString(int error, const char** p_str) {
    size_t i;
    if (p_str == NULL) return CU_INVALID_VALUE;
    for (i = 0; i < sizeof gcmx_stub_errors / sizeof gcmx_stub_errors[0]; i++) {
        if (gcmx_stub_errors[i].code == error) {
            *p_str = gcmx_stub_errors[i].text;
            return CU_OK;
        }
    }
    *p_str = "unknown error (gcmx stub libcuda)";
    return CU_OK;
}

static int emu_cuGetErrorName(int error, const char** p_str) {
    size_t i;
    if (p_str == NULL) return CU_INVALID_VALUE;
    for (i = 0; i < sizeof gcmx_stub_errors / sizeof gcmx_stub_errors[0]; i++) {
        if (gcmx_stub_errors[i].code == error) {
            *p_str = gcmx_stub_errors[i].name;
            return CU_OK;
        }
    }
    *p_str = "CUDA_ERROR_UNKNOWN";
    return CU_OK;
}

/* ================================================================================================================ */
/* Emulation state                                                                                                  */
/* ================================================================================================================ */

typedef unsigned long long CUdeviceptr;
typedef int CUdevice;

/** What gcmx_stub_emulate() takes (mirrored by gcmx-cuda-testkit's fault.rs). */
struct gcmx_stub_config {
    uint64_t size;         /* sizeof(struct gcmx_stub_config), checked */
    uint64_t total_memory; /* bytes of emulated device memory */
    uint32_t have_clmad;   /* what gcmx_abi_info reports as word 1 */
    uint32_t reserved;
};

/** What gcmx_stub_stats() fills (mirrored by gcmx-cuda-testkit's fault.rs). Live counts, then totals. */
struct gcmx_stub_stats {
    uint64_t size; /* sizeof(struct gcmx_stub_stats), checked */
    uint64_t device_allocs, device_bytes;
    uint64_t host_allocs, host_bytes;
    uint64_t registrations;
    uint64_t streams, events, modules, context_refs;
    uint64_t launches;
    uint64_t unwiped_frees;      /* device memory freed while not all zero */
    uint64_t unwiped_host_frees; /* page-locked host memory freed while not all zero */
    uint64_t unpinned_copies;    /* async copies with host memory neither page-locked nor registered */
    uint64_t invalid_calls;      /* calls the real driver would refuse (see last_invalid) */
    uint64_t nonzero_device;     /* live device allocations not all zero (scanned when the stats are read) */
    uint64_t nonzero_host;       /* live page-locked allocations not all zero (likewise) */
    char last_invalid[160];      /* the latest invalid call, NUL-terminated */
};

struct range {
    uintptr_t start;
    size_t len;
};

struct ranges {
    struct range* v;
    size_t n, cap;
};

struct emu_ctx {
    int magic;
};
struct emu_module {
    int magic;
};
struct emu_stream {
    int magic;
};
struct emu_event {
    int magic;
};

#define EMU_MAGIC_MODULE 0x6d6f64
#define EMU_MAGIC_STREAM 0x737472
#define EMU_MAGIC_EVENT 0x657674

enum emu_kernel_kind {
    K_ABI_INFO,
    K_FUSED_ENC,
    K_FUSED_DEC,
    K_EXPAND,
    K_KEY_POWERS,
    K_DBATCH,
    K_OTHER,
};

struct emu_kernel {
    const char* name;
    enum emu_kernel_kind kind;
};

static const struct emu_kernel emu_kernels[] = {
    {"gcmx_abi_info", K_ABI_INFO},
    {"gcmx_gcm_encrypt", K_FUSED_ENC},
    {"gcmx_gcm_decrypt", K_FUSED_DEC},
    {"gcmx_aes_expand_keys", K_EXPAND},
    {"gcmx_key_powers", K_KEY_POWERS},
    {"gcmx_dbatch_seal1", K_DBATCH},
    {"gcmx_dbatch_open1", K_DBATCH},
    {"gcmx_dbatch_sealn", K_DBATCH},
    {"gcmx_dbatch_openn", K_DBATCH},
    {"gcmx_ghash_clmad", K_OTHER},
    {"gcmx_ghash_soft", K_OTHER},
    {"gcmx_bw_read", K_OTHER},
    {"gcmx_bw_copy", K_OTHER},
    {"gcmx_aes_ctr", K_OTHER},
    {"gcmx_fill_powers", K_OTHER},
};

static pthread_mutex_t emu_mu = PTHREAD_MUTEX_INITIALIZER;
static int emu_on;
static struct gcmx_stub_config emu_cfg;
static struct emu_ctx emu_primary = {0x637478};
static uint64_t emu_ctx_refs;
static __thread struct emu_ctx* emu_current;
static struct ranges emu_dev, emu_host, emu_regs;
static struct gcmx_stub_stats emu_stats;

static void emu_invalid(const char* what) {
    emu_stats.invalid_calls++;
    snprintf(emu_stats.last_invalid, sizeof emu_stats.last_invalid, "%s", what);
}

static int ranges_add(struct ranges* r, uintptr_t start, size_t len) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        struct range* v = realloc(r->v, cap * sizeof *v);
        if (v == NULL) return 0;
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n].start = start;
    r->v[r->n].len = len;
    r->n++;
    return 1;
}

/* Index of the range that starts at `start`, or -1. */
static long ranges_find_start(const struct ranges* r, uintptr_t start) {
    size_t i;
    for (i = 0; i < r->n; i++) {
        if (r->v[i].start == start) return (long)i;
    }
    return -1;
}

static void ranges_remove(struct ranges* r, size_t i) {
    r->v[i] = r->v[r->n - 1];
    r->n--;
}

/* Whether [p, p + n) lies inside one range. */
static int ranges_cover(const struct ranges* r, uintptr_t p, size_t n) {
    size_t i;
    for (i = 0; i < r->n; i++) {
        uintptr_t s = r->v[i].start;
        if (p >= s && p - s <= r->v[i].len && n <= r->v[i].len - (p - s)) return 1;
    }
    return 0;
}

/* Whether [p, p + n) overlaps any range. */
static int ranges_overlap(const struct ranges* r, uintptr_t p, size_t n) {
    size_t i;
    for (i = 0; i < r->n; i++) {
        uintptr_t s = r->v[i].start;
        if (p < s + r->v[i].len && s < p + n) return 1;
    }
    return 0;
}

static int all_zero(const void* p, size_t n) {
    const unsigned char* b = p;
    size_t i = 0;
    while (i < n) {
        /* OR a page at a time (vectorised), stop at the first page with a set bit. */
        size_t k, m = n - i < 4096 ? n - i : 4096;
        unsigned char acc = 0;
        for (k = 0; k < m; k++) acc |= b[i + k];
        if (acc != 0) return 0;
        i += m;
    }
    return 1;
}

/* Device range check for copies, memsets and kernel parameters. */
static int dev_ok(CUdeviceptr p, size_t n, const char* what) {
    char msg[160];
    if (n == 0 || ranges_cover(&emu_dev, (uintptr_t)p, n)) return 1;
    snprintf(msg, sizeof msg, "%s: %zu bytes at device address 0x%llx outside every allocation", what, n, p);
    emu_invalid(msg);
    return 0;
}

/* Host range check for asynchronous copies: page-locked or registered. */
static void host_pinned_check(const void* p, size_t n, const char* what) {
    if (n == 0 || ranges_cover(&emu_host, (uintptr_t)p, n) || ranges_cover(&emu_regs, (uintptr_t)p, n)) return;
    emu_stats.unpinned_copies++;
    {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: %zu host bytes at %p not page-locked", what, n, p);
        snprintf(emu_stats.last_invalid, sizeof emu_stats.last_invalid, "%s", msg);
    }
}

/* The calling thread has the primary context current (the driver's rule for almost every call). */
static int ctx_ok(const char* what) {
    if (emu_current == &emu_primary && emu_ctx_refs > 0) return 1;
    {
        char msg[160];
        snprintf(msg, sizeof msg, "%s without a current context", what);
        emu_invalid(msg);
    }
    return 0;
}

#define EMU_ENTER()                                   \
    do {                                              \
        if (!emu_on) return CU_NO_DEVICE;             \
        pthread_mutex_lock(&emu_mu);                  \
    } while (0)
#define EMU_RETURN(code)                              \
    do {                                              \
        int emu_rc_ = (code);                         \
        pthread_mutex_unlock(&emu_mu);                \
        return emu_rc_;                               \
    } while (0)
#define EMU_NEED_CTX(what)                            \
    do {                                              \
        if (!ctx_ok(what)) EMU_RETURN(CU_INVALID_CONTEXT); \
    } while (0)

static int pass_through(void);

/* Switch emulation on (not while forwarding to a real driver: CUDA_ERROR_NOT_SUPPORTED). */
GCMX_STUB_EXPORT int gcmx_stub_emulate(const struct gcmx_stub_config* cfg) {
    if (cfg == NULL || cfg->size != sizeof *cfg || cfg->total_memory == 0) return CU_INVALID_VALUE;
    if (pass_through()) return CU_NOT_SUPPORTED;
    pthread_mutex_lock(&emu_mu);
    emu_cfg = *cfg;
    emu_on = 1;
    pthread_mutex_unlock(&emu_mu);
    return CU_OK;
}

/* The emulator's counters (not while forwarding to a real driver: CUDA_ERROR_NOT_SUPPORTED). */
GCMX_STUB_EXPORT int gcmx_stub_stats(struct gcmx_stub_stats* out) {
    if (out == NULL || out->size != sizeof *out) return CU_INVALID_VALUE;
    if (pass_through()) return CU_NOT_SUPPORTED;
    pthread_mutex_lock(&emu_mu);
    *out = emu_stats;
    out->size = sizeof *out;
    out->device_allocs = emu_dev.n;
    out->host_allocs = emu_host.n;
    out->registrations = emu_regs.n;
    out->context_refs = emu_ctx_refs;
    out->nonzero_device = 0;
    out->nonzero_host = 0;
    {
        size_t i;
        for (i = 0; i < emu_dev.n; i++) {
            out->nonzero_device += !all_zero((const void*)emu_dev.v[i].start, emu_dev.v[i].len);
        }
        for (i = 0; i < emu_host.n; i++) {
            out->nonzero_host += !all_zero((const void*)emu_host.v[i].start, emu_host.v[i].len);
        }
    }
    pthread_mutex_unlock(&emu_mu);
    return CU_OK;
}

/* ================================================================================================================ */
/* Init, devices, context                                                                                           */
/* ================================================================================================================ */

static int emu_cuInit(unsigned flags) {
    (void)flags;
    EMU_ENTER();
    EMU_RETURN(CU_OK);
}

static int emu_cuDriverGetVersion(int* v) {
    EMU_ENTER();
    if (v == NULL) EMU_RETURN(CU_INVALID_VALUE);
    *v = 13000;
    EMU_RETURN(CU_OK);
}

static int emu_cuDeviceGetCount(int* n) {
    EMU_ENTER();
    if (n == NULL) EMU_RETURN(CU_INVALID_VALUE);
    *n = 1;
    EMU_RETURN(CU_OK);
}

static int emu_cuDeviceGet(CUdevice* d, int ordinal) {
    EMU_ENTER();
    if (d == NULL) EMU_RETURN(CU_INVALID_VALUE);
    if (ordinal != 0) EMU_RETURN(CU_INVALID_DEVICE);
    *d = 0;
    EMU_RETURN(CU_OK);
}

static int emu_cuDeviceGetAttribute(int* v, int attrib, CUdevice d) {
    EMU_ENTER();
    if (v == NULL || d != 0) EMU_RETURN(CU_INVALID_VALUE);
    switch (attrib) {
        case 16: *v = 4; break; /* MULTIPROCESSOR_COUNT */
        case 75: *v = 9; break; /* COMPUTE_CAPABILITY_MAJOR */
        case 76: *v = 0; break; /* COMPUTE_CAPABILITY_MINOR */
        default: *v = 0; break;
    }
    EMU_RETURN(CU_OK);
}

static int emu_cuDeviceGetName(char* name, int len, CUdevice d) {
    EMU_ENTER();
    if (name == NULL || len <= 0 || d != 0) EMU_RETURN(CU_INVALID_VALUE);
    snprintf(name, (size_t)len, "%s", "gcmx emulated device (stub libcuda: host memory, kernels not run)");
    EMU_RETURN(CU_OK);
}

static int emu_cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
    EMU_ENTER();
    if (bytes == NULL || d != 0) EMU_RETURN(CU_INVALID_VALUE);
    *bytes = (size_t)emu_cfg.total_memory;
    EMU_RETURN(CU_OK);
}

static int emu_cuDevicePrimaryCtxRetain(struct emu_ctx** ctx, CUdevice d) {
    EMU_ENTER();
    if (ctx == NULL || d != 0) EMU_RETURN(CU_INVALID_VALUE);
    emu_ctx_refs++;
    *ctx = &emu_primary;
    EMU_RETURN(CU_OK);
}

static int emu_cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    EMU_ENTER();
    if (d != 0 || emu_ctx_refs == 0) {
        emu_invalid("cuDevicePrimaryCtxRelease without a retained context");
        EMU_RETURN(CU_INVALID_CONTEXT);
    }
    emu_ctx_refs--;
    EMU_RETURN(CU_OK);
}

static int emu_cuCtxSetCurrent(struct emu_ctx* ctx) {
    EMU_ENTER();
    if (ctx != NULL && ctx != &emu_primary) {
        emu_invalid("cuCtxSetCurrent: unknown context");
        EMU_RETURN(CU_INVALID_CONTEXT);
    }
    emu_current = ctx;
    EMU_RETURN(CU_OK);
}

static int emu_cuCtxGetCurrent(struct emu_ctx** ctx) {
    EMU_ENTER();
    if (ctx == NULL) EMU_RETURN(CU_INVALID_VALUE);
    *ctx = emu_current;
    EMU_RETURN(CU_OK);
}

static int emu_cuCtxGetDevice(CUdevice* d) {
    EMU_ENTER();
    EMU_NEED_CTX("cuCtxGetDevice");
    if (d == NULL) EMU_RETURN(CU_INVALID_VALUE);
    *d = 0;
    EMU_RETURN(CU_OK);
}

static int emu_cuCtxSynchronize(void) {
    EMU_ENTER();
    EMU_NEED_CTX("cuCtxSynchronize");
    EMU_RETURN(CU_OK);
}

/* ================================================================================================================ */
/* Modules and kernels                                                                                              */
/* ================================================================================================================ */

/* A fatbin image starts with the little-endian magic 0xBA55ED50. */
static int emu_load(struct emu_module** m, const void* image) {
    uint32_t magic;
    EMU_ENTER();
    EMU_NEED_CTX("cuModuleLoadData");
    if (m == NULL || image == NULL) EMU_RETURN(CU_INVALID_VALUE);
    memcpy(&magic, image, sizeof magic);
    if (magic != 0xBA55ED50u) EMU_RETURN(CU_INVALID_IMAGE);
    *m = malloc(sizeof **m);
    if (*m == NULL) EMU_RETURN(CU_OUT_OF_MEMORY);
    (*m)->magic = EMU_MAGIC_MODULE;
    emu_stats.modules++;
    EMU_RETURN(CU_OK);
}

static int emu_cuModuleLoadData(struct emu_module** m, const void* image) { return emu_load(m, image); }

static int emu_cuModuleLoadFatBinary(struct emu_module** m, const void* image) { return emu_load(m, image); }

static int emu_cuModuleLoadDataEx(struct emu_module** m, const void* image, unsigned n, void* options,
                                        void** values) {
    (void)n;
    (void)options;
    (void)values;
    return emu_load(m, image);
}

static int emu_cuModuleUnload(struct emu_module* m) {
    EMU_ENTER();
    if (m == NULL || m->magic != EMU_MAGIC_MODULE) {
        emu_invalid("cuModuleUnload: unknown module");
        EMU_RETURN(CU_INVALID_HANDLE);
    }
    m->magic = 0;
    free(m);
    emu_stats.modules--;
    EMU_RETURN(CU_OK);
}

static int emu_cuModuleGetFunction(const struct emu_kernel** f, struct emu_module* m, const char* name) {
    size_t i;
    EMU_ENTER();
    if (f == NULL || name == NULL || m == NULL || m->magic != EMU_MAGIC_MODULE) {
        emu_invalid("cuModuleGetFunction: unknown module");
        EMU_RETURN(CU_INVALID_HANDLE);
    }
    for (i = 0; i < sizeof emu_kernels / sizeof emu_kernels[0]; i++) {
        if (strcmp(emu_kernels[i].name, name) == 0) {
            *f = &emu_kernels[i];
            EMU_RETURN(CU_OK);
        }
    }
    EMU_RETURN(CU_NOT_FOUND);
}

/* ================================================================================================================ */
/* Memory                                                                                                           */
/* ================================================================================================================ */

static int emu_cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
    EMU_ENTER();
    EMU_NEED_CTX("cuMemGetInfo");
    if (free_bytes == NULL || total == NULL) EMU_RETURN(CU_INVALID_VALUE);
    *total = (size_t)emu_cfg.total_memory;
    *free_bytes = (size_t)(emu_cfg.total_memory - emu_stats.device_bytes);
    EMU_RETURN(CU_OK);
}

static int emu_cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
    void* m = NULL;
    EMU_ENTER();
    EMU_NEED_CTX("cuMemAlloc");
    if (p == NULL || n == 0) EMU_RETURN(CU_INVALID_VALUE);
    if (n > emu_cfg.total_memory - emu_stats.device_bytes) EMU_RETURN(CU_OUT_OF_MEMORY);
    if (posix_memalign(&m, 256, n) != 0) EMU_RETURN(CU_OUT_OF_MEMORY);
    if (!ranges_add(&emu_dev, (uintptr_t)m, n)) {
        free(m);
        EMU_RETURN(CU_OUT_OF_MEMORY);
    }
    memset(m, 0, n);
    emu_stats.device_bytes += n;
    *p = (CUdeviceptr)(uintptr_t)m;
    EMU_RETURN(CU_OK);
}

static int emu_cuMemFree_v2(CUdeviceptr p) {
    long i;
    EMU_ENTER();
    EMU_NEED_CTX("cuMemFree");
    i = ranges_find_start(&emu_dev, (uintptr_t)p);
    if (i < 0) {
        emu_invalid("cuMemFree: not an allocation");
        EMU_RETURN(CU_INVALID_VALUE);
    }
    if (!all_zero((const void*)(uintptr_t)p, emu_dev.v[i].len)) emu_stats.unwiped_frees++;
    emu_stats.device_bytes -= emu_dev.v[i].len;
    ranges_remove(&emu_dev, (size_t)i);
    free((void*)(uintptr_t)p);
    EMU_RETURN(CU_OK);
}

static int emu_cuMemAllocHost_v2(void** p, size_t n) {
    void* m = NULL;
    EMU_ENTER();
    EMU_NEED_CTX("cuMemAllocHost");
    if (p == NULL || n == 0) EMU_RETURN(CU_INVALID_VALUE);
    if (posix_memalign(&m, 4096, n) != 0) EMU_RETURN(CU_OUT_OF_MEMORY);
    if (!ranges_add(&emu_host, (uintptr_t)m, n)) {
        free(m);
        EMU_RETURN(CU_OUT_OF_MEMORY);
    }
    emu_stats.host_bytes += n;
    *p = m;
    EMU_RETURN(CU_OK);
}

static int emu_cuMemFreeHost(void* p) {
    long i;
    EMU_ENTER();
    EMU_NEED_CTX("cuMemFreeHost");
    i = ranges_find_start(&emu_host, (uintptr_t)p);
    if (i < 0) {
        emu_invalid("cuMemFreeHost: not a page-locked allocation");
        EMU_RETURN(CU_INVALID_VALUE);
    }
    if (!all_zero(p, emu_host.v[i].len)) emu_stats.unwiped_host_frees++;
    emu_stats.host_bytes -= emu_host.v[i].len;
    ranges_remove(&emu_host, (size_t)i);
    free(p);
    EMU_RETURN(CU_OK);
}

static int emu_cuMemHostRegister_v2(void* p, size_t n, unsigned flags) {
    (void)flags;
    EMU_ENTER();
    EMU_NEED_CTX("cuMemHostRegister");
    if (p == NULL || n == 0) EMU_RETURN(CU_INVALID_VALUE);
    if (ranges_overlap(&emu_regs, (uintptr_t)p, n) || ranges_overlap(&emu_host, (uintptr_t)p, n)) {
        EMU_RETURN(CU_HOST_MEMORY_ALREADY_REGISTERED);
    }
    if (!ranges_add(&emu_regs, (uintptr_t)p, n)) EMU_RETURN(CU_OUT_OF_MEMORY);
    EMU_RETURN(CU_OK);
}

static int emu_cuMemHostUnregister(void* p) {
    long i;
    EMU_ENTER();
    EMU_NEED_CTX("cuMemHostUnregister");
    i = ranges_find_start(&emu_regs, (uintptr_t)p);
    if (i < 0) {
        emu_invalid("cuMemHostUnregister: not registered");
        EMU_RETURN(CU_HOST_MEMORY_NOT_REGISTERED);
    }
    ranges_remove(&emu_regs, (size_t)i);
    EMU_RETURN(CU_OK);
}

static int stream_ok(const struct emu_stream* s, const char* what) {
    if (s == NULL || s->magic == EMU_MAGIC_STREAM) return 1;
    {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: unknown stream", what);
        emu_invalid(msg);
    }
    return 0;
}

static int emu_htod(CUdeviceptr dst, const void* src, size_t n, const struct emu_stream* s, int async) {
    EMU_ENTER();
    EMU_NEED_CTX("cuMemcpyHtoD");
    if (async && !stream_ok(s, "cuMemcpyHtoDAsync")) EMU_RETURN(CU_INVALID_HANDLE);
    if (!dev_ok(dst, n, "cuMemcpyHtoD") || (n > 0 && src == NULL)) EMU_RETURN(CU_INVALID_VALUE);
    if (async) host_pinned_check(src, n, "cuMemcpyHtoDAsync");
    if (n > 0) memcpy((void*)(uintptr_t)dst, src, n);
    EMU_RETURN(CU_OK);
}

static int emu_dtoh(void* dst, CUdeviceptr src, size_t n, const struct emu_stream* s, int async) {
    EMU_ENTER();
    EMU_NEED_CTX("cuMemcpyDtoH");
    if (async && !stream_ok(s, "cuMemcpyDtoHAsync")) EMU_RETURN(CU_INVALID_HANDLE);
    if (!dev_ok(src, n, "cuMemcpyDtoH") || (n > 0 && dst == NULL)) EMU_RETURN(CU_INVALID_VALUE);
    if (async) host_pinned_check(dst, n, "cuMemcpyDtoHAsync");
    if (n > 0) memcpy(dst, (const void*)(uintptr_t)src, n);
    EMU_RETURN(CU_OK);
}

static int emu_memset(CUdeviceptr dst, unsigned char v, size_t n, const struct emu_stream* s, int async) {
    EMU_ENTER();
    EMU_NEED_CTX("cuMemsetD8");
    if (async && !stream_ok(s, "cuMemsetD8Async")) EMU_RETURN(CU_INVALID_HANDLE);
    if (!dev_ok(dst, n, "cuMemsetD8")) EMU_RETURN(CU_INVALID_VALUE);
    if (n > 0) memset((void*)(uintptr_t)dst, v, n);
    EMU_RETURN(CU_OK);
}

static int emu_cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
    return emu_htod(dst, src, n, NULL, 0);
}

static int emu_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, struct emu_stream* s) {
    return emu_htod(dst, src, n, s, 1);
}

static int emu_cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) { return emu_dtoh(dst, src, n, NULL, 0); }

static int emu_cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, struct emu_stream* s) {
    return emu_dtoh(dst, src, n, s, 1);
}

static int emu_cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
    return emu_memset(dst, v, n, NULL, 0);
}

static int emu_cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, struct emu_stream* s) {
    return emu_memset(dst, v, n, s, 1);
}

/* ================================================================================================================ */
/* Streams and events: work runs when it is queued, so both are always complete.                                    */
/* ================================================================================================================ */

static int emu_stream_create(struct emu_stream** s) {
    EMU_ENTER();
    EMU_NEED_CTX("cuStreamCreate");
    if (s == NULL) EMU_RETURN(CU_INVALID_VALUE);
    *s = malloc(sizeof **s);
    if (*s == NULL) EMU_RETURN(CU_OUT_OF_MEMORY);
    (*s)->magic = EMU_MAGIC_STREAM;
    emu_stats.streams++;
    EMU_RETURN(CU_OK);
}

static int emu_cuStreamCreate(struct emu_stream** s, unsigned flags) {
    (void)flags;
    return emu_stream_create(s);
}

static int emu_cuStreamCreateWithPriority(struct emu_stream** s, unsigned flags, int priority) {
    (void)flags;
    (void)priority;
    return emu_stream_create(s);
}

static int emu_cuStreamDestroy_v2(struct emu_stream* s) {
    EMU_ENTER();
    EMU_NEED_CTX("cuStreamDestroy");
    if (s == NULL || !stream_ok(s, "cuStreamDestroy")) EMU_RETURN(CU_INVALID_HANDLE);
    s->magic = 0;
    free(s);
    emu_stats.streams--;
    EMU_RETURN(CU_OK);
}

static int emu_cuStreamSynchronize(struct emu_stream* s) {
    EMU_ENTER();
    EMU_NEED_CTX("cuStreamSynchronize");
    if (!stream_ok(s, "cuStreamSynchronize")) EMU_RETURN(CU_INVALID_HANDLE);
    EMU_RETURN(CU_OK);
}

static int emu_cuStreamQuery(struct emu_stream* s) {
    EMU_ENTER();
    EMU_NEED_CTX("cuStreamQuery");
    if (!stream_ok(s, "cuStreamQuery")) EMU_RETURN(CU_INVALID_HANDLE);
    EMU_RETURN(CU_OK);
}

static int event_ok(const struct emu_event* e, const char* what) {
    if (e != NULL && e->magic == EMU_MAGIC_EVENT) return 1;
    {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: unknown event", what);
        emu_invalid(msg);
    }
    return 0;
}

static int emu_cuEventCreate(struct emu_event** e, unsigned flags) {
    (void)flags;
    EMU_ENTER();
    EMU_NEED_CTX("cuEventCreate");
    if (e == NULL) EMU_RETURN(CU_INVALID_VALUE);
    *e = malloc(sizeof **e);
    if (*e == NULL) EMU_RETURN(CU_OUT_OF_MEMORY);
    (*e)->magic = EMU_MAGIC_EVENT;
    emu_stats.events++;
    EMU_RETURN(CU_OK);
}

static int emu_cuEventDestroy_v2(struct emu_event* e) {
    EMU_ENTER();
    EMU_NEED_CTX("cuEventDestroy");
    if (!event_ok(e, "cuEventDestroy")) EMU_RETURN(CU_INVALID_HANDLE);
    e->magic = 0;
    free(e);
    emu_stats.events--;
    EMU_RETURN(CU_OK);
}

static int emu_cuEventRecord(struct emu_event* e, struct emu_stream* s) {
    EMU_ENTER();
    EMU_NEED_CTX("cuEventRecord");
    if (!event_ok(e, "cuEventRecord") || !stream_ok(s, "cuEventRecord")) EMU_RETURN(CU_INVALID_HANDLE);
    EMU_RETURN(CU_OK);
}

static int emu_cuEventSynchronize(struct emu_event* e) {
    EMU_ENTER();
    EMU_NEED_CTX("cuEventSynchronize");
    if (!event_ok(e, "cuEventSynchronize")) EMU_RETURN(CU_INVALID_HANDLE);
    EMU_RETURN(CU_OK);
}

static int emu_cuEventQuery(struct emu_event* e) {
    EMU_ENTER();
    EMU_NEED_CTX("cuEventQuery");
    if (!event_ok(e, "cuEventQuery")) EMU_RETURN(CU_INVALID_HANDLE);
    EMU_RETURN(CU_OK);
}

static int emu_cuEventElapsedTime(float* ms, struct emu_event* start, struct emu_event* end) {
    EMU_ENTER();
    EMU_NEED_CTX("cuEventElapsedTime");
    if (ms == NULL) EMU_RETURN(CU_INVALID_VALUE);
    if (!event_ok(start, "cuEventElapsedTime") || !event_ok(end, "cuEventElapsedTime")) {
        EMU_RETURN(CU_INVALID_HANDLE);
    }
    *ms = 0.001f;
    EMU_RETURN(CU_OK);
}

/* ================================================================================================================ */
/* Kernels: parameter checks and stand-in outputs                                                                   */
/* ================================================================================================================ */

/* Stand-in keystream byte at byte `i` of a run whose first block has counter `ctr` (J0 byte 0 `j0b0`). */
static unsigned char emu_ks(unsigned char j0b0, uint32_t ctr_first, uint64_t i) {
    return (unsigned char)(0x5cu ^ j0b0 ^ (unsigned char)(ctr_first + (uint32_t)(i / 16u)));
}

/* A hash of `n` bytes from `h`: FNV-1a over 8-byte words, then the tail bytes (not cryptographic: it only
 * makes the stand-in tags depend on every byte). */
static uint64_t emu_hash(uint64_t h, const unsigned char* p, uint64_t n) {
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, sizeof w);
        h ^= w;
        h *= 0x100000001b3ull;
    }
    for (; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* out = in XOR the stand-in keystream (emu_ks) for `n` bytes whose first block has counter `ctr_first`. */
static void emu_xor(unsigned char* out, const unsigned char* in, uint64_t n, unsigned char j0b0, uint32_t ctr_first) {
    uint64_t b, k;
    for (b = 0; b < n; b += 16) {
        unsigned char ks = emu_ks(j0b0, ctr_first, b);
        uint64_t m = n - b < 16 ? n - b : 16;
        for (k = 0; k < m; k++) out[b + k] = in[b + k] ^ ks;
    }
}

static uint64_t emu_mix(uint64_t h, uint64_t v) { return emu_hash(h, (const unsigned char*)&v, sizeof v); }

#define EMU_FNV0 0xcbf29ce484222325ull

static int emu_abi_info(void** params) {
    CUdeviceptr out;
    uint32_t w[GCMX_ABI_INFO_WORDS];
    memcpy(&out, params[0], sizeof out);
    if (!dev_ok(out, sizeof w, "gcmx_abi_info out")) return CU_ILLEGAL_ADDRESS;
    w[0] = GCMX_ABI_VERSION;
    w[1] = emu_cfg.have_clmad;
    w[2] = GCMX_GHASH_THREADS;
    w[3] = GCMX_GHASH_SPAN;
    w[4] = GCMX_FUSED_THREADS;
    w[5] = GCMX_FUSED_SPAN;
    w[6] = GCMX_DB_UNIT_BLOCKS;
    w[7] = (uint32_t)sizeof(GcmxGcmParams);
    memcpy((void*)(uintptr_t)out, w, sizeof w);
    return CU_OK;
}

/* Partials of the fused kernels: per thread block j, a hash of the ciphertext blocks of its run (the message is
 * front-padded to grid * SPAN blocks, as in the real kernel), so that the host-side tag depends on the ciphertext. */
static void emu_fused_partials(const unsigned char* ct, uint64_t nbytes, unsigned grid, CUdeviceptr partials) {
    uint64_t nblocks = (nbytes + 15u) / 16u, pad = (uint64_t)grid * GCMX_FUSED_SPAN - nblocks, j;
    for (j = 0; j < grid; j++) {
        uint64_t first = j * GCMX_FUSED_SPAN, last = first + GCMX_FUSED_SPAN, from, to, part[2];
        from = first < pad ? 0 : (first - pad) * 16u;
        to = last < pad ? 0 : (last - pad) * 16u;
        if (to > nbytes) to = nbytes;
        part[0] = emu_hash(EMU_FNV0, ct + from, to > from ? to - from : 0);
        part[1] = emu_mix(EMU_FNV0, j + 1u);
        memcpy((unsigned char*)(uintptr_t)partials + 16u * j, part, sizeof part);
    }
}

static int emu_fused(void** params, unsigned grid, unsigned block, int decrypt) {
    GcmxGcmParams p;
    GcmxGcmCtr ctr;
    uint64_t nblocks;
    unsigned char* out;
    const unsigned char* in;
    memcpy(&p, params[0], sizeof p);
    nblocks = (p.nbytes + 15u) / 16u;
    if (block != GCMX_FUSED_THREADS || grid == 0 || (uint64_t)grid * GCMX_FUSED_SPAN < nblocks ||
        (p.nr != 10 && p.nr != 12 && p.nr != 14) || p.in % 16 || p.out % 16 || p.ctr % 16 || p.powers % 16 ||
        p.partials % 16 || p.key % 4) {
        emu_invalid("gcmx_gcm_*: launch shape, rounds or alignment");
        return CU_INVALID_VALUE;
    }
    if (!dev_ok(p.in, p.nbytes, "gcmx_gcm_* in") || !dev_ok(p.out, p.nbytes, "gcmx_gcm_* out") ||
        !dev_ok(p.powers, 16u * GCMX_FUSED_POW_COUNT, "gcmx_gcm_* powers") ||
        !dev_ok(p.partials, 16u * (uint64_t)grid, "gcmx_gcm_* partials") ||
        !dev_ok(p.key, sizeof(GcmxAesKey), "gcmx_gcm_* key") || !dev_ok(p.ctr, sizeof ctr, "gcmx_gcm_* ctr")) {
        return CU_ILLEGAL_ADDRESS;
    }
    memcpy(&ctr, (const void*)(uintptr_t)p.ctr, sizeof ctr);
    in = (const unsigned char*)(uintptr_t)p.in;
    out = (unsigned char*)(uintptr_t)p.out;
    if (decrypt) emu_fused_partials(in, p.nbytes, grid, p.partials);
    emu_xor(out, in, p.nbytes, (unsigned char)(ctr.j0_prefix[0] & 0xffu), ctr.ctr_first);
    if (!decrypt) emu_fused_partials(out, p.nbytes, grid, p.partials);
    return CU_OK;
}

static int emu_expand(void** params) {
    GcmxExpandParams p;
    uint32_t k;
    memcpy(&p, params[0], sizeof p);
    if (!dev_ok(p.raw, (uint64_t)p.nkeys * sizeof(GcmxRawKey), "gcmx_aes_expand_keys raw") ||
        !dev_ok(p.out, (uint64_t)p.nkeys * sizeof(GcmxAesKey), "gcmx_aes_expand_keys out")) {
        return CU_ILLEGAL_ADDRESS;
    }
    for (k = 0; k < p.nkeys; k++) {
        GcmxRawKey raw;
        GcmxAesKey key;
        memcpy(&raw, (const unsigned char*)(uintptr_t)p.raw + k * sizeof raw, sizeof raw);
        memset(&key, 0xE5, sizeof key);
        key.nr = raw.len == 16 ? 10 : raw.len == 24 ? 12 : raw.len == 32 ? 14 : 0;
        memcpy((unsigned char*)(uintptr_t)p.out + k * sizeof key, &key, sizeof key);
    }
    return CU_OK;
}

static uint32_t bswap32(uint32_t x) {
    return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

static int emu_key_powers(void** params) {
    GcmxKeyPowersParams p;
    memcpy(&p, params[0], sizeof p);
    if (!dev_ok(p.keys, (uint64_t)p.nkeys * sizeof(GcmxAesKey), "gcmx_key_powers keys") ||
        !dev_ok(p.key_powers, (uint64_t)p.nkeys * sizeof(GcmxKeyPowers), "gcmx_key_powers out")) {
        return CU_ILLEGAL_ADDRESS;
    }
    memset((void*)(uintptr_t)p.key_powers, 0xB7, (size_t)p.nkeys * sizeof(GcmxKeyPowers));
    return CU_OK;
}

/* A range a device-batch kernel may touch: device memory, or page-locked host memory (mapped for the device). */
static int kern_ok(uint64_t p, uint64_t n, const char* what) {
    if (n == 0 || ranges_cover(&emu_host, (uintptr_t)p, n)) return 1;
    return dev_ok(p, n, what);
}

/* Whether [off, off + len) lies inside `size` bytes. */
static int emu_in(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }

/* The real kernel's descriptor checks (dbatch.cuh, gcmx_db_valid). */
static int emu_db_valid(const GcmxDbParams* p, const GcmxDevMsg* d) {
    if (d->data_len > GCMX_P_MAX || d->aad_len > GCMX_A_MAX) return 0;
    if (d->key >= p->nkeys || d->nonce_len == 0) return 0;
    if ((p->flags & GCMX_DB_J0_GIVEN) && d->nonce_len != 16) return 0;
    if (!emu_in(d->nonce_off, d->nonce_len, p->nonces_len)) return 0;
    if (d->data_len && (d->data_off % 16 || !emu_in(d->data_off, d->data_len, p->data_len))) return 0;
    if (d->aad_len && (d->aad_off % 16 || !emu_in(d->aad_off, d->aad_len, p->aad_len))) return 0;
    return 1;
}

static int emu_dbatch(void** params, unsigned grid, unsigned block) {
    GcmxDbParams p;
    uint32_t i;
    memcpy(&p, params[0], sizeof p);
    if (block != GCMX_DB_THREADS || grid == 0 || p.nmsgs >= (1u << 31) || p.nkeys == 0 ||
        (p.mode != GCMX_DB_SEAL && p.mode != GCMX_DB_OPEN && p.mode != GCMX_DB_EXPECT) || p.msgs % 8 ||
        p.data % 16 || p.aad % 16 || p.tags % 16 || p.scratch % 256) {
        emu_invalid("gcmx_dbatch_*: launch shape, mode or alignment");
        return CU_INVALID_VALUE;
    }
    if (!kern_ok(p.msgs, (uint64_t)p.nmsgs * sizeof(GcmxDevMsg), "gcmx_dbatch_* msgs") ||
        !kern_ok(p.data, p.data_len, "gcmx_dbatch_* data") || !kern_ok(p.aad, p.aad_len, "gcmx_dbatch_* aad") ||
        !kern_ok(p.nonces, p.nonces_len, "gcmx_dbatch_* nonces") ||
        !kern_ok(p.tags, 16u * (uint64_t)p.nmsgs, "gcmx_dbatch_* tags") ||
        !kern_ok(p.verdicts, p.nmsgs, "gcmx_dbatch_* verdicts") ||
        !dev_ok(p.keys, (uint64_t)p.nkeys * sizeof(GcmxAesKey), "gcmx_dbatch_* keys") ||
        !dev_ok(p.key_powers, (uint64_t)p.nkeys * sizeof(GcmxKeyPowers), "gcmx_dbatch_* key_powers") ||
        !dev_ok(p.scratch, gcmx_db_scratch_bytes(p.nmsgs, grid), "gcmx_dbatch_* scratch")) {
        return CU_ILLEGAL_ADDRESS;
    }
    for (i = 0; i < p.nmsgs; i++) {
        GcmxDevMsg d;
        unsigned char* tagp = (unsigned char*)(uintptr_t)(p.tags + 16u * (uint64_t)i);
        unsigned char* ver = (unsigned char*)(uintptr_t)(p.verdicts + i);
        unsigned char j0[16];
        const unsigned char* nonce;
        unsigned char* data;
        uint64_t h = EMU_FNV0, tag[2], ct_hash;
        uint32_t ctr_first;
        memcpy(&d, (const unsigned char*)(uintptr_t)p.msgs + i * sizeof d, sizeof d);
        if (!emu_db_valid(&p, &d)) {
            if (p.mode != GCMX_DB_OPEN) memset(tagp, 0, 16);
            *ver = GCMX_VERDICT_INVALID;
            continue;
        }
        nonce = (const unsigned char*)(uintptr_t)(p.nonces + d.nonce_off);
        memset(j0, 0, sizeof j0);
        if (p.flags & GCMX_DB_J0_GIVEN) {
            memcpy(j0, nonce, 16);
        } else if (d.nonce_len == 12) {
            memcpy(j0, nonce, 12);
            j0[15] = 1;
        } else {
            uint64_t a = emu_hash(EMU_FNV0, nonce, d.nonce_len), b = emu_mix(a, d.nonce_len);
            memcpy(j0, &a, 8);
            memcpy(j0 + 8, &b, 8);
        }
        data = (unsigned char*)(uintptr_t)(p.data + d.data_off);
        ctr_first = bswap32((uint32_t)j0[12] | (uint32_t)j0[13] << 8 | (uint32_t)j0[14] << 16 | (uint32_t)j0[15] << 24) + 1u;
        if (p.mode != GCMX_DB_SEAL) ct_hash = emu_hash(EMU_FNV0, data, d.data_len);
        if (d.data_len) emu_xor(data, data, d.data_len, j0[0], ctr_first);
        if (p.mode == GCMX_DB_SEAL) ct_hash = emu_hash(EMU_FNV0, data, d.data_len);
        h = emu_mix(h, ct_hash);
        h = emu_hash(h, j0, sizeof j0);
        h = emu_mix(h, d.key);
        h = emu_mix(h, d.data_len);
        h = emu_mix(h, d.aad_len);
        h = emu_hash(h, (const unsigned char*)(uintptr_t)(p.aad + d.aad_off), d.aad_len);
        tag[0] = h;
        tag[1] = emu_mix(h, 0x7461670au);
        if (p.mode == GCMX_DB_OPEN) {
            uint32_t tl = p.tag_len == 0 || p.tag_len > 16 ? 16 : p.tag_len;
            if (memcmp(tagp, tag, tl) != 0) {
                /* gcmx's forgery policy, as the real kernel's P5: the keystream again, the ciphertext back. */
                if (d.data_len) emu_xor(data, data, d.data_len, j0[0], ctr_first);
                *ver = GCMX_VERDICT_REFUSED;
                continue;
            }
        } else {
            memcpy(tagp, tag, 16);
        }
        *ver = GCMX_VERDICT_OK;
    }
    return CU_OK;
}

/* The launch itself (both entry points): known kernel, stream, arguments, then the stand-in. */
static int emu_launch(const struct emu_kernel* f, unsigned gx, unsigned bx, struct emu_stream* s, void** params,
                      void** extra, int cooperative, const char* what) {
    int rc = CU_OK;
    size_t i, known = 0;
    for (i = 0; i < sizeof emu_kernels / sizeof emu_kernels[0]; i++) {
        if (f == &emu_kernels[i]) known = 1;
    }
    if (!known) {
        emu_invalid("launch: unknown function");
        return CU_INVALID_HANDLE;
    }
    if (!stream_ok(s, what)) return CU_INVALID_HANDLE;
    if (extra != NULL || gx == 0 || bx == 0 || (params == NULL && f->kind != K_OTHER) ||
        (f->kind == K_DBATCH) != (cooperative != 0)) {
        emu_invalid("launch: arguments (device-batch kernels need a cooperative launch, others a plain one)");
        return CU_INVALID_VALUE;
    }
    emu_stats.launches++;
    switch (f->kind) {
        case K_ABI_INFO: rc = emu_abi_info(params); break;
        case K_FUSED_ENC: rc = emu_fused(params, gx, bx, 0); break;
        case K_FUSED_DEC: rc = emu_fused(params, gx, bx, 1); break;
        case K_EXPAND: rc = emu_expand(params); break;
        case K_KEY_POWERS: rc = emu_key_powers(params); break;
        case K_DBATCH: rc = emu_dbatch(params, gx, bx); break;
        case K_OTHER: break;
    }
    return rc;
}

static int emu_cuLaunchCooperativeKernel(const struct emu_kernel* f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                               struct emu_stream* s, void** params) {
    (void)gy;
    (void)gz;
    (void)by;
    (void)bz;
    (void)shmem;
    EMU_ENTER();
    EMU_NEED_CTX("cuLaunchCooperativeKernel");
    /* The resident limit (cuOccupancyMaxActiveBlocksPerMultiprocessor x 4 SMs). */
    if (gx > 2u * 4u) {
        emu_invalid("cuLaunchCooperativeKernel: more blocks than are resident at once");
        EMU_RETURN(CU_INVALID_VALUE);
    }
    EMU_RETURN(emu_launch(f, gx, bx, s, params, NULL, 1, "cuLaunchCooperativeKernel"));
}

static int emu_cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const struct emu_kernel* f, int block,
                                                                 size_t smem) {
    (void)block;
    (void)smem;
    EMU_ENTER();
    EMU_NEED_CTX("cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (n == NULL || f == NULL) EMU_RETURN(CU_INVALID_VALUE);
    *n = 2;
    EMU_RETURN(CU_OK);
}

static int emu_cuStreamWaitEvent(struct emu_stream* s, struct emu_event* e, unsigned flags) {
    (void)flags;
    EMU_ENTER();
    EMU_NEED_CTX("cuStreamWaitEvent");
    if (!stream_ok(s, "cuStreamWaitEvent") || !event_ok(e, "cuStreamWaitEvent")) EMU_RETURN(CU_INVALID_HANDLE);
    EMU_RETURN(CU_OK);
}

static int emu_cuMemHostAlloc(void** p, size_t n, unsigned flags) {
    (void)flags;
    return emu_cuMemAllocHost_v2(p, n);
}

/* Page-locked host memory is addressed by the device at its host address (unified addressing). */
static int emu_cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned flags) {
    EMU_ENTER();
    EMU_NEED_CTX("cuMemHostGetDevicePointer");
    if (d == NULL || flags != 0 || !ranges_cover(&emu_host, (uintptr_t)p, 1)) {
        emu_invalid("cuMemHostGetDevicePointer: not page-locked memory");
        EMU_RETURN(CU_INVALID_VALUE);
    }
    *d = (CUdeviceptr)(uintptr_t)p;
    EMU_RETURN(CU_OK);
}

static int emu_cuLaunchKernel(const struct emu_kernel* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shmem, struct emu_stream* s, void** params,
                                    void** extra) {
    (void)gy;
    (void)gz;
    (void)by;
    (void)bz;
    (void)shmem;
    EMU_ENTER();
    EMU_NEED_CTX("cuLaunchKernel");
    EMU_RETURN(emu_launch(f, gx, bx, s, params, extra, 0, "cuLaunchKernel"));
}

/* ================================================================================================================ */
/* Pass-through: the real driver                                                                                    */
/* ================================================================================================================ */

/* GCMX_STUB_DRIVER (an absolute path to the real driver's libcuda.so.1), read once at the first driver call. When it
 * is set the stub forwards every entry point of the table below to that library (opened with RTLD_LOCAL, so its
 * symbols do not shadow the stub's), and the fault table below sits between the caller and the driver. A path that
 * does not open, or that is this stub again, is reported on stderr once and every call then answers
 * CUDA_ERROR_NO_DEVICE. */
static pthread_once_t pass_once = PTHREAD_ONCE_INIT;
static int pass_on;
static void* pass_lib;

static void pass_init(void) {
    const char* path = getenv("GCMX_STUB_DRIVER");
    if (path == NULL || path[0] == '\0') return;
    pass_on = 1;
    if (path[0] != '/') {
        fprintf(stderr, "gcmx stub libcuda: GCMX_STUB_DRIVER=%s is not an absolute path; no driver\n", path);
        return;
    }
    pass_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (pass_lib == NULL) {
        const char* why = dlerror();
        fprintf(stderr, "gcmx stub libcuda: GCMX_STUB_DRIVER=%s does not open (%s); no driver\n", path,
                why != NULL ? why : "unknown error");
        return;
    }
    if (dlsym(pass_lib, "gcmx_stub_emulate") != NULL) {
        fprintf(stderr, "gcmx stub libcuda: GCMX_STUB_DRIVER=%s is this stub, not a driver; no driver\n", path);
        dlclose(pass_lib);
        pass_lib = NULL;
    }
}

/* Whether the stub forwards to a real driver (GCMX_STUB_DRIVER is set). */
static int pass_through(void) {
    pthread_once(&pass_once, pass_init);
    return pass_on;
}

/* The real driver's function `name` (cached by the caller), or NULL when there is none. */
static void* pass_symbol(void** cache, const char* name) {
    void* f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (f == NULL && pass_lib != NULL) {
        f = dlsym(pass_lib, name);
        __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* ================================================================================================================ */
/* Fault injection                                                                                                  */
/* ================================================================================================================ */

/* The kinds of driver call a fault can be injected into (the order of gcmx-cuda-testkit's `fault::Op`). Each entry
 * point that gcmx-cuda calls is counted as one kind (the table below); calls that release resources (free,
 * unregister, destroy, context release) and queries are not counted and never fail by the table (a release fault,
 * below, fails the two calls that ending a host registration takes). */
enum fault_op {
    OP_CONTEXT_CREATE, /* cuDevicePrimaryCtxRetain */
    OP_MODULE_LOAD,    /* cuModuleLoadData */
    OP_DEVICE_ALLOC,   /* cuMemAlloc_v2 */
    OP_HOST_ALLOC,     /* cuMemAllocHost_v2, cuMemHostAlloc */
    OP_HOST_REGISTER,  /* cuMemHostRegister_v2 */
    OP_COPY_TO_DEVICE, /* cuMemcpyHtoDAsync_v2 */
    OP_COPY_TO_HOST,   /* cuMemcpyDtoHAsync_v2, cuMemcpyDtoH_v2 */
    OP_MEMSET,         /* cuMemsetD8Async, cuMemsetD8_v2 */
    OP_LAUNCH,         /* cuLaunchKernel, cuLaunchCooperativeKernel, cuOccupancyMaxActiveBlocksPerMultiprocessor */
    OP_SYNCHRONIZE,    /* cuStreamSynchronize, cuEventSynchronize, cuEventQuery: counted after their wait */
    OP_STREAM_CREATE,  /* cuStreamCreate */
    OP_EVENT,          /* cuEventCreate, cuEventRecord, cuStreamWaitEvent */
    OP_COUNT,
    OP_NONE = -1       /* not counted */
};

enum fault_mode { MODE_ONCE = 0, MODE_CONTEXT_LOST = 1 };

/** What gcmx_stub_fault_last() fills: the latest injected failure since gcmx_stub_fault_arm(). */
struct gcmx_stub_fault {
    uint64_t size;   /* sizeof(struct gcmx_stub_fault), checked */
    uint32_t op;     /* enum fault_op */
    uint32_t lost;   /* 1: it failed because the context was lost */
    uint64_t call;   /* which call of its kind (1-based, counted since the arming) */
    int32_t code;    /* the CUresult it returned */
    uint32_t reserved;
};

static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static int fault_armed;
static enum fault_op fault_arm_op;
static uint64_t fault_arm_nth;
static enum fault_mode fault_arm_mode;
static int fault_lost;
static uint64_t fault_injected;
static uint64_t fault_calls[OP_COUNT];
static struct gcmx_stub_fault fault_last_hit;
static int fault_have_last;
static unsigned fault_codes_seen; /* bit i: code fault_code_names[i] was injected since the arming */

/* The error a failed call of kind `op` returns: what the driver returns for such a failure. */
static int fault_code(enum fault_op op, int lost) {
    if (lost) return CU_ILLEGAL_ADDRESS;
    switch (op) {
        case OP_MODULE_LOAD: return CU_NO_BINARY_FOR_GPU;
        case OP_COPY_TO_DEVICE:
        case OP_COPY_TO_HOST:
        case OP_MEMSET: return CU_INVALID_VALUE;
        case OP_LAUNCH: return CU_LAUNCH_OUT_OF_RESOURCES;
        case OP_SYNCHRONIZE: return CU_LAUNCH_FAILED;
        default: return CU_OUT_OF_MEMORY;
    }
}

/* The names and texts cuGetErrorName and cuGetErrorString give, while a fault is armed, for a code that was injected
 * since the arming: marked, so that a message built from them names the injected fault. */
static const struct {
    int code;
    const char* name;
    const char* text;
} fault_code_names[] = {
    {CU_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS (injected fault, context lost)",
     "injected fault: an illegal memory access was encountered (context lost)"},
    {CU_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU (injected fault)",
     "injected fault: no kernel image is available for execution on the device"},
    {CU_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE (injected fault)", "injected fault: invalid argument"},
    {CU_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (injected fault)",
     "injected fault: too many resources requested for launch"},
    {CU_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED (injected fault)", "injected fault: unspecified launch failure"},
    {CU_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY (injected fault)", "injected fault: out of memory"},
};
#define FAULT_CODE_NAMES (sizeof fault_code_names / sizeof fault_code_names[0])

/* Count a call of kind `op`; 1 with *rc set to the error when the armed fault strikes it. */
static int fault_hit(enum fault_op op, int* rc) {
    uint64_t call;
    int strike = 0, lost = 0;
    size_t i;
    if (op < 0 || op >= OP_COUNT) return 0;
    pthread_mutex_lock(&fault_mu);
    call = ++fault_calls[op];
    if (fault_lost) {
        strike = 1;
        lost = 1;
    } else if (fault_armed && fault_arm_op == op && fault_arm_nth == call) {
        strike = 1;
        lost = fault_arm_mode == MODE_CONTEXT_LOST;
        fault_lost = lost;
    }
    if (strike) {
        *rc = fault_code(op, lost);
        fault_injected++;
        fault_last_hit.size = sizeof fault_last_hit;
        fault_last_hit.op = (uint32_t)op;
        fault_last_hit.lost = (uint32_t)lost;
        fault_last_hit.call = call;
        fault_last_hit.code = *rc;
        fault_have_last = 1;
        for (i = 0; i < FAULT_CODE_NAMES; i++) {
            if (fault_code_names[i].code == *rc) fault_codes_seen |= 1u << i;
        }
    }
    pthread_mutex_unlock(&fault_mu);
    return strike;
}

/* The marked name (text: 0) or text (1) of `code` while it counts as injected, else NULL. */
static const char* fault_error_string(int code, int text) {
    const char* s = NULL;
    size_t i;
    pthread_mutex_lock(&fault_mu);
    if (fault_armed) {
        for (i = 0; i < FAULT_CODE_NAMES; i++) {
            if (fault_code_names[i].code == code && (fault_codes_seen & (1u << i)) != 0) {
                s = text ? fault_code_names[i].text : fault_code_names[i].name;
            }
        }
    }
    pthread_mutex_unlock(&fault_mu);
    return s;
}

/* Make the `nth` call (1-based, counted from now) of kind `op` fail, once (mode 0) or with every counted call after it
 * (mode 1: a lost context). Replaces an earlier arming and resets the counts and the latest failure. */
GCMX_STUB_EXPORT int gcmx_stub_fault_arm(uint32_t op, uint64_t nth, uint32_t mode) {
    if (op >= OP_COUNT || nth == 0 || (mode != MODE_ONCE && mode != MODE_CONTEXT_LOST)) return CU_INVALID_VALUE;
    pthread_mutex_lock(&fault_mu);
    fault_armed = 1;
    fault_arm_op = (enum fault_op)op;
    fault_arm_nth = nth;
    fault_arm_mode = (enum fault_mode)mode;
    fault_lost = 0;
    fault_injected = 0;
    memset(fault_calls, 0, sizeof fault_calls);
    fault_have_last = 0;
    fault_codes_seen = 0;
    pthread_mutex_unlock(&fault_mu);
    return CU_OK;
}

/* End the fault (also a lost context); *injected: the calls that failed by injection since the arming. The latest
 * failure stays readable (gcmx_stub_fault_last) until the next arming. */
GCMX_STUB_EXPORT int gcmx_stub_fault_disarm(uint64_t* injected) {
    if (injected == NULL) return CU_INVALID_VALUE;
    pthread_mutex_lock(&fault_mu);
    fault_armed = 0;
    fault_lost = 0;
    *injected = fault_injected;
    fault_injected = 0;
    pthread_mutex_unlock(&fault_mu);
    return CU_OK;
}

/* *n: counted calls of kind `op` since the last arming or gcmx_stub_fault_reset_counts(). */
GCMX_STUB_EXPORT int gcmx_stub_fault_calls(uint32_t op, uint64_t* n) {
    if (op >= OP_COUNT || n == NULL) return CU_INVALID_VALUE;
    pthread_mutex_lock(&fault_mu);
    *n = fault_calls[op];
    pthread_mutex_unlock(&fault_mu);
    return CU_OK;
}

/* Count calls from zero again (the fault stays armed). */
GCMX_STUB_EXPORT int gcmx_stub_fault_reset_counts(void) {
    pthread_mutex_lock(&fault_mu);
    memset(fault_calls, 0, sizeof fault_calls);
    pthread_mutex_unlock(&fault_mu);
    return CU_OK;
}

/* The latest injected failure since the last arming; CUDA_ERROR_NOT_FOUND when there was none. */
GCMX_STUB_EXPORT int gcmx_stub_fault_last(struct gcmx_stub_fault* out) {
    int rc = CU_OK;
    if (out == NULL || out->size != sizeof *out) return CU_INVALID_VALUE;
    pthread_mutex_lock(&fault_mu);
    if (fault_have_last) {
        *out = fault_last_hit;
    } else {
        rc = CU_NOT_FOUND;
    }
    pthread_mutex_unlock(&fault_mu);
    return rc;
}

/* The calls a release fault fails (the order of gcmx-cuda-testkit's `fault::Release`): what ending a host registration
 * takes, and which the fault table never fails. */
enum release_call {
    REL_SET_CURRENT, /* cuCtxSetCurrent: CUDA_ERROR_INVALID_CONTEXT, the context cannot be made current */
    REL_UNREGISTER,  /* cuMemHostUnregister: CUDA_ERROR_ILLEGAL_ADDRESS, as after a lost context */
    REL_COUNT
};
static const char* const release_names[REL_COUNT] = {"cuCtxSetCurrent", "cuMemHostUnregister"};
static const int release_codes[REL_COUNT] = {CU_INVALID_CONTEXT, CU_ILLEGAL_ADDRESS};
static uint64_t release_left[REL_COUNT];   /* calls still to fail */
static uint64_t release_failed[REL_COUNT]; /* calls failed since the latest gcmx_stub_fault_release() of the kind */
static int release_any;                    /* some release_left is not 0 (read without the lock first) */

/* 1 with *rc set when a release fault fails this call of entry point `name`; the call then does nothing. */
static int release_hit(const char* name, int* rc) {
    int hit = 0;
    size_t i;
    if (!__atomic_load_n(&release_any, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&fault_mu);
    for (i = 0; i < REL_COUNT; i++) {
        if (release_left[i] > 0 && strcmp(name, release_names[i]) == 0) {
            release_left[i]--;
            release_failed[i]++;
            *rc = release_codes[i];
            hit = 1;
        }
    }
    __atomic_store_n(&release_any, release_left[REL_SET_CURRENT] > 0 || release_left[REL_UNREGISTER] > 0,
                     __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fault_mu);
    return hit;
}

/* Make the next `count` calls of `which` (enum release_call) fail before they reach the driver (0: none); *failed: the
 * calls of `which` that failed since the previous gcmx_stub_fault_release() of it. Not ended by disarming. */
GCMX_STUB_EXPORT int gcmx_stub_fault_release(uint32_t which, uint64_t count, uint64_t* failed) {
    if (which >= REL_COUNT || failed == NULL) return CU_INVALID_VALUE;
    pthread_mutex_lock(&fault_mu);
    *failed = release_failed[which];
    release_failed[which] = 0;
    release_left[which] = count;
    __atomic_store_n(&release_any, release_left[REL_SET_CURRENT] > 0 || release_left[REL_UNREGISTER] > 0,
                     __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fault_mu);
    return CU_OK;
}

/* ================================================================================================================ */
/* The entry points gcmx-cuda and cust call: fault hook, then the real driver or the emulation                      */
/* ================================================================================================================ */

/* One line per entry point: (the kind it counts as, name, parameters, arguments). A kind's call fails by injection
 * before it reaches the driver, except OP_SYNCHRONIZE: a wait runs first and then reports the injected failure (an
 * error of earlier asynchronous work, which the wait has drained, as the driver reports it). */
#define GCMX_ENTRY_POINTS(X)                                                                                         \
    X(OP_NONE, cuInit, (unsigned flags), (flags))                                                                    \
    X(OP_NONE, cuDriverGetVersion, (int* v), (v))                                                                    \
    X(OP_NONE, cuDeviceGetCount, (int* n), (n))                                                                      \
    X(OP_NONE, cuDeviceGet, (CUdevice* d, int ordinal), (d, ordinal))                                                \
    X(OP_NONE, cuDeviceGetAttribute, (int* v, int attrib, CUdevice d), (v, attrib, d))                               \
    X(OP_NONE, cuDeviceGetName, (char* name, int len, CUdevice d), (name, len, d))                                   \
    X(OP_NONE, cuDeviceTotalMem_v2, (size_t* bytes, CUdevice d), (bytes, d))                                         \
    X(OP_CONTEXT_CREATE, cuDevicePrimaryCtxRetain, (struct emu_ctx** ctx, CUdevice d), (ctx, d))                     \
    X(OP_NONE, cuDevicePrimaryCtxRelease_v2, (CUdevice d), (d))                                                      \
    X(OP_NONE, cuCtxSetCurrent, (struct emu_ctx* ctx), (ctx))                                                        \
    X(OP_NONE, cuCtxGetCurrent, (struct emu_ctx** ctx), (ctx))                                                       \
    X(OP_NONE, cuCtxGetDevice, (CUdevice* d), (d))                                                                   \
    X(OP_NONE, cuCtxSynchronize, (void), ())                                                                         \
    X(OP_MODULE_LOAD, cuModuleLoadData, (struct emu_module** m, const void* image), (m, image))                      \
    X(OP_NONE, cuModuleLoadFatBinary, (struct emu_module** m, const void* image), (m, image))                        \
    X(OP_NONE, cuModuleLoadDataEx,                                                                                   \
      (struct emu_module** m, const void* image, unsigned n, void* options, void** values),                          \
      (m, image, n, options, values))                                                                                \
    X(OP_NONE, cuModuleUnload, (struct emu_module* m), (m))                                                          \
    X(OP_NONE, cuModuleGetFunction, (const struct emu_kernel** f, struct emu_module* m, const char* name),           \
      (f, m, name))                                                                                                  \
    X(OP_NONE, cuMemGetInfo_v2, (size_t* free_bytes, size_t* total), (free_bytes, total))                            \
    X(OP_DEVICE_ALLOC, cuMemAlloc_v2, (CUdeviceptr* p, size_t n), (p, n))                                            \
    X(OP_NONE, cuMemFree_v2, (CUdeviceptr p), (p))                                                                   \
    X(OP_HOST_ALLOC, cuMemAllocHost_v2, (void** p, size_t n), (p, n))                                                \
    X(OP_HOST_ALLOC, cuMemHostAlloc, (void** p, size_t n, unsigned flags), (p, n, flags))                            \
    X(OP_NONE, cuMemFreeHost, (void* p), (p))                                                                        \
    X(OP_NONE, cuMemHostGetDevicePointer_v2, (CUdeviceptr* d, void* p, unsigned flags), (d, p, flags))               \
    X(OP_HOST_REGISTER, cuMemHostRegister_v2, (void* p, size_t n, unsigned flags), (p, n, flags))                    \
    X(OP_NONE, cuMemHostUnregister, (void* p), (p))                                                                  \
    X(OP_NONE, cuMemcpyHtoD_v2, (CUdeviceptr dst, const void* src, size_t n), (dst, src, n))                         \
    X(OP_COPY_TO_DEVICE, cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void* src, size_t n, struct emu_stream* s),   \
      (dst, src, n, s))                                                                                              \
    X(OP_COPY_TO_HOST, cuMemcpyDtoH_v2, (void* dst, CUdeviceptr src, size_t n), (dst, src, n))                       \
    X(OP_COPY_TO_HOST, cuMemcpyDtoHAsync_v2, (void* dst, CUdeviceptr src, size_t n, struct emu_stream* s),           \
      (dst, src, n, s))                                                                                              \
    X(OP_MEMSET, cuMemsetD8_v2, (CUdeviceptr dst, unsigned char v, size_t n), (dst, v, n))                           \
    X(OP_MEMSET, cuMemsetD8Async, (CUdeviceptr dst, unsigned char v, size_t n, struct emu_stream* s),                \
      (dst, v, n, s))                                                                                                \
    X(OP_STREAM_CREATE, cuStreamCreate, (struct emu_stream** s, unsigned flags), (s, flags))                         \
    X(OP_NONE, cuStreamCreateWithPriority, (struct emu_stream** s, unsigned flags, int priority),                    \
      (s, flags, priority))                                                                                          \
    X(OP_NONE, cuStreamDestroy_v2, (struct emu_stream* s), (s))                                                      \
    X(OP_SYNCHRONIZE, cuStreamSynchronize, (struct emu_stream* s), (s))                                              \
    X(OP_NONE, cuStreamQuery, (struct emu_stream* s), (s))                                                           \
    X(OP_EVENT, cuStreamWaitEvent, (struct emu_stream* s, struct emu_event* e, unsigned flags), (s, e, flags))       \
    X(OP_EVENT, cuEventCreate, (struct emu_event** e, unsigned flags), (e, flags))                                   \
    X(OP_NONE, cuEventDestroy_v2, (struct emu_event* e), (e))                                                        \
    X(OP_EVENT, cuEventRecord, (struct emu_event* e, struct emu_stream* s), (e, s))                                  \
    X(OP_SYNCHRONIZE, cuEventSynchronize, (struct emu_event* e), (e))                                                \
    X(OP_SYNCHRONIZE, cuEventQuery, (struct emu_event* e), (e))                                                      \
    X(OP_NONE, cuEventElapsedTime, (float* ms, struct emu_event* start, struct emu_event* end), (ms, start, end))    \
    X(OP_LAUNCH, cuOccupancyMaxActiveBlocksPerMultiprocessor,                                                        \
      (int* n, const struct emu_kernel* f, int block, size_t smem), (n, f, block, smem))                             \
    X(OP_LAUNCH, cuLaunchKernel,                                                                                     \
      (const struct emu_kernel* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,     \
       unsigned shmem, struct emu_stream* s, void** params, void** extra),                                           \
      (f, gx, gy, gz, bx, by, bz, shmem, s, params, extra))                                                          \
    X(OP_LAUNCH, cuLaunchCooperativeKernel,                                                                          \
      (const struct emu_kernel* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,     \
       unsigned shmem, struct emu_stream* s, void** params),                                                         \
      (f, gx, gy, gz, bx, by, bz, shmem, s, params))

#define GCMX_DEFINE_ENTRY(op, name, params, args)                                                                    \
    GCMX_STUB_EXPORT int name params {                                                                               \
        static void* real_;                                                                                          \
        int rc_;                                                                                                     \
        if ((op) != OP_SYNCHRONIZE && fault_hit((op), &rc_)) return rc_;                                             \
        if ((op) == OP_NONE && release_hit(#name, &rc_)) return rc_;                                                 \
        if (pass_through()) {                                                                                        \
            int(*f_) params = (int(*) params)pass_symbol(&real_, #name);                                             \
            rc_ = f_ != NULL ? f_ args : CU_NO_DEVICE;                                                               \
        } else {                                                                                                     \
            rc_ = emu_##name args;                                                                                   \
        }                                                                                                            \
        if ((op) == OP_SYNCHRONIZE) fault_hit((op), &rc_);                                                           \
        return rc_;                                                                                                  \
    }

GCMX_ENTRY_POINTS(GCMX_DEFINE_ENTRY)

/* The error strings: the driver's (or the stub's own table), marked while an injected failure returned the code. */
GCMX_STUB_EXPORT int cuGetErrorName(int error, const char** p_str) {
    static void* real_;
    const char* marked;
    if (p_str == NULL) return CU_INVALID_VALUE;
    marked = fault_error_string(error, 0);
    if (marked != NULL) {
        *p_str = marked;
        return CU_OK;
    }
    if (pass_through()) {
        int (*f)(int, const char**) = (int (*)(int, const char**))pass_symbol(&real_, "cuGetErrorName");
        if (f != NULL) return f(error, p_str);
    }
    return emu_cuGetErrorName(error, p_str);
}

GCMX_STUB_EXPORT int cuGetErrorString(int error, const char** p_str) {
    static void* real_;
    const char* marked;
    if (p_str == NULL) return CU_INVALID_VALUE;
    marked = fault_error_string(error, 1);
    if (marked != NULL) {
        *p_str = marked;
        return CU_OK;
    }
    if (pass_through()) {
        int (*f)(int, const char**) = (int (*)(int, const char**))pass_symbol(&real_, "cuGetErrorString");
        if (f != NULL) return f(error, p_str);
    }
    return emu_cuGetErrorString(error, p_str);
}

/* ================================================================================================================ */
/* Every other entry point: no device (also in emulation: gcmx-cuda does not call them; when forwarding: not        */
/* supported, as these cannot be forwarded without their signatures).                                               */
/* ================================================================================================================ */
#define GCMX_NO_DEVICE(name) \
    GCMX_STUB_EXPORT int name(void) { return pass_through() ? CU_NOT_SUPPORTED : CU_NO_DEVICE; }

GCMX_NO_DEVICE(cuArray3DCreate_v2)
GCMX_NO_DEVICE(cuArray3DGetDescriptor_v2)
GCMX_NO_DEVICE(cuArrayCreate_v2)
GCMX_NO_DEVICE(cuArrayDestroy)
GCMX_NO_DEVICE(cuArrayGetDescriptor_v2)
GCMX_NO_DEVICE(cuArrayGetPlane)
GCMX_NO_DEVICE(cuArrayGetSparseProperties)
GCMX_NO_DEVICE(cuCtxAttach)
GCMX_NO_DEVICE(cuCtxCreate_v2)
GCMX_NO_DEVICE(cuCtxCreate_v3)
GCMX_NO_DEVICE(cuCtxDestroy_v2)
GCMX_NO_DEVICE(cuCtxDetach)
GCMX_NO_DEVICE(cuCtxDisablePeerAccess)
GCMX_NO_DEVICE(cuCtxEnablePeerAccess)
GCMX_NO_DEVICE(cuCtxGetApiVersion)
GCMX_NO_DEVICE(cuCtxGetCacheConfig)
GCMX_NO_DEVICE(cuCtxGetExecAffinity)
GCMX_NO_DEVICE(cuCtxGetFlags)
GCMX_NO_DEVICE(cuCtxGetLimit)
GCMX_NO_DEVICE(cuCtxGetSharedMemConfig)
GCMX_NO_DEVICE(cuCtxGetStreamPriorityRange)
GCMX_NO_DEVICE(cuCtxPopCurrent_v2)
GCMX_NO_DEVICE(cuCtxPushCurrent_v2)
GCMX_NO_DEVICE(cuCtxResetPersistingL2Cache)
GCMX_NO_DEVICE(cuCtxSetCacheConfig)
GCMX_NO_DEVICE(cuCtxSetLimit)
GCMX_NO_DEVICE(cuCtxSetSharedMemConfig)
GCMX_NO_DEVICE(cuDestroyExternalMemory)
GCMX_NO_DEVICE(cuDestroyExternalSemaphore)
GCMX_NO_DEVICE(cuDeviceCanAccessPeer)
GCMX_NO_DEVICE(cuDeviceComputeCapability)
GCMX_NO_DEVICE(cuDeviceGetByPCIBusId)
GCMX_NO_DEVICE(cuDeviceGetDefaultMemPool)
GCMX_NO_DEVICE(cuDeviceGetExecAffinitySupport)
GCMX_NO_DEVICE(cuDeviceGetGraphMemAttribute)
GCMX_NO_DEVICE(cuDeviceGetLuid)
GCMX_NO_DEVICE(cuDeviceGetMemPool)
GCMX_NO_DEVICE(cuDeviceGetNvSciSyncAttributes)
GCMX_NO_DEVICE(cuDeviceGetP2PAttribute)
GCMX_NO_DEVICE(cuDeviceGetPCIBusId)
GCMX_NO_DEVICE(cuDeviceGetProperties)
GCMX_NO_DEVICE(cuDeviceGetTexture1DLinearMaxWidth)
GCMX_NO_DEVICE(cuDeviceGetUuid)
GCMX_NO_DEVICE(cuDeviceGetUuid_v2)
GCMX_NO_DEVICE(cuDeviceGraphMemTrim)
GCMX_NO_DEVICE(cuDevicePrimaryCtxGetState)
GCMX_NO_DEVICE(cuDevicePrimaryCtxReset_v2)
GCMX_NO_DEVICE(cuDevicePrimaryCtxSetFlags_v2)
GCMX_NO_DEVICE(cuDeviceSetGraphMemAttribute)
GCMX_NO_DEVICE(cuDeviceSetMemPool)
GCMX_NO_DEVICE(cuEventRecordWithFlags)
GCMX_NO_DEVICE(cuExternalMemoryGetMappedBuffer)
GCMX_NO_DEVICE(cuExternalMemoryGetMappedMipmappedArray)
GCMX_NO_DEVICE(cuFlushGPUDirectRDMAWrites)
GCMX_NO_DEVICE(cuFuncGetAttribute)
GCMX_NO_DEVICE(cuFuncGetModule)
GCMX_NO_DEVICE(cuFuncSetAttribute)
GCMX_NO_DEVICE(cuFuncSetBlockShape)
GCMX_NO_DEVICE(cuFuncSetCacheConfig)
GCMX_NO_DEVICE(cuFuncSetSharedMemConfig)
GCMX_NO_DEVICE(cuFuncSetSharedSize)
GCMX_NO_DEVICE(cuGetExportTable)
GCMX_NO_DEVICE(cuGetProcAddress)
GCMX_NO_DEVICE(cuGraphAddChildGraphNode)
GCMX_NO_DEVICE(cuGraphAddDependencies)
GCMX_NO_DEVICE(cuGraphAddEmptyNode)
GCMX_NO_DEVICE(cuGraphAddEventRecordNode)
GCMX_NO_DEVICE(cuGraphAddEventWaitNode)
GCMX_NO_DEVICE(cuGraphAddExternalSemaphoresSignalNode)
GCMX_NO_DEVICE(cuGraphAddExternalSemaphoresWaitNode)
GCMX_NO_DEVICE(cuGraphAddHostNode)
GCMX_NO_DEVICE(cuGraphAddKernelNode)
GCMX_NO_DEVICE(cuGraphAddMemAllocNode)
GCMX_NO_DEVICE(cuGraphAddMemFreeNode)
GCMX_NO_DEVICE(cuGraphAddMemcpyNode)
GCMX_NO_DEVICE(cuGraphAddMemsetNode)
GCMX_NO_DEVICE(cuGraphChildGraphNodeGetGraph)
GCMX_NO_DEVICE(cuGraphClone)
GCMX_NO_DEVICE(cuGraphCreate)
GCMX_NO_DEVICE(cuGraphDebugDotPrint)
GCMX_NO_DEVICE(cuGraphDestroy)
GCMX_NO_DEVICE(cuGraphDestroyNode)
GCMX_NO_DEVICE(cuGraphEventRecordNodeGetEvent)
GCMX_NO_DEVICE(cuGraphEventRecordNodeSetEvent)
GCMX_NO_DEVICE(cuGraphEventWaitNodeGetEvent)
GCMX_NO_DEVICE(cuGraphEventWaitNodeSetEvent)
GCMX_NO_DEVICE(cuGraphExecChildGraphNodeSetParams)
GCMX_NO_DEVICE(cuGraphExecDestroy)
GCMX_NO_DEVICE(cuGraphExecEventRecordNodeSetEvent)
GCMX_NO_DEVICE(cuGraphExecEventWaitNodeSetEvent)
GCMX_NO_DEVICE(cuGraphExecExternalSemaphoresSignalNodeSetParams)
GCMX_NO_DEVICE(cuGraphExecExternalSemaphoresWaitNodeSetParams)
GCMX_NO_DEVICE(cuGraphExecHostNodeSetParams)
GCMX_NO_DEVICE(cuGraphExecKernelNodeSetParams)
GCMX_NO_DEVICE(cuGraphExecMemcpyNodeSetParams)
GCMX_NO_DEVICE(cuGraphExecMemsetNodeSetParams)
GCMX_NO_DEVICE(cuGraphExecUpdate)
GCMX_NO_DEVICE(cuGraphExternalSemaphoresSignalNodeGetParams)
GCMX_NO_DEVICE(cuGraphExternalSemaphoresSignalNodeSetParams)
GCMX_NO_DEVICE(cuGraphExternalSemaphoresWaitNodeGetParams)
GCMX_NO_DEVICE(cuGraphExternalSemaphoresWaitNodeSetParams)
GCMX_NO_DEVICE(cuGraphGetEdges)
GCMX_NO_DEVICE(cuGraphGetNodes)
GCMX_NO_DEVICE(cuGraphGetRootNodes)
GCMX_NO_DEVICE(cuGraphHostNodeGetParams)
GCMX_NO_DEVICE(cuGraphHostNodeSetParams)
GCMX_NO_DEVICE(cuGraphInstantiateWithFlags)
GCMX_NO_DEVICE(cuGraphInstantiate_v2)
GCMX_NO_DEVICE(cuGraphKernelNodeCopyAttributes)
GCMX_NO_DEVICE(cuGraphKernelNodeGetAttribute)
GCMX_NO_DEVICE(cuGraphKernelNodeGetParams)
GCMX_NO_DEVICE(cuGraphKernelNodeSetAttribute)
GCMX_NO_DEVICE(cuGraphKernelNodeSetParams)
GCMX_NO_DEVICE(cuGraphLaunch)
GCMX_NO_DEVICE(cuGraphMemAllocNodeGetParams)
GCMX_NO_DEVICE(cuGraphMemFreeNodeGetParams)
GCMX_NO_DEVICE(cuGraphMemcpyNodeGetParams)
GCMX_NO_DEVICE(cuGraphMemcpyNodeSetParams)
GCMX_NO_DEVICE(cuGraphMemsetNodeGetParams)
GCMX_NO_DEVICE(cuGraphMemsetNodeSetParams)
GCMX_NO_DEVICE(cuGraphNodeFindInClone)
GCMX_NO_DEVICE(cuGraphNodeGetDependencies)
GCMX_NO_DEVICE(cuGraphNodeGetDependentNodes)
GCMX_NO_DEVICE(cuGraphNodeGetType)
GCMX_NO_DEVICE(cuGraphReleaseUserObject)
GCMX_NO_DEVICE(cuGraphRemoveDependencies)
GCMX_NO_DEVICE(cuGraphRetainUserObject)
GCMX_NO_DEVICE(cuGraphUpload)
GCMX_NO_DEVICE(cuGraphicsMapResources)
GCMX_NO_DEVICE(cuGraphicsResourceGetMappedMipmappedArray)
GCMX_NO_DEVICE(cuGraphicsResourceGetMappedPointer_v2)
GCMX_NO_DEVICE(cuGraphicsResourceSetMapFlags_v2)
GCMX_NO_DEVICE(cuGraphicsSubResourceGetMappedArray)
GCMX_NO_DEVICE(cuGraphicsUnmapResources)
GCMX_NO_DEVICE(cuGraphicsUnregisterResource)
GCMX_NO_DEVICE(cuImportExternalMemory)
GCMX_NO_DEVICE(cuImportExternalSemaphore)
GCMX_NO_DEVICE(cuIpcCloseMemHandle)
GCMX_NO_DEVICE(cuIpcGetEventHandle)
GCMX_NO_DEVICE(cuIpcGetMemHandle)
GCMX_NO_DEVICE(cuIpcOpenEventHandle)
GCMX_NO_DEVICE(cuIpcOpenMemHandle_v2)
GCMX_NO_DEVICE(cuLaunch)
GCMX_NO_DEVICE(cuLaunchCooperativeKernelMultiDevice)
GCMX_NO_DEVICE(cuLaunchGrid)
GCMX_NO_DEVICE(cuLaunchGridAsync)
GCMX_NO_DEVICE(cuLaunchHostFunc)
GCMX_NO_DEVICE(cuLinkAddData_v2)
GCMX_NO_DEVICE(cuLinkAddFile_v2)
GCMX_NO_DEVICE(cuLinkComplete)
GCMX_NO_DEVICE(cuLinkCreate_v2)
GCMX_NO_DEVICE(cuLinkDestroy)
GCMX_NO_DEVICE(cuMemAddressFree)
GCMX_NO_DEVICE(cuMemAddressReserve)
GCMX_NO_DEVICE(cuMemAdvise)
GCMX_NO_DEVICE(cuMemAllocAsync)
GCMX_NO_DEVICE(cuMemAllocFromPoolAsync)
GCMX_NO_DEVICE(cuMemAllocManaged)
GCMX_NO_DEVICE(cuMemAllocPitch_v2)
GCMX_NO_DEVICE(cuMemCreate)
GCMX_NO_DEVICE(cuMemExportToShareableHandle)
GCMX_NO_DEVICE(cuMemFreeAsync)
GCMX_NO_DEVICE(cuMemGetAccess)
GCMX_NO_DEVICE(cuMemGetAddressRange_v2)
GCMX_NO_DEVICE(cuMemGetAllocationGranularity)
GCMX_NO_DEVICE(cuMemGetAllocationPropertiesFromHandle)
GCMX_NO_DEVICE(cuMemHostGetFlags)
GCMX_NO_DEVICE(cuMemImportFromShareableHandle)
GCMX_NO_DEVICE(cuMemMap)
GCMX_NO_DEVICE(cuMemMapArrayAsync)
GCMX_NO_DEVICE(cuMemPoolCreate)
GCMX_NO_DEVICE(cuMemPoolDestroy)
GCMX_NO_DEVICE(cuMemPoolExportPointer)
GCMX_NO_DEVICE(cuMemPoolExportToShareableHandle)
GCMX_NO_DEVICE(cuMemPoolGetAccess)
GCMX_NO_DEVICE(cuMemPoolGetAttribute)
GCMX_NO_DEVICE(cuMemPoolImportFromShareableHandle)
GCMX_NO_DEVICE(cuMemPoolImportPointer)
GCMX_NO_DEVICE(cuMemPoolSetAccess)
GCMX_NO_DEVICE(cuMemPoolSetAttribute)
GCMX_NO_DEVICE(cuMemPoolTrimTo)
GCMX_NO_DEVICE(cuMemPrefetchAsync)
GCMX_NO_DEVICE(cuMemRangeGetAttribute)
GCMX_NO_DEVICE(cuMemRangeGetAttributes)
GCMX_NO_DEVICE(cuMemRelease)
GCMX_NO_DEVICE(cuMemRetainAllocationHandle)
GCMX_NO_DEVICE(cuMemSetAccess)
GCMX_NO_DEVICE(cuMemUnmap)
GCMX_NO_DEVICE(cuMemcpy)
GCMX_NO_DEVICE(cuMemcpy2DAsync_v2)
GCMX_NO_DEVICE(cuMemcpy2DUnaligned_v2)
GCMX_NO_DEVICE(cuMemcpy2D_v2)
GCMX_NO_DEVICE(cuMemcpy3DAsync_v2)
GCMX_NO_DEVICE(cuMemcpy3DPeer)
GCMX_NO_DEVICE(cuMemcpy3DPeerAsync)
GCMX_NO_DEVICE(cuMemcpy3D_v2)
GCMX_NO_DEVICE(cuMemcpyAsync)
GCMX_NO_DEVICE(cuMemcpyAtoA_v2)
GCMX_NO_DEVICE(cuMemcpyAtoD_v2)
GCMX_NO_DEVICE(cuMemcpyAtoHAsync_v2)
GCMX_NO_DEVICE(cuMemcpyAtoH_v2)
GCMX_NO_DEVICE(cuMemcpyDtoA_v2)
GCMX_NO_DEVICE(cuMemcpyDtoDAsync_v2)
GCMX_NO_DEVICE(cuMemcpyDtoD_v2)
GCMX_NO_DEVICE(cuMemcpyHtoAAsync_v2)
GCMX_NO_DEVICE(cuMemcpyHtoA_v2)
GCMX_NO_DEVICE(cuMemcpyPeer)
GCMX_NO_DEVICE(cuMemcpyPeerAsync)
GCMX_NO_DEVICE(cuMemsetD16Async)
GCMX_NO_DEVICE(cuMemsetD16_v2)
GCMX_NO_DEVICE(cuMemsetD2D16Async)
GCMX_NO_DEVICE(cuMemsetD2D16_v2)
GCMX_NO_DEVICE(cuMemsetD2D32Async)
GCMX_NO_DEVICE(cuMemsetD2D32_v2)
GCMX_NO_DEVICE(cuMemsetD2D8Async)
GCMX_NO_DEVICE(cuMemsetD2D8_v2)
GCMX_NO_DEVICE(cuMemsetD32Async)
GCMX_NO_DEVICE(cuMemsetD32_v2)
GCMX_NO_DEVICE(cuMipmappedArrayCreate)
GCMX_NO_DEVICE(cuMipmappedArrayDestroy)
GCMX_NO_DEVICE(cuMipmappedArrayGetLevel)
GCMX_NO_DEVICE(cuMipmappedArrayGetSparseProperties)
GCMX_NO_DEVICE(cuModuleGetGlobal_v2)
GCMX_NO_DEVICE(cuModuleGetSurfRef)
GCMX_NO_DEVICE(cuModuleGetTexRef)
GCMX_NO_DEVICE(cuModuleLoad)
GCMX_NO_DEVICE(cuOccupancyAvailableDynamicSMemPerBlock)
GCMX_NO_DEVICE(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)
GCMX_NO_DEVICE(cuOccupancyMaxPotentialBlockSize)
GCMX_NO_DEVICE(cuOccupancyMaxPotentialBlockSizeWithFlags)
GCMX_NO_DEVICE(cuParamSetSize)
GCMX_NO_DEVICE(cuParamSetTexRef)
GCMX_NO_DEVICE(cuParamSetf)
GCMX_NO_DEVICE(cuParamSeti)
GCMX_NO_DEVICE(cuParamSetv)
GCMX_NO_DEVICE(cuPointerGetAttribute)
GCMX_NO_DEVICE(cuPointerGetAttributes)
GCMX_NO_DEVICE(cuPointerSetAttribute)
GCMX_NO_DEVICE(cuProfilerInitialize)
GCMX_NO_DEVICE(cuProfilerStart)
GCMX_NO_DEVICE(cuProfilerStop)
GCMX_NO_DEVICE(cuSignalExternalSemaphoresAsync)
GCMX_NO_DEVICE(cuStreamAddCallback)
GCMX_NO_DEVICE(cuStreamAttachMemAsync)
GCMX_NO_DEVICE(cuStreamBatchMemOp)
GCMX_NO_DEVICE(cuStreamBeginCapture_v2)
GCMX_NO_DEVICE(cuStreamCopyAttributes)
GCMX_NO_DEVICE(cuStreamEndCapture)
GCMX_NO_DEVICE(cuStreamGetAttribute)
GCMX_NO_DEVICE(cuStreamGetCaptureInfo)
GCMX_NO_DEVICE(cuStreamGetCaptureInfo_v2)
GCMX_NO_DEVICE(cuStreamGetCtx)
GCMX_NO_DEVICE(cuStreamGetFlags)
GCMX_NO_DEVICE(cuStreamGetPriority)
GCMX_NO_DEVICE(cuStreamIsCapturing)
GCMX_NO_DEVICE(cuStreamSetAttribute)
GCMX_NO_DEVICE(cuStreamUpdateCaptureDependencies)
GCMX_NO_DEVICE(cuStreamWaitValue32)
GCMX_NO_DEVICE(cuStreamWaitValue64)
GCMX_NO_DEVICE(cuStreamWriteValue32)
GCMX_NO_DEVICE(cuStreamWriteValue64)
GCMX_NO_DEVICE(cuSurfObjectCreate)
GCMX_NO_DEVICE(cuSurfObjectDestroy)
GCMX_NO_DEVICE(cuSurfObjectGetResourceDesc)
GCMX_NO_DEVICE(cuSurfRefGetArray)
GCMX_NO_DEVICE(cuSurfRefSetArray)
GCMX_NO_DEVICE(cuTexObjectCreate)
GCMX_NO_DEVICE(cuTexObjectDestroy)
GCMX_NO_DEVICE(cuTexObjectGetResourceDesc)
GCMX_NO_DEVICE(cuTexObjectGetResourceViewDesc)
GCMX_NO_DEVICE(cuTexObjectGetTextureDesc)
GCMX_NO_DEVICE(cuTexRefCreate)
GCMX_NO_DEVICE(cuTexRefDestroy)
GCMX_NO_DEVICE(cuTexRefGetAddressMode)
GCMX_NO_DEVICE(cuTexRefGetAddress_v2)
GCMX_NO_DEVICE(cuTexRefGetArray)
GCMX_NO_DEVICE(cuTexRefGetBorderColor)
GCMX_NO_DEVICE(cuTexRefGetFilterMode)
GCMX_NO_DEVICE(cuTexRefGetFlags)
GCMX_NO_DEVICE(cuTexRefGetFormat)
GCMX_NO_DEVICE(cuTexRefGetMaxAnisotropy)
GCMX_NO_DEVICE(cuTexRefGetMipmapFilterMode)
GCMX_NO_DEVICE(cuTexRefGetMipmapLevelBias)
GCMX_NO_DEVICE(cuTexRefGetMipmapLevelClamp)
GCMX_NO_DEVICE(cuTexRefGetMipmappedArray)
GCMX_NO_DEVICE(cuTexRefSetAddress2D_v3)
GCMX_NO_DEVICE(cuTexRefSetAddressMode)
GCMX_NO_DEVICE(cuTexRefSetAddress_v2)
GCMX_NO_DEVICE(cuTexRefSetArray)
GCMX_NO_DEVICE(cuTexRefSetBorderColor)
GCMX_NO_DEVICE(cuTexRefSetFilterMode)
GCMX_NO_DEVICE(cuTexRefSetFlags)
GCMX_NO_DEVICE(cuTexRefSetFormat)
GCMX_NO_DEVICE(cuTexRefSetMaxAnisotropy)
GCMX_NO_DEVICE(cuTexRefSetMipmapFilterMode)
GCMX_NO_DEVICE(cuTexRefSetMipmapLevelBias)
GCMX_NO_DEVICE(cuTexRefSetMipmapLevelClamp)
GCMX_NO_DEVICE(cuTexRefSetMipmappedArray)
GCMX_NO_DEVICE(cuThreadExchangeStreamCaptureMode)
GCMX_NO_DEVICE(cuUserObjectCreate)
GCMX_NO_DEVICE(cuUserObjectRelease)
GCMX_NO_DEVICE(cuUserObjectRetain)
GCMX_NO_DEVICE(cuWaitExternalSemaphoresAsync)
