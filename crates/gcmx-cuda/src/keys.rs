//! Key material on the device: AES keys expanded there from the raw keys, and the powers of H the kernels
//! read. Everything here lives in device memory that is wiped before it is freed; the host copies made
//! on the way (raw keys, power tables) are wiped as soon as they are uploaded.
//!
//! Layer: above the runtime; below the host pipeline, the device-resident API and batches.

use std::sync::Arc;

use gcmx_core::backend::HashKey;
use gcmx_core::backend::{Error, KeyMaterial};
use zeroize::Zeroizing;

use crate::abi;
use crate::runtime::{At, DeviceMem, Gpu, Launch};

/// What a fused launch for one key needs: the expanded key and its power table on the device, and the
/// host's `KeyMaterial` for J0 and the tag combination.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Keyed<'a> {
    pub(crate) key: At<'a>,
    /// The key's rounds (public: its length).
    pub(crate) nr: u32,
    pub(crate) powers: At<'a>,
    pub(crate) host: &'a KeyMaterial,
}

/// Expanded AES keys (`GcmxAesKey[n]`) in device memory.
///
/// The raw keys travel to the device once, through page-locked staging that is wiped, into a device
/// buffer that is wiped as soon as `gcmx_aes_expand_keys` has read it; the expanded schedule exists only
/// on the device (FIPS-197 expansion with the table-free bitsliced S-box, `cuda/aes_key.cu`).
#[derive(Debug)]
pub(crate) struct DeviceKeys {
    mem: Arc<DeviceMem>,
    n: u32,
}

impl DeviceKeys {
    /// Expand `raw` keys (each 16, 24 or 32 bytes) on `gpu`.
    pub(crate) fn expand(gpu: &Arc<Gpu>, raw: &[&[u8]]) -> Result<DeviceKeys, Error> {
        for k in raw {
            if !matches!(k.len(), 16 | 24 | 32) {
                return Err(Error::KeyLength(k.len()));
            }
        }
        let n = u32::try_from(raw.len())
            .map_err(|_| Error::InvalidInput(format!("{} keys: at most 2^32 - 1", raw.len())))?;
        let mut packed = Zeroizing::new(vec![0u8; abi::RAW_KEY_BYTES * raw.len()]);
        for (slot, k) in packed.chunks_exact_mut(abi::RAW_KEY_BYTES).zip(raw) {
            slot[..k.len()].copy_from_slice(k);
            slot[32..].copy_from_slice(&(k.len() as u32).to_le_bytes());
        }
        let mem = DeviceMem::new(gpu, abi::AES_KEY_BYTES * raw.len())?;
        if n > 0 {
            let raw_mem = DeviceMem::new(gpu, packed.len())?;
            raw_mem.upload(0, &packed)?;
            gpu.with_lane(|lane| {
                lane.launch(Launch::ExpandKeys {
                    raw: At::start(&raw_mem),
                    out: At::start(&mem),
                    nkeys: n,
                })
            })?;
            // raw_mem is wiped and freed here, after the expansion has been waited for.
        }
        Ok(DeviceKeys { mem, n })
    }

    /// Number of keys.
    pub(crate) fn count(&self) -> u32 {
        self.n
    }

    /// All keys, as one buffer.
    pub(crate) fn all(&self) -> At<'_> {
        At::start(&self.mem)
    }

    /// Key `i` (the caller checks `i < count()`; launches check the range again).
    pub(crate) fn key(&self, i: u32) -> At<'_> {
        At {
            mem: &self.mem,
            off: abi::AES_KEY_BYTES * i as usize,
        }
    }
}

/// The fused kernels' warp-strided table of powers of H, in device memory.
#[derive(Debug)]
pub(crate) struct FusedPowers(Arc<DeviceMem>);

impl FusedPowers {
    /// The table of `key`'s H, computed on the host (the copy there is wiped) and uploaded.
    pub(crate) fn new(gpu: &Arc<Gpu>, key: &KeyMaterial) -> Result<FusedPowers, Error> {
        let table = table_bytes(&strided_table(
            &key.hash_key(),
            abi::FUSED_THREADS,
            abi::FUSED_WARP_SPAN,
            abi::FUSED_POW_COUNT,
        ));
        let mem = DeviceMem::new(gpu, table.len())?;
        mem.upload(0, &table)?;
        Ok(FusedPowers(mem))
    }

    pub(crate) fn at(&self) -> At<'_> {
        At::start(&self.0)
    }
}

/// The GHASH-only kernels' table of powers of H (benchmark only).
#[cfg(feature = "bench")]
pub(crate) fn ghash_powers(gpu: &Arc<Gpu>, key: &KeyMaterial) -> Result<Arc<DeviceMem>, Error> {
    let table = table_bytes(&strided_table(
        &key.hash_key(),
        abi::GHASH_THREADS,
        abi::GHASH_WARP_SPAN,
        abi::GHASH_POW_COUNT,
    ));
    let mem = DeviceMem::new(gpu, table.len())?;
    mem.upload(0, &table)?;
    Ok(mem)
}

/// Each key's powers of H (`GcmxKeyPowers[n]`: Q_1..Q_128 and Q_(2^i)), computed on the device from the
/// expanded keys (`gcmx_key_powers`); what the device-batch kernels read.
#[derive(Debug)]
pub(crate) struct KeyPowers(Arc<DeviceMem>);

impl KeyPowers {
    /// Run `gcmx_key_powers` over `keys`.
    pub(crate) fn new(gpu: &Arc<Gpu>, keys: &DeviceKeys) -> Result<KeyPowers, Error> {
        let mem = DeviceMem::new(gpu, abi::KEY_POWERS_BYTES * keys.count() as usize)?;
        if keys.count() > 0 {
            gpu.with_lane(|lane| {
                lane.launch(Launch::KeyPowers {
                    keys: keys.all(),
                    key_powers: At::start(&mem),
                    nkeys: keys.count(),
                })
            })?;
        }
        Ok(KeyPowers(mem))
    }

    pub(crate) fn at(&self) -> At<'_> {
        At::start(&self.0)
    }
}

/// A set of device keys with their powers, as a device-batch launch takes them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeySet<'a> {
    pub(crate) keys: At<'a>,
    pub(crate) powers: At<'a>,
    pub(crate) count: u32,
    /// Rounds of key 0 (the one-key kernels).
    pub(crate) nr0: u32,
}

/// Entries `Q_e(i)` of a warp-strided power table (`gcmx_core::backend::HashKey::power`), wiped on drop.
fn strided_table(hk: &HashKey, threads: u32, warp_span: u64, count: u32) -> Zeroizing<Vec<u128>> {
    Zeroizing::new(
        (0..count)
            .map(|i| hk.power(abi::strided_pow_exponent(threads, warp_span, i)))
            .collect(),
    )
}

/// The `GcmxU128[]` bytes of `values` (lo then hi, little-endian words), wiped on drop.
fn table_bytes(values: &[u128]) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(16 * values.len()));
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_tables_hold_the_documented_powers() {
        let km = KeyMaterial::new(&[0x42; 32]).unwrap();
        let hk = km.hash_key();
        let t = strided_table(
            &hk,
            abi::FUSED_THREADS,
            abi::FUSED_WARP_SPAN,
            abi::FUSED_POW_COUNT,
        );
        assert_eq!(t.len(), abi::FUSED_POW_COUNT as usize);
        // stride entries Q_32, Q_64, Q_96, Q_128 by repeated multiplication
        let mut q = hk.h_prime();
        let mut pw = vec![0u128; 129];
        pw[1] = q;
        for slot in pw.iter_mut().skip(2) {
            q = gcmx_core::backend::dot(q, hk.h_prime());
            *slot = q;
        }
        assert_eq!(&t[..4], &[pw[32], pw[64], pw[96], pw[128]]);
        // per-thread entries: thread t = 32w + l multiplies by h^((W-1-w)*WARP_SPAN + 32 - l)
        let w_count = u64::from(abi::FUSED_THREADS / 32);
        for t_idx in 0..abi::FUSED_THREADS {
            let (w, l) = (u64::from(t_idx / 32), u64::from(t_idx % 32));
            let e = (w_count - 1 - w) * abi::FUSED_WARP_SPAN + 32 - l;
            assert_eq!(
                t[(abi::POW_THREAD_BASE + t_idx) as usize],
                hk.power(e),
                "thread {t_idx}"
            );
        }
        // the last thread of the last warp multiplies by h^1 = H'
        assert_eq!(*t.last().unwrap(), hk.h_prime());
        let g = strided_table(
            &hk,
            abi::GHASH_THREADS,
            abi::GHASH_WARP_SPAN,
            abi::GHASH_POW_COUNT,
        );
        assert_eq!(
            g[abi::POW_THREAD_BASE as usize],
            hk.power(7 * abi::GHASH_WARP_SPAN + 32)
        );
    }

    #[test]
    fn table_bytes_are_lo_then_hi_little_endian() {
        let v = [0x0011_2233_4455_6677_8899_aabb_ccdd_eeffu128, 1];
        let b = table_bytes(&v);
        assert_eq!(&b[..8], &0x8899_aabb_ccdd_eeffu64.to_le_bytes());
        assert_eq!(&b[8..16], &0x0011_2233_4455_6677u64.to_le_bytes());
        assert_eq!(&b[16..], &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    }
}
