//! gcmx's aarch64 kernels: AES-CTR and GHASH stitched into one loop.
//!
//! [`StitchedKey`] holds an expanded AES-128/192/256 key and the GHASH key's powers. Its bulk
//! loop runs the counter-mode keystream of eight blocks (AESE + AESMC) and the GHASH of eight
//! blocks (PMULL + PMULL2, Karatsuba, aggregated over the powers `H^8..H^1` with a single
//! reduction) in each step, interleaved so that the AES and the carry-less multiplies issue
//! together. GHASH is computed in the POLYVAL domain (each block byte-reflected, Montgomery
//! reduction with `0xC2 << 56`), the form the rest of gcmx uses: a GHASH state is a `u128`,
//! the 16-byte GCM block read big-endian.
//!
//! Two variants, chosen at run time by [`StitchedKey::new`]:
//! - AES + PMULL + EOR3 (FEAT_AES, FEAT_PMULL and FEAT_SHA3: Neoverse V1/V2, Apple M1 and
//!   later): three-way XORs in one instruction, where the accumulation and the last AES round
//!   meet the data;
//! - AES + PMULL (every ARMv8 core with the cryptographic extension): the same loop with
//!   two-way XORs.
//!
//! `new` returns `None` on cores without AES and PMULL (and always off aarch64); gcmx then
//! runs its generic path. All AES and carry-less multiplications are single instructions: no
//! table lookups, and no branch or memory address depends on the key, `H`, the counter, the
//! data or the hash state; branches and addresses depend on lengths only (the crate's
//! `constant_time` program checks this on the compiled code, under qemu with a tracing plugin).
//!
//! ```
//! use gcmx_aarch64::StitchedKey;
//! if let Some(k) = StitchedKey::new(&[0u8; 16]) {
//!     // GCM specification, test case 2: one zero block under the zero key.
//!     let mut buf = [0u8; 16];
//!     let mut ctr = [0u8; 16];
//!     ctr[15] = 2; // J0 = 0^96 ‖ 1, first block uses J0 + 1
//!     let mut y = 0u128;
//!     k.seal(&ctr, &mut y, &mut buf[..]);
//!     assert_eq!(u128::from_be_bytes(buf), 0x0388dace60b6a392f328c2b971b2fe78);
//!     // length block: 0 bits of AAD, 128 bits of ciphertext
//!     k.ghash(&mut y, &128u128.to_be_bytes());
//!     assert_eq!(y, 0xf38cbb1ad69223dcc3457ae5b6b0f885);
//! }
//! ```
//!
//! A whole message in one call, from one buffer into another (GCM specification, test case 2):
//!
//! ```
//! use gcmx_aarch64::{InOutBuf, StitchedKey};
//! if let Some(k) = StitchedKey::new(&[0u8; 16]) {
//!     let mut j0 = [0u8; 16];
//!     j0[15] = 1; // 96-bit IV 0^96: J0 = IV ‖ 0^31 ‖ 1
//!     let pt = [0u8; 16];
//!     let mut ct = [0u8; 16];
//!     let tag = k.seal_message(&j0, b"", InOutBuf::new(&pt, &mut ct).unwrap());
//!     assert_eq!(u128::from_be_bytes(ct), 0x0388dace60b6a392f328c2b971b2fe78);
//!     assert_eq!(u128::from_be_bytes(tag), 0xab6e47d42cec13bdf53a67b21257bddf);
//!     // open returns the expected tag; the caller compares it in constant time
//!     assert_eq!(k.open_message(&j0, b"", &mut ct[..]), tag);
//!     assert_eq!(ct, pt);
//! }
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub use inout::InOutBuf;

#[cfg(target_arch = "aarch64")]
mod kernels;

/// An AES key expanded for the aarch64 kernels, with GHASH's key `H = AES_K(0^128)` and its
/// powers. Only [`StitchedKey::new`] (or [`StitchedKey::new_without_eor3`]) builds one, and
/// only on a core with AES and PMULL. Zeroized on drop.
#[derive(Clone)]
pub struct StitchedKey {
    #[cfg(target_arch = "aarch64")]
    keys: Box<kernels::Keys>,
    #[cfg(not(target_arch = "aarch64"))]
    never: core::convert::Infallible,
}

impl StitchedKey {
    /// Expand `key` (16, 24 or 32 bytes: AES-128/192/256) for the kernels this core runs: with
    /// EOR3 where it has SHA3. `None` when the core lacks AES or PMULL, when not on aarch64, or
    /// for any other key length.
    pub fn new(key: &[u8]) -> Option<Self> {
        #[cfg(target_arch = "aarch64")]
        {
            kernels::Keys::new(key, kernels::Level::Eor3).map(|keys| StitchedKey { keys })
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            let _ = key;
            None
        }
    }

    /// Like [`StitchedKey::new`] but always the kernels without EOR3, even where the core has
    /// SHA3: for comparisons and tests. Output is identical.
    pub fn new_without_eor3(key: &[u8]) -> Option<Self> {
        #[cfg(target_arch = "aarch64")]
        {
            kernels::Keys::new(key, kernels::Level::Base).map(|keys| StitchedKey { keys })
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            let _ = key;
            None
        }
    }

    /// Whether this core runs the kernels (AES and PMULL): what [`StitchedKey::new`] checks
    /// besides the key.
    pub fn cpu_supported() -> bool {
        #[cfg(target_arch = "aarch64")]
        {
            kernels::Level::detect().is_some()
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            false
        }
    }

    /// Whether this core runs the kernels with EOR3 (AES, PMULL and SHA3).
    pub fn cpu_supports_eor3() -> bool {
        #[cfg(target_arch = "aarch64")]
        {
            kernels::Level::detect() == Some(kernels::Level::Eor3)
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            false
        }
    }

    /// Which kernels this key runs: `"aes-pmull-eor3"` or `"aes-pmull"`.
    pub fn kernel_name(&self) -> &'static str {
        #[cfg(target_arch = "aarch64")]
        {
            match self.keys.level() {
                kernels::Level::Eor3 => "aes-pmull-eor3",
                kernels::Level::Base => "aes-pmull",
            }
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            match self.never {}
        }
    }

    /// The AES key size in bytes: 16, 24 or 32.
    pub fn key_len(&self) -> usize {
        #[cfg(target_arch = "aarch64")]
        {
            self.keys.key_len()
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            match self.never {}
        }
    }

    /// GHASH update: `y` is the GHASH state (the GCM block read big-endian); absorb `data`
    /// zero-padded to whole blocks.
    pub fn ghash(&self, y: &mut u128, data: &[u8]) {
        #[cfg(target_arch = "aarch64")]
        {
            self.keys.ghash(y, data)
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            let _ = (y, data);
            match self.never {}
        }
    }

    /// CTR-encrypt `buf` (in place, or its input into its output) starting from the counter
    /// block `ctr` (J0 with its last 32-bit big-endian word already advanced to the first
    /// block; the counter wraps mod 2^32 and never carries into byte 11), then absorb the
    /// ciphertext, its last partial block zero-padded, into the GHASH state `y`.
    pub fn seal<'i, 'o>(&self, ctr: &[u8; 16], y: &mut u128, buf: impl Into<InOutBuf<'i, 'o, u8>>) {
        #[cfg(target_arch = "aarch64")]
        {
            self.keys.crypt::<true>(ctr, y, buf.into())
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            let _ = (ctr, y, buf);
            match self.never {}
        }
    }

    /// Absorb the ciphertext `buf` into `y` (as [`StitchedKey::seal`] does), then decrypt it
    /// (in place, or its input into its output) from the counter block `ctr`.
    pub fn open<'i, 'o>(&self, ctr: &[u8; 16], y: &mut u128, buf: impl Into<InOutBuf<'i, 'o, u8>>) {
        #[cfg(target_arch = "aarch64")]
        {
            self.keys.crypt::<false>(ctr, y, buf.into())
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            let _ = (ctr, y, buf);
            match self.never {}
        }
    }

    /// [`StitchedKey::open`] from `src` into `dst`. The x86-64 kernels write this output past
    /// the caches; here it is written as [`StitchedKey::open`] writes it (the form exists so
    /// that gcmx calls one interface on both architectures). Returns `false`, touching nothing,
    /// when the lengths differ.
    pub fn open_uncached(&self, ctr: &[u8; 16], y: &mut u128, src: &[u8], dst: &mut [u8]) -> bool {
        match InOutBuf::new(src, dst) {
            Ok(buf) => {
                self.open(ctr, y, buf);
                true
            }
            Err(_) => false,
        }
    }

    /// Seal one whole GCM message (SP 800-38D 7.1): encrypt `buf` (in place, or its input into
    /// its output) under the pre-counter block `j0` (the first block uses `inc32(J0)`),
    /// authenticate `aad` and the ciphertext, and return the full 16-byte tag
    /// `GHASH(A, C) ^ AES_K(J0)`. One call does all of it, the counter arithmetic included.
    ///
    /// `j0` is the caller's: `IV ‖ 0^31 ‖ 1` for 12-byte nonces, else `GHASH(IV ‖ 0^s ‖
    /// [len(IV)]_64)` (which [`StitchedKey::ghash`] computes). GCM limits the message to
    /// `2^36 − 32` bytes per `J0`; past that the counter wraps and the keystream repeats,
    /// which the caller must prevent.
    pub fn seal_message<'i, 'o>(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
    ) -> [u8; 16] {
        #[cfg(target_arch = "aarch64")]
        {
            self.keys.message::<true>(j0, aad, buf.into())
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            let _ = (j0, aad, buf);
            match self.never {}
        }
    }

    /// Open one whole GCM message: authenticate `aad` and the ciphertext `buf`, decrypt it (in
    /// place, or its input into its output), and return the **expected** tag. The caller must
    /// compare it with the received tag in constant time and, on a mismatch, not release the
    /// output (in place, re-sealing it with the same `j0` restores the ciphertext; else wipe it).
    pub fn open_message<'i, 'o>(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
    ) -> [u8; 16] {
        #[cfg(target_arch = "aarch64")]
        {
            self.keys.message::<false>(j0, aad, buf.into())
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            let _ = (j0, aad, buf);
            match self.never {}
        }
    }

    /// [`StitchedKey::seal_message`] for a 12-byte nonce (IV), whose J0 is `IV ‖ 0^31 ‖ 1`:
    /// the entry gcmx-core takes for such nonces (gcmx-x86's has the same name and builds J0
    /// in a register; here it is built on the stack and passed on).
    pub fn seal_message96<'i, 'o>(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
    ) -> [u8; 16] {
        self.seal_message(&j0_of(nonce), aad, buf)
    }

    /// [`StitchedKey::open_message`] for a 12-byte nonce, as [`StitchedKey::seal_message96`]
    /// seals: returns the **expected** tag, which the caller compares in constant time.
    pub fn open_message96<'i, 'o>(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
    ) -> [u8; 16] {
        self.open_message(&j0_of(nonce), aad, buf)
    }

    /// Open one whole GCM message as [`StitchedKey::open_message`] does and compare its tag with
    /// the received `tag` (1 to 16 bytes: the full tag's first `tag.len()` bytes) in constant
    /// time: whether it matches (gcmx-x86's has the same name). The expected tag is compared in
    /// general registers and wiped.
    ///
    /// On `false` the output holds unauthenticated plaintext, which the caller must not
    /// release: in place, sealing it again with the same `j0` restores the ciphertext; else
    /// wipe it. A `tag` empty or longer than 16 bytes never matches, and `buf` is then left as
    /// it is.
    pub fn open_message_checked<'i, 'o>(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
        tag: &[u8],
    ) -> bool {
        if tag.is_empty() || tag.len() > 16 {
            return false;
        }
        let mut expected = self.open_message(j0, aad, buf);
        let ok = tag_matches(&expected, tag);
        zeroize::Zeroize::zeroize(&mut expected);
        ok
    }

    /// [`StitchedKey::open_message_checked`] for a 12-byte nonce, as
    /// [`StitchedKey::seal_message96`] seals.
    pub fn open_message96_checked<'i, 'o>(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
        tag: &[u8],
    ) -> bool {
        self.open_message_checked(&j0_of(nonce), aad, buf, tag)
    }

    /// [`StitchedKey::open_message`] from `src` into `dst`, written as
    /// [`StitchedKey::open_uncached`] writes it; the **expected** tag, or `None`, touching
    /// nothing, when the lengths differ.
    pub fn open_message_uncached(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<[u8; 16]> {
        let buf = InOutBuf::new(src, dst).ok()?;
        Some(self.open_message(j0, aad, buf))
    }

    /// `H' = mulX(H)`, `H = AES_K(0^128)`: GHASH's key in the POLYVAL domain (the first of the
    /// powers the key holds).
    pub fn h_prime(&self) -> u128 {
        #[cfg(target_arch = "aarch64")]
        {
            self.keys.h_prime()
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            match self.never {}
        }
    }

    /// `AES_K(b)` in place.
    pub fn encrypt_block(&self, b: &mut [u8; 16]) {
        #[cfg(target_arch = "aarch64")]
        {
            self.keys.encrypt_block(b)
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            let _ = b;
            match self.never {}
        }
    }
}

/// J0 for a 12-byte nonce: `IV ‖ 0^31 ‖ 1` (SP 800-38D 7.1, step 2).
/// Whether `tag` (1 to 16 bytes) is the first `tag.len()` bytes of `expected`: the received tag
/// zero-padded, both read as one integer, the bytes past the tag's (public) length masked off,
/// the difference folded to one word and tested for zero once, behind an optimisation barrier
/// (no branch and no address depends on either tag).
fn tag_matches(expected: &[u8; 16], tag: &[u8]) -> bool {
    let n = tag.len();
    if n == 0 || n > 16 {
        return false;
    }
    let mut t = [0u8; 16];
    t[..n].copy_from_slice(tag);
    let keep = u128::MAX >> (8 * (16 - n));
    let d = (u128::from_le_bytes(*expected) ^ u128::from_le_bytes(t)) & keep;
    core::hint::black_box((d as u64) | (d >> 64) as u64) == 0
}

fn j0_of(nonce: &[u8; 12]) -> [u8; 16] {
    let mut j0 = [0u8; 16];
    j0[..12].copy_from_slice(nonce);
    j0[15] = 1;
    j0
}

impl core::fmt::Debug for StitchedKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("StitchedKey { .. }")
    }
}
