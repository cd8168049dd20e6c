/* fuzz_common.c - payload walkers and invariant checks for the harnesses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

void fuzz_fail(const char *what, const char *file, int line)
{
	fprintf(stderr, "%s:%d: invariant failed: %s\n", file, line, what);
	abort();
}

static void check_view(struct spop_str s, const uint8_t *p, size_t len)
{
	if (s.len == 0)
		return;
	FUZZ_CHECK(s.ptr >= p && s.len <= len &&
		   (size_t)(s.ptr - p) <= len - s.len);
}

static void check_error(int rc, enum spop_status st)
{
	FUZZ_CHECK(rc == SPOP_EPROTO);
	FUZZ_CHECK(st == SPOP_ERR_INVALID);
}

/* The value v was decoded from in[0..len): encoding it again gives the same
 * bytes, but for flag bits of the type byte that decoding ignores. */
static void check_reencode(const struct spop_data *v, const uint8_t *in,
			   size_t len)
{
	uint8_t out[32];
	uint8_t mask = v->type == SPOP_DATA_BOOL ? 0x1f : 0x0f;
	ptrdiff_t n;
	size_t head;

	if (v->type == SPOP_DATA_STRING || v->type == SPOP_DATA_BINARY) {
		/* Check the length prefix only; the bytes are a view. */
		FUZZ_CHECK(len > v->u.str.len);
		head = len - v->u.str.len;
		FUZZ_CHECK(v->u.str.ptr == in + head);
		FUZZ_CHECK(head == 1 + (size_t)spop_varint_size(v->u.str.len));
		n = spop_varint_encode(v->u.str.len, out, sizeof(out));
		FUZZ_CHECK(n > 0 && memcmp(out, in + 1, (size_t)n) == 0);
		FUZZ_CHECK((in[0] & 0x0f) == v->type);
		return;
	}
	n = spop_data_encode(v, out, sizeof(out));
	FUZZ_CHECK(n > 0 && (size_t)n == len);
	FUZZ_CHECK(out[0] == (in[0] & mask));
	FUZZ_CHECK(memcmp(out + 1, in + 1, len - 1) == 0);
	FUZZ_CHECK(spop_data_encode(v, out, (size_t)n - 1) == SPOP_NEED_MORE);
}

/* spop_data_equal, and a string or binary the same view of the input. */
static bool same_value(const struct spop_data *a, const struct spop_data *b)
{
	return spop_data_equal(a, b) &&
	       ((a->type != SPOP_DATA_STRING && a->type != SPOP_DATA_BINARY) ||
		a->u.str.ptr == b->u.str.ptr);
}

/* The inline readers (spop_arg_read, spop_data_read) give what the
 * functions they stand for give, on the bytes at r: the same result,
 * status, position, views and value; nothing written on failure. */
static void check_inline_readers(const struct spop_reader *r)
{
	struct spop_reader r1 = *r, r2 = *r;
	struct spop_str n1 = { NULL, 1 }, n2 = { NULL, 1 };
	struct spop_data v1, v2;
	enum spop_status s1 = SPOP_ERR_NONE, s2 = SPOP_ERR_NONE;
	memset(&v1, 0x5a, sizeof(v1));
	memset(&v2, 0x5a, sizeof(v2));
	int a = spop_arg_next(&r1, &n1, &v1, &s1);
	int b = spop_arg_read(&r2, &n2, &v2, &s2);
	FUZZ_CHECK(a == b && r1.p == r2.p && s1 == s2);
	FUZZ_CHECK(n1.ptr == n2.ptr && n1.len == n2.len);
	FUZZ_CHECK(a == 1 ? same_value(&v1, &v2)
			  : memcmp(&v1, &v2, sizeof(v1)) == 0);
	/* The same bytes as a value. */
	size_t len = (size_t)(r->end - r->p);
	memset(&v1, 0x5a, sizeof(v1));
	memset(&v2, 0x5a, sizeof(v2));
	ptrdiff_t x = spop_data_decode(r->p, len, &v1);
	ptrdiff_t y = spop_data_read(r->p, len, &v2);
	FUZZ_CHECK(x == y);
	FUZZ_CHECK(x > 0 ? same_value(&v1, &v2)
			 : memcmp(&v1, &v2, sizeof(v1)) == 0);
}

int fuzz_notify(const uint8_t *p, size_t len)
{
	struct spop_reader r;
	struct spop_str name, an;
	struct spop_data v;
	enum spop_status st = SPOP_ERR_NONE;
	unsigned nargs, i;
	int rc;

	spop_reader_init(&r, p, len);
	while ((rc = spop_msg_next(&r, &name, &nargs, &st)) == 1) {
		struct spop_reader save;

		check_view(name, p, len);
		FUZZ_CHECK(nargs <= 255);
		save = r;
		for (i = 0; i < nargs; i++) {
			const uint8_t *before = r.p;

			check_inline_readers(&r);
			rc = spop_arg_next(&r, &an, &v, &st);
			if (rc != 1) {
				check_error(rc, st);
				FUZZ_CHECK(r.p == before);
				/* Skipping fails the same way. */
				FUZZ_CHECK(spop_msg_skip_args(&save, nargs,
							      &st) ==
					   SPOP_EPROTO);
				return rc;
			}
			check_view(an, p, len);
			FUZZ_CHECK(r.p > before && r.p <= r.end);
			check_reencode(&v, an.ptr + an.len,
				       (size_t)(r.p - (an.ptr + an.len)));
		}
		FUZZ_CHECK(spop_msg_skip_args(&save, nargs, &st) == 0);
		FUZZ_CHECK(save.p == r.p);
	}
	if (rc != 0)
		check_error(rc, st);
	else
		FUZZ_CHECK(r.p == r.end);
	return rc;
}

int fuzz_kv(const uint8_t *p, size_t len)
{
	struct spop_reader r;
	struct spop_str key;
	struct spop_data v;
	enum spop_status st = SPOP_ERR_NONE;
	int rc;

	spop_reader_init(&r, p, len);
	while ((rc = spop_kv_next(&r, &key, &v, &st)) == 1) {
		check_view(key, p, len);
		check_reencode(&v, key.ptr + key.len,
			       (size_t)(r.p - (key.ptr + key.len)));
	}
	if (rc != 0)
		check_error(rc, st);
	return rc;
}

int fuzz_actions(const uint8_t *p, size_t len)
{
	struct spop_reader r;
	struct spop_str name;
	struct spop_data v;
	enum spop_action act;
	enum spop_scope scope;
	enum spop_status st = SPOP_ERR_NONE;
	int rc;

	spop_reader_init(&r, p, len);
	while ((rc = spop_action_next(&r, &act, &scope, &name, &v, &st)) == 1) {
		check_view(name, p, len);
		FUZZ_CHECK(act == SPOP_ACT_SET_VAR || act == SPOP_ACT_UNSET_VAR);
		FUZZ_CHECK(scope <= SPOP_SCOPE_RES);
	}
	if (rc != 0)
		check_error(rc, st);
	return rc;
}

int fuzz_hello(const uint8_t *p, size_t len)
{
	static const uint32_t ours[] = { 0, 255, 256, 1024,
					 SPOP_DEFAULT_FRAME_SIZE, UINT32_MAX };
	struct spop_hello h;
	enum spop_status st = SPOP_ERR_NONE;
	size_t i;
	int rc = spop_hello_parse(p, len, &h, &st);

	if (rc != 0) {
		FUZZ_CHECK(rc == SPOP_EPROTO);
		FUZZ_CHECK(st == SPOP_ERR_INVALID || st == SPOP_ERR_NO_VSN ||
			   st == SPOP_ERR_NO_FRAME_SIZE ||
			   st == SPOP_ERR_NO_CAP);
		/* A malformed KV-list is 4 whatever the keys. */
		if (fuzz_kv(p, len) != 0)
			FUZZ_CHECK(st == SPOP_ERR_INVALID);
		return rc;
	}
	FUZZ_CHECK(fuzz_kv(p, len) == 0);
	FUZZ_CHECK(h.has_versions && h.has_max_frame_size &&
		   h.has_capabilities);
	check_view(h.versions, p, len);
	check_view(h.capabilities, p, len);
	check_view(h.engine_id, p, len);
	FUZZ_CHECK(h.engine_id.ptr != NULL);
	FUZZ_CHECK(h.cap_pipelining ==
		   spop_list_has(h.capabilities, "pipelining"));
	FUZZ_CHECK(h.cap_async == spop_list_has(h.capabilities, "async"));
	for (i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
		uint32_t max = 0;
		enum spop_status nst = SPOP_ERR_NONE;
		int nrc = spop_hello_negotiate(&h, ours[i], &max, &nst);
		uint8_t out[128];
		ptrdiff_t n;
		struct spop_frame f;

		if (nrc != 0) {
			FUZZ_CHECK(nrc == SPOP_EPROTO);
			FUZZ_CHECK(nst == SPOP_ERR_BAD_VSN ||
				   nst == SPOP_ERR_BAD_FRAME_SIZE);
			FUZZ_CHECK(max == 0);
			continue;
		}
		FUZZ_CHECK(max >= SPOP_MIN_FRAME_SIZE);
		FUZZ_CHECK(max <= ours[i] && max <= h.max_frame_size);
		FUZZ_CHECK(max == ours[i] || max == h.max_frame_size);
		FUZZ_CHECK(spop_list_has(h.versions, SPOP_VERSION));
		/* The answer is a valid frame within the negotiated size. */
		n = spop_agent_hello_encode(out, sizeof(out), max,
					    h.cap_pipelining);
		FUZZ_CHECK(n > 0);
		FUZZ_CHECK(spop_frame_decode(out, (size_t)n, max, &f, &nst) ==
			   n);
		FUZZ_CHECK(f.type == SPOP_FRAME_AGENT_HELLO);
		FUZZ_CHECK(fuzz_kv(f.payload, f.payload_len) == 0);
	}
	return rc;
}

int fuzz_disconnect(const uint8_t *p, size_t len)
{
	uint32_t code = 12345;
	struct spop_str msg;
	enum spop_status st = SPOP_ERR_NONE;
	int rc = spop_disconnect_parse(p, len, &code, &msg, &st);

	if (rc != 0) {
		check_error(rc, st);
		FUZZ_CHECK(code == 12345);
		return rc;
	}
	check_view(msg, p, len);
	FUZZ_CHECK(msg.ptr != NULL);
	return rc;
}
