//! The rw-semaphore's read slow paths: the contended read lock (reader
//! spinning, stealing, joining a read phase, sleeping in the wait list)
//! and the grants and wake-ups of queued readers (see the
//! [module docs](super)).

#[cfg(loom)]
use super::Probe;
use super::{
    broken, my_id, readers_of, RawRwSemWith, ReadWait, Role, Waiter, FRONT_READER, HANDOFF,
    MAX_READERS_WAKEUP, OWNER_MASK, RD_NONSPINNABLE, READER_BIAS, READER_MASK, READER_OWNED,
    READ_FAILED, WAITERS, WRITER_LOCKED, W_GRANTED, W_PARKED, W_RETRY, W_WAITING,
};
use crate::events::{self, Event};
use crate::oncpu;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sys::monotonic_ns;
use crate::waitlist::{futex_addr, wake_later_n, AbortOnUnwind, Links};
use crate::waitlock::WaitLockRaw;

impl<const RSPIN: u8, const ADAPTIVE: u8, W: WaitLockRaw> RawRwSemWith<RSPIN, ADAPTIVE, W> {
    /// Contended read lock. `false` only when `deadline` passed.
    #[cold]
    #[inline(never)]
    pub(super) fn read_slow(&self, deadline: Option<u64>) -> bool {
        let me = my_id();
        let entry = self.owner.load(Relaxed);
        let saw_rd = entry & RD_NONSPINNABLE != 0;
        let last_reader = if entry & READER_OWNED != 0 {
            entry & OWNER_MASK
        } else {
            0
        };
        if self.reader_steal_enabled() && self.steal_read(me) {
            return true;
        }
        if self.reader_pass_enabled() && self.pass_read(me) {
            return true;
        }
        if self.reader_spin_enabled() && oncpu::spinning_useful() {
            if saw_rd {
                events::inc(Event::RwsemNorspin);
                #[cfg(loom)]
                Probe::hit(&self.probe.norspins);
            } else if self.can_spin(Role::Reader) {
                let got = self
                    .quick_spin(me, Role::Reader)
                    .or_else(|| self.optimistic_spin(me, Role::Reader, false, deadline));
                if let Some(old) = got {
                    // Let the readers queued at the front join this phase,
                    // through wait_lock only when the count our add read
                    // shows readers there (with a writer at the front
                    // nothing is granted; a reader that queues first after
                    // our add sees no writer and lets itself in). Reading
                    // the count again here cost a cache-line transfer.
                    if old & FRONT_READER != 0 {
                        self.grant_front_readers();
                    }
                    return true;
                }
                if self.join_read_phase(me, last_reader) {
                    return true;
                }
            }
        }
        let since = monotonic_ns();
        loop {
            match self.read_sleep(me, saw_rd, since, deadline) {
                ReadWait::Granted => return true,
                ReadWait::TimedOut => return false,
                ReadWait::Retry => {
                    // Woken to a lock no writer held: compete for it as
                    // the queued reader we were (past `WAITERS`, never past
                    // a writer or a hand-off). A writer that got in first
                    // sends us back to the queue, with our first queueing
                    // time, so the grant bound still counts from there.
                    let won = if self.is_broken(broken::COMPETE_AS_GRANT) {
                        self.count.fetch_add(READER_BIAS, Acquire);
                        true
                    } else {
                        self.try_read_unqueued(me)
                    };
                    if won {
                        events::inc(Event::RwsemRlockWoken);
                        #[cfg(loom)]
                        Probe::hit(&self.probe.woken_wins);
                        return true;
                    }
                    events::inc(Event::RwsemRlockRequeue);
                    #[cfg(loom)]
                    Probe::hit(&self.probe.requeues);
                }
            }
        }
    }

    /// A reader that started a read phase (or a writer that downgraded)
    /// lets the readers queued at the front join it: under `wait_lock`,
    /// grant them if the front waiter is a reader (never wakes a writer).
    pub(super) fn grant_front_readers(&self) {
        self.wl_lock();
        // SAFETY: we hold wait_lock.
        unsafe { self.wake_front(false) };
        // SAFETY: we hold wait_lock.
        unsafe { self.wl_unlock() };
    }

    /// Reader lock stealing (`STEAL` mode): take the lock if the count
    /// shows no writer, no other reader and no hand-off, waiters or not;
    /// then, as the first reader of the phase, grant the readers at the
    /// front. Not into a read phase: a stream of stealing readers could
    /// then starve a queued writer forever.
    #[inline(never)]
    fn steal_read(&self, me: usize) -> bool {
        let Some(old) = self.read_past_queue(me, false) else {
            return false;
        };
        events::inc(Event::RwsemRlockSteal);
        #[cfg(loom)]
        Probe::hit(&self.probe.steals);
        if old & FRONT_READER != 0 {
            self.grant_front_readers();
        }
        true
    }

    /// Reader passing ([`reader_pass`](super::reader_pass)): take the lock
    /// if no writer holds it and no hand-off reserves it, past queued
    /// waiters and into a read phase. A queued writer is not starved: as
    /// the first waiter it sleeps at most its hand-off bound, then sets
    /// `HANDOFF`, which stops passing readers; the last reader's unlock
    /// wakes it.
    ///
    /// Why: with more threads than CPUs a queued writer is usually one the
    /// scheduler has not run yet, and under the kernel's rule every reader
    /// queued behind it while running writers took the lock from it. In
    /// `rwsem-rate` at 16 threads on 2 CPUs readers then got about a tenth
    /// of the operations and slept most of the time.
    #[inline(never)]
    fn pass_read(&self, me: usize) -> bool {
        if self.read_past_queue(me, true).is_none() {
            return false;
        }
        events::inc(Event::RwsemRlockPass);
        #[cfg(loom)]
        Probe::hit(&self.probe.passes);
        true
    }

    /// Take a read lock past queued waiters (a steal, or reader passing):
    /// only while no writer holds the lock and no hand-off reserves it,
    /// and, unless `into_phase`, no other reader holds it. Checked before
    /// the add (no RMW on a lock we would not take) and on the add's
    /// result (the count may have changed since the load). Returns the
    /// count before our add.
    #[inline(always)]
    fn read_past_queue(&self, me: usize, into_phase: bool) -> Option<u64> {
        let mut blocked = WRITER_LOCKED | HANDOFF | READ_FAILED;
        if self.is_broken(broken::PAST_QUEUE_IGNORES_HANDOFF) {
            blocked &= !HANDOFF;
        }
        if self.is_broken(broken::PAST_QUEUE_IGNORES_WRITER) {
            blocked &= !WRITER_LOCKED;
        }
        let free = |c: u64| c & blocked == 0 && (into_phase || readers_of(c) == 0);
        if !free(self.count.load(Relaxed)) {
            return None;
        }
        self.try_read_if(me, free)
    }

    /// Phase-fair readers: after quitting spinning, join the read phase of
    /// another reader that took the lock since we arrived, if the lock is
    /// still reader-owned.
    fn join_read_phase(&self, me: usize, last_reader: usize) -> bool {
        let o = self.owner.load(Relaxed);
        let hint = o & OWNER_MASK;
        if o & READER_OWNED == 0 || hint == 0 || hint == last_reader || hint == me {
            return false;
        }
        let c = self.count.load(Relaxed);
        if c & (WRITER_LOCKED | HANDOFF) != 0 || c & READER_MASK == 0 {
            return false;
        }
        if self.try_read_unqueued(me) {
            events::inc(Event::RwsemRlockRejoin);
            #[cfg(loom)]
            Probe::hit(&self.probe.rejoins);
            true
        } else {
            false
        }
    }

    /// Queue as a reader (first queued at `since`) and sleep until granted,
    /// woken to compete, or `deadline` passes.
    #[inline(never)]
    fn read_sleep(&self, me: usize, saw_rd: bool, since: u64, deadline: Option<u64>) -> ReadWait {
        let waiter = Waiter {
            state: AtomicU32::new(W_WAITING),
            links: Links::new(),
            id: me,
            role: Role::Reader,
            saw_rd,
            since,
            gen: crate::thread::fork_generation(),
            #[cfg(loom)]
            thread: loom::thread::current(),
        };
        let wp: *const Waiter = &waiter;

        self.wl_lock();
        // SAFETY: we hold wait_lock.
        if unsafe { self.list_head() }.is_null() {
            // Nobody queued: take it now unless a writer holds or a
            // hand-off reserves it. Acquire: as try_read_unqueued.
            let mut c = self.count.load(Relaxed);
            while c & (WRITER_LOCKED | HANDOFF | READ_FAILED) == 0 {
                match self
                    .count
                    .compare_exchange_weak(c, c + READER_BIAS, Acquire, Relaxed)
                {
                    Ok(_) => {
                        // SAFETY: we hold wait_lock.
                        unsafe { self.wl_unlock() };
                        self.set_reader_owned(me);
                        events::inc(Event::RwsemRlockFast);
                        #[cfg(loom)]
                        Probe::hit(&self.probe.rlock_fast);
                        return ReadWait::Granted;
                    }
                    Err(now) => c = now,
                }
            }
        }
        // SAFETY (list accesses below): under wait_lock; `waiter` outlives
        // its membership (unlinked — by us or a granter — before we
        // return; unwinding aborts).
        let bomb = AbortOnUnwind("RwSem");
        if unsafe { self.list_push(wp) } {
            // First in the queue: tell write unlocks to grant us, in the
            // same RMW that sets WAITERS. Ordered with unlocks by the
            // word's modification order (see lock_sleep in mutex/slow.rs:
            // an unlock after this RMW sees both bits, its CAS fails on
            // them, and it grants; one before it is seen by the check
            // below). Relaxed: the list it describes is read under
            // wait_lock.
            let front = if self.is_broken(broken::NO_FRONT_READER) {
                0
            } else {
                FRONT_READER
            };
            self.count.fetch_or(WAITERS | front, Relaxed);
        }
        if self.count.load(Relaxed) & WRITER_LOCKED == 0 {
            // No writer: the front (maybe us) may go now.
            // SAFETY: we hold wait_lock.
            unsafe { self.wake_front(true) };
        }

        let woke = loop {
            // Holding wait_lock. Acquire pairs with the granter's Release swap.
            let st = waiter.state.load(Acquire);
            if st == W_GRANTED || st == W_RETRY {
                // SAFETY: we hold wait_lock.
                unsafe { self.wl_unlock() };
                break st;
            }
            if cfg!(any(debug_assertions, loom)) {
                assert!(
                    self.count.load(Relaxed) & WAITERS != 0,
                    "klock::RwSem: reader queued but WAITERS clear"
                );
            }
            if deadline.is_some_and(|d| monotonic_ns() >= d) {
                // SAFETY: we hold wait_lock and are linked.
                unsafe { self.leave(wp) };
                // SAFETY: we hold wait_lock.
                unsafe { self.wl_unlock() };
                core::mem::forget(bomb);
                return ReadWait::TimedOut;
            }
            // Re-arm (only granters change a reader's state, under wait_lock).
            waiter.state.store(W_WAITING, Relaxed);
            // SAFETY: we hold wait_lock.
            unsafe { self.wl_unlock() };
            self.park_counted(&waiter, deadline, Event::RwsemSleepReader);
            // Acquire: as above.
            let st = waiter.state.load(Acquire);
            if st == W_GRANTED || st == W_RETRY {
                // The granter touches our state word only under wait_lock
                // (it marks us there, after unlinking us) and wakes us
                // through the lock's `rgate`, so we may return at once.
                break st;
            }
            self.wl_lock();
        };
        core::mem::forget(bomb);
        if woke == W_RETRY {
            return ReadWait::Retry;
        }
        events::inc(Event::RwsemRlock);
        ReadWait::Granted
    }

    /// Grant the lock to the readers queued from `head` (the first queued
    /// reader; only a write unlock passes one behind a writer) on: all
    /// queued readers, skipping writers, at most [`MAX_READERS_WAKEUP`],
    /// with one CAS on the count; then unlink them and mark them granted
    /// (their futex wake-ups go out after `wait_lock` is released).
    ///
    /// `unlocking`: the caller holds the write lock and releases it in the
    /// same CAS (write unlock, `(0,1,F) -> (n,0,F')`). Otherwise the lock
    /// must be free of writers: if a writer holds it nothing is granted,
    /// and a front reader that has waited too long requests a hand-off.
    ///
    /// # Safety
    /// The caller holds wait_lock (and, if `unlocking`, the write lock);
    /// `head` is the linked first waiter, a reader.
    pub(super) unsafe fn grant_readers(&self, head: *const Waiter, unlocking: bool) {
        // SAFETY: caller's contract.
        let h = unsafe { &*head };
        // Readers to grant, and whether anybody stays queued.
        let cap = if self.is_broken(broken::GRANT_ONE_READER) {
            1
        } else {
            MAX_READERS_WAKEUP
        };
        // SAFETY: caller holds wait_lock.
        let (mut n, mut others) = (0u64, head != unsafe { self.list_head() });
        // Whether the new front, once these readers leave, is a reader
        // (one past the cap): FRONT_READER stays set only then. Behind a
        // front writer (`others` already) it is that writer.
        let mut reader_next = false;
        let mut p = head;
        while !p.is_null() {
            // SAFETY: linked waiters are alive.
            let w = unsafe { &*p };
            if w.role == Role::Reader && n < cap {
                n += 1;
            } else {
                if !others {
                    reader_next = w.role == Role::Reader;
                }
                others = true;
            }
            p = w.links.next();
        }
        // Grant (hand the lock over) only to readers that have waited their
        // bound, or past a front writer; younger ones are woken to compete.
        let skip = head != unsafe { self.list_head() };
        let due = skip || monotonic_ns().saturating_sub(h.since) >= self.reader_grant();
        let mut c = self.count.load(Relaxed);
        let grant = loop {
            if unlocking {
                if cfg!(debug_assertions) {
                    assert!(
                        c & WRITER_LOCKED != 0,
                        "klock::RwSem: write unlock of a lock not write-locked (count {c:#x})"
                    );
                }
            } else if c & WRITER_LOCKED != 0 {
                if c & HANDOFF == 0 && monotonic_ns().saturating_sub(h.since) >= self.wait_timeout()
                {
                    // Relaxed: as the writer's hand-off request.
                    self.count.fetch_or(HANDOFF, Relaxed);
                    events::inc(Event::RwsemRlockHandoff);
                    #[cfg(loom)]
                    Probe::hit(&self.probe.handoff_requests);
                }
                return;
            }
            // A reader's hand-off request (HANDOFF with a reader at the
            // front) is always answered with a grant.
            let grant = due || c & HANDOFF != 0;
            let mut new = if grant {
                c.wrapping_add(n * READER_BIAS) & !HANDOFF
            } else {
                c
            };
            if unlocking {
                new &= !WRITER_LOCKED;
            }
            if !others {
                new &= !(WAITERS | FRONT_READER);
            } else if !reader_next {
                new &= !FRONT_READER;
            }
            if new == c {
                // Waking to compete with others still queued: no change.
                break grant;
            }
            // Unlocking: Release (our write section) pairs with the Acquire
            // of the next writer, through the readers' release sequence.
            // A grant otherwise: Acquire (for the readers we grant) pairs
            // with the Release of the last write unlock. Either way the
            // grantees synchronise with us through their state words.
            // Waking to compete without unlocking only drops WAITERS:
            // Relaxed (it changes under wait_lock; the woken readers'
            // own probes acquire).
            let ord = if unlocking {
                Release
            } else if grant {
                Acquire
            } else {
                Relaxed
            };
            match self.count.compare_exchange_weak(c, new, ord, Relaxed) {
                Ok(_) => break grant,
                Err(now) => c = now,
            }
        };
        if !grant {
            // SAFETY: caller holds wait_lock; head is linked.
            unsafe { self.wake_readers_to_compete(head, n) };
            return;
        }
        // Owner hint: the first grantee; RD_NONSPINNABLE if it saw it at
        // slow-path entry (adaptive), else cleared.
        let rd = if h.saw_rd && self.adaptive_enabled() {
            #[cfg(loom)]
            Probe::hit(&self.probe.rd_set_by_reader);
            RD_NONSPINNABLE
        } else {
            0
        };
        self.owner.store(h.id | READER_OWNED | rd, Relaxed);
        // Unlink and grant.
        let mut p = head;
        let mut granted = 0;
        let mut asleep = false;
        while !p.is_null() && granted < n {
            // SAFETY: linked waiters are alive. A granted reader may return
            // as soon as it sees W_GRANTED, so the swap below is our last
            // access to it; sleepers are woken through `rgate`, after
            // wait_lock is released (wake_later_n).
            let w = unsafe { &*p };
            let next = w.links.next();
            if w.role == Role::Reader {
                unsafe { self.list_remove(p) };
                #[cfg(loom)]
                let t = w.thread.clone();
                // Release pairs with the reader's Acquire load of its state.
                asleep |= w.state.swap(W_GRANTED, Release) == W_PARKED;
                #[cfg(loom)]
                t.unpark();
                granted += 1;
            }
            p = next;
        }
        if asleep {
            // After every mark: a sleeper that read the gate before this
            // bump finds it changed or is woken (Release pairs with its
            // Acquire gate load in `park`). One FUTEX_WAKE for the group,
            // not one per reader (see the module docs).
            self.rgate.fetch_add(1, Release);
            wake_later_n(futex_addr(&self.rgate), u32::MAX >> 1);
        }
        events::add(Event::RwsemWakeReaders, n);
        #[cfg(loom)]
        {
            Probe::hit(&self.probe.grants);
            self.probe
                .max_group
                .fetch_max(n as u32, core::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Unlink the first `n` queued readers from `head` on and wake them to
    /// compete for the lock (state `W_RETRY`), without granting it: the
    /// lock stays with threads that run, instead of being held for readers
    /// until the scheduler gets to them.
    ///
    /// # Safety
    /// The caller holds wait_lock; `head` is a linked reader.
    unsafe fn wake_readers_to_compete(&self, head: *const Waiter, n: u64) {
        let mut p = head;
        let mut woken = 0;
        let mut asleep = false;
        while !p.is_null() && woken < n {
            // SAFETY: linked waiters are alive; as in grant_readers, the
            // swap is our last access to a reader.
            let w = unsafe { &*p };
            let next = w.links.next();
            if w.role == Role::Reader {
                unsafe { self.list_remove(p) };
                woken += 1;
                if self.is_broken(broken::COMPETE_NO_WAKE) {
                    p = next;
                    continue;
                }
                #[cfg(loom)]
                let t = w.thread.clone();
                // Release pairs with the reader's Acquire load of its state
                // (it learns it was unlinked).
                asleep |= w.state.swap(W_RETRY, Release) == W_PARKED;
                #[cfg(loom)]
                t.unpark();
            }
            p = next;
        }
        if asleep {
            // As in grant_readers: one FUTEX_WAKE for the group.
            self.rgate.fetch_add(1, Release);
            wake_later_n(futex_addr(&self.rgate), u32::MAX >> 1);
        }
        events::add(Event::RwsemWakeCompete, n);
        #[cfg(loom)]
        Probe::hit(&self.probe.compete_wakes);
    }

    /// The first queued reader, if a writer is at the front (`head`),
    /// that writer has not demanded a hand-off, and the reader has waited
    /// at least [`reader_wait_ns`] (at most [`wait_timeout_ns`]); else null.
    /// A write unlock then grants the readers past that writer: writers
    /// stealing the lock from the front writer would otherwise starve every
    /// reader behind it until the front writer's own wait timeout.
    ///
    /// # Safety
    /// The caller holds wait_lock; `head` is the linked first waiter.
    pub(super) unsafe fn starving_reader(&self, head: *const Waiter) -> *const Waiter {
        if self.is_broken(broken::NO_READER_BOUND) || self.count.load(Relaxed) & HANDOFF != 0 {
            return core::ptr::null();
        }
        // SAFETY: caller's contract; linked waiters are alive.
        let mut p = unsafe { &*head }.links.next();
        while !p.is_null() {
            // SAFETY: as above.
            let w = unsafe { &*p };
            if w.role == Role::Reader {
                let bound = self.wait_timeout().min(self.reader_wait());
                if monotonic_ns().saturating_sub(w.since) >= bound {
                    return p;
                }
                break;
            }
            p = w.links.next();
        }
        core::ptr::null()
    }
}
