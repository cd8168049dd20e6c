/* test_pool.c - core: the endpoint pool (pool.c) through the core: add, update, remove, find by names. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "core.h"
#include "fixture.h"
#include "../run.h"

START_TEST(pool_changes_keep_state)
{
	struct fx f;
	fx_init(&f, 3, NULL);
	fx_warm(&f, f.ep[0], 321, 25);
	fx_observe(&f, f.ep[2], 429, 1, false, 0, false);
	ck_assert_int_eq(fx_add(&f, "s3", NULL, 2, NULL), 3);
	ck_assert_int_eq(core_endpoint_remove(f.c, f.ep[1]), 0);
	ck_assert_int_eq(core_endpoint_remove(f.c, f.ep[1]), -ENOENT);
	struct core_endpoint_info in = fx_info(&f, f.ep[0]);
	ck_assert_double_eq_tol(in.ewma_ms[0], 321, 1e-9);
	ck_assert_uint_eq(in.samples[0], 25);
	ck_assert_int_eq(fx_info(&f, f.ep[2]).breaker, CORE_BREAKER_OPEN);
	/* Update: new weight and models, same state. */
	const char *models[2] = { "m1", "m2" };
	struct core_endpoint_config cfg = {
		.backend = "be", .server = "s0", .weight = 5, .models = models,
		.n_models = 2, .cost_per_mtok = 1.5,
	};
	ck_assert_int_eq(core_endpoint_update(f.c, f.ep[0], &cfg), 0);
	in = fx_info(&f, f.ep[0]);
	ck_assert_double_eq(in.weight, 5);
	ck_assert_double_eq(in.cost_per_mtok, 1.5);
	ck_assert_double_eq_tol(in.ewma_ms[0], 321, 1e-9);
	/* Not its names: refused. */
	cfg.server = "s2";
	ck_assert_int_eq(core_endpoint_update(f.c, f.ep[0], &cfg), -EINVAL);
	/* Iteration sees the live ones. */
	int n = 0;
	for (int i = core_endpoint_next(f.c, -1); i >= 0; i = core_endpoint_next(f.c, i))
		n++;
	ck_assert_int_eq(n, 3);
	struct core_stats st;
	core_stats(f.c, &st);
	ck_assert_uint_eq(st.endpoints, 3);
	/* Slot 1 is reused. */
	ck_assert_int_eq(fx_add(&f, "s9", NULL, 1, NULL), f.ep[1]);
	fx_finish(&f);
}
END_TEST

START_TEST(pool_rejects)
{
	struct fx f;
	fx_init(&f, 0, NULL);
	fx_add(&f, "s0", NULL, 1, "x");
	const char *x = "x";
	struct core_endpoint_config cfg = { .backend = "be", .server = "s0", .weight = 1,
					    .models = &x, .n_models = 1 };
	ck_assert_int_eq(core_endpoint_add(f.c, &cfg, f.now), -EEXIST);
	cfg.key_id = "";
	ck_assert_int_eq(core_endpoint_add(f.c, &cfg, f.now), -EEXIST);
	cfg.key_id = "k";
	ck_assert_int_ge(core_endpoint_add(f.c, &cfg, f.now), 0);
	cfg.server = "x";
	cfg.weight = 0;
	ck_assert_int_eq(core_endpoint_add(f.c, &cfg, f.now), -EINVAL);
	cfg.weight = NAN;
	ck_assert_int_eq(core_endpoint_add(f.c, &cfg, f.now), -EINVAL);
	cfg.weight = 1;
	cfg.cost_per_mtok = -1;
	ck_assert_int_eq(core_endpoint_add(f.c, &cfg, f.now), -EINVAL);
	cfg.cost_per_mtok = 0;
	cfg.server = "";
	ck_assert_int_eq(core_endpoint_add(f.c, &cfg, f.now), -EINVAL);
	cfg.server = NULL;
	ck_assert_int_eq(core_endpoint_add(f.c, &cfg, f.now), -EINVAL);
	/* 256 distinct models at most; freed names are reused. */
	char names[300][8];
	const char *ptrs[300];
	for (int i = 0; i < 300; i++) {
		snprintf(names[i], sizeof(names[i]), "m%d", i);
		ptrs[i] = names[i];
	}
	cfg = (struct core_endpoint_config){ .backend = "be", .server = "big",
		.weight = 1, .models = ptrs, .n_models = 255 }; /* + "x" */
	int big = core_endpoint_add(f.c, &cfg, f.now);
	ck_assert_int_ge(big, 0);
	cfg.server = "big2";
	cfg.models = ptrs + 256;
	cfg.n_models = 1;
	ck_assert_int_eq(core_endpoint_add(f.c, &cfg, f.now), -ENOSPC);
	ck_assert_int_eq(core_endpoint_remove(f.c, big), 0);
	ck_assert_int_ge(core_endpoint_add(f.c, &cfg, f.now), 0);
	struct core_request r = { .model = core_str_c("m256") };
	ck_assert_str_eq(fx_decide(&f, &r).server, "big2");
	fx_finish(&f);
}
END_TEST

START_TEST(find_by_names)
{
	struct fx f;
	fx_init(&f, 0, NULL);
	int a = fx_add(&f, "web1", NULL, 1, NULL);
	int b = fx_add(&f, "web1", "k2", 1, NULL);
	int c = fx_add(&f, "web2", NULL, 1, NULL);
	struct core_str none = { 0 };
	ck_assert_int_eq(core_endpoint_find(f.c, core_str_c("be"), core_str_c("web1"), none), a);
	ck_assert_int_eq(core_endpoint_find(f.c, core_str_c("be"), core_str_c("web1"),
					    core_str_c("k2")), b);
	ck_assert_int_eq(core_endpoint_find_path(f.c, core_str_c("be/web2"), none), c);
	ck_assert_int_eq(core_endpoint_find_path(f.c, core_str_c("be/web"), none), -ENOENT);
	ck_assert_int_eq(core_endpoint_find_path(f.c, core_str_c("bexweb2"), none), -ENOENT);
	ck_assert_int_eq(core_endpoint_find_path(f.c, (struct core_str){ "be/web2x", 7 },
						 none), c);
	ck_assert_int_eq(core_endpoint_find(f.c, core_str_c("be"), core_str_c("web1"),
					    core_str_c("k")), -ENOENT);
	core_endpoint_remove(f.c, a);
	ck_assert_int_eq(core_endpoint_find_path(f.c, core_str_c("be/web1"), none), -ENOENT);
	ck_assert_int_eq(core_endpoint_find_path(f.c, core_str_c("be/web2"), none), c);
	ck_assert_int_eq(core_endpoint_find(f.c, core_str_c("be"), core_str_c("web1"),
					    core_str_c("k2")), b);
	/* Many endpoints: every one found after removals in between. */
	char name[16];
	int idx[200];
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		idx[i] = fx_add(&f, name, NULL, 1, NULL);
	}
	for (int i = 0; i < 200; i += 3)
		core_endpoint_remove(f.c, idx[i]);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		int got = core_endpoint_find(f.c, core_str_c("be"), core_str_c(name), none);
		ck_assert_int_eq(got, i % 3 == 0 ? -ENOENT : idx[i]);
	}
	fx_finish(&f);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { pool_changes_keep_state, pool_rejects, find_by_names };

	return unit_run(unit_suite("core-pool", "pool", tests,
				   sizeof(tests) / sizeof(tests[0])));
}
