/* spop_hello.c - HELLO and DISCONNECT payloads, status texts, type names. */
#include <string.h>

#include "spop.h"
#include "spop_int.h"

static bool is_space(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
	       c == '\r';
}

bool spop_list_has(struct spop_str list, const char *token)
{
	const uint8_t *p, *end;

	if (list.len == 0)
		return false;
	p = list.ptr;
	end = p + list.len;
	while (p <= end) {
		const uint8_t *tok = p, *tend;
		struct spop_str t;

		while (p < end && *p != ',')
			p++;
		tend = p;
		while (tok < tend && is_space(*tok))
			tok++;
		while (tend > tok && is_space(tend[-1]))
			tend--;
		t.ptr = tok;
		t.len = (size_t)(tend - tok);
		if (spop_str_eq(t, token))
			return true;
		if (p == end)
			break;
		p++; /* the comma */
	}
	return false;
}

/* max-frame-size is a UINT32 on the wire; HAProxy itself accepts any integer
 * type there, so do the same as long as the value fits. */
static bool get_u32(const struct spop_data *d, uint32_t *out)
{
	switch (d->type) {
	case SPOP_DATA_INT32:
		if (d->u.i32 < 0)
			return false;
		*out = (uint32_t)d->u.i32;
		return true;
	case SPOP_DATA_UINT32:
		*out = d->u.u32;
		return true;
	case SPOP_DATA_INT64:
		if (d->u.i64 < 0 || d->u.i64 > (int64_t)UINT32_MAX)
			return false;
		*out = (uint32_t)d->u.i64;
		return true;
	case SPOP_DATA_UINT64:
		if (d->u.u64 > UINT32_MAX)
			return false;
		*out = (uint32_t)d->u.u64;
		return true;
	default:
		return false;
	}
}

static const uint8_t empty[1];

int spop_hello_parse(const uint8_t *p, size_t len, struct spop_hello *h,
		     enum spop_status *status)
{
	struct spop_reader r;
	struct spop_hello out;
	struct spop_str key;
	struct spop_data val;
	int rc;

	memset(&out, 0, sizeof(out));
	out.engine_id.ptr = empty;
	spop_reader_init(&r, p, len);
	while ((rc = spop_kv_next(&r, &key, &val, status)) == 1) {
		if (spop_str_eq(key, "supported-versions")) {
			if (val.type != SPOP_DATA_STRING)
				goto invalid;
			out.has_versions = true;
			out.versions = val.u.str;
		} else if (spop_str_eq(key, "max-frame-size")) {
			if (!get_u32(&val, &out.max_frame_size))
				goto invalid;
			out.has_max_frame_size = true;
		} else if (spop_str_eq(key, "capabilities")) {
			if (val.type != SPOP_DATA_STRING)
				goto invalid;
			out.has_capabilities = true;
			out.capabilities = val.u.str;
		} else if (spop_str_eq(key, "healthcheck")) {
			if (val.type != SPOP_DATA_BOOL)
				goto invalid;
			out.healthcheck = val.u.b;
		} else if (spop_str_eq(key, "engine-id")) {
			if (val.type != SPOP_DATA_STRING)
				goto invalid;
			out.engine_id = val.u.str;
		}
	}
	if (rc < 0)
		return SPOP_EPROTO;
	if (!out.has_versions) {
		*status = SPOP_ERR_NO_VSN;
		return SPOP_EPROTO;
	}
	if (!out.has_max_frame_size) {
		*status = SPOP_ERR_NO_FRAME_SIZE;
		return SPOP_EPROTO;
	}
	if (!out.has_capabilities) {
		*status = SPOP_ERR_NO_CAP;
		return SPOP_EPROTO;
	}
	out.cap_pipelining = spop_list_has(out.capabilities, "pipelining");
	out.cap_async = spop_list_has(out.capabilities, "async");
	out.cap_fragmentation = spop_list_has(out.capabilities,
					      "fragmentation");
	*h = out;
	return 0;
invalid:
	*status = SPOP_ERR_INVALID;
	return SPOP_EPROTO;
}

int spop_hello_negotiate(const struct spop_hello *h, uint32_t our_max,
			 uint32_t *max_out, enum spop_status *status)
{
	uint32_t m;

	if (!h->has_versions) {
		*status = SPOP_ERR_NO_VSN;
		return SPOP_EPROTO;
	}
	if (!h->has_max_frame_size) {
		*status = SPOP_ERR_NO_FRAME_SIZE;
		return SPOP_EPROTO;
	}
	if (!h->has_capabilities) {
		*status = SPOP_ERR_NO_CAP;
		return SPOP_EPROTO;
	}
	if (!spop_list_has(h->versions, SPOP_VERSION)) {
		*status = SPOP_ERR_BAD_VSN;
		return SPOP_EPROTO;
	}
	m = our_max < h->max_frame_size ? our_max : h->max_frame_size;
	if (m < SPOP_MIN_FRAME_SIZE) {
		*status = SPOP_ERR_BAD_FRAME_SIZE;
		return SPOP_EPROTO;
	}
	*max_out = m;
	return 0;
}

/* Size of a frame header with both ids 0, as HELLO and DISCONNECT have. */
#define CONN_FRAME_HDR (4 + 1 + 4 + 1 + 1)

static size_t kv_size(const char *key, const struct spop_data *d)
{
	return spop__size_add(spop__str_size(strlen(key)), spop__data_size(d));
}

ptrdiff_t spop_agent_hello_encode(uint8_t *out, size_t cap,
				  uint32_t max_frame_size, bool pipelining)
{
	const char *caps = pipelining ? "pipelining" : "";
	struct spop_data vsn = spop_data_string(SPOP_VERSION,
						sizeof(SPOP_VERSION) - 1);
	struct spop_data mfs = spop_data_uint32(max_frame_size);
	struct spop_data cap_d = spop_data_string(caps, strlen(caps));
	struct spop_writer w;
	size_t need = CONN_FRAME_HDR + kv_size("version", &vsn) +
		      kv_size("max-frame-size", &mfs) +
		      kv_size("capabilities", &cap_d);

	/* Measured first so that nothing is written when it does not fit. */
	if (need > cap)
		return SPOP_NEED_MORE;
	spop_frame_begin(&w, out, cap, SPOP_FRAME_AGENT_HELLO, SPOP_FLAG_FIN,
			 0, 0);
	spop_put_kv(&w, "version", &vsn);
	spop_put_kv(&w, "max-frame-size", &mfs);
	spop_put_kv(&w, "capabilities", &cap_d);
	return spop_frame_finish(&w);
}

ptrdiff_t spop_disconnect_encode(uint8_t *out, size_t cap,
				 enum spop_status status, const char *message)
{
	const char *msg = message ? message : spop_status_text(status);
	struct spop_data code = spop_data_uint32((uint32_t)status);
	struct spop_data text = spop_data_string(msg, strlen(msg));
	struct spop_writer w;
	size_t need = spop__size_add(CONN_FRAME_HDR +
				     kv_size("status-code", &code),
				     kv_size("message", &text));

	if (need > cap)
		return SPOP_NEED_MORE;
	spop_frame_begin(&w, out, cap, SPOP_FRAME_AGENT_DISCONNECT,
			 SPOP_FLAG_FIN, 0, 0);
	spop_put_kv(&w, "status-code", &code);
	spop_put_kv(&w, "message", &text);
	return spop_frame_finish(&w);
}

int spop_disconnect_parse(const uint8_t *p, size_t len, uint32_t *code,
			  struct spop_str *message, enum spop_status *status)
{
	struct spop_reader r;
	struct spop_str key, msg = { empty, 0 };
	struct spop_data val;
	uint32_t c = SPOP_ERR_UNKNOWN;
	int rc;

	spop_reader_init(&r, p, len);
	while ((rc = spop_kv_next(&r, &key, &val, status)) == 1) {
		if (spop_str_eq(key, "status-code")) {
			if (!get_u32(&val, &c))
				goto invalid;
		} else if (spop_str_eq(key, "message")) {
			if (val.type != SPOP_DATA_STRING)
				goto invalid;
			msg = val.u.str;
		}
	}
	if (rc < 0)
		return SPOP_EPROTO;
	*code = c;
	*message = msg;
	return 0;
invalid:
	*status = SPOP_ERR_INVALID;
	return SPOP_EPROTO;
}

const char *spop_status_text(enum spop_status status)
{
	switch (status) {
	case SPOP_ERR_NONE:
		return "normal";
	case SPOP_ERR_IO:
		return "I/O error";
	case SPOP_ERR_TIMEOUT:
		return "a timeout occurred";
	case SPOP_ERR_TOO_BIG:
		return "frame is too big";
	case SPOP_ERR_INVALID:
		return "invalid frame received";
	case SPOP_ERR_NO_VSN:
		return "version value not found";
	case SPOP_ERR_NO_FRAME_SIZE:
		return "max-frame-size value not found";
	case SPOP_ERR_NO_CAP:
		return "capabilities value not found";
	case SPOP_ERR_BAD_VSN:
		return "unsupported version";
	case SPOP_ERR_BAD_FRAME_SIZE:
		return "max-frame-size too big or too small";
	case SPOP_ERR_FRAG_NOT_SUPPORTED:
		return "fragmentation not supported";
	case SPOP_ERR_INTERLACED_FRAMES:
		return "invalid interlaced frames";
	case SPOP_ERR_FRAMEID_NOTFOUND:
		return "frame-id not found";
	case SPOP_ERR_RES:
		return "resource allocation error";
	case SPOP_ERR_UNKNOWN:
		break;
	}
	return "an unknown error occurred";
}

const char *spop_frame_type_name(unsigned type)
{
	switch (type) {
	case SPOP_FRAME_UNSET:
		return "UNSET";
	case SPOP_FRAME_HAPROXY_HELLO:
		return "HAPROXY-HELLO";
	case SPOP_FRAME_HAPROXY_DISCONNECT:
		return "HAPROXY-DISCONNECT";
	case SPOP_FRAME_NOTIFY:
		return "NOTIFY";
	case SPOP_FRAME_AGENT_HELLO:
		return "AGENT-HELLO";
	case SPOP_FRAME_AGENT_DISCONNECT:
		return "AGENT-DISCONNECT";
	case SPOP_FRAME_ACK:
		return "ACK";
	}
	return "UNKNOWN";
}
