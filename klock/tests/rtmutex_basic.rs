#![cfg(not(loom))]
//! RtMutex without real-time priorities: deadlock reporting, timed locks,
//! the LOCK_PI fallback, hand-over through the kernel.

use klock::rtmutex::{
    force_lock_pi_fallback, set_user_wait_ns, user_wait_ns, RawRtMutexWith, RtMutexError,
    RtMutexExt, NO_RT_SPIN, RT_SPIN, RT_SPIN_KWAIT, USER_WAIT_NS, WAITERS,
};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Tests that depend on the userspace wait limit run one at a time, each
/// with its own limit (restored to the default afterwards).
static USER_WAIT: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct UserWaitLimit(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

impl UserWaitLimit {
    fn set(ns: u64) -> Self {
        let g = USER_WAIT.lock().unwrap_or_else(|e| e.into_inner());
        set_user_wait_ns(ns);
        Self(g)
    }
}

impl Drop for UserWaitLimit {
    fn drop(&mut self) {
        set_user_wait_ns(USER_WAIT_NS);
    }
}

#[test]
fn self_deadlock_returns_edeadlk() {
    fn check<const S: u8>() {
        let m = klock::RtMutexWith::<S, u32>::new(7);
        let g = m.lock_checked().unwrap();
        assert_eq!(m.lock_checked().unwrap_err(), RtMutexError::Deadlock);
        assert_eq!(
            m.try_lock_for_checked(Duration::from_millis(5))
                .unwrap_err(),
            RtMutexError::Deadlock
        );
        assert_eq!(*g, 7);
        drop(g);
        assert!(m.lock_checked().is_ok());
    }
    check::<RT_SPIN>();
    check::<NO_RT_SPIN>();
}

#[test]
#[should_panic(expected = "deadlock (EDEADLK)")]
fn lock_api_path_panics_clearly_on_deadlock() {
    let m = klock::RtMutex::new(());
    let _g = m.lock();
    let _again = m.lock();
}

/// ABBA across two threads: the kernel walks the PI chain and refuses the
/// lock that would close the cycle.
#[test]
fn abba_deadlock_is_detected_by_the_kernel() {
    let _limit = UserWaitLimit::set(USER_WAIT_NS);
    let a = Arc::new(klock::RtMutex::new(()));
    let b = Arc::new(klock::RtMutex::new(()));
    let both_hold = Arc::new(Barrier::new(2));
    let t = {
        let (a, b, both_hold) = (a.clone(), b.clone(), both_hold.clone());
        std::thread::spawn(move || {
            let _ga = a.lock();
            both_hold.wait();
            // Blocks in the kernel on b until the main thread gives it up.
            let r = b.lock_checked().map(|_| ());
            r
        })
    };
    let gb = b.lock();
    both_hold.wait();
    // Wait until the other thread is queued in the kernel on b: a
    // non-real-time waiter first waits in userspace (user_waiters() == 1)
    // and moves to the kernel after USER_WAIT_NS, leaving WAITERS set. Our
    // own wait on a then reaches the kernel USER_WAIT_NS later, and the
    // kernel sees the cycle.
    let t0 = Instant::now();
    let bw = unsafe { b.raw() };
    while bw.word() & WAITERS == 0 || bw.user_waiters() != 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "other thread never queued"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(a.lock_checked().unwrap_err(), RtMutexError::Deadlock);
    drop(gb);
    assert_eq!(t.join().unwrap(), Ok(()));
}

fn timed_times_out_cleanly<const S: u8>() {
    let m = RawRtMutexWith::<S>::new();
    let g = m.lock_checked().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let t0 = Instant::now();
            assert_eq!(
                m.try_lock_for_checked(Duration::from_millis(30))
                    .unwrap_err(),
                RtMutexError::TimedOut
            );
            let dt = t0.elapsed();
            assert!(dt >= Duration::from_millis(30), "returned early: {dt:?}");
            assert!(dt < Duration::from_secs(2), "returned far too late: {dt:?}");
            use lock_api::RawMutexTimed as _;
            assert!(m.try_lock_for(Duration::from_millis(1)).is_none());
        });
    });
    // The timed-out waiter left the kernel queue; WAITERS may linger and the
    // unlock goes through the kernel, which clears it.
    unsafe { m.raw_unlock(g) };
    assert_eq!(
        m.word(),
        0,
        "word not clean after the timed-out waiter left"
    );
    // The lock still works, from another thread too.
    std::thread::scope(|s| {
        s.spawn(|| {
            let g = m.try_lock_for_checked(Duration::from_secs(1)).unwrap();
            unsafe { m.raw_unlock(g) };
        });
    });
}

#[test]
fn timed_lock_times_out_cleanly() {
    timed_times_out_cleanly::<RT_SPIN>();
    timed_times_out_cleanly::<NO_RT_SPIN>();
}

/// FUTEX_LOCK_PI (CLOCK_REALTIME deadline) as on kernels without LOCK_PI2.
#[test]
fn lock_pi_fallback_works() {
    force_lock_pi_fallback(true);
    timed_times_out_cleanly::<NO_RT_SPIN>();
    force_lock_pi_fallback(false);
}

#[test]
fn timed_lock_succeeds_when_released_in_time() {
    let m = Arc::new(RawRtMutexWith::<NO_RT_SPIN>::new());
    let g = m.lock_checked().unwrap();
    let got = Arc::new(AtomicBool::new(false));
    let t = {
        let (m, got) = (m.clone(), got.clone());
        std::thread::spawn(move || {
            let g = m.try_lock_for_checked(Duration::from_secs(5)).unwrap();
            got.store(true, Relaxed);
            unsafe { m.raw_unlock(g) };
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    assert!(!got.load(Relaxed));
    unsafe { m.raw_unlock(g) };
    t.join().unwrap();
    assert!(got.load(Relaxed));
    assert_eq!(m.word(), 0);
}

/// Plain (non-RT) contention: exclusion and a clean word, spin on and off,
/// time-bounded.
#[test]
fn contended_exclusion() {
    fn run<const S: u8>() {
        let m = Arc::new(klock::RtMutexWith::<S, u64>::new(0));
        let end = Instant::now() + Duration::from_millis(400);
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while Instant::now() < end {
                        let mut g = m.lock();
                        let v = *g;
                        std::hint::spin_loop();
                        *g = v + 1;
                        drop(g);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(*m.lock(), total);
        assert_eq!(unsafe { m.raw() }.word(), 0);
    }
    run::<RT_SPIN>();
    run::<RT_SPIN_KWAIT>();
    run::<NO_RT_SPIN>();
}

/// Poll `f` every millisecond for up to 5 s.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "never happened: {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A thread that runs `before` (e.g. a policy change), then locks `m`,
/// unlocks it, and returns how long the lock took.
fn spawn_locker<const S: u8>(
    m: &Arc<RawRtMutexWith<S>>,
    before: fn(),
) -> std::thread::JoinHandle<Duration> {
    let m = m.clone();
    std::thread::spawn(move || {
        before();
        let t0 = Instant::now();
        let g = m.lock_checked().unwrap();
        unsafe { m.raw_unlock(g) };
        t0.elapsed()
    })
}

/// A non-real-time contender waits in userspace (the lock's second futex),
/// then, after USER_WAIT_NS, queues in the kernel, which hands it the lock.
#[test]
fn non_rt_waiter_waits_in_userspace_then_in_the_kernel() {
    // Long enough for the 1 ms polls below to see the userspace wait on a
    // loaded machine.
    let _limit = UserWaitLimit::set(300_000_000);
    let m = Arc::new(RawRtMutexWith::<RT_SPIN>::new());
    let g = m.lock_checked().unwrap();
    let t = spawn_locker(&m, || {});
    eventually("the waiter waits in userspace", || m.user_waiters() == 1);
    assert_ne!(m.word() & WAITERS, 0, "a userspace waiter sets WAITERS");
    // Still held: after USER_WAIT_NS it leaves the userspace wait for the kernel.
    eventually("the waiter moves to the kernel", || m.user_waiters() == 0);
    assert_ne!(m.word() & WAITERS, 0);
    unsafe { m.raw_unlock(g) };
    let waited = t.join().unwrap();
    assert!(waited >= Duration::from_nanos(user_wait_ns()), "{waited:?}");
    assert_eq!(m.word(), 0);
}

/// An unlock wakes a userspace waiter promptly (well before USER_WAIT_NS
/// would have sent it to the kernel).
#[test]
fn unlock_wakes_a_userspace_waiter() {
    // No move to the kernel while we look.
    let _limit = UserWaitLimit::set(30_000_000_000);
    for _ in 0..20 {
        let m = Arc::new(RawRtMutexWith::<RT_SPIN>::new());
        let g = m.lock_checked().unwrap();
        let t = spawn_locker(&m, || {});
        eventually("the waiter waits in userspace", || m.user_waiters() == 1);
        unsafe { m.raw_unlock(g) };
        t.join().unwrap();
        assert_eq!(m.word(), 0);
        assert_eq!(m.user_waiters(), 0);
    }
}

/// With `RT_SPIN_KWAIT` (and for real-time threads always) a contender
/// queues in the kernel, never in userspace.
#[test]
fn kwait_mode_queues_in_the_kernel() {
    let m = Arc::new(RawRtMutexWith::<RT_SPIN_KWAIT>::new());
    let g = m.lock_checked().unwrap();
    let t = spawn_locker(&m, || {});
    eventually("the waiter queues", || m.word() & WAITERS != 0);
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(m.user_waiters(), 0);
    unsafe { m.raw_unlock(g) };
    t.join().unwrap();
    assert_eq!(m.word(), 0);
}

/// A SCHED_FIFO contender never waits in userspace: it needs the kernel's
/// priority inheritance. Skipped (with the reason) where SCHED_FIFO is refused.
#[test]
fn realtime_waiter_queues_in_the_kernel() {
    if !klock::rt::fifo_available() {
        eprintln!(
            "skipped: {}",
            klock::rt::rt_unavailable_reason(0).unwrap_or_default()
        );
        return;
    }
    let m = Arc::new(RawRtMutexWith::<RT_SPIN>::new());
    let g = m.lock_checked().unwrap();
    let t = spawn_locker(&m, || klock::rt::set_fifo(10).unwrap());
    eventually("the real-time waiter queues", || m.word() & WAITERS != 0);
    for _ in 0..10 {
        assert_eq!(
            m.user_waiters(),
            0,
            "a real-time waiter waited in userspace"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    unsafe { m.raw_unlock(g) };
    t.join().unwrap();
    assert_eq!(m.word(), 0);
}
