//! Host-side planning: how a message is cut into chunks (host-resident path) and launches, and which
//! [`Partial`] each kernel partial stands for. Pure functions, tested without a GPU. Layer: a leaf.
//!
//! A launch over `n` blocks with run length `SPAN` has `grid = max(1, ceil(n / SPAN))` partials; the
//! kernel pads the FRONT with `grid*SPAN - n` zero blocks, so partial 0 stands for the first
//! `n - (grid-1)*SPAN` real blocks and every other partial for `SPAN` blocks. Partials of consecutive
//! launches (chunks) simply follow each other in message order: the combined list goes to
//! `gcmx_core::backend::KeyMaterial::tag_from_partials`, which joins them with `gcmx_core::backend::tree_reduce`.

use gcmx_core::backend::Partial;
use zeroize::Zeroize;

/// One chunk of a message in the host-resident pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chunk {
    /// Byte offset in the message (a multiple of 16).
    pub(crate) offset: usize,
    /// Bytes in this chunk (a multiple of 16 except for the last chunk).
    pub(crate) len: usize,
    /// Index of the chunk's first block in the message.
    pub(crate) first_block: u64,
    /// Index of the chunk's first partial in the message's partial list.
    pub(crate) first_partial: usize,
    /// Partials (kernel thread blocks) of this chunk's launch.
    pub(crate) grid: u32,
}

/// Blocks of `nbytes` bytes (the last partial block counts).
pub(crate) fn blocks(nbytes: usize) -> u64 {
    (nbytes as u64).div_ceil(16)
}

/// Kernel grid for `nblocks` blocks with runs of `span` blocks (at least one thread block).
pub(crate) fn grid_for(nblocks: u64, span: u64) -> u64 {
    nblocks.div_ceil(span).max(1)
}

/// The blocks each partial of one launch stands for, in order.
pub(crate) fn launch_partial_blocks(nblocks: u64, span: u64) -> impl Iterator<Item = u64> {
    let grid = grid_for(nblocks, span);
    // grid = ceil(n / span) >= 1, so 0 <= (grid - 1) * span < n (or both 0 when n = 0).
    let first = nblocks - (grid - 1) * span;
    (0..grid).map(move |j| if j == 0 { first } else { span })
}

/// Cut `len` bytes into chunks of `chunk` bytes (rounded down to a multiple of 16, at least 16) for
/// kernels with runs of `span` blocks.
pub(crate) fn chunks(len: usize, chunk: usize, span: u64) -> Vec<Chunk> {
    let chunk = (chunk / 16).max(1) * 16;
    let mut out = Vec::with_capacity(len.div_ceil(chunk));
    let (mut offset, mut first_partial) = (0usize, 0usize);
    while offset < len {
        let n = chunk.min(len - offset);
        let grid = grid_for(blocks(n), span);
        out.push(Chunk {
            offset,
            len: n,
            first_block: (offset / 16) as u64,
            first_partial,
            grid: grid as u32,
        });
        offset += n;
        first_partial += grid as usize;
    }
    out
}

/// Total partials of a chunk list.
pub(crate) fn total_partials(chunks: &[Chunk]) -> usize {
    chunks
        .last()
        .map_or(0, |c| c.first_partial + c.grid as usize)
}

/// Turn the raw partial values of every chunk (in chunk order) into [`Partial`]s with their true lengths.
pub(crate) fn partials_of(chunks: &[Chunk], values: &[u128], span: u64) -> Vec<Partial> {
    let mut out = Vec::with_capacity(values.len());
    for c in chunks {
        let vals = &values[c.first_partial..c.first_partial + c.grid as usize];
        for (v, b) in vals.iter().zip(launch_partial_blocks(blocks(c.len), span)) {
            out.push(Partial {
                value: *v,
                blocks: b,
            });
        }
    }
    out
}

/// Partial hashes as the kernels write them (`GcmxU128`: lo then hi, little-endian words) into `out`.
pub(crate) fn read_partials(bytes: &[u8], out: &mut [u128]) {
    for (v, b) in out.iter_mut().zip(bytes.chunks_exact(16)) {
        let mut le = [0u8; 16];
        le.copy_from_slice(b);
        *v = u128::from_le_bytes(le);
        le.zeroize();
    }
}

/// Counter of block `first_block` of a message whose J0 is `j0` (gcmx-core's inc32).
pub(crate) fn ctr_first(j0: &[u8; 16], first_block: u64) -> u32 {
    gcmx_core::backend::Counter::of_j0(j0).of_block(first_block)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gcmx_core::backend::HashKey;
    use gcmx_core::backend::tree_reduce;

    #[test]
    fn partial_lengths_sum_to_the_blocks() {
        for span in [1u64, 3, 16, 16384] {
            for n in [0u64, 1, 2, 15, 16, 17, 16383, 16384, 16385, 50000] {
                let v: Vec<u64> = launch_partial_blocks(n, span).collect();
                assert_eq!(v.len() as u64, grid_for(n, span));
                assert_eq!(v.iter().sum::<u64>(), n, "n {n} span {span}");
                assert!(v.iter().skip(1).all(|&b| b == span));
                assert!(n == 0 || (v[0] >= 1 && v[0] <= span));
            }
        }
    }

    #[test]
    fn chunks_cover_the_message() {
        for (len, chunk) in [
            (0usize, 64),
            (1, 64),
            (64, 64),
            (65, 64),
            (1000, 48),
            (1 << 20, 3 << 16),
            (100, 7),
        ] {
            let cs = chunks(len, chunk, 4);
            let mut at = 0;
            let mut p = 0;
            for c in &cs {
                assert_eq!(c.offset, at);
                assert_eq!(c.first_block * 16, at as u64);
                assert_eq!(c.first_partial, p);
                assert!(c.offset % 16 == 0);
                at += c.len;
                p += c.grid as usize;
            }
            assert_eq!(at, len);
            assert_eq!(total_partials(&cs), p);
            for c in cs.iter().rev().skip(1) {
                assert_eq!(c.len % 16, 0);
            }
        }
    }

    /// Simulate the kernels on the host: each launch hashes its front-padded runs; the partial list
    /// (through `partials_of`) tree-reduces to the hash of the whole message, for every chunking.
    #[test]
    fn simulated_partials_reduce_to_the_whole_hash() {
        let hk = HashKey::new(*b"simulated-H-key!");
        let blocks_v: Vec<u128> = (0..300u128)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) ^ 5)
            .collect();
        let whole = Partial::hash_blocks(&hk, &blocks_v);
        for span in [1u64, 4, 7, 32] {
            for chunk_blocks in [1usize, 5, 16, 64, 300, 1000] {
                let len = blocks_v.len() * 16;
                let cs = chunks(len, chunk_blocks * 16, span);
                let mut values = Vec::new();
                for c in &cs {
                    let b0 = c.first_block as usize;
                    let xs = &blocks_v[b0..b0 + blocks(c.len) as usize];
                    let grid = c.grid as u64;
                    let pad = (grid * span - xs.len() as u64) as usize;
                    let mut padded = vec![0u128; pad];
                    padded.extend_from_slice(xs);
                    for run in padded.chunks(span as usize) {
                        values.push(Partial::hash_blocks(&hk, run).value);
                    }
                }
                let parts = partials_of(&cs, &values, span);
                assert_eq!(
                    tree_reduce(&hk, &parts),
                    whole,
                    "span {span} chunk {chunk_blocks}"
                );
            }
        }
    }

    #[test]
    fn counters_wrap_mod_2_32() {
        let mut j0 = [0u8; 16];
        j0[12..].copy_from_slice(&0xffff_fffeu32.to_be_bytes());
        assert_eq!(ctr_first(&j0, 0), 0xffff_ffff);
        assert_eq!(ctr_first(&j0, 1), 0);
        assert_eq!(ctr_first(&j0, 5), 4);
    }
}
