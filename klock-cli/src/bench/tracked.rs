//! Lockstat around any lock: [`Stat<L>`] puts lockstat tracking on a
//! [`TryBench`] lock — klock's and the peers alike (the peers are not
//! `lock_api` raw locks, so this uses [`klock::lockstat::LockStat`]
//! directly rather than [`klock::lockstat::Tracked`]). The untracked
//! benchmark types contain no lockstat code: tracking is this separate
//! wrapper type, used by `klock stat` and the treelock suite.

use super::peers::*;
use klock::lockstat::{self, Class, LockStat, Mode, Report};
use std::panic::Location;
use std::sync::Mutex;

/// The class the next [`Stat::new`] joins (set by the driver before a run).
static NEXT_CLASS: Mutex<Option<Class>> = Mutex::new(None);

/// Make the locks created from now on count in the class `name`.
pub fn set_class(name: &str) {
    *NEXT_CLASS.lock().unwrap_or_else(|e| e.into_inner()) = Some(Class::named(name));
}

/// A snapshot holding only the class `name` (empty if it was idle).
pub fn take_class(name: &str) -> Report {
    let mut r = lockstat::snapshot();
    r.classes.retain(|c| c.name == name);
    r
}

/// `L` with lockstat tracking: try first (uncontended), else record a
/// contention at the caller's site and block; the clock is read first
/// thing inside the critical section and last thing in it, and everything
/// is recorded after the unlock.
pub struct Stat<L> {
    inner: L,
    stat: LockStat,
}

impl<L: TryBench> Stat<L> {
    #[inline(always)]
    fn run<R>(&self, mode: Mode, site: &'static Location<'static>, f: impl FnOnce() -> R) -> R {
        let timed = move || {
            let t = lockstat::now();
            let r = f();
            (r, t, lockstat::now())
        };
        let tried = match mode {
            Mode::Write => self.inner.try_write(timed),
            Mode::Read => self.inner.try_read(timed),
        };
        let ((r, acquired, released), contention) = match tried {
            Ok(done) => (done, None),
            Err(timed) => {
                let c = self.stat.contended(mode, site);
                let done = match mode {
                    Mode::Write => self.inner.write(timed),
                    Mode::Read => self.inner.read(timed),
                };
                (done, Some(c))
            }
        };
        self.stat.acquired_at(mode, contention, acquired);
        self.stat.released(mode, acquired, released);
        r
    }
}

impl<L: TryBench> BenchLock for Stat<L> {
    const PRIORITY_INHERITANCE: bool = L::PRIORITY_INHERITANCE;
    const SHARED: bool = L::SHARED;
    const SLEEPS: bool = L::SLEEPS;

    fn new() -> Self {
        let class = NEXT_CLASS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or_else(|| Class::named("unnamed"));
        Self {
            inner: L::new(),
            stat: LockStat::new(class),
        }
    }
    #[inline]
    #[track_caller]
    fn write<R>(&self, f: impl FnOnce() -> R) -> R {
        self.run(Mode::Write, Location::caller(), f)
    }
    #[inline]
    #[track_caller]
    fn read<R>(&self, f: impl FnOnce() -> R) -> R {
        self.run(Mode::Read, Location::caller(), f)
    }
    fn events() -> Vec<(&'static str, u64)> {
        L::events()
    }
    fn oracle() -> Option<klock::oncpu::OracleKind> {
        L::oracle()
    }
}
