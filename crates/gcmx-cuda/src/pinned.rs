//! Page-locked host memory, so that GPU calls transfer it in place without page-locking it each time:
//! a caller's buffer for a scope ([`PinnedRegion`]), or a buffer owned for its whole life
//! ([`PinnedBuffer`]).
//!
//! Layer: above the runtime.

use gcmx_core::Error;

use crate::runtime::{Gpu, HostPin, pin_scope};

/// A host buffer page-locked (`cuMemHostRegister`) for the duration of [`PinnedRegion::scope`].
///
/// Every host-memory call of the GPU backend (`gcmx::Gcm` on `Backend::Cuda`, batches) page-locks a
/// large buffer for the call, which costs about as much as the transfer itself; a buffer inside a
/// region is DMA'd as it is. The region borrows its buffer exclusively for its whole life, and the
/// registration ends when the scope does, after every call inside it has returned: no transfer can run
/// on memory that is no longer the region's, and no later buffer at the same address is mistaken for
/// a registered one.
///
/// Why a scope and not a guard: a guard can be leaked (`std::mem::forget`) without running its `Drop`,
/// which would end the borrow of the buffer but leave its pages registered with the driver, so that a
/// new buffer allocated at the same address would be taken for page-locked memory, and in-place DMA
/// would read and write the old, freed pages (encryption returning `Ok` with the new buffer untouched).
/// The scope unregisters in its own frame, which no leak can skip.
///
/// With `gcmx::Gcm` on `Backend::Cuda`, calls inside the scope transfer the region in place in the same
/// way; here with the keyring's host batches:
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaKeyring, KeyedSealJob, PinnedRegion};
/// let ring = CudaKeyring::new(&[&[7u8; 32]], 0)?;
/// let mut data = vec![0u8; 1 << 30];
/// let mut tag = [0u8; 16];
/// PinnedRegion::scope(&mut data, |region| {
///     for i in 0..10u8 {
///         let job = KeyedSealJob { key: 0, nonce: &[i; 12], aad: b"", buf: &mut region[..], tag: &mut tag };
///         ring.seal(&mut [job])?;
///     }
///     Ok::<(), gcmx::cuda::Error>(())
/// })??;
/// # Ok::<(), gcmx::cuda::Error>(())
/// ```
///
/// The region cannot outlive its buffer, nor leave its scope:
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::PinnedRegion;
/// let mut escaped = None;
/// {
///     let mut v = vec![0u8; 4096];
///     let _ = PinnedRegion::scope(&mut v, |region| escaped = Some(region));
/// }
/// ```
///
/// and the buffer cannot be used but through the region while the region lives:
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::PinnedRegion;
/// let mut v = vec![0u8; 4096];
/// let _ = PinnedRegion::scope(&mut v, |region| {
///     v[0] = 1; // `v` is borrowed by the region
///     region[0] = 2;
/// });
/// ```
pub struct PinnedRegion<'a> {
    buf: &'a mut [u8],
}

impl core::fmt::Debug for PinnedRegion<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PinnedRegion({} bytes)", self.buf.len())
    }
}

impl PinnedRegion<'_> {
    /// Page-lock `buf` (for every device), run `f` with it as a region, and unregister it when `f`
    /// returns or panics; `f`'s result. `Error::BackendUnavailable` without a usable device and
    /// `Error::Device` when the driver refuses to page-lock `buf` (then `f` does not run).
    pub fn scope<R>(
        buf: &mut [u8],
        f: impl FnOnce(&mut PinnedRegion<'_>) -> R,
    ) -> Result<R, Error> {
        let gpu = Gpu::get(0)?;
        pin_scope(&gpu, buf, |buf| f(&mut PinnedRegion { buf }))
    }
}

/// The region is its bytes: it reads and writes as a `[u8]`.
impl core::ops::Deref for PinnedRegion<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.buf
    }
}

impl core::ops::DerefMut for PinnedRegion<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.buf
    }
}

/// A zeroed host buffer, page-locked for its whole life: GPU calls on bytes inside it (`gcmx::Gcm` on
/// `Backend::Cuda`, its batches, the keyring's host batches) DMA them in place, with no page-locking
/// per call and no copy through staging, whatever the messages' alignment.
///
/// For a buffer used by many calls, such as the window of a stream: page-locking costs about as
/// much as a transfer, so pay it once. The buffer owns its memory and is never resized; dropping it
/// ends the registration, then frees the memory (not wiped: wipe what it held first, as with a
/// `Vec`). A leaked buffer leaks its memory with its registration, so nothing else is ever taken for
/// page-locked memory; so does a dropped buffer whose registration cannot be ended (the device's
/// context cannot be made current, or the driver refuses to unregister).
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::{CudaKeyring, KeyedSealJob, PinnedBuffer};
/// let ring = CudaKeyring::new(&[&[7u8; 32]], 0)?;
/// let mut buf = PinnedBuffer::zeroed(64 << 20)?;
/// let mut tag = [0u8; 16];
/// for i in 0..10u8 {
///     buf.fill(i); // the next message, written where the GPU reads it
///     let job = KeyedSealJob { key: 0, nonce: &[i; 12], aad: b"", buf: &mut buf[..], tag: &mut tag };
///     ring.seal(&mut [job])?;
/// }
/// # Ok::<(), gcmx::cuda::Error>(())
/// ```
pub struct PinnedBuffer {
    pin: HostPin,
}

impl core::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PinnedBuffer({} bytes)", self.pin.bytes().len())
    }
}

impl PinnedBuffer {
    /// `len` zero bytes, page-locked for every device. `Error::BackendUnavailable` without a usable
    /// device, `Error::InvalidInput` when the memory cannot be allocated, `Error::Device` when the
    /// driver refuses to page-lock it.
    pub fn zeroed(len: usize) -> Result<PinnedBuffer, Error> {
        let gpu = Gpu::get(0)?;
        Ok(PinnedBuffer {
            pin: HostPin::zeroed(&gpu, len)?,
        })
    }
}

/// The buffer is its bytes: it reads and writes as a `[u8]`.
impl core::ops::Deref for PinnedBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.pin.bytes()
    }
}

impl core::ops::DerefMut for PinnedBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.pin.bytes_mut()
    }
}
