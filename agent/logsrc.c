/* logsrc.c - the log input: reads HAProxy's log datagrams without blocking and feeds them to the core. */
#include "logsrc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "haplog.h"
#include "log.h"
#include "route.h"

/* Writes "what: strerror(e)" to err and returns -e (errno read by the
 * caller before anything else can change it). */
static int set_err(char *err, size_t errlen, const char *what, int e)
{
	if (errlen > 0)
		snprintf(err, errlen, "%s: %s", what, strerror(e));
	return -e;
}

static uint64_t wall_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- one datagram -------------------------------------------------------- */

/* "unparseable log line" at most LOGSRC_LOG_BURST times per window; the
 * count of the others is logged when a new window starts. */
static void logsrc_report(struct logsrc *ls, int status, const uint8_t *p,
			  size_t len, uint64_t now_ms)
{
	if (now_ms - ls->rl_window_ms >= LOGSRC_LOG_WINDOW_MS ||
	    ls->rl_window_ms == 0) {
		if (ls->rl_suppressed > 0)
			log_warn("unparseable log lines not shown", "count=%llu",
				 (unsigned long long)ls->rl_suppressed);
		ls->rl_window_ms = now_ms == 0 ? 1 : now_ms;
		ls->rl_logged = 0;
		ls->rl_suppressed = 0;
	}
	if (ls->rl_logged >= LOGSRC_LOG_BURST) {
		ls->rl_suppressed++;
		return;
	}
	ls->rl_logged++;
	char q[300];
	log_warn("unparseable log line", "error=%s len=%zu line=%s",
		 haplog_status_name(status), len,
		 log_quote(q, sizeof(q), (const char *)p,
			   len < LOGSRC_LOG_SHOWN ? len : LOGSRC_LOG_SHOWN));
}

/* Judges the current window's datagrams: in warmlane's format or not.
 * Turning bad is said clearly (the unparseable lines alone are warnings
 * among others, rate-limited, and easy to miss while the input silently
 * does nothing): once, with a sample, then at most every
 * LOGSRC_FORMAT_REWARN_MS while it lasts. */
static void logsrc_format_judge(struct logsrc *ls, uint64_t now_ms)
{
	struct route_log_stats *st = &ls->route->log;
	uint32_t n = st->fmt_ok + st->fmt_bad;
	if (n == 0)
		return;
	bool was_bad = st->format_bad;
	st->format_bad = st->fmt_bad > st->fmt_ok;
	st->unparsed_ratio = (double)st->fmt_bad / n;
	if (st->format_bad && !was_bad &&
	    (ls->fmt_warned_ms == 0 ||
	     now_ms - ls->fmt_warned_ms >= LOGSRC_FORMAT_REWARN_MS)) {
		ls->fmt_warned_ms = now_ms == 0 ? 1 : now_ms;
		char q[LOGSRC_LOG_SHOWN * 4 + 8];
		log_warn("log lines are not in warmlane's format: no completion, cut stream or end-to-end time is learnt from them; "
			 "HAProxy 3.1+ needs `option httplog` (or a log-format) in the frontend for its log profile's format to apply, "
			 "2.6-3.0 warmlane's log-format in the frontend (docs/haproxy.md, Log input)",
			 "unparseable=%" PRIu32 " parsed=%" PRIu32 " error=%s len=%zu sample=%s",
			 st->fmt_bad, st->fmt_ok,
			 haplog_status_name(ls->fmt_sample_err),
			 ls->fmt_sample_full,
			 log_quote(q, sizeof(q), (const char *)ls->fmt_sample,
				   ls->fmt_sample_len));
	} else if (!st->format_bad && was_bad) {
		log_info("log lines in warmlane's format again",
			 "unparseable=%" PRIu32 " parsed=%" PRIu32,
			 st->fmt_bad, st->fmt_ok);
	}
}

/* Counts one datagram for the format check (result r of haplog_parse). */
static void logsrc_format_count(struct logsrc *ls, int r, const uint8_t *p,
				size_t len, uint64_t now_ms)
{
	struct route_log_stats *st = &ls->route->log;
	if (st->fmt_window_ms == 0 ||
	    now_ms - st->fmt_window_ms >= LOGSRC_LOG_WINDOW_MS) {
		logsrc_format_judge(ls, now_ms);
		st->fmt_window_ms = now_ms == 0 ? 1 : now_ms;
		st->fmt_ok = st->fmt_bad = 0;
		ls->fmt_sample_len = 0;
	}
	if (r == HAPLOG_OK) {
		if (st->fmt_ok < UINT32_MAX)
			st->fmt_ok++;
	} else {
		if (st->fmt_bad < UINT32_MAX)
			st->fmt_bad++;
		if (ls->fmt_sample_len == 0 && len > 0) {
			/* the first of the window: what HAProxy sends */
			size_t k = len < sizeof(ls->fmt_sample) ? len
							       : sizeof(ls->fmt_sample);
			memcpy(ls->fmt_sample, p, k);
			ls->fmt_sample_len = k;
			ls->fmt_sample_full = len;
			ls->fmt_sample_err = r;
		}
	}
	if (st->fmt_ok + st->fmt_bad >= LOGSRC_FORMAT_MIN)
		logsrc_format_judge(ls, now_ms);
}

void logsrc_handle(struct logsrc *ls, const uint8_t *p, size_t len,
		   uint64_t now_ms, uint64_t wall_ms)
{
	struct route_log_stats *st = &ls->route->log;
	struct haplog_line l;
	int r = haplog_parse(p, len, &l);

	st->received++;
	logsrc_format_count(ls, r, p, len, now_ms);
	if (r != HAPLOG_OK) {
		st->unparseable++;
		if (-r > 0 && (size_t)-r < sizeof(st->errors) / sizeof(st->errors[0]))
			st->errors[-r]++;
		logsrc_report(ls, r, p, len, now_ms);
		return;
	}
	st->parsed++;
	if ((l.present & HAPLOG_F_AT) != 0) {
		/* the request ended at accept + Tt, on HAProxy's wall clock */
		uint64_t end = l.at_ms + (uint64_t)(l.tt_ms > 0 ? l.tt_ms : 0);
		double lag = wall_ms > end ? (double)(wall_ms - end) / 1000.0 : 0.0;
		for (size_t i = 0; i < ROUTE_LAG_BUCKETS; i++)
			if (lag <= route_lag_bounds_s[i])
				st->lag_buckets[i]++;
		st->lag_count++;
		st->lag_sum_s += lag;
	}
	route_log_line(ls->route, &l, now_ms);
}

/* ---- sockets ------------------------------------------------------------- */

/* A socket that is read: open, and no poll error (libuv stops the handle
 * on one). */
static bool logsrc_sock_reading(const struct logsrc_sock *s)
{
	return s->open && !s->failed;
}

/* Reads s's datagrams: at most LOGSRC_BATCH, and none after the one that
 * took the pass past budget_ns, which is not looked at before the
 * min-th (logsrc.h). */
static void logsrc_sock_read(struct logsrc *ls, struct logsrc_sock *s,
			     uint64_t budget_ns, unsigned min)
{
	uint64_t start = uv_hrtime();
	uint64_t now_ms = uv_now(ls->loop);
	uint64_t wall_ms = wall_now_ms();
	for (unsigned i = 0; i < LOGSRC_BATCH; i++) {
		ssize_t n = recv(s->fd, ls->buf, sizeof(ls->buf), MSG_TRUNC);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR)
				log_warn("log input read error", "error=%s",
					 strerror(errno));
			return;
		}
		size_t len = (size_t)n;
		if (len > sizeof(ls->buf)) {
			ls->route->log.truncated++;
			len = sizeof(ls->buf);
		}
		logsrc_handle(ls, ls->buf, len, now_ms, wall_ms);
		if (i + 1 >= min && uv_hrtime() - start >= budget_ns)
			break;
	}
	/* More may be waiting: level-triggered, the poll fires again on the
	 * next iteration, after the other handles had their turn. */
}

static void logsrc_on_readable(uv_poll_t *h, int status, int events)
{
	struct logsrc_sock *s = h->data;
	struct logsrc *ls = s->owner;
	(void)events;
	if (status < 0) {
		/* libuv stops the handle on a poll error: this socket is read
		 * no more. Without a socket read, the log input is off (and
		 * non-streamed feedback ends requests again). */
		uv_poll_stop(h);
		s->failed = true;
		ls->route->log_input = logsrc_sock_reading(&ls->unix_sock) ||
				       logsrc_sock_reading(&ls->udp_sock);
		log_error("log input poll error: this socket is no longer read",
			  "error=%s log_input=%s", uv_err_name(status),
			  ls->route->log_input ? "on" : "off");
		return;
	}
	logsrc_sock_read(ls, s, ls->pass_ns, 1);
}

static void logsrc_on_closed(uv_handle_t *h)
{
	struct logsrc_sock *s = h->data;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->owner->closing--;
}

static void logsrc_sock_close(struct logsrc_sock *s)
{
	if (s->open) {
		s->open = false;
		s->closing = true; /* the close callback closes fd */
		s->owner->closing++;
		uv_close((uv_handle_t *)&s->poll, logsrc_on_closed);
	} else if (!s->closing && s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
	}
}

static int logsrc_sock_watch(struct logsrc *ls, struct logsrc_sock *s)
{
	int r = uv_poll_init(ls->loop, &s->poll, s->fd);
	if (r < 0)
		return r;
	s->poll.data = s;
	s->open = true;
	return uv_poll_start(&s->poll, UV_READABLE, logsrc_on_readable);
}

void logsrc_catch_up(void *arg)
{
	struct logsrc *ls = arg;
	/* Until HAProxy's first line, nothing to catch up with: no recv. */
	if (ls->route == NULL || !ls->route->log_lines)
		return;
	if (logsrc_sock_reading(&ls->unix_sock))
		logsrc_sock_read(ls, &ls->unix_sock, ls->catch_up_ns,
				 LOGSRC_CATCH_UP_MIN);
	if (logsrc_sock_reading(&ls->udp_sock))
		logsrc_sock_read(ls, &ls->udp_sock, ls->catch_up_ns,
				 LOGSRC_CATCH_UP_MIN);
}

/* 0 when nothing answers at path (absent, or a stale socket), -EADDRINUSE
 * when a process reads from it. */
static int logsrc_probe(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	int e = errno;
	close(fd);
	if (r == 0)
		return -EADDRINUSE;
	return e == ECONNREFUSED || e == ENOENT ? 0 : -e;
}

/* Under this many queued datagrams a busy HAProxy loses log lines. */
#define LOGSRC_QLEN_WANT 512

/* A unix datagram socket queues at most net.unix.max_dgram_qlen datagrams
 * (the kernel's default is 10); HAProxy drops the lines beyond. Said once,
 * at start, with the setting to change. */
static void logsrc_check_qlen(void)
{
	FILE *f = fopen("/proc/sys/net/unix/max_dgram_qlen", "re");
	if (f == NULL)
		return;
	long q = -1;
	if (fscanf(f, "%ld", &q) != 1)
		q = -1;
	fclose(f);
	if (q >= 0 && q < LOGSRC_QLEN_WANT)
		log_warn("the log socket queues few lines: HAProxy drops lines beyond it under load; raise the sysctl or use log_input.udp_port",
			 "sysctl=net.unix.max_dgram_qlen value=%ld want=%d", q,
			 LOGSRC_QLEN_WANT);
}

static int logsrc_open_unix(struct logsrc *ls, const char *path, unsigned mode,
			    char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		set_err(err, errlen, path, ENAMETOOLONG);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path));
	int r = logsrc_probe(&sa);
	if (r == -EADDRINUSE) {
		snprintf(err, errlen, "%s: another process reads from this socket",
			 path);
		return r;
	}
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s: exists and is not a socket", path);
			return -EEXIST;
		}
		if (unlink(path) < 0)
			return set_err(err, errlen, path, errno);
	}
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return set_err(err, errlen, "socket", errno);
	ls->unix_sock.fd = fd;
	/* As in server.c: the umask makes the socket born with log_input.mode
	 * at most, so there is no window where any local user may connect
	 * and forge lines; chmod then sets it exactly. */
	mode_t old = umask((mode_t)(~mode & 0777));
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	umask(old);
	if (r < 0)
		return set_err(err, errlen, path, e);
	snprintf(ls->path, sizeof(ls->path), "%s", path);
	if (chmod(path, mode) < 0)
		return set_err(err, errlen, path, errno);
	logsrc_check_qlen();
	/* Room for bursts: lines wait here while the loop serves SPOP. */
	int sz = 1 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	r = logsrc_sock_watch(ls, &ls->unix_sock);
	if (r < 0)
		snprintf(err, errlen, "%s: %s", path, uv_strerror(r));
	return r;
}

static int logsrc_open_udp(struct logsrc *ls, uint16_t port, char *err,
			   size_t errlen)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return set_err(err, errlen, "socket", errno);
	ls->udp_sock.fd = fd;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		snprintf(err, errlen, "udp 127.0.0.1:%u: %s", (unsigned)port,
			 strerror(e));
		return -e;
	}
	int sz = 1 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	int r = logsrc_sock_watch(ls, &ls->udp_sock);
	if (r < 0)
		snprintf(err, errlen, "udp: %s", uv_strerror(r));
	return r;
}

int logsrc_init(struct logsrc *ls, uv_loop_t *loop, struct route *route,
		const struct config *cfg, char *err, size_t errlen)
{
	*ls = (struct logsrc){
		.loop = loop,
		.route = route,
		.unix_sock = { .fd = -1, .owner = ls },
		.udp_sock = { .fd = -1, .owner = ls },
		.pass_ns = LOGSRC_PASS_NS,
		.catch_up_ns = LOGSRC_CATCH_UP_NS,
	};
	if (errlen > 0)
		err[0] = '\0';
	int r = 0;
	if (cfg->log_input_path[0] != '\0')
		r = logsrc_open_unix(ls, cfg->log_input_path, cfg->log_input_mode,
				     err, errlen);
	if (r == 0 && cfg->log_input_udp_port != 0)
		r = logsrc_open_udp(ls, cfg->log_input_udp_port, err, errlen);
	if (r < 0) {
		logsrc_finish(ls);
		return r;
	}
	route->log_input = logsrc_sock_reading(&ls->unix_sock) ||
			    logsrc_sock_reading(&ls->udp_sock);
	return 0;
}

void logsrc_finish(struct logsrc *ls)
{
	if (ls->route == NULL)
		return;
	ls->route->log_input = false;
	logsrc_sock_close(&ls->unix_sock);
	logsrc_sock_close(&ls->udp_sock);
	if (ls->path[0] != '\0') {
		unlink(ls->path);
		ls->path[0] = '\0';
	}
}
