//! `sigaction` and `signal`, seen through the lock profile's signal
//! handlers.
//!
//! With the profile on, the library catches `SIGINT`, `SIGTERM` and
//! `SIGHUP` where they are at their default action, to print the profile
//! before such a signal ends the program ([`crate::stat`]'s report). The
//! program must not see that handler: many programs install their own
//! only where they find the default action (CPython, for one, installs its
//! `KeyboardInterrupt` handler for `SIGINT` only then), and a handler
//! they did not expect changes what they do. So while the profile's
//! handler is in place for a signal, these two functions report that
//! signal's action as the default one; setting the default keeps the
//! profile's handler (which ends the process as the default action does,
//! after the report), and setting anything else replaces it for good.
//! Without the profile, and for every other signal, they are glibc's.

use core::sync::atomic::AtomicBool;
use core::sync::atomic::Ordering::Relaxed;
use libc::c_int;

/// The signals the profile may catch, and whether its handler is in place
/// for each (the program has not set an action of its own since).
const SIGNALS: [c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
static CAUGHT: [AtomicBool; 3] = [const { AtomicBool::new(false) }; 3];

fn slot(sig: c_int) -> Option<&'static AtomicBool> {
    SIGNALS.iter().position(|&s| s == sig).map(|i| &CAUGHT[i])
}

/// glibc's `sigaction`. Resolved at load, by [`catch`]'s first call, so
/// that a signal handler never runs `dlsym` (which is not
/// async-signal-safe).
fn real_sigaction(
) -> unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int {
    // SAFETY: glibc's sigaction has this type.
    unsafe {
        crate::real!(sigaction: fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int)
    }
}

/// At load, with the profile on: put `handler` on each of the signals
/// above that is at its default action (one ignored by the parent, as
/// under `nohup`, stays ignored).
pub(crate) fn catch(handler: extern "C" fn(c_int)) {
    let real = real_sigaction();
    for (sig, caught) in SIGNALS.iter().zip(&CAUGHT) {
        // SAFETY: all-zero bytes are a valid `sigaction`; the calls read
        // and set this signal's action only.
        unsafe {
            let mut old: libc::sigaction = core::mem::zeroed();
            if real(*sig, core::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL {
                continue;
            }
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = handler as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            if real(*sig, &sa, core::ptr::null_mut()) == 0 {
                caught.store(true, Relaxed);
            }
        }
    }
}

/// In the profile's handler: put back the default action of `sig`, so
/// that raising it again ends the process. Async-signal-safe.
pub(crate) fn restore_default(sig: c_int) {
    if let Some(caught) = slot(sig) {
        caught.store(false, Relaxed);
    }
    // SAFETY: all-zero bytes are the default action; sigaction is
    // async-signal-safe, and `real_sigaction` was resolved at load.
    unsafe {
        let sa: libc::sigaction = core::mem::zeroed();
        real_sigaction()(sig, &sa, core::ptr::null_mut());
    }
}

/// The default action, as the program would have read it.
fn default_action() -> libc::sigaction {
    // SAFETY: all-zero bytes are SIG_DFL, no flags, an empty mask.
    unsafe { core::mem::zeroed() }
}

/// `sigaction`: glibc's, except that a signal the profile catches reads as
/// at its default action (see the module docs).
///
/// # Safety
/// As glibc's: `act` and `old` null or valid.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let real = real_sigaction();
    let Some(caught) = slot(sig).filter(|c| c.load(Relaxed)) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real(sig, act, old) };
    };
    // SAFETY: `act` is null or valid (the caller's contract).
    if unsafe { act.as_ref() }.is_some_and(|a| a.sa_sigaction == libc::SIG_DFL) {
        // The default: the profile's handler ends the process as the
        // default action does, after its report. Keep it.
        if !old.is_null() {
            // SAFETY: `old` is valid (the caller's contract).
            unsafe { old.write(default_action()) };
        }
        return 0;
    }
    if !act.is_null() {
        caught.store(false, Relaxed);
    }
    // SAFETY: the caller's arguments, passed on.
    let rc = unsafe { real(sig, act, old) };
    if rc == 0 && !old.is_null() {
        // SAFETY: as above. What was there is the profile's handler.
        unsafe { old.write(default_action()) };
    }
    rc
}

/// `signal`: glibc's, except that a signal the profile catches reads as
/// at its default action (see the module docs).
///
/// # Safety
/// As glibc's.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: glibc's signal has this type.
    let real = unsafe { crate::real!(signal: fn(c_int, libc::sighandler_t) -> libc::sighandler_t) };
    let Some(caught) = slot(sig).filter(|c| c.load(Relaxed)) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real(sig, handler) };
    };
    if handler == libc::SIG_DFL {
        // Keep the profile's handler, as `sigaction` does.
        return libc::SIG_DFL;
    }
    caught.store(false, Relaxed);
    // SAFETY: the caller's arguments, passed on.
    match unsafe { real(sig, handler) } {
        libc::SIG_ERR => libc::SIG_ERR,
        // What was there is the profile's handler.
        _ => libc::SIG_DFL,
    }
}
