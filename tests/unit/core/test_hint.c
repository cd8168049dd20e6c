/* test_hint.c - core: the shared warm hint (docs/peers.md) as one more warm entry under the same rules. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "fixture.h"

/* A request of session s carrying a hint for endpoint ep, age_ms old,
 * recorded for s's own akey. */
static struct core_request hinted(const struct fx *f, uint64_t s, int ep,
				  uint64_t age_ms)
{
	struct core_request r = fx_session(s);
	uint64_t akey;
	ck_assert(core_identity(f->c, &r, &akey));
	r.hint = (struct core_hint){ .present = true, .akey32 = (uint32_t)akey,
				     .age_ms = age_ms, .n = 1,
				     .endpoint = { ep } };
	return r;
}

/* The endpoint session s hashes to on f, and another one. */
static void hashed(struct fx *f, uint64_t s, int *home, int *other)
{
	struct core_request r = fx_session(s);
	struct core_decision d = fx_decide(f, &r);
	ck_assert_int_eq(d.reason, CORE_REASON_HASH);
	core_endpoint_complete(f->c, d.endpoint);
	*home = d.endpoint;
	*other = f->ep[0] == d.endpoint ? f->ep[1] : f->ep[0];
}

static uint64_t hints(const struct fx *f, enum core_hint_use u)
{
	struct core_stats st;
	core_stats(f->c, &st);
	return st.hints[u];
}

/* A standby agent with an empty map follows the hint, not its hash. */
START_TEST(hint_without_own_entry_is_used)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	int home, other;
	hashed(&f, 11, &home, &other);
	struct core_request r = hinted(&f, 11, other, 5);
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, other);
	ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
	ck_assert_int_eq(d.hint, CORE_HINT_USED);
	ck_assert_uint_eq(hints(&f, CORE_HINT_USED), 1);
	fx_finish(&f);
}
END_TEST

/* The newer of the hint and the own entry wins, a tie to the own entry. */
START_TEST(newer_of_hint_and_entry_wins)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	struct core_request r = fx_session(12);
	struct core_decision d = fx_decide(&f, &r);
	int home = d.endpoint;
	ck_assert_int_eq(fx_feedback(&f, &d, 200, 100, false), 0);
	core_endpoint_complete(f.c, home);
	int other = f.ep[0] == home ? f.ep[1] : f.ep[0];

	f.now += 1000; /* the own entry is 1000 ms old */
	r = hinted(&f, 12, other, 1000);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, home);
	ck_assert_int_eq(d.hint, CORE_HINT_OLDER);
	core_endpoint_complete(f.c, home);

	r = hinted(&f, 12, other, 999);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, other);
	ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
	ck_assert_int_eq(d.hint, CORE_HINT_USED);
	/* Its success moves the own entry there: the hint is no longer
	 * needed (a plain request follows it). */
	ck_assert_int_eq(fx_feedback(&f, &d, 200, 100, false), 0);
	core_endpoint_complete(f.c, other);
	r = fx_session(12);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, other);
	ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
	core_endpoint_complete(f.c, other);
	/* The same server in hint and entry: agrees. */
	r = hinted(&f, 12, other, 1);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, other);
	ck_assert_int_eq(d.hint, CORE_HINT_AGREES);
	fx_finish(&f);
}
END_TEST

/* HAProxy 2.6 sends no feedback message: the log line's success confirms
 * a hinted decision into the map, as it does the agent's own. */
START_TEST(hinted_decision_confirmed_by_log_line)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	int home, other;
	hashed(&f, 13, &home, &other);
	struct core_request r = hinted(&f, 13, other, 5);
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.hint, CORE_HINT_USED);
	struct core_completion cc = {
		.endpoint = d.endpoint, .status = 200, .end = CORE_END_COMPLETE,
		.tr_ms = 100, .total_ms = 900, .bytes = 4096,
		.has_akey = true, .akey = d.akey,
	};
	ck_assert_int_eq(core_complete(f.c, &cc, f.now), 0);
	r = fx_session(13);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.endpoint, other);
	ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
	fx_finish(&f);
}
END_TEST

/* A hint never brings traffic back to a server the agent holds failing
 * (breaker open), down, slow, or over the load bound. */
START_TEST(hint_refused_by_health_breaker_load)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	for (int i = 0; i < 4; i++)
		fx_warm(&f, f.ep[i], 500, 200);
	int home, other;
	hashed(&f, 14, &home, &other);

	/* Open breaker (a 429). */
	struct core_feedback fb = { .endpoint = other, .status = 429, .tr_ms = 1,
				    .retry_after_ms = 60000 };
	ck_assert_int_eq(core_observe(f.c, &fb, f.now), 0);
	struct core_request r = hinted(&f, 14, other, 5);
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.hint, CORE_HINT_REFUSED);
	ck_assert_int_eq(d.endpoint, home);
	ck_assert_int_eq(d.reason, CORE_REASON_HASH);
	core_endpoint_complete(f.c, home);

	/* Down in HAProxy. */
	int third = f.ep[2] != home && f.ep[2] != other ? f.ep[2] : f.ep[3];
	ck_assert_int_eq(core_endpoint_sync(f.c, third, CORE_ADMIN_DOWN, 0, f.now), 0);
	r = hinted(&f, 14, third, 5);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.hint, CORE_HINT_REFUSED);
	ck_assert_int_eq(d.endpoint, home);
	core_endpoint_complete(f.c, home);
	core_endpoint_sync(f.c, third, CORE_ADMIN_ENABLED, 0, f.now);

	/* Over the load bound. */
	core_endpoint_sync(f.c, third, CORE_ADMIN_ENABLED, 10, f.now);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.hint, CORE_HINT_REFUSED);
	ck_assert_int_ne(d.endpoint, third);
	core_endpoint_complete(f.c, d.endpoint);
	core_endpoint_sync(f.c, third, CORE_ADMIN_ENABLED, 0, f.now);

	/* Slow: 4x the median. */
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(fx_observe(&f, third, 200, 2000, false, 0, false), 0);
	d = fx_decide(&f, &r);
	ck_assert_int_eq(d.hint, CORE_HINT_REFUSED);
	ck_assert_int_ne(d.endpoint, third);
	core_endpoint_complete(f.c, d.endpoint);
	ck_assert_uint_eq(hints(&f, CORE_HINT_REFUSED), 4);
	ck_assert_uint_eq(hints(&f, CORE_HINT_USED), 0);
	fx_finish(&f);
}
END_TEST

/* A cut stream is a breaker failure however HAProxy recorded its 200: the
 * hinted server's breaker refuses the hint once it opens. */
START_TEST(hint_refused_after_cut_streams)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	int home, other;
	hashed(&f, 15, &home, &other);
	for (int i = 0; i < 40 && fx_info(&f, other).breaker == CORE_BREAKER_CLOSED; i++) {
		struct core_completion cc = {
			.endpoint = other, .status = 200, .end = CORE_END_SERVER_CUT,
			.tr_ms = 100, .total_ms = 900, .bytes = 4096, .stream = true,
		};
		ck_assert_int_eq(core_complete(f.c, &cc, f.now), 0);
		f.now += 10;
	}
	ck_assert_int_eq(fx_info(&f, other).breaker, CORE_BREAKER_OPEN);
	struct core_request r = hinted(&f, 15, other, 5);
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.hint, CORE_HINT_REFUSED);
	ck_assert_int_ne(d.endpoint, other);
	fx_finish(&f);
}
END_TEST

/* A hint recorded for another affinity key (HAProxy's key rules and the
 * agent's ladder disagree) is ignored and counted. */
START_TEST(hint_for_another_akey_ignored)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	int home, other;
	hashed(&f, 16, &home, &other);
	struct core_request r = hinted(&f, 16, other, 5);
	r.hint.akey32 ^= 1;
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.hint, CORE_HINT_MISMATCH);
	ck_assert_int_eq(d.endpoint, home);
	ck_assert_int_eq(d.reason, CORE_REASON_HASH);
	/* With session_scope caller, the same session label of another
	 * caller is another akey: its hint cannot move this caller. */
	core_endpoint_complete(f.c, home);
	struct core_request mine = fx_session(16);
	mine.caller = (struct core_id){ true, 1 };
	struct core_request theirs = mine;
	theirs.caller.hash = 2;
	uint64_t ak;
	ck_assert(core_identity(f.c, &theirs, &ak));
	mine.hint = (struct core_hint){ .present = true, .akey32 = (uint32_t)ak,
					.age_ms = 5, .n = 1, .endpoint = { other } };
	d = fx_decide(&f, &mine);
	ck_assert_int_eq(d.hint, CORE_HINT_MISMATCH);
	fx_finish(&f);
}
END_TEST

/* Of a server's endpoints (one per key id), the first usable is taken. */
START_TEST(hint_takes_first_usable_endpoint_of_server)
{
	struct fx f;
	fx_init(&f, 2, NULL);
	int k1 = fx_add(&f, "multi", "k1", 1, NULL);
	int k2 = fx_add(&f, "multi", "k2", 1, NULL);
	struct core_feedback fb = { .endpoint = k1, .status = 429, .tr_ms = 1,
				    .retry_after_ms = 60000 };
	ck_assert_int_eq(core_observe(f.c, &fb, f.now), 0);
	struct core_request r = hinted(&f, 17, k1, 5);
	r.hint.n = 2;
	r.hint.endpoint[1] = k2;
	struct core_decision d = fx_decide(&f, &r);
	ck_assert_int_eq(d.hint, CORE_HINT_USED);
	ck_assert_int_eq(d.endpoint, k2);
	fx_finish(&f);
}
END_TEST

/* policy.routers auto: decisions carrying hints for their own keys (a
 * group sharing placements) make the agent route alone from the 30th in
 * the window; hints recorded for another key do not count; decisions
 * going on without hints end it, after the window has forgotten them;
 * `several` ignores them. The verdict is judged at each runtime-API poll
 * (core_endpoint_sync). */
static struct core_routers_info routers_after(struct fx *f)
{
	for (int i = 0; i < f->n; i++)
		ck_assert_int_eq(core_endpoint_sync(f->c, f->ep[i], CORE_ADMIN_ENABLED,
						    0, f->now), 0);
	struct core_routers_info r;
	core_routers_info(f->c, &r);
	return r;
}

static void decide_ended(struct fx *f, const struct core_request *r)
{
	struct core_decision d = fx_decide(f, r);
	ck_assert_int_ge(d.endpoint, 0);
	core_endpoint_complete(f->c, d.endpoint);
}

/* _i 0: hints whose writer is not told (a table without gpt 4): alone at
 * the 30th. _i 1: 60 written by this HAProxy change nothing (a table
 * that replicates nothing has those too); then 3 a peer wrote show the
 * table shared (ROUTERS_MIN_PEER); own hints alone after that end it
 * once the window forgets the peer's (the replication stopped). */
START_TEST(routers_alone_by_the_hints)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	uint64_t s = 1;
	uint8_t writer = _i == 0 ? CORE_HINT_WRITER_UNKNOWN : CORE_HINT_WRITER_PEER;
	for (int i = 0; i < 60; i++, s++) {
		struct core_request r = hinted(&f, s, f.ep[0], 10);
		r.hint.akey32 ^= 1; /* another key's */
		decide_ended(&f, &r);
		f.now += 100;
		ck_assert(!routers_after(&f).alone);
	}
	ck_assert_uint_eq(hints(&f, CORE_HINT_MISMATCH), 60);
	for (int i = 0; i < 60 && _i == 1; i++, s++) {
		struct core_request r = hinted(&f, s, f.ep[i % 4], 10);
		r.hint.writer = CORE_HINT_WRITER_OWN;
		decide_ended(&f, &r);
		f.now += 100;
		ck_assert(!routers_after(&f).hints);
	}
	struct core_stats cs;
	core_stats(f.c, &cs);
	ck_assert_uint_eq(cs.hints_own, _i == 1 ? 60 : 0);
	int at = _i == 0 ? 30 : 3;
	for (int i = 1; i <= at; i++, s++) {
		struct core_request r = hinted(&f, s, f.ep[i % 4], 10);
		r.hint.writer = writer;
		decide_ended(&f, &r);
		struct core_routers_info ri = routers_after(&f);
		ck_assert(ri.alone == (i == at) && ri.hints == (i == at));
	}
	struct core_routers_info ri = routers_after(&f);
	ck_assert_uint_eq(ri.ttl_ms, 30 * 60 * 1000);
	/* Decisions without hints (_i 1: with their own HAProxy's), one a
	 * second: the window forgets them. */
	int t = 0;
	while (routers_after(&f).alone) {
		ck_assert_int_lt(t++, 600);
		f.now += 1000;
		struct core_request r = _i == 0 ? fx_session(s) :
					hinted(&f, s, f.ep[s % 4], 10);
		r.hint.writer = CORE_HINT_WRITER_OWN;
		s++;
		decide_ended(&f, &r);
	}
	ck_assert_int_gt(t, 60);
	ri = routers_after(&f);
	ck_assert(!ri.hints);
	ck_assert_uint_eq(ri.ttl_ms, 300 * 1000);
	/* several: hints or not, as before. */
	struct core_params p;
	core_params_defaults(&p);
	p.routers = CORE_ROUTERS_SEVERAL;
	ck_assert_int_eq(core_set_params(f.c, &p), 0);
	for (int i = 0; i < 40; i++, s++) {
		struct core_request r = hinted(&f, s, f.ep[0], 10);
		decide_ended(&f, &r);
	}
	ri = routers_after(&f);
	ck_assert(ri.hints && !ri.alone);
	fx_finish(&f);
}
END_TEST

/* Own hints with HAProxy's peers connected (the active HAProxy of a
 * pair, or one alone in its peers section): no other HAProxy routes
 * these keys, the agent routes alone; peers apart for longer than the
 * grace (UNKNOWN: no section that shares a table), it no longer does. */
START_TEST(routers_alone_by_own_hints_with_peers_connected)
{
	struct fx f;
	fx_init(&f, 4, NULL);
	uint64_t s = 1;
	enum core_peers off = _i == 0 ? CORE_PEERS_APART : CORE_PEERS_UNKNOWN;
	core_peers_note(f.c, off, f.now);
	for (int i = 0; i < 60; i++, s++) {
		struct core_request r = hinted(&f, s, f.ep[i % 4], 10);
		r.hint.writer = CORE_HINT_WRITER_OWN;
		decide_ended(&f, &r);
		f.now += 100;
		ck_assert(!routers_after(&f).alone);
	}
	core_peers_note(f.c, CORE_PEERS_CONNECTED, f.now);
	struct core_routers_info ri = routers_after(&f);
	ck_assert(ri.hints && ri.alone && ri.linked);
	ck_assert_int_eq(ri.peers, CORE_PEERS_CONNECTED);
	ck_assert_uint_eq(ri.ttl_ms, 30 * 60 * 1000);
	/* Apart: a reconnect's grace, then the own hints no longer count. */
	for (int i = 0; i < 60; i++, s++) {
		if (i % 10 == 0)
			core_peers_note(f.c, off, f.now);
		struct core_request r = hinted(&f, s, f.ep[i % 4], 10);
		r.hint.writer = CORE_HINT_WRITER_OWN;
		decide_ended(&f, &r);
		ri = routers_after(&f);
		ck_assert_msg(ri.alone == (i < 40), "i %d", i); /* 10 s */
		ck_assert_int_eq(ri.peers, off);
		f.now += 250;
	}
	ck_assert(!ri.hints && !ri.linked);
	ck_assert_uint_eq(ri.ttl_ms, 300 * 1000);
	fx_finish(&f);
}
END_TEST

static Suite *hint_suite(void)
{
	Suite *s = suite_create("core-hint");
	TCase *tc = tcase_create("hint");
	tcase_add_test(tc, hint_without_own_entry_is_used);
	tcase_add_test(tc, newer_of_hint_and_entry_wins);
	tcase_add_test(tc, hinted_decision_confirmed_by_log_line);
	tcase_add_test(tc, hint_refused_by_health_breaker_load);
	tcase_add_test(tc, hint_refused_after_cut_streams);
	tcase_add_test(tc, hint_for_another_akey_ignored);
	tcase_add_test(tc, hint_takes_first_usable_endpoint_of_server);
	tcase_add_loop_test(tc, routers_alone_by_the_hints, 0, 2);
	tcase_add_loop_test(tc, routers_alone_by_own_hints_with_peers_connected, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hint_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
