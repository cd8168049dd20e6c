/* affinity.c - the affinity map: open addressing with backward-shift deletion, LRU list, lazy TTL. */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */
#endif
#include "affinity.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "mix.h"

_Static_assert(sizeof(struct affinity_entry) <= 64,
	       "an affinity entry must fit in 64 bytes");
_Static_assert(sizeof(struct affinity_entry) + 2 * sizeof(struct affinity_slot) <= 64,
	       "entry plus its index share must fit in 64 bytes");

/* A full map is read at random: on Linux, ask for huge pages so that a
 * lookup costs its cache misses and not also page-table walks. Only the
 * 2 MiB-aligned interior is advised; failure is harmless. */
static void advise_huge(void *p, size_t len)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	const uintptr_t huge = (uintptr_t)2 << 20;
	uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1);
	uintptr_t end = ((uintptr_t)p + len) & ~(huge - 1);
	if (end > start)
		(void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
	(void)p;
	(void)len;
#endif
}

/* len zeroed bytes at a cache-line boundary (*aligned), from calloc, so
 * that the system still zeroes them lazily (aligned_alloc and a memset
 * would make the whole map resident at start). calloc aligns to 16: a
 * 32-byte entry would straddle two lines every other one, and a prefetch
 * of its start fetches only the line with its key. Returns what to free. */
static void *calloc_lines(size_t len, void **aligned)
{
	const uintptr_t line = 64;
	void *p = calloc(1, len + line);
	if (p != NULL)
		*aligned = (void *)(((uintptr_t)p + line - 1) & ~(line - 1));
	return p;
}

int affinity_init(struct affinity *a, uint32_t cap, uint64_t ttl_ms)
{
	memset(a, 0, sizeof(*a));
	if (cap == 0 || cap > (1u << 30))
		return -EINVAL;
	uint64_t n = 16;
	while (n < 2ull * cap)
		n *= 2;
	a->e_mem = calloc_lines((size_t)cap * sizeof(*a->e), (void **)&a->e);
	a->slots_mem = calloc_lines((size_t)n * sizeof(*a->slots),
				    (void **)&a->slots);
	uint32_t g = 1;
	while (g < cap && g < AFFINITY_GHOSTS)
		g *= 2;
	a->ghost = calloc(g, sizeof(*a->ghost));
	a->ghost_mask = g - 1;
	if (a->e_mem == NULL || a->slots_mem == NULL || a->ghost == NULL) {
		affinity_finish(a);
		return -ENOMEM;
	}
	advise_huge(a->e, (size_t)cap * sizeof(*a->e));
	advise_huge(a->slots, (size_t)n * sizeof(*a->slots));
	a->mask = (uint32_t)(n - 1);
	a->cap = cap;
	a->free_head = AFFINITY_NIL;
	a->lru_head = AFFINITY_NIL;
	a->lru_tail = AFFINITY_NIL;
	a->ttl_ms = ttl_ms;
	return 0;
}

void affinity_finish(struct affinity *a)
{
	free(a->e_mem);
	free(a->slots_mem);
	free(a->ghost);
	memset(a, 0, sizeof(*a));
}

static void lru_unlink(struct affinity *a, uint32_t i)
{
	struct affinity_entry *x = &a->e[i];
	if (x->prev != AFFINITY_NIL)
		a->e[x->prev].next = x->next;
	else
		a->lru_head = x->next;
	if (x->next != AFFINITY_NIL)
		a->e[x->next].prev = x->prev;
	else
		a->lru_tail = x->prev;
}

static void lru_push_head(struct affinity *a, uint32_t i)
{
	struct affinity_entry *x = &a->e[i];
	x->prev = AFFINITY_NIL;
	x->next = a->lru_head;
	if (a->lru_head != AFFINITY_NIL)
		a->e[a->lru_head].prev = i;
	else
		a->lru_tail = i;
	a->lru_head = i;
}

/* Slot of key, or AFFINITY_NIL. */
static uint32_t find_slot(const struct affinity *a, uint64_t key)
{
	uint64_t h = mix64(key);
	uint32_t tag = (uint32_t)(h >> 32);
	for (uint32_t i = (uint32_t)h & a->mask;; i = (i + 1) & a->mask) {
		const struct affinity_slot *s = &a->slots[i];
		if (s->ref == 0)
			return AFFINITY_NIL;
		if (s->tag == tag && a->e[s->ref - 1].key == key)
			return i;
	}
}

/* An entry's outcome (struct affinity, back). */
static void outcome(struct affinity *a, bool back)
{
	const double keep = 1 - 1 / AFFINITY_BACK_MEMORY;
	a->back_w = a->back_w * keep + back;
	a->lapsed_w = a->lapsed_w * keep + !back;
	if (back)
		a->back++;
	else
		a->lapsed++;
}

/* Empties slot i (backward shift: no tombstones, probes stay short), and
 * returns its entry to the free list. */
static void remove_at(struct affinity *a, uint32_t i)
{
	uint32_t ent = a->slots[i].ref - 1;

	lru_unlink(a, ent);
	a->e[ent].endpoint = AFFINITY_NIL; /* free: affinity_scan skips it */
	a->e[ent].next = a->free_head;
	a->free_head = ent;
	a->used--;
	for (uint32_t j = i;;) {
		j = (j + 1) & a->mask;
		uint32_t ref = a->slots[j].ref;
		if (ref == 0)
			break;
		uint32_t home = (uint32_t)mix64(a->e[ref - 1].key) & a->mask;
		bool stays = i <= j ? (home > i && home <= j)
				    : (home > i || home <= j);
		if (!stays) {
			a->slots[i] = a->slots[j];
			i = j;
		}
	}
	a->slots[i] = (struct affinity_slot){ 0, 0 };
}

/* A key's place in the ghosts (struct affinity, ghost) and its tag
 * there (never 0). */
static inline uint32_t *ghost_of(const struct affinity *a, uint64_t h,
				 uint32_t *tag)
{
	*tag = (uint32_t)(h >> 32) | 1u;
	return &a->ghost[(uint32_t)h & a->ghost_mask];
}

/* remove_at of an entry that expired or was evicted: lapsed, unless its
 * key came back, and remembered among the ghosts. */
static void lapse_at(struct affinity *a, uint32_t i)
{
	const struct affinity_entry *x = &a->e[a->slots[i].ref - 1];
	if (!(x->stamp & AFFINITY_BACK)) {
		outcome(a, false);
		uint32_t tag, *g = ghost_of(a, mix64(x->key), &tag);
		*g = tag;
	}
	remove_at(a, i);
}

/* A new entry for a key (hash h) stored again after it lapsed: its
 * outcome was back after all. */
static void ghost_back(struct affinity *a, uint64_t h)
{
	uint32_t tag, *g = ghost_of(a, h, &tag);
	if (*g != tag)
		return;
	*g = 0;
	a->lapsed_w = a->lapsed_w > 1 ? a->lapsed_w - 1 : 0;
	a->lapsed--;
	outcome(a, true);
}

static bool expired(const struct affinity *a, const struct affinity_entry *x,
		    uint64_t now_ms)
{
	uint64_t last = affinity_ms(x);
	return now_ms > last && now_ms - last >= a->ttl_ms;
}

bool affinity_get(struct affinity *a, uint64_t key, uint64_t now_ms,
		  uint32_t *endpoint, uint32_t *gen)
{
	uint64_t last;
	return affinity_get_last(a, key, now_ms, endpoint, gen, &last);
}

bool affinity_get_last(struct affinity *a, uint64_t key, uint64_t now_ms,
		       uint32_t *endpoint, uint32_t *gen, uint64_t *last_ms)
{
	uint16_t prev;
	bool shared;
	return affinity_get_turn(a, key, now_ms, 0, endpoint, gen, last_ms, &prev,
				 &shared);
}

bool affinity_get_turn(struct affinity *a, uint64_t key, uint64_t now_ms,
		       uint16_t turn, uint32_t *endpoint, uint32_t *gen,
		       uint64_t *last_ms, uint16_t *prev, bool *shared)
{
	uint32_t i = find_slot(a, key);
	*prev = 0;
	*shared = false;
	if (i != AFFINITY_NIL) {
		struct affinity_entry *x = &a->e[a->slots[i].ref - 1];
		if (!expired(a, x, now_ms)) {
			*endpoint = x->endpoint;
			*gen = x->gen;
			*last_ms = affinity_ms(x);
			*prev = affinity_turn(x);
			if (!(x->stamp & AFFINITY_BACK)) {
				x->stamp |= AFFINITY_BACK;
				outcome(a, true);
			}
			if (turn != 0)
				x->stamp = affinity_stamp(x, *last_ms, turn) |
					   (turn <= *prev ? AFFINITY_SHARED : 0);
			*shared = (x->stamp & AFFINITY_SHARED) != 0;
			a->hits++;
			return true;
		}
		lapse_at(a, i);
		a->expirations++;
	}
	a->misses++;
	return false;
}

/* key's live entry without a side effect, its endpoint, generation and
 * last refresh set; NULL when it has none: every peek's lookup. */
static const struct affinity_entry *peek_entry(const struct affinity *a,
					       uint64_t key, uint64_t now_ms,
					       uint32_t *endpoint, uint32_t *gen,
					       uint64_t *last_ms)
{
	uint32_t i = find_slot(a, key);
	if (i == AFFINITY_NIL)
		return NULL;
	const struct affinity_entry *x = &a->e[a->slots[i].ref - 1];
	if (expired(a, x, now_ms))
		return NULL;
	*endpoint = x->endpoint;
	*gen = x->gen;
	*last_ms = affinity_ms(x);
	return x;
}

bool affinity_peek_turn(const struct affinity *a, uint64_t key,
			uint64_t now_ms, uint32_t *endpoint, uint32_t *gen,
			uint64_t *last_ms, uint16_t *turn)
{
	const struct affinity_entry *x = peek_entry(a, key, now_ms, endpoint, gen,
						    last_ms);
	if (x != NULL)
		*turn = x->stamp & AFFINITY_SHARED ? 0 : affinity_turn(x);
	return x != NULL;
}

bool affinity_peek_shared(const struct affinity *a, uint64_t key,
			  uint64_t now_ms, uint32_t *endpoint, uint32_t *gen,
			  uint64_t *last_ms, bool *shared)
{
	const struct affinity_entry *x = peek_entry(a, key, now_ms, endpoint, gen,
						    last_ms);
	if (x != NULL)
		*shared = (x->stamp & AFFINITY_SHARED) != 0;
	return x != NULL;
}

bool affinity_peek(const struct affinity *a, uint64_t key, uint64_t now_ms,
		   uint32_t *endpoint, uint32_t *gen, uint64_t *last_ms)
{
	uint16_t turn;
	return affinity_peek_turn(a, key, now_ms, endpoint, gen, last_ms, &turn);
}

uint32_t affinity_expire(struct affinity *a, uint64_t now_ms, uint32_t max)
{
	uint32_t n = 0;
	while (n < max && a->lru_tail != AFFINITY_NIL &&
	       expired(a, &a->e[a->lru_tail], now_ms)) {
		uint32_t i = find_slot(a, a->e[a->lru_tail].key);
		assert(i != AFFINITY_NIL);
		lapse_at(a, i);
		a->expirations++;
		n++;
	}
	return n;
}

struct affinity_entry *affinity_put(struct affinity *a, uint64_t key,
				    uint32_t endpoint, uint32_t gen,
				    uint64_t last_ms, uint16_t turn)
{
	assert(endpoint != AFFINITY_NIL); /* the free-entry mark */
	uint32_t i = find_slot(a, key);
	if (i != AFFINITY_NIL) {
		uint32_t ent = a->slots[i].ref - 1;
		struct affinity_entry *x = &a->e[ent];
		x->endpoint = endpoint;
		x->gen = gen;
		x->stamp = affinity_stamp(x, last_ms,
					  turn != 0 ? turn : affinity_turn(x));
		if (a->lru_head != ent) {
			lru_unlink(a, ent);
			lru_push_head(a, ent);
		}
		return x;
	}
	/* A little housekeeping per insert keeps expired entries from
	 * occupying the map until it fills. */
	affinity_expire(a, last_ms, 2);
	if (a->used == a->cap) {
		uint32_t s = find_slot(a, a->e[a->lru_tail].key);
		assert(s != AFFINITY_NIL);
		lapse_at(a, s);
		a->evictions++;
	}
	uint32_t ent;
	if (a->free_head != AFFINITY_NIL) {
		ent = a->free_head;
		a->free_head = a->e[ent].next;
	} else {
		ent = a->high++;
	}
	a->e[ent] = (struct affinity_entry){
		.key = key, .stamp = affinity_stamp(NULL, last_ms, turn),
		.endpoint = endpoint, .gen = gen,
	};
	lru_push_head(a, ent);
	a->used++;
	uint64_t h = mix64(key);
	ghost_back(a, h);
	uint32_t j = (uint32_t)h & a->mask;
	while (a->slots[j].ref != 0)
		j = (j + 1) & a->mask;
	a->slots[j] = (struct affinity_slot){ (uint32_t)(h >> 32), ent + 1 };
	return &a->e[ent];
}

void affinity_put_entry(struct affinity *a, const struct affinity_entry *x)
{
	affinity_put(a, x->key, x->endpoint, x->gen, affinity_ms(x),
		     affinity_turn(x))->stamp |= x->stamp & (AFFINITY_SHARED | AFFINITY_BACK);
}

bool affinity_refresh(struct affinity *a, uint64_t key, uint32_t endpoint,
		      uint32_t gen, uint64_t last_ms)
{
	uint32_t i = find_slot(a, key);
	if (i == AFFINITY_NIL)
		return false;
	uint32_t ent = a->slots[i].ref - 1;
	struct affinity_entry *x = &a->e[ent];
	if (x->endpoint != endpoint || x->gen != gen || expired(a, x, last_ms) ||
	    last_ms < affinity_ms(x)) /* the LRU list stays ordered by time */
		return false;
	x->stamp = affinity_stamp(x, last_ms, affinity_turn(x));
	if (a->lru_head != ent) {
		lru_unlink(a, ent);
		lru_push_head(a, ent);
	}
	return true;
}

bool affinity_remove(struct affinity *a, uint64_t key, uint32_t endpoint)
{
	uint32_t i = find_slot(a, key);
	if (i == AFFINITY_NIL)
		return false;
	if (endpoint != AFFINITY_NIL &&
	    a->e[a->slots[i].ref - 1].endpoint != endpoint)
		return false;
	remove_at(a, i);
	return true;
}

int affinity_scan(const struct affinity *a, uint32_t *pos, uint32_t max,
		  affinity_scan_fn fn, void *arg)
{
	uint32_t i = *pos;
	uint32_t end = a->high;
	if (i < end && max < end - i)
		end = i + max;
	for (; i < end; i++) {
		const struct affinity_entry *x = &a->e[i];
		if (x->endpoint == AFFINITY_NIL)
			continue;
		int rc = fn(arg, x);
		if (rc != 0) {
			*pos = i + 1;
			return rc;
		}
	}
	if (i > *pos)
		*pos = i;
	return 0;
}
