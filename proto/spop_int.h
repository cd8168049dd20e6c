/* spop_int.h - helpers shared by the codec's files; not part of the API. */
#ifndef WARMLANE_SPOP_INT_H
#define WARMLANE_SPOP_INT_H

#include <stddef.h>
#include <stdint.h>

#include "spop.h"

/* Bytes taken by a STRING body (varint length + bytes). Saturates at
 * SIZE_MAX so a size sum built from it cannot wrap. */
static inline size_t spop__str_size(size_t len)
{
	size_t v = (size_t)spop_varint_size(len);

	return len > SIZE_MAX - v ? SIZE_MAX : v + len;
}

/* Adds two sizes, saturating at SIZE_MAX (never fits any buffer). */
static inline size_t spop__size_add(size_t a, size_t b)
{
	return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* Reads a STRING body (varint length + bytes) at [*pp, end). Moves *pp and
 * sets *s only on success. Returns 0, SPOP_NEED_MORE or SPOP_EPROTO. */
int spop__get_str_long(const uint8_t **pp, const uint8_t *end,
		       struct spop_str *s);

/* Inline for the usual one-byte length (every name and most values); the
 * rest in spop__get_str_long. */
static inline int spop__get_str(const uint8_t **pp, const uint8_t *end,
				struct spop_str *s)
{
	const uint8_t *p = *pp;
	if (p == end || *p >= 240)
		return spop__get_str_long(pp, end, s);
	size_t n = *p++;
	if (n > (size_t)(end - p))
		return SPOP_NEED_MORE;
	s->ptr = p;
	s->len = n;
	*pp = p + n;
	return 0;
}

/* Writes v's varint at p, which has room for SPOP_VARINT_MAX_LEN bytes
 * (the caller checked); returns the byte after it. */
static inline uint8_t *spop__varint_put(uint8_t *p, uint64_t v)
{
	if (v < 240) {
		*p = (uint8_t)v;
		return p + 1;
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

/* Bytes spop_data_encode writes for d (SIZE_MAX for an unknown type). */
size_t spop__data_size(const struct spop_data *d);

#endif
