#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "tokio")]
mod async_io;
pub mod bulk;
mod engine;
mod error;
mod format;
mod header;
mod keyset;
mod options;
mod piped;
mod poison;
mod proto;
mod random;
mod reader;
mod relay;
mod seekable;
mod winbuf;
mod window;
mod wipe;
mod writer;

#[cfg(feature = "tokio")]
pub use async_io::{AsyncDecryptingReader, AsyncEncryptingWriter};
pub use error::{Error, ErrorKind, Result};
pub use gcmx::Backend;
pub use keyset::{
    DEFAULT_SEGMENT_SIZE, KeySize, Keyset, MAX_SEGMENT_SIZE, StreamingKey, min_segment_size,
};
pub use options::{MAX_WINDOW_BYTES, Options};
pub use reader::DecryptingReader;
pub use seekable::SeekableReader;
pub use writer::EncryptingWriter;
