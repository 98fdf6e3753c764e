//! Loom models of the qspinlock's paravirt slow path: waiters that sleep
//! and are woken, the lost-wake-up races between a waiter going to sleep
//! and the thread that must wake it, and steals that must not overtake a
//! reserved hand-over — each with a deliberately broken lock that the same
//! model must reject.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p klock --release --test loom_qspinlock_pv
//! ```
//!
//! Under loom the paravirt path sleeps on a futex model that really blocks
//! (a waiter nobody wakes blocks forever and loom reports a deadlock), and
//! its time budgets run out after a few clock readings (the loom clock
//! advances 1 µs per reading), so every model goes through the sleeping
//! paths. The protected data is a `loom::cell::UnsafeCell`: two holders at
//! once, or a hand-over that does not publish, is a data race loom reports.
#![cfg(loom)]

#[path = "support/loom.rs"]
mod support;

use klock::qspinlock::broken::{
    BlindUnlock, DropDeferredKick, KickBeforeBaton, PendingTakeByAdd, SleepOnPlainOwner,
    StealIgnoresPending,
};
use klock::qspinlock::{Probe, RawQSpinLockWith};
use loom::sync::Arc;
use std::any::type_name;
use std::sync::atomic::Ordering::Relaxed;
use support::{
    builder, bump, check, expect_model_failure, join_all, play, probe_coverage, read, spawn_parts,
    Data,
};

/// Small pending hand-over wait (the bounded wait is still modelled).
const PL: u32 = 2;

type Pv = RawQSpinLockWith<PL, true>;

trait ModelLock: Send + Sync + 'static {
    fn create() -> Self;
    fn lock(&self);
    /// # Safety
    /// Held by the caller.
    unsafe fn unlock(&self);
    /// Acquire as the `lock_api` guard does: a lazy baton pass leaves the
    /// successor's wake-up to the returned token's unlock.
    fn lock_lazy(&self) -> usize;
    /// # Safety
    /// Held by the caller, `token` from its [`lock_lazy`](Self::lock_lazy).
    unsafe fn unlock_lazy(&self, token: usize);
    fn lock_as_slow_owner(&self);
    fn probe(&self) -> &Probe;
}

/// Without the pending hand-over wait: an unlocker that locks again at once
/// meets a pending waiter's reservation with no re-reads in between.
type Pv0 = RawQSpinLockWith<0, true>;

/// `ModelLock` for a lock type generic over `N`; `|l| inner` names the
/// `RawQSpinLockWith` within the lock `l` (its probe, its slow-path lock).
macro_rules! model_lock {
    ($t:ty, |$l:ident| $inner:expr) => {
        impl<const N: u32> ModelLock for $t {
            fn create() -> Self {
                Self::new()
            }
            fn lock(&self) {
                self.raw_lock()
            }
            unsafe fn unlock(&self) {
                unsafe { self.raw_unlock() }
            }
            fn lock_lazy(&self) -> usize {
                self.raw_lock_token()
            }
            unsafe fn unlock_lazy(&self, token: usize) {
                unsafe { self.raw_unlock_token(token) }
            }
            fn lock_as_slow_owner(&self) {
                let $l = self;
                RawQSpinLockWith::raw_lock_as_slow_owner($inner)
            }
            fn probe(&self) -> &Probe {
                let $l = self;
                RawQSpinLockWith::probe($inner)
            }
        }
    };
}
model_lock!(RawQSpinLockWith<N, true>, |l| l);
model_lock!(BlindUnlock<N>, |l| &l.0);
model_lock!(KickBeforeBaton<N>, |l| &l.0);
model_lock!(StealIgnoresPending<N>, |l| &l.0);
model_lock!(SleepOnPlainOwner<N>, |l| &l.0);
model_lock!(DropDeferredKick<N>, |l| &l.0);
model_lock!(PendingTakeByAdd<N>, |l| &l.0);

probe_coverage!(Probe {
    steals,
    queue_steals,
    give_backs,
    pending_taken,
    pending_timeouts,
    queued_behind,
    node_sleeps,
    head_sleeps,
    head_yields,
    head_reserves,
    kicks_unlock,
    kicks_wake,
    handoffs,
});

/// Models with two waiters besides the main thread explore the schedules
/// without preemption: every spin iteration of the paravirt path yields
/// (a switch point loom explores anyway), so these already interleave the
/// waiters at every step of their waits; one preemption more takes hours.
fn builder_for(waiters: usize) -> loom::model::Builder {
    let mut b = builder();
    if waiters > 1 {
        b.preemption_bound = Some(0);
    }
    b
}

fn lock_add_unlock<L: ModelLock>(lock: &L, data: &Data, rounds: u32) {
    for _ in 0..rounds {
        lock.lock();
        bump(data);
        unsafe { lock.unlock() };
    }
}

/// [`lock_add_unlock`] through the token pair, as `lock_api` locks.
fn lock_add_unlock_lazy<L: ModelLock>(lock: &L, data: &Data, rounds: u32) {
    for _ in 0..rounds {
        let token = lock.lock_lazy();
        bump(data);
        unsafe { lock.unlock_lazy(token) };
    }
}

/// What the main thread waits for, holding the lock, before it unlocks.
type Hold = fn(&Probe) -> bool;

fn waiter_queued(p: &Probe) -> bool {
    p.heads.load(Relaxed) > 0
}
fn head_slept(p: &Probe) -> bool {
    p.head_sleeps.load(Relaxed) > 0
}
fn head_yielded(p: &Probe) -> bool {
    p.head_yields.load(Relaxed) > 0
}
fn second_queued(p: &Probe) -> bool {
    p.queued_behind.load(Relaxed) > 0
}
fn node_slept(p: &Probe) -> bool {
    p.node_sleeps.load(Relaxed) > 0
}
/// A waiter holds the pending bit — or, in executions where none takes it
/// (the first waiter queued, the second behind it), the head has gone to
/// sleep.
fn pending_held(p: &Probe) -> bool {
    p.pending_holder.load(Relaxed) != 0 || head_slept(p)
}

/// The main thread holds the lock — as a slow-path owner when
/// `slow_owner`, else taken on the fast path — while `waiters` threads
/// lock once each; once `hold` says the waiters got far enough (a loop of
/// yields: loom explores everything the waiters do meanwhile), it
/// unlocks. Every waiter must get in (no lost wake-up: a waiter nobody
/// wakes blocks forever and loom reports the deadlock), one at a time.
fn held_model<L: ModelLock>(
    waiters: usize,
    slow_owner: bool,
    hold: Hold,
) -> std::sync::Arc<Coverage> {
    held_model_relock::<L>(waiters, slow_owner, hold, false, false)
}

/// [`held_model`] with waiters that lock through the token pair: a baton
/// passed to a sleeping successor leaves its wake-up to the unlock.
fn held_model_lazy<L: ModelLock>(
    waiters: usize,
    slow_owner: bool,
    hold: Hold,
) -> std::sync::Arc<Coverage> {
    held_model_relock::<L>(waiters, slow_owner, hold, false, true)
}

/// [`held_model`]; with `relock` the main thread locks once more right
/// after its unlock, racing the waiters for the lock it just freed.
fn held_model_relock<L: ModelLock>(
    waiters: usize,
    slow_owner: bool,
    hold: Hold,
    relock: bool,
    lazy: bool,
) -> std::sync::Arc<Coverage> {
    held_model_relock_in::<L>(
        builder_for(waiters),
        waiters,
        slow_owner,
        hold,
        relock,
        lazy,
    )
}

/// The relock race with three preemptions: a waiter that read the lock
/// free, then the relocker's byte CAS, then the waiter's take, then the
/// relocker's look at the pending byte. One waiter, so still quick.
fn relock_race<L: ModelLock>() -> std::sync::Arc<Coverage> {
    let mut b = builder();
    b.preemption_bound = Some(b.preemption_bound.unwrap_or(2).max(3));
    held_model_relock_in::<L>(b, 1, true, pending_held, true, false)
}

/// [`held_model_relock`] under the model builder `b`.
fn held_model_relock_in<L: ModelLock>(
    b: loom::model::Builder,
    waiters: usize,
    slow_owner: bool,
    hold: Hold,
    relock: bool,
    lazy: bool,
) -> std::sync::Arc<Coverage> {
    let once: fn(&L, &Data, u32) = if lazy {
        lock_add_unlock_lazy
    } else {
        lock_add_unlock
    };
    check(b, type_name::<L>(), move |c: &Coverage| {
        let lock = Arc::new(L::create());
        let data = Arc::new(Data::new(0));
        if slow_owner {
            lock.lock_as_slow_owner();
        } else {
            lock.lock();
        }
        let handles = spawn_parts(&lock, &data, &vec![1; waiters], once);
        bump(&data);
        while !hold(lock.probe()) {
            loom::thread::yield_now();
        }
        unsafe { lock.unlock() };
        if relock {
            lock_add_unlock(&*lock, &data, 1);
        }
        join_all(handles);
        assert_eq!(read(&data), waiters as u32 + 1 + relock as u32);
        c.add(lock.probe());
    })
}

/// Threads racing from the start, `rounds` acquisitions each.
fn race_model<L: ModelLock>(rounds: &[u32]) -> std::sync::Arc<Coverage> {
    let rounds = rounds.to_vec();
    check(builder(), type_name::<L>(), move |c: &Coverage| {
        let lock = Arc::new(L::create());
        let data = Arc::new(Data::new(0));
        play(&lock, &data, &rounds, lock_add_unlock);
        assert_eq!(read(&data), rounds.iter().sum::<u32>());
        c.add(lock.probe());
    })
}

// --- the correct lock ------------------------------------------------------

/// Two threads racing: steals, the pending path, and exclusion.
#[test]
fn two_threads_race() {
    let cov = race_model::<Pv>(&[1, 1]);
    assert!(cov.pending_taken.load(Relaxed) + cov.steals.load(Relaxed) > 0);
}

/// A waiter behind a slow-path owner: it spins, gives up its pending wait,
/// queues, and as queue head sleeps on the lock word; the unlock wakes it.
#[test]
fn head_sleeps_and_the_unlock_wakes_it() {
    let cov = held_model::<Pv>(1, true, waiter_queued);
    assert!(cov.pending_timeouts.load(Relaxed) > 0, "{cov:?}");
    assert!(cov.head_sleeps.load(Relaxed) > 0, "{cov:?}");
    assert!(cov.kicks_unlock.load(Relaxed) > 0, "{cov:?}");
}

/// A waiter behind a fast-path owner may not sleep (that unlock is a plain
/// store that wakes nobody): it yields, and still gets the lock.
#[test]
fn head_behind_a_fast_path_owner_yields() {
    let cov = held_model::<Pv>(1, false, head_yielded);
    assert!(cov.head_yields.load(Relaxed) > 0, "{cov:?}");
    // Back from its yield, past the fairness bound, it reserves the lock.
    assert!(cov.head_reserves.load(Relaxed) > 0, "{cov:?}");
    assert_eq!(cov.head_sleeps.load(Relaxed), 0, "{cov:?}");
}

/// Two waiters behind a slow-path owner: one queues behind the other and
/// sleeps on its node; the baton pass wakes it.
#[test]
fn queued_waiter_sleeps_and_the_baton_wakes_it() {
    let cov = held_model::<Pv>(2, true, node_slept);
    assert!(cov.queued_behind.load(Relaxed) > 0, "{cov:?}");
    assert!(cov.node_sleeps.load(Relaxed) > 0, "{cov:?}");
    assert!(cov.kicks_wake.load(Relaxed) > 0, "{cov:?}");
}

/// The correct lock under the models the broken ones fail: a baton pass
/// racing with a successor going to sleep, and an unlock while a pending
/// waiter holds its reservation, the unlocker locking again at once.
#[test]
fn unlock_wakes_a_sleeping_head() {
    let cov = held_model::<Pv>(1, true, head_slept);
    assert!(cov.kicks_unlock.load(Relaxed) > 0, "{cov:?}");
}

#[test]
fn baton_races_a_halting_successor() {
    held_model::<Pv>(2, true, second_queued);
}

/// The lazy baton: two waiters behind a slow-path owner, the second asleep
/// on its node; the first, taking the lock, leaves the second's wake-up to
/// its own unlock (what the `lock_api` guard does), and the second still
/// gets in, racing its own spurious returns and halts.
#[test]
fn lazy_baton_wakes_the_successor_at_unlock() {
    let cov = held_model_lazy::<Pv>(2, true, node_slept);
    assert!(cov.node_sleeps.load(Relaxed) > 0, "{cov:?}");
    assert!(cov.kicks_wake.load(Relaxed) > 0, "{cov:?}");
}

#[test]
fn steal_respects_pending() {
    let cov = relock_race::<Pv0>();
    assert!(cov.pending_taken.load(Relaxed) > 0, "{cov:?}");
    // The relock's fast path took the byte while the waiter held pending,
    // and gave it back.
    assert!(cov.give_backs.load(Relaxed) > 0, "{cov:?}");
}

/// A newcomer that finds the lock held with a queue keeps trying to steal
/// for its budget instead of queueing at once behind sleepers (which left
/// one thread running and the others parked with more threads than
/// CPUs), and takes the lock when it comes free, past the queue.
///
/// Staged: the main thread holds the lock (as a slow-path owner), one
/// waiter queues as head, then a newcomer arrives and the main thread
/// unlocks once the newcomer has found the lock held with a queue (or has
/// queued behind the head, when its budget ran out first).
#[test]
fn newcomer_steals_past_a_queue_it_found_held() {
    let cov = check(builder_for(2), type_name::<Pv>(), |c: &Coverage| {
        let lock = Arc::new(Pv::create());
        let data = Arc::new(Data::new(0));
        lock.lock_as_slow_owner();
        let head = spawn_parts(&lock, &data, &[1], lock_add_unlock);
        bump(&data);
        while !waiter_queued(lock.probe()) {
            loom::thread::yield_now();
        }
        let newcomer = spawn_parts(&lock, &data, &[1], lock_add_unlock);
        while lock.probe().queue_waits.load(Relaxed) == 0 && !second_queued(lock.probe()) {
            loom::thread::yield_now();
        }
        unsafe { lock.unlock() };
        join_all(head);
        join_all(newcomer);
        assert_eq!(read(&data), 3);
        c.add(lock.probe());
    });
    assert!(cov.queue_steals.load(Relaxed) > 0, "{cov:?}");
}

/// A head behind a fast-path owner (staged as the broken model below
/// stages it) never sleeps and is never lost.
#[test]
fn unlock_races_a_head_behind_a_fast_path_owner() {
    let cov = held_model::<Pv>(1, false, waiter_queued);
    assert_eq!(cov.head_sleeps.load(Relaxed), 0, "{cov:?}");
}

// --- the model can fail ----------------------------------------------------

/// An unlock that does not look for a sleeping head: the head sleeps
/// forever.
#[test]
fn broken_blind_unlock_is_caught() {
    expect_model_failure("blind unlock", || {
        held_model::<BlindUnlock<PL>>(1, true, head_slept);
    });
}

/// A baton pass that looks at the successor before storing the baton: a
/// successor that halts in between sleeps forever (the lost wake-up race
/// between a waiter going to sleep and the thread that must wake it).
#[test]
fn broken_kick_before_baton_is_caught() {
    expect_model_failure("kick before baton", || {
        held_model::<KickBeforeBaton<PL>>(2, true, second_queued);
    });
}

/// An unlock that forgets the successor its lazy baton pass left asleep:
/// that successor sleeps forever.
#[test]
fn broken_drop_deferred_kick_is_caught() {
    expect_model_failure("drop deferred kick", || {
        held_model_lazy::<DropDeferredKick<PL>>(2, true, node_slept);
    });
}

/// A head that sleeps on a fast-path owner: that owner's unlock reads its
/// byte, then clears it blindly; a head that marked it asleep in between
/// is never woken.
#[test]
fn broken_sleep_on_plain_owner_is_caught() {
    expect_model_failure("sleep on plain owner", || {
        held_model::<SleepOnPlainOwner<PL>>(1, false, waiter_queued);
    });
}

/// A pending holder that takes the lock with an add: the relock's fast
/// path holds the locked byte for a moment before it sees the pending bit
/// and gives the byte back; the add then makes two owners (a data race on
/// the protected data) or a word no owner can release.
#[test]
fn broken_pending_take_by_add_is_caught() {
    let msg = expect_model_failure("pending take by add", || {
        relock_race::<PendingTakeByAdd<0>>();
    });
    assert!(msg.contains("Causality violation"), "{msg}");
}

/// A steal that ignores the pending bit overtakes the thread that holds
/// it (a pending waiter's, or a reserving head's, hand-over): the lock's
/// loom probe asserts that nobody else takes the lock while one thread
/// holds pending.
#[test]
fn broken_steal_past_pending_is_caught() {
    let msg = expect_model_failure("steal past pending", || {
        held_model_relock::<StealIgnoresPending<0>>(1, true, pending_held, true, false);
    });
    assert!(
        msg.contains("overtook") || msg.contains("deadlock"),
        "{msg}"
    );
}
