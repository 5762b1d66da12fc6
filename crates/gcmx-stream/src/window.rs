//! A window: the buffer where an adapter's segments are sealed or opened a batch at a time. It
//! knows how much of it was ever written and whether that may hold plaintext (then it is wiped
//! before its memory is given back), and, for the GPU, whether it is page-locked.

use std::io;
use std::mem;
use std::ops::Range;

use crate::error::no_memory;
use crate::wipe::wipe;

/// Windows of up to this many bytes (the GPU's default window, and the byte of look-ahead that
/// a reader's window holds past its segments) are allocated whole at their first use.
const WHOLE_WINDOW_MAX: usize = (256 << 20) + 1;

/// Whole windows are allocated in multiples of this.
const WINDOW_GRAIN: usize = 64 << 10;

/// The length allocated for a whole window of `len` bytes: rounded up, with room for one byte
/// more, so that a writer's windows (whole segments) and a reader's (the same and a byte of
/// look-ahead) are of one length, and a kept page-locked buffer serves either.
const fn whole_len(len: usize) -> usize {
    (len + 1).next_multiple_of(WINDOW_GRAIN)
}

/// A window's buffer.
pub(crate) struct Window {
    bytes: Bytes,
    /// How much of the buffer was ever written.
    high_water: usize,
    /// Whether what was written may hold plaintext: then it is wiped on drop.
    plain: bool,
    /// Allocated whole: a page-locked one is kept for a later stream once it holds no plaintext.
    whole: bool,
    pin: Pinning,
}

/// The memory of a window: ordinary, or (feature `cuda`, windows of the GPU engine) page-locked
/// for the buffer's whole life, so that the GPU's batches move the window's segments where they
/// lie instead of copying them through staging, and no call pays to page-lock them.
#[derive(Default)]
enum Bytes {
    #[default]
    Empty,
    Heap(Vec<u8>),
    #[cfg(feature = "cuda")]
    Pinned(gcmx::cuda::PinnedBuffer),
}

/// Whether a window's buffer is page-locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pinning {
    /// Ordinary memory: the CPU's windows, and the GPU's where it refused to page-lock one.
    No,
    /// A GPU stream's first window: page-locked if a kept one is at hand, else ordinary memory,
    /// whose pages are mapped only as they are written, so that a short stream does not pay to
    /// page-lock a whole window (which takes longer than the GPU takes to open it,
    /// benches/results.md).
    IfKept,
    /// Page-locked: the stream has outgrown its first window ([`Window::pin_from_now`]).
    Yes,
}

impl Bytes {
    /// `len` zero bytes, page-locked when `pinned` and the GPU allows it (else ordinary); an
    /// error (not an abort) when the memory cannot be had. Ordinary memory comes from the
    /// allocator's zeroed pages, which the system maps only as they are first written.
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
            Bytes::Empty => &[],
            Bytes::Heap(v) => v,
            #[cfg(feature = "cuda")]
            Bytes::Pinned(p) => p,
        }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        match self {
            Bytes::Empty => &mut [],
            Bytes::Heap(v) => v,
            #[cfg(feature = "cuda")]
            Bytes::Pinned(p) => p,
        }
    }

    /// Grows the buffer to `len` bytes into ordinary memory (a page-locked buffer cannot grow),
    /// the old one wiped: it may hold plaintext.
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
    /// An empty window, page-locked as the GPU's are (see [`Pinning::IfKept`]) when `gpu`: its
    /// buffer is allocated at its first use.
    pub(crate) fn new(gpu: bool) -> Window {
        Window {
            bytes: Bytes::Empty,
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

    /// The buffer's length.
    pub(crate) fn len(&self) -> usize {
        self.bytes.as_slice().len()
    }

    /// Whether the window is the GPU's (page-locked, or to be once the stream outgrows it).
    pub(crate) fn for_gpu(&self) -> bool {
        self.pin != Pinning::No
    }

    /// Marks the window page-locked for the GPU: a test drives the GPU's paths on the CPU so.
    #[cfg(test)]
    pub(crate) fn pretend_gpu(&mut self) {
        self.pin = Pinning::Yes;
    }

    /// The bytes in `range`.
    pub(crate) fn get(&self, range: Range<usize>) -> &[u8] {
        &self.bytes.as_slice()[range]
    }

    /// The bytes in `range`, to be written: from then on they may hold plaintext.
    pub(crate) fn get_mut(&mut self, range: Range<usize>) -> &mut [u8] {
        self.plain = true;
        self.high_water = self.high_water.max(range.end);
        &mut self.bytes.as_mut()[range]
    }

    /// The bytes in `range`, to receive ciphertext from a source: nothing secret is written
    /// through it, so it does not count as written (the open that follows marks, with
    /// [`Window::get_mut`], what it turns into plaintext). A source handed a whole window that
    /// returns a segment's bytes leaves the rest of the window unwiped at the end, as it was.
    pub(crate) fn input_mut(&mut self, range: Range<usize>) -> &mut [u8] {
        &mut self.bytes.as_mut()[range]
    }

    /// Every segment written so far was sealed and is ciphertext up to `end`: the window holds
    /// plaintext only if bytes past `end` were ever written (a larger earlier window).
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

    /// Makes the buffer at least `needed` bytes long, for a window of at most `cap` bytes. The
    /// first allocation takes the whole window (up to 256 MiB): for the GPU a page-locked one
    /// that an earlier stream left, else zeroed pages from the system, which are mapped only as
    /// they are first written (a short stream touches little memory). A long stream never
    /// copies its window to a larger one. Beyond 256 MiB it grows by doubling, the old buffer
    /// wiped. Where the system refuses the whole window (a memory limit), the first allocation
    /// is what is needed, and the window grows from there as data comes; an error when even
    /// that cannot be had.
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

    /// Between windows of a GPU stream that has outgrown its first: a window that is to be
    /// page-locked ([`Pinning::IfKept`]) but was given ordinary memory moves to a page-locked
    /// buffer, kept or new, for the rest of the stream (its old buffer wiped where it may hold
    /// plaintext). The window's bytes are not carried over: call it before the next window is
    /// written.
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
        // A window that may hold plaintext is wiped where it was used before its memory is
        // given back or kept.
        self.wipe();
        if self.whole {
            spare::give(mem::take(&mut self.bytes));
        }
    }
}

/// Window buffers kept between streams, holding no plaintext, page-locked ones (the GPU's) as
/// they are. A fresh buffer costs a page fault and the zeroing of every page at its first write
/// (on a 16-thread host, whose default CPU window is 32 MiB, streams that did not keep their
/// windows ran at 55-70 % of the speed of those that did; benches/results.md), and a page-locked
/// one its page-locking too (more than the GPU's work on it); a stream that follows another
/// reuses its buffers. At most a GPU writer's two windows and a reader's are kept: no more
/// memory than one writer on the GPU holds while it runs.
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
