//! Constant time of the framing around the x86 kernels, checked on the compiled code with the
//! tracer of gcmx-x86's `constant_time` test (`crates/gcmx-x86/tests/common/ct.rs`, included by
//! path): every case runs with the same public lengths (key, nonce, AAD, message, tag) and several
//! sets of secrets, and every run must execute the same instructions in the same order and touch
//! the same memory addresses as the reference run.
//!
//! What runs: key set-up (`KeyMaterial::new`: the `aes` crate's key schedule, H, the GHASH keys,
//! the stitched kernels' key and the check that both AES agree; `Aes256Gcm::new`), J0 (a GHASH of
//! the nonce when it is not 12 bytes, so secret), the tag's computation, truncation and masking,
//! the comparison `backend::tag_matches` and, for an open under a 12-byte nonce, the kernel's
//! own (gcmx-x86's `open_message96_checked`, which every one-thread open then runs), and the entry points `backend::seal` / `backend::open`
//! through a `KeyedEngine` over `SerialEngine` and the typed `Aes256Gcm` (and
//! `AesGcm<Aes128, U16>`, a 16-byte nonce) in place, out of place and through
//! `decrypt_into_detached` (one pass into another buffer). The stitched kernels run
//! inside, at the width `KeyMaterial::new` picks (the widest this CPU runs; gcmx-x86's test covers
//! every width).
//!
//! Secrets: the key, the nonce, the AAD and the data, and for the comparison the received tag's
//! bytes. The secret sets are those of gcmx-x86's test: a reference `R`, an independent random
//! set, and `R` with every secret byte XORed with `0xFF`, `0x55`, `0x33` and `0x0F`, so that every
//! bit of these inputs differs from the reference in some run. Whether an open succeeds is public
//! (the caller learns it), and a failing open does more work than a passing one (it restores the
//! ciphertext), so opens are compared only with opens of the same outcome: every run of a
//! wrong-tag case fails, every run of a right-tag case succeeds (both asserted). A wrong tag of the
//! reference differs from the right one in its last byte alone, of the masked sets in every byte:
//! a comparison that stopped at the first differing byte would be caught.
//!
//! Linux x86-64 only (ptrace); elsewhere it reports that it did not run.
// A test program: nothing in it is reachable from outside; `pub` marks what its modules share.
#![allow(unreachable_pub)]

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[path = "../../gcmx-x86/tests/common/mod.rs"]
mod common;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[path = "../../gcmx-x86/tests/common/ct.rs"]
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

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod cases {
    /// What a case runs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Op {
        /// `KeyMaterial::new`.
        KeyNew,
        /// `backend::seal` through `SerialEngine` (the framing runs the message on the key itself).
        Seal,
        /// `backend::open` with the right tag (succeeds).
        OpenRight,
        /// `backend::open` with a wrong tag (fails, restores the ciphertext).
        OpenWrong,
        /// `backend::tag_matches` of a secret expected tag and a received tag.
        TagRight,
        TagWrong,
        /// The self-check: a comparison that stops at the first differing byte (test code, not
        /// gcmx's), on the wrong tags of `TagWrong`: must be caught.
        LeakyCompare,
        /// The typed API (`Aes256Gcm`, or `AesGcm<Aes128, U16>` for a 16-byte nonce).
        TypedNew,
        TypedSeal,
        /// Encryption into another buffer.
        TypedSealOut,
        TypedOpenRight,
        TypedOpenWrong,
        /// Decryption into another buffer.
        TypedOpenOutRight,
        TypedOpenOutWrong,
        /// `AesGcm::decrypt_into_detached` (one pass into another buffer, zeroed on failure).
        TypedOpenIntoRight,
        TypedOpenIntoWrong,
    }

    impl Op {
        /// Whether the received tag is a wrong one.
        pub fn wrong(self) -> bool {
            matches!(
                self,
                Op::OpenWrong
                    | Op::TagWrong
                    | Op::LeakyCompare
                    | Op::TypedOpenWrong
                    | Op::TypedOpenOutWrong
                    | Op::TypedOpenIntoWrong
            )
        }
        /// What the run must return (`true`: success, or a tag that matches).
        pub fn must_succeed(self) -> bool {
            !self.wrong()
        }
    }

    /// One comparison: what runs, with which public lengths.
    #[derive(Clone, Debug)]
    pub struct Case {
        pub op: Op,
        pub key_len: usize,
        pub nonce_len: usize,
        pub aad_len: usize,
        pub len: usize,
        pub tag_len: usize,
        /// `Seal` and the opens through an engine that the framing calls for every message (its
        /// `Message` path), not through `SerialEngine`.
        pub via_engine: bool,
    }

    /// The masks XORed into every secret byte of the reference, one masked set each.
    pub const MASKS: [u8; 4] = [0xFF, 0x55, 0x33, 0x0F];

    pub fn all() -> Vec<Case> {
        let mut v = Vec::new();
        for key_len in [16, 24, 32] {
            v.push(Case {
                op: Op::KeyNew,
                key_len,
                nonce_len: 12,
                aad_len: 0,
                len: 0,
                tag_len: 16,
                via_engine: false,
            });
        }
        // backend::seal/open: every key size, 12-byte nonces and others (1, 16, 60, 33 bytes:
        // shorter than, one and several GHASH blocks, a partial last block), messages empty,
        // shorter than a block, and across the kernels' steps, every tag length the default
        // build accepts
        let shapes: [(usize, usize, usize, usize, usize); 6] = [
            (16, 12, 0, 0, 16),
            (24, 1, 13, 17, 12),
            (32, 16, 0, 300, 13),
            (16, 60, 64, 64, 16),
            (24, 12, 5, 1, 14),
            (32, 33, 20, 255, 15),
        ];
        for (key_len, nonce_len, aad_len, len, tag_len) in shapes {
            for op in [Op::Seal, Op::OpenRight, Op::OpenWrong] {
                for via_engine in [false, true] {
                    v.push(Case {
                        op,
                        key_len,
                        nonce_len,
                        aad_len,
                        len,
                        tag_len,
                        via_engine,
                    });
                }
            }
        }
        for tag_len in [16, 12, 13] {
            for op in [Op::TagRight, Op::TagWrong, Op::LeakyCompare] {
                v.push(Case {
                    op,
                    key_len: 16,
                    nonce_len: 12,
                    aad_len: 0,
                    len: 16,
                    tag_len,
                    via_engine: false,
                });
            }
        }
        // the typed API: Aes256Gcm (12-byte nonce), and AesGcm<Aes128, U16> (J0 a GHASH of a
        // secret nonce)
        for (key_len, nonce_len) in [(32, 12), (16, 16)] {
            v.push(Case {
                op: Op::TypedNew,
                key_len,
                nonce_len,
                aad_len: 0,
                len: 0,
                tag_len: 16,
                via_engine: false,
            });
            for (len, aad_len) in [(0, 7), (100, 0)] {
                for op in [
                    Op::TypedSeal,
                    Op::TypedSealOut,
                    Op::TypedOpenRight,
                    Op::TypedOpenWrong,
                    Op::TypedOpenOutRight,
                    Op::TypedOpenOutWrong,
                    Op::TypedOpenIntoRight,
                    Op::TypedOpenIntoWrong,
                ] {
                    v.push(Case {
                        op,
                        key_len,
                        nonce_len,
                        aad_len,
                        len,
                        tag_len: 16,
                        via_engine: false,
                    });
                }
            }
            // a separate output past the short path through a stack buffer: tag first, then
            // the decryption
            for op in [Op::TypedOpenOutRight, Op::TypedOpenOutWrong] {
                v.push(Case {
                    op,
                    key_len,
                    nonce_len,
                    aad_len: 3,
                    len: 600,
                    tag_len: 16,
                    via_engine: false,
                });
            }
        }
        v
    }
}

/// The child: every case, warm-up once unbracketed (lazy initialisation: CPU feature caches),
/// then the reference and every other secret set each between two `SIGSTOP`s.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod tracee {
    use super::cases::{self, Case, Op};
    use super::common::Rng;
    use super::ct;
    use gcmx_core::aead::consts::{U12, U16};
    use gcmx_core::aead::inout::InOutBuf;
    use gcmx_core::aead::{self, AeadInOut, KeyInit};
    use gcmx_core::backend::{
        self, Direction, GcmEngine, KeyMaterial, KeyedEngine, Message, SerialEngine,
    };
    use gcmx_core::{AesGcm, Error, aes};
    use std::hint::black_box;

    type Typed256 = AesGcm<aes::Aes256, U12>;

    /// `SerialEngine` behind an engine of its own: the framing calls it for every message.
    struct ViaEngine(SerialEngine);

    impl GcmEngine for ViaEngine {
        fn name(&self) -> &'static str {
            "via"
        }
        fn crypt(&self, dir: Direction, msg: &mut Message<'_>) -> Result<[u8; 16], Error> {
            self.0.crypt(dir, msg)
        }
    }
    type Typed128N16 = AesGcm<aes::Aes128, U16>;

    /// `AesGcm::decrypt_into_detached`, an inherent method, for `typed`'s two key types.
    trait OpenInto: AeadInOut {
        fn open_into(
            &self,
            nonce: &aead::Nonce<Self>,
            aad: &[u8],
            ct: &[u8],
            pt: &mut [u8],
            tag: &aead::Tag<Self>,
        ) -> bool;
    }

    macro_rules! open_into {
        ($($t:ty),*) => {$(
            impl OpenInto for $t {
                #[inline]
                fn open_into(
                    &self,
                    nonce: &aead::Nonce<Self>,
                    aad: &[u8],
                    ct: &[u8],
                    pt: &mut [u8],
                    tag: &aead::Tag<Self>,
                ) -> bool {
                    self.decrypt_into_detached(nonce, aad, ct, pt, tag).is_ok()
                }
            }
        )*};
    }
    open_into!(Typed256, Typed128N16);

    /// One run's secrets, in fixed arrays: every run reads them from the same addresses.
    #[derive(Clone)]
    struct Secrets {
        key: [u8; 32],
        key_len: usize,
        nonce: [u8; 64],
        nonce_len: usize,
        aad: [u8; 64],
        aad_len: usize,
        /// The message (for the tag cases, the expected tag).
        data: [u8; 1024],
        len: usize,
        /// XORed into the right tag to make the received one (zero for a right tag).
        diff: [u8; 16],
        tag_len: usize,
    }

    impl Secrets {
        fn key(&self) -> &[u8] {
            &self.key[..self.key_len]
        }
        fn nonce(&self) -> &[u8] {
            &self.nonce[..self.nonce_len]
        }
        fn aad(&self) -> &[u8] {
            &self.aad[..self.aad_len]
        }
        fn data(&self) -> &[u8] {
            &self.data[..self.len]
        }

        fn masked(&self, m: u8) -> Secrets {
            let mut s = self.clone();
            s.key[..s.key_len].iter_mut().for_each(|b| *b ^= m);
            s.nonce[..s.nonce_len].iter_mut().for_each(|b| *b ^= m);
            s.aad[..s.aad_len].iter_mut().for_each(|b| *b ^= m);
            s.data[..s.len].iter_mut().for_each(|b| *b ^= m);
            if s.diff.iter().any(|&b| b != 0) {
                s.diff[..s.tag_len].iter_mut().for_each(|b| *b ^= m);
            }
            s
        }
    }

    /// The reference (class 0: zero data and AAD; a wrong tag off in its last byte only) or
    /// the random set (class 1).
    fn secrets(case: &Case, class: usize, rng: &mut Rng) -> Secrets {
        let mut s = Secrets {
            key: [0; 32],
            key_len: case.key_len,
            nonce: [0; 64],
            nonce_len: case.nonce_len,
            aad: [0; 64],
            aad_len: case.aad_len,
            data: [0; 1024],
            len: case.len,
            diff: [0; 16],
            tag_len: case.tag_len,
        };
        rng.fill(&mut s.key[..case.key_len]);
        rng.fill(&mut s.nonce[..case.nonce_len]);
        if class == 1 || matches!(case.op, Op::TagRight | Op::TagWrong | Op::LeakyCompare) {
            rng.fill(&mut s.data[..case.len]);
        }
        if class == 1 {
            rng.fill(&mut s.aad[..case.aad_len]);
        }
        if case.op.wrong() {
            if class == 0 {
                s.diff[case.tag_len - 1] = 0x80;
            } else {
                rng.fill(&mut s.diff[..case.tag_len]);
                s.diff[0] |= 1;
            }
        }
        s
    }

    fn secret_sets(case: &Case, rng: &mut Rng) -> Vec<Secrets> {
        let r = secrets(case, 0, rng);
        let mut v = vec![r.clone(), secrets(case, 1, rng)];
        v.extend(cases::MASKS.iter().map(|&m| r.masked(m)));
        v
    }

    /// The buffers a run works in, at one address for every run.
    struct Bufs {
        buf: Vec<u8>,
        out: Vec<u8>,
        tag: [u8; 16],
    }

    /// The typed API's part of a run (`C` one of the two typed ciphers). `cipher` is built
    /// outside the brackets except for `TypedNew`.
    #[inline(never)]
    fn typed<C: AeadInOut + KeyInit + OpenInto>(
        op: Op,
        cipher: Option<&C>,
        s: &Secrets,
        nonce: &aead::Nonce<C>,
        tag: &aead::Tag<C>,
        bufs: &mut Bufs,
    ) -> bool {
        let Some(c) = cipher else {
            drop(black_box(C::new_from_slice(black_box(s.key()))));
            return true;
        };
        let buf = &mut bufs.buf[..s.len];
        match op {
            Op::TypedSeal => {
                black_box(c.encrypt_inout_detached(nonce, s.aad(), buf.into())).is_ok()
            }
            Op::TypedSealOut => {
                let io = InOutBuf::new(buf, &mut bufs.out[..s.len]).expect("equal lengths");
                black_box(c.encrypt_inout_detached(nonce, s.aad(), io)).is_ok()
            }
            Op::TypedOpenRight | Op::TypedOpenWrong => {
                black_box(c.decrypt_inout_detached(nonce, s.aad(), buf.into(), tag)).is_ok()
            }
            Op::TypedOpenOutRight | Op::TypedOpenOutWrong => {
                let io = InOutBuf::new(buf, &mut bufs.out[..s.len]).expect("equal lengths");
                black_box(c.decrypt_inout_detached(nonce, s.aad(), io, tag)).is_ok()
            }
            Op::TypedOpenIntoRight | Op::TypedOpenIntoWrong => {
                black_box(c.open_into(nonce, s.aad(), buf, &mut bufs.out[..s.len], tag))
            }
            other => unreachable!("{other:?} is not typed"),
        }
    }

    /// The framing's part of a run; `key` and `engine` are built outside the brackets except
    /// for `KeyNew`.
    #[inline(never)]
    fn framing(op: Op, key: Option<&KeyedEngine>, s: &Secrets, bufs: &mut Bufs) -> bool {
        let Some(engine) = key else {
            drop(black_box(KeyMaterial::new(black_box(s.key()))));
            return true;
        };
        let buf = &mut bufs.buf[..s.len];
        let tag = &mut bufs.tag[..s.tag_len];
        match op {
            Op::Seal => black_box(backend::seal(engine, s.nonce(), s.aad(), buf, tag)).is_ok(),
            Op::OpenRight | Op::OpenWrong => {
                let r = black_box(backend::open(engine, s.nonce(), s.aad(), buf, tag));
                assert!(matches!(r, Ok(()) | Err(Error::Authentication)));
                r.is_ok()
            }
            Op::TagRight | Op::TagWrong => {
                let mut expected = [0u8; 16];
                expected.copy_from_slice(&s.data[..16]);
                black_box(backend::tag_matches(black_box(&expected), tag))
            }
            Op::LeakyCompare => leaky_compare(black_box(&s.data[..s.tag_len]), tag),
            other => unreachable!("{other:?} is not framing"),
        }
    }

    /// A comparison that leaks where the first difference is.
    #[inline(never)]
    fn leaky_compare(expected: &[u8], tag: &[u8]) -> bool {
        for (e, t) in expected.iter().zip(tag) {
            if black_box(*e) != *t {
                return false;
            }
        }
        true
    }

    /// Where the first wrong byte of the received tag is: what `leaky_compare` leaks.
    fn first_wrong(s: &Secrets) -> Option<usize> {
        s.diff[..s.tag_len].iter().position(|&d| d != 0)
    }

    /// What one traced run does: everything prepared, one call between the stops.
    enum Prepared<'a> {
        Framing(Option<&'a KeyedEngine>),
        Typed256(
            Option<&'a Typed256>,
            aead::Nonce<Typed256>,
            aead::Tag<Typed256>,
        ),
        Typed128(
            Option<&'a Typed128N16>,
            aead::Nonce<Typed128N16>,
            aead::Tag<Typed128N16>,
        ),
    }

    #[inline(never)]
    fn run_op(op: Op, p: &Prepared<'_>, s: &Secrets, bufs: &mut Bufs) -> bool {
        match p {
            Prepared::Framing(k) => framing(op, *k, s, bufs),
            Prepared::Typed256(c, n, t) => typed(op, *c, s, n, t, bufs),
            Prepared::Typed128(c, n, t) => typed(op, *c, s, n, t, bufs),
        }
    }

    /// One traced run. Not inlined, so that every run executes the same code.
    #[inline(never)]
    fn bracketed(op: Op, p: &Prepared<'_>, s: &Secrets, bufs: &mut Bufs) -> bool {
        ct::stop();
        let r = run_op(op, p, s, bufs);
        ct::stop();
        r
    }

    /// The typed cipher for `s`, the nonce, and the tag an open receives (the right one, XOR
    /// `s.diff`); the buffer holds the ciphertext for an open, the plaintext for a seal.
    fn typed_inputs<C: AeadInOut + KeyInit>(
        s: &Secrets,
        op: Op,
        buf: &mut [u8],
    ) -> (C, aead::Nonce<C>, aead::Tag<C>) {
        let c = C::new_from_slice(s.key()).expect("key length");
        let nonce = aead::Nonce::<C>::try_from(s.nonce()).expect("nonce length");
        let mut tag = aead::Tag::<C>::default();
        if matches!(
            op,
            Op::TypedOpenRight
                | Op::TypedOpenWrong
                | Op::TypedOpenOutRight
                | Op::TypedOpenOutWrong
                | Op::TypedOpenIntoRight
                | Op::TypedOpenIntoWrong
        ) {
            tag = c
                .encrypt_inout_detached(&nonce, s.aad(), buf.into())
                .expect("seal");
            tag.iter_mut().zip(&s.diff).for_each(|(t, d)| *t ^= d);
        }
        (c, nonce, tag)
    }

    pub fn run() {
        // rayon's global pool (a failed open's restore consults it) started, and every worker
        // past its start-up, before the first stop: a `SIGSTOP` stops every thread of the child,
        // and a worker stopped inside the allocator would hold a lock the traced thread needs.
        rayon::broadcast(|_| ());
        let mut rng = Rng(0xc0e5);
        let mut bufs = Bufs {
            buf: vec![0u8; 1024],
            out: vec![0u8; 1024],
            tag: [0u8; 16],
        };
        let mut slot = secrets(&cases::all()[0], 0, &mut rng);
        for case in cases::all() {
            let sets = secret_sets(&case, &mut rng);
            let expect: String = if case.op == Op::LeakyCompare {
                // caught exactly where the first wrong byte moves, and by every masked set
                let r = first_wrong(&sets[0]);
                let e: String = sets[1..]
                    .iter()
                    .map(|s| if first_wrong(s) != r { '!' } else { '=' })
                    .collect();
                assert!(e[1..].chars().all(|c| c == '!'));
                e
            } else {
                "=".repeat(sets.len() - 1)
            };
            let description = match case.op {
                Op::LeakyCompare => format!("self-check {case:?}"),
                _ => format!("{case:?}"),
            };
            ct::announce(&expect, &description);
            let op = case.op;
            // warm-up (the reference, untraced), then every set traced
            for (i, s) in std::iter::once(&sets[0]).chain(&sets).enumerate() {
                slot.clone_from(s);
                bufs.buf[..slot.len].copy_from_slice(slot.data());
                bufs.out.fill(0);
                bufs.tag = [0; 16];
                let traced = i > 0;
                let ok = match op {
                    Op::KeyNew
                    | Op::Seal
                    | Op::OpenRight
                    | Op::OpenWrong
                    | Op::TagRight
                    | Op::TagWrong
                    | Op::LeakyCompare => {
                        // Built outside the brackets, at the same addresses for every run
                        // (the allocator hands back the blocks just freed).
                        let engine = (op != Op::KeyNew).then(|| {
                            if case.via_engine {
                                KeyedEngine::new(slot.key(), |_| {
                                    Ok(Box::new(ViaEngine(SerialEngine)))
                                })
                            } else {
                                KeyedEngine::new(slot.key(), |_| Ok(Box::new(SerialEngine)))
                            }
                            .expect("key")
                        });
                        if let Some(e) = &engine {
                            assert_eq!(e.name(), ["cpu", "via"][usize::from(case.via_engine)]);
                        }
                        if let Some(e) = &engine {
                            assert_eq!(
                                e.key().is_stitched(),
                                backend::stitched_supported(),
                                "the stitched kernels wherever the CPU runs them"
                            );
                        }
                        match op {
                            Op::OpenRight | Op::OpenWrong => {
                                let e = engine.as_ref().unwrap();
                                let (buf, tag) =
                                    (&mut bufs.buf[..slot.len], &mut bufs.tag[..slot.tag_len]);
                                backend::seal(e, slot.nonce(), slot.aad(), buf, tag).expect("seal");
                            }
                            Op::TagRight | Op::TagWrong | Op::LeakyCompare => {
                                bufs.tag.copy_from_slice(&slot.data[..16]);
                            }
                            _ => {}
                        }
                        bufs.tag
                            .iter_mut()
                            .zip(&slot.diff)
                            .for_each(|(t, d)| *t ^= d);
                        let p = Prepared::Framing(engine.as_ref());
                        if traced {
                            bracketed(op, &p, &slot, &mut bufs)
                        } else {
                            run_op(op, &p, &slot, &mut bufs)
                        }
                    }
                    _ => {
                        let buf = &mut bufs.buf[..slot.len];
                        let p;
                        let (c256, c128);
                        if case.key_len == 32 {
                            let (c, n, t) = typed_inputs::<Typed256>(&slot, op, buf);
                            c256 = c;
                            p = Prepared::Typed256((op != Op::TypedNew).then_some(&c256), n, t);
                        } else {
                            let (c, n, t) = typed_inputs::<Typed128N16>(&slot, op, buf);
                            c128 = c;
                            p = Prepared::Typed128((op != Op::TypedNew).then_some(&c128), n, t);
                        }
                        if traced {
                            bracketed(op, &p, &slot, &mut bufs)
                        } else {
                            run_op(op, &p, &slot, &mut bufs)
                        }
                    }
                };
                // Opens are compared only with opens of the same outcome.
                assert_eq!(ok, op.must_succeed(), "{case:?}: outcome of run {i}");
            }
        }
    }
}

/// The parent: says what the glue runs on, traces the child and prints the summary.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod parent {
    use super::ct;

    pub fn run() {
        let kernels = match gcmx_x86::StitchedKey::new(&[0u8; 16]) {
            Some(k) => {
                println!(
                    "constant_time: the framing runs around the {} kernels",
                    k.kernel_name()
                );
                format!("around the {} kernels", k.kernel_name())
            }
            None => {
                // Said on stdout and stderr, and in the summary line, so that a log shows it.
                let n = "the stitched kernels NOT checked under the framing: this CPU lacks \
                         AES-NI, PCLMULQDQ or SSSE3 (the generic path was traced instead)";
                println!("constant_time: {n}");
                eprintln!("constant_time: {n}");
                n.to_string()
            }
        };
        let o = ct::trace_self();
        let checks = o
            .cases
            .iter()
            .filter(|n| n.starts_with("self-check"))
            .count();
        println!(
            "constant_time: {} cases ({} of the framing, {checks} self-checks), {} traced runs, \
             {} comparisons, {} instructions single-stepped",
            o.cases.len(),
            o.cases.len() - checks,
            o.runs,
            o.comparisons,
            o.steps
        );
        println!(
            "constant_time: self-check: a comparison that stops at the first differing byte, \
             caught in {} comparisons as expected",
            o.leaks_caught
        );
        println!(
            "test result: {}. {} passed; {} failed; {kernels}",
            if o.failed == 0 { "ok" } else { "FAILED" },
            o.cases.len() - o.failed,
            o.failed
        );
        if o.failed > 0 {
            std::process::exit(1);
        }
    }
}
