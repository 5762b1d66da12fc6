//! Constant time, checked on the compiled kernels: every kernel entry point runs twice with the
//! same public lengths and different secrets (key, hence round keys and H; counter block, hence a
//! secret J0; GHASH state; AAD and data), and the two runs must execute the same instructions in
//! the same order and touch the same memory addresses.
//!
//! How: this program re-runs itself as a child under `ptrace`. The child brackets each run with
//! `raise(SIGSTOP)`; between the two stops the parent single-steps it and records, for every
//! instruction, its address and the effective address of each memory operand (decoded with
//! `iced-x86` from the child's own code, computed from its registers). A branch whose direction
//! depends on a secret changes the instruction sequence; a table lookup indexed by a secret
//! changes an address. Single-stepping is exact, so the check does not depend on timing or load:
//! it gives the same answer on a busy machine as on a quiet one.
//!
//! What it covers: the code that runs for the inputs below, including the key set-up, on every
//! kernel width this CPU runs (each width is forced through its constructor). Secrets are chosen
//! in pairs that would take different paths through the usual shortcuts (counter's last byte just
//! below a carry against far from one, counters about to wrap mod 2^32 against not, zero against
//! random data). What it does not: code paths no input here reaches, kernel widths this CPU lacks,
//! timing differences inside one instruction (AES-NI, PCLMULQDQ and the vector instructions used
//! here are documented as data-independent in timing), and whether secrets are wiped afterwards.
//!
//! Linux x86-64 only (ptrace); elsewhere it reports that it did not run.

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod common;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn main() {
    if std::env::var_os(tracer::CHILD_ENV).is_some() {
        tracee::run();
    } else {
        tracer::run();
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn main() {
    println!("constant_time: needs Linux on x86-64 (ptrace); not run here");
}

/// The allocator of this program: the system's, with a small last-in-first-out cache of freed
/// blocks per size and alignment in front of it, so that one sequence of allocations gets the
/// same addresses every time it repeats. (glibc's malloc splits and merges its larger blocks
/// depending on its whole history, so run A and run B could otherwise get a key at different
/// addresses: a difference the check would report though no secret caused it.)
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod lifo {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, Ordering};

    const SLOTS: usize = 64;

    pub struct Lifo {
        lock: AtomicBool,
        /// (size, align, block); size 0 marks an empty slot
        slots: UnsafeCell<[(usize, usize, usize); SLOTS]>,
    }

    // SAFETY: `slots` is only touched while `lock` is held.
    unsafe impl Sync for Lifo {}

    impl Lifo {
        pub const fn new() -> Lifo {
            Lifo {
                lock: AtomicBool::new(false),
                slots: UnsafeCell::new([(0, 0, 0); SLOTS]),
            }
        }

        fn with<T>(&self, f: impl FnOnce(&mut [(usize, usize, usize); SLOTS]) -> T) -> T {
            while self.lock.swap(true, Ordering::Acquire) {
                std::hint::spin_loop();
            }
            // SAFETY: the lock is held: no other reference to `slots` exists.
            let r = f(unsafe { &mut *self.slots.get() });
            self.lock.store(false, Ordering::Release);
            r
        }
    }

    // SAFETY: blocks come from `System` with the same layout they are cached and handed out
    // for; a cached block is handed out at most once before it is freed again.
    unsafe impl GlobalAlloc for Lifo {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let cached = self.with(|s| {
                let i = s
                    .iter()
                    .rposition(|&(n, a, _)| n == l.size() && a == l.align())?;
                let p = s[i].2;
                s[i] = (0, 0, 0);
                Some(p)
            });
            match cached {
                Some(p) => p as *mut u8,
                // SAFETY: the caller's layout, passed on.
                None => unsafe { System.alloc(l) },
            }
        }

        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            let kept = l.size() > 0
                && self.with(|s| {
                    let Some(slot) = s.iter_mut().find(|x| x.0 == 0) else {
                        return false;
                    };
                    *slot = (l.size(), l.align(), p as usize);
                    true
                });
            if !kept {
                // SAFETY: `p` came from `System` with layout `l`.
                unsafe { System.dealloc(p, l) }
            }
        }
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[global_allocator]
static ALLOC: lifo::Lifo = lifo::Lifo::new();

/// The runs to compare: what the child executes and the parent reads back.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod cases {
    use gcmx_x86::StitchedKey;

    /// An entry point of the kernel crate.
    #[derive(Clone, Copy, Debug)]
    pub enum Op {
        /// Key set-up: expansion, `H`, its powers.
        New,
        Seal,
        Open,
        Ghash,
        EncryptBlock,
        SealMessage,
        OpenMessage,
    }

    /// The kernel widths, each forced through its constructor.
    pub type Ctor = fn(&[u8]) -> Option<StitchedKey>;
    pub fn widths() -> Vec<(&'static str, Ctor)> {
        vec![
            ("default", StitchedKey::new as Ctor),
            ("256", StitchedKey::new_256 as Ctor),
            ("narrow", StitchedKey::new_narrow as Ctor),
        ]
    }

    /// One comparison: an entry point, a kernel width, the public lengths, and which pair of
    /// counter blocks the two runs get.
    #[derive(Clone, Debug)]
    pub struct Case {
        pub op: Op,
        pub width: usize,
        pub key_len: usize,
        pub len: usize,
        pub aad_len: usize,
        pub ctr_pair: usize,
    }

    /// The last 32-bit counter word of run A and run B in each pair: far from any carry against
    /// a carry out of the last byte inside the first step; no wrap against a wrap mod 2^32.
    pub const CTR_PAIRS: [(u32, u32); 3] = [
        (0x0000_0000, 0x0000_00F9),
        (0x1234_5601, 0xFFFF_FFF3),
        (0x0000_0100, 0x0101_01FF),
    ];

    pub fn all() -> Vec<Case> {
        let mut v = Vec::new();
        for width in 0..widths().len() {
            for key_len in [16, 24, 32] {
                for op in [Op::New, Op::EncryptBlock] {
                    v.push(Case {
                        op,
                        width,
                        key_len,
                        len: 16,
                        aad_len: 0,
                        ctr_pair: 0,
                    });
                }
            }
            // lengths across every kernel's step (128, 256, 512 bytes) and tail; each length
            // with one pair of counters, each pair at a length with whole steps
            let lens = [0usize, 1, 16, 64, 255, 300, 600, 1031];
            for (i, len) in lens.into_iter().enumerate() {
                for op in [
                    Op::Seal,
                    Op::Open,
                    Op::Ghash,
                    Op::SealMessage,
                    Op::OpenMessage,
                ] {
                    v.push(Case {
                        op,
                        width,
                        key_len: [16, 32, 24][(i + op as usize) % 3],
                        len,
                        aad_len: [0, 13, 64, 100][(i + 2 * op as usize) % 4],
                        ctr_pair: i % CTR_PAIRS.len(),
                    });
                }
            }
        }
        v
    }
}

/// The child: runs every case, warm-up once unbracketed (lazy initialisation such as the CPU
/// feature cache happens there), then run A and run B each between two `SIGSTOP`s.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod tracee {
    use super::cases::{self, Case, Op};
    use gcmx_x86::StitchedKey;
    use std::hint::black_box;

    use super::common::Rng;

    /// One run's secrets; the key's and data's lengths are the case's public lengths. Each run
    /// copies its secrets into one place, so that both runs read them from the same addresses.
    #[derive(Clone)]
    struct Secrets {
        key: [u8; 32],
        key_len: usize,
        ctr: [u8; 16],
        y: u128,
        aad: [u8; 128],
        aad_len: usize,
        data: Vec<u8>,
    }

    impl Default for Secrets {
        fn default() -> Secrets {
            Secrets {
                key: [0; 32],
                key_len: 0,
                ctr: [0; 16],
                y: 0,
                aad: [0; 128],
                aad_len: 0,
                data: Vec::new(),
            }
        }
    }

    impl Secrets {
        fn key(&self) -> &[u8] {
            &self.key[..self.key_len]
        }
        fn aad(&self) -> &[u8] {
            &self.aad[..self.aad_len]
        }
    }

    fn secrets(case: &Case, class: usize, rng: &mut Rng) -> Secrets {
        let mut key = [0u8; 32];
        let mut ctr = [0u8; 16];
        let mut data = vec![0u8; case.len];
        let mut aad = [0u8; 128];
        rng.fill(&mut key[..case.key_len]);
        rng.fill(&mut ctr);
        // class A: all-zero data, class B: random data
        if class == 1 {
            rng.fill(&mut data);
            rng.fill(&mut aad[..case.aad_len]);
        }
        let (a, b) = cases::CTR_PAIRS[case.ctr_pair];
        let low = if class == 0 { a } else { b };
        ctr[12..].copy_from_slice(&low.to_be_bytes());
        let y = u128::from(rng.next()) << 64 | u128::from(rng.next());
        Secrets {
            key,
            key_len: case.key_len,
            ctr,
            y,
            aad,
            aad_len: case.aad_len,
            data,
        }
    }

    fn stop() {
        // SAFETY: raise only sends a signal to this thread; the parent catches SIGSTOP.
        let r = unsafe { libc::raise(libc::SIGSTOP) };
        assert_eq!(r, 0, "raise(SIGSTOP)");
    }

    /// Run one entry point on `s`, with `buf` (already holding the data) as the message.
    #[inline(never)]
    fn run_op(op: Op, ctor: cases::Ctor, key: Option<&StitchedKey>, s: &Secrets, buf: &mut [u8]) {
        let Some(key) = key else {
            drop(black_box(ctor(black_box(s.key()))));
            return;
        };
        match op {
            Op::New => unreachable!("key set-up runs without a key"),
            Op::Seal => {
                let mut y = s.y;
                key.seal(&s.ctr, &mut y, buf);
                black_box(y);
            }
            Op::Open => {
                let mut y = s.y;
                key.open(&s.ctr, &mut y, buf);
                black_box(y);
            }
            Op::Ghash => {
                let mut y = s.y;
                key.ghash(&mut y, buf);
                black_box(y);
            }
            Op::EncryptBlock => {
                let mut b = s.ctr;
                key.encrypt_block(&mut b);
                black_box(b);
            }
            // `ctr` as J0: secret, as for a nonce that is not 12 bytes long
            Op::SealMessage => drop(black_box(key.seal_message(&s.ctr, s.aad(), buf))),
            Op::OpenMessage => drop(black_box(key.open_message(&s.ctr, s.aad(), buf))),
        }
    }

    /// One traced run: the parent single-steps from the first stop to the second. Not inlined,
    /// so that run A and run B execute the same code whatever the caller's loop becomes.
    #[inline(never)]
    fn bracketed(
        op: Op,
        ctor: cases::Ctor,
        key: Option<&StitchedKey>,
        s: &Secrets,
        buf: &mut [u8],
    ) {
        stop();
        run_op(op, ctor, key, s, buf);
        stop();
    }

    pub fn run() {
        let widths = cases::widths();
        let mut rng = Rng(0x5eed);
        let mut buf = vec![0u8; 4096];
        let mut slot = Secrets::default();
        for case in cases::all() {
            let (name, ctor) = widths[case.width];
            let pair = [secrets(&case, 0, &mut rng), secrets(&case, 1, &mut rng)];
            // The kernel name tells the parent which kernels ran.
            let kernel = ctor(pair[0].key())
                .expect("CPU runs the kernels")
                .kernel_name();
            println!("{case:?} {name} {kernel}");
            for (i, s) in [&pair[0], &pair[0], &pair[1]].into_iter().enumerate() {
                slot.clone_from(s);
                // Each key is built and dropped outside the brackets, at the same heap address
                // for run A and run B (the allocator hands back the block just freed). Key
                // set-up itself runs inside them, with no other key alive.
                let key = match case.op {
                    Op::New => None,
                    _ => Some(ctor(slot.key()).expect("CPU runs the kernels")),
                };
                let b = &mut buf[..case.len];
                b.copy_from_slice(&slot.data);
                if i == 0 {
                    run_op(case.op, ctor, key.as_ref(), &slot, b);
                } else {
                    bracketed(case.op, ctor, key.as_ref(), &slot, b);
                }
                drop(key);
            }
        }
    }
}

/// The parent: starts the child under ptrace and compares the traces of each pair of runs.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod tracer {
    use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};
    use std::collections::HashMap;
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    pub const CHILD_ENV: &str = "GCMX_CONSTANT_TIME_CHILD";

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
            // A vector index (gather/scatter): the addresses are per element and the kernels
            // use none; fail rather than pass unchecked.
            other => panic!("memory operand indexed by {other:?}"),
        }
    }

    /// The effective addresses of `i`'s memory operands under registers `r` (segment bases left
    /// out: they are the same for both runs).
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

    pub fn run() {
        let exe = std::env::current_exe().expect("own path");
        let mut cmd = Command::new(exe);
        cmd.env(CHILD_ENV, "1").stdout(Stdio::piped());
        // SAFETY: between fork and exec the closure only calls ptrace(PTRACE_TRACEME), which is
        // async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let r = libc::ptrace(
                    libc::PTRACE_TRACEME,
                    0,
                    std::ptr::null_mut::<libc::c_void>(),
                    0usize,
                );
                if r == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let mut child = cmd.spawn().expect("start the traced child");
        let pid = child.id() as libc::pid_t;
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
        let mut out = String::new();
        child
            .stdout
            .take()
            .expect("piped")
            .read_to_string(&mut out)
            .expect("child's output");
        // (already reaped by `wait`)
        drop(child);

        let names: Vec<&str> = out.lines().collect();
        assert_eq!(traces.len(), 2 * names.len(), "two traced runs per case");
        let mut failed = 0;
        let mut steps = 0;
        for (name, pair) in names.iter().zip(traces.chunks_exact(2)) {
            let (a, b) = (&pair[0], &pair[1]);
            steps += a.len() + b.len();
            // a run that traced almost nothing would prove nothing
            assert!(a.len() > 20, "{name}: only {} instructions traced", a.len());
            if let Some(k) = (0..a.len().max(b.len())).find(|&k| a.get(k) != b.get(k)) {
                failed += 1;
                for step in &a[k.saturating_sub(3)..k.min(a.len())] {
                    println!("  before, both runs: {step:x?}");
                }
                println!(
                    "FAILED {name}: the runs differ at instruction {k} of {}/{}: A {:x?}, B {:x?}",
                    a.len(),
                    b.len(),
                    a.get(k),
                    b.get(k)
                );
            }
        }
        let kernels: std::collections::BTreeSet<&str> =
            names.iter().filter_map(|n| n.rsplit(' ').next()).collect();
        println!(
            "constant_time: {} cases, {steps} instructions single-stepped, kernels {kernels:?}",
            names.len()
        );
        println!(
            "test result: {}. {} passed; {failed} failed",
            if failed == 0 { "ok" } else { "FAILED" },
            names.len() - failed
        );
        if failed > 0 {
            std::process::exit(1);
        }
    }
}
