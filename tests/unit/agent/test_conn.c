/* test_conn.c - agent: SPOP connections driven through a socketpair, and their hello and idle timeouts. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "harness.h"
#include "notify.h"

static const char *const two_endpoints =
	"endpoints:\n"
	"  - {backend: llm, server: gpu1, models: [m1], keys: [team-a, team-b]}\n"
	"  - {backend: llm, server: gpu2, models: [m1, m2]}\n";

static uint8_t frame_buf[65536];

/* Sends a normal HELLO and checks the AGENT-HELLO. */
static void do_hello(struct harness *h, struct client *c, uint32_t max,
		     uint32_t expect_max)
{
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, max);
	client_send(h, c, f->b, f->len);
	free(f);

	ptrdiff_t n = client_frame(h, c, frame_buf, sizeof(frame_buf), 2000);
	ck_assert_int_gt(n, 0);
	struct spop_frame fr;
	answer_decode(frame_buf, (size_t)n, &fr);
	ck_assert_int_eq(fr.type, SPOP_FRAME_AGENT_HELLO);
	ck_assert_uint_eq(fr.stream_id, 0);
	ck_assert_uint_eq(fr.frame_id, 0);

	struct spop_reader r;
	struct spop_str key;
	struct spop_data val;
	enum spop_status st;
	bool version = false, size = false, caps = false;
	spop_reader_init(&r, fr.payload, fr.payload_len);
	while (spop_kv_next(&r, &key, &val, &st) == 1) {
		if (spop_str_eq(key, "version")) {
			ck_assert_int_eq(val.type, SPOP_DATA_STRING);
			ck_assert(spop_str_eq(val.u.str, "2.0"));
			version = true;
		} else if (spop_str_eq(key, "max-frame-size")) {
			ck_assert_int_eq(val.type, SPOP_DATA_UINT32);
			ck_assert_uint_eq(val.u.u32, expect_max);
			size = true;
		} else if (spop_str_eq(key, "capabilities")) {
			ck_assert_int_eq(val.type, SPOP_DATA_STRING);
			ck_assert(spop_str_eq(val.u.str, "pipelining"));
			caps = true;
		}
	}
	ck_assert(version && size && caps);
}

/* A harness on yaml (NULL: defaults) and its client 0, through the HELLO
 * exchange (do_hello's checks). */
static struct client *hello_client(struct harness *h, const char *yaml,
				   uint32_t max, uint32_t expect_max)
{
	harness_init(h, yaml);
	struct client *c = harness_client(h, 0);
	do_hello(h, c, max, expect_max);
	return c;
}

static void read_ack(struct harness *h, struct client *c, uint64_t sid,
		     uint64_t fid, struct ack_vars *vars)
{
	ptrdiff_t n = client_frame(h, c, frame_buf, sizeof(frame_buf), 2000);
	ck_assert_msg(n > 0, "no ACK for %llu/%llu", (unsigned long long)sid,
		      (unsigned long long)fid);
	answer_ack(frame_buf, (size_t)n, sid, fid, vars);
}

/* ---- HELLO ---- */

START_TEST(hello_normal)
{
	struct harness h;
	struct client *c = hello_client(&h, NULL, 16380, 16380);
	ck_assert_uint_eq(h.srv.stats.frames[STATS_FRAME_HAPROXY_HELLO], 1);
	ck_assert_uint_eq(h.srv.stats.frames[STATS_FRAME_AGENT_HELLO], 1);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* The agent answers the smaller of the two sizes, and then holds HAProxy
 * to it. */
START_TEST(hello_smaller_frame_size)
{
	struct harness h;
	struct client *c = hello_client(&h, NULL, 1024, 1024);

	struct fb *p = calloc(1, sizeof(*p)), *f = calloc(1, sizeof(*f));
	fb_str(p, "unknown");
	fb_u8(p, 1);
	fb_str(p, "blob");
	fb_u8(p, SPOP_DATA_BINARY);
	fb_varint(p, 1100);
	memset(p->b + p->len, 'x', 1100);
	p->len += 1100;
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, 1, 1, p);
	client_send(&h, c, f->b, f->len);
	expect_disconnect(&h, c, SPOP_ERR_TOO_BIG);
	free(p);
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* A NOTIFY with one unknown message carrying a BINARY of n bytes. */
static void fb_blob_notify(struct fb *f, uint64_t sid, uint64_t fid, size_t n)
{
	struct fb *p = calloc(1, sizeof(*p));
	fb_str(p, "unknown");
	fb_u8(p, 1);
	fb_str(p, "blob");
	fb_u8(p, SPOP_DATA_BINARY);
	fb_varint(p, n);
	memset(p->b + p->len, 'x', n);
	p->len += n;
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, sid, fid, p);
	free(p);
}

/* A reload raising max_frame_size between a connection's accept and its
 * HELLO: the connection's read buffer was sized at accept, so it offers
 * that size, not the new one, and a frame between the two is refused with
 * a DISCONNECT (TOO_BIG) instead of killing the connection (ENOBUFS).
 * Connections accepted after the reload get the new size. */
START_TEST(hello_after_reload_raising_frame_size)
{
	struct harness h;
	harness_init(&h, "max_frame_size: 4096\n");
	struct client *old = harness_client(&h, 0);
	harness_pump(&h);
	h.cfg.max_frame_size = 16380; /* what reload_commit does in place */

	do_hello(&h, old, 16380, 4096);
	struct fb *f = calloc(1, sizeof(*f));
	fb_blob_notify(f, 1, 1, 8000);
	client_send(&h, old, f->b, f->len);
	expect_disconnect(&h, old, SPOP_ERR_TOO_BIG);
	ck_assert_uint_eq(h.srv.stats.io_errors, 0);
	client_free(old);

	struct client *c = harness_client(&h, 0);
	do_hello(&h, c, 16380, 16380);
	client_send(&h, c, f->b, f->len);
	struct ack_vars v;
	read_ack(&h, c, 1, 1, &v);
	ck_assert(ack_has(&v, "ack"));
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

START_TEST(hello_agent_smaller)
{
	struct harness h;
	struct client *c = hello_client(&h, "max_frame_size: 4096\n", 16380, 4096);
	client_free(c);
	harness_finish(&h);
}
END_TEST

START_TEST(hello_healthcheck)
{
	struct harness h;
	harness_init(&h, NULL);
	struct client *c = harness_client(&h, 0);
	struct fb *p = calloc(1, sizeof(*p)), *f = calloc(1, sizeof(*f));
	fb_kv_str(p, "supported-versions", "2.0");
	fb_kv_u32(p, "max-frame-size", 16380);
	fb_kv_str(p, "capabilities", "");
	fb_kv_bool(p, "healthcheck", true);
	fb_frame(f, SPOP_FRAME_HAPROXY_HELLO, SPOP_FLAG_FIN, 0, 0, p);
	client_send(&h, c, f->b, f->len);

	ptrdiff_t n = client_frame(&h, c, frame_buf, sizeof(frame_buf), 2000);
	ck_assert_int_gt(n, 0);
	struct spop_frame fr;
	answer_decode(frame_buf, (size_t)n, &fr);
	ck_assert_int_eq(fr.type, SPOP_FRAME_AGENT_HELLO);
	ck_assert_uint_eq(h.srv.stats.healthchecks, 1);

	/* HAProxy closes after the check: a normal close, nothing sent. */
	client_free(c);
	for (int i = 0; i < 100 && h.srv.stats.conn_active > 0; i++)
		harness_pump(&h);
	ck_assert_uint_eq(h.srv.stats.conn_active, 0);
	ck_assert_uint_eq(h.srv.stats.conn_closed, 1);
	ck_assert_uint_eq(h.srv.stats.io_errors, 0);
	free(p);
	free(f);
	harness_finish(&h);
}
END_TEST

/* HELLOs that must be refused, with the status of each. */
static const struct {
	const char *versions; /* NULL: key absent */
	long max;             /* -1: key absent */
	const char *caps;     /* NULL: key absent */
	uint32_t status;
} bad_hellos[] = {
	{ NULL, 16380, "pipelining", SPOP_ERR_NO_VSN },
	{ "2.0", -1, "pipelining", SPOP_ERR_NO_FRAME_SIZE },
	{ "2.0", 16380, NULL, SPOP_ERR_NO_CAP },
	{ "1.0", 16380, "pipelining", SPOP_ERR_BAD_VSN },
	{ "2.1", 16380, "pipelining", SPOP_ERR_BAD_VSN },
	{ "2.0", 255, "pipelining", SPOP_ERR_BAD_FRAME_SIZE },
	{ "2.0", 0, "pipelining", SPOP_ERR_BAD_FRAME_SIZE },
};

START_TEST(hello_refused)
{
	struct harness h;
	harness_init(&h, NULL);
	struct client *c = harness_client(&h, 0);
	struct fb *p = calloc(1, sizeof(*p)), *f = calloc(1, sizeof(*f));
	if (bad_hellos[_i].versions != NULL)
		fb_kv_str(p, "supported-versions", bad_hellos[_i].versions);
	if (bad_hellos[_i].max >= 0)
		fb_kv_u32(p, "max-frame-size", (uint32_t)bad_hellos[_i].max);
	if (bad_hellos[_i].caps != NULL)
		fb_kv_str(p, "capabilities", bad_hellos[_i].caps);
	fb_frame(f, SPOP_FRAME_HAPROXY_HELLO, SPOP_FLAG_FIN, 0, 0, p);
	client_send(&h, c, f->b, f->len);
	expect_disconnect(&h, c, bad_hellos[_i].status);
	unsigned idx = stats_status_index(bad_hellos[_i].status);
	ck_assert_uint_eq(h.srv.stats.disconnects_sent[idx], 1);
	free(p);
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

START_TEST(hello_twice)
{
	struct harness h;
	struct client *c = hello_client(&h, NULL, 16380, 16380);
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	client_send(&h, c, f->b, f->len);
	expect_disconnect(&h, c, SPOP_ERR_INVALID);
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* ---- NOTIFY / ACK ---- */

/* Stream and frame ids across the varint sizes, 0 included: 2.6 sends
 * stream-id 0, 3.x odd stream ids. */
static const uint64_t ids[][2] = {
	{ 0, 0 },	   { 0, 1 },	       { 1, 1 },
	{ 3, 1 },	   { 239, 240 },       { 240, 239 },
	{ 2287, 2288 },	   { 264431, 264432 }, { 0xFFFFFFFFull, 7 },
	{ UINT64_MAX, UINT64_MAX - 1 },
};
#define NIDS (sizeof(ids) / sizeof(ids[0]))

START_TEST(notify_pipelined_ids)
{
	struct harness h;
	struct client *c = hello_client(&h, two_endpoints, 16380, 16380);

	/* All NOTIFYs in one write: coalesced frames, many outstanding. */
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", "m1", NULL };
	for (size_t i = 0; i < NIDS; i++)
		fb_route(f, ids[i][0], ids[i][1], kv);
	client_send(&h, c, f->b, f->len);
	for (size_t i = 0; i < NIDS; i++) {
		struct ack_vars v;
		read_ack(&h, c, ids[i][0], ids[i][1], &v);
		/* no identity argument: power of two choices */
		ck_assert_str_eq(ack_str(&v, "reason"), "p2c");
	}
	ck_assert_uint_eq(h.srv.stats.frames[STATS_FRAME_ACK], NIDS);
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* NOTIFYs pipelined in one read are answered with fewer writes than
 * frames, every ACK whole and in order, and still counted as frames. */
START_TEST(notify_coalesced_writes)
{
	enum { N = 12 };
	struct harness h;
	struct client *c = hello_client(&h, two_endpoints, 16380, 16380);
	ck_assert_uint_eq(h.srv.stats.writes, 1); /* the AGENT-HELLO */

	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", "m1", NULL };
	for (uint64_t i = 0; i < N; i++)
		fb_route(f, 2 * i + 1, 1, kv);
	client_send(&h, c, f->b, f->len);
	for (uint64_t i = 0; i < N; i++) {
		struct ack_vars v;
		read_ack(&h, c, 2 * i + 1, 1, &v);
		ck_assert_str_eq(ack_str(&v, "reason"), "p2c");
	}
	uint64_t writes = h.srv.stats.writes - 1;
	ck_assert_uint_ge(writes, 1);
	ck_assert_uint_lt(writes, N);
	ck_assert_uint_eq(h.srv.stats.frames[STATS_FRAME_ACK], N);
	ck_assert_uint_eq(h.srv.stats.frames[STATS_FRAME_NOTIFY], N);
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* Names this long make a route ACK of LONG_ACK bytes; the negotiated
 * frame size is set so that it fills a frame exactly. */
#define LONG_NAME_B                                                          \
	"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" \
	"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define LONG_NAME_S                                                          \
	"ssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssss" \
	"ssssssssssssssssssssssssssssssssssssssssssssssssssss"
static const char *const long_endpoint =
	"endpoints:\n"
	"  - {backend: " LONG_NAME_B ", server: " LONG_NAME_S ", models: [m1]}\n";

/* The size of the route ACK for long_endpoint (stream-id and frame-id
 * under 240), measured with the default frame size. */
static size_t long_ack_size(void)
{
	struct harness h;
	struct client *c = hello_client(&h, long_endpoint, 16380, 16380);
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", "m1", NULL };
	fb_route(f, 1, 1, kv);
	client_send(&h, c, f->b, f->len);
	ptrdiff_t n = client_frame(&h, c, frame_buf, sizeof(frame_buf), 2000);
	ck_assert_int_gt(n, 0);
	struct ack_vars v;
	answer_ack(frame_buf, (size_t)n, 1, 1, &v);
	ck_assert_str_eq(ack_str(&v, "backend"), LONG_NAME_B);
	free(f);
	client_free(c);
	harness_finish(&h);
	return (size_t)n;
}

/* Large (exactly the negotiated frame size) and small ACKs mixed in one
 * read: each arrives whole, uncut, in order; the batch is written when
 * less room than the frame size is left for the next ACK, so it takes
 * several writes, but fewer than frames. */
START_TEST(notify_coalesced_large)
{
	enum { N = 40 };
	size_t big = long_ack_size();
	ck_assert_uint_gt(big, 260);
	uint32_t max = (uint32_t)(big - 4);

	struct harness h;
	struct client *c = hello_client(&h, long_endpoint, max, max);

	struct fb *f = calloc(1, sizeof(*f)), *p = calloc(1, sizeof(*p));
	const char *const kv[] = { "model", "m1", NULL };
	for (uint64_t i = 0; i < N; i++) {
		if (i % 3 == 2) { /* an unknown message: a bare `ack` */
			p->len = 0;
			fb_str(p, "something-new");
			fb_u8(p, 0);
			fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, i, 1, p);
		} else {
			fb_route(f, i, 1, kv);
		}
	}
	client_send(&h, c, f->b, f->len);
	size_t total = 0;
	for (uint64_t i = 0; i < N; i++) {
		ptrdiff_t n = client_frame(&h, c, frame_buf, sizeof(frame_buf),
					   2000);
		ck_assert_int_gt(n, 0);
		ck_assert_uint_le((size_t)n, (size_t)max + 4);
		struct ack_vars v;
		answer_ack(frame_buf, (size_t)n, i, 1, &v);
		if (i % 3 == 2) {
			ck_assert_uint_eq(v.n, 1);
			ck_assert_str_eq(v.v[0].name, NOTIFY_ACK_VAR);
		} else {
			ck_assert_uint_eq((size_t)n, big);
			ck_assert_str_eq(ack_str(&v, "backend"), LONG_NAME_B);
			ck_assert_str_eq(ack_str(&v, "server"), LONG_NAME_S);
		}
		total += (size_t)n;
	}
	ck_assert_uint_eq(h.srv.stats.ack_fallbacks, 0);
	ck_assert_uint_eq(h.srv.stats.frames[STATS_FRAME_ACK], N);
	uint64_t writes = h.srv.stats.writes - 1; /* less the AGENT-HELLO */
	ck_assert_uint_ge(writes, (total + CONN_WBUF_SIZE - 1) / CONN_WBUF_SIZE);
	ck_assert_uint_lt(writes, N);
	free(f);
	free(p);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* HELLO and three NOTIFYs fed one byte at a time. */
START_TEST(notify_byte_by_byte)
{
	struct harness h;
	harness_init(&h, two_endpoints);
	struct client *c = harness_client(&h, 0);
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	const char *const kv[] = { "session", "s1", "model", "m2", NULL };
	fb_route(f, 0, 1, kv);
	fb_route(f, 300, 2, kv);
	fb_route(f, 5, 3, kv);
	for (size_t i = 0; i < f->len; i++)
		client_send(&h, c, f->b + i, 1);

	ptrdiff_t n = client_frame(&h, c, frame_buf, sizeof(frame_buf), 2000);
	ck_assert_int_gt(n, 0);
	struct spop_frame fr;
	answer_decode(frame_buf, (size_t)n, &fr);
	ck_assert_int_eq(fr.type, SPOP_FRAME_AGENT_HELLO);
	struct ack_vars v;
	read_ack(&h, c, 0, 1, &v);
	ck_assert_str_eq(ack_str(&v, "server"), "gpu2");
	read_ack(&h, c, 300, 2, &v);
	read_ack(&h, c, 5, 3, &v);
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* Frames cut at every offset of a two-frame stream, sent in two writes. */
START_TEST(notify_split_everywhere)
{
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	const char *const kv[] = { "model", "m1", NULL };
	fb_route(f, 7, 9, kv);
	for (size_t cut = 1; cut < f->len; cut += 3) {
		struct harness h;
		harness_init(&h, two_endpoints);
		struct client *c = harness_client(&h, 0);
		client_send(&h, c, f->b, cut);
		client_send(&h, c, f->b + cut, f->len - cut);
		ptrdiff_t n = client_frame(&h, c, frame_buf, sizeof(frame_buf), 2000);
		ck_assert_int_gt(n, 0);
		struct ack_vars v;
		read_ack(&h, c, 7, 9, &v);
		client_free(c);
		harness_finish(&h);
	}
	free(f);
}
END_TEST

/* ---- protocol errors ---- */

START_TEST(error_oversized_length)
{
	/* Before HELLO the limit is the agent's own size: one byte more is
	 * refused from its 4 bytes, no body sent. */
	struct harness h;
	harness_init(&h, NULL);
	struct client *c = harness_client(&h, 0);
	const uint32_t over = CONFIG_DEFAULT_MAX_FRAME_SIZE + 1;
	const uint8_t len[4] = { (uint8_t)(over >> 24), (uint8_t)(over >> 16),
				 (uint8_t)(over >> 8), (uint8_t)over };
	client_send(&h, c, len, sizeof(len));
	expect_disconnect(&h, c, SPOP_ERR_TOO_BIG);
	client_free(c);

	/* The garbage length seen in production. */
	struct client *d = harness_client(&h, 0);
	do_hello(&h, d, 16380, 16380);
	const uint8_t huge[4] = { 0x16, 0x02, 0xf2, 0x46 };
	client_send(&h, d, huge, sizeof(huge));
	expect_disconnect(&h, d, SPOP_ERR_TOO_BIG);
	client_free(d);
	harness_finish(&h);
}
END_TEST

START_TEST(error_zero_length)
{
	struct harness h;
	harness_init(&h, NULL);
	struct client *c = harness_client(&h, 0);
	const uint8_t zero[4] = { 0, 0, 0, 0 };
	client_send(&h, c, zero, sizeof(zero));
	expect_disconnect(&h, c, SPOP_ERR_INVALID);
	client_free(c);
	harness_finish(&h);
}
END_TEST

START_TEST(error_unknown_type)
{
	struct harness h;
	harness_init(&h, NULL);
	const uint8_t types[] = { 50, SPOP_FRAME_ACK, SPOP_FRAME_AGENT_HELLO };
	for (size_t i = 0; i < sizeof(types); i++) {
		struct client *c = harness_client(&h, 0);
		do_hello(&h, c, 16380, 16380);
		struct fb *f = calloc(1, sizeof(*f));
		fb_frame(f, types[i], SPOP_FLAG_FIN, 1, 1, NULL);
		client_send(&h, c, f->b, f->len);
		expect_disconnect(&h, c, SPOP_ERR_INVALID);
		free(f);
		client_free(c);
	}
	harness_finish(&h);
}
END_TEST

START_TEST(error_fragment)
{
	struct harness h;
	harness_init(&h, two_endpoints);
	/* A NOTIFY without FIN, then an UNSET continuation frame. */
	for (int k = 0; k < 2; k++) {
		struct client *c = harness_client(&h, 0);
		do_hello(&h, c, 16380, 16380);
		struct fb *f = calloc(1, sizeof(*f)), *p = calloc(1, sizeof(*p));
		fb_str(p, "route");
		fb_u8(p, 0);
		fb_frame(f, k == 0 ? SPOP_FRAME_NOTIFY : SPOP_FRAME_UNSET,
			 k == 0 ? 0 : SPOP_FLAG_FIN, 1, 1, p);
		client_send(&h, c, f->b, f->len);
		expect_disconnect(&h, c, SPOP_ERR_FRAG_NOT_SUPPORTED);
		free(f);
		free(p);
		client_free(c);
	}
	harness_finish(&h);
}
END_TEST

START_TEST(error_notify_before_hello)
{
	struct harness h;
	harness_init(&h, two_endpoints);
	struct client *c = harness_client(&h, 0);
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", "m1", NULL };
	fb_route(f, 1, 1, kv);
	client_send(&h, c, f->b, f->len);
	expect_disconnect(&h, c, SPOP_ERR_INVALID);
	ck_assert_uint_eq(h.srv.stats.frames[STATS_FRAME_ACK], 0);
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

START_TEST(error_malformed_notify)
{
	struct harness h;
	struct client *c = hello_client(&h, two_endpoints, 16380, 16380);
	/* Announces 2 arguments, carries 1. */
	struct fb *f = calloc(1, sizeof(*f)), *p = calloc(1, sizeof(*p));
	fb_str(p, "route");
	fb_u8(p, 2);
	fb_kv_str(p, "model", "m1");
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, 1, 1, p);
	client_send(&h, c, f->b, f->len);
	expect_disconnect(&h, c, SPOP_ERR_INVALID);
	free(f);
	free(p);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* A good `route` followed by a malformed message in the same NOTIFY: the
 * DISCONNECT, and no decision left behind (no ACK carries it, so no
 * feedback or log line would ever lower its in-flight count). */
START_TEST(error_malformed_after_route)
{
	struct harness h;
	struct client *c = hello_client(&h, two_endpoints, 16380, 16380);
	struct fb *f = calloc(1, sizeof(*f)), *p = calloc(1, sizeof(*p));
	fb_str(p, "route");
	fb_u8(p, 2);
	fb_kv_str(p, "session", "s1");
	fb_kv_str(p, "model", "m1");
	fb_str(p, "feedback");
	fb_u8(p, 2); /* announces 2 arguments, carries 1 */
	fb_kv_str(p, "server", "llm/gpu2");
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, 1, 1, p);
	client_send(&h, c, f->b, f->len);
	expect_disconnect(&h, c, SPOP_ERR_INVALID);

	struct core *core = h.srv.route.core;
	for (int i = core_endpoint_next(core, -1); i >= 0;
	     i = core_endpoint_next(core, i)) {
		struct core_endpoint_info info;
		ck_assert_int_eq(core_endpoint_info(core, i, 0, &info), 0);
		ck_assert_msg(info.in_flight == 0, "%s/%s key %s: in-flight %u",
			      info.backend, info.server,
			      info.key_id != NULL ? info.key_id : "-",
			      info.in_flight);
	}
	ck_assert_uint_eq(h.srv.stats.msgs_route, 0);
	free(f);
	free(p);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* Frames are decoded ahead of their answers (conn.c, CONN_AHEAD), but
 * never past a HELLO: the NOTIFY behind it in the same read is held to the
 * frame size the HELLO negotiated, not to the agent's own. */
START_TEST(hello_and_notify_in_one_read)
{
	struct harness h;
	harness_init(&h, NULL);
	struct client *c = harness_client(&h, 0);
	struct fb *f = calloc(1, sizeof(*f)), *n = calloc(1, sizeof(*n));
	fb_hello(f, 1024);
	fb_blob_notify(n, 1, 1, 1100);
	fb_bytes(f, n->b, n->len);
	client_send(&h, c, f->b, f->len);

	ptrdiff_t k = client_frame(&h, c, frame_buf, sizeof(frame_buf), 2000);
	ck_assert_int_gt(k, 0);
	struct spop_frame fr;
	answer_decode(frame_buf, (size_t)k, &fr);
	ck_assert_int_eq(fr.type, SPOP_FRAME_AGENT_HELLO);
	expect_disconnect(&h, c, SPOP_ERR_TOO_BIG);
	free(f);
	free(n);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* Keyed NOTIFYs in one read, a malformed one among them: those before it
 * are decided and answered in order, itself and those after it are not
 * (parsed ahead, they act only in their turn). */
START_TEST(notify_ahead_until_malformed)
{
	struct harness h;
	struct client *c = hello_client(&h, two_endpoints, 16380, 16380);
	struct fb *f = calloc(1, sizeof(*f)), *p = calloc(1, sizeof(*p));
	char session[32];
	for (uint64_t i = 1; i <= 9; i++) {
		if (i == 7) {
			fb_str(p, "route");
			fb_u8(p, 2); /* announces 2 arguments, carries 1 */
			fb_kv_str(p, "session", "broken");
			fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, i, 1, p);
			continue;
		}
		snprintf(session, sizeof(session), "conversation-%" PRIu64, i);
		const char *const kv[] = { "session", session, "model", "m1", NULL };
		fb_route(f, i, 1, kv);
	}
	client_send(&h, c, f->b, f->len);
	for (uint64_t i = 1; i <= 6; i++) {
		struct ack_vars v;
		read_ack(&h, c, i, 1, &v);
		ck_assert_str_eq(ack_str(&v, "reason"), "hash");
	}
	expect_disconnect(&h, c, SPOP_ERR_INVALID);
	ck_assert_uint_eq(h.srv.stats.msgs_route, 6);
	free(f);
	free(p);
	client_free(c);
	harness_finish(&h);
}
END_TEST

START_TEST(haproxy_disconnect)
{
	struct harness h;
	struct client *c = hello_client(&h, NULL, 16380, 16380);
	struct fb *f = calloc(1, sizeof(*f)), *p = calloc(1, sizeof(*p));
	fb_kv_u32(p, "status-code", SPOP_ERR_TIMEOUT);
	fb_kv_str(p, "message", "a timeout occurred");
	fb_frame(f, SPOP_FRAME_HAPROXY_DISCONNECT, SPOP_FLAG_FIN, 0, 0, p);
	client_send(&h, c, f->b, f->len);
	expect_disconnect(&h, c, SPOP_ERR_NONE);
	ck_assert_uint_eq(h.srv.stats.disconnects_received[SPOP_ERR_TIMEOUT], 1);
	free(f);
	free(p);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* One connection's protocol error leaves the others alone. */
START_TEST(error_isolated)
{
	struct harness h;
	harness_init(&h, two_endpoints);
	struct client *good = harness_client(&h, 0);
	struct client *bad = harness_client(&h, 0);
	do_hello(&h, good, 16380, 16380);
	do_hello(&h, bad, 16380, 16380);

	const uint8_t garbage[] = { 0, 0, 0, 5, 0xee, 0, 0, 0, 1 };
	client_send(&h, bad, garbage, sizeof(garbage));
	expect_disconnect(&h, bad, SPOP_ERR_INVALID);

	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", "m1", NULL };
	fb_route(f, 11, 1, kv);
	client_send(&h, good, f->b, f->len);
	struct ack_vars v;
	read_ack(&h, good, 11, 1, &v);
	ck_assert_str_eq(ack_str(&v, "reason"), "p2c");
	ck_assert_uint_eq(h.srv.stats.conn_active, 1);
	free(f);
	client_free(good);
	client_free(bad);
	harness_finish(&h);
}
END_TEST

/* ---- route and feedback ---- */

/* In-flight back to 0, as a runtime-API poll of an idle HAProxy would:
 * decisions alone only raise it (responses are not completions). */
static void idle_poll(struct harness *h)
{
	struct core *core = h->srv.route.core;
	for (int i = core_endpoint_next(core, -1); i >= 0;
	     i = core_endpoint_next(core, i))
		core_endpoint_sync(core, i, CORE_ADMIN_ENABLED, 0,
				   uv_now(&h->loop));
}

/* A feedback message for backend/server (key and akey may be NULL). */
static void fb_feedback(struct fb *f, uint64_t sid, const char *server,
			const char *key, const char *akey, int status)
{
	struct fb *p = calloc(1, sizeof(*p));
	fb_str(p, "feedback");
	fb_u8(p, (uint8_t)(3 + (key != NULL) + (akey != NULL)));
	fb_kv_str(p, "server", server);
	fb_str(p, "status");
	fb_u8(p, SPOP_DATA_INT64);
	fb_varint(p, (uint64_t)status);
	fb_kv_str(p, "tr", status < 500 ? "150" : "-1");
	if (key != NULL)
		fb_kv_str(p, "key", key);
	if (akey != NULL)
		fb_kv_str(p, "akey", akey);
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, sid, 1, p);
	free(p);
}

/* One route message for session abc, its ACK into v. */
static void route_session(struct harness *h, struct client *c, uint64_t sid,
			  struct ack_vars *v)
{
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "session", "abc", "model", "m1", NULL };
	fb_route(f, sid, 1, kv);
	client_send(h, c, f->b, f->len);
	read_ack(h, c, sid, 1, v);
	free(f);
}

static void send_feedback(struct harness *h, struct client *c, uint64_t sid,
			  const char *server, const char *key, const char *akey,
			  int status)
{
	struct fb *f = calloc(1, sizeof(*f));
	struct ack_vars v;
	fb_feedback(f, sid, server, key, akey, status);
	client_send(h, c, f->b, f->len);
	read_ack(h, c, sid, 1, &v); /* the feedback is applied by now */
	ck_assert(ack_has(&v, NOTIFY_ACK_VAR));
	free(f);
}

/* A session returns to its server once a success is fed back; five 500s
 * from that server move it elsewhere. */
START_TEST(route_session_sticks)
{
	struct harness h;
	struct client *c = hello_client(&h, two_endpoints, 16380, 16380);

	struct ack_vars v;
	route_session(&h, c, 1, &v);
	ck_assert_str_eq(ack_str(&v, "reason"), "hash");
	ck_assert_str_eq(ack_str(&v, "backend"), "llm");
	char server[32], path[64], key[32] = "", akey[32];
	strcpy(server, ack_str(&v, "server"));
	if (ack_has(&v, "key")) /* gpu1's keys are team-a and team-b */
		strcpy(key, ack_str(&v, "key"));
	ck_assert(strcmp(server, "gpu1") == 0 ? key[0] != '\0' : key[0] == '\0');
	strcpy(akey, ack_str(&v, "akey"));
	ck_assert_uint_eq(strlen(akey), 16);
	ck_assert_uint_eq(strspn(akey, "0123456789abcdef"), 16);
	ck_assert(!ack_has(&v, "ack"));
	snprintf(path, sizeof(path), "llm/%s", server);

	send_feedback(&h, c, 2, path, key[0] ? key : NULL, akey, 200);
	for (uint64_t i = 0; i < 3; i++) {
		idle_poll(&h);
		route_session(&h, c, 10 + i, &v);
		ck_assert_str_eq(ack_str(&v, "reason"), "affinity");
		ck_assert_str_eq(ack_str(&v, "server"), server);
		ck_assert_str_eq(ack_str(&v, "akey"), akey);
		if (key[0])
			ck_assert_str_eq(ack_str(&v, "key"), key);
	}
	ck_assert_uint_eq(h.srv.stats.reasons[ROUTE_AFFINITY], 3);
	ck_assert_uint_eq(h.srv.stats.reasons[ROUTE_HASH], 1);

	for (uint64_t i = 0; i < 5; i++)
		send_feedback(&h, c, 20 + i, path, key[0] ? key : NULL, akey, 500);
	idle_poll(&h);
	route_session(&h, c, 30, &v);
	ck_assert_str_ne(ack_str(&v, "reason"), "affinity");
	/* Another endpoint: another server, or gpu1 with its other key. */
	const char *k2 = ack_has(&v, "key") ? ack_str(&v, "key") : "";
	ck_assert(strcmp(ack_str(&v, "server"), server) != 0 ||
		  strcmp(k2, key) != 0);
	struct core_stats cs;
	core_stats(h.srv.route.core, &cs);
	ck_assert_uint_eq(cs.outcomes[CORE_OUTCOME_SUCCESS], 1);
	ck_assert_uint_eq(cs.outcomes[CORE_OUTCOME_FAILURE], 5);
	ck_assert_uint_eq(h.srv.route.fb.unknown_server, 0);

	/* Feedback about a server warmlane does not know: counted only. */
	send_feedback(&h, c, 40, "llm/gpu9", NULL, NULL, 200);
	ck_assert_uint_eq(h.srv.route.fb.unknown_server, 1);
	ck_assert_uint_eq(h.srv.stats.conn_active, 1);
	client_free(c);
	harness_finish(&h);
}
END_TEST

START_TEST(route_model_filter)
{
	struct harness h;
	struct client *c = hello_client(&h, two_endpoints, 16380, 16380);

	struct fb *f = calloc(1, sizeof(*f));
	const char *const m2[] = { "model", "m2", NULL };
	const char *const m9[] = { "model", "m9", "install", "i-1", NULL };
	const char *const none[] = { NULL };
	fb_route(f, 1, 1, m2);
	fb_route(f, 1, 2, m2);
	fb_route(f, 1, 3, m9);
	fb_route(f, 1, 4, none);
	fb_route(f, 1, 5, none);
	client_send(&h, c, f->b, f->len);

	struct ack_vars v;
	read_ack(&h, c, 1, 1, &v);
	ck_assert_str_eq(ack_str(&v, "server"), "gpu2");
	read_ack(&h, c, 1, 2, &v);
	ck_assert_str_eq(ack_str(&v, "server"), "gpu2");
	read_ack(&h, c, 1, 3, &v);
	ck_assert_str_eq(ack_str(&v, "reason"), "no_model");
	ck_assert(!ack_has(&v, "backend"));
	ck_assert(!ack_has(&v, "server"));
	ck_assert_ptr_nonnull(ack_str(&v, "akey"));
	/* No model argument: every endpoint; no identity: p2c. */
	for (uint64_t fid = 4; fid <= 5; fid++) {
		read_ack(&h, c, 1, fid, &v);
		const char *s4 = ack_str(&v, "server");
		ck_assert_ptr_nonnull(s4);
		ck_assert(strcmp(s4, "gpu1") == 0 || strcmp(s4, "gpu2") == 0);
		ck_assert_str_eq(ack_str(&v, "reason"), "p2c");
		ck_assert(!ack_has(&v, "akey")); /* no identity argument */
	}
	ck_assert_uint_eq(h.srv.stats.reasons[ROUTE_NO_MODEL], 1);
	ck_assert_uint_eq(h.srv.stats.reasons[ROUTE_P2C], 4); /* m2 twice too */
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

START_TEST(route_no_endpoints)
{
	struct harness h;
	struct client *c = hello_client(&h, NULL, 16380, 16380);
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", "m1", NULL };
	fb_route(f, 2, 3, kv);
	client_send(&h, c, f->b, f->len);
	struct ack_vars v;
	read_ack(&h, c, 2, 3, &v);
	ck_assert_str_eq(ack_str(&v, "reason"), "none");
	ck_assert(!ack_has(&v, "backend"));
	ck_assert(!ack_has(&v, "server"));
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* HAProxy sends absent samples as NULL and numbers as INT64: any type is
 * accepted for any argument. */
START_TEST(route_any_types)
{
	struct harness h;
	struct client *c = hello_client(&h, two_endpoints, 16380, 16380);
	struct fb *f = calloc(1, sizeof(*f)), *p = calloc(1, sizeof(*p));
	fb_str(p, "route");
	fb_u8(p, 5);
	fb_str(p, "session");
	fb_u8(p, SPOP_DATA_NULL);
	fb_str(p, "prefix1");
	fb_u8(p, SPOP_DATA_INT64);
	fb_varint(p, UINT64_MAX - 4); /* -5 */
	fb_str(p, "src");
	fb_u8(p, SPOP_DATA_IPV4);
	fb_bytes(p, "\x7f\x00\x00\x01", 4);
	fb_str(p, "stream");
	fb_u8(p, 0x11);
	fb_str(p, "");
	fb_u8(p, SPOP_DATA_STRING);
	fb_str(p, "positional");
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, 9, 9, p);
	client_send(&h, c, f->b, f->len);
	struct ack_vars v;
	read_ack(&h, c, 9, 9, &v);
	ck_assert_str_eq(ack_str(&v, "reason"), "hash");
	ck_assert_ptr_nonnull(ack_str(&v, "akey")); /* from prefix1 */
	free(f);
	free(p);
	client_free(c);
	harness_finish(&h);
}
END_TEST

static void fb_msg_header(struct fb *p, const char *name, uint8_t nargs)
{
	fb_str(p, name);
	fb_u8(p, nargs);
}

START_TEST(feedback_and_unknown_acked)
{
	struct harness h;
	struct client *c = hello_client(&h, two_endpoints, 16380, 16380);

	struct fb *f = calloc(1, sizeof(*f)), *p = calloc(1, sizeof(*p));
	/* feedback as HAProxy 2.6 sends it */
	fb_msg_header(p, "feedback", 5);
	fb_kv_str(p, "server", "llm/gpu1");
	fb_str(p, "status");
	fb_u8(p, SPOP_DATA_INT64);
	fb_varint(p, 200);
	fb_kv_str(p, "tr", "-1");
	fb_str(p, "retry_after");
	fb_u8(p, SPOP_DATA_NULL);
	fb_kv_str(p, "akey", "0123456789abcdef");
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, 3, 1, p);

	p->len = 0;
	fb_msg_header(p, "something-new", 1);
	fb_kv_str(p, "x", "y");
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, 5, 1, p);

	/* Both in one frame, a prefix of a known name, and no message. */
	p->len = 0;
	fb_msg_header(p, "feedback", 0);
	fb_msg_header(p, "rout", 0);
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, 7, 1, p);
	fb_frame(f, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, 9, 1, NULL);
	client_send(&h, c, f->b, f->len);

	static const uint64_t sids[] = { 3, 5, 7, 9 };
	for (size_t i = 0; i < 4; i++) {
		struct ack_vars v;
		read_ack(&h, c, sids[i], 1, &v);
		ck_assert_uint_eq(v.n, 1); /* one `ack`, never twice */
		ck_assert_str_eq(v.v[0].name, NOTIFY_ACK_VAR);
		ck_assert_int_eq(v.v[0].val.type, SPOP_DATA_BOOL);
		ck_assert(v.v[0].val.u.b);
		ck_assert(!ack_has(&v, "reason"));
	}
	ck_assert_uint_eq(h.srv.stats.msgs_feedback, 2);
	/* llm/gpu1 without a key (gpu1 has two): HAProxy's own choice,
	 * which reaches gpu1's endpoints; no server at all: unknown. */
	ck_assert_uint_eq(h.srv.route.fb.unknown_server, 1);
	ck_assert_uint_eq(h.srv.stats.msgs_unknown, 2);
	ck_assert_uint_eq(h.srv.stats.msgs_route, 0);
	ck_assert_uint_eq(h.srv.stats.conn_active, 1);
	free(f);
	free(p);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* A peer that does not read: the agent stops reading at CONN_WBUF_MAX
 * writes in flight, and answers everything once the peer reads again. */
START_TEST(backpressure)
{
	struct harness h;
	harness_init(&h, two_endpoints);
	struct client *c = harness_client(&h, 4096);
	do_hello(&h, c, 16380, 16380);

	enum { N = 3000 };
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", "m1", NULL };
	uint64_t sent = 0, got = 0;
	while (sent < N) {
		f->len = 0;
		for (int i = 0; i < 100; i++, sent++)
			fb_route(f, sent, 1, kv);
		client_send(&h, c, f->b, f->len);
	}
	ck_assert_uint_gt(h.srv.stats.read_stalls, 0);
	while (got < N) {
		struct ack_vars v;
		read_ack(&h, c, got, 1, &v);
		got++;
	}
	ck_assert_uint_eq(h.srv.stats.frames[STATS_FRAME_ACK], N);
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* Several connections pipelining at once, their frames interleaved in
 * time: each gets exactly its own answers, in its own order. */
START_TEST(many_connections_interleaved)
{
	enum { NC = 8, PER = 60 };
	struct harness h;
	harness_init(&h, two_endpoints);
	struct client *c[NC];
	for (int i = 0; i < NC; i++) {
		c[i] = harness_client(&h, 0);
		do_hello(&h, c[i], 16380, 16380);
	}
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", "m1", NULL };
	for (int round = 0; round < PER; round += 10) {
		for (int i = 0; i < NC; i++) {
			f->len = 0;
			for (int k = round; k < round + 10; k++)
				fb_route(f, (uint64_t)i * 1000 + (uint64_t)k,
					 (uint64_t)k, kv);
			/* Cut each batch in two writes mid-frame. */
			client_send(&h, c[i], f->b, f->len / 2 + 3);
			client_send(&h, c[i], f->b + f->len / 2 + 3,
				    f->len - f->len / 2 - 3);
		}
	}
	for (int i = 0; i < NC; i++) {
		for (int k = 0; k < PER; k++) {
			struct ack_vars v;
			read_ack(&h, c[i], (uint64_t)i * 1000 + (uint64_t)k,
				 (uint64_t)k, &v);
		}
		client_free(c[i]);
	}
	ck_assert_uint_eq(h.srv.stats.frames[STATS_FRAME_ACK], NC * PER);
	ck_assert_uint_eq(h.srv.stats.conn_accepted, NC);
	free(f);
	harness_finish(&h);
}
END_TEST

/* ---- timeouts ---- */

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Pumps the loop for ms milliseconds (the agent's timers run meanwhile). */
static void pump_for(struct harness *h, uint64_t ms)
{
	uint64_t end = mono_ms() + ms;
	while (mono_ms() < end) {
		harness_pump(h);
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	}
}

/* Reads the AGENT-DISCONNECT of c (waiting up to wait_ms), checks its
 * status and the close after it; returns how long it took. */
static uint64_t wait_disconnect(struct harness *h, struct client *c,
				uint32_t status, int wait_ms)
{
	uint64_t t0 = mono_ms();
	ptrdiff_t n = client_frame(h, c, frame_buf, sizeof(frame_buf), wait_ms);
	ck_assert_msg(n > 0, "no AGENT-DISCONNECT within %d ms (got %td)",
		      wait_ms, n);
	ck_assert_uint_eq(answer_disconnect_status(frame_buf, (size_t)n), status);
	uint64_t took = mono_ms() - t0;
	ck_assert_msg(client_eof(h, c, 2000), "connection not closed");
	return took;
}

/* A connection that never sends its HELLO, and one that trickles it a
 * byte at a time, are both closed after spop.hello_timeout with status 2
 * (timeout); one that made its HELLO stays. */
START_TEST(hello_timeout)
{
	struct harness h;
	harness_init(&h, "spop: { hello_timeout: 200ms }\n");
	struct client *silent = harness_client(&h, 0);
	struct client *trickle = harness_client(&h, 0);
	struct client *good = harness_client(&h, 0);
	do_hello(&h, good, 16380, 16380);
	struct fb *f = calloc(1, sizeof(*f));
	fb_hello(f, 16380);
	/* a byte every 20 ms: the whole HELLO would take seconds */
	uint64_t t0 = mono_ms();
	size_t sent = 0;
	while (!trickle->eof && sent < f->len && mono_ms() - t0 < 3000) {
		if (write(trickle->fd, f->b + sent, 1) == 1)
			sent++;
		pump_for(&h, 20);
		ptrdiff_t n = client_frame(&h, trickle, frame_buf,
					   sizeof(frame_buf), 0);
		if (n > 0) {
			ck_assert_uint_eq(answer_disconnect_status(frame_buf,
								   (size_t)n),
					  SPOP_ERR_TIMEOUT);
			break;
		}
	}
	uint64_t trickle_ms = mono_ms() - t0;
	ck_assert_msg(sent < f->len, "the trickled HELLO was let through");
	ck_assert(client_eof(&h, trickle, 2000));
	uint64_t silent_ms = wait_disconnect(&h, silent, SPOP_ERR_TIMEOUT, 3000);
	fprintf(stderr, "# hello_timeout 200ms: trickling client closed after "
		"%" PRIu64 " ms (%zu of %zu HELLO bytes sent)\n", trickle_ms,
		sent, f->len);
	(void)silent_ms;
	ck_assert_uint_eq(h.srv.stats.timeouts_hello, 2);
	ck_assert_uint_eq(h.srv.stats.timeouts_idle, 0);
	ck_assert_uint_eq(h.srv.stats.disconnects_sent[SPOP_ERR_TIMEOUT], 2);
	/* the one that made its HELLO is served */
	const char *const kv[] = { "model", "m1", NULL };
	f->len = 0;
	fb_route(f, 1, 1, kv);
	client_send(&h, good, f->b, f->len);
	struct ack_vars v;
	read_ack(&h, good, 1, 1, &v);
	harness_pump(&h);
	ck_assert_uint_eq(h.srv.stats.conn_active, 1);
	free(f);
	client_free(silent);
	client_free(trickle);
	client_free(good);
	harness_finish(&h);
}
END_TEST

/* After the HELLO, whole frames keep a connection open past
 * spop.idle_timeout; silence, or a frame trickled a byte at a time, gets
 * an orderly AGENT-DISCONNECT (status 0) after it. */
START_TEST(idle_timeout)
{
	struct harness h;
	harness_init(&h, "spop: { hello_timeout: 5s, idle_timeout: 1s }\n");
	struct client *c = harness_client(&h, 0);
	struct client *t = harness_client(&h, 0);
	do_hello(&h, c, 16380, 16380);
	do_hello(&h, t, 16380, 16380);
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", "m1", NULL };
	fb_route(f, 7, 1, kv);
	/* c: a NOTIFY every 100 ms for 2.5 s. t: the same NOTIFY, one byte
	 * per 100 ms: bytes arrive, no whole frame. */
	size_t tsent = 0;
	for (int i = 0; i < 25; i++) {
		client_send(&h, c, f->b, f->len);
		struct ack_vars v;
		read_ack(&h, c, 7, 1, &v);
		if (!t->eof && tsent < f->len &&
		    write(t->fd, f->b + tsent, 1) == 1)
			tsent++;
		pump_for(&h, 100);
		ptrdiff_t n;
		if (!t->eof && (n = client_frame(&h, t, frame_buf,
						 sizeof(frame_buf), 0)) > 0) {
			ck_assert_uint_eq(answer_disconnect_status(frame_buf,
								   (size_t)n),
					  SPOP_ERR_NONE);
			ck_assert(client_eof(&h, t, 2000));
		}
	}
	ck_assert_msg(t->eof, "a trickled frame kept the connection open");
	ck_assert_uint_lt(tsent, f->len);
	ck_assert_uint_eq(h.srv.stats.timeouts_idle, 1);
	/* c is still served */
	client_send(&h, c, f->b, f->len);
	struct ack_vars v;
	read_ack(&h, c, 7, 1, &v);
	uint64_t took = wait_disconnect(&h, c, SPOP_ERR_NONE, 5000);
	fprintf(stderr, "# idle_timeout 1s: closed %" PRIu64
		" ms after its last frame\n", took);
	ck_assert_uint_ge(took, 500);
	ck_assert_uint_eq(h.srv.stats.timeouts_idle, 2);
	ck_assert_uint_eq(h.srv.stats.timeouts_hello, 0);
	free(f);
	client_free(c);
	client_free(t);
	harness_finish(&h);
}
END_TEST

/* A reload that shortens spop.idle_timeout applies to connections already
 * open: the sweep re-arms for the new value at once. */
START_TEST(idle_timeout_reload)
{
	struct harness h;
	struct client *c = hello_client(&h, "spop: { idle_timeout: 1h }\n", 16380, 16380);
	/* past the hello timeout: the timer is now armed for the hour */
	pump_for(&h, 800);
	ck_assert(!c->eof);
	ck_assert_uint_gt(h.srv.tq_due, uv_now(&h.loop) + 3000000);
	/* what reload_commit does: the server commits next, then the
	 * running configuration becomes next (the same struct here) */
	h.cfg.idle_timeout_ms = 100;
	server_relisten_commit(&h.srv, &h.cfg, NULL);
	uint64_t took = wait_disconnect(&h, c, SPOP_ERR_NONE, 3000);
	fprintf(stderr, "# idle_timeout 1h -> 100ms by a reload: closed after "
		"%" PRIu64 " ms\n", took);
	ck_assert_uint_eq(h.srv.stats.timeouts_idle, 1);
	client_free(c);
	harness_finish(&h);
}
END_TEST

/* ---- stopping ---- */

static bool stopped_flag;
static void on_stopped(struct server *s, void *arg)
{
	(void)s;
	(void)arg;
	stopped_flag = true;
}

START_TEST(stop_drains)
{
	struct harness h;
	struct client *c = hello_client(&h, two_endpoints, 16380, 16380);
	struct fb *f = calloc(1, sizeof(*f));
	const char *const kv[] = { "model", "m1", NULL };
	fb_route(f, 4, 4, kv);
	client_send(&h, c, f->b, f->len);

	stopped_flag = false;
	server_stop(&h.srv, 1000, on_stopped, NULL);
	h.stopped = false;
	struct ack_vars v;
	read_ack(&h, c, 4, 4, &v);
	expect_disconnect(&h, c, SPOP_ERR_NONE);
	for (int i = 0; i < 100 && !stopped_flag; i++)
		harness_pump(&h);
	ck_assert(stopped_flag);
	h.stopped = true;
	free(f);
	client_free(c);
	harness_finish(&h);
}
END_TEST

static Suite *agent_suite(void)
{
	Suite *s = suite_create("agent-conn");
	TCase *tc = tcase_create("conn");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, hello_normal);
	tcase_add_test(tc, hello_smaller_frame_size);
	tcase_add_test(tc, hello_agent_smaller);
	tcase_add_test(tc, hello_after_reload_raising_frame_size);
	tcase_add_test(tc, hello_healthcheck);
	tcase_add_loop_test(tc, hello_refused, 0,
			    (int)(sizeof(bad_hellos) / sizeof(bad_hellos[0])));
	tcase_add_test(tc, hello_twice);
	tcase_add_test(tc, notify_pipelined_ids);
	tcase_add_test(tc, notify_coalesced_writes);
	tcase_add_test(tc, notify_coalesced_large);
	tcase_add_test(tc, notify_byte_by_byte);
	tcase_add_test(tc, notify_split_everywhere);
	tcase_add_test(tc, error_oversized_length);
	tcase_add_test(tc, error_zero_length);
	tcase_add_test(tc, error_unknown_type);
	tcase_add_test(tc, error_fragment);
	tcase_add_test(tc, error_notify_before_hello);
	tcase_add_test(tc, error_malformed_notify);
	tcase_add_test(tc, error_malformed_after_route);
	tcase_add_test(tc, hello_and_notify_in_one_read);
	tcase_add_test(tc, notify_ahead_until_malformed);
	tcase_add_test(tc, haproxy_disconnect);
	tcase_add_test(tc, error_isolated);
	tcase_add_test(tc, route_session_sticks);
	tcase_add_test(tc, route_model_filter);
	tcase_add_test(tc, route_no_endpoints);
	tcase_add_test(tc, route_any_types);
	tcase_add_test(tc, feedback_and_unknown_acked);
	tcase_add_test(tc, backpressure);
	tcase_add_test(tc, many_connections_interleaved);
	tcase_add_test(tc, stop_drains);
	tcase_add_test(tc, hello_timeout);
	tcase_add_test(tc, idle_timeout);
	tcase_add_test(tc, idle_timeout_reload);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(agent_suite());
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
