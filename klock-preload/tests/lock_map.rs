//! The lock map (`KLOCK_LOCK_MAP`): `tests/c/lock_map_test.c` reports, from
//! the preload's forwarded-call counter, which families run on klock and
//! which on glibc, and checks a condition wait with whichever mutex runs;
//! a map that does not parse stops the program before `main` with a
//! message and status 2.

// The library is built for x86-64 glibc only (see src/lib.rs).
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

/// The compiled program, compiled once (the tests run at once: a second
/// compile would rewrite the file while the first test runs it).
fn compile() -> PathBuf {
    static PROG: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PROG.get_or_init(compile_now).clone()
}

fn compile_now() -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("klock_lock_map_test");
    common::compile_c("tests/c/lock_map_test.c", &out, &[]);
    out
}

fn run(prog: &Path, so: &Path, map: Option<&str>) -> Output {
    let mut c = std::process::Command::new(prog);
    c.env("LD_PRELOAD", so).env_remove("KLOCK_STAT");
    match map {
        Some(m) => c.env("KLOCK_LOCK_MAP", m),
        None => c.env_remove("KLOCK_LOCK_MAP"),
    };
    c.output().expect("run the lock map test")
}

#[test]
fn each_family_runs_where_the_map_says() {
    let so = common::build_preload();
    let prog = compile();
    for (map, want) in [
        (None, "mutex=klock rwlock=klock spin=klock cond=klock"),
        (Some(""), "mutex=klock rwlock=klock spin=klock cond=klock"),
        (
            Some("mutex=glibc"),
            "mutex=glibc rwlock=klock spin=klock cond=klock",
        ),
        (
            Some("rwlock=glibc, spin=glibc"),
            "mutex=klock rwlock=glibc spin=glibc cond=klock",
        ),
        (
            Some("mutex=glibc,cond=glibc"),
            "mutex=glibc rwlock=klock spin=klock cond=glibc",
        ),
        (
            Some("all=glibc,spin=klock"),
            "mutex=glibc rwlock=glibc spin=klock cond=glibc",
        ),
    ] {
        let o = run(&prog, &so, map);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{map:?}: {}\n{out}{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(out.trim(), want, "{map:?}");
    }
}

#[test]
fn a_bad_map_stops_the_program_with_a_message() {
    let so = common::build_preload();
    let prog = compile();
    for (map, says) in [
        ("cond=glibc", "cond=glibc needs mutex=glibc"),
        ("mutex=musl", "unknown implementation `musl`"),
        ("mutexes=glibc", "unknown lock family `mutexes`"),
    ] {
        let o = run(&prog, &so, Some(map));
        assert_eq!(o.status.code(), Some(2), "{map}");
        assert!(o.stdout.is_empty(), "{map}: main ran");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.starts_with("klock: KLOCK_LOCK_MAP: "), "{e}");
        assert!(e.contains(says), "{map}: {e}");
    }
}
