/* sim_policy.h - the interface every routing policy of the simulator implements, and the registry. */
#ifndef WARMLANE_SIM_POLICY_H
#define WARMLANE_SIM_POLICY_H

#include "sim_cfg.h"
#include "sim_trace.h"

#include <stdint.h>

struct sim_fleet;
struct sim_hints;

/* One endpoint as a router sees it. */
struct sim_view_ep {
	const char *name;
	uint32_t id;          /* stable: the endpoint's index in the fleet file */
	uint8_t present;      /* in HAProxy's server list (added, not removed) */
	uint8_t up;           /* present and UP by HAProxy's health checks */
	double weight;
	double cost_per_mtok;
	uint32_t in_flight;   /* the agent's view (docs/architecture.md): scur+qcur at the
			       * last runtime-API poll, +1 per decision since */
	uint32_t live;        /* HAProxy's own exact count of this instance's
			       * requests: what its native algorithms (roundrobin,
			       * leastconn, random(2), chash) balance on */
	uint32_t engine_load; /* --engine-load: the engine's running + waiting
			       * requests (every agent's) at this agent's last
			       * poll of its /metrics */
	double check_ms;      /* --http-check: the runtime API's check_duration of
			       * its last layer-7 check; 0: none */
};

struct sim_view {
	int64_t now_us;
	uint32_t n;
	const struct sim_view_ep *ep;
	const struct sim_fleet *fleet; /* cache contents: for the oracle only */
};

/* What HAProxy's feedback message carries after response headers. */
struct sim_feedback {
	int status;
	int64_t tr_ms;          /* time to response headers */
	uint32_t retry_after_s; /* 0: no Retry-After header */
	uint8_t stream;
};

/* How a stream ended, as HAProxy's log line tells it (core_end's values). */
enum sim_end {
	SIM_END_COMPLETE = 0,
	SIM_END_CLIENT_ABORT,
	SIM_END_SERVER_CUT,
	SIM_END_SERVER_FAIL,  /* HAProxy's own answer: connection refused */
};

/* What HAProxy's end-of-stream log line carries (--log-ingest). */
struct sim_completion {
	int status;             /* as logged; HAProxy's own 503 for a refusal */
	enum sim_end end;
	int64_t tr_ms;          /* time to response headers; -1: none */
	int64_t total_ms;       /* arrival to end of stream (HAProxy's Ta) */
	uint64_t bytes;         /* response bytes sent to the client */
	uint8_t stream;
	uint8_t feedback_seen;  /* the feedback message reported this response */
	uint32_t retries;       /* HAProxy's retries of the request (%rc) */
};

/* The warmlane policy's retry budget (its defaults, retry_budget.* of the
 * agent's config): the retry-storm scenario's bound is computed from them. */
#define SIM_RETRY_RATIO 0.2
#define SIM_RETRY_MIN_PER_S 1.0
#define SIM_RETRY_WINDOW_MS 10000

struct sim_policy_env {
	uint32_t nep;     /* endpoints in the fleet file (view.n) */
	uint64_t seed;    /* the policy's own random stream */
	uint32_t agent;   /* which independent agent this instance is */
	const struct sim_fleet_cfg *cfg;
	const char *const *set;  /* --set NAME=VALUE overrides of policy parameters */
	unsigned nset;
	unsigned char *set_read; /* set_read[i] = 1 once a policy looked set[i] up; NULL: not kept */
	struct sim_hints *hints; /* --shared-hints: the table every agent's HAProxy shares; NULL: none */
	int detail;       /* --debug-tail: the fleet reads detail() after each decide */
};

/* Looks name up in env's --set list: 1 with *v set, 0 when absent, -1 when
 * the value is not a number. Marks the entry in env->set_read. */
int sim_policy_param(const struct sim_policy_env *env, const char *name, double *v);

struct sim_policy {
	const char *name;
	const char *desc;
	/* A fresh instance, or NULL on ENOMEM. */
	void *(*create)(const struct sim_policy_env *env);
	/* Frees an instance (accepts NULL). */
	void (*destroy)(void *st);
	/* The endpoint index for r, or -1 to leave the choice to HAProxy
	 * (leastconn). *reason is a static string. */
	int (*decide)(void *st, const struct sim_view *v, const struct sim_req *r, const char **reason);
	/* Response headers of a request this instance routed to ep (optional). */
	void (*feedback)(void *st, const struct sim_view *v, const struct sim_req *r, uint32_t ep,
			 const struct sim_feedback *fb);
	/* Called after each runtime-API poll refreshed v's in_flight (optional). */
	void (*poll)(void *st, const struct sim_view *v);
	/* Called after each poll of the engines' /metrics refreshed v's
	 * engine_load (only with --engine-load; optional). */
	void (*engine)(void *st, const struct sim_view *v);
	/* End of a stream this instance routed to ep, as HAProxy's log line
	 * reports it, after any feedback of the same request (only with
	 * --log-ingest; optional). */
	void (*complete)(void *st, const struct sim_view *v, const struct sim_req *r, uint32_t ep,
			 const struct sim_completion *cc);
	/* Whether the answer that sent r to ep also sets noretry (the retry
	 * budget spent), right after decide (only with --log-ingest, as the
	 * agent's budget is off without its log input; optional). */
	int (*noretry)(void *st, const struct sim_view *v, const struct sim_req *r, uint32_t ep);
	/* Why the last decide chose as it did, in more words than its reason
	 * (a static string; only with env.detail; optional). */
	const char *(*detail)(void *st);
};

/* Number of policies built in, and the i-th in report order. */
unsigned sim_policy_count(void);
const struct sim_policy *sim_policy_at(unsigned i);

/* The policy named name, or NULL; finds the opt-in ones too. */
const struct sim_policy *sim_policy_find(const char *name);

/* Built-in policies (one file each). */
extern const struct sim_policy sim_pol_rr;
extern const struct sim_policy sim_pol_leastconn;
extern const struct sim_policy sim_pol_chash;
extern const struct sim_policy sim_pol_p2c;
extern const struct sim_policy sim_pol_ttl;
extern const struct sim_policy sim_pol_warmlane;
extern const struct sim_policy sim_pol_oracle;
extern const struct sim_policy sim_pol_wlmodel; /* opt-in: not in --policy all */

/* Blocks of r that endpoint ep's cache holds as a reusable prefix (oracle). */
uint32_t sim_fleet_cached_blocks(const struct sim_fleet *f, uint32_t ep, const struct sim_req *r);



/* HAProxy's leastconn over the endpoints that are up: least live/weight, ties
 * taken in rotation from *rot (updated). -1 when none is up. */
int sim_policy_leastconn_pick(const struct sim_view *v, uint32_t *rot);

/* HAProxy's weighted round-robin (smooth) over the endpoints that are up;
 * cur holds one credit per endpoint (v->n), zeroed at first. -1 when none is up. */
int sim_policy_rr_pick(const struct sim_view *v, double *cur);
#endif
