/* test_ctl.c - agent: the command socket (ctl.c) over a real unix socket: every command, -json, state left alone, bad input. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "ctl.h"
#include "harness.h"
#include "route.h"

static const char *const yaml3 =
	"endpoints:\n"
	"  - { backend: llm, server: a }\n"
	"  - { backend: llm, server: b }\n"
	"  - { backend: llm, server: c }\n";

struct fix {
	struct harness h;
	struct ctl *ctl;
	char dir[128];
	char path[160];
};

static void fix_init(struct fix *f, const char *yaml)
{
	harness_init(&f->h, yaml);
	make_temp_dir(f->dir, sizeof(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/ctl.sock", f->dir);
	char err[512];
	int r = ctl_create(&f->ctl, &f->h.loop, &f->h.srv, f->path, 0600,
			   "/etc/warmlane/test.yaml", err, sizeof(err));
	ck_assert_msg(r == 0, "ctl_create: %s", err);
}

static void fix_finish(struct fix *f)
{
	ctl_destroy(f->ctl);
	harness_finish(&f->h);
	rmdir(f->dir);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int ctl_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	int fl = fcntl(fd, F_GETFL);
	ck_assert_int_eq(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
	return fd;
}

static void pump(struct harness *h)
{
	uv_run(&h->loop, UV_RUN_NOWAIT);
	poll(NULL, 0, 1);
}

/* Writes all of p, pumping the loop while the socket is full. */
static void ctl_write(struct harness *h, int fd, const char *p, size_t n)
{
	uint64_t deadline = mono_ms() + 5000;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		ck_assert_msg(w < 0 && (errno == EAGAIN || errno == EINTR),
			      "write: %s", strerror(errno));
		ck_assert_msg(mono_ms() < deadline, "the agent does not read");
		pump(h);
	}
}

/* Reads until the agent closes (EOF) or fails the test after 5 s. Returns
 * the length read into out (NUL-terminated, cap > 0). */
static size_t ctl_read_all(struct harness *h, int fd, char *out, size_t cap)
{
	size_t len = 0;
	uint64_t deadline = mono_ms() + 5000;
	for (;;) {
		ssize_t n = read(fd, out + len, cap - 1 - len);
		if (n == 0)
			break;
		if (n > 0) {
			len += (size_t)n;
			ck_assert_msg(len < cap - 1, "answer larger than the test's buffer");
			continue;
		}
		ck_assert_msg(errno == EAGAIN || errno == EINTR || errno == ECONNRESET,
			      "read: %s", strerror(errno));
		if (errno == ECONNRESET)
			break;
		ck_assert_msg(mono_ms() < deadline, "no EOF from the agent in 5 s");
		pump(h);
	}
	out[len] = '\0';
	return len;
}

/* One connection: sends what, ends its side, reads every answer. */
static char *talk_n(struct fix *f, const char *what, size_t n)
{
	static char buf[4 * CTL_ANSWER_MAX];
	int fd = ctl_connect(f->path);
	ctl_write(&f->h, fd, what, n);
	shutdown(fd, SHUT_WR);
	ctl_read_all(&f->h, fd, buf, sizeof(buf));
	close(fd);
	pump(&f->h);
	return buf;
}

static char *talk(struct fix *f, const char *what)
{
	return talk_n(f, what, strlen(what));
}

/* ---- driving the core as HAProxy would ---- */

static uint64_t decide(struct fix *f, const char *session, struct route_decision *out)
{
	struct route_request req;
	memset(&req, 0, sizeof(req));
	for (int i = 0; i < ROUTE_ARG_COUNT; i++)
		req.args[i] = spop_data_null();
	if (session != NULL)
		req.args[ROUTE_ARG_SESSION] = spop_data_string(session, strlen(session));
	req.now_ms = uv_now(&f->h.loop);
	route_decide(&f->h.srv.route, &req, out);
	return out->akey;
}

static void feedback(struct fix *f, const char *server, int status, int64_t tr,
		     const struct route_decision *d)
{
	struct route_feedback fb;
	memset(&fb, 0, sizeof(fb));
	for (int i = 0; i < ROUTE_FB_COUNT; i++)
		fb.args[i] = spop_data_null();
	char akey[17];
	fb.args[ROUTE_FB_SERVER] = spop_data_string(server, strlen(server));
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(status);
	fb.args[ROUTE_FB_TR] = spop_data_int64(tr);
	if (d != NULL && d->has_akey) {
		snprintf(akey, sizeof(akey), "%016" PRIx64, d->akey);
		fb.args[ROUTE_FB_AKEY] = spop_data_string(akey, 16);
	}
	fb.now_ms = uv_now(&f->h.loop);
	fb.now_unix_s = time(NULL);
	route_feedback(&f->h.srv.route, &fb);
}

/* Every piece of state an answer or a later decision can depend on, as
 * text: endpoints, counters, the map (oldest first), the RNG. */
static int dump_entry(void *arg, const struct core_affinity_record *rec)
{
	char *s = arg;
	size_t n = strlen(s);
	snprintf(s + n, 65536 - n, "%016" PRIx64 "->%d idle=%" PRIu64 "\n",
		 rec->akey, rec->endpoint, rec->idle_ms);
	return 0;
}

static void dump_state(struct fix *f, uint64_t now, char *s)
{
	const struct core *c = f->h.srv.route.core;
	s[0] = '\0';
	size_t n = 0;
	for (int i = core_endpoint_next(c, -1); i >= 0; i = core_endpoint_next(c, i)) {
		struct core_endpoint_info in;
		ck_assert_int_eq(core_endpoint_info(c, i, now, &in), 0);
		n += (size_t)snprintf(s + n, 65536 - n,
			"%d %s/%s adm=%d dr=%d if=%u ew=%a/%a s=%u/%u e2e=%a/%a br=%d cd=%" PRIu64
			" kd=%d ks=%d ok=%u fail=%u dec=%" PRIu64 " out=%" PRIu64 "\n",
			i, in.backend, in.server, in.admin, in.drained, in.in_flight,
			in.ewma_ms[0], in.ewma_ms[1], in.samples[0], in.samples[1],
			in.e2e_ewma_ms[0], in.e2e_ewma_ms[1], in.breaker,
			in.cooldown_left_ms, in.key_dead, in.key_suspect,
			in.window_ok, in.window_fail, in.decisions, in.outcomes[0]);
	}
	struct core_stats st;
	core_stats(c, &st);
	n += (size_t)snprintf(s + n, 65536 - n, "entries=%u hits=%" PRIu64 " misses=%" PRIu64
			      " exp=%" PRIu64 " rng=%" PRIx64 "\n",
			      st.affinity_entries, st.affinity_hits, st.affinity_misses,
			      st.affinity_expirations, f->h.srv.route.rng.state);
	for (int r = 0; r < CORE_REASON_COUNT; r++)
		n += (size_t)snprintf(s + n, 65536 - n, "d%d=%" PRIu64 " ", r, st.decisions[r]);
	n += (size_t)snprintf(s + n, 65536 - n, "\n");
	ck_assert_int_eq(core_affinity_export(c, now, dump_entry, s), 0);
}

/* ---- the commands ---- */

START_TEST(test_help_and_several_per_connection)
{
	struct fix f;
	fix_init(&f, yaml3);
	char *a = talk(&f, "help\nshow info\n\nquit\nshow info\n");
	/* help, then show info, then the empty line's empty answer; quit
	 * ends it: the last command is not run. */
	ck_assert_ptr_nonnull(strstr(a, "explain <name=value>"));
	ck_assert_ptr_nonnull(strstr(a, "set endpoint <backend/server> drain|ready"));
	ck_assert_ptr_nonnull(strstr(a, "clear affinity"));
	char *info = strstr(a, "version: ");
	ck_assert_ptr_nonnull(info);
	ck_assert_ptr_null(strstr(info + 1, "version: "));
	ck_assert_ptr_nonnull(strstr(a, "\n\n\n")); /* the empty line's answer */
	a = talk(&f, "help -json\n");
	ck_assert_msg(strncmp(a, "{\"help\":\"help ", 14) == 0, "%s", a);
	fix_finish(&f);
}
END_TEST

START_TEST(test_show_info)
{
	struct fix f;
	fix_init(&f, yaml3);
	struct route_decision d;
	for (int i = 0; i < 5; i++)
		decide(&f, "s1", &d);
	char *a = talk(&f, "show info\n");
	ck_assert_ptr_nonnull(strstr(a, "version: "));
	ck_assert_ptr_nonnull(strstr(a, "uptime_s: "));
	ck_assert_ptr_nonnull(strstr(a, "config: /etc/warmlane/test.yaml\n"));
	ck_assert_ptr_nonnull(strstr(a, "decisions: 5\n"));
	ck_assert_ptr_nonnull(strstr(a, "decisions_per_s: "));
	ck_assert_ptr_nonnull(strstr(a, "endpoints: 3\n"));
	/* policy.routers: auto, several by default (nothing says alone) */
	ck_assert_msg(strstr(a, "\nrouters: auto\nrouters_alone: no\nrouters_by: -\n"
			       "routers_share: -\nrouters_turn_skips: -\nrouters_peers: unknown\n"
			       "affinity_ttl_s: 300\n"),
		      "%s", a);
	ck_assert_msg(strlen(a) > 2 && strcmp(a + strlen(a) - 2, "\n\n") == 0,
		      "an answer ends with an empty line: %s", a);
	a = talk(&f, "show info -json\n");
	ck_assert_ptr_nonnull(strstr(a, "\"decisions\":5,"));
	ck_assert_ptr_nonnull(strstr(a, "\"config\":\"/etc/warmlane/test.yaml\""));
	ck_assert_msg(strstr(a, "\"routers\":\"auto\",\"routers_alone\":false,\"routers_by\":\"-\","
			       "\"routers_share\":null,\"routers_turn_skips\":null,"
			       "\"routers_peers\":\"unknown\",\"affinity_ttl_s\":300}"),
		      "%s", a);
	ck_assert_msg(a[0] == '{' && strstr(a, "}\n\n") != NULL, "%s", a);
	fix_finish(&f);
	/* routers: one, and HAProxy's peers read connected (core-hint
	 * tests what each verdict takes) */
	fix_init(&f, "policy: { routers: one }\n"
		     "endpoints:\n  - { backend: llm, server: a }\n");
	core_peers_note(f.h.srv.route.core, CORE_PEERS_CONNECTED, 1);
	a = talk(&f, "show info\n");
	ck_assert_msg(strstr(a, "\nrouters: one\nrouters_alone: yes\nrouters_by: config\n"
			       "routers_share: -\nrouters_turn_skips: -\nrouters_peers: connected\n"
			       "affinity_ttl_s: 1800\n"),
		      "%s", a);
	fix_finish(&f);
}
END_TEST

START_TEST(test_show_endpoints)
{
	struct fix f;
	fix_init(&f, yaml3);
	struct route_decision d;
	for (int i = 0; i < 3; i++)
		feedback(&f, "llm/a", 200, 120, NULL);
	feedback(&f, "llm/b", 429, 10, NULL); /* breaker open, cooldown */
	decide(&f, NULL, &d);
	char *a = talk(&f, "show endpoints\n");
	ck_assert_msg(strncmp(a, "# backend server key admin view breaker", 39) == 0, "%s", a);
	ck_assert_msg(strstr(a, "\nllm a - enabled ready closed 0 ") != NULL, "%s", a);
	ck_assert_msg(strstr(a, " 120.000 3 ") != NULL, "EWMA and samples of a: %s", a);
	char *b = strstr(a, "\nllm b - enabled ready open ");
	ck_assert_msg(b != NULL, "%s", a);
	unsigned long long left = strtoull(b + strlen("\nllm b - enabled ready open "), NULL, 10);
	ck_assert_msg(left > 50000 && left <= 60000, "cooldown left %llu", left);
	a = talk(&f, "show endpoints -json\n");
	ck_assert_ptr_nonnull(strstr(a, "\"server\":\"b\",\"key\":null,\"admin\":\"enabled\",\"view\":\"ready\",\"breaker\":\"open\""));
	ck_assert_ptr_nonnull(strstr(a, "\"shown\":3,\"total\":3,\"truncated\":false}"));
	ck_assert_msg(strstr(a, "\"check_ms\":0.000,\"check\":\"-\",\"rejoin_left_ms\":0,\"load_avg\":") != NULL,
		      "%s", a);

	/* HAProxy's completion checks (the runtime poller's check_duration):
	 * c's five times its peers' is slow; a and b ok. */
	struct core *core = f.h.srv.route.core;
	static const uint32_t check_ms[3] = { 40, 42, 210 };
	for (int i = 0; i < 3; i++) {
		char name = (char)('a' + i);
		int idx = core_endpoint_find(core, (struct core_str){ "llm", 3 },
					     (struct core_str){ &name, 1 },
					     (struct core_str){ 0 });
		ck_assert_int_ge(idx, 0);
		ck_assert_int_eq(core_endpoint_check(core, idx, check_ms[i],
						     uv_now(&f.h.loop)), 0);
	}
	a = talk(&f, "show endpoints\n");
	ck_assert_msg(strstr(a, " decisions check_ms check rejoin_left_ms load_avg ms_per_request speed probed\n")
		      != NULL, "%s", a);
	ck_assert_msg(strstr(a, " 40.000 ok 0 ") != NULL, "%s", a);
	ck_assert_msg(strstr(a, " 210.000 slow 0 ") != NULL, "%s", a);
	a = talk(&f, "show endpoints -json\n");
	ck_assert_msg(strstr(a, "\"check_ms\":210.000,\"check\":\"slow\",\"rejoin_left_ms\":0,") != NULL,
		      "%s", a);

	/* b back from 20 s DOWN: its empty queue is not spare capacity for
	 * as long again (docs/policy-v2.md, section 20). */
	int b_idx = core_endpoint_find(core, (struct core_str){ "llm", 3 },
				       (struct core_str){ "b", 1 }, (struct core_str){ 0 });
	uint64_t now = uv_now(&f.h.loop);
	ck_assert_int_eq(core_endpoint_sync(core, b_idx, CORE_ADMIN_DOWN, 0, now - 20000), 0);
	ck_assert_int_eq(core_endpoint_sync(core, b_idx, CORE_ADMIN_ENABLED, 0, now), 0);
	a = talk(&f, "show endpoints -json\n");
	b = strstr(a, "\"server\":\"b\"");
	ck_assert_msg(b != NULL, "%s", a);
	b = strstr(b, "\"rejoin_left_ms\":");
	ck_assert_msg(b != NULL, "%s", a);
	unsigned long long rejoin = strtoull(b + strlen("\"rejoin_left_ms\":"), NULL, 10);
	ck_assert_msg(rejoin > 15000 && rejoin <= 20000, "rejoin_left_ms %llu: %s", rejoin, a);
	ck_assert_msg(strstr(a, "\"rejoin_left_ms\":0,") != NULL, "%s", a);

	/* b at 6 in flight for 10 minutes: its load averaged over idle_reset
	 * (a minute) is 6 (docs/policy-v2.md, section 22), and with no
	 * decision for it since, its time per request is unknown. */
	ck_assert_int_eq(core_endpoint_sync(core, b_idx, CORE_ADMIN_ENABLED, 6, now + 600000), 0);
	a = talk(&f, "show endpoints -json\n");
	b = strstr(a, "\"server\":\"b\"");
	ck_assert_msg(b != NULL && strstr(b, "\"load_avg\":6.000,\"ms_per_request\":null,") != NULL,
		      "%s", a);
	a = talk(&f, "show endpoints\n");
	ck_assert_msg(strstr(a, " 6.000 - fit no\n") != NULL, "%s", a);
	fix_finish(&f);
}
END_TEST

static void fix_abc(struct fix *f, const char *policy);

/* c slows down 30x: a decision's latency rules leave it (speed left), and
 * exploration then probes it; a and b stay fit. In the text form, the
 * last two columns; in JSON, "speed" and "probed". */
START_TEST(test_show_endpoints_speed)
{
	struct fix f;
	fix_abc(&f, "explore_share: 0.25");
	char *a = talk(&f, "show endpoints -json\n");
	ck_assert_msg(strstr(a, "\"speed\":\"fit\",\"probed\":false}") != NULL, "%s", a);
	ck_assert_msg(strstr(a, "\"speed\":\"left\"") == NULL, "%s", a);
	for (int i = 0; i < 40; i++)
		feedback(&f, "llm/c", 200, 3000, NULL);
	/* new sessions, each answered: c's at 3 s */
	struct route_decision d;
	for (int i = 0; i < 400; i++) {
		char key[16], srv[64];
		snprintf(key, sizeof(key), "s%d", i);
		decide(&f, key, &d);
		snprintf(srv, sizeof(srv), "%s/%s", d.backend, d.server);
		feedback(&f, srv, 200, strcmp(d.server, "c") == 0 ? 3000 : 100, &d);
	}
	a = talk(&f, "show endpoints\n");
	ck_assert_msg(strstr(a, " load_avg ms_per_request speed probed\n") != NULL, "%s", a);
	char *c = strstr(a, "\nllm c - ");
	ck_assert_msg(c != NULL && strstr(c, " left yes\n") != NULL, "%s", a);
	ck_assert_msg(strstr(a, " fit no\nllm b ") != NULL, "%s", a);
	a = talk(&f, "show endpoints -json\n");
	c = strstr(a, "\"server\":\"c\"");
	ck_assert_msg(c != NULL && strstr(c, "\"speed\":\"left\",\"probed\":true}") != NULL,
		      "%s", a);
	fix_finish(&f);
}
END_TEST

/* 4000 endpoints cannot fit CTL_ANSWER_MAX: cut at a whole line, said. */
START_TEST(test_show_endpoints_bounded)
{
	static char yaml[4000 * 48 + 64];
	size_t n = (size_t)snprintf(yaml, sizeof(yaml), "endpoints:\n");
	for (int i = 0; i < 4000; i++)
		n += (size_t)snprintf(yaml + n, sizeof(yaml) - n,
				      "  - { backend: llm, server: server-%05d }\n", i);
	struct fix f;
	fix_init(&f, yaml);
	char *a = talk(&f, "show endpoints\n");
	size_t len = strlen(a);
	ck_assert_msg(len <= CTL_ANSWER_MAX, "answer of %zu bytes", len);
	ck_assert_ptr_nonnull(strstr(a, "# truncated: "));
	ck_assert_ptr_nonnull(strstr(a, " of 4000 endpoints shown"));
	a = talk(&f, "show endpoints -json\n");
	len = strlen(a);
	ck_assert_msg(len <= CTL_ANSWER_MAX, "answer of %zu bytes", len);
	ck_assert_ptr_nonnull(strstr(a, "}],\"shown\":"));
	ck_assert_ptr_nonnull(strstr(a, ",\"total\":4000,\"truncated\":true}\n\n"));
	fix_finish(&f);
}
END_TEST

START_TEST(test_show_and_clear_affinity)
{
	struct fix f;
	fix_init(&f, yaml3);
	struct route_decision d;
	uint64_t akey = decide(&f, "conv-1", &d);
	char srv[64];
	snprintf(srv, sizeof(srv), "%s/%s", d.backend, d.server);
	feedback(&f, srv, 200, 100, &d); /* a success: the entry exists */

	char *a = talk(&f, "show affinity session=conv-1\n");
	char want[128];
	snprintf(want, sizeof(want), "akey: %016" PRIx64 "\nentry: yes\nendpoint: %s\nidle_ms: ",
		 akey, srv);
	ck_assert_msg(strncmp(a, want, strlen(want)) == 0, "%s", a);
	ck_assert_ptr_nonnull(strstr(a, "\nttl_left_ms: "));
	unsigned long long left = strtoull(strstr(a, "ttl_left_ms: ") + 13, NULL, 10);
	ck_assert_msg(left > 299000 && left <= 300000, "TTL left %llu", left);

	/* By the key itself, as HAProxy's txn.warmlane.akey shows it. */
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "show affinity %016" PRIx64 " -json\n", akey);
	a = talk(&f, cmd);
	snprintf(want, sizeof(want), "{\"akey\":\"%016" PRIx64 "\",\"entry\":true,\"endpoint\":{\"backend\":\"llm\",\"server\":\"%s\"",
		 akey, d.server);
	ck_assert_msg(strncmp(a, want, strlen(want)) == 0, "%s", a);

	/* By a prefix hash: another rung, another key, no entry. */
	a = talk(&f, "show affinity prefix1=-1234567\n");
	ck_assert_msg(strstr(a, "\nentry: none\n") != NULL, "%s", a);
	a = talk(&f, "show affinity\n");
	ck_assert_msg(strncmp(a, "error: no identity", 18) == 0, "%s", a);
	a = talk(&f, "show affinity session=conv-1 bogus=1\n");
	ck_assert_msg(strncmp(a, "error: unknown argument bogus", 29) == 0, "%s", a);

	a = talk(&f, "clear affinity session=conv-1\n");
	snprintf(want, sizeof(want), "akey %016" PRIx64 ": cleared\n\n", akey);
	ck_assert_str_eq(a, want);
	a = talk(&f, "show affinity session=conv-1\n");
	ck_assert_msg(strstr(a, "\nentry: none\n") != NULL, "%s", a);
	snprintf(cmd, sizeof(cmd), "clear affinity akey=%016" PRIx64 " -json\n", akey);
	a = talk(&f, cmd);
	ck_assert_msg(strstr(a, "\"cleared\":false}") != NULL, "%s", a);
	fix_finish(&f);
}
END_TEST

START_TEST(test_set_endpoint)
{
	struct fix f;
	fix_init(&f, yaml3);
	char *a = talk(&f, "set endpoint llm/b drain\n");
	ck_assert_str_eq(a, "llm/b: drain (1 endpoint)\n\n");
	a = talk(&f, "show endpoints\n");
	ck_assert_msg(strstr(a, "\nllm b - enabled drain closed ") != NULL, "%s", a);
	struct route_decision d;
	char s[32];
	for (int i = 0; i < 200; i++) {
		snprintf(s, sizeof(s), "s%d", i);
		decide(&f, s, &d);
		ck_assert_str_ne(d.server, "b");
		route_take_back(&f.h.srv.route, d.endpoint);
	}
	a = talk(&f, "explain session=x\n");
	ck_assert_msg(strstr(a, "   llm/b excluded: drained ") != NULL, "%s", a);
	a = talk(&f, "set endpoint llm/b ready -json\n");
	ck_assert_str_eq(a, "{\"server\":\"llm/b\",\"view\":\"ready\",\"endpoints\":1}\n\n");
	unsigned on_b = 0;
	for (int i = 0; i < 200; i++) {
		snprintf(s, sizeof(s), "s%d", i);
		decide(&f, s, &d);
		on_b += strcmp(d.server, "b") == 0;
		route_take_back(&f.h.srv.route, d.endpoint);
	}
	ck_assert_uint_gt(on_b, 20);
	a = talk(&f, "set endpoint llm/zz drain\n");
	ck_assert_msg(strncmp(a, "error: no endpoint llm/zz", 25) == 0, "%s", a);
	a = talk(&f, "set endpoint llm/b\n");
	ck_assert_msg(strncmp(a, "error: usage: set endpoint", 26) == 0, "%s", a);
	a = talk(&f, "set endpoint llm/b up\n");
	ck_assert_msg(strncmp(a, "error: usage: set endpoint", 26) == 0, "%s", a);
	fix_finish(&f);
}
END_TEST

/* explain and every read-only command leave the state as it was, and
 * explain's decision is the one the next request takes. */
START_TEST(test_read_only_state_unchanged)
{
	struct fix f;
	fix_init(&f, yaml3);
	struct route_decision d;
	/* Warm endpoints, an entry, requests in flight, an open breaker. */
	for (int i = 0; i < 25; i++) {
		feedback(&f, "llm/a", 200, 100, NULL);
		feedback(&f, "llm/b", 200, 110, NULL);
		feedback(&f, "llm/c", 200, 120, NULL);
	}
	decide(&f, "warm", &d);
	char srv[64];
	snprintf(srv, sizeof(srv), "%s/%s", d.backend, d.server);
	feedback(&f, srv, 200, 100, &d);
	for (int i = 0; i < 6; i++)
		decide(&f, NULL, &d);
	static char before[65536], after[65536];
	/* At one time: the loop's clock moves while the commands run. */
	uint64_t t0 = uv_now(&f.h.loop);
	dump_state(&f, t0, before);

	static const char *const cmds[] = {
		"explain session=warm\n", "explain session=cold\n", "explain\n",
		"explain model=none-serves-it\n", "explain prefix1=42 stream=true -json\n",
		"show info\n", "show info -json\n", "show endpoints\n",
		"show endpoints -json\n", "show affinity session=warm\n",
		"show affinity session=cold -json\n", "help\n",
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char *a = talk(&f, cmds[i]);
		ck_assert_msg(strncmp(a, "error", 5) != 0 && strncmp(a, "{\"error", 7) != 0,
			      "%s: %s", cmds[i], a);
		dump_state(&f, t0, after);
		if (strcmp(before, after) != 0)
			fprintf(stderr, "# before:\n%s# after %s%s", before, cmds[i], after);
		ck_assert_msg(strcmp(before, after) == 0, "%.30s changed the state", cmds[i]);
	}
	/* What explain said is what happens. */
	char *a = talk(&f, "explain session=cold\n");
	decide(&f, "cold", &d);
	char want[128];
	snprintf(want, sizeof(want), "decision: %s/%s reason=%s\n", d.backend, d.server,
		 route_reason_name(d.reason));
	ck_assert_msg(strstr(a, want) != NULL, "want %s in %s", want, a);
	a = talk(&f, "explain\n");
	decide(&f, NULL, &d);
	snprintf(want, sizeof(want), "decision: %s/%s reason=p2c\n", d.backend, d.server);
	ck_assert_msg(strstr(a, want) != NULL, "want %s in %s", want, a);
	fix_finish(&f);
}
END_TEST

/* Twin agents fed the same: one explains between its decisions, the other
 * does not; their decisions stay equal (nothing hidden changed either:
 * suspect marks, views, probe slots). Each twin decides at its own loop's
 * time, which talk() moves on f alone; what a placed key adds to its
 * endpoint's owned count depends on that time (core owned.h), so the
 * owned-keys rule is off here: the core's twin tests (test_explain.c) run
 * it on one clock, with its epoch rescaled on the way. */
static const char *const yaml3_ranking =
	"policy: { owned_bound: -1 }\n"
	"endpoints:\n"
	"  - { backend: llm, server: a }\n"
	"  - { backend: llm, server: b }\n"
	"  - { backend: llm, server: c }\n";

START_TEST(test_explain_twin)
{
	struct fix f, g;
	fix_init(&f, yaml3_ranking);
	fix_init(&g, yaml3_ranking);
	g.h.srv.route.rng = f.h.srv.route.rng;
	struct fix *both[2] = { &f, &g };
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 25; i++) {
			feedback(both[k], "llm/a", 200, 100, NULL);
			feedback(both[k], "llm/b", 200, 100, NULL);
			feedback(both[k], "llm/c", 200, 900, NULL);
		}
		feedback(both[k], "llm/b", 503, 10, NULL);
	}
	char s[32];
	for (int i = 0; i < 300; i++) {
		snprintf(s, sizeof(s), "s%d", i % 40);
		if (i % 3 == 0) {
			char cmd[64];
			snprintf(cmd, sizeof(cmd), "explain session=s%d\n", (i + 7) % 40);
			talk(&f, cmd);
			talk(&f, "explain\n");
		}
		struct route_decision d1, d2;
		decide(&f, i % 5 == 0 ? NULL : s, &d1);
		decide(&g, i % 5 == 0 ? NULL : s, &d2);
		ck_assert_int_eq(d1.endpoint, d2.endpoint);
		ck_assert_int_eq(d1.reason, d2.reason);
		if (i % 2 == 0) {
			char srv[64];
			snprintf(srv, sizeof(srv), "%s/%s", d1.backend, d1.server);
			feedback(&f, srv, 200, 100 + i, &d1);
			feedback(&g, srv, 200, 100 + i, &d2);
		}
	}
	fix_finish(&g);
	fix_finish(&f);
}
END_TEST

/* f with policy (a flow mapping's body) and endpoints llm/a, llm/b,
 * llm/c, each with 30 answers of 100 ms. */
static void fix_abc(struct fix *f, const char *policy)
{
	char yaml[512];
	snprintf(yaml, sizeof(yaml), "policy: { %s }\n"
		 "endpoints:\n"
		 "  - { backend: llm, server: a }\n"
		 "  - { backend: llm, server: b }\n"
		 "  - { backend: llm, server: c }\n", policy);
	fix_init(f, yaml);
	for (int i = 0; i < 30; i++) {
		feedback(f, "llm/a", 200, 100, NULL);
		feedback(f, "llm/b", 200, 100, NULL);
		feedback(f, "llm/c", 200, 100, NULL);
	}
}

/* The example: a request over the load bound everywhere it hashes
 * (c is slow and left; a and b are full) spills to p2c. */
START_TEST(test_explain_spill)
{
	struct fix f;
	fix_abc(&f, "load_factor: 1.0, load_floor: 1");
	for (int i = 0; i < 40; i++) /* c slows down 30x */
		feedback(&f, "llm/c", 200, 3000, NULL);
	struct core *c = f.h.srv.route.core;
	uint64_t now = uv_now(&f.h.loop);
	int ia = core_endpoint_find_path(c, core_str_c("llm/a"), core_str_c(""));
	int ib = core_endpoint_find_path(c, core_str_c("llm/b"), core_str_c(""));
	ck_assert_int_eq(core_endpoint_sync(c, ia, CORE_ADMIN_ENABLED, 6, now), 0);
	ck_assert_int_eq(core_endpoint_sync(c, ib, CORE_ADMIN_ENABLED, 6, now), 0);
	char *a = talk(&f, "explain session=conv-42 model=llama\n");
	fprintf(stderr, "# warmlanectl explain session=conv-42 model=llama\n%s", a);
	ck_assert_msg(strstr(a, "decision: ") != NULL && strstr(a, " reason=spill\n") != NULL, "%s", a);
	ck_assert_msg(strstr(a, "5. spill, power of two choices: ") != NULL, "%s", a);
	ck_assert_msg(strstr(a, "fast=no") != NULL, "c is left as slow: %s", a);
	ck_assert_msg(strstr(a, "in_flight=6 +1 vs bound 5: over") != NULL, "%s", a);
	a = talk(&f, "explain session=conv-42 model=llama -json\n");
	ck_assert_msg(strstr(a, "\"reason\":\"spill\"}}\n\n") != NULL, "%s", a);
	ck_assert_msg(strstr(a, "\"p2c\":[{\"endpoint\":") != NULL, "%s", a);
	fix_finish(&f);
}
END_TEST

/* Without identity, two endpoints 1% apart: explain's p2c line says their
 * latencies were counted equal (policy.p2c_margin); 30 times apart, not. */
START_TEST(test_explain_p2c_margin)
{
	struct fix f;
	fix_init(&f, "endpoints:\n"
		     "  - { backend: llm, server: a }\n"
		     "  - { backend: llm, server: b }\n");
	for (int i = 0; i < 30; i++) {
		feedback(&f, "llm/a", 200, 100, NULL);
		feedback(&f, "llm/b", 200, 101, NULL);
	}
	char *a = talk(&f, "explain model=llama\n");
	ck_assert_msg(strstr(a, "5. power of two choices: ") != NULL, "%s", a);
	ck_assert_msg(strstr(a, " (latencies within p2c_margin: counted equal)\n") != NULL,
		      "%s", a);
	a = talk(&f, "explain model=llama -json\n");
	ck_assert_msg(strstr(a, "\"latency_equal\":true}]") != NULL, "%s", a);
	for (int i = 0; i < 60; i++)
		feedback(&f, "llm/b", 200, 3000, NULL);
	a = talk(&f, "explain model=llama\n");
	ck_assert_msg(strstr(a, "5. power of two choices: ") != NULL, "%s", a);
	ck_assert_msg(strstr(a, "counted equal") == NULL, "%s", a);
	a = talk(&f, "explain model=llama -json\n");
	ck_assert_msg(strstr(a, "\"latency_equal\":false}]") != NULL, "%s", a);
	fix_finish(&f);
}
END_TEST

/* policy.place_long_kib through explain's size=: with a busy, a new
 * session hashed to it stays there with a short body and leaves it with
 * a long one, and explain names the bar that moved it. */
START_TEST(test_explain_long_prompt)
{
	struct fix f;
	fix_init(&f, "policy: { place_long_kib: 4, place_long_z: 0, place_load_z: 0,"
		     " load_floor: 1000, owned_bound: -1, explore_share: 0 }\n"
		     "endpoints:\n"
		     "  - { backend: llm, server: a }\n"
		     "  - { backend: llm, server: b }\n");
	for (int i = 0; i < 10; i++) { /* both judged by slow_start */
		feedback(&f, "llm/a", 200, 100, NULL);
		feedback(&f, "llm/b", 200, 100, NULL);
	}
	struct core *c = f.h.srv.route.core;
	int ia = core_endpoint_find_path(c, core_str_c("llm/a"), core_str_c(""));
	ck_assert_int_eq(core_endpoint_sync(c, ia, CORE_ADMIN_ENABLED, 6,
					    uv_now(&f.h.loop)), 0);
	unsigned on_a = 0;
	for (int i = 0; i < 20; i++) {
		char cmd[96];
		snprintf(cmd, sizeof(cmd), "explain session=lp%d size=1000\n", i);
		char *a = talk(&f, cmd);
		ck_assert_msg(strstr(a, "place_long_z") == NULL, "%s", a);
		if (strstr(a, "decision: llm/a reason=hash\n") == NULL)
			continue;
		on_a++;
		snprintf(cmd, sizeof(cmd), "explain session=lp%d size=8192\n", i);
		a = talk(&f, cmd);
		ck_assert_msg(strstr(a, "decision: llm/b reason=hash\n") != NULL, "%s", a);
		ck_assert_msg(strstr(a, "to the first clearly less loaded "
				     "(place_long_z: a long prompt)") != NULL, "%s", a);
	}
	ck_assert_uint_gt(on_a, 0);
	fix_finish(&f);
}
END_TEST

/* policy.hot_share through explain: one prefix key, turn 1 each time (a
 * system prompt many callers share), all the traffic. Answered on x and
 * then held there, it is over the load bound: explain says it goes off
 * to warm a second server; once that one answered, explain names it as
 * the twin, text and JSON. */
static uint64_t hot_decide(struct fix *f, struct route_decision *out)
{
	struct route_request req;
	memset(&req, 0, sizeof(req));
	for (int i = 0; i < ROUTE_ARG_COUNT; i++)
		req.args[i] = spop_data_null();
	req.args[ROUTE_ARG_PREFIX1] = spop_data_int64(7);
	req.args[ROUTE_ARG_TURN] = spop_data_int64(1);
	req.now_ms = uv_now(&f->h.loop);
	route_decide(&f->h.srv.route, &req, out);
	return out->akey;
}

START_TEST(test_explain_hot_key)
{
	struct fix f;
	fix_abc(&f, "load_floor: 0, owned_bound: -1, explore_share: 0");
	struct route_decision d1, d2, d3;
	hot_decide(&f, &d1);
	char x[64];
	snprintf(x, sizeof(x), "%s/%s", d1.backend, d1.server);
	feedback(&f, x, 200, 100, &d1);
	core_endpoint_complete(f.h.srv.route.core, d1.endpoint);
	hot_decide(&f, &d2); /* x, held */
	ck_assert_str_eq(d2.server, d1.server);
	char *a = talk(&f, "explain prefix1=7 turn=1\n");
	ck_assert_msg(strstr(a, "of the requests) over the load bound: off to warm "
			     "a second server (hot_share)\n") != NULL, "%s", a);
	ck_assert_msg(strstr(a, " reason=hash\n") != NULL, "%s", a);
	hot_decide(&f, &d3);
	ck_assert_str_ne(d3.server, d1.server);
	char y[64];
	snprintf(y, sizeof(y), "%s/%s", d3.backend, d3.server);
	feedback(&f, y, 200, 100, &d3);
	a = talk(&f, "explain prefix1=7 turn=1\n");
	fprintf(stderr, "# warmlanectl explain prefix1=7 turn=1\n%s", a);
	char want[128];
	snprintf(want, sizeof(want), ": twin -> %s, the cheaper of the two takes it\n", x);
	ck_assert_msg(strstr(a, want) != NULL, "%s", a);
	a = talk(&f, "explain prefix1=7 turn=1 -json\n");
	snprintf(want, sizeof(want), "\"twin\":{\"backend\":\"%s\",\"server\":\"%s\",",
		 d1.backend, d1.server);
	ck_assert_msg(strstr(a, want) != NULL, "%s", a);
	ck_assert_msg(strstr(a, "\"twin_spread\":false") != NULL, "%s", a);
	fix_finish(&f);
}
END_TEST

/* A server holding a slow server's queue on average: a at 3 in flight
 * and b and c at 0 for a minute of runtime polls, the anonymous
 * requests of each poll to b and c; explain says a's load floor does not
 * hold (in JSON, floor_lifted), and a new session hashed to a goes
 * elsewhere. */
START_TEST(test_explain_floor_lifted)
{
	struct fix f;
	fix_abc(&f, "place_load_z: 0, owned_bound: -1, explore_share: 0");
	struct core *c = f.h.srv.route.core;
	uint64_t now = uv_now(&f.h.loop);
	int ia = core_endpoint_find_path(c, core_str_c("llm/a"), core_str_c(""));
	int ib = core_endpoint_find_path(c, core_str_c("llm/b"), core_str_c(""));
	int ic = core_endpoint_find_path(c, core_str_c("llm/c"), core_str_c(""));
	for (int poll = 1; poll <= 300; poll++) {
		for (int j = 0; j < 2; j++) {
			struct route_decision d;
			decide(&f, NULL, &d);
		}
		ck_assert_int_eq(core_endpoint_sync(c, ia, CORE_ADMIN_ENABLED, 3,
						    now + 200u * poll), 0);
		ck_assert_int_eq(core_endpoint_sync(c, ib, CORE_ADMIN_ENABLED, 0,
						    now + 200u * poll), 0);
		ck_assert_int_eq(core_endpoint_sync(c, ic, CORE_ADMIN_ENABLED, 0,
						    now + 200u * poll), 0);
	}
	unsigned on_a = 0;
	for (int i = 0; i < 20; i++) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "explain session=fl%d\n", i);
		char *a = talk(&f, cmd);
		if (strstr(a, "   1 llm/a ") == NULL)
			continue;
		on_a++;
		ck_assert_msg(strstr(a, "in_flight=3 +1 vs bound 2 (no load_floor: a slow "
				     "server's queue on average): over") != NULL, "%s", a);
		ck_assert_msg(strstr(a, "decision: llm/a ") == NULL, "%s", a);
		snprintf(cmd, sizeof(cmd), "explain session=fl%d -json\n", i);
		a = talk(&f, cmd);
		ck_assert_msg(strstr(a, "\"floor\":6,\"floor_lifted\":true") != NULL, "%s", a);
	}
	ck_assert_uint_gt(on_a, 0);
	fix_finish(&f);
}
END_TEST

/* ---- bad input ---- */

START_TEST(test_garbage)
{
	struct fix f;
	fix_init(&f, yaml3);
	char *a = talk(&f, "frobnicate\n");
	ck_assert_str_eq(a, "error: unknown command \"frobnicate\"; \"help\" lists them\n\n");
	a = talk(&f, "show\n");
	ck_assert_msg(strncmp(a, "error: unknown command \"show\"", 29) == 0, "%s", a);
	a = talk(&f, "show nothing -json\n");
	ck_assert_msg(strncmp(a, "{\"error\":\"unknown command", 25) == 0, "%s", a);
	static const char bin[] = "\x01\xff\x00garbage\x7f\r\nhelp\n";
	a = talk_n(&f, bin, sizeof(bin) - 1);
	ck_assert_msg(strncmp(a, "error: unknown command \"\\x01\\xff\\x00garbage\\x7f\"; ", 50) == 0, "%s", a);
	ck_assert_ptr_nonnull(strstr(a, "explain <name=value>")); /* goes on */
	a = talk(&f, "explain a b c d e f g h i j k l m n o p q r s t u v w x y z\n");
	ck_assert_msg(strncmp(a, "error: more than 24 words", 25) == 0, "%s", a);
	a = talk(&f, "explain akey=0123456789abcdef\n");
	ck_assert_msg(strncmp(a, "error: explain takes the route arguments", 40) == 0, "%s", a);
	a = talk(&f, "show affinity akey=12\n");
	ck_assert_msg(strncmp(a, "error: akey must be 16 hex digits", 33) == 0, "%s", a);
	a = talk(&f, "explain session=s1 size=80KiB\n");
	ck_assert_str_eq(a, "error: size must be the body's bytes, a whole number\n\n");
	a = talk(&f, "explain session=s1 turn=two\n");
	ck_assert_str_eq(a, "error: turn must be the count of user messages, a whole number\n\n");
	a = talk(&f, "show info");
	ck_assert_str_eq(a, "error: line without newline (9 bytes) not run\n\n");
	ck_assert_uint_eq(f.ctl->n_conns, 0);
	fix_finish(&f);
}
END_TEST

START_TEST(test_oversized_line)
{
	struct fix f;
	fix_init(&f, yaml3);
	static char big[3 * CTL_LINE_MAX];
	memset(big, 'x', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	/* The agent closes after its error: what follows is never read. */
	int fd = ctl_connect(f.path);
	ctl_write(&f.h, fd, "help\n", 5);
	ssize_t w = write(fd, big, sizeof(big));
	ck_assert_int_gt(w, CTL_LINE_MAX);
	static char buf[65536];
	ctl_read_all(&f.h, fd, buf, sizeof(buf));
	close(fd);
	ck_assert_ptr_nonnull(strstr(buf, "explain <name=value>"));
	ck_assert_ptr_nonnull(strstr(buf, "\nerror: line longer than 4096 bytes; closing\n\n"));
	/* Exactly CTL_LINE_MAX is still a line. */
	static char edge[CTL_LINE_MAX + 1];
	memset(edge, 'y', CTL_LINE_MAX);
	edge[CTL_LINE_MAX] = '\n';
	char *a = talk_n(&f, edge, sizeof(edge));
	ck_assert_msg(strncmp(a, "error: unknown command \"yyyy", 28) == 0, "%.80s", a);
	ck_assert_uint_eq(f.ctl->n_conns, 0);
	fix_finish(&f);
}
END_TEST

/* A client that sends commands and never reads is closed once its unread
 * answers pass CTL_QUEUE_MAX; the agent keeps serving others. */
START_TEST(test_client_never_reads)
{
	struct fix f;
	fix_init(&f, yaml3);
	int fd = ctl_connect(f.path);
	int small = 4096;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	static char many[20000 * 15];
	size_t n = 0;
	for (int i = 0; i < 20000; i++) {
		memcpy(many + n, "show endpoints\n", 15);
		n += 15;
	}
	/* Written while the agent runs; it stops reading once it closes. */
	size_t off = 0;
	uint64_t deadline = mono_ms() + 10000;
	while (f.ctl->n_conns == 0 || off < n) {
		ssize_t w = write(fd, many + off, n - off);
		if (w > 0)
			off += (size_t)w;
		else if (w < 0 && errno != EAGAIN)
			break; /* EPIPE/ECONNRESET: closed */
		pump(&f.h);
		if (off == n)
			break;
		ck_assert_msg(mono_ms() < deadline, "never closed");
	}
	while (f.ctl->n_conns > 0) {
		ck_assert_msg(mono_ms() < deadline, "the agent kept a client that never reads");
		pump(&f.h);
	}
	close(fd);
	char *a = talk(&f, "show info\n");
	ck_assert_ptr_nonnull(strstr(a, "version: "));
	fix_finish(&f);
}
END_TEST

START_TEST(test_idle_and_connection_cap)
{
	struct fix f;
	fix_init(&f, yaml3);
	f.ctl->idle_ms = 50;
	int fd = ctl_connect(f.path);
	ctl_write(&f.h, fd, "show inf", 8); /* never finished */
	static char buf[4096];
	ctl_read_all(&f.h, fd, buf, sizeof(buf)); /* EOF within 5 s */
	close(fd);
	ck_assert_str_eq(buf, "");

	f.ctl->idle_ms = 60000;
	int fds[CTL_MAX_CONNS];
	for (int i = 0; i < CTL_MAX_CONNS; i++) {
		fds[i] = ctl_connect(f.path);
		uint64_t deadline = mono_ms() + 5000;
		while (f.ctl->n_conns < (unsigned)i + 1) {
			ck_assert(mono_ms() < deadline);
			pump(&f.h);
		}
	}
	int extra = ctl_connect(f.path);
	ctl_read_all(&f.h, extra, buf, sizeof(buf));
	close(extra);
	ck_assert_str_eq(buf, "error: too many command connections\n\n");
	for (int i = 0; i < CTL_MAX_CONNS; i++)
		close(fds[i]);
	uint64_t deadline = mono_ms() + 5000;
	while (f.ctl->n_conns > 0) {
		ck_assert(mono_ms() < deadline);
		pump(&f.h);
	}
	fix_finish(&f);
}
END_TEST

START_TEST(test_prompt_and_socket_file)
{
	struct fix f;
	fix_init(&f, yaml3);
	struct stat st;
	ck_assert_int_eq(stat(f.path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	char *a = talk(&f, "prompt\nshow info\nprompt\nhelp\n");
	ck_assert_msg(strncmp(a, "> version: ", 11) == 0, "%s", a);
	ck_assert_ptr_nonnull(strstr(a, "\n\n> help "));
	/* A second agent on the same socket is refused; the file stays. */
	struct ctl *other = NULL;
	char err[512];
	ck_assert_int_eq(ctl_create(&other, &f.h.loop, &f.h.srv, f.path, 0600, NULL,
				    err, sizeof(err)), -EADDRINUSE);
	ck_assert_ptr_null(other);
	ck_assert_int_eq(stat(f.path, &st), 0);
	ctl_destroy(f.ctl);
	f.ctl = NULL;
	ck_assert_int_eq(stat(f.path, &st), -1); /* removed at close */
	fix_finish(&f);
}
END_TEST

static Suite *ctl_suite(void)
{
	Suite *s = suite_create("ctl");
	TCase *tc = tcase_create("commands");
	tcase_add_test(tc, test_help_and_several_per_connection);
	tcase_add_test(tc, test_show_info);
	tcase_add_test(tc, test_show_endpoints);
	tcase_add_test(tc, test_show_endpoints_speed);
	tcase_add_test(tc, test_show_endpoints_bounded);
	tcase_add_test(tc, test_show_and_clear_affinity);
	tcase_add_test(tc, test_set_endpoint);
	tcase_add_test(tc, test_read_only_state_unchanged);
	tcase_add_test(tc, test_explain_twin);
	tcase_add_test(tc, test_explain_spill);
	tcase_add_test(tc, test_explain_p2c_margin);
	tcase_add_test(tc, test_explain_long_prompt);
	tcase_add_test(tc, test_explain_hot_key);
	tcase_add_test(tc, test_explain_floor_lifted);
	suite_add_tcase(s, tc);
	TCase *bad = tcase_create("bad input");
	tcase_add_test(bad, test_garbage);
	tcase_add_test(bad, test_oversized_line);
	tcase_add_test(bad, test_client_never_reads);
	tcase_add_test(bad, test_idle_and_connection_cap);
	tcase_add_test(bad, test_prompt_and_socket_file);
	suite_add_tcase(s, bad);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ctl_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
