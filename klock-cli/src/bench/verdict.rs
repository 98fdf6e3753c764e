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

/// The fastest of `rows` (by mean kop/s) that `pick` accepts.
fn fastest<'a>(
    rows: impl Iterator<Item = &'a ResultRow>,
    pick: impl Fn(&str) -> bool,
) -> Option<&'a ResultRow> {
    rows.filter(|r| pick(&r.id))
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
/// cheapest other peer of its kind). `None` for a suite without a
/// verdict, or an uncontended subject of no kind.
pub fn compute_for(suite: &str, rows: &[ResultRow], subject: Option<&str>) -> Option<Verdict> {
    let judge = match (judge(suite)?, subject) {
        (j, None) => j,
        (Judge::Kinds(kinds), Some(s)) => {
            let kind = kinds
                .iter()
                .find(|k| k.klock == s || k.peers.contains(&s))?;
            Judge::Kinds(vec![Kind { klock: s, ..*kind }])
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
                let k = fastest(rows.iter(), |id| id == kind.klock);
                let p = fastest(rows.iter(), |id| kind.peers.contains(&id) && peer(id));
                if let (Some(k), Some(p)) = (k, p) {
                    let peers: Vec<&ResultRow> = rows
                        .iter()
                        .filter(|r| kind.peers.contains(&r.id.as_str()) && peer(&r.id))
                        .collect();
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
                let k = fastest(at(), |id| klock_names.contains(&id));
                if let (Some(k), Some(p)) = (k, fastest(at(), peer)) {
                    let mut r = row(k, p);
                    let klocks: Vec<&ResultRow> = at()
                        .filter(|r| klock_names.contains(&r.id.as_str()))
                        .collect();
                    let peers: Vec<&ResultRow> = at().filter(|r| peer(&r.id)).collect();
                    r.held_out = held_out(&klocks, &peers);
                    // Against every peer at the same distance: the
                    // strongest one there need not be the fastest on
                    // average over both distances.
                    if let Some(cut) = cut {
                        if let Some((q, id)) = at()
                            .filter(|q| peer(&q.id))
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
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read {}: {}", path.display(), io_reason(&e)))?;
    let mut file: ResultFile = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}: not a `klock bench` result file ({e})", path.display()))?;
    file.verdict = match compute_for(&file.suite, &file.results, subject) {
        Some(v) => v,
        None if subject.is_some() && judge(&file.suite).is_some() => Verdict {
            note: Some(format!(
                "{} is of no kind of the uncontended verdict",
                subject.unwrap_or_default()
            )),
            subject: subject.map(String::from),
            ..Verdict::default()
        },
        None => Verdict::default(),
    };
    let p = &file.provenance;
    let build = match (p.git_commit.as_str(), p.git_dirty) {
        ("", _) => String::new(),
        (c, Some(true)) => format!(", build {c} with changes"),
        (c, _) => format!(", build {c}"),
    };
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
    let _ = writeln!(
        out,
        "  {geo}; cells won/lost: {}/{}{every}; starved: {}",
        s.won, s.lost, s.starved
    );
    if by_round {
        out += "  `rounds won`: the runs are made in rounds, each lock once per round, back to \
                back; of the rounds, how many klock's run won against the peer's run of the \
                same round, and the lowest and highest ratio of a round. A loss that some \
                round won is one the runs do not agree on: more --runs tell it apart\n";
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::test_rows::row_at;
    use crate::bench::report::Machine;
    use crate::bench::suites::specs;
    use crate::bench::workload::{Role, RunOutcome};

    /// A row of `id` at `threads` writers doing `kops` kop/s in one 1 s
    /// run; the first thread does `first` of the operations, the others
    /// share the rest.
    fn row_with(id: &str, threads: usize, kops: f64, first: u64) -> ResultRow {
        let total = (kops * 1e3) as u64;
        let mut per: Vec<(Role, u64)> = vec![(Role::Writer, first)];
        for i in 1..threads {
            let rest = total - first;
            let share = rest / (threads as u64 - 1);
            let extra = if i == threads - 1 {
                rest - share * (threads as u64 - 1)
            } else {
                0
            };
            per.push((Role::Writer, share + extra));
        }
        let run = RunOutcome {
            elapsed_s: 1.0,
            per_thread: per,
            cpu_s: 1.0,
            ctx_voluntary: 0,
            ctx_involuntary: 0,
            events: vec![],
            xfer_ns: (None, None),
        };
        ResultRow::aggregate(id, id, "default", 0, threads, &[run])
    }

    /// When the host moved its CPUs between runs, each row also compares
    /// runs made at the same distance, against the peer that is strongest
    /// there; without a move there is no such column.
    #[test]
    fn same_distance_ratio_compares_near_with_near_and_far_with_far() {
        let (near, far) = (80.0, 400.0);
        let f = file(
            "mutex",
            vec![
                // klock: one near run, one far run (mean 75).
                row_at("mutex", 4, &[(100.0, near), (50.0, far)]),
                // The fastest peer on average (110), near runs only.
                row_at("std-mutex", 4, &[(110.0, near), (110.0, near)]),
                // A slower peer on average, far runs only.
                row_at("parking_lot", 4, &[(40.0, far), (40.0, far)]),
                // At 8 threads klock's near runs beat the peer's near runs,
                // and the peer has a far run klock lacks.
                row_at("mutex", 8, &[(120.0, near), (120.0, near)]),
                row_at("std-mutex", 8, &[(100.0, near), (200.0, far)]),
            ],
        );
        let v = &f.verdict;
        let r4 = &v.rows[0];
        assert_eq!(r4.peer_lock, "std-mutex");
        assert!(r4.loss, "75 against 110 on average");
        let q4 = r4.same_distance_ratio.unwrap();
        assert!((q4 - 100.0 / 110.0).abs() < 1e-3, "{q4}: near with near");
        assert_eq!(r4.same_distance_peer.as_deref(), Some("std-mutex"));
        let q8 = v.rows[1].same_distance_ratio.unwrap();
        assert!((q8 - 1.2).abs() < 1e-3, "{q8}: the far run has no partner");
        let s = v.summary.as_ref().unwrap();
        assert_eq!(
            (s.same_distance_won, s.same_distance_lost),
            (Some(1), Some(1))
        );
        let text = render(&f);
        assert!(text.contains("same CPU distance"), "{text}");
        assert!(text.contains("won/lost by it: 1/1"), "{text}");
        let json = serde_json::to_string(&f).unwrap();
        assert!(json.contains("\"same_distance_ratio\""), "{json}");

        // The parking_lot peer is stronger than std at the far distance:
        // it is the one named.
        let f = file(
            "mutex",
            vec![
                row_at("mutex", 4, &[(100.0, near), (50.0, far)]),
                row_at("std-mutex", 4, &[(110.0, near), (110.0, near)]),
                row_at("parking_lot", 4, &[(90.0, far), (90.0, far)]),
            ],
        );
        let r = &f.verdict.rows[0];
        assert_eq!(r.same_distance_peer.as_deref(), Some("parking_lot"));
        assert!(render(&f).contains("0.56x (parking_lot)"), "{}", render(&f));

        // No move: no column, no fields.
        let f = file(
            "mutex",
            vec![
                row_at("mutex", 4, &[(100.0, near), (90.0, near)]),
                row_at("std-mutex", 4, &[(110.0, near), (110.0, near)]),
            ],
        );
        assert_eq!(f.verdict.rows[0].same_distance_ratio, None);
        assert!(!render(&f).contains("same CPU distance"));
        assert!(!serde_json::to_string(&f).unwrap().contains("same_distance"));
    }

    fn row(id: &str, threads: usize, kops: f64) -> ResultRow {
        let total = (kops * 1e3) as u64;
        row_with(id, threads, kops, total / threads as u64)
    }

    fn file(suite: &str, results: Vec<ResultRow>) -> ResultFile {
        let mut f = ResultFile {
            suite: suite.into(),
            machine: Machine {
                cpus: 2,
                cpu_model: "test".into(),
                kernel: "test".into(),
            },
            results,
            title: String::new(),
            workload: String::new(),
            provenance: Default::default(),
            verdict: Verdict::default(),
        };
        attach(&mut f);
        f
    }

    #[test]
    fn best_peer_is_the_fastest_peer_and_variants_never_count() {
        let rows = vec![
            row("qspinlock", 1, 100.0),
            row("qspinlock-pl0", 1, 500.0), // klock variant: never a peer
            row("ttas", 1, 80.0),
            row("ticket", 1, 90.0),
            row("qspinlock", 4, 50.0),
            row("qspinlock-pl0", 4, 500.0),
            row("ttas", 4, 10.0),
            row("parking_lot", 4, 60.0),
        ];
        let v = compute("spinlock", &rows).unwrap();
        assert_eq!(v.rows.len(), 2);
        let (a, b) = (&v.rows[0], &v.rows[1]);
        assert_eq!((a.threads, a.klock_lock.as_str()), (1, "qspinlock"));
        assert_eq!(a.peer_lock, "ticket");
        assert!((a.ratio - 100.0 / 90.0).abs() < 1e-12);
        assert!(!a.loss);
        assert_eq!(b.peer_lock, "parking_lot");
        assert!((b.ratio - 50.0 / 60.0).abs() < 1e-12);
        assert!(b.loss);
        let s = v.summary.unwrap();
        assert_eq!((s.won, s.lost, s.starved), (1, 1, 0));
        // Only 4 threads is at or above 4: the geomean is its ratio.
        assert_eq!(s.geomean_threads, Some((4, 4)));
        assert!((s.geomean.unwrap() - 50.0 / 60.0).abs() < 1e-12);
    }

    #[test]
    fn pthread_pi_is_a_peer_in_pi_throughput_only() {
        assert!(is_peer("pi-throughput", "pthread-pi"));
        assert!(!is_peer("mutex", "pthread-pi"));
        assert!(!is_peer("mutex", "mutex-nospin"));
        assert!(!is_peer("pi-throughput", "pi-futex"));
        let rows = vec![
            row("mutex", 2, 100.0),
            row("pthread-pi", 2, 200.0),
            row("pthread", 2, 50.0),
        ];
        assert_eq!(
            compute("mutex", &rows).unwrap().rows[0].peer_lock,
            "pthread"
        );
        let rows = vec![
            row("rtmutex", 2, 100.0),
            row("pthread-pi", 2, 200.0),
            row("pi-futex", 2, 300.0),
        ];
        let v = compute("pi-throughput", &rows).unwrap();
        assert_eq!(v.rows[0].peer_lock, "pthread-pi");
        assert!((v.rows[0].ratio - 0.5).abs() < 1e-12);
    }

    #[test]
    fn treelock_takes_klocks_best_default_per_row() {
        let rows = vec![
            row("qspinlock", 1, 300.0),
            row("qrwlock", 1, 200.0),
            row("rwsem", 1, 100.0),
            row("std-mutex", 1, 250.0),
            row("qspinlock", 4, 100.0),
            row("qrwlock", 4, 400.0),
            row("rwsem", 4, 350.0),
            row("pthread-rwlock", 4, 380.0),
            row("std-mutex", 4, 200.0),
        ];
        let v = compute("treelock", &rows).unwrap();
        let got: Vec<(usize, &str, &str)> = v
            .rows
            .iter()
            .map(|r| (r.threads, r.klock_lock.as_str(), r.peer_lock.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (1, "qspinlock", "std-mutex"),
                (4, "qrwlock", "pthread-rwlock")
            ]
        );
        let text = render(&file("treelock", rows));
        assert!(text.contains("klock vs best peer"), "{text}");
        assert!(text.contains("1.20x"), "{text}");
        assert!(text.contains("1.05x"), "{text}");
        assert!(
            text.contains("geomean of ratios at 4 threads: 1.05x"),
            "{text}"
        );
        assert!(text.contains("cells won/lost: 2/0; starved: 0"), "{text}");
        assert!(!text.contains("LOSS"), "{text}");
    }

    #[test]
    fn geomean_covers_four_threads_up_and_marks_show() {
        // Ratios 2 (1 thread), 0.5 (4), 2 (8), 1 (16): geomean at 4-16 is 1.
        let rows = vec![
            row("mutex", 1, 200.0),
            row("pthread", 1, 100.0),
            row("mutex", 4, 50.0),
            row("pthread", 4, 100.0),
            row("mutex", 8, 200.0),
            row("pthread", 8, 100.0),
            row_with("mutex", 16, 100.0, 0), // one thread did nothing
            row("pthread", 16, 100.0),
        ];
        let f = file("mutex", rows);
        let s = f.verdict.summary.clone().unwrap();
        assert_eq!(s.geomean_threads, Some((4, 16)));
        assert!((s.geomean.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!((s.won, s.lost, s.starved), (3, 1, 1));
        let text = render(&f);
        let line = |t: &str| {
            text.lines()
                .find(|l| l.split_whitespace().next() == Some(t))
                .unwrap_or_else(|| panic!("no row {t}:\n{text}"))
                .to_string()
        };
        let tail = |t: &str| {
            let l = line(t);
            let w: Vec<&str> = l.split_whitespace().collect();
            w[w.len().saturating_sub(2)..].join(" ")
        };
        assert!(tail("1").ends_with(" 2.00x"), "{text}");
        assert_eq!(tail("4"), "0.50x LOSS", "{text}");
        assert_eq!(tail("8"), "12,500/12,500 2.00x", "{text}");
        assert_eq!(tail("16"), "1.00x STARVED", "{text}");
        // The per-thread Min/Mean of both sides: 100 kop in 1 s over 16
        // threads, one of klock's threads doing none.
        assert!(line("16").contains(" 0/6,250 "), "{text}");
        assert!(line("16").contains(" 6,250/6,250 "), "{text}");
        assert!(
            text.contains(
                "geomean of ratios at 4-16 threads: 1.00x; cells won/lost: 3/1; starved: 1"
            ),
            "{text}"
        );
    }

    /// Run *i* of klock's lock is compared with run *i* of the peer:
    /// the rounds won, the lowest and highest ratio, and the losses that
    /// every round agrees on; nothing of it with one run per lock.
    #[test]
    fn rounds_pair_run_i_with_run_i() {
        let near = 80.0;
        let f = file(
            "mutex",
            vec![
                // 4 threads: mean 100.3 against 103.3; rounds 0.90, 1.10, 0.90.
                row_at("mutex", 4, &[(90.0, near), (121.0, near), (90.0, near)]),
                row_at(
                    "std-mutex",
                    4,
                    &[(100.0, near), (110.0, near), (100.0, near)],
                ),
                // 8 threads: every round lost (0.80, 0.50, 0.95).
                row_at("mutex", 8, &[(80.0, near), (50.0, near), (95.0, near)]),
                row_at(
                    "std-mutex",
                    8,
                    &[(100.0, near), (100.0, near), (100.0, near)],
                ),
                // 16 threads: level on average (1.00x, no loss); round by
                // round 0.67, 1.00, 1.50, where pairing the runs sorted
                // instead of by round would read 1.00 three times.
                row_at("mutex", 16, &[(80.0, near), (100.0, near), (120.0, near)]),
                row_at(
                    "std-mutex",
                    16,
                    &[(120.0, near), (100.0, near), (80.0, near)],
                ),
            ],
        );
        let v = &f.verdict;
        let q: Vec<Rounds> = v.rows.iter().map(|r| r.rounds.unwrap()).collect();
        assert_eq!((q[0].won, q[0].of), (1, 3));
        assert!((q[0].min - 0.9).abs() < 1e-3 && (q[0].max - 1.1).abs() < 1e-3);
        assert_eq!((q[1].won, q[1].of), (0, 3));
        assert!((q[1].min - 0.5).abs() < 1e-3 && (q[1].max - 0.95).abs() < 1e-3);
        assert_eq!((q[2].won, q[2].of), (2, 3));
        assert!((q[2].min - 2.0 / 3.0).abs() < 1e-3 && (q[2].max - 1.5).abs() < 1e-3);
        assert!(v.rows[0].loss && v.rows[1].loss && !v.rows[2].loss);
        let s = v.summary.as_ref().unwrap();
        assert_eq!((s.won, s.lost, s.lost_every_round), (1, 2, Some(1)));
        let text = render(&f);
        assert!(text.contains("rounds won"), "{text}");
        assert!(text.contains("1/3 (0.90-1.10x)"), "{text}");
        assert!(text.contains("0/3 (0.50-0.95x)"), "{text}");
        assert!(text.contains("2/3 (0.67-1.50x)"), "{text}");
        assert!(
            text.contains("cells won/lost: 1/2 (lost in every round: 1)"),
            "{text}"
        );
        let json = serde_json::to_string(&f).unwrap();
        assert!(json.contains("\"rounds\":{\"won\":1,\"of\":3"), "{json}");
        assert!(json.contains("\"lost_every_round\":1"), "{json}");

        // One run each, or different numbers of runs: no rounds.
        let f = file(
            "mutex",
            vec![
                row_at("mutex", 4, &[(90.0, near)]),
                row_at("std-mutex", 4, &[(100.0, near)]),
                row_at("mutex", 8, &[(90.0, near), (90.0, near)]),
                row_at("std-mutex", 8, &[(100.0, near)]),
            ],
        );
        assert!(f.verdict.rows.iter().all(|r| r.rounds.is_none()));
        assert_eq!(f.verdict.summary.as_ref().unwrap().lost_every_round, None);
        let text = render(&f);
        assert!(!text.contains("rounds won"), "{text}");
        assert!(!text.contains("every round"), "{text}");
        assert!(!serde_json::to_string(&f).unwrap().contains("rounds"));
        // Nor a held-out ratio.
        assert!(f.verdict.rows.iter().all(|r| r.held_out.is_none()));
        assert!(!text.contains("held out"), "{text}");
        assert!(!serde_json::to_string(&f).unwrap().contains("held_out"));
    }

    /// Three peers that tie, each fastest in one round: the fastest mean
    /// is the one its best round lifted, so klock's steady rate reads as
    /// a loss against it, and as the win it is with the best peer held
    /// out. Held out on klock's side too where klock has several locks
    /// (treelock), which takes the same pull out of klock's favour.
    #[test]
    fn held_out_picks_the_best_without_the_round_it_scores() {
        let near = 80.0;
        let runs = |v: [f64; 3]| v.map(|k| (k, near));
        let f = file(
            "mutex",
            vec![
                row_at("mutex", 4, &runs([10.5, 10.5, 10.5])),
                row_at("std-mutex", 4, &runs([12.0, 10.0, 10.0])),
                row_at("parking_lot", 4, &runs([10.0, 12.0, 10.0])),
                row_at("pthread", 4, &runs([10.0, 10.0, 12.0])),
                // A loss that holding out leaves a loss.
                row_at("mutex", 8, &runs([9.0, 9.0, 9.0])),
                row_at("std-mutex", 8, &runs([10.0, 10.0, 10.0])),
                row_at("parking_lot", 8, &runs([8.0, 8.0, 8.0])),
            ],
        );
        let v = &f.verdict;
        let (r4, r8) = (&v.rows[0], &v.rows[1]);
        assert!(r4.loss, "10.5 against a mean of 10.67");
        // Each round's pick ran 10 in that round: 31.5 / 30.
        assert!((r4.held_out.unwrap() - 1.05).abs() < 1e-9, "{r4:?}");
        assert!((r8.held_out.unwrap() - 0.9).abs() < 1e-9, "{r8:?}");
        let s = v.summary.as_ref().unwrap();
        assert_eq!((s.won, s.lost), (0, 2), "the cells are judged by ratio");
        assert_eq!((s.held_out_won, s.held_out_lost), (Some(1), Some(1)));
        let text = render(&f);
        assert!(text.contains("held out"), "{text}");
        assert!(text.contains("1.05x"), "{text}");
        assert!(text.contains("won/lost by it: 1/1"), "{text}");
        let json = serde_json::to_string(&f).unwrap();
        assert!(json.contains("\"held_out\":1.05"), "{json}");
        assert!(json.contains("\"held_out_won\":1"), "{json}");

        // klock's side the best of three locks that tie: 1.02x on the
        // means, 0.95x held out.
        let f = file(
            "treelock",
            vec![
                row_at("qspinlock", 4, &runs([12.0, 10.0, 10.0])),
                row_at("qrwlock", 4, &runs([10.0, 12.0, 10.0])),
                row_at("rwsem", 4, &runs([10.0, 10.0, 12.0])),
                row_at("std-rwlock", 4, &runs([10.5, 10.5, 10.5])),
            ],
        );
        let r = &f.verdict.rows[0];
        assert!(!r.loss, "{r:?}");
        assert!((r.held_out.unwrap() - 30.0 / 31.5).abs() < 1e-9, "{r:?}");
        // With one run, or different numbers of runs, there is none:
        // `rounds_pair_run_i_with_run_i` checks that with its rounds.
    }

    /// A peer judged in klock's place meets the fastest of the *other*
    /// peers, never itself, and klock's own locks are not peers then
    /// either; the title names it. Uncontended, it meets its own kind.
    #[test]
    fn a_subject_is_judged_against_the_other_peers() {
        let rows = vec![
            row("mutex", 4, 300.0),
            row("std-mutex", 4, 100.0),
            row("parking_lot", 4, 120.0),
            row("pthread", 4, 90.0),
        ];
        let v = compute_for("mutex", &rows, Some("parking_lot")).unwrap();
        let r = &v.rows[0];
        assert_eq!(
            (r.klock_lock.as_str(), r.peer_lock.as_str()),
            ("parking_lot", "std-mutex")
        );
        assert!((r.ratio - 1.2).abs() < 1e-12);
        let v = compute_for("mutex", &rows, Some("pthread")).unwrap();
        assert_eq!(v.rows[0].peer_lock, "parking_lot");
        assert!(v.rows[0].loss);
        let mut f = file("mutex", rows.clone());
        f.verdict = v;
        let text = render(&f);
        assert!(
            text.contains("pthread vs best peer: pthread judged as klock's default lock is"),
            "{text}"
        );
        // Not in the file: a note that says so.
        let v = compute_for("mutex", &rows, Some("ttas")).unwrap();
        assert_eq!(v.note.as_deref(), Some("ttas did not run in this suite"));
        // Uncontended: the subject's kind; a lock of no kind has none.
        let rows = vec![
            row("qspinlock", 1, 200.0),
            row("ticket", 1, 300.0),
            row("ttas", 1, 250.0),
            row("std-mutex", 1, 400.0),
        ];
        let v = compute_for("uncontended", &rows, Some("ticket")).unwrap();
        assert_eq!(v.rows.len(), 1);
        assert_eq!(v.rows[0].kind.as_deref(), Some("spinlock"));
        assert_eq!(v.rows[0].peer_lock, "ttas");
        assert!(compute_for("uncontended", &rows, Some("rwsem-nospin")).is_none());
    }

    /// Every result file committed under `bench/results/`, by every
    /// build that wrote one, reads back (`klock verdict`), and each suite
    /// that has a verdict gets its table again.
    #[test]
    fn every_committed_result_file_reads_back() {
        fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "json") {
                    out.push(p);
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/results");
        let mut files = Vec::new();
        walk(&root, &mut files);
        assert!(
            files.len() > 100,
            "{} files under {}",
            files.len(),
            root.display()
        );
        let mut tables = 0;
        for f in &files {
            let text = reread(f, None).unwrap_or_else(|e| panic!("{e}"));
            tables += usize::from(text.contains("cells won/lost"));
        }
        assert!(tables > 50, "{tables} verdict tables");
    }

    #[test]
    fn a_ratio_printed_as_one_is_no_loss() {
        let rows = vec![row("mutex", 2, 99.6), row("pthread", 2, 100.0)];
        let v = compute("mutex", &rows).unwrap();
        assert!(!v.rows[0].loss);
        let rows = vec![row("mutex", 2, 99.4), row("pthread", 2, 100.0)];
        assert!(compute("mutex", &rows).unwrap().rows[0].loss);
    }

    #[test]
    fn missing_default_or_peer_says_so() {
        let f = file("spinlock", vec![row("ttas", 1, 1.0), row("ticket", 1, 2.0)]);
        assert!(f.verdict.rows.is_empty());
        let text = render(&f);
        assert!(
            text.contains("no verdict: klock's default lock (qspinlock) did not run"),
            "{text}"
        );
        let f = file(
            "spinlock",
            vec![row("qspinlock", 1, 1.0), row("qspinlock-pl0", 1, 2.0)],
        );
        assert!(f.verdict.rows.is_empty());
        let text = render(&f);
        assert!(text.contains("no verdict: no peer ran"), "{text}");
        assert!(!text.contains("pthread-pi"), "{text}");
        assert_eq!(text.lines().filter(|l| !l.is_empty()).count(), 1);
        // Suites without a rate table have no verdict at all.
        assert!(compute("pi", &[row("rtmutex", 1, 1.0)]).is_none());
        assert!(compute("ctxswitch", &[]).is_none());
        assert_eq!(render(&file("ctxswitch", vec![row("x", 2, 1.0)])), "");
    }

    #[test]
    fn uncontended_has_one_row_per_kind() {
        // 50,000 kop/s = 20 ns/op.
        let rows = vec![
            row("qspinlock", 1, 50_000.0),
            row("qspinlock-rmw", 1, 100_000.0),
            row("mutex", 1, 40_000.0),
            row("qrwlock", 1, 25_000.0),
            row("pthread-spin", 1, 45_000.0),
            row("ttas", 1, 40_000.0),
            row("std-mutex", 1, 50_000.0),
            row("pthread", 1, 44_000.0),
            row("std-rwlock", 1, 20_000.0),
            row("parking_lot-rwlock", 1, 22_000.0),
        ];
        let v = compute("uncontended", &rows).unwrap();
        let got: Vec<(&str, &str, &str, Option<bool>)> = v
            .rows
            .iter()
            .map(|r| {
                (
                    r.kind.as_deref().unwrap(),
                    r.klock_lock.as_str(),
                    r.peer_lock.as_str(),
                    r.within_10pct,
                )
            })
            .collect();
        // spinlock: 20 ns vs pthread-spin 22.2 ns; mutex: 25 ns vs std-mutex
        // 20 ns (25% more: not within 10%); rwlock: 40 ns vs 45.5 ns. No
        // rwsem row: it did not run.
        assert_eq!(
            got,
            [
                ("spinlock", "qspinlock", "pthread-spin", Some(true)),
                ("mutex", "mutex", "std-mutex", Some(false)),
                ("rwlock", "qrwlock", "parking_lot-rwlock", Some(true)),
            ]
        );
        let m = &v.rows[1];
        assert!((m.klock_ns_per_op.unwrap() - 25.0).abs() < 1e-9);
        assert!((m.peer_ns_per_op.unwrap() - 20.0).abs() < 1e-9);
        assert!((m.ratio - 0.8).abs() < 1e-12 && m.loss);
        assert!((v.rows[2].ratio - 25.0 / 22.0).abs() < 1e-12);
        let s = v.summary.unwrap();
        assert_eq!((s.won, s.lost), (2, 1));
        // Over the kinds: (10/9 * 0.8 * 25/22)^(1/3).
        let g = (10.0 / 9.0 * 0.8 * 25.0 / 22.0f64).powf(1.0 / 3.0);
        assert!((s.geomean.unwrap() - g).abs() < 1e-9);
        let text = render(&file("uncontended", rows));
        assert!(text.contains("klock vs best peer, uncontended"), "{text}");
        assert!(text.contains("geomean of ratios over the kinds"), "{text}");
        // A kind whose klock lock ran against peers of another kind only.
        let v = compute(
            "uncontended",
            &[row("qrwlock", 1, 1.0), row("ttas", 1, 1.0)],
        )
        .unwrap();
        assert!(v.note.unwrap().contains("of its kind"));
    }

    #[test]
    fn within_ten_percent_edge() {
        // klock 10% slower in ns/op is within; 12% is not.
        let within = |klock_ns: f64| {
            let rows = vec![
                // kop/s = 1e6 / ns per op.
                row("qspinlock", 1, 1e6 / klock_ns),
                row("ttas", 1, 1e6 / 100.0),
            ];
            compute("uncontended", &rows).unwrap().rows[0].within_10pct
        };
        assert_eq!(within(100.0), Some(true));
        assert_eq!(within(109.0), Some(true));
        assert_eq!(within(112.0), Some(false));
    }

    #[test]
    fn json_has_the_verdict_fields() {
        let f = file(
            "rwlock",
            vec![row("qrwlock", 4, 10.0), row("std-rwlock", 4, 5.0)],
        );
        let v = serde_json::to_value(&f).unwrap();
        let r = &v["verdict"][0];
        for k in [
            "threads",
            "klock_lock",
            "klock_kops",
            "klock_per_thread_min",
            "klock_per_thread_mean",
            "peer_lock",
            "peer_kops",
            "peer_per_thread_min",
            "peer_per_thread_mean",
            "ratio",
        ] {
            assert!(!r[k].is_null(), "verdict lacks {k}: {r}");
        }
        assert_eq!(r["ratio"], 2.0);
        assert_eq!(v["verdict_summary"]["won"], 1);
        assert!(v.get("verdict_note").is_none());
        assert!(r.get("kind").is_none());
    }

    /// Every suite with a rate or cost table has a verdict whose klock
    /// locks and peers it runs by default; the exclusive suites run every
    /// exclusive peer and the rw suites every rw peer.
    #[test]
    fn every_rate_suite_runs_its_default_and_the_full_peer_set() {
        for p in EXCLUSIVE_PEERS.iter().chain(RW_PEERS) {
            assert!(PEERS.contains(p), "{p}");
        }
        for k in UNCONTENDED {
            assert!(k.peers.iter().all(|p| PEERS.contains(p)), "{}", k.name);
        }
        for s in specs() {
            let Some(j) = judge(s.name) else {
                assert!(
                    ["pi", "ctxswitch"].contains(&s.name),
                    "{} lacks a verdict",
                    s.name
                );
                continue;
            };
            let has = |l: &str| s.default_locks.contains(&l);
            match j {
                Judge::Lock(l) => assert!(has(l), "{}: {l}", s.name),
                Judge::BestOf(ls) => assert!(ls.iter().all(|l| has(l)), "{}", s.name),
                Judge::Kinds(kinds) => {
                    for k in kinds.iter().filter(|k| k.klock != "rwsem") {
                        assert!(has(k.klock), "{}: {}", s.name, k.klock);
                        assert!(k.peers.iter().all(|p| has(p)), "{}: {}", s.name, k.name);
                    }
                }
            }
            let exclusive = ["mutex", "spinlock", "treelock"].contains(&s.name);
            let rw = s.name == "rwlock" || s.name == "treelock" || s.name.starts_with("rwsem");
            for p in EXCLUSIVE_PEERS.iter().filter(|_| exclusive) {
                assert!(has(p), "{} lacks peer {p}", s.name);
            }
            for p in RW_PEERS.iter().filter(|_| rw) {
                assert!(has(p), "{} lacks peer {p}", s.name);
            }
            if s.cost_table {
                continue;
            }
            // The rwsem suites and pi-throughput keep their own thread
            // lists (the mails' columns); the others cover 1-16.
            if s.name.starts_with("rwsem") || s.name == PI_THROUGHPUT {
                continue;
            }
            for t in [1, 2, 4, 8, 16] {
                assert!(
                    s.default_threads.contains(&t),
                    "{} lacks {t} threads",
                    s.name
                );
            }
        }
    }
}
