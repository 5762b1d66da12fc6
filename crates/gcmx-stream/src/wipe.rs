//! Wiping what held secrets: buffers, and what the AES-GCM kernels leave on thread stacks.
//!
//! `gcmx` wipes its key schedules and hash keys when a `Gcm` is dropped, but while it runs,
//! its kernels hold round keys, counter blocks and keystream in registers spilled to the stack
//! of whichever thread runs them: the calling thread and rayon's worker threads. Those bytes stay in
//! the stacks' unused space until something else overwrites it. When a stream's engine is
//! done, this overwrites that space on every thread that can have run it.

/// Overwrites `buf` with zeros, on several threads of its own when it is large. A bulk fill,
/// kept from being dropped as a dead store by `black_box` (zeroize's byte-wise volatile writes
/// run at a fraction of memory speed, and a window is megabytes).
///
/// Not on rayon's pool: windows are wiped when they are dropped, and a drop must not wait for
/// the pool's other work, nor deadlock when every thread of the pool waits on the dropping
/// thread. Threads that cannot be started leave their share to the others and to this one.
pub(crate) fn wipe(buf: &mut [u8]) {
    const PIECE: usize = 4 << 20;
    fn zero(c: &mut [u8]) {
        c.fill(0);
        std::hint::black_box(c);
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(buf.len() / PIECE)
        .min(8);
    if threads < 2 {
        zero(buf);
        return;
    }
    let pieces = std::sync::Mutex::new(buf.chunks_mut(PIECE));
    let work = || {
        loop {
            let next = pieces
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .next();
            match next {
                Some(c) => zero(c),
                None => return,
            }
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

/// Bytes of stack overwritten below the caller's frame: a generous bound on what a batch call
/// (framing, engine and kernel frames together) uses below the frame that made it.
const STACK_WIPE_BYTES: usize = 32 << 10;

/// Overwrites the unused stack below the caller with zeros.
#[inline(never)]
pub(crate) fn wipe_this_stack() {
    let scratch = [0u8; STACK_WIPE_BYTES];
    // `black_box` makes the zeros observable, so the compiler cannot drop them as dead stores:
    // one bulk fill (zeroize's byte-wise volatile writes take microseconds, and every stream
    // pays this at its set-up).
    std::hint::black_box(&scratch);
}

/// Overwrites the unused stack of the calling thread now, and of every thread of rayon's pool
/// (where `gcmx`'s multi-core engine runs segments) as soon as each is free: the wipes are
/// queued on the threads, not waited for, so that a drop never waits on unrelated work in the
/// pool (a task blocked for seconds, or one that waits on the dropping thread itself). A thread
/// busy with other work keeps the leftovers until it next looks for work.
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
        use std::sync::atomic::{AtomicUsize, Ordering};
        static WIPED: AtomicUsize = AtomicUsize::new(0);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
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
