//! What the in-place layouts of libklock_preload.so assume of klock's
//! types, checked against the types themselves (see src/rwlock.rs). That
//! the rw-semaphore ends before glibc's `__flags` word (byte 48) is a
//! compile-time assertion in the library; `tests/c/preload_test.c` runs a
//! rwlock made by `PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP`,
//! which puts 2 there, under 16 threads.

// The library is built for x86-64 glibc only (see src/lib.rs).
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use klock::rwsem::{WriteGuard, OWNER_SHIFT};
use klock::RawRwSem;
use std::sync::Arc;

/// A write guard is its writer's `tid << OWNER_SHIFT`, plus a hint for
/// the unlock in the low bits; a guard rebuilt from the identity alone
/// (hint 0) unlocks too, so the library can rebuild one for
/// `pthread_rwlock_unlock`.
#[test]
fn write_guard_is_the_writer_identity() {
    let l = RawRwSem::new();
    let g = l.raw_lock_exclusive();
    let tid = g.owner_tid();
    // SAFETY: same size (the library asserts it at compile time).
    let id = unsafe { core::mem::transmute::<WriteGuard, usize>(g) };
    assert_eq!(id >> OWNER_SHIFT, tid as usize);
    assert_eq!(tid, klock::thread::current_tid());
    let rebuilt = (tid as usize) << OWNER_SHIFT;
    // SAFETY: we hold it; the guard rebuilt from the identity is ours.
    unsafe { l.raw_unlock_exclusive(core::mem::transmute::<usize, WriteGuard>(rebuilt)) };
    assert!(!l.is_held());
    // The same with waiters flagged in the count word: the rebuilt guard
    // takes the unlock's slow path, which must release all the same.
    let l = Arc::new(RawRwSem::new());
    let _held = l.raw_lock_exclusive();
    let waiter = {
        let l = l.clone();
        std::thread::spawn(move || {
            let g = l.raw_lock_exclusive();
            // SAFETY: held with `g`.
            unsafe { l.raw_unlock_exclusive(g) };
        })
    };
    while l.count_word() & klock::rwsem::WAITERS == 0 {
        std::thread::yield_now();
    }
    // SAFETY: we hold it; as above.
    unsafe { l.raw_unlock_exclusive(core::mem::transmute::<usize, WriteGuard>(rebuilt)) };
    waiter.join().unwrap();
    assert_eq!(l.count_word(), 0);
}
