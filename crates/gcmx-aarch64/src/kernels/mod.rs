//! The aarch64 kernels, in two variants compiled from one source:
//! - **eor3** (FEAT_AES, FEAT_PMULL, FEAT_SHA3): three-way XORs as one EOR3;
//! - **base** (FEAT_AES, FEAT_PMULL): the same with two EORs.
//!
//! The code is generic over `E` (EOR3 or not) and the number of AES rounds; the entry points
//! below instantiate it under `#[target_feature(enable = "aes")]` or `"aes,sha3"` and are
//! reached only through [`Keys`], which records the variant [`Level::detect`] found the core
//! able to run.
//!
//! The parts: [`bulk`] the main loop over whole steps of eight blocks (assembly: AES rounds on
//! all eight, the GHASH products of blocks `2j` and `2j + 1` after round `j`, the reduction
//! after round four); [`stitched`] a message around it (a seal's first step, the tail, short
//! messages in one step); [`ghash`] groups of up to eight blocks with one reduction, and the
//! powers of `H`; [`aes`] the key schedule, single blocks and counter blocks (one EXT each from
//! a 32-bit counter); [`ops`] the instructions. GHASH values are POLYVAL-domain `u128`s (a GCM
//! block read big-endian).
//!
//! Constant time: no branch and no memory address depends on the key, `H`, the counter, the
//! data or the GHASH state; branches and addresses depend only on lengths.

use inout::InOutBuf;
use zeroize::Zeroize;

mod aes;
mod bulk;
mod ghash;
mod ops;
mod stitched;

use aes::RoundKeys;
use ghash::{GROUP, Powers, Regs};
use ops::{V, from_u128, to_u128};

/// Which kernels a key runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// AES and PMULL.
    Base,
    /// Also SHA3 (EOR3).
    Eor3,
}

impl Level {
    /// The best kernels this core can run, if any. Rust's `aes` feature is FEAT_AES with
    /// FEAT_PMULL; its `sha3` is FEAT_SHA3 with FEAT_SHA512.
    pub(crate) fn detect() -> Option<Level> {
        if !std::arch::is_aarch64_feature_detected!("aes") {
            return None;
        }
        if std::arch::is_aarch64_feature_detected!("sha3") {
            Some(Level::Eor3)
        } else {
            Some(Level::Base)
        }
    }
}

/// Expanded key material. Built only by [`Keys::new`], for a level the core has; lives on the
/// heap (moving a key moves a pointer) and is wiped on drop.
#[derive(Clone)]
pub(crate) struct Keys {
    /// Round keys `0..=nr`, each the 16 bytes read little-endian.
    rk: RoundKeys,
    /// Rounds: 10, 12 or 14.
    nr: usize,
    /// The powers `Q_1..Q_8` of `H` in the layout of a step.
    powers: Powers,
    /// The kernels to run; the core has this level's features (checked in [`Keys::new`]).
    level: Level,
}

impl Drop for Keys {
    fn drop(&mut self) {
        self.rk.zeroize();
        self.powers.0.zeroize();
    }
}

/// Key set-up: expand the key, `H = E_K(0^128)`, `Q_1 = mulX(H)` and `Q_(k+1) = Q_k·Q_1`.
#[inline]
#[target_feature(enable = "aes")]
fn setup<const E: bool>(key: &[u8], keys: &mut Keys) {
    keys.nr = aes::expand(key, &mut keys.rk);
    let rk = &keys.rk;
    let h = match keys.nr {
        10 => aes::block::<10>(rk, ops::zero()),
        12 => aes::block::<12>(rk, ops::zero()),
        _ => aes::block::<14>(rk, ops::zero()),
    };
    let mut hb: [u8; 16] = bytemuck::cast(h);
    let mut q = [0u128; GROUP];
    q[0] = ghash::mulx(u128::from_be_bytes(hb));
    // The reduction constants only: `dot` needs no powers.
    let none = Powers::default();
    let r = Regs::new(&none);
    for k in 1..GROUP {
        q[k] = ghash::dot::<E>(&r, q[k - 1], q[0]);
    }
    keys.powers = Powers::from_q(&q);
    q.zeroize();
    hb.zeroize();
}

/// The bulk operations of a key, instantiated once per variant with its target features:
/// `$name` a module, `$e` whether it uses EOR3, `$features` the features that variant needs.
macro_rules! entries {
    ($name:ident, $e:literal, $features:literal) => {
        mod $name {
            use super::*;

            #[target_feature(enable = $features)]
            pub(super) fn ghash_entry(keys: &Keys, y: &mut u128, data: &[u8]) {
                *y = ghash::ghash::<$e>(&Regs::new(&keys.powers), *y, data);
            }

            #[target_feature(enable = $features)]
            pub(super) fn crypt_entry<const SEAL: bool>(
                keys: &Keys,
                ctr: &[u8; 16],
                y: &mut u128,
                buf: InOutBuf<'_, '_, u8>,
            ) {
                let (rk, r) = (&keys.rk, Regs::new(&keys.powers));
                let mut c = aes::Counter::new(ctr);
                let yv = from_u128(*y);
                let yv = match keys.nr {
                    10 => stitched::crypt::<$e, SEAL, 10>(rk, &r, &mut c, yv, buf),
                    12 => stitched::crypt::<$e, SEAL, 12>(rk, &r, &mut c, yv, buf),
                    _ => stitched::crypt::<$e, SEAL, 14>(rk, &r, &mut c, yv, buf),
                };
                *y = to_u128(yv);
                c.wipe();
            }

            #[target_feature(enable = $features)]
            pub(super) fn message_entry<const SEAL: bool>(
                keys: &Keys,
                j0: &[u8; 16],
                aad: &[u8],
                buf: InOutBuf<'_, '_, u8>,
            ) -> [u8; 16] {
                let (rk, r) = (&keys.rk, Regs::new(&keys.powers));
                match keys.nr {
                    10 => stitched::message::<$e, SEAL, 10>(rk, &r, j0, aad, buf),
                    12 => stitched::message::<$e, SEAL, 12>(rk, &r, j0, aad, buf),
                    _ => stitched::message::<$e, SEAL, 14>(rk, &r, j0, aad, buf),
                }
            }
        }
    };
}

entries!(base, false, "aes");
entries!(eor3, true, "aes,sha3");

/// Key set-up, for both variants (it runs once per key).
#[target_feature(enable = "aes")]
fn setup_entry(key: &[u8], keys: &mut Keys) {
    setup::<false>(key, keys)
}

/// One AES block, for both variants.
#[target_feature(enable = "aes")]
fn block_entry(keys: &Keys, b: &mut [u8; 16]) {
    let rk = &keys.rk;
    let x: V = bytemuck::cast(*b);
    let out = match keys.nr {
        10 => aes::block::<10>(rk, x),
        12 => aes::block::<12>(rk, x),
        _ => aes::block::<14>(rk, x),
    };
    *b = bytemuck::cast(out);
}

impl Keys {
    /// Expand `key` for the best kernels the core runs, or for at most `max`.
    pub(crate) fn new(key: &[u8], max: Level) -> Option<Box<Keys>> {
        if !matches!(key.len(), 16 | 24 | 32) {
            return None;
        }
        let level = Level::detect()?.min(max);
        // Built in place on the heap: moving the key moves a pointer and leaves no copies of
        // the round keys or powers behind.
        let mut keys = Box::new(Keys {
            rk: [0; 15],
            nr: 0,
            powers: Powers::default(),
            level,
        });
        #[allow(unsafe_code)]
        // SAFETY: `Level::detect()` just found AES and PMULL, the features of `base`.
        unsafe {
            setup_entry(key, &mut keys)
        };
        Some(keys)
    }

    pub(crate) fn key_len(&self) -> usize {
        (self.nr - 6) * 4
    }

    pub(crate) fn level(&self) -> Level {
        self.level
    }

    pub(crate) fn ghash(&self, y: &mut u128, data: &[u8]) {
        match self.level {
            #[allow(unsafe_code)]
            // SAFETY: `self.level` is Eor3 only if `Level::detect()` found AES, PMULL and SHA3.
            Level::Eor3 => unsafe { eor3::ghash_entry(self, y, data) },
            #[allow(unsafe_code)]
            // SAFETY: every `Keys` was built after `Level::detect()` found AES and PMULL.
            Level::Base => unsafe { base::ghash_entry(self, y, data) },
        }
    }

    /// Seal (`SEAL`) or open `buf` from the counter block `ctr`, absorbing the ciphertext into
    /// `y`.
    pub(crate) fn crypt<const SEAL: bool>(
        &self,
        ctr: &[u8; 16],
        y: &mut u128,
        buf: InOutBuf<'_, '_, u8>,
    ) {
        match self.level {
            #[allow(unsafe_code)]
            // SAFETY: `self.level` is Eor3 only if `Level::detect()` found AES, PMULL and SHA3.
            Level::Eor3 => unsafe { eor3::crypt_entry::<SEAL>(self, ctr, y, buf) },
            #[allow(unsafe_code)]
            // SAFETY: every `Keys` was built after `Level::detect()` found AES and PMULL.
            Level::Base => unsafe { base::crypt_entry::<SEAL>(self, ctr, y, buf) },
        }
    }

    /// A whole GCM message: seal (`SEAL`) or open `buf` under the pre-counter block `j0` with
    /// associated data `aad`; returns the full tag (for open, the expected tag).
    pub(crate) fn message<const SEAL: bool>(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
    ) -> [u8; 16] {
        match self.level {
            #[allow(unsafe_code)]
            // SAFETY: `self.level` is Eor3 only if `Level::detect()` found AES, PMULL and SHA3.
            Level::Eor3 => unsafe { eor3::message_entry::<SEAL>(self, j0, aad, buf) },
            #[allow(unsafe_code)]
            // SAFETY: every `Keys` was built after `Level::detect()` found AES and PMULL.
            Level::Base => unsafe { base::message_entry::<SEAL>(self, j0, aad, buf) },
        }
    }

    /// `Q_1 = H' = mulX(H)`.
    pub(crate) fn h_prime(&self) -> u128 {
        self.powers.q1()
    }

    pub(crate) fn encrypt_block(&self, b: &mut [u8; 16]) {
        #[allow(unsafe_code)]
        // SAFETY: every `Keys` was built after `Level::detect()` found AES and PMULL.
        unsafe {
            block_entry(self, b)
        }
    }
}
