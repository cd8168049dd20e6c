/* test_metrics_text.c - agent: the Prometheus text writer on its own (golden lines, label escaping, growth, out of memory). */
#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_text.h"

/* t holds exactly want, NUL-terminated. */
static void text_is(const struct metrics_text *t, const char *want)
{
	ck_assert(!t->oom);
	ck_assert_uint_eq(t->len, strlen(want));
	ck_assert_ptr_nonnull(t->p);
	ck_assert_str_eq(t->p, want);
}

START_TEST(zeroed_is_empty)
{
	struct metrics_text t = { 0 };
	metrics_text_finish(&t);
	ck_assert_ptr_null(t.p);
	ck_assert_uint_eq(t.len, 0);
	metrics_text_put(&t, "", 0);
	text_is(&t, "");
	metrics_text_finish(&t);
	ck_assert_ptr_null(t.p);
	ck_assert_uint_eq(t.cap, 0);
}
END_TEST

/* Label values as the text format 0.0.4 wants them: only backslash,
 * double quote and line feed escaped, every other byte kept. */
static const char *const label_golden[][2] = {
	{ "", "\"\"" },
	{ "gpu1", "\"gpu1\"" },
	{ "k\"1\\", "\"k\\\"1\\\\\"" },
	{ "\"", "\"\\\"\"" },
	{ "\\", "\"\\\\\"" },
	{ "\n", "\"\\n\"" },
	{ "a\nb\nc", "\"a\\nb\\nc\"" },
	{ "\\\\\"\"\n\n", "\"\\\\\\\\\\\"\\\"\\n\\n\"" },
	{ "tab\there\rcr {x=\"y\"}", "\"tab\there\rcr {x=\\\"y\\\"}\"" },
	{ "caf\xc3\xa9 \xff", "\"caf\xc3\xa9 \xff\"" },
};

START_TEST(label_escaping)
{
	for (size_t i = 0; i < sizeof(label_golden) / sizeof(label_golden[0]); i++) {
		struct metrics_text t = { 0 };
		metrics_text_label_value(&t, label_golden[i][0]);
		text_is(&t, label_golden[i][1]);
		metrics_text_finish(&t);
	}
}
END_TEST

START_TEST(family_and_samples)
{
	struct metrics_text t = { 0 };
	metrics_text_family(&t, "warmlane_x_total", "counter", "Things, by kind.");
	metrics_text_u64(&t, "warmlane_x_total", 0);
	metrics_text_u64(&t, "warmlane_x_total", UINT64_MAX);
	metrics_text_u64_label(&t, "warmlane_x_total", "kind", "a\"b", 42);
	metrics_text_histogram_end(&t, "warmlane_h_seconds", 7, 0.0123456789012,
				   7);
	metrics_text_puts(&t, "raw ");
	metrics_text_printf(&t, "%s=%.4f\n", "r", 0.5);
	text_is(&t,
		"# HELP warmlane_x_total Things, by kind.\n"
		"# TYPE warmlane_x_total counter\n"
		"warmlane_x_total 0\n"
		"warmlane_x_total 18446744073709551615\n"
		"warmlane_x_total{kind=\"a\\\"b\"} 42\n"
		"warmlane_h_seconds_bucket{le=\"+Inf\"} 7\n"
		"warmlane_h_seconds_sum 0.0123456789\n"
		"warmlane_h_seconds_count 7\n"
		"raw r=0.5000\n");
	metrics_text_finish(&t);
}
END_TEST

/* A line longer than printf's stack buffer, and a text that outgrows the
 * first allocation several times over, come out whole. */
START_TEST(long_lines_and_growth)
{
	static char help[3000], want[200000];
	memset(help, 'h', sizeof(help) - 1);
	struct metrics_text t = { 0 };
	metrics_text_family(&t, "n", "gauge", help);
	size_t w = (size_t)snprintf(want, sizeof(want),
				    "# HELP n %s\n# TYPE n gauge\n", help);
	for (unsigned i = 0; i < 5000; i++) {
		metrics_text_u64_label(&t, "warmlane_s", "i", "v", i);
		w += (size_t)snprintf(want + w, sizeof(want) - w,
				      "warmlane_s{i=\"v\"} %u\n", i);
	}
	ck_assert_uint_lt(w, sizeof(want) - 1);
	text_is(&t, want);
	ck_assert_uint_gt(t.cap, t.len);
	metrics_text_finish(&t);
}
END_TEST

/* A size no allocation can meet sets oom, keeps what was written, and
 * makes every later append a no-op. */
START_TEST(oom_sticks)
{
	struct metrics_text t = { 0 };
	metrics_text_puts(&t, "kept\n");
	metrics_text_put(&t, "x", SIZE_MAX - 8);
	ck_assert(t.oom);
	ck_assert_uint_eq(t.len, 5);
	ck_assert_str_eq(t.p, "kept\n");
	metrics_text_puts(&t, "more");
	metrics_text_printf(&t, "%d", 1);
	metrics_text_label_value(&t, "v");
	metrics_text_family(&t, "n", "gauge", "h");
	metrics_text_u64(&t, "n", 1);
	ck_assert_uint_eq(t.len, 5);
	ck_assert_str_eq(t.p, "kept\n");
	metrics_text_finish(&t);
	ck_assert(!t.oom);
	ck_assert_ptr_null(t.p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent-metrics-text");
	TCase *tc = tcase_create("metrics_text");
	const TTest *const tests[] = { zeroed_is_empty, label_escaping,
		family_and_samples, long_lines_and_growth, oom_sticks };
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		tcase_add_test(tc, tests[i]);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
