//! The rw-semaphore's write slow paths: the write unlock with waiters
//! queued, the write trylock, and the contended write lock (spinning,
//! sleeping, the hand-off request) (see the [module docs](super)).

#[cfg(loom)]
use super::Probe;
use super::{
    broken, tid_of, RawRwSemWith, Role, Waiter, FRONT_READER, HANDOFF, NONSPINNABLE,
    RD_NONSPINNABLE, READER_MASK, WAITERS, WRITER_LOCKED, WRITER_WOKEN, WR_NONSPINNABLE, W_WAITING,
    W_WOKEN,
};
use crate::events::{self, Event};
use crate::oncpu;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use crate::sys::monotonic_ns;
use crate::waitlist::{AbortOnUnwind, Links};
use crate::waitlock::WaitLockRaw;

/// The count a successful write trylock wrote over the count `c` it
/// read (`(0,0,F) -> (0,1,F-HANDOFF)`).
#[inline(always)]
pub(super) fn try_write_wrote(c: u64) -> u64 {
    (c | WRITER_LOCKED) & !HANDOFF
}

impl<const RSPIN: u8, const ADAPTIVE: u8, W: WaitLockRaw> RawRwSemWith<RSPIN, ADAPTIVE, W> {
    /// Write unlock when the guard's hint was unknown or wrong.
    /// `(0,1,F) -> (0,0,F)` by CAS from a fresh load, unless a reader is at
    /// the front (`FRONT_READER`) or readers may be granted past a front
    /// writer: the unlock must then grant the lock to them without ever
    /// letting it fall free (a writer could take it between a plain
    /// release and the wake-up), so it goes through wait_lock. Release
    /// pairs with the next acquirer's Acquire.
    #[cold]
    #[inline(never)]
    pub(super) fn write_unlock_slow(&self, mut c: u64) {
        loop {
            if cfg!(debug_assertions) {
                assert!(
                    c & WRITER_LOCKED != 0,
                    "klock::RwSem: write unlock of a lock not write-locked (count {c:#x})"
                );
            }
            if c & WAITERS != 0 && (c & FRONT_READER != 0 || self.reader_wait() != u64::MAX) {
                // Through wait_lock only when a grant may be due: a reader
                // at the front (or readers may be granted past a front
                // writer). A writer at the front is woken after a plain
                // release, without holding the lock longer.
                self.write_unlock_queued();
                return;
            }
            // (0,1,F) -> (0,0,F). Release as above. The CAS fails if a
            // reader came to the front since the load.
            match self
                .count
                .compare_exchange_weak(c, c - WRITER_LOCKED, Release, Relaxed)
            {
                Ok(_) => {
                    // A front writer already woken looks at the lock again
                    // after this RMW (it clears WRITER_WOKEN with an RMW
                    // before its trylock): no second wake-up, and no
                    // wait_lock round trip.
                    if c & (WAITERS | WRITER_WOKEN) == WAITERS {
                        self.unlock_wake();
                    }
                    return;
                }
                Err(now) => c = now,
            }
        }
    }

    /// Write unlock with waiters queued (the kernel's `rwsem_mark_wake`
    /// done at release time). Under `wait_lock`, still holding the lock:
    /// * readers at the front: our release and their grant are **one**
    ///   RMW, `(0,1,F) -> (n,0,F-HANDOFF[-W])`, so the lock never falls
    ///   free and no writer can slip in before the woken readers, who
    ///   return owning it;
    /// * a writer at the front: a plain release, then the writer is woken
    ///   to compete (writers may steal from writers; its `HANDOFF` bounds
    ///   that).
    #[cold]
    #[inline(never)]
    fn write_unlock_queued(&self) {
        self.wl_lock();
        // SAFETY: we hold wait_lock; linked waiters are alive.
        let head = unsafe { self.list_head() };
        let reader = if head.is_null() || unsafe { &*head }.role == Role::Reader {
            head
        } else {
            // SAFETY: we hold wait_lock; head is linked.
            unsafe { self.starving_reader(head) }
        };
        if !reader.is_null() {
            // SAFETY: we hold wait_lock and the write lock; reader is the
            // first queued reader.
            unsafe { self.grant_readers(reader, true) };
            events::inc(if reader == head {
                Event::RwsemUnlockGrant
            } else {
                Event::RwsemUnlockGrantSkip
            });
        } else {
            // (0,1,F) -> (0,0,F). Release as in raw_unlock_exclusive.
            let old = self.count.fetch_sub(WRITER_LOCKED, Release);
            if cfg!(debug_assertions) {
                assert!(
                    old & WRITER_LOCKED != 0,
                    "klock::RwSem: write unlock of a lock not write-locked (count {old:#x})"
                );
            }
            // SAFETY: we hold wait_lock.
            unsafe { self.wake_front(true) };
        }
        // SAFETY: we hold wait_lock.
        unsafe { self.wl_unlock() };
    }

    /// Write trylock: `(0,0,F) -> (0,1,F-HANDOFF)`; refused while readers or
    /// a writer hold it, or while `HANDOFF` reserves it for the first waiter
    /// (unless `first`: we are that waiter).
    #[inline]
    pub(super) fn try_write(&self, first: bool) -> bool {
        self.try_write_from(first).is_some()
    }

    /// [`try_write`](Self::try_write), returning the count before our CAS
    /// on success.
    #[inline]
    pub(super) fn try_write_from(&self, first: bool) -> Option<u64> {
        self.try_write_at(first, self.count.load(Relaxed))
    }

    /// [`try_write_from`](Self::try_write_from) starting from `c`, a count
    /// just read (by a failed CAS), instead of loading it again.
    #[inline]
    pub(super) fn try_write_at(&self, first: bool, mut c: u64) -> Option<u64> {
        let ignore_handoff = self.is_broken(broken::IGNORE_HANDOFF);
        loop {
            if c & (WRITER_LOCKED | READER_MASK) != 0 {
                return None;
            }
            if c & HANDOFF != 0 && !first && !ignore_handoff {
                return None;
            }
            // Acquire pairs with the Release of the previous unlock (all
            // later writes are RMWs: the release sequence holds).
            match self.count.compare_exchange_weak(
                c,
                (c | WRITER_LOCKED) & !HANDOFF,
                Acquire,
                Relaxed,
            ) {
                Ok(_) => return Some(c),
                Err(now) => c = now,
            }
        }
    }

    /// Contended write lock: `None` only when `deadline` passed, else the
    /// count our taking CAS wrote (0 if not known: the queued path), for
    /// the guard's hint.
    #[cold]
    #[inline(never)]
    pub(super) fn write_slow(&self, me: usize, deadline: Option<u64>) -> Option<u64> {
        if cfg!(debug_assertions) && deadline.is_none() {
            let (c, o) = (self.count.load(Relaxed), self.owner.load(Relaxed));
            assert!(
                c & WRITER_LOCKED == 0 || o & !NONSPINNABLE != me,
                "klock::RwSem: thread {} write-locks a lock it already holds (deadlock)",
                tid_of(me)
            );
        }
        if let Some(c) = self.try_write_from(false) {
            self.owner.store(me, Relaxed);
            return Some(try_write_wrote(c));
        }
        if oncpu::spinning_useful() && self.can_spin(Role::Writer) {
            let got = self
                .quick_spin(me, Role::Writer)
                .or_else(|| self.optimistic_spin(me, Role::Writer, false, deadline));
            if let Some(c) = got {
                // Spinning worked: this locker saw no reason to stop readers.
                self.owner.store(me, Relaxed);
                return Some(try_write_wrote(c));
            }
        }
        let saw_wr = self.owner.load(Relaxed) & WR_NONSPINNABLE != 0;
        self.write_sleep(me, saw_wr, deadline).then_some(0)
    }

    /// Record the slow-path writer as owner: `me`, plus `RD_NONSPINNABLE`
    /// if it saw `WR_NONSPINNABLE` after failing to spin (adaptive on).
    fn set_writer_owned_slow(&self, me: usize, saw_wr: bool) {
        let rd = if saw_wr && self.adaptive_enabled() {
            #[cfg(loom)]
            Probe::hit(&self.probe.rd_set_by_writer);
            RD_NONSPINNABLE
        } else {
            0
        };
        self.owner.store(me | rd, Relaxed);
    }

    /// Queue as a writer: sleep until we own the lock (`true`) or
    /// `deadline` passes (`false`).
    #[inline(never)]
    fn write_sleep(&self, me: usize, saw_wr: bool, deadline: Option<u64>) -> bool {
        let waiter = Waiter {
            state: AtomicU32::new(W_WAITING),
            links: Links::new(),
            id: me,
            role: Role::Writer,
            saw_rd: false,
            since: 0,
            gen: crate::thread::fork_generation(),
            #[cfg(loom)]
            thread: loom::thread::current(),
        };
        let wp: *const Waiter = &waiter;
        let spin = oncpu::spinning_useful();

        self.wl_lock();
        if self.try_write(false) {
            // SAFETY: we hold wait_lock.
            unsafe { self.wl_unlock() };
            self.set_writer_owned_slow(me, saw_wr);
            return true;
        }
        // SAFETY (list accesses below): as in read_sleep.
        let bomb = AbortOnUnwind("RwSem");
        if unsafe { self.list_push(wp) } {
            // First in the queue, a writer: as in read_sleep (the list
            // was empty, so FRONT_READER is clear).
            self.count.fetch_or(WAITERS, Relaxed);
        }
        let start = monotonic_ns();
        let timeout = self.wait_timeout();
        let mut first = false;
        let mut handoff_set = false;

        let acquired = loop {
            // Holding wait_lock.
            if !first {
                first = unsafe { self.list_head() } == wp;
            }
            if cfg!(any(debug_assertions, loom)) {
                assert!(
                    self.count.load(Relaxed) & WAITERS != 0,
                    "klock::RwSem: writer queued but WAITERS clear"
                );
            }
            if first && !handoff_set && monotonic_ns().saturating_sub(start) >= timeout {
                // Relaxed: unlockers read it with their RMW and then
                // serialise with us on wait_lock.
                self.count.fetch_or(HANDOFF, Relaxed);
                handoff_set = true;
                events::inc(Event::RwsemWlockHandoff);
                #[cfg(loom)]
                Probe::hit(&self.probe.handoff_requests);
            }
            // Re-arm before the trylock: a later unlock wakes us (under
            // wait_lock, so after this store).
            waiter.state.store(W_WAITING, Relaxed);
            // Only the front writer is woken. Drop WRITER_WOKEN before the
            // trylock, by an RMW: an unlock ordered before it is seen by
            // the trylock, one after it sees the bit clear and wakes us.
            if first
                && self.count.load(Relaxed) & WRITER_WOKEN != 0
                && !self.is_broken(broken::WOKEN_NEVER_CLEARED)
            {
                self.count.fetch_and(!WRITER_WOKEN, Relaxed);
            }
            if self.try_write(first) {
                break true;
            }
            if deadline.is_some_and(|d| monotonic_ns() >= d) {
                break false;
            }
            // SAFETY: we hold wait_lock.
            unsafe { self.wl_unlock() };
            // Passing readers can keep the lock read-held for as long as
            // they overlap, and only the last one's unlock would wake us:
            // the first waiter sleeps no longer than its hand-off bound,
            // then sets HANDOFF above. A writer behind it wakes as often,
            // to find out whether it has become first. It becomes first
            // when the waiter ahead takes the lock, leaves, or (readers) is
            // granted it, and is then woken only by `wake_front` while the
            // lock is free or by the last read unlock, both of which
            // passing readers can hold off (without this, every writer
            // slept through whole runs of `rwsem-dedicated`). One bounded
            // sleep here covers every way of becoming first, at one
            // wake-up per bound per queued writer, and only with passing
            // on. (Not under loom: no clock to wait for; the models check
            // HANDOFF itself.)
            let wake_by = if cfg!(not(loom)) && !handoff_set && self.reader_pass_enabled() {
                let due = if first {
                    start.saturating_add(timeout)
                } else {
                    monotonic_ns().saturating_add(timeout)
                };
                Some(deadline.map_or(due, |d| d.min(due)))
            } else {
                deadline
            };
            self.park_counted(&waiter, wake_by, Event::RwsemSleepWriter);
            // Only the front waiter is ever woken; a woken writer is first
            // and stays first (waiters ahead can only leave).
            if !first && waiter.state.load(Relaxed) == W_WOKEN {
                first = true;
            }
            if first
                && (self.try_write(true)
                    || (spin
                        && self
                            .optimistic_spin(me, Role::Writer, true, deadline)
                            .is_some()))
            {
                self.wl_lock();
                break true;
            }
            self.wl_lock();
        };

        // Holding wait_lock: unlink ourselves.
        if acquired {
            // A HANDOFF of ours was cleared by our trylock's CAS; a
            // WRITER_WOKEN is ours (we are first) and goes now.
            let clear = if unsafe { self.list_remove(wp) } {
                WAITERS | HANDOFF | WRITER_WOKEN | FRONT_READER
            } else {
                WRITER_WOKEN
            };
            if self.count.load(Relaxed) & clear != 0 {
                // Relaxed: these flags only change under wait_lock.
                self.count.fetch_and(!clear, Relaxed);
            }
        } else {
            // SAFETY: we hold wait_lock and are linked.
            unsafe { self.leave(wp) };
            #[cfg(loom)]
            Probe::hit(&self.probe.timeouts);
        }
        // SAFETY: we hold wait_lock.
        unsafe { self.wl_unlock() };
        core::mem::forget(bomb);
        if acquired {
            self.set_writer_owned_slow(me, saw_wr);
            events::inc(Event::RwsemWlock);
        }
        acquired
    }
}
