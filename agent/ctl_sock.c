/* ctl_sock.c - the command socket itself: the unix listener, its connections (line buffer, prompt, bounded queue, idle timeout) and the rate sampler. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "ctl.h"
#include "ctl_cmd.h"
#include "log.h"
#include "route.h"
#include "server.h"

/* ---- connections -------------------------------------------------------- */

struct ctl_conn {
	uv_pipe_t pipe;
	uv_timer_t idle;
	struct ctl *ctl;
	struct ctl_conn *next, **pprev;
	unsigned handles;  /* open: the pipe and the timer */
	unsigned writes;   /* in flight */
	bool prompt;
	bool ending;       /* close once the writes are done */
	bool closing;
	size_t in_len;
	char in[CTL_LINE_MAX + 1];
};

struct ctl_wr {
	uv_write_t req;
	struct ctl_conn *conn;
	char buf[];
};

static void ctl_handle_closed(struct ctl *c)
{
	if (--c->handles == 0 && c->closing)
		free(c);
}

static void conn_close_cb(uv_handle_t *h)
{
	struct ctl_conn *k = h->data;
	if (--k->handles > 0)
		return;
	struct ctl *c = k->ctl;
	free(k);
	ctl_handle_closed(c);
}

static void conn_close(struct ctl_conn *k)
{
	if (k->closing)
		return;
	k->closing = true;
	*k->pprev = k->next;
	if (k->next != NULL)
		k->next->pprev = k->pprev;
	k->ctl->n_conns--;
	uv_close((uv_handle_t *)&k->pipe, conn_close_cb);
	uv_close((uv_handle_t *)&k->idle, conn_close_cb);
}

static void conn_write_cb(uv_write_t *req, int status)
{
	struct ctl_wr *wr = container_of(req, struct ctl_wr, req);
	struct ctl_conn *k = wr->conn;
	free(wr);
	k->writes--;
	if (k->closing)
		return;
	if (status < 0 || (k->ending && k->writes == 0))
		conn_close(k);
}

/* Queues len bytes of s. A client that leaves more than CTL_QUEUE_MAX
 * unread is closed. */
static void conn_send(struct ctl_conn *k, const char *s, size_t len)
{
	if (k->closing || len == 0)
		return;
	struct ctl_wr *wr = malloc(sizeof(*wr) + len);
	if (wr == NULL) {
		conn_close(k);
		return;
	}
	memcpy(wr->buf, s, len);
	wr->conn = k;
	uv_buf_t b = uv_buf_init(wr->buf, (unsigned)len);
	int r = uv_write(&wr->req, (uv_stream_t *)&k->pipe, &b, 1, conn_write_cb);
	if (r < 0) {
		free(wr);
		conn_close(k);
		return;
	}
	k->writes++;
	if (uv_stream_get_write_queue_size((uv_stream_t *)&k->pipe) > CTL_QUEUE_MAX) {
		log_warn("command connection closed: its client does not read its answers",
			 "queued=%zu", uv_stream_get_write_queue_size((uv_stream_t *)&k->pipe));
		conn_close(k);
	}
}

/* Answers what was said, then closes once it is written. */
static void conn_end(struct ctl_conn *k, const char *msg)
{
	if (msg != NULL)
		conn_send(k, msg, strlen(msg));
	k->ending = true;
	if (!k->closing) {
		uv_read_stop((uv_stream_t *)&k->pipe);
		if (k->writes == 0)
			conn_close(k);
	}
}

static void conn_line(struct ctl_conn *k, const char *line, size_t len)
{
	if (len > 0 && line[len - 1] == '\r')
		len--;
	bool quit;
	if (len == 6 && memcmp(line, "prompt", 6) == 0) {
		k->prompt = !k->prompt;
		if (k->prompt)
			conn_send(k, "> ", 2);
		return;
	}
	char *out = malloc(CTL_ANSWER_MAX);
	if (out == NULL) {
		conn_end(k, "error: out of memory\n\n");
		return;
	}
	size_t n = ctl_execute(k->ctl, line, len, out, CTL_ANSWER_MAX, &quit);
	conn_send(k, out, n);
	free(out);
	if (quit)
		conn_end(k, NULL);
	else if (k->prompt)
		conn_send(k, "> ", 2);
}

static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct ctl_conn *k = h->data;
	(void)suggested;
	*buf = uv_buf_init(k->in + k->in_len, (unsigned)(sizeof(k->in) - k->in_len));
}

static void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct ctl_conn *k = s->data;
	(void)buf;
	if (k->closing || k->ending)
		return;
	if (nread < 0) {
		if (nread == UV_EOF && k->in_len > 0) {
			char msg[96];
			snprintf(msg, sizeof(msg),
				 "error: line without newline (%zu bytes) not run\n\n",
				 k->in_len);
			k->ctl->errors++;
			conn_end(k, msg);
		} else if (nread == UV_EOF) {
			conn_end(k, NULL);
		} else {
			conn_close(k);
		}
		return;
	}
	if (nread == 0)
		return;
	uv_timer_again(&k->idle);
	k->in_len += (size_t)nread;
	size_t start = 0;
	for (size_t i = k->in_len - (size_t)nread; i < k->in_len && !k->closing && !k->ending; i++) {
		if (k->in[i] != '\n')
			continue;
		conn_line(k, k->in + start, i - start);
		start = i + 1;
	}
	if (k->closing || k->ending)
		return;
	memmove(k->in, k->in + start, k->in_len - start);
	k->in_len -= start;
	if (k->in_len == sizeof(k->in)) {
		char msg[96];
		snprintf(msg, sizeof(msg),
			 "error: line longer than %d bytes; closing\n\n", CTL_LINE_MAX);
		k->ctl->errors++;
		conn_end(k, msg);
	}
}

static void conn_idle_cb(uv_timer_t *t)
{
	struct ctl_conn *k = t->data;
	conn_close(k);
}

static void ctl_refused_close_cb(uv_handle_t *h)
{
	struct ctl *c = h->data;
	free(h);
	ctl_handle_closed(c);
}

static void ctl_on_connection(uv_stream_t *ls, int status)
{
	struct ctl *c = ls->data;
	if (status < 0 || c->closing)
		return;
	struct ctl_conn *k = calloc(1, sizeof(*k));
	if (k == NULL || c->n_conns >= CTL_MAX_CONNS) {
		/* Taken and closed: libuv stops watching a listener whose
		 * connection is not accepted. */
		free(k);
		uv_pipe_t *p = malloc(sizeof(*p));
		if (p == NULL || uv_pipe_init(c->loop, p, 0) < 0) {
			free(p);
			return;
		}
		p->data = c;
		c->handles++;
		if (uv_accept(ls, (uv_stream_t *)p) == 0) {
			static const char msg[] = "error: too many command connections\n\n";
			int fd;
			if (uv_fileno((uv_handle_t *)p, &fd) == 0 &&
			    write(fd, msg, sizeof(msg) - 1) < 0) {
				/* a refusal need not be heard */
			}
		}
		uv_close((uv_handle_t *)p, ctl_refused_close_cb);
		return;
	}
	k->ctl = c;
	uv_pipe_init(c->loop, &k->pipe, 0);
	uv_timer_init(c->loop, &k->idle);
	k->pipe.data = k;
	k->idle.data = k;
	k->handles = 2;
	c->handles++;
	k->next = c->conns;
	k->pprev = &c->conns;
	if (c->conns != NULL)
		c->conns->pprev = &k->next;
	c->conns = k;
	c->n_conns++;
	if (uv_accept(ls, (uv_stream_t *)&k->pipe) < 0 ||
	    uv_read_start((uv_stream_t *)&k->pipe, conn_alloc_cb, conn_read_cb) < 0) {
		conn_close(k);
		return;
	}
	uv_timer_start(&k->idle, conn_idle_cb, c->idle_ms, c->idle_ms);
}

/* ---- the socket --------------------------------------------------------- */

static void ctl_on_rate(uv_timer_t *t)
{
	struct ctl *c = t->data;
	c->rate[c->rate_head].ms = uv_now(c->loop);
	c->rate[c->rate_head].decisions = ctl_decisions(c);
	c->rate_head = (c->rate_head + 1) % CTL_RATE_SLOTS;
	if (c->rate_n < CTL_RATE_SLOTS)
		c->rate_n++;
}

static void ctl_close_cb(uv_handle_t *h)
{
	ctl_handle_closed(h->data);
}

int ctl_create(struct ctl **out, uv_loop_t *loop, struct server *srv,
	       const char *path, unsigned mode, const char *config_path,
	       char *err, size_t errlen)
{
	*out = NULL;
	if (strlen(path) >= sizeof(((struct ctl *)0)->path)) {
		snprintf(err, errlen, "%s: socket path too long", path);
		return -ENAMETOOLONG;
	}
	int r = server_unix_prepare(path, err, errlen);
	if (r < 0)
		return r;
	struct ctl *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	c->loop = loop;
	c->srv = srv;
	c->mode = mode;
	c->idle_ms = CTL_IDLE_MS;
	c->start_ms = uv_now(loop);
	if (config_path != NULL)
		snprintf(c->config_path, sizeof(c->config_path), "%s", config_path);
	uv_pipe_init(loop, &c->pipe, 0);
	uv_timer_init(loop, &c->rate_timer);
	c->pipe.data = c;
	c->rate_timer.data = c;
	c->handles = 2;
	/* Born with the requested mode at most, as the SPOP socket. */
	mode_t old = umask((mode_t)(~mode & 0777));
	r = uv_pipe_bind(&c->pipe, path);
	umask(old);
	if (r < 0) {
		/* libuv turns ENOENT into EACCES here: say which it is. */
		char dir[sizeof(c->path)];
		snprintf(dir, sizeof(dir), "%s", path);
		char *slash = strrchr(dir, '/');
		struct stat st;
		if (slash != NULL && slash != dir)
			*slash = '\0';
		if (slash != NULL && slash != dir && stat(dir, &st) < 0 && errno == ENOENT)
			snprintf(err, errlen, "%s: cannot bind: the directory %s does not exist",
				 path, dir);
		else
			snprintf(err, errlen, "%s: cannot bind: %s", path, uv_strerror(r));
		goto fail;
	}
	snprintf(c->path, sizeof(c->path), "%s", path);
	if (chmod(path, (mode_t)mode) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: chmod %04o: %s", path, mode, strerror(-r));
		goto fail;
	}
	r = uv_listen((uv_stream_t *)&c->pipe, 16, ctl_on_connection);
	if (r < 0) {
		snprintf(err, errlen, "%s: cannot listen: %s", path, uv_strerror(r));
		goto fail;
	}
	ctl_on_rate(&c->rate_timer);
	uv_timer_start(&c->rate_timer, ctl_on_rate, 1000, 1000);
	/* Neither keeps the loop running: the SPOP side decides when the
	 * agent stops. */
	uv_unref((uv_handle_t *)&c->rate_timer);
	*out = c;
	return 0;
fail:
	ctl_destroy(c);
	return r;
}

void ctl_destroy(struct ctl *c)
{
	if (c == NULL || c->closing)
		return;
	c->closing = true;
	while (c->conns != NULL)
		conn_close(c->conns);
	if (c->path[0] != '\0') {
		unlink(c->path);
		c->path[0] = '\0';
	}
	uv_close((uv_handle_t *)&c->pipe, ctl_close_cb);
	uv_close((uv_handle_t *)&c->rate_timer, ctl_close_cb);
}
