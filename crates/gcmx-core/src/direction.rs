//! The direction of an AES-GCM operation: the one place where sealing and opening differ is
//! whether GHASH reads the buffer after or before the keystream is applied.

/// Seal (encrypt, then hash the ciphertext) or open (hash the ciphertext, then decrypt).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Encrypt the buffer; the tag is computed over the ciphertext written.
    Seal,
    /// Decrypt the buffer; the tag is computed over the ciphertext read.
    Open,
}
