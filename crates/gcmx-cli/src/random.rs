//! Random bytes from the operating system.

use crate::error::{Error, ErrorKind, Result};

/// Fills `buf` with random bytes from the OS generator.
pub fn fill(buf: &mut [u8]) -> Result<()> {
    getrandom::fill(buf)
        .map_err(|e| Error::new(ErrorKind::Io, format!("no random numbers from the OS: {e}")))
}
