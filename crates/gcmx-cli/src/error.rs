//! The tool's error type: every failure carries a one-line, human-readable reason.

use std::fmt;

/// What went wrong, as one line of text meant for a person, plus a coarse kind for tests
/// and for callers that want to react to a class of failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
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
    /// A bad command-line request (existing output without `--force`, bad hex, ...).
    Usage,
    /// The crypto library refused (backend unavailable, device error, ...).
    Crypto,
}

impl Error {
    /// A new error of `kind` with a one-line `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        // Keep the reason to one line whatever the source of the text.
        if message.contains('\n') {
            message = message.replace(['\r', '\n'], " ");
        }
        Error { kind, message }
    }

    /// The class of the failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The one-line reason.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn keyset(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Keyset, message)
    }

    pub(crate) fn io(context: impl fmt::Display, err: std::io::Error) -> Self {
        Error::new(ErrorKind::Io, format!("{context}: {err}"))
    }

    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Usage, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The library's errors keep their reason; a bad argument is a usage error here.
impl From<gcmx_stream::Error> for Error {
    fn from(e: gcmx_stream::Error) -> Error {
        use gcmx_stream::ErrorKind as K;
        let kind = match e.kind() {
            K::Keyset => ErrorKind::Keyset,
            K::Format => ErrorKind::Format,
            K::Authentication => ErrorKind::Authentication,
            K::Io => ErrorKind::Io,
            K::InvalidInput => ErrorKind::Usage,
            _ => ErrorKind::Crypto,
        };
        Error::new(kind, e.message())
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
}
