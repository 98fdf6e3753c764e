//! Process-wide configuration of the locks, in code.
//!
//! Every lock works without configuration. The few process-wide choices
//! (whether mutexes spin on a running owner, how the owner-running test is
//! made, …) can be made in code with [`Config`], or, for a program you do
//! not want to rebuild, with environment variables. This module is the only
//! place where klock reads its environment: a value set here wins over the
//! variable, and the variable wins over the built-in default.
//!
//! ```
//! use klock::config::{Config, Oracle};
//!
//! // Early in main, before the first lock is contended.
//! Config::new()
//!     .owner_spin(true)
//!     .rt_spin(false)
//!     .oracle(Oracle::Budget)
//!     .apply()
//!     .expect("configured before first use");
//! assert!(!klock::rtmutex::top_waiter_spin());
//! ```
//!
//! # Two kinds of setting
//!
//! * **Run-time switches** take effect at the next slow path, at any time
//!   ([`Config::owner_spin`], [`Config::spin_adapt`],
//!   [`Config::mutex_lazy_wait`], [`Config::rwsem_reader_spin`], [`Config::rwsem_adaptive`],
//!   [`Config::rwsem_reader_pass`],
//!   [`Config::rwsem_reader_wait_ns`], [`Config::rt_spin`],
//!   [`Config::rt_user_wait`], [`Config::bpf_hook`]). They are the same as
//!   the setters of their modules (e.g. [`crate::mutex::set_owner_spin`]).
//! * **Fixed at first use**: the base spin budget ([`Config::spin_ns`]) is
//!   measured or read once, when the first lock spins; the owner-running
//!   oracle ([`Config::oracle`]) is chosen once, when the first lock asks
//!   for it; the lockstat dump at exit ([`Config::lockstat_dump_at_exit`])
//!   is decided when the first tracked lock is created; the native
//!   spinlock's fast-path unlock ([`Config::spin_unlock`]) at the first
//!   such unlock.
//!   Setting one of
//!   them later has no effect, and [`Config::apply`] says so with a
//!   [`ConfigError`] naming it (after applying everything else). To change
//!   the oracle at run time, use [`crate::oncpu::use_oracle`].
//!
//! # Environment variables
//!
//! Read once each, at the first use of the setting, unless the setting was
//! made in code first. A switch is off for `0`, `off`, `false` or `no` (any
//! case) and on for anything else; unset, it keeps its default.
//!
//! | variable | setting | values | default |
//! |---|---|---|---|
//! | `KLOCK_OWNER_SPIN` | [`Config::owner_spin`] | switch | on |
//! | `KLOCK_SPIN_ADAPT` | [`Config::spin_adapt`] | switch | on |
//! | `KLOCK_MUTEX_LAZY` | [`Config::mutex_lazy_wait`] | switch | on |
//! | `KLOCK_MUTEX_FUTILE_SKIP` | [`Config::mutex_futile_skip`] | switch | on |
//! | `KLOCK_RWSEM_RSPIN` | [`Config::rwsem_reader_spin`] | switch | on |
//! | `KLOCK_RWSEM_ADAPTIVE` | [`Config::rwsem_adaptive`] | switch | on |
//! | `KLOCK_RWSEM_READER_PASS` | [`Config::rwsem_reader_pass`] | switch | off |
//! | `KLOCK_RWSEM_READER_WAIT_NS` | [`Config::rwsem_reader_wait_ns`] | ns, or `max` | `max` (no bound) |
//! | `KLOCK_RT_SPIN` | [`Config::rt_spin`] | switch | on |
//! | `KLOCK_RT_USER_WAIT` | [`Config::rt_user_wait`] | switch | on |
//! | `KLOCK_SPIN_NS` | [`Config::spin_ns`] (fixed at first use) | ns | measured: half a futex wake-up round trip, 250 ns to 20 µs |
//! | `KLOCK_ONCPU` | [`Config::oracle`] (fixed at first use) | `auto`, `bpf`, `budget` | `auto` |
//! | `KLOCK_LOCKSTAT` | [`Config::lockstat_dump_at_exit`] (fixed at first use) | `1` | off |
//! | `KLOCK_BPF_HOOK` | [`Config::bpf_hook`] | `tp_btf`, `tracepoint` | `tp_btf`, else `tracepoint` |
//! | `KLOCK_SPIN_UNLOCK` | [`Config::spin_unlock`] (fixed at first use): the native spinlock's unlock on x86-64 | `auto`, `store`, `rmw` | `auto`: the cheaper on this CPU, timed once |
//!
//! Variables that only the `klock` command or the test suite read (not the
//! library): `KLOCK_ONCPU` is also read by `klock` itself (unset: every
//! plain benchmark runs under the budget oracle); `KLOCK_REQUIRE_BPF`
//! (tests: a skipped eBPF test fails instead), `KLOCK_REQUIRE_MEMCACHED`
//! (tests: the preload's memcached test fails where memcached is missing),
//! `KLOCK_LOCKSTAT_CHILD` and
//! `KLOCK_LOOM_BROKEN_WAKE_CHILD` (tests: marks a re-executed child
//! process), `KLOCK_TEST_*` (unit tests).

use core::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::Mutex as StdMutex;

/// How a spinning waiter learns whether the lock's owner is running on a
/// CPU (see [`crate::oncpu`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Oracle {
    /// The eBPF oracle if klock was built with feature `bpf` and the
    /// program loads (root), else the budget oracle; nothing is said when
    /// the eBPF one cannot load.
    #[default]
    Auto,
    /// As `Auto`, but say on stderr why the eBPF oracle could not load.
    Bpf,
    /// The budget oracle only: unprivileged, spins for a bounded time.
    Budget,
}

/// How the eBPF oracle's program is attached to the scheduler
/// (feature `bpf`; see `oncpu_bpf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BpfHook {
    /// A BTF-typed raw tracepoint where the kernel has one, else a perf
    /// tracepoint.
    #[default]
    Auto,
    /// Only the BTF-typed raw tracepoint (`tp_btf`).
    TpBtf,
    /// Only the perf tracepoint.
    Tracepoint,
}

/// How a [`SpinLock`](crate::SpinLock) owner that took the lock on its
/// fast path releases it on x86-64 (see [`crate::qspinlock::unlock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpinUnlock {
    /// Time both at the first such unlock and keep the cheaper.
    #[default]
    Auto,
    /// A byte store of the locked byte (the kernel's x86 unlock).
    Store,
    /// A 32-bit atomic `fetch_sub` (the portable unlock).
    Rmw,
}

/// A set of settings to apply at once; unset ones are left alone.
///
/// See the [module documentation](self) for what each one does and when it
/// must be made.
#[derive(Debug, Clone, Default)]
#[must_use = "a Config does nothing until `apply` is called"]
pub struct Config {
    owner_spin: Option<bool>,
    spin_adapt: Option<bool>,
    mutex_lazy_wait: Option<bool>,
    mutex_futile_skip: Option<bool>,
    rwsem_reader_spin: Option<bool>,
    rwsem_adaptive: Option<bool>,
    rwsem_reader_pass: Option<bool>,
    rwsem_reader_wait_ns: Option<u64>,
    rt_spin: Option<bool>,
    rt_user_wait: Option<bool>,
    spin_ns: Option<u64>,
    oracle: Option<Oracle>,
    lockstat_dump_at_exit: Option<bool>,
    bpf_hook: Option<BpfHook>,
    spin_unlock: Option<SpinUnlock>,
}

impl Config {
    /// No settings: [`apply`](Self::apply) changes nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether [`crate::Mutex`] waiters spin while the owner runs
    /// (`KLOCK_OWNER_SPIN`; the kernel's `OWNER_SPIN` scheduler feature).
    /// Locks with a fixed mode ([`crate::MutexWith`]) ignore it.
    pub fn owner_spin(mut self, on: bool) -> Self {
        self.owner_spin = Some(on);
        self
    }

    /// Whether spinning locks measure if spinning pays and stop spinning
    /// when sleeping is faster (`KLOCK_SPIN_ADAPT`; see
    /// [`crate::spinadapt`]).
    pub fn spin_adapt(mut self, on: bool) -> Self {
        self.spin_adapt = Some(on);
        self
    }

    /// Whether a mutex's first waiter that an unlock woke, and that lost
    /// the lock to a thread that took it back, waits its lazy rounds on a
    /// timer instead of asking the next unlock to wake it
    /// (`KLOCK_MUTEX_LAZY`; see [`crate::mutex::lazy_wait`]).
    pub fn mutex_lazy_wait(mut self, on: bool) -> Self {
        self.mutex_lazy_wait = Some(on);
        self
    }

    /// Whether a mutex whose recent spins mostly ran out of their budget
    /// skips spinning for a while (`KLOCK_MUTEX_FUTILE_SKIP`; see
    /// [`crate::mutex::futile_skip`]).
    pub fn mutex_futile_skip(mut self, on: bool) -> Self {
        self.mutex_futile_skip = Some(on);
        self
    }

    /// Whether [`crate::RwSem`] readers spin on a running writer
    /// (`KLOCK_RWSEM_RSPIN`).
    pub fn rwsem_reader_spin(mut self, on: bool) -> Self {
        self.rwsem_reader_spin = Some(on);
        self
    }

    /// Whether [`crate::RwSem`] turns reader spinning off for a lock
    /// where it failed (`KLOCK_RWSEM_ADAPTIVE`).
    pub fn rwsem_adaptive(mut self, on: bool) -> Self {
        self.rwsem_adaptive = Some(on);
        self
    }

    /// Whether [`crate::RwSem`] readers take a lock that no writer holds
    /// past queued waiters, the first queued writer demanding a hand-off
    /// after its wait bound (`KLOCK_RWSEM_READER_PASS`; see
    /// [`crate::rwsem::reader_pass`]).
    pub fn rwsem_reader_pass(mut self, on: bool) -> Self {
        self.rwsem_reader_pass = Some(on);
        self
    }

    /// The [`crate::RwSem`] reader wait bound in ns
    /// (`KLOCK_RWSEM_READER_WAIT_NS`; see
    /// [`crate::rwsem::reader_wait_ns`]); `u64::MAX`: no bound.
    pub fn rwsem_reader_wait_ns(mut self, ns: u64) -> Self {
        self.rwsem_reader_wait_ns = Some(ns);
        self
    }

    /// Whether the top waiter of a [`crate::RtMutex`] spins while the
    /// owner runs (`KLOCK_RT_SPIN`).
    pub fn rt_spin(mut self, on: bool) -> Self {
        self.rt_spin = Some(on);
        self
    }

    /// Whether non-real-time [`crate::RtMutex`] waiters wait in userspace
    /// rather than in the kernel (`KLOCK_RT_USER_WAIT`; see
    /// [`crate::rtmutex::set_user_wait`]).
    pub fn rt_user_wait(mut self, on: bool) -> Self {
        self.rt_user_wait = Some(on);
        self
    }

    /// The base spin budget in ns (`KLOCK_SPIN_NS`; see
    /// [`crate::oncpu::base_spin_ns`]). Fixed at first use; 0 counts as 1.
    pub fn spin_ns(mut self, ns: u64) -> Self {
        self.spin_ns = Some(ns);
        self
    }

    /// The owner-running oracle (`KLOCK_ONCPU`). Fixed at first use; after
    /// that, switch with [`crate::oncpu::use_oracle`].
    pub fn oracle(mut self, oracle: Oracle) -> Self {
        self.oracle = Some(oracle);
        self
    }

    /// Print the lockstat report on stderr when the process exits
    /// (`KLOCK_LOCKSTAT=1`; see [`crate::lockstat`]). Fixed when the first
    /// tracked lock gets its class.
    pub fn lockstat_dump_at_exit(mut self, on: bool) -> Self {
        self.lockstat_dump_at_exit = Some(on);
        self
    }

    /// How the native spinlock's
    /// ([`RawQSpinLockNative`](crate::RawQSpinLockNative)) fast-path owner
    /// unlocks on x86-64 (`KLOCK_SPIN_UNLOCK`; see
    /// [`crate::qspinlock::unlock`]). Fixed at the first such unlock. The
    /// default [`crate::SpinLock`] always unlocks with the byte store
    /// there, the width of its fast path.
    pub fn spin_unlock(mut self, how: SpinUnlock) -> Self {
        self.spin_unlock = Some(how);
        self
    }

    /// How the eBPF oracle's program is attached (`KLOCK_BPF_HOOK`);
    /// used at the next load of the program.
    pub fn bpf_hook(mut self, hook: BpfHook) -> Self {
        self.bpf_hook = Some(hook);
        self
    }

    /// Apply every setting made. Run-time switches always apply; a
    /// setting that is fixed at first use and was already used is not
    /// changed, and the error names it (everything else is applied).
    pub fn apply(self) -> Result<(), ConfigError> {
        if let Some(on) = self.owner_spin {
            OWNER_SPIN.set(on);
        }
        if let Some(on) = self.spin_adapt {
            SPIN_ADAPT.set(on);
        }
        if let Some(on) = self.mutex_lazy_wait {
            MUTEX_LAZY.set(on);
        }
        if let Some(on) = self.mutex_futile_skip {
            MUTEX_FUTILE_SKIP.set(on);
        }
        if let Some(on) = self.rwsem_reader_spin {
            RWSEM_RSPIN.set(on);
        }
        if let Some(on) = self.rwsem_adaptive {
            RWSEM_ADAPTIVE.set(on);
        }
        if let Some(on) = self.rwsem_reader_pass {
            RWSEM_READER_PASS.set(on);
        }
        if let Some(ns) = self.rwsem_reader_wait_ns {
            set_rwsem_reader_wait_ns(ns);
        }
        if let Some(on) = self.rt_spin {
            RT_SPIN.set(on);
        }
        if let Some(on) = self.rt_user_wait {
            RT_USER_WAIT.set(on);
        }
        if let Some(h) = self.bpf_hook {
            *lock(&BPF_HOOK) = Some(h);
        }
        let mut too_late = Vec::new();
        if let Some(ns) = self.spin_ns {
            if !SPIN_NS.set(ns) {
                too_late.push("spin_ns");
            }
        }
        if let Some(o) = self.oracle {
            // An oracle installed by `oncpu::use_oracle` or `set_oracle`
            // fixed the setting too (see `fix_oracle`).
            if !ORACLE.set(o) {
                too_late.push("oracle");
            }
        }
        if let Some(on) = self.lockstat_dump_at_exit {
            if !LOCKSTAT_DUMP.set(on) {
                too_late.push("lockstat_dump_at_exit");
            }
        }
        if let Some(how) = self.spin_unlock {
            if !SPIN_UNLOCK.set(how) {
                too_late.push("spin_unlock");
            }
        }
        if too_late.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { too_late })
        }
    }
}

/// Settings that [`Config::apply`] could not change because they had been
/// used already (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    too_late: Vec<&'static str>,
}

impl ConfigError {
    /// The names of the [`Config`] methods whose settings were not
    /// applied.
    pub fn too_late(&self) -> &[&'static str] {
        &self.too_late
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "klock::config: set too late (already fixed at first use): {}",
            self.too_late.join(", ")
        )
    }
}

impl std::error::Error for ConfigError {}

// --- settings fixed at first use ------------------------------------------

/// A setting read once: a value set in code before that read wins over
/// the environment; a value set after it is refused. Configuration, not
/// synchronisation: a std mutex on a cold path.
struct Once<T: Copy> {
    state: StdMutex<(bool, Option<T>)>,
}

impl<T: Copy> Once<T> {
    const fn new() -> Self {
        Self {
            state: StdMutex::new((false, None)),
        }
    }

    /// Set it; `false` if it was read already.
    fn set(&self, v: T) -> bool {
        let mut s = lock(&self.state);
        if s.0 {
            return false;
        }
        s.1 = Some(v);
        true
    }

    /// Read it (from now on it is fixed): the value set in code, else
    /// `from_env()`.
    fn read(&self, from_env: impl FnOnce() -> Option<T>) -> Option<T> {
        let mut s = lock(&self.state);
        s.0 = true;
        s.1.or_else(from_env)
    }
}

fn lock<T>(m: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

static SPIN_NS: Once<u64> = Once::new();
static ORACLE: Once<Oracle> = Once::new();
static LOCKSTAT_DUMP: Once<bool> = Once::new();
static SPIN_UNLOCK: Once<SpinUnlock> = Once::new();
static BPF_HOOK: StdMutex<Option<BpfHook>> = StdMutex::new(None);

// --- run-time switches ------------------------------------------------------
//
// Process-wide on/off switches of the locks: on by default, off when an
// environment variable says so (read once, at first use), and settable at
// run time. The locks read them here (this module stores them, so that
// [`Config::apply`] needs no lock module). Configuration, not
// synchronisation: plain std atomics with `Relaxed` ordering.

const UNREAD: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;

/// One switch, named by its environment variable.
pub(crate) struct Switch {
    state: AtomicU8,
    var: &'static str,
    default_on: bool,
}

impl Switch {
    /// A switch read from `var` at first use: `0`, `off`, `false` or `no`
    /// (any case) turn it off; anything else, or no variable, leaves it on.
    pub(crate) const fn new(var: &'static str) -> Self {
        Self {
            state: AtomicU8::new(UNREAD),
            var,
            default_on: true,
        }
    }

    /// A switch that is off unless `var` turns it on (any value but `0`,
    /// `off`, `false` or `no`).
    pub(crate) const fn new_off(var: &'static str) -> Self {
        Self {
            state: AtomicU8::new(UNREAD),
            var,
            default_on: false,
        }
    }

    /// Whether the switch is on.
    #[inline]
    pub(crate) fn get(&self) -> bool {
        match self.state.load(Relaxed) {
            ON => true,
            OFF => false,
            _ => self.read_env(),
        }
    }

    /// Turn it on or off (overrides the environment).
    pub(crate) fn set(&self, on: bool) {
        self.state.store(if on { ON } else { OFF }, Relaxed);
    }

    #[cold]
    fn read_env(&self) -> bool {
        let off = !env_switch(self.var).unwrap_or(self.default_on);
        // Keep a concurrent `set` if it came first.
        let _ = self
            .state
            .compare_exchange(UNREAD, if off { OFF } else { ON }, Relaxed, Relaxed);
        self.state.load(Relaxed) == ON
    }
}

/// `KLOCK_OWNER_SPIN`: [`crate::mutex::owner_spin`].
pub(crate) static OWNER_SPIN: Switch = Switch::new("KLOCK_OWNER_SPIN");
/// `KLOCK_SPIN_ADAPT`: [`crate::spinadapt::enabled`].
pub(crate) static SPIN_ADAPT: Switch = Switch::new("KLOCK_SPIN_ADAPT");
/// `KLOCK_MUTEX_LAZY`: [`crate::mutex::lazy_wait`].
pub(crate) static MUTEX_LAZY: Switch = Switch::new("KLOCK_MUTEX_LAZY");
/// `KLOCK_MUTEX_FUTILE_SKIP`: [`crate::mutex::futile_skip`].
pub(crate) static MUTEX_FUTILE_SKIP: Switch = Switch::new("KLOCK_MUTEX_FUTILE_SKIP");
/// `KLOCK_RT_SPIN`: [`crate::rtmutex::top_waiter_spin`].
pub(crate) static RT_SPIN: Switch = Switch::new("KLOCK_RT_SPIN");
/// `KLOCK_RT_USER_WAIT`: [`crate::rtmutex::user_wait`].
pub(crate) static RT_USER_WAIT: Switch = Switch::new("KLOCK_RT_USER_WAIT");
/// `KLOCK_RWSEM_RSPIN`: [`crate::rwsem::reader_spin`].
pub(crate) static RWSEM_RSPIN: Switch = Switch::new("KLOCK_RWSEM_RSPIN");
/// `KLOCK_RWSEM_ADAPTIVE`: [`crate::rwsem::adaptive`].
pub(crate) static RWSEM_ADAPTIVE: Switch = Switch::new("KLOCK_RWSEM_ADAPTIVE");
/// `KLOCK_RWSEM_READER_PASS`: [`crate::rwsem::reader_pass`].
pub(crate) static RWSEM_READER_PASS: Switch = Switch::new_off("KLOCK_RWSEM_READER_PASS");

/// The rw-semaphore's default reader wait bound: none (see
/// [`crate::rwsem::DEFAULT_READER_WAIT_NS`]).
pub(crate) const DEFAULT_RWSEM_READER_WAIT_NS: u64 = u64::MAX;
static RWSEM_READER_WAIT: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(DEFAULT_RWSEM_READER_WAIT_NS);
static RWSEM_READER_WAIT_ENV: std::sync::Once = std::sync::Once::new();

/// `KLOCK_RWSEM_READER_WAIT_NS` ([`crate::rwsem::reader_wait_ns`]): read
/// from the environment at the first call, unless
/// [`set_rwsem_reader_wait_ns`] came first.
pub(crate) fn rwsem_reader_wait_ns() -> u64 {
    RWSEM_READER_WAIT_ENV.call_once(|| {
        if let Some(ns) = env_ns("KLOCK_RWSEM_READER_WAIT_NS") {
            RWSEM_READER_WAIT.store(ns, Relaxed);
        }
    });
    // Relaxed: a setting; it publishes nothing else.
    RWSEM_READER_WAIT.load(Relaxed)
}

/// Set the rw-semaphore's reader wait bound (overrides the environment).
pub(crate) fn set_rwsem_reader_wait_ns(ns: u64) {
    RWSEM_READER_WAIT_ENV.call_once(|| {});
    RWSEM_READER_WAIT.store(ns, Relaxed);
}

// --- what the locks call ----------------------------------------------------

/// The base spin budget, if set in code or by `KLOCK_SPIN_NS` (else the
/// caller measures it). Fixes the setting.
// Not read under loom (fixed spin budget, no lockstat).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn spin_ns() -> Option<u64> {
    SPIN_NS.read(|| env_u64("KLOCK_SPIN_NS"))
}

/// The oracle to install on first use. Fixes the setting.
pub(crate) fn oracle() -> Oracle {
    ORACLE
        .read(|| {
            let v = std::env::var("KLOCK_ONCPU").ok()?;
            Some(match v.trim() {
                "" | "auto" => Oracle::Auto,
                "budget" => Oracle::Budget,
                "bpf" => Oracle::Bpf,
                other => {
                    eprintln!(
                        "klock: KLOCK_ONCPU={other:?} is not one of auto, bpf, budget; using auto"
                    );
                    Oracle::Auto
                }
            })
        })
        .unwrap_or_default()
}

/// An oracle was installed without reading the setting (chosen in code
/// with `oncpu::use_oracle` or `set_oracle`): the setting will never be
/// consulted, so fix it as it is.
pub(crate) fn fix_oracle() {
    let _ = ORACLE.read(|| None);
}

/// How a spinlock's fast-path owner unlocks. Fixes the setting.
// Read only on x86-64 outside loom (elsewhere the unlock is always an RMW).
#[cfg_attr(not(all(target_arch = "x86_64", not(loom))), allow(dead_code))]
pub(crate) fn spin_unlock() -> SpinUnlock {
    SPIN_UNLOCK
        .read(|| {
            let v = std::env::var("KLOCK_SPIN_UNLOCK").ok()?;
            Some(match v.trim() {
                "" | "auto" => SpinUnlock::Auto,
                "store" => SpinUnlock::Store,
                "rmw" => SpinUnlock::Rmw,
                other => {
                    eprintln!(
                        "klock: KLOCK_SPIN_UNLOCK={other:?} is not one of auto, store, rmw; using auto"
                    );
                    SpinUnlock::Auto
                }
            })
        })
        .unwrap_or_default()
}

/// Whether to print the lockstat report at exit. Fixes the setting.
// Not read under loom (fixed spin budget, no lockstat).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn lockstat_dump_at_exit() -> bool {
    LOCKSTAT_DUMP
        .read(|| Some(std::env::var("KLOCK_LOCKSTAT").is_ok_and(|v| v.trim() == "1")))
        .unwrap_or(false)
}

/// The eBPF program's hook, set in code, else from `KLOCK_BPF_HOOK` (read
/// at each call: each load of the program). An unknown value is an error
/// that names it.
#[cfg_attr(not(all(feature = "bpf", not(loom))), allow(dead_code))]
pub(crate) fn bpf_hook() -> Result<BpfHook, String> {
    if let Some(h) = *lock(&BPF_HOOK) {
        return Ok(h);
    }
    match std::env::var("KLOCK_BPF_HOOK").as_deref().map(str::trim) {
        Ok("tp_btf") => Ok(BpfHook::TpBtf),
        Ok("tracepoint") => Ok(BpfHook::Tracepoint),
        Ok("") | Err(_) => Ok(BpfHook::Auto),
        Ok(other) => Err(format!(
            "KLOCK_BPF_HOOK={other:?} is not tp_btf or tracepoint"
        )),
    }
}

/// A run-time switch's environment default: `None` if `var` is unset,
/// else whether it is on (see [`says_off`]).
pub(crate) fn env_switch(var: &str) -> Option<bool> {
    std::env::var(var).ok().map(|v| !says_off(&v))
}

/// A duration in ns from `var`: a number, or `max` for `u64::MAX`;
/// `None` if unset or not a number.
pub(crate) fn env_ns(var: &str) -> Option<u64> {
    let v = std::env::var(var).ok()?;
    if v.trim() == "max" {
        Some(u64::MAX)
    } else {
        v.trim().parse().ok()
    }
}

// Not read under loom (fixed spin budget, no lockstat).
#[cfg_attr(loom, allow(dead_code))]
fn env_u64(var: &str) -> Option<u64> {
    std::env::var(var).ok()?.trim().parse().ok()
}

/// Whether an environment value turns a switch off.
fn says_off(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "0" | "off" | "false" | "no"
    )
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn values_that_turn_a_switch_off() {
        for v in ["0", "off", " Off ", "FALSE", "no"] {
            assert!(says_off(v), "{v:?}");
        }
        for v in ["1", "on", "", "yes", "offf"] {
            assert!(!says_off(v), "{v:?}");
        }
    }

    #[test]
    fn unset_switch_has_no_environment_default() {
        assert_eq!(env_switch("KLOCK_TEST_CONFIG_NEVER_DEFINED"), None);
        assert_eq!(env_ns("KLOCK_TEST_CONFIG_NEVER_DEFINED"), None);
    }

    #[test]
    fn once_setting_wins_before_the_read_and_is_refused_after() {
        let s: Once<u64> = Once::new();
        assert!(s.set(7));
        assert_eq!(s.read(|| Some(3)), Some(7), "the value set in code wins");
        assert!(!s.set(9), "set after the read must be refused");
        assert_eq!(s.read(|| Some(3)), Some(7));

        let e: Once<u64> = Once::new();
        assert_eq!(e.read(|| Some(3)), Some(3), "unset: the environment");
        let n: Once<u64> = Once::new();
        assert_eq!(n.read(|| None), None, "neither: the built-in default");
    }

    #[test]
    fn a_fixed_setting_set_late_is_named_in_the_error() {
        // The base spin budget is fixed by the first read.
        let base = crate::oncpu::base_spin_ns();
        let e = Config::new().spin_ns(base + 1).apply().unwrap_err();
        assert_eq!(e.too_late(), ["spin_ns"]);
        assert!(e.to_string().contains("spin_ns"), "{e}");
        assert_eq!(crate::oncpu::base_spin_ns(), base, "unchanged");
    }

    #[test]
    fn unset_is_on_and_set_overrides() {
        let s = Switch::new("KLOCK_TEST_SWITCH_NEVER_DEFINED");
        assert!(s.get());
        s.set(false);
        assert!(!s.get());
        s.set(true);
        assert!(s.get());
    }

    #[test]
    fn a_default_off_switch_is_off_unset_and_set_overrides() {
        let s = Switch::new_off("KLOCK_TEST_SWITCH_NEVER_DEFINED");
        assert!(!s.get());
        s.set(true);
        assert!(s.get());
        s.set(false);
        assert!(!s.get());
    }

    #[test]
    fn bpf_hook_set_in_code_wins_over_the_environment() {
        // Only this test sets the hook; the program is loaded (by other
        // tests) with whatever it says, and every hook works where any does.
        Config::new().bpf_hook(BpfHook::Tracepoint).apply().unwrap();
        assert_eq!(bpf_hook(), Ok(BpfHook::Tracepoint));
        *lock(&BPF_HOOK) = None;
    }
}
