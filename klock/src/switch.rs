//! Process-wide on/off switches of the locks (owner spinning, reader
//! spinning, …): on by default, off when an environment variable says so
//! (read once, at first use, through [`crate::config`]), and settable at
//! run time. Configuration, not
//! synchronisation: plain std atomics with `Relaxed` ordering.

use core::sync::atomic::{AtomicU8, Ordering::Relaxed};

const UNREAD: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;

/// One switch, named by its environment variable.
pub(crate) struct Switch {
    state: AtomicU8,
    var: &'static str,
}

impl Switch {
    /// A switch read from `var` at first use: `0`, `off`, `false` or `no`
    /// (any case) turn it off; anything else, or no variable, leaves it on.
    pub(crate) const fn new(var: &'static str) -> Self {
        Self {
            state: AtomicU8::new(UNREAD),
            var,
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
        let off = crate::config::env_switch(self.var) == Some(false);
        // Keep a concurrent `set` if it came first.
        let _ = self
            .state
            .compare_exchange(UNREAD, if off { OFF } else { ON }, Relaxed, Relaxed);
        self.state.load(Relaxed) == ON
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn unset_is_on_and_set_overrides() {
        let s = Switch::new("KLOCK_TEST_SWITCH_NEVER_DEFINED");
        assert!(s.get());
        s.set(false);
        assert!(!s.get());
        s.set(true);
        assert!(s.get());
    }
}
