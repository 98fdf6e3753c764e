//! Loom model of the optimistic-spinning mutex: mutual exclusion through
//! the fast path, optimistic spinning (OSQ), the sleep path and the
//! hand-off; no lost wake-up; a timed-out waiter leaves cleanly.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p klock --release --test loom_mutex
//! ```
//!
//! * Mutual exclusion: the protected counter is a loom `UnsafeCell`, so
//!   two holders at once are a reported data race, and the final count is
//!   exact.
//! * Lost wake-ups: under loom a futex wait is a yield that returns, and a
//!   parked waiter re-checks its own futex word until a waker sets it. A
//!   wake-up that never comes therefore makes the waiter spin forever and
//!   loom fails the model. In addition, the mutex asserts (under loom) the
//!   invariant that makes wake-ups reliable: while a waiter is queued,
//!   `WAITERS` is set whenever a thread holds `wait_lock`.
//! * `WOKEN`: an unlock that finds the first waiter awake skips the
//!   wake-up; the waiter clears `WOKEN` under `wait_lock` before its last
//!   trylock, so no model loses it (the three-thread models reach the skip).
//! * Hand-off: with a hand-off bound of 0 every first waiter demands the
//!   lock; the `UnsafeCell` check shows nobody steals a `PICKUP`.
//! * After each execution: the owner word is 0 and the wait list is empty.
//!
//! Each model records, through the mutex's loom-only `Probe`, which paths
//! its executions took, and asserts the interesting ones were reached.
#![cfg(loom)]

#[path = "support/loom.rs"]
mod support;

use klock::mutex::{Probe, RawMutexWith, WaitLockRaw, YieldLock, NO_OWNER_SPIN, OWNER_SPIN};
use klock::qspinlock::RawQSpinLockWith;
use loom::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use support::{
    builder, bump, check, expect_failure, join_all, probe_coverage, read, spawn_part, spawn_parts,
    Data,
};

probe_coverage!(Probe {
    spin_successes,
    osq_unqueues,
    sleeps,
    wakes_of_sleepers,
    handoff_requests,
    handoffs,
    pickups,
    timeouts,
    wake_next_on_leave,
    woken_skips,
    lazy_waits,
});

/// What one thread does.
#[derive(Clone, Copy, Debug)]
enum Part {
    /// Lock, increment, unlock; this many times.
    Lock(u32),
    /// One timed attempt with a deadline this many ns (loom clock: 1 µs
    /// per reading) from now; increment if it succeeded.
    Timed(u64),
}

/// Returns how many acquisitions succeeded.
fn run_part<const S: u8, W: WaitLockRaw>(m: &RawMutexWith<S, W>, data: &Data, p: Part) -> u32 {
    match p {
        Part::Lock(n) => {
            for _ in 0..n {
                let g = m.raw_lock();
                bump(data);
                unsafe { m.raw_unlock(g) };
            }
            n
        }
        Part::Timed(ns) => {
            let deadline = klock::sys::monotonic_ns() + ns;
            match m.raw_try_lock_until_ns(deadline) {
                Some(g) => {
                    bump(data);
                    unsafe { m.raw_unlock(g) };
                    1
                }
                None => 0,
            }
        }
    }
}

/// The main thread plays `parts[0]` (after locking first if `main_holds`,
/// so the others must contend), one spawned thread plays each other part.
fn model<const S: u8, W: WaitLockRaw + 'static>(
    parts: &'static [Part],
    main_holds: bool,
    handoff_ns: u64,
) -> std::sync::Arc<Coverage> {
    model_with::<S, W>(parts, main_holds, handoff_ns, false, 0)
}

/// [`model`] with a broken unlock or a lazy wait of `lazy_ns` a round.
fn model_with<const S: u8, W: WaitLockRaw + 'static>(
    parts: &'static [Part],
    main_holds: bool,
    handoff_ns: u64,
    broken_unlock: bool,
    lazy_ns: u64,
) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let m = Arc::new(RawMutexWith::<S, W>::new());
        m.set_loom_handoff_ns(handoff_ns);
        m.set_loom_lazy_ns(lazy_ns);
        if broken_unlock {
            m.set_loom_broken_unlock();
        }
        let data = Arc::new(Data::new(0));
        let held = main_holds.then(|| m.raw_lock());
        let hs = spawn_parts(&m, &data, &parts[1..], run_part);
        let mut total = 0;
        if let Some(g) = held {
            bump(&data);
            unsafe { m.raw_unlock(g) };
            total += 1;
        }
        total += run_part(&*m, &data, parts[0]);
        total += join_all(hs).iter().sum::<u32>();
        assert_eq!(read(&data), total);
        assert_eq!(m.word(), 0, "owner word not clean");
        assert!(m.wait_list_is_empty(), "wait list not empty");
        c.add(m.probe());
    })
}

const NEVER: u64 = u64::MAX / 2;

/// Two lockers, spinning on: the OSQ-gated spin takes the lock.
#[test]
fn spin_two_threads() {
    let cov = model::<OWNER_SPIN, YieldLock>(&[Part::Lock(1), Part::Lock(1)], true, NEVER);
    assert!(cov.spin_successes.load(Relaxed) > 0);
}

/// Two lockers, no spinning: the second sleeps and must be woken (no lost
/// wake-up between its queueing and the unlock).
#[test]
fn sleep_two_threads() {
    let cov = model::<NO_OWNER_SPIN, YieldLock>(&[Part::Lock(1), Part::Lock(1)], true, NEVER);
    assert!(cov.sleeps.load(Relaxed) > 0);
    assert!(cov.wakes_of_sleepers.load(Relaxed) > 0);
}

/// Three lockers, no spinning: two waiters in the FIFO list.
#[test]
fn sleep_three_threads() {
    let cov = model::<NO_OWNER_SPIN, YieldLock>(
        &[Part::Lock(0), Part::Lock(1), Part::Lock(1)],
        true,
        NEVER,
    );
    assert!(cov.wakes_of_sleepers.load(Relaxed) > 0);
    assert!(cov.woken_skips.load(Relaxed) > 0);
}

/// Three lockers spinning: a second spinner queues in the OSQ behind the
/// first and may give up (unqueue) while the lock changes hands.
#[test]
fn spin_three_threads() {
    let cov =
        model::<OWNER_SPIN, YieldLock>(&[Part::Lock(0), Part::Lock(1), Part::Lock(1)], true, NEVER);
    assert!(cov.spin_successes.load(Relaxed) > 0);
}

/// Hand-off bound 0: a queued waiter demands the lock; the unlock hands it
/// over (PICKUP) while the main thread tries to re-lock at once.
#[test]
fn handoff_cannot_be_stolen() {
    let cov = model::<NO_OWNER_SPIN, YieldLock>(&[Part::Lock(1), Part::Lock(1)], true, 0);
    assert!(cov.handoff_requests.load(Relaxed) > 0);
    assert!(cov.handoffs.load(Relaxed) > 0);
    assert!(cov.pickups.load(Relaxed) > 0);
}

/// A timed waiter gives up (possibly right after being woken) while the
/// lock changes hands: it must leave the list cleanly.
#[test]
fn timed_waiter_leaves_cleanly() {
    let cov = model::<NO_OWNER_SPIN, YieldLock>(
        &[Part::Lock(0), Part::Timed(5_000), Part::Lock(1)],
        true,
        NEVER,
    );
    assert!(cov.timeouts.load(Relaxed) > 0);
    assert!(cov.wake_next_on_leave.load(Relaxed) > 0);
}

/// The main thread holds the lock until a timed waiter has given up; a
/// second waiter may be queued behind it. The timed waiter must unlink
/// itself and, if it was first, wake the next one; the second waiter must
/// get the lock once the main thread unlocks (no lost wake-up).
#[test]
fn timed_first_waiter_times_out_with_waiter_behind() {
    let cov = check(builder(), "", |c: &Coverage| {
        let m = Arc::new(RawMutexWith::<NO_OWNER_SPIN, YieldLock>::new());
        let data = Arc::new(Data::new(0));
        let g = m.raw_lock();
        let timed = spawn_part(&m, &data, Part::Timed(4_000), run_part);
        let other = spawn_part(&m, &data, Part::Lock(1), run_part);
        assert_eq!(timed.join().unwrap(), 0, "got a lock that was held");
        bump(&data);
        unsafe { m.raw_unlock(g) };
        assert_eq!(other.join().unwrap(), 1);
        assert_eq!(read(&data), 2);
        assert_eq!(m.word(), 0, "owner word not clean");
        assert!(m.wait_list_is_empty(), "wait list not empty");
        c.add(m.probe());
    });
    assert!(cov.timeouts.load(Relaxed) > 0);
    assert!(cov.wake_next_on_leave.load(Relaxed) > 0);
}

/// A timed spinner gives up in the OSQ or on the owner when its deadline
/// passes, and the lock keeps working.
#[test]
fn timed_spinner_leaves_cleanly() {
    let cov = model::<OWNER_SPIN, YieldLock>(
        &[Part::Lock(0), Part::Timed(4_000), Part::Lock(1)],
        true,
        NEVER,
    );
    assert!(cov.timeouts.load(Relaxed) + cov.osq_unqueues.load(Relaxed) > 0);
}

/// Spinners and a hand-off: with a bound of 0 a sleeping first waiter
/// demands the lock, and spinners (OSQ head, first-waiter spin) must not
/// steal it.
#[test]
fn handoff_with_spinners() {
    let cov =
        model::<OWNER_SPIN, YieldLock>(&[Part::Lock(0), Part::Lock(1), Part::Lock(1)], true, 0);
    assert!(cov.handoffs.load(Relaxed) > 0);
}

/// Two rounds each for two spinning threads, no head start.
#[test]
fn spin_two_threads_two_rounds() {
    let cov = model::<OWNER_SPIN, YieldLock>(&[Part::Lock(2), Part::Lock(2)], false, 3_000);
    assert!(cov.spin_successes.load(Relaxed) > 0);
}

/// The model can fail: an unlock that ignores WAITERS (releases with a
/// plain store and wakes nobody) loses the sleeper's wake-up, which loom
/// reports (the sleeper spins on its futex word forever, or the WAITERS
/// invariant check fires).
#[test]
fn broken_unlock_lost_wakeup_is_caught() {
    let msg = expect_failure("loom should have found the lost wake-up", || {
        model_with::<NO_OWNER_SPIN, YieldLock>(
            &[Part::Lock(1), Part::Lock(1)],
            true,
            NEVER,
            true,
            0,
        );
    });
    eprintln!("broken unlock: {msg}");
}

/// A lazy round: 2 clock readings (the loom clock advances 1 µs a read).
const LAZY: u64 = 2_000;

/// The lazy wait (`LazyWait`): a first waiter that an unlock woke and that
/// lost the lock to another thread keeps `WOKEN` and sleeps its lazy
/// rounds on a timer, so unlocks meanwhile wake nobody; it must still get
/// the lock.
#[test]
fn lazy_first_waiter_is_not_lost() {
    let cov = model_with::<NO_OWNER_SPIN, YieldLock>(
        &[Part::Lock(0), Part::Lock(1), Part::Lock(1)],
        true,
        NEVER,
        false,
        LAZY,
    );
    assert!(cov.lazy_waits.load(Relaxed) > 0);
}

/// Broken: lazy rounds that never end (a round of `u64::MAX` ns) keep
/// `WOKEN` set with no timer to re-check the lock: the waiter is never
/// woken, which loom reports.
#[test]
fn broken_lazy_untimed_is_caught() {
    let msg = expect_failure("loom should have found the lost wake-up", || {
        model_with::<NO_OWNER_SPIN, YieldLock>(
            &[Part::Lock(0), Part::Lock(1), Part::Lock(1)],
            true,
            NEVER,
            false,
            u64::MAX,
        );
    });
    assert!(
        msg.contains("maximum number of branches") || msg.contains("deadlock"),
        "failed for another reason: {msg}"
    );
}

/// The queued spinlock as wait_lock: same protocol, different lock.
#[test]
fn sleep_two_threads_qspinlock_wait_lock() {
    let cov =
        model::<NO_OWNER_SPIN, RawQSpinLockWith<2>>(&[Part::Lock(1), Part::Lock(1)], true, NEVER);
    assert!(cov.wakes_of_sleepers.load(Relaxed) > 0);
}

/// Three threads, one of them locking twice, no head start, hand-off
/// bound of a few clock readings: fast path, spinning, sleeping and
/// hand-offs all mix.
#[test]
fn mixed_three_threads() {
    let cov = model::<OWNER_SPIN, YieldLock>(
        &[Part::Lock(1), Part::Lock(2), Part::Lock(1)],
        false,
        3_000,
    );
    assert!(cov.spin_successes.load(Relaxed) > 0);
    assert!(cov.sleeps.load(Relaxed) > 0);
}

/// Three sleeping threads, two rounds for one of them.
#[test]
fn sleep_three_threads_two_rounds() {
    let cov = model::<NO_OWNER_SPIN, YieldLock>(
        &[Part::Lock(1), Part::Lock(2), Part::Lock(1)],
        false,
        NEVER,
    );
    assert!(cov.wakes_of_sleepers.load(Relaxed) > 0);
}

/// The fast unlock releases with one `fetch_sub`, so a hand-off passes
/// through a free lock, `(0, HANDOFF|WAITERS)`, before the unlocker's slow
/// path names the first waiter (`PICKUP`). Nobody else may take the lock
/// in that window: a holder that saw `HANDOFF` before unlocking and locks
/// again at once must find that the waiter has had its turn. With
/// `broken` the release drops `HANDOFF` (the reservation), and loom must
/// find the re-lock that steals the lock.
fn handoff_release_model(broken: bool) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let m = Arc::new(RawMutexWith::<NO_OWNER_SPIN, YieldLock>::new());
        m.set_loom_handoff_ns(0);
        if broken {
            m.set_loom_broken_handoff_release();
        }
        let data = Arc::new(Data::new(0));
        let g = m.raw_lock();
        let h = spawn_part(&m, &data, Part::Lock(1), run_part);
        bump(&data);
        // We own the lock: HANDOFF, once seen, stays until the waiter
        // picks the lock up.
        let reserved = m.word() & klock::mutex::HANDOFF != 0;
        unsafe { m.raw_unlock(g) };
        let g = m.raw_lock();
        let before = bump(&data);
        unsafe { m.raw_unlock(g) };
        if reserved {
            assert_eq!(before, 2, "the re-lock overtook a demanded hand-off");
        }
        h.join().unwrap();
        assert_eq!(read(&data), 3);
        assert_eq!(m.word(), 0, "owner word not clean");
        assert!(m.wait_list_is_empty(), "wait list not empty");
        c.add(m.probe());
    })
}

#[test]
fn handoff_release_stays_reserved() {
    let cov = handoff_release_model(false);
    assert!(cov.handoff_requests.load(Relaxed) > 0);
    assert!(cov.handoffs.load(Relaxed) > 0);
    assert!(cov.pickups.load(Relaxed) > 0);
}

#[test]
fn broken_handoff_release_is_caught() {
    let msg = expect_failure("loom should have found the stolen hand-off", || {
        handoff_release_model(true);
    });
    eprintln!("broken hand-off release: {msg}");
    assert!(msg.contains("overtook"), "failed for another reason: {msg}");
}
