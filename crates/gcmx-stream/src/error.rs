//! The crate's error type: every failure carries a one-line, human-readable reason and a
//! coarse kind.

use std::fmt;
use std::io;

/// What went wrong, as one line of text meant for a person, plus a coarse [`ErrorKind`] for
/// callers that react to a class of failure.
///
/// The adapters' `Read` and `Write` implementations return [`io::Error`]s; an `Error` converts
/// into one (`From<Error> for io::Error`) with [`io::ErrorKind::InvalidData`] for a bad
/// keyset, a malformed ciphertext or a failed authentication, and the kind it came with for a
/// failed read or write. [`Error::from_io`] finds the `Error` inside such an `io::Error` again.
///
/// ```
/// use gcmx_stream::{ErrorKind, Keyset};
/// let err = Keyset::from_json("{}").unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Keyset);
/// let io: std::io::Error = err.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::InvalidData);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    io_kind: Option<io::ErrorKind>,
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
    /// Reading or writing failed.
    Io,
    /// A bad argument (a window too large, an offset out of range, ...).
    InvalidInput,
    /// The crypto library refused (backend unavailable, device error, ...).
    Crypto,
    /// An earlier call on the adapter panicked (in its inner reader or writer, say) before it
    /// completed: the adapter refuses every later call, since its state is that of a call cut
    /// short (a writer would otherwise seal new segments under nonces it already used).
    Poisoned,
}

impl Error {
    /// A new error of `kind` with a one-line `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        // Keep the reason to one line whatever the source of the text.
        if message.contains('\n') {
            message = message.replace(['\r', '\n'], " ");
        }
        Error {
            kind,
            message,
            io_kind: None,
        }
    }

    /// The class of the failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The one-line reason.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The kind of the failed read or write, for [`ErrorKind::Io`] errors.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        self.io_kind
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

    pub(crate) fn io(context: impl fmt::Display, err: io::Error) -> Self {
        let mut e = Error::new(ErrorKind::Io, format!("{context}: {err}"));
        e.io_kind = Some(err.kind());
        e
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidInput, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match e.kind {
            ErrorKind::Keyset | ErrorKind::Format | ErrorKind::Authentication => {
                io::ErrorKind::InvalidData
            }
            ErrorKind::InvalidInput => io::ErrorKind::InvalidInput,
            ErrorKind::Io => e.io_kind.unwrap_or(io::ErrorKind::Other),
            ErrorKind::Crypto | ErrorKind::Poisoned => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
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
        assert!(!e.to_string().contains('\n'));
        assert!(!e.to_string().contains('\r'));
        assert_eq!(e.kind(), ErrorKind::Io);
    }

    #[test]
    fn io_errors_keep_their_kind_and_reason() {
        let e = Error::io("cannot read", io::Error::from(io::ErrorKind::UnexpectedEof));
        let io: io::Error = e.clone().into();
        assert_eq!(io.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(Error::from_io(&io), Some(&e));
        let auth: io::Error = Error::new(ErrorKind::Authentication, "bad tag").into();
        assert_eq!(auth.kind(), io::ErrorKind::InvalidData);
        assert_eq!(auth.to_string(), "bad tag");
    }
}
