//! `klock bench` prints and writes the "klock vs best peer" verdict.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// Run `klock bench ARGS --json DIR/v.json --plot DIR/v.svg`; returns
/// stdout + stderr and the JSON.
fn bench(tag: &str, args: &[&str]) -> (String, Value) {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("klock-verdict-{tag}-{}", std::process::id()));
    let json = dir.join("v.json");
    let o = Command::new(env!("CARGO_BIN_EXE_klock"))
        .arg("bench")
        .args(args)
        .args(["--json", json.to_str().unwrap()])
        .args(["--plot", dir.join("v.svg").to_str().unwrap()])
        .output()
        .expect("run klock");
    let t = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?}:\n{t}");
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (t, v)
}

const TINY: &[&str] = &["--duration", "20ms", "--runs", "1", "--warmup", "10ms"];

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn spinlock_bench_prints_and_writes_the_verdict() {
    let args = [
        &["spinlock", "--locks", "qspinlock,ttas", "--threads", "1,2"],
        TINY,
    ]
    .concat();
    let (t, v) = bench("spin", &args);
    assert!(
        t.contains("klock vs best peer: klock's default lock"),
        "{t}"
    );
    assert!(t.contains("cells won/lost: "), "{t}");
    assert!(
        t.contains("geomean of ratios: no thread count of 4 or more ran"),
        "{t}"
    );
    let rows = v["verdict"].as_array().expect("verdict array");
    assert_eq!(rows.len(), 2, "{v}");
    for (r, threads) in rows.iter().zip([1, 2]) {
        assert_eq!(r["threads"], threads);
        assert_eq!(r["klock_lock"], "qspinlock");
        assert_eq!(r["peer_lock"], "ttas");
        // The verdict restates the result rows of the same run.
        let of = |id: &str| {
            v["results"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["id"] == id && x["threads"] == threads)
                .unwrap()
                .clone()
        };
        let (k, p) = (of("qspinlock"), of("ttas"));
        assert_eq!(f(&r["klock_kops"]), f(&k["kops_mean"]));
        assert_eq!(f(&r["peer_kops"]), f(&p["kops_mean"]));
        assert_eq!(r["klock_per_thread_min"], k["per_thread_min"]);
        assert_eq!(r["peer_per_thread_mean"], p["per_thread_mean"]);
        let ratio = f(&k["kops_mean"]) / f(&p["kops_mean"]);
        assert!((f(&r["ratio"]) - ratio).abs() < 1e-9 * ratio, "{r}");
        // Its row in the table, with the ratio as printed.
        let shown = format!("{:.2}x", (ratio * 100.0).round() / 100.0);
        assert!(
            t.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.first() == Some(&threads.to_string().as_str())
                    && w.contains(&"qspinlock")
                    && w.contains(&"ttas")
                    && w.contains(&shown.as_str())
            }),
            "no table row for {threads} threads with {shown}:\n{t}"
        );
    }
    let s = &v["verdict_summary"];
    assert_eq!(s["won"].as_u64().unwrap() + s["lost"].as_u64().unwrap(), 2);
}

#[test]
fn no_default_lock_or_no_peer_is_one_line() {
    let args = [
        &["mutex", "--locks", "pthread,ttas", "--threads", "2"],
        TINY,
    ]
    .concat();
    let (t, v) = bench("nodefault", &args);
    assert!(
        t.contains("klock vs best peer: no verdict: klock's default lock (mutex) did not run"),
        "{t}"
    );
    assert_eq!(v["verdict"].as_array().unwrap().len(), 0);
    assert!(v["verdict_note"].is_string());
    let args = [
        &["mutex", "--locks", "mutex,mutex-nospin", "--threads", "2"],
        TINY,
    ]
    .concat();
    let (t, v) = bench("nopeer", &args);
    assert!(t.contains("no verdict: no peer ran"), "{t}");
    assert_eq!(v["verdict"].as_array().unwrap().len(), 0);
}

#[test]
fn uncontended_verdict_has_one_row_per_kind() {
    let args = [
        &[
            "uncontended",
            "--locks",
            "qspinlock,ttas,ticket,mutex,std-mutex",
        ],
        TINY,
    ]
    .concat();
    let (t, v) = bench("unc", &args);
    assert!(t.contains("klock vs best peer, uncontended"), "{t}");
    assert!(t.contains("within 10%"), "{t}");
    let rows = v["verdict"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap(),
                r["klock_lock"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds, [("spinlock", "qspinlock"), ("mutex", "mutex")]);
    assert_eq!(rows[1]["peer_lock"], "std-mutex");
    assert!(["ttas", "ticket"].contains(&rows[0]["peer_lock"].as_str().unwrap()));
    for r in rows {
        let ratio = f(&r["peer_ns_per_op"]) / f(&r["klock_ns_per_op"]);
        assert!((f(&r["ratio"]) - ratio).abs() < 1e-9 * ratio, "{r}");
        assert!(r["within_10pct"].is_boolean());
    }
}

#[test]
fn treelock_verdict_names_klocks_best_default_per_row() {
    let args = [
        &[
            "treelock",
            "--locks",
            "qspinlock,qrwlock,std-mutex",
            "--threads",
            "1,4",
        ],
        TINY,
    ]
    .concat();
    let (t, v) = bench("tree", &args);
    assert!(t.contains("klock vs best peer"), "{t}");
    assert!(t.contains("geomean of ratios at 4 threads"), "{t}");
    let results = v["results"].as_array().unwrap();
    let kops = |id: &str, th: u64| {
        f(&results
            .iter()
            .find(|x| x["id"] == id && x["threads"] == th)
            .unwrap()["kops_mean"])
    };
    let rows = v["verdict"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        let th = r["threads"].as_u64().unwrap();
        let best = kops("qspinlock", th).max(kops("qrwlock", th));
        let named = r["klock_lock"].as_str().unwrap();
        assert!(["qspinlock", "qrwlock"].contains(&named), "{r}");
        assert_eq!(kops(named, th), best, "{r}");
        assert_eq!(f(&r["klock_kops"]), best, "{r}");
        assert_eq!(r["peer_lock"], "std-mutex");
    }
}

/// `klock verdict FILE` reads a result file back and prints the verdict
/// that `klock bench` printed for it, held-out column included; a file
/// that is missing or not a result file is an error that names it.
#[test]
fn verdict_rereads_a_result_file() {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("klock-verdict-reread-{}", std::process::id()));
    let json = dir.join("v.json");
    let klock = || Command::new(env!("CARGO_BIN_EXE_klock"));
    let o = klock()
        .args(["bench", "spinlock", "--locks", "qspinlock,ttas,ticket"])
        .args(["--threads", "1,2", "--duration", "20ms", "--runs", "2"])
        .args(["--warmup", "10ms", "--json", json.to_str().unwrap()])
        .args(["--plot", dir.join("v.svg").to_str().unwrap()])
        .output()
        .expect("run klock bench");
    let printed = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{printed}");
    let verdict = |args: &[&str]| {
        klock()
            .arg("verdict")
            .args(args)
            .output()
            .expect("run klock verdict")
    };
    let json = json.to_str().unwrap();
    let o = verdict(&[json]);
    let again = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{again}");
    assert!(again.contains("== spinlock — "), "{again}");
    assert!(again.contains("held out"), "{again}");
    // The same table, line for line, as the bench printed.
    let table = |t: &str| -> Vec<String> {
        t.lines()
            .skip_while(|l| !l.starts_with("klock vs best peer"))
            .take_while(|l| !l.trim_start().starts_with("geomean"))
            .map(String::from)
            .collect()
    };
    let (a, b) = (table(&printed), table(&again));
    assert!(a.len() >= 4, "{printed}");
    assert_eq!(a, b, "bench printed:\n{printed}\nverdict printed:\n{again}");

    // A peer judged in klock's place.
    let o = verdict(&["--lock", "ttas", json]);
    let ttas = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{ttas}");
    assert!(ttas.contains("ttas vs best peer: ttas judged as"), "{ttas}");
    // Its two rows (1 and 2 threads) name ticket as the peer, never
    // klock's qspinlock.
    let rows: Vec<&str> = ttas
        .lines()
        .filter(|l| l.trim_start().starts_with(['1', '2']))
        .collect();
    assert_eq!(rows.len(), 2, "{ttas}");
    assert!(
        rows.iter()
            .all(|l| l.contains("ticket") && !l.contains("qspinlock")),
        "{ttas}"
    );

    let (missing, not) = (dir.join("none.json"), dir.join("not.json"));
    std::fs::write(&not, "{\"suite\": 3}").unwrap();
    let o = verdict(&[missing.to_str().unwrap(), not.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot read") && err.contains("none.json"),
        "{err}"
    );
    assert!(
        err.contains("not.json: not a `klock bench` result file"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `klock verdict --pool` pools the rounds of saved runs of one suite.
#[test]
fn verdict_pools_the_rounds_of_several_files() {
    let results = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/results/");
    let file = |v: &str, suite: &str| format!("{results}2core-amd-verdict-{v}-{suite}.json");
    let verdict = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_klock"))
            .arg("verdict")
            .args(args)
            .output()
            .expect("run klock verdict")
    };
    let (a, b) = (file("v18", "spinlock"), file("v19", "spinlock"));
    let o = verdict(&["--pool", &a, &b]);
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{t}");
    assert!(t.contains("== spinlock — 2 files pooled"), "{t}");
    assert!(t.contains("95% interval"), "{t}");
    // One row per thread count, each of the 4 + 4 rounds.
    let rows: Vec<&str> = t
        .lines()
        .filter(|l| l.contains("qspinlock") && l.contains("(2 files)"))
        .collect();
    assert_eq!(rows.len(), 5, "{t}");
    assert!(rows.iter().all(|l| l.contains(" 8 (2 files)")), "{t}");
    assert!(t.contains("cells won: "), "{t}");
    assert!(!t.contains("different machines"), "one machine: {t}");

    // Files from two machines pool, with a note saying so.
    let intel = format!("{results}2core-intel-verdict-v21-spinlock.json");
    let o = verdict(&["--pool", &a, &intel]);
    let mixed = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{mixed}");
    assert!(
        mixed.contains("note: these files come from 2 different machines"),
        "{mixed}"
    );

    // The same cells as JSON.
    let dir = std::env::temp_dir().join(format!("klock-verdict-pool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("pool.json");
    let o = verdict(&["--pool", "--json", json.to_str().unwrap(), &a, &b]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        t,
        "the table is printed as before"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["suite"], "spinlock");
    assert_eq!(v["files"].as_array().unwrap().len(), 2);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 5, "{v}");
    for (c, line) in cells.iter().zip(&rows) {
        assert_eq!(c["rounds"], 8);
        assert!(
            f(&c["low"]) <= f(&c["ratio"]) && f(&c["ratio"]) <= f(&c["high"]),
            "{c}"
        );
        let shown = format!("{:.2}x", (f(&c["ratio"]) * 100.0).round() / 100.0);
        assert!(line.contains(&shown), "{c} against {line}");
        let reads = c["reads_as"].as_str().unwrap();
        assert!(
            line.contains(if reads == "loss" { "LOSS" } else { reads }),
            "{c} against {line}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);

    // Files of two suites: a clear error, no table.
    let o = verdict(&["--pool", &a, &file("v19", "mutex")]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--pool takes files of one suite"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
