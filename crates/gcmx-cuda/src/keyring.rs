//! [`CudaKeyring`]: many keys resident on the device, for batches whose messages each name their key.
//!
//! Layer: above the batch layer.

use std::sync::Arc;

use gcmx_core::{Direction, Error, KeyMaterial};
use zeroize::Zeroize;

use crate::batch::{self, Job};
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
/// use gcmx_cuda::{CudaKeyring, KeyedOpenJob, KeyedSealJob};
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
/// # Ok::<(), gcmx_cuda::Error>(())
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

/// One job's key index, nonce, AAD, buffer and tag length.
type JobParts<'a> = (usize, &'a [u8], &'a [u8], &'a mut [u8], usize);

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

    /// The batch jobs for (key index, nonce, AAD, buffer, tag length), each checked first (lengths,
    /// tag length, key index) so that nothing runs on a batch with a bad job.
    fn jobs<'a>(&self, parts: Vec<JobParts<'a>>) -> Result<Vec<Job<'a>>, Error> {
        for &(key, nonce, aad, ref buf, tag_len) in &parts {
            gcmx_core::frame::check(nonce, aad, buf.len(), tag_len)?;
            self.key(key)?;
        }
        parts
            .into_iter()
            .map(|(key, nonce, aad, buf, _)| {
                let (km, key) = self.key(key)?;
                Ok(Job {
                    key,
                    j0: km.j0(nonce),
                    aad,
                    buf,
                    tag: [0; 16],
                })
            })
            .collect()
    }

    /// Seal every job. Every job is checked before any work (lengths, tag length, key index); if the
    /// device fails, every buffer is zeroed and no tag is written.
    pub fn seal(&self, jobs: &mut [KeyedSealJob<'_>]) -> Result<(), Error> {
        let tag_lens: Vec<usize> = jobs.iter().map(|j| j.tag.len()).collect();
        let parts = jobs
            .iter_mut()
            .zip(&tag_lens)
            .map(|(j, &t)| (j.key, j.nonce, j.aad, &mut *j.buf, t))
            .collect();
        let mut work = self.jobs(parts)?;
        batch::run(&self.gpu, self.key_set(), &mut work, Direction::Seal)?;
        let mut tags: Vec<[u8; 16]> = work.iter().map(|w| w.tag).collect();
        drop(work);
        for (j, t) in jobs.iter_mut().zip(&tags) {
            let n = j.tag.len();
            j.tag.copy_from_slice(&t[..n]);
        }
        tags.zeroize();
        Ok(())
    }

    /// Open every job; per job, whether its tag was right (compared in constant time). A job whose tag
    /// is wrong has its buffer zeroed, so no buffer ever holds unauthenticated plaintext. Every job is
    /// checked before any work; if the device fails, every buffer is zeroed and the call fails.
    pub fn open(&self, jobs: &mut [KeyedOpenJob<'_>]) -> Result<Vec<bool>, Error> {
        let given: Vec<&[u8]> = jobs.iter().map(|j| j.tag).collect();
        let parts = jobs
            .iter_mut()
            .map(|j| (j.key, j.nonce, j.aad, &mut *j.buf, j.tag.len()))
            .collect();
        let mut work = self.jobs(parts)?;
        batch::run(&self.gpu, self.key_set(), &mut work, Direction::Open)?;
        let mut ok = Vec::with_capacity(work.len());
        for (w, t) in work.iter_mut().zip(&given) {
            let good = gcmx_core::frame::tag_matches(&w.tag, t);
            if !good {
                w.buf.zeroize();
            }
            ok.push(good);
        }
        Ok(ok)
    }
}
