/* tier.h - failover tiers: which tiers of a candidate set a decision may use, and when a session may stay on a worse one.
 *
 * Endpoints carry a tier, 1 the best (docs/tiers.md). A decision first
 * restricts its candidates to the best tier that has a candidate (the
 * exclusions of view_build: not disabled or down, no 404 run, key not
 * dead, breaker admitting) and, while that tier is full (in flight per
 * weight at or over policy.tier_spill), the next ones too; affinity,
 * rendezvous and power of two choices then run within that set. Pure:
 * no clock, no allocation.
 */
#ifndef WARMLANE_CORE_TIER_H
#define WARMLANE_CORE_TIER_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"

/* The candidates of a view, summed by tier (index tier - 1). */
struct tier_sums {
	uint32_t n[CORE_TIER_MAX];        /* candidates */
	uint32_t closed[CORE_TIER_MAX];   /* of them with a CLOSED breaker */
	double w[CORE_TIER_MAX];          /* their weight */
	uint64_t in_flight[CORE_TIER_MAX];
};

/* When each tier was last found able to take sessions back: a candidate
 * with a CLOSED breaker (half-open probes alone do not count) and room
 * under the spill bound. Caller-owned; zeroed means every tier has been
 * up since time 0. */
struct tier_state {
	bool down[CORE_TIER_MAX];
	uint64_t up_since_ms[CORE_TIER_MAX];
};

/* Whether tier t (1-based) of s is full: spill > 0 and its in-flight
 * count at or over spill x its weight. */
bool tier_full(const struct tier_sums *s, unsigned t, double spill);

/* The worst tier a decision may use: the best tier with a candidate,
 * then each next one with a candidate while the one before is full. 0
 * when s has no candidate at all. */
unsigned tier_limit(const struct tier_sums *s, double spill);

/* Notes at now_ms which tiers can take sessions back (see struct
 * tier_state); a tier going from down to up starts its up_since_ms. */
void tier_note(struct tier_state *st, const struct tier_sums *s,
	       double spill, uint64_t now_ms);

/* Whether a session warm on an endpoint of tier `tier` (worse than the
 * decision's limit) stays there: no better tier has been up for
 * return_ms (0: no better tier is up at all). With return_ms 0 the
 * half-open probes are the hysteresis: a session goes back only once a
 * better tier's breaker closed on them. */
bool tier_keeps(const struct tier_state *st, unsigned tier,
		uint64_t return_ms, uint64_t now_ms);

#endif
