/* test_log.c - agent: the per-site limiter of repeated warning lines. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

START_TEST(limit_first_then_one_per_interval)
{
	struct log_limit l = LOG_LIMIT_INIT(1000);
	uint64_t held = 99;
	ck_assert(log_limit_allow(&l, 50, &held)); /* the first, at once */
	ck_assert_uint_eq(held, 0);
	for (uint64_t t = 51; t < 1050; t++)
		ck_assert(!log_limit_allow(&l, t, &held));
	ck_assert_uint_eq(held, 0); /* untouched while held back */
	ck_assert(log_limit_allow(&l, 1050, &held)); /* a full interval on */
	ck_assert_uint_eq(held, 999);
	ck_assert(!log_limit_allow(&l, 1051, &held));
	/* A quiet spell: the next one goes out at once, with its count. */
	ck_assert(log_limit_allow(&l, 100000, &held));
	ck_assert_uint_eq(held, 1);
	ck_assert(log_limit_allow(&l, 200000, &held));
	ck_assert_uint_eq(held, 0);
}
END_TEST

/* Time 0 is a time like any other (a fresh loop's uv_now can be small),
 * and a clock behind the last line's does not silence the site. */
START_TEST(limit_clock_edges)
{
	struct log_limit l = LOG_LIMIT_INIT(1000);
	uint64_t held;
	ck_assert(log_limit_allow(&l, 0, &held));
	ck_assert(!log_limit_allow(&l, 0, &held));
	ck_assert(!log_limit_allow(&l, 999, &held));
	ck_assert(log_limit_allow(&l, 1000, &held));
	ck_assert_uint_eq(held, 2);
	ck_assert(log_limit_allow(&l, 10, &held)); /* behind: written */
	ck_assert_uint_eq(held, 0);
}
END_TEST

static Suite *log_suite(void)
{
	Suite *s = suite_create("agent-log");
	TCase *tc = tcase_create("log");
	tcase_add_test(tc, limit_first_then_one_per_interval);
	tcase_add_test(tc, limit_clock_edges);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(log_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
