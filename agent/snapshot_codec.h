/* snapshot_codec.h - the snapshot's msgpack codec: the core's state captured, packed, loaded back with limits (no libuv, no file I/O). */
#ifndef WARMLANE_SNAPSHOT_CODEC_H
#define WARMLANE_SNAPSHOT_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"

/* Format (msgpack, a sequence of top-level objects; version 4):
 *   header   array ["WLSNAP", 4, written_unix_ms, n_endpoints, n_entries,
 *            routers, n_homes]: routers the verdicts of policy.routers
 *            auto, bit 0 by the engines' counts, bit 1 by the shared warm
 *            hints, bit 2 by the requests' turns (core_routers_restore;
 *            an agent from before the turns refuses a file with bit 2);
 *            n_homes the failover tiers'
 *            homes after the entries (versions 1 and 2, still read, have
 *            the first five fields only, version 3 the first six)
 *   n_endpoints arrays, one per endpoint:
 *            [backend, server, key ("" when none), ewma_plain_ms,
 *             ewma_stream_ms, samples_plain, samples_stream, breaker
 *             (0 closed, 1 open, 2 half-open), trips, cooldown_left_ms,
 *             dead_key_left_ms, idle_ms (0: never seen),
 *             e2e_ewma_plain, e2e_ewma_stream (end-to-end EWMAs, as
 *             struct core_endpoint_stats holds them), e2e_samples_plain,
 *             e2e_samples_stream]
 *            (version 1, still read: the first 12 fields only)
 *   the n_entries affinity entries, oldest first, each key once, in arrays
 *            of at most 3 x SNAPSHOT_BLOCK unsigned integers: triples
 *            akey, endpoint (index into the endpoint records), idle_ms
 *   the n_homes homes the same way (akey, the endpoint the key came
 *            from before its entry went to a worse tier, idle_ms;
 *            core_homes_import)
 *   trailer  uint64 (always 0xcf + 8 bytes): xxh3-64 (core_hash_bytes) of
 *            every byte before it.
 * Times are durations at written_unix_ms; a load adds the wall-clock time
 * elapsed since (downtime) to idle times and takes it off cooldowns.
 *
 * The periodic writer copies the map in slices (SNAPSHOT_SLICE entry slots
 * per loop turn, core_affinity_cursor_next), so the file is not one
 * instant of the map: each entry is as it was when its slice was copied
 * (core.h lists what a change between slices does), endpoint statistics
 * and written_unix_ms are those of the last slice. */
#define SNAPSHOT_MAGIC        "WLSNAP"
#define SNAPSHOT_VERSION      4u /* written */
#define SNAPSHOT_VERSION_MIN  1u /* oldest read */
#define SNAPSHOT_MAX_BYTES    (256u * 1024 * 1024) /* larger: rejected */
#define SNAPSHOT_MAX_ENDPOINTS 65536u
#define SNAPSHOT_NAME_MAX     255u
#define SNAPSHOT_TRAILER_LEN  9u
#define SNAPSHOT_BLOCK        1024u /* entries per array */
/* Fields of a header (versions 1 and 2 had no routers verdicts, 3 no
 * homes) and of an endpoint record (version 1 had no end-to-end EWMAs). */
#define SNAPSHOT_HEADER_FIELDS      7u
#define SNAPSHOT_HEADER_FIELDS_V3   6u
#define SNAPSHOT_HEADER_FIELDS_V2   5u
#define SNAPSHOT_ROUTERS_ENGINES    1u
#define SNAPSHOT_ROUTERS_HINTS      2u
#define SNAPSHOT_ROUTERS_TURNS      4u
#define SNAPSHOT_ENDPOINT_FIELDS    16u
#define SNAPSHOT_ENDPOINT_FIELDS_V1 12u
/* Breaker states as the file numbers them (independent of the core's enum). */
enum {
	SNAPSHOT_BREAKER_CLOSED = 0,
	SNAPSHOT_BREAKER_OPEN = 1,
	SNAPSHOT_BREAKER_HALF_OPEN = 2,
};

/* What a load found. */
struct snapshot_result {
	uint32_t version;
	uint64_t bytes;
	uint64_t endpoints;          /* records in the file */
	uint64_t endpoints_unknown;  /* not in the core: dropped */
	uint64_t entries;            /* affinity records in the file */
	uint64_t entries_restored;
	uint64_t entries_expired;    /* idle past affinity_ttl at load */
	uint64_t entries_unknown;    /* endpoint not in the core */
	uint64_t homes;              /* homes records in the file */
	uint64_t homes_restored;     /* the others expired or unknown */
	uint64_t cooldowns_capped;   /* open breakers cut to core_cooldown_max_ms */
	uint64_t downtime_ms;        /* wall clock since the file was written */
};

/* Encodes c's state at now_ms (monotonic) and now_unix_ms (wall clock)
 * into a malloc'd buffer (*out, *len; the caller frees it). Returns 0 or
 * -ENOMEM. Walks every live affinity entry: O(entries), on the caller's
 * thread, the core must not change meanwhile. */
int snapshot_encode(const struct core *c, uint64_t now_ms,
		    int64_t now_unix_ms, char **out, size_t *len);

/* A copy of the state taken on the loop (the core's part of an encode):
 * affinity entries copied (in slices, or at once), header and endpoint
 * records packed at the end. Packing it needs nothing of the core, so it
 * may run on another thread. */
struct snapshot_capture;

/* Captures c's state at once (see snapshot_encode). Returns 0 with *out
 * set (free with snapshot_capture_free), or -ENOMEM. */
int snapshot_capture(const struct core *c, uint64_t now_ms,
		     int64_t now_unix_ms, struct snapshot_capture **out);

/* The same in slices: begin (notes c's endpoints and starts a cursor on
 * its map), step until it returns 0, end. Between calls the core may
 * serve. begin: 0 with *out set, or -ENOMEM. step copies the live
 * entries of at most max_slots slots of the map: 1 (more to come), 0
 * (every slot copied), -ESTALE (an endpoint of the capture was removed or
 * its index reused, or the map was rebuilt: give this capture up),
 * -ENOMEM. end packs the header and the endpoint statistics at now_ms
 * (the time of the last step, for idle times): 0, -ESTALE, -ENOMEM, or
 * -EINVAL before the last step. */
int snapshot_capture_begin(const struct core *c, uint64_t now_ms,
			   struct snapshot_capture **out);
int snapshot_capture_step(struct snapshot_capture *cap, const struct core *c,
			  uint64_t now_ms, uint32_t max_slots);
int snapshot_capture_end(struct snapshot_capture *cap, const struct core *c,
			 uint64_t now_ms, int64_t now_unix_ms);

/* Entries copied so far (before packing drops repeated keys), and the
 * steps taken. */
size_t snapshot_capture_entries(const struct snapshot_capture *cap);
uint64_t snapshot_capture_slices(const struct snapshot_capture *cap);

/* Sorts the entries of cap oldest first, keeps the latest record of a key
 * copied twice, packs them and the trailer after the header into a
 * malloc'd buffer (*out, *len; the caller frees it). Once only per ended
 * capture. 0 or -ENOMEM. */
int snapshot_pack(struct snapshot_capture *cap, char **out, size_t *len);

/* Frees cap; accepts NULL. */
void snapshot_capture_free(struct snapshot_capture *cap);

/* Loads a snapshot from memory into c at now_ms and the wall clock
 * now_unix_ms. The whole buffer is checked first (structure, types,
 * counts against the bytes left, checksum, value ranges); only a valid
 * one changes c. Endpoints are matched by backend/server/key name; those
 * c lacks are dropped and counted, as are their entries and entries idle
 * past the TTL. res may be NULL. Never crashes, whatever buf holds.
 * Returns 0, -ENOTSUP for a version outside SNAPSHOT_VERSION_MIN to
 * SNAPSHOT_VERSION (a future one), -EFBIG above SNAPSHOT_MAX_BYTES,
 * -ENOMEM, or -EBADMSG for anything else that is not a valid snapshot
 * (truncated, corrupt), with err saying what. */
int snapshot_load_buffer(struct core *c, const uint8_t *buf, size_t len,
			 uint64_t now_ms, int64_t now_unix_ms,
			 struct snapshot_result *res, char *err, size_t errlen);

#endif
