//! Devices: a started device's primary context, its loaded kernels, and the per-device pools.

use super::*;

/// A started device: its primary context, the gcmx kernels loaded there, and what was learned at load
/// time. Started devices stay for the life of the process; a failed start is not remembered, so a later
/// [`Gpu::get`] tries again.
pub(crate) struct Gpu {
    pub(super) info: DeviceInfo,
    /// Per-device state of the layers above (their buffer pools), by type.
    pub(super) states: Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
    /// Idle lanes for synchronous helper work.
    pub(super) pool: Mutex<Vec<Lane>>,
    /// Idle page-locked parameter slots of asynchronous calls.
    pub(super) slots: Mutex<Vec<ParamSlot>>,
    /// Idle device-batch scratch buffers.
    pub(super) scratches: Mutex<Vec<Scratch>>,
    /// Thread blocks of each cooperative kernel resident at once on the whole device.
    pub(super) resident: Mutex<Vec<(&'static str, u32)>>,
    // Field order is drop order: the module unloads before the context is released.
    pub(super) module: Module,
    pub(super) ctx: PrimaryContext,
}

impl core::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Gpu({})", self.info.ordinal)
    }
}

pub(super) static GPUS: Mutex<Vec<Arc<Gpu>>> = Mutex::new(Vec::new());

impl Gpu {
    /// Device `ordinal`, started on first use. `Error::BackendUnavailable` when there is no driver or
    /// device or the kernels do not load; `Error::InvalidInput` for an ordinal past the last device.
    pub(crate) fn get(ordinal: u32) -> Result<Arc<Gpu>, Error> {
        let mut started = lock(&GPUS);
        if let Some(g) = started.iter().find(|g| g.info.ordinal == ordinal) {
            g.enter()?;
            return Ok(g.clone());
        }
        let g = Arc::new(Gpu::start(ordinal)?);
        started.push(g.clone());
        Ok(g)
    }

    pub(super) fn start(ordinal: u32) -> Result<Gpu, Error> {
        let unavailable = |why: String| Error::BackendUnavailable(why);
        let n = Gpu::count()?;
        if n == 0 {
            return Err(unavailable("no CUDA device found".into()));
        }
        if ordinal >= n {
            return Err(Error::InvalidInput(format!(
                "CUDA device {ordinal} does not exist ({n} device(s))"
            )));
        }
        let mut dev: cu::CUdevice = 0;
        // SAFETY: the driver is initialised (`count`); writes one device handle.
        let r = unsafe { cu::cuDeviceGet(&mut dev, ordinal as i32) };
        check(r, format!("cuDeviceGet({ordinal})")).map_err(|e| unavailable(with_sources(&e)))?;
        let ctx = PrimaryContext::retain(dev).map_err(|e| {
            unavailable(format!(
                "primary context of device {ordinal}: {}",
                with_sources(&e)
            ))
        })?;
        ctx.enter().map_err(|e| unavailable(with_sources(&e)))?;
        let attr = |a: i32, what: &str| {
            let mut v = 0;
            // SAFETY: reads one attribute of a valid device handle into one int.
            let r = unsafe { cu::cuDeviceGetAttribute(&mut v, a, dev) };
            check(r, "cuDeviceGetAttribute")
                .map_err(|e| unavailable(format!("device attribute {what}: {}", with_sources(&e))))
                .map(|()| u32::try_from(v).unwrap_or(0))
        };
        let major = attr(
            cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            "compute capability",
        )?;
        let minor = attr(
            cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            "compute capability",
        )?;
        let sms = attr(
            cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "multiprocessors",
        )?;
        let mut raw_name = [0u8; 256];
        // SAFETY: writes at most `len` bytes, NUL-terminated, into the buffer.
        let r = unsafe { cu::cuDeviceGetName(raw_name.as_mut_ptr().cast(), 256, dev) };
        check(r, "cuDeviceGetName").map_err(|e| unavailable(with_sources(&e)))?;
        let name = std::ffi::CStr::from_bytes_until_nul(&raw_name)
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut total_memory = 0usize;
        // SAFETY: writes one size_t.
        let r = unsafe { cu::cuDeviceTotalMem_v2(&mut total_memory, dev) };
        check(r, "cuDeviceTotalMem").map_err(|e| unavailable(with_sources(&e)))?;
        let mut version = 0;
        // SAFETY: writes one int.
        let r = unsafe { cu::cuDriverGetVersion(&mut version) };
        check(r, "cuDriverGetVersion").map_err(|e| unavailable(with_sources(&e)))?;
        let module = Module::load(kernels::FATBIN).map_err(|e| {
            unavailable(format!(
                "the gcmx kernels do not load on {name} (sm_{major}{minor}): {} (the fatbin holds sm_80..sm_120 and PTX 12.0)",
                with_sources(&e)
            ))
        })?;
        let words = abi_words(&module)
            .map_err(|e| unavailable(format!("ABI check: {}", with_sources(&e))))?;
        let expect = [
            abi::ABI_VERSION,
            words[1],
            abi::GHASH_THREADS,
            abi::GHASH_SPAN as u32,
            abi::FUSED_THREADS,
            abi::FUSED_SPAN as u32,
            abi::DB_UNIT_BLOCKS as u32,
            core::mem::size_of::<abi::GcmxGcmParams>() as u32,
        ];
        if words != expect {
            return Err(unavailable(format!(
                "kernel ABI mismatch: the kernels report {words:?}, this crate expects {expect:?}"
            )));
        }
        if kernels::HAVE_CLMAD != (words[1] == 1) {
            return Err(unavailable(format!(
                "the kernels report have_clmad = {} but their build record says {}",
                words[1],
                kernels::HAVE_CLMAD
            )));
        }
        Ok(Gpu {
            info: DeviceInfo {
                ordinal,
                name,
                compute_capability: (major, minor),
                arch: format!("sm_{major}{minor}"),
                multiprocessors: sms,
                total_memory,
                driver_version: (
                    u32::try_from(version / 1000).unwrap_or(0),
                    u32::try_from(version % 1000 / 10).unwrap_or(0),
                ),
                ghash_variant: if words[1] == 1 {
                    GhashVariant::Clmad
                } else {
                    GhashVariant::Soft
                },
                nvcc_version: kernels::NVCC_VERSION,
                abi_version: words[0],
            },
            states: Mutex::new(Vec::new()),
            pool: Mutex::new(Vec::new()),
            slots: Mutex::new(Vec::new()),
            scratches: Mutex::new(Vec::new()),
            resident: Mutex::new(Vec::new()),
            module,
            ctx,
        })
    }

    /// What was learned at load time.
    pub(crate) fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Devices the driver reports (`Error::BackendUnavailable` without a driver).
    pub(crate) fn count() -> Result<u32, Error> {
        cu::load().map_err(Error::BackendUnavailable)?;
        // SAFETY: initialises the loaded driver; no pointers.
        let r = unsafe { cu::cuInit(0) };
        check(r, "cuInit").map_err(|e| {
            Error::BackendUnavailable(format!("no CUDA driver or device: {}", with_sources(&e)))
        })?;
        let mut n = 0;
        // SAFETY: writes one int.
        let r = unsafe { cu::cuDeviceGetCount(&mut n) };
        check(r, "cuDeviceGetCount").map_err(|e| {
            Error::BackendUnavailable(format!("no CUDA device: {}", with_sources(&e)))
        })?;
        Ok(u32::try_from(n).unwrap_or(0))
    }

    /// A parameter slot of at least `len` bytes whose last use has completed (or a new one).
    pub(crate) fn take_slot(self: &Arc<Self>, len: usize) -> Result<ParamSlot, Error> {
        {
            let mut idle = lock(&self.slots);
            if let Some(i) = idle.iter().position(|s| s.len >= len && s.ready()) {
                return Ok(idle.swap_remove(i));
            }
        }
        ParamSlot::new(self, len.max(SLOT_MIN))
    }

    /// Return a slot to the pool (its fence, if any, says when it is free again).
    pub(crate) fn give_slot(&self, slot: ParamSlot) {
        let mut idle = lock(&self.slots);
        if idle.len() < SLOT_POOL_MAX {
            idle.push(slot);
        }
    }

    /// A device-batch scratch of at least `len` bytes (zeroed when new), for this caller alone until
    /// [`Gpu::give_scratch`]. Work queued on it later is ordered after earlier work by its fences.
    pub(crate) fn take_scratch(self: &Arc<Self>, len: usize) -> Result<Scratch, Error> {
        {
            let mut idle = lock(&self.scratches);
            let fits = |s: &Scratch| s.mem.len() >= len;
            // One whose queued work is done, so that launches on different streams run at once; else,
            // once there are enough, the smallest that fits (its work is ordered before ours).
            if let Some(i) = idle.iter().position(|s| fits(s) && s.mem.is_idle()) {
                return Ok(idle.swap_remove(i));
            }
            if idle.len() >= SCRATCH_POOL_MAX {
                let best = idle
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| fits(s))
                    .min_by_key(|(_, s)| s.mem.len())
                    .map(|(i, _)| i);
                if let Some(i) = best {
                    return Ok(idle.swap_remove(i));
                }
            }
        }
        Ok(Scratch {
            mem: DeviceMem::zeroed(self, len.max(SCRATCH_MIN))?,
            bar: 0,
        })
    }

    /// Return a scratch to the pool.
    pub(crate) fn give_scratch(&self, s: Scratch) {
        let mut idle = lock(&self.scratches);
        if idle.len() < 2 * SCRATCH_POOL_MAX {
            idle.push(s);
        }
    }

    /// Thread blocks of cooperative kernel `name` (blocks of `block` threads) that are resident at once.
    pub(crate) fn resident_blocks(&self, name: &'static str, block: u32) -> Result<u32, Error> {
        if let Some(&(_, n)) = lock(&self.resident).iter().find(|(k, _)| *k == name) {
            return Ok(n);
        }
        self.enter()?;
        let f = self.function(name)?;
        let mut per_sm: i32 = 0;
        // SAFETY: queries the occupancy of a loaded kernel; writes one int.
        let r = unsafe {
            cu::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut per_sm, f, block as i32, 0)
        };
        check(r, "cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
        let n = u32::try_from(per_sm).unwrap_or(0) * self.info.multiprocessors;
        if n == 0 {
            return Err(internal(format!("{name}: no thread block fits on an SM")));
        }
        lock(&self.resident).push((name, n));
        Ok(n)
    }

    /// Make this device's context current on the calling thread.
    pub(super) fn enter(&self) -> Result<(), Error> {
        self.ctx.enter()
    }

    /// The per-device value of type `T` (created on first use), shared by every caller on this device.
    pub(crate) fn state<T: Default + Send + 'static>(&self) -> Arc<Mutex<T>> {
        let mut states = lock(&self.states);
        for s in states.iter() {
            if let Ok(m) = s.clone().downcast::<Mutex<T>>() {
                return m;
            }
        }
        let m = Arc::new(Mutex::new(T::default()));
        states.push(m.clone());
        m
    }

    /// Run `f` on an idle lane of this device and wait for its work before returning.
    pub(crate) fn with_lane<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Lane) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let idle = lock(&self.pool).pop();
        let mut lane = match idle {
            Some(l) => l,
            None => Lane::new(self)?,
        };
        let r = f(&mut lane);
        let waited = lane.wait();
        // A lane whose work failed is not reused: dropping it waits and wipes its staging, which the
        // failed work may have left holding data.
        if r.is_ok() && waited.is_ok() {
            let mut pool = lock(&self.pool);
            if pool.len() < POOL_MAX {
                pool.push(lane);
            }
        }
        let r = r?;
        waited?;
        Ok(r)
    }

    /// Kernel `name` of the loaded module (the context must be current).
    pub(super) fn function(&self, name: &str) -> Result<cu::CUfunction, Error> {
        self.module.function(name)
    }
}

/// Drop what the layers above cache on every started device (their states, the idle parameter slots
/// and scratches, the occupancy answers) and its idle lanes, so that tests can count live allocations
/// and driver calls with none of it held (`crate::release_cached`).
pub(crate) fn release_cached() {
    let gpus: Vec<Arc<Gpu>> = lock(&GPUS).clone();
    for g in gpus {
        drop(std::mem::take(&mut *lock(&g.states)));
        drop(std::mem::take(&mut *lock(&g.slots)));
        drop(std::mem::take(&mut *lock(&g.scratches)));
        lock(&g.resident).clear();
        // Freeing the states' buffers borrows idle lanes to wipe them, which may put lanes back.
        loop {
            let idle = std::mem::take(&mut *lock(&g.pool));
            if idle.is_empty() {
                break;
            }
            drop(idle);
        }
    }
}

/// Launch `gcmx_abi_info` once and read its words (start-up, before the device is shared).
pub(super) fn abi_words(module: &Module) -> Result<[u32; abi::ABI_INFO_WORDS], Error> {
    const LEN: usize = abi::ABI_INFO_WORDS * 4;
    let mut addr: cu::CUdeviceptr = 0;
    // SAFETY: allocates LEN bytes in the current context; writes the address.
    let r = unsafe { cu::cuMemAlloc_v2(&mut addr, LEN) };
    check(r, "cuMemAlloc")?;
    /// Frees the probe's buffer on every path, zeroed first as every buffer gcmx frees is (it holds
    /// no secret, but the rule has no exceptions to audit).
    struct Probe(cu::CUdeviceptr);
    impl Drop for Probe {
        fn drop(&mut self) {
            // SAFETY: zeroes the whole allocation above, synchronously; no work on it is pending (the
            // stream that used it is declared after this guard, so it was synchronised or destroyed).
            let _ = unsafe { cu::cuMemsetD8_v2(self.0, 0, LEN) };
            // SAFETY: frees the allocation above once, after the synchronous memset.
            let _ = unsafe { cu::cuMemFree_v2(self.0) };
        }
    }
    let probe = Probe(addr);
    let stream = RawStream::new()?;
    let f = module.function("gcmx_abi_info")?;
    let mut arg = probe.0;
    let mut args = [(&mut arg as *mut u64).cast::<c_void>()];
    // SAFETY: gcmx_abi_info(uint64_t out) takes one device address and writes ABI_INFO_WORDS u32 there;
    // the buffer holds that many and outlives the synchronisation below; the driver copies the argument.
    let r = unsafe {
        cu::cuLaunchKernel(
            f,
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            stream.0,
            args.as_mut_ptr(),
            ptr::null_mut(),
        )
    };
    check(r, "launch gcmx_abi_info")?;
    stream.synchronize("gcmx_abi_info")?;
    let mut words = [0u32; abi::ABI_INFO_WORDS];
    // SAFETY: a synchronous copy of LEN bytes from the probe buffer (LEN bytes, its kernel done: the
    // stream was synchronised above) into `words` (LEN bytes); pageable memory is allowed for it.
    let r = unsafe { cu::cuMemcpyDtoH_v2(words.as_mut_ptr().cast(), probe.0, LEN) };
    check(r, "cuMemcpyDtoH")?;
    Ok(words)
}

/// A device's primary context, retained for as long as this value lives.
pub(super) struct PrimaryContext {
    pub(super) dev: cu::CUdevice,
    pub(super) raw: cu::CUcontext,
}

// SAFETY: a context handle may be made current on any thread (the driver API is thread-safe); the
// value releases its retain once, in Drop.
unsafe impl Send for PrimaryContext {}
// SAFETY: as above; `enter` only passes the handle to the driver.
unsafe impl Sync for PrimaryContext {}

impl PrimaryContext {
    pub(super) fn retain(dev: cu::CUdevice) -> Result<PrimaryContext, Error> {
        let mut raw: cu::CUcontext = ptr::null_mut();
        // SAFETY: retains the primary context of a valid device handle; writes the handle.
        let r = unsafe { cu::cuDevicePrimaryCtxRetain(&mut raw, dev) };
        check(r, "cuDevicePrimaryCtxRetain")?;
        Ok(PrimaryContext { dev, raw })
    }

    /// Make the context current on the calling thread.
    pub(super) fn enter(&self) -> Result<(), Error> {
        // SAFETY: the handle is retained for as long as `self` lives.
        let r = unsafe { cu::cuCtxSetCurrent(self.raw) };
        check(r, "cuCtxSetCurrent")
    }
}

impl Drop for PrimaryContext {
    fn drop(&mut self) {
        // SAFETY: releases the one retain taken in `retain`.
        let _ = unsafe { cu::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

/// The gcmx kernels loaded into a context (unloaded on drop, while that context is still retained).
pub(super) struct Module(pub(super) cu::CUmodule);

// SAFETY: a module handle may be used from any thread; it is unloaded once, in Drop.
unsafe impl Send for Module {}
// SAFETY: as above; lookups only pass the handle to the driver.
unsafe impl Sync for Module {}

impl Module {
    /// Load a fatbin into the current context.
    pub(super) fn load(image: &'static [u8]) -> Result<Module, Error> {
        let mut raw: cu::CUmodule = ptr::null_mut();
        // SAFETY: `image` is a complete fatbin (built by nvcc, checked against its build record by
        // build.rs), static, and only read by the call; writes the module handle.
        let r = unsafe { cu::cuModuleLoadData(&mut raw, image.as_ptr().cast()) };
        check(r, "cuModuleLoadData")?;
        Ok(Module(raw))
    }

    /// Kernel `name` (valid while the module is loaded, which is for the life of its `Gpu`).
    pub(super) fn function(&self, name: &str) -> Result<cu::CUfunction, Error> {
        let c =
            std::ffi::CString::new(name).map_err(|_| internal(format!("kernel name {name:?}")))?;
        let mut f: cu::CUfunction = ptr::null_mut();
        // SAFETY: looks up a NUL-terminated name in a loaded module; writes one handle.
        let r = unsafe { cu::cuModuleGetFunction(&mut f, self.0, c.as_ptr()) };
        check(r, format!("kernel {name}"))?;
        Ok(f)
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: unloads the module loaded in `load`, once; `Gpu` drops it before its context.
        let _ = unsafe { cu::cuModuleUnload(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_starts_once_and_ordinals_past_the_last_are_refused() {
        let Some(g) = test_gpu() else { return };
        let again = Gpu::get(0).unwrap();
        assert!(Arc::ptr_eq(&g, &again), "a started device is kept");
        assert_eq!(g.info().abi_version, abi::ABI_VERSION);
        assert!(g.info().compute_capability.0 >= 8);
        let n = Gpu::count().unwrap();
        assert!(matches!(Gpu::get(n), Err(Error::InvalidInput(_))));
    }

    #[test]
    fn per_device_state_is_one_value_per_type() {
        let Some(g) = test_gpu() else { return };
        let a = g.state::<Vec<u8>>();
        let b = g.state::<Vec<u8>>();
        assert!(Arc::ptr_eq(&a, &b));
        let c = g.state::<Vec<u16>>();
        assert_eq!(lock(&c).len(), 0);
    }

    #[test]
    fn cooperative_kernels_report_their_resident_blocks() {
        let Some(g) = test_gpu() else { return };
        let n = g
            .resident_blocks("gcmx_dbatch_seal1", abi::DB_THREADS)
            .unwrap();
        assert!(n >= g.info().multiprocessors, "at least one block per SM");
        assert_eq!(
            g.resident_blocks("gcmx_dbatch_seal1", abi::DB_THREADS)
                .unwrap(),
            n
        );
    }
}
