//! [`CudaEngine`]: the GPU backend for one AES key, over the host pipeline, the device-resident API and
//! batches.
//!
//! Layer: the top of the library (above the pipeline, the device-resident API, batches and keys).

use std::sync::{Arc, Mutex};

use gcmx_core::backend::{Direction, Error, GcmEngine, KeyMaterial, Message};

use crate::batch::{self, Batch};
use crate::dbatch::{self, DeviceBatch, RawBatch, Regions};
use crate::keys::{DeviceKeys, FusedPowers, KeyPowers, KeySet, Keyed};
use crate::pending::Pending;
use crate::pipeline;
use crate::resident::{self, DeviceBuf};
use crate::runtime::{DeviceInfo, Gpu, RawDeviceSpan, Region, Stream};

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
///   launch over the buffer, in place, waited for.
/// * Device-resident batches ([`DeviceBatch`]): many messages, their table, nonces, AADs, tags and
///   verdicts all in GPU memory, one launch ([`CudaEngine::seal_batch_device`],
///   [`CudaEngine::open_batch_device`]).
/// * Asynchronous calls on a caller's [`Stream`]: [`CudaEngine::seal_async`],
///   [`CudaEngine::open_async`], [`CudaEngine::seal_batch_async`], [`CudaEngine::open_batch_async`] return
///   a [`Pending`] at once; the `*_raw` calls take memory of other CUDA libraries ([`RawDeviceSpan`]).
///
/// The key is uploaded once and expanded on the device; its expanded schedule and the powers of H the
/// kernels use stay in device memory, which is wiped when the engine is dropped. The engine is not
/// `Clone` or `Copy`: key material has one owner.
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// fn copied<T: Copy>(_: T) {}
/// let engine = gcmx::cuda::CudaEngine::new(&[0u8; 16]).unwrap();
/// copied(engine); // key material is never `Copy` ...
/// ```
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// let engine = gcmx::cuda::CudaEngine::new(&[0u8; 16]).unwrap();
/// let other = engine.clone(); // ... nor `Clone`
/// ```
pub struct CudaEngine {
    gpu: Arc<Gpu>,
    host: KeyMaterial,
    keys: DeviceKeys,
    powers: FusedPowers,
    /// The device-batch kernels' powers of H, made on first use.
    batch: Mutex<Option<Arc<KeyPowers>>>,
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
        CudaEngine::on_device(key, 0)
    }

    /// An engine for `key` on device `ordinal` (`Error::InvalidInput` for an ordinal past the last
    /// device). Its buffers must be on the same device.
    ///
    /// ```no_run
    /// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
    /// for d in 0..gcmx::cuda::device_count()? {
    ///     let engine = gcmx::cuda::CudaEngine::on_device(&[7u8; 32], d)?;
    ///     println!("{}", engine.device());
    /// }
    /// # Ok::<(), gcmx::cuda::Error>(())
    /// ```
    pub fn on_device(key: &[u8], ordinal: u32) -> Result<CudaEngine, Error> {
        let host = KeyMaterial::new(key)?;
        let gpu = Gpu::get(ordinal)?;
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
        gcmx_core::backend::check(nonce, aad, buf.len(), tag.len())?;
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
        gcmx_core::backend::check(nonce, aad, buf.len(), tag.len())?;
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

    pub(crate) fn batch_powers(&self) -> Result<Arc<KeyPowers>, Error> {
        let mut slot = self.batch.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = slot.as_ref() {
            return Ok(p.clone());
        }
        let p = Arc::new(KeyPowers::new(&self.gpu, &self.keys)?);
        *slot = Some(p.clone());
        Ok(p)
    }

    pub(crate) fn key_set<'a>(&'a self, powers: &'a KeyPowers) -> KeySet<'a> {
        KeySet {
            keys: self.keys.all(),
            powers: powers.at(),
            count: 1,
            nr0: crate::abi::rounds(self.host.key_len()),
        }
    }

    /// Seal every message of a device-resident batch (all its keys 0) and wait. Each message's tag goes
    /// to `batch.tags`, its [`crate::Verdict`] to `batch.verdicts` (`Invalid` for a table entry that
    /// fails the checks; such a message is untouched). `Error::InvalidInput` for buffers that are too
    /// small or of another device.
    ///
    /// ```no_run
    /// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
    /// use gcmx::cuda::{CudaEngine, DeviceBatch, DeviceBuf, DeviceMessage, Verdict};
    /// let engine = CudaEngine::new(&[7u8; 32])?;
    /// let n = 1000;
    /// let msgs: Vec<DeviceMessage> = (0..n)
    ///     .map(|i| DeviceMessage {
    ///         data_offset: 1024 * i as u64,
    ///         data_len: 1024,
    ///         nonce_offset: 12 * i as u64,
    ///         nonce_len: 12,
    ///         ..Default::default()
    ///     })
    ///     .collect();
    /// let table = DeviceBuf::from_host(&DeviceMessage::table(&msgs))?;
    /// let mut data = DeviceBuf::new(1024 * n)?; // filled by other GPU code
    /// let nonces = DeviceBuf::from_host(&vec![1u8; 12 * n])?;
    /// let (aad, mut tags, mut verdicts) = (DeviceBuf::new(0)?, DeviceBuf::new(16 * n)?, DeviceBuf::new(n)?);
    /// engine.seal_batch_device(DeviceBatch {
    ///     messages: &table, count: n, data: &mut data, aad: &aad, nonces: &nonces,
    ///     tags: &mut tags, verdicts: &mut verdicts,
    /// })?;
    /// assert!(verdicts.to_vec()?.iter().all(|&v| Verdict::from_byte(v) == Some(Verdict::Ok)));
    /// # Ok::<(), gcmx::cuda::Error>(())
    /// ```
    pub fn seal_batch_device(&self, batch: DeviceBatch<'_>) -> Result<(), Error> {
        let p = self.batch_powers()?;
        let r = Regions::of_batch(&batch);
        dbatch::run_on_lane(&self.gpu, self.key_set(&p), r, Direction::Seal, 16)
    }

    /// Open every message of a device-resident batch and wait: each message's tag in `batch.tags` is
    /// compared (its first `tag_len` bytes, in constant time) on the device; a message with a wrong tag
    /// is zeroed there and gets [`crate::Verdict::Refused`]. No plaintext of a refused message is left
    /// in `batch.data` when this returns.
    pub fn open_batch_device(&self, batch: DeviceBatch<'_>, tag_len: usize) -> Result<(), Error> {
        let p = self.batch_powers()?;
        let r = Regions::of_batch(&batch);
        dbatch::run_on_lane(&self.gpu, self.key_set(&p), r, Direction::Open, tag_len)
    }

    /// Queue the sealing of a device-resident batch on `stream` and return at once; the [`Pending`]
    /// borrows the batch's buffers until the work is complete (see [`CudaEngine::seal_batch_device`] for
    /// what is written).
    pub fn seal_batch_async<'a>(
        &'a self,
        stream: &'a Stream,
        batch: DeviceBatch<'a>,
    ) -> Result<Pending<'a>, Error> {
        let p = self.batch_powers()?;
        dbatch::queue(
            stream,
            self.key_set(&p),
            Regions::of_batch(&batch),
            Direction::Seal,
            16,
        )
    }

    /// Queue the opening of a device-resident batch on `stream` and return at once (see
    /// [`CudaEngine::open_batch_device`]); the verdicts are in `batch.verdicts` once the [`Pending`] has
    /// been waited for.
    pub fn open_batch_async<'a>(
        &'a self,
        stream: &'a Stream,
        batch: DeviceBatch<'a>,
        tag_len: usize,
    ) -> Result<Pending<'a>, Error> {
        let p = self.batch_powers()?;
        dbatch::queue(
            stream,
            self.key_set(&p),
            Regions::of_batch(&batch),
            Direction::Open,
            tag_len,
        )
    }

    /// Queue the sealing of `buf` on `stream` and return at once: the tag goes to the first 16 bytes of
    /// `tag` (device memory). One launch of the device-batch kernel (the whole GPU works on one buffer
    /// in units of 16 KiB); `nonce` and `aad` are copied at the call. Inputs are checked first
    /// (`Error::NonceLength`, lengths, `Error::InvalidInput` for a tag buffer under 16 bytes or buffers
    /// of another device).
    pub fn seal_async<'a>(
        &'a self,
        stream: &'a Stream,
        nonce: &[u8],
        aad: &[u8],
        buf: &'a mut DeviceBuf,
        tag: &'a mut DeviceBuf,
    ) -> Result<Pending<'a>, Error> {
        let p = self.batch_powers()?;
        dbatch::queue_single(
            stream,
            self.key_set(&p),
            nonce,
            aad,
            Region::whole(&buf.mem),
            Region::whole(&tag.mem),
            Direction::Seal,
            16,
            None,
        )
    }

    /// Queue the opening of `buf` on `stream` and return at once: the first `tag_len` bytes of `tag`
    /// (device memory, at least 16 bytes) are compared on the device in constant time; on a mismatch
    /// the buffer is zeroed there, and [`Pending::wait`] returns `Error::Authentication`.
    pub fn open_async<'a>(
        &'a self,
        stream: &'a Stream,
        nonce: &[u8],
        aad: &[u8],
        buf: &'a mut DeviceBuf,
        tag: &'a DeviceBuf,
        tag_len: usize,
    ) -> Result<Pending<'a>, Error> {
        let p = self.batch_powers()?;
        dbatch::queue_single(
            stream,
            self.key_set(&p),
            nonce,
            aad,
            Region::whole(&buf.mem),
            Region::whole(&tag.mem),
            Direction::Open,
            tag_len,
            None,
        )
    }

    /// [`CudaEngine::seal_async`] on memory of another CUDA library: `data` in place, the tag to the first
    /// 16 bytes of `tag`. Returns once the work is queued; it is complete when `stream` has reached it
    /// (the spans' contract, [`RawDeviceSpan::new`], covers that time).
    ///
    /// ```no_run
    /// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
    /// # fn torch_tensor() -> (u64, usize, u64) { (0, 0, 0) }
    /// use gcmx::cuda::{CudaEngine, RawDeviceSpan, Stream};
    /// let engine = CudaEngine::new(&[7u8; 32])?;
    /// let (data_ptr, len, tag_ptr) = torch_tensor();
    /// // SAFETY: `data_ptr` (len bytes) and `tag_ptr` (16 bytes) are device memory of device 0's primary
    /// // context, 16-byte aligned, untouched by other work until the stream below has done this call.
    /// let (data, tag) = unsafe { (RawDeviceSpan::new(data_ptr, len), RawDeviceSpan::new(tag_ptr, 16)) };
    /// let stream = Stream::new()?;
    /// engine.seal_raw(&stream, &[0u8; 12], b"", data, tag)?;
    /// stream.synchronize()?;
    /// # Ok::<(), gcmx::cuda::Error>(())
    /// ```
    pub fn seal_raw(
        &self,
        stream: &Stream,
        nonce: &[u8],
        aad: &[u8],
        data: RawDeviceSpan,
        tag: RawDeviceSpan,
    ) -> Result<(), Error> {
        let p = self.batch_powers()?;
        let pending = dbatch::queue_single(
            stream,
            self.key_set(&p),
            nonce,
            aad,
            Region::Raw(data),
            Region::Raw(tag),
            Direction::Seal,
            16,
            None,
        )?;
        pending.detach();
        Ok(())
    }

    /// [`CudaEngine::open_async`] on memory of another CUDA library: the verdict (a [`crate::Verdict`]
    /// byte) goes to the first byte of `verdict`; a refused message is zeroed on the device.
    #[allow(clippy::too_many_arguments)]
    pub fn open_raw(
        &self,
        stream: &Stream,
        nonce: &[u8],
        aad: &[u8],
        data: RawDeviceSpan,
        tag: RawDeviceSpan,
        tag_len: usize,
        verdict: RawDeviceSpan,
    ) -> Result<(), Error> {
        if verdict.is_empty() {
            return Err(Error::InvalidInput("the verdict span is empty".into()));
        }
        let p = self.batch_powers()?;
        let pending = dbatch::queue_single(
            stream,
            self.key_set(&p),
            nonce,
            aad,
            Region::Raw(data),
            Region::Raw(tag),
            Direction::Open,
            tag_len,
            Some(Region::Raw(verdict)),
        )?;
        pending.detach();
        Ok(())
    }

    /// [`CudaEngine::seal_batch_async`] on memory of another CUDA library.
    pub fn seal_batch_raw(&self, stream: &Stream, batch: &RawBatch) -> Result<(), Error> {
        let p = self.batch_powers()?;
        dbatch::queue(
            stream,
            self.key_set(&p),
            Regions::of_raw(batch),
            Direction::Seal,
            16,
        )?
        .detach();
        Ok(())
    }

    /// [`CudaEngine::open_batch_async`] on memory of another CUDA library.
    pub fn open_batch_raw(
        &self,
        stream: &Stream,
        batch: &RawBatch,
        tag_len: usize,
    ) -> Result<(), Error> {
        let p = self.batch_powers()?;
        dbatch::queue(
            stream,
            self.key_set(&p),
            Regions::of_raw(batch),
            Direction::Open,
            tag_len,
        )?
        .detach();
        Ok(())
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
        // Messages of at least BATCH_LARGE bytes go through the pipeline one by one, first; then each
        // run of smaller ones between them is one batch, read in place (tags straight into `tags`).
        for (m, t) in msgs.iter_mut().zip(tags.iter_mut()) {
            if m.len() >= BATCH_LARGE {
                *t = self.crypt(dir, m)?;
            }
        }
        let mut powers = None;
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
            if powers.is_none() {
                powers = Some(self.batch_powers()?);
            }
            if let Some(p) = &powers {
                let mut run = CoreBatch {
                    msgs: &mut msgs[i..end],
                    tags: &mut tags[i..end],
                };
                batch::run(&self.gpu, self.key_set(p), &mut run, dir)?;
            }
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
