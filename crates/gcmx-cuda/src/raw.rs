//! Timed kernel runs for the benchmark (feature `bench`): the memory and PCIe ceilings, the GHASH-only
//! kernels (clmad and software), the keystream-only AES-CTR kernel and the fused kernels, each timed with
//! CUDA events and no host synchronisation between repeats.
//!
//! Every function runs its work `reps + 1` times on one lane (the first run warms up and is not
//! counted), waits for all of it before it returns, and returns the event times of the counted runs in
//! milliseconds. Kernels run over [`DeviceBuf`]s the caller owns and cannot touch meanwhile (they are
//! borrowed for the call). Not for production use: these launch paths exist to measure the kernels.
//!
//! Layer: the top (it reaches into the engine's device keys).

use std::sync::Arc;
use std::time::Instant;

use gcmx_core::backend::{Direction, Error, KeyMaterial};

use crate::abi;
use crate::dbatch::{self, DeviceBatch, Regions};
use crate::engine::CudaEngine;
use crate::keys::{self, DeviceKeys};
use crate::plan;
use crate::resident::DeviceBuf;
use crate::runtime::{AES_CTR_THREADS, At, DeviceMem, Event, Gpu, Lane, Launch};

/// Run `launch` `reps + 1` times on `lane` between events; the counted times (ms).
fn timed(
    lane: &mut Lane,
    reps: usize,
    mut launch: impl FnMut(&mut Lane) -> Result<(), Error>,
) -> Result<Vec<f32>, Error> {
    let gpu = lane.gpu().clone();
    let mut out = Vec::with_capacity(reps);
    for i in 0..=reps {
        let (start, stop) = (Event::new(&gpu)?, Event::new(&gpu)?);
        lane.record(&start)?;
        launch(lane)?;
        lane.record(&stop)?;
        let ms = stop.elapsed_ms(&start)?;
        if i > 0 {
            out.push(ms);
        }
    }
    lane.wait()?;
    Ok(out)
}

fn gpu_of(buf: &DeviceBuf) -> Arc<Gpu> {
    buf.mem.gpu().clone()
}

/// The device's memory ceilings: `gcmx_bw_read` over `src` (`dst` `None`: the read ceiling), or
/// `gcmx_bw_copy` from `src` to `dst` (the copy ceiling, reads and writes); lengths a multiple of 16.
pub fn time_bandwidth(
    src: &DeviceBuf,
    dst: Option<&mut DeviceBuf>,
    reps: usize,
) -> Result<Vec<f32>, Error> {
    let gpu = gpu_of(src);
    let Some(dst) = dst else {
        let grid = plan::grid_for(plan::blocks(src.len()), abi::GHASH_SPAN) as usize;
        let out = DeviceMem::new(&gpu, 16 * grid)?;
        return gpu.with_lane(|lane| {
            timed(lane, reps, |l| {
                l.launch(Launch::BwRead {
                    input: At::start(&src.mem),
                    len: src.len(),
                    out: At::start(&out),
                })
            })
        });
    };
    gpu.with_lane(|lane| {
        timed(lane, reps, |l| {
            l.launch(Launch::BwCopy {
                input: At::start(&src.mem),
                len: src.len(),
                out: At::start(&dst.mem),
            })
        })
    })
}

/// PCIe ceilings with page-locked host memory, over `bytes` bytes.
#[derive(Clone, Debug)]
pub struct PcieTimes {
    /// Host to device, one copy per run (ms).
    pub h2d_ms: Vec<f32>,
    /// Device to host, one copy per run (ms).
    pub d2h_ms: Vec<f32>,
    /// `rounds` copies each way on two streams at once, wall time per run (s).
    pub both_s: Vec<f64>,
}

/// Time page-locked copies of `bytes` bytes: each way alone, then `rounds` each way at once.
pub fn time_pcie(bytes: usize, rounds: usize, reps: usize) -> Result<PcieTimes, Error> {
    let gpu = Gpu::get(0)?;
    let a = DeviceMem::new(&gpu, bytes)?;
    let b = DeviceMem::new(&gpu, bytes)?;
    let mut up = Lane::new(&gpu)?;
    let mut down = Lane::new(&gpu)?;
    up.reserve_host(0, bytes)?;
    down.reserve_host(0, bytes)?;
    let h2d_ms = timed(&mut up, reps, |l| l.upload(0, 0, At::start(&a), bytes))?;
    let d2h_ms = timed(&mut down, reps, |l| l.download(At::start(&b), 0, 0, bytes))?;
    let mut both_s = Vec::with_capacity(reps);
    for i in 0..=reps {
        let t = Instant::now();
        for _ in 0..rounds {
            up.upload(0, 0, At::start(&a), bytes)?;
            down.download(At::start(&b), 0, 0, bytes)?;
        }
        up.wait()?;
        down.wait()?;
        if i > 0 {
            both_s.push(t.elapsed().as_secs_f64());
        }
    }
    Ok(PcieTimes {
        h2d_ms,
        d2h_ms,
        both_s,
    })
}

/// The GHASH-only kernels for one key.
#[derive(Debug)]
pub struct Ghash {
    gpu: Arc<Gpu>,
    key: KeyMaterial,
    powers: Arc<DeviceMem>,
}

impl Ghash {
    /// The GHASH-layout power table of the AES key `key`, on the default device.
    pub fn new(key: &[u8]) -> Result<Ghash, Error> {
        let key = KeyMaterial::new(key)?;
        let gpu = Gpu::get(0)?;
        let powers = keys::ghash_powers(&gpu, &key)?;
        Ok(Ghash { gpu, key, powers })
    }

    fn launch<'a>(
        &'a self,
        clmad: bool,
        buf: &'a DeviceBuf,
        parts: &'a Arc<DeviceMem>,
    ) -> Launch<'a> {
        Launch::Ghash {
            clmad,
            data: At::start(&buf.mem),
            len: buf.len(),
            powers: At::start(&self.powers),
            partials: At::start(parts),
        }
    }

    fn partials(&self, buf: &DeviceBuf) -> Result<Arc<DeviceMem>, Error> {
        let grid = plan::grid_for(plan::blocks(buf.len()), abi::GHASH_SPAN) as usize;
        DeviceMem::new(&self.gpu, 16 * grid)
    }

    /// Time GHASH over `buf` with the clmad or the software kernel.
    pub fn time(&self, clmad: bool, buf: &DeviceBuf, reps: usize) -> Result<Vec<f32>, Error> {
        let parts = self.partials(buf)?;
        self.gpu
            .with_lane(|lane| timed(lane, reps, |l| l.launch(self.launch(clmad, buf, &parts))))
    }

    /// Whether the clmad kernel, the software kernel and the CPU (over `host`, the buffer's contents)
    /// give the same GHASH value: (clmad == soft, clmad == CPU). Only the verdicts leave this function.
    pub fn check(&self, buf: &DeviceBuf, host: &[u8]) -> Result<(bool, bool), Error> {
        let value = |clmad: bool| -> Result<u128, Error> {
            let parts = self.partials(buf)?;
            self.gpu
                .with_lane(|l| l.launch(self.launch(clmad, buf, &parts)))?;
            let mut raw = vec![0u8; parts.len()];
            parts.download(0, &mut raw)?;
            let chunk = plan::Chunk {
                offset: 0,
                len: buf.len(),
                first_block: 0,
                first_partial: 0,
                grid: (raw.len() / 16) as u32,
            };
            let mut vals = vec![0u128; raw.len() / 16];
            plan::read_partials(&raw, &mut vals);
            let list = plan::partials_of(&[chunk], &vals, abi::GHASH_SPAN);
            Ok(gcmx_core::backend::tree_reduce(&self.key.hash_key(), &list).value)
        };
        let cl = value(true)?;
        let soft = value(false)?;
        let blocks: Vec<u128> = host
            .chunks(16)
            .map(|c| {
                let mut b = [0u8; 16];
                b[..c.len()].copy_from_slice(c);
                u128::from_be_bytes(b)
            })
            .collect();
        let cpu = gcmx_core::backend::Partial::hash_blocks(&self.key.hash_key(), &blocks).value;
        Ok((cl == soft, cl == cpu))
    }
}

/// Time the keystream-only kernel `gcmx_aes_ctr` (no GHASH) over `buf` in place, key `key`.
///
/// # Safety
/// This is AES-CTR with no authentication, `reps` times over the buffer: what `buf` holds afterwards
/// is keystream-XORed data that no tag vouches for (run on a GCM ciphertext with the matching J0, it
/// is unauthenticated plaintext). The caller must only time with it and must not release or act on
/// the buffer's contents; no memory-safety condition beyond that.
pub unsafe fn time_aes_ctr(
    key: &[u8],
    buf: &mut DeviceBuf,
    reps: usize,
) -> Result<Vec<f32>, Error> {
    let gpu = gpu_of(buf);
    let keys = DeviceKeys::expand(&gpu, &[key])?;
    let chunks = plan::blocks(buf.len()).div_ceil(abi::WARP_CHUNK);
    let sms = u64::from(gpu.info().multiprocessors);
    let grid = chunks
        .div_ceil(u64::from(AES_CTR_THREADS / 32))
        .min(sms * 2)
        .max(1) as u32;
    gpu.with_lane(|lane| {
        timed(lane, reps, |l| {
            l.launch(Launch::AesCtr {
                key: keys.key(0),
                nr: abi::rounds(key.len()),
                j0: [9u8; 16],
                data: At::start(&buf.mem),
                len: buf.len(),
                grid,
            })
        })
    })
}

/// Time the fused kernel of `engine` (`seal`: encrypt, else decrypt) over `buf` in place, under the
/// nonce `nonce`. The partial hashes are discarded (and wiped with their buffer): no tag is checked.
///
/// # Safety
/// In the decrypt direction `buf` afterwards holds unauthenticated plaintext (`reps` times decrypted).
/// The caller must only time with it and must not release or act on the buffer's contents; no
/// memory-safety condition beyond that.
pub unsafe fn time_fused(
    engine: &CudaEngine,
    nonce: &[u8],
    seal: bool,
    buf: &mut DeviceBuf,
    reps: usize,
) -> Result<Vec<f32>, Error> {
    let (gpu, k) = engine.parts()?;
    if !Arc::ptr_eq(&gpu_of(buf), gpu) {
        return Err(Error::InvalidInput("buffer of another device".into()));
    }
    gcmx_core::backend::check(nonce, b"", buf.len(), 16)?;
    let j0 = k.host.j0(nonce);
    let grid = plan::grid_for(plan::blocks(buf.len()), abi::FUSED_SPAN) as usize;
    let meta = DeviceMem::new(gpu, abi::GCM_CTR_BYTES + 16 * grid)?;
    let dir = if seal {
        Direction::Seal
    } else {
        Direction::Open
    };
    gpu.with_lane(|lane| {
        lane.reserve_host(0, abi::GCM_CTR_BYTES)?;
        lane.host(0)?[..abi::GCM_CTR_BYTES].copy_from_slice(&abi::gcm_ctr_bytes(&j0, 0));
        lane.upload(0, 0, At::start(&meta), abi::GCM_CTR_BYTES)?;
        let t = timed(lane, reps, |l| {
            l.launch(Launch::Fused {
                dir,
                data: At::start(&buf.mem),
                len: buf.len(),
                key: k.key,
                nr: k.nr,
                powers: k.powers,
                ctr: At::start(&meta),
                partials: At {
                    mem: &meta,
                    off: abi::GCM_CTR_BYTES,
                },
            })
        });
        lane.host(0).map(zeroize::Zeroize::zeroize)?;
        t
    })
}

/// Time the device-batch kernel of `engine` over `batch` with events, as the fused kernel is timed:
/// `reps + 1` rounds on one lane of a seal then an open (16-byte tags), the first round a warm-up;
/// returns the counted (seal, open) times in ms. Each round leaves `batch.data` as it found it (the
/// open undoes the seal) and every verdict Ok; the caller checks the verdicts afterwards.
pub fn time_batch(
    engine: &CudaEngine,
    batch: DeviceBatch<'_>,
    reps: usize,
) -> Result<(Vec<f32>, Vec<f32>), Error> {
    let (gpu, _) = engine.parts()?;
    let keys = engine.key_set();
    let r = Regions::of_batch(&batch);
    let mut slot = None;
    let out = gpu.with_lane(|lane| {
        let (mut seal, mut open) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
        for i in 0..=reps {
            let ev = [Event::new(gpu)?, Event::new(gpu)?, Event::new(gpu)?];
            lane.record(&ev[0])?;
            dbatch::queue_on_lane(gpu, lane, keys, r, abi::DB_SEAL, 16, 0, &mut slot)?;
            lane.record(&ev[1])?;
            dbatch::queue_on_lane(gpu, lane, keys, r, abi::DB_OPEN, 16, 0, &mut slot)?;
            lane.record(&ev[2])?;
            let (s, o) = (ev[1].elapsed_ms(&ev[0])?, ev[2].elapsed_ms(&ev[1])?);
            if i > 0 {
                seal.push(s);
                open.push(o);
            }
        }
        lane.wait()?;
        Ok((seal, open))
    });
    // with_lane waited for the lane: the scratch is idle.
    if let Some(s) = slot
        && out.is_ok()
    {
        gpu.give_scratch(s);
    }
    out
}
