//! Condition variable for [`crate::Mutex`]: a futex on a sequence number.
//!
//! ```text
//! wait:      waiters += 1; s = seq; unlock mutex; FUTEX_WAIT(seq, s); waiters -= 1; lock mutex
//! notify:    seq += 1; if waiters > 0 { FUTEX_WAKE(seq, 1 or all) }
//! ```
//!
//! A waiter reads `seq` while it still holds the mutex, so a notification
//! made after it released the mutex changes `seq` and either wakes the
//! waiter's `FUTEX_WAIT` or makes it return at once (the kernel compares
//! the word with `s` atomically with going to sleep). `waiters` lets a
//! notify with nobody waiting skip the system call; the `SeqCst` pair
//! (`waiters` increment, `seq` load) vs (`seq` increment, `waiters` load)
//! guarantees that a notifier reads `waiters > 0` or the waiter reads the
//! new `seq`.
//!
//! Wake-ups may be spurious (lock_api's contract allows it), so
//! `notify_one`/`notify_all` return `false`/`0`, and callers wait in a loop
//! on their condition (`Condvar::wait_while`).

use crate::mutex::{OwnerGuard, RawMutexWith, OWNER_SPIN_GLOBAL};
use crate::sys::{self, WaitResult};
use crate::waitlock::{WaitLock, WaitLockRaw};
use core::marker::PhantomData;
use core::sync::atomic::AtomicU32;
use core::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

/// The raw condition variable for [`RawMutexWith<SPIN, W>`](RawMutexWith).
pub struct RawCondvarWith<const SPIN: u8, W: WaitLockRaw = WaitLock> {
    /// Bumped by every notification; the futex word.
    seq: AtomicU32,
    /// Threads inside `wait` (a notify with none skips `FUTEX_WAKE`).
    waiters: AtomicU32,
    _mutex: PhantomData<fn() -> RawMutexWith<SPIN, W>>,
}

/// The raw condition variable for [`crate::Mutex`].
pub type RawCondvar = RawCondvarWith<OWNER_SPIN_GLOBAL>;

impl<const SPIN: u8, W: WaitLockRaw> RawCondvarWith<SPIN, W> {
    /// A condition variable nobody waits on.
    pub const fn new() -> Self {
        Self {
            seq: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            _mutex: PhantomData,
        }
    }

    /// Unlock `mutex`, wait for a notification (or `timeout`), lock it
    /// again. Returns whether the wait timed out.
    ///
    /// # Safety
    /// `guard` holds `mutex`.
    unsafe fn wait_timeout(
        &self,
        mutex: &RawMutexWith<SPIN, W>,
        guard: &mut OwnerGuard,
        timeout: Option<Duration>,
    ) -> bool {
        // SeqCst pair with notify (see the module docs).
        self.waiters.fetch_add(1, SeqCst);
        let s = self.seq.load(SeqCst);
        // SAFETY: the caller holds `mutex` with `guard`. We move the state
        // out and replace it below with the new acquisition's.
        unsafe { mutex.raw_unlock(core::ptr::read(guard)) };
        let r = sys::futex_wait(&self.seq, s, timeout);
        self.waiters.fetch_sub(1, Relaxed);
        // SAFETY: `guard`'s old state was consumed by raw_unlock above;
        // overwrite it without dropping (OwnerGuard has no destructor anyway).
        unsafe { core::ptr::write(guard, mutex.raw_lock()) };
        r == WaitResult::TimedOut
    }

    fn notify(&self, n: u32) {
        self.seq.fetch_add(1, SeqCst);
        if self.waiters.load(SeqCst) != 0 {
            sys::futex_wake(&self.seq, n);
        }
    }
}

impl<const SPIN: u8, W: WaitLockRaw> Default for RawCondvarWith<SPIN, W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SPIN: u8, W: WaitLockRaw> core::fmt::Debug for RawCondvarWith<SPIN, W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RawCondvar")
            .field("waiters", &self.waiters.load(Relaxed))
            .finish()
    }
}

// SAFETY: wait reads `seq` while holding the mutex, then unlocks and waits
// on `seq` with the value read, so a notify after the unlock cannot be
// missed; it always re-locks before returning (raw_lock does not unwind
// except on a broken futex, where the mutex is then not held — futex_wait
// panics only on impossible errors).
unsafe impl<const SPIN: u8, W: WaitLockRaw> lock_api::RawCondvar for RawCondvarWith<SPIN, W> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type RawMutex = RawMutexWith<SPIN, W>;

    unsafe fn wait(&self, mutex: &Self::RawMutex, guard: &mut OwnerGuard) {
        // SAFETY: forwarded contract.
        unsafe { self.wait_timeout(mutex, guard, None) };
    }

    fn notify_one(&self) -> bool {
        self.notify(1);
        false
    }

    fn notify_all(&self) -> usize {
        // i32::MAX, not u32::MAX: the kernel reads the count as an int.
        self.notify(i32::MAX as u32);
        0
    }
}

// SAFETY: as for RawCondvar; a timed-out wait re-locks before returning.
unsafe impl<const SPIN: u8, W: WaitLockRaw> lock_api::RawCondvarTimed for RawCondvarWith<SPIN, W> {
    fn checked_duration_to_instant(timeout: &Duration) -> Option<Instant> {
        Instant::now().checked_add(*timeout)
    }

    unsafe fn wait_until(
        &self,
        mutex: &Self::RawMutex,
        guard: &mut OwnerGuard,
        timeout: &Instant,
    ) -> bool {
        let left = timeout.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        // SAFETY: forwarded contract.
        let timed_out = unsafe { self.wait_timeout(mutex, guard, Some(left)) };
        // A wake-up (or EINTR) right at the deadline: report what the
        // clock says.
        timed_out || Instant::now() >= *timeout
    }

    unsafe fn wait_for(
        &self,
        mutex: &Self::RawMutex,
        guard: &mut OwnerGuard,
        timeout: &Duration,
    ) -> bool {
        if timeout.is_zero() {
            return true;
        }
        match Self::checked_duration_to_instant(timeout) {
            // SAFETY: forwarded contract.
            Some(deadline) => unsafe { self.wait_until(mutex, guard, &deadline) },
            None => {
                // SAFETY: forwarded contract.
                unsafe { self.wait_timeout(mutex, guard, None) };
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Condvar, Mutex};
    use std::time::Duration;

    #[test]
    fn notify_without_waiters_is_cheap_and_harmless() {
        let c = Condvar::new();
        assert!(!c.notify_one());
        assert_eq!(c.notify_all(), 0);
        assert_eq!(c.raw().seq.load(core::sync::atomic::Ordering::Relaxed), 2);
    }

    #[test]
    fn wait_for_times_out() {
        let m = Mutex::new(());
        let c = Condvar::new();
        let mut g = m.lock();
        let t0 = std::time::Instant::now();
        assert!(c.wait_for(&mut g, Duration::from_millis(15)).timed_out());
        assert!(t0.elapsed() >= Duration::from_millis(15));
        // Still locked by us.
        assert!(m.is_locked());
        drop(g);
        assert!(m.try_lock().is_some());
    }
}
