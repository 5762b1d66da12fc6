//! Adapters that a panic interrupted refuse further use, as a `Mutex` that a panic unwound
//! through is poisoned.
//!
//! A panic in the inner reader or writer (or anywhere below an adapter's call) unwinds out of
//! the call with the adapter's state half updated: segments sealed but not yet counted, bytes
//! consumed from the source but not yet opened. A caller that catches the panic and goes on
//! would continue from that state, and a writer would seal new segments under nonces that
//! already went out. So every call marks the adapter busy on entry and clears the mark on
//! return; a call that finds the mark set knows that an earlier one unwound, and fails.

use std::io;

use crate::error::{Error, ErrorKind};

/// Whether a call on an adapter is under way (or unwound without returning).
#[derive(Debug, Default)]
pub(crate) struct Poison {
    busy: bool,
}

impl Poison {
    /// Marks a call begun: an error if an earlier call never returned (it unwound).
    pub(crate) fn enter(&mut self) -> io::Result<()> {
        if self.busy {
            return Err(poisoned().into());
        }
        self.busy = true;
        Ok(())
    }

    /// Marks the call returned, with whatever result.
    pub(crate) fn leave(&mut self) {
        self.busy = false;
    }

    /// Whether an earlier call unwound.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.busy
    }
}

/// Runs `$call`, one call on an adapter, between `$poison`'s [`Poison::enter`] (returning its
/// error instead where an earlier call unwound) and [`Poison::leave`].
macro_rules! guarded {
    ($poison:expr, $call:expr) => {{
        $poison.enter()?;
        let r = $call;
        $poison.leave();
        r
    }};
}
pub(crate) use guarded;

/// The error of every call on an adapter after a call on it unwound.
pub(crate) fn poisoned() -> Error {
    Error::new(
        ErrorKind::Poisoned,
        "the stream is unusable: an earlier call on it panicked before it completed",
    )
}
