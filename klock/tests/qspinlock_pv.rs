//! The paravirt qspinlock (`klock::SpinLock`) under real threads: waiters
//! behind a long critical section sleep instead of spinning, and are woken
//! (by the unlock, or by the baton pass); many more threads than CPUs
//! neither starve nor lose an update. Every test runs on both words: the
//! default (`RawQSpinLock`: eight bytes on x86-64) and the kernel's four
//! bytes (`RawQSpinLock32`).
//!
//! Event counters are process-wide and tests run in parallel: event checks
//! compare before/after with `>`.
#![cfg(not(loom))]

use klock::events::{self, Event};
use klock::qspinlock::{LOCKED_MASK, LOCKED_PV, TAIL_MASK};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

macro_rules! suite {
    ($name:ident, $raw:ty) => {
        mod $name {
            use super::*;
            type Raw = $raw;
            type Spin<T> = lock_api::Mutex<Raw, T>;

        /// Make `lock` held by a slow-path owner (whose unlock looks for a
        /// sleeping head): this thread takes it, a helper queues behind it and gets
        /// it through the slow path once this thread lets go, and returns holding
        /// it. The caller then owns it (the guard is `Send`: any thread may unlock).
        fn lock_as_slow_owner(lock: &Raw) {
            std::thread::scope(|s| {
                lock.raw_lock();
                let helper = s.spawn(|| {
                    lock.raw_lock();
                    lock.word()
                });
                std::thread::sleep(Duration::from_millis(30));
                unsafe { lock.raw_unlock() };
                let word = helper.join().unwrap();
                assert_eq!(word & LOCKED_MASK, LOCKED_PV, "word {word:#x}");
            });
        }

        /// A thread that waits 300 ms behind a slow-path owner sleeps (on the lock
        /// word, as queue head) and uses little CPU; the unlock wakes it.
        #[test]
        fn head_sleeps_behind_a_long_holder_and_the_unlock_wakes_it() {
            let lock = Raw::new();
            lock_as_slow_owner(&lock); // the lock now belongs to this thread
            let before = events::read(Event::PvWaitHead) + events::read(Event::PvWaitNode);
            let kicks = events::read(Event::PvKickUnlock);
            let hold = Duration::from_millis(300);
            std::thread::scope(|s| {
                let w = s.spawn(|| {
                    let cpu0 = thread_cpu();
                    let t0 = Instant::now();
                    lock.raw_lock();
                    let waited = t0.elapsed();
                    let cpu = thread_cpu() - cpu0;
                    unsafe { lock.raw_unlock() };
                    (waited, cpu)
                });
                wait_until("the waiter to queue", || lock.word() & TAIL_MASK != 0);
                std::thread::sleep(hold);
                unsafe { lock.raw_unlock() };
                let (waited, cpu) = w.join().unwrap();
                eprintln!("waited {waited:?}, used {cpu:?} of CPU");
                assert!(waited >= hold / 2, "got a held lock after {waited:?}");
                // A spinner would have used the whole wait; a sleeper a fraction.
                assert!(
                    cpu < waited / 4,
                    "the waiter spun: {cpu:?} of CPU in {waited:?}"
                );
            });
            assert_eq!(lock.word(), 0);
            if events::enabled() {
                assert!(events::read(Event::PvWaitHead) + events::read(Event::PvWaitNode) > before);
                assert!(events::read(Event::PvKickUnlock) > kicks);
            }
        }

        /// Three waiters queue behind a long holder: the head sleeps on the lock
        /// word, the others on their nodes; each baton pass wakes the next; all
        /// get the lock and nobody spins through the wait.
        #[test]
        fn queued_waiters_sleep_and_are_woken_in_turn() {
            queued_waiters_woken_in_turn(false);
        }

        /// The same through the token pair that `lock_api` uses: each baton pass
        /// to a sleeping successor leaves its wake-up to the passer's unlock.
        #[test]
        fn lazy_baton_wakes_queued_waiters_in_turn() {
            queued_waiters_woken_in_turn(true);
        }

        fn queued_waiters_woken_in_turn(lazy: bool) {
            let lock = Raw::new();
            lock_as_slow_owner(&lock);
            let node_sleeps = events::read(Event::PvWaitNode);
            let baton_kicks = events::read(Event::PvKickWake);
            let total_cpu = AtomicU64::new(0);
            let got = AtomicU64::new(0);
            let hold = Duration::from_millis(300);
            std::thread::scope(|s| {
                for _ in 0..3 {
                    s.spawn(|| {
                        let cpu0 = thread_cpu();
                        let token = if lazy {
                            lock.raw_lock_token()
                        } else {
                            lock.raw_lock();
                            0
                        };
                        got.fetch_add(1, Relaxed);
                        std::thread::sleep(Duration::from_millis(5));
                        if lazy {
                            unsafe { lock.raw_unlock_token(token) };
                        } else {
                            unsafe { lock.raw_unlock() };
                        }
                        total_cpu.fetch_add((thread_cpu() - cpu0).as_micros() as u64, Relaxed);
                    });
                }
                std::thread::sleep(hold);
                assert_eq!(got.load(Relaxed), 0, "a waiter got a held lock");
                unsafe { lock.raw_unlock() };
            });
            assert_eq!(got.load(Relaxed), 3);
            let cpu = Duration::from_micros(total_cpu.load(Relaxed));
            eprintln!("3 waiters used {cpu:?} of CPU in a {hold:?} wait");
            assert!(cpu < hold / 2, "the waiters spun: {cpu:?}");
            assert_eq!(lock.word(), 0);
            if events::enabled() {
                assert!(events::read(Event::PvWaitNode) > node_sleeps);
                assert!(events::read(Event::PvKickWake) > baton_kicks);
            }
        }

        /// 16 threads on this machine's CPUs, each incrementing a plain counter
        /// under one SpinLock for 1 s: the count is exact, every thread got the
        /// lock many times, and the rate is that of a working lock (the native
        /// FIFO spinlock does a handful of operations per second here).
        #[test]
        fn sixteen_threads_oversubscribed_no_starvation() {
            let lock = Spin::new(0u64);
            let per_thread: Vec<AtomicU64> = (0..16).map(|_| AtomicU64::new(0)).collect();
            let deadline = Instant::now() + Duration::from_secs(1);
            std::thread::scope(|s| {
                for c in &per_thread {
                    let lock = &lock;
                    s.spawn(move || {
                        let mut own = 0;
                        while Instant::now() < deadline {
                            let mut g = lock.lock();
                            let v = *g;
                            std::hint::black_box(&mut *g);
                            *g = v + 1;
                            drop(g);
                            own += 1;
                        }
                        c.store(own, Relaxed);
                    });
                }
            });
            let counts: Vec<u64> = per_thread.iter().map(|c| c.load(Relaxed)).collect();
            let total: u64 = counts.iter().sum();
            eprintln!(
                "16 threads: {total} increments, per thread min {}",
                counts.iter().min().unwrap()
            );
            assert_eq!(lock.into_inner(), total);
            assert!(
                counts.iter().all(|&c| c > 0),
                "a thread starved: {counts:?}"
            );
            assert!(total > 100_000, "only {total} operations in 1 s");
        }

        /// The `lock_api` guard records how each acquisition took the lock (plain
        /// fast-path owner or paravirt slow-path owner) and the unlock trusts it
        /// instead of re-reading the word. Mix every way in: fast path, slow path
        /// (steal, pending, queue), `try_lock` of a free lock with and without a
        /// queue, with long holds so heads go to sleep: every sleeper must be
        /// woken (a wrong guard would clear a slow owner's byte with a plain store
        /// and strand the head: this test would hang) and the count is exact (the
        /// debug build also asserts a plain owner's byte on every plain unlock).
        #[test]
        fn guards_of_every_acquisition_path_unlock_correctly() {
            const THREADS: u64 = 8;
            const OPS: u64 = 3_000;
            // A stranded sleeper is a hang: run the threads detached and fail
            // after a deadline instead of waiting forever.
            let lock = std::sync::Arc::new(Spin::new(0u64));
            let (tx, rx) = std::sync::mpsc::channel();
            for t in 0..THREADS {
                let (lock, tx) = (lock.clone(), tx.clone());
                std::thread::spawn(move || {
                    for i in 0..OPS {
                        let mut g = if t % 2 == 0 {
                            lock.lock()
                        } else {
                            loop {
                                if let Some(g) = lock.try_lock() {
                                    break g;
                                }
                                std::hint::spin_loop();
                            }
                        };
                        *g += 1;
                        if i % 500 == 0 {
                            // Long enough for the head and queued waiters to
                            // spend their budgets and sleep.
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        drop(g);
                    }
                    tx.send(()).unwrap();
                });
            }
            for n in 0..THREADS {
                rx.recv_timeout(Duration::from_secs(60))
                    .unwrap_or_else(|_| {
                        panic!("{n} of {THREADS} threads finished in 60 s: a waiter was never woken")
                    });
            }
            assert_eq!(*lock.lock(), THREADS * OPS);
        }
        }
    };
}

suite!(default_word, klock::RawQSpinLock);
suite!(word32, klock::RawQSpinLock32);
