/* sim_scen.h - named scenarios: the faults they add to a fleet, what they measure, what they expect. */
#ifndef WARMLANE_SIM_SCEN_H
#define WARMLANE_SIM_SCEN_H

#include "sim_fleet.h"
#include "sim_stats.h"

#include <stddef.h>
#include <stdio.h>

enum sim_scen_ref {
	SIM_REF_NONE,     /* no reference run */
	SIM_REF_NOFAULT,  /* the same policy on the fleet without the scenario's faults */
	SIM_REF_ONEAGENT, /* the same policy with one agent */
};

struct sim_scen {
	const char *name;
	const char *desc;
	uint32_t agents;
	enum sim_scen_ref ref;
	int target;       /* endpoint index the fault hits, -1 none */
};

/* Scenario-specific figures of one policy's run. */
struct sim_scen_result {
	double target_share;  /* fast-failure: share to the failing endpoint after the allowance;
			       * slow: share to the slow endpoint once it is slow; scale-out: new endpoint's share */
	size_t target_count;  /* requests behind target_share (fast-failure, slow), or in the 429 window */
	size_t sent_after_first; /* fast-failure: requests sent to it after its first failure */
	size_t window_bound;  /* 429: requests allowed into the window (first failures + half-open probes) */
	double keys_moved;    /* scale-out: share of keys whose endpoint changed across the addition */
	double ref_keys_moved; /* the same across the same instant without the addition */
	double fair_share;    /* slow, recover: the target's share of the weights of the endpoints present */
	size_t new_keys;      /* slow-start: new keys after the target's 5th answer (target_share:
			       * the share of them it got) */
	double early_share;   /* recover: its share 0-30 s after the slowdown ends (target_share: 30-120 s) */
	double hit_rate, ref_hit_rate;
	int has_ref;
	/* retry-storm: requests arriving during the 503 burst, the upstream
	 * attempts they cost, those marked noretry, those the clients saw
	 * fail, and the attempts the retry budget allows them. */
	size_t burst_requests, burst_attempts, burst_noretry, burst_errors;
	double attempts_bound;
	/* tiers: tier 2's share before any fault, the requests tier 1 got
	 * during each fault (429 window, 503 burst: what failed before the
	 * takeover, and the probes), tier 2's share during each, the
	 * requests tier 2 got after tier 1's first success once each fault
	 * ended (its half-open probes), and tier 2's share in the last
	 * fifth of the run. */
	double t2_healthy, t2_in[2], t2_tail;
	size_t t1_in[2], t2_after[2], t2_healthy_n;
	/* requests from a fault's start to the first of TIERS_RUN decisions
	 * in a row to tier 2: how soon tier 2 took over */
	size_t takeover[2];
	/* spread: the endpoint with the least requests against its fair
	 * share by weight (target_share, target_count, fair_share), and the
	 * highest share of any. */
	int32_t low_ep;
	double top_share;
};

/* Number of scenarios and the i-th. */
unsigned sim_scen_count(void);
const struct sim_scen *sim_scen_at(unsigned i);

/* The scenario named name, or NULL. */
const struct sim_scen *sim_scen_find(const char *name);

/* Writes the fleet-file text the scenario appends ([fault] / [endpoint]
 * sections, timed from the workload's arrival span) to the fleet cfg into
 * buf. */
void sim_scen_faults(const struct sim_scen *sc, const struct sim_workload *w, const struct sim_fleet_cfg *cfg,
		     char *buf, size_t len);

/* Measures run (and ref, the reference run or NULL) for the scenario. */
void sim_scen_analyse(const struct sim_scen *sc, const struct sim_run *run, const struct sim_run *ref,
		      const struct sim_summary *sum, const struct sim_summary *ref_sum,
		      struct sim_scen_result *res);

/* The table of scenario figures: header, then one row per policy. */
void sim_scen_print_header(FILE *out, const struct sim_scen *sc);
void sim_scen_print_row(FILE *out, const struct sim_scen *sc, const char *policy,
			const struct sim_scen_result *res);

/* Checks the scenario's named expectation for a policy's result; prints one
 * "ok"/"FAIL" line per check to out and returns the number of failures.
 * Policies without an expectation in this scenario check nothing. */
int sim_scen_expect(const struct sim_scen *sc, const char *policy, const struct sim_scen_result *res,
		    FILE *out);

#endif
