//! How the adapters run: the backend and the window size.

use gcmx::Backend;

use crate::engine;
use crate::error::{Error, Result};
use crate::layout::Layout;

/// Largest window (ciphertext bytes of one batch) that [`Options::with_window_bytes`] may ask for.
pub const MAX_WINDOW_BYTES: usize = 1 << 30;

/// Most segments in one window, whatever the segment size (bounds the bookkeeping).
const MAX_WINDOW_SEGMENTS: usize = 1 << 16;

/// How a keyset's adapters run ([`Keyset::with_options`]): the `gcmx` backend, and the bytes
/// of segments in one batch (the window). Memory is one or two windows per adapter (a writer's
/// large writes use a ring of two windows' worth), whatever the stream's length.
///
/// The defaults: [`Backend::Auto`]; windows of 8 MiB on the CPU (they stay in the last-level
/// cache between copy and crypto), at least two segments per core, and 256 MiB on the GPU.
///
/// ```
/// use gcmx_stream::{Backend, KeySize, Keyset, Options};
/// let opts = Options::default().with_backend(Backend::Cpu).with_window_bytes(4 << 20);
/// let keyset = Keyset::generate(KeySize::Aes256, 1 << 20)?.with_options(opts);
/// # Ok::<(), gcmx_stream::Error>(())
/// ```
///
/// [`Keyset::with_options`]: crate::Keyset::with_options
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    backend: Backend,
    window_bytes: usize,
}

impl Options {
    /// The `gcmx` backend that seals and opens the segments.
    pub fn with_backend(self, backend: Backend) -> Options {
        Options { backend, ..self }
    }

    /// Target ciphertext bytes per window (one batch): at least a segment (one per core within
    /// 256 MiB), at most [`MAX_WINDOW_BYTES`] (more makes the adapters' constructors fail with
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)); 0 is the backend's default.
    pub fn with_window_bytes(self, window_bytes: usize) -> Options {
        Options {
            window_bytes,
            ..self
        }
    }

    pub(crate) fn backend(&self) -> Backend {
        self.backend
    }

    fn target_window_bytes(&self) -> usize {
        if self.window_bytes != 0 {
            self.window_bytes
        } else if engine::is_gpu(self.backend) {
            // GPUs want large batches.
            256 << 20
        } else {
            8 << 20
        }
    }

    /// Segments per window; `size_hint` (the stream's size, when known) caps it at the stream.
    pub(crate) fn window_segments(&self, layout: &Layout, size_hint: Option<u64>) -> Result<usize> {
        let seg = layout.segment_size();
        if self.window_bytes > MAX_WINDOW_BYTES {
            return Err(Error::invalid(format!(
                "window of {} bytes is too large (at most {MAX_WINDOW_BYTES})",
                self.window_bytes
            )));
        }
        let mut n = (self.target_window_bytes() / seg).max(1);
        // A segment per core where they are small enough, by default two: a window ends with its
        // slowest segment, and cores that finish early then take the rest instead of waiting.
        // rayon's threads open the segments (and counting them is free, where the system's
        // count reads its limits at every call).
        let threads = rayon::current_num_threads();
        let per_core = if self.window_bytes == 0 { 2 } else { 1 };
        let least = threads.saturating_mul(per_core);
        if n < least && least.saturating_mul(seg) <= 256 << 20 {
            n = least;
        }
        if let Some(size) = size_hint {
            let need = layout.segment_count(size).saturating_add(1);
            n = n.min(usize::try_from(need).unwrap_or(usize::MAX));
        }
        Ok(n.clamp(1, MAX_WINDOW_SEGMENTS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_hold_whole_segments_within_bounds() {
        let l = Layout::new(1 << 20, 32);
        let o = Options::default().with_window_bytes(8 << 20);
        assert!(o.window_segments(&l, None).unwrap() >= 8);
        assert_eq!(o.window_segments(&l, Some(10)).unwrap(), 2);
        let one = Options::default().with_window_bytes(1);
        assert!(one.window_segments(&l, Some(0)).unwrap() >= 1);
        let big = Options::default().with_window_bytes(MAX_WINDOW_BYTES + 1);
        assert!(big.window_segments(&l, None).is_err());
        let tiny = Layout::new(41, 16);
        let n = Options::default().window_segments(&tiny, None).unwrap();
        assert_eq!(n, MAX_WINDOW_SEGMENTS);
    }
}
