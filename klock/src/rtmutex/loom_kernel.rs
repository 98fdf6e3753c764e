//! The kernel side of a PI futex, modelled for loom: a hash-bucket lock
//! protecting a FIFO of waiters (priorities are not modelled) and the set
//! of waiters the lock was handed to. It follows the kernel's rules for the
//! word: it sets `WAITERS` (by CAS, racing userspace) before a waiter
//! sleeps; takes a free word for the caller (adding `WAITERS` if others
//! are queued); reports `EDEADLK` when the caller owns the word; and on
//! unlock writes the top waiter's tid with `WAITERS`, or 0 when none is
//! left. A waiter "sleeps" by yielding until it is handed the lock or its
//! deadline passes (then it dequeues itself; `WAITERS` stays set and the
//! owner's unlock goes through the kernel, which clears it).

use super::{KErr, Probe, TID_MASK, WAITERS};
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

#[derive(Default)]
struct State {
    queue: Vec<u32>,
    handed: Vec<u32>,
}

/// A plain futex, modelled: the value check and the sleep happen under
/// the bucket lock, and a wake bumps a generation under it, so a wake
/// after the check is never lost — and a waiter nobody wakes blocks
/// for good, which loom reports as a deadlock.
pub(super) struct ParkFutex {
    hb: loom::sync::Mutex<u64>,
    cv: loom::sync::Condvar,
}

impl ParkFutex {
    pub(super) fn new() -> Self {
        Self {
            hb: loom::sync::Mutex::new(0),
            cv: loom::sync::Condvar::new(),
        }
    }

    /// FUTEX_WAIT: sleep while `word` reads `expected`, until a wake.
    pub(super) fn wait(&self, word: &AtomicU32, expected: u32) {
        let mut g = self.hb.lock().unwrap();
        if word.load(Relaxed) != expected {
            return;
        }
        let gen = *g;
        while *g == gen {
            g = self.cv.wait(g).unwrap();
        }
    }

    /// FUTEX_WAKE (all sleepers; they re-check, as after a spurious wake).
    pub(super) fn wake(&self) {
        *self.hb.lock().unwrap() += 1;
        self.cv.notify_all();
    }
}

pub(super) struct PiFutex {
    hb: loom::sync::Mutex<State>,
    /// Untimed waiters sleep here; unlock notifies all.
    cv: loom::sync::Condvar,
    /// Untimed waiters poll instead of sleeping (for the broken variant).
    pub(super) poll: core::sync::atomic::AtomicBool,
}

impl PiFutex {
    pub(super) fn new() -> Self {
        Self {
            hb: loom::sync::Mutex::new(State::default()),
            cv: loom::sync::Condvar::new(),
            poll: core::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(super) fn waiters(&self) -> usize {
        self.hb.lock().unwrap().queue.len()
    }

    pub(super) fn lock_pi(
        &self,
        word: &AtomicU32,
        me: u32,
        deadline: Option<u64>,
        probe: &Probe,
    ) -> Result<(), KErr> {
        {
            let mut st = self.hb.lock().unwrap();
            loop {
                let v = word.load(Relaxed);
                let owner = v & TID_MASK;
                if owner == me {
                    return Err(KErr::Deadlock);
                }
                if owner == 0 {
                    assert!(
                        st.queue.is_empty(),
                        "model: free word while waiters are queued (a waiter would be robbed)"
                    );
                    // The kernel takes the free lock for us. Acquire:
                    // pairs with the Release CAS of the last owner.
                    if word.compare_exchange(v, me, Acquire, Relaxed).is_ok() {
                        return Ok(());
                    }
                    continue;
                }
                if v & WAITERS == 0
                    && word
                        .compare_exchange(v, v | WAITERS, Relaxed, Relaxed)
                        .is_err()
                {
                    continue;
                }
                st.queue.push(me);
                break;
            }
            if deadline.is_none_or(|d| crate::sys::monotonic_ns() < d) {
                Probe::hit(&probe.kernel_sleeps);
            }
            if deadline.is_none() && !self.poll.load(core::sync::atomic::Ordering::Relaxed) {
                // Untimed: block on the condvar until handed the lock
                // (a waiter never handed the lock is a loom deadlock).
                loop {
                    if let Some(i) = st.handed.iter().position(|&t| t == me) {
                        st.handed.swap_remove(i);
                        return Ok(());
                    }
                    st = self.cv.wait(st).unwrap();
                }
            }
        }
        // Timed (or polling): yield until handed or the deadline passes;
        // the loom clock advances at every reading, so a timed wait
        // ends. A polling untimed waiter that is never handed the lock
        // spins until loom gives up on the execution (a clean failure;
        // a deadlock among blocked loom threads aborts the process).
        loop {
            loom::thread::yield_now();
            let mut st = self.hb.lock().unwrap();
            if let Some(i) = st.handed.iter().position(|&t| t == me) {
                st.handed.swap_remove(i);
                return Ok(());
            }
            if deadline.is_some_and(|d| crate::sys::monotonic_ns() >= d) {
                let i = st.queue.iter().position(|&t| t == me).unwrap();
                st.queue.remove(i);
                return Err(KErr::TimedOut);
            }
        }
    }

    pub(super) fn unlock_pi(&self, word: &AtomicU32, me: u32, probe: &Probe) -> Result<(), KErr> {
        let mut st = self.hb.lock().unwrap();
        loop {
            let v = word.load(Relaxed);
            if v & TID_MASK != me {
                return Err(KErr::Perm);
            }
            let (new, top) = if st.queue.is_empty() {
                (0, None)
            } else {
                (st.queue[0] | WAITERS, Some(st.queue[0]))
            };
            // Release: hand our critical section to the next owner
            // (the modelled kernel write stands for the real one, made
            // after the unlocker's Release fence).
            if word.compare_exchange(v, new, Release, Relaxed).is_ok() {
                if let Some(t) = top {
                    st.queue.remove(0);
                    st.handed.push(t);
                    Probe::hit(&probe.handoffs);
                    self.cv.notify_all();
                }
                return Ok(());
            }
        }
    }
}
