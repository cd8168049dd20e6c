/* snapshot.h - the state snapshot: affinity entries and endpoint statistics in a msgpack file. */
#ifndef WARMLANE_SNAPSHOT_H
#define WARMLANE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core.h"

/* Format (msgpack, a sequence of top-level objects; version 1):
 *   header   array ["WLSNAP", 1, written_unix_ms, n_endpoints, n_entries]
 *   n_endpoints arrays, one per endpoint:
 *            [backend, server, key ("" when none), ewma_plain_ms,
 *             ewma_stream_ms, samples_plain, samples_stream, breaker
 *             (0 closed, 1 open, 2 half-open), trips, cooldown_left_ms,
 *             dead_key_left_ms, idle_ms (0: never seen)]
 *   the n_entries affinity entries, oldest first, in arrays of at most
 *            3 x SNAPSHOT_BLOCK unsigned integers: triples akey, endpoint
 *            (index into the endpoint records), idle_ms
 *   trailer  uint64 (always 0xcf + 8 bytes): xxh3-64 (core_hash_bytes) of
 *            every byte before it.
 * Times are durations at written_unix_ms; a load adds the wall-clock time
 * elapsed since (downtime) to idle times and takes it off cooldowns. */
#define SNAPSHOT_MAGIC        "WLSNAP"
#define SNAPSHOT_VERSION      1u
#define SNAPSHOT_MAX_BYTES    (256u * 1024 * 1024) /* larger: rejected */
#define SNAPSHOT_MAX_ENDPOINTS 65536u
#define SNAPSHOT_NAME_MAX     255u
#define SNAPSHOT_TRAILER_LEN  9u
#define SNAPSHOT_BLOCK        1024u /* entries per array */

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
	uint64_t downtime_ms;        /* wall clock since the file was written */
};

/* Encodes c's state at now_ms (monotonic) and now_unix_ms (wall clock)
 * into a malloc'd buffer (*out, *len; the caller frees it). Returns 0 or
 * -ENOMEM. Walks every live affinity entry: O(entries), on the caller's
 * thread, the core must not change meanwhile. */
int snapshot_encode(const struct core *c, uint64_t now_ms,
		    int64_t now_unix_ms, char **out, size_t *len);

/* A copy of the state taken on the loop (the core's part of an encode):
 * header and endpoint records packed, affinity entries copied. Packing it
 * needs nothing of the core, so it may run on another thread. */
struct snapshot_capture;

/* Captures c's state (see snapshot_encode). Returns 0 with *out set (free
 * with snapshot_capture_free), or -ENOMEM. */
int snapshot_capture(const struct core *c, uint64_t now_ms,
		     int64_t now_unix_ms, struct snapshot_capture **out);

/* Packs the entries of cap and the trailer into a malloc'd buffer (*out,
 * *len; the caller frees it). Once only per capture. 0 or -ENOMEM. */
int snapshot_pack(struct snapshot_capture *cap, char **out, size_t *len);

/* Frees cap; accepts NULL. */
void snapshot_capture_free(struct snapshot_capture *cap);

/* Writes len bytes to path atomically: a temp file in the same directory
 * (path.tmp.XXXXXX, mode 0600), write, fsync, rename, fsync of the
 * directory. Blocking (call it on a worker thread, or at exit). Returns 0
 * or -errno, with err saying which step failed; the temp file is removed
 * on failure. */
int snapshot_write_file(const char *path, const char *buf, size_t len,
			char *err, size_t errlen);

/* Encodes and writes c's state to path, blocking (SIGTERM, tests). Not
 * while a periodic write of the same path is in flight (after the loop
 * has run it is not). Returns 0 or -errno with err set. */
int snapshot_write_sync(const struct core *c, const char *path,
			uint64_t now_ms, char *err, size_t errlen);

/* Loads a snapshot from memory into c at now_ms and the wall clock
 * now_unix_ms. The whole buffer is checked first (structure, types,
 * counts against the bytes left, checksum, value ranges); only a valid
 * one changes c. Endpoints are matched by backend/server/key name; those
 * c lacks are dropped and counted, as are their entries and entries idle
 * past the TTL. res may be NULL. Never crashes, whatever buf holds.
 * Returns 0, -ENOTSUP for a version other than 1 (future), -EFBIG above
 * SNAPSHOT_MAX_BYTES, -EBADMSG for anything else that is not a valid
 * snapshot (truncated, corrupt), with err saying what. */
int snapshot_load_buffer(struct core *c, const uint8_t *buf, size_t len,
			 uint64_t now_ms, int64_t now_unix_ms,
			 struct snapshot_result *res, char *err, size_t errlen);

/* Loads the file at path (see snapshot_load_buffer). A rejected file
 * (-ENOTSUP, -EFBIG, -EBADMSG) is renamed to path.corrupt (replacing an
 * older one) and err says so. -ENOENT when there is no file (a cold start,
 * nothing renamed); other -errno for I/O errors (file left alone). */
int snapshot_load(struct core *c, const char *path, uint64_t now_ms,
		  struct snapshot_result *res, char *err, size_t errlen);

/* snapshot_load with one log line for the outcome (loaded with counts,
 * no file, or rejected and renamed aside: starting cold). An empty path
 * does nothing. Returns what snapshot_load returned (0 for "") . */
int snapshot_restore(struct core *c, const char *path, uint64_t now_ms);

/* snapshot_write_sync with one log line for the outcome (at exit). An
 * empty path does nothing. Returns what snapshot_write_sync returned. */
int snapshot_save(const struct core *c, const char *path, uint64_t now_ms);

/* The periodic writer: every interval, capture on the loop thread (the
 * core is single-threaded), pack and write on libuv's threadpool. A tick while a write
 * is still in flight is skipped. Caller-owned memory. */
struct snapshot_writer {
	uv_loop_t *loop;
	const struct core *core;
	char *path;
	uint64_t interval_ms;
	uv_timer_t timer;
	uv_work_t work;
	bool timer_init, busy, stopped;
	struct snapshot_capture *cap; /* being packed by the worker */
	char *buf;           /* being written by the worker */
	size_t len;
	int result;          /* of the last write */
	char err[256];
	/* Counters (for logs and tests). */
	uint64_t writes, failures, skipped;
	uint64_t last_bytes, last_capture_us, last_pack_us, last_write_us;
};

/* Starts w: the first write after interval_ms. An empty path or an
 * interval of 0 starts nothing (and returns 0). Returns 0, -ENOMEM or
 * -errno from uv_timer_init. */
int snapshot_writer_start(struct snapshot_writer *w, uv_loop_t *loop,
			  const struct core *c, const char *path,
			  uint64_t interval_ms);

/* Stops the timer (closing it); a write in flight finishes on the loop.
 * Idempotent; accepts a zeroed w. Frees w's memory once nothing is
 * pending (the path at once if idle, else in the work's callback). */
void snapshot_writer_stop(struct snapshot_writer *w);

#endif
