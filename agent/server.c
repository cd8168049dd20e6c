/* server.c - the SPOP server: connection cap and timeouts, accepting, and the orderly stop (listeners: server_listen.c). */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "server_int.h"

/* The kernel's default net.core.somaxconn since Linux 5.4. */
#define SERVER_BACKLOG_FALLBACK 4096
/* Descriptors kept for everything but SPOP connections when the cap comes
 * from RLIMIT_NOFILE: stdio, listeners, the metrics listener, the runtime
 * API, log sockets, snapshot files, libuv's own (epoll, signals, async),
 * and on top of it the metrics connections themselves. */
#define SERVER_FD_RESERVE 64
/* One "connection limit reached" line per this period, at most. */
#define SERVER_CAPLOG_MS 10000

unsigned server_backlog(void)
{
	FILE *f = fopen("/proc/sys/net/core/somaxconn", "re");
	long v = -1;
	if (f != NULL) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	if (v <= 0)
		return SERVER_BACKLOG_FALLBACK;
	return v > INT_MAX ? (unsigned)INT_MAX : (unsigned)v;
}

uint64_t server_conn_cap(const struct config *cfg)
{
	if (cfg->max_connections > 0)
		return cfg->max_connections;
	struct rlimit rl;
	uint64_t reserve = SERVER_FD_RESERVE + cfg->metrics_max_conns +
			   cfg->n_listen;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT32_MAX;
	uint64_t n = (uint64_t)rl.rlim_cur;
	/* A tiny limit still lets HAProxy in: accept fails on EMFILE then,
	 * which libuv survives. */
	return n > reserve + 16 ? n - reserve : 16;
}

int server_init(struct server *s, uv_loop_t *loop, const struct config *cfg)
{
	*s = (struct server){ .loop = loop, .cfg = cfg };
	s->tq_hello.hello = true;
	s->max_conns = server_conn_cap(cfg);
	s->backlog = server_backlog();
	return route_init(&s->route, cfg);
}

/* ---- timeouts ------------------------------------------------------------ */

static uint64_t server_tq_timeout(const struct server *s,
				  const struct server_tq *q)
{
	return q->hello ? s->cfg->hello_timeout_ms : s->cfg->idle_timeout_ms;
}

static void server_tq_unlink(struct conn *c)
{
	struct server_tq *q = c->tq;
	if (q == NULL)
		return;
	if (c->tq_prev != NULL)
		c->tq_prev->tq_next = c->tq_next;
	else
		q->head = c->tq_next;
	if (c->tq_next != NULL)
		c->tq_next->tq_prev = c->tq_prev;
	else
		q->tail = c->tq_prev;
	c->tq_prev = c->tq_next = NULL;
	c->tq = NULL;
}

/* Arms the timer for the earliest deadline of the two queue heads (every
 * connection of a queue waits the same time, so its head is its first),
 * or stops it when both are empty. A head that got a frame since moved
 * back: the timer then fires early, finds nothing due and re-arms. */
static void server_tq_arm(struct server *s, uint64_t now)
{
	uint64_t due = UINT64_MAX;
	const struct server_tq *qs[2] = { &s->tq_hello, &s->tq_idle };
	for (int i = 0; i < 2; i++) {
		if (qs[i]->head == NULL)
			continue;
		uint64_t d = qs[i]->head->tq_since + server_tq_timeout(s, qs[i]);
		if (d < due)
			due = d;
	}
	if (!s->tq_timer_init)
		return;
	if (due == UINT64_MAX) {
		if (s->tq_due != 0)
			uv_timer_stop(&s->tq_timer);
		s->tq_due = 0;
		return;
	}
	if (s->tq_due == due)
		return;
	uv_timer_start(&s->tq_timer, server_on_tq_timer,
		       due > now ? due - now : 0, 0);
	s->tq_due = due;
}

void server_on_tq_timer(uv_timer_t *t)
{
	struct server *s = container_of(t, struct server, tq_timer);
	uint64_t now = uv_now(s->loop);
	s->tq_due = 0;
	struct server_tq *qs[2] = { &s->tq_hello, &s->tq_idle };
	for (int i = 0; i < 2; i++) {
		struct server_tq *q = qs[i];
		uint64_t to = server_tq_timeout(s, q);
		/* conn_expire may push c back onto the hello queue with its
		 * time starting now: not due again in this pass. */
		while (q->head != NULL && q->head->tq_since + to <= now) {
			struct conn *c = q->head;
			server_tq_unlink(c);
			conn_expire(c);
		}
	}
	server_tq_arm(s, now);
}

void server_tq_push(struct server *s, struct server_tq *q, struct conn *c,
		    uint64_t now)
{
	if (!s->tq_timer_init) {
		if (uv_timer_init(s->loop, &s->tq_timer) < 0)
			return; /* cannot happen: a timer init only sets fields */
		s->tq_timer_init = true;
	}
	server_tq_unlink(c);
	c->tq = q;
	c->tq_since = now;
	c->tq_next = NULL;
	c->tq_prev = q->tail;
	if (q->tail != NULL)
		q->tail->tq_next = c;
	else
		q->head = c;
	q->tail = c;
	if (s->tq_due == 0 || now + server_tq_timeout(s, q) < s->tq_due)
		server_tq_arm(s, now);
}

void server_tq_touch(struct server *s, struct conn *c, uint64_t now)
{
	struct server_tq *q = c->tq;
	(void)s;
	if (q == NULL || c->tq_since == now)
		return;
	c->tq_since = now;
	if (q->tail == c)
		return;
	/* Not the tail, so it has a successor. */
	if (c->tq_prev != NULL)
		c->tq_prev->tq_next = c->tq_next;
	else
		q->head = c->tq_next;
	c->tq_next->tq_prev = c->tq_prev;
	c->tq_prev = q->tail;
	c->tq_next = NULL;
	q->tail->tq_next = c;
	q->tail = c;
}

static void server_tq_timer_close_cb(uv_handle_t *h)
{
	struct server *s = container_of(h, struct server, tq_timer);
	s->tq_timer_init = false;
	s->tq_due = 0;
	server_check_stopped(s);
}

void server_finish(struct server *s)
{
	route_finish(&s->route);
}

/* ---- accepting ---------------------------------------------------------- */

/* A connection over the cap: accepted (libuv stops watching a listener
 * whose connection is not taken) and closed at once, without a read
 * buffer. HAProxy sees the close and answers on its own (fail open). */
struct server_refused {
	union uvsock h;
};

static void server_refused_close_cb(uv_handle_t *h)
{
	free(container_of(h, struct server_refused, h.handle));
}

static void server_refuse(struct server *s, struct server_listener *l,
			  bool tcp)
{
	uint64_t now = uv_now(s->loop);
	s->stats.conn_refused++;
	if (s->caplog_ms == 0 || now - s->caplog_ms >= SERVER_CAPLOG_MS) {
		log_warn("connection limit reached: refusing new SPOP connections",
			 "limit=%" PRIu64 " active=%" PRIu64 " listen=%s"
			 " refused_since_last_line=%" PRIu64,
			 s->max_conns, s->stats.conn_active, l->addr.text,
			 s->caplog_unlogged);
		s->caplog_ms = now > 0 ? now : 1;
		s->caplog_unlogged = 0;
	} else {
		s->caplog_unlogged++;
	}
	struct server_refused *x = malloc(sizeof(*x));
	if (x == NULL)
		return;
	int r = tcp ? uv_tcp_init(s->loop, &x->h.tcp)
		    : uv_pipe_init(s->loop, &x->h.pipe, 0);
	if (r < 0) {
		free(x);
		return;
	}
	/* On failure there is nothing to refuse: close the handle anyway. */
	uv_accept(&l->h.stream, &x->h.stream);
	uv_close(&x->h.handle, server_refused_close_cb);
}

void server_on_connection(uv_stream_t *ls, int status)
{
	struct server_listener *l = container_of(ls, struct server_listener, h.stream);
	struct server *s = l->srv;
	struct conn *c;

	if (status < 0) {
		log_warn("accept failed", "listen=%s error=%s", l->addr.text,
			 uv_err_name(status));
		return;
	}
	bool tcp = l->addr.kind == CONFIG_LISTEN_TCP;
	if (s->stats.conn_active >= s->max_conns) {
		server_refuse(s, l, tcp);
		return;
	}
	int r = conn_create(s, tcp, &c);
	if (r < 0) {
		log_error("cannot allocate a connection", "error=%s",
			  uv_err_name(r));
		return;
	}
	r = uv_accept(ls, &c->h.stream);
	if (r < 0) {
		log_warn("accept failed", "listen=%s error=%s", l->addr.text,
			 uv_err_name(r));
		conn_destroy(c);
		return;
	}
	if (tcp) /* ACKs are small and latency is the point */
		uv_tcp_nodelay(&c->h.tcp, 1);
	log_debug("connection accepted", "conn=%" PRIu64 " listen=%s", c->id,
		  l->addr.text);
	conn_start(c);
}

int server_adopt_fd(struct server *s, int fd)
{
	struct conn *c;
	int r = conn_create(s, false, &c);
	if (r < 0) {
		close(fd);
		return r;
	}
	r = uv_pipe_open(&c->h.pipe, fd);
	if (r < 0) {
		close(fd);
		conn_destroy(c);
		return r;
	}
	return conn_start(c);
}

/* ---- stopping ------------------------------------------------------------ */

void server_conn_closed(struct server *s, struct conn *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	server_tq_unlink(c);
	s->stats.conn_closed++;
	s->stats.conn_active--;
	server_check_stopped(s);
}

static void server_timer_close_cb(uv_handle_t *h)
{
	struct server *s = container_of(h, struct server, stop_timer);
	s->timer_active = false;
	server_check_stopped(s);
}

void server_check_stopped(struct server *s)
{
	if (!s->stopping || s->stopped || s->listeners != NULL ||
	    s->conns != NULL)
		return;
	if (s->timer_active) {
		if (!uv_is_closing((uv_handle_t *)&s->stop_timer))
			uv_close((uv_handle_t *)&s->stop_timer,
				 server_timer_close_cb);
		return; /* back here from the timer's close callback */
	}
	if (s->tq_timer_init) {
		if (!uv_is_closing((uv_handle_t *)&s->tq_timer))
			uv_close((uv_handle_t *)&s->tq_timer,
				 server_tq_timer_close_cb);
		return;
	}
	s->stopped = true;
	if (s->on_stopped != NULL)
		s->on_stopped(s, s->on_stopped_arg);
}

static void server_abort_all(struct server *s)
{
	for (struct conn *c = s->conns; c != NULL; c = c->next)
		conn_destroy(c);
}

static void server_on_grace_timeout(uv_timer_t *t)
{
	struct server *s = container_of(t, struct server, stop_timer);
	unsigned n = 0;
	for (struct conn *c = s->conns; c != NULL; c = c->next)
		n++;
	log_warn("grace period over, closing connections", "connections=%u", n);
	server_abort_all(s);
}

void server_stop(struct server *s, uint64_t grace_ms, server_stopped_cb cb,
		 void *arg)
{
	if (s->stopping) {
		server_abort_all(s);
		return;
	}
	s->stopping = true;
	s->on_stopped = cb;
	s->on_stopped_arg = arg;

	for (struct server_listener *l = s->listeners; l != NULL; l = l->next)
		server_listener_close(l);
	/* conn_drain never frees synchronously (close callbacks run later),
	 * so walking the list while draining is safe. */
	for (struct conn *c = s->conns; c != NULL; c = c->next)
		conn_drain(c);

	if (s->conns != NULL && uv_timer_init(s->loop, &s->stop_timer) == 0) {
		s->timer_active = true;
		uv_timer_start(&s->stop_timer, server_on_grace_timeout, grace_ms, 0);
	}
	server_check_stopped(s);
}
