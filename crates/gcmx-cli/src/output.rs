//! The output file: written without a name in the target's folder, and given the target's
//! name only once complete, so that no run, however it ends, leaves part of an output behind.
//!
//! - On Linux the data goes to an unnamed file (`O_TMPFILE`) that is linked to its name at
//!   the end. A run that ends any other way, SIGKILL included, leaves nothing: the kernel
//!   frees an unnamed file when its last descriptor closes.
//! - Where unnamed files are not available (another system, a file system without
//!   `O_TMPFILE`, no `/proc`), the data goes to `.NAME.gcmx-partial-PID-RANDOM` beside the
//!   target (mode 0600), removed on every failure and by the signal handler. Only SIGKILL (or
//!   a crash of the machine) can leave it behind; the next gcmx run on the same target
//!   removes such files whose process is gone.
//! - With `--force` over an existing file the complete output is linked under that temporary
//!   name and renamed onto the target (the one atomic replace there is), so a SIGKILL between
//!   the two steps can leave the complete output under the temporary name.
//!
//! Only regular files are written or replaced: a symbolic link, FIFO, socket or device at the
//! target is refused, with or without `--force`.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};
use crate::signals;

/// What the name of a temporary output holds after the target's name.
pub const PARTIAL_MARK: &str = ".gcmx-partial-";

/// Longest part of the target's name kept in a temporary name (file names are at most 255
/// bytes).
const NAME_PART_MAX: usize = 200;

/// The folder of `target` (`.` for a bare file name).
fn parent_dir(target: &Path) -> PathBuf {
    match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `.NAME.gcmx-partial-`: the start of every temporary name for `target`.
fn partial_prefix(target: &Path) -> Result<OsString> {
    let name = target
        .file_name()
        .ok_or_else(|| Error::usage(format!("{} is not a file name", target.display())))?;
    let bytes = name.as_bytes();
    let mut v = Vec::with_capacity(NAME_PART_MAX + 32);
    v.push(b'.');
    v.extend_from_slice(&bytes[..bytes.len().min(NAME_PART_MAX)]);
    v.extend_from_slice(PARTIAL_MARK.as_bytes());
    Ok(OsString::from_vec(v))
}

fn kind_name(ft: std::fs::FileType) -> &'static str {
    if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else if ft.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Checks what is at `target`: nothing, or a regular file when `force`. Anything else is a
/// usage error that says why.
pub fn check_target(target: &Path, force: bool) -> Result<()> {
    match std::fs::symlink_metadata(target) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("cannot inspect {}", target.display()), e)),
        Ok(m) if m.file_type().is_file() => {
            if force {
                Ok(())
            } else {
                Err(Error::usage(format!(
                    "{} exists; give --force to replace this file",
                    target.display()
                )))
            }
        }
        Ok(m) if m.file_type().is_dir() => Err(Error::usage(format!(
            "{} is a directory; give a file name",
            target.display()
        ))),
        Ok(m) if m.file_type().is_symlink() => Err(Error::usage(format!(
            "{} is a symbolic link; gcmx writes only regular files and never replaces a link \
             (give the path of the file it points to)",
            target.display()
        ))),
        Ok(m) => Err(Error::usage(format!(
            "{} is {}; gcmx writes only regular files and never replaces anything else \
             (to write into it, give - as OUTPUT and redirect standard output)",
            target.display(),
            kind_name(m.file_type())
        ))),
    }
}

/// Whether process `pid` is gone (a process of another user still counts as present).
fn process_gone(pid: i32) -> bool {
    matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// Removes the temporary outputs for `target` that a killed run left (their process is gone).
/// Returns how many were removed.
pub fn remove_stale_partials(target: &Path) -> Result<usize> {
    let dir = parent_dir(target);
    let prefix = partial_prefix(target)?;
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(0);
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.as_bytes().strip_prefix(prefix.as_bytes()) else {
            continue;
        };
        // PID-RANDOM
        let pid = std::str::from_utf8(rest)
            .ok()
            .and_then(|r| r.split_once('-'))
            .and_then(|(p, _)| p.parse::<i32>().ok());
        let Some(pid) = pid.filter(|&p| p > 0) else {
            continue;
        };
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        if is_file && pid != std::process::id() as i32 && process_gone(pid) {
            let p = e.path();
            std::fs::remove_file(&p)
                .map_err(|err| Error::io(format!("cannot remove {}", p.display()), err))?;
            removed += 1;
        }
    }
    Ok(removed)
}

fn random_suffix() -> Result<String> {
    let mut r = [0u8; 6];
    crate::random::fill(&mut r)?;
    Ok(hex::encode(r))
}

/// A new temporary name for `target`: `.NAME.gcmx-partial-PID-RANDOM`.
fn temp_name(target: &Path) -> Result<PathBuf> {
    let mut name = partial_prefix(target)?;
    name.push(format!("{}-{}", std::process::id(), random_suffix()?));
    Ok(parent_dir(target).join(name))
}

/// Opens an unnamed file in `dir`, or `None` where this system or file system has none.
#[cfg(target_os = "linux")]
fn open_unnamed(dir: &Path) -> Result<Option<File>> {
    if !Path::new("/proc/self/fd").is_dir() {
        // The unnamed file is linked through /proc/self/fd.
        return Ok(None);
    }
    match OpenOptions::new()
        .write(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_TMPFILE)
        .open(dir)
    {
        Ok(f) => Ok(Some(f)),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(nix::libc::EOPNOTSUPP | nix::libc::EISDIR | nix::libc::EINVAL)
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(Error::io(
            format!("cannot create the output in {}", dir.display()),
            e,
        )),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_unnamed(_dir: &Path) -> Result<Option<File>> {
    Ok(None)
}

/// Gives the unnamed `file` the name `dest`; fails if `dest` exists.
#[cfg(target_os = "linux")]
fn link_unnamed(file: &File, dest: &Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    nix::unistd::linkat(
        nix::fcntl::AT_FDCWD,
        proc_path.as_str(),
        nix::fcntl::AT_FDCWD,
        dest,
        nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
    )
    .map_err(io::Error::from)
}

#[cfg(not(target_os = "linux"))]
fn link_unnamed(_file: &File, _dest: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// An output file being written; see the module documentation.
pub struct OutputFile {
    file: File,
    target: PathBuf,
    force: bool,
    /// The temporary name of the data, when it has one (the fallback).
    temp: Option<(PathBuf, signals::Registration)>,
}

impl std::fmt::Debug for OutputFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputFile")
            .field("target", &self.target)
            .field("temp", &self.temp.as_ref().map(|t| &t.0))
            .finish()
    }
}

impl OutputFile {
    /// Starts an output for `target` (mode 0600): checks the target (see [`check_target`]),
    /// removes stale temporary outputs of killed runs, and opens the data file.
    pub fn create(target: &Path, force: bool) -> Result<OutputFile> {
        OutputFile::create_with(target, force, true)
    }

    /// [`OutputFile::create`], with unnamed files allowed or not (tests of the fallback).
    fn create_with(target: &Path, force: bool, allow_unnamed: bool) -> Result<OutputFile> {
        if target.as_os_str().is_empty() {
            return Err(Error::usage("empty output path"));
        }
        check_target(target, force)?;
        remove_stale_partials(target)?;
        let dir = parent_dir(target);
        if allow_unnamed && let Some(file) = open_unnamed(&dir)? {
            return Ok(OutputFile {
                file,
                target: target.to_path_buf(),
                force,
                temp: None,
            });
        }
        let path = temp_name(target)?;
        let registration = signals::register(&path);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| {
                Error::io(
                    format!("cannot create a temporary file in {}", dir.display()),
                    e,
                )
            })?;
        Ok(OutputFile {
            file,
            target: target.to_path_buf(),
            force,
            temp: Some((path, registration)),
        })
    }

    /// The file being written.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Puts the complete output in place under the target's name (after flushing it to disk
    /// with its folder when `fsync`). Fails, leaving nothing, if a signal has stopped the run,
    /// if the target appeared meanwhile (without `force`), or if it became something other
    /// than a regular file. The one failure that comes after the output is in place, a
    /// failed flush of the folder with `fsync`, says so in its message.
    pub fn commit(mut self, fsync: bool) -> Result<()> {
        let target = self.target.clone();
        let write_err = |e| Error::io(format!("cannot write {}", target.display()), e);
        if fsync {
            self.file.sync_all().map_err(write_err)?;
        }
        let temp = self.temp.take();
        // Signals wait while the output is put in place (no registration is needed for the
        // name used in between).
        let between = match (&temp, self.force) {
            (None, true) => Some(temp_name(&target)?),
            _ => None,
        };
        let placed = signals::commit(|| {
            // The target may have changed since the run started.
            check_target(&target, self.force)?;
            match &temp {
                None if !self.force => self.link_new(&target),
                None => {
                    let t = between.as_deref().unwrap_or(&target);
                    link_unnamed(&self.file, t).map_err(|e| self.move_err(e))?;
                    rename_over(t, &target).inspect_err(|_| {
                        let _ = std::fs::remove_file(t);
                    })
                }
                Some((t, _)) if !self.force => match std::fs::hard_link(t, &target) {
                    Ok(()) => std::fs::remove_file(t).map_err(|e| self.move_err(e)),
                    // A file system without hard links: the target was checked just above,
                    // under the lock; rename is the only way left.
                    Err(e)
                        if e.kind() == io::ErrorKind::Unsupported
                            || e.raw_os_error() == Some(nix::libc::EPERM) =>
                    {
                        rename_over(t, &target)
                    }
                    Err(e) => Err(self.move_err(e)),
                },
                Some((t, _)) => rename_over(t, &target),
            }
        });
        if placed.is_err()
            && let Some((t, _)) = &temp
        {
            let _ = std::fs::remove_file(t);
        }
        placed?;
        if fsync {
            let dir = parent_dir(&target);
            File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| {
                Error::io(
                    format!(
                        "{} is in place, but flushing its folder {} to disk failed",
                        target.display(),
                        dir.display()
                    ),
                    e,
                )
            })?;
        }
        Ok(())
    }

    fn link_new(&self, target: &Path) -> Result<()> {
        link_unnamed(&self.file, target).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                // Someone created it while this run was writing.
                match check_target(target, false) {
                    Err(e) => e,
                    Ok(()) => self.move_err(e),
                }
            } else {
                self.move_err(e)
            }
        })
    }

    fn move_err(&self, e: io::Error) -> Error {
        Error::io(
            format!("cannot move the output into {}", self.target.display()),
            e,
        )
    }
}

fn rename_over(from: &Path, target: &Path) -> Result<()> {
    std::fs::rename(from, target).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("cannot move the output into {}: {e}", target.display()),
        )
    })
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.file.write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some((t, _)) = &self.temp {
            let _ = std::fs::remove_file(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_recognisable_and_bounded() {
        let long = "x".repeat(255);
        let t = temp_name(Path::new(&format!("/tmp/{long}"))).unwrap();
        let n = t.file_name().unwrap().as_bytes();
        assert!(n.len() <= 255, "{}", n.len());
        let p = temp_name(Path::new("dir/a.bin")).unwrap();
        let s = p.to_str().unwrap();
        assert!(
            s.starts_with(&format!("dir/.a.bin{PARTIAL_MARK}{}-", std::process::id())),
            "{s}"
        );
    }

    /// The named fallback: the data lives under a temporary name until commit, which gives
    /// it the target's name (new, or over a regular file with `force`); dropped without a
    /// commit, nothing is left.
    #[test]
    fn named_fallback_commits_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let names = || -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let target = dir.path().join("out");
        let mut o = OutputFile::create_with(&target, false, false).unwrap();
        o.write_all(b"first").unwrap();
        let temp = o.temp.as_ref().unwrap().0.clone();
        assert!(temp.to_string_lossy().contains(PARTIAL_MARK));
        assert!(temp.exists());
        drop(o);
        assert!(names().is_empty(), "{:?}", names());
        let mut o = OutputFile::create_with(&target, false, false).unwrap();
        o.write_all(b"first").unwrap();
        o.commit(true).unwrap();
        assert_eq!(names(), vec!["out"]);
        assert!(OutputFile::create_with(&target, false, false).is_err());
        let mut o = OutputFile::create_with(&target, true, false).unwrap();
        o.write_all(b"second").unwrap();
        o.commit(false).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"second");
        assert_eq!(names(), vec!["out"]);
        // The unnamed path, for comparison (Linux).
        let mut o = OutputFile::create(&target, true).unwrap();
        o.write_all(b"third").unwrap();
        assert_eq!(names(), vec!["out"], "the unnamed output has no name yet");
        o.commit(false).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"third");
        assert_eq!(names(), vec!["out"]);
    }

    #[test]
    fn stale_partials_of_dead_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.bin");
        // A process id that is not running: a finished child's.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = dir.path().join(format!(".out.bin{PARTIAL_MARK}{dead}-abc"));
        let live = dir
            .path()
            .join(format!(".out.bin{PARTIAL_MARK}{}-abc", std::process::id()));
        let other = dir.path().join(format!(".other{PARTIAL_MARK}{dead}-abc"));
        for p in [&stale, &live, &other] {
            std::fs::write(p, b"x").unwrap();
        }
        assert_eq!(remove_stale_partials(&target).unwrap(), 1);
        assert!(!stale.exists() && live.exists() && other.exists());
    }
}
