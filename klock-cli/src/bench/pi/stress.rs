//! One pi_stress run: the launcher, the heartbeat, and the watchdog that
//! samples the windows.

use super::group::{become_rt, drop_rt, group_thread, Barrier, Group, Role3};
use super::{PRIO_HEARTBEAT, WATCHDOG, WINDOWS_PER_RUN};
use crate::bench::peers::{self, BenchLock};
use crate::bench::workload;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One pi_stress run: its windows and counts.
#[derive(Debug, Clone, Default)]
pub struct PiRun {
    /// Inversions per second (all groups) in each measured window.
    pub window_rates: Vec<f64>,
    /// Completed inversions per group during the measured period.
    pub per_group: Vec<u64>,
    /// Watchdog failures during the whole run (warm-up included).
    pub failures: u64,
    /// Long no-progress periods while the CPU was not available to
    /// real-time threads at all (not counted as failures).
    pub cpu_stalls: u64,
    pub elapsed_s: f64,
    pub cpu_s: f64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub events: Vec<(&'static str, u64)>,
    /// The lock has priority inheritance ([`BenchLock::PRIORITY_INHERITANCE`]).
    pub priority_inheritance: bool,
}

/// Pins the calling thread to CPU 0 and restores its CPU set when dropped:
/// the watchdog must not share the real-time CPU.
struct OnCpu0(Option<rustix::thread::CpuSet>);

impl OnCpu0 {
    fn new() -> Self {
        let saved = rustix::thread::sched_getaffinity(None).ok();
        let _ = klock::rt::pin_to_cpu(0);
        Self(saved)
    }
}

impl Drop for OnCpu0 {
    fn drop(&mut self) {
        if let Some(set) = &self.0 {
            let _ = rustix::thread::sched_setaffinity(None, set);
        }
    }
}

/// Run `groups` pi_stress groups on a fresh lock of type `L` per group,
/// under the lock's owner-running oracle (switched before any real-time
/// thread starts). The calling thread is the watchdog; it stays on CPU 0
/// meanwhile.
pub fn run<L: BenchLock>(
    groups: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<PiRun, String> {
    peers::with_oracle::<L, _>(|| run_once::<L>(groups, warmup, duration))
}

fn run_once<L: BenchLock>(
    groups: usize,
    warmup: Duration,
    duration: Duration,
) -> Result<PiRun, String> {
    let _on_cpu0 = OnCpu0::new();
    let stop = Arc::new(AtomicBool::new(false));
    let gs: Vec<Arc<Group<L>>> = (0..groups)
        .map(|_| {
            Arc::new(Group {
                lock: L::new(),
                barrier: Barrier::new(3),
                high_trying: AtomicBool::new(false),
                high_done: AtomicBool::new(false),
                abort: AtomicBool::new(false),
                inversions: AtomicU64::new(0),
                iterations: AtomicU64::new(0),
            })
        })
        .collect();
    // Heartbeat: a real-time thread above the groups on the same CPU that
    // sleeps 1 ms at a time. Its beats tell the watchdog whether the CPU
    // was available to real-time threads at all: RT throttling and the
    // kernel's fair server can take it away for tens of ms, which is no
    // lock's fault.
    let beats = Arc::new(AtomicU64::new(0));
    type Handle = std::thread::JoinHandle<Result<(), String>>;
    // Threads are started by a launcher pinned to CPU 0: a new thread
    // inherits its creator's CPU set, so it starts on the free CPU and
    // cannot be stranded, still SCHED_OTHER, on a CPU the real-time
    // threads keep busy. Each then switches to SCHED_FIFO and moves to
    // RT_CPU itself.
    let launched = {
        let (gs, stop, beats) = (gs.clone(), stop.clone(), beats.clone());
        std::thread::spawn(move || -> (Vec<Handle>, Option<String>) {
            let mut handles: Vec<Handle> = Vec::with_capacity(3 * gs.len() + 1);
            if let Err(e) = klock::rt::pin_to_cpu(0) {
                return (
                    handles,
                    Some(format!("cannot pin the launcher to CPU 0: {e}")),
                );
            }
            let heart = {
                let (beats, stop) = (beats.clone(), stop.clone());
                std::thread::Builder::new()
                    .name("pi-heartbeat".into())
                    .spawn(move || -> Result<(), String> {
                        let r = become_rt(PRIO_HEARTBEAT);
                        // Beat at least once even on failure: the launcher waits for it.
                        beats.fetch_add(1, Relaxed);
                        r?;
                        while !stop.load(Relaxed) {
                            std::thread::sleep(Duration::from_millis(1));
                            beats.fetch_add(1, Relaxed);
                        }
                        drop_rt();
                        Ok(())
                    })
            };
            match heart {
                Ok(h) => handles.push(h),
                Err(e) => {
                    return (
                        handles,
                        Some(format!("cannot start the heartbeat thread: {e}")),
                    )
                }
            }
            let t = Instant::now();
            while beats.load(Relaxed) == 0 && t.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(1));
            }
            for (i, g) in gs.iter().enumerate() {
                for role in [Role3::Low, Role3::Medium, Role3::High] {
                    let (g, stop2) = (g.clone(), stop.clone());
                    let h = std::thread::Builder::new()
                        .name(format!("pi-{i}"))
                        .spawn(move || {
                            let r = group_thread(&g, role, &stop2);
                            if r.is_err() {
                                stop2.store(true, Relaxed);
                            }
                            r
                        });
                    match h {
                        Ok(h) => handles.push(h),
                        Err(e) => {
                            return (handles, Some(format!("cannot start pi_stress thread: {e}")))
                        }
                    }
                }
            }
            (handles, None)
        })
    };
    let (handles, launch_err) = launched
        .join()
        .map_err(|_| "the pi_stress launcher panicked".to_string())?;
    if let Some(e) = launch_err {
        stop.store(true, Relaxed);
        for h in handles {
            let _ = h.join();
        }
        return Err(e);
    }
    let beats_needed = WATCHDOG.as_millis() as u64;

    // Watchdog and window sampler (this thread stays SCHED_OTHER).
    let total = |gs: &[Arc<Group<L>>]| gs.iter().map(|g| g.inversions.load(Relaxed)).sum::<u64>();
    let t0 = Instant::now();
    let window = duration / WINDOWS_PER_RUN as u32;
    let measure_start = t0 + warmup;
    let end = measure_start + window * WINDOWS_PER_RUN as u32;
    // Per group: (iterations, when they last changed, beats then).
    let mut last_iter: Vec<(u64, Instant, u64)> = gs.iter().map(|_| (0, t0, 0)).collect();
    let mut failures = 0u64;
    let mut cpu_stalls = 0u64;
    let mut window_rates = Vec::with_capacity(WINDOWS_PER_RUN);
    let mut per_group0 = Vec::new();
    let mut sample: Option<(u64, Instant)> = None;
    let (mut u0, mut e0) = (workload::Usage::default(), Vec::new());
    loop {
        let now = Instant::now();
        if sample.is_none() && now >= measure_start {
            per_group0 = gs.iter().map(|g| g.inversions.load(Relaxed)).collect();
            sample = Some((total(&gs), now));
            u0 = workload::usage();
            e0 = L::events();
        }
        if let Some((n0, s0)) = sample {
            let next = measure_start + window * (window_rates.len() as u32 + 1);
            if now >= next {
                let n = total(&gs);
                window_rates.push((n - n0) as f64 / now.duration_since(s0).as_secs_f64().max(1e-9));
                sample = Some((n, now));
            }
        }
        if window_rates.len() >= WINDOWS_PER_RUN || now >= end + window || stop.load(Relaxed) {
            break;
        }
        let b = beats.load(Relaxed);
        for (g, last) in gs.iter().zip(last_iter.iter_mut()) {
            let it = g.iterations.load(Acquire);
            if it != last.0 {
                *last = (it, now, b);
            } else if now.duration_since(last.1) >= WATCHDOG {
                if b - last.2 >= beats_needed * 9 / 10 {
                    // The CPU was there for real-time threads and the
                    // group made no progress: it stalled.
                    failures += 1;
                    g.abort.store(true, Relaxed);
                    *last = (it, now, b);
                } else if now.duration_since(last.1) >= 10 * WATCHDOG {
                    // The CPU was taken away from real-time threads.
                    cpu_stalls += 1;
                    *last = (it, now, b);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let elapsed = sample.map_or(0.0, |(_, s)| s.duration_since(measure_start).as_secs_f64());
    let per_group: Vec<u64> = gs
        .iter()
        .zip(per_group0.iter().chain(std::iter::repeat(&0)))
        .map(|(g, &b)| g.inversions.load(Relaxed) - b)
        .collect();
    let u1 = workload::usage();
    let e1 = L::events();
    stop.store(true, Relaxed);
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => err = Some(e),
            Err(_) => err = Some("a pi_stress thread panicked".into()),
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    let events = e1
        .into_iter()
        .map(|(k, v)| {
            let b = e0.iter().find(|e| e.0 == k).map_or(0, |e| e.1);
            (k, v.saturating_sub(b))
        })
        .collect();
    Ok(PiRun {
        priority_inheritance: L::PRIORITY_INHERITANCE,
        window_rates,
        per_group,
        failures,
        cpu_stalls,
        elapsed_s: elapsed,
        cpu_s: u1.since(u0).cpu_s,
        ctx_voluntary: u1.since(u0).nvcsw,
        ctx_involuntary: u1.since(u0).nivcsw,
        events,
    })
}
