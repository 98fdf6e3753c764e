//! Deadlines of the C API: absolute `struct timespec`s on a clock, turned
//! into the time left when the call starts.

use core::ffi::c_int;
use std::time::{Duration, Instant};

/// What is left of an absolute deadline `ts` on `clock`: `Ok(ZERO)` if it
/// has passed; `EINVAL` for a null pointer, `tv_nsec` outside `0..1e9`,
/// or a clock other than `CLOCK_MONOTONIC` / `CLOCK_REALTIME`.
///
/// # Safety
/// `ts` is null or points to a readable `timespec`.
pub(crate) unsafe fn time_left(
    clock: libc::clockid_t,
    ts: *const libc::timespec,
) -> Result<Duration, c_int> {
    if ts.is_null() || (clock != libc::CLOCK_MONOTONIC && clock != libc::CLOCK_REALTIME) {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-null, readable by the caller's contract.
    let ts = unsafe { ts.read() };
    if !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(libc::EINVAL);
    }
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid out-pointer; the clock is one of two that
    // always exist on Linux.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return Err(libc::EINVAL);
    }
    let ns = |t: &libc::timespec| i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec);
    let left = ns(&ts) - ns(&now);
    Ok(if left <= 0 {
        Duration::ZERO
    } else {
        // Beyond u64 nanoseconds (584 years) is forever anyway.
        Duration::from_nanos(u64::try_from(left).unwrap_or(u64::MAX))
    })
}

/// Poll `attempt` until it succeeds or `left` has passed: spins briefly,
/// then yields the CPU, then sleeps in steps of at most 100 µs. For the
/// locks without a timed slow path: the caller does not queue, so under
/// steady contention it can lose to queued waiters until its deadline.
pub(crate) fn poll_for(left: Duration, mut attempt: impl FnMut() -> bool) -> bool {
    if attempt() {
        return true;
    }
    let end = Instant::now().checked_add(left);
    let mut tries = 0u32;
    loop {
        if attempt() {
            return true;
        }
        let now = Instant::now();
        if end.is_some_and(|end| now >= end) {
            return false;
        }
        tries = tries.saturating_add(1);
        if tries < 64 {
            core::hint::spin_loop();
        } else if tries < 1024 {
            std::thread::yield_now();
        } else {
            let nap = end.map_or(Duration::from_micros(100), |end| {
                (end - now).min(Duration::from_micros(100))
            });
            std::thread::sleep(nap);
        }
    }
}
