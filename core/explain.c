/* explain.c - core_explain: one decision run with its trace, every state it touched restored. */
#include "pick.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- explain's trace (core_explain; t is NULL on every other call) ---- */

/* Step 2 for t: each endpoint of the pool, a candidate when v holds it,
 * else the first exclusion of view_build's order that applies now. */
void trace_candidates(const struct core *c, const struct view *v,
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

/* Step 4 for t: the whole ranking of c->items[0..n), best first (an
 * insertion sort of at most CORE_TRACE_MAX: explain only). */
void trace_rank(const struct core *c, uint32_t n, struct core_trace *t)
{
	t->ranked = true;
	t->load_factor = c->p.load_factor;
	t->load_floor = c->p.load_floor;
	t->load_floor_e2e = c->p.load_floor_e2e;
	t->floor_scale = c->floor_scale;
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
void trace_walked(const struct core *c, const struct pick *k,
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
		r->floor = (uint32_t)ceil(bound_floor(c, e, k));
		r->floor_base = floor_base(c, e, k);
		r->floor_lifted = floor_lifted(c, e, k->v);
		r->cost = p2c_cost(c, e, k, now_ms);
		return;
	}
}

void trace_p2c(const struct core *c, const struct pick *k, uint32_t a,
	       uint32_t b, uint64_t now_ms, struct core_trace *t)
{
	t->p2c = true;
	t->p2c_a = (int)a;
	t->p2c_b = (int)b;
	double cost[2];
	t->p2c_equal = p2c_costs(c, k, &c->pool.ep[a], &c->pool.ep[b], now_ms, cost);
	t->p2c_cost_a = cost[0];
	t->p2c_cost_b = cost[1];
	t->p2c_check_a = c->pool.ep[a].check_slow;
	t->p2c_check_b = c->pool.ep[b].check_slow;
}

void trace_entry_found(struct core_trace *t, uint32_t ep, int window,
		       uint64_t last_ms, uint64_t now_ms, bool stale)
{
	t->entry = true;
	t->entry_window = window;
	t->entry_endpoint = (int)ep;
	t->entry_idle_ms = now_ms > last_ms ? now_ms - last_ms : 0;
	t->entry_stale = stale;
}

/* Step 3 for t: warm_usable's conditions one by one. */
void trace_entry(struct core *c, const struct view *v, uint32_t idx,
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
		saved = aligned_alloc(_Alignof(struct pool_endpoint),
				      n * sizeof(*saved));
		if (saved == NULL)
			return -ENOMEM;
		memcpy(saved, pool->ep, n * sizeof(*saved));
	}
	uint64_t version = c->version, view_clock = c->view_clock;
	struct owned_clock owned = c->owned;
	struct explore explore = c->explore;
	uint64_t decisions[CORE_REASON_COUNT];
	memcpy(decisions, c->decisions, sizeof(decisions));
	uint64_t akey = 0;
	bool has_akey = core_identity(c, req, &akey);
	struct pending pend = c->pending[akey & (CORE_PENDING_SLOTS - 1)];
	struct asked asked = c->asked[akey & (CORE_PENDING_SLOTS - 1)];
	uint64_t hints[CORE_HINT_COUNT];
	memcpy(hints, c->hints, sizeof(hints));
	uint64_t hints_own = c->hints_own;

	*t = (struct core_trace){ .model = MODEL_NONE, .entry_endpoint = -1,
				  .entry_window = -1,
				  .home_endpoint = -1, .twin_endpoint = -1,
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
	c->explore = explore;
	memcpy(c->decisions, decisions, sizeof(decisions));
	c->pending[akey & (CORE_PENDING_SLOTS - 1)] = pend;
	c->asked[akey & (CORE_PENDING_SLOTS - 1)] = asked;
	memcpy(c->hints, hints, sizeof(hints));
	c->hints_own = hints_own;
	for (int k = 0; k < VIEW_SLOTS; k++)
		c->views[k].valid = false;
	return 0;
}
