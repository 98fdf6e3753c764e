//! `klock torture` as a user and CI run it: broken locks must fail, klock's
//! locks must pass, the watchdog must end a deadlocked run.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Run `klock torture ARGS`; a run past `limit` is killed and fails the
/// test (the tester itself must never hang). Returns (exit code, output).
fn torture(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_klock"))
        .arg("torture")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run klock");
    // Drain the pipes on the side so a chatty run cannot block on them.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait klock") {
            break st;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "klock torture {args:?} still running after {limit:?}: hung\n{}",
                o.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code(), o.join().unwrap() + &e.join().unwrap())
}

fn last_line(t: &str) -> &str {
    t.lines().last().unwrap_or("")
}

#[test]
fn lock_busted_ends_in_failure() {
    let (code, t) = torture(
        &["--type", "lock_busted", "--duration", "1s"],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(1), "{t}");
    assert!(last_line(&t).starts_with("--- End of test: FAILURE"), "{t}");
    let writes = t.lines().find(|l| l.contains("Writes: Total:")).unwrap();
    assert!(writes.contains("!!!"), "{t}");
    assert!(t.contains("other writer(s) held it"), "{t}");
}

#[test]
fn rwlock_busted_fails_on_the_reads_line() {
    let (code, t) = torture(
        &["--type", "rwlock_busted", "--duration", "1s"],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(1), "{t}");
    assert!(last_line(&t).contains("FAILURE"), "{t}");
    assert!(
        t.lines()
            .any(|l| l.contains("Reads: Total:") && l.contains("!!!")),
        "{t}"
    );
}

#[test]
fn every_klock_lock_succeeds() {
    let (code, list) = torture(&["--list-klock"], Duration::from_secs(30));
    assert_eq!(code, Some(0), "{list}");
    let types: Vec<&str> = list.lines().collect();
    for ty in [
        "qspinlock",
        "qspinlock-pl0",
        "mutex",
        "mutex-nospin",
        "mutex-compact",
        "qrwlock",
        "rwsem",
        "rwsem-rspin",
        "rwsem-nospin",
        "rtmutex",
        "rtmutex-nospin",
    ] {
        assert!(types.contains(&ty), "--list-klock lacks {ty}: {list}");
    }
    for ty in types {
        let (code, t) = torture(
            &["--type", ty, "--duration", "1s", "--stutter", "300ms"],
            Duration::from_secs(60),
        );
        assert_eq!(code, Some(0), "{ty}:\n{t}");
        assert!(
            last_line(&t).starts_with("--- End of test: SUCCESS"),
            "{ty}:\n{t}"
        );
        assert!(!t.contains("!!!"), "{ty}:\n{t}");
        let writes = t
            .lines()
            .rev()
            .find(|l| l.contains("Writes: Total:"))
            .unwrap();
        assert!(writes.contains("Fail: 0"), "{ty}: {writes}");
        let total: u64 = writes
            .split("Total: ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert!(total > 0, "{ty}: no acquisitions: {writes}");
    }
}

#[test]
fn every_peer_succeeds() {
    let (_, list) = torture(&["--list"], Duration::from_secs(30));
    let peers: Vec<&str> = list
        .lines()
        .filter(|l| l.contains("peer: "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(peers.len() >= 10, "{list}");
    for ty in peers {
        let (code, t) = torture(
            &["--type", ty, "--duration", "300ms", "--long-hold", "10ms"],
            Duration::from_secs(60),
        );
        assert_eq!(code, Some(0), "{ty}:\n{t}");
        assert!(last_line(&t).contains("SUCCESS"), "{ty}:\n{t}");
        if ty.contains("rwlock") {
            assert!(t.contains("Reads: Total:"), "{ty} has readers:\n{t}");
        }
    }
}

#[test]
fn watchdog_fails_a_deadlocked_run_and_ends_the_process() {
    let t0 = Instant::now();
    let (code, t) = torture(
        &[
            "--type",
            "lock_deadlock",
            "--duration",
            "60s",
            "--watchdog",
            "500ms",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(1), "{t}");
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
    assert!(t.contains("!!! watchdog:"), "{t}");
    // It says where every thread waits: the deadlocked ones are acquiring.
    assert!(t.contains("writer 0"), "{t}");
    assert!(t.contains("acquiring ("), "{t}");
    assert!(last_line(&t).contains("FAILURE"), "{t}");
}

#[test]
fn watchdog_catches_one_lost_wakeup_while_others_progress() {
    let (code, t) = torture(
        &[
            "--type",
            "lock_lostwake",
            "--duration",
            "60s",
            "--watchdog",
            "500ms",
            "--stutter",
            "0",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(1), "{t}");
    // The per-thread bound fired (not the global one): a named thread has
    // been acquiring too long.
    let why = t.lines().find(|l| l.starts_with("!!! watchdog:")).unwrap();
    assert!(why.contains("acquiring (blocking) for"), "{t}");
    assert!(why.contains("writer "), "{t}");
    assert!(last_line(&t).contains("FAILURE"), "{t}");
}

#[test]
fn bad_torture_args_are_clear_errors() {
    for (args, says) in [
        (&["--type", "nosuch"][..], "Valid types: qspinlock"),
        (
            &["--type", "qspinlock", "--nreaders", "2"][..],
            "has no shared (read) side",
        ),
        (
            &["--type", "mutex", "--duration", "1ms"][..],
            "--duration must be between",
        ),
        (
            &["--type", "mutex", "--nwriters", "0"][..],
            "nothing would run",
        ),
        (
            &["--type", "mutex", "--stutter", "5ms"][..],
            "--stutter must be 0",
        ),
        (
            &["--type", "mutex", "--long-hold", "6s"][..],
            "--long-hold must be shorter",
        ),
        (&[][..], "--type"),
    ] {
        let (code, t) = torture(args, Duration::from_secs(30));
        assert_eq!(code, Some(2), "{args:?}: {t}");
        assert!(t.contains(says), "{args:?} should say {says:?}:\n{t}");
        assert!(!t.contains("panicked"), "{args:?}:\n{t}");
    }
}
