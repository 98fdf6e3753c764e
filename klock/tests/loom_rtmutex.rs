//! Loom model of the PI mutex's userspace protocol: the fast paths, the
//! top-waiter spin with its spinner slot, the userspace wait of non-RT
//! contenders (its second futex), and the `WAITERS` bit, against a
//! model of the kernel's PI-futex operations (`FUTEX_LOCK_PI2` /
//! `FUTEX_UNLOCK_PI`: a hash-bucket lock, a FIFO of waiters, hand-over to
//! the top waiter; see `rtmutex::loom_kernel`).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p klock --release --test loom_rtmutex
//! ```
//!
//! * Mutual exclusion: the counter is a loom `UnsafeCell`; two holders at
//!   once are a reported data race, and the final count is exact.
//! * No stealing: the kernel model asserts that it never finds a free word
//!   while waiters are queued (a userspace CAS from 0 would then rob the
//!   top waiter).
//! * At most one userspace spinner (asserted on entering the spin loop).
//! * No stranded waiter: a kernel waiter that is never handed the lock
//!   yields forever, which loom reports.
//! * No lost wake-up of a userspace waiter: without a wait limit a parked
//!   waiter blocks on a modelled futex until woken, so a missed wake is a
//!   loom deadlock.
//! * After each execution the word is 0, no waiter is queued in the kernel
//!   and none waits in userspace.
#![cfg(loom)]

#[path = "support/loom.rs"]
mod support;

use klock::rtmutex::{Probe, RawRtMutexWith, RtMutexError, NO_RT_SPIN, RT_SPIN, RT_SPIN_KWAIT};
use loom::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use support::{bump, check, expect_failure, join_all, probe_coverage, read, spawn_parts, Data};

/// [`support::builder`], with a branch limit from `LOOM_MAX_BRANCHES_TEST`
/// if set.
fn builder() -> loom::model::Builder {
    let mut b = support::builder();
    if let Ok(n) = std::env::var("LOOM_MAX_BRANCHES_TEST") {
        b.max_branches = n.parse().unwrap();
    }
    b
}

probe_coverage!(Probe {
    spin_successes,
    spin_successes_past_waiters,
    spin_stopped_by_waiter,
    kernel_locks,
    kernel_sleeps,
    handoffs,
    timeouts,
    user_parks,
    user_wait_expired,
});

/// Loom yields the main thread holds the lock for: a spinner's budget
/// (two loom clock readings) runs out meanwhile.
const HOLD: u32 = 3;

#[derive(Clone, Copy, Debug)]
enum Part {
    /// Lock, increment, unlock; this many times.
    Lock(u32),
    /// One timed attempt, deadline this many ns of loom clock from now.
    Timed(u64),
}

fn run_part<const S: u8>(m: &RawRtMutexWith<S>, data: &Data, p: Part) -> u32 {
    match p {
        Part::Lock(n) => {
            for _ in 0..n {
                let g = m.lock_checked().unwrap();
                bump(data);
                unsafe { m.raw_unlock(g) };
            }
            n
        }
        Part::Timed(ns) => {
            let deadline = klock::sys::monotonic_ns() + ns;
            match m.try_lock_until_ns_checked(deadline) {
                Ok(g) => {
                    bump(data);
                    unsafe { m.raw_unlock(g) };
                    1
                }
                Err(e) => {
                    assert_eq!(e, RtMutexError::TimedOut);
                    0
                }
            }
        }
    }
}

/// The main thread plays `parts[0]`, after holding the lock first (for
/// `hold` loom yields, so that spinners can run out of budget) if
/// `main_holds`; one spawned thread plays each other part.
fn model<const S: u8>(
    parts: &'static [Part],
    main_holds: bool,
    hold: u32,
    broken: bool,
) -> std::sync::Arc<Coverage> {
    model_limit::<S>(parts, main_holds, hold, broken, u64::MAX)
}

/// [`model`] with a userspace wait limit of `user_wait_ns` (loom clock;
/// `u64::MAX`: none, waiters block until woken).
fn model_limit<const S: u8>(
    parts: &'static [Part],
    main_holds: bool,
    hold: u32,
    broken: bool,
    user_wait_ns: u64,
) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let m = Arc::new(RawRtMutexWith::<S>::new());
        if broken {
            m.set_loom_broken_unlock();
        }
        m.set_loom_user_wait_ns(user_wait_ns);
        let data = Arc::new(Data::new(0));
        let held = main_holds.then(|| m.lock_checked().unwrap());
        let hs = spawn_parts(&m, &data, &parts[1..], run_part);
        let mut total = 0;
        if let Some(g) = held {
            for _ in 0..hold {
                loom::thread::yield_now();
            }
            bump(&data);
            unsafe { m.raw_unlock(g) };
            total += 1;
        }
        total += run_part(&*m, &data, parts[0]);
        total += join_all(hs).iter().sum::<u32>();
        assert_eq!(read(&data), total);
        assert_eq!(m.word(), 0, "futex word not clean");
        assert_eq!(m.kernel_waiters(), 0, "a waiter is still queued");
        assert_eq!(
            m.user_waiters(),
            0,
            "a userspace waiter is still registered"
        );
        c.add(m.probe());
    })
}

/// Two lockers with spinning, other waiters in the kernel
/// (`RT_SPIN_KWAIT`, as for real-time threads): the top waiter's spin
/// takes the lock, or it goes to the kernel and is handed the lock.
#[test]
fn spin_two_threads() {
    let cov = model::<RT_SPIN_KWAIT>(&[Part::Lock(0), Part::Lock(1)], true, 1, false);
    assert!(cov.spin_successes.load(Relaxed) > 0);
    assert!(cov.handoffs.load(Relaxed) > 0);
}

/// Two lockers, no spinning: the waiter sleeps in the kernel, WAITERS
/// forces the unlock through the kernel, which hands over.
#[test]
fn kernel_two_threads() {
    let cov = model::<NO_RT_SPIN>(&[Part::Lock(0), Part::Lock(1)], true, HOLD, false);
    assert!(cov.kernel_sleeps.load(Relaxed) > 0);
    assert!(cov.handoffs.load(Relaxed) > 0);
}

/// Three lockers with spinning: one spins, another finds the slot taken
/// and queues in the kernel; its WAITERS stops the spinner (no longer top
/// waiter), and nobody robs a queued waiter.
#[test]
fn spin_three_threads() {
    let cov = model::<RT_SPIN_KWAIT>(
        &[Part::Lock(0), Part::Lock(1), Part::Lock(1)],
        true,
        HOLD,
        false,
    );
    assert!(cov.spin_successes.load(Relaxed) > 0);
    assert!(cov.spin_stopped_by_waiter.load(Relaxed) > 0);
    assert!(cov.handoffs.load(Relaxed) > 0);
}

/// After a kernel hand-over the word keeps a stale WAITERS bit: a spinner
/// may spin on the new owner and take the lock when that owner's kernel
/// unlock finds nobody queued (the convoy breaker), still excluding and
/// never robbing a queued waiter.
#[test]
fn spin_past_stale_waiters_bit() {
    let cov = model::<RT_SPIN_KWAIT>(
        &[Part::Lock(0), Part::Lock(2), Part::Lock(1)],
        true,
        HOLD,
        false,
    );
    assert!(cov.spin_successes_past_waiters.load(Relaxed) > 0);
}

/// Two threads, two rounds each, no head start: fast paths, spin and
/// kernel mix.
#[test]
fn spin_two_threads_two_rounds() {
    let cov = model::<RT_SPIN_KWAIT>(&[Part::Lock(2), Part::Lock(2)], false, 0, false);
    assert!(cov.kernel_locks.load(Relaxed) > 0);
}

/// A timed waiter gives up (in the spin or in the kernel) while a second
/// waiter may be queued: the lock stays consistent, the leftover WAITERS
/// bit is cleared by the owner's kernel unlock.
#[test]
fn timed_waiter_leaves_cleanly() {
    let cov = model::<NO_RT_SPIN>(
        &[Part::Lock(0), Part::Timed(3_000), Part::Lock(1)],
        true,
        HOLD,
        false,
    );
    assert!(cov.timeouts.load(Relaxed) > 0);
}

/// Timed waiter with spinning on.
#[test]
fn timed_spinner_leaves_cleanly() {
    let cov = model::<RT_SPIN_KWAIT>(&[Part::Lock(0), Part::Timed(3_000)], true, HOLD, false);
    assert!(cov.timeouts.load(Relaxed) > 0);
}

/// Three threads, no head start, one of them locking twice: fast path,
/// spinning, the spinner slot and kernel hand-overs all mix.
#[test]
fn mixed_three_threads() {
    let cov = model::<RT_SPIN_KWAIT>(
        &[Part::Lock(1), Part::Lock(2), Part::Lock(1)],
        false,
        0,
        false,
    );
    assert!(cov.spin_successes.load(Relaxed) > 0);
    assert!(cov.handoffs.load(Relaxed) > 0);
}

/// A non-RT waiter whose spin fails waits in userspace: it sets WAITERS,
/// sleeps on the second futex, and the owner's unlock (slow path, through
/// the kernel) wakes it.
#[test]
fn user_wait_two_threads() {
    let cov = model::<RT_SPIN>(&[Part::Lock(0), Part::Lock(1)], true, HOLD, false);
    assert!(cov.user_parks.load(Relaxed) > 0);
    assert_eq!(cov.kernel_sleeps.load(Relaxed), 0);
}

/// Two userspace waiters: each unlock wakes one; a woken waiter that takes
/// the lock keeps WAITERS set for the other, one that loses re-arms it —
/// no waiter is left asleep (loom would report the deadlock).
#[test]
fn user_wait_three_threads() {
    let cov = model::<RT_SPIN>(
        &[Part::Lock(0), Part::Lock(1), Part::Lock(1)],
        true,
        HOLD,
        false,
    );
    assert!(cov.user_parks.load(Relaxed) > 0);
}

/// No head start, one thread locking twice: fast path, spin and userspace
/// waits mix.
#[test]
fn user_wait_no_head_start() {
    let cov = model::<RT_SPIN>(&[Part::Lock(2), Part::Lock(1)], false, 0, false);
    assert!(cov.user_parks.load(Relaxed) > 0);
}

/// A userspace wait that reaches its limit queues in the kernel, which
/// hands it the lock; another userspace waiter is not stranded by it.
#[test]
fn user_wait_expires_into_the_kernel() {
    let cov = model_limit::<RT_SPIN>(
        &[Part::Lock(0), Part::Lock(1), Part::Lock(1)],
        true,
        HOLD,
        false,
        2_000,
    );
    assert!(cov.user_wait_expired.load(Relaxed) > 0);
    assert!(cov.handoffs.load(Relaxed) > 0);
}

/// A timed userspace waiter gives up and passes its wake-up on: the other
/// waiter still gets the lock.
#[test]
fn user_wait_timed_leaves_cleanly() {
    let cov = model::<RT_SPIN>(
        &[Part::Lock(0), Part::Timed(3_000), Part::Lock(1)],
        true,
        HOLD,
        false,
    );
    assert!(cov.timeouts.load(Relaxed) > 0);
    assert!(cov.user_parks.load(Relaxed) > 0);
}

/// Self-deadlock is reported, not slept on.
#[test]
fn self_deadlock_is_an_error() {
    builder().check(|| {
        let m = RawRtMutexWith::<RT_SPIN>::new();
        let g = m.lock_checked().unwrap();
        assert_eq!(m.lock_checked().unwrap_err(), RtMutexError::Deadlock);
        unsafe { m.raw_unlock(g) };
        assert_eq!(m.word(), 0);
    });
}

/// The model can fail: an unlock that ignores WAITERS (a plain store of 0,
/// no FUTEX_UNLOCK_PI) strands the kernel waiter — and lets a later locker
/// take a word whose waiter is queued. Loom must report it.
#[test]
fn broken_unlock_is_caught() {
    let msg = expect_failure("loom should have found the stranded waiter", || {
        model::<NO_RT_SPIN>(&[Part::Lock(0), Part::Lock(1)], true, HOLD, true);
    });
    eprintln!("broken unlock: {msg}");
}

/// The model can fail: an unlock that forgets the userspace waiters leaves
/// one asleep for good, and loom reports the deadlock. Loom aborts the
/// process on a deadlock, so the broken model runs in a child process
/// (this test binary again) and the parent checks that it died of it.
#[test]
fn broken_wake_is_caught() {
    if std::env::var_os("KLOCK_LOOM_BROKEN_WAKE_CHILD").is_some() {
        builder().check(|| {
            let m = Arc::new(RawRtMutexWith::<RT_SPIN>::new());
            m.set_loom_broken_wake();
            let g = m.lock_checked().unwrap();
            let t = {
                let m = m.clone();
                loom::thread::spawn(move || {
                    let g = m.lock_checked().unwrap();
                    unsafe { m.raw_unlock(g) };
                })
            };
            for _ in 0..HOLD {
                loom::thread::yield_now();
            }
            unsafe { m.raw_unlock(g) };
            t.join().unwrap();
        });
        return;
    }
    support::expect_deadlock_in_child(
        "broken_wake_is_caught",
        false,
        &[("KLOCK_LOOM_BROKEN_WAKE_CHILD", "1")],
    );
}
