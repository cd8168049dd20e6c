/* test_stats.c - agent: the counters' label tables (status codes, frame names). */
#include <check.h>

#include "stats.h"
#include "../run.h"

START_TEST(stats_labels)
{
	ck_assert_uint_eq(stats_status_index(0), 0);
	ck_assert_uint_eq(stats_status_index(13), 13);
	ck_assert_uint_eq(stats_status_index(99), STATS_STATUS_COUNT - 1);
	ck_assert_uint_eq(stats_status_index(12345), STATS_STATUS_COUNT - 1);
	ck_assert_uint_eq(stats_status_code(STATS_STATUS_COUNT - 1), 99);
	ck_assert_str_eq(stats_frame_name(STATS_FRAME_NOTIFY), "NOTIFY");
	ck_assert_str_eq(stats_frame_name(STATS_FRAME_ACK), "ACK");
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { stats_labels };

	return unit_run(unit_suite("agent-stats", "labels", tests,
				   sizeof(tests) / sizeof(tests[0])));
}
