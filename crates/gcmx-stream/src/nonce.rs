//! A segment's nonce: the stream's prefix, the segment's counter and the last-segment flag.
//!
//! ```text
//! nonce_i = nonce_prefix (7 bytes) || i as u32 big-endian || (0x01 if last else 0x00)
//! ```

use crate::error::{Error, Result};
use crate::layout::NONCE_PREFIX_LEN;

/// AES-GCM nonce length of each segment.
pub(crate) const NONCE_LEN: usize = 12;

/// The nonce of one segment of one stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Nonce {
    prefix: [u8; NONCE_PREFIX_LEN],
    counter: u32,
    last: bool,
}

impl Nonce {
    /// The nonce of segment `index`, the stream's last if `last`: an error past the counter's
    /// 32 bits (a second line of defence: no [`Span`](crate::layout::Span) has such a segment).
    pub(crate) fn new(prefix: &[u8; NONCE_PREFIX_LEN], index: u64, last: bool) -> Result<Nonce> {
        let counter = u32::try_from(index)
            .map_err(|_| Error::format("a stream has at most 2^32 segments"))?;
        Ok(Nonce {
            prefix: *prefix,
            counter,
            last,
        })
    }

    pub(crate) fn bytes(&self) -> [u8; NONCE_LEN] {
        let mut n = [0u8; NONCE_LEN];
        n[..NONCE_PREFIX_LEN].copy_from_slice(&self.prefix);
        n[NONCE_PREFIX_LEN..NONCE_LEN - 1].copy_from_slice(&self.counter.to_be_bytes());
        n[NONCE_LEN - 1] = u8::from(self.last);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonce_layout() {
        let n = Nonce::new(&[1, 2, 3, 4, 5, 6, 7], 0x0a0b0c0d, true).unwrap();
        assert_eq!(n.bytes(), [1, 2, 3, 4, 5, 6, 7, 0x0a, 0x0b, 0x0c, 0x0d, 1]);
        let n = Nonce::new(&[0; 7], 1, false).unwrap();
        assert_eq!(n.bytes(), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
        assert!(Nonce::new(&[0; 7], u64::from(u32::MAX), true).is_ok());
        assert!(Nonce::new(&[0; 7], 1 << 32, false).is_err());
    }
}
