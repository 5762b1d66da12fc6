//! Assembles haberdashery's AES-GCM files (a benchmark peer, never a dependency of gcmx) when they
//! are at hand: in `$GCMX_HABERDASHERY_DIR`, else in `shared/peers/haberdashery` beside the
//! repository. Each file present becomes `cfg(haberdashery_<file stem>)`; the benchmark names the
//! folder it used, or says that none was found, through `GCMX_BENCH_HABERDASHERY`.

use std::path::{Path, PathBuf};

/// The files the benchmark knows how to call (their `haberdashery_<stem>_*` functions).
const STEMS: [&str; 8] = [
    "aes128gcm_sapphirerapids",
    "aes128gcm_zen4",
    "aes128gcm_tigerlake",
    "aes128gcm_skylakex",
    "aes128gcm_broadwell",
    "aes256gcm_tigerlake",
    "aes256gcm_skylakex",
    "aes256gcm_broadwell",
];

fn main() {
    for stem in STEMS {
        println!("cargo::rustc-check-cfg=cfg(haberdashery_{stem})");
    }
    println!("cargo::rerun-if-env-changed=GCMX_HABERDASHERY_DIR");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    // The repository root is two folders up; `shared` sits beside it.
    let beside = manifest.join("../../../shared/peers/haberdashery");
    let dir = std::env::var_os("GCMX_HABERDASHERY_DIR")
        .map(PathBuf::from)
        .unwrap_or(beside);
    // System V x86-64 ELF assembly: nothing to do elsewhere.
    let elf_x86_64 = std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64")
        && std::env::var("CARGO_CFG_TARGET_OBJECT_FORMAT").as_deref() != Ok("macho")
        && std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("windows");
    // Watch the folder, or while it is missing the nearest folder that exists (so that it is
    // noticed when it appears, without rebuilding on every run).
    println!(
        "cargo::rerun-if-changed={}",
        nearest_existing(&dir).display()
    );
    let present: Vec<&str> = STEMS
        .into_iter()
        .filter(|s| dir.join(format!("{s}.s")).is_file())
        .collect();
    let status = if !elf_x86_64 {
        "absent: not an x86-64 ELF target".to_string()
    } else if present.is_empty() {
        format!("absent: no haberdashery files in {}", dir.display())
    } else {
        let mut build = cc::Build::new();
        for stem in &present {
            let file = dir.join(format!("{stem}.s"));
            println!("cargo::rerun-if-changed={}", file.display());
            println!("cargo::rustc-cfg=haberdashery_{stem}");
            build.file(file);
        }
        build.compile("haberdashery");
        let dir = dir.canonicalize().unwrap_or(dir);
        format!("{} ({} files)", dir.display(), present.len())
    };
    println!("cargo::rustc-env=GCMX_BENCH_HABERDASHERY={status}");
}

fn nearest_existing(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    while !p.exists() {
        if !p.pop() {
            return PathBuf::from(".");
        }
    }
    p
}
