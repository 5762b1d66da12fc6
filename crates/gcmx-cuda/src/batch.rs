//! Host batches: many independent messages in host memory (each with its own key index, J0, AAD and
//! length) through the device-batch kernels (`cuda/gcm_dbatch.cu`, one launch per sub-batch, J0 given,
//! full tags back to the host for gcmx-core's framing to compare).
//!
//! The message bytes reach the GPU in one of two ways:
//! * **in place** (the usual case for buffers carved from one allocation): when every message starts on a
//!   16-byte boundary and the messages lie back to back in a few runs ("spans"), each span is page-locked
//!   once for the call and copied to and from the device by DMA, span by span; the CPU touches no
//!   message byte. Messages already page-locked (inside a [`crate::PinnedRegion`] or a
//!   [`crate::PinnedBuffer`]) go in place in any number of spans of any alignment, each span large
//!   enough to be worth its own copy ([`in_place_spans`]);
//! * **packed**: otherwise each message is copied into page-locked staging at a 16-byte aligned offset
//!   (by up to [`pack_threads`] threads), and back out afterwards.
//!
//! Either way the CPU writes one 48-byte descriptor, J0 and (once per distinct AAD slice) the AAD per
//! message, and hands 16 tag bytes back to the caller's [`Batch`]. The batch path reads the caller's
//! messages where they are (through [`Batch`]): it makes no per-message copy of them; besides the lane
//! staging (kept between calls, sized by a sub-batch) a call allocates only its list of spans (in
//! place: at most one per eight messages, or per 64 KiB in page-locked memory) and of sub-batches. Sub-batches of at most [`BATCH_BYTES`] and [`BATCH_MSGS`]
//! alternate between two lanes, so that the host prepares one while the other is on the GPU, and the host
//! sleeps (rather than spins) while it waits.
//!
//! Wiped after every sub-batch: the device copies of the descriptors, J0s and AADs (queued memsets; the
//! kernel zeroes J0 in its own scratch), of the tags and verdicts, and the host staging of J0s and tags
//! (J0s go from the caller's batch straight into that staging, tags from it straight to the batch);
//! after an open also the device copy of the data and the packed staging. After a failure nothing of the
//! batch is kept: the lanes and device buffers are released, each wiped as it is freed.
//!
//! Layer: above the device-batch launches.

use std::sync::{Arc, Mutex, MutexGuard};

use gcmx_core::backend::{Direction, Error};

use crate::abi;
use crate::dbatch::{self, Regions};
use crate::keys::KeySet;
use crate::runtime::{
    At, DeviceMem, DirectIo, Gpu, Lane, Region, Scratch, Span, direct_io_spans, extend_spans,
    is_pinned,
};

/// Most message bytes (after 16-byte padding of each) per sub-batch.
pub(crate) const BATCH_BYTES: usize = 64 << 20;
/// Most messages per sub-batch.
pub(crate) const BATCH_MSGS: usize = 1 << 17;
/// Below this many message bytes the call packs rather than page-locking the caller's memory.
const IN_PLACE_MIN: usize = 1 << 20;
/// Bytes per span, on average, from which messages in page-locked memory go in place in many spans
/// ([`in_place_spans`]): one copy per span of at least this costs less than packing it.
const PINNED_SPAN_MIN: usize = 64 << 10;
/// Lane staging buffers: packed message data, and [descriptors | J0s | AADs | tags | verdicts].
const STAGE_DATA: usize = 0;
const STAGE_META: usize = 1;

/// One message of a [`Batch`]: its buffer, transformed in place.
pub(crate) trait Msg: Send {
    /// The buffer's length.
    fn len(&self) -> usize;
    /// The buffer.
    fn buf(&mut self) -> &mut [u8];
}

/// A caller's batch as the batch path reads and writes it, in place: its messages in order and, per
/// message `i < count()`, the key index, J0, AAD and where the full tag goes.
pub(crate) trait Batch {
    /// The caller's message type.
    type Msg: Msg;
    /// Number of messages.
    fn count(&self) -> usize;
    /// Length of message `i`.
    fn len(&self, i: usize) -> usize;
    /// Key index of message `i` (checked by [`run`]).
    fn key(&self, i: usize) -> u32;
    /// Write the J0 of message `i` to `out` (page-locked staging that [`run`] wipes).
    fn j0(&self, i: usize, out: &mut [u8; 16]) -> Result<(), Error>;
    /// AAD of message `i`.
    fn aad(&self, i: usize) -> &[u8];
    /// The messages, for their buffers (only ever called while no transfer is in flight on them).
    fn msgs(&mut self) -> &mut [Self::Msg];
    /// Take the full tag of message `i`: computed when sealing, expected when opening.
    fn set_tag(&mut self, i: usize, tag: &[u8; 16]);
    /// After a failure: zero every buffer and whatever `set_tag` wrote.
    fn wipe_all(&mut self);
}

/// The device buffers of one lane, kept between calls.
#[derive(Default)]
struct Bufs {
    data: Option<Arc<DeviceMem>>,
    meta: Option<Arc<DeviceMem>>,
    out: Option<Arc<DeviceMem>>,
    scratch: Option<Scratch>,
}

/// Two lanes and their buffers per device.
#[derive(Default)]
pub(crate) struct BatchState {
    lanes: Vec<Lane>,
    bufs: [Bufs; 2],
}

/// A piece of a span that a sub-batch moves: span, offset in it, bytes, offset in the device buffer.
#[derive(Clone, Copy, Debug)]
struct Piece {
    span: usize,
    off: usize,
    len: usize,
    dev: usize,
}

/// Where the next message lies among the spans (in-place mode): messages are visited in order, so the
/// span and the offset in it follow from the previous message's.
#[derive(Clone, Copy, Debug, Default)]
struct Cursor {
    span: usize,
    off: usize,
}

impl Cursor {
    /// The span and offset of message `i` (`len` bytes), and advance past it. `None` for an empty
    /// message outside every span.
    fn next(&mut self, spans: &[Span], i: usize, len: usize) -> Option<(usize, usize)> {
        while spans
            .get(self.span)
            .is_some_and(|sp| i >= sp.first + sp.count)
        {
            self.span += 1;
            self.off = 0;
        }
        let sp = spans.get(self.span)?;
        if i < sp.first {
            return None;
        }
        let at = (self.span, self.off);
        self.off += len;
        Some(at)
    }
}

/// The AADs of a sub-batch in staging: the same AAD slice as the previous message (a common case: one
/// header for all) is staged once; empty AADs take no room and no copy.
#[derive(Default)]
struct AadLayout {
    last: Option<(*const u8, usize, usize)>,
    total: usize,
}

impl AadLayout {
    /// The staging offset of `aad`, and whether it is to be copied there.
    fn place(&mut self, aad: &[u8]) -> (usize, bool) {
        let key = (aad.as_ptr(), aad.len());
        match self.last {
            _ if aad.is_empty() => (0, false),
            Some((p, l, off)) if (p, l) == key => (off, false),
            _ => {
                let off = self.total;
                self.last = Some((key.0, key.1, off));
                self.total += round16(aad.len());
                (off, true)
            }
        }
    }
}

/// A sub-batch queued on a lane.
struct Sub {
    start: usize,
    end: usize,
    data_total: usize,
    /// Staging offsets of the J0s, the tags and the verdicts.
    j0_at: usize,
    tags_at: usize,
    ver_at: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn round16(n: usize) -> usize {
    n.div_ceil(16) * 16
}

fn round256(n: usize) -> usize {
    n.div_ceil(256) * 256
}

/// Zero `b` in bulk (memset speed), in a way the compiler cannot drop: the buffer is handed to
/// `black_box` afterwards, as if it were read.
pub(crate) fn wipe(b: &mut [u8]) {
    b.fill(0);
    std::hint::black_box(&b);
}

/// A device buffer of at least `n` bytes in `slot` (grown only: buffers are kept between calls).
fn ensure(
    gpu: &Arc<Gpu>,
    slot: &mut Option<Arc<DeviceMem>>,
    n: usize,
) -> Result<Arc<DeviceMem>, Error> {
    if slot.as_ref().is_none_or(|d| d.len() < n) {
        *slot = None;
        *slot = Some(DeviceMem::new(gpu, n.max(256))?);
    }
    slot.clone()
        .ok_or_else(|| crate::runtime::internal("batch buffer".into()))
}

/// The lanes of a call: the state's own (packed mode) or the in-place transfers' (which hold them).
enum Io<'x, 'y> {
    Packed(&'x mut [Lane]),
    InPlace(&'x mut DirectIo<'y>, &'x [Span]),
}

impl Io<'_, '_> {
    fn lane(&mut self, i: usize) -> Result<&mut Lane, Error> {
        match self {
            Io::Packed(l) => {
                let n = l.len();
                l.get_mut(i)
                    .ok_or_else(|| crate::runtime::internal(format!("lane {i} of {n}")))
            }
            Io::InPlace(io, _) => io.lane(i),
        }
    }

    fn packed(&self) -> bool {
        matches!(self, Io::Packed(_))
    }
}

/// Seal or open every message of `batch` with its key of `keys` (checked here: `Error::InvalidInput`
/// past the end); hands every message's full tag to the batch. On an error after the checks every
/// buffer and tag is wiped ([`Batch::wipe_all`]).
pub(crate) fn run<B: Batch>(
    gpu: &Arc<Gpu>,
    keys: KeySet<'_>,
    batch: &mut B,
    dir: Direction,
) -> Result<(), Error> {
    let n = batch.count();
    for i in 0..n {
        gcmx_core::backend::check_lengths(batch.aad(i).len(), batch.len(i))?;
        let key = batch.key(i);
        if key >= keys.count {
            return Err(Error::InvalidInput(format!(
                "batch job {i}: key index {key} past the last key ({} keys)",
                keys.count
            )));
        }
    }
    if n == 0 {
        return Ok(());
    }
    let r = run_checked(gpu, keys, batch, dir);
    if r.is_err() {
        batch.wipe_all();
    }
    r
}

fn run_checked<B: Batch>(
    gpu: &Arc<Gpu>,
    keys: KeySet<'_>,
    batch: &mut B,
    dir: Direction,
) -> Result<(), Error> {
    let n = batch.count();
    let cuts = cut(n, |i| batch.len(i));
    let state = gpu.state::<BatchState>();
    let mut st = lock(&state);
    while st.lanes.len() < 2 {
        let mut l = Lane::new(gpu)?;
        l.set_sleepy(true);
        st.lanes.push(l);
    }
    let BatchState { lanes, bufs: dev } = &mut *st;
    let total: usize = (0..n).map(|i| batch.len(i)).sum();
    let spans = if total >= IN_PLACE_MIN {
        in_place_spans(batch.msgs(), total, is_pinned)
    } else {
        None
    };
    let mut r = None;
    if let Some(spans) = spans {
        // SAFETY: the spans are the buffers of `batch`'s messages, which this function borrows
        // exclusively (`&mut B`) until it returns. In place, the pipeline reads only the batch's
        // lengths, keys, J0s and AADs and hands it tags (`Batch::set_tag`); it takes the buffers
        // (`Batch::msgs`) only in packed mode (`Io::Packed`), so nothing but the transfers touches the
        // spans until `direct_io_spans` has waited for them.
        r = unsafe {
            direct_io_spans(gpu, lanes, &spans, |io| {
                let mut io = Io::InPlace(io, &spans);
                pipeline(gpu, &mut io, dev, keys, batch, &cuts, dir)
            })
        };
    }
    let r = match r {
        Some(r) => r,
        None => {
            let mut io = Io::Packed(lanes);
            pipeline(gpu, &mut io, dev, keys, batch, &cuts, dir)
        }
    };
    if r.is_err() {
        // Nothing of a failed batch is kept: the lanes (after waiting) and the device buffers are
        // released, each wiped as it is freed.
        *st = BatchState::default();
        return r;
    }
    // After an open: the device's data buffers. The packed staging's plaintext was wiped by each
    // sub-batch's `finish` as it was copied out (every byte of staging that held plaintext).
    let mut wiped = Ok(());
    if dir == Direction::Open {
        for (lane, b) in lanes.iter_mut().zip(dev.iter()) {
            let w = (|| {
                if let Some(m) = &b.data {
                    lane.memset(At::start(m), m.len())?;
                }
                lane.wait()
            })();
            if let Err(e) = w {
                wiped = Err(e);
            }
        }
    }
    if wiped.is_err() {
        *st = BatchState::default();
    }
    wiped
}

/// The runs of messages ("spans") of a batch that is worth moving in place, or `None` (pack it).
///
/// Each span is one DMA range and lands at a 256-byte aligned device offset, so only the messages
/// after a span's first need to lie at a 16-byte offset from its start. Memory that the call must
/// page-lock itself pays a registration per span: it goes in place only in few spans (at most one
/// per eight messages) that start 16-byte aligned, as buffers carved from one allocation are. Memory
/// inside a live [`crate::PinnedRegion`] or [`crate::PinnedBuffer`] costs no registration: any spans
/// do, if they carry [`PINNED_SPAN_MIN`] bytes each on average (each is its own copy). Given up at
/// the first span past the limit.
fn in_place_spans<M: Msg>(
    msgs: &mut [M],
    total: usize,
    pinned: impl Fn(*const u8, usize) -> bool,
) -> Option<Vec<Span>> {
    let n = msgs.len();
    let few = (n / 8).max(1);
    let most = few.max(total / PINNED_SPAN_MIN);
    let mut spans: Vec<Span> = Vec::new();
    for (i, m) in msgs.iter_mut().enumerate() {
        let b = m.buf();
        let at = b.as_ptr() as usize;
        extend_spans(&mut spans, i, b);
        if spans.len() > most {
            return None;
        }
        if let Some(sp) = spans.last()
            && !b.is_empty()
            && !at.wrapping_sub(sp.start as usize).is_multiple_of(16)
        {
            return None;
        }
    }
    let registered_per_call = spans.len() <= few
        && spans
            .iter()
            .all(|sp| (sp.start as usize).is_multiple_of(16));
    (registered_per_call || spans.iter().all(|sp| pinned(sp.start, sp.len))).then_some(spans)
}

/// Sub-batches of `n` messages of lengths `len(i)`: consecutive messages up to [`BATCH_BYTES`] and
/// [`BATCH_MSGS`] (at least one message each).
fn cut(n: usize, len: impl Fn(usize) -> usize) -> Vec<(usize, usize)> {
    let mut cuts = Vec::new();
    let mut start = 0usize;
    while start < n {
        let (mut end, mut bytes) = (start, 0usize);
        while end < n && end - start < BATCH_MSGS {
            let b = round16(len(end));
            if end > start && bytes + b > BATCH_BYTES {
                break;
            }
            bytes += b;
            end += 1;
        }
        cuts.push((start, end));
        start = end;
    }
    cuts
}

/// Queue every sub-batch, alternating lanes; finish each one before its lane is reused.
#[allow(clippy::too_many_arguments)]
fn pipeline<B: Batch>(
    gpu: &Arc<Gpu>,
    io: &mut Io<'_, '_>,
    dev: &mut [Bufs; 2],
    keys: KeySet<'_>,
    batch: &mut B,
    cuts: &[(usize, usize)],
    dir: Direction,
) -> Result<(), Error> {
    let mut flight: [Option<Sub>; 2] = [None, None];
    // In place: where the next message lies, and the pieces of spans of a sub-batch (reused).
    let mut cursor = Cursor::default();
    let mut pieces: Vec<Piece> = Vec::new();
    for (k, &(start, end)) in cuts.iter().enumerate() {
        let s = k % 2;
        if let Some(f) = flight[s].take() {
            let packed = io.packed();
            finish(io.lane(s)?, f, batch, packed, dir)?;
        }
        flight[s] = Some(queue(
            gpu,
            io,
            s,
            &mut dev[s],
            keys,
            batch,
            (start, end),
            &mut cursor,
            &mut pieces,
            dir,
        )?);
    }
    for s in [cuts.len() % 2, (cuts.len() + 1) % 2] {
        if let Some(f) = flight[s].take() {
            let packed = io.packed();
            finish(io.lane(s)?, f, batch, packed, dir)?;
        }
    }
    Ok(())
}

/// Describe, stage and upload messages `start..end` on lane `s`, and queue its launch, downloads and
/// wipes.
#[allow(clippy::too_many_arguments)]
fn queue<B: Batch>(
    gpu: &Arc<Gpu>,
    io: &mut Io<'_, '_>,
    s: usize,
    dev: &mut Bufs,
    keys: KeySet<'_>,
    batch: &mut B,
    (start, end): (usize, usize),
    cursor: &mut Cursor,
    pieces: &mut Vec<Piece>,
    dir: Direction,
) -> Result<Sub, Error> {
    let n = end - start;
    // Staging: [descriptors 48 n | J0s 16 n | AADs | tags 16 n | verdicts n].
    let j0_at = abi::DEV_MSG_BYTES * n;
    let aad_at = j0_at + 16 * n;
    let aad_total = {
        let mut a = AadLayout::default();
        for i in start..end {
            a.place(batch.aad(i));
        }
        a.total
    };
    let tags_at = aad_at + aad_total;
    let ver_at = tags_at + 16 * n;
    let meta_len = ver_at + n;
    io.lane(s)?.reserve_host(STAGE_META, meta_len)?;
    // Data layout: packed at 16-byte aligned offsets, or the pieces of spans at 256-byte aligned ones;
    // each message's descriptor, J0 and AAD go to the staging as it is placed.
    pieces.clear();
    let mut data_total = 0usize;
    {
        let spans: &[Span] = match io {
            Io::InPlace(_, spans) => spans,
            Io::Packed(_) => &[],
        };
        let packed = io.packed();
        let st = io.lane(s)?.host(STAGE_META)?;
        let (descs, rest) = st.split_at_mut(j0_at);
        let (j0s, rest) = rest.split_at_mut(16 * n);
        let aads = &mut rest[..aad_total];
        let (j0s, _) = j0s.as_chunks_mut::<16>();
        let mut aad_layout = AadLayout::default();
        for (k, (i, j0)) in (start..end).zip(j0s.iter_mut()).enumerate() {
            let len = batch.len(i);
            let data_off = if packed {
                let d = data_total;
                data_total += round16(len);
                d
            } else {
                let at = cursor.next(spans, i, len);
                match (pieces.last_mut(), at) {
                    (_, None) => 0,
                    (Some(p), _) if len == 0 => p.dev,
                    (Some(p), Some((span, off))) if p.span == span && p.off + p.len == off => {
                        let d = p.dev + p.len;
                        p.len += len;
                        data_total = p.dev + p.len;
                        d
                    }
                    (_, Some(_)) if len == 0 => 0,
                    (_, Some((span, off))) => {
                        let d = round256(data_total);
                        pieces.push(Piece {
                            span,
                            off,
                            len,
                            dev: d,
                        });
                        data_total = d + len;
                        d
                    }
                }
            };
            let aad = batch.aad(i);
            let (aad_off, copy) = aad_layout.place(aad);
            if copy {
                let a = &mut aads[aad_off..aad_off + round16(aad.len())];
                a[..aad.len()].copy_from_slice(aad);
                a[aad.len()..].fill(0);
            }
            abi::GcmxDevMsg {
                data_off: data_off as u64,
                data_len: len as u64,
                aad_off: aad_off as u64,
                aad_len: aad.len() as u64,
                nonce_off: 16 * k as u64,
                nonce_len: 16,
                key: batch.key(i),
            }
            .encode(&mut descs[abi::DEV_MSG_BYTES * k..abi::DEV_MSG_BYTES * (k + 1)]);
            batch.j0(i, j0)?;
        }
    }
    if io.packed() {
        let lane = io.lane(s)?;
        lane.reserve_host(STAGE_DATA, data_total.max(16))?;
        let stage = lane.host(STAGE_DATA)?;
        par_each(
            &mut batch.msgs()[start..end],
            &mut stage[..data_total],
            pack_threads(data_total),
            |m, r| {
                let b = m.buf();
                r[..b.len()].copy_from_slice(b);
            },
        );
    }
    let data = ensure(gpu, &mut dev.data, data_total)?;
    let meta = ensure(gpu, &mut dev.meta, tags_at)?;
    let out = ensure(gpu, &mut dev.out, 17 * n)?;
    let lane = io.lane(s)?;
    lane.upload(STAGE_META, 0, At::start(&meta), tags_at)?;
    match io {
        Io::Packed(_) => io
            .lane(s)?
            .upload(STAGE_DATA, 0, At::start(&data), data_total)?,
        Io::InPlace(dio, _) => {
            for p in pieces.iter() {
                dio.upload_span(
                    s,
                    p.span,
                    p.off,
                    At {
                        mem: &data,
                        off: p.dev,
                    },
                    p.len,
                )?;
            }
        }
    }
    let at = |off: usize, len: usize| Region::Mem {
        at: At { mem: &meta, off },
        len,
    };
    let r = Regions {
        msgs: at(0, j0_at),
        count: n,
        data: Region::Mem {
            at: At::start(&data),
            len: data_total,
        },
        aad: at(aad_at, aad_total),
        nonces: at(j0_at, 16 * n),
        tags: Region::Mem {
            at: At::start(&out),
            len: 16 * n,
        },
        verdicts: Region::Mem {
            at: At {
                mem: &out,
                off: 16 * n,
            },
            len: n,
        },
    };
    let mode = match dir {
        Direction::Seal => abi::DB_SEAL,
        Direction::Open => abi::DB_EXPECT,
    };
    let lane = io.lane(s)?;
    dbatch::queue_on_lane(
        gpu,
        lane,
        keys,
        r,
        mode,
        16,
        abi::DB_J0_GIVEN,
        &mut dev.scratch,
    )?;
    lane.download(At::start(&out), STAGE_META, tags_at, 17 * n)?;
    // Queued after that copy: the device's tags (the expected ones, when opening) and verdicts.
    lane.memset(At::start(&out), 17 * n)?;
    match io {
        Io::Packed(_) => io
            .lane(s)?
            .download(At::start(&data), STAGE_DATA, 0, data_total)?,
        Io::InPlace(dio, _) => {
            for p in pieces.iter() {
                dio.download_span(
                    s,
                    p.span,
                    At {
                        mem: &data,
                        off: p.dev,
                    },
                    p.off,
                    p.len,
                )?;
            }
        }
    }
    // Queued after the kernel: the uploaded J0s.
    io.lane(s)?.memset(
        At {
            mem: &meta,
            off: j0_at,
        },
        16 * n,
    )?;
    Ok(Sub {
        start,
        end,
        data_total,
        j0_at,
        tags_at,
        ver_at,
    })
}

/// Wait for a sub-batch, then hand its tags to the batch (and, packed, copy its data out) and wipe the
/// staging's J0s and tags.
fn finish<B: Batch>(
    lane: &mut Lane,
    f: Sub,
    batch: &mut B,
    packed: bool,
    dir: Direction,
) -> Result<(), Error> {
    let n = f.end - f.start;
    {
        let meta = lane.host(STAGE_META)?;
        let bad = meta[f.ver_at..f.ver_at + n]
            .iter()
            .position(|&v| v != abi::VERDICT_OK);
        let (tags, _) = meta[f.tags_at..f.tags_at + 16 * n].as_chunks::<16>();
        for (i, t) in (f.start..f.end).zip(tags) {
            batch.set_tag(i, t);
        }
        wipe(&mut meta[f.j0_at..f.j0_at + 16 * n]);
        wipe(&mut meta[f.tags_at..f.tags_at + 16 * n]);
        if let Some(i) = bad {
            return Err(crate::runtime::internal(format!(
                "batch message {}: the kernel refused a descriptor gcmx built",
                f.start + i
            )));
        }
    }
    if packed {
        let stage = lane.host(STAGE_DATA)?;
        par_each(
            &mut batch.msgs()[f.start..f.end],
            &mut stage[..f.data_total],
            pack_threads(f.data_total),
            |m, r| {
                let b = m.buf();
                let len = b.len();
                b.copy_from_slice(&r[..len]);
                // An open's plaintext (and any padding after it) is wiped where it was copied
                // out, by the same thread, while it is still in that core's cache.
                if dir == Direction::Open {
                    wipe(r);
                }
            },
        );
    }
    Ok(())
}

/// Run `f(msg, region)` for every message of `msgs` and its region of `stage`, where the messages lie
/// back to back, each at a 16-byte aligned offset (`stage` holds at least that much), on up to
/// `threads` scoped OS threads (contiguous ranges of messages).
///
/// Not rayon: the callers hold the device's batch lock, and a rayon worker that waits inside a parallel
/// loop may steal an unrelated task (say, another batch from the caller's own `par_iter`) that then
/// blocks on the same lock: a deadlock. Scoped threads only ever run this closure.
fn par_each<M: Msg>(
    msgs: &mut [M],
    stage: &mut [u8],
    threads: usize,
    f: impl Fn(&mut M, &mut [u8]) + Sync,
) {
    fn walk<M: Msg>(msgs: &mut [M], mut stage: &mut [u8], f: &impl Fn(&mut M, &mut [u8])) {
        for m in msgs {
            let (r, rest) = std::mem::take(&mut stage).split_at_mut(round16(m.len()));
            f(m, r);
            stage = rest;
        }
    }
    let threads = threads.clamp(1, msgs.len().max(1));
    if threads == 1 {
        walk(msgs, stage, &f);
        return;
    }
    let per = msgs.len().div_ceil(threads);
    std::thread::scope(|s| {
        let mut rest = stage;
        for chunk in msgs.chunks_mut(per) {
            let bytes: usize = chunk.iter().map(|m| round16(m.len())).sum();
            let (mine, r) = std::mem::take(&mut rest).split_at_mut(bytes);
            rest = r;
            let f = &f;
            s.spawn(move || walk(chunk, mine, f));
        }
    });
}

/// Threads worth using to pack `bytes` bytes: one per 4 MiB, at most the hardware threads (and 16).
fn pack_threads(bytes: usize) -> usize {
    (bytes >> 22).clamp(1, hardware_threads().min(16))
}

/// The hardware threads this process may use, asked once: the system's count reads its limits
/// (the cgroup's files) at every call, tens of microseconds that every batch would pay.
pub(crate) fn hardware_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Msg for (usize, Vec<u8>) {
        fn len(&self) -> usize {
            self.1.len()
        }
        fn buf(&mut self) -> &mut [u8] {
            &mut self.1
        }
    }

    #[test]
    fn par_each_gives_every_message_its_region_once() {
        for threads in [1usize, 2, 3, 7, 64] {
            for n in [0usize, 1, 5, 100, 1001] {
                // Message i: i % 37 bytes of value i as u8; the region's first byte counts visits.
                let mut msgs: Vec<(usize, Vec<u8>)> =
                    (0..n).map(|i| (i, vec![i as u8; i % 37])).collect();
                let total: usize = msgs.iter().map(|m| round16(m.1.len())).sum();
                let mut stage = vec![0u8; total + 16];
                par_each(&mut msgs, &mut stage[..total], threads, |m, r| {
                    assert_eq!(r.len(), round16(m.1.len()));
                    let (i, b) = (m.0, m.buf());
                    r[..b.len()].copy_from_slice(b);
                    b.fill(!(i as u8));
                });
                let mut off = 0;
                for (i, m) in msgs.iter().enumerate() {
                    let len = i % 37;
                    assert!(stage[off..off + len].iter().all(|&x| x == i as u8));
                    assert!(
                        m.1.iter().all(|&x| x == !(i as u8)),
                        "threads {threads} n {n}"
                    );
                    off += round16(len);
                }
                assert!(stage[total..].iter().all(|&x| x == 0));
            }
        }
        assert_eq!(pack_threads(0), 1);
    }

    #[test]
    fn sub_batches_cover_the_messages() {
        let lens = [0usize, 5, BATCH_BYTES, 1, BATCH_BYTES - 16, 32, 7];
        let cuts = cut(lens.len(), |i| lens[i]);
        let mut at = 0;
        for &(s, e) in &cuts {
            assert_eq!(s, at);
            assert!(e > s);
            let bytes: usize = lens[s..e].iter().map(|&l| round16(l)).sum();
            assert!(e - s == 1 || bytes <= BATCH_BYTES);
            at = e;
        }
        assert_eq!(at, lens.len());
        let many = cut(BATCH_MSGS + 3, |_| 1);
        assert_eq!(many, [(0, BATCH_MSGS), (BATCH_MSGS, BATCH_MSGS + 3)]);
    }

    impl Msg for &mut [u8] {
        fn len(&self) -> usize {
            <[u8]>::len(self)
        }
        fn buf(&mut self) -> &mut [u8] {
            self
        }
    }

    /// `count` messages of `len` bytes cut from `buf`, from `start`, each `gap` bytes after the one
    /// before.
    fn cut_msgs(
        buf: &mut [u8],
        start: usize,
        len: usize,
        gap: usize,
        count: usize,
    ) -> Vec<&mut [u8]> {
        let mut rest = &mut buf[start..];
        let mut msgs = Vec::new();
        for _ in 0..count {
            let (m, tail) = std::mem::take(&mut rest).split_at_mut(len);
            msgs.push(m);
            rest = &mut tail[gap..];
        }
        msgs
    }

    #[test]
    fn in_place_needs_few_aligned_spans_unless_pinned() {
        const L: usize = 64 << 10;
        let mut buf = vec![0u8; 80 * (L + 32) + 64];
        // A 16-byte aligned base in the buffer.
        let base = (16 - buf.as_ptr() as usize % 16) % 16;
        let yes = |_: *const u8, _: usize| true;
        let no = |_: *const u8, _: usize| false;
        let total = 64 * L;
        // Back to back from an aligned start: one span, in place either way.
        let mut m = cut_msgs(&mut buf, base, L, 0, 64);
        assert_eq!(in_place_spans(&mut m, total, no).map(|s| s.len()), Some(1));
        // Back to back from a start 8 bytes off: in place only where page-locked already.
        let mut m = cut_msgs(&mut buf, base + 8, L, 0, 64);
        assert!(in_place_spans(&mut m, total, no).is_none());
        assert_eq!(in_place_spans(&mut m, total, yes).map(|s| s.len()), Some(1));
        // Each message followed by a 16-byte tag (a stream's window), 8 bytes off: a span each,
        // too many to page-lock per call, in place when page-locked already.
        let mut m = cut_msgs(&mut buf, base + 8, L, 16, 64);
        assert!(in_place_spans(&mut m, total, no).is_none());
        let spans = in_place_spans(&mut m, total, yes).expect("pinned");
        assert_eq!(spans.len(), 64);
        assert!(spans.iter().all(|s| s.count == 1 && s.len == L));
        // Spans too small to be worth a copy each: packed.
        let mut m = cut_msgs(&mut buf, base, 4096, 16, 64);
        assert!(in_place_spans(&mut m, 64 * 4096, yes).is_none());
        // A message in a span at an offset that is not a multiple of 16 from its start: packed, since
        // its device copy would be misaligned.
        let mut m = cut_msgs(&mut buf, base, L + 8, 0, 64);
        assert!(in_place_spans(&mut m, 64 * (L + 8), yes).is_none());
        // Page-locked only in part: packed.
        let mut m = cut_msgs(&mut buf, base, L, 16, 64);
        let first = m[0].as_ptr();
        assert!(in_place_spans(&mut m, total, |p, _| p == first).is_none());
    }

    #[test]
    fn the_cursor_walks_the_spans() {
        let p = core::ptr::null_mut::<u8>();
        let sp = |first, count, len| Span {
            first,
            count,
            len,
            start: p,
        };
        // Messages 0..2 in span 0 (10 and 6 bytes), 2 empty and outside, 3..6 in span 1 (one empty).
        let spans = [sp(0, 2, 16), sp(3, 3, 9)];
        let lens = [10usize, 6, 0, 4, 0, 5];
        let mut c = Cursor::default();
        let got: Vec<_> = lens
            .iter()
            .enumerate()
            .map(|(i, &l)| c.next(&spans, i, l))
            .collect();
        assert_eq!(
            got,
            [
                Some((0, 0)),
                Some((0, 10)),
                None,
                Some((1, 0)),
                Some((1, 4)),
                Some((1, 4))
            ]
        );
    }

    #[test]
    fn an_aad_slice_repeated_is_staged_once() {
        let (h, other) = (*b"header", *b"other!");
        let mut a = AadLayout::default();
        assert_eq!(a.place(&h), (0, true));
        assert_eq!(a.place(&h), (0, false));
        assert_eq!(a.place(&[]), (0, false));
        assert_eq!(a.place(&other), (16, true));
        assert_eq!(a.place(&h), (32, true));
        assert_eq!(a.total, 48);
    }
}
