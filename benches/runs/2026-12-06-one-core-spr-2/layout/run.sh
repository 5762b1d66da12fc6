#!/usr/bin/env bash
# AES-256 large seals: old (bcb8816) and new (bc5eb39) one_core under different heap layouts.
set -u
D=/tmp/gcmxc; mkdir -p $D; tar -xJf .device/pack2/oc.tar.xz -C $D
O="${OUT:-/tmp/out}"; mkdir -p "$O"
A="--aes 256 --sizes 16384,65536,1048576 --rounds 11"
for t in "" "glibc.malloc.mmap_threshold=268435456" "glibc.malloc.top_pad=12345" "glibc.malloc.mmap_threshold=268435456:glibc.malloc.top_pad=70000"; do
  for v in old new; do
    echo "== $v tunables='$t' $(date -u +%T)"
    GLIBC_TUNABLES="$t" timeout 60 $D/$v/one_core $A > "$O/oc-$v-$RANDOM.md" 2>/dev/null
    f=$(ls -t $O/oc-$v-*.md | head -1); grep -A7 'AES-256-GCM against the fastest' "$f" | tail -n 3 | cut -d'|' -f1-4,5-7
  done
done
