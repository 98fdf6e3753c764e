//! The one shape of a suite, and the one driver that runs it.
//!
//! A suite declares what it is ([`Spec`]: name, title, default locks and
//! thread counts, workload), how one measured run goes ([`Suite::run`]),
//! how runs become a result row ([`Suite::row`]), and, where it has them,
//! its own checks, set-up, extra phases and tables (the report hooks,
//! every one with a default). [`drive`] does the rest the same way for
//! every suite: plan → measured runs (each with its warm-up) → rows →
//! tables and verdict → JSON → plot, on the caller's one progress bar.
//!
//! A new suite is one file with a `Suite` impl and one line in
//! `suites::SUITES`; a suite that is only a new workload mix needs no file:
//! one more `plain::Plain` line.

use super::plot;
use super::registry::{self, LockEntry};
use super::report::{self, Machine, Provenance, ResultFile, ResultRow};
use super::verdict;
use super::workload::{CriticalSection, RunOutcome, Workload};
use indicatif::ProgressBar;
use std::path::PathBuf;
use std::time::Duration;

/// What a suite is, and its defaults.
#[derive(Debug)]
pub struct Spec {
    pub name: &'static str,
    /// What it reproduces (printed above its tables).
    pub title: &'static str,
    pub default_locks: &'static [&'static str],
    pub default_threads: &'static [usize],
    pub cs: CriticalSection,
    pub outside_ns: u64,
    /// Threads → (readers, writers).
    pub mix: fn(usize) -> (usize, usize),
    /// Print ns per operation at 1 thread rather than a rate table.
    pub cost_table: bool,
    /// Runs per point when neither `--runs` nor `--quick` says (`None`: the
    /// common default).
    pub runs: Option<usize>,
    /// `--quick` without `--threads` keeps the smallest and largest default
    /// thread counts only (suites whose points are slow).
    pub quick_ends: bool,
}

/// All threads write.
pub fn all_writers(n: usize) -> (usize, usize) {
    (0, n)
}

/// One suite, resolved against the command line.
pub struct Plan {
    pub suite: &'static dyn AnySuite,
    pub spec: &'static Spec,
    pub locks: Vec<LockEntry>,
    pub threads: Vec<usize>,
    pub cs: CriticalSection,
    pub outside_ns: u64,
    pub duration: Duration,
    pub warmup: Duration,
    pub runs: usize,
    pub json: PathBuf,
    pub plot: PathBuf,
    /// Whether `json` / `plot` come from `--json` / `--plot` (else they
    /// are the defaults).
    pub json_given: bool,
    pub plot_given: bool,
}

impl Plan {
    /// Measured points (each run `runs` times).
    pub fn points(&self) -> usize {
        self.suite.points(self).len()
    }
    pub fn seconds(&self) -> f64 {
        self.points() as f64 * self.runs as f64 * (self.duration + self.warmup).as_secs_f64()
    }
    /// Whether the suite draws a plot.
    pub fn plots(&self) -> bool {
        self.suite.plot_unit().is_some()
    }
    /// The common workload at `threads` threads, split by the suite's mix.
    pub fn workload(&self, threads: usize) -> Workload {
        let (readers, writers) = (self.spec.mix)(threads);
        Workload {
            readers,
            writers,
            cs: self.cs,
            outside_ns: self.outside_ns,
            warmup: self.warmup,
            duration: self.duration,
        }
    }
    /// Whether the output files can be written, checked before any run so
    /// that a finished run is never lost to a bad path. Creates their
    /// folders, as writing them would.
    pub fn check_outputs(&self) -> Result<(), String> {
        let mut outputs = vec![("--json", "JSON", &self.json, self.json_given)];
        if self.plots() {
            outputs.push(("--plot", "plot", &self.plot, self.plot_given));
        }
        for (flag, what, path, given) in outputs {
            report::check_writable(path).map_err(|why| {
                if given {
                    format!("cannot write {flag} {}: {why}", path.display())
                } else {
                    format!(
                        "cannot write {} (the default {what} path; choose another with {flag}): {why}",
                        path.display()
                    )
                }
            })?;
        }
        Ok(())
    }
}

/// One measured point: an item (a lock of the plan, or a variant of the
/// suite's own) at a thread count.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// Index into `plan.locks`, or into the suite's own variants.
    pub item: usize,
    /// The row's id.
    pub id: &'static str,
    pub threads: usize,
}

/// What the driver lends a suite: the machine, the provenance, and the
/// progress bar (for suites with phases of their own).
pub struct Ctx<'a> {
    pub machine: &'a Machine,
    pub provenance: &'a Provenance,
    pb: &'a ProgressBar,
}

impl<'a> Ctx<'a> {
    pub fn new(machine: &'a Machine, provenance: &'a Provenance, pb: &'a ProgressBar) -> Self {
        Ctx {
            machine,
            provenance,
            pb,
        }
    }
    /// Print above the progress bar.
    pub fn print(&self, text: &str) {
        self.pb.suspend(|| print!("{text}"));
    }
    /// Say what runs now.
    pub fn step(&self, msg: String) {
        self.pb.set_message(msg);
    }
    /// `n` more steps finished.
    pub fn done(&self, n: u64) {
        self.pb.inc(n);
    }
    /// `n` steps the plan did not count (extra phases).
    pub fn more(&self, n: u64) {
        self.pb.inc_length(n);
    }
}

/// The measured runs of one point.
pub type Measured<O> = (Point, Vec<O>);

/// A suite. Only `spec`, `begin`, `run`, `row` and `workload` are
/// required; the rest are hooks with the common behaviour as default.
pub trait Suite: Sync + 'static {
    /// One measured run's result.
    type Outcome;
    /// What lives from the first run to the tables: a CPU picked in
    /// `begin`, measurements of extra phases made in `end`.
    type State;

    fn spec(&self) -> &'static Spec;

    /// Refuse a plan this suite cannot run, before any suite runs.
    fn check(&self, _plan: &Plan) -> Result<(), String> {
        Ok(())
    }
    /// Why this machine cannot run the suite (it is then skipped, saying so).
    fn skip(&self, _plan: &Plan) -> Option<String> {
        None
    }
    /// The measured points, in row order. Default: every thread count,
    /// and at each, every lock.
    fn points(&self, plan: &Plan) -> Vec<Point> {
        plan.threads
            .iter()
            .flat_map(|&threads| {
                plan.locks.iter().enumerate().map(move |(item, l)| Point {
                    item,
                    id: l.id,
                    threads,
                })
            })
            .collect()
    }
    /// Whether runs are interleaved: run 1 of every point at a thread
    /// count, then run 2, ... so that a slow phase of a shared, noisy
    /// machine hits every lock alike and the ratios at one point stay
    /// comparable. `false`: all runs of a point, then the next point.
    fn interleaved(&self) -> bool {
        true
    }
    /// The point in progress messages and errors.
    fn label(&self, p: &Point) -> String {
        format!("{} @ {} threads", p.id, p.threads)
    }
    /// Before the first run.
    fn begin(&self, plan: &Plan, ctx: &Ctx) -> Result<Self::State, String>;
    /// One measured run, warm-up included.
    fn run(&self, plan: &Plan, state: &mut Self::State, p: &Point)
        -> Result<Self::Outcome, String>;
    /// The point's result row, from its runs.
    fn row(&self, plan: &Plan, p: &Point, runs: &[Self::Outcome]) -> ResultRow;
    /// After the last measured run: extra phases (counted with
    /// [`Ctx::more`]), undoing `begin`.
    fn end(&self, _plan: &Plan, _state: &mut Self::State, _ctx: &Ctx) -> Result<(), String> {
        Ok(())
    }
    /// The JSON `workload` line.
    fn workload(&self, plan: &Plan, state: &Self::State) -> String;
    /// Whether the file gets a verdict (klock against the best peer).
    fn verdict(&self) -> bool {
        true
    }
    /// The suite's tables. Default: the common tables and the verdict.
    fn tables(
        &self,
        plan: &Plan,
        _state: &Self::State,
        file: &ResultFile,
        _measured: &[Measured<Self::Outcome>],
    ) -> String {
        report::render(file, plan.spec.cost_table) + &verdict::render(file)
    }
    /// Write the JSON. Default: the result file.
    fn write_json(
        &self,
        plan: &Plan,
        _state: &Self::State,
        file: &ResultFile,
        _measured: &[Measured<Self::Outcome>],
    ) -> Result<(), String> {
        file.write_json(&plan.json)
    }
    /// What the plot's error bars span; `None`: no plot.
    fn plot_unit(&self) -> Option<&'static str> {
        Some("runs")
    }
    /// One run of the suite's workload on `lock` under lockstat, for
    /// `klock stat`. Default: the common workload.
    fn tracked_run(
        &self,
        plan: &Plan,
        lock: &LockEntry,
        threads: usize,
    ) -> Result<RunOutcome, String> {
        let run = lock.run_tracked.ok_or_else(|| untrackable(lock))?;
        run(&plan.workload(threads))
    }
}

/// The error for a lock lockstat cannot track.
pub fn untrackable(lock: &LockEntry) -> String {
    format!(
        "lock '{}' cannot be tracked (no TryBench impl). Trackable: {}",
        lock.id,
        registry::all()
            .iter()
            .filter(|e| e.tracked)
            .map(|e| e.id)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A [`Suite`] with its types erased, as the suite table holds it.
pub trait AnySuite: Sync {
    fn spec(&self) -> &'static Spec;
    fn check(&self, plan: &Plan) -> Result<(), String>;
    fn points(&self, plan: &Plan) -> Vec<Point>;
    fn plot_unit(&self) -> Option<&'static str>;
    fn verdict(&self) -> bool;
    /// The order of the measured runs: (index into `points`, run number).
    fn schedule(&self, plan: &Plan) -> Vec<(usize, usize)>;
    /// Run the plan: `Ok(None)` where the suite was skipped.
    fn execute(&self, plan: &Plan, ctx: &Ctx) -> Result<Option<ResultFile>, String>;
    fn tracked_run(
        &self,
        plan: &Plan,
        lock: &LockEntry,
        threads: usize,
    ) -> Result<RunOutcome, String>;
}

impl<S: Suite> AnySuite for S {
    fn spec(&self) -> &'static Spec {
        Suite::spec(self)
    }
    fn check(&self, plan: &Plan) -> Result<(), String> {
        Suite::check(self, plan)
    }
    fn points(&self, plan: &Plan) -> Vec<Point> {
        Suite::points(self, plan)
    }
    fn plot_unit(&self) -> Option<&'static str> {
        Suite::plot_unit(self)
    }
    fn verdict(&self) -> bool {
        Suite::verdict(self)
    }
    fn schedule(&self, plan: &Plan) -> Vec<(usize, usize)> {
        run_order(self, plan, &Suite::points(self, plan))
    }
    fn execute(&self, plan: &Plan, ctx: &Ctx) -> Result<Option<ResultFile>, String> {
        drive(self, plan, ctx)
    }
    fn tracked_run(
        &self,
        plan: &Plan,
        lock: &LockEntry,
        threads: usize,
    ) -> Result<RunOutcome, String> {
        Suite::tracked_run(self, plan, lock, threads)
    }
}

/// The order in which [`drive`] makes `suite`'s measured runs of `points`.
fn run_order<S: Suite + ?Sized>(suite: &S, plan: &Plan, points: &[Point]) -> Vec<(usize, usize)> {
    schedule(points, plan.runs, suite.interleaved())
}

/// The order of the measured runs: (point index, run number).
fn schedule(points: &[Point], runs: usize, interleaved: bool) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(points.len() * runs);
    if !interleaved {
        for p in 0..points.len() {
            out.extend((0..runs).map(|r| (p, r)));
        }
        return out;
    }
    // Consecutive points at one thread count form a group.
    let mut start = 0;
    while start < points.len() {
        let t = points[start].threads;
        let end = points[start..]
            .iter()
            .position(|p| p.threads != t)
            .map_or(points.len(), |n| start + n);
        for r in 0..runs {
            out.extend((start..end).map(|p| (p, r)));
        }
        start = end;
    }
    out
}

/// Run one suite's plan. The tables come first, then the files: a file
/// that cannot be written loses nothing that was on the screen.
pub fn drive<S: Suite + ?Sized>(
    suite: &S,
    plan: &Plan,
    ctx: &Ctx,
) -> Result<Option<ResultFile>, String> {
    let points = suite.points(plan);
    if let Some(why) = suite.skip(plan) {
        ctx.print(&format!("\n== {} — skipped: {why}\n", plan.spec.name));
        ctx.done((points.len() * plan.runs) as u64);
        return Ok(None);
    }
    let mut state = suite.begin(plan, ctx)?;
    let mut runs: Vec<Vec<S::Outcome>> = points
        .iter()
        .map(|_| Vec::with_capacity(plan.runs))
        .collect();
    for (i, r) in run_order(suite, plan, &points) {
        let p = &points[i];
        ctx.step(format!(
            "{} {}, run {}",
            plan.spec.name,
            suite.label(p),
            r + 1
        ));
        let out = suite
            .run(plan, &mut state, p)
            .map_err(|e| format!("{}: {e}", suite.label(p)))?;
        runs[i].push(out);
        ctx.done(1);
    }
    suite.end(plan, &mut state, ctx)?;
    let measured: Vec<Measured<S::Outcome>> = points.into_iter().zip(runs).collect();
    let mut file = ResultFile {
        suite: plan.spec.name.into(),
        machine: ctx.machine.clone(),
        results: measured
            .iter()
            .map(|(p, runs)| suite.row(plan, p, runs))
            .collect(),
        title: plan.spec.title.into(),
        workload: suite.workload(plan, &state),
        provenance: ctx.provenance.clone(),
        verdict: Default::default(),
    };
    if suite.verdict() {
        verdict::attach(&mut file);
    }
    ctx.print(&suite.tables(plan, &state, &file, &measured));
    suite.write_json(plan, &state, &file, &measured)?;
    if let Some(unit) = suite.plot_unit() {
        plot::plot(&file, &plan.plot, unit)?;
        ctx.print(&format!(
            "\n   JSON: {}   plot: {}\n",
            plan.json.display(),
            plan.plot.display()
        ));
    } else {
        ctx.print(&format!("\n   JSON: {}\n", plan.json.display()));
    }
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(item: usize, threads: usize) -> Point {
        Point {
            item,
            id: "x",
            threads,
        }
    }

    #[test]
    fn schedules_interleave_within_a_thread_count() {
        let ps = [pt(0, 1), pt(1, 1), pt(0, 2), pt(1, 2)];
        assert_eq!(
            schedule(&ps, 2, true),
            [
                (0, 0),
                (1, 0),
                (0, 1),
                (1, 1),
                (2, 0),
                (3, 0),
                (2, 1),
                (3, 1)
            ]
        );
        assert_eq!(
            schedule(&ps[..2], 2, false),
            [(0, 0), (0, 1), (1, 0), (1, 1)]
        );
    }
}
