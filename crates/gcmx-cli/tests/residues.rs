//! No stream key outlives its stream in the memory of a `gcmx` process: each run is stopped
//! at `exit` under gdb, its image written with `gcore`, and the image's memory searched for
//! every form of the per-file keys that the test computes itself: the keyset's key material,
//! HKDF's pseudorandom key and derived key, the AES round keys (and the decryption round keys
//! that AES-NI code keeps, `aesimc` of each), `H = AES_K(0)` and GHASH's powers of `H` in the
//! POLYVAL form gcmx keeps (`H' = mulX(H)`, `Q_k = dot(Q_(k-1), H')`, as little-endian
//! `u128`s). A control run stops where the engine is alive and must find its schedules, so a
//! search that finds nothing is a search that works.
//!
//! The search covers memory only (the image's loaded segments, heap and every stack); thread
//! registers, which the image also holds, are not memory the process can free.
//!
//! Needs gdb (with `gcore`), Linux and a release build. Without gdb this test says NOT RUN and
//! passes; `GCMX_REQUIRE_GDB=1` (as `scripts/test.sh` sets it) makes that a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{data, ok, run_gcmx};
use gcmx::aes::cipher::{BlockCipherEncrypt, KeyInit};
use gcmx_stream::{Keyset, StreamingKey};

const AAD: &str = "residue check";
const SEGMENT: u32 = 64 << 10;

#[test]
fn no_stream_key_survives_encrypt_or_decrypt() {
    if cfg!(debug_assertions) {
        // Unoptimized, the kernels' frames reach deeper below a stream's frame than the 32 KiB
        // that the stack wipes cover (round keys were left about 47 KiB down).
        not_run("a debug build (run it with --release, as CI does)");
        return;
    }
    if !gdb_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ikm_a = data(32, 0xA11CE);
    let ikm_b = data(32, 0xB0B);
    let key = |id, ikm: &[u8]| StreamingKey::new(id, ikm, 32, SEGMENT).unwrap();
    let only_a = write_keyset(dir.path(), "a.json", Keyset::from(key(1, &ikm_a)));
    // B is primary and is tried first: decrypting A's file makes and drops a trial engine
    // for B, then one for A, before the engine that decrypts.
    let b_then_a = write_keyset(
        dir.path(),
        "ba.json",
        Keyset::new(0, vec![key(2, &ikm_b), key(1, &ikm_a)]).unwrap(),
    );
    let pt = data(300_000, 3);
    let plain = dir.path().join("plain");
    std::fs::write(&plain, &pt).unwrap();
    let ct = dir.path().join("ct");
    let out = dir.path().join("out");
    // With the `cuda` feature, `auto` may key a GPU, whose copies of the key (device memory,
    // the driver's staging) this search does not cover: the CPU engines are what it checks.
    let backend = if cfg!(feature = "cuda") {
        "cpu"
    } else {
        "auto"
    };

    let encrypt = gcmx_args("encrypt", &only_a, &plain, &ct, backend);
    let image = core_at_exit(dir.path(), &encrypt);
    let salt = read_salt(&ct);
    let secrets = Secrets::of(&[&ikm_a], &salt);
    assert_clean(&image, &secrets, "gcmx encrypt");
    drop(image);

    let decrypt = gcmx_args("decrypt", &b_then_a, &ct, &out, backend);
    let image = core_at_exit(dir.path(), &decrypt);
    assert_eq!(std::fs::read(&out).unwrap(), pt, "decrypted under gdb");
    let secrets = Secrets::of(&[&ikm_a, &ikm_b], &salt);
    assert_clean(&image, &secrets, "gcmx decrypt, two keys");
    drop(image);

    // Control: stopped where gcmx has just keyed an engine, the same search finds it.
    std::fs::remove_file(&out).unwrap();
    let image = core_when(
        dir.path(),
        &decrypt,
        &["break gcmx_core::keyed::KeyedEngine::new", "run", "finish"],
    );
    let live = secrets.count(&image);
    assert!(
        live.iter()
            .any(|(what, n)| what == "derived key and round keys" && *n > 0),
        "control: no round key found while an engine is alive ({live:?}): the search or the \
         image is broken"
    );
}

/// Whether gdb can run here; if not, says NOT RUN (or fails under `GCMX_REQUIRE_GDB=1`).
fn gdb_usable() -> bool {
    let required = std::env::var_os("GCMX_REQUIRE_GDB").is_some_and(|v| v != "0");
    let why = if !cfg!(all(
        target_os = "linux",
        target_pointer_width = "64",
        target_endian = "little"
    )) {
        Some("this search reads 64-bit little-endian Linux core images".to_string())
    } else {
        match Command::new("gdb").arg("--version").output() {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!("gdb --version failed: {:?}", o.status)),
            Err(e) => Some(format!("no gdb ({e}); apt-get install gdb")),
        }
    };
    match why {
        None => true,
        Some(why) if required => panic!("GCMX_REQUIRE_GDB is set but {why}"),
        Some(why) => {
            not_run(&format!("{why} (GCMX_REQUIRE_GDB=1 makes this a failure)"));
            false
        }
    }
}

/// Says why the test did not run, past the test harness's capture of `eprintln!`.
fn not_run(why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "residue test NOT RUN: {why}");
}

fn write_keyset(dir: &Path, name: &str, keyset: Keyset) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, keyset.to_json().as_bytes()).unwrap();
    p
}

fn gcmx_args(op: &str, keyset: &Path, input: &Path, output: &Path, backend: &str) -> Vec<String> {
    [
        op,
        "--keyset",
        keyset.to_str().unwrap(),
        "--aad",
        AAD,
        "--backend",
        backend,
        "--quiet",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// The salt of a 32-byte-key stream's header.
fn read_salt(ct: &Path) -> Vec<u8> {
    let bytes = std::fs::read(ct).unwrap();
    assert_eq!(bytes[0], 40, "header length of a 32-byte derived key");
    bytes[1..33].to_vec()
}

/// The memory image of `gcmx args` as it calls `exit`, after checking that the same
/// command succeeds without gdb.
fn core_at_exit(dir: &Path, args: &[String]) -> Vec<u8> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = args.last().unwrap();
    ok(run_gcmx(&args, None), "gcmx without gdb");
    std::fs::remove_file(output).unwrap();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    core_when(dir, &args, &["break exit", "run"])
}

/// The memory image of `gcmx args` after gdb has run `steps`. An image takes tens to hundreds
/// of megabytes, and gcore with too little room says "Saved corefile" over a file cut short:
/// the image goes to memory-backed `/dev/shm` first, then to `dir` if that one fails.
fn core_when(dir: &Path, args: &[String], steps: &[&str]) -> Vec<u8> {
    let shm = tempfile::Builder::new()
        .prefix("gcmx-residues")
        .tempdir_in("/dev/shm")
        .ok();
    let mut failures = Vec::new();
    for place in shm.as_ref().map(|d| d.path()).into_iter().chain([dir]) {
        match gcore(&place.join("core"), args, steps) {
            Ok(image) => return image,
            Err(why) => failures.push(format!("in {}: {why}", place.display())),
        }
    }
    panic!(
        "no complete image after {steps:?}:\n{}",
        failures.join("\n")
    )
}

/// Runs `gcmx args` under gdb, then `steps`, and returns the image gcore wrote to `core`, or
/// why there is no complete one.
fn gcore(core: &Path, args: &[String], steps: &[&str]) -> Result<Vec<u8>, String> {
    let _ = std::fs::remove_file(core);
    let mut gdb = Command::new("gdb");
    gdb.args(["-q", "-batch", "-nx"]);
    for cmd in ["set pagination off", "set confirm off"]
        .iter()
        .chain(steps)
        .copied()
        .chain([&format!("gcore {}", core.display()) as &str, "kill"])
    {
        gdb.args(["-ex", cmd]);
    }
    gdb.arg("--args")
        .arg(env!("CARGO_BIN_EXE_gcmx"))
        .args(args)
        .env_remove("DEBUGINFOD_URLS")
        .env_remove("GCMX_WINDOW")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = gdb.spawn().expect("spawn gdb");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("gdb did not finish in 120 s: {steps:?} {args:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let said = || {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let image = std::fs::read(core).map_err(|e| format!("no image ({e}):\n{}", said()))?;
    std::fs::remove_file(core).unwrap();
    // gcore writes the ELF header last: a write that failed leaves zeros at the start.
    if image.starts_with(b"\x7fELF") {
        Ok(image)
    } else {
        Err(format!("{} bytes, no ELF header:\n{}", image.len(), said()))
    }
}

fn assert_clean(image: &[u8], secrets: &Secrets, what: &str) {
    let found = secrets.count(image);
    assert!(
        found.iter().all(|(_, n)| *n == 0),
        "{what}: key material left in memory at exit: {found:?}"
    );
}

/// Every 16-byte block that would reveal a stream's key, by kind.
struct Secrets {
    blocks: Vec<(String, [u8; 16])>,
}

impl Secrets {
    /// The blocks of every key with material in `ikms`, for streams with header `salt`.
    fn of(ikms: &[&[u8]], salt: &[u8]) -> Secrets {
        let mut blocks = Vec::new();
        let mut add = |what: &str, bytes: &[u8]| {
            for b in bytes.chunks_exact(16) {
                blocks.push((what.to_string(), b.try_into().unwrap()));
            }
        };
        for ikm in ikms {
            add("key material", ikm);
            let (prk, hk) = hkdf::Hkdf::<sha2::Sha256>::extract(Some(salt), ikm);
            add("HKDF pseudorandom key", &prk);
            let mut key = [0u8; 32];
            hk.expand(AAD.as_bytes(), &mut key).unwrap();
            let rk = expand_aes_key(&key);
            // rk[0] and rk[1] are the derived key itself.
            add("derived key and round keys", rk.concat().as_slice());
            for k in &rk[1..rk.len() - 1] {
                add("decryption round keys (aesimc)", &inv_mix_columns(k));
            }
            let mut h = gcmx::aes::cipher::Block::<gcmx::aes::Aes256>::default();
            gcmx::aes::Aes256::new(&key.into()).encrypt_block(&mut h);
            add("H", &h);
            let h_prime = mulx(u128::from_be_bytes(h.into()));
            let mut q = h_prime;
            for _ in 1..=32 {
                add("H' and its powers", &q.to_le_bytes());
                q = dot(q, h_prime);
            }
        }
        Secrets { blocks }
    }

    /// Hits of each kind in the loaded segments of an ELF core `image`.
    fn count(&self, image: &[u8]) -> Vec<(String, usize)> {
        let mut kinds: Vec<(String, usize)> = Vec::new();
        for (what, _) in &self.blocks {
            if !kinds.iter().any(|(k, _)| k == what) {
                kinds.push((what.clone(), 0));
            }
        }
        let by_prefix: std::collections::HashMap<[u8; 8], Vec<usize>> = self
            .blocks
            .iter()
            .enumerate()
            .fold(Default::default(), |mut m, (i, (_, b))| {
                m.entry(b[..8].try_into().unwrap()).or_default().push(i);
                m
            });
        for seg in loaded_segments(image) {
            // Most of an image is pages never written or wiped: blocks that begin there are
            // skipped.
            for (n, page) in seg.chunks(4096).enumerate() {
                if page.iter().all(|&b| b == 0) {
                    continue;
                }
                let start = n * 4096;
                for at in start..(start + page.len()).min(seg.len().saturating_sub(15)) {
                    let Some(ids) = by_prefix.get(&seg[at..at + 8]) else {
                        continue;
                    };
                    for &i in ids {
                        if seg[at..at + 16] == self.blocks[i].1 {
                            let what = &self.blocks[i].0;
                            kinds.iter_mut().find(|(k, _)| k == what).unwrap().1 += 1;
                        }
                    }
                }
            }
        }
        kinds
    }
}

/// The file contents of an ELF64 little-endian core's `PT_LOAD` segments (the memory).
fn loaded_segments(image: &[u8]) -> Vec<&[u8]> {
    let u16_at = |o: usize| u16::from_le_bytes(image[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(image[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(image[o..o + 8].try_into().unwrap()) as usize;
    assert_eq!(&image[..5], b"\x7fELF\x02", "not an ELF64 image");
    let (phoff, phentsize) = (u64_at(0x20), u16_at(0x36));
    let mut phnum = u16_at(0x38);
    if phnum == 0xffff {
        // PN_XNUM: the count is in the first section header's sh_info.
        phnum = u32_at(u64_at(0x28) + 0x2c);
    }
    (0..phnum)
        .map(|i| phoff + i * phentsize)
        .filter(|&ph| u32_at(ph) == 1)
        .map(|ph| {
            let (off, size) = (u64_at(ph + 8), u64_at(ph + 32));
            &image[off.min(image.len())..(off + size).min(image.len())]
        })
        .collect()
}

/// The AES-256 key schedule of `key`: 15 round keys in FIPS 197's byte order.
fn expand_aes_key(key: &[u8; 32]) -> Vec<[u8; 16]> {
    let sbox = sbox();
    let mut w: Vec<[u8; 4]> = key.chunks(4).map(|c| c.try_into().unwrap()).collect();
    let mut rcon = 1u8;
    for i in 8..60 {
        let mut t = w[i - 1];
        if i % 8 == 0 {
            t = [
                sbox[t[1] as usize] ^ rcon,
                sbox[t[2] as usize],
                sbox[t[3] as usize],
                sbox[t[0] as usize],
            ];
            rcon = xtime(rcon);
        } else if i % 8 == 4 {
            t = t.map(|b| sbox[b as usize]);
        }
        let prev = w[i - 8];
        w.push(std::array::from_fn(|j| prev[j] ^ t[j]));
    }
    w.chunks(4)
        .map(|r| r.concat().try_into().unwrap())
        .collect()
}

fn xtime(a: u8) -> u8 {
    (a << 1) ^ if a & 0x80 != 0 { 0x1b } else { 0 }
}

fn gf_mul(mut a: u8, mut b: u8) -> u8 {
    let mut r = 0;
    while b != 0 {
        if b & 1 != 0 {
            r ^= a;
        }
        a = xtime(a);
        b >>= 1;
    }
    r
}

/// AES's S-box: the affine map of each byte's inverse in GF(2^8).
fn sbox() -> [u8; 256] {
    std::array::from_fn(|x| {
        let x = x as u8;
        // x^254 is x's inverse (0 for 0).
        let mut inv = 1u8;
        for _ in 0..254 {
            inv = gf_mul(inv, x);
        }
        let inv = if x == 0 { 0 } else { inv };
        inv ^ inv.rotate_left(1)
            ^ inv.rotate_left(2)
            ^ inv.rotate_left(3)
            ^ inv.rotate_left(4)
            ^ 0x63
    })
}

/// InvMixColumns of a round key: the form AES-NI's `aesimc` gives the decryption rounds.
fn inv_mix_columns(k: &[u8; 16]) -> [u8; 16] {
    std::array::from_fn(|i| {
        let (c, r) = (i / 4, i % 4);
        let a = |j: usize| k[4 * c + (r + j) % 4];
        gf_mul(a(0), 14) ^ gf_mul(a(1), 11) ^ gf_mul(a(2), 13) ^ gf_mul(a(3), 9)
    })
}

/// POLYVAL's reduction constant: `x^128 = x^127 + x^126 + x^121 + 1`.
const POLYVAL_R: u128 = 0xC200_0000_0000_0000_0000_0000_0000_0001;

/// `v·x` modulo POLYVAL's polynomial.
fn mulx(v: u128) -> u128 {
    (v << 1) ^ if v >> 127 == 1 { POLYVAL_R } else { 0 }
}

/// POLYVAL's `dot(a, b) = a·b·x^-128`, bit by bit.
fn dot(a: u128, b: u128) -> u128 {
    let mut r = 0u128;
    for i in (0..128).rev() {
        r = mulx(r);
        if (b >> i) & 1 == 1 {
            r ^= a;
        }
    }
    for _ in 0..128 {
        // Divide by x: add the polynomial first when r is odd (its x^128 term becomes x^127).
        r = if r & 1 == 1 {
            ((r ^ POLYVAL_R) >> 1) | 1 << 127
        } else {
            r >> 1
        };
    }
    r
}

#[test]
fn helpers_match_published_values() {
    // FIPS 197 appendix A.3: the AES-256 key 00 01 .. 1f; its last round key.
    let key: [u8; 32] = std::array::from_fn(|i| i as u8);
    let rk = expand_aes_key(&key);
    assert_eq!(rk[14], 0x24fc79ccbf0979e9371ac23c6d68de36u128.to_be_bytes());
    // FIPS 197 5.3.3: InvMixColumns of the column d4 bf 5d 30 ... (MixColumns of 04 66 81 e5).
    let mixed = [
        0x04, 0x66, 0x81, 0xe5, 0xe0, 0xcb, 0x19, 0x9a, 0x48, 0xf8, 0xd3, 0x7a, 0x28, 0x06, 0x26,
        0x4c,
    ];
    let plain = [
        0xd4, 0xbf, 0x5d, 0x30, 0xe0, 0xb4, 0x52, 0xae, 0xb8, 0x41, 0x11, 0xf1, 0x1e, 0x27, 0x98,
        0xe5,
    ];
    assert_eq!(inv_mix_columns(&mixed), plain);
    // GCM specification test case 2: H = AES_0(0), GHASH of one ciphertext block and the
    // length block, computed as gcmx does in the POLYVAL form.
    let h = mulx(0x66e94bd4ef8a2c3b884cfa59ca342b2e);
    let s = dot(0x0388dace60b6a392f328c2b971b2fe78, h);
    assert_eq!(dot(s ^ 128, h), 0xf38cbb1ad69223dcc3457ae5b6b0f885);
}
