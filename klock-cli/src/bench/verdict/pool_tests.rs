//! Pooled verdicts of synthetic result files with known round ratios.

use super::*;
use crate::bench::report::test_rows::row_at;
use crate::bench::report::ResultRow;
use crate::bench::verdict::tests::file;

/// A row of `id` at `threads` with these runs (kop/s), the CPUs near.
fn runs(id: &str, threads: usize, kops: &[f64]) -> ResultRow {
    let r: Vec<(f64, f64)> = kops.iter().map(|&k| (k, 80.0)).collect();
    row_at(id, threads, &r)
}

fn named(files: Vec<ResultFile>) -> Vec<(String, ResultFile)> {
    files
        .into_iter()
        .enumerate()
        .map(|(i, f)| (format!("run{i}.json"), f))
        .collect()
}

fn cell<'a>(rows: &'a [PooledRow], cell: &str) -> &'a PooledRow {
    rows.iter()
        .find(|r| r.cell == cell)
        .unwrap_or_else(|| panic!("no cell {cell}: {rows:?}"))
}

/// Eight rounds in two files: a steady 0.90x is a loss, a steady 1.20x a
/// win, and rounds swinging from 0.70x to 1.30x cannot tell.
#[test]
fn a_steady_loss_is_a_loss_and_swinging_rounds_cannot_tell() {
    let one = || {
        file(
            "mutex",
            vec![
                runs("mutex", 4, &[90.0, 91.0, 89.0, 90.0]),
                runs("std-mutex", 4, &[100.0; 4]),
                runs("mutex", 8, &[70.0, 130.0, 80.0, 120.0]),
                runs("std-mutex", 8, &[100.0; 4]),
                runs("mutex", 16, &[120.0, 121.0, 119.0, 120.0]),
                runs("std-mutex", 16, &[100.0; 4]),
            ],
        )
    };
    let rows = pool(&named(vec![one(), one()]), None, None).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.cell.as_str()).collect::<Vec<_>>(),
        ["4", "8", "16"]
    );
    let loss = cell(&rows, "4");
    assert!((loss.ratio - 0.9).abs() < 0.005, "{loss:?}");
    assert!(loss.low < loss.ratio && loss.high < 1.0, "{loss:?}");
    assert_eq!(loss.clear_win(), Some(false));
    assert_eq!((loss.rounds, loss.files), (8, 2));
    assert_eq!(
        (loss.klock.as_str(), loss.peer.as_str()),
        ("mutex", "std-mutex")
    );
    let noise = cell(&rows, "8");
    assert!(noise.low < 1.0 && noise.high > 1.0, "{noise:?}");
    assert_eq!(noise.clear_win(), None);
    assert_eq!(cell(&rows, "16").clear_win(), Some(true));
}

/// The row shows the peer klock's pooled ratio is lowest against, even
/// where another peer had the higher mean in one file.
#[test]
fn the_strongest_peer_is_the_one_with_the_lowest_pooled_ratio() {
    let a = file(
        "mutex",
        vec![
            runs("mutex", 4, &[100.0, 100.0]),
            runs("std-mutex", 4, &[105.0, 105.0]),
            runs("parking_lot", 4, &[110.0, 110.0]),
        ],
    );
    let b = file(
        "mutex",
        vec![
            runs("mutex", 4, &[100.0, 100.0]),
            runs("std-mutex", 4, &[130.0, 130.0]),
            runs("parking_lot", 4, &[90.0, 90.0]),
        ],
    );
    let files = named(vec![a, b]);
    let rows = pool(&files, None, None).unwrap();
    let r = cell(&rows, "4");
    // std-mutex: 1/1.05 and 1/1.3; parking_lot: 1/1.1 and 1/0.9.
    assert_eq!(r.peer, "std-mutex");
    let want = (1.0f64 / 1.05 / 1.3).sqrt();
    assert!((r.ratio - want).abs() < 1e-9, "{r:?} {want}");
    // One peer named: that one, whatever the others did.
    let rows = pool(&files, None, Some("parking_lot")).unwrap();
    let r = cell(&rows, "4");
    assert_eq!(r.peer, "parking_lot");
    let want = (1.0f64 / 1.1 / 0.9).sqrt();
    assert!((r.ratio - want).abs() < 1e-9, "{r:?} {want}");
    let e = pool(&files, None, Some("ticket")).unwrap_err();
    assert!(e.contains("ticket did not run as a peer"), "{e}");
}

/// A variant of klock's lock is never a peer, but `--peer` may name it.
#[test]
fn a_named_variant_of_klocks_lock_is_pooled_against_it() {
    let f = file(
        "spinlock",
        vec![
            runs("qspinlock", 4, &[100.0, 120.0]),
            runs("qspinlock-32", 4, &[80.0, 100.0]),
            runs("mutex", 4, &[10.0, 10.0]),
            runs("ttas", 4, &[50.0, 50.0]),
        ],
    );
    let files = named(vec![f]);
    let r = cell(&pool(&files, None, None).unwrap(), "4").clone();
    assert_eq!(r.peer, "ttas", "a variant counted as a peer: {r:?}");
    let rows = pool(&files, None, Some("qspinlock-32")).unwrap();
    let r = cell(&rows, "4");
    assert_eq!(r.peer, "qspinlock-32");
    let want = (100.0f64 / 80.0 * 120.0 / 100.0).sqrt();
    assert!((r.ratio - want).abs() < 1e-9, "{r:?} {want}");
    // Another lock of klock's that is not a variant of it stays out.
    let e = pool(&files, None, Some("mutex")).unwrap_err();
    assert!(e.contains("mutex did not run as a peer"), "{e}");
}

/// A lock judged as klock's default lock is (`--lock`) is not its own peer.
#[test]
fn a_subject_is_judged_against_the_other_peers() {
    let f = file(
        "mutex",
        vec![
            runs("mutex", 4, &[100.0, 100.0]),
            runs("std-mutex", 4, &[50.0, 52.0]),
            runs("parking_lot", 4, &[200.0, 210.0]),
        ],
    );
    let rows = pool(&named(vec![f]), Some("parking_lot"), None).unwrap();
    let r = cell(&rows, "4");
    assert_eq!(
        (r.klock.as_str(), r.peer.as_str()),
        ("parking_lot", "std-mutex")
    );
    assert_eq!(r.clear_win(), Some(true), "{r:?}");
}

/// Rounds in which klock's lock did nothing have no ratio; they are
/// counted, not pooled, and a cell with fewer than two rounds is left out.
#[test]
fn rounds_klock_did_nothing_in_are_counted_apart() {
    let f = file(
        "spinlock",
        vec![
            runs("qspinlock", 4, &[0.0, 100.0, 100.0, 100.0]),
            runs("ttas", 4, &[50.0; 4]),
            runs("qspinlock", 8, &[0.0, 0.0, 0.0, 100.0]),
            runs("ttas", 8, &[50.0; 4]),
        ],
    );
    let rows = pool(&named(vec![f]), None, None).unwrap();
    let r = cell(&rows, "4");
    assert_eq!((r.rounds, r.klock_zero), (3, 1), "{r:?}");
    assert!(rows.iter().all(|r| r.cell != "8"), "{rows:?}");
}

#[test]
fn files_of_different_suites_or_none_are_refused() {
    let m = file("mutex", vec![runs("mutex", 4, &[1.0, 1.0])]);
    let s = file("spinlock", vec![runs("qspinlock", 4, &[1.0, 1.0])]);
    let e = pool(&named(vec![m, s]), None, None).unwrap_err();
    assert!(e.contains("of one suite"), "{e}");
    assert!(pool(&[], None, None)
        .unwrap_err()
        .contains("needs result files"));
    let lonely = file("mutex", vec![runs("mutex", 4, &[1.0, 1.0])]);
    let e = pool(&named(vec![lonely]), None, None).unwrap_err();
    assert!(e.contains("nothing to pool"), "{e}");
}
