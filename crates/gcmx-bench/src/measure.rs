//! The timing: for one (key, operation, place, size), every implementation runs a slice of
//! about `slice` in each round, in an order rotated from round to round, so that all see the same
//! drift of a shared or virtual machine. A slice is a run of timed passes over many messages (at
//! least [`MIN_PASSES`]); its figure is the median pass, so that a pass during which the thread was
//! preempted or interrupted does not count. After each pass a short `imul` chain measures the core
//! clock (a core that lowers its clock for wide vector code keeps it lowered for a while, so the
//! chain sees the clock the pass ran at); the slice's clock is the highest of them, since a
//! preempted chain only looks slower. One round, unrecorded, warms caches and clocks first.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::arena::Arena;
use crate::clock;
use crate::peer::{Op, Place};
use crate::peers::Entry;

/// How long and how often.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    /// Recorded rounds.
    pub(crate) rounds: usize,
    /// Time each implementation runs in a round.
    pub(crate) slice: Duration,
}

/// One implementation's slice: its time per message (or per key set-up) and the clock it ran at.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    /// Nanoseconds per message in the slice's median pass.
    pub(crate) ns: f64,
    /// The core clock during the slice, GHz.
    pub(crate) ghz: f64,
}

impl Sample {
    /// Core cycles per message.
    pub(crate) fn cycles(&self) -> f64 {
        self.ns * self.ghz
    }
}

/// Passes per slice, at least.
const MIN_PASSES: usize = 5;

/// A slice of `pass`es (each returning its nanoseconds) over `per_pass` messages or key set-ups.
fn slice(budget: Duration, per_pass: usize, mut pass: impl FnMut() -> f64) -> Sample {
    let start = Instant::now();
    let (mut times, mut ghz) = (Vec::new(), 0f64);
    while times.len() < MIN_PASSES || start.elapsed() < budget {
        times.push(pass());
        ghz = ghz.max(clock::ghz());
    }
    Sample {
        ns: median(times) / per_pass as f64,
        ghz,
    }
}

/// Inputs for one timed pass hold about this much (at least one message, at most 1024): the
/// messages stay in the core's L2 cache, as a message just received or about to be sent does.
const PASS_BYTES: usize = 256 << 10;

/// A byte pattern for message `len` bytes long.
pub(crate) fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(151) ^ 0x5a)
        .collect()
}

/// `op` on messages of `size` bytes, `place`, by the implementations `which` (indices into
/// `entries`, each offering `place`): `samples[k][round]` for `which[k]`.
pub(crate) fn messages(
    entries: &[Entry],
    which: &[usize],
    op: Op,
    place: Place,
    size: usize,
    s: Settings,
) -> Vec<Vec<Sample>> {
    let pt = pattern(size);
    let mut ct = pt.clone();
    // The reference ciphertext and tag: gcmx's typed API (entries were checked against it).
    let tag = entries[0].peer.seal(
        &crate::peer::NONCE,
        crate::peer::AAD,
        crate::peer::Io::InPlace(&mut ct),
    );
    let copies = (PASS_BYTES / size.div_ceil(64).max(1) / 64).clamp(1, 1024);
    let source = match op {
        Op::Seal => &pt,
        Op::Open => &ct,
    };
    let input = Arena::filled(source, copies);
    let mut work = input.clone();
    let refill = op == Op::Open && place == Place::InPlace;
    rotated(which.len(), s.rounds, |k| {
        let e = &entries[which[k]];
        slice(s.slice, copies, || {
            if refill {
                work.refill(source);
            }
            let t = Instant::now();
            e.peer.pass(op, place, &input, &mut work, &tag);
            t.elapsed().as_nanos() as f64
        })
    })
}

/// Key set-up (from the key's bytes to a key ready to seal, then released) by every entry.
pub(crate) fn key_setup(entries: &mut [Entry], key: &[u8], s: Settings) -> Vec<Vec<Sample>> {
    const BATCH: usize = 32;
    let n = entries.len();
    rotated(n, s.rounds, |k| {
        let setup = &mut entries[k].setup;
        slice(s.slice, BATCH, || {
            let t = Instant::now();
            for _ in 0..BATCH {
                setup(black_box(key));
            }
            t.elapsed().as_nanos() as f64
        })
    })
}

/// `rounds` recorded rounds (after one warm-up round) of `run(k)` for every `k < n`, the order
/// rotated by one each round: `out[k][round]`.
fn rotated(n: usize, rounds: usize, mut run: impl FnMut(usize) -> Sample) -> Vec<Vec<Sample>> {
    let mut out = vec![Vec::with_capacity(rounds); n];
    for r in 0..=rounds {
        for j in 0..n {
            let k = (j + r) % n;
            let sample = run(k);
            if r > 0 {
                out[k].push(sample);
            }
        }
    }
    out
}

/// The median of `v` (the upper one of an even count); NaN (printed "NaN") for none, as for
/// the clock of messages of 4 KiB and more in a run of `--sizes` below that.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
