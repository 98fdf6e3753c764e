//! A real multithreaded C server under the preload: memcached (its worker
//! threads, connection queues, item and LRU locks are pthread mutexes and
//! condition variables) serves `bench/memcached_load.c` for two seconds
//! with the lock profile on. The load checks every reply and that no
//! increment of eight shared counters was lost; the profile at exit shows
//! that the server's mutexes were klock's.
//!
//! Skipped, with a note, where memcached is not installed, unless
//! `KLOCK_REQUIRE_MEMCACHED` is set (CI installs it and sets it).

#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

#[test]
fn memcached_serves_a_load_without_lost_updates() {
    if !common::server_installed("memcached", "KLOCK_REQUIRE_MEMCACHED") {
        return;
    }
    let so = common::build_preload();
    let load = Path::new(env!("CARGO_TARGET_TMPDIR")).join("klock_memcached_load");
    common::compile_c("bench/memcached_load.c", &load, &["-O2"]);
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();

    let mut server = Command::new("memcached");
    server
        .args(["-l", "127.0.0.1", "-p", &port.to_string(), "-t", "4"])
        .env("LD_PRELOAD", &so)
        .env("KLOCK_STAT", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if rustix::process::geteuid().is_root() {
        // memcached refuses to run as root without a user to run as.
        server.args(["-u", "root"]);
    }
    let mut server = server.spawn().expect("start memcached");
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if start.elapsed() > Duration::from_secs(10) {
            let _ = server.kill();
            panic!("memcached did not listen on port {port} within 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    let out = Command::new(&load)
        .args([&port.to_string(), "8", "2"])
        .output()
        .expect("run memcached_load");
    let report =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);

    // SIGINT: memcached exits through exit(), which prints the profile.
    let (status, err) = common::stop_server(server, rustix::process::Signal::INT, "memcached");

    assert!(out.status.success(), "the load failed: {report}\n{err}");
    assert!(report.contains(" lost 0 errors 0"), "{report}");
    let ops: u64 = report
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(ops > 1000, "hardly any requests served: {report}");
    assert!(
        status.code().is_some(),
        "memcached died by a signal: {status}\n{err}"
    );
    assert!(
        err.contains("klock: lock profile of memcached"),
        "no lock profile: the preload did not run in memcached\n{err}"
    );
    let mutex_rows = err
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("mutex"))
        .count();
    assert!(mutex_rows > 0, "no mutex in memcached's profile\n{err}");
}
