//! Loom models of the compact mutex ([`RawMutexCompact`], the 40-byte form
//! of the mutex that `klock-preload` puts inside a `pthread_mutex_t`):
//! mutual exclusion with sleeping and spinning contenders, the lost
//! wake-up race between a waiter going to sleep and the unlocker (and the
//! one the `WOKEN` bit could add: a woken waiter that sleeps again), the
//! hand-off to a starving first waiter, a timed waiter that gives up, and
//! the lazy first waiter that keeps `WOKEN` while it sleeps on a timer.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p klock --release --test loom_mutex_compact
//! ```
//!
//! * Mutual exclusion: the protected counter is a loom `UnsafeCell`, so
//!   two holders at once, or a hand-over that does not order the previous
//!   holder's writes before the next one's, is a reported data race; the
//!   final count is exact.
//! * Lost wake-ups: under loom a futex wait is a yield that returns, and a
//!   parked waiter re-checks its own futex word until a waker sets it. A
//!   wake-up that never comes makes the waiter spin forever, which loom
//!   reports (too many branches, or a deadlock).
//! * After each execution: the owner word is 0 and the wait list is empty.
//!
//! Every model has a deliberately broken variant of the lock
//! ([`CompactBroken`]) that loom must reject, and records through the
//! lock's loom-only [`CompactProbe`] which paths its executions took, to
//! assert that the interesting ones were reached.
#![cfg(loom)]

#[path = "support/loom.rs"]
mod support;

use klock::mutex::{CompactBroken, CompactProbe, RawMutexCompact};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use support::{builder, bump, expect_model_failure};

/// Paths taken, summed over a model's executions.
#[derive(Debug, Default)]
struct Coverage {
    executions: AtomicU32,
    wakes_of_sleepers: AtomicU32,
    wakes_of_awake: AtomicU32,
    handoffs: AtomicU32,
    /// Timed attempts that gave up.
    timeouts: AtomicU32,
    /// Series of lazy rounds begun (a woken first waiter lost the lock).
    lazy_waits: AtomicU32,
}

impl Coverage {
    fn add(&self, p: &CompactProbe) {
        self.executions.fetch_add(1, Relaxed);
        for (t, c) in [
            (&self.wakes_of_sleepers, &p.wakes_of_sleepers),
            (&self.wakes_of_awake, &p.wakes_of_awake),
            (&self.handoffs, &p.handoffs),
            (&self.lazy_waits, &p.lazy_waits),
        ] {
            t.fetch_add(c.load(Relaxed), Relaxed);
        }
    }
}

/// What one thread does.
#[derive(Clone, Copy, Debug)]
enum Part {
    /// Lock, increment, unlock; this many times.
    Lock(u32),
    /// One `try_lock`; increment if it succeeded.
    Try,
    /// One timed attempt with a deadline this many ns (loom clock: 1 µs
    /// per reading) from now; increment if it succeeded.
    Timed(u64),
}

/// Returns how many acquisitions succeeded; counts a timeout in `cov`.
fn run_part(m: &RawMutexCompact, data: &UnsafeCell<u32>, p: Part, cov: &Coverage) -> u32 {
    let got = match p {
        Part::Lock(n) => {
            for _ in 0..n {
                m.lock();
                bump(data);
                // SAFETY: locked just above, by this thread.
                unsafe { m.unlock() };
            }
            return n;
        }
        Part::Try => m.try_lock(),
        Part::Timed(ns) => {
            let got = m.lock_until_ns(klock::sys::monotonic_ns() + ns);
            if !got {
                cov.timeouts.fetch_add(1, Relaxed);
            }
            got
        }
    };
    if got {
        bump(data);
        // SAFETY: locked just above, by this thread.
        unsafe { m.unlock() };
    }
    u32::from(got)
}

/// How a model sets its lock up.
#[derive(Clone, Copy, Debug)]
struct Setup {
    /// The main thread takes the lock before spawning the others, so they
    /// must contend, and releases it after one increment.
    main_holds: bool,
    /// Contenders may spin on the owner (else they sleep at once).
    spin: bool,
    /// The lock's hand-off bound.
    handoff_ns: u64,
    /// The first waiter's lazy round (0: no lazy wait).
    lazy_ns: u64,
    broken: CompactBroken,
}

/// No hand-off within a model's few clock readings.
const NEVER: u64 = u64::MAX / 2;

const SLEEP: Setup = Setup {
    main_holds: true,
    spin: false,
    handoff_ns: NEVER,
    lazy_ns: 0,
    broken: CompactBroken::None,
};

/// The main thread plays `parts[0]` (after holding the lock first if
/// `main_holds`), one spawned thread plays each other part.
fn model(parts: &'static [Part], s: Setup) -> std::sync::Arc<Coverage> {
    let cov = std::sync::Arc::new(Coverage::default());
    let c = cov.clone();
    builder().check(move || {
        let m = Arc::new(RawMutexCompact::new());
        m.set_loom_spin(s.spin);
        m.set_loom_handoff_ns(s.handoff_ns);
        m.set_loom_lazy_ns(s.lazy_ns);
        m.set_loom_broken(s.broken);
        let data = Arc::new(UnsafeCell::new(0u32));
        if s.main_holds {
            m.lock();
        }
        let hs: Vec<_> = parts[1..]
            .iter()
            .map(|&p| {
                let (m, data, c) = (m.clone(), data.clone(), c.clone());
                loom::thread::spawn(move || run_part(&m, &data, p, &c))
            })
            .collect();
        let mut total = 0;
        if s.main_holds {
            bump(&data);
            // SAFETY: locked above, by this thread.
            unsafe { m.unlock() };
            total += 1;
        }
        total += run_part(&m, &data, parts[0], &c);
        for h in hs {
            total += h.join().unwrap();
        }
        assert_eq!(data.with(|p| unsafe { *p }), total);
        assert_eq!(m.word(), 0, "owner word not clean");
        assert!(m.wait_list_is_empty(), "wait list not empty");
        c.add(m.probe());
    });
    eprintln!("coverage: {cov:?}");
    cov
}

/// What loom says when a thread waits for a wake-up that never comes: it
/// yields in its futex-wait loop until the model runs out of branches, or
/// every thread is blocked.
fn is_hang(msg: &str) -> bool {
    msg.contains("maximum number of branches") || msg.contains("deadlock")
}

/// The sleeping model of `parts` with the lock broken as `broken` must
/// hang: a waiter nobody wakes.
fn hangs(parts: &'static [Part], broken: CompactBroken) {
    hangs_with(parts, Setup { broken, ..SLEEP });
}

/// [`hangs`] with another setup.
fn hangs_with(parts: &'static [Part], s: Setup) {
    let msg = expect_model_failure("loom should have found the lost wake-up", || {
        model(parts, s);
    });
    assert!(is_hang(&msg), "failed for another reason: {msg}");
}

// --- mutual exclusion

/// Three threads, no spinning: the main thread holds the lock while two
/// others queue behind it, so at least one sleeps in the FIFO list and is
/// woken by an unlock.
#[test]
fn exclusion_three_threads_sleeping() {
    let cov = model(&[Part::Lock(0), Part::Lock(1), Part::Lock(1)], SLEEP);
    assert!(cov.wakes_of_sleepers.load(Relaxed) > 0);
}

/// Three threads, spinning on: one locker may spin (through the OSQ, or as
/// the woken first waiter) while the other sleeps; a `try_lock` races
/// them.
#[test]
fn exclusion_spinning_sleeping_and_try() {
    let cov = model(
        &[Part::Try, Part::Lock(1), Part::Lock(1)],
        Setup {
            spin: true,
            ..SLEEP
        },
    );
    assert!(cov.wakes_of_sleepers.load(Relaxed) + cov.wakes_of_awake.load(Relaxed) > 0);
}

/// Broken: the fast unlock releases `Relaxed`, so the next owner's writes
/// to the data race with the previous owner's. Loom reports the race (in
/// both models above).
#[test]
fn broken_relaxed_unlock_is_caught() {
    for (parts, spin) in [
        (&[Part::Lock(0), Part::Lock(1), Part::Lock(1)], false),
        (&[Part::Try, Part::Lock(1), Part::Lock(1)], true),
    ] {
        let msg = expect_model_failure("loom should have found the unordered release", || {
            model(
                parts,
                Setup {
                    spin,
                    broken: CompactBroken::UnlockRelaxed,
                    ..SLEEP
                },
            );
        });
        assert!(
            msg.contains("Causality violation"),
            "failed for another reason: {msg}"
        );
    }
}

// --- the lost wake-up

/// The main thread holds the lock; a second thread queues, sets `WAITERS`,
/// re-tries under wait_lock and parks, while the main thread unlocks with
/// one `fetch_sub` and, seeing `WAITERS`, marks the first waiter woken
/// under wait_lock. Every interleaving must end with the waiter holding
/// the lock once: the unlock either comes before `WAITERS` in the word's
/// modification order (the waiter's re-try finds the lock free) or after
/// it (the unlock wakes the waiter, asleep or still awake).
#[test]
fn lost_wakeup_race() {
    let cov = model(&[Part::Lock(0), Part::Lock(1)], SLEEP);
    // Both sides of the race: the waiter asleep when marked woken, and
    // still awake (queued, not yet parked).
    assert!(cov.wakes_of_sleepers.load(Relaxed) > 0);
    assert!(cov.wakes_of_awake.load(Relaxed) > 0);
}

/// Broken: the unlock reads the word and stores it back released, two
/// steps: a waiter's `WAITERS` set between them is overwritten, the
/// unlock sees no waiter and wakes nobody, and the waiter, whose re-try
/// came before the store, sleeps for ever.
#[test]
fn broken_split_unlock_loses_wakeup_is_caught() {
    hangs(
        &[Part::Lock(0), Part::Lock(1)],
        CompactBroken::UnlockSplitRmw,
    );
}

/// Broken: the unlock ignores `WAITERS` and wakes nobody.
#[test]
fn broken_unlock_without_wake_is_caught() {
    hangs(&[Part::Lock(0), Part::Lock(1)], CompactBroken::UnlockNoWake);
}

/// Broken: a woken first waiter that loses the lock to a newcomer goes
/// back to sleep without clearing `WOKEN`, so the newcomer's unlock takes
/// it for awake and wakes nobody. The correct lock is the three-thread
/// model above (`exclusion_three_threads_sleeping`), which reaches that
/// race: one unlock wakes the first waiter, another thread takes the lock
/// before it, and the waiter sleeps again.
#[test]
fn broken_keep_woken_is_caught() {
    hangs(
        &[Part::Lock(0), Part::Lock(1), Part::Lock(1)],
        CompactBroken::KeepWoken,
    );
}

// --- the lazy first waiter

/// A lazy round: 2 clock readings (the loom clock advances 1 µs a read).
const LAZY: u64 = 2_000;

/// The lazy wait: a first waiter that an unlock woke and that lost the
/// lock to another thread keeps `WOKEN` and sleeps its lazy rounds on a
/// timer, so the unlocks meanwhile wake nobody; it must still get the
/// lock, whether the lock is freed during a lazy round or after the
/// rounds, when it sleeps until woken again.
#[test]
fn lazy_first_waiter_is_not_lost() {
    let cov = model(
        &[Part::Lock(0), Part::Lock(1), Part::Lock(1)],
        Setup {
            lazy_ns: LAZY,
            ..SLEEP
        },
    );
    // The race was reached: woken, then beaten to the lock.
    assert!(cov.lazy_waits.load(Relaxed) > 0);
}

/// Broken: lazy rounds that never end (a round of `u64::MAX` ns) keep
/// `WOKEN` with no timer to re-check the lock, so nobody wakes the waiter
/// and it does not wake up on its own.
#[test]
fn broken_lazy_untimed_is_caught() {
    hangs_with(
        &[Part::Lock(0), Part::Lock(1), Part::Lock(1)],
        Setup {
            lazy_ns: u64::MAX,
            ..SLEEP
        },
    );
}

// --- the hand-off

/// Hand-off bound 0: the queued waiter demands the lock (`HANDOFF`) at
/// once. The fast unlock releases with one `fetch_sub`, so the lock passes
/// through `(0, HANDOFF|WAITERS)`, free but reserved for the first waiter,
/// before the unlocker's slow path names the waiter (`PICKUP`). A holder
/// that saw `HANDOFF` before unlocking and locks again at once must find
/// that the waiter has had its turn. With `broken` the hand-off gives the
/// reservation up instead, and loom must find the re-lock that steals the
/// lock.
fn handoff_model(broken: CompactBroken) -> std::sync::Arc<Coverage> {
    let cov = std::sync::Arc::new(Coverage::default());
    let c = cov.clone();
    builder().check(move || {
        let m = Arc::new(RawMutexCompact::new());
        m.set_loom_spin(false);
        m.set_loom_handoff_ns(0);
        m.set_loom_broken(broken);
        let data = Arc::new(UnsafeCell::new(0u32));
        m.lock();
        let h = {
            let (m, data) = (m.clone(), data.clone());
            loom::thread::spawn(move || {
                m.lock();
                bump(&data);
                // SAFETY: locked just above, by this thread.
                unsafe { m.unlock() };
            })
        };
        bump(&data);
        // We hold the lock: HANDOFF, once seen, stays until the waiter
        // takes the lock.
        let reserved = m.word() & klock::mutex::C_HANDOFF != 0;
        // SAFETY: locked above, by this thread.
        unsafe { m.unlock() };
        m.lock();
        let before = bump(&data);
        // SAFETY: locked just above, by this thread.
        unsafe { m.unlock() };
        if reserved {
            assert_eq!(before, 2, "the re-lock overtook a demanded hand-off");
        }
        h.join().unwrap();
        assert_eq!(data.with(|p| unsafe { *p }), 3);
        assert_eq!(m.word(), 0, "owner word not clean");
        assert!(m.wait_list_is_empty(), "wait list not empty");
        c.add(m.probe());
    });
    eprintln!("coverage: {cov:?}");
    cov
}

#[test]
fn handoff_goes_to_first_waiter() {
    let cov = handoff_model(CompactBroken::None);
    assert!(cov.handoffs.load(Relaxed) > 0);
}

/// Broken: the hand-off clears `HANDOFF` instead of naming the waiter.
#[test]
fn broken_unreserved_hand_over_is_caught() {
    let msg = expect_model_failure("loom should have found the stolen hand-off", || {
        handoff_model(CompactBroken::HandOverUnreserved);
    });
    assert!(msg.contains("overtook"), "failed for another reason: {msg}");
}

// --- timed lock

/// Hand-off bound 0. The main thread holds the lock; a timed waiter
/// (deadline a few clock readings away) and a blocking one queue. The
/// timed one may time out as first or second waiter, or after the lock
/// was handed to it, and must leave the lock and the list consistent: the
/// blocking waiter gets the lock, the word ends clean, the list empty.
#[test]
fn timed_waiter_leaves_cleanly() {
    let cov = model(
        &[Part::Lock(0), Part::Timed(5_000), Part::Lock(1)],
        Setup {
            handoff_ns: 0,
            ..SLEEP
        },
    );
    assert!(cov.timeouts.load(Relaxed) > 0);
    assert!(cov.handoffs.load(Relaxed) > 0);
}

/// Broken: a timed waiter whose deadline has passed leaves without its
/// last trylock under wait_lock. When the lock was handed to it
/// meanwhile, it stays handed to a thread that has left: the blocking
/// waiter never gets it.
#[test]
fn broken_timeout_abandons_hand_off_is_caught() {
    let msg = expect_model_failure("loom should have found the abandoned hand-off", || {
        model(
            &[Part::Lock(0), Part::Timed(5_000), Part::Lock(1)],
            Setup {
                handoff_ns: 0,
                broken: CompactBroken::TimeoutWithoutTrylock,
                ..SLEEP
            },
        );
    });
    assert!(
        is_hang(&msg) || msg.contains("owner word not clean"),
        "failed for another reason: {msg}"
    );
}
