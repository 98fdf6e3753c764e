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
//! Tied to klock's thread context ([`crate::thread`]), through the thread
//! hooks this module registers there when it first maps its table: a
//! thread registers itself (state 1: it is running) when its context is
//! created and clears its tag when it exits. Loading the program sweeps the threads alive at
//! that moment (state 0 until their next switch-in). Two live threads
//! whose tids collide in the table keep the first; the second reads as
//! unknown, and the locks then use their time budget for it.
//!
//! # The program
//!
//! 37–39 eBPF instructions, assembled in `asm.rs` from their encodings and
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

mod asm;
mod btf;
mod sys;

pub use asm::{program, program_bytes, Insn, TidSource};

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
    // Acquire pairs with the Release store in `load_with`: the mapping
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

/// The thread hooks this oracle registers with [`crate::thread`] when it
/// first maps its table.
static THREAD_HOOKS: crate::thread::ThreadHooks = crate::thread::ThreadHooks {
    start: on_thread_start,
    exit: on_thread_exit,
};

/// A thread context was created (a hook registered with [`crate::thread`]).
fn on_thread_start(tid: u32) {
    // SeqCst pairs with the SeqCst store in `load_with` and the slot
    // sweep after it: either this thread sees the table, or the sweep
    // sees this thread's slot (whose tid was stored before this call).
    if TABLE.load(Ordering::SeqCst).is_null() {
        return;
    }
    if let Some(t) = table() {
        register(t, tid, true);
    }
}

/// A thread context is being destroyed (a hook registered with
/// [`crate::thread`]).
fn on_thread_exit(tid: u32) {
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
            // Threads created from now on register themselves (the hooks
            // do nothing until the table is published); those alive now
            // are swept below. The hook registration (SeqCst inside) comes
            // before that sweep: a thread that misses the hooks has stored
            // its tid where the sweep reads it.
            if !crate::thread::register_hooks(&THREAD_HOOKS) {
                return Err(BpfError("bpf oracle: no room for its thread hooks".into()));
            }
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
