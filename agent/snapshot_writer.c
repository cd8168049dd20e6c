/* snapshot_writer.c - the periodic snapshot writer: a libuv timer, the capture in idle slices, pack and write on the threadpool. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "snapshot.h"
#include "snapshot_int.h"

/* On a threadpool thread: only w->path, w->cap, w->buf and w->len are
 * touched, and the loop leaves them alone while busy. */
static void snapshot_work(uv_work_t *req)
{
	struct snapshot_writer *w = req->data;
	uint64_t t0 = uv_hrtime();
	w->result = snapshot_pack(w->cap, &w->buf, &w->len);
	uint64_t t1 = uv_hrtime();
	w->last_pack_us = (t1 - t0) / 1000;
	if (w->result < 0) {
		snprintf(w->err, sizeof(w->err), "encode: out of memory");
		return;
	}
	w->last_bytes = w->len;
	w->result = snapshot_write_file(w->path, w->buf, w->len, w->err,
					sizeof(w->err));
	w->last_write_us = (uv_hrtime() - t1) / 1000;
}

static void snapshot_fail(struct snapshot_writer *w, const char *why)
{
	char q[300];
	/* Once per failure streak would hide a fix; every interval is at
	 * most one line per 100 ms (the smallest interval). */
	w->failures++;
	if (w->st != NULL)
		w->st->write_failures++;
	log_error("snapshot not written", "error=%s",
		  log_quote(q, sizeof(q), why, strlen(why)));
}

static void snapshot_after_work(uv_work_t *req, int status)
{
	struct snapshot_writer *w = req->data;
	size_t entries = snapshot_capture_entries(w->cap);
	free(w->buf);
	w->buf = NULL;
	snapshot_capture_free(w->cap);
	w->cap = NULL;
	w->busy = false;
	if (status < 0) {
		snapshot_fail(w, uv_err_name(status));
	} else if (w->result < 0) {
		snapshot_fail(w, w->err);
	} else {
		uint64_t total_us = (uv_hrtime() - w->started_ns) / 1000;
		w->writes++;
		if (w->st != NULL) {
			w->st->writes++;
			w->st->last_write_unix_ms = snapshot_wall_ms();
			w->st->last_write_us = total_us;
			w->st->last_bytes = w->last_bytes;
			w->st->last_entries = entries;
			w->st->last_hold_us = w->last_max_slice_us;
		}
		log_debug("snapshot written",
			  "bytes=%" PRIu64 " entries=%zu slices=%" PRIu64
			  " capture_us=%" PRIu64 " max_slice_us=%" PRIu64
			  " pack_us=%" PRIu64 " write_us=%" PRIu64
			  " total_us=%" PRIu64,
			  w->last_bytes, entries, w->last_slices,
			  w->last_capture_us, w->last_max_slice_us,
			  w->last_pack_us, w->last_write_us, total_us);
	}
	if (w->path_pending) {
		free(w->path);
		w->path = w->next_path;
		w->next_path = NULL;
		w->path_pending = false;
	}
	if (w->stopped) {
		free(w->path);
		w->path = NULL;
	}
}

static void snapshot_capture_stop(struct snapshot_writer *w)
{
	if (w->capturing) {
		uv_idle_stop(&w->idle);
		snapshot_capture_free(w->cap);
		w->cap = NULL;
		w->capturing = false;
	}
}

/* One slice per loop turn; the last one hands the capture to the
 * threadpool. */
static void snapshot_on_idle(uv_idle_t *h)
{
	struct snapshot_writer *w = h->data;
	uint64_t t0 = uv_hrtime();
	uint64_t now = uv_now(w->loop);
	int r = snapshot_capture_step(w->cap, w->core, now, w->slice);
	if (r == 0)
		r = snapshot_capture_end(w->cap, w->core, now, snapshot_wall_ms());
	uint64_t us = (uv_hrtime() - t0) / 1000;
	w->last_capture_us += us;
	if (us > w->last_max_slice_us)
		w->last_max_slice_us = us;
	if (us > w->max_slice_us)
		w->max_slice_us = us;
	if (r > 0)
		return;
	w->last_slices = snapshot_capture_slices(w->cap);
	if (r == -ESTALE) {
		/* An endpoint left (its entries cannot be told apart any
		 * more) or the map was rebuilt meanwhile: the next tick
		 * starts over. */
		snapshot_capture_stop(w);
		w->abandoned++;
		if (w->st != NULL)
			w->st->captures_abandoned++;
		log_debug("snapshot capture abandoned: endpoints or map changed", NULL);
		return;
	}
	if (r < 0) {
		snapshot_capture_stop(w);
		snapshot_fail(w, "out of memory");
		return;
	}
	uv_idle_stop(&w->idle);
	w->capturing = false;
	w->work.data = w;
	r = uv_queue_work(w->loop, &w->work, snapshot_work, snapshot_after_work);
	if (r < 0) {
		snapshot_capture_free(w->cap);
		w->cap = NULL;
		snapshot_fail(w, uv_err_name(r));
		return;
	}
	w->busy = true;
}

static void snapshot_tick(uv_timer_t *t)
{
	struct snapshot_writer *w = t->data;
	if (w->busy || w->capturing || w->stopped || w->path == NULL) {
		w->skipped++;
		return;
	}
	w->started_ns = uv_hrtime();
	w->last_capture_us = 0;
	w->last_max_slice_us = 0;
	int r = snapshot_capture_begin(w->core, uv_now(w->loop), &w->cap);
	if (r == 0 && !w->idle_init) {
		r = uv_idle_init(w->loop, &w->idle);
		w->idle_init = r == 0;
		w->idle.data = w;
	}
	if (r == 0)
		r = uv_idle_start(&w->idle, snapshot_on_idle);
	if (r < 0) {
		snapshot_capture_free(w->cap);
		w->cap = NULL;
		snapshot_fail(w, r == -ENOMEM ? "out of memory" : uv_err_name(r));
		return;
	}
	w->capturing = true;
}

int snapshot_writer_init(struct snapshot_writer *w, uv_loop_t *loop,
			 const struct core *c, const char *path,
			 uint64_t interval_ms, struct snapshot_stats *st)
{
	*w = (struct snapshot_writer){ .loop = loop, .core = c, .st = st,
				       .slice = SNAPSHOT_SLICE };
	return snapshot_writer_set(w, path, interval_ms);
}

int snapshot_writer_set(struct snapshot_writer *w, const char *path,
			uint64_t interval_ms)
{
	char *np = NULL;
	bool on = path != NULL && path[0] != '\0' && interval_ms > 0;
	if (on && (np = strdup(path)) == NULL)
		return -ENOMEM;
	if (on && !w->timer_init) {
		int r = uv_timer_init(w->loop, &w->timer);
		if (r < 0) {
			free(np);
			return r;
		}
		w->timer_init = true;
		w->timer.data = w;
	}
	if (w->busy) {
		free(w->next_path);
		w->next_path = np;
		w->path_pending = true;
	} else {
		free(w->path);
		w->path = np;
	}
	w->interval_ms = interval_ms;
	w->stopped = !on;
	if (!on) {
		snapshot_capture_stop(w);
		if (w->timer_init)
			uv_timer_stop(&w->timer);
		return 0;
	}
	return uv_timer_start(&w->timer, snapshot_tick, interval_ms, interval_ms);
}

void snapshot_writer_finish(struct snapshot_writer *w)
{
	snapshot_capture_stop(w);
	if (w->idle_init) {
		uv_close((uv_handle_t *)&w->idle, NULL);
		w->idle_init = false;
	}
	if (w->timer_init) {
		uv_timer_stop(&w->timer);
		uv_close((uv_handle_t *)&w->timer, NULL);
		w->timer_init = false;
	}
	w->stopped = true;
	free(w->next_path);
	w->next_path = NULL;
	w->path_pending = false;
	if (!w->busy) {
		free(w->path);
		w->path = NULL;
	}
}
