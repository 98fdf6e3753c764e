//! A small thread pool: a job queue behind a `klock::Mutex`, with a
//! `klock::Condvar` to wake idle workers.
//!
//! `cargo run --release --example thread_pool`

use klock::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

type Job = Box<dyn FnOnce() + Send>;

struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

struct Pool {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    workers: Vec<thread::JoinHandle<()>>,
}

impl Pool {
    fn new(threads: usize) -> Self {
        let queue = Arc::new((
            Mutex::new(Queue {
                jobs: VecDeque::new(),
                closed: false,
            }),
            Condvar::new(),
        ));
        let workers = (0..threads)
            .map(|_| {
                let queue = Arc::clone(&queue);
                thread::spawn(move || loop {
                    let job = {
                        let (lock, cv) = &*queue;
                        let mut q = lock.lock();
                        // Sleep until there is work or the pool closes.
                        cv.wait_while(&mut q, |q| q.jobs.is_empty() && !q.closed);
                        match q.jobs.pop_front() {
                            Some(job) => job,
                            None => return, // closed and drained
                        }
                    }; // the lock is released before the job runs
                    job();
                })
            })
            .collect();
        Pool { queue, workers }
    }

    fn execute(&self, job: impl FnOnce() + Send + 'static) {
        let (lock, cv) = &*self.queue;
        lock.lock().jobs.push_back(Box::new(job));
        cv.notify_one();
    }

    fn join(self) {
        let (lock, cv) = &*self.queue;
        lock.lock().closed = true;
        cv.notify_all();
        for w in self.workers {
            w.join().unwrap();
        }
    }
}

fn main() {
    let pool = Pool::new(4);
    let sum = Arc::new(AtomicU64::new(0));
    for i in 1..=10_000u64 {
        let sum = Arc::clone(&sum);
        pool.execute(move || {
            sum.fetch_add(i, Ordering::Relaxed);
        });
    }
    pool.join();
    let total = sum.load(Ordering::Relaxed);
    assert_eq!(total, 10_000 * 10_001 / 2);
    println!("thread_pool: 10000 jobs on 4 workers, sum {total}");
}
