/* bench_util.c - the allocation counter behind the benchmarks' --wrap of malloc, calloc and realloc, so that a timed loop can prove it allocated nothing. */
#include <stddef.h>

#include "bench_util.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

uint64_t bench_allocs;

void *__wrap_malloc(size_t n)
{
	bench_allocs++;
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	bench_allocs++;
	return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	bench_allocs++;
	return __real_realloc(p, n);
}

int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}
