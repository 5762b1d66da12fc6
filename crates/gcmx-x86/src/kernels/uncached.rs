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
//! The kernels write into a buffer on the stack that stays in the first-level cache, a piece of
//! [`PIECE`] bytes at a time, and each piece is copied out with non-temporal stores: the pieces
//! continue one message (the counter advanced and the GHASH state carried), so the output is
//! byte for byte that of an ordinary open. The stores are ordered with `sfence` before the call
//! returns, as the instruction requires before anything else reads the output.

use core::arch::x86_64::*;

use inout::InOutBuf;
use zeroize::Zeroize;

use super::Keys;
use super::common::{ctr_add, load16};

/// Bytes of one piece: whole 512-bit steps, small enough that the piece stays in the first-level
/// cache between the kernel writing it and the copy reading it.
const PIECE: usize = 8 * 1024;

/// Open `src` into `dst` (equal lengths; a longer one is cut to the shorter) from the counter
/// block `ctr`, absorbing the ciphertext into `y`, the plaintext written with non-temporal
/// stores.
pub(super) fn open(keys: &Keys, mut ctr: u128, y: &mut u128, src: &[u8], dst: &mut [u8]) {
    let mut piece = [0u8; PIECE];
    for (s, d) in src.chunks(PIECE).zip(dst.chunks_mut(PIECE)) {
        let n = s.len().min(d.len());
        let out = &mut piece[..n];
        if let Ok(io) = InOutBuf::new(&s[..n], out) {
            keys.crypt::<false>(ctr, y, io);
        }
        copy(&piece[..n], &mut d[..n]);
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

/// Copy `src` into `dst` (the common length): the 16-byte-aligned middle of `dst` with
/// non-temporal stores, its unaligned ends with ordinary ones.
fn copy(src: &[u8], dst: &mut [u8]) {
    let n = src.len().min(dst.len());
    let head = dst.as_ptr().align_offset(16).min(n);
    let body = (n - head) / 16 * 16;
    let (s_head, s_rest) = src[..n].split_at(head);
    let (d_head, d_rest) = dst[..n].split_at_mut(head);
    d_head.copy_from_slice(s_head);
    let (s_body, s_tail) = s_rest.split_at(body);
    let (d_body, d_tail) = d_rest.split_at_mut(body);
    for (s, d) in s_body.chunks_exact(16).zip(d_body.chunks_exact_mut(16)) {
        let v = load16(s);
        #[allow(unsafe_code)]
        // SAFETY: `d` is 16 bytes of `dst`, borrowed mutably, at a 16-byte-aligned address
        // (`head` aligned the body, whose chunks are 16 bytes); SSE2 is part of x86-64's baseline.
        unsafe {
            _mm_stream_si128(d.as_mut_ptr().cast(), v)
        };
    }
    d_tail.copy_from_slice(s_tail);
}
