/* sim_stats.h - per-run figures (hit rate, TTFT percentiles, goodput, balance) and their printing. */
#ifndef WARMLANE_SIM_STATS_H
#define WARMLANE_SIM_STATS_H

#include "sim_fleet.h"

#include <stdio.h>

struct sim_summary {
	char policy[32];
	uint32_t agents;
	uint64_t seed;
	size_t requests, ok, errors;
	double hit_rate;          /* cached prompt tokens / prompt tokens of served requests */
	double ttft_p50_ms, ttft_p90_ms, ttft_p99_ms;
	double e2e_p99_ms;
	double output_tok_s;      /* output tokens/s of served requests within the TTFT SLO */
	double inflight_max_min;  /* max/min over endpoints of the mean in-flight count */
	double cost;              /* price units: (uncached in + cached in / 2 + out) x cost_per_mtok / 1e6 */
};

/* Computes the figures of run; slo_ms 0 counts every served request in output_tok_s. */
void sim_stats_summarize(const struct sim_run *run, double slo_ms, struct sim_summary *s);

/* q-quantile (0..1, nearest rank) of v[0..n); sorts v. 0 when n is 0. */
double sim_stats_quantile(double *v, size_t n, double q);

/* The table header: CSV (the fixed column list) or a human table. */
void sim_stats_print_header(FILE *out, int csv);

/* One row for s. */
void sim_stats_print_row(FILE *out, const struct sim_summary *s, int csv);

/* Per-request records as CSV (policy,agents,arrival_ms,endpoint,status,
 * ttft_ms,e2e_ms,input,cached,output,reason), header first when header is set. */
void sim_stats_dump(FILE *out, const struct sim_run *run, int header);

/* --debug-tail: one CSV line per request of run (a run with
 * sim_run_opts.detail), what it met as well as what it got: queue wait
 * and prefill (ms, -1 if never admitted), the batch its prefill ran in,
 * the live counts at its decision, the policy's detail, the affinity
 * key (hex, 0: none) and the agent that decided it (0 to --agents - 1);
 * with header, the column names first. */
void sim_stats_debug_tail(FILE *out, const struct sim_run *run, int header);

#endif
