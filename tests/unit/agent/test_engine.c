/* test_engine.c - agent: engine load polls and descriptions (engine.c) against a fake engine on loopback TCP in the same loop. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config.h"
#include "engine.h"
#include "probe.h"
#include "route.h"

/* What the fake engine answers, by path. */
static const char metrics_ok[] =
	"# HELP llamacpp:requests_processing Number of requests processing\n"
	"# TYPE llamacpp:requests_processing gauge\n"
	"llamacpp:requests_processing 3\n"
	"llamacpp:requests_deferred 4\n";
static const char props_a[] = "{\"model_path\":\"/m/a.gguf\",\"build_info\":\"b1\","
			      "\"default_generation_settings\":{\"n_ctx\":4096}}";
static const char props_b[] = "{\"model_path\":\"/m/b.gguf\",\"build_info\":\"b1\","
			      "\"default_generation_settings\":{\"n_ctx\":4096}}";

struct client {
	uv_tcp_t h;
	char buf[4096];
	size_t n;
	bool answered;
	char *body;      /* owned: what was written */
};

static void on_closed(uv_handle_t *h)
{
	struct client *c = h->data;
	if (c != NULL) {
		free(c->body);
		free(c);
	}
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	struct client *c = h->data;
	(void)hint;
	*b = uv_buf_init(c->buf + c->n, (unsigned)(sizeof(c->buf) - 1 - c->n));
}

static void on_written(uv_write_t *w, int status)
{
	(void)status;
	if (!uv_is_closing((uv_handle_t *)w->handle))
		uv_close((uv_handle_t *)w->handle, on_closed);
	free(w);
}

static void answer(struct client *c, const char *status, const char *body, size_t len)
{
	char head[256];
	int hn = snprintf(head, sizeof(head),
			  "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			  status, len);
	c->body = malloc((size_t)hn + len);
	ck_assert_ptr_nonnull(c->body);
	memcpy(c->body, head, (size_t)hn);
	memcpy(c->body + hn, body, len);
	uv_write_t *w = calloc(1, sizeof(*w));
	ck_assert_ptr_nonnull(w);
	uv_buf_t b = uv_buf_init(c->body, (unsigned)((size_t)hn + len));
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
	if (strncmp(c->buf, "GET /ok ", 8) == 0) {
		answer(c, "200 OK", metrics_ok, strlen(metrics_ok));
	} else if (strncmp(c->buf, "GET /bad ", 9) == 0) {
		static const char bad[] = "llamacpp:requests_processing 1\nllamacpp:requests_deferred{ 2\n";
		answer(c, "200 OK", bad, strlen(bad));
	} else if (strncmp(c->buf, "GET /big ", 9) == 0) {
		size_t len = 2 * ENGINE_BODY_MAX;
		char *big = malloc(len);
		ck_assert_ptr_nonnull(big);
		memset(big, '#', len);
		answer(c, "200 OK", big, len);
		free(big);
	} else if (strncmp(c->buf, "GET /props-a ", 13) == 0) {
		answer(c, "200 OK", props_a, strlen(props_a));
	} else if (strncmp(c->buf, "GET /props-b ", 13) == 0) {
		answer(c, "200 OK", props_b, strlen(props_b));
	} else if (strncmp(c->buf, "GET /hang ", 10) == 0) {
		/* no answer: the poll's timeout ends it */
	} else {
		answer(c, "404 Not Found", "no", 2);
	}
}

static void on_conn(uv_stream_t *srv, int status)
{
	ck_assert_int_eq(status, 0);
	struct client *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	uv_tcp_init(srv->loop, &c->h);
	c->h.data = c;
	ck_assert_int_eq(uv_accept(srv, (uv_stream_t *)&c->h), 0);
	uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read);
}

static void close_all(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, h->type == UV_TCP && h->data != NULL ? on_closed : NULL);
}

struct run {
	uv_timer_t t;
	struct route *r;
	uint64_t deadline;
};

static struct core_endpoint_info info_of(struct route *r, const char *server)
{
	struct core_endpoint_info in;
	int i = core_endpoint_find(r->core, core_str_c("be"), core_str_c(server),
				   core_str_c(""));
	ck_assert_int_ge(i, 0);
	ck_assert_int_eq(core_endpoint_info(r->core, i, 0, &in), 0);
	return in;
}

static const char *const failing[] = { "bad", "nf", "big", "hang", "refused" };
#define N_FAILING 5

/* Every endpoint's poll ended twice (the hanging one by its timeout), and
 * both descriptions were read. */
static bool all_ended(struct route *r)
{
	if (info_of(r, "ok").engine_polls_ok < 2 || r->engine.info_ok < 2)
		return false;
	for (int i = 0; i < N_FAILING; i++) {
		struct core_endpoint_info in = info_of(r, failing[i]);
		if (in.engine_polls_ok + in.engine_polls_failed < 2)
			return false;
	}
	return true;
}

static void on_check(uv_timer_t *t)
{
	struct run *w = (struct run *)t;
	if (all_ended(w->r) || uv_now(t->loop) >= w->deadline)
		uv_stop(t->loop);
}

/* One engine per path: a load read, a malformed body, a 404, a body over
 * the bound, one that never answers, one refusing connections; two
 * descriptions of one model, different. Each poll ends, none hangs the
 * loop, and only the good one feeds the in-flight view. */
START_TEST(polls_and_failures)
{
	uv_loop_t loop;
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	uv_tcp_t srv;
	uv_tcp_init(&loop, &srv);
	srv.data = NULL;
	struct sockaddr_in a;
	uv_ip4_addr("127.0.0.1", 0, &a);
	ck_assert_int_eq(uv_tcp_bind(&srv, (const struct sockaddr *)&a, 0), 0);
	ck_assert_int_eq(uv_listen((uv_stream_t *)&srv, 16, on_conn), 0);
	struct sockaddr_storage ss;
	int sl = sizeof(ss);
	ck_assert_int_eq(uv_tcp_getsockname(&srv, (struct sockaddr *)&ss, &sl), 0);
	int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);

	/* A port nobody listens on: bound, then closed. */
	uv_tcp_t dead;
	uv_tcp_init(&loop, &dead);
	dead.data = NULL;
	ck_assert_int_eq(uv_tcp_bind(&dead, (const struct sockaddr *)&a, 0), 0);
	sl = sizeof(ss);
	ck_assert_int_eq(uv_tcp_getsockname(&dead, (struct sockaddr *)&ss, &sl), 0);
	int dead_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	uv_close((uv_handle_t *)&dead, NULL);

	char yaml[2048], err[2048];
	snprintf(yaml, sizeof(yaml),
		 "engine: {poll_interval: 50ms, timeout: 300ms, info_interval: 1s}\n"
		 "endpoints:\n"
		 "  - {backend: be, server: ok, models: [m], engine_metrics: \"http://127.0.0.1:%d/ok\",\n"
		 "     engine_info: \"http://127.0.0.1:%d/props-a\"}\n"
		 "  - {backend: be, server: bad, models: [m], engine_metrics: \"http://127.0.0.1:%d/bad\",\n"
		 "     engine_info: \"http://127.0.0.1:%d/props-b\"}\n"
		 "  - {backend: be, server: nf, engine_metrics: \"http://127.0.0.1:%d/none\"}\n"
		 "  - {backend: be, server: big, engine_metrics: \"http://127.0.0.1:%d/big\"}\n"
		 "  - {backend: be, server: hang, engine_metrics: \"http://127.0.0.1:%d/hang\"}\n"
		 "  - {backend: be, server: refused, engine_metrics: \"http://127.0.0.1:%d/ok\"}\n"
		 "  - {backend: be, server: plain}\n",
		 port, port, port, port, port, port, port, dead_port);
	struct config cfg;
	struct route r;
	ck_assert_int_eq(config_init(&cfg), 0);
	ck_assert_msg(config_load_data(&cfg, "t.yaml", yaml, strlen(yaml), err,
				       sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	struct probe p;
	struct engine en;
	ck_assert_int_eq(probe_init(&p, &loop, &r, &cfg), 0);
	ck_assert_int_eq(engine_init(&en, &loop, &r, &cfg, &p), 0);
	/* A bounded wait: two polls of each, the hanging one included (300 ms
	 * each), well within 10 s. */
	struct run w = { .r = &r, .deadline = uv_now(&loop) + 10000 };
	uv_timer_init(&loop, &w.t);
	uv_timer_start(&w.t, on_check, 10, 10);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_msg(all_ended(&r), "not every poll ended in 10 s");

	struct core_endpoint_info in = info_of(&r, "ok");
	ck_assert(in.engine_fresh);
	ck_assert_uint_eq(in.engine_load, 7);
	ck_assert_uint_eq(in.in_flight, 7);
	/* 3 running while 4 wait: its slots (policy.place_slots) */
	ck_assert_uint_eq(in.slots, 3);
	ck_assert_uint_ge(in.engine_polls_ok, 2);
	ck_assert_uint_eq(in.engine_polls_failed, 0);
	for (size_t i = 0; i < N_FAILING; i++) {
		in = info_of(&r, failing[i]);
		ck_assert_msg(!in.engine_fresh && in.in_flight == 0 && in.slots == 0, "%s",
			      failing[i]);
		ck_assert_msg(in.engine_polls_failed >= 1 && in.engine_polls_ok == 0,
			      "%s: failed %llu", failing[i],
			      (unsigned long long)in.engine_polls_failed);
	}
	in = info_of(&r, "plain");
	ck_assert(in.engine_polls_ok == 0 && in.engine_polls_failed == 0);
	/* The descriptions: two fingerprints, one model: both flagged. */
	struct core_endpoint_info ia = info_of(&r, "ok"), ib = info_of(&r, "bad");
	ck_assert_uint_ne(ia.artefact, 0);
	ck_assert_uint_ne(ib.artefact, 0);
	ck_assert_uint_ne(ia.artefact, ib.artefact);
	ck_assert(ia.artefact_mismatch && ib.artefact_mismatch);
	ck_assert(!info_of(&r, "nf").artefact_mismatch);
	ck_assert_uint_ge(r.engine.info_ok, 2);
	/* The hanging engine's polls overlapped ticks: not sent again. */
	ck_assert_uint_ge(r.engine.polls_overlapped, 1);

	probe_finish(&p);
	engine_finish(&en);
	uv_walk(&loop, close_all, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("polls");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, polls_and_failures);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
