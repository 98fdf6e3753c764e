use super::*;
use lock_api::{RawMutex as _, RawMutexFair as _, RawMutexTimed as _};
use std::time::Instant;

/// The owner word is the last field and the spin test's counter comes
/// right before it, so that a `Mutex<T>`'s data follows them on their
/// cache line.
#[test]
fn hot_words_are_last() {
    let size = core::mem::size_of::<RawMutex>();
    assert_eq!(core::mem::offset_of!(RawMutex, owner), size - 8);
    assert_eq!(
        core::mem::offset_of!(RawMutex, adapt) + core::mem::size_of::<SpinAdapt>(),
        size - 8
    );
    let m = crate::Mutex::new(0u64);
    // SAFETY: only the addresses are used.
    let (raw, data) = (
        unsafe { m.raw() } as *const RawMutex as usize,
        m.data_ptr() as usize,
    );
    assert_eq!(data - raw, size, "the data follows the raw lock");
}

#[test]
fn word_layout() {
    assert_eq!(FLAGS, 0b1111);
    assert_eq!(OWNER_MASK & FLAGS, 0);
    assert_eq!(1usize << OWNER_SHIFT, WOKEN << 1);
    // The largest Linux tid (pid_max ≤ 2^22) fits.
    assert_eq!(tid_of(((1usize << 22) - 1) << OWNER_SHIFT), (1 << 22) - 1);
}

#[test]
fn lock_try_unlock() {
    let m = RawMutex::INIT;
    assert!(!m.is_locked());
    let g = m.lock();
    assert!(m.is_locked());
    assert_eq!(m.word(), my_id());
    assert_eq!(m.owner_tid(), Some(thread::current_tid()));
    assert_eq!(g.owner_tid(), thread::current_tid());
    unsafe { m.unlock(g) };
    assert_eq!(m.word(), 0);
    let g = m.try_lock().unwrap();
    unsafe { m.unlock_fair(g) };
    assert_eq!(m.word(), 0);
    let g = m.try_lock_for(Duration::from_millis(1)).unwrap();
    assert!(format!("{m:?}").contains("waiters: false"));
    unsafe { m.unlock(g) };
}

#[test]
fn try_lock_fails_when_held_elsewhere() {
    let m = RawMutex::new();
    let g = m.lock();
    std::thread::scope(|s| {
        s.spawn(|| assert!(m.try_lock().is_none()));
    });
    unsafe { m.unlock(g) };
}

#[test]
fn handoff_reserved_lock_refuses_strangers() {
    let m = RawMutex::new();
    m.owner.store(HANDOFF | WAITERS, Relaxed);
    assert!(m.try_lock().is_none(), "HANDOFF reserves a free lock");
    m.owner
        .store(((77usize) << OWNER_SHIFT) | PICKUP | WAITERS, Relaxed);
    assert!(m.try_lock().is_none(), "PICKUP names another thread");
    m.owner.store(my_id() | PICKUP | WAITERS, Relaxed);
    assert!(m.try_lock_slow(my_id(), true));
    assert_eq!(m.word(), my_id() | WAITERS);
    m.owner.store(0, Relaxed);
}

/// The error-checking lock refuses a relock by the holder, whatever flags
/// the word carries, takes a lock handed to it, and waits for another
/// thread's.
#[test]
fn relock_check_refuses_only_the_holder() {
    let m = RawMutex::new();
    let me = thread::current_tid();
    let g = m.raw_lock_unless_held_as(me).unwrap();
    assert_eq!(m.word(), my_id());
    assert!(m.raw_lock_unless_held_as(me).is_none(), "a plain relock");
    assert_eq!(m.word(), my_id(), "refused without touching the word");
    m.owner.store(my_id() | WAITERS, Relaxed);
    assert!(m.raw_lock_unless_held_as(me).is_none(), "with waiters");
    m.owner.store(my_id() | WAITERS | WOKEN, Relaxed);
    assert!(
        m.raw_lock_unless_held_as(me).is_none(),
        "with a woken waiter"
    );
    // Handed to us (a waiter's state): ours to pick up, not a relock.
    m.owner.store(my_id() | PICKUP | WAITERS, Relaxed);
    assert!(m.raw_lock_unless_held_as(me).is_some());
    assert_eq!(m.word(), my_id() | WAITERS);
    m.owner.store(my_id(), Relaxed);
    unsafe { m.unlock(g) };
    // Another thread's lock: waited for, then taken.
    let held = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            let g = m.lock();
            held.wait();
            std::thread::sleep(Duration::from_millis(20));
            unsafe { m.unlock(g) };
        });
        held.wait();
        let t = Instant::now();
        let g = m.raw_lock_unless_held_as(me).unwrap();
        assert!(t.elapsed() >= Duration::from_millis(10));
        assert_eq!(m.owner_tid(), Some(me));
        unsafe { m.unlock(g) };
    });
    assert!(!m.is_locked());
}

#[test]
fn timed_lock_times_out() {
    let m = RawMutexWith::<NO_OWNER_SPIN>::new();
    let g = m.lock();
    std::thread::scope(|s| {
        s.spawn(|| {
            let t0 = Instant::now();
            assert!(m.try_lock_for(Duration::from_millis(20)).is_none());
            assert!(t0.elapsed() >= Duration::from_millis(20));
        });
    });
    assert_eq!(m.word(), my_id(), "the timed-out waiter left no flags");
    unsafe { m.unlock(g) };
}

#[test]
fn global_switch() {
    // Read (and cache) the environment, then flip and restore.
    let was = owner_spin();
    set_owner_spin(!was);
    assert_eq!(owner_spin(), !was);
    assert_eq!(RawMutex::new().owner_spin_enabled(), !was);
    assert!(RawMutexWith::<OWNER_SPIN>::new().owner_spin_enabled());
    assert!(!RawMutexWith::<NO_OWNER_SPIN>::new().owner_spin_enabled());
    set_owner_spin(was);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "does not own the lock")]
fn unlock_by_non_owner_panics() {
    let m = RawMutex::new();
    let other = RawMutex::new();
    std::thread::scope(|s| {
        // The raw guard has no destructor: dropping it keeps the lock held.
        s.spawn(|| {
            let _held = m.lock();
        });
    });
    let g = other.lock();
    // A guard from `other`, used on `m` held by another thread.
    unsafe { m.unlock(g) };
}

/// `raw_try_lock_as` (for callers that read their tid elsewhere, as the
/// C library does) names exactly the tid it is given.
#[test]
fn try_lock_as_names_the_given_tid() {
    let m = RawMutex::INIT;
    let other = thread::current_tid() + 1;
    let g = m.raw_try_lock_as(other).unwrap();
    assert_eq!(m.owner_tid(), Some(other));
    assert!(m.raw_try_lock_as(thread::current_tid()).is_none());
    unsafe { m.unlock(g) };
    let g = m.raw_try_lock().unwrap();
    assert_eq!(m.owner_tid(), Some(thread::current_tid()));
    unsafe { m.unlock(g) };
    assert!(!m.is_locked());
}
