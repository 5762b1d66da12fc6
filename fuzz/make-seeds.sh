#!/usr/bin/env bash
# Writes the seed corpora in seeds/ from files made the way the interop tests make them:
# ciphertexts written by Google Tink (crates/gcmx-cli/tests/tink_helper.py) under keyset.json,
# the keysets themselves, and their keys' protobuf bytes. Needs a Python with `tink`
# ($GCMX_PYTHON, as for the interop tests; scripts/test.sh makes one in .toolchain/py).
#
#   GCMX_PYTHON=.toolchain/py/bin/python fuzz/make-seeds.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${GCMX_PYTHON:-python3}"
HELPER="${HERE}/../crates/gcmx-cli/tests/tink_helper.py"
KEYSET="${HERE}/keyset.json"
SEEDS="${HERE}/seeds"
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT

rm -rf "${SEEDS}"
mkdir -p "${SEEDS}/cli_tink_stream" "${SEEDS}/cli_keyset_json" "${SEEDS}/cli_key_proto"

# Tink ciphertexts with the target's associated data, "gcmx-fuzz"; the first byte of a seed
# is the target's window setting.
aad_hex="$(printf 'gcmx-fuzz' | od -An -tx1 | tr -d ' \n')"
i=0
for len in 0 1 23 24 25 60 200 777; do
    head -c "${len}" /dev/urandom > "${TMP}/plain"
    "${PY}" "${HELPER}" encrypt "${KEYSET}" "${aad_hex}" "${TMP}/plain" "${TMP}/ct"
    { printf "\\x0$((i % 8))"; cat "${TMP}/ct"; } > "${SEEDS}/cli_tink_stream/tink-${len}"
    i=$((i + 1))
done

# Ciphertexts of the keyset's other keys: one keyset per key, made primary.
"${PY}" - "${KEYSET}" "${TMP}" <<'PY'
import json, sys
keyset = json.load(open(sys.argv[1]))
for n, key in enumerate(keyset["key"]):
    one = {"primaryKeyId": key["keyId"], "key": [key]}
    with open(f"{sys.argv[2]}/key{n}.json", "w") as f:
        json.dump(one, f)
PY
for n in 1 2; do
    head -c 300 /dev/urandom > "${TMP}/plain"
    "${PY}" "${HELPER}" encrypt "${TMP}/key${n}.json" "${aad_hex}" "${TMP}/plain" "${TMP}/ct"
    { printf '\x03'; cat "${TMP}/ct"; } > "${SEEDS}/cli_tink_stream/tink-key${n}-300"
done

# Keysets: the fuzzing keyset, one-key keysets, and one written by Tink's keygen.
cp "${KEYSET}" "${SEEDS}/cli_keyset_json/three-keys.json"
cp "${TMP}/key0.json" "${SEEDS}/cli_keyset_json/one-key.json"
"${PY}" "${HELPER}" keygen 32 1048576 "${SEEDS}/cli_keyset_json/tink-keygen.json"

# Key protobufs: the base64 values of the keysets' keys.
"${PY}" - "${KEYSET}" "${SEEDS}/cli_key_proto" <<'PY'
import base64, json, sys
for n, key in enumerate(json.load(open(sys.argv[1]))["key"]):
    with open(f"{sys.argv[2]}/key{n}.bin", "wb") as f:
        f.write(base64.b64decode(key["keyData"]["value"]))
PY
echo "seeds written to ${SEEDS}: $(find "${SEEDS}" -type f | wc -l) files"
