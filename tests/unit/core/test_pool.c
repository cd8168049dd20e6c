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

/* core_endpoint_find_akey and core_endpoint_find_path agree on every
 * name of paths x keys for akey. */
static void find_akey_agrees(struct fx *f, uint64_t akey, const char *when)
{
	static const char *const paths[] = {
		"be/web1", "be/web12", "be/web", "be/web2", "be/web1x", "bx/web1",
		"bee/web1", "b/web1", "be/", "/web1", "beweb1", "", "be/web1/",
	};
	static const char *const keys[] = { "", "k2", "k22", "k", "k2x" };
	for (size_t i = 0; i < sizeof(paths) / sizeof(*paths); i++)
		for (size_t k = 0; k < sizeof(keys) / sizeof(*keys); k++) {
			struct core_str ps = core_str_c(paths[i]);
			struct core_str ks = core_str_c(keys[k]);
			ck_assert_msg(core_endpoint_find_akey(f->c, akey, ps, ks) ==
					      core_endpoint_find_path(f->c, ps, ks),
				      "%s: path %s key %s", when, paths[i], keys[k]);
		}
}

/* core_endpoint_find_akey gives what core_endpoint_find_path gives, for
 * every name (the decision's own endpoint, another key of its server, a
 * server whose name extends or cuts its own, another backend, no slash)
 * and every akey: a decision's, one never given, one whose endpoint was
 * removed since, then added again under a new generation. */
START_TEST(find_by_akey)
{
	struct fx f;
	fx_init(&f, 0, NULL);
	fx_add(&f, "web1", NULL, 1, NULL);
	fx_add(&f, "web1", "k2", 1, NULL);
	fx_add(&f, "web1", "k22", 1, NULL);
	fx_add(&f, "web12", NULL, 1, NULL);
	fx_add(&f, "web", "k2", 1, NULL);
	int w2 = fx_add(&f, "web2", NULL, 1, NULL);
	uint64_t akeys[64];
	bool chose[6] = { false };
	for (unsigned i = 0; i < 64; i++) {
		struct core_request req = fx_session((i + 1) * 7919ull);
		struct core_decision d = fx_decide(&f, &req);
		ck_assert(d.has_akey);
		ck_assert_int_ge(d.endpoint, 0);
		ck_assert_int_lt(d.endpoint, 6);
		chose[d.endpoint] = true;
		akeys[i] = d.akey;
		find_akey_agrees(&f, d.akey, "decided");
		find_akey_agrees(&f, d.akey ^ 1, "never given");
		ck_assert_int_eq(core_endpoint_complete(f.c, d.endpoint), 0);
	}
	for (unsigned e = 0; e < 6; e++)
		ck_assert_msg(chose[e], "endpoint %u never chosen", e);
	for (int i = 0; i < 6; i++)
		if (i != w2)
			core_endpoint_remove(f.c, i);
	for (unsigned i = 0; i < 64; i++)
		find_akey_agrees(&f, akeys[i], "removed");
	fx_add(&f, "web1", "k22", 1, NULL);
	fx_add(&f, "web12", NULL, 1, NULL);
	fx_add(&f, "web1", NULL, 1, NULL);
	for (unsigned i = 0; i < 64; i++)
		find_akey_agrees(&f, akeys[i], "added again");
	fx_finish(&f);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { pool_changes_keep_state, pool_rejects, find_by_names,
				       find_by_akey };

	return unit_run(unit_suite("core-pool", "pool", tests,
				   sizeof(tests) / sizeof(tests[0])));
}
