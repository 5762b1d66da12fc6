//! The AES unit's ceiling, measured in the run: the widest `aesenc` this core has, eight
//! independent registers at full rate. Every AES-GCM implementation here runs each 16-byte block
//! through `Nr` round instructions (10 for AES-128, 14 for AES-256), so no row can take fewer
//! cycles per byte than `Nr` times this rate over the bytes one instruction covers: a floor under
//! the large-message rows, beside them in the same run.

use std::time::Instant;

use crate::clock;

/// One measured AES instruction width.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AesUnit {
    /// The instruction, as the report names it.
    pub(crate) name: &'static str,
    /// Bytes of data one instruction carries a round further (16 per 128-bit lane).
    pub(crate) bytes: usize,
    /// Core cycles per instruction at full rate.
    pub(crate) cycles: f64,
}

impl AesUnit {
    /// The floor in cycles per byte for AES with `nr` rounds (10, 12 or 14).
    pub(crate) fn floor(&self, nr: usize) -> f64 {
        nr as f64 * self.cycles / self.bytes as f64
    }
}

/// Instructions per loop iteration: eight chains, four rounds each (the `.rept 4` below).
const PER_ITERATION: u64 = 32;

/// One AES instruction width and its timing loop.
struct Width {
    /// Whether this core runs it.
    here: bool,
    name: &'static str,
    bytes: usize,
    run: fn(u64),
}

/// The AES instruction widths, widest first.
fn widths() -> [Width; 3] {
    use std::is_x86_feature_detected as has;
    [
        Width {
            here: has!("avx512f") && has!("vaes"),
            name: "512-bit `vaesenc`",
            bytes: 64,
            run: zmm,
        },
        Width {
            here: has!("avx") && has!("vaes"),
            name: "256-bit `vaesenc`",
            bytes: 32,
            run: ymm,
        },
        Width {
            here: has!("avx") && has!("aes"),
            name: "128-bit `vaesenc`",
            bytes: 16,
            run: xmm,
        },
    ]
}

/// The widest AES instruction this core runs, measured: `vaesenc` on 512-bit registers
/// (AVX-512F + VAES), 256-bit (AVX + VAES) or 128-bit (AVX + AES-NI); `None` on a core without
/// AVX or AES-NI.
pub(crate) fn measure() -> Option<AesUnit> {
    let Width {
        name, bytes, run, ..
    } = widths().into_iter().find(|w| w.here)?;
    // About 100 µs a repetition: long against the timer, short against preemption.
    let iterations = 10_000;
    run(iterations / 10);
    // As a slice of the benchmark is timed (`measure`): the median repetition at the highest
    // clock measured right after one.
    let (mut ns, mut ghz) = (Vec::new(), 0f64);
    for _ in 0..15 {
        let t = Instant::now();
        run(iterations);
        ns.push(t.elapsed().as_nanos() as f64);
        ghz = ghz.max(clock::ghz());
    }
    ns.sort_by(f64::total_cmp);
    Some(AesUnit {
        name,
        bytes,
        cycles: ns[ns.len() / 2] * ghz / (iterations * PER_ITERATION) as f64,
    })
}

/// Eight registers each through four rounds, `n` times; the state and round key are whatever
/// the registers hold (the data do not change the instruction's timing).
macro_rules! aes_loop {
    ($name:ident, $features:literal, $reg:literal) => {
        fn $name(n: u64) {
            #[target_feature(enable = $features)]
            fn inner(n: u64) {
                // SAFETY: register arithmetic on the vector registers the block declares
                // clobbered (all of them caller-saved) and on a counter; no memory, no stack.
                unsafe {
                    std::arch::asm!(
                        "2:",
                        ".rept 4",
                        concat!("vaesenc ", $reg, "8, ", $reg, "0, ", $reg, "0"),
                        concat!("vaesenc ", $reg, "8, ", $reg, "1, ", $reg, "1"),
                        concat!("vaesenc ", $reg, "8, ", $reg, "2, ", $reg, "2"),
                        concat!("vaesenc ", $reg, "8, ", $reg, "3, ", $reg, "3"),
                        concat!("vaesenc ", $reg, "8, ", $reg, "4, ", $reg, "4"),
                        concat!("vaesenc ", $reg, "8, ", $reg, "5, ", $reg, "5"),
                        concat!("vaesenc ", $reg, "8, ", $reg, "6, ", $reg, "6"),
                        concat!("vaesenc ", $reg, "8, ", $reg, "7, ", $reg, "7"),
                        ".endr",
                        "dec {n}",
                        "jnz 2b",
                        // the upper halves cleared, as compiled AVX code leaves them
                        "vzeroupper",
                        n = inout(reg) n.max(1) => _,
                        out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                        out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                        out("xmm8") _,
                        options(nomem, nostack, att_syntax),
                    );
                }
            }
            // SAFETY: called only where `widths` found the features `inner` enables.
            unsafe { inner(n) }
        }
    };
}

aes_loop!(zmm, "avx512f,vaes", "%zmm");
aes_loop!(ymm, "avx,vaes", "%ymm");
aes_loop!(xmm, "avx,aes", "%xmm");

#[cfg(test)]
mod tests {
    use super::*;

    /// Each width this core runs completes its loop and gives a rate in reason (at least one
    /// instruction every two cycles, at most eight a cycle, on any x86-64 core of the last decade).
    #[test]
    fn every_width_here_runs() {
        for w in widths().into_iter().filter(|w| w.here) {
            (w.run)(1_000);
        }
        if let Some(u) = measure() {
            assert!(u.cycles > 0.125 && u.cycles < 2.0, "{u:?}");
        }
    }
}
