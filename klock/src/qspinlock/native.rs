//! The native slow path: the queued spinlock for threads that are not
//! preempted while they wait (see the [module docs](super)): the pending
//! path, then the MCS queue, with trylock spinning for a thread without a
//! node.

use super::*;

impl<const PENDING_LOOPS: u32, const PARAVIRT: bool, W: LockWord>
    RawQSpinLockWith<PENDING_LOOPS, PARAVIRT, W>
{
    /// Steps 1–6 of docs/design.md, section 1: the pending path, or off to the queue.
    #[cold]
    #[inline(never)]
    pub(super) fn lock_slow<const MODE: u8>(&self, mut val: u32) {
        // Where a forked child looks for the parent's waiters (`fork.rs`).
        let _slow = self.enter_slow_path();
        // 1. (0,1,0): a pending waiter is taking the lock right now
        //    (between its wait and clear_pending_set_locked). Give it a
        //    bounded number of re-reads to finish, so we can use the
        //    pending bit instead of queueing. Relaxed: only a hint; the
        //    fetch_or below does the acquiring.
        if val == PENDING {
            let mut left = PENDING_LOOPS;
            while left > 0 {
                cpu_relax();
                val = self.word.load(Relaxed);
                if val != PENDING {
                    break;
                }
                left -= 1;
            }
        }

        // 2. (*,1,*) or (n,*,*): someone is ahead of us without being the
        //    owner. Queue.
        if val & !LOCKED_MASK != 0 {
            return self.queue::<MODE>();
        }

        // 3. (0,0,*) -> (0,1,*). One unconditional fetch_or, never a CAS
        //    loop: a CAS can fail forever while other lockers make the word
        //    flip between (0,0,0) and (0,0,1). Acquire: if the old locked
        //    byte was 0 this is our lock acquisition; it pairs with the
        //    Release of the last unlock.
        val = self.word.fetch_or(PENDING, Acquire);

        // 4. The word changed under us: pending or a queue was there first.
        if val & !LOCKED_MASK != 0 {
            // Undo the pending bit only if it was us who set it:
            // (n,1,*) -> (n,0,*). If the old pending bit was set, it belongs
            // to another thread and we changed nothing.
            if val & PENDING_MASK == 0 {
                #[cfg(loom)]
                if val & LOCKED_MASK == 0 {
                    // We hit (n,0,0): the queue head may be at its final CAS.
                    Probe::hit(&self.probe.pender_hit_unlocked_queue);
                }
                // Relaxed: nothing is published; the queue head merely waits
                // for the bit to go.
                self.word.fetch_and(!PENDING, Relaxed);
            }
            if MODE == UNDO_PENDING_RETRY {
                // BROKEN (loom only): "undo and retry the trylock". If our
                // pending made the head's (n,0,0) -> (0,0,1) CAS fail, the
                // head now holds (n,*,1) and waits for a successor that
                // never comes, and we wait for a free lock that never comes.
                return self.spin_on_trylock();
            }
            // Never undo-and-retry: queueing is what provides the successor
            // a head that lost its final CAS to our pending bit waits for.
            return self.queue::<MODE>();
        }

        // 5. We own pending: (0,1,*). Wait for the owner to go,
        //    (*,1,1) -> (*,1,0). A tail may appear meanwhile; the queue head
        //    waits for our pending bit to clear. Acquire pairs with the
        //    Release of the owner's unlock.
        if val & LOCKED_MASK != 0 {
            let mut spin = Spin::new();
            let mut v = self.word.load(Acquire);
            while v & LOCKED_MASK != 0 {
                v = spin.reread(&self.word, Acquire);
            }
        }

        // 6. clear_pending_set_locked: (*,1,0) -> (*,0,1), one 32-bit RMW so
        //    a concurrent xchg_tail is not lost. Relaxed: we acquired in
        //    step 3 or 5; nobody else can take the lock while pending is
        //    ours (lockers see pending/tail and queue, the head waits).
        self.word.fetch_add(PENDING_TO_LOCKED, Relaxed);
        events::inc(Event::LockPending);
        #[cfg(loom)]
        Probe::hit(&self.probe.pending_taken);
    }

    /// Steps 7–10: queue on an MCS node and wait for our turn.
    #[inline(never)]
    fn queue<const MODE: u8>(&self) {
        events::inc(Event::LockSlowpath);

        // 7. Take the next MCS node of this thread, or, without one, spin
        //    on trylock instead.
        let Some((slot, level, node, tail)) = Self::claim_node() else {
            return self.lock_no_node();
        };

        // One more try: touching the node took time (its line may have been
        // cold), and the lock may be free by now.
        if self.raw_try_lock() {
            return Self::put_node(slot, level);
        }

        // Publish our node as the new tail: (m,*,*) -> (n,*,*).
        let old = self.xchg_tail(tail);

        // 8. There was a queue: link behind the previous tail and wait for
        //    the MCS baton.
        if old & TAIL_MASK != 0 {
            #[cfg(loom)]
            Probe::hit(&self.probe.queued_behind);
            let prev = tail_node(old);
            // Release pairs with the predecessor's Acquire load of its
            // `next` in step 10: it publishes our `locked = 0` before the
            // predecessor may store 1 into it.
            prev.next.store(node as *const QNode as *mut QNode, Release);
            // Acquire pairs with the predecessor's Release store of the
            // baton: it makes the predecessor's set_locked (and everything
            // before it) visible, so the lock-word reads below cannot see a
            // stale (*,0,0) from before the predecessor took the lock.
            let observe = if MODE == RELAXED_HANDOFF {
                Relaxed // BROKEN (loom only)
            } else {
                Acquire
            };
            let mut spin = Spin::new();
            let mut baton = node.locked.load(observe);
            while baton == 0 {
                baton = spin.reread(&node.locked, observe);
            }
        }

        // 9. We are the queue head: wait for the owner and the pending
        //    waiter to go, (n,*,*) -> (n,0,0). Acquire pairs with the
        //    Release of the last unlock: this is our lock acquisition.
        let mut spin = Spin::new();
        let mut val = self.word.load(Acquire);
        while val & LOCKED_PENDING_MASK != 0 {
            val = spin.reread(&self.word, Acquire);
        }

        // 10. If we are also the tail, nobody is behind us: take the lock
        //     and empty the queue at once, (n,0,0) -> (0,0,1). Relaxed: we
        //     acquired in step 9. The CAS fails if a successor swapped the
        //     tail, or if a pending-setter hit (n,0,0) — it will clear its
        //     pending and queue behind us, so either way a successor comes.
        if val & TAIL_MASK == tail {
            match self.word.compare_exchange(val, LOCKED, Relaxed, Relaxed) {
                Ok(_) => return Self::put_node(slot, level),
                Err(_now) => {
                    // Tail still ours: the (n,0,0) race, a pending-setter
                    // made us lose (else a successor swapped the tail).
                    #[cfg(loom)]
                    if _now & TAIL_MASK == tail {
                        Probe::hit(&self.probe.head_cas_lost_to_pending);
                    }
                }
            }
        }

        // Not alone: set_locked, (m,*,0) -> (m,*,1). A 32-bit RMW, as
        // pending may be flipping concurrently. Relaxed: acquired in step 9;
        // no other thread can take the lock from (m,*,0): fast path and
        // trylock need 0, a pending-setter sees the tail and queues.
        self.word.fetch_or(LOCKED, Relaxed);

        // Wait for the successor to link itself. Acquire pairs with its
        // Release store of our `next`: its node's `locked = 0` is then
        // ordered before our store of 1.
        let mut spin = Spin::new();
        let mut next = node.next.load(Acquire);
        while next.is_null() {
            next = spin.reread_ptr(&node.next, Acquire);
        }
        // Pass the MCS baton. Release pairs with the successor's Acquire
        // spin on its `locked`: it publishes our set_locked above.
        let publish = if MODE == RELAXED_HANDOFF {
            Relaxed // BROKEN (loom only)
        } else {
            Release
        };
        // SAFETY: `next` points into a ThreadSlot, which is never freed; its
        // owner is spinning on it until we store 1.
        unsafe { (*next).locked.store(1, publish) };
        #[cfg(loom)]
        Probe::hit(&self.probe.handoffs);
        Self::put_node(slot, level);
    }

    /// No MCS node to queue with: spin on trylock until it succeeds. Unfair
    /// (queued threads go first), but only reached at nesting depth 5 or
    /// by a thread without a slot.
    #[cold]
    #[inline(never)]
    fn lock_no_node(&self) {
        events::inc(Event::LockNoNode);
        #[cfg(loom)]
        Probe::hit(&self.probe.no_node);
        self.spin_on_trylock();
    }

    /// `raw_try_lock` until it succeeds.
    #[inline(always)]
    fn spin_on_trylock(&self) {
        let mut spin = Spin::new();
        let mut val = self.word.load(Relaxed);
        loop {
            // (0,0,0) -> (0,0,1). Acquire pairs with the Release of the
            // previous owner's unlock.
            if val == 0
                && self
                    .word
                    .compare_exchange(0, LOCKED, Acquire, Relaxed)
                    .is_ok()
            {
                return;
            }
            val = spin.reread(&self.word, Relaxed);
        }
    }
}
