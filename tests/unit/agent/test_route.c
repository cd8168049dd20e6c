/* test_route.c - agent: the core through route_decide/route_feedback, argument mapping, the retry budget. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "harness.h"
#include "route_fx.h"
#include "route.h"
#include "stats.h"

static void fb_init(struct route_feedback *fb)
{
	memset(fb, 0, sizeof(*fb));
	for (int i = 0; i < ROUTE_FB_COUNT; i++)
		fb->args[i] = spop_data_null();
}

/* The feedback HAProxy sends after a response from d's server. */
static void fb_for(struct route_feedback *fb, const struct route_decision *d,
		   int status, char *path, char *akey)
{
	fb_init(fb);
	snprintf(path, 300, "%s/%s", d->backend, d->server);
	fb->args[ROUTE_FB_SERVER] = str(path);
	fb->args[ROUTE_FB_STATUS] = spop_data_int64(status);
	fb->args[ROUTE_FB_TR] = str("120");
	if (d->key != NULL)
		fb->args[ROUTE_FB_KEY] = str(d->key);
	if (d->has_akey) {
		snprintf(akey, 17, "%016llx", (unsigned long long)d->akey);
		fb->args[ROUTE_FB_AKEY] = str(akey);
	}
}

START_TEST(core_by_model)
{
	struct config cfg;
	struct route r;
	struct route_request req;
	struct route_decision d;
	load(&cfg, "endpoints:\n"
		   "  - {backend: a, server: s1, models: [m1]}\n"
		   "  - {backend: a, server: s2}\n"
		   "  - {backend: b, server: s3, models: [m2], keys: [k3, k4]}\n");
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	ck_assert_ptr_nonnull(r.core);
	/* One core endpoint per key id. */
	struct core_stats cs;
	core_stats(r.core, &cs);
	ck_assert_uint_eq(cs.endpoints, 4);
	req_init(&req);

	/* m1: s1 and s2 (no models: every model); no identity: p2c. */
	req.args[ROUTE_ARG_MODEL] = str("m1");
	bool s1 = false, s2 = false;
	for (int i = 0; i < 64; i++) {
		route_decide(&r, &req, &d);
		ck_assert_int_eq(d.reason, ROUTE_P2C);
		ck_assert(!d.has_akey);
		ck_assert_str_eq(d.backend, "a");
		ck_assert_ptr_null(d.key);
		s1 |= strcmp(d.server, "s1") == 0;
		s2 |= strcmp(d.server, "s2") == 0;
		ck_assert(strcmp(d.server, "s1") == 0 || strcmp(d.server, "s2") == 0);
		idle_poll(&r);
	}
	ck_assert(s1 && s2);

	/* m2: s2 and s3, s3 with one of its keys. */
	req.args[ROUTE_ARG_MODEL] = str("m2");
	int s3 = 0;
	for (int i = 0; i < 64; i++) {
		route_decide(&r, &req, &d);
		if (strcmp(d.server, "s3") == 0) {
			s3++;
			ck_assert(strcmp(d.key, "k3") == 0 || strcmp(d.key, "k4") == 0);
			ck_assert_str_eq(d.backend, "b");
		} else {
			ck_assert_str_eq(d.server, "s2");
			ck_assert_ptr_null(d.key);
		}
		idle_poll(&r);
	}
	ck_assert_int_gt(s3, 0);

	/* A model name matches exactly, not as a prefix: "m" has only s2. */
	req.args[ROUTE_ARG_MODEL] = str("m");
	route_decide(&r, &req, &d);
	ck_assert_str_eq(d.server, "s2");
	route_finish(&r);
	route_finish(&r); /* twice is fine */
	config_finish(&cfg);

	load(&cfg, "endpoints:\n  - {backend: a, server: s1, models: [m1]}\n");
	route_init(&r, &cfg);
	req.args[ROUTE_ARG_MODEL] = str("m9");
	req.args[ROUTE_ARG_SESSION] = str("sess");
	route_decide(&r, &req, &d);
	ck_assert_int_eq(d.reason, ROUTE_NO_MODEL);
	ck_assert_ptr_null(d.backend);
	ck_assert_ptr_null(d.server);
	ck_assert_ptr_null(d.key);
	ck_assert(d.has_akey); /* the identity is still named */
	/* A model of another type or empty counts as absent. */
	req.args[ROUTE_ARG_MODEL] = spop_data_int64(7);
	route_decide(&r, &req, &d);
	ck_assert_int_eq(d.reason, ROUTE_HASH);
	ck_assert_str_eq(d.server, "s1");
	req.args[ROUTE_ARG_MODEL] = str("");
	route_decide(&r, &req, &d);
	ck_assert_str_eq(d.server, "s1");
	route_finish(&r);
	config_finish(&cfg);

	ck_assert_int_eq(config_init(&cfg), 0);
	route_init(&r, &cfg);
	route_decide(&r, &req, &d);
	ck_assert_int_eq(d.reason, ROUTE_NONE);
	ck_assert_ptr_null(d.server);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

static const char *const three =
	"endpoints:\n"
	"  - {backend: llm, server: g1, keys: [ka]}\n"
	"  - {backend: llm, server: g2}\n"
	"  - {backend: llm, server: g3}\n";

/* A session sticks to its server once a success is fed back; five 500s
 * open that server's breaker and the session moves. */
START_TEST(affinity_and_breaker)
{
	struct config cfg;
	struct route r;
	struct route_request req;
	struct route_decision d;
	struct route_feedback fb;
	char path[300], akey[17], first[64];
	load(&cfg, three);
	route_init(&r, &cfg);
	req_init(&req);
	req.args[ROUTE_ARG_SESSION] = str("conversation-1");
	req.now_ms = 1000;

	route_decide(&r, &req, &d);
	ck_assert_int_eq(d.reason, ROUTE_HASH);
	ck_assert(d.has_akey);
	snprintf(first, sizeof(first), "%s", d.server);
	fb_for(&fb, &d, 200, path, akey);
	fb.now_ms = 1100;
	route_feedback(&r, &fb);
	idle_poll(&r);

	for (int i = 0; i < 5; i++) {
		req.now_ms = 2000 + (uint64_t)i * 100;
		route_decide(&r, &req, &d);
		ck_assert_int_eq(d.reason, ROUTE_AFFINITY);
		ck_assert_str_eq(d.server, first);
		idle_poll(&r);
	}
	struct core_stats cs;
	core_stats(r.core, &cs);
	ck_assert_uint_eq(cs.outcomes[CORE_OUTCOME_SUCCESS], 1);
	ck_assert_uint_eq(cs.affinity_hits, 5);

	/* 500 x5 on that server: its breaker opens, the session leaves. */
	int idx = core_endpoint_find_path(r.core, core_str_c(path),
					  core_str_c(d.key));
	ck_assert_int_ge(idx, 0);
	for (int i = 0; i < 5; i++) {
		fb_for(&fb, &d, 500, path, akey);
		fb.args[ROUTE_FB_TR] = str("-1");
		fb.now_ms = 3000 + (uint64_t)i;
		route_feedback(&r, &fb);
	}
	struct core_endpoint_info info;
	ck_assert_int_eq(core_endpoint_info(r.core, idx, 3010, &info), 0);
	ck_assert_int_eq(info.breaker, CORE_BREAKER_OPEN);
	ck_assert_uint_eq(info.outcomes[CORE_OUTCOME_FAILURE], 5);
	for (int i = 0; i < 20; i++) {
		req.now_ms = 3100 + (uint64_t)i;
		route_decide(&r, &req, &d);
		ck_assert_str_ne(d.server, first);
		idle_poll(&r);
	}
	/* Nothing else was miscounted. */
	ck_assert_uint_eq(r.fb.unknown_server, 0);
	ck_assert_uint_eq(r.fb.bad_status, 0);
	ck_assert_uint_eq(r.fb.bad_tr, 0);
	ck_assert_uint_eq(r.fb.bad_akey, 0);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* A session's turns back to back (an agent loop), no runtime-API poll in
 * between: the non-streamed ones leave the in-flight count at their
 * feedback, so the session stays home; streamed ones stay counted. */
START_TEST(feedback_completes_non_streamed)
{
	struct config cfg;
	struct route r;
	struct route_request req;
	struct route_decision d;
	struct route_feedback fb;
	char path[300], akey[17], first[64];
	load(&cfg, three);
	route_init(&r, &cfg);
	req_init(&req);
	req.args[ROUTE_ARG_SESSION] = str("agent-loop");
	for (int turn = 0; turn < 20; turn++) {
		req.now_ms = 1000 + (uint64_t)turn * 10;
		route_decide(&r, &req, &d);
		if (turn == 0)
			snprintf(first, sizeof(first), "%s", d.server);
		ck_assert_str_eq(d.server, first);
		ck_assert_int_eq(d.reason, turn == 0 ? ROUTE_HASH : ROUTE_AFFINITY);
		fb_for(&fb, &d, 200, path, akey);
		fb.now_ms = req.now_ms + 5;
		route_feedback(&r, &fb);
	}
	int idx = core_endpoint_find_path(r.core, core_str_c(path),
					  core_str_c(d.key));
	struct core_endpoint_info info;
	ck_assert_int_eq(core_endpoint_info(r.core, idx, 2000, &info), 0);
	ck_assert_uint_eq(info.in_flight, 0);

	/* Streamed: the headers are not the end; the count stays. */
	route_decide(&r, &req, &d);
	fb_for(&fb, &d, 200, path, akey);
	fb.args[ROUTE_FB_STREAM] = spop_data_bool(true);
	route_feedback(&r, &fb);
	ck_assert_int_eq(core_endpoint_info(r.core, idx, 2000, &info), 0);
	ck_assert_uint_eq(info.in_flight, 1);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Feedback without a key id for a server reached with keys: HAProxy chose
 * it (fail open) with the client's credential. Its failures reach the
 * server's endpoint(s); a 401 judges the client's key, not ours; nothing
 * leaves the in-flight count the core never raised. */
START_TEST(feedback_keyless_reaches_server)
{
	struct config cfg;
	struct route r;
	struct route_feedback fb;
	struct core_endpoint_info info;
	load(&cfg, "endpoints:\n"
		   "  - {backend: llm, server: g1, keys: [ka, kb]}\n"
		   "  - {backend: llm, server: g2}\n");
	route_init(&r, &cfg);
	int ka = core_endpoint_find_path(r.core, core_str_c("llm/g1"), core_str_c("ka"));
	int kb = core_endpoint_find_path(r.core, core_str_c("llm/g1"), core_str_c("kb"));
	ck_assert_int_ge(ka, 0);
	ck_assert_int_ge(kb, 0);
	ck_assert_int_eq(core_endpoint_sync(r.core, ka, CORE_ADMIN_ENABLED, 3, 0), 0);

	fb_init(&fb);
	fb.args[ROUTE_FB_SERVER] = str("llm/g1");
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(401);
	fb.now_ms = 10;
	route_feedback(&r, &fb);
	ck_assert_int_eq(core_endpoint_info(r.core, ka, 10, &info), 0);
	ck_assert_uint_eq(info.dead_key_left_ms, 0);
	ck_assert_uint_eq(info.outcomes[CORE_OUTCOME_KEY_DEAD], 0);

	for (int i = 0; i < 5; i++) {
		fb.args[ROUTE_FB_STATUS] = spop_data_int64(500);
		fb.now_ms = 20 + (uint64_t)i;
		route_feedback(&r, &fb);
	}
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(core_endpoint_info(r.core, k == 0 ? ka : kb, 30, &info), 0);
		ck_assert_uint_eq(info.outcomes[CORE_OUTCOME_FAILURE], 5);
		ck_assert_int_eq(info.breaker, CORE_BREAKER_OPEN);
	}
	ck_assert_int_eq(core_endpoint_info(r.core, ka, 30, &info), 0);
	ck_assert_uint_eq(info.in_flight, 3);
	ck_assert_uint_eq(r.fb.unknown_server, 0);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Feedback arguments in every form HAProxy sends them. */
START_TEST(feedback_forms)
{
	struct config cfg;
	struct route r;
	struct route_feedback fb;
	struct core_endpoint_info info;
	load(&cfg, three);
	route_init(&r, &cfg);
	int g2 = core_endpoint_find_path(r.core, core_str_c("llm/g2"),
					 core_str_c(NULL));
	int g1 = core_endpoint_find_path(r.core, core_str_c("llm/g1"),
					 core_str_c("ka"));
	ck_assert_int_ge(g2, 0);
	ck_assert_int_ge(g1, 0);

	/* Unknown server, no server, a key the server lacks: counted. */
	fb_init(&fb);
	fb.args[ROUTE_FB_SERVER] = str("llm/g9");
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(200);
	route_feedback(&r, &fb);
	fb.args[ROUTE_FB_SERVER] = spop_data_null();
	route_feedback(&r, &fb);
	fb.args[ROUTE_FB_SERVER] = str("llm/g1"); /* g1 only has key ka */
	fb.args[ROUTE_FB_KEY] = str("kb");
	route_feedback(&r, &fb);
	fb.args[ROUTE_FB_KEY] = spop_data_null();
	fb.args[ROUTE_FB_SERVER] = str("g2"); /* no backend */
	route_feedback(&r, &fb);
	fb.args[ROUTE_FB_SERVER] = str("llm/"); /* no server */
	route_feedback(&r, &fb);
	ck_assert_uint_eq(r.fb.unknown_server, 5);
	ck_assert_int_eq(core_endpoint_info(r.core, g1, 0, &info), 0);
	ck_assert_uint_eq(info.outcomes[CORE_OUTCOME_SUCCESS], 0);

	/* Status as a STRING, tr as an INT64 (3.x) and as a STRING (2.6). */
	fb.args[ROUTE_FB_SERVER] = str("llm/g2");
	fb.args[ROUTE_FB_STATUS] = str("200");
	fb.args[ROUTE_FB_TR] = spop_data_int64(250);
	fb.now_ms = 100;
	route_feedback(&r, &fb);
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(200);
	fb.args[ROUTE_FB_TR] = str("350");
	fb.now_ms = 200;
	route_feedback(&r, &fb);
	ck_assert_int_eq(core_endpoint_info(r.core, g2, 200, &info), 0);
	ck_assert_uint_eq(info.outcomes[CORE_OUTCOME_SUCCESS], 2);
	ck_assert_uint_eq(info.samples[CORE_KIND_PLAIN], 2);
	ck_assert(info.ewma_ms[CORE_KIND_PLAIN] > 250.0 &&
		  info.ewma_ms[CORE_KIND_PLAIN] < 350.0);
	/* stream true: the other EWMA. */
	fb.args[ROUTE_FB_STREAM] = spop_data_bool(true);
	fb.now_ms = 300;
	route_feedback(&r, &fb);
	ck_assert_int_eq(core_endpoint_info(r.core, g2, 300, &info), 0);
	ck_assert_uint_eq(info.samples[CORE_KIND_STREAM], 1);
	fb.args[ROUTE_FB_STREAM] = spop_data_null();

	/* Garbage: counted, the response still counted where it can be. */
	fb.args[ROUTE_FB_TR] = str("12ms");
	fb.args[ROUTE_FB_AKEY] = str("not-hex");
	route_feedback(&r, &fb);
	ck_assert_uint_eq(r.fb.bad_tr, 1);
	ck_assert_uint_eq(r.fb.bad_akey, 1);
	fb.args[ROUTE_FB_STATUS] = str("2x0");
	route_feedback(&r, &fb);
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(42);
	route_feedback(&r, &fb);
	fb.args[ROUTE_FB_STATUS] = spop_data_null();
	route_feedback(&r, &fb);
	ck_assert_uint_eq(r.fb.bad_status, 3);

	/* 429 with Retry-After in seconds: the breaker opens for 7 s. */
	fb_init(&fb);
	fb.args[ROUTE_FB_SERVER] = str("llm/g1");
	fb.args[ROUTE_FB_KEY] = str("ka");
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(429);
	fb.args[ROUTE_FB_RETRY_AFTER] = str("7");
	fb.now_ms = 1000;
	route_feedback(&r, &fb);
	ck_assert_int_eq(core_endpoint_info(r.core, g1, 1000, &info), 0);
	ck_assert_int_eq(info.breaker, CORE_BREAKER_OPEN);
	ck_assert_uint_eq(info.cooldown_left_ms, 7000);

	/* ... and as an HTTP date, against the wall clock passed in. */
	fb.args[ROUTE_FB_SERVER] = str("llm/g3");
	fb.args[ROUTE_FB_KEY] = spop_data_null();
	fb.args[ROUTE_FB_RETRY_AFTER] = str("Sun, 06 Nov 1994 08:49:37 GMT");
	fb.now_unix_s = 784111777 - 20; /* 08:49:17 */
	route_feedback(&r, &fb);
	int g3 = core_endpoint_find_path(r.core, core_str_c("llm/g3"),
					 core_str_c(NULL));
	ck_assert_int_eq(core_endpoint_info(r.core, g3, 1000, &info), 0);
	ck_assert_int_eq(info.breaker, CORE_BREAKER_OPEN);
	ck_assert_uint_eq(info.cooldown_left_ms, 20000);
	ck_assert_uint_eq(r.fb.bad_retry_after, 0);

	/* 401 on g1/ka: a suspicion for a probe, no dead key (no probe
	 * target here: nothing will ever kill it). */
	fb.args[ROUTE_FB_SERVER] = str("llm/g1");
	fb.args[ROUTE_FB_KEY] = str("ka");
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(401);
	fb.args[ROUTE_FB_RETRY_AFTER] = spop_data_null();
	route_feedback(&r, &fb);
	ck_assert_int_eq(core_endpoint_info(r.core, g1, 1000, &info), 0);
	ck_assert_uint_eq(info.dead_key_left_ms, 0);
	ck_assert(!info.key_dead);
	ck_assert(info.key_suspect);
	ck_assert_int_eq(core_key_probe_next(r.core, 1000), -1);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Every key of the only server refused by its probe: the answer still
 * names a server and a key (the one refused longest ago), never a bare
 * reason that would let HAProxy balance without a credential. */
START_TEST(key_fallback_answer)
{
	struct config cfg;
	load(&cfg, "key_probe: {target: \"unix:/nonexistent/probe.sock\"}\n"
		   "endpoints:\n"
		   "  - {backend: llm, server: g1, keys: [ka, kb]}\n");
	ck_assert(cfg.params.key_probe);
	struct route r;
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	const char *keys[2] = { "kb", "ka" };
	for (int i = 0; i < 2; i++) {
		int e = core_endpoint_find(r.core, core_str_c("llm"),
					   core_str_c("g1"), core_str_c(keys[i]));
		struct route_feedback fb;
		fb_init(&fb);
		fb.args[ROUTE_FB_SERVER] = str("llm/g1");
		fb.args[ROUTE_FB_KEY] = str(keys[i]);
		fb.args[ROUTE_FB_STATUS] = spop_data_int64(403);
		fb.now_ms = 100 + (uint64_t)i;
		route_feedback(&r, &fb);
		ck_assert_int_eq(core_key_probe_next(r.core, fb.now_ms), e);
		core_key_probe_result(r.core, e, CORE_PROBE_REFUSED, fb.now_ms);
	}
	struct route_request req;
	req_init(&req);
	req.args[ROUTE_ARG_SESSION] = str("victim");
	req.now_ms = 200;
	struct route_decision d;
	route_decide(&r, &req, &d);
	ck_assert_int_eq(d.reason, ROUTE_KEY_FALLBACK);
	ck_assert_str_eq(route_reason_name(d.reason), "key_fallback");
	ck_assert_str_eq(d.backend, "llm");
	ck_assert_str_eq(d.server, "g1");
	ck_assert_str_eq(d.key, "kb");
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

START_TEST(request_mapping)
{
	struct route_request req;
	struct core_request cr, cr2;
	req_init(&req);
	route_request_core(&req, &cr);
	ck_assert(!cr.session.present && !cr.prefix[0].present &&
		  !cr.prefix[1].present && !cr.prefix[2].present &&
		  !cr.install.present && !cr.caller.present && !cr.src.present);
	ck_assert_uint_eq(cr.model.len, 0);
	ck_assert(!cr.stream);

	/* Empty STRING and BINARY identify nobody. */
	req.args[ROUTE_ARG_SESSION] = str("");
	req.args[ROUTE_ARG_INSTALL] = spop_data_binary("", 0);
	route_request_core(&req, &cr);
	ck_assert(!cr.session.present && !cr.install.present);

	/* Integers give their value whatever their width or signedness. */
	req.args[ROUTE_ARG_PREFIX1] = spop_data_int64(-5);
	req.args[ROUTE_ARG_PREFIX3].type = SPOP_DATA_UINT64;
	req.args[ROUTE_ARG_PREFIX3].u.u64 = (uint64_t)-5;
	req.args[ROUTE_ARG_CALLER] = spop_data_uint32(42);
	route_request_core(&req, &cr);
	ck_assert(cr.prefix[0].present && !cr.prefix[1].present &&
		  cr.prefix[2].present);
	ck_assert_uint_eq(cr.prefix[0].hash, (uint64_t)-5);
	ck_assert_uint_eq(cr.prefix[2].hash, cr.prefix[0].hash);
	ck_assert_uint_eq(cr.caller.hash, 42);

	/* STRING and BINARY of the same bytes agree; different bytes not. */
	req.args[ROUTE_ARG_SESSION] = str("abc");
	req.args[ROUTE_ARG_INSTALL] = spop_data_binary("abc", 3);
	route_request_core(&req, &cr);
	ck_assert(cr.session.present && cr.install.present);
	ck_assert_uint_eq(cr.session.hash, cr.install.hash);
	ck_assert_uint_eq(cr.session.hash, core_hash_bytes("abc", 3));
	req.args[ROUTE_ARG_INSTALL] = str("abd");
	route_request_core(&req, &cr);
	ck_assert_uint_ne(cr.session.hash, cr.install.hash);

	/* src: IPv4, and the same address IPv4-mapped in IPv6. */
	req.args[ROUTE_ARG_SRC].type = SPOP_DATA_IPV4;
	memcpy(req.args[ROUTE_ARG_SRC].u.ipv4, "\x0a\x00\x00\x01", 4);
	route_request_core(&req, &cr);
	req.args[ROUTE_ARG_SRC].type = SPOP_DATA_IPV6;
	memcpy(req.args[ROUTE_ARG_SRC].u.ipv6,
	       "\0\0\0\0\0\0\0\0\0\0\xff\xff\x0a\x00\x00\x01", 16);
	route_request_core(&req, &cr2);
	ck_assert(cr.src.present && cr2.src.present);
	ck_assert_uint_eq(cr.src.hash, cr2.src.hash);
	memcpy(req.args[ROUTE_ARG_SRC].u.ipv6,
	       "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\x0a\x00\x00\x01", 16);
	route_request_core(&req, &cr2);
	ck_assert_uint_ne(cr.src.hash, cr2.src.hash);

	/* model: a view of a non-empty STRING or BINARY only. */
	req.args[ROUTE_ARG_MODEL] = str("llama-3");
	route_request_core(&req, &cr);
	ck_assert_uint_eq(cr.model.len, 7);
	ck_assert(memcmp(cr.model.ptr, "llama-3", 7) == 0);
	req.args[ROUTE_ARG_MODEL] = spop_data_int64(3);
	route_request_core(&req, &cr);
	ck_assert_uint_eq(cr.model.len, 0);

	/* stream: BOOL, a non-zero integer or "true". */
	req.args[ROUTE_ARG_STREAM] = spop_data_bool(true);
	route_request_core(&req, &cr);
	ck_assert(cr.stream);
	req.args[ROUTE_ARG_STREAM] = spop_data_bool(false);
	route_request_core(&req, &cr);
	ck_assert(!cr.stream);
	req.args[ROUTE_ARG_STREAM] = str("true");
	route_request_core(&req, &cr);
	ck_assert(cr.stream);
	req.args[ROUTE_ARG_STREAM] = spop_data_int64(1);
	route_request_core(&req, &cr);
	ck_assert(cr.stream);

	/* size: bytes of any integer type as whole KiB, saturated; none, a
	 * negative one or another type is 0 (unknown). */
	struct { struct spop_data d; uint32_t kib; } sizes[] = {
		{ spop_data_null(), 0 },
		{ spop_data_int64(1023), 0 },
		{ spop_data_int64(1024), 1 },
		{ spop_data_int64(81920 + 1023), 80 },
		{ spop_data_int64(-4096), 0 },
		{ { .type = SPOP_DATA_UINT32, .u.u32 = 65536 }, 64 },
		{ { .type = SPOP_DATA_UINT64, .u.u64 = UINT64_MAX }, UINT32_MAX },
		{ str("81920"), 0 },
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		req.args[ROUTE_ARG_SIZE] = sizes[i].d;
		route_request_core(&req, &cr);
		ck_assert_uint_eq(cr.size_kib, sizes[i].kib);
	}

	/* turn: a count of user messages of any integer type, saturated at
	 * 65,535; none, 0, a negative one or another type is 0 (unknown). */
	struct { struct spop_data d; uint16_t turn; } turns[] = {
		{ spop_data_null(), 0 },
		{ spop_data_int64(0), 0 },
		{ spop_data_int64(3), 3 },
		{ spop_data_int64(-3), 0 },
		{ { .type = SPOP_DATA_UINT32, .u.u32 = 70000 }, UINT16_MAX },
		{ { .type = SPOP_DATA_UINT64, .u.u64 = UINT64_MAX }, UINT16_MAX },
		{ str("3"), 0 },
	};
	for (size_t i = 0; i < sizeof(turns) / sizeof(turns[0]); i++) {
		req.args[ROUTE_ARG_TURN] = turns[i].d;
		route_request_core(&req, &cr);
		ck_assert_uint_eq(cr.turn, turns[i].turn);
	}
}
END_TEST

/* The akey in the ACK is the core's identity of the request, so the
 * feedback that echoes it finds the map entry. */
START_TEST(akey_is_core_identity)
{
	struct config cfg;
	struct route r;
	struct route_request req;
	struct route_decision d;
	struct core_request cr;
	uint64_t k;
	load(&cfg, three);
	route_init(&r, &cfg);
	req_init(&req);
	req.args[ROUTE_ARG_CALLER] = spop_data_int64(77);
	route_decide(&r, &req, &d);
	route_request_core(&req, &cr);
	ck_assert(core_identity(r.core, &cr, &k));
	ck_assert(d.has_akey);
	ck_assert_uint_eq(d.akey, k);
	/* src is not on the default ladder. */
	req_init(&req);
	req.args[ROUTE_ARG_SRC].type = SPOP_DATA_IPV4;
	route_decide(&r, &req, &d);
	ck_assert(!d.has_akey);
	ck_assert_int_eq(d.reason, ROUTE_P2C);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* policy.session_scope through the SPOE arguments: with `caller` (the
 * default) two callers (Authorization hashes) sending one x-session-id get
 * two keys; a request without a caller gets the unscoped one; `global`
 * gives them all one key. Then a second caller with another model cannot
 * move the first one's entry. */
START_TEST(session_scope_arguments)
{
	static const char *const models =
		"endpoints:\n"
		"  - {backend: llm, server: g1, models: [m1]}\n"
		"  - {backend: llm, server: g2, models: [m2]}\n";
	char yaml[256];
	for (int global = 0; global < 2; global++) {
		struct config cfg;
		struct route r;
		struct route_request req;
		struct route_decision a, b, c;
		snprintf(yaml, sizeof(yaml), "policy: {session_scope: %s}\n%s",
			 global ? "global" : "caller", models);
		load(&cfg, yaml);
		route_init(&r, &cfg);
		req_init(&req);
		req.args[ROUTE_ARG_SESSION] = str("sess-1");
		req.args[ROUTE_ARG_CALLER] = spop_data_int64(1111);
		req.args[ROUTE_ARG_MODEL] = str("m1");
		route_decide(&r, &req, &a);
		ck_assert_str_eq(a.server, "g1");
		req.args[ROUTE_ARG_CALLER] = spop_data_int64(2222);
		req.args[ROUTE_ARG_MODEL] = str("m2");
		route_decide(&r, &req, &b);
		ck_assert_str_eq(b.server, "g2");
		req.args[ROUTE_ARG_CALLER] = str(""); /* absent */
		route_decide(&r, &req, &c);
		ck_assert(a.has_akey && b.has_akey && c.has_akey);
		if (global) {
			ck_assert_uint_eq(a.akey, b.akey);
			ck_assert_uint_eq(a.akey, c.akey);
		} else {
			ck_assert_uint_ne(a.akey, b.akey);
			ck_assert_uint_ne(a.akey, c.akey);
			ck_assert_uint_ne(b.akey, c.akey);
		}
		/* The first caller is homed on g1, the second's success on
		 * g2 follows. */
		struct route_feedback fb;
		char path[300], akey[17];
		fb_for(&fb, &a, 200, path, akey);
		route_feedback(&r, &fb);
		fb_for(&fb, &b, 200, path, akey);
		route_feedback(&r, &fb);
		req.args[ROUTE_ARG_CALLER] = spop_data_int64(1111);
		req.args[ROUTE_ARG_MODEL] = str("m1");
		route_decide(&r, &req, &a);
		ck_assert_str_eq(a.server, "g1");
		ck_assert_int_eq(a.reason, global ? ROUTE_HASH : ROUTE_AFFINITY);
		route_finish(&r);
		config_finish(&cfg);
	}
}
END_TEST

/* Retry-After as the feedback carries it, string or integer, however
 * large: never longer than policy.rate_limit_cooldown_max, and counted as
 * valid (the 9*10^14 s kept an endpoint out for ever). */
START_TEST(retry_after_capped)
{
	struct config cfg;
	struct route r;
	struct route_feedback fb;
	struct core_endpoint_info info;
	load(&cfg, "policy: {rate_limit_cooldown_max: 5m}\n"
		   "endpoints:\n"
		   "  - {backend: llm, server: g1}\n  - {backend: llm, server: g2}\n"
		   "  - {backend: llm, server: g3}\n  - {backend: llm, server: g4}\n"
		   "  - {backend: llm, server: g5}\n");
	route_init(&r, &cfg);
	struct spop_data ra[5] = {
		str("900000000000000"), str("99999999999999999999999999"),
		str("Fri, 31 Dec 9999 23:59:59 GMT"),
		spop_data_int64(INT64_C(900000000000000)),
		spop_data_int64(INT64_MAX),
	};
	for (int i = 0; i < 5; i++) {
		char path[32];
		snprintf(path, sizeof(path), "llm/g%d", i + 1);
		fb_init(&fb);
		fb.args[ROUTE_FB_SERVER] = str(path);
		fb.args[ROUTE_FB_STATUS] = spop_data_int64(429);
		fb.args[ROUTE_FB_RETRY_AFTER] = ra[i];
		fb.now_ms = 1000;
		fb.now_unix_s = 1800000000;
		route_feedback(&r, &fb);
		int e = core_endpoint_find_path(r.core, core_str_c(path),
						core_str_c(NULL));
		ck_assert_int_eq(core_endpoint_info(r.core, e, 1000, &info), 0);
		ck_assert_int_eq(info.breaker, CORE_BREAKER_OPEN);
		ck_assert_msg(info.cooldown_left_ms == 300000, "%s: %llu", path,
			      (unsigned long long)info.cooldown_left_ms);
	}
	ck_assert_uint_eq(r.fb.bad_retry_after, 0);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

START_TEST(wall_clock_cached)
{
	struct config cfg;
	struct route r;
	ck_assert_int_eq(config_init(&cfg), 0);
	route_init(&r, &cfg);
	int64_t a = route_wall_s(&r, 5);
	ck_assert_int_gt(a, 1600000000);
	r.wall_s = 1; /* a second read at the same uv_now is the cache */
	ck_assert_int_eq(route_wall_s(&r, 5), 1);
	ck_assert_int_ge(route_wall_s(&r, 6), a);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

START_TEST(arg_names_exact)
{
	struct spop_str s = { (const uint8_t *)"prefix", 6 };
	ck_assert_int_eq(route_arg_lookup(s), -1);
	s.len = 7;
	s.ptr = (const uint8_t *)"prefix2";
	ck_assert_int_eq(route_arg_lookup(s), ROUTE_ARG_PREFIX2);
	s.ptr = (const uint8_t *)"retry_after";
	s.len = 11;
	ck_assert_int_eq(route_fb_arg_lookup(s), ROUTE_FB_RETRY_AFTER);
	s.len = 5;
	ck_assert_int_eq(route_fb_arg_lookup(s), -1);
	ck_assert_str_eq(route_reason_name(ROUTE_AFFINITY), "affinity");
	ck_assert_str_eq(route_reason_name(ROUTE_HASH), "hash");
	ck_assert_str_eq(route_reason_name(ROUTE_SPILL), "spill");
	ck_assert_str_eq(route_reason_name(ROUTE_P2C), "p2c");
	ck_assert_str_eq(route_reason_name(ROUTE_COOLDOWN_FALLBACK),
			 "cooldown_fallback");
	ck_assert_str_eq(route_reason_name(ROUTE_NO_MODEL), "no_model");
	ck_assert_str_eq(route_reason_name(ROUTE_NONE), "none");
	ck_assert_str_eq(route_reason_name(ROUTE_FAILOVER), "failover");
	ck_assert_str_eq(route_reason_name(ROUTE_REASON_COUNT), "unknown");
}
END_TEST

/* Builds a NOTIFY payload with one route message carrying a model. */
/* The argument names in haproxy/warmlane.spoe.conf's order, the order
 * route_*_lookup_next try first. */
static const char *const spoe_fb_args[] = {
	"server", "status", "tr", "retry_after", "key", "akey", "stream",
	"shadow", "shadow_reason", "id", "model",
};

static struct spop_str sv(const char *s)
{
	return (struct spop_str){ (const uint8_t *)s, strlen(s) };
}

/* Looks names[order[0..n)] up in turn with one cursor, as a message's
 * arguments are; each must give what the lookup by name alone gives. */
static void lookup_in_turn(bool fb, const char *const *names,
			   const unsigned *order, unsigned n, const char *what)
{
	unsigned pos = 0;
	for (unsigned i = 0; i < n; i++) {
		const char *name = order != NULL ? names[order[i]] : names[i];
		int want = fb ? route_fb_arg_lookup(sv(name))
			      : route_arg_lookup(sv(name));
		int got = fb ? route_fb_arg_lookup_next(sv(name), &pos)
			     : route_arg_lookup_next(sv(name), &pos);
		ck_assert_msg(got == want, "%s: %s gave %d, by name %d", what,
			      name, got, want);
	}
}

START_TEST(arg_lookup_any_order)
{
	const unsigned nr = sizeof(spoe_route_args) / sizeof(*spoe_route_args);
	const unsigned nf = sizeof(spoe_fb_args) / sizeof(*spoe_fb_args);
	ck_assert_uint_eq(nr, ROUTE_ARG_COUNT);
	ck_assert_uint_eq(nf, ROUTE_FB_COUNT);
	unsigned order[32], n;
	/* Every name is known, each to its own index. */
	for (unsigned i = 0; i < nr; i++)
		ck_assert_int_ge(route_arg_lookup(sv(spoe_route_args[i])), 0);
	for (unsigned i = 0; i < nf; i++)
		ck_assert_int_ge(route_fb_arg_lookup(sv(spoe_fb_args[i])), 0);
	ck_assert_int_eq(route_arg_lookup(sv("session")), ROUTE_ARG_SESSION);
	ck_assert_int_eq(route_fb_arg_lookup(sv("shadow_reason")),
			 ROUTE_FB_SHADOW_REASON);

	lookup_in_turn(false, spoe_route_args, NULL, nr, "route, file order");
	lookup_in_turn(true, spoe_fb_args, NULL, nf, "feedback, file order");
	/* Another config's order: reversed. */
	for (n = 0; n < nr; n++)
		order[n] = nr - 1 - n;
	lookup_in_turn(false, spoe_route_args, order, n, "route, reversed");
	for (n = 0; n < nf; n++)
		order[n] = nf - 1 - n;
	lookup_in_turn(true, spoe_fb_args, order, n, "feedback, reversed");
	/* An older config's fewer arguments: every other one, then the
	 * first ten (no hints). */
	for (n = 0; 2 * n < nr; n++)
		order[n] = 2 * n;
	lookup_in_turn(false, spoe_route_args, order, n, "route, every other");
	for (n = 0; n < 10; n++)
		order[n] = n;
	lookup_in_turn(false, spoe_route_args, order, n, "route, no hints");
	for (n = 0; 2 * n + 1 < nf; n++)
		order[n] = 2 * n + 1;
	lookup_in_turn(true, spoe_fb_args, order, n, "feedback, every other");
	/* Repeated: each occurrence found. */
	const unsigned rep[] = { 0, 1, 1, 0, 7, 7, 13, 0 };
	lookup_in_turn(false, spoe_route_args, rep, 8, "route, repeated");

	/* An unknown name in the middle keeps the cursor: the next is found
	 * first time, and an unknown one is -1 wherever the cursor is. */
	unsigned pos = 0;
	ck_assert_int_eq(route_arg_lookup_next(sv("session"), &pos),
			 ROUTE_ARG_SESSION);
	ck_assert_int_eq(route_arg_lookup_next(sv("x-new"), &pos), -1);
	ck_assert_uint_eq(pos, 1);
	ck_assert_int_eq(route_arg_lookup_next(sv("prefix1"), &pos),
			 ROUTE_ARG_PREFIX1);
	ck_assert_uint_eq(pos, 2);
	/* A prefix or an extension of a name is no match. */
	ck_assert_int_eq(route_arg_lookup_next(sv("prefix"), &pos), -1);
	ck_assert_int_eq(route_arg_lookup_next(sv("prefix22"), &pos), -1);
	pos = 0;
	ck_assert_int_eq(route_fb_arg_lookup_next(sv("se"), &pos), -1);
	ck_assert_int_eq(route_fb_arg_lookup_next(sv(""), &pos), -1);
}
END_TEST

/* ---- retry budget -------------------------------------------------------- */

/* A log line of backend be that took rc retries (warmlane's format). */
static void budget_line(struct route *r, const char *be, const char *rc,
			uint64_t now_ms)
{
	char buf[512];
	struct haplog_line l;
	int n = snprintf(buf, sizeof(buf),
			 "<134>1 2026-11-29T10:21:44.552318+00:00 - haproxy 1 - - "
			 "be=%s srv=s1 st=503 ts=---- rc=%s tw=0 tc=0 tr=1 ta=2 "
			 "tt=2 bytes=90 at=1795947704.530 wbe=%s wsrv=s1 key=k1 "
			 "akey=- reason=hash fb=1 stream=0 id=\"x\"\n",
			 be, rc, be);
	ck_assert(n > 0 && (size_t)n < sizeof(buf));
	ck_assert_int_eq(haplog_parse((const uint8_t *)buf, (size_t)n, &l),
			 HAPLOG_OK);
	route_log_line(r, &l, now_ms);
}

static bool decide_noretry(struct route *r, uint64_t now_ms)
{
	struct route_request req;
	struct route_decision d;
	req_init(&req);
	req.args[ROUTE_ARG_SESSION] = str("s");
	req.now_ms = now_ms;
	route_decide(r, &req, &d);
	ck_assert_int_ge(d.endpoint, 0);
	route_take_back(r, d.endpoint);
	return d.noretry;
}

START_TEST(retry_budget_from_log_lines)
{
	struct config cfg;
	struct route r;
	/* 0.2 x first attempts + 0.5/s x 10 s */
	load(&cfg, "retry_budget: { ratio: 0.2, min_per_second: 0.5, window: 10s }\n"
		   "endpoints:\n"
		   "  - { backend: llm, server: s1, keys: [k1] }\n"
		   "  - { backend: other, server: s1, keys: [k1] }\n");
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	idle_poll(&r);
	/* Without the log input: the budget is made, marks nothing. */
	ck_assert(!decide_noretry(&r, 1000));
	ck_assert_uint_eq(r.n_budgets, 1);
	r.log_input = true;
	ck_assert(!decide_noretry(&r, 1000));
	ck_assert_uint_eq(r.n_budgets, 1);
	/* The session's backend (hashing picks one of the two). */
	ck_assert(strcmp(r.budgets[0].backend, "llm") == 0 ||
		  strcmp(r.budgets[0].backend, "other") == 0);
	/* Lines of a backend without a budget count nowhere. */
	for (int i = 0; i < 50; i++)
		budget_line(&r, "nobudget", "2", 1000);
	ck_assert_uint_eq(r.n_budgets, 1);
	/* 6 requests, 2 retries each: 12 against 1.2 + 5: spent. */
	const char *be = r.budgets[0].backend;
	for (int i = 0; i < 6; i++)
		budget_line(&r, be, "2", 1100);
	ck_assert_uint_eq(r.budgets[0].requests, 6);
	ck_assert_uint_eq(r.budgets[0].retries, 12);
	ck_assert(decide_noretry(&r, 1200));
	ck_assert(decide_noretry(&r, 1200));
	ck_assert_uint_eq(r.budgets[0].noretry, 2);
	/* A redispatch counts its retries as well ("+1"). */
	budget_line(&r, be, "+1", 1200);
	ck_assert_uint_eq(r.budgets[0].retries, 13);
	/* 33 more without retries: 40 first, 13 against 8 + 5: still
	 * spent; one more: 13 < 13.2. */
	for (int i = 0; i < 33; i++)
		budget_line(&r, be, "0", 1300);
	ck_assert(decide_noretry(&r, 1300));
	budget_line(&r, be, "0", 1300);
	ck_assert(!decide_noretry(&r, 1300));
	/* Spent again, then the window slides past it. */
	for (int i = 0; i < 10; i++)
		budget_line(&r, be, "1", 2000);
	ck_assert(decide_noretry(&r, 2000));
	ck_assert(!decide_noretry(&r, 12000));
	/* Off while the lines are mostly not in warmlane's format, and with
	 * retry_budget.enabled false. */
	for (int i = 0; i < 10; i++)
		budget_line(&r, be, "3", 12000);
	ck_assert(decide_noretry(&r, 12000));
	r.log.format_bad = true;
	ck_assert(!decide_noretry(&r, 12000));
	r.log.format_bad = false;
	cfg.retry_budget_enabled = false;
	ck_assert(!decide_noretry(&r, 12000));
	/* Disabled, its lines still count (warmlane_retries_total). */
	budget_line(&r, be, "2", 12000);
	ck_assert_uint_eq(r.budgets[0].retries, 13 + 10 + 30 + 2);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* The budget a decision counts in is its endpoint's backend's, also when
 * the endpoint's slot is taken by another server of another backend
 * (route_budget_of: found once per generation of the slot). */
START_TEST(retry_budget_follows_the_slot)
{
	struct config cfg;
	struct route r;
	struct route_request req;
	struct route_decision d;
	load(&cfg, "endpoints:\n"
		   "  - { backend: llm, server: s1, keys: [k1] }\n");
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	idle_poll(&r);
	req_init(&req);
	req.args[ROUTE_ARG_SESSION] = str("s");
	req.now_ms = 1000;
	route_decide(&r, &req, &d);
	ck_assert_int_ge(d.endpoint, 0);
	route_take_back(&r, d.endpoint);
	int slot = d.endpoint;
	ck_assert_uint_eq(r.n_budgets, 1);
	ck_assert_str_eq(r.budgets[0].backend, "llm");
	ck_assert_int_eq(core_endpoint_remove(r.core, slot), 0);
	ck_assert_int_eq(route_server_add(&r, (struct core_str){ "other", 5 },
					  (struct core_str){ "s9", 2 }, 1000), 1);
	route_decide(&r, &req, &d);
	ck_assert_int_eq(d.endpoint, slot);
	ck_assert_str_eq(d.backend, "other");
	route_take_back(&r, d.endpoint);
	ck_assert_uint_eq(r.n_budgets, 2);
	ck_assert_str_eq(r.budgets[1].backend, "other");
	/* And again, now through the preset. */
	route_decide(&r, &req, &d);
	route_take_back(&r, d.endpoint);
	ck_assert_uint_eq(r.n_budgets, 2);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

static Suite *route_suite(void)
{
	Suite *s = suite_create("agent-route");
	TCase *tc = tcase_create("route");
	tcase_add_test(tc, core_by_model);
	tcase_add_test(tc, retry_budget_follows_the_slot);
	tcase_add_test(tc, affinity_and_breaker);
	tcase_add_test(tc, feedback_completes_non_streamed);
	tcase_add_test(tc, feedback_keyless_reaches_server);
	tcase_add_test(tc, feedback_forms);
	tcase_add_test(tc, key_fallback_answer);
	tcase_add_test(tc, request_mapping);
	tcase_add_test(tc, akey_is_core_identity);
	tcase_add_test(tc, session_scope_arguments);
	tcase_add_test(tc, retry_after_capped);
	tcase_add_test(tc, wall_clock_cached);
	tcase_add_test(tc, arg_names_exact);
	tcase_add_test(tc, arg_lookup_any_order);
	tcase_add_test(tc, retry_budget_from_log_lines);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(route_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
