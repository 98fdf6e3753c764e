//! `ctxswitch`: what the eBPF oracle's `sched_switch` hook costs per
//! context switch.
//!
//! Two threads pinned to one CPU ping-pong through a futex: each hand-over
//! is one voluntary context switch, and nothing else runs between them.
//! ns per switch = elapsed / hand-overs, measured with the program
//! unloaded and loaded, runs interleaved. Both threads are registered in
//! the oracle's table, so every switch takes the program's longest path
//! (two lookups, two tag matches, two updates).

use super::report::{Machine, Provenance, ResultFile, ResultRow};
use super::workload::{Role, RunOutcome};
use super::Plan;
use indicatif::ProgressBar;
use klock::oncpu::{oracle_kind, use_oracle, OracleKind};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The suite's name.
pub const NAME: &str = "ctxswitch";

/// The variants, as (id, variant, table label, hook).
pub(super) const VARIANTS: [(&str, &str, &str, Hook); 3] = [
    ("pingpong", "bpf=off", "not loaded", Hook::Off),
    (
        "pingpong-bpf-tracepoint",
        "bpf=tracepoint",
        "perf tracepoint (fallback)",
        Hook::Tracepoint,
    ),
    (
        "pingpong-bpf",
        "bpf=tp_btf",
        "tp_btf (default)",
        Hook::TpBtf,
    ),
];

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Hook {
    Off,
    Tracepoint,
    TpBtf,
}

/// Attach the program with `hook` (or detach it).
fn set_hook(hook: Hook) -> Result<(), String> {
    #[cfg(feature = "bpf")]
    {
        use klock::oncpu_bpf::{load_with, unload, Hook as H};
        match hook {
            Hook::Off => unload(),
            Hook::Tracepoint => load_with(Some(H::Tracepoint)).map_err(|e| e.to_string())?,
            Hook::TpBtf => load_with(Some(H::TpBtf)).map_err(|e| e.to_string())?,
        }
        Ok(())
    }
    #[cfg(not(feature = "bpf"))]
    {
        let _ = hook;
        Err("klock-cli was built without the `bpf` feature".into())
    }
}

/// One ping-pong run of `duration` after `warmup` on CPU `cpu`.
fn pingpong(cpu: usize, warmup: Duration, duration: Duration) -> Result<RunOutcome, String> {
    let turn = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let counting = Arc::new(AtomicBool::new(false));
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let start = Arc::new(Barrier::new(3));
    let hs: Vec<_> = (0..2u32)
        .map(|me| {
            let (turn, stop, counting, counts, start) = (
                turn.clone(),
                stop.clone(),
                counting.clone(),
                counts.clone(),
                start.clone(),
            );
            std::thread::spawn(move || -> Result<(), String> {
                klock::rt::pin_to_cpu(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
                // Register in the oracle's table, as a lock owner would.
                let _ = klock::thread::current_tid();
                start.wait();
                let mut n = 0u64;
                loop {
                    // Acquire pairs with the other thread's Release store:
                    // its turn is over.
                    let t = turn.load(Ordering::Acquire);
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if t % 2 != me {
                        klock::sys::futex_wait(&turn, t, Some(Duration::from_millis(50)));
                        continue;
                    }
                    turn.store(t.wrapping_add(1), Ordering::Release);
                    klock::sys::futex_wake(&turn, 1);
                    if counting.load(Ordering::Relaxed) {
                        n += 1;
                    }
                }
                counts[me as usize].store(n, Ordering::Relaxed);
                Ok(())
            })
        })
        .collect();
    start.wait();
    std::thread::sleep(warmup);
    let u0 = super::workload::usage();
    counting.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    std::thread::sleep(duration);
    counting.store(false, Ordering::Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    let u1 = super::workload::usage();
    stop.store(true, Ordering::Relaxed);
    turn.fetch_add(2, Ordering::Release);
    klock::sys::futex_wake(&turn, 2);
    for h in hs {
        h.join()
            .map_err(|_| "ping-pong thread panicked".to_string())??;
    }
    Ok(RunOutcome {
        elapsed_s: elapsed,
        per_thread: counts
            .iter()
            .map(|c| (Role::Writer, c.load(Ordering::Relaxed)))
            .collect(),
        cpu_s: u1.since(u0).cpu_s,
        ctx_voluntary: u1.since(u0).nvcsw,
        ctx_involuntary: u1.since(u0).nivcsw,
        events: Vec::new(),
        xfer_ns: (None, None),
    })
}

/// ns per context switch, by the kernel's count of this process's
/// switches (it matches the hand-overs: each is one switch).
fn ns_per_switch(r: &RunOutcome) -> f64 {
    let n = r.ctx_voluntary + r.ctx_involuntary;
    if n == 0 {
        f64::NAN
    } else {
        r.elapsed_s * 1e9 / n as f64
    }
}

/// Run the suite: `Ok(None)` (with a note) where the program cannot load.
pub fn execute(
    plan: &Plan,
    machine: &Machine,
    provenance: &Provenance,
    pb: &ProgressBar,
) -> Result<Option<ResultFile>, String> {
    let total = (plan.runs * VARIANTS.len()) as u64;
    if let Err(why) = super::klocks::bpf_available() {
        pb.suspend(|| println!("\n== {NAME} — skipped: {why}"));
        pb.inc(total);
        return Ok(None);
    }
    if !plan.locks.is_empty() {
        pb.suspend(|| println!("\n== {NAME}: --locks does not apply (it measures the hook)"));
    }
    // The highest CPU we may use: away from CPU 0's interrupts.
    let online = klock::sys::online_cpus();
    let cpu = klock::rt::allowed_cpus()
        .into_iter()
        .rfind(|&c| c < online)
        .ok_or("no CPU in this process's affinity mask")?;
    let before = oracle_kind().unwrap_or(OracleKind::Budget);
    // The program stays loaded only for the variants that measure it.
    use_oracle(OracleKind::Budget)?;
    let mut runs: Vec<Vec<RunOutcome>> = VARIANTS.iter().map(|_| Vec::new()).collect();
    let mut seq_moved = true;
    for r in 0..plan.runs {
        for (k, &(id, _, _, hook)) in VARIANTS.iter().enumerate() {
            pb.set_message(format!("{NAME} {id}, run {}", r + 1));
            set_hook(hook)?;
            let out = pingpong(cpu, plan.warmup, plan.duration);
            if hook != Hook::Off {
                // The hook ran: this thread's own switch sequence is known.
                seq_moved &= hook_saw_me();
            }
            runs[k].push(out?);
            pb.inc(1);
        }
    }
    set_hook(Hook::Off)?;
    use_oracle(before)?;
    let rows: Vec<ResultRow> = VARIANTS
        .iter()
        .zip(&runs)
        .map(|(&(id, variant, _, _), runs)| {
            ResultRow::aggregate(id, "futex-pingpong", variant, 0, 2, runs)
        })
        .collect();
    let file = ResultFile {
        suite: NAME.into(),
        machine: machine.clone(),
        results: rows,
        title: plan.suite.title.into(),
        workload: format!(
            "2 threads pinned to CPU {cpu} hand a futex word back and forth; {:?} × {} runs \
             per variant after {:?} warm-up, variants interleaved",
            plan.duration, plan.runs, plan.warmup
        ),
        provenance: provenance.clone(),
        verdict: Default::default(),
    };
    let ns: Vec<Vec<f64>> = runs
        .iter()
        .map(|rs| rs.iter().map(ns_per_switch).collect())
        .collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let sd = |v: &[f64]| {
        let m = mean(v);
        (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len().max(1) as f64).sqrt()
    };
    let off = mean(&ns[0]);
    let mut text = format!(
        "\n== {NAME} — {}\n   {}\n   machine: {} CPUs, {}, kernel {}\n\n",
        plan.suite.title, file.workload, machine.cpus, machine.cpu_model, machine.kernel
    );
    text += &format!(
        "   {:<28} {:>18} {:>12} {:>16}\n",
        "sched_switch hook", "ns/switch mean(sd)", "switches/s", "hook cost"
    );
    for (k, &(_, _, label, _)) in VARIANTS.iter().enumerate() {
        let m = mean(&ns[k]);
        text += &format!(
            "   {:<28} {:>18} {:>12.0} {:>16}\n",
            label,
            format!("{m:.0} ({:.0})", sd(&ns[k])),
            1e9 / m,
            if k == 0 {
                String::new()
            } else {
                format!("{:+.0} ns ({:+.1}%)", m - off, (m / off - 1.0) * 100.0)
            }
        );
    }
    if !seq_moved {
        text += "\n   [warning: the table saw no switch: was the hook running?]\n";
    }
    // The table first, then the file.
    pb.suspend(|| print!("{text}"));
    file.write_json(&plan.json)?;
    Ok(Some(file))
}

/// Whether the oracle's table knows the calling thread's state (the hook
/// has run for it since the load).
fn hook_saw_me() -> bool {
    #[cfg(feature = "bpf")]
    {
        klock::oncpu_bpf::cpu_state(klock::thread::current_tid())
            != klock::oncpu_bpf::CpuState::Unknown
    }
    #[cfg(not(feature = "bpf"))]
    {
        false
    }
}
