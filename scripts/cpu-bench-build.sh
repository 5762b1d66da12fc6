#!/usr/bin/env bash
# Build, HERE, the CPU benchmark and gcmx-x86's equivalence and constant-time tests for another x86-64
# machine (e.g. the CUDA device host, to measure all its cores):
# .device/cpu/{aes_gcm,x86_equivalence,x86_constant_time,x86_speed}, stripped.
# Run them there with: scripts/gpu-run.sh cpu
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
mkdir -p .device/cpu
exe_of() { sed -n 's/.*Executable .*(\(target\/[^)]*\)).*/\1/p' | tail -1; }
cp "$(cargo bench --bench aes_gcm --no-run 2>&1 | tee /dev/stderr | exe_of)" .device/cpu/aes_gcm
cp "$(cargo test --release -p gcmx-x86 --test equivalence --no-run 2>&1 | tee /dev/stderr | exe_of)" .device/cpu/x86_equivalence
cp "$(cargo test --release -p gcmx-x86 --test constant_time --no-run 2>&1 | tee /dev/stderr | exe_of)" .device/cpu/x86_constant_time
cargo build --release -p gcmx-x86 --example speed
cp target/release/examples/speed .device/cpu/x86_speed
strip .device/cpu/*
ls -la .device/cpu
