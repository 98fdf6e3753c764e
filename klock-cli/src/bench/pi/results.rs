//! pi_stress's results: its rows (the common row plus its own fields), its
//! JSON file and its tables.

use super::stress::PiRun;
use super::SUITE;
use crate::bench::report::{rate, thousands, Machine, Provenance, ResultRow};
use crate::bench::stats::{hmean, mean, min_mean_max, stddev};
use crate::bench::workload::{Role, RunOutcome};
use serde::Serialize;
use std::fmt::Write as _;

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
pub(super) struct PiFile<'a> {
    pub(super) suite: &'a str,
    pub(super) machine: &'a Machine,
    pub(super) results: &'a [PiRow],
    pub(super) title: &'a str,
    pub(super) workload: String,
    #[serde(flatten)]
    pub(super) provenance: &'a Provenance,
    pub(super) watchdog_ms: u64,
    pub(super) rt_cpu: usize,
}

pub(super) fn row(
    id: &str,
    lock: &str,
    variant: &str,
    groups: usize,
    runs: &[PiRun],
    window_s: f64,
) -> PiRow {
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
