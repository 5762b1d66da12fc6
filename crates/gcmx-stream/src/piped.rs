//! Large reads on the GPU through two windows in turn: while the GPU opens one, the caller's
//! thread copies the next one's ciphertext in and the opened one's plaintext out, so that the
//! copies and opens overlap (benches/results.md, "Streaming adapters on the GPU with
//! page-locked windows", run 7).

use std::mem;

use crate::codec::SegmentCodec;
use crate::copy::{Run, copy, copy_runs};
use crate::error::{Error, Result};
use crate::layout::Span;
use crate::window::Window;

/// Fills `w` with the ciphertext of `span` from the start of `src`, after its first `skip`
/// bytes, which are there already; the bytes of `src` used.
fn fill(w: &mut Window, span: &Span, src: &[u8], skip: usize, cap: usize) -> Result<usize> {
    let len = span.ciphertext_len();
    w.reserve(len, cap)
        .map_err(|e| Error::io("cannot read input", e))?;
    let n = len - skip;
    let s = src
        .get(..n)
        .ok_or_else(|| Error::crypto("a source is shorter than the windows planned from it"))?;
    copy(w.get_mut(skip..len), s);
    Ok(n)
}

/// Copies the plaintext of the opened window `w` of `span` to the start of `out`; the bytes
/// copied.
fn empty(w: &Window, span: &Span, out: &mut [u8]) -> usize {
    let mut to = 0;
    let runs: Vec<Run> = span
        .segments()
        .map(|s| {
            to += s.body();
            Run::new(to - s.body(), s.at, s.body())
        })
        .collect();
    copy_runs(out, w.get(0..span.ciphertext_len()), &runs);
    to
}

/// Reads the windows `spans` (whole segments, none the stream's last), their ciphertext back to
/// back in `src` but for the first `pre` bytes, at the start of `a`: each is copied into `a` or
/// a second page-locked window in turn, opened on a helper thread while the next is copied in,
/// and its plaintext copied to `out` once authenticated. `cap`: a window's capacity. Returns
/// the authenticated bytes written (on failure, those of the windows before) and the outcome;
/// `a` is left holding one of the two windows.
pub(crate) fn read_piped(
    codec: &SegmentCodec,
    a: &mut Window,
    pre: usize,
    src: &[u8],
    out: &mut [u8],
    spans: &[Span],
    cap: usize,
) -> (usize, Result<()>) {
    let Some(first) = spans.first() else {
        return (0, Ok(()));
    };
    let mut cur = mem::replace(a, Window::pinned());
    let mut from = match fill(&mut cur, first, src, pre, cap) {
        Ok(n) => n,
        Err(e) => {
            *a = cur;
            return (0, Err(e));
        }
    };
    let (produced, r, kept) = std::thread::scope(|s| {
        let open = |mut w: Window, span: Span| {
            s.spawn(move || {
                let len = span.ciphertext_len();
                let r = codec.open(&span, w.get_mut(0..len));
                (w, r)
            })
        };
        let mut opening = Some(open(cur, *first));
        let mut free = Some(Window::pinned());
        let mut produced = 0;
        for (i, span) in spans.iter().enumerate() {
            // The next window's ciphertext goes in while this one opens.
            let mut ahead = None;
            let mut fill_failed = None;
            if let Some(next) = spans.get(i + 1) {
                let mut w = free.take().unwrap_or_else(Window::pinned);
                match fill(&mut w, next, src.get(from..).unwrap_or_default(), 0, cap) {
                    Ok(n) => {
                        from += n;
                        ahead = Some((w, *next));
                    }
                    Err(e) => fill_failed = Some(e),
                }
            }
            let Some(handle) = opening.take() else {
                break;
            };
            let Ok((w, r)) = handle.join() else {
                let e = Error::crypto("a window's open panicked");
                return (produced, Err(e), Window::pinned());
            };
            if let Err(e) = r {
                // It holds its ciphertext again (or zeros); the one ahead is wiped on drop.
                return (produced, Err(e), w);
            }
            if let Some((next, span)) = ahead {
                opening = Some(open(next, span));
            }
            produced += empty(&w, span, &mut out[produced..]);
            if let Some(e) = fill_failed {
                return (produced, Err(e), w);
            }
            free = Some(w);
        }
        (produced, Ok(()), free.unwrap_or_else(Window::pinned))
    });
    *a = kept;
    (produced, r)
}
