//! Rough single-thread throughput of the stitched kernels, every width this CPU runs:
//! `cargo run --release -p gcmx-x86 --example speed [aes128]`.
//! (The criterion comparison with other crates is the workspace's `benches/aes_gcm.rs`.)

use std::hint::black_box;
use std::time::Instant;

use gcmx_x86::StitchedKey;

fn main() {
    let key_len = if std::env::args().any(|a| a == "aes128") {
        16
    } else {
        32
    };
    let key = vec![0x42; key_len];
    let keys = [
        StitchedKey::new(&key),
        StitchedKey::new_256(&key).filter(|_| StitchedKey::cpu_supports_512()),
        StitchedKey::new_narrow(&key).filter(|_| StitchedKey::cpu_supports_wide()),
    ];
    for k in keys.into_iter().flatten() {
        println!("{} (AES-{})", k.kernel_name(), key_len * 8);
        run(&k);
    }
    let t = Instant::now();
    let n = 200_000;
    for i in 0..n {
        let mut kb = [0x42u8; 32];
        kb[0] = i as u8;
        black_box(StitchedKey::new(black_box(&kb[..key_len])));
    }
    println!(
        "key set-up (new + drop): {:.0} ns",
        t.elapsed().as_secs_f64() / f64::from(n) * 1e9
    );
}

/// Best of five rounds of `op`, in GiB/s for `size` bytes.
fn rate(size: usize, mut op: impl FnMut()) -> f64 {
    let reps = ((1usize << 30) / size.max(64)).clamp(3, 2_000_000) / 5 + 1;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..reps {
            op();
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    size as f64 / best / (1u64 << 30) as f64
}

fn run(k: &StitchedKey) {
    let ctr = [0x24; 16];
    for size in [64, 1 << 10, 16 << 10, 1 << 20, 64 << 20] {
        let mut buf = vec![0x5a_u8; size];
        let seal = rate(size, || {
            black_box(k.seal_message(&ctr, b"", black_box(&mut buf[..])));
        });
        let open = rate(size, || {
            black_box(k.open_message(&ctr, b"", black_box(&mut buf[..])));
        });
        let ghash = rate(size, || {
            let mut y = 0u128;
            k.ghash(&mut y, black_box(&buf));
            black_box(y);
        });
        println!(
            "{size:>9} B: seal_message {seal:6.2}  open_message {open:6.2}  ghash {ghash:6.2} GiB/s"
        );
    }
}
