/* A load generator for a memcached server (text protocol) that also checks
 * for lost updates: THREADS client threads, one connection each, send a mix
 * of requests for SECONDS and count the replies; a quarter of the requests
 * increment one of 8 shared counters, and at the end each counter must equal
 * the number of increments that were answered.
 *
 * Usage: memcached_load PORT THREADS SECONDS
 * Prints one line: "ops <n> ops_per_s <x> incr <n> lost <n> errors <n>",
 * and exits 1 if any update was lost or any reply was wrong.
 *
 * Mix per request: 1/4 incr of a shared counter, 1/4 set and 1/2 get of
 * one of 4096 keys (8-byte values). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define COUNTERS 8
#define KEYS 4096

static int port, seconds;
static atomic_int stop;
static atomic_long errors;
static atomic_long incrs[COUNTERS];

struct conn {
    int fd;
    char buf[4096];
    size_t len, off;
};

static int dial(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One reply line (without "\r\n") into `line`; -1 on a closed connection. */
static int read_line(struct conn *c, char *line, size_t cap) {
    size_t n = 0;
    for (;;) {
        while (c->off < c->len) {
            char ch = c->buf[c->off++];
            if (ch == '\n') {
                if (n > 0 && line[n - 1] == '\r')
                    n--;
                line[n] = 0;
                return 0;
            }
            if (n + 1 < cap)
                line[n++] = ch;
        }
        ssize_t r = recv(c->fd, c->buf, sizeof c->buf, 0);
        if (r <= 0)
            return -1;
        c->len = (size_t)r;
        c->off = 0;
    }
}

static void fail(const char *what, const char *got) {
    fprintf(stderr, "memcached_load: %s: got \"%s\"\n", what, got);
    atomic_fetch_add(&errors, 1);
}

static void *client(void *arg) {
    unsigned seed = (unsigned)(size_t)arg * 2654435761u + 1;
    struct conn c = {.fd = dial()};
    char req[128], line[256];
    long *ops = calloc(1, sizeof(long));
    if (c.fd < 0) {
        fail("connect", "refused");
        return ops;
    }
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        unsigned r = rand_r(&seed);
        unsigned key = (r >> 4) % KEYS;
        int n;
        switch (r & 3) {
        case 0: {
            unsigned k = (r >> 4) % COUNTERS;
            n = snprintf(req, sizeof req, "incr counter%u 1\r\n", k);
            if (send_all(c.fd, req, (size_t)n) || read_line(&c, line, sizeof line))
                goto closed;
            if (line[0] < '0' || line[0] > '9')
                fail("incr", line);
            else
                atomic_fetch_add_explicit(&incrs[k], 1, memory_order_relaxed);
            break;
        }
        case 1:
            n = snprintf(req, sizeof req, "set key%u 0 0 8\r\n%08u\r\n", key, r % 100000000u);
            if (send_all(c.fd, req, (size_t)n) || read_line(&c, line, sizeof line))
                goto closed;
            if (strcmp(line, "STORED") != 0)
                fail("set", line);
            break;
        default:
            n = snprintf(req, sizeof req, "get key%u\r\n", key);
            if (send_all(c.fd, req, (size_t)n) || read_line(&c, line, sizeof line))
                goto closed;
            if (strncmp(line, "VALUE ", 6) == 0) {
                /* the value, then END */
                if (read_line(&c, line, sizeof line) || strlen(line) != 8 ||
                    read_line(&c, line, sizeof line))
                    goto closed;
            }
            if (strcmp(line, "END") != 0)
                fail("get", line);
        }
        (*ops)++;
    }
    close(c.fd);
    return ops;
closed:
    fail("connection", "closed");
    close(c.fd);
    return ops;
}

/* Send one request on a fresh connection and read its first reply line. */
static int ask(const char *req, char *line, size_t cap) {
    struct conn c = {.fd = dial()};
    if (c.fd < 0)
        return -1;
    int rc = send_all(c.fd, req, strlen(req)) || read_line(&c, line, cap) ? -1 : 0;
    if (rc == 0 && strncmp(line, "VALUE ", 6) == 0)
        rc = read_line(&c, line, cap);
    close(c.fd);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: memcached_load PORT THREADS SECONDS\n");
        return 2;
    }
    port = atoi(argv[1]);
    int threads = atoi(argv[2]);
    seconds = atoi(argv[3]);
    if (port <= 0 || port > 65535 || threads <= 0 || threads > 1024 || seconds <= 0) {
        fprintf(stderr, "memcached_load: PORT 1..65535, THREADS 1..1024, SECONDS > 0\n");
        return 2;
    }
    char line[256], req[64];
    for (int k = 0; k < COUNTERS; k++) {
        snprintf(req, sizeof req, "set counter%d 0 0 1\r\n0\r\n", k);
        if (ask(req, line, sizeof line) || strcmp(line, "STORED") != 0) {
            fprintf(stderr, "memcached_load: cannot reach or set up the server on port %d\n", port);
            return 2;
        }
    }
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, client, (void *)(size_t)i);
    sleep((unsigned)seconds);
    atomic_store(&stop, 1);
    long ops = 0;
    for (int i = 0; i < threads; i++) {
        long *n;
        pthread_join(t[i], (void **)&n);
        ops += *n;
        free(n);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    long total = 0, lost = 0;
    for (int k = 0; k < COUNTERS; k++) {
        snprintf(req, sizeof req, "get counter%d\r\n", k);
        if (ask(req, line, sizeof line)) {
            fprintf(stderr, "memcached_load: counter%d unreadable\n", k);
            return 1;
        }
        long want = atomic_load(&incrs[k]), got = atol(line);
        total += want;
        if (got != want) {
            fprintf(stderr, "memcached_load: counter%d is %ld, %ld increments were answered\n", k,
                    got, want);
            lost += labs(want - got);
        }
    }
    long errs = atomic_load(&errors);
    printf("ops %ld ops_per_s %.0f incr %ld lost %ld errors %ld\n", ops, ops / secs, total, lost,
           errs);
    return lost || errs ? 1 : 0;
}
