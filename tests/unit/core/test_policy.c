/* test_policy.c - core: routing policy v2 (issue 12): when a warm entry
 * leaves its endpoint. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "core.h"
#include "fixture.h"

/* A key whose first rendezvous choice, on an idle twin of f's pool, is ep
 * (searched from session hash from upwards). */
static uint64_t session_homed_on(const struct core_params *p, int n, int ep,
				 uint64_t from)
{
	struct fx g;
	fx_init(&g, n, p);
	uint64_t s = from;
	for (; s < from + 10000; s++) {
		struct core_request r = fx_session(s);
		struct core_decision d = fx_decide(&g, &r);
		core_endpoint_complete(g.c, d.endpoint);
		if (d.endpoint == ep)
			break;
	}
	fx_finish(&g);
	ck_assert_uint_lt(s, from + 10000);
	return s;
}

START_TEST(warm_entry_tolerates_slack)
{
	/* A session confirmed on x, then 6 more of its requests while none
	 * completes, on a pool of 4 with nothing else in flight (load_floor
	 * 0, so that only the bounds speak). The load_factor bound alone
	 * (warm_slack 0) moves it at the second: 2 > ceil(1.5 x 2 / 4). With
	 * warm_slack 6 it stays while in_flight + 1 <= ceil((total + 1) / 4 +
	 * 6): all 6 times (the 6th: 7 <= ceil(7/4 + 6) = 8). A new key whose
	 * first choice is x keeps the bound alone and goes elsewhere. */
	for (int slack = 0; slack < 2; slack++) {
		struct core_params p;
		core_params_defaults(&p);
		p.load_floor = 0;
		p.warm_slack = slack ? 6 : 0;
		struct fx f;
		fx_init(&f, 4, &p);
		struct core_request a = fx_session(1);
		struct core_decision d = fx_decide(&f, &a);
		int x = d.endpoint;
		ck_assert_int_ge(x, 0);
		ck_assert_int_eq(fx_feedback(&f, &d, 200, 40, false), 0);
		core_endpoint_complete(f.c, x);
		ck_assert_uint_eq(fx_info(&f, x).in_flight, 0);
		int stayed = 0;
		for (int i = 0; i < 6; i++) {
			d = fx_decide(&f, &a);
			if (d.endpoint != x)
				break;
			ck_assert_int_eq(d.reason, CORE_REASON_AFFINITY);
			stayed++;
		}
		if (slack) {
			ck_assert_int_eq(stayed, 6);
			uint64_t s = session_homed_on(&p, 4, x, 1000);
			struct core_request b = fx_session(s);
			struct core_decision db = fx_decide(&f, &b);
			ck_assert_int_ne(db.endpoint, x);
			ck_assert_int_eq(db.reason, CORE_REASON_HASH);
		} else {
			ck_assert_int_eq(stayed, 1);
		}
		fx_finish(&f);
	}
}
END_TEST

START_TEST(warm_slack_ends_where_bound_is_larger)
{
	/* Under heavy load the load_factor bound is the larger and decides
	 * alone: with 40 requests in flight on each of 4 endpoints, a warm
	 * entry on x stays until x holds ceil(1.5 x (total + 1) / 4), never
	 * beyond, whatever warm_slack (6 < 0.5 x the fair share). */
	struct core_params p;
	core_params_defaults(&p);
	struct fx f;
	fx_init(&f, 4, &p);
	struct core_request a = fx_session(1);
	struct core_decision d = fx_decide(&f, &a);
	int x = d.endpoint;
	ck_assert_int_eq(fx_feedback(&f, &d, 200, 40, false), 0);
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(core_endpoint_sync(f.c, f.ep[k], CORE_ADMIN_ENABLED,
						    40, f.now), 0);
	uint32_t max_seen = 0;
	for (int i = 0; i < 40; i++) {
		d = fx_decide(&f, &a);
		uint32_t mine = fx_info(&f, x).in_flight;
		max_seen = mine > max_seen ? mine : max_seen;
		if (d.endpoint != x)
			break;
	}
	/* total 160 + the ones added to x: the bound is ceil(1.5 x (total
	 * + 1) / 4), about 61 at most; fair + 6 about 47. */
	uint32_t total = 0;
	for (int k = 0; k < 4; k++)
		total += fx_info(&f, f.ep[k]).in_flight;
	ck_assert_uint_le(max_seen, (uint32_t)ceil(1.5 * total / 4));
	ck_assert_uint_gt(max_seen, (uint32_t)ceil(total / 4.0 + 6));
	fx_finish(&f);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("core-policy");
	TCase *tc = tcase_create("warm bound");
	tcase_add_test(tc, warm_entry_tolerates_slack);
	tcase_add_test(tc, warm_slack_ends_where_bound_is_larger);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(policy_suite());
	int failed;

	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
