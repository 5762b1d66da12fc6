//! `Gcm::encrypt_batch` / `decrypt_batch` agree with one-by-one calls on every backend, and
//! one forged job fails the whole batch with every buffer zeroed.
//!
//! Seeded RNG; replay with `GCMX_TEST_SEED=<seed> cargo test --release --test batch`.

mod common;

use common::{TAG_LENGTHS, backends, gcm};
use gcmx::{Gcm, GcmError, OpenJob, SealJob};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

fn seed(test: &str) -> u64 {
    let base = match std::env::var("GCMX_TEST_SEED") {
        Ok(s) => s.trim().parse().expect("GCMX_TEST_SEED is a decimal u64"),
        Err(_) => rand::rng().random(),
    };
    println!("{test}: seed {base} (replay with GCMX_TEST_SEED={base})");
    base
}

#[derive(Clone)]
struct Spec {
    nonce: Vec<u8>,
    aad: Vec<u8>,
    pt: Vec<u8>,
    tag_len: usize,
}

fn bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

fn specs(rng: &mut StdRng, n: usize, max_len: usize) -> Vec<Spec> {
    (0..n)
        .map(|i| {
            let len = match i % 10 {
                0 => 0,
                1 => rng.random_range(1..16),
                2 => 16 * rng.random_range(1..64),
                _ => rng.random_range(0..=max_len),
            };
            let nonce_len = if rng.random_bool(0.7) {
                12
            } else {
                rng.random_range(1..=80)
            };
            let aad_len = rng.random_range(0..=100);
            Spec {
                nonce: bytes(rng, nonce_len),
                aad: bytes(rng, aad_len),
                pt: bytes(rng, len),
                tag_len: TAG_LENGTHS[rng.random_range(0..TAG_LENGTHS.len())],
            }
        })
        .collect()
}

/// Per-job ciphertexts and tags.
type Sealed = (Vec<Vec<u8>>, Vec<Vec<u8>>);

/// One-by-one reference: (ciphertexts, tags).
fn one_by_one(g: &Gcm, specs: &[Spec]) -> Sealed {
    let mut cts = Vec::new();
    let mut tags = Vec::new();
    for s in specs {
        let mut buf = s.pt.clone();
        let mut tag = vec![0u8; s.tag_len];
        g.encrypt_detached(&s.nonce, &s.aad, &mut buf, &mut tag)
            .expect("encrypt_detached");
        let mut back = buf.clone();
        g.decrypt_detached(&s.nonce, &s.aad, &mut back, &tag)
            .expect("decrypt_detached");
        assert!(back == s.pt, "one-by-one round trip");
        cts.push(buf);
        tags.push(tag);
    }
    (cts, tags)
}

fn seal_batch(g: &Gcm, specs: &[Spec]) -> Result<Sealed, GcmError> {
    let mut bufs: Vec<Vec<u8>> = specs.iter().map(|s| s.pt.clone()).collect();
    let mut tags: Vec<Vec<u8>> = specs.iter().map(|s| vec![0u8; s.tag_len]).collect();
    let mut jobs: Vec<SealJob<'_>> = bufs
        .iter_mut()
        .zip(tags.iter_mut())
        .zip(specs)
        .map(|((buf, tag), s)| SealJob {
            nonce: &s.nonce,
            aad: &s.aad,
            buf,
            tag,
        })
        .collect();
    g.encrypt_batch(&mut jobs)?;
    drop(jobs);
    Ok((bufs, tags))
}

/// Runs `decrypt_batch` over (cts, tags); returns the result and the buffers afterwards.
fn open_batch(
    g: &Gcm,
    specs: &[Spec],
    cts: &[Vec<u8>],
    tags: &[Vec<u8>],
) -> (Result<(), GcmError>, Vec<Vec<u8>>) {
    let mut bufs: Vec<Vec<u8>> = cts.to_vec();
    let mut jobs: Vec<OpenJob<'_>> = bufs
        .iter_mut()
        .zip(tags)
        .zip(specs)
        .map(|((buf, tag), s)| OpenJob {
            nonce: &s.nonce,
            aad: &s.aad,
            buf,
            tag,
        })
        .collect();
    let r = g.decrypt_batch(&mut jobs);
    drop(jobs);
    (r, bufs)
}

fn run_batch_case(rng: &mut StdRng, n: usize, max_len: usize) {
    let key_len = [16, 24, 32][rng.random_range(0..3)];
    let key = bytes(rng, key_len);
    let specs = specs(rng, n, max_len);
    for backend in backends() {
        let g = gcm(&key, backend);
        let ctx = format!(
            "[{backend:?}] {n} jobs up to {max_len} B, {}-byte key",
            key.len()
        );
        let (want_ct, want_tag) = one_by_one(&g, &specs);

        let (cts, tags) =
            seal_batch(&g, &specs).unwrap_or_else(|e| panic!("{ctx}: encrypt_batch: {e}"));
        for i in 0..n {
            assert!(
                cts[i] == want_ct[i],
                "{ctx}: job {i}: batch ciphertext differs"
            );
            assert_eq!(tags[i], want_tag[i], "{ctx}: job {i}: batch tag differs");
        }

        let (r, pts) = open_batch(&g, &specs, &cts, &tags);
        assert_eq!(r, Ok(()), "{ctx}: decrypt_batch");
        for i in 0..n {
            assert!(
                pts[i] == specs[i].pt,
                "{ctx}: job {i}: batch plaintext differs"
            );
        }

        // One forged job (tag, ciphertext or AAD changed) fails the batch; every buffer holds its
        // ciphertext again.
        let mut victims = vec![0, n - 1, rng.random_range(0..n)];
        victims.dedup();
        for v in victims {
            let mut bad_tags = tags.clone();
            let mut bad_cts = cts.clone();
            let mut bad_specs = specs.clone();
            match rng.random_range(0..3) {
                0 if !bad_cts[v].is_empty() => {
                    let bit = rng.random_range(0..bad_cts[v].len() * 8);
                    bad_cts[v][bit / 8] ^= 1 << (bit % 8);
                }
                1 if !bad_specs[v].aad.is_empty() => bad_specs[v].aad[0] ^= 0x80,
                _ => {
                    let bit = rng.random_range(0..bad_tags[v].len() * 8);
                    bad_tags[v][bit / 8] ^= 1 << (bit % 8);
                }
            }
            let (r, bufs) = open_batch(&g, &bad_specs, &bad_cts, &bad_tags);
            assert_eq!(r, Err(GcmError::Authentication), "{ctx}: job {v} forged");
            for (i, b) in bufs.iter().enumerate() {
                assert!(
                    *b == bad_cts[i],
                    "{ctx}: job {v} forged, but job {i}'s buffer is not its ciphertext again"
                );
            }
        }
    }
}

#[test]
fn batch_matches_one_by_one() {
    let mut rng = StdRng::seed_from_u64(seed("batch_matches_one_by_one"));
    run_batch_case(&mut rng, 1, 1000);
    run_batch_case(&mut rng, 7, 100);
    run_batch_case(&mut rng, 64, 5000);
    run_batch_case(&mut rng, 1000, 64); // many tiny messages
    run_batch_case(&mut rng, 12, 700_000); // a few large ones (multi-core / multi-chunk paths)
}

#[test]
fn empty_batch_is_ok() {
    for backend in backends() {
        let g = gcm(&[1u8; 32], backend);
        assert_eq!(g.encrypt_batch(&mut []), Ok(()), "[{backend:?}]");
        assert_eq!(g.decrypt_batch(&mut []), Ok(()), "[{backend:?}]");
    }
}

#[test]
fn batch_rejects_bad_parameters() {
    for backend in backends() {
        let g = gcm(&[2u8; 16], backend);
        let (n1, n0) = ([5u8; 12], [0u8; 0]);
        let (mut b1, mut b2) = (vec![1u8; 40], vec![2u8; 40]);
        let (mut t1, mut t5) = ([0u8; 16], [0u8; 5]);
        let mut jobs = [
            SealJob {
                nonce: &n1,
                aad: b"",
                buf: &mut b1,
                tag: &mut t1,
            },
            SealJob {
                nonce: &n1,
                aad: b"",
                buf: &mut b2,
                tag: &mut t5,
            },
        ];
        assert_eq!(
            g.encrypt_batch(&mut jobs),
            Err(GcmError::TagLength(5)),
            "[{backend:?}]"
        );

        let (mut b1, mut b2) = (vec![1u8; 40], vec![2u8; 40]);
        let (mut t1, mut t2) = ([0u8; 16], [0u8; 16]);
        let mut jobs = [
            SealJob {
                nonce: &n1,
                aad: b"",
                buf: &mut b1,
                tag: &mut t1,
            },
            SealJob {
                nonce: &n0,
                aad: b"",
                buf: &mut b2,
                tag: &mut t2,
            },
        ];
        assert_eq!(
            g.encrypt_batch(&mut jobs),
            Err(GcmError::NonceLength(0)),
            "[{backend:?}]"
        );

        let (mut b1, mut b2) = (vec![1u8; 40], vec![2u8; 40]);
        let (t1, t3) = ([0u8; 16], [0u8; 3]);
        let mut jobs = [
            OpenJob {
                nonce: &n1,
                aad: b"",
                buf: &mut b1,
                tag: &t1,
            },
            OpenJob {
                nonce: &n1,
                aad: b"",
                buf: &mut b2,
                tag: &t3,
            },
        ];
        assert_eq!(
            g.decrypt_batch(&mut jobs),
            Err(GcmError::TagLength(3)),
            "[{backend:?}]"
        );
    }
}

/// `Gcm` is `Send + Sync`: one instance shared by several threads gives the same results as
/// sequential use.
#[test]
fn shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Gcm>();
    let mut rng = StdRng::seed_from_u64(seed("shared_across_threads"));
    let specs = specs(&mut rng, 32, 20_000);
    for backend in backends() {
        let g = gcm(&[9u8; 24], backend);
        let (want_ct, want_tag) = one_by_one(&g, &specs);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (g, specs, want_ct, want_tag) = (&g, &specs, &want_ct, &want_tag);
                s.spawn(move || {
                    for (i, sp) in specs.iter().enumerate().skip(t).step_by(4) {
                        let mut buf = sp.pt.clone();
                        let mut tag = vec![0u8; sp.tag_len];
                        g.encrypt_detached(&sp.nonce, &sp.aad, &mut buf, &mut tag)
                            .unwrap();
                        assert!(
                            buf == want_ct[i] && tag == want_tag[i],
                            "[{backend:?}] job {i}"
                        );
                    }
                });
            }
        });
    }
}
