//! Build script of gcmx-cuda. It compiles and runs nothing on the build machine unless asked to
//! rebuild the kernels, so the crate builds anywhere, cross-compiling included, with no CUDA toolkit.
//!
//! Always: reads the layout record at the end of `cuda/gcmx_abi.h` (the `GCMX_LAYOUT_*` lines, as text)
//! and writes it as Rust constants (`$OUT_DIR/abi_layout.rs`), which `src/abi.rs` asserts its
//! `#[repr(C)]` mirrors against at compile time. The C side checks the same lines with static asserts.
//!
//! With the `cuda` feature it chooses the kernels the crate embeds:
//! * by default the fatbin the package ships, `kernels/gcmx.fatbin` (SASS for sm_80, sm_86, sm_89,
//!   sm_90, sm_100, sm_120 plus PTX for compute_120, built by nvcc 13.5 with `clmad`), after checking its
//!   build record `kernels/gcmx.fatbin.record` (`build/record.rs`): the flags must be the ones this
//!   script uses, every source listed there must be the package's `cuda/` file byte for byte (SHA-256)
//!   and no other source may exist, and the fatbin's own hash must match. A stale or altered fatbin
//!   stops the build with the reason;
//! * with `GCMX_CUDA_REBUILD=1`, one it builds from `cuda/` with an nvcc of release 13.3 or newer (the
//!   first that accepts `clmad`; looked for at `$NVCC`, `$CUDA_PATH/bin/nvcc`, on `PATH`, and in the
//!   repository's `.toolchain/` that `scripts/setup-cuda.sh` fills), with a record of its own.
//!   `scripts/build-kernels.sh` uses this to refresh `kernels/` after a change under `cuda/`.
//!
//! `GCMX_CUDA_DIR` reads the kernel sources from another folder (default: `cuda/` beside this file).

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build/record.rs"]
#[allow(dead_code)]
mod record;

use record::{MAIN_SOURCE, Record};

/// First nvcc release whose PTX assembler accepts `clmad`.
const CLMAD_MIN: (u32, u32) = (13, 3);
/// Environment variable that asks for a rebuild from source.
const REBUILD: &str = "GCMX_CUDA_REBUILD";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(gcmx_have_clmad)");
    println!("cargo::rerun-if-changed=build.rs");
    for v in [REBUILD, "NVCC", "CUDA_PATH", "GCMX_CUDA_DIR"] {
        println!("cargo::rerun-if-env-changed={v}");
    }
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let cuda_dir = env::var_os("GCMX_CUDA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("cuda"));
    let sources = record::sources(&cuda_dir).unwrap_or_else(|e| fail(&e));
    for (name, _) in &sources {
        println!("cargo::rerun-if-changed={}", cuda_dir.join(name).display());
    }
    println!("cargo::rerun-if-changed={}", cuda_dir.display());

    write_layout(&cuda_dir.join("gcmx_abi.h"), &out_dir.join("abi_layout.rs"));

    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let shipped = manifest.join("kernels");
    println!("cargo::rerun-if-changed={}", shipped.display());
    let rebuild = env::var(REBUILD).is_ok_and(|v| !v.is_empty() && v != "0");
    let (fatbin, record) = if rebuild {
        build_from_source(&cuda_dir, sources, &manifest, &out_dir)
    } else {
        let record = record::check(&shipped, &cuda_dir).unwrap_or_else(|e| {
            fail(&format!(
                "{e}; rebuild it from cuda/ with scripts/build-kernels.sh (or {REBUILD}=1 and nvcc >= {}.{})",
                CLMAD_MIN.0, CLMAD_MIN.1
            ))
        });
        (shipped.join("gcmx.fatbin"), record)
    };
    println!("cargo::rustc-env=GCMX_FATBIN={}", fatbin.display());
    println!("cargo::rustc-env=GCMX_NVCC_VERSION={}", record.nvcc);
    if record.have_clmad() {
        println!("cargo::rustc-cfg=gcmx_have_clmad");
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: gcmx-cuda build: {msg}");
    std::process::exit(1);
}

/// Build the fatbin from `cuda_dir` into `out_dir`, with its record.
fn build_from_source(
    cuda_dir: &Path,
    sources: Vec<(String, String)>,
    manifest: &Path,
    out_dir: &Path,
) -> (PathBuf, Record) {
    let Some(nvcc) = find_nvcc(manifest) else {
        fail(&format!(
            "{REBUILD} is set but no nvcc was found (looked at $NVCC, $CUDA_PATH/bin/nvcc, PATH and \
             .toolchain/cuda/nvidia/cu13/bin/nvcc; scripts/setup-cuda.sh installs nvcc 13.5); unset {REBUILD} \
             to use the shipped kernels"
        ));
    };
    let Some((major, minor)) = nvcc_version(&nvcc) else {
        fail(&format!(
            "could not read the release from `{} --version`",
            nvcc.display()
        ));
    };
    if (major, minor) < CLMAD_MIN {
        fail(&format!(
            "{REBUILD} is set but {} is release {major}.{minor}; the kernels need {}.{} or newer (clmad); \
             unset {REBUILD} to use the shipped kernels",
            nvcc.display(),
            CLMAD_MIN.0,
            CLMAD_MIN.1
        ));
    }
    let fatbin = out_dir.join("gcmx.fatbin");
    let mut cmd = Command::new(&nvcc);
    cmd.args(record::flags())
        .arg("-I")
        .arg(cuda_dir)
        .arg("-o")
        .arg(&fatbin)
        .arg(cuda_dir.join(MAIN_SOURCE));
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
    let bytes =
        std::fs::read(&fatbin).unwrap_or_else(|e| fail(&format!("{}: {e}", fatbin.display())));
    let record = Record {
        nvcc: format!("{major}.{minor}"),
        flags: record::flags().join(" "),
        sources,
        fatbin: record::sha256(&bytes),
    };
    std::fs::write(out_dir.join("gcmx.fatbin.record"), record.render())
        .unwrap_or_else(|e| fail(&format!("writing the build record: {e}")));
    (fatbin, record)
}

fn find_nvcc(manifest: &Path) -> Option<PathBuf> {
    let works = |p: &Path| {
        p.is_file()
            && Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
    };
    let mut candidates = Vec::new();
    candidates.extend(env::var_os("NVCC").map(PathBuf::from));
    candidates.extend(env::var_os("CUDA_PATH").map(|p| PathBuf::from(p).join("bin/nvcc")));
    if let Some(path) = env::var_os("PATH") {
        candidates.extend(env::split_paths(&path).map(|d| d.join("nvcc")));
    }
    candidates.push(manifest.join("../../.toolchain/cuda/nvidia/cu13/bin/nvcc"));
    candidates.into_iter().find(|p| works(p))
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

/// A number of the layout record: decimal or 0x hex, with C's `u`/`ull` suffixes allowed.
fn number(s: &str) -> Option<u64> {
    let s = s.trim().trim_end_matches(['u', 'U', 'l', 'L']);
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Turn the header's `GCMX_LAYOUT_*` lines into Rust constants: `size::T = (size, align)`,
/// `offset::T::field`, `value::NAME`.
fn write_layout(header: &Path, out: &Path) {
    let text = std::fs::read_to_string(header)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", header.display())));
    let mut sizes = String::new();
    let mut fields: Vec<(String, String, u64)> = Vec::new();
    let mut values = String::new();
    for line in text.lines() {
        let line = line.trim();
        let Some((head, rest)) = line.split_once('(') else {
            continue;
        };
        if !matches!(
            head,
            "GCMX_LAYOUT_SIZE" | "GCMX_LAYOUT_FIELD" | "GCMX_LAYOUT_CONST"
        ) {
            continue;
        }
        let Some(args) = rest.strip_suffix(");") else {
            fail(&format!("{}: cannot read `{line}`", header.display()));
        };
        let a: Vec<&str> = args.split(',').map(str::trim).collect();
        let bad = || -> ! { fail(&format!("{}: cannot read `{line}`", header.display())) };
        match (head, a.as_slice()) {
            ("GCMX_LAYOUT_SIZE", [t, n, al]) => {
                let (n, al) = (
                    number(n).unwrap_or_else(|| bad()),
                    number(al).unwrap_or_else(|| bad()),
                );
                let _ = writeln!(
                    sizes,
                    "    pub(crate) const {t}: (usize, usize) = ({n}, {al});"
                );
            }
            ("GCMX_LAYOUT_FIELD", [t, f, o]) => {
                fields.push((
                    t.to_string(),
                    f.to_string(),
                    number(o).unwrap_or_else(|| bad()),
                ));
            }
            ("GCMX_LAYOUT_CONST", [name, v]) => {
                let v = number(v).unwrap_or_else(|| bad());
                let _ = writeln!(values, "    pub(crate) const {name}: u64 = {v};");
            }
            _ => bad(),
        }
    }
    let mut rs = format!(
        "// Generated by build.rs from the layout record of {}.\n\
         #[allow(non_upper_case_globals, dead_code)]\npub(crate) mod size {{\n{sizes}}}\n\
         #[allow(non_snake_case, non_upper_case_globals, dead_code)]\npub(crate) mod offset {{\n",
        header.file_name().unwrap_or_default().to_string_lossy()
    );
    let mut structs: Vec<&str> = fields.iter().map(|(t, _, _)| t.as_str()).collect();
    structs.dedup();
    for t in structs {
        let _ = writeln!(rs, "    pub(crate) mod {t} {{");
        for (_, f, o) in fields.iter().filter(|(s, _, _)| s == t) {
            let _ = writeln!(rs, "        pub(crate) const r#{f}: usize = {o};");
        }
        rs.push_str("    }\n");
    }
    let _ = write!(
        rs,
        "}}\n#[allow(dead_code)]\npub(crate) mod value {{\n{values}}}\n"
    );
    std::fs::write(out, rs).unwrap_or_else(|e| fail(&format!("{}: {e}", out.display())));
}
