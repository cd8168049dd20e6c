/* const_agent.c - bench-const-agent: an SPOP agent answering a constant (the codec and loop floor of the overhead benchmark). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "spop.h"

/* Usage: bench-const-agent SOCKET_PATH
 *
 * Listens on a unix socket and answers every `route` message with fixed
 * variables (the ones warmlane sets: backend, server, key, reason) and every
 * other message with `ack`, using the same codec (proto/: every argument
 * read, name and value, by the inline reader warmlane's NOTIFY parser
 * uses, spop_arg_read and spop_data_read; the message name compared as
 * a literal and the set-vars written in one pass, spop_ack_set_var_str, as
 * warmlane does) and the same I/O
 * pattern as the agent (libuv, a read buffer of one whole frame, and the
 * ACKs of one read pass batched into one write, as agent/conn.c does), but
 * no decision at all: the codec and loop floor. On SIGTERM or SIGINT it prints
 * how many frames and messages it answered and exits 0. Not a product: no
 * backpressure limit beyond HAProxy's own (20 outstanding NOTIFYs). */

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#define CA_MAX_FRAME 16380u /* asked of HAProxy; it may offer less */
#define CA_WBUF_SIZE 2048   /* a batch; the largest ACK below is under 100 bytes */
#define CA_ACK_MAX 128      /* room kept for one more ACK in a batch */

struct ca_wbuf {
	uv_write_t req;
	struct ca_conn *conn;
	struct ca_wbuf *next;
	uint8_t data[CA_WBUF_SIZE];
};

struct ca_conn {
	uv_pipe_t pipe;
	uv_shutdown_t shutdown_req;
	bool ready;   /* HELLO done */
	bool closing;
	uint32_t max_frame;
	struct ca_wbuf *free_wbufs;
	struct ca_wbuf *batch; /* ACKs of this read pass, not yet written */
	size_t batch_len;
	size_t rlen;
	uint8_t rbuf[CA_MAX_FRAME + 4];
};

static struct {
	uint64_t conns, hellos, notifies, routes, others, disconnects, errors;
	uint64_t args; /* arguments with a value (not NULL) */
} ca_stats;

static uv_pipe_t ca_listener;
static uv_signal_t ca_sigterm, ca_sigint;

static void ca_close_cb(uv_handle_t *h)
{
	struct ca_conn *c = container_of(h, struct ca_conn, pipe);
	while (c->free_wbufs != NULL) {
		struct ca_wbuf *wb = c->free_wbufs;
		c->free_wbufs = wb->next;
		free(wb);
	}
	free(c->batch); /* a pass cut short by a close */
	free(c);
}

static void ca_close(struct ca_conn *c)
{
	c->closing = true;
	if (!uv_is_closing((uv_handle_t *)&c->pipe))
		uv_close((uv_handle_t *)&c->pipe, ca_close_cb);
}

static void ca_shutdown_cb(uv_shutdown_t *req, int status)
{
	(void)status;
	ca_close(container_of(req, struct ca_conn, shutdown_req));
}

static void ca_write_cb(uv_write_t *req, int status)
{
	struct ca_wbuf *wb = container_of(req, struct ca_wbuf, req);
	struct ca_conn *c = wb->conn;
	wb->next = c->free_wbufs;
	c->free_wbufs = wb;
	if (status < 0 && status != UV_ECANCELED)
		ca_close(c);
}

static struct ca_wbuf *ca_wbuf_get(struct ca_conn *c)
{
	struct ca_wbuf *wb = c->free_wbufs;
	if (wb != NULL) {
		c->free_wbufs = wb->next;
		return wb;
	}
	wb = malloc(sizeof(*wb));
	if (wb != NULL)
		wb->conn = c;
	return wb;
}

/* Sends wb->data[0..len) with a single write (docs/spop.md). */
static void ca_send(struct ca_conn *c, struct ca_wbuf *wb, size_t len)
{
	uv_buf_t b = uv_buf_init((char *)wb->data, (unsigned)len);
	if (uv_write(&wb->req, (uv_stream_t *)&c->pipe, &b, 1, ca_write_cb) < 0) {
		wb->next = c->free_wbufs;
		c->free_wbufs = wb;
		ca_close(c);
	}
}

/* A set-var of a STRING in one pass, as warmlane writes its names; the
 * lengths from sizeof, not strlen per ACK. */
#define ca_set_str(w, name, v) \
	spop_ack_set_var_str((w), SPOP_SCOPE_TXN, "" name, sizeof(name) - 1, \
			     "" v, sizeof(v) - 1)

/* Reads a message's nargs arguments as warmlane does, each name and value
 * decoded in place (the values are only counted: no decision). Returns 0,
 * or SPOP_EPROTO for a malformed or missing argument. */
static int ca_read_args(struct spop_reader *r, unsigned nargs,
			enum spop_status *st)
{
	for (unsigned i = 0; i < nargs; i++) {
		struct spop_str name;
		struct spop_data val;
		if (spop_arg_read(r, &name, &val, st) != 1)
			return SPOP_EPROTO;
		ca_stats.args += val.type != SPOP_DATA_NULL;
	}
	return 0;
}

/* Builds the ACK of one NOTIFY into out; 0 on a malformed payload. */
static size_t ca_ack(const struct spop_frame *f, uint8_t *out, size_t cap)
{
	struct spop_writer w;
	struct spop_reader r;
	enum spop_status st;
	bool acked = false, any = false;

	spop_ack_begin(&w, out, cap, f->stream_id, f->frame_id);
	spop_reader_init(&r, f->payload, f->payload_len);
	for (;;) {
		struct spop_str name;
		unsigned nargs;
		int m = spop_msg_next(&r, &name, &nargs, &st);
		if (m == 0)
			break;
		if (m < 0 || ca_read_args(&r, nargs, &st) < 0)
			return 0;
		any = true;
		if (SPOP_STR_EQ_LIT(name, "route")) {
			ca_stats.routes++;
			ca_set_str(&w, "backend", "llm");
			ca_set_str(&w, "server", "s1");
			ca_set_str(&w, "key", "k1");
			ca_set_str(&w, "reason", "affinity");
		} else {
			ca_stats.others++;
			if (!acked) {
				struct spop_data d = spop_data_bool(true);
				spop_ack_set_var(&w, SPOP_SCOPE_TXN, "ack", 3, &d);
				acked = true;
			}
		}
	}
	if (!any) { /* never an empty ACK (docs/spop.md) */
		struct spop_data d = spop_data_bool(true);
		spop_ack_set_var(&w, SPOP_SCOPE_TXN, "ack", 3, &d);
	}
	ptrdiff_t n = spop_ack_finish(&w);
	return n > 0 ? (size_t)n : 0;
}

/* Writes the batched ACKs, if any, in one write. */
static void ca_flush(struct ca_conn *c)
{
	struct ca_wbuf *wb = c->batch;
	if (wb == NULL)
		return;
	c->batch = NULL;
	ca_send(c, wb, c->batch_len);
	c->batch_len = 0;
}

static void ca_on_frame(struct ca_conn *c, const struct spop_frame *f)
{
	if (c->batch != NULL && CA_WBUF_SIZE - c->batch_len < CA_ACK_MAX)
		ca_flush(c);
	if (c->batch == NULL) {
		c->batch = ca_wbuf_get(c);
		if (c->batch == NULL) {
			ca_close(c);
			return;
		}
	}
	uint8_t *out = c->batch->data + c->batch_len;
	size_t room = CA_WBUF_SIZE - c->batch_len;
	size_t cap = (size_t)c->max_frame + 4 < room
			     ? (size_t)c->max_frame + 4 : room;
	ptrdiff_t n = 0;
	enum spop_status st = SPOP_ERR_INVALID;
	bool last = false;

	if (f->type == SPOP_FRAME_HAPROXY_HELLO && !c->ready) {
		struct spop_hello h;
		uint32_t max;
		ca_stats.hellos++;
		if (spop_hello_parse(f->payload, f->payload_len, &h, &st) == 0 &&
		    spop_hello_negotiate(&h, CA_MAX_FRAME, &max, &st) == 0) {
			n = spop_agent_hello_encode(out, room, max, true);
			c->max_frame = max;
			c->ready = true;
		} else {
			n = spop_disconnect_encode(out, cap, st, NULL);
			last = true;
		}
	} else if (f->type == SPOP_FRAME_NOTIFY && c->ready) {
		ca_stats.notifies++;
		n = (ptrdiff_t)ca_ack(f, out, cap);
		if (n == 0) {
			ca_stats.errors++;
			n = spop_disconnect_encode(out, cap, SPOP_ERR_INVALID, NULL);
			last = true;
		}
	} else {
		if (f->type == SPOP_FRAME_HAPROXY_DISCONNECT)
			ca_stats.disconnects++;
		else
			ca_stats.errors++;
		n = spop_disconnect_encode(out, cap,
					   f->type == SPOP_FRAME_HAPROXY_DISCONNECT
						   ? SPOP_ERR_NONE : SPOP_ERR_INVALID,
					   NULL);
		last = true;
	}
	if (n <= 0) {
		ca_close(c);
		return;
	}
	c->batch_len += (size_t)n;
	if (last) {
		ca_flush(c);
		/* uv_close would cancel the DISCONNECT: shut down first. */
		c->closing = true;
		uv_read_stop((uv_stream_t *)&c->pipe);
		if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->pipe,
				ca_shutdown_cb) < 0)
			ca_close(c);
	}
}

static void ca_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct ca_conn *c = container_of(h, struct ca_conn, pipe);
	(void)suggested;
	*buf = uv_buf_init((char *)c->rbuf + c->rlen,
			   (unsigned)(sizeof(c->rbuf) - c->rlen));
}

static void ca_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct ca_conn *c = container_of(s, struct ca_conn, pipe);
	(void)buf;
	if (nread == 0)
		return;
	if (nread < 0) {
		ca_close(c);
		return;
	}
	c->rlen += (size_t)nread;
	size_t off = 0;
	while (!c->closing) {
		struct spop_frame f;
		enum spop_status st;
		ptrdiff_t n = spop_frame_decode(c->rbuf + off, c->rlen - off,
						c->max_frame, &f, &st);
		if (n == SPOP_NEED_MORE)
			break;
		if (n < 0) {
			ca_stats.errors++;
			ca_close(c);
			return;
		}
		ca_on_frame(c, &f);
		off += (size_t)n;
	}
	/* One write for the ACKs of the whole pass. */
	if (!c->closing)
		ca_flush(c);
	if (off > 0) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
}

static void ca_on_connection(uv_stream_t *server, int status)
{
	if (status < 0)
		return;
	struct ca_conn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return;
	c->max_frame = CA_MAX_FRAME;
	if (uv_pipe_init(server->loop, &c->pipe, 0) < 0) {
		free(c);
		return;
	}
	if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0 ||
	    uv_read_start((uv_stream_t *)&c->pipe, ca_alloc_cb, ca_read_cb) < 0) {
		ca_close(c);
		return;
	}
	ca_stats.conns++;
}

static void ca_walk_close(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, h->type == UV_NAMED_PIPE && h != (uv_handle_t *)&ca_listener
				    ? ca_close_cb : NULL);
}

static void ca_on_signal(uv_signal_t *s, int signum)
{
	(void)signum;
	printf("const-agent: connections=%" PRIu64 " hellos=%" PRIu64
	       " notifies=%" PRIu64 " route=%" PRIu64 " other=%" PRIu64
	       " disconnects=%" PRIu64 " errors=%" PRIu64 " args=%" PRIu64 "\n",
	       ca_stats.conns, ca_stats.hellos, ca_stats.notifies,
	       ca_stats.routes, ca_stats.others, ca_stats.disconnects,
	       ca_stats.errors, ca_stats.args);
	fflush(stdout);
	uv_walk(s->loop, ca_walk_close, NULL);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s SOCKET_PATH\n", argv[0]);
		return 2;
	}
	const char *path = argv[1];
	uv_loop_t *loop = uv_default_loop();
	int r;

	signal(SIGPIPE, SIG_IGN);
	if (unlink(path) < 0 && errno != ENOENT) {
		fprintf(stderr, "%s: unlink: %s\n", path, strerror(errno));
		return 1;
	}
	if ((r = uv_pipe_init(loop, &ca_listener, 0)) < 0 ||
	    (r = uv_pipe_bind(&ca_listener, path)) < 0 ||
	    (r = uv_listen((uv_stream_t *)&ca_listener, 128, ca_on_connection)) < 0) {
		fprintf(stderr, "%s: %s\n", path, uv_strerror(r));
		return 1;
	}
	if ((r = uv_signal_init(loop, &ca_sigterm)) < 0 ||
	    (r = uv_signal_start(&ca_sigterm, ca_on_signal, SIGTERM)) < 0 ||
	    (r = uv_signal_init(loop, &ca_sigint)) < 0 ||
	    (r = uv_signal_start(&ca_sigint, ca_on_signal, SIGINT)) < 0) {
		fprintf(stderr, "signals: %s\n", uv_strerror(r));
		return 1;
	}
	uv_run(loop, UV_RUN_DEFAULT);
	unlink(path);
	return uv_loop_close(loop) == 0 ? 0 : 1;
}
