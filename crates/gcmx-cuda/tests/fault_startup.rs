//! Faults while the device starts (injected by the stub libcuda): context creation, module load, and the
//! allocation, stream, launch, wait and copy of the kernels' ABI check. A started device stays started
//! for the life of the process, so these run in their own test binary, before anything else starts it.
//!
//! Each start-up fault must give `Error::BackendUnavailable` naming the injected fault, release what the
//! start had taken (context reference, module, memory, stream), and leave the next start free to
//! succeed: a failed start is not remembered.

mod fault_common;

#[path = "support/gcmx.rs"]
mod gcmx;

use std::time::Duration;

use fault_common::fault::{self, Mode, Op};
use fault_common::{bounded, same_live, say, stats};
use gcmx_cuda::{CudaEngine, DeviceBuf, Error};

#[test]
fn start_up_faults_then_a_clean_start() {
    // Switch the stub into emulation without starting the device (fault_common::device() would).
    let emulated = fault::emulate();
    let before = stats();
    let ops = [
        Op::ContextCreate,
        Op::ModuleLoad,
        Op::DeviceAlloc,
        Op::StreamCreate,
        Op::Launch,
        Op::Synchronize,
        Op::CopyToHost,
    ];
    let mut cases = 0;
    let mut failures = Vec::new();
    for op in ops {
        for mode in [Mode::Once, Mode::ContextLost] {
            cases += 1;
            let what = format!("start-up: {op} #1 {mode:?}");
            let r = bounded(&what, Duration::from_secs(60), || {
                fault::arm(op, 1, mode);
                let info = gcmx_cuda::device_info(0);
                // With a one-off fault a second call would start the device for good (and end the
                // start-up cases); with a lost context every call must keep failing.
                let later = (mode == Mode::ContextLost).then(|| {
                    (
                        CudaEngine::new(&[5u8; 16], 0).err(),
                        DeviceBuf::new(64, 0).err(),
                    )
                });
                (info, later, fault::disarm())
            });
            let (info, later, fired) = r;
            let named = |e: &Option<Error>| matches!(e, Some(Error::BackendUnavailable(m)) if m.contains("injected fault"));
            let ok = matches!(&info, Err(Error::BackendUnavailable(m)) if m.contains("injected fault"))
                && later.as_ref().is_none_or(|(e, b)| named(e) && named(b))
                && fired >= 1;
            if !ok {
                failures.push(format!(
                    "{what}: info {:?}, later calls {later:?}, {fired} injected",
                    info.err()
                ));
            }
            if let Err(e) = same_live(&before, &stats(), true) {
                failures.push(format!("{what}: a failed start kept resources: {e}"));
            }
        }
    }
    // The clean start after all of them.
    let info = gcmx_cuda::device_info(0);
    let engine = CudaEngine::new(&[5u8; 16], 0);
    say(&format!(
        "fault-injection start-up ({}): {cases} cases, {} failed; then started: {}",
        if emulated {
            "emulated device"
        } else {
            "real GPU"
        },
        failures.len(),
        info.as_ref()
            .map_or_else(|e| e.to_string(), |i| i.to_string())
    ));
    for f in &failures {
        say(&format!("  FAIL {f}"));
    }
    assert!(
        failures.is_empty(),
        "{} start-up fault cases failed",
        failures.len()
    );
    assert!(
        info.is_ok() && engine.is_ok(),
        "no clean start after the faults: {:?}",
        engine.err()
    );
}
