//! Device-resident work: the public message table ([`DeviceMessage`]), the buffers of a batch
//! ([`DeviceBatch`]), one message ([`DeviceJob`]), the verdicts ([`Verdict`]), and how they become one
//! launch of the device-batch kernels (`cuda/gcm_dbatch.cu`): on a caller's stream ([`submit`]) or on
//! an internal lane (the host batch path, [`queue_on_lane`]).
//!
//! Layer: above the runtime, the device keys, [`crate::DeviceBuf`] and [`DeviceMemory`]; the host batch
//! path and the keyring use it.

use std::sync::Arc;

use gcmx_core::Error;
use gcmx_core::backend::Direction;

use crate::abi;
use crate::keys::KeySet;
use crate::memory::DeviceMemory;
use crate::pending::{Pending, Queued, Slot};
use crate::runtime::{DbArgs, Gpu, Lane, ParamSlot, Region, Scratch, Stream, queue_dbatch};

/// One message of a device-resident batch: where its data, AAD and nonce are, and its key. A batch's
/// message table is these, 48 bytes each, one after the other (see [`DeviceMessage::table`]); a table
/// written on the device by other code has the same layout: five little-endian `u64` (data offset, data
/// length, AAD offset, AAD length, nonce offset) and two little-endian `u32` (nonce length, key index).
///
/// The kernel checks every message before it touches it: data and AAD offsets must be multiples of 16,
/// every range must lie inside its buffer, lengths within GCM's limits, the nonce at least one byte, the
/// key index below the number of keys. A message that fails gets [`Verdict::Invalid`] and is left alone.
/// Messages should not overlap (overlapping ones give unspecified bytes in the overlap, nothing worse).
///
/// ```
/// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
/// use gcmx::cuda::DeviceMessage;
/// let m = DeviceMessage { data_offset: 1024, data_len: 1000, nonce_offset: 12, nonce_len: 12, ..Default::default() };
/// let table = DeviceMessage::table(&[DeviceMessage::default(), m]);
/// assert_eq!(table.len(), 2 * DeviceMessage::SIZE);
/// assert_eq!(&table[48..56], &1024u64.to_le_bytes());
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceMessage {
    /// Byte offset of the message in the batch's data buffer (a multiple of 16).
    pub data_offset: u64,
    /// Bytes of the message (at most 2^36 - 32).
    pub data_len: u64,
    /// Byte offset of its AAD in the batch's AAD buffer (a multiple of 16).
    pub aad_offset: u64,
    /// Bytes of AAD.
    pub aad_len: u64,
    /// Byte offset of its nonce in the batch's nonce buffer (any).
    pub nonce_offset: u64,
    /// Bytes of nonce (at least 1; 12 is the fast path).
    pub nonce_len: u32,
    /// Index of its key (0 for a `CudaEngine`; a `CudaKeyring` index otherwise).
    pub key: u32,
}

impl DeviceMessage {
    /// Bytes of one entry of a message table.
    pub const SIZE: usize = abi::DEV_MSG_BYTES;

    /// The message table of `msgs`, to upload (e.g. with [`crate::DeviceBuf::from_host`]).
    pub fn table(msgs: &[DeviceMessage]) -> Vec<u8> {
        let mut out = vec![0u8; Self::SIZE * msgs.len()];
        for (m, slot) in msgs.iter().zip(out.chunks_exact_mut(Self::SIZE)) {
            m.abi().encode(slot);
        }
        out
    }

    fn abi(&self) -> abi::GcmxDevMsg {
        abi::GcmxDevMsg {
            data_off: self.data_offset,
            data_len: self.data_len,
            aad_off: self.aad_offset,
            aad_len: self.aad_len,
            nonce_off: self.nonce_offset,
            nonce_len: self.nonce_len,
            key: self.key,
        }
    }
}

/// What a device-resident batch says about each message, one byte per message in its verdict buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// Sealed, or opened with the right tag.
    Ok,
    /// Opened with a wrong tag: the message holds its ciphertext again (gcmx's forgery policy,
    /// applied on the device).
    Refused,
    /// The message's table entry failed the checks (see [`DeviceMessage`]): untouched.
    Invalid,
}

impl Verdict {
    /// The verdict a byte of a verdict buffer holds (`None` for a byte no batch writes).
    ///
    /// ```
    /// # mod gcmx { pub mod cuda { pub use gcmx_cuda::*; } } // as a user of `gcmx` names it
    /// use gcmx::cuda::Verdict;
    /// assert_eq!(Verdict::from_byte(0), Some(Verdict::Ok));
    /// assert_eq!(Verdict::from_byte(1), Some(Verdict::Refused));
    /// assert_eq!(Verdict::from_byte(9), None);
    /// ```
    pub fn from_byte(b: u8) -> Option<Verdict> {
        match b {
            abi::VERDICT_OK => Some(Verdict::Ok),
            abi::VERDICT_REFUSED => Some(Verdict::Refused),
            abi::VERDICT_INVALID => Some(Verdict::Invalid),
            _ => None,
        }
    }
}

/// The buffers of a device-resident batch, all in the memory of the keyring's device: gcmx's
/// [`crate::DeviceBuf`]s, memory of other CUDA libraries ([`crate::RawDeviceSpan`]), or a mix.
///
/// `count` messages are described by the table at the start of `messages` ([`DeviceMessage`]); their bytes
/// are in `data` (transformed in place), their AADs in `aad`, their nonces in `nonces`; message `i`'s tag is
/// bytes `16 i .. 16 i + 16` of `tags` (written when sealing, compared when opening) and its
/// [`Verdict`] byte `i` of `verdicts`. An unused buffer may be empty (`DeviceBuf::new(0, ordinal)`).
///
/// The buffers written (`data`, `tags`, `verdicts`) are borrowed mutably, the others shared; the
/// [`Pending`] of the call holds the borrows until the work is complete. If the work fails on the
/// device, the written `DeviceBuf`s are wiped (or marked lost, see [`crate::DeviceBuf`]).
#[derive(Debug)]
pub struct DeviceBatch<'a> {
    /// The message table (at least `48 count` bytes).
    pub messages: &'a dyn DeviceMemory,
    /// Messages in the table.
    pub count: usize,
    /// Every message's bytes.
    pub data: &'a mut dyn DeviceMemory,
    /// Every message's AAD.
    pub aad: &'a dyn DeviceMemory,
    /// Every message's nonce.
    pub nonces: &'a dyn DeviceMemory,
    /// 16 bytes per message.
    pub tags: &'a mut dyn DeviceMemory,
    /// One byte per message.
    pub verdicts: &'a mut dyn DeviceMemory,
}

/// One message in device memory, for [`crate::CudaKeyring::seal_async`] and
/// [`crate::CudaKeyring::open_async`]: `data` is sealed or opened in place under key `key` (0 for a
/// [`crate::CudaEngine`]); its tag is the first 16 bytes of `tag` (written when sealing; when opening,
/// its first `tag_len` bytes are compared on the device). The nonce and AAD are host bytes, copied at
/// the call (lifetime `'h`); the device memory is borrowed until the work is complete (`'a`).
#[derive(Debug)]
pub struct DeviceJob<'h, 'a> {
    /// Index of the key in the keyring.
    pub key: usize,
    /// Nonce (at least one byte; 12 is the fast path).
    pub nonce: &'h [u8],
    /// Associated data.
    pub aad: &'h [u8],
    /// The message, transformed in place.
    pub data: &'a mut dyn DeviceMemory,
    /// At least 16 bytes: the tag.
    pub tag: &'a mut dyn DeviceMemory,
}

/// Device-resident work of one call.
#[derive(Debug)]
pub(crate) enum Work<'h, 'a> {
    One(DeviceJob<'h, 'a>),
    Batch(DeviceBatch<'a>),
}

impl<'a> Work<'_, 'a> {
    /// The memory the work writes, which the [`Pending`] holds (and gives up on when the work fails).
    fn into_written(self) -> Vec<&'a mut dyn DeviceMemory> {
        match self {
            Work::One(j) => vec![j.data, j.tag],
            Work::Batch(b) => vec![b.data, b.tags, b.verdicts],
        }
    }
}

/// The regions of a batch (a caller's, or the host batch path's).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Regions<'a> {
    pub(crate) msgs: Region<'a>,
    pub(crate) count: usize,
    pub(crate) data: Region<'a>,
    pub(crate) aad: Region<'a>,
    pub(crate) nonces: Region<'a>,
    pub(crate) tags: Region<'a>,
    pub(crate) verdicts: Region<'a>,
}

impl<'a> Regions<'a> {
    pub(crate) fn of_batch(b: &'a DeviceBatch<'_>) -> Regions<'a> {
        Regions {
            msgs: b.messages.region(),
            count: b.count,
            data: b.data.region(),
            aad: b.aad.region(),
            nonces: b.nonces.region(),
            tags: b.tags.region(),
            verdicts: b.verdicts.region(),
        }
    }
}

/// The kernel mode for a direction: sealing, or opening with the tags compared on the device.
pub(crate) fn mode_of(dir: Direction) -> u32 {
    match dir {
        Direction::Seal => abi::DB_SEAL,
        Direction::Open => abi::DB_OPEN,
    }
}

/// Thread blocks worth launching for `count` messages over `data_len` bytes (the runtime clamps to what
/// is resident): one warp per 32 lane-calls (a lane-call is 32 blocks, 512 bytes), four warps per block.
/// One message: its units exactly; several: 512 bytes a lane-call plus two per message (its front unit
/// and E_K(J0)).
pub(crate) fn grid_for(count: usize, data_len: usize) -> u32 {
    let lane_calls = if count == 1 {
        let (k, g0, free) = abi::db_units(data_len as u64);
        32 * k.saturating_sub(1) + u64::from(g0) + u64::from(!free)
    } else {
        (data_len / 512) as u64 + 2 * count as u64
    };
    let warps = lane_calls.div_ceil(32);
    u32::try_from(warps.div_ceil(4)).unwrap_or(u32::MAX).max(1)
}

/// Checks on the caller's side of a batch: the count fits the kernels and the tag length is one GCM allows.
fn check_count(count: usize, dir: Direction, tag_len: usize) -> Result<u32, Error> {
    let n = u32::try_from(count)
        .ok()
        .filter(|&n| n < 1 << 31)
        .ok_or_else(|| {
            Error::InvalidInput(format!("{count} messages: at most 2^31 - 1 per batch"))
        })?;
    if dir == Direction::Open && !gcmx_core::backend::TAG_LENGTHS.contains(&tag_len) {
        return Err(Error::TagLength(tag_len));
    }
    Ok(n)
}

/// The grid of a launch and the scratch it needs.
fn sizing(
    gpu: &Arc<Gpu>,
    keys: &KeySet<'_>,
    n: u32,
    data_len: usize,
    mode: u32,
) -> Result<(u32, usize), Error> {
    let name = kernel_name(keys.count, mode);
    let grid = grid_for(n as usize, data_len).min(gpu.resident_blocks(name, abi::DB_THREADS)?);
    let len = usize::try_from(abi::db_scratch_bytes(n, grid))
        .map_err(|_| Error::InvalidInput("batch too large for this host".into()))?;
    Ok((grid, len))
}

/// A scratch lent by the device's pool for one launch on a caller's stream (given back when dropped:
/// later work on it is ordered after this launch by the fence the launch records on it).
struct Lent {
    gpu: Arc<Gpu>,
    scratch: Option<Scratch>,
}

impl Lent {
    fn take(gpu: &Arc<Gpu>, len: usize) -> Result<Lent, Error> {
        Ok(Lent {
            gpu: gpu.clone(),
            scratch: Some(gpu.take_scratch(len)?),
        })
    }

    fn get(&mut self) -> Result<&mut Scratch, Error> {
        self.scratch
            .as_mut()
            .ok_or_else(|| crate::runtime::internal("device-batch scratch".into()))
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(s) = self.scratch.take() {
            self.gpu.give_scratch(s);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn args<'a>(
    keys: &KeySet<'a>,
    r: &Regions<'a>,
    n: u32,
    mode: u32,
    tag_len: u32,
    flags: u32,
    grid: u32,
    scratch: &'a mut Scratch,
) -> DbArgs<'a> {
    DbArgs {
        msgs: r.msgs,
        nmsgs: n,
        data: r.data,
        aad: r.aad,
        nonces: r.nonces,
        tags: r.tags,
        verdicts: r.verdicts,
        keys: keys.keys,
        key_powers: keys.powers,
        nkeys: keys.count,
        nr: keys.nr0,
        mode,
        tag_len,
        flags,
        grid,
        scratch,
    }
}

/// The kernel a launch of `nkeys` keys in `mode` runs (the same rule as `DbArgs::kernel`).
fn kernel_name(nkeys: u32, mode: u32) -> &'static str {
    match (nkeys == 1, mode == abi::DB_SEAL) {
        (true, true) => "gcmx_dbatch_seal1",
        (true, false) => "gcmx_dbatch_open1",
        (false, true) => "gcmx_dbatch_sealn",
        (false, false) => "gcmx_dbatch_openn",
    }
}

/// Queue `work` on `stream` (same device as the keys) and return at once: the [`Pending`] holds the
/// borrows of what the work writes. When the device fails, the written `DeviceBuf`s are given up on
/// (wiped, or marked lost) before the error is returned.
pub(crate) fn submit<'a>(
    stream: &Stream,
    keys: KeySet<'_>,
    work: Work<'_, 'a>,
    dir: Direction,
    tag_len: usize,
) -> Result<Pending<'a>, Error> {
    let queued = match &work {
        Work::One(j) => queue_single(stream, keys, j, dir, tag_len),
        Work::Batch(b) => queue(stream, keys, Regions::of_batch(b), dir, tag_len),
    };
    match queued {
        Ok(q) => Ok(Pending::new(q, work.into_written())),
        Err(e) => Err(give_up(work, e)),
    }
}

/// `work` could not be queued because of `e`: when the device failed, the `DeviceBuf`s it would have
/// written are given up on (wiped, or marked lost), as when queued work fails; `e`.
pub(crate) fn give_up(work: Work<'_, '_>, e: Error) -> Error {
    if e.is_device_failure() {
        for w in work.into_written() {
            w.failed();
        }
    }
    e
}

/// Queue a batch on `stream` (same device as the keys).
fn queue(
    stream: &Stream,
    keys: KeySet<'_>,
    r: Regions<'_>,
    dir: Direction,
    tag_len: usize,
) -> Result<Queued, Error> {
    let n = check_count(r.count, dir, tag_len)?;
    if n == 0 {
        return Ok((None, None));
    }
    let mode = mode_of(dir);
    let (grid, len) = sizing(stream.gpu(), &keys, n, r.data.len(), mode)?;
    let mut lent = Lent::take(stream.gpu(), len)?;
    let a = args(&keys, &r, n, mode, tag_len as u32, 0, grid, lent.get()?);
    let fence = queue_dbatch(stream, a, None)?;
    Ok((Some(fence), None))
}

/// Queue one message on `stream`: its descriptor, nonce and AAD go into a page-locked parameter slot
/// that the kernel reads in place, and the verdict comes back there (the [`Pending`] reads it).
fn queue_single(
    stream: &Stream,
    keys: KeySet<'_>,
    job: &DeviceJob<'_, '_>,
    dir: Direction,
    tag_len: usize,
) -> Result<Queued, Error> {
    let (nonce, aad, data, tag) = (job.nonce, job.aad, job.data.region(), job.tag.region());
    let tag_len = if dir == Direction::Open { tag_len } else { 16 };
    gcmx_core::backend::check(nonce, aad, data.len(), tag_len)?;
    let key = u32::try_from(job.key)
        .ok()
        .filter(|&k| k < keys.count)
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "key index {} past the last key ({} keys)",
                job.key, keys.count
            ))
        })?;
    if tag.len() < 16 {
        return Err(Error::InvalidInput(
            "the tag buffer must hold 16 bytes".into(),
        ));
    }
    let gpu = stream.gpu().clone();
    let aad_at = (abi::DEV_MSG_BYTES + nonce.len()).div_ceil(16) * 16;
    let v_at = aad_at + aad.len().div_ceil(16) * 16;
    let mut slot = gpu.take_slot(v_at + 16)?;
    {
        let b = slot.bytes()?;
        let m = abi::GcmxDevMsg {
            data_off: 0,
            data_len: data.len() as u64,
            aad_off: 0,
            aad_len: aad.len() as u64,
            nonce_off: 0,
            nonce_len: u32::try_from(nonce.len()).map_err(|_| Error::NonceLength(nonce.len()))?,
            key,
        };
        m.encode(&mut b[..abi::DEV_MSG_BYTES]);
        b[abi::DEV_MSG_BYTES..abi::DEV_MSG_BYTES + nonce.len()].copy_from_slice(nonce);
        b[aad_at..aad_at + aad.len()].copy_from_slice(aad);
        b[v_at] = 0xff;
    }
    let mode = mode_of(dir);
    let (grid, len) = sizing(&gpu, &keys, 1, data.len(), mode)?;
    let mut lent = Lent::take(&gpu, len)?;
    let slot_ref: &ParamSlot = &slot;
    let r = Regions {
        msgs: Region::Slot {
            slot: slot_ref,
            off: 0,
            len: abi::DEV_MSG_BYTES,
        },
        count: 1,
        data,
        aad: Region::Slot {
            slot: slot_ref,
            off: aad_at,
            len: aad.len(),
        },
        nonces: Region::Slot {
            slot: slot_ref,
            off: abi::DEV_MSG_BYTES,
            len: nonce.len(),
        },
        tags: tag,
        verdicts: Region::Slot {
            slot: slot_ref,
            off: v_at,
            len: 1,
        },
    };
    let a = args(&keys, &r, 1, mode, tag_len as u32, 0, grid, lent.get()?);
    let fence = queue_dbatch(stream, a, Some(slot_ref))?;
    // Only an open reports back through the slot (a seal's table entry passed the same checks here).
    // The Pending wipes the slot (nonce, AAD) once the work is done, and reads an open's verdict there.
    let verdict = (dir == Direction::Open).then_some(v_at);
    Ok((Some(fence), Some(Slot { gpu, slot, verdict })))
}

/// Queue a batch on `lane` (of `gpu`) with the caller's own scratch `slot` (grown here when too small:
/// the caller has waited for the lane's earlier work on it). The lane holds the buffers until it waits.
#[allow(clippy::too_many_arguments)]
pub(crate) fn queue_on_lane(
    gpu: &Arc<Gpu>,
    lane: &mut Lane,
    keys: KeySet<'_>,
    r: Regions<'_>,
    mode: u32,
    tag_len: usize,
    flags: u32,
    slot: &mut Option<Scratch>,
) -> Result<(), Error> {
    let dir = if mode == abi::DB_SEAL {
        Direction::Seal
    } else {
        Direction::Open
    };
    let n = check_count(
        r.count,
        dir,
        if mode == abi::DB_OPEN { tag_len } else { 16 },
    )?;
    if n == 0 {
        return Ok(());
    }
    let (grid, len) = sizing(gpu, &keys, n, r.data.len(), mode)?;
    if slot.as_ref().is_none_or(|s| s.len() < len) {
        *slot = None;
        *slot = Some(gpu.take_scratch(len)?);
    }
    let scratch = slot
        .as_mut()
        .ok_or_else(|| crate::runtime::internal("device-batch scratch".into()))?;
    lane.launch_dbatch(args(
        &keys,
        &r,
        n,
        mode,
        tag_len as u32,
        flags,
        grid,
        scratch,
    ))
}
