//! The compact mutex across `fork()`: a child inherits every lock's bytes,
//! but of the parent's threads only the one that forked. Waiters queued
//! at the fork, and a thread inside the wait-list lock at that moment,
//! stayed behind. The child notices both by the fork generation
//! ([`crate::thread::fork_generation`]), kept in two places:
//!
//! * the owner word's top 5 bits, set with `WAITERS` by the first waiter
//!   of a wait list and cleared with it by the last one: a word with
//!   `WAITERS` and another generation ([`is_stale`]) has a list whose
//!   waiters exist only in the parent;
//! * the wait-list lock's held value ([`fork_tag`]): a lock held
//!   with another generation's tag is held by a thread that exists only
//!   in the parent, which may have left the list or the owner word half
//!   updated (a first waiter between linking itself and setting
//!   `WAITERS`, a last one between clearing `WAITERS` and unlocking).
//!
//! The first child thread that takes the wait-list lock (taking it over
//! from a holder left in the parent) and finds either sign empties the
//! list and clears the list's flags ([`RawMutexCompact::forget_parent_waiters`]):
//! from then on the lock works as if it had never been contended. A lock
//! held by a thread left in the parent stays held, as with glibc's locks;
//! one handed to a waiter left in the parent, not yet picked up, is freed.

use super::{RawMutexCompact, C_COUNTING, C_PICKUP, C_WAITERS, OWNER_MASK};
use crate::sync::Ordering::Relaxed;
use crate::thread::{fork_generation, fork_tag};
use crate::waitlist::WaitList;

/// The owner word's generation field: bits 27..32, the low 5 bits of the
/// fork generation when the wait list was started (bit 26 is `COUNTING`).
pub(super) const GEN_SHIFT: u32 = C_COUNTING.trailing_zeros() + 1;
pub(super) const GEN_MASK: u32 = !0 << GEN_SHIFT;

/// The generation bits of a wait list started now.
#[inline]
pub(super) fn gen_bits() -> u32 {
    fork_generation() << GEN_SHIFT
}

/// Whether the owner word `w` describes a wait list built before this
/// process was forked: one whose waiters exist only in the parent.
#[inline]
pub(super) fn is_stale(w: u32) -> bool {
    w & C_WAITERS != 0 && w & GEN_MASK != gen_bits()
}

impl RawMutexCompact {
    /// Take `wait_lock`. In a forked child, the first thread to take it
    /// while it still shows the parent's waiters (it was taken over from a
    /// holder left in the parent, or the owner word's list is stale)
    /// forgets those waiters.
    #[inline]
    pub(super) fn lock_wait_list(&self) {
        let taken_over = self.wait_lock.lock_tagged(fork_tag());
        if taken_over || is_stale(self.owner.load(Relaxed)) {
            self.forget_parent_waiters();
        }
    }

    /// Empty the wait list and clear its flags: `(X, F) -> (X, F &
    /// COUNTING)`, and a lock handed to a waiter that stayed in the parent
    /// `(W, PICKUP|F) -> (0, F & COUNTING)`. Caller holds `wait_lock` in a
    /// forked child, and every linked waiter is a thread of the parent
    /// (threads of this process link themselves only after this ran).
    #[cold]
    #[inline(never)]
    pub(super) fn forget_parent_waiters(&self) {
        // SAFETY: we hold wait_lock; the records are not read, only
        // dropped from the list (they lie on the parent's stacks).
        self.list.with_mut(|l| unsafe { *l = WaitList::new() });
        let mut w = self.owner.load(Relaxed);
        loop {
            let owner = if w & C_PICKUP != 0 { 0 } else { w & OWNER_MASK };
            // Relaxed: an RMW continues the release sequence of the last
            // unlock (or hand-off), so the next Acquire CAS still pairs
            // with that release.
            match self
                .owner
                .compare_exchange_weak(w, owner | (w & C_COUNTING), Relaxed, Relaxed)
            {
                Ok(_) => return,
                Err(now) => w = now,
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{Waiter, C_HANDOFF, C_OWNER_SHIFT, C_WOKEN};
    use super::*;
    use crate::sync::AtomicU32;
    use crate::waitlist::{Links, W_WAITING};
    use crate::waitlock::WaitLockRaw;
    use std::sync::mpsc;
    use std::time::Duration;

    const LIST_FLAGS: u32 = C_WAITERS | C_WOKEN | C_HANDOFF | C_PICKUP;

    /// Generation bits of the generation before this one: the state a
    /// parent left. (Tests must not start a fork generation: the other tests'
    /// locks in this process would look forked.)
    fn parent_gen_bits() -> u32 {
        gen_bits().wrapping_sub(1 << GEN_SHIFT)
    }

    /// A waiter record as a parent thread left it on its stack.
    fn ghost(id: u32) -> Box<Waiter> {
        Box::new(Waiter {
            state: AtomicU32::new(W_WAITING),
            links: Links::new(),
            id: id << C_OWNER_SHIFT,
        })
    }

    /// With `m` held by the caller: a new thread ("the child's") locks
    /// `m`, which makes it wait, and after 50 ms (time to reach
    /// `wait_lock` and sleep in the list) the caller unlocks. The thread
    /// must get the lock within 10 s (`hang` says what a failure means;
    /// the test fails instead of hanging), and then the lock must be
    /// free, without list flags, its list empty and `wait_lock` free.
    fn unlock_to_a_waiting_thread(m: &'static RawMutexCompact, hang: &str) {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            m.lock();
            // SAFETY: we hold it.
            unsafe { m.unlock() };
            let _ = tx.send(());
        });
        std::thread::sleep(Duration::from_millis(50));
        // SAFETY: the caller holds it.
        unsafe { m.unlock() };
        rx.recv_timeout(Duration::from_secs(10)).expect(hang);
        assert_eq!(
            m.word() & !C_COUNTING,
            0,
            "the lock ends free and without list flags"
        );
        assert!(list_empty_and_wait_lock_free(m));
    }

    /// Whether the wait list is empty and `wait_lock` free to this
    /// generation (not still held by a parent thread's tag).
    fn list_empty_and_wait_lock_free(m: &RawMutexCompact) -> bool {
        let taken_over = m.wait_lock.lock_tagged(fork_tag());
        // SAFETY: we hold wait_lock.
        let empty = unsafe { m.list_head() }.is_null();
        // SAFETY: we hold it.
        unsafe { m.wait_lock.unlock() };
        empty && !taken_over
    }

    fn leak() -> &'static RawMutexCompact {
        Box::leak(Box::new(RawMutexCompact::new()))
    }

    #[test]
    fn the_generation_field_sits_above_counting() {
        assert_eq!(GEN_SHIFT, 27);
        assert_eq!(GEN_MASK & (C_COUNTING | OWNER_MASK | LIST_FLAGS), 0);
        assert_eq!(GEN_MASK | C_COUNTING | OWNER_MASK | LIST_FLAGS, !0);
        assert_ne!(fork_tag(), 0);
    }

    /// A parent thread was linking itself as the first waiter at the
    /// fork: inside `wait_lock`, its record in the list, `WAITERS` not
    /// yet set. A child thread that must sleep takes `wait_lock` over,
    /// forgets that waiter, and is woken by the child's unlock.
    #[test]
    fn a_wait_lock_held_by_a_parent_thread_is_taken_over() {
        let m = leak();
        m.lock();
        assert!(!m.wait_lock.lock_tagged(fork_tag().wrapping_sub(2)));
        let g = Box::leak(ghost(7));
        // SAFETY: we "hold" wait_lock, as that parent thread did; the
        // record is leaked, so it stays alive.
        assert!(unsafe { m.list_push(&*g) });
        unlock_to_a_waiting_thread(
            m,
            "a child thread waited forever on a parent thread's wait-list lock",
        );
    }

    /// A parent thread was the last waiter leaving at the fork: the list
    /// empty, `WAITERS` cleared, `wait_lock` still held. A child thread
    /// that must sleep takes it over just the same.
    #[test]
    fn a_last_waiter_left_in_the_parent_blocks_nobody() {
        let m = leak();
        assert!(!m.wait_lock.lock_tagged(fork_tag().wrapping_sub(2)));
        m.lock();
        unlock_to_a_waiting_thread(
            m,
            "a child thread waited forever on a parent thread's wait-list lock",
        );
    }

    /// Waiters were queued at the fork, the first one starving (`HANDOFF`)
    /// and woken: the owner word carries the parent's generation. A child
    /// thread takes the free lock despite `HANDOFF`, a second one that
    /// must sleep forgets the list, and the word ends clean.
    #[test]
    fn a_wait_list_of_the_parent_is_forgotten() {
        let m = leak();
        let g = Box::leak(ghost(9));
        m.lock_wait_list();
        // SAFETY: we hold wait_lock; the record is leaked.
        unsafe { m.list_push(&*g) };
        // SAFETY: we hold it.
        unsafe { m.wait_lock.unlock() };
        m.owner
            .store(C_WAITERS | C_WOKEN | C_HANDOFF | parent_gen_bits(), Relaxed);
        // The free, reserved lock: a child thread may take it (the waiter
        // it is reserved for stayed in the parent).
        assert!(m.try_lock());
        unlock_to_a_waiting_thread(m, "a child waiter was not woken");
    }

    /// The lock was handed to a waiter that stayed in the parent: a child
    /// thread takes it, and forgetting the list frees such a lock.
    #[test]
    fn a_lock_handed_to_a_parent_waiter_is_not_lost() {
        let m = leak();
        let ghost_owner = 12_345 << C_OWNER_SHIFT;
        let stale = ghost_owner | C_PICKUP | C_WAITERS | C_WOKEN | parent_gen_bits();
        m.owner.store(stale, Relaxed);
        assert!(m.try_lock(), "a lock handed to a vanished waiter is free");
        // SAFETY: we hold it.
        unsafe { m.unlock() };
        m.owner.store(stale | C_COUNTING, Relaxed);
        m.lock_wait_list();
        // SAFETY: we hold it.
        unsafe { m.wait_lock.unlock() };
        assert_eq!(m.word(), C_COUNTING, "freed, the spin test's mark kept");
    }

    /// In this generation nothing is forgotten: a held wait-list lock
    /// with this generation's tag is waited for, not taken over.
    #[test]
    fn a_wait_lock_of_this_generation_is_waited_for() {
        let m = leak();
        assert!(!m.wait_lock.lock_tagged(fork_tag()));
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(m.wait_lock.lock_tagged(fork_tag()));
        });
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        // SAFETY: we hold it.
        unsafe { m.wait_lock.unlock() };
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(false));
    }
}
