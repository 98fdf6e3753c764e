#![cfg(all(feature = "bpf", not(loom)))]
//! The exact owner-running oracle (feature `bpf`): what the eBPF
//! `sched_switch` table says about running, blocked and preempted threads,
//! and that unloading removes the program. Needs root; skipped otherwise.

use klock::oncpu::{self, OracleKind};
use klock::oncpu_bpf::{self, CpuState};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The program is process-global: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Say why a test does not run here, or fail if `KLOCK_REQUIRE_BPF` is
/// set (CI, as root: every one of these tests must run there).
fn skip(why: &str) {
    assert!(
        std::env::var_os("KLOCK_REQUIRE_BPF").is_none(),
        "KLOCK_REQUIRE_BPF is set but this test cannot run: {why}"
    );
    eprintln!("skipped: {why}");
}

/// Load the program, or say why the test is skipped (not root).
fn setup() -> Option<std::sync::MutexGuard<'static, ()>> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !rustix::process::geteuid().is_root() {
        skip("the bpf oracle needs root");
        return None;
    }
    // As root it must load: a failure here is a real failure.
    oncpu::use_oracle(OracleKind::Bpf).expect("bpf oracle loads as root");
    Some(g)
}

fn tid() -> u32 {
    klock::thread::current_tid()
}

/// Linux scheduler state letter of thread `tid` of this process.
fn proc_state(tid: u32) -> char {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    s.rsplit(')')
        .next()
        .and_then(|r| r.trim().chars().next())
        .unwrap_or('?')
}

/// Run `f` on a thread pinned to `cpu`: a watcher that shares a CPU with
/// the thread it watches only ever sees that thread off CPU.
fn on_cpu<R: Send + 'static>(cpu: usize, f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::spawn(move || {
        klock::rt::pin_to_cpu(cpu).unwrap();
        f()
    })
    .join()
    .unwrap()
}

fn two_cpus() -> bool {
    let ok =
        klock::sys::online_cpus() >= 2 && klock::rt::cpu_allowed(0) && klock::rt::cpu_allowed(1);
    if !ok {
        skip("needs CPUs 0 and 1");
    }
    ok
}

/// How long a running thread is given to read as on CPU. It reads On
/// unless the tracepoint never reported its last switch-in; then it reads
/// Off until its next one. On the development host (a Firecracker guest)
/// that happens for about a millisecond at a time (README, "Only as
/// complete as the tracepoint"), so one read could fail; reads over 20 ms
/// fail only if switch-ins are never seen at all.
const RUNNING_GRACE: Duration = Duration::from_millis(20);

/// Whether the calling thread reads as on CPU within [`RUNNING_GRACE`]; the
/// state it last read if not.
fn caller_reads_on() -> Result<(), CpuState> {
    if wait_until(RUNNING_GRACE, || {
        matches!(oncpu_bpf::cpu_state(tid()), CpuState::On(_))
    }) {
        Ok(())
    } else {
        Err(oncpu_bpf::cpu_state(tid()))
    }
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    f()
}

#[test]
fn running_threads_read_as_on_cpu() {
    let Some(_g) = setup() else { return };
    // The caller: registered at load (or at its first klock use) as running.
    if let Err(st) = caller_reads_on() {
        panic!("the running caller reads {st:?}");
    }
    // The oracle the locks ask says the same.
    assert!(
        wait_until(RUNNING_GRACE, || oncpu::oracle().owner_running(tid())
            == Some(true)),
        "the oracle never says the running caller runs"
    );
    if !two_cpus() {
        return;
    }
    // A busy thread on CPU 0, started after the load, registers itself.
    let stop = Arc::new(AtomicBool::new(false));
    let id = Arc::new(AtomicU32::new(0));
    let (s, i) = (stop.clone(), id.clone());
    let h = std::thread::spawn(move || {
        klock::rt::pin_to_cpu(0).unwrap();
        i.store(tid(), Ordering::Release);
        while !s.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    assert!(wait_until(Duration::from_secs(2), || id
        .load(Ordering::Acquire)
        != 0));
    let t = id.load(Ordering::Acquire);
    // It is on CPU 0 nearly always (the machine may preempt it briefly):
    // watched from CPU 1, it must read as on CPU.
    let seen = on_cpu(1, move || {
        wait_until(Duration::from_secs(2), || {
            matches!(oncpu_bpf::cpu_state(t), CpuState::On(_))
        })
    });
    assert!(
        seen,
        "a busy thread never read as on CPU: {:?}",
        oncpu_bpf::cpu_state(t)
    );
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

/// A thread blocked in a futex wait must read as off CPU as soon as the
/// kernel says it sleeps (the program runs in that very switch); it is
/// unregistered once it exits. `what` names the setting, for messages.
fn check_blocked_thread_reads_off(what: &str) {
    let word = Arc::new(AtomicU32::new(0));
    let id = Arc::new(AtomicU32::new(0));
    let (w, i) = (word.clone(), id.clone());
    let h = std::thread::spawn(move || {
        i.store(tid(), Ordering::Release);
        while w.load(Ordering::Acquire) == 0 {
            klock::sys::futex_wait(&w, 0, Some(Duration::from_secs(5)));
        }
    });
    assert!(wait_until(Duration::from_secs(2), || id
        .load(Ordering::Acquire)
        != 0));
    let t = id.load(Ordering::Acquire);
    assert!(wait_until(Duration::from_secs(2), || proc_state(t) == 'S'));
    let st = oncpu_bpf::cpu_state(t);
    assert!(
        matches!(st, CpuState::Off(_)),
        "{what}: blocked thread reads {st:?}"
    );
    assert_eq!(oncpu::oracle().owner_running(t), Some(false), "{what}");
    word.store(1, Ordering::Release);
    klock::sys::futex_wake(&word, 1);
    h.join().unwrap();
    assert_eq!(
        oncpu_bpf::cpu_state(t),
        CpuState::Unknown,
        "{what}: exited thread"
    );
}

#[test]
fn a_thread_blocked_in_a_futex_reads_as_off_cpu() {
    let Some(_g) = setup() else { return };
    check_blocked_thread_reads_off("default hook");
}

#[test]
fn a_thread_preempted_by_a_pinned_hog_reads_as_off_cpu() {
    let Some(_g) = setup() else { return };
    if let Some(why) = klock::rt::rt_unavailable_reason(0) {
        skip(&why);
        return;
    }
    if !two_cpus() {
        return;
    }
    // Victim: busy on CPU 0. Hog: SCHED_FIFO on CPU 0 for 100 ms, which
    // preempts the victim for that long. A thread pinned to CPU 1 watches.
    let stop = Arc::new(AtomicBool::new(false));
    let id = Arc::new(AtomicU32::new(0));
    let (s, i) = (stop.clone(), id.clone());
    let victim = std::thread::spawn(move || {
        klock::rt::pin_to_cpu(0).unwrap();
        i.store(tid(), Ordering::Release);
        let mut n = 0u64;
        while !s.load(Ordering::Relaxed) {
            n = n.wrapping_add(1);
            std::hint::spin_loop();
        }
        n
    });
    assert!(wait_until(Duration::from_secs(2), || id
        .load(Ordering::Acquire)
        != 0));
    let t = id.load(Ordering::Acquire);
    let running = move || {
        on_cpu(1, move || {
            wait_until(Duration::from_secs(2), || {
                matches!(oncpu_bpf::cpu_state(t), CpuState::On(_))
            })
        })
    };
    assert!(running(), "the busy victim never read as on CPU");
    // The watcher looks 10 ms into the hog's 100 ms. On a loaded machine
    // the watcher itself may be kept off CPU 1 past the hog's end (a CI
    // run with other work on the machine missed it): a hog it did not
    // catch is tried again, up to five times.
    let mut caught = None;
    for _ in 0..5 {
        let started = Arc::new(AtomicBool::new(false));
        let over = Arc::new(AtomicBool::new(false));
        let (st, ov) = (started.clone(), over.clone());
        let hog = std::thread::spawn(move || {
            klock::rt::pin_to_cpu(0).unwrap();
            klock::rt::set_fifo(10).unwrap();
            st.store(true, Ordering::Release);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(100) {
                std::hint::spin_loop();
            }
            ov.store(true, Ordering::Release);
            let _ = klock::rt::set_normal();
        });
        // Not from the test thread: unpinned, it may be on CPU 0 when the
        // hog starts and then wait behind it (when it watched, 1 run in
        // 300 found the hog already over).
        let (during, still_hogging) = on_cpu(1, move || {
            assert!(
                wait_until(Duration::from_secs(2), || started.load(Ordering::Acquire)),
                "the hog never started"
            );
            std::thread::sleep(Duration::from_millis(10));
            let during = oncpu_bpf::cpu_state(t);
            (during, !over.load(Ordering::Acquire))
        });
        hog.join().unwrap();
        if still_hogging {
            caught = Some(during);
            break;
        }
    }
    let during = caught.expect("each of 5 100 ms hogs ended before the check (machine too slow?)");
    assert!(
        matches!(during, CpuState::Off(_)),
        "victim preempted by a FIFO hog on its CPU reads {during:?}"
    );
    // And on CPU again once the hog is gone.
    assert!(running(), "the victim never read as on CPU after the hog");
    stop.store(true, Ordering::Relaxed);
    victim.join().unwrap();
}

#[test]
fn should_yield_after_being_switched_out() {
    let Some(_g) = setup() else { return };
    let o = oncpu::oracle();
    o.spin_begin();
    // A sleep switches this thread out and back in.
    std::thread::sleep(Duration::from_millis(2));
    assert!(
        o.should_yield(),
        "a spinner that slept must be told to yield"
    );
    o.spin_begin();
    // Without a switch it must (almost always) say no; allow a preemption.
    let no = (0..5).any(|_| {
        o.spin_begin();
        !o.should_yield()
    });
    assert!(no);
}

#[test]
fn unloading_leaves_no_program() {
    let Some(_g) = setup() else { return };
    let id = oncpu_bpf::prog_id().expect("loaded");
    assert!(oncpu_bpf::prog_exists(id).unwrap());
    oncpu::use_oracle(OracleKind::Budget).unwrap();
    assert_eq!(oncpu::oracle_kind(), Some(OracleKind::Budget));
    assert!(!oncpu_bpf::is_loaded());
    assert_eq!(oncpu_bpf::cpu_state(tid()), CpuState::Unknown);
    // The kernel frees the program after an RCU grace period.
    assert!(
        wait_until(Duration::from_secs(5), || !oncpu_bpf::prog_exists(id)
            .unwrap()),
        "bpf program {id} still exists after unload"
    );
    // And it loads again.
    oncpu::use_oracle(OracleKind::Bpf).unwrap();
    assert_ne!(oncpu_bpf::prog_id(), Some(id));
    if let Err(st) = caller_reads_on() {
        panic!("after reloading, the running caller reads {st:?}");
    }
}

#[test]
fn mutex_under_the_bpf_oracle_excludes() {
    let Some(_g) = setup() else { return };
    let m = Arc::new(klock::Mutex::new(0u64));
    let t0 = Instant::now();
    let hs: Vec<_> = (0..8)
        .map(|k| {
            let m = m.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while t0.elapsed() < Duration::from_millis(300) {
                    let mut g = m.lock();
                    *g += 1;
                    if k == 0 && n.is_multiple_of(64) {
                        // An owner that sleeps: waiters must not spin on it.
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    drop(g);
                    n += 1;
                }
                n
            })
        })
        .collect();
    let total: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(*m.lock(), total);
}

#[test]
fn both_hooks_track_a_blocked_thread() {
    use oncpu_bpf::Hook;
    let Some(_g) = setup() else { return };
    for hook in [Hook::TpBtf, Hook::Tracepoint] {
        oncpu_bpf::load_with(Some(hook)).unwrap_or_else(|e| panic!("{}: {e}", hook.name()));
        assert_eq!(oncpu_bpf::hook(), Some(hook));
        check_blocked_thread_reads_off(hook.name());
        // The caller runs: after a sleep (a switch out and back in), its
        // own entry reads on CPU under either hook.
        std::thread::sleep(Duration::from_millis(1));
        if let Err(st) = caller_reads_on() {
            panic!("{}: the running caller reads {st:?}", hook.name());
        }
    }
    oncpu_bpf::load_with(None).unwrap();
}

/// The measurement behind `caller_reads_on`'s retry (README, "Only as
/// complete as the tracepoint"): 4 threads each read their own state
/// 20,000 times, right after a 50 µs sleep or a yield, and count the reads
/// that say "off" while they run; per hook. Not run by default (about 3 s):
///
/// ```sh
/// cargo test -p klock --features bpf --release --test oncpu_bpf -- \
///     --ignored --nocapture running_threads_seldom_read_off
/// ```
///
/// Fails if more than 1% of the reads are wrong: then the table is not a
/// usable oracle on that machine.
#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn running_threads_seldom_read_off() {
    use oncpu_bpf::Hook;
    const THREADS: usize = 4;
    const READS: usize = 20_000;
    let Some(_g) = setup() else { return };
    for hook in [Hook::TpBtf, Hook::Tracepoint] {
        oncpu_bpf::load_with(Some(hook)).unwrap_or_else(|e| panic!("{}: {e}", hook.name()));
        let hs: Vec<_> = (0..THREADS)
            .map(|_| {
                std::thread::spawn(|| {
                    let me = tid();
                    let (mut off, mut unknown) = (0usize, 0usize);
                    for i in 0..READS {
                        if i % 2 == 0 {
                            std::thread::sleep(Duration::from_micros(50));
                        } else {
                            std::thread::yield_now();
                        }
                        match oncpu_bpf::cpu_state(me) {
                            CpuState::On(_) => {}
                            CpuState::Off(_) => off += 1,
                            CpuState::Unknown => unknown += 1,
                        }
                    }
                    (off, unknown)
                })
            })
            .collect();
        let per: Vec<(usize, usize)> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let off: usize = per.iter().map(|p| p.0).sum();
        let unknown: usize = per.iter().map(|p| p.1).sum();
        let reads = THREADS * READS;
        eprintln!(
            "{}: {off} of {reads} reads by running threads said off ({:.4}%), {unknown} unknown; \
             off per thread: {:?}",
            hook.name(),
            100.0 * off as f64 / reads as f64,
            per.iter().map(|p| p.0).collect::<Vec<_>>()
        );
        assert_eq!(
            unknown,
            0,
            "{}: a registered thread read unknown",
            hook.name()
        );
        assert!(
            off * 100 <= reads,
            "{}: {off} of {reads} reads by running threads said off",
            hook.name()
        );
    }
    oncpu_bpf::load_with(None).unwrap();
}
