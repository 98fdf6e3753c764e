//! The exact owner-running oracle: an eBPF program on the `sched_switch`
//! tracepoint keeps, for every registered thread of this process, a word
//! that is odd while the thread is on a CPU — the kernel's `owner->on_cpu`
//! test, answered in userspace with one plain load (feature `bpf`).
//!
//! # The table
//!
//! One BPF array map of [`ENTRIES`] 8-byte entries, created
//! `BPF_F_MMAPABLE` and mapped into the process. Thread `tid` lives in
//! entry `tid & MASK`:
//!
//! ```text
//!  entry = [ tid : u32 | state : u32 ]
//!            |          0      unknown (registered, no switch seen yet)
//!            |          odd    on a CPU    (the seq of its last switch-in)
//!            |          even   off a CPU   (the seq of its last switch-out)
//!            registered thread's tid (0: free); written by userspace only
//! ```
//!
//! State transitions, made by the program on each `sched_switch(prev,
//! next)` for an entry whose `tid` matches:
//!
//! ```text
//!  prev (switch out): state -> (state + 1) & !1     odd -> even, 0 -> 0
//!  next (switch in):  state -> (state | 1) + 2      any -> odd
//! ```
//!
//! A thread's switch-out always completes before its next switch-in (on
//! any CPU: the scheduler waits for `on_cpu` to clear before moving a
//! task), so the program's plain read-modify-writes on one entry never
//! race each other. Tids are unique system-wide, so the `tid` tag filters
//! the program to this process's registered threads.
//!
//! The table is only as complete as the tracepoint: a switch-in it does
//! not report leaves a running thread reading "off" until its next switch
//! (seen on a Firecracker guest in 0.02–0.04% of reads, mostly after a
//! switch from the sandbox agent's threads, which ftrace never records
//! either; `docs/oncpu-bpf.md`, "Only as complete as the tracepoint"). Readers then take
//! a running owner for a sleeping one and stop spinning: a lost spin, never
//! a wrong answer about mutual exclusion.
//!
//! # Registration
//!
//! Tied to klock's thread context ([`crate::thread`]): a thread registers
//! itself (state 1: it is running) when its context is created and clears
//! its tag when it exits. Loading the program sweeps the threads alive at
//! that moment (state 0 until their next switch-in). Two live threads
//! whose tids collide in the table keep the first; the second reads as
//! unknown, and the locks then use their time budget for it.
//!
//! # The program
//!
//! 37–39 eBPF instructions, assembled below from their encodings and
//! loaded with the `bpf` syscall, hooked one of two ways ([`Hook`]). An
//! independent eBPF decoder and interpreter (the `rbpf` crate) checks the
//! encoding and the transitions without a kernel
//! (`tests/oncpu_bpf_program.rs`, on [`program_bytes`]).
//!
//! * **`tp_btf`** (default): a BTF-typed raw tracepoint program
//!   (`BPF_PROG_TYPE_TRACING`, `BPF_TRACE_RAW_TP`) gets `sched_switch`'s
//!   arguments and reads `prev->pid` / `next->pid` itself, at the offset
//!   the kernel's BTF (`/sys/kernel/btf/vmlinux`) gives for
//!   `task_struct.pid`. Attached with `BPF_RAW_TRACEPOINT_OPEN`.
//! * **perf tracepoint** (fallback without BTF): a
//!   `BPF_PROG_TYPE_TRACEPOINT` program reads `prev_pid` / `next_pid` from
//!   the `sched_switch` record, at the offsets the tracepoint's `format`
//!   file in tracefs gives; attached with `perf_event_open
//!   (PERF_TYPE_TRACEPOINT)` + `PERF_EVENT_IOC_SET_BPF`. The kernel fills
//!   the whole record first, so every switch costs more (`klock bench
//!   ctxswitch` measures both).
//!
//! No clang, libbpf or ELF toolchain: the loader is a handful of
//! syscalls. The kernel lets only GPL-compatible programs read
//! `task_struct` through BTF, so the program (klock's own instructions)
//! is declared "Dual MIT/GPL" to the kernel.
//!
//! Needs `CAP_BPF` + `CAP_PERFMON` (in practice root) and a kernel with
//! `CONFIG_BPF_EVENTS`; for the fallback, tracefs is mounted at
//! `/sys/kernel/tracing` if it is not mounted anywhere.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::sync::Mutex;

/// Entries in the table (a power of two).
pub const ENTRIES: u32 = 1 << 16;
/// `tid & MASK` is a thread's entry.
pub const MASK: u32 = ENTRIES - 1;
/// Name of the program and of its map (as `bpftool prog` shows them).
pub const PROG_NAME: &str = "klock_oncpu";

/// One table entry (see the module docs).
#[repr(C)]
#[derive(Debug)]
pub struct Entry {
    /// Registered tid, 0 when free. Written by userspace only.
    pub tid: AtomicU32,
    /// 0 unknown, odd on CPU, even off CPU. Written by the program.
    pub state: AtomicU32,
}

/// What the table says about a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuState {
    /// Not registered, or no switch seen since it registered.
    Unknown,
    /// On a CPU; the value is its switch sequence number.
    On(u32),
    /// Off a CPU; the value is its switch sequence number.
    Off(u32),
}

/// Why the program could not be loaded, as one line for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BpfError(pub String);

impl std::fmt::Display for BpfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BpfError {}

// ---- the table: created once per process, never unmapped ---------------

/// The mapped table (null until the first load). It is never unmapped, so
/// a spinner that read the pointer can always dereference it.
static TABLE: AtomicPtr<Entry> = AtomicPtr::new(core::ptr::null_mut());
/// Whether the program is attached now: the table is only trusted then.
static ATTACHED: AtomicBool = AtomicBool::new(false);

/// The process's BPF objects: the map (kept for the process's life) and,
/// while loaded, the program and the perf event that attaches it.
struct State {
    map: Option<OwnedFd>,
    prog: Option<Attached>,
}

struct Attached {
    /// Dropping this detaches the program (a perf event or a raw
    /// tracepoint link).
    _link: OwnedFd,
    _prog: OwnedFd,
    id: u32,
    hook: Hook,
}

/// How the program is attached to `sched_switch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// A BTF-typed raw tracepoint (`tp_btf`, kernel ≥ 5.5 with BTF): the
    /// program gets the tracepoint's arguments directly. The default.
    TpBtf,
    /// A perf tracepoint: the kernel first fills the `sched_switch`
    /// record (two comm copies and all), then runs the program. Needs
    /// tracefs, no BTF. The fallback.
    Tracepoint,
}

impl Hook {
    /// `"tp_btf"` / `"tracepoint"`, as `KLOCK_BPF_HOOK` spells them.
    pub fn name(self) -> &'static str {
        match self {
            Self::TpBtf => "tp_btf",
            Self::Tracepoint => "tracepoint",
        }
    }
}

static STATE: Mutex<State> = Mutex::new(State {
    map: None,
    prog: None,
});

#[inline]
fn table() -> Option<&'static [Entry]> {
    // Acquire pairs with the Release store in `ensure_map`: the mapping
    // is set up before the pointer is seen.
    let p = TABLE.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: the mapping holds ENTRIES entries and is never unmapped.
    Some(unsafe { core::slice::from_raw_parts(p, ENTRIES as usize) })
}

/// What the table says about thread `tid` now (`Unknown` while the
/// program is not attached).
#[inline]
pub fn cpu_state(tid: u32) -> CpuState {
    if !ATTACHED.load(Ordering::Relaxed) {
        return CpuState::Unknown;
    }
    let Some(t) = table() else {
        return CpuState::Unknown;
    };
    let e = &t[(tid & MASK) as usize];
    // Relaxed: a hint; the program's stores have no partner to pair with.
    let s = e.state.load(Ordering::Relaxed);
    if e.tid.load(Ordering::Relaxed) != tid || s == 0 {
        CpuState::Unknown
    } else if s & 1 == 1 {
        CpuState::On(s)
    } else {
        CpuState::Off(s)
    }
}

/// Whether the program is attached now.
pub fn is_loaded() -> bool {
    ATTACHED.load(Ordering::Relaxed)
}

/// Id of the attached program (as `bpftool prog` lists it), if loaded.
pub fn prog_id() -> Option<u32> {
    lock_state().prog.as_ref().map(|a| a.id)
}

/// How the attached program is hooked, if loaded.
pub fn hook() -> Option<Hook> {
    lock_state().prog.as_ref().map(|a| a.hook)
}

/// Register thread `tid` in the table. `running`: the caller is that
/// thread (state "on"); else state "unknown" until its next switch-in.
fn register(t: &[Entry], tid: u32, running: bool) {
    let e = &t[(tid & MASK) as usize];
    // Relaxed: the tag is a filter; a collision loser simply stays unknown.
    let holder = match e
        .tid
        .compare_exchange(0, tid, Ordering::Relaxed, Ordering::Relaxed)
    {
        Ok(_) => tid,
        Err(other) => other,
    };
    if holder == tid && running {
        e.state.store(1, Ordering::Relaxed);
    }
}

/// A thread context was created (called by [`crate::thread`]).
pub(crate) fn on_thread_start(tid: u32) {
    // SeqCst pairs with the SeqCst store in `ensure_map` and the slot
    // sweep after it: either this thread sees the table, or the sweep
    // sees this thread's slot (whose tid was stored before this call).
    if TABLE.load(Ordering::SeqCst).is_null() {
        return;
    }
    if let Some(t) = table() {
        register(t, tid, true);
    }
}

/// A thread context is being destroyed (called by [`crate::thread`]).
pub(crate) fn on_thread_exit(tid: u32) {
    if let Some(t) = table() {
        let e = &t[(tid & MASK) as usize];
        // Only our own tag; Relaxed as in `register`.
        let _ = e
            .tid
            .compare_exchange(tid, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
}

fn lock_state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Load and attach the program (the table is created on first use), as a
/// `tp_btf` program, else through a perf tracepoint (`KLOCK_BPF_HOOK=
/// tp_btf|tracepoint` forces one). Does nothing if it is attached already.
pub fn load() -> Result<(), BpfError> {
    let forced = match crate::config::bpf_hook() {
        Ok(crate::config::BpfHook::TpBtf) => Some(Hook::TpBtf),
        Ok(crate::config::BpfHook::Tracepoint) => Some(Hook::Tracepoint),
        Ok(crate::config::BpfHook::Auto) => None,
        Err(e) => return Err(BpfError(format!("bpf oracle: {e}"))),
    };
    load_with(forced)
}

/// [`load`] with a chosen hook (`None`: `tp_btf`, else the tracepoint).
/// If a program is attached with another hook, it is replaced.
pub fn load_with(hook: Option<Hook>) -> Result<(), BpfError> {
    let mut st = lock_state();
    if let Some(a) = &st.prog {
        if hook.is_none_or(|h| h == a.hook) {
            return Ok(());
        }
        ATTACHED.store(false, Ordering::Relaxed);
        st.prog = None;
    }
    let map_fd = match &st.map {
        Some(fd) => fd.as_raw_fd(),
        None => {
            let fd = sys::map_create()?;
            let raw = fd.as_raw_fd();
            let p = sys::map_mmap(&fd)?;
            st.map = Some(fd);
            // SeqCst: see `on_thread_start`.
            TABLE.store(p, Ordering::SeqCst);
            raw
        }
    };
    let t = table().expect("table mapped above");
    // Forget states from a previous load: they are stale.
    for e in t {
        e.state.store(0, Ordering::Relaxed);
    }
    let (prog, link, hook) = match hook {
        Some(Hook::Tracepoint) => attach_tracepoint(map_fd)?,
        Some(Hook::TpBtf) => attach_tp_btf(map_fd)?,
        None => match attach_tp_btf(map_fd) {
            Ok(a) => a,
            Err(btf) => attach_tracepoint(map_fd)
                .map_err(|e| BpfError(format!("{e} (and as tp_btf: {btf})")))?,
        },
    };
    let id = sys::prog_id(prog.as_raw_fd())?;
    // Sweep the threads alive now (new ones register themselves).
    for index in 1..=crate::thread::high_water() {
        let tid = crate::thread::slot(index).tid.load(Ordering::SeqCst);
        if tid != 0 {
            register(t, tid, false);
        }
    }
    register(t, crate::thread::current_tid(), true);
    st.prog = Some(Attached {
        _link: link,
        _prog: prog,
        id,
        hook,
    });
    ATTACHED.store(true, Ordering::Relaxed);
    Ok(())
}

type Loaded = (OwnedFd, OwnedFd, Hook);

fn attach_tp_btf(map_fd: i32) -> Result<Loaded, BpfError> {
    // Parsing the kernel's BTF (megabytes) once per process is enough.
    static TARGET: std::sync::OnceLock<Result<btf::Target, String>> = std::sync::OnceLock::new();
    let target = TARGET
        .get_or_init(btf::find)
        .as_ref()
        .map_err(|e| BpfError(format!("bpf oracle: {e}")))?;
    let pid = i16::try_from(target.pid_off)
        .map_err(|_| BpfError("bpf oracle: task_struct.pid offset out of range".into()))?;
    let prog = sys::prog_load(
        &program(map_fd, TidSource::TaskPid(pid)),
        sys::Kind::TpBtf(target.attach_btf_id),
    )?;
    let link = sys::raw_tracepoint_open(prog.as_raw_fd())?;
    Ok((prog, link, Hook::TpBtf))
}

fn attach_tracepoint(map_fd: i32) -> Result<Loaded, BpfError> {
    let tp = Tracepoint::find()?;
    let prog = sys::prog_load(
        &program(
            map_fd,
            TidSource::Record {
                prev: tp.prev_pid_off,
                next: tp.next_pid_off,
            },
        ),
        sys::Kind::Tracepoint,
    )?;
    let link = sys::attach(tp.id, prog.as_raw_fd())?;
    Ok((prog, link, Hook::Tracepoint))
}

/// Detach and unload the program. The table stays mapped (spinners may
/// still read it) but reads as unknown until the next [`load`].
pub fn unload() {
    let mut st = lock_state();
    ATTACHED.store(false, Ordering::Relaxed);
    st.prog = None;
}

// ---- the tracepoint ------------------------------------------------------

struct Tracepoint {
    id: u64,
    prev_pid_off: i16,
    next_pid_off: i16,
}

const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
const EVENT: &str = "events/sched/sched_switch";

impl Tracepoint {
    fn find() -> Result<Self, BpfError> {
        let dir = match TRACEFS
            .iter()
            .find(|d| fs::metadata(format!("{d}/{EVENT}/id")).is_ok())
        {
            Some(d) => d.to_string(),
            None => {
                sys::mount_tracefs(TRACEFS[0])?;
                TRACEFS[0].to_string()
            }
        };
        let read = |f: &str| {
            fs::read_to_string(format!("{dir}/{EVENT}/{f}"))
                .map_err(|e| BpfError(format!("bpf oracle: cannot read {dir}/{EVENT}/{f}: {e}")))
        };
        let id = read("id")?
            .trim()
            .parse()
            .map_err(|_| BpfError("bpf oracle: bad sched_switch tracepoint id".into()))?;
        let format = read("format")?;
        let off = |field: &str| -> Result<i16, BpfError> {
            format
                .lines()
                .find(|l| l.contains(&format!(" {field};")))
                .and_then(|l| l.split("offset:").nth(1))
                .and_then(|s| s.split(';').next())
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| BpfError(format!("bpf oracle: no {field} in sched_switch format")))
        };
        Ok(Self {
            id,
            prev_pid_off: off("prev_pid")?,
            next_pid_off: off("next_pid")?,
        })
    }
}

// ---- the program -----------------------------------------------------------

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Insn {
    code: u8,
    regs: u8, // dst in the low nibble, src in the high nibble
    off: i16,
    imm: i32,
}

// `struct bpf_insn` is 8 bytes with no padding: `program_bytes` relies on it.
const _: () = assert!(core::mem::size_of::<Insn>() == 8);

/// The instructions as the bytes `BPF_PROG_LOAD` hands the kernel: each
/// `struct bpf_insn` in memory order (opcode, the register byte with dst
/// in the low nibble as on a little-endian machine, then `off` and `imm`
/// little-endian). Lets a test decode the very bytes the kernel gets with
/// a decoder of its own, without loading anything.
pub fn program_bytes(insns: &[Insn]) -> &[u8] {
    // SAFETY: `Insn` is repr(C), 8 bytes, no padding (asserted above), and
    // the slice stays borrowed for the result's lifetime.
    unsafe { core::slice::from_raw_parts(insns.as_ptr().cast(), core::mem::size_of_val(insns)) }
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

// Opcodes: class | op | source.
const MOV64_X: u8 = 0x07 | 0xb0 | 0x08;
const MOV64_K: u8 = 0x07 | 0xb0;
const ADD64_K: u8 = 0x07;
const AND64_K: u8 = 0x07 | 0x50;
const ADD32_K: u8 = 0x04;
const AND32_K: u8 = 0x04 | 0x50;
const OR32_K: u8 = 0x04 | 0x40;
const LDXW: u8 = 0x01 | 0x60; // ldx, mem, 32-bit
const LDXDW: u8 = 0x01 | 0x60 | 0x18; // ldx, mem, 64-bit
const STXW: u8 = 0x03 | 0x60; // stx, mem, 32-bit
const LD_IMM64: u8 = 0x18;
const JEQ_K: u8 = 0x05 | 0x10;
const JNE_X: u8 = 0x05 | 0x50 | 0x08;
const CALL: u8 = 0x05 | 0x80;
const EXIT: u8 = 0x05 | 0x90;
const PSEUDO_MAP_FD: u8 = 1;
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R6: u8 = 6;
const R7: u8 = 7;
/// The frame pointer.
const R10: u8 = 10;

/// Where the program finds the two tids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TidSource {
    /// A `tp_btf` program: the context holds the tracepoint's arguments
    /// (`preempt`, `prev`, `next`, …) and `task_struct.pid` is at this
    /// byte offset (from the kernel's BTF).
    TaskPid(i16),
    /// A perf tracepoint program: the context is the `sched_switch`
    /// record, with `prev_pid` and `next_pid` at these offsets (tracefs).
    Record {
        /// Byte offset of `prev_pid` in the record.
        prev: i16,
        /// Byte offset of `next_pid` in the record.
        next: i16,
    },
}

/// The program: for `prev` then `next`, find the entry, check its tag,
/// apply the transition (module docs). Returns 0.
pub fn program(map_fd: i32, src: TidSource) -> Vec<Insn> {
    let mut p = vec![insn(MOV64_X, R6, R1, 0, 0)]; // r6 = ctx
    for next in [false, true] {
        // r7 = the tid.
        match src {
            TidSource::TaskPid(pid) => {
                let arg = if next { 16 } else { 8 }; // args[2] / args[1]
                p.push(insn(LDXDW, R7, R6, arg, 0)); // r7 = task pointer
                p.push(insn(LDXW, R7, R7, pid, 0)); // r7 = task->pid
            }
            TidSource::Record { prev, next: nxt } => {
                p.push(insn(LDXW, R7, R6, if next { nxt } else { prev }, 0));
            }
        }
        let transition = if next {
            // state = (state | 1) + 2
            [insn(OR32_K, R1, 0, 0, 1), insn(ADD32_K, R1, 0, 0, 2)]
        } else {
            // state = (state + 1) & !1
            [insn(ADD32_K, R1, 0, 0, 1), insn(AND32_K, R1, 0, 0, -2)]
        };
        // Jump offsets count instructions after the jump, to the block end.
        let block = [
            insn(JEQ_K, R7, 0, 15, 0),            // idle task: skip
            insn(MOV64_X, R1, R7, 0, 0),          //
            insn(AND64_K, R1, 0, 0, MASK as i32), // key = tid & MASK
            insn(STXW, R10, R1, -4, 0),           // *(fp - 4) = key
            insn(LD_IMM64, R1, PSEUDO_MAP_FD, 0, map_fd),
            insn(0, 0, 0, 0, 0),
            insn(MOV64_X, R2, R10, 0, 0),
            insn(ADD64_K, R2, 0, 0, -4),
            insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM), // r0 = &entry or null
            insn(JEQ_K, R0, 0, 6, 0),                    // null: skip
            insn(LDXW, R1, R0, 0, 0),                    // r1 = entry.tid
            insn(JNE_X, R1, R7, 4, 0),                   // not ours: skip
            insn(LDXW, R1, R0, 4, 0),                    // r1 = entry.state
            transition[0],
            transition[1],
            insn(STXW, R0, R1, 4, 0), // entry.state = r1
        ];
        p.extend_from_slice(&block);
    }
    p.push(insn(MOV64_K, R0, 0, 0, 0));
    p.push(insn(EXIT, 0, 0, 0, 0));
    p
}

// ---- the kernel's BTF: task_struct.pid and the tp_btf target -------------

mod btf {
    /// What a `tp_btf` program on `sched_switch` needs from vmlinux BTF.
    #[derive(Debug, Clone)]
    pub(super) struct Target {
        /// Type id of the `btf_trace_sched_switch` typedef.
        pub attach_btf_id: u32,
        /// Byte offset of `pid` in `struct task_struct`.
        pub pid_off: u32,
    }

    const PATH: &str = "/sys/kernel/btf/vmlinux";
    const KIND_INT: u32 = 1;
    const KIND_ARRAY: u32 = 3;
    const KIND_STRUCT: u32 = 4;
    const KIND_UNION: u32 = 5;
    const KIND_ENUM: u32 = 6;
    const KIND_TYPEDEF: u32 = 8;
    const KIND_FUNC_PROTO: u32 = 13;
    const KIND_VAR: u32 = 14;
    const KIND_DATASEC: u32 = 15;
    const KIND_DECL_TAG: u32 = 17;
    const KIND_ENUM64: u32 = 19;

    struct Ty {
        name: u32,
        kind: u32,
        kind_flag: bool,
        /// Members of a struct/union: (name, type, bit offset).
        members: Vec<(u32, u32, u32)>,
    }

    fn u32_at(d: &[u8], at: usize) -> Option<u32> {
        Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
    }

    /// Parse `/sys/kernel/btf/vmlinux` (raw BTF, little endian) far
    /// enough to find the two facts.
    pub(super) fn find() -> Result<Target, String> {
        let d = std::fs::read(PATH).map_err(|e| format!("{PATH}: {e}"))?;
        let bad = || format!("{PATH}: not BTF this code can read");
        if d.len() < 24 || d[0..2] != [0x9f, 0xeb] {
            return Err(bad());
        }
        let hdr = u32_at(&d, 4).ok_or_else(bad)? as usize;
        let (toff, tlen) = (
            u32_at(&d, 8).ok_or_else(bad)?,
            u32_at(&d, 12).ok_or_else(bad)?,
        );
        let soff = u32_at(&d, 16).ok_or_else(bad)? as usize;
        let types = d
            .get(hdr + toff as usize..hdr + (toff + tlen) as usize)
            .ok_or_else(bad)?;
        let strings = d.get(hdr + soff..).ok_or_else(bad)?;
        let name = |off: u32| -> &[u8] {
            let s = strings.get(off as usize..).unwrap_or(&[]);
            &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
        };
        // Type ids start at 1.
        let mut all: Vec<Ty> = vec![Ty {
            name: 0,
            kind: 0,
            kind_flag: false,
            members: Vec::new(),
        }];
        let mut at = 0usize;
        while at + 12 <= types.len() {
            let info = u32_at(types, at + 4).ok_or_else(bad)?;
            let (vlen, kind) = ((info & 0xffff) as usize, (info >> 24) & 0x1f);
            let mut ty = Ty {
                name: u32_at(types, at).ok_or_else(bad)?,
                kind,
                kind_flag: info >> 31 == 1,
                members: Vec::new(),
            };
            at += 12;
            let extra = match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION => {
                    for m in 0..vlen {
                        let b = at + 12 * m;
                        ty.members.push((
                            u32_at(types, b).ok_or_else(bad)?,
                            u32_at(types, b + 4).ok_or_else(bad)?,
                            u32_at(types, b + 8).ok_or_else(bad)?,
                        ));
                    }
                    12 * vlen
                }
                KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
                KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
                _ => 0,
            };
            at += extra;
            all.push(ty);
        }
        let attach_btf_id =
            all.iter()
                .position(|t| t.kind == KIND_TYPEDEF && name(t.name) == b"btf_trace_sched_switch")
                .ok_or("no btf_trace_sched_switch in the kernel's BTF")? as u32;
        let task = all
            .iter()
            .position(|t| t.kind == KIND_STRUCT && name(t.name) == b"task_struct")
            .ok_or("no struct task_struct in the kernel's BTF")?;
        // `pid` may sit in an anonymous struct/union member (randomized
        // layouts): search those too, adding their offsets.
        fn pid_bits(all: &[Ty], id: usize, name: &dyn Fn(u32) -> bool, depth: u32) -> Option<u32> {
            let t = all.get(id)?;
            for &(n, ty, off) in &t.members {
                let bits = if t.kind_flag { off & 0xff_ffff } else { off };
                if name(n) {
                    return Some(bits);
                }
                let inner = all.get(ty as usize)?;
                if n == 0 && depth < 4 && (inner.kind == KIND_STRUCT || inner.kind == KIND_UNION) {
                    if let Some(b) = pid_bits(all, ty as usize, name, depth + 1) {
                        return Some(bits + b);
                    }
                }
            }
            None
        }
        let is_pid = |n: u32| name(n) == b"pid";
        let bits =
            pid_bits(&all, task, &is_pid, 0).ok_or("no task_struct.pid in the kernel's BTF")?;
        if bits % 8 != 0 {
            return Err("task_struct.pid is not byte aligned".into());
        }
        Ok(Target {
            attach_btf_id,
            pid_off: bits / 8,
        })
    }
}

// ---- syscalls ---------------------------------------------------------------

mod sys {
    use super::{BpfError, Entry, Insn, ENTRIES, PROG_NAME};
    use rustix::io::Errno;
    use rustix::ioctl::{opcode, Opcode};
    use std::os::fd::{FromRawFd, OwnedFd};

    const BPF_MAP_CREATE: i32 = 0;
    const BPF_PROG_LOAD: i32 = 5;
    pub(super) const BPF_PROG_GET_FD_BY_ID: i32 = 13;
    const BPF_OBJ_GET_INFO_BY_FD: i32 = 15;
    const BPF_MAP_TYPE_ARRAY: u32 = 2;
    const BPF_F_MMAPABLE: u32 = 1 << 10;
    const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
    const BPF_PROG_TYPE_TRACING: u32 = 26;
    const BPF_TRACE_RAW_TP: u32 = 23;
    const BPF_RAW_TRACEPOINT_OPEN: i32 = 17;

    /// Which kind of program to load.
    pub(super) enum Kind {
        /// `BPF_PROG_TYPE_TRACEPOINT` (perf tracepoint).
        Tracepoint,
        /// `BPF_PROG_TYPE_TRACING` / `BPF_TRACE_RAW_TP` on this BTF type.
        TpBtf(u32),
    }
    const PERF_TYPE_TRACEPOINT: u32 = 2;
    /// Passed through `libc::syscall`'s variadic arguments: an `unsigned
    /// long`, as the syscall takes it.
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
    /// `_IOW('$', 8, __u32)`.
    const PERF_EVENT_IOC_SET_BPF: Opcode = opcode::write::<u32>(b'$', 8);
    /// `_IO('$', 0)`.
    const PERF_EVENT_IOC_ENABLE: Opcode = opcode::none(b'$', 0);

    fn name16() -> [u8; 16] {
        let mut n = [0u8; 16];
        n[..PROG_NAME.len()].copy_from_slice(PROG_NAME.as_bytes());
        n
    }

    /// `bpf(cmd, attr, size)`; the fd or value it returns.
    pub(super) fn bpf<T>(cmd: i32, attr: &mut T) -> std::io::Result<i64> {
        // libc: rustix has no bpf(2) wrapper, so this is the raw syscall.
        // SAFETY: `attr` is a properly sized, zero-padded bpf_attr variant.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                attr as *mut T as *mut libc::c_void,
                core::mem::size_of::<T>() as u32,
            )
        };
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(r)
        }
    }

    fn why(what: &str, e: std::io::Error) -> BpfError {
        let hint = match Errno::from_io_error(&e) {
            Some(Errno::PERM) | Some(Errno::ACCESS) => {
                " (needs CAP_BPF and CAP_PERFMON: run as root)"
            }
            Some(Errno::NOSYS) => " (kernel without the bpf syscall)",
            Some(Errno::INVAL) => " (kernel too old or built without CONFIG_BPF_EVENTS?)",
            _ => "",
        };
        BpfError(format!("bpf oracle: {what} failed: {e}{hint}"))
    }

    #[repr(C)]
    #[derive(Default)]
    struct MapCreate {
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        map_flags: u32,
        inner_map_fd: u32,
        numa_node: u32,
        map_name: [u8; 16],
    }

    pub(super) fn map_create() -> Result<OwnedFd, BpfError> {
        let mut a = MapCreate {
            map_type: BPF_MAP_TYPE_ARRAY,
            key_size: 4,
            value_size: core::mem::size_of::<Entry>() as u32,
            max_entries: ENTRIES,
            map_flags: BPF_F_MMAPABLE,
            map_name: name16(),
            ..Default::default()
        };
        let fd = bpf(BPF_MAP_CREATE, &mut a).map_err(|e| why("creating the table map", e))?;
        // SAFETY: a fresh fd we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }

    pub(super) fn map_mmap(fd: &OwnedFd) -> Result<*mut Entry, BpfError> {
        use rustix::mm::{mmap, MapFlags, ProtFlags};
        let len = ENTRIES as usize * core::mem::size_of::<Entry>();
        // SAFETY: mapping a BPF_F_MMAPABLE array map of `len` bytes at an
        // address of the kernel's choosing.
        let p = unsafe {
            mmap(
                core::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )
        }
        .map_err(|e| why("mapping the table", e.into()))?;
        Ok(p.cast())
    }

    #[repr(C)]
    #[derive(Default)]
    struct ProgLoad {
        prog_type: u32,
        insn_cnt: u32,
        insns: u64,
        license: u64,
        log_level: u32,
        log_size: u32,
        log_buf: u64,
        kern_version: u32,
        prog_flags: u32,
        prog_name: [u8; 16],
        prog_ifindex: u32,
        expected_attach_type: u32,
        prog_btf_fd: u32,
        func_info_rec_size: u32,
        func_info: u64,
        func_info_cnt: u32,
        line_info_rec_size: u32,
        line_info: u64,
        line_info_cnt: u32,
        attach_btf_id: u32,
        attach_btf_obj_fd: u32,
        pad: u32,
    }

    pub(super) fn prog_load(insns: &[Insn], kind: Kind) -> Result<OwnedFd, BpfError> {
        // The kernel lets only GPL-compatible programs read `task_struct`
        // through BTF (the tp_btf hook), so the program, klock's
        // own instructions, is declared dual MIT/GPL to the kernel.
        let license = c"Dual MIT/GPL";
        let mut log = vec![0u8; 64 * 1024];
        let (prog_type, expected_attach_type, attach_btf_id) = match kind {
            Kind::Tracepoint => (BPF_PROG_TYPE_TRACEPOINT, 0, 0),
            Kind::TpBtf(id) => (BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP, id),
        };
        let mut a = ProgLoad {
            prog_type,
            expected_attach_type,
            attach_btf_id,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            prog_name: name16(),
            ..Default::default()
        };
        match bpf(BPF_PROG_LOAD, &mut a) {
            // SAFETY: a fresh fd we own.
            Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
            Err(e)
                if matches!(
                    Errno::from_io_error(&e),
                    Some(Errno::ACCESS) | Some(Errno::INVAL)
                ) =>
            {
                // Again with the verifier's log, for the message.
                a.log_level = 1;
                a.log_size = log.len() as u32;
                a.log_buf = log.as_mut_ptr() as u64;
                let _ = bpf(BPF_PROG_LOAD, &mut a);
                let text = String::from_utf8_lossy(&log);
                // The verifier's complaint is the line before its summary.
                let last = text
                    .trim_end_matches('\0')
                    .lines()
                    .rfind(|l| !l.starts_with("processed ") && !l.trim().is_empty())
                    .unwrap_or("")
                    .to_string();
                let mut err = why("loading the sched_switch program", e);
                if !last.is_empty() {
                    err.0.push_str(&format!("; verifier: {last}"));
                }
                Err(err)
            }
            Err(e) => Err(why("loading the sched_switch program", e)),
        }
    }

    #[repr(C)]
    #[derive(Default)]
    struct InfoByFd {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }

    /// The leading fields of `struct bpf_prog_info`.
    #[repr(C)]
    #[derive(Default)]
    pub(super) struct ProgInfo {
        pub prog_type: u32,
        pub id: u32,
        pub tag: [u8; 8],
        pub jited_prog_len: u32,
        pub xlated_prog_len: u32,
        pub jited_prog_insns: u64,
        pub xlated_prog_insns: u64,
        pub load_time: u64,
        pub created_by_uid: u32,
        pub nr_map_ids: u32,
        pub map_ids: u64,
        pub name: [u8; 16],
    }

    pub(super) fn prog_info(fd: i32) -> std::io::Result<ProgInfo> {
        let mut info = ProgInfo::default();
        let mut a = InfoByFd {
            bpf_fd: fd as u32,
            info_len: core::mem::size_of::<ProgInfo>() as u32,
            info: &mut info as *mut ProgInfo as u64,
        };
        bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a)?;
        Ok(info)
    }

    pub(super) fn prog_id(fd: i32) -> Result<u32, BpfError> {
        prog_info(fd)
            .map(|i| i.id)
            .map_err(|e| why("reading the program's id", e))
    }

    #[repr(C)]
    #[derive(Default)]
    pub(super) struct GetById {
        pub id: u32,
        pub next_id: u32,
        pub open_flags: u32,
    }

    /// `struct perf_event_attr` (PERF_ATTR_SIZE_VER5, 112 bytes).
    #[repr(C)]
    #[derive(Default)]
    struct PerfEventAttr {
        type_: u32,
        size: u32,
        config: u64,
        sample_period: u64,
        sample_type: u64,
        read_format: u64,
        flags: u64,
        wakeup_events: u32,
        bp_type: u32,
        config1: u64,
        config2: u64,
        branch_sample_type: u64,
        sample_regs_user: u64,
        sample_stack_user: u32,
        clockid: i32,
        sample_regs_intr: u64,
        aux_watermark: u32,
        sample_max_stack: u16,
        reserved_2: u16,
    }

    /// Attach `prog` to tracepoint `id` (for all CPUs) through a perf event
    /// opened on the first CPU that is online.
    pub(super) fn attach(id: u64, prog: i32) -> Result<OwnedFd, BpfError> {
        // libc: rustix has no sysconf (the C library counts the configured
        // CPUs).
        // SAFETY: sysconf has no preconditions.
        let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as i32;
        let mut last_err = None;
        for cpu in 0..ncpu {
            let mut attr = PerfEventAttr {
                type_: PERF_TYPE_TRACEPOINT,
                size: core::mem::size_of::<PerfEventAttr>() as u32,
                config: id,
                sample_period: 1,
                wakeup_events: 1,
                ..Default::default()
            };
            // libc: rustix has no perf_event_open, so this is the raw syscall.
            // SAFETY: a valid perf_event_attr; pid -1 + cpu: all tasks on it.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    &mut attr as *mut PerfEventAttr,
                    -1,
                    cpu,
                    -1,
                    PERF_FLAG_FD_CLOEXEC,
                )
            };
            if fd < 0 {
                // An offline CPU (ENODEV) is skipped; other errors too, but
                // remembered in case no CPU could be attached at all.
                last_err = Some(std::io::Error::last_os_error());
                continue;
            }
            // SAFETY: a fresh fd we own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
            use rustix::ioctl::{ioctl, IntegerSetter, NoArg};
            // SAFETY: SET_BPF takes the program's fd as its integer
            // argument; ENABLE takes 0 (this event alone, not its group).
            let r = unsafe {
                ioctl(
                    &fd,
                    IntegerSetter::<PERF_EVENT_IOC_SET_BPF>::new_usize(prog as usize),
                )
                .and_then(|()| ioctl(&fd, NoArg::<PERF_EVENT_IOC_ENABLE>::new()))
            };
            if let Err(e) = r {
                return Err(why("attaching the program to sched_switch", e.into()));
            }
            // One event is enough: a program attached to a tracepoint
            // through a perf event runs on every CPU's hits (the kernel
            // keeps it on the tracepoint, and refuses the same program
            // twice with EEXIST).
            return Ok(fd);
        }
        Err(why(
            "opening the sched_switch perf event",
            last_err.unwrap_or_else(|| Errno::NODEV.into()),
        ))
    }

    #[repr(C)]
    #[derive(Default)]
    struct RawTpOpen {
        name: u64,
        prog_fd: u32,
        pad: u32,
    }

    /// Attach a `tp_btf` program; dropping the link detaches it.
    pub(super) fn raw_tracepoint_open(prog: i32) -> Result<OwnedFd, BpfError> {
        let mut a = RawTpOpen {
            prog_fd: prog as u32,
            ..Default::default()
        };
        let fd = bpf(BPF_RAW_TRACEPOINT_OPEN, &mut a)
            .map_err(|e| why("attaching the tp_btf program to sched_switch", e))?;
        // SAFETY: a fresh fd we own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }

    pub(super) fn mount_tracefs(at: &str) -> Result<(), BpfError> {
        use rustix::mount::{mount, MountFlags};
        mount("nodev", at, "tracefs", MountFlags::empty(), None).map_err(|e| {
            why(
                &format!("tracefs is not mounted and mounting it on {at}"),
                e.into(),
            )
        })
    }
}

/// Whether a BPF program with id `id` still exists (for tests: after
/// [`unload`] it must go away). Needs the same privilege as loading.
pub fn prog_exists(id: u32) -> std::io::Result<bool> {
    let mut a = sys::GetById {
        id,
        ..Default::default()
    };
    match sys::bpf(sys::BPF_PROG_GET_FD_BY_ID, &mut a) {
        Ok(fd) => {
            // SAFETY: a fresh fd we own; closed at once.
            drop(unsafe { OwnedFd::from_raw_fd(fd as i32) });
            Ok(true)
        }
        Err(e) if rustix::io::Errno::from_io_error(&e) == Some(rustix::io::Errno::NOENT) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
