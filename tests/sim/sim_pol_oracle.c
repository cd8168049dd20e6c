/* sim_pol_oracle.c - the oracle: the endpoint holding the longest cached prefix, ties by least load. */
#include "sim_policy.h"

#include <math.h>
#include <stdlib.h>

/* The oracle takes an endpoint only while it has a free batch slot (it never
 * queues a request): without a bound, since every prompt shares block 0,
 * the first endpoint to cache it would take every request. The bounded-load
 * rule of warmlane and chash (factor 1.5) costs hits (measured: 30.7% against
 * 31.1% on the Mooncake trace), so an upper bound on hits does not use it. */
#define ORACLE_LOAD_FACTOR 1.5
#define ORACLE_BOUND 0 /* 1: the 1.5 bound; 0: capacity (never queue) */
#define ORACLE_TIE_BLOCKS 4

struct oracle {
	uint32_t rot;
	uint32_t *hits;         /* scratch: cached blocks + 1, 0 when not a candidate */
	uint32_t *max_running;  /* per endpoint, from the fleet file */
	int bound;
};

static void *oracle_create_bound(const struct sim_policy_env *env, int bound)
{
	struct oracle *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->rot = env->agent;
	s->bound = bound;
	s->hits = calloc(env->nep ? env->nep : 1, sizeof(*s->hits));
	s->max_running = calloc(env->nep ? env->nep : 1, sizeof(*s->max_running));
	if (!s->hits || !s->max_running) {
		free(s->hits);
		free(s->max_running);
		free(s);
		return NULL;
	}
	for (uint32_t e = 0; e < env->nep; e++)
		s->max_running[e] = env->cfg->ep[e].max_running;
	return s;
}

static void *oracle_create(const struct sim_policy_env *env)
{
	return oracle_create_bound(env, ORACLE_BOUND);
}

static void oracle_destroy(void *st)
{
	struct oracle *s = st;
	if (!s)
		return;
	free(s->hits);
	free(s->max_running);
	free(s);
}

/* Whether endpoint e may take one more request. */
static int oracle_within(const struct oracle *s, const struct sim_view *v, uint32_t e, double tot_live,
			 double tot_w)
{
	if (s->bound)
		return v->ep[e].live + 1 <= ceil(ORACLE_LOAD_FACTOR * (tot_live + 1) * v->ep[e].weight / tot_w);
	return v->ep[e].live < s->max_running[e];
}

static int oracle_decide(void *st, const struct sim_view *v, const struct sim_req *r, const char **reason)
{
	struct oracle *s = st;
	double tot_w = 0, tot_live = 0;
	uint32_t max_hits = 0;
	for (uint32_t e = 0; e < v->n; e++) {
		if (v->ep[e].up) {
			tot_w += v->ep[e].weight;
			tot_live += v->ep[e].live;
		}
	}
	/* pass 1: the longest cached prefix among endpoints within the bound */
	for (uint32_t e = 0; e < v->n; e++) {
		s->hits[e] = 0;
		if (!v->ep[e].up || !oracle_within(s, v, e, tot_live, tot_w))
			continue;
		s->hits[e] = sim_fleet_cached_blocks(v->fleet, e, r) + 1;
		if (s->hits[e] > max_hits)
			max_hits = s->hits[e];
	}
	if (max_hits == 0) {
		*reason = "leastconn";
		return sim_policy_leastconn_pick(v, &s->rot);
	}
	/* pass 2: least load among the longest. When no endpoint holds more
	 * than ORACLE_TIE_BLOCKS blocks of the prompt (4 blocks, about 80 ms of
	 * prefill), all that hold within that of the longest tie: a system
	 * prompt shared by every request must not decide where new
	 * conversations go, or a cold endpoint would never get any. */
	uint32_t window = max_hits - 1 <= ORACLE_TIE_BLOCKS ? ORACLE_TIE_BLOCKS : 0;
	int best = -1;
	double best_load = 0;
	for (uint32_t k = 0; k < v->n; k++) {
		uint32_t e = (s->rot + k) % v->n;
		if (s->hits[e] == 0 || s->hits[e] + window < max_hits)
			continue;
		double load = (v->ep[e].live + 1) / v->ep[e].weight;
		if (best < 0 || load < best_load) {
			best = (int)e;
			best_load = load;
		}
	}
	s->rot = ((uint32_t)best + 1) % v->n;
	*reason = max_hits > ORACLE_TIE_BLOCKS + 1 ? "cached" : "leastconn";
	return best;
}

const struct sim_policy sim_pol_oracle = {
	.name = "oracle",
	.desc = "knows every cache: longest cached prefix on an endpoint with a free batch slot, ties by least load",
	.create = oracle_create,
	.destroy = oracle_destroy,
	.decide = oracle_decide,
};
