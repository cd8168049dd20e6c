/* test_explain.c - core: core_explain decides as core_decide would and leaves every state as it was; drain; the map read and cleared by key. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "fixture.h"
#include "trace.h"

/* Two cores fed the same; a explains before each of its decisions, b
 * does not. Their decisions must stay equal, and each explain must name
 * the decision that follows it. */
static void twin_run(const struct core_params *p, bool remove_one)
{
	struct fx a, b;
	fx_init(&a, 4, p);
	fx_init(&b, 4, p);
	struct fx *both[2] = { &a, &b };
	for (int k = 0; k < 2; k++) {
		fx_warm(both[k], both[k]->ep[0], 100, 30);
		fx_warm(both[k], both[k]->ep[1], 100, 30);
		fx_warm(both[k], both[k]->ep[2], 400, 30);
		/* ep[3] trips its breaker: OPEN, then HALF_OPEN probes. */
		for (int i = 0; i < 6; i++)
			fx_observe(both[k], both[k]->ep[3], 503, 10, false, 0, false);
	}
	for (int i = 0; i < 400; i++) {
		if (i == 200 && remove_one) {
			/* Entries of a removed endpoint: explain only peeks. */
			ck_assert_int_eq(core_endpoint_remove(a.c, a.ep[1]), 0);
			ck_assert_int_eq(core_endpoint_remove(b.c, b.ep[1]), 0);
		}
		struct core_request req = fx_session((uint64_t)(i % 37));
		if (i % 7 == 0)
			req = (struct core_request){ 0 };
		struct core_rng copy = a.rng;
		struct core_decision e, d1, d2;
		static struct core_trace t;
		ck_assert_int_eq(core_explain(a.c, &req, a.now, &copy, &e, &t), 0);
		d1 = fx_decide(&a, &req);
		d2 = fx_decide(&b, &req);
		ck_assert_int_eq(e.endpoint, d1.endpoint);
		ck_assert_int_eq(e.reason, d1.reason);
		ck_assert_int_eq(d1.endpoint, d2.endpoint);
		ck_assert_int_eq(d1.reason, d2.reason);
		ck_assert_uint_eq(copy.state, a.rng.state);
		if (d1.endpoint >= 0 && i % 3 != 0) {
			fx_feedback(&a, &d1, 200, 100 + i % 50, false);
			fx_feedback(&b, &d2, 200, 100 + i % 50, false);
		}
		a.now += 700;
		b.now += 700;
	}
	struct core_stats sa, sb;
	core_stats(a.c, &sa);
	core_stats(b.c, &sb);
	ck_assert_mem_eq(sa.decisions, sb.decisions, sizeof(sa.decisions));
	ck_assert_uint_eq(sa.affinity_hits, sb.affinity_hits);
	ck_assert_uint_eq(sa.affinity_misses, sb.affinity_misses);
	ck_assert_uint_eq(sa.affinity_entries, sb.affinity_entries);
	fx_finish(&b);
	fx_finish(&a);
}

START_TEST(test_twin_defaults)
{
	twin_run(NULL, false);
}
END_TEST

START_TEST(test_twin_place_choices_removed)
{
	struct core_params p;
	core_params_defaults(&p);
	p.place_choices = 2;
	p.load_floor = 1;
	p.load_factor = 1.0;
	twin_run(&p, true);
}
END_TEST

/* The owned-keys rule at its tightest, its clock's epoch moving every
 * 40 half-lives (28 s here, the run 280 s): explain restores the counts
 * and the clock. */
START_TEST(test_twin_owned_rescaled)
{
	struct core_params p;
	core_params_defaults(&p);
	p.owned_bound = 0;
	p.owned_half_life_ms = 700;
	twin_run(&p, false);
}
END_TEST

/* Over the bound wherever it hashes: the trace shows the ranking in
 * score order, each walked endpoint over its bound, the two p2c draws. */
START_TEST(test_trace_spill)
{
	struct core_params p;
	core_params_defaults(&p);
	p.load_factor = 1.0;
	p.load_floor = 1;
	struct fx f;
	fx_init(&f, 3, &p);
	for (int i = 0; i < 3; i++)
		fx_warm(&f, f.ep[i], 100, 30);
	for (int i = 0; i < 40; i++)
		fx_observe(&f, f.ep[2], 200, 3000, false, 0, false);
	ck_assert_int_eq(core_endpoint_sync(f.c, f.ep[0], CORE_ADMIN_ENABLED, 6, f.now), 0);
	ck_assert_int_eq(core_endpoint_sync(f.c, f.ep[1], CORE_ADMIN_ENABLED, 6, f.now), 0);
	struct core_request req = fx_session(42);
	struct core_rng copy = f.rng;
	struct core_decision d;
	static struct core_trace t;
	ck_assert_int_eq(core_explain(f.c, &req, f.now, &copy, &d, &t), 0);
	ck_assert_int_eq(d.reason, CORE_REASON_SPILL);
	ck_assert_uint_eq(t.candidates, 3);
	ck_assert_uint_eq(t.n_rank, 3);
	for (uint32_t i = 1; i < t.n_rank; i++)
		ck_assert(t.rank[i - 1].score <= t.rank[i].score);
	for (uint32_t i = 0; i < t.n_rank; i++) {
		ck_assert(t.rank[i].walked);
		if (t.rank[i].endpoint == f.ep[2])
			ck_assert(!t.rank[i].fast);
		else
			ck_assert(t.rank[i].fast && !t.rank[i].bounded);
	}
	ck_assert(t.p2c);
	ck_assert(d.endpoint == t.p2c_a || d.endpoint == t.p2c_b);
	ck_assert_uint_eq(fx_info(&f, f.ep[0]).in_flight, 6); /* nothing taken */
	struct core_decision real = fx_decide(&f, &req);
	ck_assert_int_eq(real.endpoint, d.endpoint);
	ck_assert_int_eq(real.reason, CORE_REASON_SPILL);
	fx_finish(&f);
}
END_TEST

START_TEST(test_drain)
{
	struct fx f;
	fx_init(&f, 3, NULL);
	ck_assert_int_eq(core_endpoint_drain(f.c, f.ep[1], true), 0);
	ck_assert(fx_info(&f, f.ep[1]).drained);
	/* HAProxy's polls say ENABLED: the operator's drain stays. */
	ck_assert_int_eq(core_endpoint_sync(f.c, f.ep[1], CORE_ADMIN_ENABLED, 0, f.now), 0);
	for (uint64_t s = 0; s < 300; s++) {
		struct core_request req = fx_session(s);
		struct core_decision d = fx_decide(&f, &req);
		ck_assert_int_ne(d.endpoint, f.ep[1]);
		ck_assert_int_eq(core_endpoint_complete(f.c, d.endpoint), 0);
	}
	struct core_request req = fx_session(1);
	struct core_rng copy = f.rng;
	struct core_decision d;
	static struct core_trace t;
	ck_assert_int_eq(core_explain(f.c, &req, f.now, &copy, &d, &t), 0);
	bool seen = false;
	for (uint32_t i = 0; i < t.n_ep; i++)
		if (t.ep[i].endpoint == f.ep[1]) {
			ck_assert_int_eq(t.ep[i].why, CORE_TRACE_DRAINED);
			seen = true;
		}
	ck_assert(seen);
	ck_assert_int_eq(core_endpoint_drain(f.c, f.ep[1], false), 0);
	unsigned on1 = 0;
	for (uint64_t s = 0; s < 300; s++) {
		struct core_request r = fx_session(s);
		struct core_decision x = fx_decide(&f, &r);
		on1 += x.endpoint == f.ep[1];
		ck_assert_int_eq(core_endpoint_complete(f.c, x.endpoint), 0);
	}
	ck_assert_uint_gt(on1, 50);
	ck_assert_int_eq(core_endpoint_drain(f.c, 999, true), -ENOENT);
	fx_finish(&f);
}
END_TEST

START_TEST(test_lookup_clear)
{
	struct fx f;
	fx_init(&f, 3, NULL);
	struct core_request req = fx_session(7);
	struct core_decision d = fx_decide(&f, &req);
	struct core_affinity_record rec;
	ck_assert_int_eq(core_affinity_lookup(f.c, d.akey, f.now, &rec), -ENOENT);
	fx_feedback(&f, &d, 200, 100, false);
	f.now += 1234;
	struct core_stats before, after;
	core_stats(f.c, &before);
	ck_assert_int_eq(core_affinity_lookup(f.c, d.akey, f.now, &rec), 0);
	core_stats(f.c, &after);
	ck_assert_uint_eq(before.affinity_hits, after.affinity_hits); /* a peek */
	ck_assert_int_eq(rec.endpoint, d.endpoint);
	ck_assert_uint_eq(rec.idle_ms, 1234);
	ck_assert(core_affinity_clear(f.c, d.akey));
	ck_assert(!core_affinity_clear(f.c, d.akey));
	ck_assert_int_eq(core_affinity_lookup(f.c, d.akey, f.now, &rec), -ENOENT);
	fx_finish(&f);
}
END_TEST

static Suite *explain_suite(void)
{
	Suite *s = suite_create("explain");
	TCase *tc = tcase_create("explain");
	tcase_add_test(tc, test_twin_defaults);
	tcase_add_test(tc, test_twin_place_choices_removed);
	tcase_add_test(tc, test_twin_owned_rescaled);
	tcase_add_test(tc, test_trace_spill);
	tcase_add_test(tc, test_drain);
	tcase_add_test(tc, test_lookup_clear);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(explain_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
