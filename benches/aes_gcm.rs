//! AES-GCM throughput on one core: gcmx beside `aws-lc-rs`, `ring` and `aes-gcm` 0.11, all
//! measured in the same run with the same build flags; AES-256 and AES-128, encryption and
//! decryption, 64 B to 64 MiB. Also `gcmx-x86`'s one-call message kernel alone, and the groups
//! behind `Auto`'s threshold and the parallel backend's ceilings, opening into another buffer on
//! all threads, and the powers-of-H tree that joins partial hashes.
//!
//! `cargo bench --bench aes_gcm` (criterion prints medians; `benches/results.md` holds a table).
//! One group: `cargo bench --bench aes_gcm -- aes256gcm-encrypt`. The one-core comparison with
//! the implementations interleaved round by round, in core cycles, beside haberdashery and
//! BoringSSL too, is `crates/gcmx-bench` (`cargo bench -p gcmx-bench --bench one_core`).

use std::hint::black_box;

use aes_gcm::aead::{AeadInOut, KeyInit};
use criterion::{BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group};

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

    /// The typed API on all of rayon's threads (`with_multicore`).
    pub(crate) fn typed_multicore(key: &[u8; 32]) -> gcmx::Aes256Gcm {
        use gcmx::aead::KeyInit;
        gcmx::Aes256Gcm::new(key.into()).with_multicore()
    }

    /// `ct` sealed in place by the typed API; its tag.
    pub(crate) fn typed_seal(k: &gcmx::Aes256Gcm, nonce: &[u8; 12], ct: &mut [u8]) -> [u8; 16] {
        use gcmx::aead::AeadInOut;
        let tag = k.encrypt_inout_detached(nonce.into(), b"", ct.into());
        tag.unwrap().into()
    }

    /// The typed API's one-pass open of `ct` into `pt`.
    pub(crate) fn typed_open_into(
        k: &gcmx::Aes256Gcm,
        nonce: &[u8; 12],
        ct: &[u8],
        pt: &mut [u8],
        tag: &[u8; 16],
    ) {
        k.decrypt_into_detached(nonce.into(), b"", ct, pt, tag.into())
            .unwrap()
    }

    /// The `aead` trait's open of `ct` into `pt` (an `InOutBuf` of two buffers).
    pub(crate) fn typed_open_inout(
        k: &gcmx::Aes256Gcm,
        nonce: &[u8; 12],
        ct: &[u8],
        pt: &mut [u8],
        tag: &[u8; 16],
    ) {
        use gcmx::aead::{AeadInOut, inout::InOutBuf};
        let io = InOutBuf::new(ct, pt).unwrap();
        k.decrypt_inout_detached(nonce.into(), b"", io, tag.into())
            .unwrap()
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

/// One implementation's call on a buffer.
type Call<'a> = Box<dyn Fn(&mut [u8]) + 'a>;

/// Every implementation's seal, in place (tags discarded).
fn sealers(im: &Impls) -> Vec<(&'static str, Call<'_>)> {
    vec![
        (
            "gcmx",
            Box::new(|b: &mut [u8]| {
                black_box(gcmx_api::seal(&im.gcmx, &NONCE, AAD, b));
            }),
        ),
        (
            "gcmx-kernel-alone",
            Box::new(|b: &mut [u8]| {
                black_box(im.kernel.seal_message(&j0(&NONCE), AAD, b));
            }),
        ),
        (
            "aws-lc-rs",
            Box::new(|b: &mut [u8]| {
                let _ = black_box(
                    im.awslc
                        .seal_in_place_separate_tag(
                            aws_lc_rs::aead::Nonce::assume_unique_for_key(NONCE),
                            aws_lc_rs::aead::Aad::from(AAD),
                            b,
                        )
                        .unwrap(),
                );
            }),
        ),
        (
            "ring",
            Box::new(|b: &mut [u8]| {
                let _ = black_box(
                    im.ring
                        .seal_in_place_separate_tag(
                            ring::aead::Nonce::assume_unique_for_key(NONCE),
                            ring::aead::Aad::from(AAD),
                            b,
                        )
                        .unwrap(),
                );
            }),
        ),
        (
            "aes-gcm-0.11",
            Box::new(|b: &mut [u8]| {
                black_box(im.rc_seal(b));
            }),
        ),
    ]
}

/// A valid message of `size` bytes to open, in the two forms the implementations take: the
/// ciphertext (tag apart) and the ciphertext with its tag appended.
struct Sealed {
    ct: Vec<u8>,
    ct_tag: Vec<u8>,
    tag: [u8; 16],
}

impl Sealed {
    fn new(im: &Impls, size: usize) -> Sealed {
        let mut ct = vec![0x5au8; size];
        let tag = gcmx_api::seal(&im.gcmx, &NONCE, AAD, &mut ct);
        let mut ct_tag = ct.clone();
        ct_tag.extend_from_slice(&tag);
        Sealed { ct, ct_tag, tag }
    }
}

/// Every implementation's open of `m` (each call must be given a fresh copy of the input it names:
/// `true` for the ciphertext with its tag appended).
fn openers<'a>(im: &'a Impls, m: &'a Sealed) -> Vec<(&'static str, bool, Call<'a>)> {
    let tag = m.tag;
    vec![
        (
            "gcmx",
            false,
            Box::new(move |b: &mut [u8]| gcmx_api::open(&im.gcmx, &NONCE, AAD, b, &tag)),
        ),
        (
            "gcmx-kernel-alone",
            false,
            Box::new(move |b: &mut [u8]| {
                let want = im.kernel.open_message(&j0(&NONCE), AAD, b);
                assert!(want == tag);
            }),
        ),
        (
            "aws-lc-rs",
            true,
            Box::new(|b: &mut [u8]| {
                im.awslc
                    .open_in_place(
                        aws_lc_rs::aead::Nonce::assume_unique_for_key(NONCE),
                        aws_lc_rs::aead::Aad::from(AAD),
                        b,
                    )
                    .unwrap();
            }),
        ),
        (
            "ring",
            true,
            Box::new(|b: &mut [u8]| {
                im.ring
                    .open_in_place(
                        ring::aead::Nonce::assume_unique_for_key(NONCE),
                        ring::aead::Aad::from(AAD),
                        b,
                    )
                    .unwrap();
            }),
        ),
        (
            "aes-gcm-0.11",
            false,
            Box::new(move |b: &mut [u8]| im.rc_open(b, &tag)),
        ),
    ]
}

fn bench_seal(g: &mut Group<'_>, im: &Impls, size: usize) {
    let mut buf = vec![0x5au8; size];
    for (name, f) in sealers(im) {
        g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
            b.iter(|| f(black_box(&mut buf)))
        });
    }
}

/// Decryption of a valid message: each iteration gets a fresh copy of the ciphertext (the
/// copy is made outside the timed part).
fn bench_open(g: &mut Group<'_>, im: &Impls, size: usize) {
    let batch = if size >= 1 << 20 {
        BatchSize::LargeInput
    } else {
        BatchSize::SmallInput
    };
    let m = Sealed::new(im, size);
    for (name, with_tag, f) in openers(im, &m) {
        let input = if with_tag { &m.ct_tag } else { &m.ct };
        g.bench_with_input(BenchmarkId::new(name, size), &size, |b, _| {
            b.iter_batched_ref(|| input.clone(), |buf| f(black_box(buf)), batch)
        });
    }
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
/// threshold (`gcmx_core::backend::AUTO_PARALLEL_MIN`).
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
    let chunk = gcmx_core::backend::parallel_chunk(size);
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
    let chunk = gcmx_core::backend::parallel_chunk(size);
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

/// Opening into another buffer on all threads (the typed API `with_multicore`): the one-pass
/// `decrypt_into_detached` (each chunk read from the ciphertext and written only to the
/// plaintext), the same with the plaintext written past the caches (`with_uncached_output`),
/// beside the `aead` trait's `decrypt_inout_detached` with the same two buffers
/// (which leaves its output untouched on failure, so it checks the tag first and copies the
/// ciphertext over before decrypting), an in-place seal of the same size (the same work without a
/// second buffer: the peer), and all threads copying the ciphertext into the output with no
/// crypto (the ceiling of any open into another buffer).
fn open_apart(c: &mut Criterion) {
    use rayon::prelude::*;
    let key = [0x42u8; 32];
    let k = gcmx_api::typed_multicore(&key);
    let ku = k.clone().with_uncached_output();
    let mut g = c.benchmark_group("aes256gcm-open-apart-all-threads");
    g.sample_size(20);
    g.warm_up_time(std::time::Duration::from_millis(500));
    g.measurement_time(std::time::Duration::from_secs(2));
    for size in [1024 * 1024, 64 * 1024 * 1024] {
        let mut ct = vec![0x5au8; size];
        let tag = gcmx_api::typed_seal(&k, &NONCE, &mut ct);
        let mut pt = vec![0u8; size];
        let mut inplace = vec![0x5au8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(
            BenchmarkId::new("decrypt_into_detached", size),
            &size,
            |b, _| b.iter(|| gcmx_api::typed_open_into(&k, &NONCE, &ct, black_box(&mut pt), &tag)),
        );
        g.bench_with_input(
            BenchmarkId::new("decrypt_into_detached-uncached", size),
            &size,
            |b, _| b.iter(|| gcmx_api::typed_open_into(&ku, &NONCE, &ct, black_box(&mut pt), &tag)),
        );
        g.bench_with_input(
            BenchmarkId::new("decrypt_inout_detached", size),
            &size,
            |b, _| b.iter(|| gcmx_api::typed_open_inout(&k, &NONCE, &ct, black_box(&mut pt), &tag)),
        );
        g.bench_with_input(
            BenchmarkId::new("seal-in-place-peer", size),
            &size,
            |b, _| b.iter(|| gcmx_api::typed_seal(&k, &NONCE, black_box(&mut inplace))),
        );
        let chunk = gcmx_core::backend::parallel_chunk(size);
        g.bench_with_input(
            BenchmarkId::new("copy-all-threads-ceiling", size),
            &size,
            |b, _| {
                b.iter(|| {
                    black_box(&mut pt)
                        .par_chunks_mut(chunk)
                        .zip(ct.par_chunks(chunk))
                        .for_each(|(d, s)| d.copy_from_slice(s))
                })
            },
        );
    }
    g.finish();
}

/// The powers-of-H tree that joins the partial hashes of a message's chunks (the parallel
/// backend's, and gcmx-cuda's): a 1 MiB message in 16 KiB chunks (its split on 16 threads) and in
/// 128 KiB chunks (on 2), each with the associated data's run before and the length block after.
/// Beside each, its floor: the joins' multiplications alone, one per run.
fn powers_tree(c: &mut Criterion) {
    use gcmx_core::backend::{HashKey, Partial, dot, tree_reduce};
    let hk = HashKey::new([0x42; 16]);
    let mut g = c.benchmark_group("powers-of-h-tree");
    g.sample_size(30);
    g.warm_up_time(std::time::Duration::from_millis(300));
    g.measurement_time(std::time::Duration::from_secs(1));
    for chunks in [8u64, 64] {
        let mut parts = vec![Partial {
            value: 7,
            blocks: 1,
        }];
        parts.extend((0..chunks).map(|i| Partial {
            value: u128::from(i) * 0x9e37_79b9_7f4a_7c15 + 1,
            blocks: 65_536 / chunks,
        }));
        parts.push(Partial {
            value: 3,
            blocks: 1,
        });
        let n = parts.len();
        g.bench_with_input(BenchmarkId::new("tree_reduce", n), &n, |b, _| {
            b.iter(|| tree_reduce(&hk, black_box(&parts)))
        });
        g.bench_with_input(BenchmarkId::new("joins-alone-floor", n), &n, |b, _| {
            b.iter(|| {
                black_box(&parts)
                    .iter()
                    .fold(0u128, |s, p| dot(s, p.value) ^ p.value)
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    one_core,
    key_setup,
    backends,
    threshold,
    memory_ceiling,
    parallel_ceiling,
    open_apart,
    powers_tree
);
fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
