//! [`CudaKeyring`]: many keys resident on the device, for batches whose messages each name their key.
//!
//! Layer: above the batch layer.

use std::sync::Arc;

use gcmx_core::backend::{Direction, Error, KeyMaterial};
use zeroize::Zeroize;

use crate::batch::{self, Batch};
use crate::dbatch::{self, DeviceBatch, RawBatch, Regions};
use crate::keys::{DeviceKeys, KeyPowers, KeySet};
use crate::pending::Pending;
use crate::runtime::{Gpu, Stream};

/// Many AES keys resident on the device (expanded there, with their powers of H), for batches in which
/// every message names its key: servers with a key per client, files with a key per segment. Host
/// batches ([`CudaKeyring::seal`], [`CudaKeyring::open`]) and device-resident ones
/// ([`CudaKeyring::seal_batch_device`], [`CudaKeyring::seal_batch_async`], ...; each
/// [`crate::DeviceMessage`] names its key) run in one launch per batch.
///
/// Keys are wiped from device memory when the keyring is dropped.
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaKeyring, KeyedOpenJob, KeyedSealJob};
/// let ring = CudaKeyring::new(&[&[1u8; 16], &[2u8; 32]])?;
/// let (mut a, mut b) = (*b"first message", *b"second");
/// let (mut ta, mut tb) = ([0u8; 16], [0u8; 16]);
/// ring.seal(&mut [
///     KeyedSealJob { key: 0, nonce: &[0u8; 12], aad: b"", buf: &mut a, tag: &mut ta },
///     KeyedSealJob { key: 1, nonce: &[1u8; 12], aad: b"hdr", buf: &mut b, tag: &mut tb },
/// ])?;
/// tb[0] ^= 1; // a forged tag
/// let ok = ring.open(&mut [
///     KeyedOpenJob { key: 0, nonce: &[0u8; 12], aad: b"", buf: &mut a, tag: &ta },
///     KeyedOpenJob { key: 1, nonce: &[1u8; 12], aad: b"hdr", buf: &mut b, tag: &tb },
/// ])?;
/// assert_eq!(ok, [true, false]);
/// assert_eq!(&a, b"first message");
/// assert_eq!(b, [0u8; 6]); // refused, and wiped
/// # Ok::<(), gcmx::cuda::Error>(())
/// ```
pub struct CudaKeyring {
    gpu: Arc<Gpu>,
    /// Host key material for J0 (the tags are computed on the device).
    keys: Vec<KeyMaterial>,
    dev: DeviceKeys,
    powers: KeyPowers,
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
    /// Ciphertext in; plaintext out if its tag is right, zeros if it is wrong.
    pub buf: &'a mut [u8],
    /// The tag to check.
    pub tag: &'a [u8],
}

impl CudaKeyring {
    /// Upload `keys` (each 16, 24 or 32 bytes) to the default device, expand them there and compute
    /// their powers of H. `Error::KeyLength` for a key of another length, `Error::BackendUnavailable`
    /// without a usable device.
    pub fn new(keys: &[&[u8]]) -> Result<CudaKeyring, Error> {
        CudaKeyring::on_device(keys, 0)
    }

    /// The keyring on device `ordinal` (`Error::InvalidInput` for an ordinal past the last device, or
    /// for no keys).
    pub fn on_device(keys: &[&[u8]], ordinal: u32) -> Result<CudaKeyring, Error> {
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
        })
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The device the keys live on.
    pub fn device(&self) -> &crate::DeviceInfo {
        self.gpu.info()
    }

    fn key_set(&self) -> KeySet<'_> {
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

    /// Seal a device-resident batch whose messages name their keys, and wait (as
    /// [`crate::CudaEngine::seal_batch_device`]; a key index past the last key makes that message
    /// [`crate::Verdict::Invalid`]).
    pub fn seal_batch_device(&self, batch: DeviceBatch<'_>) -> Result<(), Error> {
        let r = Regions::of_batch(&batch);
        dbatch::run_on_lane(&self.gpu, self.key_set(), r, Direction::Seal, 16)
    }

    /// Open a device-resident batch whose messages name their keys, and wait (as
    /// [`crate::CudaEngine::open_batch_device`]).
    pub fn open_batch_device(&self, batch: DeviceBatch<'_>, tag_len: usize) -> Result<(), Error> {
        let r = Regions::of_batch(&batch);
        dbatch::run_on_lane(&self.gpu, self.key_set(), r, Direction::Open, tag_len)
    }

    /// Queue the sealing of a device-resident batch on `stream` and return at once.
    pub fn seal_batch_async<'a>(
        &'a self,
        stream: &'a Stream,
        batch: DeviceBatch<'a>,
    ) -> Result<Pending<'a>, Error> {
        dbatch::queue(
            stream,
            self.key_set(),
            Regions::of_batch(&batch),
            Direction::Seal,
            16,
        )
    }

    /// Queue the opening of a device-resident batch on `stream` and return at once.
    pub fn open_batch_async<'a>(
        &'a self,
        stream: &'a Stream,
        batch: DeviceBatch<'a>,
        tag_len: usize,
    ) -> Result<Pending<'a>, Error> {
        dbatch::queue(
            stream,
            self.key_set(),
            Regions::of_batch(&batch),
            Direction::Open,
            tag_len,
        )
    }

    /// [`CudaKeyring::seal_batch_async`] on memory of another CUDA library (see
    /// [`crate::RawDeviceSpan`]).
    pub fn seal_batch_raw(&self, stream: &Stream, batch: &RawBatch) -> Result<(), Error> {
        dbatch::queue(
            stream,
            self.key_set(),
            Regions::of_raw(batch),
            Direction::Seal,
            16,
        )?
        .detach();
        Ok(())
    }

    /// [`CudaKeyring::open_batch_async`] on memory of another CUDA library.
    pub fn open_batch_raw(
        &self,
        stream: &Stream,
        batch: &RawBatch,
        tag_len: usize,
    ) -> Result<(), Error> {
        dbatch::queue(
            stream,
            self.key_set(),
            Regions::of_raw(batch),
            Direction::Open,
            tag_len,
        )?
        .detach();
        Ok(())
    }

    /// Whether the keyring has no keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
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
    /// is wrong has its buffer zeroed, so no buffer ever holds unauthenticated plaintext. Every job is
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
        for (j, &good) in jobs.iter_mut().zip(&ok) {
            if !good {
                j.buf.zeroize();
            }
        }
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
