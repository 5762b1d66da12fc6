#!/usr/bin/env bash
# Builds cuda/tests/gcmx_device_check.cu (the kernels of cuda/gcmx_all.cu + the host references of
# ghash_host_check.cu, CUDA runtime linked statically) for sm_90, and, with `run`, runs it.
#   cuda/tests/run_device_check.sh            build only: target/gcmx_device_check (x86-64, runs on any CUDA machine)
#   cuda/tests/run_device_check.sh run [GiB] [quick]   build if needed, then run (needs a GPU)
# On a CUDA machine: ./target/gcmx_device_check 4   (correctness checks, then 4 GiB benchmarks)
# Exit status 0 only when every check passed; "CUDA error ... no CUDA-capable device" means no GPU.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvcc="${NVCC:-$root/.toolchain/cuda/nvidia/cu13/bin/nvcc}"
arch="${GCMX_DEVICE_CHECK_ARCH:-90}"
out="$root/target/gcmx_device_check"
mkdir -p "$root/target"
clmad=()
ver="$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')"
read -r major minor <<<"$ver"
if [ "$major" -gt 13 ] || { [ "$major" -eq 13 ] && [ "$minor" -ge 3 ]; }; then clmad=(-DGCMX_HAVE_CLMAD=1); fi
if [ ! -x "$out" ] || [ -n "$(find "$root/cuda" -newer "$out" -name '*.cu*' -o -newer "$out" -name '*.h' | head -1)" ]; then
  echo "building $out (nvcc $major.$minor, sm_$arch, ${clmad[*]:-software GHASH only})"
  "$nvcc" -O3 -std=c++17 "${clmad[@]}" -gencode "arch=compute_$arch,code=sm_$arch" -cudart static \
    -Xcudafe --diag_suppress=177 -I "$root/cuda" "$root/cuda/tests/gcmx_device_check.cu" -o "$out"
fi
if [ "${1:-}" = run ]; then
  shift
  "$out" "$@"
fi
