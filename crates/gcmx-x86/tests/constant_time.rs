//! Constant time, checked on the compiled kernels: every kernel entry point runs with the same
//! public lengths and several sets of secrets (key, hence round keys and H; counter block, hence
//! a secret J0; GHASH state; AAD and data), and every run must execute the same instructions in
//! the same order and touch the same memory addresses as the reference run.
//!
//! How: the tracer of `common/ct.rs` re-runs this program as a child under `ptrace` and
//! single-steps each bracketed run, recording every instruction's address and the effective
//! addresses of its memory operands. A branch whose direction depends on a secret changes the
//! instruction sequence; a table lookup indexed by a secret changes an address. Single-stepping
//! is exact: the answer does not depend on timing or load.
//!
//! The secret sets of a case: the reference `R` (random key, counter and GHASH state; zero data
//! and AAD), an independent random set, and `R` with every secret byte XORed with `0xFF`, `0x55`,
//! `0x33` and `0x0F`. Against `R ^ 0xFF` every secret input bit differs, so code that branches on
//! (or indexes memory by) any single bit of the key, the counter, the GHASH state or the data is
//! caught on every run, whatever the random reference is. (Values derived through AES, the round
//! keys and H, differ from the reference's in each bit with probability 1/2 per set: one of their
//! bits escapes all five comparisons of a case with probability 1/32, and every entry point runs
//! in many cases.) The three other masks give each bit
//! position within a byte its own pattern of flips (bit `b` is flipped by `0x55` iff `b` is even,
//! by `0x33` iff `b & 2 == 0`, by `0x0F` iff `b < 4`), so a leak of the XOR of two bits at
//! different positions within their bytes, which `R ^ 0xFF` leaves unchanged, is caught too. The
//! random set covers what the patterns do not (and the zero data of `R` against random data).
//! The self-check cases prove this on deliberately leaky code: branches on one bit of the key
//! (low and high bits), of the counter, of the GHASH state and of the data, lookups indexed by
//! one key byte, and branches on the XOR of two key bits must each be caught exactly by the
//! secret sets whose value of that bit differs from the reference's, and always by at least one
//! of the deterministic (masked) sets.
//!
//! What it covers: the code that runs for the inputs below, including the key set-up, on every
//! kernel width this CPU runs (each width forced through its constructor, its kernel name
//! checked). The counter's last word takes values on both sides of the usual shortcuts (just
//! below a carry out of its last byte against far from one, about to wrap mod 2^32 against not).
//! What it does not: code paths no input here reaches, kernel widths this CPU lacks (each is
//! named on stderr and stdout and in the summary line), timing differences inside one
//! instruction (AES-NI, PCLMULQDQ and the vector instructions used here are documented as
//! data-independent in timing), and whether secrets are wiped afterwards.
//!
//! Linux x86-64 only (ptrace); elsewhere it reports that it did not run.

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod common;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[path = "common/ct.rs"]
mod ct;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn main() {
    if ct::is_child() {
        tracee::run();
    } else {
        parent::run();
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn main() {
    println!("constant_time: needs Linux on x86-64 (ptrace); not run here");
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[global_allocator]
static ALLOC: ct::lifo::Lifo = ct::lifo::Lifo::new();

/// The runs to compare: what the child executes and the parent reads back.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod cases {
    use gcmx_x86::StitchedKey;

    /// An entry point of the kernel crate, or the self-check's leaky code.
    #[derive(Clone, Copy, Debug)]
    pub enum Op {
        /// Key set-up: expansion, `H`, its powers.
        New,
        Seal,
        Open,
        Ghash,
        EncryptBlock,
        SealMessage,
        OpenMessage,
        /// `seal_message` from the data into a separate buffer.
        SealMessageOut,
        /// `open_message` from the data into a separate buffer.
        OpenMessageOut,
        /// `seal_message96`: J0 from a 12-byte nonce (the counter block's first 12 bytes).
        SealMessage96,
        /// `open_message96`.
        OpenMessage96,
        /// `seal_message96` from the data into a separate buffer.
        SealMessage96Out,
        /// `open_message96` from the data into a separate buffer.
        OpenMessage96Out,
        /// `open_uncached`: into a separate buffer, written past the caches.
        OpenUncached,
        /// `open_message_uncached`.
        OpenMessageUncached,
        /// `open_message_checked`, comparing the tag: against the reference's tag (the
        /// reference's matches, every other set's does not).
        OpenMessageChecked,
        /// `open_message96_checked` from the data into a separate buffer, as
        /// `OpenMessageChecked`.
        OpenMessage96CheckedOut,
        /// Deliberately leaky code (the self-check): must be caught.
        Leak,
    }

    /// A kernel width, forced through its constructor.
    pub type Ctor = fn(&[u8]) -> Option<StitchedKey>;
    pub struct Width {
        pub name: &'static str,
        pub ctor: Ctor,
        /// What `kernel_name` must say for a key built by `ctor`.
        pub kernel: &'static str,
        /// The CPU features the width needs (as `Level::detect` in the library checks them).
        pub features: &'static [&'static str],
        /// Bytes per step of its bulk loop.
        pub step: usize,
    }

    const NARROW: &[&str] = &["aes", "pclmulqdq", "ssse3"];
    const WIDE: &[&str] = &["aes", "pclmulqdq", "ssse3", "avx2", "vaes", "vpclmulqdq"];
    const ZMM: &[&str] = &[
        "aes",
        "pclmulqdq",
        "ssse3",
        "avx2",
        "vaes",
        "vpclmulqdq",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512vbmi",
    ];

    pub fn widths() -> [Width; 3] {
        [
            Width {
                name: "512-bit (new)",
                ctor: StitchedKey::new,
                kernel: "vaes-vpclmulqdq-512",
                features: ZMM,
                step: 512,
            },
            Width {
                name: "256-bit (new_256)",
                ctor: StitchedKey::new_256,
                kernel: "vaes-vpclmulqdq-256",
                features: WIDE,
                step: 256,
            },
            Width {
                name: "128-bit (new_narrow)",
                ctor: StitchedKey::new_narrow,
                kernel: "aesni-pclmulqdq-128",
                features: NARROW,
                step: 128,
            },
        ]
    }

    fn has(feature: &str) -> bool {
        match feature {
            "aes" => std::is_x86_feature_detected!("aes"),
            "pclmulqdq" => std::is_x86_feature_detected!("pclmulqdq"),
            "ssse3" => std::is_x86_feature_detected!("ssse3"),
            "avx2" => std::is_x86_feature_detected!("avx2"),
            "vaes" => std::is_x86_feature_detected!("vaes"),
            "vpclmulqdq" => std::is_x86_feature_detected!("vpclmulqdq"),
            "avx512f" => std::is_x86_feature_detected!("avx512f"),
            "avx512bw" => std::is_x86_feature_detected!("avx512bw"),
            "avx512vl" => std::is_x86_feature_detected!("avx512vl"),
            "avx512vbmi" => std::is_x86_feature_detected!("avx512vbmi"),
            other => unreachable!("feature {other}"),
        }
    }

    /// The features of `w` this CPU lacks; empty where it runs `w`. Checked against the
    /// library's own answer, so that the two cannot drift apart.
    pub fn missing(w: &Width) -> Vec<&'static str> {
        let m: Vec<&str> = w.features.iter().copied().filter(|f| !has(f)).collect();
        let lib = match w.kernel {
            "vaes-vpclmulqdq-512" => StitchedKey::cpu_supports_512(),
            "vaes-vpclmulqdq-256" => StitchedKey::cpu_supports_wide(),
            _ => StitchedKey::cpu_supported(),
        };
        assert_eq!(
            m.is_empty(),
            lib,
            "{}: feature list and library disagree",
            w.name
        );
        m
    }

    /// One line per width this CPU lacks: which width was not checked, and why.
    pub fn not_checked() -> Vec<String> {
        widths()
            .iter()
            .filter_map(|w| {
                let m = missing(w);
                (!m.is_empty()).then(|| {
                    format!(
                        "{} kernels ({}) NOT checked: this CPU lacks {}",
                        w.name,
                        w.kernel,
                        m.join(", ")
                    )
                })
            })
            .collect()
    }

    /// Which secret a self-check's leak reads, and how.
    #[derive(Clone, Copy, Debug)]
    pub enum Source {
        Key,
        Ctr,
        /// The GHASH state, its bits numbered as the integer's.
        Y,
        Data,
    }

    #[derive(Clone, Copy, Debug)]
    pub enum Leak {
        /// A branch on bit `n` (bit `n % 8` of byte `n / 8`).
        Branch(Source, usize),
        /// A table lookup indexed by byte `n`.
        Lookup(Source, usize),
        /// A branch on the XOR of two bits.
        Xor(Source, usize, usize),
    }

    /// One comparison: an entry point, a kernel width (`None` for the self-check), the public
    /// lengths, and the counter values of the reference and the random set.
    #[derive(Clone, Debug)]
    pub struct Case {
        pub op: Op,
        pub width: Option<usize>,
        pub key_len: usize,
        pub len: usize,
        pub aad_len: usize,
        pub ctr_pair: usize,
        /// The received tag's length (public), for the ops that compare it.
        pub tag_len: usize,
        pub leak: Option<Leak>,
    }

    /// The last 32-bit counter word of the reference and of the random set: far from any carry
    /// against a carry out of the last byte inside the first step; no wrap against a wrap mod
    /// 2^32. (The masked sets add their complements: `R ^ 0xFF` of `0` is `0xFFFF_FFFF`, a wrap
    /// after the first block.)
    pub const CTR_PAIRS: [(u32, u32); 3] = [
        (0x0000_0000, 0x0000_00F9),
        (0x1234_5601, 0xFFFF_FFF3),
        (0x0000_0100, 0x0101_01FF),
    ];

    /// The masks XORed into every secret byte of the reference, one masked set each.
    pub const MASKS: [u8; 4] = [0xFF, 0x55, 0x33, 0x0F];

    pub fn all() -> Vec<Case> {
        let mut v = Vec::new();
        let widths = widths();
        for (width, w) in widths.iter().enumerate() {
            if !missing(w).is_empty() {
                continue;
            }
            let width = Some(width);
            for key_len in [16, 24, 32] {
                for op in [Op::New, Op::EncryptBlock] {
                    v.push(Case {
                        op,
                        width,
                        key_len,
                        len: 16,
                        aad_len: 0,
                        ctr_pair: 0,
                        tag_len: 16,
                        leak: None,
                    });
                }
            }
            // lengths across the kernel's step (`step` bytes: 512, 256 or 128) and tail: one
            // step plus a long tail, two steps plus a short one and two steps alone (the length
            // block hashed by itself) at every width, and three steps (longer messages only
            // repeat the loop; the 512-bit kernels' steps of a 12-byte nonce build their
            // counter blocks from the first, public, counter);
            // each length with one pair of counters, each pair at a length with whole steps
            let step = w.step;
            let lens = [
                0usize,
                1,
                16,
                40,
                64,
                255,
                300,
                step + 88,
                2 * step + 7,
                2 * step,
                3 * step + 40,
            ];
            for (i, len) in lens.into_iter().enumerate() {
                for op in [
                    Op::Seal,
                    Op::Open,
                    Op::Ghash,
                    Op::SealMessage,
                    Op::OpenMessage,
                    Op::SealMessageOut,
                    Op::OpenMessageOut,
                    Op::SealMessage96,
                    Op::OpenMessage96,
                    Op::SealMessage96Out,
                    Op::OpenMessage96Out,
                    Op::OpenUncached,
                    Op::OpenMessageUncached,
                    Op::OpenMessageChecked,
                    Op::OpenMessage96CheckedOut,
                ] {
                    v.push(Case {
                        op,
                        width,
                        key_len: [16, 32, 24][(i + op as usize) % 3],
                        len,
                        aad_len: [0, 13, 64, 100][(i + 2 * op as usize) % 4],
                        ctr_pair: i % CTR_PAIRS.len(),
                        tag_len: [16, 12, 13, 4][i % 4],
                        leak: None,
                    });
                }
            }
            // messages with neither AAD nor data (their own entry): the whole-message ops
            // whose empty message the lengths above leave out (with no AAD only where `op` is
            // even)
            for (i, op) in [
                Op::SealMessage,
                Op::SealMessageOut,
                Op::SealMessage96,
                Op::SealMessage96Out,
                Op::OpenMessageChecked,
            ]
            .into_iter()
            .enumerate()
            {
                v.push(Case {
                    op,
                    width,
                    key_len: [16, 24, 32][i % 3],
                    len: 0,
                    aad_len: 0,
                    ctr_pair: i % CTR_PAIRS.len(),
                    tag_len: [16, 12][i % 2],
                    leak: None,
                });
            }
        }
        // The self-check: bits low and high in the 256-bit key, in the counter block, in the
        // GHASH state and in the data; a lookup by the first and the last key byte; XORs of two
        // key bits at different positions within their bytes (which `R ^ 0xFF` cannot catch).
        // Each with three references, so that a catch never rests on one random draw.
        let leaks = [
            Leak::Branch(Source::Key, 0),
            Leak::Branch(Source::Key, 7),
            Leak::Branch(Source::Key, 8),
            Leak::Branch(Source::Key, 100),
            Leak::Branch(Source::Key, 127),
            Leak::Branch(Source::Key, 128),
            Leak::Branch(Source::Key, 201),
            Leak::Branch(Source::Key, 255),
            Leak::Branch(Source::Ctr, 0),
            Leak::Branch(Source::Ctr, 127),
            Leak::Branch(Source::Y, 64),
            Leak::Branch(Source::Data, 3),
            Leak::Branch(Source::Data, 511),
            Leak::Lookup(Source::Key, 0),
            Leak::Lookup(Source::Key, 31),
            Leak::Xor(Source::Key, 3, 12),
            Leak::Xor(Source::Key, 0, 255),
            Leak::Xor(Source::Key, 129, 130),
        ];
        for _ in 0..3 {
            for leak in leaks {
                v.push(Case {
                    op: Op::Leak,
                    width: None,
                    key_len: 32,
                    len: 64,
                    aad_len: 0,
                    ctr_pair: 0,
                    tag_len: 16,
                    leak: Some(leak),
                });
            }
        }
        v
    }
}

/// The child: runs every case, warm-up once unbracketed (lazy initialisation such as the CPU
/// feature cache happens there), then the reference and every other secret set each between two
/// `SIGSTOP`s.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod tracee {
    use super::cases::{self, Case, Leak, Op, Source};
    use super::ct;
    use gcmx_x86::{InOutBuf, StitchedKey};
    use std::hint::black_box;

    use super::common::Rng;

    /// One run's secrets; the key's and data's lengths are the case's public lengths. Each run
    /// copies its secrets into one place, so that every run reads them from the same addresses.
    #[derive(Clone)]
    struct Secrets {
        key: [u8; 32],
        key_len: usize,
        ctr: [u8; 16],
        y: u128,
        aad: [u8; 128],
        aad_len: usize,
        data: Vec<u8>,
    }

    impl Default for Secrets {
        fn default() -> Secrets {
            Secrets {
                key: [0; 32],
                key_len: 0,
                ctr: [0; 16],
                y: 0,
                aad: [0; 128],
                aad_len: 0,
                data: Vec::new(),
            }
        }
    }

    impl Secrets {
        fn key(&self) -> &[u8] {
            &self.key[..self.key_len]
        }
        fn aad(&self) -> &[u8] {
            &self.aad[..self.aad_len]
        }

        /// Every secret byte XORed with `m` (the public lengths kept).
        fn masked(&self, m: u8) -> Secrets {
            let mut s = self.clone();
            s.key[..s.key_len].iter_mut().for_each(|b| *b ^= m);
            s.ctr.iter_mut().for_each(|b| *b ^= m);
            s.y ^= u128::from_ne_bytes([m; 16]);
            s.aad[..s.aad_len].iter_mut().for_each(|b| *b ^= m);
            s.data.iter_mut().for_each(|b| *b ^= m);
            s
        }

        /// The bytes a self-check's leak reads.
        fn source(&self, src: Source) -> Vec<u8> {
            match src {
                Source::Key => self.key().to_vec(),
                Source::Ctr => self.ctr.to_vec(),
                Source::Y => self.y.to_le_bytes().to_vec(),
                Source::Data => self.data.clone(),
            }
        }
    }

    /// The reference (class A: zero data and AAD) or the random set (class B).
    fn secrets(case: &Case, class: usize, rng: &mut Rng) -> Secrets {
        let mut key = [0u8; 32];
        let mut ctr = [0u8; 16];
        let mut data = vec![0u8; case.len];
        let mut aad = [0u8; 128];
        rng.fill(&mut key[..case.key_len]);
        rng.fill(&mut ctr);
        if class == 1 {
            rng.fill(&mut data);
            rng.fill(&mut aad[..case.aad_len]);
        }
        let (a, b) = cases::CTR_PAIRS[case.ctr_pair];
        let low = if class == 0 { a } else { b };
        ctr[12..].copy_from_slice(&low.to_be_bytes());
        let y = u128::from(rng.next()) << 64 | u128::from(rng.next());
        Secrets {
            key,
            key_len: case.key_len,
            ctr,
            y,
            aad,
            aad_len: case.aad_len,
            data,
        }
    }

    /// The reference first, then the random set, then the reference under each mask.
    fn secret_sets(case: &Case, rng: &mut Rng) -> Vec<Secrets> {
        let r = secrets(case, 0, rng);
        let mut v = vec![r.clone(), secrets(case, 1, rng)];
        v.extend(cases::MASKS.iter().map(|&m| r.masked(m)));
        v
    }

    fn bit(bytes: &[u8], n: usize) -> u8 {
        (bytes[n / 8] >> (n % 8)) & 1
    }

    /// What a leak depends on: runs with equal values trace alike, runs with different ones
    /// must not.
    fn leaked(leak: Leak, s: &Secrets) -> u8 {
        match leak {
            Leak::Branch(src, n) => bit(&s.source(src), n),
            Leak::Lookup(src, n) => s.source(src)[n],
            Leak::Xor(src, i, j) => {
                let b = s.source(src);
                bit(&b, i) ^ bit(&b, j)
            }
        }
    }

    /// The expectation of every set after the reference: `=` for the kernels; for a leak `!`
    /// exactly where the leaked value differs from the reference's.
    fn expectations(case: &Case, sets: &[Secrets]) -> String {
        let Some(leak) = case.leak else {
            return "=".repeat(sets.len() - 1);
        };
        let r = leaked(leak, &sets[0]);
        let e: String = sets[1..]
            .iter()
            .map(|s| if leaked(leak, s) != r { '!' } else { '=' })
            .collect();
        // Caught by a masked set, not only by the random one: every time, not by chance.
        assert!(
            e[1..].contains('!'),
            "{leak:?}: no masked set changes the leaked value"
        );
        e
    }

    #[inline(never)]
    fn taken() -> u64 {
        black_box(0x7a6b)
    }

    #[inline(never)]
    fn not_taken() -> u64 {
        black_box(0x1c2d) ^ black_box(3)
    }

    static TABLE: [u64; 256] = {
        let mut t = [0u64; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            i += 1;
        }
        t
    };

    /// Deliberately leaky code: what the check must catch. The data is read from `buf`, the
    /// message buffer the kernels get (at one address for every run).
    #[inline(never)]
    fn leaky(leak: Leak, s: &Secrets, buf: &[u8]) -> u64 {
        let (src, n) = match leak {
            Leak::Branch(src, n) | Leak::Lookup(src, n) | Leak::Xor(src, n, _) => (src, n),
        };
        let bytes: [u8; 32];
        let b: &[u8] = match src {
            Source::Key => s.key(),
            Source::Ctr => &s.ctr,
            Source::Y => {
                bytes = {
                    let mut x = [0u8; 32];
                    x[..16].copy_from_slice(&s.y.to_le_bytes());
                    x
                };
                &bytes
            }
            Source::Data => buf,
        };
        let b = black_box(b);
        match leak {
            Leak::Branch(..) => {
                if bit(b, n) == 1 {
                    taken()
                } else {
                    not_taken()
                }
            }
            Leak::Lookup(..) => black_box(&TABLE)[usize::from(b[n])],
            Leak::Xor(_, i, j) => {
                if bit(b, i) ^ bit(b, j) == 1 {
                    taken()
                } else {
                    not_taken()
                }
            }
        }
    }

    /// Run one entry point on `s`, with `buf` (already holding the data) as the message.
    #[inline(never)]
    fn run_op(
        case: &Case,
        ctor: Option<cases::Ctor>,
        key: Option<&StitchedKey>,
        s: &Secrets,
        buf: &mut [u8],
        out: &mut [u8],
        tag: &[u8],
    ) {
        if let Op::Leak = case.op {
            black_box(leaky(case.leak.expect("a leak"), s, buf));
            return;
        }
        let Some(key) = key else {
            let ctor = ctor.expect("a kernel width");
            drop(black_box(ctor(black_box(s.key()))));
            return;
        };
        match case.op {
            Op::New | Op::Leak => unreachable!("runs without a key"),
            Op::Seal => {
                let mut y = s.y;
                key.seal(&s.ctr, &mut y, buf);
                black_box(y);
            }
            Op::Open => {
                let mut y = s.y;
                key.open(&s.ctr, &mut y, buf);
                black_box(y);
            }
            Op::OpenUncached => {
                let mut y = s.y;
                black_box(key.open_uncached(&s.ctr, &mut y, buf, &mut out[..buf.len()]));
                black_box(y);
            }
            Op::OpenMessageChecked => {
                black_box(key.open_message_checked(&s.ctr, s.aad(), buf, tag));
            }
            Op::OpenMessage96CheckedOut => {
                let io = InOutBuf::new(buf, &mut out[..buf.len()]).expect("same lengths");
                black_box(key.open_message96_checked(&nonce(s), s.aad(), io, tag));
            }
            Op::OpenMessageUncached => {
                let t = key.open_message_uncached(&s.ctr, s.aad(), buf, &mut out[..buf.len()]);
                black_box(t);
            }
            Op::Ghash => {
                let mut y = s.y;
                key.ghash(&mut y, buf);
                black_box(y);
            }
            Op::EncryptBlock => {
                let mut b = s.ctr;
                key.encrypt_block(&mut b);
                black_box(b);
            }
            // `ctr` as J0: secret, as for a nonce that is not 12 bytes long
            Op::SealMessage => drop(black_box(key.seal_message(&s.ctr, s.aad(), buf))),
            Op::OpenMessage => drop(black_box(key.open_message(&s.ctr, s.aad(), buf))),
            Op::SealMessageOut | Op::OpenMessageOut => {
                let io = InOutBuf::new(buf, &mut out[..buf.len()]).expect("same lengths");
                let t = if let Op::SealMessageOut = case.op {
                    key.seal_message(&s.ctr, s.aad(), io)
                } else {
                    key.open_message(&s.ctr, s.aad(), io)
                };
                black_box(t);
            }
            // the nonce is secret here too, as every input but the lengths
            Op::SealMessage96 => drop(black_box(key.seal_message96(&nonce(s), s.aad(), buf))),
            Op::OpenMessage96 => drop(black_box(key.open_message96(&nonce(s), s.aad(), buf))),
            Op::SealMessage96Out | Op::OpenMessage96Out => {
                let io = InOutBuf::new(buf, &mut out[..buf.len()]).expect("same lengths");
                let t = if let Op::SealMessage96Out = case.op {
                    key.seal_message96(&nonce(s), s.aad(), io)
                } else {
                    key.open_message96(&nonce(s), s.aad(), io)
                };
                black_box(t);
            }
        }
    }

    /// The first 12 bytes of the run's counter block, as a nonce.
    fn nonce(s: &Secrets) -> [u8; 12] {
        let mut n = [0u8; 12];
        n.copy_from_slice(&s.ctr[..12]);
        n
    }

    /// The expected tag of the reference set `sets[0]`, for `case`'s op; checked to match the
    /// reference's and not the random set's (so that the traced runs take both outcomes).
    fn reference_tag(case: &Case, ctor: cases::Ctor, sets: &[Secrets]) -> [u8; 16] {
        let open = |s: &Secrets, tag: Option<&[u8]>| {
            let key = ctor(s.key()).expect("CPU runs the kernels");
            let mut m = s.data.clone();
            let (t, ok) = match case.op {
                Op::OpenMessageChecked => (
                    key.open_message(&s.ctr, s.aad(), &mut m[..]),
                    tag.map(|t| {
                        key.open_message_checked(&s.ctr, s.aad(), &mut s.data.clone()[..], t)
                    }),
                ),
                _ => (
                    key.open_message96(&nonce(s), s.aad(), &mut m[..]),
                    tag.map(|t| {
                        key.open_message96_checked(&nonce(s), s.aad(), &mut s.data.clone()[..], t)
                    }),
                ),
            };
            (t, ok)
        };
        let (tag, _) = open(&sets[0], None);
        let received = &tag[..case.tag_len];
        assert_eq!(open(&sets[0], Some(received)).1, Some(true), "{case:?}");
        assert_eq!(open(&sets[1], Some(received)).1, Some(false), "{case:?}");
        tag
    }

    /// One traced run: the parent single-steps from the first stop to the second. Not inlined,
    /// so that every run executes the same code whatever the caller's loop becomes.
    #[inline(never)]
    fn bracketed(
        case: &Case,
        ctor: Option<cases::Ctor>,
        key: Option<&StitchedKey>,
        s: &Secrets,
        buf: &mut [u8],
        out: &mut [u8],
        tag: &[u8],
    ) {
        ct::stop();
        run_op(case, ctor, key, s, buf, out, tag);
        ct::stop();
    }

    pub fn run() {
        let widths = cases::widths();
        let mut rng = Rng(0x5eed);
        let mut buf = vec![0u8; 4096];
        // the output of the out-of-place cases, at the same address for every run
        let mut out = vec![0u8; 4096];
        let mut slot = Secrets::default();
        for case in cases::all() {
            let sets = secret_sets(&case, &mut rng);
            let expect = expectations(&case, &sets);
            let w = case.width.map(|i| &widths[i]);
            let ctor = w.map(|w| w.ctor);
            let description = match w {
                Some(w) => {
                    // The kernel name tells the parent which kernels ran; a constructor that
                    // fell back to a narrower width would fail here, not pass unnoticed.
                    let kernel = (w.ctor)(sets[0].key())
                        .expect("CPU runs the kernels")
                        .kernel_name();
                    assert_eq!(kernel, w.kernel, "{}", w.name);
                    format!("{case:?} {} {kernel}", w.name)
                }
                None => format!("self-check {:?}", case.leak.expect("a leak")),
            };
            ct::announce(&expect, &description);
            // The received tag of the cases that compare one: the reference's own, the same
            // (public) bytes for every set.
            let mut tag = [0u8; 16];
            if let (Some(ctor), Op::OpenMessageChecked | Op::OpenMessage96CheckedOut) =
                (ctor, case.op)
            {
                tag = reference_tag(&case, ctor, &sets);
            }
            let received = &tag[..case.tag_len];
            // warm-up (the reference, untraced), then every set traced
            for (i, s) in std::iter::once(&sets[0]).chain(&sets).enumerate() {
                slot.clone_from(s);
                // Each key is built and dropped outside the brackets, at the same heap address
                // for every run (the allocator hands back the block just freed). Key set-up
                // itself runs inside them, with no other key alive.
                let key = match (case.op, ctor) {
                    (Op::New | Op::Leak, _) | (_, None) => None,
                    (_, Some(ctor)) => Some(ctor(slot.key()).expect("CPU runs the kernels")),
                };
                let b = &mut buf[..case.len];
                b.copy_from_slice(&slot.data);
                if i == 0 {
                    run_op(&case, ctor, key.as_ref(), &slot, b, &mut out, received);
                } else {
                    bracketed(&case, ctor, key.as_ref(), &slot, b, &mut out, received);
                }
                drop(key);
            }
        }
    }
}

/// The parent: names the widths this CPU lacks, traces the child and prints the summary.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod parent {
    use super::{cases, ct};
    use std::collections::BTreeSet;

    pub fn run() {
        let widths = cases::widths();
        let have: Vec<&str> = widths
            .iter()
            .filter(|w| cases::missing(w).is_empty())
            .map(|w| w.kernel)
            .collect();
        println!("constant_time: this CPU runs the kernels {have:?}");
        // Said before the work and again in the summary line, on stdout and stderr, so that a
        // log shows what was not covered.
        let not_checked = cases::not_checked();
        for n in &not_checked {
            println!("constant_time: {n}");
            eprintln!("constant_time: {n}");
        }
        let o = ct::trace_self();
        let is_check = |n: &&String| n.starts_with("self-check");
        let checks = o.cases.iter().filter(is_check).count();
        let kernels: BTreeSet<&str> = o
            .cases
            .iter()
            .filter(|n| !is_check(n))
            .filter_map(|n| n.rsplit(' ').next())
            .collect();
        println!(
            "constant_time: {} cases ({} of the kernels, {checks} self-checks), {} traced runs, \
             {} comparisons, {} instructions single-stepped, kernels {kernels:?}",
            o.cases.len(),
            o.cases.len() - checks,
            o.runs,
            o.comparisons,
            o.steps,
        );
        // What two secret sets (the reference and the random one, as this test once had) would
        // have caught: the random set's column of the self-checks' expectations.
        let by_random = o
            .cases
            .iter()
            .zip(&o.expects)
            .filter(|(n, e)| is_check(n) && e.starts_with('!'))
            .count();
        println!(
            "constant_time: self-check: {checks} deliberate leaks, each caught by a masked set; \
             {} comparisons caught them as expected (the random set alone: {by_random} of \
             {checks})",
            o.leaks_caught
        );
        // Every width present must have run: what is not covered is only what the CPU lacks.
        assert_eq!(kernels.len(), have.len(), "kernels traced: {kernels:?}");
        let not_checked = if not_checked.is_empty() {
            "every kernel width checked".to_string()
        } else {
            not_checked.join("; ")
        };
        println!(
            "test result: {}. {} passed; {} failed; {not_checked}",
            if o.failed == 0 { "ok" } else { "FAILED" },
            o.cases.len() - o.failed,
            o.failed
        );
        if o.failed > 0 {
            std::process::exit(1);
        }
    }
}
