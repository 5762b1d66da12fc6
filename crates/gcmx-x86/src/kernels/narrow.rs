//! The narrow kernels: AES-NI + PCLMULQDQ on 128-bit registers, 8 blocks a step, for CPUs
//! without VAES.

use core::arch::x86_64::*;

use bytemuck::cast;
use inout::InOutBuf;
use zeroize::Zeroize;

use super::common::{
    SHORT_MAX, aes1, crypt_tail, ctr_add, ghash_tail, j0_reg, kara128, load16, reduce, rev128,
    short, store16, tag_matches, tag_reg,
};
use super::{Keys, Pre};

/// 128-bit registers (= blocks) per step.
pub(super) const NW: usize = 8;
/// Bytes per step.
const NSTEP: usize = 16 * NW;

/// The powers for one narrow step: block `j` of 8 is multiplied by `Q_(8−j)`; beside them the
/// Karatsuba operands.
struct NarrowPowers {
    p: [__m128i; NW],
    k: [__m128i; NW],
}

impl Drop for NarrowPowers {
    fn drop(&mut self) {
        self.p.zeroize();
        self.k.zeroize();
    }
}

#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn narrow_powers(keys: &Keys) -> NarrowPowers {
    let mut sp = NarrowPowers {
        p: [_mm_setzero_si128(); NW],
        k: [_mm_setzero_si128(); NW],
    };
    for j in 0..NW {
        let p: __m128i = cast(keys.q(NW - j));
        sp.p[j] = p;
        sp.k[j] = kara128(p);
    }
    sp
}

/// The GHASH products of block `j` of a narrow step (`y` joins block 0), accumulated.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn narrow_products(sp: &NarrowPowers, j: usize, d: __m128i, y: __m128i, acc: &mut [__m128i; 3]) {
    let mut x = _mm_shuffle_epi8(d, rev128());
    if j == 0 {
        x = _mm_xor_si128(x, y);
    }
    acc[0] = _mm_xor_si128(acc[0], _mm_clmulepi64_si128::<0x00>(x, sp.p[j]));
    acc[1] = _mm_xor_si128(acc[1], _mm_clmulepi64_si128::<0x00>(kara128(x), sp.k[j]));
    acc[2] = _mm_xor_si128(acc[2], _mm_clmulepi64_si128::<0x11>(x, sp.p[j]));
}

/// The new GHASH state from a narrow step's accumulated products.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn narrow_reduce(acc: &[__m128i; 3]) -> __m128i {
    let mid = _mm_xor_si128(acc[1], _mm_xor_si128(acc[0], acc[2]));
    reduce(acc[0], mid, acc[2])
}

/// One stitched narrow step: AES of 8 counter blocks and, when `HASH`, GHASH of the 8 blocks
/// `d`, one block's products after each AES round.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn narrow_step<const NR: usize, const HASH: bool>(
    keys: &Keys,
    ctrs: [__m128i; NW],
    sp: &NarrowPowers,
    y: __m128i,
    d: &[__m128i; NW],
) -> ([__m128i; NW], __m128i) {
    let mut s = ctrs;
    let k0: __m128i = cast(keys.rk[0]);
    for x in s.iter_mut() {
        *x = _mm_xor_si128(*x, k0);
    }
    let mut acc = [_mm_setzero_si128(); 3];
    for (j, kr) in keys.rk[1..NR].iter().enumerate() {
        let kr: __m128i = cast(*kr);
        for x in s.iter_mut() {
            *x = _mm_aesenc_si128(*x, kr);
        }
        if HASH && j < NW {
            narrow_products(sp, j, d[j], y, &mut acc);
        }
    }
    let y = if HASH { narrow_reduce(&acc) } else { y };
    let kl: __m128i = cast(keys.rk[NR]);
    for x in s.iter_mut() {
        *x = _mm_aesenclast_si128(*x, kl);
    }
    (s, y)
}

/// Absorb one narrow step of 8 blocks `d` (as in memory) into `y`.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn narrow_ghash_step(sp: &NarrowPowers, y: __m128i, d: &[__m128i; NW]) -> __m128i {
    let mut acc = [_mm_setzero_si128(); 3];
    for (j, dj) in d.iter().enumerate() {
        narrow_products(sp, j, *dj, y, &mut acc);
    }
    narrow_reduce(&acc)
}

/// GHASH update on the narrow kernels.
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn ghash_entry(keys: &Keys, y: &mut u128, data: &[u8]) {
    ghash_narrow(keys, y, data);
}

narrower_message_entry!("aes,pclmulqdq,ssse3", ghash_narrow, crypt_narrow);

/// GHASH update: whole steps, then the rest by [`ghash_tail`] (AAD, length blocks).
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn ghash_narrow(keys: &Keys, y: &mut u128, data: &[u8]) {
    if data.len() < NSTEP {
        *y = cast(ghash_tail(keys, cast(*y), data));
        return;
    }
    let sp = narrow_powers(keys);
    let mut yv: __m128i = cast(*y);
    let mut steps = data.chunks_exact(NSTEP);
    for s in steps.by_ref() {
        let mut d = [_mm_setzero_si128(); NW];
        for (j, x) in d.iter_mut().enumerate() {
            *x = load16(&s[16 * j..]);
        }
        yv = narrow_ghash_step(&sp, yv, &d);
    }
    *y = cast(ghash_tail(keys, yv, steps.remainder()));
}

#[target_feature(enable = "aes,pclmulqdq,ssse3")]
pub(super) fn crypt_entry<const SEAL: bool>(
    keys: &Keys,
    ctr: u128,
    y: &mut u128,
    buf: InOutBuf<'_, '_, u8>,
) {
    match keys.nr {
        10 => crypt_narrow::<SEAL, 10>(keys, ctr, y, buf),
        12 => crypt_narrow::<SEAL, 12>(keys, ctr, y, buf),
        _ => crypt_narrow::<SEAL, 14>(keys, ctr, y, buf),
    }
}

/// The stitched narrow loop, shaped like the wide one (`super::wide`) with 8-block steps.
#[inline]
#[target_feature(enable = "aes,pclmulqdq,ssse3")]
fn crypt_narrow<const SEAL: bool, const NR: usize>(
    keys: &Keys,
    ctr: u128,
    y: &mut u128,
    buf: InOutBuf<'_, '_, u8>,
) {
    let rev = rev128();
    let mut yv: __m128i = cast(*y);
    let bulk_len = buf.len() / NSTEP * NSTEP;
    let (mut bulk, tail) = buf.split_at(bulk_len);
    if bulk_len > 0 {
        // the powers copied (and wiped after) only where there are steps to run
        let sp = narrow_powers(keys);

        let mut base: __m128i = cast(ctr);
        let mut pending: Option<[__m128i; NW]> = None;
        while !bulk.is_empty() {
            let (mut s, rest) = bulk.split_at(NSTEP);
            bulk = rest;
            let mut d = [_mm_setzero_si128(); NW];
            for (j, x) in d.iter_mut().enumerate() {
                *x = load16(&s.get_in()[16 * j..]);
            }
            let mut ctrs = [_mm_setzero_si128(); NW];
            for (j, c) in ctrs.iter_mut().enumerate() {
                *c = _mm_shuffle_epi8(_mm_add_epi32(base, _mm_set_epi32(0, 0, 0, j as i32)), rev);
            }
            base = _mm_add_epi32(base, _mm_set_epi32(0, 0, 0, NW as i32));
            let ks = if SEAL {
                match &pending {
                    Some(prev) => {
                        let (ks, y2) = narrow_step::<NR, true>(keys, ctrs, &sp, yv, prev);
                        yv = y2;
                        ks
                    }
                    None => narrow_step::<NR, false>(keys, ctrs, &sp, yv, &d).0,
                }
            } else {
                let (ks, y2) = narrow_step::<NR, true>(keys, ctrs, &sp, yv, &d);
                yv = y2;
                ks
            };
            for (j, x) in d.iter_mut().enumerate() {
                *x = _mm_xor_si128(*x, ks[j]);
                store16(&mut s.get_out()[16 * j..], *x);
            }
            if SEAL {
                pending = Some(d);
            }
        }
        if let Some(prev) = &pending {
            yv = narrow_ghash_step(&sp, yv, prev);
        }
    }
    let c = ctr_add(ctr, bulk_len / 16);
    *y = cast(crypt_tail::<SEAL, NR>(keys, c, yv, tail));
}
