//! Helpers of the preload's integration tests (and of `klock run`'s,
//! which include this file): build the library, compile a C test program.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Build `libklock_preload.so` (cargo builds no cdylib for integration
/// tests) into the profile folder above this test executable's `deps/`,
/// with that folder's profile; return the library's path. Cargo runs once
/// per test executable; the tests after the first get the path at once
/// instead of each waiting for cargo's build lock to find nothing to do.
pub fn build_preload() -> PathBuf {
    static SO: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SO.get_or_init(build_preload_now).clone()
}

fn build_preload_now() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf();
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "test",
        Some(name) => name,
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args([
            "build",
            "-p",
            "klock-preload",
            "--lib",
            "--profile",
            profile,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap_or_else(|e| panic!("cannot run `{cargo}`: {e}"));
    assert!(
        status.success(),
        "cargo build -p klock-preload --lib failed"
    );
    let so = dir.join("libklock_preload.so");
    assert!(so.is_file(), "no {}", so.display());
    so
}

/// Compile the C program `src` (relative to the including crate) into
/// `out` with the C compiler (`$CC`, else `cc`), adding `extra` flags.
#[allow(dead_code)] // not every including test compiles C
pub fn compile_c(src: &str, out: &Path, extra: &[&str]) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1"])
        .args(extra)
        .arg("-o")
        .arg(out)
        .arg(manifest.join(src))
        .args(["-lpthread", "-ldl"])
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(status.success(), "compiling {src} failed");
}

/// Whether the server `command` is installed (`command -V` succeeds);
/// if not, says the test is skipped, and fails it instead when the
/// environment variable `require` is set (CI sets it where it installed
/// the server).
#[allow(dead_code)] // not every including test runs a server
pub fn server_installed(command: &str, require: &str) -> bool {
    let found = std::process::Command::new(command)
        .arg("-V")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os(require).is_none(),
            "{require} is set but {command} is not installed"
        );
        eprintln!("{command} is not installed: test skipped");
    }
    found
}

/// Stop a server started with its stderr piped: send `signal` (the
/// server's own way out, through `exit`, which prints the lock profile),
/// wait up to 10 s (then kill it and fail), and return its exit status
/// and everything it wrote to stderr. The pipe is drained while the
/// server exits: a profile longer than the pipe's buffer would
/// otherwise block the server in its last write.
#[allow(dead_code)] // not every including test runs a server
pub fn stop_server(
    mut server: std::process::Child,
    signal: rustix::process::Signal,
    name: &str,
) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    use std::time::{Duration, Instant};
    let mut stderr = server.stderr.take().expect("stderr piped");
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        stderr
            .read_to_string(&mut err)
            .expect("the server's stderr");
        err
    });
    let pid = rustix::process::Pid::from_raw(server.id() as i32).expect("a child's pid");
    let _ = rustix::process::kill_process(pid, signal);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = server.try_wait().expect("wait for the server") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = server.kill();
            panic!("{name} did not exit within 10 s of {signal:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = reader.join().expect("the stderr reader");
    (status, err)
}
