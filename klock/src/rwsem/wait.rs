//! The wait list: the per-lock wait bounds, parking, waking the front
//! waiter, leaving the list, and the list operations under `wait_lock`
//! (see the [module docs](super)).

#[cfg(loom)]
use super::Probe;
use super::{
    reader_grant_ns, reader_wait_ns, wait_timeout_ns, RawRwSemWith, Role, Waiter, FRONT_READER,
    HANDOFF, READER_MASK, WAITERS, WRITER_LOCKED, WRITER_WOKEN, W_PARKED, W_WOKEN,
};
use crate::events::{self, Event};
use crate::sync::Ordering::{Relaxed, Release};
use crate::waitlist::{futex_addr, park, wake_later, wake_pending};
use crate::waitlock::WaitLockRaw;

impl<const RSPIN: u8, const ADAPTIVE: u8, W: WaitLockRaw> RawRwSemWith<RSPIN, ADAPTIVE, W> {
    // ------------------------------------------------------------------
    // Wait list.
    // ------------------------------------------------------------------

    /// The wait timeout for this lock.
    #[inline]
    pub(super) fn wait_timeout(&self) -> u64 {
        #[cfg(loom)]
        return crate::sync::loom_tunable(&self.loom_wait_timeout_ns, wait_timeout_ns);
        #[cfg(not(loom))]
        wait_timeout_ns()
    }

    /// The reader grant bound for this lock.
    #[inline]
    pub(super) fn reader_grant(&self) -> u64 {
        #[cfg(loom)]
        return crate::sync::loom_tunable(&self.loom_reader_grant_ns, reader_grant_ns);
        #[cfg(not(loom))]
        reader_grant_ns()
    }

    /// The reader wait bound for this lock.
    #[inline]
    pub(super) fn reader_wait(&self) -> u64 {
        #[cfg(loom)]
        return crate::sync::loom_tunable(&self.loom_reader_wait_ns, reader_wait_ns);
        #[cfg(not(loom))]
        reader_wait_ns()
    }

    /// [`park`] `waiter`, counting a real sleep as `sleep_event` (and, under
    /// loom, tracking the threads between leaving wait_lock and parking).
    #[inline]
    pub(super) fn park_counted(&self, waiter: &Waiter, deadline: Option<u64>, sleep_event: Event) {
        #[cfg(loom)]
        Probe::hit(&self.probe.parking);
        let gate = (waiter.role == Role::Reader).then_some(&self.rgate);
        let slept = park(&waiter.state, gate, deadline, true);
        #[cfg(loom)]
        self.probe
            .parking
            .fetch_sub(1, core::sync::atomic::Ordering::Relaxed);
        if slept {
            events::inc(sleep_event);
            #[cfg(loom)]
            Probe::hit(&self.probe.sleeps);
        }
    }

    /// An unlock found `WAITERS` with the lock free of holders.
    #[cold]
    #[inline(never)]
    pub(super) fn unlock_wake(&self) {
        self.wl_lock();
        // SAFETY: we hold wait_lock.
        unsafe { self.wake_front(true) };
        // SAFETY: we hold wait_lock.
        unsafe { self.wl_unlock() };
    }

    /// Let the front of the queue go, if it can:
    /// * a writer at the front is woken (if `wake_writer`) when no one
    ///   holds the lock; it takes the lock itself;
    /// * readers at the front: all queued readers (skipping writers, at
    ///   most [`MAX_READERS_WAKEUP`]) are granted the lock in one CAS —
    ///   unless a writer holds it, in which case a front reader that has
    ///   waited too long requests a hand-off.
    ///
    /// # Safety
    /// The caller holds wait_lock.
    pub(super) unsafe fn wake_front(&self, wake_writer: bool) {
        // SAFETY: caller holds wait_lock; linked waiters are alive.
        let head = unsafe { self.list_head() };
        if head.is_null() {
            return;
        }
        let h = unsafe { &*head };
        if h.role == Role::Writer {
            if wake_writer && self.count.load(Relaxed) & (WRITER_LOCKED | READER_MASK) == 0 {
                self.wake(h);
            }
            return;
        }
        // SAFETY: caller holds wait_lock; head is linked.
        unsafe { self.grant_readers(head, false) };
    }

    /// Wake writer `w` (under wait_lock: it cannot unlink and vanish).
    fn wake(&self, w: &Waiter) {
        // Unlocks stop waking it until it clears the bit (write_sleep).
        // Relaxed: set and cleared under wait_lock; unlockers read it in
        // their own RMW.
        if self.count.load(Relaxed) & WRITER_WOKEN == 0 {
            self.count.fetch_or(WRITER_WOKEN, Relaxed);
        }
        // Release pairs with the waiter's Acquire load in park.
        if w.state.swap(W_WOKEN, Release) == W_PARKED {
            events::inc(Event::RwsemWakeWriter);
            #[cfg(loom)]
            Probe::hit(&self.probe.wakes_of_sleepers);
            wake_later(futex_addr(&w.state));
        }
        #[cfg(loom)]
        w.thread.unpark();
    }

    /// A waiter gives up: unlink it, drop the flags it owned, let the new
    /// front go.
    ///
    /// # Safety
    /// The caller holds wait_lock and `w` is linked.
    pub(super) unsafe fn leave(&self, w: *const Waiter) {
        let was_first = unsafe { self.list_head() } == w;
        if unsafe { self.list_remove(w) } {
            // Relaxed: these flags only change under wait_lock.
            self.count
                .fetch_and(!(WAITERS | HANDOFF | WRITER_WOKEN | FRONT_READER), Relaxed);
        } else if was_first {
            // A HANDOFF or WRITER_WOKEN belonged to the leaving first waiter.
            self.count.fetch_and(!(HANDOFF | WRITER_WOKEN), Relaxed);
            #[cfg(loom)]
            Probe::hit(&self.probe.wake_next_on_leave);
            unsafe { self.wake_front(true) };
        }
    }

    /// Release wait_lock, then send the wake-ups queued by `wake_later`.
    ///
    /// # Safety
    /// The caller holds wait_lock.
    #[inline]
    pub(super) unsafe fn wl_unlock(&self) {
        // The front may have changed under wait_lock: bring FRONT_READER
        // up to date (set only while WAITERS is: the list is non-empty).
        // SAFETY: we hold wait_lock; linked waiters are alive.
        let head = unsafe { self.list_head() };
        let reader = !head.is_null()
            && unsafe { &*head }.role == Role::Reader
            && !self.is_broken(super::broken::NO_FRONT_READER);
        if (self.count.load(Relaxed) & FRONT_READER != 0) != reader {
            // Relaxed: it changes only under wait_lock; write unlocks read
            // it with their CAS, and a grant synchronises through
            // wait_lock.
            if reader {
                self.count.fetch_or(FRONT_READER, Relaxed);
            } else {
                self.count.fetch_and(!FRONT_READER, Relaxed);
            }
        }
        // SAFETY: forwarded contract.
        unsafe { self.wait_lock.unlock() };
        wake_pending();
    }

    /// First waiter, or null. Caller holds wait_lock.
    #[inline]
    pub(super) unsafe fn list_head(&self) -> *const Waiter {
        self.list.with(|l| unsafe { (*l).head() })
    }

    /// Append `w`; returns whether the list was empty. Caller holds
    /// wait_lock; `w` stays alive while linked.
    pub(super) unsafe fn list_push(&self, w: *const Waiter) -> bool {
        // SAFETY: caller's contract.
        self.list.with_mut(|l| unsafe { (*l).push(w) })
    }

    /// Unlink `w`; returns whether the list is now empty. Caller holds
    /// wait_lock; `w` is linked.
    pub(super) unsafe fn list_remove(&self, w: *const Waiter) -> bool {
        // SAFETY: caller's contract.
        self.list.with_mut(|l| unsafe { (*l).remove(w) })
    }
}
