//! A second real server under the preload: unbound, a multithreaded DNS
//! resolver whose caches are pthread spinlocks (their hash tables) and
//! pthread rwlocks (their entries), with mutexes elsewhere. It runs 4
//! threads on a zone of 1,000 names (an auth-zone for upstream, so
//! nothing leaves the machine) with the lock profile on, while 4 client
//! threads query it for two seconds over UDP and check every answer's
//! address; the profile at exit shows that its spinlocks and rwlocks
//! were klock's.
//!
//! Skipped, with a note, where unbound is not installed, unless
//! `KLOCK_REQUIRE_UNBOUND` is set (CI installs it and sets it).

#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use std::fmt::Write as _;
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const NAMES: u32 = 1000;

/// The address the zone gives `h<i>.bench.`.
fn address(i: u32) -> [u8; 4] {
    [10, (i / 256) as u8, (i % 256) as u8, 1]
}

/// A recursive query for `h<i>.bench. A` with id `id`.
fn query(id: u16, i: u32) -> Vec<u8> {
    let mut q = Vec::with_capacity(32);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD; 1 question
    let label = format!("h{i}");
    q.push(label.len() as u8);
    q.extend_from_slice(label.as_bytes());
    q.push(5);
    q.extend_from_slice(b"bench");
    q.push(0);
    q.extend_from_slice(&[0, 1, 0, 1]); // A, IN
    q
}

/// Skip a (possibly compressed) name at `at`: the offset after it.
fn skip_name(m: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *m.get(at)? as usize;
        if len & 0xc0 == 0xc0 {
            return Some(at + 2);
        }
        at += 1 + len;
        if len == 0 {
            return Some(at);
        }
    }
}

/// The A record of a reply to `q`, or why there is none.
fn answer(q: &[u8], m: &[u8]) -> Result<[u8; 4], String> {
    if m.len() < 12 || m[..2] != q[..2] {
        return Err(format!("not a reply to this query: {m:02x?}"));
    }
    let rcode = m[3] & 0x0f;
    let ancount = u16::from_be_bytes([m[6], m[7]]);
    if rcode != 0 || ancount == 0 {
        return Err(format!("rcode {rcode}, {ancount} answers"));
    }
    let mut at = 12 + (q.len() - 12); // our question, echoed
    for _ in 0..ancount {
        at = skip_name(m, at).ok_or("truncated answer")?;
        let rr = m.get(at..at + 10).ok_or("truncated answer")?;
        let (rtype, rdlen) = (
            u16::from_be_bytes([rr[0], rr[1]]),
            u16::from_be_bytes([rr[8], rr[9]]) as usize,
        );
        at += 10;
        let rdata = m.get(at..at + rdlen).ok_or("truncated answer")?;
        if rtype == 1 && rdlen == 4 {
            return Ok([rdata[0], rdata[1], rdata[2], rdata[3]]);
        }
        at += rdlen;
    }
    Err("no A record".into())
}

/// Ask for `h<i>` (a lost datagram is sent again, up to 3 times).
fn ask(s: &UdpSocket, id: u16, i: u32) -> Result<[u8; 4], String> {
    let q = query(id, i);
    let mut buf = [0u8; 512];
    for _ in 0..3 {
        s.send(&q).map_err(|e| format!("send: {e}"))?;
        match s.recv(&mut buf) {
            Ok(n) => return answer(&q, &buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
            Err(e) => return Err(format!("recv: {e}")),
        }
    }
    Err("no reply to 3 sends".into())
}

fn client(port: u16) -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").expect("a client socket");
    s.connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    s
}

#[test]
fn unbound_answers_every_query_right() {
    if !common::server_installed("unbound", "KLOCK_REQUIRE_UNBOUND") {
        return;
    }
    let so = common::build_preload();
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("unbound-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut zone = String::from(
        "$ORIGIN bench.\n$TTL 86400\n@ IN SOA ns.bench. host.bench. 1 3600 600 86400 3600\n\
         @ IN NS ns.bench.\nns IN A 127.0.0.1\n",
    );
    for i in 0..NAMES {
        let [a, b, c, d] = address(i);
        writeln!(zone, "h{i} IN A {a}.{b}.{c}.{d}").unwrap();
    }
    std::fs::write(dir.join("bench.zone"), zone).unwrap();
    let port = UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free port")
        .port();
    let d = dir.display();
    let conf = format!(
        "server:\n  interface: 127.0.0.1@{port}\n  num-threads: 4\n  so-reuseport: yes\n  \
         do-daemonize: no\n  chroot: \"\"\n  username: \"\"\n  directory: \"{d}\"\n  \
         pidfile: \"\"\n  use-syslog: no\n  logfile: \"\"\n  do-ip6: no\n  do-tcp: no\n  \
         module-config: \"iterator\"\n\
         auth-zone:\n  name: \"bench.\"\n  zonefile: \"{d}/bench.zone\"\n  \
         for-downstream: no\n  for-upstream: yes\n  fallback-enabled: no\n\
         remote-control:\n  control-enable: no\n"
    );
    std::fs::write(dir.join("unbound.conf"), conf).unwrap();

    let server = Command::new("unbound")
        .arg("-d")
        .arg("-c")
        .arg(dir.join("unbound.conf"))
        .env("LD_PRELOAD", &so)
        .env("KLOCK_STAT", "1")
        // Every lock a row: the check below looks for both kinds, and
        // the 16 default rows (by total wait) can all be the caches'
        // spinlocks, with the rwlocks ranked below them.
        .env("KLOCK_STAT_TOP", "1000000")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start unbound");
    // Up when it answers.
    let probe = client(port);
    let start = Instant::now();
    while ask(&probe, 1, 0).is_err() {
        if start.elapsed() > Duration::from_secs(15) {
            let (_, err) = common::stop_server(server, rustix::process::Signal::TERM, "unbound");
            panic!(
                "unbound did not answer on port {port} within 15 s\n{}",
                head(&err)
            );
        }
    }

    let until = Instant::now() + Duration::from_secs(2);
    let clients: Vec<_> = (0..4u32)
        .map(|c| {
            std::thread::spawn(move || {
                let s = client(port);
                let (mut n, mut wrong) = (0u32, Vec::new());
                while Instant::now() < until {
                    let i = (n * 7919 + c * 251) % NAMES;
                    match ask(&s, n as u16, i) {
                        Ok(a) if a == address(i) => {}
                        Ok(a) => wrong.push(format!("h{i}: {a:?}")),
                        Err(e) => wrong.push(format!("h{i}: {e}")),
                    }
                    n += 1;
                }
                (n, wrong)
            })
        })
        .collect();
    let mut asked = 0;
    let mut wrong = Vec::new();
    for c in clients {
        let (n, w) = c.join().expect("a client thread");
        asked += n;
        wrong.extend(w);
    }
    let (status, err) = common::stop_server(server, rustix::process::Signal::TERM, "unbound");
    let _ = std::fs::remove_dir_all(&dir);

    assert!(
        wrong.is_empty(),
        "{} of {asked} answers wrong or missing, e.g. {:?}\n{}",
        wrong.len(),
        &wrong[..wrong.len().min(5)],
        head(&err)
    );
    assert!(
        asked > 1000,
        "hardly any queries answered: {asked}\n{}",
        head(&err)
    );
    assert!(
        status.code().is_some(),
        "unbound died by a signal: {status}\n{}",
        head(&err)
    );
    assert!(
        err.contains("klock: lock profile of unbound"),
        "no lock profile: the preload did not run in unbound\n{}",
        head(&err)
    );
    for kind in ["spin", "rwlock"] {
        assert!(
            err.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(kind)),
            "no {kind} in unbound's profile; its first lines:\n{}",
            head(&err)
        );
    }
}

/// The first lines of unbound's stderr, for a failure message: with a
/// row for every lock, the profile runs to thousands of lines.
fn head(err: &str) -> String {
    err.lines().take(60).collect::<Vec<_>>().join("\n")
}
