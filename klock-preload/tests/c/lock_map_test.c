/* Which implementation each lock family runs on under KLOCK_LOCK_MAP, as
 * the preload's forwarded-call counter tells: prints one line
 * "mutex=X rwlock=Y spin=Z cond=W", each klock or glibc. Also checks that
 * a condition wait works with the mutex whichever runs it (klock's
 * condition variable with glibc's mutex included). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_spinlock_t s;
static uint64_t (*forwarded)(void);

static const char *who(uint64_t before, uint64_t calls) {
  return forwarded() - before >= calls ? "glibc" : "klock";
}

int main(void) {
  forwarded = (uint64_t(*)(void))dlsym(RTLD_DEFAULT, "klock_preload_forwarded");
  if (!forwarded) {
    printf("not preloaded\n");
    return 1;
  }
  pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE);
  uint64_t b = forwarded();
  pthread_mutex_lock(&m);
  pthread_mutex_unlock(&m);
  const char *mu = who(b, 2);
  b = forwarded();
  pthread_rwlock_wrlock(&rw);
  pthread_rwlock_unlock(&rw);
  const char *rl = who(b, 2);
  b = forwarded();
  pthread_spin_lock(&s);
  pthread_spin_unlock(&s);
  const char *sp = who(b, 2);
  b = forwarded();
  pthread_cond_signal(&c);
  const char *cv = who(b, 1);
  /* A timed condition wait: times out, and the mutex is ours again. */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&m);
  int rc = pthread_cond_timedwait(&c, &m, &ts);
  if (rc != ETIMEDOUT) {
    printf("cond_timedwait: %d\n", rc);
    return 1;
  }
  if (pthread_mutex_trylock(&m) != EBUSY || pthread_mutex_unlock(&m) != 0) {
    printf("the mutex was not held after the wait\n");
    return 1;
  }
  printf("mutex=%s rwlock=%s spin=%s cond=%s\n", mu, rl, sp, cv);
  return 0;
}
