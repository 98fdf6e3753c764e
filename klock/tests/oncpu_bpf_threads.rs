#![cfg(all(feature = "bpf", not(loom)))]
//! The eBPF oracle follows every thread of the process: one whose klock
//! context existed before the program loaded (found by the load's sweep of
//! live threads, its tag cleared when it exits) and one started after (it
//! registers itself through the thread hooks). Its own process, so that
//! nothing loads the program before the first thread is started. Needs
//! root; skipped otherwise.

use klock::oncpu_bpf::{self, CpuState};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Within `limit`, whether the calling thread reads as on CPU (a thread
/// reads "unknown" until its first switch-in is seen, and a switch-in
/// the tracepoint misses leaves it "off" until its next one).
fn reads_on_within(limit: Duration) -> Result<(), CpuState> {
    let tid = klock::thread::current_tid();
    let t0 = Instant::now();
    loop {
        let s = oncpu_bpf::cpu_state(tid);
        if matches!(s, CpuState::On(_)) {
            return Ok(());
        }
        if t0.elapsed() > limit {
            return Err(s);
        }
        std::thread::yield_now();
    }
}

#[test]
fn threads_from_before_and_after_the_load_are_followed() {
    if !rustix::process::geteuid().is_root() {
        assert!(
            std::env::var_os("KLOCK_REQUIRE_BPF").is_none(),
            "KLOCK_REQUIRE_BPF is set but this test cannot run: the bpf oracle needs root"
        );
        eprintln!("skipped: the bpf oracle needs root");
        return;
    }
    assert!(!oncpu_bpf::is_loaded(), "nothing loads it before this test");

    // A thread with a klock context from before the load, blocked until told.
    let (tid_tx, tid_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let early = std::thread::spawn(move || {
        tid_tx.send(klock::thread::current_tid()).unwrap();
        go_rx.recv().unwrap();
        reads_on_within(Duration::from_secs(2))
    });
    let early_tid = tid_rx.recv().unwrap();

    oncpu_bpf::load().expect("bpf oracle loads as root");

    go_tx.send(()).unwrap();
    assert_eq!(
        early.join().unwrap(),
        Ok(()),
        "a thread from before the load reads as on CPU once it runs"
    );
    assert_eq!(
        oncpu_bpf::cpu_state(early_tid),
        CpuState::Unknown,
        "an exited thread's entry is given back"
    );

    let late = std::thread::spawn(|| reads_on_within(Duration::from_secs(2)));
    assert_eq!(
        late.join().unwrap(),
        Ok(()),
        "a thread started after the load reads as on CPU"
    );
    oncpu_bpf::unload();
}
