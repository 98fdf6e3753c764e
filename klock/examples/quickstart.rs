//! The example of the README.
//!
//! `cargo run --release --example quickstart`

use klock::{Mutex, RwSem};
use std::sync::Arc;
use std::thread;

fn main() {
    // A mutex whose waiters spin only while the owner is running, then sleep.
    let hits = Arc::new(Mutex::new(0u64));
    // A read-write semaphore: readers share; a writer can downgrade.
    let config = Arc::new(RwSem::new(String::from("v1")));

    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (hits, config) = (Arc::clone(&hits), Arc::clone(&config));
            thread::spawn(move || {
                for _ in 0..1000 {
                    assert!(config.read().starts_with('v'));
                    *hits.lock() += 1;
                }
            })
        })
        .collect();
    *config.write() = String::from("v2");
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(*hits.lock(), 4000);
    println!("{} hits, config {}", hits.lock(), config.read());
}
