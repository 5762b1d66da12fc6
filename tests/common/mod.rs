//! Helpers shared by the integration tests (each test binary includes this with `mod common;`).
#![allow(dead_code)]

use gcmx::{Backend, Gcm};

/// Every backend the conformance tests must run through.
///
/// `Backend::Auto` is listed too: it must agree with the explicit ones whatever it picks.
#[allow(unused_mut)]
pub fn backends() -> Vec<Backend> {
    let mut v = vec![Backend::Cpu, Backend::CpuParallel, Backend::Auto];
    // ---- CUDA HOOK (owned by the CUDA helper) ------------------------------------------------
    // When the `cuda` feature is on and a device is present, push `Backend::Cuda` here, e.g.
    // `if <device present> { v.push(Backend::Cuda); }`. Every test below then covers it too.
    #[cfg(feature = "cuda")]
    {
        if gcmx::cuda::available() {
            v.push(Backend::Cuda);
        } else {
            eprintln!("GPU tests: no CUDA device found; Backend::Cuda not covered by this run");
        }
    }
    // -------------------------------------------------------------------------------------------
    v
}

/// A `Gcm` for `key` on `backend`; panics with context if the constructor refuses a valid key.
pub fn gcm(key: &[u8], backend: Backend) -> Gcm {
    match Gcm::with_backend(key, backend) {
        Ok(g) => g,
        Err(e) => panic!(
            "Gcm::with_backend(<{} byte key>, {backend:?}) failed: {e}",
            key.len()
        ),
    }
}

/// Lower-case hex.
pub fn hx(b: &[u8]) -> String {
    hex::encode(b)
}

/// Decode hex (empty string = empty vector); panics on malformed input.
pub fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.trim()).unwrap_or_else(|e| panic!("bad hex {s:?}: {e}"))
}

/// True when every byte is zero.
pub fn all_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

/// Tag lengths (bytes) that `Gcm` accepts (SP 800-38D, 5.2.1.2).
pub const TAG_LENGTHS: [usize; 7] = [4, 8, 12, 13, 14, 15, 16];
