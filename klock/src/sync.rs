//! Atomics shim: `std` normally, `loom` under `--cfg loom`.
//!
//! Every lock in klock takes its atomics, `UnsafeCell` and spin hint from
//! here, so the same source is model-checked by loom and compiled for real.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};

pub use std::sync::atomic::Ordering;

/// One iteration of a busy-wait loop.
///
/// Under loom this yields, which tells the model checker that the thread
/// cannot make progress until another thread runs.
#[inline(always)]
pub fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// `UnsafeCell` with loom's closure API, so data guarded by a lock is
/// access-checked under loom and is a plain `UnsafeCell` otherwise.
#[cfg(not(loom))]
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct UnsafeCell<T: ?Sized>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> UnsafeCell<T> {
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    #[inline(always)]
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub use loom::cell::UnsafeCell;

/// A tunable (in ns) that a loom model may override per lock: the
/// override when set (`u64::MAX` means unset), else `global()`. Without
/// loom, locks carry no override and call `global()` directly.
#[cfg(loom)]
#[inline]
pub fn loom_tunable(over: &core::sync::atomic::AtomicU64, global: fn() -> u64) -> u64 {
    match over.load(Ordering::Relaxed) {
        u64::MAX => global(),
        ns => ns,
    }
}
