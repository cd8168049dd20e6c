/* bench_core.c - bench-core: per-call latency of core_decide, core_observe and core_complete, allocations, bytes per map entry. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#include "core.h"

/* Median and 99th percentile of n samples (sorted in place), minus the
 * clock's own cost. */
static void pct(uint64_t *v, size_t n, uint64_t overhead, uint64_t *med,
		uint64_t *p99)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	uint64_t m = v[n / 2], q = v[(size_t)(n * 0.99)];
	*med = m > overhead ? m - overhead : 0;
	*p99 = q > overhead ? q - overhead : 0;
}

static uint64_t clock_overhead(uint64_t *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t t0 = ns_now();
		uint64_t t1 = ns_now();
		buf[i] = t1 - t0;
	}
	qsort(buf, n, sizeof(*buf), cmp_u64);
	return buf[n / 2];
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench-core: %s: %s\n", what, strerror(-rc));
	exit(1);
}

#define ITERS 100000
#define BASE_MS 1000000000ull

struct setup {
	struct core *c;
	int *ep;
	int n_ep;
	uint32_t entries;
	uint64_t now;
};

static uint64_t session_of(uint32_t i)
{
	return (uint64_t)i * 0x9e3779b97f4a7c15ull + 1;
}

/* e2e: the endpoints' end-to-end EWMAs warm too (an agent with the log
 * input), so that decisions judge two signals. */
/* The timed request of session sess; the fill uses it too, since the
 * caller scopes the affinity key (an entry filled without it is never
 * hit). */
static struct core_request bench_request(uint64_t sess)
{
	return (struct core_request){
		.model = { "llama-3-70b", 11 }, .stream = true,
		.prefix = { { true, 17 }, { true, 18 }, { false, 0 } },
		.caller = { true, 99 }, .session = { true, sess },
		.turn = 3, /* a conversation's turn: its entry keeps it */
	};
}

static void setup(struct setup *s, int n_ep, uint32_t entries, bool e2e)
{
	struct core_params p;
	core_params_defaults(&p); /* capacity 1,000,000 */
	int rc = core_create(&s->c, &p);
	if (rc < 0)
		die("core_create", rc);
	s->n_ep = n_ep;
	s->entries = entries;
	s->now = BASE_MS;
	s->ep = calloc((size_t)n_ep, sizeof(*s->ep));
	for (int i = 0; i < n_ep; i++) {
		char name[32];
		snprintf(name, sizeof(name), "srv%d", i);
		static const char *const models[] = { "llama-3-70b", "qwen-2.5-72b" };
		struct core_endpoint_config cfg = {
			.backend = "llm", .server = name, .models = models,
			.n_models = 2, .weight = 1 + i % 3, .cost_per_mtok = 0.5,
		};
		s->ep[i] = core_endpoint_add(s->c, &cfg, s->now);
		if (s->ep[i] < 0)
			die("core_endpoint_add", s->ep[i]);
		/* Warm: statistics as a snapshot would restore them. */
		struct core_endpoint_stats st = {
			.ewma_ms = { 400 + i % 50, 150 + i % 20 },
			.samples = { 100, 100 },
			.idle_ms = 1,
		};
		if (e2e) {
			st.e2e_ewma_ms[0] = st.e2e_ewma_ms[1] = 120 + i % 30;
			st.e2e_samples[0] = st.e2e_samples[1] = 100;
		}
		core_endpoint_stats_import(s->c, s->ep[i], s->now, &st);
	}
	/* Entries for sessions 0 .. entries-1, spread over the endpoints. */
	struct core_rng rng;
	core_rng_seed(&rng, 1);
	for (uint32_t i = 0; i < entries; i++) {
		struct core_request r = bench_request(session_of(i));
		uint64_t akey;
		core_identity(s->c, &r, &akey);
		struct core_affinity_record rec = {
			.akey = akey, .endpoint = s->ep[i % (uint32_t)n_ep], .idle_ms = 1000,
		};
		rc = core_affinity_import(s->c, &rec, s->now);
		if (rc < 0)
			die("core_affinity_import", rc);
	}
}

static void finish(struct setup *s)
{
	core_destroy(s->c);
	free(s->ep);
}

enum bcase { DECIDE_HIT, DECIDE_MISS, OBSERVE, DECIDE_HIT_AFTER_OBSERVE, COMPLETE,
	     DECIDE_HIT_AFTER_BOTH, DECIDE_HIT_AFTER_OTHER, DECIDE_ANON };

static void run(struct setup *s, enum bcase kind, uint64_t *t, uint64_t overhead)
{
	static const char *const names[] = { "decide-hit", "decide-miss", "observe",
					     "decide-hit-after-observe", "complete",
					     "decide-hit-after-both", "decide-hit-after-other",
					     "decide-anon" };
	struct core_rng rng, pick;
	core_rng_seed(&rng, 7);
	core_rng_seed(&pick, 11 + (uint64_t)kind);
	uint64_t hits = 0, p2c = 0;
	struct core_request req = bench_request(0);
	uint64_t before = bench_allocs;
	for (uint32_t i = 0; i < ITERS; i++) {
		uint32_t k = (uint32_t)(core_rng_next(&pick) % s->entries);
		struct core_decision d;
		if (kind == OBSERVE) {
			req.session = (struct core_id){ true, session_of(k) };
			uint64_t akey;
			core_identity(s->c, &req, &akey);
			struct core_feedback fb = {
				.endpoint = s->ep[k % (uint32_t)s->n_ep], .status = 200,
				.tr_ms = 120 + (int64_t)(k % 100), .retry_after_ms = -1,
				.stream = true, .has_akey = true, .akey = akey,
			};
			uint64_t t0 = ns_now();
			core_observe(s->c, &fb, s->now);
			t[i] = ns_now() - t0;
		} else if (kind == COMPLETE) {
			/* The log line of a response feedback told: in-flight
			 * down, end-to-end EWMA up; one in ten a server cut
			 * (breaker failure, map eviction). */
			req.session = (struct core_id){ true, session_of(k) };
			uint64_t akey;
			core_identity(s->c, &req, &akey);
			struct core_completion cc = {
				.endpoint = s->ep[k % (uint32_t)s->n_ep], .status = 200,
				.end = i % 10 == 9 ? CORE_END_SERVER_CUT : CORE_END_COMPLETE,
				.tr_ms = 120 + (int64_t)(k % 100),
				.total_ms = 2000 + (int64_t)(k % 1000),
				.bytes = 8192, .stream = true, .feedback_seen = true,
				.has_akey = true, .akey = akey,
			};
			uint64_t t0 = ns_now();
			core_complete(s->c, &cc, s->now);
			t[i] = ns_now() - t0;
		} else {
			if (kind == DECIDE_HIT_AFTER_OBSERVE ||
			    kind == DECIDE_HIT_AFTER_BOTH ||
			    kind == DECIDE_HIT_AFTER_OTHER) {
				/* Untimed: an EWMA moves before every decision,
				 * as in a live agent, so no median is reused;
				 * AFTER_OTHER: the EWMA of the other kind
				 * (non-streamed), whose median the streamed
				 * decision does not read. */
				struct core_feedback fb = {
					.endpoint = s->ep[i % (uint32_t)s->n_ep],
					.status = 200, .tr_ms = 100 + (int64_t)(i % 97),
					.retry_after_ms = -1,
					.stream = kind != DECIDE_HIT_AFTER_OTHER,
				};
				core_observe(s->c, &fb, s->now);
			}
			if (kind == DECIDE_HIT_AFTER_BOTH) {
				/* With the log input: the end of another
				 * request too. */
				struct core_completion cc = {
					.endpoint = s->ep[(i + 3) % (uint32_t)s->n_ep],
					.status = 200, .end = CORE_END_COMPLETE,
					.tr_ms = 120, .total_ms = 2000 + (int64_t)(i % 997),
					.bytes = 8192, .stream = true, .feedback_seen = true,
				};
				core_complete(s->c, &cc, s->now);
			}
			/* Misses use sessions beyond the filled ones; an
			 * anonymous request has no identity at all (p2c). */
			uint64_t sess = kind != DECIDE_MISS ? session_of(k)
							    : session_of(s->entries + 1 + i);
			req.session = (struct core_id){ true, sess };
			if (kind == DECIDE_ANON)
				req = (struct core_request){
					.model = { "llama-3-70b", 11 }, .stream = true,
				};
			uint64_t t0 = ns_now();
			core_decide(s->c, &req, s->now, &rng, &d);
			t[i] = ns_now() - t0;
			hits += d.reason == CORE_REASON_AFFINITY;
			p2c += d.reason == CORE_REASON_P2C;
			core_endpoint_complete(s->c, d.endpoint);
		}
		if (i % 1000 == 999)
			s->now++;
	}
	uint64_t n_alloc = bench_allocs - before;
	uint64_t med, p99;
	pct(t, ITERS, overhead, &med, &p99);
	printf("%s endpoints=%d entries=%u median_ns=%llu p99_ns=%llu mallocs=%llu",
	       names[kind], s->n_ep, s->entries, (unsigned long long)med,
	       (unsigned long long)p99, (unsigned long long)n_alloc);
	if (kind == DECIDE_ANON)
		printf(" p2c_share=%.3f", (double)p2c / ITERS);
	else if (kind != OBSERVE && kind != COMPLETE)
		printf(" affinity_share=%.3f", (double)hits / ITERS);
	printf("\n");
	fflush(stdout);
}

static void machine(void)
{
	char model[256] = "unknown";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f)) {
			if (strncmp(line, "model name", 10) == 0) {
				char *c = strchr(line, ':');
				if (c) {
					c++;
					while (*c == ' ' || *c == '\t')
						c++;
					c[strcspn(c, "\n")] = '\0';
					snprintf(model, sizeof(model), "%s", c);
				}
				break;
			}
		}
		fclose(f);
	}
	printf("machine nproc=%ld cpu=\"%s\"\n", sysconf(_SC_NPROCESSORS_ONLN), model);
}

static long rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv)
{
	static const int endpoints[] = { 8, 64, 512 };
	static const uint32_t entries[] = { 1000, 1000000 };
	int only_ep = argc > 1 ? atoi(argv[1]) : 0;
	uint64_t *t = malloc(ITERS * sizeof(*t));
	if (t == NULL)
		return 1;

	machine();
	uint64_t overhead = clock_overhead(t, ITERS);
	printf("clock_overhead_ns=%llu (subtracted)\n", (unsigned long long)overhead);

	/* Map memory: designed bytes per entry, and resident growth when a
	 * 1,000,000-entry map is filled. */
	long rss0 = rss_kib();
	struct setup s;
	setup(&s, 8, 1000000, false);
	long rss1 = rss_kib();
	struct core_stats st;
	core_stats(s.c, &st);
	finish(&s);
	printf("bytes_per_entry=%llu\n", (unsigned long long)
	       ((st.affinity_bytes + st.affinity_capacity - 1) / st.affinity_capacity));
	printf("rss_bytes_per_entry=%.1f entries=%u\n",
	       (double)(rss1 - rss0) * 1024 / st.affinity_entries, st.affinity_entries);

	for (size_t e = 0; e < sizeof(endpoints) / sizeof(endpoints[0]); e++) {
		if (only_ep && endpoints[e] != only_ep)
			continue;
		for (size_t m = 0; m < sizeof(entries) / sizeof(entries[0]); m++) {
			setup(&s, endpoints[e], entries[m], false);
			run(&s, DECIDE_HIT, t, overhead);
			run(&s, DECIDE_MISS, t, overhead);
			run(&s, DECIDE_ANON, t, overhead);
			run(&s, OBSERVE, t, overhead);
			run(&s, DECIDE_HIT_AFTER_OBSERVE, t, overhead);
			run(&s, DECIDE_HIT_AFTER_OTHER, t, overhead);
			run(&s, COMPLETE, t, overhead);
			finish(&s);
			/* Fresh: COMPLETE's cuts, with no feedback success
			 * between them, have opened the breakers. */
			setup(&s, endpoints[e], entries[m], true);
			run(&s, DECIDE_HIT_AFTER_BOTH, t, overhead);
			finish(&s);
		}
	}
	free(t);
	return 0;
}
