//! The intrusive FIFO wait list of klock's sleeping locks ([`crate::mutex`],
//! [`crate::rwsem`]): doubly linked waiter records that live on the
//! waiters' own stacks, so queueing allocates nothing.
//!
//! Every access happens under the owning lock's `wait_lock`; a waiter is
//! linked only while its stack frame is alive (it unlinks itself under
//! `wait_lock` before returning, and [`AbortOnUnwind`] turns an unwind in
//! between into an abort).

use core::cell::Cell;
use core::ptr;

/// The links a waiter record embeds.
pub(crate) struct Links<N> {
    next: Cell<*const N>,
    prev: Cell<*const N>,
}

impl<N> Links<N> {
    /// Unlinked.
    pub(crate) const fn new() -> Self {
        Self {
            next: Cell::new(ptr::null()),
            prev: Cell::new(ptr::null()),
        }
    }

    /// The waiter behind this one, or null. Caller holds `wait_lock`.
    #[inline]
    pub(crate) fn next(&self) -> *const N {
        self.next.get()
    }
}

/// A waiter record that can be queued: it hands out its [`Links`].
pub(crate) trait Linked: Sized {
    fn links(&self) -> &Links<Self>;
}

/// Head and tail of the list (null when empty).
pub(crate) struct WaitList<N> {
    head: *const N,
    tail: *const N,
}

impl<N: Linked> WaitList<N> {
    /// An empty list.
    pub(crate) const fn new() -> Self {
        Self {
            head: ptr::null(),
            tail: ptr::null(),
        }
    }

    /// First waiter, or null.
    #[inline]
    pub(crate) fn head(&self) -> *const N {
        self.head
    }

    /// Append `w`; returns whether the list was empty.
    ///
    /// # Safety
    /// `w` is alive, not linked, and stays alive while linked; every linked
    /// waiter is alive.
    pub(crate) unsafe fn push(&mut self, w: *const N) -> bool {
        // SAFETY: caller's contract.
        let links = unsafe { (*w).links() };
        links.next.set(ptr::null());
        links.prev.set(self.tail);
        let was_empty = self.tail.is_null();
        if was_empty {
            self.head = w;
        } else {
            // SAFETY: linked waiters are alive.
            unsafe { (*self.tail).links().next.set(w) };
        }
        self.tail = w;
        was_empty
    }

    /// Unlink `w`; returns whether the list is now empty.
    ///
    /// # Safety
    /// `w` is linked in this list; every linked waiter is alive.
    pub(crate) unsafe fn remove(&mut self, w: *const N) -> bool {
        // SAFETY: caller's contract.
        let links = unsafe { (*w).links() };
        let (prev, next) = (links.prev.get(), links.next.get());
        if prev.is_null() {
            self.head = next;
        } else {
            // SAFETY: linked waiters are alive.
            unsafe { (*prev).links().next.set(next) };
        }
        if next.is_null() {
            self.tail = prev;
        } else {
            // SAFETY: linked waiters are alive.
            unsafe { (*next).links().prev.set(prev) };
        }
        self.head.is_null()
    }
}

/// Aborts the process if a waiter unwinds while linked into a wait list
/// (its stack frame would dangle). `mem::forget` it once unlinked.
pub(crate) struct AbortOnUnwind(pub(crate) &'static str);

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        // Under loom a failing model unwinds every model thread; the whole
        // execution is discarded, so there is nothing to protect.
        #[cfg(not(loom))]
        {
            eprintln!(
                "klock: panic while queued on a {} wait list; aborting",
                self.0
            );
            std::process::abort();
        }
        #[cfg(loom)]
        let _ = self.0;
    }
}
