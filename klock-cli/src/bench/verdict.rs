//! The verdict under each suite's tables: klock's default lock against the
//! best peer that ran, thread count by thread count, so a reader sees at a
//! glance where klock wins and where it loses.
//!
//! Everything is computed from the suite's own result rows (kop/s and the
//! per-thread Min/Mean the Fairness section prints, both means over runs),
//! so the verdict compares locks measured in the same, interleaved runs.

// The verdict's types live beside the result file that carries them.
use super::report::{
    io_reason, placement_cut, rate, split_by_distance, table, thousands, ResultFile, ResultRow,
};
pub use super::report::{Rounds, Summary, Verdict, VerdictRow};
use super::stats::median;
use std::fmt::Write as _;
use std::path::Path;

/// The locks klock is judged against: what a program would use instead of
/// klock (std, parking_lot, glibc, and the two textbook spinlocks). klock's
/// own variants (`qspinlock-pl0`, `mutex-nospin`, ...) are never peers.
/// `pthread-pi` counts only in `pi-throughput`, where klock's lock is a
/// priority-inheritance lock too.
pub const PEERS: &[&str] = &[
    "std-mutex",
    "std-rwlock",
    "parking_lot",
    "parking_lot-rwlock",
    "pthread",
    "pthread-adaptive",
    "pthread-spin",
    "pthread-rwlock",
    "pthread-pi",
    "ticket",
    "ttas",
];

/// The peer that only counts in [`PI_THROUGHPUT`].
const PI_PEER: &str = "pthread-pi";
/// The suite where [`PI_PEER`] is a peer.
const PI_THROUGHPUT: &str = "pi-throughput";

/// The exclusive peers (every exclusive-lock suite runs them all).
pub const EXCLUSIVE_PEERS: &[&str] = &[
    "std-mutex",
    "parking_lot",
    "pthread",
    "pthread-adaptive",
    "pthread-spin",
    "ticket",
    "ttas",
];
/// The reader-writer peers (every rw suite runs them all).
pub const RW_PEERS: &[&str] = &["std-rwlock", "parking_lot-rwlock", "pthread-rwlock"];

/// A ratio at or above 1/(1 + this) is "within 10%" in the uncontended
/// verdict: klock's ns/op is at most 10% above the cheapest peer's.
const WITHIN: f64 = 0.10;
/// The geomean line covers the thread counts from this one up.
const GEOMEAN_FROM: usize = 4;

/// Whether `id` is a peer in `suite`.
pub fn is_peer(suite: &str, id: &str) -> bool {
    PEERS.contains(&id) && (id != PI_PEER || suite == PI_THROUGHPUT)
}

/// One kind of the uncontended verdict: a klock lock against the cheapest
/// peer of the same kind.
#[derive(Clone, Copy)]
struct Kind<'a> {
    name: &'static str,
    klock: &'a str,
    peers: &'static [&'static str],
}

const UNCONTENDED: &[Kind<'static>] = &[
    Kind {
        name: "spinlock",
        klock: "qspinlock",
        peers: &["pthread-spin", "ticket", "ttas"],
    },
    Kind {
        name: "mutex",
        klock: "mutex",
        peers: &["std-mutex", "parking_lot", "pthread", "pthread-adaptive"],
    },
    Kind {
        name: "rwlock",
        klock: "qrwlock",
        peers: RW_PEERS,
    },
    Kind {
        name: "rwsem",
        klock: "rwsem",
        peers: RW_PEERS,
    },
];

/// Suites whose run also holds another klock lock a reader should see
/// judged beside the default one: (suite, lock id, type name). The
/// verdict still judges the default; this lock gets one line after it.
const ALSO: &[(&str, &str, &str)] = &[("rwlock", "rwsem", "RwSem")];

/// One line for `ALSO`'s lock of `file`'s suite, if it ran: its ratio to
/// the fastest peer at each thread count (the same peer as the table's
/// row: neither lock is a peer), and where its whole table is.
fn also_line(file: &ResultFile) -> Option<String> {
    let &(_, id, name) = ALSO.iter().find(|(s, _, _)| *s == file.suite)?;
    let v = compute_for(&file.suite, &file.results, Some(id))?;
    if v.rows.is_empty() || v.note.is_some() {
        return None;
    }
    let cells: Vec<String> = v
        .rows
        .iter()
        .map(|r| format!("{}: {}", r.threads, fmt_ratio(r.ratio)))
        .collect();
    Some(format!(
        "  klock's {name} (`{id}`) in the same runs, against the same peers: {}; \
         `klock verdict --lock {id} FILE` prints its table\n",
        cells.join(", ")
    ))
}

/// klock's side of a suite's verdict.
enum Judge<'a> {
    /// This lock at every thread count.
    Lock(&'a str),
    /// The fastest of these at each thread count (treelock: klock offers
    /// a spinlock, an rwlock and an rwsem for the index).
    BestOf(&'static [&'static str]),
    /// One row per kind, in ns/op (the uncontended suite).
    Kinds(Vec<Kind<'a>>),
}

/// klock's default lock(s) of `suite`; `None` for suites without a rate
/// table (`pi`, `ctxswitch`).
fn judge(suite: &str) -> Option<Judge<'static>> {
    Some(match suite {
        "spinlock" => Judge::Lock("qspinlock"),
        "mutex" => Judge::Lock("mutex"),
        "rwlock" => Judge::Lock("qrwlock"),
        "rwsem-rate" | "rwsem-dedicated" | "rwsem-pagefault" => Judge::Lock("rwsem"),
        "treelock" => Judge::BestOf(&["qspinlock", "qrwlock", "rwsem"]),
        PI_THROUGHPUT => Judge::Lock("rtmutex"),
        "uncontended" => Judge::Kinds(UNCONTENDED.to_vec()),
        _ => return None,
    })
}

/// The ratio as printed (two decimals): a row printed `1.00x` is no loss.
fn shown(ratio: f64) -> f64 {
    (ratio * 100.0).round() / 100.0
}

fn ratio(klock: f64, peer: f64) -> f64 {
    if peer > 0.0 {
        klock / peer
    } else if klock > 0.0 {
        f64::INFINITY
    } else {
        // Neither finished an operation: klock did not do better.
        0.0
    }
}

fn ns_per_op(r: &ResultRow) -> f64 {
    1e6 / r.kops_mean.max(1e-9)
}

fn row(k: &ResultRow, p: &ResultRow) -> VerdictRow {
    let ratio = ratio(k.kops_mean, p.kops_mean);
    VerdictRow {
        threads: k.threads,
        klock_lock: k.id.clone(),
        klock_kops: k.kops_mean,
        klock_per_thread_min: k.per_thread_min,
        klock_per_thread_mean: k.per_thread_mean,
        peer_lock: p.id.clone(),
        peer_kops: p.kops_mean,
        peer_per_thread_min: p.per_thread_min,
        peer_per_thread_mean: p.per_thread_mean,
        ratio,
        loss: shown(ratio) < 1.0,
        starved: k.per_thread_min == 0,
        peer_starved: p.per_thread_min == 0,
        kind: None,
        klock_ns_per_op: None,
        peer_ns_per_op: None,
        within_10pct: None,
        same_distance_ratio: None,
        same_distance_peer: None,
        rounds: rounds(k, p),
        held_out: None,
    }
}

/// klock's rate over the best peer's, each side's best chosen without the
/// round it is scored on (see [`VerdictRow::held_out`]): for round *i*,
/// the fastest of `klocks` and the fastest of `peers` by their mean over
/// the other rounds, then run *i* of each; the ratio of the sums. `None`
/// unless every row has the same two or more runs.
fn held_out(klocks: &[&ResultRow], peers: &[&ResultRow]) -> Option<f64> {
    let n = klocks.first()?.kops_runs.len();
    if n < 2 || peers.is_empty() || klocks.iter().chain(peers).any(|r| r.kops_runs.len() != n) {
        return None;
    }
    // The sum of the other rounds ranks as their mean does (same count).
    let others = |r: &ResultRow, i: usize| r.kops_runs.iter().sum::<f64>() - r.kops_runs[i];
    let pick = |rows: &[&ResultRow], i: usize| {
        rows.iter()
            .max_by(|a, b| others(a, i).total_cmp(&others(b, i)))
            .map_or(0.0, |r| r.kops_runs[i])
    };
    let (k, p) = (0..n).fold((0.0, 0.0), |(k, p), i| {
        (k + pick(klocks, i), p + pick(peers, i))
    });
    Some(ratio(k, p))
}

/// `k`'s rate over `p`'s round by round: run *i* of each was made in
/// round *i*, back to back with the other's (see [`Rounds`]). `None`
/// unless both have the same two or more runs.
fn rounds(k: &ResultRow, p: &ResultRow) -> Option<Rounds> {
    let (a, b) = (&k.kops_runs, &p.kops_runs);
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let ratios: Vec<f64> = a.iter().zip(b).map(|(&x, &y)| ratio(x, y)).collect();
    Some(Rounds {
        won: ratios.iter().filter(|&&r| shown(r) >= 1.0).count(),
        of: ratios.len(),
        min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
        max: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// `k`'s rate over `p`'s from runs at the same CPU distance (`cut`: the
/// round trip that splits near from far, [`placement_cut`]): the ratio of
/// the medians of the near runs, the same of the far runs, and the
/// geometric mean of those that exist; `None` when the two locks share
/// no distance.
fn same_distance(k: &ResultRow, p: &ResultRow, cut: f64) -> Option<f64> {
    let (kn, kf) = split_by_distance(k, cut);
    let (pn, pf) = split_by_distance(p, cut);
    let ratios: Vec<f64> = [(kn, pn), (kf, pf)]
        .iter()
        .filter_map(|(a, b)| Some(ratio(median(a)?, median(b)?)))
        .collect();
    (!ratios.is_empty())
        .then(|| (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp())
}

/// The fastest of `rows` (by mean kop/s).
fn fastest<'a>(rows: &[&'a ResultRow]) -> Option<&'a ResultRow> {
    rows.iter()
        .copied()
        .max_by(|a, b| a.kops_mean.total_cmp(&b.kops_mean))
}

/// The verdict of `suite` from its result rows; `None` for a suite
/// without one.
pub fn compute(suite: &str, rows: &[ResultRow]) -> Option<Verdict> {
    compute_for(suite, rows, None)
}

/// [`compute`], or with `subject` the verdict of that lock (any lock of
/// the file, a peer too) judged as klock's default lock is: against the
/// fastest of the *other* peers at each thread count (uncontended: the
/// cheapest other peer of its kind; a subject of no kind gets a note).
/// `None` for a suite without a verdict.
pub fn compute_for(suite: &str, rows: &[ResultRow], subject: Option<&str>) -> Option<Verdict> {
    let judge = match (judge(suite)?, subject) {
        (j, None) => j,
        (Judge::Kinds(kinds), Some(s)) => {
            match kinds.iter().find(|k| k.klock == s || k.peers.contains(&s)) {
                Some(kind) => Judge::Kinds(vec![Kind { klock: s, ..*kind }]),
                None => {
                    return Some(Verdict {
                        note: Some(format!("{s} is of no kind of the uncontended verdict")),
                        subject: Some(s.into()),
                        ..Verdict::default()
                    })
                }
            }
        }
        (_, Some(s)) => Judge::Lock(s),
    };
    let peer = |id: &str| is_peer(suite, id) && Some(id) != subject;
    let mut out = Vec::new();
    let klock_names: Vec<&str> = match &judge {
        Judge::Lock(l) => vec![l],
        Judge::BestOf(ls) => ls.to_vec(),
        Judge::Kinds(kinds) => kinds.iter().map(|k| k.klock).collect(),
    };
    match &judge {
        Judge::Kinds(kinds) => {
            for kind in kinds.iter() {
                let klocks: Vec<&ResultRow> = rows.iter().filter(|r| r.id == kind.klock).collect();
                let peers: Vec<&ResultRow> = rows
                    .iter()
                    .filter(|r| kind.peers.contains(&r.id.as_str()) && peer(&r.id))
                    .collect();
                if let (Some(k), Some(p)) = (fastest(&klocks), fastest(&peers)) {
                    out.push(VerdictRow {
                        kind: Some(kind.name.into()),
                        held_out: held_out(&[k], &peers),
                        klock_ns_per_op: Some(ns_per_op(k)),
                        peer_ns_per_op: Some(ns_per_op(p)),
                        within_10pct: Some(ns_per_op(k) <= (1.0 + WITHIN) * ns_per_op(p)),
                        ..row(k, p)
                    });
                }
            }
        }
        Judge::Lock(_) | Judge::BestOf(_) => {
            let mut threads: Vec<usize> = rows.iter().map(|r| r.threads).collect();
            threads.sort_unstable();
            threads.dedup();
            let cut = placement_cut(rows);
            for t in threads {
                let at = || rows.iter().filter(move |r| r.threads == t);
                let klocks: Vec<&ResultRow> = at()
                    .filter(|r| klock_names.contains(&r.id.as_str()))
                    .collect();
                let peers: Vec<&ResultRow> = at().filter(|r| peer(&r.id)).collect();
                if let (Some(k), Some(p)) = (fastest(&klocks), fastest(&peers)) {
                    let mut r = row(k, p);
                    r.held_out = held_out(&klocks, &peers);
                    // Against every peer at the same distance: the
                    // strongest one there need not be the fastest on
                    // average over both distances.
                    if let Some(cut) = cut {
                        if let Some((q, id)) = peers
                            .iter()
                            .filter_map(|q| Some((same_distance(k, q, cut)?, &q.id)))
                            .min_by(|a, b| a.0.total_cmp(&b.0))
                        {
                            r.same_distance_ratio = Some(q);
                            r.same_distance_peer = Some(id.clone());
                        }
                    }
                    out.push(r);
                }
            }
        }
    }
    if out.is_empty() {
        let ran = |id: &str| rows.iter().any(|r| r.id == id);
        let note = if let Some(s) = subject.filter(|s| !ran(s)) {
            format!("{s} did not run in this suite")
        } else if !klock_names.iter().any(|l| ran(l)) {
            format!(
                "klock's default lock ({}) did not run: add it to --locks for a verdict",
                klock_names.join(", ")
            )
        } else if !rows.iter().any(|r| peer(&r.id)) {
            format!(
                "no peer ran: add one of {} to --locks for a verdict",
                PEERS
                    .iter()
                    .filter(|p| peer(p))
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            // Uncontended: a klock lock and a peer ran, but of different kinds.
            "no klock lock ran with a peer of its kind".into()
        };
        return Some(Verdict {
            note: Some(note),
            subject: subject.map(String::from),
            ..Verdict::default()
        });
    }
    let from = match judge {
        Judge::Kinds(_) => 0,
        _ => GEOMEAN_FROM,
    };
    let sel: Vec<&VerdictRow> = out.iter().filter(|r| r.threads >= from).collect();
    let summary = Summary {
        geomean: (!sel.is_empty())
            .then(|| (sel.iter().map(|r| r.ratio.ln()).sum::<f64>() / sel.len() as f64).exp()),
        geomean_threads: sel
            .first()
            .zip(sel.last())
            .map(|(a, b)| (a.threads, b.threads)),
        won: out.iter().filter(|r| !r.loss).count(),
        lost: out.iter().filter(|r| r.loss).count(),
        starved: out.iter().filter(|r| r.starved).count(),
        peer_starved: out.iter().filter(|r| r.peer_starved).count(),
        same_distance_won: same_distance_count(&out, true),
        same_distance_lost: same_distance_count(&out, false),
        lost_every_round: out.iter().any(|r| r.rounds.is_some()).then(|| {
            out.iter()
                .filter(|r| r.loss && r.rounds.is_some_and(|q| q.won == 0))
                .count()
        }),
        held_out_won: held_out_count(&out, true),
        held_out_lost: held_out_count(&out, false),
    };
    Some(Verdict {
        rows: out,
        summary: Some(summary),
        note: None,
        subject: subject.map(String::from),
    })
}

/// Rows whose same-distance ratio is a win (`won`) or a loss; `None`
/// when no row has one.
fn same_distance_count(rows: &[VerdictRow], won: bool) -> Option<usize> {
    let sd: Vec<f64> = rows.iter().filter_map(|r| r.same_distance_ratio).collect();
    (!sd.is_empty()).then(|| sd.iter().filter(|&&q| (shown(q) >= 1.0) == won).count())
}

/// Rows whose held-out ratio is a win (`won`) or a loss; `None` when no
/// row has one.
fn held_out_count(rows: &[VerdictRow], won: bool) -> Option<usize> {
    let h: Vec<f64> = rows.iter().filter_map(|r| r.held_out).collect();
    (!h.is_empty()).then(|| h.iter().filter(|&&q| (shown(q) >= 1.0) == won).count())
}

/// The verdict of a saved result file (`klock verdict FILE`), computed
/// again from its rows by this build's rules: a line naming the suite,
/// the file, its machine and the build that made it, then the table.
///
/// With `subject`, the verdict of that lock instead, judged as klock's
/// default lock is against the other peers ([`compute_for`]): a control
/// that shows what the same rule makes of a peer on the same runs.
pub fn reread(path: &Path, subject: Option<&str>) -> Result<String, String> {
    let mut file = load(path)?;
    file.verdict = compute_for(&file.suite, &file.results, subject).unwrap_or_default();
    let build = file
        .provenance
        .build()
        .map_or(String::new(), |b| format!(", build {b}"));
    let mut out = format!(
        "\n== {} — {}: {} CPUs ({}){build}\n",
        file.suite,
        path.display(),
        file.machine.cpus,
        file.machine.cpu_model
    );
    if !file.workload.is_empty() {
        let _ = writeln!(out, "   {}", file.workload);
    }
    match render(&file) {
        v if v.is_empty() => {
            let _ = writeln!(out, "\nno verdict: the `{}` suite has none", file.suite);
        }
        v => out += &v,
    }
    Ok(out)
}

/// Read a result file written by `klock bench --json`.
fn load(path: &Path) -> Result<ResultFile, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read {}: {}", path.display(), io_reason(&e)))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}: not a `klock bench` result file ({e})", path.display()))
}

/// Fill the file's verdict from its rows.
pub fn attach(file: &mut ResultFile) {
    file.verdict = compute(&file.suite, &file.results).unwrap_or_default();
}

fn fmt_ratio(r: f64) -> String {
    if r.is_finite() {
        format!("{:.2}x", shown(r))
    } else {
        "inf".into()
    }
}

fn marks(r: &VerdictRow) -> String {
    let mut m = Vec::new();
    if r.loss {
        m.push("LOSS");
    }
    if r.starved {
        m.push("STARVED");
    }
    if r.peer_starved {
        m.push("PEER-STARVED");
    }
    m.join(" ")
}

/// `won/of (min-max)`, or `-` for a row without rounds.
fn fmt_rounds(q: Option<Rounds>) -> String {
    match q {
        Some(q) if q.min.is_finite() && q.max.is_finite() => format!(
            "{}/{} ({:.2}-{:.2}x)",
            q.won,
            q.of,
            shown(q.min),
            shown(q.max)
        ),
        Some(q) => format!("{}/{}", q.won, q.of),
        None => "-".into(),
    }
}

fn min_mean(min: u64, mean: f64) -> String {
    format!("{}/{}", thousands(min as f64), thousands(mean))
}

/// The verdict table and its summary line; empty for suites without one.
pub fn render(file: &ResultFile) -> String {
    let v = &file.verdict;
    let mut out = String::new();
    if let Some(note) = &v.note {
        let who = v.subject.as_deref().unwrap_or("klock");
        let _ = writeln!(out, "\n{who} vs best peer: no verdict: {note}");
        return out;
    }
    let Some(s) = &v.summary else {
        return out;
    };
    let kinds = v.rows.iter().any(|r| r.kind.is_some());
    let by_round = s.lost_every_round.is_some();
    let held = s.held_out_won.is_some();
    if kinds {
        out += &match &v.subject {
            None => "\nklock vs best peer, uncontended: each klock lock against the cheapest peer \
                     of its kind, ns/op (ratio = peer ns / klock ns: 1.00x or more, klock costs \
                     no more)\n"
                .to_string(),
            Some(l) => format!(
                "\n{l} vs best peer, uncontended: {l} judged as klock's lock is, against the \
                 cheapest other peer of its kind, ns/op (ratio = peer ns / {l} ns: 1.00x or \
                 more, {l} costs no more)\n"
            ),
        };
        let mut header: Vec<String> = [
            "kind",
            "klock",
            "ns/op",
            "cheapest peer",
            "ns/op",
            "ratio",
            "within 10%",
            "",
        ]
        .map(String::from)
        .to_vec();
        if by_round {
            header.push("rounds won".into());
        }
        if held {
            header.push("held out".into());
        }
        let body: Vec<Vec<String>> = v
            .rows
            .iter()
            .map(|r| {
                let mut cells = vec![
                    r.kind.clone().unwrap_or_default(),
                    r.klock_lock.clone(),
                    format!("{:.1}", r.klock_ns_per_op.unwrap_or(f64::NAN)),
                    r.peer_lock.clone(),
                    format!("{:.1}", r.peer_ns_per_op.unwrap_or(f64::NAN)),
                    fmt_ratio(r.ratio),
                    if r.within_10pct == Some(true) {
                        "yes"
                    } else {
                        "no"
                    }
                    .into(),
                    marks(r),
                ];
                if by_round {
                    cells.push(fmt_rounds(r.rounds));
                }
                if held {
                    cells.push(r.held_out.map_or("-".into(), fmt_ratio));
                }
                cells
            })
            .collect();
        out += &table(&header, &body);
    } else {
        out += &match &v.subject {
            None => "\nklock vs best peer: klock's default lock against the fastest peer at each \
                     thread count, kop/s (ratio = klock / peer: 1.00x or more, klock did at \
                     least as well); operations per thread Min/Mean as in Fairness, mean over \
                     runs\n"
                .to_string(),
            Some(l) => format!(
                "\n{l} vs best peer: {l} judged as klock's default lock is, against the fastest \
                 other peer at each thread count, kop/s (ratio = {l} / peer: 1.00x or more, {l} \
                 did at least as well); operations per thread Min/Mean as in Fairness, mean over \
                 runs\n"
            ),
        };
        let moved = s.same_distance_won.is_some();
        let mut header: Vec<String> = [
            "threads",
            "klock",
            "kop/s",
            "Min/Mean",
            "best peer",
            "kop/s",
            "Min/Mean",
            "ratio",
            "",
        ]
        .map(String::from)
        .to_vec();
        if by_round {
            header.push("rounds won".into());
        }
        if held {
            header.push("held out".into());
        }
        if moved {
            header.push("same CPU distance".into());
        }
        let body: Vec<Vec<String>> = v
            .rows
            .iter()
            .map(|r| {
                let mut cells = vec![
                    r.threads.to_string(),
                    r.klock_lock.clone(),
                    rate(r.klock_kops),
                    min_mean(r.klock_per_thread_min, r.klock_per_thread_mean),
                    r.peer_lock.clone(),
                    rate(r.peer_kops),
                    min_mean(r.peer_per_thread_min, r.peer_per_thread_mean),
                    fmt_ratio(r.ratio),
                    marks(r),
                ];
                if by_round {
                    cells.push(fmt_rounds(r.rounds));
                }
                if held {
                    cells.push(r.held_out.map_or("-".into(), fmt_ratio));
                }
                if moved {
                    cells.push(match (r.same_distance_ratio, &r.same_distance_peer) {
                        (Some(q), Some(p)) if *p == r.peer_lock => fmt_ratio(q),
                        (Some(q), Some(p)) => format!("{} ({p})", fmt_ratio(q)),
                        _ => "-".into(),
                    });
                }
                cells
            })
            .collect();
        out += &table(&header, &body);
    }
    let geo = match (s.geomean, s.geomean_threads) {
        (Some(g), Some(_)) if kinds => {
            format!("geomean of ratios over the kinds: {}", fmt_ratio(g))
        }
        (Some(g), Some((a, b))) if a == b => {
            format!("geomean of ratios at {a} threads: {}", fmt_ratio(g))
        }
        (Some(g), Some((a, b))) => {
            format!("geomean of ratios at {a}-{b} threads: {}", fmt_ratio(g))
        }
        _ => format!("geomean of ratios: no thread count of {GEOMEAN_FROM} or more ran"),
    };
    let every = match s.lost_every_round {
        Some(n) => format!(" (lost in every round: {n})"),
        None => String::new(),
    };
    let peer = match s.peer_starved {
        0 => String::new(),
        n => format!(" (the peer starved a thread: {n})"),
    };
    let _ = writeln!(
        out,
        "  {geo}; cells won/lost: {}/{}{every}; starved: {}{peer}",
        s.won, s.lost, s.starved
    );
    // Beside the summary it qualifies, before the footnotes.
    if v.subject.is_none() {
        if let Some(line) = also_line(file) {
            out += &line;
        }
    }
    if by_round {
        out += "  `rounds won`: the runs are made in rounds, each lock once per round, back to \
                back; of the rounds, how many klock's run won against the peer's run of the \
                same round, and the lowest and highest ratio of a round. A loss that some \
                round won is one the runs do not agree on: more --runs tell it apart, or \
                `klock verdict --pool` over the JSON files of several runs\n";
    }
    if let (Some(w), Some(l)) = (s.held_out_won, s.held_out_lost) {
        let _ = writeln!(
            out,
            "  `held out`: the best peer picked for each round by its mean over the other \
             rounds only, then klock's runs over those picks' runs (ratio of the sums). The \
             fastest of several peers' means is partly the fastest by its noise, so against \
             peers that tie with klock `ratio` reads below 1.00x more often than not; this \
             ratio has no such pull (the cells are still judged by `ratio`); won/lost by \
             it: {w}/{l}"
        );
    }
    if let (Some(w), Some(l)) = (s.same_distance_won, s.same_distance_lost) {
        let _ = writeln!(
            out,
            "  The host moved its CPUs during the suite (see the cache-line round trip above), \
             so some of these ratios compare runs made at different CPU distances. \
             `same CPU distance`: klock's median over the peer's median from runs at the same \
             distance (near with near, far with far; the geometric mean where both exist), \
             against the peer for which it is lowest; won/lost by it: {w}/{l}"
        );
    }
    out
}

mod pool;
pub use pool::{pool, reread_pooled, PooledRow};

#[cfg(test)]
mod tests;
