//! Loom model of the optimistic spin queue: mutual exclusion among OSQ
//! heads, and the three-step unqueue racing with the predecessor's
//! hand-over and with a successor linking in behind the quitter.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p klock --release --test loom_osq
//! ```
//!
//! A spinner that never gives up must eventually become head: if an
//! unqueue broke the chain, it would spin forever and loom would fail the
//! model (branch limit). The data behind the OSQ is a loom `UnsafeCell`,
//! so two heads at once are a reported data race.
#![cfg(loom)]

#[path = "support/loom.rs"]
mod support;

use klock::osq::Osq;
use loom::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use support::{builder, bump, check, join_all, read, spawn_parts, Data};

/// Outcomes over all executions of one model.
#[derive(Debug, Default)]
struct Coverage {
    executions: AtomicU32,
    /// A quitter gave up (unqueued).
    gave_up: AtomicU32,
    /// A quitter became head after all.
    quitter_got_it: AtomicU32,
}

/// Lock the OSQ, giving up after `patience` checks (`None`: never); as
/// head, bump the counter and unlock. Returns whether we were head.
fn attempt(osq: &Osq, data: &Data, patience: Option<u32>) -> bool {
    let mut n = 0;
    let head = osq.lock(|| {
        n += 1;
        patience.is_some_and(|p| n > p)
    });
    if head {
        bump(data);
        osq.unlock();
    }
    head
}

/// The main thread takes the OSQ, spawns one thread per entry of
/// `patience`, releases it, then (if `relock`) takes it again without
/// giving up. Every attempt that reported success is counted exactly once
/// and the queue ends empty.
fn model(patience: &'static [Option<u32>], relock: bool) -> std::sync::Arc<Coverage> {
    check(builder(), "", move |c: &Coverage| {
        let osq = Arc::new(Osq::new());
        let data = Arc::new(Data::new(0));
        assert!(attempt_hold(&osq));
        let hs = spawn_parts(&osq, &data, patience, |osq, data, p| {
            (p, attempt(osq, data, p))
        });
        // Release the head we hold (it may race with quitters and links).
        bump(&data);
        osq.unlock();
        let mut expect = 1;
        if relock {
            assert!(attempt(&osq, &data, None));
            expect += 1;
        }
        for (p, head) in join_all(hs) {
            if head {
                expect += 1;
                if p.is_some() {
                    c.quitter_got_it.fetch_add(1, Relaxed);
                }
            } else {
                assert!(p.is_some(), "a thread that never gives up failed");
                c.gave_up.fetch_add(1, Relaxed);
            }
        }
        assert_eq!(read(&data), expect);
        assert!(!osq.is_locked(), "queue not empty at the end");
        c.executions.fetch_add(1, Relaxed);
    })
}

/// Take the OSQ (it is free at the start of each model).
fn attempt_hold(osq: &Osq) -> bool {
    osq.lock(|| panic!("the OSQ is free, nobody should spin"))
}

/// A spinner gives up while its predecessor (the head) hands over.
#[test]
fn unqueue_races_handover() {
    let cov = model(&[Some(1)], false);
    assert!(cov.gave_up.load(Relaxed) > 0);
    assert!(cov.quitter_got_it.load(Relaxed) > 0);
}

/// A spinner gives up while a successor that never gives up links in
/// behind it; the successor must still become head.
#[test]
fn unqueue_races_successor() {
    let cov = model(&[Some(1), None], false);
    assert!(cov.gave_up.load(Relaxed) > 0);
}

/// Two spinners give up (one may be the other's predecessor), and the
/// queue still works for the head afterwards.
#[test]
fn two_quitters_then_relock() {
    let cov = model(&[Some(1), Some(2)], true);
    assert!(cov.gave_up.load(Relaxed) > 0);
}
