#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// How data flows. An adapter (`writer.rs`: `EncryptingWriter`; `reader.rs`: `DecryptingReader`;
// `seekable.rs`; `async_io.rs`) holds its inner reader or writer and a core: the writers' is the
// `Sealer` (`writer.rs`), the readers' the `ReadCore` (`read_core.rs`). The core owns the
// stream's position and its `Window` (`window.rs`, the buffer) and decides each step: copy the
// caller's bytes into the window or hand plaintext out of it, fill it, or take whole segments
// straight from the caller's buffer or a source's (`relay.rs` and `piped.rs` run the two large
// steps that need more than one window). Each step's crypto goes to the stream's
// `SegmentCodec` (`codec.rs`), built once from the header (`header.rs` finds the key,
// `format.rs` derives it): it turns a `Span` of segments (`layout.rs`, all the geometry) into
// AES-GCM calls with each segment's `Nonce` (`nonce.rs`) on the `Engine` (`engine.rs`), the one
// place that calls `gcmx`, in batches on every core or the GPU. Below them: keysets
// (`keyset.rs`, `proto.rs`), options, errors, the copy and wipe helpers, and the poison flag that
// a panic leaves on an adapter.

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
