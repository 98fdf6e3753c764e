//! lockstat counts exactly: scripted scenarios with known numbers of
//! acquisitions, contentions, bounces, rejected trylocks, and the known
//! contention call site; and the `KLOCK_LOCKSTAT=1` dump at exit.
#![cfg(not(loom))]

use klock::lockstat::{self, Mode, Tracked, TrackedMutex, TrackedRwLock};
use klock::qrwlock::WAITING;
use klock::qspinlock::PENDING;
use klock::{RawQRwLock, RawQSpinLock};
use std::sync::mpsc::channel;
use std::time::Duration;

const HOLD: Duration = Duration::from_millis(3);

/// Spinlock, two threads, in lock step:
///
/// ```text
/// main: 10 uncontended lock/unlock                  -> 10 acq, 1 acq-bounce (first ever)
/// 3 rounds of:
///   B locks (uncontended)                           -> +1 acq, +1 acq-bounce
///   main try_lock x2 while B holds                  -> +2 rejects
///   main lock() waits (pending bit set),            -> +1 contention, +1 con-bounce,
///   B holds >= 3 ms more, unlocks                      +1 acq, +1 acq-bounce
/// totals: 16 acquisitions, 7 acq-bounces, 3 contentions, 3 con-bounces,
///         6 rejects, all contentions at one call site, no read side
/// ```
#[test]
fn spinlock_scenario_counts_exactly() {
    let m: TrackedMutex<RawQSpinLock, u64> =
        TrackedMutex::from_raw(Tracked::named("exact-spin"), 0);
    for _ in 0..10 {
        *m.lock() += 1;
    }
    let mut contended_line = 0;
    std::thread::scope(|s| {
        let (go_tx, go_rx) = channel::<()>();
        let (held_tx, held_rx) = channel::<()>();
        let m = &m;
        s.spawn(move || {
            while go_rx.recv().is_ok() {
                let mut g = m.lock();
                held_tx.send(()).unwrap();
                // Wait until main is spinning on the pending bit.
                // SAFETY: only reads the raw word.
                while unsafe { m.raw() }.inner().word() & PENDING == 0 {
                    std::thread::yield_now();
                }
                std::thread::sleep(HOLD);
                *g += 1;
            }
        });
        for _ in 0..3 {
            go_tx.send(()).unwrap();
            held_rx.recv().unwrap();
            assert!(m.try_lock().is_none());
            assert!(m.try_lock().is_none());
            contended_line = line!() + 1;
            let mut g = m.lock();
            *g += 1;
        }
        drop(go_tx);
    });
    assert_eq!(m.into_inner(), 16);

    let r = lockstat::snapshot();
    let c = r.class("exact-spin").expect("class reported");
    let w = &c.write;
    assert_eq!(w.acquisitions, 16, "{c:?}");
    assert_eq!(w.acq_bounces, 7, "{c:?}");
    assert_eq!(w.contentions, 3, "{c:?}");
    assert_eq!(w.con_bounces, 3, "{c:?}");
    assert_eq!(w.rejects, 6, "{c:?}");
    assert!(w.wait_min_ns >= HOLD.as_nanos() as u64, "{c:?}");
    assert!(w.wait_max_ns >= w.wait_min_ns && w.wait_total_ns >= 3 * w.wait_min_ns);
    assert!(w.hold_max_ns >= HOLD.as_nanos() as u64, "B's holds: {c:?}");
    assert!(w.hold_min_ns <= w.hold_max_ns && w.hold_total_ns >= 3 * HOLD.as_nanos() as u64);
    assert_eq!(c.read, Default::default(), "no read side");
    assert_eq!(c.sites.len(), 1, "{:?}", c.sites);
    let site = &c.sites[0];
    assert_eq!((site.contentions, site.mode), (3, Mode::Write));
    assert_eq!(site.site.file(), file!());
    assert_eq!(site.site.line(), contended_line, "the user's lock() line");
    assert_eq!(site.wait_total_ns, w.wait_total_ns);

    let proc = r.proc_lock_stat();
    assert!(proc.starts_with("lock_stat version 0.4\n"));
    let line = proc
        .lines()
        .find(|l| l.trim_start().starts_with("exact-spin:"))
        .expect("class line");
    let cols: Vec<&str> = line.split_whitespace().collect();
    // name, con-bounces, contentions, 4 wait times, acq-bounces, acquisitions, 4 hold times
    assert_eq!(cols.len(), 13, "{line}");
    assert_eq!((cols[1], cols[2], cols[7], cols[8]), ("3", "3", "7", "16"));
    assert!(proc.contains(&format!("{}:{contended_line}:", file!())));
    let lm = r.lockmeter();
    let line = lm
        .lines()
        .find(|l| l.ends_with(" exact-spin"))
        .expect("lockmeter line");
    // CON 3/16 = 18.8%, TOTAL 16, NOWAIT 81.2%, SPIN 18.8%, RJECT 6/22 = 27.3%.
    for cell in ["18.8%", " 16 ", "81.2%", "27.3%"] {
        assert!(line.contains(cell), "{cell:?} not in {line:?}");
    }
}

/// RwLock, both sides:
///
/// ```text
/// main: 5 reads                             -> read: 5 acq, 1 acq-bounce
/// main: 2 writes                            -> write: 2 acq, 0 bounces (same thread)
/// B takes a read                            -> read: +1 acq, +1 acq-bounce
/// main try_write fails                      -> write: 1 reject
/// main write waits (WAITING set), B unlocks -> write: 1 contention, 1 con-bounce,
///                                              1 more acq, 1 acq-bounce
/// ```
#[test]
fn rwlock_scenario_counts_exactly() {
    let l: TrackedRwLock<RawQRwLock, u64> =
        TrackedRwLock::from_raw(Tracked::named_rw("exact-rw"), 0);
    for _ in 0..5 {
        assert_eq!(*l.read(), 0);
    }
    for _ in 0..2 {
        *l.write() += 1;
    }
    let mut write_line = 0;
    std::thread::scope(|s| {
        let (held_tx, held_rx) = channel::<()>();
        let l = &l;
        s.spawn(move || {
            let g = l.read();
            held_tx.send(()).unwrap();
            // SAFETY: only reads the raw word.
            while unsafe { l.raw() }.inner().word() & WAITING == 0 {
                std::thread::yield_now();
            }
            std::thread::sleep(HOLD);
            assert_eq!(*g, 2);
        });
        held_rx.recv().unwrap();
        assert!(l.try_write().is_none());
        write_line = line!() + 1;
        *l.write() += 1;
    });
    let r = lockstat::snapshot();
    let c = r.class("exact-rw").expect("class reported");
    let (rd, wr) = (&c.read, &c.write);
    assert_eq!(
        (rd.acquisitions, rd.acq_bounces, rd.contentions, rd.rejects),
        (6, 2, 0, 0),
        "{c:?}"
    );
    assert_eq!(
        (
            wr.acquisitions,
            wr.acq_bounces,
            wr.contentions,
            wr.con_bounces,
            wr.rejects
        ),
        (3, 1, 1, 1, 1),
        "{c:?}"
    );
    assert!(wr.wait_min_ns >= HOLD.as_nanos() as u64);
    assert!(rd.hold_max_ns >= HOLD.as_nanos() as u64);
    assert_eq!(c.sites.len(), 1);
    assert_eq!(c.sites[0].mode, Mode::Write);
    assert_eq!(c.sites[0].site.line(), write_line);
    let proc = r.proc_lock_stat();
    assert!(proc.contains("exact-rw-W:") && proc.contains("exact-rw-R:"));
    let lm = r.lockmeter();
    assert!(lm.contains("exact-rw (write)") && lm.contains("exact-rw (read)"));
}

/// Classes by creation site, and `INIT`-made locks by type.
#[test]
fn classes_by_site_and_type_and_pause() {
    let line = line!() + 1;
    let a = lockstat::spinlock(0u32);
    *a.lock() += 1;
    let name = format!("{}:{line}:", file!());
    let r = lockstat::snapshot();
    let c = r
        .classes
        .iter()
        .find(|c| c.name.starts_with(&name))
        .expect("class named after the creation site");
    assert_eq!(c.write.acquisitions, 1);

    static S: TrackedMutex<klock::RawMutex, u32> = TrackedMutex::new(0);
    *S.lock() += 1;
    let r = lockstat::snapshot();
    assert!(
        r.classes
            .iter()
            .any(|c| c.name.starts_with("RawMutexWith<")),
        "{:?}",
        r.classes.iter().map(|c| &c.name).collect::<Vec<_>>()
    );
}

/// `KLOCK_LOCKSTAT=1`: the process prints both layouts when it exits. This
/// test runs its own binary again as a child that takes a tracked lock.
#[test]
fn dump_at_exit_with_env() {
    if std::env::var_os("KLOCK_LOCKSTAT_CHILD").is_some() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["exit_dump_child", "--exact", "--test-threads=1"])
        .env("KLOCK_LOCKSTAT", "1")
        .env("KLOCK_LOCKSTAT_CHILD", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lock_stat version 0.4"), "{err}");
    assert!(err.contains("exit-dump-class:"), "{err}");
    assert!(err.contains("UTIL  CON"), "{err}");
    // The child paused collection around its second acquisition of "paused".
    let line = err
        .lines()
        .find(|l| l.trim_start().starts_with("paused:"))
        .expect("paused class");
    assert_eq!(line.split_whitespace().nth(8), Some("1"), "{line}");
}

#[test]
fn exit_dump_child() {
    if std::env::var_os("KLOCK_LOCKSTAT_CHILD").is_none() {
        return;
    }
    let m: TrackedMutex<RawQSpinLock, u32> =
        TrackedMutex::from_raw(Tracked::named("exit-dump-class"), 0);
    *m.lock() += 1;
    // Pausing (global, so only in this child process).
    let b: TrackedMutex<RawQSpinLock, u32> = TrackedMutex::from_raw(Tracked::named("paused"), 0);
    *b.lock() += 1;
    lockstat::set_enabled(false);
    *b.lock() += 1;
    lockstat::set_enabled(true);
}
