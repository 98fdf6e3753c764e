//! Loom-only scaffolding of [`RawMutexCompact`]: its constructor under
//! loom, the [`CompactProbe`] that records which rare paths a model
//! execution took, the per-lock hand-off bound and spin switch, and the
//! deliberately broken variants ([`CompactBroken`]) that a model must
//! reject. The lock calls in here from a few one-line hooks, each under
//! `#[cfg(loom)]`.

use super::{wake_due, LazyWait, RawMutexCompact, C_HANDOFF, OWNER_MASK};
use crate::osq::Osq;
use crate::sync::Ordering::{Relaxed, Release};
use crate::sync::{AtomicU32, UnsafeCell};
use crate::sys::monotonic_ns;
use crate::waitlist::WaitList;
use crate::waitlock::{WaitLockRaw, YieldLock};
use core::sync::atomic::{AtomicBool, AtomicU32 as StdAtomicU32, AtomicU64, AtomicU8};

/// A deliberately wrong compact mutex, so a model can show it catches the
/// bug. Each names the race its model is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[doc(hidden)]
pub enum CompactBroken {
    /// The lock as it is.
    None,
    /// The fast unlock releases `Relaxed`: the critical section is not
    /// published to the next owner (mutual exclusion of the data).
    UnlockRelaxed,
    /// The fast unlock ignores `WAITERS`: a sleeping first waiter is
    /// never woken.
    UnlockNoWake,
    /// The fast unlock's read-modify-write split in two, a load and a
    /// `Release` store: a `WAITERS` that a queueing waiter sets in between
    /// is overwritten, and the unlock does not wake it (the lost wake-up
    /// between a waiter going to sleep and the unlocker).
    UnlockSplitRmw,
    /// The hand-off gives the reservation up (clears `HANDOFF`, lock
    /// free) instead of naming the first waiter with `PICKUP`: any locker
    /// may take the lock the starving waiter demanded.
    HandOverUnreserved,
    /// A timed waiter whose deadline has passed leaves without its last
    /// trylock under `wait_lock`, abandoning a lock handed to it.
    TimeoutWithoutTrylock,
    /// The first waiter goes back to sleep without clearing `WOKEN`:
    /// unlocks then take it for awake and skip the wake-up (the lost
    /// wake-up the `WOKEN` bit could cause).
    KeepWoken,
}

/// Loom-only record of the rare paths one model execution took. Plain std
/// atomics: bookkeeping outside the model.
#[derive(Debug, Default)]
#[doc(hidden)]
pub struct CompactProbe {
    /// Unlocks that found `WAITERS` and woke a first waiter asleep on its
    /// futex word.
    pub wakes_of_sleepers: StdAtomicU32,
    /// Unlocks that found `WAITERS` and marked a first waiter woken that
    /// was still awake (queued, not yet parked): the race between a waiter
    /// going to sleep and the unlocker.
    pub wakes_of_awake: StdAtomicU32,
    /// Unlocks that handed the lock to the first waiter (`PICKUP`).
    pub handoffs: StdAtomicU32,
    /// Series of lazy rounds a first waiter began (woken, then lost the
    /// lock).
    pub lazy_waits: StdAtomicU32,
}

/// The loom-only state a compact mutex carries in models.
#[derive(Debug)]
pub(super) struct LoomState {
    probe: CompactProbe,
    /// This lock's hand-off bound (`u64::MAX`: the global one), so models
    /// in one test binary can differ without racing on the global.
    handoff_ns: AtomicU64,
    /// Contenders never spin on the owner (they sleep at once).
    no_spin: AtomicBool,
    /// The first waiter's lazy round in ns (0, the default: no lazy wait).
    lazy_ns: AtomicU64,
    /// A [`CompactBroken`], as `u8`.
    broken: AtomicU8,
}

impl RawMutexCompact {
    /// An unlocked mutex (loom atomics cannot be built in a `const fn`).
    pub fn new() -> Self {
        Self {
            owner: AtomicU32::new(0),
            osq: Osq::new(),
            wait_lock: YieldLock::new_unlocked(),
            spin: crate::oncpu::SpinStats::new(),
            spare: [AtomicU32::new(0), AtomicU32::new(0)],
            list: UnsafeCell::new(WaitList::new()),
            loom: LoomState {
                probe: CompactProbe::default(),
                handoff_ns: AtomicU64::new(u64::MAX),
                no_spin: AtomicBool::new(false),
                lazy_ns: AtomicU64::new(0),
                broken: AtomicU8::new(CompactBroken::None as u8),
            },
        }
    }

    /// Loom only: paths this lock's execution went through.
    #[doc(hidden)]
    pub fn probe(&self) -> &CompactProbe {
        &self.loom.probe
    }

    /// Loom only: this lock's hand-off bound in ns (0: the first waiter
    /// demands the lock at once).
    #[doc(hidden)]
    pub fn set_loom_handoff_ns(&self, ns: u64) {
        self.loom.handoff_ns.store(ns, Relaxed);
    }

    /// Loom only: whether contenders may spin on the owner (as the global
    /// switch says: `true`, the default) or always sleep (`false`).
    #[doc(hidden)]
    pub fn set_loom_spin(&self, on: bool) {
        self.loom.no_spin.store(!on, Relaxed);
    }

    /// Loom only: the first waiter's lazy round in ns (0: no lazy wait,
    /// the default in models; see [`super::super::lazy_wait`]). `u64::MAX`
    /// is the broken variant: rounds that never end, so the waiter keeps
    /// `WOKEN` with no timer.
    #[doc(hidden)]
    pub fn set_loom_lazy_ns(&self, ns: u64) {
        self.loom.lazy_ns.store(ns, Relaxed);
    }

    /// Loom only: make this lock deliberately wrong (see [`CompactBroken`]).
    #[doc(hidden)]
    pub fn set_loom_broken(&self, b: CompactBroken) {
        self.loom.broken.store(b as u8, Relaxed);
    }

    /// Loom only: whether the wait list is empty (takes wait_lock).
    #[doc(hidden)]
    pub fn wait_list_is_empty(&self) -> bool {
        self.lock_wait_list();
        // SAFETY: we hold wait_lock.
        let empty = unsafe { self.list_head() }.is_null();
        // SAFETY: we hold wait_lock.
        unsafe { self.wait_lock.unlock() };
        empty
    }

    fn is_broken(&self, b: CompactBroken) -> bool {
        self.loom.broken.load(Relaxed) == b as u8
    }

    /// The hand-off bound: the model's, else [`super::handoff_ns`].
    #[inline]
    pub(super) fn handoff_bound(&self) -> u64 {
        crate::sync::loom_tunable(&self.loom.handoff_ns, super::handoff_ns)
    }

    /// The first waiter's lazy wait, as the model set it.
    pub(super) fn lazy_wait(&self) -> LazyWait {
        LazyWait::new(self.loom.lazy_ns.load(Relaxed))
    }

    /// Count a series of lazy rounds begun.
    pub(super) fn loom_count_lazy(&self) {
        self.loom.probe.lazy_waits.fetch_add(1, Relaxed);
    }

    /// Whether the model switched spinning off for this lock.
    #[inline]
    pub(super) fn loom_no_spin(&self) -> bool {
        self.loom.no_spin.load(Relaxed)
    }

    /// Count an unlock's wake-up of the first waiter: `woke`, it slept.
    pub(super) fn loom_count_wake(&self, woke: bool) {
        let p = &self.loom.probe;
        let c = if woke {
            &p.wakes_of_sleepers
        } else {
            &p.wakes_of_awake
        };
        c.fetch_add(1, Relaxed);
    }

    /// Count a completed hand-off.
    pub(super) fn loom_count_hand_over(&self) {
        self.loom.probe.handoffs.fetch_add(1, Relaxed);
    }

    /// The broken unlocks of [`CompactBroken`], if one is set: `true` if
    /// it released the lock (the caller then does nothing more).
    pub(super) fn loom_broken_unlock(&self, me: u32) -> bool {
        let flags = if self.is_broken(CompactBroken::UnlockRelaxed) {
            // BROKEN: Relaxed publishes nothing to the next owner.
            self.owner.fetch_sub(me, Relaxed).wrapping_sub(me)
        } else if self.is_broken(CompactBroken::UnlockNoWake) {
            // BROKEN: WAITERS is ignored. Release: as in unlock_as.
            self.owner.fetch_sub(me, Release);
            return true;
        } else if self.is_broken(CompactBroken::UnlockSplitRmw) {
            // BROKEN: not one RMW; a flag set between the two is lost.
            // Release: as in unlock_as.
            let w = self.owner.load(Relaxed);
            self.owner.store(w.wrapping_sub(me), Release);
            w.wrapping_sub(me)
        } else {
            return false;
        };
        if wake_due(flags) {
            self.unlock_slow(flags);
        }
        true
    }

    /// The broken hand-off of [`CompactBroken::HandOverUnreserved`], if
    /// set: `(0, HANDOFF|F) -> (0, F)`, a free lock no longer reserved for
    /// the first waiter. `true` if it ran (the caller then returns).
    pub(super) fn loom_broken_hand_over(&self) -> bool {
        if !self.is_broken(CompactBroken::HandOverUnreserved) {
            return false;
        }
        let mut w = self.owner.load(Relaxed);
        while w & OWNER_MASK == 0 && w & C_HANDOFF != 0 {
            // BROKEN: drops the reservation. Relaxed: as in hand_over.
            match self
                .owner
                .compare_exchange_weak(w, w & !C_HANDOFF, Relaxed, Relaxed)
            {
                Ok(_) => break,
                Err(now) => w = now,
            }
        }
        true
    }

    /// [`CompactBroken::TimeoutWithoutTrylock`]: whether a waiter gives up
    /// at once because `deadline` has passed (the correct lock first tries
    /// once more under wait_lock).
    pub(super) fn loom_gives_up(&self, deadline: Option<u64>) -> bool {
        self.is_broken(CompactBroken::TimeoutWithoutTrylock)
            && deadline.is_some_and(|d| monotonic_ns() >= d)
    }
}

impl RawMutexCompact {
    /// [`CompactBroken::KeepWoken`]: whether the first waiter skips
    /// clearing `WOKEN` before it re-arms to sleep.
    pub(super) fn loom_keeps_woken(&self) -> bool {
        self.is_broken(CompactBroken::KeepWoken)
    }
}
