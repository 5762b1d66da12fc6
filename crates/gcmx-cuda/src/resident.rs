//! [`DeviceBuf`]: data already in GPU memory, owned by gcmx.
//!
//! Layer: above the runtime.

use std::sync::Arc;

use gcmx_core::Error;

use crate::runtime::{DeviceMem, Gpu};

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
/// use gcmx::cuda::{CudaEngine, DeviceBuf, DeviceJob};
/// let engine = CudaEngine::new(&[7u8; 32], 0)?;
/// let mut buf = DeviceBuf::from_host(b"hello, device", 0)?;
/// let mut tag = DeviceBuf::new(16, 0)?;
/// let nonce = [1u8; 12];
/// let job = DeviceJob { key: 0, nonce: &nonce, aad: b"aad", data: &mut buf, tag: &mut tag };
/// engine.seal_async(None, job)?.wait()?; // the call made synchronous
/// let job = DeviceJob { key: 0, nonce: &nonce, aad: b"aad", data: &mut buf, tag: &mut tag };
/// engine.open_async(None, job, 16)?.wait()?;
/// assert_eq!(buf.to_vec()?, b"hello, device");
/// # Ok::<(), gcmx::cuda::Error>(())
/// ```
///
/// A `DeviceBuf` is not `Clone`: its bytes have one owner.
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// let buf = gcmx::cuda::DeviceBuf::new(16, 0).unwrap();
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
    /// `len` zero bytes in the memory of device `ordinal` (0 is the default device).
    ///
    /// `Error::BackendUnavailable` without a usable device, `Error::InvalidInput` for an ordinal past
    /// the last device, `Error::Device` when the device cannot allocate `len` bytes.
    pub fn new(len: usize, ordinal: u32) -> Result<DeviceBuf, Error> {
        let gpu = Gpu::get(ordinal)?;
        Ok(DeviceBuf {
            mem: DeviceMem::zeroed(&gpu, len)?,
            lost: false,
        })
    }

    /// A buffer on device `ordinal` holding a copy of `data`.
    pub fn from_host(data: &[u8], ordinal: u32) -> Result<DeviceBuf, Error> {
        let gpu = Gpu::get(ordinal)?;
        let mem = DeviceMem::new(&gpu, data.len())?;
        mem.upload(0, data)?;
        Ok(DeviceBuf { mem, lost: false })
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

    /// Work that wrote the buffer failed: mark the contents lost and try to wipe them (a wipe that
    /// succeeds makes the buffer readable again, as zeros).
    pub(crate) fn fail(&mut self) {
        self.lost = true;
        let _ = self.wipe();
    }
}
