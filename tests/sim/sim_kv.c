/* sim_kv.c - LRU block cache: hash index with backward-shift deletion plus a linked list. */
#include "sim_kv.h"
#include "sim_rng.h"

#include <errno.h>
#include <stdlib.h>

#define SIM_KV_NIL UINT32_MAX

int sim_kv_init(struct sim_kv *kv, uint32_t cap)
{
	*kv = (struct sim_kv){ .cap = cap, .head = SIM_KV_NIL, .tail = SIM_KV_NIL };
	uint32_t size = 16;
	while (size < 2 * (uint64_t)cap + 2)
		size *= 2;
	kv->nodes = calloc(cap ? cap : 1, sizeof(*kv->nodes));
	kv->slots = calloc(size, sizeof(*kv->slots));
	if (!kv->nodes || !kv->slots) {
		sim_kv_finish(kv);
		return -ENOMEM;
	}
	kv->mask = size - 1;
	return 0;
}

void sim_kv_finish(struct sim_kv *kv)
{
	free(kv->nodes);
	free(kv->slots);
	kv->nodes = NULL;
	kv->slots = NULL;
}

/* Slot holding key, or the empty slot where it would go. */
static uint32_t kv_slot(const struct sim_kv *kv, uint64_t key)
{
	uint32_t i = (uint32_t)sim_rng_mix(key) & kv->mask;
	while (kv->slots[i] && kv->nodes[kv->slots[i] - 1].key != key)
		i = (i + 1) & kv->mask;
	return i;
}

static void kv_unlink(struct sim_kv *kv, uint32_t n)
{
	struct sim_kv_node *x = &kv->nodes[n];
	if (x->prev != SIM_KV_NIL)
		kv->nodes[x->prev].next = x->next;
	else
		kv->head = x->next;
	if (x->next != SIM_KV_NIL)
		kv->nodes[x->next].prev = x->prev;
	else
		kv->tail = x->prev;
}

static void kv_push_front(struct sim_kv *kv, uint32_t n)
{
	struct sim_kv_node *x = &kv->nodes[n];
	x->prev = SIM_KV_NIL;
	x->next = kv->head;
	if (kv->head != SIM_KV_NIL)
		kv->nodes[kv->head].prev = n;
	kv->head = n;
	if (kv->tail == SIM_KV_NIL)
		kv->tail = n;
}

/* Removes the index entry at slot i, shifting later entries of the probe run back. */
static void kv_slot_delete(struct sim_kv *kv, uint32_t i)
{
	uint32_t j = i;
	for (;;) {
		kv->slots[i] = 0;
		for (;;) {
			j = (j + 1) & kv->mask;
			if (!kv->slots[j])
				return;
			uint32_t home = (uint32_t)sim_rng_mix(kv->nodes[kv->slots[j] - 1].key) & kv->mask;
			/* Move j back to i unless its home lies cyclically in (i, j]. */
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		kv->slots[i] = kv->slots[j];
		i = j;
	}
}

uint32_t sim_kv_prefix(const struct sim_kv *kv, const uint64_t *blocks, uint32_t n)
{
	uint32_t h = 0;
	if (kv->cap == 0)
		return 0;
	while (h < n && kv->slots[kv_slot(kv, blocks[h])])
		h++;
	return h;
}

uint32_t sim_kv_use(struct sim_kv *kv, const uint64_t *blocks, uint32_t n)
{
	uint32_t hits = sim_kv_prefix(kv, blocks, n);
	if (kv->cap == 0)
		return 0;
	uint32_t m = n < kv->cap ? n : kv->cap;
	for (uint32_t k = m; k-- > 0;) {
		uint32_t s = kv_slot(kv, blocks[k]);
		if (kv->slots[s]) {
			uint32_t node = kv->slots[s] - 1;
			kv_unlink(kv, node);
			kv_push_front(kv, node);
			continue;
		}
		uint32_t node;
		if (kv->used < kv->cap) {
			node = kv->used++;
		} else {
			node = kv->tail;
			kv_unlink(kv, node);
			kv_slot_delete(kv, kv_slot(kv, kv->nodes[node].key));
			s = kv_slot(kv, blocks[k]);
		}
		kv->nodes[node].key = blocks[k];
		kv->slots[s] = node + 1;
		kv_push_front(kv, node);
	}
	return hits;
}
