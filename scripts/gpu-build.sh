#!/usr/bin/env bash
# Build, on any x86-64 Linux machine (no GPU needed), a self-contained bundle that runs gcmx's GPU tests
# and benchmark on any x86-64 machine with an NVIDIA driver (and nothing else installed):
#   <bundle>/bins.tar.xz     gcmx-cuda-gpu-tests (gcmx-cuda's GPU tests, crates/gcmx-cuda/tests/gpu.rs, a
#                            cargo test binary) and gcmx-cuda-bench (crates/gcmx-cuda/examples, release,
#                            features `bench`), gcmx-stream-adapters (the streaming adapters' benchmark
#                            with `cuda`), gcmx's integration tests built with `--features cuda`
#                            (nist_cavp, wycheproof, spec_vectors, ...; they cover Backend::Cuda when a
#                            device is present), and gcmx-cuda's fault-injection tests (faults,
#                            fault_startup) with the stub libcuda that injects the faults (stub/, run in
#                            front of the real driver: GCMX_STUB_DRIVER), and gcmx-consumer: a project
#                            that depends on the packaged crates with features = ["cuda"], built with no
#                            CUDA on the machine (scripts/consumer-check.sh). Every binary embeds the same
#                            fatbin, so they travel as one xz stream, a twentieth of their size.
#   <bundle>/vectors.tgz     the NIST CAVP files gcm/*.rsp (scripts/fetch-vectors.sh)
#   <bundle>/gpu-run.sh      the runner (a copy of scripts/gpu-run.sh)
#   <bundle>/MANIFEST        commit, date, nvcc, sizes, shared-library dependencies
# Then, on the GPU machine: bash <bundle>/gpu-run.sh full (or tests, or faults)
#
# Options: --out DIR     the bundle folder (default: .device, git-ignored)
#          --committed   build the kernels from the committed cuda/ (git archive HEAD) instead of the work tree
#          --no-tests    skip gcmx's integration test binaries (and the consumer)
# The binaries link libcuda.so.1 dynamically (the driver's, found at run time) and otherwise only
# glibc/libgcc; this script checks that with ldd.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
OUTDIR=.device
COMMITTED=0
TESTS=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) OUTDIR="$2"; shift ;;
        --committed) COMMITTED=1 ;;
        --no-tests) TESTS=0 ;;
        *) echo "gpu-build: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "${OUTDIR}"
OUTDIR="$(cd "${OUTDIR}" && pwd)"

eval "$(scripts/setup-cuda.sh)"
rm -rf "${OUTDIR:?}/bin" "${OUTDIR}/tests" "${OUTDIR}/faults" "${OUTDIR}/stub" "${OUTDIR}/vectors.tgz" \
    "${OUTDIR}/bins.tar.xz" "${OUTDIR}/cuda-src"
mkdir -p "${OUTDIR}/bin" "${OUTDIR}/tests" "${OUTDIR}/faults" "${OUTDIR}/stub"

if [[ ${COMMITTED} == 1 ]]; then
    mkdir -p "${OUTDIR}/cuda-src"
    git archive HEAD cuda | tar -x -C "${OUTDIR}/cuda-src"
    export GCMX_CUDA_DIR="${OUTDIR}/cuda-src/cuda"
    echo "gpu-build: kernels from committed cuda/ ($(git rev-parse --short HEAD))"
fi

cargo build --release -p gcmx-cuda --features bench --examples
cp target/release/examples/gcmx-cuda-bench "${OUTDIR}/bin/"

# Copy the integration-test executables that cargo reports (JSON on stdin) into <bundle>/$1.
copy_tests() {
    DEST="${OUTDIR}/$1" python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        shutil.copy(m["executable"], os.path.join(os.environ["DEST"], m["target"]["name"]))
        print("gpu-build: test binary", os.path.basename(os.environ["DEST"]) + "/" + m["target"]["name"])
'
}

# gcmx-cuda's GPU tests: the test binary as `cargo test -p gcmx-cuda --features cuda --test gpu` builds it.
cargo test --release -p gcmx-cuda --features cuda --test gpu --no-run --message-format=json 2>/dev/null |
    copy_tests bin
mv "${OUTDIR}/bin/gpu" "${OUTDIR}/bin/gcmx-cuda-gpu-tests"
if [[ ${TESTS} == 1 ]]; then
    cargo test --release -p gcmx --features cuda --no-run --message-format=json 2>/dev/null | copy_tests tests
    cargo test --release -p gcmx-cuda --features cuda --test faults --test fault_startup --no-run \
        --message-format=json 2>/dev/null | copy_tests faults
    # The fault tests inject through the stub libcuda, which gpu-run.sh puts in front of the driver.
    cp "${CUDA_LIBRARY_PATH}/libcuda.so.1" "${OUTDIR}/stub/libcuda.so.1"
fi
# The streaming adapters' benchmark, with the GPU backend available (`--backend cuda`).
cargo bench -p gcmx-stream --features cuda --bench adapters --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "adapters":
        shutil.copy(m["executable"], sys.argv[1])
' "${OUTDIR}/bin/gcmx-stream-adapters"
if [[ ${TESTS} == 1 ]]; then
    # Built in env -i (no nvcc, no CUDA variables), as a registry user would; runs here on the CPU first.
    scripts/consumer-check.sh --out "${OUTDIR}/bin"
fi
strip "${OUTDIR}"/bin/* "${OUTDIR}"/tests/* "${OUTDIR}"/faults/* 2>/dev/null || true
strip --strip-unneeded "${OUTDIR}"/stub/* 2>/dev/null || true

scripts/fetch-vectors.sh >/dev/null
tar -czf "${OUTDIR}/vectors.tgz" -C .vectors gcm
cp scripts/gpu-run.sh "${OUTDIR}/gpu-run.sh"

{
    echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (+ uncommitted changes in: '"$(git diff --name-only HEAD | tr '\n' ' ')"')')"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nvcc: $("${NVCC}" --version | grep release)"
    echo "kernels: ${GCMX_CUDA_DIR:-cuda/ (work tree)}"
    for f in "${OUTDIR}"/bin/* "${OUTDIR}"/tests/* "${OUTDIR}"/faults/* "${OUTDIR}"/stub/*; do
        [[ -f "$f" ]] || continue
        echo "== ${f#"${OUTDIR}"/} $(stat -c %s "$f") bytes"
        ldd "$f" | sed 's/^/   /'
    done
} > "${OUTDIR}/MANIFEST"

# The GPU machine needs only the driver: every dependency must be glibc, libgcc or libcuda.
bad=$(grep -E '^\s+\S+ =>' "${OUTDIR}/MANIFEST" | awk '{print $1}' | grep -vE '^(libcuda\.so\.1|libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|linux-vdso\.so\.1)$' | sort -u || true)
if [[ -n "${bad}" ]]; then
    echo "gpu-build: unexpected shared-library dependencies: ${bad}" >&2
    exit 1
fi
tar -cf - -C "${OUTDIR}" bin tests faults stub | xz -9 -T2 > "${OUTDIR}/bins.tar.xz"
rm -rf "${OUTDIR:?}/bin" "${OUTDIR}/tests" "${OUTDIR}/faults" "${OUTDIR}/stub"
du -sh "${OUTDIR}" | awk '{print "gpu-build: bundle " $2 " is " $1}'
grep -E '^(commit|built|nvcc|kernels|==)' "${OUTDIR}/MANIFEST"
