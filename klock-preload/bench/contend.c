/*
 * Mutex throughput of an unmodified pthread program: THREADS threads lock
 * one PTHREAD_MUTEX_INITIALIZER mutex, touch a shared counter and a few
 * cache lines of shared data, unlock, then do a little private work, for
 * SECONDS seconds. Prints "threads ops/s".
 *
 *   cc -O2 -o contend klock-preload/bench/contend.c -lpthread
 *   ./contend 16 1                                   # glibc
 *   LD_PRELOAD=target/release/libklock_preload.so ./contend 16 1
 *
 * With -DSPIN the lock is a private pthread_spinlock_t instead, with
 * -DWRLOCK a PTHREAD_RWLOCK_INITIALIZER rwlock, write-locked.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifdef SPIN
static pthread_spinlock_t m;
#define LOCK() pthread_spin_lock(&m)
#define UNLOCK() pthread_spin_unlock(&m)
#elif defined(WRLOCK)
static pthread_rwlock_t m = PTHREAD_RWLOCK_INITIALIZER;
#define LOCK() pthread_rwlock_wrlock(&m)
#define UNLOCK() pthread_rwlock_unlock(&m)
#else
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&m)
#define UNLOCK() pthread_mutex_unlock(&m)
#endif
static volatile unsigned long shared[64];
static volatile int stop;

static void *worker(void *arg) {
  unsigned long n = 0, seed = (unsigned long)arg;
  while (!stop) {
    LOCK();
    for (int i = 0; i < 64; i += 8)
      shared[i]++;
    UNLOCK();
    for (int i = 0; i < 50; i++)
      seed = seed * 6364136223846793005UL + 1442695040888963407UL;
    n++;
  }
  return (void *)(n + (seed & 0));
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  double seconds = argc > 2 ? atof(argv[2]) : 1.0;
  pthread_t t[256];
  if (threads < 1 || threads > 256)
    return 2;
#ifdef SPIN
  pthread_spin_init(&m, PTHREAD_PROCESS_PRIVATE);
#endif
  for (long i = 0; i < threads; i++)
    pthread_create(&t[i], NULL, worker, (void *)(i + 1));
  usleep((useconds_t)(seconds * 1e6));
  stop = 1;
  unsigned long total = 0;
  for (int i = 0; i < threads; i++) {
    void *r;
    pthread_join(t[i], &r);
    total += (unsigned long)r;
  }
  printf("%d %.0f\n", threads, total / seconds);
  return 0;
}
