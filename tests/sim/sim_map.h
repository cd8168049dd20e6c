/* sim_map.h - a growable open-addressing map from 64-bit keys to 64-bit values. */
#ifndef WARMLANE_SIM_MAP_H
#define WARMLANE_SIM_MAP_H

#include <stddef.h>
#include <stdint.h>

struct sim_map {
	uint64_t *keys;
	uint64_t *vals;
	uint8_t *used;
	size_t cap; /* power of two, 0 before the first insert */
	size_t len;
};

/* An empty map; allocates nothing until the first put. */
void sim_map_init(struct sim_map *m);

/* Frees the map's arrays; the map is empty and reusable afterwards. */
void sim_map_finish(struct sim_map *m);

/* Pointer to the value of key, or NULL when absent. Valid until the next put. */
uint64_t *sim_map_get(const struct sim_map *m, uint64_t key);

/* Sets key to val, inserting it if needed. 0, or -ENOMEM. */
int sim_map_put(struct sim_map *m, uint64_t key, uint64_t val);

#endif
