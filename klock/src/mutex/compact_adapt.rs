//! The compact mutex's adaptive spin tests ([`crate::spinadapt`]), kept
//! beside the locks: a 40-byte lock has no room for a test's ~48 bytes.
//!
//! A fixed table of test states, one cache line each, indexed by a hash of
//! the lock's address and tagged with that address. A lock claims its slot
//! when it is first contended and marks its owner word `COUNTING` (see
//! [`super`]); while marked, its acquisitions go through the
//! slow path and are counted there by the new holder, so a lock that is
//! never contended pays nothing. A slot whose test has stopped counting
//! (a whole run without contention) may be claimed by another lock that
//! hashes to it; the lock that lost it notices at its next counted
//! acquisition (the tag no longer names it) and clears its mark. A lock
//! that finds its slot busy with another lock's running test gets no test
//! and spins as the kernel does.

use super::{RawMutexCompact, C_COUNTING};
use crate::events::{self, Event};
use crate::spinadapt::{self, Decision, SpinAdapt};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// log2 of the number of slots.
const SLOT_BITS: u32 = 8;

/// One test state and the address of the lock it belongs to (0: none). A
/// cache line each: two hot locks' holders count in different lines.
#[repr(align(64))]
struct Slot {
    lock: AtomicUsize,
    adapt: SpinAdapt,
}

static TABLE: [Slot; 1 << SLOT_BITS] = [const {
    Slot {
        lock: AtomicUsize::new(0),
        adapt: SpinAdapt::new(),
    }
}; 1 << SLOT_BITS];

/// The slot of the lock at `addr` (Fibonacci hashing of the address).
#[inline]
fn slot(addr: usize) -> &'static Slot {
    let h = ((addr as u64) >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOT_BITS);
    &TABLE[h as usize]
}

/// The test of the lock at `addr`, if it holds its slot.
#[inline]
pub(super) fn find(addr: usize) -> Option<&'static SpinAdapt> {
    let s = slot(addr);
    // Relaxed: the tag only says whose statistics these are.
    (s.lock.load(Relaxed) == addr).then_some(&s.adapt)
}

/// Claim a test for the contended lock at `addr`: its own slot, a free
/// one, or one whose test has stopped counting. `None` when another lock's
/// test runs in the slot.
pub(super) fn claim(addr: usize) -> Option<&'static SpinAdapt> {
    let s = slot(addr);
    let cur = s.lock.load(Relaxed);
    if cur == addr {
        return Some(&s.adapt);
    }
    if cur != 0 && s.adapt.counting() {
        return None;
    }
    // Relaxed: as in find. Two lockers of different locks racing for an
    // idle slot: one wins, the other gets no test.
    s.lock
        .compare_exchange(cur, addr, Relaxed, Relaxed)
        .ok()
        .map(|_| {
            s.adapt.reset();
            &s.adapt
        })
}

impl RawMutexCompact {
    /// This lock's adaptive spin test ([`crate::spinadapt`]), while it runs
    /// one: from its first contention until a whole run passes without
    /// contention (its state lives in a table beside the locks, see
    /// [`RawMutexCompact`]'s docs).
    pub fn spin_test(&self) -> Option<&'static SpinAdapt> {
        if self.owner.load(Relaxed) & C_COUNTING == 0 {
            return None;
        }
        find(self.addr())
    }

    /// The adaptive test's verdict, or `true` for a lock without a test.
    #[inline]
    pub(super) fn spin_pays(&self) -> bool {
        if self.owner.load(Relaxed) & C_COUNTING == 0 || !spinadapt::enabled() {
            return true;
        }
        find(self.addr()).is_none_or(|t| t.spin())
    }

    /// The lock's address, which names its test in the table.
    #[inline]
    pub(super) fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// A locker found the lock taken: claim a test for it if it has none
    /// (and the tests are on), and tell the test. Not under loom (the test
    /// reads the clock; it only steers spinning).
    pub(super) fn adapt_contended(&self) {
        if cfg!(loom) || !spinadapt::enabled() {
            return;
        }
        if self.owner.load(Relaxed) & C_COUNTING != 0 {
            if let Some(t) = find(self.addr()) {
                t.contended();
            }
        } else if let Some(t) = claim(self.addr()) {
            t.contended();
            // Relaxed: a hint for the holders to count; the word's other
            // bits are unchanged by this RMW.
            self.owner.fetch_or(C_COUNTING, Relaxed);
        }
    }

    /// Count an acquisition for the test; the caller has just taken the
    /// lock. A lock whose test stopped counting, or whose slot another
    /// lock took, clears its mark and is back on the fast paths.
    #[inline]
    pub(super) fn count_acquisition(&self) {
        self.count_acquisition_seen(self.owner.load(Relaxed));
    }

    /// [`count_acquisition`](Self::count_acquisition) by a caller that
    /// knows the word its acquiring CAS wrote, `w`, and so spares the
    /// load of the word just after that CAS. A mark set after it (another
    /// locker's `adapt_contended`) misses this one acquisition, which
    /// only steers spinning.
    #[inline]
    pub(super) fn count_acquisition_seen(&self, w: u32) {
        if w & C_COUNTING == 0 {
            return;
        }
        let still = match find(self.addr()) {
            Some(t) => {
                if let Some(d) = t.on_unlock() {
                    events::inc(match d {
                        Decision::Spin => Event::MutexAdaptSpin,
                        Decision::NoSpin => Event::MutexAdaptNoSpin,
                    });
                }
                t.counting()
            }
            None => false,
        };
        if !still {
            // Relaxed: as in adapt_contended.
            self.owner.fetch_and(!C_COUNTING, Relaxed);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_lock_claims_its_slot_and_finds_it_again() {
        // Other tests' locks may hold slots: take an address whose slot
        // is free to claim.
        let (a, t) = (0..64)
            .map(|_| Box::into_raw(Box::new(0u64)) as usize)
            .find_map(|a| claim(a).map(|t| (a, t)))
            .expect("a claimable slot");
        assert!(core::ptr::eq(t, find(a).unwrap()));
        // A second lock hashing to the same slot waits while the test
        // counts, and takes the slot once it has stopped.
        let other = (1usize..)
            .map(|i| a + i * 8)
            .find(|&b| core::ptr::eq(slot(b), slot(a)))
            .unwrap();
        t.contended();
        assert!(t.counting());
        assert!(claim(other).is_none());
        t.reset();
        assert!(claim(other).is_some());
        assert!(find(a).is_none(), "the first lock lost its slot");
    }
}
