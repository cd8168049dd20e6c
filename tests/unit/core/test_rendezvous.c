/* test_rendezvous.c - core: weighted rendezvous hashing (rendezvous.c): the fast logarithm, lazy ranking, shares. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "core.h"
#include "rendezvous.h"
#include "../run.h"

START_TEST(fast_ln_accuracy)
{
	struct core_rng rng;
	core_rng_seed(&rng, 9);
	for (int i = 0; i < 100000; i++) {
		double u = ((double)(core_rng_next(&rng) >> 11) + 0.5) * 0x1.0p-53;
		double want = log(u), got = rdv_ln(u);
		ck_assert_double_le(fabs(got - want), 1e-12 * fabs(want) + 1e-14);
	}
	ck_assert_double_eq_tol(rdv_ln(1.0), 0, 1e-15);
	ck_assert_double_eq_tol(rdv_ln(0x1.0p-53), log(0x1.0p-53), 1e-9);
	ck_assert_double_eq_tol(rdv_ln(0.5), log(0.5), 1e-15);
}
END_TEST

START_TEST(rank_is_sorted_lazily)
{
	struct rdv_item items[100];
	struct core_rng rng;
	core_rng_seed(&rng, 5);
	for (uint32_t i = 0; i < 100; i++)
		items[i] = (struct rdv_item){
			(double)(core_rng_next(&rng) % 50), i };
	struct rdv_rank r;
	struct rdv_item it, prev = { -1, 0 };
	rdv_rank_init(&r, items, 100);
	int n = 0;
	while (rdv_rank_next(&r, &it) == 0) {
		ck_assert(it.cost > prev.cost ||
			  (it.cost == prev.cost && it.endpoint > prev.endpoint) || n == 0);
		prev = it;
		n++;
	}
	ck_assert_int_eq(n, 100);
	rdv_rank_init(&r, items, 0);
	ck_assert_int_eq(rdv_rank_next(&r, &it), -1);
}
END_TEST

START_TEST(rendezvous_weighted_shares)
{
	/* Weights 1, 2, 3, 4: shares 10%, 20%, 30%, 40%. */
	uint64_t seeds[4] = { 11, 22, 33, 44 };
	int n[4] = { 0 };
	for (uint64_t k = 0; k < 200000; k++) {
		int best = 0;
		double bc = INFINITY;
		for (int i = 0; i < 4; i++) {
			double c = rdv_cost(k, seeds[i], 1.0 / (i + 1));
			if (c < bc) {
				bc = c;
				best = i;
			}
		}
		n[best]++;
	}
	for (int i = 0; i < 4; i++)
		ck_assert_double_eq_tol(n[i] / 200000.0, (i + 1) / 10.0, 0.006);
	/* Pure function of its arguments. */
	ck_assert_double_eq(rdv_cost(123, 456, 0.5), rdv_cost(123, 456, 0.5));
	ck_assert_double_eq_tol(rdv_cost(123, 456, 0.5) * 2,
				rdv_cost(123, 456, 1.0), 1e-12);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = {
		fast_ln_accuracy, rank_is_sorted_lazily, rendezvous_weighted_shares
	};

	return unit_run(unit_suite("core-rendezvous", "rendezvous", tests,
				   sizeof(tests) / sizeof(tests[0])));
}
