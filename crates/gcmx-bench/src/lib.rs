//! gcmx's one-core benchmark beside the fastest published AES-GCM code: gcmx's typed API and its
//! runtime `Gcm` (`Backend::Cpu`) against haberdashery (when its files were beside the repository
//! at build time), BoringSSL (feature `boringssl`), aws-lc-rs and ring, pinned to one core, the
//! implementations interleaved round by round, medians, cycles per byte from a core clock measured
//! in the same run (`clock`), and under each key size's tables the floor the AES unit sets, measured
//! in the same run (`ceiling`). Every peer's output is checked against gcmx's before any timing.
//!
//! Run it with `cargo bench -p gcmx-bench --bench one_core [--features boringssl] -- [OPTIONS]`,
//! or as the binary that `scripts/cpu-bench-build.sh` makes; `--help` lists the options.
//! The tables it prints are markdown, for `benches/results.md`.
#![cfg(target_arch = "x86_64")]

mod arena;
mod ceiling;
mod clock;
mod measure;
mod peer;
mod peers;
mod report;
mod system;
mod verify;

use std::time::Duration;

use measure::Settings;
use peer::{Op, Place};
use peers::haberdashery;
use report::{Cell, KeyResults};

/// The message lengths timed (0: the empty message).
pub const SIZES: [usize; 11] = [0, 16, 64, 256, 576, 1024, 1500, 4096, 16384, 65536, 1 << 20];

const HELP: &str = "\
one_core: gcmx beside haberdashery, BoringSSL, aws-lc-rs and ring on one core

options:
  --rounds N        recorded rounds per measurement (default 31; the median is printed)
  --slice-ms M      milliseconds each implementation runs per round (default 3)
  --cpu N           the core to pin to (default: the last one this process may use)
  --aes 128|256     one key size only (default: both)
  --sizes A,B,...   message lengths in bytes (default 0,16,64,256,576,1024,1500,4096,16384,65536,1048576)
  --all-profiles    every haberdashery profile that runs here (default: those of the widest
                    instruction class that runs here)
  --quick           --rounds 3 --slice-ms 1 (a check that everything runs, not a measurement)
  --about           what was compiled in (haberdashery's files, BoringSSL), and exit
";

struct Options {
    settings: Settings,
    cpu: Option<usize>,
    bits: Vec<usize>,
    sizes: Vec<usize>,
    all_profiles: bool,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        settings: Settings {
            rounds: 31,
            slice: Duration::from_millis(3),
        },
        cpu: None,
        bits: vec![128, 256],
        sizes: SIZES.to_vec(),
        all_profiles: false,
    };
    let mut args = std::env::args().skip(1);
    let num = |v: Option<String>, what: &str| -> Result<usize, String> {
        v.as_deref()
            .and_then(|s| s.parse().ok())
            .ok_or(format!("{what} needs a number"))
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            // `cargo bench` passes `--bench` to every benchmark.
            "--bench" => {}
            "--rounds" => o.settings.rounds = num(args.next(), "--rounds")?.max(1),
            "--slice-ms" => {
                o.settings.slice = Duration::from_millis(num(args.next(), "--slice-ms")? as u64)
            }
            "--cpu" => o.cpu = Some(num(args.next(), "--cpu")?),
            "--aes" => o.bits = vec![num(args.next(), "--aes")?],
            "--sizes" => {
                let v = args.next().unwrap_or_default();
                o.sizes = v
                    .split(',')
                    .map(|s| s.trim().parse().map_err(|_| format!("--sizes: {s}?")))
                    .collect::<Result<_, _>>()?;
            }
            "--all-profiles" => o.all_profiles = true,
            "--quick" => {
                o.settings = Settings {
                    rounds: 3,
                    slice: Duration::from_millis(1),
                }
            }
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.bits.iter().any(|b| *b != 128 && *b != 256) {
        return Err("--aes takes 128 or 256".into());
    }
    Ok(o)
}

/// What was compiled in: the peers that depend on the build.
fn about() -> String {
    let boring = if cfg!(feature = "boringssl") {
        "boring-sys 5 (BoringSSL built from the crate)"
    } else {
        "not built in (feature `boringssl` off)"
    };
    format!(
        "- haberdashery: {}\n- BoringSSL: {boring}",
        haberdashery::SOURCE
    )
}

/// The benchmark's `main`.
pub fn main() {
    if std::env::args().any(|a| a == "--about") {
        println!("{}", about());
        return;
    }
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("one_core: {e}");
            }
            eprint!("{HELP}");
            std::process::exit(if e.is_empty() { 0 } else { 2 });
        }
    };
    let cpu = match system::pin(o.cpu) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("one_core: cannot pin to one core: {e}");
            std::process::exit(1);
        }
    };
    let s = o.settings;
    println!(
        "## One core: {}, {}",
        system::cpu_model(),
        system::utc_now()
    );
    println!();
    println!(
        "- pinned to CPU {cpu} of {} online; load average at the start {}",
        system::online_cpus(),
        system::load_average()
    );
    println!("- {}", system::features());
    println!(
        "- {} recorded rounds (after one warm-up round) of ~{} ms per implementation, the order rotated each round; each slice's figure is its median pass, each table's the median over rounds",
        s.rounds,
        s.slice.as_millis()
    );
    println!(
        "- messages with no associated data, one nonce; each timed pass holds up to 256 KiB of messages (1024 at most), each on a cache line"
    );
    println!("{}", about());
    for &bits in &o.bits {
        run_key(bits, &o);
    }
}

fn run_key(bits: usize, o: &Options) {
    let key: Vec<u8> = (0..bits / 8)
        .map(|i| 0x42 ^ (i as u8).wrapping_mul(29))
        .collect();
    let mut profiles = Vec::new();
    let mut notes = Vec::new();
    for p in haberdashery::compiled()
        .into_iter()
        .filter(|p| p.key_len == key.len())
    {
        match p.runs_here() {
            Ok(why) => profiles.push((p, why)),
            Err(why) => notes.push(format!("{} skipped: {why}", p.name)),
        }
    }
    let widest = profiles.iter().map(|(p, _)| p.class).max().unwrap_or(0);
    let timed: Vec<&'static haberdashery::Profile> = profiles
        .iter()
        .filter(|(p, _)| o.all_profiles || p.class == widest)
        .map(|(p, _)| *p)
        .collect();
    for (p, why) in &profiles {
        if timed.iter().any(|t| std::ptr::eq(*t, *p)) {
            notes.push(format!("{} timed ({why})", p.name));
        } else {
            notes.push(format!(
                "{} runs here but is not timed (a narrower instruction class; --all-profiles)",
                p.name
            ));
        }
    }
    println!();
    println!("### AES-{bits}-GCM");
    println!();
    if !notes.is_empty() {
        println!("haberdashery profiles: {}.", notes.join("; "));
        println!();
    }
    let mut entries = peers::entries(&key, &timed);
    match verify::against_gcmx(&entries, &o.sizes) {
        Ok(n) => println!(
            "Checked before timing: every implementation's output equals gcmx's ({n} seals and opens, a wrong tag refused each time)."
        ),
        Err(e) => {
            println!("STOPPED: {e}");
            std::process::exit(1);
        }
    }
    println!();
    let s = o.settings;
    eprintln!("AES-{bits}: key set-up");
    let setup = measure::key_setup(&mut entries, &key, s);
    let mut cells = Vec::new();
    for op in [Op::Seal, Op::Open] {
        for place in [Place::InPlace, Place::Separate] {
            let which: Vec<usize> = (0..entries.len())
                .filter(|&i| entries[i].peer.places().contains(&place))
                .collect();
            for &size in &o.sizes {
                eprintln!("AES-{bits}: {op:?} {place:?} {size} B");
                let samples = measure::messages(&entries, &which, op, place, size, s);
                cells.push(Cell {
                    op,
                    place,
                    size,
                    which: which.clone(),
                    samples,
                });
            }
        }
    }
    let r = KeyResults {
        bits,
        names: entries.iter().map(|e| e.name.clone()).collect(),
        kinds: entries.iter().map(|e| e.kind).collect(),
        setup,
        cells,
    };
    let (ghz, lo, hi) = r.clock();
    println!(
        "Core clock (imul chains between passes, the highest per slice): median {ghz:.2} GHz, {lo:.2}-{hi:.2} over the run."
    );
    println!(
        "Median clock by implementation, messages of 4 KiB and more: {}.",
        r.clocks_by_entry(4096).join(", ")
    );
    if let Some(u) = ceiling::measure() {
        let nr = bits / 32 + 6;
        println!(
            "AES unit, measured in this run: {} on eight independent registers, {:.2} cycles an instruction; the {nr} rounds of AES-{bits} then take at least {:.3} c/B in any implementation of that instruction, a floor under every row.",
            u.name,
            u.cycles,
            u.floor(nr)
        );
    }
    println!();
    println!("{}", r.frontier());
    for op in [Op::Seal, Op::Open] {
        for place in [Place::InPlace, Place::Separate] {
            println!("{}", r.table(op, place));
        }
    }
    println!("{}", r.setup_table());
    let profiles = r.profiles_table();
    if !profiles.is_empty() {
        println!("{profiles}");
    }
}
