//! The tool's error: gcmx-stream's errors wrapped whole (their kind, reason and source kept),
//! and the tool's own failures (a refused request, its own files and streams, the demo's
//! checks). Every error reads as one line: its reason and those of its sources, joined.

use std::error::Error as StdError;
use std::fmt;

/// What went wrong: a coarse [`ErrorKind`], a reason, and the failure below it (a
/// [`gcmx_stream::Error`], an [`std::io::Error`], a [`gcmx::GcmError`]) as its
/// [`source`](StdError::source). `Display` writes the whole chain on one line.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    context: Option<String>,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

/// The broad class of an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A request the tool refuses: an existing output without `--force`, bad hex, a size out
    /// of range... (exit status 2).
    Usage,
    /// Reading or writing the tool's own files and streams failed.
    Io,
    /// The keyset file cannot be used (a directory, too large, not text).
    Keyset,
    /// gcmx-stream failed (the error's source), with this kind: a keyset, a malformed or
    /// damaged stream, a read or write inside a stream, the crypto.
    Stream(gcmx_stream::ErrorKind),
    /// A self-check of `gcmx demo` failed.
    Check,
}

impl Error {
    /// An error of `kind` with a reason and no source.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            context: Some(message.into()),
            source: None,
        }
    }

    /// The class of the failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The whole reason on one line: this error's and each of its sources', joined by `: `.
    pub fn message(&self) -> String {
        let mut parts: Vec<String> = self.context.iter().cloned().collect();
        let mut next = self
            .source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static));
        while let Some(e) = next {
            parts.push(e.to_string());
            next = e.source();
        }
        parts.join(": ").replace(['\r', '\n'], " ")
    }

    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Usage, message)
    }

    pub(crate) fn keyset(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Keyset, message)
    }

    /// A failed read or write of the tool's own: `context` says what was being done.
    pub fn io(context: impl Into<String>, err: std::io::Error) -> Self {
        Error::with_source(ErrorKind::Io, Some(context.into()), err)
    }

    /// A failure of gcmx-stream, with `context` (what the tool was doing) in front of its reason.
    pub(crate) fn stream(context: impl Into<String>, err: gcmx_stream::Error) -> Self {
        Error {
            context: Some(context.into()),
            ..Error::from(err)
        }
    }

    pub(crate) fn with_source(
        kind: ErrorKind,
        context: Option<String>,
        source: impl StdError + Send + Sync + 'static,
    ) -> Self {
        Error {
            kind,
            context,
            source: Some(Box::new(source)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

/// The library's error, kept whole; a bad argument is a usage error here.
impl From<gcmx_stream::Error> for Error {
    fn from(e: gcmx_stream::Error) -> Error {
        let kind = match e.kind() {
            gcmx_stream::ErrorKind::InvalidInput => ErrorKind::Usage,
            k => ErrorKind::Stream(k),
        };
        Error::with_source(kind, None, e)
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
    fn a_stream_error_is_kept_whole_with_its_source() {
        let stream = gcmx_stream::Keyset::from_json("{}").unwrap_err();
        let e = Error::stream("keyset k.json", stream.clone());
        assert_eq!(e.kind(), ErrorKind::Stream(gcmx_stream::ErrorKind::Keyset));
        assert_eq!(e.to_string(), format!("keyset k.json: {stream}"));
        let inner = e
            .source()
            .and_then(|s| s.downcast_ref::<gcmx_stream::Error>());
        assert_eq!(inner, Some(&stream));
        let io = Error::io("cannot write out", std::io::ErrorKind::BrokenPipe.into());
        assert!(io.to_string().starts_with("cannot write out: "), "{io}");
    }
}
