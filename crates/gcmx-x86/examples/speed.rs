//! Rough single-thread throughput of the stitched kernels: `cargo run --release -p gcmx-x86 --example speed`.
//! (The criterion comparison with other crates is the workspace's `benches/aes_gcm.rs`.)

use std::hint::black_box;
use std::time::Instant;

use gcmx_x86::StitchedKey;

fn main() {
    let keys = [
        StitchedKey::new(&[0x42; 32]),
        StitchedKey::new_narrow(&[0x42; 32]),
    ];
    for k in keys.into_iter().flatten() {
        println!("{} (AES-256)", k.kernel_name());
        run(&k);
    }
}

fn run(k: &StitchedKey) {
    let ctr = [0x24; 16];
    for size in [16 << 10, 1 << 20, 64 << 20] {
        let mut buf = vec![0x5a_u8; size];
        let reps = ((1usize << 31) / size).max(3);
        for (name, op) in [("seal", 0), ("open", 1), ("ghash", 2)] {
            let mut best = f64::INFINITY;
            for _ in 0..5 {
                let t = Instant::now();
                for _ in 0..reps / 5 + 1 {
                    let mut y = 0u128;
                    match op {
                        0 => k.seal(&ctr, &mut y, black_box(&mut buf)),
                        1 => k.open(&ctr, &mut y, black_box(&mut buf)),
                        _ => k.ghash(&mut y, black_box(&buf)),
                    }
                    black_box(y);
                }
                let dt = t.elapsed().as_secs_f64() / (reps / 5 + 1) as f64;
                best = best.min(dt);
            }
            println!(
                "{name:5} {:>9} B: {:6.2} GiB/s",
                size,
                size as f64 / best / (1u64 << 30) as f64
            );
        }
    }
}
