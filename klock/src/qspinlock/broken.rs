use super::*;

macro_rules! broken_lock {
    ($(#[$doc:meta])* $name:ident, $mode:expr, $pv:expr) => {
        $(#[$doc])*
        #[derive(Debug, Default)]
        pub struct $name<const PENDING_LOOPS: u32>(pub RawQSpinLockWith<PENDING_LOOPS, $pv>);

        impl<const PENDING_LOOPS: u32> $name<PENDING_LOOPS> {
            pub fn new() -> Self {
                Self(RawQSpinLockWith::new())
            }
            pub fn raw_lock(&self) {
                self.0.lock_with::<{ $mode }, false>();
            }
            /// As [`RawQSpinLockWith::raw_lock_token`].
            pub fn raw_lock_token(&self) -> usize {
                self.0.lock_with::<{ $mode }, true>()
            }
            /// # Safety
            /// As [`RawQSpinLockWith::raw_unlock_token`].
            pub unsafe fn raw_unlock_token(&self, token: usize) {
                unsafe { self.0.unlock_token::<{ $mode }>(token) }
            }
            pub fn raw_lock_after_observing(&self, val: u32) {
                if $pv {
                    self.0.pv_lock_slow::<{ $mode }, false>(val);
                } else {
                    self.0.lock_slow::<{ $mode }>(val);
                }
            }
            /// # Safety
            /// As [`RawQSpinLockWith::raw_unlock`].
            pub unsafe fn raw_unlock(&self) {
                unsafe { self.0.unlock_with::<{ $mode }>() }
            }
        }
    };
}

broken_lock!(
    /// Native: the MCS baton passed with `Relaxed` store and load: the
    /// new queue head can read a stale (n,0,0) from before its
    /// predecessor's set_locked and enter the critical section beside it.
    RelaxedHandoff,
    RELAXED_HANDOFF,
    false
);
broken_lock!(
    /// Native, step 4 done wrong: undo pending and spin on trylock
    /// instead of queueing. A liveness bug (head and spinner wait for
    /// each other).
    UndoPendingRetry,
    UNDO_PENDING_RETRY,
    false
);
broken_lock!(
    /// Paravirt: the unlock clears the locked byte without looking for a
    /// sleeping head (the head sleeps forever).
    BlindUnlock,
    BLIND_UNLOCK,
    true
);
broken_lock!(
    /// Paravirt: the baton pass reads the successor's state before
    /// storing the baton (a successor that halts in between sleeps
    /// forever).
    KickBeforeBaton,
    KICK_BEFORE_BATON,
    true
);
broken_lock!(
    /// Paravirt: newcomers steal even while someone holds the pending
    /// bit (a reserved hand-over is overtaken).
    StealIgnoresPending,
    STEAL_IGNORES_PENDING,
    true
);
broken_lock!(
    /// Paravirt: the queue head sleeps on a fast-path owner, whose
    /// plain-store unlock does not wake it.
    SleepOnPlainOwner,
    SLEEP_ON_PLAIN_OWNER,
    true
);
broken_lock!(
    /// Paravirt: the pending holder takes the lock with an add instead of
    /// a CAS that expects a clear locked byte (a fast-path locker holding
    /// the byte for a moment makes two owners).
    PendingTakeByAdd,
    PENDING_TAKE_BY_ADD,
    true
);
broken_lock!(
    /// Paravirt: the unlock forgets the successor that its lazy baton
    /// pass left asleep (use `raw_lock_token`/`raw_unlock_token`).
    DropDeferredKick,
    DROP_DEFERRED_KICK,
    true
);
