use super::*;
use lock_api::{RawRwLock as _, RawRwLockDowngrade as _, RawRwLockTimed as _};
use std::time::Instant;

/// Debug builds report a write unlock of a lock nobody write-locked
/// (the fast path sends it to the checking slow path).
#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "write unlock of a lock not write-locked")]
fn debug_write_unlock_of_unlocked_lock_panics() {
    let (held, free) = (RawRwSem::new(), RawRwSem::new());
    let g = held.lock_exclusive();
    // SAFETY: deliberately wrong (the guard is `held`'s); the debug
    // check panics before anything is written.
    unsafe { free.unlock_exclusive(g) };
}

type Spin = RawRwSemWith<ON, ON>;
type NoSpin = RawRwSemWith<OFF, OFF>;

/// The owner and count words are the last two words, and the lock ends
/// at byte 48 (the preload library keeps glibc's flags word there), so
/// that a `RwSem<T>`'s data follows them on their cache line.
#[test]
fn hot_words_are_last() {
    let size = core::mem::size_of::<RawRwSem>();
    assert_eq!(size, 48);
    assert_eq!(core::mem::offset_of!(RawRwSem, count), size - 8);
    assert_eq!(core::mem::offset_of!(RawRwSem, owner), size - 16);
    let l = crate::RwSem::new(0u64);
    // SAFETY: only the addresses are used.
    let (raw, data) = (
        unsafe { l.raw() } as *const RawRwSem as usize,
        l.data_ptr() as usize,
    );
    assert_eq!(data - raw, size, "the data follows the raw lock");
}

#[test]
fn word_layout() {
    assert_eq!(READER_MASK >> READER_SHIFT, (1 << 55) - 1);
    assert_eq!(
        READER_MASK
            & (WRITER_LOCKED | WAITERS | HANDOFF | WRITER_WOKEN | FRONT_READER | READ_FAILED),
        0
    );
    assert_eq!(OWNER_FLAGS, 0b111);
    assert_eq!(OWNER_MASK & OWNER_FLAGS, 0);
    assert_eq!(tid_of(((1usize << 22) - 1) << OWNER_SHIFT), (1 << 22) - 1);
}

#[test]
fn rspin_threshold_matches_the_seed() {
    assert_eq!(rspin_threshold_ns(0), 10_000);
    assert_eq!(rspin_threshold_ns(2), 11_000);
    assert_eq!(rspin_threshold_ns(30), 25_000);
    assert_eq!(rspin_threshold_ns(1000), 25_000);
}

#[test]
fn read_write_try_downgrade() {
    let l = Spin::INIT;
    let r1 = l.lock_shared();
    let r2 = l.lock_shared();
    assert!(l.is_locked() && !l.is_locked_exclusive());
    assert_eq!(readers_of(l.count_word()), 2);
    assert!(l.try_lock_exclusive().is_none());
    assert_eq!(l.owner_word() & READER_OWNED, READER_OWNED);
    unsafe {
        l.unlock_shared(r1);
        l.unlock_shared(r2);
    }
    assert_eq!(l.count_word(), 0);
    let w = l.lock_exclusive();
    assert!(l.is_locked_exclusive());
    assert_eq!(l.owner_word(), my_id());
    assert!(l.try_lock_shared().is_none());
    let r = unsafe { l.downgrade(w) };
    assert_eq!(l.count_word(), READER_BIAS);
    assert!(l.try_lock_exclusive().is_none());
    let r2 = l.try_lock_shared().unwrap();
    unsafe {
        l.unlock_shared(r);
        l.unlock_shared(r2);
    }
    assert_eq!(l.count_word(), 0);
    let w = l.try_lock_exclusive_for(Duration::from_millis(1)).unwrap();
    assert!(format!("{l:?}").contains("writer_locked: true"));
    unsafe { l.unlock_exclusive(w) };
}

/// The error-checking read lock asks its question only when the fast path
/// fails, refuses when told the caller writes, and otherwise waits for the
/// writer; `is_read_held` tells a read hold from a write hold and none.
#[test]
fn checked_read_lock_and_read_held() {
    let l = RawRwSem::new();
    let me = thread::current_tid();
    assert!(!l.is_read_held());
    let asked = core::cell::Cell::new(false);
    let g = l.raw_lock_shared_unless_as(me, || {
        asked.set(true);
        true
    });
    assert!(
        g.is_some() && !asked.get(),
        "a free lock: taken, nothing asked"
    );
    assert!(l.is_read_held());
    unsafe { l.raw_unlock_shared() };
    assert!(!l.is_read_held() && !l.is_held());
    let w = l.lock_exclusive();
    assert!(!l.is_read_held());
    assert!(l.raw_lock_shared_unless_as(me, || true).is_none());
    assert!(l.is_write_held(), "a refusal leaves the write hold alone");
    unsafe { l.unlock_exclusive(w) };
    let held = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            let w = l.lock_exclusive();
            held.wait();
            std::thread::sleep(Duration::from_millis(20));
            unsafe { l.unlock_exclusive(w) };
        });
        held.wait();
        let t = Instant::now();
        assert!(l.raw_lock_shared_unless_as(me, || false).is_some());
        assert!(t.elapsed() >= Duration::from_millis(10));
        assert!(l.is_read_held());
        unsafe { l.raw_unlock_shared() };
    });
    assert!(!l.is_held());
}

#[test]
fn fast_path_writer_clears_nonspinnable_and_readers_keep_rd() {
    let l = Spin::new();
    l.owner
        .store(77 << OWNER_SHIFT | READER_OWNED | NONSPINNABLE, Relaxed);
    let r = l.lock_shared();
    // A reader drops WR_NONSPINNABLE, keeps RD_NONSPINNABLE.
    assert_eq!(l.owner_word(), my_id() | READER_OWNED | RD_NONSPINNABLE);
    unsafe { l.unlock_shared(r) };
    let w = l.lock_exclusive();
    assert_eq!(l.owner_word(), my_id(), "fast-path writer clears both bits");
    unsafe { l.unlock_exclusive(w) };
    // A write unlock keeps RD_NONSPINNABLE.
    l.owner.store(0, Relaxed);
    let w = l.lock_exclusive();
    l.owner.store(my_id() | RD_NONSPINNABLE, Relaxed);
    unsafe { l.unlock_exclusive(w) };
    assert_eq!(l.owner_word(), RD_NONSPINNABLE);
}

#[test]
fn set_nonspinnable_only_when_reader_owned() {
    let l = Spin::new();
    let w = l.lock_exclusive();
    assert!(!l.set_nonspinnable());
    assert_eq!(l.owner_word() & NONSPINNABLE, 0);
    unsafe { l.unlock_exclusive(w) };
    let r = l.lock_shared();
    assert!(l.set_nonspinnable());
    assert_eq!(l.owner_word() & NONSPINNABLE, NONSPINNABLE);
    unsafe { l.unlock_shared(r) };
    // Stale reader hint, no readers: not set again.
    l.owner.store(my_id() | READER_OWNED, Relaxed);
    assert!(!l.set_nonspinnable());
}

#[test]
fn handoff_reserved_lock_refuses_strangers() {
    let l = NoSpin::new();
    l.count.store(HANDOFF | WAITERS, Relaxed);
    assert!(l.try_lock_exclusive().is_none());
    assert!(l.try_lock_shared().is_none());
    assert!(l.try_write(true), "the first waiter may take it");
    assert_eq!(l.count_word(), WRITER_LOCKED | WAITERS);
    l.count.store(0, Relaxed);
}

#[test]
fn timed_locks_time_out() {
    let l = NoSpin::new();
    let w = l.lock_exclusive();
    std::thread::scope(|s| {
        s.spawn(|| {
            let t0 = Instant::now();
            assert!(l.try_lock_shared_for(Duration::from_millis(20)).is_none());
            assert!(t0.elapsed() >= Duration::from_millis(20));
            let t0 = Instant::now();
            assert!(l
                .try_lock_exclusive_for(Duration::from_millis(20))
                .is_none());
            assert!(t0.elapsed() >= Duration::from_millis(20));
        });
    });
    assert_eq!(
        l.count_word(),
        WRITER_LOCKED,
        "timed-out waiters left no flags"
    );
    unsafe { l.unlock_exclusive(w) };
}

#[test]
fn switches() {
    let was = (reader_spin(), adaptive());
    set_reader_spin(!was.0);
    set_adaptive(!was.1);
    assert_eq!(RawRwSem::new().reader_spin_enabled(), !was.0);
    assert_eq!(RawRwSem::new().adaptive_enabled(), !was.1);
    assert!(Spin::new().reader_spin_enabled() && Spin::new().adaptive_enabled());
    assert!(!NoSpin::new().reader_spin_enabled() && !NoSpin::new().adaptive_enabled());
    set_reader_spin(was.0);
    set_adaptive(was.1);
    let t = wait_timeout_ns();
    set_wait_timeout_ns(123);
    assert_eq!(wait_timeout_ns(), 123);
    set_wait_timeout_ns(t);
}

#[test]
fn reader_passing_per_lock_and_never_for_stealing_locks() {
    // The per-lock modes hold whatever the global switch says (which
    // locks with RSPIN = ON follow; the environment may set it, so it is
    // not asserted here).
    assert!(RawRwSemWith::<PASS, ON>::new().reader_pass_enabled());
    assert!(RawRwSemWith::<PASS, ON>::new().reader_spin_enabled());
    assert!(!RawRwSemWith::<STEAL, OFF>::new().reader_pass_enabled());
}

/// Wait (at most 10 s) until `l`'s count word satisfies `f`.
fn wait_count(l: &RawRwSem, what: &str, f: impl Fn(u64) -> bool) {
    let start = Instant::now();
    while !f(l.count_word()) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "waited 10 s for {what} (count {:#x})",
            l.count_word()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The write guard's hint names the count the writer left (exactly
/// `WRITER_LOCKED` on a free lock), which is what a guard rebuilt from the
/// tid carries (`WriteGuard::rebuilt`, for a C API that cannot keep the
/// guard); a reader that queues first sets `FRONT_READER` with
/// `WAITERS`; and an unlock whose hint went stale (its CAS fails on those
/// bits), here with the rebuilt guard, still lets that reader in. (That
/// no writer gets in before the reader is loom's grant model.)
#[test]
fn guard_hint_and_stale_hint_unlock() {
    let l: &'static RawRwSem = Box::leak(Box::new(RawRwSem::new()));
    let g = l.raw_lock_exclusive();
    assert_eq!(g.seen_count(), WRITER_LOCKED);
    assert_eq!(g.identity(), my_id());
    let rebuilt = WriteGuard::rebuilt(thread::current_tid());
    assert_eq!(
        (rebuilt.seen_count(), rebuilt.identity()),
        (g.seen_count(), g.identity())
    );
    for (hint, &count) in SEEN_COUNTS.iter().enumerate() {
        let h = WriteGuard::seen(my_id(), count);
        assert_eq!(
            (h.seen_count(), h.identity()),
            (count, my_id()),
            "hint {hint}"
        );
    }
    let other = WriteGuard::seen(my_id(), WRITER_LOCKED | FRONT_READER | WAITERS);
    assert_eq!(other.seen_count(), 0, "no hint for other counts");
    // A reader queues first: FRONT_READER with WAITERS, in one RMW.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let _r = l.raw_lock_shared();
        tx.send(l.count_word()).unwrap();
        // SAFETY: read-held.
        unsafe { l.raw_unlock_shared() };
    });
    wait_count(l, "the reader to queue", |c| {
        c & (WAITERS | FRONT_READER) == WAITERS | FRONT_READER
    });
    // SAFETY: held, by us, as `rebuilt` says; its hint (WRITER_LOCKED)
    // is stale now.
    unsafe { l.raw_unlock_exclusive(rebuilt) };
    let seen = rx.recv().unwrap();
    assert_eq!(readers_of(seen), 1, "the reader was granted: {seen:#x}");
    reader.join().unwrap();
    assert_eq!(l.count_word(), 0);
}

/// `FRONT_READER` follows the front of the queue: a writer queued first
/// and then timing out leaves a reader at the front, and the bit is set;
/// the next write unlock grants that reader.
#[test]
fn front_reader_follows_the_front() {
    let l: &'static RawRwSem = Box::leak(Box::new(RawRwSem::new()));
    let g = l.raw_lock_exclusive();
    // A writer queues first, with a deadline.
    let timed = std::thread::spawn(move || {
        let got = l.raw_try_lock_exclusive_until_ns(crate::sys::monotonic_ns() + 300_000_000);
        assert!(got.is_none(), "the lock was held throughout");
    });
    wait_count(l, "the writer to queue", |c| c & WAITERS != 0);
    assert_eq!(l.count_word() & FRONT_READER, 0, "a writer is at the front");
    // Then a reader, behind it.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let _r = l.raw_lock_shared();
        tx.send(()).unwrap();
        // SAFETY: read-held.
        unsafe { l.raw_unlock_shared() };
    });
    // The writer gives up: the reader is at the front.
    timed.join().unwrap();
    wait_count(l, "FRONT_READER after the writer left", |c| {
        c & FRONT_READER != 0
    });
    assert!(rx.try_recv().is_err(), "the reader waits for the writer");
    // SAFETY: held with `g`.
    unsafe { l.raw_unlock_exclusive(g) };
    rx.recv().unwrap();
    reader.join().unwrap();
    assert_eq!(l.count_word(), 0);
}

/// The `_as` trylocks (for callers that read their tid elsewhere, as the
/// C libraries do) name exactly the tid they are given, as the plain
/// ones name the caller's.
#[test]
fn try_as_entry_points_name_the_given_tid() {
    let l = Spin::new();
    let tid = thread::current_tid();
    let other = tid + 1;
    let r = l.raw_try_lock_shared_as(other).unwrap();
    assert_eq!(l.owner_word(), id_of(other) | READER_OWNED);
    unsafe { l.unlock_shared(r) };
    let w = l.raw_try_lock_exclusive_as(other).unwrap();
    assert_eq!((l.owner_word(), w.identity()), (id_of(other), id_of(other)));
    assert!(l.raw_try_lock_shared_as(tid).is_none());
    unsafe { l.unlock_exclusive(w) };
    let deadline = crate::sys::monotonic_ns() + 1_000_000;
    let r = l.raw_try_lock_shared_until_ns_as(other, deadline).unwrap();
    assert_eq!(l.owner_word(), id_of(other) | READER_OWNED);
    assert!(l.raw_try_lock_exclusive_as(tid).is_none());
    unsafe { l.unlock_shared(r) };
    let w = l.raw_try_lock_exclusive_until_ns_as(tid, deadline).unwrap();
    assert_eq!(l.owner_word(), my_id());
    assert_eq!(w.identity(), my_id());
    assert!(l.raw_try_lock_exclusive().is_none());
    unsafe { l.unlock_exclusive(w) };
    assert_eq!(l.count_word(), 0);
}
