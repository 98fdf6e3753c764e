//! Results: aggregation over runs, the JSON contract (docs/bench.md) and
//! the kernel-style tables (the SVG plot is in `plot`).

use super::stats::{hmean, mean, median, min_mean_max, stddev};
use super::workload::{Role, RunOutcome};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub kernel: String,
}

impl Machine {
    pub fn probe() -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = rustix::system::uname()
            .release()
            .to_string_lossy()
            .into_owned();
        Machine {
            cpus: klock::sys::online_cpus(),
            cpu_model,
            kernel,
        }
    }
}

/// One result object. Field names are a contract: add, never rename.
/// (Read back, e.g. to plot a committed file, the additions may be absent.)
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultRow {
    pub lock: String,
    pub variant: String,
    pub threads: usize,
    pub readers: usize,
    pub writers: usize,
    pub runs: usize,
    pub duration_s: f64,
    pub kops_mean: f64,
    pub kops_stddev: f64,
    pub kops_hmean: f64,
    pub per_thread_min: u64,
    pub per_thread_mean: f64,
    pub per_thread_max: u64,
    pub reader_min: Option<u64>,
    pub reader_mean: Option<f64>,
    pub reader_max: Option<u64>,
    pub writer_min: Option<u64>,
    pub writer_mean: Option<f64>,
    pub writer_max: Option<u64>,
    pub cpu_s: f64,
    pub ops_per_cpu_s: f64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub events: BTreeMap<String, u64>,
    // Additions beyond the contract.
    /// The CLI name of the lock (`--locks`).
    #[serde(default)]
    pub id: String,
    /// kop/s of each run.
    #[serde(default)]
    pub kops_runs: Vec<f64>,
    /// Cache-line round trip between two CPUs (ns), `[before, after]`
    /// each run (`null`: not measured). On a VM whose vCPUs the host moves
    /// apart and together, compare runs at similar values.
    #[serde(default)]
    pub xfer_ns_runs: Vec<(Option<f64>, Option<f64>)>,
}

/// Per-thread Min/Mean/Max of one role (or all threads), averaged over runs.
fn spread(runs: &[RunOutcome], role: Option<Role>) -> Option<(u64, f64, u64)> {
    let per_run: Vec<(u64, f64, u64)> = runs
        .iter()
        .filter_map(|r| {
            let ops: Vec<u64> = match role {
                Some(role) => r.role_ops(role),
                None => r.per_thread.iter().map(|p| p.1).collect(),
            };
            min_mean_max(&ops)
        })
        .collect();
    if per_run.is_empty() {
        return None;
    }
    let n = per_run.len() as f64;
    let min = per_run.iter().map(|p| p.0 as f64).sum::<f64>() / n;
    let mean = per_run.iter().map(|p| p.1).sum::<f64>() / n;
    let max = per_run.iter().map(|p| p.2 as f64).sum::<f64>() / n;
    Some((
        min.round() as u64,
        (mean * 10.0).round() / 10.0,
        max.round() as u64,
    ))
}

impl ResultRow {
    pub fn aggregate(
        id: &str,
        lock: &str,
        variant: &str,
        readers: usize,
        writers: usize,
        runs: &[RunOutcome],
    ) -> Self {
        let kops: Vec<f64> = runs.iter().map(|r| r.kops()).collect();
        let all = spread(runs, None).unwrap_or((0, 0.0, 0));
        let rd = if readers > 0 {
            spread(runs, Some(Role::Reader))
        } else {
            None
        };
        let wr = if writers > 0 {
            spread(runs, Some(Role::Writer))
        } else {
            None
        };
        let n = runs.len().max(1) as f64;
        let cpu_total: f64 = runs.iter().map(|r| r.cpu_s).sum();
        let ops_total: u64 = runs.iter().map(|r| r.total_ops()).sum();
        let mut events = BTreeMap::new();
        for r in runs {
            for &(k, v) in &r.events {
                *events.entry(k.to_string()).or_insert(0u64) += v;
            }
        }
        for v in events.values_mut() {
            *v = (*v as f64 / n).round() as u64;
        }
        ResultRow {
            lock: lock.into(),
            variant: variant.into(),
            threads: readers + writers,
            readers,
            writers,
            runs: runs.len(),
            duration_s: mean(&runs.iter().map(|r| r.elapsed_s).collect::<Vec<_>>()),
            kops_mean: mean(&kops),
            kops_stddev: stddev(&kops),
            kops_hmean: hmean(&kops),
            per_thread_min: all.0,
            per_thread_mean: all.1,
            per_thread_max: all.2,
            reader_min: rd.map(|r| r.0),
            reader_mean: rd.map(|r| r.1),
            reader_max: rd.map(|r| r.2),
            writer_min: wr.map(|r| r.0),
            writer_mean: wr.map(|r| r.1),
            writer_max: wr.map(|r| r.2),
            cpu_s: cpu_total / n,
            ops_per_cpu_s: if cpu_total > 0.0 {
                ops_total as f64 / cpu_total
            } else {
                0.0
            },
            ctx_voluntary: (runs.iter().map(|r| r.ctx_voluntary).sum::<u64>() as f64 / n).round()
                as u64,
            ctx_involuntary: (runs.iter().map(|r| r.ctx_involuntary).sum::<u64>() as f64 / n)
                .round() as u64,
            events,
            id: id.into(),
            kops_runs: kops,
            xfer_ns_runs: runs.iter().map(|r| r.xfer_ns).collect(),
        }
    }
}

/// Where a result file comes from: the klock build and the command line.
/// Every result file carries these fields at its top level (older ones
/// may lack them: read back, they are then empty).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Provenance {
    pub klock_version: String,
    /// The commit the binary was built from (`unknown` outside a git
    /// checkout).
    pub git_commit: String,
    /// Whether klock's sources differed from that commit at build time
    /// (`null`: unknown).
    pub git_dirty: Option<bool>,
    /// The command line, quoted for a POSIX shell: paste it to run again.
    pub command: String,
    /// The same command line, one element per argument.
    pub command_argv: Vec<String>,
}

impl Provenance {
    /// The build, as the verdicts name it: the commit's first 7 digits,
    /// and `with changes` when the sources differed; `None` when unknown.
    pub fn build(&self) -> Option<String> {
        let c = &self.git_commit;
        let c = c.get(..7).unwrap_or(c);
        match (c, self.git_dirty) {
            ("", _) => None,
            (c, Some(true)) => Some(format!("{c} with changes")),
            (c, _) => Some(c.to_string()),
        }
    }

    /// This build, and `argv` as the user ran it.
    pub fn new(argv: &[String]) -> Self {
        Provenance {
            klock_version: env!("CARGO_PKG_VERSION").into(),
            git_commit: env!("KLOCK_GIT_COMMIT").into(),
            git_dirty: match env!("KLOCK_GIT_DIRTY") {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
            command: argv
                .iter()
                .map(|a| shell_quote(a))
                .collect::<Vec<_>>()
                .join(" "),
            command_argv: argv.to_vec(),
        }
    }
}

/// `a` as one POSIX shell word: unchanged when it is plain, else in single
/// quotes.
pub fn shell_quote(a: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.,/:=@%+".contains(c);
    if !a.is_empty() && a.chars().all(plain) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// A suite's result file. Read back (`klock verdict`), the additions may
/// be absent, and the verdict is not read: it is computed again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultFile {
    pub suite: String,
    pub machine: Machine,
    pub results: Vec<ResultRow>,
    // Additions beyond the contract.
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub workload: String,
    /// `klock_version`, `git_commit`, `git_dirty`, `command`,
    /// `command_argv` at the top level.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// klock's default lock against the best peer: `verdict`,
    /// `verdict_summary` (and `verdict_note`) at the top level.
    #[serde(flatten, skip_deserializing)]
    pub verdict: Verdict,
}

/// One verdict row (JSON `verdict[]`; computed in `verdict`). `ratio` is klock's kop/s over the
/// peer's: at or above 1.00, klock did at least as well. In the
/// uncontended verdict it is the peer's ns/op over klock's (the same
/// number).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VerdictRow {
    pub threads: usize,
    pub klock_lock: String,
    pub klock_kops: f64,
    pub klock_per_thread_min: u64,
    pub klock_per_thread_mean: f64,
    pub peer_lock: String,
    pub peer_kops: f64,
    pub peer_per_thread_min: u64,
    pub peer_per_thread_mean: f64,
    /// Infinite (JSON `null`) when no peer finished an operation but klock did.
    pub ratio: f64,
    /// The ratio, rounded to the two decimals printed, is below 1.00.
    pub loss: bool,
    /// Some thread of klock's lock finished no operation (Min = 0).
    pub starved: bool,
    /// Some thread of the peer's lock finished no operation: the peer's
    /// rate came with a thread it left out (a writer-starving rwlock).
    pub peer_starved: bool,
    /// Uncontended only: the kind (`spinlock`, `mutex`, `rwlock`, `rwsem`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Uncontended only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub klock_ns_per_op: Option<f64>,
    /// Uncontended only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_ns_per_op: Option<f64>,
    /// Uncontended only: klock's ns/op is at most 10% above the peer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within_10pct: Option<bool>,
    /// Only when the host moved its CPUs during the suite (the runs'
    /// cache-line round trips fell into two groups): klock's rate over
    /// the peer's from runs made at the same CPU distance (the median of
    /// klock's near runs over the peer's near runs, the same for far
    /// ones, and the geometric mean of the two where both exist),
    /// against the peer for which it is lowest; `None` where no peer has
    /// runs at a distance klock has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_distance_ratio: Option<f64>,
    /// The peer of [`Self::same_distance_ratio`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_distance_peer: Option<String>,
    /// Round by round: the ratio from each round's pair of runs (absent
    /// with fewer than two rounds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds: Option<Rounds>,
    /// The ratio with the best peer held out of its own selection: for
    /// each round, the fastest peer (and, where klock's side is the best
    /// of several locks, klock's fastest) by the mean of the *other*
    /// rounds, and that round's runs of the two; klock's sum over the
    /// peers' sum. The fastest of several peers' means is partly the
    /// fastest by its noise, which pulls [`Self::ratio`] down against
    /// peers that tie; this ratio has no such pull. Absent with fewer
    /// than two rounds, or when the locks have different numbers of runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_out: Option<f64>,
}

/// A verdict row's ratio round by round. A suite makes its runs in
/// rounds: round *i* runs every lock once, back to back, at one thread
/// count, so run *i* of klock's lock and run *i* of the peer saw the
/// host in about the same state. The ratio of each such pair (klock's
/// rate over the peer's, as [`VerdictRow::ratio`]) tells a loss the runs
/// agree on from one that the run-to-run noise could turn around.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Rounds {
    /// Rounds whose ratio, rounded to the two decimals printed, is 1.00
    /// or more.
    pub won: usize,
    /// Rounds compared.
    pub of: usize,
    /// The lowest and the highest round's ratio.
    pub min: f64,
    pub max: f64,
}

/// The line under the table (JSON `verdict_summary`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Geometric mean of the ratios at the thread counts from 4 up (every
    /// row in the uncontended verdict); `None` when there is none.
    pub geomean: Option<f64>,
    /// The thread counts the geomean covers, lowest and highest.
    pub geomean_threads: Option<(usize, usize)>,
    pub won: usize,
    pub lost: usize,
    pub starved: usize,
    /// Rows whose peer starved a thread ([`VerdictRow::peer_starved`]).
    pub peer_starved: usize,
    /// Rows with a same-distance ratio: how many of those are at 1.00x
    /// or more, and how many below (absent when no row has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_distance_won: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_distance_lost: Option<usize>,
    /// Lost cells (`lost`) whose every round was a loss too; absent when
    /// no row has [`VerdictRow::rounds`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_every_round: Option<usize>,
    /// Rows with a [`VerdictRow::held_out`] ratio: how many of those are
    /// at 1.00x or more, and how many below (absent when no row has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_out_won: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_out_lost: Option<usize>,
}

/// A suite's verdict, flattened into the result file: `verdict` (the
/// rows), `verdict_summary`, and `verdict_note` when there is no table.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    #[serde(rename = "verdict")]
    pub rows: Vec<VerdictRow>,
    #[serde(rename = "verdict_summary")]
    pub summary: Option<Summary>,
    /// Why there is no verdict although the suite has one.
    #[serde(rename = "verdict_note", skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The lock judged in klock's place (`klock verdict --lock`); `None`:
    /// klock's default lock. Not written.
    #[serde(skip)]
    pub subject: Option<String>,
}

impl ResultFile {
    pub fn write_json(&self, path: &Path) -> Result<(), String> {
        write_json(self, path)
    }
}

/// Write `value` as pretty JSON to `path`, creating its folder.
pub fn write_json(value: &impl Serialize, path: &Path) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {}", dir.display(), io_reason(&e)))?;
    }
    let json = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, json + "\n")
        .map_err(|e| format!("cannot write {}: {}", path.display(), io_reason(&e)))
}

/// An I/O error's text without the `(os error N)` tail.
pub fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Whether the output file `path` can be written once the run is done:
/// its folder exists or can be created (the folder is created now, as the
/// write would), `path` is not a folder, and a file can be made there.
/// Nothing that exists is changed. `Err`: the reason.
pub fn check_writable(path: &Path) -> Result<(), String> {
    use std::fs::OpenOptions;
    if path.as_os_str().is_empty() {
        return Err("empty path".into());
    }
    if path.is_dir() {
        return Err("Is a directory".into());
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // A file where a folder should be: say so (creating the folders
        // would only say "File exists").
        if let Some(file) = dir.ancestors().find(|a| a.exists()).filter(|a| !a.is_dir()) {
            return Err(format!("Not a directory ({} is a file)", file.display()));
        }
        std::fs::create_dir_all(dir).map_err(|e| io_reason(&e))?;
    }
    if path.exists() {
        // Opened to append: the old file stays as it is until the write.
        return OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|e| io_reason(&e));
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| io_reason(&e))?;
    std::fs::remove_file(path).map_err(|e| io_reason(&e))
}

/// `1234567.8` → `"1,234,568"`.
pub fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate for a table cell: grouped thousands, or decimals when small.
pub fn rate(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        thousands(x)
    }
}

/// Render a table: a header row and rows, right-aligned, first column left.
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut w = vec![0; cols];
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |r: &[String]| {
        let mut s = String::new();
        for (i, c) in r.iter().enumerate() {
            if i == 0 {
                let _ = write!(s, "  {:<w$}", c, w = w[0]);
            } else {
                let _ = write!(s, "  {:>w$}", c, w = w[i]);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    out += &line(&w.iter().map(|&n| "-".repeat(n)).collect::<Vec<_>>());
    for r in rows {
        out += &line(r);
    }
    out
}

/// Lock ids in first-seen order, and the thread counts.
pub(super) fn axes(rows: &[ResultRow]) -> (Vec<String>, Vec<usize>) {
    let mut ids: Vec<String> = Vec::new();
    let mut threads: Vec<usize> = Vec::new();
    for r in rows {
        if !ids.contains(&r.id) {
            ids.push(r.id.clone());
        }
        if !threads.contains(&r.threads) {
            threads.push(r.threads);
        }
    }
    threads.sort_unstable();
    (ids, threads)
}

fn grid(rows: &[ResultRow], cell: impl Fn(&ResultRow) -> String) -> String {
    let (ids, threads) = axes(rows);
    let header: Vec<String> = std::iter::once("threads".to_string())
        .chain(ids.iter().cloned())
        .collect();
    let body: Vec<Vec<String>> = threads
        .iter()
        .map(|&t| {
            std::iter::once(t.to_string())
                .chain(ids.iter().map(|id| {
                    rows.iter()
                        .find(|r| &r.id == id && r.threads == t)
                        .map_or_else(|| "-".into(), &cell)
                }))
                .collect()
        })
        .collect();
    table(&header, &body)
}

fn fmt_mmm(min: Option<u64>, mean: Option<f64>, max: Option<u64>) -> String {
    match (min, mean, max) {
        (Some(a), Some(b), Some(c)) => {
            format!(
                "{}/{}/{}",
                thousands(a as f64),
                thousands(b),
                thousands(c as f64)
            )
        }
        _ => "-".into(),
    }
}

/// Neighbouring round trips this far apart (ratio) mean two placements.
const XFER_GAP: f64 = 1.5;

/// Every cache-line round trip measured around the runs, sorted (ns).
fn xfer_values(rows: &[ResultRow]) -> Vec<f64> {
    let mut ns: Vec<f64> = rows
        .iter()
        .flat_map(|r| r.xfer_ns_runs.iter())
        .flat_map(|&(a, b)| [a, b])
        .flatten()
        .collect();
    ns.sort_by(f64::total_cmp);
    ns
}

/// The round trip (ns) that splits the runs into two CPU placements, near
/// and far, when the measured values fall into two groups: the geometric
/// mean of the two neighbouring values around the widest gap, if that gap
/// is [`XFER_GAP`]× or more.
pub(super) fn placement_cut(rows: &[ResultRow]) -> Option<f64> {
    // On the development host one placement spreads over 56–197 ns
    // (neighbours within 1.2× of each other) and the other starts at
    // 350 ns: gaps of 1.9–3.0× in the committed v3 files.
    let (below, above) = xfer_values(rows)
        .windows(2)
        .map(|w| (w[0], w[1]))
        .max_by(|a, b| (a.1 / a.0).total_cmp(&(b.1 / b.0)))
        .filter(|&(a, b)| b >= XFER_GAP * a)?;
    Some((below * above).sqrt())
}

/// The cross-CPU cache-line round trip measured around the runs
/// ([`super::xfer`]): one line, and when it fell into two groups during
/// the suite ([`placement_cut`]), the locking rate split into runs at a
/// short and at a long round trip.
fn xfer_section(rows: &[ResultRow]) -> String {
    let ns = xfer_values(rows);
    if ns.is_empty() {
        return String::new();
    }
    let (lo, hi) = (ns[0], ns[ns.len() - 1]);
    let mid = median(&ns).unwrap_or(lo);
    let mut out = format!(
        "\nCache-line round trip between two CPUs, before and after each run: \
         {lo:.0} / {mid:.0} / {hi:.0} ns (min / median / max)\n"
    );
    let Some(cut) = placement_cut(rows) else {
        return out;
    };
    let _ = writeln!(
        out,
        "  It moved during the suite: the host placed the CPUs nearer or farther, and lock \
         hand-overs cost more in some runs than in others. Runs split at {cut:.0} ns \
         (JSON: xfer_ns_runs):"
    );
    out += "\nLocking rate by CPU distance, kop/s: median of the runs near / far \
            (runs whose round trip crossed the cut are left out)\n";
    out += &grid(rows, |r| {
        let (near, far) = split_by_distance(r, cut);
        let med = |v: Vec<f64>| match median(&v) {
            Some(m) => rate(m),
            None => "-".into(),
        };
        format!("{} / {}", med(near), med(far))
    });
    out
}

/// A row's per-run kop/s, split into runs entirely below `cut` ns of
/// round trip and runs entirely at or above it.
pub(super) fn split_by_distance(r: &ResultRow, cut: f64) -> (Vec<f64>, Vec<f64>) {
    let (mut near, mut far) = (Vec::new(), Vec::new());
    for (&k, &(a, b)) in r.kops_runs.iter().zip(&r.xfer_ns_runs) {
        match (a, b) {
            (Some(a), Some(b)) if a < cut && b < cut => near.push(k),
            (Some(a), Some(b)) if a >= cut && b >= cut => far.push(k),
            _ => {}
        }
    }
    (near, far)
}

/// The most any lock can do at each thread count of a writers-only suite
/// that measured 1 thread: `min(threads, CPUs)` × the fastest 1-thread
/// rate. Each operation's work is still done once, on some CPU, and
/// sharing a lock never makes it cheaper; the transfers between CPUs only
/// add. The ratio of a table's best cell to this line says how much any
/// lock could still gain there. Suites with readers change their role mix
/// with the thread count, so the bound would not hold: no line.
fn ceiling(rows: &[ResultRow], cpus: usize) -> String {
    let one = rows
        .iter()
        .filter(|r| r.threads == 1)
        .map(|r| r.kops_mean)
        .fold(0.0, f64::max);
    if one <= 0.0 || cpus == 0 || rows.iter().any(|r| r.readers > 0) {
        return String::new();
    }
    let (_, threads) = axes(rows);
    let cells: Vec<String> = threads
        .iter()
        .filter(|&&t| t > 1)
        .map(|&t| format!("{t}: {}", rate(one * t.min(cpus) as f64)))
        .collect();
    if cells.is_empty() {
        return String::new();
    }
    format!(
        "  Ceiling, kop/s by threads (min(threads, CPUs) x the fastest 1-thread rate, {}): {}\n",
        rate(one),
        cells.join(", ")
    )
}

/// How busy the run kept the CPUs, what it did per CPU-second, and its
/// context switches: where a lock's rate comes from (a lock that idles
/// CPUs, or spins them for nothing, shows here).
pub fn cpu_tables(rows: &[ResultRow]) -> String {
    let mut out = String::from(
        "\nCPU: CPUs kept busy / kop per CPU-second (wasted spinning shows as low kop/CPU-s)\n",
    );
    out += &grid(rows, |r| {
        format!(
            "{:.2} / {}",
            r.cpu_s / r.duration_s.max(1e-9),
            rate(r.ops_per_cpu_s / 1e3)
        )
    });
    out += "\nContext switches per run: voluntary / involuntary\n";
    out += &grid(rows, |r| {
        format!(
            "{} / {}",
            thousands(r.ctx_voluntary as f64),
            thousands(r.ctx_involuntary as f64)
        )
    });
    out
}

/// Each lock's event counters per run, by thread count (locks with none
/// are left out).
pub fn event_tables(rows: &[ResultRow]) -> String {
    let (ids, _) = axes(rows);
    let mut out = String::new();
    for id in &ids {
        let with: Vec<&ResultRow> = rows
            .iter()
            .filter(|r| &r.id == id && !r.events.is_empty())
            .collect();
        if with.is_empty() {
            continue;
        }
        let names: Vec<String> = with[0].events.keys().cloned().collect();
        let _ = writeln!(out, "\nEvents of {id} (per run)");
        let header: Vec<String> = std::iter::once("threads".to_string())
            .chain(names.iter().cloned())
            .collect();
        let body: Vec<Vec<String>> = with
            .iter()
            .map(|r| {
                std::iter::once(r.threads.to_string())
                    .chain(
                        names
                            .iter()
                            .map(|n| thousands(*r.events.get(n).unwrap_or(&0) as f64)),
                    )
                    .collect()
            })
            .collect();
        out += &table(&header, &body);
    }
    out
}

/// The suite's tables, as the kernel mails print them.
pub fn render(file: &ResultFile, cost_table: bool) -> String {
    let rows = &file.results;
    let mut out = String::new();
    let _ = writeln!(out, "\n== {} — {}", file.suite, file.title);
    let _ = writeln!(
        out,
        "   {}; {} CPUs ({})",
        file.workload, file.machine.cpus, file.machine.cpu_model
    );
    if rows.is_empty() {
        return out;
    }
    if cost_table {
        let header = ["lock", "ns/op", "kop/s", "± stddev"].map(String::from);
        let body: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.id.clone(),
                    format!("{:.1}", 1e6 / r.kops_mean.max(1e-9)),
                    rate(r.kops_mean),
                    format!("{:.1}%", 100.0 * r.kops_stddev / r.kops_mean.max(1e-9)),
                ]
            })
            .collect();
        out += "\nUncontended lock+unlock cost (1 thread)\n";
        out += &table(&header, &body);
        return out;
    }
    out += "\nLocking rate, kop/s (mean over runs, ±relative stddev)\n";
    out += &grid(rows, |r| {
        format!(
            "{} ±{:.0}%",
            rate(r.kops_mean),
            100.0 * r.kops_stddev / r.kops_mean.max(1e-9)
        )
    });
    out += &ceiling(rows, file.machine.cpus);
    out += &cpu_tables(rows);

    out += &xfer_section(rows);

    let (ids, threads) = axes(rows);
    let top = *threads.last().unwrap();
    let _ = writeln!(
        out,
        "\nFairness at {top} threads: operations per thread, Min/Mean/Max (mean over runs)"
    );
    for id in &ids {
        if let Some(r) = rows.iter().find(|r| &r.id == id && r.threads == top) {
            let mut line = format!("  {id:<20}");
            if r.readers > 0 && r.writers > 0 {
                let _ = write!(
                    line,
                    " {} readers, Iterations Min/Mean/Max = {}; {} writers, Iterations Min/Mean/Max = {}",
                    r.readers,
                    fmt_mmm(r.reader_min, r.reader_mean, r.reader_max),
                    r.writers,
                    fmt_mmm(r.writer_min, r.writer_mean, r.writer_max)
                );
            } else {
                let _ = write!(
                    line,
                    " {} threads, Iterations Min/Mean/Max = {}",
                    r.threads,
                    fmt_mmm(
                        Some(r.per_thread_min),
                        Some(r.per_thread_mean),
                        Some(r.per_thread_max)
                    )
                );
            }
            out += &line;
            out += "\n";
        }
    }

    out += &event_tables(rows);
    out
}

#[cfg(test)]
mod tests;

/// Test rows for the modules that read the runs' round trips.
#[cfg(test)]
pub(crate) mod test_rows {
    use super::*;

    /// A row of `id` at `threads` writers with one 1 s run per
    /// `(kop/s, cache-line round trip ns)`, the round trip the same before
    /// and after the run, the operations shared evenly by the threads.
    pub(crate) fn row_at(id: &str, threads: usize, runs: &[(f64, f64)]) -> ResultRow {
        let runs: Vec<RunOutcome> = runs
            .iter()
            .map(|&(kops, ns)| RunOutcome {
                elapsed_s: 1.0,
                per_thread: vec![(Role::Writer, (kops * 1e3) as u64 / threads as u64); threads],
                cpu_s: 1.0,
                ctx_voluntary: 0,
                ctx_involuntary: 0,
                events: vec![],
                xfer_ns: (Some(ns), Some(ns)),
            })
            .collect();
        ResultRow::aggregate(id, id, "default", 0, threads, &runs)
    }
}
