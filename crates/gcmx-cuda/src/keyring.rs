//! [`CudaKeyring`]: keys resident on the device, and every call on them: host batches, and
//! device-resident messages and batches on a stream.
//!
//! Layer: above the host batch path and the device-resident work.

use std::sync::{Arc, OnceLock};

use gcmx_core::backend::{Direction, Error, KeyMaterial, Refused};
use zeroize::Zeroize;

use crate::batch::{self, Batch};
use crate::dbatch::{self, DeviceBatch, DeviceJob, Work};
use crate::keys::{DeviceKeys, KeyPowers, KeySet};
use crate::pending::Pending;
use crate::runtime::{Gpu, Stream};

/// AES keys resident on the device (expanded there, with their powers of H), and every GPU call on
/// them; each message names its key (servers with a key per client, files with a key per segment).
/// [`crate::CudaEngine`] is a keyring of one key.
///
/// * Host batches: [`CudaKeyring::seal`], [`CudaKeyring::open`] ([`KeyedSealJob`], [`KeyedOpenJob`]).
/// * Device memory ([`crate::DeviceMemory`]: gcmx's [`crate::DeviceBuf`] or another library's
///   [`crate::RawDeviceSpan`]), on the caller's [`Stream`] or the keyring's own: one message
///   ([`CudaKeyring::seal_async`], [`CudaKeyring::open_async`] with a [`DeviceJob`]) or a batch
///   ([`CudaKeyring::seal_batch_async`], [`CudaKeyring::open_batch_async`] with a [`DeviceBatch`]),
///   one launch each. They return a [`Pending`]; waiting for it makes the call synchronous.
///
/// Keys are wiped from device memory when the keyring is dropped. A keyring is not `Clone`: key
/// material has one owner.
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaKeyring, KeyedOpenJob, KeyedSealJob};
/// let ring = CudaKeyring::new(&[&[1u8; 16], &[2u8; 32]], 0)?;
/// let (mut a, mut b) = (*b"first message", *b"second");
/// let (mut ta, mut tb) = ([0u8; 16], [0u8; 16]);
/// ring.seal(&mut [
///     KeyedSealJob { key: 0, nonce: &[0u8; 12], aad: b"", buf: &mut a, tag: &mut ta },
///     KeyedSealJob { key: 1, nonce: &[1u8; 12], aad: b"hdr", buf: &mut b, tag: &mut tb },
/// ])?;
/// let sealed_b = b;
/// tb[0] ^= 1; // a forged tag
/// let ok = ring.open(&mut [
///     KeyedOpenJob { key: 0, nonce: &[0u8; 12], aad: b"", buf: &mut a, tag: &ta },
///     KeyedOpenJob { key: 1, nonce: &[1u8; 12], aad: b"hdr", buf: &mut b, tag: &tb },
/// ])?;
/// assert_eq!(ok, [true, false]);
/// assert_eq!(&a, b"first message");
/// assert_eq!(b, sealed_b); // refused: its ciphertext given back
/// # Ok::<(), gcmx::cuda::Error>(())
/// ```
pub struct CudaKeyring {
    gpu: Arc<Gpu>,
    /// Host key material for J0 (the tags are computed on the device).
    keys: Vec<KeyMaterial>,
    dev: DeviceKeys,
    powers: KeyPowers,
    /// The stream of calls given none, made on first use.
    stream: OnceLock<Stream>,
}

impl core::fmt::Debug for CudaKeyring {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "CudaKeyring {{ {} keys, device {} }}",
            self.keys.len(),
            self.gpu.info().ordinal
        )
    }
}

/// One message to seal under key `key` of a [`CudaKeyring`].
#[derive(Debug)]
pub struct KeyedSealJob<'a> {
    /// Index of the key in the keyring.
    pub key: usize,
    /// Nonce (at least one byte; 12 is the fast path).
    pub nonce: &'a [u8],
    /// Associated data.
    pub aad: &'a [u8],
    /// Plaintext in, ciphertext out.
    pub buf: &'a mut [u8],
    /// Receives the tag; its length (12..=16, also 4 and 8 with gcmx-core's `hazmat`) is the tag length.
    pub tag: &'a mut [u8],
}

/// One message to open under key `key` of a [`CudaKeyring`].
#[derive(Debug)]
pub struct KeyedOpenJob<'a> {
    /// Index of the key in the keyring.
    pub key: usize,
    /// Nonce.
    pub nonce: &'a [u8],
    /// Associated data.
    pub aad: &'a [u8],
    /// Ciphertext in; plaintext out if its tag is right, the same ciphertext if it is wrong (gcmx's
    /// forgery policy, `gcmx_core::backend::Refused`), zeros if the device fails.
    pub buf: &'a mut [u8],
    /// The tag to check.
    pub tag: &'a [u8],
}

impl CudaKeyring {
    /// Upload `keys` (each 16, 24 or 32 bytes) to device `ordinal` (0 is the default device), expand
    /// them there and compute their powers of H.
    ///
    /// `Error::KeyLength` for a key of another length, `Error::InvalidInput` for no keys or an ordinal
    /// past the last device, `Error::BackendUnavailable` without a usable device (a later call tries
    /// again), `Error::Device` when the device fails.
    ///
    /// ```no_run
    /// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
    /// for d in 0..gcmx::cuda::device_count()? {
    ///     let ring = gcmx::cuda::CudaKeyring::new(&[&[7u8; 32], &[8u8; 16]], d)?;
    ///     # let _ = ring;
    /// }
    /// # Ok::<(), gcmx::cuda::Error>(())
    /// ```
    pub fn new(keys: &[&[u8]], ordinal: u32) -> Result<CudaKeyring, Error> {
        if keys.is_empty() {
            return Err(Error::InvalidInput(
                "a keyring needs at least one key".into(),
            ));
        }
        let host: Vec<KeyMaterial> = keys
            .iter()
            .map(|k| KeyMaterial::new(k))
            .collect::<Result<_, _>>()?;
        let gpu = Gpu::get(ordinal)?;
        let dev = DeviceKeys::expand(&gpu, keys)?;
        let powers = KeyPowers::new(&gpu, &dev)?;
        Ok(CudaKeyring {
            gpu,
            keys: host,
            dev,
            powers,
            stream: OnceLock::new(),
        })
    }

    pub(crate) fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Key 0's host material (for the single-key engine's host pipeline).
    pub(crate) fn host_key(&self) -> Option<&KeyMaterial> {
        self.keys.first()
    }

    pub(crate) fn device_keys(&self) -> &DeviceKeys {
        &self.dev
    }

    pub(crate) fn key_set(&self) -> KeySet<'_> {
        KeySet {
            keys: self.dev.all(),
            powers: self.powers.at(),
            count: self.dev.count(),
            nr0: self
                .keys
                .first()
                .map_or(10, |k| crate::abi::rounds(k.key_len())),
        }
    }

    /// The caller's stream (of this keyring's device), or the keyring's own, made on first use.
    fn stream<'a>(&'a self, stream: Option<&'a Stream>) -> Result<&'a Stream, Error> {
        if let Some(s) = stream {
            if !Arc::ptr_eq(s.gpu(), &self.gpu) {
                return Err(Error::InvalidInput(
                    "the stream belongs to another device than the keys".into(),
                ));
            }
            return Ok(s);
        }
        if let Some(s) = self.stream.get() {
            return Ok(s);
        }
        // Two threads may race here: one stream is kept, the other destroyed unused.
        let _ = self.stream.set(Stream::on(self.gpu.clone())?);
        self.stream
            .get()
            .ok_or_else(|| crate::runtime::internal("the keyring's stream".into()))
    }

    fn submit<'a>(
        &'a self,
        stream: Option<&'a Stream>,
        work: Work<'_, 'a>,
        dir: Direction,
        tag_len: usize,
    ) -> Result<Pending<'a>, Error> {
        match self.stream(stream) {
            Ok(stream) => dbatch::submit(stream, self.key_set(), work, dir, tag_len),
            Err(e) => Err(dbatch::give_up(work, e)),
        }
    }

    /// Queue the sealing of one message in device memory on `stream` (`None`: the keyring's own
    /// stream) and return at once: `job.data` is encrypted in place and its tag written to the first 16
    /// bytes of `job.tag`, in one launch of the device-batch kernel (the whole GPU works on one buffer
    /// in units of 16 KiB). [`Pending::wait`] makes it synchronous.
    ///
    /// Inputs are checked first (`Error::NonceLength`, lengths, `Error::InvalidInput` for a key index
    /// past the last key, a tag buffer under 16 bytes, misaligned memory or memory of another device);
    /// when the device fails, the `DeviceBuf`s written are wiped (or marked lost).
    pub fn seal_async<'a>(
        &'a self,
        stream: Option<&'a Stream>,
        job: DeviceJob<'_, 'a>,
    ) -> Result<Pending<'a>, Error> {
        self.submit(stream, Work::One(job), Direction::Seal, 16)
    }

    /// Queue the opening of one message in device memory and return at once (as
    /// [`CudaKeyring::seal_async`]): the first `tag_len` bytes of `job.tag` are compared on the device
    /// in constant time; on a mismatch its keystream is applied again there, so `job.data` holds the
    /// ciphertext it was given (gcmx's forgery policy, `gcmx_core::backend::Refused`), and
    /// [`Pending::wait`] returns `Error::Authentication`. No unauthenticated plaintext is left in
    /// `job.data` once the work is complete.
    pub fn open_async<'a>(
        &'a self,
        stream: Option<&'a Stream>,
        job: DeviceJob<'_, 'a>,
        tag_len: usize,
    ) -> Result<Pending<'a>, Error> {
        self.submit(stream, Work::One(job), Direction::Open, tag_len)
    }

    /// Queue the sealing of a device-resident batch whose messages name their keys, and return at
    /// once. Each message's tag goes to `batch.tags`, its [`crate::Verdict`] to `batch.verdicts`
    /// (`Invalid` for a table entry that fails the checks, a key index past the last key included; such
    /// a message is untouched). `Error::InvalidInput` for buffers of another device.
    ///
    /// ```no_run
    /// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
    /// use gcmx::cuda::{CudaEngine, DeviceBatch, DeviceBuf, DeviceMessage, Verdict};
    /// let engine = CudaEngine::new(&[7u8; 32], 0)?;
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
    /// let table = DeviceBuf::from_host(&DeviceMessage::table(&msgs), 0)?;
    /// let mut data = DeviceBuf::new(1024 * n, 0)?; // filled by other GPU code
    /// let nonces = DeviceBuf::from_host(&vec![1u8; 12 * n], 0)?;
    /// let aad = DeviceBuf::new(0, 0)?;
    /// let (mut tags, mut verdicts) = (DeviceBuf::new(16 * n, 0)?, DeviceBuf::new(n, 0)?);
    /// engine
    ///     .seal_batch_async(None, DeviceBatch {
    ///         messages: &table, count: n, data: &mut data, aad: &aad, nonces: &nonces,
    ///         tags: &mut tags, verdicts: &mut verdicts,
    ///     })?
    ///     .wait()?;
    /// assert!(verdicts.to_vec()?.iter().all(|&v| Verdict::from_byte(v) == Some(Verdict::Ok)));
    /// # Ok::<(), gcmx::cuda::Error>(())
    /// ```
    pub fn seal_batch_async<'a>(
        &'a self,
        stream: Option<&'a Stream>,
        batch: DeviceBatch<'a>,
    ) -> Result<Pending<'a>, Error> {
        self.submit(stream, Work::Batch(batch), Direction::Seal, 16)
    }

    /// Queue the opening of a device-resident batch and return at once: each message's tag in
    /// `batch.tags` is compared (its first `tag_len` bytes, in constant time) on the device; a message
    /// with a wrong tag gets [`crate::Verdict::Refused`] and its ciphertext back, in the same launch
    /// (gcmx's forgery policy, `gcmx_core::backend::Refused`). No plaintext of a refused message is in
    /// `batch.data` once the work is complete.
    pub fn open_batch_async<'a>(
        &'a self,
        stream: Option<&'a Stream>,
        batch: DeviceBatch<'a>,
        tag_len: usize,
    ) -> Result<Pending<'a>, Error> {
        self.submit(stream, Work::Batch(batch), Direction::Open, tag_len)
    }

    fn key(&self, i: usize) -> Result<(&KeyMaterial, u32), Error> {
        match (self.keys.get(i), u32::try_from(i)) {
            (Some(k), Ok(idx)) => Ok((k, idx)),
            _ => Err(Error::InvalidInput(format!(
                "key index {i} past the last key ({} keys)",
                self.keys.len()
            ))),
        }
    }

    /// J0 of `nonce` under key `key` into `out`.
    fn j0(&self, key: usize, nonce: &[u8], out: &mut [u8; 16]) -> Result<(), Error> {
        let mut j0 = self.key(key)?.0.j0(nonce);
        out.copy_from_slice(&j0);
        j0.zeroize();
        Ok(())
    }

    /// Seal every job. Every job is checked before any work (lengths, tag length, key index); if the
    /// device fails, every buffer is zeroed and no tag is written.
    pub fn seal(&self, jobs: &mut [KeyedSealJob<'_>]) -> Result<(), Error> {
        for j in jobs.iter() {
            gcmx_core::backend::check(j.nonce, j.aad, j.buf.len(), j.tag.len())?;
            self.key(j.key)?;
        }
        // The full tags, given to the jobs only once every one of them is done.
        let mut tags = vec![[0u8; 16]; jobs.len()];
        let mut b = RingBatch {
            ring: self,
            jobs: &mut *jobs,
            out: &mut tags,
            take: |_, t| *t,
        };
        let r = batch::run(&self.gpu, self.key_set(), &mut b, Direction::Seal);
        if r.is_ok() {
            for (j, t) in jobs.iter_mut().zip(&tags) {
                let n = j.tag.len();
                // (The tag length was checked: 16 bytes at most.)
                if let Some(src) = t.get(..n) {
                    j.tag.copy_from_slice(src);
                }
            }
        }
        batch::wipe(tags.as_flattened_mut());
        r
    }

    /// Open every job; per job, whether its tag was right (compared in constant time). A job whose tag
    /// is wrong gets its ciphertext back (gcmx's forgery policy, `gcmx_core::backend::Refused`: its
    /// keystream again, on the device), so no buffer holds unauthenticated plaintext when the call
    /// returns. Every job is
    /// checked before any work; if the device fails, every buffer is zeroed and the call fails.
    pub fn open(&self, jobs: &mut [KeyedOpenJob<'_>]) -> Result<Vec<bool>, Error> {
        for j in jobs.iter() {
            gcmx_core::backend::check(j.nonce, j.aad, j.buf.len(), j.tag.len())?;
            self.key(j.key)?;
        }
        let mut ok = vec![false; jobs.len()];
        let mut b = RingBatch {
            ring: self,
            jobs: &mut *jobs,
            out: &mut ok,
            take: |j: &KeyedOpenJob<'_>, t| gcmx_core::backend::tag_matches(t, j.tag),
        };
        batch::run(&self.gpu, self.key_set(), &mut b, Direction::Open)?;
        // The device decrypted every message; those whose tag was wrong get their keystream again,
        // sealed on the device, so they hold their ciphertext (gcmx's forgery policy; zeros if the
        // device fails meanwhile).
        let mut tags = vec![[0u8; 16]; ok.iter().filter(|&&g| !g).count()];
        let mut refused: Vec<KeyedSealJob<'_>> = jobs
            .iter_mut()
            .zip(&ok)
            .filter(|&(_, &good)| !good)
            .zip(tags.iter_mut())
            .map(|((j, _), t)| KeyedSealJob {
                key: j.key,
                nonce: j.nonce,
                aad: j.aad,
                buf: &mut *j.buf,
                tag: t,
            })
            .collect();
        if !refused.is_empty() {
            Refused::apply(
                &mut refused[..],
                |r| self.seal(r),
                |r| r.iter_mut().for_each(|j| j.buf.zeroize()),
            );
        }
        drop(refused);
        batch::wipe(tags.as_flattened_mut());
        Ok(ok)
    }
}

/// What the batch path reads of a keyring job (sealing or opening).
trait KeyedJob: batch::Msg {
    fn key(&self) -> usize;
    fn nonce(&self) -> &[u8];
    fn aad(&self) -> &[u8];
}

macro_rules! keyed_job {
    ($t:ident) => {
        impl batch::Msg for $t<'_> {
            fn len(&self) -> usize {
                self.buf.len()
            }

            fn buf(&mut self) -> &mut [u8] {
                self.buf
            }
        }

        impl KeyedJob for $t<'_> {
            fn key(&self) -> usize {
                self.key
            }

            fn nonce(&self) -> &[u8] {
                self.nonce
            }

            fn aad(&self) -> &[u8] {
                self.aad
            }
        }
    };
}

keyed_job!(KeyedSealJob);
keyed_job!(KeyedOpenJob);

/// Keyring jobs as the batch path reads them: per job, what its full tag gives (`take`) goes to `out`
/// (sealing: the tag itself, kept apart until every job is done; opening: whether the job's tag is
/// right). `T::default()` holds nothing.
struct RingBatch<'r, 'm, J, T> {
    ring: &'r CudaKeyring,
    jobs: &'m mut [J],
    out: &'m mut [T],
    take: fn(&J, &[u8; 16]) -> T,
}

impl<J: KeyedJob, T: Default + Copy> Batch for RingBatch<'_, '_, J, T> {
    type Msg = J;

    fn count(&self) -> usize {
        self.jobs.len()
    }

    fn len(&self, i: usize) -> usize {
        self.jobs[i].len()
    }

    fn key(&self, i: usize) -> u32 {
        // (An index past u32 fails batch::run's key check.)
        u32::try_from(self.jobs[i].key()).unwrap_or(u32::MAX)
    }

    fn j0(&self, i: usize, out: &mut [u8; 16]) -> Result<(), Error> {
        let j = &self.jobs[i];
        self.ring.j0(j.key(), j.nonce(), out)
    }

    fn aad(&self, i: usize) -> &[u8] {
        self.jobs[i].aad()
    }

    fn msgs(&mut self) -> &mut [J] {
        self.jobs
    }

    fn set_tag(&mut self, i: usize, tag: &[u8; 16]) {
        self.out[i] = (self.take)(&self.jobs[i], tag);
    }

    fn wipe_all(&mut self) {
        for j in self.jobs.iter_mut() {
            j.buf().zeroize();
        }
        self.out.fill(T::default());
        std::hint::black_box(&self.out);
    }
}
