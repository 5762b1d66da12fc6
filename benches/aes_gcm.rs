//! AES-256-GCM encryption throughput: gcmx's CPU backends beside `aes-gcm` 0.11, `ring` and
//! `aws-lc-rs`, all measured in the same run with the same build flags.
//!
//! `cargo bench --bench aes_gcm` (criterion prints medians; `benches/results.md` holds a table).

use std::hint::black_box;

use aes_gcm::aead::{AeadInOut, KeyInit};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gcmx::{Backend, Gcm};

const KEY: [u8; 32] = [0x42; 32];
const NONCE: [u8; 12] = [0x24; 12];

fn sizes() -> Vec<usize> {
    vec![16 * 1024, 1024 * 1024, 64 * 1024 * 1024]
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("aes256gcm-encrypt");
    g.sample_size(20);
    g.warm_up_time(std::time::Duration::from_millis(500));
    g.measurement_time(std::time::Duration::from_secs(3));

    let serial = Gcm::with_backend(&KEY, Backend::Cpu).unwrap();
    let parallel = Gcm::with_backend(&KEY, Backend::CpuParallel).unwrap();
    let auto = Gcm::with_backend(&KEY, Backend::Auto).unwrap();
    let reference = aes_gcm::Aes256Gcm::new(&KEY.into());
    let ring_key = ring::aead::LessSafeKey::new(
        ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, &KEY).unwrap(),
    );
    let awslc_key = aws_lc_rs::aead::LessSafeKey::new(
        aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::AES_256_GCM, &KEY).unwrap(),
    );

    for size in sizes() {
        let mut buf = vec![0x5au8; size];
        let mut tag = [0u8; 16];
        g.throughput(Throughput::Bytes(size as u64));
        for (name, gcm) in [
            ("gcmx-cpu", &serial),
            ("gcmx-cpu-parallel", &parallel),
            ("gcmx-auto", &auto),
        ] {
            g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
                b.iter(|| {
                    gcm.encrypt_detached(&NONCE, b"", black_box(&mut buf), &mut tag)
                        .unwrap()
                })
            });
        }
        g.bench_with_input(BenchmarkId::new("aes-gcm-0.11", size), &size, |b, _| {
            b.iter(|| {
                reference
                    .encrypt_inout_detached(
                        &NONCE.into(),
                        b"",
                        black_box(buf.as_mut_slice()).into(),
                    )
                    .unwrap()
            })
        });
        g.bench_with_input(BenchmarkId::new("ring", size), &size, |b, _| {
            b.iter(|| {
                ring_key
                    .seal_in_place_separate_tag(
                        ring::aead::Nonce::assume_unique_for_key(NONCE),
                        ring::aead::Aad::empty(),
                        black_box(buf.as_mut_slice()),
                    )
                    .unwrap()
            })
        });
        g.bench_with_input(BenchmarkId::new("aws-lc-rs", size), &size, |b, _| {
            b.iter(|| {
                awslc_key
                    .seal_in_place_separate_tag(
                        aws_lc_rs::aead::Nonce::assume_unique_for_key(NONCE),
                        aws_lc_rs::aead::Aad::empty(),
                        black_box(buf.as_mut_slice()),
                    )
                    .unwrap()
            })
        });
    }
    g.finish();
}

/// Where the parallel backend starts to beat the serial one: the measurement behind `Auto`'s
/// threshold (`gcmx_core::engine::AUTO_PARALLEL_MIN`).
fn threshold(c: &mut Criterion) {
    let mut g = c.benchmark_group("auto-threshold");
    g.sample_size(30);
    g.warm_up_time(std::time::Duration::from_millis(300));
    g.measurement_time(std::time::Duration::from_secs(1));
    let serial = Gcm::with_backend(&KEY, Backend::Cpu).unwrap();
    let parallel = Gcm::with_backend(&KEY, Backend::CpuParallel).unwrap();
    for size in [
        16 << 10,
        32 << 10,
        64 << 10,
        128 << 10,
        256 << 10,
        512 << 10,
    ] {
        let mut buf = vec![0x5au8; size];
        let mut tag = [0u8; 16];
        g.throughput(Throughput::Bytes(size as u64));
        for (name, gcm) in [("serial", &serial), ("parallel", &parallel)] {
            g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
                b.iter(|| {
                    gcm.encrypt_detached(&NONCE, b"", black_box(&mut buf), &mut tag)
                        .unwrap()
                })
            });
        }
    }
    g.finish();
}

/// The memory ceiling for in-place encryption of a 64 MiB message: XOR every byte with a
/// constant (one read and one write per byte, as in-place AES-GCM), on one thread and on all of
/// rayon's threads with the parallel backend's chunk size. Printed beside the parallel backend,
/// it says how much of its shortfall from `cores × serial` is memory bandwidth.
fn memory_ceiling(c: &mut Criterion) {
    use rayon::prelude::*;
    let mut g = c.benchmark_group("memory-ceiling");
    g.sample_size(20);
    g.warm_up_time(std::time::Duration::from_millis(500));
    g.measurement_time(std::time::Duration::from_secs(3));
    let size = 64 * 1024 * 1024;
    let chunk = gcmx_core::cipher::parallel_chunk(size);
    let mut buf = vec![0x5au8; size];
    g.throughput(Throughput::Bytes(size as u64));
    g.bench_with_input(BenchmarkId::new("xor-1-thread", size), &size, |b, _| {
        b.iter(|| black_box(&mut buf).iter_mut().for_each(|x| *x ^= 0x3c))
    });
    g.bench_with_input(BenchmarkId::new("xor-all-threads", size), &size, |b, _| {
        b.iter(|| {
            black_box(&mut buf)
                .par_chunks_mut(chunk)
                .for_each(|c| c.iter_mut().for_each(|x| *x ^= 0x3c))
        })
    });
    g.finish();
}

/// The ceiling of the parallel backend on this machine: the same 64 MiB cut into the same chunks,
/// but as independent messages (each chunk sealed by the serial backend on a rayon task, no
/// counter offsets, no joining of partial hashes). gcmx's parallel backend can at best match it;
/// what separates this from `cores x serial` is the machine (all-core clocks, shared cores and
/// caches, memory), not the splitting.
fn parallel_ceiling(c: &mut Criterion) {
    use rayon::prelude::*;
    let mut g = c.benchmark_group("parallel-ceiling");
    g.sample_size(20);
    g.warm_up_time(std::time::Duration::from_millis(500));
    g.measurement_time(std::time::Duration::from_secs(3));
    let serial = Gcm::with_backend(&KEY, Backend::Cpu).unwrap();
    let size = 64 * 1024 * 1024;
    let chunk = gcmx_core::cipher::parallel_chunk(size);
    let mut buf = vec![0x5au8; size];
    g.throughput(Throughput::Bytes(size as u64));
    g.bench_with_input(
        BenchmarkId::new("independent-chunks-all-threads", size),
        &size,
        |b, _| {
            b.iter(|| {
                black_box(&mut buf).par_chunks_mut(chunk).for_each(|c| {
                    let mut tag = [0u8; 16];
                    serial.encrypt_detached(&NONCE, b"", c, &mut tag).unwrap()
                })
            })
        },
    );
    g.finish();
}

criterion_group!(benches, bench, threshold, memory_ceiling, parallel_ceiling);
criterion_main!(benches);
