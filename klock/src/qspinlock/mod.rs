//! Queued spinlock: the kernel's qspinlock in one 32-bit word, with the
//! kernel's paravirt slow path for threads that can be preempted.
//!
//! An uncontended lock is one CAS. A second locker does not queue: it sets
//! the *pending* bit and spins on the locked byte (an embedded
//! test-and-set lock, cheaper than queueing when contention is light).
//! Everybody after that queues in an MCS queue of per-thread nodes
//! ([`crate::thread::ThreadSlot::mcs`]) and spins on its *own* node, so a
//! contended lock costs one cache-line transfer per hand-over instead of a
//! stampede. The queue's tail is encoded in the upper half of the lock word,
//! which is why a lock is 4 bytes however many threads wait on it.
//!
//! The word is stored as the kernel stores it, in 4 bytes, or, for
//! [`RawQSpinLock`] ([`crate::SpinLock`]) on x86-64, in 8 ([`Word64`]):
//! the locked byte alone in the low 4, so that the fast path's CAS and the
//! plain unlock's store are 4-byte accesses; some CPUs make a locked
//! instruction wait after a narrower store (`word.rs` has the figures).
//! The algorithm, the diagram below and every transition are the same;
//! [`LockWord`] is the storage. [`RawQSpinLock32`] is the paravirt lock in
//! 4 bytes everywhere.
//!
//! That is the **native** slow path ([`RawQSpinLockNative`]): a waiter spins
//! until it gets the lock. The kernel can afford it because a spinlock
//! holder or waiter is never preempted; a userspace thread is, and with more
//! runnable threads than CPUs the next waiter in line is often not running,
//! so every hand-over waits for its next time slice. The default
//! ([`RawQSpinLock`], [`crate::SpinLock`]) is the kernel's **paravirt**
//! slow path (its answer for preemptible virtual CPUs), on futexes: see
//! "Paravirt" below and `pv.rs`.
//!
//! # The lock word
//!
//! ```text
//!  31                            18 17  16 15           9   8  7                 0
//! +--------------------------------+------+--------------+---+--------------------+
//! |  tail thread index (1..=16383) | tail | 0 0 0 0 0 0 0| P |    locked byte     |
//! |  0 = queue empty               | lvl  |  (unused)    |   |  0 or LOCKED (=1)  |
//! +--------------------------------+------+--------------+---+--------------------+
//!  \_______________ tail: 16 bits ________/ \_____ pending byte ____/ \__ locked __/
//! ```
//!
//! * **locked byte** (bits 0–7): [`LOCKED`] while a thread owns the lock.
//! * **pending** (bit 8, [`PENDING`]; bits 9–15 stay zero): one thread is
//!   spinning for the lock *without* a queue node, and will take it next.
//! * **tail** (bits 16–31): the last queued thread's MCS node.
//!   `tail = thread_index << 18 | level << 16`, with `thread_index` the
//!   1-based [`crate::thread`] index (1..=16383, so it fits 14 bits) and
//!   `level` the nesting level 0..=3 of the node it queued with
//!   (`slot(thread_index).mcs[level]`). Thread indexes start at 1, so
//!   `tail == 0` means "no queue" — the same convention as the kernel's
//!   "CPU number + 1", with our index already 1-based.
//!
//! # State transitions
//!
//! Written as `(tail, pending, locked)`, `n`/`m` a tail, `*` any value.
//!
//! ```text
//! lock fast path      (0,0,0) -> (0,0,1)                  CAS, acquire (paravirt:
//!                                                         (n,0,0) -> (n,0,1), below)
//! unlock              (*,*,1) -> (*,*,0)                  x86-64: byte store or
//!                                                         32-bit fetch_sub, whichever
//!                                                         is cheaper here ([`unlock`];
//!                                                         paravirt: byte store);
//!                                                         else fetch_sub, release
//!
//! pending path (second locker, no queue):
//!   hand-over wait    (0,1,0): re-read up to PENDING_LOOPS times (a pending
//!                     waiter is about to take the lock; let it finish)
//!   contended         (n,*,*) or (*,1,*)  -> queue
//!   set pending       (0,0,*) -> (0,1,*)                  fetch_or, acquire
//!   raced             fetch_or saw (n,0,*): undo OUR pending
//!                     (n,1,*) -> (n,0,*) and queue        (never retry the trylock)
//!                     fetch_or saw (*,1,*): not ours, nothing to undo; queue
//!   wait owner        (*,1,1) -> (*,1,0)                  done by the owner's unlock
//!   take it           (*,1,0) -> (*,0,1)                  clear_pending_set_locked
//!
//! queue (MCS):
//!   xchg_tail         (m,*,*) -> (n,*,*)                  only the tail bits change
//!   wait for baton    node.locked: 0 -> 1                 set by the predecessor
//!   head waits        (n,*,*) -> (n,0,0)                  owner and pending gone
//!   alone: take it    (n,0,0) -> (0,0,1)                  CAS; tail still ours
//!   not alone         (m,0,0) -> (m,0,1)                  set_locked, then pass the
//!                                                         baton: next.locked 0 -> 1
//!   the (n,0,0) race  a pending-setter hit (n,0,0): our CAS sees (n,1,0) and
//!                     fails; we set_locked (n,1,1); it clears its pending
//!                     (n,0,1) and queues behind us, so our wait for `next` ends.
//! ```
//!
//! # Memory ordering
//!
//! Every write to the lock word is a 32-bit read-modify-write (never a plain
//! store, never a sub-word access: one access size per word: docs/design.md,
//! Building blocks) — except on x86-64, where the plain owner's unlock is a
//! byte store of the locked byte, and the paravirt fast path takes that
//! byte with a byte CAS, reads the pending byte, and may give the byte
//! back with a byte store (`byte.rs`); in the 8-byte word ([`Word64`])
//! the same steps are 4-byte accesses of the low half (the locked part)
//! and one 4-byte load of the high half, and the RMWs are 64 bits wide.
//! x86 makes aligned accesses of any of these widths atomic and coherent
//! with the word's RMWs, and orders a store as a release. The word's
//! modification order stays one release sequence through the owners'
//! hand-overs: an acquire read of any value synchronises with every
//! release write before it. Each `Acquire`/`Release` below says what it
//! pairs with; everything else is `Relaxed`.
//!
//! # Paravirt
//!
//! The locked byte says how its owner will unlock, so that nobody sleeps on
//! an unlock that would not wake it:
//!
//! | locked byte | meaning |
//! |---|---|
//! | `0` | free |
//! | [`LOCKED`] (1) | taken on the fast path, past a queue or not; unlocked by a plain store that looks at nothing: waiters may not sleep on it (a head yields) |
//! | [`LOCKED_PV`] (3) | taken on a slow path; unlocked by an RMW that looks for a sleeping head |
//! | [`SLOW`] (7) | `LOCKED_PV` + [`HEAD_ASLEEP`]: the queue head sleeps on the word; the unlock wakes it |
//!
//! Each MCS node carries a state, running or halted (asleep on the node's
//! futex word). Transitions, with `P` = `LOCKED_PV`:
//!
//! ```text
//! fast path           (n,0,0) -> (n,0,1)        n = 0 or a queue (a steal as a plain
//!                                               owner: the steady state of a queue of
//!                                               sleepers). x86-64: a byte CAS of the
//!                                               locked byte, then a load of the
//!                                               pending byte; if it is set, give the
//!                                               byte back (*,1,1) -> (*,1,0) and go
//!                                               slow. Elsewhere: a CAS from 0, then
//!                                               one from the word it returned
//! steal               (n,0,0) -> (n,0,P)        CAS; in the slow path, for a
//!                                               bounded time with backoff;
//!                                               never while pending is held
//! pending             as native, but the wait for (*,1,0) is bounded: past it
//!                     (*,1,*) -> (*,0,*) and queue; take it (*,1,0) -> (*,0,P)
//!                     by CAS (not the native add: a fast-path locker may hold
//!                     the locked byte for a moment before it gives it back)
//! queued waiter       spins on node.locked while its predecessor runs (oracle)
//!                     and the budget lasts; then state running -> halted,
//!                     re-check node.locked, sleep on node.state
//! baton               node.locked 0 -> 1, then state halted -> running + wake
//!                     (SeqCst both sides: a store-load pair each)
//! head                spins for (*,0,0) [or (*,ours,0) once it holds pending];
//!   reserve           past the fairness bound: (n,0,*) -> (n,1,*) while spinning
//!   alone             (n,p,0) -> (0,0,P)
//!   not alone         (m,0,0) -> (m,0,P) or, reserved, (m,1,0) -> (m,0,P)
//!                     (CAS, as the pending take); then pass the baton
//!   sleep             drop pending; (n,0,P) -> (n,0,SLOW); sleep while the
//!                     word is unchanged; behind a LOCKED owner: yield instead
//! unlock, LOCKED      (*,*,1) -> (*,*,0)        x86-64: byte store; else fetch_sub
//! unlock, P or SLOW   (*,*,P|SLOW) -> (*,*,0)   CAS; saw HEAD_ASLEEP: wake the
//!                                               head (by address, after release)
//! ```
//!
//! Through `lock_api` ([`crate::SpinLock`]) the guard remembers which
//! path took the lock ([`QGuard`]), so the unlock picks its form without
//! loading the word; the raw `raw_unlock` loads the locked byte to decide
//! (exact: nobody but its owner changes a plain `LOCKED` byte).
//!
//! On x86-64 the paravirt lock's fast path makes its rare calls (the slow
//! path, the give-back, a steal's first count, a slow owner's unlock)
//! through a thunk that saves every general-purpose register, so the
//! caller keeps its values in registers across the lock
//! (`callee_save.rs`; the kernel calls its paravirt hooks so too).
//!
//! # Tuning
//!
//! [`RawQSpinLockWith<PENDING_LOOPS, PARAVIRT>`] bounds the hand-over wait
//! of the pending path; [`RawQSpinLock`] uses the kernel's 512. `0` skips
//! the wait, which is the "patched" column of the 2018 qspinlock mail: on
//! the native path the 2-thread case then queues instead of taking the
//! pending path (the mail measured 11.6 vs 4.2 Mop/s). `PARAVIRT = false`
//! is the native slow path. All variants can live in one process. The
//! paravirt budgets are [`pv_tuning`] / [`set_pv_tuning`].
//!
//! # Fork
//!
//! In a forked child the threads of the parent that held the pending bit
//! or sat in the queue are gone. Each thread records, in its slot, the
//! lock whose slow path it is in; the child's fork handler
//! ([`crate::after_fork_in_child`]) clears the tail and pending
//! bit of the locks the others recorded (`fork.rs`,
//! [`forget_parent_waiters`]).
//!
//! # When not to use it
//!
//! The native lock is a pure FIFO spinlock: with more runnable threads than
//! CPUs it collapses by orders of magnitude (a ticket lock does the same).
//! Use it only where every thread owns a CPU. The paravirt default does not
//! collapse; for long critical sections a sleeping lock ([`crate::Mutex`])
//! still wastes less.

mod byte;
#[cfg(all(target_arch = "x86_64", not(loom)))]
mod callee_save;
mod fork;
mod word;
pub use fork::forget_parent_waiters;
pub use word::LockWord;
#[cfg(all(target_arch = "x86_64", not(loom)))]
pub use word::Word64;
mod native;
pub(crate) mod pv;
pub(crate) mod pv_ops;
pub use pv_ops::{pv_tuning, set_pv_tuning, PvTuning, DEFAULT_RESERVE_NS};
pub mod unlock;
pub use unlock::plain_unlock_by_store;
#[cfg(loom)]
mod loom_probe;
#[cfg(all(test, not(loom)))]
mod tests;
#[cfg(loom)]
pub use loom_probe::Probe;

use crate::events::{self, Event};
use crate::spin::cpu_relax;
use crate::sync::Ordering::{self, AcqRel, Acquire, Relaxed, Release};
use crate::sync::{AtomicPtr, AtomicU32};
use crate::thread::{self, QNode, ThreadSlot, MAX_THREADS, MCS_NODES};
use core::sync::atomic::compiler_fence;

/// Locked byte: bit offset.
pub const LOCKED_OFFSET: u32 = 0;
/// Locked byte: width in bits.
pub const LOCKED_BITS: u32 = 8;
/// Locked byte mask (bits 0–7).
pub const LOCKED_MASK: u32 = ((1 << LOCKED_BITS) - 1) << LOCKED_OFFSET;
/// Locked byte value of a held lock. In the paravirt lock: held by an
/// owner that took it on the fast path, whose unlock is a plain store that
/// looks at nothing, so no waiter may sleep on it.
pub const LOCKED: u32 = 1 << LOCKED_OFFSET;
/// Paravirt: a locked-byte bit saying the owner will unlock with a
/// read-modify-write that looks for a sleeping queue head.
pub const PV_UNLOCK: u32 = 1 << (LOCKED_OFFSET + 1);
/// Paravirt: locked-byte value of a lock taken on a slow path (steal,
/// pending, queue). Waiters may sleep on it.
pub const LOCKED_PV: u32 = LOCKED | PV_UNLOCK;
/// Paravirt: a locked-byte bit set by the queue head before it sleeps on
/// the lock word; the unlock that clears it wakes the head.
pub const HEAD_ASLEEP: u32 = 1 << (LOCKED_OFFSET + 2);
/// Paravirt: locked-byte value of a lock whose queue head sleeps (the
/// kernel's "slow value").
pub const SLOW: u32 = LOCKED_PV | HEAD_ASLEEP;

/// Pending byte: bit offset.
pub const PENDING_OFFSET: u32 = 8;
/// Pending byte: width in bits (only the lowest is ever set).
pub const PENDING_BITS: u32 = 8;
/// Pending byte mask (bits 8–15).
pub const PENDING_MASK: u32 = ((1 << PENDING_BITS) - 1) << PENDING_OFFSET;
/// The pending bit (bit 8).
pub const PENDING: u32 = 1 << PENDING_OFFSET;

/// Locked and pending bytes together (the low half-word).
pub const LOCKED_PENDING_MASK: u32 = LOCKED_MASK | PENDING_MASK;

/// Tail nesting level (MCS node index): bit offset.
pub const TAIL_LEVEL_OFFSET: u32 = 16;
/// Tail nesting level: width in bits.
pub const TAIL_LEVEL_BITS: u32 = 2;
/// Tail nesting level mask (bits 16–17).
pub const TAIL_LEVEL_MASK: u32 = ((1 << TAIL_LEVEL_BITS) - 1) << TAIL_LEVEL_OFFSET;
/// Tail thread index: bit offset.
pub const TAIL_THREAD_OFFSET: u32 = TAIL_LEVEL_OFFSET + TAIL_LEVEL_BITS;
/// Tail thread index: width in bits.
pub const TAIL_THREAD_BITS: u32 = 32 - TAIL_THREAD_OFFSET;
/// Tail thread index mask (bits 18–31).
pub const TAIL_THREAD_MASK: u32 = ((1 << TAIL_THREAD_BITS) - 1) << TAIL_THREAD_OFFSET;
/// The whole tail (bits 16–31).
pub const TAIL_MASK: u32 = TAIL_LEVEL_MASK | TAIL_THREAD_MASK;

/// The kernel's (x86) bound on the pending hand-over wait: 0x200 re-reads.
pub const DEFAULT_PENDING_LOOPS: u32 = 512;

/// `(*,1,0) + PENDING_TO_LOCKED == (*,0,1)`: clear_pending_set_locked as one
/// 32-bit add (wrapping: it subtracts `PENDING` and adds `LOCKED`).
const PENDING_TO_LOCKED: u32 = LOCKED.wrapping_sub(PENDING);
/// The paravirt form, `(*,1,0) -> (*,0,LOCKED_PV)`: only the broken
/// [`PENDING_TAKE_BY_ADD`] variant takes the lock so.
const PENDING_TO_LOCKED_PV: u32 = LOCKED_PV.wrapping_sub(PENDING);

const _: () = {
    assert!(MCS_NODES <= 1 << TAIL_LEVEL_BITS);
    assert!(MAX_THREADS < 1 << TAIL_THREAD_BITS);
    assert!(LOCKED_MASK & PENDING_MASK == 0 && LOCKED_PENDING_MASK & TAIL_MASK == 0);
    assert!(LOCKED_PENDING_MASK | TAIL_MASK == u32::MAX);
};

/// Algorithm variants, chosen at compile time (a const generic on the
/// private methods). Only [`CORRECT`] is reachable outside loom builds; the
/// others exist so the loom model can show it catches a broken lock.
const CORRECT: u8 = 0;
/// Broken: the MCS baton (`node.locked`) is passed with `Relaxed` on both
/// sides (see the loom tests).
const RELAXED_HANDOFF: u8 = 1;
/// Broken: a pending-setter that raced with a queue undoes its pending bit
/// and spins on trylock instead of queueing (the forbidden step-4 variant).
const UNDO_PENDING_RETRY: u8 = 2;
/// Broken (paravirt): the unlock clears the locked byte without looking for
/// a sleeping head, so nobody wakes it (a lost wake-up).
const BLIND_UNLOCK: u8 = 3;
/// Broken (paravirt): passing the MCS baton reads the successor's state
/// *before* storing the baton, so a successor that halts in between is
/// never woken (a lost wake-up).
const KICK_BEFORE_BATON: u8 = 4;
/// Broken (paravirt): a newcomer steals a free lock even while the queue
/// head or a pending waiter holds the pending bit (it overtakes a reserved
/// hand-over).
const STEAL_IGNORES_PENDING: u8 = 5;
/// Broken (paravirt): the queue head sleeps on an owner that took the lock
/// on the fast path, whose plain-store unlock will not wake it.
const SLEEP_ON_PLAIN_OWNER: u8 = 6;
/// Broken (paravirt): the unlock forgets the successor whose wake-up the
/// lazy baton pass left to it: that successor sleeps forever.
const DROP_DEFERRED_KICK: u8 = 7;
/// Broken (paravirt): the pending holder takes the lock with the native
/// path's add, `(*,1,0) + PENDING_TO_LOCKED_PV`, instead of a CAS that
/// expects a clear locked byte: a fast-path locker that holds the byte for
/// a moment before giving it back makes it two owners.
const PENDING_TAKE_BY_ADD: u8 = 8;

/// What the paravirt fast path's byte CAS led to (`pv_fast_try`).
#[cfg(any(loom, target_arch = "x86_64"))]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(usize)]
enum FastTry {
    /// Ours as a plain owner: `(0,0,0) -> (0,0,LOCKED)`, or a steal past a
    /// queue `(n,0,0) -> (n,0,LOCKED)`, counted if it had to be.
    Plain,
    /// Ours, a steal past a queue whose count is left to the caller (the
    /// thread's counter row was not at hand: the first count finds it).
    StealUncounted,
    /// We took the byte, but someone holds pending: it must be given back
    /// ([`pv_give_back`](RawQSpinLockWith::pv_give_back)).
    PendingHeld,
    /// The CAS failed: the lock is held.
    Failed,
}

#[cfg(any(loom, target_arch = "x86_64"))]
impl FastTry {
    /// Every outcome, at its discriminant (how the callee-save thunk's
    /// target gets it back from a register).
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    const ALL: [FastTry; 4] = [
        Self::Plain,
        Self::StealUncounted,
        Self::PendingHeld,
        Self::Failed,
    ];
}

/// Acquisition token bit: the lock was taken as a paravirt slow-path owner
/// (locked byte `LOCKED_PV`). The other bits are the futex address of a
/// successor whose wake-up the lazy baton pass left to our unlock, or 0.
const TOKEN_SLOW_OWNER: usize = 1;

/// The tail value for MCS node `level` of thread `index`.
#[inline(always)]
const fn encode_tail(index: u32, level: u32) -> u32 {
    (index << TAIL_THREAD_OFFSET) | (level << TAIL_LEVEL_OFFSET)
}

/// `(thread index, level)` of a non-zero tail.
#[inline(always)]
pub const fn decode_tail(tail: u32) -> (u32, u32) {
    (
        (tail & TAIL_THREAD_MASK) >> TAIL_THREAD_OFFSET,
        (tail & TAIL_LEVEL_MASK) >> TAIL_LEVEL_OFFSET,
    )
}

/// The MCS node a non-zero tail names. Slots are never freed, so this is
/// valid memory even if that thread has moved on.
#[inline(always)]
fn tail_node(tail: u32) -> &'static QNode {
    let (index, level) = decode_tail(tail);
    &thread::slot(index).mcs[level as usize]
}

/// One spin-wait: relax, then re-read. Every wait's *first* read is a plain
/// load at the call site; re-reads go through this.
///
/// Natively a re-read is `cpu_relax()` and a plain load: nothing else.
///
/// Under loom, a spin-wait needs care or the model never ends (both seen
/// with this lock under loom 0.7):
///
/// * loom may hand a spinning thread the same superseded store on every
///   re-read, yields notwithstanding (it tracks modification order as a
///   partial order), so a correct wait can spin forever and the model dies
///   at its branch limit;
/// * re-reading with an RMW instead (which reads the newest store) makes
///   two spinners' re-reads dependent writes, and DPOR then explores them
///   ping-ponging without end while the owner never runs.
///
/// So the first [`LOOM_SPIN_EXPLORE`] re-reads are plain loads, which loom
/// explores fully (stale values included: the reads a lock must tolerate).
/// After that the wait calls `loom::skip_branch()`, which stops exploring
/// alternatives for the rest of this execution: a spin read that does not
/// end the wait has no effect on other threads, so what could happen after
/// a longer spin is covered by the executions in which this thread was
/// scheduled later and spun less. The wait then finishes with `fetch_or(0)`
/// re-reads, which read the newest value (eventual visibility, which
/// hardware provides). The
/// ordering is kept, so an Acquire re-read still synchronises and a Relaxed
/// one does not. A wait that can never be satisfied (a livelocked lock)
/// still spins forever and loom reports it at its branch limit.
struct Spin {
    #[cfg(loom)]
    rereads: u32,
}

/// Under loom: plain-load re-reads explored per wait before pruning.
#[cfg(loom)]
pub const LOOM_SPIN_EXPLORE: u32 = 3;

impl Spin {
    #[inline(always)]
    fn new() -> Self {
        Spin {
            #[cfg(loom)]
            rereads: 0,
        }
    }

    #[cfg(not(loom))]
    #[inline(always)]
    fn reread<A: LockWord>(&mut self, a: &A, order: Ordering) -> u32 {
        cpu_relax();
        a.load(order)
    }

    #[cfg(not(loom))]
    #[inline(always)]
    fn reread_ptr(&mut self, a: &AtomicPtr<QNode>, order: Ordering) -> *mut QNode {
        cpu_relax();
        a.load(order)
    }

    /// Whether this re-read is past the explored ones.
    #[cfg(loom)]
    fn past_explored(&mut self) -> bool {
        cpu_relax();
        self.rereads += 1;
        if self.rereads == LOOM_SPIN_EXPLORE + 1 {
            loom::skip_branch();
        }
        self.rereads > LOOM_SPIN_EXPLORE
    }

    #[cfg(loom)]
    fn reread<A: LockWord>(&mut self, a: &A, order: Ordering) -> u32 {
        if self.past_explored() {
            a.fetch_or(0, order)
        } else {
            a.load(order)
        }
    }

    #[cfg(loom)]
    fn reread_ptr(&mut self, a: &AtomicPtr<QNode>, order: Ordering) -> *mut QNode {
        if self.past_explored() {
            let null = core::ptr::null_mut();
            // Success and failure both read the newest value.
            match a.compare_exchange(null, null, order, order) {
                Ok(p) | Err(p) => p,
            }
        } else {
            a.load(order)
        }
    }
}

/// Queued spinlock with a tunable pending hand-over wait and a choice of
/// slow path (see the [module docs](self)): `PARAVIRT = true` (the
/// default) spins only while it pays and then sleeps; `false` is the
/// kernel's native slow path, which spins until it gets the lock. `W`
/// stores the word: [`AtomicU32`] (4 bytes, the default here) or, on
/// x86-64, [`Word64`] (8 bytes; what [`RawQSpinLock`] uses).
/// Use it through [`crate::SpinLock`] or
/// `lock_api::Mutex<RawQSpinLockWith<N>, T>`.
#[cfg_attr(not(loom), repr(transparent))]
pub struct RawQSpinLockWith<
    const PENDING_LOOPS: u32,
    const PARAVIRT: bool = true,
    W: LockWord = AtomicU32,
> {
    word: W,
    /// Loom only: which rare paths an execution went through, so the model
    /// tests can prove they reached them.
    #[cfg(loom)]
    probe: Probe,
}

/// The queued spinlock with the kernel's pending wait (512 re-reads) and
/// the paravirt slow path: [`crate::SpinLock`]. On x86-64 its word is
/// eight bytes ([`Word64`]: the locked part alone in four, so the fast
/// path and the unlock are four-byte accesses; `word.rs` says why);
/// elsewhere the kernel's four.
pub type RawQSpinLock = RawQSpinLockWith<DEFAULT_PENDING_LOOPS, true, DefaultWord>;

/// [`RawQSpinLock`] in the kernel's four-byte word on every architecture:
/// where a lock must fit four bytes (`pthread_spinlock_t`, an embedded
/// wait lock).
pub type RawQSpinLock32 = RawQSpinLockWith<DEFAULT_PENDING_LOOPS, true, AtomicU32>;

/// The word of [`RawQSpinLock`]: eight bytes on x86-64.
#[cfg(all(target_arch = "x86_64", not(loom)))]
pub type DefaultWord = Word64;
/// The word of [`RawQSpinLock`]: the kernel's four bytes.
#[cfg(not(all(target_arch = "x86_64", not(loom))))]
pub type DefaultWord = AtomicU32;

/// The queued spinlock with the kernel's native slow path (pure spinning,
/// strict FIFO): for threads ≤ CPUs, and for the 2018 pending-bit
/// experiment exactly as the kernel runs it.
pub type RawQSpinLockNative = RawQSpinLockWith<DEFAULT_PENDING_LOOPS, false>;

impl<const PENDING_LOOPS: u32, const PARAVIRT: bool, W: LockWord>
    RawQSpinLockWith<PENDING_LOOPS, PARAVIRT, W>
{
    /// An unlocked lock.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self { word: W::UNLOCKED }
    }

    /// An unlocked lock (loom atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self {
            word: W::unlocked(),
            probe: Probe::default(),
        }
    }

    /// Acquire the lock, spinning until it is ours.
    #[inline]
    pub fn raw_lock(&self) {
        // No guard to carry a deferred wake-up: pass the baton eagerly.
        self.lock_with::<CORRECT, false>();
    }

    /// Acquire, passing the MCS baton lazily: the returned token must go
    /// to [`raw_unlock_token`](Self::raw_unlock_token), which then wakes
    /// the successor this acquisition left asleep. What `lock_api` uses.
    #[doc(hidden)]
    #[inline]
    pub fn raw_lock_token(&self) -> usize {
        self.lock_with::<CORRECT, true>()
    }

    /// Release a lock taken by [`raw_lock_token`](Self::raw_lock_token) or
    /// [`raw_try_lock`](Self::raw_try_lock) (token 0 or 1 as it returned
    /// `LOCKED` or `LOCKED_PV`; use [`raw_unlock`](Self::raw_unlock) if
    /// unknown).
    ///
    /// # Safety
    /// As for [`raw_unlock`](Self::raw_unlock), and `token` must be what
    /// the acquisition returned.
    #[doc(hidden)]
    #[inline]
    pub unsafe fn raw_unlock_token(&self, token: usize) {
        // SAFETY: forwarded.
        unsafe { self.unlock_token::<CORRECT>(token) }
    }

    /// Take the lock if it is free; never spins. The native lock also
    /// requires that nobody is queued; the paravirt one takes a free lock
    /// past a queue whose head does not hold the pending bit (a steal).
    #[inline]
    pub fn raw_try_lock(&self) -> bool {
        if PARAVIRT {
            return self.pv_try_lock_fast();
        }
        // Read first: a CAS on a contended line would steal it from the
        // owner for nothing.
        self.word.load(Relaxed) == 0
            // (0,0,0) -> (0,0,1). Acquire pairs with the Release of the
            // previous owner's unlock.
            && self.word.compare_exchange(0, LOCKED, Acquire, Relaxed).is_ok()
    }

    /// The fast path alone: `(0,0,0) -> (0,0,1)` with one CAS and no load
    /// first, and for the paravirt lock, past a queue whose head holds no
    /// pending bit, the steal `(n,0,0) -> (n,0,1)` from the word that CAS
    /// returned. Either way a plain owner, released by
    /// [`raw_unlock`](Self::raw_unlock). `Err(word)` with the word the CAS
    /// found when neither applies (held, pending, or an embedder's own
    /// mark in the pending byte), for the caller to handle, e.g. with
    /// [`raw_lock`](Self::raw_lock).
    ///
    /// For an embedder that must tell its own states apart: loading the
    /// word first to check them cost a 4-byte load just after the previous
    /// owner's x86 byte-store unlock, which waits for that store to leave
    /// the store buffer, and under contention a second transfer of the
    /// line.
    #[inline(always)]
    pub fn raw_lock_fast(&self) -> Result<(), u32> {
        self.fast_lock::<CORRECT>()
    }

    /// [`raw_lock_fast`](Self::raw_lock_fast), with the loom variants.
    #[inline(always)]
    fn fast_lock<const MODE: u8>(&self) -> Result<(), u32> {
        if PARAVIRT {
            return self.pv_fast_lock::<MODE>();
        }
        // (0,0,0) -> (0,0,1). Acquire pairs with the Release of the
        // previous owner's unlock.
        self.word
            .compare_exchange(0, LOCKED, Acquire, Relaxed)
            .map(|_| ())
    }

    /// Release the lock.
    ///
    /// # Safety
    /// The lock must be held, by this thread or by one that handed its
    /// ownership over (the guard is `Send`).
    #[inline]
    pub unsafe fn raw_unlock(&self) {
        self.unlock_with::<CORRECT>()
    }

    #[inline(always)]
    unsafe fn unlock_with<const MODE: u8>(&self) {
        // Paravirt: only an owner that took the lock on the fast path holds
        // plain LOCKED, and nobody else changes a plain locked byte
        // (waiters sleep only on LOCKED_PV), so this load of our own byte
        // is exact. Any other value needs the unlock that looks for a
        // sleeping head.
        if PARAVIRT && self.locked_byte() != LOCKED {
            // No successor's wake-up is left to an unlock without a token.
            // SAFETY: forwarded.
            return unsafe { self.unlock_slow_owner::<MODE>(TOKEN_SLOW_OWNER) };
        }
        // SAFETY: we hold the lock with a plain locked byte.
        unsafe { self.unlock_plain() }
    }

    /// The locked byte (`word() & LOCKED_MASK`), read at its own width
    /// where the paravirt fast path takes it so (x86-64): a 4-byte load
    /// right after that byte CAS, or after the byte-store unlock, waits for
    /// the store to leave the store buffer. A snapshot; exact for the
    /// owner.
    #[inline(always)]
    pub fn locked_byte(&self) -> u32 {
        self.word.locked()
    }

    /// The pending byte (`word() & PENDING_MASK`), read at its own width
    /// where the paravirt fast path takes the locked byte so (see
    /// [`locked_byte`](Self::locked_byte)). A snapshot: for an embedder
    /// that keeps its own mark in the pending byte's unused bits.
    #[inline(always)]
    pub fn pending_byte(&self) -> u32 {
        self.word.pending()
    }

    /// The paravirt trylock of `lock_api` and the raw API: the fast path,
    /// which takes a free, unreserved lock, past a queue or not, as a plain
    /// owner, and never spins.
    #[inline(always)]
    fn pv_try_lock_fast(&self) -> bool {
        // Read first: a CAS on a held lock's line would pull it from the
        // owner for nothing (a caller may retry in a loop).
        self.locked_byte() == 0 && self.fast_lock::<CORRECT>().is_ok()
    }

    /// Release the lock knowing how it was taken (the `lock_api` guard
    /// carries the acquisition token): a slow-path owner (paravirt only)
    /// looks for a sleeping head and then wakes the successor its lazy
    /// baton pass left asleep, if any; a plain owner just clears its byte,
    /// without first loading the word to find out which it is. That load
    /// cost ~2 ns per lock+unlock on the x86 fast path.
    ///
    /// # Safety
    /// As for [`raw_unlock`](Self::raw_unlock), and `token` must be what
    /// the acquisition returned.
    #[inline(always)]
    unsafe fn unlock_token<const MODE: u8>(&self, token: usize) {
        if PARAVIRT && token & TOKEN_SLOW_OWNER != 0 {
            // SAFETY: forwarded.
            unsafe { self.unlock_slow_owner::<MODE>(token) }
        } else {
            // SAFETY: a plain owner (fast path, or a trylock of a lock
            // with no queue, or any native acquisition).
            unsafe { self.unlock_plain() }
        }
    }

    /// A paravirt slow-path owner's unlock, `token` as its acquisition
    /// returned: the unlock that looks for a sleeping head, then the
    /// wake-up the lazy baton pass left to us. On x86-64 through the
    /// callee-save thunk (`callee_save.rs`), which runs
    /// [`unlock_slow_owner_now`](Self::unlock_slow_owner_now).
    ///
    /// # Safety
    /// We hold the lock as a slow-path owner.
    #[inline(always)]
    unsafe fn unlock_slow_owner<const MODE: u8>(&self, token: usize) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        // SAFETY: forwarded.
        unsafe {
            self.pv_unlock_saving::<MODE>(token)
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        self.unlock_slow_owner_now::<MODE>(token)
    }

    /// [`unlock_slow_owner`](Self::unlock_slow_owner)'s work, in place.
    #[inline(always)]
    fn unlock_slow_owner_now<const MODE: u8>(&self, token: usize) {
        self.unlock_pv::<MODE>();
        let successor = token & !TOKEN_SLOW_OWNER;
        if successor != 0 && MODE != DROP_DEFERRED_KICK {
            self.kick_successor(successor);
        }
    }

    /// Clear a plain (`LOCKED`) locked byte. The paravirt lock on x86-64
    /// stores the byte, the width its fast path took it at (`byte.rs`);
    /// the native lock, whose fast path is a 32-bit CAS, uses a byte store
    /// or an RMW, whichever the process found cheaper (see [`unlock`]).
    ///
    /// # Safety
    /// The caller holds the lock with the locked byte `LOCKED`.
    #[inline(always)]
    unsafe fn unlock_plain(&self) {
        // SAFETY: forwarded.
        unsafe { self.word.unlock_plain(PARAVIRT) }
    }

    /// Release the lock with the 32-bit `fetch_sub` whatever this process
    /// chose for plain owners ([`unlock`]): public (hidden) so `klock
    /// bench` can run both unlocks side by side (`qspinlock-rmw`).
    ///
    /// # Safety
    /// As for [`raw_unlock`](Self::raw_unlock).
    #[doc(hidden)]
    #[inline]
    pub unsafe fn raw_unlock_portable(&self) {
        if PARAVIRT && self.locked_byte() != LOCKED {
            return self.unlock_pv::<CORRECT>();
        }
        self.word.rmw_unlock();
    }

    /// Locked, pending or queued: a [`raw_try_lock`](Self::raw_try_lock) now
    /// would fail. A snapshot that may be stale at once.
    #[inline]
    pub fn is_contended_or_locked(&self) -> bool {
        self.word.load(Relaxed) != 0
    }

    /// The raw lock word, for tests and debugging.
    #[doc(hidden)]
    #[inline]
    pub fn word(&self) -> u32 {
        self.word.load(Relaxed)
    }

    /// Acquire; returns the acquisition token: 0 for a plain owner,
    /// [`TOKEN_SLOW_OWNER`] plus, with `LAZY`, the address of a successor
    /// left asleep, for a paravirt slow-path owner (see
    /// [`unlock_token`](Self::unlock_token)). Without `LAZY` the baton pass
    /// wakes the successor at once.
    #[inline(always)]
    fn lock_with<const MODE: u8, const LAZY: bool>(&self) -> usize {
        // Loom: see `pv_lock_slow` (the fast path's steal asks for the
        // thread id right after its acquiring RMW).
        #[cfg(loom)]
        let _ = thread::current_tid();
        // x86-64: the paravirt path's calls clobber no register the
        // caller keeps (`callee_save.rs`).
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        if PARAVIRT {
            return self.pv_lock_saving::<MODE, LAZY>();
        }
        match self.fast_lock::<MODE>() {
            Ok(()) => 0,
            Err(val) if PARAVIRT => TOKEN_SLOW_OWNER | self.pv_lock_slow::<MODE, LAZY>(val),
            Err(val) => {
                self.lock_slow::<MODE>(val);
                0
            }
        }
    }

    /// The paravirt fast path: take a free locked byte as a plain owner,
    /// `(0,0,0) -> (0,0,LOCKED)`, or past a queue, `(n,0,0) ->
    /// (n,0,LOCKED)`. `Err(word)` if the lock is held or someone holds
    /// pending.
    ///
    /// Past a queue this is a steal, taken as a *plain* owner: once some
    /// waiters sleep in the queue the tail is never 0 again, and nearly
    /// every acquisition is one running thread taking the lock back, so
    /// this is the contended steady state. As a plain owner its unlock is
    /// the plain one, not the CAS that looks for a sleeping head. The
    /// price: a queue head cannot sleep on a plain owner (its unlock would
    /// not wake it), so behind a stealer it yields and naps, and past the
    /// fairness bound it blocks steals with the pending bit.
    ///
    /// On x86-64 (and in the loom model) it works on the locked byte alone,
    /// the width of the plain unlock's store (`byte.rs` says why):
    ///
    /// ```text
    /// take the byte     (*,*,0) -> (*,*,LOCKED)   byte CAS, acquire
    /// pending clear     keep it: (0,0,LOCKED) or the steal (n,0,LOCKED)
    /// pending held      give it back (*,1,LOCKED) -> (*,1,0), byte store,
    ///                   release; Err
    /// ```
    ///
    /// A reserved hand-over (a pending waiter's, or a reserving head's) is
    /// never overtaken: we keep the byte only if pending was clear after we
    /// took it. The pending holder takes the lock with a CAS that expects a
    /// clear locked byte, so the moment we hold the byte only delays it.
    /// Elsewhere it is two word CASes: `(0,0,0) -> (0,0,LOCKED)`, then
    /// from the word that CAS returned, `(n,0,0) -> (n,0,LOCKED)`.
    #[inline(always)]
    fn pv_fast_lock<const MODE: u8>(&self) -> Result<(), u32> {
        #[cfg(any(loom, target_arch = "x86_64"))]
        {
            let tried = self.pv_fast_try::<MODE>();
            self.pv_fast_finish(tried)
        }
        #[cfg(not(any(loom, target_arch = "x86_64")))]
        {
            // Acquire (both CASes) pairs with the Release of the previous
            // owner's unlock.
            let Err(val) = self.word.compare_exchange(0, LOCKED, Acquire, Relaxed) else {
                return Ok(());
            };
            if val & LOCKED_PENDING_MASK != 0 {
                return Err(val);
            }
            self.word
                .compare_exchange(val, val | LOCKED, Acquire, Relaxed)?;
            events::inc(Event::PvLockStealing);
            Ok(())
        }
    }

    /// The paravirt fast path's steps on the locked byte (x86-64 and
    /// loom), without the calls its outcomes lead to: the CAS, the look at
    /// pending and tail, a steal's count while the thread's counter row is
    /// at hand. [`pv_fast_lock`](Self::pv_fast_lock) and, on x86-64, the
    /// acquisition through the callee-save thunk (`callee_save.rs`) both
    /// take these steps, so the loom models check the ones the lock runs.
    #[cfg(any(loom, target_arch = "x86_64"))]
    #[inline(always)]
    fn pv_fast_try<const MODE: u8>(&self) -> FastTry {
        // (*,*,0) -> (*,*,LOCKED). Acquire pairs with the Release of the
        // previous owner's unlock.
        if !self.word.cas_locked(0, LOCKED, Acquire) {
            return FastTry::Failed;
        }
        // The tail only to count a steal (the eight-byte word reads it
        // with the pending byte in one load).
        let rest = self.word.pending_and_tail(events::enabled() || cfg!(loom));
        // A plain owner with no queue behind it: one test of both. (Loom:
        // `acquired` at once, before the model can run a pending waiter
        // that comes after us, which would wait for us.)
        if rest & (PENDING_MASK | TAIL_MASK) == 0 {
            #[cfg(loom)]
            self.probe.acquired("fast path");
            return FastTry::Plain;
        }
        if rest & PENDING_MASK != 0 && MODE != STEAL_IGNORES_PENDING {
            return FastTry::PendingHeld;
        }
        #[cfg(loom)]
        self.probe.acquired("fast path");
        #[cfg(loom)]
        if rest & TAIL_MASK != 0 {
            Probe::hit(&self.probe.steals);
        }
        if events::enabled()
            && rest & TAIL_MASK != 0
            && !events::inc_if_cached(Event::PvLockStealing)
        {
            return FastTry::StealUncounted;
        }
        FastTry::Plain
    }

    /// What an outcome of [`pv_fast_try`](Self::pv_fast_try) leads to, as
    /// [`pv_fast_lock`](Self::pv_fast_lock) returns it: a steal's first
    /// count, the give-back, or the word for the slow path. Out of the
    /// fast path on x86-64 (reached through the thunk for every outcome
    /// but `Plain`).
    #[cfg(any(loom, target_arch = "x86_64"))]
    #[inline(always)]
    fn pv_fast_finish(&self, tried: FastTry) -> Result<(), u32> {
        match tried {
            FastTry::Plain => Ok(()),
            FastTry::StealUncounted => {
                events::inc(Event::PvLockStealing);
                Ok(())
            }
            FastTry::PendingHeld => Err(self.pv_give_back()),
            FastTry::Failed => Err(self.word.load(Relaxed)),
        }
    }

    /// The fast path took the locked byte, but someone holds pending: give
    /// the byte back, `(*,1,LOCKED) -> (*,1,0)`, and return the word for
    /// the slow path.
    #[cfg(any(loom, target_arch = "x86_64"))]
    #[cold]
    #[inline(never)]
    fn pv_give_back(&self) -> u32 {
        // SAFETY: our byte CAS just took the locked byte as LOCKED.
        unsafe { self.word.give_back() };
        #[cfg(loom)]
        Probe::hit(&self.probe.give_backs);
        self.word.load(Relaxed)
    }

    /// Take the lock if it is free; `Some(token)` as for
    /// [`lock_with`](Self::lock_with) (a trylock passes no baton).
    #[cfg(not(loom))]
    #[inline]
    fn try_lock_token(&self) -> Option<usize> {
        if PARAVIRT {
            return self.pv_try_lock_fast().then_some(0);
        }
        self.raw_try_lock().then_some(0)
    }

    /// Claim this thread's next MCS node: `(slot, level, node, tail)`, the
    /// node's `locked` and `next` cleared. Nesting (a signal handler locking
    /// while its thread is queued on another lock) uses the next level;
    /// `None` past the last one, or for a thread without a slot.
    #[inline(always)]
    fn claim_node() -> Option<(&'static ThreadSlot, u32, &'static QNode, u32)> {
        let slot = thread::current()?;
        // Relaxed: only this thread (and a signal handler on it, which
        // restores it before returning) touches mcs_depth.
        let level = slot.mcs_depth.load(Relaxed);
        if level as usize >= MCS_NODES {
            return None;
        }
        slot.mcs_depth.store(level + 1, Relaxed);
        // The claim must not sink below the node's initialisation, or a
        // signal handler arriving in between would reuse this node.
        compiler_fence(Release);
        match level {
            1 => events::inc(Event::LockUseNode2),
            2 => events::inc(Event::LockUseNode3),
            3 => events::inc(Event::LockUseNode4),
            _ => {}
        }
        let node: &QNode = &slot.mcs[level as usize];
        // Relaxed: published by xchg_tail's Release.
        node.locked.store(0, Relaxed);
        node.next.store(core::ptr::null_mut(), Relaxed);
        Some((slot, level, node, encode_tail(slot.index, level)))
    }

    /// Release the MCS node claimed at `level`.
    #[inline(always)]
    fn put_node(slot: &ThreadSlot, level: u32) {
        // Our last use of the node must not sink below its release.
        compiler_fence(Release);
        slot.mcs_depth.store(level, Relaxed);
    }

    /// Replace the tail bits, keep locked and pending: (m,p,l) -> (n,p,l).
    /// Returns the old word.
    ///
    /// A CAS loop over the whole word (no single 32-bit RMW can replace a
    /// bit field of unknown old value). It is lock-free rather than
    /// starvation-prone like the pending CAS loop that the 2018 qspinlock change removed: it only
    /// retries when another thread's RMW succeeded, and only the rare
    /// pending/locked flips race with it, not a stream of acquisitions.
    ///
    /// AcqRel on success: Release publishes our node's initialisation to
    /// the successor that will read our tail here (pairs with its Acquire);
    /// Acquire makes the predecessor's node initialisation (its `next =
    /// null`) happen-before our link store into it (pairs with its Release).
    #[inline(always)]
    fn xchg_tail(&self, tail: u32) -> u32 {
        let mut old = self.word.load(Relaxed);
        loop {
            let new = (old & LOCKED_PENDING_MASK) | tail;
            match self.word.compare_exchange_weak(old, new, AcqRel, Relaxed) {
                Ok(_) => return old,
                Err(now) => old = now,
            }
        }
    }
}

impl<const PENDING_LOOPS: u32, const PARAVIRT: bool, W: LockWord> Default
    for RawQSpinLockWith<PENDING_LOOPS, PARAVIRT, W>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<const PENDING_LOOPS: u32, const PARAVIRT: bool, W: LockWord> core::fmt::Debug
    for RawQSpinLockWith<PENDING_LOOPS, PARAVIRT, W>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let w = self.word();
        let (index, level) = decode_tail(w);
        f.debug_struct("RawQSpinLock")
            .field("pending_loops", &PENDING_LOOPS)
            .field("paravirt", &PARAVIRT)
            .field("tail_thread", &index)
            .field("tail_level", &level)
            .field("pending", &((w & PENDING_MASK) >> PENDING_OFFSET))
            .field("locked", &(w & LOCKED_MASK))
            .finish()
    }
}

/// Guard state of one acquisition (`lock_api`'s per-acquisition state):
/// whether the lock was taken as a paravirt slow-path owner, and the
/// successor whose wake-up the lazy baton pass left to the unlock. The
/// unlock then knows which release it needs without loading the lock word.
/// `Send`: ownership may move between threads, as the unlock touches only
/// the lock word and wakes the successor by address.
#[cfg(not(loom))]
#[derive(Debug)]
#[must_use]
pub struct QGuard {
    token: usize,
}

// SAFETY: mutual exclusion as argued in the module docs (and checked by the
// loom model); acquire on every successful lock path, release on unlock.
// Unlock touches only the lock word, so ownership may move between threads
// (GuardSend).
#[cfg(not(loom))]
unsafe impl<const PENDING_LOOPS: u32, const PARAVIRT: bool, W: LockWord> lock_api::RawMutex
    for RawQSpinLockWith<PENDING_LOOPS, PARAVIRT, W>
{
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type Guard = QGuard;

    // Always: with the byte accesses' inline assembly the compiler stopped
    // inlining it into its callers (`klock bench uncontended`: 4.6–4.7 ns a
    // pair with the call, 4.4 inlined).
    #[inline(always)]
    fn lock(&self) -> QGuard {
        QGuard {
            token: self.lock_with::<CORRECT, true>(),
        }
    }

    #[inline]
    fn try_lock(&self) -> Option<QGuard> {
        self.try_lock_token().map(|token| QGuard { token })
    }

    #[inline]
    unsafe fn unlock(&self, guard: QGuard) {
        // SAFETY: the caller passes the guard of a held lock, which says
        // how it was taken.
        unsafe { self.unlock_token::<CORRECT>(guard.token) }
    }

    /// True while the lock is held, a pending waiter is taking it over, or
    /// threads are queued: whenever a `try_lock` would fail.
    #[inline]
    fn is_locked(&self) -> bool {
        self.is_contended_or_locked()
    }
}

/// Deliberately broken variants, compiled only for loom, so the model tests
/// can show that the model fails on a lock that is wrong.
#[cfg(loom)]
#[doc(hidden)]
pub mod broken;
