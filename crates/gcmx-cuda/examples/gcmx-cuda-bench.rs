//! GPU benchmark of gcmx's CUDA backend, run on a CUDA machine (scripts/gpu-run.sh).
//!
//! Usage: `gcmx-cuda-bench [--quick] [--reps N]`
//!
//! Every figure is printed next to a ceiling measured in the same run: device read and copy bandwidth
//! (cuda/bandwidth.cu), pinned PCIe one way and both ways at once. Kernel times are CUDA-event times,
//! medians over repeats after a warm-up; host paths use wall time (medians) and the process CPU time.
//! Sizes: 4 GiB in device memory, 8 GiB host to host, batches of 1 KiB and 16 KiB messages.
//! The final table is printed last.

use std::time::Instant;

use gc::cust::memory::{CopyDestination, DeviceBuffer, LockedBuffer};
use gc::cust::sys as cu;
use gcmx::cuda::{self as gc, CudaEngine, PinnedRegion, raw};
use gcmx::{Backend, Gcm, GcmEngine, KeyMaterial, SealJob};
use rayon::prelude::*;

const GIB: usize = 1 << 30;
/// Copies in each direction per timed span of the both-ways PCIe measurement.
const BOTH_ROUNDS: usize = 4;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn fill(v: &mut [u8], seed: u64) {
    v.par_chunks_mut(1 << 20).enumerate().for_each(|(i, c)| {
        let mut s = seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for w in c.chunks_mut(8) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let b = s.to_le_bytes();
            w.copy_from_slice(&b[..w.len()]);
        }
    });
}

/// Process CPU time (user + system) in seconds, from /proc/self/stat (clock ticks of 1/100 s).
fn cpu_time() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // after ")": state is field 3; utime 14, stime 15 -> indices 11, 12
    let ut: f64 = f.get(11).and_then(|x| x.parse().ok()).unwrap_or(0.0);
    let st: f64 = f.get(12).and_then(|x| x.parse().ok()).unwrap_or(0.0);
    (ut + st) / 100.0
}

struct Row {
    what: String,
    figure: String,
    ceiling: String,
    pct: String,
    target: String,
}

fn row(
    rows: &mut Vec<Row>,
    what: &str,
    figure: String,
    ceiling: String,
    pct: Option<f64>,
    target: &str,
) {
    println!(
        "  {what}: {figure}  [ceiling {ceiling}{}]",
        pct.map_or(String::new(), |p| format!(", {p:.1} %"))
    );
    rows.push(Row {
        what: what.into(),
        figure,
        ceiling,
        pct: pct.map_or("-".into(), |p| format!("{p:.1} %")),
        target: target.into(),
    });
}

fn tbs(bytes: f64, ms: f64) -> f64 {
    bytes / (ms * 1e-3) / 1e12
}

fn gbs(bytes: f64, s: f64) -> f64 {
    bytes / s / 1e9
}

fn time_kernel(
    reps: usize,
    stream: &gc::cust::stream::Stream,
    mut f: impl FnMut() -> Result<(), gcmx::Error>,
) -> Result<f64, gcmx::Error> {
    // warm-up
    raw::time_ms(stream, &mut f)?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        v.push(f64::from(raw::time_ms(stream, &mut f)?));
    }
    Ok(median(v))
}

fn main() -> Result<(), gcmx::Error> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let reps: usize = args
        .iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 3 } else { 10 });
    let info = match gc::info() {
        Ok(i) => i,
        Err(e) => {
            println!("GPU bench: no CUDA device found ({e})");
            std::process::exit(2);
        }
    };
    println!("device: {info}");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("host: {cores} CPU threads; reps = {reps}; quick = {quick}");
    let mut rows: Vec<Row> = Vec::new();
    let n = if quick { GIB / 4 } else { 4 * GIB };
    let nf = n as f64;
    let stream = raw::stream()?;

    // ---- device buffers with random data ------------------------------------------------------------
    let t0 = Instant::now();
    let mut host = vec![0u8; n];
    fill(&mut host, 0x1234);
    let mut a: DeviceBuffer<u8> = raw::alloc(n)?;
    a.copy_from(&host[..])
        .map_err(|e| gcmx::Error::Device(format!("upload: {e:?}")))?;
    let mut b: DeviceBuffer<u8> = raw::alloc(n)?;
    println!(
        "setup: {} MiB random data on the device in {:.2} s",
        n >> 20,
        t0.elapsed().as_secs_f64()
    );

    // ---- ceilings: device read and copy -------------------------------------------------------------
    println!("== ceilings");
    let mut fold: DeviceBuffer<u8> = raw::alloc(raw::Ghash::partials_len(n).max(16))?;
    let read_ms = time_kernel(reps, &stream, || raw::bw_read(&stream, &a, &mut fold))?;
    let read_tbs = tbs(nf, read_ms);
    row(
        &mut rows,
        "device read (bw_read)",
        format!("{read_tbs:.2} TB/s"),
        "-".into(),
        None,
        "ceiling",
    );
    let copy_ms = time_kernel(reps, &stream, || raw::bw_copy(&stream, &a, &mut b))?;
    let copy_tbs = tbs(2.0 * nf, copy_ms);
    row(
        &mut rows,
        "device copy (bw_copy, read+write)",
        format!("{copy_tbs:.2} TB/s"),
        "-".into(),
        None,
        "ceiling",
    );

    // ---- ceilings: pinned PCIe ----------------------------------------------------------------------
    let pn = if quick { GIB / 4 } else { GIB };
    let mut ph =
        LockedBuffer::new(&0u8, pn).map_err(|e| gcmx::Error::Device(format!("pinned: {e:?}")))?;
    let mut ph2 =
        LockedBuffer::new(&0u8, pn).map_err(|e| gcmx::Error::Device(format!("pinned: {e:?}")))?;
    fill(&mut ph, 9);
    let s2 = raw::stream()?;
    let (da, db) = (a.as_device_ptr().as_raw(), b.as_device_ptr().as_raw());
    let h2d = |s: &gc::cust::stream::Stream,
               src: &LockedBuffer<u8>,
               dst: u64|
     -> Result<(), gcmx::Error> {
        // SAFETY: FFI async copy from a pinned buffer of pn bytes into a device buffer of >= pn bytes; the
        // callers synchronise (events) before either buffer is touched or freed.
        let r = unsafe { cu::cuMemcpyHtoDAsync_v2(dst, src.as_ptr().cast(), pn, s.as_inner()) };
        if r == cu::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(gcmx::Error::Device(format!("HtoD: {r:?}")))
        }
    };
    let d2h = |s: &gc::cust::stream::Stream,
               dst: &mut LockedBuffer<u8>,
               src: u64|
     -> Result<(), gcmx::Error> {
        // SAFETY: as above, device to pinned host.
        let r = unsafe { cu::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr().cast(), src, pn, s.as_inner()) };
        if r == cu::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(gcmx::Error::Device(format!("DtoH: {r:?}")))
        }
    };
    let h2d_ms = time_kernel(reps, &stream, || h2d(&stream, &ph, db))?;
    let d2h_ms = time_kernel(reps, &stream, || d2h(&stream, &mut ph2, da))?;
    let mut both = Vec::new();
    for i in 0..=reps {
        s2.synchronize().ok();
        let t = Instant::now();
        // BOTH_ROUNDS copies each way, interleaved on two streams, timed as one span.
        for _ in 0..BOTH_ROUNDS {
            h2d(&stream, &ph, db)?;
            d2h(&s2, &mut ph2, da)?;
        }
        stream
            .synchronize()
            .map_err(|e| gcmx::Error::Device(format!("{e:?}")))?;
        s2.synchronize()
            .map_err(|e| gcmx::Error::Device(format!("{e:?}")))?;
        if i > 0 {
            both.push(t.elapsed().as_secs_f64());
        }
    }
    let pf = pn as f64;
    let h2d_gbs = pf / (h2d_ms * 1e-3) / 1e9;
    let d2h_gbs = pf / (d2h_ms * 1e-3) / 1e9;
    let both_gbs = 2.0 * BOTH_ROUNDS as f64 * pf / median(both) / 1e9;
    row(
        &mut rows,
        "PCIe pinned host->device",
        format!("{h2d_gbs:.1} GB/s"),
        "-".into(),
        None,
        "ceiling",
    );
    row(
        &mut rows,
        "PCIe pinned device->host",
        format!("{d2h_gbs:.1} GB/s"),
        "-".into(),
        None,
        "ceiling",
    );
    row(
        &mut rows,
        "PCIe pinned both ways at once (sum)",
        format!("{both_gbs:.1} GB/s"),
        "-".into(),
        None,
        "ceiling",
    );
    drop(ph);
    drop(ph2);

    // ---- GHASH clmad vs soft ------------------------------------------------------------------------
    println!("== GHASH over {} MiB in device memory", n >> 20);
    let km = KeyMaterial::new(&[0x5a; 16]).unwrap();
    let gh = raw::Ghash::new(&km)?;
    let mut parts: DeviceBuffer<u8> = raw::alloc(raw::Ghash::partials_len(n))?;
    let soft_ms = time_kernel(reps.min(5), &stream, || {
        gh.launch(&stream, false, &a, &mut parts)
    })?;
    let soft_tbs = tbs(nf, soft_ms);
    if gh.has_clmad() {
        let cl_ms = time_kernel(reps, &stream, || gh.launch(&stream, true, &a, &mut parts))?;
        let cl_tbs = tbs(nf, cl_ms);
        row(
            &mut rows,
            "GHASH clmad",
            format!("{cl_tbs:.2} TB/s"),
            format!("read {read_tbs:.2} TB/s"),
            Some(100.0 * cl_tbs / read_tbs),
            ">= 95 % of read",
        );
        row(
            &mut rows,
            "GHASH soft (software clmul)",
            format!(
                "{soft_tbs:.2} TB/s (clmad {:.1}x faster)",
                cl_tbs / soft_tbs
            ),
            format!("read {read_tbs:.2} TB/s"),
            Some(100.0 * soft_tbs / read_tbs),
            "baseline",
        );
        // correctness beside the figures: clmad == soft on the whole buffer, == CPU on 64 MiB
        let v_cl = gh.hash(true, &a)?;
        let v_soft = gh.hash(false, &a)?;
        let m = (64 << 20).min(n);
        let sub = a.index(..m);
        let v_gpu = gh.hash(true, &sub)?;
        let blocks: Vec<u128> = host[..m]
            .chunks(16)
            .map(|c| u128::from_be_bytes(c.try_into().unwrap()))
            .collect();
        let v_cpu = gcmx_core::combine::Partial::hash_blocks(km.hash_key(), &blocks);
        println!(
            "  check: GHASH clmad == soft over {} MiB: {}; clmad == CPU over 64 MiB: {}",
            n >> 20,
            v_cl == v_soft,
            v_gpu == v_cpu
        );
    } else {
        row(
            &mut rows,
            "GHASH soft (clmad not built)",
            format!("{soft_tbs:.2} TB/s"),
            format!("read {read_tbs:.2} TB/s"),
            Some(100.0 * soft_tbs / read_tbs),
            "-",
        );
    }
    drop(parts);

    // ---- AES-CTR keystream --------------------------------------------------------------------------
    println!("== AES-CTR keystream (cuda/aes_ctr.cu)");
    for klen in [16usize, 32] {
        let km = KeyMaterial::new(&vec![0x33; klen]).unwrap();
        match raw::AesCtr::new(&km) {
            Ok(k) => {
                let ms = time_kernel(reps, &stream, || k.launch(&stream, &[9u8; 16], &mut a))?;
                let peer = if klen == 16 { 433.0 } else { 299.0 };
                let g = nf / (ms * 1e-3) / 1e9;
                row(
                    &mut rows,
                    &format!("AES-{}-CTR (read+write)", klen * 8),
                    format!("{g:.0} GB/s"),
                    format!("copy {copy_tbs:.2} TB/s; peer T-table keystream {peer:.0} GB/s"),
                    Some(100.0 * g / peer),
                    "vs peer",
                );
            }
            Err(e) => println!("  AES-{}-CTR: not run ({e})", klen * 8),
        }
    }

    // ---- fused GCM in device memory -----------------------------------------------------------------
    println!("== fused AES-GCM over {} MiB in device memory", n >> 20);
    let fused_section =
        |a: &mut DeviceBuffer<u8>, rows: &mut Vec<Row>| -> Result<(), gcmx::Error> {
            let mut fparts: DeviceBuffer<u8> = raw::alloc(raw::fused_partials_len(n))?;
            for klen in [16usize, 32] {
                let km = KeyMaterial::new(&vec![0x77; klen]).unwrap();
                let eng = CudaEngine::new(&km)?;
                let j0 = km.j0(&[1u8; 12]);
                for seal in [true, false] {
                    let ms = time_kernel(reps, &stream, || {
                        raw::fused(&eng, &stream, seal, &j0, a, &mut fparts)
                    })?;
                    let g = nf / (ms * 1e-3) / 1e9;
                    let target = if klen == 16 {
                        ">= 430 GB/s"
                    } else {
                        ">= 300 GB/s"
                    };
                    let what = format!(
                        "AES-{}-GCM {} (fused)",
                        klen * 8,
                        if seal { "encrypt" } else { "decrypt" }
                    );
                    row(
                        rows,
                        &what,
                        format!("{g:.0} GB/s"),
                        format!("copy {copy_tbs:.2} TB/s"),
                        Some(100.0 * g * 2.0 / (copy_tbs * 1e3)),
                        target,
                    );
                }
                // correctness beside the figures: device path tag == CPU tag over 256 MiB
                let m = 256 << 20;
                let mut sub = a.index(..m.min(n));
                let mut h = vec![0u8; sub.len()];
                sub.copy_to(&mut h[..])
                    .map_err(|e| gcmx::Error::Device(format!("{e:?}")))?;
                let tg = eng.seal_device_j0(&j0, b"aad", &mut sub)?;
                let cpu = gcmx_core::engine::ParallelEngine::new(std::sync::Arc::new(
                    KeyMaterial::new(km.key_bytes()).unwrap(),
                ));
                let tc = cpu.seal(&j0, b"aad", &mut h)?;
                let mut back = vec![0u8; h.len()];
                sub.copy_to(&mut back[..])
                    .map_err(|e| gcmx::Error::Device(format!("{e:?}")))?;
                println!(
                    "  check AES-{}: device tag == CPU tag over 256 MiB: {}, ciphertext equal: {}",
                    klen * 8,
                    tg == tc,
                    back == h
                );
            }
            drop(fparts);
            Ok(())
        };
    if let Err(e) = fused_section(&mut a, &mut rows) {
        println!("  fused section failed: {e}");
    }
    drop(a);
    drop(b);
    drop(host);

    if let Err(e) = host_sections(&mut rows, both_gbs, cores, quick) {
        println!("  host section failed: {e}");
    }

    // ---- table -------------------------------------------------------------------------------------
    println!();
    println!("| measurement | figure | ceiling / comparison (same run) | % | target |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.what, r.figure, r.ceiling, r.pct, r.target
        );
    }
    Ok(())
}

fn host_sections(
    rows: &mut Vec<Row>,
    both_gbs: f64,
    cores: usize,
    quick: bool,
) -> Result<(), gcmx::Error> {
    // ---- host to host -------------------------------------------------------------------------------
    let hn = if quick { GIB } else { 8 * GIB };
    println!(
        "== host memory to host memory, {} MiB, AES-256-GCM",
        hn >> 20
    );
    let mut hbuf = vec![0u8; hn];
    fill(&mut hbuf, 77);
    let gpu = Gcm::with_backend(&[0x11; 32], Backend::Cuda)?;
    let cpu = Gcm::with_backend(&[0x11; 32], Backend::CpuParallel)?;
    let hreps = if quick { 2 } else { 3 };
    let mut tag = [0u8; 16];
    let mut run = |g: &Gcm, buf: &mut [u8]| -> Result<(f64, f64), gcmx::Error> {
        let mut wall = Vec::new();
        let mut cpus = Vec::new();
        for i in 0..=hreps {
            let c0 = cpu_time();
            let t = Instant::now();
            g.encrypt_detached(&[3u8; 12], b"", buf, &mut tag)?;
            if i > 0 {
                wall.push(t.elapsed().as_secs_f64());
                cpus.push(cpu_time() - c0);
            }
        }
        Ok((median(wall), median(cpus)))
    };
    let hf = hn as f64;
    let (w, c) = run(&gpu, &mut hbuf)?;
    row(
        rows,
        &format!("host->host {} GiB, registered per call", hn / GIB),
        format!(
            "{:.1} GB/s ({:.2} s, {:.2} CPU cores busy)",
            gbs(hf, w),
            w,
            c / w
        ),
        format!("PCIe both ways {both_gbs:.1} GB/s"),
        Some(100.0 * 2.0 * hf / w / 1e9 / both_gbs),
        ">= 85 % of two-way, <= 1 core",
    );
    {
        let t_reg = Instant::now();
        let reg = PinnedRegion::new(&mut hbuf);
        let reg_s = t_reg.elapsed().as_secs_f64();
        match reg {
            Ok(r) => {
                let (w, c) = run(&gpu, &mut hbuf)?;
                row(
                    rows,
                    &format!("host->host {} GiB, pre-registered (PinnedRegion)", hn / GIB),
                    format!(
                        "{:.1} GB/s ({:.2} s, {:.2} CPU cores busy)",
                        gbs(hf, w),
                        w,
                        c / w
                    ),
                    format!("PCIe both ways {both_gbs:.1} GB/s"),
                    Some(100.0 * 2.0 * hf / w / 1e9 / both_gbs),
                    ">= 85 % of two-way, <= 1 core",
                );
                let t_un = Instant::now();
                drop(r);
                let unreg_s = t_un.elapsed().as_secs_f64();
                row(
                    rows,
                    &format!("cuMemHostRegister / Unregister of {} GiB", hn / GIB),
                    format!(
                        "{:.3} s / {:.3} s ({:.1} GB/s together)",
                        reg_s,
                        unreg_s,
                        gbs(hf, reg_s + unreg_s)
                    ),
                    "-".into(),
                    None,
                    "cost of pinning pageable memory",
                );
            }
            Err(e) => println!("  pre-registered run skipped: {e}"),
        }
    }
    let (w, c) = run(&cpu, &mut hbuf)?;
    row(
        rows,
        &format!("host->host {} GiB on all {cores} CPU threads", hn / GIB),
        format!(
            "{:.1} GB/s ({:.2} s, {:.1} cores busy)",
            gbs(hf, w),
            w,
            c / w
        ),
        "-".into(),
        None,
        "comparison",
    );
    drop(hbuf);

    // ---- batches --------------------------------------------------------------------------------------
    for (msg, count) in [
        (1024usize, if quick { 100_000 } else { 1_000_000 }),
        (16 * 1024, if quick { 10_000 } else { 100_000 }),
    ] {
        println!("== batch: {count} messages of {msg} B, AES-256-GCM, host to host");
        let mut data = vec![0u8; msg * count];
        fill(&mut data, 5);
        let nonces: Vec<[u8; 12]> = (0..count)
            .map(|i| {
                let mut n = [0u8; 12];
                n[..8].copy_from_slice(&(i as u64).to_le_bytes());
                n
            })
            .collect();
        let mut tags = vec![[0u8; 16]; count];
        let cpu_b = Gcm::with_backend(&[0x22; 32], Backend::Cpu)?;
        let gpu_b = Gcm::with_backend(&[0x22; 32], Backend::Cuda)?;
        let go =
            |g: &Gcm, data: &mut [u8], tags: &mut [[u8; 16]]| -> Result<(f64, f64), gcmx::Error> {
                let mut wall = Vec::new();
                let mut cpus = Vec::new();
                for i in 0..=3 {
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
                    let c0 = cpu_time();
                    let t = Instant::now();
                    g.encrypt_batch(&mut jobs)?;
                    if i > 0 {
                        wall.push(t.elapsed().as_secs_f64());
                        cpus.push(cpu_time() - c0);
                    }
                }
                Ok((median(wall), median(cpus)))
            };
        let (wg, cg) = go(&gpu_b, &mut data, &mut tags)?;
        let (wc, cc) = go(&cpu_b, &mut data, &mut tags)?;
        let bytes = (msg * count) as f64;
        row(
            rows,
            &format!("batch {count} x {msg} B: GPU"),
            format!(
                "{:.2} M msg/s, {:.1} GB/s ({:.1} cores busy)",
                count as f64 / wg / 1e6,
                gbs(bytes, wg),
                cg / wg
            ),
            format!(
                "all {cores} CPU threads: {:.2} M msg/s, {:.1} GB/s",
                count as f64 / wc / 1e6,
                gbs(bytes, wc)
            ),
            Some(100.0 * wc / wg),
            "vs all cores (GPU/CPU speed)",
        );
        let _ = cc;
    }

    Ok(())
}
