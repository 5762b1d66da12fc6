#!/usr/bin/env bash
# gcmx on aarch64, from an x86-64 Debian machine: Debian's Rust (rustc-web, with its arm64
# standard library) cross-compiles, qemu-user runs the result. Installs what it needs with apt
# (as root, or through sudo).
#
#   scripts/aarch64.sh        clippy for aarch64, then the aarch64 checks (scripts/test.sh runs
#                             this; so does CI)
#   scripts/aarch64.sh mca    the modelled speed of the main loops (llvm-mca-22) beside aws-lc's
#                             and the generic path's: the table of benches/results.md
#
# The checks are plain single-threaded programs (threads do not start under qemu-user on these
# machines, so cargo's test harness cannot run there), each under a time limit so that a hang
# fails the run:
#   crates/gcmx-aarch64/tests/kernels.rs      every StitchedKey entry point against the aes, ctr
#                                             and ghash crates (both variants where the core has
#                                             SHA3: the one without EOR3 forced)
#   crates/gcmx-aarch64/tests/conformance.rs  gcmx end to end on one thread (Backend::Cpu, the
#                                             typed API, the forced generic path): NIST CAVP,
#                                             Wycheproof, differential against aes-gcm, tampering
#                                             properties; again with gcmx/hazmat (4- and 8-byte
#                                             tags: every NIST vector reaches the kernels)
#   crates/gcmx-core/tests/serial_no_pool.rs  no serial call starts a thread pool (a refusal
#                                             included: here it would hang)
#   crates/gcmx-aarch64/tests/constant_time.rs  constant time of the compiled kernels: each entry
#                                             point with six sets of secrets, every run's trace of
#                                             instruction and memory addresses compared by a qemu
#                                             plugin (tests/ct/trace.c, built here with `cc`)
# on emulated cores: `-cpu max` (AES, PMULL, SHA3: the EOR3 kernels), `-cpu neoverse-n1` and
# `-cpu cortex-a57` (AES and PMULL, no SHA3). Each program is told which kernels the core must
# get (GCMX_EXPECT_KERNEL), so a dispatch that fell back to the generic path fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
MODE="${1:-test}"
case "${MODE}" in
    test | mca) ;;
    *) echo "aarch64.sh: unknown mode ${MODE} (see the top of this script)" >&2; exit 2 ;;
esac

TARGET=aarch64-unknown-linux-gnu
CARGO=/usr/bin/cargo
QEMU=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
LIMIT=1800 # seconds a program may run under emulation

as_root() {
    if [[ $(id -u) == 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "aarch64.sh: installing needs root (or sudo): $*" >&2
        exit 1
    fi
}

# The workspace's rust-version, and whether /usr/bin/rustc is at least that.
MSRV=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
rustc_new_enough() {
    [[ -x /usr/bin/rustc ]] || return 1
    local have
    have=$(/usr/bin/rustc --version | awk '{print $2}')
    [[ "$(printf '%s\n%s\n' "${MSRV}.0" "${have}" | sort -V | head -n 1)" == "${MSRV}.0" ]]
}

toolchain_ready() {
    rustc_new_enough && [[ -x "${CARGO}" ]] && [[ -x /usr/bin/cargo-clippy ]] &&
        [[ -d /usr/lib/rustlib/${TARGET}/lib ]] &&
        command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 &&
        command -v qemu-aarch64 >/dev/null 2>&1 &&
        [[ -d /usr/aarch64-linux-gnu/lib ]]
}

apt_install() {
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends "$@" >/dev/null
}

if ! toolchain_ready; then
    echo "installing the aarch64 cross toolchain (Debian rustc-web + arm64 std and clippy, gcc-aarch64-linux-gnu, qemu-user)"
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "aarch64.sh: needs a Debian-family system (apt-get)" >&2
        exit 1
    fi
    as_root dpkg --add-architecture arm64
    as_root apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt_install rustc-web cargo-web rust-web-clippy libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu \
        libc6-dev-arm64-cross qemu-user
    if ! toolchain_ready; then
        echo "aarch64.sh: after installing, /usr/bin/rustc is $(/usr/bin/rustc --version 2>&1) (need ${MSRV} or later with the ${TARGET} standard library)" >&2
        exit 1
    fi
fi
echo "$(/usr/bin/rustc --version) for ${TARGET}; $(qemu-aarch64 --version | head -n 1)"

# Debian's compiler for every crate of these builds; a target folder of their own.
export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc

# The test programs of one build, as "name path" lines (cargo's JSON messages).
executables() {
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["target"]["name"], m["executable"])
'
}

build() { # cargo arguments: the package, its test programs, features
    "${CARGO}" test --release --target "${TARGET}" --no-run --message-format=json-render-diagnostics \
        "$@" | executables
}

run() { # cpu model, expected kernels, name, program
    local model=$1 expect=$2 name=$3 program=$4
    echo
    echo "-- ${name} on qemu-aarch64 -cpu ${model} (expects kernels: ${expect})"
    local t0=${SECONDS} rc=0
    GCMX_EXPECT_KERNEL="${expect}" timeout "${LIMIT}" "${QEMU[@]}" -cpu "${model}" "${program}" || rc=$?
    if [[ ${rc} != 0 ]]; then
        [[ ${rc} == 124 ]] && echo "aarch64.sh: ${name} on ${model} did not finish in ${LIMIT} s" >&2
        echo "aarch64.sh: ${name} on ${model} failed (exit ${rc})" >&2
        exit 1
    fi
    echo "   (${name} on ${model}: $(( SECONDS - t0 )) s)"
}

if [[ "${MODE}" == test ]]; then
    export CARGO_TARGET_DIR="${ROOT}/target/aarch64"
    # NIST's vectors (fetched and checked once; a no-op when present), required.
    scripts/fetch-vectors.sh | tail -n 1
    export GCMX_REQUIRE_VECTORS=1

    # The kernels compile only for aarch64: the x86-64 lint phase never sees them.
    echo "clippy -D warnings on gcmx-aarch64 and gcmx-core for ${TARGET}"
    PATH="/usr/bin:${PATH}" "${CARGO}" clippy -q --target "${TARGET}" --all-targets \
        -p gcmx-aarch64 -p gcmx-core -- -D warnings

    echo "building the aarch64 test programs (default features, then gcmx/hazmat)"
    BUILT=$(build -p gcmx-aarch64 --test kernels --test conformance --test constant_time)
    BUILT+=$'\n'$(build -p gcmx-core --test serial_no_pool)
    mapfile -t PLAIN <<<"${BUILT}"
    BUILT=$(build -p gcmx-aarch64 --test conformance --features gcmx/hazmat)
    mapfile -t HAZMAT <<<"${BUILT}"
    prog() { # list name
        local -n list=$1
        local line
        for line in "${list[@]}"; do
            [[ "${line%% *}" == "$2" ]] && { echo "${line#* }"; return; }
        done
        echo "aarch64.sh: no test program $2 was built" >&2
        exit 1
    }
    KERNELS=$(prog PLAIN kernels)
    CONFORMANCE=$(prog PLAIN conformance)
    CONFORMANCE_HAZMAT=$(prog HAZMAT conformance)
    NO_POOL=$(prog PLAIN serial_no_pool)
    CONSTANT_TIME=$(prog PLAIN constant_time)
    PLUGIN="${CARGO_TARGET_DIR}/ct-trace.so"
    cc -shared -fPIC -O2 -o "${PLUGIN}" crates/gcmx-aarch64/tests/ct/trace.c

    constant_time() { # cpu model, expected kernels
        local model=$1 expect=$2 log says
        log=$(mktemp)
        echo
        echo "-- constant_time on qemu-aarch64 -cpu ${model} with the ct-trace plugin (expects kernels: ${expect})"
        says=$(GCMX_EXPECT_KERNEL="${expect}" timeout "${LIMIT}" "${QEMU[@]}" -cpu "${model}" \
            -plugin "${PLUGIN}" -d plugin -D "${log}" "${CONSTANT_TIME}")
        echo "${says}"
        cat "${log}"
        # the plugin saw every case the program ran, and no failure
        local cases
        cases=$(sed -n 's/^constant_time: \([0-9]*\) constant-time cases and \([0-9]*\) leaky.*/\1 \2/p' <<<"${says}" |
            awk '{print $1 + $2}')
        if ! grep -q "^ct-trace: ${cases} cases, [0-9]* runs, 0 failures$" "${log}"; then
            echo "aarch64.sh: constant_time on ${model} failed" >&2
            rm -f "${log}"
            exit 1
        fi
        rm -f "${log}"
    }

    run max aes-pmull-eor3 serial_no_pool "${NO_POOL}"
    run max aes-pmull-eor3 kernels "${KERNELS}"
    constant_time max aes-pmull-eor3
    run max aes-pmull-eor3 conformance "${CONFORMANCE}"
    run max aes-pmull-eor3 "conformance (gcmx/hazmat)" "${CONFORMANCE_HAZMAT}"
    run neoverse-n1 aes-pmull serial_no_pool "${NO_POOL}"
    run neoverse-n1 aes-pmull kernels "${KERNELS}"
    constant_time neoverse-n1 aes-pmull
    run neoverse-n1 aes-pmull "conformance (gcmx/hazmat)" "${CONFORMANCE_HAZMAT}"
    run cortex-a57 aes-pmull kernels "${KERNELS}"
    echo
    echo "aarch64: every check passed under emulation"
    exit 0
fi

# ---- mca: the modelled speed of the main loops ----
if ! command -v llvm-mca-22 >/dev/null 2>&1; then
    echo "installing llvm-22 (llvm-mca-22)"
    as_root apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt_install llvm-22
fi
export CARGO_TARGET_DIR="${ROOT}/target/aarch64-mca"
# aws-lc's generated assembly ships in the aws-lc-sys crate (a dev-dependency through
# aws-lc-rs): fetched into cargo's registry.
"${CARGO}" fetch -q
# Every crate's assembly beside its library: gcmx-core's holds gcmx-aarch64's loops as gcmx
# instantiates them (seal and open) and the generic path's AES (the aes crate); polyval's its
# GHASH.
RUSTFLAGS="--emit=link,asm -C symbol-mangling-version=v0 -C debuginfo=0" \
    "${CARGO}" build -q --release --target "${TARGET}" -p gcmx-core
DEPS="${CARGO_TARGET_DIR}/${TARGET}/release/deps"
REGISTRY="${CARGO_HOME:-${HOME}/.cargo}/registry/src"
# Whole calls: one_call's seals and opens of 1 KiB under qemu with the executed code logged, on a
# core with SHA3 (the EOR3 kernels: modelled as V1 and V2) and one without (N1).
"${CARGO}" build -q --release --target "${TARGET}" -p gcmx-aarch64 --example one_call
TRACES="$(mktemp -d)"
trap 'rm -rf "${TRACES}"' EXIT
for model in max neoverse-n1; do
    "${QEMU[@]}" -cpu "${model}" -d in_asm,exec,nochain,strace -D "${TRACES}/${model}.log" \
        "${CARGO_TARGET_DIR}/${TARGET}/release/examples/one_call" >"${TRACES}/${model}.calls"
done
python3 - "${DEPS}" "${REGISTRY}" "${TRACES}" <<'PY'
import glob, os, re, subprocess, sys

deps, registry, traces = sys.argv[1], sys.argv[2], sys.argv[3]
CPUS = ["neoverse-n1", "neoverse-v1", "neoverse-v2"]
ITER = 300


def newest(pattern):
    files = glob.glob(pattern)
    if not files:
        sys.exit(f"mca: nothing matches {pattern}")
    return max(files, key=os.path.getmtime)


def instructions(lines):
    """The instructions of some assembly lines: no labels, directives, comments or branches."""
    out = []
    for l in lines:
        c = l.split("//")[0].strip()
        if not c or c.endswith(":") or c.startswith("."):
            continue
        op = c.split()[0]
        if op in ("b", "bl", "br", "blr", "ret", "cbz", "cbnz", "tbz", "tbnz") or op.startswith("b."):
            continue
        out.append(c)
    return out


def cycles(body, blocks):
    """llvm-mca's cycles per 16-byte block of a loop body of `blocks` blocks, per model."""
    res = []
    for cpu in CPUS:
        r = subprocess.run(
            ["llvm-mca-22", "-mtriple=aarch64", f"-mcpu={cpu}", "-mattr=+aes,+sha3", f"-iterations={ITER}"],
            input="\n".join(body) + "\n", capture_output=True, text=True, check=True)
        total = int(re.search(r"Total Cycles:\s+(\d+)", r.stdout).group(1))
        res.append(total / ITER / blocks)
    return res


rows = []

# gcmx: the marked loops of bulk.rs (label after the marker, to the branch back to it; a loop
# inlined into two callers is the same code twice, counted once).
core = open(newest(f"{deps}/gcmx_core-*.s")).read().split("\n")
seen = set()
for i, l in enumerate(core):
    m = re.search(r"// gcmx-aarch64 loop: (open|seal) eor3=(true|false) rounds=(\d+)", l)
    if not m or m.groups() in seen:
        continue
    seen.add(m.groups())
    j = next(k for k in range(i, len(core)) if re.match(r"^(\.L\w+):", core[k]))
    label = core[j].split(":")[0]
    end = next(k for k in range(j, len(core)) if re.match(rf"^\s+b\.ne\s+{re.escape(label)}\s*$", core[k]))
    body = instructions(core[j + 1:end])
    aes = {"10": "AES-128", "12": "AES-192", "14": "AES-256"}[m.group(3)]
    variant = "EOR3" if m.group(2) == "true" else "no EOR3"
    rows.append((aes, m.group(1), f"gcmx ({variant})", len(body), cycles(body, 8)))

# aws-lc: the unroll8 loops (EOR3, eight blocks), and the four-block loop it runs on cores
# without SHA3 (N1); `.inst` words carry their EOR3 in a comment.
fips = glob.glob(f"{registry}/*/aws-lc-sys-*/aws-lc/generated-src/linux-aarch64/crypto/fipsmodule")
if not fips:
    sys.exit("mca: aws-lc-sys's generated assembly not found (cargo fetch)")
fips = max(fips)
u8 = open(f"{fips}/aesv8-gcm-armv8-unroll8.S").read().split("\n")
for bits, aes in (("128", "AES-128"), ("192", "AES-192"), ("256", "AES-256")):
    for d, op in (("enc", "seal"), ("dec", "open")):
        start = u8.index(next(x for x in u8 if x.startswith(f".L{bits}_{d}_main_loop:")))
        body = []
        for x in u8[start + 1:]:
            if x.startswith(".L"):
                break
            x = re.sub(r"^\.inst\s+0x[0-9a-f]+\s*//\s*(eor3[^/]*).*", r"\1", x)
            body.append(x)
        body = instructions(body)
        rows.append((aes, op, "aws-lc unroll8 (EOR3)", len(body), cycles(body, 8)))
v8 = open(f"{fips}/aesv8-gcm-armv8.S").read().split("\n")
for bits, aes in ((128, "AES-128"), (192, "AES-192"), (256, "AES-256")):
    for d, op in (("enc", "seal"), ("dec", "open")):
        start = v8.index(next(x for x in v8 if x.startswith(f".L{d}_main_loop:")))
        body, skip = [], False
        for x in v8[start + 1:]:
            c = x.split("//")[0].strip()
            if x.startswith(f".L{d}_main_loop_continue:"):
                skip = False
                continue
            if x.startswith(".L"):
                break
            # the loop serves every key size: branches past the rounds a shorter key skips
            if c.startswith("b.lt") and "continue" in c and bits == 128:
                skip = True
            if c.startswith("b.eq") and "continue" in c and bits == 192:
                skip = True
            if not skip:
                body.append(x)
        body = instructions(body)
        rows.append((aes, op, "aws-lc 4-block (no EOR3)", len(body), cycles(body, 4)))

# The generic path: the aes crate's eight-block keystream loop (through ctr), then polyval's
# four-block GHASH: two passes, their cycles per block added (the XOR of the keystream and the
# calls between them not counted: a lower bound).
lines = core
labels = {}
func = None
aes_loops = {}
for i, l in enumerate(lines):
    m = re.match(r"^(_\S+):$", l)
    if m:
        func = m.group(1)
    m = re.match(r"^(\.L\w+):", l)
    if m:
        labels[m.group(1)] = (i, func)
    m = re.match(r"^\s+b(\.\w+)?\s+(\.L\w+)\s*$", l.split("//")[0])
    if m and m.group(2) in labels and labels[m.group(2)][0] < i:
        s, f = labels[m.group(2)]
        if "aarch64_aes" not in (f or "") or "gcmx_aarch64" in f:
            continue
        body = instructions(lines[s + 1:i + 1])
        n = sum(1 for x in body if x.split()[0] == "aese")
        if n in (80, 96, 112) and n not in aes_loops:
            aes_loops[n] = body
pv = open(newest(f"{deps}/polyval-*.s")).read().split("\n")
s = next(i for i, x in enumerate(pv) if re.match(r"^_R\S*proc_par_blocks:$", x) and "intrinsics_impl" in x)
e = next(i for i in range(s, len(pv)) if pv[i].strip() == "ret")
ghash4 = cycles(instructions(pv[s + 1:e]), 4)
for n, aes in ((80, "AES-128"), (96, "AES-192"), (112, "AES-256")):
    if n not in aes_loops:
        sys.exit(f"mca: the aes crate's {aes} loop not found")
    ctr = cycles(aes_loops[n], 8)
    both = [a + b for a, b in zip(ctr, ghash4)]
    rows.append((aes, "both", "generic path (aes + polyval)", len(aes_loops[n]), both))

# Whole calls: each marked call's executed instructions in order (translation blocks as qemu
# logged them, branches dropped), modelled as one straight run.
def calls(log):
    tbs, cur, rec, out = {}, None, None, []
    for l in open(log, errors="replace"):
        l = l.rstrip("\n")
        if l.startswith("IN:"):
            cur = []
            continue
        m = re.match(r"^0x([0-9a-f]+):\s+[0-9a-f]{8}\s+(.*)$", l)
        if m and cur is not None:
            if not cur:
                tbs[int(m.group(1), 16)] = cur
            cur.append(m.group(2).strip())
            continue
        cur = None
        m = re.match(r"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/", l)
        if m and rec is not None:
            rec.append(int(m.group(1), 16))
        elif "sched_yield(" in l:
            if rec is None:
                rec = []
            else:
                out.append(instructions(x for pc in rec for x in tbs[pc]))
                rec = None
    return out


def whole(body, cpu):
    r = subprocess.run(
        ["llvm-mca-22", "-mtriple=aarch64", f"-mcpu={cpu}", "-mattr=+aes,+sha3", "-iterations=1",
         "-skip-unsupported-instructions=parse-failure"],
        input="\n".join(body) + "\n", capture_output=True, text=True, check=True)
    return int(re.search(r"Total Cycles:\s+(\d+)", r.stdout).group(1))


loop = {(r[0], r[1], r[2]): r[4] for r in rows}
call_rows = []
for model, cpus, variant in (("max", ["neoverse-v1", "neoverse-v2"], "gcmx (EOR3)"),
                             ("neoverse-n1", ["neoverse-n1"], "gcmx (no EOR3)")):
    names = [x.strip() for x in open(f"{traces}/{model}.calls")]
    for name, body in zip(names, calls(f"{traces}/{model}.log")):
        aes, op, n = name.split()
        for cpu in cpus:
            c = whole(body, cpu)
            step = loop[(aes, op, variant)][CPUS.index(cpu)] * 8
            # 1 MiB: this call's cycles plus the steps a 1 MiB message has beyond its 8.
            mib = c + (65536 - 64) // 8 * step
            call_rows.append((aes, op, variant, cpu, len(body), c, c / int(n), mib / (1 << 20)))

order = {"gcmx (EOR3)": 0, "gcmx (no EOR3)": 1, "aws-lc unroll8 (EOR3)": 2,
         "aws-lc 4-block (no EOR3)": 3, "generic path (aes + polyval)": 4}
print("| key | direction | loop | instructions | " + " | ".join(CPUS) + " |")
print("|---|---|---|---:|" + "---:|" * len(CPUS))
for r in sorted(rows, key=lambda r: (r[0], r[1], order[r[2]])):
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | " + " | ".join(f"{c:.2f}" for c in r[4]) + " |")
print()
print("| key | call | kernels | model | instructions (1 KiB) | cycles (1 KiB) | c/B 1 KiB | c/B 1 MiB (est.) |")
print("|---|---|---|---|---:|---:|---:|---:|")
for r in sorted(call_rows, key=lambda r: (r[0], r[1], r[3])):
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]:.3f} | {r[7]:.3f} |")
PY
