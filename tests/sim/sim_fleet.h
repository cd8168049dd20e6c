/* sim_fleet.h - one simulated run: a workload replayed through routing agents onto modelled endpoints. */
#ifndef WARMLANE_SIM_FLEET_H
#define WARMLANE_SIM_FLEET_H

#include "sim_cfg.h"
#include "sim_policy.h"
#include "sim_trace.h"

#include <stddef.h>
#include <stdint.h>

/* What happened to one request. */
struct sim_rec {
	int32_t ep;            /* endpoint it went to, -1 if none */
	int16_t status;        /* what the client got (503 for a refused connection) */
	uint16_t agent;        /* which agent routed it */
	int64_t t_start_us;    /* prefill start (after the queue), -1 if never admitted */
	int64_t t_first_us;    /* first token, -1 if none */
	int64_t t_end_us;      /* response complete */
	uint32_t cached_tokens;
	const char *reason;    /* the policy's reason ("haproxy": it fell back) */
	uint8_t admitted;      /* reached the model (not an error, not refused) */
	uint8_t refused;       /* connection refused: no feedback at all */
	int64_t fb_tr_ms;      /* pending feedback for error responses; then the tr reported */
	uint32_t fb_retry_after_s;
	uint8_t fb_sent;       /* HAProxy sent the feedback message */
	uint8_t cut;           /* a streamed response the server cut half-way (HAProxy logs SD, 200) */
	int32_t wep;           /* the endpoint first chosen (warmlane's, or HAProxy's) */
	uint8_t attempts;      /* upstream attempts: 1 + HAProxy's retries */
	uint8_t noretry;       /* warmlane set noretry (its retry budget spent) */
	int16_t slot;          /* a llama endpoint's slot it ran on, -1 otherwise */
	/* --debug-tail only (sim_run_opts.detail): what the decision and the
	 * endpoint saw, to take a latency tail apart. */
	uint16_t batch;        /* other requests running when its prefill started */
	uint16_t live_at;      /* the chosen endpoint's live count (every HAProxy's) at the decision */
	uint16_t live_min;     /* the least such count over the endpoints up */
	const char *detail;    /* the policy's detail of its decision (sim_policy.detail), or NULL */
};

struct sim_run_opts {
	const struct sim_policy *policy;
	uint32_t agents;       /* independent agents behind a random spray (>= 1) */
	uint64_t seed;
	const char *const *set;  /* policy parameter overrides (--set) */
	unsigned nset;
	int log_ingest;          /* agents read HAProxy's end-of-stream log lines */
	int shared_hints;        /* the HAProxies share the warm hint (sim_hints.h);
				  * 2: tables whose peers never connect */
	int64_t engine_poll_us;  /* agents poll the engines' /metrics this often
				  * (agent/engine.c); 0: they do not */
	int64_t check_us;        /* HAProxy's layer-7 health checks this often
				  * (--http-check); 0: none */
	int detail;              /* fill sim_rec's --debug-tail fields (policies may then
				  * do more work per decision: the warmlane one explains it) */
};

struct sim_run {
	char policy[32];
	uint32_t agents;
	uint64_t seed;
	const struct sim_fleet_cfg *cfg;
	const struct sim_workload *w;
	struct sim_rec *rec;   /* one per request of w */
	double *inflight_avg;  /* per endpoint: mean live count over polls while present */
	int64_t t_last_us;     /* last event */
};

/* Replays w on the fleet cfg with opts (one policy instance per agent).
 * Deterministic: the same inputs and seed give the same records. A closed
 * loop workload (w->closed) gets its arrival times written: each request
 * arrives when the run sends it. Fills out
 * (release with sim_fleet_run_finish). 0, or -ENOMEM with err filled. */
int sim_fleet_run(const struct sim_fleet_cfg *cfg, const struct sim_workload *w,
		  const struct sim_run_opts *opts, struct sim_run *out, char *err, size_t errlen);

/* Frees a run's records. */
void sim_fleet_run_finish(struct sim_run *run);

/* Whether endpoint e refuses the upstream key at t (a 401 fault is on):
 * what a key probe of warmlane's, through HAProxy, would be answered. */
int sim_fleet_key_refused(const struct sim_fleet *f, uint32_t e, int64_t t);

#endif
