//! AES-CTR as GCM uses it: counter blocks `J0[0..12] ‖ be32(ctr0 + 1 + i)` with 32-bit wrap
//! (inc32), through the `ctr` crate's 32-bit big-endian flavour, which drives the block cipher's
//! parallel backend (8 AES-NI blocks in flight) and XORs in place.

use aes::cipher::{BlockCipherEncrypt, BlockSizeUser, InnerIvInit, StreamCipherCore, consts::U16};
use ctr::CtrCore;
use ctr::flavors::Ctr32BE;

use crate::counter::Counter;

/// XOR the GCM keystream into `buf`, whose first byte is at keystream block `first_block`
/// (block 0 is the one encrypted with counter `ctr0 + 1`). `buf` starts on a block boundary.
#[inline]
pub(crate) fn apply_keystream<C>(cipher: &C, j0: &[u8; 16], first_block: u64, buf: &mut [u8])
where
    C: BlockCipherEncrypt + BlockSizeUser<BlockSize = U16>,
{
    let iv = Counter::block(j0, first_block);
    // The flavour counts blocks from `iv` with wrapping arithmetic on the last word; its
    // remaining-blocks check allows 2^32 − 1 blocks from here, more than GCM's limit.
    let core = CtrCore::<&C, Ctr32BE>::inner_iv_init(cipher, &iv.into());
    core.apply_keystream_partial(buf.into());
}
