//! The intrusive FIFO wait list of klock's sleeping locks ([`crate::mutex`],
//! [`crate::rwsem`]): doubly linked waiter records that live on the
//! waiters' own stacks, so queueing allocates nothing.
//!
//! Every access happens under the owning lock's `wait_lock`; a waiter is
//! linked only while its stack frame is alive (it unlinks itself under
//! `wait_lock` before returning, and [`AbortOnUnwind`] turns an unwind in
//! between into an abort).

use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed};
use crate::sys::{self, monotonic_ns};
use core::cell::Cell;
use core::ptr;
use std::time::Duration;

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

// A waiter record's state, its futex word. A lock may add states of its
// own above these.
/// Queued and running: a waker only has to mark it.
pub(crate) const W_WAITING: u32 = 0;
/// Asleep on its futex word, or about to be: a waker must wake it.
pub(crate) const W_PARKED: u32 = 1;
/// Marked woken by an unlocker.
pub(crate) const W_WOKEN: u32 = 2;

/// Sleep until the waiter's `state` leaves [`W_PARKED`] or `deadline`
/// passes. Returns whether it went to sleep at all (false: a waker had
/// already changed `state` from [`W_WAITING`]).
///
/// The waiter sleeps on `state` itself, or on `gate`, a word its waker
/// bumps after marking it (several waiters on one gate are woken by one
/// `FUTEX_WAKE`). Spurious returns of the futex wait are fine: the state
/// is read again.
///
/// Under loom an untimed waiter of a lock whose wakers unpark it through a
/// cloned thread handle (`loom_park`) blocks in `loom::thread::park`
/// instead of a modelled futex wait (a yield): two yielding waiters could
/// otherwise be scheduled against each other forever while the waker stays
/// preempted, which loom reports as a failure although no real schedule
/// does that.
pub(crate) fn park(
    state: &AtomicU32,
    gate: Option<&AtomicU32>,
    deadline: Option<u64>,
    loom_park: bool,
) -> bool {
    // W_WAITING -> W_PARKED; fails if a waker already changed it.
    // Relaxed: what the waiter needs from its waker it reads under the
    // lock's wait_lock, or through the Acquire load below.
    if state
        .compare_exchange(W_WAITING, W_PARKED, Relaxed, Relaxed)
        .is_err()
    {
        return false;
    }
    loop {
        // The gate before the state: if the state below still says
        // parked, the waker's bump comes later and changes the gate from
        // the value read here (Acquire pairs with the bump's Release:
        // having seen a bump, we see the marks made before it).
        let gate_now = gate.map(|g| (g, g.load(Acquire)));
        // Acquire pairs with the waker's Release store or swap of the
        // state.
        if state.load(Acquire) != W_PARKED {
            return true;
        }
        let timeout = match deadline {
            None => None,
            Some(d) => {
                let now = monotonic_ns();
                if now >= d {
                    return true;
                }
                Some(Duration::from_nanos(d - now))
            }
        };
        #[cfg(loom)]
        if loom_park && timeout.is_none() {
            loom::thread::park();
            continue;
        }
        #[cfg(not(loom))]
        let _ = loom_park;
        match gate_now {
            Some((word, seen)) => sys::futex_wait(word, seen, timeout),
            None => sys::futex_wait(state, W_PARKED, timeout),
        };
    }
}

/// The address of a waiter's futex word, for a wake-up sent after
/// `wait_lock` is released (when the waiter may be gone).
#[inline]
pub(crate) fn futex_addr(state: &AtomicU32) -> usize {
    (state as *const AtomicU32) as usize
}

#[cfg(not(loom))]
std::thread_local! {
    /// Futex words marked woken under a `wait_lock`, whose `FUTEX_WAKE`
    /// this thread sends once it has released that lock ([`wake_pending`]).
    static PENDING_WAKES: Cell<Vec<(usize, u32)>> = const { Cell::new(Vec::new()) };
}

/// Queue a `FUTEX_WAKE` of the futex word at `addr` for [`wake_pending`]:
/// the kernel's `wake_q`. A waker marks the waiter's state under `wait_lock`
/// (the waiter cannot unlink and vanish meanwhile) but sends the wake-up
/// only after releasing `wait_lock`: the woken waiter, often run at once on
/// the waker's CPU, must not find `wait_lock` still held and yield straight
/// back (measured in `klock::mutex`, see its module docs). The wake goes by
/// address, so it is harmless if the waiter has returned meanwhile (see
/// [`crate::sys::futex_wake_addr`]).
///
/// Under loom nothing is queued: modelled futex waits are yields, and the
/// wakers that block waiters in `loom::thread::park` unpark them directly.
#[inline]
pub(crate) fn wake_later(addr: usize) {
    wake_later_n(addr, 1);
}

/// [`wake_later`] for up to `n` threads waiting on one futex word (a
/// group of readers granted together, [`crate::rwsem`]).
#[inline]
pub(crate) fn wake_later_n(addr: usize, n: u32) {
    #[cfg(not(loom))]
    {
        let queued = PENDING_WAKES
            .try_with(|q| {
                let mut v = q.take();
                v.push((addr, n));
                q.set(v);
            })
            .is_ok();
        if !queued {
            // Thread-local storage is gone (thread exit): wake now.
            crate::sys::futex_wake_addr(addr, n);
        }
    }
    #[cfg(loom)]
    let _ = (addr, n);
}

/// Send the wake-ups queued by [`wake_later`]. Call right after releasing
/// `wait_lock`.
#[inline]
pub(crate) fn wake_pending() {
    #[cfg(not(loom))]
    let _ = PENDING_WAKES.try_with(|q| {
        let mut v = q.take();
        for (a, n) in v.drain(..) {
            crate::sys::futex_wake_addr(a, n);
        }
        q.set(v);
    });
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
