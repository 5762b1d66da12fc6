//! [`DeviceMemory`]: what the device-resident calls read and write, whether gcmx owns it
//! ([`crate::DeviceBuf`]) or another CUDA library does ([`crate::RawDeviceSpan`]), so that each call
//! is written once for both.
//!
//! Layer: above the runtime and `DeviceBuf` (the device-resident work uses it).

use crate::resident::DeviceBuf;
use crate::runtime::{RawDeviceSpan, Region};

/// Device memory a device-resident call can use: a [`crate::DeviceBuf`] (owned by gcmx) or a
/// [`crate::RawDeviceSpan`] (memory of another CUDA library, vouched for by its `unsafe` constructor).
///
/// The calls take `&dyn DeviceMemory` for what they read and `&mut dyn DeviceMemory` for what they
/// write, so a job or batch may mix both kinds; the borrows last as long as the [`crate::Pending`] the
/// call returns. The trait is sealed: no other type can claim to be device memory.
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// #[derive(Debug)]
/// struct Anywhere(u64);
/// impl gcmx::cuda::DeviceMemory for Anywhere {} // sealed: only gcmx's two kinds of memory
/// ```
pub trait DeviceMemory: sealed::Sealed + core::fmt::Debug + Send + Sync {}

impl DeviceMemory for DeviceBuf {}
impl DeviceMemory for RawDeviceSpan {}

// The sealed trait's methods name crate-private types: outside the crate the trait cannot be named,
// so they are not reachable there, although the lint sees it as the bound of a public trait.
#[allow(private_interfaces)]
pub(crate) mod sealed {
    use super::{DeviceBuf, RawDeviceSpan, Region};

    /// What a call needs of device memory. Sealed (the module is private), so the soundness of a
    /// launch never rests on an outside implementation.
    #[allow(unreachable_pub)] // reachable only as the bound of the public trait: the sealing
    pub trait Sealed {
        /// The bytes a launch reads or writes.
        fn region(&self) -> Region<'_>;
        /// The work that wrote these bytes failed: their contents cannot be trusted. A `DeviceBuf` is
        /// wiped (or marked lost when even that fails); memory of another library is the caller's.
        fn failed(&mut self);
    }

    impl Sealed for DeviceBuf {
        fn region(&self) -> Region<'_> {
            Region::whole(&self.mem)
        }

        fn failed(&mut self) {
            self.fail();
        }
    }

    impl Sealed for RawDeviceSpan {
        fn region(&self) -> Region<'_> {
            Region::Raw(*self)
        }

        fn failed(&mut self) {}
    }
}
