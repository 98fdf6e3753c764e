//! One measured point: a lock × threads × role mix × critical section ×
//! outside work × duration, after a warm-up.
//!
//! The protected data is real: writers mutate a shared map and a counter,
//! readers look keys up. After every run the counter must equal the number
//! of write operations the threads completed — the benchmark also checks
//! that the lock excluded.

use super::peers::BenchLock;
use crossbeam_utils::CachePadded;
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

/// What a thread does while holding the lock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CriticalSection {
    /// Bump the shared counter only (the spinlock stress test).
    Counter,
    /// Bump the counter and burn about `ns` nanoseconds.
    Work { ns: u64 },
    /// Shared map: a write inserts and removes a key (like creat+unlink in a
    /// directory); a read looks up `lookups` keys.
    Map { lookups: u32 },
    /// page_fault1-like (the 2019 rwsem mail's will-it-scale test on mmap_sem):
    /// every thread mostly read-locks the shared map for `lookups` lookups
    /// (a page fault), write-locks it for one operation in `write_every`
    /// (mmap/munmap), and one read in `sleep_every` sleeps `sleep_us` µs
    /// holding the read lock (the long reader critical section).
    PageFault {
        lookups: u32,
        write_every: u32,
        sleep_every: u32,
        sleep_us: u32,
    },
}

impl CriticalSection {
    pub fn describe(&self) -> String {
        match self {
            Self::Counter => "counter increment".into(),
            Self::Work { ns } => format!("counter increment + {ns} ns of work"),
            Self::Map { lookups: 0 } => {
                "shared map: insert+remove a key (like creat+unlink)".into()
            }
            Self::Map { lookups } => {
                format!("shared map: write = insert+remove a key, read = {lookups} lookups")
            }
            Self::PageFault {
                lookups,
                write_every,
                sleep_every,
                sleep_us,
            } => format!(
                "page_fault1-like: each thread reads ({lookups} lookups), writes 1 op in \
                 {write_every}, and sleeps {sleep_us} µs inside 1 read in {sleep_every}"
            ),
        }
    }
}

/// The role of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Reader,
    Writer,
}

/// A fully specified measurement.
#[derive(Debug, Clone)]
pub struct Workload {
    pub readers: usize,
    pub writers: usize,
    pub cs: CriticalSection,
    /// Busy work between two acquisitions, ns.
    pub outside_ns: u64,
    pub warmup: Duration,
    pub duration: Duration,
}

impl Workload {
    pub fn threads(&self) -> usize {
        self.readers + self.writers
    }
    /// Writers first, then readers: thread `i`'s role.
    pub fn role(&self, i: usize) -> Role {
        if i < self.writers {
            Role::Writer
        } else {
            Role::Reader
        }
    }
}

/// What one run measured (the measured window only; warm-up excluded).
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    pub elapsed_s: f64,
    /// Operations per thread, with its role.
    pub per_thread: Vec<(Role, u64)>,
    pub cpu_s: f64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    /// Lock events counted during the window.
    pub events: Vec<(&'static str, u64)>,
    /// Cache-line round trip between two CPUs (ns) just before and just
    /// after the run ([`super::xfer`]); `None` if not measured.
    pub xfer_ns: (Option<f64>, Option<f64>),
}

impl RunOutcome {
    pub fn total_ops(&self) -> u64 {
        self.per_thread.iter().map(|&(_, n)| n).sum()
    }
    pub fn kops(&self) -> f64 {
        self.total_ops() as f64 / self.elapsed_s / 1e3
    }
    pub fn role_ops(&self, role: Role) -> Vec<u64> {
        self.per_thread
            .iter()
            .filter(|p| p.0 == role)
            .map(|p| p.1)
            .collect()
    }
}

/// Busy-loop iterations per microsecond on this machine, measured once:
/// the fastest of many short trials, so that one trial run without being
/// preempted is enough (three trials of 2 million iterations, about 1 ms
/// each, were all slowed 13-fold once while other tests loaded both
/// CPUs, and the busy work came out 13 times too short).
fn iters_per_us() -> f64 {
    static CAL: OnceLock<f64> = OnceLock::new();
    *CAL.get_or_init(|| {
        let n = 200_000u64;
        let mut best = f64::MAX;
        for _ in 0..30 {
            let t = Instant::now();
            spin_iters(n);
            best = best.min(t.elapsed().as_secs_f64());
        }
        n as f64 / (best * 1e6)
    })
}

/// Busy work: `n` loop iterations (see [`ns_to_iters`]). No work, no
/// call: a suite without work outside the lock (or inside it) times the
/// lock, not a call to an empty loop.
#[inline]
pub fn spin_iters(n: u64) {
    if n > 0 {
        spin_loop(n);
    }
}

/// [`spin_iters`]' loop, out of line so that its length does not depend on
/// where it is inlined.
#[inline(never)]
fn spin_loop(n: u64) {
    let mut x = 0u64;
    for i in 0..n {
        x = black_box(x.wrapping_add(i));
    }
    black_box(x);
}

/// Convert ns of busy work into loop iterations (calibrates on first use).
pub fn ns_to_iters(ns: u64) -> u64 {
    if ns == 0 {
        0
    } else {
        ((ns as f64 * iters_per_us() / 1e3).round() as u64).max(1)
    }
}

/// The data the lock protects: the counter every writer bumps first, so
/// that it follows the lock as a user's `Lock<T>` would place it.
#[repr(C)]
struct Shared {
    writes: u64,
    map: HashMap<u64, u64>,
}

const MAP_KEYS: u64 = 64;

/// The lock and its data, laid out as `lock_api`'s and std's `Lock<T>`
/// lays them out (the lock, then the data right after it) and starting a
/// cache line, so that every lock is measured with the same placement: a
/// small lock word shares its line with the data's first field, and so
/// does the hot word of a larger lock that keeps it at its end. Left to
/// the compiler and the allocator, the placement differed from lock to
/// lock and from build to build: std's and parking_lot's words shared the
/// counter's line while the rw-semaphore's sat two lines away, which cost
/// the rw-semaphore about a third of its 2-thread `rwsem-rate` (see
/// docs/locks/rwsem.md). Every suite that measures a lock over shared
/// data (the plain suites here, `treelock`) uses it.
#[repr(C, align(64))]
pub(super) struct Arena<L, D> {
    pub(super) lock: L,
    pub(super) data: UnsafeCell<D>,
}

// SAFETY: `data` is only accessed under `lock` (reads under the shared
// side only read it, possibly from several threads at once: `D: Sync`).
unsafe impl<L: Sync, D: Send + Sync> Sync for Arena<L, D> {}

/// This process's CPU time and context switches (`getrusage`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub cpu_s: f64,
    pub nvcsw: u64,
    pub nivcsw: u64,
}

impl Usage {
    /// What was used since `before`.
    pub fn since(self, before: Usage) -> Usage {
        Usage {
            cpu_s: self.cpu_s - before.cpu_s,
            nvcsw: self.nvcsw.saturating_sub(before.nvcsw),
            nivcsw: self.nivcsw.saturating_sub(before.nivcsw),
        }
    }
}

/// This process's usage so far.
pub fn usage() -> Usage {
    // libc: rustix has no getrusage.
    // SAFETY: getrusage fills the struct we pass.
    let ru = unsafe {
        let mut ru = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Usage {
        cpu_s: tv(ru.ru_utime) + tv(ru.ru_stime),
        nvcsw: ru.ru_nvcsw as u64,
        nivcsw: ru.ru_nivcsw as u64,
    }
}

fn events_delta(
    before: &[(&'static str, u64)],
    after: Vec<(&'static str, u64)>,
) -> Vec<(&'static str, u64)> {
    after
        .into_iter()
        .map(|(k, v)| {
            let b = before.iter().find(|e| e.0 == k).map_or(0, |e| e.1);
            (k, v.saturating_sub(b))
        })
        .collect()
}

/// How long [`super::xfer::round_trip_ns`] probes before and after a run.
const XFER_PROBE: Duration = Duration::from_millis(10);

/// The measured window of a run whose threads wait on `start`, count
/// their operations in `counts` and stop on `stop`: release them, let
/// them warm up, measure for `duration`, stop and join them. Returns the
/// window as a [`RunOutcome`] (`role(i)`: thread `i`'s role), or an error
/// if a thread panicked. The caller checks exclusion afterwards.
pub fn measure<L: BenchLock>(
    start: &Barrier,
    counts: &[CachePadded<AtomicU64>],
    stop: &AtomicBool,
    handles: Vec<std::thread::JoinHandle<()>>,
    (warmup, duration): (Duration, Duration),
    role: impl Fn(usize) -> Role,
) -> Result<RunOutcome, String> {
    let snap = || -> Vec<u64> { counts.iter().map(|a| a.load(Ordering::Relaxed)).collect() };
    // The benchmark threads wait on the barrier (asleep) meanwhile.
    let xfer_before = super::xfer::round_trip_ns(XFER_PROBE);
    start.wait();
    std::thread::sleep(warmup);
    let (c0, u0, e0, t0) = (snap(), usage(), L::events(), Instant::now());
    std::thread::sleep(duration);
    let (c1, u1, e1, elapsed) = (snap(), usage(), L::events(), t0.elapsed());
    stop.store(true, Ordering::Relaxed);
    let mut panicked = false;
    for h in handles {
        panicked |= h.join().is_err();
    }
    if panicked {
        return Err("a benchmark thread panicked".into());
    }
    let xfer_after = super::xfer::round_trip_ns(XFER_PROBE);
    let used = u1.since(u0);
    Ok(RunOutcome {
        elapsed_s: elapsed.as_secs_f64(),
        per_thread: (0..counts.len())
            .map(|i| (role(i), c1[i] - c0[i]))
            .collect(),
        cpu_s: used.cpu_s,
        ctx_voluntary: used.nvcsw,
        ctx_involuntary: used.nivcsw,
        events: events_delta(&e0, e1),
        xfer_ns: (xfer_before, xfer_after),
    })
}

/// Run `w` once on a fresh lock of type `L` (under its oracle).
///
/// Errors if the lock failed to exclude (lost writes).
pub fn run<L: BenchLock>(w: &Workload) -> Result<RunOutcome, String> {
    super::peers::with_oracle::<L, _>(|| run_once::<L>(w))
}

fn run_once<L: BenchLock>(w: &Workload) -> Result<RunOutcome, String> {
    let threads = w.threads();
    let mut map = HashMap::with_capacity(4 * MAP_KEYS as usize);
    for k in 0..MAP_KEYS {
        map.insert(k, k);
    }
    let arena = Arc::new(Arena::<L, Shared> {
        lock: L::new(),
        data: UnsafeCell::new(Shared { writes: 0, map }),
    });
    let counts: Arc<Vec<CachePadded<AtomicU64>>> = Arc::new(
        (0..threads)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
    );
    // Writes made by Reader-role threads (the PageFault mix).
    let mixed_writes: Arc<Vec<CachePadded<AtomicU64>>> = Arc::new(
        (0..threads)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let outside = ns_to_iters(w.outside_ns);
    let cs = match w.cs {
        CriticalSection::Work { ns } => (w.cs, ns_to_iters(ns)),
        other => (other, 0),
    };

    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (arena, counts, stop, start) =
                (arena.clone(), counts.clone(), stop.clone(), start.clone());
            let mixed_writes = mixed_writes.clone();
            let role = w.role(i);
            std::thread::Builder::new()
                .name(format!("bench-{i}"))
                .spawn(move || {
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64
                        ^ (i as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                    let mut n = 0u64;
                    start.wait();
                    while !stop.load(Ordering::Relaxed) {
                        spin_iters(outside);
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let key = rng;
                        let d = arena.data.get();
                        let role = match cs.0 {
                            CriticalSection::PageFault { write_every, .. }
                                if role == Role::Reader
                                    && (key >> 32)
                                        .is_multiple_of(u64::from(write_every.max(1))) =>
                            {
                                mixed_writes[i].fetch_add(1, Ordering::Relaxed);
                                Role::Writer
                            }
                            _ => role,
                        };
                        match role {
                            // SAFETY: exclusive side held.
                            Role::Writer => {
                                arena.lock.write(|| unsafe { write_op(&mut *d, cs, key) })
                            }
                            // SAFETY: shared side held; readers only read.
                            Role::Reader => arena.lock.read(|| unsafe { read_op(&*d, cs, key) }),
                        }
                        n += 1;
                        // Only this thread writes its counter: a plain store.
                        counts[i].store(n, Ordering::Relaxed);
                    }
                })
                .map_err(|e| format!("cannot start thread {i} of {threads}: {e}"))
        })
        .collect::<Result<_, _>>()?;

    let outcome = measure::<L>(
        &start,
        &counts,
        &stop,
        handles,
        (w.warmup, w.duration),
        |i| w.role(i),
    )?;

    // Every thread has stopped: check the lock excluded writers.
    let total_writes: u64 = (0..threads)
        .filter(|&i| w.role(i) == Role::Writer)
        .map(|i| counts[i].load(Ordering::Relaxed))
        .sum::<u64>()
        + mixed_writes
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum::<u64>();
    // SAFETY: all threads joined.
    let seen = unsafe { (*arena.data.get()).writes };
    if seen != total_writes {
        return Err(format!(
            "the lock did not exclude: {total_writes} writes were made but the protected counter reads {seen}"
        ));
    }

    Ok(outcome)
}

#[inline]
fn write_op(d: &mut Shared, cs: (CriticalSection, u64), key: u64) {
    d.writes += 1;
    match cs.0 {
        CriticalSection::Counter => {}
        CriticalSection::Work { .. } => spin_iters(cs.1),
        CriticalSection::Map { .. } | CriticalSection::PageFault { .. } => {
            // A key outside the prepopulated range: insert adds, remove
            // deletes (creat + unlink).
            let k = MAP_KEYS + key % MAP_KEYS;
            d.map.insert(k, key);
            black_box(d.map.remove(&k));
        }
    }
}

#[inline]
fn read_op(d: &Shared, cs: (CriticalSection, u64), key: u64) {
    match cs.0 {
        CriticalSection::Counter => {
            black_box(d.writes);
        }
        CriticalSection::Work { .. } => {
            black_box(d.writes);
            spin_iters(cs.1);
        }
        CriticalSection::PageFault {
            lookups,
            sleep_every,
            sleep_us,
            ..
        } => {
            let mut sum = 0u64;
            for j in 0..lookups as u64 {
                sum = sum.wrapping_add(*d.map.get(&(key.wrapping_add(j) % MAP_KEYS)).unwrap_or(&0));
            }
            black_box(sum);
            if (key >> 16).is_multiple_of(u64::from(sleep_every.max(1))) {
                std::thread::sleep(Duration::from_micros(u64::from(sleep_us)));
            }
        }
        CriticalSection::Map { lookups } => {
            let mut sum = 0u64;
            for j in 0..lookups as u64 {
                sum = sum.wrapping_add(*d.map.get(&(key.wrapping_add(j) % MAP_KEYS)).unwrap_or(&0));
            }
            black_box(sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::peers::{PthreadRwLock, StdMutex};
    use super::*;

    fn quick(readers: usize, writers: usize, cs: CriticalSection) -> Workload {
        Workload {
            readers,
            writers,
            cs,
            outside_ns: 50,
            warmup: Duration::from_millis(10),
            duration: Duration::from_millis(50),
        }
    }

    #[test]
    fn run_counts_every_thread_and_role() {
        // Every thread is counted in its role. Whether each got the lock
        // within the 50 ms depends on the scheduler (a thread of three on a
        // loaded 2-CPU machine once did nothing), so up to three runs.
        let mut tries = 0;
        let o = loop {
            let o = run::<StdMutex>(&quick(0, 3, CriticalSection::Map { lookups: 2 })).unwrap();
            assert_eq!(o.per_thread.len(), 3);
            assert!(o.per_thread.iter().all(|&(r, _)| r == Role::Writer));
            tries += 1;
            if o.per_thread.iter().all(|&(_, n)| n > 0) || tries == 3 {
                break o;
            }
        };
        assert!(
            o.per_thread.iter().all(|&(_, n)| n > 0),
            "{:?}",
            o.per_thread
        );
        assert!(o.elapsed_s >= 0.05 && o.kops() > 0.0);
        let o = run::<PthreadRwLock>(&quick(2, 1, CriticalSection::Work { ns: 100 })).unwrap();
        assert_eq!(o.role_ops(Role::Reader).len(), 2);
        assert_eq!(o.role_ops(Role::Writer).len(), 1);
        assert!(o.cpu_s > 0.0);
    }

    /// A lock that does not lock: the run must report that it failed to exclude.
    struct NoLock;
    impl BenchLock for NoLock {
        fn new() -> Self {
            NoLock
        }
        fn write<R>(&self, f: impl FnOnce() -> R) -> R {
            f()
        }
    }

    #[test]
    fn a_lock_that_does_not_exclude_is_caught() {
        // Several tries: lost updates need a real interleaving.
        let caught = (0..20).any(|_| {
            let mut w = quick(0, 4, CriticalSection::Work { ns: 200 });
            w.outside_ns = 0;
            run::<NoLock>(&w).is_err()
        });
        assert!(caught, "a non-excluding lock should lose counter updates");
    }

    #[test]
    fn calibration_is_sane() {
        let it = ns_to_iters(1_000_000);
        let t = Instant::now();
        spin_iters(it);
        let dt = t.elapsed();
        assert!(
            dt > Duration::from_micros(200) && dt < Duration::from_millis(50),
            "{dt:?}"
        );
    }
}
