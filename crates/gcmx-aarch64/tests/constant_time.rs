//! Constant time, checked on the compiled kernels: every entry point of `StitchedKey` runs with the
//! same public lengths and several sets of secrets (key, hence round keys and H; counter block,
//! hence a secret J0; GHASH state; AAD and data), and every run of a case must execute the same
//! instructions in the same order and touch the same memory addresses.
//!
//! How: `scripts/aarch64.sh` runs this program under qemu-user with the TCG plugin of `ct/trace.c`,
//! which hashes, between two marker system calls, every executed instruction's address and every
//! memory access's address, and compares the runs of each case. A branch whose direction depends
//! on a secret changes the instruction sequence; a table lookup indexed by a secret changes an
//! address. The markers: `sched_yield` around each run (`std::thread::yield_now`), `getppid` before
//! a case that must be constant time, `getpid` before a self-check case that must not be.
//!
//! The secret sets of a case, as in gcmx-x86's test: a reference `R` (random key, counter and
//! GHASH state; zero data and AAD), an independent random set, and `R` with every secret byte
//! XORed with `0xFF`, `0x55`, `0x33` and `0x0F`, so that every secret input bit differs from the
//! reference in some run. The reference counter's last word is `0xFFFFFFF9`: some sets wrap it
//! inside the message, others do not. The self-check cases (a branch on one key bit, a loop
//! counted by a data byte, a lookup indexed by a key byte) must be caught.
//!
//! What it covers: the code the inputs below reach, on both kernel variants (the one without EOR3
//! forced), key set-up included: seal and open in place and apart, whole messages on the short
//! and the long path, GHASH alone, one block. What it does not: paths no input here reaches,
//! timing inside one instruction (AESE, AESMC, PMULL, EOR3 and the other vector instructions used
//! are among those Arm's FEAT_DIT guarantees data-independent when PSTATE.DIT is set; gcmx does not
//! set it, as aws-lc and the Linux kernel do not), and whether secrets are wiped afterwards. Without
//! the plugin the program runs the cases and checks nothing (it says so); `scripts/aarch64.sh`
//! requires the plugin's summary to count every case and no failure.

#[cfg(target_arch = "aarch64")]
mod common;

#[cfg(target_arch = "aarch64")]
fn main() {
    run::main();
}

#[cfg(not(target_arch = "aarch64"))]
fn main() {
    println!(
        "constant_time: aarch64 only (scripts/aarch64.sh runs it under emulation); not run here"
    );
}

#[cfg(target_arch = "aarch64")]
mod run {
    use core::hint::black_box;

    use gcmx_aarch64::{InOutBuf, StitchedKey};

    use super::common::Rng;

    /// The secrets of one run.
    #[derive(Clone)]
    struct Secrets {
        key: Vec<u8>,
        ctr: [u8; 16],
        y: u128,
        data: Vec<u8>,
        aad: Vec<u8>,
    }

    impl Secrets {
        fn xor(&self, m: u8) -> Secrets {
            let x = |v: &[u8]| v.iter().map(|b| b ^ m).collect::<Vec<u8>>();
            let mut ctr = self.ctr;
            ctr.iter_mut().for_each(|b| *b ^= m);
            let my = u128::from_ne_bytes([m; 16]);
            Secrets {
                key: x(&self.key),
                ctr,
                y: self.y ^ my,
                data: x(&self.data),
                aad: x(&self.aad),
            }
        }
    }

    /// The six sets of a case: `R`, a random set, and `R` XORed with four masks.
    fn sets(rng: &mut Rng, key_len: usize, len: usize, aad_len: usize) -> Vec<Secrets> {
        let mut ctr = rng.block();
        ctr[12..].copy_from_slice(&0xFFFF_FFF9u32.to_be_bytes());
        let r = Secrets {
            key: rng.bytes(key_len),
            ctr,
            y: u128::from_be_bytes(rng.block()),
            data: vec![0; len],
            aad: vec![0; aad_len],
        };
        let random = Secrets {
            key: rng.bytes(key_len),
            ctr: rng.block(),
            y: u128::from_be_bytes(rng.block()),
            data: rng.bytes(len),
            aad: rng.bytes(aad_len),
        };
        vec![
            r.clone(),
            random,
            r.xor(0xFF),
            r.xor(0x55),
            r.xor(0x33),
            r.xor(0x0F),
        ]
    }

    /// One traced run.
    fn traced(f: impl FnOnce()) {
        std::thread::yield_now();
        f();
        std::thread::yield_now();
    }

    /// The start of a case (`constant`: its runs must trace alike).
    fn case(constant: bool) {
        if constant {
            black_box(std::os::unix::process::parent_id());
        } else {
            black_box(std::process::id());
        }
    }

    type Make = fn(&[u8]) -> Option<StitchedKey>;

    /// The operations traced, each on a key made before the run (outside the trace).
    #[derive(Clone, Copy, Debug)]
    enum Op {
        Setup,
        Block,
        Ghash,
        Seal,
        Open,
        SealApart,
        OpenApart,
        SealMessage,
        OpenMessage,
        SealMessageApart,
        OpenMessageApart,
        OpenMessageUncached,
        /// `open_message_checked` against a fixed (public) received tag.
        OpenMessageChecked,
    }

    /// Run one case: `op` on each set, its inputs copied into buffers allocated once, so that
    /// their addresses are the same in every run (the trace compares addresses).
    fn run_case(make: Make, op: Op, sets: &[Secrets]) {
        let len = sets[0].data.len();
        let mut buf = vec![0u8; len];
        let mut out = vec![0u8; len];
        let mut aad = vec![0u8; sets[0].aad.len()];
        let mut key = vec![0u8; sets[0].key.len()];
        let mut block;
        // once before the case, outside the trace: allocator and caches in their steady state
        let warm = make(&sets[0].key).expect("kernels");
        black_box(&warm);
        drop(warm);
        case(true);
        for s in sets {
            buf.copy_from_slice(&s.data);
            aad.copy_from_slice(&s.aad);
            key.copy_from_slice(&s.key);
            let n = len.min(16);
            block = [0u8; 16];
            block[..n].copy_from_slice(&s.data[..n]);
            let mut y = s.y;
            if let Op::Setup = op {
                traced(|| {
                    let k = make(black_box(&key));
                    black_box(&k);
                });
                continue;
            }
            let k = make(&key).expect("kernels");
            // copies at the same addresses in every run (the trace compares addresses)
            let (ctr, j0) = (s.ctr, s.ctr);
            traced(|| match op {
                Op::Setup => {}
                Op::Block => k.encrypt_block(&mut block),
                Op::Ghash => k.ghash(&mut y, &buf),
                Op::Seal => k.seal(&ctr, &mut y, &mut buf[..]),
                Op::Open => k.open(&ctr, &mut y, &mut buf[..]),
                Op::SealApart => k.seal(&ctr, &mut y, InOutBuf::new(&buf, &mut out).unwrap()),
                Op::OpenApart => k.open(&ctr, &mut y, InOutBuf::new(&buf, &mut out).unwrap()),
                Op::SealMessage => {
                    black_box(k.seal_message(&j0, &aad, &mut buf[..]));
                }
                Op::OpenMessage => {
                    black_box(k.open_message(&j0, &aad, &mut buf[..]));
                }
                Op::SealMessageApart => {
                    black_box(k.seal_message(&j0, &aad, InOutBuf::new(&buf, &mut out).unwrap()));
                }
                Op::OpenMessageApart => {
                    black_box(k.open_message(&j0, &aad, InOutBuf::new(&buf, &mut out).unwrap()));
                }
                Op::OpenMessageUncached => {
                    black_box(k.open_message_uncached(&j0, &aad, &buf, &mut out));
                }
                Op::OpenMessageChecked => {
                    black_box(k.open_message_checked(&j0, &aad, &mut buf[..], &[0x5A; 16]));
                }
            });
            black_box((&y, &block, &buf, &out));
            drop(k);
        }
    }

    /// Deliberately leaky code the check must catch: a loop counted by one bit of the key, a
    /// loop counted by one byte of the data, a lookup indexed by a key byte.
    fn self_checks(sets: &[Secrets]) -> usize {
        static TABLE: [u8; 256] = {
            let mut t = [0u8; 256];
            let mut i = 0;
            while i < 256 {
                t[i] = (i as u8).wrapping_mul(7);
                i += 1;
            }
            t
        };
        type Leak = fn(&[u8], &[u8]) -> u64;
        let leaks: [Leak; 3] = [
            |key, _| {
                (0..black_box(key[0] & 1))
                    .map(|i| black_box(u64::from(i)))
                    .sum()
            },
            |_, data| {
                (0..black_box(data[3] & 3))
                    .map(|i| black_box(u64::from(i)))
                    .sum()
            },
            |key, _| u64::from(TABLE[usize::from(black_box(key[5]))]),
        ];
        // the secrets copied into buffers at fixed addresses, as in `run_case`
        let mut key = vec![0u8; sets[0].key.len()];
        let mut data = vec![0u8; sets[0].data.len()];
        for leak in leaks {
            case(false);
            for s in sets {
                key.copy_from_slice(&s.key);
                data.copy_from_slice(&s.data);
                traced(|| {
                    black_box(leak(black_box(&key), black_box(&data)));
                });
            }
        }
        leaks.len()
    }

    pub(super) fn main() {
        let mut rng = Rng(0xC7);
        let mut cases = 0usize;
        let variants: [(&str, Make); 2] = [
            ("new", StitchedKey::new),
            ("new_without_eor3", StitchedKey::new_without_eor3),
        ];
        for (name, make) in variants {
            let kernel = make(&[0u8; 16])
                .expect("this core has AES and PMULL")
                .kernel_name();
            println!("constant_time: {name} runs the {kernel} kernels");
            for key_len in [16usize, 24, 32] {
                let plan: &[(Op, usize, usize)] = &[
                    (Op::Setup, 16, 0),
                    (Op::Block, 16, 0),
                    (Op::Ghash, 16, 0),
                    (Op::Ghash, 100, 0),
                    (Op::Ghash, 300, 0),
                    (Op::Seal, 16, 0),
                    (Op::Seal, 129, 0),
                    (Op::Seal, 1000, 0),
                    (Op::Open, 100, 0),
                    (Op::Open, 128, 0),
                    (Op::Open, 1000, 0),
                    (Op::SealApart, 1000, 0),
                    (Op::OpenApart, 1000, 0),
                    (Op::SealMessage, 0, 0),
                    (Op::SealMessage, 64, 13),
                    (Op::SealMessage, 100, 0),
                    (Op::SealMessage, 1000, 13),
                    (Op::OpenMessage, 64, 13),
                    (Op::OpenMessage, 60, 40),
                    (Op::OpenMessage, 1000, 200),
                    (Op::SealMessageApart, 64, 13),
                    (Op::SealMessageApart, 1000, 13),
                    (Op::OpenMessageApart, 1000, 13),
                    (Op::OpenMessageUncached, 300, 13),
                    (Op::OpenMessageChecked, 0, 0),
                    (Op::OpenMessageChecked, 64, 13),
                    (Op::OpenMessageChecked, 1000, 0),
                ];
                for &(op, len, aad_len) in plan {
                    let sets = sets(&mut rng, key_len, len.max(16), aad_len);
                    let sets: Vec<Secrets> = sets
                        .into_iter()
                        .map(|mut s| {
                            s.data
                                .truncate(len.max(if matches!(op, Op::Block) { 16 } else { 0 }));
                            s
                        })
                        .collect();
                    run_case(make, op, &sets);
                    cases += 1;
                }
            }
        }
        let sets = sets(&mut rng, 16, 16, 0);
        let leaky = self_checks(&sets);
        println!(
            "constant_time: {cases} constant-time cases and {leaky} leaky self-checks, 6 runs each \
             (the ct-trace plugin's summary follows on its log; without it nothing was checked)"
        );
    }
}
