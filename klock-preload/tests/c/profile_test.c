/* A program with one hot lock: the lock profile (KLOCK_STAT=1) must put
 * it first, name the function that locks it, and count its acquisitions
 * exactly. Usage: profile_test [iterations per thread]. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 8

static pthread_mutex_t hot = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cold = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t table = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t spin;
static volatile unsigned long counter, reads, spins;
static long iterations = 20000;

__attribute__((noinline)) void hot_worker_lock(void) {
    pthread_mutex_lock(&hot);
}

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iterations; i++) {
        hot_worker_lock();
        for (int k = 0; k < 50; k++)
            counter++;
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

int main(int argc, char **argv) {
    if (argc > 1)
        iterations = atol(argv[1]);
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
    printf("ok\n");
    return 0;
}
