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
use std::fmt::Write as _;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::sys::monotonic_ns;

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

// --- the wrapper ----------------------------------------------------------

/// Any `lock_api` raw mutex or rwlock, with lockstat tracking.
///
/// Build it with [`Tracked::named`] or [`Tracked::here`] (class = the call
/// site) and wrap it with `lock_api::Mutex::from_raw` /
/// `lock_api::RwLock::from_raw` (or use [`spinlock`], [`mutex`],
/// [`rwlock`]). A lock made by `INIT` (`lock_api::Mutex::new`, statics)
/// gets a class named after the raw lock type, shared by all such locks.
///
/// Lock calls through `lock_api`'s `Mutex`/`RwLock` are `#[track_caller]`,
/// so the contention points are the user's own `lock()` / `read()` /
/// `write()` lines.
#[derive(Debug)]
pub struct Tracked<R> {
    raw: R,
    stat: LockStat,
}

/// Guard state of a [`Tracked`] lock: the inner lock's guard and the
/// acquisition time (0 when collection was off).
#[derive(Debug)]
pub struct TrackedGuard<G> {
    inner: G,
    acquired_ns: u64,
}

/// A tracked `lock_api::Mutex`.
pub type TrackedMutex<R, T> = lock_api::Mutex<Tracked<R>, T>;
/// A tracked `lock_api::RwLock`.
pub type TrackedRwLock<R, T> = lock_api::RwLock<Tracked<R>, T>;

impl<R> Tracked<R> {
    /// Wrap `raw` in `class`.
    pub fn with_class(raw: R, class: Class) -> Self {
        Self {
            raw,
            stat: LockStat::new(class),
        }
    }

    /// The wrapped lock.
    pub fn inner(&self) -> &R {
        &self.raw
    }

    /// This lock's class.
    pub fn class(&self) -> Class {
        Class(self.stat.class_or(|| short_type_name::<R>()))
    }

    /// Time a lock operation: `try_` first; if it fails, record a contention
    /// at `site` and `block`.
    #[inline(always)]
    fn acquire<G>(
        &self,
        mode: Mode,
        site: &'static Location<'static>,
        try_: impl FnOnce() -> Option<G>,
        block: impl FnOnce() -> G,
    ) -> TrackedGuard<G> {
        if !enabled() {
            return TrackedGuard {
                inner: block(),
                acquired_ns: 0,
            };
        }
        self.class();
        let (inner, contention) = match try_() {
            Some(g) => (g, None),
            None => {
                let c = self.stat.contended(mode, site);
                (block(), Some(c))
            }
        };
        let acquired_ns = self.stat.acquired(mode, contention);
        TrackedGuard { inner, acquired_ns }
    }

    #[inline(always)]
    fn try_acquire<G>(
        &self,
        mode: Mode,
        try_: impl FnOnce() -> Option<G>,
    ) -> Option<TrackedGuard<G>> {
        if !enabled() {
            return try_().map(|inner| TrackedGuard {
                inner,
                acquired_ns: 0,
            });
        }
        self.class();
        match try_() {
            Some(inner) => Some(TrackedGuard {
                inner,
                acquired_ns: self.stat.acquired(mode, None),
            }),
            None => {
                self.stat.rejected(mode);
                None
            }
        }
    }

    /// Record the hold that ends now (called right after the inner unlock).
    #[inline(always)]
    fn release(&self, mode: Mode, acquired_ns: u64) {
        if acquired_ns != 0 {
            self.stat.released(mode, acquired_ns, now());
        }
    }
}

impl<R: lock_api::RawMutex> Tracked<R> {
    /// A fresh tracked lock in the class `name`.
    pub fn named(name: &str) -> Self {
        Self::with_class(R::INIT, Class::named(name))
    }

    /// A fresh tracked lock whose class is the caller's location.
    #[track_caller]
    pub fn here() -> Self {
        Self::with_class(R::INIT, Class::here())
    }
}

impl<R: lock_api::RawRwLock> Tracked<R> {
    /// A fresh tracked rwlock in the class `name`.
    pub fn named_rw(name: &str) -> Self {
        Self::with_class(R::INIT, Class::named(name))
    }

    /// A fresh tracked rwlock whose class is the caller's location.
    #[track_caller]
    pub fn here_rw() -> Self {
        Self::with_class(R::INIT, Class::here())
    }
}

/// `klock::qspinlock::RawQSpinLockWith<512>` → `RawQSpinLockWith<512>`.
fn short_type_name<R>() -> String {
    let full = std::any::type_name::<R>();
    let base = full.split('<').next().unwrap_or(full);
    let start = base.rfind("::").map_or(0, |i| i + 2);
    full[start..].to_string()
}

// SAFETY: delegates every operation to `R` with `R`'s own guard; tracking
// only reads the clock and writes statistics.
unsafe impl<R: lock_api::RawMutex> lock_api::RawMutex for Tracked<R> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self {
        raw: R::INIT,
        stat: LockStat::unassigned(),
    };
    type Guard = TrackedGuard<R::Guard>;

    #[inline]
    #[track_caller]
    fn lock(&self) -> Self::Guard {
        let site = Location::caller();
        self.acquire(
            Mode::Write,
            site,
            || self.raw.try_lock(),
            || self.raw.lock(),
        )
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        self.try_acquire(Mode::Write, || self.raw.try_lock())
    }

    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        // SAFETY: the caller passes the guard of a hold of this lock.
        unsafe { self.raw.unlock(guard.inner) };
        self.release(Mode::Write, guard.acquired_ns);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }
}

// SAFETY: as for the mutex impl.
unsafe impl<R: lock_api::RawRwLock> lock_api::RawRwLock for Tracked<R> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self {
        raw: R::INIT,
        stat: LockStat::unassigned(),
    };
    type SharedGuard = TrackedGuard<R::SharedGuard>;
    type ExclusiveGuard = TrackedGuard<R::ExclusiveGuard>;

    #[inline]
    #[track_caller]
    fn lock_shared(&self) -> Self::SharedGuard {
        let site = Location::caller();
        self.acquire(
            Mode::Read,
            site,
            || self.raw.try_lock_shared(),
            || self.raw.lock_shared(),
        )
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<Self::SharedGuard> {
        self.try_acquire(Mode::Read, || self.raw.try_lock_shared())
    }

    #[inline]
    unsafe fn unlock_shared(&self, guard: Self::SharedGuard) {
        // SAFETY: the caller passes the guard of a shared hold of this lock.
        unsafe { self.raw.unlock_shared(guard.inner) };
        self.release(Mode::Read, guard.acquired_ns);
    }

    #[inline]
    #[track_caller]
    fn lock_exclusive(&self) -> Self::ExclusiveGuard {
        let site = Location::caller();
        self.acquire(
            Mode::Write,
            site,
            || self.raw.try_lock_exclusive(),
            || self.raw.lock_exclusive(),
        )
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<Self::ExclusiveGuard> {
        self.try_acquire(Mode::Write, || self.raw.try_lock_exclusive())
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, guard: Self::ExclusiveGuard) {
        // SAFETY: the caller passes the guard of an exclusive hold of this lock.
        unsafe { self.raw.unlock_exclusive(guard.inner) };
        self.release(Mode::Write, guard.acquired_ns);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.raw.is_locked_exclusive()
    }
}

/// A tracked [`crate::SpinLock`] whose class is the caller's location.
#[track_caller]
pub fn spinlock<T>(value: T) -> TrackedMutex<crate::RawQSpinLock, T> {
    lock_api::Mutex::from_raw(Tracked::here(), value)
}

/// A tracked [`crate::Mutex`] whose class is the caller's location.
#[track_caller]
pub fn mutex<T>(value: T) -> TrackedMutex<crate::RawMutex, T> {
    lock_api::Mutex::from_raw(Tracked::here(), value)
}

/// A tracked [`crate::RwLock`] whose class is the caller's location.
#[track_caller]
pub fn rwlock<T>(value: T) -> TrackedRwLock<crate::RawQRwLock, T> {
    lock_api::RwLock::from_raw(Tracked::here_rw(), value)
}

// --- reports --------------------------------------------------------------

/// One side's totals (times in ns).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SideStats {
    /// Successful lock operations.
    pub acquisitions: u64,
    /// Acquisitions by another thread than the previous acquisition of
    /// the same lock (its cache line moved).
    pub acq_bounces: u64,
    /// Acquisitions that found the lock unavailable and waited.
    pub contentions: u64,
    /// Contentions where the lock had last been taken by another thread.
    pub con_bounces: u64,
    /// `try_lock` calls that failed.
    pub rejects: u64,
    /// Shortest wait of a contended acquisition; 0 when there were no
    /// contentions.
    pub wait_min_ns: u64,
    /// Longest wait of a contended acquisition.
    pub wait_max_ns: u64,
    /// Sum of the waits of contended acquisitions.
    pub wait_total_ns: u64,
    /// Shortest hold; 0 when there were no completed holds.
    pub hold_min_ns: u64,
    /// Longest hold.
    pub hold_max_ns: u64,
    /// Sum of all completed holds.
    pub hold_total_ns: u64,
}

impl SideStats {
    fn merge(&mut self, o: &SideStats) {
        let min = |a: u64, b: u64| match (a, b) {
            (0, x) | (x, 0) => x,
            (x, y) => x.min(y),
        };
        self.wait_min_ns = min(self.wait_min_ns, o.wait_min_ns);
        self.hold_min_ns = min(self.hold_min_ns, o.hold_min_ns);
        self.acquisitions += o.acquisitions;
        self.acq_bounces += o.acq_bounces;
        self.contentions += o.contentions;
        self.con_bounces += o.con_bounces;
        self.rejects += o.rejects;
        self.wait_max_ns = self.wait_max_ns.max(o.wait_max_ns);
        self.wait_total_ns += o.wait_total_ns;
        self.hold_max_ns = self.hold_max_ns.max(o.hold_max_ns);
        self.hold_total_ns += o.hold_total_ns;
    }

    /// Mean wait per contention, ns.
    pub fn wait_avg_ns(&self) -> f64 {
        self.wait_total_ns as f64 / self.contentions.max(1) as f64
    }

    /// Mean hold, ns.
    pub fn hold_avg_ns(&self) -> f64 {
        self.hold_total_ns as f64 / self.acquisitions.max(1) as f64
    }
}

/// One contention point: where threads waited for a class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteStats {
    /// The call site (through `#[track_caller]`) that waited.
    pub site: &'static Location<'static>,
    /// Whether it waited for a write (exclusive) or read (shared) hold.
    pub mode: Mode,
    /// How many times threads waited there.
    pub contentions: u64,
    /// Their total wait.
    pub wait_total_ns: u64,
}

/// Totals of one class.
#[derive(Clone, Debug)]
pub struct ClassStats {
    /// The class's name (see [`Class`]).
    pub name: String,
    /// Exclusive holds (a mutex's only mode, an rwlock's write side).
    pub write: SideStats,
    /// Shared holds (an rwlock's read side; zeros for a mutex).
    pub read: SideStats,
    /// Contention points, most contentions first.
    pub sites: Vec<SiteStats>,
    /// Time since the last [`reset`] (or the first class) when taken.
    pub elapsed_ns: u64,
}

impl ClassStats {
    /// Both sides together.
    pub fn total(&self) -> SideStats {
        let mut t = self.write.clone();
        t.merge(&self.read);
        t
    }
}

/// A summed snapshot of every class.
#[derive(Clone, Debug)]
pub struct Report {
    /// Classes with any activity, most contentions first.
    pub classes: Vec<ClassStats>,
    /// Online CPUs (lockmeter's wait "% CPU").
    pub cpus: usize,
}

/// Sum every thread's rows (live and exited) into a [`Report`].
pub fn snapshot() -> Report {
    let reg = registry();
    let elapsed_ns = monotonic_ns().saturating_sub(reg.since_ns);
    let k = ns_per_unit(reg.tsc0, reg.ns0);
    let ns = |t: u64| (t as f64 * k).round() as u64;
    let to_ns = |s: &mut SideStats| {
        for t in [
            &mut s.wait_min_ns,
            &mut s.wait_max_ns,
            &mut s.wait_total_ns,
            &mut s.hold_min_ns,
            &mut s.hold_max_ns,
            &mut s.hold_total_ns,
        ] {
            *t = ns(*t);
        }
    };
    let mut classes: Vec<ClassStats> = reg
        .classes
        .iter()
        .map(|c| {
            let mut f = c.retired.clone();
            for row in &c.live {
                f.add_row(row);
            }
            let mut sites: Vec<SiteStats> = f
                .sites
                .into_iter()
                .map(|((site, mode), (n, w))| SiteStats {
                    site,
                    mode,
                    contentions: n,
                    wait_total_ns: ns(w),
                })
                .collect();
            sites.sort_by(|a, b| {
                b.contentions
                    .cmp(&a.contentions)
                    .then_with(|| a.site.line().cmp(&b.site.line()))
            });
            let (mut write, mut read) = (f.write, f.read);
            to_ns(&mut write);
            to_ns(&mut read);
            ClassStats {
                name: c.name.clone(),
                write,
                read,
                sites,
                elapsed_ns,
            }
        })
        .filter(|c| {
            c.write.acquisitions + c.read.acquisitions + c.write.rejects + c.read.rejects > 0
        })
        .collect();
    drop(reg);
    classes.sort_by(|a, b| {
        b.total()
            .contentions
            .cmp(&a.total().contentions)
            .then_with(|| a.name.cmp(&b.name))
    });
    Report {
        classes,
        cpus: crate::sys::online_cpus(),
    }
}

/// Zero every counter and restart the clock. Call it while tracked locks
/// are quiet: a thread recording during the reset may write back a
/// pre-reset value (rows are single-writer load+store, not atomic adds).
pub fn reset() {
    let mut reg = registry();
    for c in &mut reg.classes {
        c.retired = Folded::default();
        for row in &c.live {
            for s in &row.side {
                s.clear();
            }
            row.sites().clear();
        }
    }
    reg.since_ns = monotonic_ns();
}

/// Print both layouts of a fresh [`snapshot`] to stderr.
pub fn dump() {
    let r = snapshot();
    eprint!("{}\n{}", r.proc_lock_stat(), r.lockmeter());
}

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e3)
}

/// Lockmeter time: `0.5us`, `385us`, `20ms`.
fn lm_time(ns: f64) -> String {
    let us = ns / 1e3;
    if us < 10.0 {
        format!("{us:.1}us")
    } else if us < 10_000.0 {
        format!("{us:.0}us")
    } else {
        format!("{:.0}ms", us / 1e3)
    }
}

/// Lockmeter percentage: `72.3%`, `0.82%`, `0%`, `100%`.
fn lm_pct(x: f64) -> String {
    if x <= 0.0 {
        "0%".into()
    } else if x >= 99.95 {
        format!("{x:.0}%")
    } else if x < 1.0 {
        format!("{x:.2}%")
    } else {
        format!("{x:.1}%")
    }
}

impl Report {
    /// The class called `name`, if it was active.
    pub fn class(&self, name: &str) -> Option<&ClassStats> {
        self.classes.iter().find(|c| c.name == name)
    }

    /// Append `other`'s classes (e.g. snapshots of runs taken one at a time).
    pub fn extend(&mut self, other: Report) {
        self.classes.extend(other.classes);
    }

    /// The kernel's `/proc/lock_stat` layout (times in µs). Classes with
    /// read holds get a `-W` and a `-R` line; then the class's contention
    /// points (call sites), most contentions first, at most four.
    pub fn proc_lock_stat(&self) -> String {
        let mut out = String::from("lock_stat version 0.4\n");
        let rule = "-".repeat(40 + 12 * 15);
        let _ = writeln!(out, "{rule}");
        let _ = writeln!(
            out,
            "{:>40} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}",
            "class name",
            "con-bounces",
            "contentions",
            "waittime-min",
            "waittime-max",
            "waittime-total",
            "waittime-avg",
            "acq-bounces",
            "acquisitions",
            "holdtime-min",
            "holdtime-max",
            "holdtime-total",
            "holdtime-avg"
        );
        let _ = writeln!(out, "{rule}");
        for c in &self.classes {
            out.push('\n');
            let has_read = c.read.acquisitions + c.read.rejects > 0;
            let sides: Vec<(&str, &SideStats)> = if has_read {
                vec![("-W", &c.write), ("-R", &c.read)]
            } else {
                vec![("", &c.write)]
            };
            for (suffix, s) in sides {
                let _ = writeln!(
                    out,
                    "{:>40} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}",
                    format!("{}{suffix}:", c.name),
                    s.con_bounces,
                    s.contentions,
                    us(s.wait_min_ns),
                    us(s.wait_max_ns),
                    us(s.wait_total_ns),
                    us(s.wait_avg_ns().round() as u64),
                    s.acq_bounces,
                    s.acquisitions,
                    us(s.hold_min_ns),
                    us(s.hold_max_ns),
                    us(s.hold_total_ns),
                    us(s.hold_avg_ns().round() as u64)
                );
            }
            if !c.sites.is_empty() {
                let _ = writeln!(out, "{:>40}", "-".repeat(c.name.len().min(40)));
                for s in c.sites.iter().take(4) {
                    let _ = writeln!(
                        out,
                        "{:>40} {:>14} [{}] {}:{}:{}",
                        c.name,
                        s.contentions,
                        match s.mode {
                            Mode::Write => "W",
                            Mode::Read => "R",
                        },
                        s.site.file(),
                        s.site.line(),
                        s.site.column()
                    );
                }
            }
            let _ = writeln!(out, "\n{}", ".".repeat(40 + 12 * 15));
        }
        out
    }

    /// The lockmeter layout of the 2004 `tree_lock` mail: a `*TOTAL*` line,
    /// then one line per class (rwlocks: one per side), then its contention
    /// points indented.
    ///
    /// UTIL: fraction of the elapsed time the lock was held (read holds
    /// overlap, so a read side can exceed 100%); CON: contended
    /// acquisitions; HOLD and WAIT: MEAN(MAX), wait mean over contended
    /// acquisitions; (% CPU): total wait over elapsed × CPUs; TOTAL:
    /// acquisitions; NOWAIT/SPIN: shares that got it at once / waited;
    /// RJECT: failed trylocks over trylocks+acquisitions. The `*TOTAL*`
    /// line has no % CPU when the classes come from separate runs.
    pub fn lockmeter(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "SPINLOCKS         HOLD            WAIT");
        let _ = writeln!(
            out,
            "  UTIL  CON    MEAN(  MAX )   MEAN(  MAX )(% CPU)     TOTAL NOWAIT SPIN RJECT  NAME"
        );
        // Classes from one snapshot share a window; a report assembled from
        // separate runs (`extend`) does not, and then the total has no
        // meaningful % CPU.
        let same_window = self
            .classes
            .windows(2)
            .all(|w| w[0].elapsed_ns == w[1].elapsed_ns);
        let line = |util: Option<f64>, s: &SideStats, elapsed_ns: u64, name: &str| -> String {
            let acq = s.acquisitions.max(1) as f64;
            let con = 100.0 * s.contentions as f64 / acq;
            let hold = format!(
                "{}({:>6})",
                lm_time(s.hold_avg_ns()),
                lm_time(s.hold_max_ns as f64)
            );
            let wait = if s.contentions == 0 {
                format!("{:<22}", "0us")
            } else if elapsed_ns == 0 {
                format!(
                    "{}({:>6}){:7}",
                    lm_time(s.wait_avg_ns()),
                    lm_time(s.wait_max_ns as f64),
                    ""
                )
            } else {
                let cpu = 100.0 * s.wait_total_ns as f64
                    / (elapsed_ns.max(1) as f64 * self.cpus.max(1) as f64);
                format!(
                    "{}({:>6})({:>5})",
                    lm_time(s.wait_avg_ns()),
                    lm_time(s.wait_max_ns as f64),
                    lm_pct(cpu)
                )
            };
            let tries = (s.acquisitions + s.rejects).max(1) as f64;
            format!(
                "{:>6} {:>5} {:>14} {:>22} {:>9} {:>6} {:>5} {:>5}  {}",
                util.map_or(String::new(), lm_pct),
                lm_pct(con),
                hold,
                wait,
                s.acquisitions,
                lm_pct(100.0 - con),
                lm_pct(con),
                lm_pct(100.0 * s.rejects as f64 / tries),
                name
            )
        };
        let mut total = SideStats::default();
        let mut elapsed = 0;
        for c in &self.classes {
            total.merge(&c.total());
            elapsed = elapsed.max(c.elapsed_ns);
        }
        if !same_window {
            elapsed = 0;
        }
        let _ = writeln!(
            out,
            "\n{}",
            line(None, &total, elapsed, "*TOTAL*").trim_end()
        );
        out.push('\n');
        for c in &self.classes {
            let has_read = c.read.acquisitions + c.read.rejects > 0;
            let sides: Vec<(&str, &SideStats)> = if has_read {
                vec![(" (write)", &c.write), (" (read)", &c.read)]
            } else {
                vec![("", &c.write)]
            };
            for (suffix, s) in sides {
                let util = 100.0 * s.hold_total_ns as f64 / c.elapsed_ns.max(1) as f64;
                let name = format!("{}{suffix}", c.name);
                let _ = writeln!(
                    out,
                    "{}",
                    line(Some(util), s, c.elapsed_ns, &name).trim_end()
                );
            }
            for s in c.sites.iter().take(4) {
                let _ = writeln!(
                    out,
                    "{:>60}  {:>9} waits  {}   {}:{}",
                    format!(
                        "{} mean wait",
                        lm_time(s.wait_total_ns as f64 / s.contentions.max(1) as f64)
                    ),
                    s.contentions,
                    match s.mode {
                        Mode::Write => "W",
                        Mode::Read => "R",
                    },
                    s.site.file(),
                    s.site.line()
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(lm_time(500.0), "0.5us");
        assert_eq!(lm_time(385_000.0), "385us");
        assert_eq!(lm_time(20_000_000.0), "20ms");
        assert_eq!(lm_pct(72.31), "72.3%");
        assert_eq!(lm_pct(0.82), "0.82%");
        assert_eq!(lm_pct(0.0), "0%");
        assert_eq!(lm_pct(100.0), "100%");
        assert_eq!(
            short_type_name::<crate::RawQSpinLock>(),
            "RawQSpinLockWith<512>"
        );
    }

    #[test]
    fn merge_keeps_min_of_nonzero() {
        let mut a = SideStats {
            wait_min_ns: 0,
            hold_min_ns: 7,
            ..Default::default()
        };
        a.merge(&SideStats {
            wait_min_ns: 5,
            hold_min_ns: 3,
            acquisitions: 2,
            ..Default::default()
        });
        assert_eq!((a.wait_min_ns, a.hold_min_ns, a.acquisitions), (5, 3, 2));
    }
}
