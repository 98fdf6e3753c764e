//! What the in-place layouts of libklock_preload.so assume of klock's
//! types, checked against the types themselves (see src/rwlock.rs).

// The library is built for x86-64 glibc only (see src/lib.rs).
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use klock::rwsem::{WriteGuard, OWNER_SHIFT};
use klock::RawRwSem;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
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

/// glibc's `__flags` word (byte 48 of `pthread_rwlock_t`, where
/// `PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP` puts 2) lies past
/// the rw-semaphore, so nothing the library does reads or writes it; and
/// a lock whose next bytes hold that 2 works.
#[test]
fn glibc_flags_word_is_past_the_rw_semaphore() {
    assert!(core::mem::size_of::<RawRwSem>() <= 48);
    #[repr(C, align(8))]
    struct Pthread {
        sem: RawRwSem,
        flags: [AtomicU8; 56 - core::mem::size_of::<RawRwSem>()],
    }
    let p = Arc::new(Pthread {
        sem: RawRwSem::new(),
        flags: core::array::from_fn(|i| {
            AtomicU8::new(if i == 48 - core::mem::size_of::<RawRwSem>() {
                2
            } else {
                0
            })
        }),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..6)
        .map(|i| {
            let p = p.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Relaxed) {
                    if i % 2 == 0 {
                        let g = p.sem.raw_lock_exclusive();
                        std::thread::sleep(std::time::Duration::from_micros(50));
                        // SAFETY: held with `g`.
                        unsafe { p.sem.raw_unlock_exclusive(g) };
                    } else {
                        let _ = p.sem.raw_lock_shared();
                        // SAFETY: we hold a read lock.
                        unsafe { p.sem.raw_unlock_shared() };
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(p.sem.count_word(), 0);
    let at48 = 48 - core::mem::size_of::<RawRwSem>();
    for (i, b) in p.flags.iter().enumerate() {
        assert_eq!(
            b.load(Relaxed),
            if i == at48 { 2 } else { 0 },
            "byte {} changed",
            48 + i - at48
        );
    }
}
