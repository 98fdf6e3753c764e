use super::*;
use lock_api::{RawMutex as _, RawMutexTimed as _};
use std::time::Instant;

#[test]
fn word_layout_matches_the_kernel_abi() {
    assert_eq!(WAITERS, 1 << 31);
    assert_eq!(OWNER_DIED, 1 << 30);
    assert_eq!(TID_MASK & (WAITERS | OWNER_DIED), 0);
    assert_eq!(TID_MASK | WAITERS | OWNER_DIED, u32::MAX);
}

#[test]
fn lock_try_unlock() {
    let m = RawRtMutex::INIT;
    assert!(!m.is_locked());
    let g = m.lock();
    assert_eq!(m.word(), thread::current_tid());
    assert_eq!(g.owner_tid(), thread::current_tid());
    assert_eq!(m.owner_tid(), Some(thread::current_tid()));
    unsafe { m.unlock(g) };
    assert_eq!(m.word(), 0);
    let g = m.try_lock().unwrap();
    unsafe { m.unlock(g) };
    let g = m.try_lock_for(Duration::from_millis(1)).unwrap();
    assert!(format!("{m:?}").contains("waiters: false"));
    unsafe { m.unlock(g) };
}

#[test]
fn try_lock_fails_when_held_elsewhere() {
    let m = RawRtMutex::new();
    let g = m.lock();
    std::thread::scope(|s| {
        s.spawn(|| assert!(m.try_lock().is_none()));
    });
    unsafe { m.unlock(g) };
}

#[test]
fn contended_handover_through_the_kernel() {
    let m = RawRtMutexWith::<NO_RT_SPIN>::new();
    let g = m.lock();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            let g = m.lock();
            let t = g.owner_tid();
            unsafe { m.unlock(g) };
            t
        });
        // Wait until the other thread is queued in the kernel.
        let t0 = Instant::now();
        while m.word() & WAITERS == 0 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_ne!(m.word() & WAITERS, 0, "waiter never queued");
        unsafe { m.unlock(g) };
        assert_ne!(h.join().unwrap(), thread::current_tid());
    });
    assert_eq!(m.word(), 0);
}

#[test]
fn global_switch() {
    let was = top_waiter_spin();
    set_top_waiter_spin(!was);
    assert_eq!(RawRtMutex::new().spin_enabled(), !was);
    set_top_waiter_spin(was);
    assert!(RawRtMutexWith::<RT_SPIN>::new().spin_enabled());
    assert!(!RawRtMutexWith::<NO_RT_SPIN>::new().spin_enabled());
}

#[test]
fn errors_display() {
    assert!(RtMutexError::Deadlock.to_string().contains("EDEADLK"));
    assert!(RtMutexError::Kernel(3).to_string().contains("futex"));
}

/// `raw_try_lock_as` (for callers that read their tid elsewhere, as the
/// C library does) names exactly the tid it is given.
#[test]
fn try_lock_as_names_the_given_tid() {
    let m = RawRtMutex::INIT;
    let other = thread::current_tid() + 1;
    let g = m.raw_try_lock_as(other).unwrap();
    assert_eq!((m.word(), g.owner_tid()), (other, other));
    assert!(m.raw_try_lock_as(thread::current_tid()).is_none());
    unsafe { m.unlock(g) };
    assert_eq!(m.word(), 0);
}
