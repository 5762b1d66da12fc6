//! Wiping what the AES-GCM kernels leave on thread stacks.
//!
//! `gcmx` wipes its key schedules and hash keys when a `Gcm` is dropped, but while it runs,
//! its kernels hold round keys, counter blocks and keystream in registers spilled to the stack
//! of whichever thread runs them: the calling thread, rayon's worker threads for
//! `Backend::CpuParallel` and `Backend::Auto`, and the pipeline's threads. Those bytes stay in
//! the stacks' unused space until something else overwrites it. When a stream's engine is
//! done, this overwrites that space on every thread that can have run it.

use std::io::{self, BufRead, Read, Write};

use zeroize::{Zeroize, Zeroizing};

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

/// [`wipe_stacks`], waiting until every thread of the pool has wiped: for the bulk pipeline,
/// whose caller (the `gcmx` command) exits right after it, before a queued wipe might run.
pub(crate) fn wipe_stacks_and_wait() {
    wipe_this_stack();
    rayon::broadcast(|_| wipe_this_stack());
}

/// A buffered reader whose buffer is wiped when it is dropped (the standard `BufReader`
/// gives its buffer back to the allocator as it is, and the bulk pipeline reads plaintext
/// through it when encrypting).
pub(crate) struct WipingBufReader<R> {
    inner: R,
    buf: Zeroizing<Vec<u8>>,
    pos: usize,
    filled: usize,
}

impl<R: Read> WipingBufReader<R> {
    pub(crate) fn with_capacity(capacity: usize, inner: R) -> Self {
        WipingBufReader {
            inner,
            buf: Zeroizing::new(vec![0; capacity.max(1)]),
            pos: 0,
            filled: 0,
        }
    }
}

impl<R: Read> Read for WipingBufReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        // Large reads bypass the buffer, as the standard BufReader does.
        if self.pos == self.filled && out.len() >= self.buf.len() {
            return self.inner.read(out);
        }
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for WipingBufReader<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.filled {
            self.filled = self.inner.read(&mut self.buf)?;
            self.pos = 0;
        }
        Ok(&self.buf[self.pos..self.filled])
    }

    fn consume(&mut self, amt: usize) {
        self.pos = (self.pos + amt).min(self.filled);
    }
}

/// A buffered writer whose buffer is wiped once it is done with, on success
/// ([`WipingBufWriter::finish`]) as on error (drop): the bulk pipeline writes plaintext
/// through it when decrypting.
pub(crate) struct WipingBufWriter<W: Write> {
    inner: Option<io::BufWriter<W>>,
}

impl<W: Write> WipingBufWriter<W> {
    pub(crate) fn with_capacity(capacity: usize, inner: W) -> Self {
        WipingBufWriter {
            inner: Some(io::BufWriter::with_capacity(capacity, inner)),
        }
    }

    fn get(&mut self) -> io::Result<&mut io::BufWriter<W>> {
        self.inner
            .as_mut()
            .ok_or_else(|| io::Error::other("writer already finished"))
    }

    /// Flushes, wipes the buffer and gives the writer back.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.get()?.flush()?;
        let (inner, buf) = self
            .inner
            .take()
            .ok_or_else(|| io::Error::other("writer already finished"))?
            .into_parts();
        // Zeroizes the whole capacity, not only the (empty) contents.
        if let Ok(mut buf) = buf {
            buf.zeroize();
        }
        Ok(inner)
    }
}

impl<W: Write> Write for WipingBufWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.get()?.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.get()?.write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.get()?.flush()
    }
}

impl<W: Write> Drop for WipingBufWriter<W> {
    fn drop(&mut self) {
        // Not flushed: a writer dropped without `finish` is a failed run.
        if let Some(w) = self.inner.take() {
            let (_, buf) = w.into_parts();
            if let Ok(mut buf) = buf {
                buf.zeroize();
            }
        }
    }
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

    #[test]
    fn buffered_reader_and_writer_pass_bytes_through() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let mut r = WipingBufReader::with_capacity(1000, &data[..]);
        let mut got = Vec::new();
        let mut small = [0u8; 333];
        loop {
            let n = r.read(&mut small).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&small[..n]);
            let mut big = vec![0u8; 5000];
            let n = r.read(&mut big).unwrap();
            got.extend_from_slice(&big[..n]);
        }
        assert_eq!(got, data);
        let mut w = WipingBufWriter::with_capacity(1000, Vec::new());
        for c in data.chunks(77) {
            w.write_all(c).unwrap();
        }
        assert_eq!(w.finish().unwrap(), data);
    }
}
