//! The parts of the `gcmx` library this tool uses.

pub use gcmx::{Backend, Gcm, GcmError, OpenJob, SealJob};
