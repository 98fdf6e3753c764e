//! Loom-only scaffolding: the [`Probe`] that records which rare paths a
//! model execution took, and the per-lock settings a model starts from
//! (bounds, owner bits, the deliberately broken variants of
//! [`broken`](super::broken)).

use super::RawRwSemWith;
use crate::sync::Ordering::Relaxed;
use crate::waitlock::WaitLockRaw;

/// Loom-only record of the rare paths one model execution took.
#[derive(Debug, Default)]
#[doc(hidden)]
pub struct Probe {
    pub spin_successes: std::sync::atomic::AtomicU32,
    /// Quick spins (read-only polls before the OSQ) that took the lock.
    pub quick_spins: std::sync::atomic::AtomicU32,
    pub nospin_sets: std::sync::atomic::AtomicU32,
    pub norspins: std::sync::atomic::AtomicU32,
    pub rd_set_by_writer: std::sync::atomic::AtomicU32,
    pub rd_set_by_reader: std::sync::atomic::AtomicU32,
    pub rejoins: std::sync::atomic::AtomicU32,
    pub steals: std::sync::atomic::AtomicU32,
    /// Readers that passed queued waiters (reader passing).
    pub passes: std::sync::atomic::AtomicU32,
    pub rlock_fast: std::sync::atomic::AtomicU32,
    pub grants: std::sync::atomic::AtomicU32,
    /// Largest number of readers granted by one wake-up.
    pub max_group: std::sync::atomic::AtomicU32,
    pub handoff_requests: std::sync::atomic::AtomicU32,
    pub sleeps: std::sync::atomic::AtomicU32,
    pub wakes_of_sleepers: std::sync::atomic::AtomicU32,
    pub timeouts: std::sync::atomic::AtomicU32,
    pub wake_next_on_leave: std::sync::atomic::AtomicU32,
    pub downgrades: std::sync::atomic::AtomicU32,
    /// Wake-ups of readers to compete (not granted).
    pub compete_wakes: std::sync::atomic::AtomicU32,
    /// Woken readers that won the lock.
    pub woken_wins: std::sync::atomic::AtomicU32,
    /// Woken readers that lost it and queued again.
    pub requeues: std::sync::atomic::AtomicU32,
    /// Waiters between releasing wait_lock and returning from `park` now
    /// (a gauge, not a path count).
    pub parking: std::sync::atomic::AtomicU32,
}

impl Probe {
    pub(super) fn hit(c: &std::sync::atomic::AtomicU32) {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl<const R: u8, const A: u8, W: WaitLockRaw> RawRwSemWith<R, A, W> {
    /// Loom only: paths this lock's executions went through.
    #[doc(hidden)]
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// Loom only: this lock's wait timeout (see
    /// [`set_wait_timeout_ns`](super::set_wait_timeout_ns)).
    #[doc(hidden)]
    pub fn set_loom_wait_timeout_ns(&self, ns: u64) {
        self.loom_wait_timeout_ns
            .store(ns, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: turn reader passing on for this lock (see
    /// [`reader_pass`](super::reader_pass); off by default under loom).
    #[doc(hidden)]
    pub fn set_loom_reader_pass(&self, on: bool) {
        self.loom_reader_pass
            .store(on, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: turn the quick spin off, so that a model's lockers
    /// reach the full spin and the queue (each poll's relax is a loom
    /// yield, which lets the owner release first).
    #[doc(hidden)]
    pub fn set_loom_no_quick_spin(&self) {
        self.loom_no_quick_spin
            .store(true, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: make the lock deliberately wrong (see [`broken`](super::broken)).
    #[doc(hidden)]
    pub fn set_loom_broken(&self, mode: u8) {
        self.loom_broken
            .store(mode, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: set owner-word bits (to start a model from a state).
    #[doc(hidden)]
    pub fn loom_set_owner(&self, v: usize) {
        self.owner.store(v, Relaxed);
    }

    /// Loom only: whether the wait list is empty (takes wait_lock).
    #[doc(hidden)]
    pub fn wait_list_is_empty(&self) -> bool {
        self.wl_lock();
        // SAFETY: we hold wait_lock.
        let empty = unsafe { self.list_head() }.is_null();
        // SAFETY: we hold wait_lock.
        unsafe { self.wl_unlock() };
        empty
    }

    /// Loom only: this lock's reader wait bound (see
    /// [`set_reader_wait_ns`](super::set_reader_wait_ns)).
    #[doc(hidden)]
    pub fn set_loom_reader_wait_ns(&self, ns: u64) {
        self.loom_reader_wait_ns
            .store(ns, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: this lock's reader grant bound (see
    /// [`set_reader_grant_ns`](super::set_reader_grant_ns)).
    #[doc(hidden)]
    pub fn set_loom_reader_grant_ns(&self, ns: u64) {
        self.loom_reader_grant_ns
            .store(ns, core::sync::atomic::Ordering::Relaxed);
    }

    /// Loom only: how many waiters have released wait_lock to park and not
    /// yet returned from parking (read without any lock, so a model waiting
    /// on it adds no lock spins).
    #[doc(hidden)]
    pub fn waiters_parking(&self) -> u32 {
        self.probe
            .parking
            .load(core::sync::atomic::Ordering::Relaxed)
    }
}
