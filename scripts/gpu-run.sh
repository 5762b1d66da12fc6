#!/usr/bin/env bash
# Run gcmx's GPU tests and benchmark from a bundle that scripts/gpu-build.sh made, on any x86-64 machine
# with an NVIDIA driver (libcuda.so.1 on the loader's path) and nothing else installed.
#   gpu-run.sh smoke   device info + quick correctness (gcmx-cuda's GPU tests with --quick)
#   gpu-run.sh tests   gcmx-cuda's GPU tests (full) + gcmx's integration tests on Backend::Cuda + the fault tests
#                      + gcmx-consumer (a registry user's binary built without CUDA) with --require-gpu
#   gpu-run.sh faults  gcmx-cuda's fault-injection tests alone (every GPU API through every kind of driver
#                      failure, results checked against the CPU; out of memory; 64 concurrent engines),
#                      the failures injected by the bundled stub libcuda in front of the driver (found with
#                      ldconfig -p or in the usual folders; GCMX_STUB_DRIVER=/path/to/libcuda.so.1 to choose)
#   gpu-run.sh bench   gcmx-cuda-bench (full), then the streaming adapters' benchmark on all CPU
#                      cores and on the GPU (gcmx-stream-adapters --backend cpu-parallel / cuda)
#   gpu-run.sh full    tests, then bench
#   gpu-run.sh testbench  gcmx-cuda's GPU tests, then gcmx-cuda-bench (no integration tests)
#   gpu-run.sh cpu     the CPU benchmarks and gcmx-x86 tests that scripts/cpu-bench-build.sh put in <bundle>/cpu
#   gpu-run.sh cpu-one-core   only the one-core comparison (one_core ${GCMX_ONE_CORE_ARGS:-}: gcmx beside
#                      haberdashery, BoringSSL, aws-lc-rs and ring, interleaved, in cycles)
# The bundle is the folder this script is in when it holds bins.tar.xz (gpu-build.sh copies the script
# there), else .device beside scripts/. Logs go to $GCMX_LOG_DIR (default ./gpu-logs).
# Options through the environment: GCMX_RUN_TIMEOUT (seconds per test or bench program, default 1800),
# GCMX_TEST_ARGS / GCMX_BENCH_ARGS (extra arguments, e.g. "--max-gib 1" or "--quick"; for the GPU tests
# they become GCMX_GPU_MAX_GIB / GCMX_GPU_QUICK, see crates/gcmx-cuda/tests/gpu.rs).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -f "${HERE}/bins.tar.xz" ]]; then
    D="${HERE}"
else
    D="$(cd "${HERE}/.." && pwd)/.device"
fi
MODE="${1:-smoke}"
LOG="${GCMX_LOG_DIR:-./gpu-logs}"
mkdir -p "${LOG}"
WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT
if [[ -f "${D}/bins.tar.xz" ]]; then
    if command -v xz >/dev/null; then
        xz -dc "${D}/bins.tar.xz" | tar -x -C "${WORK}"
    else
        python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "${D}/bins.tar.xz" | tar -x -C "${WORK}"
    fi
fi
mkdir -p "${WORK}/vectors" && tar -xzf "${D}/vectors.tgz" -C "${WORK}/vectors"
export GCMX_VECTORS_DIR="${WORK}/vectors/gcm"
export RUST_BACKTRACE=1
status=0

echo "== gpu-run ${MODE} at $(date -u +%Y-%m-%dT%H:%M:%SZ)" | tee "${LOG}/env.txt"
{ head -3 "${D}/MANIFEST"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1; nproc; free -g | head -2; } | tee -a "${LOG}/env.txt"
for f in "${WORK}"/bin/* "${WORK}"/tests/* "${WORK}"/faults/*; do
    [[ -f "$f" ]] || continue
    if ldd "$f" | grep -q "not found"; then
        echo "MISSING LIBRARY for $f:"; ldd "$f"; status=1
    fi
done | tee -a "${LOG}/env.txt"

# gcmx-cuda's GPU tests (crates/gcmx-cuda/tests/gpu.rs), one test at a time; each prints its count of
# checks, summed here into one line.
run_tests() {
    local quick=0 max_gib=4
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --quick) quick=1 ;;
            --max-gib) max_gib="$2"; shift ;;
        esac
        shift
    done
    GCMX_GPU_QUICK=${quick} GCMX_GPU_MAX_GIB=${max_gib} timeout "${GCMX_RUN_TIMEOUT:-1800}" \
        "${WORK}/bin/gcmx-cuda-gpu-tests" --test-threads=1 2>&1 | tee "${LOG}/gpu-test.log"
    local rc=${PIPESTATUS[0]}
    [[ $rc == 0 ]] || status=1
    # (a check line may follow the harness's "test <name> ... " on the same line)
    grep -oE "GPU checks [a-z_]+: [0-9]+ passed, [0-9]+ failed" "${LOG}/gpu-test.log" | awk '{p += $4; f += $6} END {
        printf "GPU TEST SUMMARY: %d passed, %d failed (%d tests)\n", p, f, NR}' | tee -a "${LOG}/gpu-test.log"
    echo "gcmx-cuda GPU tests exit ${rc}"
}

run_integration() {
    : > "${LOG}/integration.log"
    for t in "${WORK}"/tests/*; do
        [[ -x "$t" ]] || continue
        echo "== $(basename "$t")" | tee -a "${LOG}/integration.log"
        timeout "${GCMX_TEST_TIMEOUT:-200}" "$t" --test-threads=8 2>&1 | tail -n 25 >> "${LOG}/integration.log"
        local rc=${PIPESTATUS[0]}
        grep -E "^test result|GPU tests" "${LOG}/integration.log" | tail -n 1
        [[ $rc == 0 ]] || { status=1; echo "   FAILED (exit ${rc}); see integration.log"; }
    done
}

# The NVIDIA driver's libcuda.so.1 (an absolute path): $GCMX_STUB_DRIVER if set, else what the loader's
# cache lists (ldconfig -p), else the usual install folders; empty when none is found.
find_driver() {
    if [[ -n "${GCMX_STUB_DRIVER:-}" ]]; then
        echo "${GCMX_STUB_DRIVER}"
        return
    fi
    local p c
    p=$(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" && /x86-64/ {print $NF; exit}')
    [[ -n "${p}" ]] || p=$(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" {print $NF; exit}')
    if [[ -z "${p}" ]]; then
        for c in /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 /usr/lib/libcuda.so.1 \
            /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib/wsl/lib/libcuda.so.1; do
            if [[ -e "${c}" ]]; then p="${c}"; break; fi
        done
    fi
    echo "${p}"
}

# The fault-injection tests (crates/gcmx-cuda/tests/faults.rs, fault_startup.rs): on a real GPU the
# same cases as in CI, at every count (GCMX_FAULTS_FULL), and every result compared with the CPU. The
# faults are injected by gcmx's stub libcuda (bundled in stub/), loaded first through LD_LIBRARY_PATH and
# forwarding every driver call to the real driver named by GCMX_STUB_DRIVER.
run_faults() {
    : > "${LOG}/faults.log"
    local t rc drv
    drv=$(find_driver)
    if [[ -z "${drv}" || ! -e "${drv}" || "${drv}" != /* ]]; then
        echo "fault tests: NOT run: the NVIDIA driver's libcuda.so.1 was not found (ldconfig -p, the usual" \
            "folders${GCMX_STUB_DRIVER:+, GCMX_STUB_DRIVER=${GCMX_STUB_DRIVER}}); set GCMX_STUB_DRIVER to its absolute path"
        status=1
        return
    fi
    if [[ ! -f "${WORK}/stub/libcuda.so.1" ]]; then
        echo "fault tests: NOT run: the stub libcuda (stub/libcuda.so.1) is not in the bundle"; status=1; return
    fi
    echo "fault tests: stub ${WORK}/stub/libcuda.so.1 in front of the driver ${drv}" | tee -a "${LOG}/faults.log"
    for t in fault_startup faults; do
        if [[ ! -x "${WORK}/faults/${t}" ]]; then
            echo "fault tests: ${t} is not in the bundle"; status=1; continue
        fi
        echo "== ${t}" >> "${LOG}/faults.log"
        LD_LIBRARY_PATH="${WORK}/stub${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}" GCMX_STUB_DRIVER="${drv}" \
            GCMX_FAULTS_FULL=1 timeout "${GCMX_FAULTS_TIMEOUT:-600}" "${WORK}/faults/${t}" --test-threads=1 \
            >> "${LOG}/faults.log" 2>&1
        rc=$?
        [[ $rc == 0 ]] || { status=1; echo "   ${t} FAILED (exit ${rc}); see faults.log"; }
    done
    grep -oE "(fault-injection|out of memory:|concurrency:|gcmx stub libcuda:).*|^test result.*|FAIL.*|HUNG.*" \
        "${LOG}/faults.log"
    grep -oE "fault-injection .*: [0-9]+ cases" "${LOG}/faults.log" | grep -oE "[0-9]+ cases" \
        | awk '{n += $1} END {print "fault cases in all: " n}'
}

# A project built as a registry user builds it (no CUDA toolkit, no libcuda at build time) must find the
# driver here and give the CPU's bytes on the GPU.
run_consumer() {
    if [[ ! -x "${WORK}/bin/gcmx-consumer" ]]; then
        echo "consumer: gcmx-consumer is not in the bundle"; status=1; return
    fi
    "${WORK}/bin/gcmx-consumer" --require-gpu 2>&1 | tee "${LOG}/consumer.log"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
}

run_bench() {
    timeout "${GCMX_RUN_TIMEOUT:-1800}" "${WORK}/bin/gcmx-cuda-bench" "$@" 2>&1 | tee "${LOG}/gpu-bench.log"
    local rc=${PIPESTATUS[0]}
    [[ $rc == 0 ]] || status=1
    echo "gcmx-cuda-bench exit ${rc}"
    run_stream
}

run_stream() {
    local b
    for b in cpu-parallel cuda; do
        timeout "${GCMX_RUN_TIMEOUT:-1800}" "${WORK}/bin/gcmx-stream-adapters" --backend "$b" \
            ${GCMX_STREAM_ARGS:---mib 1024 --rounds 7} 2>&1 | tee "${LOG}/stream-${b}.log"
        [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    done
}

run_cpu() {
    local C="${D}/cpu"
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|Flags" | cut -c1-200 | tee "${LOG}/cpu.txt"
    if [[ -n ${GCMX_CPU_ONE_CORE_ONLY:-} ]]; then
        run_one_core "${C}"
        return
    fi
    "${C}/x86_equivalence" 2>&1 | tail -n 15 | tee -a "${LOG}/cpu.txt"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    "${C}/x86_constant_time" 2>&1 | tail -n 6 | tee -a "${LOG}/cpu.txt"
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    "${C}/x86_speed" 2>&1 | tee -a "${LOG}/cpu.txt"
    "${C}/aes_gcm" --bench "${GCMX_CPU_BENCH_FILTER:-aes256gcm-encrypt|auto-threshold}" 2>&1 | tee "${LOG}/cpu-bench.log" \
        | grep -E "time:|thrpt:|^[a-z].*/" | tail -n 80
    [[ ${PIPESTATUS[0]} == 0 ]] || status=1
    run_one_core "${C}"
}

run_one_core() {
    # shellcheck disable=SC2086 # the arguments are words
    "$1/one_core" ${GCMX_ONE_CORE_ARGS:-} 2>"${LOG}/cpu-one-core.stderr" | tee "${LOG}/cpu-one-core.md"
    [[ ${PIPESTATUS[0]} == 0 ]] || { status=1; tail -n 5 "${LOG}/cpu-one-core.stderr"; }
}

case "${MODE}" in
    smoke) run_tests --quick ;;
    tests) run_tests ${GCMX_TEST_ARGS:-}; run_consumer; run_integration; run_faults ;;
    consumer) run_consumer ;;
    stream) run_stream ;;
    integration) run_integration ;;
    faults) run_faults ;;
    bench) run_bench ;;
    benchquick) run_bench --quick ;;
    full) run_tests ${GCMX_TEST_ARGS:-}; run_consumer; run_integration; run_faults; run_bench ${GCMX_BENCH_ARGS:-} ;;
    testbench) run_tests ${GCMX_TEST_ARGS:-}; run_bench ${GCMX_BENCH_ARGS:-} ;;
    cpu) run_cpu ;;
    cpu-one-core) GCMX_CPU_ONE_CORE_ONLY=1 run_cpu ;;
    *) echo "gpu-run: unknown mode ${MODE}"; exit 2 ;;
esac
echo "== gpu-run ${MODE} finished, status ${status}"
exit ${status}
