/* metrics.h - the Prometheus endpoint: /metrics and /healthz over HTTP on the loop. */
#ifndef WARMLANE_METRICS_H
#define WARMLANE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "metrics_text.h"
#include "server.h"

struct MHD_Connection;
struct MHD_Daemon;
struct metrics;

/* One HTTP connection, from libmicrohttpd's start notification to its
 * close: its age bounds its life (libmicrohttpd's own timeout restarts on
 * every byte, so a client trickling bytes would hold it for ever). */
struct metrics_conn {
	struct metrics_conn *prev, *next;
	struct MHD_Connection *conn;
	uint64_t start_ms; /* uv_now */
	bool cut;          /* shut down by the sweep, close pending */
};

typedef void (*metrics_destroyed_cb)(void *arg);

/* The HTTP server. Caller-owned memory; libmicrohttpd runs without a
 * thread of its own, driven by poll and timer on the server's loop. */
struct metrics {
	uv_loop_t *loop;
	struct server *srv;
	struct MHD_Daemon *daemon;
	uv_poll_t poll;   /* MHD's epoll fd */
	uv_timer_t timer; /* MHD's connection timeouts */
	uv_timer_t sweep; /* cuts connections older than the total timeout */
	bool poll_init, timer_init, sweep_init;
	struct metrics_conn *conns, *conns_tail; /* oldest first */
	unsigned n_conns;
	bool closed_some; /* a connection closed in this MHD_run */
	uint64_t timeout_ms;   /* metrics.connection_timeout, at start */
	uint64_t cut_total;    /* connections cut for their age */
	/* libmicrohttpd's log lines in the current 10 s, and those left out
	 * (one per refused connection when over the limit). */
	uint64_t mhdlog_window;
	unsigned mhdlog_lines;
	uint64_t mhdlog_suppressed;
	unsigned closing; /* handles whose close callback is pending */
	uint16_t port;    /* bound port (the real one when 0 was asked) */
	char addr_text[80];
	struct metrics_text text; /* reused from scrape to scrape */
	char mhd_err[256];        /* MHD's last error line, for start-up */
	uint64_t scrapes;         /* /metrics answered */
	metrics_destroyed_cb on_destroyed;
	void *on_destroyed_arg;
};

/* Allocates a server of GET/HEAD /metrics and /healthz on addr (that
 * address only; port 0 picks a free port, see m->port) from srv's
 * counters and core, on loop; srv must outlive it. On failure *out is
 * NULL (nothing to destroy) and err names the address and says why.
 * Returns 0 or -errno (-EADDRINUSE, -EACCES, -EADDRNOTAVAIL from bind;
 * -ENOMEM; -EIO when libmicrohttpd refuses without saying why). */
int metrics_create(struct metrics **out, uv_loop_t *loop,
		   const struct config_hostport *addr, struct server *srv,
		   char *err, size_t errlen);

/* Closes the HTTP server and its connections, then its libuv handles; m
 * is freed once they are all closed, then done(arg) runs (done may be
 * NULL), from a close callback or before metrics_destroy returns when no
 * handle was open. Accepts NULL (done not called). */
void metrics_destroy(struct metrics *m, metrics_destroyed_cb done, void *arg);

/* Renders the Prometheus text format 0.0.4 of srv's counters and core at
 * now_ms (uv_now) into t (appended; t may be zeroed). It first drops up to
 * 8192 affinity entries idle past affinity_ttl at now_ms, so that the
 * entries gauge counts live ones (the only change it makes). Returns 0, or
 * -ENOMEM with t->oom set (t keeps its memory either way; release with
 * metrics_text_finish). */
int metrics_render(struct metrics_text *t, const struct server *srv,
		   uint64_t now_ms);

#endif
