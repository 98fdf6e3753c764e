//! Linux calls the locks need: futex wait/wake, thread id, current CPU,
//! monotonic clock, online CPU count.
//!
//! Under `--cfg loom` the futex calls are modelled (a wait is a yield that
//! may return spuriously, which futex semantics allow), and the clock is a
//! per-model counter, because loom has neither.

use crate::sync::AtomicU32;
use std::time::Duration;

/// Why [`futex_wait`] returned. Every caller must re-check its condition:
/// futex waits may return spuriously.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitResult {
    /// Woken by [`futex_wake`] (or spuriously).
    Woken,
    /// The word did not hold `expected` when the kernel looked.
    Mismatch,
    /// The timeout expired.
    TimedOut,
    /// A signal interrupted the wait.
    Interrupted,
}

/// Sleep while `*word == expected`, for at most `timeout` (process-private futex).
#[cfg(not(loom))]
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> WaitResult {
    use rustix::io::Errno;
    use rustix::thread::futex;
    let ts = timeout.map(|d| rustix::time::Timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: d.subsec_nanos() as _,
    });
    match futex::wait(word, futex::Flags::PRIVATE, expected, ts.as_ref()) {
        Ok(()) => WaitResult::Woken,
        Err(Errno::AGAIN) => WaitResult::Mismatch,
        Err(Errno::TIMEDOUT) => WaitResult::TimedOut,
        Err(Errno::INTR) => WaitResult::Interrupted,
        Err(e) => panic!("klock: FUTEX_WAIT failed unexpectedly: {e}"),
    }
}

/// Wake up to `n` threads sleeping on `word`; returns how many were woken.
#[cfg(not(loom))]
pub fn futex_wake(word: &AtomicU32, n: u32) -> usize {
    rustix::thread::futex::wake(word, rustix::thread::futex::Flags::PRIVATE, n).unwrap_or(0)
}

/// `FUTEX_WAKE` of up to `n` threads sleeping on the futex at address `addr`
/// (an `AtomicU32`'s address as an integer: it is never dereferenced),
/// which need not be live any more: for a private futex the kernel keys
/// the wait queue by address and never reads the word, so a wake-up sent
/// after the waiter returned (and its stack frame was reused) is at worst
/// a spurious wake-up for whoever waits there now — which every futex
/// waiter must tolerate anyway. This lets a lock wake a waiter *after*
/// releasing the lock that keeps the waiter's record alive (the kernel's
/// `wake_q`), so the woken thread never runs into that lock still held.
#[cfg(not(loom))]
pub fn futex_wake_addr(addr: usize, n: u32) {
    // libc: rustix's futex calls take `&AtomicU32`, and a reference to a
    // word that may be dead is not allowed to exist; the raw syscall takes
    // the bare address.
    // SAFETY: FUTEX_WAKE only uses the address as a key; no memory is
    // accessed through it.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            addr,
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n as libc::c_int,
        );
    }
}

#[cfg(loom)]
pub fn futex_wait(word: &AtomicU32, expected: u32, _timeout: Option<Duration>) -> WaitResult {
    if word.load(crate::sync::Ordering::Acquire) != expected {
        return WaitResult::Mismatch;
    }
    loom::thread::yield_now();
    WaitResult::Woken
}

#[cfg(loom)]
pub fn futex_wake(_word: &AtomicU32, _n: u32) -> usize {
    0
}

/// Uncached `gettid(2)` (the cached one is [`crate::thread::current_tid`]).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn gettid_uncached() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

/// The CPU the calling thread runs on now (may be stale as soon as it returns).
#[inline]
pub fn current_cpu() -> u32 {
    rustix::thread::sched_getcpu() as u32
}

/// Monotonic clock in nanoseconds (vDSO; tens of ns).
#[cfg(not(loom))]
#[inline]
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The [`monotonic_ns`] time `d` from now (saturating): the deadline of a
/// timed lock attempt.
pub fn deadline_after(d: Duration) -> u64 {
    monotonic_ns().saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Under loom time is a counter that advances 1 µs per reading, so every
/// time-bounded spin terminates after a few iterations.
#[cfg(loom)]
pub fn monotonic_ns() -> u64 {
    loom::lazy_static! {
        static ref CLOCK: crate::sync::AtomicU64 = crate::sync::AtomicU64::new(0);
    }
    CLOCK.fetch_add(1_000, crate::sync::Ordering::Relaxed) + 1_000
}

/// Number of CPUs this process may run on (cached after the first call).
/// The cache is a plain atomic, not a lock-protected one-time cell:
/// threads that race on the first call each compute the same answer, and
/// a fork in the middle of the first call leaves the child nothing half
/// done to wait for.
pub fn online_cpus() -> usize {
    static CPUS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    // Relaxed: the count publishes nothing else.
    match CPUS.load(core::sync::atomic::Ordering::Relaxed) {
        0 => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            CPUS.store(n, core::sync::atomic::Ordering::Relaxed);
            n
        }
        n => n,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn wait_times_out_on_time() {
        let w = AtomicU32::new(7);
        let t0 = Instant::now();
        let r = futex_wait(&w, 7, Some(Duration::from_millis(30)));
        let dt = t0.elapsed();
        assert_eq!(r, WaitResult::TimedOut);
        assert!(dt >= Duration::from_millis(30), "returned early: {dt:?}");
        assert!(dt < Duration::from_secs(2), "returned far too late: {dt:?}");
    }

    #[test]
    fn wait_mismatch_returns_at_once() {
        let w = AtomicU32::new(1);
        assert_eq!(
            futex_wait(&w, 2, Some(Duration::from_secs(5))),
            WaitResult::Mismatch
        );
    }

    #[test]
    fn wait_returns_on_wake() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = w.clone();
        let t0 = Instant::now();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            w2.store(1, Ordering::Release);
            futex_wake(&w2, 1)
        });
        while w.load(Ordering::Acquire) == 0 {
            futex_wait(&w, 0, Some(Duration::from_secs(10)));
        }
        h.join().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn clock_is_monotonic_and_cpu_valid() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
        assert!((current_cpu() as usize) < 4096);
        assert!(online_cpus() >= 1);
        assert_eq!(crate::thread::current_tid(), gettid_uncached());
    }
}
