/* test_hot.c - core: the hot keys' table (hot.c): a large share keeps its
 * place against rare keys, shares decay, peek says what note returns,
 * a tick counts in the total only. */
#include <check.h>
#include <stdlib.h>

#include "hot.h"

START_TEST(hot_share_of_a_large_key)
{
	/* One key in 3 decisions among 3,000 keys seen once or twice each,
	 * 10 ms apart: the rare ones collide with it all the time (256
	 * places), and it keeps its place and a share near a third. */
	struct hot h;
	hot_init(&h, 0);
	uint64_t now = 1000;
	double share = 0;
	for (int i = 0; i < 6000; i++, now += 10) {
		if (i % 3 == 0)
			share = hot_note(&h, 42, now);
		else
			hot_note(&h, 1000 + (uint64_t)(i % 3000), now);
	}
	ck_assert_double_gt(share, 0.30);
	ck_assert_double_lt(share, 0.36);
	/* a rare key's share is small, or 0 where another holds its place */
	ck_assert_double_lt(hot_peek(&h, 1000 + 5, now), 0.01);
}
END_TEST

START_TEST(hot_share_decays)
{
	/* The key stops; the others go on: after 5 half-lives its share is
	 * under 1/32 of what it was, whatever its place. */
	struct hot h;
	hot_init(&h, 0);
	uint64_t now = 1000;
	for (int i = 0; i < 600; i++, now += 100)
		hot_note(&h, i % 2 ? 42 : 7 + (uint64_t)i, now);
	double before = hot_peek(&h, 42, now);
	ck_assert_double_gt(before, 0.4);
	for (uint64_t end = now + 5 * HOT_HALF_LIFE_MS; now < end; now += 100)
		hot_note(&h, 100000 + now, now);
	ck_assert_double_lt(hot_peek(&h, 42, now), before / 32);
}
END_TEST

START_TEST(hot_peek_is_the_next_note)
{
	/* peek changes nothing and gives what note then returns: for the
	 * holder, a key that collides with it, and after a pause long enough
	 * for the clock's epoch to move (40 half-lives: every count
	 * rescaled). */
	struct hot h;
	hot_init(&h, 0);
	uint64_t now = 1000;
	for (int i = 0; i < 50; i++, now += 7)
		hot_note(&h, 42, now);
	uint64_t other = 43;
	while (other < 100000) {
		struct hot g = h;
		if (hot_note(&g, other, now) == 0)
			break; /* collides with 42, which keeps its place */
		other++;
	}
	ck_assert_uint_lt(other, 100000);
	uint64_t times[] = { now, now + 5, now + 41 * (uint64_t)HOT_HALF_LIFE_MS };
	uint64_t keys[] = { 42, other, 9 };
	for (unsigned t = 0; t < 3; t++)
		for (unsigned k = 0; k < 3; k++) {
			struct hot g = h;
			double p = hot_peek(&g, keys[k], times[t]);
			ck_assert_mem_eq(&g, &h, sizeof(h));
			ck_assert_double_eq(p, hot_note(&g, keys[k], times[t]));
		}
}
END_TEST

START_TEST(hot_tick_counts_in_the_total_only)
{
	/* A decision of no key of interest (a session's) halves the share
	 * of a key that had all of them, and takes no place from it. */
	struct hot h;
	hot_init(&h, 0);
	double alone = 0;
	for (int i = 0; i < 50; i++)
		alone = hot_note(&h, 42, 1000);
	ck_assert_double_eq_tol(alone, 1.0, 1e-9);
	for (int i = 0; i < 50; i++)
		hot_tick(&h, 1000);
	ck_assert_double_eq_tol(hot_peek(&h, 42, 1000), 51.0 / 101.0, 1e-9);
}
END_TEST

static Suite *hot_suite(void)
{
	Suite *s = suite_create("hot");
	TCase *tc = tcase_create("hot");
	tcase_add_test(tc, hot_share_of_a_large_key);
	tcase_add_test(tc, hot_share_decays);
	tcase_add_test(tc, hot_peek_is_the_next_note);
	tcase_add_test(tc, hot_tick_counts_in_the_total_only);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hot_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
