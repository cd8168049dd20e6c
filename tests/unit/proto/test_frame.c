/* test_frame.c - proto: frames, the writer, NOTIFY and ACK payloads. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "../run.h"
#include "spop.h"

#define MAX SPOP_DEFAULT_FRAME_SIZE

static ptrdiff_t decode(const void *p, size_t len, uint32_t max,
			struct spop_frame *f, enum spop_status *st)
{
	return spop_frame_decode(guard_place(p, len), len, max, f, st);
}

START_TEST(golden_decode)
{
	const struct golden *g = golden_frames[_i];
	struct spop_frame f;
	enum spop_status st = SPOP_ERR_NONE;
	const uint8_t *p = guard_place(g->bytes, g->len);
	ptrdiff_t r = spop_frame_decode(p, g->len, MAX, &f, &st);

	ck_assert_msg(r == (ptrdiff_t)g->len, "%s: %td", g->name, r);
	ck_assert_uint_eq(f.flags, SPOP_FLAG_FIN);
	ck_assert_ptr_eq(f.payload + f.payload_len, p + g->len);
	ck_assert_int_eq(st, SPOP_ERR_NONE);
}
END_TEST

START_TEST(golden_headers)
{
	struct spop_frame f;
	enum spop_status st;

	ck_assert_int_eq(decode(golden_hello_26.bytes, golden_hello_26.len, MAX,
				&f, &st), 133);
	ck_assert_int_eq(f.type, SPOP_FRAME_HAPROXY_HELLO);
	ck_assert_uint_eq(f.stream_id, 0);
	ck_assert_uint_eq(f.frame_id, 0);
	ck_assert_uint_eq(f.payload_len, 129 - 7);

	ck_assert_int_eq(decode(golden_ack.bytes, golden_ack.len, MAX, &f,
				&st), 4 + 0x15);
	ck_assert_int_eq(f.type, SPOP_FRAME_ACK);
	ck_assert_uint_eq(f.stream_id, 243 + (0xbc << 4) + (0x78 << 11));
	ck_assert_uint_eq(f.frame_id, 1);
	ck_assert_uint_eq(f.payload_len, 12);

	ck_assert_int_eq(decode(golden_disconnect.bytes, golden_disconnect.len,
				MAX, &f, &st), 4 + 0x31);
	ck_assert_int_eq(f.type, SPOP_FRAME_HAPROXY_DISCONNECT);

	ck_assert_int_eq(decode(golden_agent_hello.bytes, golden_agent_hello.len,
				MAX, &f, &st), 4 + 0x36);
	ck_assert_int_eq(f.type, SPOP_FRAME_AGENT_HELLO);

	ck_assert_int_eq(decode(golden_notify.bytes, golden_notify.len, MAX,
				&f, &st), (ptrdiff_t)golden_notify.len);
	ck_assert_int_eq(f.type, SPOP_FRAME_NOTIFY);
	ck_assert_uint_eq(f.stream_id, 0);
	ck_assert_uint_eq(f.frame_id, 1);
}
END_TEST

/* Every truncated prefix of every golden frame is incomplete, never
 * invalid, and leaves the outputs alone. */
START_TEST(golden_prefixes)
{
	const struct golden *g = golden_frames[_i];
	size_t n;

	for (n = 0; n < g->len; n++) {
		struct spop_frame f;
		enum spop_status st = SPOP_ERR_RES;

		f.type = SPOP_FRAME_UNSET;
		ck_assert_msg(decode(g->bytes, n, MAX, &f, &st) ==
			      SPOP_NEED_MORE, "%s prefix %zu", g->name, n);
		ck_assert_int_eq(f.type, SPOP_FRAME_UNSET);
		ck_assert_int_eq(st, SPOP_ERR_RES);
	}
}
END_TEST

/* All golden frames back to back, fed one byte at a time into a growing
 * buffer: each frame comes out exactly when its last byte arrives. */
START_TEST(byte_by_byte)
{
	uint8_t stream[1024];
	size_t ends[16], nframes = 0, total = 0, off = 0, have, i;
	size_t got = 0;

	for (i = 0; i < golden_frames_count; i++) {
		memcpy(stream + total, golden_frames[i]->bytes,
		       golden_frames[i]->len);
		total += golden_frames[i]->len;
		ends[nframes++] = total;
	}
	for (have = 1; have <= total; have++) {
		struct spop_frame f;
		enum spop_status st;
		ptrdiff_t r = decode(stream + off, have - off, MAX, &f, &st);

		if (r == SPOP_NEED_MORE)
			continue;
		ck_assert_int_gt(r, 0);
		ck_assert_uint_lt(got, nframes);
		ck_assert_uint_eq(have, ends[got]);
		ck_assert_int_eq(f.type, golden_frames[got]->bytes[4]);
		got++;
		off += (size_t)r;
	}
	ck_assert_uint_eq(got, nframes);
	ck_assert_uint_eq(off, total);
}
END_TEST

START_TEST(oversized_length)
{
	struct spop_frame f;
	enum spop_status st = SPOP_ERR_NONE;

	/* A TLS ClientHello read as a length: 369,295,622. */
	ck_assert_int_eq(decode("\x16\x03\x01\x06", 4, MAX, &f, &st),
			 SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_TOO_BIG);
	st = SPOP_ERR_NONE;
	ck_assert_int_eq(decode("\xff\xff\xff\xff", 4, UINT32_MAX - 1, &f, &st),
			 SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_TOO_BIG);
	/* One above the limit, only the 4 length bytes present. */
	st = SPOP_ERR_NONE;
	ck_assert_int_eq(decode("\x00\x00\x01\x01", 4, 256, &f, &st),
			 SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_TOO_BIG);
	/* Exactly the limit is fine: wait for the body. */
	ck_assert_int_eq(decode("\x00\x00\x01\x00", 4, 256, &f, &st),
			 SPOP_NEED_MORE);
	ck_assert_int_eq(decode("\x00\x00\x3f\xfc", 4, MAX, &f, &st),
			 SPOP_NEED_MORE);
	ck_assert_int_eq(decode("\x00\x00\x3f\xfd", 4, MAX, &f, &st),
			 SPOP_EPROTO);
	/* Three bytes: still need more. */
	ck_assert_int_eq(decode("\xff\xff\xff", 3, MAX, &f, &st),
			 SPOP_NEED_MORE);
	/* The golden HELLO against a smaller limit. */
	ck_assert_int_eq(decode(golden_hello_26.bytes, 4, 128, &f, &st),
			 SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_TOO_BIG);
}
END_TEST

START_TEST(zero_length)
{
	struct spop_frame f;
	enum spop_status st = SPOP_ERR_NONE;

	ck_assert_int_eq(decode("\x00\x00\x00\x00", 4, MAX, &f, &st),
			 SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_INVALID);
}
END_TEST

START_TEST(header_does_not_fit)
{
	static const char *const frames[] = {
		"\x00\x00\x00\x01\x03",
		"\x00\x00\x00\x04\x03\x00\x00\x00",
		"\x00\x00\x00\x05\x03\x00\x00\x00\x01",           /* no ids */
		"\x00\x00\x00\x06\x03\x00\x00\x00\x01\x00",       /* no frame-id */
		"\x00\x00\x00\x07\x03\x00\x00\x00\x01\x00\xf0",   /* cut varint */
		"\x00\x00\x00\x07\x03\x00\x00\x00\x01\xf0\x80",
	};
	size_t i;

	for (i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
		const uint8_t *b = (const uint8_t *)frames[i];
		size_t len = 4 + b[3];
		struct spop_frame f;
		enum spop_status st = SPOP_ERR_NONE;

		ck_assert_int_eq(decode(b, len, MAX, &f, &st), SPOP_EPROTO);
		ck_assert_int_eq(st, SPOP_ERR_INVALID);
	}
	/* An 11-byte stream-id run inside the frame. */
	{
		static const uint8_t b[] = { 0, 0, 0, 17, 3, 0, 0, 0, 1,
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			0xff, 0x00, 0x01 };
		struct spop_frame f;
		enum spop_status st = SPOP_ERR_NONE;

		ck_assert_int_eq(decode(b, sizeof(b), MAX, &f, &st),
				 SPOP_EPROTO);
		ck_assert_int_eq(st, SPOP_ERR_INVALID);
	}
	/* Header only, empty payload: valid. */
	{
		struct spop_frame f;
		enum spop_status st;

		ck_assert_int_eq(decode("\x00\x00\x00\x07\x03\x00\x00\x00\x01"
					"\x00\x00", 11, MAX, &f, &st), 11);
		ck_assert_uint_eq(f.payload_len, 0);
	}
}
END_TEST

START_TEST(unknown_type)
{
	static const uint8_t types[] = { 4, 5, 99, 100, 104, 200, 255 };
	size_t i;

	for (i = 0; i < sizeof(types); i++) {
		uint8_t b[11] = { 0, 0, 0, 7, 0, 0, 0, 0, 1, 0, 0 };
		struct spop_frame f;
		enum spop_status st = SPOP_ERR_NONE;

		b[4] = types[i];
		ck_assert_int_eq(decode(b, 11, MAX, &f, &st), SPOP_EPROTO);
		ck_assert_int_eq(st, SPOP_ERR_INVALID);
		ck_assert_str_eq(spop_frame_type_name(types[i]), "UNKNOWN");
	}
}
END_TEST

START_TEST(fragments)
{
	struct spop_frame f;
	enum spop_status st = SPOP_ERR_NONE;

	/* NOTIFY with FIN clear: the first fragment of a payload. */
	ck_assert_int_eq(decode("\x00\x00\x00\x07\x03\x00\x00\x00\x00\x05\x01",
				11, MAX, &f, &st), SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_FRAG_NOT_SUPPORTED);
	/* A continuation, even the last one. */
	st = SPOP_ERR_NONE;
	ck_assert_int_eq(decode("\x00\x00\x00\x07\x00\x00\x00\x00\x01\x05\x01",
				11, MAX, &f, &st), SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_FRAG_NOT_SUPPORTED);
	st = SPOP_ERR_NONE;
	ck_assert_int_eq(decode("\x00\x00\x00\x07\x00\x00\x00\x00\x00\x05\x01",
				11, MAX, &f, &st), SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_FRAG_NOT_SUPPORTED);
	/* ABORT with FIN is a whole frame; the flags are passed on. */
	ck_assert_int_eq(decode("\x00\x00\x00\x07\x03\x00\x00\x00\x03\x05\x01",
				11, MAX, &f, &st), 11);
	ck_assert_uint_eq(f.flags, SPOP_FLAG_FIN | SPOP_FLAG_ABORT);
	ck_assert_uint_eq(f.stream_id, 5);
}
END_TEST

/* Frames of every type with ids up to 2^64-1 survive encode + decode. */
START_TEST(frame_roundtrip)
{
	static const uint8_t types[] = { 1, 2, 3, 101, 102, 103 };
	static const uint64_t ids[] = { 0, 1, 239, 240, 2287, 2288, 264432,
					UINT32_MAX, (uint64_t)1 << 63,
					UINT64_MAX - 1, UINT64_MAX };
	size_t t, i, j;

	for (t = 0; t < sizeof(types); t++)
		for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
			for (j = 0; j < sizeof(ids) / sizeof(ids[0]); j++) {
				uint8_t buf[128];
				struct spop_writer w;
				struct spop_data d = spop_data_string("x", 1);
				struct spop_frame f;
				enum spop_status st;
				ptrdiff_t n;

				spop_frame_begin(&w, buf, sizeof(buf),
						 (enum spop_frame_type)types[t],
						 SPOP_FLAG_FIN, ids[i], ids[j]);
				spop_put_kv(&w, "k", &d);
				n = spop_frame_finish(&w);
				ck_assert_int_gt(n, 0);
				ck_assert_int_eq(decode(buf, (size_t)n, MAX, &f,
							&st), n);
				ck_assert_int_eq(f.type, types[t]);
				ck_assert_uint_eq(f.stream_id, ids[i]);
				ck_assert_uint_eq(f.frame_id, ids[j]);
				ck_assert_uint_eq(f.payload_len, 5);
				ck_assert_mem_eq(f.payload, "\x01k\x08\x01x", 5);
			}
}
END_TEST

START_TEST(ack_golden_encode)
{
	uint8_t buf[64];
	struct spop_writer w;
	struct spop_data t = spop_data_bool(true);

	spop_ack_begin(&w, buf, sizeof(buf), 249011, 1);
	spop_ack_set_var(&w, SPOP_SCOPE_TXN, "allowed", 7, &t);
	ck_assert_int_eq(spop_ack_finish(&w), (ptrdiff_t)golden_ack.len);
	ck_assert_mem_eq(buf, golden_ack.bytes, golden_ack.len);
}
END_TEST

START_TEST(ack_actions_roundtrip)
{
	uint8_t buf[256];
	struct spop_writer w;
	struct spop_data v = spop_data_string("gpu-a", 5), val;
	struct spop_data k = spop_data_int64(-42);
	struct spop_frame f;
	struct spop_reader r;
	struct spop_str name;
	enum spop_action act;
	enum spop_scope scope;
	enum spop_status st;
	ptrdiff_t n;

	spop_ack_begin(&w, buf, sizeof(buf), 7, 3);
	spop_ack_set_var(&w, SPOP_SCOPE_TXN, "backend", 7, &v);
	spop_ack_unset_var(&w, SPOP_SCOPE_SESS, "reason", 6);
	spop_ack_set_var(&w, SPOP_SCOPE_RES, "key", 3, &k);
	n = spop_ack_finish(&w);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(decode(buf, (size_t)n, MAX, &f, &st), n);
	/* 01 03 02 07 backend 08 05 gpu-a */
	ck_assert_mem_eq(f.payload, "\x01\x03\x02\x07" "backend" "\x08\x05"
			 "gpu-a" "\x02\x02\x01\x06" "reason", 26);

	spop_reader_init(&r, f.payload, f.payload_len);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 1);
	ck_assert_int_eq(act, SPOP_ACT_SET_VAR);
	ck_assert_int_eq(scope, SPOP_SCOPE_TXN);
	ck_assert(spop_str_eq(name, "backend"));
	ck_assert_int_eq(val.type, SPOP_DATA_STRING);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 1);
	ck_assert_int_eq(act, SPOP_ACT_UNSET_VAR);
	ck_assert_int_eq(scope, SPOP_SCOPE_SESS);
	ck_assert(spop_str_eq(name, "reason"));
	ck_assert_int_eq(val.type, SPOP_DATA_NULL);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 1);
	ck_assert_int_eq(scope, SPOP_SCOPE_RES);
	ck_assert_int_eq(val.u.i64, -42);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 0);

	/* Bad action lists. */
	spop_reader_init(&r, guard_place("\x01\x02\x02\x01x", 5), 5);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_INVALID);
	spop_reader_init(&r, guard_place("\x02\x02\x05\x01x", 5), 5);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 SPOP_EPROTO);
	spop_reader_init(&r, guard_place("\x01\x03\x02\x01x", 5), 5);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 SPOP_EPROTO);
	spop_reader_init(&r, guard_place("\x01\x03\x02\x02x", 5), 5);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 SPOP_EPROTO);
	spop_reader_init(&r, guard_place("\x02\x02\x02\x02x", 5), 5);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 SPOP_EPROTO);
	spop_reader_init(&r, guard_place("\x02\x02", 2), 2);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 SPOP_EPROTO);
	spop_reader_init(&r, guard_place("\x03\x00\x02", 3), 3);
	ck_assert_int_eq(spop_action_next(&r, &act, &scope, &name, &val, &st),
			 SPOP_EPROTO);
}
END_TEST

/* Build the ACK into buffers of every size up to the one it needs, placed
 * against the guard page: no write ever goes past cap, finish reports
 * NEED_MORE, and the writer never claims more than it wrote. */
START_TEST(writer_overflow)
{
	struct spop_data t = spop_data_bool(true);
	size_t cap;

	for (cap = 0; cap <= golden_ack.len; cap++) {
		uint8_t *buf = guard_buf(cap);
		struct spop_writer w;
		ptrdiff_t n;

		spop_ack_begin(&w, buf, cap, 249011, 1);
		spop_ack_set_var(&w, SPOP_SCOPE_TXN, "allowed", 7, &t);
		ck_assert_uint_le(w.len, cap);
		n = spop_ack_finish(&w);
		if (cap < golden_ack.len) {
			ck_assert_int_eq(n, SPOP_NEED_MORE);
			ck_assert(w.overflow);
		} else {
			ck_assert_int_eq(n, (ptrdiff_t)cap);
			ck_assert_mem_eq(buf, golden_ack.bytes, cap);
		}
	}
}
END_TEST

START_TEST(writer_sticky_overflow)
{
	uint8_t buf[8], big[13];
	struct spop_writer w;

	spop_writer_init(&w, buf, sizeof(buf));
	spop_put_bytes(&w, "abcdef", 6);
	ck_assert_uint_eq(w.len, 6);
	spop_put_str(&w, "xyz", 3); /* needs 4: all or nothing */
	ck_assert(w.overflow);
	ck_assert_uint_eq(w.len, 6);
	spop_put_bytes(&w, "z", 1); /* would fit, but overflow is sticky */
	ck_assert_uint_eq(w.len, 6);
	spop_put_varint(&w, 1);
	spop_put_kv(&w, "", &(struct spop_data){ .type = SPOP_DATA_NULL });
	ck_assert_uint_eq(w.len, 6);
	ck_assert_mem_eq(buf, "abcdef", 6);
	ck_assert_int_eq(spop_frame_finish(&w), SPOP_NEED_MORE);

	spop_writer_init(&w, NULL, 100);
	spop_put_bytes(&w, "a", 1);
	ck_assert(w.overflow);
	ck_assert_uint_eq(w.len, 0);

	/* put_data and unset-var are all or nothing too. */
	spop_writer_init(&w, buf, sizeof(buf));
	spop_put_bytes(&w, "abcd", 4);
	{
		struct spop_data five = spop_data_string("12345", 5);

		spop_put_data(&w, &five);
		ck_assert(w.overflow);
		ck_assert_uint_eq(w.len, 4);
	}
	spop_ack_begin(&w, big, sizeof(big), 0, 0);
	ck_assert_uint_eq(w.len, 11);
	spop_ack_unset_var(&w, SPOP_SCOPE_TXN, "x", 1); /* needs 5 */
	ck_assert(w.overflow);
	ck_assert_uint_eq(w.len, 11);

	/* A header that does not fit. */
	spop_frame_begin(&w, buf, sizeof(buf), SPOP_FRAME_ACK, SPOP_FLAG_FIN,
			 UINT64_MAX, 0);
	ck_assert(w.overflow);
	ck_assert_int_eq(spop_frame_finish(&w), SPOP_NEED_MORE);
}
END_TEST

/* Two frames built one after the other in one buffer. */
/* The header in place (room for its longest form) and built aside (room
 * for its exact size only, or less) give the same bytes, all or nothing:
 * ids of every varint length, every room from none to the longest. */
START_TEST(frame_header_every_room)
{
	static const uint64_t ids[] = { 0, 239, 240, 2287, 2288, 264431,
					UINT32_MAX, UINT64_MAX };
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		uint8_t want[64];
		size_t n = 9;
		memset(want, 0, 4);
		want[4] = SPOP_FRAME_ACK;
		want[5] = want[6] = want[7] = 0;
		want[8] = SPOP_FLAG_FIN;
		n += (size_t)spop_varint_encode(ids[i], want + n, 10);
		n += (size_t)spop_varint_encode(ids[i] >> 3, want + n, 10);
		for (size_t cap = 0; cap <= 4 + 1 + 4 + 20 + 1; cap++) {
			uint8_t *buf = guard_buf(cap);
			struct spop_writer w;
			spop_ack_begin(&w, buf, cap, ids[i], ids[i] >> 3);
			if (cap < n) {
				ck_assert(w.overflow);
				ck_assert_uint_eq(w.len, 0);
			} else {
				ck_assert(!w.overflow);
				ck_assert_uint_eq(w.len, n);
				ck_assert_mem_eq(buf, want, n);
			}
		}
	}
}
END_TEST

START_TEST(writer_two_frames)
{
	uint8_t buf[256];
	struct spop_writer w;
	struct spop_data t = spop_data_bool(true);
	struct spop_frame f;
	enum spop_status st;
	ptrdiff_t n1, n2;

	spop_ack_begin(&w, buf, sizeof(buf), 249011, 1);
	spop_ack_set_var(&w, SPOP_SCOPE_TXN, "allowed", 7, &t);
	n1 = spop_ack_finish(&w);
	spop_frame_start(&w, SPOP_FRAME_ACK, SPOP_FLAG_FIN, 249011, 1);
	spop_ack_set_var(&w, SPOP_SCOPE_TXN, "allowed", 7, &t);
	n2 = spop_ack_finish(&w);
	ck_assert_int_eq(n1, (ptrdiff_t)golden_ack.len);
	ck_assert_int_eq(n2, (ptrdiff_t)golden_ack.len);
	ck_assert_uint_eq(w.len, 2 * golden_ack.len);
	ck_assert_mem_eq(buf, golden_ack.bytes, golden_ack.len);
	ck_assert_mem_eq(buf + n1, golden_ack.bytes, golden_ack.len);
	ck_assert_int_eq(decode(buf + n1, (size_t)n2, MAX, &f, &st), n2);
}
END_TEST

static void expect_arg(struct spop_reader *r, const char *name,
		       enum spop_data_type type)
{
	struct spop_str n;
	struct spop_data v;
	enum spop_status st;

	ck_assert_int_eq(spop_arg_next(r, &n, &v, &st), 1);
	ck_assert_msg(spop_str_eq(n, name), "arg %s", name);
	ck_assert_int_eq(v.type, type);
}

START_TEST(notify_walk)
{
	struct spop_frame f;
	struct spop_reader r;
	struct spop_str name, an;
	struct spop_data v;
	enum spop_status st;
	unsigned nargs = 99;

	ck_assert_int_gt(decode(golden_notify.bytes, golden_notify.len, MAX,
				&f, &st), 0);
	spop_reader_init(&r, f.payload, f.payload_len);

	ck_assert_int_eq(spop_msg_next(&r, &name, &nargs, &st), 1);
	ck_assert(spop_str_eq(name, "route"));
	ck_assert_uint_eq(nargs, 5);
	ck_assert_int_eq(spop_arg_next(&r, &an, &v, &st), 1);
	ck_assert(spop_str_eq(an, "session"));
	ck_assert_int_eq(v.type, SPOP_DATA_STRING);
	ck_assert(spop_str_eq(v.u.str, "abc"));
	ck_assert_int_eq(spop_arg_next(&r, &an, &v, &st), 1);
	ck_assert(spop_str_eq(an, "prefix1"));
	ck_assert_int_eq(v.type, SPOP_DATA_INT64);
	ck_assert_int_eq(v.u.i64, -5);
	expect_arg(&r, "", SPOP_DATA_NULL);
	ck_assert_int_eq(spop_arg_next(&r, &an, &v, &st), 1);
	ck_assert(spop_str_eq(an, "src"));
	ck_assert_int_eq(v.type, SPOP_DATA_IPV4);
	ck_assert_mem_eq(v.u.ipv4, "\x0a\x00\x00\x01", 4);
	ck_assert_int_eq(spop_arg_next(&r, &an, &v, &st), 1);
	ck_assert(spop_str_eq(an, "caller"));
	ck_assert_int_eq(v.type, SPOP_DATA_UINT64);
	ck_assert_uint_eq(v.u.u64, UINT64_MAX);

	ck_assert_int_eq(spop_msg_next(&r, &name, &nargs, &st), 1);
	ck_assert(spop_str_eq(name, "feedback"));
	ck_assert_uint_eq(nargs, 2);
	ck_assert_int_eq(spop_arg_next(&r, &an, &v, &st), 1);
	ck_assert_uint_eq(an.len, 0);
	ck_assert_int_eq(v.type, SPOP_DATA_BOOL);
	ck_assert(v.u.b);
	ck_assert_int_eq(spop_arg_next(&r, &an, &v, &st), 1);
	ck_assert(spop_str_eq(an, "status"));
	ck_assert_int_eq(v.u.i64, 503);

	ck_assert_int_eq(spop_msg_next(&r, &name, &nargs, &st), 1);
	ck_assert(spop_str_eq(name, "empty"));
	ck_assert_uint_eq(nargs, 0);
	ck_assert_int_eq(spop_msg_next(&r, &name, &nargs, &st), 0);
	ck_assert_ptr_eq(r.p, r.end);
}
END_TEST

START_TEST(notify_skip_args)
{
	struct spop_frame f;
	struct spop_reader r;
	struct spop_str name;
	enum spop_status st;
	unsigned nargs, msgs = 0;

	ck_assert_int_gt(decode(golden_notify.bytes, golden_notify.len, MAX,
				&f, &st), 0);
	spop_reader_init(&r, f.payload, f.payload_len);
	while (spop_msg_next(&r, &name, &nargs, &st) == 1) {
		ck_assert_int_eq(spop_msg_skip_args(&r, nargs, &st), 0);
		msgs++;
	}
	ck_assert_uint_eq(msgs, 3);
	ck_assert_ptr_eq(r.p, r.end);
}
END_TEST

/* Walks a NOTIFY payload; returns messages read, or -1 on SPOP_EPROTO. */
static int walk(const uint8_t *p, size_t len)
{
	struct spop_reader r;
	struct spop_str name;
	struct spop_data v;
	enum spop_status st = SPOP_ERR_NONE;
	unsigned nargs, i;
	int msgs = 0, rc;

	spop_reader_init(&r, p, len);
	while ((rc = spop_msg_next(&r, &name, &nargs, &st)) == 1) {
		for (i = 0; i < nargs; i++)
			if (spop_arg_next(&r, &name, &v, &st) != 1) {
				ck_assert_int_eq(st, SPOP_ERR_INVALID);
				return -1;
			}
		msgs++;
	}
	if (rc < 0) {
		ck_assert_int_eq(st, SPOP_ERR_INVALID);
		return -1;
	}
	return msgs;
}

/* Every cut of the NOTIFY payload, against the guard page: complete at the
 * message boundaries, invalid anywhere else. */
START_TEST(notify_truncated)
{
	const uint8_t *payload = golden_notify.bytes + 11;
	size_t plen = golden_notify.len - 11, n;
	/* Offsets where a message ends: route, feedback, empty. */
	const size_t ends[] = { 0, 7 + 13 + 19 + 2 + 9 + 18,
				7 + 13 + 19 + 2 + 9 + 18 + 10 + 2 + 10, plen };

	for (n = 0; n <= plen; n++) {
		int w = walk(guard_place(payload, n), n);
		int k;

		for (k = 0; k < 4; k++)
			if (n == ends[k])
				break;
		if (k < 4)
			ck_assert_msg(w == k, "cut %zu: %d", n, w);
		else
			ck_assert_msg(w == -1, "cut %zu: %d", n, w);
	}
}
END_TEST

START_TEST(notify_malformed)
{
	struct spop_reader r;
	struct spop_str name;
	struct spop_data v;
	enum spop_status st = SPOP_ERR_NONE;
	unsigned nargs = 0;

	/* Name without its count. */
	spop_reader_init(&r, guard_place("\x05route", 6), 6);
	ck_assert_int_eq(spop_msg_next(&r, &name, &nargs, &st), SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_INVALID);
	/* Two arguments announced, one present. */
	spop_reader_init(&r, guard_place("\x01m\x02\x01" "a\x00", 6), 6);
	ck_assert_int_eq(spop_msg_next(&r, &name, &nargs, &st), 1);
	ck_assert_uint_eq(nargs, 2);
	ck_assert_int_eq(spop_arg_next(&r, &name, &v, &st), 1);
	st = SPOP_ERR_NONE;
	ck_assert_int_eq(spop_arg_next(&r, &name, &v, &st), SPOP_EPROTO);
	ck_assert_int_eq(st, SPOP_ERR_INVALID);
	spop_reader_init(&r, guard_place("\x01m\x02\x01" "a\x00", 6), 6);
	ck_assert_int_eq(spop_msg_next(&r, &name, &nargs, &st), 1);
	ck_assert_int_eq(spop_msg_skip_args(&r, nargs, &st), SPOP_EPROTO);
	ck_assert_ptr_eq(r.p, guard_place("\x01m\x02\x01" "a\x00", 6) + 3);
	/* An argument with an unknown type. */
	spop_reader_init(&r, guard_place("\x01m\x01\x01" "a\x0a", 6), 6);
	ck_assert_int_eq(spop_msg_next(&r, &name, &nargs, &st), 1);
	ck_assert_int_eq(spop_arg_next(&r, &name, &v, &st), SPOP_EPROTO);
	/* Empty payload: no message. */
	spop_reader_init(&r, NULL, 0);
	ck_assert_int_eq(spop_msg_next(&r, &name, &nargs, &st), 0);
}
END_TEST

START_TEST(names)
{
	ck_assert_str_eq(spop_frame_type_name(SPOP_FRAME_NOTIFY), "NOTIFY");
	ck_assert_str_eq(spop_frame_type_name(SPOP_FRAME_HAPROXY_HELLO),
			 "HAPROXY-HELLO");
	ck_assert_str_eq(spop_frame_type_name(SPOP_FRAME_ACK), "ACK");
	ck_assert_str_eq(spop_frame_type_name(SPOP_FRAME_UNSET), "UNSET");
	ck_assert_str_eq(spop_frame_type_name(SPOP_FRAME_HAPROXY_DISCONNECT),
			 "HAPROXY-DISCONNECT");
	ck_assert_str_eq(spop_frame_type_name(SPOP_FRAME_AGENT_HELLO),
			 "AGENT-HELLO");
	ck_assert_str_eq(spop_frame_type_name(SPOP_FRAME_AGENT_DISCONNECT),
			 "AGENT-DISCONNECT");
	ck_assert_str_eq(spop_status_text(SPOP_ERR_TIMEOUT),
			 "a timeout occurred");
	ck_assert_str_eq(spop_status_text(SPOP_ERR_TOO_BIG),
			 "frame is too big");
	ck_assert_str_eq(spop_status_text(SPOP_ERR_UNKNOWN),
			 "an unknown error occurred");
	ck_assert_str_eq(spop_status_text((enum spop_status)42),
			 "an unknown error occurred");
}
END_TEST

#if !defined(__SANITIZE_ADDRESS__)
/* The guard page does catch a read one past the end. */
START_TEST(guard_page_faults)
{
	const volatile uint8_t *p = guard_place("x", 1);

	ck_assert_uint_eq(p[1], 0);
}
END_TEST
#endif

/* spop_ack_set_var_str writes the bytes spop_ack_set_var writes for the
 * same STRING, on both sides of the one-byte varint bound (239/240) for
 * the name and the value, and is all or nothing at every capacity. */
START_TEST(ack_set_var_str_same_bytes)
{
	static const size_t lens[] = { 0, 1, 16, 239, 240, 241, 300 };
	static char big[400];
	memset(big, 'v', sizeof(big));
	for (size_t a = 0; a < sizeof(lens) / sizeof(*lens); a++) {
		for (size_t b = 0; b < sizeof(lens) / sizeof(*lens); b++) {
			size_t nl = lens[a], vl = lens[b];
			uint8_t want[1024], got[1024];
			struct spop_writer w1, w2;
			struct spop_data d = spop_data_string(big, vl);
			spop_writer_init(&w1, want, sizeof(want));
			spop_ack_set_var(&w1, SPOP_SCOPE_TXN, big, nl, &d);
			spop_writer_init(&w2, got, sizeof(got));
			spop_ack_set_var_str(&w2, SPOP_SCOPE_TXN, big, nl, big, vl);
			ck_assert(!w1.overflow && !w2.overflow);
			ck_assert_uint_eq(w1.len, w2.len);
			ck_assert_msg(memcmp(want, got, w1.len) == 0,
				      "name %zu value %zu", nl, vl);
			/* Every smaller room: nothing written, overflow set. */
			for (size_t cap = 0; cap < w1.len; cap++) {
				struct spop_writer w3;
				memset(got, 0xAA, sizeof(got));
				spop_writer_init(&w3, got, cap);
				spop_ack_set_var_str(&w3, SPOP_SCOPE_TXN, big, nl,
						     big, vl);
				ck_assert(w3.overflow);
				ck_assert_uint_eq(w3.len, 0);
				ck_assert_uint_eq(got[0], 0xAA);
			}
		}
	}
	/* After an overflow, nothing more is appended even if it fits. */
	uint8_t buf[64];
	struct spop_writer w;
	spop_writer_init(&w, buf, sizeof(buf));
	spop_ack_set_var_str(&w, SPOP_SCOPE_TXN, big, 50, big, 50);
	ck_assert(w.overflow);
	spop_ack_set_var_str(&w, SPOP_SCOPE_TXN, "k", 1, "v", 1);
	ck_assert_uint_eq(w.len, 0);
}
END_TEST

static Suite *proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("frame");
	int n = (int)golden_frames_count;

	tcase_add_loop_test(tc, golden_decode, 0, n);
	tcase_add_test(tc, golden_headers);
	tcase_add_test(tc, ack_set_var_str_same_bytes);
	tcase_add_loop_test(tc, golden_prefixes, 0, n);
	tcase_add_test(tc, byte_by_byte);
	tcase_add_test(tc, oversized_length);
	tcase_add_test(tc, zero_length);
	tcase_add_test(tc, header_does_not_fit);
	tcase_add_test(tc, unknown_type);
	tcase_add_test(tc, fragments);
	tcase_add_test(tc, frame_roundtrip);
	tcase_add_test(tc, names);
#if !defined(__SANITIZE_ADDRESS__)
	/* Needs check's fork mode to survive its own fault (valgrind runs
	 * use CK_FORK=no). */
	{
		const char *fork_mode = getenv("CK_FORK");

		if (!fork_mode || strcmp(fork_mode, "no") != 0)
			tcase_add_test_raise_signal(tc, guard_page_faults,
						    SIGSEGV);
	}
#endif
	suite_add_tcase(s, tc);

	tc = tcase_create("writer");
	tcase_add_test(tc, ack_golden_encode);
	tcase_add_test(tc, ack_actions_roundtrip);
	tcase_add_test(tc, writer_overflow);
	tcase_add_test(tc, frame_header_every_room);
	tcase_add_test(tc, writer_sticky_overflow);
	tcase_add_test(tc, writer_two_frames);
	suite_add_tcase(s, tc);

	tc = tcase_create("notify");
	tcase_add_test(tc, notify_walk);
	tcase_add_test(tc, notify_skip_args);
	tcase_add_test(tc, notify_truncated);
	tcase_add_test(tc, notify_malformed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(proto_suite());
}
