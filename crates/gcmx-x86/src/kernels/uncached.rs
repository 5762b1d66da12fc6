//! Output past the caches: an open whose plaintext goes to memory with non-temporal stores.
//!
//! An open from one buffer into another moves, per byte of plaintext, the ciphertext line read,
//! the destination line fetched before it is written (a store to a line not in the cache reads
//! it first) and that line written back: three bytes of memory traffic, where an open in place
//! moves two. When every core opens at once the memory's speed is the limit, and the fetch is a
//! third of the traffic. A non-temporal store (`movntdq`) writes a whole line without reading
//! it, bypassing the caches, which is right only for an output too large to stay cached anyway
//! and not read back soon.
//!
//! The 512-bit kernels store each register of output past the caches as they compute it,
//! realigned to the destination's lines in registers (`zmm::open_uncached_entry`). The 256- and
//! 128-bit kernels, which have no cheap way to realign a register by any byte count, write into a
//! buffer on the stack that stays in the first-level cache, a piece of [`PIECE`] bytes at a
//! time, and each piece is copied out with non-temporal stores: the pieces continue one message
//! (the counter advanced and the GHASH state carried). Either way the output is byte for byte
//! that of an ordinary open, and the stores are ordered with `sfence` before the call returns,
//! as the instruction requires before anything else reads the output.

use core::arch::x86_64::*;

use inout::InOutBuf;
use zeroize::Zeroize;

use super::common::{ctr_add, load16};
use super::{Keys, Level, zmm};

/// Bytes of one piece: whole 512-bit steps, small enough that the piece stays in the first-level
/// cache between the kernel writing it and the copy reading it.
const PIECE: usize = 8 * 1024;

/// Open `src` into `dst` (equal lengths; a longer one is cut to the shorter) from the counter
/// block `ctr`, absorbing the ciphertext into `y`, the plaintext written with non-temporal
/// stores.
pub(super) fn open(keys: &Keys, mut ctr: u128, y: &mut u128, src: &[u8], dst: &mut [u8]) {
    if keys.level() == Level::Zmm {
        #[allow(unsafe_code)]
        // SAFETY: a key's level is Zmm only if `Level::detect()` found the 512-bit features,
        // AVX-512 VBMI among them.
        unsafe {
            zmm::open_uncached_entry(keys, ctr, y, src, dst)
        };
        return;
    }
    let mut piece = [0u8; PIECE];
    for (s, d) in src.chunks(PIECE).zip(dst.chunks_mut(PIECE)) {
        let n = s.len().min(d.len());
        let out = &mut piece[..n];
        if let Ok(io) = InOutBuf::new(&s[..n], out) {
            keys.crypt::<false>(ctr, y, io);
        }
        copy(keys.level(), &piece[..n], &mut d[..n]);
        ctr = ctr_add(ctr, PIECE / 16);
    }
    // Plaintext, like the output: the caller decides what the output may hold, the stack keeps
    // nothing.
    piece.zeroize();
    #[allow(unsafe_code)]
    // SAFETY: SSE is part of x86-64's baseline. The non-temporal stores are weakly ordered:
    // fenced before any other access to `dst`.
    unsafe {
        _mm_sfence()
    };
}

/// Copy `src` into `dst` (the common length): the middle of `dst`, aligned to the widest store
/// the key's level has (256-bit from AVX2 on), with non-temporal stores, its unaligned ends with
/// ordinary ones.
///
/// A core's rate of non-temporal stores is what limits an open past the caches when the memory
/// keeps up: a 256-bit store hands a line to the memory in two stores where 128-bit ones take
/// four, each holding a write-combining buffer until the line is complete.
fn copy(level: Level, src: &[u8], dst: &mut [u8]) {
    match level {
        #[allow(unsafe_code)]
        // SAFETY: a key's level is Wide or Zmm only if `Level::detect()` found AVX2 (AVX with
        // it).
        Level::Wide | Level::Zmm => unsafe { copy_ymm(src, dst) },
        Level::Narrow => copy_with::<16>(src, dst, |d, s| {
            #[allow(unsafe_code)]
            // SAFETY: `d` is 16 bytes of `dst`, borrowed mutably, at a 16-byte-aligned address
            // (`copy_with` aligned the body); SSE2 is part of x86-64's baseline.
            unsafe {
                _mm_stream_si128(d.cast(), load16(s))
            }
        }),
    }
}

#[target_feature(enable = "avx")]
fn copy_ymm(src: &[u8], dst: &mut [u8]) {
    copy_with::<32>(src, dst, |d, s| {
        let v: __m256i = bytemuck::pod_read_unaligned(&s[..32]);
        #[allow(unsafe_code)]
        // SAFETY: `d` is 32 bytes of `dst`, borrowed mutably, at a 32-byte-aligned address
        // (`copy_with` aligned the body); the caller has AVX.
        unsafe {
            _mm256_stream_si256(d.cast(), v)
        }
    })
}

/// The copy of [`copy`] with `W`-byte non-temporal stores `store(to, from)`: `to` is `W` bytes
/// of `dst` at a `W`-aligned address, `from` the `W` bytes of `src` that go there.
#[inline(always)]
fn copy_with<const W: usize>(src: &[u8], dst: &mut [u8], store: impl Fn(*mut u8, &[u8])) {
    let n = src.len().min(dst.len());
    let head = dst.as_ptr().align_offset(W).min(n);
    let body = (n - head) / W * W;
    let (s_head, s_rest) = src[..n].split_at(head);
    let (d_head, d_rest) = dst[..n].split_at_mut(head);
    d_head.copy_from_slice(s_head);
    let (s_body, s_tail) = s_rest.split_at(body);
    let (d_body, d_tail) = d_rest.split_at_mut(body);
    for (s, d) in s_body.chunks_exact(W).zip(d_body.chunks_exact_mut(W)) {
        store(d.as_mut_ptr(), s);
    }
    d_tail.copy_from_slice(s_tail);
}
