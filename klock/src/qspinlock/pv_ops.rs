//! The paravirt operations the slow path ([`super::pv`]) is built on: its
//! time budgets and their tuning, and the halt and kick of a waiter
//! (`pv_wait` / `pv_kick`: a futex wait on a word, a wake by address),
//! with loom stand-ins for both.

use super::*;

/// Monotonic ns for the budgets. Under loom, a clock outside the model
/// that advances 1 µs per reading: budgets still run out after a few
/// readings, but reading the clock is no modelled operation (the crate's
/// loom clock is a shared modelled atomic, whose every reading the model
/// checker would interleave with every other thread's).
#[cfg(not(loom))]
pub(super) use crate::sys::monotonic_ns;

#[cfg(loom)]
pub(super) fn monotonic_ns() -> u64 {
    std::thread_local! {
        static NOW: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
    }
    NOW.with(|n| {
        n.set(n.get() + 1_000);
        n.get()
    })
}

#[cfg(not(loom))]
/// Yields behind a fast-path owner before short sleeps instead (a yield
/// does not let a lower-priority owner run on a real-time waiter's CPU).
const YIELDS_BEFORE_SLEEP: u32 = 16;

/// Time budgets of the paravirt slow path, in ns. Process-global; see
/// [`set_pv_tuning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PvTuning {
    /// How long a newcomer tries to steal the lock (with backoff) before it
    /// takes the pending bit or queues.
    pub steal_ns: u64,
    /// How long a pending waiter, a queued waiter or the queue head spins
    /// before it sleeps (a queued waiter stops earlier when its predecessor
    /// sleeps or, per the owner-running oracle, is not running).
    pub spin_ns: u64,
    /// How long the queue head lets newcomers steal before it holds the
    /// pending bit while it spins, which blocks steals (the fairness bound).
    /// `0` is the kernel's rule: the head always holds pending while it
    /// spins.
    pub reserve_ns: u64,
}

static STEAL_NS: AtomicU64Std = AtomicU64Std::new(u64::MAX);
static SPIN_NS: AtomicU64Std = AtomicU64Std::new(u64::MAX);
static RESERVE_NS: AtomicU64Std = AtomicU64Std::new(u64::MAX);

type AtomicU64Std = std::sync::atomic::AtomicU64;

/// The default fairness bound: about a scheduler tick's worth of steals.
/// (Under loom, where the clock advances 1 µs per reading, a few readings,
/// so that models reach the reserving head.)
pub const DEFAULT_RESERVE_NS: u64 = if cfg!(loom) { 3_000 } else { 1_000_000 };

#[inline]
pub(super) fn steal_ns() -> u64 {
    match STEAL_NS.load(std::sync::atomic::Ordering::Relaxed) {
        u64::MAX => crate::oncpu::base_spin_ns(),
        v => v,
    }
}

#[inline]
pub(crate) fn spin_ns() -> u64 {
    match SPIN_NS.load(std::sync::atomic::Ordering::Relaxed) {
        u64::MAX => crate::oncpu::base_spin_ns(),
        v => v,
    }
}

/// The paravirt slow path's budgets now in force. Defaults: `steal_ns` and
/// `spin_ns` = the calibrated spin budget
/// ([`crate::oncpu::base_spin_ns`], half a futex round trip: spinning
/// longer than a sleep and a wake-up take cannot win much), `reserve_ns` =
/// [`DEFAULT_RESERVE_NS`].
pub fn pv_tuning() -> PvTuning {
    let get = |a: &AtomicU64Std, default: fn() -> u64| match a
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        u64::MAX => default(),
        v => v,
    };
    PvTuning {
        steal_ns: get(&STEAL_NS, crate::oncpu::base_spin_ns),
        spin_ns: get(&SPIN_NS, crate::oncpu::base_spin_ns),
        reserve_ns: get(&RESERVE_NS, || DEFAULT_RESERVE_NS),
    }
}

/// Set the paravirt slow path's budgets for every paravirt qspinlock in
/// the process (and the locks built on it). For experiments; the defaults
/// are calibrated at start-up.
pub fn set_pv_tuning(t: PvTuning) {
    use std::sync::atomic::Ordering::Relaxed;
    STEAL_NS.store(t.steal_ns.min(u64::MAX - 1), Relaxed);
    SPIN_NS.store(t.spin_ns.min(u64::MAX - 1), Relaxed);
    RESERVE_NS.store(t.reserve_ns.min(u64::MAX - 1), Relaxed);
}

/// A time budget read every [`crate::spin::CLOCK_EVERY`] iterations. The
/// clock is first read at the first check, not at creation: a wait that
/// ends at once (the common case) reads no clock.
pub(crate) struct Budget {
    ns: u64,
    deadline: u64,
    n: u32,
}

impl Budget {
    #[inline(always)]
    pub(crate) fn new(ns: u64) -> Self {
        Budget {
            ns,
            deadline: 0,
            n: 0,
        }
    }

    /// Whether this iteration is one that reads the clock (and may ask the
    /// oracle).
    #[inline(always)]
    pub(crate) fn due(&mut self) -> bool {
        self.n = self.n.wrapping_add(1);
        crate::spin::clock_due(self.n)
    }

    #[inline(always)]
    pub(crate) fn spent(&mut self) -> bool {
        let now = monotonic_ns();
        if self.deadline == 0 {
            self.deadline = now.saturating_add(self.ns);
        }
        now >= self.deadline
    }
}

/// The futex key of `word`: its address.
#[inline(always)]
pub(crate) fn futex_key(word: &AtomicU32) -> usize {
    word as *const AtomicU32 as usize
}

/// Sleep while `*word == val` (FUTEX_WAIT; may return spuriously).
#[cfg(not(loom))]
#[inline]
pub(crate) fn pv_wait(word: &AtomicU32, val: u32) {
    crate::sys::futex_wait(word, val, None);
}

/// Wake one sleeper on the futex at `addr` (the address only: the word may
/// be gone by now, see [`crate::sys::futex_wake_addr`]).
#[cfg(not(loom))]
#[inline]
pub(crate) fn pv_kick(addr: usize) {
    crate::sys::futex_wake_addr(addr, 1);
}

/// Give the CPU away while a fast-path owner holds the lock.
#[cfg(not(loom))]
pub(super) fn pv_yield(round: u32) {
    if round < YIELDS_BEFORE_SLEEP {
        std::thread::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

#[cfg(loom)]
pub(super) fn pv_yield(_round: u32) {
    loom::thread::yield_now();
}

#[cfg(loom)]
pub(crate) use loom_futex::{pv_kick, pv_wait};

/// Under loom: a futex whose waiter stays asleep until a wake-up for its
/// address arrives (the crate-wide loom futex returns spuriously, which
/// would hide a lost wake-up). A waiter that nobody wakes waits forever,
/// and loom reports it at its branch limit. The table is plain
/// bookkeeping outside the model (loom runs one thread at a time, and a
/// check-then-enqueue with no loom operation in between is atomic to it),
/// kept per OS thread so concurrently running models do not share it.
#[cfg(loom)]
mod loom_futex {
    use crate::sync::AtomicU32;
    use std::cell::RefCell;

    /// One sleeper: futex address, waiter id, woken.
    type Waiter = (usize, u64, bool);

    std::thread_local! {
        /// The sleepers, and the next waiter id.
        static TABLE: RefCell<(Vec<Waiter>, u64)> = const { RefCell::new((Vec::new(), 0)) };
    }

    pub(crate) fn pv_wait(word: &AtomicU32, val: u32) {
        // The kernel compares the newest value under its hash-bucket lock
        // (the waker changed the word before it took that lock): an RMW
        // that changes nothing reads the newest value, where a loom load
        // may read a stale one. Nothing can run between it and the enqueue.
        if word.fetch_or(0, crate::sync::Ordering::SeqCst) != val {
            return;
        }
        let addr = word as *const AtomicU32 as usize;
        let id = TABLE.with(|t| {
            let mut t = t.borrow_mut();
            let id = t.1;
            t.1 += 1;
            t.0.push((addr, id, false));
            id
        });
        loop {
            let woken = TABLE.with(|t| {
                let mut t = t.borrow_mut();
                match t.0.iter().position(|w| w.1 == id && w.2) {
                    Some(i) => {
                        t.0.remove(i);
                        true
                    }
                    None => false,
                }
            });
            if woken {
                return;
            }
            loom::thread::yield_now();
        }
    }

    pub(crate) fn pv_kick(addr: usize) {
        TABLE.with(|t| {
            if let Some(w) = t.borrow_mut().0.iter_mut().find(|w| w.0 == addr && !w.2) {
                w.2 = true;
            }
        });
    }
}
