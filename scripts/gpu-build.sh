#!/usr/bin/env bash
# Build, HERE (no GPU needed), everything the CUDA device machine runs, into .device/ (git-ignored):
#   .device/bin/gcmx-cuda-test, .device/bin/gcmx-cuda-bench   (crates/gcmx-cuda/examples, release, --features cuda)
#   .device/tests/<name>                                        (gcmx's integration tests built with --features cuda:
#                                                                 nist_cavp, wycheproof, spec_vectors, ... ; they cover
#                                                                 Backend::Cuda when a device is present)
#   .device/vectors.tgz                                         (NIST CAVP files gcm/*.rsp, scripts/fetch-vectors.sh;
#                                                                 compressed: the call carries at most 64 MiB)
#   .device/MANIFEST                                            (commit, date, nvcc, sizes, ldd)
#   bin/ and tests/ are shipped packed as .device/bins.tar.xz (the device call carries at most 64 MiB).
# Then, on the device machine: scripts/gpu-run.sh (the `run` tool carries .device with carry=[".device"]).
#
# Options: --committed  build the kernels from the committed cuda/ (git archive HEAD) instead of the work tree.
#          --no-tests   skip gcmx's integration test binaries.
# The binaries link libcuda.so.1 dynamically (the driver's, found through LD_LIBRARY_PATH there) and
# otherwise only glibc/libgcc; this script checks that with ldd.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
COMMITTED=0
TESTS=1
for a in "$@"; do
    case "$a" in
        --committed) COMMITTED=1 ;;
        --no-tests) TESTS=0 ;;
        *) echo "gpu-build: unknown option $a" >&2; exit 2 ;;
    esac
done

eval "$(scripts/setup-cuda.sh)"
grep -qs '^/.device/$' .git/info/exclude || { mkdir -p .git/info; echo '/.device/' >> .git/info/exclude; }
rm -rf .device/bin .device/tests .device/vectors .device/vectors.tgz .device/bins.tar.xz .device/cuda-src
mkdir -p .device/bin .device/tests

if [[ ${COMMITTED} == 1 ]]; then
    mkdir -p .device/cuda-src
    git archive HEAD cuda | tar -x -C .device/cuda-src
    export GCMX_CUDA_DIR="${ROOT}/.device/cuda-src/cuda"
    echo "gpu-build: kernels from committed cuda/ ($(git rev-parse --short HEAD))"
fi

cargo build --release -p gcmx-cuda --examples
for b in gcmx-cuda-test gcmx-cuda-bench; do
    cp "target/release/examples/${b}" .device/bin/
done

if [[ ${TESTS} == 1 ]]; then
    cargo test --release -p gcmx --features cuda --no-run --message-format=json 2>/dev/null \
        | python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        dst = os.path.join(".device/tests", m["target"]["name"])
        shutil.copy(m["executable"], dst)
        print("gpu-build: test binary", m["target"]["name"])
'
fi
strip .device/bin/* .device/tests/* 2>/dev/null || true

scripts/fetch-vectors.sh >/dev/null
tar -czf .device/vectors.tgz -C .vectors gcm

{
    echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (+ uncommitted changes in: '"$(git diff --name-only HEAD | tr '\n' ' ')"')')"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nvcc: $("${NVCC}" --version | grep release)"
    echo "kernels: ${GCMX_CUDA_DIR:-cuda/ (work tree)}"
    for f in .device/bin/* .device/tests/*; do
        [[ -f "$f" ]] || continue
        echo "== $f $(stat -c %s "$f") bytes"
        ldd "$f" | sed 's/^/   /'
    done
} > .device/MANIFEST

# The device machine provides only the driver: every dependency must be glibc, libgcc or libcuda.
bad=$(grep -E '^\s+\S+ =>' .device/MANIFEST | awk '{print $1}' | grep -vE '^(libcuda\.so\.1|libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|linux-vdso\.so\.1)$' | sort -u || true)
if [[ -n "${bad}" ]]; then
    echo "gpu-build: unexpected shared-library dependencies: ${bad}" >&2
    exit 1
fi
# The call carries at most 64 MiB: every binary embeds the same fatbin, so one xz stream with a large
# dictionary shrinks ~100 MB of binaries to ~5 MB. gpu-run.sh unpacks it.
tar -cf - -C .device bin tests | xz -9 -T2 > .device/bins.tar.xz
rm -rf .device/bin .device/tests
du -sh .device | awk '{print "gpu-build: .device is " $1 " (the device call carries at most 64 MiB)"}'
cat .device/MANIFEST | grep -E '^(commit|built|nvcc|kernels|==)'
