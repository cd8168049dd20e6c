/* sim_pol_leastconn.c - HAProxy "balance leastconn" on its own exact connection counts. */
#include "sim_policy.h"

#include <stdlib.h>

struct lc {
	uint32_t rot;
};

static void *lc_create(const struct sim_policy_env *env)
{
	struct lc *s = calloc(1, sizeof(*s));
	if (s)
		s->rot = env->agent;
	return s;
}

static void lc_destroy(void *st)
{
	free(st);
}

static int lc_decide(void *st, const struct sim_view *v, const struct sim_req *r, const char **reason)
{
	struct lc *s = st;
	(void)r;
	*reason = "leastconn";
	return sim_policy_leastconn_pick(v, &s->rot);
}

const struct sim_policy sim_pol_leastconn = {
	.name = "leastconn",
	.desc = "HAProxy balance leastconn (live counts)",
	.create = lc_create,
	.destroy = lc_destroy,
	.decide = lc_decide,
};
