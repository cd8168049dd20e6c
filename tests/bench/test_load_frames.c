/* test_load_frames.c - proto: bench-spop-load's templated frames are the generic codec's bytes, and its ACK reader reads what spop_action_next reads. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/proto/golden.h"
#include "../unit/run.h"
#include "load_frames.h"
#include "spop.h"

/* Stream ids at the varint boundaries and the id's hex fields' edges. */
static const uint64_t sids[] = {
	0, 1, 239, 240, 2287, 2288, 264431, 264432, 0xffff, 0x10000,
	0xffffffffull, 0x100000000ull, 0x123456789abcdefull, UINT64_MAX,
};

static const uint32_t keys[] = {
	0, 1, 2, 96, 97, 239, 240, 255, 256, 399, 400, 0xffff, 0x10000,
	999999, 1000000, 0x7fffffff, UINT32_MAX,
};

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* The templated route of (sid, k), written into a buffer that ends at a
 * guard page right after the reference's frame (so a byte too many
 * faults), equals the reference byte for byte. */
static void check_route(uint64_t sid, uint32_t k)
{
	uint8_t ref[LFRAME_MAX];
	ptrdiff_t n = lframe_route_ref(ref, sizeof(ref), sid, k);
	ck_assert_int_gt(n, 0);
	uint8_t *out = guard_buf((size_t)n);
	size_t m = lframe_route(out, sid, k);
	ck_assert_msg(m == (size_t)n && memcmp(out, ref, m) == 0,
		      "route sid %llu key %u: %zu bytes, reference %td",
		      (unsigned long long)sid, k, m, n);
}

static void check_feedback(uint64_t sid, const struct lframe_fb *fb)
{
	uint8_t ref[LFRAME_MAX];
	ptrdiff_t n = lframe_feedback_ref(ref, sizeof(ref), sid, fb);
	ck_assert_int_gt(n, 0);
	uint8_t *out = guard_buf((size_t)n);
	size_t m = lframe_feedback(out, sid, fb);
	ck_assert_msg(m == (size_t)n && memcmp(out, ref, m) == 0,
		      "feedback sid %llu key %u: %zu bytes, reference %td",
		      (unsigned long long)sid, fb->key, m, n);
}

static void fb_fill(struct lframe_fb *fb, uint32_t key, size_t sl, size_t kl,
		    size_t al)
{
	memset(fb, 0, sizeof(*fb));
	fb->key = key;
	for (size_t i = 0; i < sl; i++)
		fb->server[i] = (char)('a' + (i + key) % 26);
	for (size_t i = 0; i < kl; i++)
		fb->keyname[i] = (char)('0' + (i + key) % 10);
	for (size_t i = 0; i < al; i++)
		fb->akey[i] = (char)('A' + (i * 7 + key) % 26);
	fb->server_len = (uint8_t)sl;
	fb->keyname_len = (uint8_t)kl;
	fb->akey_len = (uint8_t)al;
}

START_TEST(route_edges)
{
	for (size_t i = 0; i < sizeof(sids) / sizeof(sids[0]); i++)
		for (size_t j = 0; j < sizeof(keys) / sizeof(keys[0]); j++)
			check_route(sids[i], keys[j]);
}
END_TEST

/* Enough keys that every prefix and caller hash length occurs (a 9-byte
 * varint for one in 16 hashes, shorter ones rarer). */
START_TEST(route_many)
{
	for (uint32_t k = 0; k < 20000; k++)
		check_route((uint64_t)k * 7919u, k);
	for (unsigned i = 0; i < 20000; i++)
		check_route(next(), (uint32_t)next());
}
END_TEST

START_TEST(feedback_edges)
{
	struct lframe_fb fb;
	for (size_t i = 0; i < sizeof(sids) / sizeof(sids[0]); i++)
		for (size_t j = 0; j < sizeof(keys) / sizeof(keys[0]); j++) {
			fb_fill(&fb, keys[j], 6, 2, 16);
			check_feedback(sids[i], &fb);
		}
	/* Every length a name can have, the longest server included. */
	for (size_t l = 0; l < LFRAME_NAME; l++) {
		fb_fill(&fb, (uint32_t)l, 2 * l + 1, l, LFRAME_NAME - 1 - l);
		check_feedback(l * 1000003u, &fb);
	}
	fb_fill(&fb, 7, sizeof(fb.server) - 1, LFRAME_NAME - 1, LFRAME_NAME - 1);
	check_feedback(UINT64_MAX, &fb);
}
END_TEST

START_TEST(feedback_many)
{
	struct lframe_fb fb;
	for (unsigned i = 0; i < 20000; i++) {
		fb_fill(&fb, (uint32_t)next(), next() % 20, next() % 20,
			next() % 20);
		check_feedback(next() >> (next() % 64), &fb);
	}
}
END_TEST

/* ---- ACKs ---- */

static void fb_expect_same(const struct lframe_fb *a, const struct lframe_fb *b)
{
	ck_assert_uint_eq(a->server_len, b->server_len);
	ck_assert_uint_eq(a->keyname_len, b->keyname_len);
	ck_assert_uint_eq(a->akey_len, b->akey_len);
	ck_assert(memcmp(a->server, b->server, a->server_len) == 0);
	ck_assert(memcmp(a->keyname, b->keyname, a->keyname_len) == 0);
	ck_assert(memcmp(a->akey, b->akey, a->akey_len) == 0);
}

/* Both readers on p[0..len), the fast one on a copy against a guard page;
 * returns what they agree on. */
static int ack_both(const uint8_t *p, size_t len, struct lframe_fb *out)
{
	struct lframe_fb a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	int rr = lframe_ack_ref(p, len, &a);
	int rf = lframe_ack(guard_place(p, len), len, &b);
	ck_assert_int_eq(rf, rr);
	if (rr == 0)
		fb_expect_same(&a, &b);
	if (out != NULL)
		*out = b;
	return rr;
}

#define SET(w, n, v) \
	spop_ack_set_var_str((w), SPOP_SCOPE_TXN, "" n, sizeof(n) - 1, \
			     "" v, sizeof(v) - 1)

/* The payload of an ACK built by fn in buf; its length. */
static size_t ack_payload(uint8_t *buf, size_t cap,
			  void (*fn)(struct spop_writer *), const uint8_t **p)
{
	struct spop_writer w;
	struct spop_frame f;
	enum spop_status st;
	spop_ack_begin(&w, buf, cap, 5, 1);
	fn(&w);
	ptrdiff_t n = spop_ack_finish(&w);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(spop_frame_decode(buf, (size_t)n, 16380, &f, &st), n);
	*p = f.payload;
	return f.payload_len;
}

static void ack_warmlane(struct spop_writer *w)
{
	SET(w, "backend", "llm");
	SET(w, "server", "s17");
	SET(w, "key", "k1");
	SET(w, "akey", "0123456789abcdef");
	SET(w, "reason", "affinity");
}

static void ack_floor(struct spop_writer *w)
{
	SET(w, "backend", "llm");
	SET(w, "server", "s1");
	SET(w, "key", "k1");
	SET(w, "reason", "affinity");
}

/* warmlane's with a noretry BOOL and an unset-var: the generic reader. */
static void ack_other_shapes(struct spop_writer *w)
{
	struct spop_data t = spop_data_bool(true);
	SET(w, "backend", "llm");
	spop_ack_set_var(w, SPOP_SCOPE_TXN, "noretry", 7, &t);
	spop_ack_unset_var(w, SPOP_SCOPE_TXN, "shadow_server", 13);
	SET(w, "server", "s2");
	SET(w, "akey", "ak");
}

static void ack_no_server(struct spop_writer *w)
{
	SET(w, "backend", "llm");
	SET(w, "reason", "fail_open");
}

static void ack_int_backend(struct spop_writer *w)
{
	struct spop_data d = spop_data_int64(3);
	SET(w, "server", "s1");
	spop_ack_set_var(w, SPOP_SCOPE_TXN, "backend", 7, &d);
}

static void ack_long_akey(struct spop_writer *w)
{
	SET(w, "backend", "llm");
	SET(w, "akey", "0123456789012345678901234567890123456789"
		       "012345678901234567890123");
}

static void ack_prefix_name(struct spop_writer *w)
{
	/* "back" and "serverX" are not backend and server. */
	SET(w, "back", "x");
	SET(w, "serverX", "y");
	SET(w, "key", "k9");
}

static void (*const ack_kinds[])(struct spop_writer *) = {
	ack_warmlane, ack_floor, ack_other_shapes, ack_no_server,
	ack_int_backend, ack_long_akey, ack_prefix_name,
};

START_TEST(ack_shapes)
{
	uint8_t buf[512];
	const uint8_t *p;
	size_t len = ack_payload(buf, sizeof(buf), ack_kinds[_i], &p);
	struct lframe_fb fb;
	int r = ack_both(p, len, &fb);
	switch (_i) {
	case 0:
		ck_assert_int_eq(r, 0);
		ck_assert(fb.server_len == 7 && memcmp(fb.server, "llm/s17", 7) == 0);
		ck_assert(fb.keyname_len == 2 && memcmp(fb.keyname, "k1", 2) == 0);
		ck_assert(fb.akey_len == 16);
		break;
	case 1:
		ck_assert_int_eq(r, 0);
		ck_assert(fb.server_len == 6 && memcmp(fb.server, "llm/s1", 6) == 0);
		ck_assert_uint_eq(fb.akey_len, 0);
		break;
	case 2:
		ck_assert_int_eq(r, 0);
		ck_assert(fb.server_len == 6 && memcmp(fb.server, "llm/s2", 6) == 0);
		ck_assert(fb.akey_len == 2 && memcmp(fb.akey, "ak", 2) == 0);
		break;
	case 3:
		ck_assert_int_eq(r, 0);
		ck_assert(fb.server_len == 6 && memcmp(fb.server, "llm/s1", 6) == 0);
		break;
	case 4:
	case 5:
		ck_assert_int_eq(r, -1);
		break;
	case 6:
		ck_assert_int_eq(r, 0);
		ck_assert(fb.server_len == 6 && memcmp(fb.server, "llm/s1", 6) == 0);
		ck_assert(fb.keyname_len == 2 && memcmp(fb.keyname, "k9", 2) == 0);
		break;
	}
	/* Every prefix: a payload cut inside an action is malformed for
	 * both, one cut between actions is a shorter ACK for both. */
	for (size_t l = 0; l < len; l++)
		ack_both(p, l, NULL);
}
END_TEST

/* Random bytes and warmlane's ACK with one byte changed: the readers
 * agree on every one (most are malformed, some are not). */
START_TEST(ack_mutations)
{
	uint8_t buf[512], m[512];
	const uint8_t *p;
	size_t len = ack_payload(buf, sizeof(buf), ack_warmlane, &p);
	for (size_t i = 0; i < len; i++)
		for (unsigned b = 0; b < 256; b++) {
			memcpy(m, p, len);
			m[i] = (uint8_t)b;
			ack_both(m, len, NULL);
		}
	for (unsigned i = 0; i < 20000; i++) {
		size_t l = next() % 64;
		for (size_t j = 0; j < l; j++) {
			uint64_t r = next();
			/* Mostly the bytes an ACK is made of. */
			static const uint8_t usual[] = { 1, 3, 2, 8, 4 };
			m[j] = r % 4 == 0 ? (uint8_t)(r >> 8) : usual[r % 5];
		}
		ack_both(m, l, NULL);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("load-frames");
	tcase_add_test(tc, route_edges);
	tcase_add_test(tc, route_many);
	tcase_add_test(tc, feedback_edges);
	tcase_add_test(tc, feedback_many);
	tcase_add_loop_test(tc, ack_shapes, 0,
			    (int)(sizeof(ack_kinds) / sizeof(ack_kinds[0])));
	tcase_add_test(tc, ack_mutations);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
