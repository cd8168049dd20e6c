/* sim_main.c - warmlane-sim: replays a workload through each routing policy onto a simulated fleet and tabulates. */
#include "sim_cfg.h"
#include "sim_fleet.h"
#include "sim_gen.h"
#include "sim_policy.h"
#include "sim_scen.h"
#include "sim_stats.h"
#include "sim_trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_POLICIES 16

struct opts {
	const char *trace;
	const char *workload;
	const char *config;
	const char *scenario;
	const char *policies;
	const char *keys;
	const char *dump;
	const char *debug_tail;
	uint32_t agents;
	uint64_t seed;
	double speed;
	size_t limit;
	uint32_t size;
	uint32_t turns, clients, user_chars; /* --workload engine's shape */
	double duration_s;
	double rate;
	double slo_ms;
	int csv, check, skip_missing, log_ingest, shared_hints;
	int no_turn_count;        /* HAProxy sends no `turn` (an older config) */
	uint64_t engine_poll_ms;  /* --engine-load: agents poll the engines' /metrics */
	int http_check;           /* --http-check: HAProxy's layer-7 checks, every 2 s */
	const char *set[32];
	unsigned nset;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: warmlane-sim [options]\n"
		"  --trace FILE        replay a Mooncake JSONL trace\n"
		"  --workload NAME     synthetic workload: chat (default), groups, mixed, engine (the\n"
		"                      engine benchmark's: 32 conversations x 4 turns, 4 clients)\n"
		"  --turns N, --clients N, --user-chars N\n"
		"                      engine: turns per conversation (4), closed-loop clients (4),\n"
		"                      characters per user turn (400)\n"
		"  --size N            chat: conversations; groups: groups; mixed: hundreds of requests\n"
		"  --duration S        synthetic: span of arrivals in seconds\n"
		"  --rate X            synthetic: multiply arrival rates by X\n"
		"  --speed X           divide arrival times by X (replay X times faster)\n"
		"  --limit N           keep the first N requests\n"
		"  --keys K            identities sent: prefix, session, both, none (default: prefix for\n"
		"                      traces, both for chat, prefix for groups and mixed; engine\n"
		"                      sends its own, or none)\n"
		"  --config FILE       fleet file (default: built in, as tests/sim/fleet.conf)\n"
		"  --scenario NAME     add a scenario's faults and figures (--list shows them)\n"
		"  --policy P[,P...]   policies to run, or all (default all)\n"
		"  --agents N          independent agents behind a random spray (default 1)\n"
		"  --no-turn-count     HAProxy sends no turn count (a config from before the\n"
		"                      `turn` argument; by default each request's turn is\n"
		"                      derived from the prompts: sim_trace_derive_turns)\n"
		"  --shared-hints      the agents' HAProxies share the warm hint through peers\n"
		"                      (warmlane: a hint per key, seen by the other agents\n"
		"                      0.2-0.6 ms later, up to 1.4 s and 1 in 60 lost in the\n"
		"                      first second: docs/peers.md; `show peers` says them\n"
		"                      connected)\n"
		"  --hints-lone        the same tables, but the peers never connect: each\n"
		"                      HAProxy holds only the hints it wrote itself, and\n"
		"                      `show peers` says them apart\n"
		"  --log-ingest        agents also read HAProxy's end-of-stream log lines\n"
		"  --http-check        HAProxy checks each server with a small completion every\n"
		"                      2 s; agents read each check's duration (check_duration)\n"
		"  --engine-load       agents also poll each engine's running + waiting\n"
		"                      requests (engine_metrics), every 200 ms\n"
		"  --engine-poll MS    ... every MS ms instead (implies --engine-load)\n"
		"                      (warmlane: core_complete with status, end, Tr, Ta and\n"
		"                      bytes; in-flight - 1 at each completion, not only at\n"
		"                      polls; refused connections as HAProxy's own 503)\n"
		"  --set NAME=VALUE    override a policy parameter (warmlane: sticky_tolerance,\n"
		"                      load_factor, ewma_alpha, score_by (0 headers, 1 end_to_end,\n"
		"                      2 both), affinity_ttl_ms, ...; repeatable; a NAME no\n"
		"                      policy of the run reads is an error)\n"
		"  --seed N            seed of everything random (default 1)\n"
		"  --slo-ms MS         TTFT SLO for output_tok_s (default 2000; 0: none)\n"
		"  --csv               print CSV rows instead of a table\n"
		"  --dump FILE         write one CSV line per request and policy to FILE\n"
		"  --debug-tail FILE   the same with what each request met: queue wait, prefill, the\n"
		"                      batch it ran in, the live counts at its decision, the\n"
		"                      policy's detail (warmlane: its decision explained) and its key\n"
		"  --check             also run each policy twice (must be identical) and check\n"
		"                      the scenario's expectations; exit 1 on a failure\n"
		"  --skip-missing      exit 77 (skipped) when the --trace file does not exist\n"
		"  --list              list policies and scenarios\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (!*s || *end || errno || s[0] == '-')
		return -1;
	*v = x;
	return 0;
}

static int parse_dbl(const char *s, double *v)
{
	char *end;
	errno = 0;
	double x = strtod(s, &end);
	if (!*s || *end || errno || !(x >= 0))
		return -1;
	*v = x;
	return 0;
}

/* Spread of the load across servers: the highest time-averaged in-flight
 * count per unit of weight over the lowest (1: even; infinite when a
 * server took nothing). */
static double inflight_spread(const struct sim_run *run)
{
	double hi = 0, lo = INFINITY;
	for (uint32_t e = 0; e < run->cfg->nep; e++) {
		double wgt = run->cfg->ep[e].weight > 0 ? run->cfg->ep[e].weight : 1;
		double v = run->inflight_avg[e] / wgt;
		hi = v > hi ? v : hi;
		lo = v < lo ? v : lo;
	}
	return lo > 0 ? hi / lo : INFINITY;
}

/* --engine-load with several agents: run's spread against one agent's
 * (one HAProxy: it sees the whole load) and several without engine load,
 * printed; with check, warmlane's must be within 1.2x of one agent's
 * (issue 14). 0, or -ENOMEM. */
static int engine_balance(const struct sim_fleet_cfg *cfg, const struct sim_workload *w,
			  const struct sim_run_opts *ro, const struct sim_run *run, int check,
			  int *status)
{
	struct sim_run one, blind;
	struct sim_run_opts o1 = *ro, ob = *ro;
	o1.agents = 1;
	o1.engine_poll_us = 0;
	ob.engine_poll_us = 0;
	char err[256];
	if (sim_fleet_run(cfg, w, &o1, &one, err, sizeof(err)) < 0)
		return -ENOMEM;
	if (sim_fleet_run(cfg, w, &ob, &blind, err, sizeof(err)) < 0) {
		sim_fleet_run_finish(&one);
		return -ENOMEM;
	}
	double s = inflight_spread(run), s1 = inflight_spread(&one), sb = inflight_spread(&blind);
	printf("# in-flight spread (max/min time-averaged in-flight per weight): %s %u agents, "
	       "engine load every %lld ms: %.3f; 1 agent: %.3f; %u agents without engine load: "
	       "%.3f; ratio to 1 agent %.3f (without %.3f)\n",
	       ro->policy->name, ro->agents, (long long)(ro->engine_poll_us / 1000), s, s1,
	       ro->agents, sb, s / s1, sb / s1);
	if (check && strcmp(ro->policy->name, "warmlane") == 0) {
		int ok = s <= 1.2 * s1;
		fprintf(stderr, "%s %s: in-flight spread with %u agents and engine load %.3f <= "
			"1.2 x one agent's %.3f\n", ok ? "ok  " : "FAIL", ro->policy->name,
			ro->agents, s, s1);
		*status |= !ok;
	}
	sim_fleet_run_finish(&one);
	sim_fleet_run_finish(&blind);
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t u;
		int used = 1;
		if (strcmp(a, "--csv") == 0) {
			o->csv = 1;
			used = 0;
		} else if (strcmp(a, "--check") == 0) {
			o->check = 1;
			used = 0;
		} else if (strcmp(a, "--log-ingest") == 0) {
			o->log_ingest = 1;
			used = 0;
		} else if (strcmp(a, "--no-turn-count") == 0) {
			o->no_turn_count = 1;
			used = 0;
		} else if (strcmp(a, "--shared-hints") == 0) {
			o->shared_hints = o->shared_hints ? o->shared_hints : 1;
			used = 0;
		} else if (strcmp(a, "--hints-lone") == 0) {
			o->shared_hints = 2;
			used = 0;
		} else if (strcmp(a, "--http-check") == 0) {
			o->http_check = 1;
			used = 0;
		} else if (strcmp(a, "--engine-load") == 0) {
			if (o->engine_poll_ms == 0)
				o->engine_poll_ms = 200;
			used = 0;
		} else if (strcmp(a, "--engine-poll") == 0) {
			if (parse_u64(v, &u) < 0 || u < 1 || u > 60000)
				goto bad;
			o->engine_poll_ms = u;
		} else if (strcmp(a, "--skip-missing") == 0) {
			o->skip_missing = 1;
			used = 0;
		} else if (strcmp(a, "--list") == 0) {
			printf("policies:");
			for (unsigned k = 0; k < sim_policy_count(); k++)
				printf(" %s", sim_policy_at(k)->name);
			printf("\nscenarios:\n");
			for (unsigned k = 0; k < sim_scen_count(); k++)
				printf("  %-13s %s\n", sim_scen_at(k)->name, sim_scen_at(k)->desc);
			exit(0);
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			exit(0);
		} else if (!v) {
			fprintf(stderr, "warmlane-sim: %s: missing value or unknown option\n", a);
			return -1;
		} else if (strcmp(a, "--trace") == 0) {
			o->trace = v;
		} else if (strcmp(a, "--workload") == 0) {
			o->workload = v;
		} else if (strcmp(a, "--config") == 0) {
			o->config = v;
		} else if (strcmp(a, "--scenario") == 0) {
			o->scenario = v;
		} else if (strcmp(a, "--policy") == 0) {
			o->policies = v;
		} else if (strcmp(a, "--keys") == 0) {
			o->keys = v;
		} else if (strcmp(a, "--dump") == 0) {
			o->dump = v;
		} else if (strcmp(a, "--debug-tail") == 0) {
			o->debug_tail = v;
		} else if (strcmp(a, "--set") == 0) {
			const char *eq = strchr(v, '=');
			char *end;
			if (o->nset == sizeof(o->set) / sizeof(o->set[0]) || !eq || eq == v)
				goto bad;
			(void)strtod(eq + 1, &end);
			if (end == eq + 1 || *end)
				goto bad;
			o->set[o->nset++] = v;
		} else if (strcmp(a, "--agents") == 0) {
			if (parse_u64(v, &u) < 0 || u < 1 || u > 64)
				goto bad;
			o->agents = (uint32_t)u;
		} else if (strcmp(a, "--seed") == 0) {
			if (parse_u64(v, &o->seed) < 0)
				goto bad;
		} else if (strcmp(a, "--limit") == 0) {
			if (parse_u64(v, &u) < 0)
				goto bad;
			o->limit = (size_t)u;
		} else if (strcmp(a, "--size") == 0) {
			if (parse_u64(v, &u) < 0 || u < 1 || u > 1000000)
				goto bad;
			o->size = (uint32_t)u;
		} else if (strcmp(a, "--turns") == 0 || strcmp(a, "--clients") == 0 ||
			   strcmp(a, "--user-chars") == 0) {
			if (parse_u64(v, &u) < 0 || u < 1 || u > (a[2] == 'u' ? 100000u : 1000u))
				goto bad;
			if (a[2] == 't')
				o->turns = (uint32_t)u;
			else if (a[2] == 'c')
				o->clients = (uint32_t)u;
			else
				o->user_chars = (uint32_t)u;
		} else if (strcmp(a, "--speed") == 0) {
			if (parse_dbl(v, &o->speed) < 0 || o->speed <= 0)
				goto bad;
		} else if (strcmp(a, "--duration") == 0) {
			if (parse_dbl(v, &o->duration_s) < 0 || o->duration_s <= 0)
				goto bad;
		} else if (strcmp(a, "--rate") == 0) {
			if (parse_dbl(v, &o->rate) < 0 || o->rate <= 0)
				goto bad;
		} else if (strcmp(a, "--slo-ms") == 0) {
			if (parse_dbl(v, &o->slo_ms) < 0)
				goto bad;
		} else {
			fprintf(stderr, "warmlane-sim: unknown option %s\n", a);
			return -1;
		}
		i += used;
		continue;
bad:
		fprintf(stderr, "warmlane-sim: bad value for %s: %s\n", a, v);
		return -1;
	}
	return 0;
}

/* Whether some policy of pols reads each --set name: a name none of them
 * looks up (a typo, or another policy's parameter) would silently measure
 * the defaults. Each policy is created once on cfg and destroyed; returns
 * 0, or -1 after naming what is not read on stderr. */
static int check_set_names(const struct opts *o, const struct sim_policy *const *pols, int npol,
			   const struct sim_fleet_cfg *cfg)
{
	unsigned char read[sizeof(o->set) / sizeof(o->set[0])] = { 0 };
	for (int p = 0; p < npol; p++) {
		struct sim_policy_env env = { .nep = cfg->nep, .seed = o->seed, .cfg = cfg,
					      .set = o->set, .nset = o->nset, .set_read = read };
		void *st = pols[p]->create(&env);
		if (!st) {
			fprintf(stderr, "warmlane-sim: out of memory\n");
			return -1;
		}
		pols[p]->destroy(st);
	}
	int rc = 0;
	for (unsigned k = 0; k < o->nset; k++) {
		if (read[k])
			continue;
		fprintf(stderr, "warmlane-sim: --set %.*s: no policy of this run reads that parameter\n",
			(int)(strchr(o->set[k], '=') - o->set[k]), o->set[k]);
		rc = -1;
	}
	return rc;
}

/* Resolves the --policy list into pols; returns how many, or -1. */
static int pick_policies(const char *spec, const struct sim_policy **pols)
{
	int n = 0;
	if (!spec || strcmp(spec, "all") == 0) {
		for (unsigned k = 0; k < sim_policy_count() && n < MAX_POLICIES; k++)
			pols[n++] = sim_policy_at(k);
		return n;
	}
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", spec);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const struct sim_policy *p = sim_policy_find(tok);
		if (!p) {
			fprintf(stderr, "warmlane-sim: unknown policy %s (--list)%s\n", tok,
				strcmp(tok, "warmlane") == 0 ? ": built without core/core.h" : "");
			return -1;
		}
		if (n == MAX_POLICIES)
			return -1;
		pols[n++] = p;
	}
	return n;
}

static int same_records(const struct sim_run *a, const struct sim_run *b)
{
	for (size_t i = 0; i < a->w->n; i++) {
		const struct sim_rec *x = &a->rec[i], *y = &b->rec[i];
		if (x->ep != y->ep || x->status != y->status || x->agent != y->agent ||
		    x->t_start_us != y->t_start_us || x->t_first_us != y->t_first_us ||
		    x->t_end_us != y->t_end_us || x->cached_tokens != y->cached_tokens ||
		    strcmp(x->reason ? x->reason : "", y->reason ? y->reason : "") != 0)
			return 0;
	}
	return a->t_last_us == b->t_last_us;
}

static int load_workload(const struct opts *o, struct sim_workload *w, unsigned *keys, char *err, size_t errlen)
{
	if (o->trace) {
		sim_trace_init(w, "mooncake");
		/* --limit is applied after --speed, so load only what is kept */
		int rc = sim_trace_load_mooncake(w, o->trace, o->limit, err, errlen);
		if (rc < 0)
			return rc;
		*keys = SIM_KEYS_PREFIX;
	} else {
		const char *name = o->workload ? o->workload : "chat";
		struct sim_gen_params gp;
		sim_gen_defaults(name, &gp);
		gp.seed = o->seed;
		if (o->size)
			gp.size = o->size;
		gp.turns = o->turns;
		gp.clients = o->clients;
		gp.user_chars = o->user_chars;
		if (o->duration_s > 0)
			gp.duration_s = o->duration_s;
		if (o->rate > 0)
			gp.rate_scale = o->rate;
		sim_trace_init(w, name);
		int rc = sim_gen_run(name, w, &gp);
		if (rc == -EINVAL) {
			snprintf(err, errlen, "unknown workload %s (chat, groups, mixed, engine)", name);
			return rc;
		}
		if (rc < 0) {
			snprintf(err, errlen, "%s: out of memory", name);
			return rc;
		}
		*keys = strcmp(name, "chat") == 0 ? SIM_KEYS_PREFIX | SIM_KEYS_SESSION : SIM_KEYS_PREFIX;
	}
	if (o->keys) {
		if (strcmp(o->keys, "prefix") == 0)
			*keys = SIM_KEYS_PREFIX;
		else if (strcmp(o->keys, "session") == 0)
			*keys = SIM_KEYS_SESSION;
		else if (strcmp(o->keys, "both") == 0)
			*keys = SIM_KEYS_PREFIX | SIM_KEYS_SESSION;
		else if (strcmp(o->keys, "none") == 0)
			*keys = 0; /* anonymous one-shots: every decision is p2c */
		else {
			snprintf(err, errlen, "bad --keys %s (prefix, session, both, none)", o->keys);
			return -EINVAL;
		}
		if (w->own_keys && *keys != 0) {
			snprintf(err, errlen, "--keys %s: the workload sets its own keys "
				 "(--keys none sends none)", o->keys);
			return -EINVAL;
		}
	}
	sim_trace_scale(w, o->speed > 0 ? o->speed : 1, o->limit);
	sim_trace_derive_keys(w, *keys);
	if (!o->no_turn_count && sim_trace_derive_turns(w) < 0) {
		snprintf(err, errlen, "%s: out of memory", w->name);
		return -ENOMEM;
	}
	return 0;
}

static const char *keys_name(unsigned keys)
{
	switch (keys) {
	case SIM_KEYS_PREFIX: return "prefix";
	case SIM_KEYS_SESSION: return "session";
	case 0: return "none";
	default: return "session+prefix";
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .seed = 1, .slo_ms = 2000 };
	char err[512];
	int status = 0;
	if (parse_args(argc, argv, &o) < 0) {
		usage(stderr);
		return 2;
	}
	if (o.trace && o.skip_missing) {
		struct stat st;
		if (stat(o.trace, &st) < 0) {
			fprintf(stderr, "warmlane-sim: %s absent: skipped\n", o.trace);
			return 77;
		}
	}
	const struct sim_scen *sc = NULL;
	if (o.scenario && !(sc = sim_scen_find(o.scenario))) {
		fprintf(stderr, "warmlane-sim: unknown scenario %s (--list)\n", o.scenario);
		return 2;
	}
	const struct sim_policy *pols[MAX_POLICIES];
	int npol = pick_policies(o.policies, pols);
	if (npol < 0)
		return 2;

	struct sim_workload w;
	unsigned keys = 0;
	if (load_workload(&o, &w, &keys, err, sizeof(err)) < 0) {
		fprintf(stderr, "warmlane-sim: %s\n", err);
		sim_trace_finish(&w);
		return 2;
	}

	/* fleet: the file (or the built-in one), then the scenario's additions */
	char *text = NULL;
	if (o.config && sim_cfg_read_file(o.config, &text, err, sizeof(err)) < 0) {
		fprintf(stderr, "warmlane-sim: %s\n", err);
		sim_trace_finish(&w);
		return 2;
	}
	const char *base = text ? text : sim_cfg_default_text;
	struct sim_fleet_cfg cfg0 = { 0 }, cfg = { 0 };
	int rc = sim_cfg_parse(&cfg0, base, o.config ? o.config : "built-in", err, sizeof(err));
	char *full = NULL;
	if (rc == 0 && sc) {
		char add[1024];
		sim_scen_faults(sc, &w, &cfg0, add, sizeof(add));
		full = malloc(strlen(base) + strlen(add) + 1);
		if (!full) {
			rc = -ENOMEM;
			snprintf(err, sizeof(err), "out of memory");
		} else {
			strcpy(full, base);
			strcat(full, add);
			rc = sim_cfg_parse(&cfg, full, o.config ? o.config : "built-in+scenario", err, sizeof(err));
		}
	} else if (rc == 0) {
		rc = sim_cfg_parse(&cfg, base, o.config ? o.config : "built-in", err, sizeof(err));
	}
	free(text);
	free(full);
	if (rc < 0) {
		fprintf(stderr, "warmlane-sim: %s\n", err);
		goto out;
	}

	if (check_set_names(&o, pols, npol, &cfg) < 0) {
		rc = -EINVAL;
		goto out;
	}

	uint32_t agents = o.agents ? o.agents : sc ? sc->agents : 1;
	FILE *info = o.csv ? stderr : stdout;
	fprintf(info, "# warmlane-sim seed=%llu workload=%s requests=%zu keys=%s endpoints=%u agents=%u "
		      "scenario=%s speed=%g slo_ms=%g",
		(unsigned long long)o.seed, w.name, w.n, keys_name(keys), cfg.nep, agents,
		sc ? sc->name : "none", o.speed > 0 ? o.speed : 1, o.slo_ms);
	for (unsigned k = 0; k < o.nset; k++)
		fprintf(info, " set:%s", o.set[k]);
	if (o.log_ingest)
		fprintf(info, " log-ingest");
	if (o.shared_hints)
		fprintf(info, o.shared_hints == 2 ? " hints-lone" : " shared-hints");
	if (o.no_turn_count)
		fprintf(info, " no-turn-count");
	if (o.http_check)
		fprintf(info, " http-check");
	if (o.engine_poll_ms)
		fprintf(info, " engine-poll=%llums", (unsigned long long)o.engine_poll_ms);
	fprintf(info, "\n");
	sim_stats_print_header(stdout, o.csv);

	FILE *dump = NULL, *tail = NULL;
	if (o.dump && !(dump = fopen(o.dump, "w"))) {
		fprintf(stderr, "warmlane-sim: %s: %s\n", o.dump, strerror(errno));
		rc = -errno;
		goto out;
	}
	if (o.debug_tail && !(tail = fopen(o.debug_tail, "w"))) {
		fprintf(stderr, "warmlane-sim: %s: %s\n", o.debug_tail, strerror(errno));
		rc = -errno;
		if (dump)
			fclose(dump);
		goto out;
	}
	struct sim_scen_result res[MAX_POLICIES];
	struct sim_summary sums[MAX_POLICIES];
	for (int p = 0; p < npol; p++) {
		struct sim_run run, ref = { 0 };
		struct sim_run_opts ro = { .policy = pols[p], .agents = agents, .seed = o.seed,
					   .set = o.set, .nset = o.nset, .log_ingest = o.log_ingest,
					   .shared_hints = o.shared_hints, .detail = tail != NULL,
					   .engine_poll_us = (int64_t)o.engine_poll_ms * 1000,
					   .check_us = o.http_check ? 2000000 : 0 };
		if (sim_fleet_run(&cfg, &w, &ro, &run, err, sizeof(err)) < 0) {
			fprintf(stderr, "warmlane-sim: %s\n", err);
			rc = -ENOMEM;
			break;
		}
		sim_stats_summarize(&run, o.slo_ms, &sums[p]);
		sim_stats_print_row(stdout, &sums[p], o.csv);
		fflush(stdout);
		if (dump)
			sim_stats_dump(dump, &run, p == 0);
		if (tail)
			sim_stats_debug_tail(tail, &run, p == 0);
		if (o.engine_poll_ms && agents > 1 && !o.csv &&
		    engine_balance(&cfg, &w, &ro, &run, o.check, &status) < 0) {
			rc = -ENOMEM;
			sim_fleet_run_finish(&run);
			break;
		}
		if (sc) {
			struct sim_summary ref_sum;
			int have_ref = 0;
			if (sc->ref != SIM_REF_NONE) {
				struct sim_run_opts ro1 = ro;
				if (sc->ref == SIM_REF_ONEAGENT)
					ro1.agents = 1;
				if (sim_fleet_run(sc->ref == SIM_REF_NOFAULT ? &cfg0 : &cfg, &w, &ro1, &ref, err,
						  sizeof(err)) < 0) {
					fprintf(stderr, "warmlane-sim: %s\n", err);
					rc = -ENOMEM;
					sim_fleet_run_finish(&run);
					break;
				}
				sim_stats_summarize(&ref, o.slo_ms, &ref_sum);
				have_ref = 1;
			}
			sim_scen_analyse(sc, &run, have_ref ? &ref : NULL, &sums[p], have_ref ? &ref_sum : NULL,
					 &res[p]);
			if (have_ref)
				sim_fleet_run_finish(&ref);
		}
		if (o.check) {
			struct sim_run again;
			if (sim_fleet_run(&cfg, &w, &ro, &again, err, sizeof(err)) == 0) {
				int same = same_records(&run, &again);
				fprintf(stderr, "%s %s: two runs with seed %llu identical\n", same ? "ok  " : "FAIL",
					pols[p]->name, (unsigned long long)o.seed);
				status |= !same;
				sim_fleet_run_finish(&again);
			}
		}
		/* --debug-tail explains every decision first: the run must
		 * be the run without it, each explanation its decision. */
		if (tail && pols[p]->detail) {
			struct sim_run plain;
			struct sim_run_opts ro0 = ro;
			ro0.detail = 0;
			if (sim_fleet_run(&cfg, &w, &ro0, &plain, err, sizeof(err)) == 0) {
				size_t differs = 0;
				for (size_t i = 0; i < w.n; i++)
					differs += run.rec[i].detail &&
						   (strcmp(run.rec[i].detail, "explain-differs") == 0 ||
						    strcmp(run.rec[i].detail, "unexplained") == 0);
				int same = same_records(&run, &plain) && differs == 0;
				fprintf(stderr, "%s %s: explained decisions are the decisions (%zu differ)\n",
					same ? "ok  " : "FAIL", pols[p]->name, differs);
				status |= !same;
				sim_fleet_run_finish(&plain);
			}
		}
		sim_fleet_run_finish(&run);
	}
	if (dump)
		fclose(dump);
	if (tail)
		fclose(tail);
	if (rc == 0 && sc && !o.csv) {
		printf("\n# scenario %s: %s\n", sc->name, sc->desc);
		sim_scen_print_header(stdout, sc);
		for (int p = 0; p < npol; p++)
			sim_scen_print_row(stdout, sc, pols[p]->name, &res[p]);
	}
	if (rc == 0 && o.check) {
		if (sc)
			for (int p = 0; p < npol; p++)
				status |= sim_scen_expect(sc, pols[p]->name, &res[p], stderr) != 0;
		/* hit-rate ordering, where the policies were run, within a point
		 * (workloads with little reuse tie every policy) */
		const char *order[] = { "oracle", "warmlane", "round-robin" };
		double prev = -1;
		const char *prev_name = NULL;
		if (!sc || strcmp(sc->name, "baseline") == 0) {
			for (size_t k = 0; k < 3; k++) {
				for (int p = 0; p < npol; p++) {
					if (strcmp(pols[p]->name, order[k]) != 0)
						continue;
					if (prev_name) {
						int ok = sums[p].hit_rate <= prev + 0.01;
						fprintf(stderr, "%s hit rate %s %.4f >= %s %.4f\n", ok ? "ok  " : "FAIL",
							prev_name, prev, order[k], sums[p].hit_rate);
						status |= !ok;
					}
					prev = sums[p].hit_rate;
					prev_name = order[k];
				}
			}
		}
	}
out:
	sim_cfg_finish(&cfg0);
	sim_cfg_finish(&cfg);
	sim_trace_finish(&w);
	if (rc < 0)
		return 2;
	return status ? 1 : 0;
}
