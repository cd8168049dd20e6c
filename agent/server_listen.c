/* server_listen.c - the SPOP listeners: unix sockets (a stale file replaced, a live one refused) and TCP, bound at start and changed by a reload. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "server.h"
#include "server_int.h"

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

void server_listener_close(struct server_listener *l)
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

int server_unix_prepare(const char *path, char *err, size_t errlen)
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
	/* The system's own limit: 1,000 HAProxy threads connecting at once
	 * must not find a short queue here. */
	r = uv_listen(&l->h.stream, (int)s->backlog, server_on_connection);
	if (r < 0) {
		/* libuv reports a TCP port in use here, not at bind. */
		snprintf(err, errlen, "%s: cannot listen: %s", l->addr.text,
			 uv_strerror(r));
		return r;
	}
	log_info("listening", "listen=%s backlog=%u max_connections=%" PRIu64,
		 l->addr.text, s->backlog, s->max_conns);
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
	s->max_conns = server_conn_cap(next);
	/* New timeouts: a sweep on the next loop turn, under *next by then,
	 * re-arms for them (the queues keep their order: every connection of
	 * one waits the same time). */
	if (s->tq_timer_init && !uv_is_closing((uv_handle_t *)&s->tq_timer)) {
		uv_timer_start(&s->tq_timer, server_on_tq_timer, 0, 0);
		s->tq_due = uv_now(s->loop);
	}
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
