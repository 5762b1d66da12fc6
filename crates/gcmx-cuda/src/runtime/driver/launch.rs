//! Launches: every kernel launch, checked against the sizes of the buffers it touches, and the
//! cooperative device-batch launch with its scratch.

use super::*;

impl Lane {
    /// Enqueue a kernel launch. Every buffer range is checked first ([`Launch::check`]) and every
    /// buffer is held until the lane waits.
    pub(crate) fn launch(&mut self, l: Launch<'_>) -> Result<(), Error> {
        let (name, grid, block) = l.check()?;
        let a = |at: At<'_>| at.mem.addr + at.off as u64;
        match l {
            Launch::Fused {
                data,
                len,
                key,
                nr,
                powers,
                ctr,
                partials,
                ..
            } => {
                let p = abi::GcmxGcmParams {
                    input: a(data),
                    output: a(data),
                    nbytes: len as u64,
                    powers: a(powers),
                    partials: a(partials),
                    key: a(key),
                    ctr: a(ctr),
                    nr,
                    _pad0: 0,
                };
                self.hold(&[data, key, powers, ctr, partials])?;
                self.launch_struct(name, grid, block, &p)
            }
            Launch::ExpandKeys { raw, out, nkeys } => {
                let p = abi::GcmxExpandParams {
                    raw: a(raw),
                    out: a(out),
                    nkeys,
                    _pad0: 0,
                };
                self.hold(&[raw, out])?;
                self.launch_struct(name, grid, block, &p)
            }
            Launch::KeyPowers {
                keys,
                key_powers,
                nkeys,
            } => {
                let p = abi::GcmxKeyPowersParams {
                    keys: a(keys),
                    key_powers: a(key_powers),
                    nkeys,
                    _pad0: 0,
                };
                self.hold(&[keys, key_powers])?;
                self.launch_struct(name, grid, block, &p)
            }
            #[cfg(feature = "bench")]
            Launch::Ghash {
                data,
                len,
                powers,
                partials,
                ..
            } => {
                let p = abi::GcmxGhashParams {
                    data: a(data),
                    nbytes: len as u64,
                    powers: a(powers),
                    partials: a(partials),
                };
                self.hold(&[data, powers, partials])?;
                self.launch_struct(name, grid, block, &p)
            }
            #[cfg(feature = "bench")]
            Launch::BwRead { input, len, out } | Launch::BwCopy { input, len, out } => {
                let p = abi::GcmxBwParams {
                    input: a(input),
                    output: a(out),
                    nbytes: len as u64,
                };
                self.hold(&[input, out])?;
                self.launch_struct(name, grid, block, &p)
            }
            #[cfg(feature = "bench")]
            Launch::AesCtr {
                key,
                nr,
                j0,
                data,
                len,
                ..
            } => {
                let w = abi::le_words(&j0);
                let ctr0 = gcmx_core::backend::Counter::of_j0(&j0).initial();
                let (k, d, n) = (a(key), a(data), len as u64);
                let args: [*const c_void; 8] = [
                    (&k as *const u64).cast(),
                    (&nr as *const u32).cast(),
                    (&w[0] as *const u32).cast(),
                    (&w[1] as *const u32).cast(),
                    (&w[2] as *const u32).cast(),
                    (&ctr0 as *const u32).cast(),
                    (&d as *const u64).cast(),
                    (&n as *const u64).cast(),
                ];
                self.hold(&[key, data])?;
                // SAFETY: the argument list matches gcmx_aes_ctr(uint64_t key, uint32_t nr, u32, u32, u32,
                // u32, uint8_t* data, uint64_t nbytes) (cuda/aes_ctr.cu); the key and data ranges were checked
                // and are held until the lane waits; the driver copies the argument values at launch.
                unsafe { self.launch_args(name, grid, block, &args) }
            }
        }
    }

    /// Hold the buffers of a launch until the lane waits (all on this lane's device).
    pub(super) fn hold(&mut self, ats: &[At<'_>]) -> Result<(), Error> {
        for at in ats {
            self.same_device(at)?;
        }
        self.gpu.enter()?;
        for at in ats {
            at.mem.order(self.stream.0, true)?;
        }
        self.keep.extend(ats.iter().map(|at| at.mem.clone()));
        Ok(())
    }

    /// Queue a device-batch launch (cooperative) whose regions are all device buffers of this lane's
    /// device; they are held until the lane waits.
    pub(crate) fn launch_dbatch(&mut self, args: DbArgs<'_>) -> Result<(), Error> {
        let (p, name, grid, uses) = db_prepare(&self.gpu, &args)?;
        let ats: Vec<At<'_>> = uses.iter().map(|(m, _)| At::start(m)).collect();
        self.hold(&ats)?;
        self.busy = true;
        // SAFETY: `p` is the GcmxDbParams of `args`, built by `db_prepare` from ranges it checked; every
        // device buffer it names is held in `keep` until the lane waits (the slots and raw spans that
        // lanes never use are refused by db_prepare's caller contract: see `Region`).
        unsafe { launch_coop(&self.gpu, self.stream.0, name, grid, &p)? };
        args.scratch.advance(args.barriers(), grid);
        Ok(())
    }

    /// Launch kernel `name` with one by-value parameter struct.
    pub(super) fn launch_struct<P>(
        &mut self,
        name: &str,
        grid: u32,
        block: u32,
        p: &P,
    ) -> Result<(), Error> {
        let args = [(p as *const P).cast::<c_void>()];
        // SAFETY: only called from `launch`, with the `#[repr(C)]` mirror (layout checked against
        // gcmx_abi.h by the unit tests) or device address that kernel `name` takes, built from ranges
        // `Launch::check` validated, in buffers `hold` keeps alive until the lane waits.
        unsafe { self.launch_args(name, grid, block, &args) }
    }

    /// # Safety
    /// `args` must point to values of exactly kernel `name`'s parameter types, in order, and every
    /// device address among them must stay valid for the kernel's accesses until this lane waits.
    pub(super) unsafe fn launch_args(
        &mut self,
        name: &str,
        grid: u32,
        block: u32,
        args: &[*const c_void],
    ) -> Result<(), Error> {
        self.gpu.enter()?;
        let f = self.gpu.function(name)?;
        let args: Vec<*mut c_void> = args.iter().map(|p| p.cast_mut()).collect();
        self.busy = true;
        // SAFETY: forwarded from this function's contract; cuLaunchKernel copies the argument values at
        // launch time, so they need only live through this call.
        let r = unsafe {
            cu::cuLaunchKernel(
                f,
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                self.stream.0,
                args.as_ptr().cast_mut(),
                ptr::null_mut(),
            )
        };
        check(r, format!("launch {name}<<<{grid}, {block}>>>"))
    }
}

/// The address of a region of a device batch, checked: inside its buffer, on `gpu`, aligned to `align`.
pub(super) fn region_addr(
    gpu: &Arc<Gpu>,
    r: &Region<'_>,
    align: u64,
    what: &str,
) -> Result<u64, Error> {
    let addr = match *r {
        Region::Mem { at, len } => {
            if !Arc::ptr_eq(at.mem.gpu(), gpu) {
                return Err(Error::InvalidInput(format!(
                    "the {what} buffer belongs to another device"
                )));
            }
            at.mem.range(at.off, len, what)?
        }
        Region::Slot { slot, off, len } => {
            if off.checked_add(len).is_none_or(|e| e > slot.len) || !Arc::ptr_eq(&slot.gpu, gpu) {
                return Err(internal(format!(
                    "{what}: {len} bytes at {off} of a parameter slot"
                )));
            }
            slot.dev + off as u64
        }
        Region::Raw(RawDeviceSpan { addr, .. }) => addr,
    };
    if r.len() > 0 && !addr.is_multiple_of(align) {
        return Err(Error::InvalidInput(format!(
            "the {what} must start on a {align}-byte boundary"
        )));
    }
    Ok(addr)
}

/// What a device-batch launch needs: its parameter block, kernel, grid, and the device buffers it uses
/// (with whether it writes them).
type DbPrepared = (
    abi::GcmxDbParams,
    &'static str,
    u32,
    Vec<(Arc<DeviceMem>, bool)>,
);

pub(super) fn db_prepare(gpu: &Arc<Gpu>, a: &DbArgs<'_>) -> Result<DbPrepared, Error> {
    a.check()?;
    let name = a.kernel();
    let grid = a.grid.clamp(1, gpu.resident_blocks(name, abi::DB_THREADS)?);
    let scratch_len = abi::db_scratch_bytes(a.nmsgs, grid);
    if (a.scratch.len() as u64) < scratch_len {
        return Err(internal(format!(
            "device-batch scratch of {} bytes, {scratch_len} needed",
            a.scratch.len()
        )));
    }
    let regions = [a.msgs, a.data, a.aad, a.nonces, a.tags, a.verdicts];
    let names = ["message table", "data", "AAD", "nonce", "tag", "verdict"];
    let mut addr = [0u64; 6];
    for i in 0..6 {
        addr[i] = region_addr(gpu, &regions[i], DB_ALIGN[i], names[i])?;
    }
    for at in [a.keys, a.key_powers, At::start(&a.scratch.mem)] {
        if !Arc::ptr_eq(at.mem.gpu(), gpu) {
            return Err(Error::InvalidInput(
                "keys and buffers of different devices".into(),
            ));
        }
    }
    let p = abi::GcmxDbParams {
        msgs: addr[0],
        data: addr[1],
        data_len: a.data.len() as u64,
        aad: addr[2],
        aad_len: a.aad.len() as u64,
        nonces: addr[3],
        nonces_len: a.nonces.len() as u64,
        tags: addr[4],
        verdicts: addr[5],
        keys: a.keys.mem.addr + a.keys.off as u64,
        key_powers: a.key_powers.mem.addr + a.key_powers.off as u64,
        scratch: a.scratch.mem.addr,
        nmsgs: a.nmsgs,
        nkeys: a.nkeys,
        nr: a.nr,
        mode: a.mode,
        tag_len: a.tag_len,
        flags: a.flags,
        bar_base: a.scratch.bar,
        _pad0: 0,
    };
    // Device buffers it uses: (msgs, data, aad, nonces) read / written, tags and verdicts written (tags
    // are read when opening: counted as written, which orders more, never less), keys read, scratch written.
    let writes = [false, true, false, false, true, true];
    let mut uses: Vec<(Arc<DeviceMem>, bool)> = Vec::new();
    for (r, w) in regions.iter().zip(writes) {
        if let Region::Mem { at, .. } = r {
            uses.push((at.mem.clone(), w));
        }
    }
    uses.push((a.keys.mem.clone(), false));
    uses.push((a.key_powers.mem.clone(), false));
    uses.push((a.scratch.mem.clone(), true));
    Ok((p, name, grid, uses))
}

/// Launch cooperative kernel `name` with one parameter struct on `stream`.
///
/// # Safety
/// `p` must be kernel `name`'s parameter struct, and every address in it must stay valid for the
/// kernel's accesses until it has completed on `stream`.
pub(super) unsafe fn launch_coop<P>(
    gpu: &Arc<Gpu>,
    stream: cu::CUstream,
    name: &'static str,
    grid: u32,
    p: &P,
) -> Result<(), Error> {
    gpu.enter()?;
    let f = gpu.function(name)?;
    let mut args = [(p as *const P).cast_mut().cast::<c_void>()];
    // SAFETY: forwarded from this function's contract; the grid is at most the resident limit
    // (`Gpu::resident_blocks`), as cooperative launches require, and the driver copies the parameter
    // values at launch time.
    let r = unsafe {
        cu::cuLaunchCooperativeKernel(
            f,
            grid,
            1,
            1,
            abi::DB_THREADS,
            1,
            1,
            0,
            stream,
            args.as_mut_ptr(),
        )
    };
    check(r, "cuLaunchCooperativeKernel")
}

/// Queue a device-batch launch on a caller's stream, ordered after the queued work that uses the same
/// device buffers; returns the fence of the launch, which every buffer it uses (and `slot`) records.
/// Nothing waits: buffers stay valid because their owners' `Drop` and later uses wait for the fence.
pub(crate) fn queue_dbatch(
    stream: &Stream,
    args: DbArgs<'_>,
    slot: Option<&ParamSlot>,
) -> Result<Arc<Fence>, Error> {
    let gpu = stream.gpu().clone();
    let (p, name, grid, uses) = db_prepare(&gpu, &args)?;
    let s = stream.inner.raw;
    gpu.enter()?;
    for (m, w) in &uses {
        m.order(s, *w)?;
    }
    if let Some(sl) = slot
        && let Some(f) = lock(&sl.fence).as_ref()
    {
        // A slot is handed out only once its fence is complete; ordering again costs nothing.
        f.make_wait(s)?;
    }
    let mut fence = Fence::new(&gpu)?;
    if let Some(f) = Arc::get_mut(&mut fence) {
        f.stream = stream.inner.id;
    }
    // SAFETY: `p` comes from db_prepare (checked ranges). The device buffers are kept alive and unchanged
    // until the launch completes by the fence recorded below (DeviceMem::order / settle); the slot by its
    // fence (ParamSlot::drop and reuse wait); raw spans by RawDeviceSpan::new's contract.
    unsafe { launch_coop(&gpu, s, name, grid, &p)? };
    args.scratch.advance(args.barriers(), grid);
    if let Err(e) = fence.record(s) {
        // Without a fence nothing could tell when the launch is over: wait for it here (an error of the
        // wait is an error of that work, which has drained).
        // SAFETY: waits on the caller's valid stream.
        let r = unsafe { cu::cuStreamSynchronize(s) };
        let _ = check(r, "cuStreamSynchronize");
        return Err(e);
    }
    for (m, w) in &uses {
        m.note(&fence, *w);
    }
    if let Some(sl) = slot {
        sl.set_fence(&fence);
    }
    Ok(fence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_is_refused_unless_its_buffers_hold_what_it_touches() {
        let Some(g) = test_gpu() else { return };
        let raw = DeviceMem::zeroed(&g, abi::RAW_KEY_BYTES * 2).unwrap();
        let out = DeviceMem::zeroed(&g, abi::AES_KEY_BYTES * 2).unwrap();
        let mut lane = Lane::new(&g).unwrap();
        let too_many = Launch::ExpandKeys {
            raw: At::start(&raw),
            out: At::start(&out),
            nkeys: 3,
        };
        assert!(lane.launch(too_many).is_err(), "three keys in room for two");
        let fits = Launch::ExpandKeys {
            raw: At::start(&raw),
            out: At::start(&out),
            nkeys: 2,
        };
        lane.launch(fits).unwrap();
        lane.wait().unwrap();
        let other = DeviceMem::zeroed(&g, 16).unwrap();
        let misaligned = Launch::ExpandKeys {
            raw: At {
                mem: &other,
                off: 1,
            },
            out: At::start(&out),
            nkeys: 0,
        };
        assert!(lane.launch(misaligned).is_err(), "a misaligned address");
    }
}
