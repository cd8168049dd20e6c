/* budget.c - a retry budget: over a sliding window, retries at most a ratio of first attempts plus a floor per second. */
#include "budget.h"

#include <string.h>

static uint64_t budget_width(const struct budget_params *p)
{
	uint64_t w = p->window_ms / BUDGET_BUCKETS;
	return w > 0 ? w : 1;
}

void budget_init(struct budget *b, uint64_t now_ms)
{
	memset(b, 0, sizeof(*b));
	b->bucket_start_ms = now_ms;
}

/* Brings the newest bucket up to now_ms, clearing those that aged out. The
 * width is read each time: a reload that changes the window re-buckets
 * from here on, keeping the counts. */
static void budget_advance(struct budget *b, const struct budget_params *p,
			   uint64_t now_ms)
{
	uint64_t w = budget_width(p);
	if (now_ms < b->bucket_start_ms || now_ms - b->bucket_start_ms < w)
		return;
	uint64_t k = (now_ms - b->bucket_start_ms) / w;
	if (k >= BUDGET_BUCKETS) {
		memset(b->first, 0, sizeof(b->first));
		memset(b->retries, 0, sizeof(b->retries));
		b->head = 0;
	} else {
		for (uint64_t i = 0; i < k; i++) {
			b->head = (uint8_t)((b->head + 1) % BUDGET_BUCKETS);
			b->first[b->head] = 0;
			b->retries[b->head] = 0;
		}
	}
	b->bucket_start_ms += k * w;
}

static uint32_t sat_add(uint32_t a, uint32_t b)
{
	return a > UINT32_MAX - b ? UINT32_MAX : a + b;
}

void budget_record(struct budget *b, const struct budget_params *p,
		   uint32_t retries, uint64_t now_ms)
{
	budget_advance(b, p, now_ms);
	b->first[b->head] = sat_add(b->first[b->head], 1);
	b->retries[b->head] = sat_add(b->retries[b->head], retries);
}

void budget_counts(const struct budget *b, const struct budget_params *p,
		   uint64_t now_ms, uint64_t *first, uint64_t *retries)
{
	/* What budget_advance would clear by now_ms is left out, without
	 * clearing it: metrics read the budget too. */
	uint64_t w = budget_width(p);
	uint64_t k = now_ms > b->bucket_start_ms ?
		     (now_ms - b->bucket_start_ms) / w : 0;
	uint64_t f = 0, r = 0;
	for (uint64_t age = k; age < BUDGET_BUCKETS; age++) {
		/* age k: the newest bucket; age BUDGET_BUCKETS - 1: the
		 * oldest still in the window. */
		unsigned i = (unsigned)((b->head + BUDGET_BUCKETS -
					 (age - k)) % BUDGET_BUCKETS);
		f += b->first[i];
		r += b->retries[i];
	}
	*first = f;
	*retries = r;
}

double budget_allowance(const struct budget_params *p, uint64_t first)
{
	return p->ratio * (double)first +
	       p->min_per_s * ((double)p->window_ms / 1000.0);
}

bool budget_spent(const struct budget *b, const struct budget_params *p,
		  uint64_t now_ms)
{
	uint64_t first, retries;
	budget_counts(b, p, now_ms, &first, &retries);
	return (double)retries >= budget_allowance(p, first);
}
