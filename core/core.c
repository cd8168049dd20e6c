/* core.c - decide() and observe(): the routing policy of docs/architecture.md over the pool, map, hash and breakers. */
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

const char *core_hint_name(enum core_hint_use u)
{
	static const char *const names[CORE_HINT_COUNT] = {
		[CORE_HINT_ABSENT] = "absent",	   [CORE_HINT_USED] = "used",
		[CORE_HINT_AGREES] = "agrees",	   [CORE_HINT_OLDER] = "older",
		[CORE_HINT_REFUSED] = "refused",   [CORE_HINT_MISMATCH] = "mismatch",
	};
	return (unsigned)u < CORE_HINT_COUNT ? names[u] : "unknown";
}

const char *core_reason_name(enum core_reason r)
{
	static const char *const names[CORE_REASON_COUNT] = {
		[CORE_REASON_AFFINITY] = "affinity",
		[CORE_REASON_HASH] = "hash",
		[CORE_REASON_SPILL] = "spill",
		[CORE_REASON_P2C] = "p2c",
		[CORE_REASON_COOLDOWN_FALLBACK] = "cooldown_fallback",
		[CORE_REASON_KEY_FALLBACK] = "key_fallback",
		[CORE_REASON_NO_MODEL] = "no_model",
		[CORE_REASON_NONE] = "none",
		[CORE_REASON_FAILOVER] = "failover",
	};
	return (unsigned)r < CORE_REASON_COUNT ? names[r] : "unknown";
}

const char *core_outcome_name(enum core_outcome o)
{
	static const char *const names[CORE_OUTCOME_COUNT] = {
		[CORE_OUTCOME_SUCCESS] = "success",
		[CORE_OUTCOME_NEUTRAL] = "neutral",
		[CORE_OUTCOME_FAILURE] = "failure",
		[CORE_OUTCOME_RATE_LIMITED] = "rate_limited",
		[CORE_OUTCOME_KEY_DEAD] = "key_dead",
		[CORE_OUTCOME_INVALID] = "invalid",
	};
	return (unsigned)o < CORE_OUTCOME_COUNT ? names[o] : "unknown";
}

const char *core_probe_name(enum core_probe r)
{
	static const char *const names[CORE_PROBE_COUNT] = {
		[CORE_PROBE_ACCEPTED] = "accepted",
		[CORE_PROBE_REFUSED] = "refused",
		[CORE_PROBE_INCONCLUSIVE] = "inconclusive",
	};
	return (unsigned)r < CORE_PROBE_COUNT ? names[r] : "unknown";
}

const char *core_end_name(enum core_end e)
{
	static const char *const names[CORE_END_COUNT] = {
		[CORE_END_COMPLETE] = "complete",
		[CORE_END_CLIENT_ABORT] = "client_abort",
		[CORE_END_SERVER_CUT] = "server_cut",
		[CORE_END_SERVER_FAIL] = "server_fail",
	};
	return (unsigned)e < CORE_END_COUNT ? names[e] : "unknown";
}

const char *core_breaker_name(enum core_breaker b)
{
	static const char *const names[CORE_BREAKER_COUNT] = {
		[CORE_BREAKER_CLOSED] = "closed",
		[CORE_BREAKER_OPEN] = "open",
		[CORE_BREAKER_HALF_OPEN] = "half_open",
	};
	return (unsigned)b < CORE_BREAKER_COUNT ? names[b] : "unknown";
}

const char *core_admin_name(enum core_admin a)
{
	static const char *const names[CORE_ADMIN_COUNT] = {
		[CORE_ADMIN_ENABLED] = "enabled",
		[CORE_ADMIN_MAINT] = "maint",
		[CORE_ADMIN_DRAIN] = "drain",
		[CORE_ADMIN_DOWN] = "down",
		[CORE_ADMIN_NOLB] = "nolb",
	};
	return (unsigned)a < CORE_ADMIN_COUNT ? names[a] : "unknown";
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
	    !finite_ge(p->tier_spill, 0))
		return -EINVAL;

	/* The cap of every 429's cooldown (rate_limit_ms). */
	if (p->rate_limit_cooldown_max_ms == 0)
		return -EINVAL;
	if (p->place_choices == 0)
		return -EINVAL;
	if (!isfinite(p->owned_bound) ||
	    (p->owned_bound >= 0 && p->owned_half_life_ms == 0))
		return -EINVAL;
	return 0;
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
	owned_init(&c->owned, p->owned_half_life_ms, 0);
	pool_init(&c->pool);
	rc = affinity_init(&c->aff, p->affinity_max_entries, p->affinity_ttl_ms);
	if (rc < 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void core_destroy(struct core *c)
{
	if (c == NULL)
		return;
	affinity_finish(&c->aff);
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

int core_set_params(struct core *c, const struct core_params *p)
{
	int rc = check_params(p);
	if (rc < 0)
		return rc;
	if (p->affinity_max_entries != c->aff.cap) {
		struct affinity n;
		rc = affinity_init(&n, p->affinity_max_entries, p->affinity_ttl_ms);
		if (rc < 0)
			return rc;
		/* Oldest first: a smaller map keeps the most recent. */
		for (uint32_t i = affinity_oldest(&c->aff); i != AFFINITY_NIL;
		     i = affinity_newer(&c->aff, i)) {
			const struct affinity_entry *x = &c->aff.e[i];
			affinity_put(&n, x->key, x->endpoint, x->gen, x->last_ms);
		}
		n.hits = c->aff.hits;
		n.misses = c->aff.misses;
		n.evictions += c->aff.evictions;
		n.expirations += c->aff.expirations;
		affinity_finish(&c->aff);
		c->aff = n;
		c->map_rebuilds++;
	}
	/* A new half-life applies from the epoch on: the counts are kept as
	 * they are, a reload does not forget who owns what. */
	c->owned.half_life_ms = p->owned_half_life_ms > 0 ?
				(double)p->owned_half_life_ms : 1;
	c->p = *p;
	c->aff.ttl_ms = p->affinity_ttl_ms;
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
		    grow(&c->rank[k], n, sizeof(*c->rank[k])) < 0)
			return -ENOMEM;
	c->scratch_cap = n;
	return 0;
}

/* Moves slot i to its place in the EWMA order of signal k. */
void order_fix(struct core *c, unsigned k, uint32_t i)
{
	uint32_t *o = c->order[k], *r = c->rank[k];
	const struct pool_endpoint *ep = c->pool.ep;
	double v = ep[i].ewma[k];
	uint32_t at = r[i];
	while (at > 0 && ep[o[at - 1]].ewma[k] > v) {
		o[at] = o[at - 1];
		r[o[at]] = at;
		at--;
	}
	while (at + 1 < c->order_n && ep[o[at + 1]].ewma[k] < v) {
		o[at] = o[at + 1];
		r[o[at]] = at;
		at++;
	}
	o[at] = i;
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
		for (uint32_t i = 0; i < c->order_n; i++)
			c->rank[k][o[i]] = i;
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

int core_endpoint_find_path(const struct core *c, struct core_str path,
			    struct core_str key_id)
{
	const char *slash = path.ptr ? memchr(path.ptr, '/', path.len) : NULL;
	if (slash == NULL)
		return -ENOENT;
	size_t bl = (size_t)(slash - path.ptr);
	struct core_str b = { path.ptr, bl };
	struct core_str s = { slash + 1, path.len - bl - 1 };
	return pool_find(&c->pool, b, s, key_id);
}

int core_endpoint_next(const struct core *c, int prev)
{
	for (uint32_t i = prev < 0 ? 0 : (uint32_t)prev + 1; i < c->pool.end; i++)
		if (c->pool.ep[i].live)
			return (int)i;
	return -1;
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
		e->admin = a;
		c->version++;
	}
	e->local_if = scur_plus_qcur;
	if (e->engine_fresh && engine_old(c, e, now_ms)) {
		e->engine_fresh = false;
		e->engine_stale++;
	}
	in_flight_apply(c, (uint32_t)idx);
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
	};
	for (unsigned k = 0; k < CORE_KIND_COUNT; k++) {
		out->ewma_ms[k] = e->ewma[pool_sig(false, k)];
		out->samples[k] = e->samples[pool_sig(false, k)];
		out->e2e_ewma_ms[k] = e->ewma[pool_sig(true, k)];
		out->e2e_samples[k] = e->samples[pool_sig(true, k)];
	}
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

bool core_identity(const struct core *c, const struct core_request *req,
		   uint64_t *akey)
{
	for (unsigned i = 0; i < c->p.identity_ladder_len; i++) {
		const struct core_id *id = NULL;
		enum core_rung r = c->p.identity_ladder[i];
		switch (r) {
		case CORE_RUNG_SESSION:
			id = &req->session;
			break;
		case CORE_RUNG_PREFIX:
			/* The longest window present is the most specific. */
			for (int k = 2; k >= 0 && id == NULL; k--)
				if (req->prefix[k].present)
					id = &req->prefix[k];
			break;
		case CORE_RUNG_INSTALL:
			id = &req->install;
			break;
		case CORE_RUNG_CALLER:
			id = &req->caller;
			break;
		case CORE_RUNG_SRC:
			id = &req->src;
			break;
		default:
			break;
		}
		if (id != NULL && id->present) {
			uint8_t b[16];
			size_t n = 8;
			for (int k = 0; k < 8; k++)
				b[k] = (uint8_t)(id->hash >> (8 * k));
			/* A session or install id is a label the client
			 * chooses: scoped to its caller, another caller's
			 * same label is another key (params.h). The 16-byte
			 * input is another domain than an unscoped id's 8. */
			if (c->p.session_scope == CORE_SESSION_CALLER &&
			    (r == CORE_RUNG_SESSION || r == CORE_RUNG_INSTALL) &&
			    req->caller.present) {
				for (int k = 0; k < 8; k++)
					b[8 + k] = (uint8_t)(req->caller.hash >> (8 * k));
				n = 16;
			}
			*akey = XXH3_64bits_withSeed(b, n, (uint64_t)r + 1);
			return true;
		}
	}
	return false;
}

/* Whether the ranked endpoint idx can take the key: fast enough and within
 * the load bound (steps 4-5), noted in t when set. */
static inline bool placeable(struct core *c, uint32_t idx, const struct pick *k,
			     uint64_t now_ms, struct core_trace *t)
{
	struct pool_endpoint *e = &c->pool.ep[idx];
	bool fast = fast_enough(c, e, k);
	bool ok = fast && within_bound(c, e, k);
	if (t != NULL)
		trace_walked(c, k, idx, fast, now_ms, t);
	return ok;
}

/* Step 6: two distinct candidates at random, the cheaper. t (explain
 * only, else NULL) gets both and their costs. */
static uint32_t p2c(const struct core *c, const struct pick *k,
		    struct core_rng *rng, uint64_t now_ms, struct core_trace *t)
{
	const struct view *v = k->v;
	if (v->n == 1) {
		if (t != NULL)
			trace_p2c(c, k, v->cand[0], v->cand[0], now_ms, t);
		return v->cand[0];
	}
	uint32_t i = (uint32_t)(core_rng_next(rng) % v->n);
	uint32_t j = (uint32_t)(core_rng_next(rng) % (v->n - 1));
	if (j >= i)
		j++;
	const struct pool_endpoint *a = &c->pool.ep[v->cand[i]];
	const struct pool_endpoint *b = &c->pool.ep[v->cand[j]];
	if (t != NULL)
		trace_p2c(c, k, v->cand[i], v->cand[j], now_ms, t);
	return p2c_cost(c, b, k, now_ms) < p2c_cost(c, a, k, now_ms) ?
	       v->cand[j] : v->cand[i];
}

/* Which latency signals k uses (score_by; end to end only where some
 * candidate is warm on it), with their medians. */
static void pick_signals(struct core *c, struct view *v, struct pick *k)
{
	k->sig[0] = pool_sig(false, k->kind);
	k->sig[1] = pool_sig(true, k->kind);
	bool e2e = v->n_warm[k->sig[1]] > 0;
	switch (c->p.score_by) {
	case CORE_SCORE_END_TO_END:
		k->use[1] = e2e;
		k->use[0] = !e2e;
		break;
	case CORE_SCORE_BOTH:
		k->use[0] = true;
		k->use[1] = e2e;
		break;
	default:
		k->use[0] = true;
		k->use[1] = false;
		break;
	}
	/* The headers median always: it also scales p2c's end-to-end
	 * latency (p2c_latency). */
	for (unsigned s = 0; s < 2; s++) {
		if (s == 1 && !k->use[1])
			break;
		k->median[s] = view_median(c, v, k->sig[s]);
		k->tolerated[s] = c->p.sticky_tolerance * k->median[s];
	}
}

static void commit(struct core *c, uint32_t idx, enum core_reason reason,
		   uint64_t now_ms, struct core_decision *out)
{
	struct pool_endpoint *e = &c->pool.ep[idx];
	if (out->has_akey)
		c->asked[out->akey & (CORE_PENDING_SLOTS - 1)] =
			(struct asked){ out->akey, idx + 1, e->in_flight };
	in_flight_step(c, idx, 1);
	e->decisions++;
	if (e->br.state == CORE_BREAKER_HALF_OPEN) {
		breaker_routed(&e->br, now_ms);
		c->version++; /* a probe slot is taken */
	}
	/* Failover tiers: a choice of the usual steps in a worse tier than
	 * the best serving the model (the fallbacks keep their names). */
	if (e->tier > c->decide_tier_lo && reason <= CORE_REASON_P2C)
		reason = CORE_REASON_FAILOVER;
	c->tier_decisions[e->tier - 1]++;
	out->endpoint = (int)idx;
	out->reason = reason;
	out->backend = e->backend;
	out->server = e->server;
	out->key_id = e->key_id;
	out->tier = e->tier;
	c->decisions[reason]++;
	if (out->has_akey && reason != CORE_REASON_AFFINITY)
		c->pending[out->akey & (CORE_PENDING_SLOTS - 1)] =
			(struct pending){ out->akey, idx + 1, e->gen };
}

void core_decision_shadow(struct core *c, const struct core_decision *d)
{
	struct pool_endpoint *e = pool_get(&c->pool, d->endpoint);
	if (e != NULL) {
		in_flight_step(c, (uint32_t)d->endpoint, -1); /* commit's +1 */
		if (e->br.state == CORE_BREAKER_HALF_OPEN) {
			breaker_neutral(&e->br); /* the probe slot commit took */
			c->version++;
		}
	}
	/* An affinity decision left no pending slot (its entry exists), but
	 * HAProxy may serve it elsewhere: that is what the map must learn. */
	if (d->has_akey)
		c->pending[d->akey & (CORE_PENDING_SLOTS - 1)] =
			(struct pending){ d->akey, PENDING_ANY, 0 };
}

/* What the candidates of one decision own (policy.owned_bound): their
 * decayed counts' sum on the owned clock's scale, and one key's worth
 * at the decision's time on it. */
struct owned_view {
	double sum;
	double k_w;  /* the candidates' weight */
	double inc;
	bool count;  /* the key is new: no entry at all (or a stale one) */
	uint32_t placed; /* its unconfirmed placement's endpoint, or UINT32_MAX */
};

/* Whether idx owns few enough keys to take a new one; o NULL: the rule
 * is off. */
static inline bool owned_ok(const struct core *c, const struct owned_view *o,
			    uint32_t idx)
{
	if (o == NULL || idx == o->placed)
		return true;
	const struct pool_endpoint *e = &c->pool.ep[idx];
	return !owned_over(e->owned, e->weight, o->sum, o->k_w, c->p.owned_bound,
			   o->inc);
}

/* Steps 4-5 with place_choices > 1: the rendezvous ranking of c->items
 * (v->n of them, best at index best) walked until place_choices candidates
 * are healthy and within the load bound; the cheapest of them (p2c_cost),
 * the first in rendezvous order on a tie so that idle agents agree. Returns
 * its index, or UINT32_MAX when none qualifies. Apart from core_decide so
 * that the default (1) path stays as it was. */
static uint32_t place_cheapest(struct core *c, const struct pick *k,
			       uint32_t best, const struct owned_view *o,
			       uint64_t now_ms, struct core_trace *t)
{
	const struct view *v = k->v;
	struct pool *pool = &c->pool;
	uint32_t chosen = UINT32_MAX, found = 0;
	double chosen_cost = 0;
	struct rdv_item it = c->items[best];
	c->items[best] = c->items[v->n - 1];
	struct rdv_rank rank;
	rdv_rank_init(&rank, c->items, v->n - 1);
	do {
		struct pool_endpoint *e = &pool->ep[it.endpoint];
		if (!placeable(c, it.endpoint, k, now_ms, t) ||
		    !owned_ok(c, o, it.endpoint))
			continue;
		double cost = p2c_cost(c, e, k, now_ms);
		if (found == 0 || cost < chosen_cost) {
			chosen = it.endpoint;
			chosen_cost = cost;
		}
		found++;
	} while (found < c->p.place_choices && rdv_rank_next(&rank, &it) == 0);
	return chosen;
}

/* Whether e may take the request as a warm entry's endpoint: the rules
 * an affinity entry is held to (step 3), a hint's too. */
static inline bool warm_usable(struct core *c, const struct view *v,
			       uint32_t idx, const struct pick *k)
{
	struct pool_endpoint *e = &c->pool.ep[idx];
	return view_has(v, idx) && e->br.state == CORE_BREAKER_CLOSED &&
	       fast_enough(c, e, k) && within_warm_bound(c, e, k);
}

/* Step 3a, the shared warm hint (docs/peers.md): what becomes of it
 * against the own entry warm_idx (UINT32_MAX: none) refreshed at warm_ms;
 * *idx is set when it is USED. Another HAProxy's view is no better than
 * ours: a hint the agent's own health rules refuse is dropped, never
 * forced (HAProxy records a 200 whose stream is cut later as a success). */
static enum core_hint_use hint_step(struct core *c, const struct core_hint *h,
				    uint64_t akey, const struct pick *k,
				    uint32_t warm_idx, uint64_t warm_ms,
				    uint64_t now_ms, uint32_t *idx)
{
	if (h->akey32 != (uint32_t)akey)
		return CORE_HINT_MISMATCH;
	unsigned n = h->n < CORE_HINT_ENDPOINTS ? h->n : CORE_HINT_ENDPOINTS;
	for (unsigned i = 0; i < n; i++)
		if ((uint32_t)h->endpoint[i] == warm_idx)
			return CORE_HINT_AGREES;
	/* Both ages on one axis: the entry's from the core's clock, the
	 * hint's from HAProxy's wall clock (the caller's). A tie keeps the
	 * own entry: it moves nothing. */
	if (warm_idx != UINT32_MAX && now_ms - warm_ms <= h->age_ms)
		return CORE_HINT_OLDER;
	for (unsigned i = 0; i < n; i++) {
		const struct pool_endpoint *e = pool_get(&c->pool, h->endpoint[i]);
		if (e != NULL && warm_usable(c, k->v, (uint32_t)h->endpoint[i], k)) {
			*idx = (uint32_t)h->endpoint[i];
			return CORE_HINT_USED;
		}
	}
	return CORE_HINT_REFUSED;
}

/* Whether a key warm on slot idx, a candidate of all in a worse tier than
 * the decision may use, stays there: the hysteresis of tier_keeps, its
 * breaker CLOSED (no probe slot of a recovering worse endpoint is spent
 * on it) and the load bound of all its tiers. Its speed is not judged
 * against the better tier's: a worse tier may be slower by design. */
static bool tier_stays(struct core *c, const struct view *all, uint32_t idx,
		       uint64_t now_ms)
{
	const struct pool_endpoint *e = &c->pool.ep[idx];
	if (!view_has(all, idx) || e->br.state != CORE_BREAKER_CLOSED)
		return false;
	if (!tier_keeps(&all->tstate, e->tier, c->p.tier_return_ms, now_ms))
		return false;
	struct pick ka = { .v = all };
	return within_bound(c, e, &ka);
}

/* The owned clock at now_ms for o: a key placed now adds o->inc; when
 * the clock's epoch moves, every count is rescaled first (once every 40
 * half-lives: O(slots) then, O(1) otherwise, no allocation). */
static void owned_start(struct core *c, struct owned_view *o, uint64_t now_ms)
{
	double rescale;
	o->inc = owned_increment(&c->owned, now_ms, &rescale);
	if (rescale != 1)
		for (uint32_t i = 0; i < c->pool.end; i++)
			c->pool.ep[i].owned *= rescale;
}

/* commit, and a new key is counted as idx's (o NULL: the rule is off).
 * A key re-placed while it has an entry elsewhere (its endpoint left, or
 * not a candidate for this request) was counted when it was new: counting
 * it again would charge one session many times to an endpoint it keeps
 * being sent back to. */
static void place_commit(struct core *c, uint32_t idx, enum core_reason reason,
			 const struct owned_view *o, uint64_t now_ms,
			 struct core_decision *out)
{
	commit(c, idx, reason, now_ms, out);
	if (o != NULL && o->count)
		c->pool.ep[idx].owned += o->inc;
}

/* core_decide; t is NULL but for core_explain, which restores the state
 * afterwards: then the map is only peeked at, and each step is noted. */
void decide(struct core *c, const struct core_request *req,
	    uint64_t now_ms, struct core_rng *rng,
	    struct core_decision *out, struct core_trace *t)
{
	*out = (struct core_decision){ .endpoint = -1, .reason = CORE_REASON_NONE };
	out->has_akey = core_identity(c, req, &out->akey);

	struct pool *pool = &c->pool;
	if (pool->live == 0) {
		c->decisions[CORE_REASON_NONE]++;
		return;
	}

	/* The map lookup is the likely cache miss: start it now, use it
	 * after the candidates. */
	if (out->has_akey)
		affinity_prefetch(&c->aff, out->akey);

	int model = MODEL_NONE;
	if (req->model.len > 0) {
		model = pool_model_find(pool, req->model.ptr, req->model.len);
		if (model < 0)
			model = MODEL_ANY;
	}

	/* 1. Candidates. */
	struct view *v = view_get(c, model, CORE_TIER_MAX, now_ms);
	c->decide_tier_lo = v->tier_lo;
	if (t != NULL)
		trace_candidates(c, v, model, now_ms, t);
	if (v->serving == 0) {
		enum core_reason r = req->model.len > 0 ? CORE_REASON_NO_MODEL
							: CORE_REASON_NONE;
		out->reason = r;
		c->decisions[r]++;
		return;
	}
	if (v->n == 0) {
		/* 7. Only breakers exclude them all: the first to reopen.
		 * Else, if only dead keys are left, the one refused least
		 * recently: HAProxy must not go without a credential (it would
		 * balance on its own and send none). */
		if (v->fallback != UINT32_MAX)
			commit(c, v->fallback, CORE_REASON_COOLDOWN_FALLBACK, now_ms, out);
		else if (v->key_fallback != UINT32_MAX)
			commit(c, v->key_fallback, CORE_REASON_KEY_FALLBACK, now_ms, out);
		else
			c->decisions[CORE_REASON_NONE]++;
		return;
	}
	/* 1b. Failover tiers: the best tier with a candidate (and the next
	 * while it is full), before everything else. */
	struct view *all = v;
	if (v->tier_lo != v->tier_hi)
		v = tier_view(c, v, model, now_ms);

	/* 8. Cold endpoints borrow the median of the warm ones (p2c trusts
	 * its own EWMA sooner: p2c_ewma). */
	struct pick k = { .v = v, .kind = req->stream ? CORE_KIND_STREAM : CORE_KIND_PLAIN };
	pick_signals(c, v, &k);
	if (t != NULL) {
		memcpy(t->use, k.use, sizeof(t->use));
		memcpy(t->median, k.median, sizeof(t->median));
		memcpy(t->tolerated, k.tolerated, sizeof(t->tolerated));
	}

	if (!out->has_akey) {
		commit(c, p2c(c, &k, rng, now_ms, t), CORE_REASON_P2C, now_ms, out);
		return;
	}

	/* 2-3. The key's warm entry, if any, and whether it is a warm hit. */
	uint32_t warm_idx = UINT32_MAX;
	uint32_t ep, gen;
	uint64_t warm_ms = 0;
	if (t != NULL ? affinity_peek(&c->aff, out->akey, now_ms, &ep, &gen, &warm_ms)
		      : affinity_get_last(&c->aff, out->akey, now_ms, &ep, &gen, &warm_ms)) {
		const struct pool_endpoint *e = pool_get(pool, (int)ep);
		if (e != NULL && e->gen == gen)
			warm_idx = ep;
		else if (t == NULL) /* its endpoint was removed */
			affinity_remove(&c->aff, out->akey, ep);
		if (t != NULL) {
			t->entry = true;
			t->entry_endpoint = (int)ep;
			t->entry_idle_ms = now_ms > warm_ms ? now_ms - warm_ms : 0;
			t->entry_stale = warm_idx == UINT32_MAX;
		}
	}
	/* 3a. A newer shared hint goes first; a decision of our own, so
	 * that its success (feedback or log line) enters the map. */
	if (req->hint.present) {
		uint32_t h = UINT32_MAX;
		out->hint = hint_step(c, &req->hint, out->akey, &k, warm_idx,
				      warm_ms, now_ms, &h);
		c->hints[out->hint]++;
		if (out->hint == CORE_HINT_USED) {
			commit(c, h, CORE_REASON_AFFINITY, now_ms, out);
			c->pending[out->akey & (CORE_PENDING_SLOTS - 1)] =
				(struct pending){ out->akey, h + 1, pool->ep[h].gen };
			return;
		}
	}
	if (warm_idx != UINT32_MAX && t != NULL)
		trace_entry(c, v, warm_idx, &k, t);
	if (warm_idx != UINT32_MAX && warm_usable(c, v, warm_idx, &k)) {
		commit(c, warm_idx, CORE_REASON_AFFINITY, now_ms, out);
		return;
	}
	/* Warm in a worse tier than this decision may use: it stays there
	 * while the better tier's hysteresis says so (tier_stays). */
	if (warm_idx != UINT32_MAX && v != all && !view_has(v, warm_idx) &&
	    tier_stays(c, all, warm_idx, now_ms)) {
		commit(c, warm_idx, CORE_REASON_FAILOVER, now_ms, out);
		return;
	}
	/* The key leaves its warm endpoint: with artefact_affinity, only for
	 * one of the same artefact, else it stays there. */
	if (c->p.artefact_affinity && warm_idx != UINT32_MAX &&
	    pool->ep[warm_idx].artefact != 0) {
		struct view *f = artefact_view(c, v, pool->ep[warm_idx].artefact);
		if (f->n == 0) { /* its own endpoint is not a candidate either */
			c->decisions[CORE_REASON_NONE]++;
			return;
		}
		if (f != v) {
			v = f;
			k.v = v;
			pick_signals(c, v, &k);
		}
	}

	/* 4-5. Rendezvous ranking, walked until one is healthy and within
	 * the load bound (with place_choices > 1, place_cheapest). */
	struct owned_view ov = { 0 }, *o = NULL;
	if (c->p.owned_bound >= 0) {
		o = &ov;
		owned_start(c, o, now_ms);
		/* Requests of a key sent together before its first answer
		 * (no entry yet) are one key: counted once, and never passed
		 * over where the first of them went. */
		ov.placed = UINT32_MAX;
		const struct pending *pd =
			&c->pending[out->akey & (CORE_PENDING_SLOTS - 1)];
		if (pd->akey == out->akey && pd->endpoint != 0 &&
		    pd->endpoint != PENDING_ANY &&
		    pool->ep[pd->endpoint - 1].gen == pd->gen)
			ov.placed = pd->endpoint - 1;
		ov.count = warm_idx == UINT32_MAX && ov.placed == UINT32_MAX;
	}
	uint32_t best = 0;
	for (uint32_t i = 0; i < v->n; i++) {
		const struct pool_endpoint *e = &pool->ep[v->cand[i]];
		c->items[i] = (struct rdv_item){
			rdv_cost(out->akey, e->rdv_seed, e->inv_weight), v->cand[i],
		};
		if (rdv_before(&c->items[i], &c->items[best]))
			best = i;
		ov.sum += e->owned;
	}
	ov.k_w = v->total_w;
	if (t != NULL)
		trace_rank(c, v->n, t);
	if (c->p.place_choices > 1 && v->n > 1) {
		uint32_t idx = place_cheapest(c, &k, best, o, now_ms, t);
		if (idx != UINT32_MAX) {
			place_commit(c, idx, CORE_REASON_HASH, o, now_ms, out);
			return;
		}
	} else {
		/* The first choice usually takes it: only then is a heap
		 * built. One over owned_bound is passed over, but kept in
		 * case none else can take the key (then the former rule's
		 * choice). */
		uint32_t spare = UINT32_MAX;
		struct rdv_item it = c->items[best];
		if (placeable(c, it.endpoint, &k, now_ms, t)) {
			if (owned_ok(c, o, it.endpoint)) {
				place_commit(c, it.endpoint, CORE_REASON_HASH, o,
					     now_ms, out);
				return;
			}
			spare = it.endpoint;
		}
		c->items[best] = c->items[v->n - 1];
		struct rdv_rank rank;
		rdv_rank_init(&rank, c->items, v->n - 1);
		while (rdv_rank_next(&rank, &it) == 0) {
			if (!placeable(c, it.endpoint, &k, now_ms, t))
				continue;
			if (owned_ok(c, o, it.endpoint)) {
				place_commit(c, it.endpoint, CORE_REASON_HASH, o,
					     now_ms, out);
				return;
			}
			if (spare == UINT32_MAX)
				spare = it.endpoint;
		}
		if (spare != UINT32_MAX) {
			place_commit(c, spare, CORE_REASON_HASH, o, now_ms, out);
			return;
		}
	}

	/* 6. Spill. */
	place_commit(c, p2c(c, &k, rng, now_ms, t), CORE_REASON_SPILL, o, now_ms,
		     out);
}

void core_decide(struct core *c, const struct core_request *req,
		 uint64_t now_ms, struct core_rng *rng,
		 struct core_decision *out)
{
	decide(c, req, now_ms, rng, out, NULL);
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
