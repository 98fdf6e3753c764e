//! The verdict's unit tests: synthetic result rows with known ratios.

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

/// A result file of `suite` with these rows and its verdict attached.
pub(super) fn file(suite: &str, results: Vec<ResultRow>) -> ResultFile {
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

/// The `rwlock` suite judges `qrwlock` and adds one line for `rwsem`
/// when it ran: its ratio to the fastest peer per thread count. Other
/// suites, and a run without it, have no line.
#[test]
fn rwlock_shows_rwsem_beside_its_verdict() {
    let rows = vec![
        row("qrwlock", 1, 100.0),
        row("rwsem", 1, 88.0),
        row("std-rwlock", 1, 80.0),
        row("pthread-rwlock", 1, 50.0),
        row("qrwlock", 4, 40.0),
        row("rwsem", 4, 60.0),
        row("std-rwlock", 4, 50.0),
        row("pthread-rwlock", 4, 40.0),
    ];
    let f = file("rwlock", rows.clone());
    // The verdict still judges qrwlock, and rwsem is no peer.
    assert!(f.verdict.rows.iter().all(|r| r.klock_lock == "qrwlock"));
    assert!(f.verdict.rows.iter().all(|r| r.peer_lock == "std-rwlock"));
    let text = render(&f);
    assert!(
        text.contains(
            "klock's RwSem (`rwsem`) in the same runs, against the same peers: 1: 1.10x, 4: 1.20x;"
        ),
        "{text}"
    );
    let summary = text
        .lines()
        .position(|l| l.contains("cells won/lost"))
        .unwrap();
    assert!(
        text.lines()
            .nth(summary + 1)
            .unwrap()
            .contains("klock's RwSem"),
        "the line follows the summary: {text}"
    );
    let without: Vec<ResultRow> = rows.iter().filter(|r| r.id != "rwsem").cloned().collect();
    assert!(!render(&file("rwlock", without)).contains("RwSem"));
    let spin = vec![row("qspinlock", 1, 100.0), row("ttas", 1, 80.0)];
    assert!(!render(&file("spinlock", spin)).contains("in the same runs"));
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

/// The verdict table's row for thread count `t` in the rendered `text`.
fn row_line(text: &str, t: &str) -> String {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(t))
        .unwrap_or_else(|| panic!("no row {t}:\n{text}"))
        .to_string()
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
    assert_eq!((s.won, s.lost, s.starved, s.peer_starved), (3, 1, 1, 0));
    let text = render(&f);
    let line = |t: &str| row_line(&text, t);
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
        text.contains("geomean of ratios at 4-16 threads: 1.00x; cells won/lost: 3/1; starved: 1"),
        "{text}"
    );
}

/// A peer that left a thread with nothing is marked, and counted under
/// the table; klock's own starvation stays `STARVED`.
#[test]
fn a_peer_that_starves_a_thread_is_marked() {
    let rows = vec![
        row("qrwlock", 4, 80.0),
        row_with("pthread-rwlock", 4, 100.0, 0), // a writer did nothing
        row("qrwlock", 8, 120.0),
        row("pthread-rwlock", 8, 100.0),
    ];
    let f = file("rwlock", rows);
    let s = f.verdict.summary.clone().unwrap();
    assert_eq!((s.won, s.lost, s.starved, s.peer_starved), (1, 1, 0, 1));
    let r = &f.verdict.rows;
    assert!(r[0].peer_starved && !r[0].starved && !r[1].peer_starved);
    let text = render(&f);
    assert!(
        row_line(&text, "4").ends_with("0.80x  LOSS PEER-STARVED"),
        "{text}"
    );
    assert!(!row_line(&text, "8").contains("STARVED"), "{text}");
    assert!(
        text.contains("starved: 0 (the peer starved a thread: 1)"),
        "{text}"
    );
    let json = serde_json::to_value(&f.verdict.rows[0]).unwrap();
    assert_eq!(json["peer_starved"], serde_json::json!(true));
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
    let v = compute_for("uncontended", &rows, Some("rwsem-nospin")).unwrap();
    assert!(v.rows.is_empty());
    assert_eq!(
        v.note.as_deref(),
        Some("rwsem-nospin is of no kind of the uncontended verdict")
    );
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
    for (suite, id, _) in ALSO {
        let spec = specs().find(|s| s.name == *suite).unwrap();
        assert!(spec.default_locks.contains(id), "{suite} does not run {id}");
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
