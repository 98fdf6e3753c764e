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
fn no_program_is_a_usage_error() {
    let o = klock_run(&[], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("PROGRAM"), "{}", stderr(&o));
}
