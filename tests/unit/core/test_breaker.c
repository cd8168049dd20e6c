/* test_breaker.c - core: the circuit breaker (breaker.c): ratio and consecutive trips, cooldowns, probes. */
#include <check.h>

#include "breaker.h"
#include "../run.h"

START_TEST(breaker_ratio_needs_min_requests)
{
	struct core_params p;
	struct breaker b;
	core_params_defaults(&p);
	breaker_init(&b, 0);
	/* F S F S: 50% but only 4 requests. */
	breaker_failure(&b, &p, 1);
	breaker_success(&b, &p, 2);
	breaker_failure(&b, &p, 3);
	breaker_success(&b, &p, 4);
	ck_assert_int_eq(b.state, CORE_BREAKER_CLOSED);
	breaker_failure(&b, &p, 5); /* 3 of 5 */
	ck_assert_int_eq(b.state, CORE_BREAKER_OPEN);
	uint64_t left;
	ck_assert_int_eq(breaker_state(&b, 5, &left), CORE_BREAKER_OPEN);
	ck_assert_uint_eq(left, p.breaker_cooldown_ms);
	/* Old outcomes age out of the window. */
	breaker_init(&b, 0);
	for (int i = 0; i < 4; i++)
		breaker_failure(&b, &p, 100);
	breaker_success(&b, &p, 100);
	ck_assert_int_eq(b.state, CORE_BREAKER_CLOSED); /* consecutive reset */
	breaker_failure(&b, &p, 100 + p.breaker_window_ms + 1000);
	ck_assert_int_eq(b.state, CORE_BREAKER_CLOSED);
	uint32_t ok, fail;
	breaker_counts(&b, &p, 100 + p.breaker_window_ms + 1000, &ok, &fail);
	ck_assert_uint_eq(ok, 0);
	ck_assert_uint_eq(fail, 1);
}
END_TEST

START_TEST(breaker_consecutive)
{
	struct core_params p;
	struct breaker b;
	core_params_defaults(&p);
	p.breaker_min_requests = 1000; /* only the run can open it */
	breaker_init(&b, 0);
	for (int i = 0; i < 20; i++)
		breaker_success(&b, &p, 10);
	for (int i = 0; i < 4; i++)
		breaker_failure(&b, &p, 10);
	ck_assert_int_eq(b.state, CORE_BREAKER_CLOSED);
	breaker_failure(&b, &p, 10);
	ck_assert_int_eq(b.state, CORE_BREAKER_OPEN);
}
END_TEST

START_TEST(breaker_cooldown_doubles_to_cap)
{
	struct core_params p;
	struct breaker b;
	core_params_defaults(&p);
	breaker_init(&b, 0);
	uint64_t now = 0, want = p.breaker_cooldown_ms;
	for (int i = 0; i < 5; i++)
		breaker_failure(&b, &p, now);
	for (int trip = 0; trip < 12; trip++) {
		uint64_t left;
		ck_assert_int_eq(breaker_state(&b, now, &left), CORE_BREAKER_OPEN);
		ck_assert_uint_eq(left, want);
		now += left;
		ck_assert_int_eq(breaker_admit(&b, &p, now), BREAKER_ADMIT_PROBE);
		breaker_routed(&b, now);
		breaker_failure(&b, &p, now);
		want = want * 2 > p.breaker_cooldown_max_ms ? p.breaker_cooldown_max_ms
							     : want * 2;
	}
	/* Recovery resets the doubling. */
	uint64_t left;
	breaker_state(&b, now, &left);
	now += left;
	ck_assert_int_eq(breaker_admit(&b, &p, now), BREAKER_ADMIT_PROBE);
	breaker_routed(&b, now);
	ck_assert_int_eq(breaker_admit(&b, &p, now), BREAKER_ADMIT_NO);
	breaker_success(&b, &p, now);
	for (unsigned i = 1; i < p.half_open_probes; i++) {
		ck_assert_int_eq(breaker_admit(&b, &p, now), BREAKER_ADMIT_PROBE);
		breaker_routed(&b, now);
	}
	ck_assert_int_eq(breaker_admit(&b, &p, now), BREAKER_ADMIT_NO);
	for (unsigned i = 1; i < p.half_open_probes; i++)
		breaker_success(&b, &p, now);
	ck_assert_int_eq(b.state, CORE_BREAKER_CLOSED);
	ck_assert_uint_eq(breaker_next_cooldown(&b, &p), p.breaker_cooldown_ms);
}
END_TEST

/* b opened by a 429 of 1 s at 0, and its first probe out at 1000. */
static void first_probe_out(struct breaker *b, const struct core_params *p)
{
	breaker_init(b, 0);
	breaker_rate_limited(b, 1000, 0);
	ck_assert_int_eq(breaker_admit(b, p, 1000), BREAKER_ADMIT_PROBE);
	breaker_routed(b, 1000);
}

START_TEST(breaker_neutral_frees_probe)
{
	struct core_params p;
	struct breaker b;
	core_params_defaults(&p);
	first_probe_out(&b, &p);
	ck_assert_int_eq(breaker_admit(&b, &p, 1000), BREAKER_ADMIT_NO);
	breaker_neutral(&b);
	ck_assert_int_eq(breaker_admit(&b, &p, 1000), BREAKER_ADMIT_PROBE);
}
END_TEST

/* Probes of a half-open breaker: how many are admitted at once while
 * the first's outcome is `first` (0: none
 * yet, 1: a success, 2: headers of a success the log will settle, 3: a
 * failure). */
static unsigned probes_at_once(int first)
{
	struct core_params p;
	struct breaker b;
	core_params_defaults(&p);
	first_probe_out(&b, &p);
	if (first == 1)
		breaker_success(&b, &p, 1100);
	else if (first == 2)
		breaker_heard(&b);
	else if (first == 3)
		breaker_failure(&b, &p, 1100);
	unsigned n = 1;
	while (breaker_admit(&b, &p, 1100) == BREAKER_ADMIT_PROBE && n < 100) {
		breaker_routed(&b, 1100);
		n++;
	}
	return n;
}

START_TEST(breaker_first_probe_alone)
{
	/* The first probe goes alone: a server still failing (instant 500s,
	 * a 429 again) gets one request per cooldown, not half_open_probes;
	 * once it answers, the others go together. */
	struct core_params p;
	core_params_defaults(&p);
	ck_assert_uint_gt(p.half_open_probes, 1);
	ck_assert_uint_eq(probes_at_once(0), 1);
	ck_assert_uint_eq(probes_at_once(1), p.half_open_probes);
	ck_assert_uint_eq(probes_at_once(2), p.half_open_probes);
	ck_assert_uint_eq(probes_at_once(3), 1); /* OPEN again: none more */

	/* A lone probe whose outcome never comes (HAProxy's own error,
	 * without the log input) is given up after breaker_window. */
	struct breaker b;
	first_probe_out(&b, &p);
	uint64_t t = 1000 + p.breaker_window_ms;
	ck_assert_int_eq(breaker_admit(&b, &p, t - 1), BREAKER_ADMIT_NO);
	ck_assert_int_eq(breaker_admit(&b, &p, t), BREAKER_ADMIT_PROBE);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = {
		breaker_ratio_needs_min_requests, breaker_consecutive,
		breaker_cooldown_doubles_to_cap, breaker_neutral_frees_probe,
		breaker_first_probe_alone
	};

	return unit_run(unit_suite("core-breaker", "breaker", tests,
				   sizeof(tests) / sizeof(tests[0])));
}
