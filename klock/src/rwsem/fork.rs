//! The rw-semaphore across `fork()`: a child inherits the lock's bytes,
//! but of the parent's threads only the one that forked. Waiters queued at
//! the fork, and a thread inside `wait_lock` at that moment, stayed
//! behind, and a lock that the forking thread held (or that was free)
//! must still work in the child. Two signs tell the child:
//!
//! * `wait_lock` held with another generation's tag
//!   ([`crate::thread::fork_tag`]): its holder exists only in the parent,
//!   and may have left the list or the count's flags half updated (a first
//!   waiter between linking itself and setting `WAITERS`, a waker between
//!   unlinking readers and granting them). The child's locker takes it
//!   over;
//! * a waiter at the front of the list that queued in another fork
//!   generation ([`Waiter`]'s `gen`): every waiter in that list is a
//!   thread of the parent (a child's thread links itself only after the
//!   check below ran under the same `wait_lock`).
//!
//! The first child thread that takes `wait_lock` and finds either sign
//! forgets the parent's waiters ([`forget_parent_waiters`]): it empties
//! the list and clears `WAITERS`, `HANDOFF` and `WRITER_WOKEN`. Without
//! this a write unlock in the child granted the lock to readers that
//! never run, and nobody could take it again. What the parent's threads
//! held stays held, as with glibc's rwlocks; readers that a thread of the
//! parent had already granted the lock to, and that had not yet run, hold
//! it too (a window glibc does not have: its readers count themselves in).
//!
//! [`forget_parent_waiters`]: RawRwSemWith::forget_parent_waiters

use super::{RawRwSemWith, Waiter, FRONT_READER, HANDOFF, WAITERS, WRITER_WOKEN};
use crate::sync::Ordering::Relaxed;
use crate::thread::{fork_generation, fork_tag};
use crate::waitlist::WaitList;
use crate::waitlock::WaitLockRaw;

impl<const RSPIN: u8, const ADAPTIVE: u8, W: WaitLockRaw> RawRwSemWith<RSPIN, ADAPTIVE, W> {
    /// Take `wait_lock`. In a forked child, the first thread to take it
    /// while it still shows the parent's waiters (taken over from a holder
    /// left in the parent, or a list queued in an older generation)
    /// forgets those waiters.
    #[inline]
    pub(super) fn wl_lock(&self) {
        let taken_over = self.wait_lock.lock_tagged(fork_tag());
        if taken_over || self.list_is_inherited() {
            self.forget_parent_waiters();
        }
    }

    /// Whether the front waiter queued in another fork generation. Caller
    /// holds `wait_lock`.
    #[inline]
    fn list_is_inherited(&self) -> bool {
        // SAFETY: we hold wait_lock; a linked record stays readable (a
        // parent's thread's stack is copied into the child, and a record
        // of this process is alive while linked).
        let head: *const Waiter = unsafe { self.list_head() };
        !head.is_null() && unsafe { (*head).gen } != fork_generation()
    }

    /// Empty the wait list and clear its flags in the count:
    /// `(r, w, F) -> (r, w, F - WAITERS - HANDOFF - WRITER_WOKEN - FRONT_READER)`. Caller
    /// holds `wait_lock` in a forked child, and every linked waiter is a
    /// thread of the parent.
    #[cold]
    #[inline(never)]
    fn forget_parent_waiters(&self) {
        // SAFETY: we hold wait_lock; the records are not read, only
        // dropped from the list (they lie on the parent's stacks).
        self.list.with_mut(|l| unsafe { *l = WaitList::new() });
        // Relaxed: an RMW continues the release sequence of the last
        // unlock, so the next Acquire RMW still pairs with that release;
        // the flags describe the list, which wait_lock protects.
        self.count
            .fetch_and(!(WAITERS | HANDOFF | WRITER_WOKEN | FRONT_READER), Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{Role, READER_BIAS, WRITER_LOCKED};
    use super::*;
    use crate::sync::AtomicU32;
    use crate::waitlist::{Links, W_WAITING};
    use crate::RawRwSem;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A waiter record as a parent thread left it on its stack: queued in
    /// the generation before this one. (Tests must not start a fork
    /// generation: the other tests' locks in this process would look
    /// forked.)
    fn ghost(role: Role) -> Box<Waiter> {
        Box::new(Waiter {
            state: AtomicU32::new(W_WAITING),
            links: Links::new(),
            id: 7 << super::super::OWNER_SHIFT,
            role,
            saw_rd: false,
            since: 0,
            gen: fork_generation().wrapping_sub(1),
        })
    }

    /// Link `records` as the parent left them: in the list, `WAITERS` set.
    fn inherit(l: &RawRwSem, records: &[&Waiter]) {
        l.wait_lock.lock_tagged(fork_tag());
        for w in records {
            // SAFETY: we hold wait_lock; the records outlive the test's
            // use of the lock (they are leaked or dropped after it).
            unsafe { l.list_push(*w) };
        }
        l.count.fetch_or(WAITERS, Relaxed);
        // SAFETY: we hold it (this also sets the front-reader hint).
        unsafe { l.wl_unlock() };
    }

    /// Whether `l`'s wait list is empty (takes wait_lock).
    fn list_empty(l: &RawRwSem) -> bool {
        l.wl_lock();
        // SAFETY: we hold wait_lock.
        let empty = unsafe { l.list_head() }.is_null();
        // SAFETY: we hold it.
        unsafe { l.wl_unlock() };
        empty
    }

    /// On a new thread, `f(l)` must finish within 10 s (`hang` says what a
    /// timeout means; the test fails instead of hanging) without failing.
    fn within_10s(l: &'static RawRwSem, hang: &str, f: fn(&RawRwSem)) {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            f(l);
            let _ = tx.send(());
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(()) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("{hang}"),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the thread failed (its message is above)")
            }
        }
    }

    fn write_then_read(l: &RawRwSem) {
        let g = l.raw_lock_exclusive();
        // SAFETY: held with `g`.
        unsafe { l.raw_unlock_exclusive(g) };
        let _ = l.raw_lock_shared();
        // SAFETY: held.
        unsafe { l.raw_unlock_shared() };
    }

    #[test]
    fn a_write_unlock_forgets_readers_queued_in_the_parent() {
        // The forking thread held the write lock; readers and a writer of
        // the parent queued behind it. Its unlock in the child must not
        // grant the lock to them.
        let l: &'static RawRwSem = Box::leak(Box::new(RawRwSem::new()));
        let g = l.raw_lock_exclusive();
        let (r1, r2, w) = (
            ghost(Role::Reader),
            ghost(Role::Reader),
            ghost(Role::Writer),
        );
        inherit(l, &[&r1, &r2, &w]);
        // SAFETY: held with `g`.
        unsafe { l.raw_unlock_exclusive(g) };
        assert_eq!(
            l.count_word() & (WAITERS | HANDOFF | WRITER_WOKEN | WRITER_LOCKED),
            0,
            "the parent's waiters are forgotten and the lock is free"
        );
        assert_eq!(
            l.count_word() & !(READER_BIAS - 1),
            0,
            "no reader was granted it"
        );
        within_10s(
            l,
            "the lock was granted to readers that never run",
            write_then_read,
        );
        assert!(list_empty(l));
    }

    #[test]
    fn a_reader_forgets_a_list_with_a_handoff_of_the_parent() {
        // A writer of the parent waited long enough to demand a hand-off;
        // the lock is free. A reader and a writer of the child must get it.
        let l: &'static RawRwSem = Box::leak(Box::new(RawRwSem::new()));
        let w = ghost(Role::Writer);
        inherit(l, &[&w]);
        l.count.fetch_or(HANDOFF, Relaxed);
        within_10s(l, "a hand-off to a writer that never runs", |l| {
            let _ = l.raw_lock_shared();
            // SAFETY: held.
            unsafe { l.raw_unlock_shared() };
            write_then_read(l);
        });
        assert_eq!(l.count_word(), 0);
    }

    #[test]
    fn wait_lock_held_by_a_thread_of_the_parent_is_taken_over_and_repaired() {
        // A thread of the parent was inside wait_lock (tagged with its
        // generation) with the count's list flags half updated: `WAITERS`
        // and `HANDOFF` set, nobody linked. The child's first locker of
        // wait_lock takes it over and clears them.
        let l: &'static RawRwSem = Box::leak(Box::new(RawRwSem::new()));
        assert!(!l.wait_lock.lock_tagged(fork_tag().wrapping_sub(2)));
        l.count.fetch_or(WAITERS | HANDOFF | WRITER_WOKEN, Relaxed);
        within_10s(
            l,
            "wait_lock held by a thread of the parent was never taken over",
            |l| {
                l.wl_lock();
                assert_eq!(
                    l.count_word() & (WAITERS | HANDOFF | WRITER_WOKEN),
                    0,
                    "the flags the parent's thread left are cleared"
                );
                // SAFETY: we hold it.
                unsafe { l.wl_unlock() };
            },
        );
        within_10s(l, "the lock stalled after the take-over", write_then_read);
        assert_eq!(l.count_word(), 0);
    }

    #[test]
    fn a_list_of_this_generation_is_kept() {
        // Waiters of this process are not forgotten: a writer queued behind
        // a held read lock still gets it.
        let l: &'static RawRwSem = Box::leak(Box::new(RawRwSem::new()));
        let _ = l.raw_lock_shared();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let g = l.raw_lock_exclusive();
            let _ = tx.send(());
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: held with `g`.
            unsafe { l.raw_unlock_exclusive(g) };
        });
        std::thread::sleep(Duration::from_millis(50));
        l.wl_lock();
        // SAFETY: we hold wait_lock.
        assert!(
            !unsafe { l.list_head() }.is_null(),
            "the writer sleeps in the list"
        );
        assert!(!l.list_is_inherited(), "a waiter of this generation");
        // SAFETY: we hold it.
        unsafe { l.wl_unlock() };
        // SAFETY: held.
        unsafe { l.raw_unlock_shared() };
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the writer got the lock");
    }
}
