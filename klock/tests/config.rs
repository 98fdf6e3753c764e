//! `klock::config`: settings made in code, the environment as their
//! default, and the refusal of a setting fixed at first use. The
//! environment cases run this binary again as a child process with the
//! variables set (`KLOCK_TEST_CONFIG_CHILD` marks it).

#![cfg(not(loom))]

use klock::config::{Config, Oracle};
use std::process::Command;

const CHILD: &str = "KLOCK_TEST_CONFIG_CHILD";

fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Run the test `name` of this binary in a child with `vars` set; panic
/// with its output if it fails.
fn run_child(name: &str, vars: &[(&str, &str)]) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, "1");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child {name} failed:\n{all}");
    // A filter that matched nothing would pass without running anything.
    assert!(all.contains("1 passed"), "child {name} ran no test:\n{all}");
}

#[test]
fn run_time_switches_apply_and_read_back() {
    if is_child() {
        return;
    }
    Config::new()
        .owner_spin(false)
        .spin_adapt(false)
        .rwsem_reader_spin(false)
        .rwsem_adaptive(false)
        .rwsem_reader_wait_ns(123_456)
        .rt_spin(false)
        .rt_user_wait(false)
        .apply()
        .unwrap();
    assert!(!klock::mutex::owner_spin());
    assert!(!klock::spinadapt::enabled());
    assert!(!klock::rwsem::reader_spin());
    assert!(!klock::rwsem::adaptive());
    assert_eq!(klock::rwsem::reader_wait_ns(), 123_456);
    assert!(!klock::rtmutex::top_waiter_spin());
    assert!(!klock::rtmutex::user_wait());
    // And back: a switch is not a one-way latch.
    Config::new()
        .owner_spin(true)
        .rt_spin(true)
        .apply()
        .unwrap();
    assert!(klock::mutex::owner_spin());
    assert!(klock::rtmutex::top_waiter_spin());
    // The locks still work with everything off.
    let m = klock::Mutex::new(1);
    *m.lock() += 1;
    assert_eq!(*m.lock(), 2);
}

#[test]
fn oracle_chosen_in_code_is_used_and_cannot_be_chosen_again() {
    if is_child() {
        return;
    }
    // Whether or not KLOCK_ONCPU is set, the code wins before first use.
    Config::new().oracle(Oracle::Budget).apply().unwrap();
    let _ = klock::oncpu::oracle();
    assert_eq!(
        klock::oncpu::oracle_kind(),
        Some(klock::oncpu::OracleKind::Budget)
    );
    let e = Config::new()
        .oracle(Oracle::Auto)
        .owner_spin(true)
        .apply()
        .unwrap_err();
    assert_eq!(e.too_late(), ["oracle"]);
    assert!(e.to_string().contains("too late"), "{e}");
}

#[test]
fn environment_gives_the_defaults() {
    if !is_child() {
        run_child(
            "environment_gives_the_defaults",
            &[
                ("KLOCK_OWNER_SPIN", "0"),
                ("KLOCK_RT_SPIN", "off"),
                ("KLOCK_RWSEM_RSPIN", "no"),
                ("KLOCK_SPIN_ADAPT", "1"),
                ("KLOCK_RWSEM_READER_WAIT_NS", "777000"),
                ("KLOCK_SPIN_NS", "4321"),
                ("KLOCK_ONCPU", "budget"),
            ],
        );
        return;
    }
    assert!(!klock::mutex::owner_spin());
    assert!(!klock::rtmutex::top_waiter_spin());
    assert!(!klock::rwsem::reader_spin());
    assert!(klock::spinadapt::enabled());
    assert_eq!(klock::rwsem::reader_wait_ns(), 777_000);
    assert_eq!(klock::oncpu::base_spin_ns(), 4321);
    let _ = klock::oncpu::oracle();
    assert_eq!(
        klock::oncpu::oracle_kind(),
        Some(klock::oncpu::OracleKind::Budget)
    );
}

#[test]
fn code_wins_over_the_environment() {
    if !is_child() {
        run_child(
            "code_wins_over_the_environment",
            &[
                ("KLOCK_OWNER_SPIN", "0"),
                ("KLOCK_SPIN_NS", "4321"),
                ("KLOCK_RWSEM_READER_WAIT_NS", "max"),
            ],
        );
        return;
    }
    Config::new()
        .owner_spin(true)
        .spin_ns(1234)
        .rwsem_reader_wait_ns(5_000)
        .apply()
        .unwrap();
    assert!(klock::mutex::owner_spin());
    assert_eq!(klock::oncpu::base_spin_ns(), 1234);
    assert_eq!(klock::rwsem::reader_wait_ns(), 5_000);
    // Fixed now: a second value is refused and the first one stays.
    let e = Config::new().spin_ns(99).apply().unwrap_err();
    assert_eq!(e.too_late(), ["spin_ns"]);
    assert_eq!(klock::oncpu::base_spin_ns(), 1234);
}
