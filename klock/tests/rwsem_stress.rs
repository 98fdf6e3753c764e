//! klock::RwSem under real threads (time-bounded): readers never see a
//! writer's half-done update, in all three spin configurations and with
//! reader lock stealing; downgrade
//! keeps writers out; timed read and write locks time out cleanly and
//! leave the lock usable; a grant wakes every sleeping reader; the event
//! counters move; with the reader wait
//! bound at 0 (grants past a front writer all the time) exclusion holds.
#![cfg(not(loom))]

use klock::rwsem::{self, GLOBAL, OFF, ON, STEAL, WAITERS};
use klock::{RwSemWith, RwSemWithWriteGuard};
use lock_api::RwLockWriteGuard;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// xorshift64
fn rng(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

const WORDS: usize = 8;

/// `readers` readers check that all words are equal (a multi-word
/// invariant) while `writers` writers update them one word at a time,
/// with pauses, yields and rare sleeps in both critical sections.
/// Returns (writes, reads).
fn no_torn_reads<const R: u8, const A: u8>(readers: usize, writers: usize, ms: u64) -> (u64, u64) {
    let l = RwSemWith::<R, A, [u64; WORDS]>::new([0; WORDS]);
    let stop = AtomicBool::new(false);
    let (writes, reads) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..writers + readers {
            let (l, stop, writes, reads) = (&l, &stop, &writes, &reads);
            s.spawn(move || {
                let mut r = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let mut n = 0u64;
                while !stop.load(Relaxed) {
                    let x = rng(&mut r);
                    if t < writers {
                        let mut g = l.write();
                        let v = g[0] + 1;
                        for (i, w) in g.iter_mut().enumerate() {
                            *w = v;
                            if x % 64 == i as u64 {
                                std::thread::yield_now();
                            }
                        }
                        if x.is_multiple_of(2048) {
                            std::thread::sleep(Duration::from_micros(50));
                        }
                    } else {
                        let g = l.read();
                        let v = g[0];
                        if x.is_multiple_of(512) {
                            std::thread::sleep(Duration::from_micros(30));
                        } else if x.is_multiple_of(32) {
                            std::thread::yield_now();
                        }
                        assert!(g.iter().all(|&w| w == v), "torn read: {:?}", *g);
                    }
                    n += 1;
                    if x % 1024 == 1 {
                        std::thread::yield_now();
                    }
                }
                if t < writers {
                    writes.fetch_add(n, Relaxed);
                } else {
                    reads.fetch_add(n, Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_millis(ms));
        stop.store(true, Relaxed);
    });
    let w = writes.load(Relaxed);
    assert_eq!(
        l.read()[0],
        w,
        "lost writes: writers excluded each other badly"
    );
    let raw = unsafe { l.raw() };
    assert_eq!(raw.count_word(), 0, "count word not clean at the end");
    (w, reads.load(Relaxed))
}

#[test]
fn no_torn_reads_reader_spin_adaptive() {
    let (w, r) = no_torn_reads::<ON, ON>(6, 3, 600);
    assert!(w > 0 && r > 0, "{w} writes, {r} reads");
}

#[test]
fn no_torn_reads_reader_spin_no_adaptive() {
    let (w, r) = no_torn_reads::<ON, OFF>(6, 3, 600);
    assert!(w > 0 && r > 0, "{w} writes, {r} reads");
}

#[test]
fn no_torn_reads_no_reader_spin() {
    let (w, r) = no_torn_reads::<OFF, OFF>(6, 3, 600);
    assert!(w > 0 && r > 0, "{w} writes, {r} reads");
}

/// Readers steal instead of spinning (mainline's design); oversubscribed,
/// so the lock often falls free with waiters queued — and (with counters
/// compiled in) readers did steal it.
#[test]
fn no_torn_reads_stealing() {
    use klock::events::{self, Event};
    let before = events::read(Event::RwsemRlockSteal);
    let (w, r) = no_torn_reads::<STEAL, OFF>(8, 4, 600);
    assert!(w > 0 && r > 0, "{w} writes, {r} reads");
    if events::enabled() {
        let after = events::read(Event::RwsemRlockSteal);
        assert!(after > before, "no reader stole the lock");
    }
}

#[test]
fn no_torn_reads_oversubscribed_global_switches() {
    let (w, r) = no_torn_reads::<GLOBAL, GLOBAL>(12, 6, 500);
    assert!(w > 0 && r > 0, "{w} writes, {r} reads");
}

/// The reader wait bound at 0: every write unlock that finds readers behind
/// a writer at the front grants them past it (the grant-at-unlock paths run
/// constantly) — exclusion and the multi-word invariant still hold, and
/// (with counters compiled in) such grants happened.
#[test]
fn no_torn_reads_reader_bound_zero() {
    use klock::events::{self, Event};
    let before = events::read(Event::RwsemUnlockGrantSkip);
    rwsem::set_reader_wait_ns(0);
    let (w, r) = no_torn_reads::<OFF, OFF>(6, 3, 600);
    rwsem::set_reader_wait_ns(rwsem::DEFAULT_READER_WAIT_NS);
    assert!(w > 0 && r > 0, "{w} writes, {r} reads");
    if events::enabled() {
        let after = events::read(Event::RwsemUnlockGrantSkip);
        assert!(after > before, "no grant past a front writer happened");
    }
}

/// A writer writes, downgrades, and checks that its value stays while it
/// holds the read lock (no writer can get in); other writers and readers
/// run meanwhile.
#[test]
fn downgrade_keeps_exclusion() {
    let l = RwSemWith::<ON, ON, (u64, u64)>::new((0, !0));
    let stop = AtomicBool::new(false);
    let downgrades = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..6u64 {
            let (l, stop, downgrades) = (&l, &stop, &downgrades);
            s.spawn(move || {
                let mut r = (t + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                while !stop.load(Relaxed) {
                    let x = rng(&mut r);
                    match t % 3 {
                        0 => {
                            let mut g: RwSemWithWriteGuard<'_, ON, ON, (u64, u64)> = l.write();
                            let mine = (t << 32) | (x & 0xffff_ffff);
                            g.0 = mine;
                            g.1 = !mine;
                            let g = RwLockWriteGuard::downgrade(g);
                            for _ in 0..(x % 4) {
                                std::thread::yield_now();
                                assert_eq!(g.0, mine, "a writer got in after downgrade");
                            }
                            assert_eq!(g.1, !mine);
                            downgrades.fetch_add(1, Relaxed);
                        }
                        1 => {
                            let mut g = l.write();
                            g.0 = x;
                            g.1 = !x;
                        }
                        _ => {
                            let g = l.read();
                            assert_eq!(g.1, !g.0);
                        }
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Relaxed);
    });
    assert!(downgrades.load(Relaxed) > 0);
    assert_eq!(unsafe { l.raw() }.count_word(), 0);
}

fn timed_locks_time_out<const R: u8>() {
    let l = RwSemWith::<R, ON, ()>::new(());
    let w = l.write();
    std::thread::scope(|s| {
        s.spawn(|| {
            for ms in [1u64, 10, 20] {
                let d = Duration::from_millis(ms);
                let t0 = Instant::now();
                assert!(l.try_read_for(d).is_none());
                let dt = t0.elapsed();
                assert!(
                    dt >= d && dt < d + Duration::from_millis(500),
                    "read: {dt:?}"
                );
                let t0 = Instant::now();
                assert!(l.try_write_for(d).is_none());
                let dt = t0.elapsed();
                assert!(
                    dt >= d && dt < d + Duration::from_millis(500),
                    "write: {dt:?}"
                );
            }
        });
    });
    assert_eq!(
        unsafe { l.raw() }.count_word() & !rwsem::WRITER_LOCKED,
        0,
        "timed-out waiters left flags"
    );
    drop(w);
    let r = l.read();
    std::thread::scope(|s| {
        s.spawn(|| {
            let t0 = Instant::now();
            assert!(l.try_write_for(Duration::from_millis(10)).is_none());
            assert!(t0.elapsed() >= Duration::from_millis(10));
            // Readers still get in beside a reader.
            assert!(l.try_read_for(Duration::from_millis(10)).is_some());
        });
    });
    drop(r);
    assert!(l.try_write().is_some());
}

#[test]
fn timed_locks_time_out_spin() {
    timed_locks_time_out::<ON>();
}

#[test]
fn timed_locks_time_out_no_spin() {
    timed_locks_time_out::<OFF>();
}

/// Readers asleep behind a writer all wake when it unlocks: the grant marks
/// them and wakes the group through the lock's reader futex word. A lost
/// wake-up shows as an untimed reader that never returns (the test gives up
/// after 10 s) or a timed one that returns only at its 20 s deadline.
#[test]
fn a_grant_wakes_every_sleeping_reader() {
    use std::sync::{mpsc, Arc};
    for round in 0..3 {
        let l = Arc::new(RwSemWith::<OFF, ON, ()>::new(()));
        let w = l.write();
        let (tx, rx) = mpsc::channel();
        for t in 0..8 {
            let (l, tx) = (Arc::clone(&l), tx.clone());
            // Not scoped: a reader that never wakes must fail the test,
            // not hang it.
            std::thread::spawn(move || {
                let got = if t % 2 == 0 {
                    drop(l.read());
                    true
                } else {
                    l.try_read_for(Duration::from_secs(20)).is_some()
                };
                let _ = tx.send((t, got, Instant::now()));
            });
        }
        // Let them queue and fall asleep behind the writer.
        let t0 = Instant::now();
        while unsafe { l.raw() }.count_word() & WAITERS == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "readers never queued"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(50));
        let released = Instant::now();
        drop(w);
        for _ in 0..8 {
            let (t, got, at) = rx
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("round {round}: a reader was not woken by the grant"));
            assert!(got, "round {round}: timed reader {t} timed out");
            let waited = at.saturating_duration_since(released);
            assert!(
                waited < Duration::from_secs(5),
                "round {round}: reader {t} woke {waited:?} after the unlock (its deadline, not the grant)"
            );
        }
        assert_eq!(unsafe { l.raw() }.count_word(), 0, "count word not clean");
    }
}

/// Many short timed attempts of both kinds against a busy lock; afterwards
/// no flag is left and the lock works.
#[test]
fn many_timeouts_leave_the_lock_clean() {
    let l = RwSemWith::<ON, ON, u64>::new(0);
    let stop = AtomicBool::new(false);
    let (ok, timeouts) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (l, stop, ok, timeouts) = (&l, &stop, &ok, &timeouts);
            s.spawn(move || {
                let mut r = (t + 7).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                while !stop.load(Relaxed) {
                    let x = rng(&mut r);
                    let d = Duration::from_micros(x % 300);
                    let got = if t % 2 == 0 {
                        l.try_write_for(d).map(|mut g| {
                            *g += 1;
                            if x.is_multiple_of(8) {
                                std::thread::sleep(Duration::from_micros(200));
                            }
                        })
                    } else {
                        l.try_read_for(d).map(|_g| {
                            if x.is_multiple_of(8) {
                                std::thread::sleep(Duration::from_micros(200));
                            }
                        })
                    };
                    if got.is_some() {
                        ok.fetch_add(1, Relaxed);
                    } else {
                        timeouts.fetch_add(1, Relaxed);
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Relaxed);
    });
    assert!(ok.load(Relaxed) > 0);
    assert!(timeouts.load(Relaxed) > 0, "no attempt timed out");
    let raw = unsafe { l.raw() };
    assert_eq!(raw.count_word() & (WAITERS | rwsem::HANDOFF), 0);
    assert_eq!(raw.count_word(), 0);
    *l.write() += 1;
    drop(l.read());
}

/// With counters compiled in, a contended run moves them.
#[test]
fn events_move_under_contention() {
    use klock::events::{self, Event};
    let before: Vec<u64> = [
        Event::RwsemOptLock,
        Event::RwsemSleepReader,
        Event::RwsemSleepWriter,
    ]
    .iter()
    .map(|&e| events::read(e))
    .collect();
    no_torn_reads::<ON, ON>(4, 4, 200);
    let after: Vec<u64> = [
        Event::RwsemOptLock,
        Event::RwsemSleepReader,
        Event::RwsemSleepWriter,
    ]
    .iter()
    .map(|&e| events::read(e))
    .collect();
    if events::enabled() {
        assert!(
            after.iter().zip(&before).any(|(a, b)| a > b),
            "no rwsem event counted: {before:?} -> {after:?}"
        );
    } else {
        assert!(after.iter().all(|&v| v == 0));
    }
    let names: Vec<_> = events::snapshot(events::LockType::Rwsem)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for n in [
        "opt_lock",
        "opt_fail",
        "opt_nospin",
        "norspin",
        "rlock",
        "rlock_fast",
        "rlock_handoff",
        "wlock",
        "wlock_handoff",
        "sleep_reader",
        "sleep_writer",
        "wake_readers",
        "wake_writer",
        "unlock_grant",
        "grant_skip",
    ] {
        assert!(names.contains(&n), "missing event {n}");
    }
}
