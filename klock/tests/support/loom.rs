//! What the loom models (`klock/tests/loom_*.rs`) share: the model
//! builder, the model run that sums a lock's probe over its executions,
//! the value a lock protects, threads that play a part on the lock and
//! that value, and the checks that the model of a broken lock fails.
//!
//! A model file includes it as `#[path = "support/loom.rs"] mod support;`
//! and uses what it needs of it.
// Each model file uses a part of this module.
#![allow(dead_code, unused_imports, unused_macros)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread::JoinHandle;
use std::fmt::Debug;

/// Loom builder: `LOOM_MAX_PREEMPTIONS` from the environment, 2 if unset,
/// so a plain `cargo test` under `--cfg loom` stays bounded too.
pub fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b
}

/// Runs the model `f` under `b`; `f` adds to the coverage what each
/// execution went through. Prints the coverage (after `label`, if any)
/// and returns it.
pub fn check<C: Debug + Default + Send + Sync + 'static>(
    b: loom::model::Builder,
    label: &str,
    f: impl Fn(&C) + Send + Sync + 'static,
) -> std::sync::Arc<C> {
    let cov = std::sync::Arc::new(C::default());
    let c = cov.clone();
    b.check(move || f(&c));
    if label.is_empty() {
        eprintln!("coverage: {cov:?}");
    } else {
        eprintln!("{label} coverage: {cov:?}");
    }
    cov
}

/// `probe_coverage!(Probe { a, b } max { c })`: the `Coverage` of a model, the
/// totals of the probe's counters `a` and `b` and the largest `c` over all
/// its executions, and `Coverage::add`, which adds one execution's probe.
macro_rules! probe_coverage {
    ($probe:ty { $($sum:ident),* $(,)? } $(max { $($max:ident),* $(,)? })?) => {
        /// Totals of the probe counters over all executions of one model.
        #[derive(Debug, Default)]
        struct Coverage {
            executions: std::sync::atomic::AtomicU32,
            $($sum: std::sync::atomic::AtomicU32,)*
            $($($max: std::sync::atomic::AtomicU32,)*)?
        }

        impl Coverage {
            fn add(&self, p: &$probe) {
                use std::sync::atomic::Ordering::Relaxed;
                self.executions.fetch_add(1, Relaxed);
                $(self.$sum.fetch_add(p.$sum.load(Relaxed), Relaxed);)*
                $($(self.$max.fetch_max(p.$max.load(Relaxed), Relaxed);)*)?
            }
        }
    };
}
pub(crate) use probe_coverage;

/// The value a lock protects: a loom `UnsafeCell`, so two holders at once
/// (or a hand-over that does not publish) are a data race loom reports,
/// and a count, so a lost update shows in the total.
pub type Data = UnsafeCell<u32>;

/// The protected value.
pub fn read(data: &Data) -> u32 {
    data.with(|p| unsafe { *p })
}

/// Adds one to the protected value (a read, then a write); returns the
/// value before.
pub fn bump(data: &Data) -> u32 {
    let v = data.with(|p| unsafe { *p });
    data.with_mut(|p| unsafe { *p = v + 1 });
    v
}

/// Spawns a loom thread that plays `part` (`f`) on clones of `lock` and
/// `data` (the protected value, or a flag of the model's own).
pub fn spawn_part<L, D, P, T, F>(lock: &Arc<L>, data: &Arc<D>, part: P, f: F) -> JoinHandle<T>
where
    L: Send + Sync + 'static,
    D: 'static,
    P: Send + 'static,
    T: Send + 'static,
    F: FnOnce(&L, &D, P) -> T + Send + 'static,
{
    let (lock, data) = (lock.clone(), data.clone());
    loom::thread::spawn(move || f(&lock, &data, part))
}

/// [`spawn_part`] for each of `parts`, in order.
pub fn spawn_parts<L, D, P, T, F>(
    lock: &Arc<L>,
    data: &Arc<D>,
    parts: &[P],
    f: F,
) -> Vec<JoinHandle<T>>
where
    L: Send + Sync + 'static,
    D: 'static,
    P: Copy + Send + 'static,
    T: Send + 'static,
    F: FnOnce(&L, &D, P) -> T + Copy + Send + 'static,
{
    parts
        .iter()
        .map(|&p| spawn_part(lock, data, p, f))
        .collect()
}

/// The main thread plays `parts[0]`, one thread spawned before it each of
/// the others ([`spawn_parts`]); returns what each played, in order.
pub fn play<L, D, P, T, F>(lock: &Arc<L>, data: &Arc<D>, parts: &[P], f: F) -> Vec<T>
where
    L: Send + Sync + 'static,
    D: 'static,
    P: Copy + Send + 'static,
    T: Send + 'static,
    F: FnOnce(&L, &D, P) -> T + Copy + Send + 'static,
{
    let hs = spawn_parts(lock, data, &parts[1..], f);
    let main = f(lock, data, parts[0]);
    std::iter::once(main).chain(join_all(hs)).collect()
}

/// Joins the threads in order; what each returned.
pub fn join_all<T>(hs: Vec<JoinHandle<T>>) -> Vec<T> {
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Re-reads a scaffolding wait explores before it stops exploring.
pub const SCAFFOLD_EXPLORE: u32 = 1;

/// Scaffolding: wait (yielding) until the lock word, read by `word`,
/// satisfies `pred`. The staging is not what is under test, so a wait not
/// satisfied by its first read stops exploring this execution's
/// alternatives (`loom::skip_branch`; the schedules in which the awaited
/// state came first are explored on their own) and then reads the newest
/// value (`newest`) until the wait ends (see `Spin` in `klock/src/qspinlock`
/// for why loom needs that).
pub fn wait_word(pred: impl Fn(u32) -> bool, word: impl Fn() -> u32, newest: impl Fn() -> u32) {
    let mut w = word();
    let mut rereads = 0;
    while !pred(w) {
        loom::thread::yield_now();
        rereads += 1;
        w = if rereads <= SCAFFOLD_EXPLORE {
            word()
        } else {
            if rereads == SCAFFOLD_EXPLORE + 1 {
                loom::skip_branch();
            }
            newest()
        };
    }
}

/// Runs `f`, the model of a broken lock, which loom must reject (`what`
/// is the failure if it does not); returns the rejection's message.
pub fn expect_failure(what: &str, f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let err = std::panic::catch_unwind(f).expect_err(what);
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// [`expect_failure`] for a model that must fail: prints the message
/// after `label` and returns it.
pub fn expect_model_failure(label: &str, f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let msg = expect_failure("loom should have found the bug", f);
    eprintln!("{label}: {msg}");
    msg
}

/// Runs the test `name` of this test binary in a child process (`ignored`:
/// a test marked `#[ignore]`; `env`: set for the child) and checks that
/// loom found a deadlock there. Loom aborts the process on a deadlock
/// while unwinding, so a broken model that deadlocks cannot run in the
/// parent.
pub fn expect_deadlock_in_child(name: &str, ignored: bool, env: &[(&str, &str)]) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args(["--exact", name, "--nocapture", "--test-threads=1"]);
    if ignored {
        child.arg("--ignored");
    }
    let out = child
        .envs(env.iter().copied())
        .output()
        .expect("cannot run the child test");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the broken model passed");
    assert!(
        err.contains("deadlock"),
        "failed, but not by the lost wake-up: {err}"
    );
    eprintln!("broken variant rejected: loom found the deadlock");
}
