#!/usr/bin/env bash
# run_host_checks.sh - host-side checks of the bitsliced AES (cuda/aes_bs.cuh).
#  1. makes random AES-CTR keystream vectors with Python `cryptography` (AES-ECB of the
#     counter blocks prefix || be32(ctr_first + j*stride), j = 0..31): all key sizes,
#     strides 1, 32 and random, counters that wrap at 2^32;
#     and whole buffers (lengths 0 .. 40000, not multiples of 16, counters wrapping) for the
#     aes_ctr.cu kernel;
#  2. builds cuda/tests/aes_host_check.cu with nvcc (device code compiled for the host)
#     and runs it on those vectors;
#  3. builds cuda/aes_ctr.cu for sm_90 and prints the register / spill report;
#  4. when cuobjdump can disassemble (it needs nvdisasm: pip nvidia-cuda-nvdisasm, on PATH
#     or NVDISASM_PATH), counts the SASS ops of one gcmx_aes_ctr_x32 call (round loop body
#     x (nr - 2) + the rest) and prints ops per 16-byte block and the bound at
#     1.64e13 ALU ops/s (H200: 62.6 LOP3/clk/SM).  ALU = LOP3, PRMT, SHF, IADD3, ISETP, LEA,
#     SEL, VIADD...; FMA = IMAD (a separate pipe, runs alongside).
# Needs nvcc (NVCC, or .toolchain/cuda from scripts/setup-cuda.sh) and python3 with
# `cryptography`.  Usage: cuda/tests/run_host_checks.sh [number_of_random_cases]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
NVCC="${NVCC:-}"
if [ -z "$NVCC" ]; then
    for c in "$ROOT/.toolchain/cuda/nvidia/cu13/bin/nvcc" "$(command -v nvcc || true)"; do
        if [ -n "$c" ] && [ -x "$c" ]; then NVCC="$c"; break; fi
    done
fi
[ -n "$NVCC" ] || { echo "nvcc not found (set NVCC or run scripts/setup-cuda.sh)"; exit 2; }
CASES="${1:-300}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

python3 - "$CASES" > "$WORK/vectors.txt" <<'EOF'
import os, sys, struct
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
n = int(sys.argv[1])
rnd = lambda k: os.urandom(k)
def case(key, prefix, ctr, stride):
    blocks = b''.join(prefix + struct.pack('>I', (ctr + j * stride) & 0xFFFFFFFF) for j in range(32))
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    ks = enc.update(blocks) + enc.finalize()
    print(key.hex(), prefix.hex(), '%08x' % ctr, '%08x' % stride, ks.hex())
for i in range(n):
    klen = (16, 24, 32)[i % 3]
    kind = (i // 3) % 6
    r32 = int.from_bytes(rnd(4), 'big')
    if kind == 0:   stride, ctr = 32, r32
    elif kind == 1: stride, ctr = 1, r32
    elif kind == 2: stride, ctr = 32, (0xFFFFFFFF - (r32 % 1024)) & 0xFFFFFFFF   # wraps inside the 32 blocks
    elif kind == 3: stride, ctr = 1, (0xFFFFFFFF - (r32 % 32)) & 0xFFFFFFFF
    elif kind == 4: stride, ctr = int.from_bytes(rnd(4), 'big'), r32            # arbitrary stride
    else:           stride, ctr = 32, r32 & 0xFFFFFF00 | 0xE1                   # carries through bytes
    case(rnd(klen), rnd(12), ctr, stride)
# edge cases: all-zero and all-one keys, prefixes and counters
for klen in (16, 24, 32):
    case(bytes(klen), bytes(12), 0, 1)
    case(b'\xff' * klen, b'\xff' * 12, 0xFFFFFFFF, 32)
    case(b'\xff' * klen, b'\xff' * 12, 0xFFFFFFE0, 1)
# whole-buffer cases for the aes_ctr.cu kernel (emulated warp by warp on the host):
# data[i] = (131*i + 7) mod 256, out = data ^ AES-CTR keystream with GCM inc32 counters
# AES_K(J0[0..12] || be32(ctr0 + 1 + i)), ctr0 = be32(J0[12..16]).
def ctr_case(key, j0, nbytes):
    ctr0 = int.from_bytes(j0[12:], 'big')
    nblk = (nbytes + 15) // 16
    blocks = b''.join(j0[:12] + struct.pack('>I', (ctr0 + 1 + i) & 0xFFFFFFFF) for i in range(nblk))
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    ks = enc.update(blocks) + enc.finalize()
    data = bytes((131 * i + 7) & 0xFF for i in range(nbytes))
    out = bytes(a ^ b for a, b in zip(data, ks))
    print('C', key.hex(), j0.hex(), nbytes, out.hex() if nbytes else '-')
sizes = [0, 1, 15, 16, 17, 511, 16383, 16384, 16385, 40000, 33000 + 5]
for i, n in enumerate(sizes):
    j0 = rnd(12) + (rnd(4) if i % 3 else (0xFFFFFFFF - 700).to_bytes(4, 'big'))  # some wrap at 2^32
    ctr_case(rnd((16, 24, 32)[i % 3]), j0, n)
EOF
echo "vectors: $(grep -vc '^C ' "$WORK/vectors.txt") keystream cases, $(grep -c '^C ' "$WORK/vectors.txt") whole-buffer CTR cases from python cryptography"

"$NVCC" -O2 -std=c++17 -I "$ROOT/cuda" -o "$WORK/aes_host_check" "$ROOT/cuda/tests/aes_host_check.cu"
"$WORK/aes_host_check" "$WORK/vectors.txt"

if [ -f "$ROOT/cuda/aes_ctr.cu" ]; then
    echo "device build (sm_90) of cuda/aes_ctr.cu:"
    "$NVCC" -arch=sm_90 -cubin -Xptxas -v -o "$WORK/aes_ctr.cubin" "$ROOT/cuda/aes_ctr.cu" 2>&1 |
        grep -E "registers|spill|error" || true
fi

CUOBJDUMP="$(dirname "$NVCC")/cuobjdump"
if [ -x "$CUOBJDUMP" ]; then
    cat > "$WORK/opcount.cu" <<'EOF'
#include "aes_bs.cuh"
extern "C" __global__ void one_call(const GcmxAesKey key, uint32_t p0, uint32_t p1, uint32_t p2, uint32_t c,
                                    uint4* out) {
    uint4 ks[32];
    gcmx_aes_ctr_x32(key, p0, p1, p2, c + threadIdx.x, 32u, ks);
#pragma unroll
    for (int j = 0; j < 32; ++j) out[threadIdx.x * 32 + j] = ks[j];
}
EOF
    "$NVCC" -arch=sm_90 -cubin -I "$ROOT/cuda" -o "$WORK/opcount.cubin" "$WORK/opcount.cu"
    if "$CUOBJDUMP" --dump-sass "$WORK/opcount.cubin" > "$WORK/opcount.sass" 2>/dev/null; then
        python3 - "$WORK/opcount.sass" <<'EOF'
import re, sys
ins = []
for l in open(sys.argv[1]):
    m = re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)', l)
    if m:
        ins.append((int(m.group(1), 16), m.group(3).split('.')[0], l))
def target(l):
    return int(re.search(r'BRA (0x[0-9a-f]+)', l).group(1), 16)
loops = [(target(l), a) for a, op, l in ins if op == 'BRA' and target(l) < a]
t, e = max(loops, key=lambda x: x[1] - x[0])  # the round loop (rounds 2 .. nr-1)
ALU = {'LOP3', 'SHF', 'PRMT', 'IADD3', 'ISETP', 'LEA', 'SEL', 'VIADD', 'PLOP3', 'IABS', 'FLO', 'POPC', 'BMSK', 'SGXT'}
def count(inside):
    alu = sum(1 for a, op, l in ins if (t <= a <= e) == inside and op in ALU)
    fma = sum(1 for a, op, l in ins if (t <= a <= e) == inside and op == 'IMAD')
    return alu, fma
body, rest = count(True), count(False)
print('SASS sm_90, one gcmx_aes_ctr_x32 call (32 blocks): round body ALU %d FMA %d; rest ALU %d FMA %d'
      % (body + rest))
for name, nr in (('AES-128', 10), ('AES-192', 12), ('AES-256', 14)):
    alu = rest[0] + (nr - 2) * body[0]
    fma = rest[1] + (nr - 2) * body[1]
    print('  %s: %.1f ALU ops/block (+ %.1f FMA-pipe IMAD), bound %.0f GB/s at 1.64e13 ALU ops/s'
          % (name, alu / 32, fma / 32, 16 * 1.64e13 / (alu / 32) / 1e9))
EOF
    else
        echo "(cuobjdump found no nvdisasm: skipping the SASS op count)"
    fi
fi
