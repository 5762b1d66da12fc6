//! [`PinnedRegion`]: a host buffer page-locked for a scope, so that GPU calls inside the scope transfer
//! it in place without page-locking it each time.
//!
//! Layer: above the runtime.

use gcmx_core::Error;

use crate::runtime::{Gpu, pin_scope};

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
