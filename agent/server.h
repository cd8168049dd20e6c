/* server.h - the SPOP server: listeners, the connection set, stopping. */
#ifndef WARMLANE_SERVER_H
#define WARMLANE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "route.h"
#include "stats.h"
#include "uvsock.h"

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

struct conn;
struct server;

/* Connections waiting on one timeout, oldest first (their deadlines are
 * in that order, since every one waits the same time). */
struct server_tq {
	struct conn *head, *tail;
	bool hello; /* the HELLO queue, else the idle one */
};
struct snapshot_stats;

typedef void (*server_stopped_cb)(struct server *s, void *arg);

/* One bound address. */
struct server_listener {
	union uvsock h;
	struct server *srv;
	struct server_listener *next;
	struct config_listen addr;
	bool unlink_on_close; /* a unix socket file this process created */
};

struct server {
	uv_loop_t *loop;
	const struct config *cfg;
	struct route route;
	struct stats stats;
	struct server_listener *listeners;
	/* Snapshot counters for /metrics (NULL: none; set by main). */
	const struct snapshot_stats *snapshot;
	struct conn *conns;
	uint64_t next_conn_id;
	/* Hello and idle timeouts: two queues and one timer, armed for the
	 * earliest head; a frame only moves its connection to the tail. */
	struct server_tq tq_hello, tq_idle;
	uv_timer_t tq_timer;
	bool tq_timer_init;
	uint64_t tq_due; /* when tq_timer fires (uv_now ms); 0: not armed */
	/* The connection cap in force (spop.max_connections, or from
	 * RLIMIT_NOFILE), and its rate-limited log line. */
	uint64_t max_conns;
	uint64_t caplog_ms;        /* uv_now of the last line; 0: none yet */
	uint64_t caplog_unlogged;  /* refusals since that line */
	unsigned backlog;          /* listen(2) backlog: net.core.somaxconn */
	bool stopping;
	bool stopped; /* on_stopped was called */
	bool timer_active;
	uv_timer_t stop_timer;
	server_stopped_cb on_stopped;
	void *on_stopped_arg;
	/* Called before the frames of a read pass are answered (NULL: none).
	 * main sets the log input's catch-up (logsrc_catch_up), so that the
	 * lines HAProxy sent before a frame are applied before the frame is
	 * decided, whichever of the two sockets epoll reports first. */
	void (*before_pass)(void *arg);
	void *before_pass_arg;
	/* Protocol-error log lines in the current second, and those left out:
	 * a misconfigured HAProxy can reconnect thousands of times a second. */
	uint64_t errlog_second;
	unsigned errlog_lines;
	uint64_t errlog_suppressed;
};

/* Initialises s on loop with cfg (which must outlive s). No handle is
 * created yet. Returns 0 or -errno. */
int server_init(struct server *s, uv_loop_t *loop, const struct config *cfg);

/* Binds every address of cfg->listen. A unix socket file that exists is
 * replaced only when nothing answers on it; a live one is an error
 * (-EADDRINUSE). On failure err says which address and why, and listeners
 * already bound are left for server_stop to close. Returns 0 or -errno. */
int server_listen(struct server *s, char *err, size_t errlen);

/* Changes the listen addresses to next's (SIGHUP), in two phases so that
 * a reload that cannot bind changes nothing. prepare binds every address
 * of next that s does not listen on yet into *pending (an address already
 * bound is kept, not bound twice); s is unchanged. On failure the new
 * listeners are closed, *pending is NULL and err says which address and
 * why: -errno. commit closes the listeners next lacks (accepting stops,
 * their connections stay open and are served), applies next's mode to a
 * kept unix socket, and adopts pending. abort closes pending. */
int server_relisten_prepare(struct server *s, const struct config *next,
			    struct server_listener **pending, char *err,
			    size_t errlen);
void server_relisten_commit(struct server *s, const struct config *next,
			    struct server_listener *pending);
void server_relisten_abort(struct server *s, struct server_listener *pending);

/* Clears the way for a unix socket at path: nothing there, or a stale
 * socket (nothing answers on it) removed; a live one is -EADDRINUSE, a
 * file that is not a socket -EEXIST. Also for the command socket (ctl.c).
 * Returns 0 or -errno with err set. */
int server_unix_prepare(const char *path, char *err, size_t errlen);

/* Serves an already connected stream socket (a socketpair end in tests,
 * an inherited fd). The server owns fd from then on, even on failure.
 * Returns 0 or -errno. */
int server_adopt_fd(struct server *s, int fd);

/* Stops accepting (listeners closed, socket files removed), lets each
 * connection answer what it has read and send AGENT-DISCONNECT status 0,
 * and closes whatever is left after grace_ms. cb (may be NULL) runs once
 * every handle of s is closed: the loop then has nothing of s left. A
 * second call closes every connection at once. */
void server_stop(struct server *s, uint64_t grace_ms, server_stopped_cb cb,
		 void *arg);

/* Releases what server_init set up; call after the loop has run the
 * close callbacks (after server_stop's cb). */
void server_finish(struct server *s);

/* For conn.c: the connection's handle is closed; unlink it and account. */
void server_conn_closed(struct server *s, struct conn *c);

/* For conn.c: puts c on the tail of q (the hello or the idle queue) with
 * its time starting at now, arming the timer if c's deadline is the
 * earliest. */
void server_tq_push(struct server *s, struct server_tq *q, struct conn *c,
		    uint64_t now);

/* For conn.c: a whole frame arrived on c: its idle time restarts. No
 * timer call, no syscall. */
void server_tq_touch(struct server *s, struct conn *c, uint64_t now);

/* The listen(2) backlog: net.core.somaxconn (the kernel caps any larger
 * value at it), 4096 when it cannot be read. */
unsigned server_backlog(void);

/* The connection cap for cfg: spop.max_connections, or when 0 the soft
 * RLIMIT_NOFILE less a reserve for the agent's other descriptors
 * (listeners, metrics connections, the runtime API, log sockets, files). */
uint64_t server_conn_cap(const struct config *cfg);

#endif
