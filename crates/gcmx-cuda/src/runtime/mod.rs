//! The runtime: the one layer that talks to the CUDA driver, and the only module with `unsafe`.
//!
//! It owns every driver call (through `cust` and its raw bindings): the device's primary context and
//! the loaded kernels ([`Gpu`]), device memory that is wiped before it is freed ([`DeviceMem`]),
//! page-locked staging memory, streams with the buffers their queued work uses ([`Lane`]), kernel
//! launches checked against the sizes of the buffers they touch ([`Launch`]), page-locking of caller
//! memory for one call ([`direct_io`]) or for a scope ([`pin_scope`]), and (feature `bench`) events.
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
//!   [`pin_scope`], whose registration ends when the scope does (leaking cannot skip that).
//! * Device addresses never leave this module.
//!
//! Two implementations share this interface: `driver` (feature `cuda`: the real one) and `absent`
//! (without it: [`Gpu::get`] reports `Error::BackendUnavailable`, and nothing else can be reached).
//! The layers above compile unchanged against either. `fault` (feature `fault-injection`, for tests)
//! makes chosen driver calls fail: every driver wrapper calls its hook once per driver call.

use std::sync::Arc;

use gcmx_core::{DeviceError, Direction, Error};

#[cfg(not(feature = "cuda"))]
mod absent;
#[cfg(feature = "cuda")]
mod driver;
#[cfg(feature = "cuda")]
#[cfg_attr(not(feature = "fault-injection"), allow(unreachable_pub))]
pub mod fault;

#[cfg(not(feature = "cuda"))]
pub(crate) use absent::{DeviceMem, DirectIo, Gpu, Lane, direct_io, pin_scope};
#[cfg(feature = "bench")]
pub(crate) use driver::Event;
#[cfg(feature = "cuda")]
pub(crate) use driver::{DeviceMem, DirectIo, Gpu, Lane, direct_io, pin_scope};

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

/// What [`crate::info`] reports about a device and the kernels loaded on it.
///
/// ```no_run
/// if let Ok(info) = gcmx_cuda::info() {
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

/// Arguments shared by the three batch kernels (see `gcm_batch.cu`). The message table's per-message
/// ranges (data, AAD, units, tag slot, key index) are planned and checked by the batch layer, which
/// builds the table; here the buffers are checked against the counts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchArgs<'a> {
    pub(crate) data: At<'a>,
    pub(crate) data_len: usize,
    pub(crate) aad: At<'a>,
    pub(crate) aad_len: usize,
    pub(crate) msgs: At<'a>,
    pub(crate) nmsgs: u32,
    pub(crate) keys: At<'a>,
    pub(crate) key_powers: At<'a>,
    pub(crate) nkeys: u32,
    pub(crate) units: At<'a>,
    pub(crate) nunits: u32,
    pub(crate) tags: At<'a>,
    pub(crate) total_lanes: u32,
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) dir: Direction,
}

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
    /// `gcmx_batch_key_powers`.
    BatchKeyPowers {
        keys: At<'a>,
        key_powers: At<'a>,
        nkeys: u32,
    },
    /// `gcmx_batch_units`.
    BatchUnits(BatchArgs<'a>),
    /// `gcmx_batch_tags`.
    BatchTags(BatchArgs<'a>),
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
            Launch::BatchKeyPowers {
                keys,
                key_powers,
                nkeys,
            } => {
                let n = nkeys as usize;
                keys.check(abi::AES_KEY_BYTES * n, 4, "batch keys")?;
                key_powers.check(abi::KEY_POWERS_BYTES * n, 16, "batch key powers")?;
                Ok((
                    "gcmx_batch_key_powers",
                    nkeys.div_ceil(abi::BATCH_KEY_THREADS).max(1),
                    abi::BATCH_KEY_THREADS,
                ))
            }
            Launch::BatchUnits(a) => {
                a.check()?;
                Ok((
                    "gcmx_batch_units",
                    a.total_lanes.div_ceil(abi::BATCH_UNIT_THREADS).max(1),
                    abi::BATCH_UNIT_THREADS,
                ))
            }
            Launch::BatchTags(a) => {
                a.check()?;
                Ok((
                    "gcmx_batch_tags",
                    a.nmsgs.div_ceil(abi::BATCH_TAG_THREADS).max(1),
                    abi::BATCH_TAG_THREADS,
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

impl BatchArgs<'_> {
    fn check(&self) -> Result<(), Error> {
        self.data.check(self.data_len, 16, "batch data")?;
        self.aad.check(self.aad_len, 16, "batch AAD")?;
        self.msgs.check(
            abi::BATCH_MSG_BYTES * self.nmsgs as usize,
            16,
            "batch message table",
        )?;
        self.keys
            .check(abi::AES_KEY_BYTES * self.nkeys as usize, 4, "batch keys")?;
        self.key_powers.check(
            abi::KEY_POWERS_BYTES * self.nkeys as usize,
            16,
            "batch key powers",
        )?;
        self.units
            .check(16 * self.nunits as usize, 16, "batch unit partials")?;
        self.tags
            .check(16 * self.nmsgs as usize, 16, "batch tags")?;
        Ok(())
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
    use super::region_covers;

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
