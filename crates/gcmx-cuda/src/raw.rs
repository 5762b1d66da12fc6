//! Low-level launches for benchmarks and GPU tests: the GHASH-only kernels (clmad and software), the
//! bandwidth ceilings, the AES-CTR keystream kernel and the fused kernels without host synchronisation,
//! so callers can time them with CUDA events. Buffers are `cust` device memory owned by the caller.

use cust::event::{Event, EventFlags};
use cust::memory::{DeviceBuffer, DeviceSlice};
use cust::stream::Stream;
use gcmx_core::combine::Partial;
use gcmx_core::{Error, KeyMaterial};
use zeroize::Zeroizing;

use crate::abi::{self, GcmxBwParams, GcmxGhashParams};
use crate::engine::{CudaEngine, Dir, ghash_power_table, upload_table};
use crate::plan;
use crate::runtime::{DevMem, Runtime, dev_err, runtime, u128s_from_le_bytes};

/// A new stream on the gcmx context.
pub fn stream() -> Result<Stream, Error> {
    runtime()?;
    crate::runtime::new_stream()
}

/// Allocate `len` bytes of device memory (contents undefined), on the gcmx context.
pub fn alloc(len: usize) -> Result<DeviceBuffer<u8>, Error> {
    runtime()?;
    // SAFETY: u8 has no invalid bit patterns; callers fill the buffer before reading it.
    unsafe { DeviceBuffer::<u8>::uninitialized(len) }
        .map_err(|e| Error::Device(format!("cuMemAlloc({len}): {e:?}")))
}

/// Time `f` (which enqueues work on `stream`) with CUDA events; milliseconds.
pub fn time_ms(stream: &Stream, f: impl FnOnce() -> Result<(), Error>) -> Result<f32, Error> {
    let start = Event::new(EventFlags::DEFAULT).map_err(dev_err("cuEventCreate"))?;
    let stop = Event::new(EventFlags::DEFAULT).map_err(dev_err("cuEventCreate"))?;
    start.record(stream).map_err(dev_err("cuEventRecord"))?;
    f()?;
    stop.record(stream).map_err(dev_err("cuEventRecord"))?;
    stop.synchronize().map_err(dev_err("cuEventSynchronize"))?;
    stop.elapsed_time_f32(&start)
        .map_err(dev_err("cuEventElapsedTime"))
}

fn check_aligned(s: &DeviceSlice<u8>) -> Result<u64, Error> {
    let p = s.as_device_ptr().as_raw();
    if !p.is_multiple_of(16) {
        return Err(Error::Device(format!(
            "device buffer {p:#x} not 16-byte aligned"
        )));
    }
    Ok(p)
}

/// The GHASH-only kernels for one key.
pub struct Ghash {
    rt: &'static Runtime,
    key: KeyMaterial,
    powers: DevMem,
}

impl Ghash {
    /// Upload the GHASH-layout power table of `key` (from `HashKey::power`).
    pub fn new(key: &KeyMaterial) -> Result<Ghash, Error> {
        let rt = runtime()?;
        let table = Zeroizing::new(ghash_power_table(key));
        Ok(Ghash {
            rt,
            key: KeyMaterial::new(key.key_bytes())?,
            powers: upload_table(&table)?,
        })
    }

    /// Whether the clmad kernel is in the loaded fatbin.
    pub fn has_clmad(&self) -> bool {
        self.rt.has_kernel("gcmx_ghash_clmad")
    }

    /// Partials (16 bytes each) a launch over `nbytes` writes.
    pub fn partials_len(nbytes: usize) -> usize {
        16 * plan::grid_for(plan::blocks(nbytes), abi::GHASH_SPAN) as usize
    }

    /// Enqueue one GHASH launch over `data` writing partials into `partials`.
    pub fn launch(
        &self,
        stream: &Stream,
        clmad: bool,
        data: &DeviceSlice<u8>,
        partials: &mut DeviceSlice<u8>,
    ) -> Result<(), Error> {
        let grid = plan::grid_for(plan::blocks(data.len()), abi::GHASH_SPAN);
        if partials.len() < 16 * grid as usize {
            return Err(Error::Device("partials buffer too small".into()));
        }
        let p = GcmxGhashParams {
            data: check_aligned(data)?,
            nbytes: data.len() as u64,
            powers: self.powers.ptr(),
            partials: check_aligned(partials)?,
        };
        let name = if clmad {
            "gcmx_ghash_clmad"
        } else {
            "gcmx_ghash_soft"
        };
        let grid = u32::try_from(grid).map_err(|_| Error::PlaintextTooLong)?;
        // SAFETY: GcmxGhashParams is the GHASH kernels' parameter (layout checked); data and partials are
        // caller-owned device buffers of the checked sizes, the table is owned by self; the caller keeps
        // them alive until it synchronises the stream.
        unsafe { self.rt.launch(stream, name, grid, abi::GHASH_THREADS, &p) }
    }

    /// GHASH value (as a [`Partial`] of the message's blocks) of `data`, synchronously, via tree_reduce.
    pub fn hash(&self, clmad: bool, data: &DeviceSlice<u8>) -> Result<Partial, Error> {
        let s = crate::runtime::new_stream()?;
        let mut parts = alloc(Self::partials_len(data.len()))?;
        self.launch(&s, clmad, data, &mut parts)?;
        s.synchronize().map_err(dev_err("ghash"))?;
        let mut raw = vec![0u8; parts.len()];
        DevMem::download_from(parts.as_device_ptr().as_raw(), &mut raw)?;
        let chunk = plan::Chunk {
            offset: 0,
            len: data.len(),
            first_block: 0,
            first_partial: 0,
            grid: (raw.len() / 16) as u32,
        };
        let list = plan::partials_of(&[chunk], &u128s_from_le_bytes(&raw), abi::GHASH_SPAN);
        Ok(gcmx_core::combine::tree_reduce(self.key.hash_key(), &list))
    }
}

/// Enqueue `gcmx_bw_read` (reads and XOR-folds every block of `input`; one uint4 per thread block to `out`).
pub fn bw_read(
    stream: &Stream,
    input: &DeviceSlice<u8>,
    out: &mut DeviceSlice<u8>,
) -> Result<(), Error> {
    let rt = runtime()?;
    if !input.len().is_multiple_of(16) {
        return Err(Error::Device(
            "bw_read: length must be a multiple of 16".into(),
        ));
    }
    let grid = plan::grid_for(plan::blocks(input.len()), abi::GHASH_SPAN);
    if out.len() < 16 * grid as usize {
        return Err(Error::Device("bw_read: out too small".into()));
    }
    let p = GcmxBwParams {
        input: check_aligned(input)?,
        output: check_aligned(out)?,
        nbytes: input.len() as u64,
    };
    // SAFETY: GcmxBwParams is the bandwidth kernels' parameter; input/out are caller-owned device buffers of
    // the checked sizes, alive until the caller synchronises.
    unsafe { rt.launch(stream, "gcmx_bw_read", grid as u32, abi::GHASH_THREADS, &p) }
}

/// Enqueue `gcmx_bw_copy` (out = input).
pub fn bw_copy(
    stream: &Stream,
    input: &DeviceSlice<u8>,
    out: &mut DeviceSlice<u8>,
) -> Result<(), Error> {
    let rt = runtime()?;
    if !input.len().is_multiple_of(16) || out.len() < input.len() {
        return Err(Error::Device("bw_copy: bad lengths".into()));
    }
    let grid = plan::grid_for(plan::blocks(input.len()), abi::BW_COPY_SPAN);
    let p = GcmxBwParams {
        input: check_aligned(input)?,
        output: check_aligned(out)?,
        nbytes: input.len() as u64,
    };
    // SAFETY: as bw_read; out holds at least input.len() bytes.
    unsafe { rt.launch(stream, "gcmx_bw_copy", grid as u32, abi::BW_THREADS, &p) }
}

/// Enqueue the fused kernel of `engine` over `buf` in place (no host synchronisation): `seal` picks
/// encryption. `partials` must hold [`fused_partials_len`] bytes.
pub fn fused(
    engine: &CudaEngine,
    stream: &Stream,
    seal: bool,
    j0: &[u8; 16],
    buf: &mut DeviceSlice<u8>,
    partials: &mut DeviceSlice<u8>,
) -> Result<(), Error> {
    if partials.len() < fused_partials_len(buf.len()) {
        return Err(Error::Device("partials buffer too small".into()));
    }
    let ptr = check_aligned(buf)?;
    engine.launch_raw(
        stream,
        if seal { Dir::Seal } else { Dir::Open },
        j0,
        ptr,
        buf.len(),
        check_aligned(partials)?,
    )
}

/// Bytes of partials a fused launch over `nbytes` writes.
pub fn fused_partials_len(nbytes: usize) -> usize {
    16 * plan::grid_for(plan::blocks(nbytes), abi::FUSED_SPAN) as usize
}

/// Threads per block of `gcmx_aes_ctr` (`GCMX_AES_CTR_THREADS` in cuda/aes_ctr.cu).
pub const AES_CTR_THREADS: u32 = 128;
/// Blocks per warp chunk of `gcmx_aes_ctr`.
pub const AES_CTR_CHUNK_BLOCKS: u64 = 1024;
/// Suggested resident thread blocks per SM for `gcmx_aes_ctr`.
pub const AES_CTR_BLOCKS_PER_SM: u32 = 2;

/// The AES-CTR keystream kernel of `cuda/aes_ctr.cu` (benchmark only: data ^= keystream in place, no GHASH).
pub struct AesCtr {
    rt: &'static Runtime,
    key: Zeroizing<crate::abi::GcmxAesKey>,
}

impl AesCtr {
    /// Prepare the kernel for `key` (expanded on the host, constant time).
    pub fn new(key: &KeyMaterial) -> Result<AesCtr, Error> {
        let rt = runtime()?;
        if !rt.has_kernel("gcmx_aes_ctr") {
            return Err(Error::Device("gcmx_aes_ctr is not in the fatbin".into()));
        }
        let k = crate::aeskey::expand_key(key.key_bytes())
            .ok_or(Error::KeyLength(key.key_bytes().len()))?;
        Ok(AesCtr {
            rt,
            key: Zeroizing::new(k),
        })
    }

    /// Enqueue `data ^= AES-CTR keystream` (counter blocks from J0 + 1, inc32) in place.
    pub fn launch(
        &self,
        stream: &Stream,
        j0: &[u8; 16],
        data: &mut DeviceSlice<u8>,
    ) -> Result<(), Error> {
        let ptr = check_aligned(data)?;
        let nbytes = data.len() as u64;
        let chunks = plan::blocks(data.len()).div_ceil(AES_CTR_CHUNK_BLOCKS);
        let sms = self.rt.info().multiprocessors;
        let grid = chunks
            .div_ceil(u64::from(AES_CTR_THREADS / 32))
            .min(u64::from(sms * AES_CTR_BLOCKS_PER_SM))
            .max(1) as u32;
        let w = abi::le_words(j0);
        let ctr0 = u32::from_be_bytes([j0[12], j0[13], j0[14], j0[15]]);
        let key: crate::abi::GcmxAesKey = *self.key;
        let args: [*const core::ffi::c_void; 7] = [
            (&key as *const crate::abi::GcmxAesKey).cast(),
            (&w[0] as *const u32).cast(),
            (&w[1] as *const u32).cast(),
            (&w[2] as *const u32).cast(),
            (&ctr0 as *const u32).cast(),
            (&ptr as *const u64).cast(),
            (&nbytes as *const u64).cast(),
        ];
        // SAFETY: the argument list matches gcmx_aes_ctr(GcmxAesKey, u32, u32, u32, u32, uint8_t*, u64) as
        // documented at the top of cuda/aes_ctr.cu (GcmxAesKey layout checked against gcmx_abi.h); `data` is
        // a caller-owned device buffer of nbytes bytes, alive until the caller synchronises the stream.
        unsafe {
            self.rt
                .launch_args(stream, "gcmx_aes_ctr", grid, AES_CTR_THREADS, &args)
        }
    }
}
