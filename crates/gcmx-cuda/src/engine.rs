//! [`CudaEngine`]: a [`CudaKeyring`] of one key, with the host pipeline behind `gcmx::Backend::Cuda`.
//!
//! Layer: the top of the library (above the keyring and the host pipeline).

use std::sync::Arc;

use gcmx_core::Error;
use gcmx_core::backend::{Direction, GcmEngine, Message};

use crate::batch::{self, Batch};
use crate::keyring::CudaKeyring;
use crate::keys::{FusedPowers, Keyed};
use crate::pipeline;
use crate::runtime::Gpu;

/// Messages at least this large go through the host pipeline rather than the batch kernels, also inside
/// a batch (the batch path stages whole sub-batches in page-locked memory).
const BATCH_LARGE: usize = 16 << 20;

/// The GPU AES-GCM engine for one key: a [`CudaKeyring`] of that one key (key index 0), which it
/// dereferences to for every device-resident call, and a `gcmx_core::backend::GcmEngine` (what
/// `gcmx::Backend::Cuda` runs) for host buffers of any size: chunked and pipelined over several
/// streams; buffers of 4 MiB or more are page-locked for the call and DMA'd in place (or used as they
/// are inside a [`crate::PinnedRegion`]), smaller ones are staged. Batches of small messages run in a
/// few launches for all of them.
///
/// The key is uploaded once and expanded on the device; its expanded schedule and the powers of H the
/// kernels use stay in device memory, which is wiped when the engine is dropped.
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaEngine, DeviceBuf, DeviceJob};
/// let engine = CudaEngine::new(&[7u8; 32], 0)?;
/// let mut buf = DeviceBuf::from_host(b"hello, device", 0)?;
/// let mut tag = DeviceBuf::new(16, 0)?;
/// let nonce = [1u8; 12];
/// // A keyring call (through `Deref`): key 0 is the engine's key.
/// let job = DeviceJob { key: 0, nonce: &nonce, aad: b"aad", data: &mut buf, tag: &mut tag };
/// engine.seal_async(None, job)?.wait()?;
/// # Ok::<(), gcmx::cuda::Error>(())
/// ```
///
/// The engine is not `Clone` or `Copy`: key material has one owner.
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// fn copied<T: Copy>(_: T) {}
/// let engine = gcmx::cuda::CudaEngine::new(&[0u8; 16], 0).unwrap();
/// copied(engine); // key material is never `Copy` ...
/// ```
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// let engine = gcmx::cuda::CudaEngine::new(&[0u8; 16], 0).unwrap();
/// let other = engine.clone(); // ... nor `Clone`
/// ```
pub struct CudaEngine {
    ring: CudaKeyring,
    /// The fused kernels' powers of H (the host pipeline's; the keyring has the batch kernels').
    powers: FusedPowers,
}

impl core::fmt::Debug for CudaEngine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "CudaEngine {{ {:?} }}", self.ring)
    }
}

/// The engine is a keyring of one key: every device-resident call is the keyring's (key index 0).
impl core::ops::Deref for CudaEngine {
    type Target = CudaKeyring;

    fn deref(&self) -> &CudaKeyring {
        &self.ring
    }
}

impl CudaEngine {
    /// An engine for the AES key `key` (16, 24 or 32 bytes) on device `ordinal` (0 is the default
    /// device). Buffers given to it must be on the same device.
    ///
    /// `Error::KeyLength` for another length; `Error::InvalidInput` for an ordinal past the last device;
    /// `Error::BackendUnavailable` when there is no driver or device, or the kernels do not load (a
    /// later call tries again); `Error::Device` when the device fails.
    pub fn new(key: &[u8], ordinal: u32) -> Result<CudaEngine, Error> {
        let ring = CudaKeyring::new(&[key], ordinal)?;
        let host = ring
            .host_key()
            .ok_or_else(|| crate::runtime::internal("a keyring of no key".into()))?;
        let powers = FusedPowers::new(ring.gpu(), host)?;
        Ok(CudaEngine { ring, powers })
    }

    fn gpu(&self) -> &Arc<Gpu> {
        self.ring.gpu()
    }

    fn keyed(&self) -> Result<Keyed<'_>, Error> {
        let host = self
            .ring
            .host_key()
            .ok_or_else(|| crate::runtime::internal("a keyring of no key".into()))?;
        Ok(Keyed {
            key: self.ring.device_keys().key(0),
            nr: crate::abi::rounds(host.key_len()),
            powers: self.powers.at(),
            host,
        })
    }

    /// The device and the keyed state (for the benchmark's timed launches).
    #[cfg(feature = "bench")]
    pub(crate) fn parts(&self) -> Result<(&Arc<Gpu>, Keyed<'_>), Error> {
        Ok((self.gpu(), self.keyed()?))
    }
}

impl GcmEngine for CudaEngine {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn crypt(&self, dir: Direction, msg: &mut Message<'_>) -> Result<[u8; 16], Error> {
        let (j0, aad, buf) = msg.parts();
        pipeline::crypt(self.gpu(), self.keyed()?, dir, j0, aad, buf)
    }

    fn crypt_batch(
        &self,
        dir: Direction,
        msgs: &mut [Message<'_>],
        tags: &mut [[u8; 16]],
    ) -> Result<(), Error> {
        if msgs.len() != tags.len() {
            return Err(Error::InvalidInput(format!(
                "{} messages but {} tags",
                msgs.len(),
                tags.len()
            )));
        }
        // Messages of at least BATCH_LARGE bytes go through the pipeline one by one, first; then each
        // run of smaller ones between them is one batch, read in place (tags straight into `tags`).
        for (m, t) in msgs.iter_mut().zip(tags.iter_mut()) {
            if m.len() >= BATCH_LARGE {
                *t = self.crypt(dir, m)?;
            }
        }
        let mut i = 0;
        while i < msgs.len() {
            if msgs[i].len() >= BATCH_LARGE {
                i += 1;
                continue;
            }
            let end = msgs[i..]
                .iter()
                .position(|m| m.len() >= BATCH_LARGE)
                .map_or(msgs.len(), |k| i + k);
            let mut run = CoreBatch {
                msgs: &mut msgs[i..end],
                tags: &mut tags[i..end],
            };
            batch::run(self.gpu(), self.ring.key_set(), &mut run, dir)?;
            i = end;
        }
        Ok(())
    }
}

impl batch::Msg for Message<'_> {
    fn len(&self) -> usize {
        Message::len(self)
    }

    fn buf(&mut self) -> &mut [u8] {
        Message::buf(self)
    }
}

/// A run of gcmx-core's messages (all under key 0) and the tags they get, as the batch path reads them.
struct CoreBatch<'m, 'a> {
    msgs: &'m mut [Message<'a>],
    tags: &'m mut [[u8; 16]],
}

impl<'a> Batch for CoreBatch<'_, 'a> {
    type Msg = Message<'a>;

    fn count(&self) -> usize {
        self.msgs.len()
    }

    fn len(&self, i: usize) -> usize {
        self.msgs[i].len()
    }

    fn key(&self, _i: usize) -> u32 {
        0
    }

    fn j0(&self, i: usize, out: &mut [u8; 16]) -> Result<(), Error> {
        out.copy_from_slice(self.msgs[i].j0());
        Ok(())
    }

    fn aad(&self, i: usize) -> &[u8] {
        self.msgs[i].aad()
    }

    fn msgs(&mut self) -> &mut [Message<'a>] {
        self.msgs
    }

    fn set_tag(&mut self, i: usize, tag: &[u8; 16]) {
        self.tags[i] = *tag;
    }

    fn wipe_all(&mut self) {
        for (m, t) in self.msgs.iter_mut().zip(self.tags.iter_mut()) {
            zeroize::Zeroize::zeroize(m.buf());
            zeroize::Zeroize::zeroize(t);
        }
    }
}
