//! The PI mutex's slow paths: waiting in userspace, the top-waiter spin,
//! and locking and unlocking through the kernel (`FUTEX_LOCK_PI2` /
//! `FUTEX_UNLOCK_PI`, or the loom model of them); see the
//! [module docs](super).

#[cfg(loom)]
use super::Probe;
use super::{
    force_lock_pi_fallback, KErr, RawRtMutexWith, RtMutexError, MAX_RUNNING_BUDGETS,
    SPIN_FAIL_STREAK, SPIN_PROBE_EVERY, TID_MASK, WAITERS,
};
#[cfg(not(loom))]
use super::{user_wait_ns, uses_lock_pi2};
use crate::events::{self, Event};
use crate::oncpu;
use crate::ownerspin::{OwnerSpin, SpinStop};
use crate::spin::cpu_relax;
use crate::sync::Ordering::{AcqRel, Acquire, Relaxed, Release};
#[cfg(not(loom))]
use crate::sys;
use crate::sys::monotonic_ns;
#[cfg(not(loom))]
use std::time::Duration;

/// Why top-waiter spinning stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpinFail {
    /// A waiter queued in the kernel: we are no longer the top waiter.
    WaiterQueued,
    /// The owner is off CPU, the budget or the deadline ran out, or the
    /// spinner should yield.
    Stopped(SpinStop),
}

impl<const SPIN: u8> RawRtMutexWith<SPIN> {
    /// Contended lock: top-waiter spin, then the kernel.
    #[cold]
    #[inline(never)]
    pub(super) fn lock_slow(&self, me: u32, deadline: Option<u64>) -> Result<(), RtMutexError> {
        if self.word.load(Relaxed) & TID_MASK == me {
            // Self-deadlock: let the kernel say EDEADLK.
            return self.kernel_lock(me, deadline);
        }
        if self.spin_enabled()
            && oncpu::spinning_useful()
            && self.spin_worth_trying()
            && self.top_waiter_spin(me, deadline)
        {
            return Ok(());
        }
        if self.user_wait_enabled() && !caller_is_realtime() && self.user_wait(me, deadline)? {
            return Ok(());
        }
        self.kernel_lock(me, deadline)
    }

    /// Wait in userspace (a non-real-time contender; see the module docs).
    /// `Ok(true)`: we took the lock; `Ok(false)`: go to the kernel (waited
    /// [`user_wait_ns`]).
    #[cold]
    #[inline(never)]
    fn user_wait(&self, me: u32, deadline: Option<u64>) -> Result<bool, RtMutexError> {
        let limit = monotonic_ns().saturating_add(self.user_wait_ns());
        // Register. An RMW (AcqRel) so that it is ordered, in `parked`'s
        // modification order, against the RMW every unlocker makes after
        // releasing the word (`wake_parked_after_unlock`): either that
        // unlocker counts us and wakes one waiter, or its RMW comes first,
        // synchronises with ours, and the word we read below is the one it
        // released (or later).
        self.parked.fetch_add(1, AcqRel);
        let outcome = loop {
            // Read the wake count before the word: a wake after this read
            // changes it, so the FUTEX_WAIT below returns at once. Acquire
            // pairs with the waker's Release bump (made after it released
            // the word), so a bump seen here makes that release visible.
            let seq = self.park_seq.load(Acquire);
            let w = self.word.load(Relaxed);
            let owner = w & TID_MASK;
            // owner != me: lock_slow sent a self-deadlock to the kernel.
            if owner == 0 {
                // (0, 0) -> (me, p): free, and no kernel waiter is queued
                // (the kernel would have named it). Keep WAITERS set if
                // others wait here, so that our unlock wakes one. Acquire
                // pairs with the Release of the last unlock.
                let others = self.parked.load(Relaxed) > 1;
                let new = me | if others { WAITERS } else { 0 };
                if self.word.compare_exchange(w, new, Acquire, Relaxed).is_ok() {
                    break Ok(true);
                }
                continue;
            }
            // (X, 0) -> (X, 1): make X's unlock take the slow path, which
            // wakes us. Relaxed: ordering comes from `parked` (above).
            if w & WAITERS == 0
                && self
                    .word
                    .compare_exchange(w, w | WAITERS, Relaxed, Relaxed)
                    .is_err()
            {
                continue;
            }
            let now = monotonic_ns();
            if deadline.is_some_and(|d| now >= d) {
                break Err(RtMutexError::TimedOut);
            }
            if now >= limit {
                events::inc(Event::RtUserWaitExpired);
                #[cfg(loom)]
                Probe::hit(&self.probe.user_wait_expired);
                break Ok(false);
            }
            events::inc(Event::RtUserPark);
            #[cfg(loom)]
            Probe::hit(&self.probe.user_parks);
            self.park_wait(seq, deadline.unwrap_or(u64::MAX).min(limit) - now);
        };
        let left = self.parked.fetch_sub(1, AcqRel) - 1;
        if !matches!(outcome, Ok(true)) && left > 0 {
            // We may have consumed the wake meant to keep the others going;
            // pass it on (a spare wake-up costs a futex call, a lost one a
            // stranded waiter).
            self.wake_parked();
        }
        #[cfg(loom)]
        if outcome == Err(RtMutexError::TimedOut) {
            Probe::hit(&self.probe.timeouts);
        }
        outcome
    }

    /// The userspace wait limit.
    #[inline]
    fn user_wait_ns(&self) -> u64 {
        #[cfg(loom)]
        return crate::sync::loom_tunable(&self.loom_user_wait_ns, || u64::MAX);
        #[cfg(not(loom))]
        user_wait_ns()
    }

    /// Sleep on `park_seq` while it reads `seq`, at most `ns`.
    #[cfg(not(loom))]
    fn park_wait(&self, seq: u32, ns: u64) {
        let _ = sys::futex_wait(&self.park_seq, seq, Some(Duration::from_nanos(ns)));
    }

    /// Loom: block until woken when there is no limit (a lost wake-up is a
    /// loom deadlock), else yield (the limit or deadline ends the wait).
    #[cfg(loom)]
    fn park_wait(&self, seq: u32, ns: u64) {
        if ns >= u64::MAX / 2 {
            self.park.wait(&self.park_seq, seq);
        } else {
            loom::thread::yield_now();
        }
    }

    /// Wake one userspace waiter. Release pairs with the waiter's Acquire
    /// read of `park_seq`.
    fn wake_parked(&self) {
        self.park_seq.fetch_add(1, Release);
        events::inc(Event::RtUserWake);
        #[cfg(not(loom))]
        sys::futex_wake(&self.park_seq, 1);
        #[cfg(loom)]
        self.park.wake();
    }

    /// After an unlock through the kernel: wake one userspace waiter if
    /// any. The RMW (not a load) is what orders this check against a
    /// waiter's registration (see [`Self::user_wait`]).
    #[inline]
    fn wake_parked_after_unlock(&self) {
        #[cfg(loom)]
        if self
            .loom_broken_wake
            .load(core::sync::atomic::Ordering::Relaxed)
        {
            // BROKEN (loom only): forget the userspace waiters.
            return;
        }
        if self.parked.fetch_add(0, AcqRel) > 0 {
            self.wake_parked();
        }
    }

    /// Adaptive disabling (see [`SPIN_FAIL_STREAK`]).
    #[inline]
    fn spin_worth_trying(&self) -> bool {
        use core::sync::atomic::Ordering::Relaxed;
        if self.fail_streak.load(Relaxed) < SPIN_FAIL_STREAK {
            return true;
        }
        let probe = self.skips.fetch_add(1, Relaxed) % SPIN_PROBE_EVERY == SPIN_PROBE_EVERY - 1;
        if !probe {
            events::inc(Event::RtSpinSkipped);
        }
        probe
    }

    /// Spin on a running owner while we are the would-be top waiter.
    /// Returns whether we took the lock.
    #[inline(never)]
    fn top_waiter_spin(&self, me: u32, deadline: Option<u64>) -> bool {
        let w = self.word.load(Relaxed);
        // WAITERS already set: the kernel leaves it set after every
        // hand-over, so it does not tell whether anybody is queued now. We
        // may spin on the current owner, but only on it: if it hands the
        // lock to a kernel waiter (the owner changes and WAITERS stays), that
        // waiter is the top waiter and we stop. If nobody is queued, its
        // UNLOCK_PI writes 0 and we take the lock — which breaks the
        // hand-over convoy that a stale WAITERS bit would otherwise keep up.
        let waiters_at_start = w & WAITERS != 0;
        let first_owner = w & TID_MASK;
        // Claim the spinner slot: 0 -> me. Relaxed: the slot only decides
        // who spins; the lock itself is taken by an Acquire CAS.
        if self
            .spinner
            .compare_exchange(0, me, Relaxed, Relaxed)
            .is_err()
        {
            // Somebody else spins and will be the top waiter: queue in the
            // kernel (setting WAITERS stops that spinner too, and the kernel
            // orders us both by priority).
            events::inc(Event::RtSpinBusy);
            return false;
        }
        #[cfg(loom)]
        let _one = self.probe.enter_spin();

        let mut spin = OwnerSpin::begin(&self.spin, MAX_RUNNING_BUDGETS, deadline)
            .with_hard_cap(MAX_RUNNING_BUDGETS);
        let result = loop {
            let w = self.word.load(Relaxed);
            let owner = w & TID_MASK;
            if w & WAITERS != 0 && (!waiters_at_start || owner != first_owner) {
                // A waiter queued (WAITERS appeared), or the owner handed
                // the lock to a kernel waiter: we are not the top waiter.
                break Err(SpinFail::WaiterQueued);
            }
            if w == 0 {
                // (0, 0) -> (me, 0). Acquire pairs with the owner's Release
                // CAS. No waiter is queued (the word would carry WAITERS and
                // a hand-over tid), so this steals from nobody.
                if self.word.compare_exchange(0, me, Acquire, Relaxed).is_ok() {
                    break Ok(());
                }
                continue;
            }
            // Every new owner gets a fresh budget, up to the hard cap; an
            // owner known to run is spun on past its budget (up to the cap).
            if let Err(stop) = spin.poll((owner != 0).then_some(owner)) {
                break Err(SpinFail::Stopped(stop));
            }
            cpu_relax();
        };
        #[cfg(loom)]
        drop(_one);
        // Free the slot. Relaxed: see the claim above.
        self.spinner.store(0, Relaxed);
        match result {
            Ok(()) => {
                self.fail_streak
                    .store(0, core::sync::atomic::Ordering::Relaxed);
                spin.succeeded(&self.spin);
                events::inc(Event::RtSpinSuccess);
                #[cfg(loom)]
                {
                    Probe::hit(&self.probe.spin_successes);
                    if waiters_at_start {
                        Probe::hit(&self.probe.spin_successes_past_waiters);
                    }
                }
                true
            }
            Err(f) => {
                // Every failed spin counts, also the ones a queued waiter
                // ended: under a hand-over convoy (waiters always queued)
                // they keep failing and only burn CPU.
                let s = self.fail_streak.load(core::sync::atomic::Ordering::Relaxed);
                self.fail_streak.store(
                    (s + 1).min(SPIN_FAIL_STREAK),
                    core::sync::atomic::Ordering::Relaxed,
                );
                events::inc(match f {
                    SpinFail::WaiterQueued => Event::RtSpinFailWaiterQueued,
                    SpinFail::Stopped(SpinStop::OwnerSleeping) => Event::RtSpinFailOwnerSleeping,
                    SpinFail::Stopped(SpinStop::Budget) => Event::RtSpinFailBudget,
                    SpinFail::Stopped(SpinStop::Yield) => Event::RtSpinFailYield,
                });
                #[cfg(loom)]
                if f == SpinFail::WaiterQueued {
                    Probe::hit(&self.probe.spin_stopped_by_waiter);
                }
                false
            }
        }
    }

    /// Block in the kernel (`FUTEX_LOCK_PI2`, or `FUTEX_LOCK_PI` on old
    /// kernels) until we own the lock, the deadline passes, or the kernel
    /// reports a deadlock.
    #[cold]
    fn kernel_lock(&self, me: u32, deadline: Option<u64>) -> Result<(), RtMutexError> {
        events::inc(Event::RtKernelLock);
        #[cfg(loom)]
        Probe::hit(&self.probe.kernel_locks);
        loop {
            match self.futex_lock_pi(me, deadline) {
                Ok(()) => {
                    // Acquire pairs with the Release fence of the unlocker
                    // before its UNLOCK_PI (the kernel's hand-over write is
                    // made in its thread after the fence), or with its
                    // Release CAS when the kernel took a free lock for us.
                    let w = self.word.load(Acquire);
                    debug_assert_eq!(w & TID_MASK, me, "kernel returned without ownership");
                    let _ = w;
                    return Ok(());
                }
                Err(KErr::Deadlock) => return Err(RtMutexError::Deadlock),
                Err(KErr::TimedOut) => {
                    #[cfg(loom)]
                    Probe::hit(&self.probe.timeouts);
                    return Err(RtMutexError::TimedOut);
                }
                Err(KErr::NoSys) => {
                    // Pre-5.14 kernel: fall back to FUTEX_LOCK_PI for good.
                    force_lock_pi_fallback(true);
                }
                Err(KErr::Retry) => {
                    // The owner is exiting (EAGAIN), or a signal: try again.
                    #[cfg(not(loom))]
                    std::thread::yield_now();
                }
                Err(KErr::Perm) => return Err(RtMutexError::Kernel(libc_eperm())),
                Err(KErr::Other(e)) => return Err(RtMutexError::Kernel(e)),
            }
        }
    }

    /// Contended unlock: `WAITERS` is set (or we do not own the lock).
    #[cold]
    #[inline(never)]
    pub(super) fn unlock_slow(&self, me: u32) {
        let w = self.word.load(Relaxed);
        assert!(
            w & TID_MASK == me,
            "klock::RtMutex: unlock by thread {me} which does not own the lock (owner tid {})",
            w & TID_MASK
        );
        events::inc(Event::RtKernelUnlock);
        // Release: the kernel's hand-over write (made in this thread, after
        // this fence) carries our critical section to the next owner.
        crate::sync::fence(Release);
        match self.futex_unlock_pi(me) {
            Ok(()) => {}
            Err(e) => panic!("klock::RtMutex: FUTEX_UNLOCK_PI failed for thread {me}: {e:?}"),
        }
        self.wake_parked_after_unlock();
    }

    #[cfg(not(loom))]
    fn futex_lock_pi(&self, _me: u32, deadline: Option<u64>) -> Result<(), KErr> {
        use rustix::thread::futex;
        let r = if uses_lock_pi2() {
            // LOCK_PI2: absolute CLOCK_MONOTONIC deadline (our clock).
            let ts = deadline.map(timespec);
            futex::lock_pi2(&self.word, futex::Flags::PRIVATE, ts.as_ref())
        } else {
            // LOCK_PI: absolute CLOCK_REALTIME deadline.
            let ts = deadline.map(|d| {
                let left = d.saturating_sub(monotonic_ns());
                let rt = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
                timespec(
                    (rt.tv_sec as u64 * 1_000_000_000 + rt.tv_nsec as u64).saturating_add(left),
                )
            });
            futex::lock_pi(&self.word, futex::Flags::PRIVATE, ts.as_ref())
        };
        r.map_err(decode)
    }

    #[cfg(not(loom))]
    fn futex_unlock_pi(&self, _me: u32) -> Result<(), KErr> {
        use rustix::thread::futex;
        loop {
            match futex::unlock_pi(&self.word, futex::Flags::PRIVATE).map_err(decode) {
                Err(KErr::Retry) => continue,
                r => return r,
            }
        }
    }

    #[cfg(loom)]
    fn futex_lock_pi(&self, me: u32, deadline: Option<u64>) -> Result<(), KErr> {
        self.kernel.lock_pi(&self.word, me, deadline, &self.probe)
    }

    #[cfg(loom)]
    fn futex_unlock_pi(&self, me: u32) -> Result<(), KErr> {
        self.kernel.unlock_pi(&self.word, me, &self.probe)
    }
}

/// Whether the calling thread has a real-time policy: such a contender
/// needs the kernel's priority inheritance and never waits in userspace.
/// On the slow path only.
#[cfg(not(loom))]
fn caller_is_realtime() -> bool {
    crate::rt::is_realtime()
}

#[cfg(loom)]
fn caller_is_realtime() -> bool {
    false
}

#[inline]
fn libc_eperm() -> i32 {
    rustix::io::Errno::PERM.raw_os_error()
}

#[cfg(not(loom))]
fn decode(e: rustix::io::Errno) -> KErr {
    use rustix::io::Errno;
    match e {
        Errno::DEADLK => KErr::Deadlock,
        Errno::TIMEDOUT => KErr::TimedOut,
        Errno::NOSYS => KErr::NoSys,
        Errno::AGAIN | Errno::INTR => KErr::Retry,
        Errno::PERM => KErr::Perm,
        e => KErr::Other(e.raw_os_error()),
    }
}

#[cfg(not(loom))]
fn timespec(ns: u64) -> rustix::time::Timespec {
    rustix::time::Timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as _,
    }
}
