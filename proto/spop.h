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

/* Encodes v into out (at most SPOP_VARINT_MAX_LEN bytes). Returns the bytes
 * written, or SPOP_NEED_MORE when cap is too small (nothing is written). */
ptrdiff_t spop_varint_encode(uint64_t v, uint8_t *out, size_t cap);

/* Decodes one varint. Returns bytes consumed, SPOP_NEED_MORE when len ends
 * inside it, SPOP_EPROTO for a run longer than SPOP_VARINT_MAX_LEN bytes or a
 * value that overflows 64 bits. */
ptrdiff_t spop_varint_decode(const uint8_t *p, size_t len, uint64_t *v);

/* ---- typed data ---- */

/* Decodes one typed value. Returns bytes consumed, SPOP_NEED_MORE when len
 * ends inside it, SPOP_EPROTO for an unknown type, a bad varint, or an
 * integer that does not fit its declared width. STRING/BINARY are views. */
ptrdiff_t spop_data_decode(const uint8_t *p, size_t len, struct spop_data *d);

/* Encodes one typed value. Returns bytes written or SPOP_NEED_MORE. */
ptrdiff_t spop_data_encode(const struct spop_data *d, uint8_t *out, size_t cap);

/* Convenience constructors for spop_data. */
struct spop_data spop_data_null(void);
struct spop_data spop_data_bool(bool b);
struct spop_data spop_data_int64(int64_t v);
struct spop_data spop_data_uint32(uint32_t v);
struct spop_data spop_data_string(const char *s, size_t len);

/* ---- frames ---- */

/* Decodes one frame from the front of buf. max_frame_size bounds the length
 * field (which excludes itself); it is checked as soon as the 4 length bytes
 * are present, before waiting for the body. Rejects (SPOP_EPROTO, status):
 * length 0 or a header that does not fit in length (4), length above
 * max_frame_size (3), an unknown type (4), a fragment: FIN clear or type
 * UNSET (10). Returns 4 + length on success. */
ptrdiff_t spop_frame_decode(const uint8_t *buf, size_t len,
			    uint32_t max_frame_size, struct spop_frame *f,
			    enum spop_status *status);

/* Starts a frame in w: reserves the length, writes type, flags, ids. */
void spop_frame_begin(struct spop_writer *w, uint8_t *buf, size_t cap,
		      enum spop_frame_type type, uint32_t flags,
		      uint64_t stream_id, uint64_t frame_id);

/* Fills in the length of the frame begun in w. Returns the frame's total
 * size (including the length field) or SPOP_NEED_MORE on overflow. */
ptrdiff_t spop_frame_finish(struct spop_writer *w);

/* Appends raw bytes / a varint / a STRING body (varint length + bytes) /
 * a typed value / a KV pair (name as STRING body, then typed value). */
void spop_put_bytes(struct spop_writer *w, const void *p, size_t len);
void spop_put_varint(struct spop_writer *w, uint64_t v);
void spop_put_str(struct spop_writer *w, const char *s, size_t len);
void spop_put_data(struct spop_writer *w, const struct spop_data *d);
void spop_put_kv(struct spop_writer *w, const char *key,
		 const struct spop_data *d);

/* ---- payload readers ---- */

void spop_reader_init(struct spop_reader *r, const uint8_t *p, size_t len);

/* KV-list entry (HELLO, DISCONNECT). Returns 1 with key/value set, 0 at the
 * end of the payload, SPOP_EPROTO (status 4) on a malformed entry. */
int spop_kv_next(struct spop_reader *r, struct spop_str *key,
		 struct spop_data *val, enum spop_status *status);

/* NOTIFY message header: name and argument count. Returns 1, 0 at the end of
 * the payload, or SPOP_EPROTO (status 4). The caller then reads exactly
 * nargs arguments with spop_arg_next. */
int spop_msg_next(struct spop_reader *r, struct spop_str *name,
		  unsigned *nargs, enum spop_status *status);

/* One NOTIFY argument: name (may be empty) and typed value. Returns 1 or
 * SPOP_EPROTO (status 4). */
int spop_arg_next(struct spop_reader *r, struct spop_str *name,
		  struct spop_data *val, enum spop_status *status);

/* True when the view equals the NUL-terminated s exactly (never a prefix). */
bool spop_str_eq(struct spop_str v, const char *s);

/* ---- HELLO ---- */

/* Parses a HAPROXY-HELLO payload. Unknown keys are skipped; keys match
 * exactly. Missing supported-versions, max-frame-size or capabilities are
 * SPOP_EPROTO with status 5, 6 or 7; a key with the wrong type is 4.
 * Returns 0 or SPOP_EPROTO. */
int spop_hello_parse(const uint8_t *p, size_t len, struct spop_hello *h,
		     enum spop_status *status);

/* Negotiates the agent's answer: version "2.0" must be among
 * supported-versions (else 8); max-frame-size becomes min(ours, HAProxy's)
 * and must be >= SPOP_MIN_FRAME_SIZE (else 9). Returns 0 with *max_out set,
 * or SPOP_EPROTO. */
int spop_hello_negotiate(const struct spop_hello *h, uint32_t our_max,
			 uint32_t *max_out, enum spop_status *status);

/* Encodes an AGENT-HELLO frame: version "2.0", max-frame-size, and
 * capabilities "pipelining" (or "" when pipelining is false). Returns the
 * frame size or SPOP_NEED_MORE. */
ptrdiff_t spop_agent_hello_encode(uint8_t *out, size_t cap,
				  uint32_t max_frame_size, bool pipelining);

/* ---- ACK ---- */

/* Begins an ACK frame echoing stream_id and frame_id. */
void spop_ack_begin(struct spop_writer *w, uint8_t *buf, size_t cap,
		    uint64_t stream_id, uint64_t frame_id);

/* Appends a set-var action: 01 03 <scope> <name> <value>. */
void spop_ack_set_var(struct spop_writer *w, enum spop_scope scope,
		      const char *name, size_t name_len,
		      const struct spop_data *value);

/* Appends an unset-var action: 02 02 <scope> <name>. */
void spop_ack_unset_var(struct spop_writer *w, enum spop_scope scope,
			const char *name, size_t name_len);

/* Finishes the ACK; same as spop_frame_finish. */
ptrdiff_t spop_ack_finish(struct spop_writer *w);

/* ---- DISCONNECT ---- */

/* Encodes an AGENT-DISCONNECT with status-code and message (the standard
 * text of the status when message is NULL). Returns size or NEED_MORE. */
ptrdiff_t spop_disconnect_encode(uint8_t *out, size_t cap,
				 enum spop_status status, const char *message);

/* Parses a DISCONNECT payload. status-code defaults to SPOP_ERR_UNKNOWN and
 * message to empty when absent. Returns 0 or SPOP_EPROTO (status 4). */
int spop_disconnect_parse(const uint8_t *p, size_t len, uint32_t *code,
			  struct spop_str *message, enum spop_status *status);

/* The standard text of a status code ("frame is too big", ...). */
const char *spop_status_text(enum spop_status status);

/* The frame type's name for logs ("NOTIFY", "HAPROXY-HELLO", ...). */
const char *spop_frame_type_name(unsigned type);

#endif
