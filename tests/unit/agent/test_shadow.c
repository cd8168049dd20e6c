/* test_shadow.c - agent: policy.mode shadow (route.c, notify.c, shadow.c): the ACK names no server HAProxy routes by, answers teach where requests went, comparisons counted. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "harness.h"
#include "haplog.h"
#include "notify.h"
#include "route.h"
#include "shadow.h"
#include "stats.h"

static const char shadow_yaml[] =
	"policy: { mode: shadow }\n"
	"endpoints:\n"
	"  - { backend: llm, server: s1, keys: [k1] }\n"
	"  - { backend: llm, server: s2, keys: [k1] }\n"
	"  - { backend: llm, server: s3, keys: [k1] }\n";

static void load(struct config *cfg, const char *yaml)
{
	char err[4096];
	ck_assert_int_eq(config_init(cfg), 0);
	int r = config_load_data(cfg, "t.yaml", yaml, strlen(yaml), err,
				 sizeof(err));
	ck_assert_msg(r == 0, "%s", err);
}

static struct spop_data str(const char *s)
{
	return spop_data_string(s, strlen(s));
}

static struct core_str cs(const char *s)
{
	return (struct core_str){ s, strlen(s) };
}

static void idle_poll(struct route *r)
{
	for (int i = core_endpoint_next(r->core, -1); i >= 0;
	     i = core_endpoint_next(r->core, i))
		core_endpoint_sync(r->core, i, CORE_ADMIN_ENABLED, 0, 0);
}

static uint32_t in_flight_sum(struct route *r)
{
	uint32_t n = 0;
	for (int i = core_endpoint_next(r->core, -1); i >= 0;
	     i = core_endpoint_next(r->core, i)) {
		struct core_endpoint_info in;
		ck_assert_int_eq(core_endpoint_info(r->core, i, 0, &in), 0);
		n += in.in_flight;
	}
	return n;
}

static void decide(struct route *r, const char *session,
		   struct route_decision *d)
{
	struct route_request req;
	memset(&req, 0, sizeof(req));
	for (int i = 0; i < ROUTE_ARG_COUNT; i++)
		req.args[i] = spop_data_null();
	if (session != NULL)
		req.args[ROUTE_ARG_SESSION] = str(session);
	route_decide(r, &req, d);
}

/* The feedback HAProxy 3.x sends for a response of used (backend/server)
 * after shadow decision d: shadow_server and shadow_reason echoed. */
static void shadow_feedback(struct route *r, const struct route_decision *d,
			    const char *used, int status)
{
	struct route_feedback fb;
	char akey[17], sh[300];
	memset(&fb, 0, sizeof(fb));
	for (int i = 0; i < ROUTE_FB_COUNT; i++)
		fb.args[i] = spop_data_null();
	fb.args[ROUTE_FB_SERVER] = str(used);
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(status);
	fb.args[ROUTE_FB_TR] = str("50");
	if (d->has_akey) {
		snprintf(akey, sizeof(akey), "%016" PRIx64, d->akey);
		fb.args[ROUTE_FB_AKEY] = str(akey);
	}
	if (d->server != NULL) {
		snprintf(sh, sizeof(sh), "%s/%s", d->backend, d->server);
		fb.args[ROUTE_FB_SHADOW] = str(sh);
	}
	fb.args[ROUTE_FB_SHADOW_REASON] = str(route_reason_name(d->reason));
	route_feedback(r, &fb);
}

/* The log line of a shadow-mode request HAProxy served on srv (2.6's
 * format: no feedback message, fb=-), as haproxy-2.6.cfg logs it. */
static enum route_log_use shadow_line(struct route *r,
				      const struct route_decision *d,
				      const char *srv, bool fb)
{
	char buf[768];
	struct haplog_line l;
	char sh[300] = "-";
	if (d->server != NULL)
		snprintf(sh, sizeof(sh), "%s/%s", d->backend, d->server);
	int n = snprintf(buf, sizeof(buf),
			 "<134>1 2026-11-29T10:21:44.552318+00:00 - haproxy 1 - - "
			 "be=llm srv=%s st=200 ts=---- rc=0 tw=0 tc=0 tr=30 ta=90 "
			 "tt=90 bytes=900 at=1795947704.530 wbe=- wsrv=- key=- "
			 "akey=%016" PRIx64 " reason=- fb=%s stream=0 ra=- sh=%s "
			 "shr=%s id=\"x\" 127.0.0.1:1 [x]\n",
			 srv, d->akey, fb ? "1" : "-", sh,
			 route_reason_name(d->reason));
	ck_assert(n > 0 && (size_t)n < sizeof(buf));
	ck_assert_int_eq(haplog_parse((const uint8_t *)buf, (size_t)n, &l),
			 HAPLOG_OK);
	r->log_input = true;
	return route_log_line(r, &l, 0);
}

/* Shadow mode: the decision is named (would-be backend/server, reason,
 * akey) but takes nothing: no in-flight, no key, no budget, nothing to
 * take back. Route mode on the same pool does all of that. */
START_TEST(decide_names_only)
{
	struct config cfg;
	struct route r;
	load(&cfg, shadow_yaml);
	ck_assert_int_eq(cfg.mode, CONFIG_MODE_SHADOW);
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	idle_poll(&r);
	struct route_decision d;
	for (int i = 0; i < 20; i++) {
		char s[16];
		snprintf(s, sizeof(s), "sess-%d", i);
		decide(&r, s, &d);
		ck_assert(d.shadow);
		ck_assert_int_eq(d.endpoint, -1);
		ck_assert_ptr_nonnull(d.server);
		ck_assert_ptr_null(d.key);
		ck_assert(!d.noretry);
	}
	ck_assert_uint_eq(in_flight_sum(&r), 0);
	ck_assert_uint_eq(r.n_budgets, 0);
	/* A reload to route (the configuration replaced in place). */
	config_finish(&cfg);
	load(&cfg, "endpoints:\n  - { backend: llm, server: s1, keys: [k1] }\n");
	ck_assert_int_eq(cfg.mode, CONFIG_MODE_ROUTE);
	decide(&r, "sess-0", &d);
	ck_assert(!d.shadow);
	ck_assert_int_ge(d.endpoint, 0);
	ck_assert_ptr_nonnull(d.key);
	ck_assert_uint_eq(in_flight_sum(&r), 1);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* The ACK's variables, name by name, as HAProxy reads them. */
struct shadow_ack {
	bool backend, server, key, noretry, reason, akey;
	char shadow_server[300], shadow_reason[32];
};

static void ack_read(const uint8_t *out, ptrdiff_t n, struct shadow_ack *v)
{
	struct spop_frame a;
	enum spop_status status;
	memset(v, 0, sizeof(*v));
	ck_assert_int_eq(spop_frame_decode(out, (size_t)n, 2048, &a, &status), n);
	struct spop_reader rd;
	spop_reader_init(&rd, a.payload, a.payload_len);
	enum spop_action act;
	enum spop_scope scope;
	struct spop_str name;
	struct spop_data val;
	while (spop_action_next(&rd, &act, &scope, &name, &val, &status) == 1) {
		ck_assert_int_eq(scope, SPOP_SCOPE_TXN);
		v->backend |= spop_str_eq(name, "backend");
		v->server |= spop_str_eq(name, "server");
		v->key |= spop_str_eq(name, "key");
		v->noretry |= spop_str_eq(name, "noretry");
		v->reason |= spop_str_eq(name, "reason");
		v->akey |= spop_str_eq(name, "akey");
		char *dst = spop_str_eq(name, "shadow_server") ? v->shadow_server
			  : spop_str_eq(name, "shadow_reason") ? v->shadow_reason
								: NULL;
		size_t cap = dst == v->shadow_server ? sizeof(v->shadow_server)
						     : sizeof(v->shadow_reason);
		if (dst != NULL) {
			ck_assert_int_eq(val.type, SPOP_DATA_STRING);
			ck_assert_uint_lt(val.u.str.len, cap);
			memcpy(dst, val.u.str.ptr, val.u.str.len);
			dst[val.u.str.len] = '\0';
		}
	}
}

/* One route NOTIFY with a session through notify_handle; its ACK. */
static void route_ack(struct route *r, struct stats *st, struct shadow_ack *v)
{
	struct notify_ctx ctx = { .route = r, .stats = st };
	uint8_t payload[128], out[2048];
	struct spop_writer w;
	spop_writer_init(&w, payload, sizeof(payload));
	spop_put_str(&w, "route", 5);
	uint8_t one = 1;
	spop_put_bytes(&w, &one, 1);
	struct spop_data s = str("conversation-1");
	spop_put_kv(&w, "session", &s);
	ck_assert(!w.overflow);
	struct spop_frame f = { .type = SPOP_FRAME_NOTIFY,
				.flags = SPOP_FLAG_FIN,
				.stream_id = 1,
				.frame_id = 2,
				.payload = payload,
				.payload_len = w.len };
	struct notify_deferred later;
	enum spop_status status;
	ptrdiff_t n = notify_handle(&ctx, &f, out, sizeof(out), &later, &status);
	ck_assert_int_gt(n, 0);
	ack_read(out, n, v);
}

/* In shadow mode the ACK sets no variable HAProxy routes by (backend,
 * server, key, noretry) nor the reason the example configs act on (a
 * no_model 404): shadow_server, shadow_reason and akey only. */
START_TEST(ack_has_no_routing_variable)
{
	struct config cfg;
	struct route r;
	struct stats st = { 0 };
	struct shadow_ack v;
	/* Nothing allowed by the budget: route mode sets noretry. */
	load(&cfg, "retry_budget: { ratio: 0, min_per_second: 0 }\n"
		   "policy: { mode: shadow }\n"
		   "endpoints:\n  - { backend: llm, server: s1, keys: [k1] }\n");
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	r.log_input = true;
	route_ack(&r, &st, &v);
	ck_assert(!v.backend && !v.server && !v.key && !v.noretry && !v.reason);
	ck_assert(v.akey);
	ck_assert_str_eq(v.shadow_server, "llm/s1");
	ck_assert_str_eq(v.shadow_reason, "hash");
	ck_assert_uint_eq(st.reasons[ROUTE_HASH], 1);
	ck_assert_uint_eq(in_flight_sum(&r), 0);

	cfg.mode = CONFIG_MODE_ROUTE; /* what a reload to route does */
	route_ack(&r, &st, &v);
	ck_assert(v.backend && v.server && v.key && v.noretry && v.reason);
	ck_assert(v.shadow_server[0] == '\0' && v.shadow_reason[0] == '\0');
	ck_assert_uint_eq(in_flight_sum(&r), 1);
	route_finish(&r);
	config_finish(&cfg);

	/* No server for the model: the reason alone, as shadow_reason. */
	load(&cfg, "policy: { mode: shadow }\n"
		   "endpoints:\n  - { backend: llm, server: s1, models: [m9] }\n");
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	struct core_request cr = { .model = cs("m1") };
	struct core_decision cd;
	core_decide(r.core, &cr, 0, &r.rng, &cd);
	ck_assert_int_eq(cd.reason, CORE_REASON_NO_MODEL);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Feedback (HAProxy 3.x): the server HAProxy used is compared with
 * warmlane's choice per reason; the map learns the server HAProxy used,
 * so the next decision's affinity names it, and a request HAProxy then
 * sends elsewhere is one warmlane would have kept warm. */
START_TEST(feedback_compares_and_teaches)
{
	struct config cfg;
	struct route r;
	load(&cfg, shadow_yaml);
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	idle_poll(&r);
	struct route_decision d;
	decide(&r, "conv", &d);
	ck_assert_int_eq(d.reason, ROUTE_HASH);
	char mine[64], other[64], third[64];
	snprintf(mine, sizeof(mine), "llm/%s", d.server);
	snprintf(other, sizeof(other), "llm/%s",
		 strcmp(d.server, "s1") == 0 ? "s2" : "s1");
	snprintf(third, sizeof(third), "llm/%s",
		 strcmp(d.server, "s3") == 0 ? "s2" : "s3");
	if (strcmp(third, other) == 0)
		snprintf(third, sizeof(third), "llm/s3");
	ck_assert_str_ne(third, mine);

	/* HAProxy sent it elsewhere. */
	shadow_feedback(&r, &d, other, 200);
	ck_assert_uint_eq(r.shadow.responses[CORE_REASON_HASH][SHADOW_MATCH_NO], 1);
	ck_assert_uint_eq(r.shadow.warm, 0);
	ck_assert_uint_eq(in_flight_sum(&r), 0);
	/* The map follows it: affinity to `other` now. */
	decide(&r, "conv", &d);
	ck_assert_int_eq(d.reason, ROUTE_AFFINITY);
	char got[64];
	snprintf(got, sizeof(got), "llm/%s", d.server);
	ck_assert_str_eq(got, other);
	/* HAProxy keeps it there: a warm match. */
	shadow_feedback(&r, &d, other, 200);
	ck_assert_uint_eq(r.shadow.responses[CORE_REASON_AFFINITY][SHADOW_MATCH_YES], 1);
	ck_assert_uint_eq(r.shadow.warm, 1);
	ck_assert_uint_eq(r.shadow.warm_missed, 0);
	/* Then leastconn moves it: warmlane would have kept that cache. */
	decide(&r, "conv", &d);
	ck_assert_int_eq(d.reason, ROUTE_AFFINITY);
	shadow_feedback(&r, &d, third, 200);
	ck_assert_uint_eq(r.shadow.responses[CORE_REASON_AFFINITY][SHADOW_MATCH_NO], 1);
	ck_assert_uint_eq(r.shadow.warm, 2);
	ck_assert_uint_eq(r.shadow.warm_missed, 1);
	decide(&r, "conv", &d);
	snprintf(got, sizeof(got), "llm/%s", d.server);
	ck_assert_str_eq(got, third);

	/* An unknown reason is not compared; a server outside the pool is
	 * a mismatch (and teaches nothing). */
	struct route_decision bad = d;
	bad.reason = ROUTE_REASON_COUNT; /* "unknown" */
	shadow_feedback(&r, &bad, third, 200);
	ck_assert_uint_eq(r.shadow.bad_reason, 1);
	uint64_t unknown = r.fb.unknown_server;
	shadow_feedback(&r, &d, "llm/elsewhere", 200);
	ck_assert_uint_eq(r.shadow.responses[CORE_REASON_AFFINITY][SHADOW_MATCH_NO], 2);
	ck_assert_uint_eq(r.fb.unknown_server, unknown + 1);
	/* Feedback without shadow_reason (route mode) compares nothing. */
	uint64_t before = r.shadow.warm;
	struct route_feedback fb;
	memset(&fb, 0, sizeof(fb));
	for (int i = 0; i < ROUTE_FB_COUNT; i++)
		fb.args[i] = spop_data_null();
	fb.args[ROUTE_FB_SERVER] = str(third);
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(200);
	route_feedback(&r, &fb);
	ck_assert_uint_eq(r.shadow.warm, before);
	ck_assert_uint_eq(in_flight_sum(&r), 0);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* HAProxy 2.6 (no feedback message): the log line's sh and shr are the
 * comparison, and the line teaches the server HAProxy used (be/srv),
 * in-flight left to the poll. A line whose feedback was seen (fb=1) is
 * not compared twice. */
START_TEST(log_line_compares_and_teaches)
{
	struct config cfg;
	struct route r;
	load(&cfg, shadow_yaml);
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	idle_poll(&r);
	struct route_decision d;
	decide(&r, "conv", &d);
	ck_assert_int_eq(d.reason, ROUTE_HASH);
	const char *other = strcmp(d.server, "s1") == 0 ? "s2" : "s1";
	int used = core_endpoint_find(r.core, cs("llm"), cs(other), cs("k1"));
	ck_assert_int_ge(used, 0);
	core_endpoint_sync(r.core, used, CORE_ADMIN_ENABLED, 2, 0);

	ck_assert_int_eq(shadow_line(&r, &d, other, false), ROUTE_LOG_USED);
	ck_assert_uint_eq(r.shadow.responses[CORE_REASON_HASH][SHADOW_MATCH_NO], 1);
	ck_assert_uint_eq(r.log.unrouted, 0);
	ck_assert_uint_eq(r.log.ends[CORE_END_COMPLETE], 1);
	struct core_endpoint_info in;
	ck_assert_int_eq(core_endpoint_info(r.core, used, 0, &in), 0);
	ck_assert_uint_eq(in.in_flight, 2);
	ck_assert_uint_eq(in.completions[CORE_END_COMPLETE], 1);

	decide(&r, "conv", &d);
	ck_assert_int_eq(d.reason, ROUTE_AFFINITY);
	ck_assert_str_eq(d.server, other);
	ck_assert_int_eq(shadow_line(&r, &d, other, false), ROUTE_LOG_USED);
	ck_assert_uint_eq(r.shadow.warm, 1);
	ck_assert_uint_eq(r.shadow.warm_missed, 0);
	ck_assert_int_eq(shadow_line(&r, &d, other, true), ROUTE_LOG_USED);
	ck_assert_uint_eq(r.shadow.warm, 1);

	/* HAProxy's own answer without a server: a mismatch, no endpoint. */
	ck_assert_int_eq(shadow_line(&r, &d, "<NOSRV>", false), ROUTE_LOG_UNKNOWN);
	ck_assert_uint_eq(r.shadow.warm_missed, 1);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* A feedback whose ACK came too late for HAProxy (after `timeout
 * processing`) leaves fb unset in its log line: the unique id, in both,
 * keeps the response counted once. Other requests' lines still count. */
START_TEST(late_ack_counted_once)
{
	struct config cfg;
	struct route r;
	load(&cfg, shadow_yaml);
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	idle_poll(&r);
	struct route_decision d;
	decide(&r, "conv", &d);
	const char *other = strcmp(d.server, "s1") == 0 ? "s2" : "s1";
	char used[32];
	snprintf(used, sizeof(used), "llm/%s", other);
	struct route_feedback fb;
	char akey[17], sh[300];
	memset(&fb, 0, sizeof(fb));
	for (int i = 0; i < ROUTE_FB_COUNT; i++)
		fb.args[i] = spop_data_null();
	fb.args[ROUTE_FB_SERVER] = str(used);
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(200);
	snprintf(akey, sizeof(akey), "%016" PRIx64, d.akey);
	fb.args[ROUTE_FB_AKEY] = str(akey);
	snprintf(sh, sizeof(sh), "%s/%s", d.backend, d.server);
	fb.args[ROUTE_FB_SHADOW] = str(sh);
	fb.args[ROUTE_FB_SHADOW_REASON] = str("hash");
	fb.args[ROUTE_FB_ID] = str("x"); /* shadow_line's id */
	route_feedback(&r, &fb);
	ck_assert_uint_eq(r.shadow.responses[CORE_REASON_HASH][SHADOW_MATCH_NO], 1);
	int ep = core_endpoint_find(r.core, cs("llm"), cs(other), cs("k1"));
	struct core_endpoint_info in;
	ck_assert_int_eq(core_endpoint_info(r.core, ep, 0, &in), 0);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_SUCCESS], 1);
	ck_assert_int_eq(shadow_line(&r, &d, other, false), ROUTE_LOG_USED);
	ck_assert_uint_eq(r.shadow.responses[CORE_REASON_HASH][SHADOW_MATCH_NO], 1);
	ck_assert_uint_eq(r.shadow.duplicates, 1);
	/* nor does the core take its status twice: the feedback had it */
	ck_assert_int_eq(core_endpoint_info(r.core, ep, 0, &in), 0);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_SUCCESS], 1);
	ck_assert_uint_eq(in.completions[CORE_END_COMPLETE], 1);
	/* forgotten once its line came: the next line of that id counts */
	ck_assert_int_eq(shadow_line(&r, &d, other, false), ROUTE_LOG_USED);
	ck_assert_uint_eq(r.shadow.responses[CORE_REASON_HASH][SHADOW_MATCH_NO] +
				  r.shadow.responses[CORE_REASON_AFFINITY][SHADOW_MATCH_NO],
			  2);
	/* the same feedback twice: once */
	route_feedback(&r, &fb);
	route_feedback(&r, &fb);
	ck_assert_uint_eq(r.shadow.duplicates, 2);
	struct shadow_stats st = { 0 };
	ck_assert(shadow_first(&st, cs(""), true));
	ck_assert(shadow_first(&st, cs(""), true));
	ck_assert_uint_eq(st.duplicates, 0);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

START_TEST(count_matches)
{
	struct shadow_stats s = { 0 };
	ck_assert_int_eq(shadow_count(&s, cs("hash"), cs("llm/s1"), cs("llm"),
				      cs("s1")), SHADOW_MATCH_YES);
	/* exact names: neither a prefix nor another backend matches */
	ck_assert_int_eq(shadow_count(&s, cs("hash"), cs("llm/s1"), cs("llm"),
				      cs("s10")), SHADOW_MATCH_NO);
	ck_assert_int_eq(shadow_count(&s, cs("hash"), cs("llm/s1"), cs("ll"),
				      cs("m/s1")), SHADOW_MATCH_NO);
	ck_assert_int_eq(shadow_count(&s, cs("hash"), cs("llm/s1"), cs("gpu"),
				      cs("s1")), SHADOW_MATCH_NO);
	ck_assert_int_eq(shadow_count_path(&s, cs("p2c"), cs("llm/s1"),
					   cs("llm/s1")), SHADOW_MATCH_YES);
	ck_assert_int_eq(shadow_count_path(&s, cs("p2c"), cs("llm/s1"),
					   cs("llms1")), SHADOW_MATCH_NO);
	ck_assert_int_eq(shadow_count(&s, cs("none"), cs(""), cs("llm"),
				      cs("s1")), SHADOW_MATCH_NONE);
	ck_assert_int_eq(shadow_count(&s, cs("affinit"), cs("llm/s1"),
				      cs("llm"), cs("s1")), -1);
	ck_assert_uint_eq(s.responses[CORE_REASON_HASH][SHADOW_MATCH_YES], 1);
	ck_assert_uint_eq(s.responses[CORE_REASON_HASH][SHADOW_MATCH_NO], 3);
	ck_assert_uint_eq(s.responses[CORE_REASON_P2C][SHADOW_MATCH_YES], 1);
	ck_assert_uint_eq(s.responses[CORE_REASON_NONE][SHADOW_MATCH_NONE], 1);
	ck_assert_uint_eq(s.bad_reason, 1);
	ck_assert_uint_eq(s.warm, 0);
	ck_assert_str_eq(shadow_match_name(SHADOW_MATCH_NONE), "none");
	ck_assert_str_eq(shadow_match_name(SHADOW_MATCH_COUNT), "unknown");
}
END_TEST

START_TEST(mode_config)
{
	struct config cfg;
	char err[1024];
	ck_assert_int_eq(config_init(&cfg), 0);
	ck_assert_int_eq(cfg.mode, CONFIG_MODE_ROUTE);
	const char *y = "policy:\n  mode: shadows\n";
	ck_assert_int_eq(config_load_data(&cfg, "w.yaml", y, strlen(y), err,
					  sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "w.yaml:2:9: policy.mode: \"shadows\" is not one of route, shadow") != NULL,
		      "%s", err);
	y = "policy:\n  mode: route\n";
	ck_assert_int_eq(config_load_data(&cfg, "w.yaml", y, strlen(y), err,
					  sizeof(err)), 0);
	ck_assert_int_eq(cfg.mode, CONFIG_MODE_ROUTE);
	ck_assert_str_eq(config_mode_name(CONFIG_MODE_SHADOW), "shadow");
	ck_assert_ptr_null(config_mode_name(CONFIG_MODE_COUNT));
	config_finish(&cfg);
}
END_TEST

static Suite *shadow_suite(void)
{
	Suite *s = suite_create("agent-shadow");
	TCase *tc = tcase_create("shadow");
	tcase_add_test(tc, decide_names_only);
	tcase_add_test(tc, ack_has_no_routing_variable);
	tcase_add_test(tc, feedback_compares_and_teaches);
	tcase_add_test(tc, log_line_compares_and_teaches);
	tcase_add_test(tc, late_ack_counted_once);
	tcase_add_test(tc, count_matches);
	tcase_add_test(tc, mode_config);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(shadow_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
