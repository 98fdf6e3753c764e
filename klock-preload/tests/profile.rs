//! The lock profile (`KLOCK_STAT=1`): `tests/c/profile_test.c` has one
//! hot mutex among four locks; the profile printed at exit must rank it
//! first, count its acquisitions exactly and name the function that locks
//! it. Without `KLOCK_STAT` nothing is printed.

// The library is built for x86-64 glibc only (see src/lib.rs).
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

/// Threads and iterations of the C program (its `THREADS`, and argv[1]).
const THREADS: u64 = 8;
const ITERATIONS: u64 = 5000;

/// The compiled program, compiled once (tests run at once: a second
/// compile would rewrite the file while the first test runs it).
fn compile() -> PathBuf {
    static PROG: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PROG.get_or_init(compile_now).clone()
}

fn compile_now() -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("klock_profile_test");
    // -rdynamic: the program exports its functions, so that dladdr names
    // the locking function in the profile.
    common::compile_c("tests/c/profile_test.c", &out, &["-rdynamic"]);
    out
}

fn run(prog: &Path, so: &Path, stat: bool) -> Output {
    let env: &[(&str, &str)] = if stat { &[("KLOCK_STAT", "1")] } else { &[] };
    run_env(prog, so, ITERATIONS, env)
}

/// The program under the library with `iterations` and only the profile
/// settings in `env` (those of the caller's environment removed).
fn run_env(prog: &Path, so: &Path, iterations: u64, env: &[(&str, &str)]) -> Output {
    run_mode(prog, so, iterations, "", env)
}

/// [`run_env`] with the program's MODE argument (none, fork, spawn).
fn run_mode(prog: &Path, so: &Path, iterations: u64, mode: &str, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(prog);
    c.arg(iterations.to_string())
        .arg(mode)
        .env("LD_PRELOAD", so);
    for var in [
        "KLOCK_STAT",
        "KLOCK_STAT_HOLDS",
        "KLOCK_STAT_TOP",
        "KLOCK_STAT_PID",
        "KLOCK_STAT_FILE",
        "KLOCK_STAT_DEBUG_DIR",
    ] {
        c.env_remove(var);
    }
    c.envs(env.iter().copied());
    c.output().expect("run the profile test")
}

#[test]
fn profile_names_the_hot_lock_first() {
    let so = common::build_preload();
    let prog = compile();
    let o = run(&prog, &so, true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}\n{err}", o.status);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ok");
    assert!(err.contains("klock: lock profile of"), "{err}");
    assert!(err.contains("4 locks used"), "{err}");
    let rows: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("Lock "))
        .skip(1)
        .collect();
    let first: Vec<&str> = rows
        .first()
        .expect("a profile row")
        .split_whitespace()
        .collect();
    // Lock Type Locked Changed Cont. tot.Wait avgW maxW avgH maxH Site...
    assert_eq!(first[1], "mutex", "{err}");
    assert_eq!(first[2], (THREADS * ITERATIONS).to_string(), "{err}");
    assert!(first[10].starts_with("hot_worker_lock+"), "{err}");
    // The rwlock and the spinlock are taken once every 16 iterations.
    let per_16 = (THREADS * ITERATIONS.div_ceil(16)).to_string();
    for kind in ["rwlock", "spin"] {
        let row: Vec<&str> = rows
            .iter()
            .map(|r| r.split_whitespace().collect::<Vec<_>>())
            .find(|r| r.get(1) == Some(&kind))
            .unwrap_or_else(|| panic!("no {kind} row: {err}"));
        assert_eq!(row[2], per_16, "{kind}: {err}");
    }
    // The kernel's lock_stat layout follows, the same locks in the same
    // order: the hot mutex's line has its acquisitions and contentions.
    assert!(err.contains("lock_stat version 0.4"), "{err}");
    let ks: Vec<&str> = err
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with("mutex 1:"))
        .unwrap_or_else(|| panic!("no lock_stat line for the hot mutex: {err}"))
        .split_whitespace()
        .collect();
    // class name (2 words), con-bounces, contentions, waittime-min/max/
    // total/avg, acq-bounces, acquisitions, holdtime-...
    assert_eq!(ks[3], first[4], "contentions: {err}");
    assert_eq!(ks[8], first[3], "acq-bounces are the owner changes: {err}");
    assert_eq!(ks[9], first[2], "acquisitions: {err}");
    // klock's event counters end it: the hot mutex's waiters spun or
    // slept (its holder sleeps with it held), and the mutexes count both.
    let events = err
        .lines()
        .find(|l| l.starts_with("klock: lock events (klock::events, all locks): mutex "))
        .unwrap_or_else(|| panic!("no mutex events: {err}"));
    assert!(
        events.contains(" sleep=") || events.contains(" spin_success="),
        "{events}"
    );
}

#[test]
fn no_profile_unless_asked() {
    let so = common::build_preload();
    let prog = compile();
    let o = run(&prog, &so, false);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("lock profile"), "{err}");
}

/// The header's count of timed holds: "... timed (N)".
fn timed_holds(err: &str) -> u64 {
    let header = err
        .lines()
        .find(|l| l.starts_with("klock: lock profile of"))
        .unwrap_or_else(|| panic!("no profile header: {err}"));
    let open = header.rfind('(').expect("a count in the header");
    header[open + 1..header.len() - 1]
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {header}"))
}

/// Exclusive acquisitions of the C program, lock by lock: the hot mutex
/// every iteration, the spinlock every 16th, the cold mutex once per
/// thread.
const EXCLUSIVE_BY_LOCK: [u64; 3] = [
    THREADS * ITERATIONS,
    THREADS * ITERATIONS.div_ceil(16),
    THREADS,
];
const EXCLUSIVE: u64 = EXCLUSIVE_BY_LOCK[0] + EXCLUSIVE_BY_LOCK[1] + EXCLUSIVE_BY_LOCK[2];

#[test]
fn one_hold_in_eight_is_timed_unless_asked() {
    let so = common::build_preload();
    let prog = compile();
    let o = run(&prog, &so, true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}\n{err}", o.status);
    assert!(
        err.contains("1 hold in 8 timed after each lock's first 8 ("),
        "{err}"
    );
    // Each lock's first 8 holds are timed, then one in 8 of the rest,
    // chosen by the lock's acquisition count and spread evenly: an eighth
    // of them, within a few.
    let timed = timed_holds(&err);
    let want: u64 = EXCLUSIVE_BY_LOCK
        .iter()
        .map(|&n| n.min(8) + n.saturating_sub(8) / 8)
        .sum();
    assert!(
        timed.abs_diff(want) <= 8,
        "{timed} of {EXCLUSIVE}, want about {want}: {err}"
    );

    let o = run_env(
        &prog,
        &so,
        ITERATIONS,
        &[("KLOCK_STAT", "1"), ("KLOCK_STAT_HOLDS", "1")],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}\n{err}", o.status);
    assert!(err.contains("every hold timed"), "{err}");
    assert_eq!(timed_holds(&err), EXCLUSIVE, "{err}");
}

#[test]
fn a_bad_profile_setting_is_an_error() {
    let so = common::build_preload();
    let prog = compile();
    for (var, value, says) in [
        ("KLOCK_STAT_HOLDS", "3", "power of two"),
        ("KLOCK_STAT_HOLDS", "2048", "power of two"),
        ("KLOCK_STAT_HOLDS", "x", "power of two"),
        ("KLOCK_STAT_TOP", "0", "number of rows"),
        (
            "KLOCK_STAT_FILE",
            "/no/such/dir/p",
            "cannot write a file in /no/such/dir",
        ),
        ("KLOCK_STAT_FILE", "/tmp/", "not a directory's"),
    ] {
        let o = run_env(&prog, &so, 10, &[("KLOCK_STAT", "1"), (var, value)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{var}={value}: {err}");
        assert!(err.contains(&format!("klock: {var}={value}: ")), "{err}");
        assert!(err.contains(says), "{err}");
        // The program did not run.
        assert!(o.stdout.is_empty(), "{var}={value}");
    }
}

/// The profiles in `err`: for each, its header line and its rows (the
/// lines between the column titles and the next blank line).
fn profiles(err: &str) -> Vec<Profile> {
    let mut out = Vec::new();
    let mut lines = err.lines().peekable();
    while let Some(l) = lines.next() {
        if !l.starts_with("klock: lock profile of") {
            continue;
        }
        let mut rows = Vec::new();
        if lines.peek().is_some_and(|t| t.starts_with("Lock ")) {
            lines.next();
            while let Some(r) = lines.next_if(|r| !r.trim().is_empty()) {
                rows.push(r.split_whitespace().map(String::from).collect());
            }
        }
        out.push((l.to_string(), rows));
    }
    out
}

/// The program in `mode` with the profile on: it must succeed (and say
/// `ok` unless it ran no iteration); its stderr and the profiles in it.
fn profiled_ok(prog: &Path, so: &Path, iterations: u64, mode: &str) -> (String, Vec<Profile>) {
    profiled_ok_with(prog, so, iterations, mode, &[])
}

/// [`profiled_ok`] with `env` set as well.
fn profiled_ok_with(
    prog: &Path,
    so: &Path,
    iterations: u64,
    mode: &str,
    env: &[(&str, &str)],
) -> (String, Vec<Profile>) {
    let env: Vec<(&str, &str)> = [("KLOCK_STAT", "1")].iter().chain(env).copied().collect();
    let o = run_mode(prog, so, iterations, mode, &env);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{}\n{err}", o.status);
    if iterations > 0 {
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ok", "{err}");
    }
    let ps = profiles(&err);
    (err, ps)
}

/// A profile: its header line and its rows, each split into words.
type Profile = (String, Vec<Vec<String>>);

/// The hot mutex's `Locked` in a profile: its row is found by its site,
/// not its rank (a rare long wait on another lock, a preempted holder,
/// can rank that one first).
fn hot_locked(p: &Profile) -> Option<&str> {
    p.1.iter()
        .find(|r| r.get(10).is_some_and(|s| s.starts_with("hot_worker_lock+")))
        .map(|r| r[2].as_str())
}

/// The hot mutex's row, found by its count (all the workers' iterations)
/// where the test is about its site.
fn hot_row(p: &Profile) -> Vec<String> {
    let all = (THREADS * ITERATIONS).to_string();
    p.1.iter()
        .find(|r| r[2] == all)
        .unwrap_or_else(|| panic!("no row of the hot mutex: {:?}", p.1))
        .clone()
}

/// `tests/c/profile_test.c` compiled with `flags` as
/// `klock_profile_test_<tag>` in the tests' directory.
fn compile_as(tag: &str, flags: &[&str]) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("klock_profile_test_{tag}"));
    common::compile_c("tests/c/profile_test.c", &out, flags);
    out
}

#[test]
fn a_forked_child_profiles_only_what_it_did() {
    let so = common::build_preload();
    let prog = compile();
    let (err, ps) = profiled_ok(&prog, &so, ITERATIONS, "fork");
    // The first child's, then the parent's (it waits for its children
    // before it exits); the second child took no lock and says nothing.
    assert_eq!(ps.len(), 2, "{err}");
    let (child, parent) = (&ps[0], &ps[1]);
    // The child counts its own acquisitions of the hot mutex, not the
    // parent's before the fork; it took no other lock.
    assert!(child.0.contains("1 locks used"), "{err}");
    assert_eq!(child.1.len(), 1, "{err}");
    assert_eq!(child.1[0][1], "mutex", "{err}");
    assert_eq!(child.1[0][2], "5", "{err}");
    assert!(child.1[0][10].starts_with("hot_worker_lock+"), "{err}");
    // Nor the parent's lock events: alone on the mutex, the child made
    // none (the parent's contended workers did).
    let blocks: Vec<&str> = err.split("klock: lock profile of").skip(1).collect();
    assert!(!blocks[0].contains("klock: lock events"), "{err}");
    assert!(blocks[1].contains("klock: lock events"), "{err}");
    // The parent's profile is as without the fork.
    assert!(parent.0.contains("4 locks used"), "{err}");
    let all = (THREADS * ITERATIONS).to_string();
    assert_eq!(hot_locked(parent), Some(all.as_str()), "{err}");
}

#[test]
fn a_process_that_takes_no_lock_says_so_in_one_line_unless_it_is_a_descendant() {
    let so = common::build_preload();
    let prog = compile();
    // Alone: one line, so that the user knows the profile was on.
    let (err, ps) = profiled_ok(&prog, &so, 0, "none");
    assert_eq!(ps.len(), 1, "{err}");
    assert!(ps[0].0.ends_with("no lock used"), "{err}");
    assert!(ps[0].1.is_empty(), "{err}");
    assert!(!err.contains("lock_stat version"), "{err}");
    // Started by a profiled process (the library passes its pid on in the
    // environment): nothing. Only the parent's profile is printed.
    let (err, ps) = profiled_ok(&prog, &so, ITERATIONS, "spawn");
    assert_eq!(ps.len(), 1, "{err}");
    assert!(ps[0].0.contains("4 locks used"), "{err}");
}

#[test]
fn a_signal_that_ends_the_program_prints_the_profile_first() {
    use std::os::unix::process::ExitStatusExt;
    let so = common::build_preload();
    let prog = compile();
    // SIGTERM at its default action: the profile, then the program dies
    // by the signal, as it would have without the library. The program
    // sees the default action (it checks, and sets it again), not the
    // profile's handler.
    let o = run_mode(&prog, &so, ITERATIONS, "term", &[("KLOCK_STAT", "1")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGTERM),
        "{}\n{}{err}",
        o.status,
        String::from_utf8_lossy(&o.stdout)
    );
    let ps = profiles(&err);
    assert_eq!(ps.len(), 1, "{err}");
    assert!(
        ps[0].0.contains(", ended by SIGTERM): 4 locks used"),
        "{err}"
    );
    let all = (THREADS * ITERATIONS).to_string();
    assert_eq!(hot_locked(&ps[0]), Some(all.as_str()), "{err}");
    assert!(err.contains("printed at a normal exit only"), "{err}");

    // The program's own handler: it decides, and the profile comes at
    // its normal exit.
    let (err, ps) = profiled_ok(&prog, &so, ITERATIONS, "own");
    assert_eq!(ps.len(), 1, "{err}");
    assert!(!ps[0].0.contains("ended by"), "{err}");
    assert!(err.contains("lock_stat version"), "{err}");

    // SIGHUP ignored when the program started (as under nohup): it stays
    // ignored, and the program runs on to its normal exit.
    let mut c = Command::new(&prog);
    c.args([ITERATIONS.to_string().as_str(), "hup"])
        .env("LD_PRELOAD", &so)
        .env("KLOCK_STAT", "1")
        .env_remove("KLOCK_STAT_PID");
    // SAFETY: only an async-signal-safe call between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut c, || {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let o = c.output().expect("run the profile test");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}\n{err}", o.status);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ok");
    assert!(!err.contains("ended by"), "{err}");
    assert_eq!(profiles(&err).len(), 1, "{err}");
}

/// The C program's `many` mode: this many mutexes, each locked this
/// many times (its `MANY_LOCKS`, `MANY_TIMES`).
const MANY_LOCKS: u64 = 20_000;
const MANY_TIMES: u64 = 3;
/// The profile's table (the library's `CAPACITY`).
const TABLE_ROWS: u64 = 16_384;

#[test]
fn locks_beyond_the_table_are_counted_as_not_tracked() {
    let so = common::build_preload();
    let prog = compile();
    let (err, ps) = profiled_ok(&prog, &so, 1, "many");
    assert_eq!(ps.len(), 1, "{err}");
    let used: u64 = ps[0]
        .0
        .split("): ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of locks used: {err}"));
    // A lock finds a row near its address or none: nearly the whole
    // table fills before one finds none.
    assert!(
        (TABLE_ROWS * 99 / 100..=TABLE_ROWS).contains(&used),
        "{used} locks used: {err}"
    );
    // Each lock either has a row for all its acquisitions, or none; its
    // releases are not acquisitions.
    let untracked = format!(
        "klock: {} acquisitions not tracked",
        (MANY_LOCKS - used) * MANY_TIMES
    );
    assert!(err.contains(&untracked), "want {untracked:?}: {err}");
    // The rows shown count every acquisition of their locks, and a lock
    // taken only a few times has each of its holds timed.
    for r in &ps[0].1 {
        assert_eq!(r[2], MANY_TIMES.to_string(), "{err}");
    }
    assert_eq!(timed_holds(&err), used * MANY_TIMES, "{err}");
}

#[test]
fn the_profile_goes_to_the_file_asked_for_one_per_process() {
    let so = common::build_preload();
    let prog = compile();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("klock_profile_files");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the profiles");
    // Relative: resolved against the directory the program started in.
    let mut c = Command::new(&prog);
    c.args([ITERATIONS.to_string().as_str(), "fork"])
        .current_dir(&dir)
        .env("LD_PRELOAD", &so)
        .env("KLOCK_STAT", "1")
        .env("KLOCK_STAT_FILE", "profile.%p.txt")
        .env_remove("KLOCK_STAT_PID");
    let o = c.output().expect("run the profile test");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}\n{err}", o.status);
    assert!(
        !err.contains("lock profile"),
        "the profile went to stderr: {err}"
    );
    // The parent and the child that locked write a file each, named by
    // their pids; the child that took no lock writes none.
    let mut texts: Vec<String> = std::fs::read_dir(&dir)
        .expect("the profiles' directory")
        .map(|e| {
            let path = e.expect("an entry").path();
            let text = std::fs::read_to_string(&path).expect("a profile");
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("profile.")
                .and_then(|n| n.strip_suffix(".txt"))
                .unwrap_or_else(|| panic!("a file named {name}"));
            assert!(text.contains(&format!("(pid {pid})")), "{name}: {text}");
            text
        })
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    texts.sort_by_key(|t| t.len());
    let child = profiles(&texts[0]);
    let parent = profiles(&texts[1]);
    let all = (THREADS * ITERATIONS).to_string();
    assert_eq!(hot_locked(&parent[0]), Some(all.as_str()), "{}", texts[1]);
    assert!(texts[1].contains("lock_stat version"), "{}", texts[1]);
    assert_eq!(child[0].1.len(), 1, "{}", texts[0]);
    assert_eq!(child[0].1[0][2], "5", "{}", texts[0]);

    // A file that cannot be opened at exit (a directory of that name):
    // the profile comes on stderr, after a line that says why.
    let blocked = dir.join("blocked");
    std::fs::create_dir_all(&blocked).expect("a directory in the way");
    let o = run_env(
        &prog,
        &so,
        ITERATIONS,
        &[
            ("KLOCK_STAT", "1"),
            ("KLOCK_STAT_FILE", blocked.to_str().unwrap()),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}\n{err}", o.status);
    assert!(
        err.contains(&format!(
            "klock: cannot open the profile file {} (KLOCK_STAT_FILE): the profile follows here",
            blocked.display()
        )),
        "{err}"
    );
    assert_eq!(hot_locked(&profiles(&err)[0]), Some(all.as_str()), "{err}");
}

#[test]
fn sites_are_named_from_the_symbol_table_at_a_normal_exit() {
    let so = common::build_preload();
    // Without -rdynamic the program exports no function, and dladdr alone
    // names none; its symbol table does. Stripped, it has none.
    let plain = compile_as("plain", &[]);
    let stripped = compile_as("stripped", &["-s"]);

    let (err, ps) = profiled_ok(&plain, &so, ITERATIONS, "");
    let row = hot_row(&ps[0]);
    assert!(row[10].starts_with("hot_worker_lock+0x"), "{err}");
    assert_eq!(
        row.get(11).map(String::as_str),
        Some(format!("({})", plain.display()).as_str()),
        "{err}"
    );
    // Every site of this program is in one of its functions.
    for r in &ps[0].1 {
        assert!(!r[10].contains("klock_profile_test_plain+0x"), "{err}");
    }

    let (err, ps) = profiled_ok(&stripped, &so, ITERATIONS, "");
    let row = hot_row(&ps[0]);
    let site = format!("{}+0x", stripped.display());
    assert!(row[10].starts_with(&site), "{err}");

    // In the report a signal ends with (async-signal-safe: no file read,
    // no allocation) dladdr's answer stays.
    let o = run_mode(&plain, &so, ITERATIONS, "term", &[("KLOCK_STAT", "1")]);
    let err = String::from_utf8_lossy(&o.stderr);
    let row = hot_row(&profiles(&err)[0]);
    assert!(
        row[10].starts_with(&format!("{}+0x", plain.display())),
        "{err}"
    );
}

#[test]
fn cpp_names_are_demangled_at_a_normal_exit() {
    let so = common::build_preload();
    // The locking function named as `server::Cache::lock()` is by a C++
    // compiler: found in the symbol table (a plain build), or by dladdr
    // (exported with -rdynamic).
    let plain = compile_as("mangled", &["-DMANGLED"]);
    let exported = compile_as("mangled_rdynamic", &["-DMANGLED", "-rdynamic"]);
    for prog in [&plain, &exported] {
        let (err, ps) = profiled_ok(prog, &so, ITERATIONS, "");
        let row = hot_row(&ps[0]);
        assert!(row[10].starts_with("server::Cache::lock+0x"), "{err}");
        assert_eq!(
            row.get(11).map(String::as_str),
            Some(format!("({})", prog.display()).as_str()),
            "{err}"
        );
    }
    // The report a signal ends with may not allocate: the name stays
    // mangled (dladdr's, for the exported function).
    let o = run_mode(&exported, &so, ITERATIONS, "term", &[("KLOCK_STAT", "1")]);
    let err = String::from_utf8_lossy(&o.stderr);
    let row = hot_row(&profiles(&err)[0]);
    assert!(row[10].starts_with("_ZN6server5Cache4lockEv+0x"), "{err}");
}

/// Run `tool` (binutils) with `args`; it must succeed.
fn binutil(tool: &str, args: &[&std::ffi::OsStr]) {
    let status = Command::new(tool)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("cannot run `{tool}` (binutils): {e}"));
    assert!(status.success(), "{tool} {args:?} failed");
}

/// The hot lock's site in the profile of `prog`, with `debug_dir` as the
/// debug directory (`KLOCK_STAT_DEBUG_DIR`), and the program's stderr.
fn hot_site(prog: &Path, so: &Path, debug_dir: &Path) -> (String, String) {
    let dir = debug_dir.to_str().expect("a UTF-8 path");
    let env = [("KLOCK_STAT_DEBUG_DIR", dir)];
    let (err, ps) = profiled_ok_with(prog, so, ITERATIONS, "", &env);
    (hot_row(&ps[0])[10].clone(), err)
}

/// Split the program `full` as a distribution's build does: its debug
/// information alone into `debug`, and a stripped copy into `stripped`.
fn split_debug(full: &Path, debug: &Path, stripped: &Path) {
    binutil(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            full.as_os_str(),
            debug.as_os_str(),
        ],
    );
    binutil(
        "strip",
        &[full.as_os_str(), "-o".as_ref(), stripped.as_os_str()],
    );
}

#[test]
fn a_stripped_program_is_named_from_its_separate_debug_file() {
    use object::{Object, ReadCache};
    let so = common::build_preload();
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let full = compile_as("debug_full", &["-Wl,--build-id"]);
    let data = ReadCache::new(std::fs::File::open(&full).expect("open the program"));
    let elf = object::read::elf::ElfFile64::<object::Endianness, _>::parse(&data).expect("ELF");
    let id: String = elf
        .build_id()
        .expect("read the build id")
        .expect("a build id")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    // The layout a distribution's debug package installs, under a
    // directory of the test's own.
    let dir = tmp.join("klock_debug_dir");
    let sub = dir.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&sub).expect("create the debug directory");
    let debug = sub.join(format!("{}.debug", &id[2..]));
    let stripped = tmp.join("klock_profile_test_debug_stripped");
    split_debug(&full, &debug, &stripped);
    let (named, err) = hot_site(&stripped, &so, &dir);
    assert!(named.starts_with("hot_worker_lock+0x"), "{err}");
    // Elsewhere, no debug file: the object and offset, as before.
    let (plain, err) = hot_site(&stripped, &so, Path::new("/nonexistent"));
    assert!(
        plain.starts_with(&format!("{}+0x", stripped.display())),
        "{err}"
    );
}

/// A stripped program without a build id is named from the debug file its
/// `.gnu_debuglink` names, in `.debug/` beside it or under the debug
/// directory at the program's own path, and only while that file's CRC-32
/// is the one the link records.
#[test]
fn a_stripped_program_is_named_from_its_debuglink() {
    let so = common::build_preload();
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let full = compile_as("debuglink_full", &["-Wl,--build-id=none"]);
    let dir = tmp.join(".debug");
    std::fs::create_dir_all(&dir).expect("create .debug");
    let name = "klock_profile_test_debuglink.debug";
    let debug = dir.join(name);
    let stripped = tmp.join("klock_profile_test_debuglink_stripped");
    split_debug(&full, &debug, &stripped);
    let mut link = std::ffi::OsString::from("--add-gnu-debuglink=");
    link.push(&debug);
    binutil("objcopy", &[link.as_os_str(), stripped.as_os_str()]);
    // No debug directory: only the file in `.debug/` can name it.
    let (named, err) = hot_site(&stripped, &so, Path::new("/nonexistent"));
    assert!(named.starts_with("hot_worker_lock+0x"), "{err}");
    // Moved to where a debug package puts it: the debug directory, then
    // the program's directory without its leading `/`.
    let global = tmp.join("klock_debuglink_dir");
    let under = global.join(tmp.strip_prefix("/").expect("an absolute path"));
    std::fs::create_dir_all(&under).expect("create the debug directory");
    std::fs::rename(&debug, under.join(name)).expect("move the debug file");
    let (named, err) = hot_site(&stripped, &so, &global);
    assert!(named.starts_with("hot_worker_lock+0x"), "{err}");
    // A debug file that is not the one linked (a byte appended: it still
    // parses, and names the function, but its CRC differs): the object
    // and offset, as without one.
    let mut bytes = std::fs::read(under.join(name)).expect("read the debug file");
    bytes.push(0);
    std::fs::write(under.join(name), bytes).expect("write the debug file");
    let (plain, err) = hot_site(&stripped, &so, &global);
    assert!(
        plain.starts_with(&format!("{}+0x", stripped.display())),
        "{err}"
    );
}
