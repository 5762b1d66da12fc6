//! The runtime: the one layer that talks to the CUDA driver, and the only module with `unsafe`.
//!
//! It owns every driver call (through `sys`, the driver API loaded from `libcuda.so.1` on first use):
//! the device's primary context and
//! the loaded kernels ([`Gpu`]), device memory that is wiped before it is freed ([`DeviceMem`]),
//! page-locked staging memory, streams with the buffers their queued work uses ([`Lane`]), kernel
//! launches checked against the sizes of the buffers they touch ([`Launch`]), page-locking of caller
//! memory for one call ([`direct_io`]), for a scope ([`pin_scope`]) or for the life of an owned buffer
//! ([`HostPin`]), and (feature `bench`) events.
//!
//! Everything it offers the layers above is safe, and sound without care from them:
//! * Asynchronous work only ever touches memory that the queuing [`Lane`] keeps alive until it has
//!   waited for that work: device buffers are shared (`Arc<DeviceMem>`) and a lane holds a clone of every
//!   buffer its pending work uses; page-locked host memory belongs to the lane, and the host reaches it
//!   only through [`Lane::host`], which waits first. A lane that is dropped waits; one that is leaked
//!   leaks its buffers too, so nothing is ever freed under a transfer.
//! * Caller memory is transferred only inside [`direct_io`], which borrows it for the call and waits for
//!   every lane before it returns (also when the closure fails or panics).
//! * Host memory is DMA'd in place only while it is page-locked by the call itself or by a live
//!   [`pin_scope`], whose registration ends when the scope does (leaking cannot skip that), or by a
//!   [`HostPin`], which owns its memory (a leaked one leaks the memory with the registration).
//! * Device addresses never leave this module.
//!
//! One implementation for every build: `sys` loads the driver API at run time (feature `cuda`; without
//! it, it answers that this build has no CUDA backend, so [`Gpu::get`] reports
//! `Error::BackendUnavailable` and nothing else can be reached), and `driver` is compiled and checked
//! by the compiler either way. Tests inject driver failures below this module, in the stub libcuda
//! (`stub/libcuda_stub.c`, driven by the dev-only crate gcmx-cuda-testkit): nothing here is for them.

use std::sync::Arc;

use gcmx_core::backend::{DeviceError, Direction, Error};

mod driver;
mod sys;

#[cfg(feature = "bench")]
pub(crate) use driver::Event;
pub(crate) use driver::{
    DeviceMem, DirectIo, Fence, Gpu, HostPin, Lane, ParamSlot, Scratch, UserStream, direct_io,
    direct_io_spans, is_pinned, pin_scope, queue_dbatch, release_cached,
};

use crate::abi;
use crate::plan;

/// Which GHASH multiply the loaded kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GhashVariant {
    /// The PTX `clmad` carry-less multiply-accumulate (kernels built by nvcc 13.3 or newer).
    Clmad,
    /// The software carry-less multiply (kernels built by an older nvcc).
    Soft,
}

impl core::fmt::Display for GhashVariant {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            GhashVariant::Clmad => "clmad",
            GhashVariant::Soft => "soft",
        })
    }
}

/// What [`crate::device_info`] reports about a device and the kernels loaded on it.
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// if let Ok(info) = gcmx::cuda::device_info(0) {
///     println!("{info}");
///     assert!(info.compute_capability.0 >= 8);
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: u32,
    /// Device name as the driver reports it.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    /// The SASS target that runs, e.g. `sm_90`.
    pub arch: String,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub total_memory: usize,
    /// CUDA version the driver supports (major, minor).
    pub driver_version: (u32, u32),
    /// GHASH variant of the loaded kernels (reported by the kernels themselves).
    pub ghash_variant: GhashVariant,
    /// Release of the nvcc that built the kernels.
    pub nvcc_version: &'static str,
    /// ABI version of the kernels.
    pub abi_version: u32,
}

impl core::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "device {}: {} ({}, {} SMs, {:.1} GiB), driver CUDA {}.{}, GHASH {}, kernels built by nvcc {}, ABI {}",
            self.ordinal,
            self.name,
            self.arch,
            self.multiprocessors,
            self.total_memory as f64 / (1u64 << 30) as f64,
            self.driver_version.0,
            self.driver_version.1,
            self.ghash_variant,
            self.nvcc_version,
            self.abi_version
        )
    }
}

/// A CUDA stream of one device, on which gcmx's asynchronous calls queue their work.
///
/// Made by gcmx ([`Stream::new`]; destroyed when dropped, after its work) or
/// borrowed from another CUDA library ([`Stream::from_raw`]; never destroyed by gcmx). Its raw handle
/// ([`Stream::as_raw`]) lets other libraries queue their work on the same stream, in order with gcmx's.
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// let stream = gcmx::cuda::Stream::new(0)?;
/// let raw = stream.as_raw(); // a CUstream / cudaStream_t for cudarc, PyTorch, ...
/// stream.synchronize()?;
/// # let _ = raw;
/// # Ok::<(), gcmx::cuda::Error>(())
/// ```
///
/// A `Stream` is neither `Clone` nor `Copy` (an owned one is destroyed once):
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// let s = gcmx::cuda::Stream::new(0).unwrap();
/// let t = s.clone();
/// ```
pub struct Stream {
    pub(crate) inner: UserStream,
}

impl core::fmt::Debug for Stream {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Stream {{ device {} }}", self.device())
    }
}

/// Caller buffers that lie back to back in memory: buffers `first..first + count` of a batch, `len`
/// bytes in all from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) first: usize,
    pub(crate) count: usize,
    pub(crate) len: usize,
    pub(crate) start: *mut u8,
}

/// Add buffer `i` of a batch to `spans`, the maximal runs of buffers each starting where the previous
/// one ends (buffers are added in order of their index). Empty buffers never start a span (a run may
/// take them in when they start at its end).
pub(crate) fn extend_spans(spans: &mut Vec<Span>, i: usize, buf: &mut [u8]) {
    let start = buf.as_mut_ptr();
    match spans.last_mut() {
        Some(sp)
            if sp.first + sp.count == i
                && (sp.start as usize).wrapping_add(sp.len) == start as usize =>
        {
            sp.count += 1;
            sp.len += buf.len();
        }
        _ if buf.is_empty() => {}
        _ => spans.push(Span {
            first: i,
            count: 1,
            len: buf.len(),
            start,
        }),
    }
}

/// A place in a device buffer: the buffer and a byte offset.
#[derive(Clone, Copy, Debug)]
pub(crate) struct At<'a> {
    pub(crate) mem: &'a Arc<DeviceMem>,
    pub(crate) off: usize,
}

impl<'a> At<'a> {
    /// The start of `mem`.
    pub(crate) fn start(mem: &'a Arc<DeviceMem>) -> Self {
        At { mem, off: 0 }
    }

    /// `len` bytes from here lie inside the buffer and start on an `align`-byte boundary.
    fn check(&self, len: usize, align: usize, what: &str) -> Result<(), Error> {
        let end = self.off.checked_add(len);
        if end.is_none_or(|e| e > self.mem.len()) || !self.off.is_multiple_of(align) {
            return Err(internal(format!(
                "{what}: {len} bytes at offset {} of a {}-byte device buffer (alignment {align})",
                self.off,
                self.mem.len()
            )));
        }
        Ok(())
    }
}

/// Device memory a device-batch kernel reads or writes.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) enum Region<'a> {
    /// `len` bytes of a device buffer from `at`.
    Mem { at: At<'a>, len: usize },
    /// `len` bytes of a page-locked parameter slot from `off` (the device addresses it directly).
    Slot {
        slot: &'a ParamSlot,
        off: usize,
        len: usize,
    },
    /// Caller memory by address.
    Raw(RawDeviceSpan),
}

impl Region<'_> {
    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        match *self {
            Region::Mem { len, .. } | Region::Slot { len, .. } => len,
            Region::Raw(s) => s.len,
        }
    }

    /// The whole of a device buffer.
    pub(crate) fn whole(mem: &Arc<DeviceMem>) -> Region<'_> {
        Region::Mem {
            at: At::start(mem),
            len: mem.len(),
        }
    }
}

/// A range of device memory given by its address: memory that another CUDA library (the CUDA runtime,
/// cudarc, PyTorch, ...) allocated in the primary context of a device, for gcmx's device-resident
/// calls (a [`crate::DeviceMemory`], as a [`crate::DeviceBuf`] is).
///
/// Making one is `unsafe`: gcmx cannot check an address, its length, its lifetime or who else uses it.
///
/// ```no_run
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// # fn from_other_library() -> (u64, usize) { (0, 0) }
/// let (addr, len) = from_other_library(); // e.g. cudarc's `DevicePtr::device_ptr`, torch's `data_ptr()`
/// // SAFETY: `addr` is device memory of device 0's primary context, `len` bytes, 16-byte aligned; it
/// // stays allocated and untouched by other work until every gcmx call given this span has completed
/// // on its stream.
/// let mut span = unsafe { gcmx::cuda::RawDeviceSpan::new(addr, len) };
/// let data: &mut dyn gcmx::cuda::DeviceMemory = &mut span; // for a DeviceJob or DeviceBatch
/// # let _ = data;
/// ```
///
/// Without `unsafe` there is no span:
///
/// ```compile_fail
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// let span = gcmx::cuda::RawDeviceSpan::new(0x7f00_0000_0000, 4096);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawDeviceSpan {
    addr: u64,
    len: usize,
}

impl RawDeviceSpan {
    /// The `len` bytes at device address `addr`.
    ///
    /// # Safety
    ///
    /// For every gcmx call this span (or a copy of it) is given to, until the work that call queues has
    /// completed on the call's stream:
    /// * `addr..addr + len` is memory that kernels of the call's device can read and write (device memory
    ///   allocated in that device's primary context, e.g. by `cudaMalloc` or cudarc, or page-locked host
    ///   memory mapped for that device), allocated and not freed;
    /// * no other work (host code, kernels or copies on any stream) reads or writes it, except work
    ///   ordered before the call on its stream;
    /// * it does not overlap any other memory given to the same call that the call writes.
    ///
    /// Alignment is checked by the calls (data and tags 16 bytes, message tables 8 bytes).
    pub unsafe fn new(addr: u64, len: usize) -> RawDeviceSpan {
        RawDeviceSpan { addr, len }
    }
}

/// One device-batch launch (`gcm_dbatch.cu`): the caller's regions, the keys, the plan's scratch.
#[derive(Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct DbArgs<'a> {
    pub(crate) msgs: Region<'a>,
    pub(crate) nmsgs: u32,
    pub(crate) data: Region<'a>,
    pub(crate) aad: Region<'a>,
    pub(crate) nonces: Region<'a>,
    pub(crate) tags: Region<'a>,
    pub(crate) verdicts: Region<'a>,
    pub(crate) keys: At<'a>,
    pub(crate) key_powers: At<'a>,
    pub(crate) nkeys: u32,
    /// Rounds of key 0 (used by the one-key kernels).
    pub(crate) nr: u32,
    pub(crate) mode: u32,
    pub(crate) tag_len: u32,
    pub(crate) flags: u32,
    /// Thread blocks wanted (clamped to what is resident at once).
    pub(crate) grid: u32,
    pub(crate) scratch: &'a mut Scratch,
}

impl DbArgs<'_> {
    /// Check what the kernel relies on without checking: table, tags and verdicts sized for the count,
    /// alignment of the table, data, AAD and tags, the keys, the mode. The kernel checks each descriptor.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let n = self.nmsgs as usize;
        let bad = |what: &str| Err(Error::InvalidInput(what.to_string()));
        if self.nmsgs >= 1 << 31 {
            return bad("a device batch holds fewer than 2^31 messages");
        }
        if self.msgs.len() < abi::DEV_MSG_BYTES * n {
            return bad("the message table is shorter than 48 bytes per message");
        }
        if self.tags.len() < 16 * n {
            return bad("the tag buffer is shorter than 16 bytes per message");
        }
        if self.verdicts.len() < n {
            return bad("the verdict buffer is shorter than one byte per message");
        }
        if !matches!(self.mode, abi::DB_SEAL | abi::DB_OPEN | abi::DB_EXPECT) {
            return Err(internal(format!("device batch mode {}", self.mode)));
        }
        if self.mode == abi::DB_OPEN && !(1..=16).contains(&self.tag_len) {
            return Err(internal(format!("tag length {}", self.tag_len)));
        }
        check_rounds(self.nr)?;
        if self.nkeys == 0 {
            return Err(internal("a device batch without keys".into()));
        }
        let nk = self.nkeys as usize;
        self.keys
            .check(abi::AES_KEY_BYTES * nk, 4, "device batch keys")?;
        self.key_powers
            .check(abi::KEY_POWERS_BYTES * nk, 16, "device batch key powers")?;
        Ok(())
    }

    /// The grid barriers a launch of [`Self::kernel`] counts on the scratch (the seal kernels have no
    /// P5, hence no fifth barrier).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn barriers(&self) -> u32 {
        if self.mode == abi::DB_SEAL {
            abi::DB_BARRIERS_SEAL
        } else {
            abi::DB_BARRIERS_OPEN
        }
    }

    /// The kernel for these arguments.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn kernel(&self) -> &'static str {
        match (self.nkeys == 1, self.mode == abi::DB_SEAL) {
            (true, true) => "gcmx_dbatch_seal1",
            (true, false) => "gcmx_dbatch_open1",
            (false, true) => "gcmx_dbatch_sealn",
            (false, false) => "gcmx_dbatch_openn",
        }
    }
}

/// Required address alignment of each region of a device batch: (table, data, AAD, nonces, tags, verdicts).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) const DB_ALIGN: [u64; 6] = [8, 16, 16, 1, 16, 1];

/// One kernel launch, with the device buffers it reads and writes. [`Lane::launch`] checks every
/// range against its buffer before the launch and keeps the buffers alive until the lane waits.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Launch<'a> {
    /// `gcmx_gcm_encrypt` / `gcmx_gcm_decrypt` over `len` bytes at `data`, in place.
    Fused {
        dir: Direction,
        data: At<'a>,
        len: usize,
        key: At<'a>,
        nr: u32,
        powers: At<'a>,
        ctr: At<'a>,
        partials: At<'a>,
    },
    /// `gcmx_aes_expand_keys`: `nkeys` raw keys at `raw` to expanded keys at `out`.
    ExpandKeys {
        raw: At<'a>,
        out: At<'a>,
        nkeys: u32,
    },
    /// `gcmx_key_powers`.
    KeyPowers {
        keys: At<'a>,
        key_powers: At<'a>,
        nkeys: u32,
    },
    /// `gcmx_ghash_clmad` / `gcmx_ghash_soft` over `len` bytes at `data`.
    #[cfg(feature = "bench")]
    Ghash {
        clmad: bool,
        data: At<'a>,
        len: usize,
        powers: At<'a>,
        partials: At<'a>,
    },
    /// `gcmx_bw_read` (XOR-fold of `len` bytes, one block per thread block to `out`).
    #[cfg(feature = "bench")]
    BwRead {
        input: At<'a>,
        len: usize,
        out: At<'a>,
    },
    /// `gcmx_bw_copy` (`len` bytes from `input` to `out`).
    #[cfg(feature = "bench")]
    BwCopy {
        input: At<'a>,
        len: usize,
        out: At<'a>,
    },
    /// `gcmx_aes_ctr` (keystream only) over `len` bytes at `data`, `grid` thread blocks.
    #[cfg(feature = "bench")]
    AesCtr {
        key: At<'a>,
        nr: u32,
        j0: [u8; 16],
        data: At<'a>,
        len: usize,
        grid: u32,
    },
}

/// Threads per block of `gcmx_aes_ctr` (`GCMX_AES_CTR_THREADS` in cuda/aes_ctr.cu).
#[cfg(feature = "bench")]
pub(crate) const AES_CTR_THREADS: u32 = 128;

fn check_rounds(nr: u32) -> Result<(), Error> {
    if matches!(nr, 10 | 12 | 14) {
        Ok(())
    } else {
        Err(internal(format!("{nr} AES rounds")))
    }
}

fn grid_u32(grid: u64, what: &str) -> Result<u32, Error> {
    u32::try_from(grid).map_err(|_| internal(format!("{what}: grid of {grid} blocks")))
}

impl Launch<'_> {
    /// Check every buffer range of the launch; the kernel's name, grid and block size.
    pub(crate) fn check(&self) -> Result<(&'static str, u32, u32), Error> {
        const U128: usize = 16;
        match *self {
            Launch::Fused {
                dir,
                data,
                len,
                key,
                nr,
                powers,
                ctr,
                partials,
            } => {
                check_rounds(nr)?;
                let grid = grid_u32(plan::grid_for(plan::blocks(len), abi::FUSED_SPAN), "fused")?;
                data.check(len, 16, "fused data")?;
                key.check(abi::AES_KEY_BYTES, 4, "fused key")?;
                powers.check(U128 * abi::FUSED_POW_COUNT as usize, 16, "fused powers")?;
                ctr.check(abi::GCM_CTR_BYTES, 16, "fused counter block")?;
                partials.check(U128 * grid as usize, 16, "fused partials")?;
                let name = match dir {
                    Direction::Seal => "gcmx_gcm_encrypt",
                    Direction::Open => "gcmx_gcm_decrypt",
                };
                Ok((name, grid, abi::FUSED_THREADS))
            }
            Launch::ExpandKeys { raw, out, nkeys } => {
                let n = nkeys as usize;
                raw.check(abi::RAW_KEY_BYTES * n, 4, "raw keys")?;
                out.check(abi::AES_KEY_BYTES * n, 4, "expanded keys")?;
                Ok((
                    "gcmx_aes_expand_keys",
                    nkeys.div_ceil(abi::EXPAND_THREADS).max(1),
                    abi::EXPAND_THREADS,
                ))
            }
            Launch::KeyPowers {
                keys,
                key_powers,
                nkeys,
            } => {
                let n = nkeys as usize;
                keys.check(abi::AES_KEY_BYTES * n, 4, "keys")?;
                key_powers.check(abi::KEY_POWERS_BYTES * n, 16, "key powers")?;
                Ok((
                    "gcmx_key_powers",
                    nkeys.div_ceil(abi::KEY_POWERS_THREADS).max(1),
                    abi::KEY_POWERS_THREADS,
                ))
            }
            #[cfg(feature = "bench")]
            Launch::Ghash {
                clmad,
                data,
                len,
                powers,
                partials,
            } => {
                let grid = grid_u32(plan::grid_for(plan::blocks(len), abi::GHASH_SPAN), "ghash")?;
                data.check(len, 16, "ghash data")?;
                powers.check(U128 * abi::GHASH_POW_COUNT as usize, 16, "ghash powers")?;
                partials.check(U128 * grid as usize, 16, "ghash partials")?;
                let name = if clmad {
                    "gcmx_ghash_clmad"
                } else {
                    "gcmx_ghash_soft"
                };
                Ok((name, grid, abi::GHASH_THREADS))
            }
            #[cfg(feature = "bench")]
            Launch::BwRead { input, len, out } => {
                let grid = grid_u32(
                    plan::grid_for(plan::blocks(len), abi::GHASH_SPAN),
                    "bw_read",
                )?;
                if !len.is_multiple_of(16) {
                    return Err(internal("bw_read: length not a multiple of 16".into()));
                }
                input.check(len, 16, "bw_read input")?;
                out.check(U128 * grid as usize, 16, "bw_read output")?;
                Ok(("gcmx_bw_read", grid, abi::GHASH_THREADS))
            }
            #[cfg(feature = "bench")]
            Launch::BwCopy { input, len, out } => {
                let grid = grid_u32(
                    plan::grid_for(plan::blocks(len), abi::BW_COPY_SPAN),
                    "bw_copy",
                )?;
                if !len.is_multiple_of(16) {
                    return Err(internal("bw_copy: length not a multiple of 16".into()));
                }
                input.check(len, 16, "bw_copy input")?;
                out.check(len, 16, "bw_copy output")?;
                Ok(("gcmx_bw_copy", grid, abi::BW_THREADS))
            }
            #[cfg(feature = "bench")]
            Launch::AesCtr {
                key,
                nr,
                data,
                len,
                grid,
                ..
            } => {
                check_rounds(nr)?;
                key.check(abi::AES_KEY_BYTES, 4, "aes_ctr key")?;
                data.check(len, 16, "aes_ctr data")?;
                Ok(("gcmx_aes_ctr", grid.max(1), AES_CTR_THREADS))
            }
        }
    }
}

/// Whether [start, start + len) lies inside one of `regions` (start, length).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn region_covers(regions: &[(usize, usize)], start: usize, len: usize) -> bool {
    regions.iter().any(|&(s, l)| {
        start >= s
            && start
                .checked_add(len)
                .is_some_and(|e| s.checked_add(l).is_some_and(|re| e <= re))
    })
}

/// An error that means a bug in gcmx, not in the caller's input or the device.
pub(crate) fn internal(what: String) -> Error {
    Error::Device(DeviceError::new(format!("internal: {what}")))
}

#[cfg(test)]
mod tests {
    use super::{Span, extend_spans, region_covers};

    #[test]
    #[allow(clippy::useless_vec)] // two heap allocations, so that they are not neighbours by chance
    fn spans_follow_adjacency() {
        let mut a = vec![0u8; 100];
        let mut b = vec![0u8; 10];
        let a_start = a.as_mut_ptr();
        let (a0, rest) = a.split_at_mut(30);
        let (a1, a2) = rest.split_at_mut(30);
        let (empty, a2) = a2.split_at_mut(0);
        let mut bufs: Vec<&mut [u8]> = vec![a0, a1, empty, &mut b, a2];
        let mut sp = Vec::new();
        for (i, b) in bufs.iter_mut().enumerate() {
            extend_spans(&mut sp, i, b);
        }
        assert_eq!(
            sp[0],
            Span {
                first: 0,
                count: 3,
                len: 60,
                start: a_start,
            }
        );
        assert_eq!((sp[1].first, sp[1].count, sp[1].len), (3, 1, 10));
        assert_eq!((sp[2].first, sp[2].count, sp[2].len), (4, 1, 40));
        assert_eq!(sp.len(), 3);
        // An empty buffer that does not start where a run ends starts nothing.
        let mut lone: [u8; 0] = [];
        let mut none = Vec::new();
        extend_spans(&mut none, 0, &mut lone);
        assert!(none.is_empty());
    }

    #[test]
    fn pinned_region_coverage() {
        let r = [(1000usize, 100usize), (5000, 10)];
        assert!(region_covers(&r, 1000, 100));
        assert!(region_covers(&r, 1050, 50));
        assert!(!region_covers(&r, 1050, 51));
        assert!(!region_covers(&r, 999, 10));
        assert!(region_covers(&r, 5000, 10));
        assert!(!region_covers(&r, 1090, 4000));
        assert!(!region_covers(&r, usize::MAX, 2));
        assert!(!region_covers(&[(usize::MAX - 1, 5)], usize::MAX - 1, 1));
        assert!(!region_covers(&[], 0, 0));
    }
}
