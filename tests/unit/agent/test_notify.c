/* test_notify.c - agent: NOTIFY frames through notify_handle: argument order, the ACK and its fallback, malformed frames. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "harness.h"
#include "log.h"
#include "notify.h"
#include "route.h"
#include "route_fx.h"
#include "stats.h"
#include "../run.h"

/* A NOTIFY frame (FIN) over payload[0..len). */
static struct spop_frame notify_frame(const uint8_t *payload, size_t len,
				      uint64_t stream_id, uint64_t frame_id)
{
	return (struct spop_frame){ .type = SPOP_FRAME_NOTIFY,
				    .flags = SPOP_FLAG_FIN,
				    .stream_id = stream_id,
				    .frame_id = frame_id,
				    .payload = payload,
				    .payload_len = len };
}

/* A `route` message with the arguments names[order[0..n)] and the values
 * HAProxy would send; returns the payload length. */
static size_t route_payload_order(uint8_t *buf, size_t cap,
				  const unsigned *order, unsigned n)
{
	struct spop_writer w;
	spop_writer_init(&w, buf, cap);
	spop_put_str(&w, "route", 5);
	uint8_t nb = (uint8_t)n;
	spop_put_bytes(&w, &nb, 1);
	for (unsigned i = 0; i < n; i++) {
		const char *name = spoe_route_args[order[i]];
		struct spop_data v = spop_data_null();
		if (strcmp(name, "session") == 0)
			v = str("sess-42");
		else if (strcmp(name, "prefix1") == 0)
			v = spop_data_int64(0x1234567);
		else if (strcmp(name, "caller") == 0)
			v = spop_data_int64(-77);
		else if (strcmp(name, "model") == 0)
			v = str("m1");
		else if (strcmp(name, "stream") == 0)
			v = spop_data_bool(true);
		else if (strcmp(name, "size") == 0)
			v = spop_data_int64(81920);
		else if (strcmp(name, "id") == 0)
			v = str("7F000001:C3A2_7F000001:1F90_6930A1B2_0001:1F2B");
		spop_put_kv(&w, name, &v);
	}
	ck_assert(!w.overflow);
	return w.len;
}

/* The same request in the file's order, reversed, and with an older
 * config's fewer arguments (no hints, which are empty anyway) is the same
 * decision: the same ACK bytes (akey is the identity's hash). */
START_TEST(notify_route_any_order)
{
	const unsigned nr = ROUTE_ARG_COUNT;
	unsigned fwd[ROUTE_ARG_COUNT], rev[ROUTE_ARG_COUNT];
	for (unsigned i = 0; i < nr; i++) {
		fwd[i] = i;
		rev[i] = nr - 1 - i;
	}
	const struct { const unsigned *order; unsigned n; } v[] = {
		{ fwd, nr }, { rev, nr }, { fwd, 10 }, { rev + nr - 10, 10 },
	};
	uint8_t first[512];
	ptrdiff_t first_n = 0;
	for (unsigned k = 0; k < sizeof(v) / sizeof(*v); k++) {
		struct config cfg;
		load(&cfg, "endpoints:\n  - {backend: llm, server: s1, "
			   "models: [m1], keys: [k1]}\n");
		struct route r;
		struct stats st = { 0 };
		ck_assert_int_eq(route_init(&r, &cfg), 0);
		struct notify_ctx ctx = { .route = &r, .stats = &st };
		uint8_t payload[512], out[512];
		struct spop_frame f = notify_frame(
			payload, route_payload_order(payload, sizeof(payload),
						     v[k].order, v[k].n),
			3, 1);
		struct notify_deferred later;
		enum spop_status status;
		ptrdiff_t n = notify_handle(&ctx, &f, out, sizeof(out), &later,
					    &status);
		ck_assert_int_gt(n, 0);
		ck_assert_uint_eq(st.msgs_route, 1);
		if (k == 0) {
			memcpy(first, out, (size_t)n);
			first_n = n;
			/* The ACK's akey is the decision's, as 16 lower-case
			 * hex digits (haplog_akey_parse reads it back). */
			struct route_request req;
			req_init(&req);
			req.args[ROUTE_ARG_SESSION] = str("sess-42");
			req.args[ROUTE_ARG_PREFIX1] = spop_data_int64(0x1234567);
			req.args[ROUTE_ARG_CALLER] = spop_data_int64(-77);
			req.args[ROUTE_ARG_MODEL] = str("m1");
			req.args[ROUTE_ARG_STREAM] = spop_data_bool(true);
			struct route_decision d;
			route_decide(&r, &req, &d);
			ck_assert(d.has_akey);
			char want[17];
			snprintf(want, sizeof(want), "%016llx",
				 (unsigned long long)d.akey);
			struct spop_frame a;
			enum spop_status s2;
			ck_assert_int_eq(spop_frame_decode(out, (size_t)n, 16380,
							   &a, &s2), n);
			struct spop_reader rd;
			spop_reader_init(&rd, a.payload, a.payload_len);
			enum spop_action act;
			enum spop_scope scope;
			struct spop_str vname;
			struct spop_data val;
			bool seen = false;
			while (spop_action_next(&rd, &act, &scope, &vname, &val,
						&s2) == 1) {
				if (!spop_str_eq(vname, "akey"))
					continue;
				ck_assert(val.type == SPOP_DATA_STRING);
				ck_assert(spop_str_eq(val.u.str, want));
				seen = true;
			}
			ck_assert(seen);
		} else {
			ck_assert_msg(n == first_n &&
					      memcmp(out, first, (size_t)n) == 0,
				      "variant %u: another ACK", k);
		}
		route_finish(&r);
		config_finish(&cfg);
	}
}
END_TEST

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

/* One endpoint whose backend, server and key are names of the longest
 * length allowed: the full ACK is over 256 bytes. */
static void load_longest_names(struct config *cfg)
{
	char name[CONFIG_NAME_MAX + 1];
	memset(name, 'n', CONFIG_NAME_MAX);
	name[CONFIG_NAME_MAX] = '\0';
	char yaml[1024];
	snprintf(yaml, sizeof(yaml),
		 "endpoints:\n  - {backend: %s, server: %s, keys: [%s]}\n",
		 name, name, name);
	load(cfg, yaml);
}

/* A NOTIFY frame (FIN) of one `route` message for model, in payload. */
static struct spop_frame route_frame(uint8_t *payload, size_t cap,
				     const char *model, uint64_t stream_id,
				     uint64_t frame_id)
{
	return notify_frame(payload, route_payload(payload, cap, model),
			    stream_id, frame_id);
}

START_TEST(notify_ack_fallback)
{
	struct config cfg;
	load_longest_names(&cfg);
	struct route r;
	struct stats st = { 0 };
	route_init(&r, &cfg);
	struct notify_ctx ctx = { .route = &r, .stats = &st };

	uint8_t payload[128], out[2048];
	struct spop_frame f = route_frame(payload, sizeof(payload), "m", 1, 2);
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

/* 1,000 NOTIFYs whose ACK does not fit a 256-byte frame: 1,000 bare ACKs
 * counted, one warning line; the next, a minute later, says how many were
 * held back. */
START_TEST(notify_ack_fallback_rate_limited)
{
	struct config cfg;
	load_longest_names(&cfg);
	struct route r;
	struct stats st = { 0 };
	route_init(&r, &cfg);
	FILE *logf = tmpfile();
	ck_assert_ptr_nonnull(logf);
	log_set_stream(logf);

	uint8_t payload[128], out[2048];
	struct spop_frame f = route_frame(payload, sizeof(payload), "m", 0, 1);
	struct notify_deferred later;
	enum spop_status status;
	const uint64_t t0 = 5000000;
	static const char needle[] = "msg=\"ACK does not fit";
	for (unsigned i = 0; i < 1000; i++) {
		/* one a millisecond: a second of traffic */
		struct notify_ctx ctx = { .route = &r, .stats = &st,
					  .now_ms = t0 + i };
		f.stream_id = i;
		ck_assert_int_gt(notify_handle(&ctx, &f, out, 256 + 4, &later,
					       &status), 0);
	}
	char last[512];
	unsigned lines = log_lines_count(logf, needle, last, sizeof(last));
	fprintf(stderr, "# 1000 fallbacks in 1 s: %u warning line(s)\n", lines);
	ck_assert_uint_eq(st.ack_fallbacks, 1000);
	ck_assert_uint_eq(lines, 1);
	ck_assert_msg(strstr(last, " suppressed=0") != NULL, "%s", last);

	/* Still within the minute: held back; then the minute is over. */
	struct notify_ctx ctx = { .route = &r, .stats = &st,
				  .now_ms = t0 + LOG_LIMIT_INTERVAL_MS - 1 };
	ck_assert_int_gt(notify_handle(&ctx, &f, out, 256 + 4, &later, &status), 0);
	ck_assert_uint_eq(log_lines_count(logf, needle, NULL, 0), 1);
	ctx.now_ms = t0 + LOG_LIMIT_INTERVAL_MS;
	ck_assert_int_gt(notify_handle(&ctx, &f, out, 256 + 4, &later, &status), 0);
	ck_assert_uint_eq(log_lines_count(logf, needle, last, sizeof(last)), 2);
	ck_assert_msg(strstr(last, " suppressed=1000") != NULL, "%s", last);
	ck_assert_uint_eq(st.ack_fallbacks, 1002);

	log_set_stream(NULL);
	fclose(logf);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* The sum of the endpoints' in-flight counts. */
static uint64_t inflight_sum(const struct route *r)
{
	uint64_t sum = 0;
	for (int i = core_endpoint_next(r->core, -1); i >= 0;
	     i = core_endpoint_next(r->core, i)) {
		struct core_endpoint_info info;
		ck_assert_int_eq(core_endpoint_info(r->core, i, 0, &info), 0);
		sum += info.in_flight;
	}
	return sum;
}

/* An ACK cut down to `ack` carries no decision, so HAProxy balances on
 * its own: the decisions it would have carried are taken back (no
 * feedback or log line will ever name them), including those of a frame
 * of many `route` messages whose answers overflow the frame. */
START_TEST(notify_ack_fallback_takes_decisions_back)
{
	struct config cfg;
	load_longest_names(&cfg);
	struct route r;
	struct stats st = { 0 };
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	struct notify_ctx ctx = { .route = &r, .stats = &st, .now_ms = 1000 };

	static uint8_t payload[8192];
	uint8_t out[2048];
	struct spop_frame f = route_frame(payload, sizeof(payload), "m", 1, 1);
	struct notify_deferred later;
	enum spop_status status;

	ck_assert_int_gt(notify_handle(&ctx, &f, out, 256 + 4, &later, &status), 0);
	ck_assert_uint_eq(st.ack_fallbacks, 1);
	ck_assert_uint_eq(inflight_sum(&r), 0);
	/* The same frame where its answer fits: decided and counted. */
	ck_assert_int_gt(notify_handle(&ctx, &f, out, sizeof(out), &later, &status), 0);
	ck_assert_uint_eq(inflight_sum(&r), 1);

	/* 300 `route` messages in one frame: their answers overflow 2 KiB. */
	struct spop_writer w;
	spop_writer_init(&w, payload, sizeof(payload));
	for (int i = 0; i < 300; i++) {
		spop_put_str(&w, "route", 5);
		spop_put_bytes(&w, (const uint8_t[]){ 1 }, 1);
		struct spop_data m = str("m");
		spop_put_kv(&w, "model", &m);
	}
	ck_assert(!w.overflow);
	f.payload_len = w.len;
	ck_assert_int_gt(notify_handle(&ctx, &f, out, sizeof(out), &later, &status), 0);
	ck_assert_uint_eq(st.ack_fallbacks, 2);
	ck_assert_uint_eq(inflight_sum(&r), 1);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Appends a `feedback` message: a non-streamed 200 from llm/gpu1. */
static void put_feedback(struct spop_writer *w)
{
	spop_put_str(w, "feedback", 8);
	uint8_t n = 2;
	spop_put_bytes(w, &n, 1);
	struct spop_data v = str("llm/gpu1");
	spop_put_kv(w, "server", &v);
	v = spop_data_int64(200);
	spop_put_kv(w, "status", &v);
}

/* Appends a `route` message for a session on m1. */
static void put_route(struct spop_writer *w, const char *session)
{
	spop_put_str(w, "route", 5);
	uint8_t n = 2;
	spop_put_bytes(w, &n, 1);
	struct spop_data v = str(session);
	spop_put_kv(w, "session", &v);
	v = str("m1");
	spop_put_kv(w, "model", &v);
}

/* What a NOTIFY may change: nothing of it when the frame is refused. */
struct notify_effects {
	uint64_t inflight, routes, feedbacks, unknown, decisions;
	uint64_t ewma_samples;
};

static void effects(const struct route *r, const struct stats *st,
		    struct notify_effects *e)
{
	memset(e, 0, sizeof(*e));
	e->inflight = inflight_sum(r);
	e->routes = st->msgs_route;
	e->feedbacks = st->msgs_feedback;
	e->unknown = st->msgs_unknown;
	for (int i = 0; i < ROUTE_REASON_COUNT; i++)
		e->decisions += st->reasons[i];
	for (int i = core_endpoint_next(r->core, -1); i >= 0;
	     i = core_endpoint_next(r->core, i)) {
		struct core_endpoint_info info;
		ck_assert_int_eq(core_endpoint_info(r->core, i, 0, &info), 0);
		for (int k = 0; k < CORE_KIND_COUNT; k++)
			e->ewma_samples += info.samples[k];
	}
}

static void expect_same(const struct notify_effects *a,
			const struct notify_effects *b, const char *what)
{
	ck_assert_msg(a->inflight == b->inflight, "%s: in-flight %llu -> %llu",
		      what, (unsigned long long)a->inflight,
		      (unsigned long long)b->inflight);
	ck_assert_msg(a->routes == b->routes && a->feedbacks == b->feedbacks &&
			      a->unknown == b->unknown &&
			      a->decisions == b->decisions,
		      "%s: messages counted", what);
	ck_assert_msg(a->ewma_samples == b->ewma_samples,
		      "%s: feedback applied", what);
}

/* cfg: endpoints llm/gpu1 and llm/gpu2 serving m1; r routes on it. */
static void two_gpus(struct config *cfg, struct route *r)
{
	load(cfg, "endpoints:\n"
		  "  - {backend: llm, server: gpu1, models: [m1]}\n"
		  "  - {backend: llm, server: gpu2, models: [m1]}\n");
	ck_assert_int_eq(route_init(r, cfg), 0);
}

/* A NOTIFY whose later message is malformed is refused whole: the `route`
 * before it is not decided (its in-flight count would never fall: no ACK
 * carries it, so no feedback and no log line name it), and feedback
 * before it, even past the deferred list, is not applied. */
START_TEST(notify_malformed_frame_changes_nothing)
{
	struct config cfg;
	struct route r;
	two_gpus(&cfg, &r);
	struct stats st = { 0 };
	/* Two requests in flight on gpu1, so that feedback would lower it. */
	int idx[4];
	ck_assert_uint_eq(route_server_find(&r, core_str_c("llm"),
					    core_str_c("gpu1"), idx, 4), 1);
	core_endpoint_sync(r.core, idx[0], CORE_ADMIN_ENABLED, 2, 0);
	struct notify_ctx ctx = { .route = &r, .stats = &st, .now_ms = 1000 };

	static uint8_t payload[4096];
	uint8_t out[2048];
	struct notify_deferred later;
	enum spop_status status;
	for (int variant = 0; variant < 4; variant++) {
		struct spop_writer w;
		spop_writer_init(&w, payload, sizeof(payload));
		const char *what = "";
		switch (variant) {
		case 0: /* a good route, then 2 arguments announced, 1 sent */
			what = "route, then a short message";
			put_route(&w, "s1");
			spop_put_str(&w, "feedback", 8);
			spop_put_bytes(&w, (const uint8_t[]){ 2 }, 1);
			{
				struct spop_data v = spop_data_int64(200);
				spop_put_kv(&w, "status", &v);
			}
			break;
		case 1: /* a good route, then one with a bad type byte */
			what = "route, then a bad type";
			put_route(&w, "s1");
			spop_put_str(&w, "route", 5);
			spop_put_bytes(&w, (const uint8_t[]){ 1 }, 1);
			spop_put_str(&w, "model", 5);
			spop_put_bytes(&w, (const uint8_t[]){ 0x0f }, 1);
			break;
		case 2: /* more feedback than the deferred list, route, then
			 * a name cut short */
			what = "feedback x5 and route, then a cut name";
			for (int i = 0; i < NOTIFY_MAX_DEFERRED + 1; i++)
				put_feedback(&w);
			put_route(&w, "s2");
			spop_put_bytes(&w, (const uint8_t[]){ 9, 'r', 'o' }, 3);
			break;
		default: /* route, an unknown message, then trailing garbage */
			what = "route and unknown, then a lone name";
			put_route(&w, "s3");
			spop_put_str(&w, "other", 5);
			spop_put_bytes(&w, (const uint8_t[]){ 0 }, 1);
			spop_put_str(&w, "x", 1);
			break;
		}
		ck_assert(!w.overflow);
		struct spop_frame f = notify_frame(payload, w.len, 1, (uint64_t)variant + 1);
		struct notify_effects before, after;
		effects(&r, &st, &before);
		ck_assert_uint_eq(before.inflight, 2);
		status = SPOP_ERR_NONE;
		ck_assert_int_eq(notify_handle(&ctx, &f, out, sizeof(out), &later,
					       &status), SPOP_EPROTO);
		ck_assert_uint_eq(status, SPOP_ERR_INVALID);
		ck_assert_uint_eq(later.n, 0);
		effects(&r, &st, &after);
		expect_same(&before, &after, what);
	}

	/* The same frame without its bad tail is decided: the test above
	 * would see a change if there were one. */
	struct spop_writer w;
	spop_writer_init(&w, payload, sizeof(payload));
	put_route(&w, "s1");
	struct spop_frame f = notify_frame(payload, w.len, 1, 9);
	ck_assert_int_gt(notify_handle(&ctx, &f, out, sizeof(out), &later,
				       &status), 0);
	ck_assert_uint_eq(inflight_sum(&r), 3);
	ck_assert_uint_eq(st.msgs_route, 1);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Every prefix of a frame of feedback, route and unknown messages: a
 * prefix that is not whole messages is refused and changes nothing; one
 * that is (a message boundary) is answered. */
START_TEST(notify_every_truncation)
{
	struct config cfg;
	struct route r;
	two_gpus(&cfg, &r);
	struct stats st = { 0 };
	struct notify_ctx ctx = { .route = &r, .stats = &st, .now_ms = 1000 };

	static uint8_t payload[4096];
	struct spop_writer w;
	spop_writer_init(&w, payload, sizeof(payload));
	size_t bounds[16], nb = 0;
	bounds[nb++] = 0;
	for (int i = 0; i < NOTIFY_MAX_DEFERRED + 1; i++) {
		put_feedback(&w);
		bounds[nb++] = w.len;
	}
	put_route(&w, "s1");
	bounds[nb++] = w.len;
	spop_put_str(&w, "other", 5);
	spop_put_bytes(&w, (const uint8_t[]){ 0 }, 1);
	bounds[nb++] = w.len;
	put_route(&w, "s2");
	bounds[nb++] = w.len;
	/* Past the messages parsed ahead (8): parsed a second time. */
	for (int i = 0; i < 2; i++) {
		spop_put_str(&w, "other", 5);
		spop_put_bytes(&w, (const uint8_t[]){ 0 }, 1);
		bounds[nb++] = w.len;
	}
	put_route(&w, "s3");
	bounds[nb++] = w.len;
	ck_assert(!w.overflow);

	uint8_t out[2048];
	struct notify_deferred later;
	unsigned refused = 0, answered = 0;
	for (size_t len = 0; len <= w.len; len++) {
		idle_poll(&r);
		bool boundary = false;
		for (size_t b = 0; b < nb; b++)
			boundary = boundary || bounds[b] == len;
		struct spop_frame f = notify_frame(payload, len, len, 1);
		struct notify_effects before, after;
		effects(&r, &st, &before);
		enum spop_status status = SPOP_ERR_NONE;
		ptrdiff_t n = notify_handle(&ctx, &f, out, sizeof(out), &later,
					    &status);
		if (boundary) {
			ck_assert_msg(n > 0, "prefix %zu refused", len);
			notify_run_deferred(&ctx, &later);
			answered++;
			continue;
		}
		ck_assert_msg(n == SPOP_EPROTO, "prefix %zu answered", len);
		ck_assert_uint_eq(later.n, 0);
		effects(&r, &st, &after);
		char what[32];
		snprintf(what, sizeof(what), "prefix %zu", len);
		expect_same(&before, &after, what);
		refused++;
	}
	ck_assert_uint_eq(answered, nb);
	ck_assert_uint_eq(refused, w.len + 1 - nb);
	/* The whole frame: every message acted on, once. */
	struct notify_effects before, after;
	effects(&r, &st, &before);
	struct spop_frame f = notify_frame(payload, w.len, 1, 2);
	enum spop_status status;
	ck_assert_int_gt(notify_handle(&ctx, &f, out, sizeof(out), &later,
				       &status), 0);
	ck_assert_uint_eq(later.n, NOTIFY_MAX_DEFERRED);
	notify_run_deferred(&ctx, &later);
	effects(&r, &st, &after);
	ck_assert_uint_eq(after.routes - before.routes, 3);
	ck_assert_uint_eq(after.feedbacks - before.feedbacks,
			  NOTIFY_MAX_DEFERRED + 1);
	ck_assert_uint_eq(after.unknown - before.unknown, 3);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Seeded mutations of a frame of feedback, route and unknown messages
 * (bytes flipped, replaced, cut): whatever notify_handle makes of one, a
 * refusal changes nothing. Prints how many were refused. */
START_TEST(notify_mutations_refused_whole)
{
	struct config cfg;
	struct route r;
	two_gpus(&cfg, &r);
	struct stats st = { 0 };
	struct notify_ctx ctx = { .route = &r, .stats = &st, .now_ms = 1000 };

	static uint8_t good[1024], payload[1024];
	struct spop_writer w;
	spop_writer_init(&w, good, sizeof(good));
	put_feedback(&w);
	put_route(&w, "s1");
	spop_put_str(&w, "other", 5);
	spop_put_bytes(&w, (const uint8_t[]){ 0 }, 1);
	put_route(&w, "s2");
	put_feedback(&w);
	ck_assert(!w.overflow);

	uint64_t x = 0x9e3779b97f4a7c15ull; /* xorshift64, fixed seed */
	unsigned refused = 0, answered = 0;
	uint8_t out[2048];
	struct notify_deferred later;
	for (unsigned iter = 0; iter < 20000; iter++) {
		memcpy(payload, good, w.len);
		size_t len = w.len;
		unsigned edits = 1 + (unsigned)(iter % 4);
		for (unsigned e = 0; e < edits; e++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t at = (size_t)(x % len);
			switch ((x >> 32) % 3) {
			case 0:
				payload[at] ^= (uint8_t)(1u << ((x >> 40) % 8));
				break;
			case 1:
				payload[at] = (uint8_t)(x >> 48);
				break;
			default:
				len = at + 1;
				break;
			}
		}
		if (iter % 64 == 0)
			idle_poll(&r);
		struct spop_frame f = notify_frame(payload, len, iter, 1);
		struct notify_effects before, after;
		effects(&r, &st, &before);
		enum spop_status status = SPOP_ERR_NONE;
		ptrdiff_t n = notify_handle(&ctx, &f, out, sizeof(out), &later,
					    &status);
		if (n > 0) {
			notify_run_deferred(&ctx, &later);
			answered++;
			continue;
		}
		ck_assert_int_eq(n, SPOP_EPROTO);
		ck_assert_uint_eq(status, SPOP_ERR_INVALID);
		ck_assert_uint_eq(later.n, 0);
		effects(&r, &st, &after);
		char what[48];
		snprintf(what, sizeof(what), "mutation %u", iter);
		expect_same(&before, &after, what);
		refused++;
	}
	fprintf(stderr, "# 20000 mutations: %u refused, %u answered\n", refused,
		answered);
	ck_assert_uint_gt(refused, 1000);
	ck_assert_uint_gt(answered, 1000);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* The ACK of a route whose backend's budget is spent carries noretry, a
 * BOOL true; without it, no such variable. */
static bool ack_has_noretry(struct route *r)
{
	struct stats st = { 0 };
	struct notify_ctx ctx = { .route = r, .stats = &st };
	uint8_t payload[128], out[2048];
	struct spop_frame f = route_frame(payload, sizeof(payload), "m", 1, 2);
	struct notify_deferred later;
	enum spop_status status;
	ptrdiff_t n = notify_handle(&ctx, &f, out, sizeof(out), &later, &status);
	ck_assert_int_gt(n, 0);
	struct spop_frame a;
	ck_assert_int_eq(spop_frame_decode(out, (size_t)n, sizeof(out), &a,
					   &status), n);
	struct spop_reader rd;
	spop_reader_init(&rd, a.payload, a.payload_len);
	enum spop_action act;
	enum spop_scope scope;
	struct spop_str vname;
	struct spop_data val;
	bool found = false, reason = false;
	while (spop_action_next(&rd, &act, &scope, &vname, &val, &status) == 1) {
		reason = reason || spop_str_eq(vname, "reason");
		if (spop_str_eq(vname, "noretry")) {
			ck_assert_int_eq(scope, SPOP_SCOPE_TXN);
			ck_assert_int_eq(val.type, SPOP_DATA_BOOL);
			ck_assert(val.u.b);
			found = true;
		}
	}
	ck_assert(reason);
	return found;
}

START_TEST(notify_ack_noretry)
{
	struct config cfg;
	struct route r;
	/* Nothing allowed: spent from the first request. */
	load(&cfg, "retry_budget: { ratio: 0, min_per_second: 0 }\n"
		   "endpoints:\n  - { backend: llm, server: s1, models: [m] }\n");
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	idle_poll(&r);
	ck_assert(!ack_has_noretry(&r));
	r.log_input = true;
	ck_assert(ack_has_noretry(&r));
	ck_assert_uint_eq(r.budgets[0].noretry, 1);
	cfg.retry_budget_enabled = false;
	ck_assert(!ack_has_noretry(&r));
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* The STRING variable name of the ACK out[0..n), copied into v ("" when
 * absent). */
static void ack_var_str(const uint8_t *out, ptrdiff_t n, const char *name,
			char *v, size_t cap)
{
	struct spop_frame a;
	enum spop_status st;
	ck_assert_int_eq(spop_frame_decode(out, (size_t)n, 16380, &a, &st), n);
	struct spop_reader rd;
	spop_reader_init(&rd, a.payload, a.payload_len);
	enum spop_action act;
	enum spop_scope scope;
	struct spop_str vname;
	struct spop_data val;
	v[0] = 0;
	while (spop_action_next(&rd, &act, &scope, &vname, &val, &st) == 1)
		if (spop_str_eq(vname, name) && val.type == SPOP_DATA_STRING)
			snprintf(v, cap, "%.*s", (int)val.u.str.len,
				 (const char *)val.u.str.ptr);
}

/* A route on yaml's endpoints and a route NOTIFY with a session and a
 * model for it. */
struct one_fx {
	struct config cfg;
	struct route r;
	struct stats st;
	struct notify_ctx ctx;
	uint8_t payload[512];
	struct spop_frame f;
};

static void one_init(struct one_fx *x, const char *yaml)
{
	static const unsigned order[] = { 0, 7 }; /* session, model */
	memset(x, 0, sizeof(*x));
	load(&x->cfg, yaml);
	ck_assert_int_eq(route_init(&x->r, &x->cfg), 0);
	x->ctx = (struct notify_ctx){ .route = &x->r, .stats = &x->st };
	x->f = notify_frame(x->payload,
			    route_payload_order(x->payload, sizeof(x->payload),
						order, 2),
			    3, 1);
}

static ptrdiff_t one_notify(struct one_fx *x, uint8_t *out, size_t cap)
{
	struct notify_deferred later;
	enum spop_status status;
	ptrdiff_t n = notify_handle(&x->ctx, &x->f, out, cap, &later, &status);
	ck_assert_int_gt(n, 0);
	return n;
}

static void one_finish(struct one_fx *x)
{
	route_finish(&x->r);
	config_finish(&x->cfg);
}

/* The names' bytes are encoded once per endpoint (route_preset): an
 * endpoint removed and another added in its slot is named as the new one,
 * key and all. */
START_TEST(notify_names_follow_the_endpoint)
{
	static struct one_fx x;
	one_init(&x, "endpoints:\n  - {backend: llm, server: s1, models: [m1], keys: [k1]}\n");
	uint8_t out[512];
	char v[64];
	for (int round = 0; round < 2; round++) {
		ptrdiff_t n = one_notify(&x, out, sizeof(out));
		ack_var_str(out, n, "server", v, sizeof(v));
		ck_assert_str_eq(v, "s1");
		ack_var_str(out, n, "key", v, sizeof(v));
		ck_assert_str_eq(v, "k1");
	}
	struct core *c = x.r.core;
	int idx = core_endpoint_find(c, core_str_c("llm"), core_str_c("s1"),
				     core_str_c("k1"));
	ck_assert_int_ge(idx, 0);
	ck_assert_int_eq(core_endpoint_remove(c, idx), 0);
	ck_assert_int_eq(route_server_add(&x.r, core_str_c("other"), core_str_c("s9"), 1000), 1);
	ck_assert_int_eq(core_endpoint_find(c, core_str_c("other"), core_str_c("s9"),
					    core_str_c("")),
			 idx);
	ptrdiff_t n = one_notify(&x, out, sizeof(out));
	ack_var_str(out, n, "backend", v, sizeof(v));
	ck_assert_str_eq(v, "other");
	ack_var_str(out, n, "server", v, sizeof(v));
	ck_assert_str_eq(v, "s9");
	ack_var_str(out, n, "key", v, sizeof(v));
	ck_assert_str_eq(v, "");
	one_finish(&x);
}
END_TEST

/* The decision histogram times the first decision and one in
 * NOTIFY_TIME_EVERY after it; every decision is counted by reason. */
START_TEST(notify_decisions_timed_one_in_16)
{
	static struct one_fx x;
	one_init(&x, "endpoints:\n  - {backend: llm, server: s1, models: [m1]}\n");
	uint8_t out[512];
	for (unsigned i = 1; i <= 2 * NOTIFY_TIME_EVERY + 1; i++) {
		one_notify(&x, out, sizeof(out));
		ck_assert_uint_eq(x.st.decide_latency.count,
				  1 + (i - 1) / NOTIFY_TIME_EVERY);
	}
	uint64_t decided = 0;
	for (unsigned k = 0; k < ROUTE_REASON_COUNT; k++)
		decided += x.st.reasons[k];
	ck_assert_uint_eq(decided, 2 * NOTIFY_TIME_EVERY + 1);
	one_finish(&x);
}
END_TEST

/* A frame of `unknowns` argument-less unknown messages, then feedback
 * for llm/s1 (200), llm/s2 (503) and llm/nope (200); alt: for
 * llm/other three times instead. */
static size_t feedback_frame_payload(uint8_t *buf, size_t cap, unsigned unknowns,
				     bool alt)
{
	static const struct { const char *server; int status; } fb[] = {
		{ "llm/s1", 200 }, { "llm/s2", 503 }, { "llm/nope", 200 },
	};
	struct spop_writer w;
	spop_writer_init(&w, buf, cap);
	for (unsigned i = 0; i < unknowns; i++) {
		spop_put_str(&w, "x", 1);
		uint8_t zero = 0;
		spop_put_bytes(&w, &zero, 1);
	}
	for (size_t i = 0; i < sizeof(fb) / sizeof(*fb); i++) {
		spop_put_str(&w, "feedback", 8);
		uint8_t two = 2;
		spop_put_bytes(&w, &two, 1);
		struct spop_data v = str(alt ? "llm/other" : fb[i].server);
		spop_put_kv(&w, "server", &v);
		v = spop_data_int64(fb[i].status);
		spop_put_kv(&w, "status", &v);
	}
	ck_assert(!w.overflow);
	return w.len;
}

/* Deferred feedback is applied after the ACK, from the frame's own
 * messages (pointers into the parsed frame) or, past NOTIFY_MAX_MSGS,
 * from copies: through notify_handle, and through notify_parse_frame and
 * notify_answer as conn.c calls them, another frame answered in between
 * (its stack reuses what a pointer to a message gone would read). */
START_TEST(notify_deferred_feedback_applied)
{
	for (unsigned v = 0; v < 4; v++) {
		unsigned unknowns = v & 1 ? NOTIFY_MAX_MSGS : 0;
		bool handle = v & 2;
		struct config cfg;
		load(&cfg, "endpoints:\n  - {backend: llm, server: s1}\n"
			   "  - {backend: llm, server: s2}\n");
		struct route r;
		struct stats st = { 0 };
		ck_assert_int_eq(route_init(&r, &cfg), 0);
		struct notify_ctx ctx = { .route = &r, .stats = &st };
		uint8_t payload[512], other[512], out[512];
		struct spop_frame f = notify_frame(
			payload, feedback_frame_payload(payload, sizeof(payload),
							unknowns, false), 1, 1);
		struct spop_frame g = notify_frame(
			other, feedback_frame_payload(other, sizeof(other),
						      unknowns, true), 2, 1);
		struct notify_deferred later, later2;
		enum spop_status status;
		static struct notify_frame nf;
		if (handle) {
			ck_assert_int_gt(notify_handle(&ctx, &f, out, sizeof(out),
						       &later, &status), 0);
		} else {
			ck_assert_int_eq(notify_parse_frame(&ctx, &f, &nf, &status), 0);
			ck_assert_int_gt(notify_answer(&ctx, &nf, out, sizeof(out),
						       &later, &status), 0);
		}
		ck_assert_uint_eq(later.n, 3);
		ck_assert_int_gt(notify_handle(&ctx, &g, out, sizeof(out), &later2,
					       &status), 0);
		notify_run_deferred(&ctx, &later);
		ck_assert_uint_eq(later.n, 0);
		int s1 = core_endpoint_find_path(r.core, core_str_c("llm/s1"),
						 core_str_c(""));
		int s2 = core_endpoint_find_path(r.core, core_str_c("llm/s2"),
						 core_str_c(""));
		struct core_endpoint_info i1, i2;
		ck_assert_int_eq(core_endpoint_info(r.core, s1, 0, &i1), 0);
		ck_assert_int_eq(core_endpoint_info(r.core, s2, 0, &i2), 0);
		ck_assert_msg(i1.outcomes[CORE_OUTCOME_SUCCESS] == 1 &&
				      i2.outcomes[CORE_OUTCOME_FAILURE] == 1 &&
				      r.fb.unknown_server == 1,
			      "variant %u: s1 %llu ok, s2 %llu failed, %llu unknown",
			      v, (unsigned long long)i1.outcomes[CORE_OUTCOME_SUCCESS],
			      (unsigned long long)i2.outcomes[CORE_OUTCOME_FAILURE],
			      (unsigned long long)r.fb.unknown_server);
		route_finish(&r);
		config_finish(&cfg);
	}
}
END_TEST

/* ---- the arguments' fast path against the name lookup ------------------ */

/* The feedback message's arguments in haproxy/warmlane.spoe.conf's order
 * (model is not sent there). */
static const char *const spoe_fb_order[] = {
	"server", "status", "tr", "retry_after", "key", "akey", "stream",
	"shadow", "shadow_reason", "id",
};

/* Names a fast path could confuse with the file's: prefixes and
 * extensions of them, another length byte before the same bytes, case,
 * the empty name, 15, 16 and 20 bytes, a two-byte length. */
static const char *const decoy_names[] = {
	"prefix", "prefix12", "sessio", "sessionx", "Session", "sr", "s",
	"i", "id2", "hint_sr", "hint_srvv", "hint_akey2", "", "tr2", "t",
	"shadow_reasonxy", "shadow_reasonxyz", "shadow_reason_and_more",
	"retry_afte", "akeys", "model", "x-new-argument",
};

static uint64_t fx_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A value of a random type (long strings, negative and large integers,
 * IPv6 included); strings point into a static buffer. */
static struct spop_data fx_value(uint64_t *s)
{
	static const char text[300] = "abcdefghijklmnopqrstuvwxyz0123456789";
	uint64_t r = fx_rand(s);
	switch (r % 12) {
	case 0:
		return spop_data_null();
	case 1:
		return spop_data_bool((r >> 8) & 1);
	case 2:
		return spop_data_int64((int64_t)(r >> 20) % 300);
	case 3:
		return spop_data_int64((int64_t)fx_rand(s));
	case 4: {
		struct spop_data d = spop_data_null();
		d.type = SPOP_DATA_UINT64;
		d.u.u64 = fx_rand(s);
		return d;
	}
	case 5: {
		struct spop_data d = spop_data_null();
		d.type = SPOP_DATA_INT32;
		d.u.i32 = (int32_t)(fx_rand(s) % 600) - 300;
		return d;
	}
	case 6:
		return spop_data_uint32((uint32_t)(r >> 16) % 500);
	case 7: {
		struct spop_data d = { .type = SPOP_DATA_IPV4,
				       .u.ipv4 = { 10, 0, (uint8_t)r, 1 } };
		return d;
	}
	case 8: {
		struct spop_data d = { .type = SPOP_DATA_IPV6 };
		memset(d.u.ipv6, (int)(r >> 8) & 0xff, 16);
		return d;
	}
	case 9:
		return spop_data_binary(text, (r >> 8) % 20);
	case 10:
		return spop_data_string(text, 230 + (r >> 8) % 20); /* 240+ */
	default:
		return spop_data_string(text, (r >> 8) % 40);
	}
}

/* The names of one message: mostly the file's order with a few
 * changes (one dropped, two swapped, a decoy or a repeat put in, the
 * message cut short), sometimes anything. */
static unsigned fx_names(uint64_t *s, const char *const *file, unsigned nf,
			 const char **out)
{
	unsigned n = 0;
	uint64_t how = fx_rand(s) % 8;
	if (how == 7) {
		unsigned len = (unsigned)(fx_rand(s) % 20);
		for (unsigned i = 0; i < len; i++) {
			uint64_t r = fx_rand(s);
			out[n++] = r & 1 ? file[(r >> 1) % nf]
					 : decoy_names[(r >> 1) % (sizeof(decoy_names) /
								   sizeof(*decoy_names))];
		}
		return n;
	}
	for (unsigned i = 0; i < nf; i++)
		out[n++] = file[i];
	uint64_t at = fx_rand(s) % nf;
	switch (how) {
	case 1: /* one dropped */
		memmove(&out[at], &out[at + 1], (n - at - 1) * sizeof(*out));
		n--;
		break;
	case 2: /* two swapped */
		if (at + 1 < n) {
			const char *t = out[at];
			out[at] = out[at + 1];
			out[at + 1] = t;
		}
		break;
	case 3: /* a decoy put in */
	case 4: /* a repeat put in */
		memmove(&out[at + 1], &out[at], (n - at) * sizeof(*out));
		out[at] = how == 3 ? decoy_names[fx_rand(s) % (sizeof(decoy_names) /
							       sizeof(*decoy_names))]
				   : file[fx_rand(s) % nf];
		n++;
		break;
	case 5: /* cut short */
		n = (unsigned)at;
		break;
	default: /* as the file says */
		break;
	}
	return n;
}

/* Every message of many: the arguments notify_parse_frame reads (its
 * fast path on the wire bytes of the name expected next) are those that a
 * plain name lookup of each argument in turn gives, the last of a repeated
 * one winning. Each payload is a heap block of its exact size, so that a
 * read past its end fails under ASan. */
START_TEST(notify_args_fast_path_agrees)
{
	static struct notify_frame nf;
	struct config cfg;
	struct route r;
	struct stats st = { 0 };
	load(&cfg, "endpoints:\n  - {backend: llm, server: s1, models: [m1]}\n");
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	struct notify_ctx ctx = { .route = &r, .stats = &st };
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (unsigned iter = 0; iter < 20000; iter++) {
		bool fb = iter & 1;
		const char *names[40];
		struct spop_data vals[40];
		unsigned n = fb ? fx_names(&seed, spoe_fb_order, 10, names)
				: fx_names(&seed, spoe_route_args,
					   ROUTE_ARG_COUNT, names);
		static uint8_t buf[16384];
		struct spop_writer w;
		spop_writer_init(&w, buf, sizeof(buf));
		if (fb)
			spop_put_str(&w, "feedback", 8);
		else
			spop_put_str(&w, "route", 5);
		uint8_t nb = (uint8_t)n;
		spop_put_bytes(&w, &nb, 1);
		for (unsigned i = 0; i < n; i++) {
			vals[i] = fx_value(&seed);
			size_t len = strlen(names[i]);
			spop_put_str(&w, names[i], len);
			spop_put_data(&w, &vals[i]);
		}
		ck_assert(!w.overflow);
		uint8_t *payload = malloc(w.len);
		ck_assert_ptr_nonnull(payload);
		memcpy(payload, buf, w.len);
		struct spop_frame f = notify_frame(payload, w.len, 1, 1);
		enum spop_status status;
		ck_assert_int_eq(notify_parse_frame(&ctx, &f, &nf, &status), 0);
		ck_assert_uint_eq(nf.nmsg, 1);

		struct spop_data want[ROUTE_ARG_COUNT + ROUTE_FB_COUNT];
		unsigned count = fb ? ROUTE_FB_COUNT : ROUTE_ARG_COUNT;
		for (unsigned k = 0; k < count; k++)
			want[k] = spop_data_null();
		for (unsigned i = 0; i < n; i++) {
			struct spop_str nm = { (const uint8_t *)names[i],
					       strlen(names[i]) };
			int k = fb ? route_fb_arg_lookup(nm) : route_arg_lookup(nm);
			if (k >= 0)
				want[k] = vals[i];
		}
		const struct notify_msg *m = &nf.msgs[0];
		ck_assert_int_eq(m->kind, fb ? NOTIFY_FEEDBACK : NOTIFY_ROUTE);
		const struct spop_data *got = fb ? m->u.fb.args : m->u.route.args;
		for (unsigned k = 0; k < count; k++)
			ck_assert_msg(spop_data_equal(&want[k], &got[k]),
				      "iteration %u (%s, %u arguments): argument %u "
				      "type %d, want type %d", iter,
				      fb ? "feedback" : "route", n, k,
				      got[k].type, want[k].type);
		free(payload);
	}
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* The wire names are whole (route_wire_set cuts a name past 15 bytes):
 * the length byte, then the name, of every argument of both messages. */
START_TEST(notify_wire_names_fit)
{
	route_wire_init();
	for (unsigned i = 0; i < ROUTE_ARG_COUNT + ROUTE_FB_COUNT; i++) {
		bool fb = i >= ROUTE_ARG_COUNT;
		unsigned at = fb ? i - ROUTE_ARG_COUNT : i;
		const struct route_name *n =
			fb ? &route_fb_names[route_fb_order[at]]
			   : &route_arg_names[route_arg_order[at]];
		const struct route_wire_name *w =
			fb ? &route_fb_wire[at] : &route_arg_wire[at];
		ck_assert_msg(n->len <= 15, "%s: longer than 15 bytes", n->s);
		ck_assert_uint_eq(w->len, n->len + 1);
		ck_assert_uint_eq(w->b[0], n->len);
		ck_assert(memcmp(w->b + 1, n->s, n->len) == 0);
	}
}
END_TEST

/* The prefetch steps a frame takes (notify_prefetch until false): two
 * for routes alone (slot, entry: a decision leaves the LRU list alone),
 * three with a feedback (which relinks the entry), two for unknowns. */
START_TEST(notify_prefetch_steps)
{
	struct config cfg;
	load(&cfg, "endpoints:\n  - {backend: llm, server: s1, models: [m1]}\n");
	struct route r;
	struct stats st = { 0 };
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	struct notify_ctx ctx = { .route = &r, .stats = &st, .prefetch = true };
	static const unsigned order[] = { 0, 7 }; /* session, model */
	uint8_t route_p[512], fb_p[512], mixed[1024];
	size_t rn = route_payload_order(route_p, sizeof(route_p), order, 2);
	size_t fn = feedback_frame_payload(fb_p, sizeof(fb_p), 0, false);
	size_t un = feedback_frame_payload(mixed, sizeof(mixed), 2, false);
	un = 2 * 3; /* the two unknown messages alone: "x", no argument */
	uint8_t both[1024];
	memcpy(both, route_p, rn);
	memcpy(both + rn, fb_p, fn);
	const struct { const uint8_t *p; size_t n; unsigned steps; } v[] = {
		{ route_p, rn, 2 }, { fb_p, fn, 3 }, { both, rn + fn, 3 },
		{ mixed, un, 2 },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++) {
		static struct notify_frame nf;
		struct spop_frame f = notify_frame(v[i].p, v[i].n, 1, 1);
		enum spop_status status;
		ck_assert_int_eq(notify_parse_frame(&ctx, &f, &nf, &status), 0);
		unsigned steps = 1;
		while (notify_prefetch(&ctx, &nf))
			steps++;
		ck_assert_msg(steps == v[i].steps, "frame %zu: %u steps", i, steps);
	}
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = {
		notify_route_any_order, notify_ack_fallback,
		notify_ack_fallback_rate_limited,
		notify_ack_fallback_takes_decisions_back,
		notify_malformed_frame_changes_nothing, notify_every_truncation,
		notify_mutations_refused_whole, notify_ack_noretry,
		notify_decisions_timed_one_in_16, notify_names_follow_the_endpoint,
		notify_args_fast_path_agrees, notify_deferred_feedback_applied,
		notify_wire_names_fit, notify_prefetch_steps,
	};

	return unit_run(unit_suite("agent-notify", "notify", tests,
				   sizeof(tests) / sizeof(tests[0])));
}
