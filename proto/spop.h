/* spop.h - SPOP 2.0 codec (HAProxy's Stream Processing Offload Protocol).
 *
 * No I/O, no allocation, no globals. Decoders take (pointer, length) and
 * return views into the caller's buffer; encoders write into a caller buffer.
 * Section numbers refer to HAProxy's doc/SPOE.txt (2.6).
 *
 * Return convention for functions returning ptrdiff_t: bytes consumed or
 * written (> 0), SPOP_NEED_MORE when the input ends before the item does (or
 * the output buffer is too small), SPOP_EPROTO when the input is invalid; in
 * the last case the DISCONNECT status to send is stored through `status`
 * where the function takes one. Cursors and outputs are only written on
 * success.
 */
#ifndef WARMLANE_SPOP_H
#define WARMLANE_SPOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SPOP_NEED_MORE (-2)
#define SPOP_EPROTO    (-1)

#define SPOP_VERSION            "2.0"
#define SPOP_MIN_FRAME_SIZE     256u
#define SPOP_DEFAULT_FRAME_SIZE 16380u /* tune.bufsize (16384) - 4 */
#define SPOP_VARINT_MAX_LEN     10
#define SPOP_FRAME_HEADER_MIN   11     /* length, type, flags, two 1-byte ids */

/* Frame types (SPOE.txt 3.2.4). */
enum spop_frame_type {
	SPOP_FRAME_UNSET              = 0,  /* fragment continuation */
	SPOP_FRAME_HAPROXY_HELLO      = 1,
	SPOP_FRAME_HAPROXY_DISCONNECT = 2,
	SPOP_FRAME_NOTIFY             = 3,
	SPOP_FRAME_AGENT_HELLO        = 101,
	SPOP_FRAME_AGENT_DISCONNECT   = 102,
	SPOP_FRAME_ACK                = 103,
};

/* Frame flags (SPOE.txt 3.2.4), a 32-bit big-endian field on the wire. */
#define SPOP_FLAG_FIN   0x00000001u
#define SPOP_FLAG_ABORT 0x00000002u

/* DISCONNECT status codes (SPOE.txt 3.2.9). */
enum spop_status {
	SPOP_ERR_NONE                = 0,
	SPOP_ERR_IO                  = 1,
	SPOP_ERR_TIMEOUT             = 2,
	SPOP_ERR_TOO_BIG             = 3,
	SPOP_ERR_INVALID             = 4,
	SPOP_ERR_NO_VSN              = 5,
	SPOP_ERR_NO_FRAME_SIZE       = 6,
	SPOP_ERR_NO_CAP              = 7,
	SPOP_ERR_BAD_VSN             = 8,
	SPOP_ERR_BAD_FRAME_SIZE      = 9,
	SPOP_ERR_FRAG_NOT_SUPPORTED  = 10,
	SPOP_ERR_INTERLACED_FRAMES   = 11,
	SPOP_ERR_FRAMEID_NOTFOUND    = 12,
	SPOP_ERR_RES                 = 13,
	SPOP_ERR_UNKNOWN             = 99,
};

/* Typed data types (SPOE.txt 3.1.2): the low 4 bits of the type byte. */
enum spop_data_type {
	SPOP_DATA_NULL   = 0,
	SPOP_DATA_BOOL   = 1,
	SPOP_DATA_INT32  = 2,
	SPOP_DATA_UINT32 = 3,
	SPOP_DATA_INT64  = 4,
	SPOP_DATA_UINT64 = 5,
	SPOP_DATA_IPV4   = 6,
	SPOP_DATA_IPV6   = 7,
	SPOP_DATA_STRING = 8,
	SPOP_DATA_BINARY = 9,
};

/* Variable scopes of set-var/unset-var actions (SPOE.txt 3.4). */
enum spop_scope {
	SPOP_SCOPE_PROC = 0,
	SPOP_SCOPE_SESS = 1,
	SPOP_SCOPE_TXN  = 2,
	SPOP_SCOPE_REQ  = 3,
	SPOP_SCOPE_RES  = 4,
};

/* Action types in an ACK (SPOE.txt 3.4). */
enum spop_action {
	SPOP_ACT_SET_VAR   = 1,
	SPOP_ACT_UNSET_VAR = 2,
};

/* A view into a buffer the caller owns. Not NUL-terminated. */
struct spop_str {
	const uint8_t *ptr;
	size_t len;
};

struct spop_data {
	enum spop_data_type type;
	union {
		bool b;
		int32_t i32;
		uint32_t u32;
		int64_t i64;
		uint64_t u64;
		uint8_t ipv4[4];
		uint8_t ipv6[16];
		struct spop_str str; /* STRING and BINARY */
	} u;
};

/* One decoded frame; payload is a view into the decoder's input. */
struct spop_frame {
	enum spop_frame_type type;
	uint32_t flags;
	uint64_t stream_id;
	uint64_t frame_id;
	const uint8_t *payload;
	size_t payload_len;
};

/* HAPROXY-HELLO contents (SPOE.txt 3.2.5). Views point into the payload. */
struct spop_hello {
	bool has_versions, has_max_frame_size, has_capabilities;
	struct spop_str versions;      /* comma list, e.g. "2.0" */
	uint32_t max_frame_size;
	struct spop_str capabilities;  /* comma list */
	bool cap_pipelining, cap_async, cap_fragmentation;
	bool healthcheck;
	struct spop_str engine_id;     /* empty when absent */
};

/* A read cursor over a payload: messages of a NOTIFY, or a KV-list. */
struct spop_reader {
	const uint8_t *p;
	const uint8_t *end;
};

/* An append-only writer into a caller buffer. Once an append does not fit,
 * `overflow` stays set and every later append is a no-op, so a builder can
 * check once at the end. */
struct spop_writer {
	uint8_t *buf;
	size_t cap;
	size_t len;
	size_t frame_start; /* offset of the frame being built */
	bool overflow;
};

/* ---- varints ("peers" encoding, SPOE.txt 3.1.1) ---- */

/* Encodes v into out (at most SPOP_VARINT_MAX_LEN bytes). Accepts every
 * uint64_t. Returns the bytes written, or SPOP_NEED_MORE when cap is too
 * small (nothing is written). */
ptrdiff_t spop_varint_encode(uint64_t v, uint8_t *out, size_t cap);

/* Decodes one varint from p[0..len). Returns bytes consumed (1..10) with *v
 * set, SPOP_NEED_MORE when len ends inside it (len 0 included), SPOP_EPROTO
 * for a run longer than SPOP_VARINT_MAX_LEN bytes (known as soon as the
 * tenth byte has its continuation bit) or a value that overflows 64 bits.
 * *v is written only on success. */
ptrdiff_t spop_varint_decode(const uint8_t *p, size_t len, uint64_t *v);

/* The number of bytes spop_varint_encode writes for v (1..10). */
int spop_varint_size(uint64_t v);

/* ---- typed data ---- */

/* Decodes one typed value from p[0..len). Returns bytes consumed with *d
 * set, SPOP_NEED_MORE when len ends inside it, SPOP_EPROTO for an unknown
 * type (10-15), a bad varint, or an integer that does not fit its declared
 * width. Integers are HAProxy's raw two's complement: INT32 must be a
 * sign-extended value in [INT32_MIN, INT32_MAX] (-5 is 10 bytes, like
 * INT64), UINT32 at most UINT32_MAX. BOOL's value is bit 4 of the type byte
 * (0x11 true, 0x01 false); other flag bits are ignored, as HAProxy does.
 * STRING/BINARY are views into p. *d is written only on success. */
ptrdiff_t spop_data_decode(const uint8_t *p, size_t len, struct spop_data *d);

/* Encodes one typed value into out[0..cap). Signed values are written as
 * sign-extended 64-bit two's complement, BOOL as 0x11/0x01. Returns bytes
 * written, or SPOP_NEED_MORE when cap is too small or d->type is not a
 * valid type (nothing is written then). */
ptrdiff_t spop_data_encode(const struct spop_data *d, uint8_t *out, size_t cap);

/* Convenience constructors for spop_data; string and binary are views of
 * the caller's bytes. */
struct spop_data spop_data_null(void);
struct spop_data spop_data_bool(bool b);
struct spop_data spop_data_int64(int64_t v);
struct spop_data spop_data_uint32(uint32_t v);
struct spop_data spop_data_string(const char *s, size_t len);
struct spop_data spop_data_binary(const void *p, size_t len);

/* Whether a and b hold the same value: the same type and the member that
 * type uses equal, strings and binaries byte for byte (views of different
 * bytes with the same content are equal). */
bool spop_data_equal(const struct spop_data *a, const struct spop_data *b);

/* ---- frames ---- */

/* Decodes one frame from the front of buf. max_frame_size bounds the length
 * field (which excludes itself); it is checked as soon as the 4 length bytes
 * are present, before waiting for the body. Rejects (SPOP_EPROTO, status):
 * length 0 or a header that does not fit in length (4), length above
 * max_frame_size (3), an unknown type (4), a fragment: FIN clear or type
 * UNSET (10). Returns 4 + length on success, with *f set and f->payload
 * pointing into buf; SPOP_NEED_MORE while fewer than 4 + length bytes are
 * present. The ABORT and reserved flag bits are passed through in f->flags;
 * stream and frame ids are not checked against the type (HELLO and
 * DISCONNECT should carry 0, 0: the caller decides). *f is written only on
 * success, *status only on SPOP_EPROTO. */
ptrdiff_t spop_frame_decode(const uint8_t *buf, size_t len,
			    uint32_t max_frame_size, struct spop_frame *f,
			    enum spop_status *status);

/* Initialises w over buf[0..cap) (the caller owns buf), empty. A NULL buf
 * makes every append overflow. */
void spop_writer_init(struct spop_writer *w, uint8_t *buf, size_t cap);

/* Starts a frame at the current end of w (several frames may be built one
 * after the other in one buffer): reserves the length, writes type, flags
 * (big-endian) and the two ids as varints. */
void spop_frame_start(struct spop_writer *w, enum spop_frame_type type,
		      uint32_t flags, uint64_t stream_id, uint64_t frame_id);

/* Starts a frame in w: spop_writer_init(w, buf, cap), then spop_frame_start:
 * reserves the length, writes type, flags, ids. */
void spop_frame_begin(struct spop_writer *w, uint8_t *buf, size_t cap,
		      enum spop_frame_type type, uint32_t flags,
		      uint64_t stream_id, uint64_t frame_id);

/* Fills in the length of the frame begun in w. Returns the frame's total
 * size (including the length field) or SPOP_NEED_MORE on overflow (or when
 * the length would not fit 32 bits). It does not know the negotiated
 * max-frame-size: the caller compares the size with it. */
ptrdiff_t spop_frame_finish(struct spop_writer *w);

/* Appends raw bytes / a varint / a STRING body (varint length + bytes) /
 * a typed value / a KV pair (name as STRING body, then typed value; key is
 * NUL-terminated). Each append is all or nothing: when it does not fit, w
 * is left as it was and w->overflow is set. */
void spop_put_bytes(struct spop_writer *w, const void *p, size_t len);
void spop_put_varint(struct spop_writer *w, uint64_t v);
void spop_put_str(struct spop_writer *w, const char *s, size_t len);
void spop_put_data(struct spop_writer *w, const struct spop_data *d);
void spop_put_kv(struct spop_writer *w, const char *key,
		 const struct spop_data *d);

/* ---- payload readers ---- */

/* Points r at the payload p[0..len) (a view: the caller keeps p alive).
 * Inline: a reader set up in another unit and copied whole right after
 * (a NOTIFY's rest, conn.c's frames) is read back across two stores the
 * store buffer cannot forward to one load. */
static inline void spop_reader_init(struct spop_reader *r, const uint8_t *p,
				    size_t len)
{
	r->p = p;
	r->end = len ? p + len : p; /* NULL + 0 is undefined */
}

/* KV-list entry (HELLO, DISCONNECT). Returns 1 with key/value set, 0 at the
 * end of the payload, SPOP_EPROTO (status 4) on a malformed entry (an entry
 * cut by the end of the payload included). The reader advances only when
 * 1 is returned. */
int spop_kv_next(struct spop_reader *r, struct spop_str *key,
		 struct spop_data *val, enum spop_status *status);

/* NOTIFY message header: name (a STRING body) and the 1-byte argument
 * count. Returns 1, 0 at the end of the payload, or SPOP_EPROTO (status 4)
 * when the name or count is cut. The caller then reads exactly nargs
 * arguments with spop_arg_next (or skips them with spop_msg_skip_args). */
int spop_msg_next(struct spop_reader *r, struct spop_str *name,
		  unsigned *nargs, enum spop_status *status);

/* One NOTIFY argument: name (may be empty) and typed value (NULL for a
 * missing sample). Returns 1 or SPOP_EPROTO (status 4), also when the
 * payload ends where an argument was announced. */
int spop_arg_next(struct spop_reader *r, struct spop_str *name,
		  struct spop_data *val, enum spop_status *status);

/* spop_varint_decode inline, for the 10-byte varints of HAProxy's hashes
 * (a prefix key, the caller): with the whole run's 10 bytes in p, no
 * bounds test per byte, and the overflow tests only at the tenth byte (9
 * bytes, shifts 4 to 53, stay below 2^63). Shorter input goes to
 * spop_varint_decode. Same results (proto-data data_read_agrees). */
static inline ptrdiff_t spop__varint_read(const uint8_t *p, size_t len,
					  uint64_t *v)
{
	uint64_t r, b;
	unsigned shift = 4;

	if (len < SPOP_VARINT_MAX_LEN)
		return spop_varint_decode(p, len, v);
	r = p[0];
	if (r < 240) {
		*v = r;
		return 1;
	}
	for (size_t i = 1; i < SPOP_VARINT_MAX_LEN - 1; i++, shift += 7) {
		b = p[i];
		r += b << shift;
		if (b < 128) {
			*v = r;
			return (ptrdiff_t)i + 1;
		}
	}
	/* The tenth byte, at shift 60: it must end the run, and its bits
	 * fit in 64 with the rest. */
	b = p[SPOP_VARINT_MAX_LEN - 1];
	if ((b >> 4) != 0 || (b << 60) > UINT64_MAX - r)
		return SPOP_EPROTO;
	*v = r + (b << 60);
	return SPOP_VARINT_MAX_LEN;
}

/* spop_data_decode inline for the values HAProxy sends with every request
 * (the agent reads 24 per decision with its feedback): NULL, BOOL, a
 * STRING or BINARY of one length byte, INT64, UINT64, an INT32 or UINT32
 * of one varint byte, an IPV4. Anything else (other types, flag bits, a
 * longer length, a cut value) goes to spop_data_decode, which decides
 * alone. Same contract and results (fuzz_notify checks they agree). */
static inline ptrdiff_t spop_data_read(const uint8_t *p, size_t len,
				       struct spop_data *d)
{
	struct spop_data v;
	uint64_t u;
	ptrdiff_t k;
	uint8_t t, b;

	/* Each case stores its fields into d and nothing else: a value built
	 * whole in a local and copied out is written in pieces and read back
	 * in 16-byte loads, which the store buffer cannot forward (a stall of
	 * about 15 cycles an argument, half of the parse at 24 a decision). */
	if (len == 0)
		goto slow;
	t = p[0];
	switch (t) {
	case SPOP_DATA_NULL:
		d->type = SPOP_DATA_NULL;
		return 1;
	case SPOP_DATA_BOOL:
	case SPOP_DATA_BOOL | 0x10:
		d->type = SPOP_DATA_BOOL;
		d->u.b = t != SPOP_DATA_BOOL;
		return 1;
	case SPOP_DATA_STRING:
	case SPOP_DATA_BINARY:
		b = len < 2 ? 0xff : p[1];
		if (b >= 240 || (size_t)b > len - 2)
			goto slow;
		d->type = (enum spop_data_type)t;
		d->u.str.ptr = p + 2;
		d->u.str.len = b;
		return 2 + b;
	case SPOP_DATA_INT32:
	case SPOP_DATA_UINT32:
		/* One varint byte: below 240, in the range of both. */
		b = len < 2 ? 0xff : p[1];
		if (b >= 240)
			goto slow;
		d->type = (enum spop_data_type)t;
		if (t == SPOP_DATA_INT32)
			d->u.i32 = b;
		else
			d->u.u32 = b;
		return 2;
	case SPOP_DATA_INT64:
	case SPOP_DATA_UINT64:
		k = spop__varint_read(p + 1, len - 1, &u);
		if (k < 0)
			goto slow;
		d->type = (enum spop_data_type)t;
		/* Two's complement without the implementation-defined
		 * conversion, as spop_data_decode. */
		if (t == SPOP_DATA_UINT64)
			d->u.u64 = u;
		else
			d->u.i64 = u <= (uint64_t)INT64_MAX ? (int64_t)u
							    : -(int64_t)(~u) - 1;
		return k + 1;
	case SPOP_DATA_IPV4:
		if (len < 5)
			goto slow;
		d->type = SPOP_DATA_IPV4;
		memcpy(d->u.ipv4, p + 1, 4);
		return 5;
	default:
		goto slow;
	}
slow:
	k = spop_data_decode(p, len, &v);
	if (k > 0)
		*d = v;
	return k;
}

/* spop_arg_next inline: a name of one length byte and a value for
 * spop_data_read here, a longer name in spop_arg_next. Same results, same
 * errors, written only on success (fuzz_notify checks they agree). */
static inline int spop_arg_read(struct spop_reader *r, struct spop_str *name,
				struct spop_data *val,
				enum spop_status *status)
{
	const uint8_t *p = r->p, *end = r->end;
	struct spop_str nm;
	struct spop_data v;
	ptrdiff_t k;
	size_t n;

	/* The name, then at least the type byte. */
	if (p == end || *p >= 240 || (size_t)*p >= (size_t)(end - p - 1)) {
		k = spop_arg_next(r, &nm, &v, status);
		if (k == 1) {
			*name = nm;
			*val = v;
		}
		return (int)k;
	}
	n = p[0];
	nm.ptr = p + 1;
	nm.len = n;
	p += 1 + n;
	k = spop_data_read(p, (size_t)(end - p), &v);
	if (k < 0) {
		*status = SPOP_ERR_INVALID;
		return SPOP_EPROTO;
	}
	r->p = p + k;
	*name = nm;
	*val = v;
	return 1;
}

/* Skips nargs arguments. Returns 0, or SPOP_EPROTO (status 4) with r
 * unchanged when one of them is malformed or missing. */
int spop_msg_skip_args(struct spop_reader *r, unsigned nargs,
		       enum spop_status *status);

/* True when the comma-separated list contains token exactly, after
 * trimming white space around each element ("pipelining" matches
 * " pipelining ,async", never "pipeliningX"). */
bool spop_list_has(struct spop_str list, const char *token);

/* True when the view equals the NUL-terminated s exactly: lengths first,
 * so "max" never matches "max-frame-size". */
bool spop_str_eq(struct spop_str v, const char *s);

/* Whether a[0..len) equals s[0..len). For the short names compared per
 * frame (message and argument names): two overlapping loads of 8 or 4
 * bytes from each side cover 4 to 16 bytes whatever the length, inside
 * both strings, where memcmp is a call and a loop. */
static inline bool spop_bytes_eq(const uint8_t *a, const char *s, size_t len)
{
	uint64_t x0, x1, y0, y1;
	uint32_t u0, u1, v0, v1;
	if (len > 16)
		return memcmp(a, s, len) == 0;
	if (len >= 8) {
		memcpy(&x0, a, 8);
		memcpy(&y0, s, 8);
		memcpy(&x1, a + len - 8, 8);
		memcpy(&y1, s + len - 8, 8);
		return ((x0 ^ y0) | (x1 ^ y1)) == 0;
	}
	if (len >= 4) {
		memcpy(&u0, a, 4);
		memcpy(&v0, s, 4);
		memcpy(&u1, a + len - 4, 4);
		memcpy(&v1, s + len - 4, 4);
		return ((u0 ^ v0) | (u1 ^ v1)) == 0;
	}
	for (size_t i = 0; i < len; i++)
		if (a[i] != (uint8_t)s[i])
			return false;
	return true;
}

/* The same against s[0..len) (not NUL-terminated); SPOP_STR_EQ_LIT takes
 * a literal's length from sizeof, for the compares made per frame. */
static inline bool spop_str_eqn(struct spop_str v, const char *s, size_t len)
{
	return v.len == len && spop_bytes_eq(v.ptr, s, len);
}
#define SPOP_STR_EQ_LIT(v, lit) spop_str_eqn((v), "" lit, sizeof(lit) - 1)

/* ---- HELLO ---- */

/* Parses a HAPROXY-HELLO payload. Unknown keys are skipped; keys match
 * exactly; when a key repeats, the last one wins. Missing
 * supported-versions, max-frame-size or capabilities are SPOP_EPROTO with
 * status 5, 6 or 7 (checked in that order); a malformed KV-list or a key
 * with the wrong type is 4 (supported-versions, capabilities, engine-id
 * STRING; healthcheck BOOL; max-frame-size any integer type whose value is
 * in 0..UINT32_MAX, as HAProxy accepts). The cap_* flags are set from exact
 * tokens of capabilities. Returns 0 with *h set (views into p), or
 * SPOP_EPROTO; *h is written only on success. */
int spop_hello_parse(const uint8_t *p, size_t len, struct spop_hello *h,
		     enum spop_status *status);

/* Negotiates the agent's answer: version "2.0" must be an exact element of
 * supported-versions (else 8; "2.0, 1.5" is fine, "2.00" or "2.1" are not);
 * max-frame-size becomes min(ours, HAProxy's) and must be >=
 * SPOP_MIN_FRAME_SIZE (else 9). A hello lacking a mandatory key gives 5, 6
 * or 7 as spop_hello_parse does. Returns 0 with *max_out set, or
 * SPOP_EPROTO. */
int spop_hello_negotiate(const struct spop_hello *h, uint32_t our_max,
			 uint32_t *max_out, enum spop_status *status);

/* Encodes an AGENT-HELLO frame (FIN, ids 0, 0): version "2.0",
 * max-frame-size (UINT32), and capabilities "pipelining" (or "" when
 * pipelining is false). Returns the frame size or SPOP_NEED_MORE (nothing
 * written) when cap is too small. */
ptrdiff_t spop_agent_hello_encode(uint8_t *out, size_t cap,
				  uint32_t max_frame_size, bool pipelining);

/* ---- ACK ---- */

/* Begins an ACK frame (FIN) echoing stream_id and frame_id in buf. Never
 * finish an ACK without an action: HAProxy 3.1 hangs the stream on it. */
void spop_ack_begin(struct spop_writer *w, uint8_t *buf, size_t cap,
		    uint64_t stream_id, uint64_t frame_id);

/* Appends a set-var action: 01 03 <scope> <name> <value>; the name is a
 * STRING body (HAProxy prefixes it). All or nothing, like spop_put_*. */
void spop_ack_set_var(struct spop_writer *w, enum spop_scope scope,
		      const char *name, size_t name_len,
		      const struct spop_data *value);

/* The same for a STRING value v[0..len), without a spop_data: the bytes
 * spop_ack_set_var writes, in one pass when both lengths are under 240
 * (one varint byte each). All or nothing. */
void spop_ack_set_var_str(struct spop_writer *w, enum spop_scope scope,
			  const char *name, size_t name_len, const char *v,
			  size_t len);

/* Appends an unset-var action: 02 02 <scope> <name>. All or nothing. */
void spop_ack_unset_var(struct spop_writer *w, enum spop_scope scope,
			const char *name, size_t name_len);

/* Finishes the ACK; same as spop_frame_finish. */
ptrdiff_t spop_ack_finish(struct spop_writer *w);

/* Reads one action of an ACK payload (for tests and tools: HAProxy is the
 * one that parses ACKs). Accepts set-var with exactly 3 arguments and
 * unset-var with exactly 2, scope 0..4; *value is NULL for unset-var.
 * Returns 1, 0 at the end of the payload, or SPOP_EPROTO (status 4) for
 * anything else. */
int spop_action_next(struct spop_reader *r, enum spop_action *action,
		     enum spop_scope *scope, struct spop_str *name,
		     struct spop_data *value, enum spop_status *status);

/* ---- DISCONNECT ---- */

/* Encodes an AGENT-DISCONNECT (FIN, ids 0, 0) with status-code (UINT32)
 * and message (STRING; the standard text of the status when message is
 * NULL, else NUL-terminated). Returns the frame size, or SPOP_NEED_MORE
 * (nothing written) when cap is too small. */
ptrdiff_t spop_disconnect_encode(uint8_t *out, size_t cap,
				 enum spop_status status, const char *message);

/* Parses a DISCONNECT payload. status-code defaults to SPOP_ERR_UNKNOWN and
 * message to empty when absent; unknown keys are skipped. Rejects a
 * malformed KV-list, a status-code that is not an integer in
 * 0..UINT32_MAX, a message that is not a STRING. Returns 0 (outputs set,
 * message a view into p) or SPOP_EPROTO (status 4, outputs untouched). */
int spop_disconnect_parse(const uint8_t *p, size_t len, uint32_t *code,
			  struct spop_str *message, enum spop_status *status);

/* The standard text of a status code ("frame is too big", ...); "an unknown
 * error occurred" for codes outside the table. A static string. */
const char *spop_status_text(enum spop_status status);

/* The frame type's name for logs ("NOTIFY", "HAPROXY-HELLO", ...), or
 * "UNKNOWN". A static string. */
const char *spop_frame_type_name(unsigned type);

#endif
