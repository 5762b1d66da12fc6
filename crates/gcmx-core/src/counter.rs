//! GCM's counter arithmetic (SP 800-38D, inc32): the one place it is written. The counter is the last
//! 32-bit big-endian word of J0; keystream block `i` of a message (block 0 encrypts its first 16 bytes)
//! uses `ctr0 + 1 + i` modulo 2^32, the other 96 bits of J0 unchanged. Backends that build counter
//! blocks themselves (the CPU's `ctr` flavour, the GPU kernels' launch parameters) start from here.

/// The counter of one message: `ctr0`, the last word of its J0 (secret when the nonce is not 12
/// bytes, so its `Debug` shows nothing).
///
/// ```
/// use gcmx_core::backend::Counter;
/// let mut j0 = [7u8; 16];
/// j0[12..].copy_from_slice(&0xffff_fffeu32.to_be_bytes());
/// let c = Counter::of_j0(&j0);
/// assert_eq!(c.initial(), 0xffff_fffe);
/// assert_eq!(c.of_block(0), 0xffff_ffff);
/// assert_eq!(c.of_block(1), 0); // wraps, the other 96 bits stay
/// assert_eq!(&Counter::block(&j0, 1)[..12], &j0[..12]);
/// assert_eq!(&Counter::block(&j0, 1)[12..], &[0, 0, 0, 0]);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    ctr0: u32,
}

impl Counter {
    /// The counter of the message whose pre-counter block is `j0`.
    pub fn of_j0(j0: &[u8; 16]) -> Counter {
        Counter {
            ctr0: u32::from_be_bytes([j0[12], j0[13], j0[14], j0[15]]),
        }
    }

    /// `ctr0` itself: the counter of J0, whose block masks the tag.
    pub fn initial(self) -> u32 {
        self.ctr0
    }

    /// The counter of keystream block `i`: `ctr0 + 1 + i` modulo 2^32.
    pub fn of_block(self, i: u64) -> u32 {
        // Truncating `i` is the point: the counter is 32 bits and wraps.
        self.ctr0.wrapping_add(1).wrapping_add(i as u32)
    }

    /// The counter block of keystream block `i`: J0 with its last word replaced by [`of_block`].
    ///
    /// [`of_block`]: Counter::of_block
    pub fn block(j0: &[u8; 16], i: u64) -> [u8; 16] {
        let mut b = *j0;
        b[12..].copy_from_slice(&Counter::of_j0(j0).of_block(i).to_be_bytes());
        b
    }
}

impl core::fmt::Debug for Counter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Counter(..)")
    }
}
