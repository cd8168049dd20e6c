/* test_affinity.c - core: the affinity map (affinity.c): put, get, TTL, LRU eviction against a model. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "affinity.h"
#include "core.h"
#include "mix.h"
#include "../run.h"

_Static_assert(sizeof(struct affinity_entry) <= 64, "entry over 64 bytes");

START_TEST(map_put_get_remove)
{
	struct affinity a;
	uint32_t ep, gen;
	ck_assert_int_eq(affinity_init(&a, 1000, 300000), 0);
	for (uint64_t k = 0; k < 1000; k++)
		affinity_put(&a, k, (uint32_t)(k % 7), (uint32_t)k, 10, 0);
	ck_assert_uint_eq(a.used, 1000);
	for (uint64_t k = 0; k < 1000; k++) {
		ck_assert(affinity_get(&a, k, 20, &ep, &gen));
		ck_assert_uint_eq(ep, k % 7);
		ck_assert_uint_eq(gen, k);
	}
	ck_assert(!affinity_get(&a, 5000, 20, &ep, &gen));
	/* Remove every third; the others stay reachable (backward shift). */
	for (uint64_t k = 0; k < 1000; k += 3)
		ck_assert(affinity_remove(&a, k, AFFINITY_NIL));
	for (uint64_t k = 0; k < 1000; k++)
		ck_assert(affinity_get(&a, k, 20, &ep, &gen) == (k % 3 != 0));
	/* Only when it points to the given endpoint. */
	ck_assert(!affinity_remove(&a, 1, 3));
	ck_assert(affinity_remove(&a, 1, 1));
	/* Update in place. */
	affinity_put(&a, 2, 42, 1, 30, 0);
	ck_assert(affinity_get(&a, 2, 30, &ep, &gen));
	ck_assert_uint_eq(ep, 42);
	ck_assert_uint_eq(a.hits, 1000 + 666 + 1);
	affinity_finish(&a);
	ck_assert_int_eq(affinity_init(&a, 0, 1), -EINVAL);
}
END_TEST

START_TEST(map_ttl_expiry)
{
	struct affinity a;
	uint32_t ep, gen;
	ck_assert_int_eq(affinity_init(&a, 100, 300000), 0);
	affinity_put(&a, 1, 1, 0, 1000, 0);
	affinity_put(&a, 2, 2, 0, 2000, 0);
	ck_assert(affinity_get(&a, 1, 1000 + 299999, &ep, &gen));
	ck_assert(!affinity_get(&a, 1, 1000 + 300000, &ep, &gen));
	ck_assert_uint_eq(a.expirations, 1);
	ck_assert_uint_eq(a.used, 1);
	/* Refresh moves the deadline. */
	affinity_put(&a, 2, 2, 0, 200000, 0);
	ck_assert(affinity_get(&a, 2, 450000, &ep, &gen));
	ck_assert_uint_eq(affinity_expire(&a, 600000, 10), 1);
	ck_assert_uint_eq(a.used, 0);
	affinity_finish(&a);
}
END_TEST

START_TEST(map_lru_eviction)
{
	struct affinity a;
	uint32_t ep, gen;
	ck_assert_int_eq(affinity_init(&a, 64, 300000), 0);
	for (uint64_t k = 0; k < 64; k++)
		affinity_put(&a, k, 0, 0, 100 + k, 0);
	/* Touch 0 (a success refreshes it): now 1 is the least recent. */
	affinity_put(&a, 0, 0, 0, 200, 0);
	affinity_put(&a, 1000, 0, 0, 201, 0);
	ck_assert_uint_eq(a.used, 64);
	ck_assert_uint_eq(a.evictions, 1);
	ck_assert(affinity_get(&a, 0, 202, &ep, &gen));
	ck_assert(!affinity_get(&a, 1, 202, &ep, &gen));
	ck_assert(affinity_get(&a, 1000, 202, &ep, &gen));
	/* Churn through many more keys than fit: size stays, newest live. */
	for (uint64_t k = 5000; k < 50000; k++)
		affinity_put(&a, k * 0x9e3779b97f4a7c15ull, 1, 0, 300 + k, 0);
	ck_assert_uint_eq(a.used, 64);
	for (uint64_t k = 50000 - 64; k < 50000; k++)
		ck_assert(affinity_get(&a, k * 0x9e3779b97f4a7c15ull, 60000, &ep, &gen));
	/* Oldest-first walk covers every entry in order. */
	uint32_t n = 0;
	uint64_t last = 0;
	for (uint32_t i = affinity_oldest(&a); i != AFFINITY_NIL; i = affinity_newer(&a, i)) {
		ck_assert_uint_ge(affinity_ms(&a.e[i]), last);
		last = affinity_ms(&a.e[i]);
		n++;
	}
	ck_assert_uint_eq(n, 64);
	affinity_finish(&a);
}
END_TEST

START_TEST(map_bytes_per_entry)
{
	struct affinity a;
	ck_assert_int_eq(affinity_init(&a, 1000000, 300000), 0);
	double b = AFFINITY_BYTES_PER_ENTRY(&a);
	ck_assert_double_le(b, 64);
	ck_assert_uint_le(sizeof(struct affinity_entry), 64);
	affinity_finish(&a);
}
END_TEST

START_TEST(map_random_ops_match_model)
{
	/* Against a plain array model: random puts, removes and gets. */
	enum { KEYS = 512, CAP = 4096 };
	static uint32_t model[KEYS];
	struct affinity a;
	uint32_t ep, gen;
	ck_assert_int_eq(affinity_init(&a, CAP, UINT64_MAX / 4), 0);
	memset(model, 0xff, sizeof(model));
	struct core_rng rng;
	core_rng_seed(&rng, 1);
	for (int i = 0; i < 200000; i++) {
		uint64_t r = core_rng_next(&rng);
		uint32_t k = (uint32_t)(r % KEYS);
		switch ((r >> 20) % 3) {
		case 0:
			affinity_put(&a, k, (uint32_t)i, 0, 1, 0);
			model[k] = (uint32_t)i;
			break;
		case 1:
			ck_assert(affinity_remove(&a, k, AFFINITY_NIL) ==
				  (model[k] != UINT32_MAX));
			model[k] = UINT32_MAX;
			break;
		default:
			ck_assert(affinity_get(&a, k, 1, &ep, &gen) ==
				  (model[k] != UINT32_MAX));
			if (model[k] != UINT32_MAX)
				ck_assert_uint_eq(ep, model[k]);
		}
	}
	affinity_finish(&a);
}
END_TEST

/* The prefetch steps read the map and change nothing in it: present,
 * absent, removed and evicted keys, a map whose slots hold other keys at
 * their home (tags that differ), the head and tail of the LRU list (a NIL
 * neighbour). Under ASan a step that reads past the arrays fails. */
START_TEST(map_prefetch_changes_nothing)
{
	struct affinity a, before;
	ck_assert_int_eq(affinity_init(&a, 64, 300000), 0);
	for (uint64_t k = 0; k < 100; k++) /* 36 evicted */
		affinity_put(&a, k * 7919, (uint32_t)(k % 5), 1, 10 + k, 0);
	ck_assert(affinity_remove(&a, 50 * 7919, AFFINITY_NIL));
	struct affinity_entry e[64];
	struct affinity_slot sl[128];
	ck_assert_uint_eq(a.mask + 1, 128);
	memcpy(e, a.e, sizeof(e));
	memcpy(sl, a.slots, sizeof(sl));
	before = a;
	for (uint64_t k = 0; k < 2000; k++) {
		affinity_prefetch(&a, k * 7919);
		affinity_prefetch_entry(&a, k * 7919);
		affinity_prefetch_links(&a, k * 7919);
		affinity_prefetch_links(&a, k);
	}
	affinity_prefetch_links(&a, a.e[a.lru_head].key);
	affinity_prefetch_links(&a, a.e[a.lru_tail].key);
	ck_assert(memcmp(e, a.e, sizeof(e)) == 0);
	ck_assert(memcmp(sl, a.slots, sizeof(sl)) == 0);
	ck_assert_uint_eq(a.hits, before.hits);
	ck_assert_uint_eq(a.misses, before.misses);
	ck_assert_uint_eq(a.lru_head, before.lru_head);
	ck_assert_uint_eq(a.lru_tail, before.lru_tail);
	affinity_finish(&a);
}
END_TEST

/* The prefetch steps reach what a lookup reads: every entry in one cache
 * line (a prefetch of its start fetches all of it), and the entry of a key
 * stored past its home slot (about a third at half full), found as the
 * lookup finds it. */
START_TEST(map_prefetch_reaches_displaced_keys)
{
	struct affinity a;
	enum { CAP = 4096 };
	ck_assert_int_eq(affinity_init(&a, CAP, 300000), 0);
	ck_assert_uint_eq((uintptr_t)a.e % 64, 0);
	ck_assert_uint_eq(64 % sizeof(struct affinity_entry), 0);
	for (uint64_t k = 1; k <= CAP; k++)
		affinity_put(&a, k * 0x9e3779b97f4a7c15ull, (uint32_t)(k % 7), 1, 10, 0);
	unsigned displaced = 0, found = 0;
	for (uint64_t k = 1; k <= CAP; k++) {
		uint64_t key = k * 0x9e3779b97f4a7c15ull;
		uint32_t home = (uint32_t)mix64(key) & a.mask;
		const struct affinity_entry *x = affinity_home(&a, key);
		bool at_home = a.slots[home].ref != 0 &&
			       a.e[a.slots[home].ref - 1].key == key;
		displaced += !at_home;
		found += !at_home && x != NULL && x->key == key;
	}
	/* Half full (4,096 keys in 8,192 slots): 1,035 keys past their home,
	 * 1,016 reached within the probes a step follows; the rest sit
	 * further out. Before the steps followed probes: none. */
	ck_assert_uint_gt(displaced, CAP / 8);
	ck_assert_msg(found >= displaced - displaced / 20,
		      "%u of %u displaced keys reached", found, displaced);
	affinity_finish(&a);
}
END_TEST

START_TEST(map_turn_beside_the_time)
{
	/* The entry keeps the turn of its key's last request in the bits of
	 * its time a millisecond clock does not use: neither changes the
	 * other, nor the TTL, nor the LRU order. */
	struct affinity a;
	uint32_t ep, gen;
	uint64_t last;
	uint16_t prev;
	bool shared;
	const uint64_t t0 = (UINT64_C(1) << 45) + 5; /* near the top of 46 bits */
	ck_assert_int_eq(affinity_init(&a, 16, 1000), 0);
	affinity_put(&a, 1, 3, 7, t0, 2);
	ck_assert(affinity_get_turn(&a, 1, t0 + 10, 5, &ep, &gen, &last, &prev, &shared));
	ck_assert_uint_eq(prev, 2);
	ck_assert_uint_eq(last, t0);
	ck_assert_uint_eq(ep, 3);
	ck_assert_uint_eq(gen, 7);
	/* Turn 0 (unknown) reads it and leaves it. */
	ck_assert(affinity_get_turn(&a, 1, t0 + 20, 0, &ep, &gen, &last, &prev, &shared));
	ck_assert_uint_eq(prev, 5);
	ck_assert(affinity_get_turn(&a, 1, t0 + 30, 0, &ep, &gen, &last, &prev, &shared));
	ck_assert_uint_eq(prev, 5);
	/* A refresh and a put of turn 0 keep it; a put of another sets it. */
	ck_assert(affinity_refresh(&a, 1, 3, 7, t0 + 500));
	affinity_put(&a, 1, 3, 7, t0 + 600, 0);
	ck_assert(affinity_get_last(&a, 1, t0 + 700, &ep, &gen, &last));
	ck_assert_uint_eq(last, t0 + 600);
	ck_assert(affinity_get_turn(&a, 1, t0 + 700, 0, &ep, &gen, &last, &prev, &shared));
	ck_assert_uint_eq(prev, 5);
	affinity_put(&a, 1, 4, 7, t0 + 800, UINT16_MAX);
	ck_assert(affinity_get_turn(&a, 1, t0 + 900, 0, &ep, &gen, &last, &prev, &shared));
	ck_assert_uint_eq(prev, UINT16_MAX);
	ck_assert_uint_eq(last, t0 + 800);
	ck_assert_uint_eq(ep, 4);
	/* The TTL runs from the time alone; a new entry knows no turn. */
	ck_assert(!affinity_get_turn(&a, 1, t0 + 1800, 9, &ep, &gen, &last, &prev, &shared));
	ck_assert_uint_eq(prev, 0);
	affinity_put(&a, 1, 4, 7, t0 + 1800, 0);
	ck_assert(affinity_get_turn(&a, 1, t0 + 1801, 0, &ep, &gen, &last, &prev, &shared));
	ck_assert_uint_eq(prev, 0);
	affinity_finish(&a);
}
END_TEST

START_TEST(map_turn_back_is_shared)
{
	/* A key's turns that do not step forward (turn 2 after 4, or 4
	 * after 4) may not be one conversation's: peek_turn says 0 from then
	 * on, through puts and refreshes, while get_turn still gives the
	 * last turn; a lookup of unknown turn changes nothing. */
	struct affinity a;
	uint32_t ep, gen;
	uint64_t last;
	uint16_t prev, turn;
	bool shared;
	const uint64_t t0 = (UINT64_C(1) << 45) + 5;
	ck_assert_int_eq(affinity_init(&a, 16, 100000), 0);
	affinity_put(&a, 1, 3, 7, t0, 1);
	for (uint16_t t = 2; t <= 4; t++) {
		ck_assert(affinity_get_turn(&a, 1, t0 + t, t, &ep, &gen, &last, &prev, &shared));
		ck_assert(!shared);
		ck_assert(affinity_get_turn(&a, 1, t0 + t, 0, &ep, &gen, &last, &prev, &shared));
		ck_assert(!shared);
		ck_assert(affinity_peek_turn(&a, 1, t0 + t, &ep, &gen, &last, &turn));
		ck_assert_uint_eq(turn, t);
		ck_assert(affinity_peek_shared(&a, 1, t0 + t, &ep, &gen, &last, &shared));
		ck_assert(!shared);
	}
	/* The lookup that goes back says so itself. */
	ck_assert(affinity_get_turn(&a, 1, t0 + 10, 2, &ep, &gen, &last, &prev, &shared));
	ck_assert(shared);
	ck_assert(affinity_peek_shared(&a, 1, t0 + 10, &ep, &gen, &last, &shared));
	ck_assert(shared);
	ck_assert_uint_eq(prev, 4);
	ck_assert(affinity_peek_turn(&a, 1, t0 + 10, &ep, &gen, &last, &turn));
	ck_assert_uint_eq(turn, 0);
	ck_assert_uint_eq(last, t0); /* a lookup refreshes nothing */
	ck_assert(affinity_refresh(&a, 1, 3, 7, t0 + 20));
	affinity_put(&a, 1, 3, 7, t0 + 30, 3);
	ck_assert(affinity_get_turn(&a, 1, t0 + 40, 4, &ep, &gen, &last, &prev, &shared));
	ck_assert_uint_eq(prev, 3);
	ck_assert(affinity_peek_turn(&a, 1, t0 + 40, &ep, &gen, &last, &turn));
	ck_assert_uint_eq(turn, 0);
	ck_assert_uint_eq(last, t0 + 30);
	/* A new entry of the key is another start; the same turn twice
	 * ends it too. */
	ck_assert(affinity_remove(&a, 1, 3));
	affinity_put(&a, 1, 3, 7, t0 + 50, 5);
	ck_assert(affinity_peek_turn(&a, 1, t0 + 50, &ep, &gen, &last, &turn));
	ck_assert_uint_eq(turn, 5);
	ck_assert(affinity_get_turn(&a, 1, t0 + 60, 5, &ep, &gen, &last, &prev, &shared));
	ck_assert(affinity_peek_turn(&a, 1, t0 + 60, &ep, &gen, &last, &turn));
	ck_assert_uint_eq(turn, 0);
	/* Moved into another map (a resize), an entry keeps its mark and
	 * its turn. */
	affinity_put(&a, 2, 3, 7, t0 + 70, 6);
	struct affinity b;
	ck_assert_int_eq(affinity_init(&b, 32, 100000), 0);
	for (uint32_t i = affinity_oldest(&a); i != AFFINITY_NIL; i = affinity_newer(&a, i))
		affinity_put_entry(&b, &a.e[i]);
	ck_assert(affinity_peek_turn(&b, 1, t0 + 80, &ep, &gen, &last, &turn));
	ck_assert_uint_eq(turn, 0);
	ck_assert_uint_eq(last, t0 + 50);
	ck_assert(affinity_peek_turn(&b, 2, t0 + 80, &ep, &gen, &last, &turn));
	ck_assert_uint_eq(turn, 6);
	ck_assert(affinity_get_turn(&b, 1, t0 + 80, 0, &ep, &gen, &last, &prev, &shared));
	ck_assert_uint_eq(prev, 5);
	ck_assert(shared);
	ck_assert(affinity_peek_shared(&b, 2, t0 + 80, &ep, &gen, &last, &shared));
	ck_assert(!shared);
	affinity_finish(&b);
	affinity_finish(&a);
}
END_TEST

START_TEST(map_keys_back_or_lapsed)
{
	/* Each stored key has one outcome: back at its first lookup that
	 * finds it live, whatever the lookups after; lapsed when it expires
	 * or is evicted before that, turned back if it is stored again while
	 * among the ghosts; a key the caller removes has none. The mark
	 * survives refreshes and a move into another map. */
	struct affinity a;
	uint32_t ep, gen;
	double n;
	const uint64_t t0 = (UINT64_C(1) << 45) + 5;
	ck_assert_int_eq(affinity_init(&a, 8, 1000), 0);
	ck_assert_double_eq(affinity_back(&a, &n), 0);
	ck_assert_double_eq(n, 0);
	for (uint64_t k = 1; k <= 4; k++)
		affinity_put(&a, k, 0, 0, t0, 0);
	for (int i = 0; i < 3; i++) {
		ck_assert(affinity_get(&a, 1, t0 + 10, &ep, &gen));
		affinity_put(&a, 1, 0, 0, t0 + 10, 0); /* refreshed, still back */
	}
	ck_assert(affinity_remove(&a, 2, AFFINITY_NIL));
	ck_assert_uint_eq(a.back, 1);
	ck_assert_uint_eq(a.lapsed, 0);
	/* 3 and 4 expire unseen (one on its lookup, one by housekeeping);
	 * 1 expires too, but came back. */
	ck_assert(!affinity_get(&a, 3, t0 + 1000, &ep, &gen));
	ck_assert_uint_eq(affinity_expire(&a, t0 + 2000, 10), 2);
	ck_assert_uint_eq(a.back, 1);
	ck_assert_uint_eq(a.lapsed, 2);
	ck_assert_double_eq_tol(affinity_back(&a, &n), 1.0 / 3, 0.01);
	ck_assert_double_eq_tol(n, 3, 0.01);
	/* 3 is stored again: back after all. 2 (removed) and 9 (new) are
	 * not outcomes yet. */
	affinity_put(&a, 3, 0, 0, t0 + 3000, 0);
	affinity_put(&a, 2, 0, 0, t0 + 3000, 0);
	affinity_put(&a, 9, 0, 0, t0 + 3000, 0);
	ck_assert_uint_eq(a.back, 2);
	ck_assert_uint_eq(a.lapsed, 1);
	ck_assert_double_eq_tol(affinity_back(&a, &n), 2.0 / 3, 0.01);
	/* Eviction lapses too: 8 more keys push out 3 (a new entry, its
	 * own outcome), 2 and 9, none of them looked up. */
	for (uint64_t k = 100; k < 108; k++)
		affinity_put(&a, k, 0, 0, t0 + 3100, 0);
	ck_assert_uint_eq(a.evictions, 3);
	ck_assert_uint_eq(a.lapsed, 4);
	/* Moved into another map, an entry that came back stays back. */
	ck_assert(affinity_get(&a, 100, t0 + 3200, &ep, &gen));
	struct affinity b;
	ck_assert_int_eq(affinity_init(&b, 32, 1000), 0);
	for (uint32_t i = affinity_oldest(&a); i != AFFINITY_NIL; i = affinity_newer(&a, i))
		affinity_put_entry(&b, &a.e[i]);
	ck_assert(affinity_get(&b, 100, t0 + 3300, &ep, &gen));
	ck_assert(affinity_get(&b, 101, t0 + 3300, &ep, &gen));
	ck_assert_uint_eq(b.back, 1);
	affinity_finish(&b);
	affinity_finish(&a);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = {
		map_put_get_remove, map_ttl_expiry, map_lru_eviction, map_bytes_per_entry,
		map_random_ops_match_model, map_prefetch_changes_nothing,
		map_prefetch_reaches_displaced_keys, map_turn_beside_the_time,
		map_turn_back_is_shared, map_keys_back_or_lapsed
	};

	return unit_run(unit_suite("core-affinity", "map", tests,
				   sizeof(tests) / sizeof(tests[0])));
}
