/* state.c - the core's state out and back in: counters, the affinity map (whole or by cursor), endpoint statistics. */
#include "core_impl.h"

#include <errno.h>
#include <string.h>

int core_affinity_lookup(const struct core *c, uint64_t akey, uint64_t now_ms,
			 struct core_affinity_record *rec)
{
	uint32_t ep, gen;
	uint64_t last_ms;
	if (!affinity_peek(&c->aff, akey, now_ms, &ep, &gen, &last_ms))
		return -ENOENT;
	const struct pool_endpoint *e = pool_get(&c->pool, (int)ep);
	if (e == NULL || e->gen != gen)
		return -ENOENT;
	*rec = (struct core_affinity_record){
		.akey = akey, .endpoint = (int)ep,
		.idle_ms = now_ms > last_ms ? now_ms - last_ms : 0,
	};
	return 0;
}

bool core_affinity_clear(struct core *c, uint64_t akey)
{
	return affinity_remove(&c->aff, akey, AFFINITY_NIL);
}

void core_stats(const struct core *c, struct core_stats *out)
{
	*out = (struct core_stats){
		.endpoints = c->pool.live,
		.affinity_entries = c->aff.used,
		.affinity_capacity = c->aff.cap,
		.homes_entries = c->homes.used,
		.affinity_bytes = (uint64_t)c->aff.cap * sizeof(struct affinity_entry) +
				  ((uint64_t)c->aff.mask + 1) * sizeof(struct affinity_slot) +
				  ((uint64_t)c->aff.ghost_mask + 1) * sizeof(*c->aff.ghost),
		.affinity_hits = c->aff.hits,
		.affinity_misses = c->aff.misses,
		.affinity_evictions = c->aff.evictions,
		.affinity_expirations = c->aff.expirations,
		.affinity_back = c->aff.back,
		.affinity_lapsed = c->aff.lapsed,
		.explore_probes = c->explore.probes,
		.explore_recovered = c->explore.recovered,
		.check_recovered = c->explore.check_recovered,
		.hints_own = c->hints_own,
		.twin_sends = c->twin_sends,
		.twin_spreads = c->twin_spreads,
	};
	memcpy(out->decisions, c->decisions, sizeof(out->decisions));
	memcpy(out->tier_decisions, c->tier_decisions, sizeof(out->tier_decisions));
	memcpy(out->outcomes, c->outcomes, sizeof(out->outcomes));
	memcpy(out->completions, c->completions, sizeof(out->completions));
	memcpy(out->hints, c->hints, sizeof(out->hints));
}

uint32_t core_affinity_expire(struct core *c, uint64_t now_ms, uint32_t max)
{
	affinity_expire(&c->homes, now_ms, max);
	affinity_expire(&c->twins, now_ms, max);
	return affinity_expire(&c->aff, now_ms, max);
}

int core_affinity_export(const struct core *c, uint64_t now_ms,
			 core_affinity_fn fn, void *arg)
{
	const struct affinity *a = &c->aff;
	for (uint32_t i = affinity_oldest(a); i != AFFINITY_NIL;
	     i = affinity_newer(a, i)) {
		const struct affinity_entry *x = &a->e[i];
		const struct pool_endpoint *e = pool_get(&c->pool, (int)x->endpoint);
		uint64_t last = affinity_ms(x);
		uint64_t idle = now_ms > last ? now_ms - last : 0;
		if (e == NULL || e->gen != x->gen || idle >= a->ttl_ms)
			continue;
		struct core_affinity_record rec = {
			.akey = x->key, .endpoint = (int)x->endpoint, .idle_ms = idle,
		};
		int rc = fn(arg, &rec);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* core_affinity_cursor_next's filter between the map and the caller. */
struct cursor_visit {
	const struct core *c;
	uint64_t now_ms;
	core_affinity_fn fn;
	void *arg;
};

static int cursor_visit(void *arg, const struct affinity_entry *x)
{
	const struct cursor_visit *v = arg;
	const struct pool_endpoint *e = pool_get(&v->c->pool, (int)x->endpoint);
	uint64_t last = affinity_ms(x);
	uint64_t idle = v->now_ms > last ? v->now_ms - last : 0;
	if (e == NULL || e->gen != x->gen || idle >= v->c->aff.ttl_ms)
		return 0;
	struct core_affinity_record rec = {
		.akey = x->key, .endpoint = (int)x->endpoint, .idle_ms = idle,
	};
	return v->fn(v->arg, &rec);
}

void core_affinity_cursor_init(const struct core *c,
			       struct core_affinity_cursor *cur)
{
	*cur = (struct core_affinity_cursor){
		.map_rebuilds = c->map_rebuilds,
		.done = c->aff.high == 0,
	};
}

void core_homes_cursor_init(const struct core *c,
			    struct core_affinity_cursor *cur)
{
	*cur = (struct core_affinity_cursor){
		.map_rebuilds = c->map_rebuilds,
		.done = c->homes.high == 0,
		.homes = true,
	};
}

int core_affinity_cursor_next(const struct core *c,
			      struct core_affinity_cursor *cur,
			      uint64_t now_ms, uint32_t max,
			      core_affinity_fn fn, void *arg)
{
	if (cur->map_rebuilds != c->map_rebuilds)
		return -ESTALE;
	const struct affinity *a = cur->homes ? &c->homes : &c->aff;
	struct cursor_visit v = { c, now_ms, fn, arg };
	int rc = affinity_scan(a, &cur->pos, max, cursor_visit, &v);
	cur->done = cur->pos >= a->high;
	return rc;
}

/* One record into map a (the affinity map or the homes map). */
static int import_into(struct core *c, struct affinity *a,
		       const struct core_affinity_record *rec, uint64_t now_ms)
{
	const struct pool_endpoint *e = pool_get(&c->pool, rec->endpoint);
	if (e == NULL)
		return -ENOENT;
	if (rec->idle_ms >= a->ttl_ms)
		return -ESTALE;
	uint64_t last = now_ms > rec->idle_ms ? now_ms - rec->idle_ms : 0;
	affinity_put(a, rec->akey, (uint32_t)rec->endpoint, e->gen, last, 0);
	return 0;
}

int core_affinity_import(struct core *c, const struct core_affinity_record *rec,
			 uint64_t now_ms)
{
	return import_into(c, &c->aff, rec, now_ms);
}

int core_homes_import(struct core *c, const struct core_affinity_record *rec,
		      uint64_t now_ms)
{
	return import_into(c, &c->homes, rec, now_ms);
}

int core_endpoint_stats_export(const struct core *c, int idx, uint64_t now_ms,
			       struct core_endpoint_stats *out)
{
	const struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	*out = (struct core_endpoint_stats){ .trips = e->br.trips };
	latency_out(e, out->ewma_ms, out->samples, out->e2e_ewma_ms,
		    out->e2e_samples);
	out->breaker = breaker_state(&e->br, now_ms, &out->cooldown_left_ms);
	/* A dead key awaiting its re-probe stays dead across a restart. */
	out->dead_key_left_ms = !e->key_dead ? 0 :
				e->dead_until_ms > now_ms ?
				e->dead_until_ms - now_ms : 1;
	out->idle_ms = e->seen && now_ms > e->last_seen_ms ?
		       now_ms - e->last_seen_ms : 0;
	return 0;
}

int core_endpoint_stats_import(struct core *c, int idx, uint64_t now_ms,
			       const struct core_endpoint_stats *st)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	for (int k = 0; k < CORE_KIND_COUNT; k++)
		if (!finite_ge(st->ewma_ms[k], 0) || !finite_ge(st->e2e_ewma_ms[k], 0))
			return -EINVAL;
	if ((unsigned)st->breaker >= CORE_BREAKER_COUNT)
		return -EINVAL;
	for (unsigned k = 0; k < CORE_KIND_COUNT; k++) {
		e->ewma[pool_sig(false, k)] = st->ewma_ms[k];
		e->samples[pool_sig(false, k)] = st->samples[k];
		e->ewma[pool_sig(true, k)] = st->e2e_ewma_ms[k];
		e->samples[pool_sig(true, k)] = st->e2e_samples[k];
	}
	for (unsigned k = 0; k < POOL_SIGNALS; k++)
		order_fix(c, k, (uint32_t)idx);
	for (unsigned k = 0; k < CORE_KIND_COUNT; k++) {
		/* Not in a snapshot: the base restarts from the EWMA. */
		e->base[k] = e->ewma[k];
		e->base_n[k] = e->samples[k];
	}
	c->version++;
	ewma_moved_all(c);
	/* A file written by an older agent (or by hand) may hold any
	 * cooldown: none outlasts what this configuration could set. */
	uint64_t cool = st->cooldown_left_ms < core_cooldown_max_ms(c) ?
			st->cooldown_left_ms : core_cooldown_max_ms(c);
	breaker_restore(&e->br, st->breaker, st->trips, cool, now_ms);
	e->key_dead = st->dead_key_left_ms > 0 && e->key_id != NULL;
	e->dead_until_ms = e->key_dead ? now_ms + st->dead_key_left_ms : 0;
	e->key_failed_ms = e->key_dead ? now_ms : 0;
	if (st->idle_ms > 0) {
		e->seen = true;
		e->last_seen_ms = now_ms > st->idle_ms ? now_ms - st->idle_ms : 0;
	}
	return 0;
}
