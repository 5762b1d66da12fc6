//! The powers-of-H combination of partial GHASH values: the one place where gcmx joins hashes of
//! separate runs of blocks. The CPU parallel backend and the CUDA backend both hash runs
//! independently and join them here.
//!
//! A run of blocks `X_1..X_n` has the value `Σ X_i·h^(n−i+1)`, the GHASH state after hashing only
//! that run from zero. Two consecutive runs A, B join as `A·h^len(B) + B`, that is
//! `dot(A, Q_len(B)) ^ B`. The join is associative, so a tree of depth `log2(runs)` gives the same
//! value as hashing everything in order. Leading zero blocks do not change a run's value.

use zeroize::{Zeroize, Zeroizing};

use crate::field::{HashKey, dot};

/// The GHASH value of a run of `blocks` consecutive 16-byte blocks.
///
/// ```
/// use gcmx_core::backend::{HashKey, Partial, tree_reduce};
/// let hk = HashKey::new([9u8; 16]);
/// let xs = [1u128, 2, 3, 4, 5];
/// let whole = Partial::hash_blocks(&hk, &xs);
/// let parts = [Partial::hash_blocks(&hk, &xs[..2]), Partial::hash_blocks(&hk, &xs[2..])];
/// assert_eq!(tree_reduce(&hk, &parts), whole);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Zeroize)]
pub struct Partial {
    /// `Σ X_i·h^(n−i+1)` as a POLYVAL-domain value (a GHASH state read big-endian).
    pub value: u128,
    /// `n`, the number of blocks in the run (zero for an empty run).
    pub blocks: u64,
}

impl Partial {
    /// The empty run: the identity of the join.
    pub const EMPTY: Partial = Partial {
        value: 0,
        blocks: 0,
    };

    /// Hash a run of blocks given as big-endian values, block by block (a reference, not fast).
    pub fn hash_blocks(hk: &HashKey, blocks: &[u128]) -> Partial {
        let value = blocks.iter().fold(0, |s, &x| hk.absorb(s, x));
        Partial {
            value,
            blocks: blocks.len() as u64,
        }
    }
}

/// Join runs given in message order by a pairwise tree: two consecutive runs A, B join as
/// `dot(A.value, Q_len(B)) ^ B.value`.
///
/// Each level joins neighbours `(2i, 2i+1)`. The two powers `Q_len` used last are kept: runs of
/// equal length (the usual case) reuse one through a level, and where a level's runs are twice
/// the last ones (equal runs, one level up) the power is that one squared, one multiplication
/// instead of an exponentiation. The levels are reduced in place in one vector, which is wiped
/// before it is freed, as are the kept powers: partial hashes and powers of H are secret.
pub fn tree_reduce(hk: &HashKey, parts: &[Partial]) -> Partial {
    let mut level: Zeroizing<Vec<Partial>> = Zeroizing::new(parts.to_vec());
    let mut n = level.len();
    // The last two powers used, with their exponents, the latest first.
    let mut q = Zeroizing::new([(0u64, 0u128); 2]);
    while n > 1 {
        for i in 0..n / 2 {
            let (a, b) = (level[2 * i], level[2 * i + 1]);
            level[i] = if b.blocks == 0 {
                Partial {
                    value: a.value ^ b.value,
                    blocks: a.blocks,
                }
            } else {
                if q[0].0 != b.blocks {
                    let power = if q[1].0 == b.blocks {
                        q[1].1
                    } else if let Some(&(_, half)) = q.iter().find(|p| p.0 * 2 == b.blocks) {
                        dot(half, half)
                    } else {
                        hk.power(b.blocks)
                    };
                    q[1] = q[0];
                    q[0] = (b.blocks, power);
                }
                Partial {
                    value: dot(a.value, q[0].1) ^ b.value,
                    blocks: a.blocks + b.blocks,
                }
            };
        }
        if n % 2 == 1 {
            level[n / 2] = level[n - 1];
        }
        n = n.div_ceil(2);
    }
    level.first().copied().unwrap_or(Partial::EMPTY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_equals_sequential_for_every_split() {
        let hk = HashKey::new(*b"0123456789abcdef");
        let xs: Vec<u128> = (0..40u128)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) ^ 0x77)
            .collect();
        let whole = Partial::hash_blocks(&hk, &xs);
        for size in 1..=xs.len() {
            let parts: Vec<Partial> = xs
                .chunks(size)
                .map(|c| Partial::hash_blocks(&hk, c))
                .collect();
            assert_eq!(tree_reduce(&hk, &parts), whole, "chunk size {size}");
        }
        // empty runs anywhere are neutral
        let parts = [
            Partial::EMPTY,
            Partial::hash_blocks(&hk, &xs[..7]),
            Partial::EMPTY,
            Partial::hash_blocks(&hk, &xs[7..]),
        ];
        assert_eq!(tree_reduce(&hk, &parts), whole);
        assert_eq!(tree_reduce(&hk, &[]), Partial::EMPTY);
    }

    #[test]
    fn leading_zero_blocks_are_neutral() {
        let hk = HashKey::new([3u8; 16]);
        let xs = [5u128, 6, 7];
        let padded = [0u128, 0, 5, 6, 7];
        assert_eq!(
            Partial::hash_blocks(&hk, &xs).value,
            Partial::hash_blocks(&hk, &padded).value
        );
    }
}
