//! A mutex whose spins keep running out of their budget stops spinning for
//! a while ([`klock::mutex::futile_skip`]), in the full and the compact
//! mutex; the kernel's mode (`OWNER_SPIN_FIXED`), and any mutex with the
//! switch off, keeps spinning. A file of its own: the
//! event counters and the switch are process-wide.
#![cfg(not(loom))]

use klock::events::{self, Event};
use klock::mutex::{RawMutexCompact, C_WAITERS, OWNER_SPIN, OWNER_SPIN_FIXED, WAITERS};
use klock::oncpu::{self, OracleKind, FUTILE_LIMIT, FUTILE_SKIPS};
use klock::MutexWith;
use lock_api::RawMutex as _;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// Rounds: enough to reach the limit and use some skips, and a margin
/// for spins that stop because the spinner was migrated (not a budget).
const ROUNDS: u32 = 2 * FUTILE_LIMIT + 8;

/// `ROUNDS` times: the main thread takes the lock, a second thread tries
/// it, and the main thread, running all along (as a long critical section
/// on a CPU would), releases it only once the second one has queued to
/// sleep: its spin, if it spun, ran out of its budget. `lock`/`unlock`
/// drive the mutex under test, `queued` says whether a waiter sleeps.
fn rounds<G>(
    lock: &(dyn Fn() -> G + Sync),
    unlock: &(dyn Fn(G) + Sync),
    queued: &(dyn Fn() -> bool + Sync),
) {
    let step = AtomicU32::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for r in 1..=ROUNDS {
                while step.load(SeqCst) != 2 * r - 1 {
                    std::hint::spin_loop();
                }
                let g = lock();
                unlock(g);
                step.store(2 * r, SeqCst);
            }
        });
        for r in 1..=ROUNDS {
            let g = lock();
            step.store(2 * r - 1, SeqCst);
            let t0 = Instant::now();
            while !queued() {
                assert!(
                    t0.elapsed() < Duration::from_secs(20),
                    "round {r}: never queued"
                );
                std::hint::spin_loop();
            }
            unlock(g);
            while step.load(SeqCst) != 2 * r {
                assert!(t0.elapsed() < Duration::from_secs(20), "round {r} hangs");
                std::thread::yield_now();
            }
        }
    });
}

/// The spin events so far, for a failure's message.
fn spin_events() -> String {
    [
        Event::MutexSpinSuccess,
        Event::MutexSpinFailBudget,
        Event::MutexSpinFailYield,
        Event::MutexSpinFailOwnerSleeping,
        Event::MutexSpinFailCrowded,
        Event::MutexSleep,
    ]
    .iter()
    .map(|&e| format!("{e:?}={}", events::read(e)))
    .collect::<Vec<_>>()
    .join(" ")
}

fn skips() -> u64 {
    events::read(Event::MutexSpinSkipFutile)
}

#[test]
fn spins_that_run_out_of_budget_are_skipped_for_a_while() {
    if !events::enabled() || klock::sys::online_cpus() < 2 {
        eprintln!("skipped: needs the `events` feature and two CPUs");
        return;
    }
    // The budget oracle: the exact one would let the spinner spin on a
    // running owner past its budget.
    oncpu::use_oracle(OracleKind::Budget).unwrap();
    klock::spinadapt::set_enabled(false);
    klock::mutex::set_owner_spin(true);

    // The full mutex: its score climbs to the limit, then it skips; still
    // skipping at the end (fewer rounds were left than skips).
    klock::mutex::set_futile_skip(true);
    let (skipped, score) = full_mutex_rounds::<OWNER_SPIN>();
    assert!(
        skipped > 0,
        "the full mutex never skipped a futile spin: {}",
        spin_events()
    );
    assert!(score > FUTILE_LIMIT, "score {score}");

    // The compact mutex, the same way.
    let c = RawMutexCompact::new();
    let s0 = skips();
    // SAFETY: each unlock follows the same thread's lock.
    rounds(&|| c.lock(), &|()| unsafe { c.unlock() }, &|| {
        c.word() & C_WAITERS != 0
    });
    assert!(
        skips() > s0,
        "the compact mutex never skipped a futile spin"
    );

    // The kernel's mode never skips: its score fills up unused.
    let (skipped, score) = full_mutex_rounds::<OWNER_SPIN_FIXED>();
    assert_eq!(skipped, 0, "OWNER_SPIN_FIXED skipped a spin");
    assert!(score > FUTILE_LIMIT, "score {score}");

    // Switched off: the same rounds never skip, and a full score stays
    // unused.
    klock::mutex::set_futile_skip(false);
    let (skipped, score) = full_mutex_rounds::<OWNER_SPIN>();
    klock::mutex::set_futile_skip(true);
    assert_eq!(skipped, 0, "skipped with the switch off");
    assert_eq!(score, FUTILE_LIMIT + FUTILE_SKIPS, "score {score}");
}

/// [`rounds`] on a fresh full mutex of mode `SPIN`: the spins skipped, and
/// the lock's futility score after them.
fn full_mutex_rounds<const SPIN: u8>() -> (u64, u32) {
    let m = MutexWith::<SPIN, ()>::new(());
    // SAFETY (raw accesses): each unlock follows the same thread's lock.
    let raw = unsafe { m.raw() };
    let s0 = skips();
    rounds(&|| raw.lock(), &|g| unsafe { raw.unlock(g) }, &|| {
        raw.word() & WAITERS != 0
    });
    (skips() - s0, raw.spin_stats().futility())
}
