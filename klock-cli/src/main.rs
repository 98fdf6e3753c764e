//! `klock`: the kernel's lock experiments, torture and lockstat for userspace.

use clap::{Args, Parser, Subcommand};
use klock_cli::{bench, run, torture};
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
    /// Torture one lock (the kernel's locktorture): exits 0 on SUCCESS, 1 on FAILURE.
    Torture(TortureArgs),
    /// Run a bench workload with lockstat tracking on; print /proc/lock_stat and lockmeter tables.
    Stat(StatArgs),
    /// Run a program on klock's locks: libklock_preload.so replaces its pthread mutexes,
    /// rwlocks, spinlocks and condition variables (exits with the program's status).
    Run(RunArgs),
    /// Print the "klock vs best peer" verdict of saved `klock bench` JSON result files,
    /// computed again from their runs by this build's rules.
    Verdict(VerdictArgs),
}

#[derive(Args)]
struct VerdictArgs {
    /// Result files written by `klock bench` (--json).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Judge this lock (an id of `klock bench --list`, a peer too) as klock's default lock is
    /// judged: against the fastest of the other peers.
    #[arg(long, value_name = "ID")]
    lock: Option<String>,
    /// Pool the rounds of all FILEs (one suite, e.g. several runs of the same command) into one
    /// ratio per cell with its 95% interval, against the strongest peer.
    #[arg(long)]
    pool: bool,
    /// With --pool: against this peer alone instead of the strongest; or against a
    /// variant of klock's lock that ran beside it (e.g. `qspinlock-32` beside `qspinlock`).
    #[arg(long, value_name = "ID", requires = "pool")]
    peer: Option<String>,
    /// With --pool: also write the pooled cells to this JSON file.
    #[arg(long, value_name = "PATH", requires = "pool")]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct RunArgs {
    /// The preload library (default: KLOCK_PRELOAD, else libklock_preload.so beside klock).
    #[arg(long, value_name = "PATH")]
    preload: Option<PathBuf>,
    /// Print the lock profile when the program exits (KLOCK_STAT=1): per lock, sorted by total
    /// wait; one exclusive hold in 8 is timed (KLOCK_STAT_HOLDS=N: one in N, 1 for all).
    #[arg(long)]
    stat: bool,
    /// Write the lock profile to FILE instead of stderr (implies --stat; KLOCK_STAT_FILE): each
    /// process appends its own, and `%p` in FILE is its pid (one file per process).
    #[arg(long, value_name = "FILE")]
    stat_file: Option<std::path::PathBuf>,
    /// Run the program N times with glibc's locks and N times with klock's, alternating, and
    /// print their wall and CPU times side by side.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1000))]
    compare: Option<u64>,
    /// Leave some lock families to glibc (KLOCK_LOCK_MAP): comma-separated FAMILY=IMPL, FAMILY
    /// one of mutex, rwlock, spin, cond, all; IMPL klock or glibc (cond=glibc needs mutex=glibc).
    #[arg(long, value_name = "SPEC")]
    lock_map: Option<String>,
    /// The program and its arguments, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    command: Vec<std::ffi::OsString>,
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
    /// List suites and locks, then exit; with suite names, only those
    /// suites and their default locks.
    #[arg(long)]
    list: bool,
}

#[derive(Args)]
struct TortureArgs {
    /// Lock to torture (see --list); lock_busted must FAIL.
    #[arg(long = "type", value_name = "TYPE", required_unless_present_any = ["list", "list_klock"])]
    ty: Option<String>,
    /// Writer threads (default: 2 × CPUs).
    #[arg(long)]
    nwriters: Option<usize>,
    /// Reader threads, reader-writer types only (default: 1 × CPUs; 0 for exclusive types).
    #[arg(long)]
    nreaders: Option<usize>,
    /// How long to run, e.g. 10s, 2m (default 10s).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Print the Writes/Reads lines this often (default 1s).
    #[arg(long, value_parser = humantime::parse_duration)]
    stat_interval: Option<Duration>,
    /// Occasional long critical section, about once a second (default 50ms; 0 = off).
    #[arg(long, value_parser = humantime::parse_duration)]
    long_hold: Option<Duration>,
    /// Run this long, then pause every thread a quarter of it (default 1s; 0 = off).
    #[arg(long, value_parser = humantime::parse_duration)]
    stutter: Option<Duration>,
    /// Fail if no thread acquires, or one thread waits, this long (default 5s).
    #[arg(long, value_parser = humantime::parse_duration)]
    watchdog: Option<Duration>,
    /// List lock types, then exit.
    #[arg(long)]
    list: bool,
    /// List klock's own lock types, one per line (for scripts), then exit.
    #[arg(long, hide = true)]
    list_klock: bool,
}

fn torture_main(a: TortureArgs) -> ExitCode {
    if a.list {
        print!("{}", torture::list());
        return ExitCode::SUCCESS;
    }
    if a.list_klock {
        print!("{}", torture::list_klock());
        return ExitCode::SUCCESS;
    }
    let opts = torture::Options {
        ty: a.ty.unwrap_or_default(),
        nwriters: a.nwriters,
        nreaders: a.nreaders,
        duration: a.duration,
        stat_interval: a.stat_interval,
        long_hold: a.long_hold,
        stutter: a.stutter,
        watchdog: a.watchdog,
    };
    let (ty, cfg) = match opts.plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("klock torture: error: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = (ty.run)(&cfg);
    let code = i32::from(!outcome.success);
    if outcome.stalled {
        // Threads may be stuck in the lock for good: end the process now
        // rather than wait for them.
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(code);
    }
    ExitCode::from(code as u8)
}

fn run_main(a: RunArgs) -> ExitCode {
    let opts = run::Options {
        preload: a.preload,
        stat: a.stat || a.stat_file.is_some(),
        stat_file: a.stat_file,
        compare: a.compare.map(|n| n as usize),
        lock_map: a.lock_map,
        command: a.command,
    };
    match run::run(&opts) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("klock run: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // klock's plain lock ids run under the budget oracle unless
    // KLOCK_ONCPU chooses (the `-bpf` ids attach the eBPF program for
    // their own runs only), so that a run compares like with like.
    // `klock run` starts another program and needs no oracle here.
    if !matches!(cli.cmd, Cmd::Run(_) | Cmd::Verdict(_)) {
        if std::env::var_os("KLOCK_ONCPU").is_none() {
            let _ = klock::oncpu::use_oracle(klock::oncpu::OracleKind::Budget);
        } else {
            // The eBPF oracle loads in the background: have it in place
            // before the first lock.
            klock::oncpu::wait_for_oracle(std::time::Duration::from_secs(2));
        }
    }
    match cli.cmd {
        Cmd::Run(a) => run_main(a),
        Cmd::Verdict(a) if a.pool => {
            match bench::verdict::reread_pooled(
                &a.files,
                a.lock.as_deref(),
                a.peer.as_deref(),
                a.json.as_deref(),
            ) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("klock verdict: error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Cmd::Verdict(a) => {
            let mut status = ExitCode::SUCCESS;
            for f in &a.files {
                match bench::verdict::reread(f, a.lock.as_deref()) {
                    Ok(text) => print!("{text}"),
                    Err(e) => {
                        eprintln!("klock verdict: error: {e}");
                        status = ExitCode::from(2);
                    }
                }
            }
            status
        }
        Cmd::Torture(a) => torture_main(a),
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
                return match bench::list_for(&a.suites) {
                    Ok(s) => {
                        print!("{s}");
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("klock bench: error: {e}");
                        ExitCode::from(2)
                    }
                };
            }
            // Exactly as the user ran it (lossy only for arguments that
            // are not UTF-8).
            let argv: Vec<String> = std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
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
                argv: argv.clone(),
            };
            let provenance = bench::report::Provenance::new(&argv);
            let result = opts
                .plan()
                .and_then(|plans| bench::execute(&plans, &provenance));
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
