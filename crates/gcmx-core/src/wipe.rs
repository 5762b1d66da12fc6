//! Wiping a 16-byte secret (a tag, J0) without slowing the code around it.

use zeroize::Zeroize;

/// Wipe `b`, in a call that is not inlined. Inlined, `zeroize`'s sixteen byte-wise volatile
/// stores lead the compiler to keep the array as sixteen separate bytes wherever it is used, so
/// every copy and read of it goes byte by byte (a `Gcm` open's tag handling took longer than the
/// whole 64-byte decryption). Out of line, the array stays one 16-byte value.
#[inline(never)]
pub(crate) fn wipe16(b: &mut [u8; 16]) {
    b.zeroize();
}
