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
//!   build record `kernels/gcmx.fatbin.record`: the flags must be the ones below, every source listed
//!   there must be the package's `cuda/` file byte for byte (SHA-256) and no other source may exist, and
//!   the fatbin's own hash must match. A stale or altered fatbin stops the build with the reason;
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

use sha2::{Digest, Sha256};

/// SASS targets, then the PTX target for later GPUs (see cuda/gcmx_abi.h).
const SASS_ARCHS: [u32; 6] = [80, 86, 89, 90, 100, 120];
const PTX_ARCH: u32 = 120;
/// First nvcc release whose PTX assembler accepts `clmad`.
const CLMAD_MIN: (u32, u32) = (13, 3);
/// The kernels' single translation unit.
const MAIN_SOURCE: &str = "gcmx_all.cu";
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
    let sources = sources(&cuda_dir);
    for (path, _) in &sources {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    println!("cargo::rerun-if-changed={}", cuda_dir.display());

    write_layout(&cuda_dir.join("gcmx_abi.h"), &out_dir.join("abi_layout.rs"));

    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let shipped = manifest.join("kernels");
    println!("cargo::rerun-if-changed={}", shipped.display());
    let wanted = flags().join(" ");
    let rebuild = env::var(REBUILD).is_ok_and(|v| !v.is_empty() && v != "0");
    let (fatbin, record) = if rebuild {
        build_from_source(&cuda_dir, &sources, &wanted, &manifest, &out_dir)
    } else {
        let fatbin = shipped.join("gcmx.fatbin");
        let record = check_shipped(&fatbin, &shipped.join("gcmx.fatbin.record"), &sources, &wanted);
        (fatbin, record)
    };
    println!("cargo::rustc-env=GCMX_FATBIN={}", fatbin.display());
    println!("cargo::rustc-env=GCMX_NVCC_VERSION={}", record.nvcc);
    if record.flags.split(' ').any(|f| f == "-DGCMX_HAVE_CLMAD=1") {
        println!("cargo::rustc-cfg=gcmx_have_clmad");
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: gcmx-cuda build: {msg}");
    std::process::exit(1);
}

/// nvcc's flags for the fatbin, without input and output.
fn flags() -> Vec<String> {
    let mut f: Vec<String> = ["-fatbin", "-O3", "-std=c++17", "-DGCMX_HAVE_CLMAD=1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for a in SASS_ARCHS {
        f.push("-gencode".into());
        f.push(format!("arch=compute_{a},code=sm_{a}"));
    }
    f.push("-gencode".into());
    f.push(format!("arch=compute_{PTX_ARCH},code=compute_{PTX_ARCH}"));
    f
}

/// The kernel sources (`.cu`, `.cuh`, `.h` directly under `dir`), sorted by name, with their SHA-256.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut v = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        fail(&format!("the kernel sources {} cannot be read", dir.display()));
    };
    for e in rd.flatten() {
        let p = e.path();
        let kernel = p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| matches!(x, "cu" | "cuh" | "h"));
        if kernel && p.is_file() {
            let bytes = std::fs::read(&p)
                .unwrap_or_else(|e| fail(&format!("{}: {e}", p.display())));
            v.push((p, hex(&Sha256::digest(&bytes))));
        }
    }
    v.sort();
    if !v.iter().any(|(p, _)| p.file_name().is_some_and(|n| n == MAIN_SOURCE)) {
        fail(&format!("{} has no {MAIN_SOURCE}", dir.display()));
    }
    v
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What a build record says.
struct Record {
    nvcc: String,
    flags: String,
    sources: Vec<(String, String)>,
    fatbin: String,
}

impl Record {
    fn parse(text: &str) -> Option<Record> {
        let (mut nvcc, mut flags, mut fatbin, mut sources) = (None, None, None, Vec::new());
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let (key, rest) = line.split_once(' ')?;
            match key {
                "nvcc" => nvcc = Some(rest.to_string()),
                "flags" => flags = Some(rest.to_string()),
                "fatbin" => fatbin = Some(rest.to_string()),
                "source" => {
                    let (name, hash) = rest.split_once(' ')?;
                    sources.push((name.to_string(), hash.to_string()));
                }
                _ => return None,
            }
        }
        Some(Record {
            nvcc: nvcc?,
            flags: flags?,
            sources,
            fatbin: fatbin?,
        })
    }

    fn render(&self) -> String {
        let mut s = String::from(
            "# The build of gcmx.fatbin beside this file, written by gcmx-cuda's build.rs (GCMX_CUDA_REBUILD=1,\n\
             # scripts/build-kernels.sh). build.rs embeds the fatbin only if its hash, nvcc's flags and every\n\
             # kernel source (SHA-256 of each file of cuda/) are the ones listed here.\n",
        );
        let _ = writeln!(s, "nvcc {}", self.nvcc);
        let _ = writeln!(s, "flags {}", self.flags);
        for (n, h) in &self.sources {
            let _ = writeln!(s, "source {n} {h}");
        }
        let _ = writeln!(s, "fatbin {}", self.fatbin);
        s
    }
}

/// Check the shipped fatbin against its record and the sources in the package; its record, or stop.
fn check_shipped(
    fatbin: &Path,
    record: &Path,
    sources: &[(PathBuf, String)],
    wanted: &str,
) -> Record {
    let how = format!(
        "rebuild it from cuda/ with scripts/build-kernels.sh (or {REBUILD}=1 and nvcc >= {}.{})",
        CLMAD_MIN.0, CLMAD_MIN.1
    );
    let text = std::fs::read_to_string(record)
        .unwrap_or_else(|e| fail(&format!("{}: {e}; {how}", record.display())));
    let Some(r) = Record::parse(&text) else {
        fail(&format!("{} is not a build record; {how}", record.display()));
    };
    let bytes = std::fs::read(fatbin)
        .unwrap_or_else(|e| fail(&format!("{}: {e}; {how}", fatbin.display())));
    if hex(&Sha256::digest(&bytes)) != r.fatbin {
        fail(&format!(
            "{} is not the fatbin its record describes; {how}",
            fatbin.display()
        ));
    }
    if r.flags != wanted {
        fail(&format!(
            "{} was built with other nvcc flags ({}) than this build script uses ({wanted}); {how}",
            fatbin.display(),
            r.flags
        ));
    }
    let have: Vec<(String, String)> = sources
        .iter()
        .map(|(p, h)| (file_name(p), h.clone()))
        .collect();
    if have != r.sources {
        let mut diff = Vec::new();
        for (n, h) in &have {
            match r.sources.iter().find(|(m, _)| m == n) {
                None => diff.push(format!("{n} is new")),
                Some((_, g)) if g != h => diff.push(format!("{n} changed")),
                _ => {}
            }
        }
        for (m, _) in &r.sources {
            if !have.iter().any(|(n, _)| n == m) {
                diff.push(format!("{m} is gone"));
            }
        }
        fail(&format!(
            "{} is stale: since it was built, {}; {how}",
            fatbin.display(),
            diff.join(", ")
        ));
    }
    r
}

/// Build the fatbin from `cuda_dir` into `out_dir`, with its record.
fn build_from_source(
    cuda_dir: &Path,
    sources: &[(PathBuf, String)],
    wanted: &str,
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
    cmd.args(flags())
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
    let bytes = std::fs::read(&fatbin)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", fatbin.display())));
    let record = Record {
        nvcc: format!("{major}.{minor}"),
        flags: wanted.to_string(),
        sources: sources
            .iter()
            .map(|(p, h)| (file_name(p), h.clone()))
            .collect(),
        fatbin: hex(&Sha256::digest(&bytes)),
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
                let (n, al) = (number(n).unwrap_or_else(|| bad()), number(al).unwrap_or_else(|| bad()));
                let _ = writeln!(
                    sizes,
                    "    pub(crate) const {t}: (usize, usize) = ({n}, {al});"
                );
            }
            ("GCMX_LAYOUT_FIELD", [t, f, o]) => {
                fields.push((t.to_string(), f.to_string(), number(o).unwrap_or_else(|| bad())));
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
        file_name(header)
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
