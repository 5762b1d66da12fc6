//! Many copies of one message, each starting on a cache line, in one allocation.

/// `count` messages of `size` bytes, 64-byte aligned, one after another.
#[derive(Clone, Debug)]
pub(crate) struct Arena {
    bytes: Vec<u8>,
    start: usize,
    stride: usize,
    size: usize,
    count: usize,
}

impl Arena {
    /// `count` copies of `msg`.
    pub(crate) fn filled(msg: &[u8], count: usize) -> Arena {
        let stride = msg.len().div_ceil(64).max(1) * 64;
        let bytes = vec![0u8; stride * count + 64];
        let start = bytes.as_ptr().align_offset(64);
        let mut a = Arena {
            bytes,
            start,
            stride,
            size: msg.len(),
            count,
        };
        a.refill(msg);
        a
    }

    /// Every message set to `msg` again.
    pub(crate) fn refill(&mut self, msg: &[u8]) {
        for i in 0..self.count {
            self.msg_mut(i).copy_from_slice(msg);
        }
    }

    /// How many messages.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Message `i`.
    pub(crate) fn msg(&self, i: usize) -> &[u8] {
        let at = self.start + i * self.stride;
        &self.bytes[at..at + self.size]
    }

    /// Message `i`, writable.
    pub(crate) fn msg_mut(&mut self, i: usize) -> &mut [u8] {
        let at = self.start + i * self.stride;
        &mut self.bytes[at..at + self.size]
    }
}
