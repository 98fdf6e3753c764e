/*
 * Which owner-running oracle a preloaded program gets. `oracle_test none`:
 * after contended locking, the process holds no eBPF program (the
 * library's default, the time budget, loads none). `oracle_test bpf` (run
 * as root with KLOCK_ONCPU=bpf): it holds one within 5 s (the eBPF oracle
 * loads in a background thread at the first contended lock). Prints `ok`.
 */
#define _GNU_SOURCE
#include "common.h"

#include <dirent.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

/* Take the mutex 40 times, holding it 1 ms each time: with two of these,
 * the other thread finds it held by a running owner, which is when a
 * waiter asks the oracle whether to spin. */
static void *holder(void *arg) {
  (void)arg;
  for (int i = 0; i < 40; i++) {
    CHECK_RC(pthread_mutex_lock(&m), 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (ms_since(&t0) < 1) {
    }
    CHECK_RC(pthread_mutex_unlock(&m), 0);
  }
  return NULL;
}

/* Whether one of this process's file descriptors is an eBPF program. */
static int holds_bpf_program(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) {
    perror("opendir /proc/self/fd");
    exit(1);
  }
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char path[300], target[256];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n > 0) {
      target[n] = 0;
      if (strcmp(target, "anon_inode:bpf-prog") == 0)
        found = 1;
    }
  }
  closedir(d);
  return found;
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "none") && strcmp(argv[1], "bpf"))) {
    fprintf(stderr, "usage: oracle_test none|bpf\n");
    return 2;
  }
  load_probe();
  int want = strcmp(argv[1], "bpf") == 0;
  pthread_t a, b;
  pthread_create(&a, NULL, holder, NULL);
  pthread_create(&b, NULL, holder, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  /* Wait for a program that is loading: up to 5 s for one that should
   * come; one that should not must not appear within 300 ms. */
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int found = holds_bpf_program();
  while (found == 0 && ms_since(&t0) < (want ? 5000 : 300)) {
    usleep(10000);
    found = holds_bpf_program();
  }
  if (found != want) {
    fprintf(stderr, "FAIL: %s an eBPF program\n",
            found ? "the process holds" : "the process does not hold");
    failures++;
  }
  if (failures)
    return 1;
  printf("ok\n");
  return 0;
}
