//! The crate's one error type.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::sync::Arc;

/// What went wrong: a coarse [`ErrorKind`], a one-line reason (`Display`), and the failure of
/// the inner reader or writer or of the AES-GCM engine, if any, as [`source`](StdError::source).
///
/// The adapters return [`io::Error`]s: an `Error` converts into one of kind
/// [`io::ErrorKind::InvalidData`] for a bad keyset, a malformed ciphertext or a failed
/// authentication, and of its source's kind for a failed read or write; [`Error::from_io`]
/// finds it again.
///
/// ```
/// use std::error::Error as _;
/// use gcmx_stream::{ErrorKind, Keyset};
/// let err = Keyset::from_json("{}").unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Keyset);
/// assert!(err.source().is_none());
/// let io: std::io::Error = err.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::InvalidData);
/// ```
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Source>,
}

/// The failure below an [`Error`].
#[derive(Debug, Clone)]
enum Source {
    /// Shared: a failed stream reports its error at every later call.
    Io(Arc<io::Error>),
    Gcm(gcmx::GcmError),
}

/// The broad class of an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The keyset is unreadable, malformed or unsupported.
    Keyset,
    /// The ciphertext is malformed: empty, short, truncated, or a bad header.
    Format,
    /// A segment failed authentication: wrong key or associated data, tampering,
    /// truncation at a segment boundary or reordering.
    Authentication,
    /// Reading or writing failed (the [`io::Error`] is the source).
    Io,
    /// A bad argument (a window too large, an offset out of range, ...).
    InvalidInput,
    /// The crypto library refused (backend unavailable, device error, ...; the
    /// [`gcmx::GcmError`] is the source).
    Crypto,
    /// An earlier call on the adapter panicked before it completed: its state is that of a call
    /// cut short, so it refuses every later call (a writer would seal new segments under nonces
    /// it already used).
    Poisoned,
}

impl Error {
    /// An error of `kind` with a one-line `message`.
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        if message.contains('\n') {
            message = message.replace(['\r', '\n'], " ");
        }
        Error {
            kind,
            message,
            source: None,
        }
    }

    /// The class of the failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The `Error` an adapter's `io::Error` carries, if it carries one.
    pub fn from_io(err: &io::Error) -> Option<&Error> {
        err.get_ref().and_then(|e| e.downcast_ref::<Error>())
    }

    pub(crate) fn keyset(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Keyset, message)
    }

    pub(crate) fn format(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Format, message)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidInput, message)
    }

    pub(crate) fn crypto(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Crypto, message)
    }

    /// A failed read or write: `context` says what was being done, `err` is the source.
    pub(crate) fn io(context: impl Into<String>, err: io::Error) -> Self {
        Error {
            source: Some(Source::Io(Arc::new(err))),
            ..Error::new(ErrorKind::Io, context)
        }
    }

    /// Segment `first` did not authenticate, or one of the `count` from it.
    pub(crate) fn authentication(first: u64, count: u64) -> Self {
        let which = if count == 1 {
            format!("segment {first}")
        } else {
            format!("one of segments {first}..{}", first + count - 1)
        };
        let why = if first == 0 {
            "wrong key or associated data, or the file is corrupted, truncated or reordered"
        } else {
            "the file is corrupted, truncated or reordered"
        };
        Error::new(
            ErrorKind::Authentication,
            format!("decryption failed: {which} did not authenticate ({why})"),
        )
    }

    /// A failure of the AES-GCM engine.
    pub(crate) fn gcm(context: impl Into<String>, err: gcmx::GcmError) -> Self {
        Error {
            source: Some(Source::Gcm(err)),
            ..Error::new(ErrorKind::Crypto, context)
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.source {
            Some(Source::Io(e)) => Some(&**e),
            Some(Source::Gcm(e)) => Some(e),
            None => None,
        }
    }
}

/// Two errors are equal when their kind and reason are (their sources are not compared).
impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match e.kind {
            ErrorKind::Keyset | ErrorKind::Format | ErrorKind::Authentication => {
                io::ErrorKind::InvalidData
            }
            ErrorKind::InvalidInput => io::ErrorKind::InvalidInput,
            ErrorKind::Io => match &e.source {
                Some(Source::Io(io)) => io.kind(),
                _ => io::ErrorKind::Other,
            },
            ErrorKind::Crypto | ErrorKind::Poisoned => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

/// The error of a window's allocation of `len` bytes that the system refused.
pub(crate) fn no_memory(len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        format!("cannot allocate {} MiB for a window", len.div_ceil(1 << 20)),
    )
}

/// Runs `f`, a read or write of an inner reader or writer, again while it is `Interrupted`.
pub(crate) fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line() {
        let e = Error::new(ErrorKind::Io, "a\nb\r\nc");
        assert!(!e.to_string().contains(['\n', '\r']));
        assert_eq!(e.kind(), ErrorKind::Io);
    }

    #[test]
    fn io_errors_keep_their_kind_reason_and_source() {
        let eof = io::ErrorKind::UnexpectedEof;
        let e = Error::io("cannot read", io::Error::from(eof));
        let io: io::Error = e.clone().into();
        assert_eq!(io.kind(), eof);
        assert_eq!(Error::from_io(&io), Some(&e));
        let source = e.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(source.map(io::Error::kind), Some(eof));
        let auth: io::Error = Error::new(ErrorKind::Authentication, "bad tag").into();
        assert_eq!(auth.kind(), io::ErrorKind::InvalidData);
        assert_eq!(auth.to_string(), "bad tag");
        let gcm = Error::gcm("backend unavailable", gcmx::GcmError::Authentication);
        assert!(gcm.source().is_some_and(|s| s.is::<gcmx::GcmError>()));
    }
}
