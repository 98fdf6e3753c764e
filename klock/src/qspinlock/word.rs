//! Where the lock word lives: four bytes, the kernel's layout, or (x86-64)
//! eight, with the locked byte alone in the low four.
//!
//! The algorithm works on one 32-bit value, `(tail, pending, locked)` as
//! the [module docs](super) draw it, whatever the storage; a [`LockWord`]
//! stores it and performs the word's operations:
//!
//! ```text
//! AtomicU32 (4 bytes, the kernel's)      Word64 (8 bytes, x86-64 only)
//!  31        16 15     8 7      0         63        48 47     40 39  32 31          0
//! +-----------+---------+--------+       +-----------+---------+------+--------------+
//! |   tail    | pending | locked |       |   tail    | pending |  0   | locked value |
//! +-----------+---------+--------+       +-----------+---------+------+--------------+
//! ```
//!
//! Why two: the paravirt fast path takes the lock with a CAS of the
//! locked part alone and a plain owner releases it with a plain store of
//! that part (`byte.rs`). In four bytes the locked part is a byte, and on
//! some CPUs a store narrower than four bytes makes the next locked
//! instruction on its line wait for it: on an AMD EPYC of family 25,
//! model 1, the fast path and plain unlock cost 3.8 ns a pair in four
//! bytes (byte CAS, load of the pending byte, byte store), 2.4–2.6 in
//! eight (4-byte CAS, 4-byte load, 4-byte store), and a ticket lock's
//! accesses 2.4–2.6, the data in the lock's line (`bench/access_widths.c`,
//! fifth table). In eight bytes every access of the fast path and of a
//! plain unlock is four bytes wide. The rarer paths (pending bit, tail,
//! head) stay read-modify-writes of the whole word, eight bytes. In
//! `klock bench` the gain shows in neither the 1-thread loop nor, beyond
//! the host's own variation, the contended cells
//! (`docs/locks/spinlock.md`); a tight loop of lock and unlock sees it.
//!
//! [`crate::SpinLock`] uses the eight-byte word on x86-64; the kernel's
//! four bytes stay for the native lock, the embedded wait lock of
//! [`crate::RawQRwLock`], and `pthread_spinlock_t` (an `int`) in the
//! preload library.

use crate::sync::{AtomicU32, Ordering};

mod sealed {
    pub trait Sealed {}
}

/// The storage of a queued spinlock's word: [`AtomicU32`] (4 bytes, the
/// kernel's layout) or, on x86-64, [`Word64`] (8 bytes). Sealed. Every
/// value in and out is the 32-bit word of the [module docs](super).
pub trait LockWord: sealed::Sealed + Send + Sync + Sized + 'static {
    /// A free lock.
    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const UNLOCKED: Self;
    /// A free lock (loom atomics are not `const`).
    #[cfg(loom)]
    fn unlocked() -> Self;
    /// The word.
    fn load(&self, order: Ordering) -> u32;
    /// CAS of the word.
    fn compare_exchange(&self, cur: u32, new: u32, ok: Ordering, err: Ordering)
        -> Result<u32, u32>;
    /// CAS of the word that may fail spuriously (where the hardware's
    /// CAS can: by default the strong one).
    #[inline(always)]
    fn compare_exchange_weak(
        &self,
        cur: u32,
        new: u32,
        ok: Ordering,
        err: Ordering,
    ) -> Result<u32, u32> {
        self.compare_exchange(cur, new, ok, err)
    }
    /// Store the word (tests and debugging: the lock never stores it whole).
    #[doc(hidden)]
    fn store(&self, val: u32, order: Ordering);
    /// `|=` on the word; returns the old word.
    fn fetch_or(&self, val: u32, order: Ordering) -> u32;
    /// `&=` on the word; returns the old word.
    fn fetch_and(&self, val: u32, order: Ordering) -> u32;
    /// Wrapping `+=` on the word; returns the old word.
    fn fetch_add(&self, val: u32, order: Ordering) -> u32;
    /// `(*,*,old) -> (*,*,new)` on the locked part alone, at the width of
    /// the plain unlock's store: true if it held `old`. `order` is what the
    /// loom model gives it (x86's `lock cmpxchg` is a full barrier).
    #[cfg(any(loom, target_arch = "x86_64"))]
    fn cas_locked(&self, old: u32, new: u32, order: Ordering) -> bool;
    /// The locked part (`word & LOCKED_MASK`), read at its own width.
    /// Exact for the lock's owner.
    fn locked(&self) -> u32;
    /// The pending byte shifted into place (`word & PENDING_MASK`), read
    /// at its own width. Read right after our own acquiring RMW of the
    /// word, it sees any pending bit set before that RMW.
    fn pending(&self) -> u32;
    /// The pending byte and, with `tail` (or where one load reads both),
    /// the tail: `word & (PENDING_MASK | TAIL_MASK)` as far as read, for
    /// the fast path right after its CAS of the locked part. The tail is
    /// only for the event counters and the loom probe.
    #[cfg(any(loom, target_arch = "x86_64"))]
    fn pending_and_tail(&self, tail: bool) -> u32;
    /// Give back a locked part we took but may not keep (someone holds
    /// pending): `(*,*,LOCKED) -> (*,*,0)`, the plain unlock's store. Not
    /// `unlock_plain(true)`: under loom this models the byte store as
    /// clearing the whole locked byte (`fetch_and`), which the loom model
    /// of a pending holder's broken blind add needs to catch it.
    ///
    /// # Safety
    /// The caller holds the locked part as `LOCKED`.
    #[cfg(any(loom, target_arch = "x86_64"))]
    unsafe fn give_back(&self);
    /// `(*,*,LOCKED) -> (*,*,0)`, release: the unlock of a plain owner.
    /// `paravirt`: the lock's fast path took the locked part at its own
    /// width, so the release is a store of it (x86-64); otherwise the
    /// four-byte word uses the unlock this process measured cheaper
    /// ([`super::unlock`]).
    ///
    /// # Safety
    /// The caller holds the lock with the locked part `LOCKED`.
    unsafe fn unlock_plain(&self, paravirt: bool);
    /// The same as an RMW of the word (`fetch_sub`), release.
    fn rmw_unlock(&self);
    /// The 32-bit futex word a queue head sleeps on (the whole word, or
    /// the locked part's four bytes), and [`futex_val`](Self::futex_val)
    /// the value it holds when the word is `v`.
    fn futex(&self) -> &AtomicU32;
    /// See [`futex`](Self::futex).
    fn futex_val(v: u32) -> u32;
    /// The address a thread records while in a slow path (`fork.rs`),
    /// tagged with the storage: bit 0 set for [`Word64`].
    fn record(&self) -> usize;
}

impl sealed::Sealed for AtomicU32 {}

/// In a forked child: `(n, p, l) -> (0, 0, l)` on the word at `record`
/// ([`LockWord::record`]).
///
/// # Safety
/// `record` came from [`LockWord::record`] of a lock that is still there.
pub(super) unsafe fn forget_waiters(record: usize) {
    let o = crate::sync::Ordering::Relaxed;
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    if record & WORD64_TAG != 0 {
        // SAFETY: forwarded; the tag says it is a Word64.
        let w = unsafe { &*((record & !WORD64_TAG) as *const Word64) };
        w.fetch_and(super::LOCKED_MASK, o);
        return;
    }
    // SAFETY: forwarded; untagged, an AtomicU32.
    let w = unsafe { &*(record as *const AtomicU32) };
    w.fetch_and(super::LOCKED_MASK, o);
}

/// [`LockWord::record`]'s tag of a [`Word64`] (an 8-aligned address has
/// bit 0 clear).
#[cfg(all(target_arch = "x86_64", not(loom)))]
const WORD64_TAG: usize = 1;

/// The eight-byte lock word (x86-64): the locked part alone in the low
/// four bytes, pending and tail in the high four (see the module docs),
/// so that the fast path's CAS, the plain owner's unlock and the loads
/// of the locked part are four bytes wide.
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[repr(transparent)]
pub struct Word64(core::sync::atomic::AtomicU64);

#[cfg(all(target_arch = "x86_64", not(loom)))]
mod word64 {
    use super::super::LOCKED_MASK;
    use super::{LockWord, Word64, WORD64_TAG};
    use crate::sync::{AtomicU32, Ordering};
    use core::sync::atomic::AtomicU64;
    use core::sync::atomic::Ordering::Relaxed;

    impl super::sealed::Sealed for Word64 {}

    /// The 32-bit word in its eight-byte place: the locked part stays,
    /// pending and tail move up 32 bits. A bit permutation, so `|` and `&`
    /// commute with it.
    #[inline(always)]
    const fn wide(v: u32) -> u64 {
        ((v & !LOCKED_MASK) as u64) << 32 | (v & LOCKED_MASK) as u64
    }

    /// The inverse of [`wide`]. Bits 8–39 of the eight bytes are never set.
    #[inline(always)]
    const fn narrow(w: u64) -> u32 {
        (w >> 32) as u32 | (w as u32 & LOCKED_MASK)
    }

    /// The pending byte's offset in the eight bytes (little-endian).
    const PENDING_AT: usize = 5;

    impl Word64 {
        /// The `BYTES` (1 or 4) bytes at offset `OFF`, zero-extended.
        #[inline(always)]
        fn load_at<const OFF: usize, const BYTES: usize>(&self) -> u32 {
            let v: u32;
            macro_rules! load {
                ($insn:literal) => {
                    // SAFETY: `self` is a live, 8-byte aligned word; bytes
                    // 0–7 are its own. A plain load has no side effect.
                    unsafe {
                        core::arch::asm!(
                            concat!($insn, " ptr [{p} + {off}]"),
                            p = in(reg) self.0.as_ptr(),
                            off = const OFF,
                            v = out(reg) v,
                            options(nostack, preserves_flags, readonly)
                        )
                    }
                };
            }
            if BYTES == 4 {
                load!("mov {v:e}, dword");
            } else {
                load!("movzx {v:e}, byte");
            }
            v
        }

        /// A four-byte store of 0 over the locked part, release (an x86
        /// store is one).
        ///
        /// # Safety
        /// The caller holds the locked part as `LOCKED`.
        #[inline(always)]
        unsafe fn store_unlocked(&self) {
            debug_assert_eq!(
                narrow(self.0.load(Relaxed)) & LOCKED_MASK,
                super::super::LOCKED,
                "unlock of an unlocked qspinlock"
            );
            // SAFETY: as in `load_at`. No `nomem`: the critical section's
            // accesses stay before it.
            unsafe {
                core::arch::asm!(
                    "mov dword ptr [{p}], 0",
                    p = in(reg) self.0.as_ptr(),
                    options(nostack, preserves_flags)
                );
            }
        }
    }

    impl LockWord for Word64 {
        #[allow(clippy::declare_interior_mutable_const)]
        const UNLOCKED: Self = Word64(AtomicU64::new(0));

        #[inline(always)]
        fn load(&self, order: Ordering) -> u32 {
            narrow(self.0.load(order))
        }
        #[inline(always)]
        fn compare_exchange(
            &self,
            cur: u32,
            new: u32,
            ok: Ordering,
            err: Ordering,
        ) -> Result<u32, u32> {
            self.0
                .compare_exchange(wide(cur), wide(new), ok, err)
                .map(narrow)
                .map_err(narrow)
        }
        fn store(&self, val: u32, order: Ordering) {
            self.0.store(wide(val), order)
        }
        #[inline(always)]
        fn fetch_or(&self, val: u32, order: Ordering) -> u32 {
            narrow(self.0.fetch_or(wide(val), order))
        }
        #[inline(always)]
        fn fetch_and(&self, val: u32, order: Ordering) -> u32 {
            narrow(self.0.fetch_and(wide(val), order))
        }
        /// A CAS loop: an addition of the 32-bit word carries across the
        /// locked part into pending, which the eight bytes keep apart.
        /// Only the native pending path adds (`(*,1,0) -> (*,0,1)`); the
        /// eight-byte word is the paravirt lock's.
        fn fetch_add(&self, val: u32, order: Ordering) -> u32 {
            let mut v = self.0.load(Relaxed);
            loop {
                let new = wide(narrow(v).wrapping_add(val));
                match self.0.compare_exchange_weak(v, new, order, Relaxed) {
                    Ok(old) => return narrow(old),
                    Err(now) => v = now,
                }
            }
        }
        #[inline(always)]
        fn cas_locked(&self, old: u32, new: u32, order: Ordering) -> bool {
            let _ = order;
            let seen: u32;
            // SAFETY: as in `load_at`; bytes 0–3 are the locked part.
            // `lock cmpxchg` is a full barrier, and the block has no
            // `nomem`, so the critical section's accesses stay after it.
            unsafe {
                core::arch::asm!(
                    "lock cmpxchg dword ptr [{p}], {new:e}",
                    p = in(reg) self.0.as_ptr(),
                    new = in(reg) new,
                    inout("eax") old => seen,
                    options(nostack)
                );
            }
            seen == old
        }
        #[inline(always)]
        fn locked(&self) -> u32 {
            self.load_at::<0, 4>()
        }
        #[inline(always)]
        fn pending(&self) -> u32 {
            self.load_at::<PENDING_AT, 1>() << super::super::PENDING_OFFSET
        }
        /// One four-byte load of the high half: pending and tail together
        /// (a throwaway build without the tail's separate load measured
        /// 4.7–4.9 ns a pair in `klock bench uncontended` against 5.0–5.2
        /// with it; the one load for both was not timed on its own).
        #[inline(always)]
        fn pending_and_tail(&self, tail: bool) -> u32 {
            let _ = tail;
            self.load_at::<4, 4>()
        }
        #[inline(always)]
        unsafe fn give_back(&self) {
            // SAFETY: forwarded.
            unsafe { self.store_unlocked() }
        }
        #[inline(always)]
        unsafe fn unlock_plain(&self, paravirt: bool) {
            let _ = paravirt;
            // SAFETY: forwarded. Four bytes: no forwarding stall for the
            // next CAS, native or paravirt alike.
            unsafe { self.store_unlocked() }
        }
        #[inline(always)]
        fn rmw_unlock(&self) {
            let old = self
                .0
                .fetch_sub(u64::from(super::super::LOCKED), Ordering::Release);
            debug_assert_eq!(
                narrow(old) & LOCKED_MASK,
                super::super::LOCKED,
                "unlock of an unlocked qspinlock"
            );
        }
        #[inline(always)]
        fn futex(&self) -> &AtomicU32 {
            // SAFETY: bytes 0–3 of a live, 8-aligned word. Only the futex
            // syscall reads through this reference (no Rust-level access
            // of another width is made through it).
            unsafe { &*self.0.as_ptr().cast::<AtomicU32>() }
        }
        #[inline(always)]
        fn futex_val(v: u32) -> u32 {
            v & LOCKED_MASK
        }
        #[inline(always)]
        fn record(&self) -> usize {
            self as *const Self as usize | WORD64_TAG
        }
    }

    #[cfg(test)]
    mod tests {
        use super::super::super::{LOCKED, LOCKED_PV, PENDING, SLOW, TAIL_MASK};
        use super::*;

        const TAIL: u32 = 0xabc0_0000;

        #[test]
        fn the_word_round_trips_through_its_eight_byte_place() {
            for v in [
                0,
                LOCKED,
                PENDING | LOCKED_PV,
                TAIL | PENDING | SLOW,
                u32::MAX,
            ] {
                assert_eq!(narrow(wide(v)), v);
            }
            assert_eq!(wide(TAIL | PENDING | LOCKED), 0xabc0_0100_0000_0001);
        }

        #[test]
        fn word_operations_act_on_the_32_bit_word() {
            let w = Word64(AtomicU64::new(0));
            assert_eq!(w.fetch_or(PENDING, Relaxed), 0);
            assert_eq!(
                w.compare_exchange(PENDING, TAIL | PENDING, Relaxed, Relaxed),
                Ok(PENDING)
            );
            assert_eq!(
                w.compare_exchange(0, LOCKED, Relaxed, Relaxed),
                Err(TAIL | PENDING)
            );
            // clear_pending_set_locked as the native path adds it.
            let to_locked = LOCKED.wrapping_sub(PENDING);
            assert_eq!(w.fetch_add(to_locked, Relaxed), TAIL | PENDING);
            assert_eq!(w.load(Relaxed), TAIL | LOCKED);
            assert_eq!(w.0.load(Relaxed), 0xabc0_0000_0000_0001);
            assert_eq!(w.fetch_and(LOCKED_MASK, Relaxed), TAIL | LOCKED);
            assert_eq!(w.load(Relaxed), LOCKED);
        }

        #[test]
        fn the_narrow_accesses_touch_their_own_part() {
            let w = Word64(AtomicU64::new(wide(TAIL | PENDING)));
            assert!(w.cas_locked(0, LOCKED, Relaxed));
            assert_eq!(w.load(Relaxed), TAIL | PENDING | LOCKED);
            assert!(!w.cas_locked(0, LOCKED, Relaxed), "took a held lock");
            assert_eq!(w.locked(), LOCKED);
            assert_eq!(w.pending(), PENDING);
            assert_eq!(w.pending_and_tail(false), TAIL | PENDING);
            // SAFETY: held as LOCKED.
            unsafe { w.unlock_plain(true) };
            assert_eq!(w.load(Relaxed), TAIL | PENDING);
            w.0.store(wide(TAIL_MASK & 0x8000_0000 | LOCKED), Relaxed);
            assert_eq!(
                w.pending_and_tail(true),
                0x8000_0000,
                "a tail in the top byte alone"
            );
            assert_eq!(w.pending(), 0);
            w.rmw_unlock();
            assert_eq!(w.load(Relaxed), TAIL_MASK & 0x8000_0000);
            w.0.store(wide(SLOW), Relaxed);
            assert_eq!(w.futex().load(Relaxed), Word64::futex_val(TAIL | SLOW));
            assert!(
                !w.cas_locked(LOCKED_PV, 0, Relaxed),
                "cleared a sleeping head's mark"
            );
            assert_eq!(w.record() & !WORD64_TAG, &w as *const Word64 as usize);
        }
    }
}
