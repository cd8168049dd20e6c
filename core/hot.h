/* hot.h - the keys that are a large share of the traffic: a decayed count per key in a small direct-mapped table (docs/policy-v2.md, section 47). */
#ifndef WARMLANE_CORE_HOT_H
#define WARMLANE_CORE_HOT_H

#include <stdint.h>

#include "owned.h"

/* Places of the table: a key holds one while it is counted more often
 * than the keys that map to the same place (a collision takes one count
 * away from the holder; the place changes hands at zero), so a key of a
 * large share keeps its place against any number of rare ones. A share
 * worth routing on is at least a few percent of the traffic: at most a
 * few dozen such keys, in 4 KiB. */
#define HOT_SLOTS 256u
/* The counts' half-life: a share is the last minute's or so, as the
 * load it makes. */
#define HOT_HALF_LIFE_MS 60000u

struct hot_slot {
	uint64_t key;
	double n;               /* decayed count, on clk's scale */
};

struct hot {
	struct owned_clock clk; /* the decay scale (owned.h) */
	double total;           /* every key's count, on clk's scale */
	struct hot_slot slot[HOT_SLOTS];
};

/* An empty table whose clock starts at now_ms. */
void hot_init(struct hot *h, uint64_t now_ms);

/* Counts one decision of key at now_ms and returns key's share of the
 * decisions counted (decayed), 0 when another key holds its place. No
 * allocation: O(1), but once every 40 half-lives O(HOT_SLOTS). */
double hot_note(struct hot *h, uint64_t key, uint64_t now_ms);

/* Counts one decision whose key's share is never asked (a session's:
 * decide.c, step 3c) in the total only: it takes no place. */
void hot_tick(struct hot *h, uint64_t now_ms);

/* What hot_note would return, without counting (core_explain). */
double hot_peek(const struct hot *h, uint64_t key, uint64_t now_ms);

#endif
