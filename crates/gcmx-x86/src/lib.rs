//! gcmx's x86-64 kernels: AES-CTR and GHASH stitched into one loop.
//!
//! [`StitchedKey`] holds an expanded AES-128/192/256 key and the GHASH key's powers. Its bulk
//! loops run the counter-mode keystream (VAES) and GHASH (VPCLMULQDQ) of many blocks per step,
//! the hash of one step's blocks aggregated over the powers `H^n..H^1` with a single reduction,
//! so both units work at once. GHASH is computed in the POLYVAL domain (each block
//! byte-reflected, Montgomery reduction with `0xC2 << 56`), which is the form the rest of gcmx
//! uses: a GHASH state is a `u128`, the 16-byte GCM block read big-endian.
//!
//! Three widths, the widest the CPU runs chosen at run time by [`StitchedKey::new`]:
//! - 512-bit (AVX-512F/BW/VL/VBMI, VAES, VPCLMULQDQ): four blocks a register, 32 blocks a step;
//!   short messages and the end of long ones in masked registers;
//! - 256-bit (AVX2, VAES, VPCLMULQDQ): two blocks a register, 16 blocks a step;
//! - 128-bit (AES-NI, PCLMULQDQ, SSSE3): 8 blocks a step.
//!
//! `new` returns `None` on CPUs without AES-NI (and always off x86-64). All AES and carry-less
//! multiplications are single instructions: no table lookups, and no branch or memory address
//! depends on the key, `H`, the counter, the data or the hash state (the `constant_time` test
//! checks this on the compiled code).
//!
//! A key lives on the heap (about 1.4 KiB: round keys, 32 powers of `H` and their Karatsuba
//! halves), wiped on drop. Each thread keeps the storage of one key it dropped for the next key
//! it builds, and frees it when the thread exits.
//!
//! ```
//! use gcmx_x86::StitchedKey;
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
//! A whole message in one call (GCM specification, test case 2):
//!
//! ```
//! use gcmx_x86::StitchedKey;
//! if let Some(k) = StitchedKey::new(&[0u8; 16]) {
//!     let mut j0 = [0u8; 16];
//!     j0[15] = 1; // 96-bit IV 0^96: J0 = IV ‖ 0^31 ‖ 1
//!     let mut buf = [0u8; 16];
//!     let tag = k.seal_message(&j0, b"", &mut buf[..]);
//!     assert_eq!(u128::from_be_bytes(buf), 0x0388dace60b6a392f328c2b971b2fe78);
//!     assert_eq!(u128::from_be_bytes(tag), 0xab6e47d42cec13bdf53a67b21257bddf);
//!     // open returns the expected tag; the caller compares it in constant time
//!     assert_eq!(k.open_message(&j0, b"", &mut buf[..]), tag);
//!     assert_eq!(buf, [0u8; 16]);
//!     // or the kernel compares it, in registers
//!     k.seal_message(&j0, b"", &mut buf[..]);
//!     assert!(k.open_message_checked(&j0, b"", &mut buf[..], &tag));
//!     assert_eq!(buf, [0u8; 16]);
//! }
//! ```
//!
//! Every pass takes its data as an [`InOutBuf`]: in place (`&mut [u8]` converts into one) or
//! from one buffer into another of the same length (`InOutBuf::new(src, dst)`), which reads the
//! input once and writes only the output.
//!
//! ```
//! use gcmx_x86::{InOutBuf, StitchedKey};
//! if let Some(k) = StitchedKey::new(&[0u8; 16]) {
//!     let mut j0 = [0u8; 16];
//!     j0[15] = 1;
//!     let pt = [0u8; 16];
//!     let mut ct = [0u8; 16];
//!     let tag = k.seal_message(&j0, b"", InOutBuf::new(&pt, &mut ct).unwrap());
//!     assert_eq!(u128::from_be_bytes(ct), 0x0388dace60b6a392f328c2b971b2fe78);
//!     assert_eq!(u128::from_be_bytes(tag), 0xab6e47d42cec13bdf53a67b21257bddf);
//!     assert_eq!(pt, [0u8; 16]); // the input is only read
//! }
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub use inout::InOutBuf;

#[cfg(target_arch = "x86_64")]
mod kernels;

/// An AES key expanded for the x86-64 kernels, with GHASH's key `H = AES_K(0^128)` and its
/// powers. Only [`StitchedKey::new`] builds one, and only on a CPU with the needed features.
/// Zeroized on drop.
pub struct StitchedKey {
    #[cfg(target_arch = "x86_64")]
    keys: kernels::Placed,
    #[cfg(not(target_arch = "x86_64"))]
    never: core::convert::Infallible,
}

impl StitchedKey {
    /// Expand `key` (16, 24 or 32 bytes: AES-128/192/256) for the widest kernels this CPU
    /// runs. `None` when the CPU lacks AES-NI, PCLMULQDQ or SSSE3, when not on x86-64, or for
    /// any other key length.
    pub fn new(key: &[u8]) -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            kernels::Keys::placed(key, kernels::Level::Zmm).map(|keys| StitchedKey { keys })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = key;
            None
        }
    }

    /// Like [`StitchedKey::new`] but at most the 256-bit (VAES + VPCLMULQDQ on AVX2 registers)
    /// kernels, even where the 512-bit ones would run: for comparisons and tests. Output is
    /// identical.
    pub fn new_256(key: &[u8]) -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            kernels::Keys::placed(key, kernels::Level::Wide).map(|keys| StitchedKey { keys })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = key;
            None
        }
    }

    /// Like [`StitchedKey::new`] but always the narrow (128-bit AES-NI + PCLMULQDQ) kernels,
    /// even where wider ones would run: for comparisons and tests. Output is identical.
    pub fn new_narrow(key: &[u8]) -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            kernels::Keys::placed(key, kernels::Level::Narrow).map(|keys| StitchedKey { keys })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = key;
            None
        }
    }

    /// Whether this CPU runs any of the kernels (what [`StitchedKey::new`] checks besides the key).
    pub fn cpu_supported() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            kernels::Level::detect().is_some()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Whether this CPU runs the 256-bit (VAES + VPCLMULQDQ) kernels, or wider ones.
    pub fn cpu_supports_wide() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            kernels::Level::detect() >= Some(kernels::Level::Wide)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Whether this CPU runs the 512-bit (AVX-512 + VAES + VPCLMULQDQ) kernels.
    pub fn cpu_supports_512() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            kernels::Level::detect() == Some(kernels::Level::Zmm)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Which kernels this key runs: `"vaes-vpclmulqdq-512"`, `"vaes-vpclmulqdq-256"` or
    /// `"aesni-pclmulqdq-128"`.
    pub fn kernel_name(&self) -> &'static str {
        #[cfg(target_arch = "x86_64")]
        {
            match self.keys.level() {
                kernels::Level::Zmm => "vaes-vpclmulqdq-512",
                kernels::Level::Wide => "vaes-vpclmulqdq-256",
                kernels::Level::Narrow => "aesni-pclmulqdq-128",
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            match self.never {}
        }
    }

    /// The AES key size in bytes: 16, 24 or 32.
    pub fn key_len(&self) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys.key_len()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            match self.never {}
        }
    }

    /// GHASH update: `y` is the GHASH state (the GCM block read big-endian); absorb `data`
    /// zero-padded to whole blocks.
    pub fn ghash(&self, y: &mut u128, data: &[u8]) {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys.ghash(y, data)
        }
        #[cfg(not(target_arch = "x86_64"))]
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
        #[cfg(target_arch = "x86_64")]
        {
            self.keys.seal(u128::from_be_bytes(*ctr), y, buf.into())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (ctr, y, buf);
            match self.never {}
        }
    }

    /// Absorb the ciphertext `buf` into `y` (as [`StitchedKey::seal`] does), then decrypt it
    /// (in place, or its input into its output) from the counter block `ctr`.
    pub fn open<'i, 'o>(&self, ctr: &[u8; 16], y: &mut u128, buf: impl Into<InOutBuf<'i, 'o, u8>>) {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys.open(u128::from_be_bytes(*ctr), y, buf.into())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (ctr, y, buf);
            match self.never {}
        }
    }

    /// [`StitchedKey::open`] from `src` into `dst`, the plaintext written to memory past the
    /// caches (non-temporal stores): for an output larger than the caches that is not read back
    /// soon, where an ordinary store would first fetch each line it writes. The output is byte
    /// for byte that of `open`, and it is visible to every thread once the call returns.
    /// Returns `false`, touching nothing, when the lengths differ.
    pub fn open_uncached(&self, ctr: &[u8; 16], y: &mut u128, src: &[u8], dst: &mut [u8]) -> bool {
        if src.len() != dst.len() {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            self.keys
                .open_uncached(u128::from_be_bytes(*ctr), y, src, dst);
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (ctr, y);
            match self.never {}
        }
    }

    /// Seal one whole GCM message (SP 800-38D 7.1): encrypt `buf` (in place, or its input into
    /// its output) under the pre-counter block `j0` (the first block uses `inc32(J0)`), authenticate `aad` and the
    /// ciphertext, and return the full 16-byte tag `GHASH(A, C) ^ AES_K(J0)`. One call does all
    /// of it, the counter arithmetic included.
    ///
    /// `j0` is the caller's: `IV ‖ 0^31 ‖ 1` for 12-byte nonces, else `GHASH(IV ‖ 0^s ‖
    /// [len(IV)]_64)` (which [`StitchedKey::ghash`] computes). GCM limits the message to
    /// `2^36 − 32` bytes per `J0`; past that the counter wraps and the keystream repeats,
    /// which the caller must prevent.
    #[inline(always)]
    pub fn seal_message<'i, 'o>(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
    ) -> [u8; 16] {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys
                .message::<true>(kernels::Pre::J0(j0), aad, buf.into())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (j0, aad, buf);
            match self.never {}
        }
    }

    /// Open one whole GCM message: authenticate `aad` and the ciphertext `buf`, decrypt it (in
    /// place, or its input into its output), and return the **expected** tag. The caller must
    /// compare it with the received tag in constant time and, on a mismatch, not release the
    /// output (in place, re-sealing it with the same `j0` restores the ciphertext; else wipe it).
    #[inline(always)]
    pub fn open_message<'i, 'o>(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
    ) -> [u8; 16] {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys
                .message::<false>(kernels::Pre::J0(j0), aad, buf.into())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (j0, aad, buf);
            match self.never {}
        }
    }

    /// [`StitchedKey::seal_message`] for a 12-byte nonce (IV), whose J0 is `IV ‖ 0^31 ‖ 1`:
    /// the kernel builds J0 from the nonce itself, in a register. The fastest way in for short
    /// messages: a J0 the caller has just written byte by byte is read back only once the stores
    /// reach the cache.
    ///
    /// ```
    /// use gcmx_x86::StitchedKey;
    /// if let Some(k) = StitchedKey::new(&[0u8; 16]) {
    ///     // GCM specification, test case 2: one zero block, zero key, zero nonce.
    ///     let mut buf = [0u8; 16];
    ///     let tag = k.seal_message96(&[0u8; 12], b"", &mut buf[..]);
    ///     assert_eq!(u128::from_be_bytes(buf), 0x0388dace60b6a392f328c2b971b2fe78);
    ///     assert_eq!(u128::from_be_bytes(tag), 0xab6e47d42cec13bdf53a67b21257bddf);
    ///     assert_eq!(k.open_message96(&[0u8; 12], b"", &mut buf[..]), tag);
    /// }
    /// ```
    #[inline(always)]
    pub fn seal_message96<'i, 'o>(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
    ) -> [u8; 16] {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys
                .message::<true>(kernels::Pre::Nonce(nonce), aad, buf.into())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (nonce, aad, buf);
            match self.never {}
        }
    }

    /// [`StitchedKey::open_message`] for a 12-byte nonce, as [`StitchedKey::seal_message96`]
    /// seals: returns the **expected** tag, which the caller compares in constant time.
    #[inline(always)]
    pub fn open_message96<'i, 'o>(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
    ) -> [u8; 16] {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys
                .message::<false>(kernels::Pre::Nonce(nonce), aad, buf.into())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (nonce, aad, buf);
            match self.never {}
        }
    }

    /// Open one whole GCM message as [`StitchedKey::open_message`] does and compare its tag with
    /// the received `tag` (1 to 16 bytes: the full tag's first `tag.len()` bytes) in constant
    /// time, in registers: whether it matches. The expected tag is never written to memory (for
    /// a forged message it is the tag that would make the forgery pass).
    ///
    /// On `false` the output holds unauthenticated plaintext, which the caller must not
    /// release: in place, sealing it again with the same `j0` restores the ciphertext; else
    /// wipe it. A `tag` empty or longer than 16 bytes never matches, and `buf` is then left as
    /// it is.
    ///
    /// ```
    /// use gcmx_x86::StitchedKey;
    /// if let Some(k) = StitchedKey::new(&[1u8; 16]) {
    ///     let j0 = [2u8; 16];
    ///     let mut buf = *b"twelve bytes";
    ///     let tag = k.seal_message(&j0, b"ad", &mut buf[..]);
    ///     assert!(k.open_message_checked(&j0, b"ad", &mut buf[..], &tag[..12]));
    ///     assert_eq!(&buf, b"twelve bytes");
    ///     k.seal_message(&j0, b"ad", &mut buf[..]);
    ///     assert!(!k.open_message_checked(&j0, b"AD", &mut buf[..], &tag));
    ///     assert!(!k.open_message_checked(&j0, b"ad", &mut buf[..], &[]));
    /// }
    /// ```
    #[inline(always)]
    pub fn open_message_checked<'i, 'o>(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
        tag: &[u8],
    ) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys
                .open_checked(kernels::Pre::J0(j0), aad, buf.into(), tag)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (j0, aad, buf, tag);
            match self.never {}
        }
    }

    /// [`StitchedKey::open_message_checked`] for a 12-byte nonce, J0 built by the kernel as
    /// [`StitchedKey::seal_message96`] builds it.
    #[inline(always)]
    pub fn open_message96_checked<'i, 'o>(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        buf: impl Into<InOutBuf<'i, 'o, u8>>,
        tag: &[u8],
    ) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys
                .open_checked(kernels::Pre::Nonce(nonce), aad, buf.into(), tag)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (nonce, aad, buf, tag);
            match self.never {}
        }
    }

    /// [`StitchedKey::open_message`] from `src` into `dst`, the plaintext written past the
    /// caches as [`StitchedKey::open_uncached`] writes it; the **expected** tag, or `None`,
    /// touching nothing, when the lengths differ.
    ///
    /// ```
    /// use gcmx_x86::{InOutBuf, StitchedKey};
    /// if let Some(k) = StitchedKey::new(&[3u8; 32]) {
    ///     let (j0, pt) = ([9u8; 16], vec![5u8; 100_000]);
    ///     let mut ct = vec![0u8; pt.len()];
    ///     let tag = k.seal_message(&j0, b"ad", InOutBuf::new(&pt, &mut ct).unwrap());
    ///     let mut out = vec![0u8; pt.len()];
    ///     assert_eq!(k.open_message_uncached(&j0, b"ad", &ct, &mut out), Some(tag));
    ///     assert_eq!(out, pt);
    /// }
    /// ```
    pub fn open_message_uncached(
        &self,
        j0: &[u8; 16],
        aad: &[u8],
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<[u8; 16]> {
        if src.len() != dst.len() {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        {
            Some(self.keys.open_message_uncached(j0, aad, src, dst))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (j0, aad);
            match self.never {}
        }
    }

    /// `H' = mulX(H)`, `H = AES_K(0^128)`: GHASH's key in the POLYVAL domain (the first of the
    /// powers the key holds).
    pub fn h_prime(&self) -> u128 {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys.h_prime()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            match self.never {}
        }
    }

    /// `AES_K(b)` in place.
    pub fn encrypt_block(&self, b: &mut [u8; 16]) {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys.encrypt_block(b)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = b;
            match self.never {}
        }
    }
}

impl Clone for StitchedKey {
    fn clone(&self) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            StitchedKey {
                keys: self.keys.placed_clone(),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            match self.never {}
        }
    }
}

impl core::fmt::Debug for StitchedKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("StitchedKey { .. }")
    }
}
