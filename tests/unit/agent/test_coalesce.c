/* test_coalesce.c - agent: spop.coalesce_us, frames that arrive within the window after a served one are answered in one pass. */
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coalesce.h"
#include "harness.h"
#include "../run.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One client on its own thread, blocking, while the test's thread runs
 * the agent's loop. */
struct peer {
	int fd;
	uv_async_t *done;
	uint64_t window_ns;
	bool sparse;                /* A, C, D 30 ms apart, each answered first */
	unsigned first_read_frames; /* whole frames in the first read after D */
	bool c_early;               /* C's answer came before D was sent */
	bool conclusive;            /* C and D were sent well within the window */
	bool failed;
	atomic_bool finished;
};

static void send_all(struct peer *p, const struct fb *f)
{
	size_t off = 0;
	while (off < f->len && !p->failed) {
		struct pollfd pf = { .fd = p->fd, .events = POLLOUT };
		if (poll(&pf, 1, 5000) != 1) {
			p->failed = true;
			break;
		}
		ssize_t n = write(p->fd, f->b + off, f->len - off);
		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno != EAGAIN)
			p->failed = true;
	}
}

/* Whole frames in buf[0..len). */
static unsigned whole_frames(const uint8_t *buf, size_t len)
{
	unsigned k = 0;
	size_t off = 0;
	while (len - off >= 4) {
		size_t n = ((size_t)buf[off] << 24) | ((size_t)buf[off + 1] << 16) |
			   ((size_t)buf[off + 2] << 8) | buf[off + 3];
		if (len - off - 4 < n)
			break;
		off += 4 + n;
		k++;
	}
	return k;
}

/* Reads until want whole frames are in; returns those of the first read. */
static unsigned recv_frames(struct peer *p, unsigned want)
{
	static _Thread_local uint8_t buf[65536];
	size_t len = 0;
	unsigned first = 0;
	bool any = false;
	while (!p->failed && whole_frames(buf, len) < want) {
		struct pollfd pf = { .fd = p->fd, .events = POLLIN };
		if (poll(&pf, 1, 5000) != 1) {
			p->failed = true;
			break;
		}
		ssize_t n = read(p->fd, buf + len, sizeof(buf) - len);
		if (n > 0) {
			len += (size_t)n;
			if (!any)
				first = whole_frames(buf, len);
			any = true;
		} else if (n == 0 || errno != EAGAIN) {
			p->failed = true;
		}
	}
	return first;
}

static void *peer_sparse(struct peer *p)
{
	static _Thread_local struct fb f;
	const char *const kv[] = { "model", "m", NULL };
	f.len = 0;
	fb_hello(&f, 16380);
	send_all(p, &f);
	recv_frames(p, 1);
	for (uint64_t i = 1; i <= 3; i++) {
		struct timespec ts = { 0, 30000000 };
		nanosleep(&ts, NULL);
		f.len = 0;
		fb_route(&f, i, 1, kv);
		send_all(p, &f);
		recv_frames(p, 1);
	}
	atomic_store(&p->finished, true);
	uv_async_send(p->done);
	return NULL;
}

static void *peer_run(void *arg)
{
	struct peer *p = arg;
	static _Thread_local struct fb f;
	const char *const kv[] = { "model", "m", NULL };
	if (p->sparse)
		return peer_sparse(p);

	/* The agent's pass that serves A comes soon after the one that
	 * answered HELLO, so it sleeps out the window; C and D, sent 2 ms
	 * apart meanwhile, are read after it in one pass. */
	uint64_t t0 = mono_ns();
	f.len = 0;
	fb_hello(&f, 16380);
	send_all(p, &f);
	recv_frames(p, 1);
	f.len = 0;
	fb_route(&f, 1, 1, kv);
	send_all(p, &f);
	recv_frames(p, 1);
	f.len = 0;
	fb_route(&f, 2, 1, kv);
	send_all(p, &f);
	/* 2 ms for C's answer: the agent, asleep, sends none. */
	struct pollfd pf = { .fd = p->fd, .events = POLLIN };
	p->c_early = poll(&pf, 1, 2) == 1;
	f.len = 0;
	fb_route(&f, 3, 1, kv);
	send_all(p, &f);
	p->conclusive = mono_ns() - t0 < p->window_ns / 2;
	p->first_read_frames = recv_frames(p, 2);
	atomic_store(&p->finished, true);
	uv_async_send(p->done);
	return NULL;
}

static void on_done(uv_async_t *a)
{
	(void)a;
}

/* One round on a new connection; false when it was not conclusive. */
static bool round_run(struct harness *h, uint64_t window_ns, bool sparse,
		      unsigned *first_read, bool *c_early)
{
	uv_async_t done;
	ck_assert_int_eq(uv_async_init(&h->loop, &done, on_done), 0);
	struct client *c = harness_client(h, 0);
	struct peer p = { .fd = c->fd, .done = &done, .window_ns = window_ns,
			  .sparse = sparse };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, peer_run, &p), 0);
	while (!atomic_load(&p.finished))
		uv_run(&h->loop, UV_RUN_ONCE);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(!p.failed, "the peer's I/O failed");
	uv_close((uv_handle_t *)&done, NULL);
	harness_pump(h);
	client_free(c);
	harness_pump(h);
	*first_read = p.first_read_frames;
	*c_early = p.c_early;
	return p.conclusive;
}

START_TEST(frames_in_window_share_a_pass)
{
	struct harness h;
	harness_init(&h, NULL);
	/* A window far above spop.coalesce_us's bound (1000), set directly,
	 * so that a loaded machine's scheduling delays stay inside it. */
	h.cfg.coalesce_us = 400000;
	struct coalesce co = { 0 };
	ck_assert_int_eq(coalesce_init(&co, &h.srv), 0);
	unsigned conclusive = 0;
	for (int i = 0; i < 5 && conclusive < 2; i++) {
		unsigned first;
		bool c_early;
		if (!round_run(&h, 400000000ull, false, &first, &c_early))
			continue;
		conclusive++;
		ck_assert_msg(!c_early, "C was answered within the window");
		ck_assert_msg(first == 2, "C and D were not answered in one write");
	}
	ck_assert_uint_ge(conclusive, 1);
	ck_assert_uint_ge(h.srv.stats.coalesce_waits, 1);
	coalesce_finish(&co);
	harness_finish(&h);
}
END_TEST

START_TEST(off_never_sleeps)
{
	struct harness h;
	harness_init(&h, "spop: { coalesce_us: 0 }\n");
	struct coalesce co = { 0 };
	ck_assert_int_eq(coalesce_init(&co, &h.srv), 0);
	unsigned first;
	bool c_early;
	round_run(&h, 400000000ull, false, &first, &c_early);
	ck_assert_uint_eq(h.srv.stats.coalesce_waits, 0);
	coalesce_finish(&co);
	harness_finish(&h);
}
END_TEST

START_TEST(sparse_frames_never_wait)
{
	struct harness h;
	harness_init(&h, "spop: { coalesce_us: 1000 }\n");
	ck_assert_uint_eq(h.cfg.coalesce_us, 1000);
	struct coalesce co = { 0 };
	ck_assert_int_eq(coalesce_init(&co, &h.srv), 0);
	/* Each frame comes 30 ms after the last was answered: the poll that
	 * reads it began more than the window before, so no pass waits. */
	unsigned first;
	bool c_early;
	round_run(&h, 0, true, &first, &c_early);
	ck_assert_uint_eq(h.srv.stats.coalesce_waits, 0);
	coalesce_finish(&co);
	harness_finish(&h);
}
END_TEST

START_TEST(full_pass_never_waits)
{
	struct harness h;
	harness_init(&h, NULL);
	h.cfg.coalesce_us = 400000;
	struct coalesce co = { 0 };
	ck_assert_int_eq(coalesce_init(&co, &h.srv), 0);
	struct client *c = harness_client(&h, 0);
	static uint8_t buf[4096];
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	client_send(&h, c, f->b, f->len);
	ck_assert_int_gt(client_frame(&h, c, buf, sizeof(buf), 2000), 0);
	/* COALESCE_FULL_PASS frames in one write, read in one pass: the
	 * pass paid for its wake-up, the next poll does not wait. */
	f->len = 0;
	const char *const kv[] = { "model", "m", NULL };
	for (uint64_t i = 0; i < COALESCE_FULL_PASS; i++)
		fb_route(f, i + 1, 1, kv);
	client_send(&h, c, f->b, f->len);
	for (int i = 0; i < COALESCE_FULL_PASS; i++)
		ck_assert_int_gt(client_frame(&h, c, buf, sizeof(buf), 2000), 0);
	harness_pump(&h);
	ck_assert_uint_eq(h.srv.stats.frames[STATS_FRAME_NOTIFY], COALESCE_FULL_PASS);
	ck_assert_uint_eq(h.srv.stats.coalesce_waits, 0);
	free(f);
	client_free(c);
	coalesce_finish(&co);
	harness_finish(&h);
}
END_TEST

/* The late share: sleeps that end a quarter window past their deadline
 * hold the window off (but for a probe every COALESCE_PROBE_EVERY
 * passes), and sleeps on time give it back. */
START_TEST(late_sleeps_hold_the_window)
{
	const uint64_t w = 250000, asked = 200000;
	struct coalesce c = { 0 };
	ck_assert(!coalesce_busy(&c));
	/* Late by exactly a quarter window is not late. */
	for (int i = 0; i < 100; i++)
		coalesce_note_sleep(&c, asked, asked + w / COALESCE_LATE_DIV, w);
	ck_assert_uint_eq(c.late, 0);
	ck_assert(!coalesce_busy(&c));
	/* One late sleep in 16 stays under 1 in COALESCE_BUSY_ONE_IN. */
	for (int i = 0; i < 400; i++)
		coalesce_note_sleep(&c, asked, i % 16 ? asked : 2 * asked, w);
	ck_assert(!coalesce_busy(&c));
	/* A run of late ones holds it, a probe each COALESCE_PROBE_EVERY. */
	for (int i = 0; i < 8; i++)
		coalesce_note_sleep(&c, asked, asked + w, w);
	unsigned held = 0, probes = 0;
	for (int i = 0; i < 4 * COALESCE_PROBE_EVERY; i++) {
		if (coalesce_busy(&c))
			held++;
		else
			probes++;
	}
	ck_assert_uint_eq(probes, 4);
	ck_assert_uint_eq(held, 4 * (COALESCE_PROBE_EVERY - 1));
	/* Probes that sleep on time give the window back. */
	unsigned n = 0;
	while (c.late > COALESCE_LATE_ONE / COALESCE_BUSY_ONE_IN && n < 100) {
		coalesce_note_sleep(&c, asked, asked + 1000, w);
		n++;
	}
	ck_assert_uint_lt(n, 100);
	ck_assert(!coalesce_busy(&c));
}
END_TEST

/* Held off, the loop polls at once: every pass that would have slept is
 * counted busy, and none waits. */
START_TEST(busy_cpu_polls_at_once)
{
	struct harness h;
	harness_init(&h, NULL);
	h.cfg.coalesce_us = 400000;
	struct coalesce co = { 0 };
	ck_assert_int_eq(coalesce_init(&co, &h.srv), 0);
	co.late = COALESCE_LATE_ONE; /* every recent sleep came back late */
	unsigned first;
	bool c_early;
	round_run(&h, 400000000ull, false, &first, &c_early);
	ck_assert_uint_eq(h.srv.stats.coalesce_waits, 0);
	ck_assert_uint_ge(h.srv.stats.coalesce_busy, 1);
	coalesce_finish(&co);
	harness_finish(&h);
}
END_TEST

int main(void)
{
	const TTest *const tests[] = {
		frames_in_window_share_a_pass, off_never_sleeps,
		sparse_frames_never_wait, full_pass_never_waits,
		late_sleeps_hold_the_window, busy_cpu_polls_at_once,
	};
	return unit_run(unit_suite("agent-coalesce", "window", tests,
				   sizeof(tests) / sizeof(tests[0])));
}
