//! A read-mostly cache behind a `klock::RwSem`: many readers look values
//! up in parallel; a miss takes the write lock to fill the entry, then
//! downgrades to a read lock without letting another writer in.
//!
//! `cargo run --release --example read_mostly_cache`

use klock::{RwSem, RwSemWriteGuard};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

struct Cache {
    map: RwSem<HashMap<u64, u64>>,
    misses: AtomicU64,
}

impl Cache {
    /// The value for `key`, computed on the first request.
    fn get(&self, key: u64) -> u64 {
        if let Some(&v) = self.map.read().get(&key) {
            return v; // the common case: shared, readers do not wait for each other
        }
        let mut w = self.map.write();
        // Another thread may have filled it while we waited for the write lock.
        let v = *w.entry(key).or_insert_with(|| {
            self.misses.fetch_add(1, Ordering::Relaxed);
            expensive(key)
        });
        // Keep reading under the lock, but let other readers in at once.
        let r = RwSemWriteGuard::downgrade(w);
        debug_assert_eq!(r[&key], v);
        v
    }
}

fn expensive(key: u64) -> u64 {
    (0..1_000).fold(key, |a, i| {
        a.wrapping_mul(6364136223846793005).wrapping_add(i)
    })
}

fn main() {
    let cache = Arc::new(Cache {
        map: RwSem::new(HashMap::new()),
        misses: AtomicU64::new(0),
    });
    let readers: Vec<_> = (0..4u64)
        .map(|t| {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                let mut acc = 0u64;
                for i in 0..50_000u64 {
                    // 64 distinct keys: after warm-up, nearly every lookup hits.
                    acc = acc.wrapping_add(cache.get((i * 7 + t) % 64));
                }
                acc
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    let misses = cache.misses.load(Ordering::Relaxed);
    assert_eq!(misses, 64, "each key is computed exactly once");
    println!("read_mostly_cache: 200000 lookups by 4 threads, {misses} misses");
}
