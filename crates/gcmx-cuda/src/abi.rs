//! Rust mirrors of `cuda/gcmx_abi.h`: the kernels' parameter structs, constants and the two helper functions
//! (`gcmx_strided_pow_exponent`, `gcmx_batch_plan`). The unit tests compare every size, offset, constant and
//! helper result with what the C header gives (the build script compiles a probe against the header).

/// Version of the ABI this crate mirrors (`GCMX_ABI_VERSION`).
pub const ABI_VERSION: u32 = 1;
/// Threads per warp.
pub const WARP_SIZE: u32 = 32;
/// Index of the first per-thread entry of a warp-strided power table.
pub const POW_THREAD_BASE: u32 = 4;
/// Blocks per Montgomery reduction in the GHASH kernels.
pub const BLOCKS_PER_REDUCTION: u32 = 4;

/// Threads per thread block of the GHASH-only kernels.
pub const GHASH_THREADS: u32 = 256;
/// Blocks per warp run of the GHASH-only kernels.
pub const GHASH_WARP_SPAN: u64 = 128 * WARP_SIZE as u64;
/// Blocks per thread block of the GHASH-only kernels (one partial each).
pub const GHASH_SPAN: u64 = (GHASH_THREADS / WARP_SIZE) as u64 * GHASH_WARP_SPAN;
/// Entries of the GHASH-layout power table.
pub const GHASH_POW_COUNT: u32 = POW_THREAD_BASE + GHASH_THREADS;

/// Blocks per warp per `gcmx_aes_ctr_x32` round (32 lanes × 32 blocks).
pub const WARP_CHUNK: u64 = 1024;
/// Threads per thread block of the fused GCM kernels.
pub const FUSED_THREADS: u32 = 128;
/// Blocks per warp run of the fused kernels.
pub const FUSED_WARP_SPAN: u64 = 4 * WARP_CHUNK;
/// Blocks per thread block of the fused kernels (one partial each).
pub const FUSED_SPAN: u64 = (FUSED_THREADS / WARP_SIZE) as u64 * FUSED_WARP_SPAN;
/// Entries of the fused-layout power table.
pub const FUSED_POW_COUNT: u32 = POW_THREAD_BASE + FUSED_THREADS;

/// Threads per block of `gcmx_batch_units`.
pub const BATCH_UNIT_THREADS: u32 = 128;
/// Threads per block of `gcmx_batch_key_powers`.
pub const BATCH_KEY_THREADS: u32 = 64;
/// Threads per block of `gcmx_batch_tags`.
pub const BATCH_TAG_THREADS: u32 = 128;
/// Blocks of a full batch unit.
pub const BATCH_UNIT_BLOCKS: u64 = WARP_CHUNK;
/// Linear powers per key in [`GcmxKeyPowers`].
pub const KEY_POW_LINEAR: usize = 128;
/// Powers of two per key in [`GcmxKeyPowers`].
pub const KEY_POW_POW2: usize = 32;

/// Threads per block of `gcmx_fill_powers`.
pub const FILL_THREADS: u32 = 128;
/// Threads per block of the bandwidth kernels.
pub const BW_THREADS: u32 = 256;
/// Blocks per thread block of `gcmx_bw_copy`.
pub const BW_COPY_SPAN: u64 = BW_THREADS as u64 * 16;
/// Words written by `gcmx_abi_info`.
pub const ABI_INFO_WORDS: usize = 8;
/// `Q_0 = x^128 mod P`, the unit of `dot`.
pub const Q0: u128 = 0xC200_0000_0000_0000_0000_0000_0000_0001;

/// A POLYVAL-domain field element: `(hi << 64) | lo` = `u128::from_be_bytes(block)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcmxU128 {
    /// Bytes 8..15 of the block, big-endian.
    pub lo: u64,
    /// Bytes 0..7 of the block, big-endian.
    pub hi: u64,
}

impl From<u128> for GcmxU128 {
    fn from(v: u128) -> Self {
        GcmxU128 {
            lo: v as u64,
            hi: (v >> 64) as u64,
        }
    }
}

impl From<GcmxU128> for u128 {
    fn from(v: GcmxU128) -> u128 {
        (u128::from(v.hi) << 64) | u128::from(v.lo)
    }
}

/// FIPS-197 expanded key: `rk[i] = w[i]`, `nr` rounds (10/12/14); unused words zero.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GcmxAesKey {
    /// Round-key words.
    pub rk: [u32; 60],
    /// Number of rounds.
    pub nr: u32,
}

impl core::fmt::Debug for GcmxAesKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "GcmxAesKey {{ nr: {}, .. }}", self.nr)
    }
}

impl Default for GcmxAesKey {
    fn default() -> Self {
        GcmxAesKey { rk: [0; 60], nr: 0 }
    }
}

/// Parameters of `gcmx_ghash_clmad` / `gcmx_ghash_soft`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GcmxGhashParams {
    /// Device address of the data.
    pub data: u64,
    /// Bytes of data.
    pub nbytes: u64,
    /// Device address of the GHASH-layout power table.
    pub powers: u64,
    /// Device address of the partials output.
    pub partials: u64,
}

/// Parameters of `gcmx_gcm_encrypt` / `gcmx_gcm_decrypt`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GcmxGcmParams {
    /// Device address of the input.
    pub input: u64,
    /// Device address of the output (may equal the input).
    pub output: u64,
    /// Bytes of this launch.
    pub nbytes: u64,
    /// Device address of the fused-layout power table.
    pub powers: u64,
    /// Device address of the partials output.
    pub partials: u64,
    /// J0 bytes 0..11 as little-endian words.
    pub j0_prefix: [u32; 3],
    /// Counter of real block 0 of this launch.
    pub ctr_first: u32,
    /// Expanded key.
    pub key: GcmxAesKey,
    /// Padding, zero.
    pub _pad0: u32,
}

/// Per-key power table of the batch kernels.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GcmxKeyPowers {
    /// `q[k-1] = Q_k`, k = 1..128.
    pub q: [GcmxU128; KEY_POW_LINEAR],
    /// `pow2[i] = Q_(2^i)`.
    pub pow2: [GcmxU128; KEY_POW_POW2],
}

/// One message of a batch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcmxBatchMsg {
    /// Byte offset in `in` and `out` (multiple of 16).
    pub data_off: u64,
    /// Message bytes.
    pub data_len: u64,
    /// Byte offset of the AAD (multiple of 16).
    pub aad_off: u64,
    /// AAD bytes.
    pub aad_len: u64,
    /// J0 as four little-endian words.
    pub j0: [u32; 4],
    /// Index into keys and key powers.
    pub key_index: u32,
    /// Tag slot.
    pub tag_slot: u32,
    /// First global lane.
    pub lane_first: u32,
    /// First unit partial.
    pub unit_first: u32,
}

/// Parameters of the three batch kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GcmxBatchParams {
    /// All messages' input.
    pub input: u64,
    /// Output (may equal input).
    pub output: u64,
    /// All AADs.
    pub aad: u64,
    /// `GcmxBatchMsg[nmsgs]`.
    pub msgs: u64,
    /// `GcmxAesKey[nkeys]`.
    pub keys: u64,
    /// `GcmxKeyPowers[nkeys]`.
    pub key_powers: u64,
    /// Unit partials scratch.
    pub unit_partials: u64,
    /// Tags out, 16 bytes per slot.
    pub tags: u64,
    /// Messages.
    pub nmsgs: u32,
    /// Keys.
    pub nkeys: u32,
    /// Lanes of the units kernel.
    pub total_lanes: u32,
    /// 0 encrypt, 1 decrypt.
    pub decrypt: u32,
}

/// Parameters of `gcmx_fill_powers`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GcmxFillPowersParams {
    /// `H'`.
    pub h_prime: GcmxU128,
    /// Table out.
    pub table: u64,
    /// Blocks per warp of the layout.
    pub warp_span: u64,
    /// Threads per block of the layout.
    pub threads: u32,
    /// Entries.
    pub count: u32,
}

/// Parameters of `gcmx_bw_read` / `gcmx_bw_copy`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GcmxBwParams {
    /// Input.
    pub input: u64,
    /// Output.
    pub output: u64,
    /// Bytes (multiple of 16).
    pub nbytes: u64,
}

/// `gcmx_strided_pow_exponent`: the exponent k of entry `i` of a warp-strided power table (`table[i] = Q_k`).
pub fn strided_pow_exponent(threads: u32, warp_span: u64, i: u32) -> u64 {
    if i < POW_THREAD_BASE {
        return u64::from(WARP_SIZE) * u64::from(i + 1);
    }
    let t = i - POW_THREAD_BASE;
    let (w, l) = (t / WARP_SIZE, t % WARP_SIZE);
    let nwarps = threads / WARP_SIZE;
    u64::from(nwarps - 1 - w) * warp_span + u64::from(WARP_SIZE - l)
}

/// `gcmx_batch_units`: (units K, lanes of unit 0 g0, lanes owned) for a message of `len` bytes.
pub fn batch_units(len: u64) -> (u32, u32, u32) {
    let n = len.div_ceil(16);
    let k = n.div_ceil(BATCH_UNIT_BLOCKS);
    if k == 0 {
        return (0, 0, 0);
    }
    let m = n - BATCH_UNIT_BLOCKS * (k - 1);
    let need = m.div_ceil(32);
    let mut g = 1u64;
    while g < need {
        g <<= 1;
    }
    (
        k as u32,
        g as u32,
        (u64::from(WARP_SIZE) * (k - 1) + g) as u32,
    )
}

/// `gcmx_batch_plan`: fill `lane_first` / `unit_first` in order; returns (total lanes, total units), or
/// `None` if a count would overflow 32 bits (the caller splits the batch).
pub fn batch_plan(msgs: &mut [GcmxBatchMsg]) -> Option<(u32, u32)> {
    let (mut lane, mut unit) = (0u64, 0u64);
    for m in msgs.iter_mut() {
        let n = m.data_len.div_ceil(16);
        let k = n.div_ceil(BATCH_UNIT_BLOCKS);
        if k > u64::from(u32::MAX) {
            return None;
        }
        let (k, g0, lanes) = batch_units(m.data_len);
        let align = if k > 1 {
            u64::from(WARP_SIZE)
        } else if k == 1 {
            u64::from(g0)
        } else {
            1
        };
        lane = lane.div_ceil(align) * align;
        m.lane_first = u32::try_from(lane).ok()?;
        m.unit_first = u32::try_from(unit).ok()?;
        lane += u64::from(lanes);
        unit += u64::from(k);
    }
    Some((u32::try_from(lane).ok()?, u32::try_from(unit).ok()?))
}

/// Words of a 16-byte block as a `uint4` load sees them (little-endian words).
pub fn le_words(b: &[u8; 16]) -> [u32; 4] {
    core::array::from_fn(|i| {
        u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    mod c {
        include!(concat!(env!("OUT_DIR"), "/abi_probe.rs"));
    }

    fn c_size(name: &str) -> (usize, usize) {
        let (_, s, a) = c::C_SIZES
            .iter()
            .find(|(n, _, _)| *n == name)
            .unwrap_or_else(|| panic!("no size for {name}"));
        (*s, *a)
    }

    fn c_off(s: &str, f: &str) -> usize {
        c::C_OFFSETS
            .iter()
            .find(|(a, b, _)| *a == s && *b == f)
            .unwrap_or_else(|| panic!("no offset for {s}.{f}"))
            .2
    }

    fn c_const(name: &str) -> u64 {
        c::C_CONSTS
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no constant {name}"))
            .1
    }

    macro_rules! check_struct {
        ($t:ty, $cname:literal, [$(($rf:ident, $cf:literal)),* $(,)?]) => {{
            assert_eq!((size_of::<$t>(), align_of::<$t>()), c_size($cname), "size/align of {}", $cname);
            $( assert_eq!(offset_of!($t, $rf), c_off($cname, $cf), "offset of {}.{}", $cname, $cf); )*
        }};
    }

    #[test]
    fn struct_layouts_match_the_header() {
        check_struct!(GcmxU128, "GcmxU128", [(lo, "lo"), (hi, "hi")]);
        check_struct!(GcmxAesKey, "GcmxAesKey", [(rk, "rk"), (nr, "nr")]);
        check_struct!(
            GcmxGhashParams,
            "GcmxGhashParams",
            [
                (data, "data"),
                (nbytes, "nbytes"),
                (powers, "powers"),
                (partials, "partials")
            ]
        );
        check_struct!(
            GcmxGcmParams,
            "GcmxGcmParams",
            [
                (input, "in"),
                (output, "out"),
                (nbytes, "nbytes"),
                (powers, "powers"),
                (partials, "partials"),
                (j0_prefix, "j0_prefix"),
                (ctr_first, "ctr_first"),
                (key, "key"),
                (_pad0, "_pad0")
            ]
        );
        check_struct!(GcmxKeyPowers, "GcmxKeyPowers", [(q, "q"), (pow2, "pow2")]);
        check_struct!(
            GcmxBatchMsg,
            "GcmxBatchMsg",
            [
                (data_off, "data_off"),
                (data_len, "data_len"),
                (aad_off, "aad_off"),
                (aad_len, "aad_len"),
                (j0, "j0"),
                (key_index, "key_index"),
                (tag_slot, "tag_slot"),
                (lane_first, "lane_first"),
                (unit_first, "unit_first")
            ]
        );
        check_struct!(
            GcmxBatchParams,
            "GcmxBatchParams",
            [
                (input, "in"),
                (output, "out"),
                (aad, "aad"),
                (msgs, "msgs"),
                (keys, "keys"),
                (key_powers, "key_powers"),
                (unit_partials, "unit_partials"),
                (tags, "tags"),
                (nmsgs, "nmsgs"),
                (nkeys, "nkeys"),
                (total_lanes, "total_lanes"),
                (decrypt, "decrypt")
            ]
        );
        check_struct!(
            GcmxFillPowersParams,
            "GcmxFillPowersParams",
            [
                (h_prime, "h_prime"),
                (table, "table"),
                (warp_span, "warp_span"),
                (threads, "threads"),
                (count, "count")
            ]
        );
        check_struct!(
            GcmxBwParams,
            "GcmxBwParams",
            [(input, "in"), (output, "out"), (nbytes, "nbytes")]
        );
    }

    #[test]
    fn constants_match_the_header() {
        let mine: &[(&str, u64)] = &[
            ("GCMX_ABI_VERSION", u64::from(ABI_VERSION)),
            ("GCMX_WARP_SIZE", u64::from(WARP_SIZE)),
            ("GCMX_POW_THREAD_BASE", u64::from(POW_THREAD_BASE)),
            ("GCMX_BLOCKS_PER_REDUCTION", u64::from(BLOCKS_PER_REDUCTION)),
            ("GCMX_GHASH_THREADS", u64::from(GHASH_THREADS)),
            ("GCMX_GHASH_WARP_SPAN", GHASH_WARP_SPAN),
            ("GCMX_GHASH_SPAN", GHASH_SPAN),
            ("GCMX_GHASH_POW_COUNT", u64::from(GHASH_POW_COUNT)),
            ("GCMX_WARP_CHUNK", WARP_CHUNK),
            ("GCMX_FUSED_THREADS", u64::from(FUSED_THREADS)),
            ("GCMX_FUSED_WARP_SPAN", FUSED_WARP_SPAN),
            ("GCMX_FUSED_SPAN", FUSED_SPAN),
            ("GCMX_FUSED_POW_COUNT", u64::from(FUSED_POW_COUNT)),
            ("GCMX_BATCH_UNIT_THREADS", u64::from(BATCH_UNIT_THREADS)),
            ("GCMX_BATCH_KEY_THREADS", u64::from(BATCH_KEY_THREADS)),
            ("GCMX_BATCH_TAG_THREADS", u64::from(BATCH_TAG_THREADS)),
            ("GCMX_BATCH_UNIT_BLOCKS", BATCH_UNIT_BLOCKS),
            ("GCMX_KEY_POW_LINEAR", KEY_POW_LINEAR as u64),
            ("GCMX_KEY_POW_POW2", KEY_POW_POW2 as u64),
            ("GCMX_FILL_THREADS", u64::from(FILL_THREADS)),
            ("GCMX_BW_THREADS", u64::from(BW_THREADS)),
            ("GCMX_BW_COPY_SPAN", BW_COPY_SPAN),
            ("GCMX_ABI_INFO_WORDS", ABI_INFO_WORDS as u64),
            ("GCMX_Q0_HI", (Q0 >> 64) as u64),
            ("GCMX_Q0_LO", Q0 as u64),
        ];
        for (name, v) in mine {
            assert_eq!(*v, c_const(name), "{name}");
        }
        assert_eq!(Q0, gcmx_core::field::MONT_ONE);
    }

    #[test]
    fn strided_exponents_match_the_header() {
        assert_eq!(c::C_GHASH_EXP.len(), GHASH_POW_COUNT as usize);
        assert_eq!(c::C_FUSED_EXP.len(), FUSED_POW_COUNT as usize);
        for (i, &k) in c::C_GHASH_EXP.iter().enumerate() {
            assert_eq!(
                strided_pow_exponent(GHASH_THREADS, GHASH_WARP_SPAN, i as u32),
                k,
                "ghash entry {i}"
            );
        }
        for (i, &k) in c::C_FUSED_EXP.iter().enumerate() {
            assert_eq!(
                strided_pow_exponent(FUSED_THREADS, FUSED_WARP_SPAN, i as u32),
                k,
                "fused entry {i}"
            );
        }
    }

    #[test]
    fn batch_plan_matches_the_header() {
        let mut msgs: Vec<GcmxBatchMsg> = c::C_PLAN
            .iter()
            .map(|&(len, _, _)| GcmxBatchMsg {
                data_len: len,
                ..Default::default()
            })
            .collect();
        let (lanes, units) = batch_plan(&mut msgs).expect("small plan");
        for (m, &(len, lf, uf)) in msgs.iter().zip(c::C_PLAN) {
            assert_eq!(
                (m.lane_first, m.unit_first),
                (lf, uf),
                "message of {len} bytes"
            );
        }
        assert_eq!((lanes, units), c::C_PLAN_TOTAL);
    }

    #[test]
    fn u128_round_trip_is_big_endian_block() {
        let block: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(17).wrapping_add(3));
        let v = u128::from_be_bytes(block);
        let g = GcmxU128::from(v);
        assert_eq!(g.hi, u64::from_be_bytes(block[..8].try_into().unwrap()));
        assert_eq!(g.lo, u64::from_be_bytes(block[8..].try_into().unwrap()));
        assert_eq!(u128::from(g), v);
        assert_eq!(
            le_words(&block)[0],
            u32::from_le_bytes([block[0], block[1], block[2], block[3]])
        );
    }
}
