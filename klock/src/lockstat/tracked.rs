//! The [`Tracked`] wrapper: any `lock_api` raw lock, timed and counted
//! into its class's rows (see the [module docs](super)).

// --- the wrapper ----------------------------------------------------------

use super::{enabled, now, Class, LockStat, Mode};
use std::panic::Location;

/// Any `lock_api` raw mutex or rwlock, with lockstat tracking.
///
/// Build it with [`Tracked::named`] or [`Tracked::here`] (class = the call
/// site) and wrap it with `lock_api::Mutex::from_raw` /
/// `lock_api::RwLock::from_raw` (or use [`spinlock`], [`mutex`],
/// [`rwlock`]). A lock made by `INIT` (`lock_api::Mutex::new`, statics)
/// gets a class named after the raw lock type, shared by all such locks.
///
/// Lock calls through `lock_api`'s `Mutex`/`RwLock` are `#[track_caller]`,
/// so the contention points are the user's own `lock()` / `read()` /
/// `write()` lines.
#[derive(Debug)]
pub struct Tracked<R> {
    raw: R,
    stat: LockStat,
}

/// Guard state of a [`Tracked`] lock: the inner lock's guard and the
/// acquisition time (0 when collection was off).
#[derive(Debug)]
pub struct TrackedGuard<G> {
    inner: G,
    acquired_ns: u64,
}

/// A tracked `lock_api::Mutex`.
pub type TrackedMutex<R, T> = lock_api::Mutex<Tracked<R>, T>;
/// A tracked `lock_api::RwLock`.
pub type TrackedRwLock<R, T> = lock_api::RwLock<Tracked<R>, T>;

impl<R> Tracked<R> {
    /// Wrap `raw` in `class`.
    pub fn with_class(raw: R, class: Class) -> Self {
        Self {
            raw,
            stat: LockStat::new(class),
        }
    }

    /// The wrapped lock.
    pub fn inner(&self) -> &R {
        &self.raw
    }

    /// This lock's class.
    pub fn class(&self) -> Class {
        Class(self.stat.class_or(|| short_type_name::<R>()))
    }

    /// Time a lock operation: `try_` first; if it fails, record a contention
    /// at `site` and `block`.
    #[inline(always)]
    fn acquire<G>(
        &self,
        mode: Mode,
        site: &'static Location<'static>,
        try_: impl FnOnce() -> Option<G>,
        block: impl FnOnce() -> G,
    ) -> TrackedGuard<G> {
        if !enabled() {
            return TrackedGuard {
                inner: block(),
                acquired_ns: 0,
            };
        }
        self.class();
        let (inner, contention) = match try_() {
            Some(g) => (g, None),
            None => {
                let c = self.stat.contended(mode, site);
                (block(), Some(c))
            }
        };
        let acquired_ns = self.stat.acquired(mode, contention);
        TrackedGuard { inner, acquired_ns }
    }

    #[inline(always)]
    fn try_acquire<G>(
        &self,
        mode: Mode,
        try_: impl FnOnce() -> Option<G>,
    ) -> Option<TrackedGuard<G>> {
        if !enabled() {
            return try_().map(|inner| TrackedGuard {
                inner,
                acquired_ns: 0,
            });
        }
        self.class();
        match try_() {
            Some(inner) => Some(TrackedGuard {
                inner,
                acquired_ns: self.stat.acquired(mode, None),
            }),
            None => {
                self.stat.rejected(mode);
                None
            }
        }
    }

    /// Record the hold that ends now (called right after the inner unlock).
    #[inline(always)]
    fn release(&self, mode: Mode, acquired_ns: u64) {
        if acquired_ns != 0 {
            self.stat.released(mode, acquired_ns, now());
        }
    }
}

impl<R: lock_api::RawMutex> Tracked<R> {
    /// A fresh tracked lock in the class `name`.
    pub fn named(name: &str) -> Self {
        Self::with_class(R::INIT, Class::named(name))
    }

    /// A fresh tracked lock whose class is the caller's location.
    #[track_caller]
    pub fn here() -> Self {
        Self::with_class(R::INIT, Class::here())
    }
}

impl<R: lock_api::RawRwLock> Tracked<R> {
    /// A fresh tracked rwlock in the class `name`.
    pub fn named_rw(name: &str) -> Self {
        Self::with_class(R::INIT, Class::named(name))
    }

    /// A fresh tracked rwlock whose class is the caller's location.
    #[track_caller]
    pub fn here_rw() -> Self {
        Self::with_class(R::INIT, Class::here())
    }
}

/// The type's name without module paths, its parameters' included:
/// `klock::qspinlock::RawQSpinLockWith<512, true, klock::qspinlock::word::Word64>`
/// → `RawQSpinLockWith<512, true, Word64>`.
pub(super) fn short_type_name<R>() -> String {
    let full = std::any::type_name::<R>();
    let mut out = String::with_capacity(full.len());
    // Where the path being read began in `out`: a `::` drops it.
    let mut path_start = 0;
    let mut rest = full;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("::") {
            out.truncate(path_start);
            rest = after;
            continue;
        }
        out.push(c);
        if !(c.is_alphanumeric() || c == '_') {
            path_start = out.len();
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

// SAFETY: delegates every operation to `R` with `R`'s own guard; tracking
// only reads the clock and writes statistics.
unsafe impl<R: lock_api::RawMutex> lock_api::RawMutex for Tracked<R> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self {
        raw: R::INIT,
        stat: LockStat::unassigned(),
    };
    type Guard = TrackedGuard<R::Guard>;

    #[inline]
    #[track_caller]
    fn lock(&self) -> Self::Guard {
        let site = Location::caller();
        self.acquire(
            Mode::Write,
            site,
            || self.raw.try_lock(),
            || self.raw.lock(),
        )
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        self.try_acquire(Mode::Write, || self.raw.try_lock())
    }

    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        // SAFETY: the caller passes the guard of a hold of this lock.
        unsafe { self.raw.unlock(guard.inner) };
        self.release(Mode::Write, guard.acquired_ns);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }
}

// SAFETY: as for the mutex impl.
unsafe impl<R: lock_api::RawRwLock> lock_api::RawRwLock for Tracked<R> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self {
        raw: R::INIT,
        stat: LockStat::unassigned(),
    };
    type SharedGuard = TrackedGuard<R::SharedGuard>;
    type ExclusiveGuard = TrackedGuard<R::ExclusiveGuard>;

    #[inline]
    #[track_caller]
    fn lock_shared(&self) -> Self::SharedGuard {
        let site = Location::caller();
        self.acquire(
            Mode::Read,
            site,
            || self.raw.try_lock_shared(),
            || self.raw.lock_shared(),
        )
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<Self::SharedGuard> {
        self.try_acquire(Mode::Read, || self.raw.try_lock_shared())
    }

    #[inline]
    unsafe fn unlock_shared(&self, guard: Self::SharedGuard) {
        // SAFETY: the caller passes the guard of a shared hold of this lock.
        unsafe { self.raw.unlock_shared(guard.inner) };
        self.release(Mode::Read, guard.acquired_ns);
    }

    #[inline]
    #[track_caller]
    fn lock_exclusive(&self) -> Self::ExclusiveGuard {
        let site = Location::caller();
        self.acquire(
            Mode::Write,
            site,
            || self.raw.try_lock_exclusive(),
            || self.raw.lock_exclusive(),
        )
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<Self::ExclusiveGuard> {
        self.try_acquire(Mode::Write, || self.raw.try_lock_exclusive())
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, guard: Self::ExclusiveGuard) {
        // SAFETY: the caller passes the guard of an exclusive hold of this lock.
        unsafe { self.raw.unlock_exclusive(guard.inner) };
        self.release(Mode::Write, guard.acquired_ns);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.raw.is_locked_exclusive()
    }
}

/// A tracked [`crate::SpinLock`] whose class is the caller's location.
#[track_caller]
pub fn spinlock<T>(value: T) -> TrackedMutex<crate::qspinlock::RawQSpinLock, T> {
    lock_api::Mutex::from_raw(Tracked::here(), value)
}

/// A tracked [`crate::Mutex`] whose class is the caller's location.
#[track_caller]
pub fn mutex<T>(value: T) -> TrackedMutex<crate::mutex::RawMutex, T> {
    lock_api::Mutex::from_raw(Tracked::here(), value)
}

/// A tracked [`crate::RwLock`] whose class is the caller's location.
#[track_caller]
pub fn rwlock<T>(value: T) -> TrackedRwLock<crate::qrwlock::RawQRwLock, T> {
    lock_api::RwLock::from_raw(Tracked::here_rw(), value)
}
