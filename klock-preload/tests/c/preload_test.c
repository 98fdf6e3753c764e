/*
 * Runs under LD_PRELOAD=libklock_preload.so: proves that every replaced
 * pthread symbol binds to the preload library, then checks the locks
 * through the plain pthread API: exclusion under 16 threads, the static
 * initializers of every kind, the error codes, recursion, timed waits,
 * condition variables and cancellation in them (forwarded objects and
 * fork: fork_test.c). Prints "ok" and exits 0, or names the failed checks
 * and exits 1.
 */
#define _GNU_SOURCE
#include "common.h"

#define THREADS 16
#define ITERS 3000

/* A null pointer the compiler cannot see is one (the API's nonnull
 * attributes would reject a literal NULL). */
static void *volatile null_ptr;

/* ---- the preload probe ---------------------------------------------- */

static const char *symbols[] = {
    "pthread_spin_init", "pthread_spin_destroy", "pthread_spin_lock",
    "pthread_spin_trylock", "pthread_spin_unlock", "pthread_mutex_init",
    "pthread_mutex_destroy", "pthread_mutex_lock", "pthread_mutex_trylock",
    "pthread_mutex_timedlock", "pthread_mutex_clocklock",
    "pthread_mutex_unlock", "pthread_rwlock_init", "pthread_rwlock_destroy",
    "pthread_rwlock_rdlock", "pthread_rwlock_tryrdlock",
    "pthread_rwlock_timedrdlock", "pthread_rwlock_clockrdlock",
    "pthread_rwlock_wrlock", "pthread_rwlock_trywrlock",
    "pthread_rwlock_timedwrlock", "pthread_rwlock_clockwrlock",
    "pthread_rwlock_unlock", "pthread_cond_init", "pthread_cond_destroy",
    "pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait",
    "pthread_cond_signal", "pthread_cond_broadcast",
};

static void probe(void) {
  load_probe();
  /* Every replaced name resolves, first in the lookup order, to the
   * preload library: the definition the program's calls bind to. */
  for (size_t i = 0; i < sizeof symbols / sizeof *symbols; i++) {
    void *p = dlsym(RTLD_DEFAULT, symbols[i]);
    Dl_info info;
    if (!p || !dladdr(p, &info) || !info.dli_fname ||
        !strstr(info.dli_fname, "libklock_preload")) {
      fprintf(stderr, "FAIL: %s binds to %s\n", symbols[i],
              p && dladdr(p, &info) ? info.dli_fname : "nothing");
      failures++;
    }
  }
  /* And a call goes there: klock's owner word (tid << 4) at byte 0, where
   * glibc would keep 1. */
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  CHECK_RC(pthread_mutex_lock(&m), 0);
  uint32_t w;
  memcpy(&w, &m, sizeof w);
  CHECK(w == (uint32_t)tid() << 4);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  memcpy(&w, &m, sizeof w);
  CHECK(w == 0);
}

/* ---- locks taken while the process has one thread --------------------- */

/* While glibc says the process has one thread, klock, like glibc, takes
 * and releases a mutex with plain loads and stores. A mutex taken so and
 * then wanted by threads created while it is held must wake them when it
 * is released. Runs first, before any thread exists. */
static pthread_mutex_t st_mutexes[3] = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP,
    PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP};
/* Each locker holds a different mutex, so they may count at once: an
 * atomic add, or two of them could make one increment. */
static int st_got;

static void *st_locker(void *arg) {
  pthread_mutex_t *m = arg;
  CHECK_RC(pthread_mutex_lock(m), 0);
  __atomic_add_fetch(&st_got, 1, __ATOMIC_SEQ_CST);
  CHECK_RC(pthread_mutex_unlock(m), 0);
  return NULL;
}

static void single_threaded(void) {
  uint32_t w;
  for (int i = 0; i < 3; i++) {
    pthread_mutex_t *m = &st_mutexes[i];
    CHECK_RC(pthread_mutex_lock(m), 0);
    memcpy(&w, m, sizeof w);
    CHECK(w == (uint32_t)tid() << 4);
    CHECK_RC(pthread_mutex_unlock(m), 0);
    memcpy(&w, m, sizeof w);
    CHECK(w == 0);
    CHECK_RC(pthread_mutex_lock(m), 0);
  }
  /* A recursive mutex's second hold, taken with one thread too. */
  CHECK_RC(pthread_mutex_lock(&st_mutexes[1]), 0);
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    CHECK_RC(pthread_create(&t[i], NULL, st_locker, &st_mutexes[i]), 0);
  /* Let them queue and sleep behind the holds. */
  struct timespec nap = {0, 50 * 1000 * 1000};
  nanosleep(&nap, NULL);
  CHECK(__atomic_load_n(&st_got, __ATOMIC_SEQ_CST) == 0);
  CHECK_RC(pthread_mutex_unlock(&st_mutexes[1]), 0);
  for (int i = 0; i < 3; i++)
    CHECK_RC(pthread_mutex_unlock(&st_mutexes[i]), 0);
  for (int i = 0; i < 3; i++)
    CHECK_RC(pthread_join(t[i], NULL), 0);
  CHECK(__atomic_load_n(&st_got, __ATOMIC_SEQ_CST) == 3);
  for (int i = 0; i < 3; i++) {
    /* No owner, no flag (the bits above are the adaptive spin test's
     * mark and the fork generation). */
    memcpy(&w, &st_mutexes[i], sizeof w);
    CHECK((w & 0x3ffffff) == 0);
  }
  CHECK_RC(pthread_mutex_unlock(&st_mutexes[2]), EPERM);
}

/* ---- exclusion under 16 threads --------------------------------------- */

static pthread_mutex_t s_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t s_recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_adaptive = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static pthread_rwlock_t s_rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_rwlock_t s_rw_writer =
    PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static pthread_spinlock_t s_spin;
static pthread_cond_t s_cond = PTHREAD_COND_INITIALIZER;

enum kind { NORMAL, RECURSIVE, ERRORCHECK, ADAPTIVE, RW, RW_WRITER, SPIN, KINDS };
static const char *names[KINDS] = {"normal", "recursive", "errorcheck",
                                   "adaptive", "rwlock", "rwlock-writer",
                                   "spinlock"};

static volatile unsigned long bad_reads;

static pthread_mutex_t *mutex_of(enum kind k) {
  switch (k) {
  case RECURSIVE: return &s_recursive;
  case ERRORCHECK: return &s_errorcheck;
  case ADAPTIVE: return &s_adaptive;
  default: return &s_normal;
  }
}

static void *count_worker(void *arg) {
  enum kind k = (enum kind)(long)arg;
  pthread_rwlock_t *rw = k == RW ? &s_rw : &s_rw_writer;
  for (int i = 0; i < ITERS; i++) {
    int rc = 0;
    if (k == RW || k == RW_WRITER) {
      if (i % 4 == 0) {
        /* A reader sees an even value: writers keep it even outside. */
        rc = pthread_rwlock_rdlock(rw);
        if (counter % 2)
          bad_reads++;
        rc |= pthread_rwlock_unlock(rw);
        continue;
      }
      rc |= pthread_rwlock_wrlock(rw);
    } else if (k == SPIN) {
      rc |= pthread_spin_lock(&s_spin);
    } else {
      rc |= pthread_mutex_lock(mutex_of(k));
      if (k == RECURSIVE)
        rc |= pthread_mutex_lock(mutex_of(k));
    }
    counter = counter + 1;
    counter = counter + 1;
    if (k == RW || k == RW_WRITER)
      rc |= pthread_rwlock_unlock(rw);
    else if (k == SPIN)
      rc |= pthread_spin_unlock(&s_spin);
    else {
      if (k == RECURSIVE)
        rc |= pthread_mutex_unlock(mutex_of(k));
      rc |= pthread_mutex_unlock(mutex_of(k));
    }
    if (rc)
      bad_reads += 1000000;
  }
  return NULL;
}

static void exclusion(void) {
  CHECK_RC(pthread_spin_init(&s_spin, PTHREAD_PROCESS_PRIVATE), 0);
  for (int k = 0; k < KINDS; k++) {
    pthread_t t[THREADS];
    counter = 0;
    bad_reads = 0;
    for (long i = 0; i < THREADS; i++)
      CHECK_RC(pthread_create(&t[i], NULL, count_worker, (void *)(long)k), 0);
    for (int i = 0; i < THREADS; i++)
      pthread_join(t[i], NULL);
    unsigned long writes = k == RW || k == RW_WRITER ? ITERS - ITERS / 4 : ITERS;
    if (counter != 2UL * THREADS * writes || bad_reads) {
      fprintf(stderr, "FAIL exclusion %s: counter %lu want %lu, bad %lu\n",
              names[k], counter, 2UL * THREADS * writes, bad_reads);
      failures++;
    }
  }
  CHECK_RC(pthread_spin_destroy(&s_spin), 0);
}

static int unlock_mutex(void *m) { return pthread_mutex_unlock(m); }
static int try_wr(void *l) { return pthread_rwlock_trywrlock(l); }
static int try_rd(void *l) { return pthread_rwlock_tryrdlock(l); }
static int try_wr_then_unlock(void *l) {
  int rc = pthread_rwlock_trywrlock(l);
  return rc ? rc : pthread_rwlock_unlock(l);
}
static int unlock_rw(void *l) { return pthread_rwlock_unlock(l); }
static int rd_then_unlock(void *l) {
  int rc = pthread_rwlock_rdlock(l);
  return rc ? rc : pthread_rwlock_unlock(l);
}
static volatile int writer_done;
static void *writer_thread(void *l) {
  pthread_rwlock_wrlock(l);
  writer_done = 1;
  pthread_rwlock_unlock(l);
  return NULL;
}
static int try_spin(void *l) { return pthread_spin_trylock(l); }

static int timed_mutex(void *m) {
  struct timespec ts = in_ms(CLOCK_REALTIME, 30), t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = pthread_mutex_timedlock(m, &ts);
  if (rc == ETIMEDOUT && ms_since(&t0) < 25)
    return -2; /* timed out early */
  return rc;
}
static int clock_mutex(void *m) {
  struct timespec ts = in_ms(CLOCK_MONOTONIC, 20);
  return pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &ts);
}
static int timed_rd(void *l) {
  struct timespec ts = in_ms(CLOCK_REALTIME, 20);
  return pthread_rwlock_timedrdlock(l, &ts);
}
static int timed_wr(void *l) {
  struct timespec ts = in_ms(CLOCK_REALTIME, 20);
  return pthread_rwlock_timedwrlock(l, &ts);
}
static int clock_rd(void *l) {
  struct timespec ts = in_ms(CLOCK_MONOTONIC, 20);
  return pthread_rwlock_clockrdlock(l, CLOCK_MONOTONIC, &ts);
}
static int clock_wr(void *l) {
  struct timespec ts = in_ms(CLOCK_MONOTONIC, 20);
  return pthread_rwlock_clockwrlock(l, CLOCK_MONOTONIC, &ts);
}

/* ---- static initializers, kinds and error codes ----------------------- */

static void mutex_kinds(void) {
  /* Normal: trylock by the holder is EBUSY; unlocking an unlocked one is
   * 0 and another thread may unlock it (glibc's behaviour). */
  pthread_mutex_t n = PTHREAD_MUTEX_INITIALIZER;
  CHECK_RC(pthread_mutex_unlock(&n), 0);
  CHECK_RC(pthread_mutex_lock(&n), 0);
  CHECK_RC(pthread_mutex_trylock(&n), EBUSY);
  CHECK_RC(elsewhere(try_mutex, &n), EBUSY);
  CHECK_RC(pthread_mutex_destroy(&n), EBUSY);
  CHECK_RC(elsewhere(unlock_mutex, &n), 0);
  CHECK_RC(pthread_mutex_trylock(&n), 0);
  CHECK_RC(pthread_mutex_unlock(&n), 0);
  CHECK_RC(pthread_mutex_destroy(&n), 0);

  /* Errorcheck: EDEADLK, EPERM. */
  pthread_mutex_t e = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
  CHECK_RC(pthread_mutex_unlock(&e), EPERM);
  CHECK_RC(pthread_mutex_lock(&e), 0);
  CHECK_RC(pthread_mutex_lock(&e), EDEADLK);
  CHECK_RC(pthread_mutex_trylock(&e), EBUSY);
  struct timespec ts = in_ms(CLOCK_REALTIME, 10);
  CHECK_RC(pthread_mutex_timedlock(&e, &ts), EDEADLK);
  CHECK_RC(elsewhere(unlock_mutex, &e), EPERM);
  CHECK_RC(pthread_mutex_unlock(&e), 0);
  CHECK_RC(pthread_mutex_unlock(&e), EPERM);

  /* Recursive: depth, then EPERM. */
  pthread_mutex_t r = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
  CHECK_RC(pthread_mutex_unlock(&r), EPERM);
  for (int i = 0; i < 100; i++)
    CHECK_RC(i % 3 ? pthread_mutex_lock(&r) : pthread_mutex_trylock(&r), 0);
  CHECK_RC(pthread_mutex_timedlock(&r, &ts), 0);
  CHECK_RC(elsewhere(unlock_mutex, &r), EPERM);
  for (int i = 0; i < 100; i++) {
    CHECK_RC(pthread_mutex_unlock(&r), 0);
    CHECK_RC(elsewhere(try_mutex, &r), EBUSY);
  }
  CHECK_RC(pthread_mutex_destroy(&r), EBUSY);
  CHECK_RC(pthread_mutex_unlock(&r), 0);
  CHECK_RC(pthread_mutex_unlock(&r), EPERM);
  CHECK_RC(elsewhere(try_mutex, &r), 0); /* locked by a gone thread now */

  /* Adaptive: as normal. */
  pthread_mutex_t a = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
  CHECK_RC(pthread_mutex_lock(&a), 0);
  CHECK_RC(elsewhere(try_mutex, &a), EBUSY);
  CHECK_RC(pthread_mutex_unlock(&a), 0);

  /* Kinds from attributes. */
  pthread_mutexattr_t at;
  pthread_mutexattr_init(&at);
  pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_t ea;
  CHECK_RC(pthread_mutex_init(&ea, &at), 0);
  CHECK_RC(pthread_mutex_lock(&ea), 0);
  CHECK_RC(pthread_mutex_lock(&ea), EDEADLK);
  CHECK_RC(pthread_mutex_unlock(&ea), 0);
  CHECK_RC(pthread_mutex_destroy(&ea), 0);
  pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_t ra;
  CHECK_RC(pthread_mutex_init(&ra, &at), 0);
  CHECK_RC(pthread_mutex_lock(&ra), 0);
  CHECK_RC(pthread_mutex_lock(&ra), 0);
  CHECK_RC(pthread_mutex_unlock(&ra), 0);
  CHECK_RC(pthread_mutex_unlock(&ra), 0);
  CHECK_RC(pthread_mutex_unlock(&ra), EPERM);
  pthread_mutexattr_destroy(&at);

  /* Timed locks that time out, bad deadlines, bad clocks, null. */
  pthread_mutex_t t = PTHREAD_MUTEX_INITIALIZER;
  CHECK_RC(pthread_mutex_lock(&t), 0);
  CHECK_RC(elsewhere(timed_mutex, &t), ETIMEDOUT);
  CHECK_RC(elsewhere(clock_mutex, &t), ETIMEDOUT);
  struct timespec bad = {0, -1}, bad2 = {0, 1000000000L};
  CHECK_RC(pthread_mutex_timedlock(&t, &bad), EINVAL);
  CHECK_RC(pthread_mutex_timedlock(&t, &bad2), EINVAL);
  CHECK_RC(pthread_mutex_clocklock(&t, CLOCK_PROCESS_CPUTIME_ID, &ts), EINVAL);
  CHECK_RC(pthread_mutex_unlock(&t), 0);
  struct timespec past = {1, 0};
  CHECK_RC(pthread_mutex_timedlock(&t, &past), 0); /* free: taken at once */
  CHECK_RC(pthread_mutex_unlock(&t), 0);
  CHECK_RC(pthread_mutex_lock(null_ptr), EINVAL);
  CHECK_RC(pthread_mutex_unlock(null_ptr), EINVAL);
}

static void rwlocks(void) {
  pthread_rwlock_t *locks[] = {&s_rw, &s_rw_writer};
  for (int i = 0; i < 2; i++) {
    pthread_rwlock_t *l = locks[i];
    CHECK_RC(pthread_rwlock_unlock(l), EPERM);
    /* Readers share; a reader may read-lock again, even with a writer
     * queued behind it (glibc's default lets it through). */
    CHECK_RC(pthread_rwlock_rdlock(l), 0);
    CHECK_RC(elsewhere(rd_then_unlock, l), 0);
    CHECK_RC(elsewhere(try_wr, l), EBUSY);
    CHECK_RC(elsewhere(timed_wr, l), ETIMEDOUT);
    CHECK_RC(elsewhere(clock_wr, l), ETIMEDOUT);
    CHECK_RC(elsewhere(unlock_rw, l), EPERM); /* holds no read lock */
    CHECK_RC(pthread_rwlock_wrlock(l), EDEADLK);
    CHECK_RC(pthread_rwlock_trywrlock(l), EBUSY);
    pthread_t w;
    writer_done = 0;
    pthread_create(&w, NULL, writer_thread, l);
    usleep(20000); /* the writer queues */
    CHECK_RC(pthread_rwlock_rdlock(l), 0);
    CHECK_RC(pthread_rwlock_tryrdlock(l), 0);
    struct timespec soon = in_ms(CLOCK_REALTIME, 10);
    CHECK_RC(pthread_rwlock_timedrdlock(l, &soon), 0);
    CHECK(!writer_done);
    CHECK_RC(pthread_rwlock_destroy(l), EBUSY);
    for (int k = 0; k < 4; k++)
      CHECK_RC(pthread_rwlock_unlock(l), 0);
    pthread_join(w, NULL);
    CHECK(writer_done);
    CHECK_RC(pthread_rwlock_unlock(l), EPERM);
    /* A writer excludes. */
    CHECK_RC(pthread_rwlock_wrlock(l), 0);
    CHECK_RC(pthread_rwlock_wrlock(l), EDEADLK);
    CHECK_RC(pthread_rwlock_rdlock(l), EDEADLK);
    CHECK_RC(pthread_rwlock_tryrdlock(l), EBUSY);
    CHECK_RC(pthread_rwlock_timedrdlock(l, &soon), EDEADLK);
    CHECK_RC(pthread_rwlock_trywrlock(l), EBUSY);
    CHECK_RC(elsewhere(try_rd, l), EBUSY);
    CHECK_RC(elsewhere(timed_rd, l), ETIMEDOUT);
    CHECK_RC(elsewhere(clock_rd, l), ETIMEDOUT);
    CHECK_RC(elsewhere(unlock_rw, l), EPERM);
    struct timespec bad = {0, 1000000000L};
    CHECK_RC(pthread_rwlock_timedrdlock(l, &bad), EINVAL);
    CHECK_RC(pthread_rwlock_timedwrlock(l, &bad), EINVAL);
    CHECK_RC(pthread_rwlock_unlock(l), 0);
    CHECK_RC(pthread_rwlock_destroy(l), 0);
  }
  /* Read holds of more rwlocks at once than the library keeps inline
   * (8; the rest spill into a list): each is known as held, twice for
   * every third one, and released in an order that moves spilled holds
   * inline. */
  enum { MANY = 20 };
  pthread_rwlock_t many[MANY];
  for (int k = 0; k < MANY; k++) {
    CHECK_RC(pthread_rwlock_init(&many[k], NULL), 0);
    CHECK_RC(pthread_rwlock_rdlock(&many[k]), 0);
    if (k % 3 == 0)
      CHECK_RC(pthread_rwlock_rdlock(&many[k]), 0);
  }
  for (int k = 0; k < MANY; k++) {
    CHECK_RC(pthread_rwlock_wrlock(&many[k]), EDEADLK);
    CHECK_RC(elsewhere(unlock_rw, &many[k]), EPERM);
    CHECK_RC(elsewhere(try_wr, &many[k]), EBUSY);
  }
  for (int k = 0; k < MANY; k++) {
    if (k % 3 == 0)
      CHECK_RC(pthread_rwlock_unlock(&many[k]), 0);
    CHECK_RC(pthread_rwlock_unlock(&many[k]), 0);
    CHECK_RC(pthread_rwlock_unlock(&many[k]), EPERM);
    CHECK_RC(elsewhere(try_wr_then_unlock, &many[k]), 0);
    CHECK_RC(pthread_rwlock_destroy(&many[k]), 0);
  }
  pthread_rwlock_t d;
  CHECK_RC(pthread_rwlock_init(&d, NULL), 0);
  CHECK_RC(pthread_rwlock_trywrlock(&d), 0);
  CHECK_RC(pthread_rwlock_unlock(&d), 0);
  CHECK_RC(pthread_rwlock_destroy(&d), 0);
  /* Process-shared rwlocks are refused. */
  pthread_rwlockattr_t ra;
  pthread_rwlockattr_init(&ra);
  pthread_rwlockattr_setpshared(&ra, PTHREAD_PROCESS_SHARED);
  uint64_t before = refused();
  CHECK_RC(pthread_rwlock_init(&d, &ra), ENOTSUP);
  CHECK(refused() == before + 1);
  pthread_rwlockattr_destroy(&ra);
  CHECK_RC(pthread_rwlock_wrlock(null_ptr), EINVAL);
}

static void spins(void) {
  pthread_spinlock_t s;
  CHECK_RC(pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE), 0);
  CHECK_RC(pthread_spin_lock(&s), 0);
  CHECK_RC(pthread_spin_trylock(&s), EBUSY);
  CHECK_RC(elsewhere(try_spin, (void *)&s), EBUSY);
  CHECK_RC(pthread_spin_destroy(&s), EBUSY);
  CHECK_RC(pthread_spin_unlock(&s), 0);
  CHECK_RC(pthread_spin_unlock(&s), 0); /* unlocked: nothing happens */
  CHECK_RC(elsewhere(try_spin, (void *)&s), 0);  /* taken by a gone thread */
  CHECK_RC(pthread_spin_unlock(&s), 0);  /* released for it, as glibc */
  CHECK_RC(pthread_spin_trylock(&s), 0);
  CHECK_RC(pthread_spin_unlock(&s), 0);
  CHECK_RC(pthread_spin_destroy(&s), 0);
  CHECK_RC(pthread_spin_lock(null_ptr), EINVAL);
}

/* ---- condition variables ---------------------------------------------- */

#define ITEMS 20000
static pthread_mutex_t q_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_nonempty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t q_nonfull;
static int q_items, q_consumed;

static void *consumer(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&q_mutex);
    while (q_items == 0 && q_consumed < ITEMS)
      pthread_cond_wait(&q_nonempty, &q_mutex);
    if (q_consumed >= ITEMS) {
      pthread_mutex_unlock(&q_mutex);
      return NULL;
    }
    q_items--;
    if (++q_consumed == ITEMS)
      pthread_cond_broadcast(&q_nonempty);
    pthread_cond_signal(&q_nonfull);
    pthread_mutex_unlock(&q_mutex);
  }
}

static void *producer(void *arg) {
  long n = (long)arg;
  for (long i = 0; i < n; i++) {
    pthread_mutex_lock(&q_mutex);
    while (q_items >= 4)
      pthread_cond_wait(&q_nonfull, &q_mutex);
    q_items++;
    pthread_cond_signal(&q_nonempty);
    pthread_mutex_unlock(&q_mutex);
  }
  return NULL;
}

static pthread_mutex_t b_mutex = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_cond_t b_cond = PTHREAD_COND_INITIALIZER;
static int b_go, b_waiting, b_woken;

static void *broadcast_waiter(void *arg) {
  (void)arg;
  pthread_mutex_lock(&b_mutex);
  pthread_mutex_lock(&b_mutex); /* depth 2: the wait releases both */
  b_waiting++;
  while (!b_go)
    pthread_cond_wait(&b_cond, &b_mutex);
  b_woken++;
  pthread_mutex_unlock(&b_mutex);
  pthread_mutex_unlock(&b_mutex);
  return NULL;
}

static int cond_wait_unheld(void *m) {
  struct timespec ts = in_ms(CLOCK_REALTIME, 10);
  return pthread_cond_timedwait(&s_cond, m, &ts);
}

static void conds(void) {
  /* Producers and consumers: every item consumed, no lost wake-up. */
  CHECK_RC(pthread_cond_init(&q_nonfull, NULL), 0);
  pthread_t t[8];
  for (long i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, producer, (void *)(long)(ITEMS / 4));
  for (long i = 4; i < 8; i++)
    pthread_create(&t[i], NULL, consumer, NULL);
  for (int i = 0; i < 8; i++)
    pthread_join(t[i], NULL);
  CHECK(q_consumed == ITEMS && q_items == 0);
  CHECK_RC(pthread_cond_destroy(&q_nonfull), 0);

  /* Broadcast wakes every waiter; recursive mutexes wait too. */
  pthread_t w[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&w[i], NULL, broadcast_waiter, NULL);
  for (;;) {
    pthread_mutex_lock(&b_mutex);
    int n = b_waiting;
    pthread_mutex_unlock(&b_mutex);
    if (n == THREADS)
      break;
    usleep(1000);
  }
  pthread_mutex_lock(&b_mutex);
  b_go = 1;
  CHECK_RC(pthread_cond_broadcast(&b_cond), 0);
  pthread_mutex_unlock(&b_mutex);
  for (int i = 0; i < THREADS; i++)
    pthread_join(w[i], NULL);
  CHECK(b_woken == THREADS);
  CHECK_RC(pthread_cond_destroy(&b_cond), 0);

  /* Timed waits time out, on the attribute's clock or the given one, with
   * the mutex held again; errors. */
  pthread_mutex_t m = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_t c;
  CHECK_RC(pthread_cond_init(&c, &ca), 0);
  pthread_condattr_destroy(&ca);
  CHECK_RC(pthread_mutex_lock(&m), 0);
  struct timespec t0, ts = in_ms(CLOCK_MONOTONIC, 30);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_RC(pthread_cond_timedwait(&c, &m, &ts), ETIMEDOUT);
  CHECK(ms_since(&t0) >= 25);
  CHECK_RC(pthread_mutex_lock(&m), EDEADLK); /* held again */
  ts = in_ms(CLOCK_REALTIME, 10);
  CHECK_RC(pthread_cond_clockwait(&c, &m, CLOCK_REALTIME, &ts), ETIMEDOUT);
  struct timespec bad = {0, -5};
  CHECK_RC(pthread_cond_timedwait(&c, &m, &bad), EINVAL);
  CHECK_RC(pthread_mutex_unlock(&m), 0);
  CHECK_RC(pthread_cond_wait(&c, &m), EPERM); /* not held */
  CHECK_RC(elsewhere(cond_wait_unheld, &m), EPERM);
  CHECK_RC(pthread_cond_signal(&c), 0);
  CHECK_RC(pthread_cond_destroy(&c), 0);
  CHECK_RC(pthread_cond_signal(null_ptr), EINVAL);
}

/* ---- cancellation in a condition wait ---------------------------------- */

static pthread_mutex_t x_mutex = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_cond_t x_cond = PTHREAD_COND_INITIALIZER;
static volatile int x_waiting, x_cleanup_held, x_never;

static void x_cleanup(void *arg) {
  (void)arg;
  /* The mutex is the cancelled waiter's again: its errorcheck unlock
   * succeeds only then. */
  x_cleanup_held = pthread_mutex_unlock(&x_mutex) == 0 ? 1 : -1;
}

/* arg: 0 untimed wait, 1 a wait of 20 ms at a time, 2 a wait of 60 s. */
static void *x_waiter(void *arg) {
  long how = (long)arg;
  pthread_mutex_lock(&x_mutex);
  pthread_cleanup_push(x_cleanup, NULL);
  x_waiting = 1;
  while (!x_never) {
    if (how) {
      struct timespec ts = in_ms(CLOCK_REALTIME, how == 1 ? 20 : 60000);
      pthread_cond_timedwait(&x_cond, &x_mutex, &ts);
    } else {
      pthread_cond_wait(&x_cond, &x_mutex);
    }
  }
  pthread_cleanup_pop(0);
  pthread_mutex_unlock(&x_mutex);
  return NULL;
}

/* The futex wait itself is a cancellation point: nobody signals the
 * waiter, and a 60 s wait must end long before its timeout. */
static void cancellation(void) {
  for (long how = 0; how < 3; how++) {
    pthread_t t;
    x_waiting = 0;
    x_cleanup_held = 0;
    pthread_create(&t, NULL, x_waiter, (void *)how);
    while (!x_waiting)
      usleep(1000);
    /* Taking the mutex proves the waiter released it: it waits. */
    CHECK_RC(pthread_mutex_lock(&x_mutex), 0);
    CHECK_RC(pthread_mutex_unlock(&x_mutex), 0);
    usleep(5000);
    CHECK_RC(pthread_cancel(t), 0);
    void *ret;
    struct timespec limit = in_ms(CLOCK_REALTIME, 10000);
    CHECK_RC(pthread_timedjoin_np(t, &ret, &limit), 0);
    CHECK(ret == PTHREAD_CANCELED);
    CHECK(x_cleanup_held == 1);
  }
  /* And nobody holds the mutex now. */
  CHECK_RC(pthread_mutex_trylock(&x_mutex), 0);
  CHECK_RC(pthread_mutex_unlock(&x_mutex), 0);
}

int main(void) {
  probe();
  single_threaded();
  exclusion();
  mutex_kinds();
  rwlocks();
  spins();
  conds();
  cancellation();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
