//! gcmx's x86-64 kernels: AES-CTR and GHASH stitched into one loop.
//!
//! [`StitchedKey`] holds an expanded AES-128/192/256 key and the GHASH key's powers. Its bulk
//! loops run 16 blocks per step on 256-bit registers: VAES (`vaesenc` on two blocks per register)
//! for the counter-mode keystream and VPCLMULQDQ for GHASH, the hash of one step's 16 ciphertext
//! blocks aggregated over the powers `H^16..H^1` with a single reduction, so both units work at
//! once. GHASH is computed in the POLYVAL domain (each block byte-reflected, Montgomery reduction
//! with `0xC2 << 56`), which is the form the rest of gcmx uses: a GHASH state is a `u128`, the
//! 16-byte GCM block read big-endian.
//!
//! Those wide kernels need AES-NI, PCLMULQDQ, AVX2, VAES and VPCLMULQDQ. On CPUs with AES-NI,
//! PCLMULQDQ and SSSE3 but not the rest, narrow kernels of the same shape run on 128-bit
//! registers (8 blocks a step). [`StitchedKey::new`] detects the features at run time and
//! returns `None` on CPUs without AES-NI (and always off x86-64). All AES and carry-less
//! multiplications are single instructions: no table lookups, no branches on secrets.
//!
//! ```
//! use gcmx_x86::StitchedKey;
//! if let Some(k) = StitchedKey::new(&[0u8; 16]) {
//!     // GCM specification, test case 2: one zero block under the zero key.
//!     let mut buf = [0u8; 16];
//!     let mut ctr = [0u8; 16];
//!     ctr[15] = 2; // J0 = 0^96 ‖ 1, first block uses J0 + 1
//!     let mut y = 0u128;
//!     k.seal(&ctr, &mut y, &mut buf);
//!     assert_eq!(u128::from_be_bytes(buf), 0x0388dace60b6a392f328c2b971b2fe78);
//!     // length block: 0 bits of AAD, 128 bits of ciphertext
//!     k.ghash(&mut y, &128u128.to_be_bytes());
//!     assert_eq!(y, 0xf38cbb1ad69223dcc3457ae5b6b0f885);
//! }
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(target_arch = "x86_64")]
mod kernels;

/// An AES key expanded for the x86-64 kernels, with GHASH's key `H = AES_K(0^128)` and its
/// powers. Only [`StitchedKey::new`] builds one, and only on a CPU with the needed features.
/// Zeroized on drop.
#[derive(Clone)]
pub struct StitchedKey {
    #[cfg(target_arch = "x86_64")]
    keys: Box<kernels::Keys>,
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
            kernels::Keys::new(key, kernels::Level::Wide).map(|keys| StitchedKey { keys })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = key;
            None
        }
    }

    /// Like [`StitchedKey::new`] but always the narrow (128-bit AES-NI + PCLMULQDQ) kernels,
    /// even where the wide ones would run: for comparisons and tests. Output is identical.
    pub fn new_narrow(key: &[u8]) -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            kernels::Keys::new(key, kernels::Level::Narrow).map(|keys| StitchedKey { keys })
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

    /// Whether this CPU runs the wide (VAES + VPCLMULQDQ) kernels.
    pub fn cpu_supports_wide() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            kernels::Level::detect() == Some(kernels::Level::Wide)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Which kernels this key runs: `"vaes-vpclmulqdq-256"` or `"aesni-pclmulqdq-128"`.
    pub fn kernel_name(&self) -> &'static str {
        #[cfg(target_arch = "x86_64")]
        {
            match self.keys.level() {
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

    /// CTR-encrypt `buf` in place starting from the counter block `ctr` (J0 with its last
    /// 32-bit big-endian word already advanced to the first block; the counter wraps mod 2^32
    /// and never carries into byte 11), then absorb the ciphertext, its last partial block
    /// zero-padded, into the GHASH state `y`.
    pub fn seal(&self, ctr: &[u8; 16], y: &mut u128, buf: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys.seal(u128::from_be_bytes(*ctr), y, buf)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (ctr, y, buf);
            match self.never {}
        }
    }

    /// Absorb the ciphertext `buf` into `y` (as [`StitchedKey::seal`] does), then decrypt it in
    /// place from the counter block `ctr`.
    pub fn open(&self, ctr: &[u8; 16], y: &mut u128, buf: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        {
            self.keys.open(u128::from_be_bytes(*ctr), y, buf)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (ctr, y, buf);
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

impl core::fmt::Debug for StitchedKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("StitchedKey { .. }")
    }
}
