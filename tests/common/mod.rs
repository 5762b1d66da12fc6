//! Helpers shared by the integration tests (each test binary includes this with `mod common;`).
#![allow(dead_code)]

use gcmx::{Backend, Gcm};

/// Every backend the conformance tests must run through.
///
/// `Backend::Auto` is listed too: it must agree with the explicit ones whatever it picks.
#[allow(unused_mut)]
pub(crate) fn backends() -> Vec<Backend> {
    let mut v = vec![Backend::Cpu, Backend::CpuParallel, Backend::Auto];
    // With the `cuda` feature and a device present, every test covers the GPU too.
    #[cfg(feature = "cuda")]
    {
        if gcmx::cuda::available() {
            v.push(Backend::Cuda);
        } else {
            eprintln!("GPU tests: no CUDA device found; Backend::Cuda not covered by this run");
        }
    }
    v
}

/// A `Gcm` for `key` on `backend`; panics with context if the constructor refuses a valid key.
pub(crate) fn gcm(key: &[u8], backend: Backend) -> Gcm {
    match Gcm::with_backend(key, backend) {
        Ok(g) => g,
        Err(e) => panic!(
            "Gcm::with_backend(<{} byte key>, {backend:?}) failed: {e}",
            key.len()
        ),
    }
}

/// Lower-case hex.
pub(crate) fn hx(b: &[u8]) -> String {
    hex::encode(b)
}

/// Decode hex (empty string = empty vector); panics on malformed input.
pub(crate) fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.trim()).unwrap_or_else(|e| panic!("bad hex {s:?}: {e}"))
}

/// Tag lengths (bytes) that `Gcm` accepts: SP 800-38D's 12 to 16, and its short 4 and 8 only
/// with the `hazmat` feature.
#[cfg(feature = "hazmat")]
pub(crate) const TAG_LENGTHS: &[usize] = &[4, 8, 12, 13, 14, 15, 16];
/// Tag lengths (bytes) that `Gcm` accepts: SP 800-38D's 12 to 16, and its short 4 and 8 only
/// with the `hazmat` feature.
#[cfg(not(feature = "hazmat"))]
pub(crate) const TAG_LENGTHS: &[usize] = &[12, 13, 14, 15, 16];
