//! Every GPU API of gcmx driven through every kind of driver failure at several counts (injected by
//! the stub libcuda): the host pipeline (`gcmx::Gcm` on `Backend::Cuda`), its batches, the
//! device-resident API (`DeviceBuf`, `CudaKeyring::{seal_async, open_async}` and device batches,
//! waited for), the keyring, engine creation and `PinnedRegion`. Without a GPU they run on the stub
//! libcuda's emulated device; on a GPU (the bundle of scripts/gpu-build.sh) the same cases also compare
//! every result with the CPU backend.
//!
//! For each API, a clean run counts the driver calls of each kind it makes; then, for a selection of
//! counts of each kind, the call fails once (and, for some, the context is lost from that call on), and
//! each case checks:
//! * the API returns an error that the injected fault caused (`Error::Device` with it as the source),
//!   or `Ok` with the right result where the fault is absorbed (page-locking refused: the data is staged);
//! * no tag is written for data not fully processed; buffers are left as documented: a failed host
//!   seal or open is zeroed, a wrong tag gives the ciphertext back (zeroed if re-sealing it failed), a
//!   failed batch zeroes every buffer, a failed device call wipes the `DeviceBuf` or marks it lost, a failed
//!   keyring call zeroes every buffer;
//! * while the context is lost, later calls fail the same way;
//! * nothing hangs (a watchdog) and nothing leaks: with the caches released, the emulator's live device
//!   memory, page-locked memory, registrations and streams are what they were, nothing was freed without
//!   a wipe (except when the context is lost: wipes cannot run then), and no invalid driver call was made;
//! * the next call on the same engine works and gives the right result.
//!
//! The tests share the process-wide fault state, so they take turns (a lock).

mod fault_common;

#[path = "support/gcmx.rs"]
mod gcmx;

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fault_common::fault::{self, Mode, Op};
use fault_common::{
    Dev, Rng, bounded, expected_seal, injected, is_injected, same_live, say, stats,
};
use gcmx::{Backend, Gcm, OpenJob, SealJob};
use gcmx_cuda::{
    CudaEngine, CudaKeyring, DeviceBatch, DeviceBuf, DeviceJob, DeviceMessage, Error, KeyedOpenJob,
    KeyedSealJob, PinnedBuffer, PinnedRegion, Stream,
};

/// What an untouched tag holds.
const SENTINEL: u8 = 0xEE;
/// The longest a case may take (the emulator copies real bytes; CI machines are slow and shared).
const CASE_LIMIT: Duration = Duration::from_secs(120);

static TURN: Mutex<()> = Mutex::new(());

fn turn() -> (MutexGuard<'static, ()>, Dev) {
    let g = TURN.lock().unwrap_or_else(|p| p.into_inner());
    (g, fault_common::device())
}

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

fn zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

fn cuda(key: &[u8]) -> Gcm {
    Gcm::with_backend(key, Backend::Cuda).expect("Gcm on Backend::Cuda")
}

/// One API under test.
trait Scenario {
    type State;
    /// The API and its inputs, for the report.
    fn name(&self) -> String;
    /// Inputs and engines, made with no fault armed.
    fn setup(&self, dev: Dev, rng: &mut Rng) -> Self::State;
    /// The call under test.
    fn run(&self, s: &mut Self::State) -> Result<(), Error>;
    /// Make the outputs untouched again (tags back to the sentinel) before the call is repeated.
    fn refresh(&self, _s: &mut Self::State) {}
    /// Whether a successful call leaves plaintext behind in buffers gcmx keeps (it must wipe them).
    fn opens(&self) -> bool {
        false
    }
    /// Device buffers the call may add to its engine for good (made on first use).
    fn kept(&self) -> u64 {
        0
    }
    /// The properties after `run` returned `r`; `fired`: an injected fault struck during it.
    fn check(
        &self,
        dev: Dev,
        s: &mut Self::State,
        r: &Result<(), Error>,
        fired: bool,
    ) -> Result<(), String>;
    /// A new call on the same engine works and gives the right result.
    fn next(&self, dev: Dev, s: &mut Self::State, rng: &mut Rng) -> Result<(), String>;
}

#[derive(Default)]
struct Tally {
    cases: u64,
    errors: u64,
    absorbed: u64,
    failures: Vec<String>,
}

impl Tally {
    fn finish(self, group: &str) {
        say(&format!(
            "fault-injection {group}: {} cases ({} clean errors, {} absorbed), {} failed",
            self.cases,
            self.errors,
            self.absorbed,
            self.failures.len()
        ));
        for f in self.failures.iter().take(30) {
            say(&format!("  FAIL {f}"));
        }
        assert!(
            self.failures.is_empty(),
            "{group}: {} fault cases failed",
            self.failures.len()
        );
    }
}

/// Which of the `n` calls of one kind are failed once, and at which the context is lost.
#[derive(Clone, Copy)]
struct Plan {
    once: fn(u64) -> Vec<u64>,
    lost: fn(u64) -> Vec<u64>,
}

/// All calls of a kind when few, else the first two, the middle and the last two; the context lost at
/// the first and the last.
const FULL: Plan = Plan {
    once: |n| {
        let mut v: Vec<u64> = if n <= 5 {
            (1..=n).collect()
        } else {
            vec![1, 2, n / 2, n - 1, n]
        };
        v.dedup();
        v
    },
    lost: |n| if n > 1 { vec![1, n] } else { vec![1] },
};

/// For the large messages (the emulator copies every byte): the first and the last call of each kind,
/// the context lost at the first. `GCMX_FAULTS_FULL=1` (the GPU bundle sets it) uses [`FULL`].
const LIGHT: Plan = Plan {
    once: |n| if n > 1 { vec![1, n] } else { vec![1] },
    lost: |_| vec![1],
};

fn light() -> Plan {
    if std::env::var_os("GCMX_FAULTS_FULL").is_some() {
        FULL
    } else {
        LIGHT
    }
}

/// Drive `sc` through every kind of fault its clean run reaches, at the counts `plan` picks.
fn drive<S: Scenario>(dev: Dev, sc: &S, rng: &mut Rng, plan: Plan, t: &mut Tally) {
    let name = sc.name();
    // The clean run: count the calls of each kind, from a cold cache as every case starts.
    fault::release_cached();
    let mut s = sc.setup(dev, rng);
    fault::release_cached();
    fault::disarm();
    fault::reset_counts();
    let r = sc.run(&mut s);
    let calls: Vec<(Op, u64)> = Op::ALL.iter().map(|&op| (op, fault::calls(op))).collect();
    if let Err(e) = sc
        .check(dev, &mut s, &r, false)
        .and_then(|()| sc.next(dev, &mut s, rng))
    {
        t.failures.push(format!("{name}: clean run: {e}"));
        return;
    }
    drop(s);
    for (op, n) in calls.into_iter().filter(|&(_, n)| n > 0) {
        let once = (plan.once)(n).into_iter().map(|k| (k, Mode::Once));
        let lost = (plan.lost)(n).into_iter().map(|k| (k, Mode::ContextLost));
        for (nth, mode) in once.chain(lost) {
            let what = format!("{name}: {op} #{nth}/{n} {mode:?}");
            let r = bounded(&what, CASE_LIMIT, || one_case(dev, sc, op, nth, mode, rng));
            t.cases += 1;
            match r {
                Ok(true) => t.errors += 1,
                Ok(false) => {
                    t.absorbed += 1;
                    if std::env::var_os("GCMX_FAULTS_VERBOSE").is_some() {
                        say(&format!("  absorbed: {what}"));
                    }
                }
                Err(e) => t.failures.push(format!("{what}: {e}")),
            }
        }
    }
}

/// One (API, fault, count, mode) case; `Ok(true)` when the API returned the fault's error, `Ok(false)`
/// when it absorbed the fault and still gave the right result.
fn one_case<S: Scenario>(
    dev: Dev,
    sc: &S,
    op: Op,
    nth: u64,
    mode: Mode,
    rng: &mut Rng,
) -> Result<bool, String> {
    fault::release_cached();
    let before = stats();
    let mut s = sc.setup(dev, rng);
    fault::release_cached();
    let ready = stats();
    fault::arm(op, nth, mode);
    let r = sc.run(&mut s);
    let mut later = Vec::new();
    if mode == Mode::ContextLost {
        for _ in 0..2 {
            sc.refresh(&mut s);
            later.push(sc.run(&mut s));
        }
    }
    let fired = fault::disarm() > 0;
    ensure(fired, || "the fault was not reached".into())?;
    let mid = stats();
    for l in &later {
        match l {
            Err(e) if injected(e).is_some_and(|i| i.context_lost()) => {}
            other => return Err(format!("a call after the context was lost: {other:?}")),
        }
    }
    // The state now reflects the last call (with a lost context, one of the failed later calls).
    let r = later.pop().unwrap_or(r);
    // A refused forgery is the right answer, not the fault's error (its re-seal leaves ciphertext).
    let failed = r.as_ref().err().is_some_and(|e| injected(e).is_some());
    if mode == Mode::Once && (failed || (sc.opens() && r.is_ok())) {
        lingering(&ready, &mid, sc.kept())?;
    }
    sc.check(dev, &mut s, &r, fired)?;
    sc.next(dev, &mut s, rng)
        .map_err(|e| format!("next call: {e}"))?;
    drop(s);
    fault::release_cached();
    same_live(&before, &stats(), mode == Mode::ContextLost)?;
    Ok(failed)
}

/// After a failed call, or an open: the buffers gcmx keeps between calls hold nothing but zeros (no
/// plaintext, J0, partial hashes or tags left behind), on the device and in page-locked staging.
/// `kept`: device buffers the call may have added to the engine for good.
fn lingering(
    before: &Option<fault::EmulatorStats>,
    after: &Option<fault::EmulatorStats>,
    kept: u64,
) -> Result<(), String> {
    let (Some(b), Some(a)) = (before, after) else {
        return Ok(());
    };
    ensure(a.nonzero_device <= b.nonzero_device + kept, || {
        format!(
            "device buffers holding data after the call: {} (before it: {})",
            a.nonzero_device, b.nonzero_device
        )
    })?;
    ensure(a.nonzero_host <= b.nonzero_host, || {
        format!(
            "page-locked buffers holding data after the call: {} (before it: {})",
            a.nonzero_host, b.nonzero_host
        )
    })
}

// -------------------------------------------------------------------------------------------------
// Host memory: one message
// -------------------------------------------------------------------------------------------------

struct HostSeal {
    len: usize,
}

struct HostMsg {
    key: Vec<u8>,
    gcm: Gcm,
    nonce: [u8; 12],
    aad: Vec<u8>,
    pt: Vec<u8>,
    buf: Vec<u8>,
    ct: Vec<u8>,
    tag: [u8; 16],
}

impl HostMsg {
    fn new(rng: &mut Rng, len: usize) -> HostMsg {
        let key = rng.bytes(32);
        let gcm = cuda(&key);
        let pt = rng.bytes(len);
        HostMsg {
            key,
            gcm,
            nonce: rng.nonce(),
            aad: rng.bytes(21),
            buf: pt.clone(),
            pt,
            ct: Vec::new(),
            tag: [SENTINEL; 16],
        }
    }

    fn seal(&mut self) -> Result<(), Error> {
        self.gcm
            .encrypt_detached(&self.nonce, &self.aad, &mut self.buf, &mut self.tag)
    }

    /// After a seal that returned `r`.
    fn check_seal(&self, dev: Dev, r: &Result<(), Error>, fired: bool) -> Result<(), String> {
        match r {
            Ok(()) => {
                let (ct, tag) = expected_seal(dev, &self.key, &self.nonce, &self.aad, &self.pt);
                ensure(self.buf == ct, || "Ok, but the ciphertext is wrong".into())?;
                match tag {
                    Some(t) => ensure(self.tag == t, || "Ok, but the tag is wrong".into()),
                    None => ensure(self.tag != [SENTINEL; 16], || "Ok, but no tag".into()),
                }
            }
            Err(e) => {
                ensure(fired, || format!("failed with no fault: {e:?}"))?;
                is_injected(e)?;
                ensure(zero(&self.buf), || {
                    "a failed seal left the buffer not zeroed".into()
                })?;
                ensure(self.tag == [SENTINEL; 16], || {
                    "a failed seal wrote a tag".into()
                })
            }
        }
    }

    /// A fresh message through the same engine: sealed right, and opened back.
    fn round_trip(&mut self, dev: Dev, rng: &mut Rng) -> Result<(), String> {
        self.pt = rng.bytes(self.pt.len());
        self.buf = self.pt.clone();
        self.nonce = rng.nonce();
        self.tag = [SENTINEL; 16];
        let r = self.seal();
        self.check_seal(dev, &r, false)?;
        let r = self
            .gcm
            .decrypt_detached(&self.nonce, &self.aad, &mut self.buf, &self.tag);
        ensure(r.is_ok() && self.buf == self.pt, || {
            format!("open of a fresh seal: {r:?}")
        })
    }
}

impl Scenario for HostSeal {
    type State = HostMsg;
    fn name(&self) -> String {
        format!("Gcm(Cuda) seal {} B", self.len)
    }
    fn setup(&self, _dev: Dev, rng: &mut Rng) -> HostMsg {
        HostMsg::new(rng, self.len)
    }
    fn run(&self, s: &mut HostMsg) -> Result<(), Error> {
        s.seal()
    }
    fn refresh(&self, s: &mut HostMsg) {
        s.tag = [SENTINEL; 16];
    }
    fn check(
        &self,
        dev: Dev,
        s: &mut HostMsg,
        r: &Result<(), Error>,
        fired: bool,
    ) -> Result<(), String> {
        s.check_seal(dev, r, fired)
    }
    fn next(&self, dev: Dev, s: &mut HostMsg, rng: &mut Rng) -> Result<(), String> {
        s.round_trip(dev, rng)
    }
}

struct HostOpen {
    len: usize,
    forged: bool,
}

impl Scenario for HostOpen {
    type State = HostMsg;
    fn name(&self) -> String {
        format!(
            "Gcm(Cuda) open {} B{}",
            self.len,
            if self.forged { ", forged tag" } else { "" }
        )
    }
    fn setup(&self, _dev: Dev, rng: &mut Rng) -> HostMsg {
        let mut m = HostMsg::new(rng, self.len);
        m.seal().expect("seal");
        m.ct = m.buf.clone();
        if self.forged {
            m.tag[3] ^= 0x40;
        }
        m
    }
    fn run(&self, s: &mut HostMsg) -> Result<(), Error> {
        s.gcm.decrypt_detached(&s.nonce, &s.aad, &mut s.buf, &s.tag)
    }
    fn opens(&self) -> bool {
        true
    }
    fn kept(&self) -> u64 {
        // Re-sealing a refused message below 16 MiB runs as a batch, which makes the engine's batch
        // powers of H on first use.
        u64::from(self.forged && self.len < 16 * MIB)
    }
    fn check(
        &self,
        _dev: Dev,
        s: &mut HostMsg,
        r: &Result<(), Error>,
        fired: bool,
    ) -> Result<(), String> {
        match r {
            Ok(()) => ensure(!self.forged && s.buf == s.pt, || {
                "Ok, but forged or wrong plaintext".into()
            }),
            Err(Error::Authentication) => ensure(
                self.forged && (s.buf == s.ct || (fired && zero(&s.buf))),
                || "a refused open left neither the ciphertext nor zeros".into(),
            ),
            Err(e) => {
                ensure(fired, || format!("failed with no fault: {e:?}"))?;
                is_injected(e)?;
                ensure(zero(&s.buf), || {
                    "a failed open left the buffer not zeroed".into()
                })
            }
        }
    }
    fn next(&self, dev: Dev, s: &mut HostMsg, rng: &mut Rng) -> Result<(), String> {
        s.round_trip(dev, rng)
    }
}

/// A seal inside a `PinnedRegion` scope (page-locking for the scope, not for the call).
struct Pinned {
    len: usize,
}

struct PinnedState {
    m: HostMsg,
    ran: bool,
}

impl Scenario for Pinned {
    type State = PinnedState;
    fn name(&self) -> String {
        format!("PinnedRegion + Gcm(Cuda) seal {} B", self.len)
    }
    fn setup(&self, _dev: Dev, rng: &mut Rng) -> PinnedState {
        PinnedState {
            m: HostMsg::new(rng, self.len),
            ran: false,
        }
    }
    fn run(&self, s: &mut PinnedState) -> Result<(), Error> {
        let HostMsg {
            gcm,
            nonce,
            aad,
            buf,
            tag,
            ..
        } = &mut s.m;
        let ran = &mut s.ran;
        PinnedRegion::scope(buf, |region| {
            *ran = true;
            gcm.encrypt_detached(nonce, aad, region, tag)
        })?
    }
    fn refresh(&self, s: &mut PinnedState) {
        s.m.tag = [SENTINEL; 16];
        s.m.buf = s.m.pt.clone();
        s.ran = false;
    }
    fn check(
        &self,
        dev: Dev,
        s: &mut PinnedState,
        r: &Result<(), Error>,
        fired: bool,
    ) -> Result<(), String> {
        if !s.ran {
            // The scope itself failed: the closure did not run and the buffer is untouched.
            let e = r
                .as_ref()
                .err()
                .ok_or("the scope's closure did not run, but Ok")?;
            is_injected(e)?;
            return ensure(s.m.buf == s.m.pt && s.m.tag == [SENTINEL; 16], || {
                "a failed scope touched the buffer or the tag".into()
            });
        }
        s.m.check_seal(dev, r, fired)
    }
    fn next(&self, dev: Dev, s: &mut PinnedState, rng: &mut Rng) -> Result<(), String> {
        s.ran = false;
        s.m.pt = rng.bytes(self.len);
        s.m.buf = s.m.pt.clone();
        s.m.tag = [SENTINEL; 16];
        let r = self.run(s);
        ensure(s.ran, || "the scope did not run".into())?;
        s.m.check_seal(dev, &r, false)
    }
}

// -------------------------------------------------------------------------------------------------
// Host memory: batches through Gcm
// -------------------------------------------------------------------------------------------------

struct HostBatch {
    lens: Vec<usize>,
    open: bool,
    forged: bool,
}

/// Many messages, each with its key: inputs, buffers and tags.
struct Msgs {
    keys: Vec<Vec<u8>>,
    nonces: Vec<[u8; 12]>,
    aads: Vec<Vec<u8>>,
    pts: Vec<Vec<u8>>,
    bufs: Vec<Vec<u8>>,
    cts: Vec<Vec<u8>>,
    tags: Vec<[u8; 16]>,
}

impl Msgs {
    /// Messages of `lens` bytes, message `i` under `keys[i]`.
    fn new(rng: &mut Rng, lens: &[usize], keys: Vec<Vec<u8>>) -> Msgs {
        let pts: Vec<Vec<u8>> = lens.iter().map(|&n| rng.bytes(n)).collect();
        Msgs {
            keys,
            nonces: lens.iter().map(|_| rng.nonce()).collect(),
            aads: (0..lens.len()).map(|i| rng.bytes(i * 7 % 40)).collect(),
            bufs: pts.clone(),
            pts,
            cts: Vec::new(),
            tags: vec![[SENTINEL; 16]; lens.len()],
        }
    }

    /// New plaintexts and nonces, untouched tags.
    fn fresh(&mut self, rng: &mut Rng) {
        for i in 0..self.pts.len() {
            self.pts[i] = rng.bytes(self.pts[i].len());
            self.nonces[i] = rng.nonce();
        }
        self.bufs = self.pts.clone();
        self.untouched_tags();
    }

    fn untouched_tags(&mut self) {
        self.tags = vec![[SENTINEL; 16]; self.pts.len()];
    }

    fn all_zero(&self) -> bool {
        self.bufs.iter().all(|b| zero(b))
    }

    /// After a seal of all of them (`what` names the API) that returned `r`.
    fn check_seal(
        &self,
        dev: Dev,
        r: &Result<(), Error>,
        fired: bool,
        what: &str,
    ) -> Result<(), String> {
        match r {
            Ok(()) => {
                for i in 0..self.pts.len() {
                    let (ct, tag) = expected_seal(
                        dev,
                        &self.keys[i],
                        &self.nonces[i],
                        &self.aads[i],
                        &self.pts[i],
                    );
                    ensure(self.bufs[i] == ct, || {
                        format!("Ok, but message {i} is wrong")
                    })?;
                    if let Some(t) = tag {
                        ensure(self.tags[i] == t, || format!("Ok, but tag {i} is wrong"))?;
                    }
                }
                Ok(())
            }
            Err(e) => {
                ensure(fired, || format!("failed with no fault: {e:?}"))?;
                is_injected(e)?;
                ensure(self.all_zero(), || {
                    format!("a failed {what} seal left a buffer not zeroed")
                })?;
                ensure(self.tags.iter().all(|t| *t == [SENTINEL; 16]), || {
                    format!("a failed {what} seal wrote a tag")
                })
            }
        }
    }

    /// After an open that failed with `e` (not a refused forgery): every buffer zeroed.
    fn check_failed_open(&self, e: &Error, fired: bool, what: &str) -> Result<(), String> {
        ensure(fired, || format!("failed with no fault: {e:?}"))?;
        is_injected(e)?;
        ensure(self.all_zero(), || {
            format!("a failed {what} open left a buffer not zeroed")
        })
    }
}

struct BatchState {
    gcm: Gcm,
    m: Msgs,
}

impl BatchState {
    fn new(rng: &mut Rng, lens: &[usize]) -> BatchState {
        let key = rng.bytes(16);
        BatchState {
            gcm: cuda(&key),
            m: Msgs::new(rng, lens, vec![key; lens.len()]),
        }
    }

    fn seal(&mut self) -> Result<(), Error> {
        let m = &mut self.m;
        let mut jobs: Vec<SealJob<'_>> = m
            .bufs
            .iter_mut()
            .zip(m.tags.iter_mut())
            .enumerate()
            .map(|(i, (buf, tag))| SealJob {
                nonce: &m.nonces[i],
                aad: &m.aads[i],
                buf,
                tag,
            })
            .collect();
        self.gcm.encrypt_batch(&mut jobs)
    }

    fn open(&mut self) -> Result<(), Error> {
        let m = &mut self.m;
        let mut jobs: Vec<OpenJob<'_>> = m
            .bufs
            .iter_mut()
            .enumerate()
            .map(|(i, buf)| OpenJob {
                nonce: &m.nonces[i],
                aad: &m.aads[i],
                buf,
                tag: &m.tags[i],
            })
            .collect();
        self.gcm.decrypt_batch(&mut jobs)
    }

    fn round_trip(&mut self, dev: Dev, rng: &mut Rng) -> Result<(), String> {
        self.m.fresh(rng);
        let r = self.seal();
        self.m.check_seal(dev, &r, false, "batch")?;
        let r = self.open();
        ensure(r.is_ok() && self.m.bufs == self.m.pts, || {
            format!("open of a fresh batch: {r:?}")
        })
    }
}

impl Scenario for HostBatch {
    type State = BatchState;
    fn name(&self) -> String {
        format!(
            "Gcm(Cuda) {} batch of {} ({} B){}",
            if self.open { "open" } else { "seal" },
            self.lens.len(),
            self.lens.iter().sum::<usize>(),
            if self.forged { ", one tag forged" } else { "" }
        )
    }
    fn setup(&self, _dev: Dev, rng: &mut Rng) -> BatchState {
        let mut b = BatchState::new(rng, &self.lens);
        if self.open {
            b.seal().expect("batch seal");
            b.m.cts = b.m.bufs.clone();
            if self.forged {
                let i = self.lens.len() / 2;
                b.m.tags[i][0] ^= 1;
            }
        }
        b
    }
    fn run(&self, s: &mut BatchState) -> Result<(), Error> {
        if self.open { s.open() } else { s.seal() }
    }
    fn refresh(&self, s: &mut BatchState) {
        if !self.open {
            s.m.untouched_tags();
        }
    }
    fn opens(&self) -> bool {
        self.open
    }
    fn kept(&self) -> u64 {
        // A seal batch on a new engine makes its batch powers of H.
        u64::from(!self.open)
    }
    fn check(
        &self,
        dev: Dev,
        s: &mut BatchState,
        r: &Result<(), Error>,
        fired: bool,
    ) -> Result<(), String> {
        let m = &s.m;
        if !self.open {
            return m.check_seal(dev, r, fired, "batch");
        }
        match r {
            Ok(()) => ensure(!self.forged && m.bufs == m.pts, || {
                "Ok, but forged or wrong plaintexts".into()
            }),
            Err(Error::Authentication) => ensure(
                self.forged && (m.bufs == m.cts || (fired && m.all_zero())),
                || "a refused batch left neither every ciphertext nor all zeros".into(),
            ),
            Err(e) => m.check_failed_open(e, fired, "batch"),
        }
    }
    fn next(&self, dev: Dev, s: &mut BatchState, rng: &mut Rng) -> Result<(), String> {
        s.round_trip(dev, rng)
    }
}

// -------------------------------------------------------------------------------------------------
// Device-resident API
// -------------------------------------------------------------------------------------------------

/// Seal `d` (no AAD) on the engine's own stream and wait; the tag, through `dtag`, into `tag`.
fn seal_dev(
    eng: &CudaEngine,
    nonce: &[u8],
    d: &mut DeviceBuf,
    dtag: &mut DeviceBuf,
    tag: &mut [u8; 16],
) -> Result<(), Error> {
    let job = DeviceJob {
        key: 0,
        nonce,
        aad: b"",
        data: d,
        tag: dtag,
    };
    eng.seal_async(None, job)?.wait()?;
    dtag.download(0, tag)
}

struct DeviceCall {
    len: usize,
    open: bool,
    forged: bool,
}

struct DevState {
    key: Vec<u8>,
    eng: CudaEngine,
    nonce: [u8; 12],
    aad: Vec<u8>,
    pt: Vec<u8>,
    ct: Vec<u8>,
    buf: DeviceBuf,
    /// The tag in device memory, and its copy on the host once a call has returned it.
    dtag: DeviceBuf,
    tag: [u8; 16],
    /// The last seal finished on the device and only reading its tag back failed.
    sealed: bool,
}

impl DevState {
    fn new(rng: &mut Rng, len: usize) -> DevState {
        let key = rng.bytes(24);
        let eng = CudaEngine::new(&key, 0).expect("engine");
        let pt = rng.bytes(len);
        let buf = DeviceBuf::from_host(&pt, 0).expect("DeviceBuf");
        let dtag = DeviceBuf::new(16, 0).expect("tag DeviceBuf");
        DevState {
            key,
            eng,
            nonce: rng.nonce(),
            aad: rng.bytes(5),
            pt,
            ct: Vec::new(),
            buf,
            dtag,
            tag: [SENTINEL; 16],
            sealed: false,
        }
    }

    /// Seal on the engine's own stream, wait, and read the tag back.
    fn seal(&mut self) -> Result<(), Error> {
        self.sealed = false;
        let job = DeviceJob {
            key: 0,
            nonce: &self.nonce,
            aad: &self.aad,
            data: &mut self.buf,
            tag: &mut self.dtag,
        };
        self.eng.seal_async(None, job)?.wait()?;
        self.sealed = true;
        let mut t = [0u8; 16];
        self.dtag.download(0, &mut t)?;
        self.tag = t;
        Ok(())
    }

    /// Open against the tag in `dtag` (where the last seal, or a forgery, put it).
    fn open(&mut self) -> Result<(), Error> {
        let job = DeviceJob {
            key: 0,
            nonce: &self.nonce,
            aad: &self.aad,
            data: &mut self.buf,
            tag: &mut self.dtag,
        };
        self.eng.open_async(None, job, 16)?.wait()
    }

    /// After a failed call: the buffer is wiped, or marked lost (downloads refused) until wiped.
    fn wiped_or_lost(&mut self) -> Result<(), String> {
        match self.buf.to_vec() {
            Ok(v) => ensure(zero(&v), || {
                "a failed device call left the buffer not wiped".into()
            }),
            Err(Error::InvalidInput(_)) => {
                self.buf
                    .wipe()
                    .map_err(|e| format!("wipe of a lost buffer: {e}"))?;
                let v = self
                    .buf
                    .to_vec()
                    .map_err(|e| format!("download after wipe: {e}"))?;
                ensure(zero(&v), || "wipe did not zero the buffer".into())
            }
            Err(e) => Err(format!("download after a failed call: {e:?}")),
        }
    }

    fn check_seal(&mut self, dev: Dev, r: &Result<(), Error>, fired: bool) -> Result<(), String> {
        match r {
            Ok(()) => {
                let (ct, tag) = expected_seal(dev, &self.key, &self.nonce, &self.aad, &self.pt);
                let got = self.buf.to_vec().map_err(|e| format!("download: {e}"))?;
                ensure(got == ct, || {
                    "Ok, but the device ciphertext is wrong".into()
                })?;
                match tag {
                    Some(t) => ensure(self.tag == t, || "Ok, but the tag is wrong".into()),
                    None => ensure(self.tag != [SENTINEL; 16], || "Ok, but no tag".into()),
                }
            }
            Err(e) => {
                ensure(fired, || format!("failed with no fault: {e:?}"))?;
                is_injected(e)?;
                ensure(self.tag == [SENTINEL; 16], || {
                    "a failed seal wrote a tag".into()
                })?;
                if self.sealed {
                    // Only reading the tag back failed: the ciphertext is whole.
                    let (ct, _) = expected_seal(dev, &self.key, &self.nonce, &self.aad, &self.pt);
                    let got = self.buf.to_vec().map_err(|e| format!("download: {e}"))?;
                    return ensure(got == ct, || "a sealed buffer changed".into());
                }
                self.wiped_or_lost()
            }
        }
    }

    fn round_trip(&mut self, dev: Dev, rng: &mut Rng) -> Result<(), String> {
        self.pt = rng.bytes(self.pt.len());
        self.nonce = rng.nonce();
        self.tag = [SENTINEL; 16];
        self.buf
            .upload(0, &self.pt)
            .map_err(|e| format!("upload: {e}"))?;
        // A failed call may have given up on the tag buffer too (marked lost).
        self.dtag.wipe().map_err(|e| format!("tag wipe: {e}"))?;
        let r = self.seal();
        self.check_seal(dev, &r, false)?;
        let r = self.open();
        let got = self.buf.to_vec();
        ensure(r.is_ok() && got.as_deref() == Ok(&self.pt[..]), || {
            format!("device open of a fresh seal: {r:?}")
        })
    }
}

impl Scenario for DeviceCall {
    type State = DevState;
    fn name(&self) -> String {
        format!(
            "CudaKeyring::{}_async(DeviceJob).wait() {} B{}",
            if self.open { "open" } else { "seal" },
            self.len,
            if self.forged { ", forged tag" } else { "" }
        )
    }
    fn setup(&self, _dev: Dev, rng: &mut Rng) -> DevState {
        let mut d = DevState::new(rng, self.len);
        if self.open {
            d.seal().expect("device seal");
            d.ct = d.buf.to_vec().expect("download");
            if self.forged {
                d.tag[15] ^= 0x80;
                d.dtag.upload(0, &d.tag).expect("forged tag");
            }
        }
        d
    }
    fn run(&self, s: &mut DevState) -> Result<(), Error> {
        if self.open { s.open() } else { s.seal() }
    }
    fn refresh(&self, s: &mut DevState) {
        if !self.open {
            s.tag = [SENTINEL; 16];
        }
    }
    fn opens(&self) -> bool {
        self.open
    }
    fn kept(&self) -> u64 {
        // A seal whose tag could not be read back leaves the tag in its device buffer.
        u64::from(!self.open)
    }
    fn check(
        &self,
        dev: Dev,
        s: &mut DevState,
        r: &Result<(), Error>,
        fired: bool,
    ) -> Result<(), String> {
        if !self.open {
            return s.check_seal(dev, r, fired);
        }
        match r {
            Ok(()) => {
                let got = s.buf.to_vec().map_err(|e| format!("download: {e}"))?;
                ensure(!self.forged && got == s.pt, || {
                    "Ok, but forged or wrong plaintext".into()
                })
            }
            Err(Error::Authentication) => {
                ensure(self.forged, || "a right tag refused".into())?;
                let got = s
                    .buf
                    .to_vec()
                    .map_err(|e| format!("download after refusal: {e}"))?;
                ensure(got == s.ct, || {
                    "a refused device open left the buffer not its ciphertext".into()
                })
            }
            Err(e) => {
                ensure(fired, || format!("failed with no fault: {e:?}"))?;
                is_injected(e)?;
                s.wiped_or_lost()
            }
        }
    }
    fn next(&self, dev: Dev, s: &mut DevState, rng: &mut Rng) -> Result<(), String> {
        s.round_trip(dev, rng)
    }
}

/// A device-resident batch on a caller's stream: 6 messages under 2 keys of a keyring, their table,
/// nonces and AADs in device memory, sealed or opened with `seal_batch_async` / `open_batch_async` and
/// waited for. A failed call wipes the data, tags and verdicts (or marks them lost).
struct DeviceBatchCall {
    open: bool,
    forged: bool,
}

const DB_LENS: [usize; 6] = [0, 1, 100, 4096, 20_000, 70_001];

/// One message of the batch: its key index, nonce, AAD, plaintext and offset in the data buffer.
struct DbMsg {
    key: usize,
    nonce: [u8; 12],
    aad: Vec<u8>,
    pt: Vec<u8>,
    at: usize,
}

struct DbState {
    keys: Vec<Vec<u8>>,
    ring: CudaKeyring,
    stream: Stream,
    msgs: Vec<DbMsg>,
    table: DeviceBuf,
    nonces: DeviceBuf,
    aad: DeviceBuf,
    data: DeviceBuf,
    tags: DeviceBuf,
    verdicts: DeviceBuf,
}

impl DbState {
    fn new(rng: &mut Rng) -> DbState {
        let keys = vec![rng.bytes(16), rng.bytes(32)];
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let ring = CudaKeyring::new(&refs, 0).expect("keyring");
        let stream = Stream::new(0).expect("stream");
        let (mut table, mut nonces, mut aads, mut host) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut msgs = Vec::new();
        for (i, &len) in DB_LENS.iter().enumerate() {
            let (nonce, aad, pt) = (rng.nonce(), rng.bytes(i * 7), rng.bytes(len));
            let (at, aat) = (host.len(), aads.len());
            table.push(DeviceMessage {
                data_offset: at as u64,
                data_len: len as u64,
                aad_offset: aat as u64,
                aad_len: aad.len() as u64,
                nonce_offset: 12 * i as u64,
                nonce_len: 12,
                key: (i % 2) as u32,
            });
            nonces.extend_from_slice(&nonce);
            aads.extend_from_slice(&aad);
            aads.resize(aads.len().div_ceil(16) * 16, 0);
            host.extend_from_slice(&pt);
            host.resize(host.len().div_ceil(16) * 16, 0);
            msgs.push(DbMsg {
                key: i % 2,
                nonce,
                aad,
                pt,
                at,
            });
        }
        let n = msgs.len();
        DbState {
            keys,
            ring,
            stream,
            table: DeviceBuf::from_host(&DeviceMessage::table(&table), 0).expect("table"),
            nonces: DeviceBuf::from_host(&nonces, 0).expect("nonces"),
            aad: DeviceBuf::from_host(&aads, 0).expect("aad"),
            data: DeviceBuf::from_host(&host, 0).expect("data"),
            tags: DeviceBuf::new(16 * n, 0).expect("tags"),
            verdicts: DeviceBuf::new(n, 0).expect("verdicts"),
            msgs,
        }
    }

    fn run(&mut self, open: bool) -> Result<(), Error> {
        let b = DeviceBatch {
            messages: &self.table,
            count: self.msgs.len(),
            data: &mut self.data,
            aad: &self.aad,
            nonces: &self.nonces,
            tags: &mut self.tags,
            verdicts: &mut self.verdicts,
        };
        let p = if open {
            self.ring.open_batch_async(Some(&self.stream), b, 16)?
        } else {
            self.ring.seal_batch_async(Some(&self.stream), b)?
        };
        p.wait()
    }

    /// Message `i` of `data` as it is now.
    fn message(&self, data: &[u8], i: usize) -> Vec<u8> {
        let m = &self.msgs[i];
        data[m.at..m.at + m.pt.len()].to_vec()
    }

    /// After a sealing call returned Ok: every message is its ciphertext, with its tag, verdict Ok.
    fn check_sealed(&self, dev: Dev) -> Result<(), String> {
        let data = self.data.to_vec().map_err(|e| format!("download: {e}"))?;
        let tags = self.tags.to_vec().map_err(|e| format!("download: {e}"))?;
        let v = self
            .verdicts
            .to_vec()
            .map_err(|e| format!("download: {e}"))?;
        for (i, m) in self.msgs.iter().enumerate() {
            let (ct, tag) = expected_seal(dev, &self.keys[m.key], &m.nonce, &m.aad, &m.pt);
            ensure(self.message(&data, i) == ct && v[i] == 0, || {
                format!(
                    "Ok, but message {i} is not its ciphertext (verdict {})",
                    v[i]
                )
            })?;
            ensure(tag.is_none_or(|t| tags[16 * i..16 * i + 16] == t), || {
                format!("Ok, but message {i}'s tag is wrong")
            })?;
        }
        Ok(())
    }

    /// After a failed call: data, tags and verdicts wiped, or marked lost (then wiped here).
    fn wiped_or_lost(&mut self) -> Result<(), String> {
        for (name, b) in [
            ("data", &mut self.data),
            ("tags", &mut self.tags),
            ("verdicts", &mut self.verdicts),
        ] {
            match b.to_vec() {
                Ok(v) => ensure(zero(&v), || {
                    format!("a failed batch left its {name} not wiped")
                })?,
                Err(Error::InvalidInput(_)) => {
                    b.wipe().map_err(|e| format!("wipe of lost {name}: {e}"))?;
                }
                Err(e) => return Err(format!("download of {name} after a failed call: {e:?}")),
            }
        }
        Ok(())
    }

    fn round_trip(&mut self, dev: Dev) -> Result<(), String> {
        let mut host = self.data.to_vec().map_err(|e| format!("download: {e}"))?;
        for m in &self.msgs {
            host[m.at..m.at + m.pt.len()].copy_from_slice(&m.pt);
        }
        self.data
            .upload(0, &host)
            .map_err(|e| format!("upload: {e}"))?;
        self.run(false).map_err(|e| format!("seal: {e:?}"))?;
        self.check_sealed(dev)?;
        self.run(true)
            .map_err(|e| format!("open of a fresh seal: {e:?}"))?;
        let data = self.data.to_vec().map_err(|e| format!("download: {e}"))?;
        let v = self
            .verdicts
            .to_vec()
            .map_err(|e| format!("download: {e}"))?;
        ensure(
            (0..self.msgs.len()).all(|i| self.message(&data, i) == self.msgs[i].pt && v[i] == 0),
            || format!("open of a fresh seal: wrong plaintext or verdicts {v:?}"),
        )
    }
}

impl Scenario for DeviceBatchCall {
    type State = DbState;
    fn name(&self) -> String {
        format!(
            "CudaKeyring::{}_batch_async(DeviceBatch).wait() of {} messages, 2 keys, caller's stream{}",
            if self.open { "open" } else { "seal" },
            DB_LENS.len(),
            if self.forged { ", one tag forged" } else { "" }
        )
    }
    fn setup(&self, _dev: Dev, rng: &mut Rng) -> DbState {
        let mut s = DbState::new(rng);
        if self.open {
            s.run(false).expect("device batch seal");
            if self.forged {
                let mut t = s.tags.to_vec().expect("tags");
                t[16 * 4 + 3] ^= 4;
                s.tags.upload(0, &t).expect("forged tag");
            }
        }
        s
    }
    fn run(&self, s: &mut DbState) -> Result<(), Error> {
        s.run(self.open)
    }
    fn opens(&self) -> bool {
        self.open
    }
    fn kept(&self) -> u64 {
        // The verdicts: a refused message's byte is not zero.
        u64::from(self.forged)
    }
    fn check(
        &self,
        dev: Dev,
        s: &mut DbState,
        r: &Result<(), Error>,
        fired: bool,
    ) -> Result<(), String> {
        match r {
            Ok(()) if !self.open => s.check_sealed(dev),
            Ok(()) => {
                let data = s.data.to_vec().map_err(|e| format!("download: {e}"))?;
                let v = s.verdicts.to_vec().map_err(|e| format!("download: {e}"))?;
                for (i, m) in s.msgs.iter().enumerate() {
                    let bad = self.forged && i == 4;
                    let got = s.message(&data, i);
                    let want = if bad {
                        expected_seal(dev, &s.keys[m.key], &m.nonce, &m.aad, &m.pt).0
                    } else {
                        m.pt.clone()
                    };
                    ensure(v[i] == u8::from(bad) && got == want, || {
                        format!(
                            "message {i}: verdict {}, or wrong / not its ciphertext",
                            v[i]
                        )
                    })?;
                }
                Ok(())
            }
            Err(e) => {
                ensure(fired, || format!("failed with no fault: {e:?}"))?;
                is_injected(e)?;
                s.wiped_or_lost()
            }
        }
    }
    fn next(&self, dev: Dev, s: &mut DbState, _rng: &mut Rng) -> Result<(), String> {
        s.round_trip(dev)
    }
}

/// `DeviceBuf` itself: made from host data, patched with an upload larger than one staging copy, read
/// back, wiped, and a zeroed one allocated.
struct DeviceBufOps {
    len: usize,
}

struct BufState {
    data: Vec<u8>,
    patch: Vec<u8>,
    buf: Option<DeviceBuf>,
    got: Option<Vec<u8>>,
}

/// Where the patch goes.
const PATCH_AT: usize = 4096;

impl Scenario for DeviceBufOps {
    type State = BufState;
    fn name(&self) -> String {
        format!("DeviceBuf from_host/upload/to_vec/wipe/new {} B", self.len)
    }
    fn setup(&self, _dev: Dev, rng: &mut Rng) -> BufState {
        BufState {
            data: rng.bytes(self.len),
            patch: rng.bytes(self.len / 2),
            buf: None,
            got: None,
        }
    }
    fn run(&self, s: &mut BufState) -> Result<(), Error> {
        s.got = None;
        let b = s.buf.insert(DeviceBuf::from_host(&s.data, 0)?);
        b.upload(PATCH_AT, &s.patch)?;
        s.got = Some(b.to_vec()?);
        b.wipe()?;
        let z = DeviceBuf::new(1000, 0)?;
        let mut small = [1u8; 1000];
        z.download(0, &mut small)?;
        if small != [0u8; 1000] {
            return Err(Error::InvalidInput("DeviceBuf::new not zeroed".into()));
        }
        Ok(())
    }
    fn kept(&self) -> u64 {
        // The caller's buffer.
        1
    }
    fn check(
        &self,
        _dev: Dev,
        s: &mut BufState,
        r: &Result<(), Error>,
        fired: bool,
    ) -> Result<(), String> {
        let mut patched = s.data.clone();
        patched[PATCH_AT..PATCH_AT + s.patch.len()].copy_from_slice(&s.patch);
        match r {
            Ok(()) => ensure(s.got.as_ref() == Some(&patched), || {
                "Ok, but the data read back is wrong".into()
            }),
            Err(e) => {
                ensure(fired, || format!("failed with no fault: {e:?}"))?;
                is_injected(e)?;
                // The buffer holds a whole state (before or after the upload, or wiped), or is
                // marked lost: a part-done upload or wipe is never readable.
                let Some(b) = s.buf.as_ref() else {
                    return Ok(());
                };
                match b.to_vec() {
                    Ok(v) => ensure(v == s.data || v == patched || zero(&v), || {
                        "after a failed call the buffer holds a part-done state".into()
                    }),
                    Err(Error::InvalidInput(_)) => Ok(()),
                    Err(e) => Err(format!("download after the failure: {e:?}")),
                }
            }
        }
    }
    fn next(&self, dev: Dev, s: &mut BufState, _rng: &mut Rng) -> Result<(), String> {
        let r = self.run(s);
        self.check(dev, s, &r, false)
    }
}

// -------------------------------------------------------------------------------------------------
// Keyring and engine creation
// -------------------------------------------------------------------------------------------------

struct Keyring {
    open: bool,
    forged: bool,
}

struct RingState {
    ring: CudaKeyring,
    idx: Vec<usize>,
    m: Msgs,
    verdicts: Vec<bool>,
}

const RING_LENS: [usize; 7] = [0, 1, 31, 500, 4096, 20000, 100_003];

impl RingState {
    fn new(rng: &mut Rng) -> RingState {
        let keys = [rng.bytes(16), rng.bytes(24), rng.bytes(32)];
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let ring = CudaKeyring::new(&refs, 0).expect("keyring");
        let idx: Vec<usize> = (0..RING_LENS.len()).map(|i| (i * 2) % keys.len()).collect();
        let per_msg = idx.iter().map(|&k| keys[k].clone()).collect();
        RingState {
            ring,
            m: Msgs::new(rng, &RING_LENS, per_msg),
            idx,
            verdicts: Vec::new(),
        }
    }

    fn seal(&mut self) -> Result<(), Error> {
        let m = &mut self.m;
        let mut jobs: Vec<KeyedSealJob<'_>> = m
            .bufs
            .iter_mut()
            .zip(m.tags.iter_mut())
            .enumerate()
            .map(|(i, (buf, tag))| KeyedSealJob {
                key: self.idx[i],
                nonce: &m.nonces[i],
                aad: &m.aads[i],
                buf,
                tag,
            })
            .collect();
        self.ring.seal(&mut jobs)
    }

    fn open(&mut self) -> Result<(), Error> {
        let m = &mut self.m;
        let mut jobs: Vec<KeyedOpenJob<'_>> = m
            .bufs
            .iter_mut()
            .enumerate()
            .map(|(i, buf)| KeyedOpenJob {
                key: self.idx[i],
                nonce: &m.nonces[i],
                aad: &m.aads[i],
                buf,
                tag: &m.tags[i],
            })
            .collect();
        self.verdicts = self.ring.open(&mut jobs)?;
        Ok(())
    }

    fn round_trip(&mut self, dev: Dev, rng: &mut Rng) -> Result<(), String> {
        self.m.fresh(rng);
        let r = self.seal();
        self.m.check_seal(dev, &r, false, "keyring")?;
        let r = self.open();
        ensure(
            r.is_ok() && self.verdicts.iter().all(|&v| v) && self.m.bufs == self.m.pts,
            || format!("keyring open of a fresh seal: {r:?} {:?}", self.verdicts),
        )
    }
}

impl Scenario for Keyring {
    type State = RingState;
    fn name(&self) -> String {
        format!(
            "CudaKeyring::{} of {} messages, 3 keys{}",
            if self.open { "open" } else { "seal" },
            RING_LENS.len(),
            if self.forged { ", one tag forged" } else { "" }
        )
    }
    fn setup(&self, _dev: Dev, rng: &mut Rng) -> RingState {
        let mut s = RingState::new(rng);
        if self.open {
            s.seal().expect("keyring seal");
            s.m.cts = s.m.bufs.clone();
            if self.forged {
                s.m.tags[4][7] ^= 2;
            }
        }
        s
    }
    fn run(&self, s: &mut RingState) -> Result<(), Error> {
        if self.open { s.open() } else { s.seal() }
    }
    fn refresh(&self, s: &mut RingState) {
        if !self.open {
            s.m.untouched_tags();
        }
    }
    fn opens(&self) -> bool {
        self.open
    }
    fn check(
        &self,
        dev: Dev,
        s: &mut RingState,
        r: &Result<(), Error>,
        fired: bool,
    ) -> Result<(), String> {
        let m = &s.m;
        if !self.open {
            return m.check_seal(dev, r, fired, "keyring");
        }
        match r {
            Ok(()) => {
                for i in 0..m.pts.len() {
                    let bad = self.forged && i == 4;
                    ensure(s.verdicts[i] != bad, || format!("verdict {i} wrong"))?;
                    // A refused message: its ciphertext again, or zeros if the fault hit the
                    // sealing that gives it back.
                    ensure(
                        if bad {
                            m.bufs[i] == m.cts[i] || (fired && zero(&m.bufs[i]))
                        } else {
                            m.bufs[i] == m.pts[i]
                        },
                        || {
                            format!(
                                "message {i}: wrong plaintext, or a refused one neither its ciphertext nor zeros"
                            )
                        },
                    )?;
                }
                Ok(())
            }
            Err(e) => m.check_failed_open(e, fired, "keyring"),
        }
    }
    fn next(&self, dev: Dev, s: &mut RingState, rng: &mut Rng) -> Result<(), String> {
        s.round_trip(dev, rng)
    }
}

/// Engine and keyring creation (keys uploaded and expanded on the device, powers of H).
struct Create {
    keyring: bool,
}

struct CreateState {
    key: Vec<u8>,
    eng: Option<CudaEngine>,
    ring: Option<CudaKeyring>,
}

impl Scenario for Create {
    type State = CreateState;
    fn name(&self) -> String {
        if self.keyring {
            "CudaKeyring::new (3 keys)".into()
        } else {
            "CudaEngine::new".into()
        }
    }
    fn setup(&self, _dev: Dev, rng: &mut Rng) -> CreateState {
        CreateState {
            key: rng.bytes(32),
            eng: None,
            ring: None,
        }
    }
    fn run(&self, s: &mut CreateState) -> Result<(), Error> {
        if self.keyring {
            let k = &s.key;
            s.ring = Some(CudaKeyring::new(&[&k[..16], &k[..24], &k[..]], 0)?);
        } else {
            s.eng = Some(CudaEngine::new(&s.key, 0)?);
        }
        Ok(())
    }
    fn check(
        &self,
        _dev: Dev,
        _s: &mut CreateState,
        r: &Result<(), Error>,
        fired: bool,
    ) -> Result<(), String> {
        match r {
            Ok(()) => Ok(()),
            Err(e) => {
                ensure(fired, || format!("failed with no fault: {e:?}"))?;
                is_injected(e)
            }
        }
    }
    fn next(&self, dev: Dev, s: &mut CreateState, rng: &mut Rng) -> Result<(), String> {
        if s.eng.is_none() && s.ring.is_none() {
            self.run(s)
                .map_err(|e| format!("creation after the fault: {e}"))?;
        }
        let pt = rng.bytes(3000);
        let nonce = rng.nonce();
        let mut buf = pt.clone();
        let mut tag = [SENTINEL; 16];
        let key = if let Some(ring) = &s.ring {
            ring.seal(&mut [KeyedSealJob {
                key: 2,
                nonce: &nonce,
                aad: b"",
                buf: &mut buf,
                tag: &mut tag,
            }])
            .map_err(|e| format!("keyring seal: {e}"))?;
            &s.key[..]
        } else {
            let eng = s.eng.as_ref().ok_or("no engine")?;
            let mut d = DeviceBuf::from_host(&pt, 0).map_err(|e| format!("DeviceBuf: {e}"))?;
            let mut dtag = DeviceBuf::new(16, 0).map_err(|e| format!("DeviceBuf: {e}"))?;
            seal_dev(eng, &nonce, &mut d, &mut dtag, &mut tag)
                .map_err(|e| format!("seal_async: {e}"))?;
            buf = d.to_vec().map_err(|e| format!("download: {e}"))?;
            &s.key[..]
        };
        let (ct, t) = expected_seal(dev, key, &nonce, b"", &pt);
        ensure(buf == ct && t.is_none_or(|t| t == tag), || {
            "a new engine's first result is wrong".into()
        })
    }
}

// -------------------------------------------------------------------------------------------------
// The tests
// -------------------------------------------------------------------------------------------------

const MIB: usize = 1 << 20;

#[test]
fn host_pipeline_faults() {
    let (_turn, dev) = turn();
    let mut rng = Rng(1);
    let mut t = Tally::default();
    drive(dev, &HostSeal { len: 1000 }, &mut rng, FULL, &mut t);
    drive(dev, &HostSeal { len: 5 * MIB + 3 }, &mut rng, FULL, &mut t);
    drive(
        dev,
        &HostOpen {
            len: 1000,
            forged: false,
        },
        &mut rng,
        FULL,
        &mut t,
    );
    drive(
        dev,
        &HostOpen {
            len: 5 * MIB + 3,
            forged: false,
        },
        &mut rng,
        FULL,
        &mut t,
    );
    drive(
        dev,
        &HostOpen {
            len: 777,
            forged: true,
        },
        &mut rng,
        FULL,
        &mut t,
    );
    drive(
        dev,
        &HostOpen {
            len: 5 * MIB + 3,
            forged: true,
        },
        &mut rng,
        FULL,
        &mut t,
    );
    drive(dev, &Pinned { len: 5 * MIB }, &mut rng, FULL, &mut t);
    t.finish("host pipeline (Gcm on Backend::Cuda, PinnedRegion)");
}

/// Messages of more than one chunk (64 MiB), on several lanes; a refused page-locking sends them
/// through the staged path.
#[test]
fn host_pipeline_chunked_faults() {
    let (_turn, dev) = turn();
    let mut rng = Rng(2);
    let mut t = Tally::default();
    drive(
        dev,
        &HostSeal {
            len: 64 * MIB + 4099,
        },
        &mut rng,
        light(),
        &mut t,
    );
    if std::env::var_os("GCMX_FAULTS_FULL").is_some() {
        drive(
            dev,
            &HostOpen {
                len: 64 * MIB + 17,
                forged: true,
            },
            &mut rng,
            FULL,
            &mut t,
        );
    }
    t.finish("host pipeline, 2 chunks");
}

#[test]
fn batch_faults() {
    let (_turn, dev) = turn();
    let mut rng = Rng(3);
    let mut t = Tally::default();
    let lens = vec![0, 1, 16, 100, 1000, 4103, 70_000, 300_001];
    let mut with_large = lens.clone();
    with_large.insert(3, 16 * MIB + 5);
    for (open, forged) in [(false, false), (true, false), (true, true)] {
        let sc = HostBatch {
            lens: lens.clone(),
            open,
            forged,
        };
        drive(dev, &sc, &mut rng, FULL, &mut t);
    }
    let sc = HostBatch {
        lens: with_large,
        open: true,
        forged: true,
    };
    drive(dev, &sc, &mut rng, light(), &mut t);
    t.finish("batches (Gcm::encrypt_batch/decrypt_batch on Backend::Cuda)");
}

#[test]
fn device_resident_faults() {
    let (_turn, dev) = turn();
    let mut rng = Rng(4);
    let mut t = Tally::default();
    for (open, forged) in [(false, false), (true, false), (true, true)] {
        let sc = DeviceCall {
            len: 70_001,
            open,
            forged,
        };
        drive(dev, &sc, &mut rng, FULL, &mut t);
    }
    for (open, forged) in [(false, false), (true, false), (true, true)] {
        drive(
            dev,
            &DeviceBatchCall { open, forged },
            &mut rng,
            FULL,
            &mut t,
        );
    }
    drive(
        dev,
        &DeviceBufOps { len: 20 * MIB + 5 },
        &mut rng,
        FULL,
        &mut t,
    );
    t.finish(
        "device-resident API (DeviceBuf, seal_async and open_async, device batches, waited for)",
    );
}

#[test]
fn keyring_and_creation_faults() {
    let (_turn, dev) = turn();
    let mut rng = Rng(5);
    let mut t = Tally::default();
    for (open, forged) in [(false, false), (true, false), (true, true)] {
        drive(dev, &Keyring { open, forged }, &mut rng, FULL, &mut t);
    }
    drive(dev, &Create { keyring: false }, &mut rng, FULL, &mut t);
    drive(dev, &Create { keyring: true }, &mut rng, FULL, &mut t);
    t.finish("keyring and engine creation");
}

// -------------------------------------------------------------------------------------------------
// Out of memory, and many engines at once
// -------------------------------------------------------------------------------------------------

/// Most of the device memory taken first: the engine fails cleanly (`Error::Device`, buffers as
/// documented), and works again once the memory is free.
#[test]
fn out_of_memory_then_recovers() {
    let (_turn, dev) = turn();
    let mut rng = Rng(6);
    fault::release_cached();
    let before = stats();
    let mut host = HostMsg::new(&mut rng, 6 * MIB);
    let mut d = DevState::new(&mut rng, 3000);
    fault::release_cached();
    let total = gcmx_cuda::device_info(0).expect("device").total_memory;
    let t0 = Instant::now();
    let mut fill = Vec::new();
    for step in [1usize << 30, 64 * MIB, MIB, 64 << 10, 4 << 10, 256, 16] {
        while let Ok(b) = DeviceBuf::new(step, 0) {
            fill.push(b);
        }
    }
    let taken: usize = fill.iter().map(|b| b.len()).sum();
    say(&format!(
        "out of memory: {} of {} MiB taken in {} buffers ({:.1} s)",
        taken / MIB,
        total / MIB,
        fill.len(),
        t0.elapsed().as_secs_f64()
    ));
    let r = bounded("OOM seal", CASE_LIMIT, || host.seal());
    let seal_ok = match &r {
        Err(e @ Error::Device(_)) => {
            std::error::Error::source(e).is_some() && zero(&host.buf) && host.tag == [SENTINEL; 16]
        }
        _ => false,
    };
    // On the emulated device nothing is left, so an engine cannot be made; a real driver may still
    // place the few hundred bytes an engine needs.
    let r2 = bounded("OOM new engine", CASE_LIMIT, || {
        CudaEngine::new(&[1u8; 16], 0)
    });
    let created = match (&r2, dev) {
        (Err(Error::Device(_)), _) | (Ok(_), Dev::Real) => Ok(()),
        (other, _) => Err(format!("{:?}", other.as_ref().err())),
    };
    drop(r2);
    let r3 = DeviceBuf::new(MIB, 0).err();
    // The device-resident call needs only a small metadata buffer: it works, or fails cleanly (checked
    // once memory is free again: the check itself needs the device).
    let r4 = d.seal();
    drop(fill);
    let dev_ok = match &r4 {
        Ok(()) => d.check_seal(dev, &r4, false),
        Err(e @ Error::Device(_)) => ensure(d.tag == [SENTINEL; 16], || "a tag was written".into())
            .and_then(|()| d.wiped_or_lost())
            .map_err(|m| format!("{m} ({e:?})")),
        Err(e) => Err(format!("{e:?}")),
    };
    let again = host.round_trip(dev, &mut rng);
    let dev_again = d.round_trip(dev, &mut rng);
    drop(host);
    drop(d);
    fault::release_cached();
    let live = same_live(&before, &stats(), false);
    assert!(seal_ok, "a seal with the device memory full: {r:?}");
    created.expect("engine creation with the device memory full");
    assert!(
        matches!(r3, Some(Error::Device(_))),
        "DeviceBuf::new with the memory full: {r3:?}"
    );
    dev_ok.expect("device seal with the device memory full");
    again.expect("host seal after the memory was freed");
    dev_again.expect("device seal after the memory was freed");
    live.expect("leaks after out-of-memory");
}

/// 64 threads, each with its own engine and key, and two engines shared by all: host seals and opens
/// (forged ones too), device-resident calls and batches at once; every result checked.
#[test]
fn many_concurrent_engines() {
    let (_turn, dev) = turn();
    fault::release_cached();
    let before = stats();
    let shared_keys = [vec![3u8; 32], vec![4u8; 16]];
    let shared: Vec<Gcm> = shared_keys.iter().map(|k| cuda(k)).collect();
    let rounds = if dev == Dev::Real { 6 } else { 2 };
    let failures: Vec<String> = bounded("64 concurrent engines", Duration::from_secs(600), || {
        std::thread::scope(|sc| {
            let handles: Vec<_> = (0..64u64)
                .map(|i| {
                    let shared = &shared;
                    let shared_keys = &shared_keys;
                    sc.spawn(move || worker(dev, i, rounds, shared, shared_keys))
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| {
                    h.join()
                        .unwrap_or_else(|_| vec!["a worker panicked".into()])
                })
                .collect()
        })
    });
    drop(shared);
    fault::release_cached();
    let live = same_live(&before, &stats(), false);
    say(&format!(
        "concurrency: 64 threads x {rounds} rounds (own engine, 2 shared): {} failures",
        failures.len()
    ));
    for f in failures.iter().take(20) {
        say(&format!("  FAIL {f}"));
    }
    assert!(
        failures.is_empty(),
        "{} concurrent checks failed",
        failures.len()
    );
    live.expect("leaks after the concurrent run");
}

fn worker(dev: Dev, i: u64, rounds: usize, shared: &[Gcm], shared_keys: &[Vec<u8>]) -> Vec<String> {
    let mut rng = Rng(1000 + i);
    let mut bad = Vec::new();
    let key = rng.bytes([16, 24, 32][i as usize % 3]);
    let own = cuda(&key);
    let eng = CudaEngine::new(&key, 0).expect("engine");
    for round in 0..rounds {
        let len = if (i + round as u64).is_multiple_of(16) {
            5 * MIB + 1
        } else {
            1 + (rng.next() % 20_000) as usize
        };
        for (which, (gcm, k)) in [
            (&own, &key),
            (&shared[i as usize % 2], &shared_keys[i as usize % 2]),
        ]
        .into_iter()
        .enumerate()
        {
            let nonce = rng.nonce();
            let pt = rng.bytes(len);
            let mut buf = pt.clone();
            let mut tag = [0u8; 16];
            let r = gcm.encrypt_detached(&nonce, b"mt", &mut buf, &mut tag);
            let (ct, t) = expected_seal(dev, k, &nonce, b"mt", &pt);
            if r.is_err() || buf != ct || t.is_some_and(|t| t != tag) {
                bad.push(format!(
                    "thread {i} round {round} engine {which}: seal {len} B: {r:?}"
                ));
                continue;
            }
            let mut forged = tag;
            forged[0] ^= 1;
            let r = gcm.decrypt_detached(&nonce, b"mt", &mut buf, &forged);
            if r != Err(Error::Authentication) || buf != ct {
                bad.push(format!(
                    "thread {i} round {round} engine {which}: forged open: {r:?}"
                ));
            }
            let r = gcm.decrypt_detached(&nonce, b"mt", &mut buf, &tag);
            if r.is_err() || buf != pt {
                bad.push(format!(
                    "thread {i} round {round} engine {which}: open: {r:?}"
                ));
            }
        }
        // device-resident
        let nonce = rng.nonce();
        let n = 1 + (rng.next() % 50_000) as usize;
        let pt = rng.bytes(n);
        let mut tag = [0u8; 16];
        let r = DeviceBuf::from_host(&pt, 0).and_then(|mut d| {
            let mut dtag = DeviceBuf::new(16, 0)?;
            seal_dev(&eng, &nonce, &mut d, &mut dtag, &mut tag)?;
            let ct = d.to_vec()?;
            let job = DeviceJob {
                key: 0,
                nonce: &nonce,
                aad: b"",
                data: &mut d,
                tag: &mut dtag,
            };
            eng.open_async(None, job, 16)?.wait()?;
            Ok((ct, d.to_vec()?))
        });
        let (want, t) = expected_seal(dev, &key, &nonce, b"", &pt);
        match r {
            Ok((ct, back)) if ct == want && back == pt && t.is_none_or(|t| t == tag) => {}
            other => bad.push(format!(
                "thread {i} round {round}: device calls: {:?}",
                other.err()
            )),
        }
        // a batch on the own engine
        let lens = [0usize, 17, 1000, 4096, 33_333];
        let nonces: Vec<[u8; 12]> = lens.iter().map(|_| rng.nonce()).collect();
        let pts: Vec<Vec<u8>> = lens.iter().map(|&n| rng.bytes(n)).collect();
        let mut bufs = pts.clone();
        let mut tags = vec![[0u8; 16]; lens.len()];
        let mut jobs: Vec<SealJob<'_>> = bufs
            .iter_mut()
            .zip(tags.iter_mut())
            .enumerate()
            .map(|(j, (buf, tag))| SealJob {
                nonce: &nonces[j],
                aad: b"b",
                buf,
                tag,
            })
            .collect();
        let r = own.encrypt_batch(&mut jobs);
        drop(jobs);
        let right = (0..lens.len()).all(|j| {
            let (ct, t) = expected_seal(dev, &key, &nonces[j], b"b", &pts[j]);
            bufs[j] == ct && t.is_none_or(|t| t == tags[j])
        });
        if r.is_err() || !right {
            bad.push(format!("thread {i} round {round}: batch: {r:?}"));
        }
    }
    bad
}

/// Faults while many threads use the backend: each call either fails cleanly with the injected
/// fault (buffer zeroed, no tag) or gives the right result; afterwards every thread's next call works.
#[test]
fn faults_under_concurrency() {
    let (_turn, dev) = turn();
    let mut t = Tally::default();
    let shared_key = vec![9u8; 32];
    let shared = cuda(&shared_key);
    let eight = |base: u64| -> Vec<Result<bool, String>> {
        std::thread::scope(|sc| {
            let hs: Vec<_> = (0..8u64)
                .map(|i| {
                    let (shared, shared_key) = (&shared, &shared_key);
                    sc.spawn(move || concurrent_call(dev, base + i, shared, shared_key))
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
                .collect()
        })
    };
    // A clean run counts the calls of each kind (the threads interleave differently each time, so a
    // count near the end may not be reached: such cases are reported as not reached).
    fault::release_cached();
    fault::disarm();
    fault::reset_counts();
    let clean = eight(0);
    assert!(
        clean.iter().all(|r| r == &Ok(true)),
        "clean concurrent run: {clean:?}"
    );
    let calls: Vec<(Op, u64)> = Op::ALL.iter().map(|&op| (op, fault::calls(op))).collect();
    let mut unreached = 0;
    for (op, n) in calls.into_iter().filter(|&(_, n)| n > 0) {
        let mid = (n / 2).max(1);
        for (nth, mode) in [
            (1, Mode::Once),
            (mid, Mode::Once),
            (n, Mode::Once),
            (mid, Mode::ContextLost),
        ] {
            let what = format!("8 threads: {op} #{nth}/{n} {mode:?}");
            fault::release_cached();
            let before = stats();
            let (results, fired, again) = bounded(&what, CASE_LIMIT, || {
                fault::arm(op, nth, mode);
                let results = eight(100);
                let fired = fault::disarm();
                (results, fired, eight(200))
            });
            let mut errs: Vec<String> = results.iter().filter_map(|r| r.clone().err()).collect();
            errs.extend(again.iter().filter_map(|r| match r {
                Ok(true) => None,
                Ok(false) => Some("a call after the fault failed".into()),
                Err(e) => Some(format!("after the fault: {e}")),
            }));
            fault::release_cached();
            if let Err(e) = same_live(&before, &stats(), mode == Mode::ContextLost) {
                errs.push(e);
            }
            if errs.is_empty() && fired == 0 {
                unreached += 1;
                continue;
            }
            t.cases += 1;
            if !errs.is_empty() {
                t.failures.push(format!("{what}: {}", errs.join("; ")));
            } else if results.iter().any(|r| r == &Ok(false)) {
                t.errors += 1;
            } else {
                t.absorbed += 1;
            }
        }
    }
    say(&format!(
        "faults under concurrency: {unreached} cases not reached"
    ));
    t.finish("faults under concurrency");
}

/// One host seal (own engine or the shared one) that may meet a fault: `Ok(true)` right result,
/// `Ok(false)` a clean failure, `Err` a broken property.
fn concurrent_call(dev: Dev, i: u64, shared: &Gcm, shared_key: &[u8]) -> Result<bool, String> {
    let mut rng = Rng(7000 + i);
    let len = if i.is_multiple_of(2) { 5 * MIB } else { 3000 };
    let pt = rng.bytes(len);
    let nonce = rng.nonce();
    let mut buf = pt.clone();
    let mut tag = [SENTINEL; 16];
    let own_key = rng.bytes(16);
    let (r, key) = if i % 4 < 2 {
        (
            shared.encrypt_detached(&nonce, b"", &mut buf, &mut tag),
            shared_key.to_vec(),
        )
    } else {
        let own = match Gcm::with_backend(&own_key, Backend::Cuda) {
            Ok(g) => g,
            Err(e) => return is_injected(&e).map(|()| false),
        };
        (
            own.encrypt_detached(&nonce, b"", &mut buf, &mut tag),
            own_key,
        )
    };
    match r {
        Ok(()) => {
            let (ct, t) = expected_seal(dev, &key, &nonce, b"", &pt);
            ensure(buf == ct && t.is_none_or(|t| t == tag), || {
                format!("thread {i}: Ok but wrong")
            })?;
            Ok(true)
        }
        Err(e) => {
            is_injected(&e).map_err(|m| format!("thread {i}: {m}"))?;
            ensure(zero(&buf) && tag == [SENTINEL; 16], || {
                format!("thread {i}: failed seal left data or a tag")
            })?;
            Ok(false)
        }
    }
}

/// `Pending::detach`: a detached seal runs on and its buffer is read after it; a detached single open
/// still reports a forgery (its verdict lives only in the `Pending`), with the message's ciphertext
/// given back.
#[test]
fn detached_work() {
    let (_turn, dev) = turn();
    let mut rng = Rng(9);
    let key = rng.bytes(32);
    let (nonce, aad, pt) = (rng.nonce(), rng.bytes(3), rng.bytes(50_000));
    let eng = CudaEngine::new(&key, 0).expect("engine");
    let stream = Stream::new(0).expect("stream");
    let mut buf = DeviceBuf::from_host(&pt, 0).expect("buffer");
    let mut tag = DeviceBuf::new(16, 0).expect("tag");
    let job = DeviceJob {
        key: 0,
        nonce: &nonce,
        aad: &aad,
        data: &mut buf,
        tag: &mut tag,
    };
    let sealed = eng.seal_async(Some(&stream), job).and_then(|p| p.detach());
    let (ct, _) = expected_seal(dev, &key, &nonce, &aad, &pt);
    assert!(sealed.is_ok(), "detached seal: {sealed:?}");
    assert_eq!(
        buf.to_vec().expect("download"),
        ct,
        "read after a detached seal"
    );
    let mut t = tag.to_vec().expect("tag");
    t[0] ^= 1;
    tag.upload(0, &t).expect("forged tag");
    let job = DeviceJob {
        key: 0,
        nonce: &nonce,
        aad: &aad,
        data: &mut buf,
        tag: &mut tag,
    };
    let opened = eng
        .open_async(Some(&stream), job, 16)
        .and_then(|p| p.detach());
    assert_eq!(opened, Err(Error::Authentication), "a detached forged open");
    assert_eq!(
        buf.to_vec().expect("download"),
        ct,
        "refused, not given back as its ciphertext"
    );
    stream.synchronize().expect("stream");
}

/// A `PinnedBuffer` whose registration cannot be ended when it is dropped (its context cannot be made
/// current, or the driver refuses to unregister) leaks its memory with the registration: the driver
/// still has the range registered, and no later allocation lands on it (the memory was not freed), so
/// no new buffer is taken for page-locked memory. Emulated device only (the stub counts the
/// registrations).
#[test]
fn pinned_buffer_that_cannot_unregister_leaks_its_memory() {
    let (_turn, dev) = turn();
    if dev != Dev::Emulated {
        say("pinned_buffer_that_cannot_unregister_leaks_its_memory: NOT run on a real GPU");
        return;
    }
    // Above glibc's largest mmap threshold, so that freed memory goes back to the system and the
    // next allocation of its size takes the same addresses.
    const LEN: usize = 33 * MIB;
    fault::release_cached();
    let registrations = || stats().expect("emulator").registrations;
    let before = stats().expect("emulator");

    // An ordinary drop ends the registration.
    drop(PinnedBuffer::zeroed(LEN).expect("PinnedBuffer"));
    assert_eq!(registrations(), before.registrations, "an ordinary drop");

    for call in [fault::Release::SetCurrent, fault::Release::Unregister] {
        let regs = registrations();
        let mut buf = PinnedBuffer::zeroed(LEN).expect("PinnedBuffer");
        buf.fill(0xA5);
        let start = buf.as_ptr() as usize;
        fault::fail_release(call, 1);
        drop(buf);
        assert_eq!(
            fault::fail_release(call, 0),
            1,
            "{call:?}: the drop's call failed"
        );
        assert_eq!(
            registrations(),
            regs + 1,
            "{call:?}: the driver still has the range registered"
        );
        for i in 0..4 {
            let mut v = vec![0u8; LEN];
            let at = v.as_ptr() as usize;
            assert!(
                at + LEN <= start || start + LEN <= at,
                "{call:?}: allocation {i} of {LEN} bytes at {at:#x} lies in the range at {start:#x} \
                 that the driver still has registered: the dropped buffer's memory was freed"
            );
            let pinned = PinnedRegion::scope(&mut v, |r| r[0] = 1);
            assert!(
                pinned.is_ok(),
                "{call:?}: a new buffer page-locks: {pinned:?}"
            );
        }
    }
    let after = stats().expect("emulator");
    assert_eq!(
        (after.invalid_calls, after.last_invalid.as_str()),
        (before.invalid_calls, before.last_invalid.as_str()),
        "no invalid driver call"
    );
}
