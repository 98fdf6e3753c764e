/*
 * What an uncontended lock+unlock pair costs on this CPU for each way a
 * lock word can be taken and released: the width of the acquiring CAS
 * against the width of the releasing store (or an RMW release). One
 * thread, 5*10^7 pairs around a counter increment, three rounds, ns per
 * pair. It measures the store-to-load forwarding cost the queued
 * spinlock's unlock meets (docs/locks/spinlock.md): a 1-byte store
 * followed by a 4-byte CAS of the same word; and the pairs a lock taken
 * and released at one byte's width would make, with a load of the next
 * byte (the queued spinlock's pending byte) after or before its CAS.
 *
 * The second table puts the protected data in the lock's cache line, as
 * `klock bench` does (its locks are not padded: the data follows the
 * lock), and compares the queued spinlock's uncontended accesses (1-byte
 * CAS, load of the pending byte, 1-byte release store) with a ticket
 * lock's, whose acquiring RMW (`next`) and release store (`owner`) are
 * different words of that line, and with two pairs that tell apart what
 * differs: the release store aimed at another word, an `xadd` in place of
 * the CAS. Each pair runs twice: followed by a store to another line
 * before the next acquisition (as the bench's loop stores its operation
 * count), and followed by nothing.
 *
 * The third table is a mutex's pair, a CAS and an `xadd` of one word
 * (two locked RMWs), with a plain load between them: of the same word,
 * of another word of its line, or none; and with the load before the
 * CAS. It measures what an ownership test that reads the lock word
 * costs next to the lock's own RMWs (docs/preload.md).
 *
 * The fourth table varies the widths of the acquiring CAS and of the
 * release, the data in the lock's line: on some CPUs (an AMD EPYC of
 * family 25, model 1) a store narrower than 4 bytes makes the next locked
 * instruction on the line wait, whichever byte it wrote, while a 4-byte
 * store over a 1-byte CAS costs nothing extra (docs/locks/spinlock.md).
 *
 * The fifth table is the paravirt queued spinlock's fast path and plain
 * unlock in its two words, the data in the lock's line: the kernel's four
 * bytes (1-byte CAS of the locked byte, load of the pending byte, 1-byte
 * store) and eight bytes with the locked part alone in the low four
 * (4-byte CAS, one 4-byte load of the high half's pending byte and tail,
 * 4-byte store), beside a ticket lock; each followed by a store to another
 * line, as the bench's loop stores its operation count.
 *
 *   cc -O2 -o access_widths bench/access_widths.c && ./access_widths
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static volatile uint32_t w __attribute__((aligned(64)));
static volatile unsigned long counter;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

#define N 50000000L
#define RUN(name, LOCK, UNLOCK)                                                \
  do {                                                                         \
    double a = now();                                                          \
    for (long i = 0; i < N; i++) {                                             \
      LOCK;                                                                    \
      counter++;                                                               \
      UNLOCK;                                                                  \
    }                                                                          \
    printf("%-40s %.2f ns\n", name, (now() - a) / N);                          \
  } while (0)

/* The lock and its data in one cache line, as in `klock bench`; `seq`
 * stands for the bench's per-thread operation count, a line of its own. */
static struct {
  uint32_t next, owner;
  uint64_t data;
} line __attribute__((aligned(64)));
static volatile uint64_t seq __attribute__((aligned(64)));

/* One pair as above, then (AFTER) what the thread does before its next
 * acquisition: a store to another line, or nothing. */
#define RUN_LINE(name, after, AFTER, LOCK, UNLOCK)                             \
  do {                                                                         \
    line.next = line.owner = 0;                                                \
    double a = now();                                                          \
    for (long i = 0; i < N; i++) {                                             \
      LOCK;                                                                    \
      (*(volatile uint64_t *)&line.data)++;                                    \
      UNLOCK;                                                                  \
      AFTER;                                                                   \
    }                                                                          \
    printf("%-44s %-22s %.2f ns\n", name, after, (now() - a) / N);             \
  } while (0)

#define CAS(T, p)                                                              \
  ({                                                                           \
    T e = 0;                                                                   \
    while (!__atomic_compare_exchange_n((volatile T *)(p), &e, 1, 0,           \
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))   \
      e = 0;                                                                   \
  })
#define STORE(T, p) __atomic_store_n((volatile T *)(p), 0, __ATOMIC_RELEASE)

int main(void) {
  for (int r = 0; r < 3; r++) {
    RUN("4-byte CAS, 4-byte store", CAS(uint32_t, &w), STORE(uint32_t, &w));
    RUN("4-byte CAS, 1-byte store", CAS(uint32_t, &w), STORE(uint8_t, &w));
    RUN("4-byte CAS, 4-byte fetch_sub", CAS(uint32_t, &w),
        __atomic_fetch_sub(&w, 1, __ATOMIC_RELEASE));
    RUN("1-byte CAS, 1-byte store", CAS(uint8_t, &w), STORE(uint8_t, &w));
    RUN("2-byte CAS, 1-byte store", CAS(uint16_t, &w), STORE(uint8_t, &w));
    RUN("2-byte CAS, 2-byte store", CAS(uint16_t, &w), STORE(uint16_t, &w));
    RUN("4-byte load, 1-byte CAS, 1-byte store",
        ({
          while (__atomic_load_n(&w, __ATOMIC_RELAXED) != 0)
            ;
          CAS(uint8_t, &w);
        }),
        STORE(uint8_t, &w));
    RUN("1-byte CAS, 4-byte load, 1-byte store",
        ({
          CAS(uint8_t, &w);
          if (__atomic_load_n(&w, __ATOMIC_RELAXED) & 0x100)
            counter += 2;
        }),
        STORE(uint8_t, &w));
    RUN("1-byte CAS, load of byte 1, 1-byte store",
        ({
          CAS(uint8_t, &w);
          if (__atomic_load_n((volatile uint8_t *)&w + 1, __ATOMIC_RELAXED))
            counter += 2;
        }),
        STORE(uint8_t, &w));
    RUN("load of byte 1, 1-byte CAS, 1-byte store",
        ({
          while (__atomic_load_n((volatile uint8_t *)&w + 1, __ATOMIC_RELAXED))
            ;
          CAS(uint8_t, &w);
        }),
        STORE(uint8_t, &w));
  }
  /* Each pair twice: with the store to another line after it, and without. */
#define BOTH(name, LOCK, UNLOCK)                                               \
  do {                                                                         \
    RUN_LINE(name, "then a store elsewhere", seq = i, LOCK, UNLOCK);           \
    RUN_LINE(name, "then nothing", (void)0, LOCK, UNLOCK);                     \
  } while (0)
  printf("\nThe data in the lock's line:\n");
  for (int r = 0; r < 3; r++) {
    BOTH("ticket lock (xadd next, load owner)",
         ({
           uint32_t me = __atomic_fetch_add(&line.next, 1, __ATOMIC_RELAXED);
           while (__atomic_load_n(&line.owner, __ATOMIC_ACQUIRE) != me)
             ;
         }),
         __atomic_store_n(&line.owner,
                          __atomic_load_n(&line.owner, __ATOMIC_RELAXED) + 1,
                          __ATOMIC_RELEASE));
    BOTH("1-byte CAS, load of byte 1, 1-byte store",
         ({
           CAS(uint8_t, &line.next);
           if (__atomic_load_n((volatile uint8_t *)&line.next + 1,
                               __ATOMIC_RELAXED))
             line.data += 2;
         }),
         STORE(uint8_t, &line.next));
    BOTH("1-byte CAS, 1-byte store",
         CAS(uint8_t, &line.next), STORE(uint8_t, &line.next));
    /* Not locks: the same instructions with the release store moved to
     * another word of the line, or an xadd in place of the CAS. */
    BOTH("1-byte CAS, store to another word",
         ({
           uint8_t e = 0;
           __atomic_compare_exchange_n((volatile uint8_t *)&line.next, &e, 0, 0,
                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
         }),
         STORE(uint8_t, &line.owner));
    BOTH("4-byte xadd, 4-byte store of it",
         __atomic_fetch_add(&line.next, 1, __ATOMIC_ACQUIRE),
         STORE(uint32_t, &line.next));
  }
  /* A mutex's pair: CAS (0 -> tid) and xadd (-tid), with a load. */
  printf("\nTwo RMWs of one word (CAS, xadd), and a load:\n");
  for (int r = 0; r < 3; r++) {
    const uint32_t me = 1234 << 4;
#define CAS_ME()                                                               \
  ({                                                                           \
    uint32_t e_ = 0;                                                           \
    __atomic_compare_exchange_n(&line.next, &e_, me, 0, __ATOMIC_ACQUIRE,      \
                                __ATOMIC_RELAXED);                             \
  })
#define XADD_ME() __atomic_fetch_sub(&line.next, me, __ATOMIC_RELEASE)
#define CHECK(p)                                                               \
  if (__atomic_load_n((p), __ATOMIC_RELAXED) == 0xdeadbeef)                    \
  line.data += 2
    RUN_LINE("CAS, xadd", "", (void)0, CAS_ME(), XADD_ME());
    RUN_LINE("CAS, load of the word, xadd", "", (void)0, CAS_ME(),
             ({ CHECK(&line.next); XADD_ME(); }));
    RUN_LINE("CAS, load of another word, xadd", "", (void)0, CAS_ME(),
             ({ CHECK(&line.owner); XADD_ME(); }));
    RUN_LINE("load of the word, CAS, xadd", "", (void)0,
             ({ CHECK(&line.next); CAS_ME(); }), XADD_ME());
  }
  /* The widths of the acquiring CAS and of the release. */
  printf("\nThe release's width (data in the lock's line):\n");
  for (int r = 0; r < 3; r++) {
    RUN_LINE("1-byte CAS, 1-byte store", "", (void)0, CAS(uint8_t, &line.next),
             STORE(uint8_t, &line.next));
    RUN_LINE("1-byte CAS, 1-byte store to the next byte", "", (void)0,
             ({
               uint8_t e = 0;
               __atomic_compare_exchange_n((volatile uint8_t *)&line.next, &e,
                                           0, 0, __ATOMIC_ACQUIRE,
                                           __ATOMIC_RELAXED);
             }),
             STORE(uint8_t, (uint8_t *)&line.next + 1));
    RUN_LINE("1-byte CAS, 4-byte store of its word", "", (void)0,
             CAS(uint8_t, &line.next), STORE(uint32_t, &line.next));
    RUN_LINE("2-byte CAS, 2-byte store", "", (void)0,
             CAS(uint16_t, &line.next), STORE(uint16_t, &line.next));
    RUN_LINE("4-byte CAS, 4-byte store", "", (void)0,
             CAS(uint32_t, &line.next), STORE(uint32_t, &line.next));
    RUN_LINE("4-byte CAS, 4-byte fetch_sub", "", (void)0,
             CAS(uint32_t, &line.next),
             __atomic_fetch_sub(&line.next, 1, __ATOMIC_RELEASE));
    RUN_LINE("1-byte CAS, 1-byte fetch_sub", "", (void)0,
             CAS(uint8_t, &line.next),
             __atomic_fetch_sub((volatile uint8_t *)&line.next, 1,
                                __ATOMIC_RELEASE));
  }
  /* The queued spinlock's two words. */
  printf("\nThe queued spinlock's word, 4 or 8 bytes (data in the lock's line):\n");
  static struct {
    uint32_t lo, hi;
    uint64_t data;
  } q __attribute__((aligned(64)));
  for (int r = 0; r < 3; r++) {
#define RUN_Q(name, LOCK, UNLOCK)                                              \
  do {                                                                         \
    q.lo = q.hi = 0;                                                           \
    double a = now();                                                          \
    for (long i = 0; i < N; i++) {                                             \
      LOCK;                                                                    \
      (*(volatile uint64_t *)&q.data)++;                                       \
      UNLOCK;                                                                  \
      seq = i;                                                                 \
    }                                                                          \
    printf("%-64s %.2f ns\n", name, (now() - a) / N);                          \
  } while (0)
    RUN_Q("4 bytes: 1-byte CAS, load of the pending byte, 1-byte store",
          ({
            CAS(uint8_t, &q.lo);
            if (__atomic_load_n((volatile uint8_t *)&q.lo + 1, __ATOMIC_RELAXED))
              q.data += 2;
          }),
          STORE(uint8_t, &q.lo));
    RUN_Q("8 bytes: 4-byte CAS, 4-byte load of the high half, 4-byte store",
          ({
            CAS(uint32_t, &q.lo);
            if (__atomic_load_n(&q.hi, __ATOMIC_RELAXED) & 0xff00)
              q.data += 2;
          }),
          STORE(uint32_t, &q.lo));
    RUN_Q("ticket lock (xadd next, load owner)",
          ({
            uint32_t me = __atomic_fetch_add(&q.lo, 1, __ATOMIC_RELAXED);
            while (__atomic_load_n(&q.hi, __ATOMIC_ACQUIRE) != me)
              ;
          }),
          __atomic_store_n(&q.hi, __atomic_load_n(&q.hi, __ATOMIC_RELAXED) + 1,
                           __ATOMIC_RELEASE));
  }
  return 0;
}
