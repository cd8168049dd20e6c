/* test_parse.c - core: the feedback parsers (core_parse.c): status classes, Tr, Retry-After; the RNG and hash. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "core.h"
#include "../run.h"

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

int main(void)
{
	const TTest *const tests[] = {
		status_classes, tr_strings, retry_after_forms, rng_and_hash
	};

	return unit_run(unit_suite("core-parse", "parse", tests,
				   sizeof(tests) / sizeof(tests[0])));
}
