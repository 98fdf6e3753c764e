//! Per-thread context: a small *thread index*, the cached tid, and the
//! per-thread queue nodes (MCS for the qspinlock, one for the OSQ).
//!
//! Queue tails encode a thread index (1..=[`MAX_THREADS`]) instead of a
//! pointer so they fit in a few bits of a lock word. The index is taken when
//! a thread first touches a klock lock and given back when the thread exits,
//! lowest-recently-freed first, so the highest index in use stays near the
//! peak number of live threads.
//!
//! The slot behind an index is **never freed**: it is recycled with the
//! index. So a tail read from a lock word always decodes to valid memory,
//! even if the thread it named has since exited (the lock algorithms make
//! sure such a stale node is never *written* through).
//!
//! Lookup index → slot is O(1): a fixed table of chunk pointers, each chunk
//! of [`CHUNK`] slots allocated on first use and leaked.

use crate::sync::{AtomicPtr, AtomicU32};
use crossbeam_utils::CachePadded;

/// Highest thread index (14 bits in a qspinlock tail, index + 1 ≤ 16383).
pub const MAX_THREADS: u32 = 16383;
/// MCS nodes per thread: task, plus three nesting levels (e.g. a signal
/// handler taking a spinlock while its thread is queued on another).
pub const MCS_NODES: usize = 4;
/// Slots per lazily allocated chunk of the slot table.
pub const CHUNK: usize = 64;

/// A queue node: used as an MCS node by the qspinlock and as an OSQ node by
/// the optimistic-spinning locks. Each lives on its own cache line.
#[derive(Debug)]
pub struct QNode {
    /// Hand-off flag the owner of this node spins on.
    pub locked: AtomicU32,
    /// Successor in the queue, or null.
    pub next: AtomicPtr<QNode>,
    /// Predecessor (OSQ unqueue needs it), or null.
    pub prev: AtomicPtr<QNode>,
    /// Paravirt qspinlock only: whether the waiter on this node spins
    /// (`0`, running) or sleeps on this word with a futex (halted); see
    /// [`crate::qspinlock`].
    pub state: AtomicU32,
}

impl QNode {
    fn new() -> Self {
        Self {
            locked: AtomicU32::new(0),
            next: AtomicPtr::new(core::ptr::null_mut()),
            prev: AtomicPtr::new(core::ptr::null_mut()),
            state: AtomicU32::new(0),
        }
    }
}

/// Everything klock keeps per thread index.
#[derive(Debug)]
pub struct ThreadSlot {
    /// MCS nodes, one per nesting level.
    pub mcs: [CachePadded<QNode>; MCS_NODES],
    /// How many of `mcs` are in use. Only the owning thread (or a signal
    /// handler on it, which restores it before returning) touches it.
    pub mcs_depth: AtomicU32,
    /// Node for the optimistic spin queue (a thread spins on one lock at a time).
    pub osq: CachePadded<QNode>,
    /// Kernel tid of the thread holding this index now (0 when free).
    pub tid: AtomicU32,
    /// The queued spinlocks whose slow path this thread is in, by nesting
    /// level (0: none): where it may hold the pending bit or a place in
    /// the queue. Read only by a forked child's fork handler, which clears
    /// those bits on the locks of threads that stayed in the parent
    /// (`qspinlock/fork.rs`). Plain atomics, not loom's: bookkeeping only.
    pub spin_slow: [core::sync::atomic::AtomicUsize; MCS_NODES],
    /// This slot's index (1..=MAX_THREADS), fixed for the slot's life.
    pub index: u32,
}

impl ThreadSlot {
    pub(crate) fn new(index: u32) -> Self {
        Self {
            mcs: core::array::from_fn(|_| CachePadded::new(QNode::new())),
            mcs_depth: AtomicU32::new(0),
            osq: CachePadded::new(QNode::new()),
            tid: AtomicU32::new(0),
            spin_slow: [const { core::sync::atomic::AtomicUsize::new(0) }; MCS_NODES],
            index,
        }
    }

    /// Which slot (thread index) and nesting level `node` belongs to, if it is
    /// one of this slot's MCS nodes.
    pub fn mcs_level(&self, node: *const QNode) -> Option<usize> {
        self.mcs
            .iter()
            .position(|n| core::ptr::eq(&**n as *const QNode, node))
    }
}

#[cfg(not(loom))]
mod imp {
    use super::*;
    use crate::sync::Ordering;
    use std::sync::Mutex;

    const NCHUNKS: usize = (MAX_THREADS as usize).div_ceil(CHUNK);

    type Chunk = [ThreadSlot; CHUNK];

    static CHUNKS: [AtomicPtr<Chunk>; NCHUNKS] =
        [const { AtomicPtr::new(core::ptr::null_mut()) }; NCHUNKS];
    /// Highest index ever handed out.
    static HIGH: AtomicU32 = AtomicU32::new(0);
    /// Indexes given back by exited threads. Touched once per thread
    /// lifetime, so a std mutex is fine here.
    static FREE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

    /// The slot for `index` (1..=MAX_THREADS). Allocates its chunk on first use.
    pub fn slot(index: u32) -> &'static ThreadSlot {
        assert!(
            (1..=MAX_THREADS).contains(&index),
            "thread index {index} out of range"
        );
        let i = (index - 1) as usize;
        let cell = &CHUNKS[i / CHUNK];
        // Acquire pairs with the Release CAS that published the chunk.
        let mut p = cell.load(Ordering::Acquire);
        if p.is_null() {
            let base = (i / CHUNK * CHUNK) as u32 + 1;
            let fresh: Box<Chunk> =
                Box::new(core::array::from_fn(|k| ThreadSlot::new(base + k as u32)));
            let fresh = Box::into_raw(fresh);
            match cell.compare_exchange(
                core::ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => p = fresh,
                Err(winner) => {
                    // SAFETY: `fresh` was never published.
                    drop(unsafe { Box::from_raw(fresh) });
                    p = winner;
                }
            }
        }
        // SAFETY: chunks are never freed.
        unsafe { &(*p)[i % CHUNK] }
    }

    fn take_index() -> Option<u32> {
        if let Some(i) = FREE.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Some(i);
        }
        let i = HIGH.fetch_add(1, Ordering::Relaxed) + 1;
        if i > MAX_THREADS {
            HIGH.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(i)
    }

    pub struct Ctx {
        pub slot: Option<&'static ThreadSlot>,
        /// The thread's tid; rewritten only in a forked child
        /// ([`crate::after_fork_in_child`]).
        pub tid: core::cell::Cell<u32>,
    }

    impl Drop for Ctx {
        fn drop(&mut self) {
            super::hooks::run_exit(self.tid.get());
            if let Some(s) = self.slot {
                s.tid.store(0, Ordering::Relaxed);
                s.mcs_depth.store(0, Ordering::Relaxed);
                FREE.lock().unwrap_or_else(|e| e.into_inner()).push(s.index);
            }
        }
    }

    thread_local! {
        pub static CTX: Ctx = {
            let tid = crate::sys::gettid_uncached();
            let slot = take_index().map(slot);
            if let Some(s) = slot {
                // SeqCst: pairs with the registration of a thread hook
                // and the sweep of live slots after it (see `hooks`).
                s.tid.store(tid, Ordering::SeqCst);
            }
            super::hooks::run_start(tid);
            CTX_MADE.set(true);
            Ctx { slot, tid: core::cell::Cell::new(tid) }
        };
        /// `CTX` exists on this thread (so that a fork handler can update
        /// it without creating it, which takes the index list's lock).
        pub static CTX_MADE: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    }

    /// Highest thread index handed out so far.
    pub fn high_water() -> u32 {
        HIGH.load(Ordering::Relaxed)
    }
}

#[cfg(loom)]
mod imp {
    //! Loom version: a small per-model table and a per-model index counter
    //! (loom resets its statics between executions).
    use super::*;
    use crate::sync::Ordering;

    const LOOM_THREADS: usize = 8;

    loom::lazy_static! {
        static ref SLOTS: Vec<ThreadSlot> =
            (1..=LOOM_THREADS as u32).map(ThreadSlot::new).collect();
        static ref NEXT: AtomicU32 = AtomicU32::new(0);
    }

    pub fn slot(index: u32) -> &'static ThreadSlot {
        &SLOTS[(index - 1) as usize]
    }

    pub struct Ctx {
        pub slot: Option<&'static ThreadSlot>,
        pub tid: u32,
    }

    loom::thread_local! {
        pub static CTX: Ctx = {
            let i = NEXT.fetch_add(1, Ordering::Relaxed) + 1;
            assert!(i as usize <= LOOM_THREADS, "loom model uses too many threads");
            Ctx { slot: Some(slot(i)), tid: 1000 + i }
        };
    }

    pub fn high_water() -> u32 {
        NEXT.load(Ordering::Relaxed)
    }
}

#[cfg(not(loom))]
pub use hooks::{register_hooks, ThreadHooks, MAX_HOOKS};
pub use imp::high_water;

// Callbacks run when a thread context is created or destroyed, registered
// by the layers above (the eBPF oracle keeps its table of threads with
// them), so that this module names nothing above it. Not under loom: no
// layer above registers one there.
#[cfg(not(loom))]
mod hooks {
    use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// What a layer above runs on thread start and exit, with the thread's
    /// kernel tid. Called on that thread, inside its context's creation or
    /// destruction: they must not take a klock lock.
    #[derive(Debug)]
    pub struct ThreadHooks {
        /// The thread's context was just created.
        pub start: fn(u32),
        /// The thread's context is being destroyed.
        pub exit: fn(u32),
    }

    /// How many hooks can be registered.
    pub const MAX_HOOKS: usize = 4;

    static HOOKS: [AtomicPtr<ThreadHooks>; MAX_HOOKS] =
        [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_HOOKS];
    /// How many entries of `HOOKS` are set; they are never removed.
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    /// Serialises registrations (cold).
    static REGISTER: Mutex<()> = Mutex::new(());

    /// Register `hooks` for every thread context created or destroyed from
    /// now on. Registering the same hooks again does nothing. `false` if
    /// [`MAX_HOOKS`] other hooks are registered already.
    ///
    /// To see the threads alive before the registration too, register
    /// first and then sweep [`slot`](super::slot)`(1..=`[`high_water`](super::high_water)`())`:
    /// a thread stores its tid in its slot (`SeqCst`) before it reads the
    /// hooks (`SeqCst`), and this stores the hooks (`SeqCst`) before the
    /// sweep reads the slots (`SeqCst`), so every thread is seen by its
    /// start hook or by the sweep (or both).
    pub fn register_hooks(hooks: &'static ThreadHooks) -> bool {
        let _g = REGISTER.lock().unwrap_or_else(|e| e.into_inner());
        let n = COUNT.load(Ordering::Relaxed);
        let new = hooks as *const ThreadHooks as *mut ThreadHooks;
        if HOOKS[..n]
            .iter()
            .any(|h| core::ptr::eq(h.load(Ordering::Relaxed), new))
        {
            return true;
        }
        if n == MAX_HOOKS {
            return false;
        }
        HOOKS[n].store(new, Ordering::Relaxed);
        // SeqCst: publishes the entry (Release) and orders it before the
        // caller's sweep of the slots (see the module docs).
        COUNT.store(n + 1, Ordering::SeqCst);
        true
    }

    /// The registered hooks: one load when there are none. `SeqCst`, as
    /// the thread's store of its tid before it (a plain load on x86-64).
    #[inline]
    fn each(mut f: impl FnMut(&ThreadHooks)) {
        let n = COUNT.load(Ordering::SeqCst);
        for h in &HOOKS[..n] {
            // SAFETY: set entries point at `'static` hooks and never change.
            f(unsafe { &*h.load(Ordering::Relaxed) });
        }
    }

    #[inline]
    pub(super) fn run_start(tid: u32) {
        each(|h| (h.start)(tid));
    }

    #[inline]
    pub(super) fn run_exit(tid: u32) {
        each(|h| (h.exit)(tid));
    }
}

/// The slot for thread index `index` (1..=[`MAX_THREADS`]).
#[inline]
pub fn slot(index: u32) -> &'static ThreadSlot {
    imp::slot(index)
}

/// The calling thread's slot, or `None` if it has none: more than
/// [`MAX_THREADS`] threads are alive, or the thread is being torn down
/// (its thread-locals are already destroyed). Locks must then fall back to
/// a path that needs no node.
#[inline]
pub fn current() -> Option<&'static ThreadSlot> {
    imp::CTX.try_with(|c| c.slot).ok().flatten()
}

/// The calling thread's thread index, or `None` (see [`current`]).
#[inline]
pub fn current_index() -> Option<u32> {
    current().map(|s| s.index)
}

// The cached tid: a const-initialised, destructor-free thread-local, so
// one TLS load on the locks' fast paths, with no lazy-init state to check
// (the full per-thread context `CTX` has both).
#[cfg(not(loom))]
std::thread_local! {
    static TID: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}

/// The calling thread's kernel tid, cached.
#[inline]
pub fn current_tid() -> u32 {
    #[cfg(not(loom))]
    {
        let tid = TID.get();
        if tid != 0 {
            return tid;
        }
        current_tid_slow(&TID)
    }
    #[cfg(loom)]
    {
        imp::CTX.with(|c| c.tid)
    }
}

#[doc(hidden)]
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    target_env = "gnu",
    not(loom)
))]
pub use crate::glibc_tid::{glibc_descriptor_tid, glibc_descriptor_tid_checks};

/// Defines `fn NAME() -> u32` in the calling crate: the calling thread's
/// tid, for a shared library built on klock (`libklock.so`,
/// `libklock_preload.so`), where [`current_tid`]'s thread-local is a
/// `__tls_get_addr` call away. On x86-64 glibc it reads the tid from
/// glibc's thread descriptor once [`glibc_descriptor_tid_checks`] said
/// yes (checked at the first call; the answer in a static of the calling
/// crate, since a static of klock is reached through the GOT from a
/// shared library: 0.5–1.1 ns more per preloaded mutex pair), else
/// [`current_tid`], out of line (inlined, the compiler computed the
/// thread-local's address ahead of the test, and every call paid the
/// lookup anyway). Elsewhere it is [`current_tid`].
#[doc(hidden)]
#[macro_export]
macro_rules! glibc_tid_reader {
    ($vis:vis fn $name:ident) => {
        #[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
        #[inline(always)]
        $vis fn $name() -> u32 {
            use ::core::sync::atomic::{AtomicU8, Ordering::Relaxed};
            /// Not checked yet (0), glibc's tid usable (1), not (2).
            /// Relaxed: every thread that checks finds the same.
            static CHECKED: AtomicU8 = AtomicU8::new(0);
            #[cold]
            #[inline(never)]
            fn slow() -> u32 {
                if CHECKED.load(Relaxed) == 0 {
                    let ok = $crate::thread::glibc_descriptor_tid_checks();
                    CHECKED.store(if ok { 1 } else { 2 }, Relaxed);
                    if ok {
                        return $crate::thread::glibc_descriptor_tid();
                    }
                }
                $crate::thread::current_tid()
            }
            if CHECKED.load(Relaxed) == 1 {
                let tid = $crate::thread::glibc_descriptor_tid();
                if tid != 0 {
                    return tid;
                }
            }
            slow()
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu")))]
        #[inline]
        $vis fn $name() -> u32 {
            $crate::thread::current_tid()
        }
    };
}

/// First call on this thread: fetch the tid (through `CTX`, which caches
/// it for the thread index too) and remember it.
#[cfg(not(loom))]
#[cold]
#[inline(never)]
fn current_tid_slow(cache: &'static std::thread::LocalKey<core::cell::Cell<u32>>) -> u32 {
    let tid = imp::CTX
        .try_with(|c| c.tid.get())
        .unwrap_or_else(|_| crate::sys::gettid_uncached());
    cache.set(tid);
    tid
}

/// Forks this process is a child of, counted by [`crate::after_fork_in_child`].
/// A plain atomic, not a loom one: models never fork. Relaxed: bumped in a
/// just-forked child before any other thread of it exists.
static FORK_GEN: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// This process's fork generation: how many times [`crate::after_fork_in_child`]
/// ran in it (0 in a process that is no forked child, or whose fork
/// handler did not call it). State that threads of the parent left
/// behind at a fork can be recognised by an older generation (the compact
/// mutex's wait lists, the preload's condition variables).
#[inline]
pub fn fork_generation() -> u32 {
    FORK_GEN.load(core::sync::atomic::Ordering::Relaxed)
}

/// The value a thread of this fork generation leaves in a wait-list lock
/// it holds ([`crate::waitlock::YieldLock::lock_tagged`]): never 0 (free),
/// 1 in a process that was never forked, and different in every
/// generation (up to 2^31 of them), so that a child recognises a lock
/// held by a thread that stayed in the parent.
#[inline]
pub fn fork_tag() -> u32 {
    fork_generation().wrapping_shl(1) | 1
}

/// The thread part of [`crate::after_fork_in_child`] (which see), on the
/// thread that forked: the child is a new thread with a new tid, while
/// the cached tid, the one in the thread's context and the one in its
/// slot are the parent thread's. Without this the child's locks would
/// name a thread of the parent as their owner, a tid the kernel may later
/// give to a new thread of the child. The thread keeps its index and
/// queue nodes (the child's copy of the slot table has them). It also
/// starts a new [`fork_generation`], so that the compact mutexes, the
/// rw-semaphores and the preload's condition variables forget waiters
/// that stayed in the parent. Returns the slots of every other thread
/// index handed out: each belongs to a thread that stayed in the parent,
/// or to none (an index given back by a thread that exited).
#[cfg(not(loom))]
pub(crate) fn after_fork_in_child() -> impl Iterator<Item = &'static ThreadSlot> {
    FORK_GEN.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    let tid = crate::sys::gettid_uncached();
    let _ = TID.try_with(|c| {
        if c.get() != 0 {
            c.set(tid);
        }
    });
    // The context is not created here: that takes the index list's lock,
    // which a thread of the parent may hold.
    let mut me = None;
    if imp::CTX_MADE.try_with(|m| m.get()).unwrap_or(false) {
        let _ = imp::CTX.try_with(|c| {
            c.tid.set(tid);
            if let Some(s) = c.slot {
                // Relaxed: only this thread exists in the child yet.
                s.tid.store(tid, core::sync::atomic::Ordering::Relaxed);
            }
            me = c.slot;
        });
    }
    (1..=high_water())
        .map(slot)
        .filter(move |s| !me.is_some_and(|m| core::ptr::eq(m, *s)))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn index_is_stable_and_slot_round_trips() {
        let a = current_index().unwrap();
        assert_eq!(current_index(), Some(a));
        let s = slot(a);
        assert_eq!(s.index, a);
        assert!(core::ptr::eq(s, current().unwrap()));
        assert_eq!(s.tid.load(crate::sync::Ordering::Relaxed), current_tid());
        assert_eq!(s.mcs_level(&*s.mcs[2]), Some(2));
        assert_eq!(s.mcs_level(&*s.osq), None);
    }

    #[test]
    fn live_threads_have_distinct_indexes() {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(16));
        let hs: Vec<_> = (0..16)
            .map(|_| {
                let b = barrier.clone();
                std::thread::spawn(move || {
                    let i = current_index().unwrap();
                    b.wait(); // all alive at once
                    i
                })
            })
            .collect();
        let ids: HashSet<u32> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(ids.len(), 16);
    }

    #[test]
    fn indexes_are_recycled() {
        // 20,000 short-lived threads in batches of 32: without recycling the
        // index would pass 16383 and run out; with it, the highest index
        // stays near the peak number of live threads (plus other tests'
        // threads running concurrently in this process).
        for _ in 0..625 {
            let hs: Vec<_> = (0..32)
                .map(|_| std::thread::spawn(|| current_index().expect("ran out of thread indexes")))
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        }
        let high = high_water();
        assert!(
            high < 512,
            "highest thread index {high} should stay near the peak live count"
        );
    }
}
