//! A batch walked chunk by chunk, with the framing of the next chunk (J0s, the [`Message`] list)
//! built on a second thread while the engine works on the current one.
//!
//! Why: for small messages the framing is a third of a batch's host cost (each message's J0, its
//! `Message`, and dropping it, which wipes J0), and an engine that hands the bulk work to a device
//! (gcmx-cuda) spends the rest on its own thread; one chunk ahead, the two overlap, so a batch of
//! millions of 1 KiB messages costs its framing on a second core instead of on the critical path.
//! A batch of one chunk (the usual case for small batches) runs on the caller's thread alone.
//!
//! [`Message`]: crate::engine::Message

use std::sync::{Mutex, mpsc};

use crate::Error;

/// Messages per chunk: the per-message framing is built for one chunk at a time in lists reused
/// from chunk to chunk: a batch of millions of small messages then costs no fresh memory per
/// message (on some hosts the first touch of a fresh page costs as much as sealing a kilobyte),
/// and an engine that pipelines its work still gets enough messages per call to keep a device busy.
pub(crate) const BATCH_CHUNK: usize = 1 << 17;

/// Call `work(list)` for every chunk of [`BATCH_CHUNK`] jobs in order, where `list` was filled
/// from that chunk by `fill(list, chunk)` (which must clear it first: lists are reused). Stops at
/// the first error of `work` and returns it; the lists are dropped before this returns.
///
/// With more than one chunk, `fill` runs on a scoped second thread one chunk ahead (two lists in
/// rotation); if that thread cannot be started, everything runs on the caller's thread.
pub(crate) fn for_each_chunk<'j, J, L, F, W>(
    jobs: &'j mut [J],
    fill: F,
    mut work: W,
) -> Result<(), Error>
where
    J: Send,
    L: Default + Send,
    F: Fn(&mut L, &'j mut [J]) + Sync,
    W: FnMut(&mut L) -> Result<(), Error>,
{
    if jobs.len() <= BATCH_CHUNK {
        let mut list = L::default();
        fill(&mut list, jobs);
        return work(&mut list);
    }
    // The framing thread takes the jobs from here; if it cannot be started, they are still here
    // for the caller's thread.
    let slot = Mutex::new(Some(jobs));
    let piped = std::thread::scope(|s| {
        // Filled lists to the caller's thread (at most one waiting), emptied ones back.
        let (full_tx, full_rx) = mpsc::sync_channel::<L>(1);
        let (empty_tx, empty_rx) = mpsc::channel::<L>();
        let (fill, slot) = (&fill, &slot);
        let framer = move || {
            let Some(mut rest) = slot.lock().ok().and_then(|mut g| g.take()) else {
                return;
            };
            while !rest.is_empty() {
                let n = rest.len().min(BATCH_CHUNK);
                let (chunk, r) = std::mem::take(&mut rest).split_at_mut(n);
                rest = r;
                let Ok(mut list) = empty_rx.recv() else {
                    return;
                };
                fill(&mut list, chunk);
                if full_tx.send(list).is_err() {
                    return;
                }
            }
        };
        let started = std::thread::Builder::new()
            .name("gcmx-framing".into())
            .spawn_scoped(s, framer);
        if started.is_err() {
            return None;
        }
        for _ in 0..2 {
            // (Cannot fail: the receiver lives until the framer returns.)
            let _ = empty_tx.send(L::default());
        }
        let mut r = Ok(());
        for mut list in full_rx.iter() {
            r = work(&mut list);
            if r.is_err() {
                break;
            }
            // (Fails once the framer has filled its last list and returned: nothing to do then.)
            let _ = empty_tx.send(list);
        }
        // Both channels closed: a framer waiting on either returns, dropping its lists.
        drop(empty_tx);
        drop(full_rx);
        Some(r)
    });
    if let Some(r) = piped {
        return r;
    }
    // No second thread: one chunk after the other here.
    let mut rest = slot.into_inner().ok().flatten().unwrap_or_default();
    let mut list = L::default();
    while !rest.is_empty() {
        let n = rest.len().min(BATCH_CHUNK);
        let (chunk, r) = std::mem::take(&mut rest).split_at_mut(n);
        rest = r;
        fill(&mut list, chunk);
        work(&mut list)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every job reaches `work` once, chunk by chunk and in order; an error stops the walk.
    #[test]
    fn chunks_arrive_in_order_and_an_error_stops_them() {
        let n = 3 * BATCH_CHUNK + 5;
        for fail_at in [usize::MAX, 0, 1, 3] {
            let mut jobs: Vec<usize> = (0..n).collect();
            let mut seen = 0usize;
            let mut calls = 0usize;
            let r = for_each_chunk(
                &mut jobs,
                |list: &mut Vec<usize>, chunk: &mut [usize]| {
                    list.clear();
                    list.extend(chunk.iter().copied());
                },
                |list| {
                    if calls == fail_at {
                        return Err(Error::Authentication);
                    }
                    calls += 1;
                    assert!(list.iter().copied().eq(seen..seen + list.len()));
                    assert!(list.len() == BATCH_CHUNK || seen + list.len() == n);
                    seen += list.len();
                    Ok(())
                },
            );
            if fail_at == usize::MAX {
                assert_eq!((r, seen, calls), (Ok(()), n, 4));
            } else {
                assert_eq!((r, calls), (Err(Error::Authentication), fail_at));
            }
        }
    }
}
