/* metrics.c - Prometheus text on a loopback port: libmicrohttpd driven by the libuv loop. */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

/* Only this file includes it; it needs nothing beyond POSIX 2008 (fd_set,
 * sockaddr, socklen_t: sys/select.h and sys/socket.h above). */
#include <microhttpd.h>

#include "log.h"

/* libmicrohttpd lines logged per 10 s at most. */
#define METRICS_MHDLOG_PER_WINDOW 5
#define METRICS_MHDLOG_WINDOW_MS  10000

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ---- HTTP -------------------------------------------------------------- */

static enum MHD_Result metrics_reply(struct MHD_Connection *conn,
				     unsigned status, const char *type,
				     const char *body, size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return MHD_NO;
	enum MHD_Result r = MHD_add_response_header(resp,
		MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (r == MHD_YES && status == MHD_HTTP_METHOD_NOT_ALLOWED)
		r = MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					    "GET, HEAD");
	if (r == MHD_YES)
		r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

#define METRICS_REPLY_TEXT(conn, status, s) \
	metrics_reply(conn, status, "text/plain; charset=utf-8", s, \
		      sizeof(s) - 1)

/* The only routes: GET or HEAD of /metrics and /healthz (MHD leaves the
 * body out of a HEAD answer). The query string is not part of url. */
static enum MHD_Result metrics_on_request(void *cls,
					  struct MHD_Connection *conn,
					  const char *url, const char *method,
					  const char *version,
					  const char *upload_data,
					  size_t *upload_data_size,
					  void **req_cls)
{
	struct metrics *m = cls;
	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;

	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return METRICS_REPLY_TEXT(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
					  "method not allowed\n");
	if (strcmp(url, "/healthz") == 0)
		return METRICS_REPLY_TEXT(conn, MHD_HTTP_OK, "ok\n");
	if (strcmp(url, "/metrics") != 0)
		return METRICS_REPLY_TEXT(conn, MHD_HTTP_NOT_FOUND,
					  "not found\n");

	m->scrapes++;
	m->text.len = 0;
	m->text.oom = false;
	if (metrics_render(&m->text, m->srv, uv_now(m->loop)) < 0) {
		/* A huge buffer after one bad scrape is not worth keeping. */
		metrics_text_finish(&m->text);
		log_warn("metrics: out of memory rendering /metrics", NULL);
		return METRICS_REPLY_TEXT(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
					  "out of memory\n");
	}
	return metrics_reply(conn, MHD_HTTP_OK, METRICS_CONTENT_TYPE,
			     m->text.p, m->text.len);
}

/* MHD's own complaints: kept for metrics_create's error while starting,
 * logged afterwards. */
static void metrics_on_mhd_log(void *cls, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void metrics_on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct metrics *m = cls;
	vsnprintf(m->mhd_err, sizeof(m->mhd_err), fmt, ap);
	size_t n = strlen(m->mhd_err);
	while (n > 0 && (m->mhd_err[n - 1] == '\n' || m->mhd_err[n - 1] == '\r'))
		m->mhd_err[--n] = '\0';
	if (!m->poll_init)
		return;
	/* A flood of connections over the limit is one line each. */
	uint64_t window = uv_now(m->loop) / METRICS_MHDLOG_WINDOW_MS;
	if (window != m->mhdlog_window) {
		if (m->mhdlog_suppressed > 0)
			log_warn("metrics: libmicrohttpd lines suppressed",
				 "count=%" PRIu64, m->mhdlog_suppressed);
		m->mhdlog_window = window;
		m->mhdlog_lines = 0;
		m->mhdlog_suppressed = 0;
	}
	if (m->mhdlog_lines >= METRICS_MHDLOG_PER_WINDOW) {
		m->mhdlog_suppressed++;
		return;
	}
	m->mhdlog_lines++;
	char q[300];
	log_warn("metrics: libmicrohttpd", "error=%s",
		 log_quote(q, sizeof(q), m->mhd_err, n));
}

/* ---- the total time of a connection ------------------------------------ */

static void metrics_on_sweep(uv_timer_t *h);

/* How often the sweep looks: a tenth of the timeout, 100 ms to 1 s. */
static uint64_t metrics_sweep_period(const struct metrics *m)
{
	uint64_t p = m->timeout_ms / 10;
	return p < 100 ? 100 : p > 1000 ? 1000 : p;
}

/* libmicrohttpd's start and close of each connection (inside MHD_run, on
 * the loop): the list the sweep walks, oldest first. */
static void metrics_on_notify(void *cls, struct MHD_Connection *conn,
			      void **socket_context,
			      enum MHD_ConnectionNotificationCode toe)
{
	struct metrics *m = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		struct metrics_conn *mc = calloc(1, sizeof(*mc));
		*socket_context = mc;
		if (mc == NULL)
			return; /* unbounded, only by MHD's own timeout */
		mc->conn = conn;
		mc->start_ms = uv_now(m->loop);
		mc->prev = m->conns_tail;
		if (m->conns_tail != NULL)
			m->conns_tail->next = mc;
		else
			m->conns = mc;
		m->conns_tail = mc;
		if (m->n_conns++ == 0 && m->sweep_init) {
			uint64_t p = metrics_sweep_period(m);
			uv_timer_start(&m->sweep, metrics_on_sweep, p, p);
		}
		return;
	}
	struct metrics_conn *mc = *socket_context;
	if (mc == NULL)
		return;
	*socket_context = NULL;
	if (mc->prev != NULL)
		mc->prev->next = mc->next;
	else
		m->conns = mc->next;
	if (mc->next != NULL)
		mc->next->prev = mc->prev;
	else
		m->conns_tail = mc->prev;
	free(mc);
	m->closed_some = true;
	if (--m->n_conns == 0 && m->sweep_init)
		uv_timer_stop(&m->sweep);
}

/* Connections older than the timeout are shut down (not closed: the fd
 * stays libmicrohttpd's, which sees the end of stream on its next run
 * and closes and forgets the connection itself). */
static void metrics_on_sweep(uv_timer_t *h)
{
	struct metrics *m = container_of(h, struct metrics, sweep);
	uint64_t now = uv_now(m->loop);
	for (struct metrics_conn *mc = m->conns;
	     mc != NULL && now - mc->start_ms >= m->timeout_ms; mc = mc->next) {
		if (mc->cut)
			continue;
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			mc->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		mc->cut = true;
		if (ci == NULL)
			continue;
		shutdown(ci->connect_fd, SHUT_RDWR);
		m->cut_total++;
		log_debug("metrics: connection open too long, closing",
			  "age_ms=%" PRIu64, now - mc->start_ms);
	}
}

static void metrics_on_timer(uv_timer_t *h);

/* MHD_run must be called again within MHD_get_timeout: 0 when it still
 * has ready connections of its own (edge-triggered, nothing will wake the
 * poll), otherwise the nearest connection timeout. */
static void metrics_schedule(struct metrics *m)
{
	MHD_UNSIGNED_LONG_LONG ms;
	if (m->closed_some) {
		/* At its connection limit MHD takes its listen socket out of
		 * its epoll set, and puts it back only on its next run: with
		 * no other connection to wake it, connections waiting in the
		 * backlog would never be accepted. */
		m->closed_some = false;
		uv_timer_start(&m->timer, metrics_on_timer, 0, 0);
		return;
	}
	if (MHD_get_timeout(m->daemon, &ms) == MHD_YES)
		uv_timer_start(&m->timer, metrics_on_timer, (uint64_t)ms, 0);
	else
		uv_timer_stop(&m->timer);
}

static void metrics_run(struct metrics *m)
{
	if (m->daemon == NULL)
		return;
	MHD_run(m->daemon);
	metrics_schedule(m);
}

static void metrics_on_timer(uv_timer_t *h)
{
	metrics_run(container_of(h, struct metrics, timer));
}

static void metrics_on_poll(uv_poll_t *h, int status, int events)
{
	struct metrics *m = container_of(h, struct metrics, poll);
	(void)events;
	if (status < 0)
		log_warn("metrics: poll error", "error=%s", uv_err_name(status));
	metrics_run(m);
}

static int metrics_sockaddr(const struct config_hostport *addr,
			    struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (addr->ipv6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(addr->port);
		if (inet_pton(AF_INET6, addr->host, &s6->sin6_addr) != 1)
			return -EINVAL;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(addr->port);
		if (inet_pton(AF_INET, addr->host, &s4->sin_addr) != 1)
			return -EINVAL;
	}
	return 0;
}

/* metrics_create's work on m; on failure m still needs metrics_destroy. */
static int metrics_open(struct metrics *m, uv_loop_t *loop,
			const struct config_hostport *addr, struct server *srv,
			char *err, size_t errlen)
{
	*m = (struct metrics){ .loop = loop, .srv = srv,
			       .timeout_ms = srv->cfg->metrics_conn_timeout_ms };
	snprintf(m->addr_text, sizeof(m->addr_text), addr->ipv6 ? "[%s]:%u"
								: "%s:%u",
		 addr->host, (unsigned)addr->port);

	struct sockaddr_storage ss;
	if (metrics_sockaddr(addr, &ss) < 0) {
		snprintf(err, errlen, "metrics.listen %s: not a numeric address",
			 m->addr_text);
		return -EINVAL;
	}

	/* MHD_OPTION_SOCK_ADDR: without it MHD binds every address. No
	 * internal thread: the loop drives MHD through its epoll fd. */
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	if (addr->ipv6)
		flags |= MHD_USE_IPv6;
	errno = 0;
	m->daemon = MHD_start_daemon(flags, addr->port, NULL, NULL,
		metrics_on_request, m,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_EXTERNAL_LOGGER, metrics_on_mhd_log, m,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->cfg->metrics_max_conns,
		/* MHD's own, restarted by every byte: the sweep bounds the
		 * total. Whole seconds, rounded up. */
		MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)((m->timeout_ms + 999) / 1000),
		MHD_OPTION_NOTIFY_CONNECTION, metrics_on_notify, m,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, server_backlog(),
		MHD_OPTION_END);
	if (m->daemon == NULL) {
		/* MHD says why only in its log line; errno is still bind's
		 * in practice, trusted only when it is a bind error. */
		int e = errno;
		int r = (e == EADDRINUSE || e == EACCES || e == EADDRNOTAVAIL ||
			 e == EAFNOSUPPORT || e == EPERM) ? -e : -EIO;
		snprintf(err, errlen, "metrics.listen %s: cannot listen: %s",
			 m->addr_text,
			 m->mhd_err[0] != '\0' ? m->mhd_err : strerror(-r));
		return r;
	}

	const union MHD_DaemonInfo *di =
		MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_BIND_PORT);
	m->port = di != NULL ? di->port : addr->port;
	di = MHD_get_daemon_info(m->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (di == NULL) {
		snprintf(err, errlen, "metrics.listen %s: libmicrohttpd has no epoll fd",
			 m->addr_text);
		return -EIO;
	}

	int r = uv_poll_init(loop, &m->poll, di->epoll_fd);
	if (r < 0) {
		snprintf(err, errlen, "metrics.listen %s: cannot poll: %s",
			 m->addr_text, uv_strerror(r));
		return r;
	}
	m->poll_init = true;
	uv_timer_init(loop, &m->timer);
	m->timer_init = true;
	uv_timer_init(loop, &m->sweep);
	m->sweep_init = true;
	r = uv_poll_start(&m->poll, UV_READABLE, metrics_on_poll);
	if (r < 0) {
		snprintf(err, errlen, "metrics.listen %s: cannot poll: %s",
			 m->addr_text, uv_strerror(r));
		return r;
	}
	metrics_schedule(m);
	log_info("metrics listening", "addr=%s port=%u", m->addr_text,
		 (unsigned)m->port);
	return 0;
}

int metrics_create(struct metrics **out, uv_loop_t *loop,
		   const struct config_hostport *addr, struct server *srv,
		   char *err, size_t errlen)
{
	*out = NULL;
	struct metrics *m = malloc(sizeof(*m));
	if (m == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int r = metrics_open(m, loop, addr, srv, err, errlen);
	if (r < 0) {
		metrics_destroy(m, NULL, NULL);
		return r;
	}
	*out = m;
	return 0;
}

/* The last handle closed: m goes, then its owner is told. */
static void metrics_free(struct metrics *m)
{
	metrics_destroyed_cb done = m->on_destroyed;
	void *arg = m->on_destroyed_arg;
	free(m);
	if (done != NULL)
		done(arg);
}

static void metrics_on_closed(uv_handle_t *h)
{
	struct metrics *m = h->data;
	if (--m->closing == 0)
		metrics_free(m);
}

void metrics_destroy(struct metrics *m, metrics_destroyed_cb done, void *arg)
{
	if (m == NULL)
		return;
	m->on_destroyed = done;
	m->on_destroyed_arg = arg;
	/* The poll goes first: libuv drops the epoll fd from its own set at
	 * once, before MHD_stop_daemon closes it. */
	if (m->poll_init) {
		m->poll_init = false;
		m->poll.data = m;
		m->closing++;
		uv_close((uv_handle_t *)&m->poll, metrics_on_closed);
	}
	if (m->timer_init) {
		m->timer_init = false;
		m->timer.data = m;
		m->closing++;
		uv_close((uv_handle_t *)&m->timer, metrics_on_closed);
	}
	/* Before MHD_stop_daemon: its close notifications must not touch a
	 * closing timer. */
	if (m->sweep_init) {
		m->sweep_init = false;
		m->sweep.data = m;
		m->closing++;
		uv_close((uv_handle_t *)&m->sweep, metrics_on_closed);
	}
	if (m->daemon != NULL) {
		MHD_stop_daemon(m->daemon);
		m->daemon = NULL;
	}
	metrics_text_finish(&m->text);
	if (m->closing == 0)
		metrics_free(m);
}
