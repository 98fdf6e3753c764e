//! `klock bench`: the kernel community's lock experiments, run side by side
//! with the locks people use today.

pub mod ctxswitch;
pub mod klocks;
pub mod peers;
pub mod pi;
pub mod registry;
pub mod report;
pub mod stats;
pub mod suites;
pub mod workload;
pub mod xfer;
// treelock suite and `klock stat`
pub mod stat;
pub mod treelock;
pub mod verdict;

use indicatif::{ProgressBar, ProgressStyle};
use report::{Machine, Provenance, ResultFile, ResultRow};
use std::path::{Path, PathBuf};
use std::time::Duration;
use workload::{CriticalSection, Workload};

/// Default output folder for JSON and plots.
pub const OUT_DIR: &str = "target/klock-bench";

/// What the user asked for (already parsed; validated by [`Options::plan`]).
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub suites: Vec<String>,
    pub locks: Vec<String>,
    pub threads: Vec<usize>,
    pub duration: Option<Duration>,
    pub runs: Option<usize>,
    pub warmup: Option<Duration>,
    pub json: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    pub quick: bool,
    pub cs_ns: Option<u64>,
    pub outside_ns: Option<u64>,
    /// The command line as the user ran it, recorded in the JSON.
    pub argv: Vec<String>,
}

/// One suite, resolved.
pub struct Plan {
    pub suite: &'static suites::Suite,
    pub locks: Vec<registry::LockEntry>,
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
    pub fn points(&self) -> usize {
        if self.suite.name == ctxswitch::NAME {
            // One point per hook variant, whatever the locks.
            return ctxswitch::VARIANTS.len();
        }
        self.locks.len() * self.threads.len()
    }
    pub fn seconds(&self) -> f64 {
        self.points() as f64 * self.runs as f64 * (self.duration + self.warmup).as_secs_f64()
    }
    /// Whether the suite draws a plot (ctxswitch has a table only).
    pub fn plots(&self) -> bool {
        self.suite.name != ctxswitch::NAME
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

/// `dir/name.ext`, or the user's path with `-suite` inserted when one path
/// serves several suites.
fn out_path(user: Option<&Path>, suite: &str, ext: &str, several: bool) -> PathBuf {
    match user {
        None => Path::new(OUT_DIR).join(format!("{suite}.{ext}")),
        Some(p) if !several => p.to_path_buf(),
        Some(p) => {
            let stem = p
                .file_stem()
                .map_or("bench".into(), |s| s.to_string_lossy().into_owned());
            let e = p
                .extension()
                .map_or(ext.into(), |s| s.to_string_lossy().into_owned());
            p.with_file_name(format!("{stem}-{suite}.{e}"))
        }
    }
}

impl Options {
    /// Validate everything and resolve the suites; errors say what to do.
    pub fn plan(&self) -> Result<Vec<Plan>, String> {
        let (duration, runs, warmup) = if self.quick {
            (Duration::from_millis(150), 1, Duration::from_millis(50))
        } else {
            (Duration::from_millis(500), 3, Duration::from_millis(100))
        };
        let duration = self.duration.unwrap_or(duration);
        let runs = self.runs.unwrap_or(runs);
        let warmup = self.warmup.unwrap_or(warmup);
        if duration < Duration::from_millis(10) || duration > Duration::from_secs(3600) {
            return Err(format!(
                "--duration must be between 10ms and 1h (got {duration:?})"
            ));
        }
        if warmup > Duration::from_secs(3600) {
            return Err(format!("--warmup must be at most 1h (got {warmup:?})"));
        }
        if !(1..=1000).contains(&runs) {
            return Err(format!("--runs must be between 1 and 1000 (got {runs})"));
        }
        if let Some(&t) = self.threads.iter().find(|&&t| !(1..=1024).contains(&t)) {
            return Err(format!(
                "--threads values must be between 1 and 1024 (got {t})"
            ));
        }
        for (flag, v) in [("--cs-ns", self.cs_ns), ("--outside-ns", self.outside_ns)] {
            if let Some(v) = v.filter(|&v| v > 10_000_000) {
                return Err(format!("{flag} must be at most 10000000 (10 ms) (got {v})"));
            }
        }
        let names: Vec<&str> = if self.suites.is_empty() {
            suites::HEADLINE.to_vec()
        } else if self.suites.iter().any(|s| s == "all") {
            suites::SUITES.iter().map(|s| s.name).collect()
        } else {
            self.suites
                .iter()
                .flat_map(|s| {
                    // A group name (e.g. `rwsem`) stands for its suites.
                    match suites::GROUPS.iter().find(|g| g.0 == s.as_str()) {
                        Some(g) => g.1.to_vec(),
                        None => vec![s.as_str()],
                    }
                })
                .collect()
        };
        let several = names.len() > 1;
        names
            .iter()
            .map(|&name| {
                let suite = suites::find(name)?;
                let defaults = self.locks.is_empty();
                let ids: Vec<&str> = if defaults {
                    suite.default_locks.to_vec()
                } else {
                    self.locks.iter().map(|s| s.as_str()).collect()
                };
                let mut locks = ids
                    .iter()
                    .map(|id| registry::find(id))
                    .collect::<Result<Vec<_>, _>>()?;
                // Locks run under the eBPF oracle need the program to load:
                // a suite's own list leaves them out where it cannot
                // (saying so once); naming one is then an error.
                if defaults {
                    locks.retain(|l| !l.needs_bpf() || bpf_or_note());
                } else if let Some(l) = locks.iter().find(|l| l.needs_bpf()) {
                    klocks::bpf_available().map_err(|e| format!("lock '{}': {e}", l.id))?;
                }
                let mut threads = if self.threads.is_empty() {
                    suite.default_threads.to_vec()
                } else {
                    self.threads.clone()
                };
                threads.sort_unstable();
                threads.dedup();
                // --quick keeps the rwsem suites to a few seconds: the
                // smallest and largest default thread counts only.
                if self.quick && self.threads.is_empty() && suite.name.starts_with("rwsem") {
                    let (lo, hi) = (threads[0], threads[threads.len() - 1]);
                    threads = if lo == hi { vec![lo] } else { vec![lo, hi] };
                }
                Ok(Plan {
                    suite,
                    locks,
                    threads,
                    cs: self
                        .cs_ns
                        .map_or(suite.cs, |ns| CriticalSection::Work { ns }),
                    outside_ns: self.outside_ns.unwrap_or(suite.outside_ns),
                    duration,
                    warmup,
                    // treelock: the 2004 mail's table is mean(stddev) of 5 runs.
                    runs: if suite.name == treelock::NAME && self.runs.is_none() && !self.quick {
                        5
                    } else {
                        runs
                    },
                    json: out_path(self.json.as_deref(), suite.name, "json", several),
                    plot: out_path(self.plot.as_deref(), suite.name, "svg", several),
                    json_given: self.json.is_some(),
                    plot_given: self.plot.is_some(),
                })
            })
            .collect()
    }
}

/// `   JSON: PATH   plot: PATH`, after a suite's files are written.
fn wrote(pb: &ProgressBar, plan: &Plan) {
    pb.suspend(|| {
        if plan.plots() {
            println!(
                "\n   JSON: {}   plot: {}",
                plan.json.display(),
                plan.plot.display()
            );
        } else {
            println!("\n   JSON: {}", plan.json.display());
        }
    });
}

/// Run the plans, printing each suite's tables as it completes, then
/// writing its JSON and plot. Every output path is checked first: a bad
/// one is an error before anything runs. Returns the result files.
pub fn execute(plans: &[Plan], provenance: &Provenance) -> Result<Vec<ResultFile>, String> {
    for plan in plans {
        plan.check_outputs()?;
    }
    let total: usize = plans.iter().map(|p| p.points() * p.runs).sum();
    let secs: f64 = plans.iter().map(|p| p.seconds()).sum();
    eprintln!("klock bench: {total} runs, about {secs:.0} s");
    let pb = ProgressBar::new(total as u64);
    pb.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} runs, eta {eta} — {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let machine = Machine::probe();
    let mut files = Vec::new();
    for plan in plans {
        // treelock has its own phases (cost, sweep, lockstat) and tables.
        if plan.suite.name == treelock::NAME {
            treelock::check(plan)?;
            files.push(treelock::execute(plan, &machine, provenance, &pb)?);
            wrote(&pb, plan);
            continue;
        }
        // The oracle's hook cost: its own runner and table.
        if plan.suite.name == ctxswitch::NAME {
            if let Some(file) = ctxswitch::execute(plan, &machine, provenance, &pb)? {
                files.push(file);
                wrote(&pb, plan);
            }
            continue;
        }
        // pi_stress has its own runner, table and JSON rows.
        if plan.suite.name == pi::SUITE {
            if let Some(file) = pi::execute(plan, &machine, provenance, &pb)? {
                files.push(file);
                wrote(&pb, plan);
            }
            continue;
        }
        // Runs are interleaved: for each thread count, run 1 of every lock,
        // then run 2 of every lock, ... so that a slow phase of a shared,
        // noisy machine hits every lock alike and the ratios between locks
        // at one point stay comparable.
        let mut results = Vec::new();
        for &t in &plan.threads {
            let (readers, writers) = (plan.suite.mix)(t);
            let w = Workload {
                readers,
                writers,
                cs: plan.cs,
                outside_ns: plan.outside_ns,
                warmup: plan.warmup,
                duration: plan.duration,
            };
            let mut runs: Vec<Vec<workload::RunOutcome>> = plan
                .locks
                .iter()
                .map(|_| Vec::with_capacity(plan.runs))
                .collect();
            for run in 0..plan.runs {
                for (lock, runs) in plan.locks.iter().zip(runs.iter_mut()) {
                    pb.set_message(format!(
                        "{} {} @ {t} threads, run {}",
                        plan.suite.name,
                        lock.id,
                        run + 1
                    ));
                    runs.push(
                        (lock.run)(&w).map_err(|e| format!("{} @ {t} threads: {e}", lock.id))?,
                    );
                    pb.inc(1);
                }
            }
            for (lock, runs) in plan.locks.iter().zip(&runs) {
                results.push(ResultRow::aggregate(
                    lock.id,
                    lock.lock,
                    lock.variant,
                    readers,
                    writers,
                    runs,
                ));
            }
        }
        let mut file = ResultFile {
            suite: plan.suite.name.into(),
            machine: machine.clone(),
            results,
            title: plan.suite.title.into(),
            workload: format!(
                "critical section: {}; {} ns outside; {:?} × {} runs per point after {:?} warm-up",
                plan.cs.describe(),
                plan.outside_ns,
                plan.duration,
                plan.runs,
                plan.warmup
            ),
            provenance: provenance.clone(),
            verdict: Default::default(),
        };
        verdict::attach(&mut file);
        // The tables first: a file that cannot be written loses nothing
        // that was on the screen.
        pb.suspend(|| {
            print!("{}", report::render(&file, plan.suite.cost_table));
            print!("{}", verdict::render(&file));
        });
        file.write_json(&plan.json)?;
        report::plot(&file, &plan.plot)?;
        wrote(&pb, plan);
        files.push(file);
    }
    pb.finish_and_clear();
    Ok(files)
}

/// Whether the eBPF-oracle variants can run; says once why not.
fn bpf_or_note() -> bool {
    static NOTE: std::sync::Once = std::sync::Once::new();
    match klocks::bpf_available() {
        Ok(()) => true,
        Err(e) => {
            NOTE.call_once(|| eprintln!("klock: the -bpf variants are left out: {e}"));
            false
        }
    }
}

/// `klock bench --list`.
pub fn list() -> String {
    let mut s = String::from("Suites (a bare `klock bench` runs: ");
    s += &suites::HEADLINE.join(", ");
    s += "; `klock bench all` runs every suite)\n";
    for suite in suites::SUITES {
        s += &format!("  {:<12} {}\n", suite.name, suite.title);
        s += &format!(
            "  {:<12} default locks: {}\n",
            "",
            suite.default_locks.join(", ")
        );
    }
    for (group, members) in suites::GROUPS {
        s += &format!("  {:<12} group: runs {}\n", group, members.join(", "));
    }
    s += "\nLocks\n";
    for l in registry::all() {
        s += &format!(
            "  {:<20} {}{}\n",
            l.id,
            l.about,
            if l.shared { " [rw]" } else { "" }
        );
    }
    s
}
