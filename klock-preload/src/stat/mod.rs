//! The lock profile (`KLOCK_STAT=1`, or `klock run --stat`): which lock of
//! the program hurts, printed to stderr when the program exits, or when a
//! signal it does not handle ends it ([`report`]).
//!
//! For each lock the program used: where it was first locked (the first
//! return address outside this library), times locked, owner changes
//! (an acquisition by another thread than the last), contended
//! acquisitions (the first attempt failed), total / average / longest
//! wait, and average / longest write hold; sorted by total wait.
//!
//! The statistics live in a table beside the locks, keyed by address
//! (the locks themselves stay in place and unchanged): entries are
//! claimed with a CAS and never freed, so a lock destroyed and another
//! made at its address share a row, and a lock that finds no free row
//! near its address (a program with more than [`CAPACITY`] locks, or
//! nearly as many) has its acquisitions counted as "not tracked". With the
//! profile off (the default) every lock call pays one load of a flag.
//!
//! Timestamps are the TSC where the kernel itself uses it as its clock or
//! the CPU says it is constant and non-stop (a few ns to read), else
//! `clock_gettime` (20–30 ns on a virtual machine, which made the profile
//! 2–3 times as costly), converted to ns by the report. Holds are timed for
//! exclusive holds only (mutexes, spinlocks, write locks): readers hold a
//! lock together and would need a start time each.
//!
//! Even the TSC is not free: a read cost about 18 ns on a 2-vCPU Intel
//! guest, and timing every hold takes two reads, both inside the critical
//! section, where they lengthen the hold that other threads wait for. So
//! one exclusive hold in [`DEFAULT_HOLD_SAMPLE`] is timed
//! (`KLOCK_STAT_HOLDS=N`, a power of two up to 1024; 1 times every hold),
//! after each lock's first that many, chosen by the lock's own
//! acquisition count (see [`timed_hold`]).
//! Acquisitions, owner changes and contended waits are counted every time;
//! a contended acquisition's wait is timed with the TSC reads around its
//! wait, outside the critical section.

use core::sync::atomic::Ordering::{Relaxed, Release};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
use klock::sys::monotonic_ns;
use std::sync::OnceLock;

mod report;
mod symbols;
pub(crate) use report::report;

/// Rows in the table: the locks a profile can tell apart.
pub const CAPACITY: usize = 1 << 14;
const _: () = assert!(CAPACITY.is_power_of_two());
/// The rows a lock's row is looked for in, from its home row: a lock
/// with no free row among them is not tracked. (Unbounded, every call on
/// such a lock walked the whole table once it was full.)
const MAX_PROBE: usize = 256;
/// Rows printed (`KLOCK_STAT_TOP` overrides).
const DEFAULT_TOP: usize = 16;
/// One exclusive hold in this many is timed (`KLOCK_STAT_HOLDS`
/// overrides).
pub const DEFAULT_HOLD_SAMPLE: u32 = 8;
/// The largest `KLOCK_STAT_HOLDS`.
const MAX_HOLD_SAMPLE: u32 = 1024;

/// Which kind of lock a row counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Mutex = 1,
    RwLock = 2,
    Spin = 3,
}

impl Kind {
    fn name(k: u8) -> &'static str {
        match k {
            1 => "mutex",
            2 => "rwlock",
            3 => "spin",
            _ => "?",
        }
    }
}

/// One lock's counts. All `Relaxed`: statistics, read once at exit.
/// An exclusive holder updates its row while holding the lock, so plain
/// loads and stores suffice (the lock orders one holder's writes before
/// the next holder's reads); readers of a rwlock share theirs and use
/// RMWs. Aligned so that two locks' rows share no cache line.
#[repr(C, align(64))]
struct Row {
    // First cache line: what every acquisition and release touches (the
    // lock's address is in `Table::keys`).
    locked: AtomicU64,
    changed: AtomicU64,
    /// Start of the current exclusive hold (clock units); 0 when it is not
    /// timed (see [`timed_hold`]).
    hold_start: AtomicU64,
    holds: AtomicU64,
    hold_total: AtomicU64,
    hold_max: AtomicU64,
    /// tid of the last thread that took it (owner changes).
    last: AtomicU32,
    kind: AtomicU8,
    /// The row is claimed and its site (`Table::sites`) written
    /// (`Release`, read with `Acquire` by the report).
    ready: AtomicBool,
    // Second line: contended acquisitions, the shortest hold, and the
    // report.
    /// Shortest exclusive hold (clock units; 0: none yet).
    hold_min: AtomicU64,
    contended: AtomicU64,
    /// Contended acquisitions by another thread than the last holder
    /// (the kernel's con-bounces).
    con_bounces: AtomicU64,
    wait_total: AtomicU64,
    /// Shortest contended wait (clock units; 0: none yet).
    wait_min: AtomicU64,
    wait_max: AtomicU64,
}

struct Table {
    /// Each row's lock address, 0 for a free row: what every profiled call
    /// looks up, apart from the rows, eight rows' keys a cache line.
    /// Written once per lock, so their lines are not pulled between CPUs
    /// as a row's line is by the counts: a lock displaced from its home
    /// row is found within one line, where with the address in the row a
    /// walk read a line for every row it passed. (Under unbound's load,
    /// the walk's share of the server's samples fell from 1.4–1.6% to
    /// 0.2%; the profile's whole share stayed 7–9%, its time now in the
    /// count's first write to the row: `docs/preload.md`.) Arrays, not
    /// slices: an index masked to the capacity needs no bounds check.
    keys: &'static [AtomicUsize; CAPACITY],
    rows: &'static [Row; CAPACITY],
    /// The indexes of the claimed rows plus one, in the order claimed (0:
    /// a claim whose index is not written yet), so that a forked child
    /// clears, and the report reads, the rows in use without going
    /// through the whole table.
    claimed: &'static [AtomicU32],
    /// Entries of `claimed` handed out.
    n_claimed: AtomicUsize,
    /// Where each row's lock was first taken, looked up when the row was
    /// claimed (the report may run in a signal handler, where `dladdr`
    /// may not be called).
    sites: &'static [SiteCell],
    /// Acquisitions of locks that found the table full.
    untracked: AtomicU64,
    /// The program's name (`argv[0]`), for the report's header.
    prog: Box<[u8]>,
    /// The report's memory, set aside at load.
    scratch: report::Scratch,
    /// Clock calibration: lockstat units and monotonic ns at start.
    t0: (u64, u64),
}

/// On: `KLOCK_STAT` set (and not `0`) when the library was loaded.
static ON: AtomicBool = AtomicBool::new(false);
/// log2 of the hold sample (`KLOCK_STAT_HOLDS`): 0 times every hold.
/// Relaxed: set at load, before the program's threads exist.
static HOLD_SHIFT: AtomicU8 = AtomicU8::new(DEFAULT_HOLD_SAMPLE.trailing_zeros() as u8);
/// Rows printed (`KLOCK_STAT_TOP`), read at load.
static TOP: AtomicUsize = AtomicUsize::new(DEFAULT_TOP);
/// Timestamps from the TSC (else `clock_gettime`); set at load.
static TSC: AtomicBool = AtomicBool::new(false);

/// A timestamp: TSC ticks or ns (see the module docs).
#[inline(always)]
fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if TSC.load(Relaxed) {
        // SAFETY: RDTSC has no preconditions on x86-64.
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    monotonic_ns()
}
static TABLE: OnceLock<Table> = OnceLock::new();

/// Whether the profile is on: the only cost of the profile when it is off.
#[inline(always)]
pub fn on() -> bool {
    ON.load(Relaxed)
}

/// Read `KLOCK_STAT`, `KLOCK_STAT_HOLDS`, `KLOCK_STAT_TOP` and
/// `KLOCK_STAT_FILE` once, at load (from the library's constructor). A value that does not parse
/// ends the program with a message and status 2 before `main`, as a bad
/// `KLOCK_LOCK_MAP` does: a profile other than the one asked for would
/// mislead.
pub(crate) fn init_from_env() {
    let want = std::env::var_os("KLOCK_STAT").is_some_and(|v| !v.is_empty() && v != "0");
    if !want {
        return;
    }
    let settings = (
        env_setting("KLOCK_STAT_HOLDS", parse_hold_sample),
        env_setting("KLOCK_STAT_TOP", parse_top),
    );
    match settings {
        (Ok(holds), Ok(top)) => {
            if let Some(n) = holds {
                HOLD_SHIFT.store(n.trailing_zeros() as u8, Relaxed);
            }
            if let Some(n) = top {
                TOP.store(n, Relaxed);
            }
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("klock: {e}");
            // SAFETY: ends the process; nothing of the program ran yet.
            unsafe { libc::_exit(2) }
        }
    }
    if let Some(v) = std::env::var_os(STAT_FILE_VAR).filter(|v| !v.is_empty()) {
        match stat_file(&v) {
            Ok(path) => {
                let _ = STAT_FILE.set(path);
            }
            Err(e) => {
                eprintln!("klock: {STAT_FILE_VAR}={}: {e}", v.to_string_lossy());
                // SAFETY: as above.
                unsafe { libc::_exit(2) }
            }
        }
    }
    TSC.store(tsc_usable(), Relaxed);
    let me = std::process::id();
    let first = std::env::var(FIRST_PID_VAR)
        .ok()
        .and_then(|v| v.parse().ok());
    FIRST_PID.store(first.unwrap_or(me), Relaxed);
    if first.is_none() {
        // SAFETY: the library's constructor, before the program's `main`
        // and its threads; nothing reads the environment meanwhile.
        unsafe { std::env::set_var(FIRST_PID_VAR, me.to_string()) };
    }
    let _ = table();
    ON.store(true, Relaxed);
    report::catch_fatal_signals();
}

/// The variable `name` parsed by `parse`: `Ok(None)` when unset, an
/// error that names the variable when it does not parse.
fn env_setting<T>(name: &str, parse: fn(&str) -> Result<T, String>) -> Result<Option<T>, String> {
    match std::env::var_os(name) {
        None => Ok(None),
        Some(v) => parse(v.to_string_lossy().trim())
            .map(Some)
            .map_err(|e| format!("{name}={}: {e}", v.to_string_lossy())),
    }
}

/// The variable that sends the profile to a file instead of stderr.
const STAT_FILE_VAR: &str = "KLOCK_STAT_FILE";
/// `KLOCK_STAT_FILE`, checked at load: an absolute path, in which the
/// report replaces each `%p` with the process's pid. Unset: stderr.
static STAT_FILE: OnceLock<Box<[u8]>> = OnceLock::new();

/// `KLOCK_STAT_FILE`: a path, made absolute now (a daemon that changes
/// its directory to `/` still writes where it was asked to), whose
/// directory must exist and be writable: found out at load, not at exit,
/// where a profile would be lost.
fn stat_file(v: &std::ffi::OsStr) -> Result<Box<[u8]>, String> {
    use std::os::unix::ffi::OsStrExt;
    let given = std::path::Path::new(v);
    let path = if given.is_absolute() {
        given.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| format!("cannot find the working directory to resolve it: {e}"))?
            .join(given)
    };
    if path.as_os_str().as_bytes().ends_with(b"/") {
        return Err("want a file's path, not a directory's".into());
    }
    let dir = path.parent().unwrap_or(std::path::Path::new("/"));
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK)
        .map_err(|e| format!("cannot write a file in {}: {e}", dir.display()))?;
    Ok(path.as_os_str().as_bytes().into())
}

/// `KLOCK_STAT_HOLDS`: time one exclusive hold in N, N a power of two
/// from 1 (every hold) to [`MAX_HOLD_SAMPLE`].
fn parse_hold_sample(v: &str) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n.is_power_of_two() && n <= MAX_HOLD_SAMPLE => Ok(n),
        _ => Err(format!(
            "want a power of two from 1 (time every hold) to {MAX_HOLD_SAMPLE}"
        )),
    }
}

/// `KLOCK_STAT_TOP`: rows printed, at least 1.
fn parse_top(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("want a number of rows, 1 or more".into()),
    }
}

/// Whether the exclusive hold that begins with a lock's `count`-th
/// acquisition is timed: each of the lock's first 2^`HOLD_SHIFT` holds,
/// then one in 2^`HOLD_SHIFT`. The first ones so that a lock taken a few
/// times has its holds timed too (sampled alone, a lock taken fewer than
/// 13 times had none timed at one in 8, and one held for seconds at a
/// time showed no hold). After them the count, the lock's own (its row's
/// `locked`), is hashed (Fibonacci hashing: the fractional parts of
/// `count` times the golden ratio spread evenly, and the gaps between
/// timed holds take a few sizes around the sample rather than one), so a
/// program whose holds alternate with a short period is still sampled
/// across all of them.
#[inline(always)]
fn timed_hold(count: u64) -> bool {
    let shift = u32::from(HOLD_SHIFT.load(Relaxed));
    shift == 0
        || count <= 1 << shift
        || count.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - shift) == 0
}

/// Whether the TSC can time waits and holds: the kernel's clock is the
/// TSC, or the CPU says its TSC runs at a constant rate and does not stop
/// (`constant_tsc` and `nonstop_tsc`; a virtual machine's kernel may still
/// choose `kvm-clock`, whose `clock_gettime` costs 20–30 ns). The report
/// converts ticks to ns over the whole run.
fn tsc_usable() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    if source.is_ok_and(|s| s.trim() == "tsc") {
        return true;
    }
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| {
        info.lines()
            .find(|l| l.starts_with("flags"))
            .is_some_and(|l| {
                let flags: Vec<&str> = l.split_whitespace().collect();
                flags.contains(&"constant_tsc") && flags.contains(&"nonstop_tsc")
            })
    })
}

/// `n` values of `T` in fresh zeroed pages of their own, never freed
/// (the table lives as long as the process). The kernel fills a page only
/// when it is first touched, so the table's 3 MB cost a process only the
/// rows its locks use. (Through the allocator, whose aligned allocations
/// are cleared by writing them, the table cost about 0.9 ms and 540 page
/// faults at the load of every process, paid by each of a build's many
/// short-lived helpers.)
///
/// # Safety
/// All-zero bytes are a valid `T`, and `T`'s alignment is at most a
/// page's.
unsafe fn zeroed_static<T>(n: usize) -> &'static mut [T] {
    let layout = std::alloc::Layout::array::<T>(n).expect("a table that fits in memory");
    // SAFETY: a new private anonymous mapping, aliasing nothing.
    match unsafe {
        rustix::mm::mmap_anonymous(
            core::ptr::null_mut(),
            layout.size(),
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::PRIVATE,
        )
    } {
        // SAFETY: page-aligned, zeroed, `n` `T`s long, ours alone and
        // never unmapped; the caller vouches for zeroed `T`s.
        Ok(p) => unsafe { core::slice::from_raw_parts_mut(p.cast::<T>(), n) },
        Err(_) => std::alloc::handle_alloc_error(layout),
    }
}

impl Table {
    /// The indexes of the rows in use, from the list of claims (an entry
    /// not written yet is a row claimed by another thread that has counted
    /// nothing into it yet).
    fn claimed_rows(&self) -> impl Iterator<Item = usize> + '_ {
        self.claimed[..self.n_claimed.load(Relaxed).min(CAPACITY)]
            .iter()
            .filter_map(|c| (c.load(Relaxed) as usize).checked_sub(1))
    }
}

fn table() -> &'static Table {
    TABLE.get_or_init(|| Table {
        // SAFETY (the three): all-zero bytes are a free row, an unused
        // entry of the claim list and an unknown site (atomic integers);
        // a row's alignment is a cache line's.
        keys: <&[AtomicUsize; CAPACITY]>::try_from(&*unsafe {
            zeroed_static::<AtomicUsize>(CAPACITY)
        })
        .expect("CAPACITY keys"),
        rows: <&[Row; CAPACITY]>::try_from(&*unsafe { zeroed_static::<Row>(CAPACITY) })
            .expect("CAPACITY rows"),
        claimed: unsafe { zeroed_static(CAPACITY) },
        n_claimed: AtomicUsize::new(0),
        sites: unsafe { zeroed_static(CAPACITY) },
        untracked: AtomicU64::new(0),
        prog: std::env::args_os()
            .next()
            .map(|a| std::os::unix::ffi::OsStrExt::as_bytes(a.as_os_str()).into())
            .unwrap_or_default(),
        scratch: report::Scratch::new(),
        t0: (now(), monotonic_ns()),
    })
}

/// The row of the lock at `addr`, claimed on first use; `None` when the
/// rows near its home are all taken. Inlined into every profiled call:
/// the lock's home row is the one it finds there in all but a program
/// whose locks' addresses collide ([`row_probe`] then walks on).
#[inline(always)]
fn row(addr: usize, kind: Kind) -> Option<&'static Row> {
    let t = table();
    let i = home(addr);
    if t.keys[i].load(Relaxed) == addr {
        return Some(&t.rows[i]);
    }
    row_probe(t, i, addr, kind)
}

/// The home row of the lock at `addr`: the address multiplied by 2^64 / φ,
/// its high half folded into the low, multiplied again, and the top bits
/// taken. A product's low bits depend only on the factors' low bits and
/// keep their trailing zeros, and the table's index used to be the
/// product masked to the table: locks 16 bytes apart (malloc's
/// alignment) then had homes only at every fourth row, locks in an
/// array of 64-byte structures at every sixteenth and 256 bytes apart
/// at every sixty-fourth, so their rows piled up behind each other
/// (8,192 locks 256 bytes apart, simulated: a lookup walked past 15.5
/// other rows on average, 0.5 with this hash). The top bits of one product spread most strides
/// evenly but some poorly (addresses 64 bytes apart: 2,286 homes for
/// 4,096 locks); the second round spreads every stride as a random
/// choice would. Two multiplications: a few cycles beside the row's
/// cache miss.
#[inline(always)]
fn home(addr: usize) -> usize {
    const PHI: u64 = 0x9E37_79B9_7F4A_7C15;
    let x = (addr as u64).wrapping_mul(PHI);
    ((x ^ (x >> 32)).wrapping_mul(PHI) >> (64 - CAPACITY.trailing_zeros())) as usize
}

/// [`row`] when the home row `i` is another lock's or free: linear
/// probing from it, over at most [`MAX_PROBE`] rows, claiming the first
/// free one. `None`: the lock is not tracked (every row there is taken).
#[cold]
#[inline(never)]
fn row_probe(t: &'static Table, mut i: usize, addr: usize, kind: Kind) -> Option<&'static Row> {
    for _ in 0..MAX_PROBE {
        let a = t.keys[i].load(Relaxed);
        if a == addr {
            return Some(&t.rows[i]);
        }
        if a == 0 {
            if let Some(r) = claim(t, i, addr, kind) {
                return Some(r);
            }
        }
        i = (i + 1) % CAPACITY;
    }
    None
}

/// Count an acquisition of a lock that has no row.
#[cold]
fn untracked() {
    table().untracked.fetch_add(1, Relaxed);
}

/// Claim the free row `i` for the lock at `addr`, or find that another
/// thread just claimed it for the same lock: `None` if it went to another
/// lock. Once per lock.
#[cold]
fn claim(t: &'static Table, i: usize, addr: usize, kind: Kind) -> Option<&'static Row> {
    let r = &t.rows[i];
    match t.keys[i].compare_exchange(0, addr, Relaxed, Relaxed) {
        Ok(_) => {
            // A row is claimed once, so fewer than CAPACITY claims are
            // ever made and the slot exists.
            let k = t.n_claimed.fetch_add(1, Relaxed);
            t.claimed[k].store(i as u32 + 1, Relaxed);
            r.kind.store(kind as u8, Relaxed);
            t.sites[i].set(call_site());
            // Release: the report reads kind and site after seeing
            // `ready` (Acquire).
            r.ready.store(true, Release);
            Some(r)
        }
        Err(now) if now == addr => Some(r),
        Err(_) => None,
    }
}

/// The first return address on the stack outside this library (the
/// program's call of the pthread function), with what `dladdr` says of
/// it; an unknown site if there is none.
#[cold]
fn call_site() -> Site {
    let mut frames = [core::ptr::null_mut::<libc::c_void>(); 24];
    // SAFETY: a buffer of the given length.
    let n = unsafe { libc::backtrace(frames.as_mut_ptr(), frames.len() as libc::c_int) };
    let mine = Site::of(call_site as *const () as usize).fbase;
    frames[..n.max(0) as usize]
        .iter()
        .filter(|f| !f.is_null())
        .map(|&f| Site::of(f as usize))
        .find(|s| s.fbase != mine)
        .unwrap_or_default()
}

/// Where a lock was first taken: a return address and what `dladdr` said
/// of it. The strings are the dynamic linker's (the object's path, the
/// symbol's name), valid while the object is loaded.
#[derive(Clone, Copy, Default)]
struct Site {
    ip: usize,
    /// The object's path; 0 when `dladdr` found no object there (and the
    /// fields below are 0 too).
    fname: usize,
    fbase: usize,
    sname: usize,
    saddr: usize,
}

impl Site {
    /// Look up `ip` (0: unknown).
    fn of(ip: usize) -> Site {
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: any address may be asked; `info` is writable.
        if ip == 0 || unsafe { libc::dladdr(ip as *const libc::c_void, &mut info) } == 0 {
            return Site {
                ip,
                ..Site::default()
            };
        }
        Site {
            ip,
            fname: info.dli_fname as usize,
            fbase: info.dli_fbase as usize,
            sname: info.dli_sname as usize,
            saddr: info.dli_saddr as usize,
        }
    }

    /// `function+0xoff (object)`, or `object+0xoff` when the object
    /// exports no symbol there (`addr2line -e object 0xoff` names it) and
    /// `function`, the name and offset found in its symbol table, is
    /// `None`; without allocating (the report may run in a signal
    /// handler).
    fn describe(&self, function: Option<&str>, out: &mut impl core::fmt::Write) {
        /// A C string of the dynamic linker's, invalid UTF-8 replaced.
        fn c_str(out: &mut impl core::fmt::Write, p: usize) {
            if p == 0 {
                let _ = out.write_str("?");
                return;
            }
            // SAFETY: dladdr's strings are NUL-terminated and live while
            // the object is loaded.
            let bytes = unsafe { core::ffi::CStr::from_ptr(p as *const libc::c_char) }.to_bytes();
            for chunk in bytes.utf8_chunks() {
                let _ = out.write_str(chunk.valid());
                if !chunk.invalid().is_empty() {
                    let _ = out.write_char(char::REPLACEMENT_CHARACTER);
                }
            }
        }
        if self.ip == 0 {
            let _ = out.write_str("?");
        } else if self.fname == 0 {
            let _ = write!(out, "{:#x}", self.ip);
        } else if let Some(f) = function {
            let _ = write!(out, "{f} (");
            c_str(out, self.fname);
            let _ = out.write_str(")");
        } else if self.sname != 0 {
            c_str(out, self.sname);
            let _ = write!(out, "+{:#x} (", self.ip - self.saddr);
            c_str(out, self.fname);
            let _ = out.write_str(")");
        } else {
            c_str(out, self.fname);
            let _ = write!(out, "+{:#x}", self.ip - self.fbase);
        }
    }
}

/// A row's [`Site`], written once when the row is claimed (before its
/// `ready`, Release) and read by the report (after `ready`, Acquire).
#[derive(Default)]
struct SiteCell([AtomicUsize; 5]);

impl SiteCell {
    fn set(&self, s: Site) {
        let v = [s.ip, s.fname, s.fbase, s.sname, s.saddr];
        for (c, v) in self.0.iter().zip(v) {
            c.store(v, Relaxed);
        }
    }

    fn get(&self) -> Site {
        let [ip, fname, fbase, sname, saddr] = self.0.each_ref().map(|c| c.load(Relaxed));
        Site {
            ip,
            fname,
            fbase,
            sname,
            saddr,
        }
    }
}

/// Take an exclusive lock with the profile on: `try_lock` first (an
/// uncontended acquisition, counted inline), else time `lock` (out of
/// line). Returns `lock`'s result (`true` when the lock was taken).
///
/// The uncontended path is what a lock-only loop pays the profile on
/// every call, so it is kept to the home row's probe, the count and the
/// owner check, inlined here with the trylock; owner changes and timed
/// holds go out of line. (With the trylock and the count each a call of
/// their own, the profile added about 8 ns to an uncontended mutex pair
/// of 7.5 ns on a 2-vCPU AMD EPYC guest.) Itself out of line: inlined
/// into the pthread functions, the profile's code cost their unprofiled
/// path.
#[inline(never)]
pub fn lock_exclusive(
    addr: usize,
    kind: Kind,
    try_lock: impl FnOnce() -> bool,
    lock: impl FnOnce() -> bool,
) -> bool {
    if try_lock() {
        acquired_exclusive(addr, kind);
        return true;
    }
    lock_exclusive_waiting(addr, kind, lock)
}

/// [`lock_exclusive`] when the trylock failed: the wait, timed.
#[cold]
#[inline(never)]
fn lock_exclusive_waiting(addr: usize, kind: Kind, lock: impl FnOnce() -> bool) -> bool {
    let t = now();
    let got = lock();
    if got {
        let end = now();
        match row(addr, kind) {
            Some(r) => {
                // We hold the lock alone: plain updates (see `Row`).
                let n = r.locked.load(Relaxed).wrapping_add(1);
                r.locked.store(n, Relaxed);
                exclusive_rest(r, n, Some((end.saturating_sub(t), end)));
            }
            None => untracked(),
        }
    }
    got
}

/// As [`lock_exclusive`], for a read lock.
#[inline(never)]
pub fn lock_shared(
    addr: usize,
    try_lock: impl FnOnce() -> bool,
    lock: impl FnOnce() -> bool,
) -> bool {
    if try_lock() {
        count_shared(addr, None);
        return true;
    }
    lock_shared_waiting(addr, lock)
}

/// [`lock_shared`] when the trylock failed: the wait, timed.
#[cold]
#[inline(never)]
fn lock_shared_waiting(addr: usize, lock: impl FnOnce() -> bool) -> bool {
    let t = now();
    let got = lock();
    if got {
        let end = now();
        count_shared(addr, Some(end.saturating_sub(t)));
    }
    got
}

/// Count an acquisition that did not wait (a trylock that succeeded).
#[inline(never)]
pub fn acquired(addr: usize, kind: Kind, exclusive: bool) {
    if exclusive {
        acquired_exclusive(addr, kind);
    } else {
        count_shared(addr, None);
    }
}

/// Count an exclusive acquisition that did not wait: one more
/// acquisition, and out of line, an owner change or the start of a timed
/// hold.
#[inline(always)]
fn acquired_exclusive(addr: usize, kind: Kind) {
    let Some(r) = row(addr, kind) else {
        return untracked();
    };
    // We hold the lock alone: plain updates (see `Row`).
    let n = r.locked.load(Relaxed).wrapping_add(1);
    r.locked.store(n, Relaxed);
    if r.last.load(Relaxed) != crate::me() || timed_hold(n) {
        exclusive_rest(r, n, None);
    }
}

/// The rest of counting an exclusive acquisition, the `n`-th of its lock,
/// after its count: the wait, the owner change and the start of a timed
/// hold. `wait`: `None` if it was not contended, else how long it waited
/// and when it got the lock (clock units; the second is the start of its
/// hold, if that is timed).
#[cold]
#[inline(never)]
fn exclusive_rest(r: &Row, n: u64, wait: Option<(u64, u64)>) {
    // We hold the lock alone: plain updates (see `Row`).
    let add = |c: &AtomicU64, v: u64| c.store(c.load(Relaxed).wrapping_add(v), Relaxed);
    let me = crate::me();
    let moved = r.last.load(Relaxed) != me;
    if let Some((w, _)) = wait {
        add(&r.contended, 1);
        add(&r.wait_total, w);
        if w > r.wait_max.load(Relaxed) {
            r.wait_max.store(w, Relaxed);
        }
        let min = r.wait_min.load(Relaxed);
        if min == 0 || w < min {
            r.wait_min.store(w.max(1), Relaxed);
        }
        if moved {
            add(&r.con_bounces, 1);
        }
    }
    if moved {
        r.last.store(me, Relaxed);
        add(&r.changed, 1);
    }
    if timed_hold(n) {
        // A contended acquisition's hold starts when its wait ended.
        let start = wait.map_or_else(now, |(_, end)| end);
        // 0 means "not timed" to the release.
        r.hold_start.store(start.max(1), Relaxed);
    }
}

/// Count a shared acquisition (readers share the row: RMWs). `wait`:
/// `None` if it was not contended, else how long it waited.
fn count_shared(addr: usize, wait: Option<u64>) {
    let Some(r) = row(addr, Kind::RwLock) else {
        return untracked();
    };
    let me = crate::me();
    r.locked.fetch_add(1, Relaxed);
    let moved = r.last.load(Relaxed) != me && r.last.swap(me, Relaxed) != me;
    if moved {
        r.changed.fetch_add(1, Relaxed);
    }
    if let Some(w) = wait {
        r.contended.fetch_add(1, Relaxed);
        r.wait_total.fetch_add(w, Relaxed);
        r.wait_max.fetch_max(w, Relaxed);
        // 0 means "none yet": fetch_min would keep it.
        let _ = r
            .wait_min
            .fetch_update(Relaxed, Relaxed, |m| (m == 0 || w < m).then_some(w.max(1)));
        if moved {
            r.con_bounces.fetch_add(1, Relaxed);
        }
    }
}

/// The process the profile started in: the pid in `KLOCK_STAT_PID` when
/// the library was loaded (a descendant of that process), else ours, which
/// the library then puts in the environment for the processes this one
/// starts. An `exec` keeps the pid, so a wrapper that execs the program
/// leaves the program the first process. Set at load.
static FIRST_PID: AtomicU32 = AtomicU32::new(0);
/// The variable that carries [`FIRST_PID`] to the descendants.
const FIRST_PID_VAR: &str = "KLOCK_STAT_PID";
/// In a forked child: the calls forwarded to glibc before the fork, which
/// its report leaves out.
static FORWARDED_AT_FORK: AtomicU64 = AtomicU64::new(0);

/// In a forked child (the library's `pthread_atfork` child handler): clear
/// the counts the child inherited with the parent's memory, so that its
/// profile at exit is its own. Without this a child that exits printed
/// the parent's acquisitions up to the fork as if they were its own, and
/// each of a server's forked workers repeated them. The rows stay claimed
/// (the locks exist in the child too, at the same addresses), and a hold
/// that the forking thread had begun goes on being timed. Only the rows in
/// use are touched, from the list of claims: a fork followed by `exec`
/// pays for the program's locks, not for the table.
pub(crate) fn after_fork_in_child() {
    if !on() {
        return;
    }
    FORWARDED_AT_FORK.store(crate::klock_preload_forwarded(), Relaxed);
    let t = table();
    for i in t.claimed_rows() {
        let r = &t.rows[i];
        for c in [
            &r.locked,
            &r.changed,
            &r.holds,
            &r.hold_total,
            &r.hold_max,
            &r.hold_min,
            &r.contended,
            &r.con_bounces,
            &r.wait_total,
            &r.wait_min,
            &r.wait_max,
        ] {
            c.store(0, Relaxed);
        }
        r.last.store(0, Relaxed);
    }
    t.untracked.store(0, Relaxed);
    // klock's event counters too, which the report ends with.
    klock::events::reset_all();
}

/// An exclusive holder is about to release the lock at `addr`: the home
/// row's probe and a look at its hold's start; the hold's time, when it
/// is timed, out of line.
#[inline(never)]
pub fn releasing_exclusive(addr: usize, kind: Kind) {
    let Some(r) = row(addr, kind) else { return };
    let start = r.hold_start.load(Relaxed);
    if start != 0 {
        hold_ended(r, start);
    }
}

/// A timed hold that began at `start` (clock units) ends.
#[cold]
#[inline(never)]
fn hold_ended(r: &Row, start: u64) {
    // We still hold the lock alone: plain updates (see `Row`).
    let h = now().saturating_sub(start);
    r.hold_start.store(0, Relaxed);
    r.holds.store(r.holds.load(Relaxed) + 1, Relaxed);
    r.hold_total
        .store(r.hold_total.load(Relaxed).wrapping_add(h), Relaxed);
    if h > r.hold_max.load(Relaxed) {
        r.hold_max.store(h, Relaxed);
    }
    let min = r.hold_min.load(Relaxed);
    if min == 0 || h < min {
        r.hold_min.store(h.max(1), Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::{home, CAPACITY};

    /// How many different home rows `n` locks `stride` bytes apart get.
    fn homes(stride: usize, n: usize) -> usize {
        let base = 0x7f3a_1c40_0000usize;
        let mut seen = vec![false; CAPACITY];
        for k in 0..n {
            seen[home(base + k * stride)] = true;
        }
        seen.iter().filter(|&&s| s).count()
    }

    #[test]
    fn locks_at_regular_strides_spread_over_the_table() {
        // Half the table's worth of locks: thrown at random they would
        // find 16,384 (1 - e^-1/2) = 6,447 different homes. The product
        // masked to the table gave 4,096 at a 16-byte stride, 1,024 at 64
        // and 256 at 256 (the strides of malloc's blocks and of locks in
        // arrays of structures); one product's top bits 3,087 at 16 and
        // 2,286 at 64 for a quarter of the table's worth.
        for stride in [4, 8, 16, 24, 40, 48, 64, 96, 128, 256, 4096, 65536] {
            let n = homes(stride, CAPACITY / 2);
            assert!(n >= CAPACITY * 35 / 100, "stride {stride}: {n} homes");
        }
    }

    #[test]
    fn homes_are_rows_of_the_table() {
        for addr in [0, 4, usize::MAX & !3, 0x5555_5555_5554] {
            assert!(home(addr) < CAPACITY);
        }
    }
}
