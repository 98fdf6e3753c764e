//! Is the lock owner running? The oracle behind optimistic spinning
//! (docs/design.md, Instruments).
//!
//! The kernel spins on a mutex only while the owner is on a CPU and the
//! spinner need not reschedule. Userspace cannot see either directly, so
//! klock asks an [`OnCpu`] oracle:
//!
//! * [`OnCpu::owner_running`]: `Some(true)` / `Some(false)` when the oracle
//!   knows, `None` when it cannot tell. On `None` the locks fall back to a
//!   **time budget** ([`SpinStats`]).
//! * [`OnCpu::should_yield`]: the `need_resched()` stand-in, checked by the
//!   spinner every few iterations.
//!
//! The oracle is process-global: [`oracle`] chooses it on first use from
//! `KLOCK_ONCPU=auto|bpf|budget`, and [`use_oracle`] / [`set_oracle`]
//! switch it at run time. Built in: the unprivileged default,
//! [`BudgetOracle`], and with feature `bpf` the exact `BpfOracle`, which
//! reads the owner's on-CPU state from an eBPF `sched_switch` program
//! (`oncpu_bpf`). The locks only ever call [`oracle()`], so a new oracle
//! needs no change to them.
//!
//! # The default: a calibrated, per-lock adaptive time budget
//!
//! * **Base budget** ([`base_spin_ns`]): half a futex wait/wake round trip,
//!   measured once at first use by ping-ponging a helper thread on two
//!   futex words for at most ~0.6 ms; the median round trip / 2, clamped to
//!   [`MIN_SPIN_NS`]..=[`MAX_SPIN_NS`]. Spinning longer than the time it
//!   takes to sleep and be woken cannot win much. `KLOCK_SPIN_NS=<ns>` in the
//!   environment overrides the measurement.
//! * **Per lock** ([`SpinStats`], 4 bytes kept in the lock): a moving
//!   average (weight 1/8) of how long *successful* spins took; the budget is
//!   twice that average, at least the base and at most
//!   [`MAX_BUDGET_FACTOR`] × base — the glibc adaptive-mutex rule, in time
//!   instead of iteration counts. In the same word, a score of spins that
//!   ran out of their budget, with which a mutex skips spinning for a while
//!   when most of its spins are futile ([`SpinStats::futile`],
//!   [`crate::mutex::futile_skip`]).
//! * Spin at all only if more than one CPU is online ([`spinning_useful`]).
//! * [`BudgetOracle::should_yield`]: the spinner was migrated (its CPU
//!   number changed since [`OnCpu::spin_begin`]), which also means it was
//!   preempted. Preemption without migration shows up as a spent budget,
//!   because the budget is wall-clock time.

use crate::sys;
#[cfg(not(loom))]
use core::cell::Cell;
use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32,
    Ordering::{Acquire, Relaxed, Release},
};
#[cfg(not(loom))]
use std::sync::OnceLock;

/// The owner-running oracle.
///
/// Implementations must be cheap: the spin loops call them every few
/// iterations. `owner_tid` is the owner's kernel thread id.
pub trait OnCpu: Send + Sync {
    /// Is thread `owner_tid` running on a CPU right now? `None`: unknown
    /// (the caller then spins on a time budget).
    fn owner_running(&self, owner_tid: u32) -> Option<bool>;

    /// Should the calling spinner stop spinning and let the scheduler run
    /// something else (the kernel's `need_resched()`)?
    fn should_yield(&self) -> bool;

    /// The calling thread starts a spin; [`should_yield`](Self::should_yield)
    /// answers relative to this point. Default: nothing to remember.
    fn spin_begin(&self) {}
}

/// The unprivileged default oracle: never knows whether the owner runs
/// (the locks use their time budget), and tells a spinner to yield when it
/// has been migrated since [`OnCpu::spin_begin`].
#[derive(Debug, Default, Clone, Copy)]
pub struct BudgetOracle;

#[cfg(not(loom))]
thread_local! {
    /// CPU the calling thread was on at its last `spin_begin`.
    static SPIN_CPU: Cell<u32> = const { Cell::new(u32::MAX) };
}

impl OnCpu for BudgetOracle {
    #[inline]
    fn owner_running(&self, _owner_tid: u32) -> Option<bool> {
        None
    }

    #[inline]
    fn should_yield(&self) -> bool {
        // Under loom: never (the CPU number is not part of the model, and
        // a nondeterministic answer would break loom's replay).
        #[cfg(loom)]
        {
            false
        }
        #[cfg(not(loom))]
        {
            SPIN_CPU
                .try_with(|c| c.get() != sys::current_cpu())
                .unwrap_or(false)
        }
    }

    #[inline]
    fn spin_begin(&self) {
        #[cfg(not(loom))]
        let _ = SPIN_CPU.try_with(|c| c.set(sys::current_cpu()));
    }
}

static DEFAULT_ORACLE: BudgetOracle = BudgetOracle;
/// The oracle in use, as a pointer to a `&'static dyn OnCpu` (null until
/// chosen). A pointer, not a `OnceLock`, so that it can be switched at any
/// time: the locks read it once per spin and treat its answers as hints,
/// so a switch between two spins is harmless.
static ORACLE: AtomicPtr<&'static dyn OnCpu> = AtomicPtr::new(core::ptr::null_mut());
static BUDGET_REF: &dyn OnCpu = &DEFAULT_ORACLE;
#[cfg(all(feature = "bpf", not(loom)))]
static BPF_REF: &dyn OnCpu = &BpfOracle;

/// The built-in oracles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OracleKind {
    /// [`BudgetOracle`]: unprivileged, never knows whether the owner runs.
    Budget,
    /// `BpfOracle`: exact, from an eBPF `sched_switch` program (feature
    /// `bpf`, needs root).
    Bpf,
}

impl OracleKind {
    /// `"budget"` / `"bpf"`, as `KLOCK_ONCPU` spells them.
    pub fn name(self) -> &'static str {
        match self {
            Self::Budget => "budget",
            Self::Bpf => "bpf",
        }
    }
}

/// Install `oracle` as the process's owner-running oracle, replacing the
/// one in use (spins already under way finish with the old one). Meant to
/// be called a few times per process: each call keeps a two-word box.
pub fn set_oracle(oracle: &'static dyn OnCpu) {
    // Release pairs with the Acquire load in `oracle`.
    ORACLE.store(Box::into_raw(Box::new(oracle)), Release);
    crate::config::fix_oracle();
}

/// Switch to a built-in oracle. [`OracleKind::Bpf`] loads and attaches
/// the eBPF program first (an error says why it cannot, in one line);
/// [`OracleKind::Budget`] also detaches the program if it was loaded, so
/// that it costs nothing on context switches any more.
pub fn use_oracle(kind: OracleKind) -> Result<(), String> {
    match kind {
        OracleKind::Budget => {
            // Release pairs with the Acquire load in `oracle`.
            ORACLE.store(&BUDGET_REF as *const _ as *mut _, Release);
            crate::config::fix_oracle();
            #[cfg(all(feature = "bpf", not(loom)))]
            crate::oncpu_bpf::unload();
            Ok(())
        }
        OracleKind::Bpf => {
            #[cfg(all(feature = "bpf", not(loom)))]
            {
                crate::oncpu_bpf::load().map_err(|e| e.to_string())?;
                ORACLE.store(&BPF_REF as *const _ as *mut _, Release);
                crate::config::fix_oracle();
                Ok(())
            }
            #[cfg(not(all(feature = "bpf", not(loom))))]
            Err(BPF_MISSING.to_string())
        }
    }
}

#[cfg(not(all(feature = "bpf", not(loom))))]
const BPF_MISSING: &str = "the bpf oracle is not built in: rebuild klock with `--features bpf`";

/// Which built-in oracle is in use (`None`: not chosen yet, or a custom
/// one from [`set_oracle`]).
pub fn oracle_kind() -> Option<OracleKind> {
    let p = ORACLE.load(Acquire);
    if core::ptr::eq(p, &BUDGET_REF) || core::ptr::eq(p, &PROVISIONAL_REF) {
        return Some(OracleKind::Budget);
    }
    #[cfg(all(feature = "bpf", not(loom)))]
    if core::ptr::eq(p, &BPF_REF) {
        return Some(OracleKind::Bpf);
    }
    None
}

/// The process's oracle. Chosen on first use from
/// [`crate::config::Config::oracle`] or `KLOCK_ONCPU`
/// (`auto`, the default: the eBPF oracle if klock was built with feature
/// `bpf` and the program loads, else the budget oracle; `bpf`: the same
/// but say why when it cannot load; `budget`), unless [`set_oracle`] or
/// [`use_oracle`] chose first. The eBPF oracle is loaded by a background
/// thread, so the budget oracle answers until it is in place
/// ([`wait_for_oracle`] waits for it).
#[inline]
pub fn oracle() -> &'static dyn OnCpu {
    // Acquire pairs with the Release stores that install an oracle.
    let p = ORACLE.load(Acquire);
    if p.is_null() {
        return choose_from_env();
    }
    // SAFETY: ORACLE only ever points at a static or a leaked box.
    unsafe { *p }
}

#[cold]
#[inline(never)]
fn choose_from_env() -> &'static dyn OnCpu {
    static CHOSEN: std::sync::Once = std::sync::Once::new();
    CHOSEN.call_once(|| {
        // Try the eBPF oracle? And say so if it cannot load?
        let (bpf, loud) = match crate::config::oracle() {
            crate::config::Oracle::Auto => (true, false),
            crate::config::Oracle::Budget => (false, false),
            crate::config::Oracle::Bpf => (true, true),
        };
        // The budget oracle at once (only if nobody chose meanwhile)...
        let _ = ORACLE.compare_exchange(
            core::ptr::null_mut(),
            &PROVISIONAL_REF as *const _ as *mut _,
            Release,
            Relaxed,
        );
        // ...and the eBPF one as soon as it is loaded, off the lock path:
        // loading takes milliseconds, which must not land on the first
        // contended lock (a real-time waiter, say).
        if bpf {
            LOADING.store(true, Relaxed);
            load_in_background(loud);
        }
    });
    let p = ORACLE.load(Acquire);
    // SAFETY: as in `oracle`; set by the call_once above at the latest.
    unsafe { *p }
}

/// The budget oracle, installed while the eBPF oracle loads: a separate
/// static, so that an explicit `use_oracle(Budget)` is not overridden.
static PROVISIONAL_REF: &dyn OnCpu = &DEFAULT_ORACLE;
/// The background load of the eBPF oracle is under way.
static LOADING: AtomicBool = AtomicBool::new(false);

#[cfg(all(feature = "bpf", not(loom)))]
fn load_in_background(loud: bool) {
    let spawned = std::thread::Builder::new()
        .name("klock-bpf-load".into())
        .spawn(move || {
            match crate::oncpu_bpf::load() {
                Ok(()) => {
                    let provisional = &PROVISIONAL_REF as *const _ as *mut _;
                    let bpf = &BPF_REF as *const _ as *mut _;
                    // Release pairs with the Acquire load in `oracle`. Fails
                    // if the program chose an oracle meanwhile: respect that.
                    if ORACLE
                        .compare_exchange(provisional, bpf, Release, Relaxed)
                        .is_err()
                        && oracle_kind() != Some(OracleKind::Bpf)
                    {
                        crate::oncpu_bpf::unload();
                    }
                }
                Err(e) if loud => eprintln!("klock: KLOCK_ONCPU=bpf: {e}; using the budget oracle"),
                Err(_) => {}
            }
            LOADING.store(false, Release);
        });
    if let Err(e) = spawned {
        LOADING.store(false, Release);
        if loud {
            eprintln!("klock: KLOCK_ONCPU=bpf: cannot start the loader thread: {e}");
        }
    }
}

#[cfg(not(all(feature = "bpf", not(loom))))]
fn load_in_background(loud: bool) {
    LOADING.store(false, Release);
    if loud {
        eprintln!("klock: KLOCK_ONCPU=bpf: {BPF_MISSING}; using the budget oracle");
    }
}

/// Wait (up to `limit`) until the oracle chosen from `KLOCK_ONCPU` is in
/// place: the eBPF oracle loads in the background, so a program that wants
/// it from its first lock on can wait for it. Returns the oracle in use.
pub fn wait_for_oracle(limit: std::time::Duration) -> Option<OracleKind> {
    oracle();
    let t0 = std::time::Instant::now();
    // Acquire pairs with the loader's Release store: its switch is seen.
    while LOADING.load(Acquire) && t0.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    oracle_kind()
}

/// The exact oracle (feature `bpf`): the owner's on-CPU state from the
/// eBPF `sched_switch` table ([`crate::oncpu_bpf`]). `should_yield`: the
/// spinner itself was switched out since `spin_begin` (its own switch
/// sequence moved); for threads the table does not know, it answers like
/// [`BudgetOracle`].
#[cfg(all(feature = "bpf", not(loom)))]
#[derive(Debug, Default, Clone, Copy)]
pub struct BpfOracle;

#[cfg(all(feature = "bpf", not(loom)))]
thread_local! {
    /// The calling thread's switch sequence at its last `spin_begin`
    /// (0: unknown, use the CPU check).
    static SPIN_SEQ: Cell<u32> = const { Cell::new(0) };
}

#[cfg(all(feature = "bpf", not(loom)))]
impl OnCpu for BpfOracle {
    #[inline]
    fn owner_running(&self, owner_tid: u32) -> Option<bool> {
        use crate::oncpu_bpf::CpuState;
        match crate::oncpu_bpf::cpu_state(owner_tid) {
            CpuState::On(_) => Some(true),
            CpuState::Off(_) => Some(false),
            CpuState::Unknown => None,
        }
    }

    #[inline]
    fn should_yield(&self) -> bool {
        let seq = SPIN_SEQ.try_with(|c| c.get()).unwrap_or(0);
        if seq == 0 {
            return BudgetOracle.should_yield();
        }
        match crate::oncpu_bpf::cpu_state(crate::thread::current_tid()) {
            crate::oncpu_bpf::CpuState::On(now) => now != seq,
            _ => true,
        }
    }

    #[inline]
    fn spin_begin(&self) {
        let seq = match crate::oncpu_bpf::cpu_state(crate::thread::current_tid()) {
            crate::oncpu_bpf::CpuState::On(s) => s,
            _ => {
                BudgetOracle.spin_begin();
                0
            }
        };
        let _ = SPIN_SEQ.try_with(|c| c.set(seq));
    }
}

/// Whether optimistic spinning can ever help: more than one CPU online.
#[inline]
pub fn spinning_useful() -> bool {
    cfg!(loom) || sys::online_cpus() > 1
}

/// Lower clamp of the base budget.
pub const MIN_SPIN_NS: u64 = 250;
/// Upper clamp of the base budget.
pub const MAX_SPIN_NS: u64 = 20_000;
/// Base budget when measuring is impossible (one CPU, no helper thread).
pub const FALLBACK_SPIN_NS: u64 = 2_000;
/// A lock's budget is at most this many base budgets.
pub const MAX_BUDGET_FACTOR: u64 = 8;
/// New owners' extra budgets (mutex and rwsem writer spinning): a spinner
/// that keeps losing the lock to other threads gives each new owner a
/// fresh budget, up to this many budgets in all.
pub const MAX_OWNER_BUDGETS: u64 = 4;

/// The base spin budget in ns: half a futex wait/wake round trip, measured
/// once on first use (see the module docs).
pub fn base_spin_ns() -> u64 {
    #[cfg(loom)]
    {
        // The loom clock advances 1 µs per reading: two readings' worth.
        2_000
    }
    #[cfg(not(loom))]
    {
        static BASE: OnceLock<u64> = OnceLock::new();
        *BASE.get_or_init(|| {
            if let Some(ns) = crate::config::spin_ns() {
                return ns.max(1);
            }
            calibrate::half_round_trip_ns()
                .map_or(FALLBACK_SPIN_NS, |ns| ns.clamp(MIN_SPIN_NS, MAX_SPIN_NS))
        })
    }
}

#[cfg(not(loom))]
mod calibrate {
    use crate::sys::{futex_wait, futex_wake, monotonic_ns};
    use std::sync::atomic::{AtomicU32, Ordering::Acquire, Ordering::Release};
    use std::sync::Arc;
    use std::time::Duration;

    /// Round trips to time (fewer if the time cap is reached first).
    const ROUNDS: u32 = 24;
    /// Stop measuring after this long.
    const CAP_NS: u64 = 600_000;
    /// Value of `ping` telling the helper to quit.
    const QUIT: u32 = u32::MAX;

    /// Median futex ping-pong round trip between this thread and a helper,
    /// halved. `None` if no helper could be started or nothing was measured.
    pub(super) fn half_round_trip_ns() -> Option<u64> {
        if crate::sys::online_cpus() <= 1 {
            return None;
        }
        let words = Arc::new((AtomicU32::new(0), AtomicU32::new(0)));
        let w = words.clone();
        let tick = Some(Duration::from_micros(200));
        std::thread::Builder::new()
            .name("klock-calibrate".into())
            .spawn(move || {
                let (ping, pong) = (&w.0, &w.1);
                let start = monotonic_ns();
                let mut seen = 0;
                loop {
                    // Acquire pairs with the Release store of `ping`.
                    let v = ping.load(Acquire);
                    if v == QUIT || monotonic_ns() - start > 4 * CAP_NS {
                        return;
                    }
                    if v == seen {
                        futex_wait(ping, v, tick);
                        continue;
                    }
                    seen = v;
                    pong.store(v, Release);
                    futex_wake(pong, 1);
                }
            })
            .ok()?;
        let (ping, pong) = (&words.0, &words.1);
        let start = monotonic_ns();
        let mut samples = Vec::with_capacity(ROUNDS as usize);
        'rounds: for i in 1..=ROUNDS {
            let t0 = monotonic_ns();
            if t0 - start > CAP_NS {
                break;
            }
            ping.store(i, Release);
            futex_wake(ping, 1);
            while pong.load(Acquire) != i {
                futex_wait(pong, i - 1, tick);
                if monotonic_ns() - start > 2 * CAP_NS {
                    break 'rounds;
                }
            }
            // Skip the first round: it includes the helper's start-up.
            if i > 1 {
                samples.push(monotonic_ns() - t0);
            }
        }
        ping.store(QUIT, Release);
        futex_wake(ping, 1);
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        Some(samples[samples.len() / 2] / 2)
    }
}

/// Per-lock adaptive spin budget (4 bytes, kept in the lock): a moving
/// average of how long successful spins took, and a score of spins that
/// ran out of their budget ([`futile`](Self::futile)). Statistics, not
/// synchronisation: plain relaxed accesses, racing updates may be lost.
///
/// The word: bits 0..24 the average in ns (saturating at ~16.7 ms, far
/// above any budget), bits 24..32 the futility score.
#[derive(Debug, Default)]
pub struct SpinStats {
    word: AtomicU32,
}

/// Bits of [`SpinStats`]' word that hold the average.
const AVG_BITS: u32 = 24;
const AVG_MASK: u32 = (1 << AVG_BITS) - 1;

/// Net failed spins (each failure +1, each success −2) after which a lock
/// skips its next [`FUTILE_SKIPS`] spins.
pub const FUTILE_LIMIT: u32 = 8;
/// How many spins a lock skips once its spins have proved futile; then one
/// spin probes again (a failure skips as many again, a success counts
/// down the score).
pub const FUTILE_SKIPS: u32 = 32;

impl SpinStats {
    /// No history yet: the budget starts at the base.
    pub const fn new() -> Self {
        Self {
            word: AtomicU32::new(0),
        }
    }

    /// This lock's spin budget in ns: `clamp(2 × average, base,
    /// MAX_BUDGET_FACTOR × base)`.
    #[inline]
    pub fn budget_ns(&self) -> u64 {
        let base = base_spin_ns();
        (2 * u64::from(self.average_ns())).clamp(base, MAX_BUDGET_FACTOR * base)
    }

    /// A spin succeeded after `ns`: fold it into the average (weight 1/8),
    /// and count the score down by two (a lock whose spins succeed at
    /// least a third of the time never reaches [`FUTILE_LIMIT`]).
    #[inline]
    pub fn record_success(&self, ns: u64) {
        let w = self.word.load(Relaxed);
        let ns = ns.min(u64::from(AVG_MASK)) as i64;
        let avg = i64::from(w & AVG_MASK);
        // Between `avg` and `ns`, both within the mask.
        let new = (avg + (ns - avg) / 8) as u32;
        let score = w >> AVG_BITS;
        // A success while skipping (a spin begun before) leaves the skips.
        let score = if score < FUTILE_LIMIT {
            score.saturating_sub(2)
        } else {
            score
        };
        self.word.store(score << AVG_BITS | new, Relaxed);
    }

    /// A spin ran out of its budget without the lock: the time was lost.
    /// After [`FUTILE_LIMIT`] net failures the lock skips its next
    /// [`FUTILE_SKIPS`] spins ([`futile`](Self::futile)).
    #[inline]
    pub fn record_failure(&self) {
        let w = self.word.load(Relaxed);
        let score = w >> AVG_BITS;
        let score = match score + 1 {
            s if s < FUTILE_LIMIT => s,
            // Reached: skip. Already skipping (a spin begun before): keep
            // the count.
            s if s == FUTILE_LIMIT => FUTILE_LIMIT + FUTILE_SKIPS,
            _ => score,
        };
        self.word.store(score << AVG_BITS | (w & AVG_MASK), Relaxed);
    }

    /// Whether a spin should be skipped now because this lock's recent
    /// spins ran out of their budget. Each `true` uses up one skip; after
    /// the last one the score sits one failure below the limit, so the next
    /// spin probes: if it fails too, the lock skips again.
    #[inline]
    pub fn futile(&self) -> bool {
        let w = self.word.load(Relaxed);
        let score = w >> AVG_BITS;
        if score <= FUTILE_LIMIT {
            return false;
        }
        let left = if score == FUTILE_LIMIT + 1 {
            FUTILE_LIMIT - 1
        } else {
            score - 1
        };
        self.word.store(left << AVG_BITS | (w & AVG_MASK), Relaxed);
        true
    }

    /// The current average of successful spin times, in ns.
    #[inline]
    pub fn average_ns(&self) -> u32 {
        self.word.load(Relaxed) & AVG_MASK
    }

    /// The futility score: below [`FUTILE_LIMIT`], net failed spins; above
    /// it, [`FUTILE_LIMIT`] + the spins left to skip.
    pub fn futility(&self) -> u32 {
        self.word.load(Relaxed) >> AVG_BITS
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn base_budget_is_measured_quickly_and_sane() {
        let t0 = Instant::now();
        let b = base_spin_ns();
        let dt = t0.elapsed();
        assert!((1..=MAX_SPIN_NS.max(1 << 40)).contains(&b), "{b}");
        if crate::config::spin_ns().is_none() {
            assert!((MIN_SPIN_NS..=MAX_SPIN_NS).contains(&b), "{b}");
        }
        // Generous: the machine is shared; the cap itself is ~1.2 ms.
        assert!(dt.as_millis() < 200, "calibration took {dt:?}");
        assert_eq!(base_spin_ns(), b);
    }

    #[test]
    fn budget_adapts_within_bounds() {
        let s = SpinStats::new();
        let base = base_spin_ns();
        assert_eq!(s.budget_ns(), base);
        for _ in 0..200 {
            s.record_success(1_000_000);
        }
        assert_eq!(s.budget_ns(), MAX_BUDGET_FACTOR * base);
        for _ in 0..200 {
            s.record_success(10);
        }
        assert_eq!(s.budget_ns(), base);
        assert!(s.average_ns() < 100);
    }

    #[test]
    fn futile_spins_are_skipped_then_probed() {
        let s = SpinStats::new();
        s.record_success(3_000);
        let avg = s.average_ns();
        // Failures below the limit: keep spinning.
        for _ in 0..FUTILE_LIMIT - 1 {
            s.record_failure();
            assert!(!s.futile());
        }
        // One success counts two failures back.
        s.record_success(3_000);
        s.record_failure();
        s.record_failure();
        assert!(!s.futile());
        s.record_failure();
        assert_eq!(s.futility(), FUTILE_LIMIT + FUTILE_SKIPS);
        for _ in 0..FUTILE_SKIPS {
            assert!(s.futile());
        }
        // The probe spins; it fails: skip again.
        assert!(!s.futile());
        s.record_failure();
        assert!(s.futile());
        // The average is untouched by all of it.
        assert!(s.average_ns().abs_diff(avg) < 1_000, "{}", s.average_ns());
        // A lock whose spins succeed a third of the time never skips.
        let s = SpinStats::new();
        for _ in 0..1_000 {
            s.record_failure();
            s.record_failure();
            s.record_success(1_000);
            assert!(!s.futile());
        }
    }

    #[test]
    fn the_average_saturates_without_touching_the_score() {
        let s = SpinStats::new();
        for _ in 0..200 {
            s.record_success(u64::MAX);
        }
        assert!(s.average_ns() >= AVG_MASK - 8, "{}", s.average_ns());
        assert_eq!(s.futility(), 0);
    }

    #[test]
    fn default_oracle_answers() {
        let o = oracle();
        o.spin_begin();
        // Possibly true if we were migrated just now; must not panic.
        let _ = o.should_yield();
        if oracle_kind() == Some(OracleKind::Budget) {
            assert_eq!(o.owner_running(1), None);
        }
    }
}
