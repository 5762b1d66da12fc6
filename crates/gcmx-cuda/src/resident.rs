//! Data already in GPU memory: [`DeviceBuf`], and one fused launch over a whole buffer for
//! [`crate::CudaEngine::seal_device`] / [`crate::CudaEngine::open_device`].
//!
//! Layer: above the runtime and the device keys.

use std::sync::Arc;

use gcmx_core::backend::{Direction, Error};
use zeroize::{Zeroize, Zeroizing};

use crate::abi;
use crate::keys::Keyed;
use crate::plan;
use crate::runtime::{At, DeviceMem, Gpu, Launch};

/// A buffer in GPU memory, owned, that the device-resident API encrypts and decrypts in place.
///
/// Its bytes are zeroed on the device when it is dropped (and by [`DeviceBuf::wipe`]). Copies in and
/// out go through page-locked staging memory that gcmx wipes after each copy, so no driver bounce
/// buffer keeps them.
///
/// If an operation fails part-way, or a failed authentication could not be followed by a wipe, the
/// buffer's contents cannot be trusted: it is marked *lost*, and [`DeviceBuf::download`] refuses it until
/// a [`DeviceBuf::wipe`] or an [`DeviceBuf::upload`] of the whole buffer succeeds.
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaEngine, DeviceBuf};
/// let engine = CudaEngine::new(&[7u8; 32])?;
/// let mut buf = DeviceBuf::from_host(b"hello, device")?;
/// let mut tag = [0u8; 16];
/// engine.seal_device(&[1u8; 12], b"aad", &mut buf, &mut tag)?;
/// engine.open_device(&[1u8; 12], b"aad", &mut buf, &tag)?;
/// assert_eq!(buf.to_vec()?, b"hello, device");
/// # Ok::<(), gcmx::cuda::Error>(())
/// ```
///
/// A `DeviceBuf` is not `Clone`: its bytes have one owner.
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// let buf = gcmx::cuda::DeviceBuf::new(16).unwrap();
/// let copy = buf.clone();
/// ```
pub struct DeviceBuf {
    pub(crate) mem: Arc<DeviceMem>,
    lost: bool,
}

impl core::fmt::Debug for DeviceBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceBuf")
            .field("len", &self.mem.len())
            .field("lost", &self.lost)
            .finish()
    }
}

impl DeviceBuf {
    /// `len` zero bytes in the memory of the default device (device 0).
    ///
    /// `Error::BackendUnavailable` without a usable device; `Error::Device` when the device cannot
    /// allocate `len` bytes.
    pub fn new(len: usize) -> Result<DeviceBuf, Error> {
        DeviceBuf::on_device(len, 0)
    }

    /// `len` zero bytes in the memory of device `ordinal` (`Error::InvalidInput` past the last device).
    pub fn on_device(len: usize, ordinal: u32) -> Result<DeviceBuf, Error> {
        let gpu = Gpu::get(ordinal)?;
        Ok(DeviceBuf {
            mem: DeviceMem::zeroed(&gpu, len)?,
            lost: false,
        })
    }

    /// A buffer on the default device holding a copy of `data`.
    pub fn from_host(data: &[u8]) -> Result<DeviceBuf, Error> {
        DeviceBuf::from_host_on(data, 0)
    }

    /// A buffer on device `ordinal` holding a copy of `data`.
    pub fn from_host_on(data: &[u8], ordinal: u32) -> Result<DeviceBuf, Error> {
        let gpu = Gpu::get(ordinal)?;
        let mem = DeviceMem::new(&gpu, data.len())?;
        mem.upload(0, data)?;
        Ok(DeviceBuf { mem, lost: false })
    }

    /// The ordinal of the device whose memory holds the buffer.
    pub fn device(&self) -> u32 {
        self.mem.gpu().info().ordinal
    }

    /// Bytes.
    pub fn len(&self) -> usize {
        self.mem.len()
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.mem.len() == 0
    }

    fn range(&self, offset: usize, n: usize) -> Result<(), Error> {
        if offset.checked_add(n).is_none_or(|e| e > self.len()) {
            return Err(Error::InvalidInput(format!(
                "{n} bytes at offset {offset} do not fit in a device buffer of {} bytes",
                self.len()
            )));
        }
        Ok(())
    }

    /// Copy `src` into the buffer at byte `offset`. If the copy fails, part of `src` may have been
    /// written: the buffer is marked lost.
    pub fn upload(&mut self, offset: usize, src: &[u8]) -> Result<(), Error> {
        self.range(offset, src.len())?;
        if let Err(e) = self.mem.upload(offset, src) {
            self.lost = true;
            return Err(e);
        }
        if offset == 0 && src.len() == self.len() {
            self.lost = false;
        }
        Ok(())
    }

    /// Copy `dst.len()` bytes from byte `offset` of the buffer into `dst`. `Error::InvalidInput` when
    /// the buffer was lost in a failed operation (see the type's documentation).
    pub fn download(&self, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        self.range(offset, dst.len())?;
        if self.lost {
            return Err(Error::InvalidInput(
                "the device buffer's contents were lost in a failed operation; wipe or upload it first"
                    .into(),
            ));
        }
        self.mem.download(offset, dst)
    }

    /// The whole buffer, copied to the host.
    pub fn to_vec(&self) -> Result<Vec<u8>, Error> {
        let mut v = vec![0u8; self.len()];
        self.download(0, &mut v)?;
        Ok(v)
    }

    /// Set every byte to zero. If that fails, the buffer is marked lost (it may be partly wiped).
    pub fn wipe(&mut self) -> Result<(), Error> {
        self.lost = true;
        self.mem.zero()?;
        self.lost = false;
        Ok(())
    }

    /// Mark the contents lost, try to wipe them, and return `err`.
    fn fail(&mut self, err: Error) -> Error {
        self.lost = true;
        let _ = self.wipe();
        err
    }
}

/// Seal or open `buf` in place with one fused launch; the full tag (computed when sealing, expected when
/// opening). The caller compares the tag; on a device error `buf` is wiped (or marked lost).
pub(crate) fn crypt(
    gpu: &Arc<Gpu>,
    k: Keyed<'_>,
    dir: Direction,
    j0: &[u8; 16],
    aad: &[u8],
    buf: &mut DeviceBuf,
) -> Result<[u8; 16], Error> {
    if !Arc::ptr_eq(buf.mem.gpu(), gpu) {
        return Err(Error::InvalidInput(
            "the device buffer belongs to another device than the engine".into(),
        ));
    }
    gcmx_core::backend::check_lengths(aad.len(), buf.len())?;
    let len = buf.len();
    if len == 0 {
        return Ok(k.host.tag_from_partials(j0, aad, &[], 0));
    }
    // Until the launch has been waited for, the contents are neither the input nor the output.
    buf.lost = true;
    match launch(gpu, k, dir, j0, &buf.mem) {
        Ok(values) => {
            buf.lost = false;
            let chunk = plan::Chunk {
                offset: 0,
                len,
                first_block: 0,
                first_partial: 0,
                grid: values.len() as u32,
            };
            let mut parts = plan::partials_of(&[chunk], &values, abi::FUSED_SPAN);
            let tag = k.host.tag_from_partials(j0, aad, &parts, len);
            for p in parts.iter_mut() {
                p.value.zeroize();
            }
            Ok(tag)
        }
        Err(e) => Err(buf.fail(e)),
    }
}

/// The fused launch over all of `mem`, its counter block and partials in a metadata buffer that is wiped
/// when it is freed (before this returns); the partial hashes.
fn launch(
    gpu: &Arc<Gpu>,
    k: Keyed<'_>,
    dir: Direction,
    j0: &[u8; 16],
    mem: &Arc<DeviceMem>,
) -> Result<Zeroizing<Vec<u128>>, Error> {
    let len = mem.len();
    let grid = usize::try_from(plan::grid_for(plan::blocks(len), abi::FUSED_SPAN))
        .map_err(|_| Error::PlaintextTooLong)?;
    let meta_len = abi::GCM_CTR_BYTES + 16 * grid;
    let meta = DeviceMem::new(gpu, meta_len)?;
    gpu.with_lane(|lane| {
        lane.reserve_host(0, meta_len)?;
        lane.host(0)?[..abi::GCM_CTR_BYTES].copy_from_slice(&abi::gcm_ctr_bytes(j0, 0));
        let parts = At {
            mem: &meta,
            off: abi::GCM_CTR_BYTES,
        };
        let r = (|| -> Result<Zeroizing<Vec<u128>>, Error> {
            lane.upload(0, 0, At::start(&meta), abi::GCM_CTR_BYTES)?;
            lane.launch(Launch::Fused {
                dir,
                data: At::start(mem),
                len,
                key: k.key,
                nr: k.nr,
                powers: k.powers,
                ctr: At::start(&meta),
                partials: parts,
            })?;
            lane.download(parts, 0, abi::GCM_CTR_BYTES, 16 * grid)?;
            let h = lane.host(0)?;
            let mut values = Zeroizing::new(vec![0u128; grid]);
            plan::read_partials(&h[abi::GCM_CTR_BYTES..meta_len], &mut values);
            Ok(values)
        })();
        let wiped = lane.host(0).map(|h| h[..meta_len].zeroize());
        let values = r?;
        wiped?;
        Ok(values)
    })
}

/// The host-side check of a device-resident open: `tag` against the first bytes of `expected`, in
/// constant time; on a mismatch `buf` is wiped before `Error::Authentication` is returned.
pub(crate) fn verify_or_wipe(
    expected: &mut [u8; 16],
    tag: &[u8],
    buf: &mut DeviceBuf,
) -> Result<(), Error> {
    let ok = gcmx_core::backend::tag_matches(expected, tag);
    expected.zeroize();
    if ok {
        return Ok(());
    }
    buf.lost = true;
    buf.wipe()?;
    Err(Error::Authentication)
}
