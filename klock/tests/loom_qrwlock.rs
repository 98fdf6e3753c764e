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

#[path = "support/loom.rs"]
mod support;

use klock::qrwlock::broken::{IgnoreWaiting, NoDrain, NoWake, QuickTrustsPoll};
use klock::qrwlock::{Probe, RawQRwLock, WAITING};
use loom::sync::Arc;
use std::any::type_name;
use std::sync::atomic::Ordering::Relaxed;
use support::{bump, check, expect_model_failure, play, probe_coverage, read, spawn_part, Data};

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

/// `ModelRw` for a lock type; `|l| inner` names the `RawQRwLock` within
/// the lock `l`.
macro_rules! model_rw {
    ($t:ty, |$l:ident| $inner:expr) => {
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
                let $l = self;
                $inner
            }
        }
    };
}
model_rw!(RawQRwLock, |l| l);
model_rw!(NoDrain, |l| &l.0);
model_rw!(IgnoreWaiting, |l| &l.0);
model_rw!(NoWake, |l| &l.0);
model_rw!(QuickTrustsPoll, |l| &l.0);

probe_coverage!(Probe {
    reader_queued,
    writer_queued,
    writer_cas_retry,
    sleeps,
    wakes,
    quick_spins,
});

/// [`support::builder`] with a larger branch limit.
fn builder() -> loom::model::Builder {
    let mut b = support::builder();
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

fn run_part<L: ModelRw>(lock: &L, data: &Data, p: Part) {
    match p {
        Part::W => {
            lock.write();
            bump(data);
            unsafe { lock.write_unlock() };
        }
        Part::R => {
            lock.read();
            let v = read(data);
            assert!(v <= 2);
            unsafe { lock.read_unlock() };
        }
    }
}

/// Main plays `parts[0]`, one spawned thread each of the others. Checks
/// exclusion (loom's UnsafeCell) and the final count. The quick spin is
/// off: these models are about the queue, the drain and the fast paths
/// (with it on, each poll's relax, a loom yield, lets the holder release
/// first, and the lockers rarely queue).
fn exclusion_model<L: ModelRw>(parts: &[Part]) -> std::sync::Arc<Coverage> {
    exclusion_model_with::<L>(parts, None, false)
}

/// [`exclusion_model`] with the quick spin on.
fn exclusion_model_quick<L: ModelRw>(parts: &[Part]) -> std::sync::Arc<Coverage> {
    exclusion_model_with::<L>(parts, None, true)
}

/// [`exclusion_model`] with a preemption bound of its own (`None`: the
/// environment's, default 2), the quick spin on or off.
fn exclusion_model_with<L: ModelRw>(
    parts: &[Part],
    preemptions: Option<usize>,
    quick_spin: bool,
) -> std::sync::Arc<Coverage> {
    let parts = parts.to_vec();
    let mut b = builder();
    if let Some(n) = preemptions {
        b.preemption_bound = Some(n);
    }
    check(b, type_name::<L>(), move |c: &Coverage| {
        let lock = Arc::new(L::create());
        if !quick_spin {
            lock.inner().set_loom_no_quick_spin();
        }
        let data = Arc::new(Data::new(0));
        play(&lock, &data, &parts, run_part);
        let writes = parts.iter().filter(|p| matches!(p, Part::W)).count() as u32;
        assert_eq!(read(&data), writes);
        assert_eq!(lock.inner().word_newest(), 0, "lock left dirty");
        c.add(lock.inner().probe());
    })
}

/// Scaffolding: wait until the word satisfies `pred`
/// ([`support::wait_word`]).
fn wait_word(lock: &RawQRwLock, pred: impl Fn(u32) -> bool) {
    support::wait_word(pred, || lock.word(), || lock.word_newest());
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
    let cov =
        exclusion_model_with::<RawQRwLock>(&[Part::W, Part::R, Part::W, Part::R], Some(1), false);
    assert!(cov.reader_queued.load(Relaxed) > 0);
    assert!(cov.writer_queued.load(Relaxed) > 0);
}

/// A reader between two writers: the quick spin takes the lock between
/// them (and must not take it beside the second).
#[test]
fn writer_reader_writer_with_quick_spins() {
    let cov = exclusion_model_quick::<RawQRwLock>(&[Part::W, Part::R, Part::W]);
    assert!(cov.quick_spins.load(Relaxed) > 0, "no quick spin won");
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
    let label = format!("{} waiting-writer", type_name::<L>());
    check(builder(), &label, |c: &Coverage| {
        let lock = Arc::new(L::create());
        let data = Arc::new(Data::new(0));
        lock.read(); // R1
        let w = spawn_part(&lock, &data, Part::W, run_part);
        wait_word(lock.inner(), |c| c & WAITING != 0);
        let r2 = {
            let (lock, data) = (lock.clone(), data.clone());
            loom::thread::spawn(move || {
                lock.read();
                let v = read(&data);
                unsafe { lock.read_unlock() };
                assert_eq!(v, 1, "a new reader overtook the waiting writer");
            })
        };
        unsafe { lock.read_unlock() }; // R1 leaves
        w.join().unwrap();
        r2.join().unwrap();
        c.add(lock.inner().probe());
    })
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
    let msg = expect_model_failure("loom caught the no-drain writer", || {
        exclusion_model::<NoDrain>(&[Part::W, Part::R]);
    });
    assert!(
        msg.contains("Causality violation") || msg.contains("assertion"),
        "failed for another reason: {msg}"
    );
}

/// A quick spin that keeps its reader probe unchecked lets a reader in
/// beside a writer that took the lock after the poll (here the second
/// writer, right after the first one's unlock). The identical model
/// passes on the correct lock (`writer_reader_writer_with_quick_spins`).
#[test]
fn broken_quick_trusts_poll_is_caught() {
    let msg = expect_model_failure("loom caught the reader trusting its poll", || {
        exclusion_model_quick::<QuickTrustsPoll>(&[Part::W, Part::R, Part::W]);
    });
    assert!(
        msg.contains("Causality violation") || msg.contains("assertion"),
        "failed for another reason: {msg}"
    );
}

/// Readers that ignore WAITING overtake the queued writer: R2 reads the old
/// value. The identical model passes on the correct lock.
#[test]
fn broken_ignore_waiting_is_caught() {
    let msg = expect_model_failure("loom caught readers overtaking a waiting writer", || {
        waiting_writer_model::<IgnoreWaiting>();
    });
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
    check(builder(), type_name::<L>(), move |c: &Coverage| {
        let lock = Arc::new(L::create());
        let data = Arc::new(Data::new(0));
        if main_writes {
            lock.write();
        } else {
            lock.read();
        }
        let part = if main_writes { Part::R } else { Part::W };
        let other = spawn_part(&lock, &data, part, run_part);
        while lock.inner().probe().sleeps.load(Relaxed) == 0 {
            loom::thread::yield_now();
        }
        if main_writes {
            bump(&data);
            unsafe { lock.write_unlock() };
        } else {
            unsafe { lock.read_unlock() };
        }
        other.join().unwrap();
        assert_eq!(lock.inner().word_newest(), 0);
        c.add(lock.inner().probe());
    })
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
    expect_model_failure("no wake (reader sleeps)", || {
        sleeper_model::<NoWake>(true);
    });
    expect_model_failure("no wake (writer sleeps)", || {
        sleeper_model::<NoWake>(false);
    });
}
