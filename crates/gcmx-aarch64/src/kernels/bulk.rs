//! The main loop in assembly: whole steps of eight blocks, AES-CTR and GHASH interleaved by
//! hand with a fixed register plan, so that nothing is spilled and every vector pipe is fed.
//!
//! Written as assembly because the compiler's own schedule of the same intrinsics holds the
//! round keys, the powers and the data in flight at once, spills the data (a store each, which
//! costs a vector-pipe slot on Neoverse V1 and V2) and clusters the AES instructions. Modelled
//! by `scripts/aarch64.sh mca`, that code was slower than aws-lc's loop on Neoverse V1 and N1;
//! this one is below aws-lc's loops (benches/results.md has the figures, and the one exception).
//!
//! Register plan (the same in every variant):
//! - `v0..v7`: the AES states of the step's eight blocks, then the next step's counter blocks;
//! - `v8..v15`: the eight raw blocks the step hashes, then its output: an open's ciphertext
//!   (XORed with the keystream at the end, into the plaintext), a seal's previous step of
//!   ciphertext (replaced by the plaintext, pair by pair, once hashed, and by the ciphertext at
//!   the end: the next step's input);
//! - `v16, v17, v18`: the GHASH accumulators (low, middle, high products);
//! - `v19, v20, v21`: a pair's high halves, low halves and their XOR; `v21` holds the GHASH
//!   state (natural) between steps;
//! - `v22`: a product, the byte-reversal index, an open's first block of ciphertext again;
//! - `v23, v31`: round keys, alternately (odd rounds in `v23`); `v30` the last round key from
//!   round five on;
//! - `v24, v25, v26, v27`: TBL indexes of the high and low halves, the reduction constant, the
//!   counter template (`(0, J0[0..4], J0[4..8], J0[8..12])`);
//! - `v28, v29, v30`: one pair's powers of `H` (high halves, low halves, their XOR);
//! - `w9`: the counter of the step's first block, `w10..w17` the next step's counters
//!   big-endian (made during round five); `x0`, `x1` the input and
//!   output, `x2` the steps left, `x3` the round keys, `x4` the powers, `x5` the constants, `x6`
//!   a seal's previous step.
//!
//! A step: before round 0 the state folds into the first block (`v8 ^= reverse(v21)`); after
//! AES round `j` (j < 4) the products of blocks `2j` and `2j + 1` (two TBLs gather their halves
//! byte-reversed, six PMULLs against the powers, three XORs into the accumulators); after round
//! 4 the reduction; the last round XORs key and data in one EOR3 (two EORs without SHA3), and
//! the counter blocks of the next step are made in the registers the output leaves free. Only
//! lengths decide branches; no address depends on data or keys.

use core::arch::aarch64::uint8x16_t;

use super::ghash::Powers;
use super::ops::{IDX_HI, IDX_LO, IDX_REV, V};

/// The constants `x5` points to: TBL indexes (high halves, low halves, byte reversal) and the
/// reduction constant `0xC2 << 56` in lane 0.
#[repr(C, align(16))]
struct Consts([[u8; 16]; 4]);

static CONSTS: Consts = Consts([
    IDX_HI,
    IDX_LO,
    IDX_REV,
    [0, 0, 0, 0, 0, 0, 0, 0xC2, 0, 0, 0, 0, 0, 0, 0, 0],
]);

/// One block's AES round (AESE then AESMC, which cores fuse) with the key in `v$k`.
macro_rules! ae {
    ($i:literal, $k:literal) => {
        concat!(
            "aese v",
            $i,
            ".16b, v",
            $k,
            ".16b\naesmc v",
            $i,
            ".16b, v",
            $i,
            ".16b\n"
        )
    };
}

/// A round on all eight blocks with the key in `v$k`, a filler after each block.
macro_rules! round8 {
    ($k:literal; $f0:expr, $f1:expr, $f2:expr, $f3:expr, $f4:expr, $f5:expr, $f6:expr, $f7:expr) => {
        concat!(
            ae!(0, $k),
            $f0,
            ae!(1, $k),
            $f1,
            ae!(2, $k),
            $f2,
            ae!(3, $k),
            $f3,
            ae!(4, $k),
            $f4,
            ae!(5, $k),
            $f5,
            ae!(6, $k),
            $f6,
            ae!(7, $k),
            $f7
        )
    };
}

/// `v$d ^= v$a ^ v$b`.
macro_rules! acc3 {
    (true, $d:literal, $a:literal, $b:literal) => {
        concat!(
            "eor3 v", $d, ".16b, v", $d, ".16b, v", $a, ".16b, v", $b, ".16b\n"
        )
    };
    (false, $d:literal, $a:literal, $b:literal) => {
        concat!(
            "eor v", $d, ".16b, v", $d, ".16b, v", $a, ".16b\n", "eor v", $d, ".16b, v", $d,
            ".16b, v", $b, ".16b\n"
        )
    };
}

/// `v$d = v$a ^ v$b ^ v$c` (`$d` is not `$c`).
macro_rules! xor3 {
    (true, $d:literal, $a:literal, $b:literal, $c:literal) => {
        concat!(
            "eor3 v", $d, ".16b, v", $a, ".16b, v", $b, ".16b, v", $c, ".16b\n"
        )
    };
    (false, $d:literal, $a:literal, $b:literal, $c:literal) => {
        concat!(
            "eor v", $d, ".16b, v", $a, ".16b, v", $b, ".16b\n", "eor v", $d, ".16b, v", $d,
            ".16b, v", $c, ".16b\n"
        )
    };
}

/// The last round of block `$i` (AESE with the key in `v23`, no MixColumns), its keystream XORed
/// with the last round key (`v30`) and the data in `v$data` into `v$out`. Without SHA3 the
/// state register is used as scratch (it is dead after).
macro_rules! fin {
    (true, $i:literal, $out:literal, $data:literal) => {
        concat!(
            "aese v",
            $i,
            ".16b, v23.16b\n",
            "eor3 v",
            $out,
            ".16b, v",
            $i,
            ".16b, v30.16b, v",
            $data,
            ".16b\n"
        )
    };
    (false, $i:literal, $out:literal, $data:literal) => {
        concat!(
            "aese v",
            $i,
            ".16b, v23.16b\n",
            "eor v",
            $i,
            ".16b, v",
            $i,
            ".16b, v30.16b\n",
            "eor v",
            $out,
            ".16b, v",
            $i,
            ".16b, v",
            $data,
            ".16b\n"
        )
    };
}

/// The counter of block `$i` of a step, `w9 + $n`, big-endian into `w$r` (`$r` is `10 + $i`),
/// made ahead of its use.
macro_rules! ctr_pre {
    ($r:literal, $n:literal) => {
        concat!("add w", $r, ", w9, #", $n, "\nrev w", $r, ", w", $r, "\n")
    };
}

/// Counter block `$i` into `v$i`: the counter in `w$r` after the 12 bytes of the template.
macro_rules! ctr {
    ($i:literal, $r:literal) => {
        concat!(
            "fmov s",
            $i,
            ", w",
            $r,
            "\next v",
            $i,
            ".16b, v27.16b, v",
            $i,
            ".16b, #4\n"
        )
    };
}

/// Counters `$b + 0..8` into `w10..w17` (`$b` is 0 for the first step, 8 for the next).
macro_rules! ctrs_pre {
    (0) => {
        concat!(
            ctr_pre!(10, 0),
            ctr_pre!(11, 1),
            ctr_pre!(12, 2),
            ctr_pre!(13, 3),
            ctr_pre!(14, 4),
            ctr_pre!(15, 5),
            ctr_pre!(16, 6),
            ctr_pre!(17, 7),
        )
    };
    (8) => {
        concat!(
            ctr_pre!(10, 8),
            ctr_pre!(11, 9),
            ctr_pre!(12, 10),
            ctr_pre!(13, 11),
            ctr_pre!(14, 12),
            ctr_pre!(15, 13),
            ctr_pre!(16, 14),
            ctr_pre!(17, 15),
        )
    };
}

/// The first accumulation of a step (`v$d = v22 ^ v$p`) or a later one (`v$d ^= v22 ^ v$p`).
macro_rules! acc {
    ($e:tt, true, $d:literal, $p:literal) => {
        concat!("eor v", $d, ".16b, v22.16b, v", $p, ".16b\n")
    };
    ($e:tt, false, $d:literal, $p:literal) => {
        acc3!($e, $d, 22, $p)
    };
}

/// The round after which pair `j` (blocks `$a`, `$b`) is hashed: round key in `v$k`, the next
/// round's key loaded into `v$kn` from `$koff`; the products against the powers in `v28..v30`,
/// then the next pair's powers (from `$hi`, `$lo`, `$mid`; the last pair loads none). A seal
/// loads its plaintext pair into `v$a`, `v$b` once they are gathered (`$load`).
macro_rules! pair_round {
    ($e:tt, $first:tt, $k:literal, $kn:literal, $koff:literal, $a:literal, $b:literal,
     $fold:expr, $load:expr, $next:expr) => {
        round8!($k;
            concat!("ldr q", $kn, ", [x3, #", $koff, "]\n", $fold),
            concat!("tbl v19.16b, {{v", $a, ".16b, v", $b, ".16b}}, v24.16b\n"),
            concat!("tbl v20.16b, {{v", $a, ".16b, v", $b, ".16b}}, v25.16b\n"),
            concat!("eor v21.16b, v19.16b, v20.16b\npmull v22.1q, v19.1d, v28.1d\n", $load),
            concat!("pmull2 v28.1q, v19.2d, v28.2d\n", acc!($e, $first, 18, 28)),
            "pmull v22.1q, v20.1d, v29.1d\npmull2 v29.1q, v20.2d, v29.2d\n",
            concat!(acc!($e, $first, 16, 29), "pmull v22.1q, v21.1d, v30.1d\n"),
            concat!("pmull2 v30.1q, v21.2d, v30.2d\n", acc!($e, $first, 17, 30), $next)
        )
    };
}

/// A plain round: round key in `v$k`, the next one loaded into `v$kn` from `$koff`; `$f` after
/// the second block.
macro_rules! plain_round {
    ($k:literal, $kn:literal, $koff:literal, $f:expr) => {
        round8!($k; concat!("ldr q", $kn, ", [x3, #", $koff, "]\n"), $f, "", "", "", "", "", "")
    };
}

/// The loads of pair `j + 1`'s powers (`hi` at `16(j+1)`, `lo` at `64 + 16(j+1)`, `mid` at
/// `128 + 16(j+1)`).
macro_rules! next_powers {
    ($hi:literal, $lo:literal, $mid:literal) => {
        concat!(
            "ldr q28, [x4, #",
            $hi,
            "]\nldr q29, [x4, #",
            $lo,
            "]\nldr q30, [x4, #",
            $mid,
            "]\n"
        )
    };
}

/// Rounds 0 to 4 of a step: the four pairs and the reduction. `$sl0..$sl3` are a seal's
/// plaintext loads (empty for an open).
macro_rules! hash_rounds {
    ($e:tt, $sl0:expr, $sl1:expr, $sl2:expr, $sl3:expr) => {
        concat!(
            pair_round!($e, true, 31, 23, 16, 8, 9,
                "tbl v22.16b, {{v21.16b}}, v22.16b\neor v8.16b, v8.16b, v22.16b\n",
                $sl0, next_powers!(16, 80, 144)),
            pair_round!($e, false, 23, 31, 32, 10, 11, "", $sl1, next_powers!(32, 96, 160)),
            pair_round!($e, false, 31, 23, 48, 12, 13, "", $sl2, next_powers!(48, 112, 176)),
            pair_round!($e, false, 23, 31, 64, 14, 15, "", $sl3, ""),
            // round 4: the reduction (see `ghash::reduce`); the state ends in v21
            round8!(31;
                concat!("ldr q23, [x3, #80]\npmull v22.1q, v16.1d, v26.1d\n", acc3!($e, 17, 16, 18)),
                "ext v19.16b, v16.16b, v16.16b, #8\n",
                xor3!($e, 20, 19, 22, 17),
                "pmull v22.1q, v20.1d, v26.1d\n",
                "ext v19.16b, v20.16b, v20.16b, #8\n",
                xor3!($e, 21, 18, 19, 22),
                "",
                ""
            )
        )
    };
}

/// Rounds 5 to `NR − 2` (round keys alternate between `v23` and `v31`; the last round's key
/// goes to `v30` in round 5; an open reloads its first block of ciphertext into `v22` in the
/// last of them, `$open_c0`).
macro_rules! plain_rounds {
    (10, $kl:literal, $open_c0:expr) => {
        concat!(
            plain_round!(
                23,
                31,
                96,
                concat!("ldr q30, [x3, #", $kl, "]\n", ctrs_pre!(8))
            ),
            plain_round!(31, 23, 112, ""),
            plain_round!(23, 31, 128, ""),
            plain_round!(31, 23, 144, $open_c0),
        )
    };
    (12, $kl:literal, $open_c0:expr) => {
        concat!(
            plain_round!(
                23,
                31,
                96,
                concat!("ldr q30, [x3, #", $kl, "]\n", ctrs_pre!(8))
            ),
            plain_round!(31, 23, 112, ""),
            plain_round!(23, 31, 128, ""),
            plain_round!(31, 23, 144, ""),
            plain_round!(23, 31, 160, ""),
            plain_round!(31, 23, 176, $open_c0),
        )
    };
    (14, $kl:literal, $open_c0:expr) => {
        concat!(
            plain_round!(
                23,
                31,
                96,
                concat!("ldr q30, [x3, #", $kl, "]\n", ctrs_pre!(8))
            ),
            plain_round!(31, 23, 112, ""),
            plain_round!(23, 31, 128, ""),
            plain_round!(31, 23, 144, ""),
            plain_round!(23, 31, 160, ""),
            plain_round!(31, 23, 176, ""),
            plain_round!(23, 31, 192, ""),
            plain_round!(31, 23, 208, $open_c0),
        )
    };
}

/// Set-up before the loop: constants, the first counter blocks, the first pair's powers and
/// round key 0 (the GHASH state and the counter template arrive in `v21`, `v27`).
macro_rules! prologue {
    () => {
        concat!(
            "ldp q24, q25, [x5]\nldr q22, [x5, #32]\nldr q26, [x5, #48]\n",
            next_powers!(0, 64, 128),
            "ldr q31, [x3]\n",
            ctrs_pre!(0),
            ctr!(0, 10),
            ctr!(1, 11),
            ctr!(2, 12),
            ctr!(3, 13),
            ctr!(4, 14),
            ctr!(5, 15),
            ctr!(6, 16),
            ctr!(7, 17),
        )
    };
}

/// The end of a step: pointers and counter advanced, the constants the next step's start needs
/// (byte-reversal index, pair 0's powers, round key 0), and the loop.
macro_rules! epilogue {
    () => {
        concat!(
            "add w9, w9, #8\nadd x0, x0, #128\nadd x1, x1, #128\n",
            "ldr q22, [x5, #32]\n",
            next_powers!(0, 64, 128),
            "ldr q31, [x3]\n",
            "subs x2, x2, #1\nb.ne 2b\n"
        )
    };
}

/// The open loop: `$e` EOR3 or not, `$nr` rounds, `$kl` the last round key's offset.
macro_rules! open_loop {
    ($e:tt, $nr:tt, $kl:literal) => {
        concat!(
            "// gcmx-aarch64 loop: open eor3=", stringify!($e), " rounds=", $nr, "\n",
            prologue!(),
            "2:\n",
            "ldp q8, q9, [x0]\nldp q10, q11, [x0, #32]\nldp q12, q13, [x0, #64]\nldp q14, q15, [x0, #96]\n",
            hash_rounds!($e, "", "", "", ""),
            plain_rounds!($nr, $kl, "ldr q22, [x0]\n"),
            // the last round: output into v8..v15 (the data is dead once XORed), the state
            // registers take the next step's counters at once; stores in pairs
            fin!($e, 0, 8, 22), ctr!(0, 10),
            fin!($e, 1, 9, 9), ctr!(1, 11),
            "stp q8, q9, [x1]\n",
            fin!($e, 2, 10, 10), ctr!(2, 12),
            fin!($e, 3, 11, 11), ctr!(3, 13),
            "stp q10, q11, [x1, #32]\n",
            fin!($e, 4, 12, 12), ctr!(4, 14),
            fin!($e, 5, 13, 13), ctr!(5, 15),
            "stp q12, q13, [x1, #64]\n",
            fin!($e, 6, 14, 14), ctr!(6, 16),
            fin!($e, 7, 15, 15), ctr!(7, 17),
            "stp q14, q15, [x1, #96]\n",
            epilogue!(),
        )
    };
}

/// The seal loop: the previous step's ciphertext in `v8..v15` on entry (from `x6`).
macro_rules! seal_loop {
    ($e:tt, $nr:tt, $kl:literal) => {
        concat!(
            "// gcmx-aarch64 loop: seal eor3=", stringify!($e), " rounds=", $nr, "\n",
            prologue!(),
            "ldp q8, q9, [x6]\nldp q10, q11, [x6, #32]\nldp q12, q13, [x6, #64]\nldp q14, q15, [x6, #96]\n",
            "2:\n",
            hash_rounds!($e,
                "ldp q8, q9, [x0]\n", "ldp q10, q11, [x0, #32]\n",
                "ldp q12, q13, [x0, #64]\n", "ldp q14, q15, [x0, #96]\n"),
            plain_rounds!($nr, $kl, ""),
            // the last round: ciphertext into v8..v15 (the next step's input), stored in pairs
            fin!($e, 0, 8, 8), ctr!(0, 10),
            fin!($e, 1, 9, 9), ctr!(1, 11),
            "stp q8, q9, [x1]\n",
            fin!($e, 2, 10, 10), ctr!(2, 12),
            fin!($e, 3, 11, 11), ctr!(3, 13),
            "stp q10, q11, [x1, #32]\n",
            fin!($e, 4, 12, 12), ctr!(4, 14),
            fin!($e, 5, 13, 13), ctr!(5, 15),
            "stp q12, q13, [x1, #64]\n",
            fin!($e, 6, 14, 14), ctr!(6, 16),
            fin!($e, 7, 15, 15), ctr!(7, 17),
            "stp q14, q15, [x1, #96]\n",
            epilogue!(),
        )
    };
}

/// What one call of the loop works on.
pub(super) struct Bulk<'a> {
    /// Round keys `0..=NR` (each read little-endian from its bytes).
    pub(super) rk: &'a [u128; 15],
    /// The powers of `H` in pair layout.
    pub(super) powers: &'a Powers,
    /// The counter template (see [`super::aes::Counter`]).
    pub(super) template: V,
    /// The counter of the first block.
    pub(super) next: u32,
}

/// Run `steps` (at least one) whole steps from `src` into `dst` (each `128 · steps` bytes; the
/// same memory for an open in place), the GHASH state `y` (natural) carried; a seal hashes the
/// step before each (`prev`, 128 bytes: the ciphertext written just before `dst`), an open the
/// step itself. Returns the new state; the caller hashes a seal's last step.
///
/// # Safety
///
/// The core has AES and PMULL, and SHA3 if `E`; `src` is readable and `dst` writable for
/// `128 · steps` bytes (they are equal or do not overlap), and for a seal `prev` is readable
/// for 128 bytes; `steps >= 1`.
#[allow(unsafe_code)]
#[inline]
#[target_feature(enable = "aes")]
pub(super) unsafe fn run<const E: bool, const SEAL: bool, const NR: usize>(
    b: &Bulk<'_>,
    src: *const u8,
    dst: *mut u8,
    prev: *const u8,
    steps: usize,
    y: uint8x16_t,
) -> uint8x16_t {
    let mut y = y;
    macro_rules! call {
        ($text:expr) => {
            // SAFETY: the caller's contract: the loop reads `src` and writes `dst` for
            // `128 · steps` bytes, reads 128 bytes at `prev` (a seal), the round keys (`x3`,
            // 240 bytes), the powers (`x4`, 192 bytes) and the constants (`x5`, 64 bytes),
            // all valid for those lengths; it touches no other memory and no stack, and every
            // register it writes is declared.
            unsafe {
                core::arch::asm!(
                    $text,
                    inout("x0") src => _,
                    inout("x1") dst => _,
                    inout("x2") steps => _,
                    in("x3") b.rk.as_ptr(),
                    in("x4") b.powers.0.as_ptr(),
                    in("x5") CONSTS.0.as_ptr(),
                    in("x6") prev,
                    in("x9") u64::from(b.next),
                    out("x10") _, out("x11") _, out("x12") _, out("x13") _,
                    out("x14") _, out("x15") _, out("x16") _, out("x17") _,
                    out("v0") _, out("v1") _, out("v2") _, out("v3") _,
                    out("v4") _, out("v5") _, out("v6") _, out("v7") _,
                    out("v8") _, out("v9") _, out("v10") _, out("v11") _,
                    out("v12") _, out("v13") _, out("v14") _, out("v15") _,
                    out("v16") _, out("v17") _, out("v18") _, out("v19") _,
                    out("v20") _, inout("v21") y, out("v22") _, out("v23") _,
                    out("v24") _, out("v25") _, out("v26") _, in("v27") b.template,
                    out("v28") _, out("v29") _, out("v30") _, out("v31") _,
                    options(nostack),
                )
            }
        };
    }
    match (E, SEAL, NR) {
        (true, false, 10) => call!(concat!(".arch_extension sha3\n", open_loop!(true, 10, 160))),
        (true, false, 12) => call!(concat!(".arch_extension sha3\n", open_loop!(true, 12, 192))),
        (true, false, _) => call!(concat!(".arch_extension sha3\n", open_loop!(true, 14, 224))),
        (true, true, 10) => call!(concat!(".arch_extension sha3\n", seal_loop!(true, 10, 160))),
        (true, true, 12) => call!(concat!(".arch_extension sha3\n", seal_loop!(true, 12, 192))),
        (true, true, _) => call!(concat!(".arch_extension sha3\n", seal_loop!(true, 14, 224))),
        (false, false, 10) => call!(open_loop!(false, 10, 160)),
        (false, false, 12) => call!(open_loop!(false, 12, 192)),
        (false, false, _) => call!(open_loop!(false, 14, 224)),
        (false, true, 10) => call!(seal_loop!(false, 10, 160)),
        (false, true, 12) => call!(seal_loop!(false, 12, 192)),
        (false, true, _) => call!(seal_loop!(false, 14, 224)),
    }
    y
}
