//! Helpers shared by the integration tests (each test binary includes this with `mod common;`).
#![allow(dead_code)]

use gcmx::{Backend, Gcm};

/// Every backend the conformance tests must run through.
///
/// `Backend::Auto` is listed too: it must agree with the explicit ones whatever it picks.
#[allow(unused_mut)]
pub(crate) fn backends() -> Vec<Backend> {
    let mut v = vec![Backend::Cpu, Backend::CpuParallel, Backend::Auto];
    // With the `cuda` feature and a device present, every test covers the GPU too.
    #[cfg(feature = "cuda")]
    {
        if gcmx::cuda::device_info(0).is_ok() {
            v.push(Backend::Cuda);
        } else {
            eprintln!("GPU tests: no CUDA device found; Backend::Cuda not covered by this run");
        }
    }
    v
}

/// A `Gcm` for `key` on `backend`; panics with context if the constructor refuses a valid key.
pub(crate) fn gcm(key: &[u8], backend: Backend) -> Gcm {
    match Gcm::with_backend(key, backend) {
        Ok(g) => g,
        Err(e) => panic!(
            "Gcm::with_backend(<{} byte key>, {backend:?}) failed: {e}",
            key.len()
        ),
    }
}

/// Lower-case hex.
pub(crate) fn hx(b: &[u8]) -> String {
    hex::encode(b)
}

/// Decode hex (empty string = empty vector); panics on malformed input.
pub(crate) fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.trim()).unwrap_or_else(|e| panic!("bad hex {s:?}: {e}"))
}

/// Tag lengths (bytes) that `Gcm` accepts: SP 800-38D's 12 to 16, and its short 4 and 8 only
/// with the `hazmat` feature.
#[cfg(feature = "hazmat")]
pub(crate) const TAG_LENGTHS: &[usize] = &[4, 8, 12, 13, 14, 15, 16];
/// Tag lengths (bytes) that `Gcm` accepts: SP 800-38D's 12 to 16, and its short 4 and 8 only
/// with the `hazmat` feature.
#[cfg(not(feature = "hazmat"))]
pub(crate) const TAG_LENGTHS: &[usize] = &[12, 13, 14, 15, 16];

/// GHASH-field product (SP 800-38D, Algorithm 1): blocks as big-endian u128, x^0 = MSB.
pub(crate) fn gf_mul(x: u128, y: u128) -> u128 {
    let (mut z, mut v) = (0u128, y);
    for i in 0..128 {
        if (x >> (127 - i)) & 1 == 1 {
            z ^= v;
        }
        let lsb = v & 1;
        v >>= 1;
        if lsb == 1 {
            v ^= 0xe1 << 120;
        }
    }
    z
}

/// a^-1 = a^(2^128 - 2).
pub(crate) fn gf_inv(a: u128) -> u128 {
    let mut r = 1u128 << 127; // the field's 1
    for _ in 0..127 {
        r = gf_mul(gf_mul(r, r), a);
    }
    gf_mul(r, r)
}

/// `H = AES_K(0^128)` for a 16-, 24- or 32-byte key, by the `aes` crate.
pub(crate) fn hash_key(key: &[u8]) -> u128 {
    use aes_gcm::aes::cipher::{BlockCipherEncrypt, KeyInit};
    let mut h = aes_gcm::aes::Block::default();
    match key.len() {
        16 => aes_gcm::aes::Aes128::new_from_slice(key)
            .unwrap()
            .encrypt_block(&mut h),
        24 => aes_gcm::aes::Aes192::new_from_slice(key)
            .unwrap()
            .encrypt_block(&mut h),
        32 => aes_gcm::aes::Aes256::new_from_slice(key)
            .unwrap()
            .encrypt_block(&mut h),
        n => panic!("key length {n}"),
    }
    u128::from_be_bytes(h.into())
}

/// A 16-byte nonce whose J0 = GHASH_H(nonce || 0^64 || [128]_64) is exactly `j0`:
/// J0 = (N*H ^ L)*H, so N = (J0*H^-1 ^ L)*H^-1.
pub(crate) fn nonce_for_j0(key: &[u8], j0: u128) -> [u8; 16] {
    let h = hash_key(key);
    let hi = gf_inv(h);
    assert_eq!(gf_mul(h, hi), 1u128 << 127, "field inverse");
    let l = 128u128; // 0^64 || [len(N) in bits]_64
    (gf_mul(gf_mul(j0, hi) ^ l, hi)).to_be_bytes()
}

/// The seed of a randomized test: `GCMX_TEST_SEED` if set, else a fresh one; printed so that a
/// failure can be replayed.
pub(crate) fn seed() -> u64 {
    use rand::Rng;
    let s = match std::env::var("GCMX_TEST_SEED") {
        Ok(s) => s.trim().parse().expect("GCMX_TEST_SEED is a decimal u64"),
        Err(_) => rand::rng().random(),
    };
    println!("seed {s} (replay with GCMX_TEST_SEED={s})");
    s
}

/// `n` random bytes from `rng`.
pub(crate) fn bytes(rng: &mut rand::rngs::StdRng, n: usize) -> Vec<u8> {
    use rand::RngCore;
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}
