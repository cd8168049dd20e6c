/* test_complete.c - core: core_complete (HAProxy's end-of-stream log line) and score_by. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "fixture.h"
#include "trace.h" /* core_explain */

/* A completion of decision d (its endpoint and akey). */
static struct core_completion done(const struct core_decision *d, int status,
				   enum core_end end, bool feedback_seen)
{
	return (struct core_completion){
		.endpoint = d->endpoint, .status = status, .end = end,
		.tr_ms = 100, .total_ms = 900, .bytes = 4096,
		.feedback_seen = feedback_seen,
		.has_akey = d->has_akey, .akey = d->akey,
	};
}

static int complete(struct fx *f, const struct core_completion *cc)
{
	return core_complete(f->c, cc, f->now);
}

/* Completes d with done(d, ...); the core must accept it. */
static void completed(struct fx *f, const struct core_decision *d, int status,
		      enum core_end end, bool feedback_seen)
{
	struct core_completion cc = done(d, status, end, feedback_seen);
	ck_assert_int_eq(complete(f, &cc), 0);
}

static uint32_t entries(const struct fx *f)
{
	struct core_stats st;
	core_stats(f->c, &st);
	return st.affinity_entries;
}

/* Decides session s, feeds back a 200 so that its entry points to the
 * endpoint, and returns the decision (still in flight). */
static struct core_decision homed(struct fx *f, uint64_t s)
{
	struct core_request r = fx_session(s);
	struct core_decision d = fx_decide(f, &r);
	ck_assert_int_ge(d.endpoint, 0);
	ck_assert_int_eq(fx_feedback(f, &d, 200, 100, false), 0);
	return d;
}

/* HAProxy 2.6 sends no feedback message: a 429's Retry-After reaches the
 * core only with the log line, and sets the cooldown as feedback does. */
START_TEST(retry_after_from_log_line)
{
	struct fx f;
	fx_init(&f, 2, NULL);
	struct core_request r = fx_session(7);
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_ge(d.endpoint, 0);
	struct core_completion cc = done(&d, 429, CORE_END_COMPLETE, false);
	cc.has_retry_after = true;
	cc.retry_after_ms = 2000;
	ck_assert_int_eq(complete(&f, &cc), 0);
	struct core_endpoint_info in = fx_info(&f, d.endpoint);
	ck_assert_int_eq(in.breaker, CORE_BREAKER_OPEN);
	ck_assert_uint_eq(in.cooldown_left_ms, 2000);
	ck_assert_uint_ne(f.p.rate_limit_cooldown_ms, 2000);
	/* has_retry_after false (every other caller): the configured cooldown */
	int o = d.endpoint == f.ep[0] ? f.ep[1] : f.ep[0];
	cc.endpoint = o;
	cc.has_retry_after = false;
	cc.retry_after_ms = 0;
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(fx_info(&f, o).cooldown_left_ms, f.p.rate_limit_cooldown_ms);
	fx_finish(&f);
}
END_TEST

START_TEST(in_flight_floors_at_zero)
{
	struct fx f;
	fx_init(&f, 2, NULL);
	int e = f.ep[0];
	ck_assert_int_eq(core_endpoint_sync(f.c, e, CORE_ADMIN_ENABLED, 2, f.now), 0);
	struct core_decision d = { .endpoint = e };
	/* Every end decrements, feedback or not. */
	for (int end = 0; end < CORE_END_COUNT; end++) {
		core_endpoint_sync(f.c, e, CORE_ADMIN_ENABLED, 2, f.now);
		struct core_completion cc = done(&d, 200, (enum core_end)end, end % 2);
		ck_assert_int_eq(complete(&f, &cc), 0);
		ck_assert_uint_eq(fx_info(&f, e).in_flight, 1);
	}
	struct core_completion cc = done(&d, 200, CORE_END_COMPLETE, true);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(fx_info(&f, e).in_flight, 0);
	ck_assert_uint_eq(fx_info(&f, f.ep[1]).in_flight, 0);
	/* Rejected: nothing changes, in-flight included. */
	core_endpoint_sync(f.c, e, CORE_ADMIN_ENABLED, 1, f.now);
	cc.endpoint = 7;
	ck_assert_int_eq(complete(&f, &cc), -ENOENT);
	cc.endpoint = -1;
	ck_assert_int_eq(complete(&f, &cc), -ENOENT);
	cc.endpoint = e;
	cc.end = CORE_END_COUNT;
	ck_assert_int_eq(complete(&f, &cc), -EINVAL);
	cc.end = CORE_END_COMPLETE;
	static const int bad[] = { 0, -2, 99, 600, 1000 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cc.status = bad[i];
		ck_assert_int_eq(complete(&f, &cc), -EINVAL);
	}
	ck_assert_uint_eq(fx_info(&f, e).in_flight, 1);
	cc.status = -1; /* unknown is fine */
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(fx_info(&f, e).in_flight, 0);
	fx_finish(&f);
}
END_TEST

START_TEST(no_double_count_with_feedback)
{
	struct fx f;
	fx_init(&f, 4, NULL); /* breaker_consecutive 5, min_requests 5 */
	int e = f.ep[0];
	struct core_decision d = { .endpoint = e };
	/* Three failures told by feedback, then their log lines: three
	 * failures, not six (six would open the breaker). */
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(fx_observe(&f, e, 503, -1, false, 0, false), 0);
		struct core_completion cc = done(&d, 503, CORE_END_COMPLETE, true);
		ck_assert_int_eq(complete(&f, &cc), 0);
	}
	struct core_endpoint_info in = fx_info(&f, e);
	ck_assert_uint_eq(in.window_fail, 3);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_FAILURE], 3);
	ck_assert_int_eq(in.breaker, CORE_BREAKER_CLOSED);
	/* A success told by feedback: one headers sample, one window ok. */
	ck_assert_int_eq(fx_observe(&f, e, 200, 250, false, 0, false), 0);
	struct core_completion cc = done(&d, 200, CORE_END_COMPLETE, true);
	cc.tr_ms = 250;
	ck_assert_int_eq(complete(&f, &cc), 0);
	in = fx_info(&f, e);
	ck_assert_uint_eq(in.window_ok, 1);
	ck_assert_uint_eq(in.samples[CORE_KIND_PLAIN], 1);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_SUCCESS], 1);
	/* What feedback could not know did enter: the end-to-end time. */
	ck_assert_uint_eq(in.e2e_samples[CORE_KIND_PLAIN], 1);
	ck_assert_double_eq(in.e2e_ewma_ms[CORE_KIND_PLAIN], 900.0 / 16);
	ck_assert_uint_eq(in.e2e_samples[CORE_KIND_STREAM], 0);
	/* A 503 whose body is then cut by the server: one failed request,
	 * not two. */
	ck_assert_int_eq(fx_observe(&f, e, 503, -1, false, 0, false), 0);
	completed(&f, &d, 503, CORE_END_SERVER_CUT, true);
	in = fx_info(&f, e);
	ck_assert_uint_eq(in.window_fail, 4);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_FAILURE], 4);
	/* A 429 told by feedback is not reopened by its log line. */
	int g = f.ep[1];
	ck_assert_int_eq(fx_observe(&f, g, 429, -1, false, 0, false), 0);
	uint64_t left = fx_info(&f, g).cooldown_left_ms;
	f.now += 1000;
	d.endpoint = g;
	completed(&f, &d, 429, CORE_END_COMPLETE, true);
	ck_assert_uint_eq(fx_info(&f, g).cooldown_left_ms, left - 1000);
	ck_assert_uint_eq(fx_info(&f, g).outcomes[CORE_OUTCOME_RATE_LIMITED], 1);
	fx_finish(&f);
}
END_TEST

START_TEST(cut_with_200_is_failure)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	/* Told by feedback as a success, cut mid-way by the server. */
	struct core_decision d = homed(&f, 1);
	ck_assert_uint_eq(entries(&f), 1);
	struct core_completion cc = done(&d, 200, CORE_END_SERVER_CUT, true);
	ck_assert_int_eq(complete(&f, &cc), 0);
	struct core_endpoint_info in = fx_info(&f, d.endpoint);
	ck_assert_uint_eq(in.window_fail, 1);
	ck_assert_uint_eq(in.window_ok, 1);
	ck_assert_uint_eq(in.e2e_samples[CORE_KIND_PLAIN], 0);
	ck_assert_uint_eq(entries(&f), 0); /* the next turn re-picks */
	ck_assert_uint_eq(in.completions[CORE_END_SERVER_CUT], 1);
	/* Without feedback: a failure whatever the status, never a sample. */
	struct core_decision d2 = fx_decide(&f, &(struct core_request){
		.session = { true, 2 } });
	cc = done(&d2, 200, CORE_END_SERVER_CUT, false);
	ck_assert_int_eq(complete(&f, &cc), 0);
	in = fx_info(&f, d2.endpoint);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_FAILURE], 1);
	ck_assert_uint_eq(in.samples[CORE_KIND_PLAIN], 0);
	ck_assert_uint_eq(entries(&f), 0);
	/* Five cuts in a row open the breaker, as five 5xx would. */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_int_eq(fx_info(&f, d2.endpoint).breaker, CORE_BREAKER_OPEN);
	fx_finish(&f);
}
END_TEST

START_TEST(cut_evicts_only_its_own_entry)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	struct core_decision d = homed(&f, 3);
	int other = d.endpoint == f.ep[0] ? f.ep[1] : f.ep[0];
	/* A cut on another endpoint with this akey leaves the entry. */
	struct core_completion cc = done(&d, 200, CORE_END_SERVER_CUT, true);
	cc.endpoint = other;
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(entries(&f), 1);
	struct core_request r = fx_session(3);
	struct core_decision again = fx_decide(&f, &r);
	ck_assert_int_eq(again.reason, CORE_REASON_AFFINITY);
	ck_assert_int_eq(again.endpoint, d.endpoint);
	fx_finish(&f);
}
END_TEST

START_TEST(client_abort_is_neutral)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	struct core_decision d = homed(&f, 4);
	/* Whatever the status, with or without feedback: no failure, no
	 * eviction, however many. */
	static const int statuses[] = { 200, 502, 503, 504, -1 };
	for (int i = 0; i < 20; i++) {
		completed(&f, &d, statuses[i % 5],
			  CORE_END_CLIENT_ABORT, i % 2);
	}
	struct core_endpoint_info in = fx_info(&f, d.endpoint);
	ck_assert_uint_eq(in.window_fail, 0);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_FAILURE], 0);
	ck_assert_int_eq(in.breaker, CORE_BREAKER_CLOSED);
	ck_assert_uint_eq(in.e2e_samples[CORE_KIND_PLAIN], 0);
	ck_assert_uint_eq(in.completions[CORE_END_CLIENT_ABORT], 20);
	ck_assert_uint_eq(entries(&f), 1);
	struct core_request r = fx_session(4);
	ck_assert_int_eq(fx_decide(&f, &r).reason, CORE_REASON_AFFINITY);
	fx_finish(&f);
}
END_TEST

START_TEST(fail_without_feedback_evicts)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	struct core_decision d = homed(&f, 5);
	ck_assert_uint_eq(entries(&f), 1);
	/* HAProxy's own 503 (connection refused): no feedback was sent. */
	struct core_completion cc = done(&d, _i == 0 ? 503 : -1,
					 CORE_END_SERVER_FAIL, false);
	cc.tr_ms = -1;
	cc.total_ms = 3;
	ck_assert_int_eq(complete(&f, &cc), 0);
	struct core_endpoint_info in = fx_info(&f, d.endpoint);
	ck_assert_uint_eq(in.window_fail, 1);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_FAILURE], 1);
	ck_assert_uint_eq(in.e2e_samples[CORE_KIND_PLAIN], 0);
	ck_assert_uint_eq(entries(&f), 0);
	struct core_request r = fx_session(5);
	struct core_decision again = fx_decide(&f, &r);
	ck_assert_int_ne(again.reason, CORE_REASON_AFFINITY);
	/* Fast failures do not look fast, and five open the breaker. */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(complete(&f, &cc), 0);
	in = fx_info(&f, d.endpoint);
	ck_assert_int_eq(in.breaker, CORE_BREAKER_OPEN);
	ck_assert_uint_eq(in.samples[CORE_KIND_PLAIN], 1);
	fx_finish(&f);
}
END_TEST

/* Whoever can write to the log socket writes any akey: 46k forged lines
 * grew the map and RSS by 17 MB. A line updates what an entry knows (it
 * refreshes one that points to its endpoint) but never inserts one, nor
 * moves one elsewhere, with or without feedback, whatever it ends with. */
static int first_record(void *arg, const struct core_affinity_record *rec)
{
	*(struct core_affinity_record *)arg = *rec;
	return 0;
}

START_TEST(forged_lines_never_insert)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	struct core_decision victim = homed(&f, 11);
	core_endpoint_complete(f.c, victim.endpoint);
	ck_assert_uint_eq(entries(&f), 1);
	struct core_stats before;
	core_stats(f.c, &before);
	struct core_rng forge;
	core_rng_seed(&forge, 7);
	static const int statuses[] = { 200, 204, 302, 200, 503, 429, 404, -1 };
	for (int i = 0; i < 46000; i++) {
		uint64_t x = core_rng_next(&forge);
		struct core_completion cc = {
			.endpoint = f.ep[x % 4],
			.status = statuses[(x >> 8) % 8],
			.end = (x >> 16) % 16 == 0 ? CORE_END_CLIENT_ABORT
						  : CORE_END_COMPLETE,
			.tr_ms = 50, .total_ms = 400, .bytes = 2048,
			.stream = (x >> 20) & 1, .feedback_seen = (x >> 21) & 1,
			.has_akey = true, .akey = core_rng_next(&forge),
		};
		/* Every eighth names the victim's key, on any endpoint. */
		if (i % 8 == 0 && cc.status != 503 && cc.endpoint != victim.endpoint)
			cc.akey = victim.akey;
		ck_assert_int_eq(complete(&f, &cc), 0);
		f.now += 1;
	}
	struct core_stats after;
	core_stats(f.c, &after);
	ck_assert_uint_eq(after.affinity_entries, 1);
	ck_assert_uint_eq(after.affinity_evictions, before.affinity_evictions);
	ck_assert_uint_eq(after.affinity_bytes, before.affinity_bytes);
	/* The victim's entry stayed where feedback put it (the forged
	 * failures opened breakers: read the map itself). */
	struct core_affinity_record only = { 0 };
	ck_assert_int_eq(core_affinity_export(f.c, f.now, first_record, &only), 0);
	ck_assert_uint_eq(only.akey, victim.akey);
	ck_assert_int_eq(only.endpoint, victim.endpoint);
	fx_finish(&f);

	fx_init(&f, 4, NULL);
	victim = homed(&f, 11);
	core_endpoint_complete(f.c, victim.endpoint);
	struct core_request r = fx_session(11);
	struct core_decision d;
	/* What a line may do: refresh the entry of its own endpoint. Just
	 * before the TTL, a success line keeps it alive... */
	f.now += f.p.affinity_ttl_ms - 1000;
	struct core_completion ok = done(&victim, 200, CORE_END_COMPLETE, false);
	ck_assert_int_eq(complete(&f, &ok), 0);
	f.now += 2000;
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
	ck_assert_int_eq(d.endpoint, victim.endpoint);
	core_endpoint_complete(f.c, d.endpoint);
	/* ...one on another endpoint does not. */
	f.now += f.p.affinity_ttl_ms - 1000;
	ok.endpoint = victim.endpoint == f.ep[0] ? f.ep[1] : f.ep[0];
	ck_assert_int_eq(complete(&f, &ok), 0);
	f.now += 2000;
	ck_assert_int_eq(fx_decide(&f, &r).reason, CORE_REASON_HASH);
	ck_assert_uint_eq(entries(&f), 0);
	fx_finish(&f);
}
END_TEST

/* HAProxy 2.6 sends no feedback message: a log line's success is then the
 * only word that a decision worked. It homes the session only when it
 * names a decision warmlane made itself (akey and endpoint), once: a
 * forged line with another akey, or warmlane's akey on another endpoint,
 * or a replay after the entry was evicted, inserts nothing. */
START_TEST(line_confirms_own_decision_only)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	struct core_request r = fx_session(6);
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.reason, CORE_REASON_HASH);
	int other = d.endpoint == f.ep[0] ? f.ep[1] : f.ep[0];

	struct core_completion cc = done(&d, 200, CORE_END_COMPLETE, false);
	cc.endpoint = other;
	ck_assert_int_eq(complete(&f, &cc), 0);
	cc = done(&d, 200, CORE_END_COMPLETE, false);
	cc.akey = d.akey ^ 1;
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(entries(&f), 0);

	completed(&f, &d, 200, CORE_END_COMPLETE, false);
	ck_assert_uint_eq(entries(&f), 1);
	struct core_decision again = fx_decide(&f, &r);
	ck_assert_int_eq(again.reason, CORE_REASON_AFFINITY);
	ck_assert_int_eq(again.endpoint, d.endpoint);
	core_endpoint_complete(f.c, again.endpoint);

	/* A failure evicts it; the same success line again brings nothing
	 * back (the decision was confirmed once). */
	completed(&f, &d, 503, CORE_END_COMPLETE, false);
	ck_assert_uint_eq(entries(&f), 0);
	completed(&f, &d, 200, CORE_END_COMPLETE, false);
	ck_assert_uint_eq(entries(&f), 0);
	fx_finish(&f);
}
END_TEST

/* Shadow mode: HAProxy chose the server. A shadow decision takes back its
 * in-flight count and probe slot, and the log line of the server HAProxy
 * used (any endpoint) confirms the key there, in-flight untouched; an
 * affinity decision too, so the map follows the request to where it went.
 * Other akeys still never insert. */
START_TEST(shadow_decision_follows_haproxy)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	struct core_request r = fx_session(6);
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.reason, CORE_REASON_HASH);
	ck_assert_uint_eq(fx_info(&f, d.endpoint).in_flight, 1);
	core_decision_shadow(f.c, &d);
	ck_assert_uint_eq(fx_info(&f, d.endpoint).in_flight, 0);
	int used = d.endpoint == f.ep[0] ? f.ep[1] : f.ep[0];
	core_endpoint_sync(f.c, used, CORE_ADMIN_ENABLED, 3, f.now);

	struct core_completion cc = done(&d, 200, CORE_END_COMPLETE, false);
	cc.endpoint = used;
	cc.shadow = true;
	cc.akey = d.akey ^ 1; /* not a key warmlane decided */
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(entries(&f), 0);
	cc.akey = d.akey;
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(entries(&f), 1);
	/* no decision counted it: the poll's 3 stand */
	ck_assert_uint_eq(fx_info(&f, used).in_flight, 3);
	struct core_decision again = fx_decide(&f, &r);
	ck_assert_int_eq(again.reason, CORE_REASON_AFFINITY);
	ck_assert_int_eq(again.endpoint, used);

	/* Affinity in shadow: HAProxy served it on a third endpoint; the map
	 * moves there (the freshest cache), here from the line alone. */
	core_decision_shadow(f.c, &again);
	int third = f.ep[2] != used && f.ep[2] != d.endpoint ? f.ep[2] : f.ep[3];
	cc.endpoint = third;
	ck_assert_int_eq(complete(&f, &cc), 0);
	struct core_decision last = fx_decide(&f, &r);
	ck_assert_int_eq(last.reason, CORE_REASON_AFFINITY);
	ck_assert_int_eq(last.endpoint, third);
	/* confirmed once: a second line elsewhere moves nothing */
	cc.endpoint = used;
	ck_assert_int_eq(complete(&f, &cc), 0);
	last = fx_decide(&f, &r);
	ck_assert_int_eq(last.endpoint, third);
	fx_finish(&f);
}
END_TEST

/* A shadow decision for a HALF_OPEN endpoint gives its probe slot back:
 * no probe goes there. */
START_TEST(shadow_decision_frees_probe)
{
	struct fx f;
	struct core_params p;
	core_params_defaults(&p);
	p.half_open_probes = 1;
	fx_init(&f, 1, &p);
	int e = f.ep[0];
	for (int i = 0; i < 5; i++)
		fx_observe(&f, e, 503, -1, false, 0, false);
	f.now += fx_info(&f, e).cooldown_left_ms;
	struct core_request r = { 0 };
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, e);
	ck_assert_int_ne(d.reason, CORE_REASON_COOLDOWN_FALLBACK);
	core_decision_shadow(f.c, &d);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, e);
	ck_assert_int_ne(d.reason, CORE_REASON_COOLDOWN_FALLBACK);
	fx_finish(&f);
}
END_TEST

START_TEST(no_feedback_status_as_observe)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	struct core_request r = fx_session(6);
	struct core_decision d = fx_decide(&f, &r);
	/* A success: headers and end-to-end EWMAs, and the map entry of the
	 * decision it confirms (line_confirms_own_decision_only). */
	struct core_completion cc = done(&d, 200, CORE_END_COMPLETE, false);
	cc.stream = true;
	cc.tr_ms = 300;
	ck_assert_int_eq(complete(&f, &cc), 0);
	struct core_endpoint_info in = fx_info(&f, d.endpoint);
	ck_assert_uint_eq(in.samples[CORE_KIND_STREAM], 1);
	ck_assert_double_eq(in.ewma_ms[CORE_KIND_STREAM], 300);
	ck_assert_uint_eq(in.e2e_samples[CORE_KIND_STREAM], 1);
	ck_assert_double_eq(in.e2e_ewma_ms[CORE_KIND_STREAM], 900.0 / 16);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_SUCCESS], 1);
	ck_assert_uint_eq(entries(&f), 1);
	struct core_decision again = fx_decide(&f, &r);
	ck_assert_int_eq(again.reason, CORE_REASON_AFFINITY);
	ck_assert_int_eq(again.endpoint, d.endpoint);
	core_endpoint_complete(f.c, again.endpoint);
	/* Homed by feedback too, then HAProxy's own 504 with a normal end: a failure, evicting. */
	ck_assert_int_eq(fx_feedback(&f, &d, 200, 100, false), 0);
	ck_assert_uint_eq(entries(&f), 1);
	completed(&f, &d, 504, CORE_END_COMPLETE, false);
	ck_assert_uint_eq(fx_info(&f, d.endpoint).window_fail, 1);
	ck_assert_uint_eq(entries(&f), 0);
	/* Other 4xx: neutral. */
	completed(&f, &d, 400, CORE_END_COMPLETE, false);
	in = fx_info(&f, d.endpoint);
	ck_assert_uint_eq(in.window_fail, 1);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_NEUTRAL], 1);
	/* 429: rate-limited for rate_limit_cooldown. */
	cc = done(&d, 429, CORE_END_COMPLETE, false);
	ck_assert_int_eq(complete(&f, &cc), 0);
	in = fx_info(&f, d.endpoint);
	ck_assert_int_eq(in.breaker, CORE_BREAKER_OPEN);
	ck_assert_uint_eq(in.cooldown_left_ms, f.p.rate_limit_cooldown_ms);
	/* 401: counted, and it kills no key (the client shaped the request;
	 * these endpoints have none, and a probe alone could). */
	int k = f.ep[3] == d.endpoint ? f.ep[2] : f.ep[3];
	cc.endpoint = k;
	cc.status = 401;
	ck_assert_int_eq(complete(&f, &cc), 0);
	in = fx_info(&f, k);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_KEY_DEAD], 1);
	ck_assert(!in.key_dead);
	ck_assert_uint_eq(in.dead_key_left_ms, 0);
	/* Status unknown, normal end: nothing learnt. */
	int u = -1;
	for (int i = 0; i < 4; i++)
		if (f.ep[i] != k && f.ep[i] != d.endpoint)
			u = f.ep[i];
	cc.endpoint = u;
	cc.status = -1;
	ck_assert_int_eq(complete(&f, &cc), 0);
	in = fx_info(&f, u);
	for (int o = 0; o < CORE_OUTCOME_COUNT; o++)
		ck_assert_uint_eq(in.outcomes[o], 0);
	ck_assert_uint_eq(in.samples[CORE_KIND_PLAIN] + in.e2e_samples[CORE_KIND_PLAIN], 0);
	fx_finish(&f);
}
END_TEST

START_TEST(e2e_only_on_successful_complete)
{
	struct fx f;
	fx_init(&f, 1, NULL);
	struct core_decision d = { .endpoint = f.ep[0] };
	struct core_completion cc = done(&d, 200, CORE_END_COMPLETE, true);
	cc.total_ms = -1; /* unknown */
	ck_assert_int_eq(complete(&f, &cc), 0);
	completed(&f, &d, 200, CORE_END_CLIENT_ABORT, true);
	completed(&f, &d, 500, CORE_END_COMPLETE, true);
	completed(&f, &d, 404, CORE_END_COMPLETE, true);
	ck_assert_uint_eq(fx_info(&f, d.endpoint).e2e_samples[CORE_KIND_PLAIN], 0);
	/* Time per KiB sent, a response under 16 KiB counting as 16 KiB:
	 * 2,048 ms for 64 KiB and 1,000 ms for 4 KiB are 32 and 62.5. Their
	 * mean while under 1/alpha samples. */
	cc = done(&d, 200, CORE_END_COMPLETE, true);
	cc.total_ms = 2048;
	cc.bytes = 65536;
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_double_eq(fx_info(&f, d.endpoint).e2e_ewma_ms[CORE_KIND_PLAIN], 32);
	cc.total_ms = 1000;
	cc.bytes = 4096;
	ck_assert_int_eq(complete(&f, &cc), 0);
	struct core_endpoint_info in = fx_info(&f, d.endpoint);
	ck_assert_uint_eq(in.e2e_samples[CORE_KIND_PLAIN], 2);
	ck_assert_double_eq_tol(in.e2e_ewma_ms[CORE_KIND_PLAIN], (32 + 62.5) / 2, 1e-9);
	/* 0 bytes (a body-less 200) counts as 16 KiB too. */
	cc.bytes = 0;
	cc.total_ms = 160;
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_double_eq_tol(fx_info(&f, d.endpoint).e2e_ewma_ms[CORE_KIND_PLAIN],
				(32 + 62.5 + 10) / 3, 1e-9);
	fx_finish(&f);
}
END_TEST

START_TEST(long_stream_is_not_idleness)
{
	struct fx f;
	fx_init(&f, 1, NULL);
	int e = f.ep[0];
	fx_warm(&f, e, 200, 25);
	/* A generation longer than idle_reset, told by feedback at its
	 * headers: its end does not make the endpoint cold. */
	ck_assert_int_eq(fx_observe(&f, e, 200, 200, false, 0, true), 0);
	f.now += f.p.idle_reset_ms + 5000;
	struct core_decision d = { .endpoint = e };
	struct core_completion cc = done(&d, 200, CORE_END_COMPLETE, true);
	cc.stream = true;
	cc.total_ms = (int64_t)f.p.idle_reset_ms + 5200;
	ck_assert_int_eq(complete(&f, &cc), 0);
	struct core_endpoint_info in = fx_info(&f, e);
	ck_assert_uint_eq(in.samples[CORE_KIND_STREAM], 26);
	ck_assert_uint_eq(in.e2e_samples[CORE_KIND_STREAM], 1);
	/* Without feedback, idleness is judged at the request's start. */
	cc.feedback_seen = false;
	f.now += 1000;
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(fx_info(&f, e).samples[CORE_KIND_STREAM], 27);
	/* A request that did start after idle_reset of silence says nothing,
	 * and the endpoint is cold again. */
	f.now += f.p.idle_reset_ms + 1000;
	cc.total_ms = 500;
	ck_assert_int_eq(complete(&f, &cc), 0);
	in = fx_info(&f, e);
	ck_assert_uint_eq(in.samples[CORE_KIND_STREAM], 0);
	ck_assert_uint_eq(in.e2e_samples[CORE_KIND_STREAM], 0);
	fx_finish(&f);
}
END_TEST

/* The request that wakes an endpoint after idle_reset says nothing about
 * its speed, whether feedback told its status first or not: nor does its
 * end-to-end time (nor that of one that started while it woke). */
START_TEST(wake_up_not_timed_end_to_end)
{
	struct fx f;
	fx_init(&f, 1, NULL);
	int e = f.ep[0];
	fx_warm(&f, e, 200, 25);
	struct core_decision d = { .endpoint = e };
	struct core_completion cc = done(&d, 200, CORE_END_COMPLETE, true);
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(fx_info(&f, e).e2e_samples[CORE_KIND_PLAIN], 1);
	/* Silent for idle_reset; a request starts, its headers come after
	 * 3 s (the wake-up, dropped), it ends 2 s later. */
	f.now += f.p.idle_reset_ms + 3000;
	ck_assert_int_eq(fx_observe(&f, e, 200, 3000, false, 0, false), 0);
	ck_assert_uint_eq(fx_info(&f, e).samples[CORE_KIND_PLAIN], 0);
	f.now += 2000;
	cc.total_ms = 5000;
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(fx_info(&f, e).e2e_samples[CORE_KIND_PLAIN], 0);
	/* One that started after the wake-up is timed. */
	cc.total_ms = 900;
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(fx_info(&f, e).e2e_samples[CORE_KIND_PLAIN], 1);
	/* Without feedback, the same: the wake-up's end is not timed. */
	f.now += f.p.idle_reset_ms + 5000;
	cc.feedback_seen = false;
	cc.total_ms = 4000;
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_uint_eq(fx_info(&f, e).e2e_samples[CORE_KIND_PLAIN], 0);
	fx_finish(&f);
}
END_TEST

START_TEST(completions_counted_by_end)
{
	struct fx f;
	fx_init(&f, 2, NULL);
	struct core_decision d = { .endpoint = f.ep[1] };
	uint64_t want[CORE_END_COUNT] = { 0 };
	for (int i = 0; i < 10; i++) {
		enum core_end end = (enum core_end)(i * 7 % CORE_END_COUNT);
		completed(&f, &d, -1, end, false);
		want[end]++;
	}
	struct core_stats st;
	core_stats(f.c, &st);
	struct core_endpoint_info in = fx_info(&f, f.ep[1]);
	for (int e = 0; e < CORE_END_COUNT; e++) {
		ck_assert_uint_eq(st.completions[e], want[e]);
		ck_assert_uint_eq(in.completions[e], want[e]);
		ck_assert_uint_eq(fx_info(&f, f.ep[0]).completions[e], 0);
	}
	ck_assert_str_eq(core_end_name(CORE_END_COMPLETE), "complete");
	ck_assert_str_eq(core_end_name(CORE_END_CLIENT_ABORT), "client_abort");
	ck_assert_str_eq(core_end_name(CORE_END_SERVER_CUT), "server_cut");
	ck_assert_str_eq(core_end_name(CORE_END_SERVER_FAIL), "server_fail");
	ck_assert_str_eq(core_end_name(CORE_END_COUNT), "unknown");
	fx_finish(&f);
}
END_TEST

/* Half-open probes: a log line without feedback releases or spends the
 * probe as feedback would. */
START_TEST(probe_released_by_completion)
{
	struct fx f;
	struct core_params p;
	core_params_defaults(&p);
	p.half_open_probes = 1;
	fx_init(&f, 1, &p);
	int e = f.ep[0];
	for (int i = 0; i < 5; i++)
		fx_observe(&f, e, 503, -1, false, 0, false);
	ck_assert_int_eq(fx_info(&f, e).breaker, CORE_BREAKER_OPEN);
	f.now += fx_info(&f, e).cooldown_left_ms;
	struct core_request r = { 0 };
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, e); /* the one probe */
	/* The client left before any answer: neutral, the slot is free. */
	struct core_completion cc = done(&d, -1, CORE_END_CLIENT_ABORT, false);
	ck_assert_int_eq(complete(&f, &cc), 0);
	ck_assert_int_eq(fx_info(&f, e).breaker, CORE_BREAKER_HALF_OPEN);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, e);
	ck_assert_int_ne(d.reason, CORE_REASON_COOLDOWN_FALLBACK);
	/* Refused again: OPEN. */
	completed(&f, &d, 503, CORE_END_SERVER_FAIL, false);
	ck_assert_int_eq(fx_info(&f, e).breaker, CORE_BREAKER_OPEN);
	fx_finish(&f);
}
END_TEST

/* ---- streams: the headers' success is provisional ----------------------- */

/* Streamed feedback of a 200 on endpoint ep whose log line will follow
 * (end_follows), as the agent sends it once the log input has lines. */
static int stream_ok(struct fx *f, int ep, bool end_follows)
{
	struct core_feedback fb = {
		.endpoint = ep, .status = 200, .tr_ms = 20, .retry_after_ms = -1,
		.stream = true, .end_follows = end_follows,
	};
	return core_observe(f->c, &fb, f->now);
}

static int stream_end(struct fx *f, int ep, enum core_end end)
{
	struct core_decision x = { .endpoint = ep };
	struct core_completion cc = done(&x, 200, end, true);
	cc.stream = true;
	return complete(f, &cc);
}

/* Issue 16: a server cutting every stream half-way while others are
 * under way. Each cut stream's headers were a 200 first: counted as a
 * success they outnumber the cuts (the streams still running have sent
 * theirs), the failure ratio stays under 0.5 and the successes break every
 * run of failures. Provisional, they count at the end: only cuts. */
START_TEST(cut_streams_under_way_open_breaker)
{
	struct fx f;
	fx_init(&f, 4, NULL); /* consecutive 5, min 5, ratio 0.5 */
	int e = f.ep[0];
	bool follows = _i == 1;
	/* Three streams under way, then: one ends cut, one more starts. */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(stream_ok(&f, e, follows), 0);
	int cuts = 0;
	while (cuts < 20 && fx_info(&f, e).breaker == CORE_BREAKER_CLOSED) {
		f.now += 100;
		ck_assert_int_eq(stream_end(&f, e, CORE_END_SERVER_CUT), 0);
		cuts++;
		ck_assert_int_eq(stream_ok(&f, e, follows), 0);
	}
	struct core_endpoint_info in = fx_info(&f, e);
	if (follows) {
		ck_assert_int_eq(in.breaker, CORE_BREAKER_OPEN);
		ck_assert_int_eq(cuts, 5);
		/* Nothing counted but the cuts (and the window is kept). */
		ck_assert_uint_eq(in.window_ok, 0);
		ck_assert_uint_eq(in.window_fail, 5);
	} else {
		/* Without a log line to come, the headers are all there is: the
		 * old arithmetic, which never opens. */
		ck_assert_int_eq(in.breaker, CORE_BREAKER_CLOSED);
		ck_assert_int_eq(cuts, 20);
	}
	fx_finish(&f);
}
END_TEST

/* After the cooldown, probes whose headers say 200 do not close the
 * breaker: their cut reopens it, the cooldown doubled. */
START_TEST(cut_probe_reopens)
{
	struct fx f;
	fx_init(&f, 1, NULL); /* half_open_probes 3, cooldown 5 s */
	int e = f.ep[0];
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(stream_ok(&f, e, true), 0);
		ck_assert_int_eq(stream_end(&f, e, CORE_END_SERVER_CUT), 0);
	}
	struct core_endpoint_info in = fx_info(&f, e);
	ck_assert_int_eq(in.breaker, CORE_BREAKER_OPEN);
	uint64_t first = in.cooldown_left_ms;
	f.now += first;
	struct core_request r = { 0 };
	int probes = 0;
	for (int i = 0; i < 5; i++) {
		struct core_decision d = fx_decide(&f, &r);
		if (d.reason == CORE_REASON_COOLDOWN_FALLBACK)
			break;
		ck_assert_int_eq(d.endpoint, e);
		probes++;
		ck_assert_int_eq(stream_ok(&f, e, true), 0);
	}
	/* Three probes out, their headers in: still half-open, no more. */
	ck_assert_int_eq(probes, 3);
	ck_assert_int_eq(fx_info(&f, e).breaker, CORE_BREAKER_HALF_OPEN);
	f.now += 300;
	ck_assert_int_eq(stream_end(&f, e, CORE_END_SERVER_CUT), 0);
	in = fx_info(&f, e);
	ck_assert_int_eq(in.breaker, CORE_BREAKER_OPEN);
	ck_assert_uint_eq(in.cooldown_left_ms, 2 * first);
	/* The other two probes' cuts arrive late: nothing more. */
	ck_assert_int_eq(stream_end(&f, e, CORE_END_SERVER_CUT), 0);
	ck_assert_int_eq(stream_end(&f, e, CORE_END_SERVER_CUT), 0);
	ck_assert_uint_eq(fx_info(&f, e).cooldown_left_ms, 2 * first);
	fx_finish(&f);
}
END_TEST

/* A provisional success counts when its stream ends well; a client's abort
 * frees its probe slot; without end_follows the headers count at once. */
START_TEST(provisional_success_settled_at_end)
{
	struct fx f;
	fx_init(&f, 1, NULL);
	int e = f.ep[0];
	ck_assert_int_eq(stream_ok(&f, e, true), 0);
	struct core_endpoint_info in = fx_info(&f, e);
	ck_assert_uint_eq(in.window_ok, 0);
	ck_assert_uint_eq(in.outcomes[CORE_OUTCOME_SUCCESS], 1);
	ck_assert_uint_eq(in.samples[CORE_KIND_STREAM], 1); /* headers EWMA now */
	ck_assert_int_eq(stream_end(&f, e, CORE_END_COMPLETE), 0);
	ck_assert_uint_eq(fx_info(&f, e).window_ok, 1);
	/* Its line again (a duplicate): nothing pending, nothing counted. */
	ck_assert_int_eq(stream_end(&f, e, CORE_END_COMPLETE), 0);
	ck_assert_uint_eq(fx_info(&f, e).window_ok, 1);
	ck_assert_int_eq(stream_ok(&f, e, false), 0);
	ck_assert_uint_eq(fx_info(&f, e).window_ok, 2);
	ck_assert_int_eq(stream_end(&f, e, CORE_END_COMPLETE), 0);
	ck_assert_uint_eq(fx_info(&f, e).window_ok, 2);
	/* A plain request's headers come with its whole body: at once. */
	struct core_feedback fb = {
		.endpoint = e, .status = 200, .tr_ms = 20, .retry_after_ms = -1,
		.end_follows = true,
	};
	ck_assert_int_eq(core_observe(f.c, &fb, f.now), 0);
	ck_assert_uint_eq(fx_info(&f, e).window_ok, 3);

	/* HALF_OPEN, one probe: its client leaves mid-stream, the slot is
	 * free again; the next probe ends well and closes it. */
	struct core_params p;
	core_params_defaults(&p);
	p.half_open_probes = 1;
	ck_assert_int_eq(core_set_params(f.c, &p), 0);
	for (int i = 0; i < 5; i++)
		fx_observe(&f, e, 503, -1, false, 0, false);
	ck_assert_int_eq(fx_info(&f, e).breaker, CORE_BREAKER_OPEN);
	f.now += fx_info(&f, e).cooldown_left_ms;
	struct core_request r = { 0 };
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.reason, CORE_REASON_P2C);
	ck_assert_int_eq(stream_ok(&f, e, true), 0);
	/* One probe allowed: its headers would have closed it. */
	ck_assert_int_eq(fx_info(&f, e).breaker, CORE_BREAKER_HALF_OPEN);
	ck_assert_int_eq(stream_end(&f, e, CORE_END_CLIENT_ABORT), 0);
	ck_assert_int_eq(fx_info(&f, e).breaker, CORE_BREAKER_HALF_OPEN);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.reason, CORE_REASON_P2C);
	ck_assert_int_eq(stream_ok(&f, e, true), 0);
	ck_assert_int_eq(fx_info(&f, e).breaker, CORE_BREAKER_HALF_OPEN);
	ck_assert_int_eq(stream_end(&f, e, CORE_END_COMPLETE), 0);
	ck_assert_int_eq(fx_info(&f, e).breaker, CORE_BREAKER_CLOSED);
	fx_finish(&f);
}
END_TEST

/* ---- score_by --------------------------------------------------------- */

/* Four endpoints warm at 500 ms to headers (and, when e2e, 1000 ms end to
 * end); then the key's endpoint home slows down to tr_home and e2e_home
 * over 80 requests, each followed by a decision on the key as live
 * traffic would. */
static int score_setup(struct fx *f, enum core_score_by by, bool e2e,
		       double e2e_home, double tr_home, uint64_t session)
{
	struct core_params p;
	core_params_defaults(&p);
	p.score_by = by;
	fx_init(f, 4, &p);
	for (int i = 0; i < 4; i++) {
		fx_warm(f, f->ep[i], 500, 200);
		struct core_decision x = { .endpoint = f->ep[i] };
		struct core_completion cc = done(&x, 200, CORE_END_COMPLETE, true);
		cc.total_ms = 1000;
		for (int k = 0; e2e && k < 25; k++)
			ck_assert_int_eq(complete(f, &cc), 0);
	}
	struct core_request r = fx_session(session);
	struct core_decision d = fx_decide(f, &r);
	int home = d.endpoint;
	fx_feedback(f, &d, 200, 500, false);
	core_endpoint_complete(f->c, home);
	struct core_decision x = { .endpoint = home };
	struct core_completion cc = done(&x, 200, CORE_END_COMPLETE, true);
	cc.total_ms = (int64_t)e2e_home;
	for (int k = 0; k < 80; k++) {
		fx_observe(f, home, 200, (int64_t)tr_home, false, 0, false);
		if (e2e)
			ck_assert_int_eq(complete(f, &cc), 0);
		d = fx_decide(f, &r);
		core_endpoint_complete(f->c, d.endpoint);
	}
	return home;
}

START_TEST(score_by_chooses_signal)
{
	/* _i: score_by; rows: (e2e known, e2e 3x, headers 3x) and whether
	 * the warm endpoint is kept. */
	static const struct {
		bool e2e;
		double e2e_home, tr_home;
		bool kept[CORE_SCORE_COUNT];
	} rows[] = {
		/* e2e 3x the median, headers fine */
		{ true, 3000, 500, { true, false, false } },
		/* headers 3x, e2e fine */
		{ true, 1000, 1500, { false, true, false } },
		/* both fine */
		{ true, 1000, 500, { true, true, true } },
		/* no log input: end_to_end falls back to headers */
		{ false, 0, 1500, { false, false, false } },
		{ false, 0, 500, { true, true, true } },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct fx f;
		int home = score_setup(&f, (enum core_score_by)_i, rows[i].e2e,
				       rows[i].e2e_home, rows[i].tr_home, 77);
		struct core_request r = fx_session(77);
		struct core_decision d = fx_decide(&f, &r);
		bool kept = d.reason == CORE_REASON_AFFINITY && d.endpoint == home;
		ck_assert_msg(kept == rows[i].kept[_i], "row %zu score_by %s",
			      i, core_score_by_name((enum core_score_by)_i));
		fx_finish(&f);
	}
}
END_TEST

/* End-to-end times per KiB are comparable across servers: an endpoint
 * always 3x slower than its peers is left, own history or not (the time to
 * headers would keep it: see tolerance_against_own_history). */
START_TEST(e2e_judged_against_peers)
{
	struct core_params p;
	core_params_defaults(&p);
	p.score_by = CORE_SCORE_END_TO_END;
	struct fx f;
	fx_init(&f, 4, &p);
	struct core_request r = fx_session(21);
	struct core_decision d = fx_decide(&f, &r);
	int home = d.endpoint;
	fx_feedback(&f, &d, 200, 500, false);
	core_endpoint_complete(f.c, home);
	for (int i = 0; i < 4; i++) {
		fx_warm(&f, f.ep[i], 500, 25);
		struct core_decision x = { .endpoint = f.ep[i] };
		struct core_completion cc = done(&x, 200, CORE_END_COMPLETE, true);
		cc.total_ms = f.ep[i] == home ? 3000 : 1000;
		for (int k = 0; k < 25; k++)
			ck_assert_int_eq(complete(&f, &cc), 0);
	}
	d = fx_decide(&f, &r);
	ck_assert_int_ne(d.endpoint, home);
	ck_assert_int_eq(d.reason, CORE_REASON_HASH);
	fx_finish(&f);
}
END_TEST

/* An endpoint judged slow on latencies from before its breaker opened
 * (here 3x its peers end to end) gets its half-open probes once the
 * cooldown is over: it starts cold, as after idle_reset. Without that a
 * server rate-limited once was never tried again while its peers went on
 * learning (e2e ratelimit-haproxy-3.0, 1 run in 10). */
START_TEST(probes_after_open_despite_stale_ewma)
{
	struct core_params p;
	core_params_defaults(&p);
	p.score_by = CORE_SCORE_END_TO_END;
	struct fx f;
	fx_init(&f, 4, &p);
	struct core_request r = fx_session(21);
	struct core_decision d = fx_decide(&f, &r);
	int home = d.endpoint;
	core_endpoint_complete(f.c, home);
	for (int i = 0; i < 4; i++) {
		fx_warm(&f, f.ep[i], 500, 25);
		struct core_decision x = { .endpoint = f.ep[i] };
		struct core_completion cc = done(&x, 200, CORE_END_COMPLETE, true);
		cc.total_ms = f.ep[i] == home ? 3000 : 1000;
		for (int k = 0; k < 25; k++)
			ck_assert_int_eq(complete(&f, &cc), 0);
	}
	ck_assert_int_ne(fx_decide(&f, &r).endpoint, home);
	struct core_feedback fb = { .endpoint = home, .status = 429, .tr_ms = 1,
				    .retry_after_ms = 2000 };
	ck_assert_int_eq(core_observe(f.c, &fb, f.now), 0);
	f.now += 2500;
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, home);
	ck_assert_int_eq(fx_info(&f, home).breaker, CORE_BREAKER_HALF_OPEN);
	fx_finish(&f);
}
END_TEST

START_TEST(score_by_p2c_prefers_fast_e2e)
{
	/* No identity: p2c. Endpoint 0 is 4x slower end to end only. */
	for (int by = 0; by < CORE_SCORE_COUNT; by++) {
		struct core_params p;
		core_params_defaults(&p);
		p.score_by = (enum core_score_by)by;
		struct fx f;
		fx_init(&f, 2, &p);
		fx_warm(&f, f.ep[0], 500, 25);
		fx_warm(&f, f.ep[1], 500, 25);
		for (int i = 0; i < 2; i++) {
			struct core_decision x = { .endpoint = f.ep[i] };
			struct core_completion cc = done(&x, 200, CORE_END_COMPLETE, true);
			cc.total_ms = i == 0 ? 4000 : 1000;
			for (int k = 0; k < 25; k++)
				ck_assert_int_eq(complete(&f, &cc), 0);
		}
		int to0 = 0;
		for (int i = 0; i < 100; i++) {
			struct core_decision d = fx_decide(&f, &(struct core_request){ 0 });
			to0 += d.endpoint == f.ep[0];
			struct core_completion cc = done(&d, 200, CORE_END_CLIENT_ABORT, true);
			complete(&f, &cc);
		}
		if (by == CORE_SCORE_HEADERS) /* equal headers: a coin */
			ck_assert(to0 > 20 && to0 < 80);
		else
			ck_assert_int_eq(to0, 0);
		fx_finish(&f);
	}
}
END_TEST

START_TEST(score_by_checked_and_named)
{
	struct core_params p;
	core_params_defaults(&p);
	ck_assert_int_eq(p.score_by, CORE_SCORE_BOTH);
	struct core *c;
	p.score_by = CORE_SCORE_COUNT;
	ck_assert_int_eq(core_create(&c, &p), -EINVAL);
	p.score_by = (enum core_score_by)-1;
	ck_assert_int_eq(core_create(&c, &p), -EINVAL);
	p.score_by = CORE_SCORE_BOTH;
	ck_assert_int_eq(core_create(&c, &p), 0);
	p.score_by = CORE_SCORE_COUNT;
	ck_assert_int_eq(core_set_params(c, &p), -EINVAL);
	ck_assert_int_eq(core_params(c)->score_by, CORE_SCORE_BOTH);
	core_destroy(c);
	ck_assert_str_eq(core_score_by_name(CORE_SCORE_HEADERS), "headers");
	ck_assert_str_eq(core_score_by_name(CORE_SCORE_END_TO_END), "end_to_end");
	ck_assert_str_eq(core_score_by_name(CORE_SCORE_BOTH), "both");
	ck_assert_ptr_null(core_score_by_name(CORE_SCORE_COUNT));
}
END_TEST

START_TEST(e2e_in_snapshot)
{
	struct fx a, b;
	fx_init(&a, 1, NULL);
	fx_init(&b, 1, NULL);
	struct core_decision d = { .endpoint = a.ep[0] };
	struct core_completion cc = done(&d, 200, CORE_END_COMPLETE, true);
	cc.stream = true;
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(complete(&a, &cc), 0);
	struct core_endpoint_stats st;
	ck_assert_int_eq(core_endpoint_stats_export(a.c, a.ep[0], a.now, &st), 0);
	ck_assert_uint_eq(st.e2e_samples[CORE_KIND_STREAM], 3);
	ck_assert_double_eq(st.e2e_ewma_ms[CORE_KIND_STREAM], 900.0 / 16);
	ck_assert_int_eq(core_endpoint_stats_import(b.c, b.ep[0], b.now, &st), 0);
	struct core_endpoint_info in = fx_info(&b, b.ep[0]);
	ck_assert_uint_eq(in.e2e_samples[CORE_KIND_STREAM], 3);
	ck_assert_double_eq(in.e2e_ewma_ms[CORE_KIND_STREAM], 900.0 / 16);
	st.e2e_ewma_ms[CORE_KIND_PLAIN] = NAN;
	ck_assert_int_eq(core_endpoint_stats_import(b.c, b.ep[0], b.now, &st), -EINVAL);
	st.e2e_ewma_ms[CORE_KIND_PLAIN] = -1;
	ck_assert_int_eq(core_endpoint_stats_import(b.c, b.ep[0], b.now, &st), -EINVAL);
	fx_finish(&a);
	fx_finish(&b);
}
END_TEST

/* policy.load_floor_e2e: four endpoints warm at 500 ms to headers (and
 * at 1000 ms end to end when e2e); a new session's rendezvous choice x
 * holds 5 requests, the others none, over load_floor (4 here) and the bound
 * (ceil(1.5 x 6 / 4) = 3). Where the decision scores end-to-end times
 * and x is warm on them, 5 is under load_floor_e2e (8): the key stays on
 * x; without the log input, with score_by headers, or with
 * load_floor_e2e 0 it goes elsewhere. place_load_z, owned_bound and
 * exploration are off: the bound alone decides. */
static int floor_e2e_case(bool e2e, enum core_score_by by, uint32_t floor_e2e,
			  int *x)
{
	struct core_params p;
	core_params_defaults(&p);
	p.load_floor = 4;
	p.score_by = by;
	p.load_floor_e2e = floor_e2e;
	p.place_load_z = 0;
	p.owned_bound = -1;
	p.explore_share = 0;
	struct fx f;
	fx_init(&f, 4, &p);
	for (int i = 0; i < 4; i++) {
		fx_warm(&f, f.ep[i], 500, 25);
		struct core_decision d = { .endpoint = f.ep[i] };
		struct core_completion cc = done(&d, 200, CORE_END_COMPLETE, true);
		cc.total_ms = 1000;
		for (int k = 0; e2e && k < 25; k++)
			ck_assert_int_eq(complete(&f, &cc), 0);
	}
	struct core_request r = fx_session(4242);
	struct fx g; /* a twin with nothing in flight: x, the choice */
	fx_init(&g, 4, &p);
	*x = fx_decide(&g, &r).endpoint;
	fx_finish(&g);
	ck_assert_int_ge(*x, 0);
	ck_assert_int_eq(core_endpoint_sync(f.c, *x, CORE_ADMIN_ENABLED, 5, f.now), 0);
	/* explain names the floor x had (warmlanectl's "under ...") */
	struct core_trace t;
	struct core_rng copy = f.rng;
	struct core_decision e;
	ck_assert_int_eq(core_explain(f.c, &r, f.now, &copy, &e, &t), 0);
	ck_assert(t.ranked && t.n_rank > 0);
	ck_assert_int_eq(t.rank[0].endpoint, *x);
	ck_assert(t.rank[0].walked);
	bool scored = e2e && by != CORE_SCORE_HEADERS && floor_e2e > p.load_floor;
	ck_assert_uint_eq(t.rank[0].floor, scored ? floor_e2e : p.load_floor);
	ck_assert_uint_eq(t.load_floor_e2e, floor_e2e);
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.reason, CORE_REASON_HASH);
	ck_assert_int_eq(d.endpoint, e.endpoint);
	ck_assert(t.rank[0].bounded == (d.endpoint == *x));
	fx_finish(&f);
	return d.endpoint;
}

START_TEST(floor_e2e_where_end_to_end_scored)
{
	int x;
	ck_assert_int_eq(floor_e2e_case(true, CORE_SCORE_BOTH, 8, &x), x);
	ck_assert_int_eq(floor_e2e_case(true, CORE_SCORE_END_TO_END, 8, &x), x);
	ck_assert_int_ne(floor_e2e_case(true, CORE_SCORE_BOTH, 0, &x), x);
	ck_assert_int_ne(floor_e2e_case(true, CORE_SCORE_BOTH, 5, &x), x);
	ck_assert_int_ne(floor_e2e_case(false, CORE_SCORE_BOTH, 8, &x), x);
	ck_assert_int_ne(floor_e2e_case(true, CORE_SCORE_HEADERS, 8, &x), x);
}
END_TEST

static Suite *complete_suite(void)
{
	Suite *s = suite_create("complete");
	TCase *tc = tcase_create("complete");
	tcase_add_test(tc, in_flight_floors_at_zero);
	tcase_add_test(tc, no_double_count_with_feedback);
	tcase_add_test(tc, cut_with_200_is_failure);
	tcase_add_test(tc, cut_evicts_only_its_own_entry);
	tcase_add_test(tc, client_abort_is_neutral);
	tcase_add_loop_test(tc, fail_without_feedback_evicts, 0, 2);
	tcase_add_test(tc, no_feedback_status_as_observe);
	tcase_add_test(tc, forged_lines_never_insert);
	tcase_add_test(tc, line_confirms_own_decision_only);
	tcase_add_test(tc, shadow_decision_follows_haproxy);
	tcase_add_test(tc, shadow_decision_frees_probe);
	tcase_add_test(tc, e2e_only_on_successful_complete);
	tcase_add_test(tc, long_stream_is_not_idleness);
	tcase_add_test(tc, retry_after_from_log_line);
	tcase_add_test(tc, wake_up_not_timed_end_to_end);
	tcase_add_test(tc, completions_counted_by_end);
	tcase_add_test(tc, probe_released_by_completion);
	tcase_add_loop_test(tc, cut_streams_under_way_open_breaker, 0, 2);
	tcase_add_test(tc, cut_probe_reopens);
	tcase_add_test(tc, provisional_success_settled_at_end);
	suite_add_tcase(s, tc);

	tc = tcase_create("score_by");
	tcase_add_loop_test(tc, score_by_chooses_signal, 0, CORE_SCORE_COUNT);
	tcase_add_test(tc, e2e_judged_against_peers);
	tcase_add_test(tc, probes_after_open_despite_stale_ewma);
	tcase_add_test(tc, score_by_p2c_prefers_fast_e2e);
	tcase_add_test(tc, score_by_checked_and_named);
	tcase_add_test(tc, e2e_in_snapshot);
	tcase_add_test(tc, floor_e2e_where_end_to_end_scored);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(complete_suite());
	int failed;

	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
