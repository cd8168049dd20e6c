/* test_runtime.c - agent: the `show stat` CSV parser on captures of HAProxy 2.6/3.0/3.2, and the poller against a fake stats socket (50,000 servers too). */
#include <check.h>
#include <inttypes.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "log.h"
#include "route.h"
#include "runtime.h"

static const char *data_dir = "data"; /* argv[1]: tests/unit/agent/data */

/* ---- the CSV parser ---- */

struct got_row {
	char px[64], sv[64], mode[16];
	uint32_t scur, qcur;
	enum core_admin admin;
	bool known;
	int64_t weight;
	int64_t sid;
	int64_t slim;
	int64_t check_ms;
};

struct rows {
	struct got_row r[64];
	unsigned n;
};

static void collect(void *arg, const struct runtime_row *row)
{
	struct rows *rs = arg;
	ck_assert_uint_lt(rs->n, 64);
	struct got_row *g = &rs->r[rs->n++];
	ck_assert_uint_lt(row->pxname.len, sizeof(g->px));
	ck_assert_uint_lt(row->svname.len, sizeof(g->sv));
	memcpy(g->px, row->pxname.ptr, row->pxname.len);
	g->px[row->pxname.len] = '\0';
	memcpy(g->sv, row->svname.ptr, row->svname.len);
	g->sv[row->svname.len] = '\0';
	size_t ml = row->mode.len < sizeof(g->mode) ? row->mode.len : 0;
	if (ml > 0) /* an absent column is a NULL view */
		memcpy(g->mode, row->mode.ptr, ml);
	g->mode[ml] = '\0';
	g->scur = row->scur;
	g->qcur = row->qcur;
	g->admin = row->admin;
	g->known = row->status_known;
	g->weight = row->weight;
	g->sid = row->sid;
	g->slim = row->slim;
	g->check_ms = row->check_ms;
}

static const struct got_row *find_row(const struct rows *rs, const char *px,
				      const char *sv)
{
	for (unsigned i = 0; i < rs->n; i++)
		if (strcmp(rs->r[i].px, px) == 0 && strcmp(rs->r[i].sv, sv) == 0)
			return &rs->r[i];
	ck_abort_msg("no row %s/%s", px, sv);
	return NULL;
}

static char *slurp(const char *name, size_t *len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", data_dir, name);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	char *b = malloc(1 << 20);
	ck_assert_ptr_nonnull(b);
	*len = fread(b, 1, 1 << 20, f);
	fclose(f);
	return b;
}

/* Feeds text in chunks of `chunk` bytes (0: whole). */
static int parse(struct runtime_csv *p, const char *text, size_t len,
		 size_t chunk, struct rows *rs)
{
	runtime_csv_init(p);
	memset(rs, 0, sizeof(*rs));
	size_t off = 0;
	while (off < len) {
		size_t n = chunk == 0 || len - off < chunk ? len - off : chunk;
		int r = runtime_csv_feed(p, text + off, n, collect, rs);
		if (r < 0)
			return r;
		off += n;
	}
	return runtime_csv_finish(p, collect, rs);
}

static void check_capture(const struct rows *rs)
{
	/* llm s1..s9 and dyn1, busy/b1, other/o1, warmlane-agents/agent1. */
	ck_assert_uint_eq(rs->n, 13);
	const struct got_row *g;
	g = find_row(rs, "llm", "s1");
	ck_assert_int_eq(g->admin, CORE_ADMIN_ENABLED); /* "no check" */
	ck_assert(g->known);
	ck_assert_int_eq(g->weight, 1);
	ck_assert_str_eq(g->mode, "http");
	/* The server ids a shared hint names (hint.c). */
	ck_assert_int_eq(g->sid, 1);
	ck_assert_int_eq(find_row(rs, "llm", "s7")->sid, 7);
	/* maxconn: the server's slots (policy.place_slots); none set: -1 */
	ck_assert_int_eq(g->slim, -1);
	ck_assert_int_eq(find_row(rs, "busy", "b1")->slim, 2);
	ck_assert_int_eq(find_row(rs, "llm", "s2")->admin, CORE_ADMIN_DOWN);
	ck_assert_int_eq(find_row(rs, "llm", "s3")->admin, CORE_ADMIN_MAINT);
	ck_assert_int_eq(find_row(rs, "llm", "s4")->admin, CORE_ADMIN_DRAIN);
	/* "MAINT (via llm/s3)" */
	ck_assert_int_eq(find_row(rs, "llm", "s5")->admin, CORE_ADMIN_MAINT);
	g = find_row(rs, "llm", "s6");
	ck_assert_int_eq(g->admin, CORE_ADMIN_ENABLED);
	ck_assert_int_eq(g->weight, 0);
	ck_assert_int_eq(find_row(rs, "llm", "s7")->admin, CORE_ADMIN_ENABLED);
	/* "UP 995/1000": up, going down */
	ck_assert_int_eq(find_row(rs, "llm", "s9")->admin, CORE_ADMIN_ENABLED);
	ck_assert_int_eq(find_row(rs, "llm", "dyn1")->admin, CORE_ADMIN_ENABLED);
	g = find_row(rs, "busy", "b1");
	ck_assert_uint_eq(g->scur, 2);
	ck_assert_uint_eq(g->qcur, 0);
	ck_assert_str_eq(find_row(rs, "warmlane-agents", "agent1")->mode, "tcp");
	for (unsigned i = 0; i < rs->n; i++)
		ck_assert_msg(rs->r[i].known, "%s/%s", rs->r[i].px, rs->r[i].sv);
}

START_TEST(csv_captures)
{
	static const char *const files[] = {
		"show-stat-servers-2.6.csv", "show-stat-servers-3.0.csv",
		"show-stat-servers-3.2.csv",
		/* the whole `show stat`: FRONTEND and BACKEND lines skipped */
		"show-stat-2.6.csv", "show-stat-3.0.csv", "show-stat-3.2.csv",
	};
	static const size_t chunks[] = { 0, 1, 7, 100, 4096 };
	struct runtime_csv *p = malloc(sizeof(*p));
	struct rows *rs = malloc(sizeof(*rs));
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		size_t len;
		char *text = slurp(files[f], &len);
		ck_assert_uint_gt(len, 1000);
		for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
			ck_assert_int_eq(parse(p, text, len, chunks[c], rs), 0);
			ck_assert_uint_eq(p->bad, 0);
			ck_assert_uint_eq(p->dropped, 0);
			check_capture(rs);
		}
		/* Without its final newline the last line still counts. */
		ck_assert_int_eq(parse(p, text, len - 2, 0, rs), 0);
		check_capture(rs);
		free(text);
	}
	free(p);
	free(rs);
}
END_TEST

/* `show stat -1 4 -1; show peers` as HAProxy answers it: the CSV, then
 * the peers dump (sections `warmlane`, sharing a table, and `spare`,
 * sharing none, whose peer never answers). Apart: haproxy2 connected,
 * haproxy3 listed but never started; connected: haproxy3 not listed. */
START_TEST(peers_captures)
{
	static const char *const versions[] = { "2.6", "3.0", "3.2" };
	static const size_t chunks[] = { 0, 1, 7, 100 };
	struct runtime_csv *p = malloc(sizeof(*p));
	struct rows *rs = malloc(sizeof(*rs));
	for (size_t v = 0; v < 3; v++) {
		for (int apart = 0; apart < 2; apart++) {
			char name[64];
			snprintf(name, sizeof(name), "show-peers-%s-%s.txt",
				 apart ? "apart" : "connected", versions[v]);
			size_t len;
			char *text = slurp(name, &len);
			for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
				ck_assert_int_eq(parse(p, text, len, chunks[c], rs), 0);
				ck_assert_uint_eq(rs->n, 1);
				ck_assert_uint_eq(p->bad, 0);
				ck_assert_int_eq(runtime_peers_end(&p->peers),
						 apart ? CORE_PEERS_APART : CORE_PEERS_CONNECTED);
				ck_assert_uint_eq(p->peers.sections, 1);
				ck_assert_uint_eq(p->peers.remote, apart ? 2 : 1);
				ck_assert_uint_eq(p->peers.connected, 1);
			}
			free(text);
		}
	}
	free(p);
	free(rs);
}
END_TEST

static enum core_peers peers_of(struct runtime_csv *p, struct rows *rs,
				const char *dump)
{
	char text[2048];
	snprintf(text, sizeof(text), "# pxname,svname,qcur,scur,status\n"
				     "llm,s1,0,1,UP\n\n%s", dump);
	ck_assert_int_eq(parse(p, text, strlen(text), 0, rs), 0);
	ck_assert_uint_eq(rs->n, 1);
	ck_assert_uint_eq(p->bad, 0);
	return runtime_peers_end(&p->peers);
}

START_TEST(peers_words)
{
	struct runtime_csv *p = malloc(sizeof(*p));
	struct rows *rs = malloc(sizeof(*rs));
	const char *sec = "0x1: [06/Dec/2026:14:39:36] id=warmlane disabled=0\n";
	const char *tab = "        shared tables:\n"
			  "          0x5 local_id=1 remote_id=1\n"
			  "              table:0x6 id=warmlane_hints update=0\n";
	const char *local = "  0x2: id=haproxy1(local,inactive) addr=10.0.0.1:10000 last_status=NONE\n";
	char d[1024];
	/* No dump (the command without it), or an error instead. */
	ck_assert_int_eq(peers_of(p, rs, ""), CORE_PEERS_UNKNOWN);
	ck_assert_int_eq(peers_of(p, rs, "Unknown command: 'show peers'\n"),
			 CORE_PEERS_UNKNOWN);
	/* A section sharing no table does not count. */
	snprintf(d, sizeof(d), "%s  0x3: id=b(remote,active) addr=x last_status=CONN\n", sec);
	ck_assert_int_eq(peers_of(p, rs, d), CORE_PEERS_UNKNOWN);
	/* Alone in its section: connected to all (none). CRLF too. */
	snprintf(d, sizeof(d), "%s%s%s", sec, local, tab);
	ck_assert_int_eq(peers_of(p, rs, d), CORE_PEERS_CONNECTED);
	snprintf(d, sizeof(d), "0x1: [x] id=w\r\n  0x2: id=a(local,inactive)\r\n"
		 "     table:0x6 id=t\r\n");
	ck_assert_int_eq(peers_of(p, rs, d), CORE_PEERS_CONNECTED);
	/* A session that ended (ESTA from before, inactive), one connecting
	 * (active, CONN), a status word that only begins with ESTA. */
	static const char *const apart[] = {
		"  0x3: id=b(remote,inactive) addr=x last_status=ESTA last_hdshk=2s\n",
		"  0x3: id=b(remote,active) addr=x last_status=CONN last_hdshk=0s\n",
		"  0x3: id=b(remote,active) addr=x last_status=ESTAB\n",
		"  0x3: id=b(remote,active) addr=x\n",
	};
	for (size_t i = 0; i < sizeof(apart) / sizeof(apart[0]); i++) {
		snprintf(d, sizeof(d), "%s%s%s%s", sec, apart[i], tab, local);
		ck_assert_msg(peers_of(p, rs, d) == CORE_PEERS_APART, "%s", apart[i]);
	}
	/* Connected; then a second section sharing a table, apart. */
	const char *up = "  0x3: id=b(remote,active) addr=x app_state=RUNNING last_status=ESTA last_hdshk=1s\n";
	snprintf(d, sizeof(d), "%s%s%s", sec, up, tab);
	ck_assert_int_eq(peers_of(p, rs, d), CORE_PEERS_CONNECTED);
	snprintf(d, sizeof(d), "%s%s%s\n%s%s%s", sec, up, tab, sec, apart[1], tab);
	ck_assert_int_eq(peers_of(p, rs, d), CORE_PEERS_APART);
	ck_assert_uint_eq(p->peers.sections, 2);
	/* A line over RUNTIME_LINE_MAX in the dump (the peer line lost, the
	 * rest says connected): unknown, and no CSV line lost for the
	 * servers' removal. */
	size_t big = RUNTIME_LINE_MAX + 64;
	char *t = malloc(big + 512);
	int n = snprintf(t, 512, "# pxname,svname,qcur,scur,status\nllm,s1,0,1,UP\n\n%s  0x3: id=b(remote,inactive) ",
			 sec);
	memset(t + n, 'x', big);
	snprintf(t + n + big, 512, "\n%s%s", up, tab);
	runtime_csv_init(p);
	memset(rs, 0, sizeof(*rs));
	ck_assert_int_eq(runtime_csv_feed(p, t, strlen(t), collect, rs), 0);
	ck_assert_int_eq(runtime_csv_finish(p, collect, rs), 0);
	ck_assert_uint_eq(rs->n, 1);
	ck_assert_uint_eq(p->dropped, 0);
	ck_assert_int_eq(runtime_peers_end(&p->peers), CORE_PEERS_UNKNOWN);
	free(t);
	free(p);
	free(rs);
}
END_TEST

START_TEST(csv_by_name)
{
	struct runtime_csv *p = malloc(sizeof(*p));
	struct rows *rs = malloc(sizeof(*rs));
	/* Another order, no weight/type/mode columns, CRLF, a quoted
	 * description with commas and quotes before the status. */
	const char *t = "# svname,desc,pxname,status,qcur,scur\r\n"
			"s1,\"a, \"\"b\"\", c\",llm,UP 1/3,4,5\r\n"
			"BACKEND,,llm,UP,0,9\r\n"
			"s2,,llm,NOLB 1/2,,\r\n";
	ck_assert_int_eq(parse(p, t, strlen(t), 0, rs), 0);
	ck_assert_uint_eq(rs->n, 2);
	const struct got_row *g = find_row(rs, "llm", "s1");
	ck_assert_int_eq(g->admin, CORE_ADMIN_ENABLED);
	ck_assert_uint_eq(g->scur, 5);
	ck_assert_uint_eq(g->qcur, 4);
	ck_assert_int_eq(g->weight, -1);
	g = find_row(rs, "llm", "s2");
	ck_assert_int_eq(g->admin, CORE_ADMIN_NOLB);
	ck_assert_uint_eq(g->scur, 0); /* empty: 0 */

	/* A required column missing. */
	t = "# pxname,svname,scur,status\nllm,s1,1,UP\n";
	ck_assert_int_eq(parse(p, t, strlen(t), 0, rs), -EPROTO);
	/* No header at all: an error message from HAProxy. */
	t = "Permission denied\n\n";
	ck_assert_int_eq(parse(p, t, strlen(t), 0, rs), -EPROTO);
	ck_assert_uint_eq(p->bad, 1);
	t = "";
	ck_assert_int_eq(parse(p, t, 0, 0, rs), -EPROTO);

	/* Bad numbers and short lines are counted, not delivered. */
	t = "# pxname,svname,qcur,scur,status\n"
	    "llm,s1,x,1,UP\nllm,s2\nllm,s3,0,99999999999,UP\n,s4,0,0,UP\n"
	    "llm,s5,0,3,UP\n";
	ck_assert_int_eq(parse(p, t, strlen(t), 0, rs), 0);
	ck_assert_uint_eq(p->bad, 4);
	ck_assert_uint_eq(rs->n, 1);
	ck_assert_uint_eq(find_row(rs, "llm", "s5")->scur, 3);

	/* An over-long line is dropped to its newline, whatever the
	 * chunking; the next line is intact. */
	size_t big = RUNTIME_LINE_MAX + 100;
	char *b = malloc(big + 200);
	int n = snprintf(b, 200, "# pxname,svname,qcur,scur,status\nllm,s1,0,0,");
	memset(b + n, 'U', big);
	n += (int)big;
	n += snprintf(b + n, 200, "\nllm,s2,0,1,DOWN\n");
	for (size_t chunk = 0; chunk <= 4096; chunk += 1024) {
		ck_assert_int_eq(parse(p, b, (size_t)n, chunk, rs), 0);
		ck_assert_uint_eq(p->dropped, 1);
		ck_assert_uint_eq(rs->n, 1);
		ck_assert_int_eq(find_row(rs, "llm", "s2")->admin, CORE_ADMIN_DOWN);
	}
	free(b);
	free(p);
	free(rs);
}
END_TEST

START_TEST(status_words)
{
	static const struct {
		const char *s;
		enum core_admin a;
		bool known;
	} t[] = {
		{ "UP", CORE_ADMIN_ENABLED, true },
		{ "UP 1/3", CORE_ADMIN_ENABLED, true },
		{ "UP (agent)", CORE_ADMIN_ENABLED, true },
		{ "no check", CORE_ADMIN_ENABLED, true },
		{ "DOWN", CORE_ADMIN_DOWN, true },
		{ "DOWN 1/2", CORE_ADMIN_DOWN, true },
		{ "DOWN (agent)", CORE_ADMIN_DOWN, true },
		{ "MAINT", CORE_ADMIN_MAINT, true },
		{ "MAINT (via llm/s3)", CORE_ADMIN_MAINT, true },
		{ "MAINT (resolution)", CORE_ADMIN_MAINT, true },
		{ "DRAIN", CORE_ADMIN_DRAIN, true },
		{ "DRAIN (agent)", CORE_ADMIN_DRAIN, true },
		{ "NOLB", CORE_ADMIN_NOLB, true },
		{ "NOLB 1/2", CORE_ADMIN_NOLB, true },
		{ "", CORE_ADMIN_DOWN, false },
		{ "UPX", CORE_ADMIN_DOWN, false },
		{ "up", CORE_ADMIN_DOWN, false },
		{ "no", CORE_ADMIN_DOWN, false },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		bool known;
		enum core_admin a = runtime_status_admin(core_str_c(t[i].s), &known);
		ck_assert_msg(a == t[i].a && known == t[i].known, "\"%s\"", t[i].s);
	}
}
END_TEST

/* ---- the poller against a fake stats socket ---- */

/* What each connection to the fake socket gets; the last one repeats. */
static const char *const *fake_answers;
static unsigned fake_n_answers, fake_conns;
static char fake_cmd[64];

struct fake_conn {
	uv_pipe_t pipe;
	uv_write_t wr;
	char rbuf[256];
	size_t len;
	bool answered;
};

static void fake_closed(uv_handle_t *h)
{
	free(h->data);
}

static void fake_written(uv_write_t *w, int status)
{
	(void)status;
	/* Non-interactive mode: one command, then HAProxy closes. */
	uv_close((uv_handle_t *)w->handle, fake_closed);
}

static void fake_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
	struct fake_conn *c = h->data;
	(void)size;
	*buf = uv_buf_init(c->rbuf + c->len, (unsigned)(sizeof(c->rbuf) - 1 - c->len));
}

static void fake_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct fake_conn *c = s->data;
	(void)buf;
	if (n < 0) {
		if (!uv_is_closing((uv_handle_t *)s))
			uv_close((uv_handle_t *)s, fake_closed);
		return;
	}
	c->len += (size_t)n;
	c->rbuf[c->len] = '\0';
	if (c->answered || memchr(c->rbuf, '\n', c->len) == NULL)
		return;
	c->answered = true;
	size_t cl = c->len < sizeof(fake_cmd) - 1 ? c->len : sizeof(fake_cmd) - 1;
	memcpy(fake_cmd, c->rbuf, cl);
	fake_cmd[cl] = '\0';
	unsigned i = fake_conns < fake_n_answers ? fake_conns : fake_n_answers - 1;
	fake_conns++;
	uv_read_stop(s);
	uv_buf_t b = uv_buf_init((char *)(uintptr_t)fake_answers[i],
				 (unsigned)strlen(fake_answers[i]));
	ck_assert_int_eq(uv_write(&c->wr, s, &b, 1, fake_written), 0);
}

static void fake_accept(uv_stream_t *ls, int status)
{
	ck_assert_int_eq(status, 0);
	struct fake_conn *c = calloc(1, sizeof(*c));
	ck_assert_int_eq(uv_pipe_init(ls->loop, &c->pipe, 0), 0);
	c->pipe.data = c;
	ck_assert_int_eq(uv_accept(ls, (uv_stream_t *)&c->pipe), 0);
	ck_assert_int_eq(uv_read_start((uv_stream_t *)&c->pipe, fake_alloc,
				       fake_read), 0);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs the loop until *counter reaches want (or 3 s pass). */
static void run_until(struct harness *h, const uint64_t *counter, uint64_t want)
{
	uint64_t deadline = mono_ms() + 3000;
	while (*counter < want && mono_ms() < deadline)
		uv_run(&h->loop, UV_RUN_ONCE);
	ck_assert_msg(*counter >= want, "counter %llu < %llu",
		      (unsigned long long)*counter, (unsigned long long)want);
}

static struct core_endpoint_info ep_info(struct harness *h, const char *path,
					 const char *key)
{
	struct core_endpoint_info info;
	int i = core_endpoint_find_path(h->srv.route.core, core_str_c(path),
					core_str_c(key));
	ck_assert_msg(i >= 0, "no endpoint %s key %s", path, key ? key : "-");
	ck_assert_int_eq(core_endpoint_info(h->srv.route.core, i, 0, &info), 0);
	return info;
}

static bool has_ep(struct harness *h, const char *path, const char *key)
{
	return core_endpoint_find_path(h->srv.route.core, core_str_c(path),
				       core_str_c(key)) >= 0;
}

#define HDR "# pxname,svname,qcur,qmax,scur,smax,status,weight,type,mode,bck,\n"
#define HDR_SLIM "# pxname,svname,qcur,qmax,scur,smax,status,weight,type,mode,bck,slim\n"

START_TEST(csv_check_duration)
{
	/* check_duration counts only after a layer-7 check that passed
	 * (explore_check compares servers by it): HAProxy 2.6 prints
	 * "* L7OK", code 0 and the last duration while the next check runs.
	 * A bare connect (L4OK), a failed check or none give -1. */
	static const char text[] =
		"# pxname,svname,qcur,qmax,scur,smax,status,weight,type,mode,check_status,check_code,check_duration\n"
		"llm,s1,0,,0,,UP,1,2,http,L7OK,200,51\n"
		"llm,s2,0,,0,,UP,1,2,http,* L7OK,0,803\n"
		"llm,s3,0,,0,,UP,1,2,http,L7OKC,404,12\n"
		"llm,s4,0,,0,,UP,1,2,http,L4OK,,0\n"
		"llm,s5,0,,0,,DOWN,1,2,http,L7STS,500,9\n"
		"llm,s6,0,,0,,DOWN,1,2,http,L4CON,,0\n"
		"llm,s7,0,,0,,no check,1,2,http,,,\n"
		"llm,s8,0,,0,,UP,1,2,http,L7OK,200,\n"
		"llm,s9,0,,0,,UP,1,2,http,* L7,0,40\n"
		"llm,s10,0,,0,,UP,1,2,http,L7OK,200,x1\n";
	struct runtime_csv p;
	struct rows rs;
	ck_assert_int_eq(parse(&p, text, sizeof(text) - 1, 0, &rs), 0);
	ck_assert_uint_eq(rs.n, 10);
	ck_assert_int_eq(find_row(&rs, "llm", "s1")->check_ms, 51);
	ck_assert_int_eq(find_row(&rs, "llm", "s2")->check_ms, 803);
	ck_assert_int_eq(find_row(&rs, "llm", "s3")->check_ms, 12);
	ck_assert_int_eq(find_row(&rs, "llm", "s4")->check_ms, -1);
	ck_assert_int_eq(find_row(&rs, "llm", "s5")->check_ms, -1);
	ck_assert_int_eq(find_row(&rs, "llm", "s6")->check_ms, -1);
	ck_assert_int_eq(find_row(&rs, "llm", "s7")->check_ms, -1);
	ck_assert_int_eq(find_row(&rs, "llm", "s8")->check_ms, -1);
	ck_assert_int_eq(find_row(&rs, "llm", "s9")->check_ms, -1);
	ck_assert_int_eq(find_row(&rs, "llm", "s10")->check_ms, -1);
	/* without the columns (an older or filtered CSV): none */
	static const char bare[] = HDR "llm,s1,0,,0,,UP,1,2,http,,\n";
	ck_assert_int_eq(parse(&p, bare, sizeof(bare) - 1, 0, &rs), 0);
	ck_assert_uint_eq(rs.n, 1);
	ck_assert_int_eq(rs.r[0].check_ms, -1);
}
END_TEST

START_TEST(poller_syncs_core)
{
	char dir[64], yaml[1024], sock[160];
	make_temp_dir(dir, sizeof(dir));
	snprintf(sock, sizeof(sock), "%s/stats.sock", dir);
	snprintf(yaml, sizeof(yaml),
		 "runtime_api: {socket: \"%s\", poll_interval: 10ms}\n"
		 "endpoints:\n"
		 "  - {backend: llm, server: s1, keys: [k1, k2], models: [m1]}\n"
		 "  - {backend: llm, server: s2, slots: 4}\n"
		 "  - {backend: llm, server: gone}\n",
		 sock);
	static const char *const answers[] = {
		/* poll 1: s1 busy and split over its two keys, s2 in
		 * maintenance, s3 added at run time, another backend; the
		 * maxconn of s1 (split too), s2 (its slots say otherwise)
		 * and s3 */
		HDR_SLIM
		"llm,s1,1,,4,,UP,1,2,http,,3\n"
		"llm,s2,0,,0,,MAINT (via llm/s1),1,2,http,,1\n"
		"llm,s3,0,,2,,no check,1,2,http,,1\n"
		"llm,s4,0,,0,,UP,1,2,http,1,\n"
		"llm,BACKEND,0,,6,,UP,2,1,http,,\n"
		"other,o1,0,,0,,UP,1,2,http,,\n\n",
		/* poll 2: s1 draining and its maxconn gone, s2 back, s3
		 * removed again */
		HDR_SLIM
		"llm,s1,0,,1,,DRAIN,1,2,http,,\n"
		"llm,s2,2,,1,,UP 2/3,1,2,http,,\n"
		"llm,s4,0,,0,,UP,1,2,http,1,\n",
	};
	fake_answers = answers;
	fake_n_answers = 2;
	fake_conns = 0;

	struct harness h;
	harness_init(&h, yaml);
	uv_pipe_t ls;
	ck_assert_int_eq(uv_pipe_init(&h.loop, &ls, 0), 0);
	ck_assert_int_eq(uv_pipe_bind(&ls, sock), 0);
	ck_assert_int_eq(uv_listen((uv_stream_t *)&ls, 8, fake_accept), 0);

	struct runtime *rt;
	ck_assert_int_eq(runtime_create(&rt, &h.loop, &h.srv.route, &h.srv.stats,
					&h.cfg, NULL, NULL), 0);
	ck_assert(rt->enabled);
	/* Before any poll: the configured endpoints, one per key. */
	ck_assert(has_ep(&h, "llm/s1", "k1") && has_ep(&h, "llm/s1", "k2") &&
		  has_ep(&h, "llm/gone", NULL));

	/* Poll 1 (a poll is counted when it starts: wait for the next). */
	run_until(&h, &rt->servers_removed, 1);
	ck_assert_str_eq(fake_cmd, RUNTIME_COMMAND);
	struct core_endpoint_info a = ep_info(&h, "llm/s1", "k1");
	struct core_endpoint_info b = ep_info(&h, "llm/s1", "k2");
	ck_assert_int_eq(a.admin, CORE_ADMIN_ENABLED);
	ck_assert_uint_eq(a.in_flight + b.in_flight, 5); /* scur 4 + qcur 1 */
	ck_assert_uint_ge(a.in_flight, 2);
	ck_assert_uint_ge(b.in_flight, 2);
	/* HAProxy's maxconn is the slots, split as the in-flight count;
	 * endpoints[].slots wins */
	ck_assert_uint_eq(a.slots + b.slots, 3);
	ck_assert_uint_ge(a.slots, 1);
	ck_assert_uint_ge(b.slots, 1);
	ck_assert_int_eq(ep_info(&h, "llm/s2", NULL).admin, CORE_ADMIN_MAINT);
	ck_assert_uint_eq(ep_info(&h, "llm/s2", NULL).slots, 4);
	struct core_endpoint_info s3 = ep_info(&h, "llm/s3", NULL);
	ck_assert_uint_eq(s3.in_flight, 2);
	ck_assert_uint_eq(s3.slots, 1);
	ck_assert(s3.weight == 1.0); /* defaults: not in the config */
	ck_assert(!has_ep(&h, "llm/gone", NULL)); /* HAProxy lacks it */
	ck_assert(!has_ep(&h, "other/o1", NULL)); /* not a watched backend */
	ck_assert(!has_ep(&h, "llm/BACKEND", NULL));
	/* A backup server joins, never chosen: HAProxy's to use. */
	ck_assert_int_eq(ep_info(&h, "llm/s4", NULL).admin, CORE_ADMIN_NOLB);
	ck_assert_uint_eq(rt->servers_added, 2);
	ck_assert_uint_eq(h.srv.stats.runtime_poll_failures, 0);

	/* Routing uses it: m1 is s1's (either key) or s3's (every model),
	 * never s2 (maintenance). */
	struct route_request req;
	struct route_decision d;
	memset(&req, 0, sizeof(req));
	for (int i = 0; i < ROUTE_ARG_COUNT; i++)
		req.args[i] = spop_data_null();
	req.args[ROUTE_ARG_MODEL] = spop_data_string("m1", 2);
	for (int i = 0; i < 20; i++) {
		route_decide(&h.srv.route, &req, &d);
		ck_assert_ptr_nonnull(d.server);
		ck_assert_str_ne(d.server, "s2");
		ck_assert_str_ne(d.server, "s4");
	}

	/* Poll 2 and the next ones. */
	run_until(&h, &rt->servers_removed, 2);
	ck_assert(!has_ep(&h, "llm/s3", NULL));
	ck_assert_int_eq(ep_info(&h, "llm/s1", "k1").admin, CORE_ADMIN_DRAIN);
	struct core_endpoint_info s2 = ep_info(&h, "llm/s2", NULL);
	ck_assert_int_eq(s2.admin, CORE_ADMIN_ENABLED);
	ck_assert_uint_eq(s2.in_flight, 3);
	ck_assert_uint_eq(s2.slots, 4);
	ck_assert_uint_eq(ep_info(&h, "llm/s1", "k1").slots, 0);
	uint64_t polls = h.srv.stats.runtime_polls;
	run_until(&h, &h.srv.stats.runtime_polls, polls + 3);
	ck_assert_uint_eq(h.srv.stats.runtime_poll_failures, 0);
	ck_assert_uint_eq(rt->servers_removed, 2); /* "gone" reported once */
	ck_assert(rt->reachable);

	/* HAProxy goes away: failures, backoff, routing goes on. */
	uv_close((uv_handle_t *)&ls, NULL);
	unlink(sock);
	uint64_t t0 = mono_ms();
	run_until(&h, &h.srv.stats.runtime_poll_failures, 8);
	/* 5 x 10 ms at the poll interval, then 20 and 40 ms of backoff */
	ck_assert_uint_ge(mono_ms() - t0, 100);
	ck_assert(!rt->reachable);
	route_decide(&h.srv.route, &req, &d);
	ck_assert_ptr_nonnull(d.server);

	runtime_destroy(rt, NULL, NULL);
	harness_finish(&h);
	rmdir(dir);
}
END_TEST

/* Failover tiers through the poll: a backup server stays HAProxy's
 * (NOLB) unless its endpoints[] entry gives it a tier; a server HAProxy
 * alone has takes its backend's tier (backends[]); warmlane then fails
 * over to them only when tier 1 cannot serve. */
START_TEST(poller_backup_tiers)
{
	char dir[64], yaml[1024], sock[160];
	make_temp_dir(dir, sizeof(dir));
	snprintf(sock, sizeof(sock), "%s/stats.sock", dir);
	snprintf(yaml, sizeof(yaml),
		 "runtime_api: {socket: \"%s\", poll_interval: 10ms, backends: [llm, api]}\n"
		 "backends: [{name: api, tier: 2}]\n"
		 "endpoints:\n"
		 "  - {backend: llm, server: s1}\n"
		 "  - {backend: llm, server: b2, tier: 3}\n",
		 sock);
	static const char *const answers[] = {
		HDR
		"llm,s1,0,,0,,UP,1,2,http,\n"
		"llm,b1,0,,0,,UP,1,2,http,1\n"
		"llm,b2,0,,0,,UP,1,2,http,1\n"
		"api,p1,0,,0,,UP,1,2,http,\n\n",
		HDR
		"llm,s1,0,,0,,MAINT,1,2,http,\n"
		"llm,b1,0,,0,,UP,1,2,http,1\n"
		"llm,b2,0,,0,,UP,1,2,http,1\n"
		"api,p1,0,,0,,DOWN,1,2,http,\n\n",
	};
	fake_answers = answers;
	fake_n_answers = 2;
	fake_conns = 0;

	struct harness h;
	harness_init(&h, yaml);
	uv_pipe_t ls;
	ck_assert_int_eq(uv_pipe_init(&h.loop, &ls, 0), 0);
	ck_assert_int_eq(uv_pipe_bind(&ls, sock), 0);
	ck_assert_int_eq(uv_listen((uv_stream_t *)&ls, 8, fake_accept), 0);
	struct runtime *rt;
	ck_assert_int_eq(runtime_create(&rt, &h.loop, &h.srv.route, &h.srv.stats,
					&h.cfg, NULL, NULL), 0);
	/* Poll 1 applied: b1 and p1 joined (s1 and b2 are configured). */
	run_until(&h, &rt->servers_added, 2);

	ck_assert_int_eq(ep_info(&h, "llm/b1", NULL).admin, CORE_ADMIN_NOLB);
	struct core_endpoint_info b2 = ep_info(&h, "llm/b2", NULL);
	ck_assert_int_eq(b2.admin, CORE_ADMIN_ENABLED);
	ck_assert_uint_eq(b2.tier, 3);
	ck_assert_uint_eq(ep_info(&h, "api/p1", NULL).tier, 2);
	ck_assert_uint_eq(ep_info(&h, "llm/s1", NULL).tier, 1);

	struct route_request req;
	struct route_decision d;
	memset(&req, 0, sizeof(req));
	for (int i = 0; i < ROUTE_ARG_COUNT; i++)
		req.args[i] = spop_data_null();
	for (int i = 0; i < 20; i++) {
		route_decide(&h.srv.route, &req, &d);
		ck_assert_str_eq(d.server, "s1");
		ck_assert_int_eq(d.reason, ROUTE_P2C);
		route_take_back(&h.srv.route, d.endpoint);
	}
	/* s1 in maintenance: api/p1 (tier 2), then, p1 down too, the
	 * backup b2 (tier 3); never b1. */
	while (ep_info(&h, "llm/s1", NULL).admin != CORE_ADMIN_MAINT)
		run_until(&h, &h.srv.stats.runtime_polls,
			  h.srv.stats.runtime_polls + 1);
	for (int i = 0; i < 20; i++) {
		route_decide(&h.srv.route, &req, &d);
		ck_assert_str_eq(d.server, "b2");
		ck_assert_int_eq(d.reason, ROUTE_FAILOVER);
		ck_assert_uint_eq(d.tier, 3);
		route_take_back(&h.srv.route, d.endpoint);
	}

	uv_close((uv_handle_t *)&ls, NULL);
	unlink(sock);
	runtime_destroy(rt, NULL, NULL);
	harness_finish(&h);
	rmdir(dir);
}
END_TEST

/* The default socket of a host without HAProxy: logged once, never an
 * error, routing on the configured endpoints. */
START_TEST(poller_unreachable)
{
	struct harness h;
	harness_init(&h, "runtime_api: {socket: /nonexistent/warmlane.sock, poll_interval: 10ms}\n"
			 "endpoints:\n  - {backend: llm, server: s1}\n");
	struct runtime *rt;
	ck_assert_int_eq(runtime_create(&rt, &h.loop, &h.srv.route, &h.srv.stats,
					&h.cfg, NULL, NULL), 0);
	run_until(&h, &h.srv.stats.runtime_poll_failures, 3);
	ck_assert(rt->warned);
	ck_assert(has_ep(&h, "llm/s1", NULL));
	runtime_destroy(rt, NULL, NULL);
	harness_finish(&h);

	/* Disabled: no handle, nothing to stop. */
	harness_init(&h, "runtime_api: {socket: \"\"}\n");
	ck_assert_int_eq(runtime_create(&rt, &h.loop, &h.srv.route, &h.srv.stats,
					&h.cfg, NULL, NULL), 0);
	ck_assert(!rt->enabled);
	runtime_destroy(rt, NULL, NULL);
	harness_finish(&h);
}
END_TEST

static unsigned released;

static void release_done(void *arg)
{
	(void)arg;
	released++;
}

/* runtime_destroy: done once libuv has closed the poller's handles (its
 * timer, a pipe in the middle of a poll), never before; at once for a
 * poller with no handle. */
START_TEST(release_after_close_callbacks)
{
	struct harness h;
	harness_init(&h, "runtime_api: {socket: /nonexistent/warmlane.sock, poll_interval: 10ms}\n"
			 "endpoints:\n  - {backend: llm, server: s1}\n");
	struct runtime *rt;
	ck_assert_int_eq(runtime_create(&rt, &h.loop, &h.srv.route, &h.srv.stats,
					&h.cfg, NULL, NULL), 0);
	run_until(&h, &h.srv.stats.runtime_poll_failures, 2);
	released = 0;
	runtime_destroy(rt, release_done, NULL);
	ck_assert_uint_eq(released, 0); /* its timer is still closing */
	for (int i = 0; i < 100 && released == 0; i++)
		uv_run(&h.loop, UV_RUN_NOWAIT);
	ck_assert_uint_eq(released, 1);
	harness_finish(&h);

	harness_init(&h, "runtime_api: {socket: \"\"}\n");
	ck_assert_int_eq(runtime_create(&rt, &h.loop, &h.srv.route, &h.srv.stats,
					&h.cfg, NULL, NULL), 0);
	runtime_destroy(rt, release_done, NULL);
	ck_assert_uint_eq(released, 2);
	harness_finish(&h);
}
END_TEST

/* No endpoint configured and no backend list: every http backend's
 * servers are the pool. */
START_TEST(apply_every_http_backend)
{
	struct harness h;
	harness_init(&h, NULL);
	struct runtime *rt;
	ck_assert_int_eq(runtime_create(&rt, &h.loop, &h.srv.route, &h.srv.stats,
					&h.cfg, NULL, NULL), 0);
	struct runtime_row row = {
		.pxname = core_str_c("llm"),
		.svname = core_str_c("a"),
		.mode = core_str_c("http"),
		.admin = CORE_ADMIN_ENABLED,
		.status_known = true,
		.weight = 0,
		.scur = 1,
	};
	ck_assert(runtime_apply_row(rt, &row, 0));
	/* weight 0: drained */
	ck_assert_int_eq(ep_info(&h, "llm/a", NULL).admin, CORE_ADMIN_DRAIN);
	row.pxname = core_str_c("warmlane-agents");
	row.mode = core_str_c("tcp");
	ck_assert(!runtime_apply_row(rt, &row, 0));
	ck_assert(!has_ep(&h, "warmlane-agents/a", NULL));
	runtime_apply_end(rt);
	ck_assert(has_ep(&h, "llm/a", NULL));
	runtime_apply_end(rt); /* a poll without it */
	ck_assert(!has_ep(&h, "llm/a", NULL));
	runtime_destroy(rt, NULL, NULL);
	harness_finish(&h);
}
END_TEST

/* ---- 50,000 servers ---- */

struct gap_probe {
	uv_timer_t t;
	uint64_t last_ns, max_gap_ns;
	uint64_t ticks;
};

static void gap_tick(uv_timer_t *t)
{
	struct gap_probe *g = container_of(t, struct gap_probe, t);
	uint64_t now = uv_hrtime();
	if (g->last_ns != 0 && now - g->last_ns > g->max_gap_ns)
		g->max_gap_ns = now - g->last_ns;
	g->last_ns = now;
	g->ticks++;
}

static size_t count_lines(FILE *f, const char *needle)
{
	char line[4096];
	size_t n = 0;
	fflush(f);
	rewind(f);
	while (fgets(line, sizeof(line), f) != NULL)
		n += strstr(line, needle) != NULL;
	return n;
}

enum { BIG_ROWS = 50000, BIG_LLM = 2000, BIG_GONE = 1000, BIG_NEW = 3 };

/* Runs the loop until cond(rt) or 60 s. */
static void run_for(struct harness *h, struct runtime *rt,
		    bool (*cond)(const struct runtime *rt))
{
	uint64_t deadline = mono_ms() + 60000;
	while (!cond(rt) && mono_ms() < deadline)
		uv_run(&h->loop, UV_RUN_ONCE);
	ck_assert_msg(cond(rt), "not reached in 60 s: added %llu removed %llu",
		      (unsigned long long)rt->servers_added,
		      (unsigned long long)rt->servers_removed);
}

static bool all_joined(const struct runtime *rt)
{
	return rt->servers_added >= BIG_LLM && rt->reachable;
}

static bool second_applied(const struct runtime *rt)
{
	return rt->servers_removed >= BIG_GONE;
}

/* An answer of 50,000 server lines (2,000 of the watched backend, which
 * join; 48,000 of another) is applied over many loop turns, a 1 ms timer
 * beside it running on (its longest gap is printed); the joins and
 * leaves of each poll are one log line, not one a server. (The core adds
 * an endpoint in time linear in the pool, so 50,000 joins would take
 * minutes whatever the slicing: the joins here are 2,000.) */
START_TEST(poller_50k_servers)
{
	char dir[64], yaml[512], sock[160];
	make_temp_dir(dir, sizeof(dir));
	snprintf(sock, sizeof(sock), "%s/stats.sock", dir);
	snprintf(yaml, sizeof(yaml),
		 "runtime_api: {socket: \"%s\", poll_interval: 10ms, backends: [llm]}\n",
		 sock);
	/* poll 1: llm/s0..s1999 and other/o*; poll 2 on: llm/s1000..s1999,
	 * llm/n0..n2 and other/o* */
	size_t cap = (size_t)(BIG_ROWS + BIG_NEW) * 48 + 256;
	char *a1 = malloc(cap), *a2 = malloc(cap);
	ck_assert(a1 != NULL && a2 != NULL);
	size_t l1 = (size_t)snprintf(a1, cap, "%s", HDR);
	size_t l2 = (size_t)snprintf(a2, cap, "%s", HDR);
	for (int i = 0; i < BIG_ROWS; i++) {
		bool llm = i < BIG_LLM;
		char line[64];
		snprintf(line, sizeof(line), "%s,%c%d,0,,1,,UP,1,2,http,\n",
			 llm ? "llm" : "other", llm ? 's' : 'o', i);
		l1 += (size_t)snprintf(a1 + l1, cap - l1, "%s", line);
		if (!llm || i >= BIG_GONE)
			l2 += (size_t)snprintf(a2 + l2, cap - l2, "%s", line);
	}
	for (int i = 0; i < BIG_NEW; i++)
		l2 += (size_t)snprintf(a2 + l2, cap - l2,
				       "llm,n%d,0,,0,,UP,1,2,http,\n", i);
	const char *answers[] = { a1, a2 };
	fake_answers = answers;
	fake_n_answers = 2;
	fake_conns = 0;

	struct harness h;
	harness_init(&h, yaml);
	FILE *logs = tmpfile();
	ck_assert_ptr_nonnull(logs);
	log_set_stream(logs);
	uv_pipe_t ls;
	ck_assert_int_eq(uv_pipe_init(&h.loop, &ls, 0), 0);
	ck_assert_int_eq(uv_pipe_bind(&ls, sock), 0);
	ck_assert_int_eq(uv_listen((uv_stream_t *)&ls, 8, fake_accept), 0);
	struct gap_probe g = { 0 };
	ck_assert_int_eq(uv_timer_init(&h.loop, &g.t), 0);
	ck_assert_int_eq(uv_timer_start(&g.t, gap_tick, 1, 1), 0);

	struct runtime *rt;
	ck_assert_int_eq(runtime_create(&rt, &h.loop, &h.srv.route, &h.srv.stats,
					&h.cfg, NULL, NULL), 0);
	uint64_t t0 = uv_hrtime();
	run_for(&h, rt, all_joined);
	uint64_t t1 = uv_hrtime();
	uint64_t gap1 = g.max_gap_ns, slices1 = rt->slices;
	uint64_t cut1 = rt->slices_cut;
	g.max_gap_ns = 0;
	run_for(&h, rt, second_applied);
	uint64_t t2 = uv_hrtime();
	/* a few more polls of the same answer: nothing changes */
	uint64_t polls = h.srv.stats.runtime_polls;
	run_until(&h, &h.srv.stats.runtime_polls, polls + 3);
	fprintf(stderr, "# %d server lines, %d joining: %.0f ms in %" PRIu64
		" loop slices (%" PRIu64 " cut by the budget), longest gap of "
		"a 1 ms timer beside it %.1f ms; then %d leaving, %d joining: "
		"%.0f ms, longest gap %.1f ms; longest slice %.1f ms\n",
		BIG_ROWS, BIG_LLM, (double)(t1 - t0) / 1e6, slices1, cut1,
		(double)gap1 / 1e6, BIG_GONE, BIG_NEW, (double)(t2 - t1) / 1e6,
		(double)g.max_gap_ns / 1e6, (double)rt->slice_max_ns / 1e6);
	ck_assert_uint_eq(rt->servers_added, BIG_LLM + BIG_NEW);
	ck_assert_uint_eq(rt->servers_removed, BIG_GONE);
	ck_assert_uint_eq(h.srv.stats.runtime_poll_failures, 0);
	/* more than one loop turn per answer, cut by the budget */
	ck_assert_uint_gt(cut1, 0);
	ck_assert_uint_ge(slices1, BIG_ROWS / RUNTIME_TURN_ROWS);
	ck_assert_uint_eq(count_lines(logs, "servers joined or left the pool"), 2);
	ck_assert_uint_eq(count_lines(logs, "joined=2000 left=0 "
					    "joined_servers=\"llm/s0 llm/s1 llm/s2 "
					    "llm/s3 llm/s4 (and 1995 more)\""), 1);
	ck_assert_uint_eq(count_lines(logs, "joined=3 left=1000 "
					    "joined_servers=\"llm/n0 llm/n1 llm/n2\""), 1);
	ck_assert_uint_eq(count_lines(logs, "(and 995 more)"), 1);
	ck_assert_uint_eq(count_lines(logs, "server joined the pool"), 0);
	ck_assert_uint_eq(count_lines(logs, "server left the pool"), 0);
	log_set_stream(NULL);
	fclose(logs);

	runtime_destroy(rt, NULL, NULL);
	uv_close((uv_handle_t *)&g.t, NULL);
	uv_close((uv_handle_t *)&ls, NULL);
	harness_finish(&h);
	free(a1);
	free(a2);
	unlink(sock);
	rmdir(dir);
}
END_TEST

/* A server name over CONFIG_NAME_MAX cannot join the pool, and HAProxy
 * reports it at every poll: one warning line, then one a minute saying
 * how many were held back. */
START_TEST(long_server_name_rate_limited)
{
	struct harness h;
	harness_init(&h, NULL);
	struct runtime *rt;
	ck_assert_int_eq(runtime_create(&rt, &h.loop, &h.srv.route, &h.srv.stats,
					&h.cfg, NULL, NULL), 0);
	FILE *logf = tmpfile();
	ck_assert_ptr_nonnull(logf);
	log_set_stream(logf);
	char name[CONFIG_NAME_MAX + 2];
	memset(name, 's', CONFIG_NAME_MAX + 1);
	name[CONFIG_NAME_MAX + 1] = '\0';
	struct runtime_row row = {
		.pxname = core_str_c("llm"),
		.svname = core_str_c(name),
		.mode = core_str_c("http"),
		.admin = CORE_ADMIN_ENABLED,
		.status_known = true,
		.weight = 1,
	};
	static const char needle[] = "msg=\"cannot add a server from HAProxy\"";
	char last[1024];
	/* 120 polls a second apart: two minutes. */
	const uint64_t t0 = 7000000;
	for (unsigned i = 0; i < 120; i++) {
		ck_assert(runtime_apply_row(rt, &row, t0 + i * 1000));
		runtime_apply_end(rt);
	}
	unsigned lines = log_lines_count(logf, needle, last, sizeof(last));
	fprintf(stderr, "# 120 polls in 2 min: %u warning line(s)\n", lines);
	ck_assert_uint_eq(lines, 2);
	ck_assert_msg(strstr(last, " suppressed=59") != NULL, "%s", last);
	ck_assert_msg(strstr(last, "error=File name too long") != NULL, "%s", last);
	ck_assert_uint_eq(rt->servers_added, 0);
	log_set_stream(NULL);
	fclose(logf);
	runtime_destroy(rt, NULL, NULL);
	harness_finish(&h);
}
END_TEST

static Suite *runtime_suite(void)
{
	Suite *s = suite_create("agent-runtime");
	TCase *tc = tcase_create("runtime");
	tcase_add_test(tc, csv_captures);
	tcase_add_test(tc, csv_by_name);
	tcase_add_test(tc, peers_captures);
	tcase_add_test(tc, peers_words);
	tcase_add_test(tc, status_words);
	tcase_add_test(tc, csv_check_duration);
	tcase_add_test(tc, poller_syncs_core);
	tcase_add_test(tc, poller_backup_tiers);
	tcase_add_test(tc, poller_unreachable);
	tcase_add_test(tc, release_after_close_callbacks);
	tcase_add_test(tc, apply_every_http_backend);
	tcase_add_test(tc, poller_50k_servers);
	tcase_add_test(tc, long_server_name_rate_limited);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		data_dir = argv[1];
	SRunner *sr = srunner_create(runtime_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
