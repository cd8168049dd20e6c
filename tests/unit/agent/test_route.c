/* test_route.c - agent: round-robin decisions, affinity keys, ACK building, logs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "notify.h"
#include "route.h"
#include "stats.h"

static void load(struct config *cfg, const char *yaml)
{
	char err[4096];
	ck_assert_int_eq(config_init(cfg), 0);
	int r = config_load_data(cfg, "t.yaml", yaml, strlen(yaml), err,
				 sizeof(err));
	ck_assert_msg(r == 0, "%s", err);
}

static void req_init(struct route_request *req)
{
	memset(req, 0, sizeof(*req));
	for (int i = 0; i < ROUTE_ARG_COUNT; i++)
		req->args[i] = spop_data_null();
}

static struct spop_data str(const char *s)
{
	return spop_data_string(s, strlen(s));
}

START_TEST(rr_by_model)
{
	struct config cfg;
	struct route r;
	struct route_request req;
	struct route_decision d;
	load(&cfg, "endpoints:\n"
		   "  - {backend: a, server: s1, models: [m1]}\n"
		   "  - {backend: a, server: s2}\n"
		   "  - {backend: b, server: s3, models: [m2], keys: [k3]}\n");
	route_init(&r, &cfg);
	req_init(&req);

	/* m1: s1 and s2 (no models: every model). */
	req.args[ROUTE_ARG_MODEL] = str("m1");
	const char *seen[4];
	for (int i = 0; i < 4; i++) {
		route_decide(&r, &req, &d);
		ck_assert_int_eq(d.reason, ROUTE_RR);
		ck_assert_str_eq(d.backend, "a");
		seen[i] = d.server;
		ck_assert_ptr_null(d.key);
	}
	ck_assert_str_ne(seen[0], seen[1]);
	ck_assert_str_eq(seen[0], seen[2]);
	ck_assert_str_eq(seen[1], seen[3]);

	/* m2: s2 and s3; s3 carries its first key. */
	req.args[ROUTE_ARG_MODEL] = str("m2");
	int s3 = 0;
	for (int i = 0; i < 4; i++) {
		route_decide(&r, &req, &d);
		if (strcmp(d.server, "s3") == 0) {
			s3++;
			ck_assert_str_eq(d.key, "k3");
			ck_assert_str_eq(d.backend, "b");
		} else {
			ck_assert_str_eq(d.server, "s2");
		}
	}
	ck_assert_int_eq(s3, 2);

	/* A model name matches exactly, not as a prefix. */
	req.args[ROUTE_ARG_MODEL] = str("m");
	route_decide(&r, &req, &d);
	ck_assert_str_eq(d.server, "s2");

	/* No endpoint without models this time: m9 has no server. */
	route_finish(&r);
	config_finish(&cfg);

	load(&cfg, "endpoints:\n  - {backend: a, server: s1, models: [m1]}\n");
	route_init(&r, &cfg);
	req.args[ROUTE_ARG_MODEL] = str("m9");
	route_decide(&r, &req, &d);
	ck_assert_int_eq(d.reason, ROUTE_NO_MODEL);
	ck_assert_ptr_null(d.backend);
	ck_assert_ptr_null(d.server);
	/* A model of another type or empty counts as absent. */
	req.args[ROUTE_ARG_MODEL] = spop_data_int64(7);
	route_decide(&r, &req, &d);
	ck_assert_int_eq(d.reason, ROUTE_RR);
	req.args[ROUTE_ARG_MODEL] = str("");
	route_decide(&r, &req, &d);
	ck_assert_int_eq(d.reason, ROUTE_RR);
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

START_TEST(identity_ladder)
{
	const enum core_rung dflt[] = { CORE_RUNG_SESSION, CORE_RUNG_PREFIX,
					CORE_RUNG_INSTALL, CORE_RUNG_CALLER };
	struct route_request req;
	uint64_t k_session, k_p1, k_p3, k_install, k_caller, k;
	req_init(&req);
	ck_assert(!route_identity(&req, dflt, 4, &k));

	/* src is not a default rung. */
	req.args[ROUTE_ARG_SRC].type = SPOP_DATA_IPV4;
	memcpy(req.args[ROUTE_ARG_SRC].u.ipv4, "\x0a\x00\x00\x01", 4);
	ck_assert(!route_identity(&req, dflt, 4, &k));
	const enum core_rung with_src[] = { CORE_RUNG_SESSION, CORE_RUNG_SRC };
	ck_assert(route_identity(&req, with_src, 2, &k));

	req.args[ROUTE_ARG_CALLER] = spop_data_int64(-5);
	ck_assert(route_identity(&req, dflt, 4, &k_caller));
	req.args[ROUTE_ARG_INSTALL] = str("inst");
	ck_assert(route_identity(&req, dflt, 4, &k_install));
	ck_assert_uint_ne(k_install, k_caller);
	req.args[ROUTE_ARG_PREFIX1] = spop_data_int64(1111);
	ck_assert(route_identity(&req, dflt, 4, &k_p1));
	req.args[ROUTE_ARG_PREFIX3] = spop_data_int64(3333);
	ck_assert(route_identity(&req, dflt, 4, &k_p3));
	ck_assert_uint_ne(k_p1, k_p3); /* the longest prefix wins */
	req.args[ROUTE_ARG_SESSION] = str("sess");
	ck_assert(route_identity(&req, dflt, 4, &k_session));
	ck_assert_uint_ne(k_session, k_p3);

	/* An empty string identifies nobody: the next rung decides. */
	req.args[ROUTE_ARG_SESSION] = str("");
	ck_assert(route_identity(&req, dflt, 4, &k));
	ck_assert_uint_eq(k, k_p3);

	/* The same value on two rungs gives two keys; the same value on
	 * one rung always the same key, whatever its integer type. */
	struct route_request a, b;
	req_init(&a);
	req_init(&b);
	a.args[ROUTE_ARG_SESSION] = str("x");
	b.args[ROUTE_ARG_INSTALL] = str("x");
	uint64_t ka, kb;
	ck_assert(route_identity(&a, dflt, 4, &ka));
	ck_assert(route_identity(&b, dflt, 4, &kb));
	ck_assert_uint_ne(ka, kb);
	a.args[ROUTE_ARG_SESSION] = spop_data_int64(42);
	b.args[ROUTE_ARG_INSTALL] = spop_data_null();
	b.args[ROUTE_ARG_SESSION].type = SPOP_DATA_UINT64;
	b.args[ROUTE_ARG_SESSION].u.u64 = 42;
	ck_assert(route_identity(&a, dflt, 4, &ka));
	ck_assert(route_identity(&b, dflt, 4, &kb));
	ck_assert_uint_eq(ka, kb);
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
	ck_assert_str_eq(route_reason_name(ROUTE_RR), "rr");
	ck_assert_str_eq(route_reason_name(ROUTE_COOLDOWN_FALLBACK),
			 "cooldown_fallback");
	ck_assert_str_eq(route_reason_name(ROUTE_REASON_COUNT), "unknown");
}
END_TEST

/* Builds a NOTIFY payload with one route message carrying a model. */
static size_t route_payload(uint8_t *buf, size_t cap, const char *model)
{
	struct spop_writer w;
	spop_writer_init(&w, buf, cap);
	spop_put_str(&w, "route", 5);
	uint8_t one = 1;
	spop_put_bytes(&w, &one, 1);
	struct spop_data m = str(model);
	spop_put_kv(&w, "model", &m);
	ck_assert(!w.overflow);
	return w.len;
}

START_TEST(notify_ack_fallback)
{
	/* Names near the longest allowed: the full ACK is over 256 bytes. */
	char name[CONFIG_NAME_MAX + 1];
	memset(name, 'n', CONFIG_NAME_MAX);
	name[CONFIG_NAME_MAX] = '\0';
	char yaml[1024];
	snprintf(yaml, sizeof(yaml),
		 "endpoints:\n  - {backend: %s, server: %s, keys: [%s]}\n",
		 name, name, name);
	struct config cfg;
	load(&cfg, yaml);
	struct route r;
	struct stats st = { 0 };
	route_init(&r, &cfg);
	struct notify_ctx ctx = { .route = &r, .stats = &st };

	uint8_t payload[128], out[2048];
	struct spop_frame f = { .type = SPOP_FRAME_NOTIFY,
				.flags = SPOP_FLAG_FIN,
				.stream_id = 1,
				.frame_id = 2,
				.payload = payload };
	f.payload_len = route_payload(payload, sizeof(payload), "m");
	struct notify_deferred later;
	enum spop_status status;

	ptrdiff_t n = notify_handle(&ctx, &f, out, sizeof(out), &later, &status);
	ck_assert_int_gt(n, 3 * CONFIG_NAME_MAX);
	ck_assert_uint_eq(st.ack_fallbacks, 0);

	/* A 256-byte frame cannot hold it: a bare `ack` instead. */
	n = notify_handle(&ctx, &f, out, 256 + 4, &later, &status);
	ck_assert_int_gt(n, 0);
	ck_assert_int_le(n, 260);
	ck_assert_uint_eq(st.ack_fallbacks, 1);
	struct spop_frame a;
	enum spop_status s2;
	ck_assert_int_eq(spop_frame_decode(out, (size_t)n, 256, &a, &s2), n);
	ck_assert_uint_eq(a.stream_id, 1);
	ck_assert_uint_eq(a.frame_id, 2);
	struct spop_reader rd;
	spop_reader_init(&rd, a.payload, a.payload_len);
	enum spop_action act;
	enum spop_scope scope;
	struct spop_str vname;
	struct spop_data val;
	ck_assert_int_eq(spop_action_next(&rd, &act, &scope, &vname, &val, &s2), 1);
	ck_assert(spop_str_eq(vname, NOTIFY_ACK_VAR));
	ck_assert_int_eq(spop_action_next(&rd, &act, &scope, &vname, &val, &s2), 0);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

START_TEST(log_format)
{
	char q[64];
	ck_assert_str_eq(log_quote(q, sizeof(q), "plain", 5), "plain");
	ck_assert_str_eq(log_quote(q, sizeof(q), "", 0), "\"\"");
	ck_assert_str_eq(log_quote(q, sizeof(q), "a b", 3), "\"a b\"");
	ck_assert_str_eq(log_quote(q, sizeof(q), "k=v", 3), "\"k=v\"");
	ck_assert_str_eq(log_quote(q, sizeof(q), "say \"hi\"\n", 9),
			 "\"say \\\"hi\\\"\\n\"");
	ck_assert_str_eq(log_quote(q, sizeof(q), "\x01", 1), "\"\\x01\"");
	char lng[200];
	memset(lng, 'x', sizeof(lng));
	lng[0] = ' ';
	const char *t = log_quote(q, 16, lng, sizeof(lng));
	ck_assert_uint_le(strlen(t), 15);
	ck_assert(strstr(t, "...\"") != NULL);

	enum log_level l;
	ck_assert_int_eq(log_level_parse("debug", &l), 0);
	ck_assert_int_eq(l, LOG_LEVEL_DEBUG);
	ck_assert_int_lt(log_level_parse("DEBUG", &l), 0);
	ck_assert_int_lt(log_level_parse("warning", &l), 0);

	FILE *f = tmpfile();
	ck_assert_ptr_nonnull(f);
	log_set_stream(f);
	log_set_level(LOG_LEVEL_INFO);
	log_debug("hidden", "x=%d", 1);
	log_info("hello world", "conn=%d addr=%s", 7, "unix:/a");
	log_warn("bare", NULL);
	log_set_stream(NULL);
	rewind(f);
	char line[512];
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert_msg(strncmp(line, "ts=", 3) == 0, "%s", line);
	ck_assert(strstr(line, "Z level=info msg=\"hello world\" conn=7 addr=unix:/a\n") != NULL);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert(strstr(line, " level=warn msg=bare\n") != NULL);
	ck_assert_ptr_null(fgets(line, sizeof(line), f));
	fclose(f);
}
END_TEST

START_TEST(stats_labels)
{
	ck_assert_uint_eq(stats_status_index(0), 0);
	ck_assert_uint_eq(stats_status_index(13), 13);
	ck_assert_uint_eq(stats_status_index(99), STATS_STATUS_COUNT - 1);
	ck_assert_uint_eq(stats_status_index(12345), STATS_STATUS_COUNT - 1);
	ck_assert_uint_eq(stats_status_code(STATS_STATUS_COUNT - 1), 99);
	ck_assert_str_eq(stats_frame_name(STATS_FRAME_NOTIFY), "NOTIFY");
	ck_assert_str_eq(stats_frame_name(STATS_FRAME_ACK), "ACK");
}
END_TEST

static Suite *route_suite(void)
{
	Suite *s = suite_create("agent-route");
	TCase *tc = tcase_create("route");
	tcase_add_test(tc, rr_by_model);
	tcase_add_test(tc, identity_ladder);
	tcase_add_test(tc, arg_names_exact);
	tcase_add_test(tc, notify_ack_fallback);
	tcase_add_test(tc, log_format);
	tcase_add_test(tc, stats_labels);
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
