/* sim_pol_chash.c - HAProxy "hash-type consistent" + "hash-balance-factor 150" on the affinity key. */
#include "sim_policy.h"
#include "sim_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define CHASH_POINTS_PER_WEIGHT 100
#define CHASH_BALANCE_FACTOR 1.5

struct chash_point {
	uint64_t pos;
	uint32_t ep;
};

struct chash {
	struct chash_point *ring;
	size_t npoints;
	double *rr;   /* requests without a key: HAProxy falls back to round-robin */
};

static int point_cmp(const void *a, const void *b)
{
	const struct chash_point *x = a, *y = b;
	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return x->ep < y->ep ? -1 : x->ep > y->ep;
}

static void *chash_create(const struct sim_policy_env *env)
{
	struct chash *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	size_t total = 0;
	for (uint32_t e = 0; e < env->nep; e++)
		total += (size_t)lround(env->cfg->ep[e].weight * CHASH_POINTS_PER_WEIGHT) + 1;
	s->ring = calloc(total ? total : 1, sizeof(*s->ring));
	s->rr = calloc(env->nep ? env->nep : 1, sizeof(*s->rr));
	if (!s->ring || !s->rr) {
		free(s->ring);
		free(s->rr);
		free(s);
		return NULL;
	}
	/* Points hang off the server's name, so adding a server moves only the
	 * keys that now land on its points. */
	for (uint32_t e = 0; e < env->nep; e++) {
		const char *name = env->cfg->ep[e].name;
		uint64_t base = XXH64(name, strlen(name), 0);
		long pts = lround(env->cfg->ep[e].weight * CHASH_POINTS_PER_WEIGHT) + 1;
		for (long i = 0; i < pts; i++)
			s->ring[s->npoints++] = (struct chash_point){ sim_rng_mix(base + (uint64_t)i), e };
	}
	qsort(s->ring, s->npoints, sizeof(*s->ring), point_cmp);
	return s;
}

static void chash_destroy(void *st)
{
	struct chash *s = st;
	if (!s)
		return;
	free(s->ring);
	free(s->rr);
	free(s);
}

static int chash_decide(void *st, const struct sim_view *v, const struct sim_req *r, const char **reason)
{
	struct chash *s = st;
	uint64_t key = sim_trace_affinity_key(r);
	if (!key) {
		*reason = "rr";
		return sim_policy_rr_pick(v, s->rr);
	}
	*reason = "hash";
	double tot_w = 0, tot_live = 0;
	for (uint32_t e = 0; e < v->n; e++) {
		if (v->ep[e].up) {
			tot_w += v->ep[e].weight;
			tot_live += v->ep[e].live;
		}
	}
	if (tot_w == 0)
		return -1;
	uint64_t h = sim_rng_mix(key);
	size_t lo = 0, hi = s->npoints;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->ring[mid].pos < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	int first_up = -1;
	for (size_t k = 0; k < s->npoints; k++) {
		const struct chash_point *pt = &s->ring[(lo + k) % s->npoints];
		const struct sim_view_ep *ep = &v->ep[pt->ep];
		if (!ep->up)
			continue;
		if (first_up < 0)
			first_up = (int)pt->ep;
		double slots = ceil(CHASH_BALANCE_FACTOR * (tot_live + 1) * ep->weight / tot_w);
		if (ep->live + 1 <= slots)
			return (int)pt->ep;
	}
	return first_up;
}

const struct sim_policy sim_pol_chash = {
	.name = "chash-bounded",
	.desc = "HAProxy hash-type consistent, hash-balance-factor 150, on the affinity key",
	.create = chash_create,
	.destroy = chash_destroy,
	.decide = chash_decide,
};
