//! klock's own locks as the benchmark sees them, with their event counters.

use super::peers::{BenchLock, RawM, RawRw};
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

/// `klock::RawRwSemWith<RSPIN, ADAPTIVE>` (the rw-semaphore).
pub struct RwSem<const RSPIN: u8, const ADAPTIVE: u8>(RawRw<klock::RawRwSemWith<RSPIN, ADAPTIVE>>);

impl<const R: u8, const A: u8> BenchLock for RwSem<R, A> {
    fn new() -> Self {
        Self(<RawRw<_> as BenchLock>::new())
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
        snapshot(LockType::Rwsem)
    }
}
