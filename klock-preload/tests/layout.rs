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

/// `pthread_rwlock_unlock` rebuilds the write guard from the caller's tid
/// (`WriteGuard::rebuilt`): it must name the writer the lock returned, and
/// unlock both with nobody waiting (its hint's CAS) and with waiters
/// flagged in the count word (the slow path after that CAS fails).
#[test]
fn a_rebuilt_write_guard_unlocks() {
    let l = RawRwSem::new();
    let g = l.raw_lock_exclusive();
    let tid = g.owner_tid();
    assert_eq!(tid, klock::thread::current_tid());
    assert_eq!(WriteGuard::rebuilt(tid).owner_tid(), tid);
    assert_eq!(l.owner_word() >> OWNER_SHIFT, tid as usize);
    // The acquisition's own guard (a plain value) goes unused.
    let _ = g;
    // SAFETY: we hold it; the rebuilt guard is ours.
    unsafe { l.raw_unlock_exclusive(WriteGuard::rebuilt(tid)) };
    assert!(!l.is_held());
    let l = Arc::new(RawRwSem::new());
    let _ = l.raw_lock_exclusive();
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
    unsafe { l.raw_unlock_exclusive(WriteGuard::rebuilt(tid)) };
    waiter.join().unwrap();
    assert_eq!(l.count_word(), 0);
}
