//! FIPS-197 key expansion on the host, constant time, into the kernels' [`GcmxAesKey`] layout.
//!
//! The S-box is never indexed by a secret: each substitution reads all 256 entries and keeps the one whose
//! index matches through a mask (about 256 operations per byte; a key expansion has at most 52 S-box
//! substitutions, so this costs microseconds and happens once per key).

use zeroize::Zeroize;

use crate::abi::GcmxAesKey;

/// The AES S-box (FIPS-197, figure 7), read only by the constant-time scan below.
const SBOX: [u8; 256] = [
    0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76,
    0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0,
    0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15,
    0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75,
    0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84,
    0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf,
    0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8,
    0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2,
    0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73,
    0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb,
    0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79,
    0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08,
    0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
    0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e,
    0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf,
    0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
];

/// Round constants `x^(i-1)` in GF(2^8), i = 1..10 (FIPS-197, 5.2).
const RCON: [u8; 10] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36];

/// `SBOX[x]` without a secret-dependent memory index or branch.
#[inline]
fn sub_byte_ct(x: u8) -> u8 {
    let mut r = 0u8;
    for (i, &s) in SBOX.iter().enumerate() {
        let d = u32::from(i as u8 ^ x); // 0 iff i == x
        let eq = (d.wrapping_sub(1) >> 31) as u8; // 1 iff d == 0 (d < 256)
        r |= s & eq.wrapping_neg();
    }
    r
}

#[inline]
fn sub_word_ct(w: u32) -> u32 {
    u32::from_be_bytes(w.to_be_bytes().map(sub_byte_ct))
}

/// Expand a 16-, 24- or 32-byte AES key (FIPS-197, 5.2). `None` for any other length.
pub fn expand_key(key: &[u8]) -> Option<GcmxAesKey> {
    let nk = match key.len() {
        16 | 24 | 32 => key.len() / 4,
        _ => return None,
    };
    let nr = nk + 6;
    let total = 4 * (nr + 1);
    let mut out = GcmxAesKey {
        rk: [0; 60],
        nr: nr as u32,
    };
    for (i, c) in key.chunks_exact(4).enumerate() {
        out.rk[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
    }
    for i in nk..total {
        let mut t = out.rk[i - 1];
        if i % nk == 0 {
            t = sub_word_ct(t.rotate_left(8)) ^ (u32::from(RCON[i / nk - 1]) << 24);
        } else if nk > 6 && i % nk == 4 {
            t = sub_word_ct(t);
        }
        out.rk[i] = out.rk[i - nk] ^ t;
        t.zeroize();
    }
    Some(out)
}

impl Zeroize for GcmxAesKey {
    fn zeroize(&mut self) {
        self.rk.zeroize();
        self.nr.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fips197_appendix_a_last_words() {
        // FIPS-197 appendix A.1, A.2, A.3: last expanded word of each example key.
        let k128 = [
            0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf,
            0x4f, 0x3c,
        ];
        let e = expand_key(&k128).unwrap();
        assert_eq!((e.nr, e.rk[4], e.rk[43]), (10, 0xa0fafe17, 0xb6630ca6));
        let k192 = [
            0x8e, 0x73, 0xb0, 0xf7, 0xda, 0x0e, 0x64, 0x52, 0xc8, 0x10, 0xf3, 0x2b, 0x80, 0x90,
            0x79, 0xe5, 0x62, 0xf8, 0xea, 0xd2, 0x52, 0x2c, 0x6b, 0x7b,
        ];
        let e = expand_key(&k192).unwrap();
        assert_eq!((e.nr, e.rk[6], e.rk[51]), (12, 0xfe0c91f7, 0x01002202));
        let k256 = [
            0x60, 0x3d, 0xeb, 0x10, 0x15, 0xca, 0x71, 0xbe, 0x2b, 0x73, 0xae, 0xf0, 0x85, 0x7d,
            0x77, 0x81, 0x1f, 0x35, 0x2c, 0x07, 0x3b, 0x61, 0x08, 0xd7, 0x2d, 0x98, 0x10, 0xa3,
            0x09, 0x14, 0xdf, 0xf4,
        ];
        let e = expand_key(&k256).unwrap();
        assert_eq!((e.nr, e.rk[8], e.rk[59]), (14, 0x9ba35411, 0x706c631e));
        assert!(e.rk[60 - 1] != 0);
        assert!(expand_key(&[0u8; 20]).is_none());
    }

    #[test]
    fn constant_time_sbox_matches_table() {
        for x in 0..=255u8 {
            assert_eq!(sub_byte_ct(x), SBOX[x as usize]);
        }
    }

    /// A straightforward (table-indexed, test-only) AES encryption from the expanded words, compared with
    /// gcmx-core's AES on many keys and blocks: the expanded key drives a correct cipher.
    fn aes_encrypt_ref(k: &GcmxAesKey, block: &[u8; 16]) -> [u8; 16] {
        fn xtime(b: u8) -> u8 {
            (b << 1) ^ if b & 0x80 != 0 { 0x1b } else { 0 }
        }
        let ark = |s: &mut [u8; 16], r: usize| {
            for c in 0..4 {
                let w = k.rk[4 * r + c].to_be_bytes();
                for j in 0..4 {
                    s[4 * c + j] ^= w[j];
                }
            }
        };
        let mut s = *block;
        ark(&mut s, 0);
        for r in 1..=k.nr as usize {
            for b in s.iter_mut() {
                *b = SBOX[*b as usize];
            }
            let t = s;
            for c in 0..4 {
                for j in 0..4 {
                    s[4 * c + j] = t[4 * ((c + j) % 4) + j];
                }
            }
            if r != k.nr as usize {
                for c in 0..4 {
                    let a = [s[4 * c], s[4 * c + 1], s[4 * c + 2], s[4 * c + 3]];
                    let x = a[0] ^ a[1] ^ a[2] ^ a[3];
                    for j in 0..4 {
                        s[4 * c + j] = a[j] ^ x ^ xtime(a[j] ^ a[(j + 1) % 4]);
                    }
                }
            }
            ark(&mut s, r);
        }
        s
    }

    #[test]
    fn expanded_keys_encrypt_like_gcmx_core() {
        let mut seed = 0x0123_4567_89ab_cdefu64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        };
        for len in [16usize, 24, 32] {
            for _ in 0..20 {
                let key: Vec<u8> = (0..len).map(|_| next()).collect();
                let km = gcmx_core::KeyMaterial::new(&key).unwrap();
                let e = expand_key(&key).unwrap();
                for _ in 0..4 {
                    let block: [u8; 16] = core::array::from_fn(|_| next());
                    let mut want = block;
                    km.encrypt_block(&mut want);
                    assert_eq!(aes_encrypt_ref(&e, &block), want, "AES-{}", len * 8);
                }
            }
        }
    }
}
