//! The one error type of gcmx.

use core::fmt;

/// Why an AES-GCM operation was refused or failed.
///
/// Every variant names the check that failed; none of them carries secret data.
///
/// ```
/// let err = gcmx_core::KeyMaterial::new(&[0u8; 15]).unwrap_err();
/// assert_eq!(err, gcmx_core::Error::KeyLength(15));
/// assert!(err.to_string().contains("key length"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The key is not 16, 24 or 32 bytes long (the value is the length given).
    KeyLength(usize),
    /// The nonce is empty (the value is the length given; GCM needs at least one byte).
    NonceLength(usize),
    /// The tag length is not one of 4, 8, 12, 13, 14, 15 or 16 bytes (SP 800-38D, 5.2.1.2).
    TagLength(usize),
    /// The plaintext or ciphertext is longer than 2^36 − 32 bytes (SP 800-38D, 5.2.1.1).
    PlaintextTooLong,
    /// The associated data is longer than 2^61 − 1 bytes (SP 800-38D, 5.2.1.1).
    AadTooLong,
    /// The tag did not match: the data, the associated data, the nonce or the key is wrong.
    Authentication,
    /// The requested backend cannot run here (no driver, no device, not compiled in).
    BackendUnavailable(String),
    /// The device failed (out of memory, a failed launch, a lost device). No output was released.
    Device(String),
    /// Inputs that must have equal lengths do not.
    LengthMismatch {
        /// The length that was expected.
        expected: usize,
        /// The length that was given.
        given: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::KeyLength(n) => {
                write!(f, "invalid key length {n}: AES keys are 16, 24 or 32 bytes")
            }
            Error::NonceLength(n) => write!(
                f,
                "invalid nonce length {n}: GCM needs a nonce of at least 1 byte"
            ),
            Error::TagLength(n) => write!(
                f,
                "invalid tag length {n}: GCM tags are 4, 8, 12, 13, 14, 15 or 16 bytes"
            ),
            Error::PlaintextTooLong => {
                f.write_str("length limit: plaintext longer than 2^36 - 32 bytes")
            }
            Error::AadTooLong => {
                f.write_str("length limit: associated data longer than 2^61 - 1 bytes")
            }
            Error::Authentication => f.write_str("authentication failed: tag mismatch"),
            Error::BackendUnavailable(why) => write!(f, "backend unavailable: {why}"),
            Error::Device(why) => write!(f, "device error: {why}"),
            Error::LengthMismatch { expected, given } => {
                write!(f, "length mismatch: expected {expected} bytes, got {given}")
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for aead::Error {
    fn from(_: Error) -> aead::Error {
        aead::Error
    }
}
