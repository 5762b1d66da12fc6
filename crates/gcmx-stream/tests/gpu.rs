//! The adapters on the GPU backend (feature `cuda`), against the CPU's: streams written on one read
//! on the other through every read path, and damaged streams refused with nothing but a prefix of
//! the plaintext returned. Windows of several segments, so that streams span several windows (whose
//! buffers the GPU moves in place where it can page-lock them, and through staging otherwise).
//! Without a GPU each test says so and passes.
#![cfg(feature = "cuda")]

mod common;

use std::io::{self, BufRead, Read, Write};

use gcmx_stream::{Backend, KeySize, Keyset, Options};

fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut v = vec![0u8; n];
    for c in v.chunks_mut(8) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        c.copy_from_slice(&s.to_le_bytes()[..c.len()]);
    }
    v
}

/// Whether a GPU is here; says so on stderr when not.
fn gpu_here(test: &str) -> bool {
    match gcmx::Gcm::with_backend(&[0u8; 32], Backend::Cuda) {
        Ok(_) => true,
        Err(e) => {
            // Straight to stderr: the harness captures the output of passing tests.
            let _ = writeln!(io::stderr(), "{test}: no CUDA device ({e}): NOT run");
            false
        }
    }
}

fn write_with(ks: &Keyset, pt: &[u8], opts: &Options, piece: usize) -> Vec<u8> {
    let mut w = ks
        .clone()
        .with_options(*opts)
        .encrypting_writer(Vec::new(), b"gpu")
        .expect("writer");
    for c in pt.chunks(piece.max(1)) {
        w.write_all(c).expect("write");
    }
    w.finish().expect("finish")
}

/// Every read path of the reader over `ct`: `read_to_end`, one `read_exact` of the whole
/// plaintext (buffered and not), `fill_buf`/`consume`, and reads of `piece` bytes.
fn read_every_way(
    ks: &Keyset,
    ct: &[u8],
    opts: &Options,
    len: usize,
    piece: usize,
) -> Vec<Vec<u8>> {
    let mut outs = Vec::new();
    let mut v = Vec::new();
    ks.clone()
        .with_options(*opts)
        .decrypting_reader(ct, b"gpu")
        .expect("reader")
        .read_to_end(&mut v)
        .expect("read_to_end");
    outs.push(v);
    for buffered in [false, true] {
        let mut v = vec![0u8; len];
        let mut end = [0u8; 1];
        if buffered {
            let mut r = ks
                .clone()
                .with_options(*opts)
                .decrypting_buf_reader(ct, b"gpu")
                .expect("reader");
            r.read_exact(&mut v).expect("read_exact");
            assert_eq!(r.read(&mut end).expect("end"), 0);
        } else {
            let mut r = ks
                .clone()
                .with_options(*opts)
                .decrypting_reader(ct, b"gpu")
                .expect("reader");
            r.read_exact(&mut v).expect("read_exact");
            assert_eq!(r.read(&mut end).expect("end"), 0);
        }
        outs.push(v);
    }
    let mut r = ks
        .clone()
        .with_options(*opts)
        .decrypting_buf_reader(ct, b"gpu")
        .expect("reader");
    let mut v = Vec::new();
    loop {
        let p = r.fill_buf().expect("fill_buf");
        if p.is_empty() {
            break;
        }
        v.extend_from_slice(p);
        let n = p.len();
        r.consume(n);
    }
    outs.push(v);
    let mut r = ks
        .clone()
        .with_options(*opts)
        .decrypting_reader(ct, b"gpu")
        .expect("reader");
    let mut v = Vec::new();
    let mut buf = vec![0u8; piece];
    loop {
        let n = r.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        v.extend_from_slice(&buf[..n]);
    }
    outs.push(v);
    outs
}

#[test]
fn gpu_and_cpu_adapters_read_each_other() {
    if !gpu_here("gpu_and_cpu_adapters_read_each_other") {
        return;
    }
    for (seg, window) in [
        (1u32 << 20, 4usize << 20),
        (64 << 10, 1 << 20),
        (4096, 64 << 10),
    ] {
        let ks = Keyset::generate(KeySize::Aes256, seg).expect("keyset");
        let gpu = Options::default()
            .with_backend(Backend::Cuda)
            .with_window_bytes(window);
        let cpu = Options::default()
            .with_backend(Backend::CpuParallel)
            .with_window_bytes(window);
        let s = seg as usize;
        let first = s - 40 - 16;
        let body = s - 16;
        for len in [
            0,
            1,
            first,
            first + 1,
            first + 3 * body,
            first + 9 * body + 1,
            3 * window + 12345,
        ] {
            let pt = data(len, len as u64 ^ u64::from(seg));
            for piece in [len.max(1), 1 << 20, 1000] {
                let ct = write_with(&ks, &pt, &gpu, piece);
                let back = write_with(&ks, &pt, &cpu, piece);
                assert_eq!(
                    ct.len(),
                    back.len(),
                    "seg {seg}, len {len}: ciphertext lengths"
                );
                for (i, out) in read_every_way(&ks, &ct, &cpu, len, 1 << 20)
                    .iter()
                    .enumerate()
                {
                    assert!(
                        out == &pt,
                        "seg {seg}, len {len}, piece {piece}: GPU writer, CPU read {i}"
                    );
                }
                for (i, out) in read_every_way(&ks, &back, &gpu, len, 1000)
                    .iter()
                    .enumerate()
                {
                    assert!(
                        out == &pt,
                        "seg {seg}, len {len}, piece {piece}: CPU writer, GPU read {i}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_gpu_reader_refuses_damage_and_returns_only_a_prefix() {
    if !gpu_here("the_gpu_reader_refuses_damage_and_returns_only_a_prefix") {
        return;
    }
    let seg = 1u32 << 20;
    let ks = Keyset::generate(KeySize::Aes128, seg).expect("keyset");
    let gpu = Options::default()
        .with_backend(Backend::Cuda)
        .with_window_bytes(4 << 20);
    let pt = data(11 << 20, 3);
    let ct = write_with(&ks, &pt, &gpu, pt.len());
    for at in [100, 5 << 20, ct.len() - 1] {
        let mut bad = ct.clone();
        bad[at] ^= 1;
        for buffered in [false, true] {
            let mut out = vec![0u8; pt.len()];
            let mut got = 0;
            let r: io::Result<()> = (|| {
                if buffered {
                    let mut r = ks
                        .clone()
                        .with_options(gpu)
                        .decrypting_buf_reader(&bad[..], b"gpu")?;
                    loop {
                        let n = r.read(&mut out[got..])?;
                        if n == 0 {
                            return Ok(());
                        }
                        got += n;
                    }
                } else {
                    let mut r = ks
                        .clone()
                        .with_options(gpu)
                        .decrypting_reader(&bad[..], b"gpu")?;
                    r.read_exact(&mut out)?;
                    got = out.len();
                    Ok(())
                }
            })();
            let e = r.expect_err("a damaged stream is refused");
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "byte {at}: {e}");
            assert!(
                out[..got] == pt[..got],
                "byte {at}: only a prefix of the plaintext"
            );
            // The bytes not returned hold zeros or, for a read that returned them before it
            // failed, the plaintext: never a byte of forged plaintext.
            assert!(
                out.iter().zip(&pt).all(|(o, p)| *o == 0 || o == p),
                "byte {at}: only zeros or plaintext in the buffer"
            );
        }
    }
}

/// The hostile-caller scenarios of `tests/hostile.rs` on the GPU: a panicking inner writer never
/// makes the writer seal a nonce twice and poisons it; a panicking source poisons the reader;
/// transient source errors are retried on every read path.
#[test]
fn the_gpu_adapters_under_hostile_callers() {
    if !gpu_here("the_gpu_adapters_under_hostile_callers") {
        return;
    }
    common::hostile::a_writer_whose_inner_writer_panicked_refuses_every_later_call(Backend::Cuda);
    common::hostile::a_reader_whose_source_panicked_refuses_every_later_read(Backend::Cuda);
    common::hostile::transient_source_errors_are_retried_on_every_path(Backend::Cuda);
}
