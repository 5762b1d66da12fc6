//! Wiping what held secrets: buffers, and what the AES-GCM kernels leave on thread stacks.
//!
//! `gcmx` wipes its keys when a `Gcm` is dropped, but its kernels spill round keys, counter
//! blocks and keystream to the stacks of the threads that run them (the caller's and rayon's),
//! where they stay until overwritten: when a stream's engine is done, this overwrites them.

/// Overwrites `buf` with zeros, on threads of its own when large: a bulk fill kept by
/// `black_box` (zeroize's byte-wise volatile writes are slow for megabytes). Not on rayon's
/// pool: a drop must not wait for its other work, nor deadlock when the pool waits on the
/// dropping thread. Threads that cannot start leave their share to the others.
pub(crate) fn wipe(buf: &mut [u8]) {
    use std::sync::{Mutex, PoisonError};
    const PIECE: usize = 4 << 20;
    fn zero(c: &mut [u8]) {
        c.fill(0);
        std::hint::black_box(c);
    }
    // rayon's count, as the options use: the system's reads its limits at every call (tens of
    // microseconds, what a small stream's whole drop would otherwise cost). The threads are
    // not rayon's.
    let threads = rayon::current_num_threads().min(buf.len() / PIECE).min(8);
    if threads < 2 {
        zero(buf);
        return;
    }
    let pieces = Mutex::new(buf.chunks_mut(PIECE));
    let work = || {
        loop {
            // The lock is not held while a piece is zeroed.
            let next = pieces.lock().unwrap_or_else(PoisonError::into_inner).next();
            let Some(c) = next else { return };
            zero(c);
        }
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            if std::thread::Builder::new().spawn_scoped(s, work).is_err() {
                break;
            }
        }
        work();
    });
}

/// Bytes of stack overwritten below the caller's frame: a generous bound on a batch call's.
const STACK_WIPE_BYTES: usize = 32 << 10;

/// Overwrites the unused stack below the caller with zeros.
#[inline(never)]
pub(crate) fn wipe_this_stack() {
    let scratch = [0u8; STACK_WIPE_BYTES];
    // `black_box` keeps the bulk fill from being dropped as a dead store (zeroize's volatile
    // writes take microseconds, which every stream would pay at set-up).
    std::hint::black_box(&scratch);
}

/// Overwrites the unused stack of this thread now, and of each thread of rayon's pool as soon as
/// it is free: queued, not waited for, so that a drop never waits on unrelated work in the pool
/// (or deadlocks on it). A busy thread keeps the leftovers until it next looks for work.
pub(crate) fn wipe_stacks() {
    wipe_this_stack();
    rayon::spawn_broadcast(|_| wipe_this_stack());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wipes queued by [`wipe_stacks`] run on every thread of the pool: a broadcast queued
    /// after them on each thread finds them done.
    #[test]
    fn wiping_runs_on_every_pool_thread() {
        use rayon::ThreadPoolBuilder;
        use std::sync::atomic::{AtomicUsize, Ordering};
        static WIPED: AtomicUsize = AtomicUsize::new(0);
        let pool = ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        pool.install(|| {
            rayon::spawn_broadcast(|_| {
                wipe_this_stack();
                WIPED.fetch_add(1, Ordering::Relaxed);
            });
            wipe_stacks();
        });
        // A broadcast runs on each thread after the jobs queued on it before.
        pool.broadcast(|_| {});
        assert_eq!(WIPED.load(Ordering::Relaxed), 3);
    }
}
