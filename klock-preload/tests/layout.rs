//! What the in-place layouts of libklock_preload.so assume of klock's
//! types, checked against the types themselves (see src/rwlock.rs).

// The library is built for x86-64 glibc only (see src/lib.rs).
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use klock::rwsem::{WriteGuard, OWNER_SHIFT};
use klock::RawRwSem;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;

/// A write guard is its writer's `tid << OWNER_SHIFT` and nothing else,
/// so the library can rebuild one for `pthread_rwlock_unlock`.
#[test]
fn write_guard_is_the_writer_identity() {
    let l = RawRwSem::new();
    let g = l.raw_lock_exclusive();
    let tid = g.owner_tid();
    // SAFETY: same size (the library asserts it at compile time).
    let id = unsafe { core::mem::transmute::<WriteGuard, usize>(g) };
    assert_eq!(id, (tid as usize) << OWNER_SHIFT);
    assert_eq!(tid, klock::thread::current_tid());
    // SAFETY: we hold it; the guard rebuilt from the identity is ours.
    unsafe { l.raw_unlock_exclusive(core::mem::transmute::<usize, WriteGuard>(id)) };
    assert!(!l.is_held());
}

/// Byte 48 of a `RawRwSem` (glibc's `__flags`) only ever holds 0 or 1
/// (the rw-semaphore's `front_reader` flag, or padding): the library may
/// turn a static initializer's 2 there into 0 before first use.
#[test]
fn byte_48_is_a_flag_or_padding() {
    assert_eq!(core::mem::size_of::<RawRwSem>(), 56);
    let l = Arc::new(RawRwSem::new());
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..6)
        .map(|i| {
            let l = l.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Relaxed) {
                    if i % 2 == 0 {
                        let g = l.raw_lock_exclusive();
                        std::thread::sleep(std::time::Duration::from_micros(50));
                        // SAFETY: held with `g`.
                        unsafe { l.raw_unlock_exclusive(g) };
                    } else {
                        let _ = l.raw_lock_shared();
                        // SAFETY: we hold a read lock.
                        unsafe { l.raw_unlock_shared() };
                    }
                }
            })
        })
        .collect();
    // SAFETY: inside the live lock; a byte load races only with the
    // rw-semaphore's own atomic byte accesses, if any.
    let b48 = unsafe { &*(Arc::as_ptr(&l).cast::<u8>().add(48).cast::<AtomicU8>()) };
    let start = std::time::Instant::now();
    let mut seen = [0u64; 256];
    while start.elapsed() < std::time::Duration::from_millis(300) {
        seen[b48.load(Relaxed) as usize] += 1;
    }
    stop.store(true, Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let other: u64 = seen[2..].iter().sum();
    assert_eq!(
        other, 0,
        "byte 48 of RawRwSem held values above 1: {seen:?}"
    );
}
