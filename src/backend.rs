//! The choice of backend for [`crate::Gcm`], and the engine `Auto` builds.

use core::fmt;
use core::str::FromStr;
use gcmx_core::backend::{AutoCpuEngine, GcmEngine};

use crate::GcmError;

/// Where the bulk work of a [`crate::Gcm`] runs.
///
/// Its [`Display`](fmt::Display) and [`FromStr`] spellings are `auto`, `cpu`, `cpu-parallel`
/// and `cuda`:
///
/// ```
/// use gcmx::Backend;
/// assert_eq!("cpu-parallel".parse::<Backend>(), Ok(Backend::CpuParallel));
/// assert_eq!(Backend::Auto.to_string(), "auto");
/// assert!("gpu".parse::<Backend>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Backend {
    /// The CPU, serially below a measured size and on all cores above it; with the `cuda`
    /// feature, host messages large enough that the GPU path is estimated faster than all CPU
    /// cores go to the GPU (`gcmx::cuda::offload_threshold`).
    #[default]
    Auto,
    /// One CPU thread.
    Cpu,
    /// All CPU cores (rayon's global pool).
    CpuParallel,
    /// The GPU (feature `cuda`): [`GcmError::BackendUnavailable`] at construction when there
    /// is no driver or device.
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    Cuda,
}

impl Backend {
    /// The backends this build has, fastest-to-start first.
    pub fn all() -> &'static [Backend] {
        &[
            Backend::Auto,
            Backend::Cpu,
            Backend::CpuParallel,
            #[cfg(feature = "cuda")]
            Backend::Cuda,
        ]
    }

    /// The spelling `FromStr` accepts.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Cpu => "cpu",
            Backend::CpuParallel => "cpu-parallel",
            #[cfg(feature = "cuda")]
            Backend::Cuda => "cuda",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses `auto`, `cpu`, `cpu-parallel` or `cuda`. `cuda` in a build without the `cuda`
/// feature is [`GcmError::BackendUnavailable`]; any other word [`GcmError::InvalidInput`].
impl FromStr for Backend {
    type Err = GcmError;
    fn from_str(s: &str) -> Result<Backend, GcmError> {
        if let Some(b) = Backend::all().iter().find(|b| b.name() == s) {
            return Ok(*b);
        }
        if s == "cuda" {
            return Err(GcmError::BackendUnavailable(
                "this build of gcmx has no CUDA backend (feature `cuda`)".into(),
            ));
        }
        Err(GcmError::InvalidInput(format!(
            "unknown backend {s:?} (expected one of: {})",
            Backend::all()
                .iter()
                .map(|b| b.name())
                .chain((!cfg!(feature = "cuda")).then_some("cuda"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

/// `Auto` without the `cuda` feature: the CPU engines.
#[cfg(not(feature = "cuda"))]
pub(crate) fn auto_engine(_raw: &[u8]) -> Result<Box<dyn GcmEngine>, GcmError> {
    // A unit struct: its box allocates nothing.
    Ok(Box::new(AutoCpuEngine))
}

/// `Auto` with the `cuda` feature: the CPU engines, and the GPU for host messages of at least
/// the library's offload threshold when a device is present and that threshold is finite.
#[cfg(feature = "cuda")]
pub(crate) fn auto_engine(raw: &[u8]) -> Result<Box<dyn GcmEngine>, GcmError> {
    let cpu = AutoCpuEngine;
    Ok(match gcmx_cuda::offload_threshold() {
        Some(threshold) if threshold != usize::MAX => match gcmx_cuda::CudaEngine::new(raw, 0) {
            Ok(gpu) => Box::new(Offload {
                cpu,
                gpu,
                threshold,
            }),
            Err(_) => Box::new(cpu),
        },
        _ => Box::new(cpu),
    })
}

/// `Auto` with a GPU: messages of `threshold` bytes or more go to the GPU.
#[cfg(feature = "cuda")]
struct Offload {
    cpu: AutoCpuEngine,
    gpu: gcmx_cuda::CudaEngine,
    threshold: usize,
}

#[cfg(feature = "cuda")]
impl GcmEngine for Offload {
    fn name(&self) -> &'static str {
        "auto-offload"
    }
    fn serial_below(&self) -> usize {
        self.threshold.min(self.cpu.serial_below())
    }
    fn crypt(
        &self,
        dir: gcmx_core::backend::Direction,
        msg: &mut gcmx_core::backend::Message<'_>,
    ) -> Result<[u8; 16], GcmError> {
        if msg.len() >= self.threshold {
            self.gpu.crypt(dir, msg)
        } else {
            self.cpu.crypt(dir, msg)
        }
    }
}
