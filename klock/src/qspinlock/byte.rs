//! The paravirt lock's fast path at the width of its unlock: one byte, in
//! the kernel's four-byte word (`AtomicU32` as a [`LockWord`], below). The
//! eight-byte word of `word.rs` does the same at four bytes.
//!
//! A plain owner releases the lock with a store of the locked byte (the
//! kernel's x86 unlock). If the next acquisition is a 32-bit CAS of the
//! whole word, the CPU cannot forward the 1-byte store still in its store
//! buffer to that 4-byte load, and the CAS waits for the store to drain:
//! on a 2-vCPU AMD EPYC guest a 4-byte CAS after a 1-byte store cost 6.0
//! ns a pair, a 4-byte CAS released by a 32-bit `fetch_sub` 4.1, and a
//! 1-byte CAS released by a 1-byte store 2.2, with a load of the pending
//! byte in between or not (`bench/access_widths.c`,
//! `bench/results/2core-amd-access-widths.txt`). So on x86-64 the paravirt
//! fast path takes the locked byte alone, `(*,*,0) -> (*,*,LOCKED)` with a
//! byte `lock cmpxchg`, then reads the pending byte (a different byte: no
//! forwarding needed) and gives the byte back if someone holds pending.
//! The slow path's steal (`0 -> LOCKED_PV`) and a slow owner's unlock
//! (`LOCKED_PV -> 0`, failing on a sleeping head's mark) are byte CASes
//! too, as in the kernel's paravirt lock: a byte CAS next to a 32-bit RMW
//! of the same word costs as much again (one thread, byte CAS with a
//! 32-bit `fetch_sub` unlock: 138–141 thousand lock pairs a second against
//! 226–229 with the byte store). Every hot access touches only bytes that
//! the previous store to them had the same width as, so none waits for the
//! store buffer; the rarer paths (pending bit, tail, head) stay 32-bit.
//!
//! Uncontended, in a loop with nothing else (`examples/handovers.rs` at 1
//! thread), a pair costs 2.2 ns against 4.1 for the 32-bit CAS and RMW; in
//! `klock bench uncontended` 4.4 against 4.1 and a ticket lock's 3.3,
//! where the code around the lock (the guard's token, the call to the slow
//! path, the checks) makes the difference, not these instructions
//! (`docs/locks/spinlock.md`, "Where the uncontended nanosecond goes", has
//! the figures; the contended ones are there too).
//!
//! Rust's memory model has no mixed-size atomics, so the byte accesses are
//! inline assembly, as the byte-store unlock is; x86 makes an aligned byte
//! access atomic and coherent with the 32-bit RMWs of the slow paths.
//! Under loom the same steps are modelled on the 32-bit word: a byte CAS
//! as a CAS loop that changes only the locked byte and fails only when that
//! byte differs from the expected one, the byte loads as loads of the word.

use super::word::LockWord;
use crate::sync::AtomicU32;
use crate::sync::Ordering;
#[cfg(not(all(target_arch = "x86_64", not(loom))))]
use crate::sync::Ordering::Relaxed;
#[cfg(loom)]
use crate::sync::Ordering::Release;

/// `(*,*,old) -> (*,*,new)` on the locked byte alone: true if it held
/// `old`. `order` is the ordering the loom model gives it (x86's `lock
/// cmpxchg` is a full barrier).
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline(always)]
fn cas(word: &AtomicU32, old: u8, new: u8, order: Ordering) -> bool {
    let _ = order;
    let seen: u8;
    // SAFETY: `word` is a live, 4-byte aligned u32; byte 0 is the locked
    // byte on little-endian x86. `lock cmpxchg` is a full barrier, and the
    // block has no `nomem`, so the compiler keeps the critical section's
    // accesses after it.
    unsafe {
        core::arch::asm!(
            "lock cmpxchg byte ptr [{p}], {new}",
            p = in(reg) word.as_ptr(),
            new = in(reg_byte) new,
            inout("al") old => seen,
            options(nostack)
        );
    }
    seen == old
}

/// Loom model of the byte CAS: a CAS loop over the word that changes only
/// the locked byte and fails only when it differs from `old`.
#[cfg(loom)]
fn cas(word: &AtomicU32, old: u8, new: u8, order: Ordering) -> bool {
    let (old, new) = (u32::from(old), u32::from(new));
    let mut w = old;
    loop {
        match word.compare_exchange(w, (w & !super::LOCKED_MASK) | new, order, Relaxed) {
            Ok(_) => return true,
            Err(now) if now & super::LOCKED_MASK != old => return false,
            Err(now) => w = now,
        }
    }
}

/// Byte `OFF` of the word (0 the locked byte, 1 the pending byte), or with
/// `HALF` the half-word at `OFF` (2: the tail), loaded at that width on
/// x86-64. Relaxed. Under loom, and on other architectures (where every
/// access to the word is 32 bits wide), a load of the word.
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline(always)]
fn load_at<const OFF: usize, const HALF: bool>(word: &AtomicU32) -> u32 {
    let v: u32;
    // One template, the operand's width spliced in.
    macro_rules! movzx {
        ($width:literal) => {
            // SAFETY: as in `cas`; bytes 0–3 are the word's, little-endian.
            unsafe {
                core::arch::asm!(
                    concat!("movzx {v:e}, ", $width, " ptr [{p} + {off}]"),
                    p = in(reg) word.as_ptr(),
                    off = const OFF,
                    v = out(reg) v,
                    options(nostack, preserves_flags)
                )
            }
        };
    }
    if HALF {
        movzx!("word");
    } else {
        movzx!("byte");
    }
    v
}

/// [`load_at`] as a load of the whole word.
#[cfg(not(all(target_arch = "x86_64", not(loom))))]
#[inline(always)]
fn load_at<const OFF: usize, const HALF: bool>(word: &AtomicU32) -> u32 {
    let mask = if HALF { 0xffff } else { 0xff };
    (word.load(Relaxed) >> (8 * OFF)) & mask
}

/// The pending byte, shifted into place (`& PENDING_MASK` of the word).
/// Read right after our own acquiring RMW of the word, it sees any pending
/// bit set before that RMW (read-after-RMW coherence; on x86 the `lock
/// cmpxchg` also drains our stores).
#[inline(always)]
fn pending(word: &AtomicU32) -> u32 {
    load_at::<1, false>(word) << super::PENDING_OFFSET
}

/// The locked byte. Exact for the lock's owner (nobody else changes a set
/// locked byte that reads `LOCKED`).
#[inline(always)]
fn locked(word: &AtomicU32) -> u32 {
    load_at::<0, false>(word)
}

/// The tail in place (`& TAIL_MASK` of the word): non-zero while a queue
/// is there. Only for the event counters and the loom probe.
#[cfg(any(loom, target_arch = "x86_64"))]
#[inline(always)]
fn tail(word: &AtomicU32) -> u32 {
    // One half-word load: two byte loads cost 4–5% of the 8- and
    // 16-thread rate with the counters on (`klock bench spinlock`).
    load_at::<2, true>(word) << 16
}

/// Give back a locked byte we took but may not keep (someone holds
/// pending): `(*,*,LOCKED) -> (*,*,0)`, the plain unlock. Release: a
/// waiter that reads the cleared byte must still synchronise with the
/// owner before us (our CAS acquired from it).
///
/// # Safety
/// The caller holds the locked byte as `LOCKED`.
#[cfg(any(loom, target_arch = "x86_64"))]
#[inline(always)]
unsafe fn give_back(word: &AtomicU32) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: forwarded.
    unsafe {
        super::unlock::store_unlock(word)
    };
    #[cfg(loom)]
    word.fetch_and(!super::LOCKED_MASK, Release);
}

/// The kernel's four-byte word: the locked part is the locked byte.
impl LockWord for AtomicU32 {
    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const UNLOCKED: Self = AtomicU32::new(0);
    #[cfg(loom)]
    fn unlocked() -> Self {
        AtomicU32::new(0)
    }
    #[inline(always)]
    fn load(&self, order: Ordering) -> u32 {
        AtomicU32::load(self, order)
    }
    #[inline(always)]
    fn compare_exchange(
        &self,
        cur: u32,
        new: u32,
        ok: Ordering,
        err: Ordering,
    ) -> Result<u32, u32> {
        AtomicU32::compare_exchange(self, cur, new, ok, err)
    }
    #[inline(always)]
    fn compare_exchange_weak(
        &self,
        cur: u32,
        new: u32,
        ok: Ordering,
        err: Ordering,
    ) -> Result<u32, u32> {
        AtomicU32::compare_exchange_weak(self, cur, new, ok, err)
    }
    fn store(&self, val: u32, order: Ordering) {
        AtomicU32::store(self, val, order)
    }
    #[inline(always)]
    fn fetch_or(&self, val: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_or(self, val, order)
    }
    #[inline(always)]
    fn fetch_and(&self, val: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_and(self, val, order)
    }
    #[inline(always)]
    fn fetch_add(&self, val: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_add(self, val, order)
    }
    #[cfg(any(loom, target_arch = "x86_64"))]
    #[inline(always)]
    fn cas_locked(&self, old: u32, new: u32, order: Ordering) -> bool {
        cas(self, old as u8, new as u8, order)
    }
    #[inline(always)]
    fn locked(&self) -> u32 {
        locked(self)
    }
    #[inline(always)]
    fn pending(&self) -> u32 {
        pending(self)
    }
    #[cfg(any(loom, target_arch = "x86_64"))]
    #[inline(always)]
    fn pending_and_tail(&self, tail: bool) -> u32 {
        // Byte and half-word loads: a 4-byte load right after the byte CAS
        // would wait for it to leave the store buffer.
        if tail {
            pending(self) | self::tail(self)
        } else {
            pending(self)
        }
    }
    #[cfg(any(loom, target_arch = "x86_64"))]
    #[inline(always)]
    unsafe fn give_back(&self) {
        // SAFETY: forwarded.
        unsafe { give_back(self) }
    }
    #[inline(always)]
    unsafe fn unlock_plain(&self, paravirt: bool) {
        // The paravirt fast path took the byte with a byte CAS: release it
        // at that width (x86-64).
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        if paravirt {
            // SAFETY: forwarded.
            unsafe { super::unlock::store_unlock(self) };
            return;
        }
        let _ = paravirt;
        // SAFETY: forwarded.
        unsafe { super::unlock::unlock_plain(self) }
    }
    #[inline(always)]
    fn rmw_unlock(&self) {
        super::unlock::rmw_unlock(self)
    }
    #[inline(always)]
    fn futex(&self) -> &AtomicU32 {
        self
    }
    #[inline(always)]
    fn futex_val(v: u32) -> u32 {
        v
    }
    #[inline(always)]
    fn record(&self) -> usize {
        self as *const AtomicU32 as usize
    }
}

#[cfg(all(test, not(loom), target_arch = "x86_64"))]
mod tests {
    use super::super::word::LockWord;
    use super::super::{LOCKED, PENDING, TAIL_MASK};
    use super::*;
    use core::sync::atomic::Ordering::{Acquire, Relaxed};

    #[test]
    fn the_byte_cas_takes_only_a_clear_locked_byte_and_keeps_the_rest() {
        let w = AtomicU32::new(0xabc0_0000 | PENDING);
        assert!(cas(&w, 0, LOCKED as u8, Acquire));
        assert_eq!(w.load(Relaxed), 0xabc0_0000 | PENDING | LOCKED);
        assert!(
            !cas(&w, 0, LOCKED as u8, Acquire),
            "took a held locked byte"
        );
        assert_eq!(w.load(Relaxed), 0xabc0_0000 | PENDING | LOCKED);
        w.store(0xabc0_0000 | super::super::LOCKED_PV, Relaxed);
        assert!(
            !cas(&w, 0, LOCKED as u8, Acquire),
            "took a slow-path owner's byte"
        );
    }

    #[test]
    fn the_byte_loads_read_their_own_bytes() {
        let w = AtomicU32::new(0xabc0_0000 | PENDING | LOCKED);
        assert_eq!(pending(&w), PENDING);
        assert_eq!(locked(&w), LOCKED);
        assert_eq!(tail(&w), 0xabc0_0000);
        assert_eq!(w.pending_and_tail(true), 0xabc0_0000 | PENDING);
        assert_eq!(w.pending_and_tail(false), PENDING);
        w.store(LOCKED, Relaxed);
        assert_eq!(pending(&w), 0);
        assert_eq!(tail(&w), 0);
        w.store(TAIL_MASK & 0x0004_0000, Relaxed);
        assert_eq!(tail(&w), 0x0004_0000);
        w.store(TAIL_MASK & 0x8000_0000, Relaxed);
        assert_eq!(tail(&w), 0x8000_0000, "a tail in the top byte alone");
        assert_eq!(locked(&w), 0);
        w.store(super::super::PENDING_MASK, Relaxed);
        assert_eq!(pending(&w), super::super::PENDING_MASK);
    }

    #[test]
    fn give_back_clears_only_the_locked_byte() {
        let w = AtomicU32::new(0xabc0_0000 | PENDING | LOCKED);
        // SAFETY: the word is ours and holds a plain LOCKED byte.
        unsafe { give_back(&w) };
        assert_eq!(w.load(Relaxed), 0xabc0_0000 | PENDING);
    }
}
