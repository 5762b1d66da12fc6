//! BoringSSL (through `boring-sys`, feature `boringssl`) with its AEAD interface: `EVP_AEAD_CTX`
//! with `EVP_aead_aes_{128,256}_gcm`, `EVP_AEAD_CTX_seal_scatter` and `EVP_AEAD_CTX_open_gather`,
//! whose output may be the input buffer itself (in place) or another buffer.

use boring_sys as ffi;

use crate::peer::{Io, Peer, Place};

/// BoringSSL under one key.
pub(crate) struct BoringSsl(Box<ffi::EVP_AEAD_CTX>);

impl std::fmt::Debug for BoringSsl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoringSsl")
    }
}

/// An `EVP_AEAD_CTX` to set up (its state lives inside the struct: no allocation).
pub(crate) fn blank() -> Box<ffi::EVP_AEAD_CTX> {
    // SAFETY: an all-zero `EVP_AEAD_CTX` is the state `EVP_AEAD_CTX_zero` leaves (plain data).
    Box::new(unsafe { std::mem::zeroed() })
}

/// Sets up `ctx` for `key` (AES-128-GCM or AES-256-GCM by its length, 16-byte tags).
pub(crate) fn init(ctx: &mut ffi::EVP_AEAD_CTX, key: &[u8]) -> bool {
    let aead = if key.len() == 16 {
        // SAFETY: selecting the algorithm has no precondition.
        unsafe { ffi::EVP_aead_aes_128_gcm() }
    } else {
        // SAFETY: as above.
        unsafe { ffi::EVP_aead_aes_256_gcm() }
    };
    // SAFETY: `ctx` is a zeroed or cleaned-up context; `key` is readable for its length.
    let ok = unsafe {
        ffi::EVP_AEAD_CTX_init(ctx, aead, key.as_ptr(), key.len(), 16, std::ptr::null_mut())
    };
    ok == 1
}

/// Releases what `init` set up (the context can be set up again).
pub(crate) fn cleanup(ctx: &mut ffi::EVP_AEAD_CTX) {
    // SAFETY: `ctx` was set up by `init` (or is zeroed, which cleanup accepts).
    unsafe { ffi::EVP_AEAD_CTX_cleanup(ctx) }
}

impl BoringSsl {
    /// The key from its bytes.
    pub(crate) fn new(key: &[u8]) -> Self {
        let mut ctx = blank();
        assert!(init(&mut ctx, key), "EVP_AEAD_CTX_init");
        BoringSsl(ctx)
    }
}

impl Drop for BoringSsl {
    fn drop(&mut self) {
        cleanup(&mut self.0);
    }
}

impl Peer for BoringSsl {
    fn places(&self) -> &'static [Place] {
        &[Place::InPlace, Place::Separate]
    }

    #[inline]
    fn seal(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>) -> [u8; 16] {
        let (input, out, len) = match io {
            Io::InPlace(b) => {
                let p = b.as_mut_ptr();
                (p.cast_const(), p, b.len())
            }
            Io::Separate(i, o) => {
                assert_eq!(i.len(), o.len());
                (i.as_ptr(), o.as_mut_ptr(), i.len())
            }
        };
        let (mut tag, mut tag_len) = ([0u8; 16], 0usize);
        // SAFETY: `input` and `out` are valid for `len` bytes and are either the same buffer
        // (which BoringSSL allows) or distinct ones; the other pointers are valid for the
        // lengths passed with them; the context was set up by `init`.
        let ok = unsafe {
            ffi::EVP_AEAD_CTX_seal_scatter(
                &*self.0,
                out,
                tag.as_mut_ptr(),
                &mut tag_len,
                16,
                nonce.as_ptr(),
                12,
                input,
                len,
                std::ptr::null(),
                0,
                aad.as_ptr(),
                aad.len(),
            )
        };
        assert!(ok == 1 && tag_len == 16, "EVP_AEAD_CTX_seal_scatter");
        tag
    }

    #[inline]
    fn open(&self, nonce: &[u8; 12], aad: &[u8], io: Io<'_>, tag: &[u8; 16]) -> bool {
        let (input, out, len) = match io {
            Io::InPlace(b) => {
                let p = b.as_mut_ptr();
                (p.cast_const(), p, b.len())
            }
            Io::Separate(i, o) => {
                assert_eq!(i.len(), o.len());
                (i.as_ptr(), o.as_mut_ptr(), i.len())
            }
        };
        // SAFETY: as in `seal`.
        let ok = unsafe {
            ffi::EVP_AEAD_CTX_open_gather(
                &*self.0,
                out,
                nonce.as_ptr(),
                12,
                input,
                len,
                tag.as_ptr(),
                16,
                aad.as_ptr(),
                aad.len(),
            )
        };
        ok == 1
    }
}
