//! The paravirt slow path: the queued spinlock for threads that can be
//! preempted (see the [module docs](super), "Paravirt").
//!
//! A waiter spins only while spinning pays, then sleeps on a futex: a
//! queued waiter on its own node's `state` word, the queue head on the lock
//! word. Who wakes whom:
//!
//! * the thread that passes the MCS baton wakes its successor if the
//!   successor sleeps on its node (`pv_kick_wake`). Through `lock_api`
//!   (and [`raw_lock_token`](super::RawQSpinLockWith::raw_lock_token)) the
//!   pass is lazy, as the kernel's `pv_kick_node`: the successor, now queue
//!   head, can only wait for the lock the passer holds, so the passer's
//!   unlock wakes it, after the release, instead of spending a futex wake
//!   inside the critical section. The guard carries the address.
//!   [`raw_lock`](super::RawQSpinLockWith::raw_lock), with no guard to
//!   carry it, wakes at once;
//! * the unlock wakes the head if the head sleeps on the lock word: the
//!   head marks the locked byte [`HEAD_ASLEEP`] first, so the unlock's
//!   read-modify-write sees it (`pv_kick_unlock`). The kernel hashes
//!   lock → node to find the head; here the head sleeps on the lock word
//!   itself, so the futex address *is* the lookup.
//!
//! While the head is not holding the pending bit, a newcomer may take a
//! free lock past the queue (hybrid unfair mode, `pv_lock_stealing`): a
//! queue head that sleeps or was preempted does not keep the lock idle.
//! The fast path steals as a plain owner (on x86-64 its byte CAS takes a
//! free locked byte whatever the tail; elsewhere a second CAS after the one
//! that expected 0; and the plain unlock: the steady state of a queue of
//! sleepers); the slow path's steal loop takes `LOCKED_PV`, and keeps
//! trying for its budget while the lock is held, queue or not, before it
//! queues: a locker that queued at once behind sleepers would sleep until
//! the queue reached it, and with more threads than CPUs the lock would run
//! one thread at a time. A head behind
//! a plain owner cannot sleep on the word, so it yields, and after 16
//! yields naps for 50 µs at a time.
//! The head blocks steals by holding pending once it has waited past the
//! fairness bound ([`PvTuning::reserve_ns`]), so an awake head is never
//! overtaken for longer than that.

use super::pv_ops::*;
use super::*;
use crate::sync::Ordering::SeqCst;

/// [`QNode::state`]: the waiter spins.
const RUNNING: u32 = 0;
/// [`QNode::state`]: the waiter sleeps on the word (futex) and must be
/// woken by whoever passes it the MCS baton.
const HALTED: u32 = 1;

/// Pause iterations between two steal attempts, at most (the attempts
/// back off exponentially so a spinning newcomer does not keep pulling the
/// owner's cache line away).
const MAX_STEAL_BACKOFF: u32 = 64;

/// Pause iterations between seeing the lock free and looking again before
/// a steal (see `pv_steal`). At 2 threads on 2 CPUs, with nothing done
/// outside the lock, a second look keeps the owner's runs of acquisitions
/// at about 200 instead of 20–50 (`examples/handovers.rs`). Alternating
/// rounds of the `spinlock` suite on a 2-vCPU AMD EPYC guest, 2 threads:
/// 56–105 thousand kop/s with 1 pause, 90–102 with 4, 111–171 with 16,
/// 130–205 with 64, and no change at 1 or 4–16 threads; 16, because
/// every pause is time a free lock stays idle when its owner does not
/// come back (the longest was not tried on suites with work outside the
/// lock).
const STEAL_CONFIRM_PAUSES: u32 = 16;

impl<const PENDING_LOOPS: u32, const PARAVIRT: bool, W: LockWord>
    RawQSpinLockWith<PENDING_LOOPS, PARAVIRT, W>
{
    /// Try to take a free lock past the queue: `(n,0,0) -> (n,0,LOCKED_PV)`
    /// (`(0,0,0) -> (0,0,LOCKED)` when there is no queue). Fails while the
    /// lock is held or anyone holds pending.
    /// `Some(slow_owner)` on success: whether we hold `LOCKED_PV`.
    #[inline]
    pub(super) fn pv_try_lock(&self) -> Option<bool> {
        #[cfg(loom)]
        let _ = thread::current_tid();
        let v = self.word.load(Relaxed);
        if v & (LOCKED_MASK | PENDING_MASK) != 0 {
            return None;
        }
        // A lock with no queue is taken as on the fast path (a plain
        // owner); past a queue it is taken as a slow-path owner, whose
        // unlock looks for a sleeping head. Acquire pairs with the Release
        // of the previous owner's unlock.
        let new = if v == 0 { LOCKED } else { v | LOCKED_PV };
        let ok = self.word.compare_exchange(v, new, Acquire, Relaxed).is_ok();
        #[cfg(loom)]
        if ok {
            self.probe.acquired("trylock");
        }
        ok.then_some(v != 0)
    }

    /// The unlock of a slow-path owner, `v` the word as last read: clear
    /// the locked byte in one RMW and wake the head if it sleeps.
    /// `(*,*,LOCKED_PV|SLOW) -> (*,*,0)`.
    ///
    /// Inline: its first CAS on our own cache line almost always succeeds.
    /// A retry (a queuer's tail swap or a head's mark came in between) and
    /// the wake-up are out of line.
    #[inline(always)]
    pub(super) fn unlock_pv<const MODE: u8>(&self) {
        // x86-64 (and loom): the locked byte alone, `LOCKED_PV -> 0`, the
        // width of the fast path and of the steals (see `byte.rs`); a
        // sleeping head's SLOW byte makes it fail. Release as below.
        #[cfg(any(loom, target_arch = "x86_64"))]
        if !self.word.cas_locked(LOCKED_PV, 0, Release) {
            self.unlock_pv_slow::<MODE>();
        }
        #[cfg(not(any(loom, target_arch = "x86_64")))]
        self.unlock_pv_word::<MODE>(self.word.load(Relaxed));
    }

    /// [`unlock_pv`](Self::unlock_pv) on the whole word, `v` as last read.
    #[cfg(not(any(loom, target_arch = "x86_64")))]
    #[inline(always)]
    fn unlock_pv_word<const MODE: u8>(&self, v: u32) {
        debug_assert_ne!(v & LOCKED_MASK, 0, "unlock of an unlocked qspinlock");
        // Release pairs with the Acquire of the next owner's RMW (steal,
        // pending take-over, head's take) or fast-path CAS.
        if v & HEAD_ASLEEP != 0
            || self
                .word
                .compare_exchange(v, v & !LOCKED_MASK, Release, Relaxed)
                .is_err()
        {
            self.unlock_pv_slow::<MODE>();
        }
    }

    /// [`unlock_pv`](Self::unlock_pv) when the word moved under us or the
    /// head sleeps: CAS loop, then the wake-up.
    #[cold]
    #[inline(never)]
    fn unlock_pv_slow<const MODE: u8>(&self) {
        // The futex key, taken before the release: after it the head may
        // take the lock, return, and the lock's memory go away.
        let addr = futex_key(self.word.futex());
        let mut v = self.word.load(Relaxed);
        // We hold the lock, so its locked byte is set; were it clear, the
        // loop below would clear the byte of whoever takes the lock next.
        debug_assert_ne!(v & LOCKED_MASK, 0, "unlock of an unlocked qspinlock");
        // A CAS loop rather than fetch_and: x86 has no fetch-and that
        // returns the old value, so it is the same instruction. Release as
        // in `unlock_pv`.
        while let Err(now) = self
            .word
            .compare_exchange_weak(v, v & !LOCKED_MASK, Release, Relaxed)
        {
            v = now;
        }
        if v & HEAD_ASLEEP != 0 && MODE != BLIND_UNLOCK {
            self.kick_head(addr);
        }
    }

    /// Wake the successor that a lazy baton pass left asleep on the node
    /// state word at `addr` (after our release; by address, harmless if it
    /// woke meanwhile and moved on).
    #[cold]
    #[inline(never)]
    pub(super) fn kick_successor(&self, addr: usize) {
        events::inc(Event::PvKickWake);
        #[cfg(loom)]
        Probe::hit(&self.probe.kicks_wake);
        pv_kick(addr);
    }

    /// Wake the head sleeping on the lock word at `addr` (by address only:
    /// see [`crate::sys::futex_wake_addr`]).
    #[cold]
    #[inline(never)]
    fn kick_head(&self, addr: usize) {
        events::inc(Event::PvKickUnlock);
        #[cfg(loom)]
        Probe::hit(&self.probe.kicks_unlock);
        pv_kick(addr);
    }

    /// Steps 1–6 in the paravirt form: wait out a pending hand-over, try to
    /// steal, take the pending bit (bounded wait), else queue. Returns the
    /// address of a successor left asleep by a lazy (`LAZY`) baton pass,
    /// which the unlock must wake, or 0.
    #[cold]
    #[inline(never)]
    pub(super) fn pv_lock_slow<const MODE: u8, const LAZY: bool>(&self, mut val: u32) -> usize {
        // Where a forked child looks for the parent's waiters (`fork.rs`).
        let _slow = self.enter_slow_path();
        // Loom: the probe's bookkeeping asks for the thread id right after
        // an acquiring RMW; its first call initialises a thread-local with
        // a loom atomic, which must not come in between.
        #[cfg(loom)]
        let _ = thread::current_tid();
        // 1. (0,1,0): a pending waiter is taking the lock right now; as in
        //    the native path, give it a bounded number of re-reads.
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

        // 2. Hybrid mode: steal a free lock nobody reserved, trying for a
        //    bounded time with backoff. (The first try was the caller's
        //    fast path, which takes a free lock past a queue as a plain
        //    owner.)
        if self.pv_steal::<MODE>(val) {
            return 0;
        }

        // 3. No queue and no pending waiter: take the pending bit.
        let val = self.word.load(Relaxed);
        if val & !LOCKED_MASK == 0 && self.pv_pending::<MODE>() {
            return 0;
        }

        // 4. Queue.
        self.pv_queue::<MODE, LAZY>()
    }

    /// Take the free lock seen as `val` past the queue:
    /// `(n,p,0) -> (n,p,LOCKED_PV)`, or the word as it is now. The caller
    /// checked that nobody's pending bit forbids it. Acquire pairs with
    /// the Release of the last unlock.
    #[inline(always)]
    fn steal_from<const MODE: u8>(&self, val: u32) -> Result<(), u32> {
        // x86-64 (and loom): as the fast path, on the locked byte alone,
        // then give it back if someone holds pending now.
        #[cfg(any(loom, target_arch = "x86_64"))]
        {
            if !self.word.cas_locked(0, LOCKED_PV, Acquire) {
                return Err(self.word.load(Relaxed));
            }
            if self.word.pending() != 0 && MODE != STEAL_IGNORES_PENDING {
                // A sleeping head may have marked our byte meanwhile: the
                // slow owner's unlock wakes it.
                self.unlock_pv::<MODE>();
                return Err(self.word.load(Relaxed));
            }
        }
        #[cfg(not(any(loom, target_arch = "x86_64")))]
        self.word
            .compare_exchange(val, val | LOCKED_PV, Acquire, Relaxed)?;
        if val & TAIL_MASK != 0 {
            events::inc(Event::PvLockStealing);
        }
        #[cfg(loom)]
        {
            Probe::hit(&self.probe.steals);
            self.probe.acquired("steal");
        }
        Ok(())
    }

    /// Step 2: steal attempts for `steal_ns`, `val` the last word read.
    /// Gives up at once when someone holds pending (a reserved hand-over
    /// that must not be overtaken).
    #[inline(always)]
    fn pv_steal<const MODE: u8>(&self, mut val: u32) -> bool {
        let mut budget = Budget::new(steal_ns());
        let mut backoff = 1;
        // Whether the last read already found the lock free.
        let mut seen_free = false;
        // Loom: whether we found it held with a queue and kept trying.
        #[cfg(loom)]
        let mut behind_queue = false;
        loop {
            let reserved = val & PENDING_MASK != 0 && MODE != STEAL_IGNORES_PENDING;
            if val & LOCKED_MASK == 0 && !reserved && !seen_free {
                // Free once: look again after a few pauses before taking
                // it. An owner that re-locks at once (a loop) releases with
                // a plain store and re-acquires with one byte CAS, so its
                // lock reads free for most of that CAS; stealing in that
                // instant moves the line to us and back at every steal.
                seen_free = true;
                for _ in 0..STEAL_CONFIRM_PAUSES {
                    cpu_relax();
                }
                val = self.word.load(Relaxed);
                continue;
            }
            if val & LOCKED_MASK != 0 {
                seen_free = false;
            }
            if val & LOCKED_MASK == 0 && !reserved {
                match self.steal_from::<MODE>(val) {
                    Ok(()) => {
                        #[cfg(loom)]
                        if behind_queue {
                            Probe::hit(&self.probe.queue_steals);
                        }
                        return true;
                    }
                    // Another thread's RMW won; the budget bounds how often
                    // we retry (no unbounded CAS loop).
                    Err(now) => val = now,
                }
            } else if reserved {
                // A reserved hand-over must not be overtaken.
                return false;
            } else {
                // Held, queue or not: keep trying for the budget. Queueing
                // at once behind a queue would park this thread until the
                // queue reaches it, and a queue of sleepers moves only when
                // its head wakes and wins: with more threads than CPUs the
                // lock would run one thread at a time, the others asleep in
                // the queue, and a program with work outside the lock would
                // keep one CPU of two busy (`klock bench spinlock --cs-ns 60
                // --outside-ns 100`, 16 threads on 2 CPUs: 1.01–1.07 CPUs
                // busy that way, 1.73–1.79 this way).
                #[cfg(loom)]
                if val & TAIL_MASK != 0 && !behind_queue {
                    behind_queue = true;
                    Probe::hit(&self.probe.queue_waits);
                }
                for _ in 0..backoff {
                    cpu_relax();
                }
                backoff = (backoff * 2).min(MAX_STEAL_BACKOFF);
                val = self.word.load(Relaxed);
            }
            if budget.due() && budget.spent() {
                return false;
            }
        }
    }

    /// Step 3: own the pending bit and wait, for at most `spin_ns`, for the
    /// owner to go; then take the lock, `(*,1,0) -> (*,0,LOCKED_PV)`. False:
    /// raced with a queue or another pending waiter, or the wait ran out;
    /// our pending bit is gone and the caller queues.
    #[inline(always)]
    fn pv_pending<const MODE: u8>(&self) -> bool {
        // (0,0,*) -> (0,1,*). Acquire: if the locked byte was 0 this is our
        // acquisition (pairs with the last unlock's Release).
        let val = self.word.fetch_or(PENDING, Acquire);
        if val & PENDING_MASK == 0 {
            #[cfg(loom)]
            self.probe.pending_set(1);
        }
        if val & !LOCKED_MASK != 0 {
            // Raced: undo our pending bit if it was ours, then queue (never
            // retry the trylock: see the native step 4).
            if val & PENDING_MASK == 0 {
                self.word.fetch_and(!PENDING, Relaxed);
                #[cfg(loom)]
                self.probe.pending_cleared();
            }
            return false;
        }
        let mut budget = Budget::new(spin_ns());
        let mut v = val | PENDING;
        loop {
            // (*,1,0) -> (*,0,LOCKED_PV): a CAS, not the native path's add:
            // a fast-path locker may hold the locked byte for a moment
            // before it sees our pending bit and gives the byte back
            // (`pv_fast_lock`). Acquire pairs with the Release of the
            // owner's unlock (or of that give-back).
            if v & LOCKED_MASK == 0 && MODE == PENDING_TAKE_BY_ADD {
                // BROKEN (loom only): the native path's blind add.
                self.word.fetch_add(PENDING_TO_LOCKED_PV, Acquire);
                break;
            }
            if v & LOCKED_MASK == 0 {
                match self.word.compare_exchange_weak(
                    v,
                    (v & !PENDING_MASK) | LOCKED_PV,
                    Acquire,
                    Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => {
                        v = now;
                        continue;
                    }
                }
            }
            cpu_relax();
            // Acquire: the value may be the one our CAS then expects.
            v = self.word.load(Acquire);
            if v & LOCKED_MASK != 0 && budget.due() && budget.spent() {
                // The owner did not go while we spun: it may be
                // preempted. Queue, and sleep there. Relaxed: nothing
                // is published.
                self.word.fetch_and(!PENDING, Relaxed);
                #[cfg(loom)]
                self.probe.pending_cleared();
                events::inc(Event::PvPendingTimeout);
                #[cfg(loom)]
                Probe::hit(&self.probe.pending_timeouts);
                return false;
            }
        }
        #[cfg(loom)]
        {
            self.probe.acquired("pending");
            self.probe.pending_cleared();
            Probe::hit(&self.probe.pending_taken);
        }
        events::inc(Event::LockPending);
        true
    }

    /// Steps 7–10 in the paravirt form: queue, spin on the node while it
    /// pays, else sleep on it; as head, spin for the lock while it pays,
    /// else sleep on the lock word.
    #[inline(never)]
    fn pv_queue<const MODE: u8, const LAZY: bool>(&self) -> usize {
        events::inc(Event::LockSlowpath);
        let Some((slot, level, node, tail)) = Self::claim_node() else {
            self.pv_lock_no_node();
            return 0;
        };
        // Relaxed: published by xchg_tail's Release.
        node.state.store(RUNNING, Relaxed);

        if self.pv_try_lock().is_some() {
            Self::put_node(slot, level);
            return 0;
        }

        let old = self.xchg_tail(tail);
        if old & TAIL_MASK != 0 {
            #[cfg(loom)]
            Probe::hit(&self.probe.queued_behind);
            let prev = tail_node(old);
            // Release pairs with the predecessor's Acquire load of `next`.
            prev.next.store(node as *const QNode as *mut QNode, Release);
            self.pv_wait_node(node, prev, decode_tail(old).0);
        }

        // Queue head: get the lock.
        let alone = self.pv_wait_head::<MODE>(tail);
        if alone {
            Self::put_node(slot, level);
            return 0;
        }

        // Not alone: wait for the successor to link itself, then pass it
        // the MCS baton. Acquire pairs with its Release store of `next`.
        let mut next = node.next.load(Acquire);
        let mut budget = Budget::new(spin_ns());
        let mut round = 0;
        let mut spin = Spin::new();
        while next.is_null() {
            // The successor swapped the tail and is about to link; if it
            // was preempted in between, give it the CPU.
            if budget.due() && budget.spent() {
                pv_yield(round);
                round = round.saturating_add(1);
            }
            next = spin.reread_ptr(&node.next, Acquire);
        }
        // SAFETY: `next` points into a ThreadSlot, which is never freed.
        let next = unsafe { &*next };
        // The successor left asleep for our unlock to wake (lazy baton).
        let mut deferred = 0;
        if MODE == KICK_BEFORE_BATON {
            // BROKEN (loom only): look at the successor before passing the
            // baton; it may halt in between and never be woken.
            let halted = next.state.load(SeqCst) == HALTED;
            next.locked.store(1, SeqCst);
            if halted {
                next.state.store(RUNNING, SeqCst);
                pv_kick(futex_key(&next.state));
            }
        } else {
            // The baton, then the successor's state: with the successor's
            // halt (state, then `locked`) this is a store-load pair on each
            // side, so SeqCst on all four: either it sees the baton and
            // does not sleep, or we see it halted and wake it. The store
            // is also the Release its Acquire read of `locked` pairs with.
            next.locked.store(1, SeqCst);
            if next.state.swap(RUNNING, SeqCst) == HALTED {
                if LAZY {
                    // The lazy baton (the kernel's `pv_kick_node`): the
                    // successor, now queue head, could only wait for the
                    // lock we hold; waking it now would spend a futex wake
                    // inside our critical section and put a spinner beside
                    // us. Our unlock wakes it instead, once the lock is
                    // free (the guard carries the address). It sleeps on a
                    // word that no longer holds HALTED, so only a wake (or
                    // a spurious return) gets it out, and both find the
                    // baton. Its node lives in a ThreadSlot, never freed,
                    // so the address stays valid for the late wake-up.
                    deferred = futex_key(&next.state);
                } else {
                    self.kick_successor(futex_key(&next.state));
                }
            }
        }
        #[cfg(loom)]
        Probe::hit(&self.probe.handoffs);
        Self::put_node(slot, level);
        deferred
    }

    /// Wait for the MCS baton on `node`: spin while it pays, else sleep on
    /// the node's state word until the predecessor passes the baton.
    fn pv_wait_node(&self, node: &QNode, prev: &QNode, prev_index: u32) {
        loop {
            let mut budget = Budget::new(spin_ns());
            // Acquire pairs with the predecessor's (SeqCst) baton store: it
            // publishes the predecessor's acquisition of the lock.
            while node.locked.load(Acquire) == 0 {
                cpu_relax();
                if budget.due() {
                    if budget.spent() {
                        break;
                    }
                    // Waiting behind a sleeping or preempted predecessor is
                    // pointless: it cannot pass the baton soon.
                    if prev.state.load(Relaxed) == HALTED || !Self::thread_runs(prev_index) {
                        events::inc(Event::PvWaitEarly);
                        break;
                    }
                }
            }
            if node.locked.load(Acquire) != 0 {
                return;
            }
            // Halt, then look at the baton again (see the SeqCst pair in
            // pv_queue): a baton passed in between is seen here.
            if node
                .state
                .compare_exchange(RUNNING, HALTED, SeqCst, Relaxed)
                .is_ok()
                && node.locked.load(SeqCst) == 0
            {
                events::inc(Event::PvWaitNode);
                #[cfg(loom)]
                Probe::hit(&self.probe.node_sleeps);
                pv_wait(&node.state, HALTED);
            }
            if node.locked.load(Acquire) != 0 {
                return;
            }
            // Woken without the baton (spurious, or a stale kick of this
            // node's earlier use): back to spinning.
            events::inc(Event::PvSpuriousWakeup);
            let _ = node
                .state
                .compare_exchange(HALTED, RUNNING, Relaxed, Relaxed);
        }
    }

    /// The oracle's word on whether the thread with index `index` runs;
    /// `true` when it cannot tell.
    #[inline]
    fn thread_runs(index: u32) -> bool {
        #[cfg(loom)]
        {
            let _ = index;
            true
        }
        #[cfg(not(loom))]
        {
            let tid = thread::slot(index).tid.load(Relaxed);
            tid == 0 || crate::oncpu::oracle().owner_running(tid) != Some(false)
        }
    }

    /// The queue head's wait: returns once we own the lock, `true` if we
    /// also emptied the queue (nobody behind us).
    fn pv_wait_head<const MODE: u8>(&self, tail: u32) -> bool {
        #[cfg(loom)]
        Probe::hit(&self.probe.heads);
        let tuning = pv_tuning();
        let became_head = monotonic_ns();
        let mut reserved = false;
        let mut yields = 0;
        loop {
            let mut budget = Budget::new(tuning.spin_ns);
            loop {
                // Acquire pairs with the Release of the last unlock.
                let v = self.word.load(Acquire);
                if v & LOCKED_MASK == 0 && (reserved || v & PENDING_MASK == 0) {
                    if let Some(alone) = self.pv_head_take::<MODE>(v, tail, reserved) {
                        return alone;
                    }
                    continue;
                }
                if budget.due() {
                    if budget.spent() {
                        break;
                    }
                    // Past the fairness bound, hold pending while we spin:
                    // steals stop and the next release is ours.
                    if !reserved
                        && v & PENDING_MASK == 0
                        && monotonic_ns().saturating_sub(became_head) >= tuning.reserve_ns
                        && self
                            .word
                            .compare_exchange(v, v | PENDING, Relaxed, Relaxed)
                            .is_ok()
                    {
                        reserved = true;
                        events::inc(Event::PvHeadReserve);
                        #[cfg(loom)]
                        {
                            self.probe.pending_set(2);
                            Probe::hit(&self.probe.head_reserves);
                        }
                    }
                }
                cpu_relax();
            }

            // The owner did not go while we spun. Let newcomers steal while
            // we are away.
            if reserved {
                self.word.fetch_and(!PENDING, Relaxed);
                reserved = false;
                #[cfg(loom)]
                self.probe.pending_cleared();
            }
            let v = self.word.load(Relaxed);
            let byte = v & LOCKED_MASK;
            if byte == LOCKED_PV || (byte == LOCKED && MODE == SLEEP_ON_PLAIN_OWNER) {
                // (n,*,LOCKED_PV) -> (n,*,SLOW), then sleep while the word
                // stays so. The owner's unlock clears the byte in one RMW
                // and, seeing HEAD_ASLEEP, wakes us; if it came first, our
                // CAS fails; if any other bit changes first, the futex
                // finds the word changed and returns at once.
                let slow = v | HEAD_ASLEEP;
                if self
                    .word
                    .compare_exchange(v, slow, Relaxed, Relaxed)
                    .is_ok()
                {
                    events::inc(Event::PvWaitHead);
                    #[cfg(loom)]
                    Probe::hit(&self.probe.head_sleeps);
                    pv_wait(self.word.futex(), W::futex_val(slow));
                }
            } else if byte == SLOW {
                // Still marked from our last sleep (a spurious wake-up).
                events::inc(Event::PvSpuriousWakeup);
                pv_wait(self.word.futex(), W::futex_val(v));
            } else if byte == LOCKED {
                // A fast-path owner unlocks with a plain store and would not
                // wake us: give the CPU away instead (it may be the owner's).
                events::inc(Event::PvWaitYield);
                #[cfg(loom)]
                Probe::hit(&self.probe.head_yields);
                pv_yield(yields);
                yields = yields.saturating_add(1);
            }
        }
    }

    /// The head takes the free lock it saw as `v` (locked byte 0, pending
    /// 0 or ours). `Some(alone)` on success, `None` if the word changed.
    #[inline(always)]
    fn pv_head_take<const MODE: u8>(&self, v: u32, tail: u32, reserved: bool) -> Option<bool> {
        let took = if v & TAIL_MASK == tail {
            // Alone: (n,p,0) -> (0,0,LOCKED_PV), p our pending or 0.
            // Acquire (not Relaxed as in the native path): steals mean the
            // word may have gone round (locked and unlocked again) since
            // our load; the CAS reads the newest value.
            self.word
                .compare_exchange(v, LOCKED_PV, Acquire, Relaxed)
                .is_ok()
                .then_some(true)
        } else if reserved && MODE == PENDING_TAKE_BY_ADD {
            // BROKEN (loom only): the native path's blind add.
            self.word.fetch_add(PENDING_TO_LOCKED_PV, Acquire);
            Some(false)
        } else if reserved {
            // Nobody else takes a lock whose pending bit we hold:
            // (m,1,0) -> (m,0,LOCKED_PV). A CAS, not an add: a fast-path
            // locker may hold the byte for a moment before it sees our
            // pending bit and gives it back (`pv_fast_lock`). Acquire as
            // above.
            self.word
                .compare_exchange(v, (v & !PENDING_MASK) | LOCKED_PV, Acquire, Relaxed)
                .is_ok()
                .then_some(false)
        } else {
            // (m,0,0) -> (m,0,LOCKED_PV); fails if a newcomer stole it.
            self.word
                .compare_exchange(v, v | LOCKED_PV, Acquire, Relaxed)
                .is_ok()
                .then_some(false)
        };
        #[cfg(loom)]
        if took.is_some() {
            self.probe.acquired("queue head");
            if reserved {
                self.probe.pending_cleared();
            }
        }
        took
    }

    /// No MCS node: steal-spin until it works, yielding while it fails.
    #[cold]
    #[inline(never)]
    fn pv_lock_no_node(&self) {
        events::inc(Event::LockNoNode);
        #[cfg(loom)]
        Probe::hit(&self.probe.no_node);
        let mut round = 0;
        while self.pv_try_lock().is_none() {
            pv_yield(round);
            round = round.saturating_add(1);
        }
    }
}
