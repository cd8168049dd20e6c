/* sim_pol_ttl.c - a TTL map alone: HAProxy stick-table (expire 300 s) on the affinity key, leastconn on a miss. */
#include "sim_policy.h"
#include "sim_map.h"

#include <stdlib.h>

#define TTL_MS (300 * 1000)

struct ttl {
	struct sim_map map; /* key -> last use (ms) << 16 | endpoint */
	uint32_t rot;
};

static void *ttl_create(const struct sim_policy_env *env)
{
	struct ttl *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	sim_map_init(&s->map);
	s->rot = env->agent;
	return s;
}

static void ttl_destroy(void *st)
{
	struct ttl *s = st;
	if (!s)
		return;
	sim_map_finish(&s->map);
	free(s);
}

static int ttl_decide(void *st, const struct sim_view *v, const struct sim_req *r, const char **reason)
{
	struct ttl *s = st;
	uint64_t key = sim_trace_affinity_key(r);
	uint64_t now_ms = (uint64_t)(v->now_us / 1000);
	if (key) {
		uint64_t *ent = sim_map_get(&s->map, key);
		if (ent) {
			uint32_t e = (uint32_t)(*ent & 0xffff);
			uint64_t last = *ent >> 16;
			if (now_ms - last < TTL_MS && e < v->n && v->ep[e].up) {
				*ent = now_ms << 16 | e;
				*reason = "affinity";
				return (int)e;
			}
		}
	}
	*reason = "leastconn";
	int e = sim_policy_leastconn_pick(v, &s->rot);
	if (key && e >= 0)
		(void)sim_map_put(&s->map, key, now_ms << 16 | (uint32_t)e); /* ENOMEM: not sticky */
	return e;
}

const struct sim_policy sim_pol_ttl = {
	.name = "ttl-map",
	.desc = "stick-table on the affinity key, expire 300 s, leastconn on a miss",
	.create = ttl_create,
	.destroy = ttl_destroy,
	.decide = ttl_decide,
};
