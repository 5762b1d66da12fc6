//! A window: the buffer where an adapter's segments are sealed or opened a batch at a time. It
//! knows how much of it was written and whether that may hold plaintext (wiped before its
//! memory is given back), and, for the GPU, whether it is page-locked.

use std::io;
use std::mem;
use std::ops::Range;

use crate::error::no_memory;
use crate::wipe::wipe;

/// Windows up to this size (the GPU's default and a reader's byte of look-ahead) are allocated
/// whole at their first use.
const WHOLE_WINDOW_MAX: usize = (256 << 20) + 1;

/// Whole windows are allocated in multiples of this.
const WINDOW_GRAIN: usize = 64 << 10;

/// The length allocated for a whole window of `len` bytes: rounded up, with a byte more, so that
/// a writer's and a reader's (a byte of look-ahead more) windows are of one length, and a kept
/// buffer serves either.
const fn whole_len(len: usize) -> usize {
    (len + 1).next_multiple_of(WINDOW_GRAIN)
}

pub(crate) struct Window {
    bytes: Bytes,
    /// How much of the buffer was ever written.
    high_water: usize,
    /// Whether what was written may hold plaintext: then it is wiped on drop.
    plain: bool,
    /// Allocated whole: kept for a later stream once it holds no plaintext.
    whole: bool,
    pin: Pinning,
}

/// A window's memory: ordinary, or (feature `cuda`, the GPU's) page-locked for its whole life,
/// so that the GPU's batches move segments where they lie instead of through staging.
enum Bytes {
    Heap(Vec<u8>),
    #[cfg(feature = "cuda")]
    Pinned(gcmx::cuda::PinnedBuffer),
}

/// Whether a window's buffer is page-locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pinning {
    /// Ordinary memory: the CPU's windows, and the GPU's where it refused to page-lock one.
    No,
    /// A GPU stream's first window: page-locked if a kept one is at hand, else ordinary memory
    /// (mapped as written), so that a short stream does not pay to page-lock a whole window,
    /// which takes longer than the GPU's open (benches/results.md).
    IfKept,
    /// Page-locked: the stream has outgrown its first window ([`Window::pin_from_now`]).
    Yes,
}

impl Bytes {
    /// `len` zero bytes, page-locked when `pinned` and the GPU allows it; an error (not an abort)
    /// without memory. Ordinary memory is zeroed pages, mapped only as they are first written.
    fn zeroed(len: usize, pinned: bool) -> io::Result<Bytes> {
        #[cfg(feature = "cuda")]
        if pinned && let Ok(p) = gcmx::cuda::PinnedBuffer::zeroed(len) {
            return Ok(Bytes::Pinned(p));
        }
        let _ = pinned;
        let heap =
            bytemuck::allocation::try_zeroed_slice_box::<u8>(len).map_err(|()| no_memory(len))?;
        Ok(Bytes::Heap(heap.into_vec()))
    }

    fn is_pinned(&self) -> bool {
        #[cfg(feature = "cuda")]
        if let Bytes::Pinned(_) = self {
            return true;
        }
        false
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Heap(v) => v,
            #[cfg(feature = "cuda")]
            Bytes::Pinned(p) => p,
        }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        match self {
            Bytes::Heap(v) => v,
            #[cfg(feature = "cuda")]
            Bytes::Pinned(p) => p,
        }
    }

    /// Grows the buffer to `len` bytes of ordinary memory (a page-locked one cannot grow), the
    /// old one wiped: it may hold plaintext.
    fn grow(&mut self, len: usize) -> io::Result<()> {
        let mut new = Vec::new();
        new.try_reserve_exact(len).map_err(|_| no_memory(len))?;
        new.extend_from_slice(self.as_slice());
        new.resize(len, 0);
        wipe(self.as_mut());
        *self = Bytes::Heap(new);
        Ok(())
    }
}

impl Window {
    /// An empty window (the GPU's when `gpu`: [`Pinning::IfKept`]), allocated at its first use.
    pub(crate) fn new(gpu: bool) -> Window {
        Window {
            bytes: Bytes::Heap(Vec::new()),
            high_water: 0,
            plain: false,
            whole: false,
            pin: if gpu { Pinning::IfKept } else { Pinning::No },
        }
    }

    /// An empty window that is page-locked from its first use.
    pub(crate) fn pinned() -> Window {
        let mut w = Window::new(true);
        w.pin = Pinning::Yes;
        w
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes.as_slice().len()
    }

    /// Whether the window is the GPU's (page-locked, or to be once the stream outgrows it).
    pub(crate) fn for_gpu(&self) -> bool {
        self.pin != Pinning::No
    }

    /// Marks the window page-locked: a test drives the GPU's paths on the CPU so.
    #[cfg(test)]
    pub(crate) fn pretend_gpu(&mut self) {
        self.pin = Pinning::Yes;
    }

    pub(crate) fn get(&self, range: Range<usize>) -> &[u8] {
        &self.bytes.as_slice()[range]
    }

    /// The bytes in `range`, to be written: from then on they may hold plaintext.
    pub(crate) fn get_mut(&mut self, range: Range<usize>) -> &mut [u8] {
        self.plain = true;
        self.high_water = self.high_water.max(range.end);
        &mut self.bytes.as_mut()[range]
    }

    /// The bytes in `range`, to receive ciphertext: nothing secret is written through it, so it
    /// does not count as written (the open marks what it turns into plaintext), and a window
    /// handed whole to a source that fills a segment's bytes needs no wipe past them.
    pub(crate) fn input_mut(&mut self, range: Range<usize>) -> &mut [u8] {
        &mut self.bytes.as_mut()[range]
    }

    /// Everything up to `end` was sealed: plaintext remains only if bytes past `end` were ever
    /// written (a larger earlier window).
    pub(crate) fn sealed(&mut self, end: usize) {
        self.plain = self.high_water.min(self.len()) > end;
    }

    /// Whether what was written may hold plaintext.
    #[cfg(test)]
    pub(crate) fn holds_plaintext(&self) -> bool {
        self.plain
    }

    /// Wipes what was written, if it may hold plaintext.
    pub(crate) fn wipe(&mut self) {
        if self.plain {
            let used = self.high_water.min(self.len());
            wipe(&mut self.bytes.as_mut()[..used]);
            self.plain = false;
        }
    }

    /// Makes the buffer at least `needed` bytes long, for a window of at most `cap`. The first
    /// allocation takes the whole window (up to 256 MiB: a kept buffer, else zeroed pages,
    /// mapped only as written), so a long stream never copies it to a larger one; beyond, it
    /// grows by doubling, the old buffer wiped. Where the system refuses the whole window (a
    /// memory limit), it takes what is needed and grows as data comes; an error if even that
    /// cannot be had.
    pub(crate) fn reserve(&mut self, needed: usize, cap: usize) -> io::Result<()> {
        if self.len() >= needed {
            return Ok(());
        }
        if self.len() > 0 {
            self.whole = false;
            let want = self.len().saturating_mul(2).min(cap).max(needed);
            return self.bytes.grow(want);
        }
        let len = whole_len(needed.max(cap.min(WHOLE_WINDOW_MAX)));
        let pinned = match self.pin {
            Pinning::No => None,
            Pinning::IfKept => spare::take(len, true),
            Pinning::Yes => spare::take(len, true).or_else(|| Bytes::zeroed(len, true).ok()),
        };
        let whole = pinned.or_else(|| spare::take(len, false));
        match whole.map_or_else(|| Bytes::zeroed(len, false), Ok) {
            Ok(b) => {
                self.bytes = b;
                self.whole = true;
                // Where the GPU cannot page-lock it, the window is an ordinary one from now on.
                if self.pin == Pinning::Yes && !self.bytes.is_pinned() {
                    self.pin = Pinning::No;
                }
            }
            Err(_) => {
                self.pin = Pinning::No;
                self.bytes = Bytes::zeroed(needed, false)?;
            }
        }
        Ok(())
    }

    /// Between windows of a GPU stream that outgrew its first: a [`Pinning::IfKept`] window in
    /// ordinary memory moves to a page-locked buffer, kept or new, for the rest of the stream
    /// (the old one wiped). Its bytes are not carried over: call it before the next window.
    pub(crate) fn pin_from_now(&mut self) {
        if self.pin != Pinning::IfKept {
            return;
        }
        self.pin = Pinning::Yes;
        if self.len() == 0 || self.bytes.is_pinned() || !self.whole {
            return;
        }
        let len = self.len();
        match spare::take(len, true).or_else(|| Bytes::zeroed(len, true).ok()) {
            Some(new) if new.is_pinned() => {
                self.wipe();
                self.bytes = new;
                self.high_water = 0;
            }
            _ => self.pin = Pinning::No,
        }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // Wiped before its memory is given back or kept.
        self.wipe();
        if self.whole {
            spare::give(mem::replace(&mut self.bytes, Bytes::Heap(Vec::new())));
        }
    }
}

/// Window buffers kept between streams, holding no plaintext. A fresh buffer costs a page fault
/// and zeroing per page at its first write (streams that did not keep their windows ran at
/// 55-70 % of the speed, benches/results.md), a page-locked one its locking too. At most a GPU
/// writer's two windows and a reader's are kept: what one GPU writer holds while it runs.
mod spare {
    use std::sync::Mutex;

    use super::{Bytes, WHOLE_WINDOW_MAX, whole_len};

    /// Buffers kept at most, and their bytes together.
    const KEEP: usize = 3;
    const KEEP_BYTES: usize = KEEP * whole_len(WHOLE_WINDOW_MAX);

    static SPARE: Mutex<Vec<Bytes>> = Mutex::new(Vec::new());

    /// A kept buffer of exactly `len` bytes, page-locked or not as `pinned` says.
    pub(super) fn take(len: usize, pinned: bool) -> Option<Bytes> {
        let mut kept = SPARE.lock().ok()?;
        let i = kept
            .iter()
            .position(|b| b.as_slice().len() == len && b.is_pinned() == pinned)?;
        Some(kept.swap_remove(i))
    }

    /// Keeps `buf` (holding no plaintext) for a later stream, if there is room.
    pub(super) fn give(buf: Bytes) {
        if buf.as_slice().is_empty() {
            return;
        }
        if let Ok(mut kept) = SPARE.lock() {
            let held: usize = kept.iter().map(|b| b.as_slice().len()).sum();
            if kept.len() < KEEP && held.saturating_add(buf.as_slice().len()) <= KEEP_BYTES {
                kept.push(buf);
            }
        }
    }
}
