/* tier.c - failover tiers (tier.h): the tier limit of a decision and the hysteresis of sessions on worse tiers. */
#include "tier.h"

bool tier_full(const struct tier_sums *s, unsigned t, double spill)
{
	if (spill <= 0 || t == 0 || t > CORE_TIER_MAX)
		return false;
	return (double)s->in_flight[t - 1] >= spill * s->w[t - 1];
}

unsigned tier_limit(const struct tier_sums *s, double spill)
{
	unsigned lim = 0;
	for (unsigned t = 1; t <= CORE_TIER_MAX; t++) {
		if (s->n[t - 1] == 0)
			continue;
		lim = t;
		if (!tier_full(s, t, spill))
			break;
	}
	return lim;
}

void tier_note(struct tier_state *st, const struct tier_sums *s,
	       double spill, uint64_t now_ms)
{
	for (unsigned t = 1; t <= CORE_TIER_MAX; t++) {
		bool up = s->closed[t - 1] > 0 && !tier_full(s, t, spill);
		if (!up) {
			st->down[t - 1] = true;
		} else if (st->down[t - 1]) {
			st->down[t - 1] = false;
			st->up_since_ms[t - 1] = now_ms;
		}
	}
}

bool tier_keeps(const struct tier_state *st, unsigned tier,
		uint64_t return_ms, uint64_t now_ms)
{
	for (unsigned t = 1; t < tier && t <= CORE_TIER_MAX; t++) {
		if (st->down[t - 1])
			continue;
		/* Up: it takes the session back once up for return_ms. */
		if (now_ms - st->up_since_ms[t - 1] >= return_ms)
			return false;
	}
	return true;
}
