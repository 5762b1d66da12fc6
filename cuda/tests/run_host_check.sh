#!/usr/bin/env bash
# Builds and runs cuda/tests/ghash_host_check.cu on the host (no GPU): with g++ (AddressSanitizer and
# UBSan) always, and with nvcc as CUDA source when one is found (NVCC, or the PyPI toolchain under
# .toolchain/cuda). Writes AES-GCM vectors with Python `cryptography` (when importable) for the check to
# compare against. Usage: cuda/tests/run_host_check.sh [number of random vectors, default 200]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
nvec="${1:-200}"
vec_arg=()
if python3 -c 'import cryptography' 2>/dev/null; then
  python3 - "$tmp/vectors.txt" "$nvec" <<'PY'
import os, random, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
path, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(20261130)
def h(b): return b.hex() if b else "-"
sizes = [0, 1, 15, 16, 17, 31, 32, 33, 255, 256, 257, 1023, 1024, 4096, 16383, 16384, 16385, 65536, 262144 + 9]
with open(path, "w") as f:
    for i in range(n):
        klen = rng.choice([16, 24, 32])
        key = os.urandom(klen)
        ivlen = 12 if i % 4 else rng.choice([8, 13, 16, 60, 128])
        iv = os.urandom(ivlen)
        size = sizes[i] if i < len(sizes) else rng.choice([rng.randrange(0, 2048), rng.randrange(0, 70000)])
        pt = os.urandom(size)
        aad = os.urandom(rng.choice([0, 1, 13, 16, 20, 64, 200]))
        ct_tag = AESGCM(key).encrypt(iv, pt, aad)  # cryptography accepts 8..128-byte nonces
        ct, tag = ct_tag[:-16], ct_tag[-16:]
        f.write(" ".join([h(key), h(iv), h(aad), h(pt), h(ct), h(tag)]) + "\n")
PY
  vec_arg=("$tmp/vectors.txt")
  echo "wrote $nvec AES-GCM vectors with Python cryptography"
else
  echo "Python cryptography not importable: vector comparison skipped"
fi
echo "== g++ (ASan + UBSan)"
g++ -x c++ -std=c++17 -O2 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-sanitize-recover=all \
  -I "$root/cuda" "$root/cuda/tests/ghash_host_check.cu" -o "$tmp/check_gcc"
"$tmp/check_gcc" "${vec_arg[@]}"
nvcc="${NVCC:-}"
if [ -z "$nvcc" ] && [ -x "$root/.toolchain/cuda/nvidia/cu13/bin/nvcc" ]; then nvcc="$root/.toolchain/cuda/nvidia/cu13/bin/nvcc"; fi
if [ -z "$nvcc" ] && command -v nvcc >/dev/null; then nvcc="$(command -v nvcc)"; fi
if [ -n "$nvcc" ]; then
  echo "== $nvcc (host code of the CUDA translation unit)"
  "$nvcc" -x cu -std=c++17 -O2 -I "$root/cuda" "$root/cuda/tests/ghash_host_check.cu" -o "$tmp/check_nvcc"
  "$tmp/check_nvcc" "${vec_arg[@]}"
else
  echo "no nvcc found: nvcc build of the check skipped"
fi
