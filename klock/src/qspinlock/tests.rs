use super::*;
use lock_api::RawMutex;

/// The paravirt lock on word `W`.
type Pv<W> = RawQSpinLockWith<DEFAULT_PENDING_LOOPS, true, W>;

#[test]
fn four_bytes_or_eight() {
    assert_eq!(core::mem::size_of::<RawQSpinLock32>(), 4);
    assert_eq!(core::mem::size_of::<RawQSpinLockWith<0>>(), 4);
    assert_eq!(core::mem::size_of::<RawQSpinLockNative>(), 4);
    assert_eq!(core::mem::align_of::<RawQSpinLock32>(), 4);
    let default = if cfg!(target_arch = "x86_64") { 8 } else { 4 };
    assert_eq!(core::mem::size_of::<RawQSpinLock>(), default);
    assert_eq!(core::mem::align_of::<RawQSpinLock>(), default);
    assert_eq!(core::mem::size_of::<crate::SpinLock<()>>(), default);
}

#[test]
fn tail_round_trips() {
    for (i, l) in [(1, 0), (1, 3), (MAX_THREADS, 0), (MAX_THREADS, 3), (77, 2)] {
        let t = encode_tail(i, l);
        assert_ne!(t, 0);
        assert_eq!(t & LOCKED_PENDING_MASK, 0);
        assert_eq!(decode_tail(t), (i, l));
    }
    assert_eq!(
        PENDING_TO_LOCKED.wrapping_add(encode_tail(9, 1) | PENDING),
        encode_tail(9, 1) | LOCKED
    );
}

#[test]
fn lock_try_lock_unlock() {
    lock_try_lock_unlock_on::<AtomicU32>();
    lock_try_lock_unlock_on::<DefaultWord>();
}

fn lock_try_lock_unlock_on<W: LockWord>() {
    let l = Pv::<W>::INIT;
    assert!(!l.is_locked());
    let g = l.lock();
    assert!(l.is_locked());
    assert_eq!(l.word(), LOCKED);
    assert!(l.try_lock().is_none());
    unsafe { l.unlock(g) };
    assert!(!l.is_locked());
    assert_eq!(l.word(), 0);
    let g = l.try_lock().expect("free lock");
    assert!(l.is_locked());
    unsafe { l.unlock(g) };
    assert_eq!(l.word(), 0);
    assert!(format!("{l:?}").contains("locked: 0"));
}

#[test]
fn lock_fast_takes_only_what_the_fast_path_may() {
    lock_fast_takes_only_what_the_fast_path_may_on::<AtomicU32>();
    lock_fast_takes_only_what_the_fast_path_may_on::<DefaultWord>();
}

fn lock_fast_takes_only_what_the_fast_path_may_on<W: LockWord>() {
    let l = Pv::<W>::new();
    // Free: a plain owner, released by raw_unlock.
    assert_eq!(l.raw_lock_fast(), Ok(()));
    assert_eq!(l.word(), LOCKED);
    // Held: the word it found.
    assert_eq!(l.raw_lock_fast(), Err(LOCKED));
    unsafe { l.raw_unlock() };
    assert_eq!(l.word(), 0);
    // Past a queue whose head holds no pending bit: the paravirt steal.
    let tail = encode_tail(9, 0);
    l.word.store(tail, Relaxed);
    assert_eq!(l.raw_lock_fast(), Ok(()));
    assert_eq!(l.word(), tail | LOCKED);
    unsafe { l.raw_unlock() };
    assert_eq!(l.word(), tail);
    // A pending bit (or another mark in the pending byte) refuses it.
    for v in [tail | PENDING, 1 << 15] {
        l.word.store(v, Relaxed);
        assert_eq!(l.raw_lock_fast(), Err(v));
        assert_eq!(l.word(), v);
    }
    // The native lock takes only a free word.
    let n = RawQSpinLockWith::<{ DEFAULT_PENDING_LOOPS }, false>::new();
    n.word.store(tail, Relaxed);
    assert_eq!(n.raw_lock_fast(), Err(tail));
    n.word.store(0, Relaxed);
    assert_eq!(n.raw_lock_fast(), Ok(()));
    unsafe { n.raw_unlock() };
    assert_eq!(n.word(), 0);
}

#[test]
fn mutex_wrapper() {
    let m = crate::SpinLock::new(5u64);
    *m.lock() += 1;
    assert_eq!(*m.lock(), 6);
    assert!(m.try_lock().is_some());
    let g = m.lock();
    assert!(m.try_lock().is_none());
    drop(g);
    assert_eq!(m.into_inner(), 6);
}

/// Two threads take `lock` 20,000 times each; never both inside.
fn two_threads_exclude<const PV: bool, W: LockWord>(
    lock: &RawQSpinLockWith<DEFAULT_PENDING_LOOPS, PV, W>,
) {
    let sum = std::sync::atomic::AtomicU64::new(0);
    let inside = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..20_000 {
                    lock.raw_lock();
                    assert!(!inside.swap(true, Relaxed));
                    let v = sum.load(Relaxed);
                    sum.store(v + 1, Relaxed);
                    inside.store(false, Relaxed);
                    unsafe { lock.raw_unlock() };
                }
            });
        }
    });
    assert_eq!(sum.into_inner(), 40_000);
    assert_eq!(lock.word(), 0);
}

/// The native lock held here: a second locker sets pending, `(0,1,1)`,
/// and takes the lock when we leave, `(0,1,0) -> (0,0,1)`.
fn second_locker_takes_pending<W: LockWord>(
    lock: &RawQSpinLockWith<DEFAULT_PENDING_LOOPS, false, W>,
) {
    lock.raw_lock();
    std::thread::scope(|s| {
        s.spawn(|| {
            lock.raw_lock();
            assert_eq!(lock.word(), LOCKED, "pending not cleared on the take");
            unsafe { lock.raw_unlock() };
        });
        while lock.word() & PENDING == 0 {
            std::thread::yield_now();
        }
        assert_eq!(lock.word(), PENDING | LOCKED);
        unsafe { lock.raw_unlock() };
    });
    assert_eq!(lock.word(), 0);
}

/// Two threads: the second locker takes the pending path.
#[test]
fn contended_lock_is_exclusive_and_counted() {
    let _serial = crate::events::TEST_SERIAL
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let before = events::snapshot(events::LockType::QSpinLock);
    two_threads_exclude(&RawQSpinLock::new());
    // Deterministic: the pending path (the native lock: the paravirt one
    // bounds that wait and queues).
    second_locker_takes_pending(&RawQSpinLockNative::new());
    let after = events::snapshot(events::LockType::QSpinLock);
    let delta = |name: &str| {
        let a = after.iter().find(|(n, _)| *n == name).unwrap().1;
        let b = before.iter().find(|(n, _)| *n == name).unwrap().1;
        a - b
    };
    if events::enabled() {
        assert!(delta("lock_pending") >= 1, "{after:?}");
    } else {
        assert!(after.iter().all(|&(_, v)| v == 0));
    }
}

/// The paravirt fast path takes a free lock past a queue as a plain owner
/// ((n,0,0) -> (n,0,LOCKED), token 0), leaves the tail alone, and unlocks
/// with the plain unlock; it never takes a lock whose pending bit is set.
#[test]
fn fast_path_steals_past_a_queue_as_a_plain_owner() {
    fast_path_steals_past_a_queue_as_a_plain_owner_on::<AtomicU32>();
    fast_path_steals_past_a_queue_as_a_plain_owner_on::<DefaultWord>();
}

fn fast_path_steals_past_a_queue_as_a_plain_owner_on<W: LockWord>() {
    let tail = encode_tail(5, 1);
    let l = Pv::<W>::new();
    l.word.store(tail, Relaxed);
    let g = l.lock();
    assert_eq!(g.token, 0, "a fast-path steal must be a plain owner");
    assert_eq!(l.word(), tail | LOCKED);
    unsafe { l.unlock(g) };
    assert_eq!(l.word(), tail);

    // raw_lock / raw_unlock read the locked byte to pick the unlock.
    l.raw_lock();
    assert_eq!(l.word(), tail | LOCKED);
    unsafe { l.raw_unlock() };
    assert_eq!(l.word(), tail);

    // Pending set (a reserved hand-over): the fast path must not take it.
    l.word.store(tail | PENDING, Relaxed);
    assert_eq!(l.pv_fast_lock::<CORRECT>(), Err(tail | PENDING));
    assert_eq!(l.word(), tail | PENDING);
}

/// The native slow path on the eight-byte word, whose RMWs span both
/// halves (its `clear_pending_set_locked` add is a CAS loop there).
#[cfg(target_arch = "x86_64")]
#[test]
fn native_paths_on_the_eight_byte_word() {
    let lock = RawQSpinLockWith::<{ DEFAULT_PENDING_LOOPS }, false, Word64>::new();
    second_locker_takes_pending(&lock);
    two_threads_exclude(&lock);
}
