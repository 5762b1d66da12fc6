//! AES-CTR as GCM uses it: counter blocks `J0[0..12] ‖ be32(ctr0 + 1 + i)` with 32-bit wrap (inc32).

use aes::cipher::{Block, BlockCipherEncrypt, BlockSizeUser, consts::U16};
use zeroize::Zeroize;

/// Counter blocks encrypted per call of the block cipher: enough for the AES-NI pipeline.
const CTR_BATCH: usize = 32;

/// XOR the GCM keystream into `buf`, whose first byte is at keystream block `first_block`
/// (block 0 is the one encrypted with counter `ctr0 + 1`). `first_block` is a multiple of 16 bytes
/// into the message, so `buf` starts on a block boundary.
pub(crate) fn apply_keystream<C>(cipher: &C, j0: &[u8; 16], first_block: u64, buf: &mut [u8])
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    let ctr0 = u32::from_be_bytes([j0[12], j0[13], j0[14], j0[15]]);
    // Truncation is the point: the counter is 32 bits and wraps (SP 800-38D inc32).
    let mut ctr = ctr0.wrapping_add(1).wrapping_add(first_block as u32);
    let mut ks: [Block<C>; CTR_BATCH] = Default::default();
    for b in ks.iter_mut() {
        b[..12].copy_from_slice(&j0[..12]);
    }
    for chunk in buf.chunks_mut(16 * CTR_BATCH) {
        let n = chunk.len().div_ceil(16);
        for b in ks[..n].iter_mut() {
            b[12..].copy_from_slice(&ctr.to_be_bytes());
            ctr = ctr.wrapping_add(1);
        }
        cipher.encrypt_blocks(&mut ks[..n]);
        let mut blocks = chunk.chunks_exact_mut(16);
        for (d, k) in (&mut blocks).zip(ks.iter()) {
            let x = u128::from_ne_bytes((&*d).try_into().expect("16-byte chunk"))
                ^ u128::from_ne_bytes(k.as_slice().try_into().expect("16-byte block"));
            d.copy_from_slice(&x.to_ne_bytes());
        }
        let tail = blocks.into_remainder();
        if !tail.is_empty() {
            let k = &ks[n - 1];
            for (d, k) in tail.iter_mut().zip(k.iter()) {
                *d ^= *k;
            }
        }
        for b in ks[..n].iter_mut() {
            b[..12].copy_from_slice(&j0[..12]);
        }
    }
    for b in ks.iter_mut() {
        b.as_mut_slice().zeroize();
    }
}
