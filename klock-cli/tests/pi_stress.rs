//! The `pi` suite itself, shortly: PI locks complete inversions with no
//! watchdog failure; `std::sync::Mutex` (no PI) is caught stalling.
//!
//! Its own test binary: it keeps CPU 1 busy with SCHED_FIFO threads for
//! about a second, which would disturb timing-sensitive tests running
//! beside it in one binary (cargo runs test binaries one after another).
//! Without CAP_SYS_NICE or a second CPU it prints a skip message and passes.

use klock_cli::bench::klocks::RtNoSpin;
use klock_cli::bench::peers::StdMutex;
use klock_cli::bench::pi::{run, PiFutexLock, RT_CPU, WINDOWS_PER_RUN};
use std::time::Duration;

#[test]
fn pi_stress_catches_the_non_pi_lock() {
    if let Some(why) = klock::rt::rt_unavailable_reason(RT_CPU) {
        eprintln!("skipped: pi_stress test: {why}");
        return;
    }
    let w = Duration::from_millis(30);
    let d = Duration::from_millis(150);
    let r = run::<RtNoSpin>(2, w, d).unwrap();
    assert_eq!(r.failures, 0, "RtMutex stalled: {r:?}");
    assert!(r.per_group.iter().all(|&n| n > 0), "{r:?}");
    assert_eq!(r.window_rates.len(), WINDOWS_PER_RUN);
    let r = run::<PiFutexLock>(1, w, d).unwrap();
    assert_eq!(r.failures, 0, "raw PI futex stalled: {r:?}");
    let r = run::<StdMutex>(1, w, Duration::from_millis(300)).unwrap();
    assert!(
        r.failures > 0,
        "std::sync::Mutex was not caught stalling: {r:?}"
    );
}
