//! A window's memory: ordinary, or (feature `cuda`, windows of the GPU engine) page-locked for the
//! buffer's whole life, so that the GPU's batches DMA the window's segments where they lie instead
//! of copying them through staging on the CPU's cores, and no call pays to page-lock them.

use std::io;
use std::ops::{Deref, DerefMut};

/// The bytes of a window: `heap`, or the page-locked buffer when there is one (then `heap` is
/// empty).
#[derive(Default)]
pub(crate) struct WinBuf {
    heap: Vec<u8>,
    /// `gcmx::cuda::PinnedBuffer`, never resized.
    #[cfg(feature = "cuda")]
    pinned: Option<gcmx::cuda::PinnedBuffer>,
}

impl From<Vec<u8>> for WinBuf {
    fn from(heap: Vec<u8>) -> Self {
        WinBuf {
            heap,
            #[cfg(feature = "cuda")]
            pinned: None,
        }
    }
}

impl Deref for WinBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        #[cfg(feature = "cuda")]
        if let Some(p) = &self.pinned {
            return p;
        }
        &self.heap
    }
}

impl DerefMut for WinBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        #[cfg(feature = "cuda")]
        if let Some(p) = &mut self.pinned {
            return p;
        }
        &mut self.heap
    }
}

impl WinBuf {
    /// `len` zero bytes, page-locked when `pinned` and the GPU allows it (else ordinary); an
    /// error (not an abort) when the memory cannot be had. Ordinary memory comes from the
    /// allocator's zeroed pages, which the system maps only as they are first written.
    pub(crate) fn zeroed(len: usize, pinned: bool) -> io::Result<WinBuf> {
        #[cfg(feature = "cuda")]
        if pinned && let Ok(p) = gcmx::cuda::PinnedBuffer::zeroed(len) {
            return Ok(WinBuf {
                heap: Vec::new(),
                pinned: Some(p),
            });
        }
        let _ = pinned;
        let heap = bytemuck::allocation::try_zeroed_slice_box::<u8>(len)
            .map_err(|()| crate::window::no_memory(len))?;
        Ok(WinBuf::from(heap.into_vec()))
    }

    /// Whether the bytes are page-locked.
    pub(crate) fn is_pinned(&self) -> bool {
        #[cfg(feature = "cuda")]
        if self.pinned.is_some() {
            return true;
        }
        false
    }

    /// The bytes as a growable vector. A page-locked buffer cannot grow: its bytes move to an
    /// ordinary one (the old one is wiped), which only windows grown past their first size do.
    pub(crate) fn vec(&mut self) -> &mut Vec<u8> {
        #[cfg(feature = "cuda")]
        if let Some(mut p) = self.pinned.take() {
            self.heap = p.to_vec();
            crate::window::wipe(&mut p);
        }
        &mut self.heap
    }

    /// Grows the buffer to at least `len` bytes ([`crate::window::grow`]); nothing to do, and no
    /// move to the heap, when it is that long already.
    pub(crate) fn grow(&mut self, len: usize) -> io::Result<()> {
        if self.len() >= len {
            return Ok(());
        }
        crate::window::grow(self.vec(), len)
    }
}
