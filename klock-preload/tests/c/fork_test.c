/*
 * Runs under LD_PRELOAD=libklock_preload.so: process-shared, robust and
 * priority-inheritance mutexes (forwarded to glibc, or shared in place),
 * and fork in a multithreaded program, with the other threads idle and
 * with them contending a mutex. Prints "ok" and exits 0, or names the
 * failed checks and exits 1.
 */
#define _GNU_SOURCE
#include "common.h"

static pthread_cond_t s_cond = PTHREAD_COND_INITIALIZER;

/* ---- helpers -------------------------------------------------------------- */

/* Wait for the child `pid` of fork round `round` of the test `what`, at
 * most 10 s: a child that exits other than with 0, or that hangs (then
 * killed), is a failure. */
static void check_child(pid_t pid, const char *what, int round) {
  int status;
  for (int i = 0; i < 1000; i++) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "FAIL %s round %d: child status %#x\n", what, round,
                status);
        failures++;
      }
      return;
    }
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  fprintf(stderr, "FAIL %s round %d: child hung, killed\n", what, round);
  failures++;
}

/* Waiters started by start_waiters that have begun to run. */
static int w_started;

/* Start `n` threads running `fn(arg)`, each of which first counts itself
 * in `w_started` and then blocks on a lock held by the caller; return
 * once they have been running for 20 ms, past any spinning: they sleep
 * in the lock's queue. */
static void start_waiters(pthread_t *t, int n, void *(*fn)(void *),
                          void *arg) {
  int want = __atomic_load_n(&w_started, __ATOMIC_SEQ_CST) + n;
  for (int i = 0; i < n; i++)
    pthread_create(&t[i], NULL, fn, arg);
  while (__atomic_load_n(&w_started, __ATOMIC_SEQ_CST) < want)
    usleep(1000);
  usleep(20000);
}

/* ---- forwarded objects and fork ----------------------------------------- */

struct shared {
  pthread_mutex_t m;
  pthread_spinlock_t s;
  pthread_cond_t c;
  long count_m, count_s, ready; /* under m, under s */
};

static void forwarded_and_shared(void) {
  struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(sh != MAP_FAILED);
  pthread_mutexattr_t at;
  pthread_mutexattr_init(&at);
  pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
  uint64_t before = forwarded();
  CHECK_RC(pthread_mutex_init(&sh->m, &at), 0);
  pthread_mutexattr_destroy(&at);
  CHECK(forwarded() == before + 1);
  CHECK_RC(pthread_spin_init(&sh->s, PTHREAD_PROCESS_SHARED), 0);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  CHECK_RC(pthread_cond_init(&sh->c, &ca), 0);
  pthread_condattr_destroy(&ca);

  /* Two processes count under the shared mutex and spinlock, and hand
   * over through the shared condition variable. */
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 2000; i++) {
      if (pthread_mutex_lock(&sh->m)) _exit(2);
      sh->count_m++;
      pthread_mutex_unlock(&sh->m);
      pthread_spin_lock(&sh->s);
      sh->count_s++;
      pthread_spin_unlock(&sh->s);
    }
    pthread_mutex_lock(&sh->m);
    sh->ready = 1;
    pthread_cond_signal(&sh->c);
    pthread_mutex_unlock(&sh->m);
    _exit(0);
  }
  for (int i = 0; i < 2000; i++) {
    CHECK_RC(pthread_mutex_lock(&sh->m), 0);
    sh->count_m++;
    CHECK_RC(pthread_mutex_unlock(&sh->m), 0);
    pthread_spin_lock(&sh->s);
    sh->count_s++;
    pthread_spin_unlock(&sh->s);
  }
  CHECK_RC(pthread_mutex_lock(&sh->m), 0);
  while (!sh->ready)
    CHECK_RC(pthread_cond_wait(&sh->c, &sh->m), 0);
  CHECK_RC(pthread_mutex_unlock(&sh->m), 0);
  int status;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(sh->count_m == 4000 && sh->count_s == 4000);
  /* Still the process-shared test-and-set form, unlocked: its mark (bit
   * 15) outlives every unlock, which clears the locked byte alone. */
  CHECK(*(volatile int *)&sh->s == 1 << 15);
  CHECK(forwarded() >= before + 4000); /* later calls forward too */
  CHECK_RC(pthread_mutex_destroy(&sh->m), 0);
  munmap(sh, sizeof *sh);

  /* Robust and priority-inheritance mutexes are glibc's. */
  pthread_mutexattr_init(&at);
  pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_t rb;
  CHECK_RC(pthread_mutex_init(&rb, &at), 0);
  pthread_mutexattr_destroy(&at);
  before = forwarded();
  CHECK_RC(pthread_mutex_lock(&rb), 0);
  CHECK_RC(elsewhere(try_mutex, &rb), EBUSY);
  CHECK_RC(pthread_mutex_unlock(&rb), 0);
  CHECK(forwarded() == before + 3);
  CHECK_RC(pthread_mutex_destroy(&rb), 0);
  pthread_mutexattr_init(&at);
  pthread_mutexattr_setprotocol(&at, PTHREAD_PRIO_INHERIT);
  pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_t pi;
  CHECK_RC(pthread_mutex_init(&pi, &at), 0);
  pthread_mutexattr_destroy(&at);
  before = forwarded();
  CHECK_RC(pthread_mutex_lock(&pi), 0);
  CHECK_RC(pthread_mutex_lock(&pi), EDEADLK);
  CHECK_RC(pthread_mutex_unlock(&pi), 0);
  CHECK(forwarded() == before + 3);
  /* A condition variable works with a forwarded mutex too. */
  CHECK_RC(pthread_mutex_lock(&pi), 0);
  struct timespec ts = in_ms(CLOCK_REALTIME, 5);
  CHECK_RC(pthread_cond_timedwait(&s_cond, &pi, &ts), ETIMEDOUT);
  CHECK_RC(pthread_mutex_unlock(&pi), 0);
  CHECK_RC(pthread_mutex_destroy(&pi), 0);
}

static pthread_mutex_t f_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t f_rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t f_gate_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t f_gate = PTHREAD_COND_INITIALIZER;
static int f_paused, f_pause, f_stop;

/* Hammers the locks; parks on a condition variable while the main thread
 * forks, so that no thread is queued on or inside a lock at the fork (see
 * docs/preload.md: a waiter caught queued at a fork is left behind in the
 * child's copy of that lock). */
static void *fork_hammer(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&f_mutex);
    counter++;
    pthread_mutex_unlock(&f_mutex);
    pthread_rwlock_rdlock(&f_rw);
    pthread_rwlock_unlock(&f_rw);
    pthread_mutex_lock(&f_gate_mutex);
    if (f_pause) {
      f_paused++;
      pthread_cond_broadcast(&f_gate);
      while (f_pause)
        pthread_cond_wait(&f_gate, &f_gate_mutex);
      f_paused--;
    }
    int stop = f_stop;
    pthread_mutex_unlock(&f_gate_mutex);
    if (stop)
      return NULL;
  }
}

static void *child_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++) {
    pthread_mutex_lock(&f_mutex);
    counter++;
    pthread_mutex_unlock(&f_mutex);
    pthread_rwlock_wrlock(&f_rw);
    pthread_rwlock_unlock(&f_rw);
  }
  return NULL;
}

static void fork_multithreaded(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, fork_hammer, NULL);
  for (int round = 0; round < 5; round++) {
    usleep(2000);
    pthread_mutex_lock(&f_gate_mutex);
    f_pause = 1;
    while (f_paused < 4)
      pthread_cond_wait(&f_gate, &f_gate_mutex);
    /* The forking thread holds a lock across the fork, as an atfork
     * handler would: the child unlocks it. */
    pthread_mutex_lock(&f_mutex);
    pid_t pid = fork();
    pthread_mutex_unlock(&f_mutex);
    if (pid == 0) {
      /* Only the forking thread exists here; the locks work. */
      if (pthread_mutex_unlock(&f_gate_mutex)) _exit(2);
      if (pthread_mutex_trylock(&f_mutex)) _exit(3);
      pthread_mutex_unlock(&f_mutex);
      /* The four hammer threads wait on f_gate in the parent; here they
       * do not exist, and destroying it must not wait for them (EBUSY). */
      if (pthread_cond_destroy(&f_gate)) _exit(9);
      if (pthread_rwlock_wrlock(&f_rw)) _exit(4);
      /* The child's thread has a tid of its own, and the locks know it:
       * a second write lock is its own deadlock (not a wait on a thread
       * of the parent), and a mutex names it as owner. */
      if (pthread_rwlock_wrlock(&f_rw) != EDEADLK) _exit(7);
      pthread_rwlock_unlock(&f_rw);
      pthread_mutex_t own = PTHREAD_MUTEX_INITIALIZER;
      pthread_mutex_lock(&own);
      uint32_t w;
      memcpy(&w, &own, sizeof w);
      if (w != (uint32_t)tid() << 4) _exit(8);
      pthread_mutex_unlock(&own);
      pthread_t c[4];
      for (int i = 0; i < 4; i++)
        if (pthread_create(&c[i], NULL, child_thread, NULL)) _exit(5);
      for (int i = 0; i < 4; i++)
        pthread_join(c[i], NULL);
      _exit(0);
    }
    f_pause = 0;
    pthread_cond_broadcast(&f_gate);
    pthread_mutex_unlock(&f_gate_mutex);
    check_child(pid, "fork", round);
  }
  pthread_mutex_lock(&f_gate_mutex);
  f_stop = 1;
  pthread_mutex_unlock(&f_gate_mutex);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
}

/* Forks while other threads contend a mutex: the prepare handler takes
 * it, so at the fork the other threads are queued on it (or inside its
 * wait-list lock), and the child's copy of the lock names threads that
 * exist only in the parent. The child's handler unlocks it, and the child
 * then locks it from new threads (see docs/preload.md, "fork"). */
static pthread_mutex_t c_mutex = PTHREAD_MUTEX_INITIALIZER;
static volatile int c_stop, c_atfork;

static void *c_hammer(void *arg) {
  (void)arg;
  while (!c_stop) {
    pthread_mutex_lock(&c_mutex);
    counter++;
    pthread_mutex_unlock(&c_mutex);
  }
  return NULL;
}

static void *c_child_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) {
    pthread_mutex_lock(&c_mutex);
    counter++;
    pthread_mutex_unlock(&c_mutex);
  }
  return NULL;
}

static void c_prepare(void) {
  if (c_atfork)
    pthread_mutex_lock(&c_mutex);
}
static void c_release(void) {
  if (c_atfork)
    pthread_mutex_unlock(&c_mutex);
}

static void fork_contended(void) {
  CHECK_RC(pthread_atfork(c_prepare, c_release, c_release), 0);
  c_atfork = 1;
  pthread_t t[6];
  for (int i = 0; i < 6; i++)
    pthread_create(&t[i], NULL, c_hammer, NULL);
  for (int round = 0; round < 30; round++) {
    usleep(2000);
    pid_t pid = fork();
    if (pid == 0) {
      pthread_t c[4];
      for (int i = 0; i < 4; i++)
        if (pthread_create(&c[i], NULL, c_child_thread, NULL)) _exit(5);
      for (int i = 0; i < 4; i++)
        pthread_join(c[i], NULL);
      if (pthread_mutex_trylock(&c_mutex)) _exit(6);
      pthread_mutex_unlock(&c_mutex);
      _exit(0);
    }
    check_child(pid, "contended fork", round);
  }
  c_stop = 1;
  for (int i = 0; i < 6; i++)
    pthread_join(t[i], NULL);
  c_atfork = 0;
}

/* Forks while threads wait on a rwlock the forking thread read-holds: at
 * the fork two writers, and two readers behind them, sleep in its wait
 * list. In the child they do not exist: its unlock and its next locks
 * must neither wait for them nor hand the lock to them. (glibc's rwlock
 * fails this: after the child's unlock its try-locks say EBUSY.) */
static pthread_rwlock_t q_rw = PTHREAD_RWLOCK_INITIALIZER;

static void *q_waiter(void *arg) {
  __atomic_add_fetch(&w_started, 1, __ATOMIC_SEQ_CST);
  if (arg)
    pthread_rwlock_wrlock(&q_rw);
  else
    pthread_rwlock_rdlock(&q_rw);
  pthread_rwlock_unlock(&q_rw);
  return NULL;
}

static void fork_rwlock_queued(void) {
  for (int round = 0; round < 5; round++) {
    pthread_t t[4];
    CHECK_RC(pthread_rwlock_rdlock(&q_rw), 0);
    start_waiters(t, 2, q_waiter, (void *)1);
    start_waiters(t + 2, 2, q_waiter, NULL);
    pid_t pid = fork();
    if (pid == 0) {
      if (pthread_rwlock_unlock(&q_rw)) _exit(2);
      if (pthread_rwlock_wrlock(&q_rw)) _exit(3);
      if (pthread_rwlock_unlock(&q_rw)) _exit(4);
      if (pthread_rwlock_rdlock(&q_rw)) _exit(5);
      if (pthread_rwlock_unlock(&q_rw)) _exit(6);
      if (pthread_rwlock_destroy(&q_rw)) _exit(7);
      _exit(0);
    }
    CHECK_RC(pthread_rwlock_unlock(&q_rw), 0);
    for (int i = 0; i < 4; i++)
      pthread_join(t[i], NULL);
    check_child(pid, "rwlock fork", round);
  }
}

/* Forks while threads wait for a spinlock the forking thread holds: at
 * the fork they spin for it, hold its pending bit or sit in its queue.
 * In the child they do not exist: after its unlock, two new threads
 * contend the lock and must not wait behind them. */
static pthread_spinlock_t p_spin;
static long p_count;

static void *p_waiter(void *arg) {
  (void)arg;
  __atomic_add_fetch(&w_started, 1, __ATOMIC_SEQ_CST);
  pthread_spin_lock(&p_spin);
  pthread_spin_unlock(&p_spin);
  return NULL;
}

static void *p_child_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 20000; i++) {
    pthread_spin_lock(&p_spin);
    p_count++;
    pthread_spin_unlock(&p_spin);
  }
  return NULL;
}

static void fork_spinlock_queued(void) {
  CHECK_RC(pthread_spin_init(&p_spin, PTHREAD_PROCESS_PRIVATE), 0);
  for (int round = 0; round < 5; round++) {
    pthread_t t[3];
    CHECK_RC(pthread_spin_lock(&p_spin), 0);
    start_waiters(t, 3, p_waiter, NULL);
    pid_t pid = fork();
    if (pid == 0) {
      if (pthread_spin_unlock(&p_spin)) _exit(2);
      pthread_t c[2];
      p_count = 0;
      for (int i = 0; i < 2; i++)
        if (pthread_create(&c[i], NULL, p_child_thread, NULL)) _exit(3);
      for (int i = 0; i < 2; i++)
        pthread_join(c[i], NULL);
      if (p_count != 40000) _exit(4);
      if (pthread_spin_trylock(&p_spin)) _exit(5);
      if (pthread_spin_unlock(&p_spin)) _exit(6);
      if (pthread_spin_destroy(&p_spin)) _exit(7);
      _exit(0);
    }
    CHECK_RC(pthread_spin_unlock(&p_spin), 0);
    for (int i = 0; i < 3; i++)
      pthread_join(t[i], NULL);
    check_child(pid, "spinlock fork", round);
  }
  CHECK_RC(pthread_spin_destroy(&p_spin), 0);
}

int main(void) {
  load_probe();
  forwarded_and_shared();
  fork_multithreaded();
  fork_contended();
  fork_rwlock_queued();
  fork_spinlock_queued();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
