//! The PI peers of the `pi` suites: glibc's `PTHREAD_PRIO_INHERIT` mutex
//! and a raw PI-futex lock.
//!
//! glibc's PI mutex is called through the libc crate: measuring glibc's
//! implementation is the point, and rustix has no pthread locks.

use super::peers::{BenchLock, TryBench};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, Ordering::*};

extern "C" {
    // glibc; not bound by the libc crate.
    fn pthread_mutexattr_setprotocol(
        attr: *mut libc::pthread_mutexattr_t,
        protocol: libc::c_int,
    ) -> libc::c_int;
}

/// glibc `pthread_mutex_t` with `PTHREAD_PRIO_INHERIT` (boxed: pthread
/// objects must not move).
pub struct PthreadPi(Box<UnsafeCell<libc::pthread_mutex_t>>);

// SAFETY: pthread mutexes are made to be shared between threads.
unsafe impl Send for PthreadPi {}
unsafe impl Sync for PthreadPi {}

fn check(call: &str, rc: libc::c_int) {
    assert_eq!(
        rc,
        0,
        "{call} failed: {}",
        std::io::Error::from_raw_os_error(rc)
    );
}

impl BenchLock for PthreadPi {
    const PRIORITY_INHERITANCE: bool = true;

    fn new() -> Self {
        let m = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        // SAFETY: attr initialised before use and destroyed after; `m` is
        // boxed, so its address is stable from init on.
        unsafe {
            let mut attr = std::mem::zeroed::<libc::pthread_mutexattr_t>();
            check(
                "pthread_mutexattr_init",
                libc::pthread_mutexattr_init(&mut attr),
            );
            check(
                "pthread_mutexattr_setprotocol(PTHREAD_PRIO_INHERIT)",
                pthread_mutexattr_setprotocol(&mut attr, libc::PTHREAD_PRIO_INHERIT),
            );
            check(
                "pthread_mutex_init",
                libc::pthread_mutex_init(m.get(), &attr),
            );
            libc::pthread_mutexattr_destroy(&mut attr);
        }
        Self(m)
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        // SAFETY: initialised in `new`; lock/unlock paired on this thread.
        check("pthread_mutex_lock (PI)", unsafe {
            libc::pthread_mutex_lock(self.0.get())
        });
        let r = f();
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
        r
    }
}

impl Drop for PthreadPi {
    fn drop(&mut self) {
        // SAFETY: unlocked (we own it exclusively) and initialised.
        unsafe { libc::pthread_mutex_destroy(self.0.get()) };
    }
}

/// A raw PI-futex lock: CAS `0 -> tid` / `tid -> 0` in userspace, else
/// `FUTEX_LOCK_PI2` / `FUTEX_UNLOCK_PI`; no userspace spinning.
pub struct PiFutexLock(crossbeam_utils::CachePadded<AtomicU32>);

impl PiFutexLock {
    #[cold]
    fn lock_slow(&self) {
        use rustix::thread::futex;
        loop {
            let r = if klock::rtmutex::uses_lock_pi2() {
                futex::lock_pi2(&self.0, futex::Flags::PRIVATE, None)
            } else {
                futex::lock_pi(&self.0, futex::Flags::PRIVATE, None)
            };
            match r {
                Ok(()) => return,
                Err(rustix::io::Errno::NOSYS) => klock::rtmutex::force_lock_pi_fallback(true),
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
                Err(e) => panic!("pi-futex: FUTEX_LOCK_PI failed: {e}"),
            }
        }
    }
}

impl BenchLock for PiFutexLock {
    const PRIORITY_INHERITANCE: bool = true;

    fn new() -> Self {
        Self(crossbeam_utils::CachePadded::new(AtomicU32::new(0)))
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        let me = klock::thread::current_tid();
        // Acquire pairs with the Release CAS of the previous owner (the
        // kernel path is a full barrier).
        if self.0.compare_exchange(0, me, Acquire, Relaxed).is_err() {
            self.lock_slow();
        }
        let r = f();
        // Release: the next owner's Acquire CAS (or the kernel) sees our writes.
        if self.0.compare_exchange(me, 0, Release, Relaxed).is_err() {
            std::sync::atomic::fence(Release);
            rustix::thread::futex::unlock_pi(&self.0, rustix::thread::futex::Flags::PRIVATE)
                .expect("pi-futex: FUTEX_UNLOCK_PI failed");
        }
        r
    }
}

// Neither has a try here: lockstat leaves them out (see `TryBench::TRY`).
impl TryBench for PthreadPi {
    const TRY: bool = false;
    fn try_write<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        Err(f)
    }
}

impl TryBench for PiFutexLock {
    const TRY: bool = false;
    fn try_write<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        Err(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn pi_peers_exclude() {
        fn excludes<L: BenchLock>() {
            struct S<L> {
                l: L,
                n: UnsafeCell<u64>,
            }
            unsafe impl<L: Sync> Sync for S<L> {}
            let s = Arc::new(S {
                l: L::new(),
                n: UnsafeCell::new(0),
            });
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        for _ in 0..5_000 {
                            s.l.write(|| unsafe { *s.n.get() += 1 });
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(unsafe { *s.n.get() }, 20_000);
        }
        excludes::<PthreadPi>();
        excludes::<PiFutexLock>();
    }
}
