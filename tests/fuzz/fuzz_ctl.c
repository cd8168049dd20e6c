/* fuzz_ctl.c - libFuzzer harness: arbitrary bytes as lines to the command socket (agent/ctl.c, ctl_execute). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config.h"
#include "core.h"
#include "ctl.h"
#include "log.h"
#include "route.h"
#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CTL_CHECK(c) \
	do { \
		if (!(c)) { \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", \
				__FILE__, __LINE__, #c); \
			abort(); \
		} \
	} while (0)

static const char cfg_yaml[] =
	"endpoints:\n"
	"  - { backend: llm, server: a, models: [llama] }\n"
	"  - { backend: llm, server: b, keys: [k1, k2] }\n"
	"  - { backend: llm, server: c, weight: 2 }\n"
	"  - { backend: other, server: d }\n";

static uv_loop_t loop;
static struct config cfg;
static struct server srv;
static struct ctl ctl;
static char out[CTL_ANSWER_MAX];

/* A server on a loop that never runs (nothing listens): ctl_execute needs
 * only its route and counters. */
static void setup(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	/* set and clear log a line each: millions of them otherwise. */
	log_set_level(LOG_LEVEL_ERROR);
	char err[1024];
	CTL_CHECK(uv_loop_init(&loop) == 0);
	CTL_CHECK(config_init(&cfg) == 0);
	CTL_CHECK(config_load_data(&cfg, "f.yaml", cfg_yaml, sizeof(cfg_yaml) - 1,
				   err, sizeof(err)) == 0);
	CTL_CHECK(server_init(&srv, &loop, &cfg) == 0);
	ctl.loop = &loop;
	ctl.srv = &srv;
	ctl.start_ms = uv_now(&loop);
	/* Requests in flight, so that explain has loads to weigh. */
	struct route_request req;
	memset(&req, 0, sizeof(req));
	for (int i = 0; i < 12; i++) {
		char s[8];
		snprintf(s, sizeof(s), "s%d", i % 4);
		req.args[ROUTE_ARG_SESSION] = spop_data_string(s, strlen(s));
		req.now_ms = uv_now(&loop);
		struct route_decision d;
		route_decide(&srv.route, &req, &d);
	}
}

/* What a read-only command must leave as it was. */
static unsigned long long fingerprint(void)
{
	const struct core *c = srv.route.core;
	uint64_t now = uv_now(&loop);
	unsigned long long h = srv.route.rng.state;
	struct core_stats st;
	core_stats(c, &st);
	h = h * 31 + st.affinity_entries + st.affinity_hits * 7 + st.affinity_misses * 13;
	for (int r = 0; r < CORE_REASON_COUNT; r++)
		h = h * 31 + st.decisions[r];
	for (int i = core_endpoint_next(c, -1); i >= 0; i = core_endpoint_next(c, i)) {
		struct core_endpoint_info in;
		CTL_CHECK(core_endpoint_info(c, i, now, &in) == 0);
		h = h * 31 + in.in_flight;
		h = h * 31 + in.decisions + (unsigned)in.breaker * 3 + in.drained;
	}
	return h;
}

static bool first_word(const char *p, size_t n, const char *w)
{
	size_t i = 0, k = strlen(w);
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	return n - i >= k && memcmp(p + i, w, k) == 0;
}

/* Each line (at most 64) a command: a bounded answer ending with the empty
 * line, and no state changed but by set and clear. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setup();
	const char *p = (const char *)data, *end = p + size;
	for (unsigned lines = 0; p < end && lines < 64; lines++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		if (len > CTL_LINE_MAX)
			len = CTL_LINE_MAX;
		bool writes = first_word(p, len, "set") || first_word(p, len, "clear");
		unsigned long long before = fingerprint();
		bool close_after;
		size_t n = ctl_execute(&ctl, p, len, out, sizeof(out), &close_after);
		CTL_CHECK(n < sizeof(out));
		CTL_CHECK(close_after ? n == 0 : (n >= 1 && out[n - 1] == '\n'));
		CTL_CHECK(out[n] == '\0' || n == 0);
		CTL_CHECK(strlen(out) == n);
		if (!writes)
			CTL_CHECK(fingerprint() == before);
		p += len + (nl != NULL ? 1 : 0);
		if (nl == NULL)
			break;
	}
	return 0;
}
