//! The rwlocks the calling thread read-holds, by address, and how many
//! times (see [`crate::rwlock`]: each thread takes the rw-semaphore's read
//! lock once per rwlock and counts its further read holds here).
//!
//! The first [`INLINE`] entries live in a thread-local array of `Cell`s,
//! reached with one `%fs`-relative address (see [`with`]); a thread that
//! read-holds more rwlocks at once spills the rest into a `Vec`
//! ([`SPILL`]), looked at only while the array is full.

use core::cell::{Cell, RefCell};

/// Entries kept inline.
pub const INLINE: usize = 8;

/// One thread's table. Invariant: the spill list is empty unless all
/// [`INLINE`] inline entries are in use.
pub struct Reads {
    /// Inline entries in use: `lock[..len]` and `count[..len]`.
    len: Cell<usize>,
    lock: [Cell<usize>; INLINE],
    count: [Cell<u32>; INLINE],
}

// Each thread's table, zeroed (an empty table), in the static TLS block:
// the library is loaded at start-up (`LD_PRELOAD`), so its thread-locals
// can be reached the initial-exec way, one `%fs`-relative address, where
// `thread_local!` in a shared library calls `__tls_get_addr` (the
// general-dynamic way: with the table reached without those two calls a
// read lock+unlock pair took 10.4-10.6 ns instead of 13.1-13.9 on a
// 2-vCPU AMD guest). A library `dlopen`ed later gets this block from glibc's
// reserve of static TLS.
// The block is 8-byte aligned (`.p2align 3` below).
const _: () = assert!(core::mem::align_of::<Reads>() <= 8);
core::arch::global_asm!(
    ".pushsection .tbss.klock_preload_reads,\"awT\",@nobits",
    ".p2align 3",
    // Global for the library's other object files, hidden from others.
    ".globl klock_preload_reads",
    ".hidden klock_preload_reads",
    ".type klock_preload_reads,@tls_object",
    ".size klock_preload_reads, {size}",
    "klock_preload_reads:",
    ".zero {size}",
    ".popsection",
    size = const core::mem::size_of::<Reads>(),
);

std::thread_local! {
    /// Entries past the inline ones (rarely used).
    static SPILL: RefCell<Vec<(usize, u32)>> = const { RefCell::new(Vec::new()) };
}

/// What [`Reads::drop_hold`] found.
pub enum Dropped {
    /// One of several holds: the rw-semaphore stays read-held.
    Counted,
    /// The thread's last hold: release the rw-semaphore's read lock.
    Last,
    /// No hold recorded for this thread.
    None,
    /// The spill list is gone (the thread is exiting) and the lock was not
    /// among the inline entries.
    Unknown,
}

/// What [`Reads::find`] found: where the entry is.
enum Found {
    Inline(usize),
    Spilled(usize),
    No,
    /// The spill list would have to be looked at and is gone.
    Unknown,
}

/// Run `f` on the calling thread's table.
#[inline(always)]
pub fn with<R>(f: impl FnOnce(&Reads) -> R) -> R {
    let t: *const Reads;
    // SAFETY: the initial-exec access to the block above: its offset from
    // the thread pointer, from the GOT, plus the thread pointer (`%fs:0`
    // holds it on x86-64). Reads memory only.
    unsafe {
        core::arch::asm!(
            "mov {t}, qword ptr [rip + klock_preload_reads@GOTTPOFF]",
            "add {t}, qword ptr fs:[0]",
            t = out(reg) t,
            options(pure, readonly, nostack)
        );
    }
    // SAFETY: the block is this thread's, lives as long as the thread,
    // is sized for a `Reads` (the directive's `size`) and aligned for one
    // (asserted above), and all-zero is a valid, empty `Reads`; it is
    // touched only through this shared reference's `Cell`s, on this
    // thread (rwlocks are not async-signal-safe, so no signal handler of
    // this thread runs a lock in the middle of an update).
    f(unsafe { &*t })
}

impl Reads {
    #[inline(always)]
    fn find(&self, a: usize) -> Found {
        let len = self.len.get();
        if let Some(i) = self.lock[..len].iter().position(|l| l.get() == a) {
            return Found::Inline(i);
        }
        if len < INLINE {
            return Found::No;
        }
        Self::find_spilled(a)
    }

    #[cold]
    #[inline(never)]
    fn find_spilled(a: usize) -> Found {
        match SPILL.try_with(|s| s.borrow().iter().position(|e| e.0 == a)) {
            Ok(Some(i)) => Found::Spilled(i),
            Ok(None) => Found::No,
            Err(_) => Found::Unknown,
        }
    }

    /// Whether the thread read-holds `a`.
    #[inline]
    pub fn holds(&self, a: usize) -> bool {
        matches!(self.find(a), Found::Inline(_) | Found::Spilled(_))
    }

    /// If the thread read-holds `a`, count one more hold: `Some(0)`, or
    /// `Some(EAGAIN)` at the maximum. `None` if it holds none (or its
    /// spill list is gone).
    #[inline(always)]
    pub fn bump(&self, a: usize) -> Option<libc::c_int> {
        // One more hold of `c`, or EAGAIN at the maximum.
        let more = |c: &mut u32| match c.checked_add(1) {
            Some(n) => {
                *c = n;
                0
            }
            None => libc::EAGAIN,
        };
        match self.find(a) {
            Found::Inline(i) => {
                let mut c = self.count[i].get();
                let rc = more(&mut c);
                self.count[i].set(c);
                Some(rc)
            }
            Found::Spilled(i) => SPILL.try_with(|s| more(&mut s.borrow_mut()[i].1)).ok(),
            Found::No | Found::Unknown => None,
        }
    }

    /// Record the thread's first read hold of `a` (nothing if it belongs
    /// in the spill list and that is gone: that hold is then not counted).
    #[inline]
    pub fn record(&self, a: usize) {
        let len = self.len.get();
        if len < INLINE {
            self.lock[len].set(a);
            self.count[len].set(1);
            self.len.set(len + 1);
        } else {
            let _ = SPILL.try_with(|s| s.borrow_mut().push((a, 1)));
        }
    }

    /// Drop one of the thread's read holds of `a`.
    #[inline]
    pub fn drop_hold(&self, a: usize) -> Dropped {
        match self.find(a) {
            Found::Inline(i) => {
                let n = self.count[i].get();
                if n > 1 {
                    self.count[i].set(n - 1);
                    return Dropped::Counted;
                }
                self.remove_inline(i);
                Dropped::Last
            }
            Found::Spilled(i) => SPILL
                .try_with(|s| {
                    let mut s = s.borrow_mut();
                    if s[i].1 > 1 {
                        s[i].1 -= 1;
                        return Dropped::Counted;
                    }
                    s.swap_remove(i);
                    Dropped::Last
                })
                .unwrap_or(Dropped::Unknown),
            Found::No => Dropped::None,
            Found::Unknown => Dropped::Unknown,
        }
    }

    /// Free inline entry `i`: the last inline entry moves into it, and a
    /// spilled entry, if any, into the last (keeping the invariant).
    #[cold]
    #[inline(never)]
    fn remove_inline_refill(&self, i: usize) {
        let last = INLINE - 1;
        self.lock[i].set(self.lock[last].get());
        self.count[i].set(self.count[last].get());
        match SPILL.try_with(|s| s.borrow_mut().pop()).ok().flatten() {
            Some((a, n)) => {
                self.lock[last].set(a);
                self.count[last].set(n);
            }
            None => self.len.set(last),
        }
    }

    #[inline]
    fn remove_inline(&self, i: usize) {
        let len = self.len.get();
        if len == INLINE {
            return self.remove_inline_refill(i);
        }
        let last = len - 1;
        self.lock[i].set(self.lock[last].get());
        self.count[i].set(self.count[last].get());
        self.len.set(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Holds of 3 × INLINE locks, some twice, dropped in an order that
    /// refills the inline entries from the spill list: every lookup and
    /// count stays right.
    #[test]
    fn spilled_holds_are_found_counted_and_refilled() {
        std::thread::spawn(|| {
            with(|t| {
                let n = 3 * INLINE;
                let addr = |k: usize| 0x1000 + 64 * k;
                for k in 0..n {
                    assert!(!t.holds(addr(k)));
                    assert_eq!(t.bump(addr(k)), None);
                    t.record(addr(k));
                    if k % 3 == 0 {
                        assert_eq!(t.bump(addr(k)), Some(0));
                    }
                }
                assert!((0..n).all(|k| t.holds(addr(k))));
                assert!(!t.holds(addr(n)));
                assert!(matches!(t.drop_hold(addr(n)), Dropped::None));
                // Drop the early (inline) ones first, so spilled ones move in.
                for k in 0..n {
                    if k % 3 == 0 {
                        assert!(matches!(t.drop_hold(addr(k)), Dropped::Counted));
                    }
                    assert!(matches!(t.drop_hold(addr(k)), Dropped::Last), "{k}");
                    assert!(!t.holds(addr(k)));
                    assert!((k + 1..n).all(|j| t.holds(addr(j))), "after {k}");
                }
                assert_eq!(t.len.get(), 0);
                assert!(SPILL.with(|s| s.borrow().is_empty()));
            })
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_count_stops_at_its_maximum() {
        std::thread::spawn(|| {
            with(|t| {
                t.record(0x40);
                t.count[0].set(u32::MAX);
                assert_eq!(t.bump(0x40), Some(libc::EAGAIN));
                assert!(matches!(t.drop_hold(0x40), Dropped::Counted));
            })
        })
        .join()
        .unwrap();
    }
}
