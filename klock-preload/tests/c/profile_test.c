/* A program with one hot lock: the lock profile (KLOCK_STAT=1) must put
 * it first, name the function that locks it, and count its acquisitions
 * exactly. Usage: profile_test [iterations per thread] [MODE], MODE one of
 *   none   take no lock at all and exit;
 *   fork   after the workers, fork two children that exit(): the first
 *          locks the hot mutex FORK_LOCKS times, the second takes no lock;
 *   spawn  after the workers, run this program again with `0 none` (a
 *          descendant that execs and takes no lock);
 *   term   after the workers, check that SIGINT, SIGTERM and SIGHUP read
 *          as at their default action (the profile's handler hidden), set
 *          SIGTERM's default action again, and raise it;
 *   hup    after the workers, raise SIGHUP (the test runs it ignored);
 *   own    install a SIGTERM handler of its own, then raise SIGTERM: the
 *          handler only notes it, and the program ends normally;
 *   many   instead of the workers, lock MANY_LOCKS mutexes (more than the
 *          profile's table holds) MANY_TIMES each. */
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORK_LOCKS 5
#define MANY_LOCKS 20000
#define MANY_TIMES 3
extern char **environ;

#define THREADS 8

static pthread_mutex_t hot = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cold = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t table = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t spin;
static volatile unsigned long counter, reads, spins;
static long iterations = 20000;

#ifdef MANGLED
/* Built with -DMANGLED, the function has the name a C++ compiler gives
 * `server::Cache::lock()`: the profile must write it demangled. */
void hot_worker_lock(void) __asm__("_ZN6server5Cache4lockEv");
#endif

__attribute__((noinline)) void hot_worker_lock(void) {
    pthread_mutex_lock(&hot);
}

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iterations; i++) {
        hot_worker_lock();
        for (int k = 0; k < 50; k++)
            counter++;
        /* Now and then the holder sleeps with the lock held, and the
         * others wait for it: this lock then has by far the most total
         * wait, more than a holder of another lock preempted for a
         * scheduler tick can give that one (the profile ranks by it). */
        if (i % 64 == 0)
            usleep(100);
        pthread_mutex_unlock(&hot);
        if (i % 16 == 0) {
            pthread_rwlock_rdlock(&table);
            reads++;
            pthread_rwlock_unlock(&table);
            pthread_spin_lock(&spin);
            spins++;
            pthread_spin_unlock(&spin);
        }
    }
    return NULL;
}

/* Run `child` in a forked child, which then exits with exit() (so that
 * the library's exit handler runs); 0 if it exited with status 0. */
static int in_child(void (*child)(void)) {
    pid_t p = fork();
    if (p < 0)
        return 1;
    if (p == 0) {
        child();
        exit(0);
    }
    int st;
    return waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

static void lock_hot_a_few_times(void) {
    for (int i = 0; i < FORK_LOCKS; i++) {
        pthread_mutex_lock(&hot);
        pthread_mutex_unlock(&hot);
    }
}

static void take_no_lock(void) {}

static volatile sig_atomic_t got_term;
static void note_term(int sig) { got_term = sig; }

int main(int argc, char **argv) {
    if (argc > 1)
        iterations = atol(argv[1]);
    const char *mode = argc > 2 ? argv[2] : "";
    if (strcmp(mode, "none") == 0)
        return 0;
    if (strcmp(mode, "many") == 0) {
        /* All-zero bytes are PTHREAD_MUTEX_INITIALIZER. */
        pthread_mutex_t *ms = calloc(MANY_LOCKS, sizeof *ms);
        if (!ms)
            return 2;
        for (int k = 0; k < MANY_TIMES; k++)
            for (int i = 0; i < MANY_LOCKS; i++) {
                pthread_mutex_lock(&ms[i]);
                pthread_mutex_unlock(&ms[i]);
            }
        printf("ok\n");
        return 0;
    }
    if (strcmp(mode, "own") == 0)
        signal(SIGTERM, note_term);
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    pthread_t t[THREADS];
    /* The cold lock is taken once per thread, by the main thread only:
     * never contended. (Taken by the workers, it was contended now and
     * then, and a sleeper on it can wait a whole scheduler time slice for
     * a CPU, longer than the hot lock's waits add up to in a short run.) */
    for (int i = 0; i < THREADS; i++) {
        pthread_mutex_lock(&cold);
        pthread_mutex_unlock(&cold);
        if (pthread_create(&t[i], NULL, worker, NULL) != 0)
            return 2;
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    if (counter != (unsigned long)THREADS * iterations * 50) {
        printf("lost updates: %lu\n", counter);
        return 1;
    }
    if (strcmp(mode, "fork") == 0 &&
        (in_child(lock_hot_a_few_times) || in_child(take_no_lock))) {
        printf("a child failed\n");
        return 1;
    }
    if (strcmp(mode, "term") == 0) {
        int sigs[] = {SIGINT, SIGTERM, SIGHUP};
        for (int i = 0; i < 3; i++) {
            struct sigaction old;
            if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL) {
                printf("signal %d does not read as at its default action\n", sigs[i]);
                return 1;
            }
        }
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        if (signal(SIGTERM, SIG_DFL) != SIG_DFL || sigaction(SIGTERM, &dfl, NULL) != 0) {
            printf("setting SIGTERM's default action failed\n");
            return 1;
        }
    }
    if (strcmp(mode, "term") == 0 || strcmp(mode, "own") == 0)
        raise(SIGTERM);
    if (strcmp(mode, "hup") == 0)
        raise(SIGHUP);
    if (strcmp(mode, "own") == 0 && got_term != SIGTERM) {
        printf("the program's own handler did not run\n");
        return 1;
    }
    if (strcmp(mode, "spawn") == 0) {
        char *args[] = {argv[0], "0", "none", NULL};
        pid_t p;
        int st;
        if (posix_spawn(&p, argv[0], NULL, NULL, args, environ) != 0 ||
            waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("the spawned program failed\n");
            return 1;
        }
    }
    printf("ok\n");
    return 0;
}
