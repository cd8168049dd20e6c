/* bench_notify.c - bench-notify: per-call latency and allocations of notify_handle on `route` NOTIFYs as HAProxy sends them (parse, decide, ACK). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "config.h"
#include "log.h"
#include "notify.h"
#include "route.h"
#include "spop.h"
#include "stats.h"

#define ITERS 200000
#define SESSIONS 1000
#define BASE_MS 1000000000ull

/* One NOTIFY payload: `route` with HAProxy's ten arguments (warmlane.spoe.
 * conf), session i; a feedback message first when with_fb. Returns the
 * payload length. */
static size_t build(uint8_t *buf, size_t cap, uint32_t i, bool with_fb)
{
	struct spop_writer w;
	char session[32];
	snprintf(session, sizeof(session), "sess-%u", i);
	spop_writer_init(&w, buf, cap);
	if (with_fb) {
		const uint8_t h[] = { 8, 'f', 'e', 'e', 'd', 'b', 'a', 'c', 'k', 3 };
		spop_put_bytes(&w, h, sizeof(h));
		struct spop_data srv = spop_data_string("llm/gpu1", 8);
		struct spop_data st = spop_data_int64(200);
		struct spop_data tr = spop_data_string("412", 3);
		spop_put_kv(&w, "server", &srv);
		spop_put_kv(&w, "status", &st);
		spop_put_kv(&w, "tr", &tr);
	}
	const uint8_t h[] = { 5, 'r', 'o', 'u', 't', 'e', 10 };
	spop_put_bytes(&w, h, sizeof(h));
	struct spop_data d = spop_data_string(session, strlen(session));
	spop_put_kv(&w, "session", &d);
	d = spop_data_int64((int64_t)(i * 0x9e3779b97f4a7c15ull));
	spop_put_kv(&w, "prefix1", &d);
	d = spop_data_null();
	spop_put_kv(&w, "prefix2", &d);
	spop_put_kv(&w, "prefix3", &d);
	spop_put_kv(&w, "install", &d);
	d = spop_data_int64(0x1234567890abcdefll);
	spop_put_kv(&w, "caller", &d);
	d = (struct spop_data){ .type = SPOP_DATA_IPV4,
				.u.ipv4 = { 10, 0, 0, 7 } };
	spop_put_kv(&w, "src", &d);
	d = spop_data_string("m1", 2);
	spop_put_kv(&w, "model", &d);
	d = spop_data_bool(true);
	spop_put_kv(&w, "stream", &d);
	d = spop_data_string("7F000001:C3A2_7F000001:1F90_6930A1B2_0001:1F2B", 46);
	spop_put_kv(&w, "id", &d);
	return w.overflow ? 0 : w.len;
}

static void run(const char *label, struct route *r, struct stats *st,
		bool with_fb, uint64_t *t, uint64_t overhead)
{
	static uint8_t payloads[SESSIONS][512];
	static size_t lens[SESSIONS];
	for (uint32_t i = 0; i < SESSIONS; i++) {
		lens[i] = build(payloads[i], sizeof(payloads[i]), i, with_fb);
		if (lens[i] == 0) {
			fprintf(stderr, "bench-notify: payload does not fit\n");
			exit(1);
		}
	}
	uint8_t out[2048]; /* CONN_WBUF_SIZE */
	struct notify_deferred later;
	uint64_t a0 = bench_allocs;
	for (uint32_t i = 0; i < ITERS; i++) {
		uint32_t k = i % SESSIONS;
		struct spop_frame f = {
			.type = SPOP_FRAME_NOTIFY,
			.flags = SPOP_FLAG_FIN,
			.stream_id = i,
			.frame_id = 1,
			.payload = payloads[k],
			.payload_len = lens[k],
		};
		struct notify_ctx ctx = {
			.route = r,
			.stats = st,
			.now_ms = BASE_MS + i,
			.now_unix_s = 1700000000,
			.conn_id = 1,
		};
		enum spop_status status;
		uint64_t t0 = ns_now();
		ptrdiff_t n = notify_handle(&ctx, &f, out, sizeof(out), &later,
					    &status);
		notify_run_deferred(&ctx, &later);
		t[i] = ns_now() - t0;
		if (n <= 0) {
			fprintf(stderr, "bench-notify: notify_handle failed\n");
			exit(1);
		}
	}
	uint64_t a = bench_allocs - a0;
	qsort(t, ITERS, sizeof(*t), cmp_u64);
	uint64_t med = t[ITERS / 2], p99 = t[(size_t)(ITERS * 0.99)];
	printf("%s payload_bytes=%zu median_ns=%llu p99_ns=%llu mallocs=%llu\n",
	       label, lens[0],
	       (unsigned long long)(med > overhead ? med - overhead : 0),
	       (unsigned long long)(p99 > overhead ? p99 - overhead : 0),
	       (unsigned long long)a);
}

int main(void)
{
	static const char yaml[] =
		"endpoints:\n"
		"  - {backend: llm, server: gpu1, models: [m1]}\n"
		"  - {backend: llm, server: gpu2, models: [m1]}\n"
		"  - {backend: llm, server: gpu3, models: [m1]}\n"
		"  - {backend: llm, server: gpu4, models: [m1]}\n";
	char err[1024];
	struct config cfg;
	struct route r;
	struct stats st;
	memset(&st, 0, sizeof(st));
	if (config_init(&cfg) < 0 ||
	    config_load_data(&cfg, "bench", yaml, sizeof(yaml) - 1, err,
			     sizeof(err)) < 0) {
		fprintf(stderr, "bench-notify: config: %s\n", err);
		return 1;
	}
	if (route_init(&r, &cfg) < 0) {
		fprintf(stderr, "bench-notify: route_init failed\n");
		return 1;
	}
	log_set_level(LOG_LEVEL_ERROR);
	uint64_t *t = malloc(ITERS * sizeof(*t));
	if (t == NULL)
		return 1;
	for (size_t i = 0; i < ITERS; i++) {
		uint64_t t0 = ns_now();
		t[i] = ns_now() - t0;
	}
	qsort(t, ITERS, sizeof(*t), cmp_u64);
	uint64_t overhead = t[ITERS / 2];
	printf("clock_overhead_ns=%llu (subtracted)\n",
	       (unsigned long long)overhead);
	run("route", &r, &st, false, t, overhead);
	run("feedback+route", &r, &st, true, t, overhead);
	/* policy.mode shadow (docs/shadow.md): the same path, another ACK */
	cfg.mode = CONFIG_MODE_SHADOW;
	run("shadow-route", &r, &st, false, t, overhead);
	run("shadow-feedback+route", &r, &st, true, t, overhead);
	free(t);
	route_finish(&r);
	config_finish(&cfg);
	return 0;
}
