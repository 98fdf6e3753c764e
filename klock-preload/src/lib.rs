//! # libklock_preload.so
//!
//! `LD_PRELOAD=libklock_preload.so ./program` runs an unmodified C program
//! on klock's locks: this library defines `pthread_mutex_*`,
//! `pthread_rwlock_*`, `pthread_spin_*` and `pthread_cond_*`, so the
//! dynamic linker binds the program's calls here instead of to glibc.
//! Each lock lives **in place** inside the pthread object the program
//! allocated (no side table), and all-zero bytes are an unlocked lock, so
//! glibc's static initializers work without an init call.
//!
//! | pthread object (x86-64 glibc size) | klock lock in place |
//! |---|---|
//! | `pthread_mutex_t` (40) | [`klock::mutex::RawMutexCompact`]; the kind stays at byte 16 |
//! | `pthread_rwlock_t` (56) | [`klock::RawRwSem`] |
//! | `pthread_spinlock_t` (4) | [`klock::RawQSpinLock32`] |
//! | `pthread_cond_t` (48) | a futex sequence counter (as [`klock::RawCondvar`]) |
//!
//! What cannot live in place is forwarded to glibc's own functions
//! (found with `dlsym(RTLD_NEXT, ...)`) and counted
//! ([`klock_preload_forwarded`]): process-shared, robust,
//! priority-inheritance and priority-protect mutexes. The glibc kind bits
//! that `pthread_mutex_init` writes for them mark the object, so every
//! later call forwards too. Details: `docs/preload.md`.

// The in-place layouts are glibc's on x86-64: elsewhere the library is
// empty.
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
#![allow(non_camel_case_types)]

use core::ffi::c_int;
use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed,
};
use std::panic::{catch_unwind, AssertUnwindSafe};

mod cond;
mod lock_map;
mod mutex;
mod reads;
mod rwlock;
mod signal;
mod spin;
mod stat;
// The C API's deadline conversion, shared source (klock-ffi builds no
// rlib to depend on). Its polling helper is unused here.
#[allow(dead_code)]
#[path = "../../klock-ffi/src/time.rs"]
mod time;

/// Run when the dynamic linker loads the library, before the program's
/// `main`: reads `KLOCK_LOCK_MAP` (which families stay glibc's) and
/// `KLOCK_STAT` (the lock profile), and picks the owner-running oracle.
extern "C" fn on_load() {
    map_init_from_env();
    stat::init_from_env();
    oracle_default();
    lean_init();
}

/// Whether `pthread_mutex_lock`, `_trylock` and `_unlock` may take their
/// lean path (`mutex::lean`): the mutex family is klock's (not left to
/// glibc by `KLOCK_LOCK_MAP`), the profile is off and glibc's thread
/// descriptor gives the calling thread's tid, all fixed at load. One load
/// of it replaces a test of each (the families' map, the profile's
/// switch, the tid reader's check) ahead of the lock's atomic
/// instruction; with [`THREADED`] as well, a normal mutex's lock+unlock
/// pair took 8.7-9.7 ns instead of 10.3-10.8, with or without a second
/// thread, on a 2-vCPU AMD guest (glibc's 7.8-8.7; `docs/preload.md`,
/// "The lean path"). Relaxed: set at load, before the program's threads.
static MUTEX_LEAN: AtomicBool = AtomicBool::new(false);

/// Whether the mutex's lean path may run ([`MUTEX_LEAN`]): then the
/// family is klock's, the profile is off, and
/// [`klock::thread::glibc_descriptor_tid`] is the caller's tid (0 while a
/// thread is being created or torn down: the lean path checks).
#[inline(always)]
fn mutex_lean() -> bool {
    MUTEX_LEAN.load(Relaxed)
}

/// Decide at load whether the mutex may take its lean path ([`MUTEX_LEAN`]).
fn lean_init() {
    let lean = !stat::on()
        && !to_glibc(lock_map::Family::Mutex)
        && klock::thread::glibc_descriptor_tid_checks();
    MUTEX_LEAN.store(lean, Relaxed);
}

/// Under the preload the owner-running oracle is the time budget unless
/// `KLOCK_ONCPU` asks for another (`auto` or `bpf`: the eBPF one when it
/// loads). A Rust program that links klock gets `auto`, and as root the
/// eBPF program; a program run under the preload did not choose klock,
/// and that program runs at every context switch of the whole machine,
/// not of this process alone: with it loaded by one preloaded server, a
/// pipe ping-pong of two other processes on one CPU took about 5% longer
/// a round trip, while the server itself ran no faster with it than with
/// the budget (docs/preload.md, "The owner-running oracle").
fn oracle_default() {
    if std::env::var_os("KLOCK_ONCPU").is_some() {
        return;
    }
    // Fixed at first use: nothing has asked for the oracle before `main`.
    // An error would say it was fixed already, and then it was chosen by
    // whoever fixed it.
    let _ = klock::config::Config::new()
        .oracle(klock::config::Oracle::Budget)
        .apply();
}

/// The families left to glibc ([`lock_map::LockMap`] bits), from
/// `KLOCK_LOCK_MAP` at load. Relaxed: set before `main`, before the
/// program's threads exist.
static GLIBC_FAMILIES: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);

/// Read `KLOCK_LOCK_MAP`. A map that does not parse ends the program with
/// a message and status 2 before `main`: running it on locks other than
/// the ones asked for would mislead whoever compares them.
fn map_init_from_env() {
    let Some(spec) = std::env::var_os("KLOCK_LOCK_MAP") else {
        return;
    };
    match lock_map::parse(&spec.to_string_lossy()) {
        Ok(m) => GLIBC_FAMILIES.store(m.bits(), Relaxed),
        Err(e) => {
            eprintln!("klock: KLOCK_LOCK_MAP: {e}");
            // SAFETY: ends the process; nothing of the program ran yet.
            unsafe { libc::_exit(2) }
        }
    }
}

/// Whether the family `f` stays glibc's (`KLOCK_LOCK_MAP`).
#[inline(always)]
fn to_glibc(f: lock_map::Family) -> bool {
    GLIBC_FAMILIES.load(Relaxed) & f as u8 != 0
}

/// `forward_family!(Family, name: fn(ARGS) -> RET, args...)`: if the map
/// leaves `Family` to glibc, count the call as forwarded and return
/// glibc's `name(args)`. The first line of every replaced function.
macro_rules! forward_family {
    ($fam:ident, $name:ident : $($abi:literal)? fn($($arg:ty),*) -> $ret:ty, $($a:expr),*) => {
        if $crate::to_glibc($crate::lock_map::Family::$fam) {
            $crate::forwarded();
            // SAFETY: glibc's own function, with the caller's arguments.
            return unsafe { $crate::real!($name: $($abi)? fn($($arg),*) -> $ret)($($a),*) };
        }
    };
}
pub(crate) use forward_family;

/// Run at the program's `exit` (and at `dlclose`): prints the lock
/// profile if it is on.
extern "C" fn on_exit() {
    stat::report();
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

#[used]
#[link_section = ".fini_array"]
static ON_EXIT: extern "C" fn() = on_exit;

/// Calls forwarded to glibc's own functions, counted in shards chosen by
/// the calling thread's tid, each on a cache line of its own: one counter
/// that every forwarded call of every thread incremented moved between
/// the CPUs at each call, and slowed the very locks that a lock map
/// leaves to glibc for comparison.
static FORWARDED: [Shard; SHARDS] = [const { Shard(AtomicU64::new(0)) }; SHARDS];
/// Shards of [`FORWARDED`].
const SHARDS: usize = 64;

/// A counter alone on its cache line.
#[repr(align(64))]
struct Shard(AtomicU64);
/// Calls refused with `ENOTSUP` (what neither klock nor forwarding can do
/// in place: process-shared rwlocks).
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// 1: the program's pthread lock calls bind to this library (a probe
/// for tests and scripts: `dlsym(RTLD_DEFAULT, "klock_preload_active")`).
#[no_mangle]
pub extern "C" fn klock_preload_active() -> c_int {
    1
}

/// How many calls were forwarded to glibc so far.
#[no_mangle]
pub extern "C" fn klock_preload_forwarded() -> u64 {
    FORWARDED.iter().map(|s| s.0.load(Relaxed)).sum()
}

/// How many calls were refused with `ENOTSUP` so far.
#[no_mangle]
pub extern "C" fn klock_preload_refused() -> u64 {
    REFUSED.load(Relaxed)
}

/// Registered with `pthread_atfork` as the prepare handler: finish
/// klock's one-time set-ups that take a lock (the oracle's choice, the
/// spin budget's calibration, a setting read from the environment) before
/// the fork, in the forking thread. One of them half done by another
/// thread at the fork would stay half done in the child, and the child's
/// first contended lock would wait for it for ever. Each runs once per
/// process: later forks find them done. (The CPU count needs no lock.)
unsafe extern "C" fn before_fork() {
    let _ = klock::oncpu::oracle();
    let _ = klock::oncpu::base_spin_ns();
    let _ = klock::rwsem::reader_wait_ns();
}

/// Registered with `pthread_atfork` at load ([`REGISTER_ATFORK`]), so it
/// runs in a forked child before the program's own child handlers (they
/// run in the order registered): klock learns the child thread's tid, the
/// mutexes and rwlocks forget wait lists whose waiters stayed in the
/// parent, and the spinlocks forget those threads' places in their queues
/// ([`klock::after_fork_in_child`]); the lock profile, if on, clears the
/// counts the child inherited ([`stat::after_fork_in_child`]).
unsafe extern "C" fn after_fork_in_child() {
    klock::after_fork_in_child();
    stat::after_fork_in_child();
    // The child has one thread: back to glibc's flag, and to the mutex's
    // path without atomic instructions while the flag says so.
    THREADED.store(false, Relaxed);
}

extern "C" fn register_atfork() {
    // SAFETY: a handler that stays valid for the life of the process (the
    // library is never unloaded while preloaded).
    unsafe { libc::pthread_atfork(Some(before_fork), None, Some(after_fork_in_child)) };
    find_single_threaded();
}

/// glibc's `__libc_single_threaded` (glibc 2.32 and later): nonzero while
/// the process has one thread; glibc clears it when the first thread is
/// created, and sets it in a forked child. Found at load; null without it
/// (another C library, an older glibc), and then [`single_threaded`] is
/// always false.
static SINGLE_THREADED: AtomicPtr<AtomicU8> = AtomicPtr::new(core::ptr::null_mut());

fn find_single_threaded() {
    // SAFETY: a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__libc_single_threaded".as_ptr()) };
    // Relaxed: set before the program's main.
    SINGLE_THREADED.store(p.cast(), Relaxed);
}

/// Set once glibc's flag said the process has threads; cleared in a
/// forked child. glibc sets its flag again only in a forked child, so
/// until then the answer cannot change, and this one load replaces two
/// dependent ones (the flag's address, then the flag) ahead of the
/// mutex's atomic instruction (1.0-1.3 ns of a preloaded mutex pair with
/// threads, on its own, on a 2-vCPU AMD guest). Nothing depends on it
/// for exclusion: were a C library to set its flag again when threads
/// exit, the mutex would only keep its atomic path. Relaxed: a stale
/// `false` only asks glibc again.
static THREADED: AtomicBool = AtomicBool::new(false);

/// Whether the process has one thread, as glibc says: its own mutex then
/// locks and unlocks without atomic instructions, and so does the mutex
/// here (`RawMutexCompact::try_lock_single_threaded_as`). The first
/// `false` is remembered ([`THREADED`]). Relaxed: glibc clears the flag
/// in `pthread_create`, in the one thread there is, before the new
/// thread exists.
#[inline(always)]
fn single_threaded() -> bool {
    if THREADED.load(Relaxed) {
        return false;
    }
    let p = SINGLE_THREADED.load(Relaxed);
    // SAFETY: glibc's flag, a byte that lives as long as the process.
    let one = !p.is_null() && unsafe { (*p).load(Relaxed) } != 0;
    if !one {
        threaded();
    }
    one
}

/// The process has threads, for good: glibc sets its flag again only in
/// a forked child, whose fork handler clears [`THREADED`].
#[cold]
#[inline(never)]
fn threaded() {
    THREADED.store(true, Relaxed);
}

/// Runs [`register_atfork`] when the dynamic linker initialises the
/// library, before the program's `main`.
#[used]
#[link_section = ".init_array"]
static REGISTER_ATFORK: extern "C" fn() = register_atfork;

/// Count a forwarded call. Relaxed: a statistic, publishes nothing.
#[inline]
fn forwarded() {
    FORWARDED[me() as usize % SHARDS].0.fetch_add(1, Relaxed);
}

/// Count a refused call and return `ENOTSUP`.
fn refused() -> c_int {
    REFUSED.fetch_add(1, Relaxed);
    libc::ENOTSUP
}

/// Run a body: its result, or `ENOTRECOVERABLE` if it panicked (a bug:
/// nothing unwinds into C).
#[inline]
fn guarded(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(libc::ENOTRECOVERABLE)
}

// The calling thread's tid, `me()`: from glibc's thread descriptor (a
// load at a fixed offset from `%fs`; in a forked child glibc has updated
// it) where that is checked to work, else klock's cached copy, a
// thread-local, which in this shared library costs a `__tls_get_addr`
// call (see the macro).
klock::glibc_tid_reader!(fn me);

/// glibc's own definition of the function `name`: the next one after
/// this library in the lookup order, resolved once into `cache`. Aborts
/// if there is none (a C library without it could not run the program).
///
/// # Safety
/// `F` is the `unsafe extern "C" fn` type of glibc's `name`.
unsafe fn next<F: Copy>(cache: &AtomicUsize, name: &core::ffi::CStr) -> F {
    const { assert!(core::mem::size_of::<F>() == core::mem::size_of::<usize>()) };
    // Relaxed: the address names code the dynamic linker mapped and
    // relocated before `dlsym` returned it, in whichever thread; the cache
    // publishes nothing else.
    let mut a = cache.load(Relaxed);
    if a == 0 {
        // SAFETY: a NUL-terminated name; RTLD_NEXT is valid from a shared
        // object.
        a = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        if a == 0 {
            std::process::abort();
        }
        cache.store(a, Relaxed);
    }
    // SAFETY: a function pointer of the caller's type `F` (same size).
    unsafe { core::mem::transmute_copy::<usize, F>(&a) }
}

/// `real!(pthread_mutex_lock: fn(*mut pthread_mutex_t) -> c_int)`: glibc's
/// own `pthread_mutex_lock`, an `unsafe extern "C" fn` (see [`next`]).
/// Use it in an `unsafe` block.
macro_rules! real {
    ($name:ident : fn($($arg:ty),*) -> $ret:ty) => {
        $crate::real!($name: "C" fn($($arg),*) -> $ret)
    };
    // Another ABI: `"C-unwind"` for a function that may unwind (a
    // cancellation point).
    ($name:ident : $abi:literal fn($($arg:ty),*) -> $ret:ty) => {{
        static CACHE: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
        // The name with its NUL, as dlsym wants it: a constant. (Built in
        // the call, it was checked for its NUL at every forwarded call,
        // which then cost three times glibc's own: 25 ns an uncontended
        // mutex pair against 6.)
        const NAME: &core::ffi::CStr =
            match core::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                Ok(n) => n,
                Err(_) => unreachable!(),
            };
        $crate::next::<unsafe extern $abi fn($($arg),*) -> $ret>(&CACHE, NAME)
    }};
}
pub(crate) use real;
