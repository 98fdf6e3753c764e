//! The hand-off (`PICKUP`) cannot be stolen: once an unlock hands the lock
//! to the first waiter, nobody else gets it until that waiter has had it.
//!
//! Sets the global hand-off bound to 0 (every first waiter demands a
//! hand-off at once), so it lives in its own test binary.
#![cfg(not(loom))]

use klock::events::{self, Event};
use klock::mutex::{
    set_handoff_ns, HANDOFF, NO_OWNER_SPIN, OWNER_MASK, OWNER_SHIFT, OWNER_SPIN, PICKUP,
};
use klock::MutexWith;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::time::{Duration, Instant};

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn pickup_cannot_be_stolen<const SPIN: u8>() {
    set_handoff_ns(0);
    let before = events::read(Event::MutexHandoff);
    let m = MutexWith::<SPIN, u32>::new(0);
    let victim_tid = AtomicU32::new(0);
    let got_it = AtomicBool::new(false);
    let release = AtomicBool::new(false);
    let g = m.lock();
    std::thread::scope(|s| {
        s.spawn(|| {
            victim_tid.store(klock::thread::current_tid(), SeqCst);
            let mut g = m.lock();
            *g += 1;
            got_it.store(true, SeqCst);
            wait_until("the main thread's checks", || release.load(SeqCst));
        });
        // The victim queued and, with a bound of 0, asked for a hand-off.
        let raw = unsafe { m.raw() };
        wait_until("HANDOFF", || raw.word() & HANDOFF != 0);
        drop(g); // hands the lock over: (victim, PICKUP|WAITERS)
        let w = raw.word();
        let victim = (victim_tid.load(SeqCst) as usize) << OWNER_SHIFT;
        assert_eq!(
            w & OWNER_MASK,
            victim,
            "the unlock named the victim: {w:#x}"
        );
        // Whether or not it picked the lock up yet, nobody can take it.
        for _ in 0..1000 {
            assert!(m.try_lock().is_none(), "stole a handed-off lock");
            assert!(m.try_lock_for(Duration::from_micros(10)).is_none());
        }
        wait_until("the victim to pick up", || got_it.load(SeqCst));
        assert_eq!(raw.word() & (PICKUP | HANDOFF), 0);
        release.store(true, SeqCst);
    });
    assert_eq!(unsafe { m.raw() }.word(), 0);
    assert_eq!(m.into_inner(), 1);
    if events::enabled() {
        assert!(events::read(Event::MutexHandoff) > before);
    }
}

#[test]
fn pickup_cannot_be_stolen_no_spin() {
    pickup_cannot_be_stolen::<NO_OWNER_SPIN>();
}

#[test]
fn pickup_cannot_be_stolen_spin() {
    pickup_cannot_be_stolen::<OWNER_SPIN>();
}

/// With a bound of 0 the sleepers are served FIFO: exact counts still hold
/// and every waiter gets in.
#[test]
fn strict_handoff_stress() {
    set_handoff_ns(0);
    let m = MutexWith::<OWNER_SPIN, u64>::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..2_000 {
                    *m.lock() += 1;
                }
            });
        }
    });
    assert_eq!(unsafe { m.raw() }.word(), 0);
    assert_eq!(m.into_inner(), 16_000);
}
