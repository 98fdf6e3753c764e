/*
 * The C API from C: exclusion under 16 threads for every lock type,
 * static initializers, EBUSY / ETIMEDOUT / EINVAL, condition variable
 * signal and broadcast, and readers sharing the reader-writer locks.
 * Prints "ok" and exits 0, or names the first failed check and exits 1.
 */
#define _GNU_SOURCE
#include "klock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 16
#define ITERS 2000

static int failures;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
      failures++;                                                            \
    }                                                                        \
  } while (0)

#define CHECK_RC(call, want)                                                 \
  do {                                                                       \
    int rc_ = (call);                                                        \
    if (rc_ != (want)) {                                                     \
      fprintf(stderr, "FAIL %s:%d: %s = %d (%s), want %s\n", __FILE__,       \
              __LINE__, #call, rc_, strerror(rc_), #want);                   \
      failures++;                                                            \
    }                                                                        \
  } while (0)

/* Static locks: no init call. */
static klock_mutex_t s_mutex = KLOCK_MUTEX_INITIALIZER;
static klock_rwsem_t s_rwsem = KLOCK_RWSEM_INITIALIZER;
static klock_spinlock_t s_spin = KLOCK_SPINLOCK_INITIALIZER;
static klock_rwlock_t s_rwlock = KLOCK_RWLOCK_INITIALIZER;
static klock_rtmutex_t s_rt = KLOCK_RTMUTEX_INITIALIZER;
static klock_cond_t s_cond = KLOCK_COND_INITIALIZER;

enum kind { MUTEX, RWSEM, SPIN, RWLOCK, RTMUTEX, KINDS };
static const char *names[KINDS] = {"mutex", "rwsem", "spinlock", "rwlock",
                                   "rtmutex"};

/* Not atomic on purpose: only the lock makes the total exact. */
static volatile unsigned long counter;
static volatile unsigned long bad_reads;

static int lock_kind(enum kind k) {
  switch (k) {
  case MUTEX: return klock_mutex_lock(&s_mutex);
  case RWSEM: return klock_rwsem_wrlock(&s_rwsem);
  case SPIN: return klock_spin_lock(&s_spin);
  case RWLOCK: return klock_rwlock_wrlock(&s_rwlock);
  default: return klock_rtmutex_lock(&s_rt);
  }
}

static int unlock_kind(enum kind k) {
  switch (k) {
  case MUTEX: return klock_mutex_unlock(&s_mutex);
  case RWSEM: return klock_rwsem_unlock(&s_rwsem);
  case SPIN: return klock_spin_unlock(&s_spin);
  case RWLOCK: return klock_rwlock_unlock(&s_rwlock);
  default: return klock_rtmutex_unlock(&s_rt);
  }
}

static void *count_worker(void *arg) {
  enum kind k = (enum kind)(long)arg;
  for (int i = 0; i < ITERS; i++) {
    if ((k == RWSEM || k == RWLOCK) && i % 8 == 0) {
      /* A reader: sees an even value (writers keep it even outside). */
      int rc = k == RWSEM ? klock_rwsem_rdlock(&s_rwsem)
                          : klock_rwlock_rdlock(&s_rwlock);
      if (rc != 0 || counter % 2 != 0) bad_reads++;
      rc = k == RWSEM ? klock_rwsem_unlock(&s_rwsem)
                      : klock_rwlock_unlock(&s_rwlock);
      if (rc != 0) bad_reads++;
    }
    if (lock_kind(k) != 0) { bad_reads++; continue; }
    counter++;   /* odd inside the critical section */
    counter++;
    if (unlock_kind(k) != 0) bad_reads++;
  }
  return NULL;
}

static void test_counting(void) {
  for (int k = 0; k < KINDS; k++) {
    pthread_t t[THREADS];
    counter = 0;
    bad_reads = 0;
    for (long i = 0; i < THREADS; i++)
      CHECK(pthread_create(&t[i], NULL, count_worker, (void *)(long)k) == 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    if (counter != 2ul * THREADS * ITERS || bad_reads != 0) {
      fprintf(stderr, "FAIL %s: counter %lu, want %lu; %lu bad results\n",
              names[k], counter, 2ul * THREADS * ITERS, bad_reads);
      failures++;
    }
  }
}

static struct timespec mono_plus_ns(long ns) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_nsec += ns;
  while (t.tv_nsec >= 1000000000) { t.tv_nsec -= 1000000000; t.tv_sec++; }
  while (t.tv_nsec < 0) { t.tv_nsec += 1000000000; t.tv_sec--; }
  return t;
}

static int reached(const struct timespec *deadline) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec > deadline->tv_sec ||
         (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

/* Run in another thread while the main thread holds every lock (the
 * rw locks write-held). */
static void *contender(void *arg) {
  (void)arg;
  struct timespec past = mono_plus_ns(-1000);
  struct timespec bad = mono_plus_ns(1000000);
  bad.tv_nsec = 1000000000;
  struct timespec real;
  clock_gettime(CLOCK_REALTIME, &real);
  real.tv_sec -= 1;

  CHECK_RC(klock_mutex_trylock(&s_mutex), EBUSY);
  CHECK_RC(klock_rwsem_trywrlock(&s_rwsem), EBUSY);
  CHECK_RC(klock_rwsem_tryrdlock(&s_rwsem), EBUSY);
  CHECK_RC(klock_spin_trylock(&s_spin), EBUSY);
  CHECK_RC(klock_rwlock_trywrlock(&s_rwlock), EBUSY);
  CHECK_RC(klock_rwlock_tryrdlock(&s_rwlock), EBUSY);
  CHECK_RC(klock_rtmutex_trylock(&s_rt), EBUSY);

  CHECK_RC(klock_mutex_timedlock(&s_mutex, &past), ETIMEDOUT);
  CHECK_RC(klock_mutex_clocklock(&s_mutex, CLOCK_REALTIME, &real), ETIMEDOUT);
  CHECK_RC(klock_rwsem_timedrdlock(&s_rwsem, &past), ETIMEDOUT);
  CHECK_RC(klock_rwsem_timedwrlock(&s_rwsem, &past), ETIMEDOUT);
  CHECK_RC(klock_rwlock_timedrdlock(&s_rwlock, &past), ETIMEDOUT);
  CHECK_RC(klock_rwlock_timedwrlock(&s_rwlock, &past), ETIMEDOUT);
  CHECK_RC(klock_rtmutex_timedlock(&s_rt, &past), ETIMEDOUT);

  struct timespec near = mono_plus_ns(20000000); /* 20 ms */
  CHECK_RC(klock_mutex_timedlock(&s_mutex, &near), ETIMEDOUT);
  CHECK(reached(&near));
  near = mono_plus_ns(20000000);
  CHECK_RC(klock_rwsem_timedrdlock(&s_rwsem, &near), ETIMEDOUT);
  CHECK(reached(&near));
  near = mono_plus_ns(20000000);
  CHECK_RC(klock_rwsem_timedwrlock(&s_rwsem, &near), ETIMEDOUT);
  CHECK(reached(&near));
  near = mono_plus_ns(20000000);
  CHECK_RC(klock_rwlock_timedrdlock(&s_rwlock, &near), ETIMEDOUT);
  CHECK(reached(&near));
  near = mono_plus_ns(20000000);
  CHECK_RC(klock_rwlock_timedwrlock(&s_rwlock, &near), ETIMEDOUT);
  CHECK(reached(&near));
  near = mono_plus_ns(20000000);
  CHECK_RC(klock_rtmutex_timedlock(&s_rt, &near), ETIMEDOUT);
  CHECK(reached(&near));

  CHECK_RC(klock_mutex_timedlock(&s_mutex, &bad), EINVAL);
  CHECK_RC(klock_rwsem_timedwrlock(&s_rwsem, &bad), EINVAL);
  CHECK_RC(klock_rwlock_timedrdlock(&s_rwlock, &bad), EINVAL);
  CHECK_RC(klock_rtmutex_timedlock(&s_rt, &bad), EINVAL);
  bad.tv_nsec = -1;
  CHECK_RC(klock_mutex_timedlock(&s_mutex, &bad), EINVAL);
  CHECK_RC(klock_mutex_clocklock(&s_mutex, CLOCK_PROCESS_CPUTIME_ID, &near),
           EINVAL);
  CHECK_RC(klock_rwsem_clockrdlock(&s_rwsem, CLOCK_THREAD_CPUTIME_ID, &near),
           EINVAL);
  CHECK_RC(klock_rtmutex_clocklock(&s_rt, CLOCK_BOOTTIME, &near), EINVAL);

  /* Not the owner. */
  CHECK_RC(klock_mutex_unlock(&s_mutex), EPERM);
  CHECK_RC(klock_spin_unlock(&s_spin), EPERM);
  CHECK_RC(klock_rtmutex_unlock(&s_rt), EPERM);
  CHECK_RC(klock_rwsem_unlock(&s_rwsem), EPERM);
  CHECK_RC(klock_rwlock_unlock(&s_rwlock), EPERM);
  return NULL;
}

static void test_errors(void) {
  CHECK_RC(klock_mutex_lock(&s_mutex), 0);
  CHECK_RC(klock_rwsem_wrlock(&s_rwsem), 0);
  CHECK_RC(klock_spin_lock(&s_spin), 0);
  CHECK_RC(klock_rwlock_wrlock(&s_rwlock), 0);
  CHECK_RC(klock_rtmutex_lock(&s_rt), 0);

  CHECK_RC(klock_mutex_lock(&s_mutex), EDEADLK);
  CHECK_RC(klock_mutex_trylock(&s_mutex), EBUSY);
  CHECK_RC(klock_mutex_destroy(&s_mutex), EBUSY);
  CHECK_RC(klock_rwsem_destroy(&s_rwsem), EBUSY);
  CHECK_RC(klock_spin_destroy(&s_spin), EBUSY);
  CHECK_RC(klock_rwlock_destroy(&s_rwlock), EBUSY);
  CHECK_RC(klock_rtmutex_destroy(&s_rt), EBUSY);

  pthread_t t;
  CHECK(pthread_create(&t, NULL, contender, NULL) == 0);
  pthread_join(t, NULL);

  CHECK_RC(klock_mutex_unlock(&s_mutex), 0);
  CHECK_RC(klock_rwsem_unlock(&s_rwsem), 0);
  CHECK_RC(klock_spin_unlock(&s_spin), 0);
  CHECK_RC(klock_rwlock_unlock(&s_rwlock), 0);
  CHECK_RC(klock_rtmutex_unlock(&s_rt), 0);

  CHECK_RC(klock_mutex_unlock(&s_mutex), EPERM);
  CHECK_RC(klock_rwsem_unlock(&s_rwsem), EPERM);
  CHECK_RC(klock_spin_unlock(&s_spin), EPERM);
  CHECK_RC(klock_rwlock_unlock(&s_rwlock), EPERM);
  CHECK_RC(klock_rtmutex_unlock(&s_rt), EPERM);
  CHECK_RC(klock_mutex_lock(NULL), EINVAL);
  CHECK_RC(klock_cond_signal(NULL), EINVAL);
}

/* Two readers inside at once: each waits at a barrier while holding the
 * read lock, which only returns if both got in. */
static pthread_barrier_t both_in;

static void *reader(void *arg) {
  int rwsem = (int)(long)arg;
  CHECK_RC(rwsem ? klock_rwsem_rdlock(&s_rwsem) : klock_rwlock_rdlock(&s_rwlock),
           0);
  pthread_barrier_wait(&both_in);
  /* While two readers hold it, a writer cannot get in. */
  CHECK_RC(rwsem ? klock_rwsem_trywrlock(&s_rwsem)
                 : klock_rwlock_trywrlock(&s_rwlock),
           EBUSY);
  pthread_barrier_wait(&both_in);
  CHECK_RC(rwsem ? klock_rwsem_unlock(&s_rwsem) : klock_rwlock_unlock(&s_rwlock),
           0);
  return NULL;
}

static void test_shared_readers(void) {
  for (long rwsem = 0; rwsem < 2; rwsem++) {
    pthread_t a, b;
    pthread_barrier_init(&both_in, NULL, 2);
    pthread_create(&a, NULL, reader, (void *)rwsem);
    pthread_create(&b, NULL, reader, (void *)rwsem);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_barrier_destroy(&both_in);
  }
  CHECK_RC(klock_rwsem_destroy(&s_rwsem), 0);
  CHECK_RC(klock_rwlock_destroy(&s_rwlock), 0);
}

/* Producer/consumer over a one-slot buffer: `s_cond` says "slot full"
 * (signal, one consumer wakes), `space` says "slot empty" (broadcast). A
 * lost wake-up hangs, and the watchdog fails the test. */
#define ITEMS 20000
#define CONSUMERS 4
static klock_cond_t space = KLOCK_COND_INITIALIZER;
static int slot_full, done;
static long slot, consumed, sum;

static void *producer(void *arg) {
  (void)arg;
  for (long i = 1; i <= ITEMS; i++) {
    klock_mutex_lock(&s_mutex);
    while (slot_full) CHECK_RC(klock_cond_wait(&space, &s_mutex), 0);
    slot = i;
    slot_full = 1;
    klock_cond_signal(&s_cond);
    klock_mutex_unlock(&s_mutex);
  }
  klock_mutex_lock(&s_mutex);
  while (slot_full) klock_cond_wait(&space, &s_mutex);
  done = 1;
  klock_cond_broadcast(&s_cond);
  klock_mutex_unlock(&s_mutex);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  klock_mutex_lock(&s_mutex);
  for (;;) {
    while (!slot_full && !done) CHECK_RC(klock_cond_wait(&s_cond, &s_mutex), 0);
    if (!slot_full) break;
    sum += slot;
    consumed++;
    slot_full = 0;
    klock_cond_broadcast(&space);
  }
  klock_mutex_unlock(&s_mutex);
  return NULL;
}

static void test_condvar(void) {
  klock_mutex_t m;
  klock_cond_t c;
  CHECK_RC(klock_mutex_init(&m, NULL), 0);
  CHECK_RC(klock_cond_init(&c, NULL), 0);
  CHECK_RC(klock_cond_wait(&c, &m), EPERM);
  CHECK_RC(klock_mutex_lock(&m), 0);
  struct timespec near = mono_plus_ns(20000000);
  CHECK_RC(klock_cond_timedwait(&c, &m, &near), ETIMEDOUT);
  CHECK(reached(&near));
  struct timespec bad = near;
  bad.tv_nsec = 1000000000;
  CHECK_RC(klock_cond_timedwait(&c, &m, &bad), EINVAL);
  CHECK_RC(klock_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, &near),
           EINVAL);
  CHECK_RC(klock_mutex_unlock(&m), 0); /* still held after the waits */
  CHECK_RC(klock_cond_destroy(&c), 0);
  CHECK_RC(klock_mutex_destroy(&m), 0);

  pthread_t p, cs[CONSUMERS];
  pthread_create(&p, NULL, producer, NULL);
  for (int i = 0; i < CONSUMERS; i++)
    pthread_create(&cs[i], NULL, consumer, NULL);
  pthread_join(p, NULL);
  for (int i = 0; i < CONSUMERS; i++) pthread_join(cs[i], NULL);
  CHECK(consumed == ITEMS);
  CHECK(sum == (long)ITEMS * (ITEMS + 1) / 2);
}

int main(void) {
  alarm(120); /* a hang (lost wake-up, broken exclusion) fails */
  test_counting();
  test_errors();
  test_shared_readers();
  test_condvar();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
