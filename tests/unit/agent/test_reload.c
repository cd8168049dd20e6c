/* test_reload.c - agent: SIGHUP's file read off the loop, SPOP answered meanwhile, requests coalesced. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "reload.h"

/* The configuration file is a FIFO: the parse blocks in its read until
 * the test writes the file, so "a parse is running" is a state the test
 * holds for as long as it wants, without timing anything. */

static const char initial_yaml[] =
	"metrics: {listen: \"\"}\n"
	"runtime_api: {socket: \"\"}\n"
	"state: {file: \"\"}\n"
	"log_input: {path: \"\"}\n"
	"endpoints:\n"
	"  - {backend: llm, server: gpu1}\n";

static uint8_t frame_buf[65536];

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- a writer thread: the FIFO's content, once told to ---- */

struct writer {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned go; /* texts that may be written */
	const char *path;
	char *texts[2]; /* written one after the other, one open each */
	size_t n_texts;
	unsigned written;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 20;
	for (size_t i = 0; i < w->n_texts; i++) {
		/* Bounded: if the test never says go (a reload that blocks
		 * the loop), the file is written anyway and the test fails,
		 * not hangs. */
		pthread_mutex_lock(&w->mu);
		while (w->go <= i)
			if (pthread_cond_timedwait(&w->cv, &w->mu, &dl) != 0)
				break;
		pthread_mutex_unlock(&w->mu);
		int fd = open(w->path, O_WRONLY); /* until the parse opens it */
		if (fd < 0)
			return NULL;
		size_t len = strlen(w->texts[i]);
		for (size_t off = 0; off < len;) {
			ssize_t n = write(fd, w->texts[i] + off, len - off);
			if (n <= 0)
				break;
			off += (size_t)n;
		}
		close(fd);
		__atomic_add_fetch(&w->written, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void writer_start(struct writer *w, const char *path, char *a, char *b)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->path = path;
	w->texts[w->n_texts++] = a;
	if (b != NULL)
		w->texts[w->n_texts++] = b;
	ck_assert_int_eq(pthread_create(&w->th, NULL, writer_main, w), 0);
}

static void writer_go(struct writer *w)
{
	pthread_mutex_lock(&w->mu);
	w->go++;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void writer_join(struct writer *w)
{
	pthread_mutex_lock(&w->mu);
	w->go = (unsigned)w->n_texts;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}

/* ---- the parse's outcome, applied as main.c does ---- */

struct outcome {
	struct harness *h;
	unsigned calls;
	int rc;
	char err[4096];
	int apply_rc;
	struct reload_changes ch;
};

static void on_parsed(struct reload_parse *rp, int rc, struct config *next,
		      const char *err, void *arg)
{
	struct outcome *o = arg;
	o->calls++;
	o->rc = rc;
	snprintf(o->err, sizeof(o->err), "%s", err);
	if (rc < 0)
		return;
	struct reload_plan p;
	o->apply_rc = reload_prepare(&p, &o->h->srv, &o->h->cfg, next,
				     rp->opts->path);
	if (o->apply_rc == 0) {
		struct metrics *m = NULL;
		reload_commit(&p, &o->h->srv, &o->h->cfg, &m,
			      uv_now(&o->h->loop), &o->ch);
		ck_assert_ptr_null(m);
	}
}

/* Runs the loop until *v reaches n, for 20 s at most. */
static void wait_for(struct harness *h, const unsigned *v, unsigned n)
{
	uint64_t deadline = now_ms() + 20000;
	while (*v < n && now_ms() < deadline) {
		uv_run(&h->loop, UV_RUN_NOWAIT);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	ck_assert_uint_ge(*v, n);
}

static void wait_calls(struct harness *h, const struct outcome *o, unsigned n)
{
	wait_for(h, &o->calls, n);
	ck_assert_uint_eq(o->calls, n);
}

static void hello(struct harness *h, struct client *c)
{
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	client_send(h, c, f->b, f->len);
	free(f);
	ptrdiff_t n = client_frame(h, c, frame_buf, sizeof(frame_buf), 5000);
	ck_assert_int_gt(n, 0);
}

/* Sends one route NOTIFY; true when its ACK came back (bounded wait). */
static bool route_once(struct harness *h, struct client *c, uint64_t sid,
		       char *server, size_t cap)
{
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "session", "abc", NULL };
	fb_route(f, sid, 1, kv);
	client_send(h, c, f->b, f->len);
	free(f);
	ptrdiff_t n = client_frame(h, c, frame_buf, sizeof(frame_buf), 5000);
	if (n <= 0)
		return false;
	struct ack_vars v;
	answer_ack(frame_buf, (size_t)n, sid, 1, &v);
	const char *s = ack_str(&v, "server");
	snprintf(server, cap, "%s", s != NULL ? s : "");
	return true;
}

static char *deep_file(size_t levels)
{
	char *y = malloc(2 * levels + 2);
	ck_assert_ptr_nonnull(y);
	memset(y, '[', levels);
	memset(y + levels, ']', levels);
	y[2 * levels] = '\n';
	y[2 * levels + 1] = '\0';
	return y;
}

static char *good_file(const char *dir, const char *server)
{
	char *y = malloc(1024);
	ck_assert_ptr_nonnull(y);
	snprintf(y, 1024,
		 "listen: [\"unix:%s/s.sock\"]\n"
		 "metrics: {listen: \"\"}\n"
		 "runtime_api: {socket: \"\"}\n"
		 "state: {file: \"\"}\n"
		 "log_input: {path: \"\"}\n"
		 "endpoints:\n"
		 "  - {backend: llm, server: %s}\n",
		 dir, server);
	return y;
}

struct fixture {
	char dir[64], fifo[96];
	struct harness h;
	struct reload_opts opts;
	struct reload_parse rp;
	struct outcome out;
	struct client *c;
};

static void fixture_init(struct fixture *x)
{
	memset(x, 0, sizeof(*x));
	make_temp_dir(x->dir, sizeof(x->dir));
	snprintf(x->fifo, sizeof(x->fifo), "%s/warmlane.yaml", x->dir);
	ck_assert_int_eq(mkfifo(x->fifo, 0600), 0);
	harness_init(&x->h, initial_yaml);
	x->opts.path = x->fifo;
	x->out.h = &x->h;
	reload_parse_init(&x->rp, &x->h.loop, &x->opts, on_parsed, &x->out);
	x->c = harness_client(&x->h, 0);
	hello(&x->h, x->c);
}

static void fixture_finish(struct fixture *x)
{
	char sock[128];
	reload_parse_finish(&x->rp);
	client_free(x->c);
	harness_finish(&x->h);
	snprintf(sock, sizeof(sock), "%s/s.sock", x->dir);
	unlink(sock);
	unlink(x->fifo);
	rmdir(x->dir);
}

/* Issue 15: a reload with a pathological file used to block the loop
 * (139 s under load). While the parse runs, every NOTIFY is answered;
 * the file is then refused and the running configuration stays; a good
 * file afterwards applies. */
START_TEST(answers_while_parsing)
{
	struct fixture x;
	fixture_init(&x);
	char server[64];
	char *deep = deep_file(100000);
	struct writer w;
	writer_start(&w, x.fifo, deep, NULL);

	ck_assert_int_eq(reload_parse_request(&x.rp), 0);
	const unsigned sent = 200;
	unsigned answered = 0;
	for (unsigned i = 0; i < sent; i++)
		if (route_once(&x.h, x.c, 1 + i, server, sizeof(server)) &&
		    strcmp(server, "gpu1") == 0)
			answered++;
	/* All answered while the parse still waits for its file. */
	unsigned calls_meanwhile = x.out.calls;
	fprintf(stderr, "# %u of %u NOTIFYs answered while the reload parsed, callbacks meanwhile: %u\n",
		answered, sent, calls_meanwhile);
	ck_assert_uint_eq(calls_meanwhile, 0);
	ck_assert_uint_eq(answered, sent);
	ck_assert(x.rp.busy);

	writer_go(&w);
	wait_calls(&x.h, &x.out, 1);
	writer_join(&w);
	ck_assert_int_eq(x.out.rc, -EINVAL);
	ck_assert_msg(strstr(x.out.err, ":1:17: nested deeper than 16 levels") != NULL,
		      "%s", x.out.err);
	ck_assert_uint_eq(x.h.cfg.n_endpoints, 1);
	ck_assert_str_eq(x.h.cfg.endpoints[0].server, "gpu1");
	ck_assert(route_once(&x.h, x.c, 1000, server, sizeof(server)));
	ck_assert_str_eq(server, "gpu1");

	/* A good file applies. */
	char *good = good_file(x.dir, "gpu2");
	writer_start(&w, x.fifo, good, NULL);
	writer_go(&w);
	ck_assert_int_eq(reload_parse_request(&x.rp), 0);
	wait_calls(&x.h, &x.out, 2);
	writer_join(&w);
	ck_assert_msg(x.out.rc == 0, "%s", x.out.err);
	ck_assert_int_eq(x.out.apply_rc, 0);
	ck_assert_uint_eq(x.out.ch.added, 1);
	ck_assert_uint_eq(x.out.ch.removed, 1);
	ck_assert_str_eq(x.h.cfg.endpoints[0].server, "gpu2");
	ck_assert(route_once(&x.h, x.c, 1001, server, sizeof(server)));
	ck_assert_str_eq(server, "gpu2");
	ck_assert_uint_eq(x.rp.parses, 2);

	free(deep);
	free(good);
	fixture_finish(&x);
}
END_TEST

/* Requests during a parse: one more parse after it, whose file applies;
 * the superseded parse's result is dropped, the callback runs once. */
START_TEST(requests_coalesced)
{
	struct fixture x;
	fixture_init(&x);
	char *a = good_file(x.dir, "gpu2"), *b = good_file(x.dir, "gpu3");
	struct writer w;
	writer_start(&w, x.fifo, a, b);

	ck_assert_int_eq(reload_parse_request(&x.rp), 0);
	ck_assert_int_eq(reload_parse_request(&x.rp), 1);
	ck_assert_int_eq(reload_parse_request(&x.rp), 1);
	/* The second text once the first parse is over: a writer opening
	 * the FIFO earlier would reach the first reader. */
	writer_go(&w);
	wait_for(&x.h, &x.rp.parses, 1);
	ck_assert_uint_eq(x.out.calls, 0);
	ck_assert(x.rp.busy); /* the one more parse */
	writer_go(&w);
	wait_calls(&x.h, &x.out, 1);
	writer_join(&w);
	ck_assert_uint_eq(__atomic_load_n(&w.written, __ATOMIC_SEQ_CST), 2);
	ck_assert_uint_eq(x.rp.parses, 2);
	ck_assert(!x.rp.busy);
	ck_assert_msg(x.out.rc == 0, "%s", x.out.err);
	ck_assert_str_eq(x.h.cfg.endpoints[0].server, "gpu3");
	char server[64];
	ck_assert(route_once(&x.h, x.c, 1, server, sizeof(server)));
	ck_assert_str_eq(server, "gpu3");
	ck_assert_uint_eq(x.out.calls, 1);
	free(a);
	free(b);
	fixture_finish(&x);
}
END_TEST

/* Stopping during a parse: no callback, nothing leaked (ASan), the loop
 * ends once the parse has. */
START_TEST(stop_during_parse)
{
	struct fixture x;
	fixture_init(&x);
	char *a = good_file(x.dir, "gpu2");
	struct writer w;
	writer_start(&w, x.fifo, a, NULL);
	ck_assert_int_eq(reload_parse_request(&x.rp), 0);
	reload_parse_finish(&x.rp);
	ck_assert_int_eq(reload_parse_request(&x.rp), -ECANCELED);
	writer_go(&w);
	uint64_t deadline = now_ms() + 20000;
	while (x.rp.busy && now_ms() < deadline) {
		uv_run(&x.h.loop, UV_RUN_NOWAIT);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	/* A parse cancelled before it began never opens the FIFO: a reader
	 * of the test's own lets the writer finish either way. */
	int rfd = open(x.fifo, O_RDONLY | O_NONBLOCK);
	ck_assert_int_ge(rfd, 0);
	writer_join(&w);
	close(rfd);
	ck_assert(!x.rp.busy);
	ck_assert_uint_eq(x.out.calls, 0);
	ck_assert_str_eq(x.h.cfg.endpoints[0].server, "gpu1");
	free(a);
	fixture_finish(&x);
}
END_TEST

/* Failover tiers on reload: a configured server takes its entry's new
 * tier, a server HAProxy alone has takes its backend's new default
 * (backends[]), keeping their statistics; the configured server its new
 * slots, the other the maxconn HAProxy gave it. */
START_TEST(reload_applies_tiers)
{
	struct harness h;
	harness_init(&h, initial_yaml);
	struct route *r = &h.srv.route;
	/* api/p1: HAProxy's alone, as a poll adds it. */
	ck_assert_int_eq(route_server_add(r, core_str_c("api"), core_str_c("p1"), 0), 1);
	int g = core_endpoint_find(r->core, core_str_c("llm"), core_str_c("gpu1"),
				   (struct core_str){ NULL, 0 });
	int p = core_endpoint_find(r->core, core_str_c("api"), core_str_c("p1"),
				   (struct core_str){ NULL, 0 });
	ck_assert_int_ge(g, 0);
	ck_assert_int_ge(p, 0);
	struct core_endpoint_info in;
	ck_assert_int_eq(core_endpoint_info(r->core, p, 0, &in), 0);
	ck_assert_uint_eq(in.tier, 1);
	ck_assert_int_eq(core_endpoint_limit(r->core, p, 5), 0);

	char dir[64], next_yaml[512], sock[128];
	make_temp_dir(dir, sizeof(dir));
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(next_yaml, sizeof(next_yaml),
		"listen: [\"unix:%s\"]\n"
		"metrics: {listen: \"\"}\n"
		"runtime_api: {socket: \"\"}\n"
		"state: {file: \"\"}\n"
		"log_input: {path: \"\"}\n"
		"backends: [{name: api, tier: 2}]\n"
		"endpoints:\n"
		"  - {backend: llm, server: gpu1, tier: 3, slots: 2}\n", sock);
	struct config next;
	char err[1024];
	ck_assert_int_eq(config_init(&next), 0);
	ck_assert_int_eq(config_load_data(&next, "t.yaml", next_yaml, strlen(next_yaml),
					  err, sizeof(err)), 0);
	struct reload_plan plan;
	ck_assert_int_eq(reload_prepare(&plan, &h.srv, &h.cfg, &next, "t.yaml"), 0);
	struct metrics *m = NULL;
	struct reload_changes ch;
	reload_commit(&plan, &h.srv, &h.cfg, &m, uv_now(&h.loop), &ch);
	ck_assert_uint_eq(ch.failed, 0);
	ck_assert_uint_eq(ch.updated, 2);
	ck_assert_int_eq(core_endpoint_info(r->core, g, 0, &in), 0);
	ck_assert_uint_eq(in.tier, 3);
	ck_assert_uint_eq(in.slots, 2);
	ck_assert_int_eq(core_endpoint_info(r->core, p, 0, &in), 0);
	ck_assert_uint_eq(in.tier, 2);
	ck_assert_uint_eq(in.slots, 5);
	harness_finish(&h);
	unlink(sock);
	rmdir(dir);
}
END_TEST

static Suite *reload_suite(void)
{
	Suite *s = suite_create("agent-reload");
	TCase *tc = tcase_create("reload");
	tcase_add_test(tc, answers_while_parsing);
	tcase_add_test(tc, requests_coalesced);
	tcase_add_test(tc, stop_during_parse);
	tcase_add_test(tc, reload_applies_tiers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(reload_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
