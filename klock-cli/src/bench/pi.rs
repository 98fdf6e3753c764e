//! The `pi` suite: rt-tests' pi_stress, the experiment of the 2016
//! rtmutex top-waiter spinning mail — and the PI peers (glibc's
//! `PTHREAD_PRIO_INHERIT` mutex, a raw PI-futex lock).
//!
//! Each **group** is three `SCHED_FIFO` threads — low (10), medium (20),
//! high (30) — sharing one lock. All groups run on **one CPU**
//! ([`RT_CPU`]; the other CPU stays free). One *inversion* per group:
//!
//! 1. all three meet at a barrier; low takes the lock;
//! 2. they meet again (low holding the lock); the barrier wakes them on one
//!    CPU, so high runs first: it asks for the lock and blocks;
//! 3. medium is runnable and busy-loops until high got the lock; low must
//!    run to release it. With priority inheritance the kernel boosts low
//!    above medium: low releases, high takes the lock — one inversion
//!    completed. Without PI, medium starves low and the group **stalls**;
//! 4. they meet a third time and start over.
//!
//! A **watchdog** (the main thread, not real-time) declares a group stalled
//! when it has completed no iteration for [`WATCHDOG`] *while the CPU was
//! available to real-time threads* (a 1 ms heartbeat thread above the
//! groups on the same CPU keeps beating; RT throttling or the kernel's
//! fair server can take the CPU away for tens of ms); it counts a failure
//! and aborts that iteration (medium stops hogging, so low can run). Every
//! busy loop is also bounded by [`HOG_BOUND`], and every thread drops back
//! to `SCHED_OTHER` before it exits.
//!
//! Throughput is inversions per second (all groups), measured over fixed
//! windows ([`WINDOWS_PER_RUN`] per run); the table shows their harmonic
//! mean and standard deviation by group count, as the 2016 mail's `Hmean`/
//! `Stddev` rows.

use super::peers::{BenchLock, TryBench};
pub use super::pi_peers::{PiFutexLock, PthreadPi};
use super::registry::{self, per_lock, PerLock};
use super::report::{self, rate, thousands, Machine, Provenance, ResultFile, ResultRow};
use super::stats::{hmean, mean, min_mean_max, stddev};
use super::suite::{all_writers, Ctx, Measured, Plan, Point, Spec, Suite};
use super::workload::{CriticalSection, Role, RunOutcome};
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The suite's name.
pub const SUITE: &str = "pi";
/// The CPU all real-time threads are pinned to.
pub const RT_CPU: usize = 1;
/// A group that completes no iteration for this long has stalled.
pub const WATCHDOG: Duration = Duration::from_millis(100);
/// Hard bound of every busy loop (medium's hog, low's wait for high).
pub const HOG_BOUND: Duration = Duration::from_millis(500);
/// Least idle time on the real-time CPU after each run.
pub const GAP: Duration = Duration::from_millis(80);
/// Measured windows per run.
pub const WINDOWS_PER_RUN: usize = 5;
/// Most groups a run may have (3 real-time threads each, on one CPU).
pub const MAX_GROUPS: usize = 64;
const PRIO_LOW: i32 = 10;
const PRIO_MED: i32 = 20;
const PRIO_HIGH: i32 = 30;
/// The heartbeat (above every group thread; it sleeps 1 ms at a time).
const PRIO_HEARTBEAT: i32 = 40;

// ---------------------------------------------------------------- barrier

/// A futex barrier for three threads (no internal mutex that could itself
/// invert priorities). `wait` returns false when `stop` is set.
struct Barrier {
    count: AtomicU32,
    gen: AtomicU32,
    n: u32,
}

impl Barrier {
    fn new(n: u32) -> Self {
        Self {
            count: AtomicU32::new(0),
            gen: AtomicU32::new(0),
            n,
        }
    }

    fn wait(&self, stop: &AtomicBool) -> bool {
        // Read the generation before arriving: the last arriver bumps it.
        let g = self.gen.load(Acquire);
        if self.count.fetch_add(1, AcqRel) + 1 == self.n {
            self.count.store(0, Relaxed);
            // Release pairs with the waiters' Acquire load of `gen`.
            self.gen.fetch_add(1, Release);
            // i32::MAX: the kernel reads the count as an int (u32::MAX would be -1).
            klock::sys::futex_wake(&self.gen, i32::MAX as u32);
            return true;
        }
        loop {
            if self.gen.load(Acquire) != g {
                return true;
            }
            if stop.load(Relaxed) {
                return false;
            }
            klock::sys::futex_wait(&self.gen, g, Some(Duration::from_millis(10)));
        }
    }
}

// ---------------------------------------------------------------- groups

struct Group<L> {
    lock: L,
    barrier: Barrier,
    high_trying: AtomicBool,
    high_done: AtomicBool,
    /// Set by the watchdog: give up the current iteration.
    abort: AtomicBool,
    /// Completed inversions.
    inversions: AtomicU64,
    /// Iterations ended (completed or aborted): the watchdog's progress mark.
    iterations: AtomicU64,
}

/// Busy-wait until `done()` or the hard bound; reads the clock every 64 spins.
fn busy_until(bound: Duration, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + bound;
    let mut n = 0u32;
    while !done() {
        n = n.wrapping_add(1);
        if n.is_multiple_of(64) && Instant::now() >= end {
            return;
        }
        std::hint::spin_loop();
    }
}

/// Become a real-time thread on RT_CPU: FIFO first, then pin (a normal
/// thread pinned to a CPU that real-time threads keep busy might never run).
fn become_rt(prio: i32) -> Result<(), String> {
    klock::rt::set_fifo(prio)
        .map_err(|e| format!("sched_setscheduler(SCHED_FIFO, {prio}): {e}"))?;
    klock::rt::pin_to_cpu(RT_CPU).map_err(|e| format!("sched_setaffinity(CPU {RT_CPU}): {e}"))
}

fn drop_rt() {
    let _ = klock::rt::set_normal();
    let _ = klock::rt::pin_to_cpu(0);
}

#[derive(Clone, Copy)]
enum Role3 {
    Low,
    Medium,
    High,
}

fn group_thread<L: BenchLock>(g: &Group<L>, role: Role3, stop: &AtomicBool) -> Result<(), String> {
    become_rt(match role {
        Role3::Low => PRIO_LOW,
        Role3::Medium => PRIO_MED,
        Role3::High => PRIO_HIGH,
    })?;
    let quit = || stop.load(Relaxed);
    loop {
        if let Role3::Low = role {
            // SCHED_FIFO round-robin by hand: a group's low thread is
            // always running or preempted (at the head of its priority's
            // queue) while its group cycles, so without this yield the
            // other groups' low threads (same priority) would never run.
            std::thread::yield_now();
        }
        if !g.barrier.wait(stop) {
            break;
        }
        match role {
            Role3::Low => {
                let ok = g.lock.write(|| {
                    if !g.barrier.wait(stop) {
                        return false;
                    }
                    // Hold the lock until high wants it (it then blocks, and
                    // we must be boosted to get here).
                    busy_until(HOG_BOUND, || {
                        g.high_trying.load(Acquire) || g.abort.load(Relaxed) || quit()
                    });
                    true
                });
                if !ok {
                    break;
                }
            }
            Role3::Medium => {
                if !g.barrier.wait(stop) {
                    break;
                }
                // The CPU hog: starves low unless low inherits high's priority.
                busy_until(HOG_BOUND, || {
                    g.high_done.load(Acquire) || g.abort.load(Relaxed) || quit()
                });
            }
            Role3::High => {
                if !g.barrier.wait(stop) {
                    break;
                }
                g.high_trying.store(true, Release);
                g.lock.write(|| g.high_done.store(true, Release));
                if !g.abort.load(Relaxed) {
                    g.inversions.fetch_add(1, Relaxed);
                }
                g.iterations.fetch_add(1, Release);
            }
        }
        if !g.barrier.wait(stop) {
            break;
        }
        if let Role3::High = role {
            // The others are past the last barrier and read these only
            // after the next middle barrier, which waits for us.
            g.high_trying.store(false, Relaxed);
            g.high_done.store(false, Relaxed);
            g.abort.store(false, Relaxed);
        }
    }
    drop_rt();
    Ok(())
}

/// One pi_stress run: its windows and counts.
#[derive(Debug, Clone, Default)]
pub struct PiRun {
    /// Inversions per second (all groups) in each measured window.
    pub window_rates: Vec<f64>,
    /// Completed inversions per group during the measured period.
    pub per_group: Vec<u64>,
    /// Watchdog failures during the whole run (warm-up included).
    pub failures: u64,
    /// Long no-progress periods while the CPU was not available to
    /// real-time threads at all (not counted as failures).
    pub cpu_stalls: u64,
    pub elapsed_s: f64,
    pub cpu_s: f64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub events: Vec<(&'static str, u64)>,
    /// The lock has priority inheritance ([`BenchLock::PRIORITY_INHERITANCE`]).
    pub priority_inheritance: bool,
}

/// Pins the calling thread to CPU 0 and restores its CPU set when dropped:
/// the watchdog must not share the real-time CPU.
struct OnCpu0(Option<rustix::thread::CpuSet>);

impl OnCpu0 {
    fn new() -> Self {
        let saved = rustix::thread::sched_getaffinity(None).ok();
        let _ = klock::rt::pin_to_cpu(0);
        Self(saved)
    }
}

impl Drop for OnCpu0 {
    fn drop(&mut self) {
        if let Some(set) = &self.0 {
            let _ = rustix::thread::sched_setaffinity(None, set);
        }
    }
}

/// Run `groups` pi_stress groups on a fresh lock of type `L` per group,
/// under the lock's owner-running oracle (switched before any real-time
/// thread starts). The calling thread is the watchdog; it stays on CPU 0
/// meanwhile.
pub fn run<L: BenchLock>(
    groups: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<PiRun, String> {
    super::peers::with_oracle::<L, _>(|| run_once::<L>(groups, warmup, duration))
}

fn run_once<L: BenchLock>(
    groups: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<PiRun, String> {
    let _on_cpu0 = OnCpu0::new();
    let stop = Arc::new(AtomicBool::new(false));
    let gs: Vec<Arc<Group<L>>> = (0..groups)
        .map(|_| {
            Arc::new(Group {
                lock: L::new(),
                barrier: Barrier::new(3),
                high_trying: AtomicBool::new(false),
                high_done: AtomicBool::new(false),
                abort: AtomicBool::new(false),
                inversions: AtomicU64::new(0),
                iterations: AtomicU64::new(0),
            })
        })
        .collect();
    // Heartbeat: a real-time thread above the groups on the same CPU that
    // sleeps 1 ms at a time. Its beats tell the watchdog whether the CPU
    // was available to real-time threads at all: RT throttling and the
    // kernel's fair server can take it away for tens of ms, which is no
    // lock's fault.
    let beats = Arc::new(AtomicU64::new(0));
    type Handle = std::thread::JoinHandle<Result<(), String>>;
    // Threads are started by a launcher pinned to CPU 0: a new thread
    // inherits its creator's CPU set, so it starts on the free CPU and
    // cannot be stranded, still SCHED_OTHER, on a CPU the real-time
    // threads keep busy. Each then switches to SCHED_FIFO and moves to
    // RT_CPU itself.
    let launched = {
        let (gs, stop, beats) = (gs.clone(), stop.clone(), beats.clone());
        std::thread::spawn(move || -> (Vec<Handle>, Option<String>) {
            let mut handles: Vec<Handle> = Vec::with_capacity(3 * gs.len() + 1);
            if let Err(e) = klock::rt::pin_to_cpu(0) {
                return (
                    handles,
                    Some(format!("cannot pin the launcher to CPU 0: {e}")),
                );
            }
            let heart = {
                let (beats, stop) = (beats.clone(), stop.clone());
                std::thread::Builder::new()
                    .name("pi-heartbeat".into())
                    .spawn(move || -> Result<(), String> {
                        let r = become_rt(PRIO_HEARTBEAT);
                        // Beat at least once even on failure: the launcher waits for it.
                        beats.fetch_add(1, Relaxed);
                        r?;
                        while !stop.load(Relaxed) {
                            std::thread::sleep(Duration::from_millis(1));
                            beats.fetch_add(1, Relaxed);
                        }
                        drop_rt();
                        Ok(())
                    })
            };
            match heart {
                Ok(h) => handles.push(h),
                Err(e) => {
                    return (
                        handles,
                        Some(format!("cannot start the heartbeat thread: {e}")),
                    )
                }
            }
            let t = Instant::now();
            while beats.load(Relaxed) == 0 && t.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(1));
            }
            for (i, g) in gs.iter().enumerate() {
                for role in [Role3::Low, Role3::Medium, Role3::High] {
                    let (g, stop2) = (g.clone(), stop.clone());
                    let h = std::thread::Builder::new()
                        .name(format!("pi-{i}"))
                        .spawn(move || {
                            let r = group_thread(&g, role, &stop2);
                            if r.is_err() {
                                stop2.store(true, Relaxed);
                            }
                            r
                        });
                    match h {
                        Ok(h) => handles.push(h),
                        Err(e) => {
                            return (handles, Some(format!("cannot start pi_stress thread: {e}")))
                        }
                    }
                }
            }
            (handles, None)
        })
    };
    let (handles, launch_err) = launched
        .join()
        .map_err(|_| "the pi_stress launcher panicked".to_string())?;
    if let Some(e) = launch_err {
        stop.store(true, Relaxed);
        for h in handles {
            let _ = h.join();
        }
        return Err(e);
    }
    let beats_needed = WATCHDOG.as_millis() as u64;

    // Watchdog and window sampler (this thread stays SCHED_OTHER).
    let total = |gs: &[Arc<Group<L>>]| gs.iter().map(|g| g.inversions.load(Relaxed)).sum::<u64>();
    let t0 = Instant::now();
    let window = duration / WINDOWS_PER_RUN as u32;
    let measure_start = t0 + warmup;
    let end = measure_start + window * WINDOWS_PER_RUN as u32;
    // Per group: (iterations, when they last changed, beats then).
    let mut last_iter: Vec<(u64, Instant, u64)> = gs.iter().map(|_| (0, t0, 0)).collect();
    let mut failures = 0u64;
    let mut cpu_stalls = 0u64;
    let mut window_rates = Vec::with_capacity(WINDOWS_PER_RUN);
    let mut per_group0 = Vec::new();
    let mut sample: Option<(u64, Instant)> = None;
    let (mut u0, mut e0) = (super::workload::Usage::default(), Vec::new());
    loop {
        let now = Instant::now();
        if sample.is_none() && now >= measure_start {
            per_group0 = gs.iter().map(|g| g.inversions.load(Relaxed)).collect();
            sample = Some((total(&gs), now));
            u0 = super::workload::usage();
            e0 = L::events();
        }
        if let Some((n0, s0)) = sample {
            let next = measure_start + window * (window_rates.len() as u32 + 1);
            if now >= next {
                let n = total(&gs);
                window_rates.push((n - n0) as f64 / now.duration_since(s0).as_secs_f64().max(1e-9));
                sample = Some((n, now));
            }
        }
        if window_rates.len() >= WINDOWS_PER_RUN || now >= end + window || stop.load(Relaxed) {
            break;
        }
        let b = beats.load(Relaxed);
        for (g, last) in gs.iter().zip(last_iter.iter_mut()) {
            let it = g.iterations.load(Acquire);
            if it != last.0 {
                *last = (it, now, b);
            } else if now.duration_since(last.1) >= WATCHDOG {
                if b - last.2 >= beats_needed * 9 / 10 {
                    // The CPU was there for real-time threads and the
                    // group made no progress: it stalled.
                    failures += 1;
                    g.abort.store(true, Relaxed);
                    *last = (it, now, b);
                } else if now.duration_since(last.1) >= 10 * WATCHDOG {
                    // The CPU was taken away from real-time threads.
                    cpu_stalls += 1;
                    *last = (it, now, b);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let elapsed = sample.map_or(0.0, |(_, s)| s.duration_since(measure_start).as_secs_f64());
    let per_group: Vec<u64> = gs
        .iter()
        .zip(per_group0.iter().chain(std::iter::repeat(&0)))
        .map(|(g, &b)| g.inversions.load(Relaxed) - b)
        .collect();
    let u1 = super::workload::usage();
    let e1 = L::events();
    stop.store(true, Relaxed);
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => err = Some(e),
            Err(_) => err = Some("a pi_stress thread panicked".into()),
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    let events = e1
        .into_iter()
        .map(|(k, v)| {
            let b = e0.iter().find(|e| e.0 == k).map_or(0, |e| e.1);
            (k, v.saturating_sub(b))
        })
        .collect();
    Ok(PiRun {
        priority_inheritance: L::PRIORITY_INHERITANCE,
        window_rates,
        per_group,
        failures,
        cpu_stalls,
        elapsed_s: elapsed,
        cpu_s: u1.since(u0).cpu_s,
        ctx_voluntary: u1.since(u0).nvcsw,
        ctx_involuntary: u1.since(u0).nivcsw,
        events,
    })
}

/// [`run`] for a lock type of the registry.
struct Runner;

impl PerLock for Runner {
    type Out = fn(usize, Duration, Duration) -> Result<PiRun, String>;
    fn with<L: TryBench>() -> Self::Out {
        run::<L>
    }
}

// ---------------------------------------------------------------- results

/// A pi result: the common row (the JSON contract in docs/bench.md; `threads` = 3 × groups,
/// `kops_*` = thousands of inversions per second over windows,
/// `per_thread_*` = inversions per group) plus pi_stress's own fields.
#[derive(Debug, Clone, Serialize)]
pub struct PiRow {
    #[serde(flatten)]
    pub base: ResultRow,
    pub groups: usize,
    /// Completed inversions, all groups, summed over runs.
    pub inversions: u64,
    /// Watchdog failures (stalled iterations), summed over runs.
    pub watchdog_failures: u64,
    /// No-progress periods of ≥ 10 watchdog intervals while CPU 1 was not
    /// available to real-time threads (RT throttling, fair server); not failures.
    pub cpu_stalls: u64,
    /// Whether the lock has priority inheritance (failures must be 0).
    pub priority_inheritance: bool,
    pub windows: usize,
    pub window_s: f64,
    pub inversions_per_s_hmean: f64,
    pub inversions_per_s_stddev: f64,
    pub inversions_per_s_windows: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct PiFile<'a> {
    suite: &'a str,
    machine: &'a Machine,
    results: &'a [PiRow],
    title: &'a str,
    workload: String,
    #[serde(flatten)]
    provenance: &'a Provenance,
    watchdog_ms: u64,
    rt_cpu: usize,
}

fn row(id: &str, lock: &str, variant: &str, groups: usize, runs: &[PiRun], window_s: f64) -> PiRow {
    let rates: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.window_rates.iter().copied())
        .collect();
    // The common row, built by the common aggregation from per-group counts.
    let outcomes: Vec<RunOutcome> = runs
        .iter()
        .map(|r| RunOutcome {
            elapsed_s: r.elapsed_s.max(1e-9),
            per_thread: r.per_group.iter().map(|&n| (Role::Writer, n)).collect(),
            cpu_s: r.cpu_s,
            ctx_voluntary: r.ctx_voluntary,
            ctx_involuntary: r.ctx_involuntary,
            events: r.events.clone(),
            xfer_ns: (None, None),
        })
        .collect();
    let mut base = ResultRow::aggregate(id, lock, variant, 0, 3 * groups, &outcomes);
    let kops: Vec<f64> = rates.iter().map(|r| r / 1e3).collect();
    base.kops_mean = mean(&kops);
    base.kops_stddev = stddev(&kops);
    base.kops_hmean = hmean(&kops);
    base.kops_runs = kops;
    let mmm = min_mean_max(
        &runs
            .iter()
            .flat_map(|r| r.per_group.clone())
            .collect::<Vec<_>>(),
    );
    if let Some((a, b, c)) = mmm {
        base.per_thread_min = a;
        base.per_thread_mean = b;
        base.per_thread_max = c;
        base.writer_min = Some(a);
        base.writer_mean = Some(b);
        base.writer_max = Some(c);
    }
    PiRow {
        groups,
        inversions: runs.iter().flat_map(|r| r.per_group.iter()).sum(),
        watchdog_failures: runs.iter().map(|r| r.failures).sum(),
        cpu_stalls: runs.iter().map(|r| r.cpu_stalls).sum(),
        priority_inheritance: runs.first().is_some_and(|r| r.priority_inheritance),
        windows: rates.len(),
        window_s,
        inversions_per_s_hmean: hmean(&rates),
        inversions_per_s_stddev: stddev(&rates),
        inversions_per_s_windows: rates,
        base,
    }
}

/// The suite.
pub struct Pi;

/// The table entry.
pub static PI: Pi = Pi;

static SPEC: Spec = Spec {
    name: SUITE,
    title: "pi_stress (2016 rtmutex top-waiter spinning mail): groups of low/medium/high \
            SCHED_FIFO threads on one CPU; --threads is the number of groups",
    default_locks: &[
        "rtmutex-nospin",
        "rtmutex",
        "pthread-pi",
        "pi-futex",
        "std-mutex",
    ],
    default_threads: &[1, 2, 4, 8],
    cs: CriticalSection::Counter,
    outside_ns: 0,
    mix: all_writers,
    cost_table: false,
    runs: None,
    quick_ends: false,
};

fn window_s(plan: &Plan) -> f64 {
    plan.duration.as_secs_f64() / WINDOWS_PER_RUN as f64
}

/// pi_stress's own rows, from the measured runs.
fn pi_rows(plan: &Plan, measured: &[Measured<PiRun>]) -> Vec<PiRow> {
    measured
        .iter()
        .map(|(p, runs)| {
            let l = &plan.locks[p.item];
            row(l.id, l.lock, l.variant, p.threads, runs, window_s(plan))
        })
        .collect()
}

impl Suite for Pi {
    type Outcome = PiRun;
    type State = ();

    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn check(&self, plan: &Plan) -> Result<(), String> {
        if let Some(&g) = plan.threads.iter().find(|&&g| g > MAX_GROUPS) {
            return Err(format!(
                "pi: --threads is the number of pi_stress groups (3 real-time threads each), at most {MAX_GROUPS} (got {g})"
            ));
        }
        if let Some(spin) = plan.locks.iter().find(|l| !l.sleeps) {
            let sleeping: Vec<&str> = registry::all()
                .into_iter()
                .filter(|l| l.sleeps)
                .map(|l| l.id)
                .collect();
            return Err(format!(
                "lock '{}' can keep a waiter spinning for good (a spinlock, or a wait list under one): on pi's one CPU a real-time waiter would then starve a lower-priority owner; pi runs locks whose waiters sleep: {}",
                spin.id,
                sleeping.join(", ")
            ));
        }
        Ok(())
    }
    fn skip(&self, _: &Plan) -> Option<String> {
        klock::rt::rt_unavailable_reason(RT_CPU)
    }
    /// Each lock's group counts back to back.
    fn points(&self, plan: &Plan) -> Vec<Point> {
        plan.locks
            .iter()
            .enumerate()
            .flat_map(|(item, l)| {
                plan.threads.iter().map(move |&threads| Point {
                    item,
                    id: l.id,
                    threads,
                })
            })
            .collect()
    }
    fn interleaved(&self) -> bool {
        false
    }
    fn label(&self, p: &Point) -> String {
        format!("{} @ {} groups", p.id, p.threads)
    }
    fn begin(&self, _: &Plan, _: &Ctx) -> Result<(), String> {
        Ok(())
    }
    fn run(&self, plan: &Plan, _: &mut (), p: &Point) -> Result<PiRun, String> {
        let run = per_lock::<Runner>(p.id).expect("a plan's locks are registered");
        let out = run(p.threads, plan.warmup, plan.duration);
        // Leave CPU 1 idle for a while: keeps real-time use well under the
        // kernel's RT throttling limit (95% of each second), whose 50 ms
        // stalls would look like inversions stalling, and gives the CPU
        // back to everybody else.
        std::thread::sleep(((plan.warmup + plan.duration) / 3).max(GAP));
        out
    }
    fn row(&self, plan: &Plan, p: &Point, runs: &[PiRun]) -> ResultRow {
        let l = &plan.locks[p.item];
        row(l.id, l.lock, l.variant, p.threads, runs, window_s(plan)).base
    }
    fn workload(&self, plan: &Plan, _: &()) -> String {
        format!(
            "groups of 3 SCHED_FIFO threads (prio {PRIO_LOW}/{PRIO_MED}/{PRIO_HIGH}) pinned to CPU {RT_CPU}; \
             watchdog {} ms; {} windows of {:.0} ms per run × {} runs after {:?} warm-up",
            WATCHDOG.as_millis(),
            WINDOWS_PER_RUN,
            window_s(plan) * 1e3,
            plan.runs,
            plan.warmup
        )
    }
    /// The watchdog's table stands in for a verdict.
    fn verdict(&self) -> bool {
        false
    }
    fn tables(&self, plan: &Plan, _: &(), file: &ResultFile, m: &[Measured<PiRun>]) -> String {
        render(
            &pi_rows(plan, m),
            &file.title,
            &file.workload,
            &file.machine,
        )
    }
    /// pi_stress's own rows and fields.
    fn write_json(
        &self,
        plan: &Plan,
        _: &(),
        file: &ResultFile,
        m: &[Measured<PiRun>],
    ) -> Result<(), String> {
        let rows = pi_rows(plan, m);
        let pi = PiFile {
            suite: SUITE,
            machine: &file.machine,
            results: &rows,
            title: &file.title,
            workload: file.workload.clone(),
            provenance: &file.provenance,
            watchdog_ms: WATCHDOG.as_millis() as u64,
            rt_cpu: RT_CPU,
        };
        report::write_json(&pi, &plan.json)
    }
    /// The error bars span the measured windows.
    fn plot_unit(&self) -> Option<&'static str> {
        Some("windows")
    }
}

/// pi_stress's tables.
pub fn render(rows: &[PiRow], title: &str, workload: &str, machine: &Machine) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n== {SUITE} — {title}");
    let _ = writeln!(
        out,
        "   {workload}; {} CPUs ({})",
        machine.cpus, machine.cpu_model
    );
    let mut ids: Vec<&str> = Vec::new();
    let mut groups: Vec<usize> = Vec::new();
    for r in rows {
        if !ids.contains(&r.base.id.as_str()) {
            ids.push(&r.base.id);
        }
        if !groups.contains(&r.groups) {
            groups.push(r.groups);
        }
    }
    groups.sort_unstable();
    let find = |id: &str, g: usize| rows.iter().find(|r| r.base.id == id && r.groups == g);
    let w = ids.iter().map(|s| s.len()).max().unwrap_or(0).max(22);

    out += "\nInversions completed per group, Min/Mean/Max (per run) — watchdog failures\n";
    let _ = write!(out, "  {:<8}", "groups");
    for id in &ids {
        let _ = write!(out, "  {id:>w$}");
    }
    out += "\n";
    for &g in &groups {
        let _ = write!(out, "  {g:<8}");
        for id in &ids {
            let cell = find(id, g).map_or("-".into(), |r| {
                format!(
                    "{}/{}/{} — {}",
                    thousands(r.base.per_thread_min as f64),
                    thousands(r.base.per_thread_mean),
                    thousands(r.base.per_thread_max as f64),
                    r.watchdog_failures
                )
            });
            let _ = write!(out, "  {cell:>w$}");
        }
        out += "\n";
    }

    let win = rows.first().map_or(0.0, |r| r.window_s);
    let _ = writeln!(
        out,
        "\nThroughput, inversions/s (all groups) over windows of {:.0} ms; % against {}",
        win * 1e3,
        ids.first().copied().unwrap_or("-")
    );
    let _ = write!(out, "  {:<10}", "");
    for id in &ids {
        let _ = write!(out, "  {id:>w$}");
    }
    out += "\n";
    for (label, f) in [
        (
            "Hmean",
            (|r: &PiRow| r.inversions_per_s_hmean) as fn(&PiRow) -> f64,
        ),
        ("Stddev", |r: &PiRow| r.inversions_per_s_stddev),
    ] {
        for &g in &groups {
            let _ = write!(out, "  {:<10}", format!("{label} {g}"));
            let base = find(ids[0], g).map(f);
            for id in &ids {
                let cell = find(id, g).map_or("-".into(), |r| {
                    let v = f(r);
                    match base {
                        Some(b) if b > 0.0 => format!("{} ({:+.2}%)", rate(v), 100.0 * (v - b) / b),
                        _ => rate(v),
                    }
                });
                let _ = write!(out, "  {cell:>w$}");
            }
            out += "\n";
        }
    }

    out += "\nWatchdog\n";
    for id in &ids {
        let fails: u64 = rows
            .iter()
            .filter(|r| r.base.id == *id)
            .map(|r| r.watchdog_failures)
            .sum();
        let pi = rows
            .iter()
            .any(|r| r.base.id == *id && r.priority_inheritance);
        let verdict = match (pi, fails) {
            (true, 0) => "0 failures (PI: must be 0) — OK".to_string(),
            (true, n) => format!("{n} failures — FAIL: a PI lock stalled"),
            (false, 0) => "0 failures — NOT caught stalling (no PI: expected stalls)".to_string(),
            (false, n) => format!("{n} stalls caught (no priority inheritance, as expected)"),
        };
        let _ = writeln!(out, "  {id:<w$} {verdict}");
    }

    for id in &ids {
        let with: Vec<&PiRow> = rows
            .iter()
            .filter(|r| r.base.id == *id && !r.base.events.is_empty())
            .collect();
        if with.is_empty() {
            continue;
        }
        let names: Vec<String> = with[0].base.events.keys().cloned().collect();
        let _ = writeln!(out, "\nEvents of {id} (per run)");
        let _ = write!(out, "  {:<8}", "groups");
        for n in &names {
            let _ = write!(out, "  {n:>12}");
        }
        out += "\n";
        for r in with {
            let _ = write!(out, "  {:<8}", r.groups);
            for n in &names {
                let _ = write!(
                    out,
                    "  {:>12}",
                    thousands(*r.base.events.get(n).unwrap_or(&0) as f64)
                );
            }
            out += "\n";
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barrier_releases_three_and_stops() {
        let b = Arc::new(Barrier::new(3));
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..50 {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let (b, stop) = (b.clone(), stop.clone());
                    std::thread::spawn(move || b.wait(&stop))
                })
                .collect();
            assert!(b.wait(&stop));
            for h in hs {
                assert!(h.join().unwrap());
            }
        }
        stop.store(true, Relaxed);
        let t = Instant::now();
        assert!(!b.wait(&stop));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
