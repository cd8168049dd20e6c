/* pool.c - the endpoint pool: add, update and remove endpoints at run time, find them by name and model. */
#include "pool.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#define NAME_SEED 0x7761726d6c616e65ull /* "warmlane" */
#define RDV_SALT  0x5244565f53454544ull /* "RDV_SEED" */

void pool_init(struct pool *p)
{
	memset(p, 0, sizeof(*p));
}

static void endpoint_free_names(struct pool_endpoint *e)
{
	free(e->backend);
	e->backend = NULL;
	free(e->server);
	e->server = NULL;
	free(e->key_id);
	e->key_id = NULL;
	e->backend_len = e->server_len = e->key_len = 0;
}

void pool_finish(struct pool *p)
{
	if (p->ep) {
		for (uint32_t i = 0; i < p->end; i++)
			endpoint_free_names(&p->ep[i]);
	}
	free(p->ep);
	free(p->by_name);
	for (uint32_t i = 0; i < p->n_models; i++)
		free(p->models[i].name);
	memset(p, 0, sizeof(*p));
}

static uint64_t name_hash(struct core_str b, struct core_str s,
			  struct core_str k)
{
	/* Chained seeds: the three fields cannot run into each other. */
	uint64_t h = XXH3_64bits_withSeed(b.ptr, b.len, NAME_SEED);
	h = XXH3_64bits_withSeed(s.ptr, s.len, h);
	return XXH3_64bits_withSeed(k.ptr, k.len, h ^ k.len);
}

/* A byte loop: names are a few bytes, where memcmp is a call and a
 * dispatch on the length (three per feedback). */
static bool str_eq(const char *a, uint32_t alen, struct core_str b)
{
	if (alen != b.len)
		return false;
	for (uint32_t i = 0; i < alen; i++)
		if (a[i] != b.ptr[i])
			return false;
	return true;
}

static bool endpoint_named(const struct pool_endpoint *e,
			   struct core_str backend, struct core_str server,
			   struct core_str key)
{
	return str_eq(e->backend, e->backend_len, backend) &&
	       str_eq(e->server, e->server_len, server) &&
	       str_eq(e->key_id, e->key_len, key);
}

bool pool_is_named(const struct pool *p, uint32_t idx, struct core_str backend,
		   struct core_str server, struct core_str key)
{
	return idx < p->end && p->ep[idx].live && backend.len > 0 &&
	       server.len > 0 && endpoint_named(&p->ep[idx], backend, server, key);
}

int pool_find(const struct pool *p, struct core_str backend,
	      struct core_str server, struct core_str key)
{
	if (p->by_name == NULL || backend.len == 0 || server.len == 0)
		return -ENOENT;
	uint64_t h = name_hash(backend, server, key);
	for (uint32_t i = (uint32_t)h & p->name_mask;; i = (i + 1) & p->name_mask) {
		uint32_t ref = p->by_name[i];
		if (ref == 0)
			return -ENOENT;
		const struct pool_endpoint *e = &p->ep[ref - 1];
		if (e->name_hash == h && endpoint_named(e, backend, server, key))
			return (int)(ref - 1);
	}
}

/* Rebuilds the name index for the live endpoints (pool changes only). */
static int rebuild_names(struct pool *p)
{
	uint32_t n = 16;
	while (n < 2 * p->cap)
		n *= 2;
	uint32_t *t = calloc(n, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->end; i++) {
		if (!p->ep[i].live)
			continue;
		uint32_t j = (uint32_t)p->ep[i].name_hash & (n - 1);
		while (t[j] != 0)
			j = (j + 1) & (n - 1);
		t[j] = i + 1;
	}
	free(p->by_name);
	p->by_name = t;
	p->name_mask = n - 1;
	return 0;
}

int pool_model_find(const struct pool *p, const char *name, size_t len)
{
	uint64_t h = XXH3_64bits(name, len);
	for (uint32_t i = (uint32_t)h & (POOL_MODEL_SLOTS - 1);;
	     i = (i + 1) & (POOL_MODEL_SLOTS - 1)) {
		uint16_t ref = p->model_slots[i];
		if (ref == 0)
			return -1;
		const struct pool_model *m = &p->models[ref - 1];
		if (m->hash == h && m->len == len && m->name != NULL &&
		    memcmp(m->name, name, len) == 0)
			return ref - 1;
	}
}

static void rebuild_model_slots(struct pool *p)
{
	memset(p->model_slots, 0, sizeof(p->model_slots));
	for (uint32_t id = 0; id < p->n_models; id++) {
		if (p->models[id].name == NULL)
			continue;
		uint32_t i = (uint32_t)p->models[id].hash & (POOL_MODEL_SLOTS - 1);
		while (p->model_slots[i] != 0)
			i = (i + 1) & (POOL_MODEL_SLOTS - 1);
		p->model_slots[i] = (uint16_t)(id + 1);
	}
}

static bool bit_get(const uint64_t *set, unsigned id)
{
	return (set[id / 64] >> (id % 64)) & 1u;
}

/* Frees the models no endpoint serves, except those in keep; forgets
 * 404 notes about them. */
static void collect_models(struct pool *p, const uint64_t *keep)
{
	for (uint32_t id = 0; id < p->n_models; id++) {
		struct pool_model *m = &p->models[id];
		if (m->name == NULL || m->refs > 0 || bit_get(keep, id))
			continue;
		free(m->name);
		m->name = NULL;
		for (uint32_t i = 0; i < p->end; i++)
			for (int k = 0; k < POOL_MISMATCH_SLOTS; k++)
				if (p->ep[i].mismatch[k].model == id)
					p->ep[i].mismatch[k].model = POOL_NO_MODEL;
	}
	rebuild_model_slots(p);
}

/* Id of name, creating it (refs 0) if new. Never frees an id in pending.
 * Returns the id, -ENOSPC or -ENOMEM. */
static int model_intern(struct pool *p, const char *name,
			const uint64_t *pending)
{
	size_t len = strlen(name);
	int id = pool_model_find(p, name, len);
	if (id >= 0)
		return id;
	uint32_t free_id = UINT32_MAX;
	for (int pass = 0; pass < 2 && free_id == UINT32_MAX; pass++) {
		for (uint32_t i = 0; i < p->n_models; i++) {
			if (p->models[i].name == NULL) {
				free_id = i;
				break;
			}
		}
		if (free_id == UINT32_MAX && p->n_models < POOL_MAX_MODELS)
			free_id = p->n_models;
		if (free_id == UINT32_MAX && pass == 0)
			collect_models(p, pending);
	}
	if (free_id == UINT32_MAX)
		return -ENOSPC;
	char *copy = malloc(len + 1);
	if (copy == NULL)
		return -ENOMEM;
	memcpy(copy, name, len + 1);
	p->models[free_id] = (struct pool_model){
		.name = copy, .len = len, .hash = XXH3_64bits(name, len),
	};
	if (free_id == p->n_models)
		p->n_models++;
	rebuild_model_slots(p);
	return (int)free_id;
}

static int check_config(const struct core_endpoint_config *cfg)
{
	if (cfg == NULL || cfg->backend == NULL || cfg->backend[0] == '\0' ||
	    cfg->server == NULL || cfg->server[0] == '\0')
		return -EINVAL;
	if (!isfinite(cfg->weight) || cfg->weight <= 0 ||
	    !isfinite(cfg->cost_per_mtok) || cfg->cost_per_mtok < 0)
		return -EINVAL;
	if (cfg->tier > CORE_TIER_MAX)
		return -EINVAL;
	if (cfg->n_models > 0 && cfg->models == NULL)
		return -EINVAL;
	for (size_t i = 0; i < cfg->n_models; i++)
		if (cfg->models[i] == NULL || cfg->models[i][0] == '\0')
			return -EINVAL;
	return 0;
}

/* Interns cfg's models into set. Returns 0, -ENOSPC or -ENOMEM. */
static int model_set(struct pool *p, const struct core_endpoint_config *cfg,
		     uint64_t *set)
{
	memset(set, 0, POOL_MODEL_WORDS * sizeof(*set));
	for (size_t i = 0; i < cfg->n_models; i++) {
		int id = model_intern(p, cfg->models[i], set);
		if (id < 0)
			return id;
		set[id / 64] |= 1ull << (id % 64);
	}
	return 0;
}

static void model_refs(struct pool *p, const uint64_t *set, int delta)
{
	for (uint32_t id = 0; id < p->n_models; id++)
		if (bit_get(set, id))
			p->models[id].refs += (uint32_t)delta;
}

static char *dup_or_null(const char *s)
{
	if (s == NULL || s[0] == '\0')
		return NULL;
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	if (d)
		memcpy(d, s, n);
	return d;
}

static void apply_meta(struct pool_endpoint *e,
		       const struct core_endpoint_config *cfg,
		       const uint64_t *set)
{
	e->weight = cfg->weight;
	e->inv_weight = 1.0 / cfg->weight;
	e->cost_per_mtok = cfg->cost_per_mtok;
	e->slots_cfg = cfg->slots;
	pool_slots_apply(e);
	e->disabled = cfg->disabled;
	e->tier = (uint8_t)(cfg->tier > 0 ? cfg->tier : 1);
	e->all_models = cfg->n_models == 0;
	memcpy(e->models, set, sizeof(e->models));
}

int pool_add(struct pool *p, const struct core_endpoint_config *cfg,
	     uint64_t now_ms)
{
	int rc = check_config(cfg);
	if (rc < 0)
		return rc;
	struct core_str kb = core_str_c(cfg->backend);
	struct core_str ks = core_str_c(cfg->server);
	struct core_str kk = core_str_c(cfg->key_id);
	if (pool_find(p, kb, ks, kk) >= 0)
		return -EEXIST;

	/* A free slot, else a new one at the end. */
	uint32_t idx = p->end;
	for (uint32_t i = 0; i < p->end; i++) {
		if (!p->ep[i].live) {
			idx = i;
			break;
		}
	}
	if (idx >= INT32_MAX)
		return -ENOSPC;
	if (idx >= p->cap) {
		uint32_t ncap = p->cap ? p->cap * 2 : 8;
		/* Line-aligned (struct pool_endpoint's groups); sizeof is a
		 * multiple of the alignment, as aligned_alloc wants. */
		struct pool_endpoint *n =
			aligned_alloc(_Alignof(struct pool_endpoint), ncap * sizeof(*n));
		if (n == NULL)
			return -ENOMEM;
		if (p->cap > 0)
			memcpy(n, p->ep, p->cap * sizeof(*n));
		memset(n + p->cap, 0, (ncap - p->cap) * sizeof(*n));
		free(p->ep);
		p->ep = n;
		p->cap = ncap;
	}

	uint64_t set[POOL_MODEL_WORDS];
	rc = model_set(p, cfg, set);
	if (rc < 0)
		return rc;
	struct pool_endpoint *e = &p->ep[idx];
	uint32_t gen = e->gen;
	memset(e, 0, sizeof(*e));
	e->gen = gen;
	e->backend = dup_or_null(cfg->backend);
	e->server = dup_or_null(cfg->server);
	e->key_id = dup_or_null(cfg->key_id);
	if (e->backend == NULL || e->server == NULL ||
	    (kk.len > 0 && e->key_id == NULL)) {
		endpoint_free_names(e);
		return -ENOMEM;
	}
	e->backend_len = (uint32_t)kb.len;
	e->server_len = (uint32_t)ks.len;
	e->key_len = (uint32_t)kk.len;
	e->name_hash = name_hash(kb, ks, kk);
	uint64_t seed_in = e->name_hash;
	e->rdv_seed = XXH3_64bits_withSeed(&seed_in, sizeof(seed_in), RDV_SALT);
	apply_meta(e, cfg, set);
	e->admin = CORE_ADMIN_ENABLED;
	for (int k = 0; k < POOL_MISMATCH_SLOTS; k++)
		e->mismatch[k].model = POOL_NO_MODEL;
	breaker_init(&e->br, now_ms);
	/* the slow-run detector's first guess: a queue served one by one,
	 * counted as one answer (learn.c, queue_gain_add) */
	e->queue_gain = 1.0;
	e->queue_gain_n = 1;
	/* no history: its load averages from 0 over the time since */
	e->load_avg_ms = now_ms > 0 ? now_ms : 1;
	e->live = true;
	uint32_t old_end = p->end;
	if (idx == p->end)
		p->end++;
	rc = rebuild_names(p);
	if (rc < 0) {
		e->live = false;
		p->end = old_end;
		endpoint_free_names(e);
		return rc;
	}
	model_refs(p, set, +1);
	p->live++;
	p->version++;
	return (int)idx;
}

int pool_update(struct pool *p, int idx, const struct core_endpoint_config *cfg)
{
	struct pool_endpoint *e = pool_get(p, idx);
	if (e == NULL)
		return -ENOENT;
	int rc = check_config(cfg);
	if (rc < 0)
		return rc;
	if (pool_find(p, core_str_c(cfg->backend), core_str_c(cfg->server),
		      core_str_c(cfg->key_id)) != idx)
		return -EINVAL;
	uint64_t set[POOL_MODEL_WORDS];
	rc = model_set(p, cfg, set);
	if (rc < 0)
		return rc;
	model_refs(p, e->models, -1);
	model_refs(p, set, +1);
	apply_meta(e, cfg, set);
	p->version++;
	return 0;
}

int pool_remove(struct pool *p, int idx)
{
	struct pool_endpoint *e = pool_get(p, idx);
	if (e == NULL)
		return -ENOENT;
	model_refs(p, e->models, -1);
	e->live = false;
	e->gen++;
	endpoint_free_names(e);
	p->live--;
	p->version++;
	/* Unlinking one entry in place keeps removal free of allocation:
	 * linear probing needs the backward shift that follows. */
	uint32_t i = (uint32_t)e->name_hash & p->name_mask;
	while (p->by_name[i] != (uint32_t)idx + 1)
		i = (i + 1) & p->name_mask;
	for (uint32_t j = i;;) {
		j = (j + 1) & p->name_mask;
		if (p->by_name[j] == 0)
			break;
		uint32_t home = (uint32_t)p->ep[p->by_name[j] - 1].name_hash &
				p->name_mask;
		bool stays = i <= j ? (home > i && home <= j)
				    : (home > i || home <= j);
		if (!stays) {
			p->by_name[i] = p->by_name[j];
			i = j;
		}
	}
	p->by_name[i] = 0;
	return 0;
}

bool pool_mismatched(const struct pool_endpoint *e, int model, uint64_t now_ms)
{
	if (!e->has_mismatch || model < 0)
		return false;
	for (int k = 0; k < POOL_MISMATCH_SLOTS; k++)
		if (e->mismatch[k].model == (uint16_t)model)
			return now_ms < e->mismatch[k].until_ms;
	return false;
}

void pool_note_404(struct pool_endpoint *e, int model, uint32_t threshold,
		   uint64_t duration_ms, uint64_t now_ms)
{
	if (model < 0 || threshold == 0)
		return;
	struct pool_mismatch *slot = NULL;
	for (int k = 0; k < POOL_MISMATCH_SLOTS && !slot; k++)
		if (e->mismatch[k].model == (uint16_t)model)
			slot = &e->mismatch[k];
	for (int k = 0; k < POOL_MISMATCH_SLOTS && !slot; k++)
		if (e->mismatch[k].model == POOL_NO_MODEL)
			slot = &e->mismatch[k];
	if (slot == NULL) {
		/* Full: reuse the slot whose exclusion ends first. */
		slot = &e->mismatch[0];
		for (int k = 1; k < POOL_MISMATCH_SLOTS; k++)
			if (e->mismatch[k].until_ms < slot->until_ms)
				slot = &e->mismatch[k];
		slot->model = POOL_NO_MODEL;
	}
	if (slot->model != (uint16_t)model) {
		*slot = (struct pool_mismatch){ .model = (uint16_t)model };
	} else if (slot->count >= threshold && now_ms >= slot->until_ms) {
		slot->count = 0; /* retried after the exclusion: count anew */
	}
	if (slot->count < UINT16_MAX)
		slot->count++;
	if (slot->count >= threshold)
		slot->until_ms = now_ms + duration_ms;
	e->has_mismatch = true;
}

void pool_note_served(struct pool_endpoint *e, int model)
{
	if (!e->has_mismatch || model < 0)
		return;
	bool any = false;
	for (int k = 0; k < POOL_MISMATCH_SLOTS; k++) {
		if (e->mismatch[k].model == (uint16_t)model)
			e->mismatch[k].model = POOL_NO_MODEL;
		any |= e->mismatch[k].model != POOL_NO_MODEL;
	}
	e->has_mismatch = any;
}
