//! Copies between the caller's buffers and windows, split over rayon's threads when large: one
//! thread copies at a fraction of memory bandwidth, and a copying adapter waits for them
//! (benches/results.md, "gcmx-stream restructured").

use std::mem;

/// Bytes a task of a copy on rayon's pool copies at most ([`copy`], [`copy_runs`]).
const COPY_PIECE: usize = 128 << 10;

/// Copies `src` into `dst` (of the same length), on rayon's pool when large: one run.
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    copy_runs(dst, src, &[Run::new(0, 0, src.len())]);
}

/// A piece of a copy: `len` bytes from offset `from` of the source to offset `to` of the
/// destination.
pub(crate) struct Run {
    pub(crate) to: usize,
    pub(crate) from: usize,
    pub(crate) len: usize,
}

impl Run {
    pub(crate) fn new(to: usize, from: usize, len: usize) -> Run {
        Run { to, from, len }
    }
}

/// Copies the `runs` (increasing and disjoint on both sides) from `src` into `dst` in one call
/// on rayon's pool (a [`copy`] per segment would go to the pool one at a time); runs are cut
/// to both buffers. A small copy stays on this thread and allocates nothing.
pub(crate) fn copy_runs(dst: &mut [u8], src: &[u8], runs: &[Run]) {
    use rayon::prelude::*;
    let total: usize = runs.iter().map(|r| r.len).sum();
    if total < 4 * COPY_PIECE || rayon::current_num_threads() < 2 {
        run_pairs(dst, src, runs).for_each(|(d, s)| d.copy_from_slice(s));
        return;
    }
    // Pieces of at most `COPY_PIECE`, so that a few large runs spread as far as many small ones.
    let pieces: Vec<(&mut [u8], &[u8])> = run_pairs(dst, src, runs)
        .flat_map(|(d, s)| d.chunks_mut(COPY_PIECE).zip(s.chunks(COPY_PIECE)))
        .collect();
    pieces
        .into_par_iter()
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// The destination and source slices of `runs`, cut to both buffers; ends at the first run
/// that is out of order or out of bounds.
fn run_pairs<'d, 's>(
    dst: &'d mut [u8],
    src: &'s [u8],
    runs: &[Run],
) -> impl Iterator<Item = (&'d mut [u8], &'s [u8])> {
    let (mut rest, mut at, mut runs) = (dst, 0, runs.iter());
    std::iter::from_fn(move || {
        let r = runs.next()?;
        let tail = mem::take(&mut rest);
        let tail = tail.get_mut(r.to.checked_sub(at)?..)?;
        let n = r.len.min(tail.len());
        let s = src.get(r.from..r.from + n)?;
        let (d, tail) = tail.split_at_mut(n);
        rest = tail;
        at = r.to + n;
        Some((d, s))
    })
}

#[cfg(test)]
mod tests {
    use super::{Run, copy_runs};

    /// Runs land where they are planned, the gaps between them untouched, one run or many,
    /// small or split over the pool; runs past either buffer are cut, not a panic.
    #[test]
    fn copy_runs_copies_each_run_and_nothing_else() {
        let src: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        for (seg, gap) in [(7usize, 3usize), (4096, 16), (1 << 20, 16)] {
            let mut runs = Vec::new();
            let (mut to, mut from) = (5, 0);
            while from + seg <= src.len().min(3 * seg) {
                runs.push(Run { to, from, len: seg });
                (to, from) = (to + seg + gap, from + seg);
            }
            let mut dst = vec![0xEEu8; to + 9];
            copy_runs(&mut dst, &src, &runs);
            let mut want = vec![0xEEu8; to + 9];
            for r in &runs {
                want[r.to..r.to + r.len].copy_from_slice(&src[r.from..r.from + r.len]);
            }
            assert!(dst == want, "segments of {seg}");
        }
        let mut small = [0u8; 10];
        let runs = [Run::new(2, 0, 4), Run::new(8, 4, 9), Run::new(20, 0, 1)];
        copy_runs(&mut small, &src[..6], &runs);
        assert_eq!(small, [0, 0, 0, 1, 2, 3, 0, 0, 4, 5]);
    }
}
