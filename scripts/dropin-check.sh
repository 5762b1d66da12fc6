#!/usr/bin/env bash
# gcmx as a drop-in for aes-gcm 0.11: real users of aes-gcm, with only their dependency line
# changed to `aes-gcm = { package = "gcmx", path = <this repo>, <their own features> }`, run their
# own test suites against gcmx.
#
#   scripts/dropin-check.sh
#
# - aes-gcm 0.11.1's own tests (tests/*.rs, unchanged) in a crate whose `aes-gcm` is gcmx;
# - xaes-256-gcm 0.1.0 (its tests read aes-gcm's test helpers, laid out as in its repository);
# - ssh-cipher 0.3.0 with every feature.
# The crates come from crates.io's download host, checked against the sha256 sums below (the
# ones crates.io's index publishes). Work happens in .dropin/ (git-ignored).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
W="${ROOT}/.dropin"
mkdir -p "${W}"
export CARGO_TARGET_DIR="${W}/target"

fetch() { # name version sha256 -> unpacked into $W/src/name-version
    local name=$1 version=$2 sum=$3 file="${W}/${1}-${2}.crate"
    if ! echo "${sum}  ${file}" | sha256sum -c --quiet >/dev/null 2>&1; then
        curl -sSfL --retry 3 -o "${file}" "https://static.crates.io/crates/${name}/${name}-${version}.crate"
        echo "${sum}  ${file}" | sha256sum -c --quiet
    fi
    rm -rf "${W}/src/${name}-${version}"
    mkdir -p "${W}/src"
    tar -xzf "${file}" -C "${W}/src"
}

# Point a downloaded crate's `aes-gcm` dependency at gcmx: the one line a user changes.
use_gcmx() { # Cargo.toml
    python3 - "$1" "${ROOT}" <<'EOF'
import re, sys
path, root = sys.argv[1], sys.argv[2]
s = open(path).read()
s, n = re.subn(r'\[dependencies\.aes-gcm\]\nversion = "0\.11"\n',
               '[dependencies.aes-gcm]\npackage = "gcmx"\npath = "%s"\n' % root, s)
assert n == 1, "no aes-gcm 0.11 dependency in " + path
open(path, "w").write(s + "\n[workspace]\n")
EOF
}

# Run a crate's tests; print their result lines; fail (with the log) if they fail.
suite() { # dir [cargo test args]
    local dir=$1 log="${W}/$(basename "$1").log"
    shift
    if (cd "${dir}" && cargo test "$@") > "${log}" 2>&1; then
        grep -E "^test result" "${log}" | sed 's/^/   /'
    else
        tail -n 40 "${log}"
        echo "drop-in check FAILED in ${dir} (log: ${log})" >&2
        exit 1
    fi
}

echo "-- aes-gcm 0.11.1's own test suite against gcmx"
fetch aes-gcm 0.11.1 7f2b8006a0c83f52b62ba44a97b58bf76fe2f70a329e588f67f89691d93d498f
S="${W}/suite"
rm -rf "${S}" && mkdir -p "${S}/src" && touch "${S}/src/lib.rs"
cp -r "${W}/src/aes-gcm-0.11.1/tests" "${S}/"
cat > "${S}/Cargo.toml" <<EOF
[package]
name = "aes-gcm-suite"
version = "0.0.0"
edition = "2024"
publish = false

# aes-gcm's own dev-dependencies, and aes-gcm itself replaced by gcmx.
[dev-dependencies]
aes-gcm = { package = "gcmx", path = "${ROOT}" }
aead = { version = "0.6", features = ["alloc", "dev"], default-features = false }
aes = "0.9"
hex-literal = "1"

# aes-gcm's default features, which its tests check with cfg(feature = ...).
[features]
default = ["aes", "alloc", "getrandom"]
aes = ["aes-gcm/aes"]
alloc = ["aes-gcm/alloc"]
getrandom = ["aes-gcm/getrandom"]

[workspace]
EOF
suite "${S}"

echo "-- xaes-256-gcm 0.1.0 against gcmx"
fetch xaes-256-gcm 0.1.0 bc0e35bc669c7ce781caf52f51a1e672237825014c7a8cbb1292e194800d97fe
M="${W}/mono"
rm -rf "${M}" && mkdir -p "${M}/aes-gcm"
cp -r "${W}/src/aes-gcm-0.11.1/tests" "${M}/aes-gcm/"
cp -r "${W}/src/xaes-256-gcm-0.1.0" "${M}/xaes-256-gcm"
use_gcmx "${M}/xaes-256-gcm/Cargo.toml"
suite "${M}/xaes-256-gcm" --all-features

echo "-- ssh-cipher 0.3.0 against gcmx"
fetch ssh-cipher 0.3.0 d801accda99469cde6d73da741422610fdf6508a72d9a69d1b55cb241c720597
use_gcmx "${W}/src/ssh-cipher-0.3.0/Cargo.toml"
suite "${W}/src/ssh-cipher-0.3.0" --all-features

echo "drop-in check: all three suites passed against gcmx"
