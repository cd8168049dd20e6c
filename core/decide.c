/* decide.c - core_decide's steps in the order they run: the affinity key, the candidates, the warm entry or hint, the rendezvous walk, the spill. */
#include "pick.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* The first rung of the ladder req has, in *rung; NULL when none. */
static const struct core_id *ladder_first(const struct core *c,
					  const struct core_request *req,
					  enum core_rung *rung)
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
			*rung = r;
			return id;
		}
	}
	return NULL;
}

/* The affinity key of id, req's identity on rung r. */
static uint64_t id_akey(const struct core *c, const struct core_request *req,
			const struct core_id *id, enum core_rung r)
{
	uint8_t b[16];
	size_t n = 8;
	for (int k = 0; k < 8; k++)
		b[k] = (uint8_t)(id->hash >> (8 * k));
	/* A session or install id is a label the client chooses: scoped to
	 * its caller, another caller's same label is another key (params.h).
	 * The 16-byte input is another domain than an unscoped id's 8. */
	if (c->p.session_scope == CORE_SESSION_CALLER &&
	    (r == CORE_RUNG_SESSION || r == CORE_RUNG_INSTALL) &&
	    req->caller.present) {
		for (int k = 0; k < 8; k++)
			b[8 + k] = (uint8_t)(req->caller.hash >> (8 * k));
		n = 16;
	}
	return XXH3_64bits_withSeed(b, n, (uint64_t)r + 1);
}

bool core_identity(const struct core *c, const struct core_request *req,
		   uint64_t *akey)
{
	enum core_rung r;
	const struct core_id *id = ladder_first(c, req, &r);
	if (id == NULL)
		return false;
	*akey = id_akey(c, req, id, r);
	return true;
}

/* Whether the turns of req's key tell whether other HAProxies route it
 * (routers.h, routers_turn): a session id's, or the longest prefix
 * window's, which a conversation keeps from turn to turn. A shorter
 * window is shared by conversations that open alike (a system prompt), a
 * caller's or an install's by all its conversations at once. */
static bool turn_keyed(const struct core_request *req, const struct core_id *id,
		       enum core_rung r)
{
	return id != NULL && (r == CORE_RUNG_SESSION || id == &req->prefix[2]);
}

/* A key without an entry, of a conversation's later turn, may be that
 * conversation's new window: its body grew past a prefix window (1, 4, 8
 * KiB) since the previous turn, which was keyed by a shorter window of
 * the same body. The longest shorter window with a live entry is taken
 * when its last request was the turn before this one (a shorter window
 * shared by conversations that open alike holds the turn of whichever
 * came last). Returns the window's index, with its entry's endpoint,
 * generation and last refresh, or -1. */
static int prior_window(const struct core *c, const struct core_request *req,
			const struct core_id *id, enum core_rung r,
			uint64_t now_ms, uint32_t *ep, uint32_t *gen,
			uint64_t *last_ms)
{
	if (id == NULL || req->turn < 2 || r != CORE_RUNG_PREFIX)
		return -1;
	for (int k = (int)(id - req->prefix) - 1; k >= 0; k--) {
		uint16_t turn;
		if (req->prefix[k].present &&
		    affinity_peek_turn(&c->aff, id_akey(c, req, &req->prefix[k], r),
				       now_ms, ep, gen, last_ms, &turn))
			return turn == req->turn - 1 ? k : -1;
	}
	return -1;
}

/* noipa: a caller that sees this body (LTO) would take it for one
 * without side effects and drop the call (see AFFINITY_PREFETCH_FN). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((noipa))
#endif
void core_prefetch(const struct core *c, uint64_t akey,
		   enum core_prefetch stage)
{
	switch (stage) {
	case CORE_PREFETCH_SLOT:
		affinity_prefetch(&c->aff, akey);
		break;
	case CORE_PREFETCH_ENTRY:
		affinity_prefetch_entry(&c->aff, akey);
		break;
	case CORE_PREFETCH_LINKS:
		affinity_prefetch_links(&c->aff, akey);
		break;
	}
}

bool core_prefetch_pays(const struct core *c)
{
	size_t bytes = (size_t)c->aff.cap * sizeof(struct affinity_entry) +
		       ((size_t)c->aff.mask + 1) * sizeof(struct affinity_slot);
	return bytes > CORE_PREFETCH_MIN_BYTES;
}

/* Whether the ranked endpoint idx can take the key: fast enough and within
 * the load bound (step 4), noted in t when set. */
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

/* Step 5: two distinct candidates at random, the cheaper. t (explain
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
	/* one of them slow by its HAProxy check (explore_check): the other */
	if (a->check_slow != b->check_slow)
		return a->check_slow ? v->cand[j] : v->cand[i];
	double cost[2];
	p2c_costs(c, k, a, b, now_ms, cost);
	return cost[1] < cost[0] ? v->cand[j] : v->cand[i];
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
		k->tolerated[s] = slow_limit(c, k->sig[s],
					     view_median_peer(c, v, k->sig[s]));
	}
}

static void commit(struct core *c, uint32_t idx, enum core_reason reason,
		   uint64_t now_ms, struct core_decision *out)
{
	struct pool_endpoint *e = &c->pool.ep[idx];
	if (out->has_akey)
		c->asked[out->akey & (CORE_PENDING_SLOTS - 1)] =
			(struct asked){ out->akey, idx + 1, e->in_flight,
					c->decide_kib,
					reason == CORE_REASON_AFFINITY,
					c->decide_turn };
	in_flight_step(c, idx, 1);
	e->decisions++;
	if (e->wait_ms <= e->last_seen_ms)
		e->wait_ms = now_ms;
	explore_tick(&c->explore);
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
	out->gen = e->gen;
	c->decisions[reason]++;
	/* A key taken from a shorter window's entry has none of its own:
	 * the answer's log line may add it. */
	if (out->has_akey && (reason != CORE_REASON_AFFINITY || c->decide_window))
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

/* idx's answers of kind `kind` judged against the decision's other
 * candidates' (slowstart.h), O(candidates); *slowest gets the comparable
 * peer it was judged against, UINT32_MAX if none. */
static struct slowstart_judge judge_start(const struct core *c, const struct pick *k,
					  uint32_t idx, unsigned kind, uint32_t *slowest)
{
	const struct pool_endpoint *x = &c->pool.ep[idx];
	struct slowstart_judge j = { .x = &x->first[kind] };
	*slowest = UINT32_MAX;
	for (uint32_t i = 0; i < k->v->n; i++) {
		uint32_t yi = k->v->cand[i];
		const struct pool_endpoint *y = &c->pool.ep[yi];
		uint32_t peers = j.peers;
		double before = j.slowest;
		slowstart_judge_peer(&j, &y->first[kind], y->weight * x->inv_weight);
		if (j.peers > peers && (peers == 0 || j.slowest > before))
			*slowest = yi;
	}
	return j;
}

_Static_assert(CORE_KIND_COUNT == 2, "slow_from_start: the other kind is 1 - kind");

/* Whether idx is slow from its first answers of the decision's kind
 * (slowstart.h), and not shown otherwise by its answers of the other
 * kind: a server slow from its start is slow whatever it is asked, and
 * one whose answers of a kind are as fast as its peers' was given the
 * costlier work in the other (a cold fleet's first long prompts; on four
 * llama-servers whose clients stream half their turns, its warm keys
 * then left it: docs/policy-v2.md, section 44). slowest[kind] gets the
 * comparable peer each kind was judged against, UINT32_MAX if none or
 * not judged. */
static bool slow_from_start(const struct core *c, const struct pick *k,
			    uint32_t idx, uint32_t slowest[CORE_KIND_COUNT])
{
	double tolerance = c->p.sticky_tolerance, z = c->p.slow_start;
	unsigned other = 1u - k->kind;
	slowest[other] = UINT32_MAX;
	struct slowstart_judge j = judge_start(c, k, idx, k->kind, &slowest[k->kind]);
	if (!slowstart_slow(&j, tolerance, z))
		return false;
	struct slowstart_judge o = judge_start(c, k, idx, other, &slowest[other]);
	return !slowstart_judged(&o) || slowstart_slow(&o, tolerance, z);
}

/* Whether idx may take a key placed by the ranking for its speed: its
 * HAProxy check not slow against its peers' (explore_check), and not slow
 * from its first answers (policy.slow_start) unless that check vouches
 * for it. A key's unconfirmed placement is kept, as owned_ok keeps it. */
static bool start_ok(const struct core *c, const struct pick *k,
		     const struct owned_view *o, uint32_t idx)
{
	const struct pool_endpoint *e = &c->pool.ep[idx];
	uint32_t slowest[CORE_KIND_COUNT];
	if (e->check_slow)
		return false;
	if (o != NULL && idx == o->placed)
		return true;
	return c->p.slow_start <= 0 || e->first[k->kind].n < SLOWSTART_ANSWERS ||
	       e->check_vouch || !slow_from_start(c, k, idx, slowest);
}

/* Whether idx's answers of kind `kind` are within tolerance of its
 * witness's of that kind (the peer it was last judged against: the
 * slowest comparable one), so that slow_from_start would find it not
 * slow in that kind. O(1). */
static bool start_witnessed(const struct core *c, const struct pick *k,
			    uint32_t idx, unsigned kind)
{
	const struct pool_endpoint *x = &c->pool.ep[idx];
	const struct slowstart *s = &x->first[kind];
	uint32_t w = x->start_witness[kind];
	if (s->n < SLOWSTART_ANSWERS || w == 0 || w - 1 == idx ||
	    w - 1 >= c->pool.end || !view_has(k->v, w - 1))
		return false;
	const struct pool_endpoint *y = &c->pool.ep[w - 1];
	const struct slowstart *ys = &y->first[kind];
	double ratio = y->weight * x->inv_weight;
	return y->live && ys->n >= SLOWSTART_ANSWERS && slowstart_comparable(s, ys) &&
	       ratio > 0 &&
	       s->mean - ys->mean - (ratio == 1 ? 0 : log(ratio)) <= c->log_tolerance;
}

/* Whether a key warm on idx stays there by the same judgement
 * (policy.slow_start_leave). On the hit path the witnesses are tried
 * first, the decision's kind's and then the other's (whose verdict "not
 * slow" is enough: slow_from_start), O(1) while the fleet is even; only
 * a judgement both fail walks the candidates, and leaves each kind the
 * witness it found. */
static bool start_keeps(struct core *c, const struct pick *k, uint32_t idx)
{
	struct pool_endpoint *x = &c->pool.ep[idx];
	if (!c->p.slow_start_leave || c->p.slow_start <= 0 ||
	    x->first[k->kind].n < SLOWSTART_ANSWERS || x->check_vouch)
		return true;
	unsigned other = 1u - k->kind;
	if (start_witnessed(c, k, idx, k->kind) || start_witnessed(c, k, idx, other))
		return true;
	uint32_t slowest[CORE_KIND_COUNT];
	if (slow_from_start(c, k, idx, slowest))
		return false;
	for (unsigned kind = 0; kind < CORE_KIND_COUNT; kind++)
		if (kind == k->kind || slowest[kind] != UINT32_MAX)
			x->start_witness[kind] = slowest[kind] < UINT16_MAX ?
						 (uint16_t)(slowest[kind] + 1) : 0;
	return true;
}

/* Step 4 with place_choices > 1: the rendezvous ranking of c->items
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
		    !owned_ok(c, o, it.endpoint) ||
		    !start_ok(c, k, o, it.endpoint))
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

/* A new key's load (in flight + 1 over weight) and its variance as a
 * count's noise (a count n over weight w varies by sqrt(n) / w). */
static inline double new_load(const struct pool_endpoint *e, double *var)
{
	double l = (e->in_flight + 1.0) * e->inv_weight;
	*var = l * e->inv_weight;
	return l;
}

/* Whether a request sent to e waits for an answer longer than
 * sticky_tolerance x its usual time to headers (its slowest kind's base;
 * prior_ttfb_ms before one; slow_limit), with no answer since: a server that
 * refuses connections sends none, HAProxy drops the refused requests
 * from its count at once, and until its checks mark it DOWN it looks
 * the idlest of all. Only where its answers come at the headers: an
 * answer that is the stream's end (the log line alone) comes as late as
 * the stream runs, and there a refusal is HAProxy's 503 in the log, a
 * breaker failure already. */
static inline bool unanswered(const struct core *c, const struct pool_endpoint *e,
			      uint64_t now_ms)
{
	if (!e->at_headers || e->wait_ms <= e->last_seen_ms || now_ms <= e->wait_ms)
		return false;
	double usual = 0;
	for (unsigned k = 0; k < CORE_KIND_COUNT; k++)
		if (e->base_n[k] > 0 && e->base[k] > usual)
			usual = e->base[k];
	if (usual <= 0)
		usual = c->p.prior_ttfb_ms;
	return (double)(now_ms - e->wait_ms) >
	       slow_limit(c, pool_sig(false, CORE_KIND_PLAIN), usual);
}

/* Whether e's few requests in flight may be taken for spare capacity:
 * an endpoint that fails fast, was left as slow, is judged by
 * exploration or a breaker's probes, has just come back from DOWN, or
 * does not answer looks idle too (leastconn's trap:
 * docs/routing-quality.md, fast failure, flap and down). */
static inline bool trusted_idle(const struct core *c, const struct pool_endpoint *e,
				uint64_t now_ms)
{
	if (e->br.state != CORE_BREAKER_CLOSED || e->suspect != POOL_FIT ||
	    e->explore_on || now_ms < e->rejoin_until_ms || unanswered(c, e, now_ms))
		return false;
	uint32_t ok, fail;
	breaker_counts(&e->br, &c->p, now_ms, &ok, &fail);
	return fail == 0;
}

/* Whether e runs as many requests as it has slots (policy.place_slots):
 * never when its slots are unknown. */
static inline bool slots_busy(const struct pool_endpoint *e)
{
	return e->slots > 0 && e->in_flight >= e->slots;
}

/* Whether e has a slot free: below its slots, or, unknown, none in
 * flight. */
static inline bool slot_free(const struct pool_endpoint *e)
{
	return e->slots > 0 ? e->in_flight < e->slots : e->in_flight == 0;
}

/* policy.place_load_z (params.h): the best ranked candidate (index in
 * items[0, n)) whose load is lower than x's by more than z standard
 * deviations of both counts' noise, UINT32_MAX if none. The first
 * clearly lighter in the key's own order, not the least loaded: agents
 * whose views differ by noise still pick the same one. judged: only
 * candidates with the answers slow_start judges by (of kind k). */
static uint32_t lighter(const struct core *c, uint32_t x, uint32_t n,
			double z, bool judged, unsigned k, uint64_t now_ms)
{
	double vx, lx = new_load(&c->pool.ep[x], &vx);
	double z2 = z * z;
	uint32_t y = UINT32_MAX;
	for (uint32_t i = 0; i < n; i++) {
		const struct pool_endpoint *e = &c->pool.ep[c->items[i].endpoint];
		double vi, d = lx - new_load(e, &vi);
		/* written so that a NaN (a weight near 0) counts as no gap */
		if (!(d > 0 && d * d > z2 * (vx + vi)) || !trusted_idle(c, e, now_ms) ||
		    (judged && e->first[k].n < SLOWSTART_ANSWERS))
			continue;
		if (y == UINT32_MAX || rdv_before(&c->items[i], &c->items[y]))
			y = i;
	}
	return y;
}

/* How far e is over its slots (policy.place_slots): 0 with a slot free
 * (below its slots, or, unknown, none in flight), else the requests
 * that wait for one, plus 1. */
static inline uint32_t slots_over(const struct pool_endpoint *e)
{
	if (slot_free(e))
		return 0;
	return e->slots > 0 ? e->in_flight - e->slots + 1 : UINT32_MAX;
}

/* policy.place_slots (params.h): for a new key whose choice x is busy,
 * the best ranked candidate (index in items[0, n)) with a slot free, or,
 * none free, of those with the fewest requests waiting for one, at least
 * x's slots fewer than x's (x's wait longer by a whole request: at 32
 * slots a queue a few requests longer is not worth the key's rendezvous
 * choice, where it finds its cache again once its entry lapses; the
 * simulated Mooncake trace at 5x, any fewer: hit rate 0.2877 -> 0.2549);
 * UINT32_MAX if none. The second only where other HAProxies
 * that share no placements are neither configured nor shown
 * (routers_several): a wait as short as another request's is worth a
 * key's later turns at another HAProxy only where it saves a whole
 * request, on a free slot (the simulated one-slot fleet behind 2
 * HAProxies with the engines' counts: hit rate -0.0069 with it;
 * docs/policy-v2.md, section 48). */
static uint32_t free_slot(const struct core *c, uint32_t x, uint32_t n,
			  uint64_t now_ms)
{
	bool several = c->p.routers == CORE_ROUTERS_SEVERAL ||
		       (c->p.routers == CORE_ROUTERS_AUTO && !c->alone &&
			routers_several(&c->routers));
	/* Fewer waiting by x's slots at least: x's wait longer by a whole
	 * request (its slots free one each T / slots); several: none. */
	const struct pool_endpoint *ex = &c->pool.ep[x];
	uint32_t over = slots_over(ex);
	uint32_t bar = !several && over > ex->slots ? over - ex->slots + 1 : 1;
	uint32_t y = UINT32_MAX, least = UINT32_MAX;
	for (uint32_t i = 0; i < n; i++) {
		const struct pool_endpoint *e = &c->pool.ep[c->items[i].endpoint];
		uint32_t o = slots_over(e);
		if (o >= bar || o > least || !trusted_idle(c, e, now_ms))
			continue;
		if (o < least || rdv_before(&c->items[i], &c->items[y])) {
			y = i;
			least = o;
		}
	}
	return y;
}

/* Whether a new key is held to place_long_z: a long prompt, and its
 * rendezvous choice x judged by slow_start (lighter() asks the same of
 * the candidate). Long prompts sent by load would pick which prompts an
 * endpoint's first answers time, and slow_start compares those times
 * raw: an endpoint slow from its start that got the short ones passed
 * for a fast one (the quick start's fleet, 300 requests, 64 KiB: its
 * share of new keys 2.4% -> 12.3% without this, 2.0% with it). Its
 * later answers still drift (docs/policy-v2.md, section 14). */
static inline bool place_long(const struct core *c, const struct pick *k,
			      uint32_t x)
{
	return c->p.place_long_kib > 0 && k->size_kib >= c->p.place_long_kib &&
	       c->pool.ep[x].first[k->kind].n >= SLOWSTART_ANSWERS;
}

/* Whether this agent's keys rarely come back: of its last outcomes
 * (affinity_back: at least KEYS_BACK_MIN), under KEYS_BACK_RARE. A new
 * key's rendezvous choice is kept against a lighter candidate so that
 * its later requests, here or at another HAProxy, find it where its
 * cache is; keys that do not come back have nothing there to keep, and
 * go to any lighter candidate (place_load_z's noise allowance is for
 * agreement). One key in 64 back here is at most one in 8 back anywhere
 * for 8 HAProxies sharing nothing (each sees 1 / 8 of a key's later
 * requests): the simulated Mooncake trace keeps 0.04-0.06 of its keys
 * coming back to each of 8 agents (0.33 to one), the mixed workload's
 * unique documents 0.002 (docs/policy-v2.md, section 45). An entry's
 * outcome is known only at its first return or when its idle TTL ends
 * without one, so the first outcomes lean "back": a workload starts on
 * the rendezvous choice. */
#define KEYS_BACK_MIN 64.0
#define KEYS_BACK_RARE (1.0 / 64)

static inline bool keys_rarely_back(const struct core *c)
{
	double n, q = affinity_back(&c->aff, &n);
	return n >= KEYS_BACK_MIN && q < KEYS_BACK_RARE;
}

/* A new key's endpoint: its rendezvous choice x (items[0, n) the
 * ranking, intact), or another by load (place_load_z, place_long_z, any
 * gap where keys rarely come back unless the request names its session:
 * a session id is the client's word that it will), else by slots
 * (place_slots), if it can take the key as x could. A key
 * with requests placed before its first answer (placed: its endpoint,
 * else UINT32_MAX) keeps the rendezvous choice: moving its next request
 * too would split it, and sending it after the first whatever the load
 * cost independent agents their agreement (Mooncake, 4 agents 0.2961 ->
 * 0.2945). */
static uint32_t place_by_load(struct core *c, const struct pick *k,
			      const struct owned_view *o, uint32_t placed,
			      uint32_t x, uint32_t n, bool session,
			      uint64_t now_ms, struct core_trace *t)
{
	if (placed != UINT32_MAX)
		return x;
	bool by_slots = false;
	bool lng = place_long(c, k, x);
	bool rare = !lng && !session && c->place_z > 0 && keys_rarely_back(c);
	uint32_t y = UINT32_MAX;
	if (lng || c->place_z > 0)
		y = lighter(c, x, n,
			    lng ? c->p.place_long_z : rare ? 0 : c->place_z,
			    lng, k->kind, now_ms);
	if (y == UINT32_MAX && c->p.place_slots && slots_busy(&c->pool.ep[x])) {
		y = free_slot(c, x, n, now_ms);
		by_slots = true;
	}
	if (y == UINT32_MAX)
		return x;
	y = c->items[y].endpoint;
	if (!placeable(c, y, k, now_ms, t) || !owned_ok(c, o, y) ||
	    !start_ok(c, k, o, y))
		return x;
	if (t != NULL) {
		t->by_load = !by_slots;
		t->by_long = !by_slots && lng;
		t->by_rare = !by_slots && rare;
		t->by_slots = by_slots;
		t->by_wait = by_slots && !slot_free(&c->pool.ep[y]);
	}
	return y;
}

/* Whether e may take the request as a warm entry's endpoint: the rules
 * an affinity entry is held to (step 3), a hint's too. */
static inline bool warm_usable(struct core *c, const struct view *v,
			       uint32_t idx, const struct pick *k)
{
	struct pool_endpoint *e = &c->pool.ep[idx];
	return view_has(v, idx) && e->br.state == CORE_BREAKER_CLOSED &&
	       fast_enough(c, e, k) && within_warm_bound(c, e, k) &&
	       start_keeps(c, k, idx);
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

/* A key's twin (struct core, twins): the second endpoint it is warm on,
 * when v has it and it may take the key as a warm entry's endpoint would;
 * UINT32_MAX otherwise. *leaving: the twin named is warm_idx itself, the
 * key being spread from it (its new endpoint has not answered yet). */
static uint32_t twin_of(struct core *c, const struct view *v, uint64_t akey,
			uint32_t warm_idx, const struct pick *k, uint64_t now_ms,
			bool *leaving)
{
	uint32_t ep, gen;
	uint64_t last;
	*leaving = false;
	if (c->twins.used == 0 ||
	    !affinity_peek(&c->twins, akey, now_ms, &ep, &gen, &last))
		return UINT32_MAX;
	if (ep == warm_idx) {
		*leaving = gen == c->pool.ep[warm_idx].gen;
		return UINT32_MAX;
	}
	const struct pool_endpoint *e = pool_get(&c->pool, (int)ep);
	return e != NULL && e->gen == gen && warm_usable(c, v, ep, k) ?
	       ep : UINT32_MAX;
}

/* Step 3c (policy.hot_share): a key warm on its entry's endpoint warm_idx
 * (usable: it may take the request, warm_usable) and on a twin goes to
 * the cheaper of the two that can take it; the returned endpoint, or
 * UINT32_MAX. *spread is set when the key should leave warm_idx through
 * the ranking instead, to warm a second endpoint: it has no usable twin,
 * it is hot (share, of the decisions, over hot_share x warm_idx's part
 * of the weight), its turns go back (a prefix shared by many callers,
 * not one conversation), and warm_idx, which could take it, is over the
 * load bound (not only the warm slack's); *again, when an earlier
 * request was spread so and the endpoint it went to has not answered
 * yet. */
static uint32_t twin_step(struct core *c, const struct view *v,
			  uint64_t akey, uint32_t warm_idx, bool usable,
			  bool shared, double share, const struct pick *k,
			  uint64_t now_ms, bool *spread, bool *again,
			  struct core_trace *t)
{
	*spread = false;
	uint32_t tw = twin_of(c, v, akey, warm_idx, k, now_ms, again);
	const struct pool_endpoint *e = &c->pool.ep[warm_idx];
	if (t != NULL) {
		t->hot_share = share;
		t->twin_endpoint = tw == UINT32_MAX ? -1 : (int)tw;
	}
	if (tw != UINT32_MAX)
		return !usable || p2c_cost(c, &c->pool.ep[tw], k, now_ms) <
				  p2c_cost(c, e, k, now_ms) ? tw : UINT32_MAX;
	*spread = usable && shared &&
		  share > c->p.hot_share * e->weight / v->total_w &&
		  !within_bound(c, e, k);
	if (t != NULL)
		t->twin_spread = *spread;
	return UINT32_MAX;
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

/* The home of a key whose entry is on warm_idx, of a worse tier (struct
 * core, homes), when v has it and it may take the key as a warm entry's
 * endpoint would; UINT32_MAX otherwise. A peek: explained decisions are
 * the decisions. */
static uint32_t home_of(struct core *c, const struct view *v, uint64_t akey,
			uint32_t warm_idx, const struct pick *k, uint64_t now_ms)
{
	uint32_t ep, gen;
	uint64_t last;
	if (!affinity_peek(&c->homes, akey, now_ms, &ep, &gen, &last))
		return UINT32_MAX;
	const struct pool_endpoint *e = pool_get(&c->pool, (int)ep);
	return e != NULL && e->gen == gen &&
	       e->tier < c->pool.ep[warm_idx].tier && warm_usable(c, v, ep, k) ?
	       ep : UINT32_MAX;
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
	c->decide_kib = req->size_kib;
	/* 1. The affinity key (given: the caller prefetched its slot). */
	if (req->identity != 0) {
		out->has_akey = req->identity == 2;
		if (out->has_akey)
			out->akey = req->akey;
	} else {
		out->has_akey = core_identity(c, req, &out->akey);
	}
	/* Its turn, which its entry keeps (core_explain's peek changes
	 * nothing). */
	c->decide_turn = out->has_akey && t == NULL ? req->turn : 0;
	c->decide_window = false;

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

	/* 2. Candidates. */
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
		/* 2a. Only breakers exclude them all: the first to reopen.
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
	/* 2b. Failover tiers: the best tier with a candidate (and the next
	 * while it is full), before everything else. */
	struct view *all = v;
	if (v->tier_lo != v->tier_hi)
		v = tier_view(c, v, model, now_ms);

	/* 2c. Cold endpoints borrow the median of the warm ones (p2c trusts
	 * its own EWMA sooner: p2c_ewma). */
	struct pick k = {
		.v = v,
		.kind = req->stream ? CORE_KIND_STREAM : CORE_KIND_PLAIN,
		.size_kib = req->size_kib,
	};
	pick_signals(c, v, &k);
	if (t != NULL) {
		memcpy(t->use, k.use, sizeof(t->use));
		memcpy(t->median, k.median, sizeof(t->median));
		memcpy(t->tolerated, k.tolerated, sizeof(t->tolerated));
	}

	if (!out->has_akey) { /* step 5 alone, or a probe (explore.h) */
		uint32_t x = explore_pick(c, &k, 0, UINT32_MAX, now_ms);
		commit(c, x != UINT32_MAX ? x : p2c(c, &k, rng, now_ms, t),
		       CORE_REASON_P2C, now_ms, out);
		return;
	}
	/* The key's share of the keyed decisions (hot.h), for step 3c,
	 * which never spreads a session (one conversation): every keyed
	 * decision counts in the total, a session's key takes no place. */
	bool twin_rule = c->p.hot_share > 0 && !req->session.present;
	double share = 0;
	if (twin_rule)
		share = t != NULL ? hot_peek(&c->hot, out->akey, now_ms)
				  : hot_note(&c->hot, out->akey, now_ms);
	else if (c->p.hot_share > 0 && t == NULL)
		hot_tick(&c->hot, now_ms);

	/* 3. The key's warm entry, if any. A request's turn says more
	 * about the rung its key is on (turn_keyed, prior_window). */
	enum core_rung rung = CORE_RUNG_SESSION;
	const struct core_id *kid = req->turn != 0 ? ladder_first(c, req, &rung) : NULL;
	uint32_t warm_idx = UINT32_MAX;
	uint32_t ep, gen;
	uint64_t warm_ms = 0;
	uint16_t prev_turn = 0;
	bool shared = false;
	if (t != NULL ? affinity_peek_shared(&c->aff, out->akey, now_ms, &ep, &gen,
					     &warm_ms, &shared)
		      : affinity_get_turn(&c->aff, out->akey, now_ms, c->decide_turn,
					  &ep, &gen, &warm_ms, &prev_turn, &shared)) {
		const struct pool_endpoint *e = pool_get(pool, (int)ep);
		if (e != NULL && e->gen == gen)
			warm_idx = ep;
		else if (t == NULL) /* its endpoint was removed */
			affinity_remove(&c->aff, out->akey, ep);
		if (t != NULL)
			trace_entry_found(t, ep, -1, warm_ms, now_ms,
					  warm_idx == UINT32_MAX);
	}
	if (warm_idx == UINT32_MAX && c->alone) {
		/* 3'. The conversation's previous turn, under a shorter
		 * window (prior_window), where this HAProxy routes its turns
		 * alone: behind several, another's sees only its own, and
		 * the two would keep the conversation in two places. */
		int w = prior_window(c, req, kid, rung, now_ms, &ep, &gen, &warm_ms);
		const struct pool_endpoint *e = w < 0 ? NULL : pool_get(pool, (int)ep);
		if (e != NULL && e->gen == gen) {
			warm_idx = ep;
			c->decide_window = t == NULL;
			if (t != NULL)
				trace_entry_found(t, ep, w, warm_ms, now_ms, false);
		}
	}
	/* The turns say whether other HAProxies route this key's requests
	 * only where a conversation keeps its key (turn_keyed). */
	if (c->decide_turn != 0 && turn_keyed(req, kid, rung) &&
	    routers_turn(&c->routers, prev_turn, c->decide_turn,
			 routers_caller(req->caller.present, req->caller.hash),
			 now_ms))
		routers_apply(c); /* a new verdict: the gap and TTL in force */
	/* 3a. A newer shared hint goes first; a decision of our own, so
	 * that its success (feedback or log line) enters the map. */
	if (req->hint.present) {
		uint32_t h = UINT32_MAX;
		out->hint = hint_step(c, &req->hint, out->akey, &k, warm_idx,
				      warm_ms, now_ms, &h);
		c->hints[out->hint]++;
		if (req->hint.writer == CORE_HINT_WRITER_OWN &&
		    out->hint != CORE_HINT_MISMATCH)
			c->hints_own++;
		if (out->hint == CORE_HINT_USED) {
			commit(c, h, CORE_REASON_AFFINITY, now_ms, out);
			c->pending[out->akey & (CORE_PENDING_SLOTS - 1)] =
				(struct pending){ out->akey, h + 1, pool->ep[h].gen };
			return;
		}
	}
	/* 3b. A warm hit: the entry's endpoint can take the request. */
	if (warm_idx != UINT32_MAX && t != NULL) {
		trace_entry(c, v, warm_idx, &k, t);
		t->entry_start = start_keeps(c, &k, warm_idx);
	}
	if (warm_idx != UINT32_MAX) {
		/* back to an endpoint that recovered, or a probe of one that
		 * may have (explore.h) */
		uint32_t r = explore_reclaiming(&c->explore) ?
			     explore_reclaim(c, &k, out->akey, warm_idx, now_ms) :
			     UINT32_MAX;
		if (r == UINT32_MAX)
			r = explore_pick(c, &k, out->akey, warm_idx, now_ms);
		if (r != UINT32_MAX) {
			commit(c, r, CORE_REASON_HASH, now_ms, out);
			return;
		}
	}
	/* 3c. A hot key warm on two endpoints: the cheaper one; on one
	 * that is over the load bound, off to the ranking, to warm a second
	 * (twin_step). */
	bool usable = warm_idx != UINT32_MAX && warm_usable(c, v, warm_idx, &k);
	bool spread = false;
	if (warm_idx != UINT32_MAX && twin_rule) {
		bool again;
		uint32_t tw = twin_step(c, v, out->akey, warm_idx, usable, shared,
					share, &k, now_ms, &spread, &again, t);
		if (tw != UINT32_MAX) {
			if (t == NULL)
				c->twin_sends++;
			commit(c, tw, CORE_REASON_AFFINITY, now_ms, out);
			return;
		}
		if (spread && !again && t == NULL) {
			c->twin_spreads++;
			affinity_put(&c->twins, out->akey, warm_idx,
				     pool->ep[warm_idx].gen, now_ms, 0);
		}
	}
	if (usable && !spread) {
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
	/* Back from a worse tier: to its home, the endpoint it was on in a
	 * better one (learn.c, homes_note), when it can take the key. */
	if (warm_idx != UINT32_MAX && c->tiered && !view_has(v, warm_idx)) {
		uint32_t h = home_of(c, v, out->akey, warm_idx, &k, now_ms);
		if (t != NULL)
			t->home_endpoint = h == UINT32_MAX ? -1 : (int)h;
		if (h != UINT32_MAX) {
			commit(c, h, CORE_REASON_AFFINITY, now_ms, out);
			return;
		}
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

	/* 4. Rendezvous ranking, walked until one is healthy and within
	 * the load bound (with place_choices > 1, place_cheapest). */
	struct owned_view ov = { .placed = UINT32_MAX }, *o = NULL;
	/* Requests of a key sent together before its first answer (no
	 * entry yet) are one key: counted once, never passed over where the
	 * first of them went, and not moved by place_by_load. A slot that
	 * names the key's warm endpoint is its answered placement (feedback
	 * adds the entry and leaves the slot): that endpoint is being left,
	 * and is judged as any other. */
	const struct pending *pd = &c->pending[out->akey & (CORE_PENDING_SLOTS - 1)];
	if (pd->akey == out->akey && pd->endpoint != 0 &&
	    pd->endpoint != PENDING_ANY && pd->endpoint - 1 != warm_idx &&
	    pool->ep[pd->endpoint - 1].gen == pd->gen)
		ov.placed = pd->endpoint - 1;
	if (c->p.owned_bound >= 0) {
		o = &ov;
		owned_start(c, o, now_ms);
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
	if (warm_idx == UINT32_MAX) { /* a new key: a probe? */
		uint32_t x = explore_pick(c, &k, out->akey, UINT32_MAX, now_ms);
		if (x != UINT32_MAX) {
			place_commit(c, x, CORE_REASON_HASH, o, now_ms, out);
			return;
		}
	}
	if (c->p.place_choices > 1 && v->n > 1) {
		uint32_t idx = place_cheapest(c, &k, best, o, now_ms, t);
		if (idx != UINT32_MAX) {
			place_commit(c, idx, CORE_REASON_HASH, o, now_ms, out);
			return;
		}
	} else {
		/* The first choice usually takes it: only then is a heap
		 * built. One over owned_bound, or slow from its start, is
		 * passed over, but kept in case none else can take the key
		 * (then the former rule's choice). */
		uint32_t spare = UINT32_MAX;
		struct rdv_item it = c->items[best];
		if (placeable(c, it.endpoint, &k, now_ms, t)) {
			if (owned_ok(c, o, it.endpoint) &&
			    start_ok(c, &k, o, it.endpoint)) {
				/* A new key: by load if clearly lighter.
				 * Behind several HAProxies, a later turn's
				 * key without an entry was placed by
				 * another: its rendezvous choice is the
				 * one both can have made. */
				bool later = !c->alone && req->turn >= 2;
				uint32_t x = warm_idx == UINT32_MAX && !later ?
					     place_by_load(c, &k, o, ov.placed,
							   it.endpoint, v->n,
							   req->session.present,
							   now_ms, t) :
					     it.endpoint;
				if (t != NULL)
					t->by_turn = warm_idx == UINT32_MAX && later;
				place_commit(c, x, CORE_REASON_HASH, o, now_ms, out);
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
			if (owned_ok(c, o, it.endpoint) &&
			    start_ok(c, &k, o, it.endpoint)) {
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

	/* 5. Spill. */
	place_commit(c, p2c(c, &k, rng, now_ms, t), CORE_REASON_SPILL, o, now_ms,
		     out);
}

void core_decide(struct core *c, const struct core_request *req,
		 uint64_t now_ms, struct core_rng *rng,
		 struct core_decision *out)
{
	decide(c, req, now_ms, rng, out, NULL);
}
