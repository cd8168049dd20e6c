/* pick.h - how one decision judges its candidates: the medians it reads, the load bounds, speed and p2c's cost. */
#ifndef WARMLANE_CORE_PICK_H
#define WARMLANE_CORE_PICK_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core_impl.h"

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
	uint32_t size_kib; /* core_request.size_kib */
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
 * sends a slow one its full share of anonymous requests
 * (docs/routing-quality.md). */
#define P2C_OWN_SAMPLES 3u

/* eff_ewma as p2c sees it: the endpoint's own from P2C_OWN_SAMPLES on. */
static inline double p2c_ewma(const struct core *c, const struct pool_endpoint *e,
			      const struct pick *k, unsigned s)
{
	unsigned sig = k->sig[s];
	return e->samples[sig] >= P2C_OWN_SAMPLES || warm(c, e, sig) ?
	       e->ewma[sig] : k->median[s];
}

/* The in-flight requests e may always hold (step 4's bound):
 * load_floor_e2e where k scores end-to-end times and e is warm on them,
 * else load_floor; times floor_scale where the engine counts e behind
 * several HAProxies. The floor is this agent's own: HAProxy's counts are
 * its share of the load, the engine's the whole, and on the whole one
 * agent's floor is met where no agent's share would meet it: the walks
 * of agents that see a conversation's turns minutes apart then differ
 * (docs/policy-v2.md, section 32). */
static inline uint32_t floor_base(const struct core *c,
				  const struct pool_endpoint *e,
				  const struct pick *k)
{
	uint32_t f = c->p.load_floor;
	if (c->p.load_floor_e2e > f && k->use[1] && warm(c, e, k->sig[1]))
		f = c->p.load_floor_e2e;
	return f;
}

static inline double bound_floor(const struct core *c,
				 const struct pool_endpoint *e,
				 const struct pick *k)
{
	uint32_t f = floor_base(c, e, k);
	return e->engine_fresh ? f * c->floor_scale : f;
}

/* A slow server's queue against the fair share (queued_by, on the load)
 * and against the candidates' time per request (queued). A server that
 * sends its headers before prefill (vLLM's) and slows down shows nothing
 * but its queue without the log input (docs/policy-v2.md, section 22:
 * 1.5 costs healthy hit rates, 2.5 catches half as much). */
#define QUEUE_FACTOR 2.0

/* Whether e holds a slow server's queue on average (load_avg): over
 * QUEUE_FACTOR times its fair share of the candidates' averages, and
 * over slower times their time per request (average in flight over
 * average decision rate, Little's law), so that a popular key's
 * endpoint, whose queue comes with its rate, is not one. */
static inline bool queued_by(const struct pool_endpoint *e, const struct view *v,
			     double slower)
{
	double l = e->load_avg;
	return l * v->total_w > QUEUE_FACTOR * v->total_load_avg * e->weight &&
	       l * v->total_rate_avg > slower * v->total_load_avg * e->rate_avg;
}

/* queued_by QUEUE_FACTOR: no warm slack (within_warm_bound). */
static inline bool queued(const struct pool_endpoint *e, const struct view *v)
{
	return queued_by(e, v, QUEUE_FACTOR);
}

/* Whether e's load floor no longer holds: a queue of a request or more
 * on average, its time per request over sticky_tolerance x the
 * candidates' (the ratio a warm key leaves a slower endpoint at; 2x
 * caught healthy chat endpoints now and then). Under the floor a slowed
 * server kept its last sessions and the new keys hashed to it however
 * slow it was (docs/policy-v2.md, section 23); below one request the
 * averages are noise (each of 4 agents counts a quarter of the load). */
static inline bool floor_lifted(const struct core *c, const struct pool_endpoint *e,
				const struct view *v)
{
	return e->load_avg >= 1.0 && queued_by(e, v, c->p.sticky_tolerance);
}

/* Step 4's bound: in_flight + 1 <= ceil(load_factor x (total + 1) x w /
 * W), or in_flight under bound_floor (a floor so that light load never
 * scatters keys) unless floor_lifted. */
static inline bool within_bound(const struct core *c,
				const struct pool_endpoint *e,
				const struct pick *k)
{
	/* load_floor first: bound_floor's test is the rarer one */
	if ((e->in_flight < c->p.load_floor ||
	     (double)e->in_flight < bound_floor(c, e, k)) && !floor_lifted(c, e, k->v))
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
 * cache away, so a warm entry tolerates a few requests of load noise;
 * on an engine's count behind several HAProxies, times floor_scale as
 * the floor).
 * No slack while e's HAProxy check is slow against its peers'
 * (explore_check), nor while it holds a slow server's queue (queued):
 * its load over the bound is then its slowdown's, not noise
 * (docs/policy-v2.md, sections 18 and 22). */
static inline bool within_warm_bound(const struct core *c,
				     const struct pool_endpoint *e,
				     const struct pick *k)
{
	if (within_bound(c, e, k))
		return true;
	if (e->check_slow || queued(e, k->v))
		return false;
	double fair = ((double)k->v->total_if + 1) * e->weight / k->v->total_w;
	double slack = c->p.warm_slack * (e->engine_fresh ? c->floor_scale : 1);
	return (double)e->in_flight + 1 <=
	       ceil((fair + slack) * (1 - 1e-12));
}

/* e is left as slow; left_n counts the times it was (a verdict
 * "recovered" it undoes ends that verdict's reclaim: explore_reclaim). */
static inline void mark_left(struct pool_endpoint *e)
{
	if (e->suspect != POOL_LEFT)
		e->left_n++;
	e->suspect = POOL_LEFT;
}

/* Whether e is fit to keep or take a key: on every signal in use, its
 * EWMA is within sticky_tolerance of the candidates' median (slow_limit:
 * two candidates' is the other's EWMA, view_median_peer); for the time
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
	if (slow_run_left(c, e) && !e->check_vouch) {
		mark_left(e); /* queue_judge's run */
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
		    e->ewma[sig] <= slow_limit(c, sig, e->base[sig]))
			continue;
		if (e->check_vouch)
			continue; /* kept: a health check found it recovered */
		mark_left(e);
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

/* p2c_cost with the latency given. */
static inline double p2c_cost_at(const struct core *c, const struct pool_endpoint *e,
				 double latency, uint64_t now_ms)
{
	uint32_t ok, fail;
	breaker_counts(&e->br, &c->p, now_ms, &ok, &fail);
	double rate = (ok + 1.0) / (ok + fail + 1.0);
	double cost = (e->in_flight + 1.0) * latency / (e->weight * rate);
	if (c->p.cost_weight_per_ms > 0)
		cost += e->cost_per_mtok / c->p.cost_weight_per_ms;
	return cost;
}

/* Predicted cost for power of two choices. */
static inline double p2c_cost(const struct core *c, const struct pool_endpoint *e,
			      const struct pick *k, uint64_t now_ms)
{
	return p2c_cost_at(c, e, p2c_latency(c, e, k), now_ms);
}

/* The costs power of two choices compares for its pair a, b: each one's
 * p2c_cost, the two latencies taken as the lower one where they are
 * within p2c_margin of each other (params.h). Returns whether they
 * were. */
static inline bool p2c_costs(const struct core *c, const struct pick *k,
			     const struct pool_endpoint *a,
			     const struct pool_endpoint *b, uint64_t now_ms,
			     double cost[2])
{
	double la = p2c_latency(c, a, k), lb = p2c_latency(c, b, k);
	double m = 1 + c->p.p2c_margin;
	bool equal = la <= lb * m && lb <= la * m;
	if (equal)
		la = lb = la < lb ? la : lb;
	cost[0] = p2c_cost_at(c, a, la, now_ms);
	cost[1] = p2c_cost_at(c, b, lb, now_ms);
	return equal;
}

/* explain.c: each step noted in core_explain's trace (t never NULL). */
void trace_candidates(const struct core *c, const struct view *v, int model,
		      uint64_t now_ms, struct core_trace *t);
void trace_rank(const struct core *c, uint32_t n, struct core_trace *t);
void trace_walked(const struct core *c, const struct pick *k, uint32_t idx,
		  bool fast, uint64_t now_ms, struct core_trace *t);
void trace_p2c(const struct core *c, const struct pick *k, uint32_t a,
	       uint32_t b, uint64_t now_ms, struct core_trace *t);
/* Step 3: the entry found for the key, its own (window -1) or a shorter
 * prefix window's (prior_window), at ep, refreshed at last_ms. */
void trace_entry_found(struct core_trace *t, uint32_t ep, int window,
		       uint64_t last_ms, uint64_t now_ms, bool stale);
void trace_entry(struct core *c, const struct view *v, uint32_t idx,
		 const struct pick *k, struct core_trace *t);

#endif
