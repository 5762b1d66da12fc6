//! What the test programs share: deterministic test data.
#![allow(dead_code)]

/// splitmix64: deterministic test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn fill(&mut self, b: &mut [u8]) {
        b.iter_mut().for_each(|x| *x = self.next() as u8);
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }

    /// Random bytes, a random length in `0..=max`.
    pub fn upto(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        self.bytes(n)
    }

    /// A random AES key of a random size.
    pub fn key(&mut self) -> Vec<u8> {
        let n = [16, 24, 32][self.below(3)];
        self.bytes(n)
    }
}
