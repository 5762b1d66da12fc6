//! The x86-64 kernels, in three widths:
//! - **zmm** (AVX-512F/BW/VL, VAES, VPCLMULQDQ): 512-bit registers of four blocks, 32 blocks a
//!   step, masked loads and stores for the last partial step ([`zmm`]);
//! - **wide** (AES-NI, PCLMULQDQ, AVX2, VAES, VPCLMULQDQ): 256-bit registers, 16 blocks a step
//!   ([`wide`]);
//! - **narrow** (AES-NI, PCLMULQDQ, SSSE3): 128-bit registers, 8 blocks a step, for CPUs
//!   without VAES ([`narrow`]).
//!
//! Every function that uses SIMD intrinsics carries one of three `#[target_feature]` sets, each
//! a superset of the one below, so the shared helpers of [`common`] (key expansion, single
//! blocks, the reduction, tails) are compiled for the narrow set and inlined into all three.
//! They are reached only through [`Keys`], which records the width [`Level::detect`] found the
//! CPU able to run.
//!
//! Register layouts:
//! - a 256- or 512-bit register holds two or four consecutive 16-byte blocks, the earliest in
//!   the lowest lane;
//! - counters are kept byte-reflected (the whole 16-byte block reversed), so the 32-bit GCM
//!   counter is each lane's low dword and `paddd` is exactly inc32 (wraps mod 2^32, no carry
//!   into the other 96 bits); one `pshufb` turns them back into counter blocks;
//! - GHASH values are POLYVAL-domain `u128`s (a GCM block read big-endian): a block becomes one
//!   by the same `pshufb` byte reflection. One step's blocks are multiplied by the powers
//!   `Q_n..Q_1` (Karatsuba, three carry-less products a block) and reduced once.
//!
//! Constant time: no branch and no memory address depends on the key, `H`, the counter, the
//! data or the GHASH state; branches and masks depend only on lengths. The crate's
//! `constant_time` test checks this on the compiled code.

use inout::InOutBuf;
use zeroize::Zeroize;

pub(crate) use placed::Placed;

/// One GCM message from a kernel's parts (SP 800-38D 7.1-7.2): GHASH of the AAD, the CTR +
/// GHASH pass over the message's `len` bytes from `inc32(J0)`, the length block, the tag
/// `S ^ E_K(J0)`, returned as a register. `j0` is J0 as a register (bytes in memory order),
/// `block` encrypts one such block, `ghash` absorbs bytes zero-padded, `crypt` runs the
/// stitched pass over the message (its buffers its own) from a counter block (as a `u128`),
/// `tag` makes the tag from `S` and `E_K(J0)` (see [`tag`]). Each kernel width expands this in
/// its own entry function. A macro, not a function taking closures: a closure does not carry its
/// function's `#[target_feature]`s, so the kernel calls in it would not inline into the entry
/// (on a Zen 3, the 256-bit kernels' empty message: 215 cycles through closures, 155 with this
/// macro and J0 in a register).
macro_rules! gcm_message {
    (
        j0: $j0:expr,
        aad: $aad:expr,
        len: $len:expr,
        block: |$b:ident| $block:expr,
        ghash: |$gy:ident, $gd:ident| $ghash:expr,
        crypt: |$c:ident, $cy:ident| $crypt:expr,
        tag: |$ts:ident, $tm:ident| $tag:expr $(,)?
    ) => {{
        let j0: core::arch::x86_64::__m128i = $j0;
        let aad: &[u8] = $aad;
        let len: usize = $len;
        let mask: core::arch::x86_64::__m128i = {
            let $b = j0;
            $block
        };
        let mut y = 0u128;
        if aad.is_empty() && len == 0 {
            // no AAD and no data: the length block is zero, and so is its hash (S = 0), so the
            // tag is E_K(J0) (no crypt pass, and nothing to hash)
            mask
        } else {
            {
                let ($gy, $gd): (&mut u128, &[u8]) = (&mut y, aad);
                $ghash;
            }
            {
                let j0: [u8; 16] = bytemuck::cast(j0);
                let ($c, $cy): (u128, &mut u128) = ($crate::kernels::first_counter(&j0), &mut y);
                $crypt;
            }
            let lengths = $crate::kernels::length_block(aad.len(), len);
            {
                let ($gy, $gd): (&mut u128, &[u8]) = (&mut y, &lengths);
                $ghash;
            }
            let t: core::arch::x86_64::__m128i = {
                let ($ts, $tm): (u128, core::arch::x86_64::__m128i) = (y, mask);
                $tag
            };
            zeroize::Zeroize::zeroize(&mut y);
            t
        }
    }};
}

/// The whole-message entry of the 256- and 128-bit kernels, expanded in each of their modules
/// with its target features, GHASH and stitched pass: `message_entry` (one call for the whole
/// message, its parts inlined: a short message's time is mostly the calls between them
/// otherwise; the tag written with one 16-byte store, see `zmm::message_entry`) and, per key
/// size, a message of at most `common::SHORT_MAX` blocks with at most one block of AAD by
/// `common::short`, any other by [`gcm_message!`] (a message with neither AAD nor data never
/// comes here: see `common::empty_entry`).
/// Its buffer comes as the raw parts of an [`InOutBuf`], as `zmm::message_entry`'s does (see
/// [`Keys::message`] for why), with the same safety contract.
macro_rules! narrower_message_entry {
    ($features:literal, $ghash:ident, $crypt:ident) => {
        /// # Safety
        ///
        /// The CPU has this module's features, and `in_ptr`, `out_ptr` and `len` are the parts
        /// of an `InOutBuf` of `u8` that the caller gave up for this call
        /// (`InOutBuf::into_raw`), so that nothing else reaches its memory until the call
        /// returns.
        #[allow(unsafe_code)]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn message_entry<const SEAL: bool>(
            in_ptr: *const u8,
            out_ptr: *mut u8,
            len: usize,
            keys: &Keys,
            aad: &[u8],
            pre: Pre<'_>,
            tag: &mut [u8; 16],
        ) {
            #[allow(unsafe_code)]
            // SAFETY: the parts of an `InOutBuf` given up by the caller (this function's
            // contract): valid for `len` bytes, in and out equal or apart, and not reached
            // otherwise meanwhile.
            let buf = unsafe { InOutBuf::from_raw(in_ptr, out_ptr, len) };
            let t = by_rounds::<SEAL>(keys, pre, aad, buf);
            *tag = cast(t);
        }

        /// `message_entry` opening, the expected tag compared with `tag` in registers (see
        /// [`Keys::open_checked`]); whether it matches.
        ///
        /// # Safety
        ///
        /// As `message_entry`'s.
        #[allow(unsafe_code)]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn open_checked_entry(
            in_ptr: *const u8,
            out_ptr: *mut u8,
            len: usize,
            keys: &Keys,
            aad: &[u8],
            pre: Pre<'_>,
            tag: &[u8],
        ) -> bool {
            #[allow(unsafe_code)]
            // SAFETY: as in `message_entry` (this function's contract is the same).
            let buf = unsafe { InOutBuf::from_raw(in_ptr, out_ptr, len) };
            let t = by_rounds::<false>(keys, pre, aad, buf);
            tag_matches(t, tag)
        }

        /// `message` for the key's number of rounds.
        #[inline]
        #[target_feature(enable = $features)]
        fn by_rounds<const SEAL: bool>(
            keys: &Keys,
            pre: Pre<'_>,
            aad: &[u8],
            buf: InOutBuf<'_, '_, u8>,
        ) -> __m128i {
            match keys.nr {
                10 => message::<SEAL, 10>(keys, pre, aad, buf),
                12 => message::<SEAL, 12>(keys, pre, aad, buf),
                _ => message::<SEAL, 14>(keys, pre, aad, buf),
            }
        }

        #[inline]
        #[target_feature(enable = $features)]
        fn message<const SEAL: bool, const NR: usize>(
            keys: &Keys,
            pre: Pre<'_>,
            aad: &[u8],
            buf: InOutBuf<'_, '_, u8>,
        ) -> __m128i {
            if aad.len() <= 16 && buf.len() <= 16 * SHORT_MAX {
                let j0 = j0_reg(pre);
                return match buf.len() {
                    0..=16 => short::<SEAL, NR, 2>(keys, j0, aad, buf),
                    _ => short::<SEAL, NR, { SHORT_MAX + 1 }>(keys, j0, aad, buf),
                };
            }
            gcm_message!(
                j0: j0_reg(pre),
                aad: aad,
                len: buf.len(),
                block: |b| aes1::<NR>(keys, b),
                ghash: |y, d| $ghash(keys, y, d),
                crypt: |c, y| $crypt::<SEAL, NR>(keys, c, y, buf),
                tag: |s, mask| tag_reg(s, mask),
            )
        }
    };
}

mod common;
mod narrow;
mod placed;
mod uncached;
mod wide;
mod zmm;

/// Powers of H the key keeps: the largest step's block count.
const NQ: usize = zmm::NB;

// Every level's powers: a power of two from 4 (the set-up's doubling) to the table's size, and
// enough for the tails' groups.
const _: () = {
    let levels = [Level::Narrow, Level::Wide, Level::Zmm];
    let mut i = 0;
    while i < levels.len() {
        let n = levels[i].powers();
        assert!(n.is_power_of_two() && n >= 4 && n <= NQ && n >= common::TG);
        i += 1;
    }
};

/// Which kernels a key runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// AES-NI, PCLMULQDQ and SSSE3: 128-bit kernels.
    Narrow,
    /// Also AVX2, VAES and VPCLMULQDQ: 256-bit kernels.
    Wide,
    /// Also AVX-512F, AVX-512BW, AVX-512VL and AVX-512 VBMI: 512-bit kernels. (Every CPU with
    /// 512-bit VAES has VBMI; its byte permute realigns an open's output written past the
    /// caches.)
    Zmm,
}

impl Level {
    /// How many powers of `H` this level's kernels read, `Q_1..Q_n`: one step's blocks (each
    /// level's tails read at most [`common::TG`] of them, no more than its step's). Key set-up
    /// computes only these; a wider level's table entries stay zero.
    pub(crate) const fn powers(self) -> usize {
        match self {
            Level::Narrow => narrow::NW,
            Level::Wide => wide::NB,
            Level::Zmm => NQ,
        }
    }

    /// The widest kernels this CPU can run, if any.
    pub(crate) fn detect() -> Option<Level> {
        let narrow = std::is_x86_feature_detected!("aes")
            && std::is_x86_feature_detected!("pclmulqdq")
            && std::is_x86_feature_detected!("ssse3");
        let wide = narrow
            && std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("vaes")
            && std::is_x86_feature_detected!("vpclmulqdq");
        let zmm = wide
            && std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vbmi");
        match (narrow, wide, zmm) {
            (_, _, true) => Some(Level::Zmm),
            (_, true, _) => Some(Level::Wide),
            (true, _, _) => Some(Level::Narrow),
            _ => None,
        }
    }
}

/// Expanded key material. Built only by [`Keys::placed`], for a level the CPU has; lives on the
/// heap in a [`Placed`] (moving a key moves a pointer) and is wiped on drop. Aligned to a cache
/// line, so that a 512-bit register of powers is one line, and the table is at a constant offset
/// from the key's address. (Placing the table on a line by an index into a 16-byte-aligned key,
/// chosen once its address is known, cost messages of 64 B to 1.5 KiB up to 10 %: the short
/// paths spilled registers. [`Placed`] aligns the whole key instead.)
#[repr(align(64))]
pub(crate) struct Keys {
    /// The table, `[p, pk]`: `p[i]` = `Q_(NQ − i)`, the powers of `H` in step order (the
    /// Montgomery form of `h^(NQ − i)`, `Q_1 = H' = mulX(H)`), so that block `i` of a run of
    /// `n` blocks is multiplied by `p[NQ − n + i]`, the four entries after them zero (the lanes
    /// past the end of a run in a 512-bit register), and zero too the entries of powers above
    /// the level's [`Level::powers`]; `pk[i]`, the two 64-bit halves of `p[i]`
    /// XORed, in both halves (Karatsuba's middle operand). One array, so that set-up writes
    /// and drop wipes it as one.
    t: [[u128; NQ + 4]; 2],
    /// Round keys `0..=nr`, each the 16 round-key bytes read little-endian (so a cast to
    /// `__m128i` gives the bytes in memory order).
    rk: [u128; 15],
    /// Rounds: 10, 12 or 14.
    nr: usize,
    /// The kernels to run; the CPU has this level's features (checked in [`Keys::placed`]).
    level: Level,
    /// 16-byte units from the start of the key's allocation to the key ([`Placed`] frees the
    /// allocation from it).
    at: u8,
}

impl Drop for Keys {
    fn drop(&mut self) {
        // As slices: one bulk fill each behind an optimization barrier (an array is wiped
        // element by element with volatile 8-byte stores, several times slower).
        self.t.as_flattened_mut().zeroize();
        self.rk[..].zeroize();
    }
}

impl Keys {
    /// Expand `key` for the widest kernels the CPU runs, or for at most `max`.
    pub(crate) fn placed(key: &[u8], max: Level) -> Option<Placed> {
        if !matches!(key.len(), 16 | 24 | 32) {
            return None;
        }
        let level = Level::detect()?.min(max);
        let mut keys = Placed::zeroed(level);
        if level == Level::Zmm {
            #[allow(unsafe_code)]
            // SAFETY: `level` is Zmm only if `Level::detect()` found the 512-bit features.
            unsafe {
                zmm::setup(key, &mut keys)
            };
        } else {
            #[allow(unsafe_code)]
            // SAFETY: `Level::detect()` just found AES-NI, PCLMULQDQ and SSSE3.
            unsafe {
                common::setup(key, &mut keys)
            };
        }
        Some(keys)
    }

    /// A copy on the heap, built there as [`Placed::zeroed`] builds a key.
    pub(crate) fn placed_clone(&self) -> Placed {
        let mut k = Placed::zeroed(self.level);
        k.t = self.t;
        k.rk = self.rk;
        k.nr = self.nr;
        k
    }

    /// The powers and their Karatsuba halves, to be written (key set-up).
    #[inline(always)]
    fn tables_mut(&mut self) -> (&mut [u128; NQ + 4], &mut [u128; NQ + 4]) {
        let [p, pk] = &mut self.t;
        (p, pk)
    }

    /// The powers in step order, `p[i] = Q_(NQ − i)`, and four zero entries.
    #[inline(always)]
    pub(crate) fn p(&self) -> &[u128; NQ + 4] {
        &self.t[0]
    }

    /// Karatsuba's middle operands of [`Keys::p`]'s entries.
    #[inline(always)]
    pub(crate) fn pk(&self) -> &[u128; NQ + 4] {
        &self.t[1]
    }

    /// `Q_k`, for `1 <= k <= NQ`.
    #[inline(always)]
    fn q(&self, k: usize) -> u128 {
        self.p()[NQ - k]
    }

    /// `Q_1 = H' = mulX(H)`.
    pub(crate) fn h_prime(&self) -> u128 {
        self.q(1)
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
            // SAFETY: `self.level` is Zmm only if `Level::detect()` found the 512-bit features.
            Level::Zmm => unsafe { zmm::ghash_entry(self, y, data) },
            #[allow(unsafe_code)]
            // SAFETY: `self.level` is Wide only if `Level::detect()` found the wide features.
            Level::Wide => unsafe { wide::ghash_entry(self, y, data) },
            #[allow(unsafe_code)]
            // SAFETY: every `Keys` was built after `Level::detect()` found the narrow features.
            Level::Narrow => unsafe { narrow::ghash_entry(self, y, data) },
        }
    }

    pub(crate) fn seal(&self, ctr: u128, y: &mut u128, buf: InOutBuf<'_, '_, u8>) {
        self.crypt::<true>(ctr, y, buf)
    }

    pub(crate) fn open(&self, ctr: u128, y: &mut u128, buf: InOutBuf<'_, '_, u8>) {
        self.crypt::<false>(ctr, y, buf)
    }

    /// [`Keys::open`] from `src` into `dst`, the output written past the caches
    /// ([`uncached`]).
    pub(crate) fn open_uncached(&self, ctr: u128, y: &mut u128, src: &[u8], dst: &mut [u8]) {
        uncached::open(self, ctr, y, src, dst)
    }

    /// [`Keys::message`] opening `src` into `dst`, the output written past the caches.
    pub(crate) fn open_message_uncached(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        src: &[u8],
        dst: &mut [u8],
    ) -> [u8; 16] {
        let n = src.len().min(dst.len());
        let t = gcm_message!(
            j0: bytemuck::cast(*j0),
            aad: aad,
            len: n,
            block: |b| {
                let mut x: [u8; 16] = bytemuck::cast(b);
                self.encrypt_block(&mut x);
                let v = bytemuck::cast(x);
                x.zeroize();
                v
            },
            ghash: |y, d| self.ghash(y, d),
            crypt: |c, y| self.open_uncached(c, y, &src[..n], &mut dst[..n]),
            tag: |s, mask| bytemuck::cast(tag(s, bytemuck::cast(mask))),
        );
        bytemuck::cast(t)
    }

    fn crypt<const SEAL: bool>(&self, ctr: u128, y: &mut u128, buf: InOutBuf<'_, '_, u8>) {
        match self.level {
            #[allow(unsafe_code)]
            // SAFETY: `self.level` is Zmm only if `Level::detect()` found the 512-bit features.
            Level::Zmm => unsafe { zmm::crypt_entry::<SEAL>(self, ctr, y, buf) },
            #[allow(unsafe_code)]
            // SAFETY: `self.level` is Wide only if `Level::detect()` found the wide features.
            Level::Wide => unsafe { wide::crypt_entry::<SEAL>(self, ctr, y, buf) },
            #[allow(unsafe_code)]
            // SAFETY: every `Keys` was built after `Level::detect()` found the narrow features.
            Level::Narrow => unsafe { narrow::crypt_entry::<SEAL>(self, ctr, y, buf) },
        }
    }

    /// A whole GCM message: seal (`SEAL`) or open `buf`'s input into its output under the
    /// pre-counter block from `pre` with associated data `aad`; returns the full tag (for open,
    /// the expected tag). Inlined into every caller, down to the one call into the kernel: a
    /// 64-byte message costs about 200 instructions, and each layer of calls in between added
    /// a dozen or two (its prologue, epilogue and arguments moved).
    #[inline(always)]
    pub(crate) fn message<const SEAL: bool>(
        &self,
        pre: Pre<'_>,
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
    ) -> [u8; 16] {
        let mut tag = [0u8; 16];
        // Neither AAD nor data: the tag is E_K(J0) alone, in a function with a frame of its
        // own (the whole-message entries' frames cost an empty seal a third of its time).
        if aad.is_empty() && buf.is_empty() {
            #[allow(unsafe_code)]
            // SAFETY: every `Keys` was built after `Level::detect()` found the narrow features.
            unsafe {
                common::empty_entry(self, pre, &mut tag)
            };
            return tag;
        }
        // The buffer crosses the call as three words, each in a register. As a struct (or a
        // tuple) it would be copied for the call in 16-byte moves from fields its caller had
        // just written 8 bytes at a time, and a load that spans two stores waits until they
        // reach the cache (as J0 and the tag would: see `zmm::j0_reg`): a short message's
        // time, nearly doubled (and on the 256-bit kernels 16-byte seals 25 % slower, in a
        // build whose other code changed only how a caller was compiled).
        let len = buf.len();
        let (in_ptr, out_ptr) = buf.into_raw();
        #[allow(unsafe_code)]
        // SAFETY: `self.level` is Zmm or Wide only if `Level::detect()` found that level's
        // features, and every `Keys` was built after it found the narrow ones; the parts are
        // those of `buf`, given up here for the call.
        unsafe {
            match self.level {
                Level::Zmm => {
                    zmm::message_entry::<SEAL>(in_ptr, out_ptr, len, self, aad, pre, &mut tag)
                }
                Level::Wide => {
                    wide::message_entry::<SEAL>(in_ptr, out_ptr, len, self, aad, pre, &mut tag)
                }
                Level::Narrow => {
                    narrow::message_entry::<SEAL>(in_ptr, out_ptr, len, self, aad, pre, &mut tag)
                }
            }
        };
        tag
    }

    /// A whole GCM message opened as [`Keys::message`] opens it, the expected tag compared with
    /// the received `tag` (its first `tag.len()` bytes, 1 to 16) inside the kernel: whether it
    /// matches. The expected tag stays in registers (for a forged message it is the tag that
    /// would make the forgery pass), and the comparison is a few instructions on the end of the
    /// message's chain instead of a store, a reload and a comparison by the caller. A `tag`
    /// empty or longer than 16 bytes never matches, and `buf` is then left as it is.
    #[inline(always)]
    pub(crate) fn open_checked(
        &self,
        pre: Pre<'_>,
        aad: &[u8],
        buf: InOutBuf<'_, '_, u8>,
        tag: &[u8],
    ) -> bool {
        if tag.is_empty() || tag.len() > 16 {
            return false;
        }
        if aad.is_empty() && buf.is_empty() {
            #[allow(unsafe_code)]
            // SAFETY: `self.level` is Zmm only if `Level::detect()` found the 512-bit features,
            // and every `Keys` was built after it found the narrow ones.
            return unsafe {
                match self.level {
                    Level::Zmm => zmm::empty_checked_entry(self, pre, tag),
                    _ => common::empty_checked_entry(self, pre, tag),
                }
            };
        }
        // the buffer as three words, as in `message`
        let len = buf.len();
        let (in_ptr, out_ptr) = buf.into_raw();
        #[allow(unsafe_code)]
        // SAFETY: as in `message`: the level's features were found, and the parts are those
        // of `buf`, given up here for the call.
        unsafe {
            match self.level {
                Level::Zmm => zmm::open_checked_entry(in_ptr, out_ptr, len, self, aad, pre, tag),
                Level::Wide => wide::open_checked_entry(in_ptr, out_ptr, len, self, aad, pre, tag),
                Level::Narrow => {
                    narrow::open_checked_entry(in_ptr, out_ptr, len, self, aad, pre, tag)
                }
            }
        }
    }

    pub(crate) fn encrypt_block(&self, b: &mut [u8; 16]) {
        #[allow(unsafe_code)]
        // SAFETY: every `Keys` was built after `Level::detect()` found the narrow features.
        unsafe {
            common::block_entry(self, b)
        }
    }
}

/// Where a message's pre-counter block J0 comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pre<'a> {
    /// J0 itself.
    J0(&'a [u8; 16]),
    /// A 12-byte nonce: J0 is the nonce, three zero bytes and a one.
    Nonce(&'a [u8; 12]),
}

/// The counter block of a message's first block, `inc32(J0)`, as a `u128` (the block read
/// big-endian).
fn first_counter(j0: &[u8; 16]) -> u128 {
    common::ctr_add(u128::from_be_bytes(*j0), 1)
}

/// GCM's last GHASH block: `[len(A)]_64 ‖ [len(C)]_64` in bits.
fn length_block(aad_len: usize, ct_len: usize) -> [u8; 16] {
    (((aad_len as u128) * 8) << 64 | ((ct_len as u128) * 8)).to_be_bytes()
}

/// The tag `S ^ E_K(J0)` from the GHASH state `s` and the mask's bytes, as bytes.
fn tag(s: u128, mask: [u8; 16]) -> [u8; 16] {
    (s ^ u128::from_be_bytes(mask)).to_be_bytes()
}
