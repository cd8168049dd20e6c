/* conn.h - one SPOP connection: frame reassembly, HELLO, NOTIFY/ACK. */
#ifndef WARMLANE_CONN_H
#define WARMLANE_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "uvsock.h"

struct server;

/* The largest frame the agent sends (AGENT-HELLO, ACK, AGENT-DISCONNECT):
 * names in the config are at most CONFIG_NAME_MAX bytes, so an ACK of one
 * decision is under 700 bytes; a frame of many `route` messages is cut
 * down to a bare `ack` past this (or the negotiated frame size). */
#define CONN_FRAME_MAX 2048
/* A write buffer: twice the largest frame, so that the ACKs of a read pass
 * are encoded in place, each with the room of the largest frame, and a
 * batch is written once less than that is left. */
#define CONN_WBUF_SIZE (2 * CONN_FRAME_MAX)
/* Writes in flight per connection before reading pauses (backpressure).
 * The ACKs of one read share a write, so this counts writes, not frames.
 * HAProxy keeps at most 20 NOTIFYs outstanding per connection
 * (max-waiting-frames), so a well-behaved peer never reaches it. */
#define CONN_WBUF_MAX 32

/* A write buffer: lives from uv_write until its callback, then goes back to
 * the connection's free list (allocated on first need, reused after). */
struct conn_wbuf {
	uv_write_t req;
	struct conn *conn;
	struct conn_wbuf *next;
	uint8_t data[CONN_WBUF_SIZE];
};

enum conn_state {
	CONN_HELLO,   /* waiting for HAPROXY-HELLO */
	CONN_READY,   /* HELLO done: NOTIFY/ACK */
	CONN_CLOSING, /* a DISCONNECT is queued or the handle is closing */
};

struct conn {
	union uvsock h;
	uv_shutdown_t shutdown_req;
	struct server *srv;
	struct conn *prev, *next; /* the server's list */
	/* The server's timeout queue this connection is on (hello or idle),
	 * oldest first, and when its time started: accepted (hello), or its
	 * last whole frame (idle). Moving to the tail on a frame is a few
	 * pointer writes: no timer is touched on the decision path. */
	struct conn *tq_prev, *tq_next;
	struct server_tq *tq;
	uint64_t tq_since;
	uint64_t id;
	enum conn_state state;
	bool is_tcp;
	bool reading;     /* uv_read_start in effect */
	bool stalled;     /* a frame waits for a free write buffer */
	bool draining;    /* server stopping: finish what was read, then go */
	bool healthcheck; /* the HELLO was a health check */
	uint32_t max_frame; /* decode limit: ours, then the negotiated one */
	struct conn_wbuf *free_wbufs;
	unsigned n_wbufs;        /* allocated */
	unsigned pending_writes; /* in flight */
	/* The ACKs of the current pass over the read buffer, not yet written:
	 * whole frames back to back, each encoded in place, written when the
	 * pass ends or less room than the largest frame is left. NULL when
	 * empty. */
	struct conn_wbuf *batch;
	size_t batch_len;
	unsigned batch_frames;
	uint8_t *rbuf;           /* max_frame_size + 4 bytes */
	size_t rcap, rlen;
};

/* Allocates a connection of srv and initialises its handle (a pipe, or a
 * TCP handle when tcp) on srv's loop; the caller then accepts or opens an
 * fd into c->h and calls conn_start. From here on the memory is freed only
 * by the handle's close callback: on a later failure call conn_destroy.
 * Returns 0 or -ENOMEM (nothing to close then). */
int conn_create(struct server *srv, bool tcp, struct conn **out);

/* Starts reading. Returns 0, or a libuv error after which the connection
 * is already closing. */
int conn_start(struct conn *c);

/* For a stopping server: frames already read are answered, then an
 * AGENT-DISCONNECT (status 0) is sent and the connection closes. */
void conn_drain(struct conn *c);

/* Closes at once; queued writes are cancelled. c is freed in the
 * handle's close callback, which takes it off its server's list.
 * Idempotent until then. */
void conn_destroy(struct conn *c);

/* For the server's timeout sweep: c has been on its queue too long.
 * Before the HELLO: AGENT-DISCONNECT status 2 (timeout), logged like a
 * protocol error. After it: an orderly AGENT-DISCONNECT (status 0, "idle
 * timeout"); a connection whose peer does not read what was written, or
 * one already closing, is closed at once. */
void conn_expire(struct conn *c);

#endif
