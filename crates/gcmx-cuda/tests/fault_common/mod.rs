//! Shared by the fault-injection tests (`faults.rs`, `fault_startup.rs`): which device runs them (the
//! stub libcuda's emulated device, or a real GPU), the expected results on each, error classification,
//! the emulator's counters, and a watchdog that turns a hang into a failure.

#![allow(dead_code)] // each test binary uses part of it

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::gcmx::{Backend, Gcm};
use fault::{EmulatorStats, Injected};
use gcmx_cuda::Error;

/// The stub libcuda's controls (gcmx-cuda-testkit), with an [`emulate`](fault::emulate) that ends the
/// test binary with a notice (and success) when the loaded libcuda is not the stub: without it no
/// fault can be injected.
pub(crate) mod fault {
    #[allow(unused_imports)] // fault_startup.rs does not use it
    pub(crate) use gcmx_cuda::release_cached;
    pub(crate) use gcmx_cuda_testkit::fault::*;

    /// The injected failure behind `e`, an `Error::Device` (see gcmx-cuda-testkit's `injected`).
    pub(crate) fn injected(e: &gcmx_cuda::Error) -> Option<Injected> {
        match e {
            gcmx_cuda::Error::Device(_) => gcmx_cuda_testkit::fault::injected(e),
            _ => None,
        }
    }

    /// Switch the stub into emulation where it can (see gcmx-cuda-testkit); the tests are not run,
    /// with a notice, when the loaded libcuda is not the stub.
    pub(crate) fn emulate() -> bool {
        if !stub_loaded() {
            super::say(
                "fault-injection tests: NOT run: no libcuda.so.1, or not gcmx's stub libcuda, is loaded (put \
                 .toolchain/cuda-stub first on LD_LIBRARY_PATH; on a GPU machine set GCMX_STUB_DRIVER to \
                 the real driver's libcuda.so.1 too: scripts/gpu-run.sh faults does both)",
            );
            std::process::exit(0);
        }
        gcmx_cuda_testkit::fault::emulate()
    }
}

/// Where the tests run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dev {
    /// The stub libcuda emulating a device: kernels do not run; outputs follow the stub's stand-in
    /// transform ([`emu_ct`]), tags only round-trip.
    Emulated,
    /// A real GPU: results are compared with gcmx's CPU backend.
    Real,
}

/// Switch the stub into emulation when it is the loaded libcuda, and check that a device starts.
pub(crate) fn device() -> Dev {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let emulated = fault::emulate();
    match gcmx_cuda::device_info(0) {
        Ok(i) => {
            let on = if emulated {
                "the emulated device"
            } else {
                "a real GPU"
            };
            ONCE.call_once(|| say(&format!("fault-injection tests on {on}: {i}")));
            if emulated { Dev::Emulated } else { Dev::Real }
        }
        Err(e) => {
            panic!("no device: neither the emulating stub libcuda nor a GPU is present ({e})")
        }
    }
}

/// Straight to stderr (not through the harness's capture), so CI logs show the counts.
pub(crate) fn say(s: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{s}");
}

/// The injected fault behind `e`, if `e` is a device error caused by one (the driver error the stub
/// returned for its latest injected failure).
pub(crate) fn injected(e: &Error) -> Option<Injected> {
    fault::injected(e)
}

/// `Err` with a description unless `e` is an `Error::Device` caused by an injected fault.
pub(crate) fn is_injected(e: &Error) -> Result<(), String> {
    match injected(e) {
        Some(_) => Ok(()),
        None => Err(format!(
            "not a device error caused by the injected fault: {e:?}"
        )),
    }
}

/// The stub's stand-in ciphertext for a 12-byte nonce (mirrors `emu_ks` in stub/libcuda_stub.c:
/// J0 = nonce || 0^31 || 1, so the first counter is 2; byte p XORs 0x5c, J0[0] and the low byte of its
/// block's counter).
pub(crate) fn emu_ct(nonce: &[u8; 12], pt: &[u8]) -> Vec<u8> {
    let mut out = pt.to_vec();
    for (block, c) in out.chunks_mut(16).enumerate() {
        let ks = 0x5c ^ nonce[0] ^ (2u32.wrapping_add(block as u32) as u8);
        c.iter_mut().for_each(|b| *b ^= ks);
    }
    out
}

/// What a seal of `pt` must give: the ciphertext, and the tag where it can be known (on a real GPU,
/// from gcmx's CPU backend).
pub(crate) fn expected_seal(
    dev: Dev,
    key: &[u8],
    nonce: &[u8; 12],
    aad: &[u8],
    pt: &[u8],
) -> (Vec<u8>, Option<[u8; 16]>) {
    match dev {
        Dev::Emulated => (emu_ct(nonce, pt), None),
        Dev::Real => {
            let cpu = Gcm::with_backend(key, Backend::Cpu).expect("CPU backend");
            let mut ct = pt.to_vec();
            let mut tag = [0u8; 16];
            cpu.encrypt_detached(nonce, aad, &mut ct, &mut tag)
                .expect("CPU seal");
            (ct, Some(tag))
        }
    }
}

/// A deterministic generator (splitmix64).
#[derive(Clone, Debug)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        for c in v.chunks_mut(8) {
            let x = self.next().to_le_bytes();
            c.copy_from_slice(&x[..c.len()]);
        }
        v
    }

    pub(crate) fn nonce(&mut self) -> [u8; 12] {
        let mut n = [0u8; 12];
        n.copy_from_slice(&self.bytes(12));
        n
    }
}

/// The emulator's counters (`None` on a real GPU).
pub(crate) fn stats() -> Option<EmulatorStats> {
    fault::emulator_stats()
}

/// `Err` describing the difference when the live resources of `after` are not those of `before`, or
/// the stub saw misuse between them (invalid calls, copies from memory that was not page-locked, and,
/// unless `wipes_may_fail`, memory freed without being wiped).
pub(crate) fn same_live(
    before: &Option<EmulatorStats>,
    after: &Option<EmulatorStats>,
    wipes_may_fail: bool,
) -> Result<(), String> {
    let (Some(b), Some(a)) = (before, after) else {
        return Ok(());
    };
    let mut bad = Vec::new();
    let live = [
        ("device allocations", b.device_allocs, a.device_allocs),
        ("device bytes", b.device_bytes, a.device_bytes),
        ("page-locked allocations", b.host_allocs, a.host_allocs),
        ("page-locked bytes", b.host_bytes, a.host_bytes),
        ("host registrations", b.registrations, a.registrations),
        ("streams", b.streams, a.streams),
        ("events", b.events, a.events),
        ("modules", b.modules, a.modules),
        ("context references", b.context_refs, a.context_refs),
    ];
    for (what, x, y) in live {
        if x != y {
            bad.push(format!("{what}: {x} before, {y} after"));
        }
    }
    if a.invalid_calls != b.invalid_calls {
        bad.push(format!(
            "{} invalid driver calls (last: {})",
            a.invalid_calls - b.invalid_calls,
            a.last_invalid
        ));
    }
    if a.unpinned_copies != b.unpinned_copies {
        bad.push(format!(
            "{} async copies with memory not page-locked (last: {})",
            a.unpinned_copies - b.unpinned_copies,
            a.last_invalid
        ));
    }
    if !wipes_may_fail {
        if a.unwiped_frees != b.unwiped_frees {
            bad.push(format!(
                "{} device buffers freed without a wipe",
                a.unwiped_frees - b.unwiped_frees
            ));
        }
        if a.unwiped_host_frees != b.unwiped_host_frees {
            bad.push(format!(
                "{} page-locked buffers freed without a wipe",
                a.unwiped_host_frees - b.unwiped_host_frees
            ));
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("; "))
    }
}

static DEADLINE: Mutex<Option<(Instant, String)>> = Mutex::new(None);

/// Run `f` as case `what`; if it has not returned after `limit`, print the case and end the process
/// with a failure (a hang is a failure, not a stuck CI job).
pub(crate) fn bounded<R>(what: &str, limit: Duration, f: impl FnOnce() -> R) -> R {
    static WATCHDOG: std::sync::Once = std::sync::Once::new();
    WATCHDOG.call_once(|| {
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(Duration::from_millis(200));
                let d = DEADLINE.lock().unwrap_or_else(|p| p.into_inner());
                if let Some((t, w)) = d.as_ref()
                    && Instant::now() > *t
                {
                    say(&format!("HUNG: {w} did not return in time"));
                    std::process::exit(3);
                }
            }
        });
    });
    *DEADLINE.lock().unwrap_or_else(|p| p.into_inner()) =
        Some((Instant::now() + limit, what.into()));
    let r = f();
    *DEADLINE.lock().unwrap_or_else(|p| p.into_inner()) = None;
    r
}
