//! The parts of the `gcmx` library this tool uses.

pub use gcmx::{Backend, Error as GcmError, Gcm, OpenJob, SealJob};
