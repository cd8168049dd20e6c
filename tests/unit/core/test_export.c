/* test_export.c - core: the resumable affinity cursor (sliced snapshots) against the whole-map export. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define N_EP 4

struct fx {
	struct core *c;
	int ep[N_EP];
	uint64_t now;
};

static void fx_init(struct fx *f, uint32_t cap)
{
	struct core_params p;
	core_params_defaults(&p);
	p.affinity_max_entries = cap;
	p.affinity_ttl_ms = 300000;
	memset(f, 0, sizeof(*f));
	f->now = 1000000;
	ck_assert_int_eq(core_create(&f->c, &p), 0);
	for (int i = 0; i < N_EP; i++) {
		char name[8];
		snprintf(name, sizeof(name), "s%d", i);
		struct core_endpoint_config ec = { .backend = "be", .server = name,
						   .weight = 1 };
		f->ep[i] = core_endpoint_add(f->c, &ec, f->now);
		ck_assert_int_ge(f->ep[i], 0);
	}
}

static void put(struct fx *f, uint64_t key, int ep, uint64_t idle)
{
	struct core_affinity_record r = { .akey = key, .endpoint = f->ep[ep],
					  .idle_ms = idle };
	ck_assert_int_eq(core_affinity_import(f->c, &r, f->now), 0);
}

/* What a walk collected: keys in visit order. */
struct seen {
	uint64_t *key;
	int *ep;
	size_t n, cap;
};

static int collect(void *arg, const struct core_affinity_record *rec)
{
	struct seen *s = arg;
	ck_assert_uint_lt(s->n, s->cap);
	s->key[s->n] = rec->akey;
	s->ep[s->n] = rec->endpoint;
	s->n++;
	return 0;
}

static void seen_init(struct seen *s, size_t cap)
{
	s->key = calloc(cap, sizeof(*s->key));
	s->ep = calloc(cap, sizeof(*s->ep));
	s->n = 0;
	s->cap = cap;
	ck_assert(s->key != NULL && s->ep != NULL);
}

static void seen_free(struct seen *s)
{
	free(s->key);
	free(s->ep);
}

static size_t seen_count(const struct seen *s, uint64_t key)
{
	size_t k = 0;
	for (size_t i = 0; i < s->n; i++)
		k += s->key[i] == key;
	return k;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Walks the whole map in slices of max slots; returns the calls made. */
static unsigned walk(struct fx *f, struct core_affinity_cursor *cur,
		     uint32_t max, struct seen *s)
{
	unsigned calls = 0;
	while (!cur->done) {
		uint32_t before = cur->pos;
		ck_assert_int_eq(core_affinity_cursor_next(f->c, cur, f->now, max,
							   collect, s), 0);
		/* Bounded: never more than max slots per call. */
		ck_assert_uint_le(cur->pos - before, max);
		ck_assert_uint_le(++calls, 1000000);
	}
	return calls;
}

START_TEST(empty_map_is_done_at_once)
{
	struct fx f;
	fx_init(&f, 64);
	struct core_affinity_cursor cur;
	core_affinity_cursor_init(f.c, &cur);
	ck_assert(cur.done);
	struct seen s;
	seen_init(&s, 1);
	ck_assert_int_eq(core_affinity_cursor_next(f.c, &cur, f.now, 8, collect,
						   &s), 0);
	ck_assert_uint_eq(s.n, 0);
	seen_free(&s);
	core_destroy(f.c);
}
END_TEST

/* A still map: the sliced walk yields the same key set as the export,
 * each key once, whatever the slice size. */
START_TEST(still_map_same_as_export)
{
	static const uint32_t slices[] = { 1, 7, 64, 1000, 100000 };
	struct fx f;
	fx_init(&f, 5000);
	for (uint64_t k = 1; k <= 3000; k++)
		put(&f, k * 0x9e3779b97f4a7c15ull, (int)(k % N_EP), k % 1000);
	/* Free slots inside the array: removed through a failure. */
	for (uint64_t k = 3; k <= 3000; k += 3) {
		struct core_feedback fb = {
			.endpoint = f.ep[k % N_EP], .status = 500, .tr_ms = -1,
			.retry_after_ms = -1, .has_akey = true,
			.akey = k * 0x9e3779b97f4a7c15ull,
		};
		ck_assert_int_eq(core_observe(f.c, &fb, f.now), 0);
	}
	struct seen ex;
	seen_init(&ex, 4000);
	ck_assert_int_eq(core_affinity_export(f.c, f.now, collect, &ex), 0);
	ck_assert_uint_eq(ex.n, 2000);
	qsort(ex.key, ex.n, sizeof(*ex.key), cmp_u64);
	for (size_t i = 0; i < sizeof(slices) / sizeof(slices[0]); i++) {
		struct core_affinity_cursor cur;
		struct seen s;
		seen_init(&s, 4000);
		core_affinity_cursor_init(f.c, &cur);
		unsigned calls = walk(&f, &cur, slices[i], &s);
		ck_assert_uint_eq(s.n, ex.n);
		qsort(s.key, s.n, sizeof(*s.key), cmp_u64);
		ck_assert_mem_eq(s.key, ex.key, ex.n * sizeof(*ex.key));
		/* 3000 slots were handed out. */
		ck_assert_uint_eq(calls, (3000 + slices[i] - 1) / slices[i]);
		seen_free(&s);
	}
	seen_free(&ex);
	core_destroy(f.c);
}
END_TEST

/* Changes between slices, each case of core.h's list. */
START_TEST(changes_between_slices)
{
	struct fx f;
	fx_init(&f, 1000);
	/* Slots 0..99 hold keys 100..199. */
	for (uint64_t k = 100; k < 200; k++)
		put(&f, k, 0, 10);
	struct core_affinity_cursor cur;
	struct seen s;
	seen_init(&s, 1000);
	core_affinity_cursor_init(f.c, &cur);
	/* First half visited. */
	ck_assert_int_eq(core_affinity_cursor_next(f.c, &cur, f.now, 50, collect,
						   &s), 0);
	ck_assert_uint_eq(s.n, 50);
	ck_assert(!cur.done);
	f.now += 5;
	/* Visited, then moved to another endpoint: kept as visited. */
	put(&f, 100, 1, 0);
	/* Not yet visited, moved: seen as moved. */
	put(&f, 150, 2, 0);
	/* Removed: 101 (visited, slot 1), then 160 (not yet visited, slot
	 * 60): freed slots are reused last freed first. */
	struct core_feedback fb = { .endpoint = f.ep[0], .status = 503,
				    .tr_ms = -1, .retry_after_ms = -1,
				    .has_akey = true, .akey = 101 };
	ck_assert_int_eq(core_observe(f.c, &fb, f.now), 0);
	fb.akey = 160;
	ck_assert_int_eq(core_observe(f.c, &fb, f.now), 0);
	/* 101 inserted again, into slot 60 (not visited yet): seen twice,
	 * the later record the new state. */
	put(&f, 101, 3, 0);
	/* A new key into slot 1, which the walk has passed: not seen. */
	put(&f, 500, 1, 0);
	/* A new key into a new slot past the cursor: seen once. */
	put(&f, 501, 1, 0);
	walk(&f, &cur, 50, &s);

	ck_assert_uint_eq(seen_count(&s, 100), 1);
	for (size_t i = 0; i < s.n; i++)
		if (s.key[i] == 100)
			ck_assert_int_eq(s.ep[i], f.ep[0]);
	ck_assert_uint_eq(seen_count(&s, 150), 1);
	for (size_t i = 0; i < s.n; i++)
		if (s.key[i] == 150)
			ck_assert_int_eq(s.ep[i], f.ep[2]);
	ck_assert_uint_eq(seen_count(&s, 160), 0);
	ck_assert_uint_eq(seen_count(&s, 101), 2);
	size_t last = 0;
	for (size_t i = 0; i < s.n; i++)
		if (s.key[i] == 101)
			last = i;
	ck_assert_int_eq(s.ep[last], f.ep[3]);
	ck_assert_uint_eq(seen_count(&s, 500), 0);
	ck_assert_uint_eq(seen_count(&s, 501), 1);
	/* Every other key, unchanged during the walk, exactly once. */
	for (uint64_t k = 102; k < 200; k++)
		if (k != 150 && k != 160)
			ck_assert_uint_eq(seen_count(&s, k), 1);
	seen_free(&s);
	core_destroy(f.c);
}
END_TEST

/* Entries of an endpoint removed mid-walk stop appearing; expired ones
 * never do; a rebuilt map says so. */
START_TEST(endpoint_removed_ttl_and_rebuild)
{
	struct fx f;
	fx_init(&f, 1000);
	for (uint64_t k = 1; k <= 200; k++)
		put(&f, k, (int)(k % 2), k == 7 ? 299999 : 0);
	struct core_affinity_cursor cur;
	struct seen s;
	seen_init(&s, 1000);
	core_affinity_cursor_init(f.c, &cur);
	ck_assert_int_eq(core_affinity_cursor_next(f.c, &cur, f.now, 100, collect,
						   &s), 0);
	f.now += 1; /* key 7 expires */
	ck_assert_int_eq(core_endpoint_remove(f.c, f.ep[1]), 0);
	walk(&f, &cur, 100, &s);
	ck_assert_uint_eq(seen_count(&s, 7), 1); /* visited before it expired */
	for (uint64_t k = 101; k <= 200; k++)
		ck_assert_uint_eq(seen_count(&s, k), k % 2 == 0);

	/* Expired at the time of the visit: not seen. */
	f.now += 300000;
	put(&f, 9999, 0, 0);
	struct seen t;
	seen_init(&t, 1000);
	core_affinity_cursor_init(f.c, &cur);
	walk(&f, &cur, 1000, &t);
	ck_assert_uint_eq(t.n, 1);
	ck_assert_uint_eq(t.key[0], 9999);

	/* A new capacity rebuilds the map: the walk must start over. */
	core_affinity_cursor_init(f.c, &cur);
	struct core_params p = *core_params(f.c);
	p.affinity_max_entries = 2000;
	ck_assert_int_eq(core_set_params(f.c, &p), 0);
	ck_assert_int_eq(core_affinity_cursor_next(f.c, &cur, f.now, 10, collect,
						   &t), -ESTALE);
	/* Rebuilt twice, back to the first size (the new array may land at
	 * the old address): still a rebuild. */
	core_affinity_cursor_init(f.c, &cur);
	p.affinity_max_entries = 3000;
	ck_assert_int_eq(core_set_params(f.c, &p), 0);
	p.affinity_max_entries = 2000;
	ck_assert_int_eq(core_set_params(f.c, &p), 0);
	ck_assert_int_eq(core_affinity_cursor_next(f.c, &cur, f.now, 10, collect,
						   &t), -ESTALE);
	seen_free(&s);
	seen_free(&t);
	core_destroy(f.c);
}
END_TEST

static int stop_at_three(void *arg, const struct core_affinity_record *rec)
{
	unsigned *n = arg;
	(void)rec;
	return ++*n == 3 ? 42 : 0;
}

/* fn's non-zero return comes back, and the walk resumes after it. */
START_TEST(callback_stop_resumes)
{
	struct fx f;
	fx_init(&f, 100);
	for (uint64_t k = 1; k <= 10; k++)
		put(&f, k, 0, 0);
	struct core_affinity_cursor cur;
	unsigned n = 0;
	core_affinity_cursor_init(f.c, &cur);
	ck_assert_int_eq(core_affinity_cursor_next(f.c, &cur, f.now, 100,
						   stop_at_three, &n), 42);
	ck_assert_uint_eq(cur.pos, 3);
	ck_assert(!cur.done);
	struct seen s;
	seen_init(&s, 100);
	walk(&f, &cur, 100, &s);
	ck_assert_uint_eq(s.n, 7);
	seen_free(&s);
	core_destroy(f.c);
}
END_TEST

static Suite *export_suite(void)
{
	Suite *s = suite_create("core-export");
	TCase *tc = tcase_create("cursor");
	tcase_add_test(tc, empty_map_is_done_at_once);
	tcase_add_test(tc, still_map_same_as_export);
	tcase_add_test(tc, changes_between_slices);
	tcase_add_test(tc, endpoint_removed_ttl_and_rebuild);
	tcase_add_test(tc, callback_stop_resumes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(export_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
