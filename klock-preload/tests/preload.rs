//! Compiles the C programs `tests/c/preload_test.c` and `fork_test.c`
//! with the C compiler (`$CC`, else `cc`) against nothing but glibc, and
//! runs them with a freshly built `libklock_preload.so` in `LD_PRELOAD`:
//! they check that every replaced symbol binds to the library and that
//! the locks behave (the second: forwarded objects and fork), and print
//! `ok`; and once more each with the lock profile on.

// The library is built for x86-64 glibc only (see src/lib.rs).
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::build_preload;

/// Compile the C test program `tests/c/<name>.c` into an executable
/// named after it and `tag` (tests running at once use different tags);
/// return its path.
fn compile(name: &str, tag: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("klock_{name}_{tag}"));
    common::compile_c(&format!("tests/c/{name}.c"), &out, &[]);
    out
}

/// Run `prog` (with `LD_PRELOAD=so` if given), killing it after `limit`.
fn run(prog: &Path, so: Option<&Path>, limit: Duration) -> (bool, String) {
    run_with(prog, so, &[], limit)
}

/// [`run`] with extra environment variables.
fn run_with(
    prog: &Path,
    so: Option<&Path>,
    env: &[(&str, &str)],
    limit: Duration,
) -> (bool, String) {
    run_args(prog, &[], so, env, &[], limit)
}

/// [`run_with`] with arguments for the program, and variables of this
/// process's environment that the program must not inherit.
fn run_args(
    prog: &Path,
    args: &[&str],
    so: Option<&Path>,
    env: &[(&str, &str)],
    unset: &[&str],
    limit: Duration,
) -> (bool, String) {
    let mut cmd = Command::new(prog);
    for v in unset {
        cmd.env_remove(v);
    }
    cmd.args(args).envs(env.iter().copied());
    if let Some(so) = so {
        cmd.env("LD_PRELOAD", so);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the C test");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("collect output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        out.status.success() && stdout.trim() == "ok",
        format!("{}\n{stdout}{stderr}", out.status),
    )
}

/// Build the library once, then run `tests/c/<name>.c` under it three
/// times: the exclusion, condition variable and fork checks are races
/// that a single lucky run could pass.
fn runs_clean(name: &str) {
    let so = build_preload();
    let prog = compile(name, "preloaded");
    for _ in 0..3 {
        let (ok, log) = run(&prog, Some(&so), Duration::from_secs(120));
        assert!(ok, "{name} under LD_PRELOAD failed (or hung): {log}");
    }
}

#[test]
fn c_program_runs_on_klock_locks() {
    runs_clean("preload_test");
}

#[test]
fn forwarded_objects_and_fork() {
    runs_clean("fork_test");
}

#[test]
fn fork_with_rwlock_waiters_and_reader_spinning_off() {
    // With reader spinning on, a reader of the child takes a free rwlock
    // past the wait list, so the child's read lock in `fork_rwlock_queued`
    // never meets the waiters the parent left there; with it off, the read
    // lock queues, and only a lock that forgot those waiters lets it in.
    let so = build_preload();
    // A binary of its own: the other test compiles "preloaded" meanwhile.
    let prog = compile("fork_test", "rspin_off");
    let (ok, log) = run_with(
        &prog,
        Some(&so),
        &[("KLOCK_RWSEM_RSPIN", "0")],
        Duration::from_secs(120),
    );
    assert!(
        ok,
        "fork_test with KLOCK_RWSEM_RSPIN=0 failed (or hung): {log}"
    );
}

#[test]
fn probe_fails_without_the_preload() {
    // The program refuses to run on glibc's own locks: its probe is real.
    let prog = compile("preload_test", "alone");
    let (ok, log) = run(&prog, None, Duration::from_secs(60));
    assert!(!ok, "the probe passed without LD_PRELOAD: {log}");
    assert!(log.contains("not loaded"), "{log}");
}

#[test]
fn c_programs_keep_posix_behaviour_with_the_profile_on() {
    // With the profile on every lock function takes the profile's path
    // (a trylock first, then the lock timed, and the counts): the same
    // checks must pass there, with every hold timed.
    let so = build_preload();
    for name in ["preload_test", "fork_test"] {
        let prog = compile(name, "profiled");
        let (ok, log) = run_with(
            &prog,
            Some(&so),
            &[("KLOCK_STAT", "1"), ("KLOCK_STAT_HOLDS", "1")],
            Duration::from_secs(120),
        );
        assert!(ok, "{name} with the profile on failed (or hung): {log}");
        assert!(log.contains("klock: lock profile of"), "{log}");
    }
}

#[test]
fn the_ebpf_oracle_is_loaded_only_when_asked_for() {
    // The preload's owner-running oracle is the time budget: a preloaded
    // program whose waiters spin loads no eBPF program (which would run at
    // every context switch of the machine), even as root. With
    // KLOCK_ONCPU=bpf, as root, it does. Only as root (as in CI) can the
    // first half fail: elsewhere no program could load anyway.
    let so = build_preload();
    let prog = compile("oracle_test", "oracle");
    let limit = Duration::from_secs(60);
    // The library's default, whatever KLOCK_ONCPU this test runs with.
    let (ok, log) = run_args(&prog, &["none"], Some(&so), &[], &["KLOCK_ONCPU"], limit);
    assert!(ok, "oracle_test none: {log}");
    if !rustix::process::geteuid().is_root() {
        assert!(
            std::env::var_os("KLOCK_REQUIRE_BPF").is_none(),
            "KLOCK_REQUIRE_BPF is set but the eBPF oracle needs root"
        );
        eprintln!("skipped the KLOCK_ONCPU=bpf half: the eBPF oracle needs root");
        return;
    }
    let (ok, log) = run_args(
        &prog,
        &["bpf"],
        Some(&so),
        &[("KLOCK_ONCPU", "bpf")],
        &[],
        limit,
    );
    assert!(ok, "oracle_test bpf with KLOCK_ONCPU=bpf: {log}");
}
