//! Compiles `tests/c/api_test.c` against `include/klock.h` with the C
//! compiler (`$CC`, else `cc`), links it to a freshly built `libklock.so`,
//! runs it and checks that it printed `ok`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Build `libklock.so` (cargo builds only the rlib for integration tests)
/// into the profile folder above this test executable's `deps/`, with
/// that folder's profile, and return the folder.
fn build_libklock() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf();
    // `cargo test` builds into debug/ with the test profile, `cargo test
    // --release` into release/; a custom profile has a folder of its name.
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "test",
        Some(name) => name,
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "-p", "klock-ffi", "--lib", "--profile", profile])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap_or_else(|e| panic!("cannot run `{cargo}`: {e}"));
    assert!(status.success(), "cargo build -p klock-ffi --lib failed");
    assert!(
        dir.join("libklock.so").is_file(),
        "no libklock.so in {}",
        dir.display()
    );
    dir
}

#[test]
fn c_program_runs_clean() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib_dir = build_libklock();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("klock_c_api_test");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&out)
        .arg(manifest.join("tests/c/api_test.c"))
        .arg("-I")
        .arg(manifest.join("include"))
        .arg("-L")
        .arg(&lib_dir)
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .args(["-lklock", "-lpthread"])
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(status.success(), "compiling tests/c/api_test.c failed");

    let run = Command::new(&out).output().expect("run the C test");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success() && stdout.trim() == "ok",
        "C test failed ({}):\n{stdout}{stderr}",
        run.status
    );
}
