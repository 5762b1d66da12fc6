//! Adapters that a panic interrupted refuse further use, as a poisoned `Mutex` does.
//!
//! A panic below an adapter's call leaves its state half updated (segments sealed but not
//! counted, bytes consumed but not opened): a caller that caught it and went on would have a
//! writer seal new segments under nonces already used. So every call marks the adapter busy on
//! entry and clears the mark on return; a call that finds the mark set fails.

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
            let msg = "the stream is unusable: an earlier call on it panicked before it completed";
            return Err(Error::new(ErrorKind::Poisoned, msg).into());
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
