//! Seals and opens the same messages on the CPU, on `Backend::Auto` and, where a GPU can be used, on
//! `Backend::Cuda`, and requires the same bytes from all of them. Without a usable GPU it requires the
//! documented fallback: `gcmx::cuda::device_info(0)` an error, `Backend::Cuda` refused with
//! `BackendUnavailable` and its reason, `Backend::Auto` on the CPU.
//!
//! `gcmx-consumer --require-gpu` fails unless the GPU ran (for a machine with a driver).

use gcmx::{Backend, Gcm, GcmError};

/// Messages of these sizes: empty, short, a partial block, and large enough to be worth a GPU.
const SIZES: [usize; 5] = [0, 1, 1000, 1 << 20, (64 << 20) + 13];

fn message(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 131 + len) as u8).collect()
}

/// Seal every message on `gcm`, check that it opens to the plaintext, and return the ciphertexts with
/// their tags.
fn round_trip(gcm: &Gcm) -> Result<Vec<(Vec<u8>, [u8; 16])>, GcmError> {
    let mut out = Vec::new();
    for (i, &len) in SIZES.iter().enumerate() {
        let nonce = [i as u8; 12];
        let plain = message(len);
        let mut buf = plain.clone();
        let mut tag = [0u8; 16];
        gcm.encrypt_detached(&nonce, b"consumer", &mut buf, &mut tag)?;
        let sealed = buf.clone();
        gcm.decrypt_detached(&nonce, b"consumer", &mut buf, &tag)?;
        if buf != plain {
            return Err(GcmError::InvalidInput(format!("{len} bytes did not open to the plaintext")));
        }
        out.push((sealed, tag));
    }
    Ok(out)
}

/// An error of `what`, as a line.
fn err(what: &'static str) -> impl Fn(GcmError) -> String {
    move |e| format!("{what}: {e}")
}

fn run(require_gpu: bool) -> Result<(), String> {
    let key = [0x42u8; 32];
    let cpu = round_trip(&Gcm::with_backend(&key, Backend::Cpu).map_err(err("CPU"))?)
        .map_err(err("CPU"))?;
    let auto = round_trip(&Gcm::new(&key).map_err(err("Auto"))?).map_err(err("Auto"))?;
    if auto != cpu {
        return Err("Backend::Auto gave other bytes than the CPU".into());
    }
    println!("Backend::Auto: {} messages, the CPU's bytes", SIZES.len());
    match Gcm::with_backend(&key, Backend::Cuda) {
        Ok(gpu) => {
            let info = gcmx::cuda::device_info(0).map_err(err("gcmx::cuda::device_info"))?;
            let got = round_trip(&gpu).map_err(err("GPU"))?;
            if got != cpu {
                return Err("the GPU gave other bytes than the CPU".into());
            }
            let bytes: usize = SIZES.iter().sum();
            println!("Backend::Cuda on {info}: {bytes} bytes sealed and opened, the CPU's bytes");
        }
        Err(GcmError::BackendUnavailable(why)) => {
            println!("Backend::Cuda unavailable: {why}");
            if gcmx::cuda::device_info(0).is_ok() {
                return Err("Backend::Cuda refused but gcmx::cuda::device_info(0) is Ok".into());
            }
            if require_gpu {
                return Err("--require-gpu: no GPU was used".into());
            }
        }
        Err(e) => return Err(format!("Backend::Cuda: {e} (expected a GPU or BackendUnavailable)")),
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let require_gpu = std::env::args().any(|a| a == "--require-gpu");
    match run(require_gpu) {
        Ok(()) => {
            println!("gcmx-consumer: ok");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gcmx-consumer: FAILED: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
