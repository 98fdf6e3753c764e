//! lockstat for userspace: which lock hurts, and where.
//!
//! The kernel's `CONFIG_LOCK_STAT` keeps, per lock *class*, how often a lock
//! was taken, how often the taker had to wait, for how long, how long it was
//! held, and from where the waiting happened. klock does the same for any
//! `lock_api` raw lock wrapped in [`Tracked`] — klock's locks, parking_lot's,
//! or your own — and prints it in the kernel's `/proc/lock_stat` layout and
//! in the lockmeter layout the 2004 `tree_lock` patch was judged with.
//!
//! ```
//! use klock::lockstat::{self, Tracked, TrackedMutex};
//! use klock::RawQSpinLock;
//!
//! // Class = a name ...
//! let inode: TrackedMutex<RawQSpinLock, u32> =
//!     TrackedMutex::from_raw(Tracked::named("inode_lock"), 0);
//! // ... or the creation site (file:line:column).
//! let map = lockstat::rwlock(std::collections::BTreeMap::<u32, u32>::new());
//! *inode.lock() += 1;
//! map.write().insert(1, 1);
//! assert_eq!(map.read().len(), 1);
//!
//! let report = lockstat::snapshot();
//! let c = report.class("inode_lock").unwrap();
//! assert_eq!((c.write.acquisitions, c.write.contentions), (1, 0));
//! print!("{}", report.proc_lock_stat());
//! print!("{}", report.lockmeter());
//! ```
//!
//! # What is counted (per class, separately for write and read holds)
//!
//! | field | meaning |
//! |---|---|
//! | `acquisitions` | successful lock operations |
//! | `contentions` | acquisitions that found the lock unavailable (a `try_lock` first failed) and waited |
//! | `wait` min/max/total | time from the failed try to holding the lock, contended acquisitions only |
//! | `hold` min/max/total | time from acquisition to release |
//! | `acq_bounces` | acquisitions by a different thread than the previous acquisition of the same lock (the cache line moved) |
//! | `con_bounces` | contentions where the lock had last been taken by another thread |
//! | `rejects` | `try_lock` calls that failed (lockmeter's RJECT) |
//! | contention points | the call sites (`#[track_caller]`) where threads waited, with counts |
//!
//! A *bounce* is counted per thread, not per CPU as in the kernel: in
//! userspace the CPU a thread runs on changes under it, and asking costs a
//! call per acquisition.
//!
//! # Cost, and who pays it
//!
//! Only locks wrapped in [`Tracked`] pay anything: untracked locks do not
//! contain a single line of this module (it is a separate type, not a flag
//! in the lock). A tracked acquisition costs an extra `try_lock` attempt
//! before the blocking path, two clock reads (three when contended; the
//! TSC where the kernel itself uses it, see [`now`]), and a few plain stores into this thread's own row of
//! counters: accumulation is per thread (a `thread_local!` row per class,
//! written with `Relaxed` load+store by its one writer), so tracking adds no
//! shared cache-line traffic of its own beyond the lock's own last-owner
//! word. `klock bench treelock` measures the cost (tracked vs untracked
//! ns/op). Rows of exited threads are folded into their class.
//!
//! # Reports
//!
//! [`snapshot`] sums every thread's rows into a [`Report`];
//! [`Report::proc_lock_stat`] and [`Report::lockmeter`] render the two
//! layouts; [`reset`] clears the counters (like writing `0` to
//! `/proc/lock_stat`); [`set_enabled`] pauses collection. With
//! `KLOCK_LOCKSTAT=1` in the environment, a process prints both layouts to
//! stderr at exit (registered when the first class is created).

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::sys::monotonic_ns;

mod report;
#[cfg(test)]
mod tests;
mod tracked;

pub use report::{dump, reset, snapshot, ClassStats, Report, SideStats, SiteStats};
pub use tracked::{mutex, rwlock, spinlock, Tracked, TrackedGuard, TrackedMutex, TrackedRwLock};

/// Which side of a lock an acquisition took.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Exclusive (a mutex's only mode, an rwlock's write side).
    Write = 0,
    /// Shared (an rwlock's read side).
    Read = 1,
}

// --- per-thread rows ------------------------------------------------------

/// One side's counters in one thread's row. Single writer (the owning
/// thread): updates are a `Relaxed` load and store, no locked instruction.
#[derive(Debug)]
struct SideRow {
    acquisitions: AtomicU64,
    acq_bounces: AtomicU64,
    contentions: AtomicU64,
    con_bounces: AtomicU64,
    rejects: AtomicU64,
    wait_min: AtomicU64,
    wait_max: AtomicU64,
    wait_total: AtomicU64,
    hold_min: AtomicU64,
    hold_max: AtomicU64,
    hold_total: AtomicU64,
}

impl Default for SideRow {
    fn default() -> Self {
        Self {
            acquisitions: AtomicU64::new(0),
            acq_bounces: AtomicU64::new(0),
            contentions: AtomicU64::new(0),
            con_bounces: AtomicU64::new(0),
            rejects: AtomicU64::new(0),
            wait_min: AtomicU64::new(u64::MAX),
            wait_max: AtomicU64::new(0),
            wait_total: AtomicU64::new(0),
            hold_min: AtomicU64::new(u64::MAX),
            hold_max: AtomicU64::new(0),
            hold_total: AtomicU64::new(0),
        }
    }
}

#[inline(always)]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

#[inline(always)]
fn lower(c: &AtomicU64, v: u64) {
    if v < c.load(Relaxed) {
        c.store(v, Relaxed);
    }
}

#[inline(always)]
fn raise(c: &AtomicU64, v: u64) {
    if v > c.load(Relaxed) {
        c.store(v, Relaxed);
    }
}

impl SideRow {
    fn snapshot(&self) -> SideStats {
        let min = |c: &AtomicU64| match c.load(Relaxed) {
            u64::MAX => 0,
            v => v,
        };
        SideStats {
            acquisitions: self.acquisitions.load(Relaxed),
            acq_bounces: self.acq_bounces.load(Relaxed),
            contentions: self.contentions.load(Relaxed),
            con_bounces: self.con_bounces.load(Relaxed),
            rejects: self.rejects.load(Relaxed),
            wait_min_ns: min(&self.wait_min),
            wait_max_ns: self.wait_max.load(Relaxed),
            wait_total_ns: self.wait_total.load(Relaxed),
            hold_min_ns: min(&self.hold_min),
            hold_max_ns: self.hold_max.load(Relaxed),
            hold_total_ns: self.hold_total.load(Relaxed),
        }
    }

    fn clear(&self) {
        for c in [
            &self.acquisitions,
            &self.acq_bounces,
            &self.contentions,
            &self.con_bounces,
            &self.rejects,
            &self.wait_max,
            &self.wait_total,
            &self.hold_max,
            &self.hold_total,
        ] {
            c.store(0, Relaxed);
        }
        self.wait_min.store(u64::MAX, Relaxed);
        self.hold_min.store(u64::MAX, Relaxed);
    }
}

/// Contention points: (call site, mode) → (contentions, total wait).
type SiteMap = HashMap<(&'static Location<'static>, Mode), (u64, u64)>;

/// One thread's counters for one class.
#[derive(Debug, Default)]
struct Row {
    side: [SideRow; 2],
    /// Contention points: touched only on contention (by the owner) and by
    /// reports, so an uncontended mutex is enough.
    sites: Mutex<SiteMap>,
}

impl Row {
    fn sites(&self) -> MutexGuard<'_, SiteMap> {
        self.sites.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// This thread's rows, by class id, and its identity for bounces.
struct Local {
    me: u32,
    rows: Vec<Option<Arc<Row>>>,
}

impl Drop for Local {
    /// Thread exit: fold this thread's rows into their classes.
    fn drop(&mut self) {
        let mut reg = registry();
        for (id, row) in self.rows.iter().enumerate() {
            if let Some(row) = row {
                let class = &mut reg.classes[id];
                class.retired.add_row(row);
                class.live.retain(|r| !Arc::ptr_eq(r, row));
            }
        }
    }
}

static NEXT_THREAD: AtomicU32 = AtomicU32::new(1);

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local {
        // 0 means "nobody" in a lock's last-owner word.
        me: NEXT_THREAD.fetch_add(1, Relaxed).max(1),
        rows: Vec::new(),
    });
}

/// Run `f` on this thread's row of `class` (creating it on first use).
/// `None` while the thread is being torn down: the sample is dropped.
#[inline]
fn with_row<T>(class: u32, f: impl FnOnce(u32, &Row) -> T) -> Option<T> {
    LOCAL
        .try_with(|l| {
            let mut l = l.borrow_mut();
            let i = class as usize;
            if !matches!(l.rows.get(i), Some(Some(_))) {
                new_row(&mut l, class);
            }
            let me = l.me;
            let row = l.rows[i].as_deref().expect("row just created");
            f(me, row)
        })
        .ok()
}

#[cold]
fn new_row(l: &mut Local, class: u32) {
    let row = Arc::new(Row::default());
    registry().classes[class as usize].live.push(row.clone());
    let i = class as usize;
    if l.rows.len() <= i {
        l.rows.resize(i + 1, None);
    }
    l.rows[i] = Some(row);
}

// --- the clock ------------------------------------------------------------
//
// Hand-calibrated rather than through the `quanta` crate: the same cost per
// timestamp, but `quanta` calibrates in a busy loop at set-up (inside the
// first tracked acquisition) and trusts CPUID's invariant-TSC flag where
// the kernel may have dropped the TSC; docs/lockstat.md has the figures.

/// 1: timestamps are TSC ticks; 2: monotonic ns. Set when the registry is
/// created, which happens before any tracked lock can time anything (a
/// lock needs its class first).
static CLOCK: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(2);

fn tsc_is_reliable() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .is_ok_and(|s| s.trim() == "tsc")
}

#[inline(always)]
fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)]
    // SAFETY: RDTSC has no preconditions on x86-64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    monotonic_ns()
}

/// A lockstat timestamp, in opaque units: TSC ticks where the kernel
/// itself uses the TSC as its clock (a few ns to read, against 20–30 ns for
/// `clock_gettime` on a VM), else monotonic ns. Reports convert to ns,
/// calibrating ticks against the monotonic clock over the time since the
/// registry was created. Pass these, not [`crate::sys::monotonic_ns`], to
/// [`LockStat::acquired_at`] and [`LockStat::released`].
#[inline(always)]
pub fn now() -> u64 {
    if CLOCK.load(Relaxed) == 1 {
        tsc()
    } else {
        monotonic_ns()
    }
}

/// ns per timestamp unit, from `(tsc0, ns0)` (taken at registry creation)
/// to now; waits until 1 ms has passed so the ratio is precise.
fn ns_per_unit(tsc0: u64, ns0: u64) -> f64 {
    if CLOCK.load(Relaxed) != 1 {
        return 1.0;
    }
    let mut ns = monotonic_ns();
    while ns.saturating_sub(ns0) < 1_000_000 {
        std::hint::spin_loop();
        ns = monotonic_ns();
    }
    let ticks = tsc().saturating_sub(tsc0).max(1);
    (ns - ns0) as f64 / ticks as f64
}

// --- the registry ---------------------------------------------------------

/// A class's totals from rows already folded (threads that exited).
#[derive(Debug, Default, Clone)]
struct Folded {
    write: SideStats,
    read: SideStats,
    sites: SiteMap,
}

impl Folded {
    fn add_row(&mut self, row: &Row) {
        self.write.merge(&row.side[0].snapshot());
        self.read.merge(&row.side[1].snapshot());
        for (k, v) in row.sites().iter() {
            let e = self.sites.entry(*k).or_insert((0, 0));
            e.0 += v.0;
            e.1 += v.1;
        }
    }
}

#[derive(Debug)]
struct ClassEntry {
    name: String,
    live: Vec<Arc<Row>>,
    retired: Folded,
}

#[derive(Debug)]
struct Registry {
    classes: Vec<ClassEntry>,
    by_name: HashMap<String, u32>,
    since_ns: u64,
    /// Calibration origin: TSC and monotonic ns at registry creation.
    tsc0: u64,
    ns0: u64,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REG: OnceLock<Mutex<Registry>> = OnceLock::new();
    REG.get_or_init(|| {
        if crate::config::lockstat_dump_at_exit() {
            register_exit_dump();
        }
        if tsc_is_reliable() {
            CLOCK.store(1, Relaxed);
        }
        let ns0 = monotonic_ns();
        Mutex::new(Registry {
            classes: Vec::new(),
            by_name: HashMap::new(),
            since_ns: ns0,
            tsc0: tsc(),
            ns0,
        })
    })
    .lock()
    .unwrap_or_else(|e| e.into_inner())
}

fn register_exit_dump() {
    extern "C" {
        fn atexit(cb: extern "C" fn()) -> std::ffi::c_int;
    }
    extern "C" fn dump_at_exit() {
        let r = snapshot();
        eprint!("{}\n{}", r.proc_lock_stat(), r.lockmeter());
    }
    // SAFETY: registers a plain function; atexit is always available in libc.
    unsafe { atexit(dump_at_exit) };
}

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Pause (`false`) or resume collection. Tracked locks still lock while
/// paused; they just record nothing.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Relaxed);
}

/// Whether collection is on (the default).
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// A lock class: all locks created with the same name (or at the same
/// call site) are counted together, as in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Class(u32);

impl Class {
    /// The class called `name` (created on first use).
    pub fn named(name: &str) -> Class {
        let mut reg = registry();
        if let Some(&id) = reg.by_name.get(name) {
            return Class(id);
        }
        let id = reg.classes.len() as u32;
        reg.classes.push(ClassEntry {
            name: name.to_string(),
            live: Vec::new(),
            retired: Folded::default(),
        });
        reg.by_name.insert(name.to_string(), id);
        Class(id)
    }

    /// The class of the caller's source location, `file:line:column`.
    #[track_caller]
    pub fn here() -> Class {
        let l = Location::caller();
        Class::named(&format!("{}:{}:{}", l.file(), l.line(), l.column()))
    }

    /// The class's name.
    pub fn name(self) -> String {
        registry().classes[self.0 as usize].name.clone()
    }
}

// --- recording ------------------------------------------------------------

/// A contended acquisition in progress (from [`LockStat::contended`]).
#[derive(Clone, Copy, Debug)]
pub struct Contention {
    since_ns: u64,
    site: &'static Location<'static>,
    bounce: bool,
}

/// The per-lock part of tracking: the lock's class and the thread that
/// last acquired it (for bounces). [`Tracked`] embeds one; wrappers for
/// locks that are not `lock_api` raw locks (the benchmark's peers) use it
/// directly:
///
/// ```
/// use klock::lockstat::{LockStat, Mode, Class};
/// let stat = LockStat::new(Class::named("my-pthread-lock"));
/// let lock = std::sync::Mutex::new(0);
/// let site = std::panic::Location::caller();
/// let (guard, contention) = match lock.try_lock() {
///     Ok(g) => (g, None),
///     Err(_) => { let c = stat.contended(Mode::Write, site); (lock.lock().unwrap(), Some(c)) }
/// };
/// let t = stat.acquired(Mode::Write, contention);
/// drop(guard);
/// stat.released(Mode::Write, t, klock::lockstat::now());
/// ```
#[derive(Debug)]
pub struct LockStat {
    /// Class id + 1; 0 = not yet assigned (a lock made by `INIT`).
    class: AtomicU32,
    /// Identity of the last acquiring thread (0 = none).
    last: AtomicU32,
}

impl LockStat {
    /// Tracking state in `class`.
    pub fn new(class: Class) -> Self {
        Self {
            class: AtomicU32::new(class.0 + 1),
            last: AtomicU32::new(0),
        }
    }

    /// Tracking state whose class is chosen at first use: `default_name`.
    pub const fn unassigned() -> Self {
        Self {
            class: AtomicU32::new(0),
            last: AtomicU32::new(0),
        }
    }

    /// This lock's class, assigning `default_name`'s class if it has none.
    #[inline]
    fn class_or(&self, default_name: impl FnOnce() -> String) -> u32 {
        match self.class.load(Relaxed) {
            0 => {
                let c = Class::named(&default_name()).0;
                // Racing first users resolve the same name: same id.
                self.class.store(c + 1, Relaxed);
                c
            }
            c => c - 1,
        }
    }

    #[inline]
    fn class(&self) -> u32 {
        self.class_or(|| "unnamed".into())
    }

    /// A lock attempt found the lock taken and is about to wait: start the
    /// clock. `site` is where the caller is waiting.
    #[inline]
    pub fn contended(&self, _mode: Mode, site: &'static Location<'static>) -> Contention {
        let me = LOCAL.try_with(|l| l.borrow().me).unwrap_or(0);
        Contention {
            since_ns: now(),
            site,
            bounce: self.last.load(Relaxed) != me,
        }
    }

    /// The lock was acquired (after `contention`, if it had to wait).
    /// Returns the acquisition timestamp to pass to [`released`](Self::released).
    #[inline]
    pub fn acquired(&self, mode: Mode, contention: Option<Contention>) -> u64 {
        self.acquired_at(mode, contention, now())
    }

    /// [`acquired`](Self::acquired) with the acquisition time taken by the
    /// caller (for wrappers that can only record after the fact, e.g.
    /// closure-based locks: read the clock first thing inside the critical
    /// section, record after it). Returns `now`.
    #[inline]
    pub fn acquired_at(&self, mode: Mode, contention: Option<Contention>, now: u64) -> u64 {
        let class = self.class();
        with_row(class, |me, row| {
            let s = &row.side[mode as usize];
            bump(&s.acquisitions, 1);
            // Relaxed: a statistic; the lock itself orders the holders.
            if self.last.load(Relaxed) != me {
                bump(&s.acq_bounces, 1);
                self.last.store(me, Relaxed);
            }
            if let Some(c) = contention {
                let wait = now.saturating_sub(c.since_ns);
                bump(&s.contentions, 1);
                bump(&s.con_bounces, c.bounce as u64);
                bump(&s.wait_total, wait);
                lower(&s.wait_min, wait);
                raise(&s.wait_max, wait);
                let mut sites = row.sites();
                let e = sites.entry((c.site, mode)).or_insert((0, 0));
                e.0 += 1;
                e.1 += wait;
            }
        });
        now
    }

    /// The hold that started at `acquired_ns` ended at `released_ns`.
    #[inline]
    pub fn released(&self, mode: Mode, acquired_ns: u64, released_ns: u64) {
        let hold = released_ns.saturating_sub(acquired_ns);
        with_row(self.class(), |_, row| {
            let s = &row.side[mode as usize];
            bump(&s.hold_total, hold);
            lower(&s.hold_min, hold);
            raise(&s.hold_max, hold);
        });
    }

    /// A `try_lock` failed.
    #[inline]
    pub fn rejected(&self, mode: Mode) {
        with_row(self.class(), |_, row| {
            bump(&row.side[mode as usize].rejects, 1)
        });
    }
}
