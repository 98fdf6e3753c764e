//! Loom-only scaffolding: the [`Probe`] that records which rare paths a
//! model execution took, and the calls that let a model stage a race
//! without spending its preemption budget on reaching it.

use super::{LockWord, RawQSpinLockWith, CORRECT, LOCKED_PV};
use crate::sync::Ordering::{Acquire, Relaxed};
use crate::thread;

/// Loom-only record of the rare paths one model execution took. Plain std
/// atomics: bookkeeping outside the model.
#[derive(Debug, Default)]
#[doc(hidden)]
pub struct Probe {
    /// Took the lock through the pending bit.
    pub pending_taken: std::sync::atomic::AtomicU32,
    /// A pending-setter's fetch_or saw (n,0,0).
    pub pender_hit_unlocked_queue: std::sync::atomic::AtomicU32,
    /// Queued behind a predecessor.
    pub queued_behind: std::sync::atomic::AtomicU32,
    /// The head's (n,0,0) -> (0,0,1) CAS failed with the tail still ours
    /// (a pending-setter hit (n,0,0)).
    pub head_cas_lost_to_pending: std::sync::atomic::AtomicU32,
    /// Passed the MCS baton.
    pub handoffs: std::sync::atomic::AtomicU32,
    /// Used the no-node fallback.
    pub no_node: std::sync::atomic::AtomicU32,
    /// Paravirt: took a free lock past a queue (a steal).
    pub steals: std::sync::atomic::AtomicU32,
    /// Paravirt: a slow-path steal found the lock held with a queue and
    /// kept trying instead of queueing.
    pub queue_waits: std::sync::atomic::AtomicU32,
    /// Paravirt: ... and then took the lock past the queue.
    pub queue_steals: std::sync::atomic::AtomicU32,
    /// Paravirt: the fast path took the locked byte, found pending held,
    /// and gave the byte back.
    pub give_backs: std::sync::atomic::AtomicU32,
    /// Paravirt: became the queue head.
    pub heads: std::sync::atomic::AtomicU32,
    /// Paravirt: a queued waiter slept on its node.
    pub node_sleeps: std::sync::atomic::AtomicU32,
    /// Paravirt: the queue head slept on the lock word.
    pub head_sleeps: std::sync::atomic::AtomicU32,
    /// Paravirt: the queue head yielded behind a fast-path owner.
    pub head_yields: std::sync::atomic::AtomicU32,
    /// Paravirt: the queue head reserved the lock with the pending bit.
    pub head_reserves: std::sync::atomic::AtomicU32,
    /// Paravirt: a pending waiter's wait ran out and it queued.
    pub pending_timeouts: std::sync::atomic::AtomicU32,
    /// Paravirt: an unlock woke the sleeping head.
    pub kicks_unlock: std::sync::atomic::AtomicU32,
    /// Paravirt: a baton pass woke a sleeping successor.
    pub kicks_wake: std::sync::atomic::AtomicU32,
    /// Paravirt: who holds the pending bit right now (loom tid, 0 = nobody):
    /// while one thread holds it, no other may take the lock.
    pub pending_holder: std::sync::atomic::AtomicU32,
}

impl Probe {
    pub(super) fn hit(c: &std::sync::atomic::AtomicU32) {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The calling thread set the pending bit (`how`: 1 pending waiter, 2
    /// queue head).
    pub(super) fn pending_set(&self, how: u32) {
        let me = thread::current_tid() * 10 + how;
        let was = self
            .pending_holder
            .swap(me, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(was, 0, "two threads hold the pending bit");
    }

    /// The calling thread cleared (or turned into the lock) its pending bit.
    pub(super) fn pending_cleared(&self) {
        self.pending_holder
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }

    /// The calling thread just took the lock: nobody else may hold pending
    /// (a reserved hand-over must not be overtaken).
    pub(super) fn acquired(&self, path: &str) {
        let me = thread::current_tid();
        let holder = self
            .pending_holder
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            holder == 0 || holder / 10 == me,
            "a locker overtook the pending holder's reserved hand-over \
             ({me} took the lock by {path} while {holder} holds pending)"
        );
    }
}

impl<const PENDING_LOOPS: u32, const PARAVIRT: bool, W: LockWord>
    RawQSpinLockWith<PENDING_LOOPS, PARAVIRT, W>
{
    /// Loom only: paths this lock's execution went through.
    #[doc(hidden)]
    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// Loom only: lock as a thread whose fast-path CAS observed `val` (and
    /// was then descheduled) would. Lets a model stage the (n,0,0) race
    /// without spending its preemption budget on getting there.
    #[doc(hidden)]
    pub fn raw_lock_after_observing(&self, val: u32) {
        self.lock_slow::<CORRECT>(val);
    }

    /// Loom only: take the lock as a slow-path owner (locked byte
    /// `LOCKED_PV`, whose unlock wakes a sleeping head), spinning until the
    /// lock is free. Lets a model stage a sleeping head without a contended
    /// prologue.
    #[doc(hidden)]
    pub fn raw_lock_as_slow_owner(&self) {
        while self
            .word
            .compare_exchange(0, LOCKED_PV, Acquire, Relaxed)
            .is_err()
        {
            loom::thread::yield_now();
        }
    }

    /// Loom only: the newest value of the word (an RMW that changes
    /// nothing), for model scaffolding that waits on lock states.
    #[doc(hidden)]
    pub fn word_newest(&self) -> u32 {
        self.word.fetch_or(0, Relaxed)
    }
}
