//! Reports: [`snapshot`] sums the rows into a [`Report`], which renders
//! the kernel's `/proc/lock_stat` layout and the lockmeter layout (see the
//! [module docs](super)).

// --- reports --------------------------------------------------------------

use super::{ns_per_unit, registry, Folded, Mode};
use crate::sys::monotonic_ns;
use std::fmt::Write as _;
use std::panic::Location;

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
    pub(super) fn merge(&mut self, o: &SideStats) {
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
    /// The class's name (see [`Class`](super::Class)).
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
pub(super) fn lm_time(ns: f64) -> String {
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
pub(super) fn lm_pct(x: f64) -> String {
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
