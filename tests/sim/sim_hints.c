/* sim_hints.c - the shared warm hint's table with the measured replication delay and start-up window. */
#include "sim_hints.h"

#include <errno.h>
#include <stdlib.h>

static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t slot(uint64_t key, uint32_t mask)
{
	uint64_t k = key * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(k >> 32) & mask;
}

int sim_hints_init(struct sim_hints *h, uint64_t seed, int64_t start_us)
{
	*h = (struct sim_hints){ .mask = 1023, .rng = seed, .start_us = start_us };
	h->t = calloc(h->mask + 1, sizeof(*h->t));
	return h->t ? 0 : -ENOMEM;
}

void sim_hints_finish(struct sim_hints *h)
{
	free(h->t);
	h->t = NULL;
}

static int grow(struct sim_hints *h)
{
	uint32_t nmask = h->mask * 2 + 1;
	struct sim_hint *n = calloc(nmask + 1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	for (uint32_t i = 0; i <= h->mask; i++) {
		if (h->t[i].key == 0)
			continue;
		uint32_t p = slot(h->t[i].key, nmask);
		while (n[p].key != 0)
			p = (p + 1) & nmask;
		n[p] = h->t[i];
	}
	free(h->t);
	h->t = n;
	h->mask = nmask;
	return 0;
}

static struct sim_hint *find(const struct sim_hints *h, uint64_t key)
{
	uint32_t p = slot(key, h->mask);
	while (h->t[p].key != 0) {
		if (h->t[p].key == key)
			return &h->t[p];
		p = (p + 1) & h->mask;
	}
	return NULL;
}

/* Lone tables (sim_hints.lone): one per agent, as keys of their own. */
static uint64_t table_key(const struct sim_hints *h, uint64_t key, uint32_t agent)
{
	if (h->lone)
		key ^= (agent + 1) * 0x9e3779b97f4a7c15ull;
	return key ? key : 1;
}

int sim_hints_write(struct sim_hints *h, uint64_t key, uint32_t ep, uint32_t agent, int64_t now_us)
{
	key = table_key(h, key, agent);
	if (key == 0)
		key = 1; /* 0 marks free slots: one key in 2^64 shares a slot */
	struct sim_hint *x = find(h, key);
	if (!x) {
		if ((h->used + 1) * 2 > h->mask + 1 && grow(h) < 0)
			return -ENOMEM;
		uint32_t p = slot(key, h->mask);
		while (h->t[p].key != 0)
			p = (p + 1) & h->mask;
		x = &h->t[p];
		*x = (struct sim_hint){ .key = key, .ep = UINT32_MAX, .prev_ep = UINT32_MAX };
		h->used++;
	}
	h->writes++;
	int64_t delay;
	uint64_t r = mix(&h->rng);
	if (now_us - h->start_us < SIM_HINT_STARTUP_US) {
		if (r % SIM_HINT_STARTUP_LOSS == 0) {
			/* lost for the others: the writer's own table has it */
			h->lost++;
			delay = INT64_MAX / 2;
		} else {
			delay = (int64_t)((r >> 8) % SIM_HINT_STARTUP_MAX_US);
		}
	} else {
		delay = SIM_HINT_DELAY_MIN_US +
			(int64_t)((r >> 8) % (SIM_HINT_DELAY_MAX_US - SIM_HINT_DELAY_MIN_US + 1));
	}
	/* What the others see until this write reaches them: the last value
	 * that did (a write still under way is overtaken). */
	if (x->ep != UINT32_MAX && x->visible_us <= now_us) {
		x->prev_ep = x->ep;
		x->prev_at_us = x->at_us;
		x->prev_writer = x->writer;
	}
	x->ep = ep;
	x->at_us = now_us;
	x->writer = agent;
	x->visible_us = now_us + delay;
	return 0;
}

int sim_hints_read(const struct sim_hints *h, uint64_t key, uint32_t agent, int64_t now_us,
		   uint32_t *ep, int64_t *at_us, uint32_t *writer)
{
	const struct sim_hint *x = find(h, table_key(h, key, agent));
	if (!x || x->ep == UINT32_MAX)
		return 0;
	if (x->writer == agent || x->visible_us <= now_us) {
		*ep = x->ep;
		*at_us = x->at_us;
		*writer = x->writer;
		return 1;
	}
	if (x->prev_ep == UINT32_MAX)
		return 0;
	*ep = x->prev_ep;
	*at_us = x->prev_at_us;
	*writer = x->prev_writer;
	return 1;
}
