//! Build script of gcmx-cuda.
//!
//! Without the `cuda` feature it does nothing but declare the crate's cfg: the crate then builds on any
//! machine (no nvcc, no libcuda) and every entry point answers `Error::BackendUnavailable`.
//!
//! With it, it compiles the CUDA kernels under `<workspace>/cuda/` into ONE fatbin that the crate
//! embeds with `include_bytes!`, and probes the ABI header's struct layouts for the host-side tests.
//!
//! * nvcc: `$NVCC`, else `$CUDA_PATH/bin/nvcc`, else `nvcc` on `PATH`, else the one `scripts/setup-cuda.sh`
//!   installs (`<workspace>/.toolchain/cuda/nvidia/cu13/bin/nvcc`). None at all: the build fails and says to
//!   run `scripts/setup-cuda.sh`.
//! * nvcc >= 13.3: `-DGCMX_HAVE_CLMAD=1` (the PTX `clmad` GHASH); older: the software carry-less multiply
//!   only, with a `cargo:warning`. Exposed to the crate as `cfg(gcmx_have_clmad)` and the env vars
//!   `GCMX_NVCC_VERSION`, `GCMX_GHASH_VARIANT`.
//! * Recipe: the one written at the top of `cuda/gcmx_abi.h` (one translation unit, `cuda/gcmx_all.cu`):
//!   SASS for sm_80, sm_86, sm_89, sm_90, sm_100, sm_120 plus PTX for compute_120.
//! * Layout probe: a tiny C program that includes `cuda/gcmx_abi.h` and prints sizes, offsets and
//!   constants; its output becomes `$OUT_DIR/abi_probe.rs`, which the unit tests compare with the Rust mirrors.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// SASS targets, then the PTX target for later GPUs (see cuda/gcmx_abi.h).
const SASS_ARCHS: [u32; 6] = [80, 86, 89, 90, 100, 120];
const PTX_ARCH: u32 = 120;
/// First nvcc release whose PTX assembler accepts `clmad`.
const CLMAD_MIN: (u32, u32) = (13, 3);

fn main() {
    println!("cargo::rustc-check-cfg=cfg(gcmx_have_clmad)");
    println!("cargo:rerun-if-changed=build.rs");
    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.join("../..");
    // GCMX_CUDA_DIR overrides where the kernels are read from (default: <workspace>/cuda).
    let cuda_dir = env::var_os("GCMX_CUDA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("cuda"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));

    println!("cargo:rerun-if-changed={}", cuda_dir.display());
    for v in [
        "NVCC",
        "CUDA_PATH",
        "GCMX_NVCC_FLAGS",
        "GCMX_CUDA_DIR",
        "CC",
    ] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    if cuda_dir.is_dir() {
        for entry in walk(&cuda_dir) {
            println!("cargo:rerun-if-changed={}", entry.display());
        }
    }

    let nvcc = match find_nvcc(&root) {
        Some(p) => p,
        None => fail(
            "no nvcc found (looked at $NVCC, $CUDA_PATH/bin/nvcc, PATH, and .toolchain/cuda/nvidia/cu13/bin/nvcc). \
             Run scripts/setup-cuda.sh from the workspace root (it installs nvcc 13.5 from PyPI) and build again.",
        ),
    };
    let (major, minor) = match nvcc_version(&nvcc) {
        Some(v) => v,
        None => fail(&format!(
            "could not read the release from `{} --version`",
            nvcc.display()
        )),
    };
    let have_clmad = (major, minor) >= CLMAD_MIN;
    if !have_clmad {
        println!(
            "cargo:warning=gcmx-cuda: nvcc {major}.{minor} < {}.{}: building the SOFTWARE carry-less GHASH variant only \
             (no clmad); run scripts/setup-cuda.sh for nvcc 13.5",
            CLMAD_MIN.0, CLMAD_MIN.1
        );
    } else {
        println!("cargo:rustc-cfg=gcmx_have_clmad");
    }
    println!("cargo:rustc-env=GCMX_NVCC_VERSION={major}.{minor}");
    println!(
        "cargo:rustc-env=GCMX_GHASH_VARIANT={}",
        if have_clmad { "clmad" } else { "soft" }
    );
    println!("cargo:rustc-env=GCMX_NVCC_PATH={}", nvcc.display());

    let fatbin = out_dir.join("gcmx.fatbin");
    compile_fatbin(&nvcc, &cuda_dir, &fatbin, have_clmad);
    println!("cargo:rustc-env=GCMX_FATBIN={}", fatbin.display());

    probe_layouts(&cuda_dir, &out_dir);
}

fn fail(msg: &str) -> ! {
    eprintln!("error: gcmx-cuda build: {msg}");
    println!("cargo:warning=gcmx-cuda build: {msg}");
    std::process::exit(1);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn find_nvcc(root: &Path) -> Option<PathBuf> {
    let works = |p: &Path| {
        p.is_file()
            && Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
    };
    if let Some(p) = env::var_os("NVCC").map(PathBuf::from)
        && works(&p)
    {
        return Some(p);
    }
    if let Some(cp) = env::var_os("CUDA_PATH") {
        let p = PathBuf::from(cp).join("bin/nvcc");
        if works(&p) {
            return Some(p);
        }
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in env::split_paths(&path) {
            let p = dir.join("nvcc");
            if works(&p) {
                return Some(p);
            }
        }
    }
    let p = root.join(".toolchain/cuda/nvidia/cu13/bin/nvcc");
    if works(&p) {
        return Some(p.canonicalize().unwrap_or(p));
    }
    None
}

/// Parse `release X.Y` from `nvcc --version`.
fn nvcc_version(nvcc: &Path) -> Option<(u32, u32)> {
    let out = Command::new(nvcc).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rest = &text[text.find("release ")? + "release ".len()..];
    let ver: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut it = ver.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

fn compile_fatbin(nvcc: &Path, cuda_dir: &Path, out: &Path, have_clmad: bool) {
    let all = cuda_dir.join("gcmx_all.cu");
    if !all.is_file() {
        fail(&format!(
            "{} is missing: the kernels' single translation unit (see the BUILD comment in cuda/gcmx_abi.h)",
            all.display()
        ));
    }
    let mut cmd = Command::new(nvcc);
    cmd.arg("-fatbin").arg("-O3").arg("-std=c++17");
    if have_clmad {
        cmd.arg("-DGCMX_HAVE_CLMAD=1");
    }
    for a in SASS_ARCHS {
        cmd.arg("-gencode")
            .arg(format!("arch=compute_{a},code=sm_{a}"));
    }
    cmd.arg("-gencode")
        .arg(format!("arch=compute_{PTX_ARCH},code=compute_{PTX_ARCH}"));
    if let Ok(extra) = env::var("GCMX_NVCC_FLAGS") {
        cmd.args(extra.split_whitespace());
    }
    cmd.arg("-I").arg(cuda_dir).arg("-o").arg(out).arg(&all);
    let output = cmd
        .output()
        .unwrap_or_else(|e| fail(&format!("could not run {}: {e}", nvcc.display())));
    if !output.status.success() {
        fail(&format!(
            "nvcc failed ({}):\n{:?}\n{}{}",
            output.status,
            cmd,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
}

/// Fields whose offsets the probe prints: (struct, field).
const OFFSETS: &[(&str, &str)] = &[
    ("GcmxU128", "lo"),
    ("GcmxU128", "hi"),
    ("GcmxAesKey", "rk"),
    ("GcmxAesKey", "nr"),
    ("GcmxGhashParams", "data"),
    ("GcmxGhashParams", "nbytes"),
    ("GcmxGhashParams", "powers"),
    ("GcmxGhashParams", "partials"),
    ("GcmxGcmCtr", "j0_prefix"),
    ("GcmxGcmCtr", "ctr_first"),
    ("GcmxGcmParams", "in"),
    ("GcmxGcmParams", "out"),
    ("GcmxGcmParams", "nbytes"),
    ("GcmxGcmParams", "powers"),
    ("GcmxGcmParams", "partials"),
    ("GcmxGcmParams", "key"),
    ("GcmxGcmParams", "ctr"),
    ("GcmxGcmParams", "nr"),
    ("GcmxGcmParams", "_pad0"),
    ("GcmxRawKey", "key"),
    ("GcmxRawKey", "len"),
    ("GcmxExpandParams", "raw"),
    ("GcmxExpandParams", "out"),
    ("GcmxExpandParams", "nkeys"),
    ("GcmxExpandParams", "_pad0"),
    ("GcmxKeyPowers", "q"),
    ("GcmxKeyPowers", "pow2"),
    ("GcmxKeyPowersParams", "keys"),
    ("GcmxKeyPowersParams", "key_powers"),
    ("GcmxKeyPowersParams", "nkeys"),
    ("GcmxKeyPowersParams", "_pad0"),
    ("GcmxDevMsg", "data_off"),
    ("GcmxDevMsg", "data_len"),
    ("GcmxDevMsg", "aad_off"),
    ("GcmxDevMsg", "aad_len"),
    ("GcmxDevMsg", "nonce_off"),
    ("GcmxDevMsg", "nonce_len"),
    ("GcmxDevMsg", "key"),
    ("GcmxDbParams", "msgs"),
    ("GcmxDbParams", "data"),
    ("GcmxDbParams", "data_len"),
    ("GcmxDbParams", "aad"),
    ("GcmxDbParams", "aad_len"),
    ("GcmxDbParams", "nonces"),
    ("GcmxDbParams", "nonces_len"),
    ("GcmxDbParams", "tags"),
    ("GcmxDbParams", "verdicts"),
    ("GcmxDbParams", "keys"),
    ("GcmxDbParams", "key_powers"),
    ("GcmxDbParams", "scratch"),
    ("GcmxDbParams", "nmsgs"),
    ("GcmxDbParams", "nkeys"),
    ("GcmxDbParams", "nr"),
    ("GcmxDbParams", "mode"),
    ("GcmxDbParams", "tag_len"),
    ("GcmxDbParams", "flags"),
    ("GcmxDbParams", "bar_base"),
    ("GcmxDbParams", "_pad0"),
    ("GcmxBwParams", "in"),
    ("GcmxBwParams", "out"),
    ("GcmxBwParams", "nbytes"),
];

/// Integer constants of the header that the Rust side mirrors.
const CONSTANTS: &[&str] = &[
    "GCMX_ABI_VERSION",
    "GCMX_WARP_SIZE",
    "GCMX_POW_THREAD_BASE",
    "GCMX_BLOCKS_PER_REDUCTION",
    "GCMX_GHASH_THREADS",
    "GCMX_GHASH_WARP_SPAN",
    "GCMX_GHASH_SPAN",
    "GCMX_GHASH_POW_COUNT",
    "GCMX_WARP_CHUNK",
    "GCMX_FUSED_THREADS",
    "GCMX_FUSED_WARP_SPAN",
    "GCMX_FUSED_SPAN",
    "GCMX_FUSED_POW_COUNT",
    "GCMX_KEY_POWERS_THREADS",
    "GCMX_DB_THREADS",
    "GCMX_DB_COLS",
    "GCMX_DB_BARRIERS",
    "GCMX_DB_UNIT_BLOCKS",
    "GCMX_DB_SEAL",
    "GCMX_DB_OPEN",
    "GCMX_DB_EXPECT",
    "GCMX_DB_J0_GIVEN",
    "GCMX_VERDICT_OK",
    "GCMX_VERDICT_REFUSED",
    "GCMX_VERDICT_INVALID",
    "GCMX_DB_SCR_BLK",
    "GCMX_EXPAND_THREADS",
    "GCMX_KEY_POW_LINEAR",
    "GCMX_KEY_POW_POW2",
    "GCMX_BW_THREADS",
    "GCMX_BW_COPY_SPAN",
    "GCMX_ABI_INFO_WORDS",
    "GCMX_Q0_HI",
    "GCMX_Q0_LO",
];

const STRUCTS: &[&str] = &[
    "GcmxU128",
    "GcmxAesKey",
    "GcmxGhashParams",
    "GcmxGcmCtr",
    "GcmxGcmParams",
    "GcmxRawKey",
    "GcmxExpandParams",
    "GcmxKeyPowers",
    "GcmxKeyPowersParams",
    "GcmxDevMsg",
    "GcmxDbMsg",
    "GcmxDbParams",
    "GcmxBwParams",
];

/// Compile and run a C program that prints the header's layouts; write them as Rust constants.
/// Also prints the header's own `gcmx_strided_pow_exponent`, `gcmx_db_units` and `gcmx_db_scratch_bytes`
/// results for a few inputs, so the Rust mirrors of those functions are tested against the C originals.
fn probe_layouts(cuda_dir: &Path, out_dir: &Path) {
    let mut c = String::new();
    c.push_str(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"gcmx_abi.h\"\nint main(void) {\n",
    );
    for s in STRUCTS {
        let _ = writeln!(
            c,
            "  printf(\"size {s} %zu %zu\\n\", sizeof({s}), _Alignof({s}));"
        );
    }
    for (s, f) in OFFSETS {
        let _ = writeln!(
            c,
            "  printf(\"offset {s} {f} %zu\\n\", offsetof({s}, {f}));"
        );
    }
    for k in CONSTANTS {
        let _ = writeln!(
            c,
            "  printf(\"const {k} %llu\\n\", (unsigned long long)({k}));"
        );
    }
    // strided exponents for both layouts
    c.push_str(
        "  for (unsigned i = 0; i < GCMX_GHASH_POW_COUNT; i++) printf(\"ghexp %u %llu\\n\", i, \
         (unsigned long long)gcmx_strided_pow_exponent(GCMX_GHASH_THREADS, GCMX_GHASH_WARP_SPAN, i));\n",
    );
    c.push_str(
        "  for (unsigned i = 0; i < GCMX_FUSED_POW_COUNT; i++) printf(\"fuexp %u %llu\\n\", i, \
         (unsigned long long)gcmx_strided_pow_exponent(GCMX_FUSED_THREADS, GCMX_FUSED_WARP_SPAN, i));\n",
    );
    // device-batch unit geometry and scratch sizes over fixed inputs
    c.push_str(
        "  { static const unsigned long long lens[] = {0, 1, 15, 16, 17, 64, 511, 512, 513, 1000, 1024, 1025, \
         16383, 16384, 16385, 33000, 1<<20, (1ull<<36) - 32}; unsigned i;\n\
         for (i = 0; i < sizeof lens / sizeof lens[0]; i++) { uint32_t g0, fr; uint32_t k = gcmx_db_units(lens[i], &g0, &fr);\n\
         printf(\"units %llu %u %u %u\\n\", lens[i], k, g0, fr); }\n\
         static const unsigned ns[] = {1, 7, 1000, 1000000}, gs[] = {1, 3, 264, 1056};\n\
         for (i = 0; i < 4; i++) printf(\"scratch %u %u %llu\\n\", ns[i], gs[i], (unsigned long long)gcmx_db_scratch_bytes(ns[i], gs[i])); }\n",
    );
    c.push_str("  return 0;\n}\n");
    let src = out_dir.join("abi_probe.c");
    let exe = out_dir.join("abi_probe");
    std::fs::write(&src, c).expect("write abi_probe.c");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .arg("-std=c11")
        .arg("-O0")
        .arg("-I")
        .arg(cuda_dir)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => fail(&format!(
            "could not compile the ABI layout probe {} with {cc}: {other:?}",
            src.display()
        )),
    }
    let out = Command::new(&exe)
        .output()
        .unwrap_or_else(|e| fail(&format!("abi_probe: {e}")));
    if !out.status.success() {
        fail("abi_probe failed");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rs = String::from(
        "// Generated by build.rs from cuda/gcmx_abi.h (compiled with the host C compiler).\n",
    );
    let mut sizes = Vec::new();
    let mut offsets = Vec::new();
    let mut consts = Vec::new();
    let mut ghexp = Vec::new();
    let mut fuexp = Vec::new();
    let mut units = Vec::new();
    let mut scratch = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["size", s, n, a] => sizes.push(format!("(\"{s}\", {n}, {a})")),
            ["offset", s, f, n] => offsets.push(format!("(\"{s}\", \"{f}\", {n})")),
            ["const", k, v] => consts.push(format!("(\"{k}\", {v}u64)")),
            ["ghexp", _, v] => ghexp.push(v.to_string()),
            ["fuexp", _, v] => fuexp.push(v.to_string()),
            ["units", l, k, g, f] => units.push(format!("({l}, {k}, {g}, {f})")),
            ["scratch", n, g, b] => scratch.push(format!("({n}, {g}, {b})")),
            _ => {}
        }
    }
    let _ = writeln!(
        rs,
        "/// (struct, size, align)\npub(super) const C_SIZES: &[(&str, usize, usize)] = &[{}];",
        sizes.join(", ")
    );
    let _ = writeln!(
        rs,
        "/// (struct, field, offset)\npub(super) const C_OFFSETS: &[(&str, &str, usize)] = &[{}];",
        offsets.join(", ")
    );
    let _ = writeln!(
        rs,
        "/// (name, value)\npub(super) const C_CONSTS: &[(&str, u64)] = &[{}];",
        consts.join(", ")
    );
    let _ = writeln!(
        rs,
        "/// gcmx_strided_pow_exponent for the GHASH layout\npub(super) const C_GHASH_EXP: &[u64] = &[{}];",
        ghexp.join(", ")
    );
    let _ = writeln!(
        rs,
        "/// gcmx_strided_pow_exponent for the fused layout\npub(super) const C_FUSED_EXP: &[u64] = &[{}];",
        fuexp.join(", ")
    );
    let _ = writeln!(
        rs,
        "/// gcmx_db_units: (len, units, g0, free slot)\npub(super) const C_UNITS: &[(u64, u64, u32, u32)] = &[{}];",
        units.join(", ")
    );
    let _ = writeln!(
        rs,
        "/// gcmx_db_scratch_bytes: (n, grid, bytes)\npub(super) const C_SCRATCH: &[(u32, u32, u64)] = &[{}];",
        scratch.join(", ")
    );
    std::fs::write(out_dir.join("abi_probe.rs"), rs).expect("write abi_probe.rs");
}
