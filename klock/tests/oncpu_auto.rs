#![cfg(all(feature = "bpf", not(loom)))]
//! `KLOCK_ONCPU` unset (auto): the first oracle use answers at once with
//! the budget oracle and the eBPF oracle takes over when loaded (as root).
//! A test binary of its own: the choice is made once per process.

use klock::oncpu::{self, OracleKind};
use std::time::Duration;

#[test]
fn auto_installs_the_bpf_oracle_in_the_background() {
    if std::env::var_os("KLOCK_ONCPU").is_some() {
        eprintln!("skipped: KLOCK_ONCPU is set");
        return;
    }
    // Answers now, whatever the loader is doing.
    let _ = oncpu::oracle().owner_running(klock::thread::current_tid());
    let got = oncpu::wait_for_oracle(Duration::from_secs(10));
    if rustix::process::geteuid().is_root() {
        assert_eq!(
            got,
            Some(OracleKind::Bpf),
            "auto did not install the bpf oracle as root"
        );
        assert!(klock::oncpu_bpf::is_loaded());
        // A thread reads as unknown until the program has seen it switched
        // in (one read failed in 1 of 24 debug runs, reading None), and as
        // off for about a millisecond when the tracepoint missed its last
        // switch-in (README, "Only as complete as the tracepoint"): ask for
        // up to 20 ms, sleeping between reads.
        let t0 = std::time::Instant::now();
        let running = loop {
            let r = oncpu::oracle().owner_running(klock::thread::current_tid());
            if r == Some(true) || t0.elapsed() > Duration::from_millis(20) {
                break r;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(
            running,
            Some(true),
            "the running caller never read as running"
        );
        // An explicit choice wins and detaches the program.
        oncpu::use_oracle(OracleKind::Budget).unwrap();
        assert!(!klock::oncpu_bpf::is_loaded());
    } else {
        assert_eq!(got, Some(OracleKind::Budget));
    }
}
