//! The constant-time tracer the `constant_time` tests share (gcmx-x86's for the kernels,
//! gcmx-core's for the framing around them, which includes this file by path).
//!
//! A test program re-runs itself as a child under `ptrace`. The child runs each case several
//! times with the same public lengths and different secrets, each traced run bracketed by
//! [`stop`] (`raise(SIGSTOP)`); between the two stops the parent single-steps it and records,
//! for every instruction, its address and the effective address of each memory operand
//! (decoded with `iced-x86` from the child's own code, computed from its registers). A branch
//! whose direction depends on a secret changes the instruction sequence; a table lookup indexed
//! by a secret changes an address. Single-stepping is exact, so the check does not depend on
//! timing or load: it gives the same answer on a busy machine as on a quiet one.
//!
//! Protocol: before the traced runs of a case the child prints one line to stdout,
//! `EXPECT<TAB>description`, where `EXPECT` has one character per traced run after the first
//! (the reference): `=` if that run's trace must equal the reference's, `!` if it must differ
//! (the self-checks, whose leak is deliberate and must be caught). The child's other output goes
//! to stderr.
#![allow(dead_code)]

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};
use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Set in the child's environment: the program runs its cases instead of tracing.
pub const CHILD_ENV: &str = "GCMX_CONSTANT_TIME_CHILD";

/// Whether this process is the traced child.
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// The child: announce a case, `expect` as in the module's protocol.
pub fn announce(expect: &str, description: &str) {
    assert!(expect.chars().all(|c| c == '=' || c == '!'));
    assert!(!description.contains('\n'));
    println!("{expect}\t{description}");
}

/// The child: stop for the parent, which starts or ends a trace here.
pub fn stop() {
    // SAFETY: raise only sends a signal to this thread; the parent catches SIGSTOP.
    let r = unsafe { libc::raise(libc::SIGSTOP) };
    assert_eq!(r, 0, "raise(SIGSTOP)");
}

/// The allocator of the test programs: the system's, with a small last-in-first-out cache of
/// freed blocks per size and alignment in front of it, so that one sequence of allocations gets
/// the same addresses every time it repeats. (glibc's malloc splits and merges its larger blocks
/// depending on its whole history, so two runs could otherwise get a key at different addresses:
/// a difference the check would report though no secret caused it.)
pub mod lifo {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, Ordering};

    const SLOTS: usize = 64;

    pub struct Lifo {
        lock: AtomicBool,
        /// (size, align, block, when freed); size 0 marks an empty slot
        slots: UnsafeCell<[(usize, usize, usize, u64); SLOTS]>,
        /// frees so far: the order of the cached blocks
        frees: UnsafeCell<u64>,
    }

    // SAFETY: `slots` and `frees` are only touched while `lock` is held.
    unsafe impl Sync for Lifo {}

    type Slots = [(usize, usize, usize, u64); SLOTS];

    impl Lifo {
        pub const fn new() -> Lifo {
            Lifo {
                lock: AtomicBool::new(false),
                slots: UnsafeCell::new([(0, 0, 0, 0); SLOTS]),
                frees: UnsafeCell::new(0),
            }
        }

        fn with<T>(&self, f: impl FnOnce(&mut Slots, &mut u64) -> T) -> T {
            while self.lock.swap(true, Ordering::Acquire) {
                std::hint::spin_loop();
            }
            // SAFETY: the lock is held: no other reference to `slots` or `frees` exists.
            let r = f(unsafe { &mut *self.slots.get() }, unsafe {
                &mut *self.frees.get()
            });
            self.lock.store(false, Ordering::Release);
            r
        }
    }

    // SAFETY: blocks come from `System` with the same layout they are cached and handed out
    // for; a cached block is handed out at most once before it is freed again.
    unsafe impl GlobalAlloc for Lifo {
        /// The block of this layout freed last (so that a block freed and asked for again is
        /// the same block, whatever else of its size is cached), else a new one.
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let cached = self.with(|s, _| {
                let i = (0..SLOTS)
                    .filter(|&i| s[i].0 == l.size() && s[i].1 == l.align())
                    .max_by_key(|&i| s[i].3)?;
                let p = s[i].2;
                s[i] = (0, 0, 0, 0);
                Some(p)
            });
            match cached {
                Some(p) => p as *mut u8,
                // SAFETY: the caller's layout, passed on.
                None => unsafe { System.alloc(l) },
            }
        }

        /// Cached, in an empty slot or in place of the block freed longest ago (which goes
        /// back to the system: the cache keeps the blocks freed last, whatever came before).
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            if l.size() == 0 {
                // SAFETY: `p` came from `System` with layout `l`.
                return unsafe { System.dealloc(p, l) };
            }
            let evicted = self.with(|s, frees| {
                let i = (0..SLOTS)
                    .min_by_key(|&i| (s[i].0 != 0, s[i].3))
                    .expect("slots");
                let old = s[i];
                *frees += 1;
                s[i] = (l.size(), l.align(), p as usize, *frees);
                (old.0 != 0).then_some(old)
            });
            if let Some((size, align, block, _)) = evicted {
                let layout = Layout::from_size_align(size, align).expect("a cached layout");
                // SAFETY: a cached block came from `System` with this layout.
                unsafe { System.dealloc(block as *mut u8, layout) }
            }
        }
    }
}

/// One executed instruction: its address and the effective address of each memory operand.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Step {
    rip: u64,
    mem: [u64; 2],
}

/// Wait for the child's next stop; `None` when it exited.
fn wait(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    // SAFETY: waitpid writes only `status`.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    assert_eq!(r, pid, "waitpid: {}", std::io::Error::last_os_error());
    if libc::WIFEXITED(status) {
        assert_eq!(libc::WEXITSTATUS(status), 0, "child failed");
        return None;
    }
    assert!(!libc::WIFSIGNALED(status), "child killed by a signal");
    assert!(libc::WIFSTOPPED(status));
    Some(libc::WSTOPSIG(status))
}

fn ptrace(req: libc::c_uint, pid: libc::pid_t, data: usize) {
    // SAFETY: requests without an address argument; the child is traced by this process.
    let r = unsafe { libc::ptrace(req, pid, std::ptr::null_mut::<libc::c_void>(), data) };
    assert_ne!(r, -1, "ptrace {req}: {}", std::io::Error::last_os_error());
}

fn regs(pid: libc::pid_t) -> libc::user_regs_struct {
    // SAFETY: user_regs_struct is plain integers; PTRACE_GETREGS fills it.
    let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    // SAFETY: the child is stopped and traced by this process; `r` is writable.
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGS,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            &mut r as *mut libc::user_regs_struct,
        )
    };
    assert_ne!(
        rc,
        -1,
        "PTRACE_GETREGS: {}",
        std::io::Error::last_os_error()
    );
    r
}

/// Decode the instruction at `rip` in the child.
fn decode(pid: libc::pid_t, rip: u64) -> Instruction {
    let mut bytes = [0u8; 16];
    let local = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let remote = libc::iovec {
        iov_base: rip as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: reads at most 16 bytes of the child into `bytes`.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    assert!(
        n > 0,
        "process_vm_readv: {}",
        std::io::Error::last_os_error()
    );
    let mut d = Decoder::with_ip(64, &bytes[..n as usize], rip, DecoderOptions::NONE);
    let i = d.decode();
    assert!(!i.is_invalid(), "undecodable instruction at {rip:#x}");
    i
}

fn reg(r: &libc::user_regs_struct, x: Register) -> u64 {
    match x.full_register() {
        Register::None => 0,
        Register::RAX => r.rax,
        Register::RBX => r.rbx,
        Register::RCX => r.rcx,
        Register::RDX => r.rdx,
        Register::RSI => r.rsi,
        Register::RDI => r.rdi,
        Register::RBP => r.rbp,
        Register::RSP => r.rsp,
        Register::R8 => r.r8,
        Register::R9 => r.r9,
        Register::R10 => r.r10,
        Register::R11 => r.r11,
        Register::R12 => r.r12,
        Register::R13 => r.r13,
        Register::R14 => r.r14,
        Register::R15 => r.r15,
        Register::RIP => 0,
        // A vector index (gather/scatter): the addresses are per element and the code checked
        // uses none; fail rather than pass unchecked.
        other => panic!("memory operand indexed by {other:?}"),
    }
}

/// The effective addresses of `i`'s memory operands under registers `r` (segment bases left
/// out: they are the same for every run).
fn addresses(i: &Instruction, r: &libc::user_regs_struct) -> [u64; 2] {
    let mut out = [0u64; 2];
    // `lea` and the long `nop`s name a memory operand but touch no memory: arithmetic.
    if matches!(i.mnemonic(), Mnemonic::Lea | Mnemonic::Nop) {
        return out;
    }
    let mut n = 0;
    for k in 0..i.op_count() {
        let a = match i.op_kind(k) {
            OpKind::Memory => {
                let base = if i.is_ip_rel_memory_operand() {
                    0
                } else {
                    reg(r, i.memory_base())
                };
                base.wrapping_add(
                    reg(r, i.memory_index()).wrapping_mul(u64::from(i.memory_index_scale())),
                )
                .wrapping_add(i.memory_displacement64())
            }
            OpKind::MemorySegSI
            | OpKind::MemorySegESI
            | OpKind::MemorySegRSI
            | OpKind::MemorySegDI
            | OpKind::MemorySegEDI
            | OpKind::MemorySegRDI => r.rsi,
            OpKind::MemoryESDI | OpKind::MemoryESEDI | OpKind::MemoryESRDI => r.rdi,
            _ => continue,
        };
        out[n.min(1)] ^= a.rotate_left(n as u32 * 17);
        n += 1;
    }
    out
}

/// Single-step from one `SIGSTOP` of the child to the next, recording every instruction.
fn trace(pid: libc::pid_t, cache: &mut HashMap<u64, Instruction>) -> Vec<Step> {
    let mut steps = Vec::new();
    loop {
        let r = regs(pid);
        let i = *cache.entry(r.rip).or_insert_with(|| decode(pid, r.rip));
        steps.push(Step {
            rip: r.rip,
            mem: addresses(&i, &r),
        });
        ptrace(libc::PTRACE_SINGLESTEP, pid, 0);
        match wait(pid) {
            Some(libc::SIGTRAP) => {}
            Some(libc::SIGSTOP) => return steps,
            other => panic!("child stopped by {other:?} while traced"),
        }
    }
}

/// In the child between fork and exec: ask to be traced by the parent.
fn trace_me() -> std::io::Result<()> {
    // SAFETY: PTRACE_TRACEME reads no pointer arguments.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_TRACEME,
            0,
            std::ptr::null_mut::<libc::c_void>(),
            0usize,
        )
    };
    if r == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What the parent found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The cases' descriptions, in the child's order.
    pub cases: Vec<String>,
    /// Their expectations as announced (one character per run after the reference).
    pub expects: Vec<String>,
    /// Cases whose traces did not meet their expectation.
    pub failed: usize,
    /// Traced runs, the references included.
    pub runs: usize,
    /// Instructions single-stepped in all traced runs.
    pub steps: usize,
    /// Comparisons made, and of them those expected to differ (the self-checks' leaks caught).
    pub comparisons: usize,
    pub leaks_caught: usize,
}

/// The parent: start this program as a traced child, trace every bracketed run and compare
/// each case's runs with its reference as the child announced. Prints one line per failure.
pub fn trace_self() -> Outcome {
    let exe = std::env::current_exe().expect("own path");
    let mut cmd = Command::new(exe);
    cmd.env(CHILD_ENV, "1").stdout(Stdio::piped());
    // SAFETY: `trace_me` runs between fork and exec and only calls ptrace, which is
    // async-signal-safe.
    unsafe { cmd.pre_exec(trace_me) };
    let mut child = cmd.spawn().expect("start the traced child");
    let pid = child.id() as libc::pid_t;
    // The child's announcements are read on another thread while this one traces: a child
    // blocked on a full pipe would never reach its next stop.
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).expect("child's output");
        out
    });
    // the stop at exec
    assert_eq!(wait(pid), Some(libc::SIGTRAP));
    ptrace(
        libc::PTRACE_SETOPTIONS,
        pid,
        libc::PTRACE_O_EXITKILL as usize,
    );

    let mut cache = HashMap::new();
    let mut traces = Vec::new();
    let mut sig = 0usize;
    loop {
        ptrace(libc::PTRACE_CONT, pid, sig);
        match wait(pid) {
            None => break,
            Some(libc::SIGSTOP) => {
                sig = 0;
                traces.push(trace(pid, &mut cache));
            }
            // any other signal goes on to the child
            Some(s) => sig = s as usize,
        }
    }
    let out = reader.join().expect("reader thread");
    // (already reaped by `wait`)
    drop(child);

    let mut o = Outcome::default();
    let mut rest = &traces[..];
    for line in out.lines() {
        let (expect, name) = line.split_once('\t').expect("EXPECT<TAB>description");
        let n = 1 + expect.len();
        assert!(
            rest.len() >= n,
            "{name}: {n} traced runs announced, fewer traced"
        );
        let (runs, r) = rest.split_at(n);
        rest = r;
        o.cases.push(name.to_string());
        o.expects.push(expect.to_string());
        o.runs += n;
        let reference = &runs[0];
        // a run that traced almost nothing would prove nothing
        assert!(
            reference.len() > 20,
            "{name}: only {} instructions traced",
            reference.len()
        );
        o.steps += runs.iter().map(Vec::len).sum::<usize>();
        let mut ok = true;
        for (j, (b, e)) in runs[1..].iter().zip(expect.chars()).enumerate() {
            let a = reference;
            o.comparisons += 1;
            let diff = (0..a.len().max(b.len())).find(|&k| a.get(k) != b.get(k));
            match (diff, e) {
                (None, '=') => {}
                (Some(_), '!') => o.leaks_caught += 1,
                (None, _) => {
                    ok = false;
                    println!(
                        "FAILED {name}: secret set {} was meant to leak but traced as the \
                         reference ({} instructions): the check would miss this leak",
                        j + 1,
                        a.len()
                    );
                }
                (Some(k), _) => {
                    ok = false;
                    for step in &a[k.saturating_sub(3)..k.min(a.len())] {
                        println!("  before, both runs: {step:x?}");
                    }
                    println!(
                        "FAILED {name}: secret set {} differs from the reference at \
                         instruction {k} of {}/{}: reference {:x?}, set {} {:x?}",
                        j + 1,
                        a.len(),
                        b.len(),
                        a.get(k),
                        j + 1,
                        b.get(k)
                    );
                }
            }
        }
        if !ok {
            o.failed += 1;
        }
    }
    assert!(
        rest.is_empty(),
        "{} traced runs without an announced case",
        rest.len()
    );
    o
}
