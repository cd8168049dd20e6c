/* core.c - the core's creation, parameters and endpoint administration. */
#include "core_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "pick.h"

void core_rng_seed(struct core_rng *rng, uint64_t seed)
{
	rng->state = seed;
}

uint64_t core_rng_next(struct core_rng *rng)
{
	uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t core_hash_bytes(const void *p, size_t len)
{
	return XXH3_64bits(p, len);
}

struct core_str core_str_c(const char *s)
{
	return (struct core_str){ s, s ? strlen(s) : 0 };
}

enum core_outcome core_status_class(int status)
{
	if (status < 100 || status > 599)
		return CORE_OUTCOME_INVALID;
	if (status < 400)
		return CORE_OUTCOME_SUCCESS;
	switch (status) {
	case 401:
	case 403:
		return CORE_OUTCOME_KEY_DEAD;
	case 408:
		return CORE_OUTCOME_FAILURE;
	case 429:
		return CORE_OUTCOME_RATE_LIMITED;
	default:
		return status < 500 ? CORE_OUTCOME_NEUTRAL : CORE_OUTCOME_FAILURE;
	}
}

static int check_params(const struct core_params *p)
{
	if (p->affinity_max_entries == 0 || p->affinity_max_entries > (1u << 30))
		return -EINVAL;
	if (p->identity_ladder_len > CORE_RUNG_COUNT)
		return -EINVAL;
	for (unsigned i = 0; i < p->identity_ladder_len; i++)
		if ((unsigned)p->identity_ladder[i] >= CORE_RUNG_COUNT)
			return -EINVAL;
	if ((unsigned)p->session_scope >= CORE_SESSION_SCOPE_COUNT)
		return -EINVAL;
	if (!isfinite(p->ewma_alpha) || p->ewma_alpha <= 0 || p->ewma_alpha > 1)
		return -EINVAL;
	if ((unsigned)p->score_by >= CORE_SCORE_COUNT)
		return -EINVAL;
	if (!finite_ge(p->prior_ttfb_ms, 0) || !finite_ge(p->sticky_tolerance, 0) ||
	    !finite_ge(p->load_factor, 1) || !finite_ge(p->cost_weight_per_ms, 0) ||
	    !finite_ge(p->breaker_failure_ratio, 0) || p->breaker_failure_ratio > 1 ||
	    !finite_ge(p->tier_spill, 0) || !finite_ge(p->explore_share, 0) ||
	    p->explore_share > 1 || !finite_ge(p->p2c_margin, 0))
		return -EINVAL;

	/* The cap of every 429's cooldown (rate_limit_ms). */
	if (p->rate_limit_cooldown_max_ms == 0)
		return -EINVAL;
	if (p->place_choices == 0)
		return -EINVAL;
	if (!isfinite(p->owned_bound) ||
	    (p->owned_bound >= 0 && p->owned_half_life_ms == 0))
		return -EINVAL;
	if (!isfinite(p->slow_start) || !finite_ge(p->place_load_z, 0) ||
	    !finite_ge(p->place_long_z, 0) ||
	    !finite_ge(p->alone_place_load_z, 0) || !finite_ge(p->hot_share, 0) ||
	    (unsigned)p->routers >= CORE_ROUTERS_COUNT)
		return -EINVAL;
	return 0;
}

/* The parameters in force for whether this agent routes alone
 * (routers.h): the new key's load gap, the entries' TTL, and the load
 * floors' scale on the engines' counts (floor_scale). */
void routers_apply(struct core *c)
{
	c->alone = c->p.routers == CORE_ROUTERS_ONE ||
		   (c->p.routers == CORE_ROUTERS_AUTO &&
		    (c->routers.alone || c->routers.hints ||
		     c->routers.turns_alone));
	c->place_z = c->alone ? c->p.alone_place_load_z : c->p.place_load_z;
	c->aff.ttl_ms = c->alone && c->p.alone_affinity_ttl_ms > c->p.affinity_ttl_ms ?
			c->p.alone_affinity_ttl_ms : c->p.affinity_ttl_ms;
	c->homes.ttl_ms = c->aff.ttl_ms;
	c->twins.ttl_ms = c->aff.ttl_ms;
	double share = routers_share(&c->routers);
	c->floor_scale = c->alone || share <= 0 ? 1 :
			 share >= 1 ? 1 :
			 share <= 1 / FLOOR_SCALE_MAX ? FLOOR_SCALE_MAX : 1 / share;
}

/* routers_update with this agent's counters at now_ms (a poll calls it
 * for each endpoint: the decay runs once per millisecond, the counters
 * are read each time, a few additions). Hinted: decisions with a hint
 * for their key; peer: of them, hints another HAProxy wrote, or whose
 * writer is not told (a hint this HAProxy wrote is its own memory,
 * which HAProxies that replicate nothing have too). */
static void routers_tick(struct core *c, uint64_t now_ms)
{
	uint64_t decided = 0, hinted = 0;
	for (unsigned k = 0; k < CORE_REASON_COUNT; k++)
		decided += c->decisions[k];
	for (unsigned k = CORE_HINT_ABSENT + 1; k < CORE_HINT_COUNT; k++)
		if (k != CORE_HINT_MISMATCH)
			hinted += c->hints[k];
	routers_update(&c->routers, decided, hinted, hinted - c->hints_own, now_ms,
		       c->p.idle_reset_ms > 0 ? c->p.idle_reset_ms : 60 * 1000);
}

/* The twins map's capacity: hot keys are a share of the traffic each
 * (hot_share of a server's part at least), so a few dozen at once; the
 * map keeps the last ones of an affinity TTL, at 48 bytes each. */
#define TWINS_CAP 1024u

/* The homes map's size for an affinity map of cap entries: an eighth,
 * at least 1,024 (or cap). */
static uint32_t homes_cap(uint32_t cap)
{
	uint32_t n = cap / 8;
	uint32_t lo = cap < 1024 ? cap : 1024;
	return n > lo ? n : lo;
}

uint64_t core_cooldown_max_ms(const struct core *c)
{
	return c->p.rate_limit_cooldown_max_ms > c->p.breaker_cooldown_max_ms ?
	       c->p.rate_limit_cooldown_max_ms : c->p.breaker_cooldown_max_ms;
}

int core_create(struct core **out, const struct core_params *p)
{
	struct core_params defaults;
	if (p == NULL) {
		core_params_defaults(&defaults);
		p = &defaults;
	}
	int rc = check_params(p);
	if (rc < 0)
		return rc;
	struct core *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->p = *p;
	c->log_tolerance = log(p->sticky_tolerance);
	owned_init(&c->owned, p->owned_half_life_ms, 0);
	hot_init(&c->hot, 0);
	pool_init(&c->pool);
	rc = affinity_init(&c->aff, p->affinity_max_entries, p->affinity_ttl_ms);
	if (rc == 0)
		rc = affinity_init(&c->homes, homes_cap(p->affinity_max_entries),
				   p->affinity_ttl_ms);
	if (rc == 0)
		rc = affinity_init(&c->twins, TWINS_CAP, p->affinity_ttl_ms);
	if (rc < 0) {
		affinity_finish(&c->homes);
		affinity_finish(&c->aff);
		free(c);
		return rc;
	}
	routers_apply(c);
	*out = c;
	return 0;
}

void core_destroy(struct core *c)
{
	if (c == NULL)
		return;
	affinity_finish(&c->aff);
	affinity_finish(&c->homes);
	affinity_finish(&c->twins);
	pool_finish(&c->pool);
	free(c->items);
	for (int v = 0; v < VIEW_SLOTS; v++) {
		free(c->views[v].cand);
		free(c->views[v].member);
	}
	free(c->art_view.cand);
	free(c->art_view.member);
	for (int k = 0; k < POOL_SIGNALS; k++) {
		free(c->order[k]);
		free(c->rank[k]);
		free(c->order_ewma[k]);
	}
	free(c);
}

const struct core_params *core_params(const struct core *c)
{
	return &c->p;
}

/* Every cached median is stale (parameters or a restored snapshot). */
void ewma_moved_all(struct core *c)
{
	for (unsigned k = 0; k < POOL_SIGNALS; k++)
		c->ewma_version[k]++;
}

/* Moves what *from holds into the new map n, oldest first (a smaller
 * map keeps the most recent), with its counters; n replaces *from. */
static void map_move(struct affinity *n, struct affinity *from)
{
	for (uint32_t i = affinity_oldest(from); i != AFFINITY_NIL;
	     i = affinity_newer(from, i)) {
		affinity_put_entry(n, &from->e[i]);
	}
	n->hits = from->hits;
	n->misses = from->misses;
	n->evictions += from->evictions;
	n->expirations += from->expirations;
	n->back += from->back;
	n->lapsed += from->lapsed;
	n->back_w += from->back_w;
	n->lapsed_w += from->lapsed_w;
	affinity_finish(from);
	*from = *n;
}

int core_set_params(struct core *c, const struct core_params *p)
{
	int rc = check_params(p);
	if (rc < 0)
		return rc;
	if (p->affinity_max_entries != c->aff.cap) {
		struct affinity n, h;
		rc = affinity_init(&n, p->affinity_max_entries, p->affinity_ttl_ms);
		if (rc == 0) {
			rc = affinity_init(&h, homes_cap(p->affinity_max_entries),
					   p->affinity_ttl_ms);
			if (rc < 0)
				affinity_finish(&n);
		}
		if (rc < 0)
			return rc;
		map_move(&n, &c->aff);
		map_move(&h, &c->homes);
		c->map_rebuilds++;
	}
	/* A new half-life applies from the epoch on: the counts are kept as
	 * they are, a reload does not forget who owns what. */
	c->owned.half_life_ms = p->owned_half_life_ms > 0 ?
				(double)p->owned_half_life_ms : 1;
	c->p = *p;
	c->log_tolerance = log(p->sticky_tolerance);
	routers_apply(c);
	c->version++;
	ewma_moved_all(c);
	return 0;
}

static int grow(void *pp, size_t n, size_t size)
{
	void **p = pp;
	void *q = realloc(*p, n * size);
	if (q == NULL)
		return -ENOMEM;
	*p = q;
	return 0;
}

/* Grows the decision scratch to the pool's slots (pool changes only). */
static int scratch_fit(struct core *c)
{
	uint32_t n = c->pool.cap;
	if (n <= c->scratch_cap)
		return 0;
	size_t words = (n + 63) / 64;
	if (grow(&c->items, n, sizeof(*c->items)) < 0)
		return -ENOMEM;
	for (int v = 0; v < VIEW_SLOTS; v++) {
		c->views[v].valid = false;
		if (grow(&c->views[v].cand, n, sizeof(uint32_t)) < 0 ||
		    grow(&c->views[v].member, words, sizeof(uint64_t)) < 0)
			return -ENOMEM;
	}
	if (grow(&c->art_view.cand, n, sizeof(uint32_t)) < 0 ||
	    grow(&c->art_view.member, words, sizeof(uint64_t)) < 0)
		return -ENOMEM;
	for (int k = 0; k < POOL_SIGNALS; k++)
		if (grow(&c->order[k], n, sizeof(*c->order[k])) < 0 ||
		    grow(&c->rank[k], n, sizeof(*c->rank[k])) < 0 ||
		    grow(&c->order_ewma[k], n, sizeof(*c->order_ewma[k])) < 0)
			return -ENOMEM;
	c->scratch_cap = n;
	return 0;
}

/* Moves slot i to its place in the EWMA order of signal k. */
void order_fix(struct core *c, unsigned k, uint32_t i)
{
	uint32_t *o = c->order[k], *r = c->rank[k];
	double *oe = c->order_ewma[k];
	double v = c->pool.ep[i].ewma[k];
	uint32_t at = r[i];
	while (at > 0 && oe[at - 1] > v) {
		o[at] = o[at - 1];
		oe[at] = oe[at - 1];
		r[o[at]] = at;
		at--;
	}
	while (at + 1 < c->order_n && oe[at + 1] < v) {
		o[at] = o[at + 1];
		oe[at] = oe[at + 1];
		r[o[at]] = at;
		at++;
	}
	o[at] = i;
	oe[at] = v;
	r[i] = at;
}

/* Rebuilds the EWMA orders over every slot by insertion sort (pool
 * changes only; a few hundred slots). */
static void order_rebuild(struct core *c)
{
	const struct pool_endpoint *ep = c->pool.ep;
	c->order_n = c->pool.end;
	for (unsigned k = 0; k < POOL_SIGNALS; k++) {
		uint32_t *o = c->order[k];
		for (uint32_t i = 0; i < c->order_n; i++) {
			uint32_t j = i;
			while (j > 0 && ep[o[j - 1]].ewma[k] > ep[i].ewma[k]) {
				o[j] = o[j - 1];
				j--;
			}
			o[j] = i;
		}
		for (uint32_t i = 0; i < c->order_n; i++) {
			c->rank[k][o[i]] = i;
			c->order_ewma[k][i] = ep[o[i]].ewma[k];
		}
	}
}

/* Whether e's engine sample is past engine_max_age_ms at now_ms. */
static bool engine_old(const struct core *c, const struct pool_endpoint *e,
		       uint64_t now_ms)
{
	return now_ms > e->engine_at_ms &&
	       now_ms - e->engine_at_ms > c->p.engine_max_age_ms;
}

/* Recomputes tier_mask after a pool change (pool changes only: O(n)). */
static void tier_recount(struct core *c)
{
	uint16_t m = 0;
	for (uint32_t i = 0; i < c->pool.end; i++)
		if (c->pool.ep[i].live)
			m |= (uint16_t)(1u << c->pool.ep[i].tier);
	c->tier_mask = m;
	c->tiered = (m & (m - 1)) != 0;
}

int core_endpoint_add(struct core *c, const struct core_endpoint_config *cfg,
		      uint64_t now_ms)
{
	int idx = pool_add(&c->pool, cfg, now_ms);
	if (idx < 0)
		return idx;
	int rc = scratch_fit(c);
	if (rc < 0) {
		pool_remove(&c->pool, idx);
		return rc;
	}
	order_rebuild(c);
	tier_recount(c);
	c->version++;
	return idx;
}

int core_endpoint_update(struct core *c, int idx,
			 const struct core_endpoint_config *cfg)
{
	int rc = pool_update(&c->pool, idx, cfg);
	tier_recount(c);
	c->version++;
	return rc;
}

int core_endpoint_remove(struct core *c, int idx)
{
	int rc = pool_remove(&c->pool, idx);
	if (rc == 0) {
		order_rebuild(c);
		tier_recount(c);
		c->version++;
	}
	return rc;
}

int core_endpoint_find(const struct core *c, struct core_str backend,
		       struct core_str server, struct core_str key_id)
{
	return pool_find(&c->pool, backend, server, key_id);
}

/* "backend/server" into its two names; false without a slash. */
static bool split_path(struct core_str path, struct core_str *b,
		       struct core_str *s)
{
	const char *slash = path.ptr ? memchr(path.ptr, '/', path.len) : NULL;
	if (slash == NULL)
		return false;
	size_t bl = (size_t)(slash - path.ptr);
	*b = (struct core_str){ path.ptr, bl };
	*s = (struct core_str){ slash + 1, path.len - bl - 1 };
	return true;
}

int core_endpoint_find_path(const struct core *c, struct core_str path,
			    struct core_str key_id)
{
	struct core_str b, s;
	if (!split_path(path, &b, &s))
		return -ENOENT;
	return pool_find(&c->pool, b, s, key_id);
}

int core_endpoint_find_akey(const struct core *c, uint64_t akey,
			    struct core_str path, struct core_str key_id)
{
	const struct asked *a = &c->asked[akey & (CORE_PENDING_SLOTS - 1)];
	struct core_str b, s;
	if (!split_path(path, &b, &s))
		return -ENOENT;
	if (a->endpoint != 0 && a->akey == akey &&
	    pool_is_named(&c->pool, a->endpoint - 1, b, s, key_id))
		return (int)(a->endpoint - 1);
	return pool_find(&c->pool, b, s, key_id);
}

int core_endpoint_next(const struct core *c, int prev)
{
	for (uint32_t i = prev < 0 ? 0 : (uint32_t)prev + 1; i < c->pool.end; i++)
		if (c->pool.ep[i].live)
			return (int)i;
	return -1;
}

/* Slot i's in_flight and decision rate since the last sample into its
 * load_avg and rate_avg at now_ms, keeping the views' totals current:
 * EWMAs whose weight grows with the time since the last sample (or since
 * the endpoint was added, from 0), 1 - e^(-dt / idle_reset), so that
 * polls at any period average over the same time (idle_reset 0: the
 * last period alone). */
static void load_note(struct core *c, uint32_t i, uint64_t now_ms)
{
	struct pool_endpoint *e = &c->pool.ep[i];
	if (now_ms <= e->load_avg_ms)
		return;
	double dt = (double)(now_ms - e->load_avg_ms);
	double a = c->p.idle_reset_ms > 0 ? 1 - exp(-dt / (double)c->p.idle_reset_ms) : 1;
	double rate = (double)(e->decisions - e->load_avg_decisions) * 1000 / dt;
	double load = e->load_avg + a * ((double)e->in_flight - e->load_avg);
	double r = e->rate_avg + a * (rate - e->rate_avg);
	for (int k = 0; k < VIEW_SLOTS; k++) {
		struct view *v = &c->views[k];
		if (v->valid && view_has(v, i)) {
			v->total_load_avg += load - e->load_avg;
			v->total_rate_avg += r - e->rate_avg;
		}
	}
	e->load_avg = load;
	e->rate_avg = r;
	e->load_avg_ms = now_ms;
	e->load_avg_decisions = e->decisions;
}

int core_endpoint_sync(struct core *c, int idx, enum core_admin admin,
		       uint32_t scur_plus_qcur, uint64_t now_ms)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	uint8_t a = (unsigned)admin < CORE_ADMIN_COUNT ? (uint8_t)admin
						       : (uint8_t)CORE_ADMIN_DOWN;
	if (a != e->admin) {
		/* A server back from DOWN is empty because it was down: its
		 * requests in flight say nothing of its capacity until it has
		 * stayed up as long as it was down (at most idle_reset), or a
		 * flapping one draws every new key each time it returns. */
		if (a == CORE_ADMIN_DOWN)
			e->down_ms = now_ms;
		else if (e->admin == CORE_ADMIN_DOWN && now_ms > e->down_ms) {
			uint64_t down = now_ms - e->down_ms;
			e->rejoin_until_ms = now_ms + (down < c->p.idle_reset_ms
						       ? down : c->p.idle_reset_ms);
		}
		e->admin = a;
		c->version++;
	}
	e->local_if = scur_plus_qcur;
	if (e->engine_fresh && engine_old(c, e, now_ms)) {
		e->engine_fresh = false;
		e->engine_stale++;
	}
	in_flight_apply(c, (uint32_t)idx);
	load_note(c, (uint32_t)idx, now_ms);
	routers_tick(c, now_ms);
	routers_apply(c); /* the verdicts (no candidate changes) */
	return 0;
}

int core_endpoint_limit(struct core *c, int idx, uint32_t maxconn)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	e->slots_limit = maxconn;
	pool_slots_apply(e);
	return 0;
}

int core_endpoint_engine_full(struct core *c, int idx, uint32_t running)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	if (running > e->slots_seen) {
		e->slots_seen = running;
		pool_slots_apply(e);
	}
	return 0;
}

int core_endpoint_engine(struct core *c, int idx, bool ok, uint32_t load,
			 double kv, uint64_t now_ms)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	e->engine_polls[ok ? 1 : 0]++;
	if (!ok)
		return 0;
	e->engine_if = load;
	e->engine_delta = 0;
	e->engine_kv = kv >= 0 && kv <= 1 ? kv : -1;
	/* 0 means "none ever" (engine_at_ms): a sample at a loop's first
	 * millisecond is kept as 1. */
	e->engine_at_ms = now_ms > 0 ? now_ms : 1;
	e->engine_fresh = true;
	in_flight_apply(c, (uint32_t)idx);
	routers_tick(c, now_ms);
	routers_note(&c->routers, e->local_if, load);
	routers_apply(c); /* the verdicts, and the share: floor_scale */
	return 0;
}

int core_endpoint_check(struct core *c, int idx, uint32_t duration_ms,
			uint64_t now_ms)
{
	if (pool_get(&c->pool, idx) == NULL)
		return -ENOENT;
	explore_check(c, (uint32_t)idx, duration_ms, now_ms);
	return 0;
}

int core_endpoint_artefact(struct core *c, int idx, uint64_t fingerprint)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	e->artefact = fingerprint;
	return 0;
}

int core_endpoint_artefact_mismatch(struct core *c, int idx, bool mismatch)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	e->artefact_mismatch = mismatch;
	return 0;
}

void core_routers_info(const struct core *c, struct core_routers_info *out)
{
	*out = (struct core_routers_info){
		.mode = c->p.routers,
		.alone = c->alone,
		.share = routers_share(&c->routers),
		.hints = c->routers.hints,
		.engines = c->routers.alone,
		.hinted = c->routers.hinted,
		.turns = c->routers.turns_alone,
		.skips = routers_skips(&c->routers),
		.linked = c->routers.linked,
		.peers = c->peers,
		.ttl_ms = c->aff.ttl_ms,
	};
}

void core_peers_note(struct core *c, enum core_peers peers, uint64_t now_ms)
{
	c->peers = peers;
	routers_link(&c->routers, peers == CORE_PEERS_CONNECTED, now_ms);
	routers_apply(c);
}

void core_routers_restore(struct core *c, bool engines, bool hints,
			  bool turns, uint64_t now_ms)
{
	routers_restore(&c->routers, engines, hints, turns, now_ms);
	routers_apply(c);
}

uint32_t core_engine_expire(struct core *c, uint64_t now_ms)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->pool.end; i++) {
		struct pool_endpoint *e = &c->pool.ep[i];
		if (!e->live || !e->engine_fresh || !engine_old(c, e, now_ms))
			continue;
		e->engine_fresh = false;
		e->engine_stale++;
		in_flight_apply(c, i);
		n++;
	}
	return n;
}

int core_endpoint_complete(struct core *c, int idx)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	in_flight_step(c, (uint32_t)idx, -1);
	return 0;
}

int core_endpoint_info(const struct core *c, int idx, uint64_t now_ms,
		       struct core_endpoint_info *out)
{
	const struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	*out = (struct core_endpoint_info){
		.backend = e->backend,
		.server = e->server,
		.key_id = e->key_id,
		.weight = e->weight,
		.cost_per_mtok = e->cost_per_mtok,
		.slots = e->slots,
		.disabled = e->disabled,
		.tier = e->tier,
		.admin = (enum core_admin)e->admin,
		.in_flight = e->in_flight,
		.decisions = e->decisions,
		.drained = e->drained,
		.engine_fresh = e->engine_fresh,
		.engine_load = e->engine_if,
		.local_in_flight = e->local_if,
		.engine_kv = e->engine_at_ms != 0 ? e->engine_kv : -1,
		.engine_age_ms = e->engine_at_ms == 0 ? UINT64_MAX :
				 now_ms >= e->engine_at_ms ? now_ms - e->engine_at_ms : 0,
		.engine_polls_ok = e->engine_polls[1],
		.engine_polls_failed = e->engine_polls[0],
		.engine_stale = e->engine_stale,
		.artefact = e->artefact,
		.artefact_mismatch = e->artefact_mismatch,
		.check_ms = explore_check_fresh(e, now_ms) ? e->check_ms : 0,
		.check_slow = e->check_slow,
		.check_vouch = e->check_vouch,
		.speed = left_slow(c, e) ? CORE_SPEED_LEFT :
			 e->suspect == POOL_KEPT ? CORE_SPEED_KEPT : CORE_SPEED_FIT,
		.probed = e->explore_on != 0,
		.rejoin_left_ms = e->rejoin_until_ms > now_ms ?
				  e->rejoin_until_ms - now_ms : 0,
		.load_avg = e->load_avg,
		.ms_per_request = e->rate_avg > 0 ? e->load_avg * 1000 / e->rate_avg : INFINITY,
	};
	latency_out(e, out->ewma_ms, out->samples, out->e2e_ewma_ms,
		    out->e2e_samples);
	out->breaker = breaker_state(&e->br, now_ms, &out->cooldown_left_ms);
	out->dead_key_left_ms = e->key_dead && e->dead_until_ms > now_ms ?
				e->dead_until_ms - now_ms : 0;
	out->key_dead = key_excluded(c, e, now_ms);
	out->key_suspect = e->key_suspect;
	memcpy(out->probes, e->probes, sizeof(out->probes));
	breaker_counts(&e->br, &c->p, now_ms, &out->window_ok, &out->window_fail);
	memcpy(out->outcomes, e->outcomes, sizeof(out->outcomes));
	memcpy(out->completions, e->completions, sizeof(out->completions));
	return 0;
}

int core_endpoint_drain(struct core *c, int idx, bool drain)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	if (e->drained != drain) {
		e->drained = drain;
		c->version++; /* candidacy changed */
	}
	return 0;
}
