/* load_frames.c - bench-spop-load's frames: route and feedback NOTIFYs laid from constant pieces, route ACKs matched by their bytes, and the generic builders and reader they must agree with. */
#include "load_frames.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The key's derived values (a session id, prefix hashes, the caller). */
static uint64_t key_hash(uint32_t k, uint64_t salt)
{
	uint64_t x = (k + 1) * 0x9e3779b97f4a7c15ull ^ salt;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	return x ^ (x >> 29);
}

/* ---- the reference builders (the generic codec) ------------------------- */

static void put_str_kv(struct spop_writer *w, const char *k, const char *v,
		       size_t len)
{
	struct spop_data d = spop_data_string(v, len);
	spop_put_kv(w, k, &d);
}

static void put_null_kv(struct spop_writer *w, const char *k)
{
	struct spop_data d = spop_data_null();
	spop_put_kv(w, k, &d);
}

/* Request k's body bytes (the size argument, req.body_size): what its
 * prefix windows cover, 4 KiB and more for half of them. */
static inline uint64_t lframe_body(uint32_t k)
{
	return (k & 1 ? 4096u : 1024u) + (k % 97) * 16u;
}

ptrdiff_t lframe_route_ref(uint8_t *out, size_t cap, uint64_t sid,
			   uint32_t k)
{
	char session[48], id[64];
	int sl = snprintf(session, sizeof(session),
			  "%08" PRIx32 "-4b1e-9c1a-%012" PRIx64, k,
			  (uint64_t)(key_hash(k, 1) & 0xffffffffffffull));
	int il = snprintf(id, sizeof(id),
			  "7F000001:%04X_7F000001:1F90_%08" PRIX64 "_%04" PRIX64
			  ":1F2B", (unsigned)(k & 0xffff), sid & 0xffffffffu,
			  sid & 0xffff);
	static const uint8_t hdr[] = { 5, 'r', 'o', 'u', 't', 'e', 15 };
	struct spop_writer w;
	struct spop_data d;

	spop_writer_init(&w, out, cap);
	spop_frame_start(&w, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, sid, 1);
	spop_put_bytes(&w, hdr, sizeof(hdr));
	put_str_kv(&w, "session", session, (size_t)sl);
	/* A 1 KiB body window for every request, 4 KiB for half of them. */
	d = spop_data_int64((int64_t)key_hash(k, 2));
	spop_put_kv(&w, "prefix1", &d);
	if (k & 1) {
		d = spop_data_int64((int64_t)key_hash(k, 3));
		spop_put_kv(&w, "prefix2", &d);
	} else {
		put_null_kv(&w, "prefix2");
	}
	put_null_kv(&w, "prefix3");
	put_str_kv(&w, "install", "inst-0042", 9);
	d = spop_data_int64((int64_t)key_hash(k % 97, 4));
	spop_put_kv(&w, "caller", &d);
	d = (struct spop_data){ .type = SPOP_DATA_IPV4,
				.u.ipv4 = { 10, 0, (uint8_t)(k >> 8),
					    (uint8_t)k } };
	spop_put_kv(&w, "src", &d);
	put_str_kv(&w, "model", "m1", 2);
	d = spop_data_bool(true);
	spop_put_kv(&w, "stream", &d);
	put_str_kv(&w, "id", id, (size_t)il);
	put_null_kv(&w, "hint_srv");
	put_null_kv(&w, "hint_at");
	put_null_kv(&w, "hint_akey");
	put_null_kv(&w, "hint_name");
	d = spop_data_int64((int64_t)lframe_body(k));
	spop_put_kv(&w, "size", &d);
	return spop_frame_finish(&w);
}

ptrdiff_t lframe_feedback_ref(uint8_t *out, size_t cap, uint64_t sid,
			      const struct lframe_fb *fb)
{
	char id[64];
	int il = snprintf(id, sizeof(id),
			  "7F000001:%04X_7F000001:1F90_%08" PRIX64 "_%04" PRIX64
			  ":1F2B", (unsigned)(fb->key & 0xffff),
			  sid & 0xffffffffu, sid & 0xffff);
	static const uint8_t hdr[] = { 8, 'f', 'e', 'e', 'd', 'b', 'a', 'c',
				       'k', 10 };
	struct spop_writer w;
	struct spop_data d;

	spop_writer_init(&w, out, cap);
	spop_frame_start(&w, SPOP_FRAME_NOTIFY, SPOP_FLAG_FIN, sid, 1);
	spop_put_bytes(&w, hdr, sizeof(hdr));
	put_str_kv(&w, "server", fb->server, fb->server_len);
	d = spop_data_int64(200);
	spop_put_kv(&w, "status", &d);
	d = spop_data_int64(180 + (int64_t)(fb->key % 400));
	spop_put_kv(&w, "tr", &d);
	put_null_kv(&w, "retry_after");
	put_str_kv(&w, "key", fb->keyname, fb->keyname_len);
	put_str_kv(&w, "akey", fb->akey, fb->akey_len);
	d = spop_data_bool(true);
	spop_put_kv(&w, "stream", &d);
	put_null_kv(&w, "shadow");
	put_null_kv(&w, "shadow_reason");
	put_str_kv(&w, "id", id, (size_t)il);
	return spop_frame_finish(&w);
}

/* ---- the templated builders --------------------------------------------- */

/* Appends a literal's bytes (its length from sizeof). Hex escapes are
 * split from the letters after them ("\x06" "caller"): an escape goes on
 * for as many hex digits as follow it. */
#define LIT(p, s) (memcpy((p), "" s, sizeof(s) - 1), (p) + sizeof(s) - 1)

/* spop_varint_encode without the size pass and the room check: out has
 * SPOP_VARINT_MAX_LEN bytes. */
static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	if (v < 240) {
		*p++ = (uint8_t)v;
		return p;
	}
	*p++ = (uint8_t)(v | 0xF0);
	v = (v - 240) >> 4;
	while (v >= 128) {
		*p++ = (uint8_t)(v | 0x80);
		v = (v - 128) >> 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* A STRING value: type, varint length, bytes. */
static inline uint8_t *put_string(uint8_t *p, const char *s, size_t len)
{
	*p++ = SPOP_DATA_STRING;
	p = put_varint(p, len);
	memcpy(p, s, len);
	return p + len;
}

/* The two hex digits of every byte, lower and upper case, filled on the
 * first frame: a lookup per two digits instead of one per digit. */
static uint8_t hex_pair[2][256][2];
static int hex_ready;

static void hex_init(void)
{
	static const char digits[2][17] = { "0123456789abcdef",
					    "0123456789ABCDEF" };
	for (unsigned c = 0; c < 2; c++)
		for (unsigned b = 0; b < 256; b++) {
			hex_pair[c][b][0] = (uint8_t)digits[c][b >> 4];
			hex_pair[c][b][1] = (uint8_t)digits[c][b & 15];
		}
	hex_ready = 1;
}

/* 2n hex digits of v, the most significant first (%0*x, upper: %0*X). */
static inline void put_hex(uint8_t *p, uint64_t v, unsigned n, unsigned upper)
{
	while (n-- > 0) {
		memcpy(p + 2 * n, hex_pair[upper][v & 0xff], 2);
		v >>= 8;
	}
}

/* The header up to the payload: length (patched by frame_end), NOTIFY,
 * FIN, the stream id, frame id 1. */
static inline uint8_t *frame_begin(uint8_t *out, uint64_t sid)
{
	uint8_t *p = LIT(out + 4, "\x03\x00\x00\x00\x01");
	p = put_varint(p, sid);
	*p++ = 1;
	return p;
}

static inline size_t frame_end(uint8_t *out, const uint8_t *end)
{
	size_t n = (size_t)(end - out);
	uint32_t l = (uint32_t)(n - 4);
	out[0] = (uint8_t)(l >> 24);
	out[1] = (uint8_t)(l >> 16);
	out[2] = (uint8_t)(l >> 8);
	out[3] = (uint8_t)l;
	return n;
}

/* The id argument: 02 "id", a STRING of 46 bytes, the unique-id of
 * warmlane.spoe.conf's format with the key's port and the stream's
 * counters. */
static inline uint8_t *put_id(uint8_t *p, uint32_t k, uint64_t sid)
{
	p = LIT(p, "\x02" "id" "\x08\x2e" "7F000001:XXXX_7F000001:1F90_"
		   "XXXXXXXX_XXXX:1F2B");
	put_hex(p - 46 + 9, k & 0xffff, 2, 1);
	put_hex(p - 46 + 28, sid & 0xffffffffu, 4, 1);
	put_hex(p - 46 + 37, sid & 0xffff, 2, 1);
	return p;
}

size_t lframe_route(uint8_t *out, uint64_t sid, uint32_t k)
{
	if (!hex_ready)
		hex_init();
	uint8_t *p = frame_begin(out, sid);

	p = LIT(p, "\x05" "route" "\x0f"
		   "\x07" "session" "\x08\x1f"
		   "XXXXXXXX-4b1e-9c1a-XXXXXXXXXXXX");
	put_hex(p - 31, k, 4, 0);
	put_hex(p - 12, key_hash(k, 1) & 0xffffffffffffull, 6, 0);
	p = LIT(p, "\x07" "prefix1" "\x04");
	p = put_varint(p, key_hash(k, 2));
	if (k & 1) {
		p = LIT(p, "\x07" "prefix2" "\x04");
		p = put_varint(p, key_hash(k, 3));
	} else {
		p = LIT(p, "\x07" "prefix2" "\x00");
	}
	p = LIT(p, "\x07" "prefix3" "\x00"
		   "\x07" "install" "\x08\x09" "inst-0042"
		   "\x06" "caller" "\x04");
	p = put_varint(p, key_hash(k % 97, 4));
	p = LIT(p, "\x03" "src" "\x06\x0a\x00");
	*p++ = (uint8_t)(k >> 8);
	*p++ = (uint8_t)k;
	p = LIT(p, "\x05" "model" "\x08\x02" "m1"
		   "\x06" "stream" "\x11");
	p = put_id(p, k, sid);
	p = LIT(p, "\x08" "hint_srv" "\x00"
		   "\x07" "hint_at" "\x00"
		   "\x09" "hint_akey" "\x00"
		   "\x09" "hint_name" "\x00"
		   "\x04" "size" "\x04");
	p = put_varint(p, lframe_body(k));
	return frame_end(out, p);
}

size_t lframe_feedback(uint8_t *out, uint64_t sid, const struct lframe_fb *fb)
{
	if (!hex_ready)
		hex_init();
	uint8_t *p = frame_begin(out, sid);

	p = LIT(p, "\x08" "feedback" "\x0a" "\x06" "server");
	p = put_string(p, fb->server, fb->server_len);
	p = LIT(p, "\x06" "status" "\x04\xc8" "\x02" "tr" "\x04");
	p = put_varint(p, 180 + (uint64_t)(fb->key % 400));
	p = LIT(p, "\x0b" "retry_after" "\x00" "\x03" "key");
	p = put_string(p, fb->keyname, fb->keyname_len);
	p = LIT(p, "\x04" "akey");
	p = put_string(p, fb->akey, fb->akey_len);
	p = LIT(p, "\x06" "stream" "\x11"
		   "\x06" "shadow" "\x00"
		   "\x0d" "shadow_reason" "\x00");
	p = put_id(p, fb->key, sid);
	return frame_end(out, p);
}

/* ---- route ACKs --------------------------------------------------------- */

struct ack_vars {
	char be[LFRAME_NAME], sv[LFRAME_NAME];
	uint8_t bl, sl;
};

static int copy_var(char *dst, uint8_t *len, const struct spop_data *v)
{
	if (v->type != SPOP_DATA_STRING || v->u.str.len >= LFRAME_NAME)
		return -1;
	memcpy(dst, v->u.str.ptr, v->u.str.len);
	*len = (uint8_t)v->u.str.len;
	return 0;
}

/* One set-var, whichever reader found it: the four names kept, the rest
 * ignored. The one place both readers decide what a variable means. */
static int ack_var(struct ack_vars *a, struct lframe_fb *fb,
		   struct spop_str name, const struct spop_data *v)
{
	/* The length picks the one name to compare. */
	switch (name.len) {
	case 7:
		if (SPOP_STR_EQ_LIT(name, "backend"))
			return copy_var(a->be, &a->bl, v);
		break;
	case 6:
		if (SPOP_STR_EQ_LIT(name, "server"))
			return copy_var(a->sv, &a->sl, v);
		break;
	case 3:
		if (SPOP_STR_EQ_LIT(name, "key"))
			return copy_var(fb->keyname, &fb->keyname_len, v);
		break;
	case 4:
		if (SPOP_STR_EQ_LIT(name, "akey"))
			return copy_var(fb->akey, &fb->akey_len, v);
		break;
	}
	return 0;
}

/* %b/%s as the frontend logs it; HAProxy's own pick when the agent chose
 * none. */
static void ack_server(struct ack_vars *a, struct lframe_fb *fb)
{
	if (a->bl == 0 || a->sl == 0) {
		memcpy(a->be, "llm", 3), a->bl = 3;
		memcpy(a->sv, "s1", 2), a->sl = 2;
	}
	memcpy(fb->server, a->be, a->bl);
	fb->server[a->bl] = '/';
	memcpy(fb->server + a->bl + 1, a->sv, a->sl);
	fb->server_len = (uint8_t)(a->bl + 1 + a->sl);
}

int lframe_ack_ref(const uint8_t *p, size_t len, struct lframe_fb *fb)
{
	struct ack_vars a; /* its names are read up to bl and sl only */
	struct spop_reader r;

	a.bl = a.sl = 0;
	fb->akey_len = fb->keyname_len = 0;
	spop_reader_init(&r, p, len);
	for (;;) {
		enum spop_action act;
		enum spop_scope sc;
		struct spop_str name;
		struct spop_data v;
		enum spop_status s;
		int k = spop_action_next(&r, &act, &sc, &name, &v, &s);
		if (k == 0)
			break;
		if (k < 0)
			return -1;
		if (act == SPOP_ACT_SET_VAR && ack_var(&a, fb, name, &v) < 0)
			return -1;
	}
	ack_server(&a, fb);
	return 0;
}

int lframe_ack(const uint8_t *p, size_t len, struct lframe_fb *fb)
{
	struct ack_vars a; /* its names are read up to bl and sl only */
	const uint8_t *end = p + len, *q = p;

	a.bl = a.sl = 0;
	fb->akey_len = fb->keyname_len = 0;
	/* 01 03 scope, a name of one length byte, 08 and a value of one
	 * length byte: what spop_action_next reads as a set-var of a
	 * STRING, byte for byte. */
	while (q != end) {
		size_t room = (size_t)(end - q), nl, vl;
		if (room < 6 || q[0] != SPOP_ACT_SET_VAR || q[1] != 3 ||
		    q[2] > SPOP_SCOPE_RES || q[3] >= 240)
			return lframe_ack_ref(p, len, fb);
		nl = q[3];
		if (nl + 6 > room || q[4 + nl] != SPOP_DATA_STRING ||
		    q[5 + nl] >= 240)
			return lframe_ack_ref(p, len, fb);
		vl = q[5 + nl];
		if (vl > room - 6 - nl)
			return lframe_ack_ref(p, len, fb);
		struct spop_str name = { q + 4, nl };
		struct spop_data v = { .type = SPOP_DATA_STRING,
				       .u.str = { q + 6 + nl, vl } };
		if (ack_var(&a, fb, name, &v) < 0)
			return -1;
		q += 6 + nl + vl;
	}
	ack_server(&a, fb);
	return 0;
}
