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
//! The test emulator's controls (a device emulated by the stub libcuda, its counters, releasing what
//! gcmx caches) are in the sibling module `emulator`, which sits above the driver: this module is
//! below it (every driver wrapper calls [`hit`]) and imports nothing of it.

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
    /// let engine = gcmx::cuda::CudaEngine::new(&[7u8; 16], 0)?;
    /// let mut buf = gcmx::cuda::DeviceBuf::from_host(&[1u8; 1000], 0)?;
    /// let mut tag = gcmx::cuda::DeviceBuf::new(16, 0)?;
    /// let job = gcmx::cuda::DeviceJob { key: 0, nonce: &[0u8; 12], aad: b"", data: &mut buf, tag: &mut tag };
    /// fault::arm(Op::Launch, 1, Mode::Once);
    /// let r = engine.seal_async(None, job).and_then(|p| p.wait());
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
}
