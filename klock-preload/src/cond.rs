//! `pthread_cond_*`: klock's condition variable design
//! ([`klock::condvar`]: a futex on a sequence number) in place inside the
//! 48-byte `pthread_cond_t`, working with every mutex this library hands
//! out (klock's of each kind, and glibc's forwarded ones).
//!
//! ```text
//! bytes 0..4    seq: bumped by every signal; the futex word
//! bytes 4..8    waiters: threads inside a wait (a signal with none
//!               skips the system call; destroy waits for them to leave),
//!               in the low 24 bits, under the process's fork generation
//!               (top 8 bits)
//! bytes 8..12   the clock of pthread_cond_timedwait (0: CLOCK_REALTIME)
//! bytes 12..16  flags: PSHARED (shared futex, not private)
//! bytes 16..48  unused
//! ```
//!
//! All-zero bytes (`PTHREAD_COND_INITIALIZER`) are a process-private
//! condition variable on `CLOCK_REALTIME`, nobody waiting.
//!
//! A waiter reads `seq` before it releases the mutex, so a signal sent
//! after the release changes `seq` and either wakes its `FUTEX_WAIT` or
//! makes it return at once: no lost wake-ups. The `SeqCst` pair (waiter:
//! `waiters` increment then `seq` load; signaller: `seq` increment then
//! `waiters` load) means the signaller sees the waiter or the waiter sees
//! the new `seq`. Wake-ups may be spurious, as POSIX allows.
//!
//! A private condition variable's count carries the fork generation it
//! was counted in: in a forked child, the waiters counted in the parent
//! do not exist, and a count of another generation reads as 0 (the first
//! waiter of the child's generation starts it over), so
//! `pthread_cond_destroy` in the child does not wait for them. A
//! process-shared one counts the waiters of every process sharing it,
//! with no generation.
//!
//! A recursive mutex is released entirely for the wait and its depth
//! restored after it (glibc would release one level only, and wait
//! forever).
//!
//! The waits are cancellation points, as glibc's are: on entry, during
//! the futex wait, and on return. During the wait the thread's
//! cancellation type is asynchronous (as glibc makes it around its own
//! blocking system calls), with a cleanup handler registered through
//! glibc's `_pthread_cleanup_push`: a cancellation that arrives then
//! unwinds the thread from the system call, and the handler, run as the
//! unwinding leaves the waiting frame, finishes the wait (leaves the
//! waiter count, passes on a wake-up the waiter may have taken, takes the
//! mutex back) before the program's own cleanup handlers run, so those
//! find the mutex held, as POSIX requires. The frames the unwinding
//! passes through in this library hold nothing to drop (the exported
//! waits are `extern "C-unwind"`, and neither they nor the waiting frame
//! have destructors or `catch_unwind` pending while they block). On
//! entry and return, `pthread_testcancel` acts on a request that is
//! already pending (on return, with the mutex held again).

use crate::guarded;
use crate::mutex::{reacquire, release_for_wait, Released};
use crate::time::time_left;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{
    AtomicU32,
    Ordering::{Acquire, Relaxed, Release, SeqCst},
};
use libc::{pthread_cond_t, pthread_condattr_t, pthread_mutex_t, timespec};
use rustix::thread::futex;
use std::time::{Duration, Instant};

/// The layout inside a `pthread_cond_t` (module docs).
#[repr(C)]
struct Cond {
    seq: AtomicU32,
    waiters: AtomicU32,
    clock: AtomicU32,
    flags: AtomicU32,
}

const _: () = assert!(core::mem::size_of::<pthread_cond_t>() == 48);
const _: () = assert!(core::mem::size_of::<Cond>() <= 48);
const _: () = assert!(core::mem::align_of::<Cond>() <= core::mem::align_of::<pthread_cond_t>());

/// `flags`: process-shared (the futex calls go without `FUTEX_PRIVATE`).
const PSHARED: u32 = 1;

/// `waiters`: the count's bits; the fork generation sits above them.
const COUNT_MASK: u32 = (1 << GEN_SHIFT) - 1;
/// `waiters`: where the fork generation (its low 8 bits) starts.
const GEN_SHIFT: u32 = 24;

/// The fork generation as `waiters` carries it.
#[inline]
fn gen_now() -> u32 {
    klock::thread::fork_generation() << GEN_SHIFT
}
extern "C-unwind" {
    /// glibc's: unwinds (cancels the thread) if a cancellation is pending
    /// and enabled, else returns.
    fn pthread_testcancel();
    /// glibc's: sets the calling thread's cancellation type; switching to
    /// asynchronous with a request pending cancels at once (unwinds).
    fn pthread_setcanceltype(kind: c_int, old: *mut c_int) -> c_int;
}

extern "C" {
    /// glibc's (exported since 2.2.5, the form behind `pthread_cleanup_push`
    /// without exceptions): links `buf` into the thread's cleanup list; a
    /// cancellation that unwinds past the frame holding `buf` calls
    /// `routine(arg)` first.
    fn _pthread_cleanup_push(
        buf: *mut CleanupBuffer,
        routine: unsafe extern "C" fn(*mut c_void),
        arg: *mut c_void,
    );
    /// glibc's: unlinks `buf`, calling its routine if `execute` is non-zero.
    fn _pthread_cleanup_pop(buf: *mut CleanupBuffer, execute: c_int);
}

/// glibc's `struct _pthread_cleanup_buffer` (`<pthread.h>`): filled in by
/// `_pthread_cleanup_push`.
#[repr(C)]
struct CleanupBuffer {
    routine: Option<unsafe extern "C" fn(*mut c_void)>,
    arg: *mut c_void,
    canceltype: c_int,
    prev: *mut CleanupBuffer,
}

/// glibc's `PTHREAD_CANCEL_ASYNCHRONOUS`.
const PTHREAD_CANCEL_ASYNCHRONOUS: c_int = 1;

/// A cancellation point: acts on a pending cancellation request.
#[inline]
fn testcancel() {
    // SAFETY: no arguments; if it unwinds, the frames it unwinds through
    // (the exported waits) have nothing to drop at their calls.
    unsafe { pthread_testcancel() }
}

/// How long destroy waits for woken waiters to leave before `EBUSY`.
const DESTROY_WAIT: Duration = Duration::from_millis(100);

impl Cond {
    fn futex_flags(&self) -> futex::Flags {
        if self.shared() {
            futex::Flags::empty()
        } else {
            futex::Flags::PRIVATE
        }
    }

    /// Whether the condition variable is process-shared.
    #[inline]
    fn shared(&self) -> bool {
        // Relaxed: written by init before the program shares the object.
        self.flags.load(Relaxed) & PSHARED != 0
    }

    /// The waiters in `w` (the `waiters` word) that may still wait: the
    /// count, unless it was counted in another fork generation (the
    /// parent's waiters, in a private condition variable; a process-shared
    /// one counts waiters of every process, and no generation).
    #[inline]
    fn waiting(&self, w: u32) -> u32 {
        if self.shared() || w & !COUNT_MASK == gen_now() {
            w & COUNT_MASK
        } else {
            0
        }
    }

    /// The generation bits a waiter entering now counts itself under.
    #[inline]
    fn gen_bits(&self) -> u32 {
        if self.shared() {
            0
        } else {
            gen_now()
        }
    }

    fn notify(&self, n: u32) {
        // SeqCst pair with the waiter (module docs).
        self.seq.fetch_add(1, SeqCst);
        if self.waiting(self.waiters.load(SeqCst)) != 0 {
            let _ = futex::wake(&self.seq, self.futex_flags(), n);
        }
    }

    /// The first part of a wait: enter it (count ourselves a waiter, read
    /// `seq`), then release `m`. The mutex's error (`EPERM`) if the caller
    /// does not hold it; nothing changed then.
    ///
    /// # Safety
    /// `m` is null or a live mutex.
    unsafe fn enter(&self, m: *mut pthread_mutex_t) -> Result<(u32, Released), c_int> {
        // Count ourselves in; a count of another fork generation starts
        // over. SeqCst pair with notify (module docs).
        let mut w = self.waiters.load(Relaxed);
        loop {
            let new = (self.waiting(w) + 1) | self.gen_bits();
            match self.waiters.compare_exchange_weak(w, new, SeqCst, Relaxed) {
                Ok(_) => break,
                Err(now) => w = now,
            }
        }
        let s = self.seq.load(SeqCst);
        // SAFETY: the caller's contract.
        match unsafe { release_for_wait(m) } {
            Ok(r) => Ok((s, r)),
            Err(e) => {
                // Release: as in leave.
                self.waiters.fetch_sub(1, Release);
                Err(e)
            }
        }
    }

    /// The last part of a wait: leave it and take `m` back. 0, or an
    /// error of the mutex (glibc's `EOWNERDEAD`).
    ///
    /// # Safety
    /// The caller entered with `m`, which [`enter`](Self::enter) released.
    unsafe fn leave(&self, m: *mut pthread_mutex_t, released: Released) -> c_int {
        // Release pairs with destroy's Acquire load: our last access to
        // the condition variable comes before its memory may be reused.
        self.waiters.fetch_sub(1, Release);
        // SAFETY: the caller's contract.
        unsafe { reacquire(m, released) }
    }

    /// The futex operation of a wait on `seq`.
    fn futex_wait_op(&self) -> c_int {
        if self.shared() {
            libc::FUTEX_WAIT
        } else {
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG
        }
    }
}

/// What a waiter cancelled during its futex wait still has to do, for the
/// cleanup handler ([`finish_cancelled`]). On the waiting frame's stack.
struct Waiting {
    cond: *const Cond,
    m: *mut pthread_mutex_t,
    released: Released,
}

/// The cleanup handler of a cancelled wait, called by glibc's unwinder as
/// it leaves the waiting frame: pass on a wake-up the waiter may have
/// taken (POSIX: a cancelled waiter must not swallow a signal; another
/// waiter may wake spuriously instead), leave the wait and take the mutex
/// back, before the program's cleanup handlers run.
///
/// # Safety
/// `arg` is the [`Waiting`] of the frame being unwound.
unsafe extern "C" fn finish_cancelled(arg: *mut c_void) {
    // SAFETY: the caller's contract: the frame is still on the stack.
    let w = unsafe { &*arg.cast::<Waiting>() };
    // SAFETY: the waiter counts itself in `waiters`, so destroy has not
    // returned and the condition variable is live.
    let c = unsafe { &*w.cond };
    let _ = futex::wake(&c.seq, c.futex_flags(), 1);
    // SAFETY: entered with `w.m`, released by enter.
    let _ = unsafe { c.leave(w.m, w.released) };
}

/// Sleep on `c.seq` while it holds `s` (at most `left`), as a cancellation
/// point (module docs). Whether the wait timed out. Holds nothing to drop
/// while it blocks: a cancellation unwinds through this frame.
///
/// # Safety
/// `w` describes the caller's entered wait on `c`.
unsafe fn futex_wait_cancellable(c: &Cond, s: u32, left: Option<Duration>, w: &Waiting) -> bool {
    let ts = left.map(|d| timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos().into(),
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const timespec);
    let mut buf = CleanupBuffer {
        routine: None,
        arg: core::ptr::null_mut(),
        canceltype: 0,
        prev: core::ptr::null_mut(),
    };
    let mut old = 0;
    // SAFETY: `buf` stays on this frame until popped below, or until a
    // cancellation unwinds past this frame (which runs the handler first);
    // `w` outlives both.
    let err = unsafe {
        _pthread_cleanup_push(
            &mut buf,
            finish_cancelled,
            (w as *const Waiting).cast_mut().cast(),
        );
        pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &mut old);
        // A mismatch (a signal came first) or EINTR is a wake-up. Through
        // glibc's `syscall()`, not rustix: the cancellation signal lands
        // in the system call, and the unwinder needs that frame's unwind
        // information, which a C function has at every instruction
        // (rustix would make the call inline, in this frame).
        let r = libc::syscall(
            libc::SYS_futex,
            c.seq.as_ptr(),
            c.futex_wait_op(),
            s,
            ts_ptr,
            0usize,
            0u32,
        );
        let err = if r < 0 { *libc::__errno_location() } else { 0 };
        pthread_setcanceltype(old, core::ptr::null_mut());
        _pthread_cleanup_pop(&mut buf, 0);
        err
    };
    err == libc::ETIMEDOUT
}

/// A whole wait on `c` with `m`, at most `left` (`Some(ZERO)`: time out at
/// once, after releasing and retaking `m`): 0, `ETIMEDOUT` (`m` is locked
/// again either way), or the mutex's error (`EPERM`: no wait).
///
/// # Safety
/// `c` and `m` are live objects.
unsafe fn wait(c: &Cond, m: *mut pthread_mutex_t, left: Option<Duration>) -> c_int {
    let mut entered = None;
    let rc = guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { c.enter(m) } {
            Ok(e) => {
                entered = Some(e);
                0
            }
            Err(e) => e,
        }
    });
    let Some((s, released)) = entered else {
        return rc;
    };
    let timed_out = match left {
        Some(d) if d.is_zero() => true,
        _ => {
            let end = left.and_then(|d| Instant::now().checked_add(d));
            let w = Waiting {
                cond: c,
                m,
                released,
            };
            // Not inside `guarded`: a cancellation unwinds from here, and
            // must not meet a `catch_unwind`.
            // SAFETY: `w` describes the wait just entered.
            let timed_out = unsafe { futex_wait_cancellable(c, s, left, &w) };
            timed_out || end.is_some_and(|e| Instant::now() >= e)
        }
    };
    guarded(|| {
        // SAFETY: entered with `m` above.
        match unsafe { c.leave(m, released) } {
            0 if timed_out => libc::ETIMEDOUT,
            rc => rc,
        }
    })
}

/// The condition variable in `c`, or `EINVAL` for null.
///
/// # Safety
/// `c` is null or points to a live `pthread_cond_t`.
unsafe fn get<'a>(c: *mut pthread_cond_t) -> Result<&'a Cond, c_int> {
    if c.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: non-null, live, large and aligned enough (asserted above);
    // all words are atomics valid for any value.
    Ok(unsafe { &*c.cast::<Cond>() })
}

/// Initialise `c` with `attr`'s clock and process-shared setting.
///
/// # Safety
/// `c` is null or writable and unused by others; `attr` is null or an
/// initialised attribute.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_init(
    c: *mut pthread_cond_t,
    attr: *const pthread_condattr_t,
) -> c_int {
    crate::forward_family!(Cond, pthread_cond_init: fn(*mut pthread_cond_t, *const pthread_condattr_t) -> c_int, c, attr);
    guarded(|| {
        if c.is_null() {
            return libc::EINVAL;
        }
        let (mut clock, mut shared) = (libc::CLOCK_REALTIME, libc::PTHREAD_PROCESS_PRIVATE);
        if !attr.is_null() {
            // SAFETY: an initialised attribute.
            let ok = unsafe {
                libc::pthread_condattr_getclock(attr, &mut clock) == 0
                    && libc::pthread_condattr_getpshared(attr, &mut shared) == 0
            };
            if !ok {
                return libc::EINVAL;
            }
        }
        let flags = if shared == libc::PTHREAD_PROCESS_SHARED {
            PSHARED
        } else {
            0
        };
        // SAFETY: non-null, writable, unused by others; size and alignment
        // fit.
        unsafe {
            c.cast::<Cond>().write(Cond {
                seq: AtomicU32::new(0),
                waiters: AtomicU32::new(0),
                clock: AtomicU32::new(clock as u32),
                flags: AtomicU32::new(flags),
            })
        };
        0
    })
}

/// Destroy `c`: 0 once no thread is inside a wait on it (woken waiters
/// leave within microseconds: POSIX allows destroying right after a
/// broadcast); `EBUSY` if some still wait after 100 ms.
///
/// # Safety
/// `c` is null or a live condition variable.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_destroy(c: *mut pthread_cond_t) -> c_int {
    crate::forward_family!(Cond, pthread_cond_destroy: fn(*mut pthread_cond_t) -> c_int, c);
    guarded(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { get(c) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        let start = Instant::now();
        // Acquire pairs with the waiters' Release decrement.
        while c.waiting(c.waiters.load(Acquire)) != 0 {
            if start.elapsed() >= DESTROY_WAIT {
                return libc::EBUSY;
            }
            std::thread::yield_now();
        }
        0
    })
}

/// Release `m`, wait for a signal on `c`, lock `m` again: 0 (possibly
/// spuriously), or `EPERM` if the caller does not hold `m`.
///
/// # Safety
/// `c` and `m` are null or live objects.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cond_wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
) -> c_int {
    crate::forward_family!(Cond, pthread_cond_wait: "C-unwind" fn(*mut pthread_cond_t, *mut pthread_mutex_t) -> c_int, c, m);
    testcancel();
    // SAFETY: the caller's contract.
    let rc = match unsafe { get(c) } {
        // SAFETY: the caller's contract.
        Ok(c) => unsafe { wait(c, m, None) },
        Err(e) => e,
    };
    testcancel();
    rc
}

/// Wait on `c` until the absolute deadline `ts` on `clock`.
///
/// # Safety
/// As `pthread_cond_wait`; `ts` is null or readable.
unsafe fn timed(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    clock: Option<libc::clockid_t>,
    ts: *const timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    let c = match unsafe { get(c) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    let mut left = None;
    let rc = guarded(|| {
        // Relaxed: written by init before the program shares the object.
        let clock = clock.unwrap_or_else(|| c.clock.load(Relaxed) as libc::clockid_t);
        // SAFETY: `ts` is null or readable.
        match unsafe { time_left(clock, ts) } {
            Ok(l) => {
                left = Some(l);
                0
            }
            Err(e) => e,
        }
    });
    match left {
        // SAFETY: the caller's contract.
        Some(l) => unsafe { wait(c, m, Some(l)) },
        None => rc,
    }
}

/// As `pthread_cond_wait`, until the absolute deadline `ts` on the clock
/// of `c`'s attribute (`CLOCK_REALTIME` by default): 0, `ETIMEDOUT` (`m`
/// is locked again either way), `EPERM`, or `EINVAL` (bad `ts`; no wait).
///
/// # Safety
/// As `pthread_cond_wait`; `ts` is null or readable.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cond_timedwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    ts: *const timespec,
) -> c_int {
    crate::forward_family!(Cond, pthread_cond_timedwait: "C-unwind" fn(*mut pthread_cond_t, *mut pthread_mutex_t, *const timespec) -> c_int, c, m, ts);
    testcancel();
    // SAFETY: the caller's contract.
    let rc = unsafe { timed(c, m, None, ts) };
    testcancel();
    rc
}

/// As `pthread_cond_timedwait`, the deadline on `clock`.
///
/// # Safety
/// As `pthread_cond_timedwait`.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_cond_clockwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    clock: libc::clockid_t,
    ts: *const timespec,
) -> c_int {
    crate::forward_family!(Cond, pthread_cond_clockwait: "C-unwind" fn(*mut pthread_cond_t, *mut pthread_mutex_t, libc::clockid_t, *const timespec) -> c_int, c, m, clock, ts);
    testcancel();
    // SAFETY: the caller's contract.
    let rc = unsafe { timed(c, m, Some(clock), ts) };
    testcancel();
    rc
}

/// Wake one waiter of `c`, if any: 0.
///
/// # Safety
/// `c` is null or a live condition variable.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int {
    crate::forward_family!(Cond, pthread_cond_signal: fn(*mut pthread_cond_t) -> c_int, c);
    guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { get(c) } {
            Ok(c) => {
                c.notify(1);
                0
            }
            Err(e) => e,
        }
    })
}

/// Wake every waiter of `c`: 0.
///
/// # Safety
/// `c` is null or a live condition variable.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int {
    crate::forward_family!(Cond, pthread_cond_broadcast: fn(*mut pthread_cond_t) -> c_int, c);
    guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { get(c) } {
            Ok(c) => {
                // i32::MAX: the kernel reads the count as an int.
                c.notify(i32::MAX as u32);
                0
            }
            Err(e) => e,
        }
    })
}
