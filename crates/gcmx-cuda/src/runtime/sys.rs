//! The CUDA driver API as gcmx uses it: its types, and its functions loaded from `libcuda.so.1` on first
//! use (`dlopen`), not linked. Without the crate's `cuda` feature nothing is loaded: [`load`] answers
//! that this build has no CUDA backend, so the rest of the runtime compiles and is checked the same way
//! in every build but never reaches a driver.
//!
//! A binary built with the `cuda` feature therefore needs nothing CUDA to build, link or start: on a
//! machine without the NVIDIA driver [`load`] says why the library could not be opened and the backend
//! reports `BackendUnavailable`, while everything else runs on the CPU. The library is opened once per
//! process and stays open (the driver's handles are only meaningful while it is loaded).
//!
//! Each function here has the signature of the driver's C declaration of the same name (`cuda.h`,
//! driver API 12.x; the `_v2` names are the ABI-stable entry points the headers map the plain names to)
//! and returns `CUDA_ERROR_NOT_INITIALIZED` if called before a successful [`load`] (the runtime never
//! does: every path starts at `Gpu::get`, which loads first). Calling them is `unsafe` as calling the C
//! functions is: the caller upholds the driver's contract for each pointer and handle; the wrappers in
//! the sibling `driver` module say how, at every call.
#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

/// A driver result code (`CUresult`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub(crate) struct CUresult(pub(crate) c_int);

impl CUresult {
    pub(crate) const CUDA_SUCCESS: CUresult = CUresult(0);
    pub(crate) const CUDA_ERROR_NOT_INITIALIZED: CUresult = CUresult(3);
    pub(crate) const CUDA_ERROR_NOT_READY: CUresult = CUresult(600);

    /// The driver's name for the code (`cuGetErrorName`), or its number when the driver has none.
    fn name(self) -> Option<&'static str> {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorName writes a pointer to a static NUL-terminated string owned by the driver,
        // or returns an error and leaves `p` null.
        let r = unsafe { cuGetErrorName(self, &mut p) };
        if r != CUresult::CUDA_SUCCESS || p.is_null() {
            return None;
        }
        // SAFETY: non-null, NUL-terminated and static (the library is never unloaded: see `LIB`).
        unsafe { CStr::from_ptr(p) }.to_str().ok()
    }
}

impl core::fmt::Debug for CUresult {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "CUresult({})", self.0),
        }
    }
}

pub(crate) type CUdevice = c_int;
pub(crate) type CUdeviceptr = u64;
pub(crate) type CUcontext = *mut c_void;
pub(crate) type CUmodule = *mut c_void;
pub(crate) type CUfunction = *mut c_void;
pub(crate) type CUstream = *mut c_void;
pub(crate) type CUevent = *mut c_void;

/// `CUdevice_attribute` values gcmx reads.
pub(crate) const CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: c_int = 16;
pub(crate) const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
pub(crate) const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;
/// `CU_STREAM_NON_BLOCKING`: no implicit synchronisation with the legacy default stream.
pub(crate) const CU_STREAM_NON_BLOCKING: c_uint = 1;
/// `CUevent_flags`.
#[cfg(feature = "bench")]
pub(crate) const CU_EVENT_DEFAULT: c_uint = 0;
pub(crate) const CU_EVENT_BLOCKING_SYNC: c_uint = 1;
pub(crate) const CU_EVENT_DISABLE_TIMING: c_uint = 2;
/// `cuMemHostAlloc` flags.
pub(crate) const CU_MEMHOSTALLOC_PORTABLE: c_uint = 1;
pub(crate) const CU_MEMHOSTALLOC_DEVICEMAP: c_uint = 2;
/// `cuMemHostRegister` flags.
pub(crate) const CU_MEMHOSTREGISTER_PORTABLE: c_uint = 1;

/// The file the driver installs (its soname); the loader's search path decides which one is found.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
const LIBRARY: &str = "libcuda.so.1";

/// Declares the function table, its loading, and one `unsafe fn` per entry with the C signature.
macro_rules! driver_api {
    ($( $(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?); )*) => {
        /// The driver's entry points, resolved once from the loaded library.
        #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
        struct Api {
            $( $(#[$m])* $name: unsafe extern "C" fn($($ty),*) -> CUresult, )*
        }

        impl Api {
            /// Resolve every entry point; the first one missing is the error.
            #[cfg(feature = "cuda")]
            fn resolve(lib: &libloading::Library) -> Result<Api, String> {
                Ok(Api {
                    $( $name: {
                        // SAFETY: the symbol is the driver's C function of this name, whose signature is
                        // the one declared for it below (cuda.h); the pointer is used only while `lib`
                        // stays loaded, which is for the life of the process (`LIB` is never dropped).
                        let s = unsafe {
                            lib.get::<unsafe extern "C" fn($($ty),*) -> CUresult>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                        };
                        *s.map_err(|e| format!("{LIBRARY} has no {}: {e}", stringify!($name)))?
                    }, )*
                })
            }
        }

        $(
            /// The driver function of this name (see the module documentation).
            $(#[$m])*
            #[allow(clippy::too_many_arguments)] // the C signature's
            pub(crate) unsafe fn $name($($arg: $ty),*) -> CUresult {
                match api() {
                    // SAFETY: forwarded from this function's contract, which is the C function's.
                    Some(a) => unsafe { (a.$name)($($arg),*) },
                    None => CUresult::CUDA_ERROR_NOT_INITIALIZED,
                }
            }
        )*
    };
}

driver_api! {
    fn cuGetErrorName(error: CUresult, p_str: *mut *const c_char);
    fn cuInit(flags: c_uint);
    fn cuDriverGetVersion(version: *mut c_int);
    fn cuDeviceGetCount(count: *mut c_int);
    fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int);
    fn cuDeviceGetAttribute(value: *mut c_int, attrib: c_int, device: CUdevice);
    fn cuDeviceGetName(name: *mut c_char, len: c_int, device: CUdevice);
    fn cuDeviceTotalMem_v2(bytes: *mut usize, device: CUdevice);
    fn cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, device: CUdevice);
    fn cuDevicePrimaryCtxRelease_v2(device: CUdevice);
    fn cuCtxSetCurrent(ctx: CUcontext);
    fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void);
    fn cuModuleUnload(module: CUmodule);
    fn cuModuleGetFunction(f: *mut CUfunction, module: CUmodule, name: *const c_char);
    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytes: usize);
    fn cuMemFree_v2(dptr: CUdeviceptr);
    fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytes: usize);
    fn cuMemHostAlloc(pp: *mut *mut c_void, bytes: usize, flags: c_uint);
    fn cuMemFreeHost(p: *mut c_void);
    fn cuMemHostGetDevicePointer_v2(dptr: *mut CUdeviceptr, p: *mut c_void, flags: c_uint);
    fn cuMemHostRegister_v2(p: *mut c_void, bytes: usize, flags: c_uint);
    fn cuMemHostUnregister(p: *mut c_void);
    fn cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, bytes: usize, stream: CUstream);
    fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, bytes: usize, stream: CUstream);
    fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, bytes: usize);
    fn cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize);
    fn cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, stream: CUstream);
    fn cuStreamCreate(stream: *mut CUstream, flags: c_uint);
    fn cuStreamDestroy_v2(stream: CUstream);
    fn cuStreamSynchronize(stream: CUstream);
    fn cuStreamWaitEvent(stream: CUstream, event: CUevent, flags: c_uint);
    fn cuEventCreate(event: *mut CUevent, flags: c_uint);
    fn cuEventDestroy_v2(event: CUevent);
    fn cuEventRecord(event: CUevent, stream: CUstream);
    fn cuEventQuery(event: CUevent);
    fn cuEventSynchronize(event: CUevent);
    #[cfg_attr(not(feature = "bench"), allow(dead_code))]
    fn cuEventElapsedTime(ms: *mut f32, start: CUevent, end: CUevent);
    fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
        blocks: *mut c_int,
        f: CUfunction,
        block_size: c_int,
        dynamic_smem: usize,
    );
    fn cuLaunchKernel(
        f: CUfunction,
        gx: c_uint,
        gy: c_uint,
        gz: c_uint,
        bx: c_uint,
        by: c_uint,
        bz: c_uint,
        smem: c_uint,
        stream: CUstream,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    );
    fn cuLaunchCooperativeKernel(
        f: CUfunction,
        gx: c_uint,
        gy: c_uint,
        gz: c_uint,
        bx: c_uint,
        by: c_uint,
        bz: c_uint,
        smem: c_uint,
        stream: CUstream,
        params: *mut *mut c_void,
    );
}

/// The library as loaded: it stays open for the life of the process.
#[cfg(feature = "cuda")]
type Library = libloading::Library;
/// No library is ever loaded without the `cuda` feature.
#[cfg(not(feature = "cuda"))]
type Library = core::convert::Infallible;

/// The opened library and its resolved table, or why it could not be had. Never dropped: function
/// pointers and driver handles stay valid for the life of the process.
static LIB: OnceLock<Result<(Library, Api), String>> = OnceLock::new();

#[cfg(not(feature = "cuda"))]
fn opened() -> &'static Result<(Library, Api), String> {
    LIB.get_or_init(|| {
        Err(
            "this build of gcmx-cuda has no CUDA backend (its `cuda` feature, which gcmx's `cuda` \
             feature turns on, is off)"
                .into(),
        )
    })
}

#[cfg(feature = "cuda")]
fn opened() -> &'static Result<(Library, Api), String> {
    LIB.get_or_init(|| {
        // SAFETY: opening the NVIDIA driver library runs its initialisers, which have no preconditions
        // on our side (it is loaded the same way by the CUDA runtime and every other driver-API user).
        let lib = unsafe { libloading::Library::new(LIBRARY) }.map_err(|e| {
            // The loader's own words (`dlerror`) are the error's source.
            let why =
                std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
            format!("the NVIDIA driver library {LIBRARY} could not be loaded ({why})")
        })?;
        let api = Api::resolve(&lib)?;
        Ok((lib, api))
    })
}

fn api() -> Option<&'static Api> {
    opened().as_ref().ok().map(|(_, a)| a)
}

/// Open the driver library and resolve its entry points (once per process; later calls give the first
/// answer). `Err` says why the driver is not usable, in words for `BackendUnavailable`.
pub(crate) fn load() -> Result<(), String> {
    opened().as_ref().map(|_| ()).map_err(Clone::clone)
}
