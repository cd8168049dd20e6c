/* sim_stats.c - summary figures of a simulated run and their CSV / human rendering. */
#include "sim_stats.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double sim_stats_quantile(double *v, size_t n, double q)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), dbl_cmp);
	size_t k = (size_t)ceil(q * (double)n);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

void sim_stats_summarize(const struct sim_run *run, double slo_ms, struct sim_summary *s)
{
	const struct sim_workload *w = run->w;
	*s = (struct sim_summary){ .agents = run->agents, .seed = run->seed, .requests = w->n };
	snprintf(s->policy, sizeof(s->policy), "%s", run->policy);
	double *ttft = malloc((w->n ? w->n : 1) * sizeof(*ttft));
	double *e2e = malloc((w->n ? w->n : 1) * sizeof(*e2e));
	if (!ttft || !e2e) {
		free(ttft);
		free(e2e);
		return;
	}
	double in = 0, cached = 0, good_out = 0;
	int64_t t0 = w->n ? w->req[0].arrival_us : 0;
	for (size_t i = 0; i < w->n; i++) {
		const struct sim_rec *r = &run->rec[i];
		const struct sim_req *q = &w->req[i];
		if (!r->admitted) {
			s->errors++;
			continue;
		}
		s->errors += r->cut; /* the client got half an answer */
		double t_ms = (double)(r->t_first_us - q->arrival_us) / 1000.0;
		ttft[s->ok] = t_ms;
		e2e[s->ok] = (double)(r->t_end_us - q->arrival_us) / 1000.0;
		s->ok++;
		in += q->input_tokens;
		cached += r->cached_tokens;
		if (slo_ms <= 0 || t_ms <= slo_ms)
			good_out += q->output_tokens;
		s->cost += ((double)q->input_tokens - r->cached_tokens / 2.0 + q->output_tokens) *
			   run->cfg->ep[r->ep].cost_per_mtok / 1e6;
	}
	s->hit_rate = in > 0 ? cached / in : 0;
	s->ttft_p50_ms = sim_stats_quantile(ttft, s->ok, 0.50);
	s->ttft_p90_ms = sim_stats_quantile(ttft, s->ok, 0.90);
	s->ttft_p99_ms = sim_stats_quantile(ttft, s->ok, 0.99);
	s->e2e_p99_ms = sim_stats_quantile(e2e, s->ok, 0.99);
	double span = (double)(run->t_last_us - t0) / 1e6;
	s->output_tok_s = span > 0 ? good_out / span : 0;
	double mx = 0, mn = INFINITY;
	for (uint32_t e = 0; e < run->cfg->nep; e++) {
		double a = run->inflight_avg[e];
		if (a > mx)
			mx = a;
		if (a < mn)
			mn = a;
	}
	s->inflight_max_min = mn > 0 ? mx / mn : INFINITY;
	free(ttft);
	free(e2e);
}

void sim_stats_print_header(FILE *out, int csv)
{
	if (csv) {
		fprintf(out, "policy,requests,hit_rate,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,e2e_p99_ms,"
			     "errors,output_tok_s,inflight_max_min\n");
		return;
	}
	fprintf(out, "%-14s %6s %8s %6s %9s %9s %9s %9s %7s %9s %8s %8s\n", "policy", "agents",
		"requests", "hit%", "ttft_p50", "ttft_p90", "ttft_p99", "e2e_p99", "errors", "out_tok/s",
		"infl_mx/mn", "cost");
}

void sim_stats_print_row(FILE *out, const struct sim_summary *s, int csv)
{
	if (csv) {
		fprintf(out, "%s,%zu,%.4f,%.0f,%.0f,%.0f,%.0f,%zu,%.1f,%.2f\n", s->policy, s->requests,
			s->hit_rate, s->ttft_p50_ms, s->ttft_p90_ms, s->ttft_p99_ms, s->e2e_p99_ms, s->errors,
			s->output_tok_s, s->inflight_max_min);
		return;
	}
	fprintf(out, "%-14s %6u %8zu %6.1f %9.0f %9.0f %9.0f %9.0f %7zu %9.1f %10.2f %8.2f\n", s->policy,
		s->agents, s->requests, 100 * s->hit_rate, s->ttft_p50_ms, s->ttft_p90_ms, s->ttft_p99_ms,
		s->e2e_p99_ms, s->errors, s->output_tok_s, s->inflight_max_min, s->cost);
}

void sim_stats_debug_tail(FILE *out, const struct sim_run *run, int header)
{
	if (header)
		fprintf(out, "policy,agents,arrival_ms,endpoint,status,ttft_ms,queue_ms,prefill_ms,batch,"
			     "live_at,live_min,input,cached,output,reason,detail,akey,agent\n");
	for (size_t i = 0; i < run->w->n; i++) {
		const struct sim_rec *r = &run->rec[i];
		const struct sim_req *q = &run->w->req[i];
		bool ran = r->t_start_us >= 0;
		double ttft = r->t_first_us >= 0 ? (double)(r->t_first_us - q->arrival_us) / 1000.0 : -1;
		double queue = ran ? (double)(r->t_start_us - q->arrival_us) / 1000.0 : -1;
		double prefill = ran && r->t_first_us >= 0 ? (double)(r->t_first_us - r->t_start_us) / 1000.0 : -1;
		fprintf(out, "%s,%u,%.3f,%s,%d,%.1f,%.1f,%.1f,%u,%u,%u,%u,%u,%u,%s,%s,%016llx,%u\n", run->policy,
			run->agents, (double)q->arrival_us / 1000.0, r->ep >= 0 ? run->cfg->ep[r->ep].name : "-",
			r->status, ttft, queue, prefill, r->batch, r->live_at, r->live_min, q->input_tokens,
			r->cached_tokens, q->output_tokens, r->reason ? r->reason : "-",
			r->detail ? r->detail : "-", (unsigned long long)sim_trace_affinity_key(q), (unsigned)r->agent);
	}
}

void sim_stats_dump(FILE *out, const struct sim_run *run, int header)
{
	if (header)
		fprintf(out, "policy,agents,arrival_ms,endpoint,status,ttft_ms,e2e_ms,input,cached,output,reason,conv\n");
	for (size_t i = 0; i < run->w->n; i++) {
		const struct sim_rec *r = &run->rec[i];
		const struct sim_req *q = &run->w->req[i];
		double ttft = r->t_first_us >= 0 ? (double)(r->t_first_us - q->arrival_us) / 1000.0 : -1;
		fprintf(out, "%s,%u,%.3f,%s,%d,%.1f,%.1f,%u,%u,%u,%s,%u\n", run->policy, run->agents,
			(double)q->arrival_us / 1000.0, r->ep >= 0 ? run->cfg->ep[r->ep].name : "-",
			r->status, ttft, (double)(r->t_end_us - q->arrival_us) / 1000.0, q->input_tokens,
			r->cached_tokens, q->output_tokens, r->reason ? r->reason : "-", q->conv);
	}
}
