//! The `klock` binary as a user runs it.

use std::process::{Command, Output};

fn klock(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_klock"))
        .args(args)
        .output()
        .expect("run klock")
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// Runs `klock bench ARGS --json --plot` into a fresh temporary folder
/// (`tag` names it), asserts that it succeeded, and returns its output
/// and the JSON it wrote (the folder is removed).
fn bench_json(tag: &str, args: &[&str]) -> (Output, serde_json::Value) {
    let dir = std::env::temp_dir().join(format!("klock-cli-{tag}-{}", std::process::id()));
    let json = dir.join("r.json");
    let svg = dir.join("r.svg");
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend([
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let o = klock(&all);
    assert!(o.status.success(), "{}", text(&o));
    let v = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    (o, v)
}

/// The commit of this checkout, when git can tell.
fn head_commit() -> Option<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let o = Command::new("git")
        .args(["-C", root, "rev-parse", "HEAD"])
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// Every result file says which build and which command made it.
fn assert_traceable(v: &serde_json::Value, args: &[&str]) {
    let commit = v["git_commit"].as_str().expect("git_commit");
    match head_commit() {
        Some(head) => assert_eq!(commit, head, "git_commit"),
        None => assert!(
            commit == "unknown" || commit.len() == 40,
            "git_commit {commit}"
        ),
    }
    assert!(
        v["git_dirty"].is_boolean() || v["git_dirty"].is_null(),
        "git_dirty: {}",
        v["git_dirty"]
    );
    if head_commit().is_some() {
        assert!(v["git_dirty"].is_boolean(), "git_dirty in a checkout");
    }
    assert_eq!(v["klock_version"], env!("CARGO_PKG_VERSION"));
    let argv: Vec<&str> = v["command_argv"]
        .as_array()
        .expect("command_argv")
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv[0], env!("CARGO_BIN_EXE_klock"));
    assert_eq!(&argv[1..], args, "command_argv");
    let command = v["command"].as_str().expect("command");
    assert!(
        command.starts_with(env!("CARGO_BIN_EXE_klock")) && command.ends_with(args[args.len() - 1]),
        "command: {command}"
    );
}

#[test]
fn list_shows_suites_and_locks() {
    let o = klock(&["bench", "--list"]);
    assert!(o.status.success());
    let t = text(&o);
    // Each name must start a line of its own (a bare substring check would
    // pass for "mutex" on "std-mutex").
    let listed = |name: &str| {
        t.lines().any(|l| {
            l.strip_prefix("  ")
                .and_then(|l| l.split_whitespace().next())
                == Some(name)
        })
    };
    let suites = klock_cli::bench::suites::specs().map(|s| s.name);
    let locks = klock_cli::bench::registry::all().into_iter().map(|e| e.id);
    for name in suites.chain(locks) {
        assert!(listed(name), "--list lacks {name}:\n{t}");
    }
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    for (args, says) in [
        (&["bench", "nosuchsuite"][..], "Valid suites: mutex"),
        (
            &["bench", "mutex", "--locks", "nosuchlock"][..],
            "Valid locks: ",
        ),
        (
            &["bench", "mutex", "--threads", "0"][..],
            "--threads values must be between 1 and 1024",
        ),
        (
            &["bench", "mutex", "--runs", "0"][..],
            "--runs must be between",
        ),
        (
            &["bench", "mutex", "--duration", "1ms"][..],
            "--duration must be between",
        ),
        (
            &["bench", "mutex", "--duration", "soon"][..],
            "invalid value 'soon'",
        ),
    ] {
        let o = klock(args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(says), "{args:?} should say {says:?}, said:\n{t}");
        assert!(!t.contains("panicked"), "{args:?} panicked:\n{t}");
    }
}

#[test]
fn smoke_bench_writes_every_contract_field() {
    let dir = std::env::temp_dir().join(format!("klock-cli-test-{}", std::process::id()));
    let json = dir.join("r.json");
    let svg = dir.join("r.svg");
    let o = klock(&[
        "bench",
        "rwlock",
        "--quick",
        "--duration",
        "50ms",
        "--warmup",
        "10ms",
        "--threads",
        "1,4",
        "--locks",
        "std-rwlock,pthread",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("Locking rate, kop/s"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["suite"], "rwlock");
    for k in ["cpus", "cpu_model", "kernel"] {
        assert!(!v["machine"][k].is_null(), "machine.{k}");
    }
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let fields = [
        "lock",
        "variant",
        "threads",
        "readers",
        "writers",
        "runs",
        "duration_s",
        "kops_mean",
        "kops_stddev",
        "kops_hmean",
        "per_thread_min",
        "per_thread_mean",
        "per_thread_max",
        "reader_min",
        "reader_mean",
        "reader_max",
        "writer_min",
        "writer_mean",
        "writer_max",
        "cpu_s",
        "ops_per_cpu_s",
        "ctx_voluntary",
        "ctx_involuntary",
        "events",
    ];
    for r in rows {
        let o = r.as_object().unwrap();
        for f in fields {
            assert!(o.contains_key(f), "result lacks contract field {f}: {r}");
        }
        assert!(r["kops_mean"].as_f64().unwrap() > 0.0);
    }
    // 4 threads, read-mostly: 3 readers and 1 writer, with per-role spreads.
    let four = rows
        .iter()
        .find(|r| r["lock"] == "std-rwlock" && r["threads"] == 4)
        .unwrap();
    assert_eq!(
        (four["readers"].as_u64(), four["writers"].as_u64()),
        (Some(3), Some(1))
    );
    assert!(four["reader_mean"].as_f64().unwrap() > 0.0);
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("std-rwlock"));
    // The axis says what the error bars are.
    assert!(plot.contains("bar: min to max"), "plot axis label");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_lock_or_thread_count_named_twice_runs_once() {
    let (o, v) = bench_json(
        "twice",
        &[
            "mutex",
            "--duration",
            "10ms",
            "--warmup",
            "10ms",
            "--runs",
            "1",
            "--threads",
            "2,1,2",
            "--locks",
            "ttas,mutex,ttas",
        ],
    );
    let mut cells: Vec<(String, u64)> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["lock"].as_str().unwrap().to_string(),
                r["threads"].as_u64().unwrap(),
            )
        })
        .collect();
    cells.sort();
    let want: Vec<(String, u64)> = [
        ("klock-mutex", 1),
        ("klock-mutex", 2),
        ("ttas", 1),
        ("ttas", 2),
    ]
    .iter()
    .map(|&(l, t)| (l.to_string(), t))
    .collect();
    assert_eq!(cells, want, "{}", text(&o));
}

#[test]
fn json_says_which_build_and_command_made_it() {
    let dir = std::env::temp_dir().join(format!("klock-cli-trace-{}", std::process::id()));
    let json = dir.join("u.json");
    let svg = dir.join("u.svg");
    let args = [
        "bench",
        "uncontended",
        "--quick",
        "--threads",
        "1",
        "--locks",
        "std-mutex",
        "--duration",
        "20ms",
        "--warmup",
        "5ms",
        "--plot",
        svg.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    let o = klock(&args);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_traceable(&v, &args);
    // The tables come before the lines naming the written files.
    let table = t.find("Uncontended lock+unlock cost").expect("cost table");
    let files = t.find("   JSON: ").expect("files line");
    assert!(table < files, "{t}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn unwritable_output_path_fails_before_any_run() {
    let dir = std::env::temp_dir().join(format!("klock-cli-badpath-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A plain file where a folder is needed: not writable, even for root.
    let file = dir.join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("x.json");
    let under_file = under_file.to_str().unwrap();
    let a_dir = dir.to_str().unwrap();
    let ok_json = dir.join("ok.json");
    let ok_json = ok_json.to_str().unwrap();
    for (args, says) in [
        (
            vec!["bench", "mutex", "--json", under_file],
            format!("cannot write --json {under_file}: Not a directory"),
        ),
        (
            vec!["bench", "mutex", "--json", a_dir],
            format!("cannot write --json {a_dir}: Is a directory"),
        ),
        (
            vec!["bench", "mutex", "--json", ok_json, "--plot", under_file],
            format!("cannot write --plot {under_file}: Not a directory"),
        ),
    ] {
        let start = std::time::Instant::now();
        let o = klock(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(
            t.contains(&says),
            "{args:?} should say {says:?}, said:\n{t}"
        );
        assert!(!t.contains("panicked"), "{args:?} panicked:\n{t}");
        // Nothing ran: no run count announced, and well under the
        // suite's minutes.
        assert!(!t.contains("runs, about"), "{args:?} started running:\n{t}");
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
    }
    // The check leaves no file behind where the JSON would go.
    assert!(!std::path::Path::new(ok_json).exists());
    std::fs::remove_dir_all(&dir).ok();
}

// --- treelock and `klock stat` -----------------------------------

#[test]
fn stat_prints_both_layouts() {
    let o = klock(&[
        "stat",
        "treelock",
        "--locks",
        "qrwlock,std-mutex",
        "--threads",
        "2",
        "--duration",
        "30ms",
        "--warmup",
        "5ms",
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for s in [
        "lock_stat version 0.4",
        "con-bounces",
        "qrwlock-W:",
        "qrwlock-R:",
        "UTIL  CON",
        "*TOTAL*",
        "std-mutex (read)",
        "treelock.rs:",
    ] {
        assert!(t.contains(s), "klock stat output lacks {s:?}:\n{t}");
    }
}

#[test]
fn stat_bad_input_is_a_clear_error() {
    for (args, says) in [
        (&["stat"][..], "required"),
        (&["stat", "nosuchsuite"][..], "Valid suites:"),
        (&["stat", "treelock", "--locks", "nope"][..], "Valid locks:"),
    ] {
        let o = klock(args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(says), "{args:?} should say {says:?}:\n{t}");
        assert!(!t.contains("panicked"), "{t}");
    }
}

#[test]
fn treelock_smoke() {
    let (o, v) = bench_json(
        "treelock",
        &[
            "treelock",
            "--locks",
            "qspinlock,qrwlock",
            "--threads",
            "1,2",
            "--duration",
            "30ms",
            "--warmup",
            "5ms",
            "--runs",
            "2",
        ],
    );
    let t = text(&o);
    for s in [
        "Single-thread cost per operation",
        "lockstat ns/acq",
        "mean(stddev) over 2 run(s)",
        "qrwlock vs qspinlock",
        "CPUs kept busy",
        "Context switches per run",
        "Events of qspinlock (per run)",
        "Events of qrwlock (per run)",
        "UTIL  CON",
        "qrwlock (read)",
    ] {
        assert!(t.contains(s), "treelock output lacks {s:?}:\n{t}");
    }
    let rows = v["results"].as_array().unwrap();
    // 2 locks × 2 thread counts, plus the 2 tracked single-thread rows.
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().any(|r| r["id"] == "qrwlock+lockstat"));
    assert!(v["git_commit"].is_string() && v["command_argv"].is_array());
}

#[test]
fn list_with_a_suite_shows_that_suite_and_its_locks_only() {
    let o = klock(&["bench", "--list", "mutex"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("test-mutex"), "{out}");
    assert!(out.contains("std-mutex "), "{out}");
    // Not another suite's entry, nor a lock the mutex suite does not run.
    assert!(!out.contains("read-mostly shared map"), "{out}");
    assert!(!out.contains("rwsem-rspin"), "{out}");

    // A group stands for its suites.
    let o = klock(&["bench", "--list", "rwsem"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("rwsem-pagefault"), "{}", text(&o));

    let o = klock(&["bench", "--list", "nosuch"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("unknown suite 'nosuch'"), "{}", text(&o));
}
