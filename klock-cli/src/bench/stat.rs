//! `klock stat`: run a bench suite's workload with lockstat tracking on
//! ([`super::tracked::Stat`]) and print the kernel's `/proc/lock_stat`
//! layout and the lockmeter table. Each suite says how its workload runs
//! tracked ([`super::suite::Suite::tracked_run`]).

use super::suite::{untrackable, Plan};
use super::tracked::{set_class, take_class};
use klock::lockstat::{self, Report};

/// The thread counts `klock stat` uses when none are given: the suite's
/// only count if it has one, else 4.
fn default_stat_threads(plan: &Plan) -> Vec<usize> {
    match plan.spec.default_threads {
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
        if let Some(l) = plan.locks.iter().find(|l| !l.tracked) {
            return Err(untrackable(l));
        }
    }
    let cpus = klock::sys::online_cpus();
    for plan in plans.iter() {
        let mut report = Report {
            classes: Vec::new(),
            cpus,
        };
        for l in &plan.locks {
            for &t in &plan.threads {
                let class = if plan.threads.len() == 1 {
                    l.id.to_string()
                } else {
                    format!("{}/{t}t", l.id)
                };
                eprintln!("klock stat: {} {} @ {t} threads", plan.spec.name, l.id);
                lockstat::reset();
                set_class(&class);
                plan.suite
                    .tracked_run(plan, l, t)
                    .map_err(|e| format!("{} @ {t} threads: {e}", l.id))?;
                report.extend(take_class(&class));
            }
        }
        println!(
            "\n== klock stat {} — {}\n   {} thread(s) {:?}, {:?} per run after {:?} warm-up; one lockstat class per lock\n",
            plan.spec.name,
            plan.spec.title,
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
    use crate::bench::klocks::QRw;
    use crate::bench::tracked::{set_class, take_class, Stat};
    use crate::bench::treelock::{self, TreeWork};

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
