//! The lock traits every lock implements — klock's, the peers, the
//! deliberately broken ones — and through which it plugs into every bench
//! suite, `klock stat` and `klock torture`: [`BenchLock`] (block, shared
//! or exclusive) and [`TryBench`] (what it can do beyond blocking). Their
//! constants are the lock's capabilities, which the registry lists.

use std::time::Duration;

/// A lock as the benchmark sees it: run a closure under the exclusive
/// (write) or shared (read) side. Exclusive-only locks use the default
/// `read`, which takes the lock exclusively.
///
/// Generic closures keep every (lock, workload) pair monomorphized: the
/// harness adds no indirect call to any lock's path.
pub trait BenchLock: Send + Sync + 'static {
    /// Whether a waiter eventually sleeps (`false`: a pure spinlock, which
    /// the pi suite refuses: a real-time waiter spinning on one CPU would
    /// starve the owner for good).
    const SLEEPS: bool = true;
    /// Whether the lock has priority inheritance (a PI futex): the pi
    /// suite's watchdog must then count no stall.
    const PRIORITY_INHERITANCE: bool = false;
    /// Whether `read` really shares: readers run beside each other.
    const SHARED: bool = false;
    /// A fresh, unlocked lock.
    fn new() -> Self;
    /// Run `f` holding the lock exclusively.
    fn write<R>(&self, f: impl FnOnce() -> R) -> R;
    /// Run `f` holding the lock shared (exclusively if the lock has no shared mode).
    #[inline]
    fn read<R>(&self, f: impl FnOnce() -> R) -> R {
        self.write(f)
    }
    /// Process-wide event counters of this lock type (name, count), if it has any.
    fn events() -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// The owner-running oracle this lock must run under (`None`: the
    /// process's, chosen at start-up). See [`with_oracle`].
    fn oracle() -> Option<klock::oncpu::OracleKind> {
        None
    }
}

/// Run `f` under lock type `L`'s oracle (if it names one), then switch
/// back to the oracle in use before — so the eBPF program is attached
/// only during the runs that measure it and costs the others nothing.
pub fn with_oracle<L: BenchLock, R>(f: impl FnOnce() -> Result<R, String>) -> Result<R, String> {
    use klock::oncpu::{oracle_kind, use_oracle, OracleKind};
    let Some(want) = L::oracle() else {
        return f();
    };
    let before = oracle_kind().unwrap_or(OracleKind::Budget);
    if before == want {
        return f();
    }
    use_oracle(want)?;
    let r = f();
    use_oracle(before)?;
    r
}

/// What a [`BenchLock`] can do beyond blocking: *try* (run `f` under the
/// lock if it is free right now, else hand `f` back), try for a while,
/// and downgrade. Each capability has a constant saying whether the lock
/// really has it; without it, the method falls back to a weaker one (a
/// timed attempt to a try, a downgrade to an exclusive hold). `klock
/// stat` and the treelock suite's tracked runs use the try to count
/// contentions; `klock torture` mixes in what the lock has.
pub trait TryBench: BenchLock {
    /// Whether the try is real. A lock without one (`false`) answers every
    /// try with `Err`, and `klock stat` and treelock's lockstat runs leave
    /// it out rather than count every acquisition as contended.
    const TRY: bool = true;
    /// Run `f` holding the lock exclusively if that takes no waiting.
    fn try_write<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F>;
    /// Run `f` holding the lock shared if that takes no waiting.
    fn try_read<R, F: FnOnce() -> R>(&self, f: F) -> Result<R, F> {
        self.try_write(f)
    }

    /// Whether the lock has a real timed acquire ([`TryBench::try_write_for`]).
    const TIMED: bool = false;
    /// Run `f` holding the lock exclusively if that takes at most `d`
    /// (without `TIMED`: a try).
    fn try_write_for<R, F: FnOnce() -> R>(&self, d: Duration, f: F) -> Result<R, F> {
        let _ = d;
        self.try_write(f)
    }
    /// The same, shared.
    fn try_read_for<R, F: FnOnce() -> R>(&self, d: Duration, f: F) -> Result<R, F> {
        let _ = d;
        self.try_read(f)
    }

    /// Whether [`TryBench::write_downgrade`] really downgrades.
    const DOWNGRADE: bool = false;
    /// Take the lock exclusively and run `w`, downgrade to shared without
    /// letting another writer in, run `r`, release. Without `DOWNGRADE`
    /// both run under the exclusive lock.
    fn write_downgrade<T>(&self, w: impl FnOnce(), r: impl FnOnce() -> T) -> T {
        self.write(|| {
            w();
            r()
        })
    }
}
