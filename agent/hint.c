/* hint.c - the shared warm hint's server ids: HAProxy's numeric server ids, checked by name hash. */
#include "hint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH32_state_t on the stack */
#include <xxhash.h>

/* Twice the servers, a power of two: at most half full. */
#define HINT_SLOTS (2u * HINT_SERVERS_MAX)

int hint_ids_init(struct hint_ids *h)
{
	*h = (struct hint_ids){ .mask = HINT_SLOTS - 1 };
	h->s = calloc(HINT_SERVERS_MAX, sizeof(*h->s));
	h->slots = calloc(HINT_SLOTS, sizeof(*h->slots));
	if (h->s == NULL || h->slots == NULL) {
		hint_ids_finish(h);
		return -ENOMEM;
	}
	return 0;
}

void hint_ids_finish(struct hint_ids *h)
{
	free(h->s);
	h->s = NULL;
	free(h->slots);
	h->slots = NULL;
	h->n = 0;
}

uint32_t hint_name_hash(const char *backend, size_t blen, const char *server,
			size_t slen)
{
	XXH32_state_t st;
	XXH32_reset(&st, 0);
	XXH32_update(&st, backend, blen);
	XXH32_update(&st, "/", 1);
	XXH32_update(&st, server, slen);
	return XXH32_digest(&st);
}

static uint32_t slot_of(uint32_t sid, uint32_t name_hash)
{
	uint64_t k = ((uint64_t)sid << 32 | name_hash) * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(k >> 32);
}

static void slots_rebuild(struct hint_ids *h)
{
	memset(h->slots, 0, HINT_SLOTS * sizeof(*h->slots));
	for (uint32_t i = 0; i < h->n; i++) {
		uint32_t p = slot_of(h->s[i].sid, h->s[i].name_hash) & h->mask;
		while (h->slots[p] != 0)
			p = (p + 1) & h->mask;
		h->slots[p] = i + 1;
	}
}

void hint_ids_note(struct hint_ids *h, struct core_str backend,
		   struct core_str server, uint32_t sid)
{
	if (h->s == NULL || backend.len + 1 + server.len > HINT_NAME_MAX)
		return;
	uint32_t hash = hint_name_hash(backend.ptr, backend.len, server.ptr,
				       server.len);
	bool known;
	if (hint_ids_find(h, sid, hash, &known) != NULL)
		return; /* every poll but a change: one probe */
	size_t len = backend.len + 1 + server.len;
	/* The same name under another id: HAProxy reloaded with other ids.
	 * A linear walk, but only when something changed. */
	for (uint32_t i = 0; i < h->n; i++) {
		struct hint_server *x = &h->s[i];
		if (x->name_hash == hash && x->len == len &&
		    memcmp(x->name, backend.ptr, backend.len) == 0 &&
		    memcmp(x->name + backend.len + 1, server.ptr, server.len) == 0) {
			x->sid = sid;
			h->renamed++;
			slots_rebuild(h);
			return;
		}
	}
	if (h->n == HINT_SERVERS_MAX) {
		h->full++;
		return;
	}
	struct hint_server *x = &h->s[h->n++];
	x->sid = sid;
	x->name_hash = hash;
	x->len = (uint16_t)len;
	memcpy(x->name, backend.ptr, backend.len);
	x->name[backend.len] = '/';
	memcpy(x->name + backend.len + 1, server.ptr, server.len);
	x->name[len] = '\0';
	uint32_t p = slot_of(sid, hash) & h->mask;
	while (h->slots[p] != 0)
		p = (p + 1) & h->mask;
	h->slots[p] = h->n;
}

const struct hint_server *hint_ids_find(const struct hint_ids *h, uint32_t sid,
					uint32_t name_hash, bool *id_known)
{
	*id_known = false;
	if (h->s == NULL)
		return NULL;
	uint32_t p = slot_of(sid, name_hash) & h->mask;
	while (h->slots[p] != 0) {
		const struct hint_server *x = &h->s[h->slots[p] - 1];
		if (x->sid == sid && x->name_hash == name_hash) {
			*id_known = true;
			return x;
		}
		p = (p + 1) & h->mask;
	}
	/* Not found: the slow path tells an unknown id from a mismatch
	 * (which docs/peers.md says to fix). */
	for (uint32_t i = 0; i < h->n && !*id_known; i++)
		*id_known = h->s[i].sid == sid;
	return NULL;
}
