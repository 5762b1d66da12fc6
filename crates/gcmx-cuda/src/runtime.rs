//! The process-wide CUDA state: driver initialisation, the primary context of device 0, the embedded
//! fatbin loaded as one module, the ABI check, and thin checked wrappers over the driver calls the
//! engines use. Every driver call's result is checked and turned into [`Error`].

use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use cust::context::{Context, CurrentContext};
use cust::device::{Device, DeviceAttribute};
use cust::function::{BlockSize, GridSize};
use cust::memory::DeviceBuffer;
use cust::module::Module;
use cust::stream::Stream;
use cust::sys as cu;
use gcmx_core::Error;

use crate::abi;
use crate::batch::BatchBuffers;
use crate::engine::Pipeline;

/// The fatbin built by build.rs from cuda/gcmx_all.cu (SASS sm_80..sm_120 + PTX compute_120).
static FATBIN: &[u8] = include_bytes!(env!("GCMX_FATBIN"));

/// Which GHASH multiply the loaded kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GhashVariant {
    /// The PTX `clmad` carry-less multiply-accumulate (nvcc >= 13.3).
    Clmad,
    /// The software carry-less multiply (built with an older nvcc).
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

/// What `gcmx_cuda::info()` reports about the device and the loaded kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
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
    /// GHASH variant of the loaded fatbin (reported by the kernels themselves).
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
            "{} ({}, {} SMs, {:.1} GiB), driver CUDA {}.{}, GHASH {}, kernels built by nvcc {}, ABI {}",
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

/// Device 0's primary context, the loaded module and what was learned at load time.
pub struct Runtime {
    // Field order matters for drop order: the module unloads before the context is released.
    module: Module,
    ctx: Context,
    info: DeviceInfo,
    pipe: Mutex<Pipeline>,
    batch: Mutex<BatchBuffers>,
}

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The runtime, initialised on first use. `Err(BackendUnavailable)` when there is no driver or device,
/// or the kernels cannot load on it.
pub fn runtime() -> Result<&'static Runtime, Error> {
    match RUNTIME.get_or_init(init) {
        Ok(rt) => {
            rt.enter()?;
            Ok(rt)
        }
        Err(why) => Err(Error::BackendUnavailable(why.clone())),
    }
}

/// Check a raw driver result.
pub fn ck(r: cu::CUresult, what: &str) -> Result<(), Error> {
    if r == cu::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Device(format!("{what}: {r:?}")))
    }
}

/// Map a cust error (formatted with Debug, which needs no driver call).
pub fn dev_err(what: &str) -> impl FnOnce(cust::error::CudaError) -> Error + '_ {
    move |e| Error::Device(format!("{what}: {e:?}"))
}

fn init() -> Result<Runtime, String> {
    cust::init(cust::CudaFlags::empty())
        .map_err(|e| format!("no CUDA driver/device: cuInit failed ({e:?})"))?;
    let n = Device::num_devices()
        .map_err(|e| format!("no CUDA driver/device: cuDeviceGetCount ({e:?})"))?;
    if n == 0 {
        return Err("no CUDA driver/device: no device found".into());
    }
    let dev = Device::get_device(0).map_err(|e| format!("cuDeviceGet(0): {e:?}"))?;
    let ctx = Context::new(dev).map_err(|e| format!("primary context of device 0: {e:?}"))?;
    let attr = |a| {
        dev.get_attribute(a)
            .map_err(|e| format!("device attribute {a:?}: {e:?}"))
    };
    let major = attr(DeviceAttribute::ComputeCapabilityMajor)? as u32;
    let minor = attr(DeviceAttribute::ComputeCapabilityMinor)? as u32;
    let sms = attr(DeviceAttribute::MultiprocessorCount)? as u32;
    let name = dev.name().map_err(|e| format!("device name: {e:?}"))?;
    let total_memory = dev
        .total_memory()
        .map_err(|e| format!("device memory: {e:?}"))?;
    let mut dv: i32 = 0;
    // SAFETY: FFI call writing one int through a valid pointer.
    ck(
        unsafe { cu::cuDriverGetVersion(&mut dv) },
        "cuDriverGetVersion",
    )
    .map_err(|e| e.to_string())?;
    let module = Module::from_fatbin(FATBIN, &[]).map_err(|e| {
        format!("the gcmx kernels do not load on {name} (sm_{major}{minor}): {e:?} (the fatbin holds sm_80..sm_120 and PTX 12.0)")
    })?;
    let mut rt = Runtime {
        module,
        ctx,
        info: DeviceInfo {
            name,
            compute_capability: (major, minor),
            arch: format!("sm_{major}{minor}"),
            multiprocessors: sms,
            total_memory,
            driver_version: ((dv / 1000) as u32, ((dv % 1000) / 10) as u32),
            ghash_variant: GhashVariant::Soft,
            nvcc_version: env!("GCMX_NVCC_VERSION"),
            abi_version: 0,
        },
        pipe: Mutex::new(Pipeline::default()),
        batch: Mutex::new(BatchBuffers::default()),
    };
    let words = rt.abi_info().map_err(|e| format!("ABI check: {e}"))?;
    let expect = [
        abi::ABI_VERSION,
        words[1],
        abi::GHASH_THREADS,
        abi::GHASH_SPAN as u32,
        abi::FUSED_THREADS,
        abi::FUSED_SPAN as u32,
        abi::BATCH_UNIT_BLOCKS as u32,
        core::mem::size_of::<abi::GcmxGcmParams>() as u32,
    ];
    if words != expect {
        return Err(format!(
            "kernel ABI mismatch: kernels report {words:?}, the driver expects {expect:?}"
        ));
    }
    rt.info.abi_version = words[0];
    rt.info.ghash_variant = if words[1] == 1 {
        GhashVariant::Clmad
    } else {
        GhashVariant::Soft
    };
    if cfg!(gcmx_have_clmad) != (words[1] == 1) {
        return Err(format!(
            "fatbin reports have_clmad = {} but the build said {}",
            words[1],
            cfg!(gcmx_have_clmad)
        ));
    }
    Ok(rt)
}

impl Runtime {
    /// Make the primary context current on the calling thread.
    pub fn enter(&self) -> Result<(), Error> {
        CurrentContext::set_current(&self.ctx).map_err(dev_err("cuCtxSetCurrent"))
    }

    /// The host-resident pipeline's streams and buffers (shared by all engines).
    pub(crate) fn pipeline(&self) -> &Mutex<Pipeline> {
        &self.pipe
    }

    /// The batch path's staging buffers (shared by all engines and keyrings).
    pub(crate) fn batch_buffers(&self) -> &Mutex<BatchBuffers> {
        &self.batch
    }

    /// What was learned at load time.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Whether the module has a kernel of this name.
    pub fn has_kernel(&self, name: &str) -> bool {
        self.module.get_function(name).is_ok()
    }

    fn abi_info(&self) -> Result<[u32; abi::ABI_INFO_WORDS], Error> {
        let out = DevMem::new(4 * abi::ABI_INFO_WORDS)?;
        let stream = new_stream()?;
        let ptr = out.ptr();
        // SAFETY: gcmx_abi_info(uint64_t out) takes one u64 device address and writes ABI_INFO_WORDS
        // u32 there; `out` holds that many bytes and outlives the synchronisation below.
        unsafe { self.launch(&stream, "gcmx_abi_info", 1, 1, &ptr)? };
        stream.synchronize().map_err(dev_err("gcmx_abi_info"))?;
        let mut b = [0u8; 4 * abi::ABI_INFO_WORDS];
        out.download(0, &mut b)?;
        Ok(core::array::from_fn(|i| {
            u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
        }))
    }

    /// Launch kernel `name` with one by-value parameter `params` on `stream`.
    ///
    /// # Safety
    /// `P` must be exactly the kernel's parameter type (a `#[repr(C)]` mirror from [`crate::abi`], or a
    /// `u64` device address), and every device address in it must be valid for what the kernel reads and
    /// writes until the stream is synchronised.
    pub unsafe fn launch<P>(
        &self,
        stream: &Stream,
        name: &str,
        grid: u32,
        block: u32,
        params: &P,
    ) -> Result<(), Error> {
        let f = self
            .module
            .get_function(name)
            .map_err(|e| Error::Device(format!("kernel {name}: {e:?}")))?;
        let args = [params as *const P as *mut c_void];
        // SAFETY: forwarded from this function's contract; cuLaunchKernel copies the parameter bytes at
        // launch time, so `params` need only live through this call.
        unsafe { stream.launch(&f, GridSize::x(grid), BlockSize::x(block), 0, &args) }
            .map_err(|e| Error::Device(format!("launch {name}<<<{grid}, {block}>>>: {e:?}")))
    }
}

impl Runtime {
    /// Launch kernel `name` with an explicit argument list (one pointer per kernel parameter).
    ///
    /// # Safety
    /// `args` must point to values of exactly the kernel's parameter types, in order, and every device
    /// address among them must be valid for the kernel's accesses until the stream is synchronised.
    pub unsafe fn launch_args(
        &self,
        stream: &Stream,
        name: &str,
        grid: u32,
        block: u32,
        args: &[*const c_void],
    ) -> Result<(), Error> {
        let f = self
            .module
            .get_function(name)
            .map_err(|e| Error::Device(format!("kernel {name}: {e:?}")))?;
        let args: Vec<*mut c_void> = args.iter().map(|p| p.cast_mut()).collect();
        // SAFETY: forwarded from this function's contract; the driver copies the argument values at launch.
        unsafe { stream.launch(&f, GridSize::x(grid), BlockSize::x(block), 0, &args) }
            .map_err(|e| Error::Device(format!("launch {name}<<<{grid}, {block}>>>: {e:?}")))
    }
}

/// A new non-blocking stream.
pub fn new_stream() -> Result<Stream, Error> {
    Stream::new(cust::stream::StreamFlags::NON_BLOCKING, None).map_err(dev_err("cuStreamCreate"))
}

/// Device memory of `len` bytes (256-byte aligned), owned.
pub struct DevMem {
    buf: Option<DeviceBuffer<u8>>,
    len: usize,
}

impl DevMem {
    /// Allocate `len` bytes (contents undefined). `len == 0` allocates nothing.
    pub fn new(len: usize) -> Result<DevMem, Error> {
        if len == 0 {
            return Ok(DevMem { buf: None, len: 0 });
        }
        // SAFETY: u8 has no invalid bit patterns and the host never reads these bytes before a kernel or
        // a copy wrote them.
        let buf = unsafe { DeviceBuffer::<u8>::uninitialized(len) }
            .map_err(|e| Error::Device(format!("cuMemAlloc({len} bytes): {e:?}")))?;
        Ok(DevMem {
            buf: Some(buf),
            len,
        })
    }

    /// Bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Device address (0 when empty).
    pub fn ptr(&self) -> u64 {
        self.buf.as_ref().map_or(0, |b| b.as_device_ptr().as_raw())
    }

    /// Synchronous upload of `src` at byte `offset`.
    pub fn upload(&self, offset: usize, src: &[u8]) -> Result<(), Error> {
        if src.is_empty() {
            return Ok(());
        }
        self.bounds(offset, src.len())?;
        // SAFETY: FFI copy of src.len() bytes from a live host slice into this allocation, bounds checked.
        ck(
            unsafe {
                cu::cuMemcpyHtoD_v2(self.ptr() + offset as u64, src.as_ptr().cast(), src.len())
            },
            "cuMemcpyHtoD",
        )
    }

    /// Synchronous download into `dst` from byte `offset`.
    pub fn download(&self, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        if dst.is_empty() {
            return Ok(());
        }
        self.bounds(offset, dst.len())?;
        // SAFETY: FFI copy of dst.len() bytes from this allocation (bounds checked) into a live host slice.
        ck(
            unsafe {
                cu::cuMemcpyDtoH_v2(
                    dst.as_mut_ptr().cast(),
                    self.ptr() + offset as u64,
                    dst.len(),
                )
            },
            "cuMemcpyDtoH",
        )
    }

    /// Synchronous download of `dst.len()` bytes from device address `ptr` (memory the caller owns).
    pub fn download_from(ptr: u64, dst: &mut [u8]) -> Result<(), Error> {
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: FFI copy from caller-owned device memory of at least dst.len() bytes into a live slice.
        ck(
            unsafe { cu::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), ptr, dst.len()) },
            "cuMemcpyDtoH",
        )
    }

    /// Synchronous fill with zeros.
    pub fn zero(&self) -> Result<(), Error> {
        memset_d8(self.ptr(), self.len)
    }

    fn bounds(&self, offset: usize, n: usize) -> Result<(), Error> {
        if offset.checked_add(n).is_none_or(|e| e > self.len) {
            return Err(Error::Device(format!(
                "internal: access {offset}+{n} outside {} bytes",
                self.len
            )));
        }
        Ok(())
    }
}

/// Synchronous memset to zero of `n` bytes at device address `ptr`.
pub fn memset_d8(ptr: u64, n: usize) -> Result<(), Error> {
    if n == 0 {
        return Ok(());
    }
    // SAFETY: FFI memset of device memory the caller owns (a DevMem or a caller's DeviceSlice, n in bounds).
    ck(unsafe { cu::cuMemsetD8_v2(ptr, 0, n) }, "cuMemsetD8")?;
    // SAFETY: FFI call without arguments; waits for the memset (and all prior work) to finish.
    ck(unsafe { cu::cuCtxSynchronize() }, "cuCtxSynchronize")
}

/// Serialise little-endian words (what a `#[repr(C)]` array of them is on every CUDA host).
pub fn u128s_from_le_bytes(b: &[u8]) -> Vec<u128> {
    b.chunks_exact(16)
        .map(|c| {
            let lo = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
            let hi = u64::from_le_bytes(c[8..].try_into().expect("8 bytes"));
            (u128::from(hi) << 64) | u128::from(lo)
        })
        .collect()
}

/// `GcmxU128` array bytes of `values` (lo then hi, little-endian words).
pub fn u128s_to_le_bytes(values: &[u128]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 16);
    for v in values {
        out.extend_from_slice(&(*v as u64).to_le_bytes());
        out.extend_from_slice(&((*v >> 64) as u64).to_le_bytes());
    }
    out
}

/// Run `f(i, &mut items[i])` for every item on up to `threads` scoped OS threads (contiguous ranges).
///
/// Not rayon: the callers hold the runtime's locks, and a rayon worker that waits inside a parallel loop
/// may steal an unrelated task (say, another `seal` from the caller's own `par_iter`) that then blocks on
/// the same lock: a deadlock. Scoped threads only ever run this closure.
pub(crate) fn par_each<T: Send>(items: &mut [T], threads: usize, f: impl Fn(usize, &mut T) + Sync) {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        for (i, it) in items.iter_mut().enumerate() {
            f(i, it);
        }
        return;
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (c, chunk) in items.chunks_mut(per).enumerate() {
            let f = &f;
            s.spawn(move || {
                for (k, it) in chunk.iter_mut().enumerate() {
                    f(c * per + k, it);
                }
            });
        }
    });
}

/// Threads worth using to copy `bytes` bytes: one per 4 MiB, at most the hardware threads (and 16).
pub(crate) fn copy_threads(bytes: usize) -> usize {
    let hw = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(16);
    (bytes >> 22).clamp(1, hw)
}

/// Zero `buf` (volatile writes, so the wipe is not optimised away) on several threads when large.
pub(crate) fn wipe(buf: &mut [u8]) {
    use zeroize::Zeroize;
    let mut parts: Vec<&mut [u8]> = buf.chunks_mut(1 << 20).collect();
    let t = copy_threads(parts.len() << 20);
    par_each(&mut parts, t, |_, c| c.zeroize());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn par_each_visits_every_item_once_with_its_index() {
        for threads in [1usize, 2, 3, 7, 64] {
            for n in [0usize, 1, 5, 100, 1001] {
                let mut v: Vec<(usize, u32)> = vec![(usize::MAX, 0); n];
                par_each(&mut v, threads, |i, it| {
                    it.0 = i;
                    it.1 += 1;
                });
                assert!(
                    v.iter().enumerate().all(|(i, &(j, c))| i == j && c == 1),
                    "threads {threads} n {n}"
                );
            }
        }
        let mut b = vec![0xAAu8; (3 << 20) + 5];
        wipe(&mut b);
        assert!(b.iter().all(|&x| x == 0));
        assert_eq!(copy_threads(0), 1);
    }
}
