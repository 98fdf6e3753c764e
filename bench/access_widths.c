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
  return 0;
}
