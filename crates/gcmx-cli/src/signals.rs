//! Terminating signals: a signal ends the run with one line on standard error and status
//! `128 + N`, after removing what the run was writing, and never in the middle of putting the
//! output in place, so the exit status always tells what is on disk.
//!
//! Every catchable signal whose default action ends the process is caught (SIGHUP, SIGINT,
//! SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGXCPU,
//! SIGSTKFLT, the real-time signals), except two that gcmx handles as write errors:
//! SIGXFSZ (a file-size limit, `ulimit -f`) is caught and ignored, so the write that crosses
//! the limit fails with `EFBIG` and the run stops like any failed write; SIGPIPE is ignored
//! (as every Rust program does), so a closed output pipe is a failed write too. The fault
//! signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS) keep their default action.
//!
//! The work is done by one thread that receives the signals; the handler itself only wakes
//! it. That thread and [`commit`] share a lock: the output is put in place under the lock,
//! and the signal thread, once it holds the lock, either finds the output already in place
//! (then the signal is ignored and the run ends normally, status 0) or marks the run stopped,
//! removes the registered paths and exits (then the output was never put in place).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use nix::libc;
use signal_hook::consts::signal::*;
use signal_hook::iterator::Signals;

use crate::error::{Error, ErrorKind, Result};

#[derive(Default)]
struct State {
    /// Paths to remove when a signal stops the run (temporary files, the demo's folder).
    cleanup: Vec<PathBuf>,
    /// The program makes one output, and it ends the run once in place.
    one_output: bool,
    /// The output was put in place: a later signal must not change the exit status.
    committed: bool,
    /// A signal stopped the run: nothing may be put in place any more.
    stopped: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    cleanup: Vec::new(),
    one_output: false,
    committed: false,
    stopped: false,
});

fn state() -> MutexGuard<'static, State> {
    // A panic while holding the lock cannot leave the state inconsistent (plain flags and a
    // list), so a poisoned lock is used as it is.
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The signals caught: every catchable one whose default action ends the process, except
/// SIGPIPE (ignored by the Rust runtime) and the fault signals.
fn caught() -> Vec<i32> {
    let mut v = vec![
        SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGXCPU, SIGXFSZ,
    ];
    #[cfg(target_os = "linux")]
    v.extend([
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSTKFLT,
    ]);
    #[cfg(target_os = "linux")]
    v.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    v
}

fn name(sig: i32) -> String {
    match signal_hook::low_level::signal_name(sig) {
        Some(n) => n.to_string(),
        #[cfg(target_os = "linux")]
        None if sig == libc::SIGPWR => "SIGPWR".to_string(),
        #[cfg(target_os = "linux")]
        None if sig == libc::SIGSTKFLT => "SIGSTKFLT".to_string(),
        #[cfg(target_os = "linux")]
        None if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) => {
            format!("SIGRTMIN+{}", sig - libc::SIGRTMIN())
        }
        None => format!("signal {sig}"),
    }
}

/// Starts the signal thread. For programs (the `gcmx` binary); a library caller keeps its own
/// signal handling. `one_output`: the program writes one output and exits once it is in
/// place, so a signal after that point is ignored (the run has succeeded); otherwise (the
/// demo) every signal stops the run.
pub fn install(one_output: bool) -> Result<()> {
    state().one_output = one_output;
    let mut signals =
        Signals::new(caught()).map_err(|e| Error::io("cannot install the signal handlers", e))?;
    std::thread::Builder::new()
        .name("gcmx-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGXFSZ {
                    // The write that crossed the limit fails with EFBIG and is reported.
                    continue;
                }
                stop(sig);
            }
        })
        .map_err(|e| Error::io("cannot start the signal thread", e))?;
    Ok(())
}

fn stop(sig: i32) {
    let mut st = state();
    if st.committed {
        // The output is in place: finish normally so that the status says so.
        return;
    }
    st.stopped = true;
    let mut left = Vec::new();
    for p in st.cleanup.drain(..) {
        let removed = if p.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        if let Err(e) = removed
            && e.kind() != std::io::ErrorKind::NotFound
        {
            left.push(p.display().to_string());
        }
    }
    // On a terminal, start a clean line (a progress bar may be on the current one).
    let mut msg = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        "\r\x1b[K".to_string()
    } else {
        String::new()
    };
    msg.push_str(&format!(
        "gcmx: error: stopped by {}; no output was put in place",
        name(sig)
    ));
    if !left.is_empty() {
        msg.push_str(&format!(" (could not remove {})", left.join(", ")));
    }
    eprintln!("{msg}");
    // Exit while holding the lock: no output can be put in place after this point.
    std::process::exit(128 + sig);
}

/// While it lives, `path` is removed if a signal stops the run.
#[must_use = "the path is unregistered when this is dropped"]
pub struct Registration(PathBuf);

/// Registers `path` (a file, or a folder removed with its contents) for removal if a signal
/// stops the run.
pub fn register(path: &Path) -> Registration {
    state().cleanup.push(path.to_path_buf());
    Registration(path.to_path_buf())
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut st = state();
        if let Some(i) = st.cleanup.iter().rposition(|p| *p == self.0) {
            st.cleanup.remove(i);
        }
    }
}

/// Runs `put_in_place` unless a signal has stopped the run, with signals held off until it
/// returns. On success, in a program of one output, the run counts as done: a later signal no
/// longer changes the exit status.
pub fn commit<T>(put_in_place: impl FnOnce() -> Result<T>) -> Result<T> {
    let mut st = state();
    if st.stopped {
        return Err(Error::new(ErrorKind::Io, "stopped by a signal"));
    }
    let r = put_in_place()?;
    st.committed = st.one_output;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(name(SIGTERM), "SIGTERM");
        assert_eq!(name(SIGUSR1), "SIGUSR1");
        #[cfg(target_os = "linux")]
        assert_eq!(name(libc::SIGRTMIN() + 2), "SIGRTMIN+2");
        let c = caught();
        for s in [SIGKILL, SIGSTOP, SIGSEGV, SIGPIPE, SIGCHLD, SIGWINCH] {
            assert!(!c.contains(&s), "{}", name(s));
        }
    }
}
