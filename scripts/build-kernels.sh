#!/usr/bin/env bash
# Build the GPU kernels that gcmx-cuda ships, from cuda/, with the pinned nvcc (scripts/setup-cuda.sh):
#
#   scripts/build-kernels.sh           rebuild crates/gcmx-cuda/kernels/gcmx.fatbin and its build record
#                                      (run it after any change under cuda/; build.rs refuses a stale one)
#   scripts/build-kernels.sh --check   rebuild into a temporary folder and require the same bytes as the
#                                      committed fatbin and record (CI: what ships is what the sources give)
#
# Both go through gcmx-cuda's build.rs with GCMX_CUDA_REBUILD=1, so the flags and the record are the
# ones build.rs checks. A build takes a few minutes (six SASS targets and PTX).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
CHECK=0
for a in "$@"; do
    case "$a" in
        --check) CHECK=1 ;;
        *) echo "build-kernels: unknown option $a (see the top of this script)" >&2; exit 2 ;;
    esac
done
eval "$(scripts/setup-cuda.sh)"
KERNELS=crates/gcmx-cuda/kernels
# A target folder of its own: the rebuilt kernels never mix with an ordinary build's.
export CARGO_TARGET_DIR="${ROOT}/target/kernels"
out=$(GCMX_CUDA_REBUILD=1 cargo build -q -p gcmx-cuda --features cuda --message-format=json |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "build-script-executed" and m["package_id"].find("gcmx-cuda") >= 0:
        print(m["out_dir"])
')
[[ -f "${out}/gcmx.fatbin" && -f "${out}/gcmx.fatbin.record" ]] || {
    echo "build-kernels: the build left no fatbin in ${out}" >&2
    exit 1
}
if [[ ${CHECK} == 1 ]]; then
    if cmp -s "${out}/gcmx.fatbin.record" "${KERNELS}/gcmx.fatbin.record" &&
        cmp -s "${out}/gcmx.fatbin" "${KERNELS}/gcmx.fatbin"; then
        echo "build-kernels: ${KERNELS}/gcmx.fatbin is what cuda/ gives ($(sha256sum < "${out}/gcmx.fatbin" | cut -c1-16)...)"
    else
        echo "build-kernels: ${KERNELS}/gcmx.fatbin is NOT what cuda/ gives; run scripts/build-kernels.sh" >&2
        diff "${out}/gcmx.fatbin.record" "${KERNELS}/gcmx.fatbin.record" >&2 || true
        exit 1
    fi
else
    mkdir -p "${KERNELS}"
    cp "${out}/gcmx.fatbin" "${out}/gcmx.fatbin.record" "${KERNELS}/"
    echo "build-kernels: wrote ${KERNELS}/gcmx.fatbin ($(stat -c %s "${KERNELS}/gcmx.fatbin") bytes) and its record"
fi
