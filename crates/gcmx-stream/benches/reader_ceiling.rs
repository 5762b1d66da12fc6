//! Where the buffered reader's large read stands against `Gcm::decrypt_batch`, layer by layer:
//! the same segments opened by the typed API with no stream around them, and the memory
//! traffic of each pattern alone, measured in one run.
//!
//! ```text
//! cargo bench -p gcmx-stream --bench reader_ceiling -- --mib 512 --rounds 9 --settle
//! cargo bench -p gcmx-stream --bench reader_ceiling -- --mib 16 --rounds 300 --drop
//! ```
//!
//! Rows (GiB/s of plaintext, median of `--rounds`, every row once per round; `--settle` reads
//! 1 GiB on every thread before each row, so that each starts with caches holding none of its
//! data and no dirty lines left by the row before; AES-256, 1 MiB segments, a task each):
//! - `decrypt_batch in place`: the peer of `benches/adapters.rs`.
//! - `buffered reader, read_exact`: `decrypting_buf_reader` over the stream in memory, one
//!   `read_exact` of the whole plaintext (reader built and dropped inside the timing).
//! - `typed open past the caches` / `typed open, cached stores`: the same segments opened from
//!   their ciphertext into the caller's buffer at the stream's offsets by
//!   `Aes256Gcm::with_uncached_output` / the plain key, no stream layer.
//! - `non-temporal copy` / `ordinary copy`: the ciphertext copied into that buffer, a segment
//!   a task (the reader's traffic: read one buffer, write another), with 512-bit non-temporal
//!   stores where AVX-512F is (else ordinary ones) / with `copy_from_slice`.
//! - `read-modify-write in place`: every 8 bytes of one buffer rewritten (the peer's traffic).
//! - `read only`: the ciphertext read.
//!
//! `--drop`: microseconds of a reader's set-up and drop, and of its drop after reading the
//! whole stream (what a stream costs besides its segments).

use std::hint::black_box;
use std::io::{Read, Write};
use std::time::Instant;

use gcmx::aead::consts::U12;
use gcmx::aead::{AeadInOut, KeyInit};
use gcmx::{Aes256Gcm, Gcm, OpenJob};
use gcmx_stream::{KeySize, Keyset};
use rayon::prelude::*;

mod common;

const SEGMENT: usize = 1 << 20;
/// The header of an AES-256 stream: its length byte, a 32-byte salt and a 7-byte prefix.
const HEADER: usize = 40;

fn gib_s(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64 / secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn nonce(i: usize) -> gcmx::Nonce<U12> {
    let mut n = [0u8; 12];
    n[7..11].copy_from_slice(&(i as u32).to_be_bytes());
    n.into()
}

/// `src` into `dst` (equal lengths), the 64-byte-aligned middle with non-temporal stores.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn nt_copy(src: &[u8], dst: &mut [u8]) {
    use std::arch::x86_64::*;
    let head = dst.as_ptr().align_offset(64).min(dst.len());
    let body = (dst.len() - head) / 64 * 64;
    dst[..head].copy_from_slice(&src[..head]);
    for (s, d) in src[head..head + body]
        .chunks_exact(64)
        .zip(dst[head..head + body].chunks_exact_mut(64))
    {
        let v: __m512i = bytemuck::pod_read_unaligned(s);
        // SAFETY: `d` is 64 bytes of `dst` at a 64-byte-aligned address; the caller has AVX-512F.
        unsafe { _mm512_stream_si512(d.as_mut_ptr().cast(), v) };
    }
    dst[head + body..].copy_from_slice(&src[head + body..]);
    _mm_sfence();
}

/// Evicts what the caches hold (leaving clean lines): 1 GiB read on every thread.
fn settle(scratch: &[u8]) {
    let s = scratch
        .par_chunks(1 << 20)
        .map(|c| c.iter().step_by(64).fold(0u8, |a, &b| a ^ b))
        .reduce(|| 0, |a, b| a ^ b);
    black_box(s);
}

/// `buf` cut into pieces of `lens`.
fn cut<'a>(mut buf: &'a mut [u8], lens: &[usize]) -> Vec<&'a mut [u8]> {
    lens.iter()
        .map(|&n| buf.split_off_mut(..n).expect("long enough"))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |k: &str| args.iter().any(|a| a == k);
    let num = |k: &str, d: usize| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .map_or(d, |v| v.parse().expect("a number"))
    };
    let (mib, rounds) = (num("--mib", 256), num("--rounds", 9));
    let bytes = mib << 20;
    #[cfg(target_arch = "x86_64")]
    let avx512 = std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let avx512 = false;
    println!(
        "gcmx-stream reader_ceiling: {mib} MiB, AES-256, 1 MiB segments, {} threads, median of {rounds} rounds, settle {}, AVX-512F {avx512}",
        rayon::current_num_threads(),
        flag("--settle"),
    );

    // The plaintext segment lengths and offsets of the stream.
    let mut lens = vec![SEGMENT - HEADER - 16];
    while lens.iter().sum::<usize>() < bytes {
        let left = bytes - lens.iter().sum::<usize>();
        lens.push((SEGMENT - 16).min(left));
    }
    let plain = common::plaintext(bytes);
    let keyset = Keyset::generate(KeySize::Aes256, SEGMENT as u32).expect("keyset");
    let mut w = keyset
        .encrypting_writer(Vec::with_capacity(bytes + (bytes >> 10)), b"bench")
        .expect("writer");
    w.write_all(&plain).expect("write");
    let stream = w.finish().expect("finish");
    let mut all = vec![0u8; bytes];

    if flag("--drop") {
        let (mut after_read, mut bare) = (vec![], vec![]);
        for _ in 0..rounds {
            let mut r = keyset
                .decrypting_buf_reader(&stream[..], b"bench")
                .expect("reader");
            r.read_exact(&mut all).expect("read");
            let t = Instant::now();
            drop(r);
            after_read.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            let r = keyset
                .decrypting_buf_reader(&stream[..], b"bench")
                .expect("reader");
            drop(black_box(r));
            bare.push(t.elapsed().as_secs_f64() * 1e6);
        }
        println!("reader set-up and drop      {:8.1} us", median(bare));
        println!("drop after the whole read   {:8.1} us", median(after_read));
        return;
    }

    // The same geometry sealed by the typed key: the stream's bytes, with its own nonces.
    let key = Aes256Gcm::new(&[0x42u8; 32].into());
    let uncached = key.clone().with_uncached_output();
    let gcm = Gcm::new(&[0x42u8; 32]).expect("key");
    let mut ct = vec![0u8; stream.len()];
    let mut spans = vec![]; // (body's offset in `ct`, length)
    let (mut at, mut from) = (HEADER, 0);
    for (i, &n) in lens.iter().enumerate() {
        ct[at..at + n].copy_from_slice(&plain[from..from + n]);
        let tag = key
            .encrypt_inout_detached(&nonce(i), &[], (&mut ct[at..at + n]).into())
            .expect("seal");
        ct[at + n..at + n + 16].copy_from_slice(&tag);
        spans.push((at, n));
        (at, from) = (at + n + 16, from + n);
    }
    // The peer's ciphertext: the bodies one after the other, the tags aside.
    let work_ct: Vec<u8> = spans
        .iter()
        .flat_map(|&(c, n)| &ct[c..c + n])
        .copied()
        .collect();
    let tags: Vec<[u8; 16]> = spans
        .iter()
        .map(|&(c, n)| ct[c + n..c + n + 16].try_into().expect("16"))
        .collect();
    let nonces: Vec<[u8; 12]> = (0..lens.len()).map(|i| nonce(i).into()).collect();
    let mut work = work_ct.clone();
    let scratch = if flag("--settle") {
        vec![1u8; 1 << 30]
    } else {
        vec![]
    };

    let names = [
        "decrypt_batch in place (peer)",
        "buffered reader, read_exact",
        "typed open past the caches",
        "typed open, cached stores",
        "non-temporal copy",
        "ordinary copy",
        "read-modify-write in place",
        "read only",
    ];
    let mut res: Vec<Vec<f64>> = vec![vec![]; names.len()];
    let time = |row: usize, res: &mut Vec<Vec<f64>>, f: &mut dyn FnMut()| {
        if !scratch.is_empty() {
            settle(&scratch);
        }
        let t = Instant::now();
        f();
        res[row].push(gib_s(bytes, t.elapsed().as_secs_f64()));
    };
    for _ in 0..rounds {
        work.copy_from_slice(&work_ct);
        time(0, &mut res, &mut || {
            let mut jobs: Vec<OpenJob<'_>> = cut(&mut work, &lens)
                .into_iter()
                .enumerate()
                .map(|(i, buf)| OpenJob {
                    nonce: &nonces[i],
                    aad: &[],
                    buf,
                    tag: &tags[i],
                })
                .collect();
            gcm.decrypt_batch(&mut jobs).expect("open");
        });
        time(1, &mut res, &mut || {
            let mut r = keyset
                .decrypting_buf_reader(&stream[..], b"bench")
                .expect("reader");
            r.read_exact(&mut all).expect("read");
        });
        // The typed opens (past the caches, cached) and the copies (non-temporal, ordinary), a
        // segment a task into the caller's buffer at the stream's offsets.
        for row in 2..=5 {
            let mut outs = cut(&mut all, &lens);
            time(row, &mut res, &mut || {
                outs.par_iter_mut()
                    .with_max_len(1)
                    .enumerate()
                    .for_each(|(i, out)| {
                        let (c, n) = spans[i];
                        let src = &ct[c..c + n];
                        if row <= 3 {
                            let cipher = if row == 2 { &uncached } else { &key };
                            let tag = gcmx::Tag::try_from(&ct[c + n..c + n + 16]).expect("16");
                            cipher
                                .decrypt_into_detached(&nonce(i), &[], src, out, &tag)
                                .expect("open");
                            return;
                        }
                        #[cfg(target_arch = "x86_64")]
                        if row == 4 && avx512 {
                            // SAFETY: AVX-512F was detected.
                            unsafe { nt_copy(src, out) };
                            return;
                        }
                        out.copy_from_slice(src);
                    })
            });
        }
        time(6, &mut res, &mut || {
            work.par_chunks_mut(SEGMENT).for_each(|c| {
                for w in c.chunks_exact_mut(8) {
                    let v = u64::from_le_bytes(w.try_into().expect("8")) ^ 0x5555;
                    w.copy_from_slice(&v.to_le_bytes());
                }
            });
            black_box(&work);
        });
        time(7, &mut res, &mut || {
            let s = ct
                .par_chunks(SEGMENT)
                .map(|c| {
                    c.chunks_exact(8).fold(0u64, |a, w| {
                        a ^ u64::from_le_bytes(w.try_into().expect("8"))
                    })
                })
                .reduce(|| 0, |a, b| a ^ b);
            black_box(s);
        });
    }
    let peer = median(res[0].clone());
    for (name, v) in names.iter().zip(res) {
        let (lo, hi) = v
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
        let m = median(v);
        println!(
            "{name:<32} {m:7.2} GiB/s {:6.1} % of the peer (min {lo:.2}, max {hi:.2})",
            100.0 * m / peer
        );
    }
}
