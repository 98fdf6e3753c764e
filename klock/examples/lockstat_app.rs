//! lockstat on an application's own locks: wrap the locks you want to
//! watch in `lockstat::Tracked`, run, and print which lock was contended,
//! for how long, and where the waiting happened.
//!
//! `cargo run --release --example lockstat_app`
//! (or set `KLOCK_LOCKSTAT=1` on any program to get the report at exit.)

use klock::lockstat::{self, Tracked, TrackedMutex, TrackedRwLock};
use klock::{RawMutex, RawRwSem};
use std::collections::HashMap;
use std::sync::Arc;
use std::thread;

struct App {
    /// Hot: every request appends to it.
    journal: TrackedMutex<RawMutex, Vec<u64>>,
    /// Read-mostly: looked up by every request, written rarely.
    accounts: TrackedRwLock<RawRwSem, HashMap<u64, u64>>,
}

fn main() {
    let app = Arc::new(App {
        journal: TrackedMutex::from_raw(Tracked::named("journal"), Vec::new()),
        accounts: TrackedRwLock::from_raw(Tracked::named_rw("accounts"), HashMap::new()),
    });
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            let app = Arc::clone(&app);
            thread::spawn(move || {
                for i in 0..20_000u64 {
                    let id = (i + t) % 128;
                    let known = app.accounts.read().get(&id).copied();
                    if known.is_none() || i % 1_000 == 0 {
                        app.accounts.write().insert(id, i);
                    }
                    app.journal.lock().push(id);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(app.journal.lock().len(), 80_000);

    let report = lockstat::snapshot();
    let journal = report.class("journal").expect("journal was tracked");
    // The mutex was taken once per request plus the check above.
    assert_eq!(journal.write.acquisitions, 80_001);
    println!(
        "journal: {} acquisitions, {} contended, mean wait {:.0} ns, mean hold {:.0} ns",
        journal.write.acquisitions,
        journal.write.contentions,
        journal.write.wait_avg_ns(),
        journal.write.hold_avg_ns()
    );
    // The kernel's /proc/lock_stat layout, every tracked class.
    print!("{}", report.proc_lock_stat());
}
