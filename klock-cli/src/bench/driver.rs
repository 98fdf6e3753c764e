//! The command line's side of `klock bench`: options resolved into plans
//! (one per suite), the plans run under one progress bar, and `--list`.

use super::registry;
use super::report::{Machine, Provenance, ResultFile};
use super::suite::{Ctx, Plan, Spec};
use super::suites;
use super::workload::CriticalSection;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
        let names = suite_names(&self.suites);
        let several = names.len() > 1;
        names
            .iter()
            .map(|&name| {
                let suite = suites::find(name)?;
                let spec = suite.spec();
                let defaults = self.locks.is_empty();
                let mut ids: Vec<&str> = if defaults {
                    spec.default_locks.to_vec()
                } else {
                    self.locks.iter().map(|s| s.as_str()).collect()
                };
                // A lock named twice runs once, where it was first named
                // (as a thread count given twice does).
                let mut seen = std::collections::HashSet::new();
                ids.retain(|id| seen.insert(*id));
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
                    super::klocks::bpf_available().map_err(|e| format!("lock '{}': {e}", l.id))?;
                }
                let mut threads = if self.threads.is_empty() {
                    spec.default_threads.to_vec()
                } else {
                    self.threads.clone()
                };
                threads.sort_unstable();
                threads.dedup();
                // --quick keeps slow suites (rwsem) to a few seconds: the
                // smallest and largest default thread counts only.
                if self.quick && self.threads.is_empty() && spec.quick_ends {
                    let (lo, hi) = (threads[0], threads[threads.len() - 1]);
                    threads = if lo == hi { vec![lo] } else { vec![lo, hi] };
                }
                Ok(Plan {
                    suite,
                    spec,
                    locks,
                    threads,
                    cs: self
                        .cs_ns
                        .map_or(spec.cs, |ns| CriticalSection::Work { ns }),
                    outside_ns: self.outside_ns.unwrap_or(spec.outside_ns),
                    duration,
                    warmup,
                    // A suite's own default (treelock's 5) gives way to
                    // --runs and --quick.
                    runs: match spec.runs {
                        Some(n) if self.runs.is_none() && !self.quick => n,
                        _ => runs,
                    },
                    json: out_path(self.json.as_deref(), spec.name, "json", several),
                    plot: out_path(self.plot.as_deref(), spec.name, "svg", several),
                    json_given: self.json.is_some(),
                    plot_given: self.plot.is_some(),
                })
            })
            .collect()
    }
}

/// Run the plans, printing each suite's tables as it completes, then
/// writing its JSON and plot. Every output path, and every suite's own
/// conditions, are checked first: a bad one is an error before anything
/// runs. Returns the result files.
pub fn execute(plans: &[Plan], provenance: &Provenance) -> Result<Vec<ResultFile>, String> {
    for plan in plans {
        plan.check_outputs()?;
        plan.suite.check(plan)?;
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
    let ctx = Ctx::new(&machine, provenance, &pb);
    let mut files = Vec::new();
    for plan in plans {
        files.extend(plan.suite.execute(plan, &ctx)?);
    }
    pb.finish_and_clear();
    Ok(files)
}

/// Whether the eBPF-oracle variants can run; says once why not.
fn bpf_or_note() -> bool {
    static NOTE: std::sync::Once = std::sync::Once::new();
    match super::klocks::bpf_available() {
        Ok(()) => true,
        Err(e) => {
            NOTE.call_once(|| eprintln!("klock: the -bpf variants are left out: {e}"));
            false
        }
    }
}

/// The suites that `names` (as given on the command line) stand for: the
/// headline suites for none, every suite for `all`, a group's suites for
/// its name (e.g. `rwsem`), any other name as itself (checked later).
fn suite_names(names: &[String]) -> Vec<&str> {
    if names.is_empty() {
        suites::HEADLINE.to_vec()
    } else if names.iter().any(|s| s == "all") {
        suites::specs().map(|s| s.name).collect()
    } else {
        names
            .iter()
            .flat_map(
                |s| match suites::GROUPS.iter().find(|g| g.0 == s.as_str()) {
                    Some(g) => g.1.to_vec(),
                    None => vec![s.as_str()],
                },
            )
            .collect()
    }
}

/// A suite's two lines in `--list`.
fn suite_entry(spec: &Spec) -> String {
    format!(
        "  {:<12} {}\n  {:<12} default locks: {}\n",
        spec.name,
        spec.title,
        "",
        spec.default_locks.join(", ")
    )
}

/// A lock's line in `--list`.
fn lock_line(l: &registry::LockEntry) -> String {
    format!(
        "  {:<20} {}{}\n",
        l.id,
        l.about,
        if l.shared { " [rw]" } else { "" }
    )
}

/// `klock bench --list [SUITE...]`: with no suite (or `all`), every
/// suite and every lock; otherwise the named suites (a group stands for its
/// suites) and the locks they run by default, with what each lock is. An
/// unknown suite is an error that lists the valid names.
pub fn list_for(names: &[String]) -> Result<String, String> {
    if names.is_empty() || names.iter().any(|n| n == "all") {
        return Ok(list());
    }
    let mut s = String::from("Suites\n");
    let mut shown: Vec<&str> = Vec::new();
    let mut ids: Vec<&str> = Vec::new();
    for name in suite_names(names) {
        let spec = suites::find(name)?.spec();
        if shown.contains(&spec.name) {
            continue;
        }
        shown.push(spec.name);
        s += &suite_entry(spec);
        for id in spec.default_locks {
            if !ids.contains(id) {
                ids.push(id);
            }
        }
    }
    s += "\nLocks (any registered lock can be named with --locks; `klock bench --list` shows them all)\n";
    for id in ids {
        s += &lock_line(&registry::find(id)?);
    }
    Ok(s)
}

/// `klock bench --list`: every suite and every lock.
pub fn list() -> String {
    let mut s = String::from("Suites (a bare `klock bench` runs: ");
    s += &suites::HEADLINE.join(", ");
    s += "; `klock bench all` runs every suite)\n";
    for spec in suites::specs() {
        s += &suite_entry(spec);
    }
    for (group, members) in suites::GROUPS {
        s += &format!("  {:<12} group: runs {}\n", group, members.join(", "));
    }
    s += "\nLocks\n";
    for l in registry::all() {
        s += &lock_line(&l);
    }
    s
}
