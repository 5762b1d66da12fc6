//! [`Pending`]: the completion of an asynchronous call, holding the borrows of the buffers it uses.
//!
//! Layer: above the runtime and [`DeviceMemory`] (the device-resident work, `dbatch`, makes it).

use std::sync::Arc;

use gcmx_core::Error;

use crate::abi;
use crate::memory::DeviceMemory;
use crate::runtime::{Fence, Gpu, ParamSlot};

/// What a launch on a caller's stream left to wait for: its fence (none when nothing was queued), and
/// for a single message the parameter slot holding its nonce and AAD.
pub(crate) type Queued = (Option<Arc<Fence>>, Option<Slot>);

/// A single message's parameter slot: wiped and given back once the work is done; an open's verdict
/// lands in it at offset `verdict`.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) slot: ParamSlot,
    pub(crate) verdict: Option<usize>,
}

/// Work an asynchronous call queued on a [`crate::Stream`], not yet known to be complete: what every
/// device-resident call of [`crate::CudaKeyring`] (and so of [`crate::CudaEngine`]) returns. The call
/// made synchronous is the call followed by [`Pending::wait`].
///
/// It borrows everything the work uses (the engine or keyring, the stream, the buffers: mutably those it
/// writes) until it is waited for, so the borrow checker keeps the caller from reading, writing or
/// freeing them meanwhile; dropping it waits too. Completion is also visible on the stream itself: work
/// the caller queues later on the same stream runs after it, and [`crate::Stream::synchronize`] waits
/// for it. [`Pending::detach`] lets the work run on unwatched, for stream-ordered pipelines with other
/// CUDA libraries.
///
/// Leaking a `Pending` (`std::mem::forget`) is memory-safe: the borrows end, but gcmx's buffers (and
/// keys) also record the work's completion event, and every later use of them (a download, another
/// call on any stream, dropping them) waits for it first. What a leak loses is what `wait` reports: a
/// single open's verdict (its refused message reads as the ciphertext it was given), and a failure's
/// wipe.
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaEngine, DeviceBuf, DeviceJob, Stream};
/// let engine = CudaEngine::new(&[7u8; 32], 0)?;
/// let stream = Stream::new(0)?;
/// let mut buf = DeviceBuf::from_host(&[1u8; 1 << 20], 0)?;
/// let mut tag = DeviceBuf::new(16, 0)?;
/// let job = DeviceJob { key: 0, nonce: &[0u8; 12], aad: b"hdr", data: &mut buf, tag: &mut tag };
/// let pending = engine.seal_async(Some(&stream), job)?;
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
/// use gcmx::cuda::{CudaEngine, DeviceBuf, DeviceJob};
/// let engine = CudaEngine::new(&[7u8; 32], 0).unwrap();
/// let mut buf = DeviceBuf::new(64, 0).unwrap();
/// let mut tag = DeviceBuf::new(16, 0).unwrap();
/// let job = DeviceJob { key: 0, nonce: &[0u8; 12], aad: b"", data: &mut buf, tag: &mut tag };
/// let pending = engine.seal_async(None, job).unwrap();
/// let bytes = buf.to_vec(); // `buf` is borrowed by `pending`
/// pending.wait().unwrap();
/// ```
///
/// nor freed, nor can the engine go away:
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaEngine, DeviceBuf, DeviceJob};
/// let mut buf = DeviceBuf::new(64, 0).unwrap();
/// let mut tag = DeviceBuf::new(16, 0).unwrap();
/// let pending = {
///     let engine = CudaEngine::new(&[7u8; 32], 0).unwrap();
///     let job = DeviceJob { key: 0, nonce: &[0u8; 12], aad: b"", data: &mut buf, tag: &mut tag };
///     engine.seal_async(None, job).unwrap()
/// }; // `engine` dropped while borrowed
/// pending.wait().unwrap();
/// ```
#[must_use = "dropping a Pending waits for its work; keep it to overlap work, or call wait()"]
pub struct Pending<'a> {
    fence: Option<Arc<Fence>>,
    /// A single message's parameter slot (and where an open's verdict lands in it).
    slot: Option<Slot>,
    /// What the work writes: borrowed until it is complete, given up on (a `DeviceBuf` wiped or marked
    /// lost) if it fails.
    written: Vec<&'a mut dyn DeviceMemory>,
}

impl core::fmt::Debug for Pending<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pending")
            .field("waited", &self.fence.is_none())
            .finish_non_exhaustive()
    }
}

impl<'a> Pending<'a> {
    pub(crate) fn new(queued: Queued, written: Vec<&'a mut dyn DeviceMemory>) -> Pending<'a> {
        let (fence, slot) = queued;
        Pending {
            fence,
            slot,
            written,
        }
    }

    /// Wait (sleeping) until the work is complete. For a single open, `Error::Authentication` when the
    /// tag was wrong (the message holds its ciphertext again); for a batch, the verdicts are in its
    /// verdict buffer. `Error::Device` when the device failed: the `DeviceBuf`s the work wrote have
    /// been wiped (or marked lost).
    pub fn wait(mut self) -> Result<(), Error> {
        self.finish()
    }

    /// Let the work run on without watching it: the borrows end at once, and the caller's stream says
    /// when the work is complete ([`crate::Stream::synchronize`], or later work on the stream, which
    /// runs after it). For work on the keyring's own stream (`None`) nothing says so: memory of another
    /// library given to it must then stay valid until the keyring is dropped, so detach work on a
    /// stream of your own. What is given up is the wiping of the `DeviceBuf`s the work wrote should it
    /// fail on the device; gcmx's buffers still record the work's completion, and every later use of
    /// them waits for it.
    ///
    /// A single open's verdict exists only here, and a refused message reads as its ciphertext: so that no
    /// forgery goes unnoticed, detaching a single open waits for it and returns its verdict, as
    /// [`Pending::wait`] does. Opens that leave their verdicts in device memory, ordered on the stream,
    /// are [`crate::DeviceBatch`]es (a batch of one message too). Everything else returns `Ok` at once.
    pub fn detach(mut self) -> Result<(), Error> {
        if self.slot.as_ref().is_some_and(|s| s.verdict.is_some()) {
            return self.wait();
        }
        if let Some(s) = self.slot.take() {
            // The slot records the work's fence: whoever takes it next waits for the work first (and
            // overwrites the nonce and AAD it holds, which are not secret).
            s.gpu.give_slot(s.slot);
        }
        self.fence = None;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Error> {
        let r = self.settle();
        if let Err(e) = &r
            && e.is_device_failure()
        {
            for w in self.written.iter_mut() {
                w.failed();
            }
        }
        r
    }

    fn settle(&mut self) -> Result<(), Error> {
        let Some(f) = self.fence.take() else {
            return Ok(());
        };
        let waited = f.wait();
        let Some(Slot {
            gpu,
            mut slot,
            verdict,
        }) = self.slot.take()
        else {
            return waited;
        };
        let v = waited.and_then(|()| match verdict {
            None => Ok(None),
            Some(at) => Ok(Some(slot.bytes()?.get(at).copied())),
        });
        // The nonce and AAD it held (and the verdict), wiped for the next user.
        if let Ok(b) = slot.bytes() {
            b.fill(0);
        }
        gpu.give_slot(slot);
        match v? {
            None | Some(Some(abi::VERDICT_OK)) => Ok(()),
            Some(Some(abi::VERDICT_REFUSED)) => Err(Error::Authentication),
            Some(other) => Err(crate::runtime::internal(format!(
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
