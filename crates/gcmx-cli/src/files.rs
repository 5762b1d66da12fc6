//! Encrypting and decrypting files and standard streams: atomic output, overwrite guard,
//! progress bar.

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tempfile::NamedTempFile;

use crate::api::Backend;
use crate::error::{Error, Result};
use crate::keyset::Keyset;
use crate::stream::{self, Input, Options, Stats};

/// Where to read: a file or standard input (`-`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Standard input.
    Stdin,
    /// A file.
    File(PathBuf),
}

/// Where to write: a file (through a temporary file renamed on success) or standard output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    /// Standard output.
    Stdout,
    /// A file.
    File(PathBuf),
}

impl Source {
    /// `-` is standard input, anything else a path.
    pub fn from_arg(arg: &Path) -> Source {
        if arg.as_os_str() == "-" {
            Source::Stdin
        } else {
            Source::File(arg.to_path_buf())
        }
    }
}

impl Sink {
    /// `-` is standard output, anything else a path.
    pub fn from_arg(arg: &Path) -> Sink {
        if arg.as_os_str() == "-" {
            Sink::Stdout
        } else {
            Sink::File(arg.to_path_buf())
        }
    }
}

/// Encrypt or decrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Plaintext to Tink ciphertext.
    Encrypt,
    /// Tink ciphertext to plaintext.
    Decrypt,
}

/// Settings of one run.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Which `gcmx` backend to use.
    pub backend: Backend,
    /// Replace an existing output file.
    pub force: bool,
    /// Never show a progress bar.
    pub quiet: bool,
    /// Target bytes per batch (0: default for the backend).
    pub window_bytes: usize,
    /// Flush a file output to disk (file and folder) before reporting success, so that it
    /// survives a crash; off by default, like `cp`, because it costs the disk's write speed.
    pub fsync: bool,
}

fn open_source(src: &Source) -> Result<(Input, Option<u64>)> {
    match src {
        Source::Stdin => {
            let stdin: Box<dyn Read + Send> = Box::new(io::stdin());
            Ok((Input::Stream(stdin), None))
        }
        Source::File(p) => {
            let f =
                File::open(p).map_err(|e| Error::io(format!("cannot open {}", p.display()), e))?;
            let meta = f
                .metadata()
                .map_err(|e| Error::io(format!("cannot read {}", p.display()), e))?;
            if meta.is_dir() {
                return Err(Error::usage(format!("{} is a directory", p.display())));
            }
            let size = meta.is_file().then_some(meta.len());
            Ok((Input::File(f), size))
        }
    }
}

fn progress_bar(quiet: bool, total: Option<u64>) -> ProgressBar {
    if quiet || !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    let template = if total.is_some() {
        "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}"
    } else {
        "{spinner} {bytes} {binary_bytes_per_sec} {elapsed}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The temporary output being written, if any, for the interrupt handler to remove.
static PARTIAL: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Registers the partial output file while it lives.
struct PartialGuard;

impl PartialGuard {
    fn new(path: &Path) -> PartialGuard {
        if let Ok(mut g) = PARTIAL.lock() {
            *g = Some(path.to_path_buf());
        }
        PartialGuard
    }
}

impl Drop for PartialGuard {
    fn drop(&mut self) {
        if let Ok(mut g) = PARTIAL.lock() {
            *g = None;
        }
    }
}

/// Makes Ctrl-C, SIGTERM and SIGHUP remove the partial output file and exit with status 130,
/// so that an interrupted run leaves nothing behind either. For programs (the `gcmx` binary);
/// a library caller keeps its own signal handling.
pub fn install_interrupt_cleanup() {
    let _ = ctrlc::set_handler(|| {
        if let Ok(g) = PARTIAL.lock()
            && let Some(p) = g.as_ref()
        {
            let _ = std::fs::remove_file(p);
        }
        eprintln!("gcmx: error: interrupted; no output was kept");
        std::process::exit(130);
    });
}

/// Makes a rename in `target`'s folder durable.
fn sync_parent(target: &Path) -> Result<()> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    #[cfg(unix)]
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("cannot flush the folder {}", dir.display()), e))?;
    Ok(())
}

/// A temporary file in `target`'s folder, to be renamed onto `target` once complete.
fn temp_beside(target: &Path) -> Result<NamedTempFile> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    tempfile::Builder::new()
        .prefix(".gcmx-partial-")
        .tempfile_in(&dir)
        .map_err(|e| {
            Error::io(
                format!("cannot create a temporary file in {}", dir.display()),
                e,
            )
        })
}

fn run_stream<W: Write + Send + 'static>(
    dir: Direction,
    keyset: &Keyset,
    aad: &[u8],
    input: Input,
    output: W,
    opts: &Options,
    bar: &ProgressBar,
) -> Result<(W, Stats)> {
    let progress = |n: u64| bar.inc(n);
    match dir {
        Direction::Encrypt => stream::encrypt(keyset, aad, input, output, opts, &progress),
        Direction::Decrypt => stream::decrypt(keyset, aad, input, output, opts, &progress),
    }
}

#[allow(clippy::too_many_arguments)]
fn write_to(
    dir: Direction,
    keyset: &Keyset,
    aad: &[u8],
    input: Input,
    dst: &Sink,
    force: bool,
    fsync: bool,
    opts: &Options,
    bar: &ProgressBar,
) -> Result<Stats> {
    match dst {
        Sink::Stdout => {
            run_stream(dir, keyset, aad, input, io::stdout(), opts, bar).map(|(_, s)| s)
        }
        Sink::File(path) => {
            let tmp = temp_beside(path)?;
            let _registered = PartialGuard::new(tmp.path());
            // On an error `tmp` is dropped on return, which deletes the partial file.
            let (tmp, stats) = run_stream(dir, keyset, aad, input, tmp, opts, bar)?;
            if fsync {
                tmp.as_file()
                    .sync_all()
                    .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
            }
            let placed = if force {
                tmp.persist(path)
            } else {
                tmp.persist_noclobber(path)
            };
            placed.map_err(|e| {
                Error::io(
                    format!("cannot move the output into {}", path.display()),
                    e.error,
                )
            })?;
            if fsync {
                sync_parent(path)?;
            }
            Ok(stats)
        }
    }
}

/// Encrypts or decrypts `src` into `dst`.
///
/// A file output is written to a temporary file in the same folder and renamed into place
/// only when everything succeeded; on any failure nothing is left behind. An existing
/// output is refused unless `force`. Decrypting to standard output writes each segment once
/// it has authenticated, so a failure later in the stream (tampering, truncation) comes after
/// some plaintext was written: the error (and exit status) is then the only signal.
pub fn run(
    dir: Direction,
    keyset: &Keyset,
    aad: &[u8],
    src: &Source,
    dst: &Sink,
    run: &RunOptions,
) -> Result<Stats> {
    if let Sink::File(p) = dst {
        if p.as_os_str().is_empty() {
            return Err(Error::usage("empty output path"));
        }
        if !run.force && std::fs::symlink_metadata(p).is_ok() {
            return Err(Error::usage(format!(
                "{} exists; use --force to overwrite it",
                p.display()
            )));
        }
    }
    if dir == Direction::Encrypt && *dst == Sink::Stdout && io::stdout().is_terminal() {
        return Err(Error::usage(
            "refusing to write ciphertext to a terminal; redirect standard output or give an OUTPUT file",
        ));
    }
    let (input, size) = open_source(src)?;
    let opts = Options {
        backend: run.backend,
        window_bytes: run.window_bytes,
        size_hint: size,
    };
    let bar = progress_bar(run.quiet, size);
    let result = write_to(
        dir, keyset, aad, input, dst, run.force, run.fsync, &opts, &bar,
    );
    bar.finish_and_clear();
    result
}
