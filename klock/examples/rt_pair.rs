//! A real-time pair sharing a `klock::RtMutex`: a high-priority thread
//! that needs the lock briefly and often, and a low-priority thread that
//! holds it for longer. With priority inheritance, the kernel runs the
//! low-priority holder at the high priority while the high-priority thread
//! waits, so a medium-priority thread could not delay it.
//!
//! Real-time scheduling (`SCHED_FIFO`) needs `CAP_SYS_NICE` (root, or the
//! capability); without it the example says so and runs the same code at
//! normal priority, where the lock works the same but nothing is boosted.
//!
//! `cargo run --release --example rt_pair`

use klock::rtmutex::RtMutexExt;
use klock::{rt, RtMutex};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const HIGH: i32 = 20;
const LOW: i32 = 10;

/// Run the calling thread at `priority` if allowed; whether it did.
fn try_fifo(priority: i32) -> bool {
    rt::set_fifo(priority).is_ok()
}

fn main() {
    let realtime = rt::fifo_available();
    if !realtime {
        // Unprivileged: say why, and run the same code at normal priority.
        let why = rt::rt_unavailable_reason(0).unwrap_or_else(|| "SCHED_FIFO refused".into());
        println!("rt_pair: {why}; running at normal priority");
    }
    let log = Arc::new(RtMutex::new(Vec::<u32>::new()));

    let low = {
        let log = Arc::clone(&log);
        thread::spawn(move || {
            let rt = realtime && try_fifo(LOW);
            for i in 0..50 {
                let mut g = log.lock();
                // A longer critical section: ~50 µs of work under the lock.
                let t = Instant::now();
                while t.elapsed() < Duration::from_micros(50) {
                    std::hint::spin_loop();
                }
                g.push(i);
                drop(g);
                thread::sleep(Duration::from_micros(100));
            }
            if rt {
                let _ = rt::set_normal();
            }
        })
    };

    let high = {
        let log = Arc::clone(&log);
        thread::spawn(move || {
            let rt = realtime && try_fifo(HIGH);
            let mut worst = Duration::ZERO;
            for i in 0..200 {
                let t = Instant::now();
                // `lock_checked` returns a deadlock as an error instead of panicking.
                let mut g = log.lock_checked().expect("no deadlock");
                worst = worst.max(t.elapsed());
                g.push(1_000 + i);
                drop(g);
                thread::sleep(Duration::from_micros(200));
            }
            if rt {
                let _ = rt::set_normal();
            }
            worst
        })
    };

    low.join().unwrap();
    let worst = high.join().unwrap();
    let n = log.lock().len();
    assert_eq!(n, 250);
    println!(
        "rt_pair: {n} entries, {} priority; worst wait of the high-priority thread {worst:?}",
        if realtime { "real-time" } else { "normal" }
    );
}
