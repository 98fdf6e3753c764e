//! Tests of [`RawMutexCompact`](super::RawMutexCompact).

use super::*;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn zeroed_is_unlocked_and_spare_untouched() {
    let m = RawMutexCompact::new();
    m.spare()[0].store(0xdead_beef, Relaxed);
    assert!(!m.is_locked());
    m.lock();
    assert!(m.held_by_me());
    assert!(!m.try_lock());
    // SAFETY: held.
    unsafe { m.unlock() };
    assert!(!m.is_locked());
    assert_eq!(m.spare()[0].load(Relaxed), 0xdead_beef);
    assert_eq!(m.spare()[1].load(Relaxed), 0);
}

#[test]
fn exclusion_under_contention() {
    struct Shared(RawMutexCompact, core::cell::UnsafeCell<u64>);
    // SAFETY: the u64 is only touched under the lock.
    unsafe impl Sync for Shared {}
    let s = Arc::new(Shared(
        RawMutexCompact::new(),
        core::cell::UnsafeCell::new(0),
    ));
    let hs: Vec<_> = (0..8)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u32 {
                    let timed = (i + t) % 7 == 0;
                    if timed {
                        if !s.0.lock_until_ns(monotonic_ns() + 1_000_000_000) {
                            continue;
                        }
                    } else {
                        s.0.lock();
                    }
                    // SAFETY: under the lock.
                    unsafe { *s.1.get() += 1 };
                    // SAFETY: held.
                    unsafe { s.0.unlock() };
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    // SAFETY: all threads joined.
    assert_eq!(unsafe { *s.1.get() }, 8 * 20_000);
    assert!(!s.0.is_locked());
    assert_eq!(s.0.word() & !C_COUNTING, 0);
}

/// Holds longer than the hand-off bound: first waiters demand the
/// lock, unlocks hand it over (PICKUP), and timed waiters give up
/// while a hand-off may be pending.
#[test]
fn long_holds_hand_off_and_timeouts_leave_cleanly() {
    struct Shared(RawMutexCompact, core::cell::UnsafeCell<u64>);
    // SAFETY: the u64 is only touched under the lock.
    unsafe impl Sync for Shared {}
    let hold = Duration::from_nanos(handoff_ns() + 1_000_000);
    let s = Arc::new(Shared(
        RawMutexCompact::new(),
        core::cell::UnsafeCell::new(0),
    ));
    let taken = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..6)
        .map(|t| {
            let (s, taken) = (s.clone(), taken.clone());
            std::thread::spawn(move || {
                for _ in 0..6 {
                    if t % 3 == 0 {
                        // Gives up before a holder is done.
                        if !s
                            .0
                            .lock_until_ns(monotonic_ns() + hold.as_nanos() as u64 / 2)
                        {
                            continue;
                        }
                    } else {
                        s.0.lock();
                    }
                    // SAFETY: under the lock.
                    unsafe { *s.1.get() += 1 };
                    taken.fetch_add(1, Relaxed);
                    std::thread::sleep(hold);
                    // SAFETY: held.
                    unsafe { s.0.unlock() };
                }
            })
        })
        .collect();
    // Watch the word: a waiter must have demanded a hand-off.
    let mut seen = 0;
    while !hs.iter().all(|h| h.is_finished()) {
        seen |= s.0.word() & C_HANDOFF;
        std::thread::yield_now();
    }
    for h in hs {
        h.join().unwrap();
    }
    assert_ne!(seen, 0, "no hand-off was demanded");
    // SAFETY: all threads joined.
    assert_eq!(unsafe { *s.1.get() }, taken.load(Relaxed) as u64);
    assert!(taken.load(Relaxed) >= 4 * 6);
    assert_eq!(s.0.word() & !C_COUNTING, 0, "flags left behind");
}

#[test]
fn timed_lock_times_out_and_unlock_any_releases() {
    let m = Arc::new(RawMutexCompact::new());
    m.lock();
    let m2 = m.clone();
    let timed_out = Arc::new(AtomicUsize::new(0));
    let t2 = timed_out.clone();
    std::thread::spawn(move || {
        if !m2.lock_until_ns(monotonic_ns() + 20_000_000) {
            t2.store(1, Relaxed);
        }
        // Another thread's hold is released for it.
        assert!(m2.unlock_any());
    })
    .join()
    .unwrap();
    assert_eq!(timed_out.load(Relaxed), 1);
    assert!(!m.is_locked());
    assert!(!m.unlock_any());
}

#[test]
fn single_threaded_paths_take_only_a_plain_word() {
    let tid = thread::current_tid();
    let m = RawMutexCompact::new();
    // SAFETY (all four): no other thread touches `m`.
    assert!(unsafe { m.try_lock_single_threaded_as(tid) });
    assert!(m.held_by(tid));
    assert!(!unsafe { m.try_lock_single_threaded_as(tid) }, "held");
    assert!(unsafe { m.unlock_single_threaded_as(tid) });
    assert_eq!(m.word(), 0);
    assert!(!unsafe { m.unlock_single_threaded_as(tid) }, "free");
    // A word with a flag beside the owner is left to the usual paths.
    m.lock();
    m.owner.fetch_or(C_WOKEN, Relaxed);
    assert!(!unsafe { m.unlock_single_threaded_as(tid) });
    m.owner.fetch_and(!C_WOKEN, Relaxed);
    // SAFETY: held.
    unsafe { m.unlock() };
    assert_eq!(m.word(), 0);
}

#[test]
fn lock_unless_held_takes_a_free_lock_refuses_its_holder_and_waits_for_another() {
    let tid = thread::current_tid();
    let m = Arc::new(RawMutexCompact::new());
    assert!(m.lock_unless_held_as(tid), "a free lock is taken");
    assert!(m.held_by(tid));
    let w = m.word();
    assert!(!m.lock_unless_held_as(tid), "its holder is told so");
    assert_eq!(m.word(), w, "and the word is left as it was");

    // Held by this thread: another thread's call waits for the unlock.
    let released = Arc::new(AtomicUsize::new(0));
    let (m2, r2) = (m.clone(), released.clone());
    let h = std::thread::spawn(move || {
        let me = thread::current_tid();
        assert!(m2.lock_unless_held_as(me));
        // Acquire-side check: it got the lock only after the release.
        assert_eq!(r2.load(Relaxed), 1, "took the lock before it was released");
        assert!(m2.held_by(me));
        assert!(!m2.lock_unless_held_as(me));
        // SAFETY: held by this thread.
        unsafe { m2.unlock_as(me) };
    });
    std::thread::sleep(Duration::from_millis(20));
    released.store(1, Relaxed);
    // SAFETY: held by this thread.
    unsafe { m.unlock_as(tid) };
    h.join().unwrap();
    assert!(!m.is_locked());
}

#[test]
fn a_free_lock_with_flags_is_taken_from_the_fast_cas_value_and_keeps_them() {
    let tid = thread::current_tid();
    let me = tid << C_OWNER_SHIFT;
    let m = RawMutexCompact::new();
    // Free, its waiters' flags set (as while they sleep): the fast CAS
    // from 0 fails, and the slow path's first try, from the word that CAS
    // returned, takes the lock and keeps the flags.
    m.owner.store(C_WAITERS | C_WOKEN, Relaxed);
    m.lock_as(tid);
    assert_eq!(m.word(), me | C_WAITERS | C_WOKEN);
    // A counting mark that no spin test backs (this lock holds no test's
    // slot): the count, made from the word that try wrote, clears it.
    m.owner.store(C_COUNTING | C_WAITERS, Relaxed);
    m.lock_as(tid);
    assert_eq!(m.word(), me | C_WAITERS);
    // The same through the timed lock and the holder test.
    m.owner.store(C_WAITERS | C_WOKEN, Relaxed);
    assert!(m.lock_until_ns_as(tid, u64::MAX));
    assert_eq!(m.word(), me | C_WAITERS | C_WOKEN);
    assert!(!m.lock_unless_held_as(tid), "its holder is told so");
    m.owner.store(C_WAITERS | C_WOKEN, Relaxed);
    assert!(m.lock_unless_held_as(tid));
    assert_eq!(m.word(), me | C_WAITERS | C_WOKEN);
    // The trylock takes the same first step, counting included.
    m.owner.store(C_WAITERS | C_WOKEN, Relaxed);
    assert!(m.try_lock_as(tid));
    assert_eq!(m.word(), me | C_WAITERS | C_WOKEN);
    assert!(!m.try_lock_as(tid), "held");
    m.owner.store(C_COUNTING | C_WAITERS, Relaxed);
    assert!(m.try_lock_as(tid));
    assert_eq!(m.word(), me | C_WAITERS);
    m.owner.store(0, Relaxed);
}
