/* test_names.c - core: every enum-to-name table (names.h) complete, distinct, and its out-of-range fallback. */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "names.h"
#include "params.h"
#include "trace.h"
#include "../run.h"

/* One core_*_name over all of its values as an unsigned. */
struct table {
	const char *what;
	const char *(*name)(unsigned v);
	unsigned count;
	const char *none;
};

#define WRAP(fn, type) \
	static const char *fn##_u(unsigned v) { return fn((type)v); }
WRAP(core_hint_name, enum core_hint_use)
WRAP(core_reason_name, enum core_reason)
WRAP(core_outcome_name, enum core_outcome)
WRAP(core_probe_name, enum core_probe)
WRAP(core_end_name, enum core_end)
WRAP(core_breaker_name, enum core_breaker)
WRAP(core_admin_name, enum core_admin)
WRAP(core_speed_name, enum core_speed)
WRAP(core_trace_excl_name, enum core_trace_excl)
WRAP(core_rung_name, enum core_rung)
WRAP(core_score_by_name, enum core_score_by)
WRAP(core_session_scope_name, enum core_session_scope)

static const struct table tables[] = {
	{ "hint", core_hint_name_u, CORE_HINT_COUNT, "unknown" },
	{ "reason", core_reason_name_u, CORE_REASON_COUNT, "unknown" },
	{ "outcome", core_outcome_name_u, CORE_OUTCOME_COUNT, "unknown" },
	{ "probe", core_probe_name_u, CORE_PROBE_COUNT, "unknown" },
	{ "end", core_end_name_u, CORE_END_COUNT, "unknown" },
	{ "breaker", core_breaker_name_u, CORE_BREAKER_COUNT, "unknown" },
	{ "admin", core_admin_name_u, CORE_ADMIN_COUNT, "unknown" },
	{ "speed", core_speed_name_u, CORE_SPEED_COUNT, "unknown" },
	{ "trace_excl", core_trace_excl_name_u, CORE_TRACE_EXCL_COUNT, "unknown" },
	{ "rung", core_rung_name_u, CORE_RUNG_COUNT, NULL },
	{ "score_by", core_score_by_name_u, CORE_SCORE_COUNT, NULL },
	{ "session_scope", core_session_scope_name_u, CORE_SESSION_SCOPE_COUNT, NULL },
};

static bool same(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Each value has its own name: a value added to an enum without a name
 * would be "unknown" (or NULL) in /metrics and the config. */
START_TEST(every_value_named_once)
{
	const struct table *t = &tables[_i];
	for (unsigned v = 0; v < t->count; v++) {
		const char *n = t->name(v);
		ck_assert_msg(n != NULL && *n != '\0' && !same(n, "unknown"),
			      "%s %u has no name", t->what, v);
		for (unsigned w = 0; w < v; w++)
			ck_assert_msg(!same(n, t->name(w)), "%s %u and %u both %s",
				      t->what, w, v, n);
	}
}
END_TEST

START_TEST(out_of_range_is_the_fallback)
{
	const struct table *t = &tables[_i];
	ck_assert(same(t->name(t->count), t->none));
	ck_assert(same(t->name(t->count + 7), t->none));
	ck_assert(same(t->name((unsigned)-1), t->none));
}
END_TEST

START_TEST(names_get_skips_gaps)
{
	static const char *const gappy[4] = { [0] = "a", [2] = "c" };
	ck_assert_str_eq(NAMES_GET(gappy, 0, "?"), "a");
	ck_assert_str_eq(NAMES_GET(gappy, 1, "?"), "?");
	ck_assert_str_eq(NAMES_GET(gappy, 2, "?"), "c");
	ck_assert_str_eq(NAMES_GET(gappy, 3, "?"), "?");
	ck_assert_str_eq(NAMES_GET(gappy, 4, "?"), "?");
	ck_assert_ptr_null(NAMES_GET(gappy, 1, NULL));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("core-names");
	TCase *tc = tcase_create("names");
	int n = (int)(sizeof(tables) / sizeof(tables[0]));
	tcase_add_loop_test(tc, every_value_named_once, 0, n);
	tcase_add_loop_test(tc, out_of_range_is_the_fallback, 0, n);
	tcase_add_test(tc, names_get_skips_gaps);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
