//! Large writes without a barrier per window: whole segments sealed from the caller's bytes on
//! rayon's pool, a group of them (at least [`GROUP_BYTES`]) per task into a slot of a ring, and
//! written out in order by the calling thread as the slots complete.
//!
//! A window sealed at once ends with every core waiting for the slowest segment; here a slot,
//! once written out, takes the next group at once, so the pool stays busy, most often on the
//! core whose cache holds the slot. Memory is the ring: two windows' worth of segments
//! (benches/results.md, "large writes through a ring of segments").

use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::channel;

use crate::codec::SegmentCodec;
use crate::error::{Error, Result, retry};
use crate::layout::{Span, TAG_LEN};
use crate::window::Window;

/// What [`relay`] did.
#[derive(Default)]
pub(crate) struct Relayed {
    /// Segments sealed (all of them taken from the caller's bytes, none the stream's last).
    pub(crate) segments: usize,
    /// Plaintext bytes taken.
    pub(crate) taken: usize,
    /// Sealed bytes the inner writer did not take (after a write error), in stream order.
    pub(crate) pending: Vec<u8>,
}

/// Whether the calling thread can wait for tasks on rayon's global pool: not one of its threads
/// (its waiting would hold a thread the tasks need), and a pool of two or more.
pub(crate) fn available() -> bool {
    rayon::current_thread_index().is_none() && rayon::current_num_threads() >= 2
}

/// Plaintext bytes one task seals at least, so that small segments do not each cost a task, a
/// message and a write.
pub(crate) const GROUP_BYTES: usize = 1 << 20;

/// Most segments of one [`relay`] call (bounds the bookkeeping; a longer write takes several).
pub(crate) const MAX_SEGMENTS: usize = 1 << 16;

/// Seals the segments of `span` (none the stream's last) from `data` (their plaintexts back to
/// back) and writes them to `out` in order: `group` segments per task and slot, `slots` slots.
/// `ring` holds only ciphertext when this returns. A write error stops new groups; those sealed
/// come back as [`Relayed::pending`]. A sealing failure wipes the ring and is returned.
pub(crate) fn relay<W: Write + ?Sized>(
    codec: &SegmentCodec,
    span: &Span,
    data: &[u8],
    ring: &mut Window,
    group: usize,
    slots: usize,
    out: &mut W,
) -> Result<Relayed> {
    let count = span.count();
    let group = group.max(1);
    let groups = count.div_ceil(group);
    let slots = slots.clamp(1, groups.max(1));
    let slot_len = group * codec.layout().segment_size();
    if span.ends_stream() || span.plaintext_len() != data.len() {
        return Err(Error::invalid("a relay's data is not whole segments"));
    }
    // Segments of group `g`, and its sealed length.
    let span = *span;
    let members = move |g: usize| g * group..((g + 1) * group).min(count);
    let sealed_len = |g: usize| -> usize { members(g).map(|i| span.seg(i).len).sum() };
    let ring_len = slots * slot_len;
    ring.reserve(ring_len, ring_len)
        .map_err(|e| Error::io("cannot encrypt", e))?;

    let mut done = Relayed::default();
    let mut failure: Option<Error> = None;
    rayon::in_place_scope(|s| {
        let (tx, rx) = channel::<(usize, &mut [u8], Result<()>)>();
        // Freed slots, the most recently freed on top: the core that just sealed into it is
        // the likeliest to take the next task.
        let mut free: Vec<&mut [u8]> = ring.get_mut(0..ring_len).chunks_mut(slot_len).collect();
        free.reverse();
        let mut ready: Vec<Option<&mut [u8]>> = (0..slots).map(|_| None).collect();
        let (mut spawned, mut written) = (0, 0);
        let mut write_failed = false;
        loop {
            while !write_failed && failure.is_none() && spawned < groups {
                let Some(buf) = free.pop() else { break };
                let g = spawned;
                let tx = tx.clone();
                s.spawn(move |_| {
                    // A task that panicked would never report, and the loop below would wait
                    // forever: its panic becomes a failure.
                    let r = panic::catch_unwind(AssertUnwindSafe(|| {
                        let mut rest = &mut buf[..];
                        for i in members(g) {
                            // The plaintext in `data` is the ciphertext less the tags before it.
                            let s = span.seg(i);
                            let src = &data[s.at - i * TAG_LEN..][..s.body()];
                            let (seg, tail) = rest.split_at_mut(s.len);
                            rest = tail;
                            codec.seal_into(s.index, src, seg)?;
                        }
                        Ok(())
                    }))
                    .unwrap_or_else(|_| Err(Error::crypto("a task sealing segments panicked")));
                    // The receiver outlives every task of the scope.
                    let _ = tx.send((g, buf, r));
                });
                spawned += 1;
            }
            if written == spawned {
                break;
            }
            let slot = loop {
                if let Some(b) = ready[written % slots].take() {
                    break b;
                }
                // An error cannot happen while `tx` lives; stop rather than wait forever.
                let Ok((g, b, r)) = rx.recv() else {
                    let e = Error::crypto("a task sealing segments ended without a result");
                    failure.get_or_insert(e);
                    return;
                };
                failure = failure.take().or(r.err());
                ready[g % slots] = Some(b);
            };
            if failure.is_some() {
                // Nothing more is written; the tasks in flight end with the scope.
                return;
            }
            let len = sealed_len(written);
            let mut pos = 0;
            while !write_failed && pos < len {
                match retry(|| out.write(&slot[pos..len])) {
                    Ok(0) | Err(_) => write_failed = true,
                    Ok(n) => pos += n,
                }
            }
            if write_failed {
                // Kept for the next write or flush (which meets a lasting error again).
                done.pending.extend_from_slice(&slot[pos..len]);
            }
            free.push(slot);
            written += 1;
        }
        done.segments = (spawned * group).min(count);
        done.taken = span.take(done.segments).plaintext_len();
    });
    match failure {
        Some(e) => {
            ring.wipe();
            Err(e)
        }
        None => {
            // Every slot holds ciphertext (or its earlier contents) only.
            ring.sealed(ring_len);
            Ok(done)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;
    use crate::keyset::{Keyset, StreamingKey};

    /// Takes at most `max` bytes a call, and fails its `fail_at`-th call: (out, calls, max, fail_at).
    struct Flaky(Vec<u8>, usize, usize, usize);

    impl Write for Flaky {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.1 += 1;
            if self.1 == self.3 {
                return Err(io::Error::other("refused"));
            }
            let n = buf.len().min(self.2);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn codec() -> SegmentCodec {
        let ks = Keyset::from(StreamingKey::new(1, &[9u8; 16], 16, 100).unwrap());
        SegmentCodec::for_writing(&ks, b"").unwrap().0
    }

    /// What the writer and the pending bytes hold together is every segment sealed one by one,
    /// in order, whatever the inner writer takes and wherever it fails.
    #[test]
    fn written_and_pending_bytes_are_the_segments_in_order() {
        let codec = codec();
        if !codec.apart() {
            return;
        }
        let layout = *codec.layout();
        let top = u64::from(u32::MAX);
        for (first, count) in [(0, 1), (0, 37), (5, 64), (top - 9, 10)] {
            let span = layout.full(first, count, true).unwrap();
            let data: Vec<u8> = (0..span.plaintext_len())
                .map(|i| (i * 7 + 1) as u8)
                .collect();
            let mut want = Vec::new();
            let mut at = 0;
            for s in span.segments() {
                let one = layout.full(s.index, 1, true).unwrap();
                let mut seg = data[at..at + s.body()].to_vec();
                seg.resize(s.len, 0);
                codec.seal(&one, &mut seg).unwrap();
                want.extend_from_slice(&seg);
                at += s.body();
            }
            // Rows of (max, fail_at, group, slots).
            let m = usize::MAX;
            let rows = [
                m, 0, 1, 4, m, 3, 1, 4, m, 3, 5, 3, 37, 5, 1, 2, 37, 5, 3, 2, 1000, 1, 8, 8, 13,
                40, 1, 1, 13, 40, 7, 1, m, 0, 100, 2,
            ];
            for row in rows.chunks(4) {
                let [max, fail_at, group, slots] = row.try_into().unwrap();
                let mut out = Flaky(Vec::new(), 0, max, fail_at);
                let mut ring = Window::new(false);
                let done = relay(&codec, &span, &data, &mut ring, group, slots, &mut out).unwrap();
                let mut got = out.0.clone();
                got.extend_from_slice(&done.pending);
                let end = span.take(done.segments).ciphertext_len();
                assert_eq!(done.taken, span.take(done.segments).plaintext_len());
                assert!(got == want[..end], "{first}, {count}, {max}");
                if fail_at == 0 || out.1 < fail_at {
                    assert_eq!(done.segments, count);
                    assert!(done.pending.is_empty());
                } else {
                    assert!(done.segments >= 1);
                }
                assert!(!ring.holds_plaintext(), "the ring holds ciphertext only");
            }
        }
    }

    #[test]
    fn data_that_is_not_whole_segments_is_refused() {
        let codec = codec();
        let span = codec.layout().full(0, 2, true).unwrap();
        let mut ring = Window::new(false);
        for len in [span.plaintext_len() - 1, span.plaintext_len() + 1] {
            let mut out = Vec::new();
            assert!(relay(&codec, &span, &vec![0u8; len], &mut ring, 1, 2, &mut out).is_err());
        }
        let past = codec.layout().full(u64::from(u32::MAX), 2, true);
        assert!(past.is_err(), "indexes past 2^32");
    }
}
