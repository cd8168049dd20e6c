/* server.c - SPOP listeners (unix, TCP), accepting, and the orderly stop. */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"

#define SERVER_BACKLOG 256

static void server_check_stopped(struct server *s);

int server_init(struct server *s, uv_loop_t *loop, const struct config *cfg)
{
	*s = (struct server){ .loop = loop, .cfg = cfg };
	return route_init(&s->route, cfg);
}

void server_finish(struct server *s)
{
	route_finish(&s->route);
}

/* ---- accepting ---------------------------------------------------------- */

static void server_on_connection(uv_stream_t *ls, int status)
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
		conn_abort(c);
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
		conn_abort(c);
		return r;
	}
	return conn_start(c);
}

/* ---- listening ---------------------------------------------------------- */

static void server_listener_close_cb(uv_handle_t *h)
{
	struct server_listener *l = container_of(h, struct server_listener, h.handle);
	struct server *s = l->srv;
	for (struct server_listener **pp = &s->listeners; *pp != NULL;
	     pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	free(l);
	server_check_stopped(s);
}

static void server_listener_close(struct server_listener *l)
{
	if (uv_is_closing(&l->h.handle))
		return;
	if (l->unlink_on_close) {
		unlink(l->addr.path);
		l->unlink_on_close = false;
	}
	uv_close(&l->h.handle, server_listener_close_cb);
}

/* Finds out whether a process answers on the unix socket at path: 1 if
 * one does, 0 if the file is a stale socket (or absent), -errno when it
 * cannot tell. A non-blocking connect, so a busy peer cannot hang us. */
static int server_unix_probe(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		return -errno;
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	close(fd);
	if (r == 0 || e == EAGAIN || e == EINPROGRESS)
		return 1; /* EAGAIN: alive with a full backlog */
	if (e == ECONNREFUSED || e == ENOENT)
		return 0;
	return -e;
}

/* Clears the way for a unix socket at path: nothing there, or a stale
 * socket removed. Returns 0 or -errno with err set. */
static int server_unix_prepare(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen,
				 "%s: the file exists and is not a socket", path);
			return -EEXIST;
		}
		int p = server_unix_probe(path);
		if (p == 1) {
			snprintf(err, errlen,
				 "%s: another process is listening on this socket",
				 path);
			return -EADDRINUSE;
		}
		if (p < 0) {
			snprintf(err, errlen, "%s: cannot probe the socket: %s",
				 path, strerror(-p));
			return p;
		}
		if (unlink(path) < 0 && errno != ENOENT) {
			int e = errno;
			snprintf(err, errlen,
				 "%s: cannot remove the stale socket: %s", path,
				 strerror(e));
			return -e;
		}
		log_info("removed a stale socket", "path=%s", path);
	}
	return 0;
}

static int server_listen_unix(struct server *s, struct server_listener *l,
			      struct server_listener **head, char *err,
			      size_t errlen)
{
	const char *path = l->addr.path;
	struct stat st;
	int r = server_unix_prepare(path, err, errlen);
	if (r < 0) {
		free(l);
		return r;
	}

	r = uv_pipe_init(s->loop, &l->h.pipe, 0);
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", path, uv_strerror(r));
		free(l);
		return r;
	}
	l->next = *head;
	*head = l;

	/* The umask makes the socket born with the requested mode at most:
	 * no window where it is wider. chmod then sets it exactly. */
	mode_t old = umask((mode_t)(~l->addr.mode & 0777));
	r = uv_pipe_bind(&l->h.pipe, path);
	umask(old);
	if (r < 0) {
		/* libuv turns ENOENT into EACCES here: look for ourselves. */
		char dir[sizeof(l->addr.path)];
		memcpy(dir, path, sizeof(dir));
		char *slash = strrchr(dir, '/');
		if (slash != NULL && slash != dir)
			*slash = '\0';
		else
			strcpy(dir, slash == dir ? "/" : ".");
		if (stat(dir, &st) < 0 && errno == ENOENT) {
			snprintf(err, errlen,
				 "%s: cannot bind: the directory %s does not exist",
				 path, dir);
			return -ENOENT;
		}
		snprintf(err, errlen, "%s: cannot bind: %s", path,
			 uv_strerror(r));
		return r;
	}
	l->unlink_on_close = true;
	if (chmod(path, (mode_t)l->addr.mode) < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: chmod %04o: %s", path, l->addr.mode,
			 strerror(e));
		return -e;
	}
	return 0;
}

static int server_listen_tcp(struct server *s, struct server_listener *l,
			     struct server_listener **head, char *err,
			     size_t errlen)
{
	struct sockaddr_storage ss;
	int r = l->addr.ipv6
			? uv_ip6_addr(l->addr.host, l->addr.port,
				      (struct sockaddr_in6 *)&ss)
			: uv_ip4_addr(l->addr.host, l->addr.port,
				      (struct sockaddr_in *)&ss);
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", l->addr.text, uv_strerror(r));
		free(l);
		return r;
	}
	r = uv_tcp_init(s->loop, &l->h.tcp);
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", l->addr.text, uv_strerror(r));
		free(l);
		return r;
	}
	l->next = *head;
	*head = l;
	r = uv_tcp_bind(&l->h.tcp, (const struct sockaddr *)&ss, 0);
	if (r < 0) {
		snprintf(err, errlen, "%s: cannot bind: %s", l->addr.text,
			 uv_strerror(r));
		return r;
	}
	return 0;
}

/* Binds and listens on addr, the new listener pushed onto *head (even on
 * failure, for the caller to close). 0 or -errno with err set. */
static int server_bind(struct server *s, const struct config_listen *addr,
		       struct server_listener **head, char *err, size_t errlen)
{
	struct server_listener *l = calloc(1, sizeof(*l));
	if (l == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->srv = s;
	l->addr = *addr;
	int r = l->addr.kind == CONFIG_LISTEN_UNIX
			? server_listen_unix(s, l, head, err, errlen)
			: server_listen_tcp(s, l, head, err, errlen);
	if (r < 0)
		return r;
	r = uv_listen(&l->h.stream, SERVER_BACKLOG, server_on_connection);
	if (r < 0) {
		/* libuv reports a TCP port in use here, not at bind. */
		snprintf(err, errlen, "%s: cannot listen: %s", l->addr.text,
			 uv_strerror(r));
		return r;
	}
	log_info("listening", "listen=%s", l->addr.text);
	return 0;
}

int server_listen(struct server *s, char *err, size_t errlen)
{
	for (size_t i = 0; i < s->cfg->n_listen; i++) {
		int r = server_bind(s, &s->cfg->listen[i], &s->listeners, err,
				    errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Whether a and b are the same socket (a unix path, or host and port). */
static bool server_same_addr(const struct config_listen *a,
			     const struct config_listen *b)
{
	if (a->kind != b->kind)
		return false;
	if (a->kind == CONFIG_LISTEN_UNIX)
		return strcmp(a->path, b->path) == 0;
	return a->port == b->port && a->ipv6 == b->ipv6 &&
	       strcmp(a->host, b->host) == 0;
}

static struct server_listener *server_find_listener(struct server *s,
					const struct config_listen *addr)
{
	for (struct server_listener *l = s->listeners; l != NULL; l = l->next)
		if (!uv_is_closing(&l->h.handle) && server_same_addr(&l->addr, addr))
			return l;
	return NULL;
}

int server_relisten_prepare(struct server *s, const struct config *next,
			    struct server_listener **pending, char *err,
			    size_t errlen)
{
	*pending = NULL;
	for (size_t i = 0; i < next->n_listen; i++) {
		const struct config_listen *a = &next->listen[i];
		bool dup = false;
		for (size_t j = 0; j < i; j++)
			dup |= server_same_addr(&next->listen[j], a);
		if (dup || server_find_listener(s, a) != NULL)
			continue;
		int r = server_bind(s, a, pending, err, errlen);
		if (r < 0) {
			server_relisten_abort(s, *pending);
			*pending = NULL;
			return r;
		}
	}
	return 0;
}

void server_relisten_commit(struct server *s, const struct config *next,
			    struct server_listener *pending)
{
	for (struct server_listener *l = s->listeners; l != NULL; l = l->next) {
		if (uv_is_closing(&l->h.handle))
			continue;
		const struct config_listen *keep = NULL;
		for (size_t i = 0; i < next->n_listen && keep == NULL; i++)
			if (server_same_addr(&l->addr, &next->listen[i]))
				keep = &next->listen[i];
		if (keep == NULL) {
			/* Its connections stay: only accepting stops. */
			log_info("no longer listening", "listen=%s", l->addr.text);
			server_listener_close(l);
			continue;
		}
		if (keep->kind == CONFIG_LISTEN_UNIX && keep->mode != l->addr.mode) {
			if (chmod(l->addr.path, (mode_t)keep->mode) < 0)
				log_warn("cannot change the socket mode",
					 "listen=%s mode=%04o error=%s",
					 keep->text, keep->mode, strerror(errno));
		}
		bool unlink_on_close = l->unlink_on_close;
		l->addr = *keep;
		l->unlink_on_close = unlink_on_close;
	}
	while (pending != NULL) {
		struct server_listener *l = pending;
		pending = l->next;
		l->next = s->listeners;
		s->listeners = l;
	}
}

void server_relisten_abort(struct server *s, struct server_listener *pending)
{
	(void)s;
	while (pending != NULL) {
		struct server_listener *l = pending;
		pending = l->next;
		l->next = NULL; /* the close callback finds it in no list */
		server_listener_close(l);
	}
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

static void server_check_stopped(struct server *s)
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
	s->stopped = true;
	if (s->on_stopped != NULL)
		s->on_stopped(s, s->on_stopped_arg);
}

static void server_abort_all(struct server *s)
{
	for (struct conn *c = s->conns; c != NULL; c = c->next)
		conn_abort(c);
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
