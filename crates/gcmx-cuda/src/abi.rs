//! Rust mirrors of `cuda/gcmx_abi.h`: the kernels' parameter structs, constants and the helper functions
//! (`gcmx_strided_pow_exponent`, `gcmx_db_units`, `gcmx_db_scratch_bytes`). Every size, alignment, offset
//! and constant is asserted at compile time against the header's layout record (read by build.rs); the
//! helpers are compared with the header's C by a unit test.
//!
//! Layer: a leaf (plain data and arithmetic). Parameter structs carry device addresses, lengths and
//! counts only: keys, power tables and J0 live in device memory (see the header's conventions).

/// Version of the ABI this crate mirrors (`GCMX_ABI_VERSION`).
pub(crate) const ABI_VERSION: u32 = 4;
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

/// Threads per block of `gcmx_aes_expand_keys`.
pub(crate) const EXPAND_THREADS: u32 = 64;
/// Threads per block of `gcmx_key_powers`.
pub(crate) const KEY_POWERS_THREADS: u32 = 64;
/// Linear powers per key in a `GcmxKeyPowers`.
pub(crate) const KEY_POW_LINEAR: usize = 128;
/// Powers of two per key in a `GcmxKeyPowers`.
pub(crate) const KEY_POW_POW2: usize = 32;

/// Threads per block of the device-batch kernels.
pub(crate) const DB_THREADS: u32 = 128;
/// Columns of the device-batch plan.
pub(crate) const DB_COLS: usize = 8;
/// Grid barriers per launch of a device-batch seal kernel (P1..P4).
pub(crate) const DB_BARRIERS_SEAL: u32 = 4;
/// Grid barriers per launch of a device-batch open kernel (P1..P4, and the one after P5).
pub(crate) const DB_BARRIERS_OPEN: u32 = 5;
/// Blocks of a device-batch unit.
pub(crate) const DB_UNIT_BLOCKS: u64 = WARP_CHUNK;
/// Device-batch modes (`GCMX_DB_SEAL`, `_OPEN`, `_EXPECT`).
pub(crate) const DB_SEAL: u32 = 0;
pub(crate) const DB_OPEN: u32 = 1;
pub(crate) const DB_EXPECT: u32 = 2;
/// Flag: every nonce field holds J0 (16 bytes).
pub(crate) const DB_J0_GIVEN: u32 = 1;
/// Verdict bytes.
pub(crate) const VERDICT_OK: u8 = 0;
pub(crate) const VERDICT_REFUSED: u8 = 1;
pub(crate) const VERDICT_INVALID: u8 = 2;
/// Bytes of a `GcmxDevMsg`.
pub(crate) const DEV_MSG_BYTES: usize = 48;
/// Scratch offset of the per-block column counts.
const DB_SCR_BLK: u64 = 256;

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

/// Parameters of `gcmx_key_powers`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GcmxKeyPowersParams {
    /// `GcmxAesKey[nkeys]`.
    pub(crate) keys: u64,
    /// `GcmxKeyPowers[nkeys]` out.
    pub(crate) key_powers: u64,
    /// Keys.
    pub(crate) nkeys: u32,
    /// Padding, zero.
    pub(crate) _pad0: u32,
}

/// One message of a device-resident batch as the caller writes it (`GcmxDevMsg`, 48 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GcmxDevMsg {
    pub(crate) data_off: u64,
    pub(crate) data_len: u64,
    pub(crate) aad_off: u64,
    pub(crate) aad_len: u64,
    pub(crate) nonce_off: u64,
    pub(crate) nonce_len: u32,
    pub(crate) key: u32,
}

impl GcmxDevMsg {
    /// The 48 bytes of the C struct (little-endian fields in declaration order, no padding).
    pub(crate) fn encode(&self, out: &mut [u8]) {
        let w64 = [
            self.data_off,
            self.data_len,
            self.aad_off,
            self.aad_len,
            self.nonce_off,
        ];
        for (dst, w) in out[..40].chunks_exact_mut(8).zip(w64) {
            dst.copy_from_slice(&w.to_le_bytes());
        }
        out[40..44].copy_from_slice(&self.nonce_len.to_le_bytes());
        out[44..48].copy_from_slice(&self.key.to_le_bytes());
    }
}

/// Parameters of the device-batch kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GcmxDbParams {
    pub(crate) msgs: u64,
    pub(crate) data: u64,
    pub(crate) data_len: u64,
    pub(crate) aad: u64,
    pub(crate) aad_len: u64,
    pub(crate) nonces: u64,
    pub(crate) nonces_len: u64,
    pub(crate) tags: u64,
    pub(crate) verdicts: u64,
    pub(crate) keys: u64,
    pub(crate) key_powers: u64,
    pub(crate) scratch: u64,
    pub(crate) nmsgs: u32,
    pub(crate) nkeys: u32,
    pub(crate) nr: u32,
    pub(crate) mode: u32,
    pub(crate) tag_len: u32,
    pub(crate) flags: u32,
    pub(crate) bar_base: u32,
    pub(crate) _pad0: u32,
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

/// `gcmx_db_units`: (units K, lanes of unit 0 g0, whether unit 0 holds E_K(J0)'s block) for `len` bytes.
pub(crate) fn db_units(len: u64) -> (u64, u32, bool) {
    let n = len.div_ceil(16);
    let k = n.div_ceil(DB_UNIT_BLOCKS);
    if k == 0 {
        return (0, 0, false);
    }
    let m = n - DB_UNIT_BLOCKS * (k - 1);
    let need = m.div_ceil(32);
    let mut g = 1u64;
    while g < need {
        g <<= 1;
    }
    (k, g as u32, m < 32 * g)
}

const fn db_align(x: u64) -> u64 {
    x.div_ceil(256) * 256
}

/// `gcmx_db_scratch_bytes`: the scratch of a device-batch launch over `n` messages with `grid` blocks.
pub(crate) fn db_scratch_bytes(n: u32, grid: u32) -> u64 {
    let n = u64::from(n);
    let msgs = db_align(DB_SCR_BLK + 8 * DB_COLS as u64 * u64::from(grid));
    msgs + db_align(64 * n) + db_align(16 * n) + db_align(16 * n) + db_align(8 * n)
}

/// Words of a 16-byte block as a `uint4` load sees them (little-endian words).
#[cfg(any(feature = "bench", test))]
pub(crate) fn le_words(b: &[u8; 16]) -> [u32; 4] {
    core::array::from_fn(|i| {
        u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    })
}

/// The layout record of `cuda/gcmx_abi.h`, as build.rs read it (sizes, field offsets, constants). The
/// header checks the same numbers on the C side with static asserts.
mod c {
    include!(concat!(env!("OUT_DIR"), "/abi_layout.rs"));
}

/// Compile-time check that a `#[repr(C)]` mirror has the header's size, alignment and field offsets
/// (`rust_field = c_field`).
macro_rules! same_layout {
    ($t:ident { $($rf:ident = $cf:ident),* $(,)? }) => {
        const _: () = {
            assert!(core::mem::size_of::<$t>() == c::size::$t.0, concat!("size of ", stringify!($t)));
            assert!(core::mem::align_of::<$t>() == c::size::$t.1, concat!("alignment of ", stringify!($t)));
            $( assert!(
                core::mem::offset_of!($t, $rf) == c::offset::$t::$cf,
                concat!("offset of ", stringify!($t), ".", stringify!($cf))
            ); )*
        };
    };
}

/// Compile-time check that each constant equals the header's.
macro_rules! same_values {
    ($($rust:expr => $c:ident),* $(,)?) => {
        const _: () = { $( assert!(($rust) as u64 == c::value::$c, stringify!($c)); )* };
    };
}

#[cfg(any(feature = "bench", test))]
same_layout!(GcmxGhashParams {
    data = data,
    nbytes = nbytes,
    powers = powers,
    partials = partials
});
same_layout!(GcmxGcmParams {
    input = r#in,
    output = out,
    nbytes = nbytes,
    powers = powers,
    partials = partials,
    key = key,
    ctr = ctr,
    nr = nr,
    _pad0 = _pad0
});
same_layout!(GcmxExpandParams {
    raw = raw,
    out = out,
    nkeys = nkeys,
    _pad0 = _pad0
});
same_layout!(GcmxKeyPowersParams {
    keys = keys,
    key_powers = key_powers,
    nkeys = nkeys,
    _pad0 = _pad0
});
same_layout!(GcmxDbParams {
    msgs = msgs,
    data = data,
    data_len = data_len,
    aad = aad,
    aad_len = aad_len,
    nonces = nonces,
    nonces_len = nonces_len,
    tags = tags,
    verdicts = verdicts,
    keys = keys,
    key_powers = key_powers,
    scratch = scratch,
    nmsgs = nmsgs,
    nkeys = nkeys,
    nr = nr,
    mode = mode,
    tag_len = tag_len,
    flags = flags,
    bar_base = bar_base,
    _pad0 = _pad0
});
#[cfg(any(feature = "bench", test))]
same_layout!(GcmxBwParams {
    input = r#in,
    output = out,
    nbytes = nbytes
});

// Structs the host only serialises: their sizes and the offsets the serialisers assume.
const _: () = {
    assert!(c::size::GcmxAesKey.0 == AES_KEY_BYTES);
    assert!(c::size::GcmxKeyPowers.0 == KEY_POWERS_BYTES);
    assert!(c::size::GcmxRawKey.0 == RAW_KEY_BYTES);
    assert!(c::offset::GcmxRawKey::key == 0 && c::offset::GcmxRawKey::len == 32);
    assert!(c::size::GcmxGcmCtr.0 == GCM_CTR_BYTES && c::size::GcmxGcmCtr.1 == 4);
    assert!(c::offset::GcmxGcmCtr::j0_prefix == 0 && c::offset::GcmxGcmCtr::ctr_first == 12);
    assert!(c::size::GcmxDevMsg.0 == DEV_MSG_BYTES && c::size::GcmxDevMsg.1 == 8);
    assert!(c::offset::GcmxDevMsg::data_off == 0 && c::offset::GcmxDevMsg::data_len == 8);
    assert!(c::offset::GcmxDevMsg::aad_off == 16 && c::offset::GcmxDevMsg::aad_len == 24);
    assert!(c::offset::GcmxDevMsg::nonce_off == 32 && c::offset::GcmxDevMsg::nonce_len == 40);
    assert!(c::offset::GcmxDevMsg::key == 44);
};

same_values! {
    ABI_VERSION => GCMX_ABI_VERSION,
    WARP_SIZE => GCMX_WARP_SIZE,
    POW_THREAD_BASE => GCMX_POW_THREAD_BASE,
    GHASH_THREADS => GCMX_GHASH_THREADS,
    GHASH_WARP_SPAN => GCMX_GHASH_WARP_SPAN,
    GHASH_SPAN => GCMX_GHASH_SPAN,
    WARP_CHUNK => GCMX_WARP_CHUNK,
    FUSED_THREADS => GCMX_FUSED_THREADS,
    FUSED_WARP_SPAN => GCMX_FUSED_WARP_SPAN,
    FUSED_SPAN => GCMX_FUSED_SPAN,
    FUSED_POW_COUNT => GCMX_FUSED_POW_COUNT,
    KEY_POWERS_THREADS => GCMX_KEY_POWERS_THREADS,
    DB_THREADS => GCMX_DB_THREADS,
    DB_COLS => GCMX_DB_COLS,
    DB_BARRIERS_SEAL => GCMX_DB_BARRIERS_SEAL,
    DB_BARRIERS_OPEN => GCMX_DB_BARRIERS_OPEN,
    DB_UNIT_BLOCKS => GCMX_DB_UNIT_BLOCKS,
    DB_SEAL => GCMX_DB_SEAL,
    DB_OPEN => GCMX_DB_OPEN,
    DB_EXPECT => GCMX_DB_EXPECT,
    DB_J0_GIVEN => GCMX_DB_J0_GIVEN,
    VERDICT_OK => GCMX_VERDICT_OK,
    VERDICT_REFUSED => GCMX_VERDICT_REFUSED,
    VERDICT_INVALID => GCMX_VERDICT_INVALID,
    DB_SCR_BLK => GCMX_DB_SCR_BLK,
    EXPAND_THREADS => GCMX_EXPAND_THREADS,
    KEY_POW_LINEAR => GCMX_KEY_POW_LINEAR,
    KEY_POW_POW2 => GCMX_KEY_POW_POW2,
    ABI_INFO_WORDS => GCMX_ABI_INFO_WORDS,
    gcmx_core::backend::MONT_ONE >> 64 => GCMX_Q0_HI,
    gcmx_core::backend::MONT_ONE as u64 => GCMX_Q0_LO,
}
#[cfg(any(feature = "bench", test))]
same_values! {
    GHASH_POW_COUNT => GCMX_GHASH_POW_COUNT,
    BW_THREADS => GCMX_BW_THREADS,
    BW_COPY_SPAN => GCMX_BW_COPY_SPAN,
}

/// The header's helper functions against their Rust mirrors: a C program that includes the header
/// prints their results, compiled and run by the test (never by the build), with the host C compiler
/// (`$CC`, else `cc`); without one the test says so and checks nothing.
#[cfg(test)]
mod c_helpers {
    use super::*;

    /// The probe's output, or `None` (with a notice) when no C compiler is at hand.
    fn probe() -> Option<String> {
        let dir = std::env::temp_dir().join(format!("gcmx-abi-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let src = dir.join("probe.c");
        let exe = dir.join("probe");
        let c = r#"#include <stdio.h>
#include "gcmx_abi.h"
int main(void) {
  unsigned i;
  for (i = 0; i < GCMX_GHASH_POW_COUNT; i++)
    printf("ghexp %u %llu\n", i, (unsigned long long)gcmx_strided_pow_exponent(GCMX_GHASH_THREADS, GCMX_GHASH_WARP_SPAN, i));
  for (i = 0; i < GCMX_FUSED_POW_COUNT; i++)
    printf("fuexp %u %llu\n", i, (unsigned long long)gcmx_strided_pow_exponent(GCMX_FUSED_THREADS, GCMX_FUSED_WARP_SPAN, i));
  static const unsigned long long lens[] = {0, 1, 15, 16, 17, 64, 511, 512, 513, 1000, 1024, 1025,
      16383, 16384, 16385, 33000, 1 << 20, (1ull << 36) - 32};
  for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    uint32_t g0, fr; uint32_t k = gcmx_db_units(lens[i], &g0, &fr);
    printf("units %llu %u %u %u\n", lens[i], k, g0, fr);
  }
  static const unsigned ns[] = {1, 7, 1000, 1000000}, gs[] = {1, 3, 264, 1056};
  for (i = 0; i < 4; i++)
    printf("scratch %u %u %llu\n", ns[i], gs[i], (unsigned long long)gcmx_db_scratch_bytes(ns[i], gs[i]));
  return 0;
}
"#;
        std::fs::write(&src, c).ok()?;
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let built = std::process::Command::new(&cc)
            .args([
                "-std=c11",
                "-O0",
                "-I",
                concat!(env!("CARGO_MANIFEST_DIR"), "/cuda"),
                "-o",
            ])
            .arg(&exe)
            .arg(&src)
            .status();
        let out = match built {
            Ok(s) if s.success() => std::process::Command::new(&exe).output().ok(),
            Ok(s) => panic!("the header's probe does not compile with {cc}: {s}"),
            Err(e) => {
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr(),
                    "abi: no C compiler ({cc}: {e}): the header's helper functions were NOT compared"
                );
                None
            }
        };
        let _ = std::fs::remove_dir_all(&dir);
        let out = out?;
        assert!(out.status.success(), "the header's probe failed");
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    #[test]
    fn helper_functions_match_the_header() {
        let Some(text) = probe() else { return };
        let (mut gh, mut fu, mut units, mut scratch) = (0, 0, 0, 0);
        for line in text.lines() {
            let w: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap())
                .collect();
            match line.split_whitespace().next() {
                Some("ghexp") => {
                    assert_eq!(
                        strided_pow_exponent(GHASH_THREADS, GHASH_WARP_SPAN, w[0] as u32),
                        w[1]
                    );
                    gh += 1;
                }
                Some("fuexp") => {
                    assert_eq!(
                        strided_pow_exponent(FUSED_THREADS, FUSED_WARP_SPAN, w[0] as u32),
                        w[1]
                    );
                    fu += 1;
                }
                Some("units") => {
                    assert_eq!(
                        db_units(w[0]),
                        (w[1], w[2] as u32, w[3] != 0),
                        "gcmx_db_units({})",
                        w[0]
                    );
                    units += 1;
                }
                Some("scratch") => {
                    assert_eq!(db_scratch_bytes(w[0] as u32, w[1] as u32), w[2]);
                    scratch += 1;
                }
                _ => panic!("probe line {line:?}"),
            }
        }
        assert_eq!((gh, fu), (GHASH_POW_COUNT, FUSED_POW_COUNT));
        assert_eq!((units, scratch), (18, 4));
    }
}

#[cfg(test)]
mod serialise_tests {
    use super::*;

    #[test]
    fn descriptor_bytes_follow_the_c_layout() {
        let m = GcmxDevMsg {
            data_off: 0x1111,
            data_len: 0x2222,
            aad_off: 0x3333,
            aad_len: 0x4444,
            nonce_off: 0x5555,
            nonce_len: 12,
            key: 9,
        };
        let mut v = [0u8; DEV_MSG_BYTES];
        m.encode(&mut v);
        let at = |o: usize, n: usize| -> u64 {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&v[o..o + n]);
            u64::from_le_bytes(b)
        };
        assert_eq!(at(8, 8), 0x2222);
        assert_eq!(at(32, 8), 0x5555);
        assert_eq!(at(40, 4), 12);
        assert_eq!(at(44, 4), 9);
    }

    #[test]
    fn unit_geometry() {
        assert_eq!(db_units(0), (0, 0, false));
        assert_eq!(db_units(64), (1, 1, true)); // 4 blocks: one lane, J0's block free
        assert_eq!(db_units(1024), (1, 2, false)); // 64 blocks fill two lanes
        assert_eq!(db_units(1000), (1, 2, true));
        assert_eq!(db_units(16384), (1, 32, false));
        assert_eq!(db_units(16385), (2, 1, true));
        assert_eq!(db_units(1 << 20), (64, 32, false));
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
}
