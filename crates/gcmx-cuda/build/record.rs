//! The shipped kernels' build record: what nvcc built `kernels/gcmx.fatbin` from (release, flags, the
//! SHA-256 of every kernel source) and the fatbin's own SHA-256. One file for the two users of it:
//! `build.rs`, which embeds the fatbin only if [`check`] passes (and writes a record when it rebuilds),
//! and the test `tests/kernels.rs`, which checks the committed fatbin the same way.

use std::fmt::Write as _;
use std::path::Path;

use sha2::{Digest, Sha256};

/// SASS targets, then the PTX target for later GPUs (see cuda/gcmx_abi.h).
pub(crate) const SASS_ARCHS: [u32; 6] = [80, 86, 89, 90, 100, 120];
pub(crate) const PTX_ARCH: u32 = 120;
/// The kernels' single translation unit.
pub(crate) const MAIN_SOURCE: &str = "gcmx_all.cu";

/// nvcc's flags for the fatbin, without input and output.
pub(crate) fn flags() -> Vec<String> {
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

/// Lower-case hex of the SHA-256 of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

/// The kernel sources (`.cu`, `.cuh`, `.h` directly under `dir`): (file name, SHA-256), sorted by name.
pub(crate) fn sources(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| format!("the kernel sources {} cannot be read: {e}", dir.display()))?;
    let mut v = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        let kernel = p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| matches!(x, "cu" | "cuh" | "h"));
        if kernel && p.is_file() {
            let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            v.push((name, sha256(&bytes)));
        }
    }
    v.sort();
    if !v.iter().any(|(n, _)| n == MAIN_SOURCE) {
        return Err(format!("{} has no {MAIN_SOURCE}", dir.display()));
    }
    Ok(v)
}

/// What a build record says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// nvcc's release, `major.minor`.
    pub(crate) nvcc: String,
    /// nvcc's flags, space-separated.
    pub(crate) flags: String,
    /// (file name, SHA-256) of every source, sorted by name.
    pub(crate) sources: Vec<(String, String)>,
    /// SHA-256 of the fatbin.
    pub(crate) fatbin: String,
}

impl Record {
    /// Parse a record (`None` if any line is not one of its four kinds, or one is missing).
    pub(crate) fn parse(text: &str) -> Option<Record> {
        let (mut nvcc, mut flags, mut fatbin, mut sources) = (None, None, None, Vec::new());
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        {
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

    /// The record as a file.
    pub(crate) fn render(&self) -> String {
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

    /// Whether the record uses the `clmad` GHASH.
    pub(crate) fn have_clmad(&self) -> bool {
        self.flags.split(' ').any(|f| f == "-DGCMX_HAVE_CLMAD=1")
    }
}

/// Check `kernels/gcmx.fatbin` against `kernels/gcmx.fatbin.record`, the flags of [`flags`] and the
/// sources in `cuda_dir`: the record, or why the fatbin must not be used.
pub(crate) fn check(kernels: &Path, cuda_dir: &Path) -> Result<Record, String> {
    let record = kernels.join("gcmx.fatbin.record");
    let fatbin = kernels.join("gcmx.fatbin");
    let text =
        std::fs::read_to_string(&record).map_err(|e| format!("{}: {e}", record.display()))?;
    let r = Record::parse(&text)
        .ok_or_else(|| format!("{} is not a build record", record.display()))?;
    let bytes = std::fs::read(&fatbin).map_err(|e| format!("{}: {e}", fatbin.display()))?;
    if sha256(&bytes) != r.fatbin {
        return Err(format!(
            "{} is not the fatbin its record describes",
            fatbin.display()
        ));
    }
    let wanted = flags().join(" ");
    if r.flags != wanted {
        return Err(format!(
            "{} was built with other nvcc flags ({}) than build.rs uses ({wanted})",
            fatbin.display(),
            r.flags
        ));
    }
    let have = sources(cuda_dir)?;
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
        return Err(format!(
            "{} is stale: since it was built, {}",
            fatbin.display(),
            diff.join(", ")
        ));
    }
    Ok(r)
}
