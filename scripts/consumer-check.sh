#!/usr/bin/env bash
# gcmx as a registry user gets it: package every crate of the workspace, then build and run a project
# that depends on `gcmx = { version = "0.1", features = ["cuda"] }` (scripts/consumer) against those
# packages, in a clean environment: `env -i` with only HOME and PATH, no nvcc on PATH, no CUDA variables,
# no libcuda the loader can find, and no script of this repository run for it.
#
#   scripts/consumer-check.sh             package, build, run (expects the CPU fallback where there is no
#                                         driver; a GPU where there is one), and check the binary does
#                                         not link libcuda
#   scripts/consumer-check.sh --out DIR   also copy the consumer binary to DIR (to run it elsewhere:
#                                         `gcmx-consumer --require-gpu` on a machine with a driver)
#   scripts/consumer-check.sh --no-package   reuse the .crate files of an earlier run (target/consumer-check)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
OUT=""
PACKAGE=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) OUT="$2"; shift ;;
        --no-package) PACKAGE=0 ;;
        *) echo "consumer-check: unknown option $1 (see the top of this script)" >&2; exit 2 ;;
    esac
    shift
done

# `cargo package` builds each crate from its package alone (verification), with every crate of the
# workspace available to the others as if published; gcmx-cuda-testkit (`publish = false`: test support
# of gcmx-cuda, which reads files of the repository) and gcmx-bench (`publish = false`: the one-core
# benchmark against other libraries) are not among them.
# A target folder of its own, emptied first: cargo takes crates of a registry as immutable, so the
# compiled packages of an earlier run with the same version would stand in for the workspace's crates
# (and so would the sources it unpacked from that run's temporary registry, in CARGO_HOME).
PKG="target/consumer-check"
if [[ ${PACKAGE} == 1 ]]; then
    rm -rf "${PKG}"
    for d in "${CARGO_HOME:-${HOME}/.cargo}"/registry/src/-*/gcmx*-* "${CARGO_HOME:-${HOME}/.cargo}"/registry/cache/-*/gcmx*-*; do
        [[ -e "$d" ]] && rm -rf "$d"
    done
    cargo package --workspace --exclude gcmx-cuda-testkit --exclude gcmx-bench --allow-dirty --target-dir "${PKG}" 2>&1 |
        grep -E "^ *(Packaged|Verifying|Finished|error|warning: [^i])" || true
    [[ ${PIPESTATUS[0]} == 0 ]] || { echo "consumer-check: cargo package --workspace failed" >&2; exit 1; }
fi
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT
mkdir -p "${WORK}/crates" "${WORK}/app/src"
patch=""
for c in gcmx gcmx-core gcmx-x86 gcmx-aarch64 gcmx-cuda; do
    f="${PKG}/package/${c}-${VERSION}.crate"
    [[ -f "$f" ]] || { echo "consumer-check: $f is missing" >&2; exit 1; }
    tar -xzf "$f" -C "${WORK}/crates"
    patch+="${c} = { path = \"${WORK}/crates/${c}-${VERSION}\" }"$'\n'
done
cp scripts/consumer/Cargo.toml "${WORK}/app/Cargo.toml"
cp scripts/consumer/src/main.rs "${WORK}/app/src/main.rs"
printf '\n[patch.crates-io]\n%s\n[workspace]\n' "${patch}" >> "${WORK}/app/Cargo.toml"

# The clean environment: cargo and the system's tools, nothing of ours.
CARGO_BIN="$(dirname "$(command -v cargo)")"
CLEAN=(env -i "HOME=${HOME}" "PATH=${CARGO_BIN}:/usr/local/bin:/usr/bin:/bin")
if "${CLEAN[@]}" sh -c 'command -v nvcc' >/dev/null; then
    echo "consumer-check: nvcc is on the clean PATH; this check needs a machine without it" >&2
    exit 1
fi
"${CLEAN[@]}" cargo build --release -q --manifest-path "${WORK}/app/Cargo.toml"
BIN="${WORK}/app/target/release/gcmx-consumer"
if ldd "${BIN}" | grep -q libcuda; then
    echo "consumer-check: the binary links libcuda:" >&2
    ldd "${BIN}" >&2
    exit 1
fi
echo "consumer-check: built with features = [\"cuda\"] in env -i (no nvcc, no CUDA variables); links: $(ldd "${BIN}" | awk '{print $1}' | tr '\n' ' ')"
"${CLEAN[@]}" "${BIN}"
[[ -z "${OUT}" ]] || { mkdir -p "${OUT}"; cp "${BIN}" "${OUT}/"; echo "consumer-check: copied to ${OUT}/gcmx-consumer"; }
