/* conn.c - one SPOP connection on libuv: reassembly, HELLO, NOTIFY/ACK, close. */
#include "conn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "notify.h"
#include "server.h"
#include "spop.h"

static void conn_close_cb(uv_handle_t *h);
static void conn_process(struct conn *c);

/* ---- write buffers ----------------------------------------------------- */

static bool wbuf_available(const struct conn *c)
{
	return c->free_wbufs != NULL || c->n_wbufs < CONN_WBUF_MAX;
}

/* A free buffer, or NULL when CONN_WBUF_MAX are in flight. `reserve` allows
 * one more, so that an AGENT-DISCONNECT can always be queued. */
static struct conn_wbuf *wbuf_get(struct conn *c, bool reserve)
{
	struct conn_wbuf *wb = c->free_wbufs;
	if (wb != NULL) {
		c->free_wbufs = wb->next;
		return wb;
	}
	if (c->n_wbufs >= CONN_WBUF_MAX + (reserve ? 1u : 0u))
		return NULL;
	wb = malloc(sizeof(*wb));
	if (wb == NULL)
		return NULL;
	wb->conn = c;
	c->n_wbufs++;
	return wb;
}

static void wbuf_put(struct conn *c, struct conn_wbuf *wb)
{
	wb->next = c->free_wbufs;
	c->free_wbufs = wb;
}

/* The largest frame this connection may send: the negotiated size bounds
 * the length field, which excludes its own 4 bytes. */
static size_t conn_out_cap(const struct conn *c)
{
	size_t cap = (size_t)c->max_frame + 4;
	return cap < CONN_FRAME_MAX ? cap : CONN_FRAME_MAX;
}

static void conn_write_cb(uv_write_t *req, int status)
{
	struct conn_wbuf *wb = container_of(req, struct conn_wbuf, req);
	struct conn *c = wb->conn;
	c->pending_writes--;
	wbuf_put(c, wb);

	if (uv_is_closing(&c->h.handle))
		return; /* cancelled by the close: nothing more to do */
	if (status < 0) {
		if (status != UV_EPIPE && status != UV_ECONNRESET)
			c->srv->stats.io_errors++;
		log_debug("write failed", "conn=%" PRIu64 " error=%s", c->id,
			  uv_err_name(status));
		conn_destroy(c);
		return;
	}
	if (c->stalled) {
		c->stalled = false;
		conn_process(c);
	}
}

/* Writes len bytes of whole frames with a single write (docs/spop.md: split
 * frames caused resets on HAProxy 3.2; several whole frames in one write
 * are fine). uv_try_write first: a local socket nearly always takes the
 * whole batch at once, and then no request is queued, no callback runs and
 * libuv does not re-arm the poll (an epoll_ctl per uv_write otherwise).
 * While earlier writes are queued it refuses (UV_EAGAIN), so the order
 * holds; what it could not take goes through uv_write, wb staying in use
 * until the callback. Returns 0 (wb is then back on the free list if the
 * write completed), or a libuv error after which wb is back on the free
 * list and the connection is closing. */
static int conn_write(struct conn *c, struct conn_wbuf *wb, size_t len)
{
	uv_buf_t buf = uv_buf_init((char *)wb->data, (unsigned)len);
	int r = uv_try_write(&c->h.stream, &buf, 1);
	if (r >= 0 && (size_t)r == len) {
		wbuf_put(c, wb);
		c->srv->stats.writes++;
		return 0;
	}
	if (r >= 0) {
		buf = uv_buf_init((char *)wb->data + r, (unsigned)(len - (size_t)r));
		r = 0;
	}
	if (r == 0 || r == UV_EAGAIN || r == UV_ENOSYS)
		r = uv_write(&wb->req, &c->h.stream, &buf, 1, conn_write_cb);
	if (r < 0) {
		wbuf_put(c, wb);
		if (r != UV_EPIPE && r != UV_ECONNRESET && r != UV_EAGAIN)
			c->srv->stats.io_errors++;
		log_debug("write failed", "conn=%" PRIu64 " error=%s", c->id,
			  uv_err_name(r));
		conn_destroy(c);
		return r;
	}
	c->pending_writes++;
	c->srv->stats.writes++;
	return 0;
}

/* Queues one frame on its own write; see conn_write. */
static int conn_send(struct conn *c, struct conn_wbuf *wb, size_t len,
		     enum stats_frame kind)
{
	int r = conn_write(c, wb, len);
	if (r < 0)
		return r;
	c->srv->stats.frames[kind]++;
	return 0;
}

/* Writes the ACKs batched so far, if any, in one write. Called when a
 * pass over the read buffer ends, when less room than the largest frame
 * is left for the next ACK, and before any frame or close that must come
 * after them. Returns 0, or a libuv error after which the connection is
 * closing. */
static int conn_flush(struct conn *c)
{
	struct conn_wbuf *wb = c->batch;
	if (wb == NULL)
		return 0;
	size_t len = c->batch_len;
	unsigned frames = c->batch_frames;
	c->batch = NULL;
	c->batch_len = 0;
	c->batch_frames = 0;
	int r = conn_write(c, wb, len);
	if (r < 0)
		return r;
	c->srv->stats.frames[STATS_FRAME_ACK] += frames;
	return 0;
}

/* Where the next ACK is encoded: the end of the batch, with room for a
 * frame of the largest size (cap), the batch written first when less is
 * left. A frame is never split across writes, and the room left never
 * cuts an ACK down. Returns NULL when the connection is closing. */
static uint8_t *conn_ack_room(struct conn *c, size_t cap)
{
	if (c->batch != NULL && CONN_WBUF_SIZE - c->batch_len < cap &&
	    conn_flush(c) < 0)
		return NULL;
	if (c->batch == NULL) {
		c->batch = wbuf_get(c, false);
		if (c->batch == NULL) { /* cannot happen: conn_process checked */
			conn_destroy(c);
			return NULL;
		}
	}
	return c->batch->data + c->batch_len;
}

/* Whether one more frame's answer has a place: room in the batch for a
 * frame of the largest size, or a buffer for a new write. */
static bool conn_can_answer(const struct conn *c)
{
	if (c->batch != NULL &&
	    CONN_WBUF_SIZE - c->batch_len >= conn_out_cap(c))
		return true;
	return wbuf_available(c);
}

/* ---- closing ------------------------------------------------------------ */

void conn_destroy(struct conn *c)
{
	c->state = CONN_CLOSING;
	c->reading = false;
	if (c->batch != NULL) { /* never written: nothing to cancel */
		wbuf_put(c, c->batch);
		c->batch = NULL;
		c->batch_len = 0;
		c->batch_frames = 0;
	}
	if (!uv_is_closing(&c->h.handle))
		uv_close(&c->h.handle, conn_close_cb);
}

static void conn_shutdown_cb(uv_shutdown_t *req, int status)
{
	struct conn *c = container_of(req, struct conn, shutdown_req);
	(void)status;
	if (!uv_is_closing(&c->h.handle))
		uv_close(&c->h.handle, conn_close_cb);
}

/* Closes once the queued writes are flushed: uv_shutdown waits for them,
 * where uv_close would cancel them (and the DISCONNECT with them). */
static void conn_finish(struct conn *c)
{
	if (conn_flush(c) < 0)
		return;
	c->state = CONN_CLOSING;
	if (c->reading) {
		uv_read_stop(&c->h.stream);
		c->reading = false;
	}
	if (uv_is_closing(&c->h.handle))
		return;
	if (uv_shutdown(&c->shutdown_req, &c->h.stream, conn_shutdown_cb) < 0)
		uv_close(&c->h.handle, conn_close_cb);
}

/* Sends AGENT-DISCONNECT with status (and message, or the standard text)
 * and closes after it is written. */
static void conn_disconnect(struct conn *c, enum spop_status status,
			    const char *message)
{
	if (c->state == CONN_CLOSING)
		return;
	/* The ACKs answered before it go first. */
	if (conn_flush(c) < 0)
		return;
	struct conn_wbuf *wb = wbuf_get(c, true);
	if (wb == NULL) {
		conn_destroy(c);
		return;
	}
	ptrdiff_t n = spop_disconnect_encode(wb->data, conn_out_cap(c), status,
					     message);
	if (n <= 0) {
		wbuf_put(c, wb);
		conn_destroy(c);
		return;
	}
	c->srv->stats.disconnects_sent[stats_status_index(status)]++;
	if (conn_send(c, wb, (size_t)n, STATS_FRAME_AGENT_DISCONNECT) < 0)
		return;
	conn_finish(c);
}

/* At most this many protocol-error lines a second; the rest are counted
 * and reported once the second is over. */
#define CONN_ERRLOG_PER_SECOND 10

/* A protocol error: logged, answered with its status, connection closed. */
static void conn_fail(struct conn *c, enum spop_status status,
		      const char *why)
{
	struct server *s = c->srv;
	uint64_t second = uv_now(s->loop) / 1000;
	if (second != s->errlog_second) {
		if (s->errlog_suppressed > 0)
			log_warn("protocol error lines suppressed",
				 "count=%" PRIu64, s->errlog_suppressed);
		s->errlog_second = second;
		s->errlog_lines = 0;
		s->errlog_suppressed = 0;
	}
	if (s->errlog_lines < CONN_ERRLOG_PER_SECOND) {
		char q[160];
		const char *text = why != NULL ? why : spop_status_text(status);
		s->errlog_lines++;
		log_warn("protocol error, disconnecting",
			 "conn=%" PRIu64 " status=%u error=%s", c->id,
			 (unsigned)status,
			 log_quote(q, sizeof(q), text, strlen(text)));
	} else {
		s->errlog_suppressed++;
	}
	conn_disconnect(c, status, why);
}

static void conn_close_cb(uv_handle_t *h)
{
	struct conn *c = container_of(h, struct conn, h.handle);
	/* libuv has run every write callback (ECANCELED for the unsent) before
	 * this one, so every buffer is back on the free list (a batch never
	 * written was put back by conn_destroy). */
	while (c->free_wbufs != NULL) {
		struct conn_wbuf *wb = c->free_wbufs;
		c->free_wbufs = wb->next;
		free(wb);
	}
	free(c->rbuf);
	c->rbuf = NULL;
	server_conn_closed(c->srv, c);
	free(c);
}

/* ---- frames --------------------------------------------------------------- */

static void conn_on_hello(struct conn *c, const struct spop_frame *f)
{
	struct spop_hello h;
	enum spop_status st;
	uint32_t max;

	if (c->state != CONN_HELLO) {
		conn_fail(c, SPOP_ERR_INVALID, "HAPROXY-HELLO after the handshake");
		return;
	}
	/* Against this connection's read buffer, not the configuration: a
	 * reload may have raised max_frame_size since the accept sized the
	 * buffer, and a limit above it would let HAProxy send frames the
	 * buffer cannot hold (the connection would die of ENOBUFS). */
	uint32_t ours = (uint32_t)(c->rcap - 4);
	/* Before the handshake no ACK is batched: the HELLO goes alone. */
	if (spop_hello_parse(f->payload, f->payload_len, &h, &st) < 0 ||
	    spop_hello_negotiate(&h, ours, &max, &st) < 0) {
		conn_fail(c, st, NULL);
		return;
	}
	struct conn_wbuf *wb = wbuf_get(c, false);
	if (wb == NULL) { /* cannot happen: checked before decoding */
		conn_destroy(c);
		return;
	}
	/* Only pipelining: 3.1+ ignores async and fragmentation, and 2.6
	 * would otherwise send fragments this agent does not reassemble. */
	ptrdiff_t n = spop_agent_hello_encode(wb->data, CONN_FRAME_MAX, max, true);
	if (n <= 0) {
		wbuf_put(c, wb);
		conn_fail(c, SPOP_ERR_RES, NULL);
		return;
	}
	if (conn_send(c, wb, (size_t)n, STATS_FRAME_AGENT_HELLO) < 0)
		return;
	c->state = CONN_READY;
	c->max_frame = max;
	server_tq_push(c->srv, &c->srv->tq_idle, c, uv_now(c->srv->loop));
	c->healthcheck = h.healthcheck;
	if (h.healthcheck)
		c->srv->stats.healthchecks++;
	if (log_enabled(LOG_LEVEL_DEBUG)) {
		char q[96];
		log_debug("hello", "conn=%" PRIu64 " max_frame_size=%" PRIu32
			  " healthcheck=%s engine_id=%s",
			  c->id, max, h.healthcheck ? "true" : "false",
			  log_quote(q, sizeof(q), (const char *)h.engine_id.ptr,
				    h.engine_id.len));
	}
}

/* A frame decoded ahead of its answer (conn_process). */
struct conn_next {
	ptrdiff_t len;          /* bytes of the frame; < 0: refused, st says why */
	int parsed;             /* a NOTIFY: 0, or SPOP_EPROTO (st) */
	bool fetch;             /* prefetch steps left (notify_prefetch) */
	enum spop_status st;
	struct notify_frame nf; /* the frame; a NOTIFY's messages parsed */
};

static struct notify_ctx conn_notify_ctx(const struct conn *c)
{
	uint64_t now = uv_now(c->srv->loop);
	return (struct notify_ctx){
		.route = &c->srv->route,
		.stats = &c->srv->stats,
		.now_ms = now,
		.now_unix_s = route_wall_s(&c->srv->route, now),
		.conn_id = c->id,
		.prefetch = core_prefetch_pays(c->srv->route.core),
	};
}

static void conn_on_notify(struct conn *c, struct notify_ctx *ctx,
			   const struct conn_next *x)
{
	if (c->state != CONN_READY) {
		conn_fail(c, SPOP_ERR_INVALID, "NOTIFY before HELLO");
		return;
	}
	struct notify_deferred later;
	enum spop_status st = x->st;
	ptrdiff_t n = SPOP_EPROTO;
	if (x->parsed == 0) {
		/* Encoded in place: a copy would read the ACK back across the
		 * encoder's narrower stores (a store-forwarding stall). */
		size_t cap = conn_out_cap(c);
		uint8_t *out = conn_ack_room(c, cap);
		if (out == NULL)
			return;
		n = notify_answer(ctx, &x->nf, out, cap, &later, &st);
	}
	if (n <= 0) {
		conn_fail(c, st, st == SPOP_ERR_INVALID ? "malformed NOTIFY payload"
							: NULL);
		return;
	}
	c->batch_len += (size_t)n;
	c->batch_frames++;
	/* After the ACK is batched and before the read buffer moves: the
	 * deferred feedback holds views into this frame. */
	notify_run_deferred(ctx, &later);
}

static void conn_on_disconnect(struct conn *c, const struct spop_frame *f)
{
	uint32_t code = SPOP_ERR_UNKNOWN;
	struct spop_str msg = { (const uint8_t *)"", 0 };
	enum spop_status st;
	if (spop_disconnect_parse(f->payload, f->payload_len, &code, &msg,
				  &st) < 0)
		code = SPOP_ERR_UNKNOWN;
	c->srv->stats.disconnects_received[stats_status_index(code)]++;
	char q[160];
	log_write(code == SPOP_ERR_NONE ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO,
		  "HAProxy disconnected", "conn=%" PRIu64 " status=%" PRIu32
		  " message=%s", c->id, code,
		  log_quote(q, sizeof(q), (const char *)msg.ptr, msg.len));
	conn_disconnect(c, SPOP_ERR_NONE, NULL);
}

static void conn_on_frame(struct conn *c, struct notify_ctx *ctx,
			  const struct conn_next *x)
{
	const struct spop_frame *f = &x->nf.frame;

	/* Whole frames, not bytes, keep a connection from idling out: one
	 * trickling a frame byte by byte does not hold its buffer for ever. */
	server_tq_touch(c->srv, c, uv_now(c->srv->loop));
	switch (f->type) {
	case SPOP_FRAME_HAPROXY_HELLO:
		c->srv->stats.frames[STATS_FRAME_HAPROXY_HELLO]++;
		conn_on_hello(c, f);
		break;
	case SPOP_FRAME_NOTIFY:
		c->srv->stats.frames[STATS_FRAME_NOTIFY]++;
		conn_on_notify(c, ctx, x);
		break;
	case SPOP_FRAME_HAPROXY_DISCONNECT:
		c->srv->stats.frames[STATS_FRAME_HAPROXY_DISCONNECT]++;
		conn_on_disconnect(c, f);
		break;
	default:
		/* An agent's own frame types coming back. */
		conn_fail(c, SPOP_ERR_INVALID, "unexpected frame type");
		break;
	}
}

/* Frames decoded ahead of the one answered (a power of two). What a
 * NOTIFY will read in the affinity map takes three steps, each needing the
 * one before (index slot, entry, the entry's LRU neighbours): at 10^6 keys
 * each is a cache miss. Issued one answer apart for the frames waiting,
 * they overlap with the answers before theirs instead of stalling each
 * decision in turn (notify_prefetch). */
#define CONN_AHEAD 4

/* Decodes the frame at *scan into x, parses a NOTIFY's messages and takes
 * their first prefetch step. Returns false when no whole frame is left. */
static bool conn_decode(struct conn *c, struct notify_ctx *ctx, size_t *scan,
			struct conn_next *x)
{
	/* Decoded in its place: a copy of the frame would be read back
	 * across the decoder's narrower stores (a store-forwarding stall). */
	struct spop_frame *f = &x->nf.frame;
	x->st = SPOP_ERR_INVALID;
	x->len = spop_frame_decode(c->rbuf + *scan, c->rlen - *scan,
				   c->max_frame, f, &x->st);
	if (x->len == SPOP_NEED_MORE)
		return false;
	if (x->len < 0)
		return true;
	*scan += (size_t)x->len;
	x->parsed = 0;
	x->fetch = false;
	if (f->type == SPOP_FRAME_NOTIFY) {
		x->parsed = notify_parse_frame(ctx, f, &x->nf, &x->st);
		x->fetch = x->parsed == 0 && ctx->prefetch &&
			   notify_prefetch(ctx, &x->nf);
	}
	return true;
}

/* Handles every complete frame in the read buffer, keeps the partial tail,
 * and decides whether to keep reading. */
static void conn_process(struct conn *c)
{
	struct conn_next next[CONN_AHEAD];
	unsigned head = 0, tail = 0; /* decoded, not answered: [head, tail) */
	size_t off = 0;              /* bytes answered */
	size_t scan = 0;             /* bytes decoded */
	bool whole = true;           /* a whole frame may follow scan */
	struct notify_ctx ctx = conn_notify_ctx(c);

	while (c->state != CONN_CLOSING) {
		/* Every frame is answered by one frame: without room for it,
		 * stop here and let the peer wait (backpressure). */
		if (!conn_can_answer(c)) {
			if (!c->stalled)
				c->srv->stats.read_stalls++;
			c->stalled = true;
			break;
		}
		/* Nothing is decoded past a refused frame, nor past one that
		 * is not a NOTIFY until it is answered: a HELLO sets the
		 * frame size the next are decoded with. */
		unsigned fresh = tail; /* decoded from here on: in this round */
		while (whole && tail - head < CONN_AHEAD) {
			const struct conn_next *last = &next[(tail - 1) % CONN_AHEAD];
			if (tail > head &&
			    (last->len < 0 || last->nf.frame.type != SPOP_FRAME_NOTIFY))
				break;
			whole = conn_decode(c, &ctx, &scan, &next[tail % CONN_AHEAD]);
			tail += whole;
		}
		if (head == tail)
			break;
		/* The next step of each frame decoded in an earlier round: a
		 * frame decoded now has just taken its first, and the second
		 * reads what the first fetches (a miss, had it no time). */
		for (unsigned i = head + 1; ctx.prefetch && i < fresh; i++) {
			struct conn_next *x = &next[i % CONN_AHEAD];
			if (x->fetch)
				x->fetch = notify_prefetch(&ctx, &x->nf);
		}
		const struct conn_next *x = &next[head++ % CONN_AHEAD];
		if (x->len < 0) {
			/* Oversized frames are refused from their length
			 * field alone: their body is never read. */
			conn_fail(c, x->st, NULL);
			break;
		}
		conn_on_frame(c, &ctx, x);
		off += (size_t)x->len;
	}
	/* One write for the ACKs of the whole pass; a stalled pass writes
	 * its batch too. A stall means every buffer but the batch is in a
	 * write queued by uv_write (one uv_try_write completed is back on the
	 * free list at once), so a write callback is due to resume it. */
	if (c->state != CONN_CLOSING)
		conn_flush(c);
	if (c->state == CONN_CLOSING)
		return;

	if (off > 0) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
	if (c->draining) {
		if (!c->stalled)
			conn_disconnect(c, SPOP_ERR_NONE, "agent shutting down");
		return;
	}
	if (c->stalled && c->reading) {
		uv_read_stop(&c->h.stream);
		c->reading = false;
	} else if (!c->stalled && !c->reading) {
		conn_start(c);
	}
}

/* ---- reading ---------------------------------------------------------- */

static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *c = container_of(h, struct conn, h.handle);
	(void)suggested;
	/* The buffer holds a whole frame of the largest size allowed, and
	 * complete frames are consumed before the next read: the tail left
	 * is always shorter than the buffer. */
	*buf = uv_buf_init((char *)c->rbuf + c->rlen,
			   (unsigned)(c->rcap - c->rlen));
}

static void conn_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = container_of(st, struct conn, h.stream);
	(void)buf;

	if (nread > 0) {
		c->rlen += (size_t)nread;
		if (c->srv->before_pass != NULL)
			c->srv->before_pass(c->srv->before_pass_arg);
		conn_process(c);
		return;
	}
	if (nread == 0)
		return; /* EAGAIN */
	if (nread == UV_EOF) {
		log_debug("connection closed by peer", "conn=%" PRIu64, c->id);
		conn_finish(c); /* flush the ACKs already queued */
		return;
	}
	if (nread == UV_ECONNRESET) {
		log_debug("connection reset by peer", "conn=%" PRIu64, c->id);
		conn_destroy(c);
		return;
	}
	c->srv->stats.io_errors++;
	log_warn("read failed", "conn=%" PRIu64 " error=%s", c->id,
		 uv_err_name((int)nread));
	conn_destroy(c);
}

void conn_expire(struct conn *c)
{
	struct server *s = c->srv;
	if (c->state == CONN_CLOSING) {
		/* Its DISCONNECT or shutdown has not gone out in a whole
		 * timeout: the peer does not read. */
		conn_destroy(c);
		return;
	}
	if (c->state == CONN_HELLO) {
		s->stats.timeouts_hello++;
		conn_fail(c, SPOP_ERR_TIMEOUT,
			  "no HAPROXY-HELLO within spop.hello_timeout");
	} else {
		s->stats.timeouts_idle++;
		log_debug("idle timeout, disconnecting", "conn=%" PRIu64, c->id);
		if (c->stalled || c->pending_writes > 0) {
			conn_destroy(c); /* what was written is still unread */
			return;
		}
		conn_disconnect(c, SPOP_ERR_NONE, "idle timeout");
	}
	/* The close itself gets one hello timeout to finish. */
	if (!uv_is_closing(&c->h.handle))
		server_tq_push(s, &s->tq_hello, c, uv_now(s->loop));
}

int conn_start(struct conn *c)
{
	if (c->reading || c->state == CONN_CLOSING)
		return 0;
	int r = uv_read_start(&c->h.stream, conn_alloc_cb, conn_read_cb);
	if (r < 0) {
		log_warn("cannot read", "conn=%" PRIu64 " error=%s", c->id,
			 uv_err_name(r));
		conn_destroy(c);
		return r;
	}
	c->reading = true;
	return 0;
}

void conn_drain(struct conn *c)
{
	if (c->state == CONN_CLOSING)
		return;
	c->draining = true;
	if (c->reading) {
		uv_read_stop(&c->h.stream);
		c->reading = false;
	}
	/* Complete frames are handled as soon as they are read, so only a
	 * stalled connection still has some; its write callback finishes. */
	if (!c->stalled)
		conn_disconnect(c, SPOP_ERR_NONE, "agent shutting down");
}

int conn_create(struct server *srv, bool tcp, struct conn **out)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->rcap = (size_t)srv->cfg->max_frame_size + 4;
	c->rbuf = malloc(c->rcap);
	if (c->rbuf == NULL) {
		free(c);
		return -ENOMEM;
	}
	c->srv = srv;
	c->is_tcp = tcp;
	c->state = CONN_HELLO;
	c->max_frame = srv->cfg->max_frame_size;
	c->id = ++srv->next_conn_id;
	int r = tcp ? uv_tcp_init(srv->loop, &c->h.tcp)
		    : uv_pipe_init(srv->loop, &c->h.pipe, 0);
	if (r < 0) {
		free(c->rbuf);
		free(c);
		return r;
	}
	/* From here the close callback owns c: link it so that it finds it. */
	c->next = srv->conns;
	if (srv->conns != NULL)
		srv->conns->prev = c;
	srv->conns = c;
	srv->stats.conn_accepted++;
	srv->stats.conn_active++;
	server_tq_push(srv, &srv->tq_hello, c, uv_now(srv->loop));
	*out = c;
	return 0;
}
