#!/usr/bin/env bash
# Build, HERE, the CPU benchmark and gcmx-x86's equivalence and constant-time tests for another x86-64
# machine (e.g. the CUDA device host, to measure all its cores): DIR/{aes_gcm, x86_equivalence,
# x86_constant_time, x86_speed}, stripped, where DIR is the first argument (default .device/cpu, the
# bundle that scripts/gpu-build.sh makes). Run them there with: scripts/gpu-run.sh cpu (or cpu-interleaved).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
OUT="${1:-.device/cpu}"
mkdir -p "${OUT}"
exe_of() { sed -n 's/.*Executable .*(\(target\/[^)]*\)).*/\1/p' | tail -1; }
cp "$(cargo bench --bench aes_gcm --no-run 2>&1 | tee /dev/stderr | exe_of)" "${OUT}"/aes_gcm
cp "$(cargo test --release -p gcmx-x86 --test equivalence --no-run 2>&1 | tee /dev/stderr | exe_of)" "${OUT}"/x86_equivalence
cp "$(cargo test --release -p gcmx-x86 --test constant_time --no-run 2>&1 | tee /dev/stderr | exe_of)" "${OUT}"/x86_constant_time
cargo build --release -p gcmx-x86 --example speed
cp target/release/examples/speed "${OUT}"/x86_speed
strip "${OUT}"/*
ls -la "${OUT}"
