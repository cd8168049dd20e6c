/* affinity.h - the affinity map: 64-bit key -> endpoint, fixed capacity, idle TTL, LRU eviction. */
#ifndef WARMLANE_CORE_AFFINITY_H
#define WARMLANE_CORE_AFFINITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mix.h"

#define AFFINITY_NIL UINT32_MAX

/* One entry: 32 bytes, in a stable array (indices never move, so the LRU
 * list links by index). */
struct affinity_entry {
	uint64_t key;
	uint64_t stamp;     /* the last refresh in ms (its low AFFINITY_MS_BITS),
			     * whether the key came back (AFFINITY_BACK),
			     * whether its turns ever went back
			     * (AFFINITY_SHARED) and the turn of its last
			     * request (the top 16 bits; 0: unknown):
			     * affinity_ms, affinity_turn */
	uint32_t prev;      /* LRU neighbours; AFFINITY_NIL at the ends */
	uint32_t next;      /* (free list link when unused) */
	uint32_t endpoint;  /* AFFINITY_NIL: the entry is free */
	uint32_t gen;       /* endpoint generation when stored */
};

/* A millisecond clock fits 46 bits for 2,200 years; of the 18 left, one
 * says the key came back (a lookup found the entry live: affinity_back),
 * one that a request's turn (core_request.turn) did not step forward from
 * the key's last (the same turn again, or an earlier one: conversations
 * that open alike share the key, or one was retried or edited), the 16
 * others hold the last request's turn, where a 33rd byte would cost the
 * entry its own cache line. */
#define AFFINITY_MS_BITS 46
#define AFFINITY_MS_MASK ((UINT64_C(1) << AFFINITY_MS_BITS) - 1)
#define AFFINITY_BACK (UINT64_C(1) << AFFINITY_MS_BITS)
#define AFFINITY_SHARED (UINT64_C(1) << 47)
#define AFFINITY_TURN_SHIFT 48

static inline uint64_t affinity_ms(const struct affinity_entry *x)
{
	return x->stamp & AFFINITY_MS_MASK;
}

static inline uint16_t affinity_turn(const struct affinity_entry *x)
{
	return (uint16_t)(x->stamp >> AFFINITY_TURN_SHIFT);
}

/* A stamp of ms and turn, keeping x's AFFINITY_SHARED and AFFINITY_BACK
 * (x NULL: none). */
static inline uint64_t affinity_stamp(const struct affinity_entry *x,
				      uint64_t ms, uint16_t turn)
{
	return (ms & AFFINITY_MS_MASK) | (uint64_t)turn << AFFINITY_TURN_SHIFT |
	       (x != NULL ? x->stamp & (AFFINITY_SHARED | AFFINITY_BACK) : 0);
}

/* One slot of the open-addressing index: 8 bytes, at most half full. */
struct affinity_slot {
	uint32_t tag;       /* high half of the key's mixed hash */
	uint32_t ref;       /* entry index + 1; 0: empty */
};

struct affinity {
	struct affinity_entry *e;   /* cache-line aligned: an entry in one line */
	struct affinity_slot *slots;
	uint32_t mask;          /* slots - 1 */
	uint32_t cap;           /* entries */
	uint32_t used;          /* live entries */
	uint32_t high;          /* entries ever handed out */
	uint32_t free_head;     /* recycled entries */
	uint32_t lru_head;      /* most recent */
	uint32_t lru_tail;      /* least recent */
	uint64_t ttl_ms;
	uint64_t hits, misses, evictions, expirations;
	/* Whether keys come back (affinity_back): each entry stored once has
	 * one outcome, back (its first lookup that found it live) or lapsed
	 * (expired or evicted before that; not removed by the caller). Both
	 * counted, and the last outcomes' weights, each older one's decayed
	 * by 1 - 1 / AFFINITY_BACK_MEMORY. */
	uint64_t back, lapsed;
	double back_w, lapsed_w;
	/* The last lapsed keys' tags, one per place (a direct-mapped set of
	 * up to AFFINITY_GHOSTS): a key stored again while its tag is here
	 * came back after its entry's TTL, its outcome back after all. */
	uint32_t *ghost;
	uint32_t ghost_mask;
	void *e_mem, *slots_mem;    /* what was allocated (e, slots inside) */
};

/* The outcomes affinity_back weighs, about: the last few hundred keys. */
#define AFFINITY_BACK_MEMORY 512.0
/* Lapsed keys remembered (at most; no more than the map's capacity):
 * about what a fleet's prefix caches hold, so that a key back after
 * them finds no cache to keep anyway (16 KiB). */
#define AFFINITY_GHOSTS 4096u

/* The share of the last outcomes (about AFFINITY_BACK_MEMORY) that came
 * back, *n their weight (fewer at the start). An entry's outcome is known
 * at its first return, or when its idle TTL ends without one (and turned
 * back if the key is stored again while still among the ghosts): the
 * first outcomes lean "back". */
static inline double affinity_back(const struct affinity *a, double *n)
{
	*n = a->back_w + a->lapsed_w;
	return *n > 0 ? a->back_w / *n : 0;
}

/* Bytes the map holds per entry of capacity (entry plus its index
 * share). */
#define AFFINITY_BYTES_PER_ENTRY(a) \
	(sizeof(struct affinity_entry) + \
	 (double)((a)->mask + 1) * sizeof(struct affinity_slot) / (a)->cap)

/* Allocates a map of cap entries (1 .. 2^30) with an idle TTL. Memory is
 * zeroed lazily by the system, so resident size grows with use. Returns 0,
 * -EINVAL or -ENOMEM. */
int affinity_init(struct affinity *a, uint32_t cap, uint64_t ttl_ms);

/* Frees what a owns; a may be zeroed. */
void affinity_finish(struct affinity *a);

/* Looks key up at now_ms. A live entry gives true with *endpoint and *gen
 * set (counted as a hit; the entry is not refreshed). An expired entry is
 * dropped. Counts a miss otherwise. */
bool affinity_get(struct affinity *a, uint64_t key, uint64_t now_ms,
		  uint32_t *endpoint, uint32_t *gen);

/* As affinity_get, and *last_ms is the entry's last refresh. */
bool affinity_get_last(struct affinity *a, uint64_t key, uint64_t now_ms,
		       uint32_t *endpoint, uint32_t *gen, uint64_t *last_ms);

/* As affinity_get_last for a request of turn turn (0: unknown): *prev is
 * the turn the entry held (0: unknown), and from now on the entry holds
 * turn, unless that is 0; *shared: the key's turns ever failed to step
 * forward, this one's included (AFFINITY_SHARED). */
bool affinity_get_turn(struct affinity *a, uint64_t key, uint64_t now_ms,
		       uint16_t turn, uint32_t *endpoint, uint32_t *gen,
		       uint64_t *last_ms, uint16_t *prev, bool *shared);
/* affinity_get without a side effect (the command socket's show and
 * explain): no hit or miss counted, an expired entry left for the next
 * lookup; also gives the entry's last refresh. */
bool affinity_peek(const struct affinity *a, uint64_t key, uint64_t now_ms,
		   uint32_t *endpoint, uint32_t *gen, uint64_t *last_ms);
/* affinity_put of what x (another map's entry) holds, its marks of a key
 * whose turns failed to step forward (AFFINITY_SHARED) and of one that
 * came back (AFFINITY_BACK) too. */
void affinity_put_entry(struct affinity *a, const struct affinity_entry *x);
/* As affinity_peek, and *shared as affinity_get_turn's (without this
 * request's turn). */
bool affinity_peek_shared(const struct affinity *a, uint64_t key,
			  uint64_t now_ms, uint32_t *endpoint, uint32_t *gen,
			  uint64_t *last_ms, bool *shared);
/* As affinity_peek, and *turn is the turn the entry holds: 0 when unknown
 * or when the key's turns ever failed to step forward (AFFINITY_SHARED:
 * perhaps not one conversation's). */
bool affinity_peek_turn(const struct affinity *a, uint64_t key,
			uint64_t now_ms, uint32_t *endpoint, uint32_t *gen,
			uint64_t *last_ms, uint16_t *turn);

/* The prefetch helpers are inlined whatever the optimisation level: GCC
 * 12 takes a function whose only effect is __builtin_prefetch for one
 * without side effects, and at -O2 (dpkg-buildflags' level), where it
 * does not inline them, or with LTO it drops their calls (ipa-modref):
 * core_prefetch compiled to a bare `ret` there, and the agent ran 35%
 * slower at 10^6 keys (docs/operations.md). */
#if defined(__GNUC__)
#define AFFINITY_PREFETCH_FN static inline __attribute__((always_inline))
#else
#define AFFINITY_PREFETCH_FN static inline
#endif

/* Starts loading the index slot of key into the cache, so that a lookup
 * issued after some other work finds it there. */
AFFINITY_PREFETCH_FN void affinity_prefetch(const struct affinity *a,
					     uint64_t key)
{
#if defined(__GNUC__)
	__builtin_prefetch(&a->slots[(uint32_t)mix64(key) & a->mask]);
#else
	(void)a;
	(void)key;
#endif
}

/* The later, dependent steps of a lookup, for a caller that overlaps the
 * lookups of several keys (core_prefetch): the entry key's slot points to
 * (this reads the slots: issue it once affinity_prefetch has had time),
 * then that entry's LRU neighbours, which a refresh relinks (reads the
 * entry). */
/* Slots a prefetch step follows from a key's home: at half full, linear
 * probing leaves about a third of the keys past their home slot, almost
 * all within a few slots (8 to a cache line). */
#define AFFINITY_PREFETCH_PROBES 8

/* The entry of the first slot from key's home with key's tag (not
 * checked: the key itself), or NULL at an empty slot or after
 * AFFINITY_PREFETCH_PROBES slots. */
static inline const struct affinity_entry *
affinity_home(const struct affinity *a, uint64_t key)
{
	uint64_t h = mix64(key);
	uint32_t tag = (uint32_t)(h >> 32);
	uint32_t i = (uint32_t)h & a->mask;
	for (unsigned n = 0; n < AFFINITY_PREFETCH_PROBES; n++) {
		const struct affinity_slot *s = &a->slots[i];
		if (s->ref == 0)
			return NULL;
		if (s->tag == tag)
			return &a->e[s->ref - 1];
		i = (i + 1) & a->mask;
	}
	return NULL;
}

AFFINITY_PREFETCH_FN void affinity_prefetch_entry(const struct affinity *a,
						   uint64_t key)
{
#if defined(__GNUC__)
	const struct affinity_entry *x = affinity_home(a, key);
	if (x != NULL)
		__builtin_prefetch(x, 1);
#else
	(void)a;
	(void)key;
#endif
}

AFFINITY_PREFETCH_FN void affinity_prefetch_links(const struct affinity *a,
						   uint64_t key)
{
#if defined(__GNUC__)
	const struct affinity_entry *x = affinity_home(a, key);
	if (x == NULL || x->key != key)
		return;
	if (x->prev != AFFINITY_NIL)
		__builtin_prefetch(&a->e[x->prev], 1);
	if (x->next != AFFINITY_NIL)
		__builtin_prefetch(&a->e[x->next], 1);
#else
	(void)a;
	(void)key;
#endif
}

/* Maps key to endpoint/gen, fresh at last_ms, most recently used, and to
 * turn unless that is 0 (an entry's turn is kept then; a new entry's is
 * 0). A full map first drops its least recently used entry. Never
 * allocates. Returns the entry. */
struct affinity_entry *affinity_put(struct affinity *a, uint64_t key,
				    uint32_t endpoint, uint32_t gen,
				    uint64_t last_ms, uint16_t turn);

/* Refreshes key's entry to last_ms (most recently used) only when it is
 * live at last_ms and points to endpoint/gen; never inserts, never moves
 * an entry, counts no hit or miss. Returns whether it refreshed. */
bool affinity_refresh(struct affinity *a, uint64_t key, uint32_t endpoint,
		      uint32_t gen, uint64_t last_ms);

/* Drops key's entry; if endpoint is not AFFINITY_NIL, only when the entry
 * points to it. Returns true when an entry was dropped. */
bool affinity_remove(struct affinity *a, uint64_t key, uint32_t endpoint);

/* Drops up to max entries idle past the TTL, oldest first. Returns how
 * many. */
uint32_t affinity_expire(struct affinity *a, uint64_t now_ms, uint32_t max);

/* Called by affinity_scan for each live entry; a non-zero return stops
 * the scan. */
typedef int (*affinity_scan_fn)(void *arg, const struct affinity_entry *x);

/* A resumable walk in entry-array order (sliced snapshots): visits the
 * entry slots *pos .. *pos + max - 1 that are below the high-water mark,
 * calls fn on the live ones (expired ones included: the caller filters),
 * and leaves *pos after the last slot visited. At most max slots per call,
 * live or free, so a call's cost is bounded whatever the map holds. The
 * walk is over once *pos >= a->high. Between calls the map may change:
 * each slot is read once, as it is when reached (see core.h,
 * core_affinity_cursor_next). Returns 0 or fn's first non-zero return. */
int affinity_scan(const struct affinity *a, uint32_t *pos, uint32_t max,
		  affinity_scan_fn fn, void *arg);

/* The entries from least to most recent: start with affinity_oldest, go on
 * with affinity_newer; AFFINITY_NIL ends. */
static inline uint32_t affinity_oldest(const struct affinity *a)
{
	return a->lru_tail;
}

static inline uint32_t affinity_newer(const struct affinity *a, uint32_t i)
{
	return a->e[i].prev;
}

#endif
