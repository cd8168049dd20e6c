/* bench_util.h - what the benchmarks share: an allocation counter (malloc,
 * calloc and realloc wrapped at link time with --wrap) and a monotonic
 * clock in nanoseconds. */
#ifndef WARMLANE_BENCH_UTIL_H
#define WARMLANE_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

/* Allocations made since the program started (every thread). */
extern uint64_t bench_allocs;

static inline uint64_t ns_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* qsort comparator for uint64_t. */
int cmp_u64(const void *a, const void *b);

#endif
