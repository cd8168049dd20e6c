/* test_logsrc.c - agent: the log input (logsrc.c) on a real unix datagram socket, and route_log_line. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "harness.h"
#include "log.h"
#include "logsrc.h"
#include "route.h"

static char dir[64];

/* chmod, wrapped (-Wl,--wrap=chmod): records the mode a socket has right
 * after its bind, before the agent's chmod narrows it. */
int __real_chmod(const char *path, mode_t mode);
int __wrap_chmod(const char *path, mode_t mode);
static int mode_before_chmod = -1;

int __wrap_chmod(const char *path, mode_t mode)
{
	struct stat st;
	if (stat(path, &st) == 0)
		mode_before_chmod = (int)(st.st_mode & 0777);
	return __real_chmod(path, mode);
}

static void load(struct config *cfg, const char *yaml)
{
	char err[4096];
	ck_assert_int_eq(config_init(cfg), 0);
	int r = config_load_data(cfg, "t.yaml", yaml, strlen(yaml), err,
				 sizeof(err));
	ck_assert_msg(r == 0, "%s", err);
}

/* A config with endpoints llm/s1..s3 (key k1) and the log socket in dir. */
static void load_std(struct config *cfg, const char *path)
{
	char yaml[1024];
	snprintf(yaml, sizeof(yaml),
		 "log_input: { path: \"%s\", mode: \"0640\" }\n"
		 "policy: { breaker_consecutive: 3, breaker_min_requests: 100 }\n"
		 "endpoints:\n"
		 "  - { backend: llm, server: s1, keys: [k1] }\n"
		 "  - { backend: llm, server: s2, keys: [k1] }\n"
		 "  - { backend: llm, server: s3, keys: [k1] }\n",
		 path);
	load(cfg, yaml);
}

/* r on load_std's config without a log socket. */
static void route_std(struct config *cfg, struct route *r)
{
	load_std(cfg, "");
	ck_assert_int_eq(route_init(r, cfg), 0);
}

/* The same, as when HAProxy's lines arrive, every endpoint idle at 1000 ms. */
static void route_lines(struct config *cfg, struct route *r)
{
	route_std(cfg, r);
	r->log_input = true;
	for (int i = 0; i < 3; i++)
		core_endpoint_sync(r->core, i, CORE_ADMIN_ENABLED, 0, 1000);
}

/* The socket's directory, made and removed in the runner's process (an
 * unchecked fixture), so that nothing is left even when a test fails. */
static void dir_setup(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/warmlane-logsrc-XXXXXX",
		 tmp != NULL && tmp[0] != '\0' && strlen(tmp) < 32 ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL)
		dir[0] = '\0';
}

static void dir_teardown(void)
{
	char p[128];
	if (dir[0] == '\0')
		return;
	snprintf(p, sizeof(p), "%s/log.sock", dir);
	unlink(p);
	rmdir(dir);
}

static int ep(struct route *r, const char *server)
{
	return core_endpoint_find(r->core, core_str_c("llm"), core_str_c(server),
				  core_str_c("k1"));
}

static struct core_endpoint_info info(struct route *r, const char *server)
{
	struct core_endpoint_info in;
	ck_assert_int_eq(core_endpoint_info(r->core, ep(r, server), 1000, &in), 0);
	return in;
}

/* One line as warmlane's log format writes it. */
static size_t line(char *buf, size_t cap, const char *srv, const char *wsrv,
		   int status, const char *ts, const char *rc, int fb)
{
	int n = snprintf(buf, cap,
			 "<134>1 2026-11-29T10:21:44.552318+00:00 - haproxy 1 - - "
			 "be=llm srv=%s st=%d ts=%s rc=%s tw=0 tc=0 tr=1 ta=40 "
			 "tt=40 bytes=900 at=1795947704.530 wbe=llm wsrv=%s key=k1 "
			 "akey=- reason=hash fb=%d stream=1 id=\"x\" 127.0.0.1:1 "
			 "\"POST / HTTP/1.1\"\n",
			 srv, status, ts, rc, wsrv, fb);
	ck_assert(n > 0 && (size_t)n < cap);
	return (size_t)n;
}

static int apply(struct route *r, const char *srv, const char *wsrv,
		 int status, const char *ts, const char *rc, int fb)
{
	char buf[1024];
	struct haplog_line l;
	size_t n = line(buf, sizeof(buf), srv, wsrv, status, ts, rc, fb);
	ck_assert_int_eq(haplog_parse((const uint8_t *)buf, n, &l), HAPLOG_OK);
	return (int)route_log_line(r, &l, 1000);
}

START_TEST(end_classes)
{
	static const struct {
		const char *ts;
		enum core_end end;
	} t[] = {
		{ "----", CORE_END_COMPLETE },	  { "CD--", CORE_END_CLIENT_ABORT },
		{ "cD--", CORE_END_CLIENT_ABORT }, { "CR--", CORE_END_CLIENT_ABORT },
		{ "SD--", CORE_END_SERVER_CUT },   { "sD--", CORE_END_SERVER_CUT },
		{ "SL--", CORE_END_SERVER_CUT },   { "DD--", CORE_END_SERVER_CUT },
		{ "SC--", CORE_END_SERVER_FAIL },  { "sC--", CORE_END_SERVER_FAIL },
		{ "sH--", CORE_END_SERVER_FAIL },  { "SH--", CORE_END_SERVER_FAIL },
		{ "sQ--", CORE_END_SERVER_FAIL },  { "PH--", CORE_END_COMPLETE },
		{ "LR--", CORE_END_COMPLETE },	  { "--", CORE_END_COMPLETE },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct haplog_line l = { 0 };
		l.ts = (struct haplog_str){ (const uint8_t *)t[i].ts,
					    strlen(t[i].ts) };
		ck_assert_msg(route_log_end(&l) == t[i].end, "%s", t[i].ts);
	}
}
END_TEST

/* Decisions raise in-flight, log lines lower it on warmlane's endpoint;
 * once the log input receives HAProxy's lines, non-streamed feedback does
 * not (before the first one, a socket nobody writes to, it still does). */
START_TEST(completion_counts_once)
{
	struct config cfg;
	struct route r;
	route_lines(&cfg, &r);

	struct core_request req = { .session = { true, 42 } };
	struct core_decision d;
	core_decide(r.core, &req, 1000, &r.rng, &d);
	ck_assert_int_ge(d.endpoint, 0);
	const char *s = d.server;
	ck_assert_uint_eq(info(&r, s).in_flight, 1);

	/* the feedback of a non-streamed answer: in-flight stays */
	struct route_feedback fb;
	memset(&fb, 0, sizeof(fb));
	for (int i = 0; i < ROUTE_FB_COUNT; i++)
		fb.args[i] = spop_data_null();
	char path[64];
	snprintf(path, sizeof(path), "llm/%s", s);
	fb.args[ROUTE_FB_SERVER] = spop_data_string(path, strlen(path));
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(200);
	fb.args[ROUTE_FB_KEY] = spop_data_string("k1", 2);
	fb.now_ms = 1000;
	/* the socket is open but no line came yet (HAProxy may not be
	 * configured to write to it): the feedback ends the request */
	route_feedback(&r, &fb);
	ck_assert_uint_eq(info(&r, s).in_flight, 0);
	ck_assert(!r.log_lines);

	/* a line in warmlane's format (a request HAProxy balanced itself):
	 * HAProxy does write to the log input */
	char buf[1024];
	struct haplog_line l;
	size_t n = line(buf, sizeof(buf), "s1", "-", 200, "----", "0", 0);
	ck_assert_int_eq(haplog_parse((const uint8_t *)buf, n, &l), HAPLOG_OK);
	ck_assert_int_eq(route_log_line(&r, &l, 1000), ROUTE_LOG_UNROUTED);
	ck_assert_uint_eq(r.log.unrouted, 1);
	ck_assert(r.log_lines);
	ck_assert_uint_eq(info(&r, s).in_flight, 0);

	/* from now on, the feedback of a non-streamed answer: in-flight stays */
	core_decide(r.core, &req, 1000, &r.rng, &d);
	ck_assert_str_eq(d.server, s);
	ck_assert_uint_eq(info(&r, s).in_flight, 1);
	route_feedback(&r, &fb);
	ck_assert_uint_eq(info(&r, s).in_flight, 1);

	/* its log line: in-flight falls, once */
	ck_assert_int_eq(apply(&r, s, s, 200, "----", "0", 1), ROUTE_LOG_USED);
	ck_assert_uint_eq(info(&r, s).in_flight, 0);
	ck_assert_uint_eq(r.log.ends[CORE_END_COMPLETE], 1);
	ck_assert_uint_eq(info(&r, s).completions[CORE_END_COMPLETE], 1);

	/* a replayed line: in-flight stays at 0, never below */
	ck_assert_int_eq(apply(&r, s, s, 200, "----", "0", 1), ROUTE_LOG_USED);
	ck_assert_uint_eq(info(&r, s).in_flight, 0);
	/* an endpoint the core does not know */
	n = line(buf, sizeof(buf), "s9", "s9", 200, "----", "0", 0);
	ck_assert_int_eq(haplog_parse((const uint8_t *)buf, n, &l), HAPLOG_OK);
	ck_assert_int_eq(route_log_line(&r, &l, 1000), ROUTE_LOG_UNKNOWN);

	/* with the log input off, non-streamed feedback ends the request */
	r.log_input = false;
	core_decide(r.core, &req, 1000, &r.rng, &d);
	ck_assert_uint_eq(info(&r, s).in_flight, 1);
	route_feedback(&r, &fb);
	ck_assert_uint_eq(info(&r, s).in_flight, 0);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Issue 16: once lines in warmlane's format arrive, a streamed 200 told
 * by feedback (at its headers) waits for its line before the breaker
 * counts it: a cut is then one failure, not a success and a failure. */
START_TEST(streamed_success_waits_for_line)
{
	struct config cfg;
	struct route r;
	route_lines(&cfg, &r);
	struct route_feedback fb;
	memset(&fb, 0, sizeof(fb));
	for (int i = 0; i < ROUTE_FB_COUNT; i++)
		fb.args[i] = spop_data_null();
	fb.args[ROUTE_FB_SERVER] = spop_data_string("llm/s2", 6);
	fb.args[ROUTE_FB_STATUS] = spop_data_int64(200);
	fb.args[ROUTE_FB_KEY] = spop_data_string("k1", 2);
	fb.args[ROUTE_FB_STREAM] = spop_data_bool(true);
	fb.now_ms = 1000;

	/* no line yet: the headers are all there is, a success at once */
	route_feedback(&r, &fb);
	ck_assert_uint_eq(info(&r, "s2").window_ok, 1);
	ck_assert_int_eq(apply(&r, "s2", "s2", 200, "----", "0", 1), ROUTE_LOG_USED);
	ck_assert(r.log_lines);
	ck_assert_uint_eq(info(&r, "s2").window_ok, 1); /* not twice */

	/* from now on: provisional until the line */
	route_feedback(&r, &fb);
	ck_assert_uint_eq(info(&r, "s2").window_ok, 1);
	ck_assert_int_eq(apply(&r, "s2", "s2", 200, "SD--", "0", 1), ROUTE_LOG_USED);
	struct core_endpoint_info in = info(&r, "s2");
	ck_assert_uint_eq(in.window_ok, 1);
	ck_assert_uint_eq(in.window_fail, 1);
	route_feedback(&r, &fb);
	ck_assert_int_eq(apply(&r, "s2", "s2", 200, "----", "0", 1), ROUTE_LOG_USED);
	ck_assert_uint_eq(info(&r, "s2").window_ok, 2);

	/* most lines not in warmlane's format (logsrc.c's check): no line
	 * would settle it, at once */
	r.log.format_bad = true;
	route_feedback(&r, &fb);
	ck_assert_uint_eq(info(&r, "s2").window_ok, 3);
	r.log.format_bad = false;

	/* the log input off again (a poll error): at once */
	r.log_input = false;
	route_feedback(&r, &fb);
	ck_assert_uint_eq(info(&r, "s2").window_ok, 4);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* HAProxy's own failures and cut streams open the breaker; a client
 * abort does not; a redispatch is a failure of warmlane's server. */
START_TEST(failures)
{
	struct config cfg;
	struct route r;
	route_std(&cfg, &r);
	r.log_input = true;

	for (int i = 0; i < 5; i++)
		apply(&r, "s1", "s1", 200, "CD--", "0", 1);
	ck_assert_int_eq(info(&r, "s1").breaker, CORE_BREAKER_CLOSED);
	ck_assert_uint_eq(r.log.ends[CORE_END_CLIENT_ABORT], 5);

	for (int i = 0; i < 3; i++)
		apply(&r, "s2", "s2", 200, "SD--", "0", 1);
	ck_assert_int_eq(info(&r, "s2").breaker, CORE_BREAKER_OPEN);
	ck_assert_uint_eq(r.log.ends[CORE_END_SERVER_CUT], 3);

	/* refused, redispatched to s1 which answered 200 */
	for (int i = 0; i < 3; i++)
		apply(&r, "s1", "s3", 200, "----", "+1", 1);
	ck_assert_int_eq(info(&r, "s3").breaker, CORE_BREAKER_OPEN);
	ck_assert_int_eq(info(&r, "s1").breaker, CORE_BREAKER_CLOSED);
	ck_assert_uint_eq(r.log.redispatched, 3);
	ck_assert_uint_eq(r.log.ends[CORE_END_SERVER_FAIL], 3);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* The lag histogram counts lines whose accept time is known: "at=-" (no
 * value) is not the Unix epoch, which would add 56 years to its sum. */
START_TEST(lag_needs_accept_time)
{
	struct config cfg;
	struct route r;
	route_std(&cfg, &r);
	struct logsrc ls = { .route = &r };
	static const char no_at[] = "be=llm srv=s1 st=200 ts=---- tt=40 at=-";
	static const char at[] = "be=llm srv=s1 st=200 ts=---- tt=40 "
				 "at=1795947704.530";
	const uint64_t wall = 1795947704570ull + 250; /* 0.25 s after its end */
	logsrc_handle(&ls, (const uint8_t *)no_at, strlen(no_at), 1000, wall);
	ck_assert_uint_eq(r.log.parsed, 1);
	ck_assert_uint_eq(r.log.lag_count, 0);
	ck_assert(r.log.lag_sum_s == 0.0);
	logsrc_handle(&ls, (const uint8_t *)at, strlen(at), 1000, wall);
	ck_assert_uint_eq(r.log.lag_count, 1);
	ck_assert(r.log.lag_sum_s > 0.249 && r.log.lag_sum_s < 0.251);
	/* cumulative buckets: 0.25 s is over 0.1, within 0.5 */
	ck_assert_uint_eq(r.log.lag_buckets[4], 0);
	ck_assert_uint_eq(r.log.lag_buckets[5], 1);
	ck_assert_uint_eq(r.log.lag_buckets[ROUTE_LAG_BUCKETS - 1], 1);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Counts the lines of logs (rewound) that contain what. */
static unsigned count_lines(FILE *logs, const char *what)
{
	char l[4096];
	unsigned n = 0;
	fflush(logs);
	rewind(logs);
	while (fgets(l, sizeof(l), logs) != NULL)
		if (strstr(l, what) != NULL)
			n++;
	return n;
}

/* Issue 16: HAProxy 3.2 with a log profile but no `option httplog` sends
 * only "Connect from" lines. Said once, clearly, with a sample; the gauge
 * says it while it lasts; good lines clear it; it is said again only
 * after LOGSRC_FORMAT_REWARN_MS. */
START_TEST(format_check)
{
	struct config cfg;
	struct route r;
	route_std(&cfg, &r);
	struct logsrc ls = { .route = &r };
	FILE *logs = tmpfile();
	ck_assert_ptr_nonnull(logs);
	log_set_stream(logs);
	static const char conn[] =
		"<134>1 2026-12-01T08:41:02.117322+00:00 - haproxy 25 - - "
		"Connect from 127.0.0.1:51774 to 127.0.0.1:41807 (llm_in/HTTP)\x1b[0m\n";
	const char *warned = "msg=\"log lines are not in warmlane's format";
	uint64_t now = 1000;
	ck_assert(!r.log.format_bad);
	/* 80 lines over 32 s: several windows, one warning */
	for (int i = 0; i < 80; i++, now += 400) {
		logsrc_handle(&ls, (const uint8_t *)conn, strlen(conn), now, 0);
		if (i == LOGSRC_FORMAT_MIN - 2) {
			ck_assert(!r.log.format_bad); /* not judged yet */
			ck_assert_uint_eq(count_lines(logs, warned), 0);
		}
	}
	ck_assert(r.log.format_bad);
	ck_assert(r.log.unparsed_ratio == 1.0);
	ck_assert_uint_eq(r.log.unparseable, 80);
	ck_assert_uint_eq(count_lines(logs, warned), 1);
	/* the sample: what HAProxy sent, quoted, control bytes escaped */
	char w[4096] = "";
	fflush(logs);
	rewind(logs);
	while (fgets(w, sizeof(w), logs) != NULL && strstr(w, warned) == NULL)
		;
	ck_assert_ptr_nonnull(strstr(w, "sample=\"<134>1 2026-12-01T08:41:02"));
	ck_assert_ptr_nonnull(strstr(w, "Connect from 127.0.0.1:51774"));
	ck_assert_ptr_null(strstr(w, "\x1b"));
	ck_assert_ptr_nonnull(strstr(w, "error=no_fields"));
	ck_assert_ptr_nonnull(strstr(w, "unparseable=8 parsed=0"));
	ck_assert_ptr_nonnull(strstr(w, "option httplog"));

	/* the frontend fixed: lines in the format, the gauge back at 1 */
	char buf[1024];
	size_t n = line(buf, sizeof(buf), "s1", "s1", 200, "----", "0", 1);
	now += LOGSRC_LOG_WINDOW_MS;
	for (int i = 0; i < 20; i++, now += 100)
		logsrc_handle(&ls, (const uint8_t *)buf, n, now, 0);
	ck_assert(!r.log.format_bad);
	ck_assert(r.log.unparsed_ratio == 0.0);
	ck_assert_uint_eq(count_lines(logs, "msg=\"log lines in warmlane's format again\""), 1);
	/* a stray bad datagram among good ones changes nothing */
	logsrc_handle(&ls, (const uint8_t *)conn, strlen(conn), now, 0);
	logsrc_handle(&ls, (const uint8_t *)buf, n, now, 0);
	ck_assert(!r.log.format_bad);

	/* broken again within LOGSRC_FORMAT_REWARN_MS: the gauge, no second
	 * warning; after it, the warning again */
	now += LOGSRC_LOG_WINDOW_MS;
	for (int i = 0; i < 20; i++, now += 100)
		logsrc_handle(&ls, (const uint8_t *)conn, strlen(conn), now, 0);
	ck_assert(r.log.format_bad);
	ck_assert_uint_eq(count_lines(logs, warned), 1);
	now += LOGSRC_LOG_WINDOW_MS;
	for (int i = 0; i < 20; i++, now += 100)
		logsrc_handle(&ls, (const uint8_t *)buf, n, now, 0);
	ck_assert(!r.log.format_bad);
	now += LOGSRC_FORMAT_REWARN_MS;
	for (int i = 0; i < 20; i++, now += 100)
		logsrc_handle(&ls, (const uint8_t *)conn, strlen(conn), now, 0);
	ck_assert(r.log.format_bad);
	ck_assert_uint_eq(count_lines(logs, warned), 2);

	/* a quiet site: 3 lines in a window are judged when it ends */
	struct route r2;
	ck_assert_int_eq(route_init(&r2, &cfg), 0);
	struct logsrc ls2 = { .route = &r2 };
	for (int i = 0; i < 3; i++)
		logsrc_handle(&ls2, (const uint8_t *)conn, strlen(conn), 1000 + i, 0);
	ck_assert(!r2.log.format_bad);
	logsrc_handle(&ls2, (const uint8_t *)conn, strlen(conn),
		      1000 + LOGSRC_LOG_WINDOW_MS, 0);
	ck_assert(r2.log.format_bad);
	ck_assert_uint_eq(count_lines(logs, warned), 3);

	log_set_stream(NULL);
	fclose(logs);
	route_finish(&r2);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* Sends one datagram to the unix socket at path without blocking: while
 * its queue is full (net.unix.max_dgram_qlen, 10 by default), the loop
 * runs and reads. Bounded: 1000 tries. */
static void send_to(uv_loop_t *loop, const char *path, const void *p, size_t n)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	for (int i = 0; i < 1000; i++) {
		ssize_t w = sendto(fd, p, n, MSG_DONTWAIT, (struct sockaddr *)&sa,
				   sizeof(sa));
		if (w == (ssize_t)n)
			break;
		ck_assert_msg(errno == EAGAIN || errno == EWOULDBLOCK, "%s",
			      strerror(errno));
		uv_run(loop, UV_RUN_NOWAIT);
	}
	close(fd);
}

static int one_record(void *arg, const struct core_affinity_record *rec)
{
	*(struct core_affinity_record *)arg = *rec;
	return 0;
}

static uint32_t map_entries(struct route *r)
{
	struct core_stats st;
	core_stats(r->core, &st);
	return st.affinity_entries;
}

/* A forged line: warmlane's decision on server wsrv, any akey, status st,
 * feedback seen or not. */
static size_t forged(char *buf, size_t cap, const char *wsrv, uint64_t akey,
		     int st, int fb)
{
	int n = snprintf(buf, cap,
			 "<134>1 2026-11-29T10:21:44.552318+00:00 - haproxy 1 - - "
			 "be=llm srv=%s st=%d ts=---- rc=0 tw=0 tc=0 tr=1 ta=40 "
			 "tt=40 bytes=900 at=1795947704.530 wbe=llm wsrv=%s key=k1 "
			 "akey=%016llx reason=hash fb=%d stream=0 id=\"x\"\n",
			 wsrv, st, wsrv, (unsigned long long)akey, fb);
	ck_assert(n > 0 && (size_t)n < cap);
	return (size_t)n;
}

/* The 46k forged lines (they grew the map and RSS by 17 MB): the
 * log input never inserts an affinity entry, nor moves the one feedback
 * made, whatever the line says; through logsrc_handle, then the socket. */
START_TEST(forged_lines_never_insert)
{
	struct config cfg;
	struct route r;
	char path[100], err[256], buf[1024];
	snprintf(path, sizeof(path), "%s/log.sock", dir);
	load_std(&cfg, path);
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	/* A victim homed by feedback on s2. */
	const uint64_t victim = 0x1234abcd5678ef00ull;
	struct core_feedback fb = { .endpoint = ep(&r, "s2"), .status = 200,
				    .tr_ms = 10, .retry_after_ms = -1,
				    .has_akey = true, .akey = victim };
	ck_assert_int_eq(core_observe(r.core, &fb, 1000), 0);
	ck_assert_uint_eq(map_entries(&r), 1);

	struct logsrc ls = { .route = &r };
	static const char *const srv[] = { "s1", "s2", "s3" };
	static const int st[] = { 200, 200, 201, 304, 404, -1 };
	uint64_t x = 88172645463325252ull;
	uint64_t used = 0;
	for (int i = 0; i < 46000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
		const char *w = srv[x % 3];
		/* One line in 4 names the victim's key on another server. */
		uint64_t akey = i % 4 == 0 ? victim : x;
		if (i % 4 == 0 && strcmp(w, "s2") == 0)
			w = "s3";
		size_t n = forged(buf, sizeof(buf), w, akey, st[(x >> 8) % 6],
				  (int)((x >> 16) & 1));
		logsrc_handle(&ls, (const uint8_t *)buf, n, 1000 + (uint64_t)i / 16,
			      0);
		used++;
	}
	ck_assert_uint_eq(r.log.parsed, used);
	ck_assert_uint_eq(r.log.ends[CORE_END_COMPLETE], used);
	ck_assert_uint_eq(map_entries(&r), 1);

	/* The same over the socket. */
	uv_loop_t loop;
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(logsrc_init(&ls, &loop, &r, &cfg, err, sizeof(err)), 0);
	uint64_t before = r.log.parsed;
	for (int i = 0; i < 500; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t n = forged(buf, sizeof(buf), srv[x % 3], x, 200, 0);
		send_to(&loop, path, buf, n);
	}
	for (int i = 0; i < 100 && r.log.parsed < before + 500; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(r.log.parsed, before + 500);
	ck_assert_uint_eq(map_entries(&r), 1);
	logsrc_finish(&ls);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);

	/* Still where feedback put it. */
	struct core_affinity_record rec = { 0 };
	ck_assert_int_eq(core_affinity_export(r.core, 3000, one_record, &rec), 0);
	ck_assert_uint_eq(rec.akey, victim);
	ck_assert_int_eq(rec.endpoint, ep(&r, "s2"));
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* The socket: mode, stale file replaced, a live one refused, bounded work
 * counters, rate-limited logging, removal at stop. */
START_TEST(socket_input)
{
	struct config cfg;
	struct route r;
	struct logsrc ls, other;
	char path[100], err[256];
	uv_loop_t loop;

	ck_assert_msg(dir[0] != '\0', "no temporary directory");
	snprintf(path, sizeof(path), "%s/log.sock", dir);
	/* a stale socket file: bound, then its process gone */
	{
		int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		close(fd);
	}
	load_std(&cfg, path);
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(logsrc_init(&ls, &loop, &r, &cfg, err, sizeof(err)), 0);
	ck_assert(r.log_input);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0640);

	/* a second reader on the same path is refused, and changes nothing */
	struct route r2;
	ck_assert_int_eq(route_init(&r2, &cfg), 0);
	ck_assert_int_eq(logsrc_init(&other, &loop, &r2, &cfg, err, sizeof(err)),
			 -EADDRINUSE);
	ck_assert_ptr_nonnull(strstr(err, "another process"));
	ck_assert(!r2.log_input);

	FILE *logs = tmpfile();
	ck_assert_ptr_nonnull(logs);
	log_set_stream(logs);

	/* 150 datagrams: 100 good lines, 50 bad ones */
	char buf[1024];
	size_t n = line(buf, sizeof(buf), "s1", "s1", 200, "----", "0", 1);
	for (int i = 0; i < 150; i++) {
		if (i % 3 == 2)
			send_to(&loop, path, "<999>nope", 9);
		else
			send_to(&loop, path, buf, n);
	}
	for (int i = 0; i < 10 && r.log.received < 150; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(r.log.received, 150);
	ck_assert_uint_eq(r.log.parsed, 100);
	ck_assert_uint_eq(r.log.unparseable, 50);
	ck_assert_uint_eq(r.log.errors[-HAPLOG_EFRAME], 50);
	ck_assert_uint_eq(r.log.ends[CORE_END_COMPLETE], 100);
	ck_assert_uint_eq(r.log.lag_count, 100);

	/* an oversized datagram is cut and counted */
	static char big[LOGSRC_BUF + 100];
	memset(big, 'x', sizeof(big));
	send_to(&loop, path, big, sizeof(big));
	uv_run(&loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(r.log.truncated, 1);
	ck_assert_uint_eq(r.log.errors[-HAPLOG_ENOFIELDS], 1);

	log_set_stream(NULL);
	fflush(logs);
	rewind(logs);
	unsigned shown = 0;
	char l[1024];
	while (fgets(l, sizeof(l), logs) != NULL)
		if (strstr(l, "msg=\"unparseable log line\"") != NULL)
			shown++;
	fclose(logs);
	ck_assert_uint_eq(shown, LOGSRC_LOG_BURST);

	logsrc_finish(&ls);
	logsrc_finish(&ls); /* twice is fine */
	logsrc_finish(&other);
	ck_assert(!r.log_input);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	ck_assert_int_ne(access(path, F_OK), 0); /* removed */
	route_finish(&r2);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* UDP on loopback with bounded work per loop iteration, and nothing
 * configured. */
/* Under a permissive process umask (0), the log socket is never wider
 * than log_input.mode, not even between its bind and its chmod. */
START_TEST(socket_born_narrow)
{
	struct config cfg;
	struct route r;
	struct logsrc ls;
	char path[100], err[256];
	uv_loop_t loop;

	ck_assert_msg(dir[0] != '\0', "no temporary directory");
	snprintf(path, sizeof(path), "%s/narrow.sock", dir);
	load_std(&cfg, path);
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	mode_t old = umask(0);
	mode_before_chmod = -1;
	int rc = logsrc_init(&ls, &loop, &r, &cfg, err, sizeof(err));
	mode_t during = umask(old);
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_int_eq((int)during, 0); /* the process umask is put back */
	ck_assert_int_ne(mode_before_chmod, -1);
	ck_assert_msg((mode_before_chmod & ~0640) == 0,
		      "socket born %04o, wider than 0640", mode_before_chmod);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0640);
	logsrc_finish(&ls);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	route_finish(&r);
	config_finish(&cfg);
	unlink(path);
}
END_TEST

START_TEST(udp_and_none)
{
	struct config cfg;
	struct route r;
	struct logsrc ls;
	char err[256];
	uv_loop_t loop;

	load(&cfg, "log_input: { path: \"\" }\n");
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(logsrc_init(&ls, &loop, &r, &cfg, err, sizeof(err)), 0);
	ck_assert(!r.log_input);
	logsrc_finish(&ls);

	/* a free port: bind, read it, close */
	int probe = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	ck_assert_int_eq(bind(probe, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(probe, (struct sockaddr *)&sa, &sl), 0);
	close(probe);
	cfg.log_input_udp_port = ntohs(sa.sin_port);
	ck_assert_int_eq(logsrc_init(&ls, &loop, &r, &cfg, err, sizeof(err)), 0);
	ck_assert(r.log_input);
	ls.pass_ns = UINT64_MAX; /* the count bound alone (pass_budget) */
	/* 150 datagrams queued (UDP: the 1 MiB receive buffer holds them):
	 * one loop iteration reads LOGSRC_BATCH of them, no more */
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	for (int i = 0; i < 150; i++)
		ck_assert_int_eq(sendto(fd, "be=llm srv=s1 st=200 ts=----", 28, 0,
					(struct sockaddr *)&sa, sizeof(sa)), 28);
	close(fd);
	for (int i = 0; i < 100 && r.log.received == 0; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		if (r.log.received == 0)
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	ck_assert_uint_eq(r.log.received, LOGSRC_BATCH);
	for (int i = 0; i < 10 && r.log.received < 150; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(r.log.parsed, 150);
	ck_assert_uint_eq(r.log.unrouted, 150);
	logsrc_finish(&ls);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

/* What a readable SPOP connection sees in the same loop iteration as the
 * log socket (logsrc.h). The pipe stands for the connection; it becomes
 * readable after the log socket, so epoll reports it second. A line that
 * arrived first is read first (it may end the request the frame's
 * decision needs); a pass that has taken pass_ns reads no more, and the
 * connection has its turn before the rest. */
static uint64_t read_before = UINT64_MAX;

static void note_received(uv_poll_t *h, int status, int events)
{
	(void)status;
	(void)events;
	struct route *r = h->data;
	read_before = r->log.received;
	uv_poll_stop(h);
}

/* A log socket at dir/name on its own loop, its lines applied to r
 * (load_std's config). */
struct lsock {
	struct config cfg;
	struct route r;
	struct logsrc ls;
	uv_loop_t loop;
	char path[100];
};

static void lsock_open(struct lsock *t, const char *name)
{
	char err[256];
	snprintf(t->path, sizeof(t->path), "%s/%s", dir, name);
	load_std(&t->cfg, t->path);
	ck_assert_int_eq(route_init(&t->r, &t->cfg), 0);
	ck_assert_int_eq(uv_loop_init(&t->loop), 0);
	ck_assert_int_eq(logsrc_init(&t->ls, &t->loop, &t->r, &t->cfg, err,
				     sizeof(err)), 0);
}

static void lsock_close(struct lsock *t)
{
	logsrc_finish(&t->ls);
	uv_run(&t->loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&t->loop), 0);
	route_finish(&t->r);
	config_finish(&t->cfg);
}

START_TEST(lines_and_connections_take_turns)
{
	static struct lsock t;
	lsock_open(&t, "order.sock");
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	uv_poll_t conn;
	ck_assert_int_eq(uv_poll_init(&t.loop, &conn, fds[0]), 0);
	conn.data = &t.r;
	uv_run(&t.loop, UV_RUN_NOWAIT);

	char buf[1024], c;
	size_t n = line(buf, sizeof(buf), "s1", "s1", 200, "----", "0", 1);
	for (int round = 0; round < 2; round++) {
		/* 0: one line, read before the connection; 1: ten lines with
		 * a pass budget of 0, one read before the connection */
		t.ls.pass_ns = round == 0 ? LOGSRC_PASS_NS : 0;
		uint64_t before = t.r.log.received;
		ck_assert_int_eq(uv_poll_start(&conn, UV_READABLE, note_received), 0);
		uv_run(&t.loop, UV_RUN_NOWAIT); /* registered with epoll */
		for (int i = 0; i < (round == 0 ? 1 : 10); i++)
			send_to(&t.loop, t.path, buf, n);
		ck_assert_int_eq(write(fds[1], "x", 1), 1);
		read_before = UINT64_MAX;
		uv_run(&t.loop, UV_RUN_NOWAIT);
		ck_assert_uint_eq(read_before - before, 1);
		ck_assert_uint_eq(t.r.log.received - before, 1);
		ck_assert_int_eq(read(fds[0], &c, 1), 1);
		for (int i = 0; i < 20 && t.r.log.received - before < 10; i++)
			uv_run(&t.loop, UV_RUN_NOWAIT);
	}
	ck_assert_uint_eq(t.r.log.received, 11);
	ck_assert_uint_eq(t.r.log.parsed, 11);

	uv_close((uv_handle_t *)&conn, NULL);
	close(fds[0]);
	close(fds[1]);
	lsock_close(&t);
}
END_TEST

/* A line HAProxy sent before a route frame is applied before the frame is
 * decided, even when epoll reports the connection first
 * (server.before_pass, logsrc_catch_up): the next turn of a conversation,
 * sent as soon as the previous answer is in, finds that turn's success
 * and stays on its server by affinity. */
static void catch_up_turn(bool hooked, char *reason, size_t cap)
{
	char path[100], yaml[1024], err[256];
	snprintf(path, sizeof(path), "%s/turns.sock", dir);
	snprintf(yaml, sizeof(yaml),
		 "log_input: { path: \"%s\" }\n"
		 "endpoints:\n"
		 "  - { backend: llm, server: s1, keys: [k1] }\n"
		 "  - { backend: llm, server: s2, keys: [k1] }\n"
		 "  - { backend: llm, server: s3, keys: [k1] }\n", path);
	struct harness h;
	struct logsrc ls;
	harness_init(&h, yaml);
	ck_assert_int_eq(logsrc_init(&ls, &h.loop, &h.srv.route, &h.cfg, err,
				     sizeof(err)), 0);
	if (hooked) {
		h.srv.before_pass = logsrc_catch_up;
		h.srv.before_pass_arg = &ls;
	}
	struct client *c = harness_client(&h, 0);
	static struct fb f;
	static uint8_t fr[65536];
	struct ack_vars v;
	f.len = 0;
	fb_hello(&f, 16380);
	client_send(&h, c, f.b, f.len);
	ck_assert(client_frame(&h, c, fr, sizeof(fr), 2000) > 0);

	/* turn 1 of c1, decided by hash; its line has been seen once */
	const char *const t1[] = { "session", "c1", NULL };
	f.len = 0;
	fb_route(&f, 1, 1, t1);
	client_send(&h, c, f.b, f.len);
	ptrdiff_t n = client_frame(&h, c, fr, sizeof(fr), 2000);
	ck_assert(n > 0);
	answer_ack(fr, (size_t)n, 1, 1, &v);
	ck_assert_str_eq(ack_str(&v, "reason"), "hash");
	char srv[32], akey[32], line[1024];
	snprintf(srv, sizeof(srv), "%s", ack_str(&v, "server"));
	snprintf(akey, sizeof(akey), "%s", ack_str(&v, "akey"));
#define TURN_LINE "<134>1 2026-11-29T10:21:44.552318+00:00 - haproxy 1 - - " \
		  "be=llm srv=%s st=200 ts=---- rc=0 tw=0 tc=0 tr=30 ta=40 " \
		  "tt=40 bytes=900 at=1795947704.530 wbe=llm wsrv=%s key=k1 " \
		  "akey=%s reason=hash fb=0 stream=- id=\"x\" 127.0.0.1:1 " \
		  "\"POST / HTTP/1.1\"\n"
	int ln = snprintf(line, sizeof(line), TURN_LINE, "s1", "s1", "-");
	send_to(&h.loop, path, line, (size_t)ln);
	for (int i = 0; i < 100 && h.srv.route.log.received == 0; i++)
		uv_run(&h.loop, UV_RUN_NOWAIT);
	ck_assert(h.srv.route.log_lines);

	/* epoll reports the connection first: the log socket's poll is held
	 * for this iteration (epoll's order of two ready sockets is the
	 * kernel's), and the frames are written without running the loop
	 * (client_send runs it) */
	ck_assert_int_eq(uv_poll_stop(&ls.unix_sock.poll), 0);
	const char *const other[] = { "session", "c2", NULL };
	f.len = 0;
	fb_route(&f, 2, 1, other);
	ck_assert_int_eq(write(c->fd, f.b, f.len), (ssize_t)f.len);
	ln = snprintf(line, sizeof(line), TURN_LINE, srv, srv, akey);
#undef TURN_LINE
	int lfd = socket(AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(sendto(lfd, line, (size_t)ln, 0, (struct sockaddr *)&sa,
				sizeof(sa)), ln);
	close(lfd);
	f.len = 0;
	fb_route(&f, 3, 1, t1);
	ck_assert_int_eq(write(c->fd, f.b, f.len), (ssize_t)f.len);
	n = client_frame(&h, c, fr, sizeof(fr), 2000);
	ck_assert(n > 0);
	answer_ack(fr, (size_t)n, 2, 1, &v);
	n = client_frame(&h, c, fr, sizeof(fr), 2000);
	ck_assert(n > 0);
	answer_ack(fr, (size_t)n, 3, 1, &v);
	ck_assert_str_eq(ack_str(&v, "server"), srv);
	snprintf(reason, cap, "%s", ack_str(&v, "reason"));

	client_free(c);
	logsrc_finish(&ls);
	harness_finish(&h);
}

START_TEST(line_before_frame_applied_first)
{
	char reason[32];
	catch_up_turn(true, reason, sizeof(reason));
	ck_assert_str_eq(reason, "affinity");
	/* the set-up is conclusive: without the hook the turn came first */
	catch_up_turn(false, reason, sizeof(reason));
	ck_assert_str_eq(reason, "hash");
}
END_TEST

/* A pass stops after the line that took it past pass_ns: with 0, one line
 * an iteration, and the others in the iterations after. */
START_TEST(pass_budget)
{
	static struct lsock t;
	lsock_open(&t, "budget.sock");
	ck_assert_uint_eq(t.ls.pass_ns, LOGSRC_PASS_NS);
	ck_assert_uint_eq(t.ls.catch_up_ns, LOGSRC_CATCH_UP_NS);
	t.ls.pass_ns = 0;
	char buf[1024];
	size_t n = line(buf, sizeof(buf), "s1", "s1", 200, "----", "0", 1);
	for (int i = 0; i < 5; i++)
		send_to(&t.loop, t.path, buf, n);
	uv_run(&t.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(t.r.log.received, 1);
	for (int i = 0; i < 10 && t.r.log.received < 5; i++)
		uv_run(&t.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(t.r.log.received, 5);
	ck_assert_uint_eq(t.r.log.parsed, 5);
	lsock_close(&t);
}
END_TEST

/* A catch-up reads LOGSRC_CATCH_UP_MIN lines before its time bound may
 * stop it: one preempted on its first line (here: a bound of 0) still
 * reads the lines queued behind it, among them the one that ended the
 * turn the frame continues; past the minimum, the bound holds. */
START_TEST(catch_up_minimum)
{
	static struct lsock t;
	lsock_open(&t, "catchup.sock");
	t.ls.catch_up_ns = 0;
	char buf[1024];
	size_t n = line(buf, sizeof(buf), "s1", "s1", 200, "----", "0", 1);
	logsrc_catch_up(&t.ls); /* before HAProxy's first line: no recv */
	send_to(&t.loop, t.path, buf, n);
	uv_run(&t.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(t.r.log.received, 1);
	ck_assert(t.r.log_lines);
	/* held, as when epoll reports the connection first */
	ck_assert_int_eq(uv_poll_stop(&t.ls.unix_sock.poll), 0);
	for (int i = 0; i < 10; i++)
		send_to(&t.loop, t.path, buf, n);
	logsrc_catch_up(&t.ls);
	ck_assert_uint_eq(t.r.log.received, 11);
	for (int i = 0; i < LOGSRC_CATCH_UP_MIN + 5; i++)
		send_to(&t.loop, t.path, buf, n);
	logsrc_catch_up(&t.ls);
	ck_assert_uint_eq(t.r.log.received, 11 + LOGSRC_CATCH_UP_MIN);
	t.ls.catch_up_ns = LOGSRC_CATCH_UP_NS;
	logsrc_catch_up(&t.ls);
	ck_assert_uint_eq(t.r.log.received, 16 + LOGSRC_CATCH_UP_MIN);
	ck_assert_uint_eq(t.r.log.parsed, 16 + LOGSRC_CATCH_UP_MIN);
	lsock_close(&t);
}
END_TEST

/* A poll error (libuv stops the handle and reports it once): that socket
 * is no longer read; when none is, the log input is off, so that
 * non-streamed feedback ends requests again. libuv's part is played here:
 * the handle stopped, the callback called with the error. */
START_TEST(poll_error_turns_input_off)
{
	struct config cfg;
	struct route r;
	struct logsrc ls;
	char path[100], err[256];
	uv_loop_t loop;

	ck_assert_msg(dir[0] != '\0', "no temporary directory");
	snprintf(path, sizeof(path), "%s/log.sock", dir);
	load_std(&cfg, path);
	/* a free UDP port on loopback */
	int probe = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	ck_assert_int_eq(bind(probe, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(probe, (struct sockaddr *)&sa, &sl), 0);
	close(probe);
	cfg.log_input_udp_port = ntohs(sa.sin_port);
	ck_assert_int_eq(route_init(&r, &cfg), 0);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(logsrc_init(&ls, &loop, &r, &cfg, err, sizeof(err)), 0);
	ck_assert(r.log_input);

	FILE *logs = tmpfile();
	ck_assert_ptr_nonnull(logs);
	log_set_stream(logs);
	uv_poll_stop(&ls.unix_sock.poll);
	ls.unix_sock.poll.poll_cb(&ls.unix_sock.poll, UV_EBADF, 0);
	ck_assert(r.log_input); /* UDP is still read */
	uv_poll_stop(&ls.udp_sock.poll);
	ls.udp_sock.poll.poll_cb(&ls.udp_sock.poll, UV_EBADF, 0);
	ck_assert(!r.log_input);
	log_set_stream(NULL);
	fclose(logs);

	logsrc_finish(&ls);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	route_finish(&r);
	config_finish(&cfg);
}
END_TEST

START_TEST(config_checks)
{
	struct config cfg;
	char err[4096];
	ck_assert_int_eq(config_init(&cfg), 0);
	ck_assert_str_eq(cfg.log_input_path, "/var/lib/haproxy/warmlane/log.sock");
	ck_assert_uint_eq(cfg.log_input_mode, 0660);
	static const char bad[] =
		"log_input: { mode: \"0999\", udp_port: 70000 }\n"
		"policy: { score_by: fastest }\n";
	ck_assert_int_eq(config_load_data(&cfg, "b.yaml", bad, strlen(bad), err,
					  sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "b.yaml:1:20: log_input.mode:"));
	ck_assert_ptr_nonnull(strstr(err, "b.yaml:1:38: log_input.udp_port:"));
	ck_assert_ptr_nonnull(strstr(err, "b.yaml:2:21: policy.score_by:"));
	static const char good[] =
		"log_input: { path: \"/x/l.sock\", mode: \"600\", udp_port: 5514 }\n"
		"policy: { score_by: end_to_end }\n";
	ck_assert_int_eq(config_load_data(&cfg, "g.yaml", good, strlen(good), err,
					  sizeof(err)), 0);
	ck_assert_str_eq(cfg.log_input_path, "/x/l.sock");
	ck_assert_uint_eq(cfg.log_input_mode, 0600);
	ck_assert_uint_eq(cfg.log_input_udp_port, 5514);
	ck_assert_int_eq(cfg.params.score_by, CORE_SCORE_END_TO_END);
	config_finish(&cfg);
}
END_TEST

static Suite *logsrc_suite(void)
{
	Suite *s = suite_create("logsrc");
	TCase *tc = tcase_create("logsrc");
	tcase_add_unchecked_fixture(tc, dir_setup, dir_teardown);
	tcase_add_test(tc, end_classes);
	tcase_add_test(tc, completion_counts_once);
	tcase_add_test(tc, streamed_success_waits_for_line);
	tcase_add_test(tc, failures);
	tcase_add_test(tc, lag_needs_accept_time);
	tcase_add_test(tc, forged_lines_never_insert);
	tcase_add_test(tc, format_check);
	tcase_add_test(tc, socket_input);
	tcase_add_test(tc, socket_born_narrow);
	tcase_add_test(tc, udp_and_none);
	tcase_add_test(tc, lines_and_connections_take_turns);
	tcase_add_test(tc, pass_budget);
	tcase_add_test(tc, catch_up_minimum);
	tcase_add_test(tc, line_before_frame_applied_first);
	tcase_add_test(tc, poll_error_turns_input_off);
	tcase_add_test(tc, config_checks);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(logsrc_suite());
	int failed;

	srunner_run_all(sr, CK_SILENT);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
