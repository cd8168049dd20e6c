/* sim_pol_warmlane.c - the warmlane policy: the real routing core (core/) behind the simulator's policy interface. */
#include "sim_fleet.h"
#include "sim_hints.h"
#include "sim_policy.h"

#include "budget.h"
#include "core.h"
#include "trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wl {
	struct core *core;
	struct core_rng rng;
	uint32_t n;
	int *idx;        /* simulator endpoint -> core index, -1 while not in the pool */
	int *rev;        /* core index -> simulator endpoint */
	uint32_t rev_len;
	char (*names)[40];
	/* A log line arrived (--log-ingest): as the agent's route.c, feedback
	 * then says that the end of each stream will be told. */
	bool log_lines;
	/* The agent's retry budget (route.c), one backend: fed by the log
	 * lines' retries, read at each decision. */
	struct budget budget;
	struct budget_params budget_p;
	/* --shared-hints: the HAProxies' shared table, and this agent. */
	struct sim_hints *hints;
	uint32_t agent;
	uint64_t peers_ms; /* HAProxy's peers last asked (agent/runtime.c) */
	const struct sim_fleet_cfg *cfg; /* the endpoints' failover tiers */
	/* --debug-tail: each decision explained first (core_explain, which
	 * puts the core back), and what it says of the key's entry. */
	bool explain;
	const char *detail;
};

static void wl_destroy(void *st)
{
	struct wl *s = st;
	if (!s)
		return;
	core_destroy(s->core);
	free(s->idx);
	free(s->rev);
	free(s->names);
	free(s);
}

/* Adds simulator endpoint e to the core's pool, as the agent does when
 * HAProxy's server list shows a server. 0 or -errno. */
static int wl_add(struct wl *s, uint32_t e, double weight, double cost, uint64_t now_ms)
{
	struct core_endpoint_config cfg = {
		.backend = "llm",
		.server = s->names[e],
		/* one upstream key each: a 401 fault refuses it (key probes) */
		.key_id = "k",
		.weight = weight,
		.cost_per_mtok = cost,
		/* as an operator configures it (warmlane.yaml's slots) */
		.slots = e < s->cfg->nep ? s->cfg->ep[e].max_running : 0,
		.tier = e < s->cfg->nep ? s->cfg->ep[e].tier : 0,
	};
	int i = core_endpoint_add(s->core, &cfg, now_ms);
	if (i < 0)
		return i;
	if ((uint32_t)i >= s->rev_len) {
		uint32_t nlen = s->rev_len * 2 > (uint32_t)i + 1 ? s->rev_len * 2 : (uint32_t)i + 1;
		int *r = realloc(s->rev, nlen * sizeof(*r));
		if (!r)
			return -1;
		for (uint32_t k = s->rev_len; k < nlen; k++)
			r[k] = -1;
		s->rev = r;
		s->rev_len = nlen;
	}
	s->idx[e] = i;
	s->rev[i] = (int)e;
	return 0;
}

static void *wl_create(const struct sim_policy_env *env)
{
	struct wl *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	uint32_t n = env->nep ? env->nep : 1;
	s->n = env->nep;
	s->cfg = env->cfg;
	s->idx = malloc(n * sizeof(*s->idx));
	s->names = calloc(n, sizeof(*s->names));
	struct core_params p;
	core_params_defaults(&p);
	p.key_probe = true; /* answered at each poll: wl_poll */
	/* --set overrides: the parameters a policy change would touch */
	struct {
		const char *name;
		double *d;
		uint64_t *ms;
	} known[] = {
		{ "sticky_tolerance", &p.sticky_tolerance, NULL },
		{ "load_factor", &p.load_factor, NULL },
		{ "ewma_alpha", &p.ewma_alpha, NULL },
		{ "prior_ttfb_ms", &p.prior_ttfb_ms, NULL },
		{ "cost_weight_per_ms", &p.cost_weight_per_ms, NULL },
		{ "owned_bound", &p.owned_bound, NULL },
		{ "hot_share", &p.hot_share, NULL },
		{ "place_load_z", &p.place_load_z, NULL },
		{ "alone_place_load_z", &p.alone_place_load_z, NULL },
		{ "alone_affinity_ttl_ms", NULL, &p.alone_affinity_ttl_ms },
		{ "place_long_z", &p.place_long_z, NULL },
		{ "slow_start", &p.slow_start, NULL },
		{ "explore_share", &p.explore_share, NULL },
		{ "p2c_margin", &p.p2c_margin, NULL },
		{ "breaker_failure_ratio", &p.breaker_failure_ratio, NULL },
		{ "affinity_ttl_ms", NULL, &p.affinity_ttl_ms },
		{ "idle_reset_ms", NULL, &p.idle_reset_ms },
		{ "owned_half_life_ms", NULL, &p.owned_half_life_ms },
		{ "breaker_cooldown_ms", NULL, &p.breaker_cooldown_ms },
		{ "rate_limit_cooldown_ms", NULL, &p.rate_limit_cooldown_ms },
		{ "tier_spill", &p.tier_spill, NULL },
		{ "tier_return_ms", NULL, &p.tier_return_ms },
	};
	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
		double d;
		if (sim_policy_param(env, known[k].name, &d) != 1)
			continue;
		if (known[k].d)
			*known[k].d = d;
		else
			*known[k].ms = (uint64_t)d;
	}
	double d;
	if (sim_policy_param(env, "cold_start_samples", &d) == 1)
		p.cold_start_samples = (uint32_t)d;
	if (sim_policy_param(env, "place_choices", &d) == 1)
		p.place_choices = (uint32_t)d;
	if (sim_policy_param(env, "load_floor", &d) == 1)
		p.load_floor = (uint32_t)d;
	if (sim_policy_param(env, "load_floor_e2e", &d) == 1)
		p.load_floor_e2e = (uint32_t)d;
	if (sim_policy_param(env, "place_long_kib", &d) == 1)
		p.place_long_kib = (uint32_t)d;
	if (sim_policy_param(env, "warm_slack", &d) == 1)
		p.warm_slack = (uint32_t)d;
	if (sim_policy_param(env, "slow_start_leave", &d) == 1)
		p.slow_start_leave = d != 0;
	if (sim_policy_param(env, "place_slots", &d) == 1)
		p.place_slots = d != 0;
	if (sim_policy_param(env, "slow_run", &d) == 1)
		p.slow_run = (uint32_t)d;
	if (sim_policy_param(env, "score_by", &d) == 1)
		p.score_by = (enum core_score_by)d;
	if (sim_policy_param(env, "routers", &d) == 1) /* 0 auto, 1 one, 2 several */
		p.routers = (enum core_routers)d;

	if (!s->idx || !s->names || core_create(&s->core, &p) < 0) {
		wl_destroy(s);
		return NULL;
	}
	core_rng_seed(&s->rng, env->seed);
	s->hints = env->hints;
	s->agent = env->agent;
	s->explain = env->detail != 0;
	s->budget_p = (struct budget_params){ .ratio = SIM_RETRY_RATIO, .min_per_s = SIM_RETRY_MIN_PER_S,
					      .window_ms = SIM_RETRY_WINDOW_MS };
	if (sim_policy_param(env, "retry_ratio", &d) == 1)
		s->budget_p.ratio = d;
	if (sim_policy_param(env, "retry_min_per_second", &d) == 1)
		s->budget_p.min_per_s = d;
	budget_init(&s->budget, 0);
	for (uint32_t e = 0; e < env->nep; e++) {
		s->idx[e] = -1;
		snprintf(s->names[e], sizeof(s->names[e]), "%s", env->cfg->ep[e].name);
		/* endpoints HAProxy has from the start are known before the first poll */
		if (env->cfg->ep[e].start_us <= 0 &&
		    wl_add(s, e, env->cfg->ep[e].weight, env->cfg->ep[e].cost_per_mtok, 0) < 0) {
			wl_destroy(s);
			return NULL;
		}
	}
	return s;
}

/* A poll of the engines' /metrics (agent/engine.c): each endpoint's
 * engine count into the core, and samples past engine_max_age back to the
 * runtime API's view. */
static void wl_engine(void *st, const struct sim_view *v)
{
	struct wl *s = st;
	uint64_t now = (uint64_t)(v->now_us / 1000);
	for (uint32_t e = 0; e < v->n && e < s->n; e++)
		if (s->idx[e] >= 0)
			core_endpoint_engine(s->core, s->idx[e], true, v->ep[e].engine_load, -1, now);
	core_engine_expire(s->core, now);
}

/* A runtime-API poll: servers HAProxy added or removed, their state and scur+qcur. */
static void wl_poll(void *st, const struct sim_view *v)
{
	struct wl *s = st;
	uint64_t now = (uint64_t)(v->now_us / 1000);
	for (uint32_t e = 0; e < v->n && e < s->n; e++) {
		const struct sim_view_ep *x = &v->ep[e];
		if (x->present && s->idx[e] < 0 && wl_add(s, e, x->weight, x->cost_per_mtok, now) < 0)
			continue; /* ENOMEM: unknown to the core until the next poll */
		if (!x->present && s->idx[e] >= 0) {
			core_endpoint_remove(s->core, s->idx[e]);
			s->rev[s->idx[e]] = -1;
			s->idx[e] = -1;
		}
		if (s->idx[e] >= 0)
		{
			core_endpoint_sync(s->core, s->idx[e], x->up ? CORE_ADMIN_ENABLED : CORE_ADMIN_DOWN,
					   x->in_flight, now);
			core_endpoint_check(s->core, s->idx[e], (uint32_t)llround(x->check_ms), now);
		}
	}
	/* HAProxy's peers, every RUNTIME_PEERS_EVERY_MS (5 s) while requests
	 * carry hints, as agent/runtime.c asks them: connected, unless they
	 * never connect (--hints-lone). */
	struct core_routers_info ri;
	core_routers_info(s->core, &ri);
	if (s->hints && ri.hinted >= 1 && (s->peers_ms == 0 || now >= s->peers_ms + 5000)) {
		s->peers_ms = now > 0 ? now : 1;
		core_peers_note(s->core, s->hints->lone ? CORE_PEERS_APART : CORE_PEERS_CONNECTED,
				now);
	}
	/* The agent's key probes (agent/probe.c): a 401/403 in feedback only
	 * makes a key suspect; the probe, answered here as the server would
	 * answer it through HAProxy, decides. */
	int i;
	while ((i = core_key_probe_next(s->core, now)) >= 0) {
		int e = (uint32_t)i < s->rev_len ? s->rev[i] : -1;
		enum core_probe res = e >= 0 && sim_fleet_key_refused(v->fleet, (uint32_t)e, v->now_us) ?
				      CORE_PROBE_REFUSED : CORE_PROBE_ACCEPTED;
		core_key_probe_result(s->core, i, res, now);
	}
}

/* The route message HAProxy would send for r. */
static struct core_request wl_request(const struct sim_req *r)
{
	/* req.body_size: the body's bytes at about 4 per token, as the
	 * prefix windows are derived (sim_trace_derive_keys) */
	uint64_t kib = (uint64_t)r->input_tokens * 4 / 1024;
	struct core_request q = {
		.stream = r->stream != 0,
		.size_kib = kib > UINT32_MAX ? UINT32_MAX : (uint32_t)kib,
		.turn = r->turn,
	};
	q.session = (struct core_id){ r->session != 0, r->session };
	for (int k = 0; k < 3 && k < SIM_NPREFIX; k++)
		q.prefix[k] = (struct core_id){ r->prefix[k] != 0, r->prefix[k] };
	q.caller = (struct core_id){ r->caller != 0, r->caller };
	return q;
}

/* What an explained decision did with the key's entry: kept it (warm),
 * had none (new, or stale: its endpoint removed), or moved it and by which
 * rule: back home from a worse tier, the entry's endpoint not a candidate,
 * its breaker, the speed rules (EWMA, slow run: fast_enough), the warm load
 * bound, or exploration (the entry usable, the decision elsewhere). A new key's placement: on the
 * rendezvous first, or passed over it (bound, owned count, slow start). */
static const char *wl_detail(const struct core_trace *t)
{
	const struct core_decision *d = &t->decision;
	if (!t->has_akey)
		return "anonymous";
	if (!t->entry || t->entry_stale) {
		if (d->reason != CORE_REASON_HASH)
			return t->entry ? "stale-other" : "new-other";
		if (t->by_load)
			return t->entry ? "stale-by-load" : "new-by-load";
		if (t->by_wait)
			return t->entry ? "stale-by-wait" : "new-by-wait";
		if (t->by_slots)
			return t->entry ? "stale-by-slots" : "new-by-slots";
		if (t->n_rank > 0 && t->rank[0].endpoint == d->endpoint)
			return t->entry ? "stale-first" : "new-first";
		/* why the first was passed over: its speed, the load bound,
		 * else what it owns or its first answers (not in the trace) */
		const struct core_trace_rank *f = &t->rank[0];
		if (t->n_rank == 0 || !f->walked)
			return t->entry ? "stale-explore" : "new-explore";
		if (!f->fast)
			return t->entry ? "stale-passed-slow" : "new-passed-slow";
		if (!f->bounded)
			return t->entry ? "stale-passed-bound" : "new-passed-bound";
		return t->entry ? "stale-passed-owned" : "new-passed-owned";
	}
	if (d->endpoint == t->entry_endpoint)
		return d->reason == CORE_REASON_AFFINITY ? "warm" : "warm-other";
	if (d->endpoint == t->home_endpoint)
		return "home";
	if (!t->entry_candidate)
		return "moved-notcand";
	if (!t->entry_closed)
		return "moved-breaker";
	if (!t->entry_fast)
		return "moved-slow";
	if (!t->entry_bounded)
		return "moved-bound";
	if (!t->entry_start)
		return "moved-slowstart";
	return "moved-explore";
}

static const char *wl_last_detail(void *st)
{
	return ((struct wl *)st)->detail;
}

static int wl_decide(void *st, const struct sim_view *v, const struct sim_req *r, const char **reason)
{
	struct wl *s = st;
	struct core_request q = wl_request(r);
	struct core_decision d;
	uint64_t akey;
	uint32_t hep, writer;
	int64_t at_us;
	/* The route message's hint_* arguments: what this agent's HAProxy
	 * holds for the key (haproxy/haproxy-*-peers.cfg). */
	if (s->hints && core_identity(s->core, &q, &akey) &&
	    sim_hints_read(s->hints, akey, s->agent, v->now_us, &hep, &at_us, &writer) &&
	    hep < s->n && s->idx[hep] >= 0) {
		uint64_t age = (uint64_t)((v->now_us - at_us) / 1000);
		if (age < SIM_HINT_EXPIRE_MS)
			q.hint = (struct core_hint){ .present = true, .akey32 = (uint32_t)akey,
						     .age_ms = age, .n = 1, .endpoint = { s->idx[hep] },
						     .writer = writer == s->agent ? CORE_HINT_WRITER_OWN :
							       CORE_HINT_WRITER_PEER };
	}
	if (s->explain) {
		struct core_trace *t = malloc(sizeof(*t));
		struct core_rng rc = s->rng;
		struct core_decision x;
		s->detail = t && core_explain(s->core, &q, (uint64_t)(v->now_us / 1000), &rc, &x, t) == 0 ?
			    wl_detail(t) : "unexplained";
		free(t);
		core_decide(s->core, &q, (uint64_t)(v->now_us / 1000), &s->rng, &d);
		if (s->detail != NULL && strcmp(s->detail, "unexplained") != 0 &&
		    (x.endpoint != d.endpoint || x.reason != d.reason))
			s->detail = "explain-differs";
	} else {
		core_decide(s->core, &q, (uint64_t)(v->now_us / 1000), &s->rng, &d);
	}
	*reason = core_reason_name(d.reason);
	if (d.endpoint < 0 || (uint32_t)d.endpoint >= s->rev_len)
		return -1;
	return s->rev[d.endpoint];
}

static void wl_feedback(void *st, const struct sim_view *v, const struct sim_req *r, uint32_t ep,
			const struct sim_feedback *fb)
{
	struct wl *s = st;
	if (ep >= s->n || s->idx[ep] < 0)
		return; /* removed meanwhile: the agent finds no such server */
	struct core_request q = wl_request(r);
	struct core_feedback f = {
		.endpoint = s->idx[ep],
		.status = fb->status,
		.tr_ms = fb->tr_ms,
		.retry_after_ms = fb->retry_after_s ? (int64_t)fb->retry_after_s * 1000 : -1,
		.stream = fb->stream != 0,
		.end_follows = s->log_lines,
	};

	/* HAProxy echoes the akey warmlane set; the core recomputes the same */
	f.has_akey = core_identity(s->core, &q, &f.akey);
	core_observe(s->core, &f, (uint64_t)(v->now_us / 1000));
	/* HAProxy records a 2xx in the shared table at the headers. */
	if (s->hints && f.has_akey && fb->status >= 200 && fb->status < 300)
		sim_hints_write(s->hints, f.akey, ep, s->agent, v->now_us);
}

/* HAProxy's end-of-stream log line (--log-ingest), as the agent's log
 * input passes it on. */
static void wl_complete(void *st, const struct sim_view *v, const struct sim_req *r, uint32_t ep,
			const struct sim_completion *c)
{
	struct wl *s = st;
	if (ep >= s->n || s->idx[ep] < 0)
		return;
	s->log_lines = true;
	budget_record(&s->budget, &s->budget_p, c->retries, (uint64_t)(v->now_us / 1000));
	struct core_request q = wl_request(r);
	struct core_completion cc = {
		.endpoint = s->idx[ep],
		.status = c->status,
		.end = (enum core_end)c->end,
		.tr_ms = c->tr_ms,
		.total_ms = c->total_ms,
		.bytes = c->bytes,
		.stream = c->stream != 0,
		.feedback_seen = c->feedback_seen != 0,
	};
	cc.has_akey = core_identity(s->core, &q, &cc.akey);
	core_complete(s->core, &cc, (uint64_t)(v->now_us / 1000));
	/* Without a feedback message the write is only seen here (at the
	 * end rather than at the headers: a little later than HAProxy). */
	if (s->hints && cc.has_akey && !c->feedback_seen && c->status >= 200 && c->status < 300)
		sim_hints_write(s->hints, cc.akey, ep, s->agent, v->now_us);
}

/* The route answer's noretry: the budget spent at the decision. */
static int wl_noretry(void *st, const struct sim_view *v, const struct sim_req *r, uint32_t ep)
{
	struct wl *s = st;
	(void)r;
	(void)ep;
	return budget_spent(&s->budget, &s->budget_p, (uint64_t)(v->now_us / 1000));
}

const struct sim_policy sim_pol_warmlane = {
	.name = "warmlane",
	.desc = "the routing core (core/) with default parameters",
	.create = wl_create,
	.destroy = wl_destroy,
	.decide = wl_decide,
	.feedback = wl_feedback,
	.poll = wl_poll,
	.engine = wl_engine,
	.complete = wl_complete,
	.noretry = wl_noretry,
	.detail = wl_last_detail,
};
