/* snapshot.h - the state snapshot: affinity entries and endpoint statistics in a msgpack file. */
#ifndef WARMLANE_SNAPSHOT_H
#define WARMLANE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core.h"

/* Format (msgpack, a sequence of top-level objects; version 2):
 *   header   array ["WLSNAP", 2, written_unix_ms, n_endpoints, n_entries]
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
#define SNAPSHOT_VERSION      2u /* written */
#define SNAPSHOT_VERSION_MIN  1u /* oldest read */
#define SNAPSHOT_MAX_BYTES    (256u * 1024 * 1024) /* larger: rejected */
#define SNAPSHOT_MAX_ENDPOINTS 65536u
#define SNAPSHOT_NAME_MAX     255u
#define SNAPSHOT_TRAILER_LEN  9u
#define SNAPSHOT_BLOCK        1024u /* entries per array */
/* Entry slots the periodic writer copies per loop turn: about 0.2 ms of
 * the loop (release build), where 10^6 entries at once held it 25-30 ms. */
#define SNAPSHOT_SLICE        8192u

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
 * nothing renamed); -EINVAL for a path that is not a regular file (a
 * FIFO, a directory, a device: refused without reading or waiting, left
 * alone); other -errno for I/O errors (file left alone). */
int snapshot_load(struct core *c, const char *path, uint64_t now_ms,
		  struct snapshot_result *res, char *err, size_t errlen);

/* What the agent did with snapshots, for /metrics (metrics.c reads it
 * through struct server). Times: wall clock for the timestamp, durations
 * in microseconds. */
struct snapshot_stats {
	/* Writes (periodic and at exit). */
	uint64_t writes, write_failures;
	uint64_t captures_abandoned;  /* endpoints changed during a capture */
	int64_t last_write_unix_ms;   /* last successful write; 0: none */
	uint64_t last_write_us;       /* capture start to rename */
	uint64_t last_bytes, last_entries;
	uint64_t last_hold_us;        /* longest slice of its capture */
	/* The load at start. */
	bool loaded;                  /* a file was loaded */
	uint64_t load_us;
	uint64_t restored, dropped_expired, dropped_unknown;
	uint64_t corrupt;             /* files renamed aside */
};

/* snapshot_load with one log line for the outcome (loaded with counts,
 * no file, or rejected and renamed aside: starting cold), counted in st
 * (may be NULL). An empty path does nothing. Returns what snapshot_load
 * returned (0 for ""). */
int snapshot_restore(struct core *c, const char *path, uint64_t now_ms,
		     struct snapshot_stats *st);

/* snapshot_write_sync with one log line for the outcome (at exit),
 * counted in st (may be NULL). An empty path does nothing. Returns what
 * snapshot_write_sync returned. */
int snapshot_save(const struct core *c, const char *path, uint64_t now_ms,
		  struct snapshot_stats *st);

/* The periodic writer: every interval, copy the map on the loop thread in
 * slices of `slice` entry slots, one slice per loop turn (a uv_idle_t),
 * then pack and write on libuv's threadpool. A tick while a capture or a
 * write is still in flight is skipped. Caller-owned memory. */
struct snapshot_writer {
	uv_loop_t *loop;
	const struct core *core;
	struct snapshot_stats *st; /* counted into; may be NULL */
	char *path;
	char *next_path;     /* set while a write is in flight; swapped after */
	bool path_pending;
	uint64_t interval_ms;
	uint32_t slice;      /* entry slots per loop turn (SNAPSHOT_SLICE) */
	uv_timer_t timer;
	uv_idle_t idle;      /* one capture slice per loop turn */
	uv_work_t work;
	bool timer_init, idle_init, capturing, busy, stopped;
	struct snapshot_capture *cap; /* being filled, then packed */
	uint64_t started_ns; /* uv_hrtime at the capture's start */
	char *buf;           /* being written by the worker */
	size_t len;
	int result;          /* of the last write */
	char err[256];
	/* Counters (for logs and tests). */
	uint64_t writes, failures, skipped, abandoned;
	uint64_t last_bytes, last_capture_us, last_pack_us, last_write_us;
	uint64_t last_slices, last_max_slice_us, max_slice_us;
};

/* Starts w: the first write after interval_ms, counted into st (may be
 * NULL; must outlive w). An empty path or an interval of 0 starts nothing
 * (and returns 0). Returns 0, -ENOMEM or -errno from uv_timer_init. */
int snapshot_writer_init(struct snapshot_writer *w, uv_loop_t *loop,
			 const struct core *c, const char *path,
			 uint64_t interval_ms, struct snapshot_stats *st);

/* Changes the path and the interval of a started writer (SIGHUP): the
 * next write goes to the new path (a write in flight finishes with the
 * old one), the timer restarts with the new interval. An empty path or
 * an interval of 0 stops periodic writes; a later call may start them.
 * Returns 0, -ENOMEM (nothing changed) or -errno from uv_timer_init. */
int snapshot_writer_set(struct snapshot_writer *w, const char *path,
			uint64_t interval_ms);

/* Stops the timer and a capture (closing their handles); a write in
 * flight finishes on the loop. Idempotent; accepts a zeroed w. Frees w's
 * memory once nothing is pending (the path at once if idle, else in the
 * work's callback). */
void snapshot_writer_finish(struct snapshot_writer *w);

#endif
