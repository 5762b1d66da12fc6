//! What the test programs share: deterministic test data, the reference (the `aes`, `ctr` and
//! `ghash` crates) and a tally that fails the program at its end.
#![allow(dead_code)]

use aes::cipher::{BlockCipherEncrypt, KeyInit, KeyIvInit, StreamCipher};
use ghash::GHash;
use ghash::universal_hash::UniversalHash;

/// splitmix64: deterministic test data.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// Random bytes, a random length in `0..=max`.
    pub(crate) fn upto(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        self.bytes(n)
    }

    /// A random AES key of a random size.
    pub(crate) fn key(&mut self) -> Vec<u8> {
        let n = [16, 24, 32][self.below(3)];
        self.bytes(n)
    }

    pub(crate) fn block(&mut self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.bytes(16));
        b
    }
}

/// The seed of a randomized check: `GCMX_TEST_SEED` if set, else one from the clock; printed so
/// that a failure can be replayed.
pub(crate) fn seed(what: &str) -> u64 {
    let s = match std::env::var("GCMX_TEST_SEED") {
        Ok(s) => s.trim().parse().expect("GCMX_TEST_SEED is a decimal u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    };
    println!("{what}: seed {s} (replay with GCMX_TEST_SEED={s})");
    s
}

/// `AES_K(block)` by the `aes` crate.
pub(crate) fn aes_encrypt(key: &[u8], block: &mut [u8; 16]) {
    let mut b = (*block).into();
    match key.len() {
        16 => aes::Aes128::new_from_slice(key)
            .unwrap()
            .encrypt_block(&mut b),
        24 => aes::Aes192::new_from_slice(key)
            .unwrap()
            .encrypt_block(&mut b),
        _ => aes::Aes256::new_from_slice(key)
            .unwrap()
            .encrypt_block(&mut b),
    }
    *block = b.into();
}

/// CTR with inc32 from the counter block `ctr`, by the `ctr` crate.
pub(crate) fn reference_ctr(key: &[u8], ctr: &[u8; 16], buf: &mut [u8]) {
    match key.len() {
        16 => ctr::Ctr32BE::<aes::Aes128>::new_from_slices(key, ctr)
            .unwrap()
            .apply_keystream(buf),
        24 => ctr::Ctr32BE::<aes::Aes192>::new_from_slices(key, ctr)
            .unwrap()
            .apply_keystream(buf),
        _ => ctr::Ctr32BE::<aes::Aes256>::new_from_slices(key, ctr)
            .unwrap()
            .apply_keystream(buf),
    }
}

/// GHASH of the pieces, each zero-padded, from the state `y`, by the `ghash` crate (a state
/// other than zero enters XORed into the first block: `GHASH` from `y` over `X_1, X_2, ...`
/// is `GHASH` from zero over `y ^ X_1, X_2, ...`).
pub(crate) fn reference_ghash(key: &[u8], y: u128, pieces: &[&[u8]]) -> u128 {
    let mut h = [0u8; 16];
    aes_encrypt(key, &mut h);
    let mut g = GHash::new(&h.into());
    let mut all: Vec<u8> = Vec::new();
    for p in pieces {
        all.extend_from_slice(p);
        all.resize(all.len().div_ceil(16) * 16, 0);
    }
    if all.is_empty() {
        return y;
    }
    {
        for (a, b) in all.iter_mut().zip(y.to_be_bytes()) {
            *a ^= b;
        }
    }
    g.update_padded(&all);
    u128::from_be_bytes(g.finalize().into())
}

/// GCM's length block.
pub(crate) fn length_block(aad_len: usize, ct_len: usize) -> [u8; 16] {
    (((aad_len as u128 * 8) << 64) | (ct_len as u128 * 8)).to_be_bytes()
}

/// Failures counted, not panicked on, so that one run reports them all; `finish` exits non-zero
/// if any.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) checks: u64,
    pub(crate) failures: u64,
}

impl Tally {
    pub(crate) fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.checks += 1;
        if !ok {
            self.failures += 1;
            if self.failures <= 20 {
                eprintln!("FAIL: {}", what());
            }
        }
    }

    pub(crate) fn finish(&self, program: &str) {
        println!(
            "{program}: {} checks, {} failures",
            self.checks, self.failures
        );
        if self.failures > 0 {
            std::process::exit(1);
        }
    }
}
