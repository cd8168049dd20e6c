/* test_config_errs.c - agent: the configuration's problem lines and value positions (config_errs.c, config_pos.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_errs.h"
#include "config_pos.h"

/* Lines come out in file order whatever order they came in, those
 * without a position first, equal positions in arrival order. */
START_TEST(errs_file_order)
{
	char buf[256];
	struct config_errs e;
	config_errs_init(&e, buf, sizeof(buf));
	config_errs_add_at(&e, 3, 1, "c:%u", 3u);
	config_errs_add_at(&e, 1, 5, "b");
	config_errs_add_at(&e, 3, 1, "d");
	config_errs_add(&e, "a");
	config_errs_add_at(&e, 1, 2, "ab");
	ck_assert_uint_eq(e.count, 5);
	config_errs_flush(&e);
	ck_assert_str_eq(buf, "a\nab\nb\nc:3\nd\n");
	ck_assert_uint_eq(e.count, 5);
}
END_TEST

/* A value from the file cannot split one problem over two lines. */
START_TEST(errs_one_line_each)
{
	char buf[64];
	struct config_errs e;
	config_errs_init(&e, buf, sizeof(buf));
	config_errs_add_at(&e, 1, 1, "x: \"%s\"", "a\nb\rc\x7f" "d");
	config_errs_flush(&e);
	ck_assert_str_eq(buf, "x: \"a?b?c?d\"\n");
}
END_TEST

/* A full buffer ends with the line saying so; a zero-sized one counts. */
START_TEST(errs_bounded)
{
	char buf[48];
	struct config_errs e;
	config_errs_init(&e, buf, sizeof(buf));
	for (unsigned i = 0; i < 10; i++)
		config_errs_add_at(&e, i + 1, 1, "line %u", i);
	config_errs_flush(&e);
	ck_assert_str_eq(buf, "line 0\nline 1\nline 2\n(more errors not shown)\n");
	ck_assert_uint_eq(e.count, 10);

	config_errs_init(&e, NULL, 0);
	config_errs_add(&e, "lost");
	ck_assert_uint_eq(e.count, 1);
	config_errs_flush(&e);

	config_errs_init(&e, buf, sizeof(buf));
	config_errs_add(&e, "dropped");
	config_errs_clear(&e);
	ck_assert_uint_eq(e.count, 0);
	config_errs_add(&e, "kept");
	config_errs_flush(&e);
	ck_assert_str_eq(buf, "kept\n");
}
END_TEST

static void add(struct config_pos_table *t, const char *path, unsigned line,
		unsigned col, bool bad)
{
	ck_assert_int_eq(config_pos_add(t, path, strlen(path), line, col, bad),
			 0);
}

/* A path the file does not have is found at its nearest enclosing one. */
START_TEST(pos_nearest_enclosing)
{
	struct config_pos_table t = { 0 };
	ck_assert_ptr_null(config_pos_find(&t, "policy"));
	add(&t, "policy", 1, 1, false);
	add(&t, "policy.ewma_alpha", 2, 15, true);
	add(&t, "endpoints", 3, 1, false);
	add(&t, "endpoints[0]", 4, 5, false);
	add(&t, "endpoints[0].keys[1]", 6, 9, false);
	/* Enough entries and paths to move both arrays more than once. */
	char path[32];
	for (unsigned i = 0; i < 500; i++) {
		snprintf(path, sizeof(path), "backends[%u].name", i);
		add(&t, path, 100 + i, 3, false);
	}
	config_pos_sort(&t);

	const struct config_pos *p = config_pos_find(&t, "policy.ewma_alpha");
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(p->line, 2);
	ck_assert_uint_eq(p->col, 15);
	ck_assert(p->bad);
	p = config_pos_find(&t, "policy.bogus");
	ck_assert_uint_eq(p->line, 1);
	ck_assert(!p->bad);
	p = config_pos_find(&t, "endpoints[0].weight");
	ck_assert_uint_eq(p->line, 4);
	p = config_pos_find(&t, "endpoints[0].keys[1]");
	ck_assert_uint_eq(p->line, 6);
	p = config_pos_find(&t, "endpoints[2].server");
	ck_assert_uint_eq(p->line, 3);
	p = config_pos_find(&t, "backends[499].name");
	ck_assert_uint_eq(p->line, 599);
	ck_assert_ptr_null(config_pos_find(&t, "state.file"));
	config_pos_finish(&t);
	ck_assert_ptr_null(config_pos_find(&t, "policy"));
}
END_TEST

static Suite *config_errs_suite(void)
{
	Suite *s = suite_create("agent-config-errs");
	TCase *tc = tcase_create("config_errs");
	tcase_add_test(tc, errs_file_order);
	tcase_add_test(tc, errs_one_line_each);
	tcase_add_test(tc, errs_bounded);
	tcase_add_test(tc, pos_nearest_enclosing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_errs_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
