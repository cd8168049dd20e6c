/* hint.h - the shared warm hint: HAProxy server ids from the runtime API, and a route message's hint arguments into a core_hint. */
#ifndef WARMLANE_HINT_H
#define WARMLANE_HINT_H

#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "spop.h"

/* Servers whose ids are known (runtime API rows); more are counted in
 * hint_ids.full and their hints are unknown. */
#define HINT_SERVERS_MAX 4096
/* "backend/server" as HAProxy's %b/%s writes it; longer: not hinted. */
#define HINT_NAME_MAX 258

/* One server of this agent's HAProxy: its numeric id (`id` on the server
 * line, or the one HAProxy assigned) and the xxh32 of "backend/server".
 * A hint names both (docs/peers.md): the id says which server, the hash
 * checks that this HAProxy's server of that id is the one the recording
 * HAProxy meant. */
struct hint_server {
	uint32_t sid;
	uint32_t name_hash;
	uint16_t len;
	char name[HINT_NAME_MAX + 1];
};

/* Counters of the hint arguments (metrics: warmlane_hint_args_total). */
struct hint_arg_stats {
	uint64_t partial;      /* some of hint_srv, hint_at, hint_akey, hint_name only */
	uint64_t unknown_id;   /* no server of this HAProxy has the id */
	uint64_t id_mismatch;  /* a server has the id, under another name */
	uint64_t stale;        /* recorded longer ago than affinity_ttl */
	uint64_t no_endpoint;  /* the server is known but not in the pool */
};

struct hint_ids {
	struct hint_server *s; /* HINT_SERVERS_MAX of them, allocated once */
	uint32_t n;
	uint32_t *slots;       /* open addressing, (sid, name_hash) -> index + 1 */
	uint32_t mask;
	uint64_t full;         /* servers not kept: the table is full */
	uint64_t renamed;      /* a server's id changed between polls */
	struct hint_arg_stats args;
};

/* Allocates the table. Returns 0 or -ENOMEM. */
int hint_ids_init(struct hint_ids *h);

/* Frees it; h may be zeroed. */
void hint_ids_finish(struct hint_ids *h);

/* The xxh32 (seed 0) of "backend/server", as HAProxy's xxh32 converter
 * hashes %b/%s. */
uint32_t hint_name_hash(const char *backend, size_t blen, const char *server,
			size_t slen);

/* Notes that backend/server has id sid (a runtime API row). An existing
 * server whose id changed is updated (counted: renamed); a new one is
 * added while there is room. Names longer than HINT_NAME_MAX are not
 * kept. Never allocates. */
void hint_ids_note(struct hint_ids *h, struct core_str backend,
		   struct core_str server, uint32_t sid);

/* The server of id sid whose name hashes to name_hash, or NULL. With
 * *id_known set: whether some server has that id at all. */
const struct hint_server *hint_ids_find(const struct hint_ids *h, uint32_t sid,
					uint32_t name_hash, bool *id_known);

#endif
