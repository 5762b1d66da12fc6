#!/usr/bin/env bash
# Install the CUDA compiler toolchain that gcmx-cuda's build.rs uses, and build a link stub for libcuda.
#
# 1. nvcc 13.5 from PyPI (pinned below) into .toolchain/cuda with `pip install --target`. nvcc lands in
#    .toolchain/cuda/nvidia/cu13/bin. When done, .toolchain/cuda/.done is written. If the folder exists
#    without the marker, a concurrent run of this script (two builds started at once) may be installing:
#    we wait for the marker (up to GCMX_SETUP_WAIT_S seconds, default 900), then verify the install
#    ourselves and finish it if needed.
# 2. A stub libcuda.so (soname libcuda.so.1, plus the two symlinks) in .toolchain/cuda-stub/, built from
#    crates/gcmx-cuda/stub/libcuda_stub.c (with cuda/gcmx_abi.h). It exports every cu* entry point that gcmx-cuda
#    loads and that cust 0.3.2 (the tests' "other CUDA library") links; each returns CUDA_ERROR_NO_DEVICE (100).
#    gcmx-cuda opens it through LD_LIBRARY_PATH as it would the driver's, and reports "no CUDA device"
#    (CI, build machines). On a GPU machine the real driver's libcuda.so.1 is found first. gcmx-cuda's
#    fault-injection tests switch the stub into emulating a device and inject driver failures through it
#    (or, on a GPU machine with GCMX_STUB_DRIVER, put it in front of the real driver; see the stub's header).
#    Rebuilt whenever the stub's source or gcmx_abi.h is newer than the library.
# 3. Prints the environment to export.
#
# Idempotent: re-running after success only re-checks and re-prints the environment.
set -euo pipefail

CUDA_PIP_VERSION="13.5.37"
PACKAGES=(nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-crt nvidia-cuda-runtime nvidia-cuda-cuobjdump)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TC="${ROOT}/.toolchain/cuda"
STUB_DIR="${ROOT}/.toolchain/cuda-stub"
STUB_SRC="${ROOT}/crates/gcmx-cuda/stub/libcuda_stub.c"
MARKER="${TC}/.done"
NVCC="${TC}/nvidia/cu13/bin/nvcc"
WAIT_S="${GCMX_SETUP_WAIT_S:-900}"

PYTHON="$(command -v python3 || command -v python || true)"

# True when every pinned package's dist-info is present and nvcc reports the pinned release.
install_complete() {
    local p dist
    for p in "${PACKAGES[@]}"; do
        dist="${p//-/_}-${CUDA_PIP_VERSION}.dist-info"
        [[ -d "${TC}/${dist}" ]] || return 1
    done
    [[ -x "${NVCC}" ]] || return 1
    "${NVCC}" --version 2>/dev/null | grep -q "release ${CUDA_PIP_VERSION%.*}," || return 1
}

if [[ ! -f "${MARKER}" ]]; then
    if [[ -d "${TC}" ]] && ! install_complete; then
        echo "setup-cuda: ${TC} exists without .done: a concurrent install may be running; waiting up to ${WAIT_S}s" >&2
        waited=0
        while [[ ! -f "${MARKER}" && ${waited} -lt ${WAIT_S} ]] && ! install_complete; do
            sleep 5
            waited=$((waited + 5))
        done
    fi
    if [[ ! -f "${MARKER}" ]]; then
        if ! install_complete; then
            [[ -n "${PYTHON}" ]] || { echo "setup-cuda: python3 with pip is required" >&2; exit 1; }
            specs=()
            for p in "${PACKAGES[@]}"; do specs+=("${p}==${CUDA_PIP_VERSION}"); done
            echo "setup-cuda: pip install --target ${TC} ${specs[*]}" >&2
            "${PYTHON}" -m pip install --quiet --no-deps --upgrade --target "${TC}" "${specs[@]}"
        fi
        install_complete || { echo "setup-cuda: install incomplete after pip (check ${TC})" >&2; exit 1; }
        date -u +"%Y-%m-%dT%H:%M:%SZ nvcc ${CUDA_PIP_VERSION}" >"${MARKER}"
    fi
fi

# ---- stub libcuda -------------------------------------------------------------------------------------------
CC_BIN="${CC:-cc}"
STUB_ABI="${ROOT}/cuda/gcmx_abi.h"
if [[ ! -f "${STUB_DIR}/libcuda.so.1" || "${STUB_SRC}" -nt "${STUB_DIR}/libcuda.so.1" \
      || "${STUB_ABI}" -nt "${STUB_DIR}/libcuda.so.1" ]]; then
    mkdir -p "${STUB_DIR}"
    "${CC_BIN}" -shared -fPIC -O2 -Wall -Wextra -Werror -pthread -I "${ROOT}/cuda" -Wl,-soname,libcuda.so.1 \
        -o "${STUB_DIR}/libcuda.so.1.tmp" "${STUB_SRC}" -ldl
    mv -f "${STUB_DIR}/libcuda.so.1.tmp" "${STUB_DIR}/libcuda.so.1"
fi
ln -sfn libcuda.so.1 "${STUB_DIR}/libcuda.so"
# cust's build helper (find_cuda_helper 0.2) looks for <CUDA_LIBRARY_PATH>/lib64: make that the same folder.
ln -sfn . "${STUB_DIR}/lib64"

echo "setup-cuda: ok: $("${NVCC}" --version | grep release)" >&2
cat <<EOF
# gcmx CUDA build environment (eval "\$(scripts/setup-cuda.sh)")
export NVCC="${NVCC}"
export CUDA_LIBRARY_PATH="${STUB_DIR}"
export LD_LIBRARY_PATH="\${LD_LIBRARY_PATH:+\${LD_LIBRARY_PATH}:}${STUB_DIR}"
EOF
