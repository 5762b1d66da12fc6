//! AES-GCM throughput on one core: gcmx beside `aws-lc-rs`, `ring` and `aes-gcm` 0.11, all
//! measured in the same run with the same build flags; AES-256 and AES-128, encryption and
//! decryption, 64 B to 64 MiB. Also `gcmx-x86`'s one-call message kernel alone, and the groups
//! behind `Auto`'s threshold and the parallel backend's ceilings.
//!
//! `cargo bench --bench aes_gcm` (criterion prints medians; `benches/results.md` holds a table).
//! One group: `cargo bench --bench aes_gcm -- aes256gcm-encrypt`.

use std::hint::black_box;

use aes_gcm::aead::{AeadInOut, KeyInit};
use criterion::{
    BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};

const NONCE: [u8; 12] = [0x24; 12];
const AAD: &[u8] = b"";

/// gcmx through its public API: every bench reaches gcmx only through these few lines.
mod gcmx_api {
    pub(crate) use gcmx::Backend;

    pub(crate) struct Key(gcmx::Gcm);

    pub(crate) fn key(key: &[u8], backend: Backend) -> Key {
        Key(gcmx::Gcm::with_backend(key, backend).unwrap())
    }

    pub(crate) fn seal(k: &Key, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8]) -> [u8; 16] {
        let mut tag = [0u8; 16];
        k.0.encrypt_detached(nonce, aad, buf, &mut tag).unwrap();
        tag
    }

    pub(crate) fn open(k: &Key, nonce: &[u8; 12], aad: &[u8], buf: &mut [u8], tag: &[u8; 16]) {
        k.0.decrypt_detached(nonce, aad, buf, tag).unwrap()
    }
}

fn sizes() -> [usize; 5] {
    [64, 1024, 16 * 1024, 1024 * 1024, 64 * 1024 * 1024]
}

/// J0 for a 12-byte nonce: `nonce ‖ 0^31 ‖ 1`.
fn j0(nonce: &[u8; 12]) -> [u8; 16] {
    let mut j = [0u8; 16];
    j[..12].copy_from_slice(nonce);
    j[15] = 1;
    j
}

/// One key under every implementation.
struct Impls {
    gcmx: gcmx_api::Key,
    kernel: gcmx_x86::StitchedKey,
    awslc: aws_lc_rs::aead::LessSafeKey,
    ring: ring::aead::LessSafeKey,
    rc: RustCrypto,
}

enum RustCrypto {
    A128(Box<aes_gcm::Aes128Gcm>),
    A256(Box<aes_gcm::Aes256Gcm>),
}

impl Impls {
    fn new(key: &[u8]) -> Impls {
        let (awslc_alg, ring_alg) = match key.len() {
            16 => (&aws_lc_rs::aead::AES_128_GCM, &ring::aead::AES_128_GCM),
            _ => (&aws_lc_rs::aead::AES_256_GCM, &ring::aead::AES_256_GCM),
        };
        Impls {
            gcmx: gcmx_api::key(key, gcmx_api::Backend::Cpu),
            kernel: gcmx_x86::StitchedKey::new(key).expect("x86-64 with AES-NI"),
            awslc: aws_lc_rs::aead::LessSafeKey::new(
                aws_lc_rs::aead::UnboundKey::new(awslc_alg, key).unwrap(),
            ),
            ring: ring::aead::LessSafeKey::new(ring::aead::UnboundKey::new(ring_alg, key).unwrap()),
            rc: match key.len() {
                16 => RustCrypto::A128(Box::new(aes_gcm::Aes128Gcm::new_from_slice(key).unwrap())),
                _ => RustCrypto::A256(Box::new(aes_gcm::Aes256Gcm::new_from_slice(key).unwrap())),
            },
        }
    }

    fn rc_seal(&self, buf: &mut [u8]) -> [u8; 16] {
        let t = match &self.rc {
            RustCrypto::A128(c) => c.encrypt_inout_detached(&NONCE.into(), AAD, buf.into()),
            RustCrypto::A256(c) => c.encrypt_inout_detached(&NONCE.into(), AAD, buf.into()),
        };
        t.unwrap().into()
    }

    fn rc_open(&self, buf: &mut [u8], tag: &[u8; 16]) {
        match &self.rc {
            RustCrypto::A128(c) => {
                c.decrypt_inout_detached(&NONCE.into(), AAD, buf.into(), tag.into())
            }
            RustCrypto::A256(c) => {
                c.decrypt_inout_detached(&NONCE.into(), AAD, buf.into(), tag.into())
            }
        }
        .unwrap()
    }
}

/// Encryption and decryption, one core, every implementation, every size.
fn one_core(c: &mut Criterion) {
    for (bits, key) in [(256, &[0x42u8; 32][..]), (128, &[0x42u8; 16][..])] {
        let im = Impls::new(key);
        for seal in [true, false] {
            let dir = if seal { "encrypt" } else { "decrypt" };
            let mut g = c.benchmark_group(format!("aes{bits}gcm-{dir}"));
            g.sample_size(20);
            g.sampling_mode(SamplingMode::Flat);
            g.warm_up_time(std::time::Duration::from_millis(400));
            g.measurement_time(std::time::Duration::from_millis(1500));
            for size in sizes() {
                g.throughput(Throughput::Bytes(size as u64));
                if seal {
                    bench_seal(&mut g, &im, size);
                } else {
                    bench_open(&mut g, &im, size);
                }
            }
            g.finish();
        }
    }
}

type Group<'a> = criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>;

fn bench_seal(g: &mut Group<'_>, im: &Impls, size: usize) {
    let mut buf = vec![0x5au8; size];
    let mut run = |name: &str, f: &dyn Fn(&mut [u8])| {
        g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
            b.iter(|| f(black_box(&mut buf)))
        });
    };
    run("gcmx", &|b| {
        black_box(gcmx_api::seal(&im.gcmx, &NONCE, AAD, b));
    });
    run("gcmx-kernel-alone", &|b| {
        black_box(im.kernel.seal_message(&j0(&NONCE), AAD, b));
    });
    run("aws-lc-rs", &|b| {
        let _ = black_box(
            im.awslc
                .seal_in_place_separate_tag(
                    aws_lc_rs::aead::Nonce::assume_unique_for_key(NONCE),
                    aws_lc_rs::aead::Aad::from(AAD),
                    b,
                )
                .unwrap(),
        );
    });
    run("ring", &|b| {
        let _ = black_box(
            im.ring
                .seal_in_place_separate_tag(
                    ring::aead::Nonce::assume_unique_for_key(NONCE),
                    ring::aead::Aad::from(AAD),
                    b,
                )
                .unwrap(),
        );
    });
    run("aes-gcm-0.11", &|b| {
        black_box(im.rc_seal(b));
    });
}

/// Decryption of a valid message: each iteration gets a fresh copy of the ciphertext (the
/// copy is made outside the timed part).
fn bench_open(g: &mut Group<'_>, im: &Impls, size: usize) {
    let pt = vec![0x5au8; size];
    let batch = if size >= 1 << 20 {
        BatchSize::LargeInput
    } else {
        BatchSize::SmallInput
    };
    // ciphertext and tag (the same bytes from every implementation)
    let mut ct = pt.clone();
    let tag = gcmx_api::seal(&im.gcmx, &NONCE, AAD, &mut ct);
    let mut ct_tag = ct.clone();
    ct_tag.extend_from_slice(&tag);

    let mut run = |name: &str, input: &Vec<u8>, f: &dyn Fn(&mut [u8])| {
        g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
            b.iter_batched_ref(|| input.clone(), |buf| f(black_box(buf)), batch)
        });
    };
    run("gcmx", &ct, &|b| {
        gcmx_api::open(&im.gcmx, &NONCE, AAD, b, &tag)
    });
    run("gcmx-kernel-alone", &ct, &|b| {
        let want = im.kernel.open_message(&j0(&NONCE), AAD, b);
        assert!(want == tag);
    });
    run("aws-lc-rs", &ct_tag, &|b| {
        im.awslc
            .open_in_place(
                aws_lc_rs::aead::Nonce::assume_unique_for_key(NONCE),
                aws_lc_rs::aead::Aad::from(AAD),
                b,
            )
            .unwrap();
    });
    run("ring", &ct_tag, &|b| {
        im.ring
            .open_in_place(
                ring::aead::Nonce::assume_unique_for_key(NONCE),
                ring::aead::Aad::from(AAD),
                b,
            )
            .unwrap();
    });
    run("aes-gcm-0.11", &ct, &|b| im.rc_open(b, &tag));
}

/// Key set-up, for users that build a key per message (xaes-256-gcm derives one per message):
/// a new key from its bytes, ready to seal, dropped again.
fn key_setup(c: &mut Criterion) {
    for (bits, key) in [(256, &[0x42u8; 32][..]), (128, &[0x42u8; 16][..])] {
        let mut g = c.benchmark_group(format!("aes{bits}gcm-key-setup"));
        g.sample_size(20);
        g.warm_up_time(std::time::Duration::from_millis(300));
        g.measurement_time(std::time::Duration::from_secs(1));
        let (awslc_alg, ring_alg) = match bits {
            128 => (&aws_lc_rs::aead::AES_128_GCM, &ring::aead::AES_128_GCM),
            _ => (&aws_lc_rs::aead::AES_256_GCM, &ring::aead::AES_256_GCM),
        };
        g.bench_function("gcmx", |b| {
            b.iter(|| gcmx_api::key(black_box(key), gcmx_api::Backend::Cpu))
        });
        g.bench_function("gcmx-kernel-alone", |b| {
            b.iter(|| gcmx_x86::StitchedKey::new(black_box(key)))
        });
        g.bench_function("aws-lc-rs", |b| {
            b.iter(|| {
                aws_lc_rs::aead::LessSafeKey::new(
                    aws_lc_rs::aead::UnboundKey::new(awslc_alg, black_box(key)).unwrap(),
                )
            })
        });
        g.bench_function("ring", |b| {
            b.iter(|| {
                ring::aead::LessSafeKey::new(
                    ring::aead::UnboundKey::new(ring_alg, black_box(key)).unwrap(),
                )
            })
        });
        g.bench_function("aes-gcm-0.11", |b| {
            b.iter(|| match bits {
                128 => drop(black_box(
                    aes_gcm::Aes128Gcm::new_from_slice(black_box(key)).unwrap(),
                )),
                _ => drop(black_box(
                    aes_gcm::Aes256Gcm::new_from_slice(black_box(key)).unwrap(),
                )),
            })
        });
        g.finish();
    }
}

/// The multi-core backends on large messages (AES-256 encryption), beside the serial one.
fn backends(c: &mut Criterion) {
    let key = [0x42u8; 32];
    let mut g = c.benchmark_group("aes256gcm-encrypt-backends");
    g.sample_size(20);
    g.sampling_mode(SamplingMode::Flat);
    g.warm_up_time(std::time::Duration::from_millis(500));
    g.measurement_time(std::time::Duration::from_secs(2));
    for size in [1024 * 1024, 64 * 1024 * 1024] {
        let mut buf = vec![0x5au8; size];
        g.throughput(Throughput::Bytes(size as u64));
        for (name, backend) in [
            ("gcmx-cpu", gcmx_api::Backend::Cpu),
            ("gcmx-cpu-parallel", gcmx_api::Backend::CpuParallel),
            ("gcmx-auto", gcmx_api::Backend::Auto),
        ] {
            let k = gcmx_api::key(&key, backend);
            g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
                b.iter(|| gcmx_api::seal(&k, &NONCE, AAD, black_box(&mut buf)))
            });
        }
    }
    g.finish();
}

/// Where the parallel backend starts to beat the serial one: the measurement behind `Auto`'s
/// threshold (`gcmx_core::engine::AUTO_PARALLEL_MIN`).
fn threshold(c: &mut Criterion) {
    let key = [0x42u8; 32];
    let mut g = c.benchmark_group("auto-threshold");
    g.sample_size(30);
    g.warm_up_time(std::time::Duration::from_millis(300));
    g.measurement_time(std::time::Duration::from_secs(1));
    let serial = gcmx_api::key(&key, gcmx_api::Backend::Cpu);
    let parallel = gcmx_api::key(&key, gcmx_api::Backend::CpuParallel);
    for size in [
        16 << 10,
        32 << 10,
        64 << 10,
        128 << 10,
        256 << 10,
        512 << 10,
    ] {
        let mut buf = vec![0x5au8; size];
        g.throughput(Throughput::Bytes(size as u64));
        for (name, k) in [("serial", &serial), ("parallel", &parallel)] {
            g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
                b.iter(|| gcmx_api::seal(k, &NONCE, AAD, black_box(&mut buf)))
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
    let key = [0x42u8; 32];
    let mut g = c.benchmark_group("parallel-ceiling");
    g.sample_size(20);
    g.warm_up_time(std::time::Duration::from_millis(500));
    g.measurement_time(std::time::Duration::from_secs(3));
    let serial = gcmx_api::key(&key, gcmx_api::Backend::Cpu);
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
                    gcmx_api::seal(&serial, &NONCE, AAD, c);
                })
            })
        },
    );
    g.finish();
}

criterion_group!(
    benches,
    one_core,
    key_setup,
    backends,
    threshold,
    memory_ceiling,
    parallel_ceiling
);
criterion_main!(benches);
