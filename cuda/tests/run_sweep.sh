#!/usr/bin/env bash
# Launch-configuration sweep for the AES-bound kernels (see cuda/tests/sweep.cu).
#   cuda/tests/run_sweep.sh build [dir]   compile one sweep binary per configuration into dir (default
#                                        .device/sweep); x86-64, CUDA runtime linked statically: copy them to the GPU machine
#   cuda/tests/run_sweep.sh run [dir] [GiB] [reps]   run them all (on the GPU machine)
# A configuration is a name and -D overrides of the launch macros; edit CONFIGS to try others.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvcc="${NVCC:-$root/.toolchain/cuda/nvidia/cu13/bin/nvcc}"
arch="${GCMX_SWEEP_ARCH:-90}"
dir="${2:-$root/.device/sweep}"
CONFIGS=(
  "smem:"
)
case "${1:-}" in
  build)
    mkdir -p "$dir"
    for c in "${CONFIGS[@]}"; do
      name="${c%%:*}"; flags="${c#*:}"
      echo "building sweep-$name ($flags)"
      # shellcheck disable=SC2086
      "$nvcc" -O3 -std=c++17 -DGCMX_HAVE_CLMAD=1 $flags -gencode "arch=compute_$arch,code=sm_$arch" \
        -cudart static -Xcudafe --diag_suppress=177 -Xptxas -warn-spills -I "$root/cuda" \
        "$root/cuda/tests/sweep.cu" -o "$dir/sweep-$name" &
      # two at a time
      if (( $(jobs -r | wc -l) >= 2 )); then wait -n; fi
    done
    wait
    ;;
  run)
    for b in "$dir"/sweep-*; do
      echo "== $(basename "$b")"
      "$b" "${3:-4}" "${4:-7}" || echo "FAILED: $b"
    done
    ;;
  *) echo "usage: $0 build|run [dir] [GiB] [reps]"; exit 2 ;;
esac
