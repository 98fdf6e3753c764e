//! Loom models of the rw-semaphore: reader/writer exclusion (fast paths,
//! optimistic spinning, the wait list, grants, downgrade, timed locks);
//! the nonspinnable bits (set only while reader-owned, carried by the
//! adaptive rules, cleared by a fast-path writer); all queued readers
//! woken together; a hand-off waiter cannot be overtaken; a write unlock
//! grants the reader at the front in the same RMW (no writer gets in
//! first); readers behind a front writer are granted past it once they
//! waited their bound; in `STEAL` mode a reader takes a free lock past
//! queued waiters, never past a hand-off; readers woken to compete (not
//! granted) are all woken, never beside a writer, and queue again when a
//! writer wins.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p klock --release --test loom_rwsem
//! ```
//!
//! * Exclusion: the protected value is a loom `UnsafeCell`; writers write
//!   it (`with_mut`), readers read it (`with`), so a reader beside a
//!   writer, or two writers, is a reported data race; the final value
//!   counts the writes exactly.
//! * Lost wake-ups: a parked waiter re-checks its futex word until a
//!   waker changes it, so a missing wake-up or grant makes it spin until
//!   loom gives up on the execution (a failure). The lock also asserts,
//!   under loom, that `WAITERS` is set whenever a waiter is queued.
//! * Exclusion, reader wake-ups, the hand-off, the grant at unlock and the
//!   reader wait bound each have a deliberately
//!   broken variant of the lock (`klock::rwsem::broken`) that the same
//!   model must reject.
#![cfg(loom)]

#[path = "support/loom.rs"]
mod support;

use klock::rwsem::{
    broken, RawRwSemWith, HANDOFF, NONSPINNABLE, OFF, ON, RD_NONSPINNABLE, READER_OWNED, STEAL,
    WAITERS, WR_NONSPINNABLE,
};
use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use support::{
    builder, bump, check, join_all, probe_coverage, read, spawn_part, spawn_parts, Data,
};

probe_coverage!(klock::rwsem::Probe {
    spin_successes, quick_spins, nospin_sets, norspins, rd_set_by_writer, rd_set_by_reader, grants,
    handoff_requests, sleeps, wakes_of_sleepers, timeouts, downgrades, rlock_fast, steals,
    passes, compete_wakes, woken_wins, requeues,
} max { max_group });

/// What one thread does.
#[derive(Clone, Copy, Debug)]
enum Part {
    /// Read-lock, read, unlock.
    Read,
    /// Write-lock, increment, unlock.
    Write,
    /// Write-lock, increment, downgrade, read twice (the value must not
    /// change: no writer may get in), unlock.
    Downgrade,
    /// A timed read lock (deadline this many ns of loom clock ahead).
    TimedRead(u64),
    /// A timed write lock.
    TimedWrite(u64),
}

type Lock<const R: u8, const A: u8> = RawRwSemWith<R, A>;

/// Returns the number of writes made.
fn run_part<const R: u8, const A: u8>(l: &Lock<R, A>, data: &Data, p: Part) -> u32 {
    match p {
        Part::Read => {
            let _g = l.raw_lock_shared();
            read(data);
            unsafe { l.raw_unlock_shared() };
            0
        }
        Part::Write => {
            let g = l.raw_lock_exclusive();
            bump(data);
            unsafe { l.raw_unlock_exclusive(g) };
            1
        }
        Part::Downgrade => {
            let g = l.raw_lock_exclusive();
            bump(data);
            let _r = unsafe { l.raw_downgrade(g) };
            let v = read(data);
            loom::thread::yield_now();
            assert_eq!(read(data), v, "a writer got in after downgrade");
            unsafe { l.raw_unlock_shared() };
            1
        }
        Part::TimedRead(ns) => {
            if l.raw_try_lock_shared_until_ns(klock::sys::monotonic_ns() + ns)
                .is_some()
            {
                read(data);
                unsafe { l.raw_unlock_shared() };
            }
            0
        }
        Part::TimedWrite(ns) => {
            match l.raw_try_lock_exclusive_until_ns(klock::sys::monotonic_ns() + ns) {
                Some(g) => {
                    bump(data);
                    unsafe { l.raw_unlock_exclusive(g) };
                    1
                }
                None => 0,
            }
        }
    }
}

/// The main thread write-locks first (if `main_writes`), spawns one thread
/// per part, then plays `main` (after releasing its write lock).
fn model<const R: u8, const A: u8>(
    main_writes: bool,
    main: Option<Part>,
    parts: &'static [Part],
    broken_mode: u8,
) -> std::sync::Arc<Coverage> {
    model_with::<R, A>(main_writes, main, parts, broken_mode, true)
}

/// [`model`], with the quick spin on or off.
fn model_with<const R: u8, const A: u8>(
    main_writes: bool,
    main: Option<Part>,
    parts: &'static [Part],
    broken_mode: u8,
    quick_spin: bool,
) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let l = Arc::new(Lock::<R, A>::new());
        l.set_loom_broken(broken_mode);
        if !quick_spin {
            l.set_loom_no_quick_spin();
        }
        let data = Arc::new(Data::new(0));
        let held = main_writes.then(|| l.raw_lock_exclusive());
        let hs = spawn_parts(&l, &data, parts, run_part);
        let mut writes = 0;
        if let Some(g) = held {
            bump(&data);
            unsafe { l.raw_unlock_exclusive(g) };
            writes += 1;
        }
        if let Some(p) = main {
            writes += run_part(&*l, &data, p);
        }
        writes += join_all(hs).iter().sum::<u32>();
        assert_eq!(read(&data), writes);
        assert_eq!(l.count_word(), 0, "count word not clean");
        assert!(l.wait_list_is_empty(), "wait list not empty");
        c.add(l.probe());
    })
}

/// Runs the model of a broken variant, which loom must reject (`what`
/// otherwise).
fn expect_failure(what: &str, f: impl FnOnce() + std::panic::UnwindSafe) {
    let msg = support::expect_failure(what, f);
    eprintln!("broken variant rejected: {msg}");
}

/// Yields until `n` waiters are queued (and off `wait_lock`).
fn wait_parking<const R: u8, const A: u8>(l: &Lock<R, A>, n: u32) {
    while l.waiters_parking() < n {
        loom::thread::yield_now();
    }
}

/// Read-locks, says so in `flag`, unlocks.
fn flag_reader<const R: u8, const A: u8>(l: &Lock<R, A>, flag: &AtomicBool, _: ()) {
    let _r = l.raw_lock_shared();
    flag.store(true, Relaxed);
    unsafe { l.raw_unlock_shared() };
}

// ---------------------------------------------------------------------------
// Exclusion.

/// No spinning: a reader and a writer queue behind the main thread's write
/// lock, the main thread then reads.
#[test]
fn exclusion_sleeping() {
    let cov = model::<OFF, OFF>(true, Some(Part::Read), &[Part::Read, Part::Write], 0);
    assert!(cov.sleeps.load(Relaxed) > 0);
    assert!(cov.grants.load(Relaxed) > 0);
    assert!(cov.wakes_of_sleepers.load(Relaxed) > 0);
}

/// Reader and writer spinning on: spins on the writer, reader probes, the
/// writer's time-based spin on readers.
#[test]
fn exclusion_spinning() {
    let cov = model::<ON, ON>(true, None, &[Part::Read, Part::Write], 0);
    assert!(cov.spin_successes.load(Relaxed) > 0);
    assert!(cov.quick_spins.load(Relaxed) > 0);
}

/// The quick spin's reader must check its probe: a writer can take the
/// lock between the poll that showed it free and the probe (here the
/// main thread, write-locking again right after its unlock).
#[test]
fn broken_quick_spin_trusting_its_poll_is_caught() {
    expect_failure("loom should have found the reader beside a writer", || {
        model::<ON, ON>(
            true,
            Some(Part::Write),
            &[Part::Read],
            broken::QUICK_TRUSTS_POLL,
        );
    });
}

/// Downgrade: no writer gets in between the write lock and the read lock
/// it becomes; a queued reader may join.
#[test]
fn downgrade_keeps_exclusion() {
    let cov = model::<OFF, OFF>(false, Some(Part::Downgrade), &[Part::Write], 0);
    assert!(cov.downgrades.load(Relaxed) > 0);
}

/// Timed attempts give up while the main thread holds the write lock
/// (clock: 1 µs per reading) and leave the list and the count clean.
#[test]
fn timed_waiters_leave_cleanly() {
    let cov = model::<OFF, OFF>(
        true,
        None,
        &[Part::TimedRead(4_000), Part::TimedWrite(4_000)],
        0,
    );
    assert!(cov.timeouts.load(Relaxed) > 0);
}

/// The model can fail: a read fast path that ignores `WRITER_LOCKED` lets a
/// reader in beside the writer (a data race on the protected value).
#[test]
fn broken_read_fast_path_is_caught() {
    expect_failure("loom should have found a reader beside the writer", || {
        model::<OFF, OFF>(true, None, &[Part::Read], broken::READ_IGNORES_WRITER);
    });
}

// ---------------------------------------------------------------------------
// Nonspinnable bits.

/// The main thread holds a read lock while a writer spins on it: the
/// writer's time-based spin runs out and sets both bits — on the
/// reader-owned owner word only. The writer, having seen
/// `WR_NONSPINNABLE`, sets `RD_NONSPINNABLE` when it gets the lock
/// (adaptive), and `WR_NONSPINNABLE` is gone. A later fast-path writer
/// clears `RD_NONSPINNABLE`.
#[test]
fn nonspinnable_bits_set_while_reader_owned_cleared_by_fast_writer() {
    let cov = check(builder(), "", |c: &Coverage| {
        let l = Arc::new(Lock::<ON, ON>::new());
        // The writer must reach its spin on readers, not win a quick poll.
        l.set_loom_no_quick_spin();
        let data = Arc::new(Data::new(0));
        let seen_rd = Arc::new(AtomicBool::new(false));
        let _r = l.raw_lock_shared();
        let w = {
            let (l, data, seen_rd) = (l.clone(), data.clone(), seen_rd.clone());
            loom::thread::spawn(move || {
                let g = l.raw_lock_exclusive();
                let o = l.owner_word();
                assert_eq!(o & READER_OWNED, 0, "writer owns: no reader flag");
                assert_eq!(
                    o & WR_NONSPINNABLE,
                    0,
                    "WR_NONSPINNABLE outlived its read phase"
                );
                seen_rd.store(o & RD_NONSPINNABLE != 0, Relaxed);
                bump(&data);
                unsafe { l.raw_unlock_exclusive(g) };
            })
        };
        // Hold the read lock while the writer spins (its threshold is three
        // clock readings under loom).
        for _ in 0..3 {
            let o = l.owner_word();
            // While we hold the read lock the owner word says reader-owned.
            assert_ne!(o & READER_OWNED, 0);
            loom::thread::yield_now();
        }
        unsafe { l.raw_unlock_shared() };
        w.join().unwrap();
        let p = l.probe();
        if p.nospin_sets.load(Relaxed) > 0 {
            // The writer failed its spin after the bits were set, saw
            // WR_NONSPINNABLE, and carried RD_NONSPINNABLE into its hold.
            assert!(seen_rd.load(Relaxed), "adaptive: writer did not set RD");
        }
        let o = l.owner_word();
        assert_eq!(o & WR_NONSPINNABLE, 0);
        // A fast-path writer clears the bits.
        let g = l.raw_lock_exclusive();
        assert_eq!(l.owner_word() & NONSPINNABLE, 0, "fast path must clear");
        bump(&data);
        unsafe { l.raw_unlock_exclusive(g) };
        assert_eq!(read(&data), 2);
        assert_eq!(l.count_word(), 0);
        c.add(l.probe());
    });
    assert!(
        cov.nospin_sets.load(Relaxed) > 0,
        "the timeout path never ran"
    );
    assert!(cov.rd_set_by_writer.load(Relaxed) > 0);
}

/// A writer spinning on a *writer* never sets the nonspinnable bits.
#[test]
fn nonspinnable_bits_never_set_on_a_writer() {
    let cov = model::<ON, ON>(true, None, &[Part::Write], 0);
    assert_eq!(cov.nospin_sets.load(Relaxed), 0);
}

/// With `RD_NONSPINNABLE` set, a reader does not spin: it queues, and when
/// it is granted the lock through the wake-up path it sets the bit again
/// (adaptive). A fast-path writer then clears it.
#[test]
fn rd_nonspinnable_stops_readers_and_is_carried() {
    let cov = check(builder(), "", |c: &Coverage| {
        let l = Arc::new(Lock::<ON, ON>::new());
        let data = Arc::new(Data::new(0));
        let g = l.raw_lock_exclusive();
        l.loom_set_owner(l.owner_word() | RD_NONSPINNABLE);
        let r = spawn_part(&l, &data, Part::Read, run_part);
        bump(&data);
        unsafe { l.raw_unlock_exclusive(g) };
        r.join().unwrap();
        let p = l.probe();
        assert_eq!(
            p.spin_successes.load(Relaxed) + p.quick_spins.load(Relaxed),
            0,
            "a reader spun despite RD_NONSPINNABLE"
        );
        // The write unlock keeps the bit; a reader keeps or re-sets it.
        assert_ne!(l.owner_word() & RD_NONSPINNABLE, 0, "RD_NONSPINNABLE lost");
        let g = l.raw_lock_exclusive();
        assert_eq!(l.owner_word() & NONSPINNABLE, 0);
        unsafe { l.raw_unlock_exclusive(g) };
        c.add(l.probe());
    });
    assert!(cov.norspins.load(Relaxed) > 0);
    assert!(cov.rd_set_by_reader.load(Relaxed) > 0);
}

// ---------------------------------------------------------------------------
// Readers woken together.

fn readers_wake_together(broken_mode: u8) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let l = Arc::new(Lock::<OFF, OFF>::new());
        l.set_loom_broken(broken_mode);
        let inside = Arc::new(AtomicUsize::new(0));
        let g = l.raw_lock_exclusive();
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (l, inside) = (l.clone(), inside.clone());
                loom::thread::spawn(move || {
                    let _r = l.raw_lock_shared();
                    inside.fetch_add(1, Release);
                    // Hold the read lock until the other reader is in too:
                    // both must hold it at once.
                    while inside.load(Acquire) < 2 {
                        loom::thread::yield_now();
                    }
                    unsafe { l.raw_unlock_shared() };
                })
            })
            .collect();
        unsafe { l.raw_unlock_exclusive(g) };
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(l.count_word(), 0);
        assert!(l.wait_list_is_empty());
        c.add(l.probe());
    })
}

/// Two readers queued behind a writer are granted the lock by one wake-up.
#[test]
fn all_queued_readers_wake_together() {
    let cov = readers_wake_together(0);
    assert!(
        cov.max_group.load(Relaxed) >= 2,
        "never granted two readers at once"
    );
}

/// The model can fail: a wake-up that grants only the first reader leaves
/// the second queued while the first waits for it.
#[test]
fn broken_grant_one_reader_is_caught() {
    expect_failure("loom should have found the stranded reader", || {
        readers_wake_together(broken::GRANT_ONE_READER);
    });
}

// ---------------------------------------------------------------------------
// Hand-off.

/// The main thread holds the write lock until a queued writer demands a
/// hand-off, unlocks, and takes the lock straight back: for writing, or
/// (`read_back`) for reading, which in `STEAL` mode is a steal attempt on a
/// lock held by nobody.
fn handoff_model<const R: u8>(broken_mode: u8, read_back: bool) -> std::sync::Arc<Coverage> {
    handoff_model_with::<R>(broken_mode, read_back, false)
}

/// As `handoff_model`, with reader passing on or off for the lock.
fn handoff_model_with<const R: u8>(
    broken_mode: u8,
    read_back: bool,
    pass: bool,
) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let l = Arc::new(Lock::<R, OFF>::new());
        l.set_loom_broken(broken_mode);
        l.set_loom_reader_pass(pass);
        // Every first waiter demands a hand-off at once.
        l.set_loom_wait_timeout_ns(0);
        let got = Arc::new(AtomicBool::new(false));
        let g = l.raw_lock_exclusive();
        let w = spawn_part(&l, &got, (), |l: &Lock<R, OFF>, got: &AtomicBool, ()| {
            let g = l.raw_lock_exclusive();
            got.store(true, Relaxed);
            unsafe { l.raw_unlock_exclusive(g) };
        });
        // Hold the lock until the waiter has queued and demanded it
        // (HANDOFF, once set, stays set while we hold the lock).
        while l.count_word() & HANDOFF == 0 {
            loom::thread::yield_now();
        }
        unsafe { l.raw_unlock_exclusive(g) };
        // Try to take the lock straight back: the waiter must come first.
        if read_back {
            let _r = l.raw_lock_shared();
            assert!(got.load(Relaxed), "the hand-off waiter was overtaken");
            unsafe { l.raw_unlock_shared() };
        } else {
            let g = l.raw_lock_exclusive();
            assert!(got.load(Relaxed), "the hand-off waiter was overtaken");
            unsafe { l.raw_unlock_exclusive(g) };
        }
        w.join().unwrap();
        assert_eq!(l.count_word(), 0);
        c.add(l.probe());
    })
}

/// A first waiter that set `HANDOFF` gets the lock before the unlocker can
/// take it back.
#[test]
fn handoff_waiter_cannot_be_overtaken() {
    let cov = handoff_model::<OFF>(0, false);
    assert!(cov.handoff_requests.load(Relaxed) > 0);
}

/// The model can fail: trylocks that ignore `HANDOFF` let the unlocker
/// take the lock straight back.
#[test]
fn broken_handoff_is_caught() {
    expect_failure("loom should have found the overtaken waiter", || {
        handoff_model::<OFF>(broken::IGNORE_HANDOFF, false);
    });
}

// ---------------------------------------------------------------------------
// Grant at write unlock: a barging writer cannot get in before the readers
// that the unlock let go.

fn unlock_grant_model(broken_mode: u8) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let l = Arc::new(Lock::<OFF, OFF>::new());
        l.set_loom_broken(broken_mode);
        let reader_in = Arc::new(AtomicBool::new(false));
        let g = l.raw_lock_exclusive();
        let r = spawn_part(&l, &reader_in, (), flag_reader);
        // The reader is queued at the front (and off wait_lock) before we
        // unlock.
        wait_parking(&l, 1);
        // A writer that arrives behind the reader: before, during or after
        // our unlock.
        let w = {
            let (l, reader_in) = (l.clone(), reader_in.clone());
            loom::thread::spawn(move || {
                let g = l.raw_lock_exclusive();
                assert!(
                    reader_in.load(Relaxed),
                    "a writer took the lock before the reader the unlock let go"
                );
                unsafe { l.raw_unlock_exclusive(g) };
            })
        };
        unsafe { l.raw_unlock_exclusive(g) };
        r.join().unwrap();
        w.join().unwrap();
        assert_eq!(l.count_word(), 0);
        assert!(l.wait_list_is_empty());
        c.add(l.probe());
    })
}

/// A write unlock with a reader queued at the front grants it the lock in
/// the same RMW that releases the write lock: a writer arriving after the
/// unlock cannot take the lock before that reader.
#[test]
fn unlock_grants_front_reader_before_any_writer() {
    let cov = unlock_grant_model(0);
    assert!(cov.grants.load(Relaxed) > 0);
}

/// The model can fail: an unlock that releases first and grants after
/// (a wake-up to a free lock) lets the arriving writer in first.
#[test]
fn broken_wake_without_grant_is_caught() {
    expect_failure(
        "loom should have found the writer barging past the reader",
        || {
            unlock_grant_model(broken::WAKE_WITHOUT_GRANT);
        },
    );
}

/// The model can fail when the count never shows a reader at the front
/// (`FRONT_READER`): the write unlock, its hint's CAS failing on
/// `WAITERS`, then releases the lock with a plain CAS and wakes the
/// reader to a free lock, and the arriving writer can take it first.
#[test]
fn broken_no_front_reader_is_caught() {
    expect_failure(
        "loom should have found the writer barging past the reader",
        || {
            unlock_grant_model(broken::NO_FRONT_READER);
        },
    );
}

// ---------------------------------------------------------------------------
// Reader wait bound: readers queued behind a writer at the front are granted
// past it by a write unlock once they waited `reader_wait_ns` (here 0).

fn reader_bound_model(broken_mode: u8) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let l = Arc::new(Lock::<OFF, OFF>::new());
        l.set_loom_broken(broken_mode);
        // Readers behind a front writer are granted at the next write
        // unlock at once; the writer's own hand-off (4 ms of loom clock)
        // never comes.
        l.set_loom_reader_wait_ns(0);
        let reader_in = Arc::new(AtomicBool::new(false));
        let g = l.raw_lock_exclusive();
        let w = {
            let (l, reader_in) = (l.clone(), reader_in.clone());
            loom::thread::spawn(move || {
                let g = l.raw_lock_exclusive();
                let r = reader_in.load(Relaxed);
                unsafe { l.raw_unlock_exclusive(g) };
                r
            })
        };
        // The writer queued first (and is off wait_lock), then the reader.
        wait_parking(&l, 1);
        let r = spawn_part(&l, &reader_in, (), flag_reader);
        wait_parking(&l, 2);
        // Writer at the front, reader behind it: our unlock grants the
        // reader past the writer.
        unsafe { l.raw_unlock_exclusive(g) };
        r.join().unwrap();
        assert!(
            w.join().unwrap(),
            "the reader stayed queued behind the front writer past its bound"
        );
        assert_eq!(l.count_word(), 0);
        assert!(l.wait_list_is_empty());
        c.add(l.probe());
    })
}

/// A reader queued behind a writer at the front that has waited its bound
/// is granted the lock by the next write unlock, before that writer.
#[test]
fn starving_reader_granted_past_front_writer() {
    let cov = reader_bound_model(0);
    assert!(cov.grants.load(Relaxed) > 0);
}

/// The model can fail: without the bound the front writer goes first.
#[test]
fn broken_no_reader_bound_is_caught() {
    expect_failure(
        "loom should have found the reader left behind the writer",
        || {
            reader_bound_model(broken::NO_READER_BOUND);
        },
    );
}

// ---------------------------------------------------------------------------
// Reader lock stealing (`STEAL`): a reader takes a free lock past queued
// waiters, but never into a hand-off.

/// A reader and a writer queue behind the main thread's write lock; the
/// main thread then reads, and can steal the lock freed for the queued
/// writer before that writer runs.
#[test]
fn exclusion_stealing() {
    let cov = model::<STEAL, OFF>(true, Some(Part::Read), &[Part::Read, Part::Write], 0);
    assert!(cov.steals.load(Relaxed) > 0);
    assert!(cov.sleeps.load(Relaxed) > 0);
}

/// A first waiter that set `HANDOFF` gets the lock before a reader that
/// would otherwise steal it.
#[test]
fn stealing_reader_respects_handoff() {
    let cov = handoff_model::<STEAL>(0, true);
    assert!(cov.handoff_requests.load(Relaxed) > 0);
}

/// The model can fail: a stealing reader that ignores `HANDOFF` overtakes
/// the waiter.
#[test]
fn broken_steal_past_handoff_is_caught() {
    expect_failure("loom should have found the overtaken waiter", || {
        handoff_model::<STEAL>(broken::PAST_QUEUE_IGNORES_HANDOFF, true);
    });
}

// ---------------------------------------------------------------------------
// Reader passing: a reader takes a lock no writer holds past queued waiters,
// but never past a hand-off.

/// A reader passing queued waiters does not pass a first waiter that set
/// `HANDOFF`.
#[test]
fn passing_reader_respects_handoff() {
    let cov = handoff_model_with::<OFF>(0, true, true);
    assert!(cov.handoff_requests.load(Relaxed) > 0);
}

/// The model can fail: a passing reader that ignores `HANDOFF` overtakes
/// the waiter.
#[test]
fn broken_pass_past_handoff_is_caught() {
    expect_failure("loom should have found the overtaken waiter", || {
        handoff_model_with::<OFF>(broken::PAST_QUEUE_IGNORES_HANDOFF, true, true);
    });
}

/// The main thread holds the write lock until a writer has queued behind
/// it, unlocks (waking the writer) and read-locks at once: it may pass the
/// queued writer, but never overlaps it (loom checks the data accesses),
/// and everything is clean at the end.
#[test]
fn passing_reader_excludes_the_queued_writer() {
    let cov = pass_model(0);
    assert!(
        cov.passes.load(Relaxed) > 0,
        "no reader ever passed the queue"
    );
}

/// The model can fail: a passing reader that ignores `WRITER_LOCKED`
/// reads beside a writer.
#[test]
fn broken_pass_past_writer_is_caught() {
    expect_failure("loom should have found the reader beside a writer", || {
        pass_model(broken::PAST_QUEUE_IGNORES_WRITER);
    });
}

fn pass_model(broken_mode: u8) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let l = Arc::new(Lock::<OFF, OFF>::new());
        l.set_loom_reader_pass(true);
        l.set_loom_broken(broken_mode);
        let data = Arc::new(Data::new(0));
        let g = l.raw_lock_exclusive();
        let w = spawn_part(&l, &data, Part::Write, run_part);
        // Hold the lock until the writer has queued.
        while l.count_word() & WAITERS == 0 {
            loom::thread::yield_now();
        }
        bump(&data);
        unsafe { l.raw_unlock_exclusive(g) };
        // Read at once: we may pass the queued (woken) writer, never
        // overlap it.
        let writes = 1 + run_part(&l, &data, Part::Read) + w.join().unwrap();
        assert_eq!(read(&data), writes);
        assert_eq!(l.count_word(), 0, "count word not clean");
        assert!(l.wait_list_is_empty(), "wait list not empty");
        c.add(l.probe());
    })
}

// ---------------------------------------------------------------------------
// Readers woken to compete (grant bound not reached): the lock falls free
// at the wake-up, a writer may win it, and the losing readers queue again.

/// The main thread holds the write lock while `readers` readers queue
/// behind it; a writer arrives while the main thread unlocks. The readers'
/// grant bound is never reached, so the unlock wakes them to compete.
fn compete_model(readers: usize, broken_mode: u8) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let l = Arc::new(Lock::<OFF, OFF>::new());
        l.set_loom_broken(broken_mode);
        // (u64::MAX would mean "the global bound", 0 under loom.)
        l.set_loom_reader_grant_ns(u64::MAX - 1);
        let data = Arc::new(Data::new(0));
        let g = l.raw_lock_exclusive();
        let rs = spawn_parts(&l, &data, &vec![Part::Read; readers], run_part);
        // The readers are queued (and off wait_lock) before we unlock.
        wait_parking(&l, readers as u32);
        let w = spawn_part(&l, &data, Part::Write, run_part);
        bump(&data);
        unsafe { l.raw_unlock_exclusive(g) };
        let writes = 1 + w.join().unwrap() + join_all(rs).iter().sum::<u32>();
        assert_eq!(read(&data), writes);
        assert_eq!(l.count_word(), 0, "count word not clean");
        assert!(l.wait_list_is_empty(), "wait list not empty");
        c.add(l.probe());
    })
}

/// A reader woken to compete takes the free lock, or loses it to the
/// arriving writer and queues again; that writer's unlock lets it go.
#[test]
fn woken_reader_competes_and_requeues() {
    let cov = compete_model(1, 0);
    assert!(cov.compete_wakes.load(Relaxed) > 0);
    assert!(cov.woken_wins.load(Relaxed) > 0);
    assert!(cov.requeues.load(Relaxed) > 0, "a writer never won");
    assert_eq!(cov.grants.load(Relaxed), 0, "the bound was never reached");
}

/// The model can fail: a wake-up that unlinks the readers but neither
/// marks nor wakes them leaves a reader parked off the list (a lost
/// wake-up). Loom reports that as a deadlock and then aborts the process
/// while unwinding, so the broken model runs in a child process (the
/// ignored test below) whose failure and message are checked here.
#[test]
fn broken_compete_without_wake_is_caught() {
    support::expect_deadlock_in_child("broken_compete_without_wake_child", true, &[]);
}

/// The child of [`broken_compete_without_wake_is_caught`].
#[test]
#[ignore = "run by broken_compete_without_wake_is_caught in a child process"]
fn broken_compete_without_wake_child() {
    compete_model(1, broken::COMPETE_NO_WAKE);
}

/// The model can fail: a woken reader that takes the lock as if granted
/// ends up beside the writer that won it.
#[test]
fn broken_compete_as_grant_is_caught() {
    expect_failure(
        "loom should have found the reader beside the writer",
        || {
            compete_model(1, broken::COMPETE_AS_GRANT);
        },
    );
}

// ---------------------------------------------------------------------------
// WRITER_WOKEN: unlocks do not wake a front writer that was woken and has not
// looked at the lock again; it clears the bit (an RMW) before its trylock.

/// A writer queued behind the main thread's write lock can be woken, lose
/// the lock to the main thread reading (a spinning reader takes a free lock
/// past the waiters bit), and sleep again through that read phase: the
/// read unlock must wake it a second time.
#[test]
fn woken_writer_is_woken_again() {
    // The writer must queue (the quick spin off: see the child below).
    let cov = model_with::<ON, OFF>(true, Some(Part::Read), &[Part::Write], 0, false);
    assert!(cov.wakes_of_sleepers.load(Relaxed) > 0);
}

/// The model can fail: a writer that never clears `WRITER_WOKEN` is never
/// woken again after its first wake-up (loom finds the deadlock; run in a
/// child process, as above).
#[test]
fn broken_woken_never_cleared_is_caught() {
    support::expect_deadlock_in_child("broken_woken_never_cleared_child", true, &[]);
}

/// The child of [`broken_woken_never_cleared_is_caught`].
#[test]
#[ignore = "run by broken_woken_never_cleared_is_caught in a child process"]
fn broken_woken_never_cleared_child() {
    // The writer must queue: with the quick spin on, its polls' yields let
    // the main thread release first in every execution.
    model_with::<ON, OFF>(
        true,
        Some(Part::Read),
        &[Part::Write],
        broken::WOKEN_NEVER_CLEARED,
        false,
    );
}
