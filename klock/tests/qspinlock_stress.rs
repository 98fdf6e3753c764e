//! qspinlock under real threads: exact counts under contention (the
//! default, paravirt `SpinLock`), and — on the native slow path, whose
//! states these tests stage deterministically — the no-node fallback,
//! nested MCS nodes (including from a signal handler) and FIFO queue order.
//! The paravirt path's own tests are in `qspinlock_pv.rs`.
//!
//! Event counters are process-wide and this file's tests run in parallel,
//! so event checks compare before/after with `>=`, and nothing here resets
//! them.
#![cfg(not(loom))]

use klock::events::{self, Event};
use klock::qspinlock::{decode_tail, LOCKED, PENDING, TAIL_MASK};
// The staged tests below need the native protocol: a pending waiter that
// waits for the owner however long it holds, and queued waiters that spin.
use klock::qspinlock::RawQSpinLockNative as RawQSpinLock;
use klock::SpinLock;
use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst,
};
use std::time::{Duration, Instant};

/// Spin (yielding) until `f()`, failing the test after 20 s.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::yield_now();
    }
}

/// Pretend this thread already uses `depth` MCS nodes (as if it had been
/// interrupted while queued `depth` times).
fn set_mcs_depth(depth: u32) {
    klock::thread::current()
        .unwrap()
        .mcs_depth
        .store(depth, Relaxed);
}

fn mcs_depth() -> u32 {
    klock::thread::current().unwrap().mcs_depth.load(Relaxed)
}

/// `threads` threads add 1 to a plain (non-atomic) counter under one
/// SpinLock for `run` time, each also counting its own increments; the first
/// `no_node_threads` of them have no free MCS node. Returns (shared counter,
/// sum of own counts), which must be equal.
///
/// Time-bounded, not iteration-bounded: with more spinning threads than
/// CPUs, a FIFO spinlock can fall into a convoy where every hand-over waits
/// for a preempted waiter's next time slice (milliseconds each), so a fixed
/// iteration count would make the test's run time a matter of luck.
fn hammer(threads: usize, run: Duration, no_node_threads: usize) -> (u64, u64) {
    let lock = SpinLock::new(0u64);
    let deadline = Instant::now() + run;
    let own_total = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (lock, own_total) = (&lock, &own_total);
            s.spawn(move || {
                if t < no_node_threads {
                    set_mcs_depth(klock::thread::MCS_NODES as u32);
                }
                let mut own = 0u64;
                loop {
                    let mut g = lock.lock();
                    // Read, pause, write: a second thread inside would lose
                    // an update.
                    let v = *g;
                    std::hint::black_box(&mut *g);
                    for _ in 0..own % 8 {
                        std::hint::spin_loop();
                    }
                    *g = v + 1;
                    drop(g);
                    own += 1;
                    if Instant::now() >= deadline {
                        break;
                    }
                }
                own_total.fetch_add(own, Relaxed);
                if t < no_node_threads {
                    set_mcs_depth(0);
                }
            });
        }
    });
    assert!(!lock.is_locked());
    (lock.into_inner(), own_total.into_inner())
}

#[test]
fn eight_threads_exact_count() {
    let before = events::read(Event::LockSlowpath) + events::read(Event::LockPending);
    let (shared, own) = hammer(8, Duration::from_millis(500), 0);
    eprintln!("8 threads: {shared} increments");
    assert_eq!(shared, own);
    assert!(shared >= 8);
    if events::enabled() {
        let after = events::read(Event::LockSlowpath) + events::read(Event::LockPending);
        assert!(
            after > before,
            "8 contending threads never left the fast path"
        );
    }
}

#[test]
fn two_threads_exact_count() {
    let (shared, own) = hammer(2, Duration::from_millis(300), 0);
    eprintln!("2 threads: {shared} increments");
    assert_eq!(shared, own);
}

#[test]
fn no_node_fallback_under_contention_exact_count() {
    let (shared, own) = hammer(8, Duration::from_millis(500), 3);
    eprintln!("8 threads, 3 without nodes: {shared} increments");
    assert_eq!(shared, own);
}

/// Owner + pending waiter on `lock`, set up deterministically: the calling
/// thread takes the lock, a scoped thread takes the pending bit; returns once
/// the word is (0,1,1). The caller unlocks when it wants the scenario to end.
fn owner_and_pending<'s, 'e>(s: &'s std::thread::Scope<'s, 'e>, lock: &'e RawQSpinLock) {
    lock.raw_lock(); // the calling thread owns it
    s.spawn(move || {
        lock.raw_lock(); // (0,0,1) -> (0,1,1): the pending path
        unsafe { lock.raw_unlock() };
    });
    wait_until("a pending waiter", || lock.word() & PENDING != 0);
}

#[test]
fn no_node_fallback_is_taken_and_counted() {
    let before = events::read(Event::LockNoNode);
    let lock = RawQSpinLock::new();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        owner_and_pending(s, &lock);
        s.spawn(|| {
            set_mcs_depth(klock::thread::MCS_NODES as u32);
            lock.raw_lock(); // (0,1,1): must queue, but has no node
            done.store(true, SeqCst);
            unsafe { lock.raw_unlock() };
            set_mcs_depth(0);
        });
        if events::enabled() {
            wait_until("lock_no_node", || events::read(Event::LockNoNode) > before);
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
        // It spins on trylock: it did not queue.
        assert_eq!(lock.word() & TAIL_MASK, 0);
        assert!(!done.load(SeqCst));
        unsafe { lock.raw_unlock() };
    });
    assert!(done.load(SeqCst));
    assert_eq!(lock.word(), 0);
}

/// With `level` nodes already in use (as if interrupted while queued that
/// many times), queueing uses node `level` and the tail says so.
#[test]
fn nested_levels_use_the_next_node() {
    for level in 1..klock::thread::MCS_NODES as u32 {
        let event = [
            Event::LockUseNode2,
            Event::LockUseNode3,
            Event::LockUseNode4,
        ][level as usize - 1];
        let before = events::read(event);
        let lock = RawQSpinLock::new();
        let me = AtomicU32::new(0);
        std::thread::scope(|s| {
            owner_and_pending(s, &lock);
            s.spawn(|| {
                me.store(klock::thread::current_index().unwrap(), SeqCst);
                set_mcs_depth(level);
                lock.raw_lock();
                assert_eq!(mcs_depth(), level, "node not given back");
                unsafe { lock.raw_unlock() };
                set_mcs_depth(0);
            });
            wait_until("the queued thread's tail", || lock.word() & TAIL_MASK != 0);
            let w = lock.word();
            assert_eq!(decode_tail(w), (me.load(SeqCst), level), "word {w:#x}");
            assert_eq!(w & !TAIL_MASK, PENDING | LOCKED);
            unsafe { lock.raw_unlock() };
        });
        assert_eq!(lock.word(), 0);
        if events::enabled() {
            assert!(events::read(event) > before, "{event:?} not counted");
        }
    }
}

/// Owner, pending waiter, then queued threads one at a time: they get the
/// lock in order — pending first, then the queue in FIFO order.
#[test]
fn queue_is_fifo() {
    const QUEUED: usize = 4;
    let lock = RawQSpinLock::new();
    let order = std::sync::Mutex::new(Vec::new());
    let pending_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        lock.raw_lock();
        s.spawn(|| {
            lock.raw_lock();
            order.lock().unwrap().push(usize::MAX);
            pending_done.store(true, SeqCst);
            unsafe { lock.raw_unlock() };
        });
        wait_until("a pending waiter", || lock.word() & PENDING != 0);
        let mut last_tail = 0;
        for q in 0..QUEUED {
            let (lock, order) = (&lock, &order);
            s.spawn(move || {
                lock.raw_lock();
                order.lock().unwrap().push(q);
                unsafe { lock.raw_unlock() };
            });
            wait_until("the next queued thread", || {
                let t = lock.word() & TAIL_MASK;
                t != 0 && t != last_tail
            });
            last_tail = lock.word() & TAIL_MASK;
        }
        unsafe { lock.raw_unlock() };
    });
    let order = order.into_inner().unwrap();
    assert_eq!(order, [usize::MAX, 0, 1, 2, 3]);
    assert!(pending_done.load(SeqCst));
    assert_eq!(lock.word(), 0);
}

// ---- A real nesting: a signal handler takes lock B while its thread is
// ---- queued (on node 0) on lock A.

static SIG_A: RawQSpinLock = RawQSpinLock::new();
static SIG_B: RawQSpinLock = RawQSpinLock::new();
/// Tail of B observed from inside the handler, before it got B.
static SIG_B_LEVEL_SEEN: AtomicU32 = AtomicU32::new(u32::MAX);
static SIG_HANDLED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn take_b(_: libc::c_int) {
    SIG_B.raw_lock(); // queues on MCS node 1: node 0 is queued on A
    SIG_B_LEVEL_SEEN.store(mcs_depth(), SeqCst);
    unsafe { SIG_B.raw_unlock() };
    SIG_HANDLED.fetch_add(1, SeqCst);
}

// libc: the handler is installed with sigaction and the signal sent to one
// thread with pthread_kill; rustix offers neither (it leaves signal
// handling to the C library).
#[test]
fn signal_handler_nests_on_node_1() {
    use std::os::unix::thread::JoinHandleExt;
    let before = events::read(Event::LockUseNode2);
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = take_b as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &sa, core::ptr::null_mut()),
            0
        );
    }
    let t_index = std::sync::Arc::new(AtomicU32::new(0));
    std::thread::scope(|s| {
        owner_and_pending(s, &SIG_A);
        let ti = t_index.clone();
        let t = std::thread::Builder::new()
            .spawn(move || {
                ti.store(klock::thread::current_index().unwrap(), SeqCst);
                SIG_A.raw_lock(); // queues on node 0
                unsafe { SIG_A.raw_unlock() };
                mcs_depth()
            })
            .unwrap();
        wait_until("T queued on A", || SIG_A.word() & TAIL_MASK != 0);
        let t_idx = t_index.load(SeqCst);
        assert_eq!(decode_tail(SIG_A.word()), (t_idx, 0));

        owner_and_pending(s, &SIG_B);
        assert_eq!(
            unsafe { libc::pthread_kill(t.as_pthread_t(), libc::SIGUSR1) },
            0
        );
        wait_until("the handler queued on B", || SIG_B.word() & TAIL_MASK != 0);
        assert_eq!(
            decode_tail(SIG_B.word()),
            (t_idx, 1),
            "handler must use node 1"
        );
        // A is untouched: T (node 0) is still its tail.
        assert_eq!(decode_tail(SIG_A.word()), (t_idx, 0));

        unsafe { SIG_B.raw_unlock() };
        wait_until("the handler done", || SIG_HANDLED.load(SeqCst) == 1);
        // Inside the handler, holding B, node 1 had been claimed and given
        // back, so the depth seen is node 0's claim only.
        assert_eq!(SIG_B_LEVEL_SEEN.load(SeqCst), 1);
        unsafe { SIG_A.raw_unlock() };
        assert_eq!(t.join().unwrap(), 0, "T's depth after all");
    });
    assert_eq!(SIG_A.word(), 0);
    assert_eq!(SIG_B.word(), 0);
    if events::enabled() {
        assert!(events::read(Event::LockUseNode2) > before);
    }
}
