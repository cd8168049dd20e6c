/* test_metrics.c - agent: /metrics, /healthz and 404 over real HTTP on the test loop, counts after SPOP traffic, the bound address, slow-loris clients. */
#include <check.h>
#include <inttypes.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "metrics.h"
#include "notify.h"
#include "snapshot.h"

static const char *const yaml =
	"endpoints:\n"
	"  - {backend: llm, server: gpu1, models: [m1], keys: ['k\"1\\']}\n"
	"  - {backend: llm, server: gpu2, models: [m1]}\n";

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void loopback(struct config_hostport *a, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	strcpy(a->host, "127.0.0.1");
	a->port = port;
}

/* An HTTP exchange: the whole answer, read until the server closes. */
struct http_answer {
	int status;
	char head[2048];
	char *body; /* NUL-terminated, malloc'd */
	size_t body_len;
};

static int connect_to(const char *ip, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	ck_assert_int_eq(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Sends "METHOD path" and drives the loop between reads (the server runs
 * on it) until the answer is complete. */
static void http_do(struct harness *h, uint16_t port, const char *method,
		    const char *path, struct http_answer *a)
{
	int fd = connect_to("127.0.0.1", port);
	ck_assert_int_ge(fd, 0);
	char req[256];
	int n = snprintf(req, sizeof(req),
			 "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
			 method, path);
	size_t off = 0, len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	uint64_t deadline = mono_ms() + 5000;
	bool eof = false;
	while (!eof) {
		ck_assert_msg(mono_ms() < deadline, "no HTTP answer to %s %s",
			      method, path);
		harness_pump(h);
		if (off < (size_t)n) {
			ssize_t w = write(fd, req + off, (size_t)n - off);
			if (w > 0)
				off += (size_t)w;
			continue;
		}
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
		ssize_t r = read(fd, buf + len, cap - len - 1);
		if (r > 0) {
			len += (size_t)r;
		} else if (r == 0) {
			eof = true;
		} else {
			ck_assert_msg(errno == EAGAIN || errno == EINTR,
				      "read: %s", strerror(errno));
			struct timespec ts = { 0, 500000 };
			nanosleep(&ts, NULL);
		}
	}
	close(fd);
	buf[len] = '\0';

	char *sep = strstr(buf, "\r\n\r\n");
	ck_assert_ptr_nonnull(sep);
	size_t hl = (size_t)(sep - buf);
	ck_assert_uint_lt(hl, sizeof(a->head));
	memcpy(a->head, buf, hl);
	a->head[hl] = '\0';
	ck_assert_int_eq(sscanf(buf, "HTTP/1.1 %d", &a->status), 1);
	a->body_len = len - hl - 4;
	a->body = malloc(a->body_len + 1);
	memcpy(a->body, sep + 4, a->body_len + 1);
	free(buf);
}

/* A harness on yml (NULL: the defaults) and m serving it on a free
 * loopback port. */
static struct metrics *start_serving(struct harness *h, const char *yml)
{
	harness_init(h, yml);
	struct config_hostport a;
	char err[512];
	loopback(&a, 0);
	struct metrics *m;
	ck_assert_int_eq(metrics_create(&m, &h->loop, &a, &h->srv, err,
					sizeof(err)), 0);
	ck_assert_uint_gt(m->port, 0);
	return m;
}

/* The status of one request; the body is dropped. */
static int http_status(struct harness *h, uint16_t port, const char *method,
		       const char *path)
{
	struct http_answer r;
	http_do(h, port, method, path, &r);
	free(r.body);
	return r.status;
}

/* The value of the sample whose name and labels are exactly series, or
 * -1 when there is no such line. */
static double sample(const char *body, const char *series)
{
	size_t n = strlen(series);
	for (const char *l = body; *l != '\0';) {
		const char *e = strchr(l, '\n');
		if (e == NULL)
			e = l + strlen(l);
		if ((size_t)(e - l) > n && strncmp(l, series, n) == 0 &&
		    l[n] == ' ')
			return strtod(l + n + 1, NULL);
		l = *e != '\0' ? e + 1 : e;
	}
	return -1;
}

/* Every sample belongs to a family announced by # HELP then # TYPE. */
static void check_families(const char *body)
{
	char family[128] = "", type[32] = "";
	unsigned families = 0;
	for (const char *l = body; *l != '\0';) {
		const char *e = strchr(l, '\n');
		ck_assert_msg(e != NULL, "last line without newline");
		char line[1024];
		size_t n = (size_t)(e - l);
		ck_assert_uint_lt(n, sizeof(line));
		memcpy(line, l, n);
		line[n] = '\0';
		if (strncmp(line, "# HELP ", 7) == 0) {
			ck_assert_int_eq(sscanf(line + 7, "%127s", family), 1);
			type[0] = '\0';
			families++;
		} else if (strncmp(line, "# TYPE ", 7) == 0) {
			char name[128];
			ck_assert_int_eq(sscanf(line + 7, "%127s %31s", name, type), 2);
			ck_assert_str_eq(name, family);
		} else {
			ck_assert_msg(type[0] != '\0', "sample without TYPE: %s", line);
			size_t fl = strlen(family);
			ck_assert_msg(strncmp(line, family, fl) == 0,
				      "sample %s outside family %s", line, family);
			const char *rest = line + fl;
			if (strcmp(type, "histogram") == 0 &&
			    (strncmp(rest, "_bucket{", 8) == 0 ||
			     strncmp(rest, "_sum ", 5) == 0 ||
			     strncmp(rest, "_count ", 7) == 0))
				rest = strchr(rest, rest[1] == 'b' ? '{' : ' ');
			ck_assert_msg(*rest == '{' || *rest == ' ',
				      "sample %s outside family %s", line, family);
		}
		l = e + 1;
	}
	ck_assert_uint_ge(families, 30);
}

static void stopped(void *arg)
{
	*(bool *)arg = true;
}

static void stop_metrics(struct harness *h, struct metrics *m)
{
	bool done = false;
	metrics_destroy(m, stopped, &done);
	for (int i = 0; i < 100 && !done; i++)
		harness_pump(h);
	ck_assert(done);
}

static void do_hello(struct harness *h, struct client *c)
{
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	client_send(h, c, f->b, f->len);
	free(f);
	static uint8_t buf[4096];
	ck_assert_int_gt(client_frame(h, c, buf, sizeof(buf), 3000), 0);
}

static void read_ack(struct harness *h, struct client *c, uint64_t sid,
		     struct ack_vars *v)
{
	static uint8_t buf[65536];
	ptrdiff_t n = client_frame(h, c, buf, sizeof(buf), 3000);
	ck_assert_int_gt(n, 0);
	answer_ack(buf, (size_t)n, sid, 1, v);
}

/* A feedback message as HAProxy sends it: server, status, tr, key. */
static void send_feedback(struct harness *h, struct client *c, uint64_t sid,
			  const char *server, const char *key, uint64_t status,
			  uint64_t tr)
{
	struct fb *f = calloc(1, sizeof(*f)), *p = calloc(1, sizeof(*p));
	fb_str(p, "feedback");
	fb_u8(p, key != NULL ? 4 : 3);
	fb_kv_str(p, "server", server);
	fb_str(p, "status");
	fb_u8(p, SPOP_DATA_INT64);
	fb_varint(p, status);
	fb_str(p, "tr");
	fb_u8(p, SPOP_DATA_INT64);
	fb_varint(p, tr);
	if (key != NULL)
		fb_kv_str(p, "key", key);
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, sid, 1, p);
	client_send(h, c, f->b, f->len);
	free(f);
	free(p);
	struct ack_vars v;
	read_ack(h, c, sid, &v);
	ck_assert(ack_has(&v, NOTIFY_ACK_VAR));
}

START_TEST(scrape_after_traffic)
{
	struct harness h;
	struct metrics *m = start_serving(&h, yaml);

	struct client *c = harness_client(&h, 0);
	do_hello(&h, c);
	/* Five decisions: three served, two for a model nobody serves. */
	static const char *const sessions[] = { "s1", "s2", "s3" };
	for (uint64_t i = 0; i < 5; i++) {
		struct fb *f = calloc(1, sizeof(*f));
		const char *const kv[] = { "model", i < 3 ? "m1" : "m9",
					   "session", sessions[i % 3], NULL };
		fb_route(f, i + 1, 1, kv);
		client_send(&h, c, f->b, f->len);
		free(f);
		struct ack_vars v;
		read_ack(&h, c, i + 1, &v);
		ck_assert_ptr_nonnull(ack_str(&v, "reason"));
	}
	send_feedback(&h, c, 10, "llm/gpu1", "k\"1\\", 200, 120);
	send_feedback(&h, c, 11, "llm/gpu2", NULL, 200, 80);
	send_feedback(&h, c, 12, "llm/gpu2", NULL, 503, 5);
	send_feedback(&h, c, 13, "llm/gpu2", NULL, 429, 5);

	struct http_answer r;
	http_do(&h, m->port, "GET", "/metrics", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(strstr(r.head, "Content-Type: text/plain; version=0.0.4; charset=utf-8") != NULL,
		      "%s", r.head);
	const char *b = r.body;
	check_families(b);

	/* Decisions: every reason listed, their sum what was sent. */
	static const char *const reasons[] = { "affinity", "hash", "spill",
		"p2c", "cooldown_fallback", "key_fallback", "no_model", "none",
		"failover" };
	double sum = 0;
	char series[256];
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
		snprintf(series, sizeof(series),
			 "warmlane_decisions_total{reason=\"%s\"}", reasons[i]);
		double v = sample(b, series);
		ck_assert_msg(v >= 0, "no %s", series);
		sum += v;
	}
	ck_assert_double_eq(sum, 5);
	ck_assert_double_eq(sample(b, "warmlane_decisions_total{reason=\"no_model\"}"), 2);
	/* Of the 5 decisions the first is timed (then one in 16). */
	ck_assert_double_eq(sample(b, "warmlane_decision_duration_seconds_count"), 1);
	ck_assert_double_eq(sample(b, "warmlane_decision_duration_seconds_bucket{le=\"+Inf\"}"), 1);
	ck_assert(sample(b, "warmlane_decision_duration_seconds_sum") > 0);
	ck_assert(strstr(b, "# TYPE warmlane_decision_duration_seconds histogram\n") != NULL);

	/* Responses by class, whole core and per endpoint. */
	ck_assert_double_eq(sample(b, "warmlane_responses_total{class=\"success\"}"), 2);
	ck_assert_double_eq(sample(b, "warmlane_responses_total{class=\"failure\"}"), 1);
	ck_assert_double_eq(sample(b, "warmlane_responses_total{class=\"rate_limited\"}"), 1);
	ck_assert_double_eq(sample(b, "warmlane_endpoint_responses_total{backend=\"llm\",server=\"gpu2\",class=\"failure\"}"), 1);
	/* The key id is a label, escaped per the text format. */
	ck_assert_double_eq(sample(b, "warmlane_endpoint_responses_total{backend=\"llm\",server=\"gpu1\",key=\"k\\\"1\\\\\",class=\"success\"}"), 1);
	ck_assert_double_eq(sample(b, "warmlane_endpoints"), 2);
	/* Failover tiers: no tier configured, one series, every decision
	 * that named an endpoint in it; the endpoints' tier 1. */
	ck_assert_double_eq(sample(b, "warmlane_tier_decisions_total{tier=\"1\"}"), 3);
	ck_assert_double_eq(sample(b, "warmlane_tier_decisions_total{tier=\"2\"}"), -1);
	ck_assert_double_eq(sample(b, "warmlane_decisions_total{reason=\"failover\"}"), 0);
	ck_assert_double_eq(sample(b, "warmlane_endpoint_tier{backend=\"llm\",server=\"gpu2\"}"), 1);
	ck_assert(sample(b, "warmlane_endpoint_in_flight{backend=\"llm\",server=\"gpu2\"}") >= 0);
	ck_assert(sample(b, "warmlane_endpoint_ttfb_ewma_seconds{backend=\"llm\",server=\"gpu2\",kind=\"plain\"}") >= 0);
	ck_assert(sample(b, "warmlane_endpoint_ttfb_ewma_seconds{backend=\"llm\",server=\"gpu2\",kind=\"stream\"}") >= 0);
	/* One success each, not streamed: the plain series, not its neighbour. */
	ck_assert_double_eq(sample(b, "warmlane_endpoint_ttfb_samples{backend=\"llm\",server=\"gpu2\",kind=\"plain\"}"), 1);
	ck_assert_double_eq(sample(b, "warmlane_endpoint_ttfb_samples{backend=\"llm\",server=\"gpu2\",kind=\"stream\"}"), 0);
	/* 429: the breaker is open (2). */
	ck_assert_double_eq(sample(b, "warmlane_endpoint_breaker_state{backend=\"llm\",server=\"gpu2\"}"), 2);
	ck_assert_double_eq(sample(b, "warmlane_endpoint_admin_state{backend=\"llm\",server=\"gpu2\",state=\"enabled\"}"), 1);
	ck_assert_double_eq(sample(b, "warmlane_endpoint_admin_state{backend=\"llm\",server=\"gpu2\",state=\"maint\"}"), 0);
	ck_assert(sample(b, "warmlane_affinity_capacity") > 0);
	ck_assert(sample(b, "warmlane_affinity_entries") >= 0);
	ck_assert(sample(b, "warmlane_affinity_hits_total") >= 0);
	ck_assert(sample(b, "warmlane_affinity_evictions_total") >= 0);

	/* SPOP counters. */
	ck_assert_double_eq(sample(b, "warmlane_spop_connections_accepted_total"), 1);
	ck_assert_double_eq(sample(b, "warmlane_spop_connections_active"), 1);
	ck_assert_double_eq(sample(b, "warmlane_spop_frames_total{type=\"NOTIFY\",direction=\"received\"}"), 9);
	ck_assert_double_eq(sample(b, "warmlane_spop_frames_total{type=\"ACK\",direction=\"sent\"}"), 9);
	ck_assert_double_eq(sample(b, "warmlane_spop_frames_total{type=\"HAPROXY-HELLO\",direction=\"received\"}"), 1);
	ck_assert_double_eq(sample(b, "warmlane_spop_messages_total{message=\"route\"}"), 5);
	ck_assert_double_eq(sample(b, "warmlane_spop_messages_total{message=\"feedback\"}"), 4);
	ck_assert(strstr(b, "# TYPE warmlane_spop_protocol_errors_total counter\n") != NULL);
	ck_assert_double_eq(sample(b, "warmlane_runtime_polls_total"), 0);
	ck_assert_double_eq(sample(b, "warmlane_runtime_poll_failures_total"), 0);
	ck_assert(strstr(b, "warmlane_build_info{version=\"") != NULL);
	/* No per-session label, ever. */
	ck_assert(strstr(b, "session") == NULL);
	ck_assert(strstr(b, "s1") == NULL);
	free(r.body);

	/* A second scrape reuses the buffer and sees the same counts. */
	http_do(&h, m->port, "GET", "/metrics", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_double_eq(sample(r.body, "warmlane_decision_duration_seconds_count"), 1);
	free(r.body);
	ck_assert_uint_eq(m->scrapes, 2);

	client_free(c);
	stop_metrics(&h, m);
	harness_finish(&h);
}
END_TEST

START_TEST(routes_and_methods)
{
	struct harness h;
	struct metrics *m = start_serving(&h, NULL);

	struct http_answer r;
	http_do(&h, m->port, "GET", "/healthz", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.body, "ok\n");
	free(r.body);

	ck_assert_int_eq(http_status(&h, m->port, "GET", "/nope"), 404);
	ck_assert_int_eq(http_status(&h, m->port, "GET", "/metrics/"), 404);
	/* The query string is not part of the path. */
	ck_assert_int_eq(http_status(&h, m->port, "GET", "/healthz?x=1"), 200);

	http_do(&h, m->port, "POST", "/metrics", &r);
	ck_assert_int_eq(r.status, 405);
	ck_assert(strstr(r.head, "Allow: GET, HEAD") != NULL);
	free(r.body);

	/* HEAD: the headers of GET, no body. */
	http_do(&h, m->port, "HEAD", "/metrics", &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.body_len, 0);
	ck_assert(strstr(r.head, "version=0.0.4") != NULL);
	free(r.body);

	/* Defaults: no endpoints, yet every family is announced. */
	http_do(&h, m->port, "GET", "/metrics", &r);
	check_families(r.body);
	ck_assert_double_eq(sample(r.body, "warmlane_endpoints"), 0);
	ck_assert(strstr(r.body, "# TYPE warmlane_endpoint_in_flight gauge\n") != NULL);
	free(r.body);

	stop_metrics(&h, m);
	harness_finish(&h);
}
END_TEST

/* 127.0.0.1 only, not every address; a port in use is an error naming
 * the address. */
START_TEST(bound_address)
{
	struct harness h;
	struct metrics *m = start_serving(&h, NULL);
	struct config_hostport a;
	char err[512];

	/* Any 127/8 address reaches loopback on Linux: a wildcard bind
	 * would accept this connection. */
	int fd = connect_to("127.0.0.2", m->port);
	if (fd >= 0) {
		/* The kernel completes the handshake with a listening
		 * socket by itself, and refuses at once when there is none. */
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		ck_assert_int_eq(poll(&p, 1, 2000), 1);
		int e = 0;
		socklen_t el = sizeof(e);
		ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el), 0);
		ck_assert_msg(e != 0, "127.0.0.2 reached the metrics port");
		close(fd);
	} else {
		ck_assert_int_ne(errno, 0);
	}

	struct metrics *m2;
	loopback(&a, m->port);
	int r = metrics_create(&m2, &h.loop, &a, &h.srv, err, sizeof(err));
	ck_assert_int_eq(r, -EADDRINUSE);
	char want[64];
	snprintf(want, sizeof(want), "127.0.0.1:%u", (unsigned)m->port);
	ck_assert_msg(strstr(err, want) != NULL, "%s", err);
	ck_assert_ptr_null(m2);

	/* The first one still serves. */
	ck_assert_int_eq(http_status(&h, m->port, "GET", "/healthz"), 200);

	stop_metrics(&h, m);
	harness_finish(&h);
}
END_TEST

/* ---- slow clients ---- */

/* One GET of path, read until the server closes: its status, or 0 when
 * the connection was closed without an answer (libmicrohttpd over its
 * connection limit) or nothing came within wait_ms. */
static int http_try(struct harness *h, uint16_t port, const char *path,
		    int wait_ms)
{
	int fd = connect_to("127.0.0.1", port);
	if (fd < 0)
		return 0;
	char req[256], buf[65536];
	int n = snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
			 path);
	size_t off = 0, len = 0;
	int status = 0;
	uint64_t deadline = mono_ms() + (uint64_t)wait_ms;
	while (mono_ms() < deadline) {
		harness_pump(h);
		if (off < (size_t)n) {
			ssize_t w = write(fd, req + off, (size_t)n - off);
			if (w > 0)
				off += (size_t)w;
			else if (w < 0 && errno != EAGAIN)
				break;
			continue;
		}
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (r > 0) {
			len += (size_t)r;
			if (len == sizeof(buf) - 1)
				len = 64; /* only the status line matters */
			continue;
		}
		if (r == 0 || errno != EAGAIN)
			break;
		nanosleep(&(struct timespec){ 0, 500000 }, NULL);
	}
	close(fd);
	buf[len] = '\0';
	if (len == 0 || sscanf(buf, "HTTP/1.1 %d", &status) != 1)
		return 0;
	return status;
}

/* A slow-loris client: a request line, then a header byte now and then,
 * never the blank line that ends the request. */
struct loris {
	int fd;
	bool closed;
	uint64_t opened_ms, closed_ms;
};

static void loris_open(struct loris *l, uint16_t port)
{
	l->fd = connect_to("127.0.0.1", port);
	ck_assert_int_ge(l->fd, 0);
	l->closed = false;
	l->opened_ms = mono_ms();
	static const char start[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
	/* loopback: the handshake is done by the kernel, the write fits */
	struct pollfd p = { .fd = l->fd, .events = POLLOUT };
	ck_assert_int_eq(poll(&p, 1, 2000), 1);
	ck_assert_int_eq(write(l->fd, start, sizeof(start) - 1),
			 (ssize_t)(sizeof(start) - 1));
}

/* Sends one more byte (when send) and notices a close by the server. */
static void loris_tick(struct loris *l, bool send)
{
	if (l->closed)
		return;
	char b[256];
	ssize_t r = read(l->fd, b, sizeof(b));
	bool gone = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
	if (!gone && send && write(l->fd, "a", 1) < 0 && errno != EAGAIN)
		gone = true;
	if (gone) {
		l->closed = true;
		l->closed_ms = mono_ms();
		close(l->fd);
		l->fd = -1;
	}
}

/* 20 clients trickling a byte every second stay under the default
 * connection limit: a scrape beside them is answered at once. (With the
 * old limit of 16 they took every connection, for ever.) */
START_TEST(slow_clients_default_limit)
{
	enum { N = 20 };
	struct harness h;
	struct metrics *m = start_serving(&h, NULL);
	struct loris l[N];
	for (int i = 0; i < N; i++)
		loris_open(&l[i], m->port);
	for (int k = 0; k < 3; k++) {
		uint64_t end = mono_ms() + 1000;
		while (mono_ms() < end) {
			harness_pump(&h);
			nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
		}
		for (int i = 0; i < N; i++)
			loris_tick(&l[i], true);
	}
	ck_assert_uint_eq(m->n_conns, N);
	uint64_t t0 = mono_ms();
	int st = http_try(&h, m->port, "/metrics", 3000);
	fprintf(stderr, "# %d slow clients, default limit: scrape status %d "
		"in %" PRIu64 " ms\n", N, st, mono_ms() - t0);
	ck_assert_int_eq(st, 200);
	for (int i = 0; i < N; i++) {
		ck_assert(!l[i].closed);
		close(l[i].fd);
	}
	stop_metrics(&h, m);
	harness_finish(&h);
}
END_TEST

/* More slow clients than metrics.max_connections, each trickling a byte
 * every 200 ms (libmicrohttpd's own timeout, whole seconds, restarts on
 * every byte, and a client here never waits a second):
 * metrics.connection_timeout bounds each connection's whole life, so
 * the agent closes them and a scrape, tried every 100 ms meanwhile,
 * succeeds. */
START_TEST(slow_clients_over_limit)
{
	enum { N = 12, LIMIT = 8 };
	struct harness h;
	struct metrics *m = start_serving(&h, "metrics: { max_connections: 8, connection_timeout: 2s }\n");
	struct loris l[N];
	for (int i = 0; i < N; i++)
		loris_open(&l[i], m->port);
	uint64_t t0 = mono_ms(), next_byte = t0, next_try = t0 + 100;
	uint64_t first_ok = 0;
	unsigned tries = 0, failed = 0;
	/* until a scrape is answered and every slow client is closed */
	bool all_closed = false;
	while ((first_ok == 0 || !all_closed) && mono_ms() - t0 < 8000) {
		harness_pump(&h);
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
		bool send = mono_ms() >= next_byte;
		if (send)
			next_byte += 200;
		all_closed = true;
		for (int i = 0; i < N; i++) {
			loris_tick(&l[i], send);
			all_closed &= l[i].closed;
		}
		if (first_ok == 0 && mono_ms() >= next_try) {
			tries++;
			if (http_try(&h, m->port, "/metrics", 1000) == 200)
				first_ok = mono_ms() - t0;
			else
				failed++;
			next_try = mono_ms() + 100;
		}
	}
	unsigned closed = 0;
	uint64_t max_age = 0, min_age = UINT64_MAX;
	for (int i = 0; i < N; i++) {
		loris_tick(&l[i], false);
		if (!l[i].closed)
			continue;
		uint64_t age = l[i].closed_ms - l[i].opened_ms;
		closed++;
		/* the ones refused at once by the limit are not the point */
		if (age < 100)
			continue;
		if (age > max_age)
			max_age = age;
		if (age < min_age)
			min_age = age;
	}
	fprintf(stderr, "# %d slow clients over a limit of %d, connection_timeout "
		"2s: first scrape answered after %" PRIu64 " ms (%u tries, %u "
		"refused); %u slow clients closed, %" PRIu64 " cut for their age, "
		"ages %" PRIu64 "-%" PRIu64 " ms\n", N, LIMIT, first_ok, tries,
		failed, closed, m->cut_total, min_age, max_age);
	ck_assert_msg(first_ok > 0, "no scrape answered in 8 s");
	/* every slow client was cut for its age: the first LIMIT at once,
	 * the rest after waiting in the backlog for a free connection */
	ck_assert_uint_eq(m->cut_total, N);
	ck_assert_uint_eq(closed, N);
	ck_assert_uint_ge(min_age, 1900);
	for (int i = 0; i < N; i++)
		if (!l[i].closed)
			close(l[i].fd);
	stop_metrics(&h, m);
	harness_finish(&h);
}
END_TEST

/* Bucket edges: a bound is inclusive (le), one more nanosecond is the
 * next bucket, beyond the last is +Inf. */
START_TEST(histogram_buckets)
{
	struct stats_histogram hg = { 0 };
	stats_histogram_observe(&hg, 0);
	stats_histogram_observe(&hg, 1000);
	stats_histogram_observe(&hg, 1001);
	stats_histogram_observe(&hg, 1000000);
	stats_histogram_observe(&hg, 1000001);
	ck_assert_uint_eq(hg.buckets[0], 2);
	ck_assert_uint_eq(hg.buckets[1], 1);
	ck_assert_uint_eq(hg.buckets[STATS_LATENCY_BUCKETS - 1], 1);
	ck_assert_uint_eq(hg.buckets[STATS_LATENCY_BUCKETS], 1);
	ck_assert_uint_eq(hg.count, 5);
	ck_assert_uint_eq(hg.sum_ns, 2002002);

	/* Rendered cumulative, sum in seconds. */
	struct harness h;
	harness_init(&h, NULL);
	h.srv.stats.decide_latency = hg;
	struct metrics_text t = { 0 };
	ck_assert_int_eq(metrics_render(&t, &h.srv, 0), 0);
	ck_assert_double_eq(sample(t.p, "warmlane_decision_duration_seconds_bucket{le=\"1e-06\"}"), 2);
	ck_assert_double_eq(sample(t.p, "warmlane_decision_duration_seconds_bucket{le=\"2e-06\"}"), 3);
	ck_assert_double_eq(sample(t.p, "warmlane_decision_duration_seconds_bucket{le=\"0.001\"}"), 4);
	ck_assert_double_eq(sample(t.p, "warmlane_decision_duration_seconds_bucket{le=\"+Inf\"}"), 5);
	ck_assert_double_eq_tol(sample(t.p, "warmlane_decision_duration_seconds_sum"), 0.002002002, 1e-12);
	metrics_text_finish(&t);
	ck_assert_ptr_null(t.p);
	harness_finish(&h);
}
END_TEST

/* warmlane_affinity_entries counts live entries: once every caller has
 * been idle past affinity_ttl, a scrape shows 0 (and the expirations),
 * even though no lookup or insert has touched the map since. */
START_TEST(affinity_gauge_live_only)
{
	struct harness h;
	harness_init(&h, "policy: {affinity_ttl: 10s}\n"
			 "endpoints:\n"
			 "  - {backend: llm, server: gpu1}\n"
			 "  - {backend: llm, server: gpu2}\n");
	struct core *c = h.srv.route.core;
	struct core_rng rng;
	core_rng_seed(&rng, 1);
	const uint64_t t0 = 1000000;
	for (uint64_t i = 0; i < 21; i++) {
		struct core_request req = { .session = { true, 0x1000 + i } };
		struct core_decision d;
		core_decide(c, &req, t0 + i, &rng, &d);
		ck_assert_int_ge(d.endpoint, 0);
		/* the entry is made by the caller's success */
		struct core_feedback fb = { .endpoint = d.endpoint, .status = 200,
					    .tr_ms = 100, .retry_after_ms = -1,
					    .has_akey = d.has_akey, .akey = d.akey };
		ck_assert_int_eq(core_observe(c, &fb, t0 + i), 0);
	}
	/* The last key comes back once. */
	struct core_request again = { .session = { true, 0x1000 + 20 } };
	struct core_decision ad;
	core_decide(c, &again, t0 + 21, &rng, &ad);
	ck_assert_int_eq(ad.reason, CORE_REASON_AFFINITY);
	struct metrics_text t = { 0 };
	ck_assert_int_eq(metrics_render(&t, &h.srv, t0 + 5000), 0);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_entries"), 21);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_expirations_total"), 0);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_keys_back_total"), 1);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_keys_lapsed_total"), 0);
	metrics_text_finish(&t);

	/* Past the TTL of the first 10 only. */
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(metrics_render(&t, &h.srv, t0 + 10000 + 9), 0);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_entries"), 11);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_expirations_total"), 10);
	metrics_text_finish(&t);

	/* All expired. */
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(metrics_render(&t, &h.srv, t0 + 60000), 0);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_entries"), 0);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_expirations_total"), 21);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_keys_back_total"), 1);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_keys_lapsed_total"), 20);
	metrics_text_finish(&t);

	/* A backlog over the per-scrape bound (8192) is dropped over two
	 * scrapes: the second shows 0. */
	const uint64_t t1 = t0 + 100000;
	for (uint64_t i = 0; i < 10000; i++) {
		struct core_request req = { .session = { true, 0x100000 + i } };
		struct core_decision d;
		core_decide(c, &req, t1, &rng, &d);
		struct core_feedback fb = { .endpoint = d.endpoint, .status = 200,
					    .tr_ms = 100, .retry_after_ms = -1,
					    .has_akey = d.has_akey, .akey = d.akey };
		ck_assert_int_eq(core_observe(c, &fb, t1), 0);
	}
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(metrics_render(&t, &h.srv, t1 + 20000), 0);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_entries"), 10000 - 8192);
	metrics_text_finish(&t);
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(metrics_render(&t, &h.srv, t1 + 20000), 0);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_entries"), 0);
	ck_assert_double_eq(sample(t.p, "warmlane_affinity_expirations_total"), 10021);
	metrics_text_finish(&t);
	harness_finish(&h);
}
END_TEST

/* Each kind of row reads its own field: distinct values in every source
 * (the server's counters, the route's, the snapshot's, the server, the
 * endpoints), each found under its family and labels, none under a
 * neighbour's. */
START_TEST(rows_read_their_fields)
{
	struct harness h;
	harness_init(&h,
		     "endpoints:\n"
		     "  - {backend: llm, server: gpu1, models: [m1], weight: 2.5}\n"
		     "  - {backend: llm, server: gpu2, models: [m1], tier: 3}\n");
	struct stats *st = &h.srv.stats;
	st->conn_accepted = 101;
	st->conn_closed = 102;
	st->timeouts_idle = 103;
	st->reasons[ROUTE_SPILL] = 104;
	st->runtime_poll_failures = 105;
	struct route *r = &h.srv.route;
	r->fb.bad_akey = 106;
	r->log.errors[-HAPLOG_EVALUE] = 107;
	r->log.errors[1] = 108;
	r->probe.active = 109; /* a uint32_t */
	r->engine.info_failed = 110;
	r->shadow.duplicates = 111;
	r->budgets_full = 112;
	h.srv.max_conns = 113;
	struct snapshot_stats sn = { .writes = 114, .dropped_unknown = 115,
				     .corrupt = 116 };
	h.srv.snapshot = &sn;

	struct metrics_text t = { 0 };
	ck_assert_int_eq(metrics_render(&t, &h.srv, 0), 0);
	check_families(t.p);
	static const struct {
		const char *series;
		double v;
	} want[] = {
		{ "warmlane_spop_connections_accepted_total", 101 },
		{ "warmlane_spop_connections_closed_total", 102 },
		{ "warmlane_spop_timeouts_total{kind=\"idle\"}", 103 },
		{ "warmlane_spop_timeouts_total{kind=\"hello\"}", 0 },
		{ "warmlane_decisions_total{reason=\"spill\"}", 104 },
		{ "warmlane_runtime_poll_failures_total", 105 },
		{ "warmlane_runtime_polls_total", 0 },
		{ "warmlane_feedback_problems_total{cause=\"bad_akey\"}", 106 },
		{ "warmlane_feedback_problems_total{cause=\"bad_tr\"}", 0 },
		{ "warmlane_log_unparseable_total{error=\"value\"}", 107 },
		{ "warmlane_log_unparseable_total{error=\"empty\"}", 108 },
		{ "warmlane_key_probes_active", 109 },
		{ "warmlane_engine_info_reads_total{result=\"failed\"}", 110 },
		{ "warmlane_engine_info_reads_total{result=\"ok\"}", 0 },
		{ "warmlane_shadow_duplicates_total", 111 },
		{ "warmlane_retry_budget_overflow_total", 112 },
		{ "warmlane_spop_connections_limit", 113 },
		{ "warmlane_snapshot_writes_total", 114 },
		{ "warmlane_snapshot_dropped_entries{cause=\"unknown_endpoint\"}", 115 },
		{ "warmlane_snapshot_dropped_entries{cause=\"expired\"}", 0 },
		{ "warmlane_snapshot_corrupt_total", 116 },
		{ "warmlane_endpoints", 2 },
		{ "warmlane_endpoint_weight{backend=\"llm\",server=\"gpu1\"}", 2.5 },
		{ "warmlane_endpoint_tier{backend=\"llm\",server=\"gpu1\"}", 1 },
		{ "warmlane_endpoint_tier{backend=\"llm\",server=\"gpu2\"}", 3 },
		{ "warmlane_endpoint_key_dead{backend=\"llm\",server=\"gpu2\"}", 0 },
		{ "warmlane_endpoint_ttfb_samples{backend=\"llm\",server=\"gpu2\",kind=\"plain\"}", 0 },
		{ "warmlane_endpoint_engine_sample_age_seconds{backend=\"llm\",server=\"gpu2\"}", -1 },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		double v = sample(t.p, want[i].series);
		ck_assert_msg(v == want[i].v, "%s: %g, not %g", want[i].series,
			      v, want[i].v);
	}
	metrics_text_finish(&t);
	h.srv.snapshot = NULL;
	harness_finish(&h);
}
END_TEST

static Suite *metrics_suite(void)
{
	Suite *s = suite_create("agent-metrics");
	TCase *tc = tcase_create("metrics");
	tcase_add_test(tc, scrape_after_traffic);
	tcase_add_test(tc, routes_and_methods);
	tcase_add_test(tc, bound_address);
	tcase_add_test(tc, histogram_buckets);
	tcase_add_test(tc, rows_read_their_fields);
	tcase_add_test(tc, affinity_gauge_live_only);
	tcase_add_test(tc, slow_clients_default_limit);
	tcase_add_test(tc, slow_clients_over_limit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(metrics_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
