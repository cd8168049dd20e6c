/* core.c - decide() and observe(): the routing policy of docs/architecture.md over the pool, map, hash and breakers. */
#include "core.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "affinity.h"
#include "breaker.h"
#include "owned.h"
#include "pool.h"
#include "rendezvous.h"
#include "stall.h"
#include "tier.h"
#include "trace.h"

/* Candidate sets cached: one per model in use; with failover tiers, a
 * model's decisions restricted to its better tiers use one more (2 models
 * then fit). With 8, bench-core's untiered decisions were 3-7% slower
 * at 64-512 endpoints. */
#define VIEW_SLOTS 4
#define MODEL_NONE (-1) /* the request names no model */
#define MODEL_ANY  (-2) /* a model no endpoint lists: all-model ones only */

/* The candidate set of one model and its aggregates. Built by a pass over
 * the pool, then reused until something that decides candidacy changes
 * (core.version) or a time-based exclusion ends (horizon_ms): a warm hit
 * then costs O(1) plus, when some EWMA changed, half a walk of the EWMA
 * order, instead of a pass over every endpoint. */
struct view {
	bool valid;
	int model;
	/* The worst tier among the candidates (key with model): CORE_TIER_MAX
	 * for every tier, less for the set core_decide restricts to. */
	uint8_t tier_max;
	uint8_t tier_lo, tier_hi; /* best and worst tier serving the model */
	uint64_t version;        /* core.version when built */
	uint64_t horizon_ms;     /* rebuild at or after this time */
	uint64_t used;           /* for replacement */
	uint32_t n;              /* candidates */
	uint32_t serving;        /* endpoints serving the model */
	uint32_t fallback;       /* breaker-only exclusion reopening first */
	uint32_t key_fallback;   /* dead key refused least recently */
	uint32_t n_warm[POOL_SIGNALS];
	double total_w;
	uint64_t total_if;       /* kept current by set_in_flight */
	uint64_t median_version[POOL_SIGNALS];
	double median[POOL_SIGNALS];
	uint32_t *cand;          /* n slot indices */
	uint64_t *member;        /* bitset over slots */
	struct tier_sums tiers;  /* the candidates by tier (in flight kept
				  * current by set_in_flight) */
	struct tier_state tstate; /* tier_max CORE_TIER_MAX: kept across
				   * rebuilds of the same model */
};

/* A decision of warmlane's that no feedback has confirmed yet. A success
 * in a log line inserts an affinity entry only when it names one of these
 * (same akey, endpoint and generation): whoever can write to the log
 * socket chooses akey, so a line alone must never grow the map, but on
 * HAProxy 2.6 (haproxy-2.6.cfg sends no feedback message) and whenever a
 * feedback exchange timed out, the log line is the only word of a
 * success. 16384 slots (256 KiB) hold far more decisions than are in
 * flight at once; a slot lost to a later decision costs that session one
 * more turn before it is homed. */
#define CORE_PENDING_SLOTS 16384u
struct pending {
	uint64_t akey;
	uint32_t endpoint;       /* index + 1; 0: empty; PENDING_ANY */
	uint32_t gen;
};

/* A shadow decision (core_decision_shadow): HAProxy picks the endpoint,
 * so a line from any endpoint confirms it. */
#define PENDING_ANY UINT32_MAX

/* The in-flight count of the endpoint a keyed decision chose, as it
 * found it, for that answer's time to be judged against its queue
 * (queue_judge). Direct-mapped by akey like struct pending, a later
 * decision overwriting an earlier one in its slot (that answer is then not
 * judged). */
struct asked {
	uint64_t akey;
	uint32_t endpoint;       /* index + 1; 0: empty */
	uint32_t in_flight;
};

struct core {
	struct core_params p;
	struct pool pool;
	struct affinity aff;
	uint64_t version;        /* bumped by anything that changes candidacy */
	uint64_t map_rebuilds;   /* core_set_params rebuilt the map: walks restart */
	/* Bumped by every change of an EWMA of that signal (pool_sig): a
	 * cached median is stale only when its own signal moved, so the log
	 * input's end-to-end samples leave the headers median cached. */
	uint64_t ewma_version[POOL_SIGNALS];
	uint64_t view_clock;
	/* Per-decision scratch and views, sized to the pool's slots. */
	uint32_t scratch_cap;
	struct rdv_item *items;
	struct view views[VIEW_SLOTS];
	struct view art_view;    /* one decision's candidates of one artefact */
	/* Slots sorted by EWMA, per signal (pool_sig), kept so by observe
	 * and complete: the median of the candidates is then a partial walk,
	 * not a selection. */
	uint32_t *order[POOL_SIGNALS];
	uint32_t *rank[POOL_SIGNALS]; /* position of a slot in order */
	uint32_t order_n;
	uint64_t decisions[CORE_REASON_COUNT];
	uint64_t tier_decisions[CORE_TIER_MAX];
	/* The best tier serving the model of the decision under way: commit
	 * names a choice in a worse one `failover`. */
	uint8_t decide_tier_lo;
	/* Bit t: some live endpoint is in tier t (tier_recount). With one
	 * bit set, views skip every tier sum: an untiered pool's decision
	 * costs what it did before tiers. */
	uint16_t tier_mask;
	bool tiered;             /* more than one bit in tier_mask */
	uint64_t outcomes[CORE_OUTCOME_COUNT];
	uint64_t completions[CORE_END_COUNT];
	uint64_t hints[CORE_HINT_COUNT];
	uint32_t probe_cursor;   /* where core_key_probe_next goes on */
	/* Decisions a log line may confirm (learn): direct-mapped by akey,
	 * a later decision overwriting an earlier one in its slot. */
	struct pending pending[CORE_PENDING_SLOTS];
	struct asked asked[CORE_PENDING_SLOTS];
	struct owned_clock owned; /* the scale of pool_endpoint.owned */
};

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

static bool finite_ge(double v, double min)
{
	return isfinite(v) && v >= min;
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

/* How long a 429 keeps an endpoint out: its Retry-After (< 0: none, then
 * rate_limit_cooldown), never past rate_limit_cooldown_max, so that no
 * value, however large, closes it for good (or overflows now + it). */
static uint64_t rate_limit_ms(const struct core *c, int64_t retry_after_ms)
{
	uint64_t ms = retry_after_ms >= 0 ? (uint64_t)retry_after_ms
					  : c->p.rate_limit_cooldown_ms;
	return ms < c->p.rate_limit_cooldown_max_ms ? ms
						    : c->p.rate_limit_cooldown_max_ms;
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
static void ewma_moved_all(struct core *c)
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
static void order_fix(struct core *c, unsigned k, uint32_t i)
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

static inline bool view_has(const struct view *v, uint32_t i)
{
	return (v->member[i / 64] >> (i % 64)) & 1u;
}

/* In flight. An endpoint's load has two views. local_if is one HAProxy's:
 * its runtime API's scur + qcur (core_endpoint_sync), or without it this
 * agent's own decisions minus ends; it only ever sees the requests of the
 * HAProxy this agent serves. The engine's view (core_endpoint_engine) is
 * every HAProxy's: the engine's own running + waiting at its last
 * sample, plus what this agent sent and saw end since (the others'
 * changes since are unknown until the next sample). in_flight, which
 * decisions read, is the engine's view while its sample is fresh, else
 * local_if; both are kept at every step, so either can take over. */

/* Sets slot i's in_flight, keeping the views' totals current. inline:
 * with the tier sums it outgrew the compiler's default, and the call cost
 * every decision (bench-core). */
static inline void set_in_flight(struct core *c, uint32_t i, uint32_t value)
{
	struct pool_endpoint *e = &c->pool.ep[i];
	for (int k = 0; k < VIEW_SLOTS; k++) {
		struct view *v = &c->views[k];
		if (v->valid && view_has(v, i)) {
			v->total_if = v->total_if - e->in_flight + value;
			if (c->tiered)
				v->tiers.in_flight[e->tier - 1] += (uint64_t)value - e->in_flight;
		}
	}
	e->in_flight = value;
}

/* Whether e's engine sample is past engine_max_age_ms at now_ms. */
static bool engine_old(const struct core *c, const struct pool_endpoint *e,
		       uint64_t now_ms)
{
	return now_ms > e->engine_at_ms &&
	       now_ms - e->engine_at_ms > c->p.engine_max_age_ms;
}

static uint32_t engine_view(const struct pool_endpoint *e)
{
	int64_t v = (int64_t)e->engine_if + e->engine_delta;
	return v < 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* Sets in_flight from whichever view is in force. */
static void in_flight_apply(struct core *c, uint32_t i)
{
	struct pool_endpoint *e = &c->pool.ep[i];
	set_in_flight(c, i, e->engine_fresh ? engine_view(e) : e->local_if);
}

/* One more (d = 1: a decision) or one fewer (d = -1: an end) of this
 * agent's requests on slot i, in both views; neither goes below 0. */
static void in_flight_step(struct core *c, uint32_t i, int d)
{
	struct pool_endpoint *e = &c->pool.ep[i];
	if (d > 0 && e->local_if < UINT32_MAX)
		e->local_if++;
	else if (d < 0 && e->local_if > 0)
		e->local_if--;
	if (e->engine_fresh && ((d > 0 && e->engine_delta < INT32_MAX) ||
				(d < 0 && e->engine_delta > INT32_MIN)))
		e->engine_delta += d;
	in_flight_apply(c, i);
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

/* Whether e's key is excluded at now_ms: refused by a probe, until a
 * probe accepts it; without probes (none will come), until
 * dead_key_retry has passed. */
static inline bool key_excluded(const struct core *c,
				const struct pool_endpoint *e, uint64_t now_ms)
{
	return e->key_dead && (c->p.key_probe || now_ms < e->dead_until_ms);
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

/* At most 2^RETRIAL_MAX_SHIFT idle_reset periods between the re-trials of
 * an endpoint found slow again and again (16 min with the default 60 s). */
#define RETRIAL_MAX_SHIFT 4u

/* The silence after which e's latency is unknown again: idle_reset, doubled
 * for each re-trial in a row that found it too slow (idleness forgives a
 * scaled-to-zero backend its first answer, not a slow one its slowness). */
static inline uint64_t idle_after(const struct core *c,
				  const struct pool_endpoint *e)
{
	uint64_t t = c->p.idle_reset_ms;
	/* Saturates: a huge idle_reset (set by a reload after re-trials
	 * doubled it) must not wrap to a short one. */
	return t > (UINT64_MAX >> e->retrials) ? UINT64_MAX : t << e->retrials;
}

/* Silent for idle_after at at_ms: its latency is unknown again (a
 * scaled-to-zero backend, or one that was left because it was slow). */
static inline bool idle(const struct core *c, const struct pool_endpoint *e,
			uint64_t at_ms)
{
	return e->seen && c->p.idle_reset_ms > 0 && at_ms >= e->last_seen_ms &&
	       at_ms - e->last_seen_ms >= idle_after(c, e);
}

/* Samples that make an endpoint warm again after idle_reset once it has
 * been warm: a re-trial. A slow endpoint that was left gets no feedback, so
 * idle_reset comes; with the full cold_start_samples it would then take
 * about that many requests each idle_reset before being judged again (a 5x
 * slow endpoint kept 3.5% of the Mooncake trace's requests, a fair share
 * being 12.5%). A few samples judge it again, as they would judge a
 * recovered one fit (docs/routing-quality.md). */
#define RETRIAL_SAMPLES 4u

/* Whether e's own EWMA of signal sig counts: cold_start_samples successes,
 * or RETRIAL_SAMPLES after idle_reset once it was warm. */
static inline bool warm(const struct core *c, const struct pool_endpoint *e,
			unsigned sig)
{
	uint32_t need = c->p.cold_start_samples;
	if (((e->veteran >> sig) & 1u) && need > RETRIAL_SAMPLES)
		need = RETRIAL_SAMPLES;
	return e->samples[sig] > 0 && e->samples[sig] >= need;
}

static inline bool any_samples(const struct pool_endpoint *e)
{
	uint32_t any = 0;
	for (int k = 0; k < POOL_SIGNALS; k++)
		any |= e->samples[k];
	return any != 0;
}

/* Forgets e's samples (idle_reset): it starts cold again, for a re-trial
 * of RETRIAL_SAMPLES if it was warm once. If it was left as too slow since
 * the last reset, the next reset waits twice as long. */
static inline void forget_samples(struct pool_endpoint *e)
{
	if (e->suspect != POOL_FIT) {
		if (e->retrials < RETRIAL_MAX_SHIFT)
			e->retrials++;
	} else {
		e->retrials = 0;
	}
	e->suspect = POOL_FIT;
	e->slow_run = 0;
	e->run_answers = 0;
	e->run_sq = 0;
	for (int k = 0; k < POOL_SIGNALS; k++)
		e->samples[k] = 0;
}

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Builds v, the candidate set of model at now_ms: step 1 of the decision
 * (exclusions, cheapest and most permanent first), and the earliest time
 * at which one of its time-based exclusions or warm states ends. */
static void view_build(struct core *c, struct view *v, int model,
		       unsigned tier_max, uint64_t now_ms)
{
	struct pool *pool = &c->pool;
	bool changed = false;
	uint64_t fallback_at = UINT64_MAX;
	uint64_t key_failed_at = UINT64_MAX;

	memset(v->member, 0, ((c->scratch_cap + 63) / 64) * sizeof(uint64_t));
	/* The hysteresis of a model's tiers outlives a rebuild of its view. */
	if (!v->valid || v->model != model || v->tier_max != tier_max)
		v->tstate = (struct tier_state){ 0 };
	v->model = model;
	v->tier_max = (uint8_t)tier_max;
	/* One tier in the pool: no sums, and no failover. */
	bool tiered = c->tiered;
	if (tiered) {
		v->tier_lo = CORE_TIER_MAX;
		v->tier_hi = 1;
		v->tiers = (struct tier_sums){ 0 };
	} else {
		v->tier_lo = v->tier_hi = 1;
		for (unsigned t = 1; t <= CORE_TIER_MAX; t++)
			if (c->tier_mask & (1u << t))
				v->tier_lo = v->tier_hi = (uint8_t)t;
	}
	v->n = 0;
	v->serving = 0;
	v->fallback = UINT32_MAX;
	v->key_fallback = UINT32_MAX;
	v->total_w = 0;
	v->total_if = 0;
	v->horizon_ms = UINT64_MAX;
	for (int k = 0; k < POOL_SIGNALS; k++) {
		v->n_warm[k] = 0;
		v->median_version[k] = c->ewma_version[k] - 1;
	}
	for (uint32_t i = 0; i < pool->end; i++) {
		struct pool_endpoint *e = &pool->ep[i];
		if (!e->live)
			continue;
		if (model == MODEL_ANY ? !e->all_models : !pool_serves(e, model))
			continue;
		v->serving++;
		if (tiered) {
			if (e->tier < v->tier_lo)
				v->tier_lo = e->tier;
			if (e->tier > v->tier_hi)
				v->tier_hi = e->tier;
		}
		/* Warm state ends with idle_reset. */
		if (any_samples(e) && e->seen && c->p.idle_reset_ms > 0) {
			if (idle(c, e, now_ms)) {
				forget_samples(e);
				e->woke = 1; /* its next answer is a wake-up */
				changed = true;
			} else {
				v->horizon_ms = min_u64(v->horizon_ms,
							e->last_seen_ms + idle_after(c, e));
			}
		}
		if (e->disabled || e->drained || e->admin != CORE_ADMIN_ENABLED)
			continue;
		if (model >= 0 && e->has_mismatch) {
			if (pool_mismatched(e, model, now_ms)) {
				for (int k = 0; k < POOL_MISMATCH_SLOTS; k++)
					if (e->mismatch[k].model == (uint16_t)model)
						v->horizon_ms = min_u64(v->horizon_ms,
									e->mismatch[k].until_ms);
				continue;
			}
		}
		if (e->key_dead && key_excluded(c, e, now_ms)) {
			/* Without probes its exclusion ends with time; with
			 * them, a probe result ends it (and bumps version). */
			if (!c->p.key_probe)
				v->horizon_ms = min_u64(v->horizon_ms, e->dead_until_ms);
			if (e->key_failed_ms < key_failed_at) {
				key_failed_at = e->key_failed_ms;
				v->key_fallback = i;
			}
			continue;
		}
		uint8_t before = e->br.state;
		enum breaker_admit adm = breaker_admit(&e->br, &c->p, now_ms);
		changed |= e->br.state != before;
		/* Back from an open breaker: its latencies are from before
		 * (nothing was answered since) while its peers' went on
		 * learning; judged on them it could be left for good and its
		 * probes never sent. It is re-tried as after idle_reset. */
		if (before == CORE_BREAKER_OPEN &&
		    e->br.state == CORE_BREAKER_HALF_OPEN && any_samples(e))
			forget_samples(e);
		if (e->br.state == CORE_BREAKER_OPEN)
			v->horizon_ms = min_u64(v->horizon_ms, e->br.open_until_ms);
		else if (e->br.state == CORE_BREAKER_HALF_OPEN && e->br.probes_out > 0)
			v->horizon_ms = min_u64(v->horizon_ms,
						e->br.last_probe_ms + c->p.breaker_window_ms);
		if (adm == BREAKER_ADMIT_NO) {
			uint64_t at = e->br.state == CORE_BREAKER_OPEN ?
				      e->br.open_until_ms : 0;
			if (at < fallback_at) {
				fallback_at = at;
				v->fallback = i;
			}
			continue;
		}
		/* Failover tiers: a worse tier than the decision may use (after
		 * every exclusion, so that horizons and fallbacks are those of
		 * the whole set). */
		if (tiered) {
			if (e->tier > tier_max)
				continue;
			unsigned t = e->tier - 1u;
			v->tiers.n[t]++;
			v->tiers.closed[t] += e->br.state == CORE_BREAKER_CLOSED;
			v->tiers.w[t] += e->weight;
			v->tiers.in_flight[t] += e->in_flight;
		}
		v->cand[v->n++] = i;
		v->member[i / 64] |= 1ull << (i % 64);
		v->total_w += e->weight;
		v->total_if += e->in_flight;
		for (int k = 0; k < POOL_SIGNALS; k++)
			v->n_warm[k] += warm(c, e, (unsigned)k);
	}
	if (changed)
		c->version++; /* other views saw the old states */
	v->version = c->version;
	v->valid = true;
}

/* The view of model at now_ms with the tiers up to tier_max
 * (CORE_TIER_MAX: all), rebuilt when stale. inline: with two callers
 * (core_decide, tier_view) the compiler stopped inlining it into the
 * decision, which made untiered decisions 3-7% slower (bench-core). */
static inline struct view *view_get(struct core *c, int model, unsigned tier_max,
				    uint64_t now_ms)
{
	struct view *v = NULL, *victim = &c->views[0];
	for (int k = 0; k < VIEW_SLOTS; k++) {
		struct view *w = &c->views[k];
		if (w->valid && w->model == model && w->tier_max == tier_max) {
			v = w;
			break;
		}
		if (!w->valid || (victim->valid && w->used < victim->used))
			victim = w;
	}
	if (v == NULL)
		v = victim;
	if (!v->valid || v->model != model || v->tier_max != tier_max ||
	    v->version != c->version || now_ms >= v->horizon_ms)
		view_build(c, v, model, tier_max, now_ms);
	v->used = ++c->view_clock;
	return v;
}

/* The median EWMA of signal sig over the warm candidates of v: a walk of
 * the EWMA order up to its middle, cached until an EWMA of sig changes.
 * With no warm candidate, the prior. */
static double view_median(struct core *c, struct view *v, unsigned sig)
{
	uint32_t n = v->n_warm[sig];
	if (n == 0)
		return c->p.prior_ttfb_ms;
	if (v->median_version[sig] == c->ewma_version[sig])
		return v->median[sig];
	uint32_t lo_at = (n - 1) / 2, hi_at = n / 2, seen = 0;
	double lo = 0, med = 0;
	const uint32_t *o = c->order[sig];
	for (uint32_t j = 0; j < c->order_n; j++) {
		const struct pool_endpoint *e = &c->pool.ep[o[j]];
		if (!view_has(v, o[j]) || !warm(c, e, sig))
			continue;
		if (seen == lo_at)
			lo = e->ewma[sig];
		if (seen == hi_at) {
			med = (lo + e->ewma[sig]) / 2;
			break;
		}
		seen++;
	}
	v->median[sig] = med;
	v->median_version[sig] = c->ewma_version[sig];
	return med;
}

/* What one decision reads besides the view: per latency signal in use
 * (0 time to headers, 1 end to end; core_params.score_by), its median and
 * sticky_tolerance x median. */
struct pick {
	const struct view *v;
	unsigned kind;
	bool use[2];
	unsigned sig[2];   /* pool_sig of each */
	double median[2];
	double tolerated[2];
};

/* The EWMA of signal s the decision uses: its own once warm, else the
 * median. */
static inline double eff_ewma(const struct core *c, const struct pool_endpoint *e,
			      const struct pick *k, unsigned s)
{
	return warm(c, e, k->sig[s]) ? e->ewma[k->sig[s]] : k->median[s];
}

/* Successes after which power of two choices weighs an endpoint's own
 * EWMA rather than the median. p2c's wrong guess costs one request, the
 * sticky tolerance's a session's warm cache: p2c can believe a few samples
 * where leaving a session waits for cold_start_samples. Without it, a
 * fleet that has not yet seen cold_start_samples answers from any endpoint
 * (deploy/quickstart.sh: 76 requests over 4 endpoints) sends a 5x slow one
 * its full share of anonymous requests (docs/routing-quality.md). */
#define P2C_OWN_SAMPLES 3u

/* eff_ewma as p2c sees it: the endpoint's own from P2C_OWN_SAMPLES on. */
static inline double p2c_ewma(const struct core *c, const struct pool_endpoint *e,
			      const struct pick *k, unsigned s)
{
	unsigned sig = k->sig[s];
	return e->samples[sig] >= P2C_OWN_SAMPLES || warm(c, e, sig) ?
	       e->ewma[sig] : k->median[s];
}

/* Step 5: in_flight + 1 <= ceil(load_factor x (total + 1) x w / W), or
 * in_flight < load_floor (a floor so that light load never scatters keys). */
static inline bool within_bound(const struct core *c,
				const struct pool_endpoint *e,
				const struct pick *k)
{
	if (e->in_flight < c->p.load_floor)
		return true;
	double cap = c->p.load_factor * ((double)k->v->total_if + 1) *
		     e->weight / k->v->total_w;
	/* The tiny shrink keeps a product that should be an integer from
	 * rounding up to the next one. */
	return (double)e->in_flight + 1 <= ceil(cap * (1 - 1e-12));
}

/* Step 3's bound, for a key's warm entry: within_bound, or in_flight + 1
 * <= ceil(fair share + warm_slack), the fair share being
 * (total + 1) x w / W (core_params.warm_slack: leaving throws the
 * cache away, so a warm entry tolerates a few requests of load noise). */
static inline bool within_warm_bound(const struct core *c,
				     const struct pool_endpoint *e,
				     const struct pick *k)
{
	if (within_bound(c, e, k))
		return true;
	double fair = ((double)k->v->total_if + 1) * e->weight / k->v->total_w;
	return (double)e->in_flight + 1 <=
	       ceil((fair + c->p.warm_slack) * (1 - 1e-12));
}

/* Whether e is fit to keep or take a key: on every signal in use, its
 * EWMA is within sticky_tolerance of the candidates' median; for the time
 * to headers, or within sticky_tolerance of its own long-run EWMA (base).
 * Times to headers of different servers are not comparable (headers sent
 * before prefill or with the first token: a hundredfold apart), so
 * there only an endpoint slower than both its peers and its own past is
 * left: a slowdown. End-to-end times per KiB are comparable: the median
 * alone judges them. An endpoint over the median's tolerance is a suspect
 * (POOL_KEPT, or POOL_LEFT when left): if it goes idle, its next
 * idle_reset comes later, and while left its base does not learn (it keeps
 * the endpoint's usual latency, against which the slowdown shows). A
 * decision that finds it within the tolerance on its own samples clears
 * that. Called on the decision path: it writes only those marks (and bumps
 * version when a re-trial's doubling ends). */
static inline bool fast_enough(struct core *c, struct pool_endpoint *e,
			       const struct pick *k)
{
	bool all_warm = true, suspect = false;
	if (c->p.slow_run > 0 && e->slow_run >= c->p.slow_run) {
		e->suspect = POOL_LEFT; /* queue_judge's run */
		return false;
	}
	for (unsigned s = 0; s < 2; s++) {
		if (!k->use[s])
			continue;
		unsigned sig = k->sig[s];
		bool w = warm(c, e, sig);
		all_warm &= w;
		if (eff_ewma(c, e, k, s) <= k->tolerated[s])
			continue;
		suspect = true;
		if (s == 0 && w &&
		    e->ewma[sig] <= c->p.sticky_tolerance * e->base[sig])
			continue;
		e->suspect = POOL_LEFT;
		return false;
	}
	if (suspect) {
		e->suspect = POOL_KEPT;
	} else if (all_warm && (e->suspect != POOL_FIT || e->retrials)) {
		e->suspect = POOL_FIT;
		if (e->retrials) {
			e->retrials = 0;
			c->version++; /* its idle horizon moved */
		}
	}
	return true;
}

/* The latency p2c weighs, in ms to headers (the unit cost_weight_per_ms
 * exchanges): the headers EWMA, or the end-to-end EWMA relative to its
 * median, or the mean of the two relative to their medians, each scaled by
 * the headers median. */
static inline double p2c_latency(const struct core *c,
				 const struct pool_endpoint *e,
				 const struct pick *k)
{
	if (!k->use[1])
		return p2c_ewma(c, e, k, 0);
	double r1 = k->median[1] > 0 ? p2c_ewma(c, e, k, 1) / k->median[1] : 1;
	if (!k->use[0])
		return k->median[0] * r1;
	double r0 = k->median[0] > 0 ? p2c_ewma(c, e, k, 0) / k->median[0] : 1;
	return k->median[0] * (r0 + r1) / 2;
}

/* Predicted cost for power of two choices. */
static double p2c_cost(const struct core *c, const struct pool_endpoint *e,
		       const struct pick *k, uint64_t now_ms)
{
	uint32_t ok, fail;
	breaker_counts(&e->br, &c->p, now_ms, &ok, &fail);
	double rate = (ok + 1.0) / (ok + fail + 1.0);
	double cost = (e->in_flight + 1.0) * p2c_latency(c, e, k) /
		      (e->weight * rate);
	if (c->p.cost_weight_per_ms > 0)
		cost += e->cost_per_mtok / c->p.cost_weight_per_ms;
	return cost;
}

/* ---- explain's trace (core_explain; t is NULL on every other call) ---- */

/* Step 1 for t: each endpoint of the pool, a candidate when v holds it,
 * else the first exclusion of view_build's order that applies now. */
static void trace_candidates(const struct core *c, const struct view *v,
			     int model, uint64_t now_ms, struct core_trace *t)
{
	const struct pool *pool = &c->pool;
	t->serving = v->serving;
	t->candidates = v->n;
	t->total_in_flight = v->total_if;
	t->total_weight = v->total_w;
	for (uint32_t i = 0; i < pool->end; i++) {
		const struct pool_endpoint *e = &pool->ep[i];
		if (!e->live)
			continue;
		t->n_endpoints++;
		if (t->n_ep == CORE_TRACE_MAX)
			continue;
		struct core_trace_endpoint *x = &t->ep[t->n_ep++];
		x->endpoint = (int)i;
		x->admin = (enum core_admin)e->admin;
		x->breaker = breaker_state(&e->br, now_ms, &x->cooldown_left_ms);
		x->in_flight = e->in_flight;
		x->weight = e->weight;
		if (view_has(v, i))
			x->why = CORE_TRACE_CANDIDATE;
		else if (model == MODEL_ANY ? !e->all_models : !pool_serves(e, model))
			x->why = CORE_TRACE_NOT_SERVING;
		else if (e->disabled)
			x->why = CORE_TRACE_DISABLED;
		else if (e->drained)
			x->why = CORE_TRACE_DRAINED;
		else if (e->admin != CORE_ADMIN_ENABLED)
			x->why = CORE_TRACE_ADMIN;
		else if (model >= 0 && e->has_mismatch &&
			 pool_mismatched(e, model, now_ms))
			x->why = CORE_TRACE_MODEL_404;
		else if (key_excluded(c, e, now_ms))
			x->why = CORE_TRACE_KEY_DEAD;
		else
			x->why = CORE_TRACE_BREAKER;
	}
}

/* Steps 4-5 for t: the whole ranking of c->items[0..n), best first (an
 * insertion sort of at most CORE_TRACE_MAX: explain only). */
static void trace_rank(const struct core *c, uint32_t n, struct core_trace *t)
{
	t->ranked = true;
	t->load_factor = c->p.load_factor;
	t->load_floor = c->p.load_floor;
	t->place_choices = c->p.place_choices;
	struct rdv_item keep[CORE_TRACE_MAX];
	uint32_t m = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rdv_item it = c->items[i];
		uint32_t at = m;
		while (at > 0 && rdv_before(&it, &keep[at - 1]))
			at--;
		if (at == CORE_TRACE_MAX)
			continue;
		if (m < CORE_TRACE_MAX)
			m++;
		memmove(&keep[at + 1], &keep[at], (m - 1 - at) * sizeof(keep[0]));
		keep[at] = it;
	}
	t->n_rank = m;
	for (uint32_t i = 0; i < m; i++) {
		const struct pool_endpoint *e = &c->pool.ep[keep[i].endpoint];
		t->rank[i] = (struct core_trace_rank){
			.endpoint = (int)keep[i].endpoint, .score = keep[i].cost,
			.in_flight = e->in_flight, .weight = e->weight,
		};
	}
}

/* fast_enough and within_bound of a ranked endpoint, as the walk found
 * them. */
static void trace_walked(const struct core *c, const struct pick *k,
			 uint32_t idx, bool fast, uint64_t now_ms,
			 struct core_trace *t)
{
	const struct pool_endpoint *e = &c->pool.ep[idx];
	for (uint32_t i = 0; i < t->n_rank; i++) {
		struct core_trace_rank *r = &t->rank[i];
		if (r->endpoint != (int)idx)
			continue;
		r->walked = true;
		r->fast = fast;
		r->bounded = within_bound(c, e, k);
		r->cost = p2c_cost(c, e, k, now_ms);
		return;
	}
}

static void trace_p2c(const struct core *c, const struct pick *k, uint32_t a,
		      uint32_t b, uint64_t now_ms, struct core_trace *t)
{
	t->p2c = true;
	t->p2c_a = (int)a;
	t->p2c_b = (int)b;
	t->p2c_cost_a = p2c_cost(c, &c->pool.ep[a], k, now_ms);
	t->p2c_cost_b = p2c_cost(c, &c->pool.ep[b], k, now_ms);
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

/* Whether akey -> idx (generation gen) is a decision still unconfirmed;
 * it is then confirmed and forgotten. */
static bool pending_take(struct core *c, uint64_t akey, uint32_t idx,
			 uint32_t gen)
{
	struct pending *s = &c->pending[akey & (CORE_PENDING_SLOTS - 1)];
	if (s->akey != akey || s->endpoint == 0)
		return false;
	if (s->endpoint != PENDING_ANY && (s->endpoint != idx + 1 || s->gen != gen))
		return false;
	*s = (struct pending){ 0 };
	return true;
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

/* Step 3 for t: warm_usable's conditions one by one. */
static void trace_entry(struct core *c, const struct view *v, uint32_t idx,
			const struct pick *k, struct core_trace *t)
{
	struct pool_endpoint *e = &c->pool.ep[idx];
	if (!view_has(v, idx))
		return;
	t->entry_candidate = true;
	t->entry_closed = e->br.state == CORE_BREAKER_CLOSED;
	t->entry_fast = t->entry_closed && fast_enough(c, e, k);
	t->entry_bounded = within_warm_bound(c, e, k);
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

/* policy.artefact_affinity: v's candidates of artefact a (or of none
 * known) into c->art_view, its totals recomputed and its medians left to
 * be computed again. Returns the filtered view (its n may be 0), or v when
 * none differs. O(candidates), no allocation. */
static struct view *artefact_view(struct core *c, struct view *v, uint64_t a)
{
	struct view *f = &c->art_view;
	uint32_t *cand = f->cand;
	uint64_t *member = f->member;
	uint32_t n = 0;
	for (uint32_t i = 0; i < v->n; i++) {
		uint64_t x = c->pool.ep[v->cand[i]].artefact;
		n += x == 0 || x == a;
	}
	if (n == v->n)
		return v;
	*f = *v;
	f->cand = cand;
	f->member = member;
	memset(member, 0, ((c->scratch_cap + 63) / 64) * sizeof(*member));
	f->n = 0;
	f->total_w = 0;
	f->total_if = 0;
	memset(f->n_warm, 0, sizeof(f->n_warm));
	for (int k = 0; k < POOL_SIGNALS; k++)
		f->median_version[k] = UINT64_MAX; /* never a current version */
	for (uint32_t i = 0; i < v->n; i++) {
		uint32_t s = v->cand[i];
		const struct pool_endpoint *e = &c->pool.ep[s];
		if (e->artefact != 0 && e->artefact != a)
			continue;
		f->cand[f->n++] = s;
		f->member[s / 64] |= 1ull << (s % 64);
		f->total_w += e->weight;
		f->total_if += e->in_flight;
		for (int k = 0; k < POOL_SIGNALS; k++)
			f->n_warm[k] += warm(c, e, (unsigned)k);
	}
	f->valid = false; /* not a cached view: set_in_flight leaves it */
	return f;
}

/* Step 1b, failover tiers (tier.h): the view of the tiers all's
 * decision may use, all itself when that is every tier it has. Notes
 * which tiers are up for tier_stays. */
static struct view *tier_view(struct core *c, struct view *all, int model,
			      uint64_t now_ms)
{
	tier_note(&all->tstate, &all->tiers, c->p.tier_spill, now_ms);
	unsigned lim = tier_limit(&all->tiers, c->p.tier_spill);
	if (lim == 0 || lim >= all->tier_hi)
		return all;
	return view_get(c, model, lim, now_ms);
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
static void decide(struct core *c, const struct core_request *req,
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

const char *core_trace_excl_name(enum core_trace_excl e)
{
	static const char *const names[CORE_TRACE_EXCL_COUNT] = {
		[CORE_TRACE_CANDIDATE] = "candidate",
		[CORE_TRACE_NOT_SERVING] = "not_serving",
		[CORE_TRACE_DISABLED] = "disabled",
		[CORE_TRACE_DRAINED] = "drained",
		[CORE_TRACE_ADMIN] = "admin",
		[CORE_TRACE_MODEL_404] = "model_404",
		[CORE_TRACE_KEY_DEAD] = "key_dead",
		[CORE_TRACE_BREAKER] = "breaker",
	};
	if ((unsigned)e >= CORE_TRACE_EXCL_COUNT)
		return "unknown";
	return names[e];
}

/* Everything decide can change, but the map (only peeked at with a trace)
 * and the views (caches of the pool: dropped, rebuilt from it). */
int core_explain(struct core *c, const struct core_request *req,
		 uint64_t now_ms, struct core_rng *rng,
		 struct core_decision *out, struct core_trace *t)
{
	struct pool *pool = &c->pool;
	struct pool_endpoint *saved = NULL;
	uint32_t n = pool->end; /* decide adds and removes no endpoint */
	if (n > 0) {
		saved = malloc(n * sizeof(*saved));
		if (saved == NULL)
			return -ENOMEM;
		memcpy(saved, pool->ep, n * sizeof(*saved));
	}
	uint64_t version = c->version, view_clock = c->view_clock;
	struct owned_clock owned = c->owned;
	uint64_t decisions[CORE_REASON_COUNT];
	memcpy(decisions, c->decisions, sizeof(decisions));
	uint64_t akey = 0;
	bool has_akey = core_identity(c, req, &akey);
	struct pending pend = c->pending[akey & (CORE_PENDING_SLOTS - 1)];
	struct asked asked = c->asked[akey & (CORE_PENDING_SLOTS - 1)];
	uint64_t hints[CORE_HINT_COUNT];
	memcpy(hints, c->hints, sizeof(hints));

	*t = (struct core_trace){ .model = MODEL_NONE, .entry_endpoint = -1,
				  .p2c_a = -1, .p2c_b = -1 };
	t->has_akey = has_akey;
	t->akey = akey;
	if (req->model.len > 0 && pool->live > 0) {
		t->model = pool_model_find(pool, req->model.ptr, req->model.len);
		if (t->model < 0)
			t->model = MODEL_ANY;
	}
	decide(c, req, now_ms, rng, out, t);
	t->decision = *out;

	if (saved != NULL)
		memcpy(pool->ep, saved, n * sizeof(*saved));
	free(saved);
	c->version = version;
	c->view_clock = view_clock;
	c->owned = owned;
	memcpy(c->decisions, decisions, sizeof(decisions));
	c->pending[akey & (CORE_PENDING_SLOTS - 1)] = pend;
	c->asked[akey & (CORE_PENDING_SLOTS - 1)] = asked;
	memcpy(c->hints, hints, sizeof(hints));
	for (int k = 0; k < VIEW_SLOTS; k++)
		c->views[k].valid = false;
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

/* The long-run EWMA (an endpoint's own history, its base) moves this many
 * times slower than its EWMA once past cold_start_samples (before, it is
 * their mean): with ewma_alpha 0.05, over about the last 800 samples. A
 * slowdown of 4x takes the EWMA past sticky_tolerance times the median and
 * the base within about 20 samples, while the base moves by 2-3%; from
 * then on the endpoint is left and its base does not learn. */
#define BASE_SLOWER 40

/* Adds sample x (ms) to e's EWMA of signal sig. */
static void ewma_add(struct core *c, struct pool_endpoint *e, uint32_t idx,
		     unsigned sig, double x)
{
	bool was_warm = warm(c, e, sig);
	if (e->samples[sig] < UINT32_MAX)
		e->samples[sig]++;
	/* The mean of the samples until there are 1/alpha of them, then the
	 * EWMA: its start is not the first sample's alone. */
	double a = 1.0 / e->samples[sig];
	if (a < c->p.ewma_alpha)
		a = c->p.ewma_alpha;
	e->ewma[sig] += a * (x - e->ewma[sig]);
	/* The base of the time to headers: the same, BASE_SLOWER times
	 * slower, and not while the endpoint is left as slow or re-tried. */
	if (!pool_sig_e2e(sig) && e->suspect != POOL_LEFT && !e->retrials) {
		if (e->base_n[sig] < UINT32_MAX)
			e->base_n[sig]++;
		a = e->base_n[sig] <= c->p.cold_start_samples ?
		    1.0 / e->base_n[sig] : c->p.ewma_alpha / BASE_SLOWER;
		e->base[sig] += a * (x - e->base[sig]);
	}
	if (warm(c, e, sig) != was_warm) {
		e->veteran |= (uint8_t)(1u << sig);
		c->version++; /* it just became warm: views count it */
	} else if (e->samples[sig] == 1) {
		c->version++; /* its idle horizon begins: views track it */
	}
	c->ewma_version[sig]++;
	order_fix(c, sig, idx);
}

/* Notes an answer from e at now_ms to a request that started at start_ms
 * (idleness is judged there, so that a long request on a quiet endpoint
 * does not look like a wake-up). Returns whether it ends an idle_reset
 * period: the endpoint starts cold again, and this first answer (a
 * scaled-to-zero backend waking up) says nothing; nor does the end-to-end
 * time of a request that started before it (awake_ms). */
static bool touch(struct core *c, struct pool_endpoint *e, uint64_t start_ms,
		  uint64_t now_ms)
{
	/* Samples forgotten by a decision count as idleness too: the wait
	 * that forgetting doubled was measured before. */
	bool after_idle = e->woke || idle(c, e, start_ms);
	e->woke = 0;
	if (after_idle) {
		e->awake_ms = now_ms;
		if (any_samples(e)) {
			forget_samples(e);
			c->version++;
		}
	}
	e->seen = true;
	e->last_seen_ms = now_ms;
	return after_idle;
}

/* What one response teaches (core_observe's rules), outcome o already
 * classed and counted. */
struct lesson {
	int status;
	int64_t tr_ms;
	int64_t retry_after_ms;
	bool stream;
	bool has_akey;
	uint64_t akey;
	int model;                 /* pool model id, -1 none */
	bool after_idle;
	/* A success may add akey's entry (feedback: HAProxy echoes the akey
	 * warmlane set). A log line may not: whoever can write to the log
	 * socket writes any akey, and 46k forged lines grew the map (and
	 * RSS) by 17 MB. It only refreshes an entry that already points to
	 * this endpoint, or confirms a decision warmlane made (struct
	 * pending). */
	bool may_insert;
	bool provisional;          /* a success the breaker counts at the end */
	int64_t queued;            /* in flight at its decision; < 0: unknown */
	uint64_t start_ms;         /* the request's start (stall.h) */
	uint64_t headers_ms;       /* its response headers */
};

/* The in-flight count the decision akey -> idx found (struct asked),
 * forgotten once read; -1 when its slot holds another decision. */
static int64_t asked_take(struct core *c, uint64_t akey, uint32_t idx)
{
	struct asked *s = &c->asked[akey & (CORE_PENDING_SLOTS - 1)];
	if (s->akey != akey || s->endpoint != idx + 1)
		return -1;
	int64_t q = s->in_flight;
	*s = (struct asked){ 0 };
	return q;
}

/* Adds squared distance d2 to e's spread of kind (an EWMA, the mean of
 * the samples for the first cold_start_samples). */
static void spread_add(struct core *c, struct pool_endpoint *e, unsigned kind,
		       double d2)
{
	if (e->spread_n[kind] < UINT32_MAX)
		e->spread_n[kind]++;
	double a = e->spread_n[kind] <= c->p.cold_start_samples ?
		   1.0 / e->spread_n[kind] : c->p.ewma_alpha;
	e->spread[kind] += a * (d2 - e->spread[kind]);
}

/* Ends e's run without leaving: its slow answers were the endpoint's
 * usual irregularity after all, and teach the spread. */
static void run_end(struct core *c, struct pool_endpoint *e, unsigned kind)
{
	if (e->slow_run > 0 && e->slow_run < c->p.slow_run) {
		double d2 = e->run_sq / e->slow_run;
		for (unsigned i = 0; i < e->slow_run; i++)
			spread_add(c, e, kind, d2);
	}
	e->slow_run = 0;
	e->run_sq = 0;
}

/* The fast slowdown detector beside the EWMA (core_params.slow_run): a
 * success's time to headers tr, with the in-flight count q its decision
 * found, against e's base b (its usual time) and the candidates' median.
 * An answer is slow when tr > sticky_tolerance x b and x the median, and
 * its queue does not explain it: tr x (1 + qm) / (1 + q) is still over
 * the tolerance, qm being the in-flight count e's decisions usually find
 * (a request behind q others of a server that served them one by one,
 * the most a queue can explain; batching servers suffer less from it).
 * slow_run slow answers, within 2 x slow_run answers, and e is left as
 * slow (fast_enough) until idle_reset re-tries it; an answer within the
 * tolerance ends a run, one that only its queue explains neither counts
 * nor ends it. Under load tr is mostly queue wait: measured on the
 * simulator's Mooncake trace at speed 3, leaving on a run of raw times
 * (r = 3, 5, 8) raised the TTFT p90 from 2,580 ms to 4,323, 2,708 and
 * 2,617 ms (docs/routing-quality.md). The run also needs answers regular
 * enough for one of them to say something: the spread (root mean square
 * distance to b) under b. Mooncake-like prompts, where one endpoint's
 * times to headers range from 30 ms (a cache hit) to 17 s (a long cold
 * prompt), are judged by the EWMA alone: with the queue correction but
 * without that condition, a run of 4 raised the speed-3 p90 to 2,687 ms.
 * Answers in a run, or while e is left, do not teach the spread; a run
 * that ends without leaving teaches it its answers (run_end). */
static void queue_judge(struct core *c, struct pool_endpoint *e,
			const struct lesson *l, uint64_t now_ms)
{
	if (c->p.slow_run == 0 || l->queued < 0 || l->tr_ms < 0 || l->after_idle)
		return;
	unsigned kind = l->stream ? CORE_KIND_STREAM : CORE_KIND_PLAIN;
	unsigned sig = pool_sig(false, kind);
	double q = (double)l->queued, qm = e->queue_mean;
	e->queue_mean += c->p.ewma_alpha * (q - qm);
	if (e->base_n[sig] < c->p.cold_start_samples ||
	    e->suspect == POOL_LEFT || e->slow_run >= c->p.slow_run)
		return;
	double tr = (double)l->tr_ms, b = e->base[sig];
	double d2 = (tr - b) * (tr - b);
	/* over the tolerance of its usual range, not of its mean: the
	 * jitter of a server answering in 2 ms is not a slowdown */
	double limit = c->p.sticky_tolerance * (b + sqrt(e->spread[kind]));
	if (e->slow_run > 0 && ++e->run_answers >= 2 * c->p.slow_run)
		run_end(c, e, kind); /* too few slow answers: no run */
	if (tr <= limit) {
		run_end(c, e, kind);
		spread_add(c, e, kind, d2);
		return;
	}
	if (q > qm && tr * (1 + qm) / (1 + q) <= limit)
		return; /* its queue may explain it */
	struct view *v = view_get(c, MODEL_NONE, CORE_TIER_MAX, now_ms);
	if (e->spread_n[kind] < c->p.cold_start_samples ||
	    sqrt(e->spread[kind]) > b ||
	    tr <= c->p.sticky_tolerance * view_median(c, v, sig)) {
		/* too irregular for one answer to say much, or its peers
		 * are as slow (load, not e) */
		run_end(c, e, kind);
		spread_add(c, e, kind, d2);
		return;
	}
	if (stall_note(e, l->start_ms, l->headers_ms, tr - b,
		       sqrt(e->spread[kind])) < 2 && e->slow_run + 1u >= c->p.slow_run)
		return; /* one pause may explain them all: a stall */
	if (e->slow_run == 0)
		e->run_answers = 0;
	e->slow_run++;
	e->run_sq += d2;
}

static void learn(struct core *c, struct pool_endpoint *e, uint32_t idx,
		  enum core_outcome o, const struct lesson *l, uint64_t now_ms)
{
	uint8_t state = e->br.state;

	switch (o) {
	case CORE_OUTCOME_SUCCESS:
		if (!l->provisional)
			breaker_success(&e->br, &c->p, now_ms);
		queue_judge(c, e, l, now_ms);
		if (l->tr_ms >= 0 && !l->after_idle)
			ewma_add(c, e, idx, pool_sig(false, l->stream),
				 (double)l->tr_ms);
		if (l->has_akey && l->may_insert)
			affinity_put(&c->aff, l->akey, idx, e->gen, now_ms);
		else if (l->has_akey &&
			 !affinity_refresh(&c->aff, l->akey, idx, e->gen, now_ms) &&
			 pending_take(c, l->akey, idx, e->gen))
			/* a line confirming a decision of warmlane's own */
			affinity_put(&c->aff, l->akey, idx, e->gen, now_ms);
		if (e->has_mismatch && l->model >= 0) {
			pool_note_served(e, l->model);
			c->version++;
		}
		break;
	case CORE_OUTCOME_NEUTRAL:
		breaker_neutral(&e->br);
		if (l->status == 404 && l->model >= 0) {
			pool_note_404(e, l->model, c->p.model_mismatch_404s,
				      c->p.dead_key_retry_ms, now_ms);
			c->version++;
		}
		break;
	case CORE_OUTCOME_FAILURE:
		breaker_failure(&e->br, &c->p, now_ms);
		if (l->has_akey)
			affinity_remove(&c->aff, l->akey, idx);
		break;
	case CORE_OUTCOME_RATE_LIMITED:
		breaker_rate_limited(&e->br, rate_limit_ms(c, l->retry_after_ms),
				     now_ms);
		c->version++; /* even OPEN to OPEN: the cooldown moved */
		break;
	case CORE_OUTCOME_KEY_DEAD:
		/* The client shaped the request (path, model, headers) that
		 * the upstream refused: a suspicion only, for the agent's own
		 * probe to settle (core_key_probe_next). A keyless endpoint's
		 * 401/403 judged the client's own credential. */
		breaker_neutral(&e->br);
		if (e->key_id != NULL)
			e->key_suspect = true;
		break;
	default:
		break;
	}
	/* Any breaker change, or a probe slot freed or taken. */
	if (e->br.state != state || state == CORE_BREAKER_HALF_OPEN)
		c->version++;
}

int core_observe(struct core *c, const struct core_feedback *fb,
		 uint64_t now_ms)
{
	struct pool_endpoint *e = pool_get(&c->pool, fb->endpoint);
	if (e == NULL)
		return -ENOENT;
	enum core_outcome o = core_status_class(fb->status);
	if (o == CORE_OUTCOME_INVALID)
		return -EINVAL;
	c->outcomes[o]++;
	e->outcomes[o]++;
	struct lesson l = {
		.status = fb->status, .tr_ms = fb->tr_ms,
		.retry_after_ms = fb->retry_after_ms, .stream = fb->stream,
		.has_akey = fb->has_akey, .akey = fb->akey,
		.model = fb->model.len > 0 ?
			 pool_model_find(&c->pool, fb->model.ptr, fb->model.len) : -1,
		.after_idle = touch(c, e, now_ms, now_ms),
		.may_insert = true,
		.provisional = o == CORE_OUTCOME_SUCCESS && fb->stream &&
			       fb->end_follows,
		.queued = fb->has_akey ?
			  asked_take(c, fb->akey, (uint32_t)fb->endpoint) : -1,
		.start_ms = fb->tr_ms >= 0 && (uint64_t)fb->tr_ms <= now_ms ?
			    now_ms - (uint64_t)fb->tr_ms : now_ms,
		.headers_ms = now_ms,
	};
	if (l.provisional && e->provisional < UINT32_MAX)
		e->provisional++;
	learn(c, e, (uint32_t)fb->endpoint, o, &l, now_ms);
	return 0;
}

/* The end-to-end sample is the whole request's time per KiB sent, a
 * response under E2E_MIN_BYTES counting as that many. An LLM request's time
 * is mostly decoding, in proportion to what it sends; per KiB, the time
 * measures the endpoint's speed rather than the answer's length, and it is
 * the same quantity whether the server sends its headers before prefill or
 * with the first token. Below about 100 streamed tokens prefill dominates
 * and bytes measure nothing: the floor keeps a 3-token answer from counting
 * as 50 times slower than a long one. Measured on the simulator's Mooncake
 * trace (docs/routing-quality.md): the hit rate with the end-to-end signal
 * is 0.90 of the oracle's per byte with a 1 KiB floor, 0.93 with 4 KiB,
 * 0.94 with 16 KiB (as without normalisation), and per KiB of request body
 * 0.79; unnormalised, the mixed workload's classifications and summaries
 * are different quantities. */
#define E2E_MIN_BYTES 16384u

int core_complete(struct core *c, const struct core_completion *cc,
		  uint64_t now_ms)
{
	struct pool_endpoint *e = pool_get(&c->pool, cc->endpoint);
	if (e == NULL)
		return -ENOENT;
	if ((unsigned)cc->end >= CORE_END_COUNT)
		return -EINVAL;
	enum core_outcome o = cc->status == -1 ? CORE_OUTCOME_NEUTRAL :
			      core_status_class(cc->status);
	if (o == CORE_OUTCOME_INVALID)
		return -EINVAL;
	uint32_t idx = (uint32_t)cc->endpoint;
	if (!cc->shadow)
		in_flight_step(c, idx, -1);
	c->completions[cc->end]++;
	e->completions[cc->end]++;

	bool cut = cc->end == CORE_END_SERVER_CUT ||
		   cc->end == CORE_END_SERVER_FAIL;
	uint64_t start = cc->total_ms >= 0 && (uint64_t)cc->total_ms <= now_ms ?
			 now_ms - (uint64_t)cc->total_ms : now_ms;
	struct lesson l = {
		.status = cc->status, .tr_ms = cc->tr_ms,
		.retry_after_ms = cc->has_retry_after && cc->retry_after_ms >= 0 ?
				  cc->retry_after_ms : -1,
		.stream = cc->stream, .has_akey = cc->has_akey, .akey = cc->akey,
		.model = -1,
		/* Without feedback (HAProxy 2.6) the line is the answer. */
		.queued = !cc->feedback_seen && cc->has_akey ?
			  asked_take(c, cc->akey, (uint32_t)cc->endpoint) : -1,
		.start_ms = cc->total_ms < 0 && cc->tr_ms >= 0 &&
			    (uint64_t)cc->tr_ms <= now_ms ?
			    now_ms - (uint64_t)cc->tr_ms : start,
		.headers_ms = cc->tr_ms >= 0 && start + (uint64_t)cc->tr_ms < now_ms ?
			      start + (uint64_t)cc->tr_ms : now_ms,
	};
	if (cc->feedback_seen) {
		/* core_observe took the status (and the idle check, at the
		 * headers): only the end is news, and only when the status
		 * was not already a failure (a 5xx whose body is then cut is
		 * one failed request). A long stream is activity, not
		 * idleness. */
		e->seen = true;
		e->last_seen_ms = now_ms;
		/* A provisional success (core_feedback.end_follows) is
		 * settled: a cut fails it, a normal end makes it a success
		 * for the breaker, a client's abort frees its probe slot. */
		bool pending = cc->stream && o == CORE_OUTCOME_SUCCESS &&
			       e->provisional > 0;
		if (pending)
			e->provisional--;
		if (cut && o != CORE_OUTCOME_FAILURE) {
			learn(c, e, idx, CORE_OUTCOME_FAILURE, &l, now_ms);
		} else if (pending) {
			uint8_t state = e->br.state;
			if (cc->end == CORE_END_COMPLETE)
				breaker_success(&e->br, &c->p, now_ms);
			else
				breaker_neutral(&e->br);
			if (e->br.state != state || state == CORE_BREAKER_HALF_OPEN)
				c->version++;
		}
	} else {
		l.after_idle = touch(c, e, start, now_ms);
		enum core_outcome t = o;
		if (cut)
			t = CORE_OUTCOME_FAILURE;
		else if (cc->end == CORE_END_CLIENT_ABORT &&
			 t == CORE_OUTCOME_FAILURE)
			t = CORE_OUTCOME_NEUTRAL;
		if (cut || cc->status != -1) {
			c->outcomes[t]++;
			e->outcomes[t]++;
		}
		/* Status -1 without a cut: no response to learn from, but a
		 * HALF_OPEN probe slot is freed (neutral). */
		learn(c, e, idx, t, &l, now_ms);
	}
	/* Status -1 is neutral: only a known success is timed; not the
	 * wake-up, told here or earlier by feedback (awake_ms). */
	if (cc->end == CORE_END_COMPLETE && o == CORE_OUTCOME_SUCCESS &&
	    cc->total_ms >= 0 && !l.after_idle && start >= e->awake_ms) {
		double kib = (double)(cc->bytes > E2E_MIN_BYTES ? cc->bytes : E2E_MIN_BYTES) / 1024;
		ewma_add(c, e, idx, pool_sig(true, cc->stream),
			 (double)cc->total_ms / kib);
	}
	return 0;
}

void core_stats(const struct core *c, struct core_stats *out)
{
	*out = (struct core_stats){
		.endpoints = c->pool.live,
		.affinity_entries = c->aff.used,
		.affinity_capacity = c->aff.cap,
		.affinity_bytes = (uint64_t)c->aff.cap * sizeof(struct affinity_entry) +
				  ((uint64_t)c->aff.mask + 1) * sizeof(struct affinity_slot),
		.affinity_hits = c->aff.hits,
		.affinity_misses = c->aff.misses,
		.affinity_evictions = c->aff.evictions,
		.affinity_expirations = c->aff.expirations,
	};
	memcpy(out->decisions, c->decisions, sizeof(out->decisions));
	memcpy(out->tier_decisions, c->tier_decisions, sizeof(out->tier_decisions));
	memcpy(out->outcomes, c->outcomes, sizeof(out->outcomes));
	memcpy(out->completions, c->completions, sizeof(out->completions));
	memcpy(out->hints, c->hints, sizeof(out->hints));
}

uint32_t core_affinity_expire(struct core *c, uint64_t now_ms, uint32_t max)
{
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
		uint64_t idle = now_ms > x->last_ms ? now_ms - x->last_ms : 0;
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
	uint64_t idle = v->now_ms > x->last_ms ? v->now_ms - x->last_ms : 0;
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

int core_affinity_cursor_next(const struct core *c,
			      struct core_affinity_cursor *cur,
			      uint64_t now_ms, uint32_t max,
			      core_affinity_fn fn, void *arg)
{
	if (cur->map_rebuilds != c->map_rebuilds)
		return -ESTALE;
	struct cursor_visit v = { c, now_ms, fn, arg };
	int rc = affinity_scan(&c->aff, &cur->pos, max, cursor_visit, &v);
	cur->done = cur->pos >= c->aff.high;
	return rc;
}

int core_affinity_import(struct core *c, const struct core_affinity_record *rec,
			 uint64_t now_ms)
{
	const struct pool_endpoint *e = pool_get(&c->pool, rec->endpoint);
	if (e == NULL)
		return -ENOENT;
	if (rec->idle_ms >= c->aff.ttl_ms)
		return -ESTALE;
	uint64_t last = now_ms > rec->idle_ms ? now_ms - rec->idle_ms : 0;
	affinity_put(&c->aff, rec->akey, (uint32_t)rec->endpoint, e->gen, last);
	return 0;
}

int core_endpoint_stats_export(const struct core *c, int idx, uint64_t now_ms,
			       struct core_endpoint_stats *out)
{
	const struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	*out = (struct core_endpoint_stats){ .trips = e->br.trips };
	for (unsigned k = 0; k < CORE_KIND_COUNT; k++) {
		out->ewma_ms[k] = e->ewma[pool_sig(false, k)];
		out->samples[k] = e->samples[pool_sig(false, k)];
		out->e2e_ewma_ms[k] = e->ewma[pool_sig(true, k)];
		out->e2e_samples[k] = e->samples[pool_sig(true, k)];
	}
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

/* ---- upstream key probes ------------------------------------------------ */

/* Whether e is due for a probe at now_ms (core_key_probe_next). */
static inline bool probe_due(const struct pool_endpoint *e, uint64_t now_ms)
{
	if (!e->live || e->key_id == NULL || e->key_probing ||
	    now_ms < e->probe_after_ms)
		return false;
	return e->key_suspect || (e->key_dead && now_ms >= e->dead_until_ms);
}

int core_key_probe_next(struct core *c, uint64_t now_ms)
{
	struct pool *pool = &c->pool;
	if (!c->p.key_probe || pool->end == 0)
		return -1;
	uint32_t start = c->probe_cursor < pool->end ? c->probe_cursor : 0;
	for (uint32_t n = 0; n < pool->end; n++) {
		uint32_t i = (start + n) % pool->end;
		struct pool_endpoint *e = &pool->ep[i];
		if (!probe_due(e, now_ms))
			continue;
		/* The rate limit counts from the start: whatever callers
		 * send, one probe per key per interval. */
		e->key_probing = true;
		e->key_suspect = false;
		e->probe_after_ms = now_ms + c->p.key_probe_interval_ms;
		c->probe_cursor = i + 1;
		return (int)i;
	}
	return -1;
}

int core_key_probe_result(struct core *c, int idx, enum core_probe result,
			  uint64_t now_ms)
{
	struct pool_endpoint *e = pool_get(&c->pool, idx);
	if (e == NULL)
		return -ENOENT;
	if (e->key_id == NULL || (unsigned)result >= CORE_PROBE_COUNT)
		return -EINVAL;
	e->key_probing = false;
	e->probes[result]++;
	switch (result) {
	case CORE_PROBE_ACCEPTED:
		/* 401/403s that came while it was out were answered by it. */
		e->key_suspect = false;
		if (e->key_dead) {
			e->key_dead = 0;
			e->dead_until_ms = 0;
			c->version++;
		}
		break;
	case CORE_PROBE_REFUSED:
		e->key_suspect = false;
		c->version++; /* excluded, or moved in the fallback order */
		e->key_dead = 1;
		e->dead_until_ms = now_ms + c->p.dead_key_retry_ms;
		e->key_failed_ms = now_ms;
		break;
	default:
		/* Nothing learnt: a suspect stays one (probed again after
		 * the interval), a dead key stays dead. */
		if (!e->key_dead)
			e->key_suspect = true;
		break;
	}
	return 0;
}
