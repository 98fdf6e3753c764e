//! `pthread_cond_*`: klock's condition variable design
//! ([`klock::condvar`]: a futex on a sequence number) in place inside the
//! 48-byte `pthread_cond_t`, working with every mutex this library hands
//! out (klock's of each kind, and glibc's forwarded ones).
//!
//! ```text
//! bytes 0..4    seq: bumped by every signal; the futex word
//! bytes 4..8    waiters: threads inside a wait (a signal with none
//!               skips the system call; destroy waits for them to leave)
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
//! A recursive mutex is released entirely for the wait and its depth
//! restored after it (glibc would release one level only, and wait
//! forever).
//!
//! The waits are cancellation points at their edges: each calls
//! `pthread_testcancel` on entry (the caller holds the mutex) and on
//! return, once it holds the mutex again, so a cancelled waiter's cleanup
//! handlers run with the mutex held, as POSIX requires. The futex wait
//! itself is not one: glibc acts on a deferred cancellation inside its
//! own system call wrappers only, and an asynchronous one would unwind
//! through this library before the mutex is taken back. So a cancelled
//! thread acts on it when its wait next returns (a signal, a broadcast,
//! its timeout, or a spurious wake-up), not at once. These functions are
//! `extern "C-unwind"`, and nothing in their own frames needs dropping
//! when `pthread_testcancel` unwinds through them.

use crate::guarded;
use crate::mutex::{reacquire, release_for_wait};
use crate::time::time_left;
use core::ffi::c_int;
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
extern "C-unwind" {
    /// glibc's: unwinds (cancels the thread) if a cancellation is pending
    /// and enabled, else returns.
    fn pthread_testcancel();
}

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
        // Relaxed: written by init before the program shares the object.
        if self.flags.load(Relaxed) & PSHARED != 0 {
            futex::Flags::empty()
        } else {
            futex::Flags::PRIVATE
        }
    }

    fn notify(&self, n: u32) {
        // SeqCst pair with the waiter (module docs).
        self.seq.fetch_add(1, SeqCst);
        if self.waiters.load(SeqCst) != 0 {
            let _ = futex::wake(&self.seq, self.futex_flags(), n);
        }
    }

    /// Release `m`, wait for a signal on `seq` (at most `left`), take `m`
    /// back. 0, `ETIMEDOUT`, or an error of the mutex (`EPERM`, glibc's
    /// `EOWNERDEAD`).
    ///
    /// # Safety
    /// `m` is null or a live mutex.
    unsafe fn wait(&self, m: *mut pthread_mutex_t, left: Option<Duration>) -> c_int {
        // SeqCst pair with notify (module docs).
        self.waiters.fetch_add(1, SeqCst);
        let s = self.seq.load(SeqCst);
        // SAFETY: the caller's contract.
        let released = match unsafe { release_for_wait(m) } {
            Ok(r) => r,
            Err(e) => {
                // Release: as below.
                self.waiters.fetch_sub(1, Release);
                return e;
            }
        };
        let timed_out = match left {
            Some(d) if d.is_zero() => true,
            _ => {
                let ts = left.map(|d| rustix::time::Timespec {
                    tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
                    tv_nsec: d.subsec_nanos().into(),
                });
                let end = left.and_then(|d| Instant::now().checked_add(d));
                // A mismatch (a signal came first) or EINTR is a wake-up.
                let r = futex::wait(&self.seq, self.futex_flags(), s, ts.as_ref());
                r == Err(rustix::io::Errno::TIMEDOUT) || end.is_some_and(|e| Instant::now() >= e)
            }
        };
        // Release pairs with destroy's Acquire load: our last access to
        // the condition variable comes before its memory may be reused.
        self.waiters.fetch_sub(1, Release);
        // SAFETY: the mutex released above.
        match unsafe { reacquire(m, released) } {
            0 if timed_out => libc::ETIMEDOUT,
            rc => rc,
        }
    }
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
    guarded(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { get(c) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        let start = Instant::now();
        // Acquire pairs with the waiters' Release decrement.
        while c.waiters.load(Acquire) != 0 {
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
    testcancel();
    let rc = guarded(|| {
        // SAFETY: the caller's contract.
        match unsafe { get(c) } {
            // SAFETY: the caller's contract.
            Ok(c) => unsafe { c.wait(m, None) },
            Err(e) => e,
        }
    });
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
    guarded(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { get(c) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // Relaxed: written by init before the program shares the object.
        let clock = clock.unwrap_or_else(|| c.clock.load(Relaxed) as libc::clockid_t);
        // SAFETY: `ts` is null or readable.
        match unsafe { time_left(clock, ts) } {
            // SAFETY: the caller's contract.
            Ok(left) => unsafe { c.wait(m, Some(left)) },
            Err(e) => e,
        }
    })
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
