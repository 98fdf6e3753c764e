//! `klock run`: run an unmodified program on klock's locks, through
//! `libklock_preload.so` in `LD_PRELOAD`.
//!
//! The command only finds the library and starts the program with it;
//! the library itself replaces the program's pthread lock calls (see
//! `docs/preload.md`).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The preload library's file name, as cargo builds it.
pub const PRELOAD_NAME: &str = "libklock_preload.so";

/// What `klock run` was asked to do.
#[derive(Debug, Default)]
pub struct Options {
    /// `--preload PATH`: the library to use instead of the one found.
    pub preload: Option<PathBuf>,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// Why the program did not run; each is said with the exit code
/// `klock run` returns for it.
#[derive(Debug)]
pub enum RunError {
    /// No preload library (exit 2).
    NoPreload(String),
    /// The program could not be started (exit 127, as a shell says).
    Spawn(String),
}

impl RunError {
    /// The exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::NoPreload(_) => 2,
            RunError::Spawn(_) => 127,
        }
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::NoPreload(m) | RunError::Spawn(m) => f.write_str(m),
        }
    }
}

/// The preload library: `explicit` (`--preload`), else `KLOCK_PRELOAD`,
/// else [`PRELOAD_NAME`] beside the running `klock` executable (where
/// `cargo build --release` puts both). It must be an ELF file: the
/// dynamic linker only warns about a preload it cannot load and then runs
/// the program on glibc's locks, which is what this check prevents.
pub fn find_preload(explicit: Option<&Path>) -> Result<PathBuf, RunError> {
    let (path, from) = match explicit {
        Some(p) => (p.to_path_buf(), "--preload"),
        None => match std::env::var_os("KLOCK_PRELOAD") {
            Some(p) if !p.is_empty() => (PathBuf::from(p), "KLOCK_PRELOAD"),
            _ => {
                let exe = std::env::current_exe().map_err(|e| {
                    RunError::NoPreload(format!("cannot find the klock executable: {e}"))
                })?;
                let beside = exe.with_file_name(PRELOAD_NAME);
                if !beside.exists() {
                    return Err(RunError::NoPreload(format!(
                        "{PRELOAD_NAME} not found beside {}: build it with \
                         `cargo build --release -p klock-preload`, or name it with \
                         --preload PATH or KLOCK_PRELOAD=PATH",
                        exe.display()
                    )));
                }
                (beside, "beside klock")
            }
        },
    };
    check_elf(&path).map_err(|why| {
        RunError::NoPreload(format!("preload {} ({from}): {why}", path.display()))
    })?;
    // The dynamic linker resolves a relative LD_PRELOAD entry against the
    // program's working directory, not ours.
    std::fs::canonicalize(&path)
        .map_err(|e| RunError::NoPreload(format!("preload {}: {e}", path.display())))
}

/// Whether `path` starts like an ELF file.
fn check_elf(path: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| e.to_string())?;
    if magic != *b"\x7fELF" {
        return Err("not an ELF shared object".into());
    }
    Ok(())
}

/// `LD_PRELOAD` with `lib` first, keeping what the environment preloads.
pub fn ld_preload_value(lib: &Path, existing: Option<&OsStr>) -> OsString {
    let mut v = OsString::from(lib.as_os_str());
    if let Some(old) = existing.filter(|o| !o.is_empty()) {
        v.push(":");
        v.push(old);
    }
    v
}

/// Run the program with the preload; return its exit code (128 + the
/// signal's number if a signal ended it, as a shell reports it).
pub fn run(opts: &Options) -> Result<u8, RunError> {
    let lib = find_preload(opts.preload.as_deref())?;
    let (program, args) = opts
        .command
        .split_first()
        .ok_or_else(|| RunError::Spawn("no program to run: klock run -- PROGRAM [ARGS]".into()))?;
    let preload = ld_preload_value(&lib, std::env::var_os("LD_PRELOAD").as_deref());
    let status = Command::new(program)
        .args(args)
        .env("LD_PRELOAD", preload)
        .status()
        .map_err(|e| {
            RunError::Spawn(format!("cannot run {}: {e}", Path::new(program).display()))
        })?;
    if let Some(code) = status.code() {
        // An exit status is 0..=255 on Linux.
        return Ok(code as u8);
    }
    use std::os::unix::process::ExitStatusExt;
    let sig = status.signal().unwrap_or(0);
    eprintln!(
        "klock run: {} ended by signal {sig}",
        Path::new(program).display()
    );
    Ok(128u8.wrapping_add(sig as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ld_preload_puts_klock_first_and_keeps_the_rest() {
        let lib = Path::new("/x/libklock_preload.so");
        assert_eq!(ld_preload_value(lib, None), "/x/libklock_preload.so");
        assert_eq!(
            ld_preload_value(lib, Some(OsStr::new(""))),
            "/x/libklock_preload.so"
        );
        assert_eq!(
            ld_preload_value(lib, Some(OsStr::new("/y/a.so"))),
            "/x/libklock_preload.so:/y/a.so"
        );
    }

    #[test]
    fn a_missing_or_non_elf_preload_is_an_error() {
        let e = find_preload(Some(Path::new("/no/such/libklock_preload.so"))).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("/no/such"), "{e}");
        let e = find_preload(Some(Path::new("Cargo.toml"))).unwrap_err();
        assert!(e.to_string().contains("not an ELF"), "{e}");
    }
}
