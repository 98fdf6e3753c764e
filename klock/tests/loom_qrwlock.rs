//! Loom model of the queued rwlock: readers and writers exclude each other
//! (through the fast paths, the `wait_lock` queue and the drain), a waiting
//! writer blocks new readers — and the same models fail on broken locks.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p klock --release --test loom_qrwlock
//! ```
//!
//! The protected data is a `loom::cell::UnsafeCell`: a writer's `with_mut`
//! concurrent with anyone else's access (no happens-before edge) fails the
//! model, as does a lost update in the final count.
#![cfg(loom)]

use klock::qrwlock::broken::{IgnoreWaiting, NoDrain, NoWake};
use klock::qrwlock::{Probe, RawQRwLock, WAITING};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

trait ModelRw: Send + Sync + 'static {
    fn create() -> Self;
    fn read(&self);
    /// # Safety
    /// Read-held by the caller.
    unsafe fn read_unlock(&self);
    fn write(&self);
    /// # Safety
    /// Write-held by the caller.
    unsafe fn write_unlock(&self);
    fn inner(&self) -> &RawQRwLock;
}

impl ModelRw for RawQRwLock {
    fn create() -> Self {
        Self::new()
    }
    fn read(&self) {
        self.raw_read_lock()
    }
    unsafe fn read_unlock(&self) {
        unsafe { self.raw_read_unlock() }
    }
    fn write(&self) {
        self.raw_write_lock()
    }
    unsafe fn write_unlock(&self) {
        unsafe { self.raw_write_unlock() }
    }
    fn inner(&self) -> &RawQRwLock {
        self
    }
}

macro_rules! model_for_broken {
    ($t:ident) => {
        impl ModelRw for $t {
            fn create() -> Self {
                Self::new()
            }
            fn read(&self) {
                self.raw_read_lock()
            }
            unsafe fn read_unlock(&self) {
                unsafe { self.raw_read_unlock() }
            }
            fn write(&self) {
                self.raw_write_lock()
            }
            unsafe fn write_unlock(&self) {
                unsafe { self.raw_write_unlock() }
            }
            fn inner(&self) -> &RawQRwLock {
                &self.0
            }
        }
    };
}
model_for_broken!(NoDrain);
model_for_broken!(IgnoreWaiting);
model_for_broken!(NoWake);

#[derive(Debug, Default)]
struct Coverage {
    executions: AtomicU32,
    reader_queued: AtomicU32,
    writer_queued: AtomicU32,
    writer_cas_retry: AtomicU32,
    sleeps: AtomicU32,
    wakes: AtomicU32,
}

impl Coverage {
    fn add(&self, p: &Probe) {
        self.executions.fetch_add(1, Relaxed);
        for (t, c) in [
            (&self.reader_queued, &p.reader_queued),
            (&self.writer_queued, &p.writer_queued),
            (&self.writer_cas_retry, &p.writer_cas_retry),
            (&self.sleeps, &p.sleeps),
            (&self.wakes, &p.wakes),
        ] {
            t.fetch_add(c.load(Relaxed), Relaxed);
        }
    }
}

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    // The paravirt waits (the wait_lock's and the word's) yield on every
    // spin iteration until their budgets run out: executions are long.
    b.max_branches = 20_000;
    b
}

#[derive(Clone, Copy, Debug)]
enum Part {
    /// Write lock, increment, unlock.
    W,
    /// Read lock, read, unlock.
    R,
}

fn run_part<L: ModelRw>(lock: &L, data: &UnsafeCell<u32>, p: Part) {
    match p {
        Part::W => {
            lock.write();
            let v = data.with(|p| unsafe { *p });
            data.with_mut(|p| unsafe { *p = v + 1 });
            unsafe { lock.write_unlock() };
        }
        Part::R => {
            lock.read();
            let v = data.with(|p| unsafe { *p });
            assert!(v <= 2);
            unsafe { lock.read_unlock() };
        }
    }
}

/// Main plays `parts[0]`, one spawned thread each of the others. Checks
/// exclusion (loom's UnsafeCell) and the final count.
fn exclusion_model<L: ModelRw>(parts: &[Part]) -> std::sync::Arc<Coverage> {
    exclusion_model_with::<L>(parts, None)
}

/// [`exclusion_model`] with a preemption bound of its own (`None`: the
/// environment's, default 2).
fn exclusion_model_with<L: ModelRw>(
    parts: &[Part],
    preemptions: Option<usize>,
) -> std::sync::Arc<Coverage> {
    let cov = std::sync::Arc::new(Coverage::default());
    let c = cov.clone();
    let parts = parts.to_vec();
    let mut b = builder();
    if let Some(n) = preemptions {
        b.preemption_bound = Some(n);
    }
    b.check(move || {
        let lock = Arc::new(L::create());
        let data = Arc::new(UnsafeCell::new(0u32));
        let hs: Vec<_> = parts[1..]
            .iter()
            .map(|&p| {
                let (lock, data) = (lock.clone(), data.clone());
                loom::thread::spawn(move || run_part(&*lock, &data, p))
            })
            .collect();
        run_part(&*lock, &data, parts[0]);
        for h in hs {
            h.join().unwrap();
        }
        let writes = parts.iter().filter(|p| matches!(p, Part::W)).count() as u32;
        assert_eq!(data.with(|p| unsafe { *p }), writes);
        assert_eq!(lock.inner().word_newest(), 0, "lock left dirty");
        c.add(lock.inner().probe());
    });
    eprintln!("{} coverage: {cov:?}", std::any::type_name::<L>());
    cov
}

fn expect_model_failure(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let err = std::panic::catch_unwind(f).expect_err("loom should have found the bug");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Scaffolding: wait (yielding) until the word satisfies `pred`; prunes the
/// execution's alternatives after the first re-read (see loom_qspinlock.rs).
fn wait_word(lock: &RawQRwLock, pred: impl Fn(u32) -> bool) {
    let mut w = lock.word();
    let mut rereads = 0;
    while !pred(w) {
        loom::thread::yield_now();
        rereads += 1;
        w = if rereads <= 1 {
            lock.word()
        } else {
            if rereads == 2 {
                loom::skip_branch();
            }
            lock.word_newest()
        };
    }
}

// --- the correct lock ------------------------------------------------------

#[test]
fn writer_and_reader_exclude() {
    let cov = exclusion_model::<RawQRwLock>(&[Part::W, Part::R]);
    assert!(cov.reader_queued.load(Relaxed) > 0, "reader never queued");
    assert!(cov.writer_queued.load(Relaxed) > 0, "writer never queued");
}

#[test]
fn two_writers_exclude() {
    let cov = exclusion_model::<RawQRwLock>(&[Part::W, Part::W]);
    assert!(cov.writer_queued.load(Relaxed) > 0);
}

/// A writer between two readers: the drain, the WAITING bit turning a
/// reader away, and a reader's transient bias failing the writer's CAS.
#[test]
fn writer_and_two_readers() {
    let cov = exclusion_model::<RawQRwLock>(&[Part::R, Part::W, Part::R]);
    assert!(cov.reader_queued.load(Relaxed) > 0);
    assert!(cov.writer_queued.load(Relaxed) > 0);
    assert!(
        cov.writer_cas_retry.load(Relaxed) > 0,
        "a transient reader bias never failed the writer's CAS"
    );
}

/// Four threads, two of each: queues of mixed lockers on `wait_lock`.
/// One preemption: with the paravirt waits (every spin iteration yields
/// until its budget runs out) two preemptions over four threads do not
/// finish in minutes; the three-thread models above keep two.
#[test]
fn two_writers_two_readers() {
    let cov = exclusion_model_with::<RawQRwLock>(&[Part::W, Part::R, Part::W, Part::R], Some(1));
    assert!(cov.reader_queued.load(Relaxed) > 0);
    assert!(cov.writer_queued.load(Relaxed) > 0);
}

/// Two writers and a reader: contended lockers queue on `wait_lock`.
#[test]
fn two_writers_and_reader() {
    let cov = exclusion_model::<RawQRwLock>(&[Part::W, Part::W, Part::R]);
    assert!(cov.reader_queued.load(Relaxed) > 0);
}

/// Writer-waiting blocks new readers, staged:
/// * main takes a read lock (R1);
/// * W asks for the write lock, queues and sets WAITING (R1 is inside);
/// * once WAITING is visible, R2 arrives and asks for a read lock;
/// * main releases R1.
///
/// R2 must get in only after W has been and gone: it must read W's write.
/// (Without the WAITING bit, R2 would share the lock with R1 before W.)
fn waiting_writer_model<L: ModelRw>() -> std::sync::Arc<Coverage> {
    let cov = std::sync::Arc::new(Coverage::default());
    let c = cov.clone();
    builder().check(move || {
        let lock = Arc::new(L::create());
        let data = Arc::new(UnsafeCell::new(0u32));
        lock.read(); // R1
        let w = {
            let (lock, data) = (lock.clone(), data.clone());
            loom::thread::spawn(move || run_part(&*lock, &data, Part::W))
        };
        wait_word(lock.inner(), |c| c & WAITING != 0);
        let r2 = {
            let (lock, data) = (lock.clone(), data.clone());
            loom::thread::spawn(move || {
                lock.read();
                let v = data.with(|p| unsafe { *p });
                unsafe { lock.read_unlock() };
                assert_eq!(v, 1, "a new reader overtook the waiting writer");
            })
        };
        unsafe { lock.read_unlock() }; // R1 leaves
        w.join().unwrap();
        r2.join().unwrap();
        c.add(lock.inner().probe());
    });
    eprintln!(
        "{} waiting-writer coverage: {cov:?}",
        std::any::type_name::<L>()
    );
    cov
}

#[test]
fn waiting_writer_blocks_new_readers() {
    let cov = waiting_writer_model::<RawQRwLock>();
    assert!(cov.reader_queued.load(Relaxed) > 0, "R2 never queued");
}

// --- the models can fail ---------------------------------------------------

/// A writer that does not wait for readers to drain enters beside a reader:
/// loom reports the concurrent accesses to the cell. The identical model
/// passes on the correct lock (`writer_and_reader_exclude`).
#[test]
fn broken_no_drain_is_caught() {
    let msg = expect_model_failure(|| {
        exclusion_model::<NoDrain>(&[Part::W, Part::R]);
    });
    eprintln!("loom caught the no-drain writer: {msg}");
    assert!(
        msg.contains("Causality violation") || msg.contains("assertion"),
        "failed for another reason: {msg}"
    );
}

/// Readers that ignore WAITING overtake the queued writer: R2 reads the old
/// value. The identical model passes on the correct lock.
#[test]
fn broken_ignore_waiting_is_caught() {
    let msg = expect_model_failure(|| {
        waiting_writer_model::<IgnoreWaiting>();
    });
    eprintln!("loom caught readers overtaking a waiting writer: {msg}");
    assert!(
        msg.contains("overtook the waiting writer"),
        "failed for another reason: {msg}"
    );
}

// --- sleeping instead of spinning ------------------------------------------

/// The main thread holds the lock (`write`: exclusively, else shared) until
/// the other thread, wanting it the other way, has gone to sleep on the
/// word; then it unlocks, and the sleeper must be woken (a lost wake-up
/// leaves it asleep forever, which loom reports).
fn sleeper_model<L: ModelRw>(main_writes: bool) -> std::sync::Arc<Coverage> {
    let cov = std::sync::Arc::new(Coverage::default());
    let c = cov.clone();
    builder().check(move || {
        let lock = Arc::new(L::create());
        let data = Arc::new(UnsafeCell::new(0u32));
        if main_writes {
            lock.write();
        } else {
            lock.read();
        }
        let other = {
            let (lock, data) = (lock.clone(), data.clone());
            let part = if main_writes { Part::R } else { Part::W };
            loom::thread::spawn(move || run_part(&*lock, &data, part))
        };
        while lock.inner().probe().sleeps.load(Relaxed) == 0 {
            loom::thread::yield_now();
        }
        if main_writes {
            let v = data.with(|p| unsafe { *p });
            data.with_mut(|p| unsafe { *p = v + 1 });
            unsafe { lock.write_unlock() };
        } else {
            unsafe { lock.read_unlock() };
        }
        other.join().unwrap();
        assert_eq!(lock.inner().word_newest(), 0);
        c.add(lock.inner().probe());
    });
    eprintln!("{} coverage: {cov:?}", std::any::type_name::<L>());
    cov
}

/// A reader behind a writer sleeps; the write unlock wakes it.
#[test]
fn reader_behind_a_writer_sleeps_and_is_woken() {
    let cov = sleeper_model::<RawQRwLock>(true);
    assert!(cov.wakes.load(Relaxed) > 0, "{cov:?}");
}

/// A writer waiting for a reader to leave sleeps; the read unlock wakes it.
#[test]
fn writer_behind_a_reader_sleeps_and_is_woken() {
    let cov = sleeper_model::<RawQRwLock>(false);
    assert!(cov.wakes.load(Relaxed) > 0, "{cov:?}");
}

/// Releases that never wake the sleeper: the model catches both lost
/// wake-ups.
#[test]
fn broken_no_wake_is_caught() {
    let msg = expect_model_failure(|| {
        sleeper_model::<NoWake>(true);
    });
    eprintln!("no wake (reader sleeps): {msg}");
    let msg = expect_model_failure(|| {
        sleeper_model::<NoWake>(false);
    });
    eprintln!("no wake (writer sleeps): {msg}");
}
