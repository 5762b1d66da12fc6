//! Encrypting and decrypting files and standard streams: the output put in place only when
//! complete, the overwrite guards, the progress bar and the summary line. The streaming
//! itself is [`crate::bulk`].

use std::fs::{File, Metadata};
use std::io::{self, IsTerminal, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gcmx_stream::{Keyset, Options};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::api::Backend;
use crate::bulk::{self, Input, Stats};
use crate::error::{Error, Result};
use crate::output::OutputFile;

/// A file's identity: its device and inode, the same through every hard or symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file `meta` describes.
    pub fn of(meta: &Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    /// The identity of the file at `path` (links followed), if there is one.
    fn at(path: &Path) -> Option<FileId> {
        std::fs::metadata(path).ok().map(|m| FileId::of(&m))
    }
}

/// Where to read: a file or standard input (`-`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Standard input.
    Stdin,
    /// A file.
    File(PathBuf),
}

/// Where to write: a file (put in place only when complete) or standard output.
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
    /// The keyset file: never written over, `force` or not.
    pub keyset_file: Option<FileId>,
}

/// The input, its size when known, and its identity when it is a regular file.
fn open_source(src: &Source) -> Result<(Input, Option<u64>, Option<FileId>)> {
    match src {
        Source::Stdin => {
            let fd = io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| Error::io("cannot read standard input", e))?;
            let file = File::from(fd);
            // Standard input redirected from a file (`< X`) is that file.
            let id = file
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .map(|m| FileId::of(&m));
            Ok((Input::Pipe(file), None, id))
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
            let id = meta.is_file().then(|| FileId::of(&meta));
            Ok((Input::File(f), size, id))
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

fn run_stream<W: Write>(
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
        Direction::Encrypt => bulk::encrypt(keyset, aad, input, output, opts, &progress),
        Direction::Decrypt => bulk::decrypt(keyset, aad, input, output, opts, &progress),
    }
}

/// Standard input's identity when it is a regular file (`< X`).
fn stdin_file_id() -> Option<FileId> {
    let fd = io::stdin().as_fd().try_clone_to_owned().ok()?;
    File::from(fd)
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| FileId::of(&m))
}

/// Refuses an output that is the keyset file (it would lose every file under that key), or,
/// when decrypting, the input file (decryption never writes over its input). Checked before
/// the run and again just before the output is put in place.
fn check_output_is_not(
    dir: Direction,
    target: &Path,
    keyset: Option<FileId>,
    input: Option<FileId>,
) -> Result<()> {
    let Some(id) = FileId::at(target) else {
        return Ok(());
    };
    if keyset == Some(id) {
        return Err(Error::usage(format!(
            "refusing to write {}: it is the keyset file, which would be lost with every file encrypted under it",
            target.display()
        )));
    }
    if dir == Direction::Decrypt && input == Some(id) {
        return Err(Error::usage(format!(
            "refusing to write {}: it is the input file, and decryption never writes over its input",
            target.display()
        )));
    }
    Ok(())
}

/// Encrypts or decrypts `src` into `dst`.
///
/// A file output is written without a name (or under a temporary name) in the target's
/// folder and put in place only when everything succeeded; on any failure nothing is left
/// behind (see [`crate::output`]). An existing output is refused unless `force`, and only a
/// regular file is ever replaced: a symbolic link, FIFO, socket or device is refused. The
/// keyset file is never an output, nor, when decrypting, the input file.
/// Decrypting to standard output writes each segment once it has authenticated, so a failure
/// later in the stream (tampering, truncation) comes after some plaintext was written: the
/// error (and exit status) is then the only signal.
pub fn run(
    dir: Direction,
    keyset: &Keyset,
    aad: &[u8],
    src: &Source,
    dst: &Sink,
    run: &RunOptions,
) -> Result<Stats> {
    if dir == Direction::Encrypt && *dst == Sink::Stdout && io::stdout().is_terminal() {
        return Err(Error::usage(
            "refusing to write ciphertext to a terminal; redirect standard output or give an OUTPUT file",
        ));
    }
    if let Sink::File(p) = dst {
        let input_id = match src {
            Source::File(i) => FileId::at(i),
            Source::Stdin => stdin_file_id(),
        };
        check_output_is_not(dir, p, run.keyset_file, input_id)?;
    }
    let out = match dst {
        Sink::File(p) => Some(OutputFile::create(p, run.force)?),
        Sink::Stdout => None,
    };
    let (input, size, input_id) = open_source(src)?;
    let opts = Options::default()
        .with_backend(run.backend)
        .with_window_bytes(run.window_bytes);
    let bar = progress_bar(run.quiet, size);
    let result = match (out, dst) {
        (Some(out), Sink::File(p)) => run_stream(dir, keyset, aad, input, out, &opts, &bar)
            .and_then(|(out, stats)| {
                check_output_is_not(dir, p, run.keyset_file, input_id)?;
                out.commit(run.fsync).map(|()| stats)
            }),
        _ => {
            // Standard output through its own descriptor, not `io::stdout()`, whose buffer
            // would keep plaintext after the run.
            let stdout = io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| Error::io("cannot write standard output", e))?;
            run_stream(dir, keyset, aad, input, File::from(stdout), &opts, &bar).map(|(_, s)| s)
        }
    };
    bar.finish_and_clear();
    result
}

/// The one-line summary printed after a run: what was done, how much, how fast.
pub fn summary(dir: Direction, stats: &Stats, secs: f64, dst: &Sink) -> String {
    let (verb, plain) = match dir {
        Direction::Encrypt => ("encrypted", stats.bytes_in),
        Direction::Decrypt => ("decrypted", stats.bytes_out),
    };
    let to = match dst {
        Sink::Stdout => "standard output".to_string(),
        Sink::File(p) => p.display().to_string(),
    };
    let mib = plain as f64 / (1u64 << 20) as f64;
    format!(
        "{verb} {plain} bytes ({mib:.1} MiB, {} segments) to {to} in {secs:.2} s ({:.1} MiB/s)",
        stats.segments,
        mib / secs.max(1e-6)
    )
}
