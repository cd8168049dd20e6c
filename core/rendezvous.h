/* rendezvous.h - weighted rendezvous hashing (score w / -ln u) with a lazily walked ranking. */
#ifndef WARMLANE_CORE_RENDEZVOUS_H
#define WARMLANE_CORE_RENDEZVOUS_H

#include <stdint.h>
#include <string.h>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

/* One ranked candidate. Lower cost ranks first: cost = -ln(u) / w, whose
 * order is that of the score w / -ln(u). */
struct rdv_item {
	double cost;
	uint32_t endpoint;
};

/* ln(1 + i/256) and 1 / (1 + i/256), each the nearest double. */
extern const double rdv_ln_table[256][2];

/* Natural logarithm of a positive normal x, without division: x = m 2^e,
 * m = (1 + i/256)(1 + t) with 0 <= t < 1/256, ln(1 + t) by four terms of
 * its series. Relative error below 1e-12; same result on every host
 * with IEEE doubles (no libm involved). */
static inline double rdv_ln(double x)
{
	uint64_t bits;
	memcpy(&bits, &x, sizeof(bits));
	int e = (int)((bits >> 52) & 0x7ff) - 1023;
	unsigned i = (unsigned)((bits >> 44) & 0xff);
	bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	double m;
	memcpy(&m, &bits, sizeof(m));
	double t = m * rdv_ln_table[i][1] - 1.0;
	double p = t * (1.0 + t * (-0.5 + t * (1.0 / 3 + t * -0.25)));
	return e * 0.6931471805599453 + rdv_ln_table[i][0] + p;
}

/* The rendezvous cost of key on an endpoint with hash seed `seed` and
 * inverse weight inv_w. Depends only on (key, seed, weight): every agent
 * computes the same. */
static inline double rdv_cost(uint64_t key, uint64_t seed, double inv_w)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++) /* little-endian on every host */
		b[i] = (uint8_t)(key >> (8 * i));
	uint64_t h = XXH3_64bits_withSeed(b, sizeof(b), seed);
	/* u in (0, 1): 53 bits, centred so that neither 0 nor 1 occurs. */
	double u = ((double)(h >> 11) + 0.5) * 0x1.0p-53;
	return -rdv_ln(u) * inv_w;
}

/* A ranking: a binary min-heap over caller-owned items. */
struct rdv_rank {
	struct rdv_item *items;
	uint32_t n;
};

/* Orders items[0..n) into a heap in O(n), so that rdv_rank_next pops
 * candidates best first in O(log n) each: a walk that stops early costs
 * O(n), not a full sort. */
void rdv_rank_init(struct rdv_rank *r, struct rdv_item *items, uint32_t n);

/* Pops the best remaining item into *out. Returns 0, or -1 when empty.
 * Ties on cost are broken by the lower endpoint index. */
int rdv_rank_next(struct rdv_rank *r, struct rdv_item *out);

/* Whether a ranks before b (lower cost, then lower index). */
static inline int rdv_before(const struct rdv_item *a, const struct rdv_item *b)
{
	return a->cost < b->cost || (a->cost == b->cost && a->endpoint < b->endpoint);
}

#endif
