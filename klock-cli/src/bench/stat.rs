//! `klock stat`: run a bench workload with lockstat tracking on and print
//! the kernel's `/proc/lock_stat` layout and the lockmeter table.
//!
//! [`Stat<L>`] puts lockstat around any [`TryBench`] lock — klock's and the
//! peers alike (the peers are not `lock_api` raw locks, so this uses
//! [`klock::lockstat::LockStat`] directly rather than
//! [`klock::lockstat::Tracked`]). The untracked benchmark types contain no
//! lockstat code: tracking is this separate wrapper type.

use super::peers::*;
use super::treelock::{self, TreeWork};
use super::workload::{RunOutcome, Workload};
use super::Plan;
use klock::lockstat::{self, Class, LockStat, Mode, Report};
use std::panic::Location;
use std::sync::Mutex;

/// The class the next [`Stat::new`] joins (set by the driver before a run).
static NEXT_CLASS: Mutex<Option<Class>> = Mutex::new(None);

/// Make the locks created from now on count in the class `name`.
pub fn set_class(name: &str) {
    *NEXT_CLASS.lock().unwrap_or_else(|e| e.into_inner()) = Some(Class::named(name));
}

/// A snapshot holding only the class `name` (empty if it was idle).
pub fn take_class(name: &str) -> Report {
    let mut r = lockstat::snapshot();
    r.classes.retain(|c| c.name == name);
    r
}

/// `L` with lockstat tracking: try first (uncontended), else record a
/// contention at the caller's site and block; the clock is read first
/// thing inside the critical section and last thing in it, and everything
/// is recorded after the unlock.
pub struct Stat<L> {
    inner: L,
    stat: LockStat,
}

impl<L: TryBench> Stat<L> {
    #[inline(always)]
    fn run<R>(&self, mode: Mode, site: &'static Location<'static>, f: impl FnOnce() -> R) -> R {
        let timed = move || {
            let t = lockstat::now();
            let r = f();
            (r, t, lockstat::now())
        };
        let tried = match mode {
            Mode::Write => self.inner.try_write(timed),
            Mode::Read => self.inner.try_read(timed),
        };
        let ((r, acquired, released), contention) = match tried {
            Ok(done) => (done, None),
            Err(timed) => {
                let c = self.stat.contended(mode, site);
                let done = match mode {
                    Mode::Write => self.inner.write(timed),
                    Mode::Read => self.inner.read(timed),
                };
                (done, Some(c))
            }
        };
        self.stat.acquired_at(mode, contention, acquired);
        self.stat.released(mode, acquired, released);
        r
    }
}

impl<L: TryBench> BenchLock for Stat<L> {
    const PRIORITY_INHERITANCE: bool = L::PRIORITY_INHERITANCE;

    const SLEEPS: bool = L::SLEEPS;

    fn new() -> Self {
        let class = NEXT_CLASS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or_else(|| Class::named("unnamed"));
        Self {
            inner: L::new(),
            stat: LockStat::new(class),
        }
    }
    #[inline]
    #[track_caller]
    fn write<R>(&self, f: impl FnOnce() -> R) -> R {
        self.run(Mode::Write, Location::caller(), f)
    }
    #[inline]
    #[track_caller]
    fn read<R>(&self, f: impl FnOnce() -> R) -> R {
        self.run(Mode::Read, Location::caller(), f)
    }
    fn events() -> Vec<(&'static str, u64)> {
        L::events()
    }
    fn oracle() -> Option<klock::oncpu::OracleKind> {
        L::oracle()
    }
}

type Run<W> = fn(&W) -> Result<RunOutcome, String>;

/// How to run one lock type in the suites with their own workloads
/// (treelock, pi_stress) and under `klock stat`.
#[derive(Clone, Copy)]
pub struct Runners {
    /// pi_stress groups (`None` for a lock that never sleeps; non-PI locks
    /// that sleep are controls that must stall).
    pub pi: Option<super::pi::Runner>,
    /// treelock, untracked.
    pub tree: Run<TreeWork>,
    /// treelock under lockstat (`None`: the type has no [`TryBench`]).
    pub tree_tracked: Option<Run<TreeWork>>,
    /// The generic bench workload under lockstat.
    pub tracked: Option<Run<Workload>>,
}

/// The thread counts `klock stat` uses when none are given: the suite's
/// only count if it has one, else 4.
fn default_stat_threads(plan: &Plan) -> Vec<usize> {
    match plan.suite.default_threads {
        [one] => vec![*one],
        _ => vec![4],
    }
}

/// `klock stat`: for each suite, lock and thread count, one tracked run
/// (its own lockstat class: the lock id, plus `/Nt` when several thread
/// counts are asked for); then both layouts per suite.
pub fn execute(plans: &mut [Plan], threads_given: bool) -> Result<(), String> {
    for plan in plans.iter_mut() {
        if !threads_given {
            plan.threads = default_stat_threads(plan);
        }
        for l in &plan.locks {
            if l.runners.tracked.is_none() {
                return Err(format!(
                    "lock '{}' cannot be tracked (no TryBench impl). Trackable: {}",
                    l.id,
                    super::registry::all()
                        .iter()
                        .filter(|e| e.runners.tracked.is_some())
                        .map(|e| e.id)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    let cpus = klock::sys::online_cpus();
    for plan in plans.iter() {
        let mut report = Report {
            classes: Vec::new(),
            cpus,
        };
        let is_tree = plan.suite.name == treelock::NAME;
        for l in &plan.locks {
            let r = l.runners;
            for &t in &plan.threads {
                let class = if plan.threads.len() == 1 {
                    l.id.to_string()
                } else {
                    format!("{}/{t}t", l.id)
                };
                eprintln!("klock stat: {} {} @ {t} threads", plan.suite.name, l.id);
                lockstat::reset();
                set_class(&class);
                if is_tree {
                    let run = r.tree_tracked.expect("checked above");
                    run(&TreeWork {
                        threads: t,
                        write_pct: treelock::WRITE_PCT,
                        outside_ns: plan.outside_ns,
                        warmup: plan.warmup,
                        duration: plan.duration,
                    })
                } else {
                    let (readers, writers) = (plan.suite.mix)(t);
                    let run = r.tracked.expect("checked above");
                    run(&Workload {
                        readers,
                        writers,
                        cs: plan.cs,
                        outside_ns: plan.outside_ns,
                        warmup: plan.warmup,
                        duration: plan.duration,
                    })
                }
                .map_err(|e| format!("{} @ {t} threads: {e}", l.id))?;
                report.extend(take_class(&class));
            }
        }
        println!(
            "\n== klock stat {} — {}\n   {} thread(s) {:?}, {:?} per run after {:?} warm-up; one lockstat class per lock\n",
            plan.suite.name,
            plan.suite.title,
            plan.threads.len(),
            plan.threads,
            plan.duration,
            plan.warmup
        );
        print!("{}", report.proc_lock_stat());
        println!();
        print!("{}", report.lockmeter());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::klocks::QRw;

    /// Tracked runs count every operation: acquisitions = ops.
    #[test]
    fn stat_counts_every_acquisition() {
        set_class("stat-unit-test");
        let w = TreeWork {
            threads: 2,
            write_pct: 10,
            outside_ns: 0,
            warmup: std::time::Duration::from_millis(0),
            duration: std::time::Duration::from_millis(30),
        };
        let o = treelock::run::<Stat<QRw>>(&w).unwrap();
        let r = take_class("stat-unit-test");
        let c = &r.classes[0];
        // The warm-up and the tail after the window also count, so at least.
        assert!(c.read.acquisitions + c.write.acquisitions >= o.total_ops());
        assert!(c.read.acquisitions > c.write.acquisitions);
    }
}
