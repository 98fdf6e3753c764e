//! Optimistic spinning, for readers and writers: whether a locker may
//! spin, marking the lock nonspinnable, and the spin loop itself (see the
//! [module docs](super)).

#[cfg(loom)]
use super::Probe;
use super::{
    broken, readers_of, rspin_threshold_ns, tid_of, RawRwSemWith, Role, HANDOFF, MAX_OWNER_BUDGETS,
    NONSPINNABLE, OWNER_MASK, RD_NONSPINNABLE, READER_BIAS, READER_MASK, READER_OWNED,
    WRITER_LOCKED, WR_NONSPINNABLE,
};
use crate::events::{self, Event};
use crate::oncpu;
use crate::ownerspin::{OwnerSpin, SpinStop};
use crate::spin::{cpu_relax, quick_poll};
use crate::sync::Ordering::{Acquire, Relaxed};
use crate::sys::monotonic_ns;
use crate::thread;
use crate::waitlock::WaitLockRaw;

/// Why optimistic spinning stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpinFail {
    /// A nonspinnable bit for our role, a hand-off, or the owner is off CPU.
    NotSpinnable,
    /// Budget, deadline, or we should yield.
    Budget,
    /// A writer's time on a reader-owned lock ran out (bits set).
    ReaderTimeout,
}

impl<const RSPIN: u8, const ADAPTIVE: u8, W: WaitLockRaw> RawRwSemWith<RSPIN, ADAPTIVE, W> {
    // ------------------------------------------------------------------
    // Spinning.
    // ------------------------------------------------------------------

    /// Whether a `role` locker may start spinning: no nonspinnable bit for
    /// its role, and a writer owner not known to be off CPU.
    pub(super) fn can_spin(&self, role: Role) -> bool {
        let o = self.owner.load(Relaxed);
        let bit = if role == Role::Writer {
            WR_NONSPINNABLE
        } else {
            RD_NONSPINNABLE
        };
        if o & bit != 0 {
            return false;
        }
        let c = self.count.load(Relaxed);
        if c & WRITER_LOCKED != 0 && o & READER_OWNED == 0 && o & OWNER_MASK != 0 {
            return oncpu::oracle().owner_running(tid_of(o & OWNER_MASK)) != Some(false);
        }
        true
    }

    /// Set both nonspinnable bits, only while the lock is reader-owned.
    /// Returns whether this call set them.
    pub(super) fn set_nonspinnable(&self) -> bool {
        let mut o = self.owner.load(Relaxed);
        loop {
            if o & READER_OWNED == 0 || o & NONSPINNABLE == NONSPINNABLE {
                return false;
            }
            let c = self.count.load(Relaxed);
            if c & WRITER_LOCKED != 0 || c & READER_MASK == 0 {
                return false;
            }
            // Relaxed: a hint. The CAS fails if any owner changed it.
            match self
                .owner
                .compare_exchange_weak(o, o | NONSPINNABLE, Relaxed, Relaxed)
            {
                Ok(_) => {
                    #[cfg(loom)]
                    Probe::hit(&self.probe.nospin_sets);
                    return true;
                }
                Err(now) => o = now,
            }
        }
    }

    /// A few read-only polls of the count before the full optimistic
    /// spin, for a new locker that found the lock held: most contended
    /// critical sections end within them, and the lock is then taken with
    /// the probe that spinning would use (`try_read_unqueued` or
    /// `try_write`), without the OSQ, the clock or the owner's oracle.
    /// With one reader and one writer on two CPUs (`rwsem-rate`, 2
    /// threads) spinning took 39% of all acquisitions through the OSQ,
    /// whose lock and unlock are two more RMWs on the count's cache line
    /// and the spin's two clock reads; these polls take nearly all of them
    /// instead (see `docs/locks/rwsem.md` for the figures).
    ///
    /// Only while no hand-off is pending (`HANDOFF`). Queued waiters do
    /// not stop the polls: the full spin's probes take the lock past them
    /// too (the kernel's optimistic spinners do), so the polls change no
    /// rule, only the cost. With 16 threads on 2 CPUs waiters were queued
    /// nearly all the time, and polls that stopped at `WAITERS` were never
    /// used: every contended locker went through the OSQ. In one A/B of
    /// three rounds letting them run raised `rwsem-rate` at 16 threads by
    /// about a fifth; a second put the difference within the spread of
    /// the runs (see `docs/locks/rwsem.md`). The caller has checked the
    /// nonspinnable bit of its role.
    ///
    /// Returns the count that our successful RMW read (the readers' add,
    /// the writers' CAS), or `None`.
    #[inline]
    pub(super) fn quick_spin(&self, me: usize, role: Role) -> Option<u64> {
        #[cfg(loom)]
        if self
            .loom_no_quick_spin
            .load(core::sync::atomic::Ordering::Relaxed)
        {
            return None;
        }
        // One probe: a lost race means real contention.
        let mut seen = None;
        quick_poll(|| {
            let c = self.count.load(Relaxed);
            if c & HANDOFF != 0 {
                return Some(false);
            }
            seen = match role {
                Role::Reader if c & WRITER_LOCKED == 0 => {
                    if self.is_broken(broken::QUICK_TRUSTS_POLL) {
                        // BROKEN (loom only): keeps the probe unchecked.
                        Some(self.count.fetch_add(READER_BIAS, Acquire))
                    } else {
                        self.try_read_unqueued_from(me)
                    }
                }
                Role::Writer if c & (WRITER_LOCKED | READER_MASK) == 0 => {
                    self.try_write_from(false)
                }
                _ => return None,
            };
            Some(seen.is_some())
        });
        if seen.is_some() {
            events::inc(Event::RwsemSpinQuick);
            #[cfg(loom)]
            Probe::hit(&self.probe.quick_spins);
        }
        seen
    }

    /// Optimistic spinning. New lockers (`queued == false`) go through the
    /// OSQ; a woken first waiter (a writer, `queued == true`) spins
    /// directly and may take a `HANDOFF`-reserved lock, but only on a
    /// writer owner. Returns, if we got the lock, the count our taking RMW
    /// read (owner word not yet updated by us, except for readers).
    #[inline(never)]
    pub(super) fn optimistic_spin(
        &self,
        me: usize,
        role: Role,
        queued: bool,
        deadline: Option<u64>,
    ) -> Option<u64> {
        let slot = if queued {
            None
        } else {
            match thread::current() {
                Some(s) => Some(s),
                None => return None,
            }
        };
        let nonspin = if role == Role::Writer {
            WR_NONSPINNABLE
        } else {
            RD_NONSPINNABLE
        };
        let mut spin = OwnerSpin::begin(&self.spin, MAX_OWNER_BUDGETS, deadline);

        if let Some(slot) = slot {
            if !self.osq.lock_with(slot, || spin.queued_poll()) {
                events::inc(Event::RwsemOptFail);
                return None;
            }
        }

        // Some(end) while a writer spins on a reader-owned lock.
        let mut reader_phase_end: Option<u64> = None;
        let result = loop {
            let c = self.count.load(Relaxed);
            let o = self.owner.load(Relaxed);
            if o & nonspin != 0 {
                break Err(SpinFail::NotSpinnable);
            }
            if c & HANDOFF != 0 && !queued {
                // Reserved for the first waiter: spinning cannot win.
                break Err(SpinFail::NotSpinnable);
            }
            let got = match role {
                Role::Writer if c & (WRITER_LOCKED | READER_MASK) == 0 => {
                    self.try_write_from(queued)
                }
                Role::Reader if c & (WRITER_LOCKED | HANDOFF) == 0 => {
                    self.try_read_unqueued_from(me)
                }
                _ => None,
            };
            if let Some(seen) = got {
                break Ok(seen);
            }
            let due = spin.tick();
            if c & WRITER_LOCKED != 0 {
                reader_phase_end = None;
                let owner = if o & READER_OWNED == 0 {
                    o & OWNER_MASK
                } else {
                    0
                };
                let asked = (owner != 0).then(|| tid_of(owner));
                match spin.poll_owner(asked, due) {
                    Ok(()) => {}
                    Err(SpinStop::OwnerSleeping) => break Err(SpinFail::NotSpinnable),
                    Err(_) => break Err(SpinFail::Budget),
                }
            } else if c & READER_MASK != 0 && role == Role::Writer {
                if queued {
                    // The first waiter sleeps through read phases: the
                    // last reader wakes it.
                    break Err(SpinFail::Budget);
                }
                match reader_phase_end {
                    None => {
                        // A new read phase: a fresh threshold.
                        reader_phase_end =
                            Some(monotonic_ns().saturating_add(rspin_threshold_ns(readers_of(c))));
                    }
                    Some(end) if due => match spin.clock() {
                        Err(_) => break Err(SpinFail::Budget),
                        Ok(now) if now >= end => {
                            if self.set_nonspinnable() {
                                events::inc(Event::RwsemOptNospin);
                            }
                            break Err(SpinFail::ReaderTimeout);
                        }
                        Ok(_) => {}
                    },
                    Some(_) => {}
                }
            } else if due {
                // Free but another thread was quicker (or a reader probe
                // lost a race): retry within the total budget.
                match spin.clock() {
                    Ok(now) if now < spin.total_end() => {}
                    _ => break Err(SpinFail::Budget),
                }
            }
            cpu_relax();
        };
        if let Some(slot) = slot {
            self.osq.unlock_with(slot);
        }
        match result {
            Ok(seen) => {
                spin.succeeded(&self.spin);
                events::inc(Event::RwsemOptLock);
                #[cfg(loom)]
                Probe::hit(&self.probe.spin_successes);
                Some(seen)
            }
            Err(f) => {
                let _ = f;
                events::inc(Event::RwsemOptFail);
                None
            }
        }
    }
}
