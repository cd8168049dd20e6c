/* spop_frame.c - SPOP frames, the frame writer, payload readers, ACKs. */
#include <string.h>

#include "spop.h"
#include "spop_int.h"

static bool known_type(unsigned t)
{
	switch (t) {
	case SPOP_FRAME_UNSET:
	case SPOP_FRAME_HAPROXY_HELLO:
	case SPOP_FRAME_HAPROXY_DISCONNECT:
	case SPOP_FRAME_NOTIFY:
	case SPOP_FRAME_AGENT_HELLO:
	case SPOP_FRAME_AGENT_DISCONNECT:
	case SPOP_FRAME_ACK:
		return true;
	}
	return false;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

ptrdiff_t spop_frame_decode(const uint8_t *buf, size_t len,
			    uint32_t max_frame_size, struct spop_frame *f,
			    enum spop_status *status)
{
	const uint8_t *p, *end;
	enum spop_frame_type type;
	uint32_t flags, flen;
	uint64_t stream_id, frame_id;
	ptrdiff_t r;

	if (len < 4)
		return SPOP_NEED_MORE;
	flen = get_be32(buf);
	/* Judge the length before waiting for a body it may announce wrongly:
	 * a garbage length must not make the caller buffer gigabytes. */
	if (flen > max_frame_size) {
		*status = SPOP_ERR_TOO_BIG;
		return SPOP_EPROTO;
	}
	if (flen == 0) {
		*status = SPOP_ERR_INVALID;
		return SPOP_EPROTO;
	}
	if (flen > len - 4)
		return SPOP_NEED_MORE;

	p = buf + 4;
	end = p + flen;
	/* From here on the frame is complete: anything that runs past its end
	 * is invalid, not incomplete. */
	if (5 > (size_t)(end - p)) {
		*status = SPOP_ERR_INVALID;
		return SPOP_EPROTO;
	}
	type = (enum spop_frame_type)p[0];
	flags = get_be32(p + 1);
	p += 5;
	r = spop_varint_decode(p, (size_t)(end - p), &stream_id);
	if (r < 0) {
		*status = SPOP_ERR_INVALID;
		return SPOP_EPROTO;
	}
	p += r;
	r = spop_varint_decode(p, (size_t)(end - p), &frame_id);
	if (r < 0) {
		*status = SPOP_ERR_INVALID;
		return SPOP_EPROTO;
	}
	p += r;
	if (!known_type(type)) {
		*status = SPOP_ERR_INVALID;
		return SPOP_EPROTO;
	}
	if (type == SPOP_FRAME_UNSET || !(flags & SPOP_FLAG_FIN)) {
		*status = SPOP_ERR_FRAG_NOT_SUPPORTED;
		return SPOP_EPROTO;
	}
	/* Field by field: a frame built whole on the stack and copied out is
	 * read back in 16-byte loads across its 4-byte stores, which the
	 * store buffer cannot forward (a stall a frame). */
	f->type = type;
	f->flags = flags;
	f->stream_id = stream_id;
	f->frame_id = frame_id;
	f->payload = p;
	f->payload_len = (size_t)(end - p);
	return (ptrdiff_t)flen + 4;
}

/* ---- writer ---- */

void spop_writer_init(struct spop_writer *w, uint8_t *buf, size_t cap)
{
	w->buf = buf;
	w->cap = buf ? cap : 0;
	w->len = 0;
	w->frame_start = 0;
	w->overflow = false;
}

/* True when n more bytes fit; sets overflow otherwise. */
static bool room(struct spop_writer *w, size_t n)
{
	if (w->overflow)
		return false;
	if (w->len > w->cap || n > w->cap - w->len) {
		w->overflow = true;
		return false;
	}
	return true;
}

void spop_put_bytes(struct spop_writer *w, const void *p, size_t len)
{
	if (!room(w, len))
		return;
	if (len)
		memcpy(w->buf + w->len, p, len);
	w->len += len;
}

void spop_put_varint(struct spop_writer *w, uint64_t v)
{
	uint8_t tmp[SPOP_VARINT_MAX_LEN];
	ptrdiff_t n = spop_varint_encode(v, tmp, sizeof(tmp));

	spop_put_bytes(w, tmp, (size_t)n);
}

void spop_put_str(struct spop_writer *w, const char *s, size_t len)
{
	if (!room(w, spop__str_size(len)))
		return;
	spop_put_varint(w, len);
	spop_put_bytes(w, s, len);
}

void spop_put_data(struct spop_writer *w, const struct spop_data *d)
{
	ptrdiff_t n;

	if (!room(w, spop__data_size(d)))
		return;
	n = spop_data_encode(d, w->buf + w->len, w->cap - w->len);
	if (n < 0) {
		w->overflow = true;
		return;
	}
	w->len += (size_t)n;
}

void spop_put_kv(struct spop_writer *w, const char *key,
		 const struct spop_data *d)
{
	size_t klen = strlen(key);

	if (!room(w, spop__size_add(spop__str_size(klen), spop__data_size(d))))
		return;
	spop_put_str(w, key, klen);
	spop_put_data(w, d);
}

/* Lays a frame header at p (room for SPOP_FRAME_HDR_MAX bytes): the length
 * zeroed (spop_frame_finish fills it in), type, flags, the two ids.
 * Returns the byte after it. */
#define SPOP_FRAME_HDR_MAX (4 + 1 + 4 + 2 * SPOP_VARINT_MAX_LEN)
static uint8_t *frame_hdr_put(uint8_t *p, enum spop_frame_type type,
			      uint32_t flags, uint64_t stream_id,
			      uint64_t frame_id)
{
	memset(p, 0, 4);
	p[4] = (uint8_t)type;
	put_be32(p + 5, flags);
	p = spop__varint_put(p + 9, stream_id);
	return spop__varint_put(p, frame_id);
}

void spop_frame_start(struct spop_writer *w, enum spop_frame_type type,
		      uint32_t flags, uint64_t stream_id, uint64_t frame_id)
{
	if (!w->overflow)
		w->frame_start = w->len;
	/* In place when the longest header fits (every ACK: one per
	 * NOTIFY); else laid aside and appended all or nothing, so that a
	 * header which fits only at its exact size still does. */
	if (!w->overflow && w->len <= w->cap &&
	    w->cap - w->len >= SPOP_FRAME_HDR_MAX) {
		uint8_t *p = w->buf + w->len;
		w->len += (size_t)(frame_hdr_put(p, type, flags, stream_id,
						 frame_id) - p);
		return;
	}
	uint8_t hdr[SPOP_FRAME_HDR_MAX];
	spop_put_bytes(w, hdr, (size_t)(frame_hdr_put(hdr, type, flags,
							stream_id, frame_id) - hdr));
}

void spop_frame_begin(struct spop_writer *w, uint8_t *buf, size_t cap,
		      enum spop_frame_type type, uint32_t flags,
		      uint64_t stream_id, uint64_t frame_id)
{
	spop_writer_init(w, buf, cap);
	spop_frame_start(w, type, flags, stream_id, frame_id);
}

ptrdiff_t spop_frame_finish(struct spop_writer *w)
{
	size_t total;

	if (w->overflow || w->len < w->frame_start + 4)
		return SPOP_NEED_MORE;
	total = w->len - w->frame_start;
	if (total - 4 > UINT32_MAX || total > (size_t)PTRDIFF_MAX) {
		w->overflow = true;
		return SPOP_NEED_MORE;
	}
	put_be32(w->buf + w->frame_start, (uint32_t)(total - 4));
	return (ptrdiff_t)total;
}

/* ---- readers ---- */

int spop_kv_next(struct spop_reader *r, struct spop_str *key,
		 struct spop_data *val, enum spop_status *status)
{
	const uint8_t *p = r->p;
	struct spop_str k;
	struct spop_data v;
	ptrdiff_t n;

	if (p == r->end)
		return 0;
	if (spop__get_str(&p, r->end, &k) < 0)
		goto invalid;
	/* Inline the values of a NOTIFY as HAProxy sends them (NULL, a
	 * STRING with a one-byte length); spop_data_decode for the rest,
	 * which it decides alone (type nibble, flags, truncation). */
	if (p != r->end && *p == SPOP_DATA_NULL) {
		memset(&v, 0, sizeof(v));
		n = 1;
	} else if (r->end - p >= 2 && *p == SPOP_DATA_STRING && p[1] < 240 &&
		   (size_t)p[1] <= (size_t)(r->end - p - 2)) {
		memset(&v, 0, sizeof(v));
		v.type = SPOP_DATA_STRING;
		v.u.str.ptr = p + 2;
		v.u.str.len = p[1];
		n = 2 + p[1];
	} else {
		n = spop_data_decode(p, (size_t)(r->end - p), &v);
		if (n < 0)
			goto invalid;
	}
	r->p = p + n;
	*key = k;
	*val = v;
	return 1;
invalid:
	*status = SPOP_ERR_INVALID;
	return SPOP_EPROTO;
}

int spop_msg_next(struct spop_reader *r, struct spop_str *name,
		  unsigned *nargs, enum spop_status *status)
{
	const uint8_t *p = r->p, *end = r->end;
	struct spop_str nm;

	if (p == end)
		return 0;
	/* A name of one length byte in registers; a name read through a
	 * local and copied out whole is read back in one 16-byte load across
	 * the two 8-byte stores, which the store buffer cannot forward. */
	if (*p < 240 && (size_t)*p < (size_t)(end - p - 1)) {
		size_t n = *p;
		name->ptr = p + 1;
		name->len = n;
		p += 1 + n;
		*nargs = *p++;
		r->p = p;
		return 1;
	}
	if (spop__get_str(&p, end, &nm) < 0 || p == end) {
		*status = SPOP_ERR_INVALID;
		return SPOP_EPROTO;
	}
	*nargs = *p++;
	r->p = p;
	*name = nm;
	return 1;
}

int spop_arg_next(struct spop_reader *r, struct spop_str *name,
		  struct spop_data *val, enum spop_status *status)
{
	/* Same layout as a KV entry, but the end of the payload is an error
	 * here: the message announced one more argument. */
	if (r->p == r->end) {
		*status = SPOP_ERR_INVALID;
		return SPOP_EPROTO;
	}
	return spop_kv_next(r, name, val, status);
}

int spop_msg_skip_args(struct spop_reader *r, unsigned nargs,
		       enum spop_status *status)
{
	struct spop_reader t = *r;
	struct spop_str name;
	struct spop_data val;
	unsigned i;

	for (i = 0; i < nargs; i++)
		if (spop_arg_next(&t, &name, &val, status) < 0)
			return SPOP_EPROTO;
	*r = t;
	return 0;
}

/* ---- ACK ---- */

void spop_ack_begin(struct spop_writer *w, uint8_t *buf, size_t cap,
		    uint64_t stream_id, uint64_t frame_id)
{
	spop_frame_begin(w, buf, cap, SPOP_FRAME_ACK, SPOP_FLAG_FIN,
			 stream_id, frame_id);
}

void spop_ack_set_var(struct spop_writer *w, enum spop_scope scope,
		      const char *name, size_t name_len,
		      const struct spop_data *value)
{
	const uint8_t hdr[3] = { SPOP_ACT_SET_VAR, 3, (uint8_t)scope };

	if (!room(w, spop__size_add(3 + spop__str_size(name_len),
				    spop__data_size(value))))
		return;
	spop_put_bytes(w, hdr, sizeof(hdr));
	spop_put_str(w, name, name_len);
	spop_put_data(w, value);
}

void spop_ack_set_var_str(struct spop_writer *w, enum spop_scope scope,
			  const char *name, size_t name_len, const char *v,
			  size_t len)
{
	/* The usual case, both lengths one varint byte, in one pass. */
	if (name_len < 240 && len < 240) {
		size_t n = 3 + 1 + name_len + 1 + 1 + len;
		if (!room(w, n))
			return;
		uint8_t *p = w->buf + w->len;
		*p++ = SPOP_ACT_SET_VAR;
		*p++ = 3;
		*p++ = (uint8_t)scope;
		*p++ = (uint8_t)name_len;
		memcpy(p, name, name_len);
		p += name_len;
		*p++ = SPOP_DATA_STRING;
		*p++ = (uint8_t)len;
		if (len)
			memcpy(p, v, len);
		w->len += n;
		return;
	}
	struct spop_data d = spop_data_string(v, len);
	spop_ack_set_var(w, scope, name, name_len, &d);
}

void spop_ack_unset_var(struct spop_writer *w, enum spop_scope scope,
			const char *name, size_t name_len)
{
	const uint8_t hdr[3] = { SPOP_ACT_UNSET_VAR, 2, (uint8_t)scope };

	if (!room(w, spop__size_add(3, spop__str_size(name_len))))
		return;
	spop_put_bytes(w, hdr, sizeof(hdr));
	spop_put_str(w, name, name_len);
}

ptrdiff_t spop_ack_finish(struct spop_writer *w)
{
	return spop_frame_finish(w);
}

int spop_action_next(struct spop_reader *r, enum spop_action *action,
		     enum spop_scope *scope, struct spop_str *name,
		     struct spop_data *value, enum spop_status *status)
{
	const uint8_t *p = r->p, *end = r->end;
	struct spop_data v = spop_data_null();
	struct spop_str nm;
	uint8_t act, nb, sc;
	ptrdiff_t n;

	if (p == end)
		return 0;
	if (3 > (size_t)(end - p))
		goto invalid;
	act = p[0];
	nb = p[1];
	sc = p[2];
	p += 3;
	if (sc > SPOP_SCOPE_RES)
		goto invalid;
	if (act == SPOP_ACT_SET_VAR && nb == 3) {
		if (spop__get_str(&p, end, &nm) < 0)
			goto invalid;
		n = spop_data_decode(p, (size_t)(end - p), &v);
		if (n < 0)
			goto invalid;
		p += n;
	} else if (act == SPOP_ACT_UNSET_VAR && nb == 2) {
		if (spop__get_str(&p, end, &nm) < 0)
			goto invalid;
	} else {
		goto invalid;
	}
	r->p = p;
	*action = (enum spop_action)act;
	*scope = (enum spop_scope)sc;
	*name = nm;
	*value = v;
	return 1;
invalid:
	*status = SPOP_ERR_INVALID;
	return SPOP_EPROTO;
}
