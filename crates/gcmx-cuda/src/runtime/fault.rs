//! Fault injection, for tests (feature `fault-injection`; never in a normal build).
//!
//! Every driver wrapper of the runtime calls `hit` with its [`Op`] once per driver call: before the
//! call, except a synchronisation, which reports after its wait (an injected failure then stands for
//! an error of earlier asynchronous work that the wait reports, as the driver does, and that work has
//! drained). With the feature, a test can make the `nth` call of one kind fail once, or fail it and
//! every hooked call after it (a lost context), and count the calls of each kind; without it, `hit`
//! is an inlined `Ok(())`. Calls that release resources (free, unregister, destroy) are not hooked:
//! gcmx ignores their result, and after a real loss the driver reclaims everything with the context.
//!
//! On a machine without a GPU the stub libcuda (`stub/libcuda_stub.c`) can emulate a device in host
//! memory: [`emulate`] switches it on, and [`emulator_stats`] reads its live allocations and the
//! misuse it detected, for leak and wipe checks. On a real driver both report that there is no stub.

/// The kinds of driver call a fault can be injected into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
pub enum Op {
    /// Retaining a device's primary context at start-up (`cuDevicePrimaryCtxRetain`).
    ContextCreate,
    /// Loading the kernels at start-up (`cuModuleLoadDataEx`).
    ModuleLoad,
    /// Allocating device memory (`cuMemAlloc`).
    DeviceAlloc,
    /// Allocating page-locked host memory for staging or parameters (`cuMemAllocHost`, `cuMemHostAlloc`).
    HostAlloc,
    /// Page-locking caller memory (`cuMemHostRegister`).
    HostRegister,
    /// A copy from host to device memory (`cuMemcpyHtoDAsync`).
    CopyToDevice,
    /// A copy from device to host memory (`cuMemcpyDtoHAsync`, `cuMemcpyDtoH`).
    CopyToHost,
    /// Setting device memory (`cuMemsetD8Async`): wipes.
    Memset,
    /// A kernel launch (`cuLaunchKernel`, `cuLaunchCooperativeKernel`, and the occupancy query before a
    /// cooperative kernel's first launch).
    Launch,
    /// Waiting for a stream or an event, or asking whether an event is complete (`cuStreamSynchronize`,
    /// `cuEventSynchronize`, `cuEventQuery`).
    Synchronize,
    /// Creating a stream (`cuStreamCreate`).
    StreamCreate,
    /// Creating or recording an event, or making a stream wait for one (`cuEventCreate`, `cuEventRecord`,
    /// `cuStreamWaitEvent`): the fences of asynchronous calls and sleeping waits, and the benchmark's timers.
    Event,
}

#[cfg(feature = "fault-injection")]
impl Op {
    /// Every kind, in declaration order.
    pub const ALL: [Op; 12] = [
        Op::ContextCreate,
        Op::ModuleLoad,
        Op::DeviceAlloc,
        Op::HostAlloc,
        Op::HostRegister,
        Op::CopyToDevice,
        Op::CopyToHost,
        Op::Memset,
        Op::Launch,
        Op::Synchronize,
        Op::StreamCreate,
        Op::Event,
    ];

    /// The driver function this kind stands for (the `what` of the error).
    pub fn driver_call(self) -> &'static str {
        match self {
            Op::ContextCreate => "cuDevicePrimaryCtxRetain",
            Op::ModuleLoad => "cuModuleLoadDataEx",
            Op::DeviceAlloc => "cuMemAlloc",
            Op::HostAlloc => "cuMemAllocHost",
            Op::HostRegister => "cuMemHostRegister",
            Op::CopyToDevice => "cuMemcpyHtoDAsync",
            Op::CopyToHost => "cuMemcpyDtoHAsync",
            Op::Memset => "cuMemsetD8Async",
            Op::Launch => "cuLaunchKernel",
            Op::Synchronize => "cuStreamSynchronize",
            Op::StreamCreate => "cuStreamCreate",
            Op::Event => "cuEventCreate/cuEventRecord",
        }
    }
}

#[cfg(feature = "fault-injection")]
impl core::fmt::Display for Op {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

/// Without the feature: nothing to inject.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn hit(_op: Op) -> Result<(), gcmx_core::Error> {
    Ok(())
}

#[cfg(feature = "fault-injection")]
pub use injection::*;

#[cfg(feature = "fault-injection")]
mod injection {
    use std::ffi::{CStr, c_int, c_void};
    use std::sync::Mutex;

    use gcmx_core::{DeviceError, Error};

    use super::Op;

    /// How an armed fault fails.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Mode {
        /// The chosen call fails; the calls after it run normally.
        Once,
        /// The chosen call fails and so does every hooked call after it, of every kind, until
        /// [`disarm`]: the device's context is lost.
        ContextLost,
    }

    /// The error of an injected fault: the source of the `Error::Device` it causes (or part of the
    /// message of `Error::BackendUnavailable` when the device's start-up failed).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Injected {
        op: Op,
        call: u64,
        lost: bool,
    }

    impl Injected {
        /// The kind of call that failed.
        pub fn op(&self) -> Op {
            self.op
        }

        /// Whether it failed because the context was lost.
        pub fn context_lost(&self) -> bool {
            self.lost
        }

        /// The driver's error code it stands for.
        pub fn code(&self) -> &'static str {
            if self.lost {
                return "CUDA_ERROR_ILLEGAL_ADDRESS";
            }
            match self.op {
                Op::ModuleLoad => "CUDA_ERROR_NO_BINARY_FOR_GPU",
                Op::CopyToDevice | Op::CopyToHost | Op::Memset => "CUDA_ERROR_INVALID_VALUE",
                Op::Launch => "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                Op::Synchronize => "CUDA_ERROR_LAUNCH_FAILED",
                _ => "CUDA_ERROR_OUT_OF_MEMORY",
            }
        }
    }

    impl core::fmt::Display for Injected {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            write!(
                f,
                "injected fault: {} (call {} of {}){}",
                self.code(),
                self.call,
                self.op,
                if self.lost { ", context lost" } else { "" }
            )
        }
    }

    impl std::error::Error for Injected {}

    struct State {
        armed: Option<(Op, u64, Mode)>,
        lost: bool,
        injected: u64,
        calls: [u64; Op::ALL.len()],
    }

    static STATE: Mutex<State> = Mutex::new(State {
        armed: None,
        lost: false,
        injected: 0,
        calls: [0; Op::ALL.len()],
    });

    fn state() -> std::sync::MutexGuard<'static, State> {
        STATE.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make the `nth` call (1-based, counted from now) of kind `op` fail, once or with every hooked
    /// call after it ([`Mode::ContextLost`]). Replaces an earlier arming and resets the counts.
    ///
    /// ```
    /// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
    /// use gcmx::cuda::fault::{self, Mode, Op};
    /// fault::emulate(); // no-op on a real GPU
    /// let engine = gcmx::cuda::CudaEngine::new(&[7u8; 16])?;
    /// let mut buf = gcmx::cuda::DeviceBuf::from_host(&[1u8; 1000])?;
    /// fault::arm(Op::Launch, 1, Mode::Once);
    /// let r = engine.seal_device(&[0u8; 12], b"", &mut buf, &mut [0u8; 16]);
    /// assert_eq!(fault::disarm(), 1);
    /// assert!(matches!(r, Err(gcmx::cuda::Error::Device(_))));
    /// # Ok::<(), gcmx::cuda::Error>(())
    /// ```
    pub fn arm(op: Op, nth: u64, mode: Mode) {
        let mut s = state();
        s.armed = Some((op, nth, mode));
        s.lost = false;
        s.injected = 0;
        s.calls = [0; Op::ALL.len()];
    }

    /// End the fault (also a lost context); the number of calls that failed by injection since
    /// [`arm`].
    pub fn disarm() -> u64 {
        let mut s = state();
        s.armed = None;
        s.lost = false;
        std::mem::take(&mut s.injected)
    }

    /// Hooked calls of kind `op` since the last [`arm`] or [`reset_counts`].
    pub fn calls(op: Op) -> u64 {
        state().calls[op as usize]
    }

    /// Start counting calls from zero (the fault stays armed).
    pub fn reset_counts() {
        state().calls = [0; Op::ALL.len()];
    }

    /// Called by every driver wrapper: `Err` when the armed fault strikes this call.
    pub(crate) fn hit(op: Op) -> Result<(), Error> {
        let mut s = state();
        s.calls[op as usize] += 1;
        let call = s.calls[op as usize];
        let strike = match s.armed {
            _ if s.lost => Some(true),
            Some((o, nth, mode)) if o == op && nth == call => {
                s.lost = mode == Mode::ContextLost;
                Some(s.lost)
            }
            _ => None,
        };
        match strike {
            None => Ok(()),
            Some(lost) => {
                s.injected += 1;
                Err(Error::Device(DeviceError::with_source(
                    op.driver_call(),
                    Injected { op, call, lost },
                )))
            }
        }
    }

    /// Drop what gcmx caches per device between calls (lanes with their streams and page-locked
    /// staging, the pipeline's and batches' device buffers), so that live counts can be compared
    /// with none of it allocated.
    pub fn release_cached() {
        super::super::driver::release_cached();
    }

    /// The configuration `gcmx_stub_emulate` takes (`struct gcmx_stub_config` of the stub).
    #[repr(C)]
    struct StubConfig {
        size: u64,
        total_memory: u64,
        have_clmad: u32,
        reserved: u32,
    }

    /// The counters `gcmx_stub_stats` fills (`struct gcmx_stub_stats` of the stub).
    #[repr(C)]
    struct StubStats {
        size: u64,
        device_allocs: u64,
        device_bytes: u64,
        host_allocs: u64,
        host_bytes: u64,
        registrations: u64,
        streams: u64,
        events: u64,
        modules: u64,
        context_refs: u64,
        launches: u64,
        unwiped_frees: u64,
        unwiped_host_frees: u64,
        unpinned_copies: u64,
        invalid_calls: u64,
        nonzero_device: u64,
        nonzero_host: u64,
        last_invalid: [u8; 160],
    }

    /// Device memory of the emulated device.
    pub const EMULATED_MEMORY: usize = 1 << 30;

    /// The address of `name` in the loaded driver library (loading it first), if it exports it.
    fn symbol(name: &CStr) -> Option<*mut c_void> {
        super::super::sys::symbol(name).filter(|p| !p.is_null())
    }

    /// Switch the stub libcuda (when it is the libcuda loaded) into emulating one device with
    /// [`EMULATED_MEMORY`] bytes of memory; `false` on a real driver, which is left as it is. Call it
    /// before the first use of the device (a start that already failed is retried by the next call).
    pub fn emulate() -> bool {
        let Some(f) = symbol(c"gcmx_stub_emulate") else {
            return false;
        };
        // SAFETY: the stub exports `int gcmx_stub_emulate(const struct gcmx_stub_config*)`, which
        // `StubConfig` mirrors.
        let f: unsafe extern "C" fn(*const StubConfig) -> c_int =
            unsafe { core::mem::transmute(f) };
        let cfg = StubConfig {
            size: core::mem::size_of::<StubConfig>() as u64,
            total_memory: EMULATED_MEMORY as u64,
            have_clmad: u32::from(cfg!(gcmx_have_clmad)),
            reserved: 0,
        };
        // SAFETY: the stub reads the struct, which lives through the call.
        let rc = unsafe { f(&cfg) };
        rc == 0
    }

    /// What the emulating stub counts: live resources (for leak checks) and misuse it detected.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    #[non_exhaustive]
    pub struct EmulatorStats {
        /// Live device allocations.
        pub device_allocs: u64,
        /// Bytes of them.
        pub device_bytes: u64,
        /// Live page-locked host allocations.
        pub host_allocs: u64,
        /// Bytes of them.
        pub host_bytes: u64,
        /// Live host registrations.
        pub registrations: u64,
        /// Live streams.
        pub streams: u64,
        /// Live events.
        pub events: u64,
        /// Loaded modules.
        pub modules: u64,
        /// References to the primary context.
        pub context_refs: u64,
        /// Kernel launches so far.
        pub launches: u64,
        /// Device allocations freed while not all zero (a missed wipe), so far.
        pub unwiped_frees: u64,
        /// Page-locked host allocations freed while not all zero, so far.
        pub unwiped_host_frees: u64,
        /// Asynchronous copies from or to host memory that was not page-locked, so far.
        pub unpinned_copies: u64,
        /// Calls the real driver would refuse (unknown handle or pointer, a range outside every
        /// allocation, no current context), so far.
        pub invalid_calls: u64,
        /// Live device allocations holding anything but zeros (when the counters were read).
        pub nonzero_device: u64,
        /// Live page-locked host allocations holding anything but zeros.
        pub nonzero_host: u64,
        /// The latest invalid call or unpinned copy.
        pub last_invalid: String,
    }

    /// The emulating stub's counters, or `None` when the loaded libcuda is not the stub.
    pub fn emulator_stats() -> Option<EmulatorStats> {
        let f = symbol(c"gcmx_stub_stats")?;
        // SAFETY: the stub exports `int gcmx_stub_stats(struct gcmx_stub_stats*)`, which `StubStats`
        // mirrors.
        let f: unsafe extern "C" fn(*mut StubStats) -> c_int = unsafe { core::mem::transmute(f) };
        let mut raw = StubStats {
            size: core::mem::size_of::<StubStats>() as u64,
            device_allocs: 0,
            device_bytes: 0,
            host_allocs: 0,
            host_bytes: 0,
            registrations: 0,
            streams: 0,
            events: 0,
            modules: 0,
            context_refs: 0,
            launches: 0,
            unwiped_frees: 0,
            unwiped_host_frees: 0,
            unpinned_copies: 0,
            invalid_calls: 0,
            nonzero_device: 0,
            nonzero_host: 0,
            last_invalid: [0; 160],
        };
        // SAFETY: the stub writes the struct, which lives through the call, and checks its size.
        let rc = unsafe { f(&mut raw) };
        if rc != 0 {
            return None;
        }
        let text = CStr::from_bytes_until_nul(&raw.last_invalid)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Some(EmulatorStats {
            device_allocs: raw.device_allocs,
            device_bytes: raw.device_bytes,
            host_allocs: raw.host_allocs,
            host_bytes: raw.host_bytes,
            registrations: raw.registrations,
            streams: raw.streams,
            events: raw.events,
            modules: raw.modules,
            context_refs: raw.context_refs,
            launches: raw.launches,
            unwiped_frees: raw.unwiped_frees,
            unwiped_host_frees: raw.unwiped_host_frees,
            unpinned_copies: raw.unpinned_copies,
            invalid_calls: raw.invalid_calls,
            nonzero_device: raw.nonzero_device,
            nonzero_host: raw.nonzero_host,
            last_invalid: text,
        })
    }
}
