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
//!
//! Here: the parameters and the suite itself; `group` has one group's
//! threads and their barrier, `stress` one run (the launcher, the heartbeat
//! and the watchdog), `results` the rows, the JSON file and the tables.

mod group;
mod results;
mod stress;

use super::peers::TryBench;
pub use super::pi_peers::{PiFutexLock, PthreadPi};
use super::registry::{self, per_lock, PerLock};
use super::report::{self, ResultFile, ResultRow};
use super::suite::{all_writers, Ctx, Measured, Plan, Point, Spec, Suite};
use super::workload::CriticalSection;
pub use results::{render, PiRow};
use results::{row, PiFile};
use std::time::Duration;
pub use stress::{run, PiRun};

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

/// [`run`] for a lock type of the registry.
struct Runner;

impl PerLock for Runner {
    type Out = fn(usize, Duration, Duration) -> Result<PiRun, String>;
    fn with<L: TryBench>() -> Self::Out {
        run::<L>
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
