#!/usr/bin/env bash
# gcmx's one test command: installs what the tests need (into git-ignored folders of the repo),
# then runs every test. A clean machine needs only Rust, Python 3 and pip.
#
#   scripts/test.sh
#
# 1. NIST CAVP GCM vectors from PyPI's cryptography-vectors (sha256-checked) -> .vectors/gcm
# 2. Python venv with Google Tink (interop tests of the CLI) -> .toolchain/py
# 3. nvcc 13.5 from PyPI + a stub libcuda.so.1 -> .toolchain/cuda, .toolchain/cuda-stub
#    (so the CUDA backend builds and its host-side tests run; without a GPU they report "no device")
# 4. cargo test of the whole workspace, then again with the `cuda` feature, then the CLI demo.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

echo "== vectors"
scripts/fetch-vectors.sh

echo "== python + tink"
PYDIR="${ROOT}/.toolchain/py"
if [[ ! -x "${PYDIR}/bin/python" ]] || ! "${PYDIR}/bin/python" -c 'import tink' 2>/dev/null; then
    python3 -m venv "${PYDIR}"
    "${PYDIR}/bin/python" -m pip install -q --disable-pip-version-check 'tink==1.16.1'
fi
export GCMX_PYTHON="${PYDIR}/bin/python"

echo "== cuda toolchain"
scripts/setup-cuda.sh >/dev/null
export NVCC="${ROOT}/.toolchain/cuda/nvidia/cu13/bin/nvcc"
export CUDA_LIBRARY_PATH="${ROOT}/.toolchain/cuda-stub"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH}:}${ROOT}/.toolchain/cuda-stub"

echo "== cargo test (CPU backends)"
cargo test --release --workspace

echo "== cargo test --features cuda (no GPU here: GPU tests report that they found no device)"
cargo test --release --workspace --features gcmx/cuda,gcmx-cli/cuda

echo "== gcmx demo"
cargo run --release -q -p gcmx-cli -- demo
