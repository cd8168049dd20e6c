/* test_parts.c - core: the affinity map, rendezvous hashing, breaker and feedback parsers on their own. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "affinity.h"
#include "breaker.h"
#include "core.h"
#include "rendezvous.h"

/* ---- affinity map -------------------------------------------------------- */

_Static_assert(sizeof(struct affinity_entry) <= 64, "entry over 64 bytes");

START_TEST(map_put_get_remove)
{
	struct affinity a;
	uint32_t ep, gen;
	ck_assert_int_eq(affinity_init(&a, 1000, 300000), 0);
	for (uint64_t k = 0; k < 1000; k++)
		affinity_put(&a, k, (uint32_t)(k % 7), (uint32_t)k, 10);
	ck_assert_uint_eq(a.used, 1000);
	for (uint64_t k = 0; k < 1000; k++) {
		ck_assert(affinity_get(&a, k, 20, &ep, &gen));
		ck_assert_uint_eq(ep, k % 7);
		ck_assert_uint_eq(gen, k);
	}
	ck_assert(!affinity_get(&a, 5000, 20, &ep, &gen));
	/* Remove every third; the others stay reachable (backward shift). */
	for (uint64_t k = 0; k < 1000; k += 3)
		ck_assert(affinity_remove(&a, k, AFFINITY_NIL));
	for (uint64_t k = 0; k < 1000; k++)
		ck_assert(affinity_get(&a, k, 20, &ep, &gen) == (k % 3 != 0));
	/* Only when it points to the given endpoint. */
	ck_assert(!affinity_remove(&a, 1, 3));
	ck_assert(affinity_remove(&a, 1, 1));
	/* Update in place. */
	affinity_put(&a, 2, 42, 1, 30);
	ck_assert(affinity_get(&a, 2, 30, &ep, &gen));
	ck_assert_uint_eq(ep, 42);
	ck_assert_uint_eq(a.hits, 1000 + 666 + 1);
	affinity_finish(&a);
	ck_assert_int_eq(affinity_init(&a, 0, 1), -EINVAL);
}
END_TEST

START_TEST(map_ttl_expiry)
{
	struct affinity a;
	uint32_t ep, gen;
	ck_assert_int_eq(affinity_init(&a, 100, 300000), 0);
	affinity_put(&a, 1, 1, 0, 1000);
	affinity_put(&a, 2, 2, 0, 2000);
	ck_assert(affinity_get(&a, 1, 1000 + 299999, &ep, &gen));
	ck_assert(!affinity_get(&a, 1, 1000 + 300000, &ep, &gen));
	ck_assert_uint_eq(a.expirations, 1);
	ck_assert_uint_eq(a.used, 1);
	/* Refresh moves the deadline. */
	affinity_put(&a, 2, 2, 0, 200000);
	ck_assert(affinity_get(&a, 2, 450000, &ep, &gen));
	ck_assert_uint_eq(affinity_expire(&a, 600000, 10), 1);
	ck_assert_uint_eq(a.used, 0);
	affinity_finish(&a);
}
END_TEST

START_TEST(map_lru_eviction)
{
	struct affinity a;
	uint32_t ep, gen;
	ck_assert_int_eq(affinity_init(&a, 64, 300000), 0);
	for (uint64_t k = 0; k < 64; k++)
		affinity_put(&a, k, 0, 0, 100 + k);
	/* Touch 0 (a success refreshes it): now 1 is the least recent. */
	affinity_put(&a, 0, 0, 0, 200);
	affinity_put(&a, 1000, 0, 0, 201);
	ck_assert_uint_eq(a.used, 64);
	ck_assert_uint_eq(a.evictions, 1);
	ck_assert(affinity_get(&a, 0, 202, &ep, &gen));
	ck_assert(!affinity_get(&a, 1, 202, &ep, &gen));
	ck_assert(affinity_get(&a, 1000, 202, &ep, &gen));
	/* Churn through many more keys than fit: size stays, newest live. */
	for (uint64_t k = 5000; k < 50000; k++)
		affinity_put(&a, k * 0x9e3779b97f4a7c15ull, 1, 0, 300 + k);
	ck_assert_uint_eq(a.used, 64);
	for (uint64_t k = 50000 - 64; k < 50000; k++)
		ck_assert(affinity_get(&a, k * 0x9e3779b97f4a7c15ull, 60000, &ep, &gen));
	/* Oldest-first walk covers every entry in order. */
	uint32_t n = 0;
	uint64_t last = 0;
	for (uint32_t i = affinity_oldest(&a); i != AFFINITY_NIL; i = affinity_newer(&a, i)) {
		ck_assert_uint_ge(a.e[i].last_ms, last);
		last = a.e[i].last_ms;
		n++;
	}
	ck_assert_uint_eq(n, 64);
	affinity_finish(&a);
}
END_TEST

START_TEST(map_bytes_per_entry)
{
	struct affinity a;
	ck_assert_int_eq(affinity_init(&a, 1000000, 300000), 0);
	double b = AFFINITY_BYTES_PER_ENTRY(&a);
	ck_assert_double_le(b, 64);
	ck_assert_uint_le(sizeof(struct affinity_entry), 64);
	affinity_finish(&a);
}
END_TEST

START_TEST(map_random_ops_match_model)
{
	/* Against a plain array model: random puts, removes and gets. */
	enum { KEYS = 512, CAP = 4096 };
	static uint32_t model[KEYS];
	struct affinity a;
	uint32_t ep, gen;
	ck_assert_int_eq(affinity_init(&a, CAP, UINT64_MAX / 4), 0);
	memset(model, 0xff, sizeof(model));
	struct core_rng rng;
	core_rng_seed(&rng, 1);
	for (int i = 0; i < 200000; i++) {
		uint64_t r = core_rng_next(&rng);
		uint32_t k = (uint32_t)(r % KEYS);
		switch ((r >> 20) % 3) {
		case 0:
			affinity_put(&a, k, (uint32_t)i, 0, 1);
			model[k] = (uint32_t)i;
			break;
		case 1:
			ck_assert(affinity_remove(&a, k, AFFINITY_NIL) ==
				  (model[k] != UINT32_MAX));
			model[k] = UINT32_MAX;
			break;
		default:
			ck_assert(affinity_get(&a, k, 1, &ep, &gen) ==
				  (model[k] != UINT32_MAX));
			if (model[k] != UINT32_MAX)
				ck_assert_uint_eq(ep, model[k]);
		}
	}
	affinity_finish(&a);
}
END_TEST

/* ---- rendezvous ------------------------------------------------------------ */

START_TEST(fast_ln_accuracy)
{
	struct core_rng rng;
	core_rng_seed(&rng, 9);
	for (int i = 0; i < 100000; i++) {
		double u = ((double)(core_rng_next(&rng) >> 11) + 0.5) * 0x1.0p-53;
		double want = log(u), got = rdv_ln(u);
		ck_assert_double_le(fabs(got - want), 1e-12 * fabs(want) + 1e-14);
	}
	ck_assert_double_eq_tol(rdv_ln(1.0), 0, 1e-15);
	ck_assert_double_eq_tol(rdv_ln(0x1.0p-53), log(0x1.0p-53), 1e-9);
	ck_assert_double_eq_tol(rdv_ln(0.5), log(0.5), 1e-15);
}
END_TEST

START_TEST(rank_is_sorted_lazily)
{
	struct rdv_item items[100];
	struct core_rng rng;
	core_rng_seed(&rng, 5);
	for (uint32_t i = 0; i < 100; i++)
		items[i] = (struct rdv_item){
			(double)(core_rng_next(&rng) % 50), i };
	struct rdv_rank r;
	struct rdv_item it, prev = { -1, 0 };
	rdv_rank_init(&r, items, 100);
	int n = 0;
	while (rdv_rank_next(&r, &it) == 0) {
		ck_assert(it.cost > prev.cost ||
			  (it.cost == prev.cost && it.endpoint > prev.endpoint) || n == 0);
		prev = it;
		n++;
	}
	ck_assert_int_eq(n, 100);
	rdv_rank_init(&r, items, 0);
	ck_assert_int_eq(rdv_rank_next(&r, &it), -1);
}
END_TEST

START_TEST(rendezvous_weighted_shares)
{
	/* Weights 1, 2, 3, 4: shares 10%, 20%, 30%, 40%. */
	uint64_t seeds[4] = { 11, 22, 33, 44 };
	int n[4] = { 0 };
	for (uint64_t k = 0; k < 200000; k++) {
		int best = 0;
		double bc = INFINITY;
		for (int i = 0; i < 4; i++) {
			double c = rdv_cost(k, seeds[i], 1.0 / (i + 1));
			if (c < bc) {
				bc = c;
				best = i;
			}
		}
		n[best]++;
	}
	for (int i = 0; i < 4; i++)
		ck_assert_double_eq_tol(n[i] / 200000.0, (i + 1) / 10.0, 0.006);
	/* Pure function of its arguments. */
	ck_assert_double_eq(rdv_cost(123, 456, 0.5), rdv_cost(123, 456, 0.5));
	ck_assert_double_eq_tol(rdv_cost(123, 456, 0.5) * 2,
				rdv_cost(123, 456, 1.0), 1e-12);
}
END_TEST

/* ---- breaker ----------------------------------------------------------------- */

START_TEST(breaker_ratio_needs_min_requests)
{
	struct core_params p;
	struct breaker b;
	core_params_defaults(&p);
	breaker_init(&b, 0);
	/* F S F S: 50% but only 4 requests. */
	breaker_failure(&b, &p, 1);
	breaker_success(&b, &p, 2);
	breaker_failure(&b, &p, 3);
	breaker_success(&b, &p, 4);
	ck_assert_int_eq(b.state, CORE_BREAKER_CLOSED);
	breaker_failure(&b, &p, 5); /* 3 of 5 */
	ck_assert_int_eq(b.state, CORE_BREAKER_OPEN);
	uint64_t left;
	ck_assert_int_eq(breaker_state(&b, 5, &left), CORE_BREAKER_OPEN);
	ck_assert_uint_eq(left, p.breaker_cooldown_ms);
	/* Old outcomes age out of the window. */
	breaker_init(&b, 0);
	for (int i = 0; i < 4; i++)
		breaker_failure(&b, &p, 100);
	breaker_success(&b, &p, 100);
	ck_assert_int_eq(b.state, CORE_BREAKER_CLOSED); /* consecutive reset */
	breaker_failure(&b, &p, 100 + p.breaker_window_ms + 1000);
	ck_assert_int_eq(b.state, CORE_BREAKER_CLOSED);
	uint32_t ok, fail;
	breaker_counts(&b, &p, 100 + p.breaker_window_ms + 1000, &ok, &fail);
	ck_assert_uint_eq(ok, 0);
	ck_assert_uint_eq(fail, 1);
}
END_TEST

START_TEST(breaker_consecutive)
{
	struct core_params p;
	struct breaker b;
	core_params_defaults(&p);
	p.breaker_min_requests = 1000; /* only the run can open it */
	breaker_init(&b, 0);
	for (int i = 0; i < 20; i++)
		breaker_success(&b, &p, 10);
	for (int i = 0; i < 4; i++)
		breaker_failure(&b, &p, 10);
	ck_assert_int_eq(b.state, CORE_BREAKER_CLOSED);
	breaker_failure(&b, &p, 10);
	ck_assert_int_eq(b.state, CORE_BREAKER_OPEN);
}
END_TEST

START_TEST(breaker_cooldown_doubles_to_cap)
{
	struct core_params p;
	struct breaker b;
	core_params_defaults(&p);
	breaker_init(&b, 0);
	uint64_t now = 0, want = p.breaker_cooldown_ms;
	for (int i = 0; i < 5; i++)
		breaker_failure(&b, &p, now);
	for (int trip = 0; trip < 12; trip++) {
		uint64_t left;
		ck_assert_int_eq(breaker_state(&b, now, &left), CORE_BREAKER_OPEN);
		ck_assert_uint_eq(left, want);
		now += left;
		ck_assert_int_eq(breaker_admit(&b, &p, now), BREAKER_ADMIT_PROBE);
		breaker_routed(&b, now);
		breaker_failure(&b, &p, now);
		want = want * 2 > p.breaker_cooldown_max_ms ? p.breaker_cooldown_max_ms
							     : want * 2;
	}
	/* Recovery resets the doubling. */
	uint64_t left;
	breaker_state(&b, now, &left);
	now += left;
	for (unsigned i = 0; i < p.half_open_probes; i++) {
		ck_assert_int_eq(breaker_admit(&b, &p, now), BREAKER_ADMIT_PROBE);
		breaker_routed(&b, now);
	}
	ck_assert_int_eq(breaker_admit(&b, &p, now), BREAKER_ADMIT_NO);
	for (unsigned i = 0; i < p.half_open_probes; i++)
		breaker_success(&b, &p, now);
	ck_assert_int_eq(b.state, CORE_BREAKER_CLOSED);
	ck_assert_uint_eq(breaker_next_cooldown(&b, &p), p.breaker_cooldown_ms);
}
END_TEST

START_TEST(breaker_neutral_frees_probe)
{
	struct core_params p;
	struct breaker b;
	core_params_defaults(&p);
	breaker_init(&b, 0);
	breaker_rate_limited(&b, 1000, 0);
	for (unsigned i = 0; i < p.half_open_probes; i++) {
		ck_assert_int_eq(breaker_admit(&b, &p, 1000), BREAKER_ADMIT_PROBE);
		breaker_routed(&b, 1000);
	}
	ck_assert_int_eq(breaker_admit(&b, &p, 1000), BREAKER_ADMIT_NO);
	breaker_neutral(&b);
	ck_assert_int_eq(breaker_admit(&b, &p, 1000), BREAKER_ADMIT_PROBE);
}
END_TEST

/* ---- parsers ------------------------------------------------------------------ */

START_TEST(status_classes)
{
	ck_assert_int_eq(core_status_class(200), CORE_OUTCOME_SUCCESS);
	ck_assert_int_eq(core_status_class(204), CORE_OUTCOME_SUCCESS);
	ck_assert_int_eq(core_status_class(301), CORE_OUTCOME_SUCCESS);
	ck_assert_int_eq(core_status_class(400), CORE_OUTCOME_NEUTRAL);
	ck_assert_int_eq(core_status_class(404), CORE_OUTCOME_NEUTRAL);
	ck_assert_int_eq(core_status_class(499), CORE_OUTCOME_NEUTRAL);
	ck_assert_int_eq(core_status_class(401), CORE_OUTCOME_KEY_DEAD);
	ck_assert_int_eq(core_status_class(403), CORE_OUTCOME_KEY_DEAD);
	ck_assert_int_eq(core_status_class(408), CORE_OUTCOME_FAILURE);
	ck_assert_int_eq(core_status_class(429), CORE_OUTCOME_RATE_LIMITED);
	ck_assert_int_eq(core_status_class(500), CORE_OUTCOME_FAILURE);
	ck_assert_int_eq(core_status_class(502), CORE_OUTCOME_FAILURE);
	ck_assert_int_eq(core_status_class(503), CORE_OUTCOME_FAILURE);
	ck_assert_int_eq(core_status_class(504), CORE_OUTCOME_FAILURE);
	ck_assert_int_eq(core_status_class(599), CORE_OUTCOME_FAILURE);
	ck_assert_int_eq(core_status_class(0), CORE_OUTCOME_INVALID);
	ck_assert_int_eq(core_status_class(-1), CORE_OUTCOME_INVALID);
	ck_assert_int_eq(core_status_class(600), CORE_OUTCOME_INVALID);
}
END_TEST

START_TEST(tr_strings)
{
	int64_t ms = 7;
	ck_assert_int_eq(core_parse_tr(core_str_c("-1"), &ms), 0);
	ck_assert_int_eq(ms, -1);
	ck_assert_int_eq(core_parse_tr(core_str_c("0"), &ms), 0);
	ck_assert_int_eq(ms, 0);
	ck_assert_int_eq(core_parse_tr(core_str_c("1534"), &ms), 0);
	ck_assert_int_eq(ms, 1534);
	ck_assert_int_eq(core_parse_tr((struct core_str){ "12345", 3 }, &ms), 0);
	ck_assert_int_eq(ms, 123);
	ms = 7;
	static const char *const bad[] = { "", "-", "-2", "+1", " 1", "1 ", "1x",
					   "0x10", "1.5", "99999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(core_parse_tr(core_str_c(bad[i]), &ms), -EINVAL);
	ck_assert_int_eq(core_parse_tr((struct core_str){ NULL, 0 }, &ms), -EINVAL);
	ck_assert_int_eq(ms, 7);
}
END_TEST

START_TEST(retry_after_forms)
{
	/* 1994-11-06 08:49:37 UTC = 784111777. */
	const int64_t t = 784111777;
	int64_t ms = -5;
	ck_assert_int_eq(core_parse_retry_after(core_str_c("30"), t, &ms), 0);
	ck_assert_int_eq(ms, 30000);
	ck_assert_int_eq(core_parse_retry_after(core_str_c(" 0 "), t, &ms), 0);
	ck_assert_int_eq(ms, 0);
	ck_assert_int_eq(core_parse_retry_after(
		core_str_c("Sun, 06 Nov 1994 08:49:37 GMT"), t - 120, &ms), 0);
	ck_assert_int_eq(ms, 120000);
	ck_assert_int_eq(core_parse_retry_after(
		core_str_c("Sunday, 06-Nov-94 08:49:37 GMT"), t - 5, &ms), 0);
	ck_assert_int_eq(ms, 5000);
	ck_assert_int_eq(core_parse_retry_after(
		core_str_c("Sun Nov  6 08:49:37 1994"), t - 1, &ms), 0);
	ck_assert_int_eq(ms, 1000);
	/* In the past: no wait. */
	ck_assert_int_eq(core_parse_retry_after(
		core_str_c("Sun, 06 Nov 1994 08:49:37 GMT"), t + 100, &ms), 0);
	ck_assert_int_eq(ms, 0);
	/* Leap day, and a date in 2030. */
	ck_assert_int_eq(core_parse_retry_after(
		core_str_c("Thu, 29 Feb 2024 00:00:00 GMT"), 1709164800 - 60, &ms), 0);
	ck_assert_int_eq(ms, 60000);
	ck_assert_int_eq(core_parse_retry_after(
		core_str_c("Tue, 01 Jan 2030 00:00:10 GMT"), 1893456000, &ms), 0);
	ck_assert_int_eq(ms, 10000);
	ms = -5;
	static const char *const bad[] = {
		"", "  ", "-1", "1.5", "30s", "Sun, 06 Nov 1994 08:49:37 UTC",
		"Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
		"Sun, 30 Feb 1994 08:49:37 GMT", "Fri, 29 Feb 2023 00:00:00 GMT",
		"Sun, 06 Nov 1994 25:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMTx",
		"Sun Nov 6 08:49:37 1994", "Sunday, 06 Nov 1994 08:49:37 GMT",
		"Xyz, 06 Nov 1994 08:49:37 GMT", "99999999999999999999x",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(core_parse_retry_after(core_str_c(bad[i]), t, &ms) == -EINVAL,
			      "accepted \"%s\"", bad[i]);
	ck_assert_int_eq(ms, -5);
	/* Valid delay-seconds too large for int64 ms saturate (the core
	 * caps them), at every length past the limit; the largest that fits
	 * is exact. */
	ck_assert_int_eq(core_parse_retry_after(core_str_c("9223372036854775"), t, &ms), 0);
	ck_assert_int_eq(ms, INT64_C(9223372036854775000));
	static const char *const big[] = {
		"9223372036854776", "99999999999999999999",
		" 000000000000000000000000000000000000000000000000099999999999999999 ",
	};
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		ms = -5;
		ck_assert_int_eq(core_parse_retry_after(core_str_c(big[i]), t, &ms), 0);
		ck_assert_msg(ms == INT64_MAX, "%s: %lld", big[i], (long long)ms);
	}
	/* Leading zeros are not large. */
	ck_assert_int_eq(core_parse_retry_after(core_str_c("0000000000000000000000030"), t, &ms), 0);
	ck_assert_int_eq(ms, 30000);
}
END_TEST

START_TEST(rng_and_hash)
{
	struct core_rng a, b;
	core_rng_seed(&a, 0);
	core_rng_seed(&b, 0);
	uint64_t x = core_rng_next(&a);
	ck_assert_uint_eq(x, core_rng_next(&b));
	ck_assert_uint_ne(x, core_rng_next(&a));
	ck_assert_uint_eq(core_hash_bytes("abc", 3), core_hash_bytes("abcd", 3));
	ck_assert_uint_ne(core_hash_bytes("abc", 3), core_hash_bytes("abd", 3));
}
END_TEST

static Suite *parts_suite(void)
{
	Suite *s = suite_create("core");
	TCase *tc = tcase_create("map");
	tcase_add_test(tc, map_put_get_remove);
	tcase_add_test(tc, map_ttl_expiry);
	tcase_add_test(tc, map_lru_eviction);
	tcase_add_test(tc, map_bytes_per_entry);
	tcase_add_test(tc, map_random_ops_match_model);
	suite_add_tcase(s, tc);

	tc = tcase_create("rendezvous");
	tcase_add_test(tc, fast_ln_accuracy);
	tcase_add_test(tc, rank_is_sorted_lazily);
	tcase_add_test(tc, rendezvous_weighted_shares);
	suite_add_tcase(s, tc);

	tc = tcase_create("breaker");
	tcase_add_test(tc, breaker_ratio_needs_min_requests);
	tcase_add_test(tc, breaker_consecutive);
	tcase_add_test(tc, breaker_cooldown_doubles_to_cap);
	tcase_add_test(tc, breaker_neutral_frees_probe);
	suite_add_tcase(s, tc);

	tc = tcase_create("parse");
	tcase_add_test(tc, status_classes);
	tcase_add_test(tc, tr_strings);
	tcase_add_test(tc, retry_after_forms);
	tcase_add_test(tc, rng_and_hash);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(parts_suite());
	int failed;

	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
