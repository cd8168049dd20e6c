/* test_hello.c - proto: HELLO parsing and negotiation, AGENT-HELLO,
 * DISCONNECT. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "../run.h"
#include "spop.h"

#define UUID "3f2504e0-4f89-41d3-9a0c-0305e82c3301"

static const uint8_t *payload(const struct golden *g, size_t *len)
{
	*len = g->len - 11; /* every golden HELLO/DISCONNECT has 1-byte ids */
	return guard_place(g->bytes + 11, *len);
}

START_TEST(hello_26_parse)
{
	struct spop_hello h;
	enum spop_status st = SPOP_ERR_NONE;
	uint32_t max = 0;
	size_t len;
	const uint8_t *p = payload(&golden_hello_26, &len);

	ck_assert_uint_eq(strlen(UUID), 36);
	ck_assert_int_eq(spop_hello_parse(p, len, &h, &st), 0);
	ck_assert(h.has_versions && h.has_max_frame_size && h.has_capabilities);
	ck_assert(spop_str_eq(h.versions, "2.0"));
	ck_assert_uint_eq(h.max_frame_size, 16380);
	ck_assert(spop_str_eq(h.capabilities, "pipelining,async"));
	ck_assert(h.cap_pipelining);
	ck_assert(h.cap_async);
	ck_assert(!h.cap_fragmentation);
	ck_assert(!h.healthcheck);
	ck_assert(spop_str_eq(h.engine_id, UUID));

	ck_assert_int_eq(spop_hello_negotiate(&h, SPOP_DEFAULT_FRAME_SIZE, &max,
					      &st), 0);
	ck_assert_uint_eq(max, 16380);
	ck_assert_int_eq(spop_hello_negotiate(&h, 1024, &max, &st), 0);
	ck_assert_uint_eq(max, 1024);
	ck_assert_int_eq(spop_hello_negotiate(&h, 100000, &max, &st), 0);
	ck_assert_uint_eq(max, 16380);
	ck_assert_int_eq(spop_hello_negotiate(&h, 256, &max, &st), 0);
	ck_assert_uint_eq(max, 256);
}
END_TEST

/* The encoder rebuilds the captured HELLO byte for byte. */
START_TEST(hello_26_rebuild)
{
	uint8_t buf[256];
	struct spop_writer w;
	struct spop_data v = spop_data_string("2.0", 3);
	struct spop_data m = spop_data_uint32(16380);
	struct spop_data c = spop_data_string("pipelining,async", 16);
	struct spop_data e = spop_data_string(UUID, 36);

	spop_frame_begin(&w, buf, sizeof(buf), SPOP_FRAME_HAPROXY_HELLO,
			 SPOP_FLAG_FIN, 0, 0);
	spop_put_kv(&w, "supported-versions", &v);
	spop_put_kv(&w, "max-frame-size", &m);
	spop_put_kv(&w, "capabilities", &c);
	spop_put_kv(&w, "engine-id", &e);
	ck_assert_int_eq(spop_frame_finish(&w), 133);
	ck_assert_mem_eq(buf, golden_hello_26.bytes, 133);
	ck_assert_mem_eq(buf, "\x00\x00\x00\x81", 4);
}
END_TEST

START_TEST(hello_healthcheck)
{
	uint8_t buf[256];
	struct spop_writer w;
	struct spop_data v = spop_data_string("2.0", 3);
	struct spop_data m = spop_data_uint32(16380);
	struct spop_data c = spop_data_string("", 0);
	struct spop_data t = spop_data_bool(true);
	struct spop_hello h;
	enum spop_status st;
	uint32_t max;
	size_t len;
	const uint8_t *p;

	spop_frame_begin(&w, buf, sizeof(buf), SPOP_FRAME_HAPROXY_HELLO,
			 SPOP_FLAG_FIN, 0, 0);
	spop_put_kv(&w, "supported-versions", &v);
	spop_put_kv(&w, "max-frame-size", &m);
	spop_put_kv(&w, "capabilities", &c);
	spop_put_kv(&w, "healthcheck", &t);
	ck_assert_int_eq(spop_frame_finish(&w), (ptrdiff_t)golden_hello_hc.len);
	ck_assert_mem_eq(buf, golden_hello_hc.bytes, golden_hello_hc.len);

	p = payload(&golden_hello_hc, &len);
	ck_assert_int_eq(spop_hello_parse(p, len, &h, &st), 0);
	ck_assert(h.healthcheck);
	ck_assert(h.has_capabilities);
	ck_assert_uint_eq(h.capabilities.len, 0);
	ck_assert(!h.cap_pipelining && !h.cap_async && !h.cap_fragmentation);
	ck_assert_uint_eq(h.engine_id.len, 0);
	ck_assert_ptr_nonnull(h.engine_id.ptr);
	ck_assert_int_eq(spop_hello_negotiate(&h, SPOP_DEFAULT_FRAME_SIZE, &max,
					      &st), 0);
	ck_assert_uint_eq(max, 16380);
}
END_TEST

START_TEST(agent_hello_golden)
{
	uint8_t buf[128];
	struct spop_frame f;
	struct spop_reader r;
	struct spop_str k;
	struct spop_data v;
	enum spop_status st;
	ptrdiff_t n;

	memset(buf, 0xaa, sizeof(buf));
	n = spop_agent_hello_encode(buf, sizeof(buf), 16380, false);
	ck_assert_int_eq(n, (ptrdiff_t)golden_agent_hello.len);
	ck_assert_mem_eq(buf, golden_agent_hello.bytes, golden_agent_hello.len);
	ck_assert_uint_eq(buf[n], 0xaa);

	/* With pipelining: "capabilities" = "pipelining". */
	n = spop_agent_hello_encode(buf, sizeof(buf), 256, true);
	ck_assert_int_eq(n, (ptrdiff_t)golden_agent_hello.len + 10 - 1);
	ck_assert_int_eq(spop_frame_decode(buf, (size_t)n, 256, &f, &st), n);
	ck_assert_int_eq(f.type, SPOP_FRAME_AGENT_HELLO);
	spop_reader_init(&r, f.payload, f.payload_len);
	ck_assert_int_eq(spop_kv_next(&r, &k, &v, &st), 1);
	ck_assert(spop_str_eq(k, "version"));
	ck_assert_int_eq(spop_kv_next(&r, &k, &v, &st), 1);
	ck_assert(spop_str_eq(k, "max-frame-size"));
	ck_assert_int_eq(v.type, SPOP_DATA_UINT32);
	ck_assert_uint_eq(v.u.u32, 256);
	ck_assert_int_eq(spop_kv_next(&r, &k, &v, &st), 1);
	ck_assert(spop_str_eq(k, "capabilities"));
	ck_assert(spop_str_eq(v.u.str, "pipelining"));
	ck_assert_int_eq(spop_kv_next(&r, &k, &v, &st), 0);
}
END_TEST

/* Too small a buffer, of every size, against the guard page: NEED_MORE and
 * not one byte written. */
START_TEST(agent_hello_small_buffer)
{
	size_t cap, i;

	for (cap = 0; cap < golden_agent_hello.len; cap++) {
		uint8_t *buf = guard_buf(cap);

		ck_assert_int_eq(spop_agent_hello_encode(buf, cap, 16380,
							 false),
				 SPOP_NEED_MORE);
		for (i = 0; i < cap; i++)
			ck_assert_uint_eq(buf[i], 0xaa);
	}
	ck_assert_int_eq(spop_agent_hello_encode(guard_buf(cap), cap, 16380,
						 false), (ptrdiff_t)cap);
}
END_TEST

/* Builds a HELLO payload from up to four KV pairs (NULL key ends). */
static size_t build(uint8_t *buf, size_t cap, const char *k1,
		    struct spop_data v1, const char *k2, struct spop_data v2,
		    const char *k3, struct spop_data v3, const char *k4,
		    struct spop_data v4)
{
	struct spop_writer w;

	spop_writer_init(&w, buf, cap);
	if (k1)
		spop_put_kv(&w, k1, &v1);
	if (k2)
		spop_put_kv(&w, k2, &v2);
	if (k3)
		spop_put_kv(&w, k3, &v3);
	if (k4)
		spop_put_kv(&w, k4, &v4);
	ck_assert(!w.overflow);
	return w.len;
}

#define S(s) spop_data_string(s, strlen(s))
#define U(v) spop_data_uint32(v)
#define VK "supported-versions"
#define MK "max-frame-size"
#define CK "capabilities"

/* Parses, then negotiates with our 16380; returns 0 or the status. */
static int hello_status(const uint8_t *buf, size_t len, struct spop_hello *h)
{
	enum spop_status st = SPOP_ERR_NONE;
	uint32_t max = 0;
	const uint8_t *p = guard_place(buf, len);

	if (spop_hello_parse(p, len, h, &st) != 0)
		return (int)st;
	if (spop_hello_negotiate(h, SPOP_DEFAULT_FRAME_SIZE, &max, &st) != 0)
		return (int)st;
	ck_assert_uint_ge(max, SPOP_MIN_FRAME_SIZE);
	return 0;
}

START_TEST(hello_missing_keys)
{
	uint8_t buf[256];
	struct spop_data n = spop_data_null();
	struct spop_hello h;
	size_t len;

	len = build(buf, sizeof(buf), MK, U(16380), CK, S(""), NULL, n, NULL,
		    n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_NO_VSN);
	len = build(buf, sizeof(buf), VK, S("2.0"), CK, S(""), NULL, n, NULL,
		    n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_NO_FRAME_SIZE);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), NULL, n,
		    NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_NO_CAP);
	/* All missing: the version is reported first. */
	ck_assert_int_eq(hello_status(buf, 0, &h), SPOP_ERR_NO_VSN);
	/* Unknown keys do not stand in for known ones. */
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), "capability",
		    S("pipelining"), "x", n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_NO_CAP);
}
END_TEST

/* Keys match exactly: "max" is not "max-frame-size", nor is a longer key. */
START_TEST(hello_exact_keys)
{
	uint8_t buf[256];
	struct spop_data n = spop_data_null();
	struct spop_hello h;
	size_t len;

	len = build(buf, sizeof(buf), VK, S("2.0"), "max", U(16380), CK, S(""),
		    NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_NO_FRAME_SIZE);
	len = build(buf, sizeof(buf), VK, S("2.0"), "max-frame-sizeX", U(16380),
		    CK, S(""), NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_NO_FRAME_SIZE);
	len = build(buf, sizeof(buf), "supported", S("2.0"), MK, U(16380), CK,
		    S(""), NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_NO_VSN);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), "cap", S(""),
		    NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_NO_CAP);
	/* "health" is not "healthcheck". */
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), CK, S(""),
		    "health", spop_data_bool(true));
	ck_assert_int_eq(hello_status(buf, len, &h), 0);
	ck_assert(!h.healthcheck);
}
END_TEST

START_TEST(hello_versions)
{
	static const char *const good[] = { "2.0", "2.0, 1.5", " 2.0 ",
					    "1.5,2.0", "1.0,\t2.0\t,3.0" };
	static const char *const bad[] = { "1.0", "2.00", "2.1", "", "2",
					   "2.0.1", "20", ",", "2,0",
					   "x2.0", "2.0x, 1.5" };
	uint8_t buf[256];
	struct spop_data n = spop_data_null();
	struct spop_hello h;
	size_t i, len;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		len = build(buf, sizeof(buf), VK, S(good[i]), MK, U(16380), CK,
			    S(""), NULL, n);
		ck_assert_msg(hello_status(buf, len, &h) == 0, "'%s'", good[i]);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		len = build(buf, sizeof(buf), VK, S(bad[i]), MK, U(16380), CK,
			    S(""), NULL, n);
		ck_assert_msg(hello_status(buf, len, &h) == SPOP_ERR_BAD_VSN,
			      "'%s'", bad[i]);
	}
}
END_TEST

START_TEST(hello_frame_size)
{
	uint8_t buf[256];
	struct spop_data n = spop_data_null();
	struct spop_hello h;
	enum spop_status st = SPOP_ERR_NONE;
	uint32_t max = 7;
	size_t len;

	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(255), CK, S(""),
		    NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_BAD_FRAME_SIZE);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(0), CK, S(""), NULL,
		    n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_BAD_FRAME_SIZE);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(256), CK, S(""),
		    NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), 0);
	ck_assert_int_eq(spop_hello_negotiate(&h, 16380, &max, &st), 0);
	ck_assert_uint_eq(max, 256);
	/* Ours too small is the same error; *max_out is left alone. */
	max = 7;
	ck_assert_int_eq(spop_hello_negotiate(&h, 255, &max, &st), SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_BAD_FRAME_SIZE);
	ck_assert_uint_eq(max, 7);
	/* A large offer is capped to ours. */
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(UINT32_MAX), CK,
		    S(""), NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), 0);
	ck_assert_int_eq(spop_hello_negotiate(&h, 16380, &max, &st), 0);
	ck_assert_uint_eq(max, 16380);
	/* Other integer types are accepted when the value fits. */
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, spop_data_int64(65535),
		    CK, S(""), NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), 0);
	ck_assert_uint_eq(h.max_frame_size, 65535);
	{
		struct spop_data i32 = spop_data_null(), u64 = spop_data_null();

		i32.type = SPOP_DATA_INT32;
		i32.u.i32 = 4096;
		u64.type = SPOP_DATA_UINT64;
		u64.u.u64 = 8192;
		len = build(buf, sizeof(buf), VK, S("2.0"), MK, i32, CK, S(""),
			    NULL, n);
		ck_assert_int_eq(hello_status(buf, len, &h), 0);
		ck_assert_uint_eq(h.max_frame_size, 4096);
		i32.u.i32 = -1;
		len = build(buf, sizeof(buf), VK, S("2.0"), MK, i32, CK, S(""),
			    NULL, n);
		ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_INVALID);
		len = build(buf, sizeof(buf), VK, S("2.0"), MK, u64, CK, S(""),
			    NULL, n);
		ck_assert_int_eq(hello_status(buf, len, &h), 0);
		ck_assert_uint_eq(h.max_frame_size, 8192);
	}
}
END_TEST

START_TEST(hello_wrong_types)
{
	uint8_t buf[256];
	struct spop_data n = spop_data_null();
	struct spop_data big, bin = spop_data_binary("2.0", 3);
	struct spop_hello h;
	size_t len;

	len = build(buf, sizeof(buf), VK, bin, MK, U(16380), CK, S(""), NULL,
		    n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_INVALID);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, S("16380"), CK, S(""),
		    NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_INVALID);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, spop_data_int64(-1),
		    CK, S(""), NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_INVALID);
	big = spop_data_null();
	big.type = SPOP_DATA_UINT64;
	big.u.u64 = (uint64_t)UINT32_MAX + 1;
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, big, CK, S(""), NULL,
		    n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_INVALID);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), CK, n, NULL,
		    n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_INVALID);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), CK, S(""),
		    "healthcheck", spop_data_int64(1));
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_INVALID);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), CK, S(""),
		    "engine-id", n);
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_INVALID);
	/* A malformed KV-list is invalid even with every key present. */
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), CK, S(""),
		    NULL, n);
	buf[len++] = 0x05;
	ck_assert_int_eq(hello_status(buf, len, &h), SPOP_ERR_INVALID);
}
END_TEST

/* negotiate refuses a hello that parse would have refused. */
START_TEST(negotiate_incomplete)
{
	struct spop_hello h;
	enum spop_status st = SPOP_ERR_NONE;
	uint32_t max = 7;

	memset(&h, 0, sizeof(h));
	h.versions.ptr = (const uint8_t *)"2.0";
	h.versions.len = 3;
	h.max_frame_size = 16380;
	ck_assert_int_eq(spop_hello_negotiate(&h, 16380, &max, &st),
			 SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_NO_VSN);
	h.has_versions = true;
	ck_assert_int_eq(spop_hello_negotiate(&h, 16380, &max, &st),
			 SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_NO_FRAME_SIZE);
	h.has_max_frame_size = true;
	ck_assert_int_eq(spop_hello_negotiate(&h, 16380, &max, &st),
			 SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_NO_CAP);
	ck_assert_uint_eq(max, 7);
	h.has_capabilities = true;
	ck_assert_int_eq(spop_hello_negotiate(&h, 16380, &max, &st), 0);
	ck_assert_uint_eq(max, 16380);
}
END_TEST

START_TEST(hello_capabilities)
{
	uint8_t buf[256];
	struct spop_data n = spop_data_null();
	struct spop_hello h;
	size_t len;

	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), CK,
		    S("pipeliningX,asyncY,fragmentationZ"), NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), 0);
	ck_assert(!h.cap_pipelining && !h.cap_async && !h.cap_fragmentation);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), CK,
		    S(" fragmentation , pipelining,async "), NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), 0);
	ck_assert(h.cap_pipelining && h.cap_async && h.cap_fragmentation);
	len = build(buf, sizeof(buf), VK, S("2.0"), MK, U(16380), CK,
		    S("Xpipelining,pipe lining,,"), NULL, n);
	ck_assert_int_eq(hello_status(buf, len, &h), 0);
	ck_assert(!h.cap_pipelining);
}
END_TEST

START_TEST(list_has)
{
	struct spop_str l;

#define L(s) (l.ptr = (const uint8_t *)(s), l.len = strlen(s), l)
	ck_assert(spop_list_has(L("pipelining"), "pipelining"));
	ck_assert(spop_list_has(L("a,pipelining"), "pipelining"));
	ck_assert(spop_list_has(L("pipelining,"), "pipelining"));
	ck_assert(spop_list_has(L("  pipelining  "), "pipelining"));
	ck_assert(!spop_list_has(L("pipeliningX"), "pipelining"));
	ck_assert(!spop_list_has(L("pipelinin"), "pipelining"));
	ck_assert(!spop_list_has(L(""), "pipelining"));
	ck_assert(spop_list_has(L(","), ""));
	ck_assert(!spop_list_has(L(""), ""));
#undef L
	l.ptr = NULL;
	l.len = 0;
	ck_assert(!spop_list_has(l, "2.0"));
}
END_TEST

/* Every cut of the golden HELLO payload, against the guard page: invalid
 * inside an entry, a missing key at an entry boundary. */
START_TEST(hello_truncated)
{
	size_t len, n;
	const size_t b_vsn = 24 - 1 + 1, b_mfs = b_vsn + 19, b_cap = b_mfs + 31;

	(void)payload(&golden_hello_26, &len);
	for (n = 0; n < len; n++) {
		struct spop_hello h;
		enum spop_status st = SPOP_ERR_NONE;
		const uint8_t *p = guard_place(golden_hello_26.bytes + 11, n);
		int rc = spop_hello_parse(p, n, &h, &st);
		enum spop_status want = SPOP_ERR_INVALID;

		if (n == 0)
			want = SPOP_ERR_NO_VSN;
		else if (n == b_vsn)
			want = SPOP_ERR_NO_FRAME_SIZE;
		else if (n == b_mfs)
			want = SPOP_ERR_NO_CAP;
		if (n == b_cap) {
			ck_assert_int_eq(rc, 0); /* engine-id is optional */
			continue;
		}
		ck_assert_int_eq(rc, SPOP_EPROTO);
		ck_assert_msg(st == want, "cut %zu: %d", n, st);
	}
}
END_TEST

START_TEST(disconnect_golden)
{
	uint8_t buf[128];
	uint32_t code = 0;
	struct spop_str msg;
	enum spop_status st;
	size_t len;
	const uint8_t *p = payload(&golden_disconnect, &len);
	ptrdiff_t n;

	ck_assert_int_eq(spop_disconnect_parse(p, len, &code, &msg, &st), 0);
	ck_assert_uint_eq(code, SPOP_ERR_TIMEOUT);
	ck_assert(spop_str_eq(msg, "a timeout occurred"));

	/* The agent's own is the same bytes but for the type. */
	n = spop_disconnect_encode(buf, sizeof(buf), SPOP_ERR_TIMEOUT, NULL);
	ck_assert_int_eq(n, (ptrdiff_t)golden_disconnect.len);
	ck_assert_uint_eq(buf[4], SPOP_FRAME_AGENT_DISCONNECT);
	buf[4] = SPOP_FRAME_HAPROXY_DISCONNECT;
	ck_assert_mem_eq(buf, golden_disconnect.bytes, golden_disconnect.len);
}
END_TEST

START_TEST(disconnect_roundtrip)
{
	static const enum spop_status all[] = {
		SPOP_ERR_NONE, SPOP_ERR_IO, SPOP_ERR_TIMEOUT, SPOP_ERR_TOO_BIG,
		SPOP_ERR_INVALID, SPOP_ERR_NO_VSN, SPOP_ERR_NO_FRAME_SIZE,
		SPOP_ERR_NO_CAP, SPOP_ERR_BAD_VSN, SPOP_ERR_BAD_FRAME_SIZE,
		SPOP_ERR_FRAG_NOT_SUPPORTED, SPOP_ERR_INTERLACED_FRAMES,
		SPOP_ERR_FRAMEID_NOTFOUND, SPOP_ERR_RES, SPOP_ERR_UNKNOWN,
	};
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		uint8_t buf[128];
		struct spop_frame f;
		struct spop_str msg;
		enum spop_status st;
		uint32_t code = 1000;
		ptrdiff_t n = spop_disconnect_encode(buf, sizeof(buf), all[i],
						     NULL);

		ck_assert_int_gt(n, 0);
		ck_assert_int_eq(spop_frame_decode(buf, (size_t)n, 256, &f,
						   &st), n);
		ck_assert_int_eq(f.type, SPOP_FRAME_AGENT_DISCONNECT);
		ck_assert_uint_eq(f.stream_id, 0);
		ck_assert_uint_eq(f.frame_id, 0);
		ck_assert_int_eq(spop_disconnect_parse(f.payload, f.payload_len,
						       &code, &msg, &st), 0);
		ck_assert_uint_eq(code, all[i]);
		ck_assert(spop_str_eq(msg, spop_status_text(all[i])));
	}
}
END_TEST

START_TEST(disconnect_custom_and_small)
{
	uint8_t buf[64];
	struct spop_frame f;
	struct spop_str msg;
	enum spop_status st;
	uint32_t code;
	ptrdiff_t n, cap;

	n = spop_disconnect_encode(buf, sizeof(buf), SPOP_ERR_BAD_VSN,
				   "want 2.0");
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(spop_frame_decode(buf, (size_t)n, 256, &f, &st), n);
	ck_assert_int_eq(spop_disconnect_parse(f.payload, f.payload_len, &code,
					       &msg, &st), 0);
	ck_assert_uint_eq(code, 8);
	ck_assert(spop_str_eq(msg, "want 2.0"));
	for (cap = 0; cap < n; cap++) {
		uint8_t *b = guard_buf((size_t)cap);

		ck_assert_int_eq(spop_disconnect_encode(b, (size_t)cap,
							SPOP_ERR_BAD_VSN,
							"want 2.0"),
				 SPOP_NEED_MORE);
	}
}
END_TEST

START_TEST(disconnect_parse_edges)
{
	uint8_t buf[128];
	struct spop_data n = spop_data_null();
	struct spop_str msg = { NULL, 99 };
	enum spop_status st = SPOP_ERR_NONE;
	uint32_t code = 1000;
	size_t len;

	/* Empty: defaults. */
	ck_assert_int_eq(spop_disconnect_parse(guard_place("", 0), 0, &code,
					       &msg, &st), 0);
	ck_assert_uint_eq(code, SPOP_ERR_UNKNOWN);
	ck_assert_uint_eq(msg.len, 0);
	ck_assert_ptr_nonnull(msg.ptr);
	/* Wrong types. */
	code = 1000;
	len = build(buf, sizeof(buf), "status-code", S("2"), NULL, n, NULL, n,
		    NULL, n);
	ck_assert_int_eq(spop_disconnect_parse(guard_place(buf, len), len,
					       &code, &msg, &st), SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_INVALID);
	ck_assert_uint_eq(code, 1000);
	len = build(buf, sizeof(buf), "message", U(2), NULL, n, NULL, n, NULL,
		    n);
	ck_assert_int_eq(spop_disconnect_parse(guard_place(buf, len), len,
					       &code, &msg, &st), SPOP_EPROTO);
	/* Prefix keys do not count; "status" is unknown and skipped. */
	len = build(buf, sizeof(buf), "status", U(3), "msg", S("x"), NULL, n,
		    NULL, n);
	ck_assert_int_eq(spop_disconnect_parse(guard_place(buf, len), len,
					       &code, &msg, &st), 0);
	ck_assert_uint_eq(code, SPOP_ERR_UNKNOWN);
	/* Truncated. */
	ck_assert_int_eq(spop_disconnect_parse(guard_place("\x07message\x08",
							   9), 9, &code, &msg,
					       &st), SPOP_EPROTO);
}
END_TEST

static Suite *proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("hello");

	tcase_add_test(tc, hello_26_parse);
	tcase_add_test(tc, hello_26_rebuild);
	tcase_add_test(tc, hello_healthcheck);
	tcase_add_test(tc, agent_hello_golden);
	tcase_add_test(tc, agent_hello_small_buffer);
	tcase_add_test(tc, hello_missing_keys);
	tcase_add_test(tc, hello_exact_keys);
	tcase_add_test(tc, hello_versions);
	tcase_add_test(tc, hello_frame_size);
	tcase_add_test(tc, hello_wrong_types);
	tcase_add_test(tc, negotiate_incomplete);
	tcase_add_test(tc, hello_capabilities);
	tcase_add_test(tc, list_has);
	tcase_add_test(tc, hello_truncated);
	suite_add_tcase(s, tc);

	tc = tcase_create("disconnect");
	tcase_add_test(tc, disconnect_golden);
	tcase_add_test(tc, disconnect_roundtrip);
	tcase_add_test(tc, disconnect_custom_and_small);
	tcase_add_test(tc, disconnect_parse_edges);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(proto_suite());
}
