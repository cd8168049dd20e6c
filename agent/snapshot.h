/* snapshot.h - the state snapshot: affinity entries and endpoint statistics in a msgpack file (the codec, the file, the writer). */
#ifndef WARMLANE_SNAPSHOT_H
#define WARMLANE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core.h"
#include "snapshot_codec.h"

/* Entry slots the periodic writer copies per loop turn (a fraction of a
 * millisecond; docs/operations.md has the measured slices). */
#define SNAPSHOT_SLICE        8192u

/* ---- the file (snapshot_file.c) ---------------------------------------- */

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

/* ---- the periodic writer (snapshot_writer.c) --------------------------- */

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
