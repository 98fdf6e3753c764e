//! The queued spinlock across `fork()`: a child inherits the lock word,
//! but of the parent's threads only the one that forked. A thread of the
//! parent that held the pending bit, or had a place in the MCS queue (the
//! tail names its node), never comes in the child: every later locker
//! would wait behind it for ever, where glibc's test-and-set spinlock is
//! simply free.
//!
//! The word has no room for a fork generation, so the threads say where
//! they are instead: a thread entering a slow path records the lock's
//! address in its slot (`ThreadSlot::spin_slow`, by nesting level) and
//! removes it when it leaves. In the child, [`crate::after_fork_in_child`]
//! passes every other thread's slot to [`forget_parent_waiters`], which
//! clears the tail and the pending bit of each lock recorded there:
//! `(n, p, l) -> (0, 0, l)`. It runs before the child has a second thread,
//! and the forking thread itself is in no slow path, so every queued
//! thread and every pending holder of those locks is a thread of the
//! parent. The locked byte stays: a lock that a thread of the parent held
//! stays held, as with glibc; one that the forking thread held, or one
//! that was free, works.
//!
//! Not covered: a lock whose slow path a thread of the parent entered in
//! the very instant of the fork, if the kernel copied the page of its
//! record before the record and the page of the lock after it changed
//! the word (the copy is not one instant for threads that keep running);
//! a fork from a signal handler that interrupted the forking thread's own
//! slow path.

use super::{LockWord, RawQSpinLockWith};
use crate::thread::{self, ThreadSlot};
use core::sync::atomic::{fence, AtomicUsize, Ordering};

/// A thread's record of the slow path it is in: restored when dropped.
pub(super) struct SlowPath {
    record: Option<(&'static AtomicUsize, usize)>,
}

impl Drop for SlowPath {
    #[inline]
    fn drop(&mut self) {
        if let Some((rec, prev)) = self.record {
            // Release: our word RMWs of this slow path come before.
            rec.store(prev, Ordering::Release);
        }
    }
}

impl<const PENDING_LOOPS: u32, const PARAVIRT: bool, W: LockWord>
    RawQSpinLockWith<PENDING_LOOPS, PARAVIRT, W>
{
    /// Record that this thread enters a slow path of this lock (where it
    /// may set the pending bit or queue), until the result is dropped.
    /// A thread without a slot, or nested past the last level, records
    /// nothing.
    #[inline]
    pub(super) fn enter_slow_path(&self) -> SlowPath {
        let record = thread::current().and_then(|s| {
            let level = s.mcs_depth.load(crate::sync::Ordering::Relaxed) as usize;
            let rec = s.spin_slow.get(level)?;
            // Only this thread (and a signal handler on it, which restores
            // the record before returning) writes it: no RMW needed.
            let prev = rec.load(Ordering::Relaxed);
            rec.store(self.word_addr(), Ordering::Relaxed);
            // The record becomes visible before any change this thread
            // makes to the word (every such change is an RMW after this).
            fence(Ordering::Release);
            Some((rec, prev))
        });
        SlowPath { record }
    }

    /// What a thread records: the word's address, tagged with its width.
    #[inline(always)]
    fn word_addr(&self) -> usize {
        self.word.record()
    }
}

/// In a forked child: clear the tail and the pending bit of every queued
/// spinlock whose slow path the thread of `s` was in; `s` is the slot of a
/// thread that stayed in the parent. Called by
/// [`crate::after_fork_in_child`] while the child has one thread.
pub fn forget_parent_waiters(s: &ThreadSlot) {
    for rec in &s.spin_slow {
        let addr = rec.swap(0, Ordering::Relaxed);
        if addr != 0 {
            // SAFETY: the lock was in use by that thread when the process
            // forked (it records and clears around its slow path), so the
            // child's copy of its memory holds it; nothing else runs.
            // (n, p, l) -> (0, 0, l), Relaxed: the child has one thread.
            unsafe { super::word::forget_waiters(addr) };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{encode_tail, LOCKED_PV, PENDING};
    use super::*;
    use crate::sync::Ordering::Relaxed;
    use crate::RawQSpinLock;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_waiting_thread_records_the_lock_until_it_has_it() {
        let l: &'static RawQSpinLock = Box::leak(Box::new(RawQSpinLock::new()));
        l.raw_lock();
        let (tx, rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let me = thread::current().expect("a slot");
            tx.send(me).unwrap();
            l.raw_lock();
            // SAFETY: held.
            unsafe { l.raw_unlock() };
            done_tx.send(me.spin_slow[0].load(Relaxed)).unwrap();
        });
        let slot = rx.recv().unwrap();
        let mut seen = false;
        for _ in 0..1000 {
            if slot.spin_slow[0].load(Relaxed) == l.word_addr() {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(seen, "the waiter never recorded the lock");
        // SAFETY: held.
        unsafe { l.raw_unlock() };
        let after = done_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(after, 0, "the record outlived the slow path");
    }

    #[test]
    fn the_child_forgets_a_pending_holder_and_a_queue_of_the_parent() {
        child_forgets::<crate::sync::AtomicU32>();
        child_forgets::<super::super::DefaultWord>();
    }

    fn child_forgets<W: LockWord>() {
        // The state a fork left: the forking thread holds the lock (a
        // slow-path owner), a thread of the parent holds the pending bit
        // and the tail names a queued node of the parent (here an unused
        // node of this thread's slot: only its address matters).
        let l: &'static RawQSpinLockWith<512, true, W> =
            Box::leak(Box::new(RawQSpinLockWith::new()));
        let me = thread::current().expect("a slot");
        let tail = encode_tail(me.index, 3);
        l.word.store(tail | PENDING | LOCKED_PV, Relaxed);
        let ghost: &'static ThreadSlot = Box::leak(Box::new(ThreadSlot::new(1)));
        ghost.spin_slow[1].store(l.word_addr(), Relaxed);
        forget_parent_waiters(ghost);
        assert_eq!(
            l.word(),
            LOCKED_PV,
            "tail and pending cleared, the owner kept"
        );
        assert_eq!(ghost.spin_slow[1].load(Relaxed), 0);
        // SAFETY: "we" hold it.
        unsafe { l.raw_unlock() };
        // Threads of the child lock it, and queue on it, freely.
        let (tx, rx) = mpsc::channel();
        for _ in 0..3 {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    l.raw_lock();
                    // SAFETY: held.
                    unsafe { l.raw_unlock() };
                }
                tx.send(()).unwrap();
            });
        }
        for _ in 0..3 {
            rx.recv_timeout(Duration::from_secs(10))
                .expect("a locker of the child waits behind the parent's threads");
        }
        assert_eq!(l.word(), 0);
    }
}
