//! GF(2^128) arithmetic in the POLYVAL domain, the form every gcmx backend computes GHASH in.
//!
//! A GHASH block read as a **big-endian** 128-bit integer is a POLYVAL field element (RFC 8452,
//! appendix A). With `H' = mulX(H)`, POLYVAL's Montgomery product `dot(a, b) = a·b·x^-128` gives
//! `dot(a, H') = a·h`, where `h` is GHASH's hash key as a field element. So the GHASH state after
//! hashing blocks `X_1..X_n` from zero is `S = Σ X_i·h^(n−i+1)`, with every value a plain `u128`.
//!
//! Multiplication uses the constant-time portable code of the `polyval` crate (`hazmat`): no
//! branch and no memory index depends on its operands.

use polyval::hazmat::FieldElement;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// `dot(a, b) = a·b·x^-128 mod x^128 + x^127 + x^126 + x^121 + 1`, constant time.
///
/// ```
/// use gcmx_core::backend::{dot, MONT_ONE};
/// let (a, b, c) = (3u128 << 100, 0x1234u128, 0x9876u128 << 64);
/// assert_eq!(dot(a ^ b, c), dot(a, c) ^ dot(b, c)); // linear
/// assert_eq!(dot(a, MONT_ONE), a);                   // x^128 is Montgomery's one
/// ```
#[inline]
pub fn dot(a: u128, b: u128) -> u128 {
    u128::from(FieldElement::from(a) * FieldElement::from(b))
}

/// `mulX(v)`: multiply by `x` modulo POLYVAL's polynomial, constant time (RFC 8452, appendix A).
#[inline]
pub(crate) fn mulx(v: u128) -> u128 {
    let top = v >> 127;
    (v << 1) ^ (top.wrapping_neg() & 0xC200_0000_0000_0000_0000_0000_0000_0001)
}

/// GHASH's hash key `H = AES_K(0^128)` in the POLYVAL domain, with its Montgomery powers.
///
/// `power(k)` is `Q_k` with `Q_1 = H'` and `Q_(k+1) = dot(Q_k, H')`, so `dot(a, Q_k) = a·h^k`.
/// Zeroized on drop.
///
/// ```
/// use gcmx_core::backend::{dot, HashKey};
/// let hk = HashKey::new([7u8; 16]);
/// assert_eq!(hk.power(1), hk.h_prime());
/// assert_eq!(hk.power(5), dot(hk.power(2), hk.power(3)));
/// ```
#[derive(Clone)]
pub struct HashKey {
    h_prime: u128,
}

impl HashKey {
    /// Build from `H = AES_K(0^128)` as the 16 bytes GCM defines.
    pub fn new(h: [u8; 16]) -> Self {
        let mut hv = u128::from_be_bytes(h);
        let h_prime = mulx(hv);
        hv.zeroize();
        HashKey { h_prime }
    }

    /// Build from `H' = mulX(H)` itself (a key that already holds it).
    pub(crate) fn from_h_prime(h_prime: u128) -> Self {
        HashKey { h_prime }
    }

    /// `H' = mulX(H)`, the POLYVAL key that gives GHASH.
    pub fn h_prime(&self) -> u128 {
        self.h_prime
    }

    /// `Q_k`, the Montgomery form of `h^k` (`k ≥ 1`; `Q_0` is the Montgomery one, `x^128`).
    ///
    /// Square-and-multiply over the bits of `k` (public), about `2·log2(k)` products.
    pub fn power(&self, k: u64) -> u128 {
        // Montgomery one: dot(a, R) = a, with R = x^128 mod P = mulX^128(1).
        let mut result: Option<u128> = None;
        let mut base = self.h_prime;
        let mut e = k;
        while e != 0 {
            if e & 1 == 1 {
                result = Some(match result {
                    None => base,
                    Some(r) => dot(r, base),
                });
            }
            e >>= 1;
            if e != 0 {
                base = dot(base, base);
            }
        }
        result.unwrap_or(MONT_ONE)
    }

    /// The GHASH state after absorbing one block `x` from state `s`: `dot(s ^ x, H')`.
    #[inline]
    pub fn absorb(&self, s: u128, x: u128) -> u128 {
        dot(s ^ x, self.h_prime)
    }
}

/// `x^128 mod P`: the Montgomery form of 1 (`dot(a, MONT_ONE) = a`).
pub const MONT_ONE: u128 = 0xC200_0000_0000_0000_0000_0000_0000_0001;

impl Drop for HashKey {
    fn drop(&mut self) {
        self.h_prime.zeroize();
    }
}

impl ZeroizeOnDrop for HashKey {}

impl core::fmt::Debug for HashKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HashKey { .. }")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SP 800-38D algorithm 1 on big-endian integers: the specification's multiplication.
    fn gcm_mult(x: u128, y: u128) -> u128 {
        let r = 0xE1u128 << 120;
        let (mut z, mut v) = (0u128, y);
        for i in 0..128 {
            if (x >> (127 - i)) & 1 == 1 {
                z ^= v;
            }
            v = if v & 1 == 1 { (v >> 1) ^ r } else { v >> 1 };
        }
        z
    }

    fn rnd(state: &mut u128) -> u128 {
        // xorshift-style generator, deterministic
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// `mulX` shifts left and reduces the bit shifted out.
    #[test]
    fn mulx_shifts_and_reduces() {
        assert_eq!(mulx(1), 2);
        assert_eq!(mulx(1 << 127), 0xC2000000000000000000000000000001);
    }

    #[test]
    fn absorb_matches_spec_multiplication() {
        let mut st = 0x1234_5678_9abc_def0_1122_3344_5566_7788u128;
        for _ in 0..200 {
            let h = rnd(&mut st);
            let hk = HashKey::new(h.to_be_bytes());
            let (mut s_spec, mut s) = (0u128, 0u128);
            for _ in 0..5 {
                let x = rnd(&mut st);
                s_spec = gcm_mult(s_spec ^ x, h);
                s = hk.absorb(s, x);
            }
            assert_eq!(s, s_spec);
        }
    }

    #[test]
    fn spec_test_case_2_ghash() {
        // GCM spec test case 2: H = AES_0(0), C = 0388dace60b6a392f328c2b971b2fe78, len block 0 || 128.
        let hk = HashKey::new(0x66e94bd4ef8a2c3b884cfa59ca342b2eu128.to_be_bytes());
        let s = hk.absorb(0, 0x0388dace60b6a392f328c2b971b2fe78);
        let s = hk.absorb(s, 0x80);
        assert_eq!(s, 0xf38cbb1ad69223dcc3457ae5b6b0f885);
    }

    #[test]
    fn powers_and_montgomery_one() {
        let hk = HashKey::new([0xA5; 16]);
        let a = 0xdead_beef_u128 << 77;
        assert_eq!(dot(a, MONT_ONE), a);
        assert_eq!(hk.power(0), MONT_ONE);
        let mut q = hk.h_prime();
        for k in 2..70u64 {
            q = dot(q, hk.h_prime());
            assert_eq!(hk.power(k), q, "k = {k}");
        }
    }
}
