/* sim_map.c - linear-probing hash map used by policies and analyses (no deletion). */
#include "sim_map.h"
#include "sim_rng.h"

#include <errno.h>
#include <stdlib.h>

void sim_map_init(struct sim_map *m)
{
	*m = (struct sim_map){ 0 };
}

void sim_map_finish(struct sim_map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	sim_map_init(m);
}

uint64_t *sim_map_get(const struct sim_map *m, uint64_t key)
{
	if (m->cap == 0)
		return NULL;
	size_t mask = m->cap - 1;
	for (size_t i = sim_rng_mix(key) & mask;; i = (i + 1) & mask) {
		if (!m->used[i])
			return NULL;
		if (m->keys[i] == key)
			return &m->vals[i];
	}
}

static int map_grow(struct sim_map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	uint64_t *nk = calloc(ncap, sizeof(*nk));
	uint64_t *nv = calloc(ncap, sizeof(*nv));
	uint8_t *nu = calloc(ncap, 1);
	if (!nk || !nv || !nu) {
		free(nk);
		free(nv);
		free(nu);
		return -ENOMEM;
	}
	for (size_t j = 0; j < m->cap; j++) {
		if (!m->used[j])
			continue;
		size_t i = sim_rng_mix(m->keys[j]) & (ncap - 1);
		while (nu[i])
			i = (i + 1) & (ncap - 1);
		nu[i] = 1;
		nk[i] = m->keys[j];
		nv[i] = m->vals[j];
	}
	free(m->keys);
	free(m->vals);
	free(m->used);
	m->keys = nk;
	m->vals = nv;
	m->used = nu;
	m->cap = ncap;
	return 0;
}

int sim_map_put(struct sim_map *m, uint64_t key, uint64_t val)
{
	uint64_t *v = sim_map_get(m, key);
	if (v) {
		*v = val;
		return 0;
	}
	if ((m->len + 1) * 2 > m->cap) {
		int rc = map_grow(m);
		if (rc < 0)
			return rc;
	}
	size_t mask = m->cap - 1;
	size_t i = sim_rng_mix(key) & mask;
	while (m->used[i])
		i = (i + 1) & mask;
	m->used[i] = 1;
	m->keys[i] = key;
	m->vals[i] = val;
	m->len++;
	return 0;
}
