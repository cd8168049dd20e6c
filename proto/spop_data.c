/* spop_data.c - SPOP varints and typed data (SPOE.txt 3.1). */
#include <string.h>

#include "spop.h"
#include "spop_int.h"

int spop_varint_size(uint64_t v)
{
	int n = 1;

	if (v < 240)
		return 1;
	v = (v - 240) >> 4;
	n++;
	while (v >= 128) {
		v = (v - 128) >> 7;
		n++;
	}
	return n;
}

ptrdiff_t spop_varint_encode(uint64_t v, uint8_t *out, size_t cap)
{
	if (cap < SPOP_VARINT_MAX_LEN && (size_t)spop_varint_size(v) > cap)
		return SPOP_NEED_MORE;
	return spop__varint_put(out, v) - out;
}

/* The first byte carries up to 8 bits, each continuation byte 7 more at
 * shift 4, 11, ..., 60: a tenth byte must end the run, an eleventh would
 * start at shift 67. Overflow is checked on every add so that a 10-byte run
 * whose top bits do not fit in 64 is rejected instead of wrapping. */
ptrdiff_t spop_varint_decode(const uint8_t *p, size_t len, uint64_t *v)
{
	uint64_t r, add;
	unsigned shift = 4;
	size_t i = 1;

	if (len == 0)
		return SPOP_NEED_MORE;
	r = p[0];
	if (r < 240) {
		*v = r;
		return 1;
	}
	/* Bounded: at shift 60 (the tenth byte) the run must end. */
	for (;;) {
		uint64_t b;

		if (i >= len)
			return SPOP_NEED_MORE;
		b = p[i++];
		if (shift == 60 && (b >> 4) != 0)
			return SPOP_EPROTO; /* bits above 63, or a continuation */
		add = b << shift;
		if (add > UINT64_MAX - r)
			return SPOP_EPROTO;
		r += add;
		if (b < 128)
			break;
		shift += 7;
	}
	*v = r;
	return (ptrdiff_t)i;
}

int spop__get_str_long(const uint8_t **pp, const uint8_t *end,
		       struct spop_str *s)
{
	const uint8_t *p = *pp;
	uint64_t n;
	ptrdiff_t r;

	r = spop_varint_decode(p, (size_t)(end - p), &n);
	if (r < 0)
		return (int)r;
	p += r;
	if (n > (size_t)(end - p))
		return SPOP_NEED_MORE;
	s->ptr = p;
	s->len = (size_t)n;
	*pp = p + n;
	return 0;
}

/* Two's complement without relying on the implementation-defined
 * unsigned-to-signed conversion. */
static int64_t u64_to_i64(uint64_t u)
{
	if (u <= (uint64_t)INT64_MAX)
		return (int64_t)u;
	return -(int64_t)(~u) - 1;
}

ptrdiff_t spop_data_decode(const uint8_t *p, size_t len, struct spop_data *d)
{
	const uint8_t *q = p, *end = p + len;
	struct spop_data out;
	uint64_t u = 0;
	ptrdiff_t r;
	int rc;

	if (len == 0)
		return SPOP_NEED_MORE;
	/* Flags in the high nibble other than BOOL's value are ignored, as
	 * HAProxy ignores them. */
	memset(&out, 0, sizeof(out));
	out.type = (enum spop_data_type)(*q & 0x0F);
	q++;
	switch (out.type) {
	case SPOP_DATA_NULL:
		break;
	case SPOP_DATA_BOOL:
		out.u.b = (p[0] & 0x10) != 0;
		break;
	case SPOP_DATA_INT32:
	case SPOP_DATA_UINT32:
	case SPOP_DATA_INT64:
	case SPOP_DATA_UINT64:
		r = spop_varint_decode(q, (size_t)(end - q), &u);
		if (r < 0)
			return r;
		q += r;
		if (out.type == SPOP_DATA_INT32) {
			/* Signed values are the raw 64-bit two's complement
			 * (HAProxy's INT64 convention), so -5 is sign-extended. */
			int64_t s = u64_to_i64(u);

			if (s < INT32_MIN || s > INT32_MAX)
				return SPOP_EPROTO;
			out.u.i32 = (int32_t)s;
		} else if (out.type == SPOP_DATA_UINT32) {
			if (u > UINT32_MAX)
				return SPOP_EPROTO;
			out.u.u32 = (uint32_t)u;
		} else if (out.type == SPOP_DATA_INT64) {
			out.u.i64 = u64_to_i64(u);
		} else {
			out.u.u64 = u;
		}
		break;
	case SPOP_DATA_IPV4:
		if (4 > (size_t)(end - q))
			return SPOP_NEED_MORE;
		memcpy(out.u.ipv4, q, 4);
		q += 4;
		break;
	case SPOP_DATA_IPV6:
		if (16 > (size_t)(end - q))
			return SPOP_NEED_MORE;
		memcpy(out.u.ipv6, q, 16);
		q += 16;
		break;
	case SPOP_DATA_STRING:
	case SPOP_DATA_BINARY:
		rc = spop__get_str(&q, end, &out.u.str);
		if (rc < 0)
			return rc;
		break;
	default:
		return SPOP_EPROTO;
	}
	*d = out;
	return q - p;
}

/* The varint HAProxy reads for an integer value of d. */
static uint64_t data_int_bits(const struct spop_data *d)
{
	switch (d->type) {
	case SPOP_DATA_INT32:
		return (uint64_t)(int64_t)d->u.i32;
	case SPOP_DATA_UINT32:
		return d->u.u32;
	case SPOP_DATA_INT64:
		return (uint64_t)d->u.i64;
	default:
		return d->u.u64;
	}
}

size_t spop__data_size(const struct spop_data *d)
{
	switch (d->type) {
	case SPOP_DATA_NULL:
	case SPOP_DATA_BOOL:
		return 1;
	case SPOP_DATA_INT32:
	case SPOP_DATA_UINT32:
	case SPOP_DATA_INT64:
	case SPOP_DATA_UINT64:
		return 1 + (size_t)spop_varint_size(data_int_bits(d));
	case SPOP_DATA_IPV4:
		return 1 + 4;
	case SPOP_DATA_IPV6:
		return 1 + 16;
	case SPOP_DATA_STRING:
	case SPOP_DATA_BINARY:
		return spop__size_add(1, spop__str_size(d->u.str.len));
	}
	return SIZE_MAX;
}

ptrdiff_t spop_data_encode(const struct spop_data *d, uint8_t *out, size_t cap)
{
	size_t need = spop__data_size(d);
	uint8_t *p = out;

	if (need > cap || need > (size_t)PTRDIFF_MAX)
		return SPOP_NEED_MORE;
	*p++ = (uint8_t)d->type;
	switch (d->type) {
	case SPOP_DATA_NULL:
		break;
	case SPOP_DATA_BOOL:
		if (d->u.b)
			out[0] |= 0x10;
		break;
	case SPOP_DATA_INT32:
	case SPOP_DATA_UINT32:
	case SPOP_DATA_INT64:
	case SPOP_DATA_UINT64:
		p += spop_varint_encode(data_int_bits(d), p, SPOP_VARINT_MAX_LEN);
		break;
	case SPOP_DATA_IPV4:
		memcpy(p, d->u.ipv4, 4);
		p += 4;
		break;
	case SPOP_DATA_IPV6:
		memcpy(p, d->u.ipv6, 16);
		p += 16;
		break;
	case SPOP_DATA_STRING:
	case SPOP_DATA_BINARY:
		p += spop_varint_encode(d->u.str.len, p, SPOP_VARINT_MAX_LEN);
		if (d->u.str.len)
			memcpy(p, d->u.str.ptr, d->u.str.len);
		p += d->u.str.len;
		break;
	}
	return p - out;
}

struct spop_data spop_data_null(void)
{
	struct spop_data d;

	memset(&d, 0, sizeof(d));
	d.type = SPOP_DATA_NULL;
	return d;
}

struct spop_data spop_data_bool(bool b)
{
	struct spop_data d = spop_data_null();

	d.type = SPOP_DATA_BOOL;
	d.u.b = b;
	return d;
}

struct spop_data spop_data_int64(int64_t v)
{
	struct spop_data d = spop_data_null();

	d.type = SPOP_DATA_INT64;
	d.u.i64 = v;
	return d;
}

struct spop_data spop_data_uint32(uint32_t v)
{
	struct spop_data d = spop_data_null();

	d.type = SPOP_DATA_UINT32;
	d.u.u32 = v;
	return d;
}

struct spop_data spop_data_string(const char *s, size_t len)
{
	struct spop_data d = spop_data_null();

	d.type = SPOP_DATA_STRING;
	d.u.str.ptr = (const uint8_t *)s;
	d.u.str.len = len;
	return d;
}

struct spop_data spop_data_binary(const void *p, size_t len)
{
	struct spop_data d = spop_data_null();

	d.type = SPOP_DATA_BINARY;
	d.u.str.ptr = p;
	d.u.str.len = len;
	return d;
}

bool spop_str_eq(struct spop_str v, const char *s)
{
	size_t n = strlen(s);

	if (v.len != n)
		return false;
	return n == 0 || memcmp(v.ptr, s, n) == 0;
}

bool spop_data_equal(const struct spop_data *a, const struct spop_data *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case SPOP_DATA_NULL:
		return true;
	case SPOP_DATA_BOOL:
		return a->u.b == b->u.b;
	case SPOP_DATA_INT32:
		return a->u.i32 == b->u.i32;
	case SPOP_DATA_UINT32:
		return a->u.u32 == b->u.u32;
	case SPOP_DATA_INT64:
		return a->u.i64 == b->u.i64;
	case SPOP_DATA_UINT64:
		return a->u.u64 == b->u.u64;
	case SPOP_DATA_IPV4:
		return memcmp(a->u.ipv4, b->u.ipv4, 4) == 0;
	case SPOP_DATA_IPV6:
		return memcmp(a->u.ipv6, b->u.ipv6, 16) == 0;
	case SPOP_DATA_STRING:
	case SPOP_DATA_BINARY:
		return a->u.str.len == b->u.str.len &&
		       (a->u.str.len == 0 ||
			memcmp(a->u.str.ptr, b->u.str.ptr, a->u.str.len) == 0);
	}
	return false;
}
