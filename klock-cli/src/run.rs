//! `klock run`: run an unmodified program on klock's locks, through
//! `libklock_preload.so` in `LD_PRELOAD`.
//!
//! The command finds the library and starts the program with it; the
//! library itself replaces the program's pthread lock calls and, with
//! `--stat` (`KLOCK_STAT=1`), prints the lock profile at exit, to stderr
//! or with `--stat-file FILE` (`KLOCK_STAT_FILE`) into a file (see
//! `docs/preload.md`). `--compare N` runs the program N times with
//! glibc's locks and N times with klock's, alternating, and prints both
//! side by side. `--lock-map SPEC` (`KLOCK_LOCK_MAP`) leaves some lock
//! families to glibc (for example `mutex=glibc`), to tell which replaced
//! family helps or hurts.

// The lock map's grammar, shared with the preload, which reads it.
#[path = "../../klock-preload/src/lock_map.rs"]
mod lock_map;

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
    /// `--stat`: the lock profile at exit (`KLOCK_STAT=1`).
    pub stat: bool,
    /// `--stat-file FILE`: the profile into FILE, not stderr
    /// (`KLOCK_STAT_FILE`; `%p` is the pid).
    pub stat_file: Option<PathBuf>,
    /// `--compare N`: N rounds of glibc against klock.
    pub compare: Option<usize>,
    /// `--lock-map SPEC`: the families left to glibc (`KLOCK_LOCK_MAP`).
    pub lock_map: Option<String>,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// Why the program did not run; each is said with the exit code
/// `klock run` returns for it.
#[derive(Debug)]
pub enum RunError {
    /// No preload library (exit 2).
    NoPreload(String),
    /// A lock map that does not parse (exit 2).
    BadMap(String),
    /// The program could not be started (exit 127, as a shell says).
    Spawn(String),
    /// The preload cannot take the program's locks: it is statically
    /// linked, or built for another machine (exit 2).
    NotPreloadable(String),
}

impl RunError {
    /// The exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::NoPreload(_) | RunError::BadMap(_) | RunError::NotPreloadable(_) => 2,
            RunError::Spawn(_) => 127,
        }
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::NoPreload(m)
            | RunError::BadMap(m)
            | RunError::Spawn(m)
            | RunError::NotPreloadable(m) => f.write_str(m),
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

/// Whether `path` is an ELF file ([`elf_info`] reads it), or why not.
fn check_elf(path: &Path) -> Result<(), String> {
    std::fs::File::open(path).map_err(|e| e.to_string())?;
    elf_info(path)
        .map(|_| ())
        .ok_or_else(|| "not an ELF shared object".into())
}

/// What the dynamic linker needs to know of an ELF file to preload into
/// it: its class (64-bit or not), its machine, and whether it names a
/// dynamic linker (`PT_INTERP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ElfInfo {
    class64: bool,
    machine: object::elf::Machine,
    interp: bool,
}

/// [`ElfInfo`] of `path`; `None` if it is not an ELF file (a script, whose
/// interpreter is what runs) or cannot be read.
fn elf_info(path: &Path) -> Option<ElfInfo> {
    use object::read::elf::{FileHeader, ProgramHeader};
    use object::{elf, Endianness, FileKind, ReadCache};
    let data = ReadCache::new(std::fs::File::open(path).ok()?);
    fn info<H: FileHeader<Endian = Endianness>>(
        data: &ReadCache<std::fs::File>,
        class64: bool,
    ) -> Option<ElfInfo> {
        let header = H::parse(data).ok()?;
        let endian = header.endian().ok()?;
        let interp = header
            .program_headers(endian, data)
            .ok()?
            .iter()
            .any(|ph| ph.p_type(endian) == elf::PT_INTERP);
        Some(ElfInfo {
            class64,
            machine: header.e_machine(endian),
            interp,
        })
    }
    match FileKind::parse(&data).ok()? {
        FileKind::Elf64 => info::<elf::FileHeader64<Endianness>>(&data, true),
        FileKind::Elf32 => info::<elf::FileHeader32<Endianness>>(&data, false),
        _ => None,
    }
}

/// The file `program` names: itself if it has a `/`, else the first
/// executable file of that name in `PATH` (as the spawn will look it up).
fn resolve_program(program: &OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let p = Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        return Some(p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                PathBuf::from(".").join(p)
            } else {
                dir.join(p)
            }
        })
        .find(|c| {
            c.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Refuse a program the preload cannot enter: the dynamic linker loads
/// `LD_PRELOAD` only into a dynamically linked program of the library's
/// own class and machine, and otherwise runs the program on its own locks
/// (silently for a static one, with a warning for another class), so that
/// `klock run` would report on glibc's locks as if they were klock's. A
/// script or a program that cannot be read or found passes: its
/// interpreter is what runs, and the spawn says what is missing.
fn check_program(program: &OsStr, lib: &Path) -> Result<(), RunError> {
    let Some(path) = resolve_program(program) else {
        return Ok(());
    };
    let (Some(prog), Some(lib_info)) = (elf_info(&path), elf_info(lib)) else {
        return Ok(());
    };
    let shown = program.to_string_lossy();
    let why = if prog.class64 != lib_info.class64 || prog.machine != lib_info.machine {
        format!(
            "{shown} is built for another machine or word size than the preload {} \
             (ELF machine {} {}-bit, against {} {}-bit): the dynamic linker cannot load \
             the library into it, and it would run on its own locks",
            lib.display(),
            prog.machine,
            if prog.class64 { 64 } else { 32 },
            lib_info.machine,
            if lib_info.class64 { 64 } else { 32 },
        )
    } else if let Some(how) = secure_exec(&path) {
        format!(
            "{shown} is {how}: the dynamic linker runs it in secure-execution mode, \
             which ignores LD_PRELOAD, and it would run on its own locks"
        )
    } else if !prog.interp {
        format!(
            "{shown} is statically linked: no dynamic linker runs for it, so \
             LD_PRELOAD cannot replace its locks, and it would run on its own"
        )
    } else {
        return Ok(());
    };
    Err(RunError::NotPreloadable(why))
}

/// Why the dynamic linker would run `path` in secure-execution mode, in
/// which it ignores an `LD_PRELOAD` path with a slash (ours): the program
/// is set-user-ID or set-group-ID to someone else, or (for a user other
/// than root, who gains nothing from them) carries file capabilities.
fn secure_exec(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let m = path.metadata().ok()?;
    let (uid, gid) = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    if m.mode() & 0o4000 != 0 && m.uid() != uid {
        return Some("set-user-ID");
    }
    if m.mode() & 0o2000 != 0 && m.gid() != gid {
        return Some("set-group-ID");
    }
    (uid != 0 && rustix::fs::getxattr_query(path, "security.capability").is_ok())
        .then_some("given file capabilities")
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

/// The program's command line, with the preload (and the profile) set
/// up, or glibc's own locks (`lib` is `None`).
fn command(opts: &Options, lib: Option<&Path>) -> Result<Command, RunError> {
    let (program, args) = opts
        .command
        .split_first()
        .ok_or_else(|| RunError::Spawn("no program to run: klock run -- PROGRAM [ARGS]".into()))?;
    let mut c = Command::new(program);
    c.args(args);
    if let Some(lib) = lib {
        let preload = ld_preload_value(lib, std::env::var_os("LD_PRELOAD").as_deref());
        c.env("LD_PRELOAD", preload);
        if opts.stat {
            // A new profile: the program is its first process (the
            // library passes that pid on in KLOCK_STAT_PID, and only the
            // first process says when it took no lock), even when this
            // command runs inside another profiled program.
            c.env("KLOCK_STAT", "1").env_remove("KLOCK_STAT_PID");
            if let Some(file) = &opts.stat_file {
                c.env("KLOCK_STAT_FILE", file);
            }
        }
        if let Some(map) = &opts.lock_map {
            c.env("KLOCK_LOCK_MAP", map);
        }
    }
    Ok(c)
}

fn spawn_error(opts: &Options, e: std::io::Error) -> RunError {
    let program = opts.command.first().map(PathBuf::from).unwrap_or_default();
    RunError::Spawn(format!("cannot run {}: {e}", program.display()))
}

/// An exit status as a shell reports it: the code, or 128 + the signal.
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match status.code() {
        // An exit status is 0..=255 on Linux.
        Some(code) => code as u8,
        None => 128u8.wrapping_add(status.signal().unwrap_or(0) as u8),
    }
}

/// Run the program with the preload; return its exit code (128 + the
/// signal's number if a signal ended it, as a shell reports it). With
/// `compare`, run [`compare`] instead.
pub fn run(opts: &Options) -> Result<u8, RunError> {
    if let Some(map) = &opts.lock_map {
        lock_map::parse(map).map_err(|e| RunError::BadMap(format!("--lock-map: {e}")))?;
    }
    let lib = find_preload(opts.preload.as_deref())?;
    if let Some(program) = opts.command.first() {
        check_program(program, &lib)?;
    }
    if let Some(rounds) = opts.compare {
        return compare(opts, &lib, rounds);
    }
    let mut child = command(opts, Some(&lib))?
        .spawn()
        .map_err(|e| spawn_error(opts, e))?;
    let status = {
        let _forward = ForwardSignals::install(child.id());
        child.wait().map_err(|e| spawn_error(opts, e))?
    };
    if status.code().is_none() {
        eprintln!(
            "klock run: {} ended by signal {}",
            opts.command[0].to_string_lossy(),
            exit_code(status).wrapping_sub(128)
        );
    }
    Ok(exit_code(status))
}

/// The child that [`ForwardSignals`] passes signals to (0: none).
static CHILD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// The last signal [`ForwardSignals`] caught, from the terminal or from
/// another process (0: none): `--compare` stops after the run it ended.
static CAUGHT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// While `klock run` waits for its program: `SIGINT`, `SIGTERM`, `SIGHUP`
/// and `SIGQUIT` sent to `klock run` by another process are passed on to
/// the program, and those the terminal sends (Ctrl-C, which reaches the
/// program too, in the same process group) are not acted on here. Either
/// way `klock run` stays to report the program's end, and the program's
/// lock profile (`--stat`), which it prints when such a signal ends it,
/// comes before the shell's prompt rather than after it. Set up after
/// the spawn (a signal ignored at the spawn would stay ignored in the
/// program); the actions before are restored when it is dropped.
struct ForwardSignals {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl ForwardSignals {
    const SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

    fn install(child: u32) -> Self {
        CHILD.store(child as i32, std::sync::atomic::Ordering::Relaxed);
        let old = Self::SIGNALS
            .iter()
            .map(|&sig| {
                // SAFETY: all-zero bytes are a valid `sigaction`; the call
                // sets this signal's action and returns the old one.
                unsafe {
                    let mut sa: libc::sigaction = core::mem::zeroed();
                    sa.sa_sigaction = forward_signal
                        as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                        as usize;
                    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                    libc::sigemptyset(&mut sa.sa_mask);
                    let mut old: libc::sigaction = core::mem::zeroed();
                    libc::sigaction(sig, &sa, &mut old);
                    (sig, old)
                }
            })
            .collect();
        Self { old }
    }
}

impl Drop for ForwardSignals {
    fn drop(&mut self) {
        CHILD.store(0, std::sync::atomic::Ordering::Relaxed);
        for (sig, old) in &self.old {
            // SAFETY: restores the action `install` replaced.
            unsafe { libc::sigaction(*sig, old, core::ptr::null_mut()) };
        }
    }
}

/// The handler of [`ForwardSignals`]: a signal another process sent
/// (`SI_USER`, `SI_QUEUE`) goes on to the program; one from the kernel
/// (the terminal's) has reached the program's process group already.
extern "C" fn forward_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let code = unsafe { (*info).si_code };
    CAUGHT.store(sig, std::sync::atomic::Ordering::Relaxed);
    let child = CHILD.load(std::sync::atomic::Ordering::Relaxed);
    if child > 0 && code <= 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(child, sig) };
    }
}

/// One run of the program, timed.
struct Timed {
    wall_s: f64,
    cpu_s: f64,
    code: u8,
    /// The last non-empty line the program printed on stdout.
    last_line: String,
}

/// CPU time (user + system) of this process's waited-for children, s.
fn children_cpu_s() -> f64 {
    // libc: rustix has no getrusage.
    // SAFETY: all-zero bytes are a valid rusage.
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: getrusage fills the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn timed(opts: &Options, lib: Option<&Path>) -> Result<Timed, RunError> {
    let mut c = command(opts, lib)?;
    c.stdout(std::process::Stdio::piped());
    let cpu0 = children_cpu_s();
    let t0 = std::time::Instant::now();
    let child = c.spawn().map_err(|e| spawn_error(opts, e))?;
    let out = {
        let _forward = ForwardSignals::install(child.id());
        child.wait_with_output().map_err(|e| spawn_error(opts, e))?
    };
    let wall_s = t0.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(Timed {
        wall_s,
        cpu_s: children_cpu_s() - cpu0,
        code: exit_code(out.status),
        last_line: stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string(),
    })
}

/// klock's wall time over glibc's round by round (each pair ran back to
/// back): the geometric mean with its 95% interval, and what it tells;
/// `None` under two rounds, or with a run that took no time.
fn paired_wall(glibc: &[f64], klock: &[f64]) -> Option<String> {
    if glibc.iter().chain(klock).any(|&t| t <= 0.0) {
        return None;
    }
    let logs: Vec<f64> = glibc.iter().zip(klock).map(|(g, k)| (k / g).ln()).collect();
    let (m, lo, hi) = crate::bench::stats::geomean_interval(&logs)?;
    let shown = |r: f64| (r * 100.0).round() / 100.0;
    let reads = if shown(hi) < 1.0 {
        "klock is faster"
    } else if shown(lo) > 1.0 {
        "klock is slower"
    } else {
        "the rounds cannot tell the two apart"
    };
    Some(format!(
        "round by round: klock takes {m:.2}x glibc's wall time (95% interval {lo:.2}x-{hi:.2}x over {} rounds): {reads}",
        logs.len()
    ))
}

/// `--compare N`: the program N times on glibc's locks and N times on
/// klock's, alternating (glibc first), so that both see the same drift of
/// a shared machine. Prints each run (wall and CPU time, exit status, the
/// program's last line of output, where a benchmark prints its result)
/// and the medians. Returns 0 if every run exited 0, else 1. A signal
/// that would end `klock run` (Ctrl-C, `kill`) reaches the running
/// program as in a single run; the comparison then stops after that run,
/// prints the medians of the rounds completed, and returns 128 + the
/// signal's number.
pub fn compare(opts: &Options, lib: &Path, rounds: usize) -> Result<u8, RunError> {
    if rounds == 0 {
        return Err(RunError::Spawn("--compare needs at least 1 round".into()));
    }
    let shown: Vec<String> = opts
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    println!(
        "klock run --compare {rounds}: `{}`, glibc's locks against klock's ({}), alternating",
        shown.join(" "),
        lib.display()
    );
    println!(
        "{:>5}  {:<5}  {:>9}  {:>9}  {:>4}  program's last line",
        "round", "locks", "wall s", "CPU s", "exit"
    );
    let (mut wall, mut cpu) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    let mut failed = false;
    let mut stopped = 0;
    'rounds: for round in 1..=rounds {
        for (i, (name, l)) in [("glibc", None), ("klock", Some(lib))]
            .into_iter()
            .enumerate()
        {
            let t = timed(opts, l)?;
            println!(
                "{round:>5}  {name:<5}  {:>9.3}  {:>9.3}  {:>4}  {}",
                t.wall_s, t.cpu_s, t.code, t.last_line
            );
            stopped = CAUGHT.swap(0, std::sync::atomic::Ordering::Relaxed);
            if stopped != 0 {
                // The round is not complete: its glibc run alone would
                // tilt the medians.
                wall[0].truncate(wall[1].len());
                cpu[0].truncate(cpu[1].len());
                eprintln!(
                    "klock run: stopped by signal {stopped} after {} complete rounds",
                    wall[1].len()
                );
                break 'rounds;
            }
            failed |= t.code != 0;
            wall[i].push(t.wall_s);
            cpu[i].push(t.cpu_s);
        }
    }
    if wall[1].is_empty() {
        return Ok(128u8.wrapping_add(stopped as u8));
    }
    let median = |v: &[f64]| crate::bench::stats::median(v).unwrap_or(0.0);
    let (wg, wk) = (median(&wall[0]), median(&wall[1]));
    let (cg, ck) = (median(&cpu[0]), median(&cpu[1]));
    println!(
        "median wall: glibc {wg:.3} s, klock {wk:.3} s (klock takes {:.2}x glibc's time); \
         median CPU: glibc {cg:.3} s, klock {ck:.3} s ({:.2}x)",
        wk / wg.max(1e-9),
        ck / cg.max(1e-9)
    );
    if let Some(line) = paired_wall(&wall[0], &wall[1]) {
        println!("{line}");
    }
    if stopped != 0 {
        return Ok(128u8.wrapping_add(stopped as u8));
    }
    if failed {
        eprintln!("klock run: error: a run exited with a non-zero status (see the exit column)");
        return Ok(1);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paired_wall_times_read_as_faster_slower_or_not_told_apart() {
        let g = [1.0, 2.0, 1.0, 2.0];
        let faster = paired_wall(&g, &[0.9, 1.8, 0.9, 1.8]).unwrap();
        assert!(faster.contains("0.90x glibc's wall time"), "{faster}");
        assert!(faster.ends_with("klock is faster"), "{faster}");
        let slower = paired_wall(&g, &[1.1, 2.2, 1.1, 2.2]).unwrap();
        assert!(slower.ends_with("klock is slower"), "{slower}");
        let tie = paired_wall(&g, &[0.8, 2.4, 0.8, 2.4]).unwrap();
        assert!(tie.ends_with("cannot tell the two apart"), "{tie}");
        assert!(tie.contains("over 4 rounds"), "{tie}");
        assert_eq!(paired_wall(&[1.0], &[1.0]), None);
        assert_eq!(paired_wall(&[1.0, 0.0], &[1.0, 1.0]), None);
    }

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

    /// A minimal little-endian ELF file: its header and, with `interp`, one
    /// `PT_INTERP` program header (`PT_LOAD` without). `class64` false
    /// makes the 32-bit layout.
    fn elf(class64: bool, machine: u16, interp: bool) -> Vec<u8> {
        let (ehsize, phentsize) = if class64 { (64u16, 56u16) } else { (52, 32) };
        let mut b = vec![0x7f, b'E', b'L', b'F', if class64 { 2 } else { 1 }, 1, 1];
        b.resize(16, 0);
        b.extend(2u16.to_le_bytes()); // e_type: ET_EXEC
        b.extend(machine.to_le_bytes());
        b.extend(1u32.to_le_bytes()); // e_version
        let word = |b: &mut Vec<u8>, v: u64| {
            if class64 {
                b.extend(v.to_le_bytes())
            } else {
                b.extend((v as u32).to_le_bytes())
            }
        };
        word(&mut b, 0); // e_entry
        word(&mut b, u64::from(ehsize)); // e_phoff: right after the header
        word(&mut b, 0); // e_shoff
        b.extend(0u32.to_le_bytes()); // e_flags
        for v in [ehsize, phentsize, 1, 0, 0, 0] {
            // e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx
            b.extend(v.to_le_bytes());
        }
        assert_eq!(b.len(), usize::from(ehsize));
        let p_type: u32 = if interp { 3 } else { 1 };
        b.extend(p_type.to_le_bytes());
        if class64 {
            b.extend(0u32.to_le_bytes()); // p_flags
        }
        b.resize(usize::from(ehsize + phentsize), 0);
        b
    }

    #[test]
    fn a_program_the_preload_cannot_enter_is_refused() {
        let dir = std::env::temp_dir().join(format!("klock-run-elf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, bytes: Vec<u8>| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        const X86_64: u16 = 62;
        const I386: u16 = 3;
        let lib = write("lib.so", elf(true, X86_64, false));
        let check = |name: &str, bytes: Vec<u8>| {
            let p = write(name, bytes);
            check_program(p.as_os_str(), &lib)
        };
        // Dynamically linked, for the library's machine: runs.
        check("dynamic", elf(true, X86_64, true)).unwrap();
        // A script or an unreadable path: left to the spawn.
        check("script", b"#!/bin/sh\nexit 0\n".to_vec()).unwrap();
        check_program(OsStr::new("/no/such/program"), &lib).unwrap();
        // Statically linked: refused, and said why.
        let e = check("static", elf(true, X86_64, false)).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("static is statically linked"), "{e}");
        // 32-bit, or another machine: refused.
        let e = check("i386", elf(false, I386, true)).unwrap_err();
        assert!(e.to_string().contains("32-bit"), "{e}");
        assert!(e.to_string().contains("another machine"), "{e}");
        let e = check("aarch64", elf(true, 183, true)).unwrap_err();
        assert!(e.to_string().contains("another machine"), "{e}");
        // Set-user-ID to another user: the dynamic linker would ignore the
        // preload. Only root can make such a file for another user.
        if rustix::process::getuid().is_root() {
            use std::os::unix::fs::PermissionsExt;
            let p = write("setuid", elf(true, X86_64, true));
            rustix::fs::chown(&p, Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4755)).unwrap();
            let e = check_program(p.as_os_str(), &lib).unwrap_err();
            assert!(e.to_string().contains("set-user-ID"), "{e}");
            // Set-user-ID to ourselves: no secure execution.
            rustix::fs::chown(&p, Some(rustix::process::getuid()), None).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4755)).unwrap();
            check_program(p.as_os_str(), &lib).unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
