//! klock's own locks as the benchmark sees them, with their event counters.

use super::peers::{BenchLock, RawM};
use klock::events::{snapshot, LockType};

/// `klock::RawQSpinLockWith<PENDING_LOOPS>` (the queued spinlock).
pub struct QSpin<const PENDING_LOOPS: u32>(RawM<klock::RawQSpinLockWith<PENDING_LOOPS>>);

impl<const PL: u32> BenchLock for QSpin<PL> {
    fn new() -> Self {
        Self(RawM::new())
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.write(f)
    }
    fn events() -> Vec<(&'static str, u64)> {
        snapshot(LockType::QSpinLock)
    }
}

// --- rtmutex (issue 6): klock's PI mutex and its adaptive mutex as bench locks.

/// `klock::RawRtMutexWith<SPIN>`: the PI mutex, userspace top-waiter
/// spinning on ([`klock::rtmutex::RT_SPIN`]) or off ([`klock::rtmutex::NO_RT_SPIN`]).
pub struct RtMutexLock<const SPIN: u8>(RawM<klock::RawRtMutexWith<SPIN>>);

impl<const SPIN: u8> BenchLock for RtMutexLock<SPIN> {
    fn new() -> Self {
        Self(RawM::new())
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.write(f)
    }
    fn events() -> Vec<(&'static str, u64)> {
        snapshot(LockType::RtMutex)
    }
}

/// RtMutex with userspace top-waiter spinning.
pub type RtSpin = RtMutexLock<{ klock::rtmutex::RT_SPIN }>;
/// RtMutex without userspace spinning (the kernel's LOCK_PI2 only).
pub type RtNoSpin = RtMutexLock<{ klock::rtmutex::NO_RT_SPIN }>;

/// `klock::Mutex` (optimistic spinning on a running owner; global switch).
pub struct KlockMutex(RawM<klock::RawMutex>);

impl BenchLock for KlockMutex {
    fn new() -> Self {
        Self(RawM::new())
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.write(f)
    }
    fn events() -> Vec<(&'static str, u64)> {
        snapshot(LockType::Mutex)
    }
}
