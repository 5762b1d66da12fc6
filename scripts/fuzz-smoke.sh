#!/usr/bin/env bash
# Fuzz smoke test: builds the cargo-fuzz targets in fuzz/ and runs each for a short, fixed
# time (FUZZ_SMOKE_SECONDS, default 30) from its seeds, in a scratch corpus (the repository
# is left as it was). Fails on a crash, a leak or a timeout of one input. Needs a nightly
# toolchain and cargo-fuzz; without them it prints "fuzz smoke skipped: <why>" and exits 0.
#
#   scripts/fuzz-smoke.sh                  # every target
#   scripts/fuzz-smoke.sh cli_key_proto    # the named targets
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECS="${FUZZ_SMOKE_SECONDS:-30}"

skip() {
    echo "fuzz smoke skipped: $*"
    exit 0
}
command -v cargo >/dev/null 2>&1 || skip "cargo is not installed"
cargo +nightly --version >/dev/null 2>&1 ||
    skip "no nightly Rust toolchain (rustup toolchain install nightly)"
cargo +nightly fuzz --version >/dev/null 2>&1 ||
    skip "cargo-fuzz is not installed (cargo install cargo-fuzz)"

cd "${ROOT}/fuzz"
if [[ $# -gt 0 ]]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
echo "== fuzz smoke: building ${#targets[@]} targets (nightly, sanitizer build)"
cargo +nightly fuzz build
scratch="$(mktemp -d)"
trap 'rm -rf "${scratch}"' EXIT
for t in "${targets[@]}"; do
    mkdir -p "${scratch}/${t}"
    seeds=()
    [[ -d "seeds/${t}" ]] && seeds=("seeds/${t}")
    echo "== fuzz smoke: ${t} for ${SECS} s"
    rc=0
    cargo +nightly fuzz run "${t}" "${scratch}/${t}" "${seeds[@]}" -- \
        -max_total_time="${SECS}" -timeout=10 -print_final_stats=1 >"${scratch}/${t}.log" 2>&1 ||
        rc=$?
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb|SUMMARY)|panicked|ERROR|crash-|leak-|timeout-' \
        "${scratch}/${t}.log" || true
    if [[ "${rc}" != 0 ]]; then
        tail -n 40 "${scratch}/${t}.log"
        echo "fuzz smoke: ${t} FAILED (exit ${rc}); the input is in fuzz/artifacts/${t}/"
        exit 1
    fi
    echo "fuzz smoke: ${t} ok, corpus $(find "${scratch}/${t}" -type f | wc -l) inputs"
done
