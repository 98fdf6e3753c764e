//! klock's own locks as the benchmark sees them, with their event counters.
//!
//! Most are [`RawM`] / [`RawRw`] over klock's raw lock types, which say
//! here ([`RawInfo`]) whether their waiters sleep, whether they inherit
//! priority and which event counters are theirs; only the locks that
//! behave differently from their raw type are types of their own.

use super::peers::{BenchLock, TryBench};
use super::raw::{Downgrade, RawInfo, RawM, RawRw, Timed};
use klock::events::{snapshot, LockType};
use std::time::Duration;

impl<const PL: u32, const PV: bool, W: klock::qspinlock::LockWord> RawInfo
    for klock::RawQSpinLockWith<PL, PV, W>
{
    /// Never sleeps on the native path; the paravirt path's sleeping is the
    /// lock's own business, and pi treats both as spinlocks.
    const SLEEPS: bool = false;
    fn events() -> Vec<(&'static str, u64)> {
        snapshot(LockType::QSpinLock)
    }
}

impl RawInfo for klock::RawQRwLock {
    /// Never sleeps: a pure spinlock.
    const SLEEPS: bool = false;
    fn events() -> Vec<(&'static str, u64)> {
        snapshot(LockType::QRwLock)
    }
}

impl<const SPIN: u8, W: klock::mutex::WaitLockRaw> RawInfo for klock::RawMutexWith<SPIN, W> {
    /// Sleeps unless its wait-list lock spins forever (`mutex-qwait`).
    const SLEEPS: bool = W::SLEEPS;
    fn events() -> Vec<(&'static str, u64)> {
        snapshot(LockType::Mutex)
    }
}

impl<const SPIN: u8> RawInfo for klock::RawRtMutexWith<SPIN> {
    const PRIORITY_INHERITANCE: bool = true;
    fn events() -> Vec<(&'static str, u64)> {
        snapshot(LockType::RtMutex)
    }
}

impl<const R: u8, const A: u8> RawInfo for klock::RawRwSemWith<R, A> {
    fn events() -> Vec<(&'static str, u64)> {
        snapshot(LockType::Rwsem)
    }
}

/// `klock::RawQSpinLockWith<PENDING_LOOPS, PARAVIRT>` (the queued
/// spinlock in the kernel's four-byte word; paravirt slow path by default).
pub type QSpin<const PENDING_LOOPS: u32, const PARAVIRT: bool = true> =
    RawM<klock::RawQSpinLockWith<PENDING_LOOPS, PARAVIRT>>;

/// `klock::RawQSpinLock`, the lock of `klock::SpinLock` (on x86-64 its
/// word is eight bytes).
pub type QSpinDefault = RawM<klock::RawQSpinLock>;

/// `klock::RawQRwLock` (the queued rwlock).
pub type QRw = RawRw<klock::RawQRwLock>;

/// `klock::RawMutexWith<SPIN, W>`: the optimistic-spinning mutex with a
/// fixed spin mode and wait-list lock.
pub type KMutex<const SPIN: u8, W = klock::mutex::WaitLock> =
    RawM<klock::RawMutexWith<SPIN, W>, Timed>;

/// `klock::RawRtMutexWith<SPIN>`: the PI mutex, userspace top-waiter
/// spinning on ([`klock::rtmutex::RT_SPIN`]) or off ([`klock::rtmutex::NO_RT_SPIN`]).
pub type RtMutexLock<const SPIN: u8> = RawM<klock::RawRtMutexWith<SPIN>, Timed>;

/// RtMutex with userspace top-waiter spinning (and non-RT waiters waiting
/// in userspace, unless `KLOCK_RT_USER_WAIT=0`).
pub type RtSpin = RtMutexLock<{ klock::rtmutex::RT_SPIN }>;
/// RtMutex with top-waiter spinning, every other waiter in the kernel.
pub type RtKwait = RtMutexLock<{ klock::rtmutex::RT_SPIN_KWAIT }>;
/// RtMutex without userspace spinning (the kernel's LOCK_PI2 only).
pub type RtNoSpin = RtMutexLock<{ klock::rtmutex::NO_RT_SPIN }>;

/// `klock::RawRwSemWith<RSPIN, ADAPTIVE>` (the rw-semaphore).
pub type RwSem<const RSPIN: u8, const ADAPTIVE: u8> =
    RawRw<klock::RawRwSemWith<RSPIN, ADAPTIVE>, Timed, Downgrade>;

/// `klock::mutex::RawMutexCompact`: the mutex in 40 bytes, the one
/// `klock-preload` puts inside a `pthread_mutex_t`. Driven as the preload
/// drives it: by tid (looked up once per acquisition), with no guard.
/// It counts no events.
pub struct KMutexCompact(klock::mutex::RawMutexCompact);

impl KMutexCompact {
    /// Run `f` holding the lock, which `tid` (the caller) has just taken.
    #[inline]
    fn holding<T>(&self, tid: u32, f: impl FnOnce() -> T) -> T {
        let r = f();
        // SAFETY: `tid` is this thread's and holds the lock.
        unsafe { self.0.unlock_as(tid) };
        r
    }
}

impl BenchLock for KMutexCompact {
    fn new() -> Self {
        Self(klock::mutex::RawMutexCompact::new())
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        let tid = klock::thread::current_tid();
        self.0.lock_as(tid);
        self.holding(tid, f)
    }
}

impl TryBench for KMutexCompact {
    const TIMED: bool = true;

    #[inline]
    fn try_write<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        if self.0.try_lock() {
            Ok(self.holding(klock::thread::current_tid(), f))
        } else {
            Err(f)
        }
    }
    fn try_write_for<R, F: FnOnce() -> R>(&self, d: Duration, f: F) -> Result<R, F> {
        if self.0.lock_until_ns(klock::sys::deadline_after(d)) {
            Ok(self.holding(klock::thread::current_tid(), f))
        } else {
            Err(f)
        }
    }
}

/// The (paravirt) queued spinlock, always unlocked with an RMW of its
/// word, beside `qspinlock`, whose plain unlock on x86-64 is a store of
/// the locked part, the width of its fast path's CAS.
pub struct QSpinRmw(klock::RawQSpinLock);

impl BenchLock for QSpinRmw {
    /// Never sleeps: a pure spinlock.
    const SLEEPS: bool = false;

    fn new() -> Self {
        Self(klock::RawQSpinLock::new())
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.raw_lock();
        let r = f();
        // SAFETY: locked just above, by this thread.
        unsafe { self.0.raw_unlock_portable() };
        r
    }
    fn events() -> Vec<(&'static str, u64)> {
        snapshot(LockType::QSpinLock)
    }
}

impl TryBench for QSpinRmw {
    #[inline]
    fn try_write<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        if self.0.raw_try_lock() {
            let r = f();
            // SAFETY: locked just above, by this thread.
            unsafe { self.0.raw_unlock_portable() };
            Ok(r)
        } else {
            Err(f)
        }
    }
}

// --- the exact oracle: any klock lock under the eBPF oracle.

/// Lock `L` run under the exact eBPF owner-running oracle
/// ([`klock::oncpu::OracleKind::Bpf`]; feature `bpf`, root). The bench
/// attaches the program for this lock's runs only.
pub struct OnBpf<L>(L);

impl<L: BenchLock> BenchLock for OnBpf<L> {
    const PRIORITY_INHERITANCE: bool = L::PRIORITY_INHERITANCE;
    const SHARED: bool = L::SHARED;
    const SLEEPS: bool = L::SLEEPS;

    fn new() -> Self {
        Self(L::new())
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.write(f)
    }
    #[inline]
    fn read<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.read(f)
    }
    fn events() -> Vec<(&'static str, u64)> {
        L::events()
    }
    fn oracle() -> Option<klock::oncpu::OracleKind> {
        Some(klock::oncpu::OracleKind::Bpf)
    }
}

impl<L: TryBench> TryBench for OnBpf<L> {
    const TRY: bool = L::TRY;
    const TIMED: bool = L::TIMED;
    const DOWNGRADE: bool = L::DOWNGRADE;
    #[inline]
    fn try_write<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        self.0.try_write(f)
    }
    #[inline]
    fn try_read<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        self.0.try_read(f)
    }
    fn try_write_for<R, F: FnOnce() -> R>(&self, d: std::time::Duration, f: F) -> Result<R, F> {
        self.0.try_write_for(d, f)
    }
    fn try_read_for<R, F: FnOnce() -> R>(&self, d: std::time::Duration, f: F) -> Result<R, F> {
        self.0.try_read_for(d, f)
    }
    fn write_downgrade<T>(&self, w: impl FnOnce(), r: impl FnOnce() -> T) -> T {
        self.0.write_downgrade(w, r)
    }
}

/// Whether the eBPF oracle can be used in this process (tried once: load,
/// then back to the oracle in use), or why not, in one line.
pub fn bpf_available() -> Result<(), String> {
    static AVAILABLE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    AVAILABLE
        .get_or_init(|| {
            use klock::oncpu::{oracle_kind, use_oracle, OracleKind};
            let before = oracle_kind().unwrap_or(OracleKind::Budget);
            let r = use_oracle(OracleKind::Bpf);
            use_oracle(before)?;
            r
        })
        .clone()
}
