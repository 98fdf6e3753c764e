/*
 * klock: the Linux kernel's locks in userspace, the C API.
 * Link with -lklock -lpthread. Generated from klock-ffi/src by cbindgen:
 * do not edit.
 */

#ifndef KLOCK_H
#define KLOCK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <errno.h>
#include <time.h>
#define KLOCK_ALIGNED(n) __attribute__((aligned(n)))

/* Static initializers: all-zero bytes are an unlocked lock. */
#define KLOCK_MUTEX_INITIALIZER { { 0 } }
#define KLOCK_RWSEM_INITIALIZER { { 0 } }
#define KLOCK_SPINLOCK_INITIALIZER { { 0 } }
#define KLOCK_RWLOCK_INITIALIZER { { 0 } }
#define KLOCK_RTMUTEX_INITIALIZER { { 0 } }
#define KLOCK_COND_INITIALIZER { { 0 } }

/**
 * A condition variable for `klock_mutex_t` (a futex on a sequence
 * number; waits may wake spuriously: wait in a loop on a predicate).
 * Opaque; 32 bytes, 8-byte aligned (part of the ABI). All-zero bytes
 * (`KLOCK_COND_INITIALIZER`) are a condition variable nobody waits on.
 */
typedef struct KLOCK_ALIGNED(8) klock_cond_t {
  uint8_t _opaque[32];
} klock_cond_t;

/**
 * A mutex: the kernel's `struct mutex` (waiters spin while the owner
 * runs, then sleep in FIFO order; hand-off against starvation). Opaque;
 * 128 bytes, 8-byte aligned (part of the ABI). Initialise with
 * `KLOCK_MUTEX_INITIALIZER` or `klock_mutex_init`. Error-checking: a
 * relock by the owner is `EDEADLK`, an unlock by a non-owner `EPERM`.
 */
typedef struct KLOCK_ALIGNED(8) klock_mutex_t {
  uint8_t _opaque[128];
} klock_mutex_t;

/**
 * A priority-inheritance mutex: the kernel's PI futex with userspace
 * fast paths (the kernel boosts the owner while a higher-priority thread
 * waits). For real-time threads of different priorities sharing data.
 * Opaque; 64 bytes, 8-byte aligned (part of the ABI). Initialise with
 * `KLOCK_RTMUTEX_INITIALIZER` or `klock_rtmutex_init`.
 */
typedef struct KLOCK_ALIGNED(8) klock_rtmutex_t {
  uint8_t _opaque[64];
} klock_rtmutex_t;

/**
 * A reader-writer spinlock: the kernel's queued rwlock (readers share;
 * contended lockers queue FIFO on a queued spinlock; a waiting writer
 * blocks new readers). For read-mostly data with short critical sections
 * and threads ≤ CPUs. Opaque; 32 bytes, 8-byte aligned (part of the
 * ABI). Initialise with `KLOCK_RWLOCK_INITIALIZER` or
 * `klock_rwlock_init`. One `klock_rwlock_unlock` releases either kind of
 * hold. The lock has no timed slow path: the timed functions poll a
 * try-lock (spin, yield, then naps of at most 100 µs) without queueing,
 * so under steady contention they may lose to queued lockers until
 * their deadline.
 */
typedef struct KLOCK_ALIGNED(8) klock_rwlock_t {
  uint8_t _opaque[32];
} klock_rwlock_t;

/**
 * A read-write semaphore: the kernel's `struct rw_semaphore` (readers
 * share, writers exclude; optimistic spinning on a running writer, then
 * sleeping). For read-mostly data with long or sleeping read sections.
 * Opaque; 96 bytes, 8-byte aligned (part of the ABI). Initialise with
 * `KLOCK_RWSEM_INITIALIZER` or `klock_rwsem_init`. One
 * `klock_rwsem_unlock` releases either kind of hold.
 */
typedef struct KLOCK_ALIGNED(8) klock_rwsem_t {
  uint8_t _opaque[96];
} klock_rwsem_t;

/**
 * A spinlock: the kernel's queued spinlock with its paravirt slow path
 * (waiters queue FIFO and spin only while it pays, then sleep). For tiny
 * critical sections. Opaque; 32 bytes, 8-byte aligned (part of the ABI).
 * Initialise with `KLOCK_SPINLOCK_INITIALIZER` or `klock_spin_init`. No
 * timed lock (POSIX spinlocks have none either).
 */
typedef struct KLOCK_ALIGNED(8) klock_spinlock_t {
  uint8_t _opaque[32];
} klock_spinlock_t;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * Initialise `c`. Same as `KLOCK_COND_INITIALIZER`; `attr` is reserved
 * and must be null.
 *
 * # Safety
 * `c` is null or points to writable memory no other thread uses now.
 */
int klock_cond_init(struct klock_cond_t *c, const void *attr);

/**
 * Destroy `c`: 0 (waiters are not detected: destroying a condition
 * variable somebody waits on is undefined, as in POSIX).
 *
 * # Safety
 * `c` is null or points to an initialised `klock_cond_t`.
 */
int klock_cond_destroy(struct klock_cond_t *c);

/**
 * Atomically unlock `m` and wait for a signal on `c`, then lock `m`
 * again. Returns 0 (possibly spuriously), or `EPERM` if the calling
 * thread does not hold `m`.
 *
 * # Safety
 * `c` and `m` are null or point to initialised objects of this API.
 */
int klock_cond_wait(struct klock_cond_t *c, struct klock_mutex_t *m);

/**
 * As `klock_cond_wait`, until the absolute `CLOCK_MONOTONIC` deadline
 * `abstime`: 0, `ETIMEDOUT` (`m` is locked again either way), `EPERM`,
 * or `EINVAL` (bad `abstime`; `m` stays locked, no wait).
 *
 * # Safety
 * As `klock_cond_wait`; `abstime` is null or readable.
 */
int klock_cond_timedwait(struct klock_cond_t *c,
                         struct klock_mutex_t *m,
                         const struct timespec *abstime);

/**
 * As `klock_cond_timedwait`, with the deadline on `clock`
 * (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
 *
 * # Safety
 * As `klock_cond_timedwait`.
 */
int klock_cond_clockwait(struct klock_cond_t *c,
                         struct klock_mutex_t *m,
                         clockid_t clock,
                         const struct timespec *abstime);

/**
 * Wake one waiter of `c`, if any. 0.
 *
 * # Safety
 * `c` is null or points to an initialised `klock_cond_t`.
 */
int klock_cond_signal(struct klock_cond_t *c);

/**
 * Wake every waiter of `c`. 0.
 *
 * # Safety
 * `c` is null or points to an initialised `klock_cond_t`.
 */
int klock_cond_broadcast(struct klock_cond_t *c);

/**
 * Initialise `m` as an unlocked mutex. Same as
 * `KLOCK_MUTEX_INITIALIZER`; `attr` is reserved and must be null.
 * Returns 0, or `EINVAL` (null `m`, non-null `attr`).
 *
 * # Safety
 * `m` is null or points to writable memory no other thread uses now.
 */
int klock_mutex_init(struct klock_mutex_t *m, const void *attr);

/**
 * Destroy `m`: 0, or `EBUSY` if it is locked. Nothing is freed (the lock
 * owns no memory); it may be initialised again.
 *
 * # Safety
 * `m` is null or points to a `klock_mutex_t` initialised by this API.
 */
int klock_mutex_destroy(struct klock_mutex_t *m);

/**
 * Lock `m`, waiting as long as it takes. 0, or `EDEADLK` if the calling
 * thread already holds it.
 *
 * # Safety
 * `m` is null or points to a `klock_mutex_t` initialised by this API.
 */
int klock_mutex_lock(struct klock_mutex_t *m);

/**
 * Lock `m` if it is free: 0, or `EBUSY` (also when the calling thread
 * holds it).
 *
 * # Safety
 * `m` is null or points to a `klock_mutex_t` initialised by this API.
 */
int klock_mutex_trylock(struct klock_mutex_t *m);

/**
 * Lock `m` unless the absolute `CLOCK_MONOTONIC` deadline `abstime`
 * passes first: 0, `ETIMEDOUT`, `EDEADLK` (already held by the caller),
 * or `EINVAL` (bad `abstime`).
 *
 * # Safety
 * `m` is null or points to a `klock_mutex_t` initialised by this API;
 * `abstime` is null or readable.
 */
int klock_mutex_timedlock(struct klock_mutex_t *m, const struct timespec *abstime);

/**
 * As `klock_mutex_timedlock`, with the deadline on `clock`
 * (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
 *
 * # Safety
 * As `klock_mutex_timedlock`.
 */
int klock_mutex_clocklock(struct klock_mutex_t *m, clockid_t clock, const struct timespec *abstime);

/**
 * Unlock `m`: 0, or `EPERM` if the calling thread does not hold it.
 *
 * # Safety
 * `m` is null or points to a `klock_mutex_t` initialised by this API.
 */
int klock_mutex_unlock(struct klock_mutex_t *m);

/**
 * Initialise `m` as an unlocked PI mutex. Same as
 * `KLOCK_RTMUTEX_INITIALIZER`; `attr` is reserved and must be null.
 *
 * # Safety
 * `m` is null or points to writable memory no other thread uses now.
 */
int klock_rtmutex_init(struct klock_rtmutex_t *m, const void *attr);

/**
 * Destroy `m`: 0, or `EBUSY` if it is locked.
 *
 * # Safety
 * `m` is null or points to an initialised `klock_rtmutex_t`.
 */
int klock_rtmutex_destroy(struct klock_rtmutex_t *m);

/**
 * Lock `m`: 0, `EDEADLK` (the calling thread holds it, or waiting would
 * close a cycle of PI-lock owners), or another errno from the kernel.
 *
 * # Safety
 * `m` is null or points to an initialised `klock_rtmutex_t`.
 */
int klock_rtmutex_lock(struct klock_rtmutex_t *m);

/**
 * Lock `m` if it is free: 0 or `EBUSY` (also when the caller holds it).
 *
 * # Safety
 * `m` is null or points to an initialised `klock_rtmutex_t`.
 */
int klock_rtmutex_trylock(struct klock_rtmutex_t *m);

/**
 * Lock `m` unless the absolute `CLOCK_MONOTONIC` deadline `abstime`
 * passes first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL` (bad `abstime`).
 *
 * # Safety
 * `m` is null or points to an initialised `klock_rtmutex_t`; `abstime`
 * is null or readable.
 */
int klock_rtmutex_timedlock(struct klock_rtmutex_t *m, const struct timespec *abstime);

/**
 * As `klock_rtmutex_timedlock`, with the deadline on `clock`
 * (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
 *
 * # Safety
 * As `klock_rtmutex_timedlock`.
 */
int klock_rtmutex_clocklock(struct klock_rtmutex_t *m,
                            clockid_t clock,
                            const struct timespec *abstime);

/**
 * Unlock `m`: 0, or `EPERM` if the calling thread does not hold it.
 *
 * # Safety
 * `m` is null or points to an initialised `klock_rtmutex_t`.
 */
int klock_rtmutex_unlock(struct klock_rtmutex_t *m);

/**
 * Initialise `l` as an unlocked rwlock. Same as
 * `KLOCK_RWLOCK_INITIALIZER`; `attr` is reserved and must be null.
 *
 * # Safety
 * `l` is null or points to writable memory no other thread uses now.
 */
int klock_rwlock_init(struct klock_rwlock_t *l, const void *attr);

/**
 * Destroy `l`: 0, or `EBUSY` if it is held.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwlock_t`.
 */
int klock_rwlock_destroy(struct klock_rwlock_t *l);

/**
 * Read-lock `l`: 0, or `EDEADLK` if the calling thread write-holds it.
 * A thread that already read-holds `l` must not read-lock it again (a
 * waiting writer would block it: not detected).
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwlock_t`.
 */
int klock_rwlock_rdlock(struct klock_rwlock_t *l);

/**
 * Read-lock `l` if that needs no waiting: 0 or `EBUSY`.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwlock_t`.
 */
int klock_rwlock_tryrdlock(struct klock_rwlock_t *l);

/**
 * Read-lock `l` unless the absolute `CLOCK_MONOTONIC` deadline `abstime`
 * passes first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL` (bad `abstime`).
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwlock_t`; `abstime` is
 * null or readable.
 */
int klock_rwlock_timedrdlock(struct klock_rwlock_t *l, const struct timespec *abstime);

/**
 * As `klock_rwlock_timedrdlock`, with the deadline on `clock`
 * (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
 *
 * # Safety
 * As `klock_rwlock_timedrdlock`.
 */
int klock_rwlock_clockrdlock(struct klock_rwlock_t *l,
                             clockid_t clock,
                             const struct timespec *abstime);

/**
 * Write-lock `l`: 0, or `EDEADLK` if the calling thread write-holds it.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwlock_t`.
 */
int klock_rwlock_wrlock(struct klock_rwlock_t *l);

/**
 * Write-lock `l` if it is free: 0 or `EBUSY`.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwlock_t`.
 */
int klock_rwlock_trywrlock(struct klock_rwlock_t *l);

/**
 * Write-lock `l` unless the absolute `CLOCK_MONOTONIC` deadline
 * `abstime` passes first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL`.
 *
 * # Safety
 * As `klock_rwlock_timedrdlock`.
 */
int klock_rwlock_timedwrlock(struct klock_rwlock_t *l, const struct timespec *abstime);

/**
 * As `klock_rwlock_timedwrlock`, with the deadline on `clock`
 * (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
 *
 * # Safety
 * As `klock_rwlock_timedrdlock`.
 */
int klock_rwlock_clockwrlock(struct klock_rwlock_t *l,
                             clockid_t clock,
                             const struct timespec *abstime);

/**
 * Release the calling thread's hold of `l`, read or write: 0, or `EPERM`
 * if `l` is not held or another thread write-holds it. (A read unlock by
 * a thread that holds no read lock while others do is not detected.)
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwlock_t`.
 */
int klock_rwlock_unlock(struct klock_rwlock_t *l);

/**
 * Initialise `l` as an unlocked rw-semaphore. Same as
 * `KLOCK_RWSEM_INITIALIZER`; `attr` is reserved and must be null.
 *
 * # Safety
 * `l` is null or points to writable memory no other thread uses now.
 */
int klock_rwsem_init(struct klock_rwsem_t *l, const void *attr);

/**
 * Destroy `l`: 0, or `EBUSY` if it is held.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwsem_t`.
 */
int klock_rwsem_destroy(struct klock_rwsem_t *l);

/**
 * Read-lock `l`: 0, or `EDEADLK` if the calling thread write-holds it.
 * A thread that already read-holds `l` must not read-lock it again (a
 * queued writer would block it: not detected).
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwsem_t`.
 */
int klock_rwsem_rdlock(struct klock_rwsem_t *l);

/**
 * Read-lock `l` if that needs no waiting: 0 or `EBUSY`.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwsem_t`.
 */
int klock_rwsem_tryrdlock(struct klock_rwsem_t *l);

/**
 * Read-lock `l` unless the absolute `CLOCK_MONOTONIC` deadline `abstime`
 * passes first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL` (bad `abstime`).
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwsem_t`; `abstime` is
 * null or readable.
 */
int klock_rwsem_timedrdlock(struct klock_rwsem_t *l, const struct timespec *abstime);

/**
 * As `klock_rwsem_timedrdlock`, with the deadline on `clock`
 * (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
 *
 * # Safety
 * As `klock_rwsem_timedrdlock`.
 */
int klock_rwsem_clockrdlock(struct klock_rwsem_t *l,
                            clockid_t clock,
                            const struct timespec *abstime);

/**
 * Write-lock `l`: 0, or `EDEADLK` if the calling thread write-holds it.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwsem_t`.
 */
int klock_rwsem_wrlock(struct klock_rwsem_t *l);

/**
 * Write-lock `l` if it is free: 0 or `EBUSY`.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwsem_t`.
 */
int klock_rwsem_trywrlock(struct klock_rwsem_t *l);

/**
 * Write-lock `l` unless the absolute `CLOCK_MONOTONIC` deadline
 * `abstime` passes first: 0, `ETIMEDOUT`, `EDEADLK` or `EINVAL`.
 *
 * # Safety
 * As `klock_rwsem_timedrdlock`.
 */
int klock_rwsem_timedwrlock(struct klock_rwsem_t *l, const struct timespec *abstime);

/**
 * As `klock_rwsem_timedwrlock`, with the deadline on `clock`
 * (`CLOCK_MONOTONIC` or `CLOCK_REALTIME`; another clock is `EINVAL`).
 *
 * # Safety
 * As `klock_rwsem_timedrdlock`.
 */
int klock_rwsem_clockwrlock(struct klock_rwsem_t *l,
                            clockid_t clock,
                            const struct timespec *abstime);

/**
 * Release the calling thread's hold of `l`, read or write: 0, or `EPERM`
 * if `l` is not held or another thread write-holds it. (A read unlock by
 * a thread that holds no read lock while others do is not detected.)
 *
 * # Safety
 * `l` is null or points to an initialised `klock_rwsem_t`.
 */
int klock_rwsem_unlock(struct klock_rwsem_t *l);

/**
 * Initialise `l` as an unlocked spinlock. Same as
 * `KLOCK_SPINLOCK_INITIALIZER`; `pshared` is ignored (the lock works in
 * shared memory too, with the threads of one process).
 *
 * # Safety
 * `l` is null or points to writable memory no other thread uses now.
 */
int klock_spin_init(struct klock_spinlock_t *l, int pshared);

/**
 * Destroy `l`: 0, or `EBUSY` if it is held (or has waiters).
 *
 * # Safety
 * `l` is null or points to an initialised `klock_spinlock_t`.
 */
int klock_spin_destroy(struct klock_spinlock_t *l);

/**
 * Lock `l`: 0, or `EDEADLK` if the calling thread holds it.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_spinlock_t`.
 */
int klock_spin_lock(struct klock_spinlock_t *l);

/**
 * Lock `l` if it is free: 0 or `EBUSY`.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_spinlock_t`.
 */
int klock_spin_trylock(struct klock_spinlock_t *l);

/**
 * Unlock `l`: 0, or `EPERM` if the calling thread does not hold it.
 *
 * # Safety
 * `l` is null or points to an initialised `klock_spinlock_t`.
 */
int klock_spin_unlock(struct klock_spinlock_t *l);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* KLOCK_H */
