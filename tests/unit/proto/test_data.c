/* test_data.c - proto: varints and typed data. */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "../run.h"
#include "spop.h"

struct vec {
	uint64_t v;
	size_t len;
	uint8_t b[SPOP_VARINT_MAX_LEN];
};

/* docs/spop.md's table plus the boundaries of the 1-, 2- and 3-byte forms. */
static const struct vec varints[] = {
	{ 0, 1, { 0x00 } },
	{ 1, 1, { 0x01 } },
	{ 239, 1, { 0xef } },
	{ 240, 2, { 0xf0, 0x00 } },
	{ 256, 2, { 0xf0, 0x01 } },
	{ 2287, 2, { 0xff, 0x7f } },
	{ 2288, 3, { 0xf0, 0x80, 0x00 } },
	{ 16380, 3, { 0xfc, 0xf0, 0x06 } },
	{ 65535, 3, { 0xff, 0xf0, 0x1e } },
	{ 264431, 3, { 0xff, 0xff, 0x7f } },
	{ 264432, 4, { 0xf0, 0x80, 0x80, 0x00 } },
	{ UINT32_MAX, 5, { 0xff, 0xf0, 0xfe, 0xfe, 0x7e } },
	{ UINT64_MAX, 10, { 0xff, 0xf0, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe,
			    0xfe, 0x0e } },
};
#define NVARINTS (sizeof(varints) / sizeof(varints[0]))

START_TEST(varint_table_encode)
{
	const struct vec *t = &varints[_i];
	uint8_t out[16];

	memset(out, 0xaa, sizeof(out));
	ck_assert_int_eq(spop_varint_encode(t->v, out, sizeof(out)),
			 (ptrdiff_t)t->len);
	ck_assert_mem_eq(out, t->b, t->len);
	ck_assert_uint_eq(out[t->len], 0xaa);
	ck_assert_int_eq(spop_varint_size(t->v), (int)t->len);
	/* A buffer one byte short: nothing written. */
	memset(out, 0xaa, sizeof(out));
	ck_assert_int_eq(spop_varint_encode(t->v, out, t->len - 1),
			 SPOP_NEED_MORE);
	ck_assert_uint_eq(out[0], 0xaa);
}
END_TEST

START_TEST(varint_table_decode)
{
	const struct vec *t = &varints[_i];
	uint64_t v = 0;
	size_t n;

	ck_assert_int_eq(spop_varint_decode(guard_place(t->b, t->len), t->len,
					    &v), (ptrdiff_t)t->len);
	ck_assert_uint_eq(v, t->v);
	/* Every truncated prefix asks for more and leaves v alone. */
	for (n = 0; n < t->len; n++) {
		v = 12345;
		ck_assert_int_eq(spop_varint_decode(guard_place(t->b, n), n,
						    &v), SPOP_NEED_MORE);
		ck_assert_uint_eq(v, 12345);
	}
}
END_TEST

START_TEST(varint_eleven_byte_run)
{
	static const uint8_t run[11] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					 0xff, 0xff, 0xff, 0xff, 0x00 };
	static const uint8_t run_f0[11] = { 0xf0, 0x80, 0x80, 0x80, 0x80,
					    0x80, 0x80, 0x80, 0x80, 0x80, 0x00 };
	uint64_t v = 7;

	ck_assert_int_eq(spop_varint_decode(guard_place(run, 11), 11, &v),
			 SPOP_EPROTO);
	ck_assert_int_eq(spop_varint_decode(guard_place(run_f0, 11), 11, &v),
			 SPOP_EPROTO);
	/* Known as soon as the tenth byte says "more". */
	ck_assert_int_eq(spop_varint_decode(guard_place(run, 10), 10, &v),
			 SPOP_EPROTO);
	ck_assert_int_eq(spop_varint_decode(guard_place(run, 9), 9, &v),
			 SPOP_NEED_MORE);
	ck_assert_uint_eq(v, 7);
}
END_TEST

START_TEST(varint_overflow)
{
	/* Ten bytes whose sum passes 2^64: by the top byte, or by a carry. */
	static const uint8_t top[10] = { 0xff, 0xf0, 0xfe, 0xfe, 0xfe, 0xfe,
					 0xfe, 0xfe, 0xfe, 0x1e };
	static const uint8_t carry[10] = { 0xff, 0xff, 0xff, 0xff, 0xff,
					   0xff, 0xff, 0xff, 0xff, 0x0e };
	static const uint8_t carry2[10] = { 0xf0, 0xfe, 0xfe, 0xfe, 0xfe,
					    0xfe, 0xfe, 0xfe, 0xfe, 0x0f };
	uint64_t v = 7;

	ck_assert_int_eq(spop_varint_decode(guard_place(top, 10), 10, &v),
			 SPOP_EPROTO);
	ck_assert_int_eq(spop_varint_decode(guard_place(carry, 10), 10, &v),
			 SPOP_EPROTO);
	ck_assert_int_eq(spop_varint_decode(guard_place(carry2, 10), 10, &v),
			 SPOP_EPROTO);
	ck_assert_uint_eq(v, 7);
}
END_TEST

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void)
{
	/* xorshift64*: deterministic, so a failure reproduces. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1du;
}

static void roundtrip(uint64_t v)
{
	uint8_t buf[SPOP_VARINT_MAX_LEN];
	ptrdiff_t n = spop_varint_encode(v, buf, sizeof(buf));
	uint64_t back = 0;

	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(n, spop_varint_size(v));
	ck_assert_int_eq(spop_varint_decode(guard_place(buf, (size_t)n),
					    (size_t)n, &back), n);
	ck_assert_uint_eq(back, v);
}

START_TEST(varint_roundtrip)
{
	uint64_t v;
	int i, s;

	for (v = 0; v < 300000; v++)
		roundtrip(v);
	for (s = 0; s < 64; s++) {
		roundtrip((uint64_t)1 << s);
		roundtrip(((uint64_t)1 << s) - 1);
		roundtrip(((uint64_t)1 << s) + 1);
		roundtrip(UINT64_MAX >> s);
	}
	for (i = 0; i < 100000; i++)
		roundtrip(rng() >> (rng() & 63));
}
END_TEST

/* Each size class starts where SPOE.txt 3.1 says. */
START_TEST(varint_size_classes)
{
	static const uint64_t starts[] = { 0, 240, 2288, 264432, 33818864,
					   4328786160u };
	size_t i;

	for (i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		ck_assert_int_eq(spop_varint_size(starts[i]), (int)i + 1);
		if (i > 0)
			ck_assert_int_eq(spop_varint_size(starts[i] - 1),
					 (int)i);
	}
}
END_TEST

/* ---- typed data ---- */

struct dvec {
	const char *name;
	size_t len;
	uint8_t b[24];
};

static void check_encode(const struct spop_data *d, const uint8_t *want,
			 size_t len)
{
	uint8_t out[64];
	struct spop_data back;

	memset(out, 0xaa, sizeof(out));
	ck_assert_int_eq(spop_data_encode(d, out, sizeof(out)), (ptrdiff_t)len);
	ck_assert_mem_eq(out, want, len);
	ck_assert_int_eq(spop_data_encode(d, out + 32, len - 1),
			 SPOP_NEED_MORE);
	ck_assert_uint_eq(out[32], 0xaa);
	ck_assert_int_eq(spop_data_decode(guard_place(want, len), len, &back),
			 (ptrdiff_t)len);
	ck_assert_int_eq(back.type, d->type);
}

START_TEST(data_golden)
{
	static const uint8_t ipv6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
					  0, 0, 0, 0, 0, 0, 0, 1 };
	struct spop_data d;
	uint8_t bin[300];

	d = spop_data_null();
	check_encode(&d, (const uint8_t *)"\x00", 1);
	d = spop_data_bool(true);
	check_encode(&d, (const uint8_t *)"\x11", 1);
	d = spop_data_bool(false);
	check_encode(&d, (const uint8_t *)"\x01", 1);
	d.type = SPOP_DATA_INT32;
	d.u.i32 = -5;
	check_encode(&d, (const uint8_t *)"\x02\xfb\xf0\xfe\xfe\xfe\xfe\xfe"
		     "\xfe\xfe\x0e", 11);
	d.u.i32 = 5;
	check_encode(&d, (const uint8_t *)"\x02\x05", 2);
	d = spop_data_uint32(UINT32_MAX);
	check_encode(&d, (const uint8_t *)"\x03\xff\xf0\xfe\xfe\x7e", 6);
	d = spop_data_int64(-5);
	check_encode(&d, (const uint8_t *)"\x04\xfb\xf0\xfe\xfe\xfe\xfe\xfe"
		     "\xfe\xfe\x0e", 11);
	d = spop_data_int64(503);
	check_encode(&d, (const uint8_t *)"\x04\xf7\x10", 3);
	d.type = SPOP_DATA_UINT64;
	d.u.u64 = UINT64_MAX;
	check_encode(&d, (const uint8_t *)"\x05\xff\xf0\xfe\xfe\xfe\xfe\xfe"
		     "\xfe\xfe\x0e", 11);
	d.type = SPOP_DATA_IPV4;
	memcpy(d.u.ipv4, "\x0a\x00\x00\x01", 4);
	check_encode(&d, (const uint8_t *)"\x06\x0a\x00\x00\x01", 5);
	d.type = SPOP_DATA_IPV6;
	memcpy(d.u.ipv6, ipv6, 16);
	check_encode(&d, (const uint8_t *)"\x07\x20\x01\x0d\xb8\x00\x00\x00"
		     "\x00\x00\x00\x00\x00\x00\x00\x00\x01", 17);
	d = spop_data_string("abc", 3);
	check_encode(&d, (const uint8_t *)"\x08\x03" "abc", 5);
	d = spop_data_string(NULL, 0);
	check_encode(&d, (const uint8_t *)"\x08\x00", 2);
	d = spop_data_binary(NULL, 0);
	check_encode(&d, (const uint8_t *)"\x09\x00", 2);

	/* A 300-byte BINARY: two-byte length FC 03. */
	{
		uint8_t want[303], out[303];
		struct spop_data back;

		memset(bin, 0x5a, sizeof(bin));
		want[0] = 0x09;
		want[1] = 0xfc;
		want[2] = 0x03;
		memcpy(want + 3, bin, sizeof(bin));
		d = spop_data_binary(bin, sizeof(bin));
		ck_assert_int_eq(spop_data_encode(&d, out, sizeof(out)), 303);
		ck_assert_mem_eq(out, want, 303);
		ck_assert_int_eq(spop_data_encode(&d, out, 302),
				 SPOP_NEED_MORE);
		ck_assert_int_eq(spop_data_decode(guard_place(want, 303), 303,
						  &back), 303);
		ck_assert_int_eq(back.type, SPOP_DATA_BINARY);
		ck_assert_uint_eq(back.u.str.len, 300);
		ck_assert_mem_eq(back.u.str.ptr, bin, 300);
	}
}
END_TEST

static struct spop_data sample(int i)
{
	struct spop_data d = spop_data_null();

	switch (i) {
	case 0:
		break;
	case 1:
		d = spop_data_bool(true);
		break;
	case 2:
		d.type = SPOP_DATA_INT32;
		d.u.i32 = INT32_MIN;
		break;
	case 3:
		d = spop_data_uint32(0x80000000u);
		break;
	case 4:
		d = spop_data_int64(INT64_MIN);
		break;
	case 5:
		d.type = SPOP_DATA_UINT64;
		d.u.u64 = 0x8000000000000001u;
		break;
	case 6:
		d.type = SPOP_DATA_IPV4;
		memcpy(d.u.ipv4, "\xc0\xa8\x01\xfe", 4);
		break;
	case 7:
		d.type = SPOP_DATA_IPV6;
		memcpy(d.u.ipv6, "\xfe\x80\x00\x00\x00\x00\x00\x00"
		       "\x02\x11\x22\xff\xfe\x33\x44\x55", 16);
		break;
	case 8:
		d = spop_data_string("warmlane", 8);
		break;
	default:
		d = spop_data_binary("\x00\x01\x02\xff", 4);
		break;
	}
	return d;
}

/* spop_data_equal: by type and value, strings by content wherever they
 * are. */
START_TEST(data_equal_by_value)
{
	char x[] = "warmlane", y[] = "warmlane";
	struct spop_data a = spop_data_string(x, 8), b = spop_data_string(y, 8);
	ck_assert(spop_data_equal(&a, &b));
	b = spop_data_binary(y, 8);
	ck_assert(!spop_data_equal(&a, &b)); /* type */
	b = spop_data_string(y, 7);
	ck_assert(!spop_data_equal(&a, &b));
	y[3] = 'M';
	b = spop_data_string(y, 8);
	ck_assert(!spop_data_equal(&a, &b));
	a = spop_data_string(x, 0);
	b = spop_data_string(NULL, 0);
	ck_assert(spop_data_equal(&a, &b));
	a = spop_data_uint32(7);
	b = spop_data_uint32(7);
	ck_assert(spop_data_equal(&a, &b));
	b.type = SPOP_DATA_INT32;
	ck_assert(!spop_data_equal(&a, &b));
	b = spop_data_uint32(8);
	ck_assert(!spop_data_equal(&a, &b));
	a = spop_data_int64(-1);
	b = spop_data_int64(-1);
	ck_assert(spop_data_equal(&a, &b));
	a = spop_data_bool(true);
	b = spop_data_bool(false);
	ck_assert(!spop_data_equal(&a, &b));
	a = spop_data_null();
	b = spop_data_null();
	ck_assert(spop_data_equal(&a, &b));
}
END_TEST

/* All ten types: encode, decode against a guard page, compare; every
 * truncation asks for more. */
START_TEST(data_roundtrip_all_types)
{
	struct spop_data d = sample(_i), back;
	uint8_t buf[64];
	ptrdiff_t n = spop_data_encode(&d, buf, sizeof(buf));
	size_t k;

	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(buf[0] & 0x0f, _i);
	ck_assert_int_eq(spop_data_decode(guard_place(buf, (size_t)n),
					  (size_t)n, &back), n);
	ck_assert(spop_data_equal(&d, &back));
	for (k = 0; k < (size_t)n; k++) {
		back.type = SPOP_DATA_NULL;
		ck_assert_int_eq(spop_data_decode(guard_place(buf, k), k,
						  &back), SPOP_NEED_MORE);
		ck_assert_int_eq(back.type, SPOP_DATA_NULL);
	}
}
END_TEST

START_TEST(data_bool_flags)
{
	struct spop_data d;

	ck_assert_int_eq(spop_data_decode(guard_place("\x11", 1), 1, &d), 1);
	ck_assert_int_eq(d.type, SPOP_DATA_BOOL);
	ck_assert(d.u.b);
	ck_assert_int_eq(spop_data_decode(guard_place("\x01", 1), 1, &d), 1);
	ck_assert(!d.u.b);
	/* Only bit 4 is the value; other flag bits are ignored. */
	ck_assert_int_eq(spop_data_decode(guard_place("\x31", 1), 1, &d), 1);
	ck_assert(d.u.b);
	ck_assert_int_eq(spop_data_decode(guard_place("\xe1", 1), 1, &d), 1);
	ck_assert(!d.u.b);
	ck_assert_int_eq(spop_data_decode(guard_place("\xf0", 1), 1, &d), 1);
	ck_assert_int_eq(d.type, SPOP_DATA_NULL);
}
END_TEST

START_TEST(data_integers)
{
	struct spop_data d;

	/* HAProxy's -5: INT64, ten-byte varint. */
	ck_assert_int_eq(spop_data_decode(guard_place("\x04\xfb\xf0\xfe\xfe"
		"\xfe\xfe\xfe\xfe\xfe\x0e", 11), 11, &d), 11);
	ck_assert_int_eq(d.type, SPOP_DATA_INT64);
	ck_assert_int_eq(d.u.i64, -5);
	/* INT64_MIN and INT64_MAX survive. */
	d = spop_data_int64(INT64_MAX);
	{
		uint8_t b[16];
		struct spop_data back;
		ptrdiff_t n = spop_data_encode(&d, b, sizeof(b));

		ck_assert_int_eq(spop_data_decode(b, (size_t)n, &back), n);
		ck_assert_int_eq(back.u.i64, INT64_MAX);
	}
	/* INT32 takes sign-extended values in range only. */
	ck_assert_int_eq(spop_data_decode(guard_place("\x02\xff\xf0\xfe\xfe"
		"\x7e", 6), 6, &d), SPOP_EPROTO); /* 0xffffffff */
	ck_assert_int_eq(spop_data_decode(guard_place("\x02\xf0\xf1\xfe\xfe"
		"\x3e", 6), 6, &d), SPOP_EPROTO); /* 0x80000000 */
	ck_assert_int_eq(spop_data_decode(guard_place("\x02\xff\xf0\xfe\xfe"
		"\x3e", 6), 6, &d), 6); /* 0x7fffffff */
	ck_assert_int_eq(d.u.i32, INT32_MAX);
	/* UINT32 up to 2^32-1; 2^32 is invalid. */
	ck_assert_int_eq(spop_data_decode(guard_place("\x03\xff\xf0\xfe\xfe"
		"\x7e", 6), 6, &d), 6);
	ck_assert_uint_eq(d.u.u32, UINT32_MAX);
	ck_assert_int_eq(spop_data_decode(guard_place("\x03\xf0\xf1\xfe\xfe"
		"\x7e", 6), 6, &d), SPOP_EPROTO);
	ck_assert_int_eq(spop_data_decode(guard_place("\x03\xfb\xf0\xfe\xfe"
		"\xfe\xfe\xfe\xfe\xfe\x0e", 11), 11, &d), SPOP_EPROTO);
}
END_TEST

START_TEST(data_invalid)
{
	struct spop_data d = spop_data_bool(true);
	uint8_t b[2];
	int t;

	for (t = 10; t < 16; t++) {
		b[0] = (uint8_t)t;
		b[1] = 0;
		ck_assert_int_eq(spop_data_decode(guard_place(b, 2), 2, &d),
				 SPOP_EPROTO);
		b[0] = (uint8_t)(t | 0x10);
		ck_assert_int_eq(spop_data_decode(guard_place(b, 1), 1, &d),
				 SPOP_EPROTO);
	}
	/* A string announcing 2^64-1 bytes is only incomplete. */
	ck_assert_int_eq(spop_data_decode(guard_place("\x08\xff\xf0\xfe\xfe"
		"\xfe\xfe\xfe\xfe\xfe\x0e", 11), 11, &d), SPOP_NEED_MORE);
	ck_assert_int_eq(spop_data_decode(guard_place("\x08\x05" "abcd", 6), 6,
					  &d), SPOP_NEED_MORE);
	ck_assert_int_eq(spop_data_decode(guard_place("\x09\xff\xff\xff\xff"
		"\xff\xff\xff\xff\xff\xff", 11), 11, &d), SPOP_EPROTO);
	ck_assert_int_eq(spop_data_decode(NULL, 0, &d), SPOP_NEED_MORE);
	ck_assert_int_eq(d.type, SPOP_DATA_BOOL); /* untouched */
	/* Encoding a type that does not exist writes nothing. */
	d.type = (enum spop_data_type)12;
	b[0] = 0xaa;
	ck_assert_int_eq(spop_data_encode(&d, b, sizeof(b)), SPOP_NEED_MORE);
	ck_assert_uint_eq(b[0], 0xaa);
}
END_TEST

START_TEST(str_eq_exact)
{
	struct spop_str v = { (const uint8_t *)"max-frame-size", 3 };

	ck_assert(spop_str_eq(v, "max"));
	ck_assert(!spop_str_eq(v, "max-frame-size"));
	v.len = 14;
	ck_assert(spop_str_eq(v, "max-frame-size"));
	ck_assert(!spop_str_eq(v, "max"));
	ck_assert(!spop_str_eq(v, "max-frame-sizeX"));
	v.ptr = NULL;
	v.len = 0;
	ck_assert(spop_str_eq(v, ""));
	ck_assert(!spop_str_eq(v, "a"));
}
END_TEST

/* ---- spop_data_read and spop_arg_read: the inline readers -------------- */

/* spop_data_equal, and a string or binary the same view: the readers
 * return views of their input. */
static bool data_same(const struct spop_data *a, const struct spop_data *b)
{
	return spop_data_equal(a, b) &&
	       ((a->type != SPOP_DATA_STRING && a->type != SPOP_DATA_BINARY) ||
		a->u.str.ptr == b->u.str.ptr);
}

/* spop_data_read and spop_data_decode on p[0..len): the same return, the
 * same value, and nothing written on failure. */
static void read_agrees(const uint8_t *p, size_t len)
{
	struct spop_data want, got;
	memset(&want, 0xa5, sizeof(want));
	memset(&got, 0xa5, sizeof(got));
	ptrdiff_t n = spop_data_decode(p, len, &want);
	ptrdiff_t m = spop_data_read(p, len, &got);
	ck_assert_msg(n == m, "len %zu type 0x%02x: %td vs %td", len,
		      len ? p[0] : 0, n, m);
	if (n > 0)
		ck_assert_msg(data_same(&want, &got), "len %zu type 0x%02x",
			      len, p[0]);
	else
		ck_assert_msg(memcmp(&want, &got, sizeof(got)) == 0,
			      "written on failure");
}

/* Every input of up to two bytes, every type byte before each value
 * HAProxy may send (varint boundaries, string lengths at 239/240, IPs),
 * cut at every length. */
START_TEST(data_read_agrees)
{
	uint8_t b[300] = { 0 };
	read_agrees(b, 0);
	for (unsigned x = 0; x < 256; x++) {
		b[0] = (uint8_t)x;
		read_agrees(b, 1);
		for (unsigned y = 0; y < 256; y++) {
			b[1] = (uint8_t)y;
			read_agrees(b, 2);
		}
	}
	static const uint64_t ints[] = {
		0, 1, 239, 240, 2287, 2288, 264431, 264432, INT32_MAX,
		(uint64_t)INT32_MAX + 1, UINT32_MAX, (uint64_t)UINT32_MAX + 1,
		INT64_MAX, (uint64_t)INT64_MAX + 1, (uint64_t)-5,
		(uint64_t)INT32_MIN, (uint64_t)INT32_MIN - 1, UINT64_MAX,
	};
	for (unsigned t = 0; t < 256; t++) {
		for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
			b[0] = (uint8_t)t;
			ptrdiff_t k = spop_varint_encode(ints[i], b + 1, 10);
			ck_assert_int_gt(k, 0);
			for (size_t len = 0; len <= (size_t)k + 2; len++)
				read_agrees(b, len);
		}
		/* A run that never ends, and one whose top bits overflow. */
		memset(b + 1, 0xff, 11);
		for (size_t len = 0; len <= 12; len++)
			read_agrees(b, len);
	}
	/* Integers of every varint length, every tenth byte after runs of
	 * the largest and the smallest continuation bytes, with room to
	 * spare or cut short. */
	static const uint8_t types[] = { SPOP_DATA_INT32, SPOP_DATA_UINT32,
					 SPOP_DATA_INT64, SPOP_DATA_UINT64 };
	for (size_t t = 0; t < sizeof(types); t++) {
		for (unsigned fill = 0; fill < 3; fill++) {
			static const uint8_t first[] = { 0xf0, 0xff, 0xf7 };
			static const uint8_t cont[] = { 0x80, 0xff, 0xc3 };
			for (size_t end = 1; end <= 10; end++) {
				for (unsigned last = 0; last < 256; last++) {
					b[0] = types[t];
					b[1] = first[fill];
					memset(b + 2, cont[fill], 10);
					b[1 + end] = (uint8_t)last;
					read_agrees(b, 13);
					read_agrees(b, 1 + end + 1);
					read_agrees(b, 1 + end);
				}
			}
		}
	}
	for (unsigned t = 0; t < 256; t++) {
		static const size_t lens[] = { 0, 1, 17, 239, 240, 241, 280 };
		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			b[0] = (uint8_t)t;
			ptrdiff_t k = spop_varint_encode(lens[i], b + 1, 10);
			memset(b + 1 + k, 'x', lens[i]);
			size_t whole = 1 + (size_t)k + lens[i];
			for (size_t len = 0; len <= whole + 1 && len <= sizeof(b);
			     len++)
				if (len + 3 >= whole || len < 4)
					read_agrees(b, len);
		}
	}
}
END_TEST

/* spop_arg_read and spop_arg_next: names of 0, 1, 15, 239 and 240 bytes
 * (a two-byte length) before values of every kind, cut at every length. */
START_TEST(arg_read_agrees)
{
	static const size_t names[] = { 0, 1, 15, 239, 240 };
	static const uint8_t values[][12] = {
		{ 1, 0x00 }, { 1, 0x11 }, { 1, 0x21 }, { 2, 0x04, 0x05 },
		{ 11, 0x04, 0xff, 0xf0, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0x0e },
		{ 3, 0x08, 0x01, 'a' }, { 2, 0x08, 0x05 }, { 5, 0x06, 10, 0, 0, 1 },
		{ 2, 0x02, 0xf0 }, { 1, 0x0c }, { 1, 0x07 }, { 3, 0x03, 0xf0, 0x00 },
	};
	uint8_t b[600] = { 0 };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		for (size_t j = 0; j < sizeof(values) / sizeof(values[0]); j++) {
			ptrdiff_t k = spop_varint_encode(names[i], b, 10);
			memset(b + k, 'n', names[i]);
			size_t at = (size_t)k + names[i];
			memcpy(b + at, values[j] + 1, values[j][0]);
			size_t whole = at + values[j][0];
			for (size_t len = 0; len <= whole; len++) {
				struct spop_reader r1, r2;
				struct spop_str n1 = { NULL, 7 }, n2 = { NULL, 7 };
				struct spop_data v1, v2;
				enum spop_status s1 = SPOP_ERR_NONE, s2 = SPOP_ERR_NONE;
				memset(&v1, 0x5a, sizeof(v1));
				memset(&v2, 0x5a, sizeof(v2));
				spop_reader_init(&r1, b, len);
				spop_reader_init(&r2, b, len);
				int a = spop_arg_next(&r1, &n1, &v1, &s1);
				int c = spop_arg_read(&r2, &n2, &v2, &s2);
				ck_assert_msg(a == c, "name %zu value %zu len %zu",
					      names[i], j, len);
				ck_assert(r1.p == r2.p);
				ck_assert_int_eq(s1, s2);
				ck_assert(n1.ptr == n2.ptr && n1.len == n2.len);
				if (a == 1)
					ck_assert(data_same(&v1, &v2));
				else
					ck_assert(memcmp(&v1, &v2, sizeof(v1)) == 0);
			}
		}
	}
}
END_TEST

static Suite *proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("varint");

	tcase_add_loop_test(tc, varint_table_encode, 0, (int)NVARINTS);
	tcase_add_loop_test(tc, varint_table_decode, 0, (int)NVARINTS);
	tcase_add_test(tc, varint_eleven_byte_run);
	tcase_add_test(tc, varint_overflow);
	tcase_add_test(tc, varint_roundtrip);
	tcase_add_test(tc, varint_size_classes);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("data");
	tcase_add_test(tc, data_golden);
	tcase_add_test(tc, data_equal_by_value);
	tcase_add_loop_test(tc, data_roundtrip_all_types, 0, 10);
	tcase_add_test(tc, data_bool_flags);
	tcase_add_test(tc, data_integers);
	tcase_add_test(tc, data_invalid);
	tcase_add_test(tc, str_eq_exact);
	tcase_add_test(tc, data_read_agrees);
	tcase_add_test(tc, arg_read_agrees);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(proto_suite());
}
