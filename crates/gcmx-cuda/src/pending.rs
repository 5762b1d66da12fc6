//! [`Pending`]: the completion of an asynchronous call, holding the borrows of the buffers it uses.
//!
//! Layer: above the runtime (beside the device-resident API).

use std::marker::PhantomData;
use std::sync::Arc;

use gcmx_core::Error;

use crate::abi;
use crate::runtime::{Fence, Gpu, ParamSlot};

/// Work an asynchronous call queued on a [`crate::Stream`], not yet known to be complete.
///
/// It borrows everything the work uses (the engine or keyring, the stream, the buffers: mutably those it
/// writes) until it is waited for, so the borrow checker keeps the caller from reading, writing or
/// freeing them meanwhile; dropping it waits too. Completion is also visible on the stream itself: work
/// the caller queues later on the same stream runs after it, and [`crate::Stream::synchronize`] waits
/// for it.
///
/// Leaking a `Pending` (`std::mem::forget`) is safe: the borrows end, but gcmx's buffers (and keys) also
/// record the work's completion event, and every later use of them (a download, another call on any
/// stream, dropping them) waits for it first. Only the verdict of a single-buffer open is lost.
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaEngine, DeviceBuf, Stream};
/// let engine = CudaEngine::new(&[7u8; 32])?;
/// let stream = Stream::new()?;
/// let mut buf = DeviceBuf::from_host(&[1u8; 1 << 20])?;
/// let mut tag = DeviceBuf::new(16)?;
/// let pending = engine.seal_async(&stream, &[0u8; 12], b"hdr", &mut buf, &mut tag)?;
/// // ... queue other work, on this or other streams ...
/// pending.wait()?;
/// let tag_bytes = tag.to_vec()?;
/// # let _ = tag_bytes;
/// # Ok::<(), gcmx::cuda::Error>(())
/// ```
///
/// The buffers cannot be touched while the work is pending:
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaEngine, DeviceBuf, Stream};
/// let engine = CudaEngine::new(&[7u8; 32]).unwrap();
/// let stream = Stream::new().unwrap();
/// let mut buf = DeviceBuf::new(64).unwrap();
/// let mut tag = DeviceBuf::new(16).unwrap();
/// let pending = engine.seal_async(&stream, &[0u8; 12], b"", &mut buf, &mut tag).unwrap();
/// let bytes = buf.to_vec(); // `buf` is borrowed by `pending`
/// pending.wait().unwrap();
/// ```
///
/// nor freed, nor can the engine go away:
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaEngine, DeviceBuf, Stream};
/// let stream = Stream::new().unwrap();
/// let mut buf = DeviceBuf::new(64).unwrap();
/// let mut tag = DeviceBuf::new(16).unwrap();
/// let pending = {
///     let engine = CudaEngine::new(&[7u8; 32]).unwrap();
///     engine.seal_async(&stream, &[0u8; 12], b"", &mut buf, &mut tag).unwrap()
/// }; // `engine` dropped while borrowed
/// pending.wait().unwrap();
/// ```
#[must_use = "dropping a Pending waits for its work; keep it to overlap work, or call wait()"]
pub struct Pending<'a> {
    fence: Option<Arc<Fence>>,
    /// A single-buffer open's verdict: the slot it lands in and its offset.
    verdict: Option<(Arc<Gpu>, ParamSlot, usize)>,
    _borrows: PhantomData<&'a mut ()>,
}

impl core::fmt::Debug for Pending<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pending")
            .field("waited", &self.fence.is_none())
            .finish_non_exhaustive()
    }
}

impl<'a> Pending<'a> {
    pub(crate) fn new(
        fence: Arc<Fence>,
        verdict: Option<(Arc<Gpu>, ParamSlot, usize)>,
    ) -> Pending<'a> {
        Pending {
            fence: Some(fence),
            verdict,
            _borrows: PhantomData,
        }
    }

    /// Work that needed nothing queued (an empty batch).
    pub(crate) fn done() -> Pending<'a> {
        Pending {
            fence: None,
            verdict: None,
            _borrows: PhantomData,
        }
    }

    /// Let the work run on without waiting for it here (the `*_raw` calls): the caller's stream says
    /// when it is complete. gcmx's own buffers still record its completion (see the type's
    /// documentation), and a verdict slot is returned to the pool once the work is done.
    pub(crate) fn detach(mut self) {
        if let Some((gpu, slot, _)) = self.verdict.take() {
            gpu.give_slot(slot);
        }
        self.fence = None;
    }

    /// Wait (sleeping) until the work is complete. For a single-buffer open, `Error::Authentication`
    /// when the tag was wrong (the buffer has been zeroed on the device); for a batch, the verdicts are
    /// in its verdict buffer. `Error::Device` when the device failed.
    pub fn wait(mut self) -> Result<(), Error> {
        self.finish()
    }

    /// Whether the work is complete (without waiting).
    pub fn is_complete(&self) -> Result<bool, Error> {
        match &self.fence {
            Some(f) => f.done(),
            None => Ok(true),
        }
    }

    fn finish(&mut self) -> Result<(), Error> {
        let Some(f) = self.fence.take() else {
            return Ok(());
        };
        f.wait()?;
        let Some((gpu, mut slot, at)) = self.verdict.take() else {
            return Ok(());
        };
        let v = {
            let b = slot.bytes()?;
            let v = b.get(at).copied();
            b.fill(0); // the nonce and AAD it held, for the next user
            v
        };
        gpu.give_slot(slot);
        match v {
            Some(abi::VERDICT_OK) => Ok(()),
            Some(abi::VERDICT_REFUSED) => Err(Error::Authentication),
            other => Err(crate::runtime::internal(format!(
                "single-message verdict {other:?}"
            ))),
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
