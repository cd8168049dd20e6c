/* hot.c - the keys that are a large share of the traffic (hot.h). */
#include "hot.h"

#include "mix.h"

void hot_init(struct hot *h, uint64_t now_ms)
{
	*h = (struct hot){ 0 };
	owned_init(&h->clk, HOT_HALF_LIFE_MS, now_ms);
}

static inline unsigned place_of(uint64_t key)
{
	return (unsigned)(mix64(key) % HOT_SLOTS);
}

/* Counts key's decision of weight inc in its place s: the holder's count
 * grows, or a colliding key takes one away and the place changes hands
 * at zero. Returns key's count after it, 0 when another key holds s. */
static inline double count_in(struct hot_slot *s, uint64_t key, double inc)
{
	if (s->key == key) {
		s->n += inc;
	} else if ((s->n -= inc) <= 0) {
		s->key = key;
		s->n = inc;
	} else {
		return 0;
	}
	return s->n;
}

/* Counts one decision in the total at now_ms; returns its weight. */
static double tick(struct hot *h, uint64_t now_ms)
{
	double rescale, inc = owned_increment(&h->clk, now_ms, &rescale);
	if (rescale != 1) {
		for (unsigned i = 0; i < HOT_SLOTS; i++)
			h->slot[i].n *= rescale;
		h->total *= rescale;
	}
	h->total += inc;
	return inc;
}

void hot_tick(struct hot *h, uint64_t now_ms)
{
	tick(h, now_ms);
}

double hot_note(struct hot *h, uint64_t key, uint64_t now_ms)
{
	double inc = tick(h, now_ms);
	return count_in(&h->slot[place_of(key)], key, inc) / h->total;
}

double hot_peek(const struct hot *h, uint64_t key, uint64_t now_ms)
{
	struct owned_clock clk = h->clk;
	double rescale, inc = owned_increment(&clk, now_ms, &rescale);
	struct hot_slot s = h->slot[place_of(key)];
	s.n *= rescale;
	return count_in(&s, key, inc) / (h->total * rescale + inc);
}
