/* run.h - unit tests: one main() for every check suite (run it, report, exit status). */
#ifndef WARMLANE_TEST_RUN_H
#define WARMLANE_TEST_RUN_H

#include <check.h>
#include <stddef.h>
#include <stdlib.h>

/* Runs s (CK_SILENT: the TAP log is the report) and frees it; EXIT_SUCCESS
 * when no test failed. */
static inline int unit_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* A suite of one test case holding the n tests t, in order. */
static inline Suite *unit_suite(const char *suite, const char *tcase,
				const TTest *const *t, size_t n)
{
	Suite *s = suite_create(suite);
	TCase *tc = tcase_create(tcase);

	for (size_t i = 0; i < n; i++)
		tcase_add_test(tc, t[i]);
	suite_add_tcase(s, tc);
	return s;
}

#endif
