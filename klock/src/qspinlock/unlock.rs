//! How a plain owner of the **native** lock clears its locked byte on
//! x86-64: a byte store (the kernel's x86 unlock) or a 32-bit `fetch_sub`,
//! whichever is cheaper on the CPU the process runs on. (The paravirt
//! lock, [`crate::SpinLock`], takes the locked byte with a byte CAS on
//! x86-64 and always releases it with the byte store: the same width, so
//! neither waits for the other; `byte.rs`.)
//!
//! The byte store is a plain store, like a TTAS lock's; but the native
//! lock's next acquisition is a 32-bit CAS on the same word, and some CPUs cannot
//! forward a 1-byte store to a 4-byte load: the CAS then waits for the
//! store to leave the store buffer. On a 2-vCPU AMD EPYC guest, three
//! alternating runs of `KLOCK_SPIN_UNLOCK=store|rmw|auto klock bench
//! uncontended --locks qspinlock,qspinlock-native,ttas --runs 5 --duration
//! 200ms` gave 6.4–6.7 ns per lock+unlock with the byte store, 4.7–7.2 with
//! the RMW and 4.2–6.3 with the automatic choice (the RMW there), TTAS
//! 3.4–5.7. On a 2-vCPU Intel Xeon guest the byte store was the faster
//! (`bench/results/2core-verdict-spinlock.json`, 1 thread: 100,192 kop/s
//! with it against 72,779 for `qspinlock-rmw`, which also loaded the word
//! before its RMW). Both are correct for a
//! plain owner (nobody else changes a set `LOCKED` byte), so the choice is
//! made per process: by [`Config::spin_unlock`](crate::config::Config::spin_unlock)
//! or `KLOCK_SPIN_UNLOCK` (`store`, `rmw`, `auto`), else by timing both on
//! a private word at the first plain unlock (about 0.3 ms, once). Until
//! then, and on other architectures and under loom, the RMW is used.

use crate::sync::AtomicU32;
#[cfg(all(target_arch = "x86_64", not(loom)))]
use core::sync::atomic::AtomicU8;
use core::sync::atomic::Ordering::Release;
#[cfg(all(target_arch = "x86_64", not(loom)))]
use core::sync::atomic::Ordering::{Acquire, Relaxed};

/// Not chosen yet: unlock with the RMW, then choose.
#[cfg(all(target_arch = "x86_64", not(loom)))]
const UNDECIDED: u8 = 0;
/// Unlock with a byte store of the locked byte.
#[cfg(all(target_arch = "x86_64", not(loom)))]
const STORE: u8 = 1;
/// Unlock with a 32-bit `fetch_sub`.
#[cfg(all(target_arch = "x86_64", not(loom)))]
const RMW: u8 = 2;

/// The process's choice. Relaxed everywhere: it orders nothing, only says
/// which of two correct unlocks to use.
#[cfg(all(target_arch = "x86_64", not(loom)))]
static PLAIN_UNLOCK: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Clear a plain (`LOCKED`) locked byte in `word`.
///
/// # Safety
/// The caller holds the lock with the locked byte `LOCKED`.
#[inline(always)]
pub(super) unsafe fn unlock_plain(word: &AtomicU32) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    {
        let mode = PLAIN_UNLOCK.load(Relaxed);
        if mode == STORE {
            // SAFETY: forwarded.
            unsafe { store_unlock(word) };
        } else {
            rmw_unlock(word);
            if mode == UNDECIDED {
                choose();
            }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    rmw_unlock(word);
}

/// (*,*,LOCKED) -> (*,*,0), one 32-bit RMW. Under loom this also models
/// the x86 byte store: it clears the byte without looking at the rest.
/// Release pairs with the Acquire of whoever takes the lock next: the
/// fast-path / trylock CAS, a pending waiter's locked-byte wait, or the
/// queue head's wait for (n,0,0).
#[inline(always)]
pub(super) fn rmw_unlock(word: &AtomicU32) {
    let old = word.fetch_sub(super::LOCKED, Release);
    debug_assert_eq!(
        old & super::LOCKED_MASK,
        super::LOCKED,
        "unlock of an unlocked qspinlock"
    );
}

/// (*,*,1) -> (*,*,0) as a plain byte store of the locked byte, the
/// kernel's x86 unlock. An aligned byte store is atomic on x86 and
/// coherent with the 32-bit RMWs of the slow paths, which never change a
/// set locked byte (only its owner clears it). x86 stores are release
/// stores (TSO); the asm block has no `nomem`, so the compiler keeps the
/// critical section's accesses before it. Pairs with the same acquires as
/// the RMW.
///
/// # Safety
/// The caller holds the lock with the locked byte `LOCKED`.
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline(always)]
pub(super) unsafe fn store_unlock(word: &AtomicU32) {
    debug_assert_eq!(
        word.load(Relaxed) & super::LOCKED_MASK,
        super::LOCKED,
        "unlock of an unlocked qspinlock"
    );
    // SAFETY: `word` is a live, 4-byte aligned u32; byte 0 is the locked
    // byte on little-endian x86.
    unsafe {
        core::arch::asm!(
            "mov byte ptr [{p}], 0",
            p = in(reg) word.as_ptr(),
            options(nostack, preserves_flags)
        );
    }
}

/// Make the process's choice (once; a racing second chooser keeps the
/// first one's result).
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[cold]
#[inline(never)]
fn choose() {
    use crate::config::SpinUnlock;
    let by_store = match crate::config::spin_unlock() {
        SpinUnlock::Store => true,
        SpinUnlock::Rmw => false,
        SpinUnlock::Auto => store_is_faster(),
    };
    let mode = if by_store { STORE } else { RMW };
    let _ = PLAIN_UNLOCK.compare_exchange(UNDECIDED, mode, Relaxed, Relaxed);
}

/// Time both unlocks after the fast-path CAS on a private word: the best
/// of several short rounds each, interleaved, so that a preemption or a
/// frequency change in one round does not decide.
#[cfg(all(target_arch = "x86_64", not(loom)))]
fn store_is_faster() -> bool {
    const ROUNDS: usize = 8;
    const ITERS: u32 = 2_000;
    let word = AtomicU32::new(0);
    // ns for ITERS fast-path acquisitions, each released by `unlock`.
    let time = |unlock: &dyn Fn(&AtomicU32)| {
        let t0 = crate::sys::monotonic_ns();
        for _ in 0..ITERS {
            let w = core::hint::black_box(&word);
            let ok = w
                .compare_exchange(0, super::LOCKED, Acquire, Relaxed)
                .is_ok();
            debug_assert!(ok);
            unlock(w);
        }
        crate::sys::monotonic_ns() - t0
    };
    let (mut best_store, mut best_rmw) = (u64::MAX, u64::MAX);
    for _ in 0..ROUNDS {
        // SAFETY: `time` just took the private word, a plain LOCKED byte.
        best_store = best_store.min(time(&|w| unsafe { store_unlock(w) }));
        best_rmw = best_rmw.min(time(&|w| rmw_unlock(w)));
    }
    best_store <= best_rmw
}

/// The unlock a plain owner uses in this process: `Some(true)` for the
/// byte store, `Some(false)` for the RMW, `None` while not chosen yet (the
/// first plain unlock chooses). Always `Some(false)` off x86-64.
pub fn plain_unlock_by_store() -> Option<bool> {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    {
        match PLAIN_UNLOCK.load(Relaxed) {
            STORE => Some(true),
            RMW => Some(false),
            _ => None,
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    Some(false)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::config::{Config, SpinUnlock};
    use core::sync::atomic::Ordering::Relaxed;

    /// Pending and tail bits that other threads may have set meanwhile.
    const OTHERS: u32 = super::super::PENDING | 0xabc0_0000;

    #[test]
    fn both_unlocks_clear_only_the_locked_byte() {
        let word = AtomicU32::new(OTHERS | super::super::LOCKED);
        rmw_unlock(&word);
        assert_eq!(word.load(Relaxed), OTHERS);
        #[cfg(target_arch = "x86_64")]
        {
            word.store(OTHERS | super::super::LOCKED, Relaxed);
            // SAFETY: the word is ours and holds a plain LOCKED byte.
            unsafe { store_unlock(&word) };
            assert_eq!(word.load(Relaxed), OTHERS);
        }
    }

    #[test]
    fn the_first_plain_unlock_chooses_and_the_choice_is_fixed() {
        let lock = lock_api::Mutex::<crate::RawQSpinLockNative, u32>::new(0);
        *lock.lock() += 1;
        let chosen = plain_unlock_by_store();
        assert!(chosen.is_some(), "no unlock chosen after a plain unlock");
        let word = AtomicU32::new(super::super::LOCKED);
        // SAFETY: the word is ours and holds a plain LOCKED byte.
        unsafe { unlock_plain(&word) };
        assert_eq!(word.load(Relaxed), 0);
        assert_eq!(plain_unlock_by_store(), chosen, "the choice changed");
        let e = Config::new()
            .spin_unlock(SpinUnlock::Store)
            .apply()
            .unwrap_err();
        assert_eq!(e.too_late(), ["spin_unlock"]);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn timing_both_unlocks_gives_an_answer_quickly() {
        let t0 = std::time::Instant::now();
        let _ = store_is_faster();
        assert!(t0.elapsed() < std::time::Duration::from_secs(1));
    }
}
