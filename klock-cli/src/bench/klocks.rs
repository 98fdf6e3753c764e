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

use super::peers::TryBench;

impl<const PL: u32> TryBench for QSpin<PL> {
    #[inline]
    fn try_write<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        self.0.try_write(f)
    }
}

/// `klock::RawQRwLock` (the queued rwlock).
pub struct QRw(super::peers::RawRw<klock::RawQRwLock>);

impl BenchLock for QRw {
    fn new() -> Self {
        Self(BenchLock::new())
    }
    #[inline]
    fn write<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.write(f)
    }
    #[inline]
    fn read<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.read(f)
    }
}

impl TryBench for QRw {
    #[inline]
    fn try_write<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        self.0.try_write(f)
    }
    #[inline]
    fn try_read<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        self.0.try_read(f)
    }
}
