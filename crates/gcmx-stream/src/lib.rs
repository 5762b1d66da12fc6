#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// How data flows. An adapter (`writer.rs`, `reader.rs`, `seekable.rs`, `async_io.rs`) holds its
// inner reader or writer and a core (the writers' `Sealer`, the readers' `ReadCore` in
// `read_core.rs`), which owns the stream's position and `Window` (`window.rs`) and decides each
// step; `relay.rs` and `piped.rs` run the large steps that span windows. The crypto goes to the
// stream's `SegmentCodec` (`codec.rs`), built from the header (`header.rs`, `format.rs`): a
// `Span` of segments (`layout.rs`) becomes AES-GCM calls with each segment's nonce
// (`nonce.rs`) on the `Engine` (`engine.rs`), the one place that calls `gcmx`. Below: keysets
// (`keyset.rs`, `proto.rs`), options, errors, copies, wipes and the poison flag.

#[cfg(feature = "tokio")]
mod async_io;
mod codec;
mod copy;
mod engine;
mod error;
mod format;
mod header;
mod keyset;
mod layout;
mod nonce;
mod options;
mod piped;
mod poison;
mod proto;
mod read_core;
mod reader;
mod relay;
mod seekable;
mod window;
mod wipe;
mod writer;

#[cfg(feature = "tokio")]
pub use async_io::{AsyncDecryptingReader, AsyncEncryptingWriter};
pub use error::{Error, ErrorKind, Result};
pub use gcmx::Backend;
pub use keyset::{DEFAULT_SEGMENT_SIZE, KeySize, Keyset, MAX_SEGMENT_SIZE, StreamingKey};
pub use options::{MAX_WINDOW_BYTES, Options};
pub use reader::DecryptingReader;
pub use seekable::SeekableReader;
pub use writer::EncryptingWriter;
