/* runtime.c - polls HAProxy's runtime API (`show stat`) and syncs the core's pool, admin states and in-flight counts. */
#include "runtime.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "route.h"
#include "server.h" /* container_of */
#include "stats.h"

/* Most key ids of one server synced (route_server_find). */
#define RUNTIME_MAX_KEYS 64

static bool view_is(struct core_str v, const char *s)
{
	size_t n = strlen(s);
	return v.len == n && memcmp(v.ptr, s, n) == 0;
}

/* ---- applying a poll to the core ---------------------------------------- */

static bool name_in(struct core_str name, char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (view_is(name, names[i]))
			return true;
	return false;
}

/* Whether servers of backend are the pool's: runtime_api.backends, else
 * the configured endpoints' backends, else every backend in http mode
 * (mode len 0: unknown, accepted). */
static bool runtime_watched(const struct runtime *rt, struct core_str backend,
			    struct core_str mode)
{
	const struct config *cfg = rt->cfg;
	if (cfg->n_runtime_backends > 0)
		return name_in(backend, cfg->runtime_backends,
			       cfg->n_runtime_backends);
	if (cfg->n_endpoints > 0) {
		for (size_t i = 0; i < cfg->n_endpoints; i++)
			if (view_is(backend, cfg->endpoints[i].backend))
				return true;
		return false;
	}
	return mode.len == 0 || view_is(mode, "http");
}

/* Counts one join or leave, keeping the first names for the summary. */
static void runtime_note(struct runtime_changes *ch, struct core_str backend,
			 struct core_str server)
{
	if (ch->n < RUNTIME_SUMMARY_NAMES)
		snprintf(ch->names[ch->n], sizeof(ch->names[ch->n]), "%.*s/%.*s",
			 (int)(backend.len < 128 ? backend.len : 128), backend.ptr,
			 (int)(server.len < 128 ? server.len : 128), server.ptr);
	ch->n++;
}

/* "a/b c/d (and 9 more)" into buf. */
static const char *runtime_names(char *buf, size_t cap,
				 const struct runtime_changes *ch)
{
	size_t off = 0;
	buf[0] = '\0';
	unsigned shown = ch->n < RUNTIME_SUMMARY_NAMES ? ch->n
						       : RUNTIME_SUMMARY_NAMES;
	for (unsigned i = 0; i < shown && off < cap; i++) {
		int w = snprintf(buf + off, cap - off, "%s%s", i ? " " : "",
				 ch->names[i]);
		off += w > 0 ? (size_t)w : 0;
	}
	if (ch->n > shown && off < cap)
		snprintf(buf + off, cap - off, " (and %u more)", ch->n - shown);
	return buf;
}

/* One line for the servers that joined and left during a poll (a line
 * per server was 41,789 lines in 40 s for 50,000 servers coming and
 * going), then the counts start over. */
static void runtime_summarize(struct runtime *rt)
{
	if (rt->joined.n == 0 && rt->left.n == 0)
		return;
	char a[RUNTIME_SUMMARY_NAMES * 260 + 32], b[sizeof(a)];
	char qa[sizeof(a) + 64], qb[sizeof(a) + 64];
	runtime_names(a, sizeof(a), &rt->joined);
	runtime_names(b, sizeof(b), &rt->left);
	log_info("servers joined or left the pool",
		 "joined=%u left=%u joined_servers=%s left_servers=%s",
		 rt->joined.n, rt->left.n,
		 log_quote(qa, sizeof(qa), a, strlen(a)),
		 log_quote(qb, sizeof(qb), b, strlen(b)));
	rt->joined.n = 0;
	rt->left.n = 0;
}

static int runtime_seen_grow(struct runtime *rt, int idx)
{
	if ((size_t)idx < rt->seen_cap)
		return 0;
	size_t cap = rt->seen_cap ? rt->seen_cap : 64;
	while (cap <= (size_t)idx)
		cap *= 2;
	uint32_t *s = realloc(rt->seen, cap * sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	memset(s + rt->seen_cap, 0, (cap - rt->seen_cap) * sizeof(*s));
	rt->seen = s;
	rt->seen_cap = cap;
	return 0;
}

static uint64_t runtime_now(const struct runtime *rt)
{
	return rt->loop != NULL ? uv_now(rt->loop) : 0;
}

bool runtime_apply_row(struct runtime *rt, const struct runtime_row *row,
		       uint64_t now_ms)
{
	struct route *r = rt->route;
	if (!runtime_watched(rt, row->pxname, row->mode))
		return false;

	int idx[RUNTIME_MAX_KEYS];
	unsigned n = route_server_find(r, row->pxname, row->svname, idx,
				       RUNTIME_MAX_KEYS);
	if (n == 0) {
		char q1[160], q2[160];
		int a = route_server_add(r, row->pxname, row->svname, now_ms);
		log_quote(q1, sizeof(q1), row->pxname.ptr, row->pxname.len);
		log_quote(q2, sizeof(q2), row->svname.ptr, row->svname.len);
		if (a < 0) {
			/* Every poll reports the server again (a name over
			 * CONFIG_NAME_MAX stays too long): a line a minute. */
			static struct log_limit add_limit =
				LOG_LIMIT_INIT(LOG_LIMIT_INTERVAL_MS);
			uint64_t held;
			if (log_limit_allow(&add_limit, now_ms, &held))
				log_warn("cannot add a server from HAProxy",
					 "backend=%s server=%s error=%s suppressed=%" PRIu64,
					 q1, q2, strerror(-a), held);
			return true;
		}
		rt->servers_added++;
		runtime_note(&rt->joined, row->pxname, row->svname);
		n = route_server_find(r, row->pxname, row->svname, idx,
				      RUNTIME_MAX_KEYS);
	}

	/* Its id names it in a shared hint (hint.c). */
	if (row->sid >= 0)
		hint_ids_note(&r->hints, row->pxname, row->svname,
			      (uint32_t)row->sid);

	const struct config_endpoint *ep =
		route_config_find(r, row->pxname, row->svname);
	if (ep != NULL && rt->cfg_missing != NULL)
		rt->cfg_missing[ep - rt->cfg->endpoints] = false;

	enum core_admin admin = row->admin;
	if (!row->status_known)
		rt->rows_unknown_status++;
	/* Weight 0 is how HAProxy users drain a server (`set weight 0`):
	 * use-server would still force traffic onto it. */
	if (admin == CORE_ADMIN_ENABLED && row->weight == 0)
		admin = CORE_ADMIN_DRAIN;
	/* A backup server takes traffic only when no active one is up, and
	 * HAProxy decides that: warmlane never forces traffic onto it (with
	 * every active server excluded, its answer is none and HAProxy's own
	 * balancing picks the backup). Unless its endpoints[] entry gives it
	 * a failover tier: then warmlane uses it as an endpoint of that tier
	 * (docs/tiers.md), when the better tiers cannot serve. */
	if (admin == CORE_ADMIN_ENABLED && row->backup &&
	    (ep == NULL || ep->tier == 0))
		admin = CORE_ADMIN_NOLB;
	/* One server, n key ids: HAProxy counts the server, the core each
	 * endpoint+key; split so the pool's total stays right. */
	uint64_t sum = (uint64_t)row->scur + row->qcur;
	uint32_t total = sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
	/* HAProxy queues what is over the server's maxconn: its slots,
	 * unless endpoints[].slots says (split the same way) */
	uint32_t lim = row->slim > 0 ? (uint32_t)row->slim : 0;
	for (unsigned i = 0; i < n; i++) {
		core_endpoint_sync(r->core, idx[i], admin, route_share(total, i, n),
				   now_ms);
		core_endpoint_limit(r->core, idx[i], route_share(lim, i, n));
		/* its layer-7 check's duration (0 for the core is none: a
		 * check answered within the millisecond counts as 1) */
		core_endpoint_check(r->core, idx[i],
				    row->check_ms < 0 ? 0 :
				    row->check_ms == 0 ? 1 : (uint32_t)row->check_ms,
				    now_ms);
		if (runtime_seen_grow(rt, idx[i]) == 0)
			rt->seen[idx[i]] = rt->gen;
	}
	return true;
}

static void runtime_next_gen(struct runtime *rt)
{
	if (++rt->gen == 0)
		rt->gen = 1;
}

static bool runtime_over_budget(const struct runtime *rt)
{
	return uv_hrtime() - rt->turn_start_ns >=
	       RUNTIME_TURN_BUDGET_US * 1000ull;
}

/* The end of a complete poll, from rt->end_cursor on: with budget, it
 * returns false once this turn's time is spent (the cursor says where to
 * go on; removing an endpoint rebuilds the core's order, so a thousand
 * leaving at once took over 100 ms), true when every endpoint was seen
 * (and a new generation started). */
static bool runtime_apply_end_some(struct runtime *rt, bool budget)
{
	struct route *r = rt->route;
	uint64_t now = runtime_now(rt);
	int next;
	for (int idx = core_endpoint_next(r->core, rt->end_cursor); idx >= 0;
	     idx = next) {
		next = core_endpoint_next(r->core, idx);
		if (budget && runtime_over_budget(rt))
			return false; /* idx is the first one left */
		rt->end_cursor = idx;
		if ((size_t)idx < rt->seen_cap && rt->seen[idx] == rt->gen)
			continue;
		struct core_endpoint_info info;
		if (core_endpoint_info(r->core, idx, now, &info) < 0)
			continue;
		struct core_str b = core_str_c(info.backend);
		struct core_str s = core_str_c(info.server);
		if (!runtime_watched(rt, b, (struct core_str){ NULL, 0 }))
			continue;
		const struct config_endpoint *ep = route_config_find(r, b, s);
		if (ep != NULL) {
			size_t i = (size_t)(ep - rt->cfg->endpoints);
			if (rt->cfg_missing != NULL && !rt->cfg_missing[i]) {
				log_warn("configured endpoint not in HAProxy; excluded until it appears",
					 "backend=%s server=%s", info.backend,
					 info.server);
				rt->cfg_missing[i] = true;
			}
		} else {
			runtime_note(&rt->left, b, s);
		}
		if (core_endpoint_remove(r->core, idx) == 0)
			rt->servers_removed++;
	}
	rt->end_cursor = -1;
	runtime_next_gen(rt);
	return true;
}

void runtime_apply_end(struct runtime *rt)
{
	rt->end_cursor = -1;
	runtime_apply_end_some(rt, false);
}

/* ---- the poller --------------------------------------------------------- */

static void runtime_on_timer(uv_timer_t *t);

static void runtime_row_cb(void *arg, const struct runtime_row *row)
{
	struct runtime *rt = arg;
	runtime_apply_row(rt, row, uv_now(rt->loop));
	/* The budget of this turn: rows, and time (a join costs more than
	 * a sync, and the core's costs grow with the pool). */
	if (++rt->turn_rows >= RUNTIME_TURN_ROWS || runtime_over_budget(rt))
		rt->csv.pause = true;
}

/* After runtime_destroy: frees rt once its last handle is closed. */
static void runtime_destroyed_maybe(struct runtime *rt)
{
	if (rt->closing > 0 || rt->state != RUNTIME_STOPPED)
		return;
	void (*done)(void *) = rt->on_destroyed;
	void *arg = rt->on_destroyed_arg;
	free(rt->seen);
	free(rt->cfg_missing);
	free(rt);
	if (done != NULL)
		done(arg);
}

/* A handle closed by runtime_destroy is gone. */
static void runtime_stop_closed(struct runtime *rt)
{
	rt->closing--;
	runtime_destroyed_maybe(rt);
}

static void runtime_on_timer_closed(uv_handle_t *h)
{
	runtime_stop_closed(container_of(h, struct runtime, timer));
}

static void runtime_on_close(uv_handle_t *h)
{
	struct runtime *rt = container_of(h, struct runtime, pipe);
	rt->pipe_open = false;
	if (rt->state == RUNTIME_STOPPED) {
		runtime_stop_closed(rt);
		return;
	}
	rt->state = RUNTIME_IDLE;
	uint64_t delay = rt->interval_ms;
	if (rt->failures > RUNTIME_FAST_RETRIES) {
		/* Backoff: HAProxy down, or no socket at all. The first
		 * retries keep the poll interval: HAProxy started just after
		 * the agent, or reloading, is back within a second, and
		 * until then in-flight counts only rise. */
		unsigned f = rt->failures - RUNTIME_FAST_RETRIES;
		unsigned sh = f < 16 ? f : 16;
		delay = rt->interval_ms << sh;
		if (delay > RUNTIME_BACKOFF_MAX_MS)
			delay = rt->interval_ms > RUNTIME_BACKOFF_MAX_MS ?
					rt->interval_ms : RUNTIME_BACKOFF_MAX_MS;
	}
	uv_timer_start(&rt->timer, runtime_on_timer, delay, 0);
}

static void runtime_close_pipe(struct runtime *rt)
{
	uv_timer_stop(&rt->timer);
	if (rt->resume_init)
		uv_idle_stop(&rt->resume);
	rt->pend_len = 0;
	rt->ending = false;
	runtime_summarize(rt);
	rt->state = RUNTIME_CLOSING;
	if (rt->pipe_open && !uv_is_closing((uv_handle_t *)&rt->pipe))
		uv_close((uv_handle_t *)&rt->pipe, runtime_on_close);
	else if (!rt->pipe_open)
		runtime_on_close((uv_handle_t *)&rt->pipe);
}

static void runtime_first_poll(struct runtime *rt, bool ok)
{
	if (rt->first_poll_done)
		return;
	rt->first_poll_done = true;
	if (rt->on_first_poll != NULL)
		rt->on_first_poll(rt, ok, rt->on_first_poll_arg);
}

static void runtime_fail(struct runtime *rt, int err, const char *what)
{
	rt->stats->runtime_poll_failures++;
	rt->failures++;
	if (!rt->warned) {
		const char *e = err == -EPROTO ? "no show stat CSV in the answer"
					       : uv_strerror(err);
		char q[128];
		log_warn("HAProxy runtime API not reachable; routing on configured endpoints with local in-flight counts, retrying",
			 "socket=%s error=%s step=%s", rt->path_log,
			 log_quote(q, sizeof(q), e, strlen(e)), what);
		rt->warned = true;
	} else {
		log_debug("runtime API poll failed", "socket=%s error=%s step=%s",
			  rt->path_log, uv_err_name(err), what);
	}
	rt->reachable = false;
	runtime_close_pipe(rt);
	runtime_first_poll(rt, false);
}

static void runtime_on_resume(uv_idle_t *h);

static void runtime_succeed(struct runtime *rt)
{
	if (rt->peers_asked)
		core_peers_note(rt->route->core, runtime_peers_end(&rt->csv.peers),
				uv_now(rt->loop));
	if (!rt->reachable)
		log_info("HAProxy runtime API polled", "socket=%s servers=%" PRIu64
			 " bad_lines=%" PRIu64, rt->path_log, rt->csv.rows,
			 rt->csv.bad + rt->csv.dropped);
	rt->reachable = true;
	rt->warned = false;
	rt->failures = 0;
	/* A line lost (too long, unparsable) might be a server: remove
	 * nobody on the strength of this poll. */
	if (rt->csv.bad == 0 && rt->csv.dropped == 0) {
		/* Over the next turns, from the idle handle; HAProxy has
		 * answered, so the poll's timeout no longer applies. */
		uv_timer_stop(&rt->timer);
		rt->end_cursor = -1;
		rt->ending = true;
		uv_idle_start(&rt->resume, runtime_on_resume);
		return;
	}
	runtime_next_gen(rt);
	runtime_close_pipe(rt);
	runtime_first_poll(rt, true);
}

static void runtime_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
	struct runtime *rt = container_of(h, struct runtime, pipe);
	(void)size;
	*buf = uv_buf_init(rt->rbuf, sizeof(rt->rbuf));
}

static void runtime_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* One loop turn's slice of the bytes read: rows are applied until the
 * turn's budget is spent; the rest waits for the next turn (the idle
 * handle keeps the loop from blocking meanwhile), and reading resumes
 * once the buffer is used up. */
static void runtime_resume_slice(struct runtime *rt);

static void runtime_on_resume(uv_idle_t *h)
{
	struct runtime *rt = container_of(h, struct runtime, resume);
	uint64_t t0 = uv_hrtime();
	runtime_resume_slice(rt);
	uint64_t d = uv_hrtime() - t0;
	if (d > rt->slice_max_ns)
		rt->slice_max_ns = d;
}

static void runtime_resume_slice(struct runtime *rt)
{
	if (rt->state != RUNTIME_POLLING) {
		rt->ending = false;
		uv_idle_stop(&rt->resume);
		return;
	}
	rt->turn_start_ns = uv_hrtime();
	rt->turn_rows = 0;
	rt->slices++;
	if (rt->ending) {
		if (!runtime_apply_end_some(rt, true)) {
			rt->slices_cut++;
			return;
		}
		rt->ending = false;
		uv_idle_stop(&rt->resume);
		runtime_close_pipe(rt);
		runtime_first_poll(rt, true);
		return;
	}
	if (rt->pend_len == 0) {
		uv_idle_stop(&rt->resume);
		return;
	}
	ptrdiff_t used = runtime_csv_feed_part(&rt->csv, rt->rbuf + rt->pend_off,
					       rt->pend_len, runtime_row_cb, rt);
	if (used < 0) {
		runtime_fail(rt, -EPROTO, "read");
		return;
	}
	rt->pend_off += (size_t)used;
	rt->pend_len -= (size_t)used;
	if (rt->pend_len > 0) {
		rt->slices_cut++;
		return;
	}
	uv_idle_stop(&rt->resume);
	int r = uv_read_start((uv_stream_t *)&rt->pipe, runtime_alloc,
			      runtime_on_read);
	if (r < 0)
		runtime_fail(rt, r, "read");
}

static void runtime_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct runtime *rt = container_of(s, struct runtime, pipe);
	(void)buf;
	if (rt->state != RUNTIME_POLLING)
		return;
	if (nread > 0) {
		/* Applied from the idle handle, a slice per loop turn: libuv
		 * would otherwise call back up to 32 times in this turn. */
		uv_read_stop(s);
		rt->pend_off = 0;
		rt->pend_len = (size_t)nread;
		if (!rt->resume_init) {
			if (uv_idle_init(rt->loop, &rt->resume) < 0) {
				runtime_fail(rt, UV_ENOMEM, "read");
				return;
			}
			rt->resume_init = true;
		}
		uv_idle_start(&rt->resume, runtime_on_resume);
		return;
	}
	if (nread == UV_EOF) {
		if (runtime_csv_finish(&rt->csv, runtime_row_cb, rt) < 0)
			runtime_fail(rt, -EPROTO, "read");
		else
			runtime_succeed(rt);
		return;
	}
	if (nread < 0)
		runtime_fail(rt, (int)nread, "read");
}

static void runtime_on_write(uv_write_t *req, int status)
{
	struct runtime *rt = container_of(req, struct runtime, write_req);
	if (status < 0 && rt->state == RUNTIME_POLLING)
		runtime_fail(rt, status, "write");
}

static void runtime_on_connect(uv_connect_t *req, int status)
{
	struct runtime *rt = container_of(req, struct runtime, connect_req);
	if (rt->state != RUNTIME_POLLING)
		return;
	if (status < 0) {
		runtime_fail(rt, status, "connect");
		return;
	}
	/* Static buffers: they outlive the write whatever happens. */
	static const char cmd[] = RUNTIME_COMMAND;
	static const char cmd_peers[] = RUNTIME_COMMAND_PEERS;
	uv_buf_t b = rt->peers_asked ?
		uv_buf_init((char *)(uintptr_t)cmd_peers, sizeof(cmd_peers) - 1) :
		uv_buf_init((char *)(uintptr_t)cmd, sizeof(cmd) - 1);
	int r = uv_read_start((uv_stream_t *)&rt->pipe, runtime_alloc,
			      runtime_on_read);
	if (r == 0)
		r = uv_write(&rt->write_req, (uv_stream_t *)&rt->pipe, &b, 1,
			     runtime_on_write);
	if (r < 0)
		runtime_fail(rt, r, "write");
}

static void runtime_poll_begin(struct runtime *rt)
{
	rt->stats->runtime_polls++;
	rt->state = RUNTIME_POLLING;
	rt->poll_started_ms = uv_now(rt->loop);
	runtime_csv_init(&rt->csv);
	runtime_next_gen(rt);
	/* HAProxy's peers, while requests carry shared warm hints: whether
	 * hints this HAProxy wrote itself show a shared table (routers.h) */
	struct core_routers_info ri;
	core_routers_info(rt->route->core, &ri);
	rt->peers_asked = ri.hinted >= 1 &&
			  (rt->peers_ms == 0 ||
			   rt->poll_started_ms >= rt->peers_ms + RUNTIME_PEERS_EVERY_MS);
	if (rt->peers_asked)
		rt->peers_ms = rt->poll_started_ms > 0 ? rt->poll_started_ms : 1;
	uint64_t timeout = rt->interval_ms > RUNTIME_POLL_TIMEOUT_MS ?
				   rt->interval_ms : RUNTIME_POLL_TIMEOUT_MS;
	uv_timer_start(&rt->timer, runtime_on_timer, timeout, 0);
	int r = uv_pipe_init(rt->loop, &rt->pipe, 0);
	if (r < 0) {
		runtime_fail(rt, r, "socket");
		return;
	}
	rt->pipe_open = true;
	/* Errors (ENOENT, ECONNREFUSED, EACCES) come through the callback. */
	uv_pipe_connect(&rt->connect_req, &rt->pipe, rt->path,
			runtime_on_connect);
}

static void runtime_on_timer(uv_timer_t *t)
{
	struct runtime *rt = container_of(t, struct runtime, timer);
	if (rt->state == RUNTIME_IDLE)
		runtime_poll_begin(rt);
	else if (rt->state == RUNTIME_POLLING)
		runtime_fail(rt, UV_ETIMEDOUT, "timeout");
}

/* Fills a zeroed rt from cfg; no handle yet. Returns 0 or -ENOMEM. */
static int runtime_init(struct runtime *rt, uv_loop_t *loop,
			struct route *route, struct stats *stats,
			const struct config *cfg)
{
	rt->loop = loop;
	rt->route = route;
	rt->stats = stats;
	rt->cfg = cfg;
	rt->gen = 1;
	rt->interval_ms = cfg->params.poll_interval_ms > 0 ?
				  cfg->params.poll_interval_ms : 200;
	if (cfg->n_endpoints > 0) {
		rt->cfg_missing = calloc(cfg->n_endpoints, sizeof(bool));
		if (rt->cfg_missing == NULL)
			return -ENOMEM;
	}
	const char *p = cfg->runtime_socket != NULL ? cfg->runtime_socket : "";
	if (strncmp(p, "unix:", 5) == 0)
		p += 5;
	if (p[0] == '\0') {
		log_info("runtime API polling disabled (runtime_api.socket is empty)",
			 NULL);
		return 0;
	}
	if (strncmp(p, "tcp:", 4) == 0 || strlen(p) >= sizeof(rt->path)) {
		char q[240];
		log_warn("runtime API polling disabled: runtime_api.socket must be a unix socket path",
			 "socket=%s", log_quote(q, sizeof(q), p, strlen(p)));
		return 0;
	}
	memcpy(rt->path, p, strlen(p) + 1);
	log_quote(rt->path_log, sizeof(rt->path_log), rt->path, strlen(rt->path));
	rt->enabled = true;
	return 0;
}

/* The first poll at once (nothing when disabled). Returns 0 or -errno
 * from uv_timer_init. */
static int runtime_start(struct runtime *rt)
{
	if (!rt->enabled || rt->timer_init)
		return 0;
	int r = uv_timer_init(rt->loop, &rt->timer);
	if (r < 0)
		return r;
	rt->timer_init = true;
	rt->state = RUNTIME_IDLE;
	return uv_timer_start(&rt->timer, runtime_on_timer, 0, 0);
}

static void runtime_on_resume_closed(uv_handle_t *h)
{
	runtime_stop_closed(container_of(h, struct runtime, resume));
}

void runtime_destroy(struct runtime *rt, void (*done)(void *arg), void *arg)
{
	if (rt == NULL || rt->state == RUNTIME_STOPPED)
		return;
	rt->on_destroyed = done;
	rt->on_destroyed_arg = arg;
	rt->state = RUNTIME_STOPPED;
	if (rt->resume_init) {
		rt->resume_init = false;
		rt->closing++;
		uv_close((uv_handle_t *)&rt->resume, runtime_on_resume_closed);
	}
	if (rt->timer_init) {
		rt->closing++;
		uv_close((uv_handle_t *)&rt->timer, runtime_on_timer_closed);
	}
	/* A pipe already closing (a poll just ended) still has
	 * runtime_on_close due: it counts too. */
	if (rt->pipe_open) {
		rt->closing++;
		if (!uv_is_closing((uv_handle_t *)&rt->pipe))
			uv_close((uv_handle_t *)&rt->pipe, runtime_on_close);
	}
	runtime_destroyed_maybe(rt);
}

int runtime_create(struct runtime **out, uv_loop_t *loop, struct route *route,
		   struct stats *stats, const struct config *cfg,
		   runtime_first_poll_fn on_first_poll, void *arg)
{
	*out = NULL;
	struct runtime *rt = calloc(1, sizeof(*rt));
	if (rt == NULL)
		return -ENOMEM;
	rt->on_first_poll = on_first_poll;
	rt->on_first_poll_arg = arg;
	int r = runtime_init(rt, loop, route, stats, cfg);
	if (r == 0)
		r = runtime_start(rt);
	if (r < 0) {
		runtime_destroy(rt, NULL, NULL); /* freed when its timer is */
		return r;
	}
	*out = rt;
	return 0;
}
