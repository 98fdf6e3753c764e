//! The lock as the torture test sees it: [`TortureLock`], one acquisition
//! made the way [`How`] says.
//!
//! Every lock of the registry is one, the deliberately broken ones of
//! [`super::busted`] included: the blanket impl below turns the bench's
//! lock traits ([`BenchLock`], [`TryBench`], whose constants say what the
//! lock can do beyond blocking) into a torture lock, so bench and torture
//! share one set of lock types and one registry.

use crate::bench::peers::{BenchLock, TryBench};
use std::time::Duration;

/// How one acquisition is attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// `lock()`: wait as long as it takes.
    Block,
    /// `try_lock()`: one attempt, may fail.
    Try,
    /// `try_lock_for(d)`: wait at most `d`.
    Timed(Duration),
}

/// A lock under torture: run a closure holding it, acquired the way `how`
/// says. `None` means a try or timed attempt did not get the lock (the
/// closure did not run). The engine only asks for what the `TRY`, `TIMED`,
/// `DOWNGRADE` and `SHARED` flags promise.
pub trait TortureLock: Send + Sync + 'static {
    /// Has a real shared (read) side: readers may run beside each other.
    const SHARED: bool = false;
    /// `How::Try` is a real try-lock.
    const TRY: bool = false;
    /// `How::Timed` is a real timed lock.
    const TIMED: bool = false;
    /// [`TortureLock::write_downgrade`] really downgrades.
    const DOWNGRADE: bool = false;

    /// A fresh, unlocked lock.
    fn new() -> Self;

    /// Run `f` holding the lock exclusively.
    fn write<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T>;

    /// Run `f` holding the lock shared (exclusively without a shared side).
    fn read<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T> {
        self.write(how, f)
    }

    /// Take the lock exclusively and run `w`, downgrade to shared without
    /// letting another writer in, run `r`, release. Without `DOWNGRADE`
    /// both run under the exclusive lock.
    fn write_downgrade<T>(&self, how: How, w: impl FnOnce(), r: impl FnOnce() -> T) -> Option<T> {
        self.write(how, || {
            w();
            r()
        })
    }
}

/// Every bench lock is a torture lock: its [`TryBench`] constants are the
/// capabilities the torture run may mix in.
impl<L: TryBench> TortureLock for L {
    const SHARED: bool = <L as BenchLock>::SHARED;
    const TRY: bool = <L as TryBench>::TRY;
    const TIMED: bool = <L as TryBench>::TIMED;
    const DOWNGRADE: bool = <L as TryBench>::DOWNGRADE;

    fn new() -> Self {
        <L as BenchLock>::new()
    }
    fn write<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T> {
        match how {
            How::Block => Some(BenchLock::write(self, f)),
            How::Try => self.try_write(f).ok(),
            How::Timed(d) => self.try_write_for(d, f).ok(),
        }
    }
    fn read<T>(&self, how: How, f: impl FnOnce() -> T) -> Option<T> {
        match how {
            How::Block => Some(BenchLock::read(self, f)),
            How::Try => self.try_read(f).ok(),
            How::Timed(d) => self.try_read_for(d, f).ok(),
        }
    }
    /// The engine downgrades only after a blocking acquire.
    fn write_downgrade<T>(&self, how: How, w: impl FnOnce(), r: impl FnOnce() -> T) -> Option<T> {
        match how {
            How::Block => Some(TryBench::write_downgrade(self, w, r)),
            _ => TortureLock::write(self, how, || {
                w();
                r()
            }),
        }
    }
}
