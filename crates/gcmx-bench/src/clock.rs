//! The core's clock, measured while the benchmark runs: a chain of dependent 64-bit `imul`
//! takes three cycles a link on every x86-64 core of the last decade (Intel since Nehalem, AMD
//! since Zen), whatever the clock. A chain of `add reg, imm` is no clock: Golden Cove and later
//! fold such adds at rename and run several a cycle.

use std::time::Instant;

/// Links per loop iteration (the loop's own `dec`/`jnz` run beside the chain, off its path).
const LINKS: u64 = 16;
/// Cycles per link.
const LATENCY: u64 = 3;

/// The core clock in GHz from one chain of 48,000 cycles (about 15 µs at 3 GHz; the timer's
/// own cost is a few thousandths of that). An interrupt or a preemption during the chain makes the
/// clock look slower, never faster: callers take the highest of several.
pub(crate) fn ghz() -> f64 {
    chain_ghz(1000)
}

/// The clock from one chain of `iterations * LINKS` links.
fn chain_ghz(iterations: u64) -> f64 {
    let t = Instant::now();
    imul_chain(iterations);
    let ns = t.elapsed().as_nanos() as f64;
    (iterations * LINKS * LATENCY) as f64 / ns
}

#[cfg(target_arch = "x86_64")]
fn imul_chain(iterations: u64) {
    // SAFETY: register arithmetic only: no memory, no stack, no flags the compiler relies on.
    unsafe {
        std::arch::asm!(
            "2:",
            "imul {x}, {x}", "imul {x}, {x}", "imul {x}, {x}", "imul {x}, {x}",
            "imul {x}, {x}", "imul {x}, {x}", "imul {x}, {x}", "imul {x}, {x}",
            "imul {x}, {x}", "imul {x}, {x}", "imul {x}, {x}", "imul {x}, {x}",
            "imul {x}, {x}", "imul {x}, {x}", "imul {x}, {x}", "imul {x}, {x}",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) 3u64 => _,
            n = inout(reg) iterations.max(1) => _,
            options(nomem, nostack),
        );
    }
}
