//! The stub libcuda's fault table, driven through the driver's entry points themselves (no gcmx in
//! between): counts per kind, a call failing once or with every counted call after it, a wait that
//! waits and then fails, uncounted releases, the codes returned and their marked names, and the
//! release faults beside the table. On the emulated device; not run, with a notice, where the loaded
//! libcuda is not the stub.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

use gcmx_cuda_testkit::fault::{self, Mode, Op, Release};

/// The loaded libcuda (the stub, through `LD_LIBRARY_PATH`).
fn lib() -> &'static libloading::Library {
    static LIB: std::sync::OnceLock<libloading::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: opens the libcuda.so.1 the loader finds; its initialisers have no preconditions.
        unsafe { libloading::Library::new("libcuda.so.1") }.expect("libcuda.so.1")
    })
}

/// The entry point `name` as a function of type `F` (the caller states the C signature).
///
/// # Safety
///
/// `F` must be the C signature of `name` (cuda.h).
unsafe fn entry<F: Copy>(name: &str) -> F {
    // SAFETY: by this function's contract.
    let s = unsafe { lib().get::<F>(name.as_bytes()) };
    *s.unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The driver's name of `code` (cuGetErrorName).
fn name(code: c_int) -> String {
    // SAFETY: `CUresult cuGetErrorName(CUresult, const char**)`.
    let f: unsafe extern "C" fn(c_int, *mut *const c_char) -> c_int =
        unsafe { entry("cuGetErrorName") };
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: writes one pointer to a static string.
    let rc = unsafe { f(code, &mut p) };
    assert_eq!(rc, 0);
    // SAFETY: the stub returns a NUL-terminated static string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The entry points the test calls, each behind a safe method.
struct Driver {
    alloc: unsafe extern "C" fn(*mut u64, usize) -> c_int,
    free: unsafe extern "C" fn(u64) -> c_int,
    stream_create: unsafe extern "C" fn(*mut *mut c_void, c_uint) -> c_int,
    stream_sync: unsafe extern "C" fn(*mut c_void) -> c_int,
    stream_destroy: unsafe extern "C" fn(*mut c_void) -> c_int,
    set_current: unsafe extern "C" fn(*mut c_void) -> c_int,
    register: unsafe extern "C" fn(*mut c_void, usize, c_uint) -> c_int,
    unregister: unsafe extern "C" fn(*mut c_void) -> c_int,
    /// The primary context, current on the thread that started the device.
    ctx: *mut c_void,
}

impl Driver {
    fn alloc(&self, n: usize) -> (c_int, u64) {
        let mut p = 0u64;
        // SAFETY: writes one device address.
        let rc = unsafe { (self.alloc)(&mut p, n) };
        (rc, p)
    }

    fn free(&self, p: u64) -> c_int {
        // SAFETY: frees an allocation of `alloc` (the stub checks the address).
        unsafe { (self.free)(p) }
    }

    fn stream(&self) -> (c_int, *mut c_void) {
        let mut s = std::ptr::null_mut();
        // SAFETY: writes one stream handle (flags 1: non-blocking).
        let rc = unsafe { (self.stream_create)(&mut s, 1) };
        (rc, s)
    }

    fn sync(&self, s: *mut c_void) -> c_int {
        // SAFETY: waits on a stream of `stream` (the stub checks the handle).
        unsafe { (self.stream_sync)(s) }
    }

    fn destroy(&self, s: *mut c_void) -> c_int {
        // SAFETY: destroys a stream of `stream` (the stub checks the handle).
        unsafe { (self.stream_destroy)(s) }
    }

    fn make_current(&self) -> c_int {
        // SAFETY: the context retained in `start`.
        unsafe { (self.set_current)(self.ctx) }
    }

    fn register(&self, host: &mut [u8]) -> c_int {
        // SAFETY: page-locks memory that `host` borrows; the caller unregisters it before freeing.
        unsafe { (self.register)(host.as_mut_ptr().cast(), host.len(), 0) }
    }

    fn unregister(&self, host: &mut [u8]) -> c_int {
        // SAFETY: ends the registration of `register` (the stub checks the address).
        unsafe { (self.unregister)(host.as_mut_ptr().cast()) }
    }
}

/// The emulated device started by hand: init, primary context retained and current.
fn start() -> Option<Driver> {
    if !fault::stub_loaded() {
        eprintln!(
            "fault table tests: NOT run: no libcuda.so.1, or not gcmx's stub libcuda, is loaded"
        );
        return None;
    }
    assert!(fault::emulate(), "the stub emulates");
    // SAFETY: `CUresult cuInit(unsigned)`.
    let init: unsafe extern "C" fn(c_uint) -> c_int = unsafe { entry("cuInit") };
    // SAFETY: no pointers.
    assert_eq!(unsafe { init(0) }, 0);
    // SAFETY: `CUresult cuDevicePrimaryCtxRetain(CUcontext*, CUdevice)`.
    let retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int =
        unsafe { entry("cuDevicePrimaryCtxRetain") };
    let mut ctx = std::ptr::null_mut();
    // SAFETY: writes one context handle.
    assert_eq!(unsafe { retain(&mut ctx, 0) }, 0);
    // SAFETY: `CUresult cuCtxSetCurrent(CUcontext)`.
    let set: unsafe extern "C" fn(*mut c_void) -> c_int = unsafe { entry("cuCtxSetCurrent") };
    // SAFETY: the context retained above.
    assert_eq!(unsafe { set(ctx) }, 0);
    Some(Driver {
        // SAFETY: `CUresult cuMemAlloc_v2(CUdeviceptr*, size_t)`.
        alloc: unsafe { entry("cuMemAlloc_v2") },
        // SAFETY: `CUresult cuMemFree_v2(CUdeviceptr)`.
        free: unsafe { entry("cuMemFree_v2") },
        // SAFETY: `CUresult cuStreamCreate(CUstream*, unsigned)`.
        stream_create: unsafe { entry("cuStreamCreate") },
        // SAFETY: `CUresult cuStreamSynchronize(CUstream)`.
        stream_sync: unsafe { entry("cuStreamSynchronize") },
        // SAFETY: `CUresult cuStreamDestroy_v2(CUstream)`.
        stream_destroy: unsafe { entry("cuStreamDestroy_v2") },
        set_current: set,
        // SAFETY: `CUresult cuMemHostRegister_v2(void*, size_t, unsigned)`.
        register: unsafe { entry("cuMemHostRegister_v2") },
        // SAFETY: `CUresult cuMemHostUnregister(void*)`.
        unregister: unsafe { entry("cuMemHostUnregister") },
        ctx,
    })
}

/// One test: the table is one per process, and the context is current on this thread only.
#[test]
fn fault_table() {
    let Some(d) = start() else { return };

    // Counting, and the nth call failing once with the code of its kind, without reaching the device.
    let live = fault::emulator_stats().unwrap().device_allocs;
    fault::arm(Op::DeviceAlloc, 2, Mode::Once);
    let (rc1, p1) = d.alloc(64);
    let (rc2, _) = d.alloc(64);
    let (rc3, p3) = d.alloc(64);
    assert_eq!(
        (rc1, rc2, rc3),
        (0, 2, 0),
        "the second allocation fails: CUDA_ERROR_OUT_OF_MEMORY"
    );
    assert_eq!(
        fault::emulator_stats().unwrap().device_allocs,
        live + 2,
        "the failed one allocated nothing"
    );
    assert_eq!(fault::calls(Op::DeviceAlloc), 3);
    assert_eq!(
        name(2),
        "CUDA_ERROR_OUT_OF_MEMORY (injected fault)",
        "marked while armed"
    );
    let i = fault::last_injected().unwrap();
    assert_eq!(
        (i.op(), i.call(), i.context_lost(), i.code()),
        (Op::DeviceAlloc, 2, false, "CUDA_ERROR_OUT_OF_MEMORY")
    );
    // Releases are not counted and never fail.
    assert_eq!((d.free(p1), d.free(p3)), (0, 0));
    assert_eq!(fault::calls(Op::DeviceAlloc), 3);
    assert_eq!(fault::disarm(), 1);
    assert_eq!(
        name(2),
        "CUDA_ERROR_OUT_OF_MEMORY",
        "not marked once disarmed"
    );
    assert!(
        fault::last_injected().is_some(),
        "the latest failure stays readable until the next arming"
    );

    // A lost context: the chosen call and every counted call after it fail, of every kind; a wait
    // waits first; releases still work.
    let (rc, s) = d.stream();
    assert_eq!(rc, 0);
    fault::arm(Op::Synchronize, 1, Mode::ContextLost);
    let (rc, p) = d.alloc(16);
    assert_eq!(rc, 0, "before the chosen call");
    assert_eq!(d.sync(s), 700, "CUDA_ERROR_ILLEGAL_ADDRESS");
    assert_eq!(d.alloc(16).0, 700, "after it, every kind fails");
    assert_eq!(d.stream().0, 700);
    assert_eq!(d.free(p), 0, "releases are not failed");
    assert_eq!(d.destroy(s), 0);
    assert_eq!(fault::calls(Op::Synchronize), 1);
    assert_eq!(fault::calls(Op::StreamCreate), 1);
    assert!(fault::last_injected().unwrap().context_lost());
    assert_eq!(
        name(700),
        "CUDA_ERROR_ILLEGAL_ADDRESS (injected fault, context lost)"
    );
    assert_eq!(fault::disarm(), 3);
    let (rc, p) = d.alloc(16);
    assert_eq!(rc, 0, "disarmed: the context works again");
    assert_eq!(d.free(p), 0);

    // A wait chosen once reports CUDA_ERROR_LAUNCH_FAILED; reset_counts keeps the fault armed.
    let (rc, s) = d.stream();
    assert_eq!(rc, 0);
    fault::arm(Op::Synchronize, 2, Mode::Once);
    assert_eq!(d.sync(s), 0);
    fault::reset_counts();
    assert_eq!(d.sync(s), 0, "the count restarted at the reset");
    assert_eq!(d.sync(s), 719, "CUDA_ERROR_LAUNCH_FAILED");
    assert_eq!(fault::disarm(), 1);
    assert_eq!(d.destroy(s), 0);

    // Release faults: the next calls that make a context current or end a registration fail
    // without reaching the device (the range stays registered, the context current), then work.
    let mut host = vec![0u8; 4096];
    assert_eq!(d.register(&mut host), 0);
    let registered = fault::emulator_stats().unwrap().registrations;
    assert_eq!(fault::fail_release(Release::Unregister, 1), 0);
    assert_eq!(d.unregister(&mut host), 700, "CUDA_ERROR_ILLEGAL_ADDRESS");
    assert_eq!(
        fault::emulator_stats().unwrap().registrations,
        registered,
        "still registered"
    );
    assert_eq!(d.unregister(&mut host), 0, "only the next call fails");
    assert_eq!(fault::fail_release(Release::Unregister, 0), 1);
    assert_eq!(fault::fail_release(Release::SetCurrent, 2), 0);
    assert_eq!(d.make_current(), 201, "CUDA_ERROR_INVALID_CONTEXT");
    assert_eq!(d.make_current(), 201);
    assert_eq!(d.make_current(), 0);
    assert_eq!(fault::fail_release(Release::SetCurrent, 0), 2);
    let (rc, p) = d.alloc(16);
    assert_eq!(rc, 0, "the context stayed current");
    assert_eq!(d.free(p), 0);

    let after = fault::emulator_stats().unwrap();
    assert_eq!(
        (after.device_allocs, after.streams, after.invalid_calls),
        (live, 0, 0),
        "nothing left, nothing invalid"
    );
    assert_eq!(after.registrations, registered - 1);
}
