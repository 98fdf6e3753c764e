use super::*;

#[test]
fn thousands_groups() {
    assert_eq!(thousands(0.0), "0");
    assert_eq!(thousands(999.4), "999");
    assert_eq!(thousands(1234567.8), "1,234,568");
    assert_eq!(thousands(100000.0), "100,000");
}

fn outcome(ops: &[(Role, u64)], secs: f64) -> RunOutcome {
    RunOutcome {
        elapsed_s: secs,
        per_thread: ops.to_vec(),
        cpu_s: 2.0,
        ctx_voluntary: 10,
        ctx_involuntary: 3,
        events: vec![("lock_pending", 4)],
        xfer_ns: (Some(80.0), None),
    }
}

#[test]
fn aggregate_hand_computed() {
    use Role::*;
    let runs = [
        outcome(&[(Reader, 100), (Reader, 300), (Writer, 50)], 1.0),
        outcome(&[(Reader, 200), (Reader, 200), (Writer, 150)], 1.0),
    ];
    let r = ResultRow::aggregate("x", "x", "default", 2, 1, &runs);
    // kop/s per run: 0.45 and 0.55.
    assert!((r.kops_mean - 0.5).abs() < 1e-12);
    assert!((r.kops_stddev - (0.005f64).sqrt()).abs() < 1e-12);
    assert!((r.kops_hmean - 2.0 / (1.0 / 0.45 + 1.0 / 0.55)).abs() < 1e-12);
    assert_eq!(
        (r.reader_min, r.reader_mean, r.reader_max),
        (Some(150), Some(200.0), Some(250))
    );
    assert_eq!((r.writer_min, r.writer_max), (Some(100), Some(100)));
    assert_eq!(r.per_thread_min, 100); // mean of 50 and 150
    assert!((r.ops_per_cpu_s - 250.0).abs() < 1e-9); // 1000 ops / 4 cpu-s
    assert_eq!(r.events["lock_pending"], 4);
    let r = ResultRow::aggregate("x", "x", "default", 0, 3, &runs);
    assert_eq!(r.reader_min, None);
    assert_eq!(r.xfer_ns_runs, vec![(Some(80.0), None); 2]);
}

#[test]
fn ceiling_is_cpus_times_the_fastest_single_thread() {
    use Role::*;
    let row = |id: &str, threads: usize, ops: u64| {
        let runs = [outcome(&[(Writer, ops)], 1.0)];
        ResultRow::aggregate(id, id, "default", 0, threads, &runs)
    };
    // 1-thread rates 4 and 5 kop/s: the ceiling uses 5.
    let rows = [
        row("a", 1, 4000),
        row("b", 1, 5000),
        row("a", 2, 6000),
        row("b", 16, 7000),
    ];
    let line = ceiling(&rows, 2);
    assert!(
        line.contains(&format!("2: {}, 16: {}", rate(10.0), rate(10.0))),
        "{line}"
    );
    assert!(line.contains(&format!("rate, {})", rate(5.0))), "{line}");
    // One CPU: the 1-thread rate is the ceiling at every count.
    assert!(ceiling(&rows, 1).contains(&format!("16: {}", rate(5.0))));
    // No 1-thread row, or a suite with readers: no line.
    assert_eq!(ceiling(&rows[2..], 2), "");
    let mut mixed = rows.clone();
    mixed[2].readers = 1;
    assert_eq!(ceiling(&mixed, 2), "");
}

#[test]
fn runs_split_by_cpu_distance() {
    use Role::*;
    let run = |ops: u64, a: f64, b: f64| RunOutcome {
        xfer_ns: (Some(a), Some(b)),
        ..outcome(&[(Writer, ops)], 1.0)
    };
    // kop/s 6, 4, 5, 7: near, far, crossed the cut, near.
    let runs = [
        run(6000, 80.0, 85.0),
        run(4000, 380.0, 390.0),
        run(5000, 80.0, 390.0),
        run(7000, 90.0, 75.0),
    ];
    let r = ResultRow::aggregate("mutex", "x", "default", 0, 1, &runs);
    let cut = (90.0f64 * 380.0).sqrt();
    assert_eq!(split_by_distance(&r, cut), (vec![6.0, 7.0], vec![4.0]));
    let text = xfer_section(std::slice::from_ref(&r));
    assert!(text.contains("75 / 88 / 390 ns"), "{text}");
    assert!(text.contains("split at 185 ns"), "{text}");
    // Near median 6.5, far 4 (kop/s).
    assert!(
        text.contains(&format!("{} / {}", rate(6.5), rate(4.0))),
        "{text}"
    );
    // One placement spread over 3.5× but without a gap: no split.
    let spread = [
        run(6000, 56.0, 70.0),
        run(6100, 90.0, 120.0),
        run(5900, 150.0, 197.0),
    ];
    let steady = ResultRow::aggregate("mutex", "x", "default", 0, 1, &spread);
    let text = xfer_section(std::slice::from_ref(&steady));
    assert_eq!(text.lines().filter(|l| !l.is_empty()).count(), 1, "{text}");
}
