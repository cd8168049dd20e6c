/* test_probe.c - agent: key probes (probe.c) against a fake HAProxy probe frontend on a unix socket in the same loop. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "probe.h"
#include "route.h"

/* What the fake frontend saw of each probe. */
struct seen {
	char line[256];    /* request line */
	char key[64];      /* x-warmlane-probe-key */
	char backend[64];
	char server[64];
	bool authorization;
};

#define MAX_SEEN 16
static struct seen seen[MAX_SEEN];
static int n_seen;

struct client {
	uv_pipe_t h;
	char buf[8192];
	size_t n;
	bool answered;
};

static void on_closed(uv_handle_t *h)
{
	if (h->data != NULL)
		free(h->data);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	struct client *c = h->data;
	(void)hint;
	*b = uv_buf_init(c->buf + c->n, (unsigned)(sizeof(c->buf) - 1 - c->n));
}

/* The value of header name (lower case) in the head, into out. */
static void header(const char *head, const char *name, char *out, size_t cap)
{
	out[0] = '\0';
	size_t n = strlen(name);
	for (const char *p = strstr(head, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n")) {
		const char *h = p + 2;
		if (strncasecmp(h, name, n) == 0 && h[n] == ':') {
			const char *v = h + n + 1;
			while (*v == ' ')
				v++;
			const char *e = strstr(v, "\r\n");
			size_t len = e != NULL ? (size_t)(e - v) : strlen(v);
			snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), v);
			return;
		}
	}
}

static void on_written(uv_write_t *w, int status)
{
	(void)status;
	uv_close((uv_handle_t *)w->handle, on_closed);
	free(w);
}

static void reply(struct client *c, const char *status)
{
	static char msg[256];
	snprintf(msg, sizeof(msg),
		 "HTTP/1.1 %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
		 status);
	uv_write_t *w = calloc(1, sizeof(*w));
	ck_assert_ptr_nonnull(w);
	uv_buf_t b = uv_buf_init(msg, (unsigned)strlen(msg));
	ck_assert_int_eq(uv_write(w, (uv_stream_t *)&c->h, &b, 1, on_written), 0);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct client *c = s->data;
	(void)b;
	if (n < 0) {
		if (!uv_is_closing((uv_handle_t *)s))
			uv_close((uv_handle_t *)s, on_closed);
		return;
	}
	c->n += (size_t)n;
	c->buf[c->n] = '\0';
	if (c->answered || strstr(c->buf, "\r\n\r\n") == NULL)
		return;
	c->answered = true;
	ck_assert_int_lt(n_seen, MAX_SEEN);
	struct seen *x = &seen[n_seen++];
	const char *eol = strstr(c->buf, "\r\n");
	snprintf(x->line, sizeof(x->line), "%.*s", (int)(eol - c->buf), c->buf);
	header(c->buf, "x-warmlane-probe-key", x->key, sizeof(x->key));
	header(c->buf, "x-warmlane-probe-backend", x->backend, sizeof(x->backend));
	header(c->buf, "x-warmlane-probe-server", x->server, sizeof(x->server));
	char auth[64];
	header(c->buf, "authorization", auth, sizeof(auth));
	x->authorization = auth[0] != '\0';
	if (strcmp(x->key, "good") == 0)
		reply(c, "200 OK");
	else if (strcmp(x->key, "nope") == 0)
		reply(c, "404 Not Found"); /* not a refusal of the key */
	else if (strcmp(x->key, "bad") == 0)
		reply(c, "401 Unauthorized");
	else if (strcmp(x->key, "forbid") == 0)
		reply(c, "403 Forbidden");
	else if (strcmp(x->key, "busy") == 0)
		reply(c, "503 Service Unavailable");
	/* "hang": no answer, the probe's timeout ends it */
}

static void on_conn(uv_stream_t *srv, int status)
{
	ck_assert_int_eq(status, 0);
	struct client *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	uv_pipe_init(srv->loop, &c->h, 0);
	c->h.data = c;
	ck_assert_int_eq(uv_accept(srv, (uv_stream_t *)&c->h), 0);
	uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read);
}

struct wait {
	uv_timer_t t;
	struct route *r;
	uint64_t want;
	uint64_t deadline;
};

static uint64_t results(const struct route *r)
{
	uint64_t n = 0;
	for (int k = 0; k < CORE_PROBE_COUNT; k++)
		n += r->probe.results[k];
	return n;
}

/* Stops the loop once want results are in, or at the deadline. */
static void on_check(uv_timer_t *t)
{
	struct wait *w = (struct wait *)t;
	if (results(w->r) >= w->want || uv_now(t->loop) >= w->deadline)
		uv_stop(t->loop);
}

static void close_all(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, h->type == UV_NAMED_PIPE && h->data != NULL ? on_closed : NULL);
}

static const char *const keys[] = { "good", "nope", "bad", "forbid", "busy", "hang" };
#define N_KEYS 6

/* Runs one round of probes of every key against target (listening on
 * sock when non-NULL) and returns when all are answered. */
static void run_probes(const char *sock, bool listen_there, struct config *cfg,
		       struct route *r)
{
	char yaml[1024], err[2048];
	snprintf(yaml, sizeof(yaml),
		 "key_probe: {target: \"unix:%s\", timeout: 300ms, path: /v1/models}\n"
		 "endpoints:\n  - {backend: be, server: s1, keys: [good, nope, bad, forbid, busy, hang]}\n",
		 sock);
	ck_assert_int_eq(config_init(cfg), 0);
	ck_assert_msg(config_load_data(cfg, "t.yaml", yaml, strlen(yaml), err,
				       sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(route_init(r, cfg), 0);

	uv_loop_t loop;
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	uv_pipe_t srv;
	if (listen_there) {
		unlink(sock);
		uv_pipe_init(&loop, &srv, 0);
		srv.data = NULL;
		ck_assert_int_eq(uv_pipe_bind(&srv, sock), 0);
		ck_assert_int_eq(uv_listen((uv_stream_t *)&srv, 16, on_conn), 0);
	}
	/* A client's 401 on each key: suspects, handed to the prober. */
	for (int i = 0; i < N_KEYS; i++) {
		struct core_feedback fb = {
			.endpoint = core_endpoint_find(r->core, core_str_c("be"),
						       core_str_c("s1"),
						       core_str_c(keys[i])),
			.status = 401, .tr_ms = -1, .retry_after_ms = -1,
		};
		ck_assert_int_ge(fb.endpoint, 0);
		ck_assert_int_eq(core_observe(r->core, &fb, uv_now(&loop)), 0);
	}
	struct probe p;
	ck_assert_int_eq(probe_init(&p, &loop, r, cfg), 0);
	struct wait w = { .r = r, .want = N_KEYS, .deadline = uv_now(&loop) + 5000 };
	uv_timer_init(&loop, &w.t);
	uv_timer_start(&w.t, on_check, 5, 5);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_uint_eq(r->probe.active, 0);
	probe_finish(&p);
	uv_walk(&loop, close_all, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	if (listen_there)
		unlink(sock);
}

static struct core_endpoint_info info_of(struct route *r, const char *key)
{
	struct core_endpoint_info in;
	int i = core_endpoint_find(r->core, core_str_c("be"), core_str_c("s1"),
				   core_str_c(key));
	ck_assert_int_eq(core_endpoint_info(r->core, i, 0, &in), 0);
	return in;
}

START_TEST(classify)
{
	ck_assert_int_eq(probe_classify(200), CORE_PROBE_ACCEPTED);
	ck_assert_int_eq(probe_classify(204), CORE_PROBE_ACCEPTED);
	ck_assert_int_eq(probe_classify(302), CORE_PROBE_ACCEPTED);
	ck_assert_int_eq(probe_classify(404), CORE_PROBE_ACCEPTED);
	ck_assert_int_eq(probe_classify(429), CORE_PROBE_ACCEPTED);
	ck_assert_int_eq(probe_classify(401), CORE_PROBE_REFUSED);
	ck_assert_int_eq(probe_classify(403), CORE_PROBE_REFUSED);
	ck_assert_int_eq(probe_classify(500), CORE_PROBE_INCONCLUSIVE);
	ck_assert_int_eq(probe_classify(503), CORE_PROBE_INCONCLUSIVE);
	ck_assert_int_eq(probe_classify(0), CORE_PROBE_INCONCLUSIVE);
	ck_assert_int_eq(probe_classify(99), CORE_PROBE_INCONCLUSIVE);
	ck_assert_int_eq(probe_classify(600), CORE_PROBE_INCONCLUSIVE);
}
END_TEST

START_TEST(probes_through_a_frontend)
{
	char sock[108];
	snprintf(sock, sizeof(sock), "/tmp/warmlane-test-probe-%d.sock", (int)getpid());
	struct config cfg;
	struct route r;
	n_seen = 0;
	run_probes(sock, true, &cfg, &r);

	/* What was sent: the configured request, the three headers, no
	 * credential (HAProxy adds it from its map). */
	ck_assert_int_eq(n_seen, N_KEYS);
	for (int i = 0; i < n_seen; i++) {
		ck_assert_str_eq(seen[i].line, "GET /v1/models HTTP/1.1");
		ck_assert_str_eq(seen[i].backend, "be");
		ck_assert_str_eq(seen[i].server, "s1");
		ck_assert(!seen[i].authorization);
	}
	/* What each answer did. */
	struct core_endpoint_info in = info_of(&r, "good");
	ck_assert(!in.key_dead && !in.key_suspect);
	ck_assert_uint_eq(in.probes[CORE_PROBE_ACCEPTED], 1);
	in = info_of(&r, "nope");
	ck_assert(!in.key_dead && !in.key_suspect);
	in = info_of(&r, "bad");
	ck_assert(in.key_dead);
	ck_assert_uint_eq(in.probes[CORE_PROBE_REFUSED], 1);
	ck_assert(info_of(&r, "forbid").key_dead);
	in = info_of(&r, "busy");
	ck_assert(!in.key_dead && in.key_suspect);
	ck_assert_uint_eq(in.probes[CORE_PROBE_INCONCLUSIVE], 1);
	in = info_of(&r, "hang");
	ck_assert(!in.key_dead && in.key_suspect);
	ck_assert_uint_eq(in.probes[CORE_PROBE_INCONCLUSIVE], 1);
	ck_assert_uint_eq(r.probe.results[CORE_PROBE_ACCEPTED], 2);
	ck_assert_uint_eq(r.probe.results[CORE_PROBE_REFUSED], 2);
	ck_assert_uint_eq(r.probe.results[CORE_PROBE_INCONCLUSIVE], 2);
	ck_assert_uint_eq(r.probe.transport_errors, 1); /* the timeout */
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

START_TEST(no_frontend_kills_nothing)
{
	char sock[108];
	snprintf(sock, sizeof(sock), "/tmp/warmlane-test-probe-none-%d.sock", (int)getpid());
	unlink(sock);
	struct config cfg;
	struct route r;
	run_probes(sock, false, &cfg, &r);
	ck_assert_uint_eq(r.probe.results[CORE_PROBE_INCONCLUSIVE], N_KEYS);
	ck_assert_uint_eq(r.probe.transport_errors, N_KEYS);
	for (int i = 0; i < N_KEYS; i++)
		ck_assert(!info_of(&r, keys[i]).key_dead);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("probe");
	TCase *tc = tcase_create("probe");
	tcase_add_test(tc, classify);
	tcase_add_test(tc, probes_through_a_frontend);
	tcase_add_test(tc, no_frontend_kills_nothing);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
