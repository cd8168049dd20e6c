/* view.c - the candidate sets of step 2: built by a pass over the pool, cached per model and tier, filtered by artefact. */
#include "core_impl.h"

#include <string.h>

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Adds slot i, endpoint e, to v's candidates and their totals. */
static inline void view_add(const struct core *c, struct view *v, uint32_t i,
			    const struct pool_endpoint *e)
{
	v->cand[v->n++] = i;
	v->member[i / 64] |= 1ull << (i % 64);
	v->total_w += e->weight;
	v->total_if += e->in_flight;
	v->total_load_avg += e->load_avg;
	v->total_rate_avg += e->rate_avg;
	for (int k = 0; k < POOL_SIGNALS; k++)
		v->n_warm[k] += warm(c, e, (unsigned)k);
}

/* Builds v, the candidate set of model at now_ms: step 2 of the decision
 * (exclusions, cheapest and most permanent first), and the earliest time
 * at which one of its time-based exclusions or warm states ends. */
void view_build(struct core *c, struct view *v, int model,
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
	v->total_load_avg = 0;
	v->total_rate_avg = 0;
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
		view_add(c, v, i, e);
	}
	if (changed)
		c->version++; /* other views saw the old states */
	v->version = c->version;
	v->valid = true;
}

/* The median EWMA of signal sig over the warm candidates of v: a walk of
 * the EWMA order up to its middle, cached until an EWMA of sig changes.
 * With no warm candidate, the prior. */
double view_median(struct core *c, struct view *v, unsigned sig)
{
	uint32_t n = v->n_warm[sig];
	if (n == 0)
		return c->p.prior_ttfb_ms;
	if (v->median_version[sig] == c->ewma_version[sig])
		return v->median[sig];
	uint32_t lo_at = (n - 1) / 2, hi_at = n / 2, seen = 0;
	double lo = 0, med = 0;
	const uint32_t *o = c->order[sig];
	const double *oe = c->order_ewma[sig]; /* e->ewma[sig] */
	for (uint32_t j = 0; j < c->order_n; j++) {
		const struct pool_endpoint *e = &c->pool.ep[o[j]];
		if (!view_has(v, o[j]) || !warm(c, e, sig))
			continue;
		if (seen == lo_at)
			lo = oe[j];
		if (seen == hi_at) {
			med = (lo + oe[j]) / 2;
			break;
		}
		seen++;
	}
	v->median[sig] = med;
	/* Two candidates: the slower one's peer is the faster one (lo). */
	v->median_peer[sig] = n == 2 && v->n == 2 ? lo : med;
	v->median_version[sig] = c->ewma_version[sig];
	return med;
}

double view_median_peer(struct core *c, struct view *v, unsigned sig)
{
	if (v->n_warm[sig] == 0)
		return c->p.prior_ttfb_ms;
	view_median(c, v, sig);
	return v->median_peer[sig];
}

/* policy.artefact_affinity: v's candidates of artefact a (or of none
 * known) into c->art_view, its totals recomputed and its medians left to
 * be computed again. Returns the filtered view (its n may be 0), or v when
 * none differs. O(candidates), no allocation. */
struct view *artefact_view(struct core *c, struct view *v, uint64_t a)
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
	f->total_load_avg = 0;
	f->total_rate_avg = 0;
	memset(f->n_warm, 0, sizeof(f->n_warm));
	for (int k = 0; k < POOL_SIGNALS; k++)
		f->median_version[k] = UINT64_MAX; /* never a current version */
	for (uint32_t i = 0; i < v->n; i++) {
		uint32_t s = v->cand[i];
		const struct pool_endpoint *e = &c->pool.ep[s];
		if (e->artefact != 0 && e->artefact != a)
			continue;
		view_add(c, f, s, e);
	}
	f->valid = false; /* not a cached view: set_in_flight leaves it */
	return f;
}

/* Step 2b, failover tiers (tier.h): the view of the tiers all's
 * decision may use, all itself when that is every tier it has. Notes
 * which tiers are up for tier_stays. */
struct view *tier_view(struct core *c, struct view *all, int model,
		       uint64_t now_ms)
{
	tier_note(&all->tstate, &all->tiers, c->p.tier_spill, now_ms);
	unsigned lim = tier_limit(&all->tiers, c->p.tier_spill);
	if (lim == 0 || lim >= all->tier_hi)
		return all;
	return view_get(c, model, lim, now_ms);
}
