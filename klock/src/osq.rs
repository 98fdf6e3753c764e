//! Optimistic spin queue (OSQ): an MCS queue of *spinners*.
//!
//! A lock that spins on its owner (the [`mutex`](crate::mutex), later the
//! rw-semaphore) lets only one thread spin on the lock word: the OSQ head.
//! Everyone else spins on its own queue node, so the owner's cache line is
//! not shared by a crowd (the worry in the 2009 adaptive-spinning thread).
//! Unlike a plain MCS lock, a queued spinner can **give up** (its time
//! budget ran out, it should yield, its caller's deadline passed) and leave
//! the queue from the middle: the three-step *unqueue* below.
//!
//! # The tail word
//!
//! ```text
//!  31                                                  0
//! +-----------------------------------------------------+
//! |   thread index of the last queued spinner (1..=16383) |
//! |   0 = queue empty                                    |
//! +-----------------------------------------------------+
//! ```
//!
//! Each thread has one OSQ node, [`ThreadSlot::osq`], which is never freed
//! (it is recycled with the thread index), so an index read from `tail`
//! always names valid memory. A thread spins on at most one OSQ at a time.
//!
//! # Transitions
//!
//! `me`, `p`, `n`: thread indexes; `node.next` / `node.prev` /
//! `node.locked` are fields of a queue node.
//!
//! ```text
//! lock          tail: t -> me            swap; t == 0: we are the head
//!               p.next: null -> me       link behind the old tail p
//!               me.locked: 0 -> 1        set by p when it unlocks (we are head)
//! unlock        tail: me -> 0            CAS; nobody behind us
//!               else me.next -> n, n.locked: 0 -> 1   hand the head over
//! unqueue (a queued spinner gives up; p its current predecessor)
//!   A unlink    p.next: me -> null       CAS; fails while p is handing over
//!                                        (then me.locked becomes 1: we are
//!                                        head after all) or p itself is
//!                                        unqueueing (then me.prev changes)
//!   B next      tail: me -> p            CAS; we were last, done
//!               or me.next: n -> null    take the successor that linked in
//!   C relink    n.prev := p; p.next := n
//! ```
//!
//! `prev` pointers are only hints kept up to date by unqueueing
//! predecessors (step C); the CAS in step A decides.

use crate::spin::cpu_relax;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{AcqRel, Acquire, Relaxed, Release};
use crate::thread::{self, QNode, ThreadSlot};
use core::ptr;

/// An optimistic spin queue: a 4-byte tail word.
#[derive(Debug)]
pub struct Osq {
    tail: AtomicU32,
}

/// Byte offset of the OSQ node inside a [`ThreadSlot`] (the same for every
/// slot). Computed from addresses rather than `offset_of!` so it does not
/// depend on `CachePadded`'s internal layout.
#[inline(always)]
fn node_offset(slot: &ThreadSlot) -> usize {
    (&*slot.osq as *const QNode as usize) - (slot as *const ThreadSlot as usize)
}

/// The OSQ node of `slot`, as a pointer derived from the whole slot (so
/// [`slot_of`] may step back to the slot from it).
#[inline(always)]
fn node_of(slot: &'static ThreadSlot, off: usize) -> *mut QNode {
    (slot as *const ThreadSlot)
        .cast::<u8>()
        .wrapping_add(off)
        .cast::<QNode>()
        .cast_mut()
}

/// The slot an OSQ node pointer (made by [`node_of`]) belongs to.
#[inline(always)]
fn slot_of(node: *const QNode, off: usize) -> &'static ThreadSlot {
    // SAFETY: every node pointer the OSQ handles was made by `node_of` from
    // a `&'static ThreadSlot`; slots are never freed.
    unsafe { &*node.cast::<u8>().wrapping_sub(off).cast::<ThreadSlot>() }
}

/// # Safety (of every `deref` below)
/// Node pointers point into never-freed thread slots.
#[inline(always)]
fn deref<'a>(node: *const QNode) -> &'a QNode {
    // SAFETY: see above.
    unsafe { &*node }
}

impl Osq {
    /// An empty queue.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            tail: AtomicU32::new(0),
        }
    }

    /// An empty queue (loom atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            tail: AtomicU32::new(0),
        }
    }

    /// Whether any thread holds or waits in the queue (a snapshot).
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.tail.load(Relaxed) != 0
    }

    /// Join the queue and spin until we are its head (`true`), or until
    /// `should_stop()` returns true while we wait (`false`: we left the
    /// queue; nothing to undo). `should_stop` is called once per spin
    /// iteration, so it should be cheap (check a clock only every few calls).
    ///
    /// Returns `false` at once if the calling thread has no
    /// [`thread slot`](crate::thread::current): callers then skip spinning.
    ///
    /// A `true` must be paired with [`unlock`](Self::unlock) on the same
    /// thread. A thread may hold or wait in only one OSQ at a time.
    #[inline]
    pub fn lock(&self, should_stop: impl FnMut() -> bool) -> bool {
        match thread::current() {
            Some(slot) => self.lock_with(slot, should_stop),
            None => false,
        }
    }

    /// Leave the head of the queue, handing it to the next spinner.
    ///
    /// Must follow a successful [`lock`](Self::lock) on the same thread.
    #[inline]
    pub fn unlock(&self) {
        let slot = thread::current().expect("klock: Osq::unlock without a thread slot");
        self.unlock_with(slot);
    }

    /// [`lock`](Self::lock) with the caller's own slot.
    pub(crate) fn lock_with(
        &self,
        slot: &'static ThreadSlot,
        mut should_stop: impl FnMut() -> bool,
    ) -> bool {
        let off = node_offset(slot);
        let node_ptr = node_of(slot, off);
        let node = deref(node_ptr);
        let me = slot.index;
        // Relaxed: published by the tail swap / link store below.
        node.locked.store(0, Relaxed);
        node.next.store(ptr::null_mut(), Relaxed);

        // tail: t -> me. Release publishes our node's initialisation to the
        // successor that reads `me` from the tail (pairs with its Acquire
        // here or in unqueue). Acquire pairs with the predecessor's Release
        // (its swap, or an unqueuer's tail CAS back to it): its node's
        // initialisation happens-before our link store into it.
        let old = self.tail.swap(me, AcqRel);
        if old == 0 {
            return true;
        }

        let mut prev = node_of(thread::slot(old), off);
        // Relaxed: published to an unqueueing predecessor by the Release
        // link store below (it rewrites `prev` only after reading that link).
        node.prev.store(prev, Relaxed);
        // Release pairs with the predecessor's Acquire read of its `next`
        // (unlock, or unqueue step B): our `locked = 0` and `prev` are then
        // visible before it hands over or relinks us.
        deref(prev).next.store(node_ptr, Release);

        loop {
            // Acquire pairs with the Release store of `locked = 1` by the
            // predecessor's unlock: the head hand-over.
            if node.locked.load(Acquire) != 0 {
                return true;
            }
            if should_stop() {
                break;
            }
            cpu_relax();
        }

        // --- Unqueue. ---
        // Step A: unlink from `prev`. The CAS fails while `prev` is handing
        // the head to us (it took its `next`, and our `locked` is about to
        // become 1) or while `prev` is itself unqueueing (it took its
        // `next` and will relink us to its own predecessor, rewriting our
        // `prev`). Relaxed: the CAS only decides who owns the link; the
        // successful CAS's ordering for later arrivals is provided by the
        // Release tail CAS in step B.
        loop {
            if deref(prev)
                .next
                .compare_exchange(node_ptr, ptr::null_mut(), Relaxed, Relaxed)
                .is_ok()
            {
                break;
            }
            // Acquire: as above, the hand-over.
            if node.locked.load(Acquire) != 0 {
                return true;
            }
            cpu_relax();
            // Relaxed: a hint (see the module docs); the CAS decides.
            prev = node.prev.load(Relaxed);
        }

        // Step B: `prev` no longer links to us and cannot hand us the head.
        // `prev` is now stable: only `prev` itself could rewrite our `prev`,
        // and only after taking us from its `next`, which we just cleared.
        let prev_index = slot_of(prev, off).index;
        let Some(next) = self.wait_next(node, me, prev_index) else {
            return false;
        };

        // Step C: relink `next` behind `prev`. Relaxed: `next` re-reads its
        // `prev` until its step-A CAS succeeds against the link we store
        // next, which is the store that matters.
        deref(next).prev.store(prev, Relaxed);
        // Release pairs with `prev`'s Acquire read of its `next`: `next`'s
        // node initialisation (visible to us through our Acquire in
        // wait_next) is passed on to whoever takes this link.
        deref(prev).next.store(next, Release);
        false
    }

    /// [`unlock`](Self::unlock) with the caller's own slot.
    pub(crate) fn unlock_with(&self, slot: &'static ThreadSlot) {
        let me = slot.index;
        // Nobody behind us: tail me -> 0; our node is quiescent afterwards
        // (no successor ever read `me`). Release pairs with the Acquire
        // tail swap of the next thread to find the queue empty, so that
        // consecutive heads are ordered like lock holders (the OSQ is a
        // lock in its own right, not only a spinning hint).
        if self.tail.compare_exchange(me, 0, Release, Relaxed).is_ok() {
            return;
        }
        let off = node_offset(slot);
        let node = deref(node_of(slot, off));
        // A successor swapped the tail: wait for its link (or, if it gave
        // up and we are the tail again, empty the queue).
        if let Some(next) = self.wait_next(node, me, 0) {
            // Release pairs with the successor's Acquire load of its
            // `locked`: our unlock (and its node links) happen-before its
            // time as head.
            deref(next).locked.store(1, Release);
        }
    }

    /// Wait until either we are the tail again — then set the tail to
    /// `new_tail` (our predecessor when unqueueing, 0 when unlocking) and
    /// return `None` — or our successor has linked itself into our `next`:
    /// take that link and return it.
    #[inline]
    fn wait_next(&self, node: &QNode, me: u32, new_tail: u32) -> Option<*mut QNode> {
        loop {
            // Release: a thread that swaps the tail and reads `new_tail`
            // will link into that node's `next`; our earlier step-A CAS on
            // that `next` (clearing our link) must come before its store in
            // the link's modification order, or our null could overwrite
            // its link. Pairs with that thread's Acquire swap.
            if self.tail.load(Relaxed) == me
                && self
                    .tail
                    .compare_exchange(me, new_tail, Release, Relaxed)
                    .is_ok()
            {
                return None;
            }
            let next = node.next.load(Relaxed);
            // Take exactly the link we saw: `next -> null`. A CAS, not a
            // blind swap: the load may be stale (a link its owner already
            // withdrew), and a swap would then write a null that races
            // with the successor's new link. Acquire pairs with the
            // successor's Release link store (or an unqueueing successor's
            // step-C relink): its node's initialisation happens-before we
            // touch it. The CAS races with the successor's own step-A CAS
            // on this link; exactly one of them takes it.
            if !next.is_null()
                && node
                    .next
                    .compare_exchange(next, ptr::null_mut(), Acquire, Relaxed)
                    .is_ok()
            {
                return Some(next);
            }
            cpu_relax();
        }
    }
}

impl Default for Osq {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    fn uncontended_lock_unlock() {
        let q = Osq::new();
        assert!(!q.is_locked());
        assert!(q.lock(|| panic!("no need to spin")));
        assert!(q.is_locked());
        q.unlock();
        assert!(!q.is_locked());
    }

    #[test]
    fn node_pointer_round_trips() {
        let s = thread::current().unwrap();
        let off = node_offset(s);
        let n = node_of(s, off);
        assert_eq!(n as *const QNode, &*s.osq as *const QNode);
        assert!(core::ptr::eq(slot_of(n, off), s));
    }

    #[test]
    fn gives_up_behind_a_holder() {
        let q = Osq::new();
        assert!(q.lock(|| false));
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut n = 0;
                assert!(!q.lock(|| {
                    n += 1;
                    n > 100
                }));
            });
        });
        // The quitter put the tail back to us.
        q.unlock();
        assert!(!q.is_locked());
    }

    /// Mutual exclusion among OSQ heads, with spinners constantly giving
    /// up: the queue must stay consistent (nobody stuck, tail back to 0).
    #[test]
    fn exclusive_with_random_unqueues() {
        let q = Osq::new();
        let inside = AtomicBool::new(false);
        let heads = AtomicU64::new(0);
        let quits = AtomicU64::new(0);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for t in 0..6u64 {
                let (q, inside, heads, quits) = (&q, &inside, &heads, &quits);
                s.spawn(move || {
                    let mut rng = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for _ in 0..3000 {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let patience = rng % 64;
                        let mut n = 0;
                        if q.lock(|| {
                            n += 1;
                            n > patience
                        }) {
                            assert!(!inside.swap(true, Ordering::Relaxed));
                            for _ in 0..(rng % 8) {
                                core::hint::spin_loop();
                            }
                            inside.store(false, Ordering::Relaxed);
                            heads.fetch_add(1, Ordering::Relaxed);
                            q.unlock();
                        } else {
                            quits.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert!(!q.is_locked());
        assert_eq!(
            heads.load(Ordering::Relaxed) + quits.load(Ordering::Relaxed),
            18_000
        );
        assert!(t0.elapsed() < Duration::from_secs(30));
    }
}
