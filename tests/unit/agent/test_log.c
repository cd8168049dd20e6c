/* test_log.c - agent: the log lines (logfmt, quoting, levels) and the per-site limiter of repeated warnings. */
#include <check.h>
#include <stdio.h>
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

/* log_quote, log_level_parse and the logfmt line log_info/log_warn write. */
START_TEST(log_format)
{
	char q[64];
	ck_assert_str_eq(log_quote(q, sizeof(q), "plain", 5), "plain");
	ck_assert_str_eq(log_quote(q, sizeof(q), "", 0), "\"\"");
	ck_assert_str_eq(log_quote(q, sizeof(q), "a b", 3), "\"a b\"");
	ck_assert_str_eq(log_quote(q, sizeof(q), "k=v", 3), "\"k=v\"");
	ck_assert_str_eq(log_quote(q, sizeof(q), "say \"hi\"\n", 9),
			 "\"say \\\"hi\\\"\\n\"");
	ck_assert_str_eq(log_quote(q, sizeof(q), "\x01", 1), "\"\\x01\"");
	char lng[200];
	memset(lng, 'x', sizeof(lng));
	lng[0] = ' ';
	const char *t = log_quote(q, 16, lng, sizeof(lng));
	ck_assert_uint_le(strlen(t), 15);
	ck_assert(strstr(t, "...\"") != NULL);

	enum log_level l;
	ck_assert_int_eq(log_level_parse("debug", &l), 0);
	ck_assert_int_eq(l, LOG_LEVEL_DEBUG);
	ck_assert_int_lt(log_level_parse("DEBUG", &l), 0);
	ck_assert_int_lt(log_level_parse("warning", &l), 0);

	FILE *f = tmpfile();
	ck_assert_ptr_nonnull(f);
	log_set_stream(f);
	log_set_level(LOG_LEVEL_INFO);
	log_debug("hidden", "x=%d", 1);
	log_info("hello world", "conn=%d addr=%s", 7, "unix:/a");
	log_warn("bare", NULL);
	log_set_stream(NULL);
	rewind(f);
	char line[512];
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert_msg(strncmp(line, "ts=", 3) == 0, "%s", line);
	ck_assert(strstr(line, "Z level=info msg=\"hello world\" conn=7 addr=unix:/a\n") != NULL);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert(strstr(line, " level=warn msg=bare\n") != NULL);
	ck_assert_ptr_null(fgets(line, sizeof(line), f));
	fclose(f);
}
END_TEST

static Suite *log_suite(void)
{
	Suite *s = suite_create("agent-log");
	TCase *tc = tcase_create("log");
	tcase_add_test(tc, limit_first_then_one_per_interval);
	tcase_add_test(tc, limit_clock_edges);
	tcase_add_test(tc, log_format);
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
