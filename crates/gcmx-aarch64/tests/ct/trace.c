/*
 * A qemu-user TCG plugin for tests/constant_time.rs: it records, between two marker system calls of
 * the program it runs, every executed instruction's address and every memory access's address,
 * folded into one hash per run, and compares the runs of each case.
 *
 * The program's markers: sched_yield() starts a run and ends it (alternately); getppid() starts a
 * case whose runs must all trace alike (constant time); getpid() starts a self-check case whose
 * runs must not all trace alike (deliberately leaky code: the check must see it). At exit the plugin
 * prints "ct-trace: C cases, R runs, F failures" (and each failure above it) through qemu's log
 * (`-d plugin`).
 *
 * The declarations below are the parts of QEMU's plugin interface (API version 1, QEMU 4.2 to 8.0)
 * this plugin uses, written out so that no QEMU header is needed to build it.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
} qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
typedef void (*tb_trans_cb)(qemu_plugin_id_t, struct qemu_plugin_tb *);
typedef void (*udata_cb)(unsigned int, void *);
typedef void (*mem_cb)(unsigned int, qemu_plugin_meminfo_t, uint64_t, void *);
typedef void (*syscall_cb)(qemu_plugin_id_t, unsigned int, int64_t, uint64_t, uint64_t, uint64_t,
                           uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
typedef void (*atexit_cb)(qemu_plugin_id_t, void *);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, tb_trans_cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *, size_t);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *, udata_cb,
                                            enum qemu_plugin_cb_flags, void *);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *, mem_cb, enum qemu_plugin_cb_flags,
                                      enum qemu_plugin_mem_rw, void *);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t, syscall_cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, atexit_cb, void *);
void qemu_plugin_outs(const char *);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* aarch64 Linux system call numbers of the markers. */
enum { SYS_SCHED_YIELD = 124, SYS_GETPID = 172, SYS_GETPPID = 173 };

static bool recording;
static uint64_t hash, insns, accesses;
/* The current case: whether its runs must trace alike, its first run's trace, whether a run
 * differed. */
static bool expect_alike = true, have_ref, differed;
static uint64_t ref_hash, ref_insns, ref_accesses;
static uint64_t cases, runs, failures;
static char line[256];

static void mix(uint64_t v) {
    for (int i = 0; i < 8; i++) {
        hash ^= (v >> (8 * i)) & 0xff;
        hash *= 0x100000001b3ULL;
    }
}

static void on_insn(unsigned int vcpu, void *pc) {
    (void)vcpu;
    if (recording) {
        mix((uint64_t)(uintptr_t)pc);
        insns++;
    }
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *pc) {
    (void)vcpu;
    (void)pc;
    if (recording) {
        mix(vaddr ^ ((uint64_t)qemu_plugin_mem_is_store(info) << 63));
        accesses++;
    }
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        void *pc = (void *)(uintptr_t)qemu_plugin_insn_vaddr(insn);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn, QEMU_PLUGIN_CB_NO_REGS, pc);
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, pc);
    }
}

/* The end of a case: a self-check case fails if every run traced alike. */
static void close_case(void) {
    if (cases > 0 && !expect_alike && have_ref && !differed) {
        failures++;
        snprintf(line, sizeof line, "ct-trace: FAIL case %" PRIu64 ": leaky code not caught\n", cases);
        qemu_plugin_outs(line);
    }
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1, uint64_t a2,
                       uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8) {
    (void)id, (void)vcpu, (void)a1, (void)a2, (void)a3, (void)a4, (void)a5, (void)a6, (void)a7, (void)a8;
    if (num == SYS_GETPPID || num == SYS_GETPID) {
        close_case();
        cases++;
        expect_alike = num == SYS_GETPPID;
        have_ref = differed = false;
    } else if (num == SYS_SCHED_YIELD && !recording) {
        recording = true;
        hash = 0xcbf29ce484222325ULL;
        insns = accesses = 0;
    } else if (num == SYS_SCHED_YIELD) {
        recording = false;
        runs++;
        if (!have_ref) {
            have_ref = true;
            ref_hash = hash, ref_insns = insns, ref_accesses = accesses;
        } else if (hash != ref_hash || insns != ref_insns || accesses != ref_accesses) {
            differed = true;
            if (expect_alike) {
                failures++;
                snprintf(line, sizeof line,
                         "ct-trace: FAIL case %" PRIu64 ": a run traced %" PRIu64 " instructions, %" PRIu64
                         " accesses, hash %016" PRIx64 "; its first %" PRIu64 ", %" PRIu64 ", %016" PRIx64 "\n",
                         cases, insns, accesses, hash, ref_insns, ref_accesses, ref_hash);
                qemu_plugin_outs(line);
            }
        }
    }
}

static void on_exit(qemu_plugin_id_t id, void *p) {
    (void)id, (void)p;
    close_case();
    snprintf(line, sizeof line, "ct-trace: %" PRIu64 " cases, %" PRIu64 " runs, %" PRIu64 " failures\n", cases,
             runs, failures);
    qemu_plugin_outs(line);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                                               int argc, char **argv) {
    (void)info, (void)argc, (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_atexit_cb(id, on_exit, NULL);
    return 0;
}
