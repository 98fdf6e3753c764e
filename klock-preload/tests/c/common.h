/*
 * What the C tests of libklock_preload.so share: the layouts they rely
 * on, the checks, the preload probe's symbols, and small helpers.
 */
#ifndef KLOCK_PRELOAD_TEST_COMMON_H
#define KLOCK_PRELOAD_TEST_COMMON_H

/* Include after defining _GNU_SOURCE (the *_NP initializers). */

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The glibc x86-64 layouts the library's in-place forms rely on. */
_Static_assert(sizeof(pthread_mutex_t) == 40, "pthread_mutex_t size");
_Static_assert(offsetof(pthread_mutex_t, __data.__kind) == 16, "__kind offset");
_Static_assert(sizeof(pthread_rwlock_t) == 56, "pthread_rwlock_t size");
_Static_assert(offsetof(pthread_rwlock_t, __data.__flags) == 48, "__flags offset");
_Static_assert(sizeof(pthread_cond_t) == 48, "pthread_cond_t size");
_Static_assert(sizeof(pthread_spinlock_t) == 4, "pthread_spinlock_t size");

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

static int (*active)(void);
static uint64_t (*forwarded)(void);
static uint64_t (*refused)(void);

/* Resolve the library's probe and counters; exit unless it is loaded. */
static inline void load_probe(void) {
  active = (int (*)(void))dlsym(RTLD_DEFAULT, "klock_preload_active");
  forwarded = (uint64_t(*)(void))dlsym(RTLD_DEFAULT, "klock_preload_forwarded");
  refused = (uint64_t(*)(void))dlsym(RTLD_DEFAULT, "klock_preload_refused");
  if (!active || !forwarded || !refused || active() != 1) {
    fprintf(stderr, "FAIL: libklock_preload.so is not loaded\n");
    exit(1);
  }
}

/* Not atomic on purpose: only the lock makes the totals exact. */
static volatile unsigned long counter;

static inline pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

/* ---- helpers: another thread's attempt -------------------------------- */

struct attempt {
  int (*fn)(void *);
  void *obj;
  int rc;
};

static inline void *attempt_thread(void *arg) {
  struct attempt *a = arg;
  a->rc = a->fn(a->obj);
  return NULL;
}

/* Run fn(obj) on a new thread and return its result. */
static inline int elsewhere(int (*fn)(void *), void *obj) {
  struct attempt a = {fn, obj, -1};
  pthread_t t;
  pthread_create(&t, NULL, attempt_thread, &a);
  pthread_join(t, NULL);
  return a.rc;
}
static inline int try_mutex(void *m) { return pthread_mutex_trylock(m); }

static inline struct timespec in_ms(clockid_t clock, long ms) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static inline long ms_since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

#endif
