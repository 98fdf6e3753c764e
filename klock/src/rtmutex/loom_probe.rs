//! Loom-only scaffolding: the [`Probe`] that records which paths a model
//! execution took (and checks that at most one thread spins), and the
//! switches that make a lock deliberately broken so a model can show it
//! catches the bug.

use super::RawRtMutexWith;

/// Loom-only record of the paths one model execution took. Plain std
/// atomics: bookkeeping outside the model.
#[derive(Debug, Default)]
#[doc(hidden)]
pub struct Probe {
    /// Top-waiter spins that took the lock.
    pub spin_successes: std::sync::atomic::AtomicU32,
    /// Spins that started with a (stale) WAITERS bit and took the lock
    /// when the owner's kernel unlock found nobody queued.
    pub spin_successes_past_waiters: std::sync::atomic::AtomicU32,
    /// Spins stopped because a waiter queued in the kernel.
    pub spin_stopped_by_waiter: std::sync::atomic::AtomicU32,
    /// Contended lockers that went to the kernel.
    pub kernel_locks: std::sync::atomic::AtomicU32,
    /// Lockers that slept in the (modelled) kernel.
    pub kernel_sleeps: std::sync::atomic::AtomicU32,
    /// Kernel unlocks that handed the lock to a queued waiter.
    pub handoffs: std::sync::atomic::AtomicU32,
    /// Timed lockers that timed out.
    pub timeouts: std::sync::atomic::AtomicU32,
    /// Threads in the spin loop right now (must never exceed 1).
    pub spinning_now: std::sync::atomic::AtomicU32,
    /// Sleeps of userspace waiters.
    pub user_parks: std::sync::atomic::AtomicU32,
    /// Userspace waits that reached their limit and went to the kernel.
    pub user_wait_expired: std::sync::atomic::AtomicU32,
}

impl Probe {
    pub(super) fn hit(c: &std::sync::atomic::AtomicU32) {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Enter the spin loop; asserts there is at most one spinner.
    pub(super) fn enter_spin(&self) -> SpinToken<'_> {
        let n = self
            .spinning_now
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(n, 0, "klock::RtMutex: two top-waiter spinners at once");
        SpinToken(self)
    }
}

pub(super) struct SpinToken<'a>(&'a Probe);

impl Drop for SpinToken<'_> {
    fn drop(&mut self) {
        self.0
            .spinning_now
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl<const SPIN: u8> RawRtMutexWith<SPIN> {
    /// Loom only: paths this lock's execution went through.
    #[doc(hidden)]
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// Loom only: make `raw_unlock` deliberately wrong — a plain store of 0
    /// that ignores `WAITERS` (no `FUTEX_UNLOCK_PI`) — so a model can show
    /// that it catches the stranded kernel waiter.
    #[doc(hidden)]
    pub fn set_loom_broken_unlock(&self) {
        self.loom_broken_unlock
            .store(true, core::sync::atomic::Ordering::Relaxed);
        self.kernel
            .poll
            .store(true, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: make the unlock deliberately wrong — it never wakes a
    /// userspace waiter — so a model can show that it catches the waiter
    /// left asleep.
    #[doc(hidden)]
    pub fn set_loom_broken_wake(&self) {
        self.loom_broken_wake
            .store(true, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: number of waiters queued in the modelled kernel.
    #[doc(hidden)]
    pub fn kernel_waiters(&self) -> usize {
        self.kernel.waiters()
    }

    /// Loom only: limit userspace waits to `ns` of loom clock (default: no
    /// limit, and a waiter blocks until woken, so a lost wake-up shows).
    #[doc(hidden)]
    pub fn set_loom_user_wait_ns(&self, ns: u64) {
        self.loom_user_wait_ns
            .store(ns, core::sync::atomic::Ordering::Relaxed);
    }
}
