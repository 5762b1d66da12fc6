#!/usr/bin/env bash
# Build, HERE, gcmx's CPU benchmarks and gcmx-x86's equivalence and constant-time tests for another x86-64
# machine that has no Rust toolchain (e.g. the CUDA device host), stripped, into DIR (the first argument;
# default .device/cpu, beside the bundle that scripts/gpu-build.sh makes):
#   one_core          crates/gcmx-bench: gcmx beside haberdashery, BoringSSL, aws-lc-rs and ring on one
#                     pinned core (haberdashery's files are compiled in when shared/peers/haberdashery is
#                     beside the repository now; BoringSSL when cmake and libclang are here or apt-get can
#                     install them); `DIR/one_core --help`
#   aes_gcm           the criterion benchmark (benches/aes_gcm.rs)
#   x86_equivalence, x86_constant_time, x86_speed   gcmx-x86's tests and its speed example
#   MANIFEST          commit, date, and what one_core holds
# Options (after DIR): --one-core   build one_core only.
# Run them there with scripts/gpu-run.sh cpu (all) or cpu-one-core, or DIR/one_core directly.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
OUT=".device/cpu"
ALL=1
for a in "$@"; do
    case "$a" in
        --one-core) ALL=0 ;;
        -*) echo "cpu-bench-build: unknown option $a" >&2; exit 2 ;;
        *) OUT="$a" ;;
    esac
done
mkdir -p "${OUT}"
exe_of() { sed -n 's/.*Executable .*(\(target\/[^)]*\)).*/\1/p' | tail -1; }

# BoringSSL (boring-sys) builds with CMake and makes its bindings with libclang.
have_boring_tools() {
    command -v cmake >/dev/null && ldconfig -p | grep -qE 'libclang(-[0-9.]+)?\.so'
}
if ! have_boring_tools && command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
    apt-get install -y -q cmake libclang-dev >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && apt-get install -y -q cmake libclang-dev >/dev/null; } || true
fi
FEATURES=()
if have_boring_tools; then
    FEATURES=(--features boringssl)
else
    echo "cpu-bench-build: one_core without BoringSSL: cmake or libclang missing" >&2
fi
cp "$(cargo bench -p gcmx-bench --bench one_core "${FEATURES[@]}" --no-run 2>&1 | tee /dev/stderr | exe_of)" "${OUT}"/one_core
if [[ ${ALL} == 1 ]]; then
    cp "$(cargo bench --bench aes_gcm --no-run 2>&1 | tee /dev/stderr | exe_of)" "${OUT}"/aes_gcm
    cp "$(cargo test --release -p gcmx-x86 --test equivalence --no-run 2>&1 | tee /dev/stderr | exe_of)" "${OUT}"/x86_equivalence
    cp "$(cargo test --release -p gcmx-x86 --test constant_time --no-run 2>&1 | tee /dev/stderr | exe_of)" "${OUT}"/x86_constant_time
    cargo build --release -p gcmx-x86 --example speed
    cp target/release/examples/speed "${OUT}"/x86_speed
fi
strip "${OUT}"/one_core "${OUT}"/aes_gcm "${OUT}"/x86_* 2>/dev/null || strip "${OUT}"/one_core
{
    echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' + uncommitted changes')"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(rustc --version)"
    "${OUT}"/one_core --about
    echo "needs: $(objdump -T "${OUT}"/one_core | grep -o 'GLIBC_[0-9.]*' | sort -V -u | tail -1); links $(ldd "${OUT}"/one_core | awk '{print $1}' | tr '\n' ' ')"
} > "${OUT}"/MANIFEST
cat "${OUT}"/MANIFEST
ls -la "${OUT}"
