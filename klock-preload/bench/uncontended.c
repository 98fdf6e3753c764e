/*
 * Cost of an uncontended lock + unlock pair: each mutex kind (normal,
 * recursive, errorcheck, adaptive), then a rwlock's read and write locks
 * and a spinlock, then the same through the
 * trylock functions (normal mutex, rwlock, spinlock): the best of 7 runs of
 * 10^7 pairs, in ns per pair. The minimum keeps a shared machine's noise
 * out. With the argument `mt` an idle thread is started first: glibc's
 * mutex uses plain loads and stores while the process has one thread,
 * atomic instructions once it has two. With a number WORK, each critical
 * section does WORK dependent multiply-adds instead of nothing, and the
 * first line is the same loop with no lock: with an empty critical section
 * a load of the lock word in the unlock waits for the lock's atomic
 * instruction to complete, and work in between hides that wait.
 *
 *   cc -O2 -o uncontended klock-preload/bench/uncontended.c -lpthread
 *   ./uncontended [mt] [WORK]                        # glibc
 *   LD_PRELOAD=target/release/libklock_preload.so ./uncontended [mt] [WORK]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAIRS 10000000L

/* Dependent multiply-adds done inside each critical section. */
static long work;
static volatile unsigned long sink;

/* The critical section: `work` steps that the compiler cannot fold. */
static inline void critical_section(long i) {
  unsigned long x = (unsigned long)i;
  for (long k = 0; k < work; k++) {
    x = x * 2654435761u + 1;
    __asm__ volatile("" : "+r"(x));
  }
  if (work)
    sink = x;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/* The best of 7 runs of PAIRS `LOCK; UNLOCK` pairs, in ns per pair, into
 * `out`. A macro, not a function taking pointers, so that each pair is
 * two direct calls as in a program. */
#define BEST(out, LOCK, UNLOCK)                                              \
  do {                                                                       \
    double min_ = 1e30;                                                      \
    for (int run_ = 0; run_ < 7; run_++) {                                   \
      double t0_ = now_ns();                                                 \
      for (long i_ = 0; i_ < PAIRS; i_++) {                                  \
        LOCK;                                                                \
        __asm__ volatile("" ::: "memory");                                   \
        critical_section(i_);                                                \
        __asm__ volatile("" ::: "memory");                                   \
        UNLOCK;                                                              \
      }                                                                      \
      double ns_ = (now_ns() - t0_) / PAIRS;                                 \
      if (ns_ < min_)                                                        \
        min_ = ns_;                                                          \
    }                                                                        \
    (out) = min_;                                                            \
  } while (0)

static void *idle(void *arg) {
  (void)arg;
  pause();
  return NULL;
}

int main(int argc, char **argv) {
  int a = 1;
  if (a < argc && strcmp(argv[a], "mt") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL) != 0)
      return 2;
    a++;
  }
  int ok = 1;
  if (a < argc) {
    char *end;
    work = strtol(argv[a], &end, 10);
    ok = *end == '\0' && end != argv[a] && work >= 0 && work <= 1000000;
    a++;
  }
  if (!ok || a != argc) {
    fprintf(stderr, "usage: %s [mt] [WORK (0 to 1000000)]\n", argv[0]);
    return 2;
  }
  if (work) {
    double alone;
    BEST(alone, (void)0, (void)0);
    printf("work %ld alone %.1f ns\n", work, alone);
  }
  pthread_mutex_t normal = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
  pthread_mutex_t errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
  pthread_mutex_t adaptive = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
  pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
  pthread_spinlock_t spin;
  pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
  double n, r, e, ad, rd, wr, sp, tn, trd, twr, tsp;
  BEST(n, pthread_mutex_lock(&normal), pthread_mutex_unlock(&normal));
  BEST(r, pthread_mutex_lock(&recursive), pthread_mutex_unlock(&recursive));
  BEST(e, pthread_mutex_lock(&errorcheck), pthread_mutex_unlock(&errorcheck));
  BEST(ad, pthread_mutex_lock(&adaptive), pthread_mutex_unlock(&adaptive));
  BEST(rd, pthread_rwlock_rdlock(&rw), pthread_rwlock_unlock(&rw));
  BEST(wr, pthread_rwlock_wrlock(&rw), pthread_rwlock_unlock(&rw));
  BEST(sp, pthread_spin_lock(&spin), pthread_spin_unlock(&spin));
  BEST(tn, pthread_mutex_trylock(&normal), pthread_mutex_unlock(&normal));
  BEST(trd, pthread_rwlock_tryrdlock(&rw), pthread_rwlock_unlock(&rw));
  BEST(twr, pthread_rwlock_trywrlock(&rw), pthread_rwlock_unlock(&rw));
  BEST(tsp, pthread_spin_trylock(&spin), pthread_spin_unlock(&spin));
  printf("normal %.1f ns, recursive %.1f ns, errorcheck %.1f ns, adaptive %.1f ns\n", n, r, e,
         ad);
  printf("rdlock %.1f ns, wrlock %.1f ns, spin %.1f ns\n", rd, wr, sp);
  printf("trylock: mutex %.1f ns, rdlock %.1f ns, wrlock %.1f ns, spin %.1f ns\n", tn,
         trd, twr, tsp);
  return 0;
}
