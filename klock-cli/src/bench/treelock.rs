//! The `treelock` suite: the 2004 "make mapping->tree_lock an rwlock"
//! experiment. A read-mostly shared index — a radix tree of integer keys,
//! like the page cache's — under a spinlock, an rwlock and the peers:
//!
//! 1. single-thread cost per operation in ns (the 2004 mail's "additional cost
//!    of the rwlock", ~240 ns on a P4), untracked and with lockstat
//!    tracking (the difference is lockstat's cost per acquisition);
//! 2. throughput by threads as mean(stddev) over runs (the 2004 mail's jobs/min
//!    table, 5 runs);
//! 3. the lockmeter table of one tracked run per lock (the 2004 mail's lockstat
//!    output, which showed 13.1% contention in `find_lock_page`).
//!
//! Every thread does the same mix: [`WRITE_PCT`]% of operations insert or
//! remove a key (exclusive), the rest look one up (shared).

use super::peers::{BenchLock, TryBench};
use super::registry::{per_lock, LockEntry, PerLock};
use super::report::{rate, ResultFile, ResultRow};
use super::suite::{all_writers, untrackable, Ctx, Measured, Plan, Point, Spec, Suite};
use super::tracked::{self, Stat};
use super::verdict;
use super::workload::{measure, ns_to_iters, spin_iters, Arena, CriticalSection, Role, RunOutcome};
use crossbeam_utils::CachePadded;
use std::cell::UnsafeCell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// The suite's name.
pub const NAME: &str = "treelock";
/// Share of operations that modify the tree (insert or remove), percent.
pub const WRITE_PCT: u64 = 10;
/// Keys present from the start (lookups always hit one of them).
pub const POPULATED: u64 = 16_384;
/// Populated keys are `i * STRIDE`; churned keys `i * STRIDE + 1`.
const STRIDE: u64 = 16;

// --- the index ------------------------------------------------------------

const FAN_BITS: u32 = 6;
const FAN: usize = 1 << FAN_BITS;
/// Three levels of 64: keys below 2^18.
pub const KEY_LIMIT: u64 = 1 << (3 * FAN_BITS);

struct Leaf {
    present: u64,
    vals: [u64; FAN],
}

struct Mid {
    kids: [Option<Box<Leaf>>; FAN],
    count: u32,
}

/// A three-level, 64-way radix tree of `u64` values keyed by integers
/// below [`KEY_LIMIT`]; empty leaves and middle nodes are freed, as the
/// kernel's radix tree shrinks.
pub struct Radix {
    top: [Option<Box<Mid>>; FAN],
    len: usize,
}

#[inline(always)]
fn split(key: u64) -> (usize, usize, usize) {
    let m = FAN as u64 - 1;
    (
        ((key >> (2 * FAN_BITS)) & m) as usize,
        ((key >> FAN_BITS) & m) as usize,
        (key & m) as usize,
    )
}

impl Default for Radix {
    fn default() -> Self {
        Self::new()
    }
}

impl Radix {
    pub fn new() -> Self {
        Self {
            top: std::array::from_fn(|_| None),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn get(&self, key: u64) -> Option<u64> {
        debug_assert!(key < KEY_LIMIT);
        let (a, b, c) = split(key);
        let leaf = self.top[a].as_ref()?.kids[b].as_ref()?;
        (leaf.present >> c & 1 == 1).then(|| leaf.vals[c])
    }

    /// Insert or replace; returns the old value.
    pub fn insert(&mut self, key: u64, val: u64) -> Option<u64> {
        assert!(key < KEY_LIMIT, "radix key {key} out of range");
        let (a, b, c) = split(key);
        let mid = self.top[a].get_or_insert_with(|| {
            Box::new(Mid {
                kids: std::array::from_fn(|_| None),
                count: 0,
            })
        });
        let leaf = mid.kids[b].get_or_insert_with(|| {
            mid.count += 1;
            Box::new(Leaf {
                present: 0,
                vals: [0; FAN],
            })
        });
        let old = (leaf.present >> c & 1 == 1).then(|| leaf.vals[c]);
        leaf.present |= 1 << c;
        leaf.vals[c] = val;
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub fn remove(&mut self, key: u64) -> Option<u64> {
        let (a, b, c) = split(key);
        let mid = self.top[a].as_mut()?;
        let leaf = mid.kids[b].as_mut()?;
        if leaf.present >> c & 1 == 0 {
            return None;
        }
        leaf.present &= !(1 << c);
        let v = leaf.vals[c];
        self.len -= 1;
        if leaf.present == 0 {
            mid.kids[b] = None;
            mid.count -= 1;
            if mid.count == 0 {
                self.top[a] = None;
            }
        }
        Some(v)
    }
}

// --- one run --------------------------------------------------------------

/// One treelock measurement.
#[derive(Debug, Clone)]
pub struct TreeWork {
    pub threads: usize,
    pub write_pct: u64,
    pub outside_ns: u64,
    pub warmup: Duration,
    pub duration: Duration,
}

/// The tree and the writers' counter, the counter first: it follows the
/// lock in the [`Arena`].
#[repr(C)]
struct Data {
    writes: u64,
    tree: Radix,
}

/// Run `w` once on a fresh lock of type `L` and a freshly populated tree.
/// Errors if the lock failed to exclude (lost writes, or a lookup that
/// missed a key that is always present).
pub fn run<L: BenchLock>(w: &TreeWork) -> Result<RunOutcome, String> {
    super::peers::with_oracle::<L, _>(|| run_once::<L>(w))
}

fn run_once<L: BenchLock>(w: &TreeWork) -> Result<RunOutcome, String> {
    let threads = w.threads;
    let mut tree = Radix::new();
    for i in 0..POPULATED {
        tree.insert(i * STRIDE, i * STRIDE);
    }
    let arena = Arc::new(Arena::<L, Data> {
        lock: L::new(),
        data: UnsafeCell::new(Data { tree, writes: 0 }),
    });
    let counts: Arc<Vec<CachePadded<AtomicU64>>> = Arc::new(
        (0..threads)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
    );
    let writes: Arc<Vec<CachePadded<AtomicU64>>> = Arc::new(
        (0..threads)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
    );
    let misses = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let outside = ns_to_iters(w.outside_ns);
    let write_pct = w.write_pct;

    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (arena, counts, writes, misses, stop, start) = (
                arena.clone(),
                counts.clone(),
                writes.clone(),
                misses.clone(),
                stop.clone(),
                start.clone(),
            );
            std::thread::Builder::new()
                .name(format!("treelock-{i}"))
                .spawn(move || {
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64
                        ^ (i as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                    let (mut n, mut nw) = (0u64, 0u64);
                    start.wait();
                    while !stop.load(Ordering::Relaxed) {
                        spin_iters(outside);
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let slot = (rng >> 8) % POPULATED;
                        let d = arena.data.get();
                        if rng % 100 < write_pct {
                            // add_to_page_cache / remove_from_page_cache.
                            let key = slot * STRIDE + 1;
                            // SAFETY: exclusive side held.
                            arena.lock.write(|| unsafe {
                                let d = &mut *d;
                                d.writes += 1;
                                if d.tree.remove(key).is_none() {
                                    d.tree.insert(key, key);
                                }
                            });
                            nw += 1;
                            writes[i].store(nw, Ordering::Relaxed);
                        } else {
                            // find_lock_page: one lookup.
                            let key = slot * STRIDE;
                            // SAFETY: shared side held; lookups only read.
                            let v = arena.lock.read(|| unsafe { (*d).tree.get(key) });
                            if v != Some(key) {
                                misses.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        n += 1;
                        // Only this thread writes its counter: a plain store.
                        counts[i].store(n, Ordering::Relaxed);
                    }
                })
                .map_err(|e| format!("cannot start thread {i} of {threads}: {e}"))
        })
        .collect::<Result<_, _>>()?;

    let outcome = measure::<L>(
        &start,
        &counts,
        &stop,
        handles,
        (w.warmup, w.duration),
        |_| Role::Writer,
    )?;
    let made: u64 = writes.iter().map(|a| a.load(Ordering::Relaxed)).sum();
    // SAFETY: all threads joined.
    let seen = unsafe { (*arena.data.get()).writes };
    if seen != made || misses.load(Ordering::Relaxed) != 0 {
        return Err(format!(
            "the lock did not exclude: {made} tree updates made, {seen} counted, {} lookups missed a present key",
            misses.load(Ordering::Relaxed)
        ));
    }
    Ok(outcome)
}

// --- the suite ------------------------------------------------------------

/// The suite.
pub struct TreeLock;

/// The table entry.
pub static TREELOCK: TreeLock = TreeLock;

static SPEC: Spec = Spec {
    name: NAME,
    title: "tree_lock (2004 spinlock -> rwlock mail): read-mostly radix-tree index, \
            single-thread ns/op, kop/s mean(stddev) by threads, lockmeter table",
    default_locks: &[
        "qspinlock",
        "qrwlock",
        "rwsem",
        "std-mutex",
        "parking_lot",
        "pthread",
        "pthread-adaptive",
        "pthread-spin",
        "ticket",
        "ttas",
        "std-rwlock",
        "parking_lot-rwlock",
        "pthread-rwlock",
    ],
    default_threads: &[1, 2, 4, 8, 16],
    // Unused: treelock's critical sections are the tree operations.
    cs: CriticalSection::Counter,
    outside_ns: 100,
    mix: all_writers,
    cost_table: false,
    // The 2004 mail's table is mean(stddev) of 5 runs.
    runs: Some(5),
    quick_ends: false,
};

type TreeRun = fn(&TreeWork) -> Result<RunOutcome, String>;

/// [`run`] for a lock type of the registry.
struct Untracked;

impl PerLock for Untracked {
    type Out = TreeRun;
    fn with<L: TryBench>() -> TreeRun {
        run::<L>
    }
}

/// [`run`] under lockstat.
struct Tracked;

impl PerLock for Tracked {
    type Out = TreeRun;
    fn with<L: TryBench>() -> TreeRun {
        run::<Stat<L>>
    }
}

fn untracked(lock: &LockEntry) -> TreeRun {
    per_lock::<Untracked>(lock.id).expect("a plan's locks are registered")
}

/// The tracked runner, where lockstat can track the lock.
fn tracked(lock: &LockEntry) -> Option<TreeRun> {
    lock.tracked
        .then(|| per_lock::<Tracked>(lock.id).expect("a plan's locks are registered"))
}

fn work(plan: &Plan, threads: usize) -> TreeWork {
    TreeWork {
        threads,
        write_pct: WRITE_PCT,
        outside_ns: plan.outside_ns,
        warmup: plan.warmup,
        duration: plan.duration,
    }
}

/// The thread count of the lockmeter run: the largest of the plan's
/// counts up to twice the CPUs (contention without the collapse of
/// oversubscribed spinlocks), else the smallest.
pub fn lockmeter_threads(threads: &[usize], cpus: usize) -> usize {
    threads
        .iter()
        .copied()
        .filter(|&t| t <= 2 * cpus.max(1))
        .max()
        .unwrap_or_else(|| threads.iter().copied().min().unwrap_or(1))
}

/// One lock's single-thread cost: untracked, and tracked where it can be.
type Cost = (&'static str, ResultRow, Option<ResultRow>);

/// What the extra phases measured.
#[derive(Default)]
pub struct Extra {
    cost: Vec<Cost>,
    lm: Option<klock::lockstat::Report>,
    lm_threads: usize,
    untrackable: Vec<&'static str>,
}

impl Suite for TreeLock {
    type Outcome = RunOutcome;
    type State = Extra;

    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    /// Thread-major, and the runs interleaved (the default schedule): at
    /// each thread count every lock runs once, then again for the next
    /// run, so that a slow phase of a shared machine hits every lock alike
    /// and the ratios at one thread count stay comparable. (The 2004 mail
    /// ran each lock's sweep back to back; on a noisy 2-vCPU guest that
    /// order moved the verdict's ratios between 0.5x and 2x from one
    /// invocation to the next.)
    fn points(&self, plan: &Plan) -> Vec<Point> {
        plan.threads
            .iter()
            .flat_map(|&threads| {
                plan.locks.iter().enumerate().map(move |(item, l)| Point {
                    item,
                    id: l.id,
                    threads,
                })
            })
            .collect()
    }
    fn begin(&self, _: &Plan, _: &Ctx) -> Result<Extra, String> {
        Ok(Extra::default())
    }
    fn run(&self, plan: &Plan, _: &mut Extra, p: &Point) -> Result<RunOutcome, String> {
        untracked(&plan.locks[p.item])(&work(plan, p.threads))
    }
    fn row(&self, plan: &Plan, p: &Point, runs: &[RunOutcome]) -> ResultRow {
        let l = &plan.locks[p.item];
        ResultRow::aggregate(l.id, l.lock, l.variant, 0, p.threads, runs)
    }
    /// The single-thread cost (untracked and tracked runs alternate, so
    /// drift in the machine's speed hits both alike), then one tracked
    /// run per lock for the lockmeter table.
    fn end(&self, plan: &Plan, x: &mut Extra, ctx: &Ctx) -> Result<(), String> {
        // Run-major too: run 1 of every lock, then run 2, ...
        let mut un: Vec<Vec<RunOutcome>> = plan.locks.iter().map(|_| Vec::new()).collect();
        let mut tr: Vec<Vec<RunOutcome>> = plan.locks.iter().map(|_| Vec::new()).collect();
        for i in 0..plan.runs {
            for (k, lock) in plan.locks.iter().enumerate() {
                ctx.more(2);
                ctx.step(format!(
                    "treelock {} single-thread cost, run {}",
                    lock.id,
                    i + 1
                ));
                un[k].push(untracked(lock)(&work(plan, 1))?);
                ctx.done(1);
                if let Some(run) = tracked(lock) {
                    tracked::set_class(&format!("{}-cost", lock.id));
                    tr[k].push(run(&work(plan, 1))?);
                }
                ctx.done(1);
            }
        }
        for ((lock, un), tr) in plan.locks.iter().zip(un).zip(tr) {
            let untracked = ResultRow::aggregate(lock.id, lock.lock, lock.variant, 0, 1, &un);
            let tracked = (!tr.is_empty()).then(|| {
                ResultRow::aggregate(
                    &format!("{}+lockstat", lock.id),
                    lock.lock,
                    "lockstat",
                    0,
                    1,
                    &tr,
                )
            });
            x.cost.push((lock.id, untracked, tracked));
        }
        x.lm_threads = lockmeter_threads(&plan.threads, ctx.machine.cpus);
        let mut lm = klock::lockstat::Report {
            classes: Vec::new(),
            cpus: ctx.machine.cpus,
        };
        for lock in &plan.locks {
            match tracked(lock) {
                Some(run) => {
                    ctx.more(1);
                    ctx.step(format!(
                        "treelock {} lockstat @ {} threads",
                        lock.id, x.lm_threads
                    ));
                    klock::lockstat::reset();
                    tracked::set_class(lock.id);
                    run(&work(plan, x.lm_threads))?;
                    lm.extend(tracked::take_class(lock.id));
                    ctx.done(1);
                }
                None => x.untrackable.push(lock.id),
            }
        }
        x.lm = Some(lm);
        Ok(())
    }
    fn workload(&self, plan: &Plan, _: &Extra) -> String {
        format!(
            "every thread: {}% lookups (shared), {WRITE_PCT}% insert-or-remove (exclusive) in a \
             radix tree of {POPULATED} keys; {} ns outside; {:?} × {} runs per point after {:?} warm-up",
            100 - WRITE_PCT,
            plan.outside_ns,
            plan.duration,
            plan.runs,
            plan.warmup
        )
    }
    /// The verdict (from the sweep's rows only) under treelock's tables.
    fn tables(
        &self,
        plan: &Plan,
        x: &Extra,
        file: &ResultFile,
        _: &[Measured<RunOutcome>],
    ) -> String {
        let lm = x.lm.as_ref().expect("end ran");
        render(file, &x.cost, lm, x.lm_threads, plan, &x.untrackable) + &verdict::render(file)
    }
    /// The file: the sweep's rows, then each lock's tracked single-thread
    /// rows with id `LOCK+lockstat` (the untracked rows of the cost table
    /// are paired runs, not in the file).
    fn write_json(
        &self,
        plan: &Plan,
        x: &Extra,
        file: &ResultFile,
        _: &[Measured<RunOutcome>],
    ) -> Result<(), String> {
        let mut file = file.clone();
        file.results
            .extend(x.cost.iter().filter_map(|(_, _, tracked)| tracked.clone()));
        file.write_json(&plan.json)
    }
    fn tracked_run(
        &self,
        plan: &Plan,
        lock: &LockEntry,
        threads: usize,
    ) -> Result<RunOutcome, String> {
        let run = tracked(lock).ok_or_else(|| untrackable(lock))?;
        run(&work(plan, threads))
    }
}

fn ns_per_op(r: &ResultRow) -> f64 {
    1e6 / r.kops_mean.max(1e-9)
}

/// `7556(15)`: mean(stddev), as in the 2004 mail's table.
fn mean_sd(r: &ResultRow) -> String {
    format!("{}({})", rate(r.kops_mean), rate(r.kops_stddev))
}

fn render(
    file: &ResultFile,
    cost: &[Cost],
    lm: &klock::lockstat::Report,
    lm_threads: usize,
    plan: &Plan,
    untrackable: &[&str],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n== {} — {}", file.suite, file.title);
    let _ = writeln!(
        out,
        "   {}; {} CPUs ({})",
        file.workload, file.machine.cpus, file.machine.cpu_model
    );

    let _ = writeln!(
        out,
        "\nSingle-thread cost per operation, ns (the 2004 mail's \"additional cost of the rwlock\"); \
         tracked = under lockstat, so tracked - untracked = lockstat's cost per acquisition"
    );
    let first = cost.first().map(|c| ns_per_op(&c.1));
    let mut body = Vec::new();
    for (id, un, tr) in cost {
        let base = ns_per_op(un);
        body.push(vec![
            id.to_string(),
            format!("{base:.1}"),
            format!("±{:.1}%", 100.0 * un.kops_stddev / un.kops_mean.max(1e-9)),
            first.map_or("-".into(), |f| format!("{:+.1}", base - f)),
            tr.as_ref()
                .map_or("-".into(), |t| format!("{:.1}", ns_per_op(t))),
            tr.as_ref().map_or("not tracked".into(), |t| {
                format!("{:+.1}", ns_per_op(t) - base)
            }),
        ]);
    }
    let header = [
        "lock",
        "ns/op",
        "± stddev",
        &format!("vs {}", cost.first().map_or("", |c| c.0)),
        "tracked ns/op",
        "lockstat ns/acq",
    ]
    .map(String::from);
    out += &super::report::table(&header, &body);

    let _ = writeln!(
        out,
        "\nThroughput, kop/s by threads: mean(stddev) over {} run(s)",
        plan.runs
    );
    let ids: Vec<&str> = plan.locks.iter().map(|l| l.id).collect();
    // The 2004 mail's spinlock → rwlock column, when both are in the run.
    let pair = ids.contains(&"qspinlock") && ids.contains(&"qrwlock");
    let mut header: Vec<String> = std::iter::once("threads".to_string())
        .chain(ids.iter().map(|s| s.to_string()))
        .collect();
    if pair {
        header.push("qrwlock vs qspinlock".into());
    }
    let find = |id: &str, t: usize| file.results.iter().find(|r| r.id == id && r.threads == t);
    let body: Vec<Vec<String>> = plan
        .threads
        .iter()
        .map(|&t| {
            let mut row: Vec<String> = std::iter::once(t.to_string())
                .chain(ids.iter().map(|id| find(id, t).map_or("-".into(), mean_sd)))
                .collect();
            if pair {
                row.push(match (find("qspinlock", t), find("qrwlock", t)) {
                    (Some(s), Some(r)) if s.kops_mean > 0.0 => {
                        let pct = 100.0 * (r.kops_mean / s.kops_mean - 1.0);
                        if pct.abs() < 1000.0 {
                            format!("{pct:+.1}%")
                        } else {
                            format!("×{:.0}", r.kops_mean / s.kops_mean)
                        }
                    }
                    _ => "-".into(),
                });
            }
            row
        })
        .collect();
    out += &super::report::table(&header, &body);
    out += &super::report::cpu_tables(&file.results);
    out += &super::report::event_tables(&file.results);

    let _ = writeln!(
        out,
        "\nlockstat, lockmeter layout: one tracked run per lock at {lm_threads} threads, {:?} \
         (each lock is its own class; contention points are the suite's lookup and update lines)\n",
        plan.duration
    );
    out += &lm.lockmeter();
    if !untrackable.is_empty() {
        let _ = writeln!(
            out,
            "   not tracked (no TryBench impl): {}",
            untrackable.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::peers::StdMutex;

    #[test]
    fn radix_matches_a_btreemap() {
        let mut t = Radix::new();
        let mut m = std::collections::BTreeMap::new();
        let mut x = 12345u64;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x >> 3) % 4096 * 61 % KEY_LIMIT;
            if x.is_multiple_of(3) {
                assert_eq!(t.remove(k), m.remove(&k));
            } else {
                assert_eq!(t.insert(k, x), m.insert(k, x));
            }
            assert_eq!(t.get(k), m.get(&k).copied());
        }
        assert_eq!(t.len(), m.len());
        for (&k, &v) in &m {
            assert_eq!(t.get(k), Some(v));
        }
        for k in m.keys().copied().collect::<Vec<_>>() {
            t.remove(k);
        }
        assert!(
            t.is_empty() && t.top.iter().all(|m| m.is_none()),
            "empty nodes freed"
        );
    }

    #[test]
    fn run_checks_and_counts() {
        let w = TreeWork {
            threads: 3,
            write_pct: 50,
            outside_ns: 0,
            warmup: Duration::from_millis(5),
            duration: Duration::from_millis(40),
        };
        let o = run::<StdMutex>(&w).unwrap();
        assert_eq!(o.per_thread.len(), 3);
        assert!(o.total_ops() > 0);
    }

    #[test]
    fn lockmeter_thread_choice() {
        assert_eq!(lockmeter_threads(&[1, 2, 4, 8, 16], 2), 4);
        assert_eq!(lockmeter_threads(&[1, 2, 4, 8, 16], 64), 16);
        assert_eq!(lockmeter_threads(&[16], 2), 16);
    }
}
