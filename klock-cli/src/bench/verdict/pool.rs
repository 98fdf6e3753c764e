//! `klock verdict --pool FILE...`: the rounds of several result files of
//! one suite, pooled into one ratio per cell with its 95% interval.
//!
//! One run's verdict rests on a few rounds, and on a shared machine the
//! rounds of one cell can spread from half to one and a half times the
//! peer's rate. Pooling the rounds of several runs tells the cells klock
//! clearly wins or loses from those the runs cannot tell apart. Each
//! round's ratio is klock's run over the peer's run of the same round
//! (made back to back); the pooled ratio is their geometric mean, and the
//! interval is Student's t on the logarithms. klock's lock in each file is
//! the one that file's verdict judges (in `treelock`, the fastest of
//! klock's three there). Every peer is pooled on its own, and the row
//! shows the strongest: the one with the lowest pooled ratio.

use super::{compute_for, fmt_ratio, is_peer, ratio, shown, table, ResultFile, UNCONTENDED};
use crate::bench::stats::geomean_interval;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One pooled cell: klock's lock against its strongest peer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PooledRow {
    /// Thread count, or the kind of the uncontended verdict.
    pub cell: String,
    /// klock's lock(s) judged in this cell, as the files' verdicts named them.
    pub klock: String,
    /// The peer with the lowest pooled ratio.
    pub peer: String,
    /// Geometric mean of klock's per-round ratio to that peer.
    pub ratio: f64,
    /// The 95% interval of that mean.
    pub low: f64,
    pub high: f64,
    /// Rounds pooled, and in how many files.
    pub rounds: usize,
    pub files: usize,
    /// Rounds in which klock's lock finished no operation (left out of
    /// the mean, which a zero would make zero).
    pub klock_zero: usize,
}

/// What `--pool --json` writes: the files pooled and one entry per cell.
#[derive(serde::Serialize)]
struct PooledFile<'a> {
    suite: &'a str,
    files: Vec<&'a str>,
    builds: &'a [String],
    machines: &'a [String],
    subject: Option<&'a str>,
    peer: Option<&'a str>,
    cells: Vec<PooledCell<'a>>,
}

#[derive(serde::Serialize)]
struct PooledCell<'a> {
    #[serde(flatten)]
    row: &'a PooledRow,
    /// `win`, `loss` or `not told apart`.
    reads_as: &'static str,
}

impl PooledRow {
    /// `Some(true)`: the whole interval at or above 1.00x; `Some(false)`:
    /// the whole interval below; `None`: the rounds cannot tell.
    pub fn clear_win(&self) -> Option<bool> {
        if shown(self.low) >= 1.0 {
            Some(true)
        } else if shown(self.high) < 1.0 {
            Some(false)
        } else {
            None
        }
    }
}

/// Pool the rounds of `files` (name, contents), all of one suite; with
/// `subject`, of that lock judged as klock's default lock is; with `peer`,
/// against that peer alone instead of the strongest.
pub fn pool(
    files: &[(String, ResultFile)],
    subject: Option<&str>,
    peer: Option<&str>,
) -> Result<Vec<PooledRow>, String> {
    let Some((first_name, first)) = files.first() else {
        return Err("--pool needs result files".into());
    };
    if let Some((name, f)) = files.iter().find(|(_, f)| f.suite != first.suite) {
        return Err(format!(
            "{name} is of the `{}` suite and {first_name} of `{}`: --pool takes files of one suite",
            f.suite, first.suite
        ));
    }
    let suite = first.suite.as_str();
    // Per cell: the order it first appeared in, klock's lock ids, and per
    // peer the logarithms of the round ratios and the files they came from.
    struct Cell {
        order: (usize, usize),
        klock: Vec<String>,
        peers: BTreeMap<String, (Vec<f64>, usize)>,
        klock_zero: usize,
    }
    let mut cells: BTreeMap<String, Cell> = BTreeMap::new();
    let mut notes = Vec::new();
    for (name, f) in files {
        let v = compute_for(suite, &f.results, subject)
            .ok_or_else(|| format!("the `{suite}` suite has no verdict"))?;
        if let Some(note) = v.note {
            notes.push(format!("{name}: {note}"));
        }
        for (i, r) in v.rows.iter().enumerate() {
            let at = |id: &str| {
                f.results
                    .iter()
                    .find(|x| x.id == id && x.threads == r.threads)
            };
            let Some(k) = at(&r.klock_lock) else { continue };
            let kind_peers = r
                .kind
                .as_deref()
                .and_then(|n| UNCONTENDED.iter().find(|k| k.name == n))
                .map(|k| k.peers);
            let cell = cells
                .entry(r.kind.clone().unwrap_or_else(|| r.threads.to_string()))
                .or_insert_with(|| Cell {
                    order: (r.threads, i),
                    klock: Vec::new(),
                    peers: BTreeMap::new(),
                    klock_zero: 0,
                });
            if !cell.klock.contains(&r.klock_lock) {
                cell.klock.push(r.klock_lock.clone());
            }
            // A variant of klock's lock (`qspinlock-32` beside
            // `qspinlock`) is never a peer, but may be named with --peer
            // to pool the lock against it.
            let named_variant = |q: &str| {
                peer == Some(q) && !is_peer(suite, q) && q.starts_with(r.klock_lock.as_str())
            };
            let peers = f.results.iter().filter(|q| {
                q.threads == r.threads
                    && Some(q.id.as_str()) != subject
                    && q.id != r.klock_lock
                    && (named_variant(&q.id)
                        || (is_peer(suite, &q.id)
                            && peer.is_none_or(|p| p == q.id)
                            && kind_peers.is_none_or(|ps| ps.contains(&q.id.as_str()))))
            });
            for q in peers {
                if q.kops_runs.len() != k.kops_runs.len() {
                    continue;
                }
                let (logs, n) = cell.peers.entry(q.id.clone()).or_default();
                *n += 1;
                // A round in which either side did nothing has no ratio to
                // pool; klock's such rounds are counted apart.
                logs.extend(
                    k.kops_runs
                        .iter()
                        .zip(&q.kops_runs)
                        .filter(|&(&a, &b)| a > 0.0 && b > 0.0)
                        .map(|(&a, &b)| ratio(a, b).ln()),
                );
            }
            cell.klock_zero += k.kops_runs.iter().filter(|&&a| a <= 0.0).count();
        }
    }
    let mut out: Vec<((usize, usize), PooledRow)> = cells
        .into_iter()
        .filter_map(|(name, c)| {
            let (peer, (ratio, low, high), rounds, files) = c
                .peers
                .iter()
                .filter_map(|(p, (logs, n))| {
                    Some((p.clone(), geomean_interval(logs)?, logs.len(), *n))
                })
                .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))?;
            Some((
                c.order,
                PooledRow {
                    cell: name,
                    klock: c.klock.join(", "),
                    peer,
                    ratio,
                    low,
                    high,
                    rounds,
                    files,
                    klock_zero: c.klock_zero,
                },
            ))
        })
        .collect();
    if out.is_empty() {
        if let Some(p) = peer {
            let mut ran: Vec<&str> = files
                .iter()
                .flat_map(|(_, f)| &f.results)
                .map(|r| r.id.as_str())
                .filter(|&q| is_peer(suite, q) && Some(q) != subject)
                .collect();
            ran.sort_unstable();
            ran.dedup();
            return Err(format!(
                "nothing to pool: {p} did not run as a peer of klock's lock, or a variant of it, in these files (peers that ran: {})",
                ran.join(", ")
            ));
        }
        return Err(match notes.first() {
            Some(n) => format!("nothing to pool: {n}"),
            None => {
                "nothing to pool: no cell has two or more rounds of klock's lock and a peer".into()
            }
        });
    }
    out.sort_by_key(|(o, _)| *o);
    Ok(out.into_iter().map(|(_, r)| r).collect())
}

/// Read the files and print the pooled table.
pub fn reread_pooled(
    paths: &[std::path::PathBuf],
    subject: Option<&str>,
    peer: Option<&str>,
    json: Option<&std::path::Path>,
) -> Result<String, String> {
    let files = paths
        .iter()
        .map(|p| Ok((p.display().to_string(), super::load(p)?)))
        .collect::<Result<Vec<_>, String>>()?;
    let rows = pool(&files, subject, peer)?;
    let first = &files[0].1;
    let mut builds: Vec<String> = Vec::new();
    let mut machines: Vec<String> = Vec::new();
    for (_, f) in &files {
        let b = f.provenance.build().unwrap_or_else(|| "unknown".into());
        let m = format!("{} CPUs ({})", f.machine.cpus, f.machine.cpu_model);
        if !builds.contains(&b) {
            builds.push(b);
        }
        if !machines.contains(&m) {
            machines.push(m);
        }
    }
    if let Some(path) = json {
        let doc = PooledFile {
            suite: &first.suite,
            files: files.iter().map(|(n, _)| n.as_str()).collect(),
            builds: &builds,
            machines: &machines,
            subject,
            peer,
            cells: rows
                .iter()
                .map(|row| PooledCell {
                    row,
                    reads_as: match row.clear_win() {
                        Some(true) => "win",
                        Some(false) => "loss",
                        None => "not told apart",
                    },
                })
                .collect(),
        };
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {}", path.display(), super::io_reason(&e)))?;
    }
    let mut out = format!(
        "\n== {} — {} files pooled: {}; builds {}\n",
        first.suite,
        files.len(),
        machines.join(", "),
        builds.join(", ")
    );
    if machines.len() > 1 {
        // The header lists them; say what it means, where a reader of the
        // table looks before the rows.
        let _ = writeln!(
            out,
            "   note: these files come from {} different machines; each cell pools rounds made on all of them, so its interval spans the machines' differences as well as the locks'",
            machines.len()
        );
    }
    if let Some(s) = subject {
        let _ = writeln!(out, "   {s} judged as klock's default lock is");
    }
    let peer_head = if peer.is_some() {
        "peer"
    } else {
        "strongest peer"
    };
    let cell_head = if rows.iter().any(|r| r.cell.parse::<usize>().is_err()) {
        "kind"
    } else {
        "threads"
    };
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut reads = match r.clear_win() {
                Some(true) => "win".to_string(),
                Some(false) => "LOSS".to_string(),
                None => "not told apart".to_string(),
            };
            if r.klock_zero > 0 {
                let _ = write!(reads, ", klock did nothing in {} rounds", r.klock_zero);
            }
            vec![
                r.cell.clone(),
                r.klock.clone(),
                r.peer.clone(),
                fmt_ratio(r.ratio),
                format!("{}-{}", fmt_ratio(r.low), fmt_ratio(r.high)),
                format!("{} ({} files)", r.rounds, r.files),
                reads,
            ]
        })
        .collect();
    let _ = writeln!(
        out,
        "\nklock vs {peer_head}, rounds pooled: geometric mean of klock's run over the peer's run of the same round"
    );
    let head = [
        cell_head,
        "klock",
        peer_head,
        "ratio",
        "95% interval",
        "rounds",
        "reads as",
    ];
    out += &table(&head.map(String::from), &body);
    let count = |w: Option<bool>| rows.iter().filter(|r| r.clear_win() == w).count();
    let _ = writeln!(
        out,
        "  cells won: {}, lost: {}, not told apart: {} (the interval holds 1.00x)",
        count(Some(true)),
        count(Some(false)),
        count(None)
    );
    let _ = writeln!(
        out,
        "  `strongest peer`: of the peers, pooled each on its own, the one klock's ratio is lowest against. `95% interval`: of the geometric mean (Student's t over the rounds' logarithms). A cell reads as a win or a LOSS only when the whole interval is on that side of 1.00x; files of different builds or machines pool what changed between them too"
    );
    Ok(out)
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
