//! The error of gcmx's runtime-sized API and of its backends (`gcmx::GcmError`). The typed API
//! returns the `aead` crate's opaque `aead::Error`, as `aes-gcm` does.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// Why an AES-GCM operation was refused or failed.
///
/// Caller mistakes (lengths, arguments), a failed authentication, a backend that cannot run
/// here, and a device that failed are different variants; none of them carries secret data.
///
/// ```
/// # mod gcmx { pub use gcmx_core::Error as GcmError; } // the name `gcmx` re-exports it under
/// use gcmx::GcmError;
/// let err = GcmError::KeyLength(15);
/// assert!(err.to_string().contains("key length"));
/// assert!(!err.is_device_failure());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The key is not 16, 24 or 32 bytes long (the value is the length given).
    KeyLength(usize),
    /// The nonce is empty (the value is the length given; GCM needs at least one byte).
    NonceLength(usize),
    /// The tag length is not allowed: 12 to 16 bytes, and 4 or 8 with the `hazmat` feature
    /// (SP 800-38D 5.2.1.2 and its appendix C).
    TagLength(usize),
    /// The plaintext or ciphertext is longer than 2^36 − 32 bytes (SP 800-38D, 5.2.1.1).
    PlaintextTooLong,
    /// The associated data is longer than 2^61 − 1 bytes (SP 800-38D, 5.2.1.1).
    AadTooLong,
    /// The tag did not match: the data, the associated data, the nonce or the key is wrong.
    Authentication,
    /// An argument other than a length is wrong (for example a key index past the end of a
    /// keyring, or a buffer that belongs to another device). The text says which.
    InvalidInput(String),
    /// The requested backend cannot run here (not compiled in, no driver, no device).
    BackendUnavailable(String),
    /// The device failed (out of memory, a failed copy or launch, a lost device). No output
    /// was released; the driver's error is the [`std::error::Error::source`].
    Device(DeviceError),
}

impl Error {
    /// Whether this is a failure of the device rather than of the caller's input: the same call
    /// may succeed later or on another backend.
    pub fn is_device_failure(&self) -> bool {
        matches!(self, Error::Device(_))
    }
}

/// A failed device operation: what gcmx was doing, and the driver's error.
///
/// ```
/// # mod gcmx { pub use gcmx_core::{DeviceError, Error as GcmError}; } // as `gcmx` re-exports them
/// use gcmx::{DeviceError, GcmError};
/// let e = GcmError::Device(DeviceError::new("copy to the device"));
/// assert_eq!(e.to_string(), "device error: copy to the device");
/// ```
#[derive(Clone)]
pub struct DeviceError {
    what: Cow<'static, str>,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl DeviceError {
    /// A device failure while doing `what`, with no further cause.
    pub fn new(what: impl Into<Cow<'static, str>>) -> Self {
        DeviceError {
            what: what.into(),
            source: None,
        }
    }

    /// A device failure while doing `what`, caused by `source` (the driver's error).
    pub fn with_source(
        what: impl Into<Cow<'static, str>>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        DeviceError {
            what: what.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// What gcmx was doing when the device failed.
    pub fn what(&self) -> &str {
        &self.what
    }
}

impl fmt::Debug for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("DeviceError");
        d.field("what", &self.what);
        if let Some(s) = &self.source {
            d.field("source", &format_args!("{s}"));
        }
        d.finish()
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)?;
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

/// Two device errors are equal when they describe the same operation and cause.
impl PartialEq for DeviceError {
    fn eq(&self, other: &Self) -> bool {
        self.what == other.what
            && self.source.as_ref().map(|s| s.to_string())
                == other.source.as_ref().map(|s| s.to_string())
    }
}

impl Eq for DeviceError {}

impl std::error::Error for DeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
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
                "invalid tag length {n}: GCM tags are 12 to 16 bytes (4 or 8 only with the `hazmat` feature)"
            ),
            Error::PlaintextTooLong => {
                f.write_str("length limit: plaintext longer than 2^36 - 32 bytes")
            }
            Error::AadTooLong => {
                f.write_str("length limit: associated data longer than 2^61 - 1 bytes")
            }
            Error::Authentication => f.write_str("authentication failed: tag mismatch"),
            Error::InvalidInput(why) => write!(f, "invalid input: {why}"),
            Error::BackendUnavailable(why) => write!(f, "backend unavailable: {why}"),
            Error::Device(e) => write!(f, "device error: {}", e.what),
        }
    }
}

impl std::error::Error for Error {
    /// For [`Error::Device`], the driver's error.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Device(e) => std::error::Error::source(e),
            _ => None,
        }
    }
}

impl From<DeviceError> for Error {
    fn from(e: DeviceError) -> Error {
        Error::Device(e)
    }
}

impl From<Error> for aead::Error {
    fn from(_: Error) -> aead::Error {
        aead::Error
    }
}
