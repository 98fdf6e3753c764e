/*
 * Uncontended cost of klock's C API next to glibc's pthread locks: one
 * thread locks and unlocks each lock in a loop; prints the best of 7 runs
 * in ns per lock+unlock pair, then trylock+unlock pairs of the mutexes and the rw-semaphore. A
 * second thread is started (and joined)
 * first, so that glibc's locks use atomic instructions, as in any
 * program with threads.
 *
 *   cargo build --release -p klock-ffi
 *   cc -O2 -Iklock-ffi/include -o uncontended_ffi klock-ffi/bench/uncontended.c \
 *      -Ltarget/release -lklock -lpthread
 *   LD_LIBRARY_PATH=target/release ./uncontended_ffi
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "klock.h"

enum { N = 20000000, RUNS = 7 };

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Best of RUNS runs of N lock+unlock pairs, ns per pair. The loop is a
 * macro, so each pair is two direct calls. */
#define BEST(name, LOCK, UNLOCK)                                               \
  do {                                                                         \
    double best = 1e9;                                                         \
    for (int r = 0; r < RUNS; r++) {                                           \
      double t0 = now_ns();                                                    \
      for (long i = 0; i < N; i++) {                                           \
        LOCK;                                                                  \
        UNLOCK;                                                                \
      }                                                                        \
      double d = (now_ns() - t0) / N;                                          \
      if (d < best)                                                            \
        best = d;                                                              \
    }                                                                          \
    printf("%-22s %5.1f ns\n", name, best);                                    \
  } while (0)

static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t prw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t ps;
static klock_mutex_t km = KLOCK_MUTEX_INITIALIZER;
static klock_rtmutex_t krt = KLOCK_RTMUTEX_INITIALIZER;
static klock_rwsem_t krs = KLOCK_RWSEM_INITIALIZER;
static klock_rwlock_t krw = KLOCK_RWLOCK_INITIALIZER;
static klock_spinlock_t ks = KLOCK_SPINLOCK_INITIALIZER;

static void *idle(void *arg) { return arg; }

int main(void) {
  pthread_t t;
  pthread_create(&t, NULL, idle, NULL);
  pthread_join(t, NULL);
  pthread_spin_init(&ps, PTHREAD_PROCESS_PRIVATE);
  BEST("pthread_mutex", pthread_mutex_lock(&pm), pthread_mutex_unlock(&pm));
  BEST("klock_mutex", klock_mutex_lock(&km), klock_mutex_unlock(&km));
  BEST("klock_rtmutex", klock_rtmutex_lock(&krt), klock_rtmutex_unlock(&krt));
  BEST("pthread_rwlock read", pthread_rwlock_rdlock(&prw),
       pthread_rwlock_unlock(&prw));
  BEST("klock_rwsem read", klock_rwsem_rdlock(&krs), klock_rwsem_unlock(&krs));
  BEST("klock_rwlock read", klock_rwlock_rdlock(&krw),
       klock_rwlock_unlock(&krw));
  BEST("pthread_rwlock write", pthread_rwlock_wrlock(&prw),
       pthread_rwlock_unlock(&prw));
  BEST("klock_rwsem write", klock_rwsem_wrlock(&krs), klock_rwsem_unlock(&krs));
  BEST("klock_rwlock write", klock_rwlock_wrlock(&krw),
       klock_rwlock_unlock(&krw));
  BEST("pthread_spin", pthread_spin_lock(&ps), pthread_spin_unlock(&ps));
  BEST("klock_spin", klock_spin_lock(&ks), klock_spin_unlock(&ks));
  BEST("pthread_mutex try", pthread_mutex_trylock(&pm), pthread_mutex_unlock(&pm));
  BEST("klock_mutex try", klock_mutex_trylock(&km), klock_mutex_unlock(&km));
  BEST("klock_rtmutex try", klock_rtmutex_trylock(&krt),
       klock_rtmutex_unlock(&krt));
  BEST("pthread_rwlock tryrd", pthread_rwlock_tryrdlock(&prw),
       pthread_rwlock_unlock(&prw));
  BEST("klock_rwsem tryrd", klock_rwsem_tryrdlock(&krs),
       klock_rwsem_unlock(&krs));
  BEST("pthread_rwlock trywr", pthread_rwlock_trywrlock(&prw),
       pthread_rwlock_unlock(&prw));
  BEST("klock_rwsem trywr", klock_rwsem_trywrlock(&krs),
       klock_rwsem_unlock(&krs));
  return 0;
}
