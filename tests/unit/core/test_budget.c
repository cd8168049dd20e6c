/* test_budget.c - core: the retry budget's window arithmetic on a fake clock. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "budget.h"

static const struct budget_params P = {
	.ratio = 0.2, .min_per_s = 1.0, .window_ms = 10000,
};

static void record_n(struct budget *b, const struct budget_params *p,
		     unsigned n, uint32_t retries, uint64_t now_ms)
{
	for (unsigned i = 0; i < n; i++)
		budget_record(b, p, retries, now_ms);
}

START_TEST(floor_alone_lets_a_quiet_pool_retry)
{
	struct budget b;
	budget_init(&b, 0);
	/* No traffic: 1/s over 10 s is 10 retries. */
	ck_assert(!budget_spent(&b, &P, 0));
	ck_assert_double_eq_tol(budget_allowance(&P, 0), 10.0, 1e-9);
	/* 9 requests that each took one retry: 9 retries against 10 + 1.8. */
	record_n(&b, &P, 9, 1, 100);
	ck_assert(!budget_spent(&b, &P, 100));
	/* 3 more: 12 retries against 10 + 2.4 = 12.4. */
	record_n(&b, &P, 3, 1, 200);
	ck_assert(!budget_spent(&b, &P, 200));
	/* 13 against 12.6: spent. */
	record_n(&b, &P, 1, 1, 300);
	ck_assert(budget_spent(&b, &P, 300));
}
END_TEST

START_TEST(ratio_of_first_attempts)
{
	struct budget b;
	struct budget_params p = { .ratio = 0.2, .min_per_s = 0, .window_ms = 10000 };
	uint64_t f, r;
	budget_init(&b, 0);
	/* 100 first attempts, 19 retries: 19 < 20. */
	record_n(&b, &p, 81, 0, 10);
	record_n(&b, &p, 19, 1, 20);
	budget_counts(&b, &p, 30, &f, &r);
	ck_assert_uint_eq(f, 100);
	ck_assert_uint_eq(r, 19);
	ck_assert(!budget_spent(&b, &p, 30));
	/* One request of 2 retries: 101 first, 21 retries > 20.2. */
	budget_record(&b, &p, 2, 40);
	ck_assert(budget_spent(&b, &p, 40));
	/* Each request that needed no retry adds 0.2: 5 of them bring the
	 * allowance to 21.2 > 21. */
	record_n(&b, &p, 4, 0, 50);
	ck_assert(budget_spent(&b, &p, 50));
	budget_record(&b, &p, 0, 60);
	ck_assert(!budget_spent(&b, &p, 60));
}
END_TEST

/* Counts age out after the window, at most one bucket (1 s) late. */
START_TEST(counts_age_out_with_the_window)
{
	struct budget b;
	struct budget_params p = { .ratio = 0.2, .min_per_s = 0.1, .window_ms = 10000 };
	uint64_t f, r;
	budget_init(&b, 0);
	record_n(&b, &p, 10, 2, 500); /* 20 retries against 2 + 1: spent */
	ck_assert(budget_spent(&b, &p, 500));
	budget_counts(&b, &p, 9999, &f, &r);
	ck_assert_uint_eq(f, 10);
	ck_assert_uint_eq(r, 20);
	ck_assert(budget_spent(&b, &p, 9999));
	/* The bucket [0, 1000) leaves when the newest starts at 10000. */
	budget_counts(&b, &p, 10000, &f, &r);
	ck_assert_uint_eq(f, 0);
	ck_assert_uint_eq(r, 0);
	ck_assert(!budget_spent(&b, &p, 10000)); /* 0 retries against 1 */
}
END_TEST

START_TEST(sliding_not_tumbling)
{
	struct budget b;
	struct budget_params p = { .ratio = 0.5, .min_per_s = 0, .window_ms = 10000 };
	uint64_t f, r;
	budget_init(&b, 0);
	/* One request per second, t = 0.5 s, 1.5 s, ... 19.5 s, each with
	 * one retry in the first half: the window always holds the last 10. */
	for (unsigned s = 0; s < 20; s++)
		budget_record(&b, &p, s < 10 ? 1 : 0, s * 1000 + 500);
	budget_counts(&b, &p, 19500, &f, &r);
	ck_assert_uint_eq(f, 10);
	ck_assert_uint_eq(r, 0);
	budget_counts(&b, &p, 14500, &f, &r); /* later than above: no rewind */
	ck_assert_uint_eq(f, 10);
	budget_init(&b, 0);
	for (unsigned s = 0; s < 15; s++)
		budget_record(&b, &p, s < 10 ? 1 : 0, s * 1000 + 500);
	/* At 14.5 s: the requests of 5.5 s to 14.5 s, 5 of them retried. */
	budget_counts(&b, &p, 14500, &f, &r);
	ck_assert_uint_eq(f, 10);
	ck_assert_uint_eq(r, 5);
	ck_assert(budget_spent(&b, &p, 14500)); /* 5 >= 0.5 x 10 */
	budget_record(&b, &p, 0, 14600);
	ck_assert(!budget_spent(&b, &p, 14600)); /* 5 < 5.5 */
}
END_TEST

START_TEST(long_gap_clears_everything)
{
	struct budget b;
	uint64_t f, r;
	budget_init(&b, 1000);
	record_n(&b, &P, 50, 3, 1200);
	ck_assert(budget_spent(&b, &P, 1200));
	budget_counts(&b, &P, 1000 + 3600 * 1000, &f, &r);
	ck_assert_uint_eq(f, 0);
	ck_assert_uint_eq(r, 0);
	ck_assert(!budget_spent(&b, &P, 1000 + 3600 * 1000));
	/* Recording goes on from the new bucket. */
	budget_record(&b, &P, 1, 1000 + 3600 * 1000 + 5);
	budget_counts(&b, &P, 1000 + 3600 * 1000 + 5, &f, &r);
	ck_assert_uint_eq(f, 1);
	ck_assert_uint_eq(r, 1);
}
END_TEST

START_TEST(zero_allowance_is_always_spent)
{
	struct budget b;
	struct budget_params p = { .ratio = 0, .min_per_s = 0, .window_ms = 10000 };
	budget_init(&b, 0);
	ck_assert(budget_spent(&b, &p, 0));
	record_n(&b, &p, 1000, 0, 10);
	ck_assert(budget_spent(&b, &p, 10));
}
END_TEST

START_TEST(counts_saturate)
{
	struct budget b;
	uint64_t f, r;
	budget_init(&b, 0);
	budget_record(&b, &P, UINT32_MAX - 1, 0);
	budget_record(&b, &P, UINT32_MAX, 0);
	budget_counts(&b, &P, 0, &f, &r);
	ck_assert_uint_eq(f, 2);
	ck_assert_uint_eq(r, UINT32_MAX);
	ck_assert(budget_spent(&b, &P, 0));
}
END_TEST

/* A clock that goes back (never from uv_now, but the contract says what
 * happens): counted in the newest bucket, nothing lost. */
START_TEST(earlier_time_counts_in_the_newest_bucket)
{
	struct budget b;
	uint64_t f, r;
	budget_init(&b, 5000);
	budget_record(&b, &P, 1, 4000);
	budget_record(&b, &P, 1, 5000);
	budget_counts(&b, &P, 5000, &f, &r);
	ck_assert_uint_eq(f, 2);
	ck_assert_uint_eq(r, 2);
}
END_TEST

/* A reload that shortens the window: the buckets become narrower from
 * then on; what is older than the new window leaves at the next advance. */
START_TEST(reload_changes_the_window)
{
	struct budget b;
	struct budget_params shorter = P;
	uint64_t f, r;
	shorter.window_ms = 2000;
	budget_init(&b, 0);
	record_n(&b, &P, 10, 1, 500);
	budget_counts(&b, &shorter, 1999, &f, &r);
	ck_assert_uint_eq(f, 10); /* 1999 ms: under ten 200 ms buckets */
	budget_counts(&b, &shorter, 2000, &f, &r);
	ck_assert_uint_eq(f, 0);
	ck_assert_double_eq_tol(budget_allowance(&shorter, 0), 2.0, 1e-9);
	/* A window under BUDGET_BUCKETS ms still advances (1 ms buckets). */
	struct budget_params tiny = { .ratio = 0, .min_per_s = 0, .window_ms = 1 };
	budget_init(&b, 0);
	budget_record(&b, &tiny, 0, 0);
	budget_counts(&b, &tiny, 10, &f, &r);
	ck_assert_uint_eq(f, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("core-budget");
	TCase *tc = tcase_create("window");
	tcase_add_test(tc, floor_alone_lets_a_quiet_pool_retry);
	tcase_add_test(tc, ratio_of_first_attempts);
	tcase_add_test(tc, counts_age_out_with_the_window);
	tcase_add_test(tc, sliding_not_tumbling);
	tcase_add_test(tc, long_gap_clears_everything);
	tcase_add_test(tc, zero_allowance_is_always_spent);
	tcase_add_test(tc, counts_saturate);
	tcase_add_test(tc, earlier_time_counts_in_the_newest_bucket);
	tcase_add_test(tc, reload_changes_the_window);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
