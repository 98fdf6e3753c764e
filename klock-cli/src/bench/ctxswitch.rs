//! `ctxswitch`: what the eBPF oracle's `sched_switch` hook costs per
//! context switch.
//!
//! Two threads pinned to one CPU ping-pong through a futex: each hand-over
//! is one voluntary context switch, and nothing else runs between them.
//! ns per switch = elapsed / hand-overs, measured with the program
//! unloaded and loaded, runs interleaved. Both threads are registered in
//! the oracle's table, so every switch takes the program's longest path
//! (two lookups, two tag matches, two updates).

use super::report::{ResultFile, ResultRow};
use super::suite::{all_writers, Ctx, Measured, Plan, Point, Spec, Suite};
use super::workload::{CriticalSection, Role, RunOutcome};
use klock::oncpu::{oracle_kind, use_oracle, OracleKind};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The suite's name.
pub const NAME: &str = "ctxswitch";

/// The variants, as (id, variant, table label, hook).
const VARIANTS: [(&str, &str, &str, Hook); 3] = [
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
enum Hook {
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

/// The suite.
pub struct CtxSwitch;

/// The table entry.
pub static CTXSWITCH: CtxSwitch = CtxSwitch;

static SPEC: Spec = Spec {
    name: NAME,
    title: "cost of the bpf oracle's sched_switch hook: ns per context switch of a futex \
            ping-pong on one CPU, hook not loaded vs loaded (needs root and feature bpf)",
    default_locks: &[],
    default_threads: &[2],
    cs: CriticalSection::Counter,
    outside_ns: 0,
    mix: all_writers,
    cost_table: false,
    runs: None,
    quick_ends: false,
};

/// Set up in `begin`, undone in `end`.
pub struct State {
    /// The CPU both threads run on.
    cpu: usize,
    /// The oracle in use before the suite.
    before: OracleKind,
    /// Whether the hook saw this thread in every loaded run.
    seq_moved: bool,
}

impl Suite for CtxSwitch {
    type Outcome = RunOutcome;
    type State = State;

    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn skip(&self, _: &Plan) -> Option<String> {
        super::klocks::bpf_available().err()
    }
    /// One point per hook variant, whatever the locks.
    fn points(&self, _: &Plan) -> Vec<Point> {
        VARIANTS
            .iter()
            .enumerate()
            .map(|(item, &(id, ..))| Point {
                item,
                id,
                threads: 2,
            })
            .collect()
    }
    fn label(&self, p: &Point) -> String {
        p.id.to_string()
    }
    fn begin(&self, plan: &Plan, ctx: &Ctx) -> Result<State, String> {
        if !plan.locks.is_empty() {
            ctx.print(&format!(
                "\n== {NAME}: --locks does not apply (it measures the hook)\n"
            ));
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
        Ok(State {
            cpu,
            before,
            seq_moved: true,
        })
    }
    fn run(&self, plan: &Plan, st: &mut State, p: &Point) -> Result<RunOutcome, String> {
        let hook = VARIANTS[p.item].3;
        set_hook(hook)?;
        let out = pingpong(st.cpu, plan.warmup, plan.duration);
        if hook != Hook::Off {
            // The hook ran: this thread's own switch sequence is known.
            st.seq_moved &= hook_saw_me();
        }
        out
    }
    fn row(&self, _: &Plan, p: &Point, runs: &[RunOutcome]) -> ResultRow {
        let (id, variant, _, _) = VARIANTS[p.item];
        ResultRow::aggregate(id, "futex-pingpong", variant, 0, 2, runs)
    }
    fn end(&self, _: &Plan, st: &mut State, _: &Ctx) -> Result<(), String> {
        set_hook(Hook::Off)?;
        use_oracle(st.before)
    }
    fn workload(&self, plan: &Plan, st: &State) -> String {
        format!(
            "2 threads pinned to CPU {} hand a futex word back and forth; {:?} × {} runs \
             per variant after {:?} warm-up, variants interleaved",
            st.cpu, plan.duration, plan.runs, plan.warmup
        )
    }
    /// No peers: no verdict.
    fn verdict(&self) -> bool {
        false
    }
    fn tables(
        &self,
        plan: &Plan,
        st: &State,
        file: &ResultFile,
        measured: &[Measured<RunOutcome>],
    ) -> String {
        render(plan, st, file, measured)
    }
    /// A table only.
    fn plot_unit(&self) -> Option<&'static str> {
        None
    }
}

/// ns per switch by variant: mean(sd), switches/s, and the hook's cost
/// against the unloaded variant.
fn render(plan: &Plan, st: &State, file: &ResultFile, measured: &[Measured<RunOutcome>]) -> String {
    let machine = &file.machine;
    let ns: Vec<Vec<f64>> = measured
        .iter()
        .map(|(_, rs)| rs.iter().map(ns_per_switch).collect())
        .collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let sd = |v: &[f64]| {
        let m = mean(v);
        (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len().max(1) as f64).sqrt()
    };
    let off = mean(&ns[0]);
    let mut text = format!(
        "\n== {NAME} — {}\n   {}\n   machine: {} CPUs, {}, kernel {}\n\n",
        plan.spec.title, file.workload, machine.cpus, machine.cpu_model, machine.kernel
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
    if !st.seq_moved {
        text += "\n   [warning: the table saw no switch: was the hook running?]\n";
    }
    text
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
