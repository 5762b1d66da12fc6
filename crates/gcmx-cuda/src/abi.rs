//! Rust mirrors of `cuda/gcmx_abi.h`: the kernels' parameter structs, constants and the two helper
//! functions (`gcmx_strided_pow_exponent`, `gcmx_batch_plan`). With the `cuda` feature the unit tests
//! compare every size, offset, constant and helper result with what the C header gives (the build
//! script compiles a probe against the header).
//!
//! Layer: a leaf (plain data and arithmetic). Parameter structs carry device addresses, lengths and
//! counts only: keys, power tables and J0 live in device memory (see the header's conventions).

/// Version of the ABI this crate mirrors (`GCMX_ABI_VERSION`).
pub(crate) const ABI_VERSION: u32 = 2;
/// Threads per warp.
pub(crate) const WARP_SIZE: u32 = 32;
/// Index of the first per-thread entry of a warp-strided power table.
pub(crate) const POW_THREAD_BASE: u32 = 4;

/// Threads per thread block of the GHASH-only kernels.
pub(crate) const GHASH_THREADS: u32 = 256;
/// Blocks per warp run of the GHASH-only kernels.
pub(crate) const GHASH_WARP_SPAN: u64 = 128 * WARP_SIZE as u64;
/// Blocks per thread block of the GHASH-only kernels (one partial each).
pub(crate) const GHASH_SPAN: u64 = (GHASH_THREADS / WARP_SIZE) as u64 * GHASH_WARP_SPAN;
/// Entries of the GHASH-layout power table.
#[cfg(any(feature = "bench", test))]
pub(crate) const GHASH_POW_COUNT: u32 = POW_THREAD_BASE + GHASH_THREADS;

/// Blocks per warp per `gcmx_aes_ctr_x32` round (32 lanes × 32 blocks).
pub(crate) const WARP_CHUNK: u64 = 1024;
/// Threads per thread block of the fused GCM kernels.
pub(crate) const FUSED_THREADS: u32 = 128;
/// Blocks per warp run of the fused kernels.
pub(crate) const FUSED_WARP_SPAN: u64 = 4 * WARP_CHUNK;
/// Blocks per thread block of the fused kernels (one partial each).
pub(crate) const FUSED_SPAN: u64 = (FUSED_THREADS / WARP_SIZE) as u64 * FUSED_WARP_SPAN;
/// Entries of the fused-layout power table.
pub(crate) const FUSED_POW_COUNT: u32 = POW_THREAD_BASE + FUSED_THREADS;

/// Threads per block of `gcmx_batch_units`.
pub(crate) const BATCH_UNIT_THREADS: u32 = 128;
/// Threads per block of `gcmx_batch_key_powers`.
pub(crate) const BATCH_KEY_THREADS: u32 = 64;
/// Threads per block of `gcmx_batch_tags`.
pub(crate) const BATCH_TAG_THREADS: u32 = 128;
/// Blocks of a full batch unit.
pub(crate) const BATCH_UNIT_BLOCKS: u64 = WARP_CHUNK;
/// Threads per block of `gcmx_aes_expand_keys`.
pub(crate) const EXPAND_THREADS: u32 = 64;
/// Linear powers per key in a `GcmxKeyPowers`.
pub(crate) const KEY_POW_LINEAR: usize = 128;
/// Powers of two per key in a `GcmxKeyPowers`.
pub(crate) const KEY_POW_POW2: usize = 32;

/// Threads per block of the bandwidth kernels.
#[cfg(any(feature = "bench", test))]
pub(crate) const BW_THREADS: u32 = 256;
/// Blocks per thread block of `gcmx_bw_copy`.
#[cfg(any(feature = "bench", test))]
pub(crate) const BW_COPY_SPAN: u64 = BW_THREADS as u64 * 16;
/// Words written by `gcmx_abi_info`.
pub(crate) const ABI_INFO_WORDS: usize = 8;

/// Bytes of a `GcmxAesKey` (FIPS-197 expanded key: 60 words and the round count). It exists only in
/// device memory: the host uploads raw keys and `gcmx_aes_expand_keys` expands them there.
pub(crate) const AES_KEY_BYTES: usize = 244;
/// Bytes of a `GcmxKeyPowers` (`KEY_POW_LINEAR + KEY_POW_POW2` field elements).
pub(crate) const KEY_POWERS_BYTES: usize = 16 * (KEY_POW_LINEAR + KEY_POW_POW2);
/// Bytes of a `GcmxRawKey`: 32 key bytes, then the length as a little-endian `u32`.
pub(crate) const RAW_KEY_BYTES: usize = 36;
/// Bytes of a `GcmxGcmCtr`: J0 words 0..2 and the first counter.
pub(crate) const GCM_CTR_BYTES: usize = 16;
/// AES rounds for a key of `key_len` bytes (16, 24, 32: 10, 12, 14).
pub(crate) fn rounds(key_len: usize) -> u32 {
    (key_len / 4 + 6) as u32
}

/// Bytes of a `GcmxBatchMsg`.
pub(crate) const BATCH_MSG_BYTES: usize = 64;

/// Parameters of `gcmx_ghash_clmad` / `gcmx_ghash_soft`.
#[cfg(any(feature = "bench", test))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GcmxGhashParams {
    /// Device address of the data.
    pub(crate) data: u64,
    /// Bytes of data.
    pub(crate) nbytes: u64,
    /// Device address of the GHASH-layout power table.
    pub(crate) powers: u64,
    /// Device address of the partials output.
    pub(crate) partials: u64,
}

/// Parameters of `gcmx_gcm_encrypt` / `gcmx_gcm_decrypt`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GcmxGcmParams {
    /// Device address of the input.
    pub(crate) input: u64,
    /// Device address of the output (may equal the input).
    pub(crate) output: u64,
    /// Bytes of this launch.
    pub(crate) nbytes: u64,
    /// Device address of the fused-layout power table.
    pub(crate) powers: u64,
    /// Device address of the partials output.
    pub(crate) partials: u64,
    /// Device address of the expanded key (`GcmxAesKey`).
    pub(crate) key: u64,
    /// Device address of the launch's `GcmxGcmCtr`.
    pub(crate) ctr: u64,
    /// The key's rounds (10, 12 or 14: its length, not secret).
    pub(crate) nr: u32,
    /// Padding, zero.
    pub(crate) _pad0: u32,
}

/// Parameters of `gcmx_aes_expand_keys`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GcmxExpandParams {
    /// Device address of `GcmxRawKey[nkeys]`.
    pub(crate) raw: u64,
    /// Device address of `GcmxAesKey[nkeys]` (out).
    pub(crate) out: u64,
    /// Keys.
    pub(crate) nkeys: u32,
    /// Padding, zero.
    pub(crate) _pad0: u32,
}

/// One message of a batch (serialised by [`GcmxBatchMsg::encode`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GcmxBatchMsg {
    /// Byte offset in `in` and `out` (multiple of 16).
    pub(crate) data_off: u64,
    /// Message bytes.
    pub(crate) data_len: u64,
    /// Byte offset of the AAD (multiple of 16).
    pub(crate) aad_off: u64,
    /// AAD bytes.
    pub(crate) aad_len: u64,
    /// J0 as four little-endian words (secret for nonces that are not 12 bytes).
    pub(crate) j0: [u32; 4],
    /// Index into keys and key powers.
    pub(crate) key_index: u32,
    /// Tag slot.
    pub(crate) tag_slot: u32,
    /// First global lane.
    pub(crate) lane_first: u32,
    /// First unit partial.
    pub(crate) unit_first: u32,
}

impl GcmxBatchMsg {
    /// The 64 bytes of the C struct (little-endian fields in declaration order, no padding).
    pub(crate) fn encode(&self, out: &mut [u8; BATCH_MSG_BYTES]) {
        let words64 = [self.data_off, self.data_len, self.aad_off, self.aad_len];
        let words32 = [
            self.j0[0],
            self.j0[1],
            self.j0[2],
            self.j0[3],
            self.key_index,
            self.tag_slot,
            self.lane_first,
            self.unit_first,
        ];
        for (dst, w) in out[..32].chunks_exact_mut(8).zip(words64) {
            dst.copy_from_slice(&w.to_le_bytes());
        }
        for (dst, w) in out[32..].chunks_exact_mut(4).zip(words32) {
            dst.copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// Parameters of the three batch kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GcmxBatchParams {
    /// All messages' input.
    pub(crate) input: u64,
    /// Output (may equal input).
    pub(crate) output: u64,
    /// All AADs.
    pub(crate) aad: u64,
    /// `GcmxBatchMsg[nmsgs]`.
    pub(crate) msgs: u64,
    /// `GcmxAesKey[nkeys]`.
    pub(crate) keys: u64,
    /// `GcmxKeyPowers[nkeys]`.
    pub(crate) key_powers: u64,
    /// Unit partials scratch.
    pub(crate) unit_partials: u64,
    /// Tags out, 16 bytes per slot.
    pub(crate) tags: u64,
    /// Messages.
    pub(crate) nmsgs: u32,
    /// Keys.
    pub(crate) nkeys: u32,
    /// Lanes of the units kernel.
    pub(crate) total_lanes: u32,
    /// 0 encrypt, 1 decrypt.
    pub(crate) decrypt: u32,
}

/// Parameters of `gcmx_bw_read` / `gcmx_bw_copy`.
#[cfg(any(feature = "bench", test))]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GcmxBwParams {
    /// Input.
    pub(crate) input: u64,
    /// Output.
    pub(crate) output: u64,
    /// Bytes (multiple of 16).
    pub(crate) nbytes: u64,
}

/// `GcmxGcmCtr` bytes for a launch whose real block 0 is block `first_block` of a message with J0 `j0`.
pub(crate) fn gcm_ctr_bytes(j0: &[u8; 16], first_block: u64) -> [u8; GCM_CTR_BYTES] {
    let mut out = [0u8; GCM_CTR_BYTES];
    out[..12].copy_from_slice(&j0[..12]);
    out[12..].copy_from_slice(&crate::plan::ctr_first(j0, first_block).to_le_bytes());
    out
}

/// `gcmx_strided_pow_exponent`: the exponent k of entry `i` of a warp-strided power table
/// (`table[i] = Q_k`).
pub(crate) fn strided_pow_exponent(threads: u32, warp_span: u64, i: u32) -> u64 {
    if i < POW_THREAD_BASE {
        return u64::from(WARP_SIZE) * u64::from(i + 1);
    }
    let t = i - POW_THREAD_BASE;
    let (w, l) = (t / WARP_SIZE, t % WARP_SIZE);
    let nwarps = threads / WARP_SIZE;
    u64::from(nwarps - 1 - w) * warp_span + u64::from(WARP_SIZE - l)
}

/// `gcmx_batch_msg_units`: (units K, lanes of unit 0 g0, lanes owned) for a message of `len` bytes.
pub(crate) fn batch_units(len: u64) -> (u64, u64, u64) {
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
    (k, g, u64::from(WARP_SIZE) * (k - 1) + g)
}

/// `gcmx_batch_plan`: fill `lane_first` / `unit_first` in order; returns (total lanes, total units), or
/// `None` if a count would overflow 32 bits (the caller splits the batch).
pub(crate) fn batch_plan(msgs: &mut [GcmxBatchMsg]) -> Option<(u32, u32)> {
    let (mut lane, mut unit) = (0u64, 0u64);
    for m in msgs.iter_mut() {
        let (k, g0, lanes) = batch_units(m.data_len);
        let align = if k > 1 {
            u64::from(WARP_SIZE)
        } else if k == 1 {
            g0
        } else {
            1
        };
        lane = lane.div_ceil(align) * align;
        m.lane_first = u32::try_from(lane).ok()?;
        m.unit_first = u32::try_from(unit).ok()?;
        lane = lane.checked_add(lanes)?;
        unit = unit.checked_add(k)?;
    }
    Some((u32::try_from(lane).ok()?, u32::try_from(unit).ok()?))
}

/// Words of a 16-byte block as a `uint4` load sees them (little-endian words).
pub(crate) fn le_words(b: &[u8; 16]) -> [u32; 4] {
    core::array::from_fn(|i| {
        u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    })
}

#[cfg(all(test, feature = "cuda"))]
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
                (key, "key"),
                (ctr, "ctr"),
                (nr, "nr"),
                (_pad0, "_pad0")
            ]
        );
        check_struct!(
            GcmxExpandParams,
            "GcmxExpandParams",
            [
                (raw, "raw"),
                (out, "out"),
                (nkeys, "nkeys"),
                (_pad0, "_pad0")
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
            GcmxBwParams,
            "GcmxBwParams",
            [(input, "in"), (output, "out"), (nbytes, "nbytes")]
        );
        // Structs the host only serialises: sizes and the offsets the serialisers assume.
        assert_eq!(c_size("GcmxAesKey").0, AES_KEY_BYTES);
        assert_eq!(c_size("GcmxKeyPowers").0, KEY_POWERS_BYTES);
        assert_eq!(c_size("GcmxRawKey").0, RAW_KEY_BYTES);
        assert_eq!(
            (c_off("GcmxRawKey", "key"), c_off("GcmxRawKey", "len")),
            (0, 32)
        );
        assert_eq!(c_size("GcmxGcmCtr"), (GCM_CTR_BYTES, 4));
        assert_eq!(
            (
                c_off("GcmxGcmCtr", "j0_prefix"),
                c_off("GcmxGcmCtr", "ctr_first")
            ),
            (0, 12)
        );
        assert_eq!(c_size("GcmxBatchMsg").0, BATCH_MSG_BYTES);
        let offs = [
            ("data_off", 0),
            ("data_len", 8),
            ("aad_off", 16),
            ("aad_len", 24),
            ("j0", 32),
            ("key_index", 48),
            ("tag_slot", 52),
            ("lane_first", 56),
            ("unit_first", 60),
        ];
        for (f, o) in offs {
            assert_eq!(c_off("GcmxBatchMsg", f), o, "GcmxBatchMsg.{f}");
        }
    }

    #[test]
    fn constants_match_the_header() {
        let mine: &[(&str, u64)] = &[
            ("GCMX_ABI_VERSION", u64::from(ABI_VERSION)),
            ("GCMX_WARP_SIZE", u64::from(WARP_SIZE)),
            ("GCMX_POW_THREAD_BASE", u64::from(POW_THREAD_BASE)),
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
            ("GCMX_EXPAND_THREADS", u64::from(EXPAND_THREADS)),
            ("GCMX_KEY_POW_LINEAR", KEY_POW_LINEAR as u64),
            ("GCMX_KEY_POW_POW2", KEY_POW_POW2 as u64),
            ("GCMX_BW_THREADS", u64::from(BW_THREADS)),
            ("GCMX_BW_COPY_SPAN", BW_COPY_SPAN),
            ("GCMX_ABI_INFO_WORDS", ABI_INFO_WORDS as u64),
            ("GCMX_Q0_HI", (gcmx_core::field::MONT_ONE >> 64) as u64),
            ("GCMX_Q0_LO", gcmx_core::field::MONT_ONE as u64),
        ];
        for (name, v) in mine {
            assert_eq!(*v, c_const(name), "{name}");
        }
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
}

#[cfg(test)]
mod serialise_tests {
    use super::*;

    #[test]
    fn message_bytes_follow_the_c_layout() {
        let m = GcmxBatchMsg {
            data_off: 0x1111,
            data_len: 0x2222,
            aad_off: 0x3333,
            aad_len: 0x4444,
            j0: [5, 6, 7, 8],
            key_index: 9,
            tag_slot: 10,
            lane_first: 11,
            unit_first: 12,
        };
        let mut v = [0u8; BATCH_MSG_BYTES];
        m.encode(&mut v);
        let at = |o: usize, n: usize| -> u64 {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&v[o..o + n]);
            u64::from_le_bytes(b)
        };
        assert_eq!(at(8, 8), 0x2222);
        assert_eq!(at(24, 8), 0x4444);
        assert_eq!(at(32 + 12, 4), 8);
        assert_eq!(at(48, 4), 9);
        assert_eq!(at(60, 4), 12);
    }

    #[test]
    fn counter_block_bytes() {
        let mut j0 = [0xABu8; 16];
        j0[12..].copy_from_slice(&0xffff_fffeu32.to_be_bytes());
        let c = gcm_ctr_bytes(&j0, 3);
        assert_eq!(&c[..12], &j0[..12]);
        // ctr0 + 1 + 3 = 0xffff_fffe + 4 = 2 (mod 2^32), as the little-endian word a uint4 load reads
        assert_eq!(&c[12..], &2u32.to_le_bytes());
        assert_eq!(le_words(&[1u8; 16])[0], 0x0101_0101);
    }

    #[test]
    fn batch_plan_refuses_overflow() {
        // A message of 2^36 bytes owns 2^22 units of 32 lanes: 2^27 lanes; 64 of them overflow u32 lanes.
        let mut msgs = vec![
            GcmxBatchMsg {
                data_len: 1 << 36,
                ..Default::default()
            };
            64
        ];
        assert_eq!(batch_plan(&mut msgs), None);
    }
}
