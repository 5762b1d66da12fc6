//! [`CudaEngine`]: the GPU backend for one AES key, over the host pipeline, the device-resident API and
//! batches.
//!
//! Layer: the top of the library (above the pipeline, the device-resident API, batches and keys).

use std::sync::{Arc, Mutex};

use gcmx_core::{Direction, Error, GcmEngine, KeyMaterial, Message};

use crate::batch::{self, Job};
use crate::keys::{BatchPowers, DeviceKeys, FusedPowers, Keyed};
use crate::pipeline;
use crate::resident::{self, DeviceBuf};
use crate::runtime::{DeviceInfo, Gpu};

/// Messages at least this large go through the host pipeline rather than the batch kernels, also inside
/// a batch (the batch path stages whole sub-batches in page-locked memory).
const BATCH_LARGE: usize = 16 << 20;

/// The GPU AES-GCM engine for one key: a `gcmx_core::GcmEngine` (what `gcmx::Backend::Cuda` runs) and
/// the device-resident API for data already in GPU memory.
///
/// * Host buffers of any size: chunked and pipelined over several streams; buffers of 4 MiB or more are
///   page-locked for the call and DMA'd in place (or used as they are inside a [`crate::PinnedRegion`]),
///   smaller ones are staged. Batches of small messages run in a few launches for all of them.
/// * Device buffers ([`DeviceBuf`]): [`CudaEngine::seal_device`] and [`CudaEngine::open_device`], one
///   launch over the buffer, in place.
///
/// The key is uploaded once and expanded on the device; its expanded schedule and the powers of H the
/// kernels use stay in device memory, which is wiped when the engine is dropped. The engine is not
/// `Clone` or `Copy`: key material has one owner.
///
/// ```compile_fail
/// fn copied<T: Copy>(_: T) {}
/// let engine = gcmx_cuda::CudaEngine::new(&[0u8; 16]).unwrap();
/// copied(engine); // key material is never `Copy` ...
/// ```
///
/// ```compile_fail
/// let engine = gcmx_cuda::CudaEngine::new(&[0u8; 16]).unwrap();
/// let other = engine.clone(); // ... nor `Clone`
/// ```
pub struct CudaEngine {
    gpu: Arc<Gpu>,
    host: KeyMaterial,
    keys: DeviceKeys,
    powers: FusedPowers,
    /// The batch kernels' powers of H, made on first use.
    batch: Mutex<Option<Arc<BatchPowers>>>,
}

impl core::fmt::Debug for CudaEngine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "CudaEngine {{ {:?}, device {} }}",
            self.host,
            self.gpu.info().ordinal
        )
    }
}

impl CudaEngine {
    /// An engine for the AES key `key` (16, 24 or 32 bytes) on the default device (device 0).
    ///
    /// `Error::KeyLength` for another length; `Error::BackendUnavailable` when there is no driver or
    /// device, or the kernels do not load (a later call tries again); `Error::Device` when the device
    /// fails.
    pub fn new(key: &[u8]) -> Result<CudaEngine, Error> {
        let host = KeyMaterial::new(key)?;
        let gpu = Gpu::get(0)?;
        let keys = DeviceKeys::expand(&gpu, &[key])?;
        let powers = FusedPowers::new(&gpu, &host)?;
        Ok(CudaEngine {
            gpu,
            host,
            keys,
            powers,
            batch: Mutex::new(None),
        })
    }

    /// The device this engine runs on.
    pub fn device(&self) -> &DeviceInfo {
        self.gpu.info()
    }

    fn keyed(&self) -> Keyed<'_> {
        Keyed {
            key: self.keys.key(0),
            nr: crate::abi::rounds(self.host.key_len()),
            powers: self.powers.at(),
            host: &self.host,
        }
    }

    /// Encrypt `buf` (device memory) in place and write the tag to `tag`, whose length (12 to 16 bytes;
    /// also 4 and 8 with gcmx-core's `hazmat` feature) is the tag length.
    ///
    /// Inputs are checked first (`Error::NonceLength`, `Error::TagLength`, length limits,
    /// `Error::InvalidInput` for a buffer of another device). If the device fails, `buf` is wiped (or,
    /// if even that fails, marked lost: see [`DeviceBuf`]) and `Error::Device` is returned.
    pub fn seal_device(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut DeviceBuf,
        tag: &mut [u8],
    ) -> Result<(), Error> {
        gcmx_core::frame::check(nonce, aad, buf.len(), tag.len())?;
        let mut j0 = self.host.j0(nonce);
        let r = resident::crypt(&self.gpu, self.keyed(), Direction::Seal, &j0, aad, buf);
        zeroize::Zeroize::zeroize(&mut j0);
        let mut full = r?;
        tag.copy_from_slice(&full[..tag.len()]);
        zeroize::Zeroize::zeroize(&mut full);
        Ok(())
    }

    /// Decrypt `buf` (device memory) in place and check `tag` on the host, in constant time.
    ///
    /// On a wrong tag the buffer is **wiped on the device** (set to zero) before `Error::Authentication`
    /// is returned, so it never holds unauthenticated plaintext when this returns (unlike the host
    /// API, which gives the ciphertext back). Inputs are checked first, as for
    /// [`CudaEngine::seal_device`]; if the device fails, `buf` is wiped (or marked lost).
    pub fn open_device(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut DeviceBuf,
        tag: &[u8],
    ) -> Result<(), Error> {
        gcmx_core::frame::check(nonce, aad, buf.len(), tag.len())?;
        let mut j0 = self.host.j0(nonce);
        let r = resident::crypt(&self.gpu, self.keyed(), Direction::Open, &j0, aad, buf);
        zeroize::Zeroize::zeroize(&mut j0);
        let mut expected = r?;
        resident::verify_or_wipe(&mut expected, tag, buf)
    }

    /// The device and the keyed state (for the benchmark's timed launches).
    #[cfg(feature = "bench")]
    pub(crate) fn parts(&self) -> (&Arc<Gpu>, Keyed<'_>) {
        (&self.gpu, self.keyed())
    }

    fn batch_powers(&self) -> Result<Arc<BatchPowers>, Error> {
        let mut slot = self.batch.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = slot.as_ref() {
            return Ok(p.clone());
        }
        let p = Arc::new(BatchPowers::new(&self.gpu, &self.keys)?);
        *slot = Some(p.clone());
        Ok(p)
    }
}

impl GcmEngine for CudaEngine {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn crypt(&self, dir: Direction, msg: &mut Message<'_>) -> Result<[u8; 16], Error> {
        let (j0, aad, buf) = msg.parts();
        pipeline::crypt(&self.gpu, self.keyed(), dir, j0, aad, buf)
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
        let mut small = Vec::new();
        let mut small_idx = Vec::new();
        for (i, (m, t)) in msgs.iter_mut().zip(tags.iter_mut()).enumerate() {
            if m.len() >= BATCH_LARGE {
                *t = self.crypt(dir, m)?;
                continue;
            }
            let (j0, aad, buf) = m.parts();
            small.push(Job {
                key: 0,
                j0: *j0,
                aad,
                buf,
                tag: [0; 16],
            });
            small_idx.push(i);
        }
        if small.is_empty() {
            return Ok(());
        }
        let powers = self.batch_powers()?;
        batch::run(&self.gpu, &self.keys, &powers, &mut small, dir)?;
        for (job, &i) in small.iter().zip(&small_idx) {
            tags[i] = job.tag;
        }
        Ok(())
    }
}
