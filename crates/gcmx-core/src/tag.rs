//! The constant-time comparison of a received tag with the expected one, for every path whose
//! kernel does not compare it itself (the stitched x86-64 kernels do, in registers).

use subtle::ConstantTimeEq;

/// Whether `tag` is the first `tag.len()` bytes of `expected`, compared in constant time. A tag
/// longer than 16 bytes or empty never matches.
///
/// ```
/// let full = [7u8; 16];
/// assert!(gcmx_core::backend::tag_matches(&full, &[7u8; 12]));
/// assert!(!gcmx_core::backend::tag_matches(&full, &[7u8; 17]));
/// assert!(!gcmx_core::backend::tag_matches(&full, &[]));
/// ```
#[inline]
pub fn tag_matches(expected: &[u8; 16], tag: &[u8]) -> bool {
    let n = tag.len();
    if n == 0 || n > 16 {
        return false;
    }
    // The received tag zero-padded, both read as one 128-bit integer (byte `i` in bits
    // `8i..8i + 8`), the bytes past the tag's length (public) masked off, and the difference
    // folded to 64 bits and tested for zero without a branch (`subtle`'s `ct_eq`). One XOR over all the bytes instead
    // of sixteen byte comparisons, each of which `subtle` passes through an optimisation barrier.
    // The expected tag is secret until it matches (for a forged message it is the tag that
    // would make the forgery pass): it and the difference stay in registers.
    let t = match <&[u8; 16]>::try_from(tag) {
        Ok(full) => *full,
        Err(_) => {
            let mut t = [0u8; 16];
            t[..n].copy_from_slice(tag);
            t
        }
    };
    let keep = u128::MAX >> (8 * (16 - n));
    let d = (u128::from_le_bytes(*expected) ^ u128::from_le_bytes(t)) & keep;
    let folded = (d as u64) | (d >> 64) as u64;
    folded.ct_eq(&0).into()
}

#[cfg(test)]
mod tests {
    use super::tag_matches;

    /// `tag_matches` is "`tag` is a non-empty prefix of `expected`" for every length and every
    /// differing byte.
    #[test]
    fn tag_matches_is_prefix_equality() {
        let expected: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0xa5);
        for n in 0..=17usize {
            let mut t: Vec<u8> = (0..n)
                .map(|i| expected.get(i).copied().unwrap_or(0))
                .collect();
            assert_eq!(
                tag_matches(&expected, &t),
                (1..=16).contains(&n),
                "length {n}"
            );
            for i in 0..n {
                for bit in [0x01u8, 0x80] {
                    t[i] ^= bit;
                    assert!(
                        !tag_matches(&expected, &t),
                        "length {n}, byte {i}, bit {bit:#x}"
                    );
                    t[i] ^= bit;
                }
            }
        }
    }
}
