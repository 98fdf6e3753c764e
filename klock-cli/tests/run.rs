//! `klock run` as a user runs it: bad input says what is wrong, with the
//! exit code a shell would give.

use std::process::{Command, Output};

fn klock_run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_klock"));
    c.arg("run").args(args).env_remove("KLOCK_PRELOAD");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run klock")
}

/// `klock run ARGS`, sent SIGTERM by this process after `after`.
fn klock_run_terminated(args: &[&str], after: std::time::Duration) -> Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_klock"));
    c.arg("run")
        .args(args)
        .env_remove("KLOCK_STAT_PID")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().expect("start klock run");
    std::thread::sleep(after);
    // SAFETY: a plain kill of the process we started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    child.wait_with_output().expect("wait for klock run")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_missing_preload_is_a_clear_error() {
    let o = klock_run(
        &["--preload", "/no/such/libklock_preload.so", "--", "true"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.starts_with("klock run: error: "), "{e}");
    assert!(e.contains("/no/such/libklock_preload.so"), "{e}");
    assert!(!e.contains("panicked"), "{e}");

    let o = klock_run(&["--", "true"], &[("KLOCK_PRELOAD", "/no/such/x.so")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("KLOCK_PRELOAD"), "{}", stderr(&o));
}

#[test]
fn a_preload_that_is_not_a_shared_object_is_refused() {
    // The dynamic linker would only warn and run the program on glibc.
    let toml = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let o = klock_run(&["--preload", toml, "--", "true"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not an ELF shared object"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_bad_lock_map_is_a_clear_error() {
    // Checked before the library is looked for or the program started.
    for (map, says) in [
        ("cond=glibc", "cond=glibc needs mutex=glibc"),
        ("mutex=nope", "unknown implementation `nope`"),
        ("futex=glibc", "unknown lock family `futex`"),
        ("mutex", "is not FAMILY=IMPL"),
    ] {
        let o = klock_run(&["--lock-map", map, "--", "true"], &[]);
        assert_eq!(o.status.code(), Some(2), "{map}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.starts_with("klock run: error: --lock-map: "), "{e}");
        assert!(e.contains(says), "{map}: {e}");
    }
}

#[test]
fn no_program_is_a_usage_error() {
    let o = klock_run(&[], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("PROGRAM"), "{}", stderr(&o));
}

// The preload library and a C program, built as the preload's own tests
// build them.
#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
#[path = "../../klock-preload/tests/common/mod.rs"]
mod common;

/// `klock run --stat` starts an unmodified C program on klock's locks
/// (the program's own probe checks the binding) and prints the profile;
/// `--compare` runs it both ways and exits 0.
#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
#[test]
fn runs_a_c_program_on_klock_with_the_profile_and_compares() {
    let so = common::build_preload();
    let so = so.to_str().expect("utf-8 path");
    let prog = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("klock_run_profile_test");
    common::compile_c(
        "../klock-preload/tests/c/profile_test.c",
        &prog,
        &["-rdynamic"],
    );
    let prog = prog.to_str().expect("utf-8 path");

    let o = klock_run(&["--preload", so, "--stat", "--", prog, "2000"], &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ok");
    assert!(err.contains("klock: lock profile of"), "{err}");
    assert!(err.contains("hot_worker_lock+"), "{err}");

    // `--stat-file`: the profile into the file (`%p` the pid), not stderr.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("klock_run_stat_file");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the profile");
    let file = dir.join("profile.%p");
    let o = klock_run(
        &[
            "--preload",
            so,
            "--stat-file",
            file.to_str().unwrap(),
            "--",
            prog,
            "2000",
        ],
        &[],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("klock: lock profile of"), "{err}");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the profile's directory")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).expect("the profile");
    assert!(text.contains("klock: lock profile of"), "{text}");
    assert!(text.contains("hot_worker_lock+"), "{text}");

    // `--stat` starts a new profile even inside a profiled process (here,
    // one whose pid the environment already names): a program that takes
    // no lock says so.
    let o = klock_run(
        &["--preload", so, "--stat", "--", prog, "0", "none"],
        &[("KLOCK_STAT_PID", "1")],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("): no lock used"), "{err}");

    // SIGTERM sent to `klock run` goes on to the program, which prints
    // its profile as the signal ends it; `klock run` says so and exits as
    // a shell would report it (128 + 15). (The program would run for
    // many seconds: were the signal not passed on, the test would wait
    // for it, with `klock run` gone, and fail.)
    let o = klock_run_terminated(
        &["--preload", so, "--stat", "--", prog, "100000000"],
        std::time::Duration::from_millis(500),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(143), "{err}");
    assert!(err.contains(", ended by SIGTERM): 4 locks used"), "{err}");
    assert!(err.contains("hot_worker_lock+"), "{err}");
    assert!(err.contains("ended by signal 15"), "{err}");

    // The library found through KLOCK_PRELOAD; the exit status passed on.
    let o = klock_run(&["--", "sh", "-c", "exit 7"], &[("KLOCK_PRELOAD", so)]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));

    let o = klock_run(&["--preload", so, "--compare", "2", "--", prog, "500"], &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert_eq!(
        out.lines().filter(|l| l.ends_with("  ok")).count(),
        4,
        "{out}"
    );
    assert!(out.contains("median wall: glibc"), "{out}");
    assert!(
        out.contains("round by round: klock takes") && out.contains("over 2 rounds"),
        "{out}"
    );

    // A run that fails is reported, and --compare exits 1.
    let o = klock_run(&["--preload", so, "--compare", "1", "--", "false"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("non-zero status"), "{}", stderr(&o));

    // SIGTERM sent to `klock run --compare` reaches the running program
    // and stops the comparison after that run (not after 50 rounds of
    // 0.3 s), which exits as the signal would have ended it.
    let start = std::time::Instant::now();
    let o = klock_run_terminated(
        &["--preload", so, "--compare", "50", "--", "sleep", "0.3"],
        std::time::Duration::from_millis(1000),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(143), "{err}");
    assert!(
        err.contains("klock run: stopped by signal 15 after"),
        "{err}"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(10),
        "the comparison went on after the signal: {err}"
    );
}
