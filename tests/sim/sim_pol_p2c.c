/* sim_pol_p2c.c - power of two choices alone (HAProxy "balance random(2)") on live counts. */
#include "sim_policy.h"
#include "sim_rng.h"

#include <stdlib.h>

struct p2c {
	struct sim_rng rng;
	uint32_t *up; /* scratch: indices of endpoints that are up */
};

static void *p2c_create(const struct sim_policy_env *env)
{
	struct p2c *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->up = calloc(env->nep ? env->nep : 1, sizeof(*s->up));
	if (!s->up) {
		free(s);
		return NULL;
	}
	sim_rng_seed(&s->rng, env->seed ^ 0x9c2);
	return s;
}

static void p2c_destroy(void *st)
{
	struct p2c *s = st;
	if (!s)
		return;
	free(s->up);
	free(s);
}

static int p2c_decide(void *st, const struct sim_view *v, const struct sim_req *r, const char **reason)
{
	struct p2c *s = st;
	uint32_t n = 0;
	(void)r;
	*reason = "p2c";
	for (uint32_t e = 0; e < v->n; e++)
		if (v->ep[e].up)
			s->up[n++] = e;
	if (n == 0)
		return -1;
	if (n == 1)
		return (int)s->up[0];
	uint32_t i = sim_rng_below(&s->rng, n);
	uint32_t j = sim_rng_below(&s->rng, n - 1);
	if (j >= i)
		j++;
	const struct sim_view_ep *a = &v->ep[s->up[i]], *b = &v->ep[s->up[j]];
	double la = (a->live + 1) / a->weight, lb = (b->live + 1) / b->weight;
	return (int)(lb < la ? s->up[j] : s->up[i]);
}

const struct sim_policy sim_pol_p2c = {
	.name = "p2c",
	.desc = "power of two choices alone (HAProxy balance random(2))",
	.create = p2c_create,
	.destroy = p2c_destroy,
	.decide = p2c_decide,
};
