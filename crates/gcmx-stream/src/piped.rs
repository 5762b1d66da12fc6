//! Large reads on the GPU through two windows in turn: while the GPU opens one window, the
//! caller's thread copies the next window's ciphertext into the other and, once the open is
//! done, the opened window's plaintext out, so that the copies and the GPU's opens overlap
//! instead of following each other.

use std::mem;

use crate::engine::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{Layout, TAG_LEN};
use crate::window::{Pinning, Run, Seg, Window, copy, copy_runs, open_window, reserve_window};

/// A window of a piped read: the index of its first segment and its number of segments.
pub(crate) struct Planned {
    pub(crate) first: u64,
    pub(crate) count: usize,
}

/// Cuts `w` into the segments of `p` (none of them the stream's last) and fills it with their
/// ciphertext from `src[from..]`, after the first `skip` bytes, which are there already; the
/// bytes of `src` used.
fn fill(
    w: &mut Window,
    layout: &Layout,
    p: &Planned,
    src: &[u8],
    from: usize,
    skip: usize,
    cap: usize,
) -> Result<usize> {
    let mut off = 0;
    w.segs.clear();
    w.first_index = p.first;
    for i in p.first..p.first + p.count as u64 {
        let len = layout.ciphertext_len(i);
        w.segs.push(Seg {
            off,
            len,
            last: false,
        });
        off += len;
    }
    reserve_window(w, off, cap).map_err(|e| Error::io("cannot read input", e))?;
    let n = off - skip;
    let s = src.get(from..from + n).ok_or_else(|| {
        Error::new(
            ErrorKind::Crypto,
            "a source is shorter than the windows planned from it",
        )
    })?;
    w.plain = true;
    w.high_water = w.high_water.max(off);
    copy(&mut w.buf[skip..off], s);
    Ok(n)
}

/// Copies the plaintext of the opened window `w` to the start of `out`; the bytes copied.
fn empty(w: &Window, out: &mut [u8]) -> usize {
    let mut to = 0;
    let runs: Vec<Run> = w
        .segs
        .iter()
        .map(|s| {
            let r = Run {
                to,
                from: s.off,
                len: s.len - TAG_LEN,
            };
            to += r.len;
            r
        })
        .collect();
    copy_runs(out, &w.buf, &runs);
    to
}

/// Reads the windows of `plan` (consecutive, whole segments, none the stream's last) whose
/// ciphertext lies back to back in `src` but for the first `pre` bytes of the first window,
/// which are at the start of `a`'s buffer: each is copied into one of two windows (`a` first,
/// then a second one, page-locked, in turn), opened on a helper thread while the next one is
/// copied in, and its plaintext copied to `out` in order once it has authenticated. `cap` is a
/// window's capacity. Returns the bytes of `out` written, all of them authenticated plaintext,
/// and the outcome: on a failure, the plaintext of the windows before the one that failed. `a`
/// is left holding one of the two windows.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_piped(
    gcm: &Engine,
    prefix: &[u8; 7],
    layout: &Layout,
    a: &mut Window,
    pre: usize,
    src: &[u8],
    out: &mut [u8],
    plan: &[Planned],
    cap: usize,
) -> (usize, Result<()>) {
    let Some(first) = plan.first() else {
        return (0, Ok(()));
    };
    let mut cur = mem::replace(a, Window::new());
    let mut from = match fill(&mut cur, layout, first, src, 0, pre, cap) {
        Ok(n) => n,
        Err(e) => {
            *a = cur;
            return (0, Err(e));
        }
    };
    let (produced, r, kept) = std::thread::scope(|s| {
        let open = |mut w: Window| {
            s.spawn(move || {
                let r = open_window(gcm, prefix, &mut w);
                (w, r)
            })
        };
        let mut opening = Some(open(cur));
        let mut free = Some(Window::with_pinning(Pinning::Yes));
        let mut produced = 0;
        for i in 0..plan.len() {
            // The next window's ciphertext goes in while this one opens.
            let mut ahead = None;
            let mut fill_failed = None;
            if let Some(p) = plan.get(i + 1) {
                let mut w = free
                    .take()
                    .unwrap_or_else(|| Window::with_pinning(Pinning::Yes));
                match fill(&mut w, layout, p, src, from, 0, cap) {
                    Ok(n) => {
                        from += n;
                        ahead = Some(w);
                    }
                    Err(e) => fill_failed = Some(e),
                }
            }
            let Some(handle) = opening.take() else {
                break;
            };
            let (w, r) = match handle.join() {
                Ok(done) => done,
                Err(_) => {
                    let e = Error::new(ErrorKind::Crypto, "a window's open panicked");
                    return (produced, Err(e), Window::new());
                }
            };
            if let Err(e) = r {
                // The window holds its ciphertext again (or zeros); the one ahead is wiped
                // as it is dropped.
                return (produced, Err(e), w);
            }
            if let Some(next) = ahead {
                opening = Some(open(next));
            }
            produced += empty(&w, &mut out[produced..]);
            if let Some(e) = fill_failed {
                return (produced, Err(e), w);
            }
            free = Some(w);
        }
        (produced, Ok(()), free.unwrap_or_else(Window::new))
    });
    *a = kept;
    (produced, r)
}
