/* sim_kv.h - an endpoint's KV prefix cache: fixed capacity in 512-token blocks, LRU. */
#ifndef WARMLANE_SIM_KV_H
#define WARMLANE_SIM_KV_H

#include <stdint.h>

#define SIM_KV_BLOCK_TOKENS 512

struct sim_kv_node {
	uint64_t key;
	uint32_t prev, next; /* LRU list, SIM_KV_NIL at the ends */
};

struct sim_kv {
	uint32_t cap;   /* blocks */
	uint32_t used;
	uint32_t head;  /* most recently used */
	uint32_t tail;  /* least recently used: evicted first */
	struct sim_kv_node *nodes;
	uint32_t *slots; /* open addressing: node index + 1, 0 = empty */
	uint32_t mask;
};

/* Allocates a cache of cap blocks (cap may be 0: caches nothing). 0 or -ENOMEM. */
int sim_kv_init(struct sim_kv *kv, uint32_t cap);

/* Frees the cache's memory. */
void sim_kv_finish(struct sim_kv *kv);

/* How many leading blocks of blocks[0..n) the cache holds, stopping at the
 * first miss (a block is reusable only if all blocks before it are). Does not
 * change recency. */
uint32_t sim_kv_prefix(const struct sim_kv *kv, const uint64_t *blocks, uint32_t n);

/* Prefills a prompt: returns the leading hits as sim_kv_prefix does, then
 * makes every block of the prompt resident, block 0 the most recent (so a
 * prompt's tail is evicted before its head), evicting least recently used
 * blocks as needed. A prompt longer than the cache keeps its first cap blocks. */
uint32_t sim_kv_use(struct sim_kv *kv, const uint64_t *blocks, uint32_t n);

#endif
