//! `klock`: the kernel's lock experiments, torture and lockstat for userspace.

use clap::{Args, Parser, Subcommand};
use klock_bench::bench;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "klock",
    version,
    about = "The Linux kernel's locking playbook, measured in userspace"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run benchmark suites (default: the headline suites) and print the kernel's tables.
    Bench(BenchArgs),
    /// Run a bench workload with lockstat tracking on; print /proc/lock_stat and lockmeter tables.
    Stat(StatArgs),
}

#[derive(Args)]
struct StatArgs {
    /// Suites whose workload to run (see `klock bench --list`), e.g. treelock.
    #[arg(required = true)]
    suites: Vec<String>,
    /// Locks to track, comma-separated (default: the suite's own list).
    #[arg(long, value_delimiter = ',')]
    locks: Vec<String>,
    /// Thread counts, comma-separated (default 4, or the suite's only count).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// Measured time per run, e.g. 1s (default 500ms; --quick 150ms).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Warm-up before each run (default 100ms; --quick 50ms); tracked too.
    #[arg(long, value_parser = humantime::parse_duration)]
    warmup: Option<Duration>,
    /// Short runs.
    #[arg(long)]
    quick: bool,
    /// Replace the suite's critical section by N ns of busy work (not treelock).
    #[arg(long)]
    cs_ns: Option<u64>,
    /// Busy work between acquisitions, ns (default: the suite's).
    #[arg(long)]
    outside_ns: Option<u64>,
}

#[derive(Args)]
struct BenchArgs {
    /// Suites to run (see --list); none = the headline suites.
    suites: Vec<String>,
    /// Locks to compare, comma-separated (default: the suite's own list).
    #[arg(long, value_delimiter = ',')]
    locks: Vec<String>,
    /// Thread counts, comma-separated (default: the suite's own list).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
    /// Measured time per run, e.g. 2s or 500ms (default 500ms; --quick 150ms).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Runs per point (default 3; --quick 1).
    #[arg(long)]
    runs: Option<usize>,
    /// Warm-up before each measured window (default 100ms; --quick 50ms).
    #[arg(long, value_parser = humantime::parse_duration)]
    warmup: Option<Duration>,
    /// JSON output path (default target/klock-bench/SUITE.json).
    #[arg(long)]
    json: Option<PathBuf>,
    /// SVG plot path (default target/klock-bench/SUITE.svg).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Smoke run: about 0.2 s per point.
    #[arg(long)]
    quick: bool,
    /// Replace the suite's critical section by N ns of busy work.
    #[arg(long)]
    cs_ns: Option<u64>,
    /// Busy work between acquisitions, ns (default: the suite's).
    #[arg(long)]
    outside_ns: Option<u64>,
    /// List suites and locks, then exit.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Stat(a) => {
            let opts = bench::Options {
                suites: a.suites,
                locks: a.locks,
                threads: a.threads.clone(),
                duration: a.duration,
                runs: Some(1),
                warmup: a.warmup,
                quick: a.quick,
                cs_ns: a.cs_ns,
                outside_ns: a.outside_ns,
                ..Default::default()
            };
            let result = opts
                .plan()
                .and_then(|mut plans| bench::stat::execute(&mut plans, !a.threads.is_empty()));
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("klock stat: error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Cmd::Bench(a) => {
            if a.list {
                print!("{}", bench::list());
                return ExitCode::SUCCESS;
            }
            let command = std::env::args().collect::<Vec<_>>().join(" ");
            let opts = bench::Options {
                suites: a.suites,
                locks: a.locks,
                threads: a.threads,
                duration: a.duration,
                runs: a.runs,
                warmup: a.warmup,
                json: a.json,
                plot: a.plot,
                quick: a.quick,
                cs_ns: a.cs_ns,
                outside_ns: a.outside_ns,
                command: command.clone(),
            };
            let result = opts
                .plan()
                .and_then(|plans| bench::execute(&plans, &command));
            match result {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("klock bench: error: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}
