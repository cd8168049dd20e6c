/* sim_pol_rr.c - HAProxy "balance roundrobin" (weighted, smooth): the cache-blind baseline. */
#include "sim_policy.h"

#include <stdlib.h>

struct rr {
	double *cur;
};

static void *rr_create(const struct sim_policy_env *env)
{
	struct rr *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->cur = calloc(env->nep ? env->nep : 1, sizeof(*s->cur));
	if (!s->cur) {
		free(s);
		return NULL;
	}
	return s;
}

static void rr_destroy(void *st)
{
	struct rr *s = st;
	if (!s)
		return;
	free(s->cur);
	free(s);
}

static int rr_decide(void *st, const struct sim_view *v, const struct sim_req *r, const char **reason)
{
	struct rr *s = st;
	(void)r;
	*reason = "rr";
	return sim_policy_rr_pick(v, s->cur);
}

const struct sim_policy sim_pol_rr = {
	.name = "round-robin",
	.desc = "HAProxy balance roundrobin (weighted)",
	.create = rr_create,
	.destroy = rr_destroy,
	.decide = rr_decide,
};
