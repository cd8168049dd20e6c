/* sim_policy.c - registry of the simulator's routing policies, in report order. */
#include "sim_policy.h"

#include <stdlib.h>
#include <string.h>

static const struct sim_policy *const policies[] = {
	&sim_pol_rr,
	&sim_pol_leastconn,
	&sim_pol_chash,
	&sim_pol_p2c,
	&sim_pol_ttl,
	&sim_pol_warmlane,
	&sim_pol_oracle,
};

unsigned sim_policy_count(void)
{
	return sizeof(policies) / sizeof(policies[0]);
}

const struct sim_policy *sim_policy_at(unsigned i)
{
	return i < sim_policy_count() ? policies[i] : NULL;
}

const struct sim_policy *sim_policy_find(const char *name)
{
	if (strcmp(name, sim_pol_wlmodel.name) == 0)
		return &sim_pol_wlmodel;
	for (unsigned i = 0; i < sim_policy_count(); i++)
		if (strcmp(policies[i]->name, name) == 0)
			return policies[i];
	return NULL;
}

int sim_policy_leastconn_pick(const struct sim_view *v, uint32_t *rot)
{
	int best = -1;
	double best_load = 0;
	for (uint32_t k = 0; k < v->n; k++) {
		uint32_t e = (*rot + k) % v->n;
		if (!v->ep[e].up)
			continue;
		double load = (v->ep[e].live + 1) / v->ep[e].weight;
		if (best < 0 || load < best_load) {
			best = (int)e;
			best_load = load;
		}
	}
	if (best >= 0)
		*rot = ((uint32_t)best + 1) % v->n;
	return best;
}

int sim_policy_rr_pick(const struct sim_view *v, double *cur)
{
	int best = -1;
	double total = 0;
	for (uint32_t e = 0; e < v->n; e++) {
		if (!v->ep[e].up)
			continue;
		cur[e] += v->ep[e].weight;
		total += v->ep[e].weight;
		if (best < 0 || cur[e] > cur[best])
			best = (int)e;
	}
	if (best >= 0)
		cur[best] -= total;
	return best;
}

int sim_policy_param(const struct sim_policy_env *env, const char *name, double *v)
{
	size_t len = strlen(name);
	for (unsigned i = 0; i < env->nset; i++) {
		const char *s = env->set[i];
		if (strncmp(s, name, len) != 0 || s[len] != '=')
			continue;
		if (env->set_read)
			env->set_read[i] = 1;
		char *end;
		double d = strtod(s + len + 1, &end);
		if (end == s + len + 1 || *end)
			return -1;
		*v = d;
		return 1;
	}
	return 0;
}
